// The head families (heads.h): the kernel module, which serves every kernel
// kind, and the softmax module; the registry that makes a module for each
// kind (kHeadMakers); and the exact constructions. What every head shares
// (the token maps on shared rows, the pair, token and fused paths of
// ForwardIndexed) is in attention_head.cc.
#include "worker/trainer/heads.h"

#include <torch/utils.h>

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec/head_kinds.h"
#include "worker/trainer/affine.h"
#include "worker/trainer/loop_math.h"
#include "worker/trainer/short_attention.h"

namespace ranksweep::trainer {
namespace {

torch::Tensor ApplyFeatureMap(FeatureMap map, const torch::Tensor& z, double relu_eps) {
  switch (map) {
    case FeatureMap::kEluPlusOne:
      return torch::elu(z) + 1.0;
    case FeatureMap::kReluEps:
      return torch::relu(z) + relu_eps;
    case FeatureMap::kSoftplus:
      return torch::softplus(z);
    case FeatureMap::kExp:
      return torch::exp(z);
    case FeatureMap::kFavorPlus:
      break;  // handled by the caller: it needs the random projection
  }
  return z;
}

// Fills [rows, cols] with orthogonal Gaussian rows in blocks of `cols`
// (Performer's ORF): Gram-Schmidt on Gaussian rows, each row rescaled to the
// norm of an independent Gaussian vector so marginals stay Gaussian.
void OrthogonalGaussian(Rng& rng, int64_t rows, int64_t cols, float* out) {
  std::vector<double> block(cols * cols);
  for (int64_t start = 0; start < rows; start += cols) {
    for (auto& v : block) v = rng.Normal();
    for (int64_t i = 0; i < cols; ++i) {
      double* ri = &block[i * cols];
      for (int64_t j = 0; j < i; ++j) {
        const double* rj = &block[j * cols];
        double dot = 0;
        for (int64_t k = 0; k < cols; ++k) dot += ri[k] * rj[k];
        for (int64_t k = 0; k < cols; ++k) ri[k] -= dot * rj[k];
      }
      double norm = 0;
      for (int64_t k = 0; k < cols; ++k) norm += ri[k] * ri[k];
      norm = std::sqrt(norm);
      for (int64_t k = 0; k < cols; ++k) ri[k] /= norm;
    }
    for (int64_t i = 0; i < cols && start + i < rows; ++i) {
      double scale = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double g = rng.Normal();
        scale += g * g;
      }
      scale = std::sqrt(scale);
      for (int64_t k = 0; k < cols; ++k) {
        out[(start + i) * cols + k] = static_cast<float>(block[i * cols + k] * scale);
      }
    }
  }
}

}  // namespace

HeadConfig MakeHeadConfig(const TaskSpec& spec) {
  HeadConfig c;
  const HeadSpec& h = spec.head;
  c.kind = h.kind;
  c.feature_map = h.feature_map;
  c.hidden = h.hidden;
  c.m = spec.dataset.m;
  c.rank = spec.rank;
  const HeadKindRow* kind = FindHeadKind(h.kind);
  c.num_heads = kind != nullptr && kind->has_num_heads ? h.num_heads : 1;
  c.value_dim = h.value_dim > 0 ? h.value_dim : c.m;
  c.score_dim = h.score_dim > 0 ? h.score_dim : c.m;
  c.relu_eps = h.relu_eps;
  c.out_dim = spec.train.loss == LossKind::kCrossEntropy ? c.m + 1 : 1;
  return c;
}

KernelHeadImpl::KernelHeadImpl(const HeadConfig& config, const std::vector<uint64_t>& seeds)
    : AttentionHeadImpl(config, seeds) {
  const int m = config.m, h = config.num_heads, r = config.rank;
  // FAVOR+ maps the token to an m-wide z per head, then projects it onto r
  // fixed random directions; the other maps produce the r features directly.
  const int map_out = config.feature_map == FeatureMap::kFavorPlus ? h * m : h * r;
  auto make_stack = [&](const char* prefix, std::vector<torch::Tensor>& layers) {
    int din = m;
    std::vector<int> widths = config.hidden;
    widths.push_back(map_out);
    for (size_t l = 0; l < widths.size(); ++l) {
      torch::Tensor w = DrawUniform(din + 1, widths[l], 1.0 / std::sqrt(din));
      layers.push_back(register_parameter(absl::StrCat(prefix, l), w));
      din = widths[l];
    }
  };
  // Registration order fixes the draw order of each seed's stream.
  make_stack("query_map", query_layers_);
  make_stack("key_map", key_layers_);
  const int hd = h * config.value_dim;
  value() = register_parameter("value", DrawUniform(m + 1, hd, 1.0 / std::sqrt(m)));
  readout_u() = register_parameter(
      "readout_u", DrawUniform(m + 1, config.out_dim * hd, 1.0 / std::sqrt(m)));
  readout_b() =
      register_parameter("readout_b", DrawUniform(m + 1, config.out_dim, 1.0 / std::sqrt(m)));
  if (config.feature_map == FeatureMap::kFavorPlus) {
    torch::Tensor omega = torch::empty({num_seeds_, h, r, m}, torch::kFloat32);
    float* p = omega.data_ptr<float>();
    for (int64_t s = 0; s < num_seeds_; ++s) {
      for (int hh = 0; hh < h; ++hh) {
        OrthogonalGaussian(init_rngs_[s], r, m, p);
        p += static_cast<int64_t>(r) * m;
      }
    }
    favor_omega_ = register_buffer("favor_omega", omega);
  }
}

torch::Tensor KernelHeadImpl::Features(const torch::Tensor& z0,
                                       const std::vector<torch::Tensor>& layers) const {
  torch::Tensor z = z0;
  for (size_t l = 1; l < layers.size(); ++l) z = Affine(torch::relu(z), layers[l]);
  const int64_t s = z.size(0), t = z.size(1);
  const int h = config_.num_heads, r = config_.rank;
  if (config_.kind == HeadKind::kSignedKernel) return z.reshape({s, t, h, r});
  if (config_.feature_map == FeatureMap::kFavorPlus) {
    torch::Tensor zh = z.reshape({s, t, h, config_.m});
    torch::Tensor proj = torch::einsum("sthd,shrd->sthr", {zh, favor_omega_});
    torch::Tensor half_norm = 0.5 * (zh * zh).sum(-1, /*keepdim=*/true);
    return torch::exp(proj - half_norm) / std::sqrt(static_cast<double>(r));
  }
  return ApplyFeatureMap(config_.feature_map, z, config_.relu_eps).reshape({s, t, h, r});
}

torch::Tensor KernelHeadImpl::QueryFeatures(const torch::Tensor& flat_x) const {
  return Features(Affine(flat_x, query_layers_[0]), query_layers_);
}
torch::Tensor KernelHeadImpl::KeyFeatures(const torch::Tensor& flat_x) const {
  return Features(Affine(flat_x, key_layers_[0]), key_layers_);
}

TokenMaps KernelHeadImpl::Maps(const torch::Tensor& rows) const {
  const std::vector<torch::Tensor> first = AffineMaps(
      rows, {query_layers_[0], key_layers_[0], value(), readout_u(), readout_b()});
  TokenMaps maps;
  maps.q = Features(first[0], query_layers_);  // [S, R, H, r]
  maps.k = Features(first[1], key_layers_);
  maps.v = first[2];
  maps.u = first[3];
  maps.b = first[4];
  return maps;
}

torch::Tensor KernelHeadImpl::Attend(const TokenMaps& maps, int64_t b, int64_t n) const {
  const int64_t s = maps.q.size(0);
  const int h = config_.num_heads, r = config_.rank, dv = config_.value_dim;
  // One group per (seed, sequence, head) (short_attention.h). With one head
  // the permutes below are free (a size-1 dimension moves).
  auto per_head = [&](const torch::Tensor& t, int64_t width) {  // -> [S*B*H, N, width]
    return t.reshape({s, b, n, h, width}).permute({0, 1, 3, 2, 4}).reshape({s * b * h, n, width});
  };
  const double eps = config_.kind == HeadKind::kSignedKernel ? kSignedEps : 0.0;
  torch::Tensor y = NormalizedAttention(per_head(maps.q, r), per_head(maps.k, r),
                                        per_head(maps.v, dv), eps, attention_impl_);
  // [S*B*H, N, dv] -> [S, B, N, H, dv] -> [S, B*N, H*dv]
  y = y.view({s, b, h, n, dv}).permute({0, 1, 3, 2, 4}).reshape({s, b * n, h * dv});
  torch::Tensor out = Readout(maps.u, maps.b, y);
  return out.view({s, b, n, config_.out_dim});
}

torch::Tensor KernelHeadImpl::PairForward(const TokenMaps& maps, const PairGather& g) const {
  const int64_t s = g.s, b = g.b, n = g.n, d = g.d;
  const int64_t h = config_.num_heads, k = config_.out_dim;
  // Per pair of distinct tokens: alpha [S, D, D, H] and alpha * w
  // [S, D, D, K*H], so num_i = sum_j (alpha w)(x_i, x_j) and
  // den_i = sum_j alpha(x_i, x_j) need one gather and one sum each.
  torch::Tensor alpha;  // [S, D, D, H]
  if (h == 1) {
    torch::Tensor q = maps.q.reshape({s, d, -1});
    alpha = torch::bmm(q, maps.k.reshape({s, d, -1}).transpose(1, 2)).unsqueeze(-1);
  } else {
    torch::Tensor q = maps.q.permute({0, 2, 1, 3});   // [S, H, D, r]
    torch::Tensor kf = maps.k.permute({0, 2, 3, 1});  // [S, H, r, D]
    alpha = torch::matmul(q, kf).permute({0, 2, 3, 1});
  }
  torch::Tensor aw = (alpha.unsqueeze(3) * PairValues(maps)).reshape({s, d, d, k * h});
  torch::Tensor num = g.Pairs(aw).sum(0).view({s, b, n, k, h});  // [S, B, N, K, H]
  torch::Tensor den = g.Pairs(alpha).sum(0).unsqueeze(3);        // [S, B, N, 1, H]
  torch::Tensor y;
  if (config_.kind == HeadKind::kSignedKernel) {
    torch::Tensor abs_sum = g.Pairs(alpha.abs()).sum(0).unsqueeze(3);  // [S, B, N, 1, H]
    y = num * SignedQuotient(den, abs_sum, kSignedEps);
  } else {
    y = num / den.clamp_min(loops::kDenFloor);  // see Attend
  }
  return (h == 1 ? y.squeeze(-1) : y.sum(-1)) + g.Rows(maps.b);
}

bool KernelHeadImpl::TokenKernelShapeOf(TokenKernelShape* shape) const {
  const HeadConfig& c = config_;
  if (c.num_heads != 1 || !c.hidden.empty() || attention_impl_ != AttentionImpl::kAuto) {
    return false;
  }
  shape->kind = TokenKernelShape::Kind::kKernel;
  if (c.kind == HeadKind::kSignedKernel) {
    shape->kind = TokenKernelShape::Kind::kSignedKernel;
    shape->signed_eps = kSignedEps;
  } else if (c.feature_map == FeatureMap::kEluPlusOne) {
    shape->map = TokenKernelShape::Map::kEluPlusOne;
  } else if (c.feature_map == FeatureMap::kReluEps) {
    shape->map = TokenKernelShape::Map::kReluEps;
    shape->relu_eps = c.relu_eps;
  } else if (c.feature_map == FeatureMap::kExp) {
    shape->map = TokenKernelShape::Map::kExp;
  } else {
    return false;  // softplus, FAVOR+: the unfused path
  }
  shape->score = c.rank;
  shape->dv = c.value_dim;
  shape->k = c.out_dim;
  return true;
}

torch::Tensor KernelHeadImpl::TokenKernelWeights(torch::Tensor* inv_tau) const {
  *inv_tau = torch::Tensor();
  return torch::cat({query_layers_[0], key_layers_[0], value(), readout_u(), readout_b()}, 2);
}

SoftmaxHeadImpl::SoftmaxHeadImpl(const HeadConfig& config, const std::vector<uint64_t>& seeds)
    : AttentionHeadImpl(config, seeds) {
  const int m = config.m, ds = config.score_dim;
  w_q_ = register_parameter("w_q", DrawUniform(m, ds, 1.0 / std::sqrt(m)));
  w_k_ = register_parameter("w_k", DrawUniform(m, ds, 1.0 / std::sqrt(m)));
  inv_tau_ = register_parameter("inv_tau",
                                torch::full({num_seeds_}, kInitialInvTau, torch::kFloat32));
  const int dv = config.value_dim;
  value() = register_parameter("value", DrawUniform(m + 1, dv, 1.0 / std::sqrt(m)));
  readout_u() = register_parameter(
      "readout_u", DrawUniform(m + 1, config.out_dim * dv, 1.0 / std::sqrt(m)));
  readout_b() =
      register_parameter("readout_b", DrawUniform(m + 1, config.out_dim, 1.0 / std::sqrt(m)));
}

TokenMaps SoftmaxHeadImpl::Maps(const torch::Tensor& rows) const {
  const std::vector<torch::Tensor> first =
      AffineMaps(rows, {w_q_, w_k_, value(), readout_u(), readout_b()});
  TokenMaps maps;
  maps.q = first[0];  // [S, R, score_dim]
  maps.k = first[1];
  maps.v = first[2];
  maps.u = first[3];
  maps.b = first[4];
  return maps;
}

torch::Tensor SoftmaxHeadImpl::Attend(const TokenMaps& maps, int64_t b, int64_t n) const {
  const int64_t s = maps.q.size(0);
  auto per_sequence = [&](const torch::Tensor& t) { return t.reshape({s * b, n, -1}); };
  torch::Tensor y = SoftmaxAttention(per_sequence(maps.q), per_sequence(maps.k),
                                     per_sequence(maps.v), inv_tau_, attention_impl_);
  torch::Tensor out = Readout(maps.u, maps.b, y.view({s, b * n, config_.value_dim}));
  return out.view({s, b, n, config_.out_dim});
}

torch::Tensor SoftmaxHeadImpl::PairForward(const TokenMaps& maps, const PairGather& g) const {
  const int64_t s = g.s;
  torch::Tensor scores =
      (torch::bmm(maps.q, maps.k.transpose(1, 2)) * inv_tau_.view({s, 1, 1})).unsqueeze(-1);
  torch::Tensor weights = torch::softmax(g.Pairs(scores), 0);  // over j: [N, S, B, N, 1]
  torch::Tensor w = PairValues(maps).squeeze(-1);               // [S, D, D, K]
  return (weights * g.Pairs(w)).sum(0) + g.Rows(maps.b);
}

bool SoftmaxHeadImpl::TokenKernelShapeOf(TokenKernelShape* shape) const {
  if (attention_impl_ != AttentionImpl::kAuto) return false;
  shape->kind = TokenKernelShape::Kind::kSoftmax;
  shape->score = config_.score_dim;
  shape->dv = config_.value_dim;
  shape->k = config_.out_dim;
  return true;
}

torch::Tensor SoftmaxHeadImpl::TokenKernelWeights(torch::Tensor* inv_tau) const {
  *inv_tau = inv_tau_;
  // The score maps have no bias: a zero row for the ones column.
  const torch::Tensor zero = torch::zeros({num_seeds_, 1, config_.score_dim}, w_q_.options());
  return torch::cat({torch::cat({w_q_, zero}, 1), torch::cat({w_k_, zero}, 1), value(),
                     readout_u(), readout_b()},
                    2);
}

// A head module of type T for `config`, one parameter set per seed.
template <typename T>
std::shared_ptr<AttentionHeadImpl> MakeModule(const HeadConfig& config,
                                              const std::vector<uint64_t>& seeds) {
  return std::make_shared<T>(config, seeds);
}

std::shared_ptr<AttentionHeadImpl> MakeHead(const HeadConfig& config,
                                            const std::vector<uint64_t>& seeds) {
  // How each kind is built; what the spec side knows of it is its row in
  // common/spec/head_kinds.h. The kernel module serves every kernel kind
  // (signed features and several heads are its options).
  using Maker = std::shared_ptr<AttentionHeadImpl> (*)(const HeadConfig&,
                                                       const std::vector<uint64_t>&);
  struct HeadMaker {
    HeadKind kind;
    Maker make;
  };
  static const HeadMaker kHeadMakers[] = {
      {HeadKind::kKernel, MakeModule<KernelHeadImpl>},
      {HeadKind::kSoftmax, MakeModule<SoftmaxHeadImpl>},
      {HeadKind::kSignedKernel, MakeModule<KernelHeadImpl>},
      {HeadKind::kMultiheadKernel, MakeModule<KernelHeadImpl>},
  };
  for (const HeadMaker& maker : kHeadMakers) {
    if (maker.kind == config.kind) return maker.make(config, seeds);
  }
  // ValidateHead refused any other kind; the kernel module is the default.
  return std::make_shared<KernelHeadImpl>(config, seeds);
}

double DefaultConstructionBeta(int seq_len) {
  return 1.0 + std::log(static_cast<double>(std::max(seq_len - 1, 1)));
}

absl::StatusOr<std::shared_ptr<AttentionHeadImpl>> MakeConstruction(const HeadSpec& head, int m,
                                                                   int seq_len, int num_seeds) {
  const double beta = head.beta > 0 ? head.beta : DefaultConstructionBeta(seq_len);
  HeadConfig c;
  c.m = m;
  c.value_dim = m;
  c.score_dim = m;
  c.out_dim = 1;
  c.relu_eps = head.relu_eps;
  const std::vector<uint64_t> seeds(num_seeds, 0);  // weights are overwritten
  torch::NoGradGuard no_grad;
  // Identity value map v(z) = z and readout u(x) = u_scale * x, b(x) = b_scale * |x|.
  auto set_readout = [m](AttentionHeadImpl& head, double u_scale, double b_scale) {
    torch::Tensor eye = torch::eye(m + 1, m, torch::kFloat32);  // last (bias) row zero
    head.value().copy_(eye.expand_as(head.value()));
    head.readout_u().copy_((u_scale * eye).expand_as(head.readout_u()));
    torch::Tensor b = torch::zeros({m + 1, 1}, torch::kFloat32);
    b.narrow(0, 0, m).fill_(b_scale);
    head.readout_b().copy_(b.expand_as(head.readout_b()));
  };
  switch (head.construction) {
    case Construction::kRank1: {
      // alpha == const > 0 (zero token map), t_hat = 2 <x, mean_j x_j> - |x|.
      c.kind = HeadKind::kKernel;
      c.feature_map = head.feature_map;
      c.rank = 1;
      auto h = std::make_shared<KernelHeadImpl>(c, seeds);
      for (auto& w : h->query_layers()) w.zero_();
      for (auto& w : h->key_layers()) w.zero_();
      set_readout(*h, 2.0, -1.0);
      return std::shared_ptr<AttentionHeadImpl>(h);
    }
    case Construction::kIndicator: {
      if (m > SpecLimits::kMaxIndicatorM) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dataset.m (indicator construction) must be in 1..", SpecLimits::kMaxIndicatorM,
            ", got ", m));
      }
      // phi_Q(x)_u = exp(-beta <x,u>); phi_K(z)_u = exp(-gamma * Hamming(z,u)),
      // a one-hot of z up to e^-gamma. gamma = beta*m + 30 keeps the
      // off-hot leak (<= m e^-gamma) far below the smallest true kernel
      // value e^(-beta m).
      const double gamma = beta * m + 30.0;
      c.kind = HeadKind::kKernel;
      c.feature_map = FeatureMap::kExp;
      c.rank = 1 << m;
      auto h = std::make_shared<KernelHeadImpl>(c, seeds);
      torch::Tensor wq = torch::zeros({m + 1, c.rank}, torch::kFloat32);
      torch::Tensor wk = torch::zeros({m + 1, c.rank}, torch::kFloat32);
      auto aq = wq.accessor<float, 2>();
      auto ak = wk.accessor<float, 2>();
      for (int u = 0; u < c.rank; ++u) {
        for (int k = 0; k < m; ++k) {
          const int bit = (u >> k) & 1;
          aq[k][u] = static_cast<float>(-beta * bit);
          ak[k][u] = static_cast<float>(gamma * (2 * bit - 1));
        }
        ak[m][u] = static_cast<float>(-gamma * __builtin_popcount(u));
      }
      h->query_layers()[0].copy_(wq.expand_as(h->query_layers()[0]));
      h->key_layers()[0].copy_(wk.expand_as(h->key_layers()[0]));
      set_readout(*h, 1.0, 0.0);
      return std::shared_ptr<AttentionHeadImpl>(h);
    }
    case Construction::kSoftmaxExact: {
      c.kind = HeadKind::kSoftmax;
      auto h = std::make_shared<SoftmaxHeadImpl>(c, seeds);
      torch::Tensor eye = torch::eye(m, torch::kFloat32);
      h->w_q().copy_((-beta * eye).expand_as(h->w_q()));
      h->w_k().copy_(eye.expand_as(h->w_k()));
      h->inv_tau().fill_(1.0);
      set_readout(*h, 1.0, 0.0);
      return std::shared_ptr<AttentionHeadImpl>(h);
    }
    case Construction::kNone:
      break;
  }
  return absl::InvalidArgumentError("head.construction must be one of rank1, indicator, "
                                    "softmax_exact for MakeConstruction");
}

}  // namespace ranksweep::trainer