#include "client/plot.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ranksweep::client {

std::string SvgEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string SvgNum(double v) { return absl::StrFormat("%.1f", v); }

namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};


// A few pixels of sideways jitter, the same for the same (head, seed).
double Jitter(int head_index, uint64_t seed) {
  const uint64_t h = (seed * 2654435761u + static_cast<uint64_t>(head_index) * 40503u) % 9;
  return (static_cast<double>(h) - 4.0) * 1.5;
}

}  // namespace

namespace {

// Two-sided 95% quantiles of Student's t for df = 1..30; 1.96 beyond (the
// plot's band, not a test statistic: the summary's numbers come from the
// coordinator).
double TQuantile975(size_t df) {
  constexpr double kT975[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                              2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                              2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                              2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (df == 0) return 0;
  return df <= std::size(kT975) ? kT975[df - 1] : 1.96;
}

// Per head: the seeds' values at each rank (rank 0 for a rank-less head).
using Values = std::map<int, std::map<int, std::vector<double>>>;

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

// The ranks a head swept, ascending: its sweep's, else those of its points.
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

// The runs of a ranked head's swept ranks with data, joined where adjacent;
// a swept rank without data, or a skipped power of two, ends a run. Two
// runs are joined by a dotted gap.
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

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

constexpr double kFontSize = 13;
constexpr double kLegendFontSize = 12;
constexpr double kCaptionFontSize = 12;

}  // namespace

bool PlotBox::Overlaps(const PlotBox& o) const {
  return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1;
}

bool PlotBox::Inside(const PlotBox& o) const {
  return x0 >= o.x0 && x1 <= o.x1 && y0 >= o.y0 && y1 <= o.y1;
}

double EstimateTextWidth(const std::string& text, double font_size) {
  // 0.62 em per character is above the average advance of common sans-serif
  // faces (0.5-0.56 em), so a box estimated here contains the drawn text.
  double chars = 0;
  for (unsigned char c : text) chars += (c & 0xC0) == 0x80 ? 0 : 1;  // UTF-8 lead bytes
  return chars * 0.62 * font_size;
}

double MeanCi95(const std::vector<double>& values) {
  const size_t n = values.size();
  if (n < 2) return 0;
  const double mean = Mean(values);
  double ss = 0;
  for (double x : values) ss += (x - mean) * (x - mean);
  const double sd = std::sqrt(ss / static_cast<double>(n - 1));
  return TQuantile975(n - 1) * sd / std::sqrt(static_cast<double>(n));
}

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

  // Tick labels under the axis, left to right; one that would touch the
  // previous label is left out (its tick stays).
  double last_end = -INFINITY;
  for (int r : l.tick_ranks) {
    PlotLabel t;
    t.text = absl::StrCat(r);
    t.x = l.XForRank(r);
    t.y = l.bottom + 18;
    const double w = EstimateTextWidth(t.text);
    t.box = {t.x - w / 2, t.y - kFontSize, t.x + w / 2, t.y + 3};
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
    const double w = EstimateTextWidth(b.label);
    label.anchor_end = x + 4 + w > l.right - 2;
    label.x = label.anchor_end ? x - 4 : x + 4;
    const double x0 = label.anchor_end ? label.x - w : label.x;
    for (int row = 0;; ++row) {
      label.y = l.top + 16 + 17 * row;
      label.box = {x0 - 2, label.y - kFontSize, x0 + w + 2, label.y + 4};
      bool clear = true;
      for (const PlotLabel& other : l.bound_labels) clear &= !other.box.Overlaps(label.box);
      if (clear) break;
    }
    l.bound_labels.push_back(std::move(label));
  }

  // The legend: right of the plot area, one row per head, then the key to
  // the marks; the figure is as wide as it needs to be.
  const double lx = l.right + 24;
  double widest = 0;
  double y = l.top + 10;
  for (const PlotHead& h : input.heads) {
    PlotLabel label;
    label.text = h.label;
    label.x = lx + 34;
    label.y = y + 4;
    const double w = EstimateTextWidth(h.label, kLegendFontSize);
    label.box = {label.x, label.y - kLegendFontSize, label.x + w, label.y + 4};
    widest = std::max(widest, 34 + w);
    l.legend_labels.push_back(std::move(label));
    y += 22;
  }
  // The key to the dotted line only when some line has a gap to dot.
  std::vector<const char*> notes = {"marker: mean over seeds", "band: 95% interval of the mean",
                                    "dots: one per seed"};
  if (std::any_of(input.heads.begin(), input.heads.end(),
                  [&](const PlotHead& h) { return RankRuns(h, values).size() > 1; })) {
    notes.push_back("dotted: ranks not swept");
  }
  for (const char* note : notes) {
    PlotLabel label;
    label.text = note;
    label.x = lx;
    label.y = y + 8;
    const double w = EstimateTextWidth(note, 11);
    label.box = {lx, label.y - 11, lx + w, label.y + 3};
    widest = std::max(widest, w);
    l.legend_labels.push_back(std::move(label));
    y += 15;
  }
  l.legend = {lx - 6, l.top, lx + widest + 6, std::max(y + 8, l.top + 20)};
  l.width = std::max(900.0, std::ceil(l.legend.x1 + 16));

  // The caption under the x label, each line broken at spaces to fit the
  // figure's width.
  const double caption_width = l.width - l.left - 16;
  double cy = l.bottom + 66;
  for (const std::string& line : input.caption) {
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    std::string current;
    auto flush = [&] {
      PlotLabel label;
      label.text = current;
      label.x = l.left;
      label.y = cy;
      label.box = {l.left, cy - kCaptionFontSize,
                   l.left + EstimateTextWidth(current, kCaptionFontSize), cy + 4};
      l.caption_labels.push_back(std::move(label));
      cy += 16;
      current.clear();
    };
    for (const std::string& word : words) {
      const std::string longer = current.empty() ? word : absl::StrCat(current, " ", word);
      if (!current.empty() && EstimateTextWidth(longer, kCaptionFontSize) > caption_width) {
        flush();
        current = word;
      } else {
        current = longer;
      }
    }
    flush();
  }
  l.height = std::max(cy + 6, std::ceil(l.legend.y1 + 16));
  return l;
}

std::string RenderPlotSvg(const PlotInput& input) {
  const PlotLayout l = ComputePlotLayout(input);
  const Values values = GroupValues(input);
  std::map<int, size_t> position;  // head_index -> legend position
  for (size_t i = 0; i < input.heads.size(); ++i) position[input.heads[i].head_index] = i;
  auto color = [&](size_t pos) { return kPalette[pos % std::size(kPalette)]; };
  const double n_heads = static_cast<double>(input.heads.size());
  // Heads side by side at one rank: a small fixed offset per head.
  auto head_offset = [&](size_t pos) { return (static_cast<double>(pos) - (n_heads - 1) / 2) * 5; };
  auto label_text = [](const PlotLabel& t, const char* cls, const char* extra) {
    return absl::StrCat("<text class=\"", cls, "\" x=\"", SvgNum(t.x), "\" y=\"", SvgNum(t.y), "\"",
                        t.anchor_end ? " text-anchor=\"end\"" : "", extra, ">", SvgEscape(t.text),
                        "</text>\n");
  };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"13\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      static_cast<int>(l.width), static_cast<int>(l.height), static_cast<int>(l.width),
      static_cast<int>(l.height));
  absl::StrAppend(&svg, "<text class=\"title\" x=\"", SvgNum((l.left + l.right) / 2), "\" y=\"28\" "
                  "text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">",
                  SvgEscape(input.title), "</text>\n");
  absl::StrAppend(&svg, "<text class=\"subtitle\" x=\"", SvgNum((l.left + l.right) / 2),
                  "\" y=\"48\" text-anchor=\"middle\" fill=\"#444\">", SvgEscape(input.subtitle),
                  "</text>\n");

  // Grid and ticks at the swept ranks, and the y axis.
  for (int r : l.tick_ranks) {
    const double x = l.XForRank(r);
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", SvgNum(x), "\" y1=\"", SvgNum(l.top),
                    "\" x2=\"", SvgNum(x), "\" y2=\"", SvgNum(l.bottom),
                    "\" stroke=\"#e4e4e4\"/>\n<line class=\"xtick-mark\" x1=\"", SvgNum(x),
                    "\" y1=\"", SvgNum(l.bottom), "\" x2=\"", SvgNum(x), "\" y2=\"", SvgNum(l.bottom + 5),
                    "\" stroke=\"#333\"/>\n");
  }
  for (const PlotLabel& t : l.tick_labels) {
    absl::StrAppend(&svg, "<text class=\"xtick\" x=\"", SvgNum(t.x), "\" y=\"", SvgNum(t.y),
                    "\" text-anchor=\"middle\">", SvgEscape(t.text), "</text>\n");
  }
  if (l.has_no_rank_column) {
    const double x = l.XForLog2(l.no_rank_log2);
    absl::StrAppend(&svg, "<line class=\"no-rank\" x1=\"", SvgNum(x), "\" y1=\"", SvgNum(l.top),
                    "\" x2=\"", SvgNum(x), "\" y2=\"", SvgNum(l.bottom),
                    "\" stroke=\"#bbb\" stroke-dasharray=\"2,3\"/>\n<text class=\"xtick\" x=\"",
                    SvgNum(x), "\" y=\"", SvgNum(l.bottom + 18),
                    "\" text-anchor=\"middle\">no rank</text>\n");
  }
  for (int i = 0; i <= 4; ++i) {
    const double v = i * 0.25;
    const double y = l.YForValue(v);
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", SvgNum(l.left), "\" y1=\"", SvgNum(y),
                    "\" x2=\"", SvgNum(l.right), "\" y2=\"", SvgNum(y),
                    "\" stroke=\"#e4e4e4\"/>\n<text class=\"ytick\" x=\"", SvgNum(l.left - 8),
                    "\" y=\"", SvgNum(y + 4), "\" text-anchor=\"end\">",
                    absl::StrFormat("%.2f", v), "</text>\n");
  }
  absl::StrAppend(&svg, "<rect class=\"frame\" x=\"", SvgNum(l.left), "\" y=\"", SvgNum(l.top),
                  "\" width=\"", SvgNum(l.right - l.left), "\" height=\"", SvgNum(l.bottom - l.top),
                  "\" fill=\"none\" stroke=\"#333\"/>\n");
  absl::StrAppend(&svg, "<text class=\"xlabel\" x=\"", SvgNum((l.left + l.right) / 2), "\" y=\"",
                  SvgNum(l.bottom + 42),
                  "\" text-anchor=\"middle\">feature rank r (log2 scale; ticks at the swept "
                  "ranks)</text>\n");
  absl::StrAppend(&svg, "<text class=\"ylabel\" transform=\"translate(22,",
                  SvgNum((l.top + l.bottom) / 2), ") rotate(-90)\" text-anchor=\"middle\">",
                  SvgEscape(input.y_label), "</text>\n");
  for (const PlotLabel& t : l.caption_labels) {
    absl::StrAppend(&svg, "<text class=\"caption\" x=\"", SvgNum(t.x), "\" y=\"", SvgNum(t.y),
                    "\" fill=\"#333\" font-size=\"12\">", SvgEscape(t.text), "</text>\n");
  }

  // Theory bounds.
  std::set<int64_t> bound_lines;
  for (const PlotBound& b : input.bounds) {
    if (b.rank <= 0 || !bound_lines.insert(b.rank).second) continue;
    const double x = l.XForRank(static_cast<double>(b.rank));
    absl::StrAppend(&svg, "<line class=\"bound\" x1=\"", SvgNum(x), "\" y1=\"", SvgNum(l.top),
                    "\" x2=\"", SvgNum(x), "\" y2=\"", SvgNum(l.bottom),
                    "\" stroke=\"#555\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n");
  }
  for (const PlotLabel& t : l.bound_labels) {
    // On a white ground, so that another bound's line does not strike it out.
    absl::StrAppend(&svg, "<rect class=\"bound-label-ground\" x=\"", SvgNum(t.box.x0), "\" y=\"",
                    SvgNum(t.box.y0), "\" width=\"", SvgNum(t.box.x1 - t.box.x0), "\" height=\"",
                    SvgNum(t.box.y1 - t.box.y0), "\" fill=\"white\" fill-opacity=\"0.85\"/>\n");
    svg += label_text(t, "bound-label", " fill=\"#333\"");
  }

  // Per head: band, lines and mean markers; rank-less heads as a reference
  // line with their mean at the "no rank" column.
  for (size_t pos = 0; pos < input.heads.size(); ++pos) {
    const PlotHead& h = input.heads[pos];
    auto it = values.find(h.head_index);
    if (it == values.end()) continue;
    const auto& by_rank = it->second;
    const double dx = head_offset(pos);
    if (!h.has_rank) {
      const std::vector<double>& v = by_rank.begin()->second;
      const double mean = Mean(v);
      const double y = l.YForValue(mean) + dx * 0.4;
      const double x = l.XForLog2(l.no_rank_log2) + dx;
      absl::StrAppend(&svg, "<line class=\"flat\" x1=\"", SvgNum(l.left), "\" y1=\"", SvgNum(y),
                      "\" x2=\"", SvgNum(l.right), "\" y2=\"", SvgNum(y), "\" stroke=\"", color(pos),
                      "\" stroke-width=\"1.6\" stroke-dasharray=\"10,5\"/>\n");
      if (const double ci = MeanCi95(v); ci > 0) {
        absl::StrAppend(&svg, "<line class=\"ci\" x1=\"", SvgNum(x), "\" y1=\"",
                        SvgNum(l.YForValue(std::min(1.0, mean + ci))), "\" x2=\"", SvgNum(x),
                        "\" y2=\"", SvgNum(l.YForValue(std::max(0.0, mean - ci))), "\" stroke=\"",
                        color(pos), "\" stroke-width=\"6\" stroke-opacity=\"0.25\"/>\n");
      }
      absl::StrAppend(&svg, "<circle class=\"mean-marker\" cx=\"", SvgNum(x), "\" cy=\"",
                      SvgNum(l.YForValue(mean)), "\" r=\"5\" fill=\"white\" stroke=\"", color(pos),
                      "\" stroke-width=\"2\"/>\n");
      continue;
    }
    const std::vector<std::vector<int>> runs = RankRuns(h, values);
    auto x_of = [&](int r) { return l.XForRank(r) + dx; };
    auto y_of = [&](int r) { return l.YForValue(Mean(by_rank.at(r))); };
    std::string band, line, gap;
    for (size_t k = 0; k < runs.size(); ++k) {
      const std::vector<int>& run = runs[k];
      if (run.size() == 1) {
        const std::vector<double>& v = by_rank.at(run[0]);
        if (const double ci = MeanCi95(v); ci > 0) {
          absl::StrAppend(&svg, "<line class=\"ci\" x1=\"", SvgNum(x_of(run[0])), "\" y1=\"",
                          SvgNum(l.YForValue(std::min(1.0, Mean(v) + ci))), "\" x2=\"",
                          SvgNum(x_of(run[0])), "\" y2=\"",
                          SvgNum(l.YForValue(std::max(0.0, Mean(v) - ci))), "\" stroke=\"",
                          color(pos), "\" stroke-width=\"6\" stroke-opacity=\"0.25\"/>\n");
        }
      } else {
        std::string upper, lower;
        for (size_t i = 0; i < run.size(); ++i) {
          const std::vector<double>& v = by_rank.at(run[i]);
          const double ci = MeanCi95(v);
          absl::StrAppend(&upper, i == 0 ? "M" : " L", SvgNum(x_of(run[i])), ",",
                          SvgNum(l.YForValue(std::min(1.0, Mean(v) + ci))));
          absl::StrAppend(&line, i == 0 ? (line.empty() ? "M" : " M") : " L", SvgNum(x_of(run[i])),
                          ",", SvgNum(y_of(run[i])));
        }
        for (size_t i = run.size(); i-- > 0;) {
          const std::vector<double>& v = by_rank.at(run[i]);
          absl::StrAppend(&lower, " L", SvgNum(x_of(run[i])), ",",
                          SvgNum(l.YForValue(std::max(0.0, Mean(v) - MeanCi95(v)))));
        }
        absl::StrAppend(&band, band.empty() ? "" : " ", upper, lower, " Z");
      }
      if (k + 1 < runs.size()) {
        absl::StrAppend(&gap, gap.empty() ? "M" : " M", SvgNum(x_of(run.back())), ",",
                        SvgNum(y_of(run.back())), " L", SvgNum(x_of(runs[k + 1].front())), ",",
                        SvgNum(y_of(runs[k + 1].front())));
      }
    }
    if (!band.empty()) {
      absl::StrAppend(&svg, "<path class=\"band\" d=\"", band, "\" fill=\"", color(pos),
                      "\" fill-opacity=\"0.15\" stroke=\"none\"/>\n");
    }
    if (!line.empty()) {
      absl::StrAppend(&svg, "<path class=\"mean\" d=\"", line, "\" fill=\"none\" stroke=\"",
                      color(pos), "\" stroke-width=\"2\"/>\n");
    }
    if (!gap.empty()) {
      absl::StrAppend(&svg, "<path class=\"gap\" d=\"", gap, "\" fill=\"none\" stroke=\"",
                      color(pos), "\" stroke-width=\"1\" stroke-dasharray=\"1,4\"/>\n");
    }
    for (const auto& [rank, v] : by_rank) {
      absl::StrAppend(&svg, "<circle class=\"mean-marker\" cx=\"", SvgNum(x_of(rank)), "\" cy=\"",
                      SvgNum(y_of(rank)), "\" r=\"5\" fill=\"white\" stroke=\"", color(pos),
                      "\" stroke-width=\"2\"/>\n");
    }
  }
  // Every seed.
  for (const PlotPoint& p : input.points) {
    auto it = position.find(p.head_index);
    if (it == position.end()) continue;
    const bool ranked = input.heads[it->second].has_rank;
    if (ranked && p.rank <= 0) continue;
    const double x = (ranked ? l.XForRank(p.rank) : l.XForLog2(l.no_rank_log2)) +
                     head_offset(it->second) + Jitter(p.head_index, p.seed);
    absl::StrAppend(&svg, "<circle class=\"seed\" cx=\"", SvgNum(x), "\" cy=\"",
                    SvgNum(l.YForValue(p.value)), "\" r=\"2.6\" fill=\"", color(it->second),
                    "\" fill-opacity=\"0.6\" stroke=\"none\"/>\n");
  }
  // Legend, outside the plot area.
  absl::StrAppend(&svg, "<g class=\"legend\">\n");
  for (size_t pos = 0; pos < input.heads.size(); ++pos) {
    const PlotLabel& t = l.legend_labels[pos];
    const double y = t.y - 4;
    const double x0 = t.x - 34;
    absl::StrAppend(&svg, "<line x1=\"", SvgNum(x0), "\" y1=\"", SvgNum(y), "\" x2=\"", SvgNum(x0 + 26),
                    "\" y2=\"", SvgNum(y), "\" stroke=\"", color(pos), "\" stroke-width=\"2\"",
                    input.heads[pos].has_rank ? "" : " stroke-dasharray=\"10,5\"",
                    "/>\n<circle cx=\"", SvgNum(x0 + 13), "\" cy=\"", SvgNum(y),
                    "\" r=\"4\" fill=\"white\" stroke=\"", color(pos),
                    "\" stroke-width=\"2\"/>\n<text class=\"legend-label\" x=\"", SvgNum(t.x),
                    "\" y=\"", SvgNum(t.y), "\" font-size=\"12\">", SvgEscape(t.text), "</text>\n");
  }
  for (size_t i = input.heads.size(); i < l.legend_labels.size(); ++i) {
    const PlotLabel& t = l.legend_labels[i];
    absl::StrAppend(&svg, "<text class=\"legend-note\" x=\"", SvgNum(t.x), "\" y=\"", SvgNum(t.y),
                    "\" fill=\"#555\" font-size=\"11\">", SvgEscape(t.text), "</text>\n");
  }
  absl::StrAppend(&svg, "</g>\n</svg>\n");
  return svg;
}

std::string PlotSubtitle(const SweepSpec& spec, bool test_split) {
  std::string out = absl::StrCat(Name(spec.dataset.kind), " dataset, m = ", spec.dataset.m,
                                 ", N = ", spec.dataset.seq_len, ", ", SweepSeeds(spec).size(),
                                 " seeds", test_split ? ", test split" : "");
  if (std::any_of(spec.heads.begin(), spec.heads.end(), [&](const HeadSpec& h) {
        return ReadoutEscapesRankBound(h, spec.train);
      })) {
    out += "; loss ce: kernel transitions do not test the rank bound";
  }
  return out;
}

std::string PlotCriterion(const std::string& metric, bool test_split, int seeds) {
  const std::string split = test_split ? "test" : "train";
  return absl::StrCat(
      metric == "error" ? absl::StrCat(split, " error = 1 - exact-sequence accuracy")
                        : absl::StrCat(split, " exact-sequence accuracy"),
      "; marker: mean over ", seeds, seeds == 1 ? " seed" : " seeds",
      ", band: its 95% t interval; transition rank: the smallest swept rank at which every "
      "seed is exact");
}

}  // namespace ranksweep::client
