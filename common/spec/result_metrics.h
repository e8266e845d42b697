// The optional per-seed metrics of a SeedResult, described once. Every layer
// that carries a result (validation, JSON, the proto messages, the result
// columns on the wire, the `results` table and its packed copy, the CLI's
// CSV and JSON, the dashboard) goes through this table rather than naming
// the metrics, so adding one touches only the files docs/ARCHITECTURE.md
// lists under "How to add a metric".
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

#include <cstdint>
#include <iterator>
#include <optional>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/spec/spec.h"

namespace ranksweep {

// The values a metric may take (checked by ValidateSeedResult).
enum class MetricRange {
  kStep,         // an integer step in 0..max_steps of the task
  kNonNegative,  // a finite real >= 0
};

struct ResultMetric {
  // The name everywhere: the `results` column, the field of v1::SeedResult
  // (an `optional` scalar), the CSV column and the JSON key.
  const char* name;
  // The member of SeedResult: an integer or a real one (the other null).
  std::optional<int64_t> SeedResult::*integer = nullptr;
  std::optional<double> SeedResult::*real = nullptr;
  MetricRange range = MetricRange::kNonNegative;
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
    {"first_exact_step", &SeedResult::first_exact_step, nullptr, MetricRange::kStep,
     "EXACT_AT", "First exact step"},
};
inline constexpr int kResultMetricCount = static_cast<int>(std::size(kResultMetrics));

inline absl::Span<const ResultMetric> ResultMetrics() { return kResultMetrics; }

// The value of `metric` in `r` as a double (exact for integers up to 2^53),
// or nullopt when missing; Set stores one (rounded toward zero for an
// integer metric).
std::optional<double> GetMetric(const ResultMetric& metric, const SeedResult& r);
void SetMetric(const ResultMetric& metric, std::optional<double> value, SeedResult* r);

// OK when every metric of `r` is missing or in its range; else
// InvalidArgument naming the field ("result.first_exact_step must be in
// 0..3000 or missing, got 4000").
absl::Status ValidateResultMetrics(const SeedResult& r, int max_steps);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_RESULT_METRICS_H_
