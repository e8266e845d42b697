// The written-out CPU attention loops (short_attention.h) against
// LibTorch's bmm path, alone and through whole heads, and the float math
// they share with the token kernels (loop_math.h): the floored quotient and
// the fast e^x.
#include "worker/trainer/short_attention.h"

#include <torch/utils.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/heads.h"
#include "worker/trainer/heads_test_fixture.h"
#include "worker/trainer/loop_math.h"

namespace ranksweep::trainer {
namespace {

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

}  // namespace
}  // namespace ranksweep::trainer
