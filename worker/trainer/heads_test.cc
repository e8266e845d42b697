// Heads and the exact constructions, checked exhaustively through the same
// forward code trained heads use (RunTask with a construction); the token
// index and the indexed forward's paths against the plain forward. The CPU
// attention loops are in short_attention_test.cc, the fused head in
// token_kernel_test.cc.
#include "worker/trainer/heads.h"

#include <torch/utils.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/dataset.h"
#include "worker/trainer/heads_test_fixture.h"
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

TEST(TokenIndexTest, TableRowsAreDistinctAndRebuildEveryPosition) {
  const int m = 5, n = 3;
  const std::vector<uint64_t> tokens = {3, 9, 3, 31, 0, 9, 9, 9, 9, 0, 3, 31};
  const TokenIndex ti = IndexTokens(tokens, 4, n, m, torch::kCPU);
  ASSERT_EQ(ti.table.sizes(), (std::vector<int64_t>{4, m}));  // 3, 9, 31, 0
  ASSERT_EQ(ti.index.sizes(), (std::vector<int64_t>{4, n}));
  EXPECT_EQ(ti.index[0][0].item<int64_t>(), 0);  // first occurrence order
  EXPECT_EQ(ti.index[0][1].item<int64_t>(), 1);
  for (int64_t i = 0; i < 12; ++i) {
    const torch::Tensor row = ti.table[ti.index.view({-1})[i].item<int64_t>()];
    for (int k = 0; k < m; ++k) {
      EXPECT_EQ(row[k].item<float>(), static_cast<float>((tokens[i] >> k) & 1)) << i;
    }
  }
}

// The indexed forward (maps on distinct tokens, then the pair or the token
// path) computes forward(x): outputs and every parameter's gradient agree
// to rounding, for every head kind, feature map and readout, with per-seed
// sequences (minibatches) and with sequences shared by all seeds. In double
// precision, so the tolerance can be tight even for the signed kernel, whose
// y = num * den / (den^2 + 1e-6) amplifies rounding by up to 1e6 where
// den ~ 0; in float the paths agree to ~1e-6 relative elsewhere.
TEST(HeadTest, IndexedForwardEqualsPlainForward) {
  struct Case {
    HeadKind kind;
    FeatureMap map;
    int heads;
    int out_dim;
    std::vector<int> hidden;
  };
  std::vector<Case> cases;
  for (FeatureMap f : {FeatureMap::kEluPlusOne, FeatureMap::kReluEps, FeatureMap::kSoftplus,
                       FeatureMap::kExp, FeatureMap::kFavorPlus}) {
    cases.push_back({HeadKind::kKernel, f, 1, 1, {}});
    cases.push_back({HeadKind::kKernel, f, 1, 6, {7}});
  }
  cases.push_back({HeadKind::kSignedKernel, FeatureMap::kEluPlusOne, 1, 1, {}});
  cases.push_back({HeadKind::kSignedKernel, FeatureMap::kEluPlusOne, 1, 6, {7}});
  cases.push_back({HeadKind::kMultiheadKernel, FeatureMap::kEluPlusOne, 3, 1, {}});
  cases.push_back({HeadKind::kMultiheadKernel, FeatureMap::kFavorPlus, 2, 6, {7, 4}});
  cases.push_back({HeadKind::kSoftmax, FeatureMap::kEluPlusOne, 1, 1, {}});
  cases.push_back({HeadKind::kSoftmax, FeatureMap::kEluPlusOne, 1, 6, {}});

  const int64_t s = 3, b = 7, n = 3, m = 5;
  torch::manual_seed(0);
  // 6 distinct tokens; sequences drawn from them.
  const std::vector<uint64_t> vocab = {1, 6, 11, 16, 23, 30};
  std::vector<uint64_t> tokens;
  for (int64_t i = 0; i < b * n; ++i) tokens.push_back(vocab[(i * 7 + i / 5) % vocab.size()]);
  TokenIndex ti = IndexTokens(tokens, b, n, m, torch::kCPU);
  ti.table = ti.table.to(torch::kFloat64);
  const int64_t d = ti.table.size(0);
  ASSERT_GE(d, 4);
  const torch::Tensor per_seed = torch::randint(0, b, {s, b}).to(torch::kLong);  // minibatches
  for (const Case& c : cases) {
    HeadConfig config = Config(c.kind, c.map, 4, c.heads);
    config.hidden = c.hidden;
    config.out_dim = c.out_dim;
    for (bool shared : {true, false}) {
      torch::Tensor idx = shared ? ti.index.unsqueeze(0)
                                 : ti.index.index_select(0, per_seed.view({-1})).view({s, b, n});
      torch::Tensor x = ti.table.index_select(0, idx.reshape({-1})).view({idx.size(0), b, n, m})
                            .expand({s, b, n, m});
      torch::Tensor weight = torch::randn({s, b, n, c.out_dim}, torch::kFloat64);
      auto head = MakeHead(config, {4, 5, 6});
      head->to(torch::kFloat64);
      auto run = [&](int path) {
        for (auto& p : head->parameters()) p.mutable_grad() = torch::Tensor();
        torch::Tensor out =
            path == 0 ? head->forward(x)
                      : head->ForwardIndexed(ti.table, idx,
                                             path == 1 ? AttentionHeadImpl::Path::kPairs
                                                       : AttentionHeadImpl::Path::kTokens);
        (out * weight).sum().backward();
        std::vector<torch::Tensor> grads = {out.detach()};
        for (auto& p : head->parameters()) grads.push_back(p.grad().clone());
        return grads;
      };
      const std::vector<torch::Tensor> plain = run(0);
      for (int path : {1, 2}) {
        const std::vector<torch::Tensor> got = run(path);
        const std::string what = absl::StrCat("kind ", Name(c.kind), " map ", Name(c.map),
                                              " heads ", c.heads, " out ", c.out_dim,
                                              " shared ", shared, " path ", path);
        ASSERT_EQ(got.size(), plain.size());
        EXPECT_EQ(got[0].sizes(), plain[0].sizes()) << what;
        for (size_t i = 0; i < got.size(); ++i) {
          const double scale = std::max(1.0, plain[i].abs().max().item<double>());
          const double diff = (got[i] - plain[i]).abs().max().item<double>();
          EXPECT_LE(diff, 1e-9 * scale) << what << " tensor " << i << " (0 = output)";
        }
      }
      // The same head in float (what training uses): outputs within 1e-6
      // relative, except where the signed quotient amplifies rounding.
      if (c.kind == HeadKind::kSignedKernel) continue;
      head->to(torch::kFloat32);
      torch::NoGradGuard no_grad;
      const torch::Tensor plain32 = head->forward(x.to(torch::kFloat32));
      for (auto path : {AttentionHeadImpl::Path::kPairs, AttentionHeadImpl::Path::kTokens}) {
        const torch::Tensor got32 =
            head->ForwardIndexed(ti.table.to(torch::kFloat32), idx, path);
        const double scale = std::max(1.0, plain32.abs().max().item<double>());
        EXPECT_LE((got32 - plain32).abs().max().item<double>(), 1e-6 * scale)
            << "float, kind " << Name(c.kind) << " map " << Name(c.map) << " out " << c.out_dim;
      }
    }
  }
}

TEST(HeadTest, IndexedForwardWithoutRepeatsIsThePlainForward) {
  // Every token distinct: maps on the table would not save anything, so
  // ForwardIndexed runs forward on the gathered tokens, bit for bit.
  std::vector<uint64_t> tokens;
  for (uint64_t t = 0; t < 12; ++t) tokens.push_back(t);
  const TokenIndex ti = IndexTokens(tokens, 4, 3, 5, torch::kCPU);
  ASSERT_EQ(ti.table.size(0), 12);
  auto head = MakeHead(Config(HeadKind::kKernel, FeatureMap::kEluPlusOne, 4), {1, 2});
  const torch::Tensor x = ti.table.view({1, 4, 3, 5}).expand({2, 4, 3, 5});
  EXPECT_TRUE(torch::equal(head->ForwardIndexed(ti.table, ti.index.unsqueeze(0)),
                           head->forward(x)));
}

TEST(HeadTest, PairPathChosenForFewDistinctTokens) {
  HeadConfig c = Config(HeadKind::kKernel, FeatureMap::kEluPlusOne, 16);
  c.m = 24;
  c.value_dim = 24;
  c.hidden = {};
  auto head = MakeHead(c, {0});
  EXPECT_TRUE(head->UsesPairs(/*d=*/24, /*b=*/276, /*n=*/3));     // the witness family
  EXPECT_FALSE(head->UsesPairs(/*d=*/3000, /*b=*/1000, /*n=*/3));  // nearly all distinct
}

}  // namespace
}  // namespace ranksweep::trainer
