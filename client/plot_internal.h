// What the rank plot's files (plot_layout.cc, plot.cc) share: the
// seeds' values grouped by head and rank, the ranks each head swept and
// its runs of adjacent ones, and the text sizes. The figures' public
// pieces are in plot.h.
//
// Internal to the rank plot (plot*.cc).
#ifndef RANKSWEEP_CLIENT_PLOT_INTERNAL_H_
#define RANKSWEEP_CLIENT_PLOT_INTERNAL_H_

#include <map>
#include <vector>

#include "client/plot.h"

namespace ranksweep::client::plot_internal {

// Per head: the seeds' values at each rank (rank 0 for a rank-less head).
using Values = std::map<int, std::map<int, std::vector<double>>>;

Values GroupValues(const PlotInput& input);

// The ranks a head swept, ascending: its sweep's, else those of its points.
std::vector<int> SweptRanks(const PlotHead& h, const Values& values);

// The runs of a ranked head's swept ranks with data, joined where adjacent;
// a swept rank without data, or a skipped power of two, ends a run. Two
// runs are joined by a dotted gap.
std::vector<std::vector<int>> RankRuns(const PlotHead& h, const Values& values);

inline constexpr double kFontSize = 13;
inline constexpr double kLegendFontSize = 12;
inline constexpr double kCaptionFontSize = 12;
inline constexpr double kNoteFontSize = 11;

// Text sizes relative to the default 13 px (PlotInput::font_size).
inline double FontScale(const PlotInput& input) {
  const double f = input.font_size;
  return f >= kMinPlotFontSize && f <= kMaxPlotFontSize ? f / kFontSize : 1.0;
}

}  // namespace ranksweep::client::plot_internal

#endif  // RANKSWEEP_CLIENT_PLOT_INTERNAL_H_
