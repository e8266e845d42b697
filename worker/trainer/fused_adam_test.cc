// FusedAdam's update rule, checked on one step whose result is known in
// closed form: whatever the CPU, the first Adam step moves a parameter by
// lr * g / (|g| + eps).
#include "worker/trainer/fused_adam.h"

#include <torch/types.h>

#include <vector>

#include "gtest/gtest.h"

namespace ranksweep::trainer {
namespace {

// The parameters after one step from zero with every gradient equal to `g`,
// for 2 seeds of 3 parameters each.
torch::Tensor AfterOneStep(const TrainSpec& spec, double g, bool capturable) {
  torch::Tensor p = torch::zeros({2, 3}, torch::kFloat).requires_grad_(true);
  FusedAdam adam({p}, spec, capturable);
  adam.ZeroGrad();
  (p * g).sum().backward();
  adam.Step();
  return p.detach().clone();
}

TEST(FusedAdamTest, TheFirstStepIsTheLearningRateTimesGOverItsSizePlusEps) {
  for (const bool capturable : {false, true}) {
    SCOPED_TRACE(capturable ? "capturable" : "eager");
    for (const double eps : {1e-8, 1e-3, 1.0}) {
      SCOPED_TRACE(eps);
      TrainSpec spec;
      spec.lr = 0.1;
      spec.eps = eps;
      const torch::Tensor p = AfterOneStep(spec, 2.0, capturable);
      const double want = -0.1 * 2.0 / (2.0 + eps);
      for (int64_t i = 0; i < p.numel(); ++i) {
        EXPECT_NEAR(p.flatten()[i].item<double>(), want, 1e-6);
      }
    }
  }
}

// A larger eps damps the step of a parameter whose gradient is small, and
// hardly the step of one whose gradient is large.
TEST(FusedAdamTest, ALargerEpsDampsSmallGradientsMost) {
  TrainSpec small_eps, large_eps;
  small_eps.eps = 1e-8;
  large_eps.eps = 1e-3;
  const double small_g = 1e-3, large_g = 10.0;
  const double damped_small = AfterOneStep(large_eps, small_g, false)[0][0].item<double>() /
                              AfterOneStep(small_eps, small_g, false)[0][0].item<double>();
  const double damped_large = AfterOneStep(large_eps, large_g, false)[0][0].item<double>() /
                              AfterOneStep(small_eps, large_g, false)[0][0].item<double>();
  // Each step is lr * g / (g + eps): the ratio is (g + 1e-8) / (g + 1e-3).
  EXPECT_NEAR(damped_small, (small_g + 1e-8) / (small_g + 1e-3), 1e-5);  // about 1/2
  EXPECT_NEAR(damped_large, (large_g + 1e-8) / (large_g + 1e-3), 1e-5);  // about 0.9999
}

}  // namespace
}  // namespace ranksweep::trainer
