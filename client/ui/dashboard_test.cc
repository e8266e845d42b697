#include "client/ui/dashboard.h"

#include <algorithm>

#include "client/ui/assets.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ranksweep::client::ui {
namespace {

using nlohmann::json;

// A Backend holding a few sweeps in memory, recording what it was asked.
class FakeBackend : public Backend {
 public:
  FakeBackend() {
    v1::SweepInfo s;
    s.set_sweep_id("s1");
    s.set_name("demo");
    s.set_state(v1::SWEEP_STATE_DONE);
    s.mutable_counts()->set_total(2);
    s.mutable_counts()->set_done(2);
    sweeps.push_back(s);
    v1::ResultRow row;
    row.set_sweep_id("s1");
    row.set_head("kernel/elu1");
    row.set_rank(4);
    row.set_state(v1::CELL_STATE_DONE);
    row.mutable_result()->mutable_train()->set_error(0.5);
    rows = {row, row};
    rows[1].set_seed(1);
    // Seed 0's first result, invalidated by a quarantine.
    invalid_rows = {row};
    invalid_rows[0].set_state(v1::CELL_STATE_INVALID);
    invalid_rows[0].mutable_result()->mutable_train()->set_error(0.25);
    invalid_rows[0].set_failure(
        "invalidated 2026-12-01T14:00:00Z by ops: quarantine 1 of worker w-bad");
  }

  absl::StatusOr<std::vector<v1::SweepInfo>> ListSweeps(int limit) override {
    last_limit = limit;
    if (!error.ok()) return error;
    return sweeps;
  }
  absl::StatusOr<v1::SweepInfo> GetSweep(const std::string& id) override {
    for (const auto& s : sweeps) {
      if (s.sweep_id() == id) return s;
    }
    return absl::NotFoundError("no sweep " + id);
  }
  absl::StatusOr<std::vector<v1::ResultRow>> QueryRows(const v1::QueryResultsRequest& r) override {
    last_query = r;
    queries.push_back(r);
    if (r.sweep_id() != "s1") return absl::NotFoundError("no sweep " + r.sweep_id());
    return r.state() == v1::CELL_STATE_INVALID ? invalid_rows : rows;
  }
  absl::StatusOr<v1::QueryResultsResponse> QueryGroups(const std::string& id) override {
    if (id != "s1") return absl::NotFoundError("no sweep " + id);
    v1::QueryResultsResponse resp;
    resp.mutable_facts()->set_rank_upper_bound(24);
    return resp;
  }
  absl::StatusOr<std::vector<v1::WorkerInfo>> ListWorkers() override {
    v1::WorkerInfo w;
    w.set_worker_id("w1");
    w.set_last_seen_unix_ms(1000);
    return std::vector<v1::WorkerInfo>{w};
  }
  std::unique_ptr<EventStream> WatchSweep(const std::string&) override { return nullptr; }

  std::vector<v1::SweepInfo> sweeps;
  std::vector<v1::ResultRow> rows;
  std::vector<v1::ResultRow> invalid_rows;  // QueryResults state INVALID
  absl::Status error;
  int last_limit = -1;
  v1::QueryResultsRequest last_query;
  std::vector<v1::QueryResultsRequest> queries;
};

int64_t FixedClock() { return 4000; }

class DashboardTest : public ::testing::Test {
 protected:
  HttpReply Get(const std::string& path, std::map<std::string, std::string> query = {},
                const std::string& method = "GET") {
    HttpRequest req;
    req.method = method;
    req.path = path;
    req.query = std::move(query);
    req.host = "127.0.0.1:8080";
    return dashboard_.Handle(req);
  }

  static std::string Header(const HttpReply& reply, const std::string& name) {
    for (const auto& [key, value] : reply.headers) {
      if (key == name) return value;
    }
    return "";
  }

  FakeBackend backend_;
  Dashboard dashboard_{&backend_, 8080, false, &FixedClock};
};

TEST(ParseRouteTest, Routes) {
  EXPECT_EQ(ParseRoute("/").kind, Route::kIndex);
  EXPECT_EQ(ParseRoute("/index.html").kind, Route::kIndex);
  EXPECT_EQ(ParseRoute("/assets/app.js").kind, Route::kAsset);
  EXPECT_EQ(ParseRoute("/assets/app.js").arg, "app.js");
  EXPECT_EQ(ParseRoute("/api/sweeps").kind, Route::kSweeps);
  EXPECT_EQ(ParseRoute("/api/sweeps/abc-1").kind, Route::kSweep);
  EXPECT_EQ(ParseRoute("/api/sweeps/abc-1").arg, "abc-1");
  EXPECT_EQ(ParseRoute("/api/sweeps/abc/results").kind, Route::kResults);
  EXPECT_EQ(ParseRoute("/api/sweeps/abc/summary").kind, Route::kSummary);
  EXPECT_EQ(ParseRoute("/api/sweeps/abc/events").kind, Route::kEvents);
  EXPECT_EQ(ParseRoute("/api/workers").kind, Route::kWorkers);
}

TEST(ParseRouteTest, UnknownPaths) {
  for (const char* path : {"", "/api", "/api/", "/api/sweeps/", "/api/sweeps/a/b/c",
                           "/api/sweeps/a/nope", "/api/sweeps/../x", "/assets/../secret",
                           "/assets/", "/assets/a/b", "/api/workers/x", "/nope", "api/sweeps",
                           "/api/sweeps/a%2Fb", "/api/sweeps/a b"}) {
    EXPECT_EQ(ParseRoute(path).kind, Route::kNone) << path;
  }
}

TEST_F(DashboardTest, ServesTheEmbeddedPage) {
  HttpReply reply = Get("/");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.content_type, "text/html; charset=utf-8");
  EXPECT_NE(reply.body.find("<script src=\"/assets/app.js\"></script>"), std::string::npos);
  // Nothing loads from elsewhere: the policy allows this origin only.
  EXPECT_NE(Header(reply, "Content-Security-Policy").find("script-src 'self'"), std::string::npos);
  HttpReply js = Get("/assets/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(Get("/assets/app.css").content_type, "text/css; charset=utf-8");
  EXPECT_EQ(Get("/assets/missing.js").status, 404);
}

TEST_F(DashboardTest, AssetsReferenceNoNetwork) {
  ASSERT_EQ(EmbeddedAssets().size(), 3u);
  for (const auto& [name, contents] : EmbeddedAssets()) {
    // The SVG namespace is a name, not a place anything is loaded from.
    std::string body(contents);
    const std::string svg_ns = "http://www.w3.org/2000/svg";
    for (size_t at; (at = body.find(svg_ns)) != std::string::npos;) body.erase(at, svg_ns.size());
    EXPECT_EQ(body.find("http://"), std::string::npos) << name;
    EXPECT_EQ(body.find("https://"), std::string::npos) << name;
    EXPECT_EQ(body.find("@import"), std::string::npos) << name;
  }
}

TEST_F(DashboardTest, SweepsList) {
  HttpReply reply = Get("/api/sweeps", {{"limit", "5"}});
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.content_type, "application/json");
  EXPECT_EQ(backend_.last_limit, 5);
  json body = json::parse(reply.body);
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body[0]["id"], "s1");
  EXPECT_EQ(body[0]["state"], "DONE");
  EXPECT_EQ(Header(reply, "Cache-Control"), "no-store");
}

TEST_F(DashboardTest, BadLimitNamesTheParameter) {
  HttpReply reply = Get("/api/sweeps", {{"limit", "-1"}});
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(json::parse(reply.body)["error"], "limit: \"-1\" must be in 0..10000");
  EXPECT_EQ(backend_.last_limit, -1);  // the coordinator was not asked
}

TEST_F(DashboardTest, CoordinatorErrorsBecomeHttpStatuses) {
  backend_.error = absl::UnavailableError("coordinator at 127.0.0.1:1 unreachable: refused");
  HttpReply reply = Get("/api/sweeps");
  EXPECT_EQ(reply.status, 502);
  EXPECT_EQ(json::parse(reply.body)["error"], "coordinator at 127.0.0.1:1 unreachable: refused");
  EXPECT_EQ(HttpStatusFor(absl::DeadlineExceededError("")), 504);
  EXPECT_EQ(HttpStatusFor(absl::PermissionDeniedError("")), 502);
  EXPECT_EQ(HttpStatusFor(absl::InvalidArgumentError("")), 400);
}

TEST_F(DashboardTest, UnknownSweepIs404) {
  HttpReply reply = Get("/api/sweeps/zzz");
  EXPECT_EQ(reply.status, 404);
  EXPECT_EQ(json::parse(reply.body)["error"], "no sweep zzz");
  EXPECT_EQ(Get("/api/sweeps/zzz/summary").status, 404);
  EXPECT_EQ(Get("/api/nothing").status, 404);
}

TEST_F(DashboardTest, ResultsAsJsonWithFilters) {
  HttpReply reply = Get("/api/sweeps/s1/results",
                        {{"head", "kernel/elu1"}, {"state", "done"}, {"rank", "4"}});
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(backend_.last_query.sweep_id(), "s1");
  EXPECT_EQ(backend_.last_query.head(), "kernel/elu1");
  EXPECT_EQ(backend_.last_query.state(), v1::CELL_STATE_DONE);
  ASSERT_EQ(backend_.last_query.ranks_size(), 1);
  EXPECT_EQ(backend_.last_query.ranks(0), 4);
  EXPECT_EQ(json::parse(reply.body).size(), 2u);
  EXPECT_EQ(Header(reply, "Content-Disposition"), "");
}

TEST_F(DashboardTest, ResultsDownloads) {
  HttpReply csv = Get("/api/sweeps/s1/results", {{"format", "csv"}});
  EXPECT_EQ(csv.status, 200);
  EXPECT_EQ(csv.content_type, "text/csv; charset=utf-8");
  EXPECT_EQ(Header(csv, "Content-Disposition"), "attachment; filename=\"s1-results.csv\"");
  EXPECT_EQ(std::count(csv.body.begin(), csv.body.end(), '\n'), 3);  // header and two rows
  HttpReply js = Get("/api/sweeps/s1/results", {{"format", "json"}});
  EXPECT_EQ(Header(js, "Content-Disposition"), "attachment; filename=\"s1-results.json\"");
  EXPECT_EQ(json::parse(js.body).size(), 2u);
}

TEST_F(DashboardTest, ResultsBadParameters) {
  EXPECT_EQ(json::parse(Get("/api/sweeps/s1/results", {{"state", "pending"}}).body)["error"],
            "state: \"pending\" is not one of done, failed, invalid");
  EXPECT_EQ(json::parse(Get("/api/sweeps/s1/results", {{"include_invalid", "yes"}}).body)["error"],
            "include_invalid: \"yes\" is not one of true, false");
  EXPECT_EQ(json::parse(Get("/api/sweeps/s1/results", {{"rank", "x"}}).body)["error"],
            "rank: \"x\" must be in 0..65536");
  HttpReply reply = Get("/api/sweeps/s1/results", {{"format", "xml"}});
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(json::parse(reply.body)["error"], "format: \"xml\" is not one of json, csv");
}

TEST_F(DashboardTest, InvalidRowsOnlyWhenAskedFor) {
  json plain = json::parse(Get("/api/sweeps/s1/results").body);
  EXPECT_EQ(plain.size(), 2u);
  EXPECT_EQ(backend_.queries.size(), 1u);
  EXPECT_EQ(json::parse(Get("/api/sweeps/s1/results", {{"include_invalid", "false"}}).body).size(),
            2u);
  EXPECT_EQ(backend_.queries.size(), 2u);

  // The query's rows, then the invalidated ones under the same filters.
  backend_.queries.clear();
  json rows = json::parse(Get("/api/sweeps/s1/results",
                              {{"include_invalid", "true"}, {"head", "kernel/elu1"},
                               {"state", "done"}})
                              .body);
  ASSERT_EQ(backend_.queries.size(), 2u);
  EXPECT_EQ(backend_.queries[0].state(), v1::CELL_STATE_DONE);
  EXPECT_EQ(backend_.queries[1].state(), v1::CELL_STATE_INVALID);
  EXPECT_EQ(backend_.queries[1].head(), "kernel/elu1");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["state"], "DONE");
  EXPECT_EQ(rows[1]["state"], "DONE");
  EXPECT_EQ(rows[2]["state"], "INVALID");
  EXPECT_EQ(rows[2]["train_error"], 0.25);  // its metrics as stored
  EXPECT_EQ(rows[2]["failure"],
            "invalidated 2026-12-01T14:00:00Z by ops: quarantine 1 of worker w-bad");

  // state=invalid alone asks once, for those rows only.
  backend_.queries.clear();
  json only = json::parse(
      Get("/api/sweeps/s1/results", {{"state", "invalid"}, {"include_invalid", "1"}}).body);
  ASSERT_EQ(backend_.queries.size(), 1u);
  EXPECT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0]["state"], "INVALID");

  // The downloads follow the same parameter.
  HttpReply csv = Get("/api/sweeps/s1/results", {{"format", "csv"}, {"include_invalid", "true"}});
  EXPECT_EQ(csv.status, 200);
  EXPECT_EQ(std::count(csv.body.begin(), csv.body.end(), '\n'), 4);  // header and three rows
  EXPECT_NE(csv.body.find(",INVALID,"), std::string::npos);
  EXPECT_NE(csv.body.find("quarantine 1 of worker w-bad"), std::string::npos);
  EXPECT_EQ(json::parse(Get("/api/sweeps/s1/results",
                            {{"format", "json"}, {"include_invalid", "true"}})
                            .body)
                .size(),
            3u);
  EXPECT_EQ(Get("/api/sweeps/s1/results", {{"format", "csv"}}).body.find("INVALID"),
            std::string::npos);
}

TEST_F(DashboardTest, SummaryAndWorkers) {
  json summary = json::parse(Get("/api/sweeps/s1/summary").body);
  EXPECT_EQ(summary["facts"]["rank_upper_bound"], 24);
  EXPECT_TRUE(summary["facts"]["rank_lower_bound"].is_null());
  json workers = json::parse(Get("/api/workers").body);
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0]["id"], "w1");
  EXPECT_EQ(workers[0]["last_seen_ago_seconds"], 3.0);  // FixedClock 4000 - 1000 ms
}

TEST_F(DashboardTest, EventsAskTheServerToStream) {
  HttpReply reply = Get("/api/sweeps/s1/events");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.content_type, "text/event-stream");
  EXPECT_EQ(reply.stream_sweep_id, "s1");
  EXPECT_TRUE(reply.body.empty());
}

TEST_F(DashboardTest, ReadOnly) {
  HttpReply reply = Get("/api/sweeps", {}, "POST");
  EXPECT_EQ(reply.status, 405);
  EXPECT_EQ(Header(reply, "Allow"), "GET, HEAD");
  EXPECT_EQ(backend_.last_limit, -1);
  EXPECT_EQ(Get("/api/sweeps", {}, "HEAD").status, 200);
}

TEST_F(DashboardTest, ForeignHostIsRefused) {
  HttpRequest req;
  req.method = "GET";
  req.path = "/api/sweeps";
  req.host = "attacker.example:8080";
  HttpReply reply = dashboard_.Handle(req);
  EXPECT_EQ(reply.status, 403);
  EXPECT_EQ(json::parse(reply.body)["error"],
            "Host \"attacker.example:8080\" is not this dashboard's address; open it as "
            "http://127.0.0.1:8080/");
  EXPECT_EQ(backend_.last_limit, -1);
}

TEST(EventTextTest, ProgressAndEnd) {
  v1::SweepEvent event;
  event.mutable_sweep()->set_sweep_id("s1");
  event.mutable_sweep()->set_state(v1::SWEEP_STATE_RUNNING);
  event.set_message("cell kernel/elu1 r=8 seed=2 done");
  const std::string text = ProgressEventText(event);
  ASSERT_EQ(text.rfind("event: progress\ndata: {", 0), 0u) << text;
  ASSERT_EQ(text.substr(text.size() - 3), "}\n\n");
  json data = json::parse(text.substr(text.find("data: ") + 6));
  EXPECT_EQ(data["sweep"]["id"], "s1");
  EXPECT_EQ(data["message"], "cell kernel/elu1 r=8 seed=2 done");

  v1::SweepInfo last;
  last.set_state(v1::SWEEP_STATE_DONE);
  EXPECT_EQ(EndEventText(last, absl::OkStatus()),
            "event: end\ndata: {\"state\":\"DONE\",\"error\":null}\n\n");
  EXPECT_EQ(EndEventText(last, absl::UnavailableError("gone")),
            "event: end\ndata: {\"state\":\"DONE\",\"error\":\"gone\"}\n\n");
}

}  // namespace
}  // namespace ranksweep::client::ui
