#include "server/core/sweeps/rank_search.h"

#include <algorithm>

namespace ranksweep::server {
namespace {

// The mean criterion's tolerance, as in server/core/results/analysis.h.
constexpr double kMeanTolerance = 1e-9;

}  // namespace

bool ProbeMeets(const RankProbe& probe, const Criterion& criterion) {
  switch (criterion.kind) {
    case Criterion::Kind::kAll: return probe.cells > 0 && probe.exact == probe.cells;
    case Criterion::Kind::kSeeds: return probe.exact >= criterion.seeds;
    case Criterion::Kind::kMean:
      return probe.cells > 0 && probe.accuracy_sum / static_cast<double>(probe.cells) >=
                                    criterion.mean - kMeanTolerance;
  }
  return false;
}

std::optional<int> NextRankToProbe(const std::vector<int>& ranks,
                                   const std::map<int, RecipeProbes>& probes,
                                   const Criterion& criterion) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  const int k = static_cast<int>(sorted.size());
  if (k == 0) return std::nullopt;
  // Indices into `sorted`: hi the smallest probed rank that is a hit (k:
  // none), lo the largest probed rank below it (-1: none), which is
  // finished and so not a hit.
  int lo = -1, hi = k;
  for (int i = 0; i < k; ++i) {
    auto it = probes.find(sorted[i]);
    if (it == probes.end() || it->second.empty()) continue;
    bool hit = false;
    for (const auto& [recipe, probe] : it->second) {
      if (probe.open > 0) return std::nullopt;  // running: decides nothing yet
      hit = hit || ProbeMeets(probe, criterion);
    }
    if (hit && i < hi) hi = i;
  }
  for (int i = 0; i < hi; ++i) {
    auto it = probes.find(sorted[i]);
    if (it != probes.end() && !it->second.empty()) lo = i;  // probed, finished, below hi
  }
  if (hi - lo <= 1) return std::nullopt;  // found (or every rank fails)
  return sorted[(lo + hi) / 2];
}

std::optional<int> NextRankToProbe(const std::vector<int>& ranks,
                                   const std::map<int, RankProbe>& probes) {
  std::map<int, RecipeProbes> by_recipe;
  for (const auto& [rank, probe] : probes) by_recipe[rank][0] = probe;
  return NextRankToProbe(ranks, by_recipe, Criterion{});
}

}  // namespace ranksweep::server
