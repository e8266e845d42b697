#include "client/law_plot.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/plot.h"

namespace ranksweep::client {
namespace {


std::string AxisValueText(double v) { return absl::StrFormat("%g", v); }

// Ranked heads' transition on one split.
bool Defined(const v1::AxisPoint& p, bool test) {
  return test ? p.summary().test_transition_defined() : p.summary().transition_defined();
}
int Rank(const v1::AxisPoint& p, bool test) {
  return test ? p.summary().test_transition_rank() : p.summary().transition_rank();
}

}  // namespace

std::vector<SeedTransition> SeedTransitions(const SweepSpec& spec,
                                            const std::vector<v1::ResultRow>& rows,
                                            const std::string& axis, bool test) {
  std::map<std::tuple<int, double, uint64_t>, int> best;  // (head, value, seed) -> rank
  for (const v1::ResultRow& row : rows) {
    if (!row.has_result() || row.head_index() < 0 ||
        row.head_index() >= static_cast<int>(spec.heads.size()) ||
        !HeadHasRank(spec.heads[row.head_index()])) {
      continue;
    }
    double value = 0;
    if (!RecipeAxisValue(spec, row.recipe(), axis, &value)) continue;
    const auto key = std::make_tuple(row.head_index(), value, row.seed());
    int& rank = best.try_emplace(key, 0).first->second;
    const v1::SplitMetrics& m = test ? row.result().test() : row.result().train();
    if (m.sequences() > 0 && m.error() == 0 && (rank == 0 || row.rank() < rank)) {
      rank = row.rank();
    }
  }
  std::vector<SeedTransition> out;
  for (const auto& [key, rank] : best) {
    out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), rank});
  }
  return out;
}

std::string FitText(const v1::LawFit& fit, const std::string& axis) {
  std::string left_out;
  if (fit.left_out_size() > 0) {
    std::vector<std::string> values;
    for (double v : fit.left_out()) values.push_back(AxisValueText(v));
    left_out = absl::StrCat("; ", axis, " = ", absl::StrJoin(values, ", "),
                            " left out (transition undefined)");
  }
  if (!fit.defined()) {
    return absl::StrCat("no fit: fewer than two values with a transition", left_out);
  }
  std::string text = absl::StrFormat("log2 r = %.2f %s %s %.2f", fit.slope(), axis,
                                     fit.intercept() < 0 ? "-" : "+", std::abs(fit.intercept()));
  if (fit.has_interval()) {
    absl::StrAppend(&text, absl::StrFormat(" (slope 95%%: %.2f..%.2f; %d values%s)",
                                           fit.slope() - fit.slope_ci95(),
                                           fit.slope() + fit.slope_ci95(), fit.points(),
                                           left_out));
  } else {
    absl::StrAppend(&text, " (", fit.points(), " values, no interval", left_out, ")");
  }
  return text;
}

std::string RanklessText(const v1::HeadSummary& summary, bool test) {
  std::string reason = test ? summary.test_reason() : summary.reason();
  if (absl::StartsWith(reason, "no rank; ")) reason = reason.substr(9);
  reason = reason.substr(0, reason.find(';'));
  const size_t under = reason.find(" under ");
  if (under != std::string::npos && reason.find(" under ", under + 1) == std::string::npos) {
    reason = reason.substr(0, under);
  }
  return reason;
}

std::string RanklessCaption(const v1::AxisLaw& law, const std::string& axis, bool test) {
  std::vector<std::string> texts, labels, each;
  for (const v1::AxisPoint& p : law.points()) {
    texts.push_back(RanklessText(p.summary(), test));
    labels.push_back(p.label());
    each.push_back(absl::StrCat(axis, " = ", p.label(), ": ", texts.back()));
  }
  const bool same = std::all_of(texts.begin(), texts.end(),
                                [&](const std::string& t) { return t == texts.front(); });
  if (!texts.empty() && same) {
    return absl::StrCat(law.head(), " (no rank): ", texts.front(), " at every ", axis, " (",
                        absl::StrJoin(labels, ", "), ")");
  }
  return absl::StrCat(law.head(), " (no rank): ", absl::StrJoin(each, "; "));
}

std::string LawSubtitle(const SweepSpec& spec, const std::string& axis, bool test) {
  std::vector<std::string> values;
  for (const SweepAxis& a : spec.axes) {
    if (a.name != axis) continue;
    for (double v : a.values) values.push_back(FormatAxisValue(axis, v));
  }
  std::string text = absl::StrCat(Name(spec.dataset.kind), " dataset, N = ",
                                  spec.dataset.seq_len, ", ", SweepSeeds(spec).size(), " seeds");
  if (axis != "m") absl::StrAppend(&text, ", m = ", spec.dataset.m);
  absl::StrAppend(&text, "; ", axis, " = ", absl::StrJoin(values, ", "));
  if (test) absl::StrAppend(&text, "; test split");
  return text;
}

namespace {

// The law figure's layout at the default font size (13 px): margins, the
// plot area and the legend column, in px. Every length scales with
// font_size / 13.
constexpr double kLawLeft = 80, kLawTop = 70, kLawTopNoTitle = 20, kLawBelow = 70;
constexpr double kLawAreaWidth = 540, kLawAreaHeight = 380;
constexpr double kLawLegendGap = 30, kLawLegendWidth = 310, kLawCaptionLine = 16;
constexpr double kLawLegendLine = 15, kLawLegendAfter = 4;
constexpr size_t kLawLegendWrap = 40;  // characters a legend line holds

// A legend entry: its colour ("" for a line of text under the one before)
// and its text, wrapped at kLawLegendWrap characters.
struct LegendEntry {
  std::string color;
  std::vector<std::string> lines;
};

std::vector<std::string> WrapLegendText(const std::string& text) {
  std::vector<std::string> lines;
  std::string rest = text;
  while (!rest.empty()) {
    size_t cut = rest.size() <= kLawLegendWrap ? rest.size() : rest.rfind(' ', kLawLegendWrap);
    if (cut == std::string::npos || cut == 0) cut = std::min(rest.size(), kLawLegendWrap);
    lines.push_back(rest.substr(0, cut));
    rest = cut < rest.size() ? rest.substr(cut + 1) : "";
  }
  return lines;
}

// Where everything goes, from the input's presentation fields and legend.
struct LawLayout {
  double scale = 1;  // font_size / 13
  double left = 0, right = 0, top = 0, bottom = 0, legend_x = 0;
  double legend_bottom = 0;  // below the legend's last line
  double width = 0, height = 0;
  // The plot area the input's size leaves, before the minimum is applied:
  // below kMinPlotAreaWidth x kMinPlotAreaHeight, CheckLawPlotSize refuses it.
  double area_w = 0, area_h = 0;
};

LawLayout ComputeLawLayout(const LawPlotInput& in, const std::vector<LegendEntry>& legend) {
  LawLayout l;
  l.scale = in.font_size / 13;
  const double s = l.scale;
  const size_t captions = in.show_caption ? in.caption.size() : 0;
  const double below = (kLawBelow + kLawCaptionLine * static_cast<double>(captions)) * s;
  l.left = kLawLeft * s;
  l.top = (in.show_title ? kLawTop : kLawTopNoTitle) * s;
  const double beside = (kLawLegendGap + kLawLegendWidth) * s;
  l.area_w = in.width > 0 ? in.width - l.left - beside : kLawAreaWidth;
  l.area_h = in.height > 0 ? in.height - l.top - below : kLawAreaHeight;
  // A size too small for the text (CheckLawPlotSize refuses it) still draws
  // the smallest plot area.
  l.right = l.left + std::max(l.area_w, kMinPlotAreaWidth);
  l.bottom = l.top + std::max(l.area_h, kMinPlotAreaHeight);
  l.legend_x = l.right + kLawLegendGap * s;
  l.legend_bottom = l.top + 12 * s;
  for (const LegendEntry& e : legend) {
    l.legend_bottom += (kLawLegendLine * static_cast<double>(e.lines.size()) + kLawLegendAfter) * s;
  }
  l.width = in.width > 0 ? in.width : l.right + beside;
  l.height = in.height > 0 ? in.height : l.bottom + below;
  return l;
}

bool IsRanked(const v1::AxisLaw& law) { return law.has_rank(); }

// The legend of `in`, in drawing order: the 2^m reference, the theory
// bound, then each ranked head and its fit.
std::vector<LegendEntry> LawLegend(const LawPlotInput& in) {
  std::vector<LegendEntry> legend;
  bool any_value = false, any_bound = false;
  for (const v1::AxisLaw& law : in.laws) {
    any_value = any_value || law.points_size() > 0;
    for (const v1::AxisPoint& p : law.points()) {
      any_bound = any_bound || (IsRanked(law) && p.rank_lower_bound() > 0);
    }
  }
  if (in.axis == "m" && any_value) {
    legend.push_back({"#888", WrapLegendText("2^m (every vector a feature)")});
  }
  if (any_bound) legend.push_back({"#999", WrapLegendText("theory lower bound")});
  size_t ranked = 0;
  for (const v1::AxisLaw& law : in.laws) {
    if (!IsRanked(law)) continue;
    legend.push_back({PlotStyleOf(ranked++).color, WrapLegendText(law.head())});
    const v1::LawFit& fit = in.test ? law.test_fit() : law.fit();
    legend.push_back({"", WrapLegendText(absl::StrCat("fit: ", FitText(fit, in.axis)))});
  }
  return legend;
}

}  // namespace

absl::Status CheckLawPlotSize(const LawPlotInput& input) {
  const LawLayout l = ComputeLawLayout(input, LawLegend(input));
  if (input.width > 0) {
    const double area = l.area_w;
    if (area < kMinPlotAreaWidth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--size: a width of ", input.width, " px leaves the plot area ",
          static_cast<int>(std::floor(std::max(0.0, area))), " px wide beside the legend (at least ",
          kMinPlotAreaWidth, " px); use a width of at least ",
          static_cast<int>(std::ceil(input.width + kMinPlotAreaWidth - area)),
          " or a smaller --font-size"));
    }
  }
  if (input.height > 0) {
    const double area = l.area_h;
    // The legend, as high as its rows, must fit as well as the plot area.
    const double need = std::max(kMinPlotAreaHeight - area,
                                 std::ceil(l.legend_bottom + 16 * l.scale) - input.height);
    if (need > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--size: a height of ", input.height, " px leaves the plot area ",
          static_cast<int>(std::floor(std::max(0.0, area))),
          " px high with the title, caption and legend (at least ", kMinPlotAreaHeight,
          " px, and room for the legend); use a height of at least ",
          static_cast<int>(std::ceil(input.height + need)),
          ", --no-title, --no-caption or a smaller --font-size"));
    }
  }
  return absl::OkStatus();
}

std::string RenderLawSvg(const LawPlotInput& in) {
  const std::vector<LegendEntry> legend = LawLegend(in);
  const LawLayout l = ComputeLawLayout(in, legend);
  const double s = l.scale;
  const double left = l.left, right = l.right, top = l.top, bottom = l.bottom;
  // Text sizes: the base, and the others in proportion to it.
  auto px = [&](double at_13) { return absl::StrCat(at_13 * s); };
  // x range: the values with half a step to spare on each side.
  std::vector<double> values;
  int max_rank = 2;
  int64_t max_bound = 0;
  for (const v1::AxisLaw& law : in.laws) {
    for (const v1::AxisPoint& p : law.points()) {
      values.push_back(p.value());
      if (IsRanked(law)) {
        for (const v1::RankOutcome& r : p.summary().ranks()) max_rank = std::max(max_rank, r.rank());
      }
      max_bound = std::max(max_bound, p.rank_lower_bound());
    }
  }
  for (const SeedTransition& seed : in.seeds) max_rank = std::max(max_rank, seed.rank);
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  const double x_lo = values.empty() ? 0 : values.front();
  const double x_hi = values.empty() ? 1 : values.back();
  const double step = values.size() > 1 ? (x_hi - x_lo) / (values.size() - 1) : 1;
  const double x_min = x_lo - step / 2, x_max = x_hi + step / 2;
  const bool reference = in.axis == "m";
  // y range: rank 1 to the next power of two above everything drawn, and one
  // more row for the "undefined" marks.
  double y_top = std::log2(static_cast<double>(std::max<int64_t>(max_rank, max_bound)));
  if (reference) y_top = std::max(y_top, std::min(x_hi, 20.0));
  const double y_max = std::ceil(y_top) + 1;
  auto X = [&](double v) { return left + (v - x_min) / (x_max - x_min) * (right - left); };
  auto Y = [&](double log2_rank) { return bottom - log2_rank / y_max * (bottom - top); };
  const double undefined_y = Y(y_max) + 10 * s;

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"%s\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<clipPath id=\"area\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>"
      "</clipPath>\n",
      static_cast<int>(l.width), static_cast<int>(l.height), static_cast<int>(l.width),
      static_cast<int>(l.height), absl::StrCat(in.font_size), left, top, right - left, bottom - top);
  if (in.show_title) {
    absl::StrAppend(&svg, "<text class=\"title\" x=\"", SvgNum((left + right) / 2), "\" y=\"",
                    px(28), "\" text-anchor=\"middle\" font-size=\"", px(17),
                    "\" font-weight=\"bold\">", SvgEscape(in.title),
                    "</text>\n<text class=\"subtitle\" x=\"", SvgNum((left + right) / 2),
                    "\" y=\"", px(48), "\" text-anchor=\"middle\" fill=\"#444\">",
                    SvgEscape(in.subtitle), "</text>\n");
  }
  for (double v : values) {
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", SvgNum(X(v)), "\" y1=\"", SvgNum(top),
                    "\" x2=\"", SvgNum(X(v)), "\" y2=\"", SvgNum(bottom),
                    "\" stroke=\"#e4e4e4\"/>\n<text class=\"xtick\" x=\"", SvgNum(X(v)),
                    "\" y=\"", SvgNum(bottom + 18 * s), "\" text-anchor=\"middle\">",
                    AxisValueText(v), "</text>\n");
  }
  for (int k = 0; k < static_cast<int>(y_max); ++k) {
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", SvgNum(left), "\" y1=\"", SvgNum(Y(k)),
                    "\" x2=\"", SvgNum(right), "\" y2=\"", SvgNum(Y(k)),
                    "\" stroke=\"#e4e4e4\"/>\n<text class=\"ytick\" x=\"", SvgNum(left - 8 * s),
                    "\" y=\"", SvgNum(Y(k) + 4 * s), "\" text-anchor=\"end\">",
                    static_cast<int64_t>(1) << k, "</text>\n");
  }
  absl::StrAppend(&svg, "<text class=\"undefined-row\" x=\"", SvgNum(left - 8 * s), "\" y=\"",
                  SvgNum(undefined_y + 4 * s), "\" text-anchor=\"end\" fill=\"#555\" "
                  "font-size=\"", px(11), "\">none</text>\n");
  absl::StrAppend(&svg, "<rect class=\"frame\" x=\"", SvgNum(left), "\" y=\"", SvgNum(top),
                  "\" width=\"", SvgNum(right - left), "\" height=\"", SvgNum(bottom - top),
                  "\" fill=\"none\" stroke=\"#333\"/>\n");
  absl::StrAppend(&svg, "<text class=\"xlabel\" x=\"", SvgNum((left + right) / 2), "\" y=\"",
                  SvgNum(bottom + 42 * s), "\" text-anchor=\"middle\">", SvgEscape(in.axis),
                  "</text>\n<text class=\"ylabel\" transform=\"translate(", px(24), ",",
                  SvgNum((top + bottom) / 2), ") rotate(-90)\" text-anchor=\"middle\">",
                  in.test ? "test" : "train",
                  " transition rank (log2 scale)</text>\n");

  if (reference && !values.empty()) {
    std::string d;
    for (double v = x_min; v <= x_max + 1e-9; v += (x_max - x_min) / 40) {
      if (v > y_max) break;
      absl::StrAppend(&d, d.empty() ? "M" : " L", SvgNum(X(v)), ",", SvgNum(Y(std::max(0.0, v))));
    }
    absl::StrAppend(&svg, "<path class=\"reference\" d=\"", d,
                    "\" fill=\"none\" stroke=\"#888\" stroke-width=\"1.5\" "
                    "stroke-dasharray=\"2,3\" clip-path=\"url(#area)\"/>\n");
  }
  for (const v1::AxisLaw& law : in.laws) {
    for (const v1::AxisPoint& p : law.points()) {
      if (!IsRanked(law) || p.rank_lower_bound() <= 0) continue;
      const double y = Y(std::log2(static_cast<double>(p.rank_lower_bound())));
      absl::StrAppend(&svg, "<rect class=\"lower-bound\" x=\"", SvgNum(X(p.value()) - 4 * s),
                      "\" y=\"", SvgNum(y - 4 * s), "\" width=\"", px(8), "\" height=\"", px(8),
                      "\" fill=\"#999\"/>\n");
    }
  }

  size_t ranked = 0;
  for (const v1::AxisLaw& law : in.laws) {
    if (!IsRanked(law)) continue;
    // The palette of every figure (PlotStyleOf, plot.h).
    const char* color = PlotStyleOf(ranked).color;
    const double dx = (static_cast<double>(ranked) - 0.5) * 6 * s;  // heads side by side
    ++ranked;
    std::string line;
    for (const v1::AxisPoint& p : law.points()) {
      const double x = X(p.value()) + dx;
      if (!Defined(p, in.test) || Rank(p, in.test) <= 0) {
        absl::StrAppend(&svg, "<path class=\"undefined\" d=\"M", SvgNum(x - 5 * s), ",",
                        SvgNum(undefined_y + 4 * s), " L", SvgNum(x + 5 * s), ",",
                        SvgNum(undefined_y + 4 * s), " L", SvgNum(x), ",",
                        SvgNum(undefined_y - 5 * s), " Z\" fill=\"white\" stroke=\"", color,
                        "\" stroke-width=\"1.5\"/>\n");
        continue;
      }
      const double y = Y(std::log2(static_cast<double>(Rank(p, in.test))));
      absl::StrAppend(&line, line.empty() ? "M" : " L", SvgNum(x), ",", SvgNum(y));
      absl::StrAppend(&svg, "<circle class=\"transition\" cx=\"", SvgNum(x), "\" cy=\"",
                      SvgNum(y), "\" r=\"", px(5), "\" fill=\"", color, "\"/>\n");
    }
    if (!line.empty()) {
      absl::StrAppend(&svg, "<path class=\"transition-line\" d=\"", line,
                      "\" fill=\"none\" stroke=\"", color, "\" stroke-width=\"2\"/>\n");
    }
    for (const SeedTransition& seed : in.seeds) {
      if (seed.head_index != law.head_index()) continue;
      const double jitter = (static_cast<double>(seed.seed % 7) - 3) * 2 * s;
      const double x = X(seed.value) + dx + jitter;
      const double y =
          seed.rank > 0 ? Y(std::log2(static_cast<double>(seed.rank))) : undefined_y;
      absl::StrAppend(&svg, "<circle class=\"seed\" cx=\"", SvgNum(x), "\" cy=\"", SvgNum(y),
                      "\" r=\"", px(2.6), "\" fill=\"none\" stroke=\"", color,
                      "\" stroke-opacity=\"0.7\"/>\n");
    }
    const v1::LawFit& fit = in.test ? law.test_fit() : law.fit();
    if (fit.defined()) {
      const double y0 = fit.slope() * x_min + fit.intercept();
      const double y1 = fit.slope() * x_max + fit.intercept();
      absl::StrAppend(&svg, "<path class=\"fit\" d=\"M", SvgNum(X(x_min)), ",", SvgNum(Y(y0)),
                      " L", SvgNum(X(x_max)), ",", SvgNum(Y(y1)), "\" fill=\"none\" stroke=\"",
                      color, "\" stroke-width=\"1.5\" stroke-dasharray=\"8,4\" "
                      "clip-path=\"url(#area)\"/>\n");
    }
  }

  // Legend right of the plot area; long lines wrap (LawLegend).
  double ly = top + 12 * s;
  for (const LegendEntry& e : legend) {
    if (!e.color.empty()) {
      absl::StrAppend(&svg, "<line x1=\"", SvgNum(l.legend_x), "\" y1=\"", SvgNum(ly - 4 * s),
                      "\" x2=\"", SvgNum(l.legend_x + 24 * s), "\" y2=\"", SvgNum(ly - 4 * s),
                      "\" stroke=\"", e.color, "\" stroke-width=\"2\"/>\n");
    }
    for (const std::string& text : e.lines) {
      absl::StrAppend(&svg, "<text class=\"legend-label\" x=\"", SvgNum(l.legend_x + 30 * s),
                      "\" y=\"", SvgNum(ly), "\" font-size=\"", px(e.color.empty() ? 11 : 12),
                      "\" fill=\"", e.color.empty() ? "#444" : "#000", "\">", SvgEscape(text),
                      "</text>\n");
      ly += kLawLegendLine * s;
    }
    ly += kLawLegendAfter * s;
  }
  if (in.show_caption) {
    double cy = bottom + 66 * s;
    for (const std::string& line : in.caption) {
      absl::StrAppend(&svg, "<text class=\"caption\" x=\"", SvgNum(left), "\" y=\"", SvgNum(cy),
                      "\" fill=\"#333\" font-size=\"", px(12), "\">", SvgEscape(line),
                      "</text>\n");
      cy += kLawCaptionLine * s;
    }
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace ranksweep::client
