#include "client/ui/dashboard.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

std::string HeaderOf(const HttpRequest& request, const std::string& name) {
  auto it = request.headers.find(name);
  return it == request.headers.end() ? "" : it->second;
}

// A boolean query parameter: true, false (or 1, 0); absent is `fallback`.
absl::StatusOr<bool> BoolParam(const HttpRequest& request, const std::string& key, bool fallback) {
  const std::string* value = Param(request, key);
  if (value == nullptr) return fallback;
  if (*value == "true" || *value == "1") return true;
  if (*value == "false" || *value == "0") return false;
  return absl::InvalidArgumentError(
      absl::StrCat(key, ": \"", *value, "\" is not one of true, false"));
}

// Equal strings, in time that depends on their lengths only.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

// The fields of an action's body: a JSON object with only `allowed` keys.
absl::StatusOr<Json> ActionBody(const HttpRequest& request,
                                const std::vector<std::string>& allowed) {
  Json body = Json::parse(request.body.empty() ? "{}" : request.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return absl::InvalidArgumentError("body: must be a JSON object");
  }
  for (const auto& [key, value] : body.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("body: unknown field \"", key, "\"; allowed: ",
                       allowed.empty() ? "none" : absl::StrJoin(allowed, ", ")));
    }
  }
  return body;
}

// body[key] as a string, when present; `what` says what is allowed.
absl::StatusOr<std::optional<std::string>> StringField(const Json& body, const std::string& key,
                                                       const std::string& what) {
  if (!body.contains(key)) return std::optional<std::string>();
  if (!body[key].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": must be a string of ", what));
  }
  return std::optional<std::string>(body[key].get<std::string>());
}

absl::StatusOr<std::optional<bool>> BoolField(const Json& body, const std::string& key) {
  if (!body.contains(key)) return std::optional<bool>();
  if (!body[key].is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": must be true or false"));
  }
  return std::optional<bool>(body[key].get<bool>());
}

absl::StatusOr<std::vector<std::string>> TagsField(const Json& body, const std::string& key) {
  std::vector<std::string> tags;
  if (!body.contains(key)) return tags;
  const Json& list = body[key];
  bool ok = list.is_array();
  for (size_t i = 0; ok && i < list.size(); ++i) ok = list[i].is_string();
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        key, ": must be a list of tags (strings of 1..64 characters of A-Z a-z 0-9 . _ : -)"));
  }
  for (const Json& t : list) tags.push_back(t.get<std::string>());
  return tags;
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
  if (parts.size() == 2 && parts[1] == "session") return {Route::kSession, ""};
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
  if (parts[3] == "update") return {Route::kUpdate, id};
  if (parts[3] == "cancel") return {Route::kCancel, id};
  if (parts[3] == "retry") return {Route::kRetry, id};
  if (parts[3] == "delete") return {Route::kDelete, id};
  return {};
}

std::string ProgressEventText(const v1::SweepEvent& event) {
  return SseEvent("progress", Json{{"sweep", SweepView(event.sweep())},
                                   {"message", event.message()}}
                                  .dump());
}

std::string EndEventText(const v1::SweepInfo& last, const absl::Status& finish) {
  return SseEvent("end", Json{{"state", finish.ok() ? Json(SweepStateName(last.state()))
                                                  : Json(nullptr)},
                              {"error", finish.ok() ? Json(nullptr)
                                                    : Json(std::string(finish.message()))}}
                             .dump());
}

int HttpStatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists: return 409;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 502;
  }
}

std::optional<HttpReply> ActionRefusal(const HttpRequest& request, const std::string& action_key) {
  const std::string fetch_site = HeaderOf(request, "sec-fetch-site");
  if (!fetch_site.empty() && fetch_site != "same-origin") {
    return ErrorReply(403, absl::StrCat("Sec-Fetch-Site: ", fetch_site,
                                        ": only this dashboard's own pages may change sweeps"));
  }
  const std::string origin = HeaderOf(request, "origin");
  const std::string own_origin = absl::StrCat("http://", request.host);
  if (!origin.empty() && origin != own_origin) {
    return ErrorReply(403, absl::StrCat("Origin \"", origin, "\" is not this dashboard (",
                                        own_origin,
                                        "): only its own pages may change sweeps"));
  }
  const std::string type = HeaderOf(request, "content-type");
  const std::string media(absl::StripAsciiWhitespace(type.substr(0, type.find(';'))));
  if (!absl::EqualsIgnoreCase(media, "application/json")) {
    return ErrorReply(415, absl::StrCat("Content-Type \"", type,
                                        "\": an action's body must be application/json"));
  }
  if (action_key.empty()) {
    return ErrorReply(403, "this dashboard is read-only (ranksweep ui --read-only): "
                           "nobody may change sweeps through it");
  }
  const std::string key = HeaderOf(request, kActionKeyHeader);
  if (key.empty()) {
    return ErrorReply(403, "viewers may not change sweeps: open the manage link that "
                           "`ranksweep ui` printed to act with its token");
  }
  if (!SameSecret(key, action_key)) {
    return ErrorReply(403, "X-Ranksweep-Key is not this dashboard's key (from an earlier run of "
                           "`ranksweep ui`?): open the manage link it printed");
  }
  return std::nullopt;
}

Dashboard::Dashboard(Backend* backend, int port, bool allow_remote, int64_t (*clock_ms)(),
                     std::string action_key)
    : backend_(backend),
      port_(port),
      allow_remote_(allow_remote),
      clock_ms_(clock_ms),
      action_key_(std::move(action_key)) {}

HttpReply Dashboard::Handle(const HttpRequest& request) const {
  HttpReply reply;
  if (!HostHeaderAllowed(request.host, port_, allow_remote_)) {
    reply = ErrorReply(403, absl::StrCat("Host \"", request.host,
                                         "\" is not this dashboard's address; open it as "
                                         "http://127.0.0.1:", port_, "/"));
  } else if (const Route route = ParseRoute(request.path); route.IsAction()) {
    if (request.method != "POST") {
      reply = ErrorReply(405, absl::StrCat(request.method, " is not allowed; ", request.path,
                                           " is an action (POST)"));
      reply.headers.push_back({"Allow", "POST"});
    } else if (std::optional<HttpReply> refusal = ActionRefusal(request, action_key_)) {
      reply = *refusal;
    } else {
      reply = Action(route, request);
    }
  } else if (request.method != "GET" && request.method != "HEAD") {
    reply = ErrorReply(405, absl::StrCat(request.method, " is not allowed; ", request.path,
                                         " is for reading (GET)"));
    reply.headers.push_back({"Allow", "GET, HEAD"});
  } else {
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
    case Route::kSession: {
      const std::string key = HeaderOf(request, kActionKeyHeader);
      return JsonReply(200, Json{{"can_act", !action_key_.empty() && SameSecret(key, action_key_)},
                                 {"read_only", action_key_.empty()}});
    }
    case Route::kSweeps: {
      v1::ListManagedSweepsRequest req;
      int limit = 0;
      if (const std::string* l = Param(request, "limit");
          l != nullptr && (!absl::SimpleAtoi(*l, &limit) || limit < 0 || limit > 10000)) {
        return ErrorReply(400, absl::StrCat("limit: \"", *l, "\" must be in 0..10000"));
      }
      req.set_limit(limit);
      if (const std::string* state = Param(request, "state")) {
        absl::StatusOr<v1::SweepState> parsed = ParseSweepState(*state);
        if (!parsed.ok()) {
          return ErrorReply(400, absl::StrCat("state: \"", *state,
                                              "\" is not one of running, done, failed, "
                                              "cancelled"));
        }
        req.set_state(*parsed);
      }
      if (const std::string* tag = Param(request, "tag")) req.set_tag(*tag);
      if (const std::string* search = Param(request, "search")) req.set_search(*search);
      absl::StatusOr<bool> archived = BoolParam(request, "archived", false);
      if (!archived.ok()) return ErrorReply(archived.status());
      req.set_include_archived(*archived);
      auto sweeps = backend_->ListSweeps(req);
      if (!sweeps.ok()) return ErrorReply(sweeps.status());
      // The coordinator filters by owner only for the caller's own sweeps.
      if (const std::string* owner = Param(request, "owner")) {
        sweeps->erase(std::remove_if(sweeps->begin(), sweeps->end(),
                                     [&](const v1::ManagedSweep& s) {
                                       return s.sweep().owner() != *owner;
                                     }),
                      sweeps->end());
      }
      return JsonReply(200, ManagedSweepsView(*sweeps));
    }
    case Route::kSweep: {
      auto sweep = backend_->GetSweep(route.arg);
      if (!sweep.ok()) return ErrorReply(sweep.status());
      return JsonReply(200, ManagedSweepView(*sweep));
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
      absl::StatusOr<bool> include_invalid_or = BoolParam(request, "include_invalid", false);
      if (!include_invalid_or.ok()) return ErrorReply(include_invalid_or.status());
      const bool include_invalid = *include_invalid_or;
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

HttpReply Dashboard::Action(const Route& route, const HttpRequest& request) const {
  const std::string& id = route.arg;
  switch (route.kind) {
    case Route::kUpdate: {
      absl::StatusOr<Json> body =
          ActionBody(request, {"name", "note", "add_tags", "remove_tags", "archived"});
      if (!body.ok()) return ErrorReply(body.status());
      if (body->empty()) {
        return ErrorReply(400, "body: nothing to change; give one or more of name, note, "
                               "add_tags, remove_tags, archived");
      }
      v1::UpdateSweepRequest req;
      req.set_sweep_id(id);
      auto name = StringField(*body, "name", "1..128 characters of A-Z a-z 0-9 . _ -");
      if (!name.ok()) return ErrorReply(name.status());
      if (*name) req.set_name(**name);
      auto note = StringField(*body, "note", "0..4096 bytes");
      if (!note.ok()) return ErrorReply(note.status());
      if (*note) req.set_note(**note);
      for (const char* key : {"add_tags", "remove_tags"}) {
        auto tags = TagsField(*body, key);
        if (!tags.ok()) return ErrorReply(tags.status());
        for (const std::string& t : *tags) {
          *(std::string(key) == "add_tags" ? req.add_add_tags() : req.add_remove_tags()) = t;
        }
      }
      auto archived = BoolField(*body, "archived");
      if (!archived.ok()) return ErrorReply(archived.status());
      if (*archived) req.set_archived(**archived);
      auto sweep = backend_->UpdateSweep(req);
      if (!sweep.ok()) return ErrorReply(sweep.status());
      return JsonReply(200, ManagedSweepView(*sweep));
    }
    case Route::kCancel: {
      absl::StatusOr<Json> body = ActionBody(request, {});
      if (!body.ok()) return ErrorReply(body.status());
      auto n = backend_->CancelSweep(id);
      if (!n.ok()) return ErrorReply(n.status());
      return JsonReply(200, Json{{"cells_cancelled", *n}});
    }
    case Route::kRetry: {
      absl::StatusOr<Json> body = ActionBody(request, {"failed", "cancelled"});
      if (!body.ok()) return ErrorReply(body.status());
      auto failed = BoolField(*body, "failed");
      if (!failed.ok()) return ErrorReply(failed.status());
      auto cancelled = BoolField(*body, "cancelled");
      if (!cancelled.ok()) return ErrorReply(cancelled.status());
      v1::RetrySweepRequest req;
      req.set_sweep_id(id);
      req.set_failed(failed->value_or(false));
      req.set_cancelled(cancelled->value_or(false));
      auto n = backend_->RetrySweep(req);
      if (!n.ok()) return ErrorReply(n.status());
      return JsonReply(200, Json{{"cells_retried", *n}});
    }
    case Route::kDelete: {
      absl::StatusOr<Json> body = ActionBody(request, {"confirm"});
      if (!body.ok()) return ErrorReply(body.status());
      auto confirm = StringField(*body, "confirm", "the sweep id, typed again");
      if (!confirm.ok()) return ErrorReply(confirm.status());
      v1::DeleteSweepRequest req;
      req.set_sweep_id(id);
      req.set_confirm(confirm->value_or(""));
      auto out = backend_->DeleteSweep(req);
      if (!out.ok()) return ErrorReply(out.status());
      return JsonReply(200, Json{{"cells_deleted", out->cells_deleted()},
                                 {"results_deleted", out->results_deleted()}});
    }
    default:
      return ErrorReply(404, absl::StrCat("no such page: ", request.path));
  }
}

}  // namespace ranksweep::client::ui
