#include "client/plot.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ranksweep::client {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::string Escape(const std::string& s) {
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

std::string Num(double v) { return absl::StrFormat("%.1f", v); }

// A few pixels of sideways jitter, the same for the same (head, seed).
double Jitter(int head_index, uint64_t seed) {
  const uint64_t h = (seed * 2654435761u + static_cast<uint64_t>(head_index) * 40503u) % 9;
  return (static_cast<double>(h) - 4.0) * 1.5;
}

}  // namespace

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
  std::map<int, bool> has_rank;
  for (const PlotHead& h : input.heads) has_rank[h.head_index] = h.has_rank;
  double lo = INFINITY, hi = -INFINITY;
  auto cover = [&](double rank) {
    if (rank <= 0) return;
    lo = std::min(lo, std::log2(rank));
    hi = std::max(hi, std::log2(rank));
  };
  for (const PlotPoint& p : input.points) {
    auto it = has_rank.find(p.head_index);
    if (it == has_rank.end()) continue;
    if (it->second) {
      cover(p.rank);
    } else {
      l.has_no_rank_column = true;
    }
  }
  for (const PlotHead& h : input.heads) l.has_no_rank_column |= !h.has_rank;
  cover(static_cast<double>(input.lower_bound));
  cover(static_cast<double>(input.upper_bound));
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
  return l;
}

std::string RenderPlotSvg(const PlotInput& input) {
  const PlotLayout l = ComputePlotLayout(input);
  std::map<int, size_t> position;  // head_index -> legend position
  for (size_t i = 0; i < input.heads.size(); ++i) position[input.heads[i].head_index] = i;
  auto color = [&](size_t pos) { return kPalette[pos % std::size(kPalette)]; };
  const double n_heads = static_cast<double>(input.heads.size());
  // Heads side by side at one rank: a small fixed offset per head.
  auto head_offset = [&](size_t pos) { return (static_cast<double>(pos) - (n_heads - 1) / 2) * 5; };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"13\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      static_cast<int>(l.width), static_cast<int>(l.height), static_cast<int>(l.width),
      static_cast<int>(l.height));
  absl::StrAppend(&svg, "<text class=\"title\" x=\"", Num((l.left + l.right) / 2), "\" y=\"28\" "
                  "text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">",
                  Escape(input.title), "</text>\n");
  absl::StrAppend(&svg, "<text class=\"subtitle\" x=\"", Num((l.left + l.right) / 2),
                  "\" y=\"48\" text-anchor=\"middle\" fill=\"#444\">", Escape(input.subtitle),
                  "</text>\n");

  // Grid, ticks and axes.
  for (int k = static_cast<int>(std::ceil(l.log2_min));
       k <= static_cast<int>(std::floor(l.has_no_rank_column ? l.no_rank_log2 - 0.5 : l.log2_max));
       ++k) {
    const double x = l.XForLog2(k);
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Num(x), "\" y1=\"", Num(l.top),
                    "\" x2=\"", Num(x), "\" y2=\"", Num(l.bottom),
                    "\" stroke=\"#e4e4e4\"/>\n<text class=\"xtick\" x=\"", Num(x), "\" y=\"",
                    Num(l.bottom + 18), "\" text-anchor=\"middle\">",
                    static_cast<int64_t>(std::llround(std::exp2(k))), "</text>\n");
  }
  if (l.has_no_rank_column) {
    absl::StrAppend(&svg, "<text class=\"xtick\" x=\"", Num(l.XForLog2(l.no_rank_log2)),
                    "\" y=\"", Num(l.bottom + 18), "\" text-anchor=\"middle\">no rank</text>\n");
  }
  for (int i = 0; i <= 4; ++i) {
    const double v = i * 0.25;
    const double y = l.YForValue(v);
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Num(l.left), "\" y1=\"", Num(y),
                    "\" x2=\"", Num(l.right), "\" y2=\"", Num(y),
                    "\" stroke=\"#e4e4e4\"/>\n<text class=\"ytick\" x=\"", Num(l.left - 8),
                    "\" y=\"", Num(y + 4), "\" text-anchor=\"end\">",
                    absl::StrFormat("%.2f", v), "</text>\n");
  }
  absl::StrAppend(&svg, "<rect class=\"frame\" x=\"", Num(l.left), "\" y=\"", Num(l.top),
                  "\" width=\"", Num(l.right - l.left), "\" height=\"", Num(l.bottom - l.top),
                  "\" fill=\"none\" stroke=\"#333\"/>\n");
  absl::StrAppend(&svg, "<text class=\"xlabel\" x=\"", Num((l.left + l.right) / 2), "\" y=\"",
                  Num(l.bottom + 44), "\" text-anchor=\"middle\">feature rank r (log2 scale)</text>\n");
  absl::StrAppend(&svg, "<text class=\"ylabel\" transform=\"translate(22,",
                  Num((l.top + l.bottom) / 2), ") rotate(-90)\" text-anchor=\"middle\">",
                  Escape(input.y_label), "</text>\n");

  // Theory bounds.
  auto bound = [&](int64_t r, const char* name, double label_dy) {
    if (r <= 0) return;
    const double x = l.XForRank(static_cast<double>(r));
    absl::StrAppend(&svg, "<line class=\"bound\" x1=\"", Num(x), "\" y1=\"", Num(l.top),
                    "\" x2=\"", Num(x), "\" y2=\"", Num(l.bottom),
                    "\" stroke=\"#555\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n");
    absl::StrAppend(&svg, "<text class=\"bound-label\" x=\"", Num(x + 4), "\" y=\"",
                    Num(l.top + label_dy), "\" fill=\"#333\">", name, " ", r, "</text>\n");
  };
  bound(input.lower_bound, "lower bound", 14);
  bound(input.upper_bound, "upper bound", 30);

  // Means per (head, rank) and per rank-less head.
  std::map<int, std::map<int, std::pair<double, int>>> sums;  // head -> rank -> (sum, n)
  std::map<int, std::pair<double, int>> flat;
  std::map<int, bool> has_rank;
  for (const PlotHead& h : input.heads) has_rank[h.head_index] = h.has_rank;
  for (const PlotPoint& p : input.points) {
    auto it = has_rank.find(p.head_index);
    if (it == has_rank.end()) continue;
    auto& acc = it->second ? sums[p.head_index][p.rank] : flat[p.head_index];
    acc.first += p.value;
    acc.second += 1;
  }
  for (size_t pos = 0; pos < input.heads.size(); ++pos) {
    const PlotHead& h = input.heads[pos];
    if (h.has_rank) {
      std::string pts;
      for (const auto& [rank, acc] : sums[h.head_index]) {
        if (rank <= 0) continue;
        absl::StrAppend(&pts, pts.empty() ? "" : " ", Num(l.XForRank(rank) + head_offset(pos)),
                        ",", Num(l.YForValue(acc.first / acc.second)));
      }
      absl::StrAppend(&svg, "<polyline class=\"mean\" points=\"", pts, "\" fill=\"none\" stroke=\"",
                      color(pos), "\" stroke-width=\"2.2\"/>\n");
    } else if (flat.count(h.head_index) > 0) {
      const auto& acc = flat[h.head_index];
      const double y = l.YForValue(acc.first / acc.second) + head_offset(pos) * 0.4;
      absl::StrAppend(&svg, "<line class=\"flat\" x1=\"", Num(l.left), "\" y1=\"", Num(y),
                      "\" x2=\"", Num(l.right), "\" y2=\"", Num(y), "\" stroke=\"", color(pos),
                      "\" stroke-width=\"2\" stroke-dasharray=\"10,5\"/>\n");
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
    absl::StrAppend(&svg, "<circle cx=\"", Num(x), "\" cy=\"", Num(l.YForValue(p.value)),
                    "\" r=\"3.2\" fill=\"", color(it->second),
                    "\" fill-opacity=\"0.55\" stroke=\"", color(it->second), "\"/>\n");
  }
  // Legend.
  const double lx = l.right + 20;
  absl::StrAppend(&svg, "<g class=\"legend\">\n");
  for (size_t pos = 0; pos < input.heads.size(); ++pos) {
    const double y = l.top + 10 + 22 * static_cast<double>(pos);
    absl::StrAppend(&svg, "<line x1=\"", Num(lx), "\" y1=\"", Num(y), "\" x2=\"", Num(lx + 26),
                    "\" y2=\"", Num(y), "\" stroke=\"", color(pos), "\" stroke-width=\"2.2\"",
                    input.heads[pos].has_rank ? "" : " stroke-dasharray=\"10,5\"",
                    "/>\n<text x=\"", Num(lx + 32), "\" y=\"", Num(y + 4), "\">",
                    Escape(input.heads[pos].label), "</text>\n");
  }
  const double ny = l.top + 10 + 22 * n_heads + 8;
  absl::StrAppend(&svg, "<text x=\"", Num(lx), "\" y=\"", Num(ny),
                  "\" fill=\"#555\" font-size=\"11\">lines: mean over seeds</text>\n<text x=\"",
                  Num(lx), "\" y=\"", Num(ny + 15),
                  "\" fill=\"#555\" font-size=\"11\">dots: one per seed</text>\n</g>\n</svg>\n");
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

}  // namespace ranksweep::client
