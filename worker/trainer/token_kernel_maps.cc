// The first layer of the token kernels (token_kernel.h): the inputs of
// every table row, each token's maps as the sum of the weight rows of its
// inputs (the feature map applied in registers), and the weight gradient as
// sums of map-gradient rows over the tokens holding each input.
#include <algorithm>
#include <cstdint>

#include "worker/trainer/token_kernel_internal.h"

namespace ranksweep::trainer::token_kernel_internal {

void ListInputs(Problem& p) {
  const float* x = p.table.data_ptr<float>();
  const int64_t d = p.table.size(0), m = p.m1 - 1;
  p.begin.assign(d + 1, 0);
  p.input.resize(d * p.m1);
  int32_t* in = p.input.data();
  int64_t count = 0;
  bool binary = true;
  for (int64_t r = 0; r < d; ++r) {
    const float* row = x + r * m;
    for (int64_t c = 0; c < m; ++c) {  // branch-free: the entries are coin flips
      in[count] = static_cast<int32_t>(c);
      count += row[c] == 1.0f;
      binary &= row[c] == 0.0f || row[c] == 1.0f;
    }
    in[count++] = static_cast<int32_t>(m);
    p.begin[r + 1] = static_cast<int32_t>(count);
  }
  p.input.resize(count);
  TORCH_CHECK(binary, "TokenKernelForward: the table must hold only 0 and 1");
}

namespace {

// z[t, :] = the sum of the weight rows w[i, :] over the inputs i of token
// t, for the block's tb tokens (table rows `rows`), the feature map kOp
// applied to columns 0 .. width; rows of w and z f floats apart (whole
// vectors). The first layer of 0/1 tokens as sums of (weight + 1) rows, not
// m + 1 multiply-adds per output. Columns go in groups of kGroup: the
// group's slab of w (m + 1 rows) stays in L1 across the block, each sum is
// held in registers, two tokens at a time, and the map is applied there,
// before the sum is stored (a second pass over the stored sums, which GCC
// vectorized with masks, was a third of the step on ood-medium at rank 64).
template <MapOp kOp>
RANKSWEEP_INLINE void SumRows(const Problem& p, const float* w, const int64_t* rows, int64_t tb,
                              int64_t width, float* z) {
  const int64_t f = p.f;
  for (int64_t c = 0; c < f; c += kGroup) {
    const int64_t len = std::min<int64_t>(kGroup, f - c);
    const int64_t mapped = std::clamp<int64_t>(width - c, 0, len);
    for (int64_t t = 0; t < tb; t += 2) {
      const int64_t d = rows[t];
      const int32_t* in = p.input.data() + p.begin[d];
      const int32_t n = p.begin[d + 1] - p.begin[d];
      float* zr = z + t * f + c;  // the maps go straight into z
      if (t + 1 < tb) {
        const int64_t d2 = rows[t + 1];
        SumColumns<kOp>(w + c, f, in, n, len, zr, p.input.data() + p.begin[d2],
                        p.begin[d2 + 1] - p.begin[d2], zr + f, mapped, p.relu_eps);
      } else {
        SumColumns<kOp>(w + c, f, in, n, len, zr, nullptr, 0, nullptr, mapped, p.relu_eps);
      }
    }
  }
}

}  // namespace

RANKSWEEP_VECTOR_CLONES
void Maps(const Problem& p, int64_t seed, const int64_t* rows, int64_t tb, float* z) {
  const float* w = p.w.data_ptr<float>() + seed * p.m1 * p.f;
  const int64_t width = p.features() ? 2 * p.shape.score : 0;
  switch (MapOpOf(p)) {
    case MapOp::kEluPlusOne:
      return SumRows<MapOp::kEluPlusOne>(p, w, rows, tb, width, z);
    case MapOp::kReluEps:
      return SumRows<MapOp::kReluEps>(p, w, rows, tb, width, z);
    case MapOp::kExp:
      return SumRows<MapOp::kExp>(p, w, rows, tb, width, z);
    case MapOp::kIdentity:
      return SumRows<MapOp::kIdentity>(p, w, rows, tb, 0, z);
  }
}

RANKSWEEP_VECTOR_CLONES
void SparseWeightGrad(const Problem& p, const int64_t* rows, int64_t tb, const float* gz,
                      Scratch& sc, float* gw) {
  const int64_t f = p.f;
  int32_t* count = sc.count.data();
  int32_t* holders = sc.holders.data();
  // The bias row m: every token (the last input of every list), listed
  // without a counter that each token would have to wait on.
  const int64_t m = p.m1 - 1;
  std::fill(count, count + m, 0);
  count[m] = static_cast<int32_t>(tb);
  for (int64_t t = 0; t < tb; ++t) {
    holders[m * tb + t] = static_cast<int32_t>(t);
    const int64_t d = rows[t];
    for (int32_t k = p.begin[d]; k < p.begin[d + 1] - 1; ++k) {
      const int32_t i = p.input[k];
      holders[i * tb + count[i]++] = static_cast<int32_t>(t);
    }
  }
  for (int64_t c = 0; c < f; c += kGroup) {
    const int64_t len = std::min<int64_t>(kGroup, f - c);
    for (int64_t i = 0; i < p.m1; ++i) {
      // The holders in two halves, summed side by side.
      const int32_t* h = holders + i * tb;
      const int32_t half = count[i] / 2;
      float sum[2][kGroup];
      SumColumns(gz + c, f, h, half, len, sum[0], h + half, count[i] - half, sum[1]);
      float* out = gw + i * f + c;
      for (int l = 0; l < kGroup; ++l) {
        if (l < len) out[l] += sum[0][l] + sum[1][l];
      }
    }
  }
}

}  // namespace ranksweep::trainer::token_kernel_internal
