// What the worker agent's tests share (agent_test.cc, agent_outbox_test.cc):
// a scripted coordinator that records every call, a runner that runs a
// function, results that identify their seed, tasks and agent options with
// short periods and backoffs.
// Tests only.
#ifndef RANKSWEEP_WORKER_AGENT_AGENT_TEST_FIXTURE_H_
#define RANKSWEEP_WORKER_AGENT_AGENT_TEST_FIXTURE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "worker/agent/agent.h"

namespace ranksweep::agent {


// A scripted coordinator that records every call.
class FakeCoordinator : public CoordinatorClient {
 public:
  struct FailCall {
    std::vector<int64_t> leases;
    std::string reason;
    bool release;
  };

  absl::StatusOr<RegisterReply> Register(const WorkerRegistration& request) override {
    absl::MutexLock lock(&mu);
    registers.push_back(request);
    calls.push_back("register " + request.worker_id);
    if (!register_errors.empty()) {
      absl::Status error = register_errors.front();
      register_errors.pop_front();
      return error;
    }
    return RegisterReply{request.worker_id.empty() ? "w-1" : request.worker_id, 30, 10,
                         "ws_secret"};
  }

  void ResumeSession(const std::string& session) override {
    absl::MutexLock lock(&mu);
    calls.push_back("resume " + session);
  }

  void SetDeadline(absl::Time deadline) override {
    absl::MutexLock lock(&mu);
    deadlines.push_back(deadline);
  }

  absl::StatusOr<std::vector<Task>> Acquire(const std::string& worker_id, const TaskWant& want,
                                            int wait_ms) override {
    {
      absl::MutexLock lock(&mu);
      acquires.push_back({worker_id, want, wait_ms});
      if (!acquire_script.empty()) {
        auto next = std::move(acquire_script.front());
        acquire_script.pop_front();
        return next;
      }
    }
    absl::SleepFor(absl::Milliseconds(std::min(wait_ms, 2)));
    return std::vector<Task>{};
  }

  absl::StatusOr<HeartbeatOutcome> Heartbeat(const std::string& worker_id,
                                           const std::vector<int64_t>& lease_ids) override {
    absl::MutexLock lock(&mu);
    heartbeats.push_back(lease_ids);
    if (on_heartbeat) return on_heartbeat(lease_ids);
    return HeartbeatOutcome{};
  }

  absl::StatusOr<HeartbeatOutcome> ReportProgress(
      const std::string& worker_id, const std::vector<int64_t>& lease_ids,
      const std::vector<LeaseProgress>& progress) override {
    absl::MutexLock lock(&mu);
    reports.push_back(progress);
    if (on_report) return on_report(progress);
    return HeartbeatOutcome{};
  }

  absl::StatusOr<CompleteOutcome> Complete(const std::string& worker_id,
                                         const std::vector<CellResult>& results,
                                         const std::optional<TaskWant>& next) override {
    if (on_complete) on_complete();
    absl::MutexLock lock(&mu);
    completes.push_back(results);
    nexts.push_back(next);
    std::string call = "complete " + worker_id + " leases";
    for (const CellResult& r : results) call += " " + std::to_string(r.lease_id);
    calls.push_back(call + " next=" + std::to_string(next.has_value() ? next->max_tasks : 0));
    if (!complete_errors.empty()) {
      absl::Status error = complete_errors.front();
      complete_errors.pop_front();
      if (!error.ok()) return error;
    }
    acknowledged.push_back(results);
    CompleteOutcome reply{0, 0, {}};
    for (const CellResult& r : results) {
      ++(recorded_leases.insert(r.lease_id).second ? reply.recorded : reply.duplicates);
    }
    if (next.has_value() && !next_script.empty()) {
      reply.next_tasks = std::move(next_script.front());
      next_script.pop_front();
    }
    return reply;
  }

  absl::Status Fail(const std::string& worker_id, const std::vector<int64_t>& lease_ids,
                    const std::string& reason, bool release) override {
    absl::MutexLock lock(&mu);
    fails.push_back({lease_ids, reason, release});
    return absl::OkStatus();
  }

  size_t FailCount() {
    absl::MutexLock lock(&mu);
    return fails.size();
  }

  absl::Mutex mu;
  std::deque<absl::StatusOr<std::vector<Task>>> acquire_script;
  // What successive Complete calls answer first; OK entries acknowledge.
  std::deque<absl::Status> complete_errors;
  std::deque<absl::Status> register_errors;
  // Register, ResumeSession and Complete calls in order, as text.
  std::vector<std::string> calls;
  std::vector<absl::Time> deadlines;  // SetDeadline's arguments
  std::set<int64_t> recorded_leases;
  // What successive Complete calls that ask for `next` lease; none when empty.
  std::deque<std::vector<Task>> next_script;
  std::function<void()> on_complete;  // called first in every Complete call
  std::function<HeartbeatOutcome(const std::vector<int64_t>&)> on_heartbeat;
  // Recipe pruning: every ReportProgress call's progress, and its answer.
  std::vector<std::vector<LeaseProgress>> reports;
  std::function<HeartbeatOutcome(const std::vector<LeaseProgress>&)> on_report;
  std::vector<WorkerRegistration> registers;
  // Each Acquire call's arguments.
  struct Acquired {
    std::string worker_id;
    TaskWant want;
    int wait_ms = 0;
  };
  std::vector<Acquired> acquires;
  std::vector<std::vector<int64_t>> heartbeats;
  std::vector<std::vector<CellResult>> completes;
  std::vector<std::vector<CellResult>> acknowledged;
  std::vector<std::optional<TaskWant>> nexts;  // the `next` of every Complete call
  std::vector<FailCall> fails;
};

class FakeRunner : public TaskRunner {
 public:
  using Fn = std::function<absl::StatusOr<std::vector<SeedResult>>(const TaskSpec&,
                                                                   const RunControl&)>;
  explicit FakeRunner(Fn fn) : fn_(std::move(fn)) {}
  absl::StatusOr<std::vector<SeedResult>> Run(const TaskSpec& spec,
                                              const RunControl& control) override {
    {
      absl::MutexLock lock(&mu_);
      ran_.push_back(spec.seeds);
    }
    return fn_(spec, control);
  }

  // The seeds of every task run so far, in the order the runs started.
  std::vector<std::vector<uint64_t>> ran() const {
    absl::MutexLock lock(&mu_);
    return ran_;
  }

 private:
  Fn fn_;
  mutable absl::Mutex mu_;
  std::vector<std::vector<uint64_t>> ran_ ABSL_GUARDED_BY(mu_);
};

// Results that identify their seed: steps = 100 + seed.
inline std::vector<SeedResult> ResultsFor(const TaskSpec& spec) {
  std::vector<SeedResult> out;
  for (uint64_t seed : spec.seeds) {
    SeedResult r;
    r.seed = seed;
    r.steps = 100 + static_cast<int64_t>(seed);
    r.train.sequences = 4;  // a valid result (ValidateSeedResult) needs a train split
    r.device = "cpu";
    out.push_back(r);
  }
  return out;
}

// Blocks until should_stop, then returns kCancelled as the trainer does.
inline absl::StatusOr<std::vector<SeedResult>> RunUntilStopped(const RunControl& control) {
  while (!control.should_stop()) absl::SleepFor(absl::Milliseconds(1));
  return absl::CancelledError("stopped");
}

inline Task MakeTask(const std::string& sweep, std::vector<uint64_t> seeds, int64_t first_cell,
                     int64_t first_lease) {
  Task task;
  task.sweep_id = sweep;
  task.spec.rank = 4;
  task.spec.seeds = seeds;
  for (size_t i = 0; i < seeds.size(); ++i) {
    task.cells.push_back({first_cell + static_cast<int64_t>(i), seeds[i],
                          first_lease + static_cast<int64_t>(i), 1});
  }
  return task;
}

inline AgentOptions TestOptions() {
  AgentOptions o;
  o.registration.hostname = "host-a";
  o.registration.device = "cpu";
  o.registration.device_name = "cpu";
  o.registration.memory_bytes = 1 << 30;
  o.registration.slots = 1;
  o.registration.version = {"0.1.0+abc", "1.13.1", ""};
  o.max_seeds = 16;
  o.acquire_wait_ms = 1;
  o.heartbeat_period = absl::Milliseconds(5);
  o.exit_when_idle = true;
  o.idle_exit = absl::Milliseconds(30);
  o.retry.initial_backoff = absl::Milliseconds(1);
  o.retry.max_backoff = absl::Milliseconds(4);
  o.retry.jitter = 0;
  o.log = [](const std::string&) {};
  return o;
}

inline std::vector<std::tuple<int64_t, int64_t, uint64_t, int64_t>> Flatten(
    const std::vector<CellResult>& results) {
  std::vector<std::tuple<int64_t, int64_t, uint64_t, int64_t>> out;
  for (const CellResult& r : results) {
    out.emplace_back(r.cell_id, r.lease_id, r.result.seed, r.result.steps);
  }
  return out;
}

}  // namespace ranksweep::agent

#endif  // RANKSWEEP_WORKER_AGENT_AGENT_TEST_FIXTURE_H_
