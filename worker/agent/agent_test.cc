// The worker agent against a scripted coordinator: registration, leasing
// and the slot's next task, reporting and retries, progress and pruning,
// failures, drains. Its outbox on disk is in agent_outbox_test.cc, the
// retry policy in retry_test.cc.
#include "worker/agent/agent.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/spec/result_validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/agent/agent_test_fixture.h"

namespace ranksweep::agent {
namespace {

using ::testing::ElementsAre;


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
  const WorkerRegistration& reg = coordinator.registers[0];
  EXPECT_EQ(reg.hostname, "host-a");
  EXPECT_EQ(reg.slots, 1);
  EXPECT_EQ(reg.version.build_id, "0.1.0+abc");
  EXPECT_EQ(reg.version.torch_version, "1.13.1");
  EXPECT_EQ(reg.worker_id, "");
  EXPECT_EQ(agent.worker_id(), "w-1");

  ASSERT_GE(coordinator.acquires.size(), 1u);
  EXPECT_EQ(coordinator.acquires[0].worker_id, "w-1");
  EXPECT_EQ(coordinator.acquires[0].want.max_tasks, 1);
  EXPECT_EQ(coordinator.acquires[0].want.max_seeds, 16);

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
  for (const std::optional<TaskWant>& next : coordinator.nexts) {
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->max_tasks, 1);
    EXPECT_EQ(next->max_seeds, 16);
    EXPECT_EQ(next->memory_bytes, int64_t{8} << 30);
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
  ASSERT_TRUE(coordinator.nexts[0].has_value());
  ASSERT_TRUE(coordinator.nexts[1].has_value());
  EXPECT_EQ(coordinator.nexts[0]->max_tasks, 1);
  EXPECT_EQ(coordinator.nexts[1]->max_tasks, 1);
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
  EXPECT_EQ(coordinator.acquires[0].want.max_tasks, 2);
  EXPECT_EQ(coordinator.acquires[0].want.memory_bytes, int64_t{8} << 30);
  EXPECT_EQ(coordinator.acquires[1].want.max_tasks, 1);
  EXPECT_EQ(coordinator.acquires[1].want.memory_bytes, int64_t{4} << 30);
}

TEST(AgentTest, UnknownMemoryStaysUnknownInAcquire) {
  FakeCoordinator coordinator;
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  AgentOptions options = TestOptions();
  options.registration.memory_bytes = 0;
  Agent agent(&coordinator, &runner, options);
  ASSERT_TRUE(agent.Run().ok());
  ASSERT_GE(coordinator.acquires.size(), 1u);
  EXPECT_EQ(coordinator.acquires[0].want.memory_bytes, 0);
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
    HeartbeatOutcome reply;
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
    HeartbeatOutcome reply;
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
    HeartbeatOutcome reply;
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
    absl::StatusOr<RegisterReply> Register(const WorkerRegistration&) override {
      return absl::InvalidArgumentError("slots must be in 1..64, got 0");
    }
  } coordinator;
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  Agent agent(&coordinator, &runner, TestOptions());
  EXPECT_EQ(agent.Run(), absl::InvalidArgumentError("slots must be in 1..64, got 0"));
}

}  // namespace
}  // namespace ranksweep::agent
