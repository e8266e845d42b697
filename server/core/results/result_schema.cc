#include "server/core/results/result_schema.h"

#include <iterator>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/core/results/packed_row.h"
#include "server/core/results/result_blocks.h"
#include "server/core/schema.h"
#include "server/core/sql_columns.h"
#include "server/core/sweeps/cell_plan.h"
#include "server/core/workers/worker_registry.h"

namespace ranksweep::server {
namespace {

// The columns after the built-in metrics'.
constexpr const char* kResultColumnNames[] = {
    "device", "facts_train_sequences", "facts_test_sequences", "facts_distinct_queries",
    "facts_rank_lower_bound", "facts_rank_upper_bound"};

// A metric's value into `column`: NULL where not measured (test_error
// without a test split), so that aggregates over the column skip the row.
void BindMetric(Statement& st, int column, const std::optional<double>& v, bool integer) {
  if (!v.has_value()) {
    st.BindNull(column);
  } else if (integer) {
    st.Bind(column, static_cast<int64_t>(*v));
  } else {
    st.Bind(column, *v);
  }
}

}  // namespace

std::string CellLabel(const SweepSpec& spec, int head_index, int rank, int recipe,
                      uint64_t seed) {
  std::string head = head_index >= 0 && head_index < static_cast<int>(spec.heads.size())
                         ? HeadLabel(spec.heads[head_index])
                         : absl::StrCat("head#", head_index);
  std::string label = rank > 0 ? absl::StrFormat("%s r=%d seed=%d", head, rank, seed)
                               : absl::StrFormat("%s seed=%d", head, seed);
  if (!spec.axes.empty() && recipe >= 0 && recipe < RecipeCount(spec)) {
    absl::StrAppend(&label, " ", RecipeLabel(spec, recipe));
  }
  return label;
}

const std::string& ResultColumns() {
  static const std::string* columns = [] {
    auto* list = new std::string();
    for (const BuiltInMetric& m : kBuiltInMetrics) absl::StrAppend(list, m.name, ", ");
    absl::StrAppend(list,
                    ColumnList<ResultCol::kMetricsFirst - ResultCol::kDevice>(kResultColumnNames));
    for (const ResultMetric& m : kResultMetrics) absl::StrAppend(list, ", ", m.name);
    return list;
  }();
  return *columns;
}

const std::string& StateCountSql() {
  static const std::string* sql = NewSelect<StateCountCol::kCount>(
      {"state", "COUNT(*)"}, "FROM cells WHERE sweep_id = :sweep_id GROUP BY state");
  return *sql;
}

const std::string& InsertResultSql() {
  static const std::string* sql = [] {
    std::string values =
        absl::StrCat(":cell_id, :sweep_id, :head, :rank, :seed, ", kCellDone,
                     ", :lease_id, :attempt, :worker_id, :build_id, :torch_version, "
                     ":cuda_version, :finished_ms");
    for (int i = kInsertResultFirst; i <= kInsertCurve; ++i) {
      absl::StrAppend(&values, ", ?", i);
    }
    return new std::string(absl::StrCat(
        "INSERT INTO results (cell_id, sweep_id, head_index, rank, seed, state, lease_id, "
        "attempt, worker_id, worker_build_id, worker_torch_version, worker_cuda_version, "
        "finished_ms, ",
        ResultColumns(), ", task_key, recipe, curve) VALUES (", values, ")"));
  }();
  return *sql;
}

void BindCurve(Statement& st, const Curve& curve) {
  if (curve.points.empty()) {
    st.BindNull(kInsertCurve);
  } else {
    st.BindBlob(kInsertCurve, EncodeCurve(curve));
  }
}

absl::StatusOr<Curve> ReadCurve(Connection& c, int64_t source_cell_id) {
  ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT curve FROM results WHERE cell_id = :cell_id"));
  q.Bind(":cell_id", source_cell_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row || q.ColumnIsNull(0)) return Curve();
  const std::string_view bytes = q.ColumnBlob(0);
  return DecodeCurve(absl::string_view(bytes.data(), bytes.size()));
}

void BindResultColumns(Statement& st, int first, const SeedResult& r) {
  using C = ResultCol;
  for (int k = 0; k < kBuiltInMetricCount; ++k) {
    const BuiltInMetric& m = kBuiltInMetrics[k];
    BindMetric(st, first + C::kBuiltInFirst + k, BuiltInValue(m, r), m.integer);
  }
  st.Bind(first + C::kDevice, r.device);
  st.Bind(first + C::kFactsTrainSequences, r.facts.train_sequences);
  st.Bind(first + C::kFactsTestSequences, r.facts.test_sequences);
  st.Bind(first + C::kFactsDistinctQueries, r.facts.distinct_queries);
  st.Bind(first + C::kFactsRankLowerBound, r.facts.rank_lower_bound);
  st.Bind(first + C::kFactsRankUpperBound, r.facts.rank_upper_bound);
  for (int k = 0; k < kResultMetricCount; ++k) {
    const ResultMetric& m = kResultMetrics[k];
    BindMetric(st, first + C::kMetricsFirst + k, GetMetric(m, r), m.integer);
  }
}

void ReadResultColumns(const Statement& st, int first, SeedResult* r) {
  using C = ResultCol;
  for (int k = 0; k < kBuiltInMetricCount; ++k) {
    const BuiltInMetric& m = kBuiltInMetrics[k];
    const int column = first + C::kBuiltInFirst + k;
    if (st.ColumnIsNull(column)) {
      m.set(*r, BuiltInDefault(m));
    } else if (m.integer) {
      m.set(*r, static_cast<double>(st.ColumnInt(column)));
    } else {
      m.set(*r, st.ColumnDouble(column));
    }
  }
  r->device = st.ColumnText(first + C::kDevice);
  r->facts.train_sequences = st.ColumnInt(first + C::kFactsTrainSequences);
  r->facts.test_sequences = st.ColumnInt(first + C::kFactsTestSequences);
  r->facts.distinct_queries = st.ColumnInt(first + C::kFactsDistinctQueries);
  r->facts.rank_lower_bound = st.ColumnInt(first + C::kFactsRankLowerBound);
  r->facts.rank_upper_bound = st.ColumnInt(first + C::kFactsRankUpperBound);
  for (int k = 0; k < kResultMetricCount; ++k) {
    const ResultMetric& m = kResultMetrics[k];
    const int column = first + C::kMetricsFirst + k;
    if (st.ColumnIsNull(column)) {
      SetMetric(m, std::nullopt, r);
    } else if (m.integer) {
      SetMetric(m, static_cast<double>(st.ColumnInt(column)), r);
    } else {
      SetMetric(m, st.ColumnDouble(column), r);
    }
  }
}

// The packed copy of a result row just written to `results` (schema 6,
// server/core/results/packed_row.h); replaces the cell's earlier one, as the
// failure path's INSERT OR REPLACE does in `results`. The only statement
// that adds rows to result_packs: it owes the sweep's results version its
// move (NoteResultsAdded), which no trigger makes for an insert. An earlier
// row is updated in place, which fires the update triggers (the version,
// the blocks): a REPLACE would fire the delete triggers instead, and
// SQLite then keeps a statement journal for every insert, about 1 µs more
// each even when there is nothing to replace.
absl::Status InsertPack(Connection& c, int64_t cell_id, const std::string& sweep_id,
                        const ResultRow& row) {
  ASSIGN_OR_RETURN(Statement ins,
                   c.Prepare("INSERT INTO result_packs (cell_id, sweep_id, packed) VALUES "
                             "(:cell_id, :sweep_id, :packed) ON CONFLICT (cell_id) DO UPDATE "
                             "SET sweep_id = excluded.sweep_id, packed = excluded.packed"));
  ins.Bind(":cell_id", cell_id).Bind(":sweep_id", sweep_id);
  ins.BindBlob(":packed", PackResultRow(row));
  RETURN_IF_ERROR(ins.Run());
  return NoteResultsAdded(c, sweep_id);
}

absl::Status RecordEndedResult(Connection& c, CellState state, int64_t cell_id,
                               const std::string& sweep_id, int head_index, int rank,
                               int recipe, uint64_t seed, int attempt, int64_t lease_id,
                               const std::string& worker_id, const std::string& reason,
                               int64_t now_ms) {
  VersionManifest version;
  if (!worker_id.empty()) {
    ASSIGN_OR_RETURN(version, WorkerVersion(c, worker_id));
  }
  ASSIGN_OR_RETURN(Statement ins, c.Prepare(
      "INSERT OR REPLACE INTO results (cell_id, sweep_id, head_index, rank, seed, state, "
      "lease_id, attempt, worker_id, worker_build_id, worker_torch_version, "
      "worker_cuda_version, failure, finished_ms, recipe) VALUES (:cell_id, :sweep_id, :head, "
      ":rank, :seed, :state, :lease_id, :attempt, :worker_id, :build_id, :torch_version, "
      ":cuda_version, :reason, :finished_ms, :recipe)"));
  ins.Bind(":cell_id", cell_id).Bind(":sweep_id", sweep_id).Bind(":head", head_index);
  ins.Bind(":rank", rank).Bind(":seed", SeedToDb(seed)).Bind(":recipe", recipe);
  ins.Bind(":state", static_cast<int>(state)).Bind(":lease_id", lease_id);
  ins.Bind(":attempt", attempt).Bind(":worker_id", worker_id);
  ins.Bind(":build_id", version.build_id).Bind(":torch_version", version.torch_version);
  ins.Bind(":cuda_version", version.cuda_version).Bind(":reason", reason);
  ins.Bind(":finished_ms", now_ms);
  RETURN_IF_ERROR(ins.Run());
  ResultRow row = FinishedRow(CellGroupKey{head_index, rank, recipe}, seed, state, attempt,
                              lease_id, worker_id, version, now_ms);
  row.failure = reason;
  return InsertPack(c, cell_id, sweep_id, row);
}

// The columns of result_groups after the key (sweep_id, head_index, rank,
// recipe), in the order in which ReadGroupStats reads them and the upsert
// binds them: the counts, then per grouped built-in metric (kGroupedBuiltIns)
// its running aggregate under its prefix, then the time columns, then per
// optional metric its GroupMetricColumns (metric_columns.h).
constexpr const char* kGroupCountNames[] = {"n", "exact_seeds", "test_n", "test_exact_seeds"};
constexpr const char* kGroupStatSuffixes[] = {"_mean", "_m2", "_min", "_max"};
constexpr const char* kGroupTimeNames[] = {"trained_n", "trained_seconds", "cached_n"};
constexpr int kGroupAllColumns =
    static_cast<int>(std::size(kGroupCountNames)) +
    kGroupedBuiltInCount * static_cast<int>(std::size(kGroupStatSuffixes)) +
    static_cast<int>(std::size(kGroupTimeNames)) + kResultMetricCount * kGroupMetricColumnCount;

const std::string& GroupColumns() {
  static const std::string* columns = [] {
    auto* list = new std::string(absl::StrJoin(kGroupCountNames, ", "));
    for (int b : kGroupedBuiltIns) {
      for (const char* suffix : kGroupStatSuffixes) {
        absl::StrAppend(list, ", ", kBuiltInMetrics[b].group_columns, suffix);
      }
    }
    absl::StrAppend(list, ", ", absl::StrJoin(kGroupTimeNames, ", "));
    for (const ResultMetric& m : kResultMetrics) {
      for (const std::string& column : GroupMetricColumns(m)) absl::StrAppend(list, ", ", column);
    }
    return list;
  }();
  return *columns;
}

namespace {

// The done cells a grouped built-in is aggregated over (GroupAggregates):
// those with a test split for a test-split metric, all for the others.
int64_t SplitCount(const GroupStats& g, const BuiltInMetric& m) {
  return GroupAggregates(m, false) ? g.n : g.test_n;
}

}  // namespace

// Reads the GroupColumns in order from column `first` on.
GroupStats ReadGroupStats(const Statement& st, int first) {
  GroupStats g;
  int i = first;
  g.n = st.ColumnInt(i++);
  g.exact_seeds = st.ColumnInt(i++);
  g.test_n = st.ColumnInt(i++);
  g.test_exact_seeds = st.ColumnInt(i++);
  for (int k = 0; k < kGroupedBuiltInCount; ++k) {
    RunningStats& m = g.built_ins[static_cast<size_t>(k)];
    m.n = SplitCount(g, kBuiltInMetrics[kGroupedBuiltIns[static_cast<size_t>(k)]]);
    m.mean = st.ColumnDouble(i++);
    m.m2 = st.ColumnDouble(i++);
    m.min = st.ColumnDouble(i++);
    m.max = st.ColumnDouble(i++);
  }
  g.trained_n = st.ColumnInt(i++);
  g.trained_seconds = st.ColumnDouble(i++);
  g.cached_n = st.ColumnInt(i++);
  for (RunningStats& m : g.metrics) {
    m.n = st.ColumnInt(i++);
    m.mean = st.ColumnDouble(i++);
    m.m2 = st.ColumnDouble(i++);
    m.min = st.ColumnDouble(i++);
    m.max = st.ColumnDouble(i++);
  }
  return g;
}

absl::Status AddToResultGroup(Connection& c, const std::string& sweep_id, int head_index,
                              int rank, int recipe, const SeedResult& r, bool cached) {
  GroupStats g;
  {
    static const std::string* sql = new std::string(
        absl::StrCat("SELECT ", GroupColumns(),
                     " FROM result_groups WHERE sweep_id = :sweep_id AND head_index = :head AND "
                     "rank = :rank AND recipe = :recipe"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":sweep_id", sweep_id).Bind(":head", head_index).Bind(":rank", rank);
    q.Bind(":recipe", recipe);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) g = ReadGroupStats(q, 0);
  }
  // A done cell, and its test split's when it has one (the split's counts
  // and exact seeds), then each grouped built-in it has a value of.
  ++g.n;
  if (r.train.error == 0) ++g.exact_seeds;
  const bool has_test = r.test.sequences > 0;
  if (has_test) {
    ++g.test_n;
    if (r.test.error == 0) ++g.test_exact_seeds;
  }
  for (int k = 0; k < kGroupedBuiltInCount; ++k) {
    const BuiltInMetric& m = kBuiltInMetrics[kGroupedBuiltIns[static_cast<size_t>(k)]];
    if (GroupAggregates(m, has_test)) g.built_ins[static_cast<size_t>(k)].Add(m.get(r));
  }
  for (int k = 0; k < kResultMetricCount; ++k) {
    const std::optional<double> v = GetMetric(kResultMetrics[k], r);
    if (v.has_value()) g.metrics[static_cast<size_t>(k)].Add(*v);
  }
  if (cached) {
    ++g.cached_n;
  } else {
    ++g.trained_n;
    g.trained_seconds += r.wall_seconds;
  }
  // The key by name (parameters 1..4), then the GroupColumns numbered in
  // order, as the column list is generated.
  constexpr int kFirstStat = 5;
  static const std::string* sql = [] {
    std::string values = ":sweep_id, :head, :rank, :recipe";
    for (int i = kFirstStat; i < kFirstStat + kGroupAllColumns; ++i) {
      absl::StrAppend(&values, ", ?", i);
    }
    return new std::string(absl::StrCat("INSERT OR REPLACE INTO result_groups (sweep_id, "
                                        "head_index, rank, recipe, ",
                                        GroupColumns(), ") VALUES (", values, ")"));
  }();
  ASSIGN_OR_RETURN(Statement up, c.Prepare(*sql));
  up.Bind(":sweep_id", sweep_id).Bind(":head", head_index).Bind(":rank", rank);
  up.Bind(":recipe", recipe);
  int i = kFirstStat;
  up.Bind(i++, g.n).Bind(i++, g.exact_seeds).Bind(i++, g.test_n);
  up.Bind(i++, g.test_exact_seeds);
  for (const RunningStats& m : g.built_ins) {
    up.Bind(i++, m.mean).Bind(i++, m.m2).Bind(i++, m.min).Bind(i++, m.max);
  }
  up.Bind(i++, g.trained_n).Bind(i++, g.trained_seconds).Bind(i++, g.cached_n);
  for (const RunningStats& m : g.metrics) {
    up.Bind(i++, m.n).Bind(i++, m.mean).Bind(i++, m.m2).Bind(i++, m.min).Bind(i++, m.max);
  }
  return up.Run();
}

}  // namespace ranksweep::server
