#include "proto/convert.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "common/spec/spec_fields.h"
#include "common/spec/spec_json.h"
#include "gtest/gtest.h"

namespace ranksweep {
namespace {

TEST(ConvertTest, EmptyProtoGivesSpecDefaults) {
  v1::SweepSpec p;
  p.set_name("x");
  p.add_heads();
  SweepSpec s = FromProto(p);
  const TrainSpec def_train;
  const DatasetSpec def_data;
  EXPECT_EQ(s.heads.size(), 1u);
  EXPECT_EQ(s.heads[0].kind, HeadKind::kKernel);
  EXPECT_EQ(s.heads[0].feature_map, FeatureMap::kEluPlusOne);
  EXPECT_EQ(s.heads[0].construction, Construction::kNone);
  EXPECT_EQ(s.heads[0].num_heads, 1);
  EXPECT_EQ(s.dataset.kind, DatasetKind::kExhaustive);
  EXPECT_EQ(s.dataset.m, def_data.m);
  EXPECT_EQ(s.train.max_steps, def_train.max_steps);
  EXPECT_EQ(s.train.early_stop_evals, def_train.early_stop_evals);
  EXPECT_DOUBLE_EQ(s.train.lr, def_train.lr);
}

TEST(ConvertTest, EnumsMapOneToOne) {
  v1::HeadSpec h;
  h.set_kind(v1::HEAD_KIND_MULTIHEAD_KERNEL);
  h.set_feature_map(v1::FEATURE_MAP_FAVOR);
  h.set_construction(v1::CONSTRUCTION_NONE);
  HeadSpec s = FromProto(h);
  EXPECT_EQ(s.kind, HeadKind::kMultiheadKernel);
  EXPECT_EQ(s.feature_map, FeatureMap::kFavorPlus);
  EXPECT_EQ(s.construction, Construction::kNone);
  h.set_kind(v1::HEAD_KIND_SOFTMAX);
  h.set_construction(v1::CONSTRUCTION_SOFTMAX_EXACT);
  s = FromProto(h);
  EXPECT_EQ(s.kind, HeadKind::kSoftmax);
  EXPECT_EQ(s.construction, Construction::kSoftmaxExact);
  v1::DatasetSpec d;
  d.set_kind(v1::DATASET_KIND_POOL);
  EXPECT_EQ(FromProto(d).kind, DatasetKind::kPool);
  EXPECT_EQ(ToProto(FromProto(d)).kind(), v1::DATASET_KIND_POOL);
}

TEST(ConvertTest, SweepRoundTripsThroughProto) {
  SweepSpec s;
  s.name = "rt";
  s.dataset.kind = DatasetKind::kWitness;
  s.dataset.m = 24;
  s.dataset.num_queries = 12;
  HeadSpec k;
  k.hidden = {32};
  k.feature_map = FeatureMap::kReluEps;
  HeadSpec sm;
  sm.kind = HeadKind::kSoftmax;
  sm.construction = Construction::kSoftmaxExact;
  s.heads = {k, sm};
  s.ranks = {1, 8, 32};
  s.seeds = {4, 5};
  s.train.early_stop_evals = 0;  // never
  s.train.loss = LossKind::kCrossEntropy;
  s.axes = {{"lr", {0.01, 0.003}}, {"num_queries", {10, 12}}};
  SweepSpec back = FromProto(ToProto(s));
  EXPECT_EQ(SweepSpecToJson(back), SweepSpecToJson(s));
  ASSERT_EQ(back.axes.size(), 2u);
  EXPECT_EQ(back.axes[1].name, "num_queries");
  EXPECT_EQ(back.axes[1].values, (std::vector<double>{10, 12}));
  EXPECT_EQ(RecipeLabel(back, 3), "lr=0.003 num_queries=12");
}

TEST(ConvertTest, SeedResultRoundTrip) {
  SeedResult r;
  r.seed = 9;
  r.train.sequences = 100;
  r.train.error = 0.5;
  r.test.sequences = 50;
  r.steps = 123;
  r.device = "cpu";
  r.facts.rank_upper_bound = 759;
  EXPECT_EQ(SeedResultToJson(FromProto(ToProto(r))), SeedResultToJson(r));
  EXPECT_FALSE(ToProto(r).has_curve());  // no curve: the field stays unset
  for (bool has_test : {false, true}) {
    r.curve.has_test = has_test;
    r.curve.points = {{50, 0.5f, 0.75f, 0.25f, has_test ? 0.875f : 1.0f, has_test ? 0.125f : 0.0f},
                      {100, 0.25f, 0.5f, 0.5f, has_test ? 0.625f : 1.0f, has_test ? 0.25f : 0.0f}};
    const v1::SeedResult p = ToProto(r);
    EXPECT_EQ(p.curve().steps_size(), 2);
    EXPECT_EQ(p.curve().test_error_size(), has_test ? 2 : 0);
    EXPECT_EQ(FromProto(p).curve, r.curve);
    EXPECT_EQ(SeedResultToJson(FromProto(p)), SeedResultToJson(r));
    // JSON carries the curve as rows of numbers and reads it back.
    absl::StatusOr<SeedResult> back = SeedResultFromJson(SeedResultToJson(r));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->curve, r.curve);
  }
}


// ------------------------------------------------ every field, every value
// Each row sets one field of the spec to its zero value, its default or
// another value. The spec must come back exactly, through the bytes on the
// wire, as a SweepSpec (what the CLI submits) and as a TaskSpec (what a
// worker trains): no 0 may turn into the default on the way.

enum class Pick { kZero, kDefault, kOther };
const char* PickName(Pick p) {
  return p == Pick::kZero ? "zero" : p == Pick::kDefault ? "default" : "other";
}
template <typename T>
T Choose(Pick p, T zero, T def, T other) {
  return p == Pick::kZero ? zero : p == Pick::kDefault ? def : other;
}

struct FieldCase {
  const char* message;  // the proto message that holds the field
  const char* field;    // its proto name
  std::function<void(SweepSpec&, Pick)> set;
};

std::vector<FieldCase> FieldCases() {
  const DatasetSpec d;
  const HeadSpec h;
  const TrainSpec t;
  const SweepSpec s;
  const TaskSpec task;
  return {
      {"DatasetSpec", "kind",
       [=](SweepSpec& x, Pick p) {
         x.dataset.kind = Choose(p, DatasetKind::kExhaustive, d.kind, DatasetKind::kWitness);
       }},
      {"DatasetSpec", "m", [=](SweepSpec& x, Pick p) { x.dataset.m = Choose(p, 0, d.m, 7); }},
      {"DatasetSpec", "seq_len",
       [=](SweepSpec& x, Pick p) { x.dataset.seq_len = Choose(p, 0, d.seq_len, 5); }},
      {"DatasetSpec", "final_query_only",
       [=](SweepSpec& x, Pick p) {
         x.dataset.final_query_only = Choose(p, false, d.final_query_only, true);
       }},
      {"DatasetSpec", "data_seed",
       [=](SweepSpec& x, Pick p) { x.dataset.data_seed = Choose<uint64_t>(p, 0, d.data_seed, 42); }},
      {"DatasetSpec", "code_weight",
       [=](SweepSpec& x, Pick p) { x.dataset.code_weight = Choose(p, 0, d.code_weight, 5); }},
      {"DatasetSpec", "max_overlap",
       [=](SweepSpec& x, Pick p) { x.dataset.max_overlap = Choose(p, 0, d.max_overlap, 2); }},
      {"DatasetSpec", "num_queries",
       [=](SweepSpec& x, Pick p) { x.dataset.num_queries = Choose(p, 0, d.num_queries, 12); }},
      {"DatasetSpec", "weight",
       [=](SweepSpec& x, Pick p) { x.dataset.weight = Choose(p, 0, d.weight, 3); }},
      {"DatasetSpec", "bernoulli_p",
       [=](SweepSpec& x, Pick p) { x.dataset.bernoulli_p = Choose(p, 0.0, d.bernoulli_p, 0.25); }},
      {"DatasetSpec", "pool_size",
       [=](SweepSpec& x, Pick p) { x.dataset.pool_size = Choose(p, 0, d.pool_size, 100); }},
      {"DatasetSpec", "test_pool_share",
       [=](SweepSpec& x, Pick p) {
         x.dataset.test_pool_share = Choose(p, 0.0, d.test_pool_share, 0.2);
       }},
      {"DatasetSpec", "train_size",
       [=](SweepSpec& x, Pick p) { x.dataset.train_size = Choose(p, 0, d.train_size, 80); }},
      {"DatasetSpec", "test_size",
       [=](SweepSpec& x, Pick p) { x.dataset.test_size = Choose(p, 0, d.test_size, 50); }},
      {"DatasetSpec", "hard_share",
       [=](SweepSpec& x, Pick p) { x.dataset.hard_share = Choose(p, 0.0, d.hard_share, 0.75); }},
      {"DatasetSpec", "split",
       [=](SweepSpec& x, Pick p) {
         x.dataset.split = Choose(p, PoolSplit::kTokens, d.split, PoolSplit::kSequences);
       }},
      {"HeadSpec", "kind",
       [=](SweepSpec& x, Pick p) {
         x.heads[0].kind = Choose(p, HeadKind::kKernel, h.kind, HeadKind::kMultiheadKernel);
       }},
      {"HeadSpec", "feature_map",
       [=](SweepSpec& x, Pick p) {
         x.heads[0].feature_map =
             Choose(p, FeatureMap::kEluPlusOne, h.feature_map, FeatureMap::kFavorPlus);
       }},
      {"HeadSpec", "hidden",
       [=](SweepSpec& x, Pick p) {
         x.heads[0].hidden = Choose(p, std::vector<int>{}, h.hidden, std::vector<int>{16, 8});
       }},
      {"HeadSpec", "num_heads",
       [=](SweepSpec& x, Pick p) { x.heads[0].num_heads = Choose(p, 0, h.num_heads, 4); }},
      {"HeadSpec", "value_dim",
       [=](SweepSpec& x, Pick p) { x.heads[0].value_dim = Choose(p, 0, h.value_dim, 6); }},
      {"HeadSpec", "score_dim",
       [=](SweepSpec& x, Pick p) { x.heads[0].score_dim = Choose(p, 0, h.score_dim, 6); }},
      {"HeadSpec", "relu_eps",
       [=](SweepSpec& x, Pick p) { x.heads[0].relu_eps = Choose(p, 0.0, h.relu_eps, 0.01); }},
      {"HeadSpec", "construction",
       [=](SweepSpec& x, Pick p) {
         x.heads[0].construction =
             Choose(p, Construction::kNone, h.construction, Construction::kRank1);
       }},
      {"HeadSpec", "beta",
       [=](SweepSpec& x, Pick p) { x.heads[0].beta = Choose(p, 0.0, h.beta, 2.5); }},
      {"TrainSpec", "lr", [=](SweepSpec& x, Pick p) { x.train.lr = Choose(p, 0.0, t.lr, 0.05); }},
      {"TrainSpec", "beta1",
       [=](SweepSpec& x, Pick p) { x.train.beta1 = Choose(p, 0.0, t.beta1, 0.5); }},
      {"TrainSpec", "beta2",
       [=](SweepSpec& x, Pick p) { x.train.beta2 = Choose(p, 0.0, t.beta2, 0.9); }},
      {"TrainSpec", "eps",
       [=](SweepSpec& x, Pick p) { x.train.eps = Choose(p, 0.0, t.eps, 1e-3); }},
      {"TrainSpec", "weight_decay",
       [=](SweepSpec& x, Pick p) { x.train.weight_decay = Choose(p, 0.0, t.weight_decay, 0.01); }},
      {"TrainSpec", "batch_size",
       [=](SweepSpec& x, Pick p) { x.train.batch_size = Choose(p, 0, t.batch_size, 32); }},
      {"TrainSpec", "max_steps",
       [=](SweepSpec& x, Pick p) { x.train.max_steps = Choose(p, 0, t.max_steps, 10); }},
      {"TrainSpec", "eval_every",
       [=](SweepSpec& x, Pick p) { x.train.eval_every = Choose(p, 0, t.eval_every, 5); }},
      {"TrainSpec", "early_stop_evals",  // the spec's 0 is "never"
       [=](SweepSpec& x, Pick p) { x.train.early_stop_evals = Choose(p, 0, t.early_stop_evals, 7); }},
      {"TrainSpec", "loss",
       [=](SweepSpec& x, Pick p) {
         x.train.loss = Choose(p, LossKind::kMse, t.loss, LossKind::kCrossEntropy);
       }},
      {"TrainSpec", "schedule",
       [=](SweepSpec& x, Pick p) {
         x.train.schedule = Choose(p, LrSchedule::kConstant, t.schedule, LrSchedule::kCosine);
       }},
      {"TrainSpec", "warmup_steps",
       [=](SweepSpec& x, Pick p) { x.train.warmup_steps = Choose(p, 0, t.warmup_steps, 25); }},
      {"SweepSpec", "name",
       [=](SweepSpec& x, Pick p) { x.name = Choose<std::string>(p, "", s.name, "other"); }},
      {"SweepSpec", "dataset", [](SweepSpec&, Pick) {}},  // rows above
      {"SweepSpec", "heads",
       [=](SweepSpec& x, Pick p) {
         if (p == Pick::kOther) x.heads.push_back(HeadSpec{HeadKind::kSoftmax});
       }},
      {"SweepSpec", "ranks",
       [=](SweepSpec& x, Pick p) {
         x.ranks = Choose(p, std::vector<int>{}, s.ranks, std::vector<int>{1, 8});
       }},
      {"SweepSpec", "seeds",
       [=](SweepSpec& x, Pick p) {
         x.seeds = Choose(p, std::vector<uint64_t>{}, s.seeds, std::vector<uint64_t>{0, 9});
       }},
      {"SweepSpec", "seed_count",
       [=](SweepSpec& x, Pick p) { x.seed_count = Choose(p, 0, s.seed_count, 3); }},
      {"SweepSpec", "train", [](SweepSpec&, Pick) {}},  // rows above
      {"SweepSpec", "priority",
       [=](SweepSpec& x, Pick p) { x.priority = Choose(p, 0, s.priority, -5); }},
      {"SweepSpec", "mode",
       [=](SweepSpec& x, Pick p) {
         x.mode = Choose(p, SweepMode::kGrid, s.mode, SweepMode::kSearch);
       }},
      {"SweepSpec", "no_result_cache",  // the spec's reuse_results, inverted
       [=](SweepSpec& x, Pick p) {
         x.reuse_results = Choose(p, false, s.reuse_results, !s.reuse_results);
       }},
      {"SweepSpec", "axes",
       [=](SweepSpec& x, Pick p) {
         if (p == Pick::kOther) x.axes = {{"lr", {0.05, 0.0}}, {"max_steps", {0, 30}}};
       }},
      {"SweepSpec", "prune",  // written only when a rule is on; zeros keep their presence
       [=](SweepSpec& x, Pick p) {
         if (p == Pick::kDefault) return;
         x.prune.rule = PruneRule::kHalving;
         x.prune.eta = p == Pick::kZero ? 0 : 5;
         x.prune.min_steps = p == Pick::kZero ? 0 : 300;
         x.prune.margin = p == Pick::kZero ? 0.0 : 0.2;
       }},
      // A TaskSpec is a SweepSpec's dataset, one head, one rank, its train
      // spec and seeds; the rows above cover the messages they share.
      {"TaskSpec", "dataset", [](SweepSpec&, Pick) {}},
      {"TaskSpec", "head", [](SweepSpec&, Pick) {}},
      {"TaskSpec", "rank",
       [=](SweepSpec& x, Pick p) { x.ranks = Choose(p, std::vector<int>{0}, std::vector<int>{task.rank},
                                                    std::vector<int>{8}); }},
      {"TaskSpec", "train", [](SweepSpec&, Pick) {}},
      {"TaskSpec", "seeds",
       [=](SweepSpec& x, Pick p) {
         x.seeds = Choose(p, std::vector<uint64_t>{0}, task.seeds, std::vector<uint64_t>{3, 7});
       }},
  };
}

// Through the bytes, as a worker or the coordinator receives it.
template <typename M>
M OverTheWire(const M& m) {
  std::string bytes;
  EXPECT_TRUE(m.SerializeToString(&bytes));
  M back;
  EXPECT_TRUE(back.ParseFromString(bytes));
  return back;
}

TEST(ConvertTest, EveryFieldOfTheSpecsComesBackAsSentWhetherZeroDefaultOrOther) {
  for (const FieldCase& c : FieldCases()) {
    for (Pick pick : {Pick::kZero, Pick::kDefault, Pick::kOther}) {
      SCOPED_TRACE(std::string(c.message) + "." + c.field + " = " + PickName(pick));
      SweepSpec sweep;
      sweep.heads = {HeadSpec{}};
      c.set(sweep, pick);
      const SweepSpec back = FromProto(OverTheWire(ToProto(sweep)));
      EXPECT_EQ(SweepSpecToJson(back), SweepSpecToJson(sweep));

      TaskSpec task;
      task.dataset = sweep.dataset;
      task.head = sweep.heads[0];
      task.rank = sweep.ranks.empty() ? task.rank : sweep.ranks[0];
      task.train = sweep.train;
      if (!sweep.seeds.empty()) task.seeds = sweep.seeds;
      const TaskSpec task_back = FromProto(OverTheWire(ToProto(task)));
      EXPECT_EQ(TaskSpecToJson(task_back), TaskSpecToJson(task));
    }
  }
}

// The table above must name every field of the spec messages, so a field
// added to the proto without a row fails here instead of going unchecked.
TEST(ConvertTest, TheRoundTripTableCoversEveryFieldOfTheSpecMessages) {
  std::set<std::string> listed;
  for (const FieldCase& c : FieldCases()) listed.insert(std::string(c.message) + "." + c.field);
  for (const google::protobuf::Descriptor* m :
       {v1::DatasetSpec::descriptor(), v1::HeadSpec::descriptor(), v1::TrainSpec::descriptor(),
        v1::SweepSpec::descriptor(), v1::TaskSpec::descriptor()}) {
    for (int i = 0; i < m->field_count(); ++i) {
      EXPECT_TRUE(listed.count(m->name() + "." + m->field(i)->name()))
          << m->name() << "." << m->field(i)->name() << " has no row";
    }
  }
}

// The recipe structs travel by their rows (common/spec/spec_fields.h): each
// row is the field of its name in its message, and each field of those
// messages is a row, so a field added on one side only fails here.
template <typename S>
void ExpectRowsAreTheFields(absl::Span<const SpecField<S>> rows,
                            const google::protobuf::Descriptor* message) {
  std::set<std::string> row_names, field_names;
  for (const SpecField<S>& row : rows) row_names.insert(row.name);
  for (int i = 0; i < message->field_count(); ++i) field_names.insert(message->field(i)->name());
  EXPECT_EQ(row_names, field_names) << message->name();
}

TEST(ConvertTest, TheSpecFieldRowsAreExactlyTheFieldsOfTheirMessages) {
  ExpectRowsAreTheFields(DatasetFields(), v1::DatasetSpec::descriptor());
  ExpectRowsAreTheFields(HeadFields(), v1::HeadSpec::descriptor());
  ExpectRowsAreTheFields(TrainFields(), v1::TrainSpec::descriptor());
  ExpectRowsAreTheFields(PruneFields(), v1::PruneSpec::descriptor());
}

// early_stop_evals: 0 on the wire is unset (the default, 3), -1 is the
// spec's 0 (never).
TEST(ConvertTest, NeverStoppingEarlyIsMinusOneOnTheWire) {
  TrainSpec never;
  never.early_stop_evals = 0;
  EXPECT_EQ(ToProto(never).early_stop_evals(), -1);
  EXPECT_EQ(FromProto(ToProto(never)).early_stop_evals, 0);
  EXPECT_EQ(FromProto(v1::TrainSpec{}).early_stop_evals, TrainSpec{}.early_stop_evals);
  v1::TrainSpec five;
  five.set_early_stop_evals(5);
  EXPECT_EQ(FromProto(five).early_stop_evals, 5);
}

// A field whose default is not zero has presence: an explicit 0 is sent and
// kept; an absent field (a writer that predates presence never sent its
// zeros) still means the default.
TEST(ConvertTest, ExplicitZeroIsKeptAndAbsentMeansTheDefault) {
  v1::TrainSpec p;
  p.set_max_steps(0);
  p.set_beta1(0);
  EXPECT_TRUE(OverTheWire(p).has_max_steps());
  EXPECT_EQ(FromProto(OverTheWire(p)).max_steps, 0);
  EXPECT_EQ(FromProto(OverTheWire(p)).beta1, 0.0);
  EXPECT_EQ(FromProto(OverTheWire(p)).beta2, TrainSpec().beta2);
  v1::TrainSpec absent;
  EXPECT_EQ(FromProto(absent).max_steps, TrainSpec().max_steps);
  v1::DatasetSpec d;
  d.set_hard_share(0);
  d.set_test_pool_share(0);
  d.set_max_overlap(0);
  const DatasetSpec got = FromProto(OverTheWire(d));
  EXPECT_EQ(got.hard_share, 0.0);
  EXPECT_EQ(got.test_pool_share, 0.0);
  EXPECT_EQ(got.max_overlap, 0);
  EXPECT_EQ(got.m, DatasetSpec().m);  // absent
}

// Every optional metric of the table travels in SeedResult's `metrics`
// map under its name, and a value (or its absence) survives the trip.
TEST(ConvertTest, OptionalMetricsTravelInTheMapAndRoundTrip) {
  for (const ResultMetric& m : ResultMetrics()) {
    SeedResult r;
    r.test.sequences = 8;  // a test-split metric needs a test split
    SetMetric(m, 1500, &r);
    const v1::SeedResult p = ToProto(r);
    ASSERT_EQ(p.metrics().count(m.name), 1u) << m.name;
    EXPECT_EQ(p.metrics().at(m.name), 1500.0) << m.name;
    EXPECT_EQ(GetMetric(m, FromProto(p)), std::optional<double>(1500.0)) << m.name;
    SetMetric(m, std::nullopt, &r);
    EXPECT_EQ(ToProto(r).metrics().count(m.name), 0u) << m.name;
    EXPECT_FALSE(GetMetric(m, FromProto(ToProto(r))).has_value()) << m.name;
  }
}

// first_exact_step, older than the map, also travels in its own field: a
// reader older than the map finds it there, and a sender older than the map
// is read from it.
TEST(ConvertTest, FirstExactStepAlsoTravelsInItsOwnField) {
  SeedResult r;
  SetMetric("first_exact_step", 1500, &r);
  const v1::SeedResult p = ToProto(r);
  ASSERT_TRUE(p.has_first_exact_step());
  EXPECT_EQ(p.first_exact_step(), 1500);
  EXPECT_EQ(p.metrics().at("first_exact_step"), 1500.0);

  v1::SeedResult old_sender;
  old_sender.set_first_exact_step(700);
  EXPECT_EQ(GetMetric("first_exact_step", FromProto(old_sender)),
            std::optional<double>(700.0));
  EXPECT_FALSE(GetMetric("first_exact_step", FromProto(v1::SeedResult())).has_value());
}

// A missing metric clears what the message held before, in the map and in
// the legacy field, whichever of them it was in: FillProto may write over a
// message reused from an earlier row, and SetProtoMetric over one from an
// older sender.
TEST(ConvertTest, AMissingMetricClearsTheMapAndTheLegacyFieldOfAReusedMessage) {
  SeedResult with_all;
  with_all.test.sequences = 8;
  for (const ResultMetric& m : ResultMetrics()) SetMetric(m, 1500, &with_all);
  v1::SeedResult p;
  FillProto(with_all, &p);
  ASSERT_EQ(p.metrics_size(), kResultMetricCount);
  ASSERT_TRUE(p.has_first_exact_step());
  FillProto(SeedResult(), &p);
  EXPECT_EQ(p.metrics_size(), 0);
  EXPECT_FALSE(p.has_first_exact_step());

  v1::SeedResult old_sender;
  old_sender.set_first_exact_step(700);
  SetProtoMetric(*FindResultMetric("first_exact_step"), std::nullopt, &old_sender);
  EXPECT_FALSE(old_sender.has_first_exact_step());
  EXPECT_EQ(old_sender.metrics_size(), 0);
  v1::SeedResult map_only;
  (*map_only.mutable_metrics())["first_exact_step"] = 700;
  SetProtoMetric(*FindResultMetric("first_exact_step"), std::nullopt, &map_only);
  EXPECT_EQ(map_only.metrics_size(), 0);
}

// A name the table does not have (a newer worker's metric) is ignored.
TEST(ConvertTest, AMetricNameTheTableLacksIsIgnored) {
  v1::SeedResult p;
  (*p.mutable_metrics())["not_a_metric"] = 3.0;
  const SeedResult r = FromProto(p);
  for (const ResultMetric& m : ResultMetrics()) EXPECT_FALSE(GetMetric(m, r).has_value());
}

// A leased task is one type on both sides (common/spec/worker_calls.h) with
// one mapping: what the coordinator leases is what the worker reads, every
// field but the coordinator's own recipe index.
TEST(ConvertTest, ALeasedTaskRoundTripsThroughProto) {
  LeasedTask task;
  task.sweep_id = "sw-1";
  task.head_index = 2;
  task.rank = 8;
  task.recipe = 3;
  task.spec.rank = 8;
  task.spec.seeds = {4, 9};
  task.spec.train.lr = 0.003;
  task.cells = {{101, 4, 7001, 1}, {102, 9, 7002, 2}};
  task.deadline_unix_ms = 1'700'000'000'000;
  task.rung_steps = {100, 300};
  const v1::Task p = ToProto(task);
  EXPECT_EQ(p.cells_size(), 2);
  EXPECT_EQ(p.cells(1).attempt(), 2);
  const LeasedTask back = FromProto(p);
  EXPECT_EQ(back.sweep_id, "sw-1");
  EXPECT_EQ(back.head_index, 2);
  EXPECT_EQ(back.rank, 8);
  EXPECT_EQ(back.recipe, 0);  // not on the wire
  EXPECT_EQ(back.spec.seeds, (std::vector<uint64_t>{4, 9}));
  EXPECT_DOUBLE_EQ(back.spec.train.lr, 0.003);
  ASSERT_EQ(back.cells.size(), 2u);
  EXPECT_EQ(back.cells[1].cell_id, 102);
  EXPECT_EQ(back.cells[1].seed, 9u);
  EXPECT_EQ(back.cells[1].lease_id, 7002);
  EXPECT_EQ(back.cells[1].attempt, 2);
  EXPECT_EQ(back.deadline_unix_ms, 1'700'000'000'000);
  EXPECT_EQ(back.rung_steps, (std::vector<int64_t>{100, 300}));
}

// A registration as the worker sends it and the coordinator reads it; the
// owner is the coordinator's own (from the calling token), never sent.
TEST(ConvertTest, AWorkerRegistrationRoundTripsWithoutItsOwner) {
  WorkerRegistration reg;
  reg.worker_id = "wk-1";
  reg.hostname = "h";
  reg.device = "cuda";
  reg.device_name = "cuda:0 (NVIDIA H200)";
  reg.memory_bytes = int64_t{80} << 30;
  reg.slots = 4;
  reg.version = {"0.1.0+abc", "2.11.0", "13.0"};
  reg.owner = "alice";
  v1::RegisterWorkerRequest p;
  FillProto(reg, &p);
  const WorkerRegistration back = FromProto(p);
  EXPECT_EQ(back.worker_id, "wk-1");
  EXPECT_EQ(back.hostname, "h");
  EXPECT_EQ(back.device, "cuda");
  EXPECT_EQ(back.device_name, "cuda:0 (NVIDIA H200)");
  EXPECT_EQ(back.memory_bytes, int64_t{80} << 30);
  EXPECT_EQ(back.slots, 4);
  EXPECT_EQ(back.version.build_id, "0.1.0+abc");
  EXPECT_EQ(back.version.torch_version, "2.11.0");
  EXPECT_EQ(back.version.cuda_version, "13.0");
  EXPECT_EQ(back.owner, "");
}

// The heartbeat's values both ways, with the one mapping of both sides.
TEST(ConvertTest, HeartbeatProgressAndOutcomeRoundTrip) {
  v1::LeaseProgress p;
  FillProto(LeaseProgress{7001, 250, 0.125}, &p);
  const LeaseProgress progress = FromProto(p);
  EXPECT_EQ(progress.lease_id, 7001);
  EXPECT_EQ(progress.step, 250);
  EXPECT_EQ(progress.train_error, 0.125);
  HeartbeatOutcome out;
  out.cancelled_lease_ids = {1};
  out.lost_lease_ids = {2, 3};
  out.pruned_lease_ids = {4};
  out.deadline_unix_ms = 1'700'000'060'000;
  v1::HeartbeatResponse reply;
  FillProto(out, &reply);
  const HeartbeatOutcome back = FromProto(reply);
  EXPECT_EQ(back.cancelled_lease_ids, (std::vector<int64_t>{1}));
  EXPECT_EQ(back.lost_lease_ids, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back.pruned_lease_ids, (std::vector<int64_t>{4}));
  EXPECT_EQ(back.deadline_unix_ms, 1'700'000'060'000);
}

TEST(ConvertTest, WhatToLeaseRoundTripsThroughBothRequests) {
  const TaskWant want{3, 128, int64_t{6} << 30};
  v1::AcquireTasksRequest acquire;
  FillProto(want, &acquire);
  EXPECT_EQ(acquire.max_tasks(), 3);
  EXPECT_EQ(acquire.max_seeds(), 128);
  EXPECT_EQ(acquire.memory_bytes(), int64_t{6} << 30);
  const TaskWant from_acquire = WantOf(acquire);
  EXPECT_EQ(from_acquire.max_tasks, 3);
  EXPECT_EQ(from_acquire.max_seeds, 128);
  EXPECT_EQ(from_acquire.memory_bytes, int64_t{6} << 30);
  v1::NextTasks next;
  FillProto(want, &next);
  const TaskWant from_next = FromProto(next);
  EXPECT_EQ(from_next.max_tasks, 3);
  EXPECT_EQ(from_next.max_seeds, 128);
  EXPECT_EQ(from_next.memory_bytes, int64_t{6} << 30);
}

}  // namespace
}  // namespace ranksweep
