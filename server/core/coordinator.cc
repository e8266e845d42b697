#include "server/core/coordinator.h"

#include <openssl/rand.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include <openssl/sha.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/result_validation.h"
#include "common/spec/spec_json.h"
#include "common/status_macros.h"
#include "server/core/cell_plan.h"
#include "server/core/lease_order.h"
#include "server/core/log.h"
#include "server/core/packed_row.h"
#include "server/core/pruning.h"
#include "server/core/quarantine.h"
#include "server/core/rank_search.h"
#include "server/core/result_checks.h"
#include "server/core/result_schema.h"
#include "server/core/sql_columns.h"
#include "server/core/auth.h"
#include "server/core/worker_registry.h"

namespace ranksweep::server {

// The state columns hold the enums' numbers (types.h, kCellDone and the
// like); statements that name a state are built from those once, in a
// function-local static.
namespace {

std::string RandomId(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 gen{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  return absl::StrFormat("%s%08x", prefix, static_cast<uint32_t>(gen()));
}

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

// The builds and reach of the result cache (cell_plan.h): the coordinator's
// own build, then the admitted ones, each once.
CachePolicy CachePolicyOf(const CoordinatorOptions& options) {
  CachePolicy policy;
  policy.shared = options.shared_cache;
  std::vector<std::string> builds = options.trusted_builds;
  builds.insert(builds.begin(), options.code_version);
  for (const std::string& b : builds) {
    if (b.empty() || std::find(policy.builds.begin(), policy.builds.end(), b) !=
                         policy.builds.end()) {
      continue;
    }
    policy.builds.push_back(b);
  }
  return policy;
}

}  // namespace

Coordinator::Coordinator(Store* store, const Clock* clock, CoordinatorOptions options)
    : store_(store),
      clock_(clock),
      options_(options),
      cache_policy_(CachePolicyOf(options)),
      queries_(store, clock, &specs_, options.lease_ms, options.two_thread_query_rows) {}

// ------------------------------------------------------------------ helpers

absl::StatusOr<std::shared_ptr<const SweepSpec>> Coordinator::SpecOf(
    Connection& c, const std::string& sweep_id) {
  return specs_.Get(c, sweep_id);
}

absl::StatusOr<std::string> Coordinator::TaskKeyOf(Connection& c, const std::string& sweep_id,
                                                    int head_index, int rank, int recipe) {
  const auto group = std::make_tuple(sweep_id, head_index, rank, recipe);
  {
    std::lock_guard<std::mutex> lock(spec_mu_);
    auto it = task_key_cache_.find(group);
    if (it != task_key_cache_.end()) return it->second;
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec_ptr, SpecOf(c, sweep_id));
  const SweepSpec& spec = *spec_ptr;
  std::string key = TaskKey(spec, head_index, rank, recipe);
  std::lock_guard<std::mutex> lock(spec_mu_);
  // Bounded: a full cache starts again empty (keys are recomputed on demand).
  if (task_key_cache_.size() >= kMaxCachedTaskKeys) task_key_cache_.clear();
  task_key_cache_.emplace(group, key);
  return key;
}

absl::StatusOr<int64_t> Coordinator::AdvanceSearch(Connection& c, const std::string& sweep_id,
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
            "FROM cells c LEFT JOIN results r ON r.cell_id = c.id WHERE c.sweep_id = ?1 "
            "GROUP BY c.head_index, c.recipe, c.rank");
      };
      static const std::string* test_sql = probe_sql("test");
      static const std::string* train_sql = probe_sql("train");
      ASSIGN_OR_RETURN(Statement q, c.Prepare(test_split ? *test_sql : *train_sql));
      q.Bind(1, sweep_id);
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
        ASSIGN_OR_RETURN(auto made, CreateCells(c, sweep_id, spec, {h, *rank, recipe},
                                                cache_policy_, now));
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

absl::Status Coordinator::MaybeFinishSweep(Connection& c, const std::string& sweep_id,
                                           Events& events) {
  {
    ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT state FROM sweeps WHERE id = ?1"));
    q.Bind(1, sweep_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row || q.ColumnInt(0) != kSweepRunning) return absl::OkStatus();
  }
  {
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec_ptr, SpecOf(c, sweep_id));
    const SweepSpec& spec = *spec_ptr;
    if (spec.mode == SweepMode::kSearch) {
      ASSIGN_OR_RETURN(int64_t created, AdvanceSearch(c, sweep_id, spec, events));
      if (created > 0) events.work_available = true;
    }
  }
  {
    // Called after every completion: a point lookup on cells_by_state
    // decides the common case (cells still open) without counting. A range,
    // not IN (1, 2), which SQLite runs by building a table of the two values
    // on every call.
    static_assert(kCellLeased == kCellPending + 1, "the open states must be one range");
    static const std::string* sql =
        new std::string(absl::StrCat("SELECT 1 FROM cells WHERE sweep_id = ?1 AND state BETWEEN ",
                                     kCellPending, " AND ", kCellLeased, " LIMIT 1"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(1, sweep_id);
    ASSIGN_OR_RETURN(bool open, q.Step());
    if (open) return absl::OkStatus();
  }
  int64_t open = 0, done = 0, failed = 0;
  {
    ASSIGN_OR_RETURN(Statement q, c.Prepare(StateCountSql()));
    q.Bind(1, sweep_id);
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
    ASSIGN_OR_RETURN(Statement u,
                     c.Prepare("UPDATE sweeps SET state = ?2, finished_ms = ?3 WHERE id = ?1"));
    u.Bind(1, sweep_id).Bind(2, static_cast<int>(state)).Bind(3, clock_->NowMs());
    RETURN_IF_ERROR(u.Run());
  }
  std::string message =
      absl::StrFormat("sweep %s %s: %d cells done, %d failed", sweep_id, Name(state), done, failed);
  events.Log("%s", message);
  events.Add(sweep_id, std::move(message), /*final=*/true);
  return absl::OkStatus();
}

absl::Status Coordinator::ReturnCell(Connection& c, int64_t cell_id, const std::string& reason,
                                     bool use_attempt, Events& events) {
  std::string sweep_id, worker_id;
  CellGroupKey group;
  int attempt = 0;
  uint64_t seed = 0;
  int64_t lease_id = 0;
  {
    enum Col : int {
      kSweepId, kHeadIndex, kRank, kRecipe, kSeed, kAttempt, kWorkerId, kLeaseId, kCount
    };
    static const std::string* sql = NewSelect<kCount>(
        {"sweep_id", "head_index", "rank", "recipe", "seed", "attempt", "worker_id", "lease_id"},
        "FROM cells WHERE id = ?1");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(1, cell_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::NotFoundError(absl::StrCat("no cell ", cell_id));
    sweep_id = q.ColumnText(kSweepId);
    group.head_index = static_cast<int>(q.ColumnInt(kHeadIndex));
    group.rank = static_cast<int>(q.ColumnInt(kRank));
    group.recipe = static_cast<int>(q.ColumnInt(kRecipe));
    seed = SeedFromDb(q.ColumnInt(kSeed));
    attempt = static_cast<int>(q.ColumnInt(kAttempt));
    worker_id = q.ColumnText(kWorkerId);
    lease_id = q.ColumnInt(kLeaseId);
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec_ptr, SpecOf(c, sweep_id));
  const SweepSpec& spec = *spec_ptr;
  const std::string label = CellLabel(spec, group.head_index, group.rank, group.recipe, seed);

  if (!use_attempt || attempt < options_.max_attempts) {
    static const std::string* sql = new std::string(
        absl::StrCat("UPDATE cells SET state = ", kCellPending,
                     ", attempt = ?2, lease_id = 0, lease_deadline_ms = 0, worker_id = '', "
                     "last_failure = ?3 WHERE id = ?1"));
    ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
    u.Bind(1, cell_id).Bind(2, use_attempt ? attempt : std::max(attempt - 1, 0));
    u.Bind(3, use_attempt ? reason : std::string());
    RETURN_IF_ERROR(u.Run());
    events.Add(sweep_id, absl::StrCat("cell ", label, use_attempt ? " retried: " : " released: ",
                                      reason));
    events.work_available = true;
    return absl::OkStatus();
  }

  // Out of attempts: the cell fails for good with the last reason.
  const std::string failure =
      absl::StrFormat("%s (attempt %d of %d)", reason, attempt, options_.max_attempts);
  {
    static const std::string* sql =
        new std::string(absl::StrCat("UPDATE cells SET state = ", kCellFailed,
                                     ", lease_deadline_ms = 0, last_failure = ?2 WHERE id = ?1"));
    ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
    u.Bind(1, cell_id).Bind(2, failure);
    RETURN_IF_ERROR(u.Run());
  }
  ASSIGN_OR_RETURN(const VersionManifest version, WorkerVersion(c, worker_id));
  {
    static const std::string* sql = new std::string(absl::StrCat(
        "INSERT OR REPLACE INTO results (cell_id, sweep_id, head_index, rank, seed, state, "
        "lease_id, attempt, worker_id, worker_build_id, worker_torch_version, "
        "worker_cuda_version, failure, finished_ms, recipe) VALUES (?1, ?2, ?3, ?4, ?5, ",
        kCellFailed, ", ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"));
    ASSIGN_OR_RETURN(Statement ins, c.Prepare(*sql));
    ins.Bind(1, cell_id).Bind(2, sweep_id).Bind(3, group.head_index).Bind(4, group.rank);
    ins.Bind(5, SeedToDb(seed)).Bind(14, group.recipe);
    ins.Bind(6, lease_id).Bind(7, attempt).Bind(8, worker_id).Bind(9, version.build_id);
    ins.Bind(10, version.torch_version).Bind(11, version.cuda_version).Bind(12, failure);
    ResultRow row = FinishedRow(group, seed, CellState::kFailed, attempt, lease_id, worker_id,
                                version, clock_->NowMs());
    row.failure = failure;
    ins.Bind(13, row.finished_unix_ms);
    RETURN_IF_ERROR(ins.Run());
    RETURN_IF_ERROR(InsertPack(c, cell_id, sweep_id, row));
  }
  events.Log("cell %d (%s) of sweep %s failed: %s", cell_id, label, sweep_id, Clip(failure));
  events.Add(sweep_id, absl::StrCat("cell ", label, " failed: ", failure));
  return MaybeFinishSweep(c, sweep_id, events);
}

// Events: server/core/events.h.
void Coordinator::Dispatch(Events& events) { listeners_.Dispatch(events); }

int64_t Coordinator::Subscribe(const std::string& sweep_id, SweepListener listener) {
  return listeners_.Subscribe(sweep_id, std::move(listener));
}

void Coordinator::Unsubscribe(int64_t subscription) { listeners_.Unsubscribe(subscription); }

void Coordinator::SetWorkListener(WorkListener listener) {
  listeners_.SetWorkListener(std::move(listener));
}

// ------------------------------------------------------------------ recovery

absl::StatusOr<RecoveryReport> Coordinator::Recover() {
  RecoveryReport report;
  Events events;
  const int64_t now = clock_->NowMs();
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    report = RecoveryReport();
    events = Events();
    ASSIGN_OR_RETURN(report.leases_expired, ExpireLeasesLocked(c, now, events));
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
      RETURN_IF_ERROR(MaybeFinishSweep(c, id, events));
    }
    report.sweeps_finished = 0;
    for (const SweepChange& change : events.changes) {
      if (change.final) ++report.sweeps_finished;
    }
    // Pending cells belong to running sweeps only: counted per running
    // sweep through cells_by_state, not over all cells; leased cells
    // through the index that holds only them.
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
  }));
  Dispatch(events);
  LogEvent("recovered %s: %d running sweeps, %d pending cells, %d leases kept, %d expired, "
           "%d sweeps finished",
           store_->path(), report.running_sweeps, report.pending_cells, report.leases_kept,
           report.leases_expired, report.sweeps_finished);
  return report;
}

// ------------------------------------------------------------------ sweeps

absl::StatusOr<SubmitOutcome> Coordinator::Submit(const SweepSpec& spec, const std::string& owner) {
  RETURN_IF_ERROR(ValidateSweepSpec(spec));
  RETURN_IF_ERROR(CheckTaskMemory(spec, options_.max_task_memory_bytes));
  const std::vector<uint64_t> seeds = SweepSeeds(spec);
  const std::string spec_json = SweepSpecToJson(spec);
  const int64_t now = clock_->NowMs();
  SubmitOutcome out;
  Events events;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    out = SubmitOutcome();
    events = Events();
    // Ids are random so that they do not reveal how busy the service is.
    for (int tries = 0;; ++tries) {
      out.sweep_id = RandomId("sw-");
      ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT 1 FROM sweeps WHERE id = ?1"));
      q.Bind(1, out.sweep_id);
      ASSIGN_OR_RETURN(bool taken, q.Step());
      if (!taken) break;
      if (tries > 100) return absl::InternalError("cannot find a free sweep id");
    }
    {
      static const std::string* sql = new std::string(
          absl::StrCat("INSERT INTO sweeps (id, name, owner, spec_json, priority, state, "
                       "created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ", kSweepRunning, ", ?6)"));
      ASSIGN_OR_RETURN(Statement ins, c.Prepare(*sql));
      ins.Bind(1, out.sweep_id).Bind(2, spec.name).Bind(3, owner).Bind(4, spec_json);
      ins.Bind(5, spec.priority).Bind(6, now);
      RETURN_IF_ERROR(ins.Run());
    }
    // Search mode creates the cells of ranked heads as the search probes
    // ranks (MaybeFinishSweep -> AdvanceSearch, below); rank-less heads and
    // grid mode get every cell now.
    for (const CellGroupKey& g : GridGroups(spec)) {
      if (spec.mode == SweepMode::kSearch && HeadHasRank(spec.heads[g.head_index])) continue;
      RETURN_IF_ERROR(
          CreateCells(c, out.sweep_id, spec, g, cache_policy_, now).status());
    }
    // Advances a search (its first probes) and ends a sweep whose cells all
    // came from the cache.
    RETURN_IF_ERROR(MaybeFinishSweep(c, out.sweep_id, events));
    enum Col : int { kCells, kDone, kPending, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"COUNT(*)", absl::StrCat("COALESCE(SUM(state = ", kCellDone, "), 0)"),
         absl::StrCat("COALESCE(SUM(state = ", kCellPending, "), 0)")},
        "FROM cells WHERE sweep_id = ?1");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(1, out.sweep_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      out.cells = q.ColumnInt(kCells);
      out.cached_cells = q.ColumnInt(kDone);  // a new sweep's done cells came from the cache
      events.work_available = q.ColumnInt(kPending) > 0;
    }
    return absl::OkStatus();
  }));
  specs_.Put(out.sweep_id, spec);
  LogEvent("sweep %s submitted: name=%s owner=%s priority=%d mode=%s cells=%d cached=%d",
           out.sweep_id, spec.name, owner, spec.priority, Name(spec.mode), out.cells,
           out.cached_cells);
  Dispatch(events);
  return out;
}

// The reads: server/core/result_queries.h.
absl::StatusOr<SweepInfo> Coordinator::GetSweep(const std::string& sweep_id) {
  return queries_.GetSweep(sweep_id);
}

absl::StatusOr<std::vector<SweepInfo>> Coordinator::ListSweeps(
    std::optional<SweepState> state, int limit, const std::optional<std::string>& owner) {
  return queries_.ListSweeps(state, limit, owner);
}

absl::StatusOr<std::string> Coordinator::SweepOwner(const std::string& sweep_id) {
  return queries_.SweepOwner(sweep_id);
}

absl::StatusOr<QueryOutcome> Coordinator::Query(const ResultQuery& query) {
  return queries_.Query(query);
}

absl::StatusOr<QueryOutcome> Coordinator::Query(const ResultQuery& query, RowSink& sink) {
  return queries_.Query(query, sink);
}

absl::StatusOr<std::vector<WorkerInfo>> Coordinator::ListWorkers() {
  return queries_.ListWorkers();
}

absl::StatusOr<std::map<CellState, int64_t>> Coordinator::CountCellsByState() {
  return queries_.CountCellsByState();
}

absl::StatusOr<std::map<SweepState, int64_t>> Coordinator::CountSweepsByState() {
  return queries_.CountSweepsByState();
}

absl::StatusOr<int64_t> Coordinator::Cancel(const std::string& sweep_id) {
  if (sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  int64_t cancelled = 0;
  bool was_running = false;
  Events events;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    cancelled = 0;
    events = Events();
    {
      ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT state FROM sweeps WHERE id = ?1"));
      q.Bind(1, sweep_id);
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) return absl::NotFoundError(absl::StrCat("no sweep ", Clip(sweep_id)));
      was_running = q.ColumnInt(0) == kSweepRunning;
    }
    if (!was_running) {
      return absl::FailedPreconditionError(
          absl::StrCat("sweep ", sweep_id, " has already ended; nothing to cancel"));
    }
    {
      // Leased cells keep their lease id and worker so that Heartbeat can
      // tell the worker to stop.
      static const std::string* sql = new std::string(
          absl::StrCat("UPDATE cells SET state = ", kCellCancelled,
                       ", lease_deadline_ms = 0 WHERE sweep_id = ?1 AND state IN (",
                       kCellPending, ", ", kCellLeased, ")"));
      ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
      u.Bind(1, sweep_id);
      RETURN_IF_ERROR(u.Run());
      cancelled = c.Changes();
    }
    static const std::string* sql = new std::string(absl::StrCat(
        "UPDATE sweeps SET state = ", kSweepCancelled, ", finished_ms = ?2 WHERE id = ?1"));
    ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
    u.Bind(1, sweep_id).Bind(2, clock_->NowMs());
    RETURN_IF_ERROR(u.Run());
    events.Add(sweep_id, absl::StrFormat("sweep %s cancelled: %d cells cancelled", sweep_id,
                                         cancelled),
               /*final=*/true);
    return absl::OkStatus();
  }));
  LogEvent("sweep %s cancelled: %d cells cancelled", sweep_id, cancelled);
  Dispatch(events);
  return cancelled;
}

// ------------------------------------------------------------------ workers

absl::StatusOr<RegisteredWorker> Coordinator::RegisterWorker(const WorkerRegistration& reg) {
  ASSIGN_OR_RETURN(const int slots, CheckRegistration(reg));
  ASSIGN_OR_RETURN(const std::string session, NewSessionSecret());
  const std::string session_hash = HashToken(session);
  const int64_t now = clock_->NowMs();
  std::string worker_id = reg.worker_id;
  bool known = false;
  int64_t released = 0;
  Events events;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    worker_id = reg.worker_id;
    known = false;
    released = 0;
    events = Events();
    // A token held by a quarantine registers nothing, under any id.
    RETURN_IF_ERROR(CheckTokenNotHeld(c, reg.owner));
    if (!worker_id.empty()) {
      RETURN_IF_ERROR(CheckWorkerOwner(c, worker_id, reg.owner));
      // A quarantined worker cannot come back by registering again.
      RETURN_IF_ERROR(CheckNotQuarantined(c, worker_id));
      ASSIGN_OR_RETURN(known, WorkerExists(c, worker_id));
    } else {
      ASSIGN_OR_RETURN(worker_id, NewWorkerId(c, [] { return RandomId("wk-"); }));
    }
    if (known) {
      // The previous process of this worker is gone: what it held is released.
      ASSIGN_OR_RETURN(const std::vector<int64_t> cells, LeasedCellsOf(c, worker_id));
      for (int64_t cell : cells) {
        RETURN_IF_ERROR(ReturnCell(c, cell, "worker re-registered", /*use_attempt=*/false, events));
      }
      released = static_cast<int64_t>(cells.size());
    }
    return SaveWorker(c, worker_id, reg, slots, now, session_hash);
  }));
  LogRegistration(reg, worker_id, slots, known, released);
  Dispatch(events);
  return RegisteredWorker{worker_id, session};
}

absl::Status Coordinator::CheckWorkerSession(const std::string& worker_id,
                                             const std::string& owner,
                                             const std::string& session) {
  return store_->QuickRead([&](Connection& c) -> absl::Status {
    return server::CheckWorkerSession(c, worker_id, owner, session);
  });
}

namespace {

struct LeaseRow {
  int64_t cell_id = 0;
  int state = 0;
  std::string worker_id;
};

// The cell whose current or last lease is `lease_id`, if any.
absl::StatusOr<std::optional<LeaseRow>> FindLease(Connection& c, int64_t lease_id) {
  // "lease_id != 0" lets SQLite use the partial index cells_by_lease.
  enum Col : int { kId, kState, kWorkerId, kCount };
  static const std::string* sql = NewSelect<kCount>(
      {"id", "state", "worker_id"}, "FROM cells WHERE lease_id = ?1 AND lease_id != 0");
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(1, lease_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<LeaseRow>();
  return std::optional<LeaseRow>(LeaseRow{q.ColumnInt(kId), static_cast<int>(q.ColumnInt(kState)),
                                          q.ColumnText(kWorkerId)});
}

// A lease the caller does not hold, whatever the reason (expired,
// reassigned, another worker's, cancelled before it was leased): one message,
// so that no reply tells another worker's leases from stale ones, or names
// the lease a cell is under now.
absl::Status NotYourLease(int64_t lease_id, int64_t cell_id) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "lease %d for cell %d is not held by this worker (expired, reassigned or never its own)",
      lease_id, cell_id));
}

// A lease id nobody can guess: 63 random bits from OpenSSL's RAND_bytes,
// never 0 (which means "no lease" in cells.lease_id). Two leases share an
// id with probability 2^-63 per pair.
absl::StatusOr<int64_t> NewLeaseId() {
  while (true) {
    uint64_t bits = 0;
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&bits), sizeof(bits)) != 1) {
      return absl::InternalError("the random source (OpenSSL RAND_bytes) failed");
    }
    const int64_t id = static_cast<int64_t>(bits >> 1);
    if (id != 0) return id;
  }
}

// The task spec of a leased task: the sweep's (head, rank) with the seeds of
// its cells, in their order.
TaskSpec LeasedTaskSpec(const SweepSpec& spec, const Task& task) {
  std::vector<uint64_t> seeds;
  for (const LeasedCell& cell : task.cells) seeds.push_back(cell.seed);
  return MakeTaskSpec(spec, task.head_index, task.rank, task.recipe, std::move(seeds));
}

}  // namespace

absl::Status Coordinator::CheckWant(TaskWant& want, const char* field_prefix) const {
  if (want.max_tasks == 0) want.max_tasks = 1;
  if (want.max_tasks < 0 || want.max_tasks > options_.max_tasks_per_acquire) {
    return absl::InvalidArgumentError(absl::StrCat(field_prefix, "max_tasks: must be 1..",
                                                   options_.max_tasks_per_acquire, ", got ",
                                                   want.max_tasks));
  }
  if (want.max_seeds == 0) want.max_seeds = options_.default_seeds_per_task;
  if (want.max_seeds < 0 || want.max_seeds > options_.max_seeds_per_task) {
    return absl::InvalidArgumentError(absl::StrCat(field_prefix, "max_seeds: must be 1..",
                                                   options_.max_seeds_per_task, ", got ",
                                                   want.max_seeds));
  }
  if (want.memory_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field_prefix, "memory_bytes: must be >= 0 (0 = unknown), got ", want.memory_bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Task>> Coordinator::Acquire(const std::string& worker_id,
                                                       int max_tasks, int max_seeds,
                                                       int64_t memory_bytes) {
  TaskWant want{max_tasks, max_seeds, memory_bytes};
  RETURN_IF_ERROR(CheckWant(want, ""));
  const int64_t now = clock_->NowMs();
  std::vector<Task> tasks;
  Events events;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    return AcquireIn(c, worker_id, want, now, events, tasks);
  }));
  Dispatch(events);
  return tasks;
}

void Coordinator::AcquireAsync(std::string worker_id, TaskWant want, AcquireDone done) {
  if (absl::Status s = CheckWant(want, ""); !s.ok()) return done(s);
  // What the transaction fills in, kept until `done` has run.
  struct Call {
    std::string worker_id;
    TaskWant want;
    int64_t now;
    AcquireDone done;
    std::vector<Task> tasks;
    Events events;
  };
  auto call = std::make_shared<Call>(
      Call{std::move(worker_id), want, clock_->NowMs(), std::move(done), {}, {}});
  store_->WriteAsync(
      [this, call](Connection& c) -> absl::Status {
        return AcquireIn(c, call->worker_id, call->want, call->now, call->events, call->tasks);
      },
      [this, call](absl::Status s) {
        if (!s.ok()) return call->done(s);
        Dispatch(call->events);
        call->done(std::move(call->tasks));
      });
}

absl::Status Coordinator::AcquireIn(Connection& c, const std::string& worker_id,
                                    const TaskWant& want, int64_t now, Events& events,
                                    std::vector<Task>& tasks) {
  tasks.clear();
  events = Events();
  RETURN_IF_ERROR(TouchWorker(c, worker_id, now));
  // Checked again inside the transaction: a quarantine ordered after the
  // service's session check still holds.
  RETURN_IF_ERROR(CheckNotQuarantined(c, worker_id));
  return LeaseTasks(c, worker_id, want, now, events, tasks);
}

absl::Status Coordinator::LeaseTasks(Connection& c, const std::string& worker_id,
                                     const TaskWant& want, int64_t now, Events& events,
                                     std::vector<Task>& tasks, int64_t next_of) {
  const int64_t deadline = now + options_.lease_ms;
  int leased = 0;
  // Lease ids are random (NewLeaseId); meta's next_lease_id, which counted
  // them up to schema 13, is no longer read.
  int64_t serve_counter = 0;
  {
    enum Col : int { kServeCounter, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"(SELECT value FROM meta WHERE key = 'serve_counter')"}, "");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row || q.ColumnIsNull(kServeCounter)) {
      return absl::DataLossError("meta table is missing its counters");
    }
    serve_counter = q.ColumnInt(kServeCounter);
  }
  // The memory the tasks of this call share: the request's, else the
  // worker's registered memory, else unlimited (budget < 0).
  int64_t budget = want.memory_bytes;
  if (budget == 0) {
    ASSIGN_OR_RETURN(budget, RegisteredMemoryBytes(c, worker_id));
  }
  const bool limited = budget > 0;
  // Groups that did not fit this call's (only shrinking) budget.
  TooBigGroups too_big;
  while (leased < want.max_tasks) {
    // Serving order and memory fit: server/core/lease_order.h.
    ASSIGN_OR_RETURN(std::optional<LeasePick> pick,
                     NextGroupToLease(c, specs_, want.max_seeds, limited, budget, too_big));
    if (!pick.has_value()) break;
    Task task;
    task.sweep_id = pick->sweep_id;
    task.head_index = pick->head_index;
    task.rank = pick->rank;
    task.recipe = pick->recipe;
    const int64_t seeds_to_lease = pick->seeds;
    const std::string& sweep_id = task.sweep_id;
    {
      enum Col : int { kId, kSeed, kAttempt, kCount };
      static const std::string* sql = NewSelect<kCount>(
          {"id", "seed", "attempt"},
          absl::StrCat("FROM cells WHERE sweep_id = ?1 AND state = ", kCellPending,
                       " AND head_index = ?2 AND rank = ?3 AND recipe = ?5 ORDER BY id LIMIT ?4"));
      ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
      q.Bind(1, sweep_id).Bind(2, task.head_index).Bind(3, task.rank).Bind(4, seeds_to_lease);
      q.Bind(5, task.recipe);
      while (true) {
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) break;
        task.cells.push_back(LeasedCell{q.ColumnInt(kId), SeedFromDb(q.ColumnInt(kSeed)), 0,
                                        static_cast<int>(q.ColumnInt(kAttempt)) + 1});
      }
    }
    if (task.cells.empty()) {
      return absl::InternalError("pending cell vanished inside a transaction");
    }
    {
      static const std::string* sql = new std::string(
          absl::StrCat("UPDATE cells SET state = ", kCellLeased,
                       ", attempt = attempt + 1, lease_id = ?2, lease_deadline_ms = ?3, "
                       "worker_id = ?4, next_of = ?5, next_task = ?6 WHERE id = ?1"));
      ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
      for (LeasedCell& cell : task.cells) {
        ASSIGN_OR_RETURN(cell.lease_id, NewLeaseId());
        u.Reset();
        u.Bind(1, cell.cell_id).Bind(2, cell.lease_id).Bind(3, deadline).Bind(4, worker_id);
        u.Bind(5, next_of).Bind(6, next_of != 0 ? leased : 0);
        RETURN_IF_ERROR(u.Run());
      }
    }
    {
      ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE sweeps SET served = ?2 WHERE id = ?1"));
      u.Bind(1, sweep_id).Bind(2, ++serve_counter);
      RETURN_IF_ERROR(u.Run());
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec_ptr, SpecOf(c, sweep_id));
    const SweepSpec& spec = *spec_ptr;
    task.spec = LeasedTaskSpec(spec, task);
    task.rung_steps = PruneRungSteps(spec, task.spec.train);
    if (limited) budget -= EstimateTaskMemoryBytes(task.spec);
    task.deadline_unix_ms = deadline;
    events.Add(sweep_id, absl::StrFormat("%s: %d cells leased to %s",
                                         CellLabel(spec, task.head_index, task.rank,
                                                   task.recipe, task.cells.front().seed),
                                         task.cells.size(), worker_id));
    tasks.push_back(std::move(task));
    ++leased;
  }
  if (leased == 0) return absl::OkStatus();  // the counters are unchanged
  ASSIGN_OR_RETURN(Statement u,
                   c.Prepare("UPDATE meta SET value = :value WHERE key = 'serve_counter'"));
  u.Bind(":value", serve_counter);
  return u.Run();
}

absl::Status Coordinator::LeasedAsNext(Connection& c, const std::string& worker_id,
                                       int64_t next_of, int64_t now, Events& events,
                                       std::vector<Task>& tasks) {
  const int64_t deadline = now + options_.lease_ms;
  const size_t first = tasks.size();
  {
    enum Col : int {
      kId, kSweepId, kHeadIndex, kRank, kRecipe, kSeed, kAttempt, kLeaseId, kNextTask, kCount
    };
    static const std::string* sql = NewSelect<kCount>(
        {"id", "sweep_id", "head_index", "rank", "recipe", "seed", "attempt", "lease_id",
         "next_task"},
        absl::StrCat("FROM cells INDEXED BY cells_leased WHERE worker_id = ?1 AND state = ",
                     kCellLeased, " AND next_of = ?2 ORDER BY next_task, id"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(1, worker_id).Bind(2, next_of);
    int64_t task_index = -1;
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      if (tasks.size() == first || q.ColumnInt(kNextTask) != task_index) {
        task_index = q.ColumnInt(kNextTask);
        Task task;
        task.sweep_id = q.ColumnText(kSweepId);
        task.head_index = static_cast<int>(q.ColumnInt(kHeadIndex));
        task.rank = static_cast<int>(q.ColumnInt(kRank));
        task.recipe = static_cast<int>(q.ColumnInt(kRecipe));
        task.deadline_unix_ms = deadline;
        tasks.push_back(std::move(task));
      }
      tasks.back().cells.push_back(LeasedCell{q.ColumnInt(kId), SeedFromDb(q.ColumnInt(kSeed)),
                                              q.ColumnInt(kLeaseId),
                                              static_cast<int>(q.ColumnInt(kAttempt))});
    }
  }
  if (tasks.size() == first) return absl::OkStatus();
  ASSIGN_OR_RETURN(Statement u,
                   c.Prepare("UPDATE cells SET lease_deadline_ms = ?2 WHERE id = ?1"));
  for (size_t i = first; i < tasks.size(); ++i) {
    Task& task = tasks[i];
    for (const LeasedCell& cell : task.cells) {
      u.Reset();
      u.Bind(1, cell.cell_id).Bind(2, deadline);
      RETURN_IF_ERROR(u.Run());
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, SpecOf(c, task.sweep_id));
    task.spec = LeasedTaskSpec(*spec, task);
    task.rung_steps = PruneRungSteps(*spec, task.spec.train);
  }
  events.Log("worker %s sent results again; %d tasks leased in reply to them the first time "
             "go to it again",
             worker_id, tasks.size() - first);
  return absl::OkStatus();
}

absl::StatusOr<HeartbeatOutcome> Coordinator::Heartbeat(
    const std::string& worker_id, const std::vector<int64_t>& lease_ids,
    const std::vector<LeaseProgress>& progress) {
  const std::set<int64_t> named(lease_ids.begin(), lease_ids.end());
  for (size_t i = 0; i < progress.size(); ++i) {
    const LeaseProgress& p = progress[i];
    if (!named.count(p.lease_id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "progress[", i, "].lease_id: lease ", p.lease_id, " is not among lease_ids"));
    }
    if (!(p.train_error >= 0 && p.train_error <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "progress[", i, "].train_error must be in [0, 1], got ", p.train_error));
    }
    if (p.step < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("progress[", i, "].step must be at least 1, got ", p.step));
    }
  }
  const int64_t now = clock_->NowMs();
  HeartbeatOutcome out;
  Events events;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    out = HeartbeatOutcome();
    events = Events();
    RETURN_IF_ERROR(TouchWorker(c, worker_id, now));
    // Recipe pruning first, so that a lease pruned by this very report is
    // answered as pruned.
    RETURN_IF_ERROR(RecordProgress(c, worker_id, progress, now, events));
    out.deadline_unix_ms = now + options_.lease_ms;
    std::vector<int64_t> live;
    for (int64_t lease_id : lease_ids) {
      ASSIGN_OR_RETURN(std::optional<LeaseRow> row, FindLease(c, lease_id));
      if (!row.has_value()) {
        out.lost_lease_ids.push_back(lease_id);
      } else if (row->state == kCellLeased && row->worker_id != worker_id) {
        // Another worker's lease reads as lost, as an unknown one does.
        out.lost_lease_ids.push_back(lease_id);
      } else if (row->state == kCellLeased) {
        live.push_back(row->cell_id);
      } else if (row->state == kCellCancelled && row->worker_id == worker_id) {
        out.cancelled_lease_ids.push_back(lease_id);
      } else if (row->state == kCellPruned && row->worker_id == worker_id) {
        out.pruned_lease_ids.push_back(lease_id);
      } else {
        out.lost_lease_ids.push_back(lease_id);
      }
    }
    ASSIGN_OR_RETURN(Statement u,
                     c.Prepare("UPDATE cells SET lease_deadline_ms = ?2 WHERE id = ?1"));
    for (int64_t cell_id : live) {
      u.Reset();
      u.Bind(1, cell_id).Bind(2, out.deadline_unix_ms);
      RETURN_IF_ERROR(u.Run());
    }
    return absl::OkStatus();
  }));
  Dispatch(events);
  return out;
}

absl::Status Coordinator::RecordProgress(Connection& c, const std::string& worker_id,
                                         const std::vector<LeaseProgress>& progress, int64_t now,
                                         Events& events) {
  std::set<std::tuple<std::string, int, int>> touched;  // (sweep, head, rank)
  for (const LeaseProgress& p : progress) {
    ASSIGN_OR_RETURN(std::optional<LeaseRow> lease, FindLease(c, p.lease_id));
    // Only a live lease of the caller's counts; others are answered below.
    if (!lease.has_value() || lease->state != kCellLeased || lease->worker_id != worker_id) {
      continue;
    }
    enum Col : int { kSweepId, kHeadIndex, kRank, kRecipe, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"sweep_id", "head_index", "rank", "recipe"}, "FROM cells WHERE id = ?1");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(1, lease->cell_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) continue;
    const std::string sweep_id = q.ColumnText(kSweepId);
    const int head = static_cast<int>(q.ColumnInt(kHeadIndex));
    const int rank = static_cast<int>(q.ColumnInt(kRank));
    const int recipe = static_cast<int>(q.ColumnInt(kRecipe));
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, SpecOf(c, sweep_id));
    const std::vector<int64_t> rungs =
        PruneRungSteps(*spec, MakeTaskSpec(*spec, head, rank, recipe, {}).train);
    if (rungs.empty()) continue;
    RETURN_IF_ERROR(RecordRungScore(c, lease->cell_id, rungs, p.step, p.train_error));
    touched.insert({sweep_id, head, rank});
  }
  for (const auto& [sweep_id, head, rank] : touched) {
    RETURN_IF_ERROR(PruneAndFinish(c, sweep_id, head, rank, now, events));
  }
  return absl::OkStatus();
}

absl::Status Coordinator::PruneAndFinish(Connection& c, const std::string& sweep_id, int head,
                                         int rank, int64_t now, Events& events) {
  ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, SpecOf(c, sweep_id));
  ASSIGN_OR_RETURN(std::vector<std::string> lines,
                   PruneGroup(c, sweep_id, *spec, head, rank, now));
  if (lines.empty()) return absl::OkStatus();
  for (const std::string& line : lines) {
    events.Log("sweep %s: %s", sweep_id, line);
    events.Add(sweep_id, absl::StrCat("pruned ", line));
  }
  return MaybeFinishSweep(c, sweep_id, events);
}

absl::StatusOr<CompleteOutcome> Coordinator::Complete(const std::string& worker_id,
                                                      const std::vector<CellResult>& results,
                                                      const std::optional<TaskWant>& next) {
  std::optional<TaskWant> want = next;
  if (want.has_value()) RETURN_IF_ERROR(CheckWant(*want, "next."));
  const int64_t now = clock_->NowMs();
  CompleteOutcome out;
  Events events;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    return CompleteIn(c, worker_id, results, want, now, events, out);
  }));
  Dispatch(events);
  return out;
}

void Coordinator::CompleteAsync(std::string worker_id, std::vector<CellResult> results,
                                std::optional<TaskWant> next, CompleteDone done) {
  if (next.has_value()) {
    if (absl::Status s = CheckWant(*next, "next."); !s.ok()) return done(s);
  }
  // What the transaction reads and fills in, kept until `done` has run.
  struct Call {
    std::string worker_id;
    std::vector<CellResult> results;
    std::optional<TaskWant> want;
    int64_t now;
    CompleteDone done;
    CompleteOutcome out;
    Events events;
  };
  auto call = std::make_shared<Call>(Call{std::move(worker_id), std::move(results), next,
                                          clock_->NowMs(), std::move(done), {}, {}});
  store_->WriteAsync(
      [this, call](Connection& c) -> absl::Status {
        return CompleteIn(c, call->worker_id, call->results, call->want, call->now,
                          call->events, call->out);
      },
      [this, call](absl::Status s) {
        if (!s.ok()) return call->done(s);
        Dispatch(call->events);
        call->done(std::move(call->out));
      });
}

absl::Status Coordinator::CompleteIn(Connection& c, const std::string& worker_id,
                                     const std::vector<CellResult>& results,
                                     const std::optional<TaskWant>& want, int64_t now,
                                     Events& events, CompleteOutcome& out) {
  out = CompleteOutcome();
  events = Events();
  ASSIGN_OR_RETURN(const VersionManifest version, KnownWorkerVersion(c, worker_id));
  RETURN_IF_ERROR(CheckNotQuarantined(c, worker_id));
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
    std::string sweep_id, holder;
    CellGroupKey group;
    int state = 0, attempt = 0;
    uint64_t seed = 0;
    int64_t lease_id = 0;
    {
      enum Col : int {
        kSweepId, kHeadIndex, kRank, kRecipe, kSeed, kState, kAttempt, kLeaseId, kWorkerId,
        kCount
      };
      static const std::string* sql = NewSelect<kCount>(
          {"sweep_id", "head_index", "rank", "recipe", "seed", "state", "attempt", "lease_id",
           "worker_id"},
          "FROM cells WHERE id = ?1");
      ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
      q.Bind(1, r.cell_id);
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) return absl::NotFoundError(absl::StrCat("no cell ", r.cell_id));
      sweep_id = q.ColumnText(kSweepId);
      group.head_index = static_cast<int>(q.ColumnInt(kHeadIndex));
      group.rank = static_cast<int>(q.ColumnInt(kRank));
      group.recipe = static_cast<int>(q.ColumnInt(kRecipe));
      seed = SeedFromDb(q.ColumnInt(kSeed));
      state = static_cast<int>(q.ColumnInt(kState));
      attempt = static_cast<int>(q.ColumnInt(kAttempt));
      lease_id = q.ColumnInt(kLeaseId);
      holder = q.ColumnText(kWorkerId);
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec_ptr, SpecOf(c, sweep_id));
    const SweepSpec& spec = *spec_ptr;
    // A result no trainer could produce fails the whole call, even one sent
    // again for a cell already recorded: nothing of the call is stored, and
    // the lease stays with the worker until it fails the task or the lease
    // expires.
    // The cell's recipe may set its own max_steps.
    // Then the cross-field checks against the task this coordinator handed
    // out (server/core/result_checks.h).
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
      ASSIGN_OR_RETURN(
          Statement ins,
          c.Prepare(InsertResultSql()));
      ins.Bind(1, r.cell_id).Bind(2, sweep_id).Bind(3, group.head_index).Bind(4, group.rank);
      ins.Bind(5, SeedToDb(seed)).Bind(6, lease_id).Bind(7, attempt).Bind(8, worker_id);
      ins.Bind(9, version.build_id).Bind(10, version.torch_version);
      ins.Bind(11, version.cuda_version).Bind(12, now);
      BindResultColumns(ins, kInsertResultFirst, r.result);
      ASSIGN_OR_RETURN(std::string key,
                       TaskKeyOf(c, sweep_id, group.head_index, group.rank, group.recipe));
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
      static const std::string* sql =
          new std::string(absl::StrCat("UPDATE cells SET state = ", kCellDone,
                                       ", lease_deadline_ms = 0, last_failure = '' WHERE id = ?1"));
      ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
      u.Bind(1, r.cell_id);
      RETURN_IF_ERROR(u.Run());
    }
    ++out.recorded;
    touched.insert(sweep_id);
    events.Add(sweep_id,
               absl::StrCat("cell ",
                            CellLabel(spec, group.head_index, group.rank, group.recipe, seed),
                            " done"));
  }
  {
    // The worker was seen now and completed what was recorded: one UPDATE
    // of its row for both, the per-call write that TouchWorker is elsewhere.
    ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE workers SET last_seen_ms = ?2, completed = "
                                            "completed + ?3 WHERE id = ?1"));
    u.Bind(1, worker_id).Bind(2, now).Bind(3, out.recorded);
    RETURN_IF_ERROR(u.Run());
  }
  // A recipe done may show a running one to be losing.
  for (const auto& [sweep_id, head, rank] : prune_groups) {
    RETURN_IF_ERROR(PruneAndFinish(c, sweep_id, head, rank, now, events));
  }
  for (const std::string& sweep_id : touched) {
    RETURN_IF_ERROR(MaybeFinishSweep(c, sweep_id, events));
  }
  if (!want.has_value()) return absl::OkStatus();
  if (next_of > 0 && out.recorded == 0) {
    // Every result was already recorded: the worker sends them again
    // because it lost the reply. What that reply leased goes to it again.
    RETURN_IF_ERROR(LeasedAsNext(c, worker_id, next_of, now, events, out.next_tasks));
    if (!out.next_tasks.empty()) return absl::OkStatus();
  }
  return LeaseTasks(c, worker_id, *want, now, events, out.next_tasks, next_of);
}

absl::Status Coordinator::Fail(const std::string& worker_id, const std::vector<int64_t>& lease_ids,
                               const std::string& reason, bool release) {
  RETURN_IF_ERROR(CheckTextLength("reason", reason, ResultLimits::kMaxReasonLength));
  const int64_t now = clock_->NowMs();
  const std::string why = reason.empty() ? std::string("worker gave no reason") : reason;
  Events events;
  int64_t failed = 0;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    events = Events();
    failed = 0;
    RETURN_IF_ERROR(TouchWorker(c, worker_id, now));
    std::vector<int64_t> cells;
    for (int64_t lease_id : lease_ids) {
      ASSIGN_OR_RETURN(std::optional<LeaseRow> row, FindLease(c, lease_id));
      // A lease no longer current, or another worker's, is ignored alike:
      // the reply tells nothing about leases the caller does not hold.
      if (!row.has_value() || row->state != kCellLeased || row->worker_id != worker_id) {
        continue;
      }
      cells.push_back(row->cell_id);
    }
    for (int64_t cell : cells) {
      RETURN_IF_ERROR(ReturnCell(c, cell, absl::StrCat(worker_id, ": ", why), !release, events));
      ++failed;
    }
    return absl::OkStatus();
  }));
  if (failed > 0) {
    LogEvent("worker %s %s %d leases: %s", worker_id, release ? "released" : "failed", failed,
             Clip(why));
  }
  Dispatch(events);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Coordinator::ExpireLeasesLocked(Connection& c, int64_t now_ms,
                                                        Events& events) {
  struct Expired {
    int64_t cell_id, lease_id;
    std::string worker_id;
  };
  std::vector<Expired> expired;
  {
    // Reads the whole (partial, leased-only) cells_leased index: it holds
    // only the cells out on workers. No ORDER BY: SQLite would rather scan
    // every cell in id order than sort what the index finds.
    enum Col : int { kId, kLeaseId, kWorkerId, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"id", "lease_id", "worker_id"},
        absl::StrCat("FROM cells INDEXED BY cells_leased WHERE state = ", kCellLeased,
                     " AND lease_deadline_ms <= ?1"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(1, now_ms);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      expired.push_back(
          Expired{q.ColumnInt(kId), q.ColumnInt(kLeaseId), q.ColumnText(kWorkerId)});
    }
    std::sort(expired.begin(), expired.end(),
              [](const Expired& a, const Expired& b) { return a.cell_id < b.cell_id; });
  }
  std::map<std::string, int64_t> per_worker;
  for (const Expired& e : expired) {
    RETURN_IF_ERROR(ReturnCell(c, e.cell_id,
                               absl::StrFormat("lease %d expired on worker %s", e.lease_id,
                                               e.worker_id),
                               /*use_attempt=*/true, events));
    ++per_worker[e.worker_id];
  }
  for (const auto& [worker, n] : per_worker) {
    events.Log("%d leases of worker %s expired", n, worker);
  }
  return static_cast<int64_t>(expired.size());
}

absl::StatusOr<int64_t> Coordinator::ExpireLeases() {
  const int64_t now = clock_->NowMs();
  // Called every second or so: look on the read connection first, so that
  // the common case (nothing expired) never takes the write lock.
  bool any = false;
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    static const std::string* sql = new std::string(
        absl::StrCat("SELECT 1 FROM cells INDEXED BY cells_leased WHERE state = ", kCellLeased,
                     " AND lease_deadline_ms <= ?1 LIMIT 1"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(1, now);
    ASSIGN_OR_RETURN(any, q.Step());
    return absl::OkStatus();
  }));
  if (!any) return 0;
  int64_t n = 0;
  Events events;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    events = Events();
    ASSIGN_OR_RETURN(n, ExpireLeasesLocked(c, now, events));
    return absl::OkStatus();
  }));
  Dispatch(events);
  return n;
}

absl::StatusOr<QuarantineOutcome> Coordinator::Quarantine(const std::string& worker_id,
                                                          int64_t since_ms,
                                                          const std::string& by,
                                                          bool hold_token) {
  const int64_t now = clock_->NowMs();
  QuarantineOutcome out;
  Events events;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    events = Events();
    std::vector<QuarantinedCell> cells;
    ASSIGN_OR_RETURN(out, QuarantineIn(c, worker_id, since_ms, by, now, hold_token, &cells));
    for (const QuarantinedCell& cell : cells) {
      events.Add(cell.sweep_id,
                 absl::StrCat("cell ", cell.cell_id,
                              cell.released ? " released by quarantine " : " invalidated by quarantine ",
                              out.quarantine_id, cell.reset ? ": pending again" : ""));
      events.work_available = events.work_available || cell.reset;
    }
    return absl::OkStatus();
  }));
  LogEvent("quarantine %d of worker %s by %s (since %d ms): %d results and %d copies invalid, "
           "%d cells pending again, %d leases released, %d sweeps running again; the worker "
           "%sis held until unquarantined",
           out.quarantine_id, Clip(worker_id), Clip(by), since_ms, out.results_invalidated,
           out.copies_invalidated, out.cells_reset, out.leases_released,
           out.sweeps_reopened.size(),
           out.token_held.empty() ? ""
                                  : absl::StrCat("(and every worker of token ",
                                                 Clip(out.token_held), ") "));
  Dispatch(events);
  return out;
}

absl::StatusOr<bool> Coordinator::Unquarantine(const std::string& worker_id,
                                               const std::string& by) {
  bool was = false;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(was, LiftQuarantine(c, worker_id));
    return absl::OkStatus();
  }));
  LogEvent("worker %s unquarantined by %s%s", Clip(worker_id), Clip(by),
           was ? "" : " (it was not quarantined)");
  return was;
}

}  // namespace ranksweep::server
