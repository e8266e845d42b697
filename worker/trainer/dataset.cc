#include "worker/trainer/dataset.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/spec/dataset_kinds.h"
#include "common/status_macros.h"
#include "common/witness_code.h"
#include "worker/trainer/rng.h"

namespace ranksweep::trainer {
namespace {

void AppendSequence(const std::vector<uint64_t>& seq, Split& split) {
  const int n = static_cast<int>(seq.size());
  split.tokens.insert(split.tokens.end(), seq.begin(), seq.end());
  split.targets.resize(split.targets.size() + n);
  MinIpTargets(seq.data(), n, split.targets.data() + split.targets.size() - n);
  ++split.size;
}

int64_t DistinctScoredQueries(const Dataset& d) {
  std::unordered_set<uint64_t> seen;
  for (int64_t s = 0; s < d.train.size; ++s) {
    for (int i = d.final_query_only ? d.seq_len - 1 : 0; i < d.seq_len; ++i) {
      seen.insert(d.train.tokens[s * d.seq_len + i]);
    }
  }
  return static_cast<int64_t>(seen.size());
}

absl::Status BuildExhaustive(const DatasetSpec& spec, Dataset& d) {
  const int bits = spec.m * spec.seq_len;  // <= 18 by ValidateDataset
  const uint64_t mask = LowMask(spec.m);
  const uint64_t count = 1ULL << bits;
  d.train.tokens.reserve(count * spec.seq_len);
  d.train.targets.reserve(count * spec.seq_len);
  std::vector<uint64_t> seq(spec.seq_len);
  for (uint64_t s = 0; s < count; ++s) {
    for (int i = 0; i < spec.seq_len; ++i) seq[i] = (s >> (i * spec.m)) & mask;
    AppendSequence(seq, d.train);
  }
  return absl::OkStatus();
}

// docs/WITNESS.md: queries c_i, keys k_j = complement of c_j, every sequence
// has its query last (so the final-query formulation scores it):
//   (k_i, k_i, c_i)                      own probe, target 0
//   (k_j, k_j, c_i)          j != i      other probe, target w - <c_i, c_j>
//   (k_i, k_j, c_i) or (k_j, k_i, c_i)   candidate pair, target 0, gap w - <c_i, c_j>
absl::Status BuildWitness(const DatasetSpec& spec, Dataset& d) {
  // The checks the coordinator also runs at submit (common/witness_code.h).
  ASSIGN_OR_RETURN(const std::vector<uint64_t> code, WitnessQueries(spec));
  const int n = static_cast<int>(code.size());
  const int64_t size = static_cast<int64_t>(n) * (2 * n - 1);
  const uint64_t mask = LowMask(spec.m);
  Rng rng = Rng::ForStream(spec.data_seed, kStreamData);
  d.train.tokens.reserve(size * 3);
  d.train.targets.reserve(size * 3);
  for (int i = 0; i < n; ++i) {
    const uint64_t query = code[i];
    const uint64_t own_key = ~code[i] & mask;
    AppendSequence({own_key, own_key, query}, d.train);
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      const uint64_t key = ~code[j] & mask;
      AppendSequence({key, key, query}, d.train);
      if (rng.Below(2) == 0) {
        AppendSequence({own_key, key, query}, d.train);
      } else {
        AppendSequence({key, own_key, query}, d.train);
      }
    }
  }
  double bound = 0;
  d.facts.rank_lower_bound = WitnessRankLowerBound(code, spec.code_weight, &bound);
  return absl::OkStatus();
}

// True when a sequence of n >= 3 tokens is a hard triple: its first two
// tokens' overlaps with the query (the last token) are one apart.
bool IsHard(const uint64_t* seq, int n) {
  if (n < 3) return false;
  const uint64_t query = seq[n - 1];
  return std::abs(InnerProduct(query, seq[0]) - InnerProduct(query, seq[1])) == 1;
}

// The pool's vectors, shuffled with `rng`: every vector of the universe when
// pool_size is 0, else pool_size distinct ones. The ranges were checked by
// ValidateDataset (PoolUniverse, kMaxEnumeratedVectors).
absl::StatusOr<std::vector<uint64_t>> DrawPool(const DatasetSpec& spec, Rng& rng) {
  const bool constant_weight = spec.weight > 0;
  const uint64_t universe = PoolUniverse(spec);
  const uint64_t mask = LowMask(spec.m);
  const int64_t size = PoolVectors(spec);
  std::vector<uint64_t> pool;
  pool.reserve(size);
  if (spec.pool_size == 0 || (constant_weight && universe <= (1ULL << 20))) {
    // Every vector, or a small universe: enumerate it, shuffle, take the
    // first `size` (a uniform random subset).
    std::vector<uint64_t> all;
    all.reserve(universe);
    if (constant_weight) {
      for (uint64_t v = LowMask(spec.weight); v != 0; v = NextSamePopcount(v, mask)) {
        all.push_back(v);
      }
    } else {
      for (uint64_t v = 0; v < universe; ++v) all.push_back(v);
    }
    rng.Shuffle(all);
    pool.assign(all.begin(), all.begin() + size);
    return pool;
  }
  std::unordered_set<uint64_t> seen;
  std::vector<int> coords(spec.m);
  const int64_t max_attempts = 1000LL * size + 100000;
  for (int64_t attempt = 0; static_cast<int64_t>(pool.size()) < size; ++attempt) {
    if (attempt >= max_attempts) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset.pool_size: could not draw ", size, " distinct vectors in ", max_attempts,
          " attempts; use a smaller pool_size"));
    }
    uint64_t v = 0;
    if (constant_weight) {
      for (int k = 0; k < spec.m; ++k) coords[k] = k;
      for (int k = 0; k < spec.weight; ++k) {
        std::swap(coords[k], coords[k + rng.Below(spec.m - k)]);
        v |= 1ULL << coords[k];
      }
    } else {
      for (int k = 0; k < spec.m; ++k) {
        if (rng.Uniform() < spec.bernoulli_p) v |= 1ULL << k;
      }
    }
    if (seen.insert(v).second) pool.push_back(v);
  }
  return pool;
}

// One sequence drawn with replacement from `vecs`; with `hard`, the second
// candidate is redrawn (up to 256 times) until its overlap with the query
// is one apart from the first candidate's.
void DrawSequence(const std::vector<uint64_t>& vecs, bool hard, Rng& rng,
                  std::vector<uint64_t>& seq) {
  const int n = static_cast<int>(seq.size());
  for (int i = 0; i < n; ++i) seq[i] = vecs[rng.Below(vecs.size())];
  if (!hard) return;
  const uint64_t query = seq[n - 1];
  const int oy = InnerProduct(query, seq[0]);
  for (int attempt = 0; attempt < 256; ++attempt) {
    const uint64_t z = vecs[rng.Below(vecs.size())];
    if (std::abs(InnerProduct(query, z) - oy) == 1) {
      seq[1] = z;
      break;
    }
  }
}

int64_t HardCount(int64_t count, const DatasetSpec& spec) {
  return spec.seq_len >= 3 ? std::llround(count * spec.hard_share) : 0;
}

// split sequences over an enumerable pool: sequence k is the tuple of pool
// indices given by k's base-|vecs| digits (position i = digit i). The hard
// and the other sequences are shuffled apart; each split takes its hard
// share from the hard ones and the rest from the others (from the other
// list when one runs out), so train and test are disjoint samples without
// replacement. Each split's order is shuffled.
void EnumeratedSequenceSplits(const DatasetSpec& spec, const std::vector<uint64_t>& vecs,
                              Rng& rng, Dataset& d) {
  const int n = spec.seq_len;
  const uint64_t p = vecs.size();
  const uint64_t total = PoolSequenceCount(spec);  // <= kMaxEnumeratedSequences
  std::vector<uint64_t> seq(n);
  auto decode = [&](uint32_t k) {
    uint64_t rest = k;
    for (int i = 0; i < n; ++i) {
      seq[i] = vecs[rest % p];
      rest /= p;
    }
  };
  std::vector<uint32_t> hard, easy;
  for (uint64_t k = 0; k < total; ++k) {
    decode(static_cast<uint32_t>(k));
    (IsHard(seq.data(), n) ? hard : easy).push_back(static_cast<uint32_t>(k));
  }
  rng.Shuffle(hard);
  rng.Shuffle(easy);
  size_t next_hard = 0, next_easy = 0;
  auto take = [&](int64_t count, Split& split) {
    const int64_t want_hard = HardCount(count, spec);
    std::vector<uint32_t> chosen;
    chosen.reserve(count);
    for (int64_t s = 0; s < count; ++s) {
      const bool from_hard =
          (s < want_hard && next_hard < hard.size()) || next_easy >= easy.size();
      chosen.push_back(from_hard ? hard[next_hard++] : easy[next_easy++]);
    }
    rng.Shuffle(chosen);
    for (uint32_t k : chosen) {
      decode(k);
      AppendSequence(seq, split);
    }
  };
  take(spec.train_size, d.train);
  take(spec.test_size, d.test);
}

// split sequences over a pool too large to enumerate: train sequences with
// replacement (the first hard share of them hard), then test sequences
// likewise, each redrawn while it equals a training sequence.
absl::Status SampledSequenceSplits(const DatasetSpec& spec, const std::vector<uint64_t>& vecs,
                                   Rng& rng, Dataset& d) {
  const int n = spec.seq_len;
  std::vector<uint64_t> seq(n);
  auto key = [&] { return std::string(reinterpret_cast<const char*>(seq.data()), 8 * n); };
  std::unordered_set<std::string> train;
  const int64_t train_hard = HardCount(spec.train_size, spec);
  for (int64_t s = 0; s < spec.train_size; ++s) {
    DrawSequence(vecs, s < train_hard, rng, seq);
    train.insert(key());
    AppendSequence(seq, d.train);
  }
  const int64_t test_hard = HardCount(spec.test_size, spec);
  const int64_t max_attempts = 100LL * spec.test_size + 10000;
  int64_t attempts = 0;
  for (int64_t s = 0; s < spec.test_size; ++s) {
    do {
      if (++attempts > max_attempts) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dataset.test_size: could not draw ", spec.test_size,
            " test sequences unequal to every training sequence in ", max_attempts,
            " attempts; use a smaller train_size or test_size, or a larger pool"));
      }
      DrawSequence(vecs, s < test_hard, rng, seq);
    } while (train.count(key()) != 0);
    AppendSequence(seq, d.test);
  }
  return absl::OkStatus();
}

absl::Status BuildPool(const DatasetSpec& spec, Dataset& d) {
  Rng rng = Rng::ForStream(spec.data_seed, kStreamData);
  ASSIGN_OR_RETURN(std::vector<uint64_t> pool, DrawPool(spec, rng));
  if (spec.split == PoolSplit::kSequences) {
    if (PoolSequenceCount(spec) <= static_cast<uint64_t>(SpecLimits::kMaxEnumeratedSequences)) {
      EnumeratedSequenceSplits(spec, pool, rng, d);
      return absl::OkStatus();
    }
    return SampledSequenceSplits(spec, pool, rng, d);
  }
  // split tokens: the pool's first round(size * test_pool_share) vectors
  // are the test pool, the rest the train pool (sizes checked by
  // ValidateDataset); each split's sequences stay inside their own pool.
  const int64_t test_pool = std::llround(pool.size() * spec.test_pool_share);
  const std::vector<uint64_t> test_vectors(pool.begin(), pool.begin() + test_pool);
  const std::vector<uint64_t> train_vectors(pool.begin() + test_pool, pool.end());
  auto build = [&](const std::vector<uint64_t>& vecs, int64_t count, Split& split) {
    const int64_t hard = HardCount(count, spec);
    std::vector<uint64_t> seq(spec.seq_len);
    for (int64_t s = 0; s < count; ++s) {
      DrawSequence(vecs, s < hard, rng, seq);
      AppendSequence(seq, split);
    }
  };
  build(train_vectors, spec.train_size, d.train);
  build(test_vectors, spec.test_size, d.test);
  return absl::OkStatus();
}

}  // namespace

void MinIpTargets(const uint64_t* seq, int n, int32_t* targets) {
  for (int i = 0; i < n; ++i) {
    int best = InnerProduct(seq[i], seq[i]);
    for (int j = 0; j < n; ++j) best = std::min(best, InnerProduct(seq[i], seq[j]));
    targets[i] = best;
  }
}

// The code lives with the coordinator's checks (common/witness_code.h).
absl::StatusOr<std::vector<uint64_t>> GreedyConstantWeightCode(int m, int weight,
                                                               int max_overlap, int limit) {
  return ::ranksweep::GreedyConstantWeightCode(m, weight, max_overlap, limit);
}

int64_t WitnessRankLowerBound(const std::vector<uint64_t>& queries, int weight, double* bound) {
  const int n = static_cast<int>(queries.size());
  if (n <= 1) {
    if (bound) *bound = n;
    return n;
  }
  double sum_eps2 = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const int gap = weight - InnerProduct(queries[i], queries[j]);
      const double eps = 1.0 / (gap - 1);
      sum_eps2 += eps * eps;
    }
  }
  const double q = static_cast<double>(n) * n / (n + sum_eps2);
  if (bound) *bound = q;
  // The lemma's inequality is strict (|B_ij| < eps_ij), so rank > q.
  return std::min<int64_t>(n, static_cast<int64_t>(std::floor(q)) + 1);
}

absl::StatusOr<Dataset> BuildDataset(const DatasetSpec& spec) {
  // Static ranges (m, seq_len, exhaustive m*N, shares, sizes) live in the
  // shared validator; this file adds only what needs the data itself.
  RETURN_IF_ERROR(ValidateDataset(spec));
  Dataset d;
  d.m = spec.m;
  d.seq_len = spec.seq_len;
  d.final_query_only = spec.final_query_only;
  // How each kind is built; what the spec side knows of it is its row in
  // common/spec/dataset_kinds.h. ValidateDataset refused any other kind.
  struct Builder {
    DatasetKind kind;
    absl::Status (*build)(const DatasetSpec& spec, Dataset& d);
  };
  static constexpr Builder kBuilders[] = {
      {DatasetKind::kExhaustive, BuildExhaustive},
      {DatasetKind::kWitness, BuildWitness},
      {DatasetKind::kPool, BuildPool},
  };
  absl::Status status = absl::InvalidArgumentError(
      absl::StrCat("dataset.kind \"", Name(spec.kind), "\" has no builder in the trainer"));
  for (const Builder& b : kBuilders) {
    if (b.kind == spec.kind) status = b.build(spec, d);
  }
  if (!status.ok()) return status;
  d.facts.train_sequences = d.train.size;
  d.facts.test_sequences = d.test.size;
  d.facts.distinct_queries = DistinctScoredQueries(d);
  const DatasetKindRow* kind = FindDatasetKind(spec.kind);
  if (kind != nullptr && kind->has_rank_bounds) {
    d.facts.rank_upper_bound = d.facts.distinct_queries;
  }
  return d;
}

}  // namespace ranksweep::trainer
