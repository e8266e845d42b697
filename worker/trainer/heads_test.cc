// Heads and the exact constructions, checked exhaustively through the same
// forward code trained heads use (RunTask with a construction).
#include "worker/trainer/heads.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/dataset.h"
#include "worker/trainer/loop_math.h"
#include "worker/trainer/token_kernel.h"
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

// A rank-1 kernel head trained long on the witness family drives some rows'
// denominators towards 0. Their quotient's gradient, -1 / den^2, must stay
// finite for every denominator the floor lets through: with the floor at
// 1e-30 a den of 1e-25 squared to 0 in float, the gradient became -inf, and
// the seed's loss NaN.
TEST(QuotientTest, GradientIsFiniteForEveryDenominatorAboveAndBelowTheFloor) {
  for (float den = 1e-37f; den < 10.0f; den *= 3.0f) {
    const loops::Quotient q = loops::QuotientOf(den, 0.0f, 0.0f);
    EXPECT_TRUE(std::isfinite(q.c)) << den;
    EXPECT_TRUE(std::isfinite(q.dc)) << den;
  }
  // The bmm path floors the same denominator with clamp_min: its backward
  // divides by the floored denominator squared.
  torch::Tensor den = torch::full({1}, 1e-25f, torch::requires_grad());
  torch::Tensor num = torch::full({1}, 1e-26f, torch::requires_grad());
  (num / den.clamp_min(loops::kDenFloor)).sum().backward();
  EXPECT_TRUE(std::isfinite(num.grad().item<float>()));
  EXPECT_TRUE(std::isfinite(den.grad().item<float>()));
}

// The minibatch kernels' e^x (elu+1 features, softmax weights): within
// 1.02 ulp of the double exp on [-87, 0] (every 61st float here; the bound
// was found over every float), 0 below -87 (ExpNonPositive), and the same
// in every lane of a vector as for the float alone.
TEST(FastExpTest, WithinOneUlpOnMinus87ToZeroAndTheSameInEveryLane) {
  double worst = 0;
  float worst_at = 0;
  for (uint32_t bits = 0x80000000u;; bits += 61) {  // -0 down to -87
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    if (x < -87.0f) break;
    const double exact = std::exp(static_cast<double>(x));
    int exponent;
    std::frexp(exact, &exponent);
    const double ulp = std::ldexp(1.0, exponent - 24);
    const double err = std::fabs(loops::ExpClamped(x) - exact) / ulp;
    if (err > worst) {
      worst = err;
      worst_at = x;
    }
  }
  EXPECT_LE(worst, 1.02) << "at x = " << worst_at;
  EXPECT_EQ(loops::ExpClamped(0.0f), 1.0f);
  EXPECT_EQ(loops::ExpClamped(-1e30f), loops::ExpClamped(-87.0f));
  EXPECT_EQ(loops::ExpNonPositive(-87.5f), 0.0f);
  EXPECT_EQ(loops::ExpNonPositive(-86.5f), loops::ExpClamped(-86.5f));
  typedef float Vec4 __attribute__((vector_size(16)));
  const Vec4 x = {-0.3f, -12.25f, -86.9f, -100.0f};
  const Vec4 clamped = loops::ExpClamped(x), non_positive = loops::ExpNonPositive(x);
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(clamped[l], loops::ExpClamped(x[l])) << l;
    EXPECT_EQ(non_positive[l], loops::ExpNonPositive(x[l])) << l;
  }
}

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

// Runs an attention function in double on the bmm path (the reference), in
// float on the bmm path and in float on the loops; `run` returns the output
// and the input gradients. The loops must be as close to the reference as
// float bmm is, within rounding: where terms cancel (n = 1 kernel: y = v,
// whose gradient in fq and fk is 0), float error grows as 1/den on both.
// A fresh leaf copy of t in `type` that records its gradient.
torch::Tensor Leaf(const torch::Tensor& t, torch::ScalarType type) {
  return t.to(type).detach().requires_grad_();
}

using AttentionRun =
    std::function<std::vector<torch::Tensor>(torch::ScalarType, AttentionImpl)>;
void ExpectLoopsAsCloseAsBmm(const AttentionRun& run, const std::string& what) {
  std::vector<torch::Tensor> want = run(torch::kFloat64, AttentionImpl::kBmm);
  std::vector<torch::Tensor> bmm = run(torch::kFloat32, AttentionImpl::kBmm);
  std::vector<torch::Tensor> got = run(torch::kFloat32, AttentionImpl::kLoops);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].sizes(), want[i].sizes());
    want[i] = want[i].to(torch::kFloat64);
    const double scale = std::max(1.0, want[i].abs().max().item<double>());
    const double bmm_error = (bmm[i].to(torch::kFloat64) - want[i]).abs().max().item<double>();
    EXPECT_LE((got[i].to(torch::kFloat64) - want[i]).abs().max().item<double>(),
              std::max(4 * bmm_error, 1e-5 * scale))
        << what << " tensor " << i << " (0 = output, then the inputs in order)";
  }
}

// The written-out CPU loops against LibTorch's bmm path in double, values
// and all three gradients, across lengths, feature widths (with and without
// a tail after the loops' blocks of 8) and more groups than one parallel
// chunk holds.
TEST(ShortAttentionTest, LoopsMatchBmmInValueAndGradient) {
  torch::manual_seed(3);
  // eps 0: nonnegative features; kSignedEps: the signed quotient, on
  // positive features and on features of both signs (scores of both signs
  // exercise the gradient through S = sum_j |a_ij|).
  for (auto [eps, mixed] : {std::pair{0.0, false}, std::pair{KernelHeadImpl::kSignedEps, false},
                            std::pair{KernelHeadImpl::kSignedEps, true}}) {
    for (int64_t n : {1, 3, 5}) {
      for (int64_t r : {1, 16, 19}) {
        for (int64_t dv : {1, 24}) {
          const int64_t g = 300;
          const torch::Tensor q0 = mixed ? torch::randn({g, n, r}, torch::kFloat64)
                                         : torch::rand({g, n, r}, torch::kFloat64) + 0.05;
          const torch::Tensor k0 = mixed ? torch::randn({g, n, r}, torch::kFloat64)
                                         : torch::rand({g, n, r}, torch::kFloat64) + 0.05;
          const torch::Tensor v0 = torch::randn({g, n, dv}, torch::kFloat64);
          const torch::Tensor w = torch::randn({g, n, dv}, torch::kFloat64);
          ExpectLoopsAsCloseAsBmm(
              [&](torch::ScalarType type, AttentionImpl impl) {
                torch::Tensor q = Leaf(q0, type), k = Leaf(k0, type), v = Leaf(v0, type);
                torch::Tensor y = NormalizedAttention(q, k, v, eps, impl);
                (y * w.to(type)).sum().backward();
                return std::vector<torch::Tensor>{y.detach(), q.grad(), k.grad(), v.grad()};
              },
              absl::StrCat("eps ", eps, mixed ? " mixed" : "", " n ", n, " r ", r, " dv ", dv));
        }
      }
    }
  }
}

// The same for softmax attention, inv_tau's gradient (summed over each
// seed's groups) included; large scores test the max subtraction.
TEST(ShortAttentionTest, SoftmaxLoopsMatchBmmInValueAndGradient) {
  torch::manual_seed(6);
  const int64_t seeds = 3, per_seed = 100;
  for (int64_t n : {1, 3, 5}) {
    for (int64_t ds : {1, 24}) {
      for (double scale_in : {1.0, 30.0}) {
        const int64_t g = seeds * per_seed, dv = 7;
        const torch::Tensor q0 = scale_in * torch::randn({g, n, ds}, torch::kFloat64);
        const torch::Tensor k0 = torch::randn({g, n, ds}, torch::kFloat64);
        const torch::Tensor v0 = torch::randn({g, n, dv}, torch::kFloat64);
        const torch::Tensor t0 = torch::tensor({0.1, 1.0, 2.5}, torch::kFloat64);
        const torch::Tensor w = torch::randn({g, n, dv}, torch::kFloat64);
        ExpectLoopsAsCloseAsBmm(
            [&](torch::ScalarType type, AttentionImpl impl) {
              torch::Tensor q = Leaf(q0, type), k = Leaf(k0, type), v = Leaf(v0, type);
              torch::Tensor t = Leaf(t0, type);
              torch::Tensor y = SoftmaxAttention(q, k, v, t, impl);
              (y * w.to(type)).sum().backward();
              return std::vector<torch::Tensor>{y.detach(), q.grad(), k.grad(), v.grad(),
                                                t.grad()};
            },
            absl::StrCat("n ", n, " ds ", ds, " scores x", scale_in));
      }
    }
  }
}

// A query whose features are all 0 has den = 0: the floor keeps its output
// at 0 and passes no gradient through den, on both paths alike.
TEST(ShortAttentionTest, AZeroRowIsZeroOnBothPaths) {
  torch::manual_seed(4);
  const torch::Tensor q0 = torch::rand({2, 3, 4}) + 0.05;
  q0[1][2].zero_();
  const torch::Tensor k0 = torch::rand({2, 3, 4}) + 0.05;
  const torch::Tensor v0 = torch::randn({2, 3, 6});
  std::vector<std::vector<torch::Tensor>> runs;
  for (AttentionImpl impl : {AttentionImpl::kBmm, AttentionImpl::kLoops}) {
    torch::Tensor q = q0.clone().requires_grad_();
    torch::Tensor k = k0.clone().requires_grad_();
    torch::Tensor v = v0.clone().requires_grad_();
    torch::Tensor y = NormalizedAttention(q, k, v, 0.0, impl);
    EXPECT_TRUE(torch::equal(y[1][2], torch::zeros({6})));
    y.sum().backward();
    runs.push_back({y.detach(), q.grad(), k.grad(), v.grad()});
  }
  for (size_t i = 0; i < runs[0].size(); ++i) {
    EXPECT_TRUE(torch::isfinite(runs[1][i]).all().item<bool>()) << "tensor " << i;
    EXPECT_TRUE(torch::allclose(runs[1][i], runs[0][i], 1e-5, 1e-6)) << "tensor " << i;
  }
}

TEST(ShortAttentionTest, LoopsTakeOnlyShortFloatSequences) {
  const torch::Tensor f64 = torch::rand({2, 3, 4}, torch::kFloat64);
  EXPECT_THROW(NormalizedAttention(f64, f64, f64, 0.0, AttentionImpl::kLoops), c10::Error);
  const torch::Tensor long_q = torch::rand({2, kShortAttentionMaxLen + 1, 4});
  EXPECT_THROW(NormalizedAttention(long_q, long_q, long_q, 0.0, AttentionImpl::kLoops),
               c10::Error);
  // kAuto falls back to bmm for both.
  EXPECT_EQ(NormalizedAttention(f64, f64, f64, 0.0).sizes(), f64.sizes());
  EXPECT_EQ(NormalizedAttention(long_q, long_q, long_q, 0.0).sizes(), long_q.sizes());
  const torch::Tensor t64 = torch::ones({2}, torch::kFloat64);
  EXPECT_THROW(SoftmaxAttention(f64, f64, f64, t64, AttentionImpl::kLoops), c10::Error);
  EXPECT_EQ(SoftmaxAttention(f64, f64, f64, t64).sizes(), f64.sizes());
  EXPECT_EQ(SoftmaxAttention(long_q, long_q, long_q, torch::ones({2})).sizes(), long_q.sizes());
}

// Through a whole head (multihead included): training in float takes the
// loops on the CPU, and agrees with the bmm path.
TEST(ShortAttentionTest, HeadsAgreeOnEitherPath) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randint(0, 2, {3, 40, 3, 5}).to(torch::kFloat32);
  const torch::Tensor w = torch::randn({3, 40, 3, 1});
  for (auto [kind, heads] :
       {std::pair{HeadKind::kKernel, 1}, std::pair{HeadKind::kSignedKernel, 1},
        std::pair{HeadKind::kMultiheadKernel, 3}, std::pair{HeadKind::kSoftmax, 1}}) {
    std::vector<std::vector<torch::Tensor>> runs;
    for (AttentionImpl impl : {AttentionImpl::kBmm, AttentionImpl::kLoops}) {
      const HeadConfig config = Config(kind, FeatureMap::kEluPlusOne, 4, heads);
      const std::vector<uint64_t> seeds = {7, 8, 9};
      std::shared_ptr<AttentionHeadImpl> head;
      if (kind == HeadKind::kSoftmax) {
        auto softmax = std::make_shared<SoftmaxHeadImpl>(config, seeds);
        softmax->inv_tau().detach().copy_(torch::tensor({0.1f, 1.0f, 3.0f}));
        softmax->set_attention_impl(impl);
        head = softmax;
      } else {
        auto kernel = std::make_shared<KernelHeadImpl>(config, seeds);
        kernel->set_attention_impl(impl);
        head = kernel;
      }
      torch::Tensor out = head->forward(x);
      (out * w).sum().backward();
      std::vector<torch::Tensor> got = {out.detach()};
      for (auto& p : head->parameters()) got.push_back(p.grad().clone());
      runs.push_back(got);
    }
    ASSERT_EQ(runs[0].size(), runs[1].size());
    for (size_t i = 0; i < runs[0].size(); ++i) {
      const double scale = std::max(1.0, runs[0][i].abs().max().item<double>());
      EXPECT_LE((runs[1][i] - runs[0][i]).abs().max().item<double>(), 1e-5 * scale)
          << "kind " << Name(kind) << " tensor " << i << " (0 = output)";
    }
  }
}

// A minibatch of the sequences of `ti`: the same for every seed (shared)
// or drawn per seed, as indices [1 or S, B, N] and tokens [S, B, N, m].
struct Minibatch {
  torch::Tensor idx, x;
};
Minibatch MinibatchOf(const TokenIndex& ti, bool shared, int64_t s) {
  const int64_t b = ti.index.size(0), n = ti.index.size(1), m = ti.table.size(1);
  Minibatch mb;
  mb.idx = shared ? ti.index.unsqueeze(0)
                  : ti.index.index_select(0, torch::randint(0, b, {s * b}).to(torch::kLong))
                        .view({s, b, n});
  mb.x = ti.table.index_select(0, mb.idx.reshape({-1}))
             .view({mb.idx.size(0), b, n, m})
             .expand({s, b, n, m});
  return mb;
}

// Each of `fused` (output or loss, then every parameter gradient) as close
// to `want` (the unfused head in double) as the unfused head in float is,
// within rounding.
void ExpectAsCloseAsUnfused(const std::vector<torch::Tensor>& want,
                            const std::vector<torch::Tensor>& unfused,
                            const std::vector<torch::Tensor>& fused, const std::string& what) {
  ASSERT_EQ(fused.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(fused[i].sizes(), want[i].sizes()) << what << " tensor " << i;
    const double scale = std::max(1.0, want[i].abs().max().item<double>());
    const double unfused_error = (unfused[i] - want[i]).abs().max().item<double>();
    EXPECT_LE((fused[i] - want[i]).abs().max().item<double>(),
              std::max(4 * unfused_error, 1e-5 * scale))
        << what << " tensor " << i << " (0 = output or loss)";
  }
}

// The fused CPU head (token_kernel.h) against the unfused head in double,
// output and every parameter gradient: as close as the unfused head in
// float is, within rounding. Rank 200 makes several blocks per seed, one
// seed with two threads several chunks per seed; shared and per-seed
// minibatches, both readouts, every kind it applies to.
TEST(TokenKernelTest, FusedPathMatchesTheUnfusedHeadInDouble) {
  struct Case {
    HeadKind kind;
    FeatureMap map;
    int rank;
    int out_dim;
    int seeds;
  };
  std::vector<Case> cases;
  for (FeatureMap f : {FeatureMap::kEluPlusOne, FeatureMap::kReluEps, FeatureMap::kExp}) {
    cases.push_back({HeadKind::kKernel, f, 4, 1, 3});
    cases.push_back({HeadKind::kKernel, f, 4, 6, 3});
  }
  cases.push_back({HeadKind::kKernel, FeatureMap::kEluPlusOne, 200, 1, 3});
  cases.push_back({HeadKind::kKernel, FeatureMap::kEluPlusOne, 200, 1, 1});
  cases.push_back({HeadKind::kSignedKernel, FeatureMap::kEluPlusOne, 4, 1, 3});
  cases.push_back({HeadKind::kSoftmax, FeatureMap::kEluPlusOne, 0, 1, 3});
  cases.push_back({HeadKind::kSoftmax, FeatureMap::kEluPlusOne, 0, 6, 1});
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  torch::manual_seed(8);
  const int64_t b = 150, n = 3, m = 5;
  std::vector<uint64_t> tokens;
  for (int64_t i = 0; i < b * n; ++i) tokens.push_back(static_cast<uint64_t>(i * 11 % 32));
  const TokenIndex ti = IndexTokens(tokens, b, n, m, torch::kCPU);
  for (const Case& c : cases) {
    HeadConfig config = Config(c.kind, c.map, c.rank);
    config.hidden = {};
    config.out_dim = c.out_dim;
    std::vector<uint64_t> seeds;
    for (int s = 0; s < c.seeds; ++s) seeds.push_back(20 + s);
    const int64_t s = c.seeds;
    for (bool shared : {true, false}) {
      const Minibatch mb = MinibatchOf(ti, shared, s);
      const torch::Tensor& idx = mb.idx;
      const torch::Tensor& x = mb.x;
      const torch::Tensor weight = torch::randn({s, b, n, c.out_dim}, torch::kFloat64);
      auto head = MakeHead(config, seeds);
      if (c.kind == HeadKind::kSoftmax) {  // sharper than at the start of training
        auto* softmax = dynamic_cast<SoftmaxHeadImpl*>(head.get());
        torch::NoGradGuard no_grad;
        softmax->inv_tau().copy_(torch::linspace(0.5, 2.0, s));
      }
      auto run = [&](torch::ScalarType type, bool fused) {
        head->to(type);
        for (auto& p : head->parameters()) p.mutable_grad() = torch::Tensor();
        torch::Tensor out =
            fused ? head->ForwardIndexed(ti.table, idx, AttentionHeadImpl::Path::kFused)
                  : head->forward(x.to(type));
        (out * weight.to(type)).sum().backward();
        std::vector<torch::Tensor> got = {out.detach().to(torch::kFloat64)};
        for (auto& p : head->parameters()) got.push_back(p.grad().to(torch::kFloat64));
        return got;
      };
      const std::vector<torch::Tensor> want = run(torch::kFloat64, false);
      const std::vector<torch::Tensor> unfused = run(torch::kFloat32, false);
      ASSERT_TRUE(head->UsesTokenKernel(ti.table, n));
      ExpectAsCloseAsUnfused(want, unfused, run(torch::kFloat32, true),
                             absl::StrCat("kind ", Name(c.kind), " map ", Name(c.map), " rank ",
                                          c.rank, " out ", c.out_dim, " seeds ", s, " shared ",
                                          shared));
    }
  }
  at::set_num_threads(threads);
}

// The one-pass training loss (IndexedMseLoss) against the loss formed from
// the unfused head's readouts in double: value and every parameter
// gradient, as close as the unfused head in float is. Per-seed and shared
// targets; a weight that leaves the first position unscored; ranks below
// and above one vector of features; every feature map; tokens that repeat
// (32 of them in 360 positions: maps formed once per table row) and tokens
// that hardly do (m = 8: maps formed per position).
TEST(TokenKernelTest, OnePassMseLossMatchesTheUnfusedLossInDouble) {
  torch::manual_seed(9);
  const int64_t b = 120, n = 3, s = 3;
  struct Case {
    HeadKind kind;
    FeatureMap map;
    int rank;
  };
  const std::vector<Case> cases = {{HeadKind::kKernel, FeatureMap::kEluPlusOne, 150},
                                   {HeadKind::kKernel, FeatureMap::kEluPlusOne, 4},
                                   {HeadKind::kKernel, FeatureMap::kReluEps, 20},
                                   {HeadKind::kKernel, FeatureMap::kExp, 20},
                                   {HeadKind::kSignedKernel, FeatureMap::kEluPlusOne, 20},
                                   {HeadKind::kSoftmax, FeatureMap::kEluPlusOne, 0}};
  for (int m : {5, 8}) {
    std::vector<uint64_t> tokens;
    for (int64_t i = 0; i < b * n; ++i) {
      tokens.push_back(static_cast<uint64_t>(i * (m == 5 ? 7 : 37) % (int64_t{1} << m)));
    }
    const TokenIndex ti = IndexTokens(tokens, b, n, m, torch::kCPU);
    ASSERT_EQ(ti.table.size(0), m == 5 ? 32 : 256);
    for (const Case& c : cases) {
      for (bool shared : {true, false}) {
        HeadConfig config = Config(c.kind, c.map, c.rank);
        config.m = m;
        config.value_dim = m;
        config.score_dim = m;
        config.hidden = {};
        const Minibatch mb = MinibatchOf(ti, shared, s);
        const torch::Tensor& idx = mb.idx;
        const torch::Tensor& x = mb.x;
        const torch::Tensor targets =
            torch::randint(0, 4, {idx.size(0), b, n}).to(torch::kFloat32);
        const torch::Tensor weight = torch::tensor({0.0f, 0.5f, 1.5f}) / static_cast<float>(b);
        auto head = MakeHead(config, {30, 31, 32});
        auto run = [&](torch::ScalarType type, bool fused) {
          head->to(type);
          for (auto& p : head->parameters()) p.mutable_grad() = torch::Tensor();
          torch::Tensor loss;
          if (fused) {
            loss = head->IndexedMseLoss(ti.table, idx, targets, weight);
            EXPECT_TRUE(loss.defined());
          } else {
            const torch::Tensor d = head->forward(x.to(type)).squeeze(-1) - targets.to(type);
            loss = (d * d * weight.to(type)).sum();
          }
          loss.backward();
          std::vector<torch::Tensor> got = {loss.detach().to(torch::kFloat64)};
          for (auto& p : head->parameters()) got.push_back(p.grad().to(torch::kFloat64));
          return got;
        };
        const std::vector<torch::Tensor> want = run(torch::kFloat64, false);
        const std::vector<torch::Tensor> unfused = run(torch::kFloat32, false);
        ExpectAsCloseAsUnfused(want, unfused, run(torch::kFloat32, true),
                               absl::StrCat("kind ", Name(c.kind), " map ", Name(c.map), " rank ",
                                            c.rank, " m ", m, " shared ", shared));
      }
    }
  }
  const int64_t m = 5;
  std::vector<uint64_t> tokens;
  for (int64_t i = 0; i < b * n; ++i) tokens.push_back(static_cast<uint64_t>(i * 7 % 32));
  const TokenIndex ti = IndexTokens(tokens, b, n, m, torch::kCPU);
  // Cross-entropy readouts (out_dim > 1) are not this path's.
  HeadConfig config = Config(HeadKind::kKernel, FeatureMap::kEluPlusOne, 4);
  config.hidden = {};
  config.out_dim = 6;
  EXPECT_FALSE(MakeHead(config, {1})
                   ->IndexedMseLoss(ti.table, ti.index.unsqueeze(0),
                                    torch::zeros({1, b, n}), torch::ones({n}))
                   .defined());
}

// The OOD sweeps' widths (m = 12, 16, 24; score and value width m), which
// the fused path runs with the widths as compile-time constants: the
// softmax head and the kernel head at rank 1 (and rank 16: constant widths
// at m = 16, run-time ones otherwise), readouts and gradients through
// ForwardIndexed and the one-pass loss through IndexedMseLoss, each against
// the unfused head in double.
TEST(TokenKernelTest, OodWidthsMatchTheUnfusedHeadInDouble) {
  torch::manual_seed(10);
  const int64_t b = 90, n = 3, s = 2;
  for (int m : {12, 16, 24}) {
    std::vector<uint64_t> tokens;
    for (int64_t i = 0; i < b * n; ++i) {
      tokens.push_back(static_cast<uint64_t>((i * 2654435761u) % (uint64_t{1} << m)));
    }
    const TokenIndex ti = IndexTokens(tokens, b, n, m, torch::kCPU);
    for (auto [kind, rank] : {std::pair{HeadKind::kSoftmax, 0}, std::pair{HeadKind::kKernel, 1},
                              std::pair{HeadKind::kKernel, 16}}) {
      HeadConfig config = Config(kind, FeatureMap::kEluPlusOne, rank);
      config.m = m;
      config.value_dim = m;
      config.score_dim = m;
      config.hidden = {};
      const Minibatch mb = MinibatchOf(ti, /*shared=*/false, s);
      const torch::Tensor targets = torch::randint(0, 4, {s, b, n}).to(torch::kFloat32);
      const torch::Tensor weight = torch::tensor({0.0f, 0.5f, 1.5f}) / static_cast<float>(b);
      const torch::Tensor out_weight = torch::randn({s, b, n, 1}, torch::kFloat64);
      auto head = MakeHead(config, {40, 41});
      if (kind == HeadKind::kSoftmax) {  // sharper than at the start of training
        auto* softmax = dynamic_cast<SoftmaxHeadImpl*>(head.get());
        torch::NoGradGuard no_grad;
        softmax->inv_tau().copy_(torch::linspace(0.7, 1.6, s));
      }
      ASSERT_TRUE(head->UsesTokenKernel(ti.table, n));
      // loss: the one-pass loss (fused) or its unfused value; else the
      // readouts, with sum(out * out_weight) backpropagated.
      auto run = [&](torch::ScalarType type, bool fused, bool loss) {
        head->to(type);
        for (auto& p : head->parameters()) p.mutable_grad() = torch::Tensor();
        torch::Tensor value;
        if (loss && fused) {
          value = head->IndexedMseLoss(ti.table, mb.idx, targets, weight);
        } else if (loss) {
          const torch::Tensor d = head->forward(mb.x.to(type)).squeeze(-1) - targets.to(type);
          value = (d * d * weight.to(type)).sum();
        } else {
          value = fused ? head->ForwardIndexed(ti.table, mb.idx, AttentionHeadImpl::Path::kFused)
                        : head->forward(mb.x.to(type));
        }
        (loss ? value : (value * out_weight.to(type)).sum()).backward();
        std::vector<torch::Tensor> got = {value.detach().to(torch::kFloat64)};
        for (auto& p : head->parameters()) got.push_back(p.grad().to(torch::kFloat64));
        return got;
      };
      for (bool loss : {false, true}) {
        const std::vector<torch::Tensor> want = run(torch::kFloat64, false, loss);
        const std::vector<torch::Tensor> unfused = run(torch::kFloat32, false, loss);
        ExpectAsCloseAsUnfused(want, unfused, run(torch::kFloat32, true, loss),
                               absl::StrCat("kind ", Name(kind), " rank ", rank, " m ", m,
                                            loss ? " loss" : " readouts"));
      }
    }
  }
}

// The fused kernel takes tokens of 0/1 inputs only (its first layer sums
// weight rows) and rows of its table only: anything else is refused with
// the reason, before any work.
TEST(TokenKernelTest, RefusesATableOtherThanZeroOneAndRowsOutsideIt) {
  TokenKernelShape shape;
  shape.score = 2;
  shape.dv = 2;
  const torch::Tensor w = torch::zeros({1, 3, shape.width()});  // m = 2
  const torch::Tensor idx = torch::tensor({0, 1, 1}, torch::kLong).view({1, 3});
  const torch::Tensor binary = torch::tensor({0.0f, 1.0f, 1.0f, 1.0f}).view({2, 2});
  EXPECT_EQ(TokenKernelForward(binary, idx, w, torch::Tensor(), 3, shape).sizes(),
            (std::vector<int64_t>{1, 1, 3, 1}));
  const torch::Tensor halves = torch::tensor({0.0f, 0.5f, 1.0f, 1.0f}).view({2, 2});
  try {
    TokenKernelForward(halves, idx, w, torch::Tensor(), 3, shape);
    ADD_FAILURE() << "a table with 0.5 was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the table must hold only 0 and 1"), std::string::npos)
        << e.what();
  }
  const torch::Tensor outside = torch::tensor({0, 1, 2}, torch::kLong).view({1, 3});
  try {
    TokenKernelForward(binary, outside, w, torch::Tensor(), 3, shape);
    ADD_FAILURE() << "row 2 of a 2-row table was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("idx must hold rows of the table, 0 to 1"),
              std::string::npos)
        << e.what();
  }
}

// Where the fused path applies: single-layer kernel heads with elu+1,
// relu+eps or exp features, signed kernels and softmax heads, float on the
// CPU; not hidden layers, several heads, softplus or FAVOR+, double.
TEST(TokenKernelTest, AppliesToSingleLayerHeadsInFloat) {
  const torch::Tensor table = torch::randint(0, 2, {10, 5}).to(torch::kFloat32);
  auto uses = [&](HeadKind kind, FeatureMap map, std::vector<int> hidden, int heads) {
    HeadConfig config = Config(kind, map, 4, heads);
    config.hidden = hidden;
    return MakeHead(config, {1})->UsesTokenKernel(table, 3);
  };
  EXPECT_TRUE(uses(HeadKind::kKernel, FeatureMap::kEluPlusOne, {}, 1));
  EXPECT_TRUE(uses(HeadKind::kKernel, FeatureMap::kReluEps, {}, 1));
  EXPECT_TRUE(uses(HeadKind::kKernel, FeatureMap::kExp, {}, 1));
  EXPECT_TRUE(uses(HeadKind::kSignedKernel, FeatureMap::kEluPlusOne, {}, 1));
  EXPECT_TRUE(uses(HeadKind::kSoftmax, FeatureMap::kEluPlusOne, {}, 1));
  EXPECT_FALSE(uses(HeadKind::kKernel, FeatureMap::kEluPlusOne, {7}, 1));
  EXPECT_FALSE(uses(HeadKind::kKernel, FeatureMap::kSoftplus, {}, 1));
  EXPECT_FALSE(uses(HeadKind::kKernel, FeatureMap::kFavorPlus, {}, 1));
  EXPECT_FALSE(uses(HeadKind::kMultiheadKernel, FeatureMap::kEluPlusOne, {}, 2));
  HeadConfig config = Config(HeadKind::kKernel, FeatureMap::kEluPlusOne, 4);
  config.hidden = {};
  auto head = MakeHead(config, {1});
  EXPECT_FALSE(head->UsesTokenKernel(table.to(torch::kFloat64), 3));
  EXPECT_FALSE(head->UsesTokenKernel(table, kShortAttentionMaxLen + 1));
}

}  // namespace
}  // namespace ranksweep::trainer
