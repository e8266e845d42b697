// `ranksweep plot`'s figure drawn (plot.h): the SVG of the rank plot from
// its layout (plot_layout.cc), the seeds' means, 95% bands and points per
// head, and the subtitle, criterion and seed counts its callers put on it.
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
#include "client/plot_internal.h"

namespace ranksweep::client {
namespace {

using plot_internal::FontScale;
using plot_internal::GroupValues;
using plot_internal::kCaptionFontSize;
using plot_internal::kFontSize;
using plot_internal::kLegendFontSize;
using plot_internal::kNoteFontSize;
using plot_internal::RankRuns;
using plot_internal::Values;

// A few pixels of sideways jitter, the same for the same (head, seed).
double Jitter(int head_index, uint64_t seed) {
  const uint64_t h = (seed * 2654435761u + static_cast<uint64_t>(head_index) * 40503u) % 9;
  return (static_cast<double>(h) - 4.0) * 1.5;
}

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

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

// A font size as an attribute: "12", "15.7".
std::string FontNum(double v) { return absl::StrCat(std::round(v * 10) / 10); }

}  // namespace

double MeanCi95(const std::vector<double>& values) {
  const size_t n = values.size();
  if (n < 2) return 0;
  const double mean = Mean(values);
  double ss = 0;
  for (double x : values) ss += (x - mean) * (x - mean);
  const double sd = std::sqrt(ss / static_cast<double>(n - 1));
  return TQuantile975(n - 1) * sd / std::sqrt(static_cast<double>(n));
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
