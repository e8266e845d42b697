// How a training run is driven from outside: the device, a stop request,
// and callbacks for progress and evaluations. Its own header so that both
// the public boundary (trainer.h) and the fused trainer (fused_trainer.h)
// include it, and the includes between them go one way.
//
// Builds without Torch and without gRPC.
#ifndef RANKSWEEP_WORKER_TRAINER_RUN_OPTIONS_H_
#define RANKSWEEP_WORKER_TRAINER_RUN_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ranksweep::trainer {

struct RunOptions {
  // "cpu", "cuda", "cuda:N" or "auto" (CUDA when the linked LibTorch has it
  // and a device is present, else CPU).
  std::string device = "auto";
  // Polled after every training step; when it returns true the run stops
  // and RunTask returns kCancelled. Called on the training thread, so it
  // must be cheap (an atomic load). May be empty.
  std::function<bool()> should_stop;
  // Called after each evaluation with steps done so far. May be empty.
  std::function<void(int64_t steps)> on_progress;
  // Called after each evaluation with its step and each seed's training
  // error there (TaskSpec::seeds order); a seed that stopped early keeps the
  // error of its last evaluation. May be empty. Recipe pruning reads it.
  std::function<void(int64_t step, const std::vector<double>& train_error)> on_eval;
};

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_RUN_OPTIONS_H_
