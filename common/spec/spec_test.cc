#include "common/spec/spec.h"

#include "common/spec/spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep {
namespace {

using ::testing::HasSubstr;

SweepSpec GoodSweep() {
  SweepSpec s;
  s.name = "witness-small";
  s.dataset.kind = DatasetKind::kExhaustive;
  s.dataset.m = 3;
  s.dataset.seq_len = 3;
  HeadSpec kernel;
  HeadSpec softmax;
  softmax.kind = HeadKind::kSoftmax;
  s.heads = {kernel, softmax};
  s.ranks = {1, 2, 4};
  s.seed_count = 4;
  return s;
}

void ExpectInvalid(const absl::Status& st, const std::string& field) {
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr(field));
}

TEST(SpecTest, GoodSweepValidates) { EXPECT_TRUE(ValidateSweepSpec(GoodSweep()).ok()); }

TEST(SpecTest, RangeErrorsNameFieldAndRange) {
  SweepSpec s = GoodSweep();
  s.dataset.m = 0;
  absl::Status st = ValidateSweepSpec(s);
  ExpectInvalid(st, "dataset.m must be in 1..64, got 0");

  s = GoodSweep();
  s.dataset.m = 65;
  ExpectInvalid(ValidateSweepSpec(s), "dataset.m must be in 1..64, got 65");

  s = GoodSweep();
  s.dataset.seq_len = 0;
  ExpectInvalid(ValidateSweepSpec(s), "dataset.seq_len must be in 1..64");

  s = GoodSweep();
  s.dataset.m = 7;  // 7 * 3 = 21 > 18
  ExpectInvalid(ValidateSweepSpec(s), "dataset.m * dataset.seq_len must be in 1..18");

  s = GoodSweep();
  s.ranks = {0};
  ExpectInvalid(ValidateSweepSpec(s), "ranks[] must be in 1..65536, got 0");

  s = GoodSweep();
  s.ranks = {2, 2};
  ExpectInvalid(ValidateSweepSpec(s), "ranks must not repeat");

  s = GoodSweep();
  s.name = "bad name";
  ExpectInvalid(ValidateSweepSpec(s), "name must use only");

  s = GoodSweep();
  s.seed_count = 0;
  ExpectInvalid(ValidateSweepSpec(s), "seed_count must be in 1..1024");

  s = GoodSweep();
  s.train.lr = 0;
  ExpectInvalid(ValidateSweepSpec(s), "train.lr must be in (0, 10]");

  s = GoodSweep();
  s.heads[0].construction = Construction::kSoftmaxExact;
  ExpectInvalid(ValidateSweepSpec(s), "heads[0]: head.construction");
}

TEST(SpecTest, OutOfRangeEnumsAreRejected) {
  TaskSpec t;
  t.head.kind = static_cast<HeadKind>(42);
  ExpectInvalid(ValidateTaskSpec(t),
                "head.kind must be one of kernel, softmax, signed_kernel, multihead_kernel; got value 42");
  t = TaskSpec{};
  t.head.feature_map = static_cast<FeatureMap>(-1);
  ExpectInvalid(ValidateTaskSpec(t), "head.feature_map must be one of elu1");
  t = TaskSpec{};
  t.dataset.kind = static_cast<DatasetKind>(7);
  ExpectInvalid(ValidateTaskSpec(t), "dataset.kind must be one of exhaustive, witness, pool");
  t = TaskSpec{};
  t.train.loss = static_cast<LossKind>(2);
  ExpectInvalid(ValidateTaskSpec(t), "train.loss must be one of mse, ce");
}

TEST(SpecTest, TaskRankZeroRejectedForKernelOnly) {
  TaskSpec t;
  t.rank = 0;
  ExpectInvalid(ValidateTaskSpec(t), "rank must be in 1..65536, got 0");
  t.head.kind = HeadKind::kSoftmax;
  EXPECT_TRUE(ValidateTaskSpec(t).ok());
}

TEST(SpecTest, CellCountLimit) {
  SweepSpec s = GoodSweep();
  s.seed_count = 1024;
  s.ranks.clear();
  for (int r = 1; r <= 64; ++r) s.ranks.push_back(r);
  s.heads.assign(2, HeadSpec{});  // 2 * 64 * 1024 = 131072 > 100000
  ExpectInvalid(ValidateSweepSpec(s), "total cells (heads x ranks x seeds) must be in 1..100000, got 131072");
}

TEST(SpecTest, SweepSeedsAndLabels) {
  SweepSpec s = GoodSweep();
  EXPECT_EQ(SweepSeeds(s), (std::vector<uint64_t>{0, 1, 2, 3}));
  s.seeds = {7, 9};
  EXPECT_EQ(SweepSeeds(s), (std::vector<uint64_t>{7, 9}));
  EXPECT_EQ(HeadLabel(s.heads[0]), "kernel/elu1");
  EXPECT_EQ(HeadLabel(s.heads[1]), "softmax");
  HeadSpec mh;
  mh.kind = HeadKind::kMultiheadKernel;
  mh.num_heads = 4;
  mh.feature_map = FeatureMap::kFavorPlus;
  EXPECT_EQ(HeadLabel(mh), "multihead_kernel/favorx4");
  HeadSpec r1;
  r1.construction = Construction::kRank1;
  EXPECT_EQ(HeadLabel(r1), "kernel/rank1*");
  EXPECT_FALSE(HeadHasRank(r1));
  EXPECT_FALSE(HeadHasRank(s.heads[1]));
  EXPECT_TRUE(HeadHasRank(s.heads[0]));
}

TEST(SpecTest, MakeTaskSpecZeroesRankOfUnrankedHeads) {
  SweepSpec s = GoodSweep();
  TaskSpec t = MakeTaskSpec(s, 1, 4, {0, 1});
  EXPECT_EQ(t.rank, 0);
  EXPECT_EQ(t.head.kind, HeadKind::kSoftmax);
  EXPECT_EQ(t.seeds, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(MakeTaskSpec(s, 0, 4, {3}).rank, 4);
}

TEST(SpecJsonTest, SweepRoundTrip) {
  SweepSpec s = GoodSweep();
  s.heads[0].hidden = {16, 16};
  s.heads[0].feature_map = FeatureMap::kSoftplus;
  s.train.loss = LossKind::kCrossEntropy;
  s.priority = 5;
  auto back = SweepSpecFromJson(SweepSpecToJson(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SweepSpecToJson(*back), SweepSpecToJson(s));
  EXPECT_EQ(back->heads[0].hidden, (std::vector<int>{16, 16}));
  EXPECT_EQ(back->train.loss, LossKind::kCrossEntropy);
}

TEST(SpecJsonTest, SyntaxErrorHasLineAndColumn) {
  auto r = SweepSpecFromJson("{\n  \"name\": \"x\",\n  \"ranks\": [1, 2,,]\n}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("line 3, column 18"));
}

TEST(SpecJsonTest, UnknownAndMistypedFieldsAreNamed) {
  auto r = SweepSpecFromJson(R"({"name":"x","dataset":{"mm":3}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.status().message()), "unknown field \"dataset.mm\"");
  r = SweepSpecFromJson(R"({"ranks":[1,"two"]})");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("ranks[1] must be an integer"));
  r = SweepSpecFromJson(R"({"heads":[{"kind":"linear"}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.status().message()),
            "heads[0].kind must be one of kernel, softmax, signed_kernel, "
            "multihead_kernel; got \"linear\"");
  r = SweepSpecFromJson(R"({"dataset":{"m":-3000000000}})");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("dataset.m must be an integer in range"));
}

TEST(SpecJsonTest, NumberTooLargeForADoubleIsInvalidArgument) {
  auto r = SweepSpecFromJson(R"({"train":{"lr":9e308}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("number overflow"));
  auto t = TaskSpecFromJson("1e3083");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SpecJsonTest, SeedResultRoundTrip) {
  SeedResult r;
  r.seed = 3;
  r.train.sequences = 1272;
  r.train.exact_accuracy = 0.25;
  r.train.error = 0.75;
  r.steps = 400;
  r.device = "cpu";
  r.facts.rank_lower_bound = 8;
  auto back = SeedResultFromJson(SeedResultToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->seed, 3u);
  EXPECT_EQ(back->train.sequences, 1272);
  EXPECT_DOUBLE_EQ(back->train.error, 0.75);
  EXPECT_EQ(back->facts.rank_lower_bound, 8);
  EXPECT_EQ(back->device, "cpu");
}

}  // namespace
}  // namespace ranksweep
