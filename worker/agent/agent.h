// The worker agent: registers with the coordinator, acquires tasks by
// long-poll, trains them (one runner thread per slot), heartbeats the leases
// it holds from its own thread, reports results and failures, and drains on
// request. It knows neither gRPC nor LibTorch: it talks through a
// CoordinatorClient and trains through a TaskRunner (coordinator_client.h).
//
// Behaviour, in the protocol's terms (docs/PROTOCOL.md):
//  - Each acquired Task trains in one TaskRunner::Run call (all its seeds);
//    SeedResults are matched to cells by seed and reported with
//    CompleteTasks, one call per task. That call also asks for the next
//    task for the slot (CompleteTasksRequest.next), so a busy slot moves on
//    in one round trip; when none comes back, the acquire loop long-polls
//    for the free slot as before. A retried CompleteTasks asks again: after
//    a lost reply the coordinator answers the same results with the tasks
//    their first attempt leased (docs/PROTOCOL.md).
//  - Transient errors (retry.h; CANCELLED included, which is what a call
//    cut by a coordinator's shutdown gets) are retried with exponential
//    backoff and jitter. Results not acknowledged after the per-call attempts
//    stay in an outbox and are sent again under the same leases, before any
//    new acquisition, until the coordinator acknowledges them or rejects
//    their leases. Their leases keep being heartbeated meanwhile, so a
//    coordinator restarted on the same database takes them while the leases
//    are valid, and nothing is trained twice.
//  - With AgentOptions::outbox (outbox.h) every task's results are written
//    there, durably, before they are first sent, and removed once the
//    coordinator answered them (acknowledged, or refused for good); every
//    registration's session is written there too. A Run that finds results
//    a previous process left resumes that process's session (worker id and
//    secret), heartbeats their leases and sends them, without `next`, before
//    it registers again (which ends that session and releases whatever else
//    the previous process held); a batch refused as a whole for a stale
//    lease is then sent one result at a time, so each result is recorded,
//    acknowledged as a duplicate, or refused on its own. A Run that finds
//    a session but no results registers under that session's worker id
//    (unless registration.worker_id names one), so a restarted worker keeps
//    its identity; if the coordinator refuses that id (PERMISSION_DENIED)
//    it registers under a new one. A batch the outbox refuses (full, disk
//    error) is logged and kept in memory only.
//  - Heartbeat's cancelled/lost lease ids drop those cells: a queued task
//    whose cells are all dropped is discarded, a running one is stopped
//    through should_stop (read after every training step, so the slot is
//    free within about one heartbeat), unacknowledged results of those leases are
//    discarded. Nothing is reported for dropped cells.
//  - A runner error becomes FailTask(reason, release=false), or
//    release=true for kResourceExhausted (the worker's fault).
//  - NOT_FOUND from Acquire or Heartbeat (the coordinator forgot this
//    worker) re-registers under the same worker id.
//  - RequestDrain (SIGTERM): stop acquiring, release queued tasks
//    (FailTask release=true), let running tasks finish, then stop and
//    release the rest, send what is pending (retrying a coordinator that is
//    down), and return OK, all within drain_timeout of the request: that is
//    a hard deadline, handed to the client (CoordinatorClient::SetDeadline)
//    so that no call, even one in flight, outlives it. Running tasks get
//    all of it but the last third (at most 5 s), which is kept for the
//    calls. A second RequestDrain ends everything at once. Results left
//    unacknowledged stay in the outbox for the next start.
//
// Ownership: the agent does not own the client or the runner; both must
// outlive Run(). Thread-safety: Run() is called once, from one thread;
// RequestDrain() and stats() may be called from any thread at any time.
#ifndef RANKSWEEP_WORKER_AGENT_AGENT_H_
#define RANKSWEEP_WORKER_AGENT_AGENT_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/agent/coordinator_client.h"
#include "worker/agent/outbox.h"
#include "worker/agent/retry.h"

namespace ranksweep::agent {

struct AgentOptions {
  // What RegisterWorker sends; registration.slots is the number of tasks
  // run at once (runner threads). A non-empty worker_id keeps an identity.
  WorkerRegistration registration;
  int max_seeds = 64;  // cells per task asked for in AcquireTasks
  int acquire_wait_ms = 5000;  // long-poll length; bounds how late a drain starts
  // Heartbeat period; zero = the coordinator's heartbeat_seconds, else a
  // third of lease_seconds, else 10 s.
  absl::Duration heartbeat_period = absl::ZeroDuration();
  absl::Duration drain_timeout = absl::Seconds(30);
  // When true, Run returns once no task is queued, running or unacknowledged
  // and the coordinator had no work for `idle_exit`.
  bool exit_when_idle = false;
  absl::Duration idle_exit = absl::Seconds(5);
  RetryPolicy retry;
  // Progress of running tasks is logged at most this often; zero = never.
  absl::Duration log_every = absl::Seconds(60);
  // Where log lines go (one call per line, no newline); empty = stderr.
  std::function<void(const std::string&)> log;
  // Where results wait until acknowledged, across restarts (outbox.h); not
  // owned, must outlive Run(). Null: in memory only.
  Outbox* outbox = nullptr;
};

// Counters, for tests and the exit log line.
struct AgentStats {
  int64_t registrations = 0;
  int64_t tasks_acquired = 0;
  int64_t tasks_started = 0;
  int64_t tasks_completed = 0;   // results acknowledged by the coordinator
  int64_t cells_completed = 0;
  int64_t tasks_failed = 0;      // FailTask release=false
  int64_t tasks_released = 0;    // FailTask release=true (drain, out of memory)
  int64_t tasks_dropped = 0;     // every cell cancelled, lost or pruned
  int64_t tasks_pruned = 0;      // of those, running ones stopped by recipe pruning
  int64_t results_discarded = 0; // cells whose result the coordinator refused
  int64_t batches_resumed = 0;   // batches a previous process left in the outbox
};

class Agent {
 public:
  Agent(CoordinatorClient* coordinator, TaskRunner* runner, AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs until drained or idle (exit_when_idle). Returns OK then; a
  // non-transient registration error (e.g. InvalidArgument for bad slots)
  // is returned as is. Transient registration errors are retried until a
  // drain is requested (then OK, nothing having been leased).
  absl::Status Run();

  // Begins the drain; a second call stops running tasks at once.
  void RequestDrain();

  AgentStats stats() const;
  // Empty until registered.
  std::string worker_id() const;

 private:
  enum class StopReason { kNone, kDropped, kDrain };
  struct TaskState {
    Task task;
    std::set<int64_t> dropped;  // lease ids cancelled or lost
    StopReason stop_reason = StopReason::kNone;
    std::atomic<bool> stop{false};
    absl::Time last_log = absl::InfinitePast();
    // Recipe pruning, read and written by the task's runner thread only:
    // the next rung to report, and when progress was last sent.
    size_t next_rung = 0;
    absl::Time last_report = absl::InfinitePast();
  };
  struct Batch {
    int64_t id = 0;
    std::string label;
    std::vector<CellResult> results;
    bool on_disk = false;  // written to options_.outbox
  };

  absl::Status RegisterWithRetry();
  absl::Status Reregister();
  // Takes what a previous process left in the outbox; returns its session
  // when there are results to send under it.
  std::optional<OutboxSession> LoadOutbox();
  // Sends the results a previous process left, under its session, until
  // none is left or a drain is requested.
  void SendLeftovers();
  // Writes `batch` to the outbox; false (logged) when there is none or it
  // refuses.
  bool Persist(const Batch& batch);
  // Forgets batch `id` on disk (it has left outbox_).
  void Unpersist(int64_t id);
  // A batch the coordinator refused as a whole for a stale lease, sent one
  // result at a time. Returns a transient error that outlasted the retries
  // (the batch stays), else OK with the batch resolved.
  absl::Status SendOneByOne(const std::string& worker, const Batch& batch);
  void AcquireLoop();
  void RunnerLoop();
  void HeartbeatLoop();
  void RunOne(const std::shared_ptr<TaskState>& state);
  // Recipe pruning: at an evaluation of a running task, sends each live
  // seed's training error (at every rung, and at most once a second
  // between rungs so that a prune decided on another recipe's report is
  // heard soon) and stops what the reply prunes, cancels or loses.
  void ReportProgress(TaskState& state, int64_t step, const std::vector<double>& train_error);
  void Drain();
  // Sends the outbox, oldest first. Returns the first transient error that
  // outlasted the retries (the rest stays queued); OK when empty. `slot`:
  // the running task whose results were just queued; the call that sends
  // the last batch then also leases the next task for its slot, which is
  // handed over (the task leaves running_, the new one joins queue_) when
  // one comes back.
  absl::Status FlushOutbox(const std::shared_ptr<TaskState>& slot = nullptr);
  // What to ask for `free_slots` slots: the device's memory is split evenly
  // between slots, so the share of the free ones (unknown memory, 0, stays
  // unknown).
  TaskWant WantFor(int free_slots) const;
  // Calls fn until OK, a non-transient error, max_attempts, or a hard stop.
  template <typename Fn>
  auto Retrying(const char* what, Fn fn) -> decltype(fn());
  void ReleaseOrFail(const std::shared_ptr<TaskState>& state, const std::string& reason,
                     bool release);
  std::vector<int64_t> LiveLeases(const TaskState& state) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropLeases(const std::vector<int64_t>& ids, const char* why);
  // Waits up to d, or until a hard stop or the drain's deadline.
  void SleepFor(absl::Duration d);
  // The drain's deadline has passed or a hard stop was asked for.
  bool OutOfTime() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Log(const std::string& line) const;
  std::string Label(const Task& task) const;
  std::string CurrentWorkerId() const;

  CoordinatorClient* const coordinator_;
  TaskRunner* const runner_;
  const AgentOptions options_;

  mutable absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  int lease_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  int heartbeat_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::shared_ptr<TaskState>> queue_ ABSL_GUARDED_BY(mu_);
  std::set<std::shared_ptr<TaskState>> running_ ABSL_GUARDED_BY(mu_);
  std::deque<Batch> outbox_ ABSL_GUARDED_BY(mu_);
  int64_t next_batch_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  // Set by RequestDrain(): nothing of the agent outlives it.
  absl::Time drain_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // worker_id_ came from the outbox's session, not from the options.
  bool id_from_outbox_ ABSL_GUARDED_BY(mu_) = false;
  bool hard_stop_ ABSL_GUARDED_BY(mu_) = false;
  bool runners_exit_ ABSL_GUARDED_BY(mu_) = false;
  bool heartbeat_exit_ ABSL_GUARDED_BY(mu_) = false;
  AgentStats stats_ ABSL_GUARDED_BY(mu_);

  absl::Mutex flush_mu_;  // one flusher at a time; taken before mu_
  absl::Mutex register_mu_;  // one registration at a time; taken before mu_
};

}  // namespace ranksweep::agent

#endif  // RANKSWEEP_WORKER_AGENT_AGENT_H_
