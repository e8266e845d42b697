// The dashboard's request handling, without HTTP or gRPC: a request (method,
// path, query, Host header) in, a reply (status, content type, body) out.
// Data comes from a Backend, which the `ranksweep ui` command implements
// with the coordinator's SweepService stub (grpc_backend.h) and unit tests
// with a fake. http_server.h puts it on a socket.
//
// Routes for GET or HEAD (another method is 405):
//   /                                   the page (index.html); the pages are
//                                       client-side: #/sweeps, #/sweep/ID,
//                                       #/compare/ID,ID..., #/workers
//   /assets/NAME                        the embedded scripts and styles
//   /api/session                        {"can_act", "read_only"}: whether the
//                                       request's X-Ranksweep-Key is this
//                                       dashboard's action key
//   /api/sweeps[?limit=N&state=S&tag=T&search=Q&owner=O&archived=true|false]
//                                       ManagedSweepsView, newest first:
//                                       state, tag, search (id, name, owner,
//                                       note or a tag contains it, any case)
//                                       as the coordinator's
//                                       ListManagedSweeps; owner exactly;
//                                       archived=true adds archived sweeps
//   /api/sweeps/ID                      ManagedSweepView
//   /api/sweeps/ID/results[?format=json|csv&head=H&state=done|failed|invalid
//                          &rank=R&include_invalid=true|false]
//                                       per-seed rows (RowsView / RowsCsv);
//                                       include_invalid=true appends the rows
//                                       a quarantine invalidated (state
//                                       INVALID), as the CLI's
//                                       --include-invalid; format= makes it a
//                                       download
//   /api/sweeps/ID/summary              SummaryView
//   /api/sweeps/ID/events               progress as Server-Sent Events: one
//                                       "progress" event per SweepEvent
//                                       ({"sweep": SweepView, "message"}),
//                                       then "end" ({"state", "error"})
//   /api/workers                        WorkersView
// Actions, POST only (GET is 405), each a JSON object in and out:
//   /api/sweeps/ID/update   {name, note, add_tags, remove_tags, archived}
//                           (any of them) -> ManagedSweepView
//   /api/sweeps/ID/cancel   {} -> {"cells_cancelled"}
//   /api/sweeps/ID/retry    {failed, cancelled} (booleans, one true at
//                           least) -> {"cells_retried"}
//   /api/sweeps/ID/delete   {confirm: the sweep id again}
//                           -> {"cells_deleted", "results_deleted"}
// The coordinator decides who may (owner or admin) and checks the values
// (naming the field and its range); the dashboard decides which browser may
// ask (ActionRefusal below).
// Errors are JSON {"error": "..."}: 400 for a bad parameter or body field
// (named, with what is allowed), 401/403 when the coordinator refuses the
// token, 403 for a Host header that does not name this dashboard (listen.h)
// or a refused action, 404 for an unknown path or sweep, 409 for an action
// the sweep's state forbids, 415 for an action body that is not JSON, 502
// when the coordinator cannot be reached (its message is kept), 504 when it
// times out.
//
// Thread-safety: Dashboard is immutable after construction; Handle may be
// called from many threads at once if the Backend allows it (the gRPC one
// does).
#ifndef RANKSWEEP_CLIENT_UI_DASHBOARD_H_
#define RANKSWEEP_CLIENT_UI_DASHBOARD_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ranksweep/v1/ranksweep.pb.h"
#include "ranksweep/v1/sweep_admin.pb.h"

namespace ranksweep::client::ui {

// One open WatchSweep stream.
class EventStream {
 public:
  virtual ~EventStream() = default;
  // Blocks for the next event; false when the stream has ended (then
  // Finish() says how). Called from one thread.
  virtual bool Next(v1::SweepEvent* event) = 0;
  // Makes a blocked or later Next() return false soon. Any thread.
  virtual void Cancel() = 0;
  // After Next() returned false: OK when the sweep ended, else why not.
  virtual absl::Status Finish() = 0;
};

// What the dashboard reads from the coordinator. Errors are the
// coordinator's (absl codes numbered as gRPC's).
class Backend {
 public:
  virtual ~Backend() = default;
  // Sweeps with their notes, tags and archived mark (ListManagedSweeps).
  virtual absl::StatusOr<std::vector<v1::ManagedSweep>> ListSweeps(
      const v1::ListManagedSweepsRequest& request) = 0;
  // One sweep with its notes; NotFound for an unknown one.
  virtual absl::StatusOr<v1::ManagedSweep> GetSweep(const std::string& sweep_id) = 0;
  // Every per-seed row `request` matches (all pages); request.group_by is
  // unset.
  virtual absl::StatusOr<std::vector<v1::ResultRow>> QueryRows(
      const v1::QueryResultsRequest& request) = 0;
  // The grouped reply (groups, heads, facts) for the whole sweep.
  virtual absl::StatusOr<v1::QueryResultsResponse> QueryGroups(const std::string& sweep_id) = 0;
  virtual absl::StatusOr<std::vector<v1::WorkerInfo>> ListWorkers() = 0;
  virtual std::unique_ptr<EventStream> WatchSweep(const std::string& sweep_id) = 0;
  // The actions (SweepAdminService, and SweepService's CancelSweep).
  virtual absl::StatusOr<v1::ManagedSweep> UpdateSweep(const v1::UpdateSweepRequest& request) = 0;
  virtual absl::StatusOr<v1::DeleteSweepResponse> DeleteSweep(
      const v1::DeleteSweepRequest& request) = 0;
  virtual absl::StatusOr<int64_t> RetrySweep(const v1::RetrySweepRequest& request) = 0;
  virtual absl::StatusOr<int64_t> CancelSweep(const std::string& sweep_id) = 0;
};

struct HttpRequest {
  std::string method;  // "GET", ...
  std::string path;    // decoded, without the query
  std::map<std::string, std::string> query;
  std::string host;    // the Host header
  // Other headers, names in lower case ("origin", "content-type", ...).
  std::map<std::string, std::string> headers;
  std::string body;
};

struct HttpReply {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Set for /api/sweeps/ID/events: the server streams that sweep's events
  // (EventsPrologue, ProgressEventText..., EndEventText) instead of `body`.
  std::string stream_sweep_id;
};

// What a route names; kind kNone for an unknown path.
struct Route {
  enum Kind {
    kNone, kIndex, kAsset, kSession, kSweeps, kSweep, kResults, kSummary, kEvents, kWorkers,
    kCurves, kUpdate, kCancel, kRetry, kDelete
  };
  bool IsAction() const {
    return kind == kUpdate || kind == kCancel || kind == kRetry || kind == kDelete;
  }
  Kind kind = kNone;
  std::string arg;  // the sweep id, or the asset name
};
Route ParseRoute(const std::string& path);

// The SSE text of one event of a watch stream, and of its end (`finish` is
// the stream's status: OK when the sweep ended). The end names the sweep's
// state only when it ended; a watch cut short (the coordinator went away)
// has state null and the error, so that no page takes the last state it
// heard for the sweep's end.
std::string ProgressEventText(const v1::SweepEvent& event);
std::string EndEventText(const v1::SweepInfo& last, const absl::Status& finish);

// The HTTP status for a failed backend call.
int HttpStatusFor(const absl::Status& status);

// The header an action carries the dashboard's action key in.
inline constexpr char kActionKeyHeader[] = "x-ranksweep-key";

// Why an action request is refused before anything reaches the coordinator,
// or nullopt when it may go on. In order: a Sec-Fetch-Site other than
// same-origin, or an Origin other than http://HOST (another site's page),
// is 403; a Content-Type other than application/json is 415 (an HTML form
// or a cross-site "simple" request cannot send JSON); a read-only
// dashboard (empty `action_key`) is 403; a missing or wrong
// X-Ranksweep-Key is 403 (a viewer: a browser that did not open the manage
// link). The key is compared in constant time.
std::optional<HttpReply> ActionRefusal(const HttpRequest& request, const std::string& action_key);

class Dashboard {
 public:
  // `backend` is not owned and outlives the Dashboard. `port` and
  // `allow_remote` are for the Host check (HostHeaderAllowed). `clock_ms`
  // gives the current unix time in ms (worker "last seen" ages).
  // `action_key` is the secret an action must carry (the manage link's);
  // empty makes the dashboard read-only.
  Dashboard(Backend* backend, int port, bool allow_remote, int64_t (*clock_ms)(),
            std::string action_key);

  HttpReply Handle(const HttpRequest& request) const;

 private:
  HttpReply Api(const Route& route, const HttpRequest& request) const;
  HttpReply Action(const Route& route, const HttpRequest& request) const;

  Backend* backend_;
  int port_;
  bool allow_remote_;
  int64_t (*clock_ms_)();
  std::string action_key_;
};

}  // namespace ranksweep::client::ui

#endif  // RANKSWEEP_CLIENT_UI_DASHBOARD_H_
