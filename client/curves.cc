#include "client/curves.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/plot.h"
#include "proto/convert.h"

namespace ranksweep::client {
namespace {

// The shortest text that reads back as the same float.
std::string FloatText(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string RankCsv(int rank) { return rank > 0 ? absl::StrCat(rank) : std::string(); }

}  // namespace

std::vector<SeedCurve> CurvesOfRows(const std::vector<v1::ResultRow>& rows) {
  std::vector<SeedCurve> out;
  for (const v1::ResultRow& row : rows) {
    if (row.state() != v1::CELL_STATE_DONE || !row.has_result() ||
        row.result().curve().steps_size() == 0) {
      continue;
    }
    SeedCurve c;
    c.sweep_id = row.sweep_id();
    c.cell_id = row.cell_id();
    c.head = row.head();
    c.head_index = row.head_index();
    c.rank = row.rank();
    c.recipe = row.recipe();
    c.seed = row.seed();
    c.curve = FromProto(row.result().curve());
    out.push_back(std::move(c));
  }
  return out;
}

Table CurvesTable(const std::vector<SeedCurve>& curves, const RecipeAxes& axes) {
  Table t;
  t.header = {"HEAD", "RANK"};
  for (const std::string& name : axes.names) t.header.push_back(absl::AsciiStrToUpper(name));
  for (const char* h : {"SEED", "STEP", "LOSS", "TRAIN_ERR", "TRAIN_POS", "TEST_ERR", "TEST_POS"}) {
    t.header.push_back(h);
  }
  t.right_align.assign(t.header.size(), true);
  t.right_align[0] = false;
  for (const SeedCurve& c : curves) {
    for (const CurvePoint& p : c.curve.points) {
      std::vector<std::string> row = {c.head, RankText(c.rank)};
      for (size_t a = 0; a < axes.names.size(); ++a) row.push_back(axes.Text(c.recipe, a));
      row.push_back(absl::StrCat(c.seed));
      row.push_back(absl::StrCat(p.step));
      row.push_back(FixedText(p.loss, 4));
      row.push_back(FixedText(p.train_error, 4));
      row.push_back(FixedText(p.train_position_accuracy, 4));
      row.push_back(c.curve.has_test ? FixedText(p.test_error, 4) : "-");
      row.push_back(c.curve.has_test ? FixedText(p.test_position_accuracy, 4) : "-");
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

namespace {

// The CSV and JSON keys, in order.
std::vector<std::string> CurveKeys(const RecipeAxes& axes) {
  std::vector<std::string> keys = {"sweep_id", "cell_id", "head", "rank", "recipe"};
  keys.insert(keys.end(), axes.names.begin(), axes.names.end());
  for (const char* k : {"seed", "step", "loss", "train_error", "train_position_accuracy",
                        "test_error", "test_position_accuracy"}) {
    keys.push_back(k);
  }
  return keys;
}

}  // namespace

std::string CurvesCsv(const std::vector<SeedCurve>& curves, const RecipeAxes& axes) {
  Table t;
  t.header = CurveKeys(axes);
  for (const SeedCurve& c : curves) {
    for (const CurvePoint& p : c.curve.points) {
      std::vector<std::string> row = {c.sweep_id, absl::StrCat(c.cell_id), c.head,
                                      RankCsv(c.rank), absl::StrCat(c.recipe)};
      for (size_t a = 0; a < axes.names.size(); ++a) row.push_back(axes.Text(c.recipe, a));
      row.push_back(absl::StrCat(c.seed));
      row.push_back(absl::StrCat(p.step));
      row.push_back(FloatText(p.loss));
      row.push_back(FloatText(p.train_error));
      row.push_back(FloatText(p.train_position_accuracy));
      row.push_back(c.curve.has_test ? FloatText(p.test_error) : "");
      row.push_back(c.curve.has_test ? FloatText(p.test_position_accuracy) : "");
      t.rows.push_back(std::move(row));
    }
  }
  return RenderCsv(t);
}

std::string CurvesJson(const std::vector<SeedCurve>& curves, const RecipeAxes& axes) {
  std::string out = "[";
  bool first = true;
  for (const SeedCurve& c : curves) {
    for (const CurvePoint& p : c.curve.points) {
      nlohmann::ordered_json j;
      j["sweep_id"] = c.sweep_id;
      j["cell_id"] = c.cell_id;
      j["head"] = c.head;
      j["rank"] = c.rank > 0 ? nlohmann::ordered_json(c.rank) : nlohmann::ordered_json();
      j["recipe"] = c.recipe;
      for (size_t a = 0; a < axes.names.size(); ++a) j[axes.names[a]] = axes.Value(c.recipe, a);
      j["seed"] = c.seed;
      j["step"] = p.step;
      j["loss"] = p.loss;
      j["train_error"] = p.train_error;
      j["train_position_accuracy"] = p.train_position_accuracy;
      j["test_error"] = c.curve.has_test ? nlohmann::ordered_json(p.test_error)
                                         : nlohmann::ordered_json();
      j["test_position_accuracy"] = c.curve.has_test
                                        ? nlohmann::ordered_json(p.test_position_accuracy)
                                        : nlohmann::ordered_json();
      absl::StrAppend(&out, first ? "\n" : ",\n", j.dump());
      first = false;
    }
  }
  absl::StrAppend(&out, first ? "]\n" : "\n]\n");
  return out;
}

absl::Status CheckCurvePlot(const CurvePlotInput& in) {
  if (in.metric != "error" && in.metric != "loss" && in.metric != "position_accuracy") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metric: with --curves, one of error, loss, position_accuracy; got \"", in.metric,
        "\""));
  }
  if (in.test && in.metric == "loss") {
    return absl::InvalidArgumentError(
        "--split test: the curves hold the training loss only; use --metric error or "
        "position_accuracy");
  }
  if (in.test) {
    for (const SeedCurve& c : in.curves) {
      if (!c.curve.has_test) {
        return absl::InvalidArgumentError(
            "--split test: this sweep's dataset has no test split; use --split train");
      }
    }
  }
  return absl::OkStatus();
}

std::vector<std::pair<int64_t, double>> MeanCurve(
    const std::vector<std::vector<std::pair<int64_t, double>>>& values) {
  std::vector<int64_t> steps;
  for (const auto& v : values) {
    for (const auto& [step, value] : v) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  std::vector<std::pair<int64_t, double>> mean;
  std::vector<size_t> at(values.size(), 0);
  for (int64_t step : steps) {
    double sum = 0;
    int n = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      const auto& v = values[i];
      while (at[i] + 1 < v.size() && v[at[i] + 1].first <= step) ++at[i];
      // A seed counts from its first evaluation on, and keeps its last
      // value once it stopped.
      if (v.empty() || v[at[i]].first > step) continue;
      sum += v[at[i]].second;
      ++n;
    }
    if (n > 0) mean.push_back({step, sum / n});
  }
  return mean;
}

namespace {

double MetricOf(const CurvePoint& p, const std::string& metric, bool test) {
  if (metric == "loss") return p.loss;
  if (metric == "position_accuracy") {
    return test ? p.test_position_accuracy : p.train_position_accuracy;
  }
  return test ? p.test_error : p.train_error;
}

std::string PathOf(const std::vector<std::pair<int64_t, double>>& v,
                   const std::function<double(double)>& x, const std::function<double(double)>& y) {
  std::string d;
  for (size_t i = 0; i < v.size(); ++i) {
    absl::StrAppend(&d, i == 0 ? "M" : " L", SvgNum(x(static_cast<double>(v[i].first))), " ",
                    SvgNum(y(v[i].second)));
  }
  return d;
}

}  // namespace

namespace {

// The figure's grid and margins at the default font size (13 px); every
// margin and gap scales with font_size / 13, the panels take the rest of a
// --size.
constexpr double kPanelWidth = 230, kPanelHeight = 170, kGapX = 40, kGapY = 56;
constexpr double kMarginLeft = 60, kMarginRight = 30, kMarginTop = 100, kMarginTopNoTitle = 24;
constexpr double kMarginBottom = 60, kMarginBottomNoCaption = 30;
constexpr int kMostColumns = 4;

struct CurvesLayout {
  double scale = 1;
  int columns = 1, rows = 1;
  double panel_w = kPanelWidth, panel_h = kPanelHeight;
  double gap_x = 0, gap_y = 0, margin_left = 0, margin_top = 0;
  double width = 0, height = 0;
  // What the margins and gaps take, and the panel size the input's size
  // leaves before the minimum is applied (CheckCurvePlotSize refuses less).
  double outside_w = 0, outside_h = 0;
  double wanted_panel_w = kPanelWidth, wanted_panel_h = kPanelHeight;
};

// Panels in rows of at most kMostColumns, one per (head, rank, recipe).
CurvesLayout ComputeCurvesLayout(const CurvePlotInput& in, size_t panels) {
  CurvesLayout l;
  l.scale = in.font_size / 13;
  const double s = l.scale;
  l.columns = std::max<int>(1, std::min<int>(kMostColumns, static_cast<int>(panels)));
  l.rows = std::max<int>(1, (static_cast<int>(panels) + l.columns - 1) / l.columns);
  l.gap_x = kGapX * s;
  l.gap_y = kGapY * s;
  l.margin_left = kMarginLeft * s;
  l.margin_top = (in.show_title ? kMarginTop : kMarginTopNoTitle) * s;
  const double right = kMarginRight * s;
  const double bottom = (in.show_caption ? kMarginBottom : kMarginBottomNoCaption) * s;
  l.outside_w = l.margin_left + (l.columns - 1) * l.gap_x + right;
  l.outside_h = l.margin_top + (l.rows - 1) * l.gap_y + bottom;
  if (in.width > 0) l.wanted_panel_w = (in.width - l.outside_w) / l.columns;
  if (in.height > 0) l.wanted_panel_h = (in.height - l.outside_h) / l.rows;
  // A size too small (CheckCurvePlotSize refuses it) still draws the
  // smallest panels.
  l.panel_w = std::max(l.wanted_panel_w, kMinPlotAreaWidth);
  l.panel_h = std::max(l.wanted_panel_h, kMinPlotAreaHeight);
  l.width = in.width > 0 ? in.width : l.outside_w + l.columns * l.panel_w;
  l.height = in.height > 0 ? in.height : l.outside_h + l.rows * l.panel_h;
  return l;
}

size_t PanelCount(const CurvePlotInput& in) {
  std::set<std::tuple<int, int, int>> panels;
  for (const SeedCurve& c : in.curves) panels.insert({c.head_index, c.rank, c.recipe});
  return panels.size();
}

}  // namespace

absl::Status CheckCurvePlotSize(const CurvePlotInput& in) {
  const CurvesLayout l = ComputeCurvesLayout(in, PanelCount(in));
  if (in.width > 0) {
    const double outside = l.outside_w;
    const double panel = l.wanted_panel_w;
    if (panel < kMinPlotAreaWidth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--size: a width of ", in.width, " px leaves ", l.columns == 1 ? "the" : "each of the ",
          l.columns == 1 ? "" : absl::StrCat(l.columns, " "), "panel",
          l.columns == 1 ? " " : "s ", static_cast<int>(std::floor(std::max(0.0, panel))),
          " px wide (at least ", kMinPlotAreaWidth, " px); use a width of at least ",
          static_cast<int>(std::ceil(outside + l.columns * kMinPlotAreaWidth)),
          " or a smaller --font-size"));
    }
  }
  if (in.height > 0) {
    const double outside = l.outside_h;
    const double panel = l.wanted_panel_h;
    if (panel < kMinPlotAreaHeight) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--size: a height of ", in.height, " px leaves ", l.rows == 1 ? "the" : "each of the ",
          l.rows == 1 ? "" : absl::StrCat(l.rows, " "), "row", l.rows == 1 ? " " : "s ",
          "of panels ", static_cast<int>(std::floor(std::max(0.0, panel))),
          " px high (at least ", kMinPlotAreaHeight, " px); use a height of at least ",
          static_cast<int>(std::ceil(outside + l.rows * kMinPlotAreaHeight)),
          ", --no-title, --no-caption or a smaller --font-size"));
    }
  }
  return absl::OkStatus();
}

std::string RenderCurvesSvg(const CurvePlotInput& in) {
  // Panels by (head, rank, recipe); seeds in order within each.
  std::map<std::tuple<int, int, int>, std::vector<const SeedCurve*>> panels;
  std::map<int, std::string> head_labels;
  int64_t last_step = 1;
  double top_value = 1;
  for (const SeedCurve& c : in.curves) {
    panels[{c.head_index, c.rank, c.recipe}].push_back(&c);
    head_labels[c.head_index] = c.head;
    for (const CurvePoint& p : c.curve.points) last_step = std::max(last_step, p.step);
  }
  if (in.metric == "loss") {
    top_value = 0;
    for (const SeedCurve& c : in.curves) {
      for (const CurvePoint& p : c.curve.points) top_value = std::max<double>(top_value, p.loss);
    }
    if (top_value <= 0) top_value = 1;
  }
  const CurvesLayout l = ComputeCurvesLayout(in, panels.size());
  const double s = l.scale;
  // Sizes of text and marks: the default's, scaled.
  auto px = [&](double at_13) { return absl::StrCat(at_13 * s); };
  const double panel_w = l.panel_w, panel_h = l.panel_h, margin_left = l.margin_left,
               margin_top = l.margin_top;
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%s\" height=\"%s\" viewBox=\"0 0 %s %s\" "
      "font-family=\"sans-serif\" font-size=\"%s\">\n",
      SvgNum(l.width), SvgNum(l.height), SvgNum(l.width), SvgNum(l.height), px(12));
  absl::StrAppend(&svg, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  if (in.show_title) {
    absl::StrAppend(&svg, "<text class=\"title\" x=\"", SvgNum(margin_left), "\" y=\"", px(28),
                    "\" font-size=\"", px(17), "\">", SvgEscape(in.title), "</text>\n");
    const std::string what =
        in.metric == "loss"
            ? std::string("training loss")
            : absl::StrCat(in.test ? "test " : "train ",
                           in.metric == "error" ? "error (1 - exact-sequence accuracy)"
                                                : "position accuracy");
    absl::StrAppend(&svg, "<text class=\"subtitle\" x=\"", SvgNum(margin_left), "\" y=\"",
                    px(48), "\">",
                    SvgEscape(in.subtitle.empty() ? what : absl::StrCat(in.subtitle, "; ", what)),
                    "</text>\n");
    absl::StrAppend(&svg, "<text class=\"key\" x=\"", SvgNum(margin_left), "\" y=\"", px(66),
                    "\" fill=\"#555\">thin: one seed each; bold: their mean (a seed that "
                    "stopped early keeps its last value)</text>\n");
  }
  if (panels.empty()) {
    absl::StrAppend(&svg, "<text class=\"empty\" x=\"", SvgNum(margin_left), "\" y=\"",
                    SvgNum(margin_top + 40 * s), "\">no done seed has a learning curve</text>\n");
  }
  int index = 0;
  for (const auto& [key, seeds] : panels) {
    const auto& [head_index, rank, recipe] = key;
    const double x0 = margin_left + (index % l.columns) * (panel_w + l.gap_x);
    const double y0 = margin_top + (index / l.columns) * (panel_h + l.gap_y);
    ++index;
    auto X = [&](double step) { return x0 + step / static_cast<double>(last_step) * panel_w; };
    auto Y = [&](double v) { return y0 + panel_h - std::clamp(v / top_value, 0.0, 1.0) * panel_h; };
    std::string label = head_labels[head_index];
    if (rank > 0) absl::StrAppend(&label, " r=", rank);
    if (recipe >= 0 && recipe < static_cast<int>(in.recipe_labels.size()) &&
        !in.recipe_labels[recipe].empty()) {
      absl::StrAppend(&label, " ", in.recipe_labels[recipe]);
    }
    absl::StrAppend(&svg, "<g class=\"panel\">\n<text class=\"panel-title\" x=\"", SvgNum(x0),
                    "\" y=\"", SvgNum(y0 - 8 * s), "\">", SvgEscape(label), "</text>\n");
    absl::StrAppend(&svg, "<rect class=\"frame\" x=\"", SvgNum(x0), "\" y=\"", SvgNum(y0),
                    "\" width=\"", SvgNum(panel_w), "\" height=\"", SvgNum(panel_h),
                    "\" fill=\"none\" stroke=\"#999\"/>\n");
    // y ticks at 0, half and the top; x ticks at 0 and the last step.
    for (double f : {0.0, 0.5, 1.0}) {
      absl::StrAppend(&svg, "<text class=\"y-tick\" x=\"", SvgNum(x0 - 4 * s), "\" y=\"",
                      SvgNum(Y(f * top_value) + 4 * s), "\" text-anchor=\"end\" font-size=\"",
                      px(10), "\">", absl::StrFormat("%.3g", f * top_value), "</text>\n");
    }
    for (double f : {0.0, 1.0}) {
      absl::StrAppend(&svg, "<text class=\"x-tick\" x=\"", SvgNum(x0 + f * panel_w), "\" y=\"",
                      SvgNum(y0 + panel_h + 14 * s), "\" text-anchor=\"middle\" font-size=\"",
                      px(10), "\">", static_cast<int64_t>(f * last_step), "</text>\n");
    }
    std::vector<std::vector<std::pair<int64_t, double>>> values;
    for (const SeedCurve* c : seeds) {
      std::vector<std::pair<int64_t, double>> v;
      for (const CurvePoint& p : c->curve.points) v.push_back({p.step, MetricOf(p, in.metric, in.test)});
      absl::StrAppend(&svg, "<path class=\"seed-line\" data-seed=\"", c->seed, "\" d=\"",
                      PathOf(v, X, Y), "\" fill=\"none\" stroke=\"#0072B2\" stroke-opacity=\"0.35\" "
                      "stroke-width=\"1\"/>\n");
      values.push_back(std::move(v));
    }
    absl::StrAppend(&svg, "<path class=\"mean-line\" d=\"", PathOf(MeanCurve(values), X, Y),
                    "\" fill=\"none\" stroke=\"#0072B2\" stroke-width=\"2.5\"/>\n</g>\n");
  }
  if (in.show_caption) {
    absl::StrAppend(&svg, "<text class=\"x-label\" x=\"", SvgNum(l.width / 2), "\" y=\"",
                    SvgNum(l.height - 16 * s), "\" text-anchor=\"middle\">training step</text>\n");
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace ranksweep::client
