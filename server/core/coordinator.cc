#include "server/core/coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/log.h"

namespace ranksweep::server {

namespace {

// The builds and reach of the result cache (cell_plan.h): the coordinator's
// own build, then the admitted ones, each once.
CachePolicy CachePolicyOf(const CoordinatorOptions& options) {
  CachePolicy policy;
  policy.shared = options.shared_cache;
  std::vector<std::string> builds = options.trusted_builds;
  builds.insert(builds.begin(), options.code_version);
  for (const std::string& b : builds) {
    if (b.empty() || std::find(policy.builds.begin(), policy.builds.end(), b) !=
                         policy.builds.end()) {
      continue;
    }
    policy.builds.push_back(b);
  }
  return policy;
}

LeaseOptions LeaseOptionsOf(const CoordinatorOptions& options) {
  LeaseOptions lease;
  lease.lease_ms = options.lease_ms;
  lease.max_attempts = options.max_attempts;
  lease.max_tasks_per_acquire = options.max_tasks_per_acquire;
  lease.max_seeds_per_task = options.max_seeds_per_task;
  lease.default_seeds_per_task = options.default_seeds_per_task;
  return lease;
}

}  // namespace

Coordinator::Coordinator(Store* store, const Clock* clock, CoordinatorOptions options)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      queries_(store, clock, &specs_, options_.lease_ms, options_.two_thread_query_rows),
      sweeps_(store, clock, &specs_, CachePolicyOf(options_), options_.max_task_memory_bytes),
      leases_(store, clock, &specs_, &sweeps_, LeaseOptionsOf(options_)),
      results_(&sweeps_, &leases_),
      workers_(store, clock, &leases_) {}

// Events: server/core/events.h.
void Coordinator::Dispatch(Events& events) { listeners_.Dispatch(events); }

int64_t Coordinator::Subscribe(const std::string& sweep_id, SweepListener listener) {
  return listeners_.Subscribe(sweep_id, std::move(listener));
}

void Coordinator::Unsubscribe(int64_t subscription) { listeners_.Unsubscribe(subscription); }

void Coordinator::SetWorkListener(WorkListener listener) {
  listeners_.SetWorkListener(std::move(listener));
}

// ------------------------------------------------------------------ recovery

absl::StatusOr<RecoveryReport> Coordinator::Recover() {
  RecoveryReport report;
  Events events;
  const int64_t now = clock_->NowMs();
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    report = RecoveryReport();
    events = Events();
    ASSIGN_OR_RETURN(report.leases_expired, leases_.ExpireIn(c, now, events));
    return sweeps_.RecoverIn(c, events, report);
  }));
  Dispatch(events);
  LogEvent("recovered %s: %d running sweeps, %d pending cells, %d leases kept, %d expired, "
           "%d sweeps finished",
           store_->path(), report.running_sweeps, report.pending_cells, report.leases_kept,
           report.leases_expired, report.sweeps_finished);
  return report;
}

// ------------------------------------------------------------------ sweeps

absl::StatusOr<SubmitOutcome> Coordinator::Submit(const SweepSpec& spec, const std::string& owner) {
  Events events;
  ASSIGN_OR_RETURN(SubmitOutcome out, sweeps_.Submit(spec, owner, events));
  Dispatch(events);
  return out;
}

absl::Status Coordinator::CheckSubmit(const SweepSpec& spec) const {
  return sweeps_.CheckSubmit(spec);
}

absl::StatusOr<int64_t> Coordinator::Cancel(const std::string& sweep_id) {
  Events events;
  ASSIGN_OR_RETURN(int64_t cancelled, sweeps_.Cancel(sweep_id, events));
  Dispatch(events);
  return cancelled;
}

// The reads: server/core/results/result_queries.h.
absl::StatusOr<SweepInfo> Coordinator::GetSweep(const std::string& sweep_id) {
  return queries_.GetSweep(sweep_id);
}

absl::StatusOr<std::vector<SweepInfo>> Coordinator::ListSweeps(
    std::optional<SweepState> state, int limit, const std::optional<std::string>& owner) {
  return queries_.ListSweeps(state, limit, owner);
}

absl::StatusOr<std::string> Coordinator::SweepOwner(const std::string& sweep_id) {
  return queries_.SweepOwner(sweep_id);
}

absl::StatusOr<int64_t> Coordinator::ResultsVersion(const std::string& sweep_id) {
  return queries_.ResultsVersion(sweep_id);
}

absl::StatusOr<int> Coordinator::StoreColumnBlocks(const std::string& sweep_id, int64_t version,
                                                   const std::string& layout,
                                                   const std::vector<ColumnBlock>& blocks) {
  int stored = 0;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(stored, ::ranksweep::server::StoreColumnBlocks(c, sweep_id, version,
                                                                    layout, blocks));
    return absl::OkStatus();
  }));
  if (stored == kResultsMoved) {
    return absl::AbortedError(absl::StrCat("sweep ", sweep_id, ": its results moved since version ",
                                           version, " was read; no column block stored"));
  }
  return stored;
}

absl::StatusOr<QueryOutcome> Coordinator::Query(const ResultQuery& query) {
  return queries_.Query(query);
}

absl::StatusOr<QueryOutcome> Coordinator::Query(const ResultQuery& query, RowSink& sink) {
  return queries_.Query(query, sink);
}

absl::StatusOr<std::vector<WorkerInfo>> Coordinator::ListWorkers() {
  return queries_.ListWorkers();
}

absl::StatusOr<std::map<CellState, int64_t>> Coordinator::CountCellsByState() {
  return queries_.CountCellsByState();
}

absl::StatusOr<std::map<SweepState, int64_t>> Coordinator::CountSweepsByState() {
  return queries_.CountSweepsByState();
}

// ------------------------------------------------------------------ workers

absl::StatusOr<RegisteredWorker> Coordinator::RegisterWorker(const WorkerRegistration& reg) {
  Events events;
  ASSIGN_OR_RETURN(RegisteredWorker out, workers_.Register(reg, events));
  Dispatch(events);
  return out;
}

absl::Status Coordinator::CheckWorkerSession(const std::string& worker_id,
                                             const std::string& owner,
                                             const std::string& session) {
  return workers_.CheckSession(worker_id, owner, session);
}

absl::StatusOr<QuarantineOutcome> Coordinator::Quarantine(const std::string& worker_id,
                                                          int64_t since_ms,
                                                          const std::string& by,
                                                          bool hold_token) {
  Events events;
  ASSIGN_OR_RETURN(QuarantineOutcome out,
                   workers_.Quarantine(worker_id, since_ms, by, hold_token, events));
  Dispatch(events);
  return out;
}

absl::StatusOr<bool> Coordinator::Unquarantine(const std::string& worker_id,
                                               const std::string& by) {
  return workers_.Unquarantine(worker_id, by);
}

// ------------------------------------------------------------------ leases

absl::StatusOr<std::vector<Task>> Coordinator::Acquire(const std::string& worker_id,
                                                       int max_tasks, int max_seeds,
                                                       int64_t memory_bytes) {
  TaskWant want{max_tasks, max_seeds, memory_bytes};
  RETURN_IF_ERROR(leases_.CheckWant(want, ""));
  const int64_t now = clock_->NowMs();
  std::vector<Task> tasks;
  Events events;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    return leases_.AcquireIn(c, worker_id, want, now, events, tasks);
  }));
  Dispatch(events);
  return tasks;
}

void Coordinator::AcquireAsync(std::string worker_id, TaskWant want, AcquireDone done) {
  if (absl::Status s = leases_.CheckWant(want, ""); !s.ok()) return done(s);
  // What the transaction fills in, kept until `done` has run.
  struct Call {
    std::string worker_id;
    TaskWant want;
    int64_t now;
    AcquireDone done;
    std::vector<Task> tasks;
    Events events;
  };
  auto call = std::make_shared<Call>(
      Call{std::move(worker_id), want, clock_->NowMs(), std::move(done), {}, {}});
  store_->WriteAsync(
      [this, call](Connection& c) -> absl::Status {
        return leases_.AcquireIn(c, call->worker_id, call->want, call->now, call->events,
                                 call->tasks);
      },
      [this, call](absl::Status s) {
        if (!s.ok()) return call->done(s);
        Dispatch(call->events);
        call->done(std::move(call->tasks));
      });
}

absl::StatusOr<HeartbeatOutcome> Coordinator::Heartbeat(
    const std::string& worker_id, const std::vector<int64_t>& lease_ids,
    const std::vector<LeaseProgress>& progress) {
  Events events;
  ASSIGN_OR_RETURN(HeartbeatOutcome out,
                   leases_.Heartbeat(worker_id, lease_ids, progress, events));
  Dispatch(events);
  return out;
}

absl::Status Coordinator::Fail(const std::string& worker_id, const std::vector<int64_t>& lease_ids,
                               const std::string& reason, bool release) {
  Events events;
  RETURN_IF_ERROR(leases_.Fail(worker_id, lease_ids, reason, release, events));
  Dispatch(events);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Coordinator::ExpireLeases() {
  Events events;
  ASSIGN_OR_RETURN(int64_t n, leases_.Expire(events));
  Dispatch(events);
  return n;
}

// ------------------------------------------------------------------ results

absl::StatusOr<CompleteOutcome> Coordinator::Complete(const std::string& worker_id,
                                                      const std::vector<CellResult>& results,
                                                      const std::optional<TaskWant>& next) {
  std::optional<TaskWant> want = next;
  if (want.has_value()) RETURN_IF_ERROR(leases_.CheckWant(*want, "next."));
  const int64_t now = clock_->NowMs();
  CompleteOutcome out;
  Events events;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    return results_.CompleteIn(c, worker_id, results, want, now, events, out);
  }));
  Dispatch(events);
  return out;
}

void Coordinator::CompleteAsync(std::string worker_id, std::vector<CellResult> results,
                                std::optional<TaskWant> next, CompleteDone done) {
  if (next.has_value()) {
    if (absl::Status s = leases_.CheckWant(*next, "next."); !s.ok()) return done(s);
  }
  // What the transaction reads and fills in, kept until `done` has run.
  struct Call {
    std::string worker_id;
    std::vector<CellResult> results;
    std::optional<TaskWant> want;
    int64_t now;
    CompleteDone done;
    CompleteOutcome out;
    Events events;
  };
  auto call = std::make_shared<Call>(Call{std::move(worker_id), std::move(results), next,
                                          clock_->NowMs(), std::move(done), {}, {}});
  store_->WriteAsync(
      [this, call](Connection& c) -> absl::Status {
        return results_.CompleteIn(c, call->worker_id, call->results, call->want, call->now,
                                   call->events, call->out);
      },
      [this, call](absl::Status s) {
        if (!s.ok()) return call->done(s);
        Dispatch(call->events);
        call->done(std::move(call->out));
      });
}

}  // namespace ranksweep::server
