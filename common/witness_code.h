// The witness family's code (docs/WITNESS.md) and the checks a witness
// dataset must pass before it can be built: one function, called by the
// worker when it builds the dataset and by ValidateDataset, so that the
// coordinator refuses at submit (and `submit --dry-run` at once) exactly
// the specs the worker would fail, with the same message naming the field
// and its range. No Torch, no I/O.
//
// Thread-safety: safe from any thread (the code cache is locked).
#ifndef RANKSWEEP_COMMON_WITNESS_CODE_H_
#define RANKSWEEP_COMMON_WITNESS_CODE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"

namespace ranksweep {

// The low m bits set (all 64 for m >= 64).
inline uint64_t LowMask(int m) { return m >= 64 ? ~0ULL : ((1ULL << m) - 1); }

// The next word after v with v's popcount within `mask` (Gosper's hack); 0
// after the last one.
uint64_t NextSamePopcount(uint64_t v, uint64_t mask);

// The lexicographic greedy constant-weight code: scan the weight-`weight`
// words of {0,1}^m in increasing order of their packed value and keep each
// one whose overlap with every word kept so far is <= max_overlap. Stops
// after `limit` words when limit > 0. For (24, 8, 4) it yields the 759
// octads of the Steiner system S(5,8,24). The search stops after
// SpecLimits::kMaxWitnessCodeSteps steps (a word scanned or an overlap
// checked) and is then an InvalidArgument naming num_queries and the words
// it found, so that no spec holds a thread for long. Up to 64 results are
// cached. InvalidArgument naming the field when the scan is out of bounds.
// With `steps_left`, the steps the search takes to the words returned are
// also taken from it, an InvalidArgument when they are more than it holds:
// one budget for several searches (a sweep's recipes). A search is charged
// what it takes from scratch, whether or not a cached one answered it.
absl::StatusOr<std::vector<uint64_t>> GreedyConstantWeightCode(int m, int weight,
                                                               int max_overlap, int limit = 0,
                                                               uint64_t* steps_left = nullptr);

// The queries of the witness family of `spec` (kind witness): its code,
// after every check that needs it: seq_len 3, code_weight and max_overlap in
// range, num_queries 0 (all) or 2..the size of the code, at least two words,
// and a family of n(2n-1) <= SpecLimits::kMaxDatasetSequences sequences.
// InvalidArgument naming the field and its allowed range, e.g.
// "dataset.num_queries must be in 0..2 (the size of the code for m=6,
// code_weight=3, max_overlap=1), got 5".
// `steps_left` as for GreedyConstantWeightCode.
absl::StatusOr<std::vector<uint64_t>> WitnessQueries(const DatasetSpec& spec,
                                                     uint64_t* steps_left = nullptr);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_WITNESS_CODE_H_
