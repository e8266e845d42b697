// The attention and readout of the token kernels (token_kernel.h), a
// block of sequences at a time, forward and backward: per sequence of any
// length (SequenceForward, SequenceBackward), the three-token
// scalar-readout shortcuts of the OOD sweeps' heads (KernelSequence3,
// SoftmaxSequence3, with their widths as constants where they are the
// sweeps'), and the feature map's derivative on the block's map gradients.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "worker/trainer/token_kernel_internal.h"

namespace ranksweep::trainer::token_kernel_internal {
namespace {

// Attention and readout of one sequence (rows r0 .. r0+n-1 of the block):
// fills sc.a (scores or kernel values), sc.wts (softmax weights), sc.den,
// sc.num, sc.y, and writes the readouts when out is given.
RANKSWEEP_INLINE void SequenceForward(const Problem& p, int64_t seed, const float* z, int64_t r0,
                                      Scratch& sc, float* out) {
  const int64_t n = p.n, dv = p.shape.dv, r = p.shape.score, kk = p.shape.k;
  const bool softmax = p.shape.kind == Shape::Kind::kSoftmax;
  const float tau = softmax ? p.inv_tau[seed] : 0.0f;
  const float* q0 = z + r0 * p.f + p.q;
  const float* k0 = z + r0 * p.f + p.k;
  if (n == 3) {
    Dots3(q0, k0, p.f, r, sc.a.data());
  } else {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        sc.a[i * n + j] = Dot(q0 + i * p.f, k0 + j * p.f, r);
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
RANKSWEEP_INLINE float SequenceBackward(const Problem& p, int64_t seed, const float* z, int64_t r0,
                                        Scratch& sc, const float* go, float* gz) {
  const int64_t n = p.n, dv = p.shape.dv, r = p.shape.score, kk = p.shape.k;
  const bool softmax = p.shape.kind == Shape::Kind::kSoftmax;
  const float tau = softmax ? p.inv_tau[seed] : 0.0f;
  // Query/key feature gradients go into the q/k columns of gz; the feature
  // map's derivative is applied per block afterwards.
  const int64_t fq = p.q, fk = p.k;
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
    const float* qi = z + (r0 + i) * p.f + fq;
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
        Axpy(tau * gs[j], z + (r0 + j) * p.f + fk, gqi, r);
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
        Axpy(ga, z + (r0 + j) * p.f + fk, gqi, r);
        Axpy(ga, qi, gzj + p.k, r);
      }
    }
  }
  return gt;
}

// For rows x0..x2 and y0..y2 of len floats and a 3 x 3 matrix g, writes
// gx_i = sum_j g_ij y_j and gy_j = sum_i g_ij x_i, each times the
// derivative of the feature map at its row (kOp; the rows hold the
// features): the gradients of three tokens' maps from their nine pairwise
// products, formed in registers and stored once. Sixteen columns at a
// time, the last partial vector through zero-padded copies. x, y: the
// rows; gx, gy: the outputs (no output overlaps an input).
// One vector of Mix3's six outputs.
struct Mix6 {
  Vec16 gx0, gx1, gx2, gy0, gy1, gy2;
};

template <MapOp kOp>
RANKSWEEP_INLINE Mix6 Mix3Chunk(const Vec16 (&gm)[9], const float* x0, const float* x1,
                                const float* x2, const float* y0, const float* y1,
                                const float* y2, float eps) {
  const Vec16 a0 = Load16(x0), a1 = Load16(x1), a2 = Load16(x2);
  const Vec16 b0 = Load16(y0), b1 = Load16(y1), b2 = Load16(y2);
  Mix6 o;
  o.gx0 = gm[0] * b0 + gm[1] * b1 + gm[2] * b2;
  o.gx1 = gm[3] * b0 + gm[4] * b1 + gm[5] * b2;
  o.gx2 = gm[6] * b0 + gm[7] * b1 + gm[8] * b2;
  o.gy0 = gm[0] * a0 + gm[3] * a1 + gm[6] * a2;
  o.gy1 = gm[1] * a0 + gm[4] * a1 + gm[7] * a2;
  o.gy2 = gm[2] * a0 + gm[5] * a1 + gm[8] * a2;
  if constexpr (kOp != MapOp::kIdentity) {
    o.gx0 *= Derivative<kOp>(a0, eps);
    o.gx1 *= Derivative<kOp>(a1, eps);
    o.gx2 *= Derivative<kOp>(a2, eps);
    o.gy0 *= Derivative<kOp>(b0, eps);
    o.gy1 *= Derivative<kOp>(b1, eps);
    o.gy2 *= Derivative<kOp>(b2, eps);
  }
  return o;
}

template <MapOp kOp, int kLen = 0>
RANKSWEEP_INLINE void Mix3(const float* g, const float* const* x, const float* const* y,
                           float* const* gx, float* const* gy, int64_t len, float eps) {
  if constexpr (kLen > 0 && kLen < 16) {
    // Narrower than a vector and known at compile time (rank 1, m = 12):
    // plain loops, which GCC unrolls and vectorizes as they are.
    for (int c = 0; c < kLen; ++c) {
      float in[6] = {x[0][c], x[1][c], x[2][c], y[0][c], y[1][c], y[2][c]};
      float out[6];
      for (int i = 0; i < 3; ++i) {
        out[i] = g[3 * i] * in[3] + g[3 * i + 1] * in[4] + g[3 * i + 2] * in[5];
        out[3 + i] = g[i] * in[0] + g[3 + i] * in[1] + g[6 + i] * in[2];
      }
      if constexpr (kOp != MapOp::kIdentity) {
        for (int o = 0; o < 6; ++o) out[o] *= Derivative<kOp>(in[o], eps);
      }
      for (int i = 0; i < 3; ++i) {
        gx[i][c] = out[i];
        gy[i][c] = out[3 + i];
      }
    }
    return;
  }
  if constexpr (kLen > 0) len = kLen;
  Vec16 gm[9];
  for (int ij = 0; ij < 9; ++ij) gm[ij] = Vec16{} + g[ij];
  int64_t c = 0;
  for (; c + 16 <= len; c += 16) {
    const Mix6 o =
        Mix3Chunk<kOp>(gm, x[0] + c, x[1] + c, x[2] + c, y[0] + c, y[1] + c, y[2] + c, eps);
    Store16(gx[0] + c, o.gx0);
    Store16(gx[1] + c, o.gx1);
    Store16(gx[2] + c, o.gx2);
    Store16(gy[0] + c, o.gy0);
    Store16(gy[1] + c, o.gy1);
    Store16(gy[2] + c, o.gy2);
  }
  const int64_t rest = len - c;
  if (rest == 0) return;
  float in[6][16];
  for (int i = 0; i < 3; ++i) {
    std::fill(std::copy(x[i] + c, x[i] + len, in[i]), in[i] + 16, 0.0f);
    std::fill(std::copy(y[i] + c, y[i] + len, in[3 + i]), in[3 + i] + 16, 0.0f);
  }
  const Mix6 o = Mix3Chunk<kOp>(gm, in[0], in[1], in[2], in[3], in[4], in[5], eps);
  Store16(in[0], o.gx0);
  Store16(in[1], o.gx1);
  Store16(in[2], o.gx2);
  Store16(in[3], o.gy0);
  Store16(in[4], o.gy1);
  Store16(in[5], o.gy2);
  for (int i = 0; i < 3; ++i) {
    std::copy(in[i], in[i] + rest, gx[i] + c);
    std::copy(in[3 + i], in[3 + i] + rest, gy[i] + c);
  }
}

// Every map gradient of a three-token sequence, written (not added) into
// its three rows of gz: query/key columns gq_i = sum_j g_ij k_j and
// gk_j = sum_i g_ij q_i through the feature map's derivative (kernel
// heads), readout/value columns gu_i = sum_j h_ij v_j and
// gv_j = sum_i h_ij u_i, and gb_i. The rows of z hold the features.
template <int kR, int kDv>
RANKSWEEP_INLINE void WriteGrads3(const Problem& p, const float* g, const float* h, const float* gb,
                                  const float* zs, float* gzs) {
  const int64_t f = p.f, r = kR > 0 ? kR : p.shape.score, dv = kDv > 0 ? kDv : p.shape.dv;
  auto rows = [f](const float* first) {
    return std::array<const float*, 3>{first, first + f, first + 2 * f};
  };
  auto out_rows = [f](float* first) {
    return std::array<float*, 3>{first, first + f, first + 2 * f};
  };
  const auto q = rows(zs + p.q), k = rows(zs + p.k), u = rows(zs + p.u), v = rows(zs + p.v);
  const auto gq = out_rows(gzs + p.q), gk = out_rows(gzs + p.k);
  const auto gu = out_rows(gzs + p.u), gv = out_rows(gzs + p.v);
  switch (MapOpOf(p)) {
    case MapOp::kEluPlusOne:
      Mix3<MapOp::kEluPlusOne, kR>(g, q.data(), k.data(), gq.data(), gk.data(), r, 0);
      break;
    case MapOp::kReluEps:
      Mix3<MapOp::kReluEps, kR>(g, q.data(), k.data(), gq.data(), gk.data(), r, p.relu_eps);
      break;
    case MapOp::kExp:
      Mix3<MapOp::kExp, kR>(g, q.data(), k.data(), gq.data(), gk.data(), r, 0);
      break;
    case MapOp::kIdentity:
      Mix3<MapOp::kIdentity, kR>(g, q.data(), k.data(), gq.data(), gk.data(), r, 0);
      break;
  }
  Mix3<MapOp::kIdentity, kDv>(h, u.data(), v.data(), gu.data(), gv.data(), dv, 0);
  for (int i = 0; i < 3; ++i) gzs[i * f + p.b] = gb[i];
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
RANKSWEEP_INLINE double KernelSequence3(const Problem& p, const float* z, int64_t r0, float* out,
                                        const float* target, const float* weight, float* gz) {
  const int64_t r = kR > 0 ? kR : p.shape.score, dv = kDv > 0 ? kDv : p.shape.dv;
  const float* q0 = z + r0 * p.f + p.q;
  const float* k0 = z + r0 * p.f + p.k;
  const float* zs = z + r0 * p.f;
  float a[9], pv[9];
  Dots3<kR>(q0, k0, p.f, r, a);
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
  float g[9], h[9], gb[3];
  for (int i = 0; i < 3; ++i) {
    const float d = out[i] - target[i];
    loss += static_cast<double>(weight[i]) * d * d;
    const float go = 2.0f * weight[i] * d;
    const float coef = quot[i].c * go;
    const float gden = quot[i].dc * go * sum[i], gabs = quot[i].ds * go * sum[i];
    gb[i] = go;
    for (int j = 0; j < 3; ++j) {
      const float aij = a[3 * i + j];
      h[3 * i + j] = coef * aij;
      g[3 * i + j] = coef * pv[3 * i + j] + gden;
      if (p.eps2 > 0) g[3 * i + j] += gabs * loops::SignOf(aij);
    }
  }
  WriteGrads3<kR, kDv>(p, g, h, gb, zs, gz + r0 * p.f);
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
  float g[9], h[9], gb[3];
  for (int i = 0; i < 3; ++i) {
    const float d = out[i] - target[i];
    loss += static_cast<double>(weight[i]) * d * d;
    const float go = 2.0f * weight[i] * d;
    gb[i] = go;
    for (int j = 0; j < 3; ++j) {
      const float wij = w[3 * i + j];
      const float gs = wij * go * (pv[3 * i + j] - o[i]);
      gt_sum += gs * a[3 * i + j];
      g[3 * i + j] = tau * gs;
      h[3 * i + j] = go * wij;
    }
  }
  WriteGrads3<kR, kDv>(p, g, h, gb, zs, gz + r0 * f);
  *gt += gt_sum;
  return loss;
}

// The three-token scalar-readout loops of one block (softmax or kernel head),
// for widths kR, kDv known at compile time (0: at run time). Forward only
// when src is null; otherwise the squared error's loss (returned) and map
// gradients into gz, d loss / d inv_tau into *gt.
template <bool kSoftmax, int kR, int kDv>
RANKSWEEP_INLINE double Block3(const Problem& p, int64_t seed, const float* z, int64_t t0,
                               int64_t nq, const GradSource* src, float* out, float* gz,
                               float* gt) {
  const float tau = kSoftmax ? p.inv_tau[seed] : 0.0f;
  double loss = 0;
  for (int64_t q = 0; q < nq; ++q) {
    const float* target = nullptr;
    float* o = out + q * 3;
    if (src != nullptr) {
      target = src->targets + seed * src->targets_seed_stride + t0 + q * 3;
      o = out;
    }
    const float* weight = src != nullptr ? src->weight : nullptr;
    if constexpr (kSoftmax) {
      loss += SoftmaxSequence3<kR, kDv>(p, tau, z, q * 3, o, target, weight,
                                        src != nullptr ? gz : nullptr, gt);
    } else {
      loss +=
          KernelSequence3<kR, kDv>(p, z, q * 3, o, target, weight, src != nullptr ? gz : nullptr);
    }
  }
  return loss;
}

// Block3 with the widths of the OOD sweeps' heads as constants (m = 12,
// 16, 24: the softmax head's r = dv = m, the kernel head's rank 1 with dv
// = m, where the run-time loops' set-up and tails cost as much as the
// arithmetic), at run time otherwise. The kernel and softmax loops are
// compiled apart: together in one loop, the values each keeps in
// registers crowded the other's accumulators out to memory.
RANKSWEEP_INLINE double Block3Dispatch(const Problem& p, int64_t seed, const float* z, int64_t t0,
                                       int64_t nq, const GradSource* src, float* out, float* gz,
                                       float* gt) {
  const int64_t r = p.shape.score, dv = p.shape.dv;
  if (p.shape.kind == Shape::Kind::kSoftmax) {
#define RANKSWEEP_BLOCK3(R, DV) \
  if (r == R && dv == DV) return Block3<true, R, DV>(p, seed, z, t0, nq, src, out, gz, gt)
    RANKSWEEP_BLOCK3(12, 12);
    RANKSWEEP_BLOCK3(16, 16);
    RANKSWEEP_BLOCK3(24, 24);
#undef RANKSWEEP_BLOCK3
    return Block3<true, 0, 0>(p, seed, z, t0, nq, src, out, gz, gt);
  }
  if (r == 1) {
    if (dv == 12) return Block3<false, 1, 12>(p, seed, z, t0, nq, src, out, gz, gt);
    if (dv == 16) return Block3<false, 1, 16>(p, seed, z, t0, nq, src, out, gz, gt);
    if (dv == 24) return Block3<false, 1, 24>(p, seed, z, t0, nq, src, out, gz, gt);
  }
  // Other ranks with the OOD sweeps' value widths: the value-width loops
  // (shorter than a vector or with a tail) are the ones that need them.
  if (dv == 12) return Block3<false, 0, 12>(p, seed, z, t0, nq, src, out, gz, gt);
  if (dv == 16) return Block3<false, 0, 16>(p, seed, z, t0, nq, src, out, gz, gt);
  if (dv == 24) return Block3<false, 0, 24>(p, seed, z, t0, nq, src, out, gz, gt);
  return Block3<false, 0, 0>(p, seed, z, t0, nq, src, out, gz, gt);
}

}  // namespace

RANKSWEEP_VECTOR_CLONES
void BlockForward(const Problem& p, int64_t seed, const float* z, int64_t nq, Scratch& sc,
                  float* out) {
  if (p.n == 3 && p.shape.k == 1) {
    Block3Dispatch(p, seed, z, 0, nq, nullptr, out, nullptr, nullptr);
    return;
  }
  for (int64_t q = 0; q < nq; ++q) {
    SequenceForward(p, seed, z, q * p.n, sc, out + q * p.n * p.shape.k);
  }
}

namespace {

// The feature map's derivative on the query/key columns of the block's gz
// (tb rows), from the features in the same columns of z.
template <MapOp kOp>
RANKSWEEP_INLINE void ScaleByDerivative(const Problem& p, const float* z, int64_t tb, float* gz) {
  const int64_t width = 2 * p.shape.score;
  for (int64_t t = 0; t < tb; ++t) {
    float* g = gz + t * p.f;
    const float* phi = z + t * p.f;
    for (int64_t c = 0; c < width; ++c) g[c] *= Derivative<kOp>(phi[c], p.relu_eps);
  }
}

RANKSWEEP_VECTOR_CLONES
void FeatureMapBackward(const Problem& p, const float* z, int64_t tb, float* gz) {
  switch (MapOpOf(p)) {
    case MapOp::kEluPlusOne:
      return ScaleByDerivative<MapOp::kEluPlusOne>(p, z, tb, gz);
    case MapOp::kReluEps:
      return ScaleByDerivative<MapOp::kReluEps>(p, z, tb, gz);
    case MapOp::kExp:
      return ScaleByDerivative<MapOp::kExp>(p, z, tb, gz);
    case MapOp::kIdentity:
      return;
  }
}

}  // namespace

RANKSWEEP_VECTOR_CLONES
void BlockBackward(const Problem& p, int64_t seed, const float* z, int64_t t0, int64_t nq,
                   const GradSource& src, Scratch& sc, float* gz, float* gt, double* loss) {
  float gt_sum = 0;
  double loss_sum = 0;
  float* out = sc.out.data();
  float* go = sc.go.data();
  if (src.gout == nullptr && p.n == 3 && p.shape.k == 1) {
    *loss += Block3Dispatch(p, seed, z, t0, nq, &src, out, gz, gt);
    return;
  }
  std::fill(gz, gz + nq * p.n * p.f, 0.0f);
  for (int64_t q = 0; q < nq; ++q) {
    const int64_t t = t0 + q * p.n;  // the sequence's first position
    if (src.gout != nullptr) {
      SequenceForward(p, seed, z, q * p.n, sc, nullptr);
      gt_sum +=
          SequenceBackward(p, seed, z, q * p.n, sc, src.gout + (seed * p.t + t) * p.shape.k, gz);
      continue;
    }
    SequenceForward(p, seed, z, q * p.n, sc, out);
    const float* target = src.targets + seed * src.targets_seed_stride + t;
    for (int64_t i = 0; i < p.n; ++i) {
      const float d = out[i] - target[i];
      loss_sum += static_cast<double>(src.weight[i]) * d * d;
      go[i] = 2.0f * src.weight[i] * d;
    }
    gt_sum += SequenceBackward(p, seed, z, q * p.n, sc, go, gz);
  }
  FeatureMapBackward(p, z, nq * p.n, gz);
  *gt += gt_sum;
  *loss += loss_sum;
}

}  // namespace ranksweep::trainer::token_kernel_internal
