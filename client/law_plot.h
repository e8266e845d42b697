// `ranksweep plot ID --x AXIS`: a head's transition rank against a dataset
// axis (m, pool_size, num_queries, ...) on a log2 rank axis, the figure of
// the paper's central claim that a normalized nonnegative kernel head needs
// 2^Omega(m) features. Input is plain data (the coordinator's AxisLaw
// summaries and each seed's own transition); output is the SVG text, so the
// drawing is unit-tested element by element. No RPCs, no I/O.
//
// What is drawn (docs/ANALYSIS.md, "Transition against the problem size"):
//   * x: the axis' values on a linear scale, a tick at each; y: rank on a
//     log2 scale, a tick at each power of two;
//   * per ranked head: its transition at each value (<circle
//     class="transition">) joined by a solid <path class="transition-line">;
//     at a value where it is undefined, an open triangle at the top
//     (<path class="undefined">); each seed's own transition (the smallest
//     swept rank at which that seed is exact in some recipe of the value) as
//     a small <circle class="seed">; and the least-squares fit of log2
//     transition as a dashed <path class="fit"> across the values, its
//     slope and 95% interval in the legend;
//   * on an m axis, the reference 2^m as a dotted grey <path
//     class="reference">; the dataset's theory lower bound at each value
//     where one applies as grey squares (<rect class="lower-bound">);
//   * heads without a rank (softmax): not on the rank axis; a caption line
//     each says on how many seeds they are exact at each value.
//
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_CLIENT_LAW_PLOT_H_
#define RANKSWEEP_CLIENT_LAW_PLOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/spec/spec.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep::client {

// One seed's own transition at one value of the axis: the smallest swept
// rank at which it is exact (error 0 on the split) in some recipe with that
// value; none when it is exact at no swept rank.
struct SeedTransition {
  int head_index = 0;
  double value = 0;
  uint64_t seed = 0;
  int rank = 0;  // 0: exact at no swept rank
};

// The seeds' own transitions of the ranked heads of `spec` along `axis`,
// from its done rows (`test`: the test split).
std::vector<SeedTransition> SeedTransitions(const SweepSpec& spec,
                                            const std::vector<v1::ResultRow>& rows,
                                            const std::string& axis, bool test);

struct LawPlotInput {
  std::string title;
  std::string subtitle;
  std::string axis;  // "m"
  bool test = false; // which split's transitions and fit
  std::vector<v1::AxisLaw> laws;  // this axis' laws, one per head
  std::vector<SeedTransition> seeds;
  std::vector<std::string> caption;

  // Presentation, as `ranksweep plot`'s flags set it (PlotInput's fields of
  // the same names, plot.h); the defaults draw the figure as it always was.
  bool show_title = true;    // false: no title or subtitle; the plot moves up
  bool show_caption = true;  // false: no caption lines under the x axis
  double font_size = 13;     // the base text size in px; every text and margin scales with it
  int width = 0;             // the figure's size in px: the plot area takes what the legend
  int height = 0;            // and text leave; 0: the default area (540 x 380 px at size 13)
};

// OK, or InvalidArgument when a --size leaves the plot area smaller than
// kMinPlotAreaWidth x kMinPlotAreaHeight (plot.h) with this input's text
// and font size; the error says the smallest size that fits. The flags'
// own ranges are CheckPlotInput's.
absl::Status CheckLawPlotSize(const LawPlotInput& input);

// InvalidArgument-free by design: a law without points draws nothing; a
// size CheckLawPlotSize refuses draws a plot area of its minimum size.
std::string RenderLawSvg(const LawPlotInput& input);

// "log2 r = 1.02 m - 0.10 (95%: 0.84..1.20; 4 values; m = 7 left out)",
// or why there is no fit ("fewer than two values with a transition").
std::string FitText(const v1::LawFit& fit, const std::string& axis);

// A rank-less head's standing at one value: "exact on 3/3 seeds" (its
// summary's reason without "no rank; ", the verdict, and the recipe label
// when the value has one recipe; each recipe's count when it has several).
std::string RanklessText(const v1::HeadSummary& summary, bool test);

// The caption line of a rank-less head along the axis: "softmax (no rank):
// exact on 3/3 seeds at every m (2, 3, 4, 5)" when every value reads the
// same, else each value's text.
std::string RanklessCaption(const v1::AxisLaw& law, const std::string& axis, bool test);

// The subtitle of a law figure: the dataset without the axis' single value,
// then the axis' values: "exhaustive dataset, N = 3, 3 seeds; m = 2, 3, 4, 5".
std::string LawSubtitle(const SweepSpec& spec, const std::string& axis, bool test);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_LAW_PLOT_H_
