// The optimizer of fused multi-seed training (fused_trainer.cc): Adam over
// the seed-stacked parameters of one head, with a per-seed update mask.
//
// Internal to the trainer library.
#ifndef RANKSWEEP_WORKER_TRAINER_FUSED_ADAM_H_
#define RANKSWEEP_WORKER_TRAINER_FUSED_ADAM_H_

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "common/spec/spec.h"

namespace ranksweep::trainer {

// Adam over stacked [S, ...] parameters with a per-seed update mask: frozen
// seeds keep their parameters and moments exactly. Same update rule as
// torch::optim::Adam (L2 weight decay added to the gradient, the spec's eps
// outside the square root); all active seeds share the step count, as in their
// single-seed runs.
//
// The parameters (and their gradients) are re-pointed into one flat buffer
// each, every parameter a contiguous block of it, so a step is ~7 tensor ops
// however many parameter tensors the head has: on tiny Min-IP models the
// step loop is bound by per-op overhead. Autograd accumulates into the
// pre-set gradient views in place. The per-element seed mask is rebuilt only
// when the set of active seeds changes.
class FusedAdam {
 public:
  // capturable: keep the step count and bias corrections on the device and
  // always take the masked path, so one captured Step() (CUDA graph) is
  // right for every later replay.
  FusedAdam(std::vector<torch::Tensor> params, const TrainSpec& spec, bool capturable = false);

  void ZeroGrad() { flat_grad_.zero_(); }

  // active: [S] floats, 1 = update this seed. Call when it changes.
  void SetActive(const torch::Tensor& active, bool all_active);

  void Step();

 private:
  // Step() with the bias corrections computed from step_t_ on the device.
  void CapturableStep();

  // LearningRateAt(spec_, step) computed from step_t_ on the device, so that
  // a captured step follows the schedule on every replay.
  torch::Tensor LearningRateOnDevice() const;

  std::vector<torch::Tensor> params_;
  torch::Tensor flat_, flat_grad_, seed_of_;  // [sum of numel]
  torch::Tensor exp_avg_, exp_avg_sq_;
  torch::Tensor mask_, w1_, w2_;
  bool all_active_ = true;
  TrainSpec spec_;
  bool capturable_;
  int64_t step_ = 0;
  torch::Tensor step_t_;  // capturable only
};

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_FUSED_ADAM_H_
