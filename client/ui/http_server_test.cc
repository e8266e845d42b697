// DashboardServer on a real loopback socket, read by an HTTP client: the
// routes reach the Dashboard, and a sweep's events stream as SSE until the
// sweep ends, the page goes away or the server stops. The Backend is a fake
// (the browser test in tests/ui runs the real coordinator).
#include "client/ui/http_server.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace ranksweep::client::ui {
namespace {

using namespace std::chrono_literals;

v1::SweepEvent Event(v1::SweepState state, int done, const std::string& message) {
  v1::SweepEvent e;
  e.mutable_sweep()->set_sweep_id("s1");
  e.mutable_sweep()->set_state(state);
  e.mutable_sweep()->mutable_counts()->set_total(2);
  e.mutable_sweep()->mutable_counts()->set_done(done);
  e.set_message(message);
  return e;
}

// Hands out `events`, then ends (OK) or, with `block`, waits for Cancel().
class FakeStream : public EventStream {
 public:
  FakeStream(std::vector<v1::SweepEvent> events, bool block, std::atomic<int>* cancels)
      : events_(std::move(events)), block_(block), cancels_(cancels) {}
  bool Next(v1::SweepEvent* event) override {
    if (next_ < events_.size()) {
      *event = events_[next_++];
      return true;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !block_ || cancelled_; });
    return false;
  }
  void Cancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    ++*cancels_;
    cv_.notify_all();
  }
  absl::Status Finish() override {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_ ? absl::CancelledError("cancelled") : absl::OkStatus();
  }

 private:
  std::vector<v1::SweepEvent> events_;
  size_t next_ = 0;
  bool block_;
  std::atomic<int>* cancels_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
};

class StreamBackend : public Backend {
 public:
  absl::StatusOr<std::vector<v1::ManagedSweep>> ListSweeps(
      const v1::ListManagedSweepsRequest&) override {
    return std::vector<v1::ManagedSweep>(1);
  }
  absl::StatusOr<v1::ManagedSweep> GetSweep(const std::string& id) override {
    return absl::NotFoundError("no sweep " + id);
  }
  absl::StatusOr<std::vector<v1::ResultRow>> QueryRows(const v1::QueryResultsRequest&) override {
    return std::vector<v1::ResultRow>();
  }
  absl::StatusOr<v1::QueryResultsResponse> QueryGroups(const std::string&) override {
    return v1::QueryResultsResponse();
  }
  absl::StatusOr<std::vector<v1::WorkerInfo>> ListWorkers() override {
    return std::vector<v1::WorkerInfo>();
  }
  std::unique_ptr<EventStream> WatchSweep(const std::string&) override {
    ++watches;
    return std::make_unique<FakeStream>(events, block, &cancels);
  }
  absl::StatusOr<v1::ManagedSweep> UpdateSweep(const v1::UpdateSweepRequest& r) override {
    updates.push_back(r);
    v1::ManagedSweep out;
    out.mutable_sweep()->set_sweep_id(r.sweep_id());
    out.set_note(r.note());
    return out;
  }
  absl::StatusOr<v1::DeleteSweepResponse> DeleteSweep(const v1::DeleteSweepRequest&) override {
    return absl::FailedPreconditionError("not here");
  }
  absl::StatusOr<int64_t> RetrySweep(const v1::RetrySweepRequest&) override { return 0; }
  absl::StatusOr<int64_t> CancelSweep(const std::string&) override { return 0; }

  std::vector<v1::SweepEvent> events;
  bool block = false;
  std::atomic<int> watches{0};
  std::atomic<int> cancels{0};
  std::vector<v1::UpdateSweepRequest> updates;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void Start() {
    server_ = std::make_unique<DashboardServer>(&backend_, ListenAddress{"127.0.0.1", 0}, false,
                                                "k3y", 100ms);
    absl::StatusOr<int> port = server_->Bind();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    serving_ = std::thread([this] { served_ = server_->Serve(); });
  }
  void TearDown() override {
    if (serving_.joinable()) {
      server_->Stop();
      serving_.join();
    }
  }
  template <typename F>
  static bool Eventually(F f) {
    for (auto deadline = std::chrono::steady_clock::now() + 10s;
         std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(10ms)) {
      if (f()) return true;
    }
    return false;
  }

  StreamBackend backend_;
  std::unique_ptr<DashboardServer> server_;
  int port_ = 0;
  std::thread serving_;
  std::atomic<bool> served_{false};
};

TEST_F(HttpServerTest, ServesTheDashboard) {
  Start();
  httplib::Client client("127.0.0.1", port_);
  auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  auto sweeps = client.Get("/api/sweeps");
  ASSERT_TRUE(sweeps);
  EXPECT_EQ(sweeps->status, 200);
  EXPECT_EQ(nlohmann::json::parse(sweeps->body).size(), 1u);
  auto missing = client.Get("/api/sweeps/zz");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(nlohmann::json::parse(missing->body)["error"], "no sweep zz");
  auto post = client.Post("/api/sweeps", "", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  // A name that resolves to 127.0.0.1 but is not ours (DNS rebinding).
  auto foreign = client.Get("/api/sweeps", {{"Host", "evil.example:" + std::to_string(port_)}});
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 403);
}

TEST_F(HttpServerTest, StreamsEventsUntilTheSweepEnds) {
  backend_.events = {Event(v1::SWEEP_STATE_RUNNING, 1, "cell a done"),
                     Event(v1::SWEEP_STATE_DONE, 2, "cell b done")};
  Start();
  httplib::Client client("127.0.0.1", port_);
  auto events = client.Get("/api/sweeps/s1/events");
  ASSERT_TRUE(events);
  EXPECT_EQ(events->status, 200);
  EXPECT_EQ(events->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(events->body, "retry: 3000\n\n" + ProgressEventText(backend_.events[0]) +
                              ProgressEventText(backend_.events[1]) +
                              EndEventText(backend_.events[1].sweep(), absl::OkStatus()));
  EXPECT_EQ(backend_.cancels, 0);
}

TEST_F(HttpServerTest, AClosedPageCancelsItsWatch) {
  backend_.events = {Event(v1::SWEEP_STATE_RUNNING, 0, "")};
  backend_.block = true;
  Start();
  httplib::Client client("127.0.0.1", port_);
  std::string received;
  // The client hangs up once the first event is in.
  auto result = client.Get("/api/sweeps/s1/events", [&](const char* data, size_t n) {
    received.append(data, n);
    return received.find("event: progress") == std::string::npos;
  });
  EXPECT_FALSE(result);  // cancelled by the receiver
  EXPECT_TRUE(Eventually([&] { return backend_.cancels == 1; }));
  EXPECT_EQ(backend_.watches, 1);
}

TEST_F(HttpServerTest, StopEndsOpenStreams) {
  backend_.block = true;
  Start();
  std::thread reader([&] {
    httplib::Client client("127.0.0.1", port_);
    client.Get("/api/sweeps/s1/events");
  });
  ASSERT_TRUE(Eventually([&] { return backend_.watches == 1; }));
  server_->Stop();
  serving_.join();
  reader.join();
  EXPECT_TRUE(served_);
  EXPECT_EQ(backend_.cancels, 1);
}

// The headers and body of a POST reach the dashboard: the key and the JSON
// make an action; without the key, or as a form, it is refused.
TEST_F(HttpServerTest, ActionsOverTheSocket) {
  Start();
  httplib::Client client("127.0.0.1", port_);
  const std::string origin = "http://127.0.0.1:" + std::to_string(port_);
  auto ok = client.Post("/api/sweeps/s1/update",
                        {{"X-Ranksweep-Key", "k3y"}, {"Origin", origin}},
                        R"({"note": "lr too high"})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(nlohmann::json::parse(ok->body)["note"], "lr too high");
  ASSERT_EQ(backend_.updates.size(), 1u);
  EXPECT_EQ(backend_.updates[0].note(), "lr too high");

  auto viewer = client.Post("/api/sweeps/s1/update", {{"Origin", origin}},
                            R"({"note": "x"})", "application/json");
  ASSERT_TRUE(viewer);
  EXPECT_EQ(viewer->status, 403);
  auto form = client.Post("/api/sweeps/s1/update", {{"X-Ranksweep-Key", "k3y"}},
                          "note=x", "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 415);
  EXPECT_EQ(backend_.updates.size(), 1u);
}

TEST(DashboardServerBindTest, PortInUse) {
  StreamBackend backend;
  DashboardServer first(&backend, ListenAddress{"127.0.0.1", 0}, false, "");
  absl::StatusOr<int> port = first.Bind();
  ASSERT_TRUE(port.ok()) << port.status();
  DashboardServer second(&backend, ListenAddress{"127.0.0.1", *port}, false, "");
  absl::StatusOr<int> again = second.Bind();
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(again.status().message(),
            "--listen: cannot listen on 127.0.0.1:" + std::to_string(*port) +
                " (in use, or not this machine's)");
}

}  // namespace
}  // namespace ranksweep::client::ui
