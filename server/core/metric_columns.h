// The store's columns of the optional metrics (common/spec/result_metrics.h):
// a metric is a row of that table, not a numbered migration, so the store
// gives `results` and `result_groups` the columns of each metric they lack
// when it opens a file (Migrate, server/core/schema.h, calls
// EnsureMetricColumns last).
//
// Thread-safety: EnsureMetricColumns needs the only writer of the file.
#ifndef RANKSWEEP_SERVER_CORE_METRIC_COLUMNS_H_
#define RANKSWEEP_SERVER_CORE_METRIC_COLUMNS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/spec/result_metrics.h"
#include "server/core/sqlite.h"

namespace ranksweep::server {

// The result_groups columns of one optional metric's running aggregate
// (Welford, as the built-in aggregates), in order: NAME_n (the group's done
// cells that have it), NAME_mean, NAME_m2, NAME_min, NAME_max.
inline constexpr int kGroupMetricColumnCount = 5;
std::vector<std::string> GroupMetricColumns(const ResultMetric& metric);

// Gives `results` a column for every optional metric of common/spec/
// result_metrics.h that it lacks, named as the metric, INTEGER or REAL, and
// `result_groups` its GroupMetricColumns, filled from the DONE results
// already stored; in one transaction: a metric is a row of that table, not a
// numbered migration. Rows stored before read the new column as NULL:
// missing.
absl::Status EnsureMetricColumns(Connection& writer);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_METRIC_COLUMNS_H_
