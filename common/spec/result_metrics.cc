#include "common/spec/result_metrics.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace ranksweep {

std::optional<double> GetMetric(const ResultMetric& metric, const SeedResult& r) {
  if (metric.integer != nullptr) {
    const std::optional<int64_t>& v = r.*metric.integer;
    if (!v.has_value()) return std::nullopt;
    return static_cast<double>(*v);
  }
  return r.*metric.real;
}

void SetMetric(const ResultMetric& metric, std::optional<double> value, SeedResult* r) {
  if (metric.integer != nullptr) {
    r->*metric.integer =
        value.has_value() ? std::optional<int64_t>(static_cast<int64_t>(*value)) : std::nullopt;
  } else {
    r->*metric.real = value;
  }
}

absl::Status ValidateResultMetrics(const SeedResult& r, int max_steps) {
  for (const ResultMetric& m : ResultMetrics()) {
    const std::optional<double> v = GetMetric(m, r);
    if (!v.has_value()) continue;
    switch (m.range) {
      case MetricRange::kStep:
        if (*v < 0 || *v > max_steps) {
          return absl::InvalidArgumentError(
              absl::StrCat("result.", m.name, " must be in 0..", max_steps, " or missing, got ",
                           static_cast<int64_t>(*v)));
        }
        break;
      case MetricRange::kNonNegative:
        if (!std::isfinite(*v) || *v < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "result.", m.name, " must be a finite number >= 0 or missing, got ", *v));
        }
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace ranksweep
