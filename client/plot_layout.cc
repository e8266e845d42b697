// Where the rank plot's pieces go (plot.h, PlotLayout): the x range over
// the swept ranks and bounds, the plot area beside the legend, tick,
// bound, legend and caption labels placed so that none overlaps another,
// and the check that a --size and --font-size leave room for them.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/plot.h"
#include "client/plot_internal.h"
#include "common/status_macros.h"

namespace ranksweep::client {
namespace plot_internal {

Values GroupValues(const PlotInput& input) {
  std::map<int, bool> has_rank;
  for (const PlotHead& h : input.heads) has_rank[h.head_index] = h.has_rank;
  Values values;
  for (const PlotPoint& p : input.points) {
    auto it = has_rank.find(p.head_index);
    if (it == has_rank.end() || (it->second && p.rank <= 0)) continue;
    values[p.head_index][it->second ? p.rank : 0].push_back(p.value);
  }
  return values;
}

std::vector<int> SweptRanks(const PlotHead& h, const Values& values) {
  std::set<int> ranks;
  for (int r : h.ranks) {
    if (r > 0) ranks.insert(r);
  }
  if (ranks.empty()) {
    auto it = values.find(h.head_index);
    if (it != values.end()) {
      for (const auto& [rank, v] : it->second) ranks.insert(rank);
    }
  }
  return {ranks.begin(), ranks.end()};
}

std::vector<std::vector<int>> RankRuns(const PlotHead& h, const Values& values) {
  std::vector<std::vector<int>> runs;
  auto it = values.find(h.head_index);
  if (!h.has_rank || it == values.end()) return runs;
  int previous = 0;
  for (int r : SweptRanks(h, values)) {
    if (it->second.count(r) == 0) {
      previous = 0;
      continue;
    }
    if (previous > 0 && r <= 2 * previous) {
      runs.back().push_back(r);
    } else {
      runs.push_back({r});
    }
    previous = r;
  }
  return runs;
}

}  // namespace plot_internal

using plot_internal::GroupValues;
using plot_internal::RankRuns;
using plot_internal::SweptRanks;
using plot_internal::Values;
using plot_internal::FontScale;
using plot_internal::kCaptionFontSize;
using plot_internal::kFontSize;
using plot_internal::kLegendFontSize;
using plot_internal::kNoteFontSize;

double PlotLayout::XForLog2(double log2_rank) const {
  return left + (log2_rank - log2_min) / (log2_max - log2_min) * (right - left);
}

double PlotLayout::XForRank(double rank) const { return XForLog2(std::log2(rank)); }

double PlotLayout::YForValue(double value) const {
  constexpr double kLo = -0.03, kHi = 1.03;
  return bottom - (value - kLo) / (kHi - kLo) * (bottom - top);
}

PlotLayout ComputePlotLayout(const PlotInput& input) {
  PlotLayout l;
  const Values values = GroupValues(input);
  // Text sizes and the offsets that hold text scale with the font size;
  // marks do not.
  const double k = FontScale(input);
  const double font = kFontSize * k, legend_font = kLegendFontSize * k,
               note_font = kNoteFontSize * k, caption_font = kCaptionFontSize * k;
  l.left = 70 * k;
  l.top = input.show_title ? 70 * k : 20 * k;
  std::set<int> ticks;
  for (const PlotHead& h : input.heads) {
    if (!h.has_rank) {
      l.has_no_rank_column = true;
      continue;
    }
    for (int r : SweptRanks(h, values)) ticks.insert(r);
  }
  l.tick_ranks.assign(ticks.begin(), ticks.end());
  double lo = INFINITY, hi = -INFINITY;
  auto cover = [&](double rank) {
    if (rank <= 0) return;
    lo = std::min(lo, std::log2(rank));
    hi = std::max(hi, std::log2(rank));
  };
  for (int r : l.tick_ranks) cover(r);
  for (const PlotBound& b : input.bounds) cover(static_cast<double>(b.rank));
  if (!std::isfinite(lo)) {
    lo = 0;
    hi = 1;
  }
  l.log2_min = lo - 0.5;
  l.log2_max = hi + 0.5;
  if (l.has_no_rank_column) {
    l.no_rank_log2 = hi + 1.0;
    l.log2_max = hi + 1.5;
  }

  // The legend's text: one row per head, then the key to the marks; its
  // widest row decides where the plot area ends.
  std::vector<std::pair<std::string, bool>> legend_rows;  // text, is a note
  for (const PlotHead& h : input.heads) legend_rows.emplace_back(h.label, false);
  // The key to the dotted line only when some line has a gap to dot; the
  // band's says from how many seeds it is drawn.
  legend_rows.emplace_back("marker: mean over seeds", true);
  legend_rows.emplace_back(input.all_bands ? "band: 95% interval of the mean"
                                           : absl::StrCat("band: 95% CI of the mean, ",
                                                          kMinSeedsForBand, "+ seeds"),
                           true);
  legend_rows.emplace_back("dots: one per seed", true);
  if (std::any_of(input.heads.begin(), input.heads.end(),
                  [&](const PlotHead& h) { return RankRuns(h, values).size() > 1; })) {
    legend_rows.emplace_back("dotted: ranks not swept", true);
  }
  double widest = 0;
  for (const auto& [text, note] : legend_rows) {
    widest = std::max(widest, note ? EstimateTextWidth(text, note_font)
                                   : 34 + EstimateTextWidth(text, legend_font));
  }
  // The legend is 24 px right of the plot area, 6 px of margin around its
  // rows, the figure 16 px wider than the legend.
  if (input.width > 0) {
    l.width = input.width;
    l.right = l.width - 46 - widest;
  } else {
    l.right = l.left + 620;
    l.width = std::max(l.left + 830, std::ceil(l.right + 46 + widest));
  }

  // The caption, each line broken at spaces to fit the figure's width.
  std::vector<std::string> caption_lines;
  const double caption_width = l.width - l.left - 16;
  if (input.show_caption) {
    for (const std::string& line : input.caption) {
      std::string current;
      const std::vector<std::string> words = absl::StrSplit(line, ' ');
      for (const std::string& word : words) {
        const std::string longer = current.empty() ? word : absl::StrCat(current, " ", word);
        if (!current.empty() && EstimateTextWidth(longer, caption_font) > caption_width) {
          caption_lines.push_back(current);
          current = word;
        } else {
          current = longer;
        }
      }
      caption_lines.push_back(current);
    }
  }
  // Under the plot area: tick labels, the x label at 42 px, then the
  // caption from 66 px, 16 px a line.
  const double footer = input.show_caption
                            ? (72 + 16 * static_cast<double>(caption_lines.size())) * k
                            : 50 * k;
  l.bottom = input.height > 0 ? input.height - footer : l.top + 400;

  // Tick labels under the axis, left to right; one that would touch the
  // previous label is left out (its tick stays).
  double last_end = -INFINITY;
  for (int r : l.tick_ranks) {
    PlotLabel t;
    t.text = absl::StrCat(r);
    t.x = l.XForRank(r);
    t.y = l.bottom + 18 * k;
    const double w = EstimateTextWidth(t.text, font);
    t.box = {t.x - w / 2, t.y - font, t.x + w / 2, t.y + 3 * k};
    if (t.box.x0 < last_end + 4) continue;
    last_end = t.box.x1;
    l.tick_labels.push_back(std::move(t));
  }

  // Bound labels: inside the top of the plot area, right of their line (left
  // of it when they would cross the right edge), each in the first row where
  // it touches no label already placed.
  std::vector<PlotBound> bounds = input.bounds;
  std::sort(bounds.begin(), bounds.end(),
            [](const PlotBound& a, const PlotBound& b) { return a.rank < b.rank; });
  std::set<std::pair<int64_t, std::string>> seen;
  for (const PlotBound& b : bounds) {
    if (b.rank <= 0 || !seen.insert({b.rank, b.label}).second) continue;
    PlotLabel label;
    label.text = b.label;
    const double x = l.XForRank(static_cast<double>(b.rank));
    const double w = EstimateTextWidth(b.label, font);
    label.anchor_end = x + 4 + w > l.right - 2;
    label.x = label.anchor_end ? x - 4 : x + 4;
    double x0 = label.anchor_end ? label.x - w : label.x;
    // A plot area too narrow for the label on either side of its line (a
    // small --size, a large --font-size): slid inside, on its white ground.
    if (x0 < l.left + 2) {
      x0 = std::min(l.left + 2, l.right - 2 - w);
      label.x = label.anchor_end ? x0 + w : x0;
    }
    for (int row = 0;; ++row) {
      label.y = l.top + (16 + 17 * row) * k;
      label.box = {x0 - 2, label.y - font, x0 + w + 2, label.y + 4 * k};
      bool clear = true;
      for (const PlotLabel& other : l.bound_labels) clear &= !other.box.Overlaps(label.box);
      if (clear) break;
    }
    l.bound_labels.push_back(std::move(label));
  }

  // The legend: right of the plot area, one row per head, then the key.
  const double lx = l.right + 24;
  double y = l.top + 10 * k;
  for (const auto& [text, note] : legend_rows) {
    PlotLabel label;
    label.text = text;
    if (note) {
      label.x = lx;
      label.y = y + 8 * k;
      label.box = {lx, label.y - note_font, lx + EstimateTextWidth(text, note_font),
                   label.y + 3 * k};
      y += 15 * k;
    } else {
      label.x = lx + 34;
      label.y = y + 4 * k;
      label.box = {label.x, label.y - legend_font,
                   label.x + EstimateTextWidth(text, legend_font), label.y + 4 * k};
      y += 22 * k;
    }
    l.legend_labels.push_back(std::move(label));
  }
  l.legend = {lx - 6, l.top, lx + widest + 6, std::max(y + 8 * k, l.top + 20 * k)};

  double cy = l.bottom + 66 * k;
  for (const std::string& text : caption_lines) {
    PlotLabel label;
    label.text = text;
    label.x = l.left;
    label.y = cy;
    label.box = {l.left, cy - caption_font, l.left + EstimateTextWidth(text, caption_font),
                 cy + 4 * k};
    l.caption_labels.push_back(std::move(label));
    cy += 16 * k;
  }
  l.height = input.height > 0 ? input.height
                              : std::max(l.bottom + footer, std::ceil(l.legend.y1 + 16));
  return l;
}

absl::Status CheckPlotInput(const PlotInput& input) {
  RETURN_IF_ERROR(CheckPlotRanges(input));
  const PlotLayout l = ComputePlotLayout(input);
  if (input.width > 0 && l.right - l.left < kMinPlotAreaWidth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--size: a width of ", input.width, " px leaves the plot area ",
        static_cast<int>(std::floor(std::max(0.0, l.right - l.left))),
        " px wide beside the legend (at least ",
        kMinPlotAreaWidth, " px); use a width of at least ",
        static_cast<int>(std::ceil(input.width + kMinPlotAreaWidth - (l.right - l.left))),
        " or a smaller --font-size"));
  }
  if (input.height > 0) {
    // The legend, as high as its rows, must fit as well as the plot area.
    const double need = std::max(kMinPlotAreaHeight - (l.bottom - l.top),
                                 std::ceil(l.legend.y1 + 16) - l.height);
    if (need > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--size: a height of ", input.height, " px leaves the plot area ",
          static_cast<int>(std::floor(std::max(0.0, l.bottom - l.top))),
          " px high with the title, caption and legend (at least ", kMinPlotAreaHeight,
          " px, and room for the legend); use a height of at least ",
          static_cast<int>(std::ceil(input.height + need)),
          ", --no-title, --no-caption or a smaller --font-size"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ranksweep::client
