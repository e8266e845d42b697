// The trainer's public boundary: validation, device choice, dataset, fused
// training, and the translation of Torch exceptions into absl::Status.
#include "worker/trainer/trainer.h"

#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/trainer/dataset.h"
#include "worker/trainer/fused_trainer.h"

#ifdef RANKSWEEP_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <cuda.h>
#endif

namespace ranksweep::trainer {
namespace {

absl::StatusOr<torch::Device> ResolveDevice(const std::string& device) {
  if (device == "cpu") return torch::Device(torch::kCPU);
  const bool cuda = torch::cuda::is_available();
  if (device == "auto") return cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  int index = 0;
  if (device == "cuda") {
    index = 0;
  } else if (absl::StartsWith(device, "cuda:") &&
             absl::SimpleAtoi(device.substr(5), &index) && index >= 0) {
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "device must be one of auto, cpu, cuda, cuda:N; got \"", device, "\""));
  }
  if (!cuda) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device \"", device, "\" needs CUDA, which this LibTorch build or machine lacks"));
  }
  const int count = static_cast<int>(torch::cuda::device_count());
  if (index >= count) {
    return absl::InvalidArgumentError(absl::StrCat("device cuda:N must have N in 0..", count - 1,
                                                   ", got ", index));
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

std::string DeviceName(const torch::Device& device) {
  if (device.is_cpu()) return "cpu";
  std::string name = absl::StrCat("cuda:", static_cast<int>(device.index()));
#ifdef RANKSWEEP_TORCH_CUDA
  absl::StrAppend(&name, " (", at::cuda::getDeviceProperties(device.index())->name, ")");
#endif
  return name;
}

// Whether the environment already sets glibc's malloc thresholds; read once,
// since every task asks.
bool MallocTunedByEnvironment() {
  static const bool tuned = [] {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    return (tunables != nullptr && absl::StrContains(tunables, "glibc.malloc.")) ||
           std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
           std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr ||
           std::getenv("MALLOC_MMAP_MAX_") != nullptr;
  }();
  return tuned;
}

// Process-wide settings for training, applied once:
//  * RANKSWEEP_TORCH_THREADS, when set to a positive integer, fixes Torch's
//    intra-op thread count. Tiny Min-IP tensors often run fastest on 1-2
//    threads; the default leaves Torch's own choice.
//  * glibc's malloc keeps freed blocks of up to 32 MiB for reuse instead of
//    unmapping them (M_MMAP_THRESHOLD at glibc's ceiling, and a trim
//    threshold of 1 GiB, which together turn off its adaptive thresholds).
//    A minibatch step frees and reallocates the same large temporaries; by
//    default every step page-faulted them in again (docs/TRAINER.md). Left
//    as it is when the environment sets malloc's thresholds itself.
void ApplyProcessSettings() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("RANKSWEEP_TORCH_THREADS");
    int threads = 0;
    if (env != nullptr && absl::SimpleAtoi(env, &threads) && threads > 0) {
      torch::set_num_threads(threads);
    }
#ifdef __GLIBC__
    if (!MallocTunedByEnvironment()) {
      mallopt(M_MMAP_THRESHOLD, 32 << 20);
      mallopt(M_TRIM_THRESHOLD, 1 << 30);
    }
#endif
  });
}

// What a finished task freed goes back to the system (the trim threshold
// above keeps it otherwise), so that an idle worker does not hold its
// largest task's memory.
void ReleaseFreedMemory() {
#ifdef __GLIBC__
  if (!MallocTunedByEnvironment()) malloc_trim(0);
#endif
}

absl::Status FromException(const std::exception& e) {
  const std::string what = e.what();
  // Keep the first line: Torch appends long backtraces.
  const std::string first = what.substr(0, what.find('\n'));
  if (absl::StrContains(what, "out of memory") || absl::StrContains(what, "CUDA out of memory")) {
    return absl::ResourceExhaustedError(absl::StrCat("trainer: ", first));
  }
  return absl::InternalError(absl::StrCat("trainer: ", first));
}

// Specs built in code (not parsed) can carry enum values outside the named
// set; ValidateTaskSpec does not look at them, so check here.
absl::Status CheckEnums(const TaskSpec& spec) {
  auto unknown = [](const char* name) { return std::string(name) == "?"; };
  if (unknown(Name(spec.dataset.kind))) {
    return absl::InvalidArgumentError("dataset.kind must be one of exhaustive, witness, pool");
  }
  if (unknown(Name(spec.head.kind))) {
    return absl::InvalidArgumentError(
        "head.kind must be one of kernel, softmax, signed_kernel, multihead_kernel");
  }
  if (unknown(Name(spec.head.feature_map))) {
    return absl::InvalidArgumentError(
        "head.feature_map must be one of elu1, relu_eps, softplus, exp, favor");
  }
  if (unknown(Name(spec.head.construction))) {
    return absl::InvalidArgumentError(
        "head.construction must be one of none, rank1, indicator, softmax_exact");
  }
  if (unknown(Name(spec.train.loss))) {
    return absl::InvalidArgumentError("train.loss must be one of mse, ce");
  }
  return absl::OkStatus();
}

absl::StatusOr<TaskResult> RunTaskUnsafe(const TaskSpec& spec, const RunOptions& options) {
  RETURN_IF_ERROR(CheckEnums(spec));
  RETURN_IF_ERROR(ValidateTaskSpec(spec));
  ASSIGN_OR_RETURN(const torch::Device device, ResolveDevice(options.device));
  ApplyProcessSettings();
  ASSIGN_OR_RETURN(Dataset data, BuildDataset(spec.dataset));
  ASSIGN_OR_RETURN(std::vector<SeedResult> seeds, TrainSeeds(spec, data, device, options));
  TaskResult result;
  result.facts = data.facts;
  const std::string name = DeviceName(device);
  for (SeedResult& s : seeds) {
    s.device = name;
    s.facts = data.facts;
  }
  result.seeds = std::move(seeds);
  return result;
}

}  // namespace

absl::StatusOr<TaskResult> RunTask(const TaskSpec& spec, const RunOptions& options) {
  absl::StatusOr<TaskResult> result;
  try {
    result = RunTaskUnsafe(spec, options);
  } catch (const std::bad_alloc& e) {
    result = absl::ResourceExhaustedError(absl::StrCat("trainer: out of host memory: ", e.what()));
  } catch (const std::exception& e) {  // c10::Error derives from std::exception
    result = FromException(e);
  }
  ReleaseFreedMemory();
  return result;
}

absl::Status RunSweep(const SweepSpec& sweep, const SweepRunOptions& how,
                      const RunOptions& options,
                      const std::function<void(const SweepTaskReport&)>& on_task) {
  RETURN_IF_ERROR(ValidateSweepSpec(sweep));
  if (sweep.mode != SweepMode::kGrid) {
    return absl::InvalidArgumentError(
        "mode: only grid sweeps run without the coordinator (search needs it)");
  }
  if (how.max_seeds < 1 || how.max_seeds > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_seeds: ", how.max_seeds, " is out of range 1..1024"));
  }
  if (how.slots < 1 || how.slots > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("slots: ", how.slots, " is out of range 1..64"));
  }
  struct Pending {
    int head_index;
    int rank;
    int recipe;
    std::vector<uint64_t> seeds;
  };
  std::vector<Pending> tasks;
  const std::vector<uint64_t> seeds = SweepSeeds(sweep);
  const size_t per_task = static_cast<size_t>(how.max_seeds);
  for (int h = 0; h < static_cast<int>(sweep.heads.size()); ++h) {
    const std::vector<int> head_ranks =
        HeadHasRank(sweep.heads[h]) ? sweep.ranks : std::vector<int>{0};
    for (int rank : head_ranks) {
      for (int recipe = 0; recipe < static_cast<int>(RecipeCount(sweep)); ++recipe) {
        for (size_t first = 0; first < seeds.size(); first += per_task) {
          const size_t last = std::min(seeds.size(), first + per_task);
          tasks.push_back(Pending{h, rank, recipe,
                                  std::vector<uint64_t>(seeds.begin() + first,
                                                        seeds.begin() + last)});
        }
      }
    }
  }
  std::mutex mu;
  size_t next = 0;           // guarded by mu
  absl::Status first_error;  // guarded by mu
  std::atomic<bool> failed{false};
  RunOptions run = options;
  run.should_stop = [&failed, &options] {
    return failed.load() || (options.should_stop && options.should_stop());
  };
  auto slot = [&] {
    while (true) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next == tasks.size() || !first_error.ok()) return;
        i = next++;
      }
      const Pending& t = tasks[i];
      SweepTaskReport report;
      report.index = static_cast<int>(i);
      report.head_index = t.head_index;
      report.head = HeadLabel(sweep.heads[t.head_index]);
      report.rank = t.rank;
      report.recipe = t.recipe;
      const auto start = std::chrono::steady_clock::now();
      absl::StatusOr<TaskResult> result =
          RunTask(MakeTaskSpec(sweep, t.head_index, t.rank, t.recipe, t.seeds), run);
      report.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::lock_guard<std::mutex> lock(mu);
      if (!result.ok()) {
        // A task stopped because another failed reports Cancelled: keep the
        // first error, the cause.
        if (first_error.ok()) first_error = result.status();
        failed = true;
        return;
      }
      report.result = *std::move(result);
      if (on_task) on_task(report);
    }
  };
  const size_t threads = std::min(tasks.size(), static_cast<size_t>(how.slots));
  if (threads <= 1) {
    slot();
  } else {
    std::vector<std::thread> runners;
    for (size_t i = 0; i < threads; ++i) runners.emplace_back(slot);
    for (std::thread& r : runners) r.join();
  }
  return first_error;
}

absl::StatusOr<std::string> ResolveDeviceName(const std::string& device) {
  try {
    ASSIGN_OR_RETURN(const torch::Device d, ResolveDevice(device));
    return DeviceName(d);
  } catch (const std::exception& e) {
    return FromException(e);
  }
}

absl::StatusOr<int64_t> DeviceMemoryBytes(const std::string& device) {
  try {
    ASSIGN_OR_RETURN(const torch::Device d, ResolveDevice(device));
    if (d.is_cpu()) return 0;
#ifdef RANKSWEEP_TORCH_CUDA
    return static_cast<int64_t>(at::cuda::getDeviceProperties(d.index())->totalGlobalMem);
#else
    return 0;
#endif
  } catch (const std::exception& e) {
    return FromException(e);
  }
}

BuildInfo GetBuildInfo() {
  BuildInfo info;
  info.torch_version = absl::StrCat(TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, ".",
                                    TORCH_VERSION_PATCH);
#if defined(RANKSWEEP_TORCH_CUDA) && defined(CUDA_VERSION)
  info.cuda_version = absl::StrCat(CUDA_VERSION / 1000, ".", (CUDA_VERSION % 1000) / 10);
#endif
  return info;
}

}  // namespace ranksweep::trainer
