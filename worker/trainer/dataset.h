// Min-IP datasets as plain host data (no Torch): the exhaustive set, the
// witness family built from a constant-weight code, and disjoint train/test
// pools. Each is deterministic from its DatasetSpec (including data_seed)
// and reports its facts (sizes, distinct queries, witness rank bounds).
//
// Tokens are m-bit vectors packed into uint64_t (bit k = coordinate k), so
// m <= 64. The derivation of the witness family and its rank bound is in
// docs/WITNESS.md.
//
// Thread-safety: pure functions of their arguments; the code cache used by
// the witness family is guarded internally.
#ifndef RANKSWEEP_WORKER_TRAINER_DATASET_H_
#define RANKSWEEP_WORKER_TRAINER_DATASET_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"

namespace ranksweep::trainer {

// <a, b> for packed Boolean vectors.
inline int InnerProduct(uint64_t a, uint64_t b) { return __builtin_popcountll(a & b); }

// t_i = min_j <x_i, x_j> for every position of one sequence of length n.
void MinIpTargets(const uint64_t* seq, int n, int32_t* targets);

// One split: `size` sequences of `seq_len` tokens, row-major, with the
// Min-IP target of every position (scored or not).
struct Split {
  int64_t size = 0;
  std::vector<uint64_t> tokens;
  std::vector<int32_t> targets;
};

struct Dataset {
  int m = 0;
  int seq_len = 0;
  // Which positions count for loss and metrics: all, or only the last one.
  bool final_query_only = false;
  Split train;
  Split test;  // size 0 when the dataset has no test split
  DatasetFacts facts;
};

// Builds the dataset of `spec`. Checks the dataset-dependent limits that the
// static ValidateDataset cannot (pool big enough for the requested vectors,
// witness code big enough for the requested queries, ...): InvalidArgument
// naming the field and the allowed range. Runs ValidateDataset first.
absl::StatusOr<Dataset> BuildDataset(const DatasetSpec& spec);

// The lexicographic greedy constant-weight code: scan the weight-`weight`
// words of {0,1}^m in increasing order of their packed value and keep each
// one whose overlap with every word kept so far is <= max_overlap. Stops
// after `limit` words when limit > 0. For (24, 8, 4) it yields the 759
// octads of the Steiner system S(5,8,24). Results are cached per argument.
absl::StatusOr<std::vector<uint64_t>> GreedyConstantWeightCode(int m, int weight,
                                                               int max_overlap, int limit = 0);

// The witness family's rank lower bound (docs/WITNESS.md): the smallest
// integer strictly above n^2 / (n + sum_{i != j} eps_ij^2), where
// eps_ij = 1 / (g_ij - 1) and g_ij = w - <c_i, c_j> is the gap between
// query i's own key and key j. `bound` receives the real-valued quotient.
int64_t WitnessRankLowerBound(const std::vector<uint64_t>& queries, int weight,
                              double* bound = nullptr);

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_DATASET_H_
