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
  // In the order the flags are listed; axes given one value set the field.
  o.fields = {{"kind", {"pool"}},        {"code_weight", {"6"}},   {"max_overlap", {"2"}},
              {"num_queries", {"40"}},   {"weight", {"3"}},        {"bernoulli_p", {"0.25"}},
              {"pool_size", {"5000"}},   {"test_pool_share", {"0.2"}},
              {"train_size", {"4000"}},  {"test_size", {"1000"}},  {"hard_share", {"0.75"}},
              {"split", {"sequences"}}};
  ASSERT_TRUE(ApplyOverrides(o, &spec).ok()) << ApplyOverrides(o, &spec);
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

TEST(OverridesTest, FlagsReplaceFileFields) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpecText(kYaml, SpecFormat::kYaml, "s.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  SpecOverrides o;
  o.name = "renamed";
  o.heads = std::vector<std::string>{"kernel:softplus"};
  o.seeds = std::vector<uint64_t>{7, 9};
  o.fields = {{"m", {"12"}}, {"lr", {"0.5"}}, {"beta1", {"0.8"}}, {"loss", {"mse"}},
              {"final_query_only", {"true"}}};
  ASSERT_TRUE(ApplyOverrides(o, &*spec).ok());
  EXPECT_EQ(spec->name, "renamed");
  EXPECT_EQ(spec->dataset.m, 12);
  EXPECT_EQ(spec->dataset.seq_len, 4);  // untouched
  EXPECT_TRUE(spec->dataset.final_query_only);
  ASSERT_EQ(spec->heads.size(), 1u);
  EXPECT_EQ(spec->heads[0].feature_map, FeatureMap::kSoftplus);
  EXPECT_EQ(spec->seeds, (std::vector<uint64_t>{7, 9}));
  EXPECT_EQ(spec->ranks, (std::vector<int>{1, 2, 4, 8}));  // untouched
  EXPECT_DOUBLE_EQ(spec->train.lr, 0.5);
  EXPECT_DOUBLE_EQ(spec->train.beta1, 0.8);
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
  o.fields = {{"schedule", {"cosine"}}, {"warmup_steps", {"200"}}};
  ASSERT_TRUE(ApplyOverrides(o, &spec).ok());
  EXPECT_EQ(spec.train.schedule, LrSchedule::kCosine);
  EXPECT_EQ(spec.train.warmup_steps, 200);
  o.fields = {{"schedule", {"linear"}}};
  absl::Status s = ApplyOverrides(o, &spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--schedule must be one of constant, cosine; got \"linear\"");
}

// Each field's flag takes what its row takes; a refused value names the
// flag and leaves the spec as it was.
TEST(OverridesTest, ABadValueNamesTheFlagAndWhatItTakes) {
  SweepSpec spec;
  const SweepSpec before = spec;
  auto refused = [&](FieldValues field) {
    SpecOverrides o;
    o.fields = {std::move(field)};
    absl::Status s = ApplyOverrides(o, &spec);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(SweepSpecToJson(spec, -1), SweepSpecToJson(before, -1));
    return std::string(s.message());
  };
  EXPECT_EQ(refused({"kind", {"pools"}}),
            "--dataset must be one of exhaustive, witness, pool; got \"pools\"");
  EXPECT_EQ(refused({"seq_len", {"x"}}), "--seq-len must be an integer in 1..64, got \"x\"");
  EXPECT_EQ(refused({"eval_every", {"0"}}), "--eval-every must be an integer in 1..10000000, got 0");
  EXPECT_EQ(refused({"bernoulli_p", {"2"}}), "--bernoulli-p must be a number in 0..1, got 2");
  EXPECT_EQ(refused({"beta1", {"0.5", "0.9"}}),
            "--beta1 takes one value, got 2; it is not a recipe axis (axes: lr, weight_decay, "
            "max_steps, batch_size, m, weight, num_queries, pool_size, train_size, test_size, "
            "schedule, warmup_steps, split, hard_share, test_pool_share)");
  EXPECT_EQ(refused({"lr", {"0.1", "fast"}}), "--lr must be a number, got \"fast\"");
  EXPECT_EQ(refused({"speed", {"1"}}),
            "--speed: \"speed\" is not a field of the dataset, training or pruning");
  EXPECT_EQ(FieldFlagOf("kind"), "--dataset");
  EXPECT_EQ(FieldFlagOf("early_stop_evals"), "--early-stop-evals");
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
  o.fields = {{"lr", {"0.001"}}, {"max_steps", {"100", "200", "400"}}};
  ASSERT_TRUE(ApplyOverrides(o, &*spec).ok());
  ASSERT_EQ(spec->axes.size(), 1u);
  EXPECT_EQ(spec->axes[0].name, "max_steps");
  EXPECT_EQ(spec->train.lr, 0.001);
  o.fields = {{"lr", {"0.1", "0.2"}}};
  ASSERT_TRUE(ApplyOverrides(o, &*spec).ok());
  ASSERT_EQ(spec->axes.size(), 2u);
  EXPECT_EQ(spec->axes[0].name, "lr");
  EXPECT_EQ(spec->axes[1].name, "max_steps");
  EXPECT_EQ(RecipeCount(*spec), 6);
  EXPECT_TRUE(ValidateSweepSpec(*spec).ok()) << ValidateSweepSpec(*spec);
  o.fields = {{"beta1", {"0.5", "0.9"}}};
  absl::Status bad = ApplyOverrides(o, &*spec);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), ::testing::StartsWith("--beta1 takes one value, got 2"));
}

}  // namespace
}  // namespace ranksweep::client
