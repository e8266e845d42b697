// SweepQueries' reads of sweeps and workers (result_queries.h): one sweep
// with its counts, times and recent failures, the list, an owner, the
// workers, and the counts by state for the metrics.
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/spec/result_validation.h"
#include "common/status_macros.h"
#include "server/core/results/result_blocks.h"
#include "server/core/results/result_queries.h"
#include "server/core/results/result_schema.h"
#include "server/core/sql_columns.h"

namespace ranksweep::server {
namespace {

constexpr int kMaxRecentFailures = 10;
constexpr int kDefaultListLimit = 100;

}  // namespace

absl::StatusOr<SweepInfo> SweepQueries::LoadSweep(Connection& c, const std::string& sweep_id) {
  SweepInfo info;
  {
    enum Col : int { kName, kOwner, kPriority, kState, kCreatedMs, kFinishedMs, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"name", "owner", "priority", "state", "created_ms", "finished_ms"},
        "FROM sweeps WHERE id = :id");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":id", sweep_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::NotFoundError(absl::StrCat("no sweep ", Clip(sweep_id)));
    info.sweep_id = sweep_id;
    info.name = q.ColumnText(kName);
    info.owner = q.ColumnText(kOwner);
    info.priority = static_cast<int>(q.ColumnInt(kPriority));
    info.state = static_cast<SweepState>(q.ColumnInt(kState));
    info.created_unix_ms = q.ColumnInt(kCreatedMs);
    info.finished_unix_ms = q.ColumnInt(kFinishedMs);
  }
  {
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, specs_->Get(c, sweep_id));
    info.spec = *spec;
  }
  {
    ASSIGN_OR_RETURN(Statement q, c.Prepare(StateCountSql()));
    q.Bind(":sweep_id", sweep_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      const int64_t n = q.ColumnInt(StateCountCol::kCells);
      info.counts.total += n;
      switch (static_cast<CellState>(q.ColumnInt(StateCountCol::kState))) {
        case CellState::kPending: info.counts.pending += n; break;
        case CellState::kLeased: info.counts.leased += n; break;
        case CellState::kDone: info.counts.done += n; break;
        case CellState::kFailed: info.counts.failed += n; break;
        case CellState::kCancelled: info.counts.cancelled += n; break;
        case CellState::kPruned: info.counts.pruned += n; break;
        case CellState::kInvalid: break;  // rows only, never a cell
      }
    }
  }
  {
    // From the running sums of the sweep's groups, one row per (head, rank)
    // however many results it has. Cached rows repeat another cell's
    // training time: left out of the mean.
    enum Col : int { kTrainedSeconds, kTrainedN, kCachedN, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"TOTAL(trained_seconds)", "TOTAL(trained_n)", "TOTAL(cached_n)"},
        "FROM result_groups WHERE sweep_id = :sweep_id");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":sweep_id", sweep_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      const double trained = q.ColumnDouble(kTrainedN);
      info.mean_cell_seconds = trained > 0 ? q.ColumnDouble(kTrainedSeconds) / trained : 0;
      info.cached_cells = q.ColumnInt(kCachedN);
    }
  }
  info.grid_cells = GridCellCount(info.spec);
  {
    enum Col : int { kHeadIndex, kRank, kRecipe, kSeed, kFailure, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"head_index", "rank", "recipe", "seed", "failure"},
        absl::StrCat("FROM results WHERE sweep_id = :sweep_id AND state = ", kCellFailed,
                     " ORDER BY finished_ms DESC, cell_id DESC LIMIT :limit"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":sweep_id", sweep_id).Bind(":limit", kMaxRecentFailures);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      info.recent_failures.push_back(absl::StrCat(
          CellLabel(info.spec, static_cast<int>(q.ColumnInt(kHeadIndex)),
                    static_cast<int>(q.ColumnInt(kRank)), static_cast<int>(q.ColumnInt(kRecipe)),
                    SeedFromDb(q.ColumnInt(kSeed))),
          ": ", q.ColumnText(kFailure)));
    }
  }
  return info;
}

absl::StatusOr<SweepInfo> SweepQueries::GetSweep(const std::string& sweep_id) {
  if (sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  SweepInfo info;
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(info, LoadSweep(c, sweep_id));
    return absl::OkStatus();
  }));
  return info;
}

absl::StatusOr<std::vector<SweepInfo>> SweepQueries::ListSweeps(
    std::optional<SweepState> state, int limit, const std::optional<std::string>& owner) {
  if (limit <= 0) limit = kDefaultListLimit;
  std::vector<SweepInfo> sweeps;
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    std::vector<std::string> ids;
    {
      ASSIGN_OR_RETURN(Statement q,
                       c.Prepare("SELECT id FROM sweeps WHERE (:state = 0 OR state = :state) "
                                 "AND (:owner IS NULL OR owner = :owner) "
                                 "ORDER BY created_ms DESC, rowid DESC LIMIT :limit"));
      q.Bind(":state", state.has_value() ? static_cast<int>(*state) : 0).Bind(":limit", limit);
      if (owner.has_value()) {
        q.Bind(":owner", *owner);
      } else {
        q.BindNull(":owner");
      }
      while (true) {
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) break;
        ids.push_back(q.ColumnText(0));
      }
    }
    for (const std::string& id : ids) {
      ASSIGN_OR_RETURN(SweepInfo info, LoadSweep(c, id));
      sweeps.push_back(std::move(info));
    }
    return absl::OkStatus();
  }));
  return sweeps;
}

absl::StatusOr<std::string> SweepQueries::SweepOwner(const std::string& sweep_id) {
  if (sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  std::string owner;
  // A primary-key lookup: it does not need to queue behind long queries.
  RETURN_IF_ERROR(store_->QuickRead([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT owner FROM sweeps WHERE id = :id"));
    q.Bind(":id", sweep_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::NotFoundError(absl::StrCat("no sweep ", Clip(sweep_id)));
    owner = q.ColumnText(0);
    return absl::OkStatus();
  }));
  return owner;
}

absl::StatusOr<int64_t> SweepQueries::ResultsVersion(const std::string& sweep_id) {
  if (sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  int64_t version = 0;
  RETURN_IF_ERROR(store_->QuickRead([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(version, ReadResultsVersion(c, sweep_id));
    return absl::OkStatus();
  }));
  return version;
}

namespace {

// The rows of `table` (cells or sweeps) by their state column.
template <typename State>
absl::StatusOr<std::map<State, int64_t>> CountByState(Store* store, const char* table) {
  std::map<State, int64_t> counts;
  RETURN_IF_ERROR(store->Read([&](Connection& c) -> absl::Status {
    counts.clear();
    enum Col : int { kState, kRows, kCount };
    static constexpr absl::string_view kColumns[] = {"state", "COUNT(*)"};
    const std::string sql = absl::StrCat("SELECT ", ColumnList<kCount>(kColumns), " FROM ", table,
                                         " GROUP BY state");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(sql));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) return absl::OkStatus();
      counts[static_cast<State>(q.ColumnInt(kState))] = q.ColumnInt(kRows);
    }
  }));
  return counts;
}

}  // namespace

absl::StatusOr<std::map<CellState, int64_t>> SweepQueries::CountCellsByState() {
  return CountByState<CellState>(store_, "cells");
}

absl::StatusOr<std::map<SweepState, int64_t>> SweepQueries::CountSweepsByState() {
  return CountByState<SweepState>(store_, "sweeps");
}

absl::StatusOr<std::vector<WorkerInfo>> SweepQueries::ListWorkers() {
  const int64_t now = clock_->NowMs();
  std::vector<WorkerInfo> workers;
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    enum Col : int {
      kId, kHostname, kDevice, kDeviceName, kMemoryBytes, kSlots, kBuildId, kTorchVersion,
      kCudaVersion, kRegisteredMs, kLastSeenMs, kCompleted, kLeased, kQuarantinedMs,
      kTokenHeldBy, kCount
    };
    static const std::string* leased = new std::string(absl::StrCat(
        "(SELECT COUNT(*) FROM cells c WHERE c.worker_id = w.id AND c.state = ", kCellLeased,
        ")"));
    static const std::string* sql = NewSelect<kCount>(
        {"w.id", "w.hostname", "w.device", "w.device_name", "w.memory_bytes", "w.slots",
         "w.build_id", "w.torch_version", "w.cuda_version", "w.registered_ms", "w.last_seen_ms",
         "w.completed", leased->c_str(), "w.quarantined_ms", "COALESCE(h.worker_id, '')"},
        "FROM workers w LEFT JOIN held_tokens h ON h.name = w.owner AND w.owner != '' "
        "ORDER BY w.id");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      WorkerInfo w;
      w.worker_id = q.ColumnText(kId);
      w.hostname = q.ColumnText(kHostname);
      w.device = q.ColumnText(kDevice);
      w.device_name = q.ColumnText(kDeviceName);
      w.memory_bytes = q.ColumnInt(kMemoryBytes);
      w.slots = static_cast<int>(q.ColumnInt(kSlots));
      w.version = {q.ColumnText(kBuildId), q.ColumnText(kTorchVersion),
                   q.ColumnText(kCudaVersion)};
      w.registered_unix_ms = q.ColumnInt(kRegisteredMs);
      w.last_seen_unix_ms = q.ColumnInt(kLastSeenMs);
      w.completed_cells = q.ColumnInt(kCompleted);
      w.leased_cells = static_cast<int>(q.ColumnInt(kLeased));
      w.alive = now - w.last_seen_unix_ms <= 3 * lease_ms_;
      w.quarantined_unix_ms = q.ColumnInt(kQuarantinedMs);
      w.token_held_by = q.ColumnText(kTokenHeldBy);
      workers.push_back(std::move(w));
    }
    return absl::OkStatus();
  }));
  return workers;
}

}  // namespace ranksweep::server
