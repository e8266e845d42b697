#include "server/core/metric_columns.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/types.h"

namespace ranksweep::server {

std::vector<std::string> GroupMetricColumns(const ResultMetric& metric) {
  std::vector<std::string> columns;
  for (const char* suffix : {"_n", "_mean", "_m2", "_min", "_max"}) {
    columns.push_back(absl::StrCat(metric.name, suffix));
  }
  return columns;
}

namespace {

absl::StatusOr<std::set<std::string>> ColumnsOf(Connection& w, const char* table) {
  std::set<std::string> have;
  ASSIGN_OR_RETURN(Statement q, w.Prepare(absl::StrCat("PRAGMA table_info(", table, ")")));
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return have;
    have.insert(q.ColumnText(1));
  }
}

// The SQL that gives result_groups the running aggregate of `m` over the
// DONE results already stored: count, mean, min and max first, then the sum
// of squared deviations from that mean (SET reads the row as it was).
std::string FillGroupMetricSql(const ResultMetric& m) {
  const std::vector<std::string> c = GroupMetricColumns(m);
  const std::string from = absl::StrCat(
      " FROM results r WHERE r.sweep_id = result_groups.sweep_id AND r.head_index = "
      "result_groups.head_index AND r.rank = result_groups.rank AND r.recipe = "
      "result_groups.recipe AND r.state = ", kCellDone, " AND r.", m.name, " IS NOT NULL)");
  return absl::StrCat(
      "UPDATE result_groups SET ", c[0], " = (SELECT COUNT(*)", from, ", ", c[1],
      " = COALESCE((SELECT AVG(r.", m.name, ")", from, ", 0), ", c[3], " = COALESCE((SELECT MIN(r.",
      m.name, ")", from, ", 0), ", c[4], " = COALESCE((SELECT MAX(r.", m.name, ")", from,
      ", 0);\nUPDATE result_groups SET ", c[2], " = COALESCE((SELECT SUM((r.", m.name,
      " - result_groups.", c[1], ") * (r.", m.name, " - result_groups.", c[1], "))", from,
      ", 0);\n");
}

}  // namespace

absl::Status EnsureMetricColumns(Connection& w) {
  ASSIGN_OR_RETURN(const std::set<std::string> results, ColumnsOf(w, "results"));
  ASSIGN_OR_RETURN(const std::set<std::string> groups, ColumnsOf(w, "result_groups"));
  std::string sql;
  for (const ResultMetric& m : ResultMetrics()) {
    if (results.count(m.name) == 0) {
      absl::StrAppend(&sql, "ALTER TABLE results ADD COLUMN ", m.name,
                      m.integer ? " INTEGER;\n" : " REAL;\n");
    }
    const std::vector<std::string> columns = GroupMetricColumns(m);
    if (groups.count(columns[0]) > 0) continue;
    absl::StrAppend(&sql, "ALTER TABLE result_groups ADD COLUMN ", columns[0],
                    " INTEGER NOT NULL DEFAULT 0;\n");
    for (size_t i = 1; i < columns.size(); ++i) {
      absl::StrAppend(&sql, "ALTER TABLE result_groups ADD COLUMN ", columns[i],
                      " REAL NOT NULL DEFAULT 0;\n");
    }
    absl::StrAppend(&sql, FillGroupMetricSql(m));
  }
  if (sql.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(w.Exec("BEGIN IMMEDIATE"));
  absl::Status s = w.Exec(sql);
  if (s.ok()) s = w.Exec("COMMIT");
  if (!s.ok()) {
    w.Exec("ROLLBACK").IgnoreError();
    return absl::Status(s.code(), absl::StrCat("adding the columns of new metrics failed: ",
                                                s.message(), "\n", sql));
  }
  return absl::OkStatus();
}

}  // namespace ranksweep::server
