// What every head of heads.h shares: the token index, the head's
// per-seed initial draws, its token maps on per-seed or shared rows, and
// the paths of ForwardIndexed (pairs of distinct tokens, tokens gathered per
// position, the fused CPU kernel) with the choice between them. The head
// families and their registry are in heads.cc.
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "worker/trainer/affine.h"
#include "worker/trainer/heads.h"
#include "worker/trainer/short_attention.h"

namespace ranksweep::trainer {

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

}  // namespace ranksweep::trainer
