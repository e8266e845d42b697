#include "server/core/sweeps/pruning.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "server/core/sweeps/cell_plan.h"
#include "server/core/results/result_schema.h"
#include "server/core/sql_columns.h"
#include "server/core/types.h"
#include "server/core/workers/worker_registry.h"

namespace ranksweep::server {
namespace {

// Scores equal to this much count as tied (floats from the wire).
constexpr double kTie = 1e-9;

// The largest rung at or below `step`, or -1.
int RungAt(const std::vector<int64_t>& rungs, int64_t step) {
  int k = -1;
  for (size_t i = 0; i < rungs.size() && rungs[i] <= step; ++i) k = static_cast<int>(i);
  return k;
}

absl::Status InsertScore(Connection& c, int64_t cell_id, int rung, double train_error) {
  ASSIGN_OR_RETURN(Statement ins,
                   c.Prepare("INSERT OR IGNORE INTO rung_scores (cell_id, rung, train_error) "
                             "VALUES (:cell_id, :rung, :train_error)"));
  ins.Bind(":cell_id", cell_id).Bind(":rung", rung).Bind(":train_error", train_error);
  return ins.Run();
}

}  // namespace

std::vector<PruneDecision> DecideHalving(const std::map<int32_t, RecipeStanding>& recipes,
                                         int eta, double margin) {
  std::map<int, std::vector<std::pair<double, int32_t>>> by_rung;  // rung -> (score, recipe)
  for (const auto& [recipe, standing] : recipes) {
    for (const auto& [rung, error] : standing.rung_error) by_rung[rung].push_back({error, recipe});
  }
  std::map<int32_t, PruneDecision> pruned;
  for (auto& [rung, scores] : by_rung) {
    const size_t n = scores.size();
    if (n < 2) continue;
    std::sort(scores.begin(), scores.end());
    const size_t keep = std::max<size_t>(1, n / static_cast<size_t>(std::max(2, eta)));
    const double last_kept = scores[keep - 1].first;
    const auto [best_error, best_recipe] = scores.front();
    for (size_t i = keep; i < n; ++i) {
      const auto [error, recipe] = scores[i];
      if (!recipes.at(recipe).open || pruned.count(recipe)) continue;
      if (error <= last_kept + kTie) continue;            // tied with a kept one
      if (error < best_error + margin - kTie) continue;   // the winner is not clear
      if (error <= kTie) continue;                        // every seed exact
      pruned[recipe] = PruneDecision{recipe, rung, error, best_recipe, best_error};
    }
  }
  std::vector<PruneDecision> out;
  for (auto& [recipe, d] : pruned) out.push_back(d);
  return out;
}

absl::Status RecordRungScore(Connection& c, int64_t cell_id, const std::vector<int64_t>& rungs,
                             int64_t step, double train_error) {
  const int rung = RungAt(rungs, step);
  if (rung < 0) return absl::OkStatus();
  return InsertScore(c, cell_id, rung, train_error);
}

absl::Status RecordCurveScores(Connection& c, int64_t cell_id, const std::vector<int64_t>& rungs,
                               const SeedResult& result) {
  const std::vector<CurvePoint>& points = result.curve.points;
  for (size_t k = 0; k < rungs.size(); ++k) {
    // The last evaluation at or before the rung; past the curve's end (a
    // seed that stopped early, exact), its last one.
    const CurvePoint* at = nullptr;
    for (const CurvePoint& p : points) {
      if (p.step > rungs[k]) break;
      at = &p;
    }
    if (at == nullptr) continue;
    RETURN_IF_ERROR(InsertScore(c, cell_id, static_cast<int>(k), at->train_error));
  }
  return absl::OkStatus();
}

absl::Status ForgetRungScores(Connection& c, int64_t cell_id) {
  ASSIGN_OR_RETURN(Statement del, c.Prepare("DELETE FROM rung_scores WHERE cell_id = :cell_id"));
  del.Bind(":cell_id", cell_id);
  return del.Run();
}

absl::StatusOr<std::vector<std::string>> PruneGroup(Connection& c, const std::string& sweep_id,
                                                    const SweepSpec& spec, int head_index,
                                                    int rank, int64_t now_ms) {
  std::vector<std::string> lines;
  if (spec.prune.rule != PruneRule::kHalving || RecipeCount(spec) < 2) return lines;
  std::map<int32_t, RecipeStanding> standing;
  {
    enum Col : int { kRecipe, kRung, kError, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"c.recipe", "s.rung", "AVG(s.train_error)"},
        "FROM rung_scores s JOIN cells c ON c.id = s.cell_id WHERE c.sweep_id = :sweep_id AND "
        "c.head_index = :head AND c.rank = :rank GROUP BY c.recipe, s.rung");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":sweep_id", sweep_id).Bind(":head", head_index).Bind(":rank", rank);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      standing[static_cast<int32_t>(q.ColumnInt(kRecipe))]
          .rung_error[static_cast<int>(q.ColumnInt(kRung))] = q.ColumnDouble(kError);
    }
  }
  {
    static const std::string* sql = new std::string(absl::StrCat(
        "SELECT DISTINCT recipe FROM cells WHERE sweep_id = :sweep_id AND head_index = :head AND "
        "rank = :rank AND state IN (",
        kCellPending, ", ", kCellLeased, ")"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":sweep_id", sweep_id).Bind(":head", head_index).Bind(":rank", rank);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      const auto recipe = static_cast<int32_t>(q.ColumnInt(0));
      if (standing.count(recipe)) standing[recipe].open = true;
    }
  }
  const std::vector<PruneDecision> decisions =
      DecideHalving(standing, spec.prune.eta, spec.prune.margin);
  for (const PruneDecision& d : decisions) {
    const TaskSpec task = MakeTaskSpec(spec, head_index, rank, d.recipe, {});
    const std::vector<int64_t> rungs = PruneRungSteps(spec, task.train);
    const int64_t step = d.rung < static_cast<int>(rungs.size()) ? rungs[d.rung] : 0;
    const std::string reason = absl::StrFormat(
        "pruned at rung %d (step %d): mean train error %.3f, above the best %.3f (%s) by at "
        "least the margin %.3g",
        d.rung + 1, step, d.error, d.best_error,
        spec.axes.empty() ? std::string("recipe 0") : RecipeLabel(spec, d.best_recipe),
        spec.prune.margin);
    struct Open {
      int64_t id = 0;
      uint64_t seed = 0;
      int attempt = 0;
      int64_t lease_id = 0;
      std::string worker_id;
    };
    std::vector<Open> open;
    {
      enum Col : int { kId, kSeed, kAttempt, kLeaseId, kWorkerId, kCount };
      static const std::string* sql = NewSelect<kCount>(
          {"id", "seed", "attempt", "lease_id", "worker_id"},
          absl::StrCat("FROM cells WHERE sweep_id = :sweep_id AND head_index = :head AND "
                       "rank = :rank AND recipe = :recipe AND state IN (",
                       kCellPending, ", ", kCellLeased, ") ORDER BY id"));
      ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
      q.Bind(":sweep_id", sweep_id).Bind(":head", head_index).Bind(":rank", rank);
      q.Bind(":recipe", d.recipe);
      while (true) {
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) break;
        open.push_back({q.ColumnInt(kId), SeedFromDb(q.ColumnInt(kSeed)),
                        static_cast<int>(q.ColumnInt(kAttempt)), q.ColumnInt(kLeaseId),
                        q.ColumnText(kWorkerId)});
      }
    }
    // The lease and worker stay on the cell, so that its holder's next
    // heartbeat hears that it was pruned.
    static const std::string* update = new std::string(
        absl::StrCat("UPDATE cells SET state = ", kCellPruned,
                     ", lease_deadline_ms = 0, last_failure = :reason WHERE id = :id"));
    for (const Open& cell : open) {
      ASSIGN_OR_RETURN(Statement u, c.Prepare(*update));
      u.Bind(":id", cell.id).Bind(":reason", reason);
      RETURN_IF_ERROR(u.Run());
      RETURN_IF_ERROR(RecordEndedResult(c, CellState::kPruned, cell.id, sweep_id, head_index,
                                        rank, d.recipe, cell.seed, cell.attempt, cell.lease_id,
                                        cell.worker_id, reason, now_ms));
    }
    if (!open.empty()) {
      lines.push_back(absl::StrCat(
          HeadLabel(spec.heads[head_index]), rank > 0 ? absl::StrCat(" r=", rank) : "",
          spec.axes.empty() ? "" : " " + RecipeLabel(spec, d.recipe), ": ", open.size(),
          open.size() == 1 ? " cell " : " cells ", reason));
    }
  }
  return lines;
}

}  // namespace ranksweep::server
