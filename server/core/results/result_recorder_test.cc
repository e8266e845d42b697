// ResultRecorder on its own (no Coordinator): results stored under the
// lease they name, all or nothing.
#include "server/core/results/result_recorder.h"

#include <optional>
#include <vector>

#include "server/core/leases/lease_manager.h"
#include "server/core/manager_test_fixture.h"

namespace ranksweep::server {
namespace {

using ResultRecorderTest = ManagerTest;

TEST_F(ResultRecorderTest, StoresEveryResultOnceAndASecondSendIsADuplicate) {
  const std::string sweep = Submit(MakeSpec("a", {1}, 3, 0, /*with_softmax=*/false));
  const RegisteredWorker w = Register();
  const std::vector<Task> tasks = Lease(w.worker_id);
  ASSERT_EQ(tasks.size(), 1u);
  auto first = Complete(w.worker_id, ResultsFor(tasks[0]));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->recorded, 3);
  EXPECT_EQ(first->duplicates, 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 3);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM result_packs"), 3);
  EXPECT_EQ(Count("SELECT n FROM result_groups"), 3);  // done cells
  EXPECT_EQ(Count("SELECT completed FROM workers WHERE id = '" + w.worker_id + "'"), 3);
  auto again = Complete(w.worker_id, ResultsFor(tasks[0]));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->recorded, 0);
  EXPECT_EQ(again->duplicates, 3);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 3);
  EXPECT_EQ(SweepStateOf(sweep), kSweepDone);
}

// A done cell keeps its lease id, which answers a repeated completion, but
// leaves the lease index: random ids of every done cell would spread each
// commit's index changes over as many pages as it has cells. A lookup of its
// lease finds nothing, as of a lease never made.
TEST_F(ResultRecorderTest, ADoneCellKeepsItsLeaseIdOutOfTheLeaseIndex) {
  Submit(MakeSpec("a", {1}, 3, 0, /*with_softmax=*/false));
  const RegisteredWorker w = Register();
  const std::vector<Task> tasks = Lease(w.worker_id, /*max_tasks=*/1, /*max_seeds=*/2);
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_EQ(tasks[0].cells.size(), 2u);
  std::vector<CellResult> one = ResultsFor(tasks[0]);
  one.pop_back();
  ASSERT_TRUE(Complete(w.worker_id, one).ok());
  const LeasedCell& done = tasks[0].cells[0];
  const LeasedCell& live = tasks[0].cells[1];
  EXPECT_EQ(Count(absl::StrCat("SELECT lease_id FROM cells WHERE id = ", done.cell_id)),
            done.lease_id);
  EXPECT_EQ(Count(absl::StrCat("SELECT COUNT(*) FROM cells INDEXED BY cells_by_lease "
                               "WHERE lease_id != 0 AND state != ",
                               kCellDone)),
            1);
  absl::Status s = store_->Read([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<LeaseRow> found, FindLease(c, live.lease_id));
    EXPECT_TRUE(found.has_value());
    if (found.has_value()) EXPECT_EQ(found->cell_id, live.cell_id);
    ASSIGN_OR_RETURN(std::optional<LeaseRow> gone, FindLease(c, done.lease_id));
    EXPECT_FALSE(gone.has_value());
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  // The repeated completion is still a duplicate, not a stranger's lease.
  auto again = Complete(w.worker_id, one);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->duplicates, 1);
}

TEST_F(ResultRecorderTest, AnotherWorkersLeaseStoresNothingOfTheCall) {
  const std::string sweep = Submit(MakeSpec("a", {1}, 2, 0, /*with_softmax=*/false));
  const RegisteredWorker holder = Register();
  const RegisteredWorker thief = Register();
  const std::vector<Task> tasks = Lease(holder.worker_id);
  ASSERT_EQ(tasks.size(), 1u);
  auto out = Complete(thief.worker_id, ResultsFor(tasks[0]));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(out.status().message(),
            absl::StrFormat("lease %d for cell %d is not held by this worker (expired, "
                            "reassigned or never its own)",
                            tasks[0].cells[0].lease_id, tasks[0].cells[0].cell_id));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 2);
}

TEST_F(ResultRecorderTest, AResultWithAnotherSeedIsRefused) {
  Submit(MakeSpec("a", {1}, 1, 0, /*with_softmax=*/false));
  const RegisteredWorker w = Register();
  const std::vector<Task> tasks = Lease(w.worker_id);
  ASSERT_EQ(tasks.size(), 1u);
  std::vector<CellResult> results = ResultsFor(tasks[0]);
  results[0].result.seed += 1;
  auto out = Complete(w.worker_id, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            absl::StrFormat("results[].result.seed: cell %d has seed %d, the result says %d",
                            tasks[0].cells[0].cell_id, tasks[0].cells[0].seed,
                            tasks[0].cells[0].seed + 1));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
}

}  // namespace
}  // namespace ranksweep::server
