#include "worker/trainer/token_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "worker/trainer/loop_math.h"

namespace ranksweep::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using Shape = TokenKernelShape;

// The per-sequence loops are compiled for AVX-512 and AVX2 beside the
// baseline, picked at load time (GCC function multiversioning), so one
// binary runs everywhere and vectorizes where the CPU can.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define RANKSWEEP_VECTOR_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RANKSWEEP_VECTOR_CLONES
#endif

// Floats of one block's maps (~384 KB): the block's maps, features and map
// gradient together stay within a core's L2 cache.
constexpr int64_t kBlockFloats = 96 * 1024;

using loops::Axpy;
using loops::Dot;
using loops::Quotient;
using loops::QuotientOf;

// y += alpha x for a length kLen known at compile time (0: len at run
// time). Every load before any store: once the loop is unrolled GCC no
// longer knew that x and y do not overlap and wrote it out lane by lane.
template <int kLen>
RANKSWEEP_INLINE void AxpyFixed(float alpha, const float* x, float* y, int64_t len) {
  if constexpr (kLen > 0) {
    float t[kLen];
    for (int l = 0; l < kLen; ++l) t[l] = y[l] + alpha * x[l];
    for (int l = 0; l < kLen; ++l) y[l] = t[l];
  } else {
    Axpy(alpha, x, y, len);
  }
}

// The sum of a vector accumulator's kLanes lanes, halves added as whole
// vectors (constant trip counts: GCC kept a loop over the halving width
// in memory, lane by lane, and it was a fifth of the backward).
template <int kLanes>
RANKSWEEP_INLINE float SumLanes(float* v) {
  if constexpr (kLanes == 1) {
    return v[0];
  } else {
    for (int l = 0; l < kLanes / 2; ++l) v[l] += v[l + kLanes / 2];
    return SumLanes<kLanes / 2>(v);
  }
}

// a[i * 3 + j] = <q_i, k_j> for a sequence of three tokens, rows `stride`
// floats apart: the nine dot products in one pass over the features, nine
// independent vector accumulators instead of nine dependent reductions
// (the sequences of the OOD sweeps have three tokens). kR > 0: the width r
// known at compile time (the loops unroll into whole vectors, accumulators
// in registers, lanes a divisor of r); 0: r at run time.
template <int kR = 0>
RANKSWEEP_INLINE void Dots3(const float* q, const float* k, int64_t stride, int64_t r,
                             float* a) {
  if constexpr (kR > 0) {
    constexpr int kLanes = kR % 16 == 0 ? 16 : kR % 8 == 0 ? 8 : kR % 4 == 0 ? 4 : 0;
    if constexpr (kLanes > 0) {
      float acc[9][kLanes];
      for (int ij = 0; ij < 9; ++ij) {
        for (int l = 0; l < kLanes; ++l) acc[ij][l] = 0.0f;
      }
      for (int c = 0; c < kR; c += kLanes) {
        for (int i = 0; i < 3; ++i) {
          for (int j = 0; j < 3; ++j) {
            for (int l = 0; l < kLanes; ++l) {
              acc[i * 3 + j][l] += q[i * stride + c + l] * k[j * stride + c + l];
            }
          }
        }
      }
      for (int ij = 0; ij < 9; ++ij) a[ij] = SumLanes<kLanes>(acc[ij]);
      return;
    }
    r = kR;
  }
  constexpr int kLanes = 16;
  if (r < kLanes) {  // low ranks: no vector accumulators to set up and reduce
    for (int ij = 0; ij < 9; ++ij) {
      const float* qi = q + (ij / 3) * stride;
      const float* kj = k + (ij % 3) * stride;
      float sum = 0;
      for (int64_t t = 0; t < r; ++t) sum += qi[t] * kj[t];
      a[ij] = sum;
    }
    return;
  }
  float acc[9][kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= r; c += kLanes) {
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        for (int l = 0; l < kLanes; ++l) {
          acc[i * 3 + j][l] += q[i * stride + c + l] * k[j * stride + c + l];
        }
      }
    }
  }
  for (int ij = 0; ij < 9; ++ij) {
    const int i = ij / 3, j = ij % 3;
    float sum = SumLanes<kLanes>(acc[ij]);  // a tree, not 15 dependent adds
    for (int64_t t = c; t < r; ++t) sum += q[i * stride + t] * k[j * stride + t];
    a[ij] = sum;
  }
}

// Everything one call shares, read-only.
struct Problem {
  Shape shape;
  int64_t s = 0, t = 0, n = 0, m1 = 0, f = 0;
  int64_t q = 0, k = 0, v = 0, u = 0, b = 0;  // column offsets in a row of maps
  bool shared_tokens = false;                 // xa is [1, T, m+1]
  torch::Tensor xa, w;
  const float* inv_tau = nullptr;
  float eps2 = 0, relu_eps = 0;
  // Kernel heads with a feature map keep features apart from the maps.
  bool features() const { return shape.kind == Shape::Kind::kKernel; }
};

Problem MakeProblem(const torch::Tensor& xa, const torch::Tensor& w, const torch::Tensor& inv_tau,
                    int64_t n, const Shape& shape) {
  TORCH_CHECK(xa.dim() == 3 && w.dim() == 3 && xa.size(2) == w.size(1) &&
                  (xa.size(0) == 1 || xa.size(0) == w.size(0)) && n >= 1 &&
                  xa.size(1) % n == 0 && w.size(2) == shape.width(),
              "TokenKernelForward: xa [S or 1, B*n, m+1] and w [S, m+1, width] expected");
  TORCH_CHECK(xa.device().is_cpu() && xa.scalar_type() == torch::kFloat32 &&
                  w.scalar_type() == torch::kFloat32,
              "TokenKernelForward: float32 CPU tensors expected");
  Problem p;
  p.shape = shape;
  p.s = w.size(0);
  p.t = xa.size(1);
  p.n = n;
  p.m1 = xa.size(2);
  p.f = shape.width();
  p.q = 0;
  p.k = shape.score;
  p.v = 2 * shape.score;
  p.u = p.v + shape.dv;
  p.b = p.u + shape.k * shape.dv;
  p.shared_tokens = xa.size(0) == 1;
  p.xa = xa.contiguous();
  p.w = w.contiguous();
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
  return p;
}

// One worker's buffers, sized for the largest block. Allocated once per
// parallel chunk, not per block.
struct Scratch {
  Scratch(const Problem& p, int64_t block_tokens)
      : z(torch::empty({block_tokens, p.f})),
        phi(torch::empty({block_tokens, p.features() ? 2 * p.shape.score : 0})),
        gz(torch::empty({block_tokens, p.f})),
        a(p.n * p.n), wts(p.n * p.n), den(p.n), num(p.n * p.shape.dv), y(p.n * p.shape.dv),
        gy(p.shape.dv), gnum(p.shape.dv), gs(p.n), out(p.n * p.shape.k), go(p.n * p.shape.k) {}
  torch::Tensor z, phi, gz;
  std::vector<float> a, wts, den, num, y, gy, gnum, gs, out, go;
};

// The block's maps z = xa W (one GEMM) and, for kernel heads, the features.
// Returns the rows of query and key features: base pointer and row stride.
struct Features {
  const float* base;
  int64_t stride;
};

// e^x for x <= 0 (Cephes' expf: range reduction by ln 2 in two parts, a
// degree-6 polynomial, the exponent set by integer arithmetic): within
// 1.02 ulp of e^x on [-87, 0] (checked against the double exp, with and
// without FMA contraction), 0 below -87 where e^x < 1.7e-38. Branch-free, so the loop that calls it
// vectorizes: LibTorch's exp (Sleef, 8 lanes, one call per block) was a
// fifth of the training step.
RANKSWEEP_INLINE float ExpNonPositive(float x) {
  const bool underflow = x < -87.0f;
  x = std::max(x, -87.0f);
  // Round to nearest by adding and subtracting 1.5 * 2^23 (|x log2 e| < 126).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return underflow ? 0.0f : y * scale;
}

// phi = elu(z) + 1: z + 1 above 0, e^z at or below. Rows of z `stride`
// floats apart, out [rows, width].
RANKSWEEP_VECTOR_CLONES
void EluPlusOne(const float* z, int64_t rows, int64_t stride, int64_t width, float* out) {
  for (int64_t t = 0; t < rows; ++t) {
    const float* zr = z + t * stride;
    float* pr = out + t * width;
    for (int64_t c = 0; c < width; ++c) {
      const float e = ExpNonPositive(std::min(zr[c], 0.0f));
      pr[c] = zr[c] > 0.0f ? zr[c] + 1.0f : e;
    }
  }
}

RANKSWEEP_VECTOR_CLONES
void ReluEps(const float* z, int64_t rows, int64_t stride, int64_t width, float eps, float* out) {
  for (int64_t t = 0; t < rows; ++t) {
    const float* zr = z + t * stride;
    float* pr = out + t * width;
    for (int64_t c = 0; c < width; ++c) pr[c] = std::max(zr[c], 0.0f) + eps;
  }
}

Features Maps(const Problem& p, int64_t seed, int64_t t0, int64_t tb, Scratch& sc) {
  const torch::Tensor xa = p.xa[p.shared_tokens ? 0 : seed].narrow(0, t0, tb);
  torch::Tensor z = sc.z.narrow(0, 0, tb);
  at::mm_out(z, xa, p.w[seed]);
  if (!p.features()) return {z.data_ptr<float>(), p.f};
  const int64_t width = 2 * p.shape.score;
  torch::Tensor phi = sc.phi.narrow(0, 0, tb);
  float* ph = phi.data_ptr<float>();
  const float* zp = z.data_ptr<float>();
  switch (p.shape.map) {
    case Shape::Map::kEluPlusOne:
      EluPlusOne(zp, tb, p.f, width, ph);
      break;
    case Shape::Map::kExp:
      at::exp_out(phi, z.narrow(1, 0, width));
      break;
    case Shape::Map::kReluEps:
      ReluEps(zp, tb, p.f, width, p.relu_eps, ph);
      break;
  }
  return {ph, width};
}

// Attention and readout of one sequence (rows r0 .. r0+n-1 of the block):
// fills sc.a (scores or kernel values), sc.wts (softmax weights), sc.den,
// sc.num, sc.y, and writes the readouts when out is given.
RANKSWEEP_INLINE void SequenceForward(const Problem& p, int64_t seed, const Features& fe,
                                      const float* z, int64_t r0, Scratch& sc, float* out) {
  const int64_t n = p.n, dv = p.shape.dv, r = p.shape.score, kk = p.shape.k;
  const bool softmax = p.shape.kind == Shape::Kind::kSoftmax;
  const float tau = softmax ? p.inv_tau[seed] : 0.0f;
  const float* q0 = fe.base + r0 * fe.stride + (p.features() ? 0 : p.q);
  const float* k0 = fe.base + r0 * fe.stride + (p.features() ? r : p.k);
  if (n == 3) {
    Dots3(q0, k0, fe.stride, r, sc.a.data());
  } else {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        sc.a[i * n + j] = Dot(q0 + i * fe.stride, k0 + j * fe.stride, r);
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    float* a = sc.a.data() + i * n;
    float* yi = sc.y.data() + i * dv;
    float* numi = sc.num.data() + i * dv;
    std::fill(numi, numi + dv, 0.0f);
    if (softmax) {
      float* w = sc.wts.data() + i * n;
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        w[j] = tau * a[j];
        top = std::max(top, w[j]);
      }
      float sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        w[j] = std::exp(w[j] - top);
        sum += w[j];
      }
      for (int64_t j = 0; j < n; ++j) w[j] /= sum;
      for (int64_t j = 0; j < n; ++j) Axpy(w[j], z + (r0 + j) * p.f + p.v, numi, dv);
      std::copy(numi, numi + dv, yi);
    } else {
      float den = 0;
      for (int64_t j = 0; j < n; ++j) den += a[j];
      const float abs_sum = p.eps2 > 0 ? loops::AbsSum(a, n) : 0.0f;
      sc.den[i] = den;
      for (int64_t j = 0; j < n; ++j) Axpy(a[j], z + (r0 + j) * p.f + p.v, numi, dv);
      const float c = QuotientOf(den, abs_sum, p.eps2).c;
      for (int64_t d = 0; d < dv; ++d) yi[d] = c * numi[d];
    }
    if (out != nullptr) {
      const float* zi = z + (r0 + i) * p.f;
      for (int64_t o = 0; o < kk; ++o) {
        out[i * kk + o] = Dot(zi + p.u + o * dv, yi, dv) + zi[p.b + o];
      }
    }
  }
}

// Map gradients of one sequence into gz (zeroed rows of the block) from the
// readouts' gradient go [n * k]; returns the sequence's share of
// d loss / d inv_tau (softmax).
RANKSWEEP_INLINE float SequenceBackward(const Problem& p, int64_t seed, const Features& fe,
                                        const float* z, int64_t r0, Scratch& sc, const float* go,
                                        float* gz) {
  const int64_t n = p.n, dv = p.shape.dv, r = p.shape.score, kk = p.shape.k;
  const bool softmax = p.shape.kind == Shape::Kind::kSoftmax;
  const float tau = softmax ? p.inv_tau[seed] : 0.0f;
  // Query/key feature gradients go into the q/k columns of gz; the feature
  // map's derivative is applied per block afterwards.
  const int64_t fq = p.features() ? 0 : p.q, fk = p.features() ? r : p.k;
  float gt = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* zi = z + (r0 + i) * p.f;
    float* gzi = gz + (r0 + i) * p.f;
    const float* yi = sc.y.data() + i * dv;
    const float* goi = go + i * kk;
    float* gy = sc.gy.data();
    std::fill(gy, gy + dv, 0.0f);
    for (int64_t o = 0; o < kk; ++o) {
      Axpy(goi[o], zi + p.u + o * dv, gy, dv);
      float* gu = gzi + p.u + o * dv;
      for (int64_t d = 0; d < dv; ++d) gu[d] = goi[o] * yi[d];
      gzi[p.b + o] = goi[o];
    }
    const float* a = sc.a.data() + i * n;
    const float* qi = fe.base + (r0 + i) * fe.stride + fq;
    float* gqi = gzi + p.q;
    if (softmax) {
      const float* w = sc.wts.data() + i * n;
      float* gs = sc.gs.data();
      float mean = 0;
      for (int64_t j = 0; j < n; ++j) {
        gs[j] = Dot(gy, z + (r0 + j) * p.f + p.v, dv);
        mean += w[j] * gs[j];
      }
      for (int64_t j = 0; j < n; ++j) {
        gs[j] = w[j] * (gs[j] - mean);
        gt += gs[j] * a[j];
        float* gzj = gz + (r0 + j) * p.f;
        Axpy(w[j], gy, gzj + p.v, dv);
        Axpy(tau * gs[j], fe.base + (r0 + j) * fe.stride + fk, gqi, r);
        Axpy(tau * gs[j], qi, gzj + p.k, r);
      }
    } else {
      const float abs_sum = p.eps2 > 0 ? loops::AbsSum(a, n) : 0.0f;
      const Quotient quot = QuotientOf(sc.den[i], abs_sum, p.eps2);
      const float gy_num = Dot(gy, sc.num.data() + i * dv, dv);
      const float gden = quot.dc * gy_num, gabs = quot.ds * gy_num;
      float* gnum = sc.gnum.data();
      for (int64_t d = 0; d < dv; ++d) gnum[d] = quot.c * gy[d];
      for (int64_t j = 0; j < n; ++j) {
        float* gzj = gz + (r0 + j) * p.f;
        float ga = Dot(gnum, z + (r0 + j) * p.f + p.v, dv) + gden;
        if (p.eps2 > 0) ga += gabs * loops::SignOf(a[j]);
        Axpy(a[j], gnum, gzj + p.v, dv);
        Axpy(ga, fe.base + (r0 + j) * fe.stride + fk, gqi, r);
        Axpy(ga, qi, gzj + p.k, r);
      }
    }
  }
  return gt;
}

// Kernel heads on three tokens with the scalar readout: with
// P_ij = <u_i, v_j>, the readout out_i = c_i sum_j a_ij P_ij + b_i needs no
// value-width vector, and in the backward (go_i = d loss / d out_i)
//   gden_i = dc_i go_i sum_j a_ij P_ij,  ga_ij = c_i go_i P_ij + gden_i,
//   gv_j += a_ij c_i go_i u_i,  gu_i = c_i go_i sum_j a_ij v_j,  gb_i = go_i,
// and the feature gradients as in SequenceBackward: two passes of nine dot
// products and scaled row sums, where the general loops reduce a
// value-width dot product per (i, j). Fills out (3 readouts). With gz
// given, forms go from the squared error against target with weight (3
// each), adds the map gradients to gz and returns the weighted squared error.
template <int kR = 0, int kDv = 0>
RANKSWEEP_INLINE double KernelSequence3(const Problem& p, const Features& fe, const float* z,
                                        int64_t r0, float* out, const float* target,
                                        const float* weight, float* gz) {
  const int64_t r = kR > 0 ? kR : p.shape.score, dv = kDv > 0 ? kDv : p.shape.dv;
  const float* q0 = fe.base + r0 * fe.stride + (p.features() ? 0 : p.q);
  const float* k0 = fe.base + r0 * fe.stride + (p.features() ? r : p.k);
  const float* zs = z + r0 * p.f;
  float a[9], pv[9];
  Dots3<kR>(q0, k0, fe.stride, r, a);
  Dots3<kDv>(zs + p.u, zs + p.v, p.f, dv, pv);
  Quotient quot[3];
  float sum[3];
  for (int i = 0; i < 3; ++i) {
    const float* ai = a + 3 * i;
    const float abs_sum = p.eps2 > 0 ? loops::AbsSum(ai, 3) : 0.0f;
    quot[i] = QuotientOf((ai[0] + ai[1]) + ai[2], abs_sum, p.eps2);
    sum[i] = ai[0] * pv[3 * i] + ai[1] * pv[3 * i + 1] + ai[2] * pv[3 * i + 2];
    out[i] = quot[i].c * sum[i] + zs[i * p.f + p.b];
  }
  if (gz == nullptr) return 0;
  double loss = 0;
  float* gzs = gz + r0 * p.f;
  for (int i = 0; i < 3; ++i) {
    const float d = out[i] - target[i];
    loss += static_cast<double>(weight[i]) * d * d;
    const float go = 2.0f * weight[i] * d;
    const float coef = quot[i].c * go;
    const float gden = quot[i].dc * go * sum[i], gabs = quot[i].ds * go * sum[i];
    float* gzi = gzs + i * p.f;
    gzi[p.b] = go;
    const float* qi = q0 + i * fe.stride;
    const float* ui = zs + i * p.f + p.u;
    for (int j = 0; j < 3; ++j) {
      const float aij = a[3 * i + j];
      float* gzj = gzs + j * p.f;
      AxpyFixed<kDv>(coef * aij, zs + j * p.f + p.v, gzi + p.u, dv);
      AxpyFixed<kDv>(coef * aij, ui, gzj + p.v, dv);
      float ga = coef * pv[3 * i + j] + gden;
      if (p.eps2 > 0) ga += gabs * loops::SignOf(aij);
      AxpyFixed<kR>(ga, k0 + j * fe.stride, gzi + p.q, r);
      AxpyFixed<kR>(ga, qi, gzj + p.k, r);
    }
  }
  return loss;
}

// The softmax head on three tokens with the scalar readout, the same
// shortcut: with P_ij = <u_i, v_j> and the weights w_ij = softmax_j(tau
// a_ij), out_i = sum_j w_ij P_ij + b_i, and in the backward (go_i = d loss
// / d out_i, o_i = sum_j w_ij P_ij)
//   gs_ij = w_ij go_i (P_ij - o_i)  (the scores' gradient over tau),
//   gv_j += w_ij go_i u_i,  gu_i = go_i sum_j w_ij v_j,  gb_i = go_i,
//   gq_i += tau gs_ij k_j,  gk_j += tau gs_ij q_i,  d/dtau += gs_ij a_ij:
// no value-width vector and no per-pair value-width reduction. Fills out;
// with gz given, as KernelSequence3, and adds d loss / d tau to *gt.
template <int kR = 0, int kDv = 0>
RANKSWEEP_INLINE double SoftmaxSequence3(const Problem& p, float tau, const float* z, int64_t r0,
                                         float* out, const float* target, const float* weight,
                                         float* gz, float* gt) {
  const int64_t r = kR > 0 ? kR : p.shape.score, dv = kDv > 0 ? kDv : p.shape.dv, f = p.f;
  const float* zs = z + r0 * f;
  const float* q0 = zs + p.q;
  const float* k0 = zs + p.k;
  float a[9], pv[9], w[9], o[3];
  Dots3<kR>(q0, k0, f, r, a);
  Dots3<kDv>(zs + p.u, zs + p.v, f, dv, pv);
  for (int i = 0; i < 3; ++i) {
    const float s0 = tau * a[3 * i], s1 = tau * a[3 * i + 1], s2 = tau * a[3 * i + 2];
    const float top = std::max(std::max(s0, s1), s2);
    // Arguments at or below 0: the branch-free exp vectorizes where
    // std::exp is a call per weight.
    const float e0 = ExpNonPositive(s0 - top), e1 = ExpNonPositive(s1 - top),
                e2 = ExpNonPositive(s2 - top);
    const float inv = 1.0f / ((e0 + e1) + e2);
    w[3 * i] = e0 * inv;
    w[3 * i + 1] = e1 * inv;
    w[3 * i + 2] = e2 * inv;
    o[i] = w[3 * i] * pv[3 * i] + w[3 * i + 1] * pv[3 * i + 1] + w[3 * i + 2] * pv[3 * i + 2];
    out[i] = o[i] + zs[i * f + p.b];
  }
  if (gz == nullptr) return 0;
  double loss = 0;
  float gt_sum = 0;
  float* gzs = gz + r0 * f;
  for (int i = 0; i < 3; ++i) {
    const float d = out[i] - target[i];
    loss += static_cast<double>(weight[i]) * d * d;
    const float go = 2.0f * weight[i] * d;
    float* gzi = gzs + i * f;
    gzi[p.b] = go;
    const float* qi = q0 + i * f;
    const float* ui = zs + i * f + p.u;
    for (int j = 0; j < 3; ++j) {
      const float wij = w[3 * i + j];
      const float gs = wij * go * (pv[3 * i + j] - o[i]);
      gt_sum += gs * a[3 * i + j];
      float* gzj = gzs + j * f;
      AxpyFixed<kDv>(go * wij, zs + j * f + p.v, gzi + p.u, dv);
      AxpyFixed<kDv>(go * wij, ui, gzj + p.v, dv);
      AxpyFixed<kR>(tau * gs, k0 + j * f, gzi + p.q, r);
      AxpyFixed<kR>(tau * gs, qi, gzj + p.k, r);
    }
  }
  *gt += gt_sum;
  return loss;
}

// Where the readouts' gradient comes from: given per position ([S, T, k]),
// or formed from the squared error against targets ([S or 1, T]) with a
// weight per position in the sequence ([n]), whose loss is summed too.
struct GradSource {
  const float* gout = nullptr;
  const float* targets = nullptr;
  int64_t targets_seed_stride = 0;  // 0: the same targets for every seed
  const float* weight = nullptr;
};

// The three-token scalar-readout loops of one block (kernel or softmax),
// for widths kR, kDv known at compile time (0: at run time). Forward only
// when src is null; otherwise the squared error's loss (returned) and map
// gradients into gz, d loss / d inv_tau into *gt.
template <int kR, int kDv>
RANKSWEEP_INLINE double Block3(const Problem& p, int64_t seed, const Features& fe, const float* z,
                               int64_t t0, int64_t nq, const GradSource* src, float* out,
                               float* gz, float* gt) {
  const bool softmax = p.shape.kind == Shape::Kind::kSoftmax;
  const float tau = softmax ? p.inv_tau[seed] : 0.0f;
  double loss = 0;
  for (int64_t q = 0; q < nq; ++q) {
    const float* target = nullptr;
    float* o = out + q * 3;
    if (src != nullptr) {
      target = src->targets + seed * src->targets_seed_stride + t0 + q * 3;
      o = out;
    }
    const float* weight = src != nullptr ? src->weight : nullptr;
    if (softmax) {
      loss += SoftmaxSequence3<kR, kDv>(p, tau, z, q * 3, o, target, weight,
                                        src != nullptr ? gz : nullptr, gt);
    } else {
      loss += KernelSequence3<kR, kDv>(p, fe, z, q * 3, o, target, weight,
                                       src != nullptr ? gz : nullptr);
    }
  }
  return loss;
}

// Block3 with the widths of the OOD sweeps' heads as constants (m = 12,
// 16, 24: the softmax head's r = dv = m, the kernel head's rank 1 with dv
// = m, where the run-time loops' set-up and tails cost as much as the
// arithmetic), at run time otherwise.
RANKSWEEP_INLINE double Block3Dispatch(const Problem& p, int64_t seed, const Features& fe,
                                       const float* z, int64_t t0, int64_t nq,
                                       const GradSource* src, float* out, float* gz, float* gt) {
  const int64_t r = p.shape.score, dv = p.shape.dv;
#define RANKSWEEP_BLOCK3(R, DV) \
  if (r == R && dv == DV) return Block3<R, DV>(p, seed, fe, z, t0, nq, src, out, gz, gt)
  RANKSWEEP_BLOCK3(12, 12);
  RANKSWEEP_BLOCK3(16, 16);
  RANKSWEEP_BLOCK3(24, 24);
  RANKSWEEP_BLOCK3(1, 12);
  RANKSWEEP_BLOCK3(1, 16);
  RANKSWEEP_BLOCK3(1, 24);
#undef RANKSWEEP_BLOCK3
  return Block3<0, 0>(p, seed, fe, z, t0, nq, src, out, gz, gt);
}

// Readouts of the block's nq sequences into out (k per position). One call
// per block: the sequence loops inline into each instruction-set clone.
RANKSWEEP_VECTOR_CLONES
void BlockForward(const Problem& p, int64_t seed, const Features& fe, const float* z, int64_t nq,
                  Scratch& sc, float* out) {
  if (p.n == 3 && p.shape.k == 1) {
    Block3Dispatch(p, seed, fe, z, 0, nq, nullptr, out, nullptr, nullptr);
    return;
  }
  for (int64_t q = 0; q < nq; ++q) {
    SequenceForward(p, seed, fe, z, q * p.n, sc, out + q * p.n * p.shape.k);
  }
}

// The map gradients of the block's nq sequences (positions t0 ..) into gz;
// adds the block's share of d loss / d inv_tau to *gt and, for the squared
// error, its loss to *loss.
RANKSWEEP_VECTOR_CLONES
void BlockBackward(const Problem& p, int64_t seed, const Features& fe, const float* z,
                   int64_t t0, int64_t nq, const GradSource& src, Scratch& sc, float* gz,
                   float* gt, double* loss) {
  float gt_sum = 0;
  double loss_sum = 0;
  float* out = sc.out.data();
  float* go = sc.go.data();
  if (src.gout == nullptr && p.n == 3 && p.shape.k == 1) {
    *loss += Block3Dispatch(p, seed, fe, z, t0, nq, &src, out, gz, gt);
    return;
  }
  for (int64_t q = 0; q < nq; ++q) {
    const int64_t t = t0 + q * p.n;  // the sequence's first position
    if (src.gout != nullptr) {
      SequenceForward(p, seed, fe, z, q * p.n, sc, nullptr);
      gt_sum += SequenceBackward(p, seed, fe, z, q * p.n, sc,
                                 src.gout + (seed * p.t + t) * p.shape.k, gz);
      continue;
    }
    SequenceForward(p, seed, fe, z, q * p.n, sc, out);
    const float* target = src.targets + seed * src.targets_seed_stride + t;
    for (int64_t i = 0; i < p.n; ++i) {
      const float d = out[i] - target[i];
      loss_sum += static_cast<double>(src.weight[i]) * d * d;
      go[i] = 2.0f * src.weight[i] * d;
    }
    gt_sum += SequenceBackward(p, seed, fe, z, q * p.n, sc, go, gz);
  }
  *gt += gt_sum;
  *loss += loss_sum;
}

// The feature map's derivative on the query/key columns of the block's gz.
RANKSWEEP_VECTOR_CLONES
void FeatureMapBackward(const Problem& p, const Scratch& sc, int64_t tb, float* gz) {
  if (!p.features()) return;
  const int64_t width = 2 * p.shape.score;
  const float* z = sc.z.data_ptr<float>();
  const float* phi = sc.phi.data_ptr<float>();
  for (int64_t t = 0; t < tb; ++t) {
    float* g = gz + t * p.f;
    const float* zr = z + t * p.f;
    const float* pr = phi + t * width;
    // Branch-free: the sign of z is a coin flip, and a mispredicted branch
    // per feature cost more than the rest of the step.
    switch (p.shape.map) {
      case Shape::Map::kEluPlusOne:
        // d/dz is 1 above 0 and e^z = phi at or below, where phi <= 1 <
        // z + 1: min(phi, 1) either way.
        for (int64_t c = 0; c < width; ++c) g[c] *= std::min(pr[c], 1.0f);
        break;
      case Shape::Map::kExp:
        for (int64_t c = 0; c < width; ++c) g[c] *= pr[c];
        break;
      case Shape::Map::kReluEps:
        for (int64_t c = 0; c < width; ++c) g[c] *= static_cast<float>(zr[c] > 0.0f);
        break;
    }
  }
}

// Sequences per block and the split of each seed's sequences into chunks,
// so that every thread has work: [S * chunks] work items.
struct Plan {
  int64_t block_seqs, chunks;
};

Plan MakePlan(const Problem& p) {
  const int64_t seqs = p.t / p.n;
  const int64_t block_seqs = std::max<int64_t>(1, kBlockFloats / (p.n * p.f));
  const int64_t threads = at::get_num_threads();
  int64_t chunks = p.s >= threads ? 1 : (threads + p.s - 1) / p.s;
  chunks = std::max<int64_t>(1, std::min(chunks, (seqs + block_seqs - 1) / block_seqs));
  return {block_seqs, chunks};
}

// Runs `body(seed, first_seq, seqs, scratch, item)` over every block of
// every work item, items in parallel.
template <typename Body>
void ForEachBlock(const Problem& p, const Plan& plan, const Body& body) {
  const int64_t seqs = p.t / p.n;
  at::parallel_for(0, p.s * plan.chunks, 1, [&](int64_t begin, int64_t end) {
    Scratch sc(p, plan.block_seqs * p.n);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t seed = item / plan.chunks, c = item % plan.chunks;
      const int64_t lo = seqs * c / plan.chunks, hi = seqs * (c + 1) / plan.chunks;
      for (int64_t q0 = lo; q0 < hi; q0 += plan.block_seqs) {
        body(seed, q0, std::min(plan.block_seqs, hi - q0), sc, item);
      }
    }
  });
}

torch::Tensor RunForward(const Problem& p) {
  torch::Tensor out = torch::empty({p.s, p.t / p.n, p.n, p.shape.k});
  float* o = out.data_ptr<float>();
  ForEachBlock(p, MakePlan(p), [&](int64_t seed, int64_t q0, int64_t nq, Scratch& sc, int64_t) {
    const int64_t t0 = q0 * p.n, tb = nq * p.n;
    const Features fe = Maps(p, seed, t0, tb, sc);
    BlockForward(p, seed, fe, sc.z.data_ptr<float>(), nq, sc,
                 o + (seed * p.t + t0) * p.shape.k);
  });
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
  ForEachBlock(p, plan, [&](int64_t seed, int64_t q0, int64_t nq, Scratch& sc, int64_t item) {
    const int64_t t0 = q0 * p.n, tb = nq * p.n;
    const Features fe = Maps(p, seed, t0, tb, sc);
    const float* z = sc.z.data_ptr<float>();
    torch::Tensor gzb = sc.gz.narrow(0, 0, tb);
    float* gz = gzb.data_ptr<float>();
    std::memset(gz, 0, sizeof(float) * tb * p.f);
    BlockBackward(p, seed, fe, z, t0, nq, src, sc, gz, gtp + item, lossp + item);
    FeatureMapBackward(p, sc, tb, gz);
    torch::Tensor acc = gw[seed][item % plan.chunks];
    const torch::Tensor xa = p.xa[p.shared_tokens ? 0 : seed].narrow(0, t0, tb);
    at::addmm_out(acc, acc, xa.t(), gzb);
  });
  torch::Tensor gw_sum = plan.chunks == 1 ? gw.squeeze(1) : gw.sum(1);
  return {gw_sum, gt.sum(1), loss.sum().to(torch::kFloat32)};
}

// Forward: the readouts; backward: the block pass again, recomputing the
// maps (nothing of size T * F is kept in between).
class TokenKernelFunction : public torch::autograd::Function<TokenKernelFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& xa,
                               const torch::Tensor& w, const torch::Tensor& inv_tau, int64_t n,
                               const Shape& shape) {
    ctx->save_for_backward({xa, w, inv_tau});
    ctx->saved_data["n"] = n;
    ctx->saved_data["kind"] = static_cast<int64_t>(shape.kind);
    ctx->saved_data["map"] = static_cast<int64_t>(shape.map);
    ctx->saved_data["relu_eps"] = shape.relu_eps;
    ctx->saved_data["signed_eps"] = shape.signed_eps;
    ctx->saved_data["score"] = shape.score;
    ctx->saved_data["dv"] = shape.dv;
    ctx->saved_data["k"] = shape.k;
    return RunForward(MakeProblem(xa, w, inv_tau, n, shape));
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
        MakeProblem(saved[0], saved[1], saved[2], ctx->saved_data["n"].toInt(), shape);
    const torch::Tensor gout = grads[0].contiguous();
    GradSource src;
    src.gout = gout.data_ptr<float>();
    Gradients g = RunBackward(p, src);
    return {torch::Tensor(), g.w,
            shape.kind == Shape::Kind::kSoftmax ? g.inv_tau : torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

// Forward: the loss and, in the same pass, its gradients, kept for the
// backward (which only scales them): one pass over the blocks per step.
class TokenKernelMseFunction : public torch::autograd::Function<TokenKernelMseFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& xa,
                               const torch::Tensor& w, const torch::Tensor& inv_tau,
                               const torch::Tensor& targets, const torch::Tensor& weight,
                               int64_t n, const Shape& shape) {
    const Problem p = MakeProblem(xa, w, inv_tau, n, shape);
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

torch::Tensor TokenKernelForward(const torch::Tensor& xa, const torch::Tensor& w,
                                 const torch::Tensor& inv_tau, int64_t n,
                                 const TokenKernelShape& shape) {
  const bool needs_grad = torch::GradMode::is_enabled() &&
                          (w.requires_grad() || (inv_tau.defined() && inv_tau.requires_grad()));
  const torch::Tensor tau = inv_tau.defined() ? inv_tau.contiguous() : torch::zeros({w.size(0)});
  if (!needs_grad) {
    torch::NoGradGuard no_grad;
    return RunForward(MakeProblem(xa, w, tau, n, shape));
  }
  return TokenKernelFunction::apply(xa, w, tau, n, shape);
}

torch::Tensor TokenKernelMseLoss(const torch::Tensor& xa, const torch::Tensor& w,
                                 const torch::Tensor& inv_tau, int64_t n,
                                 const TokenKernelShape& shape, const torch::Tensor& targets,
                                 const torch::Tensor& weight) {
  const torch::Tensor tau = inv_tau.defined() ? inv_tau.contiguous() : torch::zeros({w.size(0)});
  const torch::Tensor t = targets.contiguous(), wt = weight.contiguous();
  if (!torch::GradMode::is_enabled()) {
    const Problem p = MakeProblem(xa, w, tau, n, shape);
    return RunBackward(p, TokenKernelMseFunction::MseSource(p, t, wt)).loss;
  }
  return TokenKernelMseFunction::apply(xa, w, tau, t, wt, n, shape);
}

}  // namespace ranksweep::trainer
