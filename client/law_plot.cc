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

std::string RenderLawSvg(const LawPlotInput& in) {
  const double left = 80, right = 620, top = 70, bottom = 450, legend_x = 650;
  // x range: the values with half a step to spare on each side.
  std::vector<double> values;
  int max_rank = 2;
  int64_t max_bound = 0;
  for (const v1::AxisLaw& law : in.laws) {
    for (const v1::AxisPoint& p : law.points()) {
      values.push_back(p.value());
      if (law.has_rank()) {
        for (const v1::RankOutcome& r : p.summary().ranks()) max_rank = std::max(max_rank, r.rank());
      }
      max_bound = std::max(max_bound, p.rank_lower_bound());
    }
  }
  for (const SeedTransition& s : in.seeds) max_rank = std::max(max_rank, s.rank);
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
  const double undefined_y = Y(y_max) + 10;

  const double height = bottom + 70 + 16.0 * in.caption.size();
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" height=\"%d\" "
      "viewBox=\"0 0 960 %d\" font-family=\"sans-serif\" font-size=\"13\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<clipPath id=\"area\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>"
      "</clipPath>\n",
      static_cast<int>(height), static_cast<int>(height), left, top, right - left,
      bottom - top);
  absl::StrAppend(&svg, "<text class=\"title\" x=\"", SvgNum((left + right) / 2),
                  "\" y=\"28\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">",
                  SvgEscape(in.title), "</text>\n<text class=\"subtitle\" x=\"",
                  SvgNum((left + right) / 2), "\" y=\"48\" text-anchor=\"middle\" fill=\"#444\">",
                  SvgEscape(in.subtitle), "</text>\n");
  for (double v : values) {
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", SvgNum(X(v)), "\" y1=\"", SvgNum(top),
                    "\" x2=\"", SvgNum(X(v)), "\" y2=\"", SvgNum(bottom),
                    "\" stroke=\"#e4e4e4\"/>\n<text class=\"xtick\" x=\"", SvgNum(X(v)),
                    "\" y=\"", SvgNum(bottom + 18), "\" text-anchor=\"middle\">",
                    AxisValueText(v), "</text>\n");
  }
  for (int k = 0; k < static_cast<int>(y_max); ++k) {
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", SvgNum(left), "\" y1=\"", SvgNum(Y(k)),
                    "\" x2=\"", SvgNum(right), "\" y2=\"", SvgNum(Y(k)),
                    "\" stroke=\"#e4e4e4\"/>\n<text class=\"ytick\" x=\"", SvgNum(left - 8),
                    "\" y=\"", SvgNum(Y(k) + 4), "\" text-anchor=\"end\">",
                    static_cast<int64_t>(1) << k, "</text>\n");
  }
  absl::StrAppend(&svg, "<text class=\"undefined-row\" x=\"", SvgNum(left - 8), "\" y=\"",
                  SvgNum(undefined_y + 4), "\" text-anchor=\"end\" fill=\"#555\" "
                  "font-size=\"11\">none</text>\n");
  absl::StrAppend(&svg, "<rect class=\"frame\" x=\"", SvgNum(left), "\" y=\"", SvgNum(top),
                  "\" width=\"", SvgNum(right - left), "\" height=\"", SvgNum(bottom - top),
                  "\" fill=\"none\" stroke=\"#333\"/>\n");
  absl::StrAppend(&svg, "<text class=\"xlabel\" x=\"", SvgNum((left + right) / 2), "\" y=\"",
                  SvgNum(bottom + 42), "\" text-anchor=\"middle\">", SvgEscape(in.axis),
                  "</text>\n<text class=\"ylabel\" transform=\"translate(24,",
                  SvgNum((top + bottom) / 2), ") rotate(-90)\" text-anchor=\"middle\">",
                  in.test ? "test" : "train",
                  " transition rank (log2 scale)</text>\n");

  std::vector<std::pair<std::string, std::string>> legend;  // (colour or "", text)
  if (reference && !values.empty()) {
    std::string d;
    for (double v = x_min; v <= x_max + 1e-9; v += (x_max - x_min) / 40) {
      if (v > y_max) break;
      absl::StrAppend(&d, d.empty() ? "M" : " L", SvgNum(X(v)), ",", SvgNum(Y(std::max(0.0, v))));
    }
    absl::StrAppend(&svg, "<path class=\"reference\" d=\"", d,
                    "\" fill=\"none\" stroke=\"#888\" stroke-width=\"1.5\" "
                    "stroke-dasharray=\"2,3\" clip-path=\"url(#area)\"/>\n");
    legend.emplace_back("#888", "2^m (every vector a feature)");
  }
  bool any_bound = false;
  for (const v1::AxisLaw& law : in.laws) {
    for (const v1::AxisPoint& p : law.points()) {
      if (!law.has_rank() || p.rank_lower_bound() <= 0) continue;
      any_bound = true;
      const double y = Y(std::log2(static_cast<double>(p.rank_lower_bound())));
      absl::StrAppend(&svg, "<rect class=\"lower-bound\" x=\"", SvgNum(X(p.value()) - 4),
                      "\" y=\"", SvgNum(y - 4), "\" width=\"8\" height=\"8\" fill=\"#999\"/>\n");
    }
  }
  if (any_bound) legend.emplace_back("#999", "theory lower bound");

  size_t ranked = 0;
  for (const v1::AxisLaw& law : in.laws) {
    if (!law.has_rank()) continue;
    // The palette of every figure (PlotStyleOf, plot.h).
    const char* color = PlotStyleOf(ranked).color;
    const double dx = (static_cast<double>(ranked) - 0.5) * 6;  // heads side by side
    ++ranked;
    std::string line;
    for (const v1::AxisPoint& p : law.points()) {
      const double x = X(p.value()) + dx;
      if (!Defined(p, in.test) || Rank(p, in.test) <= 0) {
        absl::StrAppend(&svg, "<path class=\"undefined\" d=\"M", SvgNum(x - 5), ",",
                        SvgNum(undefined_y + 4), " L", SvgNum(x + 5), ",", SvgNum(undefined_y + 4),
                        " L", SvgNum(x), ",", SvgNum(undefined_y - 5), " Z\" fill=\"white\" "
                        "stroke=\"", color, "\" stroke-width=\"1.5\"/>\n");
        continue;
      }
      const double y = Y(std::log2(static_cast<double>(Rank(p, in.test))));
      absl::StrAppend(&line, line.empty() ? "M" : " L", SvgNum(x), ",", SvgNum(y));
      absl::StrAppend(&svg, "<circle class=\"transition\" cx=\"", SvgNum(x), "\" cy=\"",
                      SvgNum(y), "\" r=\"5\" fill=\"", color, "\"/>\n");
    }
    if (!line.empty()) {
      absl::StrAppend(&svg, "<path class=\"transition-line\" d=\"", line,
                      "\" fill=\"none\" stroke=\"", color, "\" stroke-width=\"2\"/>\n");
    }
    for (const SeedTransition& s : in.seeds) {
      if (s.head_index != law.head_index()) continue;
      const double jitter = (static_cast<double>(s.seed % 7) - 3) * 2;
      const double x = X(s.value) + dx + jitter;
      const double y = s.rank > 0 ? Y(std::log2(static_cast<double>(s.rank))) : undefined_y;
      absl::StrAppend(&svg, "<circle class=\"seed\" cx=\"", SvgNum(x), "\" cy=\"", SvgNum(y),
                      "\" r=\"2.6\" fill=\"none\" stroke=\"", color, "\" stroke-opacity=\"0.7\"/>\n");
    }
    const v1::LawFit& fit = in.test ? law.test_fit() : law.fit();
    legend.emplace_back(color, law.head());
    if (fit.defined()) {
      const double y0 = fit.slope() * x_min + fit.intercept();
      const double y1 = fit.slope() * x_max + fit.intercept();
      absl::StrAppend(&svg, "<path class=\"fit\" d=\"M", SvgNum(X(x_min)), ",", SvgNum(Y(y0)),
                      " L", SvgNum(X(x_max)), ",", SvgNum(Y(y1)), "\" fill=\"none\" stroke=\"",
                      color, "\" stroke-width=\"1.5\" stroke-dasharray=\"8,4\" "
                      "clip-path=\"url(#area)\"/>\n");
    }
    legend.emplace_back("", absl::StrCat("fit: ", FitText(fit, in.axis)));
  }

  // Legend right of the plot area; long fit lines wrap at 40 characters.
  double ly = top + 12;
  for (const auto& [color, text] : legend) {
    if (!color.empty()) {
      absl::StrAppend(&svg, "<line x1=\"", SvgNum(legend_x), "\" y1=\"", SvgNum(ly - 4),
                      "\" x2=\"", SvgNum(legend_x + 24), "\" y2=\"", SvgNum(ly - 4),
                      "\" stroke=\"", color, "\" stroke-width=\"2\"/>\n");
    }
    std::string rest = text;
    while (!rest.empty()) {
      size_t cut = rest.size() <= 40 ? rest.size() : rest.rfind(' ', 40);
      if (cut == std::string::npos || cut == 0) cut = std::min<size_t>(rest.size(), 40);
      absl::StrAppend(&svg, "<text class=\"legend-label\" x=\"", SvgNum(legend_x + 30), "\" y=\"",
                      SvgNum(ly), "\" font-size=\"", color.empty() ? "11" : "12",
                      "\" fill=\"", color.empty() ? "#444" : "#000", "\">",
                      SvgEscape(rest.substr(0, cut)), "</text>\n");
      rest = cut < rest.size() ? rest.substr(cut + 1) : "";
      ly += 15;
    }
    ly += 4;
  }
  double cy = bottom + 66;
  for (const std::string& line : in.caption) {
    absl::StrAppend(&svg, "<text class=\"caption\" x=\"", SvgNum(left), "\" y=\"", SvgNum(cy),
                    "\" fill=\"#333\" font-size=\"12\">", SvgEscape(line), "</text>\n");
    cy += 16;
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace ranksweep::client
