// LeaseManager on its own (no Coordinator): leasing, heartbeats, failing,
// expiry and the attempts each uses.
#include "server/core/leases/lease_manager.h"

#include <set>

#include "server/core/manager_test_fixture.h"

namespace ranksweep::server {
namespace {

using LeaseManagerTest = ManagerTest;

TEST_F(LeaseManagerTest, LeasesOneGroupsSeedsUnderFreshLeaseIds) {
  const std::string sweep = Submit(MakeSpec("a", {1, 2}, 3, 0, /*with_softmax=*/false));
  const RegisteredWorker w = Register();
  const std::vector<Task> tasks = Lease(w.worker_id, /*max_tasks=*/1, /*max_seeds=*/2);
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_EQ(tasks[0].cells.size(), 2u);
  std::set<int64_t> ids;
  for (const LeasedCell& cell : tasks[0].cells) {
    EXPECT_EQ(cell.attempt, 1);
    EXPECT_NE(cell.lease_id, 0);
    ids.insert(cell.lease_id);
  }
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(tasks[0].deadline_unix_ms, clock_.NowMs() + kLeaseMs);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 2);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 4);
}

TEST_F(LeaseManagerTest, AHeartbeatExtendsOnlyTheCallersLeases) {
  Submit(MakeSpec("a", {1}, 2, 0, /*with_softmax=*/false));
  const RegisteredWorker holder = Register();
  const RegisteredWorker other = Register();
  const int64_t t0 = clock_.NowMs();
  const std::vector<Task> tasks = Lease(holder.worker_id);
  ASSERT_EQ(tasks.size(), 1u);
  clock_.AdvanceMs(1000);
  Events events;
  // Another worker naming them learns nothing: they read as lost.
  auto theirs = leases_->Heartbeat(other.worker_id, LeaseIds(tasks[0]), {}, events);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ(theirs->lost_lease_ids, LeaseIds(tasks[0]));
  EXPECT_EQ(Count("SELECT MIN(lease_deadline_ms) FROM cells"), t0 + kLeaseMs);
  auto own = leases_->Heartbeat(holder.worker_id, LeaseIds(tasks[0]), {}, events);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_TRUE(own->lost_lease_ids.empty());
  EXPECT_EQ(own->deadline_unix_ms, t0 + 1000 + kLeaseMs);
  EXPECT_EQ(Count("SELECT MIN(lease_deadline_ms) FROM cells"), t0 + 1000 + kLeaseMs);
}

TEST_F(LeaseManagerTest, AReleaseGivesTheAttemptBackAndExpiryFailsTheCellAfterItsLast) {
  const std::string sweep = Submit(MakeSpec("a", {1}, 2, 0, /*with_softmax=*/false));
  const RegisteredWorker w = Register();
  Events events;
  std::vector<Task> tasks = Lease(w.worker_id);
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_TRUE(leases_->Fail(w.worker_id, LeaseIds(tasks[0]), "shutting down",
                            /*release=*/true, events).ok());
  EXPECT_EQ(Count("SELECT SUM(attempt) FROM cells"), 0);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 2);
  // max_attempts is 2: two expired leases fail both cells for good.
  for (int attempt = 1; attempt <= 2; ++attempt) {
    tasks = Lease(w.worker_id);
    ASSERT_EQ(tasks.size(), 1u);
    EXPECT_EQ(tasks[0].cells[0].attempt, attempt);
    clock_.AdvanceMs(kLeaseMs);
    auto expired = leases_->Expire(events);
    ASSERT_TRUE(expired.ok()) << expired.status();
    EXPECT_EQ(*expired, 2);
  }
  EXPECT_EQ(Cells(sweep, CellState::kFailed), 2);
  EXPECT_EQ(Count(absl::StrCat("SELECT COUNT(*) FROM results WHERE state = ", kCellFailed)), 2);
  EXPECT_EQ(SweepStateOf(sweep), kSweepFailed);
  EXPECT_TRUE(Lease(w.worker_id).empty());
}

TEST_F(LeaseManagerTest, AWantOutOfRangeNamesItsField) {
  TaskWant want{0, 5000, 0};
  absl::Status s = leases_->CheckWant(want, "next.");
  EXPECT_EQ(s.message(), "next.max_seeds: must be 1..1024, got 5000");
  EXPECT_EQ(want.max_tasks, 1);  // 0 means 1
}

}  // namespace
}  // namespace ranksweep::server
