// What the worker agent reports to the coordinator (agent.h): results,
// kept in the outbox (memory, and disk when there is one) until the
// coordinator answers them, sent oldest first (one at a time when a batch
// is refused for a stale lease), what a previous process left there, and
// tasks failed or given back.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/plural.h"
#include "common/spec/result_validation.h"
#include "worker/agent/agent.h"
#include "worker/agent/agent_internal.h"

namespace ranksweep::agent {

using agent_internal::kShutdownReason;

// ------------------------------------------------------------- outbox

std::optional<OutboxSession> Agent::LoadOutbox() {
  if (options_.outbox == nullptr) return std::nullopt;
  std::optional<OutboxSession> session = options_.outbox->LeftSession();
  std::vector<OutboxBatch> left = options_.outbox->LeftBatches();
  absl::MutexLock lock(&mu_);
  for (OutboxBatch& b : left) {
    next_batch_id_ = std::max(next_batch_id_, b.id + 1);
    outbox_.push_back(Batch{b.id, std::move(b.label), std::move(b.results), /*on_disk=*/true});
  }
  stats_.batches_resumed = static_cast<int64_t>(left.size());
  if (session.has_value() && options_.registration.worker_id.empty()) {
    // Keep the identity of the last process of this outbox.
    worker_id_ = session->worker_id;
    id_from_outbox_ = true;
  }
  if (outbox_.empty()) return std::nullopt;
  if (!session.has_value()) {
    Log(absl::StrCat("outbox: ",
                     CountOf(static_cast<int>(outbox_.size()), "result batch", "result batches"),
                     " left without a session; sending them after registering"));
    return std::nullopt;
  }
  if (!options_.registration.worker_id.empty() &&
      options_.registration.worker_id != session->worker_id) {
    Log(absl::StrCat("outbox: the results left were leased by ", session->worker_id,
                     ", not ", options_.registration.worker_id,
                     "; sending them after registering"));
    return std::nullopt;
  }
  return session;
}

void Agent::SendLeftovers() {
  Backoff backoff(options_.retry);
  while (true) {
    absl::Status sent = FlushOutbox();
    if (sent.ok()) return;
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&draining_), backoff.Next());
    if (draining_) return;
  }
}

bool Agent::Persist(const Batch& batch) {
  if (options_.outbox == nullptr) return false;
  absl::Status s = options_.outbox->Add({batch.id, batch.label, batch.results});
  if (!s.ok()) {
    Log(absl::StrCat("outbox: ", s.message(), "; the results of ", batch.label,
                     " are kept in memory only until acknowledged"));
    return false;
  }
  return true;
}

void Agent::Unpersist(int64_t id) {
  if (options_.outbox == nullptr) return;
  if (absl::Status s = options_.outbox->Remove(id); !s.ok()) {
    // Sent again by the next start, the coordinator answers it as a
    // duplicate or stale: harmless, but worth a line.
    Log(absl::StrCat("outbox: ", s.ToString()));
  }
}

// ------------------------------------------------------------- results

absl::Status Agent::FlushOutbox(const std::shared_ptr<TaskState>& slot) {
  absl::MutexLock flush_lock(&flush_mu_);
  const std::string worker = CurrentWorkerId();
  while (true) {
    Batch batch;
    std::optional<TaskWant> next;  // none: lease nothing
    {
      absl::MutexLock lock(&mu_);
      if (outbox_.empty()) return absl::OkStatus();
      batch = outbox_.front();
      if (slot != nullptr && outbox_.size() == 1 && !draining_ && running_.count(slot) > 0) {
        next = WantFor(1);
      }
    }
    // Every attempt asks for `next`: after a lost reply the coordinator
    // answers the same results with the tasks that reply leased.
    absl::StatusOr<CompleteOutcome> reply = Retrying("complete", [&] {
      return coordinator_->Complete(worker, batch.results, next);
    });
    if (!reply.ok() && IsTransient(reply.status())) {
      Log(absl::StrCat("complete ", batch.label, ": ", reply.status().ToString(),
                       "; keeping the results to send again"));
      return reply.status();
    }
    // One stale lease refuses the whole call: learn which, a result at a
    // time, so that the others are still recorded or acknowledged.
    bool resolved_one_by_one = false;
    if (!reply.ok() && absl::IsFailedPrecondition(reply.status()) && batch.results.size() > 1) {
      Log(absl::StrCat("complete ", batch.label, ": ", reply.status().ToString(),
                       "; sending its results one at a time"));
      if (absl::Status s = SendOneByOne(worker, batch); !s.ok()) return s;
      resolved_one_by_one = true;
    }
    bool on_disk = false;
    {
      absl::MutexLock lock(&mu_);
      if (resolved_one_by_one) {
        // Counted and logged by SendOneByOne.
      } else if (reply.ok()) {
        ++stats_.tasks_completed;
        stats_.cells_completed += static_cast<int64_t>(batch.results.size());
        Log(absl::StrCat("reported ", batch.label, ": ", reply->recorded, " recorded, ",
                         reply->duplicates, " duplicates"));
      } else {
        stats_.results_discarded += static_cast<int64_t>(batch.results.size());
        Log(absl::StrCat("complete ", batch.label, ": ", reply.status().ToString(),
                         "; discarding its results"));
      }
      // The heartbeat thread may have trimmed or removed the batch
      // meanwhile; whoever takes it out of outbox_ removes its file.
      auto it = std::find_if(outbox_.begin(), outbox_.end(),
                             [&](const Batch& b) { return b.id == batch.id; });
      if (it != outbox_.end()) {
        on_disk = it->on_disk;
        outbox_.erase(it);
      }
    }
    if (on_disk) Unpersist(batch.id);
    if (!reply.ok() || reply->next_tasks.empty()) continue;
    absl::ReleasableMutexLock lock(&mu_);
    // The slot moves on: its task leaves running_ as the next one joins the
    // queue, so the acquire loop never counts the slot free in between. A
    // drain that began meanwhile has already emptied the queue; the new
    // tasks are given back instead.
    std::vector<std::shared_ptr<TaskState>> leased;
    for (Task& task : reply->next_tasks) {
      auto state = std::make_shared<TaskState>();
      state->task = std::move(task);
      leased.push_back(std::move(state));
    }
    stats_.tasks_acquired += static_cast<int64_t>(leased.size());
    if (!draining_) {
      running_.erase(slot);
      for (auto& state : leased) queue_.push_back(std::move(state));
      continue;
    }
    lock.Release();
    for (const auto& state : leased) ReleaseOrFail(state, kShutdownReason, /*release=*/true);
  }
}

absl::Status Agent::SendOneByOne(const std::string& worker, const Batch& batch) {
  int recorded = 0, duplicates = 0, refused = 0;
  std::string first_refusal;
  for (const CellResult& r : batch.results) {
    absl::StatusOr<CompleteOutcome> reply = Retrying("complete", [&] {
      return coordinator_->Complete(worker, {r}, std::nullopt);
    });
    if (!reply.ok() && IsTransient(reply.status())) {
      Log(absl::StrCat("complete ", batch.label, ": ", reply.status().ToString(),
                       "; keeping the results to send again"));
      return reply.status();
    }
    if (reply.ok()) {
      recorded += reply->recorded;
      duplicates += reply->duplicates;
    } else {
      ++refused;
      if (first_refusal.empty()) first_refusal = reply.status().ToString();
    }
  }
  absl::MutexLock lock(&mu_);
  if (recorded + duplicates > 0) ++stats_.tasks_completed;
  stats_.cells_completed += recorded + duplicates;
  stats_.results_discarded += refused;
  Log(absl::StrCat("reported ", batch.label, " one at a time: ", recorded, " recorded, ",
                   duplicates, " duplicates, ", refused, " refused",
                   refused > 0 ? absl::StrCat(" (", first_refusal, ")") : ""));
  return absl::OkStatus();
}

// ------------------------------------------------------------- failures

void Agent::ReleaseOrFail(const std::shared_ptr<TaskState>& state, const std::string& reason,
                          bool release) {
  std::vector<int64_t> leases;
  {
    absl::MutexLock lock(&mu_);
    leases = LiveLeases(*state);
  }
  if (leases.empty()) return;
  const std::string worker = CurrentWorkerId();
  // The coordinator refuses a longer reason (a trainer's error text can be
  // long); the end is the least useful part.
  const std::string sent = reason.size() <= ResultLimits::kMaxReasonLength
                               ? reason
                               : Clip(reason, ResultLimits::kMaxReasonLength - 32);
  absl::Status status = Retrying(release ? "release" : "fail", [&] {
    return coordinator_->Fail(worker, leases, sent, release);
  });
  if (!status.ok()) {
    // The leases expire on their own and the cells go back to pending.
    Log(absl::StrCat(release ? "release " : "fail ", Label(state->task), ": ",
                     status.ToString(), "; leaving the leases to expire"));
  }
  absl::MutexLock lock(&mu_);
  ++(release ? stats_.tasks_released : stats_.tasks_failed);
}

}  // namespace ranksweep::agent
