// Attention over many short sequences, the core of KernelHeadImpl::Attend
// (normalized kernel attention) and SoftmaxHeadImpl::Attend. For G
// independent groups (seed, sequence, head), kernel attention is
//
//   a_ij = <fq_i, fk_j>,  den_i = sum_j a_ij,  y_i = c_i sum_j a_ij v_j,
//
// with c_i = 1 / max(den_i, 1e-18) for nonnegative features and, for signed
// kernels (eps > 0), c_i = den_i / (den_i^2 + eps^2 S_i^2) with
// S_i = sum_j |a_ij| (SignedQuotient; docs/TRAINER.md, "Signed kernels").
//
// LibTorch's CPU bmm computes a product of fewer than 400 multiply-adds per
// group (a 3 x 3 score block of rank 16, or 3 x 3 weights times 3 x 24
// values) in a generic scalar loop that stores its sum after every term,
// and a larger one as one BLAS call per group. On a minibatch of the OOD
// sweeps (2048 sequences of 3 tokens, 10 seeds: 20,480 groups) that loop,
// forward and backward, was about a quarter of the training step of either
// head. On the CPU, for float inputs and sequences of at most
// kShortAttentionMaxLen tokens, the forward and the backward here are
// written out per group instead; everywhere else (CUDA, double, longer
// sequences) it is the bmm path.
//
// Internal to the trainer library (and its tests).
#ifndef RANKSWEEP_WORKER_TRAINER_SHORT_ATTENTION_H_
#define RANKSWEEP_WORKER_TRAINER_SHORT_ATTENTION_H_

#include <torch/types.h>

namespace ranksweep::trainer {

inline constexpr int64_t kShortAttentionMaxLen = 16;

enum class AttentionImpl { kAuto, kLoops, kBmm };

// fq, fk: [G, N, r]; v: [G, N, dv]; all on one device, same dtype. Returns
// y [G, N, dv]. signed_eps > 0 selects the signed quotient. kAuto takes
// the written-out loops where they apply (CPU, float32, N <= 16), kLoops
// requires them (tests), kBmm is LibTorch's bmm path.
torch::Tensor NormalizedAttention(const torch::Tensor& fq, const torch::Tensor& fk,
                                  const torch::Tensor& v, double signed_eps,
                                  AttentionImpl impl = AttentionImpl::kAuto);

// The signed kernel's quotient c = den / (den^2 + eps^2 abs_sum^2) as tensor
// ops (autograd through both inputs), the denominator floored at 1e-36 so
// that a row of zero scores gives 0. Same shapes in, same shape out.
torch::Tensor SignedQuotient(const torch::Tensor& den, const torch::Tensor& abs_sum,
                             double eps);

// Softmax attention, the core of SoftmaxHeadImpl::Attend, for G = S * B
// groups in seed-major order (group g belongs to seed g / B):
//
//   s_ij = inv_tau[g / B] <q_i, k_j>,  y_i = sum_j softmax_j(s_ij) v_j.
//
// q, k: [G, N, ds]; v: [G, N, dv]; inv_tau: [S]. Returns y [G, N, dv], with
// gradients for all four inputs. kAuto as for NormalizedAttention.
torch::Tensor SoftmaxAttention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& inv_tau,
                               AttentionImpl impl = AttentionImpl::kAuto);

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_SHORT_ATTENTION_H_
