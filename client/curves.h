// Learning curves on the client: `ranksweep results ID --curves` (one line
// per evaluation of each seed: table, CSV or JSON) and `ranksweep plot ID
// --curves` (a panel per head, rank and recipe: each seed's curve as a thin
// line, their mean bold). Input is the rows of a QueryResults reply asked
// for with `curves` (each DONE row's SeedResult.curve); output is text, so
// the forms and the drawing are unit-tested. No RPCs, no I/O.
//
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_CLIENT_CURVES_H_
#define RANKSWEEP_CLIENT_CURVES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/format.h"
#include "common/spec/curve.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep::client {

// One seed's curve with the cell it belongs to.
struct SeedCurve {
  std::string sweep_id;
  int64_t cell_id = 0;
  std::string head;  // HeadLabel
  int head_index = 0;
  int rank = 0;      // 0: a head without a rank
  int recipe = 0;
  uint64_t seed = 0;
  Curve curve;
};

// The curves of the DONE rows of `rows` that have one, in row order.
std::vector<SeedCurve> CurvesOfRows(const std::vector<v1::ResultRow>& rows);

// One line per point: head, rank, the recipe's axes (upper-case, as the
// results table), seed, step, loss, train error and position accuracy,
// and with a test split the test ones ("-" without).
Table CurvesTable(const std::vector<SeedCurve>& curves, const RecipeAxes& axes);
// The CSV form: sweep_id, cell_id, head, rank (empty for 0), recipe, one
// column per axis, seed, step, loss, train_error, train_position_accuracy,
// test_error, test_position_accuracy (empty without a test split); floats
// as the shortest text that reads back as the same float.
std::string CurvesCsv(const std::vector<SeedCurve>& curves, const RecipeAxes& axes);
// A JSON array with one object per point and the CSV's keys (a missing
// value is null), one object per line.
std::string CurvesJson(const std::vector<SeedCurve>& curves, const RecipeAxes& axes);

// What `plot --curves` draws: "error" (1 - exact accuracy), "loss" or
// "position_accuracy", on the train or test split (no loss on test).
struct CurvePlotInput {
  std::string title;
  std::string subtitle;
  std::string metric = "error";
  bool test = false;
  std::vector<SeedCurve> curves;
  // The recipe labels of a sweep with axes ("lr=0.01"), by recipe index;
  // empty without axes.
  std::vector<std::string> recipe_labels;

  // Presentation, as `ranksweep plot`'s flags set it (PlotInput's fields of
  // the same names, plot.h); the defaults draw the figure as it always was.
  bool show_title = true;    // false: no title, subtitle or key line; the panels move up
  bool show_caption = true;  // false: no x-axis label under the panels
  double font_size = 13;     // the base text size in px; text and margins scale with it
  int width = 0;             // the figure's size in px: the panels share what the margins
  int height = 0;            // leave; 0: 230 x 170 px panels at size 13
};

// OK, or InvalidArgument when a --size leaves each panel smaller than
// kMinPlotAreaWidth x kMinPlotAreaHeight (plot.h); the error says the
// smallest size that fits. The flags' own ranges are CheckPlotRanges'.
absl::Status CheckCurvePlotSize(const CurvePlotInput& in);

// InvalidArgument naming the flag for a metric or split it cannot draw,
// or for curves that have no test split when `test` is asked.
absl::Status CheckCurvePlot(const CurvePlotInput& in);

// The mean over seeds at every step any of them evaluated, a seed that
// stopped early (every seed exact for early_stop_evals evaluations) keeping
// its last value: the value the mean line draws. `values[i]` is seed i's
// curve of (step, value) pairs, each ascending in step.
std::vector<std::pair<int64_t, double>> MeanCurve(
    const std::vector<std::vector<std::pair<int64_t, double>>>& values);

// The figure as SVG: panels in rows of at most four, one per (head, rank,
// recipe) in head, rank, recipe order, each titled "kernel/elu1 r=8" (and
// the recipe's label); x: step, linear from 0 to the last step of any
// curve; y: the metric, 0..1 (loss: 0 to the largest loss drawn). Each
// seed is a <path class="seed-line">, the mean a <path class="mean-line">.
std::string RenderCurvesSvg(const CurvePlotInput& in);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_CURVES_H_
