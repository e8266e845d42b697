// The per-seed affine map of the heads' first token-map layers and of the
// kernel head's hidden layers (attention_head.cc, heads.cc). Internal to the
// trainer library.
#ifndef RANKSWEEP_WORKER_TRAINER_AFFINE_H_
#define RANKSWEEP_WORKER_TRAINER_AFFINE_H_

#include <torch/types.h>

#include <cstdint>

namespace ranksweep::trainer {

// x: [S, T, din], w: [S, din+1, dout] with the bias as the last row. One
// fused baddbmm (bias broadcast over T) rather than bmm + add.
inline torch::Tensor Affine(const torch::Tensor& x, const torch::Tensor& w) {
  const int64_t din = x.size(2);
  return torch::baddbmm(w.narrow(1, din, 1), x, w.narrow(1, 0, din));
}

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_AFFINE_H_
