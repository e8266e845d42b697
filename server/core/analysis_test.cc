#include "server/core/analysis.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ranksweep::server {
namespace {

ResultGroup Group(int head_index, int rank, int64_t n, int64_t expected, int64_t exact,
                  std::vector<uint64_t> missing = {}, int64_t test_exact = 0) {
  ResultGroup g;
  g.head = head_index == 0 ? "kernel/elu1" : "softmax";
  g.head_index = head_index;
  g.rank = rank;
  g.n = n;
  g.expected = expected;
  g.exact_seeds = exact;
  g.missing_seeds = std::move(missing);
  g.test_exact_seeds = test_exact;
  return g;
}

TEST(MissingSeedsNoteTest, ListsSeeds) {
  EXPECT_EQ(MissingSeedsNote({}), "");
  EXPECT_EQ(MissingSeedsNote({3}), "seed 3 missing");
  EXPECT_EQ(MissingSeedsNote({3, 5}), "seeds 3, 5 missing");
  EXPECT_EQ(MissingSeedsNote({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}),
            "seeds 0, 1, 2, 3, 4, 5, 6, 7 and 2 more missing");
}

TEST(CompletenessNoteTest, CountsAndMissing) {
  EXPECT_EQ(CompletenessNote(Group(0, 8, 8, 8, 8)), "8/8 seeds");
  EXPECT_EQ(CompletenessNote(Group(0, 8, 7, 8, 7, {3})), "7/8 seeds; seed 3 missing");
}

TEST(SummarizeHeadTest, ExactTransition) {
  // Given out of order on purpose.
  HeadSummary s = SummarizeHead({Group(0, 32, 5, 5, 5), Group(0, 1, 5, 5, 0),
                                 Group(0, 8, 5, 5, 2), Group(0, 64, 5, 5, 5)},
                                /*has_test_split=*/false);
  EXPECT_EQ(s.head, "kernel/elu1");
  EXPECT_TRUE(s.has_rank);
  EXPECT_TRUE(s.transition_defined);
  EXPECT_EQ(s.transition_rank, 32);
  EXPECT_EQ(s.reason, "rank 32 is the smallest swept rank with every seed exact (5/5)");
  EXPECT_FALSE(s.has_test_split);
  EXPECT_EQ(s.test_reason, "");
}

TEST(SummarizeHeadTest, NotMonotoneIsNoted) {
  HeadSummary s = SummarizeHead(
      {Group(0, 1, 3, 3, 0), Group(0, 2, 3, 3, 3), Group(0, 4, 3, 3, 2)}, false);
  EXPECT_TRUE(s.transition_defined);
  EXPECT_EQ(s.transition_rank, 2);
  EXPECT_EQ(s.reason,
            "rank 2 is the smallest swept rank with every seed exact (3/3); not monotone: "
            "rank 4 has 2/3 seeds exact");
}

TEST(SummarizeHeadTest, UndefinedWhenNoRankQualifies) {
  HeadSummary s = SummarizeHead({Group(0, 1, 5, 5, 0), Group(0, 2, 5, 5, 4)}, false);
  EXPECT_FALSE(s.transition_defined);
  EXPECT_EQ(s.transition_rank, 0);
  EXPECT_EQ(s.reason, "no swept rank has every seed exact");
}

TEST(SummarizeHeadTest, UndefinedWhenASmallerRankIsIncompleteButAllExact) {
  // Rank 4 lacks seed 3 and every done seed is exact: it may still become the
  // transition, so rank 8 (complete, exact) cannot be called the transition.
  HeadSummary s = SummarizeHead(
      {Group(0, 2, 4, 4, 0), Group(0, 4, 3, 4, 3, {3}), Group(0, 8, 4, 4, 4)}, false);
  EXPECT_FALSE(s.transition_defined);
  EXPECT_EQ(s.reason,
            "undecided: rank 4 is incomplete (3/4 seeds; seed 3 missing) and every done seed "
            "there is exact");
}

TEST(SummarizeHeadTest, IncompleteRankWithAFailingSeedIsDecided) {
  // Rank 4 lacks seed 3 but seed 0 already failed: not the transition.
  HeadSummary s = SummarizeHead(
      {Group(0, 4, 3, 4, 2, {3}), Group(0, 8, 4, 4, 4)}, false);
  EXPECT_TRUE(s.transition_defined);
  EXPECT_EQ(s.transition_rank, 8);
}

TEST(SummarizeHeadTest, RankWithNoDoneSeedIsUndecided) {
  HeadSummary s = SummarizeHead({Group(0, 1, 0, 2, 0, {0, 1}), Group(0, 2, 2, 2, 2)}, false);
  EXPECT_FALSE(s.transition_defined);
  EXPECT_EQ(s.reason,
            "undecided: rank 1 is incomplete (0/2 seeds; seeds 0, 1 missing) and none of its "
            "seeds is done yet");
}

TEST(SummarizeHeadTest, RanklessHead) {
  HeadSummary s = SummarizeHead({Group(1, 0, 3, 3, 3)}, false);
  EXPECT_EQ(s.head, "softmax");
  EXPECT_EQ(s.head_index, 1);
  EXPECT_FALSE(s.has_rank);
  EXPECT_FALSE(s.transition_defined);
  EXPECT_EQ(s.reason, "no rank; exact on 3/3 seeds");
  HeadSummary partial = SummarizeHead({Group(1, 0, 2, 3, 1, {2})}, false);
  EXPECT_EQ(partial.reason, "no rank; exact on 1/3 seeds (seed 2 missing)");
}

TEST(SummarizeHeadTest, TestSplitHasItsOwnTransition) {
  HeadSummary s = SummarizeHead({Group(0, 8, 2, 2, 2, {}, 0), Group(0, 16, 2, 2, 2, {}, 1),
                                 Group(0, 64, 2, 2, 2, {}, 2)},
                                /*has_test_split=*/true);
  EXPECT_TRUE(s.transition_defined);
  EXPECT_EQ(s.transition_rank, 8);
  EXPECT_TRUE(s.has_test_split);
  EXPECT_TRUE(s.test_transition_defined);
  EXPECT_EQ(s.test_transition_rank, 64);
}

TEST(SummarizeHeadsTest, OnePerHeadInIndexOrder) {
  std::vector<HeadSummary> heads = SummarizeHeads(
      {Group(1, 0, 2, 2, 2), Group(0, 1, 2, 2, 0), Group(0, 2, 2, 2, 2)}, false);
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_EQ(heads[0].head_index, 0);
  EXPECT_EQ(heads[0].transition_rank, 2);
  EXPECT_EQ(heads[1].head_index, 1);
  EXPECT_FALSE(heads[1].has_rank);
  EXPECT_TRUE(SummarizeHeads({}, false).empty());
}

}  // namespace
}  // namespace ranksweep::server
