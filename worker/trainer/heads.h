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
// (SCIENCE.md, "The two heads"). The exact constructions are the same modules
// with hand-set weights, so they go through the same forward code.
//
// Internal to the trainer library (and its tests).
#ifndef RANKSWEEP_WORKER_TRAINER_HEADS_H_
#define RANKSWEEP_WORKER_TRAINER_HEADS_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"
#include "worker/trainer/rng.h"

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

// The readout shared by all heads: a value map v(x) = V [x; 1] and the
// query-dependent affine readout out_k = <U_k [x_i; 1], y_i> + B_k [x_i; 1].
class AttentionHeadImpl : public torch::nn::Module {
 public:
  // x: [S, B, N, m]. Returns [S, B, N, out_dim].
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  int64_t num_seeds() const { return num_seeds_; }
  const HeadConfig& config() const { return config_; }

  // Value map and readout tensors, exposed so constructions can set them.
  torch::Tensor& value() { return value_; }      // [S, m+1, H*dv]
  torch::Tensor& readout_u() { return readout_u_; }  // [S, m+1, K*H*dv]
  torch::Tensor& readout_b() { return readout_b_; }  // [S, m+1, K]

 protected:
  AttentionHeadImpl(const HeadConfig& config, const std::vector<uint64_t>& seeds);
  // Draws a [S, rows, cols] parameter, uniform in +-bound, seed by seed.
  torch::Tensor DrawUniform(int64_t rows, int64_t cols, double bound);
  torch::Tensor DrawNormal(int64_t rows, int64_t cols);
  // flat_x: [S, T, m]; returns v(x) as [S, T, H*dv].
  torch::Tensor Values(const torch::Tensor& flat_x) const;
  // flat_x: [S, T, m], y: [S, T, H*dv]; returns [S, T, out_dim].
  torch::Tensor Readout(const torch::Tensor& flat_x, const torch::Tensor& y) const;

  HeadConfig config_;
  int64_t num_seeds_;
  std::vector<Rng> init_rngs_;  // initial-weight streams, one per seed

 private:
  torch::Tensor value_, readout_u_, readout_b_;
};

// Normalized kernel attention: kernel, signed_kernel and multihead_kernel.
// phi(x) = feature_map(token_map(x)) per head; y_i = sum_j a_ij v_j / sum_j a_ij
// with a_ij = <phi_Q(x_i), phi_K(x_j)>. Signed heads use the identity as the
// feature map and the safe quotient num * den / (den^2 + kSignedDelta^2).
class KernelHeadImpl : public AttentionHeadImpl {
 public:
  static constexpr double kSignedDelta = 1e-3;
  KernelHeadImpl(const HeadConfig& config, const std::vector<uint64_t>& seeds);
  torch::Tensor forward(const torch::Tensor& x) override;
  // Features of every token: [S, T, H, r] for flat_x [S, T, m].
  torch::Tensor QueryFeatures(const torch::Tensor& flat_x) const;
  torch::Tensor KeyFeatures(const torch::Tensor& flat_x) const;
  // Token-map layers, each [S, din+1, dout] (last row = bias).
  std::vector<torch::Tensor>& query_layers() { return query_layers_; }
  std::vector<torch::Tensor>& key_layers() { return key_layers_; }

 private:
  torch::Tensor Features(const torch::Tensor& flat_x,
                         const std::vector<torch::Tensor>& layers) const;
  std::vector<torch::Tensor> query_layers_, key_layers_;
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
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor& w_q() { return w_q_; }          // [S, m, score_dim]
  torch::Tensor& w_k() { return w_k_; }          // [S, m, score_dim]
  torch::Tensor& inv_tau() { return inv_tau_; }  // [S], 1 / tau

 private:
  torch::Tensor w_q_, w_k_, inv_tau_;
};
TORCH_MODULE(SoftmaxHead);

// A freshly initialized head for `config`, one slice per seed.
std::shared_ptr<AttentionHeadImpl> MakeHead(const HeadConfig& config,
                                            const std::vector<uint64_t>& seeds);

// The sharpness the constructions use when head.beta is 0: beta = 1 + ln(N-1)
// (N >= 2), so e^beta > N - 1 and beta >= 1 (SCIENCE.md; the exhaustive tests
// confirm exactness).
double DefaultConstructionBeta(int seq_len);

// The exact construction `head.construction` for tokens of dimension m and
// sequences of length seq_len, replicated over num_seeds slices, with the
// scalar readout. InvalidArgument if the construction does not apply.
absl::StatusOr<std::shared_ptr<AttentionHeadImpl>> MakeConstruction(const HeadSpec& head, int m,
                                                                   int seq_len, int num_seeds);

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_HEADS_H_
