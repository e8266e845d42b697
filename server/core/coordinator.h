// The coordinator's logic: sweeps expand into cells (head x rank x seed), the
// cells are leased to workers in groups of one (sweep, head, rank), results
// and failures come back under those leases, and queries read the results.
// It knows nothing of gRPC; server/service adapts it to ranksweep.v1.
//
// A facade: the work is done by managers, each owning its tables through
// the store (server/core/store.h) with its own statements --
// SweepLifecycle (sweeps/), LeaseManager (leases/), ResultRecorder and
// SweepQueries (results/), WorkerManager (workers/). The coordinator wires
// them, runs the transactions that span two of them (recovery, the async
// calls) and delivers the events they collect after each commit.
//
// State lives in the Store only (plus an in-memory cache of immutable sweep
// specs), so a coordinator rebuilt on the same database file by Recover()
// continues exactly where the previous process stopped.
//
// Life of a cell:
//   PENDING --Acquire--> LEASED --Complete--> DONE
//   LEASED --lease expires / Fail--> PENDING (attempt kept) or FAILED once
//          `max_attempts` leases have been used
//   LEASED --Fail(release)--> PENDING (the attempt is given back)
//   PENDING or LEASED --Cancel--> CANCELLED
// Every lease gets a new random lease id (63 bits, unguessable); the
// lease id is the fencing token: Heartbeat, Complete and Fail name it, and
// only the cell's current lease (held by the caller) is honoured. A lease
// stays valid until ExpireLeases() finds it past its deadline. A sweep is
// RUNNING while any cell is pending or leased, then DONE (all done) or FAILED
// (some failed); Cancel makes it CANCELLED.
//
// Ordering: Acquire serves the highest priority first; sweeps of equal
// priority take turns (round-robin, the position persisted); inside a sweep,
// (head, rank) groups go in the order their cells were created.
//
// Errors: InvalidArgument for bad arguments (naming the field), NotFound for
// unknown sweeps, workers or cells, FailedPrecondition for a stale or foreign
// lease (nothing of the request is recorded), store errors as they come.
//
// Listeners: changes are delivered after the transaction that made them has
// committed, with no coordinator lock held: on the thread that called, or
// for AcquireAsync/CompleteAsync on the store's finisher thread, where they
// hold up the other calls' replies. Listeners must be quick and must not call
// Subscribe/Unsubscribe or a method that writes from inside the callback.
//
// Thread-safety: every method is safe to call concurrently. Writes are
// serialized by the store; queries run on the store's read connection and do
// not wait for writes.
#ifndef RANKSWEEP_SERVER_CORE_COORDINATOR_H_
#define RANKSWEEP_SERVER_CORE_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/spec/spec.h"
#include "server/core/clock.h"
#include "server/core/events.h"
#include "server/core/leases/lease_manager.h"
#include "server/core/results/result_queries.h"
#include "server/core/results/result_recorder.h"
#include "server/core/results/statistics.h"  // Summarize, for callers of this header
#include "server/core/results/result_blocks.h"
#include "server/core/store.h"
#include "server/core/sweeps/cell_plan.h"  // TaskKey, for callers of this header
#include "server/core/sweeps/spec_cache.h"
#include "server/core/sweeps/sweep_lifecycle.h"
#include "server/core/types.h"
#include "server/core/workers/worker_manager.h"

namespace ranksweep::server {

struct CoordinatorOptions {
  int64_t lease_ms = 60'000;  // a lease lasts this long unless extended
  int max_attempts = 3;       // leases a cell may use before it is FAILED
  // Limits on worker requests, as ranksweep.proto documents them.
  int max_tasks_per_acquire = 64;
  int max_seeds_per_task = 1024;
  int default_seeds_per_task = 64;  // when the worker asks for 0
  // Submit rejects a sweep any of whose cells, trained as one seed, is
  // estimated (EstimateTaskMemoryBytes) above this. 0 = no limit.
  int64_t max_task_memory_bytes = int64_t{64} << 30;
  // The result cache: a new cell whose task (TaskKey) and seed match a
  // result the coordinator can vouch for is done at once with a copy of
  // that result, unless the sweep sets reuse_results = false. A source must
  // have been trained by a worker that registered code_version or one of
  // trusted_builds, that is in good standing (not quarantined, nor its
  // token), for a sweep of the new sweep's owner unless shared_cache
  // (cell_plan.h, CachePolicy). Empty code_version and trusted_builds turn
  // the cache off. ranksweepd sets its own build id, which includes a hash
  // of the trainer and spec sources (cmake/BuildId.cmake), and takes more
  // from --trusted-build; --shared-cache shares results between users.
  std::string code_version;
  std::vector<std::string> trusted_builds;
  bool shared_cache = false;
  // A row query that may return at least this many rows (from its page
  // size and the cell id range of the sweep's results) unpacks and hands on
  // its rows on a second thread while SQLite reads the next ones. 0: never.
  int64_t two_thread_query_rows = 8'192;
};


class Coordinator {
 public:
  using SweepListener = std::function<void(const SweepChange&)>;
  using WorkListener = std::function<void()>;

  // `store` and `clock` are not owned and must outlive the coordinator.
  Coordinator(Store* store, const Clock* clock, CoordinatorOptions options = {});
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Start-up recovery; call once, before serving. Leases that were in flight
  // when the previous process stopped are KEPT with their persisted deadline
  // (a worker that survived the restart heartbeats and completes them as
  // usual); those already past their deadline are expired now, exactly as
  // ExpireLeases() would. RUNNING sweeps with nothing left to run are
  // finished. Nothing else needs rebuilding: all state is in the store.
  absl::StatusOr<RecoveryReport> Recover();

  // ---------------------------------------------------------------- sweeps

  // Validates `spec` (ValidateSweepSpec: InvalidArgument naming the field),
  // checks every (head, rank) for one seed against
  // options.max_task_memory_bytes (InvalidArgument naming the head, rank,
  // estimate and limit; nothing stored) and stores the sweep and its cells
  // in one transaction. Heads without a
  // rank (HeadHasRank false) get one cell per seed with rank 0.
  absl::StatusOr<SubmitOutcome> Submit(const SweepSpec& spec, const std::string& owner);
  // Submit's checks alone (ValidateSweepSpec and the task memory limit),
  // with the same status; nothing is read or stored. ValidateSweep.
  absl::Status CheckSubmit(const SweepSpec& spec) const;

  absl::StatusOr<SweepInfo> GetSweep(const std::string& sweep_id);
  // Newest first; `state` unset = all; limit <= 0 means 100; `owner` set =
  // only that owner's sweeps (the limit applies after the filter).
  absl::StatusOr<std::vector<SweepInfo>> ListSweeps(
      std::optional<SweepState> state, int limit,
      const std::optional<std::string>& owner = std::nullopt);
  // The owner recorded at Submit, a cheap lookup for access checks.
  // InvalidArgument for an empty id, NotFound for an unknown sweep.
  absl::StatusOr<std::string> SweepOwner(const std::string& sweep_id);
  // A number that changes whenever a result row of the sweep is stored,
  // replaced or deleted, by any call (schema 19: triggers on result_packs),
  // and never returns to an earlier value: while it stands, a row query of
  // the sweep reads what it read before. 0 for a sweep with no result yet.
  // InvalidArgument for an empty id; an unknown sweep is not an error.
  absl::StatusOr<int64_t> ResultsVersion(const std::string& sweep_id);
  // Stores column blocks of the sweep's rows as they stood at results
  // version `version` (QueryOutcome::results_version), in one write:
  // server/core/results/result_blocks.h. The blocks stored; Aborted, with
  // nothing stored, when the version has moved since.
  absl::StatusOr<int> StoreColumnBlocks(const std::string& sweep_id, int64_t version,
                                        const std::string& layout,
                                        const std::vector<ColumnBlock>& blocks);

  // Stops handing out the sweep's cells: pending and leased cells become
  // CANCELLED (leased ones are reported to their worker by Heartbeat) and the
  // sweep CANCELLED. Returns the cells cancelled. NotFound for an unknown
  // sweep; FailedPrecondition for one that has already ended.
  absl::StatusOr<int64_t> Cancel(const std::string& sweep_id);

  // ---------------------------------------------------------------- workers

  // Registers a worker and returns its id and the session secret of this
  // registration. A known `worker_id` keeps its identity; its previous
  // process is presumed gone, so the cells it still held are released to
  // pending without using an attempt, and its session ends. A worker id is
  // bound to the token (`registration.owner`) that first registered it:
  // PermissionDenied for another token's, with nothing written.
  absl::StatusOr<RegisteredWorker> RegisterWorker(const WorkerRegistration& registration);

  // The check the service runs before every worker call but RegisterWorker
  // (worker_registry.h, CheckWorkerSession): NotFound for an unknown worker,
  // PermissionDenied unless `owner` registered it and `session` is its
  // latest registration's. On the store's quick read connection; writes
  // nothing. The calls below trust their worker_id once it passed.
  absl::Status CheckWorkerSession(const std::string& worker_id, const std::string& owner,
                                  const std::string& session);

  // Leases up to `max_tasks` tasks, each up to `max_seeds` pending cells of
  // one (sweep, head, rank). Returns an empty list when there is no work.
  //
  // Memory: `memory_bytes` is the memory the returned tasks may use
  // together; 0 = unknown, and then the worker's registered memory_bytes
  // counts; 0 there too = unlimited. A task gets at most as many seeds as
  // fit (EstimateTaskMemory(...).Total(k) <= what is left), and each task
  // returned uses up its estimate. A group of which not even one seed fits
  // is skipped (left for a larger worker) and the next group, then the next
  // sweep, in the usual order is considered.
  //
  // InvalidArgument for max_tasks, max_seeds or memory_bytes out of range;
  // NotFound for an unregistered worker.
  absl::StatusOr<std::vector<Task>> Acquire(const std::string& worker_id, int max_tasks,
                                            int max_seeds, int64_t memory_bytes = 0);

  // Extends the worker's live leases to now + lease_ms. Leases of cancelled
  // cells are reported in cancelled_lease_ids, of pruned ones in
  // pruned_lease_ids; leases that expired, were reassigned, never existed or
  // are another worker's, alike, in lost_lease_ids (nothing of another
  // worker's is extended or revealed).
  //
  // `progress` (recipe pruning, server/core/sweeps/pruning.h): each running seed's
  // training error at an evaluation. Of a live lease of the worker in a
  // sweep that prunes, it is recorded at its rung, and the (head, rank) is
  // judged, in the same transaction, before the leases are answered.
  // InvalidArgument naming progress[i] for a lease not in `lease_ids`, a
  // step below 1 or a train_error outside [0, 1]; nothing is written then.
  absl::StatusOr<HeartbeatOutcome> Heartbeat(const std::string& worker_id,
                                             const std::vector<int64_t>& lease_ids,
                                             const std::vector<LeaseProgress>& progress = {});

  // Records results, all or nothing, in one transaction: OK means every
  // result is durable. A result for a cell already done under the same lease
  // counts as a duplicate. FailedPrecondition when a lease is stale (not the
  // cell's current lease, or the cell was cancelled) or foreign (held by
  // another worker), with one message for both that names no other lease;
  // NotFound for an unknown cell; InvalidArgument when the result's seed is
  // not the cell's.
  //
  // With `next`, the same transaction then leases tasks as Acquire(next)
  // would, into the outcome's next_tasks (empty when there is no work), so
  // that a worker hands in results and takes its next task in one call and
  // one commit. A call that fails leases nothing; InvalidArgument naming
  // "next.max_tasks", "next.max_seeds" or "next.memory_bytes" when one is out
  // of range (checked before anything is written).
  absl::StatusOr<CompleteOutcome> Complete(const std::string& worker_id,
                                           const std::vector<CellResult>& results,
                                           const std::optional<TaskWant>& next = std::nullopt);

  // Acquire() and Complete() without waiting for the commit: they queue
  // their transaction (Store::WriteAsync) and return. `done` gets the same
  // outcome the waiting calls would return, on the store's finisher thread
  // as soon as the commit has synced, so it must be short and must not block.
  // An argument out of range calls `done` at once, on the calling thread.
  using AcquireDone = std::function<void(absl::StatusOr<std::vector<Task>>)>;
  void AcquireAsync(std::string worker_id, TaskWant want, AcquireDone done);
  using CompleteDone = std::function<void(absl::StatusOr<CompleteOutcome>)>;
  void CompleteAsync(std::string worker_id, std::vector<CellResult> results,
                     std::optional<TaskWant> next, CompleteDone done);

  // Gives up leases. release=true: the cells return to pending and the
  // attempt is given back. release=false: the attempt counts; the cell goes
  // back to pending, or is FAILED with `reason` once it has used
  // max_attempts. Leases that are no longer current, or are another
  // worker's, are ignored (a repeated Fail is harmless).
  absl::Status Fail(const std::string& worker_id, const std::vector<int64_t>& lease_ids,
                    const std::string& reason, bool release);

  // Reclaims every lease whose deadline is at or before the clock's now:
  // back to pending with its attempt count, or FAILED when it has used
  // max_attempts. Returns how many leases expired.
  absl::StatusOr<int64_t> ExpireLeases();

  // ---------------------------------------------------------------- queries

  // Per-cell rows in cell id order, a page at a time (page_size,
  // after_cell_id), or groups by (head, rank) with mean/std/min/max/ci95.
  // Grouped, it also reports each group's missing seeds (cells without a
  // DONE result), one HeadSummary per head (analysis.h: the transition rank,
  // computed over the groups returned, so a rank filter changes it; the test
  // split is analysed for pool datasets with test_size > 0) and the
  // dataset's facts from a done cell (unset when none of those returned is
  // done). Groups are read from the running aggregates in result_groups
  // (schema version 5), one row per group, plus the seeds of cells not done;
  // only a seed filter makes it aggregate the result rows themselves. Rows
  // of done and failed cells are read from their packed copies
  // (result_packs, schema version 6, server/core/results/packed_row.h).
  // InvalidArgument when sweep_id is empty, `head` names no head of the
  // sweep, page_size is negative, or after_cell_id is negative or set on a
  // grouped query; NotFound for an unknown sweep.
  absl::StatusOr<QueryOutcome> Query(const ResultQuery& query);
  // The same query, but rows go to `rows` one by one as they are read
  // (while the read connection is held) instead of into the outcome's
  // `rows`, which stays empty: for a caller that builds its reply as it goes.
  absl::StatusOr<QueryOutcome> Query(const ResultQuery& query, RowSink& rows);

  // Every registered worker, by id.
  absl::StatusOr<std::vector<WorkerInfo>> ListWorkers();

  // The cells of every sweep in the store, by state (states with no cell are
  // absent); read on the read connection, for the operators' metrics.
  absl::StatusOr<std::map<CellState, int64_t>> CountCellsByState();
  // The sweeps in the store, by state (states with no sweep are absent);
  // read on the read connection, for the operators' metrics.
  absl::StatusOr<std::map<SweepState, int64_t>> CountSweepsByState();

  // Takes back the results of `worker_id` (server/core/workers/quarantine.h): its
  // DONE results that finished at or after `since_ms` (0 = all) and every
  // copy the result cache served of them become invalid rows (a Query with
  // state kInvalid lists them), their groups are summed up again without
  // them, and their cells return to pending (a new lease, a new attempt;
  // cancelled in a cancelled sweep). DONE or FAILED sweeps that get a
  // pending cell back are RUNNING again. `by` (the caller) and the time are
  // recorded. One transaction. NotFound for an unknown worker,
  // InvalidArgument for a negative `since_ms`.
  //
  // The quarantine holds: the worker's current leases are released (their
  // attempts given back) and, until Unquarantine, it can neither register
  // again nor lease, heartbeat, complete or fail (PermissionDenied). A
  // reset cell starts its attempts afresh (attempt 0, so --max-attempts new
  // leases): the invalidated training does not count against it.
  // With `hold_token`, the token that registered the worker is held too:
  // every worker of that token, registered now or later, is refused alike
  // until Unquarantine(worker_id) (quarantine.h).
  absl::StatusOr<QuarantineOutcome> Quarantine(const std::string& worker_id, int64_t since_ms,
                                               const std::string& by, bool hold_token = false);

  // Lifts the hold of Quarantine on `worker_id` and on the token its
  // quarantine held (its invalid rows stay invalid). Returns whether either
  // was held; NotFound for an unknown worker. `by` goes to the log.
  absl::StatusOr<bool> Unquarantine(const std::string& worker_id, const std::string& by);

  // ---------------------------------------------------------------- listening

  // Calls `listener` for every change of `sweep_id` (of every sweep when it
  // is empty) until Unsubscribe(id) returns; after that it is never called
  // again.
  int64_t Subscribe(const std::string& sweep_id, SweepListener listener);
  void Unsubscribe(int64_t subscription);

  // Called whenever cells may have become pending (submit, expiry, release,
  // retry), so that waiting Acquire long-polls can try again. One listener.
  void SetWorkListener(WorkListener listener);

  const CoordinatorOptions& options() const { return options_; }

 private:
  using Events = TransactionEvents;  // collected inside a transaction, sent after it

  void Dispatch(Events& events);

  Store* const store_;
  const Clock* const clock_;
  const CoordinatorOptions options_;

  // The managers, each over its own tables (docs/ARCHITECTURE.md), in the
  // order they depend on each other; all share the spec cache.
  SpecCache specs_;
  SweepQueries queries_;  // the read side, on the store's read connection
  SweepLifecycle sweeps_;
  LeaseManager leases_;
  ResultRecorder results_;
  WorkerManager workers_;

  ChangeListeners listeners_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_COORDINATOR_H_
