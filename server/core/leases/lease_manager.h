// Leases, over the lease columns of the `cells` table: which worker holds a
// cell, under which lease id, until when, and how many attempts it used.
// It leases tasks (lease_order.h picks the group), extends and answers
// heartbeats (recording pruning progress), takes back failed, released and
// expired leases, and finds the lease a result or a failure names.
//
//   PENDING --LeaseTasksIn--> LEASED --(results: result_recorder.h)--> DONE
//   LEASED --expiry / Fail--> PENDING (attempt kept), or FAILED once the
//          cell has used max_attempts leases
//   LEASED --Fail(release)--> PENDING (the attempt is given back)
//
// Every lease gets a new random lease id (63 bits, unguessable) which is the
// fencing token: only the cell's current lease, held by the caller, is
// honoured, and no reply tells another worker's lease from a stale one.
//
// The top-level calls (Heartbeat, Fail, Expire) run their own write
// transaction and fill `events` for the caller to dispatch after the
// commit; the `...In` calls run inside the caller's transaction.
//
// Thread-safety: safe from any thread; writes are serialized by the store.
#ifndef RANKSWEEP_SERVER_CORE_LEASES_LEASE_MANAGER_H_
#define RANKSWEEP_SERVER_CORE_LEASES_LEASE_MANAGER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/clock.h"
#include "server/core/events.h"
#include "server/core/store.h"
#include "server/core/sweeps/cell_plan.h"
#include "server/core/sweeps/spec_cache.h"
#include "server/core/sweeps/sweep_lifecycle.h"
#include "server/core/types.h"

namespace ranksweep::server {

struct LeaseOptions {
  int64_t lease_ms = 60'000;  // a lease lasts this long unless extended
  int max_attempts = 3;       // leases a cell may use before it is FAILED
  // Limits on worker requests, as ranksweep.proto documents them.
  int max_tasks_per_acquire = 64;
  int max_seeds_per_task = 1024;
  int default_seeds_per_task = 64;  // when the worker asks for 0
};

// The cell whose current or last lease is a lease id.
struct LeaseRow {
  int64_t cell_id = 0;
  int state = 0;
  std::string worker_id;
};

// The cell whose current or last lease is `lease_id`, if any and not done
// (a done cell's lease reads as unknown: see FindLease's SQL).
absl::StatusOr<std::optional<LeaseRow>> FindLease(Connection& c, int64_t lease_id);

// A cell as `cells` holds it, for the calls that act on one by id.
struct CellRow {
  std::string sweep_id;
  CellGroupKey group;
  uint64_t seed = 0;
  int state = 0;
  int attempt = 0;
  int64_t lease_id = 0;
  std::string worker_id;
};

// The cell `cell_id`; NotFound ("no cell N") when there is none.
absl::StatusOr<CellRow> ReadCell(Connection& c, int64_t cell_id);

// A lease the caller does not hold, whatever the reason (expired,
// reassigned, another worker's, cancelled before it was leased): one
// FailedPrecondition message for all, naming no other lease.
absl::Status NotYourLease(int64_t lease_id, int64_t cell_id);

class LeaseManager {
 public:
  using Events = TransactionEvents;

  // `store`, `clock`, `specs` and `sweeps` are not owned and must outlive it.
  LeaseManager(Store* store, const Clock* clock, SpecCache* specs, SweepLifecycle* sweeps,
               LeaseOptions options);
  LeaseManager(const LeaseManager&) = delete;
  LeaseManager& operator=(const LeaseManager&) = delete;

  const LeaseOptions& options() const { return options_; }

  // Checks `want` and fills in its defaults (0 tasks = 1, 0 seeds = the
  // default); InvalidArgument names the field after `field_prefix`.
  absl::Status CheckWant(TaskWant& want, const char* field_prefix) const;

  // Acquire's transaction: marks the worker seen, checks it is not
  // quarantined, then leases for a checked `want`. Sets `events` and
  // `tasks` afresh, as a transaction that may run twice must.
  absl::Status AcquireIn(Connection& c, const std::string& worker_id, const TaskWant& want,
                         int64_t now, Events& events, std::vector<Task>& tasks);
  // Leases tasks for a checked `want` (the order and memory rules of
  // Coordinator::Acquire); appends them to `tasks`. `next_of`: for the
  // `next` tasks of a CompleteTasks call, the smallest lease id of its
  // results (cells.next_of); 0 otherwise.
  absl::Status LeaseTasksIn(Connection& c, const std::string& worker_id, const TaskWant& want,
                            int64_t now, Events& events, std::vector<Task>& tasks,
                            int64_t next_of = 0);
  // The tasks a CompleteTasks call whose results' smallest lease id was
  // `next_of` leased to `worker_id` as `next`, those of its cells still
  // leased to it, deadlines extended from `now`; appended to `tasks` in
  // their first reply's order. For the same results sent again.
  absl::Status LeasedAsNextIn(Connection& c, const std::string& worker_id, int64_t next_of,
                              int64_t now, Events& events, std::vector<Task>& tasks);

  // Coordinator::Heartbeat: extends the worker's live leases, records the
  // pruning progress of its live leases and answers the rest.
  absl::StatusOr<HeartbeatOutcome> Heartbeat(const std::string& worker_id,
                                             const std::vector<int64_t>& lease_ids,
                                             const std::vector<LeaseProgress>& progress,
                                             Events& events);
  // Coordinator::Fail.
  absl::Status Fail(const std::string& worker_id, const std::vector<int64_t>& lease_ids,
                    const std::string& reason, bool release, Events& events);
  // Coordinator::ExpireLeases: looks on the read connection first, so that
  // the common case (nothing expired) never takes the write lock.
  absl::StatusOr<int64_t> Expire(Events& events);
  // Reclaims every lease whose deadline is at or before `now_ms`.
  absl::StatusOr<int64_t> ExpireIn(Connection& c, int64_t now_ms, Events& events);

  // Moves one leased cell back to pending, or to FAILED (with a failed
  // result row) once it has used max_attempts. `use_attempt` false gives
  // the attempt back (release).
  absl::Status ReturnCellIn(Connection& c, int64_t cell_id, const std::string& reason,
                            bool use_attempt, Events& events);

 private:
  // Heartbeat's progress: records the scores of the caller's live leases
  // and judges each (head, rank) they belong to.
  absl::Status RecordProgress(Connection& c, const std::string& worker_id,
                              const std::vector<LeaseProgress>& progress, int64_t now,
                              Events& events);

  Store* const store_;
  const Clock* const clock_;
  SpecCache* const specs_;
  SweepLifecycle* const sweeps_;
  const LeaseOptions options_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_LEASES_LEASE_MANAGER_H_
