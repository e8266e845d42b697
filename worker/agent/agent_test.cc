#include "worker/agent/agent.h"

#include <dirent.h>

#include <atomic>
#include <cmath>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/spec/result_validation.h"
#include "common/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/agent/file_outbox.h"

namespace ranksweep::agent {
namespace {

using ::testing::ElementsAre;

// A scripted coordinator that records every call.
class FakeCoordinator : public CoordinatorClient {
 public:
  struct FailCall {
    std::vector<int64_t> leases;
    std::string reason;
    bool release;
  };

  absl::StatusOr<RegisterReply> Register(const RegisterRequest& request) override {
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

  absl::StatusOr<std::vector<Task>> Acquire(const AcquireRequest& request) override {
    {
      absl::MutexLock lock(&mu);
      acquires.push_back(request);
      if (!acquire_script.empty()) {
        auto next = std::move(acquire_script.front());
        acquire_script.pop_front();
        return next;
      }
    }
    absl::SleepFor(absl::Milliseconds(std::min(request.wait_ms, 2)));
    return std::vector<Task>{};
  }

  absl::StatusOr<HeartbeatReply> Heartbeat(const std::string& worker_id,
                                           const std::vector<int64_t>& lease_ids) override {
    absl::MutexLock lock(&mu);
    heartbeats.push_back(lease_ids);
    if (on_heartbeat) return on_heartbeat(lease_ids);
    return HeartbeatReply{};
  }

  absl::StatusOr<HeartbeatReply> ReportProgress(
      const std::string& worker_id, const std::vector<int64_t>& lease_ids,
      const std::vector<LeaseProgress>& progress) override {
    absl::MutexLock lock(&mu);
    reports.push_back(progress);
    if (on_report) return on_report(progress);
    return HeartbeatReply{};
  }

  absl::StatusOr<CompleteReply> Complete(const std::string& worker_id,
                                         const std::vector<CellResult>& results,
                                         const NextTasks& next) override {
    if (on_complete) on_complete();
    absl::MutexLock lock(&mu);
    completes.push_back(results);
    nexts.push_back(next);
    std::string call = "complete " + worker_id + " leases";
    for (const CellResult& r : results) call += " " + std::to_string(r.lease_id);
    calls.push_back(call + " next=" + std::to_string(next.max_tasks));
    if (!complete_errors.empty()) {
      absl::Status error = complete_errors.front();
      complete_errors.pop_front();
      if (!error.ok()) return error;
    }
    acknowledged.push_back(results);
    CompleteReply reply{0, 0, {}};
    for (const CellResult& r : results) {
      ++(recorded_leases.insert(r.lease_id).second ? reply.recorded : reply.duplicates);
    }
    if (next.max_tasks > 0 && !next_script.empty()) {
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
  std::function<HeartbeatReply(const std::vector<int64_t>&)> on_heartbeat;
  // Recipe pruning: every ReportProgress call's progress, and its answer.
  std::vector<std::vector<LeaseProgress>> reports;
  std::function<HeartbeatReply(const std::vector<LeaseProgress>&)> on_report;
  std::vector<RegisterRequest> registers;
  std::vector<AcquireRequest> acquires;
  std::vector<std::vector<int64_t>> heartbeats;
  std::vector<std::vector<CellResult>> completes;
  std::vector<std::vector<CellResult>> acknowledged;
  std::vector<NextTasks> nexts;  // the `next` of every Complete call
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
std::vector<SeedResult> ResultsFor(const TaskSpec& spec) {
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
absl::StatusOr<std::vector<SeedResult>> RunUntilStopped(const RunControl& control) {
  while (!control.should_stop()) absl::SleepFor(absl::Milliseconds(1));
  return absl::CancelledError("stopped");
}

Task MakeTask(const std::string& sweep, std::vector<uint64_t> seeds, int64_t first_cell,
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

AgentOptions TestOptions() {
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

std::vector<std::tuple<int64_t, int64_t, uint64_t, int64_t>> Flatten(
    const std::vector<CellResult>& results) {
  std::vector<std::tuple<int64_t, int64_t, uint64_t, int64_t>> out;
  for (const CellResult& r : results) {
    out.emplace_back(r.cell_id, r.lease_id, r.result.seed, r.result.steps);
  }
  return out;
}

TEST(AgentTest, RegistersAndMapsResultsToCellsBySeed) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {5, 3, 9}, 10, 100)});
  // The runner returns its results in a different order than the cells.
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) {
    std::vector<SeedResult> r = ResultsFor(spec);
    std::reverse(r.begin(), r.end());
    return r;
  });
  Agent agent(&coordinator, &runner, TestOptions());
  ASSERT_TRUE(agent.Run().ok());

  ASSERT_EQ(coordinator.registers.size(), 1u);
  const RegisterRequest& reg = coordinator.registers[0];
  EXPECT_EQ(reg.hostname, "host-a");
  EXPECT_EQ(reg.slots, 1);
  EXPECT_EQ(reg.version.build_id, "0.1.0+abc");
  EXPECT_EQ(reg.version.torch_version, "1.13.1");
  EXPECT_EQ(reg.worker_id, "");
  EXPECT_EQ(agent.worker_id(), "w-1");

  ASSERT_GE(coordinator.acquires.size(), 1u);
  EXPECT_EQ(coordinator.acquires[0].worker_id, "w-1");
  EXPECT_EQ(coordinator.acquires[0].max_tasks, 1);
  EXPECT_EQ(coordinator.acquires[0].max_seeds, 16);

  ASSERT_EQ(coordinator.completes.size(), 1u);
  EXPECT_THAT(Flatten(coordinator.completes[0]),
              ElementsAre(std::make_tuple(10, 100, 5u, 105), std::make_tuple(11, 101, 3u, 103),
                          std::make_tuple(12, 102, 9u, 109)));
  EXPECT_TRUE(coordinator.fails.empty());
  const AgentStats s = agent.stats();
  EXPECT_EQ(s.tasks_acquired, 1);
  EXPECT_EQ(s.tasks_completed, 1);
  EXPECT_EQ(s.cells_completed, 3);
}

// A finished task's CompleteTasks call leases the slot's next task.
TEST(AgentTest, TheCallThatReportsATaskLeasesTheSlotsNextTask) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {1, 2}, 10, 100)});
  coordinator.next_script.push_back(std::vector<Task>{MakeTask("s-1", {3}, 12, 102)});
  // The first task records how many acquire calls the agent had made when it
  // ran; the second one must not need another.
  std::vector<size_t> acquires_when_run;
  FakeRunner runner([&](const TaskSpec& spec, const RunControl&) {
    {
      absl::MutexLock lock(&coordinator.mu);
      acquires_when_run.push_back(coordinator.acquires.size());
    }
    return absl::StatusOr<std::vector<SeedResult>>(ResultsFor(spec));
  });
  AgentOptions options = TestOptions();
  options.registration.slots = 1;
  options.registration.memory_bytes = int64_t{8} << 30;
  Agent agent(&coordinator, &runner, options);
  ASSERT_TRUE(agent.Run().ok());

  EXPECT_THAT(runner.ran(), ElementsAre(std::vector<uint64_t>{1, 2}, std::vector<uint64_t>{3}));
  EXPECT_THAT(acquires_when_run, ElementsAre(1u, 1u));
  ASSERT_EQ(coordinator.completes.size(), 2u);
  EXPECT_THAT(Flatten(coordinator.completes[1]), ElementsAre(std::make_tuple(12, 102, 3u, 103)));
  // Both reports asked for one task of up to 16 seeds in the slot's memory.
  ASSERT_EQ(coordinator.nexts.size(), 2u);
  for (const NextTasks& next : coordinator.nexts) {
    EXPECT_EQ(next.max_tasks, 1);
    EXPECT_EQ(next.max_seeds, 16);
    EXPECT_EQ(next.memory_bytes, int64_t{8} << 30);
  }
  const AgentStats s = agent.stats();
  EXPECT_EQ(s.tasks_acquired, 2);
  EXPECT_EQ(s.tasks_completed, 2);
  EXPECT_EQ(s.cells_completed, 3);
  EXPECT_TRUE(coordinator.fails.empty());
}

// A drain that begins while the report is in flight gets the task leased
// with it, and gives it straight back without using an attempt.
TEST(AgentTest, ATaskLeasedWithAReportDuringADrainIsReleased) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {1}, 10, 100)});
  coordinator.next_script.push_back(std::vector<Task>{MakeTask("s-1", {2, 3}, 11, 101)});
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  AgentOptions options = TestOptions();
  options.exit_when_idle = false;
  Agent agent(&coordinator, &runner, options);
  coordinator.on_complete = [&agent] { agent.RequestDrain(); };
  ASSERT_TRUE(agent.Run().ok());

  EXPECT_THAT(runner.ran(), ElementsAre(std::vector<uint64_t>{1}));
  ASSERT_EQ(coordinator.fails.size(), 1u);
  EXPECT_THAT(coordinator.fails[0].leases, ElementsAre(101, 102));
  EXPECT_TRUE(coordinator.fails[0].release);
  const AgentStats s = agent.stats();
  EXPECT_EQ(s.tasks_acquired, 2);
  EXPECT_EQ(s.tasks_completed, 1);
  EXPECT_EQ(s.tasks_released, 1);
}

// After a lost reply the first attempt may have leased a task the agent
// never saw; the retry asks again, and the coordinator answers it with that
// task (CoordinatorTest.ResultsSentAgainGetTheTasksTheirLostReplyLeased).
TEST(AgentTest, ARetriedReportAsksForTheNextTaskAgain) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {1}, 10, 100)});
  coordinator.complete_errors.push_back(absl::UnavailableError("reply lost"));
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) {
    return absl::StatusOr<std::vector<SeedResult>>(ResultsFor(spec));
  });
  Agent agent(&coordinator, &runner, TestOptions());
  ASSERT_TRUE(agent.Run().ok());
  ASSERT_EQ(coordinator.nexts.size(), 2u);
  EXPECT_EQ(coordinator.nexts[0].max_tasks, 1);
  EXPECT_EQ(coordinator.nexts[1].max_tasks, 1);
  EXPECT_EQ(coordinator.acknowledged.size(), 1u);
  EXPECT_EQ(agent.stats().tasks_completed, 1);
}

TEST(AgentTest, AsksForTheMemoryShareOfItsFreeSlots) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {1}, 10, 100)});
  // The task runs until the agent has asked for more work with one slot busy.
  FakeRunner runner([&coordinator](const TaskSpec& spec, const RunControl&) {
    while (true) {
      {
        absl::MutexLock lock(&coordinator.mu);
        if (coordinator.acquires.size() >= 2) break;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
    return absl::StatusOr<std::vector<SeedResult>>(ResultsFor(spec));
  });
  AgentOptions options = TestOptions();
  options.registration.slots = 2;
  options.registration.memory_bytes = int64_t{8} << 30;
  Agent agent(&coordinator, &runner, options);
  ASSERT_TRUE(agent.Run().ok());
  ASSERT_GE(coordinator.acquires.size(), 2u);
  EXPECT_EQ(coordinator.acquires[0].max_tasks, 2);
  EXPECT_EQ(coordinator.acquires[0].memory_bytes, int64_t{8} << 30);
  EXPECT_EQ(coordinator.acquires[1].max_tasks, 1);
  EXPECT_EQ(coordinator.acquires[1].memory_bytes, int64_t{4} << 30);
}

TEST(AgentTest, UnknownMemoryStaysUnknownInAcquire) {
  FakeCoordinator coordinator;
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  AgentOptions options = TestOptions();
  options.registration.memory_bytes = 0;
  Agent agent(&coordinator, &runner, options);
  ASSERT_TRUE(agent.Run().ok());
  ASSERT_GE(coordinator.acquires.size(), 1u);
  EXPECT_EQ(coordinator.acquires[0].memory_bytes, 0);
}

TEST(AgentTest, RetriesTransientErrorsThenSucceeds) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(absl::UnavailableError("connection refused"));
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {0, 1}, 10, 100)});
  coordinator.complete_errors = {absl::UnavailableError("connection refused"),
                                 absl::DeadlineExceededError("deadline")};
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  Agent agent(&coordinator, &runner, TestOptions());
  ASSERT_TRUE(agent.Run().ok());

  EXPECT_EQ(coordinator.completes.size(), 3u);
  ASSERT_EQ(coordinator.acknowledged.size(), 1u);
  EXPECT_THAT(Flatten(coordinator.acknowledged[0]),
              ElementsAre(std::make_tuple(10, 100, 0u, 100), std::make_tuple(11, 101, 1u, 101)));
  EXPECT_TRUE(coordinator.fails.empty());
  EXPECT_EQ(agent.stats().tasks_completed, 1);
}

TEST(AgentTest, UnacknowledgedResultsAreSentAgainLater) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {7}, 20, 200)});
  // More failures than one call's attempts: the results must survive the
  // first give-up and go out again from the outbox.
  coordinator.complete_errors.assign(5, absl::UnavailableError("coordinator restarting"));
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  AgentOptions options = TestOptions();
  options.retry.max_attempts = 2;
  Agent agent(&coordinator, &runner, options);
  ASSERT_TRUE(agent.Run().ok());

  ASSERT_EQ(coordinator.completes.size(), 6u);
  for (const auto& call : coordinator.completes) {
    EXPECT_THAT(Flatten(call), ElementsAre(std::make_tuple(20, 200, 7u, 107)));
  }
  EXPECT_EQ(coordinator.acknowledged.size(), 1u);
  EXPECT_EQ(agent.stats().tasks_completed, 1);
  EXPECT_EQ(agent.stats().cells_completed, 1);
}

// A coordinator that shuts down with the call in flight answers CANCELLED
// (and UNAVAILABLE until it is back): the results are kept and sent again
// under the same leases, never discarded to be trained again.
TEST(AgentTest, ResultsCutByACoordinatorShutdownAreKeptAndSentAgain) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {3}, 30, 300)});
  coordinator.complete_errors = {absl::CancelledError("Cancelled"),
                                 absl::UnavailableError("connection refused"),
                                 absl::CancelledError("Cancelled")};
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  AgentOptions options = TestOptions();
  options.retry.max_attempts = 2;  // gives up once: the outbox sends them again
  Agent agent(&coordinator, &runner, options);
  ASSERT_TRUE(agent.Run().ok());

  ASSERT_EQ(coordinator.completes.size(), 4u);
  for (const auto& call : coordinator.completes) {
    EXPECT_THAT(Flatten(call), ElementsAre(std::make_tuple(30, 300, 3u, 103)));
  }
  EXPECT_EQ(coordinator.acknowledged.size(), 1u);
  EXPECT_EQ(runner.ran().size(), 1u);  // trained once
  EXPECT_EQ(agent.stats().results_discarded, 0);
  EXPECT_EQ(agent.stats().cells_completed, 1);
  EXPECT_TRUE(coordinator.fails.empty());
}

TEST(AgentTest, HeartbeatCancellationStopsTheRunner) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {0, 1}, 10, 100)});
  // The cancellation comes once the runner has started: a task cancelled
  // while still queued is dropped without running (DropLeases), which a
  // loaded machine would otherwise make this test see.
  std::atomic<bool> started{false};
  coordinator.on_heartbeat = [&started](const std::vector<int64_t>& leases) {
    HeartbeatReply reply;
    if (started.load()) reply.cancelled_lease_ids = leases;
    return reply;
  };
  std::atomic<bool> stopped{false};
  FakeRunner runner([&](const TaskSpec&, const RunControl& control) {
    started = true;
    auto r = RunUntilStopped(control);
    stopped = true;
    return r;
  });
  Agent agent(&coordinator, &runner, TestOptions());
  ASSERT_TRUE(agent.Run().ok());

  EXPECT_TRUE(stopped.load());
  EXPECT_THAT(coordinator.heartbeats, ::testing::Contains(std::vector<int64_t>{100, 101}));
  EXPECT_TRUE(coordinator.completes.empty());
  EXPECT_TRUE(coordinator.fails.empty());  // the coordinator already knows
  EXPECT_EQ(agent.stats().tasks_dropped, 1);
  EXPECT_EQ(agent.stats().tasks_completed, 0);
}

TEST(AgentTest, ATaskReportsItsSeedsErrorsAtEachRungAndStopsWhenPruned) {
  FakeCoordinator coordinator;
  Task task = MakeTask("s-1", {0, 1}, 10, 100);
  task.rung_steps = {20, 60};
  coordinator.acquire_script.push_back(std::vector<Task>{task});
  // The first rung keeps the task, the second prunes it.
  coordinator.on_report = [](const std::vector<LeaseProgress>& progress) {
    HeartbeatReply reply;
    if (progress.front().step >= 60) {
      for (const LeaseProgress& p : progress) reply.pruned_lease_ids.push_back(p.lease_id);
    }
    return reply;
  };
  std::atomic<int64_t> stopped_at{0};
  FakeRunner runner([&](const TaskSpec& spec, const RunControl& control) {
    // Evaluations every 10 steps; seed i's error is (i + 1) / 10 at each.
    for (int64_t step = 10; step <= 100; step += 10) {
      control.on_eval(step, {0.1, 0.2});
      if (control.should_stop()) {
        stopped_at = step;
        return absl::StatusOr<std::vector<SeedResult>>(absl::CancelledError("stopped"));
      }
    }
    return absl::StatusOr<std::vector<SeedResult>>(ResultsFor(spec));
  });
  Agent agent(&coordinator, &runner, TestOptions());
  ASSERT_TRUE(agent.Run().ok());

  // Reported at the rungs (20 and 60), not at every evaluation before the
  // first; each seed under its own lease with its own error.
  ASSERT_GE(coordinator.reports.size(), 2u);
  EXPECT_EQ(coordinator.reports.front().size(), 2u);
  EXPECT_EQ(coordinator.reports.front()[0].step, 20);
  EXPECT_EQ(coordinator.reports.front()[0].lease_id, 100);
  EXPECT_DOUBLE_EQ(coordinator.reports.front()[1].train_error, 0.2);
  EXPECT_EQ(coordinator.reports.back()[0].step, 60);
  EXPECT_EQ(stopped_at.load(), 60);
  EXPECT_TRUE(coordinator.completes.empty());
  EXPECT_TRUE(coordinator.fails.empty());  // the coordinator already knows
  EXPECT_EQ(agent.stats().tasks_pruned, 1);
  EXPECT_EQ(agent.stats().tasks_dropped, 1);
}

TEST(AgentTest, LostLeaseOfOneCellReportsOnlyTheOthers) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {0, 1}, 10, 100)});
  coordinator.on_heartbeat = [](const std::vector<int64_t>&) {
    HeartbeatReply reply;
    reply.lost_lease_ids = {101};
    return reply;
  };
  FakeRunner runner([&](const TaskSpec& spec, const RunControl& control) {
    // Train across a few heartbeats.
    absl::SleepFor(absl::Milliseconds(40));
    return ResultsFor(spec);
  });
  Agent agent(&coordinator, &runner, TestOptions());
  ASSERT_TRUE(agent.Run().ok());
  ASSERT_EQ(coordinator.completes.size(), 1u);
  EXPECT_THAT(Flatten(coordinator.completes[0]), ElementsAre(std::make_tuple(10, 100, 0u, 100)));
}

TEST(AgentTest, TrainerErrorIsReportedAsAFailure) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {0, 1}, 10, 100)});
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {2}, 12, 102)});
  int calls = 0;
  FakeRunner runner([&](const TaskSpec&, const RunControl&)
                        -> absl::StatusOr<std::vector<SeedResult>> {
    if (calls++ == 0) return absl::InvalidArgumentError("dataset.m must be in 1..64, got 99");
    return absl::ResourceExhaustedError("CUDA out of memory");
  });
  Agent agent(&coordinator, &runner, TestOptions());
  ASSERT_TRUE(agent.Run().ok());

  ASSERT_EQ(coordinator.fails.size(), 2u);
  EXPECT_EQ(coordinator.fails[0].leases, (std::vector<int64_t>{100, 101}));
  EXPECT_EQ(coordinator.fails[0].reason, "INVALID_ARGUMENT: dataset.m must be in 1..64, got 99");
  EXPECT_FALSE(coordinator.fails[0].release);
  // Out of memory is the worker's fault: the cells go back without an attempt.
  EXPECT_EQ(coordinator.fails[1].leases, (std::vector<int64_t>{102}));
  EXPECT_EQ(coordinator.fails[1].reason, "RESOURCE_EXHAUSTED: CUDA out of memory");
  EXPECT_TRUE(coordinator.fails[1].release);
  EXPECT_TRUE(coordinator.completes.empty());
  EXPECT_EQ(agent.stats().tasks_failed, 1);
  EXPECT_EQ(agent.stats().tasks_released, 1);
}

TEST(AgentTest, AnInvalidResultFailsTheTaskInsteadOfBeingSent) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {0, 1}, 10, 100)});
  FakeRunner runner([&](const TaskSpec& spec, const RunControl&)
                        -> absl::StatusOr<std::vector<SeedResult>> {
    std::vector<SeedResult> results = ResultsFor(spec);
    results[1].train.exact_accuracy = std::nan("");  // a GPU gone bad
    return results;
  });
  Agent agent(&coordinator, &runner, TestOptions());
  ASSERT_TRUE(agent.Run().ok());

  EXPECT_TRUE(coordinator.completes.empty());
  ASSERT_EQ(coordinator.fails.size(), 1u);
  EXPECT_EQ(coordinator.fails[0].leases, (std::vector<int64_t>{100, 101}));
  EXPECT_EQ(coordinator.fails[0].reason,
            "trainer produced an invalid result for seed 1: result.train.exact_accuracy must be "
            "in [0, 1], got nan");
  EXPECT_FALSE(coordinator.fails[0].release);
  EXPECT_EQ(agent.stats().tasks_failed, 1);
}

TEST(AgentTest, ALongFailureReasonIsCutToTheLimit) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {0}, 10, 100)});
  FakeRunner runner([&](const TaskSpec&, const RunControl&)
                        -> absl::StatusOr<std::vector<SeedResult>> {
    return absl::InternalError(std::string(100000, 'x'));
  });
  Agent agent(&coordinator, &runner, TestOptions());
  ASSERT_TRUE(agent.Run().ok());
  ASSERT_EQ(coordinator.fails.size(), 1u);
  EXPECT_LE(coordinator.fails[0].reason.size(), ResultLimits::kMaxReasonLength);
  EXPECT_EQ(coordinator.fails[0].reason.substr(0, 12), "INTERNAL: xx");
}

TEST(AgentTest, DrainReleasesUnstartedTasksAndLetsRunningOnesFinish) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {0, 1}, 10, 100),
                                                         MakeTask("s-1", {2, 3}, 12, 102)});
  absl::Notification started, finish;
  FakeRunner runner([&](const TaskSpec& spec, const RunControl&) {
    started.Notify();
    finish.WaitForNotification();
    return ResultsFor(spec);
  });
  AgentOptions options = TestOptions();
  options.exit_when_idle = false;
  options.drain_timeout = absl::Seconds(30);
  Agent agent(&coordinator, &runner, options);
  absl::Status run_status = absl::UnknownError("not run");
  std::thread run([&] { run_status = agent.Run(); });

  started.WaitForNotification();
  agent.RequestDrain();
  while (coordinator.FailCount() == 0) absl::SleepFor(absl::Milliseconds(1));
  {
    absl::MutexLock lock(&coordinator.mu);
    ASSERT_EQ(coordinator.fails.size(), 1u);
    EXPECT_EQ(coordinator.fails[0].leases, (std::vector<int64_t>{102, 103}));
    EXPECT_EQ(coordinator.fails[0].reason, "worker shutting down");
    EXPECT_TRUE(coordinator.fails[0].release);
  }
  finish.Notify();
  run.join();

  EXPECT_TRUE(run_status.ok()) << run_status;
  ASSERT_EQ(coordinator.completes.size(), 1u);
  EXPECT_THAT(Flatten(coordinator.completes[0]),
              ElementsAre(std::make_tuple(10, 100, 0u, 100), std::make_tuple(11, 101, 1u, 101)));
  EXPECT_EQ(coordinator.fails.size(), 1u);
  EXPECT_EQ(agent.stats().tasks_released, 1);
  EXPECT_EQ(agent.stats().tasks_completed, 1);
}

// A worker told to stop while the coordinator is down keeps sending its
// finished results until the drain's time is up, instead of exiting after
// one call's attempts and leaving their cells to be trained again.
TEST(AgentTest, DrainKeepsSendingResultsToACoordinatorThatIsDown) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {4}, 40, 400)});
  // Three calls' worth of attempts fail: the runner's, the drain's first
  // send, and one more round.
  coordinator.complete_errors.assign(5, absl::UnavailableError("connection refused"));
  Agent* drained = nullptr;
  FakeRunner runner([&drained](const TaskSpec& spec, const RunControl&) {
    drained->RequestDrain();
    return ResultsFor(spec);
  });
  AgentOptions options = TestOptions();
  options.exit_when_idle = false;
  options.retry.max_attempts = 2;
  options.drain_timeout = absl::Seconds(30);
  Agent agent(&coordinator, &runner, options);
  drained = &agent;
  ASSERT_TRUE(agent.Run().ok());

  ASSERT_EQ(coordinator.completes.size(), 6u);
  ASSERT_EQ(coordinator.acknowledged.size(), 1u);
  EXPECT_THAT(Flatten(coordinator.acknowledged[0]), ElementsAre(std::make_tuple(40, 400, 4u, 104)));
  EXPECT_EQ(agent.stats().cells_completed, 1);
  EXPECT_TRUE(coordinator.fails.empty());
}

TEST(AgentTest, DrainTimeoutStopsAndReleasesRunningTasks) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {0, 1}, 10, 100)});
  absl::Notification started;
  FakeRunner runner([&](const TaskSpec&, const RunControl& control) {
    started.Notify();
    return RunUntilStopped(control);
  });
  AgentOptions options = TestOptions();
  options.exit_when_idle = false;
  options.drain_timeout = absl::Milliseconds(20);
  Agent agent(&coordinator, &runner, options);
  absl::Status run_status = absl::UnknownError("not run");
  std::thread run([&] { run_status = agent.Run(); });
  started.WaitForNotification();
  agent.RequestDrain();
  run.join();

  EXPECT_TRUE(run_status.ok()) << run_status;
  ASSERT_EQ(coordinator.fails.size(), 1u);
  EXPECT_EQ(coordinator.fails[0].leases, (std::vector<int64_t>{100, 101}));
  EXPECT_EQ(coordinator.fails[0].reason, "worker shutting down");
  EXPECT_TRUE(coordinator.fails[0].release);
  EXPECT_TRUE(coordinator.completes.empty());
  EXPECT_EQ(agent.stats().tasks_released, 1);
}

TEST(AgentTest, UnknownWorkerRegistersAgainUnderTheSameId) {
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(absl::NotFoundError("unknown worker w-1"));
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {0}, 10, 100)});
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  Agent agent(&coordinator, &runner, TestOptions());
  ASSERT_TRUE(agent.Run().ok());
  ASSERT_EQ(coordinator.registers.size(), 2u);
  EXPECT_EQ(coordinator.registers[0].worker_id, "");
  EXPECT_EQ(coordinator.registers[1].worker_id, "w-1");
  EXPECT_EQ(coordinator.acknowledged.size(), 1u);
}

TEST(AgentTest, RefusedRegistrationIsReturned) {
  class Refusing : public FakeCoordinator {
    absl::StatusOr<RegisterReply> Register(const RegisterRequest&) override {
      return absl::InvalidArgumentError("slots must be in 1..64, got 0");
    }
  } coordinator;
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  Agent agent(&coordinator, &runner, TestOptions());
  EXPECT_EQ(agent.Run(), absl::InvalidArgumentError("slots must be in 1..64, got 0"));
}

// ------------------------------------------------------------- the outbox

// The batch files in an outbox directory.
int BatchFiles(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) n += std::string(e->d_name).rfind("batch-", 0) == 0 ? 1 : 0;
  closedir(d);
  return n;
}

std::unique_ptr<FileOutbox> OpenOutbox(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<FileOutbox>> outbox = FileOutbox::Open(dir);
  EXPECT_TRUE(outbox.ok()) << outbox.status();
  return outbox.ok() ? std::move(*outbox) : nullptr;
}

// What one agent process did: it ran on `outbox` against `coordinator`
// until idle, training with ResultsFor.
struct IdleRun {
  absl::Status status;
  AgentStats stats;
  std::string worker_id;
  std::vector<std::vector<uint64_t>> trained;  // the seeds of every task run
};

IdleRun RunUntilIdle(FakeCoordinator& coordinator, Outbox* outbox) {
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  AgentOptions options = TestOptions();
  options.outbox = outbox;
  Agent agent(&coordinator, &runner, options);
  IdleRun run;
  run.status = agent.Run();
  run.stats = agent.stats();
  run.worker_id = agent.worker_id();
  run.trained = runner.ran();
  return run;
}

TEST(AgentOutboxTest, ResultsAreOnDiskBeforeTheyAreFirstSentAndGoneOnceAcknowledged) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {4, 5}, 40, 400)});
  std::vector<int> on_disk_when_sent;
  coordinator.on_complete = [&] { on_disk_when_sent.push_back(BatchFiles(dir)); };
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  AgentOptions options = TestOptions();
  options.outbox = outbox.get();
  Agent agent(&coordinator, &runner, options);
  ASSERT_TRUE(agent.Run().ok());

  EXPECT_THAT(on_disk_when_sent, ElementsAre(1));
  EXPECT_EQ(BatchFiles(dir), 0);
  EXPECT_EQ(outbox->batches(), 0);
  ASSERT_EQ(coordinator.acknowledged.size(), 1u);
  // The registration's session is kept for a later process.
  outbox.reset();
  std::optional<OutboxSession> session = OpenOutbox(dir)->LeftSession();
  ASSERT_TRUE(session.has_value());
  EXPECT_EQ(session->worker_id, "w-1");
  EXPECT_EQ(session->session, "ws_secret");
  EXPECT_EQ(session->lease_seconds, 30);
  EXPECT_EQ(session->heartbeat_seconds, 10);
}

// A worker that stops before the coordinator acknowledged its results
// leaves them on disk; the next process sends them under the same worker id
// and session, before it registers, without training them again.
TEST(AgentOutboxTest, ResultsLeftByOneProcessAreSentByTheNextUnderItsSession) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  {
    std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
    FakeCoordinator down;
    down.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {4, 5}, 40, 400)});
    down.complete_errors.assign(1000, absl::UnavailableError("connection refused"));
    Agent* drained = nullptr;
    FakeRunner runner([&drained](const TaskSpec& spec, const RunControl&) {
      drained->RequestDrain();
      return ResultsFor(spec);
    });
    AgentOptions options = TestOptions();
    options.exit_when_idle = false;
    options.drain_timeout = absl::Milliseconds(200);
    options.outbox = outbox.get();
    Agent agent(&down, &runner, options);
    drained = &agent;
    ASSERT_TRUE(agent.Run().ok());
    EXPECT_TRUE(down.acknowledged.empty());
    EXPECT_EQ(outbox->batches(), 1);
  }
  EXPECT_EQ(BatchFiles(dir), 1);

  std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
  FakeCoordinator back;
  const IdleRun run = RunUntilIdle(back, outbox.get());
  ASSERT_TRUE(run.status.ok()) << run.status;

  EXPECT_TRUE(run.trained.empty());  // nothing trained again
  ASSERT_GE(back.calls.size(), 3u);
  EXPECT_THAT(std::vector<std::string>(back.calls.begin(), back.calls.begin() + 3),
              ElementsAre("resume ws_secret", "complete w-1 leases 400 401 next=0",
                          "register w-1"));
  ASSERT_EQ(back.acknowledged.size(), 1u);
  EXPECT_THAT(Flatten(back.acknowledged[0]),
              ElementsAre(std::make_tuple(40, 400, 4u, 104), std::make_tuple(41, 401, 5u, 105)));
  EXPECT_EQ(run.stats.batches_resumed, 1);
  EXPECT_EQ(run.stats.cells_completed, 2);
  EXPECT_EQ(BatchFiles(dir), 0);
}

// One stale lease makes the coordinator refuse a whole call; the batch is
// then sent a result at a time, so the others still count and the stale
// one is dropped on its own.
TEST(AgentOutboxTest, ABatchRefusedForAStaleLeaseIsResolvedOneResultAtATime) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  {
    std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
    ASSERT_TRUE(outbox->SaveSession({"w-9", "ws_old", 30, 10}).ok());
    OutboxBatch batch{3, "s-1 r=4 seeds=2", {}};
    for (const SeedResult& r : ResultsFor(MakeTask("s-1", {4, 5}, 40, 400).spec)) {
      batch.results.push_back({40 + static_cast<int64_t>(r.seed) - 4,
                               400 + static_cast<int64_t>(r.seed) - 4, r});
    }
    ASSERT_TRUE(outbox->Add(batch).ok());
  }
  std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
  FakeCoordinator coordinator;
  const absl::Status stale = absl::FailedPreconditionError(
      "lease 400 for cell 40 is not held by this worker (expired, reassigned or never its own)");
  coordinator.complete_errors = {stale, stale, absl::OkStatus()};
  const IdleRun run = RunUntilIdle(coordinator, outbox.get());
  ASSERT_TRUE(run.status.ok()) << run.status;

  ASSERT_GE(coordinator.calls.size(), 5u);
  EXPECT_THAT(std::vector<std::string>(coordinator.calls.begin(), coordinator.calls.begin() + 5),
              ElementsAre("resume ws_old", "complete w-9 leases 400 401 next=0",
                          "complete w-9 leases 400 next=0", "complete w-9 leases 401 next=0",
                          "register w-9"));
  ASSERT_EQ(coordinator.acknowledged.size(), 1u);
  EXPECT_THAT(Flatten(coordinator.acknowledged[0]), ElementsAre(std::make_tuple(41, 401, 5u, 105)));
  EXPECT_EQ(run.stats.cells_completed, 1);
  EXPECT_EQ(run.stats.results_discarded, 1);
  EXPECT_EQ(BatchFiles(dir), 0);
}

// With nothing left to send, a restarted worker still keeps its identity;
// an id the coordinator refuses (another token's, a quarantined one) is
// given up for a new one.
TEST(AgentOutboxTest, ARestartKeepsTheWorkerIdUnlessTheCoordinatorRefusesIt) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  ASSERT_TRUE(OpenOutbox(dir)->SaveSession({"w-9", "ws_old", 30, 10}).ok());
  {
    std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
    FakeCoordinator coordinator;
    const IdleRun run = RunUntilIdle(coordinator, outbox.get());
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_THAT(coordinator.calls, ElementsAre("register w-9"));
    EXPECT_EQ(run.worker_id, "w-9");
  }
  std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
  FakeCoordinator coordinator;
  coordinator.register_errors.push_back(
      absl::PermissionDeniedError("worker w-9 is quarantined; an admin lifts it"));
  const IdleRun run = RunUntilIdle(coordinator, outbox.get());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_THAT(coordinator.calls, ElementsAre("register w-9", "register "));
  EXPECT_EQ(run.worker_id, "w-1");
}

// A full outbox refuses the batch with a line naming its bound; the
// results are still sent (from memory) and acknowledged.
TEST(AgentOutboxTest, AFullOutboxIsLoggedAndTheResultsAreSentFromMemory) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  absl::StatusOr<std::unique_ptr<FileOutbox>> outbox =
      FileOutbox::Open(dir, OutboxLimits{1000, 4096});
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  std::vector<uint64_t> seeds;
  for (uint64_t seed = 0; seed < 200; ++seed) seeds.push_back(seed);  // well over 4 kB
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", seeds, 1000, 5000)});
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  AgentOptions options = TestOptions();
  options.outbox = outbox->get();
  absl::Mutex log_mu;
  std::vector<std::string> lines;
  options.log = [&](const std::string& line) {
    absl::MutexLock lock(&log_mu);
    lines.push_back(line);
  };
  Agent agent(&coordinator, &runner, options);
  ASSERT_TRUE(agent.Run().ok());

  ASSERT_EQ(coordinator.acknowledged.size(), 1u);
  EXPECT_EQ(coordinator.acknowledged[0].size(), 200u);
  EXPECT_EQ(BatchFiles(dir), 0);
  int full = 0;
  for (const std::string& line : lines) {
    if (line.rfind("outbox: outbox " + dir + " is full: 0 bytes held and ", 0) == 0 &&
        line.find(" more would pass the bound of 4096 bytes (--outbox-max-bytes); the results "
                  "of s-1 ") != std::string::npos &&
        line.find(" are kept in memory only until acknowledged") != std::string::npos) {
      ++full;
    }
  }
  EXPECT_EQ(full, 1) << ::testing::PrintToString(lines);
}

// --drain-seconds is a hard deadline: it goes to the client (which cuts
// calls in flight), and no backoff between attempts outlives it. Results
// not acknowledged by then stay in the outbox.
TEST(AgentOutboxTest, TheDrainsDeadlineHoldsAgainstLongBackoffs) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {4}, 40, 400)});
  coordinator.complete_errors.assign(1000, absl::UnavailableError("connection refused"));
  Agent* drained = nullptr;
  absl::Time requested;
  FakeRunner runner([&](const TaskSpec& spec, const RunControl&) {
    requested = absl::Now();
    drained->RequestDrain();
    return ResultsFor(spec);
  });
  AgentOptions options = TestOptions();
  options.exit_when_idle = false;
  options.drain_timeout = absl::Milliseconds(300);
  options.retry.initial_backoff = absl::Seconds(20);
  options.retry.max_backoff = absl::Seconds(20);
  options.retry.max_attempts = 100;
  options.outbox = outbox.get();
  Agent agent(&coordinator, &runner, options);
  drained = &agent;
  ASSERT_TRUE(agent.Run().ok());
  const absl::Duration took = absl::Now() - requested;

  EXPECT_LT(took, absl::Seconds(3));  // not one 20 s backoff
  ASSERT_EQ(coordinator.deadlines.size(), 1u);
  EXPECT_GE(coordinator.deadlines[0], requested + absl::Milliseconds(300));
  EXPECT_LT(coordinator.deadlines[0], requested + absl::Milliseconds(400));
  EXPECT_TRUE(coordinator.acknowledged.empty());
  EXPECT_EQ(BatchFiles(dir), 1);
}

TEST(BackoffTest, DoublesUpToTheCapWithoutJitter) {
  RetryPolicy policy;
  policy.initial_backoff = absl::Milliseconds(100);
  policy.max_backoff = absl::Milliseconds(350);
  policy.jitter = 0;
  Backoff b(policy, 1);
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(200));
  EXPECT_EQ(b.Next(), absl::Milliseconds(350));
  EXPECT_EQ(b.Next(), absl::Milliseconds(350));
  b.Reset();
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, JitterStaysInItsBand) {
  RetryPolicy policy;
  policy.initial_backoff = absl::Milliseconds(100);
  policy.jitter = 0.2;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Backoff b(policy, seed);
    const absl::Duration d = b.Next();
    EXPECT_GE(d, absl::Milliseconds(80));
    EXPECT_LE(d, absl::Milliseconds(120));
  }
}

TEST(RetryTest, TransientCodes) {
  EXPECT_TRUE(IsTransient(absl::UnavailableError("")));
  EXPECT_TRUE(IsTransient(absl::DeadlineExceededError("")));
  EXPECT_TRUE(IsTransient(absl::ResourceExhaustedError("")));
  EXPECT_TRUE(IsTransient(absl::CancelledError("")));
  EXPECT_FALSE(IsTransient(absl::FailedPreconditionError("")));
  EXPECT_FALSE(IsTransient(absl::NotFoundError("")));
  EXPECT_FALSE(IsTransient(absl::OkStatus()));
}

}  // namespace
}  // namespace ranksweep::agent
