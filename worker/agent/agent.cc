#include "worker/agent/agent.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/plural.h"
#include "common/spec/result_validation.h"

namespace ranksweep::agent {
namespace {

absl::Status StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

constexpr char kShutdownReason[] = "worker shutting down";

}  // namespace

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

template <typename Fn>
auto Agent::Retrying(const char* what, Fn fn) -> decltype(fn()) {
  Backoff backoff(options_.retry);
  for (int attempt = 1;; ++attempt) {
    auto result = fn();
    const absl::Status status = StatusOf(result);
    if (status.ok() || !IsTransient(status) || attempt >= options_.retry.max_attempts) {
      return result;
    }
    {
      absl::MutexLock lock(&mu_);
      if (OutOfTime()) return result;
    }
    const absl::Duration wait = backoff.Next();
    Log(absl::StrCat(what, ": ", status.ToString(), "; retrying in ",
                     absl::FormatDuration(absl::Trunc(wait, absl::Milliseconds(1)))));
    SleepFor(wait);
  }
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
  RegisterRequest request = options_.registration;
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

    const NextTasks want = WantFor(free_slots);
    AcquireRequest request;
    request.worker_id = CurrentWorkerId();
    request.max_tasks = want.max_tasks;
    request.max_seeds = want.max_seeds;
    request.wait_ms = options_.acquire_wait_ms;
    request.memory_bytes = want.memory_bytes;
    absl::StatusOr<std::vector<Task>> tasks = coordinator_->Acquire(request);
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

// ------------------------------------------------------------- runners

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

NextTasks Agent::WantFor(int free_slots) const {
  const int slots = std::max(1, options_.registration.slots);
  return NextTasks{free_slots, options_.max_seeds,
                   options_.registration.memory_bytes / slots * free_slots};
}

std::vector<int64_t> Agent::LiveLeases(const TaskState& state) const {
  std::vector<int64_t> ids;
  for (const LeasedCell& cell : state.task.cells) {
    if (!state.dropped.count(cell.lease_id)) ids.push_back(cell.lease_id);
  }
  return ids;
}

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

absl::Status Agent::FlushOutbox(const std::shared_ptr<TaskState>& slot) {
  absl::MutexLock flush_lock(&flush_mu_);
  const std::string worker = CurrentWorkerId();
  while (true) {
    Batch batch;
    NextTasks next;  // max_tasks 0: lease nothing
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
    absl::StatusOr<CompleteReply> reply = Retrying("complete", [&] {
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
    absl::StatusOr<CompleteReply> reply = Retrying("complete", [&] {
      return coordinator_->Complete(worker, {r}, NextTasks{});
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
    absl::StatusOr<HeartbeatReply> reply = coordinator_->Heartbeat(CurrentWorkerId(), leases);
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
  absl::StatusOr<HeartbeatReply> reply =
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
