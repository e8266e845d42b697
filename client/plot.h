// `ranksweep plot`: a sweep's metric against feature rank as a standalone
// SVG. Input is plain data (one point per done seed); output is the SVG text,
// so the drawing is unit-tested element by element. No RPCs, no I/O.
//
// What is drawn (docs/ANALYSIS.md, "The plot"):
//   * x: feature rank on a log2 axis, ticks at the powers of two in range;
//     y: the metric, 0..1;
//   * one <polyline class="mean"> per head with a rank, through the mean
//     over seeds at each rank, in the head's colour;
//   * one <circle> per point (every seed), jittered sideways by a few pixels
//     (deterministically, from head and seed) so equal values stay visible;
//   * heads without a rank (softmax, rank-less constructions): a dashed
//     horizontal <line class="flat"> at their mean across the plot, their
//     seeds as circles in a "no rank" column right of the largest rank;
//   * the theory bounds (when > 0) as dashed vertical <line class="bound">
//     with a label ("lower bound 8", "upper bound 24");
//   * a legend (one entry per head), axis labels, the title and subtitle.
//
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_CLIENT_PLOT_H_
#define RANKSWEEP_CLIENT_PLOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec/spec.h"

namespace ranksweep::client {

struct PlotHead {
  int head_index = 0;
  std::string label;     // e.g. "kernel/elu1"
  bool has_rank = true;  // false: drawn as a horizontal line
};

struct PlotPoint {
  int head_index = 0;
  int rank = 0;  // ignored for heads without a rank
  uint64_t seed = 0;
  double value = 0;  // the metric, expected in [0, 1]
};

struct PlotInput {
  std::string title;     // e.g. "witness-m24"
  std::string subtitle;  // e.g. "witness dataset, m = 24, N = 3, 5 seeds"
  std::string y_label;   // e.g. "error (1 - exact-sequence accuracy)"
  std::vector<PlotHead> heads;    // legend order; points of unknown heads are dropped
  std::vector<PlotPoint> points;  // one per done seed
  int64_t lower_bound = 0;        // theory bounds; 0 = none
  int64_t upper_bound = 0;
};

// Where things go; exposed so tests can check positions.
struct PlotLayout {
  double width = 900, height = 540;
  double left = 70, right = 690, top = 70, bottom = 470;  // the plot area
  double log2_min = 0, log2_max = 1;  // x range in log2(rank)
  double no_rank_log2 = 0;            // x of the "no rank" column (log2 units)
  bool has_no_rank_column = false;

  double XForLog2(double log2_rank) const;
  double XForRank(double rank) const;
  double YForValue(double value) const;  // value 0 at the bottom, 1 at the top
};

// The x range covers the ranks of the points and the bounds, with half a
// power of two to spare on each side (and room for the "no rank" column
// when a head has no rank); ranks 1..2 when there are none.
PlotLayout ComputePlotLayout(const PlotInput& input);

std::string RenderPlotSvg(const PlotInput& input);

// The subtitle of a sweep's plot: "witness dataset, m = 24, N = 3, 5 seeds"
// (", test split" when plotting it). A sweep trained with loss ce that has a
// trained kernel-type head adds "; loss ce: kernel transitions do not test
// the rank bound", since its argmax readout is not the paper's model
// (docs/TRAINER.md) and a plot travels without the summary's caveat.
std::string PlotSubtitle(const SweepSpec& spec, bool test_split);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_PLOT_H_
