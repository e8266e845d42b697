#include "client/spec_file.h"

#include <string>

#include "common/spec/spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"

namespace ranksweep::client {
namespace {
// A spec file whose every field a test below overrides or checks untouched.
constexpr char kYaml[] = R"(name: witness-m16
dataset: {kind: witness, m: 16, seq_len: 4, code_weight: 4, max_overlap: 1}
heads: [{kind: kernel, feature_map: elu1}, {kind: softmax}]
ranks: [1, 2, 4, 8]
seed_count: 3
train: {lr: 3e-3, max_steps: 500, loss: ce}
)";

TEST(HeadShorthandTest, ParsesKindsMapsConstructionsAndCounts) {
  absl::StatusOr<std::vector<HeadSpec>> heads = ParseHeadList(
      {"kernel:elu1", "softmax", "multihead_kernel:favor:x4", "kernel:rank1", "kernel:h=16/8"});
  ASSERT_TRUE(heads.ok()) << heads.status();
  ASSERT_EQ(heads->size(), 5u);
  EXPECT_EQ((*heads)[0].kind, HeadKind::kKernel);
  EXPECT_EQ((*heads)[0].feature_map, FeatureMap::kEluPlusOne);
  EXPECT_EQ((*heads)[1].kind, HeadKind::kSoftmax);
  EXPECT_EQ((*heads)[2].kind, HeadKind::kMultiheadKernel);
  EXPECT_EQ((*heads)[2].feature_map, FeatureMap::kFavorPlus);
  EXPECT_EQ((*heads)[2].num_heads, 4);
  EXPECT_EQ((*heads)[3].construction, Construction::kRank1);
  EXPECT_EQ((*heads)[4].hidden, (std::vector<int>{16, 8}));
}

TEST(HeadShorthandTest, ErrorsNameTheItemAndPart) {
  absl::StatusOr<std::vector<HeadSpec>> heads = ParseHeadList({"softmax", "kernel:elu2"});
  EXPECT_EQ(heads.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(heads.status().message()),
              ::testing::StartsWith("--heads[1]: unknown part \"elu2\" in \"kernel:elu2\""));
  heads = ParseHeadList({"kernal"});
  EXPECT_EQ(heads.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(heads.status().message()), ::testing::HasSubstr("--heads[0]"));
}

TEST(HeadShorthandTest, AMisspelledKindOrPartSuggestsTheNearestName) {
  absl::StatusOr<std::vector<HeadSpec>> heads = ParseHeadList({"kernel:elu2"});
  EXPECT_THAT(std::string(heads.status().message()),
              ::testing::EndsWith("; did you mean \"elu1\"?"));
  heads = ParseHeadList({"kernel:sofplus"});
  EXPECT_THAT(std::string(heads.status().message()),
              ::testing::EndsWith("; did you mean \"softplus\"?"));
  heads = ParseHeadList({"kernal:elu1"});
  EXPECT_THAT(std::string(heads.status().message()),
              ::testing::EndsWith("; did you mean \"kernel\"?"));
  heads = ParseHeadList({"kernel:tanh"});
  EXPECT_THAT(std::string(heads.status().message()),
              ::testing::Not(::testing::HasSubstr("did you mean")));
}

TEST(OverridesTest, WitnessAndPoolFieldsHaveFlags) {
  SweepSpec spec;
  SpecOverrides o;
  o.dataset = "pool";
  o.weight = 3;
  o.bernoulli_p = 0.25;
  o.pool_size = 5000;
  // test_pool_share, hard_share and split are recipe axes: one value sets
  // the field.
  o.axes = {{"split", {1}}, {"hard_share", {0.75}}, {"test_pool_share", {0.2}}};
  o.train_size = 4000;
  o.test_size = 1000;
  o.code_weight = 6;
  o.max_overlap = 2;
  o.num_queries = 40;
  ASSERT_TRUE(ApplyOverrides(o, &spec).ok());
  EXPECT_EQ(spec.dataset.kind, DatasetKind::kPool);
  EXPECT_EQ(spec.dataset.weight, 3);
  EXPECT_EQ(spec.dataset.bernoulli_p, 0.25);
  EXPECT_EQ(spec.dataset.pool_size, 5000);
  EXPECT_EQ(spec.dataset.test_pool_share, 0.2);
  EXPECT_EQ(spec.dataset.train_size, 4000);
  EXPECT_EQ(spec.dataset.test_size, 1000);
  EXPECT_EQ(spec.dataset.hard_share, 0.75);
  EXPECT_EQ(spec.dataset.split, PoolSplit::kSequences);
  EXPECT_TRUE(spec.axes.empty());
  EXPECT_EQ(spec.dataset.code_weight, 6);
  EXPECT_EQ(spec.dataset.max_overlap, 2);
  EXPECT_EQ(spec.dataset.num_queries, 40);
}

// A witness family at m = 24 without num_queries silently took the whole
// code (1.15 million sequences); --dry-run now says so, and submit warns.
TEST(OverridesTest, FlagsReplaceFileFields) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpecText(kYaml, SpecFormat::kYaml, "s.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  SpecOverrides o;
  o.name = "renamed";
  o.m = 12;
  o.heads = std::vector<std::string>{"kernel:softplus"};
  o.seeds = std::vector<uint64_t>{7, 9};
  o.lr = 0.5;
  o.loss = "mse";
  ASSERT_TRUE(ApplyOverrides(o, &*spec).ok());
  EXPECT_EQ(spec->name, "renamed");
  EXPECT_EQ(spec->dataset.m, 12);
  EXPECT_EQ(spec->dataset.seq_len, 4);  // untouched
  ASSERT_EQ(spec->heads.size(), 1u);
  EXPECT_EQ(spec->heads[0].feature_map, FeatureMap::kSoftplus);
  EXPECT_EQ(spec->seeds, (std::vector<uint64_t>{7, 9}));
  EXPECT_EQ(spec->ranks, (std::vector<int>{1, 2, 4, 8}));  // untouched
  EXPECT_DOUBLE_EQ(spec->train.lr, 0.5);
  EXPECT_EQ(spec->train.loss, LossKind::kMse);
  EXPECT_EQ(spec->train.max_steps, 500);  // untouched

  SpecOverrides count;
  count.seed_count = 5;
  ASSERT_TRUE(ApplyOverrides(count, &*spec).ok());
  EXPECT_EQ(spec->seed_count, 5);
  EXPECT_TRUE(spec->seeds.empty());
}

TEST(OverridesTest, ScheduleFlagsSetTheTrainSpec) {
  SweepSpec spec;
  SpecOverrides o;
  o.schedule = "cosine";
  o.warmup_steps = 200;
  ASSERT_TRUE(ApplyOverrides(o, &spec).ok());
  EXPECT_EQ(spec.train.schedule, LrSchedule::kCosine);
  EXPECT_EQ(spec.train.warmup_steps, 200);
  o = SpecOverrides();
  o.schedule = "linear";
  absl::Status s = ApplyOverrides(o, &spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--schedule must be one of constant, cosine; got \"linear\"");
}

TEST(OverridesTest, BadEnumNamesTheFlag) {
  SweepSpec spec;
  SpecOverrides o;
  o.dataset = "pools";
  absl::Status s = ApplyOverrides(o, &spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("--dataset"));
}

TEST(SpecFileTest, AYamlListWhereAValueStoodIsAnAxisAndFlagsOverrideIt) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpecText(
      "name: a\nheads: [{kind: kernel}]\nranks: [1]\nseed_count: 1\n"
      "train: {lr: [0.01, 0.003], max_steps: 300}\n",
      SpecFormat::kYaml, "s.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->axes.size(), 1u);
  EXPECT_EQ(spec->axes[0].name, "lr");
  EXPECT_EQ(spec->axes[0].values, (std::vector<double>{0.01, 0.003}));
  // Flags: several values make an axis, in AxisNames() order; one value
  // sets the field and drops the file's axis.
  SpecOverrides o;
  o.axes = {{"max_steps", {100, 200, 400}}, {"lr", {0.001}}};
  ASSERT_TRUE(ApplyOverrides(o, &*spec).ok());
  ASSERT_EQ(spec->axes.size(), 1u);
  EXPECT_EQ(spec->axes[0].name, "max_steps");
  EXPECT_EQ(spec->train.lr, 0.001);
  o.axes = {{"lr", {0.1, 0.2}}};
  ASSERT_TRUE(ApplyOverrides(o, &*spec).ok());
  ASSERT_EQ(spec->axes.size(), 2u);
  EXPECT_EQ(spec->axes[0].name, "lr");
  EXPECT_EQ(spec->axes[1].name, "max_steps");
  EXPECT_EQ(RecipeCount(*spec), 6);
  EXPECT_TRUE(ValidateSweepSpec(*spec).ok()) << ValidateSweepSpec(*spec);
  o.axes = {{"beta1", {0.5, 0.9}}};
  absl::Status bad = ApplyOverrides(o, &*spec);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), ::testing::StartsWith("--beta1: \"beta1\" is not an axis"));
}

}  // namespace
}  // namespace ranksweep::client
