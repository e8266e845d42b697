// train_bench: trained models per second of the fused trainer on one fixed
// witness task, for several seed counts S, through the public trainer API
// (trainer::RunTask) only.
//
// The task: witness family m = 24, weight-8 code with overlap <= 4, the
// first 12 codewords (276 length-3 sequences, every position scored);
// kernel head, elu+1 features, rank 16; MSE, Adam lr 0.01, full batch,
// exactly --max-steps steps (early stop off, so every seed does the same
// work as bench/train_reference.py), evaluation every 50 steps.
//
//   train_bench [--counts=1,4,16,64] [--max-steps=500] [--repeat=1]
//               [--device=cpu] [--print-spec]
//
// Flags are parsed as ranksweepd's are (common/flags.h): dashes or the
// older underscores, --help, "did you mean", a bad value refused with its
// range (exit 1); a failed run exits 5.
//
// Prints one line per S:
//   S=<S> models_per_s=<x> steps_per_s=<y> wall_s=<t> exact=<k>/<S> errors=<e_0,...>
// where steps_per_s counts fused steps (all S seeds at once) and errors are
// the per-seed final training errors (1 - exact-sequence accuracy).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/exit_codes.h"
#include "common/flags.h"
#include "common/spec/spec.h"
#include "common/spec/spec_json.h"
#include "worker/trainer/trainer.h"

namespace {

struct BenchFlags {
  std::vector<std::string> counts = {"1", "4", "16", "64"};
  int max_steps = 500;
  int repeat = 1;
  std::string device = "cpu";
  bool print_spec = false;
};

ranksweep::TaskSpec BenchTask(int max_steps) {
  ranksweep::TaskSpec t;
  t.dataset.kind = ranksweep::DatasetKind::kWitness;
  t.dataset.m = 24;
  t.dataset.seq_len = 3;
  t.dataset.code_weight = 8;
  t.dataset.max_overlap = 4;
  t.dataset.num_queries = 12;
  t.head.kind = ranksweep::HeadKind::kKernel;
  t.head.feature_map = ranksweep::FeatureMap::kEluPlusOne;
  t.rank = 16;
  t.train.lr = 0.01;
  t.train.batch_size = 0;
  t.train.max_steps = max_steps;
  t.train.eval_every = 50;
  t.train.early_stop_evals = 0;
  t.train.loss = ranksweep::LossKind::kMse;
  return t;
}

// A run that failed: the exit code of a failure (common/exit_codes.h).
int Fail(const std::string& message) {
  std::cerr << "train_bench: " << message << "\n";
  return ranksweep::kExitFailure;
}

}  // namespace

int main(int argc, char** argv) {
  BenchFlags f;
  ranksweep::Flags flags(
      "train_bench",
      "train_bench: trained models per second of the fused trainer on one witness task, for "
      "each seed count S.\nUsage: train_bench [--counts=1,4,16,64] [--max-steps=500] "
      "[--repeat=1] [--device=cpu] [--print-spec]",
      "train_bench\n");
  flags.AddIntegerList("counts", &f.counts,
                       "Seed counts S to time, comma-separated, each 1..1024", 1, 1024);
  flags.Add("max-steps", &f.max_steps, "Training steps of every seed (early stop off), 1..10000000",
            1, 10000000);
  flags.Add("repeat", &f.repeat,
            "Runs per S, the fastest reported (the machine may be shared), 1..1000", 1, 1000);
  flags.Add("device", &f.device, "cpu | cuda | cuda:N | auto");
  flags.Add("print-spec", &f.print_spec, "Print the task spec as JSON and run nothing");
  if (std::optional<int> exit = flags.Parse(argc, argv, std::cout, std::cerr)) return *exit;
  std::vector<int> counts;
  for (const std::string& c : f.counts) {
    int s = 0;
    if (absl::SimpleAtoi(c, &s)) counts.push_back(s);  // checked in range before parsing
  }
  if (counts.empty()) {
    std::cerr << "train_bench: --counts must list at least one seed count\n";
    return ranksweep::kExitUsage;
  }
  const int max_steps = f.max_steps;
  const int repeat = f.repeat;
  const bool print_spec = f.print_spec;
  ranksweep::trainer::RunOptions options;
  options.device = f.device;
  if (print_spec) {
    std::cout << ranksweep::TaskSpecToJson(BenchTask(max_steps)) << "\n";
    return 0;
  }
  for (int s_count : counts) {
    ranksweep::TaskSpec task = BenchTask(max_steps);
    task.seeds.clear();
    for (int s = 0; s < s_count; ++s) task.seeds.push_back(static_cast<uint64_t>(s));
    // Best of `repeat` runs: the machine may be shared.
    double best = 0;
    std::vector<std::string> errors;
    int exact = 0;
    for (int r = 0; r < repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      auto result = ranksweep::trainer::RunTask(task, options);
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!result.ok()) return Fail(result.status().ToString());
      if (r == 0 || wall < best) best = wall;
      errors.clear();
      exact = 0;
      for (const ranksweep::SeedResult& seed : result->seeds) {
        errors.push_back(absl::StrCat(seed.train.error));
        exact += seed.train.error == 0.0;
      }
    }
    std::printf("S=%d models_per_s=%.3f steps_per_s=%.1f wall_s=%.3f exact=%d/%d errors=%s\n",
                s_count, s_count / best, max_steps / best, best, exact, s_count,
                absl::StrJoin(errors, ",").c_str());
    std::fflush(stdout);
  }
  return 0;
}
