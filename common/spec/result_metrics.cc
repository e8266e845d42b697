#include "common/spec/result_metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace ranksweep {
namespace {

const ResultMetric& MetricNamed(std::string_view name) {
  const ResultMetric* m = FindResultMetric(name);
  if (m == nullptr) {
    std::fprintf(stderr, "result metric '%.*s' is not in kResultMetrics\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return *m;
}

size_t IndexOf(const ResultMetric& metric) {
  return static_cast<size_t>(&metric - kResultMetrics);
}

}  // namespace

const ResultMetric* FindResultMetric(std::string_view name) {
  for (const ResultMetric& m : kResultMetrics) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

std::optional<double> GetMetric(const ResultMetric& metric, const SeedResult& r) {
  const size_t i = IndexOf(metric);
  return i < r.metrics.size() ? r.metrics[i] : std::nullopt;
}

void SetMetric(const ResultMetric& metric, std::optional<double> value, SeedResult* r) {
  const size_t i = IndexOf(metric);
  if (!value.has_value() && i >= r->metrics.size()) return;
  if (value.has_value() && metric.integer) value = std::trunc(*value);
  if (i >= r->metrics.size()) r->metrics.resize(i + 1);
  r->metrics[i] = value;
}

std::optional<double> GetMetric(std::string_view name, const SeedResult& r) {
  return GetMetric(MetricNamed(name), r);
}

void SetMetric(std::string_view name, std::optional<double> value, SeedResult* r) {
  SetMetric(MetricNamed(name), value, r);
}

absl::Status ValidateResultMetrics(const SeedResult& r, int max_steps) {
  for (const ResultMetric& m : ResultMetrics()) {
    const std::optional<double> v = GetMetric(m, r);
    if (!v.has_value()) continue;
    if (m.split == MetricSplit::kTest && r.test.sequences == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "result.", m.name, " must be missing: the dataset has no test split (result.test."
          "sequences is 0), got ", *v));
    }
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
