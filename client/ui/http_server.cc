#include "client/ui/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/ui/sse.h"
#include "httplib.h"

namespace ranksweep::client::ui {
namespace {

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

// Threads serving requests. Each open sweep page holds one for its event
// stream, so there are more than a handful.
constexpr size_t kServerThreads = 16;

}  // namespace

DashboardServer::DashboardServer(Backend* backend, ListenAddress address, bool allow_remote,
                                 std::string action_key, std::chrono::milliseconds keep_alive)
    : backend_(backend),
      address_(std::move(address)),
      allow_remote_(allow_remote),
      action_key_(std::move(action_key)),
      keep_alive_(keep_alive) {}

DashboardServer::~DashboardServer() = default;

absl::StatusOr<int> DashboardServer::Bind() {
  server_ = std::make_unique<httplib::Server>();
  server_->new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
  // httplib's default adds SO_REUSEPORT, with which a second dashboard on
  // the same port binds too and the two split the connections between them.
  // SO_REUSEADDR alone lets a restart reuse the port and refuses a second.
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const int port = address_.port == 0 ? server_->bind_to_any_port(address_.host)
                                      : (server_->bind_to_port(address_.host, address_.port)
                                             ? address_.port
                                             : -1);
  if (port <= 0) {
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ", address_.host, ":",
                                               address_.port, " (in use, or not this machine's)"));
  }
  port_ = port;
  dashboard_ =
      std::make_unique<Dashboard>(backend_, port_, allow_remote_, &NowUnixMs, action_key_);
  auto handle = [this](const httplib::Request& req, httplib::Response& res) {
    HttpRequest request;
    request.method = req.method;
    request.path = req.path;
    for (const auto& [key, value] : req.params) request.query[key] = value;
    request.host = req.get_header_value("Host");
    for (const auto& [key, value] : req.headers) request.headers[absl::AsciiStrToLower(key)] = value;
    request.body = req.body;
    HttpReply reply = dashboard_->Handle(request);
    res.status = reply.status;
    for (const auto& [key, value] : reply.headers) res.set_header(key, value);
    if (reply.stream_sweep_id.empty()) {
      res.set_content(reply.body, reply.content_type.c_str());
      return;
    }
    const std::string id = reply.stream_sweep_id;
    res.set_chunked_content_provider(reply.content_type, [this, id](size_t, httplib::DataSink& sink) {
      return StreamEvents(id, &sink);
    });
  };
  // Every path goes through Dashboard::Handle, which routes and answers 405
  // for a method the path does not take.
  server_->Get(".*", handle);
  server_->Post(".*", handle);
  server_->Put(".*", handle);
  server_->Delete(".*", handle);
  server_->Patch(".*", handle);
  return port_;
}

bool DashboardServer::Serve() { return server_ != nullptr && server_->listen_after_bind(); }

void DashboardServer::Stop() {
  stopping_ = true;
  if (server_ != nullptr) server_->stop();
}

bool DashboardServer::StreamEvents(const std::string& sweep_id, void* sink_ptr) {
  auto& sink = *static_cast<httplib::DataSink*>(sink_ptr);
  // The WatchSweep stream is read on its own thread, so that this one can
  // notice a closed page or Stop() while no event comes.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::string> texts;
    bool ended = false;
  };
  auto shared = std::make_shared<Shared>();
  std::shared_ptr<EventStream> stream = backend_->WatchSweep(sweep_id);
  std::thread reader([shared, stream] {
    v1::SweepEvent event;
    v1::SweepInfo last;
    while (stream->Next(&event)) {
      last = event.sweep();
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->texts.push_back(ProgressEventText(event));
      shared->cv.notify_one();
    }
    const absl::Status finish = stream->Finish();
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->texts.push_back(EndEventText(last, finish));
    shared->ended = true;
    shared->cv.notify_one();
  });
  // A page whose stream ends reconnects after this long (the browser's
  // EventSource does it by itself); the page closes it after "end".
  const std::string prologue = "retry: 3000\n\n";
  bool ok = sink.write(prologue.data(), prologue.size());
  bool ended = false;
  auto last_write = std::chrono::steady_clock::now();
  while (ok && !ended && !stopping_) {
    std::deque<std::string> texts;
    {
      std::unique_lock<std::mutex> lock(shared->mu);
      // Woken by an event, else often enough to notice Stop() and to keep
      // the stream alive.
      shared->cv.wait_for(lock, std::min<std::chrono::milliseconds>(keep_alive_, std::chrono::seconds(1)),
                          [&] { return !shared->texts.empty() || shared->ended; });
      texts.swap(shared->texts);
      ended = shared->ended;
    }
    for (const std::string& text : texts) {
      ok = ok && sink.write(text.data(), text.size());
    }
    if (!texts.empty()) last_write = std::chrono::steady_clock::now();
    // A comment down an idle stream: the write fails once the page has
    // gone, and then the WatchSweep call is cancelled.
    if (ok && std::chrono::steady_clock::now() - last_write >= keep_alive_) {
      const std::string ping = SseComment("keep-alive");
      ok = sink.write(ping.data(), ping.size());
      last_write = std::chrono::steady_clock::now();
    }
  }
  if (!ended) stream->Cancel();
  reader.join();
  if (ok && ended) sink.done();
  return ok && ended;
}

}  // namespace ranksweep::client::ui
