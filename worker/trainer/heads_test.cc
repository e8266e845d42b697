// Heads and the exact constructions, checked exhaustively through the same
// forward code trained heads use (RunTask with a construction).
#include "worker/trainer/heads.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/dataset.h"
#include "worker/trainer/trainer.h"

namespace ranksweep::trainer {
namespace {

TaskSpec ConstructionTask(HeadKind kind, Construction c, int m, int n) {
  TaskSpec t;
  t.dataset.kind = DatasetKind::kExhaustive;
  t.dataset.m = m;
  t.dataset.seq_len = n;
  t.head.kind = kind;
  t.head.construction = c;
  t.rank = 0;
  t.seeds = {0};
  return t;
}

SeedResult RunOrDie(const TaskSpec& t) {
  auto r = RunTask(t, {.device = "cpu"});
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_EQ(r->seeds.size(), 1u);
  return r->seeds[0];
}

struct Shape {
  int m;
  int n;
};

TEST(ConstructionTest, Rank1IsExactForNAtMost2) {
  for (Shape s : {Shape{12, 1}, Shape{8, 2}, Shape{9, 2}}) {
    for (FeatureMap f : {FeatureMap::kEluPlusOne, FeatureMap::kFavorPlus}) {
      TaskSpec t = ConstructionTask(HeadKind::kKernel, Construction::kRank1, s.m, s.n);
      t.head.feature_map = f;
      const SeedResult r = RunOrDie(t);
      EXPECT_EQ(r.train.sequences, int64_t{1} << (s.m * s.n));
      EXPECT_EQ(r.train.error, 0.0) << "m=" << s.m << " N=" << s.n;
      EXPECT_EQ(r.train.position_accuracy, 1.0);
      EXPECT_LT(r.train.max_abs_error, 1e-4);
      EXPECT_EQ(r.steps, 0);
    }
  }
}

// Independent brute force: the rank-1 head predicts
// round(2 <x_i, mean_j x_j> - |x_i|) = round((2 sum_j <x_i,x_j> - 3|x_i|) / 3)
// at N = 3 (no ties: 2S - 3w over 3 is never a half-integer).
TEST(ConstructionTest, Rank1AtN3WrongCountsMatchBruteForce) {
  for (int m : {3, 4, 6}) {
    int64_t wrong_seqs = 0, wrong_pos = 0;
    const uint64_t mask = (1u << m) - 1;
    for (uint64_t s = 0; s < (1u << (3 * m)); ++s) {
      const uint64_t x[3] = {s & mask, (s >> m) & mask, (s >> (2 * m)) & mask};
      bool wrong = false;
      for (int i = 0; i < 3; ++i) {
        int sum = 0, best = 64;
        for (int j = 0; j < 3; ++j) {
          const int o = __builtin_popcountll(x[i] & x[j]);
          sum += o;
          best = std::min(best, o);
        }
        const int w = __builtin_popcountll(x[i]);
        const long pred = std::lround((2.0 * sum - 3.0 * w) / 3.0);
        if (pred != best) {
          ++wrong_pos;
          wrong = true;
        }
      }
      wrong_seqs += wrong;
    }
    const int64_t total = int64_t{1} << (3 * m);
    const SeedResult r =
        RunOrDie(ConstructionTask(HeadKind::kKernel, Construction::kRank1, m, 3));
    EXPECT_GT(wrong_seqs, 0);
    EXPECT_EQ(std::llround((1.0 - r.train.exact_accuracy) * total), wrong_seqs) << "m=" << m;
    EXPECT_EQ(std::llround((1.0 - r.train.position_accuracy) * total * 3), wrong_pos)
        << "m=" << m;
  }
}

TEST(ConstructionTest, IndicatorIsExact) {
  for (Shape s : {Shape{12, 1}, Shape{6, 3}, Shape{4, 4}, Shape{3, 6}}) {
    const SeedResult r =
        RunOrDie(ConstructionTask(HeadKind::kKernel, Construction::kIndicator, s.m, s.n));
    EXPECT_EQ(r.train.sequences, int64_t{1} << (s.m * s.n));
    EXPECT_EQ(r.train.error, 0.0) << "m=" << s.m << " N=" << s.n;
    EXPECT_LT(r.train.max_abs_error, 0.5);
  }
}

TEST(ConstructionTest, SoftmaxWithMDimScoresIsExact) {
  for (Shape s : {Shape{6, 3}, Shape{4, 4}, Shape{3, 6}, Shape{2, 9}}) {
    const SeedResult r =
        RunOrDie(ConstructionTask(HeadKind::kSoftmax, Construction::kSoftmaxExact, s.m, s.n));
    EXPECT_EQ(r.train.error, 0.0) << "m=" << s.m << " N=" << s.n;
    EXPECT_LT(r.train.max_abs_error, 0.5);
  }
}

TEST(ConstructionTest, SoftmaxFailsBelowTheSafeBeta) {
  // With beta -> 0 the softmax averages uniformly: no longer exact at N = 3,
  // which shows the exhaustive check can fail.
  TaskSpec t = ConstructionTask(HeadKind::kSoftmax, Construction::kSoftmaxExact, 4, 3);
  t.head.beta = 0.01;
  EXPECT_GT(RunOrDie(t).train.error, 0.0);
}

HeadConfig Config(HeadKind kind, FeatureMap f, int rank, int heads = 1) {
  HeadConfig c;
  c.kind = kind;
  c.feature_map = f;
  c.m = 5;
  c.rank = rank;
  c.num_heads = heads;
  c.value_dim = 5;
  c.score_dim = 5;
  c.hidden = {7};
  return c;
}

TEST(HeadTest, ShapesForEveryKindAndFeatureMap) {
  torch::Tensor x = torch::randint(0, 2, {3, 4, 3, 5}).to(torch::kFloat32);
  for (FeatureMap f : {FeatureMap::kEluPlusOne, FeatureMap::kReluEps, FeatureMap::kSoftplus,
                       FeatureMap::kExp, FeatureMap::kFavorPlus}) {
    auto head = MakeHead(Config(HeadKind::kKernel, f, 6), {1, 2, 3});
    torch::Tensor out = head->forward(x);
    EXPECT_EQ(out.sizes(), (std::vector<int64_t>{3, 4, 3, 1}));
    EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
    auto* kernel = dynamic_cast<KernelHeadImpl*>(head.get());
    ASSERT_NE(kernel, nullptr);
    // Nonnegative heads have positive features.
    EXPECT_GT(kernel->QueryFeatures(x.reshape({3, 12, 5})).min().item<float>(), 0.0f);
  }
  auto multi = MakeHead(Config(HeadKind::kMultiheadKernel, FeatureMap::kEluPlusOne, 2, 4), {1});
  EXPECT_EQ(multi->forward(x.narrow(0, 0, 1)).sizes(), (std::vector<int64_t>{1, 4, 3, 1}));
  // Signed heads skip the feature map: their features take both signs.
  HeadConfig sc = Config(HeadKind::kSignedKernel, FeatureMap::kEluPlusOne, 8);
  sc.hidden = {};
  auto signed_head = MakeHead(sc, {1});
  auto* sk = dynamic_cast<KernelHeadImpl*>(signed_head.get());
  torch::Tensor all_tokens = torch::eye(5).unsqueeze(0);  // the 5 unit vectors
  torch::Tensor feats = sk->QueryFeatures(all_tokens);
  EXPECT_LT(feats.min().item<float>(), 0.0f);
  EXPECT_GT(feats.max().item<float>(), 0.0f);
  EXPECT_TRUE(torch::isfinite(signed_head->forward(x.narrow(0, 0, 1))).all().item<bool>());
  HeadConfig ce = Config(HeadKind::kSoftmax, FeatureMap::kEluPlusOne, 0);
  ce.out_dim = 6;
  EXPECT_EQ(MakeHead(ce, {1, 2, 3})->forward(x).sizes(), (std::vector<int64_t>{3, 4, 3, 6}));
}

TEST(HeadTest, EachSeedSliceEqualsItsSingleSeedHead) {
  for (HeadKind kind : {HeadKind::kKernel, HeadKind::kSoftmax}) {
    auto fused = MakeHead(Config(kind, FeatureMap::kFavorPlus, 4), {5, 9, 11});
    auto single = MakeHead(Config(kind, FeatureMap::kFavorPlus, 4), {9});
    auto fp = fused->named_parameters(), sp = single->named_parameters();
    ASSERT_EQ(fp.size(), sp.size());
    for (const auto& item : sp) {
      EXPECT_TRUE(torch::equal(fp[item.key()].narrow(0, 1, 1), item.value())) << item.key();
    }
    // Different seeds start differently.
    EXPECT_FALSE(torch::equal(fp[sp.begin()->key()].narrow(0, 0, 1), sp.begin()->value()));
  }
}

}  // namespace
}  // namespace ranksweep::trainer
