// The life of a sweep, over the `sweeps` table and the cells it creates:
// submit (validate, store, create the cells, serve what the cache can),
// advance a rank search, finish a sweep with nothing left to run, prune a
// losing recipe and cancel. It also hands every other manager the sweep's
// spec (from the shared SpecCache) and its task keys.
//
//   RUNNING --last open cell ends--> DONE (all done) or FAILED (some failed)
//   RUNNING --Cancel--> CANCELLED
//
// The top-level calls (Submit, Cancel) run their own write transaction and
// fill `events` for the caller to dispatch after the commit; the `...In`
// calls run inside the caller's transaction (on its Connection).
//
// Errors: InvalidArgument naming the field for a bad spec or one whose task
// memory is above the limit (nothing stored); NotFound for an unknown sweep;
// FailedPrecondition for cancelling an ended one; store errors as they come.
//
// Thread-safety: safe from any thread; writes are serialized by the store.
#ifndef RANKSWEEP_SERVER_CORE_SWEEPS_SWEEP_LIFECYCLE_H_
#define RANKSWEEP_SERVER_CORE_SWEEPS_SWEEP_LIFECYCLE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/spec/spec.h"
#include "server/core/clock.h"
#include "server/core/events.h"
#include "server/core/store.h"
#include "server/core/sweeps/cell_plan.h"
#include "server/core/sweeps/spec_cache.h"
#include "server/core/types.h"

namespace ranksweep::server {

class SweepLifecycle {
 public:
  using Events = TransactionEvents;

  // `store`, `clock` and `specs` are not owned and must outlive it.
  // `max_task_memory_bytes`: Submit refuses a sweep any (head, rank) of
  // which, as one seed, is estimated above it (0 = no limit). `cache`: what
  // the result cache may serve new cells from (cell_plan.h).
  SweepLifecycle(Store* store, const Clock* clock, SpecCache* specs, CachePolicy cache,
                 int64_t max_task_memory_bytes);
  SweepLifecycle(const SweepLifecycle&) = delete;
  SweepLifecycle& operator=(const SweepLifecycle&) = delete;

  // What Submit checks before it writes anything: ValidateSweepSpec, then
  // every (head, rank) as one seed against the task memory limit. Reads and
  // writes nothing.
  absl::Status CheckSubmit(const SweepSpec& spec) const;

  // CheckSubmit, then stores the sweep and its cells in one transaction
  // (search mode: the first probes only).
  absl::StatusOr<SubmitOutcome> Submit(const SweepSpec& spec, const std::string& owner,
                                       Events& events);

  // Pending and leased cells become CANCELLED (leased ones keep their lease
  // so that Heartbeat can tell the worker), the sweep CANCELLED. Returns the
  // cells cancelled.
  absl::StatusOr<int64_t> Cancel(const std::string& sweep_id, Events& events);

  // The sweep's spec, shared from the cache (specs never change).
  absl::StatusOr<std::shared_ptr<const SweepSpec>> SpecOf(Connection& c,
                                                         const std::string& sweep_id);
  // TaskKey (cell_plan.h) of one (head, rank, recipe), computed once.
  absl::StatusOr<std::string> TaskKeyOf(Connection& c, const std::string& sweep_id,
                                        int head_index, int rank, int recipe);

  // Advances a search-mode sweep (creating the cells of the next probed
  // ranks), then ends the sweep if it is RUNNING with no open cell left.
  absl::Status MaybeFinishIn(Connection& c, const std::string& sweep_id, Events& events);
  // Prunes what the rule stops in one (head, rank) (pruning.h), then
  // finishes or advances the sweep as a completion would.
  absl::Status PruneAndFinishIn(Connection& c, const std::string& sweep_id, int head, int rank,
                                int64_t now, Events& events);
  // Start-up: MaybeFinishIn for every RUNNING sweep, then the counts of
  // `report` (running sweeps, pending cells, leases kept; sweeps_finished
  // from `events`).
  absl::Status RecoverIn(Connection& c, Events& events, RecoveryReport& report);

 private:
  // Search mode: creates the cells of the next rank bisection asks for, for
  // every (ranked head, recipe) whose probes so far are complete (serving
  // them from the cache where it can, so it loops). Returns the cells made.
  absl::StatusOr<int64_t> AdvanceSearch(Connection& c, const std::string& sweep_id,
                                        const SweepSpec& spec, Events& events);

  Store* const store_;
  const Clock* const clock_;
  SpecCache* const specs_;
  const CachePolicy cache_;
  const int64_t max_task_memory_bytes_;

  std::mutex task_key_mu_;
  // TaskKey of (sweep, head, rank, recipe), computed once (a JSON dump and a
  // SHA-256 per completion otherwise); at most kMaxCachedTaskKeys entries.
  static constexpr size_t kMaxCachedTaskKeys = 65536;
  std::map<std::tuple<std::string, int, int, int>, std::string> task_keys_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_SWEEPS_SWEEP_LIFECYCLE_H_
