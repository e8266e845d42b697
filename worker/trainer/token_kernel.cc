#include "worker/trainer/token_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
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
#define RANKSWEEP_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RANKSWEEP_VECTOR_CLONES
#endif

// Floats of one block's maps (~192 KB): the block's maps and map gradient
// together stay within a core's L2 cache, and a column group of the map
// gradient (kGroup floats of every token of the block) within L1.
constexpr int64_t kBlockFloats = 48 * 1024;
// Tokens of one block at most: a column group of its map gradient is 32 KB.
constexpr int64_t kBlockTokens = 128;

// Positions per table row from which the maps go by table row
// (Problem::by_row).
constexpr int64_t kByRowUses = 4;

// Columns summed together by the sparse first layer and its weight
// gradient: four AVX-512 vectors.
constexpr int kGroup = 64;

// Sixteen floats as one value (GCC's vector extension): one register in the
// AVX-512 clones, two or four narrower ones in the others. The sums below
// are written with it because GCC left the same loops over float arrays
// scalar, the accumulators in memory.
typedef float Vec16 __attribute__((vector_size(64)));
typedef float Vec16Unaligned __attribute__((vector_size(64), aligned(4), may_alias));
constexpr int kGroupVecs = kGroup / 16;

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

// Everything one call shares, read-only.
struct Problem {
  Shape shape;
  // f: the row stride of the maps, map gradients and weights here, the
  // width rounded up to whole vectors (the extra columns are 0 in the
  // weights, so every column loop runs whole vectors).
  int64_t s = 0, t = 0, n = 0, m1 = 0, f = 0, width = 0;
  int64_t q = 0, k = 0, v = 0, u = 0, b = 0;  // column offsets in a row of maps
  torch::Tensor table, idx, w;
  const int64_t* rows = nullptr;  // idx: the table row of every position
  int64_t rows_seed_stride = 0;   // 0: the same positions for every seed
  const float* inv_tau = nullptr;
  float eps2 = 0, relu_eps = 0;
  // The inputs of table row d: input[begin[d] .. begin[d+1]), the columns
  // holding 1 and then m (the bias row of w: the implicit ones column).
  std::vector<int32_t> begin, input;
  // Maps by table row: with every table row used by four positions or more
  // (ood-small: 300 tokens in 6,000 positions), each seed's maps are
  // computed once per table row and copied to the positions, and the
  // positions' map gradients added up per row before the weight gradient.
  bool by_row = false;
  std::vector<int64_t> table_rows;  // 0 .. D-1 (by_row)
  // Kernel heads: the query and key columns of the maps hold the features.
  bool features() const { return shape.kind == Shape::Kind::kKernel; }
  // The table rows of `seed`'s positions from t0 on.
  const int64_t* RowsOf(int64_t seed, int64_t t0) const {
    return rows + seed * rows_seed_stride + t0;
  }
};

// Lists the inputs of every table row; throws unless every entry is 0 or 1.
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

// One worker's buffers, sized for the largest block. Allocated once per
// parallel chunk, not per block.
struct Scratch {
  Scratch(const Problem& p, int64_t block_tokens)
      : z(block_tokens * p.f),
        gz(block_tokens * p.f),
        zt(p.by_row ? p.table.size(0) * p.f : 0),
        gzt(zt.size()),
        a(p.n * p.n),
        wts(p.n * p.n),
        den(p.n),
        num(p.n * p.shape.dv),
        y(p.n * p.shape.dv),
        gy(p.shape.dv),
        gnum(p.shape.dv),
        gs(p.n),
        out(p.n * p.shape.k),
        go(p.n * p.shape.k),
        count(p.m1),
        holders(p.m1 * std::max<int64_t>(block_tokens, p.by_row ? p.table.size(0) : 0)) {}
  std::vector<float> z, gz;
  std::vector<float> zt, gzt;  // by_row: the maps and map gradients of every table row
  std::vector<float> a, wts, den, num, y, gy, gnum, gs, out, go;
  // SparseWeightGrad: per input, how many and which tokens of the block
  // hold it.
  std::vector<int32_t> count, holders;
};

// The feature map of p's query and key columns.
MapOp MapOpOf(const Problem& p) {
  if (!p.features()) return MapOp::kIdentity;
  switch (p.shape.map) {
    case Shape::Map::kEluPlusOne:
      return MapOp::kEluPlusOne;
    case Shape::Map::kReluEps:
      return MapOp::kReluEps;
    case Shape::Map::kExp:
      return MapOp::kExp;
  }
  return MapOp::kIdentity;
}

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

// The first-layer maps of table rows rows[0 .. tb) into z (tb rows of f
// floats): for kernel heads the features in the query and key columns (the
// maps themselves are not kept: each feature map's derivative is a function
// of its value), the maps elsewhere.
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

// gw[i, :] += sum of the map-gradient rows gz[t, :] over the tb tokens t
// (table rows `rows`) that hold input i (the weight gradient x^T gz of 0/1
// tokens), in column groups of kGroup floats, so that the group's column
// of gz stays in L1 while every input's holders are summed.
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

// Where the readouts' gradient comes from: given per position ([S, T, k]),
// or formed from the squared error against targets ([S or 1, T]) with a
// weight per position in the sequence ([n]), whose loss is summed too.
struct GradSource {
  const float* gout = nullptr;
  const float* targets = nullptr;
  int64_t targets_seed_stride = 0;  // 0: the same targets for every seed
  const float* weight = nullptr;
};

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

// Readouts of the block's nq sequences into out (k per position). One call
// per block: the sequence loops inline into each instruction-set clone.
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

// The map gradients of the block's nq sequences (positions t0 ..) into gz;
// adds the block's share of d loss / d inv_tau to *gt and, for the squared
// error, its loss to *loss.
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
