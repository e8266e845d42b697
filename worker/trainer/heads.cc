#include "worker/trainer/heads.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/spec/head_kinds.h"
#include "worker/trainer/loop_math.h"
#include "worker/trainer/short_attention.h"

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

TokenIndex IndexTokens(const std::vector<uint64_t>& tokens, int64_t size, int seq_len, int m,
                       const torch::Device& device) {
  const int64_t count = size * seq_len;
  std::unordered_map<uint64_t, int64_t> row;
  std::vector<uint64_t> distinct;
  torch::Tensor index = torch::empty({size, seq_len}, torch::kLong);
  int64_t* p = index.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const auto [it, inserted] = row.emplace(tokens[i], static_cast<int64_t>(distinct.size()));
    if (inserted) distinct.push_back(tokens[i]);
    p[i] = it->second;
  }
  const int64_t d = static_cast<int64_t>(distinct.size());
  torch::Tensor table = torch::empty({d, m}, torch::kFloat32);
  float* pt = table.data_ptr<float>();
  for (uint64_t tok : distinct) {
    for (int k = 0; k < m; ++k) *pt++ = static_cast<float>((tok >> k) & 1);
  }
  return {table.to(device), index.to(device)};
}

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

std::vector<torch::Tensor> AttentionHeadImpl::AffineMaps(
    const torch::Tensor& rows, const std::vector<torch::Tensor>& weights) const {
  std::vector<torch::Tensor> out;
  const int64_t din = rows.size(-1);
  if (rows.dim() == 3) {
    for (const torch::Tensor& w : weights) {
      out.push_back(w.size(1) == din ? torch::bmm(rows, w) : Affine(rows, w));
    }
    return out;
  }
  // Shared rows: [R, din+1] (ones column) times all weights side by side,
  // laid out as [din+1, S*F_total], one GEMM. A weight without a bias row
  // gets a zero one.
  const int64_t r = rows.size(0), s = num_seeds_;
  std::vector<torch::Tensor> parts;
  std::vector<int64_t> widths;
  int64_t total = 0;
  for (const torch::Tensor& w : weights) {
    parts.push_back(w.size(1) == din
                        ? torch::cat({w, torch::zeros({s, 1, w.size(2)}, w.options())}, 1)
                        : w);
    widths.push_back(w.size(2));
    total += w.size(2);
  }
  torch::Tensor cat = parts.size() == 1 ? parts[0] : torch::cat(parts, 2);  // [S, din+1, F]
  torch::Tensor xa = torch::cat({rows, torch::ones({r, 1}, rows.options())}, 1);
  torch::Tensor all = torch::mm(xa, cat.permute({1, 0, 2}).reshape({din + 1, s * total}))
                          .view({r, s, total})
                          .permute({1, 0, 2});  // [S, R, F_total]
  // One split (its backward is one cat), not a narrow per weight (each
  // backward a zero-filled full-width gradient).
  return all.split_with_sizes(widths, 2);
}

torch::Tensor AttentionHeadImpl::Readout(const torch::Tensor& u, const torch::Tensor& b,
                                         const torch::Tensor& y) const {
  const int64_t s = y.size(0), t = y.size(1), hd = y.size(2);
  return (u.reshape({s, t, config_.out_dim, hd}) * y.unsqueeze(2)).sum(-1) + b;
}

torch::Tensor AttentionHeadImpl::PairValues(const TokenMaps& maps) const {
  const int64_t s = num_seeds_, d = maps.v.size(1);
  const int64_t h = config_.num_heads, k = config_.out_dim, dv = config_.value_dim;
  if (h == 1) {  // one bmm: [S, D*K, dv] x [S, dv, D]
    torch::Tensor w = torch::bmm(maps.u.reshape({s, d * k, dv}), maps.v.transpose(1, 2));
    return w.view({s, d, k, d}).permute({0, 1, 3, 2}).unsqueeze(-1);
  }
  torch::Tensor u = maps.u.reshape({s, d * k, h, dv}).permute({0, 2, 1, 3});  // [S,H,D*K,dv]
  torch::Tensor v = maps.v.reshape({s, d, h, dv}).permute({0, 2, 3, 1});      // [S,H,dv,D]
  return torch::matmul(u, v).view({s, h, d, k, d}).permute({0, 2, 4, 3, 1});
}

torch::Tensor AttentionHeadImpl::forward(const torch::Tensor& x) {
  const int64_t s = x.size(0), b = x.size(1), n = x.size(2), m = x.size(3);
  return Attend(Maps(x.reshape({s, b * n, m})), b, n);
}

namespace {

// Adds `channels` consecutive entries per flat index: [..] -> [.., C].
torch::Tensor WithChannels(const torch::Tensor& flat, int64_t channels) {
  return flat.unsqueeze(-1) * channels + torch::arange(channels, flat.options());
}

// table's entries at `index` (any shape), as index's shape. A 1-D gather:
// its backward is one scatter-add into the small table.
torch::Tensor Take(const torch::Tensor& table, const torch::Tensor& index) {
  return table.reshape({-1}).gather(0, index.reshape({-1})).view(index.sizes());
}

// Rows of t [S, R, ...] at flat (seed, row) indices [S, Q], as [S, Q, ...].
torch::Tensor GatherRows(const torch::Tensor& t, const torch::Tensor& flat) {
  std::vector<int64_t> shape = t.sizes().vec();
  const int64_t s = shape[0], q = flat.size(1);
  shape.erase(shape.begin());
  shape[0] *= s;
  std::vector<int64_t> view = t.sizes().vec();
  view[1] = q;
  return t.reshape(shape).index_select(0, flat.reshape({-1})).view(view);
}

}  // namespace

torch::Tensor AttentionHeadImpl::PairGather::Pairs(const torch::Tensor& table) const {
  const int64_t c = table.size(-1);
  return Take(table, c == 1 ? pairs.unsqueeze(-1) : WithChannels(pairs, c));
}

torch::Tensor AttentionHeadImpl::PairGather::Rows(const torch::Tensor& table) const {
  const int64_t c = table.size(-1);
  return Take(table, c == 1 ? rows.unsqueeze(-1) : WithChannels(rows, c));
}

bool AttentionHeadImpl::UsesPairs(int64_t d, int64_t b, int64_t n) const {
  // Values touched (roughly) per forward; both paths share the maps on D rows.
  const int64_t h = config_.num_heads, k = config_.out_dim, dv = config_.value_dim;
  const int64_t f = score_width();
  const double pair = static_cast<double>(d) * d * (f + k * h * dv + h + k * h) +
                      static_cast<double>(b) * n * n * (h + k * h) +
                      static_cast<double>(b) * n * k;
  const double token = static_cast<double>(b) * n * (2 * f + h * dv + k * h * dv + k) +
                       static_cast<double>(b) * n * n * h * (1 + dv);
  return pair <= token;
}

AttentionHeadImpl::PairGather AttentionHeadImpl::MakePairGather(const torch::Tensor& idx,
                                                                int64_t d) const {
  PairGather g;
  g.s = num_seeds_;
  g.b = idx.size(1);
  g.n = idx.size(2);
  g.d = d;
  const torch::Tensor seed = torch::arange(g.s, idx.options());
  // [S or 1, B, N] -> [S, B, N] rows of the seed's [D] block.
  g.rows = (idx + (seed * d).view({g.s, 1, 1})).contiguous();
  // (j, s, b, i) -> (s * D + x_i) * D + x_j.
  g.pairs = (g.rows.unsqueeze(0) * d + idx.permute({2, 0, 1}).unsqueeze(-1)).contiguous();
  return g;
}

torch::Tensor AttentionHeadImpl::ForwardIndexed(const torch::Tensor& table,
                                                const torch::Tensor& idx, Path path) {
  const int64_t s = num_seeds_, d = table.size(0);
  const int64_t b = idx.size(1), n = idx.size(2);
  if (path == Path::kFused || (path == Path::kAuto && FusedByDefault(table, idx))) {
    return FusedForward(table, idx);
  }
  if (path == Path::kAuto && 2 * d > b * n) {
    // Hardly any repeats (or a minibatch of a split with many distinct
    // tokens): maps on the table would cost more than on the positions.
    return forward(table.index_select(0, idx.reshape({-1}))
                       .view({idx.size(0), b, n, table.size(1)})
                       .expand({s, b, n, table.size(1)}));
  }
  const TokenMaps maps = Maps(table);  // [S, D, ...], one GEMM for the first layers
  if (path == Path::kPairs || (path == Path::kAuto && UsesPairs(d, b, n))) {
    // Reuse the gather indices when the same index tensor comes again. Not
    // from inference mode: its tensors cannot be saved for a backward.
    if (cached_idx_.defined() && cached_idx_.is_same(idx) && cached_gather_.d == d) {
      return PairForward(maps, cached_gather_);
    }
    PairGather g = MakePairGather(idx, d);
    if (!c10::InferenceMode::is_enabled()) {
      cached_idx_ = idx;
      cached_gather_ = g;
    }
    return PairForward(maps, g);
  }
  const torch::Tensor flat =
      (idx + (torch::arange(s, idx.options()) * d).view({s, 1, 1})).reshape({s, b * n});
  TokenMaps at;
  at.q = GatherRows(maps.q, flat);
  at.k = GatherRows(maps.k, flat);
  at.v = GatherRows(maps.v, flat);
  at.u = GatherRows(maps.u, flat);
  at.b = GatherRows(maps.b, flat);
  return Attend(at, b, n);
}

bool AttentionHeadImpl::UsesTokenKernel(const torch::Tensor& table, int64_t n) const {
  // RANKSWEEP_TOKEN_KERNEL=0 turns the fused path off (docs/TRAINER.md).
  static const bool enabled = [] {
    const char* env = std::getenv("RANKSWEEP_TOKEN_KERNEL");
    return env == nullptr || std::string(env) != "0";
  }();
  TokenKernelShape shape;
  return enabled && table.device().is_cpu() && table.scalar_type() == torch::kFloat32 &&
         n <= kShortAttentionMaxLen && TokenKernelShapeOf(&shape);
}

bool AttentionHeadImpl::FusedByDefault(const torch::Tensor& table,
                                       const torch::Tensor& idx) const {
  const int64_t d = table.size(0), b = idx.size(1), n = idx.size(2);
  return UsesTokenKernel(table, n) && (2 * d > b * n || !UsesPairs(d, b, n));
}

torch::Tensor AttentionHeadImpl::IndexedMseLoss(const torch::Tensor& table,
                                                const torch::Tensor& idx,
                                                const torch::Tensor& targets,
                                                const torch::Tensor& weight) {
  TokenKernelShape shape;
  if (config_.out_dim != 1 || !FusedByDefault(table, idx) || !TokenKernelShapeOf(&shape)) {
    return torch::Tensor();
  }
  torch::Tensor inv_tau;
  const torch::Tensor w = TokenKernelWeights(&inv_tau);
  return TokenKernelMseLoss(table, idx.reshape({idx.size(0), -1}), w, inv_tau, idx.size(2), shape,
                            targets, weight);
}

torch::Tensor AttentionHeadImpl::FusedForward(const torch::Tensor& table,
                                              const torch::Tensor& idx) {
  TokenKernelShape shape;
  TORCH_CHECK(UsesTokenKernel(table, idx.size(2)) && TokenKernelShapeOf(&shape),
              "ForwardIndexed: the fused path does not apply to this head or table");
  torch::Tensor inv_tau;
  const torch::Tensor w = TokenKernelWeights(&inv_tau);
  return TokenKernelForward(table, idx.reshape({idx.size(0), -1}), w, inv_tau, idx.size(2),
                            shape);
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
