#include "server/core/results/statistics.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace ranksweep::server {
namespace {

// Two-sided 95% quantiles of Student's t for df = 1..30.
constexpr double kT975[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                            2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                            2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                            2.060,  2.056, 2.052, 2.048, 2.045, 2.042};

}  // namespace

double TQuantile975(int64_t df) {
  if (df <= 0) return 0;
  if (df <= 30) return kT975[df - 1];
  // Beyond the table: interpolate between 30, 40, 60, 120 and infinity.
  struct Knot {
    double df, t;
  };
  constexpr Knot kKnots[] = {{30, 2.042}, {40, 2.021}, {60, 2.000}, {120, 1.980}};
  for (size_t i = 0; i + 1 < std::size(kKnots); ++i) {
    if (df <= kKnots[i + 1].df) {
      double f = (df - kKnots[i].df) / (kKnots[i + 1].df - kKnots[i].df);
      return kKnots[i].t + f * (kKnots[i + 1].t - kKnots[i].t);
    }
  }
  return 1.960;
}

Aggregate Summarize(const std::vector<double>& xs) {
  Aggregate a;
  if (xs.empty()) return a;
  const double n = static_cast<double>(xs.size());
  double sum = 0;
  a.min = xs[0];
  a.max = xs[0];
  for (double x : xs) {
    sum += x;
    a.min = std::min(a.min, x);
    a.max = std::max(a.max, x);
  }
  a.mean = sum / n;
  if (xs.size() >= 2) {
    double ss = 0;
    for (double x : xs) ss += (x - a.mean) * (x - a.mean);
    a.std = std::sqrt(ss / (n - 1));
    a.ci95 = TQuantile975(static_cast<int64_t>(xs.size()) - 1) * a.std / std::sqrt(n);
  }
  return a;
}

void RunningStats::Add(double x) {
  ++n;
  const double delta = x - mean;
  mean += delta / static_cast<double>(n);
  m2 += delta * (x - mean);
  min = n == 1 ? x : std::min(min, x);
  max = n == 1 ? x : std::max(max, x);
}

Aggregate RunningStats::Summary() const {
  Aggregate a;
  if (n == 0) return a;
  a.mean = mean;
  a.min = min;
  a.max = max;
  if (n >= 2) {
    a.std = std::sqrt(std::max(m2, 0.0) / static_cast<double>(n - 1));
    a.ci95 = TQuantile975(n - 1) * a.std / std::sqrt(static_cast<double>(n));
  }
  return a;
}

}  // namespace ranksweep::server
