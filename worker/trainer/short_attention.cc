#include "worker/trainer/short_attention.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "worker/trainer/loop_math.h"

namespace ranksweep::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Groups per parallel chunk: a group is a few hundred multiply-adds.
constexpr int64_t kGrain = 256;

using loops::Axpy;
using loops::Dot;
using loops::kDenFloor;
using loops::Quotient;
using loops::QuotientOf;

struct Sizes {
  int64_t g, n, r, dv;
};

Sizes SizesOf(const torch::Tensor& fq, const torch::Tensor& v) {
  return {fq.size(0), fq.size(1), fq.size(2), v.size(2)};
}

// Zero-filled gradients of the three [G, N, .] inputs, with their data.
struct InputGrads {
  InputGrads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v)
      : q_t(torch::zeros_like(q)), k_t(torch::zeros_like(k)), v_t(torch::zeros_like(v)),
        q(q_t.data_ptr<float>()), k(k_t.data_ptr<float>()), v(v_t.data_ptr<float>()) {}
  torch::Tensor q_t, k_t, v_t;
  float *q, *k, *v;
};

struct KernelOut {
  torch::Tensor y;      // [G, N, dv]
  torch::Tensor alpha;  // [G, N, N]
  torch::Tensor den;    // [G, N]
};

// Inputs contiguous float32 on the CPU.
KernelOut KernelLoops(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v,
                        float eps2) {
  const Sizes z = SizesOf(fq, v);
  KernelOut out;
  out.y = torch::empty({z.g, z.n, z.dv}, v.options());
  out.alpha = torch::empty({z.g, z.n, z.n}, fq.options());
  out.den = torch::empty({z.g, z.n}, fq.options());
  const float* q = fq.data_ptr<float>();
  const float* k = fk.data_ptr<float>();
  const float* val = v.data_ptr<float>();
  float* y = out.y.data_ptr<float>();
  float* alpha = out.alpha.data_ptr<float>();
  float* den = out.den.data_ptr<float>();
  at::parallel_for(0, z.g, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const float* qg = q + g * z.n * z.r;
      const float* kg = k + g * z.n * z.r;
      const float* vg = val + g * z.n * z.dv;
      for (int64_t i = 0; i < z.n; ++i) {
        float* a = alpha + (g * z.n + i) * z.n;
        float sum = 0;
        for (int64_t j = 0; j < z.n; ++j) {
          a[j] = Dot(qg + i * z.r, kg + j * z.r, z.r);
          sum += a[j];
        }
        const float abs_sum = eps2 > 0 ? loops::AbsSum(a, z.n) : 0.0f;
        den[g * z.n + i] = sum;
        float* yi = y + (g * z.n + i) * z.dv;
        for (int64_t d = 0; d < z.dv; ++d) yi[d] = 0;
        for (int64_t j = 0; j < z.n; ++j) Axpy(a[j], vg + j * z.dv, yi, z.dv);
        const float c = QuotientOf(sum, abs_sum, eps2).c;
        for (int64_t d = 0; d < z.dv; ++d) yi[d] *= c;
      }
    }
  });
  return out;
}

class KernelAttentionFunction : public torch::autograd::Function<KernelAttentionFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& fq,
                               const torch::Tensor& fk, const torch::Tensor& v, double eps2) {
    KernelOut out = KernelLoops(fq, fk, v, static_cast<float>(eps2));
    ctx->save_for_backward({fq, fk, v, out.alpha, out.den});
    ctx->saved_data["eps2"] = eps2;
    return out.y;
  }

  // With gnum_i = c_i gy_i, gden_i = dc_i <gy_i, num_i> and
  // gabs_i = ds_i <gy_i, num_i> (signed kernels; 0 otherwise):
  // ga_ij = <gnum_i, v_j> + gden_i + gabs_i sign(a_ij); gv_j = sum_i a_ij gnum_i;
  // gfq_i = sum_j ga_ij fk_j; gfk_j = sum_i ga_ij fq_i.
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &fq = saved[0], &fk = saved[1], &v = saved[2];
    const float eps2 = static_cast<float>(ctx->saved_data["eps2"].toDouble());
    const torch::Tensor gy_t = grads[0].contiguous();
    const Sizes z = SizesOf(fq, v);
    InputGrads grad(fq, fk, v);
    float *gq = grad.q, *gk = grad.k, *gv = grad.v;
    const float* q = fq.data_ptr<float>();
    const float* k = fk.data_ptr<float>();
    const float* val = v.data_ptr<float>();
    const float* alpha = saved[3].data_ptr<float>();
    const float* den = saved[4].data_ptr<float>();
    const float* gy = gy_t.data_ptr<float>();
    at::parallel_for(0, z.g, kGrain, [&](int64_t begin, int64_t end) {
      std::vector<float> num(z.dv), gnum(z.dv);
      for (int64_t g = begin; g < end; ++g) {
        const int64_t qk = g * z.n * z.r, vo = g * z.n * z.dv;
        for (int64_t i = 0; i < z.n; ++i) {
          const float* a = alpha + (g * z.n + i) * z.n;
          const float* gyi = gy + vo + i * z.dv;
          const float abs_sum = eps2 > 0 ? loops::AbsSum(a, z.n) : 0.0f;
          const Quotient quot = QuotientOf(den[g * z.n + i], abs_sum, eps2);
          std::fill(num.begin(), num.end(), 0.0f);
          for (int64_t j = 0; j < z.n; ++j) Axpy(a[j], val + vo + j * z.dv, num.data(), z.dv);
          const float gy_num = Dot(gyi, num.data(), z.dv);
          const float gden = quot.dc * gy_num, gabs = quot.ds * gy_num;
          for (int64_t d = 0; d < z.dv; ++d) gnum[d] = quot.c * gyi[d];
          for (int64_t j = 0; j < z.n; ++j) {
            float ga = Dot(gnum.data(), val + vo + j * z.dv, z.dv) + gden;
            if (eps2 > 0) ga += gabs * loops::SignOf(a[j]);
            Axpy(a[j], gnum.data(), gv + vo + j * z.dv, z.dv);
            Axpy(ga, k + qk + j * z.r, gq + qk + i * z.r, z.r);
            Axpy(ga, q + qk + i * z.r, gk + qk + j * z.r, z.r);
          }
        }
      }
    });
    return {grad.q_t, grad.k_t, grad.v_t, torch::Tensor()};
  }
};

bool LoopsApply(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v) {
  auto cpu_float = [](const torch::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == torch::kFloat32;
  };
  return cpu_float(fq) && cpu_float(fk) && cpu_float(v) && fq.size(1) <= kShortAttentionMaxLen;
}

}  // namespace

torch::Tensor SignedQuotient(const torch::Tensor& den, const torch::Tensor& abs_sum,
                             double eps) {
  const double floor = static_cast<double>(kDenFloor) * kDenFloor;
  return den / (den * den + (eps * eps) * abs_sum * abs_sum).clamp_min(floor);
}

namespace {

torch::Tensor BmmAttention(const torch::Tensor& fq, const torch::Tensor& fk,
                           const torch::Tensor& v, double signed_eps) {
  torch::Tensor alpha = torch::bmm(fq, fk.transpose(1, 2));  // [G, N, N]
  torch::Tensor num = torch::bmm(alpha, v);                   // [G, N, dv]
  torch::Tensor den = alpha.sum(-1, /*keepdim=*/true);        // [G, N, 1]
  if (signed_eps > 0) {
    torch::Tensor abs_sum = alpha.abs().sum(-1, /*keepdim=*/true);
    return num * SignedQuotient(den, abs_sum, signed_eps);
  }
  // Features are nonnegative, so den > 0 up to float underflow; the floor
  // only keeps an underflowed row finite.
  return num / den.clamp_min(kDenFloor);
}

struct SoftmaxOut {
  torch::Tensor y;        // [G, N, dv]
  torch::Tensor weights;  // [G, N, N] softmax_j
  torch::Tensor dots;     // [G, N, N] <q_i, k_j>, for inv_tau's gradient
};

// Inputs contiguous float32 on the CPU; inv_tau [S] with G divisible by S.
SoftmaxOut SoftmaxLoops(const torch::Tensor& q_t, const torch::Tensor& k_t,
                        const torch::Tensor& v_t, const torch::Tensor& inv_tau_t) {
  const Sizes z = SizesOf(q_t, v_t);
  const int64_t per_seed = z.g / inv_tau_t.size(0);
  SoftmaxOut out;
  out.y = torch::empty({z.g, z.n, z.dv}, v_t.options());
  out.weights = torch::empty({z.g, z.n, z.n}, q_t.options());
  out.dots = torch::empty({z.g, z.n, z.n}, q_t.options());
  const float* q = q_t.data_ptr<float>();
  const float* k = k_t.data_ptr<float>();
  const float* val = v_t.data_ptr<float>();
  const float* inv_tau = inv_tau_t.data_ptr<float>();
  float* y = out.y.data_ptr<float>();
  float* weights = out.weights.data_ptr<float>();
  float* dots = out.dots.data_ptr<float>();
  at::parallel_for(0, z.g, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const float t = inv_tau[g / per_seed];
      const float* qg = q + g * z.n * z.r;
      const float* kg = k + g * z.n * z.r;
      const float* vg = val + g * z.n * z.dv;
      for (int64_t i = 0; i < z.n; ++i) {
        float* a = dots + (g * z.n + i) * z.n;
        float* w = weights + (g * z.n + i) * z.n;
        float top = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < z.n; ++j) {
          a[j] = Dot(qg + i * z.r, kg + j * z.r, z.r);
          w[j] = t * a[j];
          top = std::max(top, w[j]);
        }
        float sum = 0;
        for (int64_t j = 0; j < z.n; ++j) {
          w[j] = std::exp(w[j] - top);
          sum += w[j];
        }
        for (int64_t j = 0; j < z.n; ++j) w[j] /= sum;
        float* yi = y + (g * z.n + i) * z.dv;
        for (int64_t d = 0; d < z.dv; ++d) yi[d] = 0;
        for (int64_t j = 0; j < z.n; ++j) Axpy(w[j], vg + j * z.dv, yi, z.dv);
      }
    }
  });
  return out;
}

class SoftmaxAttentionFunction : public torch::autograd::Function<SoftmaxAttentionFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& inv_tau) {
    SoftmaxOut out = SoftmaxLoops(q, k, v, inv_tau);
    ctx->save_for_backward({q, k, v, inv_tau, out.weights, out.dots});
    return out.y;
  }

  // gw_ij = <gy_i, v_j>; gs_ij = w_ij (gw_ij - sum_l w_il gw_il);
  // gv_j = sum_i w_ij gy_i; gq_i = t sum_j gs_ij k_j; gk_j = t sum_i gs_ij q_i;
  // g(inv_tau) = sum over the seed's groups of sum_ij gs_ij <q_i, k_j>.
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q_t = saved[0], &k_t = saved[1], &v_t = saved[2];
    const torch::Tensor& inv_tau_t = saved[3];
    const torch::Tensor gy_t = grads[0].contiguous();
    const Sizes z = SizesOf(q_t, v_t);
    const int64_t seeds = inv_tau_t.size(0), per_seed = z.g / seeds;
    InputGrads grad(q_t, k_t, v_t);
    float *gq = grad.q, *gk = grad.k, *gv = grad.v;
    torch::Tensor gt_t = torch::empty({z.g}, q_t.options());  // per group, summed below
    float* gt = gt_t.data_ptr<float>();
    const float* q = q_t.data_ptr<float>();
    const float* k = k_t.data_ptr<float>();
    const float* val = v_t.data_ptr<float>();
    const float* inv_tau = inv_tau_t.data_ptr<float>();
    const float* weights = saved[4].data_ptr<float>();
    const float* dots = saved[5].data_ptr<float>();
    const float* gy = gy_t.data_ptr<float>();
    at::parallel_for(0, z.g, kGrain, [&](int64_t begin, int64_t end) {
      std::vector<float> gs(z.n);
      for (int64_t g = begin; g < end; ++g) {
        const float t = inv_tau[g / per_seed];
        const int64_t qk = g * z.n * z.r, vo = g * z.n * z.dv;
        float gt_sum = 0;
        for (int64_t i = 0; i < z.n; ++i) {
          const float* w = weights + (g * z.n + i) * z.n;
          const float* a = dots + (g * z.n + i) * z.n;
          const float* gyi = gy + vo + i * z.dv;
          float mean = 0;
          for (int64_t j = 0; j < z.n; ++j) {
            gs[j] = Dot(gyi, val + vo + j * z.dv, z.dv);
            mean += w[j] * gs[j];
          }
          for (int64_t j = 0; j < z.n; ++j) {
            gs[j] = w[j] * (gs[j] - mean);
            gt_sum += gs[j] * a[j];
            Axpy(w[j], gyi, gv + vo + j * z.dv, z.dv);
            Axpy(t * gs[j], k + qk + j * z.r, gq + qk + i * z.r, z.r);
            Axpy(t * gs[j], q + qk + i * z.r, gk + qk + j * z.r, z.r);
          }
        }
        gt[g] = gt_sum;
      }
    });
    return {grad.q_t, grad.k_t, grad.v_t, gt_t.view({seeds, per_seed}).sum(1)};
  }
};

}  // namespace

torch::Tensor SoftmaxAttention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& inv_tau,
                               AttentionImpl impl) {
  TORCH_CHECK(q.dim() == 3 && k.sizes() == q.sizes() && v.dim() == 3 &&
                  v.size(0) == q.size(0) && v.size(1) == q.size(1) && inv_tau.dim() == 1 &&
                  q.size(0) % inv_tau.size(0) == 0,
              "SoftmaxAttention: q, k [G, N, ds], v [G, N, dv] and inv_tau [S], S | G expected");
  const bool loops = impl == AttentionImpl::kLoops ||
                     (impl == AttentionImpl::kAuto && LoopsApply(q, k, v) &&
                      inv_tau.scalar_type() == torch::kFloat32);
  if (!loops) {
    const int64_t s = inv_tau.size(0), b = q.size(0) / s, n = q.size(1);
    const torch::Tensor q4 = q.view({s, b, n, q.size(2)});
    const torch::Tensor k4 = k.view({s, b, n, k.size(2)});
    torch::Tensor scores = torch::matmul(q4, k4.transpose(2, 3)) * inv_tau.view({s, 1, 1, 1});
    torch::Tensor weights = torch::softmax(scores, -1);  // [S, B, N, N]
    return torch::matmul(weights, v.view({s, b, n, v.size(2)})).view(v.sizes());
  }
  TORCH_CHECK(LoopsApply(q, k, v) && inv_tau.scalar_type() == torch::kFloat32,
              "SoftmaxAttention: loops need float32 CPU tensors, N <= ", kShortAttentionMaxLen);
  const bool needs_grad = torch::GradMode::is_enabled() &&
                          (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                           inv_tau.requires_grad());
  if (!needs_grad) {
    return SoftmaxLoops(q.contiguous(), k.contiguous(), v.contiguous(), inv_tau.contiguous()).y;
  }
  return SoftmaxAttentionFunction::apply(q.contiguous(), k.contiguous(), v.contiguous(),
                                         inv_tau.contiguous());
}

torch::Tensor NormalizedAttention(const torch::Tensor& fq, const torch::Tensor& fk,
                                  const torch::Tensor& v, double signed_eps,
                                  AttentionImpl impl) {
  TORCH_CHECK(fq.dim() == 3 && fk.sizes() == fq.sizes() && v.dim() == 3 &&
                  v.size(0) == fq.size(0) && v.size(1) == fq.size(1),
              "NormalizedAttention: fq, fk [G, N, r] and v [G, N, dv] expected");
  const bool loops = impl == AttentionImpl::kLoops ||
                     (impl == AttentionImpl::kAuto && LoopsApply(fq, fk, v));
  if (!loops) return BmmAttention(fq, fk, v, signed_eps);
  TORCH_CHECK(LoopsApply(fq, fk, v), "NormalizedAttention: loops need float32 CPU tensors, N <= ",
              kShortAttentionMaxLen);
  const double eps2 = signed_eps > 0 ? signed_eps * signed_eps : 0.0;
  const bool needs_grad = torch::GradMode::is_enabled() &&
                          (fq.requires_grad() || fk.requires_grad() || v.requires_grad());
  if (!needs_grad) {
    return KernelLoops(fq.contiguous(), fk.contiguous(), v.contiguous(),
                        static_cast<float>(eps2))
        .y;
  }
  return KernelAttentionFunction::apply(fq.contiguous(), fk.contiguous(), v.contiguous(), eps2);
}

}  // namespace ranksweep::trainer
