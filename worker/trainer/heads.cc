#include "worker/trainer/heads.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace ranksweep::trainer {
namespace {

// x: [S, T, din], w: [S, din+1, dout] with the bias as the last row. One
// fused baddbmm (bias broadcast over T) rather than bmm + add.
torch::Tensor Affine(const torch::Tensor& x, const torch::Tensor& w) {
  const int64_t din = x.size(2);
  return torch::baddbmm(w.narrow(1, din, 1), x, w.narrow(1, 0, din));
}

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
  c.num_heads = h.kind == HeadKind::kMultiheadKernel ? h.num_heads : 1;
  c.value_dim = h.value_dim > 0 ? h.value_dim : c.m;
  c.score_dim = h.score_dim > 0 ? h.score_dim : c.m;
  c.relu_eps = h.relu_eps;
  c.out_dim = spec.train.loss == LossKind::kCrossEntropy ? c.m + 1 : 1;
  return c;
}

AttentionHeadImpl::AttentionHeadImpl(const HeadConfig& config, const std::vector<uint64_t>& seeds)
    : config_(config), num_seeds_(static_cast<int64_t>(seeds.size())) {
  for (uint64_t s : seeds) init_rngs_.push_back(Rng::ForStream(s, kStreamInit));
}

torch::Tensor AttentionHeadImpl::DrawUniform(int64_t rows, int64_t cols, double bound) {
  torch::Tensor t = torch::empty({num_seeds_, rows, cols}, torch::kFloat32);
  float* p = t.data_ptr<float>();
  for (int64_t s = 0; s < num_seeds_; ++s) {
    for (int64_t i = 0; i < rows * cols; ++i) {
      *p++ = static_cast<float>((2.0 * init_rngs_[s].Uniform() - 1.0) * bound);
    }
  }
  return t;
}

torch::Tensor AttentionHeadImpl::DrawNormal(int64_t rows, int64_t cols) {
  torch::Tensor t = torch::empty({num_seeds_, rows, cols}, torch::kFloat32);
  float* p = t.data_ptr<float>();
  for (int64_t s = 0; s < num_seeds_; ++s) {
    for (int64_t i = 0; i < rows * cols; ++i) *p++ = static_cast<float>(init_rngs_[s].Normal());
  }
  return t;
}

torch::Tensor AttentionHeadImpl::Values(const torch::Tensor& flat_x) const {
  return Affine(flat_x, value_);
}

torch::Tensor AttentionHeadImpl::Readout(const torch::Tensor& flat_x,
                                         const torch::Tensor& y) const {
  const int64_t s = flat_x.size(0), t = flat_x.size(1);
  const int64_t hd = y.size(2);
  torch::Tensor u = Affine(flat_x, readout_u_).view({s, t, config_.out_dim, hd});
  return (u * y.unsqueeze(2)).sum(-1) + Affine(flat_x, readout_b_);
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

torch::Tensor KernelHeadImpl::Features(const torch::Tensor& flat_x,
                                       const std::vector<torch::Tensor>& layers) const {
  torch::Tensor z = flat_x;
  for (size_t l = 0; l < layers.size(); ++l) {
    z = Affine(z, layers[l]);
    if (l + 1 < layers.size()) z = torch::relu(z);
  }
  const int64_t s = flat_x.size(0), t = flat_x.size(1);
  const int h = config_.num_heads, r = config_.rank;
  if (config_.kind == HeadKind::kSignedKernel) return z.view({s, t, h, r});
  if (config_.feature_map == FeatureMap::kFavorPlus) {
    torch::Tensor zh = z.view({s, t, h, config_.m});
    torch::Tensor proj = torch::einsum("sthd,shrd->sthr", {zh, favor_omega_});
    torch::Tensor half_norm = 0.5 * (zh * zh).sum(-1, /*keepdim=*/true);
    return torch::exp(proj - half_norm) / std::sqrt(static_cast<double>(r));
  }
  return ApplyFeatureMap(config_.feature_map, z, config_.relu_eps).view({s, t, h, r});
}

torch::Tensor KernelHeadImpl::QueryFeatures(const torch::Tensor& flat_x) const {
  return Features(flat_x, query_layers_);
}
torch::Tensor KernelHeadImpl::KeyFeatures(const torch::Tensor& flat_x) const {
  return Features(flat_x, key_layers_);
}

torch::Tensor KernelHeadImpl::forward(const torch::Tensor& x) {
  const int64_t s = x.size(0), b = x.size(1), n = x.size(2), m = x.size(3);
  const int h = config_.num_heads, r = config_.rank, dv = config_.value_dim;
  torch::Tensor flat = x.reshape({s, b * n, m});
  // Batched matrix products over (seed, sequence, head); einsum on LibTorch
  // 1.13 adds permutes and reshapes around the same bmm. With one head the
  // permutes below are free (a size-1 dimension moves).
  auto per_head = [&](const torch::Tensor& t, int64_t width) {  // -> [S*B*H, N, width]
    return t.view({s, b, n, h, width}).permute({0, 1, 3, 2, 4}).reshape({s * b * h, n, width});
  };
  torch::Tensor fq = per_head(QueryFeatures(flat), r);
  torch::Tensor fk = per_head(KeyFeatures(flat), r);
  torch::Tensor alpha = torch::bmm(fq, fk.transpose(1, 2));  // [S*B*H, N, N]
  torch::Tensor v = per_head(Values(flat), dv);
  auto back = [&](const torch::Tensor& t, int64_t width) {  // -> [S, B, N, H, width]
    return t.view({s, b, h, n, width}).permute({0, 1, 3, 2, 4});
  };
  torch::Tensor num = back(torch::bmm(alpha, v), dv);          // [S,B,N,H,dv]
  torch::Tensor den = back(alpha.sum(-1, /*keepdim=*/true), 1);  // [S,B,N,H,1]
  torch::Tensor y;
  if (config_.kind == HeadKind::kSignedKernel) {
    y = num * den / (den * den + kSignedDelta * kSignedDelta);
  } else {
    // Features are positive, so den > 0 up to float underflow; the floor
    // only keeps an underflowed row finite.
    y = num / den.clamp_min(1e-30);
  }
  torch::Tensor out = Readout(flat, y.reshape({s, b * n, h * dv}));
  return out.view({s, b, n, config_.out_dim});
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

torch::Tensor SoftmaxHeadImpl::forward(const torch::Tensor& x) {
  const int64_t s = x.size(0), b = x.size(1), n = x.size(2), m = x.size(3);
  torch::Tensor flat = x.reshape({s, b * n, m});
  torch::Tensor q = torch::bmm(flat, w_q_).view({s, b, n, -1});
  torch::Tensor k = torch::bmm(flat, w_k_).view({s, b, n, -1});
  torch::Tensor scores = torch::matmul(q, k.transpose(2, 3)) * inv_tau_.view({s, 1, 1, 1});
  torch::Tensor weights = torch::softmax(scores, -1);                      // [S,B,N,N]
  torch::Tensor v = Values(flat).view({s, b, n, config_.value_dim});
  torch::Tensor y = torch::matmul(weights, v);                              // [S,B,N,dv]
  torch::Tensor out = Readout(flat, y.reshape({s, b * n, config_.value_dim}));
  return out.view({s, b, n, config_.out_dim});
}

std::shared_ptr<AttentionHeadImpl> MakeHead(const HeadConfig& config,
                                            const std::vector<uint64_t>& seeds) {
  if (config.kind == HeadKind::kSoftmax) return std::make_shared<SoftmaxHeadImpl>(config, seeds);
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
