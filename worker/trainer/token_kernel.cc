// The driver of the token kernels (token_kernel.h): checks the inputs and
// lays out the problem, splits each seed's sequences into blocks and work
// items run in parallel, runs the per-block passes (token_kernel_maps.cc,
// token_kernel_attention.cc) forward and backward, and wraps them as
// autograd functions for the public entry points.
#include "worker/trainer/token_kernel.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/utils.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "worker/trainer/token_kernel_internal.h"

namespace ranksweep::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using token_kernel_internal::BlockBackward;
using token_kernel_internal::BlockForward;
using token_kernel_internal::GradSource;
using token_kernel_internal::ListInputs;
using token_kernel_internal::Maps;
using token_kernel_internal::Problem;
using token_kernel_internal::Scratch;
using token_kernel_internal::Shape;
using token_kernel_internal::SparseWeightGrad;

// Floats of one block's maps (~192 KB): the block's maps and map gradient
// together stay within a core's L2 cache, and a column group of the map
// gradient (kGroup floats of every token of the block) within L1.
constexpr int64_t kBlockFloats = 48 * 1024;
// Tokens of one block at most: a column group of its map gradient is 32 KB.
constexpr int64_t kBlockTokens = 128;

// Positions per table row from which the maps go by table row
// (Problem::by_row).
constexpr int64_t kByRowUses = 4;

Problem MakeProblem(const torch::Tensor& table, const torch::Tensor& idx, const torch::Tensor& w,
                    const torch::Tensor& inv_tau, int64_t n, const Shape& shape) {
  TORCH_CHECK(table.dim() == 2 && idx.dim() == 2 && w.dim() == 3 &&
                  table.size(1) + 1 == w.size(1) &&
                  (idx.size(0) == 1 || idx.size(0) == w.size(0)) && n >= 1 &&
                  idx.size(1) % n == 0 && w.size(2) == shape.width(),
              "TokenKernelForward: table [D, m], idx [S or 1, B*n] and w [S, m+1, width] "
              "expected");
  TORCH_CHECK(table.device().is_cpu() && table.scalar_type() == torch::kFloat32 &&
                  w.scalar_type() == torch::kFloat32 && idx.scalar_type() == torch::kLong,
              "TokenKernelForward: float32 CPU table and weights, int64 idx expected");
  TORCH_CHECK(idx.numel() == 0 ||
                  (idx.min().item<int64_t>() >= 0 && idx.max().item<int64_t>() < table.size(0)),
              "TokenKernelForward: idx must hold rows of the table, 0 to ", table.size(0) - 1);
  Problem p;
  p.shape = shape;
  p.s = w.size(0);
  p.t = idx.size(1);
  p.n = n;
  p.m1 = w.size(1);
  p.width = shape.width();
  p.f = (p.width + 15) / 16 * 16;
  p.q = 0;
  p.k = shape.score;
  p.v = 2 * shape.score;
  p.u = p.v + shape.dv;
  p.b = p.u + shape.k * shape.dv;
  p.table = table.contiguous();
  p.idx = idx.contiguous();
  p.rows = p.idx.data_ptr<int64_t>();
  p.rows_seed_stride = idx.size(0) == 1 ? 0 : p.t;
  if (p.f == p.width) {
    p.w = w.contiguous();
  } else {
    p.w = torch::zeros({p.s, p.m1, p.f});
    p.w.narrow(2, 0, p.width).copy_(w);
  }
  if (shape.kind == Shape::Kind::kSoftmax) {
    TORCH_CHECK(inv_tau.dim() == 1 && inv_tau.size(0) == p.s &&
                    inv_tau.scalar_type() == torch::kFloat32 && inv_tau.is_contiguous(),
                "TokenKernelForward: inv_tau [S] float32 expected");
    p.inv_tau = inv_tau.data_ptr<float>();
  }
  p.eps2 = shape.kind == Shape::Kind::kSignedKernel
               ? static_cast<float>(shape.signed_eps * shape.signed_eps)
               : 0.0f;
  p.relu_eps = static_cast<float>(shape.relu_eps);
  ListInputs(p);
  p.by_row = kByRowUses * p.table.size(0) <= p.t;
  if (p.by_row) {
    p.table_rows.resize(p.table.size(0));
    for (int64_t d = 0; d < p.table.size(0); ++d) p.table_rows[d] = d;
  }
  return p;
}

// Sequences per block and the split of each seed's sequences into chunks,
// so that every thread has work: [S * chunks] work items.
struct Plan {
  int64_t block_seqs, chunks;
};

Plan MakePlan(const Problem& p) {
  const int64_t seqs = p.t / p.n;
  const int64_t block_seqs =
      std::max<int64_t>(1, std::min(kBlockFloats / (p.n * p.f), kBlockTokens / p.n));
  const int64_t threads = at::get_num_threads();
  int64_t chunks = p.s >= threads ? 1 : (threads + p.s - 1) / p.s;
  chunks = std::max<int64_t>(1, std::min(chunks, (seqs + block_seqs - 1) / block_seqs));
  return {block_seqs, chunks};
}

// Runs `body(seed, first_seq, seqs, scratch, item)` over every block of
// every work item, items in parallel, with `start(seed, scratch)` before an
// item's first block and `finish(seed, scratch, item)` after its last.
template <typename Start, typename Body, typename Finish>
void ForEachBlock(const Problem& p, const Plan& plan, const Start& start, const Body& body,
                  const Finish& finish) {
  const int64_t seqs = p.t / p.n;
  at::parallel_for(0, p.s * plan.chunks, 1, [&](int64_t begin, int64_t end) {
    Scratch sc(p, plan.block_seqs * p.n);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t seed = item / plan.chunks, c = item % plan.chunks;
      const int64_t lo = seqs * c / plan.chunks, hi = seqs * (c + 1) / plan.chunks;
      start(seed, sc);
      for (int64_t q0 = lo; q0 < hi; q0 += plan.block_seqs) {
        body(seed, q0, std::min(plan.block_seqs, hi - q0), sc, item);
      }
      finish(seed, sc, item);
    }
  });
}

// The maps of the positions t0 .. t0+tb of `seed` into sc.z: formed, or
// (by_row) copied from the table rows' maps in sc.zt.
void BlockMaps(const Problem& p, int64_t seed, int64_t t0, int64_t tb, Scratch& sc) {
  const int64_t* rows = p.RowsOf(seed, t0);
  if (!p.by_row) {
    Maps(p, seed, rows, tb, sc.z.data());
    return;
  }
  for (int64_t t = 0; t < tb; ++t) {
    std::copy_n(sc.zt.data() + rows[t] * p.f, p.f, sc.z.data() + t * p.f);
  }
}

// by_row: the positions' map gradients added to their table rows' in sc.gzt.
RANKSWEEP_VECTOR_CLONES
void AddToRows(const Problem& p, int64_t seed, int64_t t0, int64_t tb, Scratch& sc) {
  const int64_t* rows = p.RowsOf(seed, t0);
  for (int64_t t = 0; t < tb; ++t) {
    const float* g = sc.gz.data() + t * p.f;
    float* out = sc.gzt.data() + rows[t] * p.f;
    for (int64_t c = 0; c < p.f; ++c) out[c] += g[c];
  }
}

torch::Tensor RunForward(const Problem& p) {
  torch::Tensor out = torch::empty({p.s, p.t / p.n, p.n, p.shape.k});
  float* o = out.data_ptr<float>();
  ForEachBlock(
      p, MakePlan(p),
      [&](int64_t seed, Scratch& sc) {
        if (p.by_row) Maps(p, seed, p.table_rows.data(), p.table.size(0), sc.zt.data());
      },
      [&](int64_t seed, int64_t q0, int64_t nq, Scratch& sc, int64_t) {
        const int64_t t0 = q0 * p.n, tb = nq * p.n;
        BlockMaps(p, seed, t0, tb, sc);
        BlockForward(p, seed, sc.z.data(), nq, sc, o + (seed * p.t + t0) * p.shape.k);
      },
      [](int64_t, Scratch&, int64_t) {});
  return out;
}

struct Gradients {
  torch::Tensor w, inv_tau, loss;  // [S, m+1, F], [S], [] (squared error only)
};

// Gradients of w and inv_tau, and the loss when it is formed here.
Gradients RunBackward(const Problem& p, const GradSource& src) {
  const Plan plan = MakePlan(p);
  // One accumulator per work item: no two threads share one.
  torch::Tensor gw = torch::zeros({p.s, plan.chunks, p.m1, p.f});
  torch::Tensor gt = torch::zeros({p.s, plan.chunks});
  torch::Tensor loss = torch::zeros({p.s, plan.chunks}, torch::kFloat64);
  float* gtp = gt.data_ptr<float>();
  double* lossp = loss.data_ptr<double>();
  float* gwp = gw.data_ptr<float>();
  ForEachBlock(
      p, plan,
      [&](int64_t seed, Scratch& sc) {
        if (!p.by_row) return;
        Maps(p, seed, p.table_rows.data(), p.table.size(0), sc.zt.data());
        std::fill(sc.gzt.begin(), sc.gzt.end(), 0.0f);
      },
      [&](int64_t seed, int64_t q0, int64_t nq, Scratch& sc, int64_t item) {
        const int64_t t0 = q0 * p.n, tb = nq * p.n;
        BlockMaps(p, seed, t0, tb, sc);
        float* gz = sc.gz.data();
        BlockBackward(p, seed, sc.z.data(), t0, nq, src, sc, gz, gtp + item, lossp + item);
        if (p.by_row) {
          AddToRows(p, seed, t0, tb, sc);
        } else {
          SparseWeightGrad(p, p.RowsOf(seed, t0), tb, gz, sc, gwp + item * p.m1 * p.f);
        }
      },
      [&](int64_t, Scratch& sc, int64_t item) {
        if (p.by_row) {
          SparseWeightGrad(p, p.table_rows.data(), p.table.size(0), sc.gzt.data(), sc,
                           gwp + item * p.m1 * p.f);
        }
      });
  torch::Tensor gw_sum = plan.chunks == 1 ? gw.squeeze(1) : gw.sum(1);
  if (p.f != p.width) gw_sum = gw_sum.narrow(2, 0, p.width).contiguous();
  return {gw_sum, gt.sum(1), loss.sum().to(torch::kFloat32)};
}

// Forward: the readouts; backward: the block pass again, recomputing the
// maps (nothing of size T * F is kept in between).
class TokenKernelFunction : public torch::autograd::Function<TokenKernelFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& table,
                               const torch::Tensor& idx, const torch::Tensor& w,
                               const torch::Tensor& inv_tau, int64_t n, const Shape& shape) {
    ctx->save_for_backward({table, idx, w, inv_tau});
    ctx->saved_data["n"] = n;
    ctx->saved_data["kind"] = static_cast<int64_t>(shape.kind);
    ctx->saved_data["map"] = static_cast<int64_t>(shape.map);
    ctx->saved_data["relu_eps"] = shape.relu_eps;
    ctx->saved_data["signed_eps"] = shape.signed_eps;
    ctx->saved_data["score"] = shape.score;
    ctx->saved_data["dv"] = shape.dv;
    ctx->saved_data["k"] = shape.k;
    return RunForward(MakeProblem(table, idx, w, inv_tau, n, shape));
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    Shape shape;
    shape.kind = static_cast<Shape::Kind>(ctx->saved_data["kind"].toInt());
    shape.map = static_cast<Shape::Map>(ctx->saved_data["map"].toInt());
    shape.relu_eps = ctx->saved_data["relu_eps"].toDouble();
    shape.signed_eps = ctx->saved_data["signed_eps"].toDouble();
    shape.score = ctx->saved_data["score"].toInt();
    shape.dv = ctx->saved_data["dv"].toInt();
    shape.k = ctx->saved_data["k"].toInt();
    const Problem p =
        MakeProblem(saved[0], saved[1], saved[2], saved[3], ctx->saved_data["n"].toInt(), shape);
    const torch::Tensor gout = grads[0].contiguous();
    GradSource src;
    src.gout = gout.data_ptr<float>();
    Gradients g = RunBackward(p, src);
    return {torch::Tensor(),
            torch::Tensor(),
            g.w,
            shape.kind == Shape::Kind::kSoftmax ? g.inv_tau : torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

// Forward: the loss and, in the same pass, its gradients, kept for the
// backward (which only scales them): one pass over the blocks per step.
class TokenKernelMseFunction : public torch::autograd::Function<TokenKernelMseFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& table,
                               const torch::Tensor& idx, const torch::Tensor& w,
                               const torch::Tensor& inv_tau, const torch::Tensor& targets,
                               const torch::Tensor& weight, int64_t n, const Shape& shape) {
    const Problem p = MakeProblem(table, idx, w, inv_tau, n, shape);
    Gradients g = RunBackward(p, MseSource(p, targets, weight));
    ctx->saved_data["gw"] = g.w;
    ctx->saved_data["gt"] = g.inv_tau;
    ctx->saved_data["softmax"] = shape.kind == Shape::Kind::kSoftmax;
    return g.loss;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const torch::Tensor g = grads[0];
    const bool softmax = ctx->saved_data["softmax"].toBool();
    return {torch::Tensor(),
            torch::Tensor(),
            ctx->saved_data["gw"].toTensor() * g,
            softmax ? ctx->saved_data["gt"].toTensor() * g : torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }

  static GradSource MseSource(const Problem& p, const torch::Tensor& targets,
                              const torch::Tensor& weight) {
    TORCH_CHECK(p.shape.k == 1 && targets.dim() == 3 &&
                    (targets.size(0) == 1 || targets.size(0) == p.s) &&
                    targets.size(1) * targets.size(2) == p.t && targets.size(2) == p.n &&
                    targets.is_contiguous() && targets.scalar_type() == torch::kFloat32 &&
                    weight.numel() == p.n && weight.is_contiguous() &&
                    weight.scalar_type() == torch::kFloat32,
                "TokenKernelMseLoss: scalar readout, targets [S or 1, B, n] and weight [n] "
                "float32 expected");
    GradSource src;
    src.targets = targets.data_ptr<float>();
    src.targets_seed_stride = targets.size(0) == 1 ? 0 : p.t;
    src.weight = weight.data_ptr<float>();
    return src;
  }
};

}  // namespace

torch::Tensor TokenKernelForward(const torch::Tensor& table, const torch::Tensor& idx,
                                 const torch::Tensor& w, const torch::Tensor& inv_tau, int64_t n,
                                 const TokenKernelShape& shape) {
  const bool needs_grad = torch::GradMode::is_enabled() &&
                          (w.requires_grad() || (inv_tau.defined() && inv_tau.requires_grad()));
  const torch::Tensor tau = inv_tau.defined() ? inv_tau.contiguous() : torch::zeros({w.size(0)});
  if (!needs_grad) {
    torch::NoGradGuard no_grad;
    return RunForward(MakeProblem(table, idx, w, tau, n, shape));
  }
  return TokenKernelFunction::apply(table, idx, w, tau, n, shape);
}

torch::Tensor TokenKernelMseLoss(const torch::Tensor& table, const torch::Tensor& idx,
                                 const torch::Tensor& w, const torch::Tensor& inv_tau, int64_t n,
                                 const TokenKernelShape& shape, const torch::Tensor& targets,
                                 const torch::Tensor& weight) {
  const torch::Tensor tau = inv_tau.defined() ? inv_tau.contiguous() : torch::zeros({w.size(0)});
  const torch::Tensor t = targets.contiguous(), wt = weight.contiguous();
  if (!torch::GradMode::is_enabled()) {
    const Problem p = MakeProblem(table, idx, w, tau, n, shape);
    return RunBackward(p, TokenKernelMseFunction::MseSource(p, t, wt)).loss;
  }
  return TokenKernelMseFunction::apply(table, idx, w, tau, t, wt, n, shape);
}

}  // namespace ranksweep::trainer
