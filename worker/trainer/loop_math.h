// Small float helpers shared by the written-out CPU loops
// (short_attention.cc, token_kernel*.cc). Always inlined, so that each
// instruction-set clone of a calling loop compiles them for its own
// instruction set.
//
// Internal to the trainer library.
#ifndef RANKSWEEP_WORKER_TRAINER_LOOP_MATH_H_
#define RANKSWEEP_WORKER_TRAINER_LOOP_MATH_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#define RANKSWEEP_INLINE inline __attribute__((always_inline))

namespace ranksweep::trainer::loops {

// The floor of the nonnegative quotient's denominator, on every path (the bmm
// path clamps with it too). 1e-18 and not smaller: its square, 1e-36, is still
// a normal float, so -1 / den^2 stays finite for every den above the floor.
inline constexpr float kDenFloor = 1e-18f;

// The normalized attention's quotient c and its derivatives dc/dden and
// dc/dS, where den = sum_j a_ij and S = sum_j |a_ij|:
//   nonnegative features (eps2 == 0): c = 1 / den, floored at kDenFloor (no
//     gradient below the floor); dc/dS = 0;
//   signed kernels (eps2 = eps^2 > 0): c = den / (den^2 + eps2 S^2), the
//     scale-free regularized inverse of docs/TRAINER.md ("Signed kernels"):
//     1 / den wherever |den| >> eps S, and |c num| <= max |v| / (2 eps).
// q is floored at kDenFloor^2 so that a row of zero scores gives c = 0.
struct Quotient {
  float c, dc, ds;
};

RANKSWEEP_INLINE Quotient QuotientOf(float den, float abs_sum, float eps2) {
  if (eps2 > 0) {
    const float reg = eps2 * abs_sum * abs_sum;
    const float q = std::max(den * den + reg, kDenFloor * kDenFloor);
    return {den / q, (reg - den * den) / q / q, -2.0f * eps2 * abs_sum * den / q / q};
  }
  if (den > kDenFloor) return {1.0f / den, -1.0f / (den * den), 0.0f};
  return {1.0f / kDenFloor, 0.0f, 0.0f};  // clamped: no gradient through den
}

// S = sum_j |a_j| of a row of n scores, for the signed quotient.
RANKSWEEP_INLINE float AbsSum(const float* a, int64_t n) {
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += std::fabs(a[j]);
  return sum;
}

// sign(a) as the derivative of |a| (0 at 0, as LibTorch's abs backward).
RANKSWEEP_INLINE float SignOf(float a) {
  return static_cast<float>((a > 0.0f) - (a < 0.0f));
}

// Eight partial sums, so that the compiler can keep them in vector
// registers (a float sum is not reassociated on its own).
RANKSWEEP_INLINE float Dot(const float* a, const float* b, int64_t len) {
  float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= len; k += 8) {
    for (int l = 0; l < 8; ++l) p[l] += a[k + l] * b[k + l];
  }
  float tail = 0;
  for (; k < len; ++k) tail += a[k] * b[k];
  return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7])) + tail;
}

RANKSWEEP_INLINE void Axpy(float alpha, const float* __restrict x, float* __restrict y,
                           int64_t len) {
  for (int64_t k = 0; k < len; ++k) y[k] += alpha * x[k];
}

// e^max(x, -87) for x <= 0, for T float or a GCC vector of floats, lane by
// lane (as Cephes' expf: range reduction by ln 2 in two parts,
// 1 + r + r^2 P(r), the exponent set by integer arithmetic; P of degree 4,
// not Cephes' 5: a weighted least-squares fit on [-ln 2 / 2, ln 2 / 2]
// within 3e-9 of e^r, and no less accurate in float): within 1.02 ulp of
// e^x at every float in [-87, 0] (against the double exp, with and without
// FMA contraction; short_attention_test.cc checks a sample). Branch-free,
// so it vectorizes: LibTorch's exp (Sleef, 8 lanes, one call per block) was
// a fifth of the minibatch training step. Above 0 the result is not e^x (nor
// a trap): callers that pass such x discard what they get.
template <typename T>
RANKSWEEP_INLINE T ExpClamped(T x) {
  // The integers of T's bits: int32_t, or the vector that comparing two
  // T's gives (as many 32-bit lanes).
  using Bits = std::conditional_t<std::is_same_v<T, float>, int32_t, decltype(T{} < T{})>;
  static_assert(sizeof(Bits) == sizeof(T), "32-bit lanes expected");
  const T low = T{} - 87.0f;
  x = x < low ? low : x;
  // Round to nearest by adding and subtracting 1.5 * 2^23 (|x log2 e| < 126).
  const T shifted = x * 1.44269504088896341f + 12582912.0f;
  const T n = shifted - 12582912.0f;
  const T r = x - n * 0.693359375f - n * -2.12194440e-4f;
  T p = T{} + 1.381461275741458e-3f;
  p = p * r + 8.368710055947304e-3f;
  p = p * r + 4.166838899254799e-2f;
  p = p * r + 1.666652113199234e-1f;
  p = p * r + 4.999999403953552e-1f;
  const T y = p * r * r + r + 1.0f;
  // 2^n: `shifted`'s bits are 0x4B400000 + n, so n + 127 (1 .. 254) shifted
  // into the exponent field is 2^n, without a float-to-int conversion.
  Bits bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  const Bits exponent = (bits - (0x4B400000 - 127)) << 23;
  T scale;
  std::memcpy(&scale, &exponent, sizeof(scale));
  return y * scale;
}

// e^x for x <= 0: ExpClamped, and 0 below -87 where e^x < 1.7e-38.
template <typename T>
RANKSWEEP_INLINE T ExpNonPositive(T x) {
  return x < T{} - 87.0f ? T{} : ExpClamped(x);
}

}  // namespace ranksweep::trainer::loops

#endif  // RANKSWEEP_WORKER_TRAINER_LOOP_MATH_H_
