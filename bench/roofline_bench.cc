// roofline_bench: the minibatch training step of the fused trainer against
// the machine's own GEMM peak (bench/run_roofline_bench runs it beside
// bench/roofline_reference.py).
//
// Flags are parsed as ranksweepd's are (common/flags.h): dashes or the
// older underscores, --help, "did you mean", a bad value refused with its
// range (exit 1); a failed run exits 5.
//
//   roofline_bench --gemm [--repeat=5]
//     Single-precision GEMM probes through torch::mm, best of --repeat:
//     a square 1024^3 product (the machine's peak as LibTorch's BLAS reaches
//     it) and the token-map products of the OOD sweeps (6,144 x 25 times
//     25 x 561 is ood-large's rank-256 kernel head). One line per probe:
//       gemm name=<n> m=<M> k=<K> n=<N> gflops=<x>
//
//   roofline_bench --spec=task.json [--warmup=2] [--steps=10] [--repeat=1]
//                  [--device=cpu]
//     Seconds per training step of the task (its seeds fused) through the
//     public trainer API: RunTask with --warmup steps and with --warmup +
//     --steps steps, early stop and intermediate evaluations off; the
//     difference of the two wall times over --steps is the step time (the
//     dataset, set-up and final evaluation cancel). Each run's fastest of
//     --repeat.
//     Prints one line:
//       S=<S> step_s=<t> fixed_s=<f> flops=<per seed-step> gflops=<achieved>
//       errors=<..> losses=<..>
//     with fixed_s the rest of the short run (set-up, dataset, the final
//     evaluation of both splits),
//     each seed's training error and mean training loss after the longer
//     run, and `flops` the counted FLOPs of one seed's step (below).
//
// Counted FLOPs of one seed's step (multiply-add = 2), for B sequences of
// N tokens, T = B N, width m, value width dv, readout width K, and the first
// layer's output widths F (kernel: 2r + dv + K dv + K on m + 1 inputs;
// softmax: 2 m on m inputs, dv + K dv + K on m + 1):
//   token maps   2 T (inputs) F forward + the same for the weight gradient
//                (the tokens need no gradient);
//   attention    2 B N^2 (score width + dv) forward, twice that backward;
//   readout      2 T K dv forward, twice that backward.
// Elementwise work (feature maps, softmax, loss, Adam) is not counted. This
// is the work of a dense implementation (the PyTorch peer's); the trainer
// may do less (docs/TRAINER.md describes the minibatch kernels).
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/exit_codes.h"
#include "common/flags.h"
#include "common/spec/spec.h"
#include "common/spec/spec_json.h"
#include "worker/trainer/trainer.h"

namespace {

struct BenchFlags {
  bool gemm = false;
  std::string spec;
  int warmup = 2;
  int steps = 10;
  int repeat = 1;
  std::string device = "cpu";
};

using Clock = std::chrono::steady_clock;

// A run that failed: the exit code of a failure (common/exit_codes.h).
int Fail(const std::string& message) {
  std::cerr << "roofline_bench: " << message << "\n";
  return ranksweep::kExitFailure;
}

double BestGemmGflops(int64_t m, int64_t k, int64_t n, int repeat) {
  torch::NoGradGuard no_grad;
  const torch::Tensor a = torch::rand({m, k});
  const torch::Tensor b = torch::rand({k, n});
  torch::Tensor c = torch::empty({m, n});
  const double flops = 2.0 * m * k * n;
  // Enough products per timing to last ~50 ms.
  torch::mm_out(c, a, b);
  auto t0 = Clock::now();
  torch::mm_out(c, a, b);
  const double once = std::chrono::duration<double>(Clock::now() - t0).count();
  const int inner = std::max(1, static_cast<int>(0.05 / std::max(once, 1e-7)));
  double best = 0;
  for (int r = 0; r < repeat; ++r) {
    t0 = Clock::now();
    for (int i = 0; i < inner; ++i) torch::mm_out(c, a, b);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, flops * inner / s / 1e9);
  }
  return best;
}

// Counted FLOPs of one seed's training step (see the file comment).
double StepFlops(const ranksweep::TaskSpec& t, int64_t train_size) {
  const double m = t.dataset.m, n = t.dataset.seq_len;
  const double b = t.train.batch_size == 0 || t.train.batch_size >= train_size
                       ? static_cast<double>(train_size)
                       : t.train.batch_size;
  const double tokens = b * n;
  const double dv = t.head.value_dim > 0 ? t.head.value_dim : m;
  const double k = t.train.loss == ranksweep::LossKind::kCrossEntropy ? m + 1 : 1;
  const bool softmax = t.head.kind == ranksweep::HeadKind::kSoftmax;
  const double score = softmax ? (t.head.score_dim > 0 ? t.head.score_dim : m) : t.rank;
  const double maps_fwd = softmax ? 2 * tokens * (m * 2 * score + (m + 1) * (dv + k * dv + k))
                                  : 2 * tokens * (m + 1) * (2 * score + dv + k * dv + k);
  const double attention_fwd = 2 * b * n * n * (score + dv);
  const double readout_fwd = 2 * tokens * k * dv;
  return 2 * maps_fwd + 3 * (attention_fwd + readout_fwd);
}

int RunSpec(const std::string& path, int warmup, int steps, int repeat,
            const std::string& device) {
  std::ifstream in(path);
  if (!in) return Fail(absl::StrCat("--spec: cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  auto parsed = ranksweep::TaskSpecFromJson(ss.str());
  if (!parsed.ok()) return Fail(parsed.status().ToString());
  ranksweep::TaskSpec task = *parsed;
  task.train.early_stop_evals = 0;
  ranksweep::trainer::RunOptions options;
  options.device = device;
  auto run = [&](int max_steps, double* wall) {
    task.train.max_steps = max_steps;
    task.train.eval_every = max_steps;  // only the final evaluation
    const auto start = Clock::now();
    auto result = ranksweep::trainer::RunTask(task, options);
    *wall = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  };
  // The fastest short and the fastest long run: on a shared machine each
  // run can only be slowed down.
  double best_short = -1, best_long = -1;
  ranksweep::trainer::TaskResult last;
  for (int r = 0; r < repeat; ++r) {
    double short_wall = 0, long_wall = 0;
    auto a = run(warmup, &short_wall);
    if (!a.ok()) return Fail(a.status().ToString());
    auto b = run(warmup + steps, &long_wall);
    if (!b.ok()) return Fail(b.status().ToString());
    if (best_short < 0 || short_wall < best_short) best_short = short_wall;
    if (best_long < 0 || long_wall < best_long) best_long = long_wall;
    last = *std::move(b);
  }
  const double best = (best_long - best_short) / steps;
  std::vector<std::string> errors, losses;
  for (const ranksweep::SeedResult& s : last.seeds) {
    errors.push_back(absl::StrCat(s.train.error));
    losses.push_back(absl::StrCat(s.final_loss));
  }
  const int64_t train_size = last.seeds.empty() ? 0 : last.seeds[0].train.sequences;
  const double flops = StepFlops(task, train_size);
  const double s_count = static_cast<double>(task.seeds.size());
  // Set-up, dataset and the final evaluation of both splits: the short
  // run less its steps.
  const double fixed = best_short - warmup * best;
  std::printf("S=%zu step_s=%.6f fixed_s=%.3f flops=%.0f gflops=%.3f errors=%s losses=%s\n",
              task.seeds.size(), best, fixed, flops,
              best > 0 ? flops * s_count / best / 1e9 : 0.0,
              absl::StrJoin(errors, ",").c_str(), absl::StrJoin(losses, ",").c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  BenchFlags f;
  ranksweep::Flags flags(
      "roofline_bench",
      "roofline_bench: the minibatch training step of the fused trainer against the machine's "
      "GEMM peak.\n"
      "Usage: roofline_bench --gemm [--repeat=5]\n"
      "       roofline_bench --spec=task.json [--warmup=2] [--steps=10] [--repeat=1] "
      "[--device=cpu]",
      "roofline_bench\n");
  flags.Add("gemm", &f.gemm, "Time the GEMM probes instead of a task");
  flags.Add("spec", &f.spec, "Task spec JSON file whose training step to time");
  flags.Add("warmup", &f.warmup, "Steps of the short run, 1..1000000", 1, 1000000);
  flags.Add("steps", &f.steps,
            "Steps the long run adds, over which the step time is taken, 1..1000000", 1, 1000000);
  flags.Add("repeat", &f.repeat,
            "Runs of each, the fastest kept (a shared machine only slows), 1..1000", 1, 1000);
  flags.Add("device", &f.device, "cpu | cuda | cuda:N | auto");
  if (std::optional<int> exit = flags.Parse(argc, argv, std::cout, std::cerr)) return *exit;
  const bool gemm = f.gemm;
  const std::string spec = f.spec;
  const int repeat = f.repeat;
  if (gemm) {
    struct Probe {
      const char* name;
      int64_t m, k, n;
    };
    const Probe probes[] = {{"square", 1024, 1024, 1024},
                            {"ood-large-r256", 6144, 25, 561},
                            {"ood-large-r16", 6144, 25, 81},
                            {"ood-medium-r256", 3072, 17, 545},
                            {"ood-large-r256-grad", 25, 6144, 561}};
    for (const Probe& p : probes) {
      std::printf("gemm name=%s m=%lld k=%lld n=%lld gflops=%.2f\n", p.name,
                  static_cast<long long>(p.m), static_cast<long long>(p.k),
                  static_cast<long long>(p.n), BestGemmGflops(p.m, p.k, p.n, repeat));
      std::fflush(stdout);
    }
    return 0;
  }
  if (spec.empty()) {
    std::cerr << "roofline_bench: --gemm or --spec=FILE is required (roofline_bench --help)\n";
    return ranksweep::kExitUsage;
  }
  return RunSpec(spec, f.warmup, f.steps, repeat, f.device);
}
