// The small sweep the process-level tests run on real workers: exhaustive
// m=2, N=3 (64 sequences), kernel ranks 1 and 4 and softmax, 3 seeds:
// 2 ranks x 3 seeds + 3 softmax seeds = 9 cells, each training in well
// under a second on one CPU core.
#ifndef RANKSWEEP_TESTS_SUPPORT_SMALL_SWEEP_H_
#define RANKSWEEP_TESTS_SUPPORT_SMALL_SWEEP_H_

#include <string>

namespace ranksweep::testing {

// The sweep above as a JSON spec file named `name`.
inline std::string SmallSweepSpec(const std::string& name) {
  return R"({
  "name": ")" + name + R"(",
  "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3},
  "heads": [{"kind": "kernel", "feature_map": "elu1"}, {"kind": "softmax"}],
  "ranks": [1, 4],
  "seed_count": 3,
  "train": {"max_steps": 300, "eval_every": 50, "lr": 0.02}
})";
}
constexpr int kSmallSweepCells = 9;

}  // namespace ranksweep::testing

#endif  // RANKSWEEP_TESTS_SUPPORT_SMALL_SWEEP_H_
