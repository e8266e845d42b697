// Search-mode sweeps: bisecting to the transition rank, and stopping at the
// top rank when no rank is exact.
#include <string>
#include <vector>

#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

TEST_F(CoordinatorTest, SearchModeBisectsToTheTransitionAndCountsTheCellsSaved) {
  SweepSpec spec = MakeSpec("search", {1, 2, 4, 8, 16, 32, 64, 128, 256}, 2);
  spec.mode = SweepMode::kSearch;
  auto sub = coordinator_->Submit(spec, "local");
  ASSERT_TRUE(sub.ok()) << sub.status();
  // The first probe is the middle rank (16) for the kernel head, plus the
  // softmax head's cells.
  EXPECT_EQ(sub->cells, 4);
  std::string w = Register();
  std::vector<int> probed;
  while (true) {
    std::vector<Task> tasks = Acquire(w, 1, 64);
    if (tasks.empty()) break;
    const Task& t = tasks[0];
    if (t.rank > 0) probed.push_back(t.rank);
    // The kernel head is exact from rank 8 on; softmax always.
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t, t.rank == 0 || t.rank >= 8 ? 0 : 0.5))
                    .ok());
  }
  // 16 exact -> 2 not -> 4 not -> 8 exact: the transition is 8.
  EXPECT_THAT(probed, ::testing::ElementsAre(16, 2, 4, 8));
  SweepInfo info = Get(sub->sweep_id);
  EXPECT_EQ(info.state, SweepState::kDone);
  EXPECT_EQ(info.counts.total, 10);  // 4 ranks x 2 seeds + softmax x 2
  EXPECT_EQ(info.grid_cells, 20);    // (9 ranks + softmax) x 2 seeds
  ResultQuery q{sub->sweep_id};
  q.group_by = GroupBy::kHeadRank;
  auto out = coordinator_->Query(q);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->heads.size(), 2u);
  EXPECT_TRUE(out->heads[0].transition_defined);
  EXPECT_EQ(out->heads[0].transition_rank, 8);
}

TEST_F(CoordinatorTest, SearchModeStopsAtTheTopRankWhenNothingIsExact) {
  SweepSpec spec = MakeSpec("never", {1, 2, 4, 8}, 1, 0, /*with_softmax=*/false);
  spec.mode = SweepMode::kSearch;
  auto sub = coordinator_->Submit(spec, "local");
  ASSERT_TRUE(sub.ok()) << sub.status();
  std::string w = Register();
  std::vector<int> probed;
  while (true) {
    std::vector<Task> tasks = Acquire(w, 1, 64);
    if (tasks.empty()) break;
    probed.push_back(tasks[0].rank);
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(tasks[0], 1.0)).ok());
  }
  EXPECT_THAT(probed, ::testing::ElementsAre(2, 4, 8));
  SweepInfo info = Get(sub->sweep_id);
  EXPECT_EQ(info.state, SweepState::kDone);
  EXPECT_EQ(info.counts.total, 3);
  EXPECT_EQ(info.grid_cells, 4);
}

}  // namespace
}  // namespace ranksweep::server
