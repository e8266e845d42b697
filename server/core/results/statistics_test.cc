#include "server/core/results/statistics.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ranksweep::server {
namespace {

TEST(SummarizeTest, SingleValueHasNoSpread) {
  Aggregate a = Summarize({0.5});
  EXPECT_DOUBLE_EQ(a.mean, 0.5);
  EXPECT_DOUBLE_EQ(a.std, 0.0);
  EXPECT_DOUBLE_EQ(a.ci95, 0.0);
  EXPECT_DOUBLE_EQ(a.min, 0.5);
  EXPECT_DOUBLE_EQ(a.max, 0.5);
  Aggregate none = Summarize({});
  EXPECT_DOUBLE_EQ(none.mean, 0.0);
}

TEST(SummarizeTest, TwoValuesUseTwelvePointSevenOhSix) {
  Aggregate a = Summarize({1.0, 3.0});
  EXPECT_DOUBLE_EQ(a.mean, 2.0);
  EXPECT_DOUBLE_EQ(a.std, std::sqrt(2.0));
  EXPECT_NEAR(a.ci95, 12.706 * std::sqrt(2.0) / std::sqrt(2.0), 1e-12);
}

TEST(TQuantile975Test, TableThenInterpolationThenTheNormal) {
  EXPECT_DOUBLE_EQ(TQuantile975(0), 0.0);
  EXPECT_DOUBLE_EQ(TQuantile975(1), 12.706);
  EXPECT_DOUBLE_EQ(TQuantile975(30), 2.042);
  EXPECT_NEAR(TQuantile975(35), (2.042 + 2.021) / 2, 1e-12);  // halfway from 30 to 40
  EXPECT_NEAR(TQuantile975(90), (2.000 + 1.980) / 2, 1e-12);  // halfway from 60 to 120
  EXPECT_DOUBLE_EQ(TQuantile975(121), 1.960);
}

TEST(RunningStatsTest, EqualsSummarizeOfTheSameValues) {
  const std::vector<double> xs = {0.25, 0.0, 1.0, 0.5, 0.125, 0.75, 0.0};
  RunningStats running;
  for (double x : xs) running.Add(x);
  const Aggregate want = Summarize(xs);
  const Aggregate got = running.Summary();
  EXPECT_EQ(running.n, 7);
  EXPECT_NEAR(got.mean, want.mean, 1e-12);
  EXPECT_NEAR(got.std, want.std, 1e-12);
  EXPECT_NEAR(got.ci95, want.ci95, 1e-12);
  EXPECT_DOUBLE_EQ(got.min, 0.0);
  EXPECT_DOUBLE_EQ(got.max, 1.0);
}

TEST(RunningStatsTest, EmptyAndSingleValueHaveNoSpread) {
  RunningStats running;
  const Aggregate none = running.Summary();
  EXPECT_DOUBLE_EQ(none.mean, 0.0);
  EXPECT_DOUBLE_EQ(none.ci95, 0.0);
  running.Add(-2.5);
  const Aggregate one = running.Summary();
  EXPECT_DOUBLE_EQ(one.mean, -2.5);
  EXPECT_DOUBLE_EQ(one.min, -2.5);
  EXPECT_DOUBLE_EQ(one.max, -2.5);
  EXPECT_DOUBLE_EQ(one.std, 0.0);
  EXPECT_DOUBLE_EQ(one.ci95, 0.0);
}

}  // namespace
}  // namespace ranksweep::server
