#include "client/ui/dashboard.h"

#include <algorithm>
#include <string>

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
    s.set_owner("ana");
    v1::ManagedSweep m;
    *m.mutable_sweep() = s;
    m.set_note("first try");
    m.add_tags("paper");
    sweeps.push_back(m);
    s.set_sweep_id("s2");
    s.set_owner("bo");
    *m.mutable_sweep() = s;
    m.clear_tags();
    sweeps.push_back(m);
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

  absl::StatusOr<std::vector<v1::ManagedSweep>> ListSweeps(
      const v1::ListManagedSweepsRequest& r) override {
    last_list = r;
    last_limit = r.limit();
    if (!error.ok()) return error;
    return sweeps;
  }
  absl::StatusOr<v1::ManagedSweep> GetSweep(const std::string& id) override {
    for (const auto& s : sweeps) {
      if (s.sweep().sweep_id() == id) return s;
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
  absl::StatusOr<v1::ManagedSweep> UpdateSweep(const v1::UpdateSweepRequest& r) override {
    actions.push_back("update " + r.ShortDebugString());
    if (!error.ok()) return error;
    return sweeps[0];
  }
  absl::StatusOr<v1::DeleteSweepResponse> DeleteSweep(const v1::DeleteSweepRequest& r) override {
    actions.push_back("delete " + r.ShortDebugString());
    if (!error.ok()) return error;
    v1::DeleteSweepResponse out;
    out.set_cells_deleted(2);
    out.set_results_deleted(2);
    return out;
  }
  absl::StatusOr<int64_t> RetrySweep(const v1::RetrySweepRequest& r) override {
    actions.push_back("retry " + r.ShortDebugString());
    if (!error.ok()) return error;
    return 3;
  }
  absl::StatusOr<int64_t> CancelSweep(const std::string& id) override {
    actions.push_back("cancel " + id);
    if (!error.ok()) return error;
    return 4;
  }

  std::vector<v1::ManagedSweep> sweeps;
  std::vector<v1::ResultRow> rows;
  std::vector<v1::ResultRow> invalid_rows;  // QueryResults state INVALID
  absl::Status error;
  int last_limit = -1;
  v1::ListManagedSweepsRequest last_list;
  std::vector<std::string> actions;  // what the actions asked, in order
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

  // A POST as this dashboard's own page sends it: same origin, JSON, the key.
  HttpReply Post(const std::string& path, const std::string& body,
                 std::map<std::string, std::string> headers = {
                     {"origin", "http://127.0.0.1:8080"},
                     {"sec-fetch-site", "same-origin"},
                     {"content-type", "application/json"},
                     {"x-ranksweep-key", "k3y"}}) {
    HttpRequest req;
    req.method = "POST";
    req.path = path;
    req.host = "127.0.0.1:8080";
    req.headers = std::move(headers);
    req.body = body;
    return dashboard_.Handle(req);
  }
  static std::string Error(const HttpReply& reply) {
    return json::parse(reply.body)["error"].get<std::string>();
  }

  FakeBackend backend_;
  Dashboard dashboard_{&backend_, 8080, false, &FixedClock, "k3y"};
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
  EXPECT_EQ(ParseRoute("/api/session").kind, Route::kSession);
  EXPECT_EQ(ParseRoute("/api/sweeps/abc/update").kind, Route::kUpdate);
  EXPECT_EQ(ParseRoute("/api/sweeps/abc/cancel").kind, Route::kCancel);
  EXPECT_EQ(ParseRoute("/api/sweeps/abc/retry").kind, Route::kRetry);
  EXPECT_EQ(ParseRoute("/api/sweeps/abc/delete").kind, Route::kDelete);
  EXPECT_TRUE(ParseRoute("/api/sweeps/abc/delete").IsAction());
  EXPECT_FALSE(ParseRoute("/api/sweeps/abc").IsAction());
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
  // Every script, in the order that lets each use the ones before it.
  EXPECT_NE(reply.body.find("<script src=\"/assets/common.js\"></script>\n"
                            "<script src=\"/assets/plot.js\"></script>\n"
                            "<script src=\"/assets/pages.js\"></script>\n"
                            "<script src=\"/assets/sweep_page.js\"></script>\n"
                            "<script src=\"/assets/app.js\"></script>"),
            std::string::npos);
  for (const char* script : {"common.js", "plot.js", "pages.js", "sweep_page.js", "app.js"}) {
    HttpReply js = Get(std::string("/assets/") + script);
    EXPECT_EQ(js.status, 200) << script;
    EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8") << script;
  }
  EXPECT_EQ(Get("/assets/app.css").content_type, "text/css; charset=utf-8");
  EXPECT_EQ(Get("/assets/missing.js").status, 404);
}

TEST_F(DashboardTest, AssetsReferenceNoNetwork) {
  ASSERT_EQ(EmbeddedAssets().size(), 7u);
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
  ASSERT_EQ(body.size(), 2u);
  EXPECT_EQ(body[0]["id"], "s1");
  EXPECT_EQ(body[0]["state"], "DONE");
  EXPECT_EQ(body[0]["note"], "first try");
  EXPECT_EQ(body[0]["tags"], json::array({"paper"}));
  EXPECT_EQ(body[0]["archived"], false);
  EXPECT_EQ(Header(reply, "Cache-Control"), "no-store");
  EXPECT_FALSE(backend_.last_list.include_archived());
}

TEST_F(DashboardTest, SweepsListFilters) {
  HttpReply reply = Get("/api/sweeps", {{"state", "done"}, {"tag", "paper"}, {"search", "TRY"},
                                        {"archived", "true"}, {"owner", "bo"}});
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(backend_.last_list.state(), v1::SWEEP_STATE_DONE);
  EXPECT_EQ(backend_.last_list.tag(), "paper");
  EXPECT_EQ(backend_.last_list.search(), "TRY");
  EXPECT_TRUE(backend_.last_list.include_archived());
  // The owner is matched here, exactly.
  json body = json::parse(reply.body);
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body[0]["id"], "s2");
  EXPECT_EQ(json::parse(Get("/api/sweeps", {{"owner", "b"}}).body).size(), 0u);
}

TEST_F(DashboardTest, SweepsListBadFiltersNameTheParameter) {
  HttpReply reply = Get("/api/sweeps", {{"state", "pending"}});
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(Error(reply), "state: \"pending\" is not one of running, done, failed, cancelled");
  reply = Get("/api/sweeps", {{"archived", "maybe"}});
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(Error(reply), "archived: \"maybe\" is not one of true, false");
  EXPECT_EQ(backend_.last_limit, -1);  // the coordinator was not asked
}

TEST_F(DashboardTest, OneSweepWithItsNotes) {
  json body = json::parse(Get("/api/sweeps/s1").body);
  EXPECT_EQ(body["id"], "s1");
  EXPECT_EQ(body["note"], "first try");
  EXPECT_EQ(body["tags"], json::array({"paper"}));
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
  EXPECT_EQ(HttpStatusFor(absl::PermissionDeniedError("")), 403);
  EXPECT_EQ(HttpStatusFor(absl::UnauthenticatedError("")), 401);
  EXPECT_EQ(HttpStatusFor(absl::FailedPreconditionError("")), 409);
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

TEST_F(DashboardTest, ReadingPathsTakeNoPost) {
  HttpReply reply = Get("/api/sweeps", {}, "POST");
  EXPECT_EQ(reply.status, 405);
  EXPECT_EQ(Header(reply, "Allow"), "GET, HEAD");
  EXPECT_EQ(Error(reply), "POST is not allowed; /api/sweeps is for reading (GET)");
  EXPECT_EQ(backend_.last_limit, -1);
  EXPECT_EQ(Get("/api/sweeps", {}, "HEAD").status, 200);
  // An action is POST only: a link or an <img> cannot make it.
  reply = Get("/api/sweeps/s1/cancel");
  EXPECT_EQ(reply.status, 405);
  EXPECT_EQ(Header(reply, "Allow"), "POST");
  EXPECT_TRUE(backend_.actions.empty());
}

TEST_F(DashboardTest, ActionsReachTheCoordinator) {
  HttpReply reply = Post("/api/sweeps/s1/update",
                         R"({"name": "demo-v2", "note": "lr too high", "add_tags": ["ood"],)"
                         R"( "remove_tags": ["paper"], "archived": true})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(json::parse(reply.body)["id"], "s1");
  reply = Post("/api/sweeps/s1/cancel", "{}");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(json::parse(reply.body), json({{"cells_cancelled", 4}}));
  reply = Post("/api/sweeps/s1/retry", R"({"failed": true})");
  EXPECT_EQ(json::parse(reply.body), json({{"cells_retried", 3}}));
  reply = Post("/api/sweeps/s1/delete", R"({"confirm": "s1"})");
  EXPECT_EQ(json::parse(reply.body), json({{"cells_deleted", 2}, {"results_deleted", 2}}));
  EXPECT_EQ(backend_.actions,
            (std::vector<std::string>{
                "update sweep_id: \"s1\" name: \"demo-v2\" note: \"lr too high\" "
                "add_tags: \"ood\" remove_tags: \"paper\" archived: true",
                "cancel s1", "retry sweep_id: \"s1\" failed: true",
                "delete sweep_id: \"s1\" confirm: \"s1\""}));
}

TEST_F(DashboardTest, ViewersAndOtherSitesAreRefused) {
  // No key: a viewer.
  HttpReply reply = Post("/api/sweeps/s1/cancel", "{}",
                         {{"origin", "http://127.0.0.1:8080"}, {"content-type", "application/json"}});
  EXPECT_EQ(reply.status, 403);
  EXPECT_EQ(Error(reply), "viewers may not change sweeps: open the manage link that "
                          "`ranksweep ui` printed to act with its token");
  // A key of another run.
  reply = Post("/api/sweeps/s1/cancel", "{}",
               {{"content-type", "application/json"}, {"x-ranksweep-key", "k3z"}});
  EXPECT_EQ(reply.status, 403);
  EXPECT_EQ(Error(reply), "X-Ranksweep-Key is not this dashboard's key (from an earlier run of "
                          "`ranksweep ui`?): open the manage link it printed");
  // Another site's page, even one that knew the key.
  reply = Post("/api/sweeps/s1/cancel", "{}",
               {{"origin", "http://evil.example"}, {"content-type", "application/json"},
                {"x-ranksweep-key", "k3y"}});
  EXPECT_EQ(reply.status, 403);
  EXPECT_EQ(Error(reply), "Origin \"http://evil.example\" is not this dashboard "
                          "(http://127.0.0.1:8080): only its own pages may change sweeps");
  reply = Post("/api/sweeps/s1/cancel", "{}",
               {{"sec-fetch-site", "cross-site"}, {"content-type", "application/json"},
                {"x-ranksweep-key", "k3y"}});
  EXPECT_EQ(reply.status, 403);
  EXPECT_EQ(Error(reply),
            "Sec-Fetch-Site: cross-site: only this dashboard's own pages may change sweeps");
  // An HTML form (or any cross-site "simple" request) cannot send JSON.
  for (const char* type : {"application/x-www-form-urlencoded", "multipart/form-data; b=x",
                           "text/plain", ""}) {
    reply = Post("/api/sweeps/s1/cancel", "{}",
                 {{"content-type", type}, {"x-ranksweep-key", "k3y"}});
    EXPECT_EQ(reply.status, 415) << type;
    EXPECT_EQ(Error(reply), std::string("Content-Type \"") + type +
                                "\": an action's body must be application/json");
  }
  EXPECT_EQ(Post("/api/sweeps/s1/cancel", "{}",
                 {{"content-type", "application/json; charset=utf-8"},
                  {"x-ranksweep-key", "k3y"}})
                .status,
            200);
  EXPECT_EQ(backend_.actions, std::vector<std::string>{"cancel s1"});
}

TEST_F(DashboardTest, ReadOnlyDashboardRefusesEveryAction) {
  Dashboard read_only(&backend_, 8080, false, &FixedClock, "");
  HttpRequest req;
  req.method = "POST";
  req.path = "/api/sweeps/s1/update";
  req.host = "127.0.0.1:8080";
  req.headers = {{"content-type", "application/json"}, {"x-ranksweep-key", ""}};
  req.body = R"({"note": "x"})";
  HttpReply reply = read_only.Handle(req);
  EXPECT_EQ(reply.status, 403);
  EXPECT_EQ(Error(reply), "this dashboard is read-only (ranksweep ui --read-only): nobody may "
                          "change sweeps through it");
  req.method = "GET";
  req.path = "/api/session";
  EXPECT_EQ(json::parse(read_only.Handle(req).body),
            json({{"can_act", false}, {"read_only", true}}));
  EXPECT_TRUE(backend_.actions.empty());
}

TEST_F(DashboardTest, SessionSaysWhetherTheKeyActs) {
  HttpRequest req;
  req.method = "GET";
  req.path = "/api/session";
  req.host = "127.0.0.1:8080";
  EXPECT_EQ(json::parse(dashboard_.Handle(req).body),
            json({{"can_act", false}, {"read_only", false}}));
  req.headers = {{"x-ranksweep-key", "k3y"}};
  EXPECT_EQ(json::parse(dashboard_.Handle(req).body),
            json({{"can_act", true}, {"read_only", false}}));
}

TEST_F(DashboardTest, BadActionBodiesNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "body: must be a JSON object"},
      {"[1]", "body: must be a JSON object"},
      {"{}", "body: nothing to change; give one or more of name, note, add_tags, remove_tags, "
             "archived"},
      {R"({"owner": "x"})",
       "body: unknown field \"owner\"; allowed: name, note, add_tags, remove_tags, archived"},
      {R"({"name": 7})", "name: must be a string of 1..128 characters of A-Z a-z 0-9 . _ -"},
      {R"({"note": null})", "note: must be a string of 0..4096 bytes"},
      {R"({"add_tags": "paper"})",
       "add_tags: must be a list of tags (strings of 1..64 characters of A-Z a-z 0-9 . _ : -)"},
      {R"({"archived": "yes"})", "archived: must be true or false"},
  };
  for (const auto& [body, error] : cases) {
    HttpReply reply = Post("/api/sweeps/s1/update", body);
    EXPECT_EQ(reply.status, 400) << body;
    EXPECT_EQ(Error(reply), error) << body;
  }
  HttpReply reply = Post("/api/sweeps/s1/retry", R"({"failed": 1})");
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(Error(reply), "failed: must be true or false");
  reply = Post("/api/sweeps/s1/cancel", R"({"now": true})");
  EXPECT_EQ(Error(reply), "body: unknown field \"now\"; allowed: none");
  reply = Post("/api/sweeps/s1/delete", R"({"confirm": ["s1"]})");
  EXPECT_EQ(Error(reply), "confirm: must be a string of the sweep id, typed again");
  EXPECT_TRUE(backend_.actions.empty());
}

TEST_F(DashboardTest, CoordinatorRefusalsOfActionsKeepTheirMessage) {
  backend_.error = absl::FailedPreconditionError(
      "sweep s1 is RUNNING; cancel it first (ranksweep cancel s1)");
  HttpReply reply = Post("/api/sweeps/s1/delete", R"({"confirm": "s1"})");
  EXPECT_EQ(reply.status, 409);
  EXPECT_EQ(Error(reply), "sweep s1 is RUNNING; cancel it first (ranksweep cancel s1)");
  backend_.error = absl::PermissionDeniedError(
      "role worker may not call /ranksweep.v1.SweepService/CancelSweep (admin, user may)");
  reply = Post("/api/sweeps/s1/update", R"({"note": "x"})");
  EXPECT_EQ(reply.status, 403);
  EXPECT_EQ(Error(reply),
            "role worker may not call /ranksweep.v1.SweepService/CancelSweep (admin, user may)");
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
  // A watch cut short claims no state: the sweep may well be running.
  last.set_state(v1::SWEEP_STATE_RUNNING);
  EXPECT_EQ(EndEventText(last, absl::UnavailableError("server shutting down")),
            "event: end\ndata: {\"state\":null,\"error\":\"server shutting down\"}\n\n");
}

}  // namespace
}  // namespace ranksweep::client::ui
