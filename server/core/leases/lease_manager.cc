#include "server/core/leases/lease_manager.h"

#include <openssl/rand.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/result_validation.h"
#include "common/status_macros.h"
#include "server/core/leases/lease_order.h"
#include "server/core/log.h"
#include "server/core/results/result_schema.h"
#include "server/core/sql_columns.h"
#include "server/core/sweeps/cell_plan.h"
#include "server/core/sweeps/pruning.h"
#include "server/core/workers/worker_registry.h"

namespace ranksweep::server {

absl::StatusOr<std::optional<LeaseRow>> FindLease(Connection& c, int64_t lease_id) {
  // The last two terms are the partial index cells_by_lease's, which lets
  // SQLite use it. A done cell is not in it: its lease reads as unknown, and
  // every caller answers a done cell's lease as it answers an unknown one.
  enum Col : int { kId, kState, kWorkerId, kCount };
  static const std::string* sql = NewSelect<kCount>(
      {"id", "state", "worker_id"},
      absl::StrCat("FROM cells WHERE lease_id = :lease_id AND lease_id != 0 AND state != ",
                   kCellDone));
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":lease_id", lease_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<LeaseRow>();
  return std::optional<LeaseRow>(LeaseRow{q.ColumnInt(kId), static_cast<int>(q.ColumnInt(kState)),
                                          q.ColumnText(kWorkerId)});
}

absl::StatusOr<CellRow> ReadCell(Connection& c, int64_t cell_id) {
  enum Col : int {
    kSweepId, kHeadIndex, kRank, kRecipe, kSeed, kState, kAttempt, kLeaseId, kWorkerId, kCount
  };
  static const std::string* sql = NewSelect<kCount>(
      {"sweep_id", "head_index", "rank", "recipe", "seed", "state", "attempt", "lease_id",
       "worker_id"},
      "FROM cells WHERE id = :id");
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":id", cell_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("no cell ", cell_id));
  CellRow cell;
  cell.sweep_id = q.ColumnText(kSweepId);
  cell.group.head_index = static_cast<int>(q.ColumnInt(kHeadIndex));
  cell.group.rank = static_cast<int>(q.ColumnInt(kRank));
  cell.group.recipe = static_cast<int>(q.ColumnInt(kRecipe));
  cell.seed = SeedFromDb(q.ColumnInt(kSeed));
  cell.state = static_cast<int>(q.ColumnInt(kState));
  cell.attempt = static_cast<int>(q.ColumnInt(kAttempt));
  cell.lease_id = q.ColumnInt(kLeaseId);
  cell.worker_id = q.ColumnText(kWorkerId);
  return cell;
}

absl::Status NotYourLease(int64_t lease_id, int64_t cell_id) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "lease %d for cell %d is not held by this worker (expired, reassigned or never its own)",
      lease_id, cell_id));
}

namespace {

// A lease id nobody can guess: 63 random bits from OpenSSL's RAND_bytes,
// never 0 (which means "no lease" in cells.lease_id). Two leases share an
// id with probability 2^-63 per pair. The bits are drawn 256 ids at a time
// per thread (only the writer thread leases): one RAND_bytes call costs
// about as much as drawing 2 KiB, and a lease is made on every call of a
// worker.
absl::StatusOr<int64_t> NewLeaseId() {
  struct Drawn {
    uint64_t bits[256];
    size_t next = std::size(bits);  // all used
  };
  thread_local Drawn drawn;
  while (true) {
    if (drawn.next == std::size(drawn.bits)) {
      if (RAND_bytes(reinterpret_cast<unsigned char*>(drawn.bits), sizeof(drawn.bits)) != 1) {
        return absl::InternalError("the random source (OpenSSL RAND_bytes) failed");
      }
      drawn.next = 0;
    }
    const int64_t id = static_cast<int64_t>(drawn.bits[drawn.next++] >> 1);
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

// Sets every cell's deadline in `cell_ids` to `deadline`.
absl::Status ExtendLeases(Connection& c, const std::vector<int64_t>& cell_ids, int64_t deadline) {
  ASSIGN_OR_RETURN(Statement u, c.Prepare(
      "UPDATE cells SET lease_deadline_ms = :deadline WHERE id = :id"));
  for (int64_t cell_id : cell_ids) {
    u.Reset();
    u.Bind(":id", cell_id).Bind(":deadline", deadline);
    RETURN_IF_ERROR(u.Run());
  }
  return absl::OkStatus();
}

}  // namespace

LeaseManager::LeaseManager(Store* store, const Clock* clock, SpecCache* specs,
                           SweepLifecycle* sweeps, LeaseOptions options)
    : store_(store), clock_(clock), specs_(specs), sweeps_(sweeps), options_(options) {}

absl::Status LeaseManager::CheckWant(TaskWant& want, const char* field_prefix) const {
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

// ------------------------------------------------------------------ leasing

absl::Status LeaseManager::AcquireIn(Connection& c, const std::string& worker_id,
                                     const TaskWant& want, int64_t now, Events& events,
                                     std::vector<Task>& tasks) {
  tasks.clear();
  events = Events();
  RETURN_IF_ERROR(TouchWorker(c, worker_id, now));
  // Checked again inside the transaction: a quarantine ordered after the
  // service's session check still holds.
  RETURN_IF_ERROR(CheckNotQuarantined(c, worker_id));
  return LeaseTasksIn(c, worker_id, want, now, events, tasks);
}

absl::Status LeaseManager::LeaseTasksIn(Connection& c, const std::string& worker_id,
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
    // Serving order and memory fit: server/core/leases/lease_order.h.
    ASSIGN_OR_RETURN(std::optional<LeasePick> pick,
                     NextGroupToLease(c, *specs_, want.max_seeds, limited, budget, too_big));
    if (!pick.has_value()) break;
    Task task;
    task.sweep_id = pick->sweep_id;
    task.head_index = pick->head_index;
    task.rank = pick->rank;
    task.recipe = pick->recipe;
    const std::string& sweep_id = task.sweep_id;
    {
      enum Col : int { kId, kSeed, kAttempt, kCount };
      static const std::string* sql = NewSelect<kCount>(
          {"id", "seed", "attempt"},
          absl::StrCat("FROM cells WHERE sweep_id = :sweep_id AND state = ", kCellPending,
                       " AND head_index = :head AND rank = :rank AND recipe = :recipe "
                       "ORDER BY id LIMIT :seeds"));
      ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
      q.Bind(":sweep_id", sweep_id).Bind(":head", task.head_index).Bind(":rank", task.rank);
      q.Bind(":seeds", pick->seeds).Bind(":recipe", task.recipe);
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
      static const std::string* sql = new std::string(absl::StrCat(
          "UPDATE cells SET state = ", kCellLeased,
          ", attempt = attempt + 1, lease_id = :lease_id, lease_deadline_ms = :deadline, "
          "worker_id = :worker_id, next_of = :next_of, next_task = :next_task WHERE id = :id"));
      ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
      for (LeasedCell& cell : task.cells) {
        ASSIGN_OR_RETURN(cell.lease_id, NewLeaseId());
        u.Reset();
        u.Bind(":id", cell.cell_id).Bind(":lease_id", cell.lease_id);
        u.Bind(":deadline", deadline).Bind(":worker_id", worker_id);
        u.Bind(":next_of", next_of).Bind(":next_task", next_of != 0 ? leased : 0);
        RETURN_IF_ERROR(u.Run());
      }
    }
    {
      ASSIGN_OR_RETURN(Statement u,
                       c.Prepare("UPDATE sweeps SET served = :served WHERE id = :id"));
      u.Bind(":id", sweep_id).Bind(":served", ++serve_counter);
      RETURN_IF_ERROR(u.Run());
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, sweeps_->SpecOf(c, sweep_id));
    task.spec = LeasedTaskSpec(*spec, task);
    task.rung_steps = PruneRungSteps(*spec, task.spec.train);
    if (limited) budget -= EstimateTaskMemoryBytes(task.spec);
    task.deadline_unix_ms = deadline;
    events.Add(sweep_id, absl::StrFormat("%s: %d cells leased to %s",
                                         CellLabel(*spec, task.head_index, task.rank,
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

absl::Status LeaseManager::LeasedAsNextIn(Connection& c, const std::string& worker_id,
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
        absl::StrCat("FROM cells INDEXED BY cells_leased WHERE worker_id = :worker_id AND "
                     "state = ", kCellLeased, " AND next_of = :next_of ORDER BY next_task, id"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":worker_id", worker_id).Bind(":next_of", next_of);
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
  for (size_t i = first; i < tasks.size(); ++i) {
    Task& task = tasks[i];
    std::vector<int64_t> cell_ids;
    for (const LeasedCell& cell : task.cells) cell_ids.push_back(cell.cell_id);
    RETURN_IF_ERROR(ExtendLeases(c, cell_ids, deadline));
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, sweeps_->SpecOf(c, task.sweep_id));
    task.spec = LeasedTaskSpec(*spec, task);
    task.rung_steps = PruneRungSteps(*spec, task.spec.train);
  }
  events.Log("worker %s sent results again; %d tasks leased in reply to them the first time "
             "go to it again",
             worker_id, tasks.size() - first);
  return absl::OkStatus();
}

// ------------------------------------------------------------------ heartbeat

absl::StatusOr<HeartbeatOutcome> LeaseManager::Heartbeat(
    const std::string& worker_id, const std::vector<int64_t>& lease_ids,
    const std::vector<LeaseProgress>& progress, Events& events) {
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
    return ExtendLeases(c, live, out.deadline_unix_ms);
  }));
  return out;
}

absl::Status LeaseManager::RecordProgress(Connection& c, const std::string& worker_id,
                                          const std::vector<LeaseProgress>& progress,
                                          int64_t now, Events& events) {
  std::set<std::tuple<std::string, int, int>> touched;  // (sweep, head, rank)
  for (const LeaseProgress& p : progress) {
    ASSIGN_OR_RETURN(std::optional<LeaseRow> lease, FindLease(c, p.lease_id));
    // Only a live lease of the caller's counts; others are answered by
    // Heartbeat.
    if (!lease.has_value() || lease->state != kCellLeased || lease->worker_id != worker_id) {
      continue;
    }
    enum Col : int { kSweepId, kHeadIndex, kRank, kRecipe, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"sweep_id", "head_index", "rank", "recipe"}, "FROM cells WHERE id = :id");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":id", lease->cell_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) continue;
    const std::string sweep_id = q.ColumnText(kSweepId);
    const int head = static_cast<int>(q.ColumnInt(kHeadIndex));
    const int rank = static_cast<int>(q.ColumnInt(kRank));
    const int recipe = static_cast<int>(q.ColumnInt(kRecipe));
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, sweeps_->SpecOf(c, sweep_id));
    const std::vector<int64_t> rungs =
        PruneRungSteps(*spec, MakeTaskSpec(*spec, head, rank, recipe, {}).train);
    if (rungs.empty()) continue;
    RETURN_IF_ERROR(RecordRungScore(c, lease->cell_id, rungs, p.step, p.train_error));
    touched.insert({sweep_id, head, rank});
  }
  for (const auto& [sweep_id, head, rank] : touched) {
    RETURN_IF_ERROR(sweeps_->PruneAndFinishIn(c, sweep_id, head, rank, now, events));
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------ giving leases back

absl::Status LeaseManager::Fail(const std::string& worker_id,
                                const std::vector<int64_t>& lease_ids, const std::string& reason,
                                bool release, Events& events) {
  RETURN_IF_ERROR(CheckTextLength("reason", reason, ResultLimits::kMaxReasonLength));
  const int64_t now = clock_->NowMs();
  const std::string why = reason.empty() ? std::string("worker gave no reason") : reason;
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
      RETURN_IF_ERROR(
          ReturnCellIn(c, cell, absl::StrCat(worker_id, ": ", why), !release, events));
      ++failed;
    }
    return absl::OkStatus();
  }));
  if (failed > 0) {
    LogEvent("worker %s %s %d leases: %s", worker_id, release ? "released" : "failed", failed,
             Clip(why));
  }
  return absl::OkStatus();
}

absl::Status LeaseManager::ReturnCellIn(Connection& c, int64_t cell_id,
                                        const std::string& reason, bool use_attempt,
                                        Events& events) {
  ASSIGN_OR_RETURN(const CellRow cell, ReadCell(c, cell_id));
  const std::string& sweep_id = cell.sweep_id;
  const std::string& worker_id = cell.worker_id;
  const CellGroupKey& group = cell.group;
  const uint64_t seed = cell.seed;
  const int attempt = cell.attempt;
  const int64_t lease_id = cell.lease_id;
  ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, sweeps_->SpecOf(c, sweep_id));
  const std::string label = CellLabel(*spec, group.head_index, group.rank, group.recipe, seed);

  if (!use_attempt || attempt < options_.max_attempts) {
    static const std::string* sql = new std::string(absl::StrCat(
        "UPDATE cells SET state = ", kCellPending,
        ", attempt = :attempt, lease_id = 0, lease_deadline_ms = 0, worker_id = '', "
        "last_failure = :failure WHERE id = :id"));
    ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
    u.Bind(":id", cell_id).Bind(":attempt", use_attempt ? attempt : std::max(attempt - 1, 0));
    u.Bind(":failure", use_attempt ? reason : std::string());
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
    static const std::string* sql = new std::string(
        absl::StrCat("UPDATE cells SET state = ", kCellFailed,
                     ", lease_deadline_ms = 0, last_failure = :failure WHERE id = :id"));
    ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
    u.Bind(":id", cell_id).Bind(":failure", failure);
    RETURN_IF_ERROR(u.Run());
  }
  RETURN_IF_ERROR(RecordEndedResult(c, CellState::kFailed, cell_id, sweep_id, group.head_index,
                                    group.rank, group.recipe, seed, attempt, lease_id, worker_id,
                                    failure, clock_->NowMs()));
  events.Log("cell %d (%s) of sweep %s failed: %s", cell_id, label, sweep_id, Clip(failure));
  events.Add(sweep_id, absl::StrCat("cell ", label, " failed: ", failure));
  return sweeps_->MaybeFinishIn(c, sweep_id, events);
}

absl::StatusOr<int64_t> LeaseManager::ExpireIn(Connection& c, int64_t now_ms, Events& events) {
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
                     " AND lease_deadline_ms <= :now"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":now", now_ms);
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
    RETURN_IF_ERROR(ReturnCellIn(c, e.cell_id,
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

absl::StatusOr<int64_t> LeaseManager::Expire(Events& events) {
  const int64_t now = clock_->NowMs();
  bool any = false;
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    static const std::string* sql = new std::string(
        absl::StrCat("SELECT 1 FROM cells INDEXED BY cells_leased WHERE state = ", kCellLeased,
                     " AND lease_deadline_ms <= :now LIMIT 1"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":now", now);
    ASSIGN_OR_RETURN(any, q.Step());
    return absl::OkStatus();
  }));
  if (!any) return 0;
  int64_t n = 0;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    events = Events();
    ASSIGN_OR_RETURN(n, ExpireIn(c, now, events));
    return absl::OkStatus();
  }));
  return n;
}

}  // namespace ranksweep::server
