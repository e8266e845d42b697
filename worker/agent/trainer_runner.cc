#include "worker/agent/trainer_runner.h"

#include "worker/trainer/trainer.h"

namespace ranksweep::agent {

absl::StatusOr<std::vector<SeedResult>> TrainerTaskRunner::Run(const TaskSpec& spec,
                                                               const RunControl& control) {
  trainer::RunOptions options;
  options.device = device_;
  options.should_stop = control.should_stop;
  options.on_progress = control.on_progress;
  options.on_eval = control.on_eval;
  absl::StatusOr<trainer::TaskResult> result = trainer::RunTask(spec, options);
  if (!result.ok()) return result.status();
  return std::move(result->seeds);
}

}  // namespace ranksweep::agent
