#include "server/core/results/analysis.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

// A group with its mean exact accuracies: train, and test (as 1 - error).
ResultGroup WithAccuracy(ResultGroup g, double train_accuracy, double test_accuracy = 0) {
  g.BuiltIn("train_exact_accuracy").mean = train_accuracy;
  g.BuiltIn("train_error").mean = 1 - train_accuracy;
  g.BuiltIn("test_error").mean = 1 - test_accuracy;
  return g;
}

ResultGroup InRecipe(ResultGroup g, int32_t recipe) {
  g.recipe = recipe;
  return g;
}

Criterion Parsed(const std::string& text) { return *ParseCriterion(text, "criterion"); }

TEST(JudgeGroupTest, AllIsEverySeedExactOverTheExpectedSeeds) {
  const Criterion all;
  EXPECT_EQ(JudgeGroup(Group(0, 8, 3, 3, 3), all, false), Verdict::kMeets);
  EXPECT_EQ(JudgeGroup(Group(0, 8, 3, 3, 2), all, false), Verdict::kNotMet);
  EXPECT_EQ(JudgeGroup(Group(0, 8, 2, 3, 1, {2}), all, false), Verdict::kNotMet);
  EXPECT_EQ(JudgeGroup(Group(0, 8, 2, 3, 2, {2}), all, false), Verdict::kUndecided);
  EXPECT_EQ(JudgeGroup(Group(0, 8, 0, 3, 0, {0, 1, 2}), all, false), Verdict::kUndecided);
  // The test split reads test_exact_seeds.
  EXPECT_EQ(JudgeGroup(Group(0, 8, 3, 3, 3, {}, 2), all, true), Verdict::kNotMet);
}

TEST(JudgeGroupTest, SeedsKIsDecidedAsSoonAsTheMissingSeedsCannotChangeIt) {
  const Criterion two = Parsed("seeds:2");
  EXPECT_EQ(JudgeGroup(Group(0, 8, 5, 5, 2), two, false), Verdict::kMeets);
  EXPECT_EQ(JudgeGroup(Group(0, 8, 5, 5, 1), two, false), Verdict::kNotMet);
  // Two exact of three done: met whatever seeds 3 and 4 do.
  EXPECT_EQ(JudgeGroup(Group(0, 8, 3, 5, 2, {3, 4}), two, false), Verdict::kMeets);
  // One exact, one missing: it could still reach two.
  EXPECT_EQ(JudgeGroup(Group(0, 8, 4, 5, 1, {4}), two, false), Verdict::kUndecided);
  // None exact of four done, one missing: at most one.
  EXPECT_EQ(JudgeGroup(Group(0, 8, 4, 5, 0, {4}), two, false), Verdict::kNotMet);
  // More seeds asked than the group has: never met.
  EXPECT_EQ(JudgeGroup(Group(0, 8, 3, 3, 3), Parsed("seeds:4"), false), Verdict::kNotMet);
  EXPECT_EQ(JudgeGroup(Group(0, 8, 3, 3, 0, {}, 2), two, true), Verdict::kMeets);
}

TEST(JudgeGroupTest, MeanIsOverTheExpectedSeedsWithMissingOnesAnywhereInZeroOne) {
  const Criterion mean = Parsed("mean:0.9");
  EXPECT_EQ(JudgeGroup(WithAccuracy(Group(0, 8, 4, 4, 0), 0.9), mean, false), Verdict::kMeets);
  EXPECT_EQ(JudgeGroup(WithAccuracy(Group(0, 8, 4, 4, 0), 0.89), mean, false),
            Verdict::kNotMet);
  // 4 of 5 done at 0.95: the mean over 5 lies in [0.76, 0.96].
  EXPECT_EQ(JudgeGroup(WithAccuracy(Group(0, 8, 4, 5, 0, {4}), 0.95), mean, false),
            Verdict::kUndecided);
  // 4 of 5 done at 1.0 with mean:0.8: at least 0.8 whatever seed 4 does.
  EXPECT_EQ(JudgeGroup(WithAccuracy(Group(0, 8, 4, 5, 4, {4}), 1.0), Parsed("mean:0.8"), false),
            Verdict::kMeets);
  // 4 of 5 done at 0.5: at most 0.6.
  EXPECT_EQ(JudgeGroup(WithAccuracy(Group(0, 8, 4, 5, 0, {4}), 0.5), mean, false),
            Verdict::kNotMet);
  EXPECT_EQ(JudgeGroup(Group(0, 8, 0, 5, 0, {0, 1, 2, 3, 4}), mean, false), Verdict::kUndecided);
  // Test: 1 - test error.
  EXPECT_EQ(JudgeGroup(WithAccuracy(Group(0, 8, 2, 2, 2), 1.0, 0.92), mean, true),
            Verdict::kMeets);
  EXPECT_EQ(JudgeGroup(WithAccuracy(Group(0, 8, 2, 2, 2), 1.0, 0.5), mean, true),
            Verdict::kNotMet);
  // Seeds all at 0.99 meet mean:0.99 however the sum rounds.
  EXPECT_EQ(JudgeGroup(WithAccuracy(Group(0, 8, 3, 3, 0), 0.99), Parsed("mean:0.99"), false),
            Verdict::kMeets);
}

TEST(JudgeGroupsTest, SetsEachGroupsVerdictsUnderTheCriterion) {
  std::vector<ResultGroup> groups = {Group(0, 1, 3, 3, 1, {}, 3), Group(0, 2, 2, 3, 2, {2}, 0)};
  JudgeGroups(groups, /*has_test_split=*/true, Parsed("seeds:2"));
  EXPECT_EQ(groups[0].verdict, Verdict::kNotMet);
  EXPECT_EQ(groups[0].test_verdict, Verdict::kMeets);
  EXPECT_EQ(groups[1].verdict, Verdict::kMeets);
  EXPECT_EQ(groups[1].test_verdict, Verdict::kNotMet);
  std::vector<ResultGroup> train_only = {Group(0, 1, 3, 3, 3, {}, 3)};
  JudgeGroups(train_only, /*has_test_split=*/false, Criterion{});
  EXPECT_EQ(train_only[0].verdict, Verdict::kMeets);
  EXPECT_EQ(train_only[0].test_verdict, Verdict::kUndecided);  // not judged
}

TEST(SummarizeHeadTest, SeedsCriterionTransitionAndItsWords) {
  const std::vector<ResultGroup> groups = {Group(0, 1, 3, 3, 0), Group(0, 2, 3, 3, 2),
                                           Group(0, 4, 3, 3, 3), Group(0, 8, 3, 3, 1)};
  HeadSummary all = SummarizeHead(groups, false);
  EXPECT_EQ(all.transition_rank, 4);
  EXPECT_EQ(all.reason,
            "rank 4 is the smallest swept rank with every seed exact (3/3); not monotone: rank 8 "
            "has 1/3 seeds exact");
  HeadSummary two = SummarizeHead(groups, false, Parsed("seeds:2"));
  EXPECT_TRUE(two.transition_defined);
  EXPECT_EQ(two.transition_rank, 2);
  EXPECT_EQ(two.reason,
            "rank 2 is the smallest swept rank with at least 2 seeds exact (2/3); not monotone: "
            "rank 8 has 1/3 seeds exact");
  ASSERT_EQ(two.ranks.size(), 4u);
  EXPECT_EQ(two.ranks[0].rank, 1);
  EXPECT_EQ(two.ranks[0].verdict, Verdict::kNotMet);
  EXPECT_EQ(two.ranks[1].verdict, Verdict::kMeets);
  EXPECT_EQ(two.ranks[1].recipes_meeting, std::vector<int32_t>({0}));
  EXPECT_EQ(two.ranks[3].verdict, Verdict::kNotMet);
  EXPECT_TRUE(two.ranks[3].recipes_meeting.empty());
  HeadSummary none = SummarizeHead(groups, false, Parsed("seeds:4"));
  EXPECT_FALSE(none.transition_defined);
  EXPECT_EQ(none.reason, "no swept rank has at least 4 seeds exact");
  // Undecided under seeds:K names what the missing seeds decide.
  HeadSummary open = SummarizeHead({Group(0, 1, 3, 3, 0), Group(0, 2, 2, 3, 1, {2})}, false,
                                   Parsed("seeds:2"));
  EXPECT_FALSE(open.transition_defined);
  EXPECT_EQ(open.reason,
            "undecided: rank 2 is incomplete (2/3 seeds; seed 2 missing) and its missing seeds "
            "decide whether it has at least 2 seeds exact");
}

TEST(SummarizeHeadTest, MeanCriterionTransitionAndItsWords) {
  HeadSummary s = SummarizeHead(
      {WithAccuracy(Group(0, 1, 2, 2, 0), 0.5), WithAccuracy(Group(0, 2, 2, 2, 1), 0.995),
       WithAccuracy(Group(0, 4, 2, 2, 0), 0.9)},
      false, Parsed("mean:0.99"));
  EXPECT_TRUE(s.transition_defined);
  EXPECT_EQ(s.transition_rank, 2);
  EXPECT_EQ(s.reason,
            "rank 2 is the smallest swept rank with mean exact accuracy >= 0.99 (mean 0.995 over "
            "2/2 seeds); not monotone: rank 4 has mean exact accuracy 0.900");
  // Met before it is complete: 3 of 4 seeds at 1.0 give at least 0.75.
  HeadSummary early = SummarizeHead({WithAccuracy(Group(0, 8, 3, 4, 3, {3}), 1.0)}, false,
                                    Parsed("mean:0.75"));
  EXPECT_EQ(early.transition_rank, 8);
  EXPECT_EQ(early.reason,
            "rank 8 is the smallest swept rank with mean exact accuracy >= 0.75 (at least 0.750 "
            "with 3/4 seeds done)");
  // The same group under mean:0.9 is undecided (0.75 .. 1.0).
  HeadSummary open = SummarizeHead({WithAccuracy(Group(0, 8, 3, 4, 3, {3}), 1.0)}, false,
                                   Parsed("mean:0.9"));
  EXPECT_FALSE(open.transition_defined);
  EXPECT_EQ(open.reason,
            "undecided: rank 8 is incomplete (3/4 seeds; seed 3 missing) and its missing seeds "
            "decide whether it has mean exact accuracy >= 0.9");
  // The test split: 1 - test error, its own transition.
  HeadSummary test = SummarizeHead({WithAccuracy(Group(0, 8, 2, 2, 2), 1.0, 0.97),
                                    WithAccuracy(Group(0, 16, 2, 2, 2), 1.0, 0.995)},
                                   true, Parsed("mean:0.99"));
  EXPECT_EQ(test.transition_rank, 8);
  EXPECT_TRUE(test.test_transition_defined);
  EXPECT_EQ(test.test_transition_rank, 16);
  EXPECT_EQ(test.test_reason,
            "rank 16 is the smallest swept rank with mean exact accuracy >= 0.99 (mean 0.995 "
            "over 2/2 seeds)");
  EXPECT_EQ(test.ranks[0].test_verdict, Verdict::kNotMet);
  EXPECT_EQ(test.ranks[1].test_recipes_meeting, std::vector<int32_t>({0}));
}

TEST(SummarizeHeadTest, RanklessHeadUnderAnotherCriterionSaysItsVerdict) {
  EXPECT_EQ(SummarizeHead({Group(1, 0, 3, 3, 2)}, false, Parsed("seeds:2")).reason,
            "no rank; exact on 2/3 seeds; meets at least 2 seeds exact");
  EXPECT_EQ(SummarizeHead({Group(1, 0, 3, 3, 1)}, false, Parsed("seeds:2")).reason,
            "no rank; exact on 1/3 seeds; does not meet at least 2 seeds exact");
  EXPECT_EQ(SummarizeHead({Group(1, 0, 2, 3, 1, {2})}, false, Parsed("seeds:2")).reason,
            "no rank; exact on 1/3 seeds (seed 2 missing); undecided: at least 2 seeds exact");
}

// Best over the recipe: three recipes of one head.
std::vector<ResultGroup> ThreeRecipes() {
  return {
      // rank 4: no recipe meets every-seed-exact; recipe 2 has 2 of 3.
      InRecipe(Group(0, 4, 3, 3, 0), 0), InRecipe(Group(0, 4, 3, 3, 1), 1),
      InRecipe(Group(0, 4, 3, 3, 2), 2),
      // rank 8: recipes 1 and 2 meet it.
      InRecipe(Group(0, 8, 3, 3, 1), 0), InRecipe(Group(0, 8, 3, 3, 3), 1),
      InRecipe(Group(0, 8, 3, 3, 3), 2),
      // rank 16: no recipe meets it.
      InRecipe(Group(0, 16, 3, 3, 2), 0), InRecipe(Group(0, 16, 3, 3, 2), 1),
      InRecipe(Group(0, 16, 3, 3, 0), 2)};
}

TEST(SummarizeHeadTest, BestOverRecipeTakesTheSmallestRankSomeRecipeMeets) {
  HeadSummary s = SummarizeHead(ThreeRecipes(), false);
  EXPECT_TRUE(s.transition_defined);
  EXPECT_EQ(s.transition_rank, 8);
  EXPECT_EQ(s.reason,
            "rank 8 is the smallest swept rank with every seed exact under some recipe: recipe 1 "
            "(3/3), recipe 2 (3/3); not monotone: rank 16 meets it under no recipe");
  ASSERT_EQ(s.ranks.size(), 3u);
  EXPECT_EQ(s.ranks[0].verdict, Verdict::kNotMet);
  EXPECT_EQ(s.ranks[1].recipes_meeting, std::vector<int32_t>({1, 2}));
  // Under seeds:2 recipe 2 already meets it at rank 4; labels from the caller.
  HeadSummary two =
      SummarizeHead(ThreeRecipes(), false, Parsed("seeds:2"),
                    [](int32_t r) { return absl::StrCat("lr=", r == 2 ? "0.001" : "x"); });
  EXPECT_EQ(two.transition_rank, 4);
  EXPECT_EQ(two.reason,
            "rank 4 is the smallest swept rank with at least 2 seeds exact under some recipe: "
            "lr=0.001 (2/3)");
  EXPECT_EQ(two.ranks[2].recipes_meeting, std::vector<int32_t>({0, 1}));
  EXPECT_EQ(SummarizeHead(ThreeRecipes(), false, Parsed("seeds:4")).reason,
            "no swept rank has at least 4 seeds exact under any recipe");
}

TEST(SummarizeHeadTest, BestOverRecipeIsUndecidedWhileAnOpenRecipeCouldStillMeetIt) {
  // Rank 4: recipe 0 is not met, recipe 1 is incomplete with every done
  // seed exact; rank 8 meets it under recipe 0. Rank 4 could still be it.
  HeadSummary s = SummarizeHead(
      {InRecipe(Group(0, 4, 3, 3, 1), 0), InRecipe(Group(0, 4, 2, 3, 2, {1}), 1),
       InRecipe(Group(0, 8, 3, 3, 3), 0), InRecipe(Group(0, 8, 3, 3, 3), 1)},
      false);
  EXPECT_FALSE(s.transition_defined);
  EXPECT_EQ(s.reason,
            "undecided: rank 4 under recipe 1 is incomplete (2/3 seeds; seed 1 missing) and "
            "every done seed there is exact");
  EXPECT_EQ(s.ranks[0].verdict, Verdict::kUndecided);
  EXPECT_EQ(s.ranks[1].verdict, Verdict::kMeets);
  // Once recipe 0 meets rank 4, recipe 1's open seed no longer matters.
  HeadSummary met = SummarizeHead(
      {InRecipe(Group(0, 4, 3, 3, 3), 0), InRecipe(Group(0, 4, 2, 3, 2, {1}), 1)}, false);
  EXPECT_EQ(met.transition_rank, 4);
  EXPECT_EQ(met.reason,
            "rank 4 is the smallest swept rank with every seed exact under some recipe: "
            "recipe 0 (3/3)");
}

TEST(SummarizeHeadTest, APrunedRecipeIsNotMetSoItNeverLeavesARankUndecided) {
  // The same groups as above, but recipe 1's missing seed was pruned: its
  // recipe lost at a rung, so rank 4 is not met and rank 8 is the transition.
  ResultGroup pruned = InRecipe(Group(0, 4, 2, 3, 2, {1}), 1);
  pruned.pruned = 1;
  EXPECT_EQ(JudgeGroup(pruned, Criterion{}, false), Verdict::kNotMet);
  HeadSummary s = SummarizeHead({InRecipe(Group(0, 4, 3, 3, 1), 0), pruned,
                                 InRecipe(Group(0, 8, 3, 3, 3), 0),
                                 InRecipe(Group(0, 8, 3, 3, 3), 1)},
                                false);
  EXPECT_TRUE(s.transition_defined);
  EXPECT_EQ(s.transition_rank, 8);
  EXPECT_EQ(s.ranks[0].verdict, Verdict::kNotMet);
  // A group with no done seed at all, every one pruned, is not met either.
  ResultGroup none = InRecipe(Group(0, 4, 0, 3, 0, {0, 1, 2}), 1);
  none.pruned = 3;
  EXPECT_EQ(JudgeGroup(none, Criterion{}, true), Verdict::kNotMet);
}

TEST(SummarizeHeadTest, RanklessHeadWithRecipes) {
  HeadSummary s = SummarizeHead(
      {InRecipe(Group(1, 0, 3, 3, 2), 0), InRecipe(Group(1, 0, 3, 3, 3), 1)}, false);
  EXPECT_EQ(s.reason,
            "no rank; exact on 2/3 seeds under recipe 0, 3/3 seeds under recipe 1; every seed "
            "exact under recipe 1");
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].rank, 0);
  EXPECT_EQ(s.ranks[0].recipes_meeting, std::vector<int32_t>({1}));
}

TEST(SummarizeHeadTest, OnlyRecipeZeroReadsAsWithoutAxes) {
  // Recipe 0 alone is a sweep without recipe axes: no recipe named.
  HeadSummary s = SummarizeHead({InRecipe(Group(0, 4, 3, 3, 3), 0)}, false);
  EXPECT_EQ(s.reason, "rank 4 is the smallest swept rank with every seed exact (3/3)");
  // A lone recipe other than 0 is named.
  HeadSummary one = SummarizeHead({InRecipe(Group(0, 4, 3, 3, 3), 2)}, false);
  EXPECT_EQ(one.reason,
            "rank 4 is the smallest swept rank with every seed exact under some recipe: "
            "recipe 2 (3/3)");
}

TEST(NoBoundReasonTest, OnlySingleTrainedNonnegativeKernelHeadsUnderMse) {
  TrainSpec mse;
  TrainSpec ce;
  ce.loss = LossKind::kCrossEntropy;
  HeadSpec kernel;
  EXPECT_EQ(NoBoundReason(kernel, mse), "");
  EXPECT_EQ(NoBoundReason(kernel, ce), "loss ce");
  HeadSpec softmax;
  softmax.kind = HeadKind::kSoftmax;
  EXPECT_EQ(NoBoundReason(softmax, mse), "softmax");
  HeadSpec multi;
  multi.kind = HeadKind::kMultiheadKernel;
  multi.num_heads = 4;
  EXPECT_EQ(NoBoundReason(multi, mse), "multi-head");
  HeadSpec signed_kernel;
  signed_kernel.kind = HeadKind::kSignedKernel;
  EXPECT_EQ(NoBoundReason(signed_kernel, mse), "signed");
  HeadSpec rank1;
  rank1.construction = Construction::kRank1;
  EXPECT_EQ(NoBoundReason(rank1, mse), "construction");
}

}  // namespace
}  // namespace ranksweep::server
