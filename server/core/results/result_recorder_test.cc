// ResultRecorder on its own (no Coordinator): results stored under the
// lease they name, all or nothing.
#include "server/core/results/result_recorder.h"

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
