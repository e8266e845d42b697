#include "worker/trainer/fused_adam.h"

#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace ranksweep::trainer {

FusedAdam::FusedAdam(std::vector<torch::Tensor> params, const TrainSpec& spec, bool capturable)
    : params_(std::move(params)), spec_(spec), capturable_(capturable) {
  torch::NoGradGuard no_grad;
  const int64_t s_count = params_.front().size(0);
  int64_t total = 0;
  for (const auto& p : params_) total += p.numel();
  const auto options = params_.front().options();
  flat_ = torch::empty({total}, options);
  flat_grad_ = torch::zeros_like(flat_);
  std::vector<torch::Tensor> seed_of;  // seed index of every element
  int64_t offset = 0;
  for (auto& p : params_) {
    const int64_t n = p.numel();
    torch::Tensor view = flat_.narrow(0, offset, n).view(p.sizes());
    view.copy_(p);
    p.set_data(view);
    p.mutable_grad() = flat_grad_.narrow(0, offset, n).view(p.sizes());
    seed_of.push_back(torch::arange(s_count, options.dtype(torch::kLong))
                          .repeat_interleave(n / s_count));
    offset += n;
  }
  seed_of_ = torch::cat(seed_of);
  exp_avg_ = torch::zeros_like(flat_);
  exp_avg_sq_ = torch::zeros_like(flat_);
  if (capturable_) {
    step_t_ = torch::zeros({1}, options);
    mask_ = torch::ones_like(flat_);
    w1_ = mask_ * (1.0 - spec_.beta1);
    w2_ = mask_ * (1.0 - spec_.beta2);
  }
}

void FusedAdam::SetActive(const torch::Tensor& active, bool all_active) {
  torch::NoGradGuard no_grad;
  if (capturable_) {  // in place: a captured graph holds these tensors
    mask_.copy_(active.index_select(0, seed_of_));
    w1_.copy_(mask_ * (1.0 - spec_.beta1));
    w2_.copy_(mask_ * (1.0 - spec_.beta2));
    return;
  }
  all_active_ = all_active;
  if (all_active) return;
  mask_ = active.index_select(0, seed_of_);
  w1_ = mask_ * (1.0 - spec_.beta1);
  w2_ = mask_ * (1.0 - spec_.beta2);
}

void FusedAdam::Step() {
  torch::NoGradGuard no_grad;
  if (capturable_) {
    CapturableStep();
    return;
  }
  ++step_;
  // The constant schedule returns spec_.lr itself: its steps are the same
  // arithmetic as before schedules existed.
  const double lr = LearningRateAt(spec_, step_);
  const double bc1 = 1.0 - std::pow(spec_.beta1, step_);
  const double bc2 = 1.0 - std::pow(spec_.beta2, step_);
  torch::Tensor g = flat_grad_;
  if (spec_.weight_decay != 0) g = g + spec_.weight_decay * flat_;
  if (all_active_) {
    exp_avg_.lerp_(g, 1.0 - spec_.beta1);
    exp_avg_sq_.lerp_(g * g, 1.0 - spec_.beta2);
    const torch::Tensor denom = exp_avg_sq_.sqrt().div_(std::sqrt(bc2)).add_(spec_.eps);
    flat_.addcdiv_(exp_avg_, denom, -lr / bc1);
    return;
  }
  // Frozen seeds: weight 0 leaves moments and parameters bit-identical.
  exp_avg_.lerp_(g, w1_);
  exp_avg_sq_.lerp_(g * g, w2_);
  const torch::Tensor denom = exp_avg_sq_.sqrt().div_(std::sqrt(bc2)).add_(spec_.eps);
  flat_.addcmul_(exp_avg_ / denom, mask_, -lr / bc1);
}

void FusedAdam::CapturableStep() {
  step_t_.add_(1.0);
  const torch::Tensor bc1 = 1.0 - torch::pow(spec_.beta1, step_t_);
  const torch::Tensor bc2 = 1.0 - torch::pow(spec_.beta2, step_t_);
  torch::Tensor g = flat_grad_;
  if (spec_.weight_decay != 0) g = g + spec_.weight_decay * flat_;
  exp_avg_.lerp_(g, w1_);
  exp_avg_sq_.lerp_(g * g, w2_);
  const torch::Tensor denom = (exp_avg_sq_.sqrt() / bc2.sqrt()).add_(spec_.eps);
  flat_.sub_(exp_avg_ / denom * mask_ * (LearningRateOnDevice() / bc1));
}

torch::Tensor FusedAdam::LearningRateOnDevice() const {
  const double lr = spec_.lr;
  const int64_t w = spec_.warmup_steps;
  const int64_t last = std::max(spec_.max_steps, 1);
  torch::Tensor t = step_t_.clamp(1.0, static_cast<double>(last));
  torch::Tensor after = spec_.schedule == LrSchedule::kConstant
                            ? torch::full_like(t, lr)
                            : lr * 0.5 *
                                  (1.0 + torch::cos(M_PI * (t - static_cast<double>(w)) /
                                                    static_cast<double>(std::max<int64_t>(
                                                        last - w, 1))));
  if (w == 0) return after;
  return torch::where(t <= static_cast<double>(w), lr * t / static_cast<double>(w), after);
}

}  // namespace ranksweep::trainer
