// The rank search of a search-mode sweep: for one ranked head, which rank to
// probe next given what the probes so far found. A pure function, so the
// bisection is tested on hand-made probes; the coordinator reads the probes
// from the database and creates the cells of the rank it returns.
//
// The search looks for the head's transition rank, the smallest swept rank
// on which every seed is exact, assuming exactness is monotone in the rank.
// It bisects the sorted, distinct swept ranks: `hi` is the smallest probed
// rank on which every seed is exact, `lo` the largest probed rank below it
// on which some seed is not (or failed). The next probe is the middle of
// the ranks between them; there is none when they are adjacent (the
// transition is found, or no swept rank has every seed exact).
//
// Thread-safety: pure function.
#ifndef RANKSWEEP_SERVER_CORE_RANK_SEARCH_H_
#define RANKSWEEP_SERVER_CORE_RANK_SEARCH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace ranksweep::server {

// What the probes of one (head, rank) have found so far.
struct RankProbe {
  int64_t open = 0;   // cells still pending or leased
  int64_t exact = 0;  // done cells exact on the split the search judges
  int64_t cells = 0;  // every cell of the probe
};

// The rank to probe next, or nullopt when there is nothing to probe now: a
// probe is still running (it decides nothing until it completes), the
// transition is found, every rank has been ruled out, or `ranks` is empty.
// `ranks`: the sweep's ranks, in any order, repeats allowed. `probes`: by
// rank, the ranks probed so far; a rank not in `ranks` is ignored.
std::optional<int> NextRankToProbe(const std::vector<int>& ranks,
                                   const std::map<int, RankProbe>& probes);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_RANK_SEARCH_H_
