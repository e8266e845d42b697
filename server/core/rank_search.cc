#include "server/core/rank_search.h"

#include <algorithm>

namespace ranksweep::server {

std::optional<int> NextRankToProbe(const std::vector<int>& ranks,
                                   const std::map<int, RankProbe>& probes) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  const int k = static_cast<int>(sorted.size());
  if (k == 0) return std::nullopt;
  // Indices into `sorted`: hi the smallest probed rank with every seed
  // exact (k: none), lo the largest probed rank below it (-1: none), which
  // is complete and so not exact.
  int lo = -1, hi = k;
  for (int i = 0; i < k; ++i) {
    auto it = probes.find(sorted[i]);
    if (it == probes.end()) continue;
    if (it->second.open > 0) return std::nullopt;  // running: decides nothing yet
    if (it->second.exact == it->second.cells && i < hi) hi = i;
  }
  for (int i = 0; i < hi; ++i) {
    if (probes.count(sorted[i]) > 0) lo = i;  // probed, complete, below hi: not exact
  }
  if (hi - lo <= 1) return std::nullopt;  // found (or every rank fails)
  return sorted[(lo + hi) / 2];
}

}  // namespace ranksweep::server
