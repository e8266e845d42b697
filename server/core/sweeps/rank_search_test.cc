#include "server/core/sweeps/rank_search.h"

#include <map>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace ranksweep::server {
namespace {

const std::vector<int> kRanks = {1, 2, 4, 8, 16};

RankProbe Exact(int64_t seeds) { return RankProbe{0, seeds, seeds}; }
RankProbe NotExact(int64_t seeds) { return RankProbe{0, seeds - 1, seeds}; }
RankProbe Running(int64_t seeds) { return RankProbe{1, 0, seeds}; }

TEST(NextRankToProbeTest, StartsInTheMiddleOfTheSortedDistinctRanks) {
  EXPECT_EQ(NextRankToProbe(kRanks, {}), std::optional<int>(4));
  EXPECT_EQ(NextRankToProbe({16, 4, 1, 8, 2, 4}, {}), std::optional<int>(4));
  EXPECT_EQ(NextRankToProbe({1, 2, 4, 8}, {}), std::optional<int>(2));
  EXPECT_EQ(NextRankToProbe({3}, {}), std::optional<int>(3));
}

TEST(NextRankToProbeTest, ARunningProbeDecidesNothingYet) {
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, Running(3)}}), std::nullopt);
  // Even when another probe alone would call for a next rank.
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, NotExact(3)}, {8, Running(3)}}), std::nullopt);
}

TEST(NextRankToProbeTest, GoesDownFromAnExactRankAndUpFromAnInexactOne) {
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, Exact(3)}}), std::optional<int>(1));
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, NotExact(3)}}), std::optional<int>(8));
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, NotExact(3)}, {8, Exact(3)}}), std::nullopt);
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, Exact(3)}, {1, NotExact(3)}}), std::optional<int>(2));
}

TEST(NextRankToProbeTest, StopsWhenTheTransitionIsFound) {
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, Exact(3)}, {1, NotExact(3)}, {2, NotExact(3)}}),
            std::nullopt);
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, Exact(3)}, {1, Exact(3)}}), std::nullopt);
}

TEST(NextRankToProbeTest, StopsWhenEveryRankIsRuledOut) {
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, NotExact(3)}, {8, NotExact(3)}}),
            std::optional<int>(16));
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, NotExact(3)}, {8, NotExact(3)}, {16, NotExact(3)}}),
            std::nullopt);
}

TEST(NextRankToProbeTest, TheSmallestExactProbeBoundsTheSearch) {
  // 8 and 16 exact: 8 is the bound, and 2 (not exact) is below it.
  EXPECT_EQ(NextRankToProbe(kRanks, {{16, Exact(2)}, {8, Exact(2)}, {2, NotExact(2)}}),
            std::optional<int>(4));
}

TEST(NextRankToProbeTest, NoRanksNothingToProbeAndUnknownRanksIgnored) {
  EXPECT_EQ(NextRankToProbe({}, {}), std::nullopt);
  EXPECT_EQ(NextRankToProbe({1, 2, 4}, {{3, Exact(1)}}), std::optional<int>(2));
}

// Best over the recipe: one rank, probed under two recipes.
RecipeProbes Recipes(RankProbe r0, RankProbe r1) { return {{0, r0}, {1, r1}}; }

TEST(NextRankToProbeTest, ARankIsAHitWhenSomeRecipeMeetsTheCriterion) {
  const Criterion all;
  // Rank 4: recipe 1 exact, recipe 0 not: a hit, so go down.
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, Recipes(NotExact(3), Exact(3))}}, all),
            std::optional<int>(1));
  // Rank 4: no recipe exact: go up.
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, Recipes(NotExact(3), NotExact(3))}}, all),
            std::optional<int>(8));
  // A recipe still running at a rank holds the search, whatever the others found.
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, Recipes(Exact(3), Running(3))}}, all), std::nullopt);
  // The whole walk of a head exact from 8 under recipe 1 only: 4 -> 8 -> found.
  std::map<int, RecipeProbes> probes = {{4, Recipes(NotExact(2), NotExact(2))}};
  EXPECT_EQ(NextRankToProbe(kRanks, probes, all), std::optional<int>(8));
  probes[8] = Recipes(NotExact(2), Exact(2));
  EXPECT_EQ(NextRankToProbe(kRanks, probes, all), std::nullopt);
}

TEST(NextRankToProbeTest, TheCriterionDecidesTheHits) {
  // Rank 4, 3 seeds: recipe 0 has 2 exact (mean accuracy 0.99), recipe 1 has 1.
  const RecipeProbes rank4 = Recipes(RankProbe{0, 2, 3, 2.97}, RankProbe{0, 1, 3, 2.5});
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, rank4}}, Criterion{}), std::optional<int>(8));
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, rank4}}, *ParseCriterion("seeds:2", "c")),
            std::optional<int>(1));
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, rank4}}, *ParseCriterion("seeds:3", "c")),
            std::optional<int>(8));
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, rank4}}, *ParseCriterion("mean:0.99", "c")),
            std::optional<int>(1));
  EXPECT_EQ(NextRankToProbe(kRanks, {{4, rank4}}, *ParseCriterion("mean:0.995", "c")),
            std::optional<int>(8));
}

TEST(ProbeMeetsTest, FailedCellsCountAsNotExact) {
  // 3 cells, 2 done exact, 1 failed.
  const RankProbe p{0, 2, 3, 2.0};
  EXPECT_FALSE(ProbeMeets(p, Criterion{}));
  EXPECT_TRUE(ProbeMeets(p, *ParseCriterion("seeds:2", "c")));
  EXPECT_FALSE(ProbeMeets(p, *ParseCriterion("seeds:3", "c")));
  EXPECT_TRUE(ProbeMeets(p, *ParseCriterion("mean:0.6", "c")));
  EXPECT_FALSE(ProbeMeets(p, *ParseCriterion("mean:0.7", "c")));
  EXPECT_FALSE(ProbeMeets(RankProbe{}, Criterion{}));
}

}  // namespace
}  // namespace ranksweep::server
