#include "common/spec/spec_fields.h"

#include <set>
#include <string>
#include <variant>

#include "common/spec/dataset_kinds.h"
#include "common/spec/spec_json.h"
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
  EXPECT_EQ(Names(DatasetFields()).size(), 16u);
  EXPECT_EQ(Names(HeadFields()).size(), 9u);
  EXPECT_EQ(Names(TrainFields()).size(), 11u);
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
