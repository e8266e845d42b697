// The TaskRunner that trains with the trainer library (LibTorch), on one
// device chosen at start-up.
//
// Ownership: none. Thread-safety: Run may be called from several threads at
// once, as trainer::RunTask allows.
#ifndef RANKSWEEP_WORKER_AGENT_TRAINER_RUNNER_H_
#define RANKSWEEP_WORKER_AGENT_TRAINER_RUNNER_H_

#include <string>
#include <vector>

#include "worker/agent/coordinator_client.h"

namespace ranksweep::agent {

class TrainerTaskRunner : public TaskRunner {
 public:
  // `device` as trainer::RunOptions takes it: "cpu", "cuda", "cuda:N".
  explicit TrainerTaskRunner(std::string device) : device_(std::move(device)) {}

  // All seeds of `spec` in one trainer::RunTask call; its errors pass through
  // (kCancelled when control.should_stop stopped it).
  absl::StatusOr<std::vector<SeedResult>> Run(const TaskSpec& spec,
                                              const RunControl& control) override;

 private:
  std::string device_;
};

}  // namespace ranksweep::agent

#endif  // RANKSWEEP_WORKER_AGENT_TRAINER_RUNNER_H_
