// Sample statistics of result metrics: Summarize over a list of values, and
// RunningStats, the same aggregate kept one value at a time (Welford), as
// result_groups stores it. Both give the half-width of the two-sided 95%
// Student-t interval of the mean (TQuantile975).
//
// Thread-safety: pure functions and plain value types.
#ifndef RANKSWEEP_SERVER_CORE_RESULTS_STATISTICS_H_
#define RANKSWEEP_SERVER_CORE_RESULTS_STATISTICS_H_

#include <cstdint>
#include <vector>

#include "server/core/types.h"

namespace ranksweep::server {

// Sample statistics of `xs`: mean, standard deviation (n-1), min, max and
// the half-width of the 95% Student-t interval. All zero for an empty list;
// std and ci95 are 0 when there is a single value.
Aggregate Summarize(const std::vector<double>& xs);

// The two-sided 95% quantile of Student's t with `df` degrees of freedom:
// tabulated for 1..30, interpolated between 30, 40, 60 and 120 beyond, and
// 1.960 (the normal's) above 120. 0 for df <= 0.
double TQuantile975(int64_t df);

// A metric's running aggregate (Welford: the mean and the sum of squared
// deviations from it, updated one value at a time), as result_groups stores
// it (schema version 5).
struct RunningStats {
  int64_t n = 0;
  double mean = 0, m2 = 0, min = 0, max = 0;

  void Add(double x);
  // The same Aggregate that Summarize gives for the same values (up to
  // rounding in the last bits).
  Aggregate Summary() const;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_RESULTS_STATISTICS_H_
