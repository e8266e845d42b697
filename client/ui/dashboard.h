// The dashboard's request handling, without HTTP or gRPC: a request (method,
// path, query, Host header) in, a reply (status, content type, body) out.
// Data comes from a Backend, which the `ranksweep ui` command implements
// with the coordinator's SweepService stub (grpc_backend.h) and unit tests
// with a fake. http_server.h puts it on a socket.
//
// Routes (GET or HEAD; anything else is 405):
//   /                                   the page (index.html); the pages are
//                                       client-side: #/sweeps, #/sweep/ID,
//                                       #/compare/ID,ID..., #/workers
//   /assets/NAME                        the embedded scripts and styles
//   /api/sweeps[?limit=N]               SweepsView, newest first
//   /api/sweeps/ID                      SweepView
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
// Errors are JSON {"error": "..."}: 400 for a bad parameter (named), 403 for
// a Host header that does not name this dashboard (listen.h), 404 for an
// unknown path or sweep, 502 when the coordinator cannot be reached or
// refuses (its message is kept), 504 when it times out.
//
// Thread-safety: Dashboard is immutable after construction; Handle may be
// called from many threads at once if the Backend allows it (the gRPC one
// does).
#ifndef RANKSWEEP_CLIENT_UI_DASHBOARD_H_
#define RANKSWEEP_CLIENT_UI_DASHBOARD_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ranksweep/v1/ranksweep.pb.h"

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
  virtual absl::StatusOr<std::vector<v1::SweepInfo>> ListSweeps(int limit) = 0;
  virtual absl::StatusOr<v1::SweepInfo> GetSweep(const std::string& sweep_id) = 0;
  // Every per-seed row `request` matches (all pages); request.group_by is
  // unset.
  virtual absl::StatusOr<std::vector<v1::ResultRow>> QueryRows(
      const v1::QueryResultsRequest& request) = 0;
  // The grouped reply (groups, heads, facts) for the whole sweep.
  virtual absl::StatusOr<v1::QueryResultsResponse> QueryGroups(const std::string& sweep_id) = 0;
  virtual absl::StatusOr<std::vector<v1::WorkerInfo>> ListWorkers() = 0;
  virtual std::unique_ptr<EventStream> WatchSweep(const std::string& sweep_id) = 0;
};

struct HttpRequest {
  std::string method;  // "GET", ...
  std::string path;    // decoded, without the query
  std::map<std::string, std::string> query;
  std::string host;    // the Host header
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
    kNone, kIndex, kAsset, kSweeps, kSweep, kResults, kSummary, kEvents, kWorkers, kCurves
  };
  Kind kind = kNone;
  std::string arg;  // the sweep id, or the asset name
};
Route ParseRoute(const std::string& path);

// The SSE text of one event of a watch stream, and of its end (`finish` is
// the stream's status: OK when the sweep ended).
std::string ProgressEventText(const v1::SweepEvent& event);
std::string EndEventText(const v1::SweepInfo& last, const absl::Status& finish);

// The HTTP status for a failed backend call.
int HttpStatusFor(const absl::Status& status);

class Dashboard {
 public:
  // `backend` is not owned and outlives the Dashboard. `port` and
  // `allow_remote` are for the Host check (HostHeaderAllowed). `clock_ms`
  // gives the current unix time in ms (worker "last seen" ages).
  Dashboard(Backend* backend, int port, bool allow_remote, int64_t (*clock_ms)());

  HttpReply Handle(const HttpRequest& request) const;

 private:
  HttpReply Api(const Route& route, const HttpRequest& request) const;

  Backend* backend_;
  int port_;
  bool allow_remote_;
  int64_t (*clock_ms_)();
};

}  // namespace ranksweep::client::ui

#endif  // RANKSWEEP_CLIENT_UI_DASHBOARD_H_
