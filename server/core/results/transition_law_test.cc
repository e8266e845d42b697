#include "server/core/results/transition_law.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/core/results/statistics.h"

namespace ranksweep::server {
namespace {

TEST(FitLog2TransitionTest, RanksOnAnExactPowerLawGiveItsExponentAndNoSpread) {
  // 2^m at m = 2..5: slope 1, intercept 0, every residual 0.
  LawFit fit = FitLog2Transition({{2, 4}, {3, 8}, {4, 16}, {5, 32}});
  ASSERT_TRUE(fit.defined);
  EXPECT_EQ(fit.points, 4);
  EXPECT_DOUBLE_EQ(fit.slope, 1.0);
  EXPECT_NEAR(fit.intercept, 0.0, 1e-12);
  ASSERT_TRUE(fit.has_interval);
  EXPECT_NEAR(fit.slope_ci95, 0.0, 1e-12);
  // 4^m / 4 at m = 2..4 (ranks 4, 16, 64): slope 2, intercept -2.
  fit = FitLog2Transition({{2, 4}, {3, 16}, {4, 64}});
  EXPECT_DOUBLE_EQ(fit.slope, 2.0);
  EXPECT_NEAR(fit.intercept, -2.0, 1e-12);
}

TEST(FitLog2TransitionTest, ScatteredRanksGiveTheLeastSquaresSlopeAndItsTInterval) {
  // log2 ranks 1, 3, 4, 6 at x = 1..4: Sxx = 5, Sxy = 8, slope 1.6,
  // intercept 3.5 - 1.6 * 2.5 = -0.5; residuals -0.1, 0.3, -0.3, 0.1 (SSE 0.2);
  // half-width t(0.975, 2) * sqrt(0.2 / 2 / 5) = 4.303 * 0.141421.
  LawFit fit = FitLog2Transition({{1, 2}, {2, 8}, {3, 16}, {4, 64}}, {6, 5});
  ASSERT_TRUE(fit.defined);
  EXPECT_NEAR(fit.slope, 1.6, 1e-12);
  EXPECT_NEAR(fit.intercept, -0.5, 1e-12);
  ASSERT_TRUE(fit.has_interval);
  EXPECT_NEAR(fit.slope_ci95, TQuantile975(2) * std::sqrt(0.02), 1e-12);
  EXPECT_NEAR(fit.slope_ci95, 0.6085, 1e-3);
  EXPECT_EQ(fit.left_out, (std::vector<double>{5, 6}));
}

TEST(FitLog2TransitionTest, TwoPointsHaveNoIntervalAndFewerOrOneXNoLine) {
  LawFit fit = FitLog2Transition({{3, 4}, {4, 16}});
  ASSERT_TRUE(fit.defined);
  EXPECT_DOUBLE_EQ(fit.slope, 2.0);
  EXPECT_FALSE(fit.has_interval);
  EXPECT_FALSE(FitLog2Transition({{3, 4}}).defined);
  EXPECT_FALSE(FitLog2Transition({}).defined);
  EXPECT_FALSE(FitLog2Transition({{3, 4}, {3, 8}}).defined);  // one x: no line
  EXPECT_EQ(FitLog2Transition({{3, 4}}, {4}).left_out, (std::vector<double>{4}));
}

ResultGroup Group(int head_index, int rank, int32_t recipe, int64_t exact) {
  ResultGroup g;
  g.head = head_index == 0 ? "kernel/elu1" : "softmax";
  g.head_index = head_index;
  g.rank = rank;
  g.recipe = recipe;
  g.n = 3;
  g.expected = 3;
  g.exact_seeds = exact;
  return g;
}

// lr {0.01, 0.001} x m {2, 3, 4}: recipe = 3 * lr index + m index. The kernel
// head's transition at each m is the best over the two learning rates; at
// m = 4 no rank is exact, so the value is left out of the fit.
TEST(SummarizeAxisLawsTest, TransitionAtEachValueBestOverTheOtherAxesAndItsFit) {
  SweepSpec spec;
  spec.dataset.kind = DatasetKind::kExhaustive;
  spec.axes = {{"lr", {0.01, 0.001}}, {"m", {2, 3, 4}}};
  std::vector<ResultGroup> groups;
  // (recipe, first exact rank; 0 = none)
  const std::vector<std::pair<int32_t, int>> first_exact = {{0, 4}, {3, 8}, {1, 8},
                                                            {4, 16}, {2, 0}, {5, 0}};
  for (const auto& [recipe, first] : first_exact) {
    for (int rank : {1, 2, 4, 8, 16}) {
      groups.push_back(Group(0, rank, recipe, first > 0 && rank >= first ? 3 : 0));
    }
    groups.push_back(Group(1, 0, recipe, 3));
  }
  JudgeGroups(groups, false, Criterion{});
  const RecipeLabeler label = [&spec](int32_t r) { return RecipeLabel(spec, r); };
  std::vector<AxisLaw> laws = SummarizeAxisLaws(groups, spec, false, Criterion{}, label);
  ASSERT_EQ(laws.size(), 2u);  // the lr axis is not a dataset axis
  const AxisLaw& kernel = laws[0];
  EXPECT_EQ(kernel.axis, "m");
  EXPECT_EQ(kernel.head, "kernel/elu1");
  EXPECT_TRUE(kernel.has_rank);
  EXPECT_TRUE(kernel.numeric);
  ASSERT_EQ(kernel.points.size(), 3u);
  EXPECT_EQ(kernel.points[0].label, "2");
  EXPECT_EQ(kernel.points[0].summary.transition_rank, 4);
  EXPECT_EQ(kernel.points[1].summary.transition_rank, 8);
  EXPECT_FALSE(kernel.points[2].summary.transition_defined);
  ASSERT_TRUE(kernel.fit.defined);
  EXPECT_EQ(kernel.fit.points, 2);
  EXPECT_DOUBLE_EQ(kernel.fit.slope, 1.0);
  EXPECT_NEAR(kernel.fit.intercept, 0.0, 1e-12);
  EXPECT_EQ(kernel.fit.left_out, (std::vector<double>{4}));
  const AxisLaw& softmax = laws[1];
  EXPECT_FALSE(softmax.has_rank);
  EXPECT_FALSE(softmax.fit.defined);
  ASSERT_EQ(softmax.points.size(), 3u);
  EXPECT_EQ(softmax.points[2].summary.reason.substr(0, 27), "no rank; exact on 3/3 seeds");
}

// A named axis (split) gets a point per value and no fit.
TEST(SummarizeAxisLawsTest, NamedAxisHasPointsAndNoFit) {
  SweepSpec spec;
  spec.dataset.kind = DatasetKind::kPool;
  spec.axes = {{"split", {0, 1}}};
  std::vector<ResultGroup> groups = {Group(0, 8, 0, 0), Group(0, 8, 1, 3)};
  JudgeGroups(groups, false, Criterion{});
  std::vector<AxisLaw> laws =
      SummarizeAxisLaws(groups, spec, false, Criterion{}, DefaultRecipeLabel);
  ASSERT_EQ(laws.size(), 1u);
  EXPECT_FALSE(laws[0].numeric);
  ASSERT_EQ(laws[0].points.size(), 2u);
  EXPECT_EQ(laws[0].points[0].label, "tokens");
  EXPECT_FALSE(laws[0].points[0].summary.transition_defined);
  EXPECT_EQ(laws[0].points[1].label, "sequences");
  EXPECT_EQ(laws[0].points[1].summary.transition_rank, 8);
  EXPECT_FALSE(laws[0].fit.defined);
}

}  // namespace
}  // namespace ranksweep::server
