// The trainer library: Min-IP datasets, kernel and softmax attention heads,
// the exact constructions, and fused multi-seed training.
//
// This is the only part of ranksweep that uses LibTorch; it links Torch
// PRIVATE and no Torch type appears in this header. Torch exceptions are
// caught inside and returned as absl::Status. Builds without gRPC.
//
// Thread-safety: RunTask may be called from several threads at once; each
// call owns its tensors. Torch's intra-op thread pool is process-wide.
#ifndef RANKSWEEP_WORKER_TRAINER_TRAINER_H_
#define RANKSWEEP_WORKER_TRAINER_TRAINER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"
#include "worker/trainer/run_options.h"  // RunOptions

namespace ranksweep::trainer {

struct TaskResult {
  std::vector<SeedResult> seeds;  // one per TaskSpec::seeds, same order
  DatasetFacts facts;
};

// Validates `spec` (InvalidArgument naming the field and its range), builds
// its dataset, trains every seed together (or loads the construction) and
// evaluates. Deterministic on CPU for a given spec.
absl::StatusOr<TaskResult> RunTask(const TaskSpec& spec, const RunOptions& options = {});

// One task of RunSweep: its place in the sweep, the (head, rank) and seeds
// it trained, its results and its wall time (dataset, training and
// evaluation).
struct SweepTaskReport {
  int index = 0;  // the task's place in spec order, from 0
  int head_index = 0;
  std::string head;  // HeadLabel
  int rank = 0;      // 0 for a head without a rank
  int recipe = 0;    // index into the sweep's recipes (common/spec/spec.h)
  TaskResult result;
  double seconds = 0;
};

// How RunSweep splits and schedules a sweep, as a worker would.
struct SweepRunOptions {
  int max_seeds = 64;  // seeds fused per task (the worker's --max-seeds), 1..1024
  int slots = 1;       // tasks trained at once on the device (the worker's --slots), 1..64
};

// Trains every task of a grid sweep on this machine: each head at each of
// its ranks (once for heads without a rank) under each recipe, in the order of the spec, the
// sweep's seeds fused max_seeds at a time. With slots > 1 that many tasks
// train at once on their own threads, each taking the next task in spec
// order when it is free, as a worker's slots do; `on_task` is then called in
// the order the tasks finish, never from two threads at once. No
// coordinator and no store: for timing a whole sweep on one device, or
// trying a spec. InvalidArgument for an invalid spec, for mode search (its
// bisection lives in the coordinator) and for max_seeds or slots out of
// range. The first task error stops the run: no task starts after it, the
// running ones stop at their next step, and that error is returned.
absl::Status RunSweep(const SweepSpec& sweep, const SweepRunOptions& how,
                      const RunOptions& options,
                      const std::function<void(const SweepTaskReport&)>& on_task);

// What the device string resolves to here, e.g. "cpu" or "cuda:0 (NVIDIA H200)";
// InvalidArgument for an unknown string, FailedPrecondition for "cuda" without CUDA.
absl::StatusOr<std::string> ResolveDeviceName(const std::string& device);

// The memory of the device a string resolves to: a GPU's total memory, or 0
// for the CPU (this library does not know what share of the host's memory
// training may use). Errors as ResolveDeviceName.
absl::StatusOr<int64_t> DeviceMemoryBytes(const std::string& device);

// LibTorch and CUDA versions this library was built with, for the worker's
// version manifest: e.g. {"1.13.1", ""} or {"2.5.1", "12.4"}.
struct BuildInfo {
  std::string torch_version;
  std::string cuda_version;  // empty without CUDA
};
BuildInfo GetBuildInfo();

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_TRAINER_H_
