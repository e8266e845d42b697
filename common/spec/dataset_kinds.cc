#include "common/spec/dataset_kinds.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/spec/checks.h"
#include "common/witness_code.h"

namespace ranksweep {
namespace {

using spec_checks::CheckRange;
using spec_checks::CheckUnit;
using L = SpecLimits;

constexpr uint64_t kCountCap = uint64_t{1} << 62;

absl::Status RefuseFact(const std::string& field, const std::string& want, int64_t got) {
  return absl::InvalidArgumentError(
      absl::StrCat("result.facts.", field, " must be ", want, ", got ", got));
}

// C(n, k) as a double (exact far beyond the sizes used here).
double BinomialDouble(int n, int k) {
  if (k < 0 || k > n) return 0;
  double c = 1;
  for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return std::round(c);
}

bool NoTestSplit(const DatasetSpec&) { return false; }

// ---------------------------------------------------------------- exhaustive
// Every sequence of seq_len tokens of {0,1}^m.

absl::Status ValidateExhaustive(const DatasetSpec& d) {
  if (d.m * d.seq_len > L::kMaxExhaustiveBits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.m * dataset.seq_len must be in 1..", L::kMaxExhaustiveBits,
        " for an exhaustive dataset, got ", d.m, " * ", d.seq_len, " = ", d.m * d.seq_len));
  }
  return absl::OkStatus();
}

DatasetSize ExhaustiveSize(const DatasetSpec& d) {
  DatasetSize size;
  size.train = int64_t{1} << std::clamp(d.m * d.seq_len, 0, 62);
  return size;
}

absl::Status ExhaustiveFacts(const DatasetSpec& d, const DatasetFacts& f) {
  const int64_t all = int64_t{1} << (d.m * d.seq_len);  // m * seq_len <= 18
  if (f.train_sequences != all) {
    return RefuseFact("train_sequences",
                      absl::StrCat(all, " (exhaustive dataset, m=", d.m, ", seq_len=", d.seq_len,
                                   ")"),
                      f.train_sequences);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- witness
// The witness family of a constant-weight code (docs/WITNESS.md).

absl::Status ValidateWitness(const DatasetSpec& d) {
  RS_CHECK(CheckRange("dataset.code_weight", d.code_weight, 1, d.m));
  RS_CHECK(CheckRange("dataset.max_overlap", d.max_overlap, 0, d.code_weight - 1));
  RS_CHECK(CheckRange("dataset.num_queries", d.num_queries, 0, L::kMaxWitnessQueries));
  return absl::OkStatus();
}

absl::Status WitnessBuildable(const DatasetSpec& d, uint64_t* steps_left) {
  return WitnessQueries(d, steps_left).status();
}

DatasetSize WitnessSize(const DatasetSpec& d) {
  int64_t n = d.num_queries;
  if (n <= 0) {
    // Any two codewords share at most t coordinates, so each (t+1)-subset
    // of the m coordinates lies in at most one codeword.
    const double packing =
        std::floor(BinomialDouble(d.m, d.max_overlap + 1) /
                   std::max(1.0, BinomialDouble(d.code_weight, d.max_overlap + 1)));
    n = static_cast<int64_t>(std::min<double>(packing, L::kMaxWitnessQueries));
  }
  n = std::clamp<int64_t>(n, 0, L::kMaxWitnessQueries);
  DatasetSize size;
  size.train = n * (2 * n - 1);
  return size;
}

absl::Status WitnessFacts(const DatasetSpec& d, const DatasetFacts& f) {
  if (d.num_queries <= 0) return absl::OkStatus();  // the code decides n
  const int64_t n = d.num_queries;
  if (f.train_sequences != n * (2 * n - 1)) {
    return RefuseFact("train_sequences",
                      absl::StrCat(n * (2 * n - 1), " (a witness family of num_queries=", n,
                                   ": n(2n-1))"),
                      f.train_sequences);
  }
  // The queries c_i, and with every position scored the keys (the
  // complements of the c_j) too.
  const int64_t most = d.final_query_only ? n : 2 * n;
  if (f.distinct_queries > most) {
    return RefuseFact("distinct_queries",
                      d.final_query_only
                          ? absl::StrCat("at most num_queries (", n, ")")
                          : absl::StrCat("at most 2 * num_queries (", most,
                                         ": queries and keys are scored)"),
                      f.distinct_queries);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- pool
// Sequences drawn from a pool of distinct vectors, with an optional test
// split of held-out tokens or sequences.

std::string UniverseText(const DatasetSpec& d) {
  return d.weight > 0 ? absl::StrCat("C(", d.m, ",", d.weight, ") distinct vectors")
                      : absl::StrCat("2^", d.m, " distinct vectors");
}

// The pool's size, the sizes of what its splits draw from, and what they
// ask for: every range that needs no data (the builder adds none).
absl::Status ValidatePoolSize(const DatasetSpec& d) {
  const uint64_t universe = PoolUniverse(d);
  if (d.pool_size == 0) {
    if (universe > static_cast<uint64_t>(L::kMaxEnumeratedVectors)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset.pool_size 0 (every vector) needs at most ", L::kMaxEnumeratedVectors,
          " vectors to enumerate; m=", d.m, " has ", universe, " (", UniverseText(d),
          "): give pool_size in 2..", std::min<uint64_t>(universe, L::kMaxDatasetSequences)));
    }
  } else if (d.pool_size < 2 || static_cast<uint64_t>(d.pool_size) > universe ||
             d.pool_size > L::kMaxDatasetSequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.pool_size must be 0 (every vector) or in 2..",
        std::min<uint64_t>(universe, L::kMaxDatasetSequences), " (", UniverseText(d),
        "), got ", d.pool_size));
  }
  const int64_t pool = PoolVectors(d);
  if (pool < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.weight ", d.weight, " gives ", pool, " distinct vector(s) for m=", d.m,
        "; a pool needs >= 2"));
  }
  if (d.split == PoolSplit::kTokens) {
    const int64_t test_pool = std::llround(pool * d.test_pool_share);
    const int64_t train_pool = pool - test_pool;
    if (train_pool < 1 || (d.test_size > 0 && test_pool < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset.test_pool_share must leave >= 1 vector in each used pool: pool of ", pool,
          " splits into ", train_pool, " train and ", test_pool, " test"));
    }
    return absl::OkStatus();
  }
  const uint64_t sequences = PoolSequenceCount(d);
  if (sequences <= static_cast<uint64_t>(L::kMaxEnumeratedSequences) &&
      static_cast<uint64_t>(d.train_size) + d.test_size > sequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.train_size + dataset.test_size must be in 1..", sequences,
        " (the distinct sequences of ", d.seq_len, " tokens from ", pool,
        " vectors) with split sequences, got ", d.train_size, " + ", d.test_size, " = ",
        static_cast<int64_t>(d.train_size) + d.test_size));
  }
  return absl::OkStatus();
}

absl::Status ValidatePool(const DatasetSpec& d) {
  if (d.split != PoolSplit::kTokens && d.split != PoolSplit::kSequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.split must be one of tokens, sequences; got value ", static_cast<int>(d.split)));
  }
  RS_CHECK(CheckRange("dataset.weight", d.weight, 0, d.m));
  if (d.weight == 0) RS_CHECK(CheckUnit("dataset.bernoulli_p", d.bernoulli_p, true, false));
  RS_CHECK(CheckUnit("dataset.test_pool_share", d.test_pool_share, false, true));
  RS_CHECK(CheckRange("dataset.train_size", d.train_size, 1, L::kMaxDatasetSequences));
  RS_CHECK(CheckRange("dataset.test_size", d.test_size, 0, L::kMaxDatasetSequences));
  RS_CHECK(CheckUnit("dataset.hard_share", d.hard_share, false, false));
  return ValidatePoolSize(d);
}

DatasetSize PoolSize(const DatasetSpec& d) {
  DatasetSize size;
  size.train = std::max(d.train_size, 0);
  size.test = std::max(d.test_size, 0);
  return size;
}

bool PoolHasTestSplit(const DatasetSpec& d) { return d.test_size > 0; }

absl::Status PoolFacts(const DatasetSpec& d, const DatasetFacts& f) {
  // Either split builds exactly train_size and test_size sequences.
  if (f.train_sequences != d.train_size) {
    return RefuseFact("train_sequences",
                      absl::StrCat("the task's train_size (", d.train_size, ")"),
                      f.train_sequences);
  }
  if (f.test_sequences != d.test_size) {
    return RefuseFact("test_sequences",
                      d.test_size == 0
                          ? std::string("0 (the task's pool dataset has no test split)")
                          : absl::StrCat("the task's test_size (", d.test_size, ")"),
                      f.test_sequences);
  }
  return absl::OkStatus();
}

double PoolMemoryBytes(const DatasetSpec& d) {
  // The pool (64 bytes a vector while it is drawn) and, when split
  // sequences enumerates the pool's sequences, 4 bytes an index.
  double bytes = 64.0 * static_cast<double>(PoolVectors(d));
  const uint64_t sequences = PoolSequenceCount(d);
  if (d.split == PoolSplit::kSequences &&
      sequences <= static_cast<uint64_t>(L::kMaxEnumeratedSequences)) {
    bytes += 4.0 * static_cast<double>(sequences);
  }
  return bytes;
}

}  // namespace

uint64_t PoolUniverse(const DatasetSpec& d) {
  if (d.weight > 0) return Binomial(d.m, d.weight, kCountCap);
  return d.m >= 62 ? kCountCap : uint64_t{1} << d.m;
}

int64_t PoolVectors(const DatasetSpec& d) {
  if (d.pool_size > 0) return d.pool_size;
  return static_cast<int64_t>(std::min<uint64_t>(PoolUniverse(d), kCountCap));
}

uint64_t PoolSequenceCount(const DatasetSpec& d) {
  const uint64_t pool = static_cast<uint64_t>(std::max<int64_t>(PoolVectors(d), 0));
  uint64_t count = 1;
  for (int i = 0; i < d.seq_len; ++i) {
    if (pool != 0 && count > kCountCap / pool) return kCountCap;
    count *= pool;
  }
  return count;
}

const std::vector<DatasetKindRow>& DatasetKinds() {
  static const std::vector<DatasetKindRow>* rows = new std::vector<DatasetKindRow>{
      {DatasetKind::kExhaustive, "exhaustive", ValidateExhaustive, nullptr, ExhaustiveSize,
       NoTestSplit, /*has_rank_bounds=*/false, ExhaustiveFacts, nullptr, {},
       "--m or --seq-len"},
      {DatasetKind::kWitness, "witness", ValidateWitness, WitnessBuildable, WitnessSize,
       NoTestSplit, /*has_rank_bounds=*/true, WitnessFacts, nullptr,
       {"code_weight", "max_overlap", "num_queries"}, "--num-queries (or --m)"},
      {DatasetKind::kPool, "pool", ValidatePool, nullptr, PoolSize, PoolHasTestSplit,
       /*has_rank_bounds=*/false, PoolFacts, PoolMemoryBytes,
       {"weight", "bernoulli_p", "pool_size", "test_pool_share", "train_size", "test_size",
        "hard_share", "split"},
       "--train-size and --test-size"},
  };
  return *rows;
}

const DatasetKindRow* FindDatasetKind(DatasetKind kind) {
  for (const DatasetKindRow& row : DatasetKinds()) {
    if (row.kind == kind) return &row;
  }
  return nullptr;
}

bool DatasetKindHasField(DatasetKind kind, const std::string& field) {
  const DatasetKindRow* row = FindDatasetKind(kind);
  return row != nullptr && std::find(row->fields.begin(), row->fields.end(), field) !=
                               row->fields.end();
}

}  // namespace ranksweep
