// Analysis of a sweep's grouped results: how complete each (head, rank) group
// is, and each head's transition rank, the smallest swept rank at which every
// seed is exact (docs/SCIENCE.md, "Metrics and the transition rank"). Pure
// functions over ResultGroup values, so the rules are unit-tested on hand-made
// numbers; the coordinator calls them from Query(). docs/ANALYSIS.md states
// the rules for users.
//
// Transition rule, for one head and one split (train, or test when the
// dataset has one). Walk the head's groups in increasing rank:
//   * a group is EXACT when it is complete (n == expected) and every seed is
//     exact (exact seeds == expected): the transition rank is its rank;
//   * a group is DECIDED-NOT when some done seed is not exact (whether or not
//     the group is complete): go on to the next rank;
//   * otherwise the group is incomplete and every done seed so far is exact
//     (this includes a group with no done seed): it might still become the
//     transition, so the transition rank is UNDEFINED ("undecided").
// When the walk ends without an EXACT group it is UNDEFINED ("no swept rank
// has every seed exact"). A defined transition notes larger ranks that are
// not exact on every seed (the curve is not monotone). Heads without a rank
// (softmax, rank-less constructions) have no transition; their summary says
// on how many seeds they are exact.
//
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_SERVER_CORE_ANALYSIS_H_
#define RANKSWEEP_SERVER_CORE_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/core/types.h"

namespace ranksweep::server {

// "seed 3 missing", "seeds 3, 5 missing", at most 8 seeds listed and then
// "and 4 more"; "" when nothing is missing.
std::string MissingSeedsNote(const std::vector<uint64_t>& missing_seeds);

// "7/8 seeds; seed 3 missing", or "8/8 seeds" when complete.
std::string CompletenessNote(const ResultGroup& group);

// The summary of one head from its groups (every group must have the same
// head_index; any order). `has_test_split` also applies the rule to the test
// split (test_exact_seeds). An empty `groups` gives a default summary.
HeadSummary SummarizeHead(const std::vector<ResultGroup>& groups, bool has_test_split);

// One summary per head_index present in `groups`, by increasing head_index.
std::vector<HeadSummary> SummarizeHeads(const std::vector<ResultGroup>& groups,
                                        bool has_test_split);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_ANALYSIS_H_
