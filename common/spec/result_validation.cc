#include "common/spec/result_validation.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/spec/result_metrics.h"
#include "common/status_macros.h"

namespace ranksweep {
namespace {

absl::Status CheckCount(const std::string& field, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " must be in ", lo, "..", hi, ", got ", v));
}

// How a split's shares relate: they count the same sequences and positions,
// so only rounding separates error from 1 - exact_accuracy, and no sequence
// is exact without its positions being right. A split without sequences
// has nothing to relate (an empty test split's error is not even stored:
// it reads back as 1).
absl::Status CheckShares(const std::string& split, const SplitMetrics& m) {
  if (m.sequences == 0) return absl::OkStatus();
  const std::string p = absl::StrCat("result.", split, ".");
  if (std::fabs(m.error - (1.0 - m.exact_accuracy)) > ResultLimits::kTolerance) {
    return absl::InvalidArgumentError(absl::StrCat(
        p, "error must equal 1 - ", p, "exact_accuracy (", 1.0 - m.exact_accuracy, ") within ",
        ResultLimits::kTolerance, ", got ", m.error));
  }
  if (m.position_accuracy < m.exact_accuracy - ResultLimits::kTolerance) {
    return absl::InvalidArgumentError(absl::StrCat(
        p, "position_accuracy must be at least ", p, "exact_accuracy (", m.exact_accuracy,
        "), got ", m.position_accuracy));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSeedResult(const SeedResult& r, int max_steps) {
  // Each built-in metric in its range, in table order (result_metrics.h).
  for (const BuiltInMetric& m : kBuiltInMetrics) {
    RETURN_IF_ERROR(CheckBuiltInRange(m, r, max_steps));
  }
  RETURN_IF_ERROR(CheckShares("train", r.train));
  RETURN_IF_ERROR(CheckShares("test", r.test));
  RETURN_IF_ERROR(CheckTextLength("result.device", r.device, ResultLimits::kMaxLabelLength));
  const struct {
    const char* field;
    int64_t value;
  } facts[] = {{"result.facts.train_sequences", r.facts.train_sequences},
               {"result.facts.test_sequences", r.facts.test_sequences},
               {"result.facts.distinct_queries", r.facts.distinct_queries},
               {"result.facts.rank_lower_bound", r.facts.rank_lower_bound},
               {"result.facts.rank_upper_bound", r.facts.rank_upper_bound}};
  for (const auto& f : facts) RETURN_IF_ERROR(CheckCount(f.field, f.value, 0, INT64_MAX));
  return ValidateResultMetrics(r, max_steps);
}

absl::Status CheckTextLength(absl::string_view field, absl::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " must be at most ", max_bytes,
                                                 " bytes, got ", value.size()));
}

std::string Clip(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // Back off UTF-8 continuation bytes (10xxxxxx) so that no character is cut.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "... (", text.size(), " bytes)");
}

}  // namespace ranksweep
