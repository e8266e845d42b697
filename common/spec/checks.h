// The range checks every spec validator uses, each an InvalidArgument whose
// message names the field and the allowed range ("dataset.m must be in
// 1..64, got 0"). Internal to common/spec/.
#ifndef RANKSWEEP_COMMON_SPEC_CHECKS_H_
#define RANKSWEEP_COMMON_SPEC_CHECKS_H_

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ranksweep::spec_checks {

// "field must be in lo..hi, got v"
template <typename T>
absl::Status CheckRange(const std::string& field, T v, T lo, T hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be in ", lo, "..", hi, ", got ", v));
}

// "field must be in [lo, hi), got v", the ends open or closed as asked; NaN
// and infinities are refused.
inline absl::Status CheckUnit(const std::string& field, double v, bool open_low, bool open_high,
                              double lo = 0.0, double hi = 1.0) {
  const bool ok = std::isfinite(v) && (open_low ? v > lo : v >= lo) &&
                  (open_high ? v < hi : v <= hi);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " must be in ", open_low ? "(" : "[",
                                                 lo, ", ", hi, open_high ? ")" : "]", ", got ",
                                                 v));
}

}  // namespace ranksweep::spec_checks

// Returns the status of `expr` when it is not OK.
#define RS_CHECK(expr)             \
  do {                             \
    absl::Status rs_s_ = (expr);   \
    if (!rs_s_.ok()) return rs_s_; \
  } while (0)

#endif  // RANKSWEEP_COMMON_SPEC_CHECKS_H_
