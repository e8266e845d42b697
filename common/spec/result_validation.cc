#include "common/spec/result_validation.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/spec/result_metrics.h"
#include "common/status_macros.h"

namespace ranksweep {
namespace {

// "FIELD must be in [LO, HI], got V"; an infinite HI prints as "inf)".
absl::Status CheckReal(const std::string& field, double v, double lo, double hi) {
  if (std::isfinite(v) && v >= lo && v <= hi) return absl::OkStatus();
  const std::string upper = std::isinf(hi) ? std::string("inf)") : absl::StrCat(hi, "]");
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be in [", lo, ", ", upper, ", got ", v));
}

absl::Status CheckCount(const std::string& field, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " must be in ", lo, "..", hi, ", got ", v));
}

absl::Status CheckSplit(const std::string& split, const SplitMetrics& m, int64_t min_sequences) {
  const double inf = INFINITY;
  const std::string p = absl::StrCat("result.", split, ".");
  RETURN_IF_ERROR(CheckCount(p + "sequences", m.sequences, min_sequences, INT64_MAX));
  RETURN_IF_ERROR(CheckReal(p + "position_accuracy", m.position_accuracy, 0, 1));
  RETURN_IF_ERROR(CheckReal(p + "exact_accuracy", m.exact_accuracy, 0, 1));
  RETURN_IF_ERROR(CheckReal(p + "error", m.error, 0, 1));
  RETURN_IF_ERROR(CheckReal(p + "max_abs_error", m.max_abs_error, 0, inf));
  // The shares relate only for a split that has sequences. An empty test
  // split's error is not even stored (it reads back as 1).
  if (m.sequences == 0) return absl::OkStatus();
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
  const double inf = INFINITY;
  RETURN_IF_ERROR(CheckSplit("train", r.train, 1));
  RETURN_IF_ERROR(CheckSplit("test", r.test, 0));
  RETURN_IF_ERROR(CheckReal("result.final_loss", r.final_loss, 0, inf));
  RETURN_IF_ERROR(CheckCount("result.steps", r.steps, 0, max_steps));
  RETURN_IF_ERROR(CheckReal("result.wall_seconds", r.wall_seconds, 0, inf));
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
