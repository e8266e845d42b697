// The criterion a summary judges a (head, rank) group by: when does a group
// of seeds count as solving the task at that rank (docs/ANALYSIS.md).
//
//   all       every seed of the group exact (error 0); the default
//   mean:X    mean exact-sequence accuracy over the group's seeds >= X, 0 < X <= 1
//   seeds:K   at least K of the group's seeds exact, K >= 1
//
// The same text travels in a query (QueryResultsRequest.criterion), so the
// coordinator and every client parse it with ParseCriterion and print it
// with CriterionText / CriterionPhrase.
//
// Thread-safety: plain value type and free functions, no state.
#ifndef RANKSWEEP_COMMON_SPEC_CRITERION_H_
#define RANKSWEEP_COMMON_SPEC_CRITERION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ranksweep {

struct Criterion {
  enum class Kind { kAll, kMean, kSeeds };
  Kind kind = Kind::kAll;
  double mean = 1;      // kMean: the least mean exact accuracy, 0 < mean <= 1
  int64_t seeds = 0;    // kSeeds: the least number of exact seeds, >= 1
};

// Parses "all", "mean:X" or "seeds:K" ("" is "all"). InvalidArgument names
// `field` (e.g. "--criterion" or "criterion") and the allowed forms/range.
absl::StatusOr<Criterion> ParseCriterion(absl::string_view text, absl::string_view field);

// The canonical text ParseCriterion reads back: "all", "mean:0.99", "seeds:3".
std::string CriterionText(const Criterion& c);

// How a sentence names it: "every seed exact", "mean exact accuracy >= 0.99",
// "at least 3 seeds exact".
std::string CriterionPhrase(const Criterion& c);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_CRITERION_H_
