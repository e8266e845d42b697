#include "server/core/sweeps/sweep_lifecycle.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/result_validation.h"
#include "common/spec/spec_json.h"
#include "common/status_macros.h"
#include "server/core/ids.h"
#include "server/core/log.h"
#include "server/core/results/result_schema.h"
#include "server/core/sql_columns.h"
#include "server/core/sweeps/pruning.h"
#include "server/core/sweeps/rank_search.h"

namespace ranksweep::server {

// The state columns hold the enums' numbers (types.h, kCellDone and the
// like); statements that name a state are built from those once, in a
// function-local static.
namespace {

// InvalidArgument when one seed of some (head, rank) cell of `spec` is
// estimated above `limit` bytes (0 = no limit).
absl::Status CheckTaskMemory(const SweepSpec& spec, int64_t limit) {
  if (limit <= 0) return absl::OkStatus();
  const uint64_t seed = SweepSeeds(spec).front();
  for (const CellGroupKey& g : GridGroups(spec)) {
    const int64_t bytes =
        EstimateTaskMemoryBytes(MakeTaskSpec(spec, g.head_index, g.rank, g.recipe, {seed}));
    if (bytes <= limit) continue;
    const std::string recipe = RecipeLabel(spec, g.recipe);
    return absl::InvalidArgumentError(absl::StrCat(
        "heads[", g.head_index, "] (", HeadLabel(spec.heads[g.head_index]), ")",
        g.rank > 0 ? absl::StrCat(" at rank ", g.rank) : std::string(),
        recipe.empty() ? std::string() : absl::StrCat(" with ", recipe), ": estimated memory ",
        FormatBytes(bytes), " for one seed exceeds the limit of ", FormatBytes(limit),
        " (--max-task-memory-bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace

SweepLifecycle::SweepLifecycle(Store* store, const Clock* clock, SpecCache* specs,
                               CachePolicy cache, int64_t max_task_memory_bytes)
    : store_(store),
      clock_(clock),
      specs_(specs),
      cache_(std::move(cache)),
      max_task_memory_bytes_(max_task_memory_bytes) {}

absl::StatusOr<std::shared_ptr<const SweepSpec>> SweepLifecycle::SpecOf(
    Connection& c, const std::string& sweep_id) {
  return specs_->Get(c, sweep_id);
}

absl::StatusOr<std::string> SweepLifecycle::TaskKeyOf(Connection& c, const std::string& sweep_id,
                                                      int head_index, int rank, int recipe) {
  const auto group = std::make_tuple(sweep_id, head_index, rank, recipe);
  {
    std::lock_guard<std::mutex> lock(task_key_mu_);
    auto it = task_keys_.find(group);
    if (it != task_keys_.end()) return it->second;
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, SpecOf(c, sweep_id));
  std::string key = TaskKey(*spec, head_index, rank, recipe);
  std::lock_guard<std::mutex> lock(task_key_mu_);
  // Bounded: a full cache starts again empty (keys are recomputed on demand).
  if (task_keys_.size() >= kMaxCachedTaskKeys) task_keys_.clear();
  task_keys_.emplace(group, key);
  return key;
}

// ------------------------------------------------------------------ submit

absl::Status SweepLifecycle::CheckSubmit(const SweepSpec& spec) const {
  RETURN_IF_ERROR(ValidateSweepSpec(spec));
  return CheckTaskMemory(spec, max_task_memory_bytes_);
}

absl::StatusOr<SubmitOutcome> SweepLifecycle::Submit(const SweepSpec& spec,
                                                     const std::string& owner, Events& events) {
  RETURN_IF_ERROR(CheckSubmit(spec));
  const std::string spec_json = SweepSpecToJson(spec);
  const int64_t now = clock_->NowMs();
  SubmitOutcome out;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    out = SubmitOutcome();
    events = Events();
    for (int tries = 0;; ++tries) {
      out.sweep_id = RandomId("sw-");
      ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT 1 FROM sweeps WHERE id = :id"));
      q.Bind(":id", out.sweep_id);
      ASSIGN_OR_RETURN(bool taken, q.Step());
      if (!taken) break;
      if (tries > 100) return absl::InternalError("cannot find a free sweep id");
    }
    {
      static const std::string* sql = new std::string(absl::StrCat(
          "INSERT INTO sweeps (id, name, owner, spec_json, priority, state, created_ms) "
          "VALUES (:id, :name, :owner, :spec_json, :priority, ",
          kSweepRunning, ", :created_ms)"));
      ASSIGN_OR_RETURN(Statement ins, c.Prepare(*sql));
      ins.Bind(":id", out.sweep_id).Bind(":name", spec.name).Bind(":owner", owner);
      ins.Bind(":spec_json", spec_json).Bind(":priority", spec.priority);
      ins.Bind(":created_ms", now);
      RETURN_IF_ERROR(ins.Run());
    }
    // Search mode creates the cells of ranked heads as the search probes
    // ranks (MaybeFinishIn -> AdvanceSearch); rank-less heads and grid mode
    // get every cell now.
    for (const CellGroupKey& g : GridGroups(spec)) {
      if (spec.mode == SweepMode::kSearch && HeadHasRank(spec.heads[g.head_index])) continue;
      RETURN_IF_ERROR(CreateCells(c, out.sweep_id, spec, g, cache_, now).status());
    }
    // Advances a search (its first probes) and ends a sweep whose cells all
    // came from the cache.
    RETURN_IF_ERROR(MaybeFinishIn(c, out.sweep_id, events));
    enum Col : int { kCells, kDone, kPending, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"COUNT(*)", absl::StrCat("COALESCE(SUM(state = ", kCellDone, "), 0)"),
         absl::StrCat("COALESCE(SUM(state = ", kCellPending, "), 0)")},
        "FROM cells WHERE sweep_id = :sweep_id");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":sweep_id", out.sweep_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      out.cells = q.ColumnInt(kCells);
      out.cached_cells = q.ColumnInt(kDone);  // a new sweep's done cells came from the cache
      events.work_available = q.ColumnInt(kPending) > 0;
    }
    return absl::OkStatus();
  }));
  specs_->Put(out.sweep_id, spec);
  LogEvent("sweep %s submitted: name=%s owner=%s priority=%d mode=%s cells=%d cached=%d",
           out.sweep_id, spec.name, owner, spec.priority, Name(spec.mode), out.cells,
           out.cached_cells);
  return out;
}

// ------------------------------------------------------------------ cancel

absl::StatusOr<int64_t> SweepLifecycle::Cancel(const std::string& sweep_id, Events& events) {
  if (sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  int64_t cancelled = 0;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    cancelled = 0;
    events = Events();
    {
      ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT state FROM sweeps WHERE id = :id"));
      q.Bind(":id", sweep_id);
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) return absl::NotFoundError(absl::StrCat("no sweep ", Clip(sweep_id)));
      if (q.ColumnInt(0) != kSweepRunning) {
        return absl::FailedPreconditionError(
            absl::StrCat("sweep ", sweep_id, " has already ended; nothing to cancel"));
      }
    }
    {
      // Leased cells keep their lease id and worker so that Heartbeat can
      // tell the worker to stop.
      static const std::string* sql = new std::string(
          absl::StrCat("UPDATE cells SET state = ", kCellCancelled,
                       ", lease_deadline_ms = 0 WHERE sweep_id = :sweep_id AND state IN (",
                       kCellPending, ", ", kCellLeased, ")"));
      ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
      u.Bind(":sweep_id", sweep_id);
      RETURN_IF_ERROR(u.Run());
      cancelled = c.Changes();
    }
    static const std::string* sql = new std::string(absl::StrCat(
        "UPDATE sweeps SET state = ", kSweepCancelled, ", finished_ms = :finished_ms "
        "WHERE id = :id"));
    ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
    u.Bind(":id", sweep_id).Bind(":finished_ms", clock_->NowMs());
    RETURN_IF_ERROR(u.Run());
    events.Add(sweep_id, absl::StrFormat("sweep %s cancelled: %d cells cancelled", sweep_id,
                                         cancelled),
               /*final=*/true);
    return absl::OkStatus();
  }));
  LogEvent("sweep %s cancelled: %d cells cancelled", sweep_id, cancelled);
  return cancelled;
}

// ------------------------------------------------------------------ search and finish

absl::StatusOr<int64_t> SweepLifecycle::AdvanceSearch(Connection& c, const std::string& sweep_id,
                                                      const SweepSpec& spec, Events& events) {
  // The split the search judges: test when the dataset has one (the OOD
  // presets' question), else train. A rank is probed under every recipe at
  // once and is a hit when some recipe meets the criterion (rank_search.h).
  const bool test_split = HasTestSplit(spec);
  const int recipes = static_cast<int>(RecipeCount(spec));
  const Criterion criterion;  // every seed exact: a sweep spec names no other
  const int64_t now = clock_->NowMs();
  int64_t created_total = 0;
  while (true) {
    // Per head, the ranks probed so far, each by recipe.
    std::map<int, std::map<int, RecipeProbes>> probes;
    {
      enum Col : int { kHeadIndex, kRecipe, kRank, kOpen, kExact, kCells, kAccuracy, kCount };
      auto probe_sql = [](const char* split) {
        return NewSelect<kCount>(
            {"c.head_index", "c.recipe", "c.rank",
             absl::StrCat("SUM(c.state IN (", kCellPending, ", ", kCellLeased, "))"),
             absl::StrCat("SUM(c.state = ", kCellDone, " AND r.", split, "_error = 0)"),
             "COUNT(*)",
             absl::StrCat("TOTAL(CASE WHEN c.state = ", kCellDone, " THEN r.", split,
                          "_exact_accuracy END)")},
            "FROM cells c LEFT JOIN results r ON r.cell_id = c.id WHERE c.sweep_id = :sweep_id "
            "GROUP BY c.head_index, c.recipe, c.rank");
      };
      static const std::string* test_sql = probe_sql("test");
      static const std::string* train_sql = probe_sql("train");
      ASSIGN_OR_RETURN(Statement q, c.Prepare(test_split ? *test_sql : *train_sql));
      q.Bind(":sweep_id", sweep_id);
      while (true) {
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) break;
        probes[static_cast<int>(q.ColumnInt(kHeadIndex))][static_cast<int>(q.ColumnInt(kRank))]
              [static_cast<int32_t>(q.ColumnInt(kRecipe))] =
            RankProbe{q.ColumnInt(kOpen), q.ColumnInt(kExact), q.ColumnInt(kCells),
                      q.ColumnDouble(kAccuracy)};
      }
    }
    int64_t created = 0;
    for (int h = 0; h < static_cast<int>(spec.heads.size()); ++h) {
      if (!HeadHasRank(spec.heads[h])) continue;
      const std::optional<int> rank = NextRankToProbe(spec.ranks, probes[h], criterion);
      if (!rank.has_value()) continue;
      for (int recipe = 0; recipe < recipes; ++recipe) {
        ASSIGN_OR_RETURN(auto made, CreateCells(c, sweep_id, spec, {h, *rank, recipe}, cache_,
                                                now));
        events.Log("sweep %s search: %s%s probes rank %d (%d cells, %d from the cache)",
                   sweep_id, HeadLabel(spec.heads[h]),
                   spec.axes.empty() ? std::string() : " " + RecipeLabel(spec, recipe), *rank,
                   made.first, made.second);
        created += made.first;
      }
    }
    created_total += created;
    if (created == 0) return created_total;
  }
}

absl::Status SweepLifecycle::MaybeFinishIn(Connection& c, const std::string& sweep_id,
                                           Events& events) {
  {
    ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT state FROM sweeps WHERE id = :id"));
    q.Bind(":id", sweep_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row || q.ColumnInt(0) != kSweepRunning) return absl::OkStatus();
  }
  {
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, SpecOf(c, sweep_id));
    if (spec->mode == SweepMode::kSearch) {
      ASSIGN_OR_RETURN(int64_t created, AdvanceSearch(c, sweep_id, *spec, events));
      if (created > 0) events.work_available = true;
    }
  }
  {
    // Called after every completion: a point lookup on cells_by_state
    // decides the common case (cells still open) without counting. A range,
    // not IN (1, 2), which SQLite runs by building a table of the two values
    // on every call.
    static_assert(kCellLeased == kCellPending + 1, "the open states must be one range");
    static const std::string* sql = new std::string(
        absl::StrCat("SELECT 1 FROM cells WHERE sweep_id = :sweep_id AND state BETWEEN ",
                     kCellPending, " AND ", kCellLeased, " LIMIT 1"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":sweep_id", sweep_id);
    ASSIGN_OR_RETURN(bool open, q.Step());
    if (open) return absl::OkStatus();
  }
  int64_t open = 0, done = 0, failed = 0;
  {
    ASSIGN_OR_RETURN(Statement q, c.Prepare(StateCountSql()));
    q.Bind(":sweep_id", sweep_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      const int state = static_cast<int>(q.ColumnInt(StateCountCol::kState));
      const int64_t n = q.ColumnInt(StateCountCol::kCells);
      if (state == kCellPending || state == kCellLeased) open += n;
      if (state == kCellDone) done += n;
      if (state == kCellFailed) failed += n;
    }
  }
  if (open > 0) return absl::OkStatus();
  const SweepState state = failed > 0 ? SweepState::kFailed : SweepState::kDone;
  {
    ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE sweeps SET state = :state, finished_ms = "
                                            ":finished_ms WHERE id = :id"));
    u.Bind(":id", sweep_id).Bind(":state", static_cast<int>(state));
    u.Bind(":finished_ms", clock_->NowMs());
    RETURN_IF_ERROR(u.Run());
  }
  std::string message =
      absl::StrFormat("sweep %s %s: %d cells done, %d failed", sweep_id, Name(state), done, failed);
  events.Log("%s", message);
  events.Add(sweep_id, std::move(message), /*final=*/true);
  return absl::OkStatus();
}

absl::Status SweepLifecycle::PruneAndFinishIn(Connection& c, const std::string& sweep_id,
                                              int head, int rank, int64_t now, Events& events) {
  ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, SpecOf(c, sweep_id));
  ASSIGN_OR_RETURN(std::vector<std::string> lines,
                   PruneGroup(c, sweep_id, *spec, head, rank, now));
  if (lines.empty()) return absl::OkStatus();
  for (const std::string& line : lines) {
    events.Log("sweep %s: %s", sweep_id, line);
    events.Add(sweep_id, absl::StrCat("pruned ", line));
  }
  return MaybeFinishIn(c, sweep_id, events);
}

absl::Status SweepLifecycle::RecoverIn(Connection& c, Events& events, RecoveryReport& report) {
  std::vector<std::string> running;
  {
    static const std::string* sql =
        new std::string(absl::StrCat("SELECT id FROM sweeps WHERE state = ", kSweepRunning));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      running.push_back(q.ColumnText(0));
    }
  }
  for (const std::string& id : running) {
    RETURN_IF_ERROR(MaybeFinishIn(c, id, events));
  }
  report.sweeps_finished = 0;
  for (const SweepChange& change : events.changes) {
    if (change.final) ++report.sweeps_finished;
  }
  // Pending cells belong to running sweeps only: counted per running sweep
  // through cells_by_state, not over all cells; leased cells through the
  // index that holds only them.
  enum Col : int { kRunningSweeps, kPendingCells, kLeasedCells, kCount };
  static const std::string* sql = NewSelect<kCount>(
      {absl::StrCat("(SELECT COUNT(*) FROM sweeps WHERE state = ", kSweepRunning, ")"),
       absl::StrCat("(SELECT COUNT(*) FROM sweeps s JOIN cells c ON c.sweep_id = s.id AND "
                    "c.state = ", kCellPending, " WHERE s.state = ", kSweepRunning, ")"),
       absl::StrCat("(SELECT COUNT(*) FROM cells INDEXED BY cells_leased WHERE state = ",
                    kCellLeased, ")")},
      "");
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (row) {
    report.running_sweeps = q.ColumnInt(kRunningSweeps);
    report.pending_cells = q.ColumnInt(kPendingCells);
    report.leases_kept = q.ColumnInt(kLeasedCells);
  }
  return absl::OkStatus();
}

}  // namespace ranksweep::server
