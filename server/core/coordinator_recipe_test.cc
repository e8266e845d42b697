// Recipes (a sweep's axes): cells, task keys, rows, groups, the cache and
// search per (head, rank, recipe).
#include <map>
#include <string>
#include <vector>

#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// ------------------------------------------------------------------ recipes

// kernel (elu1, relu_eps) x ranks {1, 2, 4} + softmax, 2 seeds, lr x max_steps.
SweepSpec RecipeSpec(const std::string& name) {
  SweepSpec s = MakeSpec(name, {1, 2, 4}, 2);
  HeadSpec relu;
  relu.feature_map = FeatureMap::kReluEps;
  s.heads.insert(s.heads.begin() + 1, relu);
  s.axes = {{"lr", {0.01, 0.003, 0.001}}, {"max_steps", {200, 400}}};
  return s;
}

TEST_F(CoordinatorTest, AGridCrossesEveryHeadRankAndSeedWithEveryRecipe) {
  // 2 heads x 3 ranks x 2 seeds x 3 lr x 2 max_steps = 72, + softmax 2 x 6 = 12.
  auto out = coordinator_->Submit(RecipeSpec("recipes"), "local");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->cells, 84);
  EXPECT_EQ(Get(out->sweep_id).grid_cells, 84);
  for (int recipe = 0; recipe < 6; ++recipe) {
    EXPECT_EQ(Count(absl::StrCat("SELECT COUNT(*) FROM cells WHERE recipe = ", recipe)), 14);
  }
  // Every task carries its recipe's values; no task mixes recipes.
  std::string w = Register();
  std::map<int, int> cells_per_recipe;
  while (true) {
    std::vector<Task> tasks = Acquire(w, 4, 64);
    if (tasks.empty()) break;
    for (const Task& t : tasks) {
      const std::vector<double> values = RecipeValues(RecipeSpec("x"), t.recipe);
      EXPECT_EQ(t.spec.train.lr, values[0]);
      EXPECT_EQ(t.spec.train.max_steps, static_cast<int>(values[1]));
      EXPECT_EQ(t.cells.size(), 2u);  // both seeds of one (head, rank, recipe)
      cells_per_recipe[t.recipe] += static_cast<int>(t.cells.size());
      // A result may use its recipe's steps, which exceed the first recipe's.
      std::vector<CellResult> results = ResultsFor(t, t.recipe / 8.0);
      for (CellResult& r : results) r.result.steps = t.spec.train.max_steps;
      ASSERT_TRUE(coordinator_->Complete(w, results).ok());
    }
  }
  EXPECT_THAT(cells_per_recipe, ElementsAre(std::pair(0, 14), std::pair(1, 14), std::pair(2, 14),
                                            std::pair(3, 14), std::pair(4, 14), std::pair(5, 14)));
  // Rows carry their recipe; the groups are one per (head, rank, recipe).
  auto rows = coordinator_->Query(ResultQuery{out->sweep_id});
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows.size(), 84u);
  for (const ResultRow& row : rows->rows) {
    ASSERT_TRUE(row.result.has_value());
    EXPECT_EQ(row.result->train.error, row.recipe / 8.0);  // what was sent
  }
  ResultQuery grouped{out->sweep_id};
  grouped.group_by = GroupBy::kHeadRank;
  auto groups = coordinator_->Query(grouped);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->groups.size(), 42u);  // (2 x 3 + 1) x 6
  for (size_t i = 0; i < groups->groups.size(); ++i) {
    const ResultGroup& g = groups->groups[i];
    EXPECT_EQ(g.recipe, static_cast<int>(i % 6));  // head, rank, then recipe
    EXPECT_EQ(g.n, 2);
    EXPECT_EQ(g.expected, 2);
    EXPECT_DOUBLE_EQ(g.BuiltIn("train_error").mean, g.recipe / 8.0);
  }
}

TEST_F(CoordinatorTest, ASweepWithoutAxesHasOnlyRecipe0) {
  const std::string id = Submit(MakeSpec("plain", {1, 2}, 2));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE recipe != 0"), 0);
  std::string w = Register();
  while (true) {
    std::vector<Task> tasks = Acquire(w, 4, 64);
    if (tasks.empty()) break;
    for (const Task& t : tasks) {
      EXPECT_EQ(t.recipe, 0);
      ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t)).ok());
    }
  }
  ResultQuery grouped{id};
  grouped.group_by = GroupBy::kHeadRank;
  auto groups = coordinator_->Query(grouped);
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->groups.size(), 3u);
  for (const ResultGroup& g : groups->groups) EXPECT_EQ(g.recipe, 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM result_packs WHERE substr(hex(packed), 1, 2) != '01'"),
            0);  // recipe 0 rows keep packed row version 1
}

TEST(TaskKeyTest, KeysDifferPerRecipeAndMatchTheOldKeyWithoutAxes) {
  SweepSpec s = RecipeSpec("k");
  std::set<std::string> keys;
  for (int recipe = 0; recipe < 6; ++recipe) keys.insert(TaskKey(s, 0, 2, recipe));
  EXPECT_EQ(keys.size(), 6u);
  // A recipe's key is the key of a sweep without axes that sets the values.
  SweepSpec plain = MakeSpec("k", {1, 2, 4}, 2);
  plain.heads = s.heads;
  plain.train.lr = 0.003;
  plain.train.max_steps = 400;
  EXPECT_EQ(TaskKey(s, 0, 2, 3), TaskKey(plain, 0, 2, 0));
  EXPECT_NE(TaskKey(s, 0, 2, 2), TaskKey(plain, 0, 2, 0));
}

TEST_F(ResultCacheTest, ACellIsServedOnlyFromTheSameRecipe) {
  auto coord = WithCodeVersion("0.1.0+abc");
  std::string w = Register();
  SweepSpec first = MakeSpec("a", {2}, 2, 0, false);
  first.axes = {{"lr", {0.01, 0.003}}};
  auto a = coord->Submit(first, "local");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->cells, 4);
  TrainEverything(*coord, w);
  // lr 0.003 (trained in a) and 0.001 (new): only the 0.003 cells are served,
  // from a's lr 0.003 cells, never from its lr 0.01 ones.
  SweepSpec second = first;
  second.name = "b";
  second.axes = {{"lr", {0.003, 0.001}}};
  auto b = coord->Submit(second, "local");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->cells, 4);
  EXPECT_EQ(b->cached_cells, 2);
  auto a_rows = coord->Query(ResultQuery{a->sweep_id});
  ResultQuery done{b->sweep_id};
  done.state = CellState::kDone;
  auto b_rows = coord->Query(done);
  ASSERT_TRUE(a_rows.ok() && b_rows.ok());
  ASSERT_EQ(b_rows->rows.size(), 2u);
  for (const ResultRow& row : b_rows->rows) {
    EXPECT_EQ(row.recipe, 0);  // b's recipe 0 is lr 0.003
    const auto source = std::find_if(a_rows->rows.begin(), a_rows->rows.end(),
                                     [&](const ResultRow& r) {
                                       return r.cell_id == row.cached_from_cell_id;
                                     });
    ASSERT_NE(source, a_rows->rows.end());
    EXPECT_EQ(source->recipe, 1);  // a's recipe 1 is lr 0.003
    EXPECT_EQ(source->seed, row.seed);
  }
  // A sweep without axes at lr 0.003 is the same task: served too.
  SweepSpec plain = MakeSpec("c", {2}, 2, 0, false);
  plain.train.lr = 0.003;
  auto c = coord->Submit(plain, "local");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cached_cells, 2);
  plain.name = "d";
  plain.train.lr = 0.002;
  auto d = coord->Submit(plain, "local");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->cached_cells, 0);
}

// Search probes a rank under every recipe at once and counts it a hit when
// some recipe meets the criterion (best over the recipe): recipe 0 is exact
// from rank 8, recipe 1 only from 64, so the search finds 8.
TEST_F(CoordinatorTest, SearchModeProbesEachRankUnderEveryRecipeAndTakesTheBest) {
  SweepSpec spec = MakeSpec("search", {1, 2, 4, 8, 16, 32, 64, 128, 256}, 2, 0, false);
  spec.mode = SweepMode::kSearch;
  spec.axes = {{"lr", {0.01, 0.001}}};
  auto sub = coordinator_->Submit(spec, "local");
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_EQ(sub->cells, 4);  // rank 16 of each recipe
  std::string w = Register();
  std::map<int, std::vector<int>> probed;
  while (true) {
    std::vector<Task> tasks = Acquire(w, 1, 64);
    if (tasks.empty()) break;
    const Task& t = tasks[0];
    probed[t.recipe].push_back(t.rank);
    const int transition = t.recipe == 0 ? 8 : 64;
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t, t.rank >= transition ? 0 : 0.5)).ok());
  }
  EXPECT_THAT(probed[0], ElementsAre(16, 2, 4, 8));
  EXPECT_THAT(probed[1], ElementsAre(16, 2, 4, 8));
  SweepInfo info = Get(sub->sweep_id);
  EXPECT_EQ(info.state, SweepState::kDone);
  EXPECT_EQ(info.counts.total, 16);  // 4 ranks x 2 seeds x 2 recipes
  EXPECT_EQ(info.grid_cells, 36);    // 9 ranks x 2 seeds x 2 recipes
}

TEST_F(CoordinatorTest, RecipeLabelsNameFailedCells) {
  SweepSpec spec = MakeSpec("fail", {2}, 1, 0, false);
  spec.axes = {{"lr", {0.01, 0.003}}};
  const std::string id = Submit(spec);
  std::string w = Register();
  for (int i = 0; i < 3; ++i) {
    std::vector<Task> tasks = Acquire(w, 4, 64);
    for (const Task& t : tasks) {
      if (t.recipe == 1) {
        ASSERT_TRUE(coordinator_->Fail(w, LeaseIds(t), "boom", false).ok());
      } else {
        ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t)).ok());
      }
    }
  }
  SweepInfo info = Get(id);
  EXPECT_EQ(info.state, SweepState::kFailed);
  ASSERT_THAT(info.recent_failures, SizeIs(1));
  EXPECT_THAT(info.recent_failures[0], HasSubstr("kernel/elu1 r=2 seed=0 lr=0.003: "));
  EXPECT_THAT(info.recent_failures[0], HasSubstr("boom (attempt 3 of 3)"));
}

}  // namespace
}  // namespace ranksweep::server
