// SweepLifecycle on its own (no Coordinator): submit, cancel, the memory
// limit, finishing.
#include "server/core/sweeps/sweep_lifecycle.h"

#include "server/core/manager_test_fixture.h"

namespace ranksweep::server {
namespace {

using SweepLifecycleTest = ManagerTest;

TEST_F(SweepLifecycleTest, SubmitStoresEveryCellAndCancelEndsThemOnce) {
  Events events;
  // Kernel at ranks 1, 2, 4 and softmax (rank 0), 4 seeds each: 16 cells.
  auto out = sweeps_->Submit(MakeSpec("a"), "alice", events);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->cells, 16);
  EXPECT_EQ(out->cached_cells, 0);
  EXPECT_TRUE(events.work_available);
  EXPECT_EQ(Cells(out->sweep_id, CellState::kPending), 16);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sweeps WHERE owner = 'alice'"), 1);

  auto cancelled = sweeps_->Cancel(out->sweep_id, events);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(*cancelled, 16);
  ASSERT_EQ(events.changes.size(), 1u);
  EXPECT_TRUE(events.changes[0].final);
  EXPECT_EQ(Cells(out->sweep_id, CellState::kCancelled), 16);
  EXPECT_EQ(SweepStateOf(out->sweep_id), kSweepCancelled);

  auto again = sweeps_->Cancel(out->sweep_id, events);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.status().message(),
            absl::StrCat("sweep ", out->sweep_id, " has already ended; nothing to cancel"));
  EXPECT_EQ(sweeps_->Cancel("sw-none", events).status().message(), "no sweep sw-none");
}

TEST_F(SweepLifecycleTest, ASweepAboveTheMemoryLimitIsRefusedWithNothingStored) {
  Wire(LeaseOptions(), /*max_task_memory_bytes=*/1);
  Events events;
  auto out = sweeps_->Submit(MakeSpec("big"), "alice", events);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              ::testing::HasSubstr("for one seed exceeds the limit of 1 B"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sweeps"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells"), 0);
}

TEST_F(SweepLifecycleTest, ASweepEndsDoneWhenItsLastOpenCellIsDone) {
  const std::string sweep = Submit(MakeSpec("one", {1}, 2, 0, /*with_softmax=*/false));
  const RegisteredWorker w = Register();
  const std::vector<Task> tasks = Lease(w.worker_id);
  ASSERT_EQ(tasks.size(), 1u);
  Events events;
  // Still leased: MaybeFinishIn leaves the sweep running.
  ASSERT_TRUE(store_->Write([&](Connection& c) {
    return sweeps_->MaybeFinishIn(c, sweep, events);
  }).ok());
  EXPECT_EQ(SweepStateOf(sweep), static_cast<int>(SweepState::kRunning));
  ASSERT_TRUE(Complete(w.worker_id, ResultsFor(tasks[0])).ok());
  EXPECT_EQ(SweepStateOf(sweep), kSweepDone);
}

}  // namespace
}  // namespace ranksweep::server
