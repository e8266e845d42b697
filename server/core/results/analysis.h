// Analysis of a sweep's grouped results: how complete each (head, rank) group
// is, and each head's transition rank, the smallest swept rank at which every
// seed is exact (docs/SCIENCE.md, "Metrics and the transition rank"). Pure
// functions over ResultGroup values, so the rules are unit-tested on hand-made
// numbers; the coordinator calls them from Query(). docs/ANALYSIS.md states
// the rules for users.
//
// A criterion (common/spec/criterion.h: all, mean:X, seeds:K) judges one
// (head, rank, recipe) group on one split (train, or test when the dataset
// has one). It speaks of all the group's `expected` seeds; a missing seed
// (pending, running, failed or cancelled) could still turn out either way,
// exact or not, with any exact accuracy in [0, 1]. So a group
//   * MEETS the criterion when it holds however its missing seeds turn out:
//     all: every seed exact (complete); seeds:K: at least K done seeds
//     exact; mean:X: (sum of done seeds' exact accuracy) / expected >= X;
//   * is NOT MET when it fails however they turn out: all: some done seed
//     is not exact; seeds:K: exact + missing < K; mean:X: (sum + missing) /
//     expected < X;
//   * is UNDECIDED otherwise (this includes a group with no done seed).
// A failed or cancelled seed stays missing, so it can leave a group
// undecided for good; `all` is exactly seeds:K with K = expected.
// A group with a cell stopped by recipe pruning (ResultGroup::pruned,
// server/core/sweeps/pruning.h) is NOT MET: the rule stopped its recipe as clearly
// losing to another recipe of the same (head, rank), which trained on.
// The mean is compared with a tolerance of 1e-9, so that the mean of seeds
// whose accuracies are X reaches X whatever the rounding.
//
// Best over the recipe: a rank MEETS when some recipe's group meets, is NOT
// MET when every recipe's group is not met, else UNDECIDED. Without recipe
// axes every group is recipe 0, and this is the group's own verdict.
//
// Transition rule, for one head and one split. Walk the head's ranks
// upwards: the first rank that MEETS is the transition rank; a rank NOT MET
// is passed over; an UNDECIDED rank makes the transition UNDEFINED
// ("undecided"), since it might still become the transition. When the walk
// ends without a rank that meets it is UNDEFINED. A defined transition notes
// larger ranks that are NOT MET (the curve is not monotone). Heads without
// a rank (softmax, rank-less constructions) have no transition; their
// summary says on how many seeds they are exact.
//
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_SERVER_CORE_RESULTS_ANALYSIS_H_
#define RANKSWEEP_SERVER_CORE_RESULTS_ANALYSIS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/spec/criterion.h"
#include "common/spec/spec.h"
#include "server/core/types.h"

namespace ranksweep::server {

// "seed 3 missing", "seeds 3, 5 missing", at most 8 seeds listed and then
// "and 4 more"; "" when nothing is missing.
std::string MissingSeedsNote(const std::vector<uint64_t>& missing_seeds);

// "7/8 seeds; seed 3 missing", or "8/8 seeds" when complete.
std::string CompletenessNote(const ResultGroup& group);

// How summaries name a recipe, given its index. Every recipe label of a
// summary comes from one of these, so a caller that knows the sweep's axes
// passes one that spells them out.
using RecipeLabeler = std::function<std::string(int32_t recipe)>;

// "recipe 3".
std::string DefaultRecipeLabel(int32_t recipe);

// The verdict of one group on one split (`test`: test_exact_seeds and
// test_error) under `criterion`, by the header's rule.
Verdict JudgeGroup(const ResultGroup& group, const Criterion& criterion, bool test);

// Sets every group's verdict (and test_verdict when `has_test_split`).
void JudgeGroups(std::vector<ResultGroup>& groups, bool has_test_split,
                 const Criterion& criterion);

// The summary of one head from its groups (every group must have the same
// head_index; any order, any recipes). `has_test_split` also applies the
// rule to the test split. An empty `groups` gives a default summary.
HeadSummary SummarizeHead(const std::vector<ResultGroup>& groups, bool has_test_split,
                          const Criterion& criterion = {},
                          const RecipeLabeler& label = DefaultRecipeLabel);

// One summary per head_index present in `groups`, by increasing head_index.
std::vector<HeadSummary> SummarizeHeads(const std::vector<ResultGroup>& groups,
                                        bool has_test_split, const Criterion& criterion = {},
                                        const RecipeLabeler& label = DefaultRecipeLabel);

// Why the dataset's rank bounds (DatasetFacts::rank_lower_bound/upper) do
// not apply to `head` trained with `train`, or "" when they do. They are
// bounds for one normalized nonnegative kernel head with the paper's
// readout, so: "softmax", "multi-head", "signed", "construction" (weights
// set by hand, not learned at that rank), or "loss ce" (ReadoutEscapesRankBound).
std::string NoBoundReason(const HeadSpec& head, const TrainSpec& train);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_RESULTS_ANALYSIS_H_
