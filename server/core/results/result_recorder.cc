#include "server/core/results/result_recorder.h"

#include <memory>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/result_validation.h"
#include "common/status_macros.h"
#include "server/core/results/result_checks.h"
#include "server/core/results/result_schema.h"
#include "server/core/sweeps/pruning.h"
#include "server/core/workers/worker_registry.h"

namespace ranksweep::server {

ResultRecorder::ResultRecorder(SweepLifecycle* sweeps, LeaseManager* leases)
    : sweeps_(sweeps), leases_(leases) {}

absl::Status ResultRecorder::CompleteIn(Connection& c, const std::string& worker_id,
                                        const std::vector<CellResult>& results,
                                        const std::optional<TaskWant>& want, int64_t now,
                                        Events& events, CompleteOutcome& out) {
  out = CompleteOutcome();
  events = Events();
  // Known, not quarantined, its token not held: checked again inside the
  // transaction, so that a quarantine ordered after the service's session
  // check still holds.
  ASSIGN_OR_RETURN(const VersionManifest version, ActiveWorkerVersion(c, worker_id));
  // The call's key for the tasks it leases as `next`: the smallest lease id
  // among its results (lease ids start at 1).
  int64_t next_of = 0;
  for (const CellResult& r : results) {
    if (next_of == 0 || r.lease_id < next_of) next_of = r.lease_id;
  }
  std::set<std::string> touched;
  std::set<std::tuple<std::string, int, int>> prune_groups;  // (sweep, head, rank)
  for (size_t i = 0; i < results.size(); ++i) {
    const CellResult& r = results[i];
    ASSIGN_OR_RETURN(const CellRow cell, ReadCell(c, r.cell_id));
    const std::string& sweep_id = cell.sweep_id;
    const std::string& holder = cell.worker_id;
    const CellGroupKey& group = cell.group;
    const int state = cell.state, attempt = cell.attempt;
    const uint64_t seed = cell.seed;
    const int64_t lease_id = cell.lease_id;
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec_ptr, sweeps_->SpecOf(c, sweep_id));
    const SweepSpec& spec = *spec_ptr;
    // A result no trainer could produce fails the whole call, even one sent
    // again for a cell already recorded: nothing of the call is stored, and
    // the lease stays with the worker until it fails the task or the lease
    // expires. The cell's recipe may set its own max_steps. Then the
    // cross-field checks against the task this coordinator handed out
    // (server/core/results/result_checks.h).
    const TaskSpec task = MakeTaskSpec(spec, group.head_index, group.rank, group.recipe, {});
    absl::Status s = ValidateSeedResult(r.result, task.train.max_steps);
    if (s.ok()) s = CheckResultAgainstTask(r.result, task);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "results[", i, "] for cell ", r.cell_id, " (",
          CellLabel(spec, group.head_index, group.rank, group.recipe, seed), "): ", s.message()));
    }
    if (state == kCellDone && lease_id == r.lease_id && holder == worker_id) {
      ++out.duplicates;
      continue;
    }
    if (lease_id != r.lease_id ||
        (state != kCellLeased && state != kCellCancelled && state != kCellPruned) ||
        holder != worker_id) {
      return NotYourLease(r.lease_id, r.cell_id);
    }
    if (state == kCellCancelled) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "lease %d for cell %d: sweep %s was cancelled", r.lease_id, r.cell_id, sweep_id));
    }
    if (state == kCellPruned) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "lease %d for cell %d: its recipe was pruned", r.lease_id, r.cell_id));
    }
    if (r.result.seed != seed) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "results[].result.seed: cell %d has seed %d, the result says %d", r.cell_id, seed,
          r.result.seed));
    }
    {
      // The cell's fields by name; the result's columns come from the result
      // schema's table (result_schema.h), numbered in its order.
      ASSIGN_OR_RETURN(Statement ins, c.Prepare(InsertResultSql()));
      ins.Bind(":cell_id", r.cell_id).Bind(":sweep_id", sweep_id);
      ins.Bind(":head", group.head_index).Bind(":rank", group.rank);
      ins.Bind(":seed", SeedToDb(seed)).Bind(":lease_id", lease_id).Bind(":attempt", attempt);
      ins.Bind(":worker_id", worker_id).Bind(":build_id", version.build_id);
      ins.Bind(":torch_version", version.torch_version);
      ins.Bind(":cuda_version", version.cuda_version).Bind(":finished_ms", now);
      BindResultColumns(ins, kInsertResultFirst, r.result);
      ASSIGN_OR_RETURN(std::string key, sweeps_->TaskKeyOf(c, sweep_id, group.head_index,
                                                           group.rank, group.recipe));
      ins.Bind(kInsertTaskKey, key).Bind(kInsertRecipe, group.recipe);
      BindCurve(ins, r.result.curve);
      ResultRow row =
          FinishedRow(group, seed, CellState::kDone, attempt, lease_id, worker_id, version, now);
      row.result = r.result;
      RETURN_IF_ERROR(ins.Run());
      RETURN_IF_ERROR(InsertPack(c, r.cell_id, sweep_id, row));
    }
    if (const std::vector<int64_t> rungs = PruneRungSteps(spec, task.train); !rungs.empty()) {
      RETURN_IF_ERROR(RecordCurveScores(c, r.cell_id, rungs, r.result));
      prune_groups.insert({sweep_id, group.head_index, group.rank});
    }
    RETURN_IF_ERROR(AddToResultGroup(c, sweep_id, group.head_index, group.rank, group.recipe,
                                     r.result, false));
    {
      static const std::string* sql = new std::string(
          absl::StrCat("UPDATE cells SET state = ", kCellDone,
                       ", lease_deadline_ms = 0, last_failure = '' WHERE id = :id"));
      ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
      u.Bind(":id", r.cell_id);
      RETURN_IF_ERROR(u.Run());
    }
    ++out.recorded;
    touched.insert(sweep_id);
    events.Add(sweep_id,
               absl::StrCat("cell ",
                            CellLabel(spec, group.head_index, group.rank, group.recipe, seed),
                            " done"));
  }
  RETURN_IF_ERROR(RecordCompletions(c, worker_id, now, out.recorded));
  // A recipe done may show a running one to be losing.
  for (const auto& [sweep_id, head, rank] : prune_groups) {
    RETURN_IF_ERROR(sweeps_->PruneAndFinishIn(c, sweep_id, head, rank, now, events));
  }
  for (const std::string& sweep_id : touched) {
    RETURN_IF_ERROR(sweeps_->MaybeFinishIn(c, sweep_id, events));
  }
  if (!want.has_value()) return absl::OkStatus();
  if (next_of > 0 && out.recorded == 0) {
    // Every result was already recorded: the worker sends them again
    // because it lost the reply. What that reply leased goes to it again.
    RETURN_IF_ERROR(leases_->LeasedAsNextIn(c, worker_id, next_of, now, events, out.next_tasks));
    if (!out.next_tasks.empty()) return absl::OkStatus();
  }
  return leases_->LeaseTasksIn(c, worker_id, *want, now, events, out.next_tasks, next_of);
}

}  // namespace ranksweep::server
