// Fused multi-seed training and evaluation of one head on one dataset.
//
// All seeds of a task train as one program: parameters stacked on a leading
// seed dimension, one forward, loss = sum over seeds of each seed's mean loss
// (so each seed's gradient is its single-seed gradient), and one masked Adam
// step for all of them. A seed that has been exact on the training set for
// `early_stop_evals` evaluations in a row freezes (no further updates, steps
// stop counting) while the others go on. Seed s's initial weights and
// minibatch order come from its own streams (rng.h), so its result equals
// the single-seed run of s up to float rounding (trainer_test.cc,
// FusedTest.EachSeedEqualsItsSingleSeedRun).
//
// Internal to the trainer library (and its tests).
#ifndef RANKSWEEP_WORKER_TRAINER_FUSED_TRAINER_H_
#define RANKSWEEP_WORKER_TRAINER_FUSED_TRAINER_H_

#include <torch/types.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"
#include "worker/trainer/dataset.h"
#include "worker/trainer/heads.h"
#include "worker/trainer/run_options.h"

namespace ranksweep::trainer {

// Per-seed metrics of `head` on one split, scored positions only. loss_out,
// when given, receives each seed's mean loss over the split.
std::vector<SplitMetrics> EvaluateSplit(AttentionHeadImpl& head, const Dataset& data,
                                        const Split& split, LossKind loss,
                                        const torch::Device& device,
                                        std::vector<double>* loss_out = nullptr);

// Trains the head of `spec` (or loads its construction) for every seed in
// spec.seeds and evaluates it. Fills every SeedResult field except `device`
// and `facts`. kCancelled when options.should_stop fires. Torch errors
// propagate as exceptions (RunTask converts them).
absl::StatusOr<std::vector<SeedResult>> TrainSeeds(const TaskSpec& spec, const Dataset& data,
                                                   const torch::Device& device,
                                                   const RunOptions& options);

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_FUSED_TRAINER_H_
