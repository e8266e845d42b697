// The result schema on the server: the columns of `results` by name, how a
// SeedResult is bound to them and read back, the packed copy of a row
// (result_packs), and the running aggregates of result_groups. The write
// path (coordinator.cc), the read path (result_queries.cc) and the
// quarantine use these; nothing else spells a result column.
//
// Errors: store errors as they come. Thread-safety: stateless functions
// that run inside the caller's transaction on the caller's connection.
#ifndef RANKSWEEP_SERVER_CORE_RESULTS_RESULT_SCHEMA_H_
#define RANKSWEEP_SERVER_CORE_RESULTS_RESULT_SCHEMA_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/spec/curve.h"
#include "common/spec/result_metrics.h"
#include "common/spec/spec.h"
#include "server/core/results/statistics.h"
#include "server/core/store.h"
#include "server/core/types.h"

namespace ranksweep::server {

// Seeds are uint64 in the spec and INTEGER (int64) in SQLite: stored bit for bit.
inline int64_t SeedToDb(uint64_t seed) { return static_cast<int64_t>(seed); }
inline uint64_t SeedFromDb(int64_t v) { return static_cast<uint64_t>(v); }

// "kernel/elu1 r=8 seed=2" (no "r=" for rank 0), followed by the recipe's
// label when the sweep has axes ("kernel/elu1 r=8 seed=2 lr=0.003"): how
// events and failures name a cell.
std::string CellLabel(const SweepSpec& spec, int head_index, int rank, int recipe,
                      uint64_t seed);

// A result's fields as columns of `results` (schema version 3; the
// optional metrics each from the migration that added it), in the
// order BindResultColumns and ReadResultColumns use. The seed has its own
// column, shared with the cell.
struct ResultCol {
  enum : int {
    // The built-in metrics, one column each, in the order of
    // kBuiltInMetrics (common/spec/result_metrics.h): the one named N is
    // column kBuiltInFirst + BuiltInMetricIndex(N).
    kBuiltInFirst,
    kDevice = kBuiltInFirst + kBuiltInMetricCount,
    kFactsTrainSequences,
    kFactsTestSequences,
    kFactsDistinctQueries,
    kFactsRankLowerBound,
    kFactsRankUpperBound,
    // The optional metrics, one column each (NULL: missing), in the order
    // of kResultMetrics (common/spec/result_metrics.h).
    kMetricsFirst,
    kCount = kMetricsFirst + kResultMetricCount
  };
};

// The ResultCol columns as SQL: "train_sequences, ..., facts_rank_upper_bound".
const std::string& ResultColumns();

// Binds `r` to the ResultCol columns of an INSERT whose parameter for the
// first result column is ?`first`. test_error is NULL when there is no
// test split (sequences == 0), so that aggregates over it skip such rows;
// ReadResultColumns reads it back as the default, 1.
void BindResultColumns(Statement& st, int first, const SeedResult& r);

// Reads the ResultCol columns of `st`'s row, the first at index `first`.
void ReadResultColumns(const Statement& st, int first, SeedResult* r);

// InsertResultSql's parameters after the twelve it names (parameters
// 1..12): the result columns, generated from ResultCol, numbered from
// ?kInsertResultFirst on, then the task key and the recipe.
constexpr int kInsertResultFirst = 13;
constexpr int kInsertTaskKey = kInsertResultFirst + ResultCol::kCount;
constexpr int kInsertRecipe = kInsertTaskKey + 1;
// The learning curve (EncodeCurve), NULL when the result has none.
constexpr int kInsertCurve = kInsertRecipe + 1;

// INSERT of a DONE result row: :cell_id, :sweep_id, :head, :rank, :seed,
// :lease_id, :attempt, :worker_id, :build_id, :torch_version,
// :cuda_version and :finished_ms, then the result columns, the task key and
// the recipe as above.
const std::string& InsertResultSql();

// Writes the packed copy (server/core/results/packed_row.h) of a result row just
// written to `results`, replacing the cell's earlier one.
// Binds `curve` (EncodeCurve) to the INSERT's ?kInsertCurve: NULL for an
// empty curve.
void BindCurve(Statement& st, const Curve& curve);

// The learning curve of a result of cell `source_cell_id` (a cached row's
// source, else the row's own cell); an empty curve when none is stored.
absl::StatusOr<Curve> ReadCurve(Connection& c, int64_t source_cell_id);

absl::Status InsertPack(Connection& c, int64_t cell_id, const std::string& sweep_id,
                        const ResultRow& row);

// The row of a cell that ended without a result, `state` kFailed (its last
// attempt used) or kPruned (its recipe pruned), and its packed copy: who
// held it (`worker_id`, empty for a pending cell), under which lease, with
// `reason` as the failure, finished at `now_ms`.
absl::Status RecordEndedResult(Connection& c, CellState state, int64_t cell_id,
                               const std::string& sweep_id, int head_index, int rank,
                               int recipe, uint64_t seed, int attempt, int64_t lease_id,
                               const std::string& worker_id, const std::string& reason,
                               int64_t now_ms);

// A packed result row with its cell id (result_packs, schema 6).
struct PackedCol {
  enum : int { kCellId, kPacked, kCount };
};

// A sweep's cells counted per state.
struct StateCountCol {
  enum : int { kState, kCells, kCount };
};

// "SELECT state, COUNT(*) FROM cells WHERE sweep_id = :sweep_id GROUP BY state".
const std::string& StateCountSql();

// One row of result_groups.
struct GroupStats {
  // Done cells, those with train error 0, those with a test split, and
  // those with test error 0.
  int64_t n = 0, exact_seeds = 0, test_n = 0, test_exact_seeds = 0;
  // Per grouped built-in metric (kGroupedBuiltIns order), over the done
  // cells that have it (n; a test-split metric's: test_n), in the
  // result_groups columns of its prefix (BuiltInMetric::group_columns).
  std::array<RunningStats, kGroupedBuiltInCount> built_ins{};
  // Done cells trained (not copied from the cache), their summed wall
  // seconds, and done cells copied from the cache (schema 7).
  int64_t trained_n = 0, cached_n = 0;
  double trained_seconds = 0;
  // Per optional metric (kResultMetrics order): over the done cells that
  // have it, in its GroupMetricColumns, which EnsureMetricColumns adds
  // (server/core/metric_columns.h).
  std::vector<RunningStats> metrics = std::vector<RunningStats>(kResultMetricCount);
};

// The columns of result_groups after its key, as SQL, in the order
// ReadGroupStats reads them.
const std::string& GroupColumns();

// Reads a GroupStats from `st`'s row, its GroupColumns from index `first`.
GroupStats ReadGroupStats(const Statement& st, int first);

// Adds one done cell's result to its group's running aggregates. Called in
// the transaction that stores the result, for every DONE result row
// (trained or copied from the cache, `cached`); DONE rows are never
// removed or changed (but by a quarantine, which rebuilds the group), so
// the aggregates stay equal to those of the rows.
// A group is one (head, rank, recipe).
absl::Status AddToResultGroup(Connection& c, const std::string& sweep_id, int head_index,
                              int rank, int recipe, const SeedResult& r, bool cached);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_RESULTS_RESULT_SCHEMA_H_
