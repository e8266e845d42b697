// The leases the worker agent holds (agent.h): heartbeated from their own
// thread, training progress reported for recipe pruning, and the cells the
// coordinator's replies cancel, lose or prune dropped from the queue, the
// running tasks and the outbox.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "worker/agent/agent.h"
#include "worker/agent/agent_internal.h"

namespace ranksweep::agent {

// ------------------------------------------------------------- heartbeat

void Agent::HeartbeatLoop() {
  while (true) {
    absl::Duration period = options_.heartbeat_period;
    std::vector<int64_t> leases;
    {
      absl::MutexLock lock(&mu_);
      if (period <= absl::ZeroDuration()) {
        period = heartbeat_seconds_ > 0  ? absl::Seconds(heartbeat_seconds_)
                 : lease_seconds_ > 0    ? absl::Seconds(lease_seconds_) / 3
                                         : absl::Seconds(10);
      }
      mu_.AwaitWithTimeout(absl::Condition(&heartbeat_exit_), period);
      if (heartbeat_exit_) return;
      for (const auto& s : queue_) {
        for (int64_t id : LiveLeases(*s)) leases.push_back(id);
      }
      for (const auto& s : running_) {
        for (int64_t id : LiveLeases(*s)) leases.push_back(id);
      }
      for (const Batch& b : outbox_) {
        for (const CellResult& r : b.results) leases.push_back(r.lease_id);
      }
    }
    absl::StatusOr<HeartbeatOutcome> reply = coordinator_->Heartbeat(CurrentWorkerId(), leases);
    if (!reply.ok()) {
      if (absl::IsNotFound(reply.status())) {
        Log(absl::StrCat("heartbeat: ", reply.status().ToString(), "; registering again"));
        Reregister().IgnoreError();
      } else {
        Log(absl::StrCat("heartbeat: ", reply.status().ToString()));
      }
      continue;
    }
    DropLeases(reply->cancelled_lease_ids, "cancelled");
    DropLeases(reply->lost_lease_ids, "lost");
    DropLeases(reply->pruned_lease_ids, "pruned");
  }
}

void Agent::ReportProgress(TaskState& state, int64_t step,
                           const std::vector<double>& train_error) {
  const std::vector<int64_t>& rungs = state.task.rung_steps;
  if (rungs.empty() || step < rungs.front()) return;
  const bool at_rung = state.next_rung < rungs.size() && step >= rungs[state.next_rung];
  while (state.next_rung < rungs.size() && step >= rungs[state.next_rung]) ++state.next_rung;
  const absl::Time now = absl::Now();
  if (!at_rung && now - state.last_report < absl::Seconds(1)) return;
  state.last_report = now;
  std::vector<int64_t> leases;
  std::vector<LeaseProgress> progress;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < state.task.cells.size() && i < train_error.size(); ++i) {
      const int64_t lease = state.task.cells[i].lease_id;
      if (state.dropped.count(lease)) continue;
      leases.push_back(lease);
      progress.push_back({lease, step, train_error[i]});
    }
  }
  if (leases.empty()) return;
  absl::StatusOr<HeartbeatOutcome> reply =
      coordinator_->ReportProgress(CurrentWorkerId(), leases, progress);
  if (!reply.ok()) {
    // The heartbeat thread keeps the leases; the next rung reports again.
    Log(absl::StrCat("progress of ", Label(state.task), ": ", reply.status().ToString()));
    return;
  }
  DropLeases(reply->cancelled_lease_ids, "cancelled");
  DropLeases(reply->lost_lease_ids, "lost");
  DropLeases(reply->pruned_lease_ids, "pruned");
}

void Agent::DropLeases(const std::vector<int64_t>& ids, const char* why) {
  if (ids.empty()) return;
  const std::set<int64_t> gone(ids.begin(), ids.end());
  std::vector<int64_t> unpersist;
  absl::ReleasableMutexLock lock(&mu_);
  auto mark = [&](TaskState& s) {
    for (const LeasedCell& cell : s.task.cells) {
      if (gone.count(cell.lease_id)) s.dropped.insert(cell.lease_id);
    }
    return s.dropped.size() == s.task.cells.size();
  };
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (mark(**it)) {
      Log(absl::StrCat("dropping queued ", Label((*it)->task), ": leases ", why));
      ++stats_.tasks_dropped;
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& s : running_) {
    if (mark(*s) && s->stop_reason == StopReason::kNone) {
      Log(absl::StrCat("stopping ", Label(s->task), ": leases ", why));
      if (absl::string_view(why) == "pruned") ++stats_.tasks_pruned;
      s->stop_reason = StopReason::kDropped;
      s->stop = true;
    }
  }
  for (auto it = outbox_.begin(); it != outbox_.end();) {
    auto& results = it->results;
    const size_t before = results.size();
    results.erase(std::remove_if(results.begin(), results.end(),
                                 [&](const CellResult& r) { return gone.count(r.lease_id) > 0; }),
                  results.end());
    stats_.results_discarded += static_cast<int64_t>(before - results.size());
    if (results.empty()) {
      Log(absl::StrCat("discarding results of ", it->label, ": leases ", why));
      if (it->on_disk) unpersist.push_back(it->id);
      it = outbox_.erase(it);
    } else {
      ++it;
    }
  }
  lock.Release();
  // A batch partly dropped stays whole on disk: sent by the next start,
  // its dropped results are answered one at a time as stale.
  for (int64_t id : unpersist) Unpersist(id);
}

std::vector<int64_t> Agent::LiveLeases(const TaskState& state) const {
  std::vector<int64_t> ids;
  for (const LeasedCell& cell : state.task.cells) {
    if (!state.dropped.count(cell.lease_id)) ids.push_back(cell.lease_id);
  }
  return ids;
}

}  // namespace ranksweep::agent
