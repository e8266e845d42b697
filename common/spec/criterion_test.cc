#include "common/spec/criterion.h"

#include "gtest/gtest.h"

namespace ranksweep {
namespace {

TEST(CriterionTest, ParsesTheThreeFormsAndPrintsThemBack) {
  absl::StatusOr<Criterion> all = ParseCriterion("all", "--criterion");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->kind, Criterion::Kind::kAll);
  EXPECT_EQ(CriterionText(*all), "all");
  EXPECT_EQ(CriterionPhrase(*all), "every seed exact");
  ASSERT_TRUE(ParseCriterion("", "criterion").ok());
  EXPECT_EQ(ParseCriterion("", "criterion")->kind, Criterion::Kind::kAll);

  absl::StatusOr<Criterion> mean = ParseCriterion("mean:0.99", "--criterion");
  ASSERT_TRUE(mean.ok());
  EXPECT_EQ(mean->kind, Criterion::Kind::kMean);
  EXPECT_EQ(mean->mean, 0.99);
  EXPECT_EQ(CriterionText(*mean), "mean:0.99");
  EXPECT_EQ(CriterionPhrase(*mean), "mean exact accuracy >= 0.99");
  EXPECT_EQ(CriterionText(*ParseCriterion("mean:1", "c")), "mean:1");

  absl::StatusOr<Criterion> seeds = ParseCriterion("seeds:3", "--criterion");
  ASSERT_TRUE(seeds.ok());
  EXPECT_EQ(seeds->kind, Criterion::Kind::kSeeds);
  EXPECT_EQ(seeds->seeds, 3);
  EXPECT_EQ(CriterionText(*seeds), "seeds:3");
  EXPECT_EQ(CriterionPhrase(*seeds), "at least 3 seeds exact");
  EXPECT_EQ(CriterionPhrase(*ParseCriterion("seeds:1", "c")), "at least 1 seed exact");
}

TEST(CriterionTest, BadValuesNameTheFieldAndTheRange) {
  const std::string forms =
      "; use all (every seed exact), mean:X (mean exact accuracy >= X, 0 < X <= 1) or "
      "seeds:K (at least K seeds exact, K >= 1)";
  auto message = [](absl::string_view text) {
    absl::StatusOr<Criterion> c = ParseCriterion(text, "--criterion");
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << text;
    return std::string(c.status().message());
  };
  EXPECT_EQ(message("mean:0"),
            "--criterion: \"mean:0\" is out of range: X must be in (0, 1]" + forms);
  EXPECT_EQ(message("mean:1.5"),
            "--criterion: \"mean:1.5\" is out of range: X must be in (0, 1]" + forms);
  EXPECT_EQ(message("mean:-0.1"),
            "--criterion: \"mean:-0.1\" is out of range: X must be in (0, 1]" + forms);
  EXPECT_EQ(message("mean:nan"), "--criterion: \"mean:nan\" is not a number after mean:" + forms);
  EXPECT_EQ(message("mean:"), "--criterion: \"mean:\" is not a number after mean:" + forms);
  EXPECT_EQ(message("seeds:0"),
            "--criterion: \"seeds:0\" is out of range: K must be at least 1" + forms);
  EXPECT_EQ(message("seeds:2.5"),
            "--criterion: \"seeds:2.5\" is not an integer after seeds:" + forms);
  EXPECT_EQ(message("most"), "--criterion: \"most\" is not a criterion" + forms);
}

}  // namespace
}  // namespace ranksweep
