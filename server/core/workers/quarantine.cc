#include "server/core/workers/quarantine.h"

#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/spec/result_validation.h"
#include "common/status_macros.h"
#include "server/core/results/packed_row.h"
#include "server/core/sweeps/pruning.h"
#include "server/core/results/result_schema.h"
#include "server/core/sql_columns.h"
#include "server/core/workers/worker_registry.h"

namespace ranksweep::server {
namespace {

using GroupKey = std::tuple<std::string, int, int, int>;  // sweep, head_index, rank, recipe

// Sums one (sweep, head, rank, recipe) group up again from its DONE rows, as
// migrations 5 and 7 do for every group: the mean, then the squared
// deviations from it. No row is written when no DONE row is left.
// Rebuilds a group's row of result_groups from the DONE results left in it,
// through AddToResultGroup, the one update every stored result goes through.
absl::Status RebuildGroup(Connection& c, const GroupKey& key) {
  const auto& [sweep_id, head_index, rank, recipe] = key;
  {
    ASSIGN_OR_RETURN(Statement del, c.Prepare("DELETE FROM result_groups WHERE sweep_id = :sweep_id AND "
                                              "head_index = :head AND rank = :rank AND "
                                              "recipe = :recipe"));
    del.Bind(":sweep_id", sweep_id).Bind(":head", head_index).Bind(":rank", rank);
    del.Bind(":recipe", recipe);
    RETURN_IF_ERROR(del.Run());
  }
  static const std::string* sql = new std::string(absl::StrCat(
      "SELECT ", ResultColumns(), ", cached_from FROM results "
      "WHERE sweep_id = :sweep_id AND head_index = :head AND rank = :rank AND recipe = :recipe "
      "AND state = ",
      kCellDone,
      " ORDER BY cell_id"));
  std::vector<std::pair<SeedResult, bool>> rows;  // (result, served from the cache)
  {
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":sweep_id", sweep_id).Bind(":head", head_index).Bind(":rank", rank);
    q.Bind(":recipe", recipe);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      SeedResult r;
      ReadResultColumns(q, 0, &r);
      rows.emplace_back(std::move(r), q.ColumnInt(ResultCol::kCount) != 0);
    }
  }
  for (const auto& [r, cached] : rows) {
    RETURN_IF_ERROR(AddToResultGroup(c, sweep_id, head_index, rank, recipe, r, cached));
  }
  return absl::OkStatus();
}

std::string FormatMs(int64_t ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(ms), absl::UTCTimeZone());
}

}  // namespace

absl::StatusOr<QuarantineOutcome> QuarantineIn(Connection& c, const std::string& worker_id,
                                               int64_t since_ms, const std::string& by,
                                               int64_t now_ms, bool hold_token,
                                               std::vector<QuarantinedCell>* cells) {
  cells->clear();
  if (since_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("since_unix_ms must be 0 (every result) or more, got ", since_ms));
  }
  std::string token;
  {
    ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT owner FROM workers WHERE id = :id"));
    q.Bind(":id", worker_id);
    ASSIGN_OR_RETURN(bool known, q.Step());
    if (!known) return absl::NotFoundError(absl::StrCat("no worker ", Clip(worker_id)));
    token = q.ColumnText(0);
  }
  if (hold_token && token.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", Clip(worker_id),
        " is bound to no token yet (it has not registered since tokens were bound); "
        "quarantine it without the token, or revoke the token (ranksweepd token revoke)"));
  }
  QuarantineOutcome out;
  {
    ASSIGN_OR_RETURN(Statement ins,
                     c.Prepare("INSERT INTO quarantines (worker_id, since_ms, by, at_ms) "
                               "VALUES (:worker_id, :since_ms, :by, :at_ms)"));
    ins.Bind(":worker_id", worker_id).Bind(":since_ms", since_ms).Bind(":by", by);
    ins.Bind(":at_ms", now_ms);
    RETURN_IF_ERROR(ins.Run());
    out.quarantine_id = c.LastInsertRowId();
  }
  // The rows the worker trained (a copy names the worker of its source, so
  // cached_from = 0 keeps copies out), then every copy of one of them.
  std::set<int64_t> trained, copies;
  {
    static const std::string* sql = new std::string(
        absl::StrCat("SELECT cell_id FROM results WHERE worker_id = :worker_id AND "
                     "cached_from = 0 AND state = ", kCellDone, " AND finished_ms >= :since_ms"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":worker_id", worker_id).Bind(":since_ms", since_ms);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      trained.insert(q.ColumnInt(0));
    }
  }
  for (int64_t source : trained) {
    // "cached_from != 0" lets SQLite use the partial index results_by_source.
    ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT cell_id FROM results WHERE cached_from = :source "
                                            "AND cached_from != 0"));
    q.Bind(":source", source);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      copies.insert(q.ColumnInt(0));
    }
  }
  out.results_invalidated = static_cast<int64_t>(trained.size());
  out.copies_invalidated = static_cast<int64_t>(copies.size());

  std::set<GroupKey> groups;
  std::map<std::string, int> sweep_states;
  for (const std::set<int64_t>* ids : {&trained, &copies}) {
    for (int64_t cell_id : *ids) {
      std::string sweep_id;
      {
        enum Col : int { kSweepId, kHeadIndex, kRank, kRecipe, kWorkerId, kPacked, kCount };
        static const std::string* sql = NewSelect<kCount>(
            {"r.sweep_id", "r.head_index", "r.rank", "r.recipe", "r.worker_id", "p.packed"},
            "FROM results r JOIN result_packs p ON p.cell_id = r.cell_id WHERE r.cell_id = :cell_id");
        ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
        q.Bind(":cell_id", cell_id);
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) return absl::InternalError(absl::StrCat("result of cell ", cell_id, " vanished"));
        sweep_id = q.ColumnText(kSweepId);
        groups.insert({sweep_id, static_cast<int>(q.ColumnInt(kHeadIndex)),
                       static_cast<int>(q.ColumnInt(kRank)),
                       static_cast<int>(q.ColumnInt(kRecipe))});
        ASSIGN_OR_RETURN(Statement ins,
                         c.Prepare("INSERT INTO invalid_results (cell_id, sweep_id, worker_id, "
                                   "packed, invalid_ms, invalid_by, quarantine_id) "
                                   "VALUES (:cell_id, :sweep_id, :worker_id, :packed, :invalid_ms, "
                                   ":invalid_by, :quarantine_id)"));
        ins.Bind(":cell_id", cell_id).Bind(":sweep_id", sweep_id);
        ins.Bind(":worker_id", q.ColumnText(kWorkerId)).BindBlob(":packed", q.ColumnBlob(kPacked));
        ins.Bind(":invalid_ms", now_ms).Bind(":invalid_by", by);
        ins.Bind(":quarantine_id", out.quarantine_id);
        RETURN_IF_ERROR(ins.Run());
      }
      for (const char* table : {"results", "result_packs"}) {
        ASSIGN_OR_RETURN(Statement del,
                         c.Prepare(absl::StrCat("DELETE FROM ", table, " WHERE cell_id = :cell_id")));
        del.Bind(":cell_id", cell_id);
        RETURN_IF_ERROR(del.Run());
      }
      auto state = sweep_states.find(sweep_id);
      if (state == sweep_states.end()) {
        ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT state FROM sweeps WHERE id = :id"));
        q.Bind(":id", sweep_id);
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) return absl::InternalError(absl::StrCat("sweep of cell ", cell_id, " vanished"));
        state = sweep_states.emplace(sweep_id, static_cast<int>(q.ColumnInt(0))).first;
      }
      // A cancelled sweep hands out nothing more: its cell stays without a
      // result, as the cells it cancelled are.
      const bool reset = state->second != kSweepCancelled;
      // A fresh start: attempt 0, so the cell gets --max-attempts new leases.
      static const std::string* pending = new std::string(absl::StrCat(
          "UPDATE cells SET state = ", kCellPending, ", attempt = 0, lease_id = 0, "
          "lease_deadline_ms = 0, worker_id = '', last_failure = :reason WHERE id = :id"));
      static const std::string* cancelled = new std::string(
          absl::StrCat("UPDATE cells SET state = ", kCellCancelled, ", lease_deadline_ms = 0, "
                       "last_failure = :reason WHERE id = :id"));
      ASSIGN_OR_RETURN(Statement u, c.Prepare(reset ? *pending : *cancelled));
      u.Bind(":id", cell_id).Bind(":reason", absl::StrCat("result invalidated by quarantine ",
                                                          out.quarantine_id, " of worker ",
                                                          worker_id));
      RETURN_IF_ERROR(u.Run());
      RETURN_IF_ERROR(ForgetRungScores(c, cell_id));
      if (reset) ++out.cells_reset;
      cells->push_back(QuarantinedCell{sweep_id, cell_id, reset});
    }
  }
  // The hold: the worker is marked, and the cells it holds now go back to
  // pending with their attempt given back (it was leased to a worker no
  // longer trusted to finish it).
  {
    ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE workers SET quarantined_ms = :now "
                                            "WHERE id = :id"));
    u.Bind(":now", now_ms).Bind(":id", worker_id);
    RETURN_IF_ERROR(u.Run());
  }
  if (hold_token) {
    ASSIGN_OR_RETURN(Statement u, c.Prepare("INSERT OR REPLACE INTO held_tokens (name, "
                                            "worker_id, by, at_ms) VALUES (:name, :worker_id, :by, :at_ms)"));
    u.Bind(":name", token).Bind(":worker_id", worker_id).Bind(":by", by).Bind(":at_ms", now_ms);
    RETURN_IF_ERROR(u.Run());
    out.token_held = token;
  }
  {
    // The worker's leases, and with its token held those of every worker
    // the token registered.
    static const std::string* held = new std::string(absl::StrCat(
        "SELECT id, sweep_id FROM cells WHERE state = ", kCellLeased,
        " AND (worker_id = :id OR (:token != '' AND worker_id IN "
        "(SELECT id FROM workers WHERE owner = :token)))"));
    std::vector<std::pair<int64_t, std::string>> leased;
    {
      ASSIGN_OR_RETURN(Statement q, c.Prepare(*held));
      q.Bind(":id", worker_id).Bind(":token", hold_token ? token : std::string());
      while (true) {
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) break;
        leased.emplace_back(q.ColumnInt(0), q.ColumnText(1));
      }
    }
    static const std::string* release = new std::string(absl::StrCat(
        "UPDATE cells SET state = ", kCellPending, ", attempt = MAX(attempt - 1, 0), "
        "lease_id = 0, lease_deadline_ms = 0, worker_id = '', last_failure = :why "
        "WHERE id = :id"));
    ASSIGN_OR_RETURN(Statement u, c.Prepare(*release));
    for (const auto& [cell_id, sweep_id] : leased) {
      u.Reset();
      u.Bind(":id", cell_id).Bind(":why", absl::StrCat("lease released by quarantine ",
                                                      out.quarantine_id, " of worker ",
                                                      worker_id));
      RETURN_IF_ERROR(u.Run());
      RETURN_IF_ERROR(ForgetRungScores(c, cell_id));
      cells->push_back(QuarantinedCell{sweep_id, cell_id, true, true});
    }
    out.leases_released = static_cast<int64_t>(leased.size());
  }
  for (const GroupKey& key : groups) RETURN_IF_ERROR(RebuildGroup(c, key));
  for (const auto& [sweep_id, state] : sweep_states) {
    if (state != kSweepDone && state != kSweepFailed) {
      continue;
    }
    static const std::string* reopen = new std::string(
        absl::StrCat("UPDATE sweeps SET state = ", kSweepRunning, ", finished_ms = 0 WHERE id = :id"));
    ASSIGN_OR_RETURN(Statement u, c.Prepare(*reopen));
    u.Bind(":id", sweep_id);
    RETURN_IF_ERROR(u.Run());
    out.sweeps_reopened.push_back(sweep_id);
  }
  {
    ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE quarantines SET results = :results, copies = "
                                            ":copies, cells_reset = :cells_reset WHERE id = :id"));
    u.Bind(":id", out.quarantine_id).Bind(":results", out.results_invalidated);
    u.Bind(":copies", out.copies_invalidated).Bind(":cells_reset", out.cells_reset);
    RETURN_IF_ERROR(u.Run());
  }
  return out;
}

absl::StatusOr<bool> LiftQuarantine(Connection& c, const std::string& worker_id) {
  enum Col : int { kQuarantinedMs, kCount };
  static const std::string* sql =
      NewSelect<kCount>({"quarantined_ms"}, "FROM workers WHERE id = :id");
  bool was = false;
  {
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":id", worker_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::NotFoundError(absl::StrCat("no worker ", Clip(worker_id)));
    was = q.ColumnInt(kQuarantinedMs) != 0;
  }
  {
    ASSIGN_OR_RETURN(Statement u,
                     c.Prepare("UPDATE workers SET quarantined_ms = 0 WHERE id = :id"));
    u.Bind(":id", worker_id);
    RETURN_IF_ERROR(u.Run());
  }
  ASSIGN_OR_RETURN(Statement u, c.Prepare("DELETE FROM held_tokens WHERE worker_id = :id"));
  u.Bind(":id", worker_id);
  RETURN_IF_ERROR(u.Run());
  return was || c.Changes() > 0;
}

absl::Status ReadInvalidRows(Connection& c, const std::string& sweep_id,
                             const std::vector<std::string>& head_labels,
                             const std::function<bool(int, int, uint64_t)>& keep,
                             int64_t page_size, int64_t after_id, RowSink& sink,
                             int64_t* next_after) {
  *next_after = 0;
  enum Col : int {
    kId, kCellId, kPacked, kInvalidMs, kInvalidBy, kQuarantineId, kWorkerId, kCount
  };
  static const std::string* sql = NewSelect<kCount>(
      {"i.id", "i.cell_id", "i.packed", "i.invalid_ms", "i.invalid_by", "i.quarantine_id",
       "q.worker_id"},
      "FROM invalid_results i JOIN quarantines q ON q.id = i.quarantine_id "
      "WHERE i.sweep_id = :sweep_id AND i.id > :after ORDER BY i.id");
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":sweep_id", sweep_id).Bind(":after", after_id);
  int64_t sent = 0, last_sent = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool found, q.Step());
    if (!found) return absl::OkStatus();
    ResultRow row;
    RETURN_IF_ERROR(UnpackResultRow(q.ColumnBlob(kPacked), &row));
    if (!keep(row.head_index, row.rank, row.seed)) continue;
    if (page_size > 0 && sent == page_size) {
      *next_after = last_sent;
      return absl::OkStatus();
    }
    row.sweep_id = sweep_id;
    row.cell_id = q.ColumnInt(kCellId);
    row.state = CellState::kInvalid;
    if (row.head_index >= 0 && row.head_index < static_cast<int>(head_labels.size())) {
      row.head = head_labels[row.head_index];
    }
    row.failure = absl::StrCat("invalidated ", FormatMs(q.ColumnInt(kInvalidMs)), " by ",
                               q.ColumnText(kInvalidBy), ": quarantine ",
                               q.ColumnInt(kQuarantineId), " of worker ", q.ColumnText(kWorkerId));
    sink.Add(row);
    ++sent;
    last_sent = q.ColumnInt(kId);
  }
}

}  // namespace ranksweep::server
