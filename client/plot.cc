#include "client/plot.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
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
constexpr double kNoteFontSize = 11;

// Text sizes relative to the default 13 px (PlotInput::font_size).
double FontScale(const PlotInput& input) {
  const double f = input.font_size;
  return f >= kMinPlotFontSize && f <= kMaxPlotFontSize ? f / kFontSize : 1.0;
}

// A font size as an attribute: "12", "15.7".
std::string FontNum(double v) { return absl::StrCat(std::round(v * 10) / 10); }

}  // namespace

PlotStyle PlotStyleOf(size_t line) {
  // Okabe-Ito, without its yellow.
  static constexpr const char* kColors[kPlotColors] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                                       "#56B4E9", "#E69F00", "#000000"};
  // Solid, dash-dot, short dashes, dash-dot-dot: none is the rank-less
  // reference line's 10,5 or a gap's 1,4.
  static constexpr const char* kDashes[4] = {"", "7,2,1.5,2", "3,2", "7,2,1.5,2,1.5,2"};
  // Past the palette, dash and marker change together for the second to
  // fourth round (a = 0) and then shift against each other, so each of
  // the 16 (dash, marker) pairs comes once per colour.
  const size_t round = (line / kPlotColors) % 16;
  const size_t a = round / 4, b = round % 4;
  return {kColors[line % kPlotColors], kDashes[b], static_cast<int>((a + b) % 4)};
}

std::string PlotMarkerSvg(int shape, const char* cls, double x, double y, double r,
                          const std::string& attributes) {
  switch (shape) {
    case 1: {  // a square of the circle's area
      const double h = r * 0.886;
      return absl::StrCat("<rect class=\"", cls, "\" x=\"", SvgNum(x - h), "\" y=\"",
                          SvgNum(y - h), "\" width=\"", SvgNum(2 * h), "\" height=\"",
                          SvgNum(2 * h), "\" ", attributes, "/>\n");
    }
    case 2: {  // a triangle, point up
      const double h = r * 1.2;
      return absl::StrCat("<path class=\"", cls, "\" d=\"M", SvgNum(x), ",", SvgNum(y - h), " L",
                          SvgNum(x + h * 0.866), ",", SvgNum(y + h * 0.5), " L",
                          SvgNum(x - h * 0.866), ",", SvgNum(y + h * 0.5), " Z\" ", attributes,
                          "/>\n");
    }
    case 3: {  // a diamond
      const double h = r * 1.15;
      return absl::StrCat("<path class=\"", cls, "\" d=\"M", SvgNum(x), ",", SvgNum(y - h), " L",
                          SvgNum(x + h), ",", SvgNum(y), " L", SvgNum(x), ",", SvgNum(y + h),
                          " L", SvgNum(x - h), ",", SvgNum(y), " Z\" ", attributes, "/>\n");
    }
    default:
      return absl::StrCat("<circle class=\"", cls, "\" cx=\"", SvgNum(x), "\" cy=\"", SvgNum(y),
                          "\" r=\"", absl::StrCat(r), "\" ", attributes, "/>\n");
  }
}

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

absl::Status CheckPlotRanges(const PlotInput& input) {
  if (!(input.font_size >= kMinPlotFontSize && input.font_size <= kMaxPlotFontSize)) {
    return absl::InvalidArgumentError(absl::StrCat("--font-size: ", input.font_size,
                                                   " is out of range; use ", kMinPlotFontSize,
                                                   " to ", kMaxPlotFontSize, " (px)"));
  }
  for (const auto& [name, v] : {std::pair<const char*, int>{"width", input.width},
                                {"height", input.height}}) {
    if (v != 0 && (v < kMinPlotSize || v > kMaxPlotSize)) {
      return absl::InvalidArgumentError(absl::StrCat("--size: the ", name, " ", v,
                                                     " is out of range; use ", kMinPlotSize,
                                                     " to ", kMaxPlotSize, " (px)"));
    }
  }
  return absl::OkStatus();
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

std::string RenderPlotSvg(const PlotInput& input) {
  const PlotLayout l = ComputePlotLayout(input);
  const Values values = GroupValues(input);
  const double k = FontScale(input);
  std::map<int, size_t> position;  // head_index -> legend position
  for (size_t i = 0; i < input.heads.size(); ++i) position[input.heads[i].head_index] = i;
  auto color = [&](size_t pos) { return PlotStyleOf(pos).color; };
  // A ranked line's dash pattern, as an attribute ("" when solid).
  auto dash = [&](size_t pos) {
    const char* d = PlotStyleOf(pos).dash;
    return *d == '\0' ? std::string() : absl::StrCat(" stroke-dasharray=\"", d, "\"");
  };
  auto marker = [&](size_t pos, double x, double y, double r) {
    return PlotMarkerSvg(PlotStyleOf(pos).marker, "mean-marker", x, y, r,
                         absl::StrCat("fill=\"white\" stroke=\"", color(pos),
                                      "\" stroke-width=\"2\""));
  };
  // The interval drawn for a rank's values: none below kMinSeedsForBand
  // seeds unless every band is asked for.
  auto ci_of = [&](const std::vector<double>& v) {
    return input.all_bands || static_cast<int>(v.size()) >= kMinSeedsForBand ? MeanCi95(v) : 0.0;
  };
  auto shown = [&](const std::vector<double>& v) {
    return v.size() >= 2 && (input.all_bands || static_cast<int>(v.size()) >= kMinSeedsForBand);
  };
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
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"%s\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      static_cast<int>(l.width), static_cast<int>(l.height), static_cast<int>(l.width),
      static_cast<int>(l.height), FontNum(kFontSize * k));
  if (input.show_title) {
    absl::StrAppend(&svg, "<text class=\"title\" x=\"", SvgNum((l.left + l.right) / 2), "\" y=\"",
                    SvgNum(28 * k), "\" text-anchor=\"middle\" font-size=\"", FontNum(17 * k),
                    "\" font-weight=\"bold\">", SvgEscape(input.title), "</text>\n");
    absl::StrAppend(&svg, "<text class=\"subtitle\" x=\"", SvgNum((l.left + l.right) / 2),
                    "\" y=\"", SvgNum(48 * k), "\" text-anchor=\"middle\" fill=\"#444\">",
                    SvgEscape(input.subtitle), "</text>\n");
  }

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
                    SvgNum(x), "\" y=\"", SvgNum(l.bottom + 18 * k),
                    "\" text-anchor=\"middle\">no rank</text>\n");
  }
  for (int i = 0; i <= 4; ++i) {
    const double v = i * 0.25;
    const double y = l.YForValue(v);
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", SvgNum(l.left), "\" y1=\"", SvgNum(y),
                    "\" x2=\"", SvgNum(l.right), "\" y2=\"", SvgNum(y),
                    "\" stroke=\"#e4e4e4\"/>\n<text class=\"ytick\" x=\"", SvgNum(l.left - 8),
                    "\" y=\"", SvgNum(y + 4 * k), "\" text-anchor=\"end\">",
                    absl::StrFormat("%.2f", v), "</text>\n");
  }
  absl::StrAppend(&svg, "<rect class=\"frame\" x=\"", SvgNum(l.left), "\" y=\"", SvgNum(l.top),
                  "\" width=\"", SvgNum(l.right - l.left), "\" height=\"", SvgNum(l.bottom - l.top),
                  "\" fill=\"none\" stroke=\"#333\"/>\n");
  absl::StrAppend(&svg, "<text class=\"xlabel\" x=\"", SvgNum((l.left + l.right) / 2), "\" y=\"",
                  SvgNum(l.bottom + 42 * k),
                  "\" text-anchor=\"middle\">feature rank r (log2 scale; ticks at the swept "
                  "ranks)</text>\n");
  absl::StrAppend(&svg, "<text class=\"ylabel\" transform=\"translate(", SvgNum(22 * k), ",",
                  SvgNum((l.top + l.bottom) / 2), ") rotate(-90)\" text-anchor=\"middle\">",
                  SvgEscape(input.y_label), "</text>\n");
  for (const PlotLabel& t : l.caption_labels) {
    absl::StrAppend(&svg, "<text class=\"caption\" x=\"", SvgNum(t.x), "\" y=\"", SvgNum(t.y),
                    "\" fill=\"#333\" font-size=\"", FontNum(kCaptionFontSize * k), "\">",
                    SvgEscape(t.text), "</text>\n");
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
      if (const double ci = ci_of(v); ci > 0) {
        absl::StrAppend(&svg, "<line class=\"ci\" x1=\"", SvgNum(x), "\" y1=\"",
                        SvgNum(l.YForValue(std::min(1.0, mean + ci))), "\" x2=\"", SvgNum(x),
                        "\" y2=\"", SvgNum(l.YForValue(std::max(0.0, mean - ci))), "\" stroke=\"",
                        color(pos), "\" stroke-width=\"6\" stroke-opacity=\"0.25\"/>\n");
      }
      svg += marker(pos, x, l.YForValue(mean), 5);
      continue;
    }
    const std::vector<std::vector<int>> runs = RankRuns(h, values);
    auto x_of = [&](int r) { return l.XForRank(r) + dx; };
    auto y_of = [&](int r) { return l.YForValue(Mean(by_rank.at(r))); };
    std::string band, line, gap;
    for (size_t q = 0; q < runs.size(); ++q) {
      const std::vector<int>& run = runs[q];
      if (run.size() == 1) {
        const std::vector<double>& v = by_rank.at(run[0]);
        if (const double ci = ci_of(v); ci > 0) {
          absl::StrAppend(&svg, "<line class=\"ci\" x1=\"", SvgNum(x_of(run[0])), "\" y1=\"",
                          SvgNum(l.YForValue(std::min(1.0, Mean(v) + ci))), "\" x2=\"",
                          SvgNum(x_of(run[0])), "\" y2=\"",
                          SvgNum(l.YForValue(std::max(0.0, Mean(v) - ci))), "\" stroke=\"",
                          color(pos), "\" stroke-width=\"6\" stroke-opacity=\"0.25\"/>\n");
        }
      } else {
        std::string upper, lower;
        bool any_shown = false;
        for (size_t i = 0; i < run.size(); ++i) {
          const std::vector<double>& v = by_rank.at(run[i]);
          any_shown |= shown(v);
          absl::StrAppend(&upper, i == 0 ? "M" : " L", SvgNum(x_of(run[i])), ",",
                          SvgNum(l.YForValue(std::min(1.0, Mean(v) + ci_of(v)))));
          absl::StrAppend(&line, i == 0 ? (line.empty() ? "M" : " M") : " L", SvgNum(x_of(run[i])),
                          ",", SvgNum(y_of(run[i])));
        }
        for (size_t i = run.size(); i-- > 0;) {
          const std::vector<double>& v = by_rank.at(run[i]);
          absl::StrAppend(&lower, " L", SvgNum(x_of(run[i])), ",",
                          SvgNum(l.YForValue(std::max(0.0, Mean(v) - ci_of(v)))));
        }
        // A run where no rank has the seeds for an interval has no band.
        if (any_shown) absl::StrAppend(&band, band.empty() ? "" : " ", upper, lower, " Z");
      }
      if (q + 1 < runs.size()) {
        absl::StrAppend(&gap, gap.empty() ? "M" : " M", SvgNum(x_of(run.back())), ",",
                        SvgNum(y_of(run.back())), " L", SvgNum(x_of(runs[q + 1].front())), ",",
                        SvgNum(y_of(runs[q + 1].front())));
      }
    }
    if (!band.empty()) {
      absl::StrAppend(&svg, "<path class=\"band\" d=\"", band, "\" fill=\"", color(pos),
                      "\" fill-opacity=\"0.15\" stroke=\"none\"/>\n");
    }
    if (!line.empty()) {
      absl::StrAppend(&svg, "<path class=\"mean\" d=\"", line, "\" fill=\"none\" stroke=\"",
                      color(pos), "\" stroke-width=\"2\"", dash(pos), "/>\n");
    }
    if (!gap.empty()) {
      absl::StrAppend(&svg, "<path class=\"gap\" d=\"", gap, "\" fill=\"none\" stroke=\"",
                      color(pos), "\" stroke-width=\"1\" stroke-dasharray=\"1,4\"/>\n");
    }
    for (const auto& [rank, v] : by_rank) svg += marker(pos, x_of(rank), y_of(rank), 5);
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
    const double y = t.y - 4 * k;
    const double x0 = t.x - 34;
    absl::StrAppend(&svg, "<line x1=\"", SvgNum(x0), "\" y1=\"", SvgNum(y), "\" x2=\"", SvgNum(x0 + 26),
                    "\" y2=\"", SvgNum(y), "\" stroke=\"", color(pos), "\" stroke-width=\"2\"",
                    input.heads[pos].has_rank ? dash(pos) : " stroke-dasharray=\"10,5\"", "/>\n",
                    PlotMarkerSvg(PlotStyleOf(pos).marker, "legend-marker", x0 + 13, y, 4,
                                  absl::StrCat("fill=\"white\" stroke=\"", color(pos),
                                               "\" stroke-width=\"2\"")),
                    "<text class=\"legend-label\" x=\"", SvgNum(t.x), "\" y=\"", SvgNum(t.y),
                    "\" font-size=\"", FontNum(kLegendFontSize * k), "\">", SvgEscape(t.text),
                    "</text>\n");
  }
  for (size_t i = input.heads.size(); i < l.legend_labels.size(); ++i) {
    const PlotLabel& t = l.legend_labels[i];
    absl::StrAppend(&svg, "<text class=\"legend-note\" x=\"", SvgNum(t.x), "\" y=\"", SvgNum(t.y),
                    "\" fill=\"#555\" font-size=\"", FontNum(kNoteFontSize * k), "\">",
                    SvgEscape(t.text), "</text>\n");
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

std::string PlotCriterion(const std::string& metric, bool test_split, int seeds,
                          bool all_bands) {
  const std::string split = test_split ? "test" : "train";
  return absl::StrCat(
      metric == "error" ? absl::StrCat(split, " error = 1 - exact-sequence accuracy")
                        : absl::StrCat(split, " exact-sequence accuracy"),
      "; marker: mean over ",
      seeds > 0 ? absl::StrCat(seeds, seeds == 1 ? " seed" : " seeds")
                : "its line's seeds (n in the legend)",
      ", band: its 95% t interval",
      all_bands ? "" : absl::StrCat(" (drawn from ", kMinSeedsForBand, " seeds)"),
      "; transition rank: the smallest swept rank at which every seed is exact");
}

int MarkSeedCounts(PlotInput* input) {
  std::map<int, std::set<uint64_t>> seeds;  // head_index -> its points' seeds
  for (const PlotPoint& p : input->points) seeds[p.head_index].insert(p.seed);
  std::set<size_t> counts;
  for (const PlotHead& h : input->heads) {
    auto it = seeds.find(h.head_index);
    if (it != seeds.end()) counts.insert(it->second.size());
  }
  if (counts.size() <= 1) return counts.empty() ? 0 : static_cast<int>(*counts.begin());
  for (PlotHead& h : input->heads) {
    auto it = seeds.find(h.head_index);
    if (it != seeds.end()) absl::StrAppend(&h.label, " (n = ", it->second.size(), ")");
  }
  return 0;
}

}  // namespace ranksweep::client
