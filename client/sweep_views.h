// The views of sweeps and their summaries the CLI prints: the progress line
// of `watch`, the text of `status`, and `results --summary` as text, CSV and
// JSON. Built on the table/CSV/JSON writers of format.h and json_writer.h.
// Input is plain data (ranksweep.v1 messages); output is a string, so every
// view is unit-tested byte for byte. No RPCs, no I/O, no clocks: callers pass
// the time zone.
//
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_CLIENT_SWEEP_VIEWS_H_
#define RANKSWEEP_CLIENT_SWEEP_VIEWS_H_

#include <string>

#include "absl/time/time.h"
#include "client/format.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep::client {

// Seconds until the sweep finishes: remaining cells (pending + leased) times
// the mean cell time, divided by the cells running now (at least 1), which
// stands for the parallelism the workers give the sweep. -1 when unknown (no
// cell has finished yet).
double EstimateEtaSeconds(const v1::SweepInfo& sweep);

// One line of progress without a newline, e.g.
// "[#####...............] 12/48 done  4 running  1 failed  ETA 8s".
// Cancelled cells are shown when there are any; a finished sweep shows its
// state instead of an ETA.
std::string ProgressLine(const v1::SweepInfo& sweep, int bar_width = 20);

// `ranksweep status`: "key: value" lines, then recent failures.
std::string SweepStatusText(const v1::SweepInfo& sweep, absl::TimeZone tz);

// `ranksweep results --summary`, from a grouped QueryResultsResponse (groups,
// heads, facts). Per head: a title line, then a table with rank ("-" for
// rank-less heads), n/expected, train error "mean ± ci95" (just the mean when
// n < 2; "-" when n == 0), std, exact seeds "e/n", completeness ("complete"
// or "seed 3 missing"); with `has_test_split` also test error and test exact
// seeds. Then one line per head: "transition rank: 32 (theory: lower bound
// 6, upper bound 24)", "transition rank: undefined (REASON)", or for a
// rank-less head "exact on 3/3 seeds"; with a test split a second line
// "test transition rank: ...". Heads are separated by a blank line. The
// theory part reads "(theory: no bound for this dataset)" when both bounds
// are 0, and is left out when no cell is done (no facts).
//
// The first line names the criterion the coordinator used ("criterion:
// every seed exact (all)") when the reply says it. The theory part is
// printed only beside heads the bounds apply to; beside others it reads
// "(theory: no bound (multi-head))" with the reply's no_bound reason. With
// recipe axes (some group's recipe is not 0) the table gets a RECIPE
// column after RANK.
//
// When the sweep has dataset axes (the reply's `laws`), LawText follows.
std::string SummaryText(const v1::QueryResultsResponse& response, bool has_test_split);

// The transition against each dataset axis (the reply's `laws`), "" when it
// has none. Per axis a table: one row per value, a column per head (the
// train transition, and the test one with a test split; a rank-less head's
// exact seeds), 2^m beside an m axis and the theory lower bound where one
// applies; then per ranked head the fit of log2 transition against the
// axis (law_plot.h FitText), train and test:
//   transition rank against m (best over the other recipe axes)
//     M  KERNEL/ELU1  SOFTMAX        2^M  LOWER BOUND
//     2  4            exact on 3/3   4    -
//   kernel/elu1 fit: log2 r = 1.02 m - 0.10 (slope 95%: 0.84..1.20; 4 values)
std::string LawText(const v1::QueryResultsResponse& response, bool has_test_split);

// The pieces SummaryText and the report (report.h) share:
// "0.250 ± 0.031" (just the mean when n < 2; "-" when n == 0);
std::string ErrorMeanCi(const v1::Aggregate& a, int64_t n);
// "complete", "seed 3 missing", "seeds 3, 5 missing" (8 listed, then "and K more");
std::string CompletenessText(const v1::ResultGroup& g);
// " (theory: lower bound 6, upper bound 24)", " (theory: no bound (signed))",
// " (theory: no bound for this dataset)", or "" without facts;
std::string BoundNote(const v1::QueryResultsResponse& r, const v1::HeadSummary& head);
// whether some group has a recipe other than 0 (the sweep has recipe axes);
bool SummaryHasRecipes(const v1::QueryResultsResponse& r);
// the reply's label of a recipe, "recipe 3" when it has none;
std::string RecipeLabelOf(const v1::QueryResultsResponse& r, int32_t recipe);
// "criterion: mean exact accuracy >= 0.99 (mean:0.99)"; "" when the reply
// does not say (a coordinator that predates criteria).
std::string CriterionLine(const v1::QueryResultsResponse& r);
// One row per group: head, head_index, rank (empty for a head without
// one), n, expected, train error mean/ci95/std (empty when missing), exact
// seeds, test error mean and test exact seeds (empty without a test split),
// missing_seeds ("3;5"), then the head's transition_rank ("" when
// undefined), transition_reason, rank_lower_bound, rank_upper_bound (""
// when the dataset has none or they do not apply to the head), criterion,
// recipe, meets and test_meets (the group's verdict: yes, no, undecided;
// test_meets empty without a test split).
Table SummaryCsvTable(const v1::QueryResultsResponse& response);
// {"criterion": "all" or null, "facts": {...} or null,
//  "heads": [{HeadSummary fields..., "groups": [...]}],
//  "laws": [{AxisLaw fields...}]}  (laws only when the sweep has dataset axes)
// with every field of the messages (proto field names, 64-bit as numbers);
// missing values null: a bound the dataset lacks, the rank of an undefined
// transition, the aggregates ResultGroupJson leaves out.
std::string SummaryJson(const v1::QueryResultsResponse& response);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_SWEEP_VIEWS_H_
