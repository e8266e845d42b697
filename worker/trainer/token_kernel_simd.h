// The SIMD lane helpers of the token kernels (token_kernel.h): sixteen
// floats as one GCC vector value (Vec16) with its loads and stores, the
// feature maps and their derivatives lane by lane, sums of weight rows over
// a column group with the map applied in registers, lane sums, and the nine
// dot products of a three-token sequence. All always inlined
// (RANKSWEEP_INLINE), so that each instruction-set clone of a calling loop
// (RANKSWEEP_VECTOR_CLONES) compiles them for its own instruction set.
//
// Internal to the token kernel files (token_kernel*.cc), which are all
// compiled with the same flags (worker/trainer/CMakeLists.txt).
#ifndef RANKSWEEP_WORKER_TRAINER_TOKEN_KERNEL_SIMD_H_
#define RANKSWEEP_WORKER_TRAINER_TOKEN_KERNEL_SIMD_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "worker/trainer/loop_math.h"

// The per-sequence loops are compiled for AVX-512 and AVX2 beside the
// baseline, picked at load time (GCC function multiversioning), so one
// binary runs everywhere and vectorizes where the CPU can.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define RANKSWEEP_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RANKSWEEP_VECTOR_CLONES
#endif

namespace ranksweep::trainer::token_kernel_internal {

// Columns summed together by the sparse first layer and its weight
// gradient: four AVX-512 vectors.
inline constexpr int kGroup = 64;

// Sixteen floats as one value (GCC's vector extension): one register in the
// AVX-512 clones, two or four narrower ones in the others. The sums below
// are written with it because GCC left the same loops over float arrays
// scalar, the accumulators in memory.
typedef float Vec16 __attribute__((vector_size(64)));
typedef float Vec16Unaligned __attribute__((vector_size(64), aligned(4), may_alias));
inline constexpr int kGroupVecs = kGroup / 16;

RANKSWEEP_INLINE Vec16 Load16(const float* p) {
  return *reinterpret_cast<const Vec16Unaligned*>(p);
}
RANKSWEEP_INLINE void Store16(float* p, Vec16 v) { *reinterpret_cast<Vec16Unaligned*>(p) = v; }

// Sixteen 32-bit integers: lane masks.
typedef int32_t Vec16i __attribute__((vector_size(64)));

using loops::ExpClamped;
using loops::ExpNonPositive;

// The feature maps (kIdentity: the query and key columns without one, as
// in signed-kernel and softmax heads), each with its derivative as a
// function of its value: the maps under the features are not kept.
enum class MapOp { kIdentity, kEluPlusOne, kReluEps, kExp };

// The map of z; T: float or Vec16, lane by lane.
template <MapOp kOp, typename T>
RANKSWEEP_INLINE T ApplyMap(T z, float eps) {
  if constexpr (kOp == MapOp::kEluPlusOne) {
    // z + 1 above 0, e^z at or below (e^-87 below -87, 1.7e-38 from e^z);
    // branch-free, so it vectorizes.
    return z > T{} ? z + 1.0f : ExpClamped(z);
  } else if constexpr (kOp == MapOp::kReluEps) {
    return (z > T{} ? z : T{}) + eps;
  } else if constexpr (kOp == MapOp::kExp) {
    if constexpr (std::is_same_v<T, float>) {
      return std::exp(z);
    } else {
      for (int l = 0; l < 16; ++l) z[l] = std::exp(z[l]);
      return z;
    }
  } else {
    return z;
  }
}

// d map / dz from phi = map(z), branch-free (the sign of z is a coin flip,
// and a mispredicted branch per feature cost more than the rest of the
// step). T: float or Vec16.
template <MapOp kOp, typename T>
RANKSWEEP_INLINE T Derivative(T phi, float eps) {
  const T one = T{} + 1.0f;
  if constexpr (kOp == MapOp::kEluPlusOne) {
    return phi < one ? phi : one;  // 1 above 0, e^z = phi <= 1 at or below
  } else if constexpr (kOp == MapOp::kReluEps) {
    return phi > T{} + eps ? one : T{};  // z > 0 exactly where phi > eps
  } else if constexpr (kOp == MapOp::kExp) {
    return phi;
  } else {
    return one;
  }
}

// v with the map applied to its lanes below `mapped` (at least 1).
template <MapOp kOp>
RANKSWEEP_INLINE Vec16 MapLanes(Vec16 v, int64_t mapped, float eps) {
  const Vec16 phi = ApplyMap<kOp>(v, eps);
  if (mapped >= 16) return phi;
  const Vec16i lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return lane < static_cast<int32_t>(mapped) ? phi : v;
}

// out[0 .. 16 kVecs) = the sum of the rows rows + list[k] * stride over
// k < n, added in list order (as a product with the 0/1 row would be: the
// signed kernel's gradients were 3.3-8 times further from exact with the
// sums split in two), and the same for a second list into out2 when list2
// is given: the two sums interleaved, so that 2 kVecs chains of adds run
// at once. The map kOp is applied to the first `mapped` columns of each
// sum in registers, before it is stored.
template <MapOp kOp, int kVecs>
RANKSWEEP_INLINE void SumGroup(const float* rows, int64_t stride, const int32_t* list, int32_t n,
                               float* out, const int32_t* list2, int32_t n2, float* out2,
                               int64_t mapped, float eps) {
  Vec16 a0[kVecs] = {}, a1[kVecs] = {};
  const int32_t both = list2 != nullptr ? std::min(n, n2) : 0;
  int32_t k = 0;
  for (; k < both; ++k) {
    const float* r0 = rows + list[k] * stride;
    const float* r1 = rows + list2[k] * stride;
    for (int v = 0; v < kVecs; ++v) {
      a0[v] += Load16(r0 + 16 * v);
      a1[v] += Load16(r1 + 16 * v);
    }
  }
  for (int32_t k0 = k; k0 < n; ++k0) {
    const float* r0 = rows + list[k0] * stride;
    for (int v = 0; v < kVecs; ++v) a0[v] += Load16(r0 + 16 * v);
  }
  if (list2 != nullptr) {
    for (int32_t k1 = k; k1 < n2; ++k1) {
      const float* r1 = rows + list2[k1] * stride;
      for (int v = 0; v < kVecs; ++v) a1[v] += Load16(r1 + 16 * v);
    }
  }
  if constexpr (kOp != MapOp::kIdentity) {
    if (mapped >= 16 * kVecs) {  // the whole group (constant trip counts: GCC unrolls them)
      for (int v = 0; v < kVecs; ++v) {
        a0[v] = ApplyMap<kOp>(a0[v], eps);
        a1[v] = ApplyMap<kOp>(a1[v], eps);
      }
    } else {
      for (int v = 0; v < kVecs; ++v) {
        if (16 * v < mapped) {
          a0[v] = MapLanes<kOp>(a0[v], mapped - 16 * v, eps);
          a1[v] = MapLanes<kOp>(a1[v], mapped - 16 * v, eps);
        }
      }
    }
  }
  for (int v = 0; v < kVecs; ++v) Store16(out + 16 * v, a0[v]);
  if (list2 == nullptr) return;
  for (int v = 0; v < kVecs; ++v) Store16(out2 + 16 * v, a1[v]);
}

// out[0 .. len) as SumGroup (and out2 from list2 when given), len a
// multiple of 16 up to kGroup: rows are padded to whole vectors.
template <MapOp kOp = MapOp::kIdentity>
RANKSWEEP_INLINE void SumColumns(const float* rows, int64_t stride, const int32_t* list, int32_t n,
                                 int64_t len, float* out, const int32_t* list2 = nullptr,
                                 int32_t n2 = 0, float* out2 = nullptr, int64_t mapped = 0,
                                 float eps = 0) {
  static_assert(kGroupVecs == 4, "SumColumns dispatches up to four vectors");
  switch (len / 16) {
    case 4:
      return SumGroup<kOp, 4>(rows, stride, list, n, out, list2, n2, out2, mapped, eps);
    case 3:
      return SumGroup<kOp, 3>(rows, stride, list, n, out, list2, n2, out2, mapped, eps);
    case 2:
      return SumGroup<kOp, 2>(rows, stride, list, n, out, list2, n2, out2, mapped, eps);
    default:
      return SumGroup<kOp, 1>(rows, stride, list, n, out, list2, n2, out2, mapped, eps);
  }
}

using loops::Axpy;
using loops::Dot;
using loops::Quotient;
using loops::QuotientOf;

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

// Nine products of three rows with three, sixteen columns at a time, the
// accumulators named so that they stay in registers (GCC kept arrays of
// them, and of floats, in memory).
struct Dots9 {
  Vec16 a00 = {}, a01 = {}, a02 = {}, a10 = {}, a11 = {}, a12 = {}, a20 = {}, a21 = {}, a22 = {};
};

RANKSWEEP_INLINE void AddDots3(const float* q0, const float* q1, const float* q2, const float* k0,
                               const float* k1, const float* k2, Dots9& d) {
  const Vec16 x0 = Load16(q0), x1 = Load16(q1), x2 = Load16(q2);
  const Vec16 y0 = Load16(k0), y1 = Load16(k1), y2 = Load16(k2);
  d.a00 += x0 * y0;
  d.a01 += x0 * y1;
  d.a02 += x0 * y2;
  d.a10 += x1 * y0;
  d.a11 += x1 * y1;
  d.a12 += x1 * y2;
  d.a20 += x2 * y0;
  d.a21 += x2 * y1;
  d.a22 += x2 * y2;
}

#if defined(__clang__)
// Clang has no __builtin_shuffle (a mask vector): the nine lane sums one by
// one there.
RANKSWEEP_INLINE void SumLanes9(const Dots9& d, float* out) {
  const Vec16 v[9] = {d.a00, d.a01, d.a02, d.a10, d.a11, d.a12, d.a20, d.a21, d.a22};
  for (int i = 0; i < 9; ++i) {
    float lanes[16];
    Store16(lanes, v[i]);
    out[i] = SumLanes<16>(lanes);
  }
}
#else
// Lanes `lo` of (a, b) plus lanes `hi`: one level of the reduction below.
RANKSWEEP_INLINE Vec16 Fold(Vec16 a, Vec16 b, Vec16i lo, Vec16i hi) {
  return __builtin_shuffle(a, b, lo) + __builtin_shuffle(a, b, hi);
}

// The lane sums of nine vectors at once, in four levels of folds (each
// level halves the lanes per vector and doubles the vectors per register):
// 11 folds instead of nine separate reductions of four steps each.
RANKSWEEP_INLINE void SumLanes9(const Dots9& d, float* out) {
  const Vec16i lo1 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
  const Vec16i hi1 = lo1 + 8;
  const Vec16i lo2 = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
  const Vec16i hi2 = lo2 + 4;
  const Vec16i lo3 = {0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29};
  const Vec16i hi3 = lo3 + 2;
  const Vec16i lo4 = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
  const Vec16i hi4 = lo4 + 1;
  const Vec16 zero = {};
  const Vec16 c0 = Fold(d.a00, d.a01, lo1, hi1), c1 = Fold(d.a02, d.a10, lo1, hi1);
  const Vec16 c2 = Fold(d.a11, d.a12, lo1, hi1), c3 = Fold(d.a20, d.a21, lo1, hi1);
  const Vec16 c4 = Fold(d.a22, zero, lo1, hi1);
  const Vec16 e0 = Fold(c0, c1, lo2, hi2), e1 = Fold(c2, c3, lo2, hi2);
  const Vec16 e2 = Fold(c4, zero, lo2, hi2);
  const Vec16 f0 = Fold(e0, e1, lo3, hi3), f1 = Fold(e2, zero, lo3, hi3);
  float lanes[16];
  Store16(lanes, Fold(f0, f1, lo4, hi4));  // lane i: the sum of the i-th vector
  std::copy(lanes, lanes + 9, out);
}
#endif

// Dots3 below for widths of a vector or more.
RANKSWEEP_INLINE void Dots3Wide(const float* q, const float* k, int64_t stride, int64_t r,
                                float* a) {
  Dots9 d;
  int64_t c = 0;
  for (; c + 16 <= r; c += 16) {
    AddDots3(q + c, q + stride + c, q + 2 * stride + c, k + c, k + stride + c, k + 2 * stride + c,
             d);
  }
  if (c < r) {
    float pad[6][16];
    for (int i = 0; i < 3; ++i) {
      std::fill(std::copy(q + i * stride + c, q + i * stride + r, pad[i]), pad[i] + 16, 0.0f);
      std::fill(std::copy(k + i * stride + c, k + i * stride + r, pad[3 + i]), pad[3 + i] + 16,
                0.0f);
    }
    AddDots3(pad[0], pad[1], pad[2], pad[3], pad[4], pad[5], d);
  }
  SumLanes9(d, a);
}

// a[i * 3 + j] = <q_i, k_j> for a sequence of three tokens, rows `stride`
// floats apart: the nine dot products in one pass over the features, nine
// independent vector accumulators instead of nine dependent reductions
// (the sequences of the OOD sweeps have three tokens). kR > 0: the width r
// known at compile time (the loops unroll into whole vectors, accumulators
// in registers, lanes a divisor of r); 0: r at run time.
template <int kR = 0>
RANKSWEEP_INLINE void Dots3(const float* q, const float* k, int64_t stride, int64_t r, float* a) {
  if ((kR > 0 ? kR : r) >= 16) {
    Dots3Wide(q, k, stride, kR > 0 ? kR : r, a);
    return;
  }
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
  // Below a vector (r < 16 here, Dots3Wide took the rest): plain dot
  // products, no vector accumulators to set up and reduce.
  for (int ij = 0; ij < 9; ++ij) {
    const float* qi = q + (ij / 3) * stride;
    const float* kj = k + (ij % 3) * stride;
    float sum = 0;
    for (int64_t t = 0; t < r; ++t) sum += qi[t] * kj[t];
    a[ij] = sum;
  }
}

}  // namespace ranksweep::trainer::token_kernel_internal

#endif  // RANKSWEEP_WORKER_TRAINER_TOKEN_KERNEL_SIMD_H_
