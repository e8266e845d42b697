#include "server/core/rank_search.h"

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

}  // namespace
}  // namespace ranksweep::server
