// Recipe pruning (SweepSpec::prune, docs/ANALYSIS.md "Recipe pruning"):
// successive halving, ASHA-style, across the recipes of each (head, rank) of
// a sweep, on the training error at rungs.
//
// The rungs of a recipe are PruneRungSteps (common/spec/spec.h): evaluation
// steps eta times apart. A recipe's score at rung k is the mean, over its
// seeds that have one, of each seed's training error (1 - train exact
// accuracy) there: reported by the worker at that evaluation while the seed
// trains (a heartbeat's progress), or read from the curve of its result once
// it is done (the last evaluation at or before the rung; a seed that stopped
// early, exact, keeps its last error). The rule, at every rung k where n >= 2
// recipes of the (head, rank) have a score:
//
//   sort the scores ascending; the best max(1, floor(n / eta)) go on; a
//   recipe that still has a pending or running cell is PRUNED when its
//   score is above the last kept one's AND at least `margin` above the
//   best score there.
//
// So the best recipe at a rung is never pruned, nor one that ties the last
// kept one, nor one within `margin` of the best (the winner must be clear),
// nor one with every seed exact (error 0 cannot be above the best by a
// positive margin). A rung is judged whenever a recipe's score there
// arrives, so a recipe that reached a rung first is judged again when a
// better one reaches it later (asynchronous, as ASHA is). Pruning a recipe
// stops every cell of it that is pending or leased (state PRUNED, its
// reason in the row's failure text); done cells stay done.
//
// DecideHalving is the pure rule; the rest reads and writes the store
// inside the caller's write transaction.
//
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_SERVER_CORE_SWEEPS_PRUNING_H_
#define RANKSWEEP_SERVER_CORE_SWEEPS_PRUNING_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/spec/spec.h"
#include "server/core/sqlite.h"

namespace ranksweep::server {

// One recipe of a (head, rank) as the rule sees it.
struct RecipeStanding {
  std::map<int, double> rung_error;  // rung index -> mean training error there
  bool open = false;                 // some cell pending or leased
};

// A recipe the rule stops, and why.
struct PruneDecision {
  int32_t recipe = 0;
  int rung = 0;            // the rung it lost at
  double error = 0;        // its score there
  int32_t best_recipe = 0;
  double best_error = 0;   // the best score there
};

// The header's rule over the recipes of one (head, rank): the open recipes
// to prune, each once, at the first rung that prunes it (ascending recipe).
std::vector<PruneDecision> DecideHalving(const std::map<int32_t, RecipeStanding>& recipes,
                                         int eta, double margin);

// Records a running seed's training error at `step` for the cell: at the
// largest rung of its recipe at or below `step` (none below: nothing). The
// first score of a (cell, rung) stays.
absl::Status RecordRungScore(Connection& c, int64_t cell_id, const std::vector<int64_t>& rungs,
                             int64_t step, double train_error);

// Records a done seed's scores at every rung of its recipe from its curve.
absl::Status RecordCurveScores(Connection& c, int64_t cell_id, const std::vector<int64_t>& rungs,
                               const SeedResult& result);

// Forgets the rung scores of a cell whose training no longer counts (a
// quarantine took it back), so that they judge no recipe.
absl::Status ForgetRungScores(Connection& c, int64_t cell_id);

// Judges one (head, rank) of a pruning sweep and prunes what the rule
// stops: its pending and leased cells become PRUNED, each with a result row
// in state PRUNED whose failure text says where and by how much. Returns
// a line per recipe pruned (for the log and the watchers), empty when
// nothing is.
absl::StatusOr<std::vector<std::string>> PruneGroup(Connection& c, const std::string& sweep_id,
                                                    const SweepSpec& spec, int head_index,
                                                    int rank, int64_t now_ms);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_SWEEPS_PRUNING_H_
