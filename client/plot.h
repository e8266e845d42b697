// `ranksweep plot`: sweeps' metric against feature rank as a standalone SVG
// a paper can print. Input is plain data (one point per done seed, one head
// per line, any number of sweeps); output is the SVG text, so the drawing is
// unit-tested element by element, and its geometry (where each label and the
// legend go) is computed apart from the drawing so tests can check that
// nothing overlaps. No RPCs, no I/O.
//
// What is drawn (docs/ANALYSIS.md, "The plot"):
//   * x: feature rank on a log2 axis with a tick at every swept rank;
//     y: the metric, 0..1;
//   * per head with a rank: a marker at the mean over seeds at each swept
//     rank (class="mean-marker": a circle, or past the palette's seven
//     colours a square, triangle or diamond; PlotStyleOf), a <path
//     class="mean"> between adjacent swept ranks (solid, or past seven
//     lines dashed), and the 95% t interval of the mean as a shaded <path
//     class="band"> along it (a vertical <line class="ci"> at a rank with
//     no neighbour to join), at ranks with kMinSeedsForBand seeds or more
//     unless PlotInput::all_bands. A "gap" — adjacent swept ranks more
//     than a factor of two apart, or a swept rank without a done seed in
//     between — is a thin dotted <path class="gap">: the markers carry the
//     data, and the dotted line claims nothing about the ranks it crosses;
//   * one <circle class="seed"> per point (every seed), jittered sideways by
//     a few pixels (deterministically, from head and seed);
//   * heads without a rank (softmax, rank-less constructions): a dashed
//     horizontal reference <line class="flat"> at their mean across the plot,
//     their seeds and mean at a marked "no rank" column right of the largest
//     rank (never at rank 0, which a log2 axis cannot show);
//   * the theory bounds as dashed vertical <line class="bound">, labelled
//     inside the top of the plot area in rows chosen so that no two labels
//     collide, each on a white ground so another bound's line never strikes
//     it out;
//   * the legend outside the plot area, right of it (the figure widens to fit
//     the longest label), so it never covers a label or a point; below the
//     lines a key to the marks, "dotted: ranks not swept" only when some
//     line has a gap;
//   * title, subtitle, axis labels, and a caption under the x axis with the
//     sweep id(s) and the criterion; title and caption can be left out, and
//     the figure's size and text size set (PlotInput's presentation fields).
//
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_CLIENT_PLOT_H_
#define RANKSWEEP_CLIENT_PLOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/spec/spec.h"

namespace ranksweep::client {

// One line of the figure: a head of a sweep.
struct PlotHead {
  int head_index = 0;    // the id points refer to; unique within a PlotInput
  std::string label;     // e.g. "kernel/elu1", or "demo: kernel/elu1" with several sweeps
  bool has_rank = true;  // false: drawn as a horizontal reference line
  std::vector<int> ranks;  // the ranks its sweep swept; empty = those of its points
};

struct PlotPoint {
  int head_index = 0;
  int rank = 0;  // ignored for heads without a rank
  uint64_t seed = 0;
  double value = 0;  // the metric, expected in [0, 1]
};

struct PlotBound {
  int64_t rank = 0;   // > 0
  std::string label;  // e.g. "upper bound 24"
};

// Below this many seeds at a rank the 95% band is left out unless asked for
// (PlotInput::all_bands): with two seeds Student's t is 12.7 and the band
// covers the whole axis, saying nothing.
constexpr int kMinSeedsForBand = 3;

struct PlotInput {
  std::string title;     // e.g. "witness-m24"
  std::string subtitle;  // e.g. "witness dataset, m = 24, N = 3, 5 seeds"
  std::string y_label;   // e.g. "error (1 - exact-sequence accuracy)"
  std::vector<std::string> caption;  // lines under the x axis: sweep ids, criterion
  std::vector<PlotHead> heads;       // legend order; points of unknown heads are dropped
  std::vector<PlotPoint> points;     // one per done seed
  std::vector<PlotBound> bounds;     // theory bounds; equal ones are drawn once

  // Presentation (`ranksweep plot`'s flags); the defaults draw the figure
  // as it always was. CheckPlotInput says whether a combination fits.
  bool show_title = true;    // false (--no-title): no title or subtitle; the plot moves up
  bool show_caption = true;  // false (--no-caption): no caption lines under the x axis
  bool all_bands = false;    // true (--bands): the band also below kMinSeedsForBand seeds
  double font_size = 13;     // the base text size in px (--font-size); other text scales with it
  int width = 0;             // the figure's size in px (--size WxH): the plot area takes what
  int height = 0;            // the legend and text leave; 0: as large as the text needs
};

// Font sizes and figure sizes `ranksweep plot` accepts.
constexpr double kMinPlotFontSize = 6, kMaxPlotFontSize = 40;
constexpr int kMinPlotSize = 200, kMaxPlotSize = 10000;
// The plot area (inside the axes) a --size must leave, in px.
constexpr double kMinPlotAreaWidth = 120, kMinPlotAreaHeight = 80;

// How a line of a figure is told apart: `color` from a colour-blind-safe
// palette (Okabe-Ito, without the yellow that vanishes on white), and past
// its seven colours a dash pattern and a marker shape, so no two of the
// first kDistinctPlotStyles lines look the same.
struct PlotStyle {
  const char* color;  // "#0072B2"
  const char* dash;   // an SVG stroke-dasharray; "" is solid
  int marker;         // 0 circle, 1 square, 2 triangle, 3 diamond
};
constexpr size_t kPlotColors = 7;
constexpr size_t kDistinctPlotStyles = kPlotColors * 16;
PlotStyle PlotStyleOf(size_t line);

// One marker of `shape` (PlotStyle::marker) centred at (x, y) with
// "radius" r: `<circle class=...>`, `<rect ...>` or `<path ...>`, with the
// given attributes (fill, stroke, ...) after the geometry.
std::string PlotMarkerSvg(int shape, const char* cls, double x, double y, double r,
                          const std::string& attributes);

// An axis-aligned box in SVG pixels.
struct PlotBox {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool Overlaps(const PlotBox& other) const;
  bool Inside(const PlotBox& other) const;
};

struct PlotLabel {
  std::string text;
  double x = 0, y = 0;      // the text's anchor point (baseline)
  bool anchor_end = false;  // text-anchor="end": the text ends at x
  PlotBox box;              // where the text lies (estimated glyph widths)
};

// Where things go; exposed so tests can check positions and overlaps.
struct PlotLayout {
  double width = 900, height = 560;
  double left = 70, right = 690, top = 70, bottom = 470;  // the plot area
  double log2_min = 0, log2_max = 1;  // x range in log2(rank)
  double no_rank_log2 = 0;            // x of the "no rank" column (log2 units)
  bool has_no_rank_column = false;
  std::vector<int> tick_ranks;        // swept ranks, ascending: one tick each
  std::vector<PlotLabel> tick_labels; // the ticks whose labels fit (no two overlap)
  std::vector<PlotLabel> bound_labels;
  PlotBox legend;                     // right of the plot area
  std::vector<PlotLabel> legend_labels;
  std::vector<PlotLabel> caption_labels;  // the caption, wrapped to the figure's width

  PlotBox Area() const { return {left, top, right, bottom}; }
  double XForLog2(double log2_rank) const;
  double XForRank(double rank) const;
  double YForValue(double value) const;  // value 0 at the bottom, 1 at the top
};

// Text for SVG: &, <, > and " escaped.
std::string SvgEscape(const std::string& s);
// A coordinate with one decimal, as every figure writes them.
std::string SvgNum(double v);

// Text width at the plot's 13 px sans-serif, on the safe side (wide glyphs).
double EstimateTextWidth(const std::string& text, double font_size = 13);

// The x range covers the swept ranks and the bounds, with half a power of
// two to spare on each side (and room for the "no rank" column when a head
// has no rank); ranks 1..2 when there are none.
PlotLayout ComputePlotLayout(const PlotInput& input);

std::string RenderPlotSvg(const PlotInput& input);

// InvalidArgument, naming the flag and its allowed range, when the
// presentation fields cannot be drawn: a font size outside
// [kMinPlotFontSize, kMaxPlotFontSize], a width or height outside
// [kMinPlotSize, kMaxPlotSize], or a --size that leaves the plot area less
// than kMinPlotAreaWidth x kMinPlotAreaHeight beside the legend and text
// (the error says the smallest size that fits). RenderPlotSvg draws any
// input; the CLI checks first.
absl::Status CheckPlotInput(const PlotInput& input);
// The flags' own ranges alone (font size, width and height), for a figure
// with a layout of its own (the transition figure, law_plot.h).
absl::Status CheckPlotRanges(const PlotInput& input);

// The seeds behind each line: the number of distinct seeds among its
// points. When every line with points has the same number, returns it;
// otherwise appends " (n = K)" to each such line's legend label and
// returns 0, for PlotCriterion to say the legend holds the counts.
int MarkSeedCounts(PlotInput* input);

// The 95% interval half-width of the mean of `values` (Student's t, n-1
// degrees of freedom); 0 for fewer than two values.
double MeanCi95(const std::vector<double>& values);

// The subtitle of a sweep's plot: "witness dataset, m = 24, N = 3, 5 seeds"
// (", test split" when plotting it). A sweep trained with loss ce that has a
// trained kernel-type head adds "; loss ce: kernel transitions do not test
// the rank bound", since its argmax readout is not the paper's model
// (docs/TRAINER.md) and a plot travels without the summary's caveat.
std::string PlotSubtitle(const SweepSpec& spec, bool test_split);

// The caption's criterion line: what is plotted and how the transition rank
// is read off it. `seeds`: the seeds of every line (MarkSeedCounts), or 0
// when lines differ and the legend gives each line's count. `all_bands`:
// the band is drawn at every rank with two seeds or more (--bands), else
// only from kMinSeedsForBand seeds, and the line says so.
std::string PlotCriterion(const std::string& metric, bool test_split, int seeds,
                          bool all_bands = false);

// The PNG of an SVG document (librsvg renders, cairo encodes), at `scale`
// device pixels per SVG pixel (2: 1800 px wide for the default figure).
// InvalidArgument when librsvg cannot read the document.
absl::StatusOr<std::string> RenderSvgToPng(const std::string& svg, double scale = 2);

// The PDF of an SVG document (librsvg draws onto a cairo PDF surface):
// vector paths and embedded fonts, one page the size of the figure at 96
// SVG pixels to the inch (a 900 x 560 figure is a 675 x 420 pt page).
// InvalidArgument when librsvg cannot read the document.
absl::StatusOr<std::string> RenderSvgToPdf(const std::string& svg);

// The figure formats `ranksweep plot` writes.
enum class FigureFormat { kSvg, kPng, kPdf };

// The format of a figure file: `format` ("svg", "png", "pdf") when given,
// else the file name's extension. InvalidArgument naming -o or --format
// when neither says one, the format is unknown, or they disagree.
absl::StatusOr<FigureFormat> ResolveFigureFormat(const std::string& path,
                                                 const std::string& format);

// `svg` as the bytes of a file in `format` (PNG at twice its size).
absl::StatusOr<std::string> EncodeFigure(const std::string& svg, FigureFormat format);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_PLOT_H_
