#include "common/spec/spec_fields.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <variant>

#include "common/spec/dataset_kinds.h"
#include "common/spec/spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep {
namespace {

// A scalar row's value as a double (enums by index).
template <typename S>
double ValueOf(const SpecField<S>& f, const S& s) {
  return std::visit(
      [&](const auto& m) -> double {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, EnumMember<S>>) {
          return m.get(s);
        } else if constexpr (std::is_same_v<M, std::vector<int> S::*>) {
          return -1;
        } else {
          return static_cast<double>(s.*m);
        }
      },
      f.member);
}

TaskSpec Witness() {
  TaskSpec w;
  w.dataset.kind = DatasetKind::kWitness;
  w.dataset.m = 16;
  w.dataset.code_weight = 5;
  w.dataset.max_overlap = 2;
  w.dataset.num_queries = 40;
  w.head.kind = HeadKind::kMultiheadKernel;
  w.head.num_heads = 4;
  w.head.hidden = {8, 4};
  w.head.feature_map = FeatureMap::kFavorPlus;
  w.train.early_stop_evals = 0;
  w.train.loss = LossKind::kCrossEntropy;
  w.train.schedule = LrSchedule::kCosine;
  w.train.warmup_steps = 20;
  w.rank = 7;
  w.seeds = {1, 2, 3};
  return w;
}

TaskSpec Pool() {
  TaskSpec p;
  p.dataset.kind = DatasetKind::kPool;
  p.dataset.weight = 3;
  p.dataset.pool_size = 500;
  p.dataset.train_size = 200;
  p.dataset.test_size = 100;
  p.dataset.split = PoolSplit::kSequences;
  p.dataset.hard_share = 0.25;
  p.dataset.data_seed = 18446744073709551615ull;
  p.dataset.final_query_only = true;
  p.head.kind = HeadKind::kSoftmax;
  p.head.score_dim = 2;
  p.head.construction = Construction::kSoftmaxExact;
  p.head.beta = 12.5;
  p.train.lr = 3e-4;
  p.train.batch_size = 64;
  p.train.weight_decay = 0.01;
  return p;
}

// A task's JSON is hashed into its task key, under which its results are
// stored: these are the exact texts the spec's JSON form wrote before its
// fields were rows of a table, and must stay so.
TEST(SpecFieldsTest, ATasksJsonIsExactlyAsItWasBeforeTheTable) {
  EXPECT_EQ(TaskSpecToJson(TaskSpec{}),
            R"({"dataset":{"data_seed":0,"final_query_only":false,"kind":"exhaustive","m":3,)"
            R"("seq_len":3},"head":{"beta":0.0,"construction":"none","feature_map":"elu1",)"
            R"("hidden":[],"kind":"kernel","num_heads":1,"relu_eps":0.001,"score_dim":0,)"
            R"("value_dim":0},"rank":1,"seeds":[0],"train":{"batch_size":0,"beta1":0.9,)"
            R"("beta2":0.999,"early_stop_evals":3,"eval_every":50,"loss":"mse","lr":0.01,)"
            R"("max_steps":2000,"weight_decay":0.0}})");
  EXPECT_EQ(TaskSpecToJson(Witness()),
            R"({"dataset":{"code_weight":5,"data_seed":0,"final_query_only":false,)"
            R"("kind":"witness","m":16,"max_overlap":2,"num_queries":40,"seq_len":3},)"
            R"("head":{"beta":0.0,"construction":"none","feature_map":"favor","hidden":[8,4],)"
            R"("kind":"multihead_kernel","num_heads":4,"relu_eps":0.001,"score_dim":0,)"
            R"("value_dim":0},"rank":7,"seeds":[1,2,3],"train":{"batch_size":0,"beta1":0.9,)"
            R"("beta2":0.999,"early_stop_evals":0,"eval_every":50,"loss":"ce","lr":0.01,)"
            R"("max_steps":2000,"schedule":"cosine","warmup_steps":20,"weight_decay":0.0}})");
  EXPECT_EQ(TaskSpecToJson(Pool()),
            R"({"dataset":{"bernoulli_p":0.5,"data_seed":18446744073709551615,)"
            R"("final_query_only":true,"hard_share":0.25,"kind":"pool","m":3,"pool_size":500,)"
            R"("seq_len":3,"split":"sequences","test_pool_share":0.5,"test_size":100,)"
            R"("train_size":200,"weight":3},"head":{"beta":12.5,"construction":"softmax_exact",)"
            R"("feature_map":"elu1","hidden":[],"kind":"softmax","num_heads":1,)"
            R"("relu_eps":0.001,"score_dim":2,"value_dim":0},"rank":1,"seeds":[0],)"
            R"("train":{"batch_size":64,"beta1":0.9,"beta2":0.999,"early_stop_evals":3,)"
            R"("eval_every":50,"loss":"mse","lr":0.0003,"max_steps":2000,"weight_decay":0.01}})");
  // Adam's eps is written only when not the default (1e-8), which every
  // task used before the field existed.
  TaskSpec eps;
  eps.train.eps = 1e-6;
  EXPECT_NE(TaskSpecToJson(eps).find(R"("eps":1e-06,)"), std::string::npos) << TaskSpecToJson(eps);
  // The default split (tokens) is left out, as before the field existed.
  TaskSpec tokens = Pool();
  tokens.dataset.split = PoolSplit::kTokens;
  EXPECT_EQ(TaskSpecToJson(tokens).find("\"split\""), std::string::npos);
}

TEST(SpecFieldsTest, EveryTaskRoundTripsThroughItsJson) {
  for (const TaskSpec& t : {TaskSpec{}, Witness(), Pool()}) {
    absl::StatusOr<TaskSpec> back = TaskSpecFromJson(TaskSpecToJson(t));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(TaskSpecToJson(*back), TaskSpecToJson(t));
  }
}

template <typename S>
std::set<std::string> Names(absl::Span<const SpecField<S>> rows) {
  std::set<std::string> names;
  for (const SpecField<S>& row : rows) EXPECT_TRUE(names.insert(row.name).second) << row.name;
  return names;
}

TEST(SpecFieldsTest, RowsAreNamedOnceEach) {
  const std::set<std::string> dataset = Names(DatasetFields());
  EXPECT_EQ(dataset.size(), 16u);
  EXPECT_EQ(Names(HeadFields()).size(), 9u);
  const std::set<std::string> train = Names(TrainFields());
  EXPECT_EQ(train.size(), 12u);
  const std::set<std::string> prune = Names(PruneFields());
  EXPECT_EQ(prune, (std::set<std::string>{"rule", "eta", "min_steps", "margin"}));
  // `ranksweep submit` finds a flag's row by name in any of the three.
  for (const std::string& name : train) EXPECT_EQ(dataset.count(name), 0u) << name;
  for (const std::string& name : prune) {
    EXPECT_EQ(dataset.count(name) + train.count(name), 0u) << name;
  }
}

// Pool() with a pool its m can fill (Pool()'s JSON is pinned as it is).
TaskSpec ValidPool() {
  TaskSpec p = Pool();
  p.dataset.m = 12;  // C(12, 3) = 220 vectors
  p.dataset.pool_size = 100;
  return p;
}

// Bernoulli tokens (weight 0), whose bernoulli_p is checked.
TaskSpec BernoulliPool() {
  TaskSpec p = Pool();
  p.dataset.weight = 0;
  p.dataset.pool_size = 0;  // every one of the 2^3 vectors
  return p;
}

// The relu_eps feature map, whose epsilon is checked.
TaskSpec ReluEps() {
  TaskSpec t;
  t.head.feature_map = FeatureMap::kReluEps;
  return t;
}

template <typename S>
using Part = S& (*)(TaskSpec&);

// Sets a bounded row of `t` to `v` (each item, for a list).
template <typename S>
void SetTo(const SpecField<S>& row, double v, S* s) {
  if (auto m = std::get_if<std::vector<int> S::*>(&row.member)) {
    s->**m = {static_cast<int>(v)};
  } else {
    SetFromDouble(row, v, s);
  }
}

// A flag refuses a value outside its row's bounds before validation sees
// it (ranksweep-train), so the bounds must never be narrower than what
// validation accepts: the value just past each end fails validation, naming
// the field, in a task where the field counts.
template <typename S>
void ExpectBoundsAreValidations(absl::Span<const SpecField<S>> rows, Part<S> part) {
  const TaskSpec bases[] = {TaskSpec{}, ReluEps(), Witness(), ValidPool(), BernoulliPool()};
  for (const TaskSpec& base : bases) ASSERT_TRUE(ValidateTaskSpec(base).ok()) << ValidateTaskSpec(base);
  for (const SpecField<S>& row : rows) {
    if (!row.bounds.bounded()) continue;
    SCOPED_TRACE(row.name);
    const bool integer = IsIntegerField(row) || std::holds_alternative<std::vector<int> S::*>(row.member);
    const double below = integer ? row.bounds.min - 1
                                 : std::nextafter(row.bounds.min, -std::numeric_limits<double>::infinity());
    const double above = integer ? row.bounds.max + 1
                                 : std::nextafter(row.bounds.max, std::numeric_limits<double>::infinity());
    int refused_in = 0;
    for (const TaskSpec& base : bases) {
      TaskSpec low = base, high = base;
      SetTo(row, below, &part(low));
      SetTo(row, above, &part(high));
      const absl::Status l = ValidateTaskSpec(low), h = ValidateTaskSpec(high);
      if (!l.ok() && !h.ok()) {
        EXPECT_THAT(std::string(l.message()), ::testing::HasSubstr(row.name));
        EXPECT_THAT(std::string(h.message()), ::testing::HasSubstr(row.name));
        ++refused_in;
      }
    }
    EXPECT_GE(refused_in, 1) << "no task refuses " << row.name << " outside [" << row.bounds.min
                             << ", " << row.bounds.max << "]";
  }
}

TEST(SpecFieldsTest, AValueJustOutsideARowsBoundsFailsValidation) {
  ExpectBoundsAreValidations<DatasetSpec>(DatasetFields(),
                                          [](TaskSpec& t) -> DatasetSpec& { return t.dataset; });
  ExpectBoundsAreValidations<HeadSpec>(HeadFields(), [](TaskSpec& t) -> HeadSpec& { return t.head; });
  ExpectBoundsAreValidations<TrainSpec>(TrainFields(),
                                        [](TaskSpec& t) -> TrainSpec& { return t.train; });
  // Every number is bounded but the seed and pool_size's upper end is the
  // dataset limit.
  int unbounded = 0;
  for (const SpecField<DatasetSpec>& row : DatasetFields()) {
    unbounded += !row.bounds.bounded() && !std::holds_alternative<EnumMember<DatasetSpec>>(row.member) &&
                 !IsBoolField(row);
  }
  EXPECT_EQ(unbounded, 1);  // data_seed
}

// An enum's help may be its names alone; any other row says what it is.
template <typename S>
void ExpectEveryNumberHasHelp(absl::Span<const SpecField<S>> rows) {
  for (const SpecField<S>& row : rows) {
    EXPECT_TRUE(std::holds_alternative<EnumMember<S>>(row.member) || *row.help != '\0')
        << row.name << " has no help";
  }
}

// The pruning's bounds are its validation's too, in a sweep that prunes.
TEST(SpecFieldsTest, APruneValueJustOutsideItsBoundsFailsValidation) {
  SweepSpec base;
  base.name = "prune";
  base.heads = {HeadSpec{}};
  base.ranks = {1};
  base.seed_count = 1;
  base.prune.rule = PruneRule::kHalving;
  ASSERT_TRUE(ValidateSweepSpec(base).ok()) << ValidateSweepSpec(base);
  int bounded = 0;
  for (const SpecField<PruneSpec>& row : PruneFields()) {
    if (!row.bounds.bounded()) continue;
    SCOPED_TRACE(row.name);
    ++bounded;
    const bool integer = IsIntegerField(row);
    for (const double v :
         {integer ? row.bounds.min - 1 : std::nextafter(row.bounds.min, -1e300),
          integer ? row.bounds.max + 1 : std::nextafter(row.bounds.max, 1e300)}) {
      SweepSpec s = base;
      SetFromDouble(row, v, &s.prune);
      const absl::Status status = ValidateSweepSpec(s);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << v;
      EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(std::string("prune.") + row.name));
    }
  }
  EXPECT_EQ(bounded, 3);
}

TEST(SpecFieldsTest, AFlagsHelpAndNameComeFromItsRow) {
  EXPECT_EQ(FieldHelp(*FindDatasetField("seq_len"), "dataset"),
            "dataset.seq_len: tokens per sequence, 1..64");
  EXPECT_EQ(FieldHelp(*FindDatasetField("code_weight"), "dataset"),
            "dataset.code_weight: codeword weight w, 1..m (witness only)");
  EXPECT_EQ(FieldHelp(*FindDatasetField("kind"), "dataset"),
            "dataset.kind: exhaustive | witness | pool");
  EXPECT_EQ(FieldHelp(*FindTrainField("schedule"), "train"),
            "train.schedule: learning-rate schedule: constant | cosine");
  EXPECT_EQ(FieldFlag(*FindDatasetField("kind")), "dataset");
  EXPECT_EQ(FieldFlag(HeadFields()[0]), "head");
  EXPECT_EQ(FieldFlag(*FindTrainField("early_stop_evals")), "early-stop-evals");
  EXPECT_EQ(FieldFlag(*FindPruneField("rule")), "prune");
  EXPECT_EQ(FieldFlag(*FindPruneField("min_steps")), "prune-min-steps");
  EXPECT_STREQ(FieldTypeName(*FindTrainField("lr")), "FLOAT");
  EXPECT_STREQ(FieldTypeName(*FindDatasetField("data_seed")), "INT");
  EXPECT_STREQ(FieldTypeName(*FindTrainField("loss")), "NAME");
  EXPECT_STREQ(FieldTypeName(HeadFields()[2]), "INTS");  // hidden
  ExpectEveryNumberHasHelp(DatasetFields());
  ExpectEveryNumberHasHelp(HeadFields());
  ExpectEveryNumberHasHelp(TrainFields());
  ExpectEveryNumberHasHelp(PruneFields());
}

TEST(SpecFieldsTest, SetFromTextTakesEachTypeAndNamesTheFlag) {
  TrainSpec t;
  ASSERT_TRUE(SetFromText(*FindTrainField("lr"), "0.003", "--lr", &t).ok());
  EXPECT_EQ(t.lr, 0.003);
  ASSERT_TRUE(SetFromText(*FindTrainField("loss"), "ce", "--loss", &t).ok());
  EXPECT_EQ(t.loss, LossKind::kCrossEntropy);
  ASSERT_TRUE(SetFromText(*FindTrainField("eval_every"), "25", "--eval-every", &t).ok());
  EXPECT_EQ(t.eval_every, 25);
  DatasetSpec d;
  ASSERT_TRUE(SetFromText(*FindDatasetField("final_query_only"), "yes", "--fq", &d).ok());
  EXPECT_TRUE(d.final_query_only);
  ASSERT_TRUE(SetFromText(*FindDatasetField("data_seed"), "18446744073709551615", "--s", &d).ok());
  EXPECT_EQ(d.data_seed, 18446744073709551615ull);

  EXPECT_EQ(SetFromText(*FindTrainField("eval_every"), "0", "--eval-every", &t).message(),
            "--eval-every must be an integer in 1..10000000, got 0");
  EXPECT_EQ(SetFromText(*FindTrainField("lr"), "fast", "--lr", &t).message(),
            "--lr must be a number in 0..10, got \"fast\"");
  EXPECT_EQ(SetFromText(*FindTrainField("lr"), "nan", "--lr", &t).message(),
            "--lr must be a number in 0..10, got \"nan\"");
  EXPECT_EQ(SetFromText(*FindTrainField("loss"), "l1", "--loss", &t).message(),
            "--loss must be one of mse, ce; got \"l1\"");
  EXPECT_EQ(SetFromText(*FindDatasetField("final_query_only"), "maybe", "--fq", &d).message(),
            "--fq must be true or false, got \"maybe\"");
  EXPECT_EQ(SetFromText(*FindDatasetField("data_seed"), "-1", "--s", &d).message(),
            "--s must be an integer, got -1");
  HeadSpec h;
  EXPECT_EQ(SetFromText(HeadFields()[2], "4", "--hidden", &h).code(),
            absl::StatusCode::kInvalidArgument);
  // Nothing was changed by a refused value.
  EXPECT_EQ(t.lr, 0.003);
  EXPECT_EQ(t.eval_every, 25);
  EXPECT_EQ(t.loss, LossKind::kCrossEntropy);
}

TEST(SpecFieldsTest, AnEnumRowNamesEveryValueAsNameDoes) {
  const auto& kind = std::get<EnumMember<DatasetSpec>>(FindDatasetField("kind")->member);
  EXPECT_EQ(kind.names, (std::vector<std::string>{"exhaustive", "witness", "pool"}));
  const auto& schedule = std::get<EnumMember<TrainSpec>>(FindTrainField("schedule")->member);
  EXPECT_EQ(schedule.names, (std::vector<std::string>{"constant", "cosine"}));
  absl::StatusOr<int> v = schedule.parse("cosine", "train.schedule");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 1);
  EXPECT_EQ(schedule.parse("linear", "train.schedule").status().message(),
            "train.schedule must be one of constant, cosine; got \"linear\"");
}

// The rows written for some kinds only are exactly the fields the kind
// registry lists for a kind (the fields every kind has are listed by none).
TEST(SpecFieldsTest, TheKindOnlyRowsAreTheKindRegistrysFields) {
  for (const SpecField<DatasetSpec>& row : DatasetFields()) {
    int kinds = 0;
    for (const DatasetKindRow& k : DatasetKinds()) kinds += DatasetKindHasField(k.kind, row.name);
    EXPECT_EQ(ForItsKindsOnly(row.json), kinds > 0) << row.name;
  }
}

// Every axis is the row of its name: one value written by the axis lands in
// that field, as an integer where the field is one.
TEST(SpecFieldsTest, EachAxisSetsTheFieldOfItsName) {
  for (const std::string& name : AxisNames()) {
    SCOPED_TRACE(name);
    SweepSpec s;
    s.dataset = Pool().dataset;
    const std::string field = AxisField(name);
    const bool train = field.rfind("train.", 0) == 0;
    ASSERT_EQ(field, (train ? "train." : "dataset.") + name);
    const double value = AxisIsNamed(name) ? 1 : AxisIsInteger(name) ? 7 : 0.125;
    ASSERT_TRUE(SetAxisValues(name, {value}, &s).ok());
    if (train) {
      const SpecField<TrainSpec>* row = FindTrainField(name);
      ASSERT_NE(row, nullptr);
      EXPECT_EQ(IsIntegerField(*row), AxisIsInteger(name));
      EXPECT_EQ(ValueOf(*row, s.train), value);
    } else {
      const SpecField<DatasetSpec>* row = FindDatasetField(name);
      ASSERT_NE(row, nullptr);
      EXPECT_EQ(IsIntegerField(*row), AxisIsInteger(name));
      EXPECT_EQ(ValueOf(*row, s.dataset), value);
    }
  }
  SweepSpec s;
  ASSERT_TRUE(SetAxisValues("max_steps", {299.6}, &s).ok());
  EXPECT_EQ(s.train.max_steps, 300);
}

}  // namespace
}  // namespace ranksweep
