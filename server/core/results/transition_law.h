// How a head's transition rank grows with the problem: for a sweep with a
// dataset axis (m, pool_size, num_queries, split, ...), the transition at
// each value of the axis, and the least-squares fit of log2(transition)
// against the value. The paper's claim is that a normalized nonnegative
// kernel head needs 2^Omega(m) features, so on an m axis the fitted slope is
// the exponent measured directly (1 would be 2^m); docs/ANALYSIS.md states
// the rules for users. Pure functions over ResultGroup values.
//
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_SERVER_CORE_RESULTS_TRANSITION_LAW_H_
#define RANKSWEEP_SERVER_CORE_RESULTS_TRANSITION_LAW_H_

#include <utility>
#include <vector>

#include "common/spec/criterion.h"
#include "common/spec/spec.h"
#include "server/core/results/analysis.h"
#include "server/core/types.h"

namespace ranksweep::server {

// The least-squares line y = slope * x + intercept through `points`
// (x, transition rank), with y = log2(rank); `undefined` lists the x whose
// transition is undefined (copied, sorted, into left_out). Undefined (fit
// not defined) with fewer than two distinct x. The slope's 95% interval is
// t(0.975, n - 2) * s / sqrt(Sxx), with s^2 the residual sum of squares over
// n - 2; points that lie on a line give a half-width of 0.
LawFit FitLog2Transition(const std::vector<std::pair<double, int>>& points,
                         std::vector<double> undefined = {});

// One AxisLaw per (dataset axis of `spec`, head present in `groups`), axes
// in the spec's order, heads by index. Each point summarizes the head over
// the groups whose recipe has that value (SummarizeHead: best over the
// other recipes); a rank-less head (softmax) gets points and no fit. The
// groups must already be judged (JudgeGroups). Bounds are left 0 for the
// caller to fill.
std::vector<AxisLaw> SummarizeAxisLaws(const std::vector<ResultGroup>& groups,
                                       const SweepSpec& spec, bool has_test_split,
                                       const Criterion& criterion,
                                       const RecipeLabeler& label);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_RESULTS_TRANSITION_LAW_H_
