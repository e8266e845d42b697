#include "client/ui/dashboard.h"

#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/format.h"
#include "client/ui/assets.h"
#include "client/ui/listen.h"
#include "client/ui/sse.h"
#include "client/ui/views.h"

namespace ranksweep::client::ui {
namespace {

// The pages run only the scripts and styles they were served with, talk only
// to this server and cannot be framed by another site.
const std::vector<std::pair<std::string, std::string>>& SecurityHeaders() {
  static const auto* kHeaders = new std::vector<std::pair<std::string, std::string>>{
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
  };
  return *kHeaders;
}

HttpReply JsonReply(int status, const Json& body) {
  HttpReply reply;
  reply.status = status;
  reply.content_type = "application/json";
  reply.body = body.dump();
  reply.headers.push_back({"Cache-Control", "no-store"});
  return reply;
}

HttpReply ErrorReply(int status, const std::string& message) {
  return JsonReply(status, Json{{"error", message}});
}

HttpReply ErrorReply(const absl::Status& status) {
  return ErrorReply(HttpStatusFor(status), std::string(status.message()));
}

std::string ContentTypeFor(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

// Sweep ids and file names: one non-empty path segment of safe characters.
bool IsSegment(absl::string_view s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

const std::string* Param(const HttpRequest& request, const std::string& key) {
  auto it = request.query.find(key);
  return it == request.query.end() || it->second.empty() ? nullptr : &it->second;
}

}  // namespace

Route ParseRoute(const std::string& path) {
  if (path == "/" || path == "/index.html") return {Route::kIndex, "index.html"};
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  // parts[0] is the empty string before the leading '/'.
  if (parts.size() < 2 || !parts[0].empty()) return {};
  parts.erase(parts.begin());
  if (parts.size() == 2 && parts[0] == "assets" && IsSegment(parts[1])) {
    return {Route::kAsset, std::string(parts[1])};
  }
  if (parts.empty() || parts[0] != "api") return {};
  if (parts.size() == 2 && parts[1] == "workers") return {Route::kWorkers, ""};
  if (parts.size() < 2 || parts[1] != "sweeps") return {};
  if (parts.size() == 2) return {Route::kSweeps, ""};
  if (!IsSegment(parts[2])) return {};
  const std::string id(parts[2]);
  if (parts.size() == 3) return {Route::kSweep, id};
  if (parts.size() != 4) return {};
  if (parts[3] == "results") return {Route::kResults, id};
  if (parts[3] == "summary") return {Route::kSummary, id};
  if (parts[3] == "curves") return {Route::kCurves, id};
  if (parts[3] == "events") return {Route::kEvents, id};
  return {};
}

std::string ProgressEventText(const v1::SweepEvent& event) {
  return SseEvent("progress", Json{{"sweep", SweepView(event.sweep())},
                                   {"message", event.message()}}
                                  .dump());
}

std::string EndEventText(const v1::SweepInfo& last, const absl::Status& finish) {
  return SseEvent("end", Json{{"state", SweepStateName(last.state())},
                              {"error", finish.ok() ? Json(nullptr)
                                                    : Json(std::string(finish.message()))}}
                             .dump());
}

int HttpStatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 502;
  }
}

Dashboard::Dashboard(Backend* backend, int port, bool allow_remote, int64_t (*clock_ms)())
    : backend_(backend), port_(port), allow_remote_(allow_remote), clock_ms_(clock_ms) {}

HttpReply Dashboard::Handle(const HttpRequest& request) const {
  HttpReply reply;
  if (!HostHeaderAllowed(request.host, port_, allow_remote_)) {
    reply = ErrorReply(403, absl::StrCat("Host \"", request.host,
                                         "\" is not this dashboard's address; open it as "
                                         "http://127.0.0.1:", port_, "/"));
  } else if (request.method != "GET" && request.method != "HEAD") {
    reply = ErrorReply(405, absl::StrCat(request.method, " is not allowed; the dashboard is "
                                                         "read-only (GET)"));
    reply.headers.push_back({"Allow", "GET, HEAD"});
  } else {
    const Route route = ParseRoute(request.path);
    if (route.kind == Route::kIndex || route.kind == Route::kAsset) {
      reply = ErrorReply(404, absl::StrCat("no such file: ", request.path));
      for (const auto& [name, body] : EmbeddedAssets()) {
        if (name != route.arg) continue;
        reply = HttpReply();
        reply.content_type = ContentTypeFor(name);
        reply.body = std::string(body);
        reply.headers.push_back({"Cache-Control", "no-cache"});
      }
    } else if (route.kind == Route::kNone) {
      reply = ErrorReply(404, absl::StrCat("no such page: ", request.path));
    } else {
      reply = Api(route, request);
    }
  }
  for (const auto& h : SecurityHeaders()) reply.headers.push_back(h);
  return reply;
}

HttpReply Dashboard::Api(const Route& route, const HttpRequest& request) const {
  switch (route.kind) {
    case Route::kSweeps: {
      int limit = 0;
      if (const std::string* l = Param(request, "limit");
          l != nullptr && (!absl::SimpleAtoi(*l, &limit) || limit < 0 || limit > 10000)) {
        return ErrorReply(400, absl::StrCat("limit: \"", *l, "\" must be in 0..10000"));
      }
      auto sweeps = backend_->ListSweeps(limit);
      if (!sweeps.ok()) return ErrorReply(sweeps.status());
      return JsonReply(200, SweepsView(*sweeps));
    }
    case Route::kSweep: {
      auto sweep = backend_->GetSweep(route.arg);
      if (!sweep.ok()) return ErrorReply(sweep.status());
      return JsonReply(200, SweepView(*sweep));
    }
    case Route::kResults: {
      v1::QueryResultsRequest req;
      req.set_sweep_id(route.arg);
      if (const std::string* head = Param(request, "head")) req.set_head(*head);
      if (const std::string* state = Param(request, "state")) {
        absl::StatusOr<v1::CellState> parsed = ParseCellState(*state);
        if (!parsed.ok() || (*parsed != v1::CELL_STATE_DONE && *parsed != v1::CELL_STATE_FAILED &&
                             *parsed != v1::CELL_STATE_INVALID)) {
          return ErrorReply(400, absl::StrCat("state: \"", *state,
                                              "\" is not one of done, failed, invalid"));
        }
        req.set_state(*parsed);
      }
      bool include_invalid = false;
      if (const std::string* flag = Param(request, "include_invalid")) {
        if (*flag == "true" || *flag == "1") {
          include_invalid = true;
        } else if (*flag != "false" && *flag != "0") {
          return ErrorReply(400, absl::StrCat("include_invalid: \"", *flag,
                                              "\" is not one of true, false"));
        }
      }
      if (const std::string* rank = Param(request, "rank")) {
        int r = 0;
        if (!absl::SimpleAtoi(*rank, &r) || r < 0 || r > 65536) {
          return ErrorReply(400, absl::StrCat("rank: \"", *rank, "\" must be in 0..65536"));
        }
        req.add_ranks(r);
      }
      const std::string* format = Param(request, "format");
      if (format != nullptr && *format != "json" && *format != "csv") {
        return ErrorReply(400, absl::StrCat("format: \"", *format, "\" is not one of json, csv"));
      }
      auto rows = backend_->QueryRows(req);
      if (!rows.ok()) return ErrorReply(rows.status());
      // As `ranksweep results --include-invalid`: the rows of the query, then
      // those a quarantine invalidated (state INVALID) under the same filters.
      if (include_invalid && req.state() != v1::CELL_STATE_INVALID) {
        req.set_state(v1::CELL_STATE_INVALID);
        auto invalid = backend_->QueryRows(req);
        if (!invalid.ok()) return ErrorReply(invalid.status());
        rows->insert(rows->end(), invalid->begin(), invalid->end());
      }
      if (format == nullptr) return JsonReply(200, RowsView(*rows));
      HttpReply reply;
      if (*format == "csv") {
        reply.content_type = "text/csv; charset=utf-8";
        reply.body = RowsCsv(*rows);
      } else {
        reply = JsonReply(200, RowsView(*rows));
      }
      reply.headers.push_back({"Content-Disposition",
                               absl::StrCat("attachment; filename=\"", route.arg, "-results.",
                                            *format, "\"")});
      return reply;
    }
    case Route::kCurves: {
      // The learning curves of one (head, rank): every done seed's, for
      // the cell view. Both are required, so a reply stays small.
      const std::string* head = Param(request, "head");
      const std::string* rank = Param(request, "rank");
      int r = 0;
      if (head == nullptr || rank == nullptr) {
        return ErrorReply(400, "head and rank are required (the curves of one head and rank)");
      }
      if (!absl::SimpleAtoi(*rank, &r) || r < 0 || r > 65536) {
        return ErrorReply(400, absl::StrCat("rank: \"", *rank, "\" must be in 0..65536"));
      }
      v1::QueryResultsRequest req;
      req.set_sweep_id(route.arg);
      req.set_head(*head);
      req.add_ranks(r);
      req.set_state(v1::CELL_STATE_DONE);
      req.set_curves(true);
      auto rows = backend_->QueryRows(req);
      if (!rows.ok()) return ErrorReply(rows.status());
      return JsonReply(200, CurvesView(*rows));
    }
    case Route::kSummary: {
      auto groups = backend_->QueryGroups(route.arg);
      if (!groups.ok()) return ErrorReply(groups.status());
      return JsonReply(200, SummaryView(*groups));
    }
    case Route::kEvents: {
      HttpReply reply;
      reply.content_type = "text/event-stream";
      reply.headers.push_back({"Cache-Control", "no-store"});
      reply.stream_sweep_id = route.arg;
      return reply;
    }
    case Route::kWorkers: {
      auto workers = backend_->ListWorkers();
      if (!workers.ok()) return ErrorReply(workers.status());
      return JsonReply(200, WorkersView(*workers, clock_ms_()));
    }
    default:
      return ErrorReply(404, absl::StrCat("no such page: ", request.path));
  }
}

}  // namespace ranksweep::client::ui
