#include "common/spec/spec.h"

#include <cmath>

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
  s.train.eps = 0;
  ExpectInvalid(ValidateSweepSpec(s), "train.eps must be in (0, 1], got 0");
  s.train.eps = 1.5;
  ExpectInvalid(ValidateSweepSpec(s), "train.eps must be in (0, 1], got 1.5");
  s.train.eps = 1;
  EXPECT_TRUE(ValidateSweepSpec(s).ok()) << ValidateSweepSpec(s);

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

TEST(SpecTest, ScheduleFieldsAreValidatedWithFieldAndRange) {
  SweepSpec s = GoodSweep();
  s.train.max_steps = 100;
  s.train.warmup_steps = 100;
  s.train.schedule = LrSchedule::kCosine;
  EXPECT_TRUE(ValidateSweepSpec(s).ok());
  s.train.warmup_steps = 101;
  EXPECT_EQ(ValidateSweepSpec(s).message(),
            "train.warmup_steps must be in 0..train.max_steps (100), got 101");
  s.train.warmup_steps = -1;
  EXPECT_EQ(ValidateSweepSpec(s).message(),
            "train.warmup_steps must be in 0..train.max_steps (100), got -1");
  s.train.warmup_steps = 0;
  s.train.schedule = static_cast<LrSchedule>(2);
  ExpectInvalid(ValidateSweepSpec(s), "train.schedule must be one of constant, cosine; got value 2");
}

// The learning rate at given steps, for each schedule (lr 0.01, T = 100).
TEST(SpecTest, LearningRateAtEachScheduleAndStep) {
  TrainSpec t;
  t.lr = 0.01;
  t.max_steps = 100;
  // Constant without warm-up: the spec's lr itself on every step, so the
  // optimizer's arithmetic is the same as before schedules existed.
  for (int64_t step = 0; step <= 101; ++step) EXPECT_EQ(LearningRateAt(t, step), 0.01) << step;

  t.warmup_steps = 10;  // constant with warm-up
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 1), 0.001);
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 5), 0.005);
  EXPECT_EQ(LearningRateAt(t, 10), 0.01);
  EXPECT_EQ(LearningRateAt(t, 11), 0.01);
  EXPECT_EQ(LearningRateAt(t, 100), 0.01);

  t.schedule = LrSchedule::kCosine;  // cosine after 10 warm-up steps
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 5), 0.005);
  EXPECT_EQ(LearningRateAt(t, 10), 0.01);
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 40), 0.0075);  // progress 1/3: (1 + 1/2) / 2
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 55), 0.005);   // progress 1/2
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 70), 0.0025);  // progress 2/3: (1 - 1/2) / 2
  EXPECT_EQ(LearningRateAt(t, 100), 0.0);
  EXPECT_EQ(LearningRateAt(t, 150), 0.0);  // beyond T: as T

  t.warmup_steps = 0;  // cosine from the first step
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 1), 0.01 * 0.5 * (1 + std::cos(M_PI / 100)));
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 50), 0.005);
  EXPECT_EQ(LearningRateAt(t, 100), 0.0);

  t.warmup_steps = 100;  // warm-up over every step: the cosine never starts
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 50), 0.005);
  EXPECT_EQ(LearningRateAt(t, 100), 0.01);
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

TEST(SpecJsonTest, ScheduleRoundTripsAndIsLeftOutWhenDefault) {
  SweepSpec s = GoodSweep();
  // Without a schedule the JSON has neither field: specs stored before the
  // fields existed dump, and so hash (the result cache's task key), as then.
  EXPECT_THAT(SweepSpecToJson(s), ::testing::Not(HasSubstr("schedule")));
  EXPECT_THAT(SweepSpecToJson(s), ::testing::Not(HasSubstr("warmup_steps")));
  s.train.schedule = LrSchedule::kCosine;
  s.train.warmup_steps = 150;
  const std::string json = SweepSpecToJson(s);
  EXPECT_THAT(json, HasSubstr("\"schedule\":\"cosine\""));
  EXPECT_THAT(json, HasSubstr("\"warmup_steps\":150"));
  auto back = SweepSpecFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->train.schedule, LrSchedule::kCosine);
  EXPECT_EQ(back->train.warmup_steps, 150);
  EXPECT_EQ(SweepSpecToJson(*back), json);
  auto bad = SweepSpecFromJson(R"({"name": "x", "train": {"schedule": "step"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("must be one of constant, cosine"));
}

TEST(SpecJsonTest, PruneIsANameOrAnObjectAndLeftOutWhenNone) {
  SweepSpec s = GoodSweep();
  EXPECT_THAT(SweepSpecToJson(s), ::testing::Not(HasSubstr("prune")));
  auto named = SweepSpecFromJson(R"({"name": "x", "prune": "halving"})");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->prune.rule, PruneRule::kHalving);
  EXPECT_EQ(named->prune.eta, 3);
  EXPECT_DOUBLE_EQ(named->prune.margin, 0.05);
  auto object = SweepSpecFromJson(
      R"({"name": "x", "prune": {"rule": "halving", "eta": 2, "min_steps": 300, "margin": 0.1}})");
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->prune.eta, 2);
  EXPECT_EQ(object->prune.min_steps, 300);
  auto back = SweepSpecFromJson(SweepSpecToJson(*object));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SweepSpecToJson(*back), SweepSpecToJson(*object));
  auto bad = SweepSpecFromJson(R"({"name": "x", "prune": "asha"})");
  EXPECT_THAT(bad.status().message(), HasSubstr("prune must be one of none, halving"));
  bad = SweepSpecFromJson(R"({"name": "x", "prune": {"rule": "halving", "rungs": 3}})");
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown field \"prune.rungs\""));
}

TEST(SpecTest, PruneValuesAreCheckedNamingTheFieldAndRange) {
  SweepSpec s = GoodSweep();
  s.prune.rule = PruneRule::kHalving;
  EXPECT_TRUE(ValidateSweepSpec(s).ok());
  s.prune.eta = 1;
  EXPECT_THAT(ValidateSweepSpec(s).message(), HasSubstr("prune.eta must be in 2..16, got 1"));
  s.prune.eta = 3;
  s.prune.min_steps = -1;
  EXPECT_THAT(ValidateSweepSpec(s).message(),
              HasSubstr("prune.min_steps must be in 0..1000000000, got -1"));
  s.prune.min_steps = 0;
  s.prune.margin = 1.5;
  EXPECT_THAT(ValidateSweepSpec(s).message(), HasSubstr("prune.margin must be in [0, 1], got 1.5"));
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

// ---------------------------------------------------------------- memory

TaskSpec TinyKernelTask() {
  TaskSpec t;
  t.dataset.kind = DatasetKind::kExhaustive;
  t.dataset.m = 1;
  t.dataset.seq_len = 2;
  t.rank = 1;
  t.seeds = {0};
  return t;
}

TEST(MemoryEstimateTest, TinyKernelTaskByHand) {
  // exhaustive m=1, N=2: 2^(1*2) = 4 train sequences, no test split.
  // kernel/elu1, rank 1, H=1, dv=m=1, K=1 (mse), full batch B=4.
  // P: query and key maps (m+1)*r = 2 each -> 4; value (m+1)*dv = 2;
  //    readout_u (m+1)*K*dv = 2; readout_b (m+1)*K = 2 -> P = 10.
  // A per token: each map 0 (no hidden) + map_out 1 + feature map 2Hr = 2
  //    -> 3, twice = 6; values/numerators/outputs 3Hdv = 3; den H = 1;
  //    readout 2KHdv = 2; loss and bias 4K = 4; input m = 1 -> 17.
  // A per sequence: N*17 + N*N*H = 34 + 4 = 38.
  // Eval chunk for one seed: 2^24 / (N*(2H max(r,m) + N*N + m)) = 2^24/14
  //    >= 4, so C = 4; max(2B, C) = 8.
  // per_seed = 4 * (8*10 + 38*8) = 4 * 384 = 1536 bytes.
  // fixed = 12 B * N * 4 sequences (host) + 4 B * N*(m+1) * (4 + 4)
  //       = 96 + 128 = 224 bytes.
  const MemoryEstimate e = EstimateTaskMemory(TinyKernelTask());
  EXPECT_EQ(e.fixed_bytes, 224);
  EXPECT_EQ(e.per_seed_bytes, 1536);
  EXPECT_EQ(EstimateTaskMemoryBytes(TinyKernelTask()), 1760);
  EXPECT_EQ(e.Total(3), 224 + 3 * 1536);
  EXPECT_EQ(e.SeedsThatFit(224 + 2 * 1536), 2);
  EXPECT_EQ(e.SeedsThatFit(224 + 2 * 1536 - 1), 1);
  EXPECT_EQ(e.SeedsThatFit(1759), 0);
  EXPECT_EQ(e.SeedsThatFit(100), 0);
}

TEST(MemoryEstimateTest, GrowsLinearlyInSeeds) {
  TaskSpec t = TinyKernelTask();
  t.dataset.m = 3;
  t.dataset.seq_len = 3;
  t.rank = 64;
  t.seeds = {0};
  const int64_t one = EstimateTaskMemoryBytes(t);
  t.seeds = {0, 1};
  const int64_t two = EstimateTaskMemoryBytes(t);
  const int64_t per_seed = two - one;
  ASSERT_GT(per_seed, 0);
  EXPECT_EQ(per_seed, EstimateTaskMemory(t).per_seed_bytes);
  for (uint64_t s : {2, 3, 7, 63}) {
    t.seeds.clear();
    for (uint64_t i = 0; i <= s; ++i) t.seeds.push_back(i);
    EXPECT_EQ(EstimateTaskMemoryBytes(t), one + static_cast<int64_t>(s) * per_seed) << s;
  }
}

TEST(MemoryEstimateTest, MonotoneInRankForEveryKernelHead) {
  for (HeadKind kind : {HeadKind::kKernel, HeadKind::kSignedKernel, HeadKind::kMultiheadKernel}) {
    for (FeatureMap map : {FeatureMap::kEluPlusOne, FeatureMap::kFavorPlus}) {
      TaskSpec t = TinyKernelTask();
      t.dataset.m = 4;
      t.dataset.seq_len = 4;
      t.head.kind = kind;
      t.head.feature_map = map;
      t.head.num_heads = 2;
      t.head.hidden = {32};
      int64_t previous = 0;
      for (int rank = 1; rank <= SpecLimits::kMaxRank; rank *= 2) {
        t.rank = rank;
        const int64_t bytes = EstimateTaskMemoryBytes(t);
        EXPECT_GT(bytes, previous) << Name(kind) << " " << Name(map) << " rank " << rank;
        previous = bytes;
      }
    }
  }
}

TEST(MemoryEstimateTest, SoftmaxIgnoresRankAndLargeSpecsSaturateWithoutOverflow) {
  TaskSpec t = TinyKernelTask();
  t.head.kind = HeadKind::kSoftmax;
  t.rank = 1;
  const int64_t a = EstimateTaskMemoryBytes(t);
  t.rank = 4096;
  EXPECT_EQ(EstimateTaskMemoryBytes(t), a);

  TaskSpec big = TinyKernelTask();
  big.dataset.kind = DatasetKind::kPool;
  big.dataset.m = 64;
  big.dataset.seq_len = 64;
  big.dataset.pool_size = SpecLimits::kMaxDatasetSequences;
  big.dataset.train_size = SpecLimits::kMaxDatasetSequences;
  big.head.kind = HeadKind::kMultiheadKernel;
  big.head.num_heads = 64;
  big.head.hidden = {65536, 65536, 65536, 65536};
  big.rank = SpecLimits::kMaxRank;
  big.seeds.assign(1024, 0);
  EXPECT_EQ(EstimateTaskMemoryBytes(big), INT64_MAX);
  EXPECT_EQ(EstimateTaskMemory(big).SeedsThatFit(int64_t{1} << 40), 0);
}

TEST(MemoryEstimateTest, DatasetSequences) {
  DatasetSpec d;
  d.kind = DatasetKind::kExhaustive;
  d.m = 3;
  d.seq_len = 6;
  EXPECT_EQ(EstimateDatasetSequences(d), 262144);  // 2^18
  d.kind = DatasetKind::kWitness;
  d.m = 24;
  d.seq_len = 3;
  d.code_weight = 8;
  d.max_overlap = 4;
  d.num_queries = 12;
  EXPECT_EQ(EstimateDatasetSequences(d), 12 * 23);
  // All codewords: the packing bound C(24,5)/C(8,5) = 42504/56 = 759, the
  // size of the (24, 8, 4) code (the octads of S(5,8,24)).
  d.num_queries = 0;
  EXPECT_EQ(EstimateDatasetSequences(d), 759 * 1517);
  d.kind = DatasetKind::kPool;
  d.pool_size = 1000;
  d.train_size = 300;
  d.test_size = 70;
  const DatasetSize size = EstimateDatasetSize(d);
  EXPECT_EQ(size.train, 300);
  EXPECT_EQ(size.test, 70);
  EXPECT_EQ(EstimateDatasetSequences(d), 370);
}

TEST(MemoryEstimateTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{64} << 30), "64 GiB");
  EXPECT_EQ(FormatBytes(int64_t{210} << 30), "210 GiB");
  EXPECT_EQ(FormatBytes((int64_t{1} << 30) * 5 / 4), "1.25 GiB");
}

// ---------------------------------------------------------------- witness code budget

SweepSpec WitnessSweep(int m, int code_weight, int max_overlap, int num_queries) {
  SweepSpec s = GoodSweep();
  s.dataset.kind = DatasetKind::kWitness;
  s.dataset.m = m;
  s.dataset.code_weight = code_weight;
  s.dataset.max_overlap = max_overlap;
  s.dataset.num_queries = num_queries;
  return s;
}

TEST(WitnessBudgetTest, MoreQueriesThanAFamilyMayHaveAreRefusedBeforeAnySearch) {
  EXPECT_EQ(ValidateSweepSpec(WitnessSweep(24, 8, 4, 2237)).message(),
            "dataset.num_queries must be in 0..2236, got 2237");
}

TEST(WitnessBudgetTest, ASearchThatWouldRunForSecondsStopsAtItsStepBudget) {
  // m = 40, w = 8, t = 3 keeps a word every million steps or so: in 1e8 steps
  // the greedy scan finds 95 words (the fuzzer found the unbounded search).
  EXPECT_EQ(ValidateSweepSpec(WitnessSweep(40, 8, 3, 2236)).message(),
            "dataset.num_queries must be in 2..95 (the words the greedy code for m=40, "
            "code_weight=8, max_overlap=3 finds within 100000000 steps), got 2236");
  // The words it found are the code's first 95, whatever was asked before.
  EXPECT_TRUE(ValidateSweepSpec(WitnessSweep(40, 8, 3, 95)).ok());
  EXPECT_EQ(ValidateSweepSpec(WitnessSweep(40, 8, 3, 96)).message(),
            "dataset.num_queries must be in 2..95 (the words the greedy code for m=40, "
            "code_weight=8, max_overlap=3 finds within 100000000 steps), got 96");
  // The full (24, 8, 4) code (759 octads) takes 31,584,295 steps.
  EXPECT_TRUE(ValidateSweepSpec(WitnessSweep(24, 8, 4, 0)).ok());
}

TEST(WitnessBudgetTest, ASweepsRecipesShareOneBudgetAndEachDatasetIsChargedOnce) {
  // Every codeword for m = 24 and 25 takes 31,584,295 + 62,017,486 steps.
  SweepSpec s = WitnessSweep(24, 8, 4, 0);
  s.axes = {{"lr", {0.01, 0.003, 0.001, 0.0003}}, {"m", {24, 25}}};
  EXPECT_TRUE(ValidateSweepSpec(s).ok()) << ValidateSweepSpec(s);
  // m = 23 adds 15,622,518 first, and m = 25 no longer fits.
  s.axes = {{"m", {23, 24, 25}}};
  EXPECT_EQ(ValidateSweepSpec(s).message(),
            "recipe 2 (m=25): dataset.num_queries: the greedy codes of one sweep may take "
            "100000000 steps together; this one (m=25, code_weight=8, max_overlap=4, "
            "num_queries=0) takes 62017486 with 52793187 left: use fewer queries or fewer "
            "values of m");
}

// ---------------------------------------------------------------- axes

SweepSpec AxesSweep() {
  SweepSpec s = GoodSweep();
  s.heads.push_back(HeadSpec{});  // 2 ranked heads + softmax
  s.heads[2].feature_map = FeatureMap::kReluEps;
  s.ranks = {1, 2, 4};
  s.seed_count = 2;
  s.axes = {{"lr", {0.01, 0.003, 0.001}}, {"max_steps", {200, 400}}};
  return s;
}

TEST(AxesTest, RecipesAreTheCrossProductFirstAxisSlowest) {
  const SweepSpec s = AxesSweep();
  ASSERT_TRUE(ValidateSweepSpec(s).ok()) << ValidateSweepSpec(s);
  EXPECT_EQ(RecipeCount(s), 6);
  EXPECT_EQ(RecipeLabel(s, 0), "lr=0.01 max_steps=200");
  EXPECT_EQ(RecipeLabel(s, 1), "lr=0.01 max_steps=400");
  EXPECT_EQ(RecipeLabel(s, 3), "lr=0.003 max_steps=400");
  EXPECT_EQ(RecipeLabel(s, 5), "lr=0.001 max_steps=400");
  EXPECT_EQ(RecipeValues(s, 4), (std::vector<double>{0.001, 200}));
  double v = 0;
  EXPECT_TRUE(RecipeAxisValue(s, 2, "lr", &v));
  EXPECT_EQ(v, 0.003);
  EXPECT_FALSE(RecipeAxisValue(s, 2, "batch_size", &v));
  EXPECT_EQ(RecipeLabel(GoodSweep(), 0), "");
  EXPECT_EQ(RecipeCount(GoodSweep()), 1);
}

TEST(AxesTest, KeepFirstRecipeWritesEachAxisFirstValueAndDropsTheAxes) {
  SweepSpec s = AxesSweep();
  s.axes.push_back({"schedule", {1, 0}});  // cosine first
  ASSERT_EQ(GridCellCount(s), 14 * 12);
  s.train.lr = 0.5;                          // replaced by the axis' first value
  ASSERT_TRUE(ValidateSweepSpec(s).ok()) << ValidateSweepSpec(s);
  SweepSpec want = s;
  want.axes.clear();
  want.train.lr = 0.01;
  want.train.max_steps = 200;
  want.train.schedule = LrSchedule::kCosine;

  EXPECT_EQ(KeepFirstRecipe(&s),
            "lr 0.01 (of 0.01,0.003,0.001); max_steps 200 (of 200,400); "
            "schedule cosine (of cosine,constant)");
  EXPECT_TRUE(s.axes.empty());
  EXPECT_EQ(RecipeCount(s), 1);
  EXPECT_EQ(s.train.lr, 0.01);
  EXPECT_EQ(s.train.max_steps, 200);
  EXPECT_EQ(s.train.schedule, LrSchedule::kCosine);
  // Every other field as it was: the whole spec equals the expected one.
  EXPECT_EQ(SweepSpecToJson(s, -1), SweepSpecToJson(want, -1));
  // (2 ranked heads x 3 ranks + softmax) x 2 seeds, of the 14 x 12 recipes.
  EXPECT_EQ(GridCellCount(s), 14);
  EXPECT_TRUE(ValidateSweepSpec(s).ok()) << ValidateSweepSpec(s);

  // A dataset axis is the problem's size, not the recipe: it stays (the
  // law preset's m keeps every value), while the training axes go.
  SweepSpec pool = AxesSweep();
  pool.dataset.kind = DatasetKind::kPool;
  pool.axes = {{"lr", {0.01, 0.001}}, {"train_size", {300, 600}}};
  EXPECT_EQ(KeepFirstRecipe(&pool), "lr 0.01 (of 0.01,0.001)");
  ASSERT_EQ(pool.axes.size(), 1u);
  EXPECT_EQ(pool.axes[0].name, "train_size");
  EXPECT_EQ(RecipeCount(pool), 2);

  // Without axes: nothing to say, nothing changed.
  SweepSpec plain = GoodSweep();
  const std::string before = SweepSpecToJson(plain, -1);
  EXPECT_EQ(KeepFirstRecipe(&plain), "");
  EXPECT_EQ(SweepSpecToJson(plain, -1), before);
}

TEST(AxesTest, TaskSpecOfARecipeCarriesItsValues) {
  SweepSpec s = AxesSweep();
  s.train.lr = 0.5;  // replaced by the axis
  const TaskSpec t = MakeTaskSpec(s, 0, 4, 3, {0, 1});
  EXPECT_EQ(t.train.lr, 0.003);
  EXPECT_EQ(t.train.max_steps, 400);
  EXPECT_EQ(t.rank, 4);
  EXPECT_EQ(t.seeds, (std::vector<uint64_t>{0, 1}));
  // Without a recipe index: recipe 0.
  EXPECT_EQ(MakeTaskSpec(s, 0, 4, {0}).train.lr, 0.01);
  EXPECT_EQ(MakeTaskSpec(s, 0, 4, {0}).train.max_steps, 200);
}

TEST(AxesTest, CellCountCrossesRecipes) {
  // 2 ranked heads x 3 ranks + softmax, x 2 seeds x 3 lr x 2 max_steps.
  SweepSpec s = AxesSweep();
  s.seed_count = 101;  // 7 x 6 x 101 = 4242 cells
  EXPECT_TRUE(ValidateSweepSpec(s).ok()) << ValidateSweepSpec(s);
  s.axes[0].values.clear();
  for (int i = 1; i <= 64; ++i) s.axes[0].values.push_back(i * 1e-3);
  s.seed_count = 111;  // 7 x 128 x 111 = 99456
  EXPECT_TRUE(ValidateSweepSpec(s).ok()) << ValidateSweepSpec(s);
  s.seed_count = 112;
  ExpectInvalid(ValidateSweepSpec(s),
                "total cells (heads x ranks x seeds x recipes) must be in 1..100000, got 100352");
}

TEST(AxesTest, BadValuesNameTheAxisTheIndexAndTheRange) {
  SweepSpec s = AxesSweep();
  s.axes[0].values = {0.01, 20};
  ExpectInvalid(ValidateSweepSpec(s), "axes[0] (lr) values[1]: train.lr must be in (0, 10], got 20");
  s = AxesSweep();
  s.axes[1].values = {200, -5};
  ExpectInvalid(ValidateSweepSpec(s),
                "axes[1] (max_steps) values[1]: train.max_steps must be in 0..10000000, got -5");
  s.axes[1].values = {200, 2.5};
  ExpectInvalid(ValidateSweepSpec(s), "axes[1] (max_steps) values[1] must be an integer, got 2.5");
  s.axes[1].values = {200, 200};
  ExpectInvalid(ValidateSweepSpec(s), "axes[1] (max_steps) values[1]: 200 repeats values[0]");
  s.axes[1].values = {};
  ExpectInvalid(ValidateSweepSpec(s), "axes[1] (max_steps) values count must be in 1..64, got 0");
  s = AxesSweep();
  s.axes.push_back({"beta1", {0.5}});
  ExpectInvalid(ValidateSweepSpec(s), "axes[2]: \"beta1\" is not an axis; axes: lr, weight_decay");
  s = AxesSweep();
  std::swap(s.axes[0], s.axes[1]);
  ExpectInvalid(ValidateSweepSpec(s), "axes[1] (lr): axes must be listed once each, in the order lr");
  s = AxesSweep();
  s.axes = {{"pool_size", {10, 20}}};
  ExpectInvalid(ValidateSweepSpec(s),
                "axes[0] (pool_size): dataset.pool_size needs dataset.kind \"pool\", got "
                "\"exhaustive\"");
}

TEST(AxesTest, DatasetAxesAreCheckedPerRecipe) {
  SweepSpec s;
  s.name = "pool";
  s.dataset.kind = DatasetKind::kPool;
  s.dataset.m = 8;
  s.dataset.weight = 3;
  s.dataset.pool_size = 0;  // every vector: C(8,3) = 56, C(4,3) = 4, ...
  s.dataset.train_size = 0;  // every value comes from the axis
  s.dataset.test_size = 10;
  s.heads = {HeadSpec{}};
  s.ranks = {2};
  s.seed_count = 1;
  s.axes = {{"m", {8, 4}}, {"weight", {3, 5}}, {"train_size", {20, 30}}};
  // m = 4 with weight 5 is recipe 6 (m=4 weight=5 train_size=20).
  ExpectInvalid(ValidateSweepSpec(s),
                "recipe 6 (m=4 weight=5 train_size=20): dataset.weight must be in 0..4, got 5");
  s.axes[1].values = {3, 2};
  EXPECT_TRUE(ValidateSweepSpec(s).ok()) << ValidateSweepSpec(s);
  // A pool larger than some m's vectors is refused at submit, as the
  // worker would refuse it, naming the axis value.
  s.dataset.pool_size = 40;
  ExpectInvalid(ValidateSweepSpec(s),
                "axes[0] (m) values[1]: dataset.pool_size must be 0 (every vector) or in 2..4 "
                "(C(4,3) distinct vectors), got 40");
  s.dataset.pool_size = 0;
  EXPECT_EQ(MakeTaskSpec(s, 0, 2, 7, {0}).dataset.train_size, 30);
  EXPECT_EQ(MakeTaskSpec(s, 0, 2, 7, {0}).dataset.m, 4);
}

TEST(AxesTest, ParseAndFormatValues) {
  EXPECT_EQ(*ParseAxisValue("lr", "0.003", "--lr"), 0.003);
  EXPECT_EQ(*ParseAxisValue("max_steps", "4000", "--max-steps"), 4000);
  ExpectInvalid(ParseAxisValue("max_steps", "4e3", "--max-steps").status(),
                "--max-steps must be an integer, got \"4e3\"");
  ExpectInvalid(ParseAxisValue("lr", "fast", "--lr").status(), "--lr must be a number, got \"fast\"");
  ExpectInvalid(ParseAxisValue("seq_len", "3", "--x").status(), "\"seq_len\" is not an axis");
  EXPECT_EQ(FormatAxisValue("lr", 0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatAxisValue("lr", 1e-3), "0.001");
  EXPECT_EQ(FormatAxisValue("max_steps", 4000), "4000");
  EXPECT_TRUE(IsAxisName("num_queries"));
  EXPECT_FALSE(IsAxisName("seq_len"));
}

TEST(AxesJsonTest, AListWhereAValueStoodIsAnAxis) {
  auto s = SweepSpecFromJson(R"({"name": "a", "heads": [{"kind": "kernel"}], "ranks": [1],
      "seed_count": 1, "train": {"max_steps": [100, 200], "lr": [0.01, 0.001]},
      "dataset": {"kind": "witness", "m": 8, "code_weight": 3, "max_overlap": 1,
                  "num_queries": [5, 6]}})");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->axes.size(), 3u);  // in AxisNames() order, whatever the document's
  EXPECT_EQ(s->axes[0].name, "lr");
  EXPECT_EQ(s->axes[0].values, (std::vector<double>{0.01, 0.001}));
  EXPECT_EQ(s->axes[1].name, "max_steps");
  EXPECT_EQ(s->axes[2].name, "num_queries");
  EXPECT_EQ(s->axes[2].values, (std::vector<double>{5, 6}));
  EXPECT_TRUE(ValidateSweepSpec(*s).ok()) << ValidateSweepSpec(*s);
  const std::string json = SweepSpecToJson(*s);
  EXPECT_THAT(json, HasSubstr("\"max_steps\":[100,200]"));
  EXPECT_THAT(json, HasSubstr("\"num_queries\":[5,6]"));
  auto back = SweepSpecFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SweepSpecToJson(*back), json);
  for (int k = 0; k < 8; ++k) EXPECT_EQ(RecipeLabel(*back, k), RecipeLabel(*s, k));

  ExpectInvalid(SweepSpecFromJson(R"({"train": {"lr": []}})").status(),
                "train.lr must be a number or a non-empty list of numbers, got []");
  ExpectInvalid(SweepSpecFromJson(R"({"train": {"lr": [0.1, "x"]}})").status(),
                "train.lr[1] must be a number, got \"x\"");
  // Fields that are not axes still take one value only.
  ExpectInvalid(SweepSpecFromJson(R"({"train": {"beta1": [0.5, 0.9]}})").status(),
                "train.beta1 must be a number");
  // A task spec has no axes.
  ExpectInvalid(TaskSpecFromJson(R"({"train": {"lr": [0.1]}})").status(), "train.lr must be a number");
}

// The schedule is a named axis: its values are written and read by name,
// and warm-up is an integer axis; both cross with the rest like any other.
TEST(AxesJsonTest, ScheduleAndWarmupAreAxes) {
  auto s = SweepSpecFromJson(R"({"name": "a", "heads": [{"kind": "kernel"}], "ranks": [1],
      "seed_count": 1, "train": {"max_steps": 400, "lr": [0.01, 0.001],
                                 "schedule": ["constant", "cosine"], "warmup_steps": [0, 50]},
      "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3}})");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->axes.size(), 3u);
  EXPECT_EQ(s->axes[1].name, "schedule");
  EXPECT_EQ(s->axes[1].values, (std::vector<double>{0, 1}));
  EXPECT_EQ(s->axes[2].name, "warmup_steps");
  EXPECT_TRUE(ValidateSweepSpec(*s).ok()) << ValidateSweepSpec(*s);
  EXPECT_EQ(RecipeCount(*s), 8);
  EXPECT_EQ(RecipeLabel(*s, 3), "lr=0.01 schedule=cosine warmup_steps=50");
  const TaskSpec t = MakeTaskSpec(*s, 0, 1, 3, {0});
  EXPECT_EQ(t.train.schedule, LrSchedule::kCosine);
  EXPECT_EQ(t.train.warmup_steps, 50);
  EXPECT_EQ(t.train.lr, 0.01);
  const std::string json = SweepSpecToJson(*s);
  EXPECT_THAT(json, HasSubstr("\"schedule\":[\"constant\",\"cosine\"]"));
  EXPECT_THAT(json, HasSubstr("\"warmup_steps\":[0,50]"));
  auto back = SweepSpecFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SweepSpecToJson(*back), json);

  EXPECT_EQ(*ParseAxisValue("schedule", "cosine", "--schedule"), 1);
  EXPECT_EQ(FormatAxisValue("schedule", 0), "constant");
  ExpectInvalid(ParseAxisValue("schedule", "linear", "--schedule").status(),
                "--schedule must be one of constant, cosine; got \"linear\"");
  ExpectInvalid(SweepSpecFromJson(R"({"train": {"schedule": ["cosine", "step"]}})").status(),
                "train.schedule[1] must be one of constant, cosine; got \"step\"");
  // A warm-up longer than some recipe's run names that recipe.
  s->axes[2].values = {0, 500};
  ExpectInvalid(ValidateSweepSpec(*s), "warmup_steps");
}

// split is a named dataset axis, hard_share and test_pool_share are real
// ones; split is written to JSON only when it is not the default, so a pool
// spec from before the field dumps (and keys its cache) as it did.
TEST(AxesJsonTest, SplitHardShareAndTestPoolShareAreAxes) {
  auto s = SweepSpecFromJson(R"({"name": "a", "heads": [{"kind": "kernel"}], "ranks": [1],
      "seed_count": 1, "dataset": {"kind": "pool", "m": 6, "weight": 2, "pool_size": 0,
      "train_size": 100, "test_size": 50, "split": ["tokens", "sequences"],
      "hard_share": [0, 0.5], "test_pool_share": [0.5, 0.25]}})");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->axes.size(), 3u);
  EXPECT_EQ(s->axes[0].name, "split");
  EXPECT_EQ(s->axes[0].values, (std::vector<double>{0, 1}));
  EXPECT_EQ(s->axes[1].name, "hard_share");
  EXPECT_EQ(s->axes[2].name, "test_pool_share");
  EXPECT_TRUE(ValidateSweepSpec(*s).ok()) << ValidateSweepSpec(*s);
  EXPECT_EQ(RecipeCount(*s), 8);
  EXPECT_EQ(RecipeLabel(*s, 5), "split=sequences hard_share=0 test_pool_share=0.25");
  const TaskSpec t = MakeTaskSpec(*s, 0, 1, 5, {0});
  EXPECT_EQ(t.dataset.split, PoolSplit::kSequences);
  EXPECT_EQ(t.dataset.hard_share, 0);
  EXPECT_EQ(t.dataset.test_pool_share, 0.25);
  const std::string json = SweepSpecToJson(*s);
  EXPECT_THAT(json, HasSubstr("\"split\":[\"tokens\",\"sequences\"]"));
  auto back = SweepSpecFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SweepSpecToJson(*back), json);
  EXPECT_EQ(*ParseAxisValue("split", "sequences", "--split"), 1);
  EXPECT_EQ(FormatAxisValue("split", 0), "tokens");
  ExpectInvalid(ParseAxisValue("split", "pairs", "--split").status(),
                "--split must be one of tokens, sequences; got \"pairs\"");

  TaskSpec one = MakeTaskSpec(*s, 0, 1, 0, {0});
  EXPECT_THAT(TaskSpecToJson(one), ::testing::Not(HasSubstr("split")));
  one.dataset.split = PoolSplit::kSequences;
  EXPECT_THAT(TaskSpecToJson(one), HasSubstr("\"split\":\"sequences\""));
  // A pool axis on another dataset kind is refused.
  auto witness = SweepSpecFromJson(R"({"name": "a", "heads": [{"kind": "kernel"}],
      "ranks": [1], "seed_count": 1, "dataset": {"kind": "witness", "m": 24,
      "num_queries": 4, "split": ["tokens", "sequences"]}})");
  ASSERT_TRUE(witness.ok()) << witness.status();
  ExpectInvalid(ValidateSweepSpec(*witness), "split");
}

// The ranges of a pool that need no data: pool_size 0 (every vector) up to
// 2^20 vectors, and with split sequences no more sequences than the pool forms.
TEST(SpecTest, PoolSizesAreCheckedWithoutTheData) {
  SweepSpec s = GoodSweep();
  s.dataset.kind = DatasetKind::kPool;
  s.dataset.m = 4;
  s.dataset.weight = 0;
  s.dataset.pool_size = 0;  // all 16 vectors: 4,096 sequences of 3
  s.dataset.split = PoolSplit::kSequences;
  s.dataset.train_size = 2000;
  s.dataset.test_size = 2000;
  EXPECT_TRUE(ValidateSweepSpec(s).ok()) << ValidateSweepSpec(s);
  EXPECT_EQ(PoolUniverse(s.dataset), 16u);
  EXPECT_EQ(PoolVectors(s.dataset), 16);
  EXPECT_EQ(PoolSequenceCount(s.dataset), 4096u);
  s.dataset.test_size = 2097;
  ExpectInvalid(ValidateSweepSpec(s),
                "dataset.train_size + dataset.test_size must be in 1..4096 (the distinct "
                "sequences of 3 tokens from 16 vectors) with split sequences, got 2000 + 2097 = "
                "4097");
  s.dataset.split = PoolSplit::kTokens;  // tokens: drawn with replacement, no such limit
  EXPECT_TRUE(ValidateSweepSpec(s).ok()) << ValidateSweepSpec(s);
  s.dataset.pool_size = 17;
  ExpectInvalid(ValidateSweepSpec(s),
                "dataset.pool_size must be 0 (every vector) or in 2..16 (2^4 distinct vectors), "
                "got 17");
  s.dataset.pool_size = 1;
  ExpectInvalid(ValidateSweepSpec(s), "dataset.pool_size must be 0 (every vector) or in 2..16");
  s.dataset.m = 21;
  s.dataset.pool_size = 0;
  ExpectInvalid(ValidateSweepSpec(s), "dataset.pool_size 0 (every vector) needs at most 1048576");
}

}  // namespace
}  // namespace ranksweep
