#include "client/spec_file.h"

#include <string>

#include "common/spec/spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"

namespace ranksweep::client {
namespace {

constexpr char kYaml[] = R"(# a witness sweep
name: witness-m16
dataset:
  kind: witness
  m: 16
  seq_len: 4
  final_query_only: true
  data_seed: 18446744073709551615
  code_weight: 4
  max_overlap: 1
heads:
  - kind: kernel
    feature_map: elu1
    hidden: [32, 32]
  - kind: softmax
ranks: [1, 2, 4, 8]
seed_count: 3
train:
  lr: 3e-3
  max_steps: 500
  loss: ce
  schedule: cosine
  warmup_steps: 50
priority: -5
)";

constexpr char kJson[] = R"({
  "name": "witness-m16",
  "dataset": {"kind": "witness", "m": 16, "seq_len": 4, "final_query_only": true,
              "data_seed": 18446744073709551615, "code_weight": 4, "max_overlap": 1},
  "heads": [{"kind": "kernel", "feature_map": "elu1", "hidden": [32, 32]},
            {"kind": "softmax"}],
  "ranks": [1, 2, 4, 8],
  "seed_count": 3,
  "train": {"lr": 0.003, "max_steps": 500, "loss": "ce", "schedule": "cosine",
            "warmup_steps": 50},
  "priority": -5
})";

TEST(SpecFileTest, YamlAndJsonGiveTheSameSpec) {
  absl::StatusOr<SweepSpec> from_yaml = ParseSweepSpecText(kYaml, SpecFormat::kYaml, "s.yaml");
  absl::StatusOr<SweepSpec> from_json = ParseSweepSpecText(kJson, SpecFormat::kJson, "s.json");
  ASSERT_TRUE(from_yaml.ok()) << from_yaml.status();
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(SweepSpecToJson(*from_yaml), SweepSpecToJson(*from_json));
  EXPECT_EQ(from_yaml->name, "witness-m16");
  EXPECT_EQ(from_yaml->dataset.kind, DatasetKind::kWitness);
  EXPECT_EQ(from_yaml->dataset.data_seed, 18446744073709551615ull);
  ASSERT_EQ(from_yaml->heads.size(), 2u);
  EXPECT_EQ(from_yaml->heads[0].hidden, (std::vector<int>{32, 32}));
  EXPECT_EQ(from_yaml->heads[1].kind, HeadKind::kSoftmax);
  EXPECT_EQ(from_yaml->ranks, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(from_yaml->train.schedule, LrSchedule::kCosine);
  EXPECT_EQ(from_yaml->train.warmup_steps, 50);
  EXPECT_EQ(from_yaml->seed_count, 3);
  EXPECT_DOUBLE_EQ(from_yaml->train.lr, 3e-3);
  EXPECT_EQ(from_yaml->train.loss, LossKind::kCrossEntropy);
  EXPECT_EQ(from_yaml->priority, -5);
}

TEST(SpecFileTest, YamlSyntaxErrorReportsLineAndColumn) {
  absl::StatusOr<SweepSpec> spec =
      ParseSweepSpecText("name: a\n  bad: 1\n", SpecFormat::kYaml, "s.yaml");
  EXPECT_EQ(spec.status(), absl::InvalidArgumentError("s.yaml:2:6: illegal map value"));

  spec = ParseSweepSpecText("name: a\nranks: [1, 2\n", SpecFormat::kYaml, "s.yaml");
  EXPECT_EQ(spec.status(), absl::InvalidArgumentError("s.yaml:3:1: end of sequence flow not found"));
}

TEST(SpecFileTest, InvalidUtf8InYamlIsRejectedWithItsPlace) {
  absl::StatusOr<SweepSpec> r =
      ParseSweepSpecText("name: a\ndat\xd0set: 1\n", SpecFormat::kYaml, "s.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "s.yaml:2:4: the file is not valid UTF-8");
}

TEST(SpecFileTest, UnknownYamlKeyIsRejectedWithItsNameAndPlace) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpecText(
      "name: a\ndataset:\n  m: 3\n  mm: 4\n", SpecFormat::kYaml, "s.yaml");
  EXPECT_EQ(spec.status(), absl::InvalidArgumentError("s.yaml:4:3: unknown field \"dataset.mm\""));
}

TEST(SpecFileTest, WrongTypeInYamlPointsAtTheKey) {
  absl::StatusOr<SweepSpec> spec =
      ParseSweepSpecText("name: a\nheads:\n  - kind: kernel\n    num_heads: 'two'\n",
                         SpecFormat::kYaml, "s.yaml");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()),
              ::testing::StartsWith("s.yaml:4:5: heads[0].num_heads must be"));
}

TEST(SpecFileTest, UnknownJsonKeyIsRejectedWithItsName) {
  absl::StatusOr<SweepSpec> spec =
      ParseSweepSpecText(R"({"name": "a", "rank": [1]})", SpecFormat::kJson, "s.json");
  EXPECT_EQ(spec.status(), absl::InvalidArgumentError("s.json: unknown field \"rank\""));
}

TEST(SpecFileTest, JsonSyntaxErrorReportsLineAndColumn) {
  absl::StatusOr<SweepSpec> spec =
      ParseSweepSpecText("{\n  \"name\": \"a\",\n  \"ranks\": [1,\n}", SpecFormat::kJson, "s.json");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()),
              ::testing::StartsWith("s.json: JSON syntax error at line 4, column 1"));
}

TEST(SpecFileTest, YamlRejectsDuplicateKeysAndNonFiniteNumbers) {
  EXPECT_EQ(ParseSweepSpecText("name: a\nname: b\n", SpecFormat::kYaml, "s.yaml").status(),
            absl::InvalidArgumentError("s.yaml:2:1: duplicate key \"name\""));
  EXPECT_EQ(ParseSweepSpecText("train:\n  lr: .inf\n", SpecFormat::kYaml, "s.yaml").status(),
            absl::InvalidArgumentError("s.yaml:2:7: non-finite number not allowed: .inf"));
  EXPECT_EQ(ParseSweepSpecText("- a\n", SpecFormat::kYaml, "s.yaml").status(),
            absl::InvalidArgumentError("s.yaml:1:1: a sweep spec must be a mapping of fields"));
}

// An alias inside the node it names refers to itself: endless nesting (the
// fuzzer's stack overflow); aliases that repeat a list grow it
// exponentially. Both are refused with their place, not followed.
TEST(SpecFileTest, YamlAliasesThatNestOrRepeatWithoutEndAreRefused) {
  const absl::Status self =
      ParseSweepSpecText("a: &x\n  b: *x\n", SpecFormat::kYaml, "s.yaml").status();
  EXPECT_EQ(self.code(), absl::StatusCode::kInvalidArgument) << self;
  EXPECT_THAT(std::string(self.message()),
              ::testing::AllOf(::testing::StartsWith("s.yaml:"),
                               ::testing::HasSubstr("nested more than 32 levels deep (an alias "
                                                    "that refers to a node it is in?)")));
  std::string laughs = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    laughs += absl::StrCat(std::string(1, c), ": &", std::string(1, c), " [");
    for (int i = 0; i < 10; ++i) absl::StrAppend(&laughs, i ? ", " : "", "*", std::string(1, c - 1));
    laughs += "]\n";
  }
  const absl::Status many = ParseSweepSpecText(laughs, SpecFormat::kYaml, "s.yaml").status();
  EXPECT_THAT(std::string(many.message()),
              ::testing::HasSubstr("more than 100000 values (aliases that repeat a node many "
                                   "times?)"));
}

TEST(SpecFileTest, YamlQuotedScalarsStayStrings) {
  absl::StatusOr<std::string> json = YamlToJson("name: '123'\nx: 123\ny: true\nz: ~\n");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, "{\n  \"name\": \"123\",\n  \"x\": 123,\n  \"y\": true,\n  \"z\": null\n}");
}

TEST(SpecFileTest, GuessFormat) {
  EXPECT_EQ(GuessSpecFormat("a.JSON", "name: x"), SpecFormat::kJson);
  EXPECT_EQ(GuessSpecFormat("a.yml", "{}"), SpecFormat::kYaml);
  EXPECT_EQ(GuessSpecFormat("-", "  {\"name\": 1}"), SpecFormat::kJson);
  EXPECT_EQ(GuessSpecFormat("-", "name: x"), SpecFormat::kYaml);
}

TEST(SpecFileTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadSweepSpecFile("/nonexistent/spec.yaml").status(),
            absl::NotFoundError("cannot open spec file /nonexistent/spec.yaml"));
}

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
TEST(SweepCostTest, AWitnessWithoutNumQueriesAtM24IsReportedAndWarnedAbout) {
  SweepSpec spec;
  spec.name = "w";
  spec.dataset.kind = DatasetKind::kWitness;
  spec.dataset.m = 24;
  spec.dataset.seq_len = 3;
  spec.dataset.code_weight = 8;
  spec.dataset.max_overlap = 4;
  HeadSpec softmax;
  softmax.kind = HeadKind::kSoftmax;
  spec.heads = {HeadSpec(), softmax};
  spec.ranks = {1, 64};
  spec.seed_count = 3;
  const SweepCost cost = EstimateSweepCost(spec);
  // C(24, 5) / C(8, 5) = 759 codewords, 759 * (2 * 759 - 1) sequences.
  EXPECT_EQ(cost.train_sequences, 759 * 1517);
  EXPECT_EQ(cost.test_sequences, 0);
  EXPECT_GT(cost.task_memory_bytes, kLargeTaskMemoryBytes);
  const std::vector<std::string> lines = SweepCostLines(cost);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "dataset: 1,151,403 train sequences, no test split");
  EXPECT_THAT(lines[1], ::testing::StartsWith("memory: up to "));
  const std::vector<std::string> warnings = SweepCostWarnings(spec, cost);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0],
            "the dataset has 1,151,403 sequences, more than 200,000: every step and evaluation "
            "goes over it; --num-queries (or --m) makes it smaller");

  spec.dataset.num_queries = 12;  // the demo's family
  const SweepCost small = EstimateSweepCost(spec);
  EXPECT_EQ(small.train_sequences, 12 * 23);
  EXPECT_LT(small.task_memory_bytes, kLargeTaskMemoryBytes);
  EXPECT_TRUE(SweepCostWarnings(spec, small).empty());
}

// The demo sweeps every power of two from 1 to 64 (it swept 1 and 64 only,
// so its table showed no transition), softmax, three seeds, a small witness
// family: within the size a first run on a laptop should see.
TEST(DemoSpecTest, TheDemoSweepsEveryPowerOfTwoToRank64WithSoftmaxAndThreeSeeds) {
  absl::StatusOr<SweepSpec> demo =
      LoadSweepSpecFile(std::string(RANKSWEEP_SOURCE_DIR) + "/examples/demo.yaml");
  ASSERT_TRUE(demo.ok()) << demo.status();
  EXPECT_TRUE(ValidateSweepSpec(*demo).ok());
  EXPECT_EQ(demo->ranks, (std::vector<int>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(SweepSeeds(*demo).size(), 3u);
  ASSERT_EQ(demo->heads.size(), 2u);
  EXPECT_EQ(demo->heads[0].kind, HeadKind::kKernel);
  EXPECT_EQ(demo->heads[1].kind, HeadKind::kSoftmax);
  const SweepCost cost = EstimateSweepCost(*demo);
  EXPECT_EQ(cost.train_sequences, 12 * 23);  // 12 queries: n(2n-1)
  EXPECT_TRUE(SweepCostWarnings(*demo, cost).empty());
}

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

TEST(SpecFileTest, CrossEntropyWithTrainedKernelHeadsIsWarnedAbout) {
  SweepSpec spec;
  spec.name = "ce";
  HeadSpec kernel;  // kernel/elu1
  HeadSpec softmax;
  softmax.kind = HeadKind::kSoftmax;
  HeadSpec rank1;
  rank1.construction = Construction::kRank1;
  HeadSpec multihead;
  multihead.kind = HeadKind::kMultiheadKernel;
  multihead.num_heads = 4;
  spec.heads = {kernel, softmax, rank1, multihead};

  spec.train.loss = LossKind::kMse;
  EXPECT_TRUE(SpecWarnings(spec).empty());

  spec.train.loss = LossKind::kCrossEntropy;
  std::vector<std::string> warnings = SpecWarnings(spec);
  ASSERT_EQ(warnings.size(), 1u);
  // Names the field and the trained kernel heads only (softmax has no bound;
  // constructions always use the scalar readout).
  EXPECT_THAT(warnings[0], ::testing::StartsWith("train.loss ce: kernel/elu1, " +
                                                  HeadLabel(multihead) + " will be judged"));
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("Use loss mse"));

  spec.heads = {softmax, rank1};
  EXPECT_TRUE(SpecWarnings(spec).empty());
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
