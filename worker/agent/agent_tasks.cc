// The worker agent's runner threads (agent.h): each takes the next queued
// task, trains it through the TaskRunner, matches its results to the
// task's cells and checks them, and queues them to be reported
// (agent_report.cc), or fails or gives back the task.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/spec/result_validation.h"
#include "worker/agent/agent.h"
#include "worker/agent/agent_internal.h"

namespace ranksweep::agent {

using agent_internal::kShutdownReason;

void Agent::RunnerLoop() {
  while (true) {
    std::shared_ptr<TaskState> state;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return runners_exit_ || draining_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      // A draining agent starts nothing new; Drain() releases the queue.
      if (runners_exit_ || draining_) return;
      state = queue_.front();
      queue_.pop_front();
      running_.insert(state);
      ++stats_.tasks_started;
    }
    RunOne(state);
    absl::MutexLock lock(&mu_);
    running_.erase(state);
  }
}

void Agent::RunOne(const std::shared_ptr<TaskState>& state) {
  const Task& task = state->task;
  const std::string label = Label(task);
  Log(absl::StrCat("start ", label));
  RunControl control;
  TaskState* raw = state.get();
  control.should_stop = [raw] { return raw->stop.load(); };
  control.on_progress = [this, raw, label](int64_t steps) {
    if (options_.log_every <= absl::ZeroDuration()) return;
    const absl::Time now = absl::Now();
    {
      absl::MutexLock lock(&mu_);
      if (now - raw->last_log < options_.log_every) return;
      raw->last_log = now;
    }
    Log(absl::StrCat(label, ": step ", steps));
  };
  control.on_eval = [this, raw](int64_t step, const std::vector<double>& train_error) {
    ReportProgress(*raw, step, train_error);
  };
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<SeedResult>> results = runner_->Run(task.spec, control);
  const absl::Duration took = absl::Now() - start;

  StopReason reason;
  std::set<int64_t> dropped;
  {
    absl::MutexLock lock(&mu_);
    reason = state->stop_reason;
    dropped = state->dropped;
  }
  if (reason == StopReason::kDropped) {
    Log(absl::StrCat("stopped ", label, ": leases cancelled, lost or pruned"));
    absl::MutexLock lock(&mu_);
    ++stats_.tasks_dropped;
    return;
  }
  if (reason == StopReason::kDrain) {
    Log(absl::StrCat("stopped ", label, ": drain timeout"));
    ReleaseOrFail(state, kShutdownReason, /*release=*/true);
    return;
  }
  if (!results.ok()) {
    Log(absl::StrCat("failed ", label, ": ", results.status().ToString()));
    ReleaseOrFail(state, results.status().ToString(),
                  /*release=*/absl::IsResourceExhausted(results.status()));
    return;
  }

  // Match results to cells by seed; spec.seeds and cells share one order, so
  // a runner that keeps the order maps result i to cell i.
  std::multimap<uint64_t, const SeedResult*> by_seed;
  for (const SeedResult& r : *results) by_seed.emplace(r.seed, &r);
  Batch batch;
  batch.label = label;
  std::vector<uint64_t> missing;
  for (const LeasedCell& cell : task.cells) {
    if (dropped.count(cell.lease_id)) continue;
    auto it = by_seed.find(cell.seed);
    if (it == by_seed.end()) {
      missing.push_back(cell.seed);
      continue;
    }
    batch.results.push_back({cell.cell_id, cell.lease_id, *it->second});
    by_seed.erase(it);
  }
  if (!missing.empty()) {
    // The runner broke its contract; report the whole task as failed rather
    // than store a partial, possibly mismatched, set of results.
    ReleaseOrFail(state,
                  absl::StrCat("trainer returned no result for seeds ",
                               absl::StrJoin(missing, ",")),
                  /*release=*/false);
    return;
  }
  // Results no trainer should produce (NaN, accuracy above 1, ...) are
  // not sent: the coordinator would refuse the whole batch. The task fails
  // with the reason instead, and the attempt counts.
  for (const CellResult& r : batch.results) {
    if (absl::Status s = ValidateSeedResult(r.result, task.spec.train.max_steps); !s.ok()) {
      Log(absl::StrCat("failed ", label, ": invalid result for seed ", r.result.seed, ": ",
                       s.message()));
      ReleaseOrFail(state,
                    absl::StrCat("trainer produced an invalid result for seed ", r.result.seed,
                                 ": ", s.message()),
                    /*release=*/false);
      return;
    }
  }
  Log(absl::StrCat("done ", label, " in ",
                   absl::FormatDuration(absl::Trunc(took, absl::Milliseconds(10)))));
  // Leases dropped while the results were being matched are not reported:
  // one stale lease would make the coordinator refuse the whole batch.
  auto drop_dropped = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto& r = batch.results;
    r.erase(std::remove_if(
                r.begin(), r.end(),
                [&](const CellResult& c) { return state->dropped.count(c.lease_id) > 0; }),
            r.end());
    return r.empty();
  };
  {
    absl::MutexLock lock(&mu_);
    if (drop_dropped()) {
      ++stats_.tasks_dropped;
      return;
    }
    batch.id = next_batch_id_++;
  }
  // On disk before it is first sent, and before the heartbeat thread can
  // see it (so whoever takes it out of outbox_ removes a file that exists).
  // The task is still running_, so its leases are heartbeated meanwhile.
  batch.on_disk = Persist(batch);
  {
    absl::MutexLock lock(&mu_);
    const bool empty = drop_dropped();
    if (!empty) outbox_.push_back(batch);
    if (empty) ++stats_.tasks_dropped;
  }
  if (batch.results.empty()) {
    if (batch.on_disk) Unpersist(batch.id);
    return;
  }
  FlushOutbox(state).IgnoreError();  // what is not acknowledged stays queued
}

}  // namespace ranksweep::agent
