// A count with its noun for messages people read: "1 slot", "2 slots",
// "0 cells". Header-only; no state.
#ifndef RANKSWEEP_COMMON_PLURAL_H_
#define RANKSWEEP_COMMON_PLURAL_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ranksweep {

// "N noun" with the noun's plural (`plural`, else `singular` + "s") unless N
// is 1 or -1.
inline std::string CountOf(int64_t n, absl::string_view singular,
                           absl::string_view plural = {}) {
  if (n == 1 || n == -1) return absl::StrCat(n, " ", singular);
  return plural.empty() ? absl::StrCat(n, " ", singular, "s") : absl::StrCat(n, " ", plural);
}

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_PLURAL_H_
