// Durability and recovery: results across close and reopen, leases across a
// restart, re-registration, writes beside a long read.
#include <string>
#include <vector>

#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::IsEmpty;

// ------------------------------------------------------------------ durability

TEST_F(CoordinatorTest, ResultsAreDurableAcrossCloseAndReopen) {
  std::string sweep = Submit(MakeSpec("durable", {1}, 4, 0, false));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 2);
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(tasks[0], 0.125)).ok());
  Open();  // a new process on the same file
  auto q = coordinator_->Query(ResultQuery{sweep});
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->rows.size(), 2u);
  EXPECT_DOUBLE_EQ(q->rows[0].result->train.error, 0.125);
  EXPECT_EQ(q->rows[0].worker_id, w);
  EXPECT_EQ(Get(sweep).counts.done, 2);
}

TEST_F(CoordinatorTest, RecoveryKeepsLiveLeasesAndLosesOrDuplicatesNoCell) {
  std::string sweep = Submit(MakeSpec("restart", {1, 2}, 2, 0, false));  // 4 cells
  std::string w = Register();
  std::vector<Task> done = Acquire(w, 1, 64);     // rank 1: 2 cells
  std::vector<Task> inflight = Acquire(w, 1, 64); // rank 2: 2 cells
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(done[0])).ok());
  const int64_t last_lease = inflight[0].cells.back().lease_id;

  Open();
  auto report = coordinator_->Recover();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->running_sweeps, 1);
  EXPECT_EQ(report->pending_cells, 0);
  EXPECT_EQ(report->leases_kept, 2);
  EXPECT_EQ(report->leases_expired, 0);
  // The surviving worker carries on under its leases.
  auto hb = coordinator_->Heartbeat(w, LeaseIds(inflight[0]));
  ASSERT_TRUE(hb.ok());
  EXPECT_THAT(hb->lost_lease_ids, IsEmpty());
  auto out = coordinator_->Complete(w, ResultsFor(inflight[0]));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->recorded, 2);
  EXPECT_EQ(Get(sweep).state, SweepState::kDone);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 4);
  EXPECT_EQ(Count("SELECT COUNT(DISTINCT cell_id) FROM results"), 4);

  // A lease after the restart is a new one.
  std::string other = Submit(MakeSpec("after", {1}, 1, 0, false));
  std::vector<Task> next = Acquire(w);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_NE(next[0].cells[0].lease_id, last_lease);
  EXPECT_NE(next[0].cells[0].lease_id, 0);
}

TEST_F(CoordinatorTest, RecoveryExpiresLeasesWhoseDeadlinePassedWhileDown) {
  std::string sweep = Submit(MakeSpec("restart", {1}, 3, 0, false));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 2);
  Open();
  clock_.AdvanceMs(kLeaseMs + 1);
  auto report = coordinator_->Recover();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->leases_expired, 2);
  EXPECT_EQ(report->leases_kept, 0);
  EXPECT_EQ(report->pending_cells, 3);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 3);
  // The old worker's completion is stale now; the cells run again as attempt 2.
  EXPECT_EQ(coordinator_->Complete(w, ResultsFor(tasks[0])).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<Task> again = Acquire(w, 1, 64);
  ASSERT_EQ(again[0].cells.size(), 3u);
  EXPECT_EQ(again[0].cells[0].attempt, 2);
  EXPECT_EQ(again[0].cells[2].attempt, 1);
}

TEST_F(CoordinatorTest, ReRegisteringWorkerReleasesItsLeasesWithoutUsingAnAttempt) {
  std::string sweep = Submit(MakeSpec("one", {1}, 2, 0, false));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w);
  WorkerRegistration reg;
  reg.worker_id = w;
  reg.hostname = "host";
  reg.slots = 2;
  auto id = coordinator_->RegisterWorker(reg);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->worker_id, w);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 2);
  EXPECT_EQ(Count("SELECT MAX(attempt) FROM cells"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM workers"), 1);
  EXPECT_EQ(Count("SELECT slots FROM workers"), 2);
}

TEST_F(CoordinatorTest, WritesProceedWhileAnotherConnectionHoldsAReadTransaction) {
  std::string sweep = Submit(MakeSpec("grid"));
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open_v2(dir_.File("coordinator.db").c_str(), &reader, SQLITE_OPEN_READONLY,
                            nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT COUNT(*) FROM cells;", nullptr, nullptr, nullptr),
            SQLITE_OK);
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 4);
  ASSERT_EQ(tasks.size(), 1u);
  auto out = coordinator_->Complete(w, ResultsFor(tasks[0]));
  EXPECT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Cells(sweep, CellState::kDone), 4);
  sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(reader);
}

}  // namespace
}  // namespace ranksweep::server
