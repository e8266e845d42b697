// The rank search of a search-mode sweep: for one ranked head, which rank to
// probe next given what the probes so far found. A pure function, so the
// bisection is tested on hand-made probes; the coordinator reads the probes
// from the database and creates the cells of the rank it returns.
//
// The search looks for the head's transition rank, the smallest swept rank
// at which some recipe meets the criterion (every seed exact unless told
// otherwise; common/spec/criterion.h), assuming that is monotone in the
// rank. A rank is probed under every recipe of the sweep at once; it is a
// hit when some recipe's probe meets the criterion, judged once every probe
// of the rank has finished, a failed or cancelled cell counting as a seed
// that is not exact (accuracy 0). It bisects the sorted, distinct swept
// ranks: `hi` is the smallest probed rank that is a hit, `lo` the largest
// probed rank below it. The next probe is the middle of the ranks between
// them; there is none when they are adjacent (the transition is found, or
// no swept rank is a hit).
//
// Thread-safety: pure function.
#ifndef RANKSWEEP_SERVER_CORE_SWEEPS_RANK_SEARCH_H_
#define RANKSWEEP_SERVER_CORE_SWEEPS_RANK_SEARCH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "common/spec/criterion.h"

namespace ranksweep::server {

// What the probes of one (head, rank) have found so far.
struct RankProbe {
  int64_t open = 0;   // cells still pending or leased
  int64_t exact = 0;  // done cells exact on the split the search judges
  int64_t cells = 0;  // every cell of the probe
  // Exact accuracy on that split summed over the done cells (mean:X only).
  double accuracy_sum = 0;
};

// One rank's probes, by recipe (0..R-1; 0 alone without recipe axes).
using RecipeProbes = std::map<int32_t, RankProbe>;

// Whether a finished probe (open == 0) meets `criterion`, its failed cells
// counting as not exact with accuracy 0.
bool ProbeMeets(const RankProbe& probe, const Criterion& criterion);

// The rank to probe next, or nullopt when there is nothing to probe now: a
// probe of a rank is still running (it decides nothing until every recipe's
// probe there completes), the transition is found, every rank has been
// ruled out, or `ranks` is empty. `ranks`: the sweep's ranks, in any order,
// repeats allowed. `probes`: by rank, the ranks probed so far, each by
// recipe; a rank not in `ranks` is ignored.
std::optional<int> NextRankToProbe(const std::vector<int>& ranks,
                                   const std::map<int, RecipeProbes>& probes,
                                   const Criterion& criterion);

// The same with one recipe (0) and criterion `all` (every seed exact).
std::optional<int> NextRankToProbe(const std::vector<int>& ranks,
                                   const std::map<int, RankProbe>& probes);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_SWEEPS_RANK_SEARCH_H_
