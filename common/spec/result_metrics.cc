#include "common/spec/result_metrics.h"

#include <cmath>
#include <cstdint>
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

// Whether `v` is in `range`, and the range as messages write it.
bool InRange(MetricRange range, double v, int max_steps) {
  switch (range) {
    case MetricRange::kStep:
      return v >= 0 && v <= max_steps;
    case MetricRange::kNonNegative:
      return std::isfinite(v) && v >= 0;
    case MetricRange::kShare:
      return v >= 0 && v <= 1;  // false for NaN
    case MetricRange::kCount:
      return v >= 0;
    case MetricRange::kPositiveCount:
      return v >= 1;
  }
  return false;
}

std::string RangeText(MetricRange range, int max_steps) {
  switch (range) {
    case MetricRange::kStep:
      return absl::StrCat("0..", max_steps);
    case MetricRange::kNonNegative:
      return "[0, inf)";
    case MetricRange::kShare:
      return "[0, 1]";
    case MetricRange::kCount:
      return absl::StrCat("0..", INT64_MAX);
    case MetricRange::kPositiveCount:
      return absl::StrCat("1..", INT64_MAX);
  }
  return "";
}

// `v` as a message shows it: an integer metric without a fraction.
std::string ValueText(bool integer, double v) {
  return integer ? absl::StrCat(static_cast<int64_t>(v)) : absl::StrCat(v);
}

}  // namespace

std::string BuiltInPath(const BuiltInMetric& m) {
  switch (m.split) {
    case MetricSplit::kTrain:
      return absl::StrCat("result.train.", m.field);
    case MetricSplit::kTest:
      return absl::StrCat("result.test.", m.field);
    case MetricSplit::kNone:
      break;
  }
  return absl::StrCat("result.", m.field);
}

absl::Status CheckBuiltInRange(const BuiltInMetric& m, const SeedResult& r, int max_steps) {
  const double v = m.get(r);
  if (InRange(m.range, v, max_steps)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(BuiltInPath(m), " must be in ",
                                                 RangeText(m.range, max_steps), ", got ",
                                                 ValueText(m.integer, v)));
}

const ResultMetric* FindResultMetric(std::string_view name) {
  for (const ResultMetric& m : kResultMetrics) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

const BuiltInMetric* FindBuiltInMetric(std::string_view name) {
  for (const BuiltInMetric& m : kBuiltInMetrics) {
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
    if (InRange(m.range, *v, max_steps)) continue;
    if (m.range == MetricRange::kNonNegative) {
      return absl::InvalidArgumentError(absl::StrCat(
          "result.", m.name, " must be a finite number >= 0 or missing, got ", *v));
    }
    return absl::InvalidArgumentError(absl::StrCat("result.", m.name, " must be in ",
                                                   RangeText(m.range, max_steps),
                                                   " or missing, got ",
                                                   ValueText(m.integer, *v)));
  }
  return absl::OkStatus();
}

}  // namespace ranksweep
