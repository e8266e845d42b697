// Small float helpers shared by the written-out CPU loops
// (short_attention.cc, token_kernel.cc). Always inlined, so that each
// instruction-set clone of a calling loop compiles them for its own
// instruction set.
//
// Internal to the trainer library.
#ifndef RANKSWEEP_WORKER_TRAINER_LOOP_MATH_H_
#define RANKSWEEP_WORKER_TRAINER_LOOP_MATH_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

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

}  // namespace ranksweep::trainer::loops

#endif  // RANKSWEEP_WORKER_TRAINER_LOOP_MATH_H_
