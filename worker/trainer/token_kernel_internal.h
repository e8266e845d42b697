// What the token kernel files (token_kernel*.cc) share: one call's
// problem (shapes, column offsets, the inputs of every table row), a
// worker's scratch buffers, where the readouts' gradient comes from, and
// the passes over a block that the driver (token_kernel.cc) runs: the
// first-layer maps and weight gradient (token_kernel_maps.cc) and the
// attention and readout, forward and backward (token_kernel_attention.cc).
//
// Internal to the token kernel files.
#ifndef RANKSWEEP_WORKER_TRAINER_TOKEN_KERNEL_INTERNAL_H_
#define RANKSWEEP_WORKER_TRAINER_TOKEN_KERNEL_INTERNAL_H_

#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "worker/trainer/token_kernel.h"
#include "worker/trainer/token_kernel_simd.h"

namespace ranksweep::trainer::token_kernel_internal {

using Shape = TokenKernelShape;

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
inline MapOp MapOpOf(const Problem& p) {
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

// Where the readouts' gradient comes from: given per position ([S, T, k]),
// or formed from the squared error against targets ([S or 1, T]) with a
// weight per position in the sequence ([n]), whose loss is summed too.
struct GradSource {
  const float* gout = nullptr;
  const float* targets = nullptr;
  int64_t targets_seed_stride = 0;  // 0: the same targets for every seed
  const float* weight = nullptr;
};

// The passes below are defined with RANKSWEEP_VECTOR_CLONES: one clone per
// instruction set and the plain name resolved to one of them at load time.
// The declarations leave the attribute out, so that a caller in another
// file calls that name (with the attribute, GCC would emit a resolver in
// the caller's file too, naming clones that only the defining file has).

// ---------------------------------------------------- token_kernel_maps.cc

// Lists the inputs of every table row; throws unless every entry is 0 or 1.
void ListInputs(Problem& p);

// The first-layer maps of table rows rows[0 .. tb) into z (tb rows of f
// floats): for kernel heads the features in the query and key columns (the
// maps themselves are not kept: each feature map's derivative is a function
// of its value), the maps elsewhere.
void Maps(const Problem& p, int64_t seed, const int64_t* rows, int64_t tb, float* z);

// gw[i, :] += sum of the map-gradient rows gz[t, :] over the tb tokens t
// (table rows `rows`) that hold input i (the weight gradient x^T gz of 0/1
// tokens), in column groups of kGroup floats, so that the group's column
// of gz stays in L1 while every input's holders are summed.
void SparseWeightGrad(const Problem& p, const int64_t* rows, int64_t tb, const float* gz,
                      Scratch& sc, float* gw);

// ----------------------------------------------- token_kernel_attention.cc

// Readouts of the block's nq sequences into out (k per position). One call
// per block: the sequence loops inline into each instruction-set clone.
void BlockForward(const Problem& p, int64_t seed, const float* z, int64_t nq, Scratch& sc,
                  float* out);

// The map gradients of the block's nq sequences (positions t0 ..) into gz;
// adds the block's share of d loss / d inv_tau to *gt and, for the squared
// error, its loss to *loss.
void BlockBackward(const Problem& p, int64_t seed, const float* z, int64_t t0, int64_t nq,
                   const GradSource& src, Scratch& sc, float* gz, float* gt, double* loss);

}  // namespace ranksweep::trainer::token_kernel_internal

#endif  // RANKSWEEP_WORKER_TRAINER_TOKEN_KERNEL_INTERNAL_H_
