// train_bench: trained models per second of the fused trainer on one fixed
// witness task, for several seed counts S, through the public trainer API
// (trainer::RunTask) only.
//
// The task: witness family m = 24, weight-8 code with overlap <= 4, the
// first 12 codewords (276 length-3 sequences, every position scored);
// kernel head, elu+1 features, rank 16; MSE, Adam lr 0.01, full batch,
// exactly --max_steps steps (early stop off, so every seed does the same
// work as bench/train_reference.py), evaluation every 50 steps.
//
//   train_bench [--counts 1,4,16,64] [--max_steps 500] [--repeat 1]
//               [--device cpu] [--print_spec]
//
// Prints one line per S:
//   S=<S> models_per_s=<x> steps_per_s=<y> wall_s=<t> exact=<k>/<S> errors=<e_0,...>
// where steps_per_s counts fused steps (all S seeds at once) and errors are
// the per-seed final training errors (1 - exact-sequence accuracy).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/spec/spec.h"
#include "common/spec/spec_json.h"
#include "worker/trainer/trainer.h"

namespace {

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

int Fail(const std::string& message) {
  std::cerr << "train_bench: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> counts = {1, 4, 16, 64};
  int max_steps = 500;
  int repeat = 1;
  bool print_spec = false;
  ranksweep::trainer::RunOptions options;
  options.device = "cpu";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--print_spec") {
      print_spec = true;
    } else if (arg == "--counts" && has_value) {
      counts.clear();
      for (absl::string_view part : absl::StrSplit(argv[++i], ',')) {
        int c;
        if (!absl::SimpleAtoi(part, &c) || c < 1) return Fail("--counts: positive integers");
        counts.push_back(c);
      }
    } else if (arg == "--max_steps" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &max_steps) || max_steps < 1) {
        return Fail("--max_steps: a positive integer");
      }
    } else if (arg == "--repeat" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &repeat) || repeat < 1) {
        return Fail("--repeat: a positive integer");
      }
    } else if (arg == "--device" && has_value) {
      options.device = argv[++i];
    } else {
      return Fail(absl::StrCat("unknown or incomplete argument ", arg,
                               " (flags: --counts --max_steps --repeat --device --print_spec)"));
    }
  }
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
