// Recipe pruning (server/core/sweeps/pruning.h) through the coordinator: rungs in
// the tasks, progress in heartbeats, pruned leases in the replies, PRUNED
// cells in counts, rows and summaries.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "server/core/results/analysis.h"
#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// kernel at rank 4, 2 seeds, three learning rates, 2700 steps evaluated
// every 100: halving's rungs are at steps 100, 300 and 900.
SweepSpec PruneSpecOf(const std::string& name, PruneRule rule = PruneRule::kHalving) {
  SweepSpec s = MakeSpec(name, {4}, 2, 0, /*with_softmax=*/false);
  s.train.max_steps = 2700;
  s.train.eval_every = 100;
  s.axes = {{"lr", {0.01, 0.003, 0.001}}};
  s.prune.rule = rule;
  return s;
}

// One task per recipe, by recipe.
std::map<int, Task> AcquireByRecipe(Coordinator& c, const std::string& worker) {
  std::map<int, Task> out;
  auto tasks = c.Acquire(worker, 8, 64);
  EXPECT_TRUE(tasks.ok()) << tasks.status();
  for (Task& t : *tasks) out[t.recipe] = std::move(t);
  return out;
}

std::vector<LeaseProgress> ProgressOf(const Task& t, int64_t step, double train_error) {
  std::vector<LeaseProgress> out;
  for (const LeasedCell& c : t.cells) out.push_back({c.lease_id, step, train_error});
  return out;
}

// Every seed exact, stopped early after its evaluations at 100, 200, 300.
std::vector<CellResult> ExactEarly(const Task& t) {
  std::vector<CellResult> out = ResultsFor(t, 0);
  for (CellResult& r : out) {
    r.result.steps = 300;
    for (int64_t step : {100, 200, 300}) {
      CurvePoint p;
      p.step = step;
      p.train_error = 0;
      p.train_position_accuracy = 1;
      r.result.curve.points.push_back(p);
    }
  }
  return out;
}

TEST_F(CoordinatorTest, ATaskOfAPruningSweepNamesItsRungs) {
  std::string w = Register();
  Submit(PruneSpecOf("rungs"));
  for (const auto& [recipe, task] : AcquireByRecipe(*coordinator_, w)) {
    EXPECT_THAT(task.rung_steps, ElementsAre(100, 300, 900)) << recipe;
  }
  // Without pruning, or with one recipe, there is nothing to report.
  Submit(PruneSpecOf("plain", PruneRule::kNone));
  SweepSpec one = PruneSpecOf("one");
  one.axes.clear();
  Submit(one);
  for (int i = 0; i < 2; ++i) {
    for (const auto& [recipe, task] : AcquireByRecipe(*coordinator_, w)) {
      EXPECT_THAT(task.rung_steps, IsEmpty()) << task.sweep_id;
    }
  }
}

TEST_F(CoordinatorTest, AClearlyLosingRecipeIsPrunedAtARungAndItsWorkerToldSo) {
  std::string w = Register();
  const std::string sweep = Submit(PruneSpecOf("lose"));
  std::map<int, Task> t = AcquireByRecipe(*coordinator_, w);
  ASSERT_EQ(t.size(), 3u);
  // Recipe 0 alone at rung 0: nothing to compare with.
  auto r0 = coordinator_->Heartbeat(w, LeaseIds(t[0]), ProgressOf(t[0], 100, 0.10));
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_THAT(r0->pruned_lease_ids, IsEmpty());
  // Recipe 1 arrives 0.50 above it: outside the best third and the margin.
  auto r1 = coordinator_->Heartbeat(w, LeaseIds(t[1]), ProgressOf(t[1], 100, 0.60));
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_THAT(r1->pruned_lease_ids, ElementsAreArray(LeaseIds(t[1])));
  EXPECT_THAT(r1->lost_lease_ids, IsEmpty());
  // Recipe 2 is 0.02 above the best: within the margin, it trains on.
  auto r2 = coordinator_->Heartbeat(w, LeaseIds(t[2]), ProgressOf(t[2], 100, 0.12));
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_THAT(r2->pruned_lease_ids, IsEmpty());
  EXPECT_EQ(Cells(sweep, CellState::kPruned), 2);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);

  // The pruned recipe's results are refused, as a cancelled one's are.
  auto late = coordinator_->Complete(w, ResultsFor(t[1], 0));
  EXPECT_TRUE(absl::IsFailedPrecondition(late.status())) << late.status();
  EXPECT_THAT(late.status().message(), HasSubstr("pruned"));

  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t[0], 0)).ok());
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t[2], 0.5)).ok());
  const SweepInfo info = Get(sweep);
  EXPECT_EQ(info.state, SweepState::kDone);  // pruning is no failure
  EXPECT_EQ(info.counts.pruned, 2);
  EXPECT_EQ(info.counts.done, 4);
  EXPECT_EQ(info.counts.failed, 0);

  // The rows name why; the group is not met; the rank meets under recipe 0.
  ResultQuery rows;
  rows.sweep_id = sweep;
  auto got = coordinator_->Query(rows);
  ASSERT_TRUE(got.ok()) << got.status();
  int pruned_rows = 0;
  for (const ResultRow& row : got->rows) {
    if (row.state != CellState::kPruned) continue;
    ++pruned_rows;
    EXPECT_EQ(row.recipe, 1);
    EXPECT_THAT(row.failure, HasSubstr("pruned at rung 1 (step 100): mean train error 0.600"));
    EXPECT_THAT(row.failure, HasSubstr("best 0.100 (lr=0.01)"));
    EXPECT_FALSE(row.result.has_value());
  }
  EXPECT_EQ(pruned_rows, 2);
  ResultQuery groups;
  groups.sweep_id = sweep;
  groups.group_by = GroupBy::kHeadRank;
  auto summary = coordinator_->Query(groups);
  ASSERT_TRUE(summary.ok()) << summary.status();
  for (const ResultGroup& g : summary->groups) {
    EXPECT_EQ(g.pruned, g.recipe == 1 ? 2 : 0) << g.recipe;
    EXPECT_EQ(g.verdict, g.recipe == 0 ? Verdict::kMeets : Verdict::kNotMet) << g.recipe;
  }
  ASSERT_EQ(summary->heads.size(), 1u);
  EXPECT_TRUE(summary->heads[0].transition_defined);
  EXPECT_EQ(summary->heads[0].transition_rank, 4);
}

TEST_F(CoordinatorTest, ARecipeThatReachedARungFirstIsPrunedWhenABetterOneArrives) {
  std::string w = Register();
  const std::string sweep = Submit(PruneSpecOf("late"));
  std::map<int, Task> t = AcquireByRecipe(*coordinator_, w);
  ASSERT_TRUE(coordinator_->Heartbeat(w, LeaseIds(t[0]), ProgressOf(t[0], 100, 0.70)).ok());
  auto better = coordinator_->Heartbeat(w, LeaseIds(t[1]), ProgressOf(t[1], 100, 0.20));
  ASSERT_TRUE(better.ok()) << better.status();
  EXPECT_THAT(better->pruned_lease_ids, IsEmpty());  // not its leases
  EXPECT_EQ(Cells(sweep, CellState::kPruned), 2);
  // Recipe 0's worker hears it at its next heartbeat, progress or not.
  auto told = coordinator_->Heartbeat(w, LeaseIds(t[0]));
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_THAT(told->pruned_lease_ids, ElementsAreArray(LeaseIds(t[0])));
}

TEST_F(CoordinatorTest, AFinishedRecipesCurveCompetesAtEveryRung) {
  std::string w = Register();
  const std::string sweep = Submit(PruneSpecOf("curve"));
  std::map<int, Task> t = AcquireByRecipe(*coordinator_, w);
  // Recipe 0 stopped early, exact from step 100: its score at every rung
  // is 0, also at rung 2 (step 900), past the end of its curve.
  ASSERT_TRUE(coordinator_->Complete(w, ExactEarly(t[0])).ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM rung_scores"), 2 * 3);
  auto r = coordinator_->Heartbeat(w, LeaseIds(t[1]), ProgressOf(t[1], 900, 0.30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->pruned_lease_ids, ElementsAreArray(LeaseIds(t[1])));
  // A recipe never reported does not compete, and is not pruned.
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 2);
}

TEST_F(CoordinatorTest, ProgressOfASweepThatDoesNotPruneIsIgnored) {
  std::string w = Register();
  const std::string sweep = Submit(PruneSpecOf("none", PruneRule::kNone));
  std::map<int, Task> t = AcquireByRecipe(*coordinator_, w);
  ASSERT_TRUE(coordinator_->Heartbeat(w, LeaseIds(t[0]), ProgressOf(t[0], 100, 0.0)).ok());
  auto r = coordinator_->Heartbeat(w, LeaseIds(t[1]), ProgressOf(t[1], 100, 1.0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->pruned_lease_ids, IsEmpty());
  EXPECT_EQ(Cells(sweep, CellState::kPruned), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM rung_scores"), 0);
}

TEST_F(CoordinatorTest, BadProgressIsRefusedNamingTheFieldAndWritesNothing) {
  std::string w = Register();
  Submit(PruneSpecOf("bad"));
  std::map<int, Task> t = AcquireByRecipe(*coordinator_, w);
  std::vector<LeaseProgress> p = ProgressOf(t[0], 100, 1.5);
  auto r = coordinator_->Heartbeat(w, LeaseIds(t[0]), p);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_THAT(r.status().message(), HasSubstr("progress[0].train_error must be in [0, 1]"));
  p = ProgressOf(t[0], 0, 0.5);
  r = coordinator_->Heartbeat(w, LeaseIds(t[0]), p);
  EXPECT_THAT(r.status().message(), HasSubstr("progress[0].step must be at least 1"));
  p = ProgressOf(t[0], 100, 0.5);
  r = coordinator_->Heartbeat(w, LeaseIds(t[1]), p);
  EXPECT_THAT(r.status().message(), HasSubstr("progress[0].lease_id"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM rung_scores"), 0);
}

TEST_F(CoordinatorTest, AQuarantineForgetsTheRungScoresOfTheCellsItTakesBack) {
  std::string w = Register();
  Submit(PruneSpecOf("quarantined"));
  std::map<int, Task> t = AcquireByRecipe(*coordinator_, w);
  // Within the margin of recipe 0's 0: recipe 1 trains on, leased.
  ASSERT_TRUE(coordinator_->Heartbeat(w, LeaseIds(t[1]), ProgressOf(t[1], 100, 0.02)).ok());
  ASSERT_TRUE(coordinator_->Complete(w, ExactEarly(t[0])).ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM rung_scores"), 2 + 2 * 3);
  // Its done cells and its leased ones alike: no score of it judges a recipe.
  ASSERT_TRUE(coordinator_->Quarantine(w, 0, "ops").ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM rung_scores"), 0);
}

TEST_F(CoordinatorTest, SearchModeCountsAPrunedRecipeAsAMissAndMovesOn) {
  std::string w = Register();
  SweepSpec spec = PruneSpecOf("search");
  spec.ranks = {1, 2, 4};
  spec.mode = SweepMode::kSearch;
  const std::string sweep = Submit(spec);
  std::map<int, Task> t = AcquireByRecipe(*coordinator_, w);  // rank 2, the middle
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].rank, 2);
  ASSERT_TRUE(coordinator_->Heartbeat(w, LeaseIds(t[0]), ProgressOf(t[0], 100, 0.0)).ok());
  ASSERT_TRUE(coordinator_->Heartbeat(w, LeaseIds(t[1]), ProgressOf(t[1], 100, 0.9)).ok());
  ASSERT_TRUE(coordinator_->Heartbeat(w, LeaseIds(t[2]), ProgressOf(t[2], 100, 0.9)).ok());
  EXPECT_EQ(Cells(sweep, CellState::kPruned), 4);
  // The winner meets it: rank 2 is a hit, and the search probes rank 1.
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t[0], 0)).ok());
  std::map<int, Task> next = AcquireByRecipe(*coordinator_, w);
  ASSERT_EQ(next.size(), 3u);
  EXPECT_EQ(next[0].rank, 1);
}

}  // namespace
}  // namespace ranksweep::server
