#include "server/core/results/transition_law.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "server/core/results/statistics.h"

namespace ranksweep::server {

LawFit FitLog2Transition(const std::vector<std::pair<double, int>>& points,
                         std::vector<double> undefined) {
  LawFit fit;
  std::sort(undefined.begin(), undefined.end());
  fit.left_out = std::move(undefined);
  fit.points = static_cast<int>(points.size());
  const double n = static_cast<double>(points.size());
  if (points.size() < 2) return fit;
  double mean_x = 0, mean_y = 0;
  for (const auto& [x, rank] : points) {
    mean_x += x;
    mean_y += std::log2(static_cast<double>(rank));
  }
  mean_x /= n;
  mean_y /= n;
  double sxx = 0, sxy = 0;
  for (const auto& [x, rank] : points) {
    sxx += (x - mean_x) * (x - mean_x);
    sxy += (x - mean_x) * (std::log2(static_cast<double>(rank)) - mean_y);
  }
  if (!(sxx > 0)) return fit;  // every x the same: no line
  fit.defined = true;
  fit.slope = sxy / sxx;
  fit.intercept = mean_y - fit.slope * mean_x;
  if (points.size() >= 3) {
    double sse = 0;
    for (const auto& [x, rank] : points) {
      const double r = std::log2(static_cast<double>(rank)) - (fit.intercept + fit.slope * x);
      sse += r * r;
    }
    const int64_t df = static_cast<int64_t>(points.size()) - 2;
    fit.has_interval = true;
    fit.slope_ci95 = TQuantile975(df) * std::sqrt(sse / static_cast<double>(df) / sxx);
  }
  return fit;
}

namespace {

// The points of one split: (value, rank) where the transition is defined,
// the values where it is not.
LawFit FitPoints(const std::vector<AxisPoint>& points, bool test) {
  std::vector<std::pair<double, int>> defined;
  std::vector<double> undefined;
  for (const AxisPoint& p : points) {
    const bool ok = test ? p.summary.test_transition_defined : p.summary.transition_defined;
    const int rank = test ? p.summary.test_transition_rank : p.summary.transition_rank;
    if (ok && rank > 0) {
      defined.emplace_back(p.value, rank);
    } else {
      undefined.push_back(p.value);
    }
  }
  return FitLog2Transition(defined, std::move(undefined));
}

}  // namespace

std::vector<AxisLaw> SummarizeAxisLaws(const std::vector<ResultGroup>& groups,
                                       const SweepSpec& spec, bool has_test_split,
                                       const Criterion& criterion,
                                       const RecipeLabeler& label) {
  std::vector<AxisLaw> laws;
  std::map<int, std::vector<const ResultGroup*>> by_head;
  for (const ResultGroup& g : groups) by_head[g.head_index].push_back(&g);
  for (const SweepAxis& axis : spec.axes) {
    if (AxisField(axis.name).rfind("dataset.", 0) != 0) continue;
    for (const auto& [head_index, head_groups] : by_head) {
      AxisLaw law;
      law.axis = axis.name;
      law.head_index = head_index;
      law.head = head_groups.front()->head;
      law.numeric = !AxisIsNamed(axis.name);
      for (double value : axis.values) {
        std::vector<ResultGroup> at_value;
        for (const ResultGroup* g : head_groups) {
          double v = 0;
          if (RecipeAxisValue(spec, g->recipe, axis.name, &v) && v == value) {
            at_value.push_back(*g);
          }
        }
        if (at_value.empty()) continue;  // filtered out of the query
        AxisPoint point;
        point.value = value;
        point.label = FormatAxisValue(axis.name, value);
        point.summary = SummarizeHead(at_value, has_test_split, criterion, label);
        law.has_rank = point.summary.has_rank;
        law.points.push_back(std::move(point));
      }
      if (law.points.empty()) continue;
      if (law.numeric && law.has_rank) {
        law.fit = FitPoints(law.points, false);
        if (has_test_split) law.test_fit = FitPoints(law.points, true);
      }
      laws.push_back(std::move(law));
    }
  }
  return laws;
}

}  // namespace ranksweep::server
