// Attention heads for Min-IP as LibTorch modules whose every parameter is
// stacked on a leading seed dimension [S, ...], so S independently
// initialized seeds run as one batched program (bmm/einsum, one optimizer
// step). Slice s of a head built for seeds {a, b, c} starts equal to the
// head built for {b} alone when s = 1: each seed draws its initial weights
// from its own stream (rng.h).
//
// Every head maps tokens x [S, B, N, m] (0/1 floats) to readouts
// [S, B, N, K]: K = 1 for the scalar readout t_hat = <u(x_i), y_i> + b(x_i),
// K = m + 1 for cross-entropy logits, each affine in the attention output y_i
// (docs/SCIENCE.md, "The two heads"). The exact constructions are the same
// modules with hand-set weights, so they go through the same forward code.
//
// Internal to the trainer library (and its tests).
#ifndef RANKSWEEP_WORKER_TRAINER_HEADS_H_
#define RANKSWEEP_WORKER_TRAINER_HEADS_H_

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"
#include "worker/trainer/rng.h"
#include "worker/trainer/short_attention.h"
#include "worker/trainer/token_kernel.h"

namespace ranksweep::trainer {

// A head's shape with every default resolved.
struct HeadConfig {
  HeadKind kind = HeadKind::kKernel;
  FeatureMap feature_map = FeatureMap::kEluPlusOne;
  std::vector<int> hidden;  // widths of the token map's hidden layers (ReLU)
  int m = 0;
  int rank = 1;       // features per kernel head
  int num_heads = 1;  // kernel heads, each normalized on its own
  int value_dim = 0;  // per head
  int score_dim = 0;  // softmax only
  double relu_eps = 1e-3;
  int out_dim = 1;    // 1 (scalar readout) or m + 1 (cross-entropy logits)
};

// Resolves `spec`'s head (defaults, rank, loss) against its dataset.
HeadConfig MakeHeadConfig(const TaskSpec& spec);

// The distinct tokens of a split and, for every position, which of them it
// holds. Every token-wise map of a head (features, value map, readout
// coefficients) is a function of the token alone, so it can be computed on
// the D distinct tokens and gathered: the witness family has 24 distinct
// tokens for 828 positions.
struct TokenIndex {
  torch::Tensor table;  // [D, m] 0/1 floats, in order of first occurrence
  torch::Tensor index;  // [B, N] int64 rows of `table`
};

// Deduplicates `size` sequences of `seq_len` packed m-bit tokens (row-major,
// as in Split::tokens). Deterministic; tensors on `device`.
TokenIndex IndexTokens(const std::vector<uint64_t>& tokens, int64_t size, int seq_len, int m,
                       const torch::Device& device);

// Token-wise maps evaluated on R token rows, every tensor [S, R, width]:
// query and key features (kernel heads: H * r wide; softmax: W_q x, W_k x),
// the value map V [x; 1] (H * dv), the readout coefficients U [x; 1]
// (K * H * dv) and B [x; 1] (K).
struct TokenMaps {
  torch::Tensor q, k, v, u, b;
};

// The readout shared by all heads: a value map v(x) = V [x; 1] and the
// query-dependent affine readout out_k = <U_k [x_i; 1], y_i> + B_k [x_i; 1].
//
// Two forward paths with the same math:
//  * forward(x): every map on every position.
//  * ForwardIndexed(table, idx): every map on the distinct tokens only
//    (when tokens repeat: at most B*N/2 distinct ones), then
//    either (pair path) the attention scores s(a, c) and the readout-value
//    products w_k(a, c) = <U_k [a; 1], V [c; 1]> for every pair of distinct
//    tokens, gathered per (position, position) pair, so that
//    out_k,i = sum_j weight_ij w_k(x_i, x_j) + B_k [x_i; 1]; or (token path,
//    when pairs would cost more, e.g. many distinct tokens or long sequences)
//    the maps gathered per position and the forward(x) attention after it.
//    Results agree with forward(x) up to float rounding (heads_test.cc).
//  * ForwardIndexed on the CPU in float, for single-layer kernel, signed
//    and softmax heads on short sequences, wherever it would not take the
//    pair path: the whole head in one fused pass over blocks of positions
//    (token_kernel.h), every map computed per position and nothing of size
//    B*N*width kept for the backward.
class AttentionHeadImpl : public torch::nn::Module {
 public:
  // x: [S, B, N, m]. Returns [S, B, N, out_dim].
  torch::Tensor forward(const torch::Tensor& x);
  // table: [D, m] distinct tokens; idx: [S or 1, B, N] int64 rows of table
  // (1: the same sequences for every seed). Returns what forward returns for
  // x[s, b, i] = table[idx[s, b, i]]. With more than B*N/2 distinct tokens
  // it is forward on the gathered tokens. `path` forces one path (tests).
  // The gather indices of the last index tensor are kept, keyed by the
  // tensor itself: do not modify an index tensor in place after a call.
  enum class Path { kAuto, kPairs, kTokens, kFused };
  torch::Tensor ForwardIndexed(const torch::Tensor& table, const torch::Tensor& idx,
                               Path path = Path::kAuto);
  // Whether ForwardIndexed can take the fused path (kFused) for `table`
  // and sequences of length n.
  bool UsesTokenKernel(const torch::Tensor& table, int64_t n) const;
  // The training loss of the scalar readout in one fused pass
  // (TokenKernelMseLoss): sum over seeds, sequences and positions i of
  // weight[i] * (out - targets)^2, out as ForwardIndexed(table, idx) returns
  // it, targets [S or 1, B, N] and weight [N] float. An undefined tensor
  // where ForwardIndexed would not take the fused path by itself (the
  // caller then forms the loss from ForwardIndexed).
  torch::Tensor IndexedMseLoss(const torch::Tensor& table, const torch::Tensor& idx,
                               const torch::Tensor& targets, const torch::Tensor& weight);
  // Whether ForwardIndexed takes the pair path for D distinct tokens and
  // B sequences of length N (a cost estimate; both paths are exact).
  bool UsesPairs(int64_t d, int64_t b, int64_t n) const;
  int64_t num_seeds() const { return num_seeds_; }
  const HeadConfig& config() const { return config_; }

  // Value map and readout tensors, exposed so constructions can set them.
  torch::Tensor& value() { return value_; }      // [S, m+1, H*dv]
  torch::Tensor& readout_u() { return readout_u_; }  // [S, m+1, K*H*dv]
  torch::Tensor& readout_b() { return readout_b_; }  // [S, m+1, K]
  const torch::Tensor& value() const { return value_; }
  const torch::Tensor& readout_u() const { return readout_u_; }
  const torch::Tensor& readout_b() const { return readout_b_; }

 protected:
  AttentionHeadImpl(const HeadConfig& config, const std::vector<uint64_t>& seeds);
  // Draws a [S, rows, cols] parameter, uniform in +-bound, seed by seed.
  torch::Tensor DrawUniform(int64_t rows, int64_t cols, double bound);
  torch::Tensor DrawNormal(int64_t rows, int64_t cols);
  // Gather indices of one ForwardIndexed call on the pair path.
  struct PairGather {
    int64_t s = 0, b = 0, n = 0, d = 0;
    torch::Tensor pairs;  // [N(j), S, B, N(i)]: flat (s, x_i, x_j) of [S, D, D]
    torch::Tensor rows;   // [S, B, N]: flat (s, x_i) of [S, D]
    // table [S, D, D, C] -> [N(j), S, B, N(i), C]: entry (x_i, x_j) of
    // every (sequence, query position i, key position j). Summing over the
    // leading j is a reduction over an outer dimension (fast on CPU, where
    // one over a size-N inner dimension is ~10x slower).
    torch::Tensor Pairs(const torch::Tensor& table) const;
    // table [S, D, C] -> [S, B, N, C]: entry x_i of every position.
    torch::Tensor Rows(const torch::Tensor& table) const;
  };
  // rows: [S, R, m] tokens per seed, or [R, m] shared by every seed. Every
  // token-wise map on them.
  virtual TokenMaps Maps(const torch::Tensor& rows) const = 0;
  // Attention and readout from maps given per position ([S, B*N, width]).
  // Returns [S, B, N, out_dim].
  virtual torch::Tensor Attend(const TokenMaps& maps, int64_t b, int64_t n) const = 0;
  // The pair path from maps on the D distinct tokens. Returns [S, B, N, K].
  virtual torch::Tensor PairForward(const TokenMaps& maps, const PairGather& g) const = 0;
  // The fused head's description (token_kernel.h) when it applies to this
  // head's configuration, else false.
  virtual bool TokenKernelShapeOf(TokenKernelShape* shape) const = 0;
  // All first-layer weights side by side, [S, m+1, shape.width()], in the
  // fused head's column order (a differentiable function of the parameters);
  // inv_tau receives the softmax head's [S] inverse temperatures (else an
  // undefined tensor).
  virtual torch::Tensor TokenKernelWeights(torch::Tensor* inv_tau) const = 0;
  // Features per query/key row, for the cost estimate.
  virtual int64_t score_width() const = 0;
  // Affine maps of `rows` by each weight [S, din or din+1, F] (with din+1,
  // the last row is a bias): for rows [S, R, din] one baddbmm/bmm each; for
  // rows [R, din] shared by every seed, one GEMM for all weights and seeds
  // (CPU bmm loops over the seed dimension, one BLAS call per seed).
  std::vector<torch::Tensor> AffineMaps(const torch::Tensor& rows,
                                        const std::vector<torch::Tensor>& weights) const;
  // w[a, c, k, h] = <U_kh [a; 1], V_h [c; 1]> for maps on D rows:
  // [S, D, D, K, H].
  torch::Tensor PairValues(const TokenMaps& maps) const;
  // u: [S, T, K*H*dv], b: [S, T, K] per position, y: [S, T, H*dv];
  // returns [S, T, out_dim].
  torch::Tensor Readout(const torch::Tensor& u, const torch::Tensor& b,
                        const torch::Tensor& y) const;

  HeadConfig config_;
  int64_t num_seeds_;
  std::vector<Rng> init_rngs_;  // initial-weight streams, one per seed

 private:
  // Gather indices kept for the last training index seen (full-batch
  // steps pass the same index tensor every step).
  PairGather MakePairGather(const torch::Tensor& idx, int64_t d) const;
  bool FusedByDefault(const torch::Tensor& table, const torch::Tensor& idx) const;
  torch::Tensor FusedForward(const torch::Tensor& table, const torch::Tensor& idx);
  torch::Tensor cached_idx_;
  PairGather cached_gather_;
  torch::Tensor value_, readout_u_, readout_b_;
};

// Normalized kernel attention: kernel, signed_kernel and multihead_kernel.
// phi(x) = feature_map(token_map(x)) per head; y_i = sum_j a_ij v_j / sum_j a_ij
// with a_ij = <phi_Q(x_i), phi_K(x_j)>. Signed heads use the identity as the
// feature map and the scale-free quotient num * den / (den^2 + eps^2 S^2),
// S = sum_j |a_ij|, eps = kSignedEps (docs/TRAINER.md, "Signed kernels").
class KernelHeadImpl : public AttentionHeadImpl {
 public:
  static constexpr double kSignedEps = 0.1;
  KernelHeadImpl(const HeadConfig& config, const std::vector<uint64_t>& seeds);
  // Features of every token: [S, T, H, r] for flat_x [S, T, m].
  torch::Tensor QueryFeatures(const torch::Tensor& flat_x) const;
  torch::Tensor KeyFeatures(const torch::Tensor& flat_x) const;
  // Token-map layers, each [S, din+1, dout] (last row = bias).
  std::vector<torch::Tensor>& query_layers() { return query_layers_; }
  std::vector<torch::Tensor>& key_layers() { return key_layers_; }
  // How Attend computes the normalized attention (short_attention.h); tests
  // force either implementation.
  void set_attention_impl(AttentionImpl impl) { attention_impl_ = impl; }

 protected:
  TokenMaps Maps(const torch::Tensor& rows) const override;
  torch::Tensor Attend(const TokenMaps& maps, int64_t b, int64_t n) const override;
  torch::Tensor PairForward(const TokenMaps& maps, const PairGather& g) const override;
  bool TokenKernelShapeOf(TokenKernelShape* shape) const override;
  torch::Tensor TokenKernelWeights(torch::Tensor* inv_tau) const override;
  int64_t score_width() const override {
    return static_cast<int64_t>(config_.num_heads) * config_.rank;
  }

 private:
  // z: the first token-map layer's output [S, R, width]; the other layers
  // and the feature map follow. Returns [S, R, H, r].
  torch::Tensor Features(const torch::Tensor& z,
                         const std::vector<torch::Tensor>& layers) const;
  std::vector<torch::Tensor> query_layers_, key_layers_;
  AttentionImpl attention_impl_ = AttentionImpl::kAuto;
  torch::Tensor favor_omega_;  // [S, H, r, m] fixed orthogonal Gaussian rows
};
TORCH_MODULE(KernelHead);

// Dense softmax: s_ij = <W_q x_i, W_k x_j> / tau, weights softmax_j. The
// temperature is learned as its inverse, starting hot: inv_tau = 0.1
// (tau = 10). With inv_tau = 1 at the start the scores grew faster than the
// readout and every position learned "attend to the lightest token" (exact
// for the witness family's key positions) until the query position's softmax
// saturated on itself (weight 1 - e^-20) and its gradient vanished: most
// seeds plateaued at error 0.42-0.92. Starting hot keeps attention near
// uniform while the value map and readout form, and Adam moves the single
// scalar inv_tau at most ~lr per step, so the sharpening is gradual
// (docs/TRAINER.md, "Softmax training"). A log-tau parameterization was
// worse still: Adam drove tau up to uniform attention, a plateau too.
class SoftmaxHeadImpl : public AttentionHeadImpl {
 public:
  static constexpr double kInitialInvTau = 0.1;
  SoftmaxHeadImpl(const HeadConfig& config, const std::vector<uint64_t>& seeds);
  torch::Tensor& w_q() { return w_q_; }          // [S, m, score_dim]
  torch::Tensor& w_k() { return w_k_; }          // [S, m, score_dim]
  torch::Tensor& inv_tau() { return inv_tau_; }  // [S], 1 / tau
  // As KernelHeadImpl::set_attention_impl.
  void set_attention_impl(AttentionImpl impl) { attention_impl_ = impl; }

 protected:
  TokenMaps Maps(const torch::Tensor& rows) const override;
  torch::Tensor Attend(const TokenMaps& maps, int64_t b, int64_t n) const override;
  torch::Tensor PairForward(const TokenMaps& maps, const PairGather& g) const override;
  bool TokenKernelShapeOf(TokenKernelShape* shape) const override;
  torch::Tensor TokenKernelWeights(torch::Tensor* inv_tau) const override;
  int64_t score_width() const override { return config_.score_dim; }

 private:
  torch::Tensor w_q_, w_k_, inv_tau_;
  AttentionImpl attention_impl_ = AttentionImpl::kAuto;
};
TORCH_MODULE(SoftmaxHead);

// A freshly initialized head for `config`, one slice per seed.
std::shared_ptr<AttentionHeadImpl> MakeHead(const HeadConfig& config,
                                            const std::vector<uint64_t>& seeds);

// The sharpness the constructions use when head.beta is 0: beta = 1 + ln(N-1)
// (N >= 2; 1 for N = 1). Then beta >= 1 and (N - 1) e^-beta = 1/e < 1/2, which
// bounds how far t_hat is above the target, so rounding is exact
// (docs/SCIENCE.md, "Exact constructions"; the exhaustive tests confirm it).
double DefaultConstructionBeta(int seq_len);

// The exact construction `head.construction` for tokens of dimension m and
// sequences of length seq_len, replicated over num_seeds slices, with the
// scalar readout. InvalidArgument if the construction does not apply.
absl::StatusOr<std::shared_ptr<AttentionHeadImpl>> MakeConstruction(const HeadSpec& head, int m,
                                                                   int seq_len, int num_seeds);

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_HEADS_H_
