#include "proto/wire_check.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ranksweep {
namespace {

v1::SweepSpec Spec() {
  v1::SweepSpec s;
  s.set_name("wire");
  s.add_heads()->set_kind(v1::HEAD_KIND_KERNEL);
  s.add_heads()->set_kind(v1::HEAD_KIND_SOFTMAX);
  s.add_ranks(4);
  s.set_seed_count(2);
  return s;
}

void ExpectRefused(const v1::SweepSpec& s, const std::string& message) {
  absl::Status st = CheckWireSweepSpec(s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << message;
  EXPECT_EQ(st.message(), message);
}

TEST(WireCheckTest, ACurvesListsHaveOneElementPerStep) {
  v1::SeedResult r;
  EXPECT_TRUE(CheckWireSeedResult(r).ok());
  v1::Curve* c = r.mutable_curve();
  for (int step : {50, 100}) {
    c->add_steps(step);
    c->add_loss(0.5f);
    c->add_train_error(1);
    c->add_train_position_accuracy(0.5f);
  }
  EXPECT_TRUE(CheckWireSeedResult(r).ok());
  c->add_loss(0.25f);
  EXPECT_EQ(CheckWireSeedResult(r).message(),
            "result.curve.loss must have as many elements as result.curve.steps (2), got 3");
  c->mutable_loss()->RemoveLast();
  c->add_test_error(0.5f);
  EXPECT_EQ(CheckWireSeedResult(r).message(),
            "result.curve.test_error must have 0 elements (result.curve.has_test is false), "
            "got 1");
  c->set_has_test(true);
  EXPECT_EQ(CheckWireSeedResult(r).message(),
            "result.curve.test_error must have 2 elements (one per element of "
            "result.curve.steps), got 1");
  c->add_test_error(0.5f);
  c->add_test_position_accuracy(0.5f);
  c->add_test_position_accuracy(0.5f);
  EXPECT_TRUE(CheckWireSeedResult(r).ok());
  EXPECT_EQ(CheckWireSeedResult(r).code(), absl::StatusCode::kOk);
}

// A result may carry metrics this coordinator does not know, within bounds.
TEST(WireCheckTest, AResultsMetricsMapIsBounded) {
  v1::SeedResult p;
  for (int i = 0; i < WireLimits::kMaxResultMetrics; ++i) {
    (*p.mutable_metrics())[absl::StrCat("m", i)] = i;
  }
  EXPECT_TRUE(CheckWireSeedResult(p).ok());
  (*p.mutable_metrics())["one_more"] = 1;
  EXPECT_EQ(CheckWireSeedResult(p).message(),
            "result.metrics must have at most 64 entries, got 65");
  v1::SeedResult long_name;
  (*long_name.mutable_metrics())[std::string(65, 'x')] = 1;
  EXPECT_EQ(CheckWireSeedResult(long_name).message(),
            "result.metrics: a name must be at most 64 bytes, got 65");
}

TEST(WireCheckTest, EveryDefinedValueAndUnsetPass) {
  v1::SweepSpec s = Spec();
  EXPECT_TRUE(CheckWireSweepSpec(s).ok());
  s.mutable_heads(0)->set_kind(v1::HEAD_KIND_MULTIHEAD_KERNEL);
  s.mutable_heads(0)->set_feature_map(v1::FEATURE_MAP_FAVOR);
  s.mutable_heads(1)->set_construction(v1::CONSTRUCTION_SOFTMAX_EXACT);
  s.mutable_dataset()->set_kind(v1::DATASET_KIND_POOL);
  s.mutable_train()->set_loss(v1::LOSS_KIND_CROSS_ENTROPY);
  s.mutable_train()->set_schedule(v1::LR_SCHEDULE_COSINE);
  s.mutable_train()->set_early_stop_evals(-1);
  s.set_mode(v1::SWEEP_MODE_SEARCH);
  EXPECT_TRUE(CheckWireSweepSpec(s).ok());
}

TEST(WireCheckTest, AnUndefinedEnumNumberIsNamedAsSent) {
  v1::SweepSpec s = Spec();
  s.mutable_heads(1)->set_kind(static_cast<v1::HeadKind>(5));
  ExpectRefused(s, "heads[1]: head.kind must be one of kernel, softmax, signed_kernel, "
                   "multihead_kernel; got value 5");
  s = Spec();
  s.mutable_heads(0)->set_feature_map(static_cast<v1::FeatureMap>(-3));
  ExpectRefused(s, "heads[0]: head.feature_map must be one of elu1, relu_eps, softplus, exp, "
                   "favor; got value -3");
  s = Spec();
  s.mutable_heads(0)->set_construction(static_cast<v1::Construction>(9));
  ExpectRefused(s, "heads[0]: head.construction must be one of none, rank1, indicator, "
                   "softmax_exact; got value 9");
  s = Spec();
  s.mutable_dataset()->set_kind(static_cast<v1::DatasetKind>(4));
  ExpectRefused(s, "dataset.kind must be one of exhaustive, witness, pool; got value 4");
  s = Spec();
  s.mutable_train()->set_loss(static_cast<v1::LossKind>(3));
  ExpectRefused(s, "train.loss must be one of mse, ce; got value 3");
  s = Spec();
  s.mutable_train()->set_schedule(static_cast<v1::LrSchedule>(3));
  ExpectRefused(s, "train.schedule must be one of constant, cosine; got value 3");
  s = Spec();
  s.set_mode(static_cast<v1::SweepMode>(3));
  ExpectRefused(s, "mode must be one of grid, search; got value 3");
}

TEST(WireCheckTest, EarlyStopBelowMinusOneIsRefusedNotStoredAsNever) {
  v1::SweepSpec s = Spec();
  s.mutable_train()->set_early_stop_evals(-2);
  ExpectRefused(s, "train.early_stop_evals must be -1 (never stop early), 0 (the default, 3) or "
                   "1..1000 on the wire, got -2");
  v1::TaskSpec t;
  t.mutable_train()->set_early_stop_evals(-2);
  EXPECT_EQ(CheckWireTaskSpec(t).code(), absl::StatusCode::kInvalidArgument);
  t.mutable_train()->set_early_stop_evals(-1);
  EXPECT_TRUE(CheckWireTaskSpec(t).ok());
}

}  // namespace
}  // namespace ranksweep
