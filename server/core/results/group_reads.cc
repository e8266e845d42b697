#include "server/core/results/group_reads.h"

#include <array>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/results/result_schema.h"
#include "server/core/results/statistics.h"

namespace ranksweep::server::result_reads {

namespace {

// A group's MetricAggregates from the running aggregate of each optional
// metric (kResultMetrics order).
std::vector<MetricAggregate> MetricAggregates(const std::vector<RunningStats>& stats) {
  std::vector<MetricAggregate> out;
  for (size_t k = 0; k < stats.size() && k < ResultMetrics().size(); ++k) {
    out.push_back({ResultMetrics()[k].name, stats[k].n, stats[k].Summary()});
  }
  return out;
}

ResultGroup& GroupFor(GroupMap& groups, int head_index, int rank, int recipe,
                      const std::vector<std::string>& labels) {
  ResultGroup& g = groups[{head_index, rank, recipe}];
  if (g.head.empty()) {
    g.head = LabelOf(labels, head_index);
    g.head_index = head_index;
    g.rank = rank;
    g.recipe = recipe;
    // No done cell yet: every metric at n 0.
    g.metrics = MetricAggregates(std::vector<RunningStats>(kResultMetricCount));
  }
  return g;
}

// The first columns of the statements ForEachKeptGroupRow steps through:
// the group's key, then what each reads from kCount on.
struct GroupKeyCol {
  enum : int { kHeadIndex, kRank, kRecipe, kCount };
};

// Steps through `q`, whose first columns are GroupKeyCol's, and calls `fn`
// with the group of each row that `filter` keeps, `q` on that row.
absl::Status ForEachKeptGroupRow(Statement& q, const CellFilter& filter,
                                 const std::vector<std::string>& labels,
                                 GroupMap* groups, absl::FunctionRef<void(ResultGroup&)> fn) {
  while (true) {
    ASSIGN_OR_RETURN(bool more, q.Step());
    if (!more) return absl::OkStatus();
    const int head_index = static_cast<int>(q.ColumnInt(GroupKeyCol::kHeadIndex));
    const int rank = static_cast<int>(q.ColumnInt(GroupKeyCol::kRank));
    const int recipe = static_cast<int>(q.ColumnInt(GroupKeyCol::kRecipe));
    if (filter.Keeps(head_index, rank)) fn(GroupFor(*groups, head_index, rank, recipe, labels));
  }
}

}  // namespace

absl::Status GroupsFromSummaries(Connection& c, const std::string& sweep_id,
                                 const std::vector<std::string>& labels, const CellFilter& filter,
                                 GroupMap* groups) {
  {
    static const std::string* sql = new std::string(absl::StrCat(
        "SELECT head_index, rank, recipe, ", GroupColumns(),
        " FROM result_groups WHERE sweep_id = :sweep_id"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":sweep_id", sweep_id);
    RETURN_IF_ERROR(ForEachKeptGroupRow(q, filter, labels, groups, [&](ResultGroup& g) {
      const GroupStats stats = ReadGroupStats(q, GroupKeyCol::kCount);
      g.n = stats.n;
      g.expected += stats.n;
      g.exact_seeds = stats.exact_seeds;
      g.test_exact_seeds = stats.test_exact_seeds;
      for (size_t k = 0; k < g.built_ins.size(); ++k) {
        g.built_ins[k] = stats.built_ins[k].Summary();
      }
      g.metrics = MetricAggregates(stats.metrics);
    }));
  }
  // Every state but done, so that SQLite reads only those ranges of
  // cells_by_state.
  static const std::string* sql = new std::string(absl::StrCat(
      "SELECT head_index, rank, recipe, seed, state FROM cells WHERE sweep_id = :sweep_id AND "
      "state IN (",
      kCellPending, ", ", kCellLeased, ", ", kCellFailed, ", ", kCellCancelled, ", ", kCellPruned,
      ")"));
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":sweep_id", sweep_id);
  return ForEachKeptGroupRow(q, filter, labels, groups, [&](ResultGroup& g) {
    ++g.expected;
    g.missing_seeds.push_back(SeedFromDb(q.ColumnInt(GroupKeyCol::kCount)));
    if (q.ColumnInt(GroupKeyCol::kCount + 1) == kCellPruned) ++g.pruned;
  });
}

absl::Status FillLawBounds(Connection& c, const std::string& sweep_id, const SweepSpec& spec,
                           AxisLaw& law) {
  static const std::string* sql = new std::string(
      absl::StrCat("SELECT ", ResultColumns(), " FROM results WHERE sweep_id = :sweep_id AND "
                   "recipe = :recipe "
                   "AND state = ", kCellDone, " LIMIT 1"));
  const int64_t recipes = RecipeCount(spec);
  for (AxisPoint& point : law.points) {
    for (int32_t recipe = 0; recipe < recipes; ++recipe) {
      double v = 0;
      if (!RecipeAxisValue(spec, recipe, law.axis, &v) || v != point.value) continue;
      ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
      q.Bind(":sweep_id", sweep_id);
      q.Bind(":recipe", static_cast<int64_t>(recipe));
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) continue;
      SeedResult result;
      ReadResultColumns(q, 0, &result);
      point.rank_lower_bound = result.facts.rank_lower_bound;
      point.rank_upper_bound = result.facts.rank_upper_bound;
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status GroupsFromRows(Connection& c, const std::string& sweep_id,
                            const std::vector<std::string>& labels, const CellFilter& filter,
                            GroupMap* groups, std::optional<DatasetFacts>* facts) {
  static const std::string* sql = new std::string(
      absl::StrCat("SELECT ", QueryColumns(),
                   " FROM cells c LEFT JOIN results r ON r.cell_id = c.id WHERE c.sweep_id = :sweep_id"));
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":sweep_id", sweep_id);
  struct Values {
    std::array<std::vector<double>, kGroupedBuiltInCount> built_ins;
    std::vector<RunningStats> metrics = std::vector<RunningStats>(kResultMetricCount);
  };
  std::map<std::tuple<int, int, int>, Values> values;
  while (true) {
    ASSIGN_OR_RETURN(bool more, q.Step());
    if (!more) break;
    const int head_index = static_cast<int>(q.ColumnInt(QueryCol::kHeadIndex));
    const int rank = static_cast<int>(q.ColumnInt(QueryCol::kRank));
    const int recipe = static_cast<int>(q.ColumnInt(QueryCol::kRecipe));
    const uint64_t seed = SeedFromDb(q.ColumnInt(QueryCol::kSeed));
    if (!filter.Keeps(head_index, rank, seed)) continue;
    ResultGroup& g = GroupFor(*groups, head_index, rank, recipe, labels);
    ++g.expected;
    if (q.ColumnInt(QueryCol::kState) != kCellDone || q.ColumnInt(QueryCol::kHasResult) == 0) {
      g.missing_seeds.push_back(seed);
      if (q.ColumnInt(QueryCol::kState) == kCellPruned) ++g.pruned;
      continue;
    }
    ++g.n;
    Values& v = values[{head_index, rank, recipe}];
    // Only the columns the aggregates need.
    const int f = QueryCol::kResultFirst + ResultCol::kBuiltInFirst;
    constexpr int kTrainError = BuiltInMetricIndex("train_error");
    constexpr int kTestSequences = BuiltInMetricIndex("test_sequences");
    constexpr int kTestError = BuiltInMetricIndex("test_error");
    const bool has_test = q.ColumnInt(f + kTestSequences) > 0;
    if (q.ColumnDouble(f + kTrainError) == 0) ++g.exact_seeds;
    if (has_test && q.ColumnDouble(f + kTestError) == 0) ++g.test_exact_seeds;
    for (int k = 0; k < kGroupedBuiltInCount; ++k) {
      const int b = kGroupedBuiltIns[static_cast<size_t>(k)];
      if (GroupAggregates(kBuiltInMetrics[b], has_test)) {
        v.built_ins[static_cast<size_t>(k)].push_back(q.ColumnDouble(f + b));
      }
    }
    for (int k = 0; k < kResultMetricCount; ++k) {
      const int column = QueryCol::kResultFirst + ResultCol::kMetricsFirst + k;
      if (!q.ColumnIsNull(column)) v.metrics[static_cast<size_t>(k)].Add(q.ColumnDouble(column));
    }
    if (!facts->has_value()) {
      SeedResult result;
      ReadResultColumns(q, QueryCol::kResultFirst, &result);
      *facts = result.facts;
    }
  }
  for (auto& [key, v] : values) {
    ResultGroup& g = (*groups)[key];
    for (size_t k = 0; k < g.built_ins.size(); ++k) g.built_ins[k] = Summarize(v.built_ins[k]);
    g.metrics = MetricAggregates(v.metrics);
  }
  return absl::OkStatus();
}

}  // namespace ranksweep::server::result_reads
