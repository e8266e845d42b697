#include "common/spec/spec_file.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec/spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep {
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

}  // namespace
}  // namespace ranksweep
