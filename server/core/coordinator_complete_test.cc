// Completing cells: leases as fencing tokens, all-or-nothing calls,
// duplicates, the next tasks leased in the same transaction, listeners, and
// results held to their limits.
#include <string>
#include <vector>

#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// ------------------------------------------------------------------ fencing

TEST_F(CoordinatorTest, StaleAndForeignLeasesAreRejectedAndNothingIsRecorded) {
  std::string sweep = Submit(MakeSpec("one", {1}, 1, 0, false));
  std::string w1 = Register("a");
  std::string w2 = Register("b");
  std::vector<Task> old_tasks = Acquire(w1);
  ASSERT_EQ(old_tasks.size(), 1u);
  clock_.AdvanceMs(kLeaseMs);
  ASSERT_EQ(*coordinator_->ExpireLeases(), 1);
  std::vector<Task> new_tasks = Acquire(w2);
  ASSERT_EQ(new_tasks.size(), 1u);

  // w1 completes under its expired lease: stale.
  auto stale = coordinator_->Complete(w1, ResultsFor(old_tasks[0]));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  // w1 completes under w2's lease: foreign, refused with the same words,
  // naming neither w2 nor the lease the cell is under.
  auto foreign = coordinator_->Complete(w1, ResultsFor(new_tasks[0]));
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition);
  const CellResult old_result = ResultsFor(old_tasks[0])[0];
  const CellResult new_result = ResultsFor(new_tasks[0])[0];
  EXPECT_EQ(stale.status().message(),
            absl::StrFormat("lease %d for cell %d is not held by this worker (expired, "
                            "reassigned or never its own)",
                            old_result.lease_id, old_result.cell_id));
  EXPECT_EQ(foreign.status().message(),
            absl::StrFormat("lease %d for cell %d is not held by this worker (expired, "
                            "reassigned or never its own)",
                            new_result.lease_id, new_result.cell_id));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 1);

  // Heartbeat: the stale lease and the foreign one are both reported lost,
  // alike; the foreign one is not extended.
  auto hb = coordinator_->Heartbeat(w1, LeaseIds(old_tasks[0]));
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->lost_lease_ids, LeaseIds(old_tasks[0]));
  const int64_t deadline = Count("SELECT lease_deadline_ms FROM cells WHERE state = 2");
  clock_.AdvanceMs(1000);
  auto hb_foreign = coordinator_->Heartbeat(w1, LeaseIds(new_tasks[0]));
  ASSERT_TRUE(hb_foreign.ok()) << hb_foreign.status();
  EXPECT_EQ(hb_foreign->lost_lease_ids, LeaseIds(new_tasks[0]));
  EXPECT_THAT(hb_foreign->cancelled_lease_ids, IsEmpty());
  EXPECT_EQ(Count("SELECT lease_deadline_ms FROM cells WHERE state = 2"), deadline);
  // FailTask on someone else's lease is ignored, as a stale one is.
  EXPECT_TRUE(coordinator_->Fail(w1, LeaseIds(new_tasks[0]), "x", false).ok());
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 1);
  EXPECT_EQ(Count("SELECT attempt FROM cells WHERE state = 2"), 2);

  // The holder completes normally.
  auto ok = coordinator_->Complete(w2, ResultsFor(new_tasks[0]));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->recorded, 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 1);
}

TEST_F(CoordinatorTest, CompleteIsAllOrNothing) {
  std::string sweep = Submit(MakeSpec("grid"));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 2);
  std::vector<CellResult> results = ResultsFor(tasks[0]);
  results[1].lease_id += 1000;  // not the cell's lease
  auto out = coordinator_->Complete(w, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Cells(sweep, CellState::kDone), 0);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 2);

  results = ResultsFor(tasks[0]);
  results[0].result.seed = 77;  // not the cell's seed
  out = coordinator_->Complete(w, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);

  results = ResultsFor(tasks[0]);
  results[1].cell_id = 999999;
  out = coordinator_->Complete(w, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
}

TEST_F(CoordinatorTest, RepeatedCompletionUnderTheSameLeaseIsADuplicate) {
  std::string sweep = Submit(MakeSpec("grid"));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 4);
  auto first = coordinator_->Complete(w, ResultsFor(tasks[0], 0.25));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->recorded, 4);
  EXPECT_EQ(first->duplicates, 0);
  auto again = coordinator_->Complete(w, ResultsFor(tasks[0], 0.25));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->recorded, 0);
  EXPECT_EQ(again->duplicates, 4);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 4);
  EXPECT_EQ(Cells(sweep, CellState::kDone), 4);
  // A done cell is never leased again.
  std::vector<Task> rest = Acquire(w, 64, 64);
  int64_t leased = 0;
  for (const Task& t : rest) leased += static_cast<int64_t>(t.cells.size());
  EXPECT_EQ(leased, 12);
  // A heartbeat for a completed lease reports it lost.
  auto hb = coordinator_->Heartbeat(w, LeaseIds(tasks[0]));
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->lost_lease_ids.size(), 4u);
  // The worker's completed count went up once per cell.
  auto workers = coordinator_->ListWorkers();
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].completed_cells, 4);
  EXPECT_EQ((*workers)[0].leased_cells, 12);
  EXPECT_TRUE((*workers)[0].alive);
}

// A worker hands in its results and takes its next tasks in one call.
TEST_F(CoordinatorTest, CompleteLeasesTheNextTasksInTheSameTransaction) {
  std::string sweep = Submit(MakeSpec("grid"));  // kernel ranks 1, 2, 4 and softmax; 4 seeds
  std::string w = Register();
  std::vector<Task> first = Acquire(w, 1, 4);
  ASSERT_EQ(first.size(), 1u);

  // Out-of-range wants are refused before anything is written.
  for (const TaskWant& bad : {TaskWant{65, 4, 0}, TaskWant{-1, 4, 0}, TaskWant{1, 1025, 0},
                              TaskWant{1, 4, -1}}) {
    auto out = coordinator_->Complete(w, ResultsFor(first[0]), bad);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  }
  auto too_many = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{65, 4, 0});
  EXPECT_EQ(too_many.status().message(), "next.max_tasks: must be 1..64, got 65");
  auto negative = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{1, 4, -1});
  EXPECT_EQ(negative.status().message(),
            "next.memory_bytes: must be >= 0 (0 = unknown), got -1");
  // A stale lease fails the call: nothing recorded, nothing leased.
  std::vector<CellResult> stale = ResultsFor(first[0]);
  stale[0].lease_id += 1000;
  EXPECT_EQ(coordinator_->Complete(w, stale, TaskWant{2, 4, 0}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);

  auto out = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{2, 4, 0});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->recorded, 4);
  ASSERT_EQ(out->next_tasks.size(), 2u);
  EXPECT_EQ(out->next_tasks[0].head_index, 0);
  EXPECT_EQ(out->next_tasks[0].rank, 2);
  EXPECT_EQ(out->next_tasks[1].rank, 4);
  for (const Task& t : out->next_tasks) {
    EXPECT_EQ(t.sweep_id, sweep);
    EXPECT_EQ(t.cells.size(), 4u);
    EXPECT_EQ(t.spec.seeds, (std::vector<uint64_t>{0, 1, 2, 3}));
    EXPECT_EQ(t.deadline_unix_ms, clock_.NowMs() + kLeaseMs);
    for (const LeasedCell& old : first[0].cells) EXPECT_NE(t.cells[0].lease_id, old.lease_id);
  }
  EXPECT_EQ(Cells(sweep, CellState::kDone), 4);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 8);

  // Both tasks' results at once; max_seeds 0 is the default (64).
  std::vector<CellResult> both = ResultsFor(out->next_tasks[0]);
  for (const CellResult& r : ResultsFor(out->next_tasks[1])) both.push_back(r);
  auto second = coordinator_->Complete(w, both, TaskWant{1, 0, 0});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->recorded, 8);
  ASSERT_EQ(second->next_tasks.size(), 1u);
  EXPECT_EQ(second->next_tasks[0].head_index, 1);
  EXPECT_EQ(second->next_tasks[0].cells.size(), 4u);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);

  // No work left: the results are recorded and nothing comes back.
  auto last = coordinator_->Complete(w, ResultsFor(second->next_tasks[0]), TaskWant{1, 4, 0});
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->recorded, 4);
  EXPECT_THAT(last->next_tasks, IsEmpty());
  EXPECT_EQ(Cells(sweep, CellState::kDone), 16);
  EXPECT_EQ(Get(sweep).state, SweepState::kDone);
  // A repeat is a duplicate and, with no work, still leases nothing.
  auto again = coordinator_->Complete(w, ResultsFor(second->next_tasks[0]), TaskWant{1, 4, 0});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->duplicates, 4);
  EXPECT_THAT(again->next_tasks, IsEmpty());
}

// A worker that lost the reply to CompleteTasks sends the same results
// again: the tasks that reply leased go to it again (the same leases, task
// by task, deadlines extended) and nothing more is leased. Once those
// leases are gone, the same results lease afresh.
TEST_F(CoordinatorTest, ResultsSentAgainGetTheTasksTheirLostReplyLeased) {
  std::string sweep = Submit(MakeSpec("grid"));  // 4 groups of 4 seeds
  std::string w = Register();
  std::vector<Task> first = Acquire(w, 1, 4);
  ASSERT_EQ(first.size(), 1u);
  // Two tasks of two seeds, both from group (0, 2): the boundary between
  // them is kept on the second answer.
  auto out = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{2, 2, 0});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->next_tasks.size(), 2u);
  const int64_t leased_before = Count("SELECT COUNT(*) FROM cells WHERE attempt > 0");

  clock_.AdvanceMs(1000);
  auto again = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{2, 2, 0});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->recorded, 0);
  EXPECT_EQ(again->duplicates, 4);
  ASSERT_EQ(again->next_tasks.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Task& was = out->next_tasks[i];
    const Task& now = again->next_tasks[i];
    EXPECT_EQ(now.sweep_id, sweep);
    EXPECT_EQ(now.head_index, was.head_index);
    EXPECT_EQ(now.rank, was.rank);
    EXPECT_EQ(now.spec.seeds, was.spec.seeds);
    EXPECT_EQ(now.spec.rank, was.spec.rank);
    ASSERT_EQ(now.cells.size(), 2u);
    for (size_t j = 0; j < 2; ++j) {
      EXPECT_EQ(now.cells[j].cell_id, was.cells[j].cell_id);
      EXPECT_EQ(now.cells[j].lease_id, was.cells[j].lease_id);
      EXPECT_EQ(now.cells[j].attempt, 1);
    }
    EXPECT_EQ(now.deadline_unix_ms, clock_.NowMs() + kLeaseMs);
  }
  EXPECT_EQ(again->next_tasks[0].spec.seeds, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(again->next_tasks[1].spec.seeds, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE attempt > 0"), leased_before);
  EXPECT_EQ(Count("SELECT SUM(attempt) FROM cells"), leased_before);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 8);
  EXPECT_EQ(Count(absl::StrCat("SELECT COUNT(*) FROM cells WHERE state = 2 AND "
                               "lease_deadline_ms = ",
                               clock_.NowMs() + kLeaseMs)),
            4);

  // Sent again without `next`: acknowledged, nothing handed out.
  auto bare = coordinator_->Complete(w, ResultsFor(first[0]), std::nullopt);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->duplicates, 4);
  EXPECT_THAT(bare->next_tasks, IsEmpty());

  // The leases expire (the worker never heard of them); the same results
  // then lease new tasks, which later resends get.
  clock_.AdvanceMs(kLeaseMs);
  auto expired = coordinator_->ExpireLeases();
  ASSERT_TRUE(expired.ok());
  EXPECT_EQ(*expired, 4);
  auto fresh = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{1, 4, 0});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_EQ(fresh->next_tasks.size(), 1u);
  EXPECT_EQ(fresh->next_tasks[0].cells.size(), 4u);
  EXPECT_EQ(Count("SELECT SUM(attempt) FROM cells"), leased_before + 4);
  auto repeat = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{1, 4, 0});
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  ASSERT_EQ(repeat->next_tasks.size(), 1u);
  EXPECT_EQ(repeat->next_tasks[0].cells[0].lease_id, fresh->next_tasks[0].cells[0].lease_id);
  EXPECT_EQ(Count("SELECT SUM(attempt) FROM cells"), leased_before + 4);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);

  // A task leased by AcquireTasks is never taken for a resend's.
  std::vector<Task> acquired = Acquire(w, 1, 4);
  ASSERT_EQ(acquired.size(), 1u);
  auto done = coordinator_->Complete(w, ResultsFor(repeat->next_tasks[0]), std::nullopt);
  ASSERT_TRUE(done.ok()) << done.status();
  auto last = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{1, 4, 0});
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(last->next_tasks.size(), 1u);
  EXPECT_NE(last->next_tasks[0].cells[0].cell_id, acquired[0].cells[0].cell_id);
  for (const LeasedCell& cell : acquired[0].cells) {
    EXPECT_NE(last->next_tasks[0].cells[0].lease_id, cell.lease_id);
  }
}

// The calls that do not wait: the same outcome, delivered once the commit
// has synced; an argument out of range is answered at once, on the caller's
// thread, with nothing written.
TEST_F(CoordinatorTest, AcquireAsyncAndCompleteAsyncDeliverTheOutcomeAfterTheCommit) {
  std::string sweep = Submit(MakeSpec("grid"));  // 16 cells in 4 groups of 4 seeds
  std::string w = Register();
  std::promise<absl::StatusOr<std::vector<Task>>> leased;
  coordinator_->AcquireAsync(w, TaskWant{1, 4, 0},
                             [&](absl::StatusOr<std::vector<Task>> t) { leased.set_value(t); });
  absl::StatusOr<std::vector<Task>> tasks = leased.get_future().get();
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].cells.size(), 4u);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);

  std::thread::id answered_on;
  absl::Status refused;
  coordinator_->AcquireAsync(w, TaskWant{65, 4, 0}, [&](absl::StatusOr<std::vector<Task>> t) {
    answered_on = std::this_thread::get_id();
    refused = t.status();
  });
  EXPECT_EQ(answered_on, std::this_thread::get_id());
  EXPECT_EQ(refused.message(), "max_tasks: must be 1..64, got 65");
  coordinator_->CompleteAsync(w, ResultsFor((*tasks)[0]), TaskWant{1, 0, -1},
                              [&](absl::StatusOr<CompleteOutcome> out) {
                                answered_on = std::this_thread::get_id();
                                refused = out.status();
                              });
  EXPECT_EQ(answered_on, std::this_thread::get_id());
  EXPECT_EQ(refused.message(), "next.memory_bytes: must be >= 0 (0 = unknown), got -1");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);

  // A stale lease: the transaction fails and nothing is kept.
  std::vector<CellResult> stale = ResultsFor((*tasks)[0]);
  stale[0].lease_id += 1000;
  std::promise<absl::StatusOr<CompleteOutcome>> failed;
  coordinator_->CompleteAsync(w, stale, TaskWant{1, 4, 0},
                              [&](absl::StatusOr<CompleteOutcome> out) { failed.set_value(out); });
  EXPECT_EQ(failed.get_future().get().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);

  std::vector<std::string> events;
  std::mutex events_mu;
  const int64_t sub = coordinator_->Subscribe(sweep, [&](const SweepChange& c) {
    std::lock_guard<std::mutex> lock(events_mu);
    events.push_back(c.message);
  });
  std::promise<absl::StatusOr<CompleteOutcome>> completed;
  coordinator_->CompleteAsync(w, ResultsFor((*tasks)[0]), TaskWant{1, 4, 0},
                              [&](absl::StatusOr<CompleteOutcome> out) {
                                // Committed before `done`: a reader sees it.
                                out->duplicates = static_cast<int>(Cells(sweep, CellState::kDone));
                                completed.set_value(out);
                              });
  absl::StatusOr<CompleteOutcome> out = completed.get_future().get();
  coordinator_->Unsubscribe(sub);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->recorded, 4);
  EXPECT_EQ(out->duplicates, 4);  // the done cells a reader saw from `done`
  ASSERT_EQ(out->next_tasks.size(), 1u);
  EXPECT_EQ(out->next_tasks[0].rank, 2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 4);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);
  // The watchers heard of the four results and the new lease before `done`.
  std::lock_guard<std::mutex> lock(events_mu);
  EXPECT_EQ(events.size(), 5u);
}

TEST_F(CoordinatorTest, ACompletionRunAgainAfterAFailedOneInItsCommitCountsItsResultsOnce) {
  std::string sweep = Submit(MakeSpec("grid"));  // 16 cells in 4 groups of 4 seeds
  std::string w1 = Register("a");
  std::string w2 = Register("b");
  std::vector<Task> t1 = Acquire(w1, 1, 4);
  std::vector<Task> t2 = Acquire(w2, 1, 4);
  ASSERT_EQ(t1.size(), 1u);
  ASSERT_EQ(t2.size(), 1u);
  // The fourth result is stale: the first three are written before the
  // request fails, so its commit is rolled back and the other request runs
  // again (store.h, group commit).
  std::vector<CellResult> stale = ResultsFor(t2[0]);
  stale[3].lease_id += 1000;

  std::vector<std::string> events;
  std::mutex events_mu;
  const int64_t sub = coordinator_->Subscribe(sweep, [&](const SweepChange& c) {
    std::lock_guard<std::mutex> lock(events_mu);
    events.push_back(c.message);
  });
  // Hold the writer until both calls have queued, so that they share a commit.
  std::promise<void> held;
  store_->WriteAsync(
      [&](Connection&) -> absl::Status {
        held.set_value();
        while (store_->queued_writes() < 2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return absl::OkStatus();
      },
      [](absl::Status) {});
  held.get_future().wait();
  std::promise<absl::StatusOr<CompleteOutcome>> good, bad;
  coordinator_->CompleteAsync(w1, ResultsFor(t1[0]), TaskWant{1, 4, 0},
                              [&](absl::StatusOr<CompleteOutcome> out) { good.set_value(out); });
  coordinator_->CompleteAsync(w2, stale, std::nullopt,
                              [&](absl::StatusOr<CompleteOutcome> out) { bad.set_value(out); });
  absl::StatusOr<CompleteOutcome> out = good.get_future().get();
  absl::StatusOr<CompleteOutcome> refused = bad.get_future().get();
  coordinator_->Unsubscribe(sub);

  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            absl::StrFormat("lease %d for cell %d is not held by this worker (expired, "
                            "reassigned or never its own)",
                            stale[3].lease_id, stale[3].cell_id));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->recorded, 4);
  EXPECT_EQ(out->duplicates, 0);
  ASSERT_EQ(out->next_tasks.size(), 1u);
  EXPECT_EQ(out->next_tasks[0].cells.size(), 4u);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 4);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM result_packs"), 4);
  EXPECT_EQ(Count("SELECT SUM(n) FROM result_groups"), 4);
  EXPECT_EQ(Cells(sweep, CellState::kDone), 4);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 8);  // w2's four, and w1's next four
  EXPECT_EQ(Cells(sweep, CellState::kPending), 4);
  // Four results and one lease, told once.
  std::lock_guard<std::mutex> lock(events_mu);
  EXPECT_EQ(events.size(), 5u);
}

// ------------------------------------------------------------------ listeners

TEST_F(CoordinatorTest, ListenersSeeCommittedChangesUntilUnsubscribed) {
  std::string sweep = Submit(MakeSpec("watch", {1}, 2, 0, false));
  std::vector<SweepChange> seen;
  int64_t sub = coordinator_->Subscribe(sweep, [&](const SweepChange& c) {
    // Listeners see the change already committed.
    EXPECT_TRUE(coordinator_->GetSweep(sweep).ok());
    seen.push_back(c);
  });
  int work_calls = 0;
  coordinator_->SetWorkListener([&] { ++work_calls; });
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w);
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(tasks[0])).ok());
  ASSERT_EQ(seen.size(), 4u);  // leased, done, done, sweep done
  EXPECT_THAT(seen[0].message, HasSubstr("leased"));
  EXPECT_THAT(seen[1].message, HasSubstr("seed=0 done"));
  EXPECT_FALSE(seen[2].final);
  EXPECT_TRUE(seen[3].final);
  EXPECT_THAT(seen[3].message, HasSubstr("done"));

  coordinator_->Unsubscribe(sub);
  Submit(MakeSpec("more"));
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(work_calls, 1);  // the second submit made work available
}

// ------------------------------------------------------------------ result validation

TEST_F(CoordinatorTest, AnImpossibleResultFailsTheWholeCallAndStoresNothing) {
  std::string sweep = Submit(MakeSpec("checked", {1}, 2, 0, false));
  std::string w = Register();
  auto tasks = coordinator_->Acquire(w, 1, 64);
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 1u);
  const Task& t = (*tasks)[0];
  std::vector<CellResult> results = ResultsFor(t);
  results[1].result.train.exact_accuracy = std::nan("");
  auto out = coordinator_->Complete(w, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            absl::StrCat("results[1] for cell ", t.cells[1].cell_id,
                         " (kernel/elu1 r=1 seed=1): result.train.exact_accuracy must be in "
                         "[0, 1], got nan"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM result_groups"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE state = 2"), 2);

  // Steps beyond the sweep's max_steps (2000 by default) and an empty
  // result are refused the same way.
  results = ResultsFor(t);
  results[0].result.steps = 2001;
  out = coordinator_->Complete(w, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("result.steps must be in 0..2000, got 2001"));
  results = ResultsFor(t);
  results[0].result = SeedResult();
  out = coordinator_->Complete(w, results);
  EXPECT_THAT(out.status().message(),
              HasSubstr("result.train.sequences must be in 1..9223372036854775807, got 0"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);

  // The same leases then take valid results.
  out = coordinator_->Complete(w, ResultsFor(t));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->recorded, 2);
  EXPECT_EQ(coordinator_->GetSweep(sweep)->state, SweepState::kDone);
}

TEST_F(CoordinatorTest, WorkerTextIsHeldToItsLimitsAndEchoedClipped) {
  WorkerRegistration reg;
  reg.hostname = std::string(1 << 20, 'h');
  reg.device = "cpu";
  auto id = coordinator_->RegisterWorker(reg);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(id.status().message(), "hostname must be at most 256 bytes, got 1048576");
  reg.hostname = "h";
  reg.version.build_id = std::string(257, 'b');
  EXPECT_EQ(coordinator_->RegisterWorker(reg).status().message(),
            "version.build_id must be at most 256 bytes, got 257");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM workers"), 0);

  Submit(MakeSpec("text", {1}, 1, 0, false));
  std::string w = Register();
  auto tasks = coordinator_->Acquire(w, 1, 64);
  ASSERT_TRUE(tasks.ok());
  absl::Status fail = coordinator_->Fail(w, LeaseIds((*tasks)[0]), std::string(5000, 'r'), false);
  EXPECT_EQ(fail.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fail.message(), "reason must be at most 4096 bytes, got 5000");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE state = 2"), 1);  // still leased

  auto sweep = coordinator_->GetSweep(std::string(7000, 's'));
  EXPECT_EQ(sweep.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(sweep.status().message(), "no sweep " + std::string(200, 's') + "... (7000 bytes)");
  auto unknown = coordinator_->Acquire(std::string(7000, 'w'), 1, 1);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_LT(unknown.status().message().size(), 260u);
}

TEST_F(ResultCacheTest, AStoredRowThatIsNotValidIsNeverServed) {
  auto coord = WithCodeVersion("0.1.0+abc");
  std::string w = Register();
  auto first = coord->Submit(MakeSpec("a", {1}, 2, 0, false), "local");
  ASSERT_TRUE(first.ok());
  TrainEverything(*coord, w);
  // A row stored before results were checked: seed 0's exact accuracy NaN,
  // in its columns and in its packed copy.
  ASSERT_TRUE(store_
                  ->Write([&](Connection& c) -> absl::Status {
                    ASSIGN_OR_RETURN(Statement q,
                                     c.Prepare("SELECT cell_id, packed FROM result_packs "
                                               "ORDER BY cell_id LIMIT 1"));
                    ASSIGN_OR_RETURN(bool row, q.Step());
                    if (!row) return absl::NotFoundError("no row");
                    const int64_t cell = q.ColumnInt(0);
                    ResultRow r;
                    RETURN_IF_ERROR(UnpackResultRow(q.ColumnBlob(1), &r));
                    r.result->train.exact_accuracy = std::nan("");
                    ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE result_packs SET packed = ?2 "
                                                            "WHERE cell_id = ?1"));
                    u.Bind(1, cell).BindBlob(2, PackResultRow(r));
                    return u.Run();
                  })
                  .ok());
  auto again = coord->Submit(MakeSpec("b", {1}, 2, 0, false), "local");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cells, 2);
  EXPECT_EQ(again->cached_cells, 1);  // seed 1 only; seed 0 trains again
  EXPECT_EQ(coord->GetSweep(again->sweep_id)->counts.pending, 1);
}

}  // namespace
}  // namespace ranksweep::server
