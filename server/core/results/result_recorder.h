// Results coming in, over the `results` table (and its packed copies and
// running group aggregates, result_schema.h): every result of a
// CompleteTasks call is checked against the task this coordinator handed
// out (result_checks.h) and under the lease it names, then stored, all or
// nothing; the cell becomes DONE, its (head, rank) is judged for pruning and
// its sweep finished or advanced.
//
// Errors: InvalidArgument naming results[i] for a result no trainer could
// produce or the wrong seed; FailedPrecondition for a stale or foreign lease
// (one message for both, lease_manager.h) or a cancelled or pruned cell;
// NotFound for an unknown cell. Nothing of a failed call is stored.
//
// Thread-safety: safe from any thread; it runs inside the caller's write
// transaction.
#ifndef RANKSWEEP_SERVER_CORE_RESULTS_RESULT_RECORDER_H_
#define RANKSWEEP_SERVER_CORE_RESULTS_RESULT_RECORDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/core/events.h"
#include "server/core/leases/lease_manager.h"
#include "server/core/sweeps/cell_plan.h"
#include "server/core/sqlite.h"
#include "server/core/sweeps/sweep_lifecycle.h"
#include "server/core/types.h"

namespace ranksweep::server {

class ResultRecorder {
 public:
  using Events = TransactionEvents;

  // `sweeps` and `leases` are not owned and must outlive it.
  ResultRecorder(SweepLifecycle* sweeps, LeaseManager* leases);

  // Coordinator::Complete's transaction: records `results`, then leases
  // for `want` when it has a value (checked by LeaseManager::CheckWant):
  // the tasks it leased the first time when every result was already
  // recorded (the worker lost the reply), else new ones. Sets `events` and
  // `out` afresh.
  absl::Status CompleteIn(Connection& c, const std::string& worker_id,
                          const std::vector<CellResult>& results,
                          const std::optional<TaskWant>& want, int64_t now, Events& events,
                          CompleteOutcome& out);

 private:
  SweepLifecycle* const sweeps_;
  LeaseManager* const leases_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_RESULTS_RESULT_RECORDER_H_
