#include "proto/convert.h"

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
  SweepSpec back = FromProto(ToProto(s));
  EXPECT_EQ(SweepSpecToJson(back), SweepSpecToJson(s));
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
}

}  // namespace
}  // namespace ranksweep
