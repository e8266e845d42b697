// The optional per-seed metrics of a SeedResult, described once. Every layer
// that carries a result (validation, JSON, the proto messages, the result
// columns on the wire, the `results` table and its packed copy, the CLI's
// CSV and JSON, the dashboard, the Python frames) goes through this table
// rather than naming the metrics: a metric is one row here plus the line of
// the trainer that computes it (docs/ARCHITECTURE.md, "How to add a
// metric"). Its value lives in SeedResult::metrics at the row's index, on
// the wire in SeedResult's `metrics` map under its name, and in a `results`
// column of its name that the store adds when it opens a database that
// lacks it (server/core/metric_columns.h, EnsureMetricColumns).
//
// A metric here may be missing (std::nullopt): a value that does not exist
// for that seed (never exact: no first exact step), stored as NULL, sent
// unset, printed as an empty CSV cell, JSON null, "-" in tables.
//
// The table is append-only: the packed copy of a row (server/core/
// packed_row.h) stores the metrics in table order, and a row packed before
// a metric existed reads it as missing.
//
// Thread-safety: constant data and pure functions.
#ifndef RANKSWEEP_COMMON_SPEC_RESULT_METRICS_H_
#define RANKSWEEP_COMMON_SPEC_RESULT_METRICS_H_

#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/spec/spec.h"

namespace ranksweep {

// The values a metric may take (checked by ValidateSeedResult).
enum class MetricRange {
  kStep,           // an integer step in 0..max_steps of the task
  kNonNegative,    // a finite real >= 0
  kShare,          // a real in [0, 1]: an accuracy, an error
  kCount,          // an integer >= 0
  kPositiveCount,  // an integer >= 1
};

// The split a metric was measured on. A test-split metric is missing for
// a dataset without a test split (a result that has one is refused).
// kNone: the seed's, not a split's (its loss, steps, time).
enum class MetricSplit {
  kTrain,
  kTest,
  kNone,
};

struct ResultMetric {
  // The name everywhere: the `results` column, the key of v1::SeedResult's
  // `metrics` map, the MetricColumn of the result columns, the CSV column,
  // the JSON key and the Python frames' column.
  const char* name;
  // An integer (a step: an INTEGER column, printed without a fraction) or
  // a real.
  bool integer = false;
  MetricRange range = MetricRange::kNonNegative;
  MetricSplit split = MetricSplit::kTrain;
  // A short header for the CLI's tables ("EXACT_AT") and a label for the
  // dashboard's ("First exact step").
  const char* table_header = "";
  const char* label = "";
};

// Every optional metric, in table order. Append only (see above).
inline constexpr ResultMetric kResultMetrics[] = {
    // The first evaluated step (every eval_every steps, and the last) at
    // which train exact accuracy was 1; 0 for a head trained for no step
    // (a construction) that is exact as built.
    {"first_exact_step", true, MetricRange::kStep, MetricSplit::kTrain, "EXACT_AT",
     "First exact step"},
    // The training loss (the spec's loss, mean over sequences and scored
    // positions) over the test split after the last step, as final_loss is
    // over the train split; missing without a test split.
    {"final_test_loss", false, MetricRange::kNonNegative, MetricSplit::kTest, "TEST_LOSS",
     "Final test loss"},
};
inline constexpr int kResultMetricCount = static_cast<int>(std::size(kResultMetrics));

inline absl::Span<const ResultMetric> ResultMetrics() { return kResultMetrics; }

// The row named `name`, or nullptr.
const ResultMetric* FindResultMetric(std::string_view name);

// The metrics every result has: each split's SplitMetrics, and the seed's
// loss, steps and time. Each is a field of SeedResult, of v1::SeedResult
// (a split's in its v1::SplitMetrics) and of v1::ResultColumns, and a
// column of the `results` table, all by the row's names; the code that
// stores, sends or prints them reads this table instead of naming them.
// Append only, in the order a packed row (server/core/results/
// packed_row.h) and the `results` table hold them.
struct BuiltInMetric {
  // The name as a column: the `results` column, the v1::ResultColumns
  // field, the CSV and JSON column and the Python frames' column
  // ("train_error").
  const char* name;
  // The field in SeedResult / v1::SeedResult, or in a split's SplitMetrics /
  // v1::SplitMetrics ("error").
  const char* field;
  // An integer (a count: a sequence count, a step count) or a real.
  bool integer;
  MetricSplit split;
  // The values a result may hold (ValidateSeedResult).
  MetricRange range;
  // For a metric that every (head, rank, recipe) group aggregates over its
  // done seeds (a test-split one over those with a test split): the prefix
  // of its running aggregate's `result_groups` columns (`exact`: the
  // columns exact_mean, then _m2, _min and _max), and v1::ResultGroup's
  // Aggregate field of the row's name carries it. nullptr: not aggregated.
  const char* group_columns;
  // The value in a SeedResult, and setting it (an integer's is truncated).
  double (*get)(const SeedResult&);
  void (*set)(SeedResult&, double);
};

// A row for the SeedResult member `member` ("train.error", "final_loss"),
// whose field is named `field`.
#define RANKSWEEP_BUILT_IN(name, split, member, field, integer, range, group)              \
  BuiltInMetric {                                                                          \
    name, field, integer, MetricSplit::split, MetricRange::range, group,                   \
        [](const SeedResult& r) { return static_cast<double>(r.member); },                 \
        [](SeedResult& r, double v) { r.member = static_cast<decltype(r.member)>(v); }     \
  }
// The five rows of a split's SplitMetrics; a split holds at least
// `sequences_range` sequences; the groups aggregate its position accuracy,
// exact accuracy and error under the three prefixes given (or nullptr).
#define RANKSWEEP_SPLIT_METRICS(split, split_enum, sequences_range, position_group,        \
                                exact_group, error_group)                                  \
  RANKSWEEP_BUILT_IN(#split "_sequences", split_enum, split.sequences, "sequences", true,  \
                     sequences_range, nullptr),                                            \
      RANKSWEEP_BUILT_IN(#split "_position_accuracy", split_enum, split.position_accuracy, \
                         "position_accuracy", false, kShare, position_group),              \
      RANKSWEEP_BUILT_IN(#split "_exact_accuracy", split_enum, split.exact_accuracy,       \
                         "exact_accuracy", false, kShare, exact_group),                    \
      RANKSWEEP_BUILT_IN(#split "_error", split_enum, split.error, "error", false, kShare, \
                         error_group),                                                     \
      RANKSWEEP_BUILT_IN(#split "_max_abs_error", split_enum, split.max_abs_error,         \
                         "max_abs_error", false, kNonNegative, nullptr)

inline constexpr BuiltInMetric kBuiltInMetrics[] = {
    // train_sequences, train_position_accuracy, train_exact_accuracy,
    // train_error, train_max_abs_error; the same for test, which may be
    // empty (no test split). The groups' column prefixes are those of the
    // schema that added them (server/core/schema.cc, schema 5).
    RANKSWEEP_SPLIT_METRICS(train, kTrain, kPositiveCount, "position", "exact", "train_error"),
    RANKSWEEP_SPLIT_METRICS(test, kTest, kCount, nullptr, nullptr, "test_error"),
    RANKSWEEP_BUILT_IN("final_loss", kNone, final_loss, "final_loss", false, kNonNegative,
                       nullptr),
    RANKSWEEP_BUILT_IN("steps", kNone, steps, "steps", true, kStep, nullptr),
    RANKSWEEP_BUILT_IN("wall_seconds", kNone, wall_seconds, "wall_seconds", false,
                       kNonNegative, nullptr),
};
#undef RANKSWEEP_SPLIT_METRICS
#undef RANKSWEEP_BUILT_IN
inline constexpr int kBuiltInMetricCount = static_cast<int>(std::size(kBuiltInMetrics));

inline absl::Span<const BuiltInMetric> BuiltInMetrics() { return kBuiltInMetrics; }

// The value of `m` in `r`, or nothing where it was not measured: test_error
// without a test split (test.sequences 0), which the `results` table stores
// as NULL and a packed row as the field's default, 1.
inline std::optional<double> BuiltInValue(const BuiltInMetric& m, const SeedResult& r) {
  if (m.split == MetricSplit::kTest && r.test.sequences <= 0 &&
      std::string_view(m.field) == "error") {
    return std::nullopt;
  }
  return m.get(r);
}
// What a value not measured reads as: the field's default.
inline double BuiltInDefault(const BuiltInMetric& m) {
  static const SeedResult kDefault;
  return m.get(kDefault);
}

// Where `m` sits in a result, as validation messages name it:
// "result.train.error", "result.steps".
std::string BuiltInPath(const BuiltInMetric& m);

// OK when `m`'s value in `r` is in its range (max_steps: the task's, for a
// kStep metric); else InvalidArgument "result.train.error must be in
// [0, 1], got 2".
absl::Status CheckBuiltInRange(const BuiltInMetric& m, const SeedResult& r, int max_steps);

// The index of the built-in metric named `name` in kBuiltInMetrics; a name
// that is not there does not compile where a constant is needed.
constexpr int BuiltInMetricIndex(std::string_view name) {
  for (int i = 0; i < kBuiltInMetricCount; ++i) {
    if (std::string_view(kBuiltInMetrics[i].name) == name) return i;
  }
  throw "not a built-in metric";  // NOLINT: a compile-time error in constant evaluation
}

// The built-ins each group aggregates (those with group_columns), in table
// order: kGroupedBuiltIns[k] is the kBuiltInMetrics index of the k-th. The
// stores, the wire and the CLI's grouped CSV and JSON go through these.
constexpr int CountGroupedBuiltIns() {
  int n = 0;
  for (const BuiltInMetric& m : kBuiltInMetrics) n += m.group_columns != nullptr ? 1 : 0;
  return n;
}
inline constexpr int kGroupedBuiltInCount = CountGroupedBuiltIns();
inline constexpr std::array<int, kGroupedBuiltInCount> kGroupedBuiltIns = [] {
  std::array<int, kGroupedBuiltInCount> indices{};
  int k = 0;
  for (int i = 0; i < kBuiltInMetricCount; ++i) {
    if (kBuiltInMetrics[i].group_columns != nullptr) indices[k++] = i;
  }
  return indices;
}();

// The position in kGroupedBuiltIns of the grouped built-in named `name`; a
// name that is not one does not compile where a constant is needed.
constexpr int GroupedBuiltInIndex(std::string_view name) {
  for (int k = 0; k < kGroupedBuiltInCount; ++k) {
    if (std::string_view(kBuiltInMetrics[kGroupedBuiltIns[k]].name) == name) return k;
  }
  throw "not a grouped built-in metric";  // NOLINT: a compile-time error in constant evaluation
}

// Whether a group's aggregate of the grouped built-in `m` takes a done
// cell's value: a test-split metric's only from a cell with a test split.
constexpr bool GroupAggregates(const BuiltInMetric& m, bool has_test_split) {
  return m.split != MetricSplit::kTest || has_test_split;
}

// The built-in row named `name`, or nullptr.
const BuiltInMetric* FindBuiltInMetric(std::string_view name);

// The value of `metric` (a row of kResultMetrics) in `r` as a double (exact
// for integers up to 2^53), or nullopt when missing; Set stores one
// (rounded toward zero for an integer metric; nullopt: missing).
std::optional<double> GetMetric(const ResultMetric& metric, const SeedResult& r);
void SetMetric(const ResultMetric& metric, std::optional<double> value, SeedResult* r);
// The same by name, for the code that computes a metric. A name that is not
// in the table is a programming error: the process aborts, naming it.
std::optional<double> GetMetric(std::string_view name, const SeedResult& r);
void SetMetric(std::string_view name, std::optional<double> value, SeedResult* r);

// OK when every metric of `r` is missing or in its range, and every
// test-split metric is missing when `r` has no test split; else
// InvalidArgument naming the field ("result.first_exact_step must be in
// 0..3000 or missing, got 4000").
absl::Status ValidateResultMetrics(const SeedResult& r, int max_steps);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_RESULT_METRICS_H_
