// The whole head on the CPU in one pass over short sequences: first-layer
// token maps, feature map, attention and readout, forward and backward, for
// the single-layer kernel, signed-kernel and softmax heads
// (AttentionHeadImpl::ForwardIndexed takes it where it applies).
//
// Why: on the minibatch path of the OOD sweeps every position's token maps
// are distinct work (a batch of 2,048 sequences has few repeated tokens), and
// the unfused head wrote [S, B*N, 2r + ...] floats per map and per
// elementwise op, forward and backward (about 60 MB each at rank 256 and 10
// seeds): the step was bound by memory traffic and page faults, far below
// the GEMM speed its FLOPs need. Here each seed's sequences go through in
// blocks of about a hundred tokens whose maps stay in cache. The tokens are
// 0/1 vectors, so a first-layer map is a sum of the weight rows of the
// token's inputs (weight + 1 rows, not m + 1 multiply-adds), formed with
// the feature map applied; the attention and readout are written out per
// sequence; the backward forms the block's map gradients in cache (every
// column written once, the feature map's derivative taken from the
// feature) and folds them into the weight gradient as sums of map-gradient
// rows over the tokens holding each input. Where every table row serves
// four positions or more, the maps are formed once per table row and the
// map gradients summed per row first. Nothing of size B*N*F is stored.
//
// Internal to the trainer library (and its tests).
#ifndef RANKSWEEP_WORKER_TRAINER_TOKEN_KERNEL_H_
#define RANKSWEEP_WORKER_TRAINER_TOKEN_KERNEL_H_

#include <torch/types.h>

#include <cstdint>

namespace ranksweep::trainer {

// What the fused head computes. Columns of the first-layer weight, in order:
// query [score], key [score], value [dv], readout U [k * dv] (row k of U is
// columns k*dv .. k*dv+dv-1), readout B [k].
struct TokenKernelShape {
  enum class Kind { kKernel, kSignedKernel, kSoftmax };
  Kind kind = Kind::kKernel;
  // Kernel heads: the feature map of the query and key columns. One of
  // elu+1, relu+eps and exp (TokenKernelApplies).
  enum class Map { kEluPlusOne, kReluEps, kExp };
  Map map = Map::kEluPlusOne;
  double relu_eps = 1e-3;
  double signed_eps = 0;  // kSignedKernel: the quotient's eps (loop_math.h, QuotientOf)
  int64_t score = 1;        // rank r, or the softmax score width
  int64_t dv = 1;
  int64_t k = 1;
  int64_t width() const { return 2 * score + dv + k * dv + k; }
};

// table: [D, m] float32 CPU tokens of 0/1 inputs; idx: [S or 1, T] int64,
// the table row of every position (T = B*n, sequences of n consecutive
// positions; 1: the same positions for every seed). w: [S, m+1, shape.width()],
// the first-layer weights of all maps, the bias as the last row. inv_tau:
// [S] (softmax; an undefined tensor otherwise). Returns the readouts
// [S, B, n, k], with gradients for w and inv_tau (table and idx get none).
// Float rounding differs from the unfused head's (sums in other orders);
// token_kernel_test.cc checks both against double. Throws c10::Error on
// mismatched shapes, a table entry other than 0 or 1, or an idx entry
// outside the table.
torch::Tensor TokenKernelForward(const torch::Tensor& table, const torch::Tensor& idx,
                                 const torch::Tensor& w, const torch::Tensor& inv_tau, int64_t n,
                                 const TokenKernelShape& shape);

// The squared-error loss of the scalar readout (shape.k == 1), summed:
// sum over seeds s, sequences b and positions i of
// weight[i] * (out[s, b, i] - targets[s or 0, b, i])^2, with out as
// TokenKernelForward returns it. targets: [S or 1, B, n] float32; weight:
// [n] float32. The gradients for w and inv_tau are formed in the same pass
// over the blocks as the loss (a training step needs one pass, not a
// forward and a recomputing backward) and kept until the backward, which
// scales them. Throws c10::Error on mismatched shapes.
torch::Tensor TokenKernelMseLoss(const torch::Tensor& table, const torch::Tensor& idx,
                                 const torch::Tensor& w, const torch::Tensor& inv_tau, int64_t n,
                                 const TokenKernelShape& shape, const torch::Tensor& targets,
                                 const torch::Tensor& weight);

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_TOKEN_KERNEL_H_
