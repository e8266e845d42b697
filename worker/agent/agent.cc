// The worker agent's life (agent.h): construction, logging, stats, the
// drain's request, registration, Run, the acquire loop and the drain. What
// it reports is in agent_report.cc, the runner threads in agent_tasks.cc,
// the leases it keeps alive in agent_leases.cc.
#include "worker/agent/agent.h"

#include <algorithm>
#include <iostream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/plural.h"
#include "worker/agent/agent_internal.h"

namespace ranksweep::agent {

using agent_internal::kShutdownReason;

Agent::Agent(CoordinatorClient* coordinator, TaskRunner* runner, AgentOptions options)
    : coordinator_(coordinator), runner_(runner), options_(std::move(options)) {}

Agent::~Agent() = default;

void Agent::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
    return;
  }
  std::cerr << absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::Now(), absl::LocalTimeZone())
            << " ranksweep-worker: " << line << std::endl;
}

std::string Agent::Label(const Task& task) const {
  std::string label = absl::StrCat(task.sweep_id, " ", HeadLabel(task.spec.head));
  if (task.spec.rank > 0) absl::StrAppend(&label, " r=", task.spec.rank);
  absl::StrAppend(&label, " seeds=", task.cells.size());
  return label;
}

std::string Agent::CurrentWorkerId() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

std::string Agent::worker_id() const { return CurrentWorkerId(); }

AgentStats Agent::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Agent::RequestDrain() {
  absl::Time deadline;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (draining_) {
      hard_stop_ = true;
      drain_deadline_ = std::min(drain_deadline_, now);
    } else {
      draining_ = true;
      drain_deadline_ = now + options_.drain_timeout;
    }
    deadline = drain_deadline_;
  }
  // Calls in flight end by then too: a coordinator that does not answer
  // (stopped, partitioned) cannot hold the drain past its deadline.
  coordinator_->SetDeadline(deadline);
}

bool Agent::OutOfTime() const { return hard_stop_ || absl::Now() >= drain_deadline_; }

void Agent::SleepFor(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&hard_stop_),
                        std::min(absl::Now() + d, drain_deadline_));
}

// ------------------------------------------------------------- registration

absl::Status Agent::RegisterWithRetry() {
  Backoff backoff(options_.retry);
  while (true) {
    absl::Status status = Reregister();
    if (status.ok()) return status;
    if (!IsTransient(status)) return status;
    const absl::Duration wait = backoff.Next();
    Log(absl::StrCat("register: ", status.ToString(), "; retrying in ",
                     absl::FormatDuration(absl::Trunc(wait, absl::Milliseconds(1)))));
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&draining_), wait);
    if (draining_) return absl::CancelledError("drain requested before registration");
  }
}

absl::Status Agent::Reregister() {
  absl::MutexLock register_lock(&register_mu_);
  WorkerRegistration request = options_.registration;
  bool from_outbox;
  {
    absl::MutexLock lock(&mu_);
    if (!worker_id_.empty()) request.worker_id = worker_id_;
    from_outbox = id_from_outbox_;
  }
  absl::StatusOr<RegisterReply> reply = coordinator_->Register(request);
  if (!reply.ok() && absl::IsPermissionDenied(reply.status()) && from_outbox) {
    // The id was only this machine's memory of an earlier process (another
    // token now, or quarantined): a new one, as for a first start.
    Log(absl::StrCat("register as ", request.worker_id, " (the outbox's last worker id): ",
                     reply.status().message(), "; registering under a new id"));
    {
      absl::MutexLock lock(&mu_);
      worker_id_.clear();
      id_from_outbox_ = false;
    }
    request.worker_id.clear();
    reply = coordinator_->Register(request);
  }
  if (!reply.ok()) return reply.status();
  if (options_.outbox != nullptr) {
    // Results leased under this session can be sent by the next process
    // if this one dies first.
    absl::Status saved = options_.outbox->SaveSession(
        {reply->worker_id, reply->session, reply->lease_seconds, reply->heartbeat_seconds});
    if (!saved.ok()) {
      Log(absl::StrCat("outbox: cannot keep the session: ", saved.ToString(),
                       "; results left at an exit cannot be sent by the next start"));
    }
  }
  absl::MutexLock lock(&mu_);
  worker_id_ = reply->worker_id;
  lease_seconds_ = reply->lease_seconds;
  heartbeat_seconds_ = reply->heartbeat_seconds;
  ++stats_.registrations;
  Log(absl::StrCat("registered as ", worker_id_, " (", request.device, " ",
                   request.device_name, ", ", CountOf(request.slots, "slot"), ", build ",
                   request.version.build_id, ", lease ", lease_seconds_, "s)"));
  return absl::OkStatus();
}

// ------------------------------------------------------------- Run

absl::Status Agent::Run() {
  std::thread heartbeat;
  if (std::optional<OutboxSession> left = LoadOutbox(); left.has_value()) {
    {
      absl::MutexLock lock(&mu_);
      worker_id_ = left->worker_id;
      lease_seconds_ = left->lease_seconds;
      heartbeat_seconds_ = left->heartbeat_seconds;
      Log(absl::StrCat("resuming the session of ", worker_id_, " to send ",
                       CountOf(static_cast<int>(outbox_.size()), "result batch", "result batches"),
                       " a previous process left"));
    }
    coordinator_->ResumeSession(left->session);
    // Their leases are kept alive while they wait for the coordinator.
    heartbeat = std::thread([this] { HeartbeatLoop(); });
    SendLeftovers();
  }
  bool drained_early;
  {
    absl::MutexLock lock(&mu_);
    drained_early = draining_;
  }
  if (!drained_early) {
    absl::Status registered = RegisterWithRetry();
    if (!registered.ok() && !absl::IsCancelled(registered)) {
      if (heartbeat.joinable()) {
        {
          absl::MutexLock lock(&mu_);
          heartbeat_exit_ = true;
        }
        heartbeat.join();
      }
      return registered;
    }
    drained_early = !registered.ok();
  }
  if (!drained_early) {
    if (!heartbeat.joinable()) heartbeat = std::thread([this] { HeartbeatLoop(); });
    std::vector<std::thread> runners;
    const int slots = std::max(1, options_.registration.slots);
    for (int i = 0; i < slots; ++i) runners.emplace_back([this] { RunnerLoop(); });

    AcquireLoop();
    Drain();

    {
      absl::MutexLock lock(&mu_);
      runners_exit_ = true;
    }
    for (auto& t : runners) t.join();
  } else {
    Log("drain requested before registration");
  }
  // Results of finished tasks are worth the rest of the drain's time: a
  // coordinator that is restarting takes them when it is back, where
  // leaving them would have their cells trained again after the leases
  // expire. Nothing else is waiting by now, so this only delays the exit.
  // No call outlives the drain's deadline (SetDeadline), so neither does
  // this.
  bool out_of_time, empty;
  {
    absl::MutexLock lock(&mu_);
    out_of_time = OutOfTime();
    empty = outbox_.empty();
  }
  absl::Status flushed = absl::OkStatus();
  if (!out_of_time) {
    flushed = FlushOutbox();
  } else if (!empty) {
    flushed = absl::DeadlineExceededError("the drain's deadline passed");
  }
  Backoff backoff(options_.retry);
  while (!flushed.ok() && IsTransient(flushed)) {
    const absl::Duration wait = backoff.Next();
    {
      absl::MutexLock lock(&mu_);
      if (!draining_ || OutOfTime() || absl::Now() + wait >= drain_deadline_) break;
    }
    SleepFor(wait);
    flushed = FlushOutbox();
  }
  {
    absl::MutexLock lock(&mu_);
    if (!outbox_.empty()) {
      int in_memory = 0;
      for (const Batch& b : outbox_) in_memory += b.on_disk ? 0 : 1;
      std::string where = options_.outbox != nullptr
                              ? absl::StrCat("kept for the next start (outbox: ",
                                             options_.outbox->Describe(), ")")
                              : "lost (no outbox)";
      if (options_.outbox != nullptr && in_memory > 0) {
        absl::StrAppend(&where, "; ", in_memory, " of them were in memory only and are lost");
      }
      Log(absl::StrCat("exiting with ",
                       CountOf(static_cast<int>(outbox_.size()), "unacknowledged result batch",
                               "unacknowledged result batches"),
                       ", ", where, ": ", flushed.ToString()));
    }
    heartbeat_exit_ = true;
  }
  if (heartbeat.joinable()) heartbeat.join();
  const AgentStats s = stats();
  Log(absl::StrCat("exiting: ", s.tasks_completed, " tasks (", s.cells_completed,
                   " cells) completed, ", s.tasks_failed, " failed, ", s.tasks_released,
                   " released, ", s.tasks_dropped, " dropped (", s.tasks_pruned, " pruned)"));
  return absl::OkStatus();
}

void Agent::AcquireLoop() {
  const int slots = std::max(1, options_.registration.slots);
  Backoff backoff(options_.retry);
  absl::Time idle_since = absl::Now();
  while (true) {
    int free_slots = 0;
    bool busy = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return draining_ ||
               static_cast<int>(queue_.size() + running_.size()) < slots;
      };
      mu_.Await(absl::Condition(&ready));
      if (draining_) return;
      free_slots = slots - static_cast<int>(queue_.size() + running_.size());
      busy = !queue_.empty() || !running_.empty() || !outbox_.empty();
    }
    if (busy) idle_since = absl::Now();

    // Results first: nothing new is taken on while old work is unreported.
    if (absl::Status flushed = FlushOutbox(); !flushed.ok()) {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&draining_), backoff.Next());
      continue;
    }

    absl::StatusOr<std::vector<Task>> tasks = coordinator_->Acquire(
        CurrentWorkerId(), WantFor(free_slots), options_.acquire_wait_ms);
    if (!tasks.ok()) {
      const absl::Duration wait = backoff.Next();
      if (absl::IsNotFound(tasks.status())) {
        Log(absl::StrCat("acquire: ", tasks.status().ToString(), "; registering again"));
        if (absl::Status s = Reregister(); s.ok()) continue;
      } else {
        Log(absl::StrCat("acquire: ", tasks.status().ToString(), "; retrying in ",
                         absl::FormatDuration(absl::Trunc(wait, absl::Milliseconds(1)))));
      }
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&draining_), wait);
      continue;
    }
    backoff.Reset();
    if (tasks->empty()) {
      if (options_.exit_when_idle && !busy && absl::Now() - idle_since >= options_.idle_exit) {
        bool still_idle;
        {
          absl::MutexLock lock(&mu_);
          still_idle = queue_.empty() && running_.empty() && outbox_.empty();
        }
        if (still_idle) {
          Log("no work; exiting (idle)");
          return;
        }
      }
      continue;
    }
    idle_since = absl::Now();
    absl::MutexLock lock(&mu_);
    for (Task& task : *tasks) {
      auto state = std::make_shared<TaskState>();
      state->task = std::move(task);
      ++stats_.tasks_acquired;
      queue_.push_back(std::move(state));
    }
  }
}

TaskWant Agent::WantFor(int free_slots) const {
  const int slots = std::max(1, options_.registration.slots);
  return TaskWant{free_slots, options_.max_seeds,
                   options_.registration.memory_bytes / slots * free_slots};
}

// ------------------------------------------------------------- drain

void Agent::Drain() {
  bool draining;
  std::deque<std::shared_ptr<TaskState>> unstarted;
  {
    absl::MutexLock lock(&mu_);
    draining = draining_;
    unstarted.swap(queue_);
  }
  if (!draining) return;  // idle exit: nothing queued or running
  Log(absl::StrCat("draining: releasing ", unstarted.size(), " unstarted tasks"));
  for (const auto& s : unstarted) ReleaseOrFail(s, kShutdownReason, /*release=*/true);

  absl::MutexLock lock(&mu_);
  // The last third of the drain (at most 5 s) is kept for releasing what
  // is still running and sending what finished.
  const absl::Duration reserve = std::min(options_.drain_timeout / 3, absl::Seconds(5));
  const absl::Time stop_at = drain_deadline_ - reserve;
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_.empty() || hard_stop_; };
  if (!running_.empty()) {
    Log(absl::StrCat("draining: waiting up to ",
                     absl::FormatDuration(absl::Trunc(std::max(stop_at - absl::Now(),
                                                               absl::ZeroDuration()),
                                                      absl::Milliseconds(100))),
                     " for ", running_.size(), " running tasks"));
  }
  mu_.AwaitWithDeadline(absl::Condition(&done), stop_at);
  for (const auto& s : running_) {
    if (s->stop_reason == StopReason::kNone) {
      s->stop_reason = StopReason::kDrain;
      s->stop = true;
    }
  }
  // Runners notice should_stop at their next evaluation and release.
  auto stopped = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_.empty(); };
  mu_.Await(absl::Condition(&stopped));
}

}  // namespace ranksweep::agent
