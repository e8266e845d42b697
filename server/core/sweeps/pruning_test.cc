// The pruning rule (server/core/sweeps/pruning.h) on hand-made scores.
#include "server/core/sweeps/pruning.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A recipe that still trains, with its mean training error at each rung.
RecipeStanding Open(std::map<int, double> rung_error) { return {std::move(rung_error), true}; }
// A recipe whose every cell is finished.
RecipeStanding Done(std::map<int, double> rung_error) { return {std::move(rung_error), false}; }

std::vector<int32_t> Recipes(const std::vector<PruneDecision>& d) {
  std::vector<int32_t> out;
  for (const PruneDecision& x : d) out.push_back(x.recipe);
  return out;
}

TEST(DecideHalvingTest, OfThreeRecipesOnlyTheBestGoesOnWhenTheOthersAreClearlyWorse) {
  // eta 3: floor(3 / 3) = 1 goes on; 0.40 and 0.70 are above 0.10 by more
  // than the margin.
  const std::vector<PruneDecision> d =
      DecideHalving({{0, Open({{0, 0.10}})}, {1, Open({{0, 0.40}})}, {2, Open({{0, 0.70}})}}, 3,
                    0.05);
  ASSERT_THAT(Recipes(d), ElementsAre(1, 2));
  EXPECT_EQ(d[0].rung, 0);
  EXPECT_DOUBLE_EQ(d[0].error, 0.40);
  EXPECT_EQ(d[0].best_recipe, 0);
  EXPECT_DOUBLE_EQ(d[0].best_error, 0.10);
}

TEST(DecideHalvingTest, ARecipeWithinTheMarginOfTheBestIsKept) {
  // 0.14 is outside the best third but only 0.04 above the best: the
  // winner is not clear, so it trains on; 0.16 is 0.06 above.
  EXPECT_THAT(Recipes(DecideHalving(
                  {{0, Open({{0, 0.10}})}, {1, Open({{0, 0.14}})}, {2, Open({{0, 0.16}})}}, 3,
                  0.05)),
              ElementsAre(2));
}

TEST(DecideHalvingTest, TheBestAndTiesWithTheLastKeptAreNeverPruned) {
  EXPECT_THAT(DecideHalving({{0, Open({{0, 0.5}})}, {1, Open({{0, 0.5}})}}, 3, 0.0), IsEmpty());
  // eta 2 with four recipes keeps two, 0.1 and 0.3; the other 0.3 ties
  // the last kept one and goes on too.
  EXPECT_THAT(Recipes(DecideHalving({{0, Open({{0, 0.1}})},
                                     {1, Open({{0, 0.3}})},
                                     {2, Open({{0, 0.3}})},
                                     {3, Open({{0, 0.9}})}},
                                    2, 0.05)),
              ElementsAre(3));
}

TEST(DecideHalvingTest, ARecipeAloneAtARungIsNotJudged) {
  // Rung 1 has only recipe 0; at rung 0 both are within the margin.
  EXPECT_THAT(DecideHalving({{0, Open({{0, 0.30}, {1, 0.90}})}, {1, Open({{0, 0.28}})}}, 3, 0.05),
              IsEmpty());
}

TEST(DecideHalvingTest, AFinishedRecipeCompetesButIsNeverPruned) {
  // Recipe 0 finished exact; recipe 1, done too, lost; recipe 2 still runs.
  EXPECT_THAT(Recipes(DecideHalving(
                  {{0, Done({{0, 0.0}})}, {1, Done({{0, 0.8}})}, {2, Open({{0, 0.5}})}}, 3,
                  0.05)),
              ElementsAre(2));
}

TEST(DecideHalvingTest, ALaterRungCanPruneWhatAnEarlierOneKept) {
  // Close at rung 0, clearly apart at rung 1; reported at its first rung.
  const std::vector<PruneDecision> d = DecideHalving(
      {{0, Open({{0, 0.50}, {1, 0.05}})}, {1, Open({{0, 0.52}, {1, 0.45}})}}, 3, 0.05);
  ASSERT_THAT(Recipes(d), ElementsAre(1));
  EXPECT_EQ(d[0].rung, 1);
}

TEST(DecideHalvingTest, ARecipeWithEverySeedExactIsNeverPruned) {
  // Margin 0 and both exact: nothing is above the best.
  EXPECT_THAT(DecideHalving({{0, Open({{0, 0.0}})}, {1, Open({{0, 0.0}})}}, 3, 0.0), IsEmpty());
}

TEST(PruneRungStepsTest, RungsAreEvaluationsEtaApartBelowMaxSteps) {
  SweepSpec spec;
  spec.axes.push_back({"lr", {0.01, 0.003, 0.001}});
  TrainSpec train;
  train.max_steps = 3000;
  train.eval_every = 100;
  EXPECT_THAT(PruneRungSteps(spec, train), IsEmpty());  // prune: none
  spec.prune.rule = PruneRule::kHalving;
  // ceil(3000 / 27) = 112, rounded up to an evaluation: 200.
  EXPECT_THAT(PruneRungSteps(spec, train), ElementsAre(200, 600, 1800));
  spec.prune.eta = 2;
  spec.prune.min_steps = 250;  // -> 300
  EXPECT_THAT(PruneRungSteps(spec, train), ElementsAre(300, 600, 1200, 2400));
  spec.axes.clear();  // one recipe: nothing to prune
  EXPECT_THAT(PruneRungSteps(spec, train), IsEmpty());
}

}  // namespace
}  // namespace ranksweep::server
