#include "server/core/sweeps/cell_plan.h"

#include <openssl/sha.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/spec/result_validation.h"
#include "common/spec/spec_json.h"
#include "common/status_macros.h"
#include "server/core/results/packed_row.h"
#include "server/core/results/result_schema.h"
#include "server/core/sql_columns.h"

namespace ranksweep::server {

std::vector<CellGroupKey> GridGroups(const SweepSpec& spec) {
  std::vector<CellGroupKey> groups;
  const int recipes = static_cast<int>(RecipeCount(spec));
  for (int h = 0; h < static_cast<int>(spec.heads.size()); ++h) {
    const std::vector<int> ranks = HeadHasRank(spec.heads[h]) ? spec.ranks : std::vector<int>{0};
    for (int rank : ranks) {
      for (int recipe = 0; recipe < recipes; ++recipe) groups.push_back({h, rank, recipe});
    }
  }
  return groups;
}

std::string TaskKey(const SweepSpec& spec, int head_index, int rank, int recipe) {
  const std::string json = TaskSpecToJson(MakeTaskSpec(spec, head_index, rank, recipe, {}));
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(json.data()), json.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

ResultRow FinishedRow(const CellGroupKey& group, uint64_t seed, CellState state, int attempt,
                      int64_t lease_id, const std::string& worker_id,
                      const VersionManifest& version, int64_t finished_ms) {
  ResultRow row;
  row.head_index = group.head_index;
  row.rank = group.rank;
  row.recipe = group.recipe;
  row.seed = seed;
  row.state = state;
  row.attempt = attempt;
  row.lease_id = lease_id;
  row.worker_id = worker_id;
  row.worker_version = version;
  row.finished_unix_ms = finished_ms;
  return row;
}

absl::StatusOr<int64_t> FindCacheSource(Connection& c, const std::string& key, uint64_t seed,
                                        const CachePolicy& policy, const std::string& sweep_id,
                                        int max_steps, ResultRow* row) {
  // "task_key != ''" and the other constant terms let SQLite use the
  // partial index results_by_task. A source's worker must be in good
  // standing (neither it nor its token held by a quarantine), and unless
  // the cache is shared its sweep must have the new sweep's owner.
  static const std::string* sql = NewSelect<PackedCol::kCount>(
      {"r.cell_id", "p.packed"},
      absl::StrCat(
          "FROM results r JOIN result_packs p ON p.cell_id = r.cell_id "
          "JOIN sweeps s ON s.id = r.sweep_id LEFT JOIN workers w ON w.id = r.worker_id "
          "WHERE r.task_key = :key AND r.seed = :seed AND r.worker_build_id = :build AND "
          "r.task_key != '' AND r.cached_from = 0 AND r.state = ", kCellDone,
          " AND COALESCE(w.quarantined_ms, 0) = 0 "
          "AND NOT EXISTS (SELECT 1 FROM held_tokens h WHERE h.name = w.owner) "
          "AND (:shared != 0 OR s.owner = (SELECT owner FROM sweeps WHERE id = :sweep_id)) "
          "ORDER BY r.cell_id"));
  int64_t best = 0;
  ResultRow found;
  for (const std::string& build : policy.builds) {
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":key", key).Bind(":seed", SeedToDb(seed)).Bind(":build", build);
    q.Bind(":shared", policy.shared ? 1 : 0).Bind(":sweep_id", sweep_id);
    while (true) {
      ASSIGN_OR_RETURN(bool more, q.Step());
      if (!more) break;
      const int64_t cell_id = q.ColumnInt(PackedCol::kCellId);
      if (best != 0 && cell_id >= best) break;  // rows come in cell order
      ResultRow candidate;
      RETURN_IF_ERROR(UnpackResultRow(q.ColumnBlob(PackedCol::kPacked), &candidate));
      if (candidate.result.has_value() &&
          ValidateSeedResult(*candidate.result, max_steps).ok()) {
        best = cell_id;
        found = std::move(candidate);
        break;
      }
    }
  }
  if (best != 0) *row = std::move(found);
  return best;
}

absl::StatusOr<std::pair<int64_t, int64_t>> CreateCells(Connection& c,
                                                        const std::string& sweep_id,
                                                        const SweepSpec& spec,
                                                        const CellGroupKey& group,
                                                        const CachePolicy& policy,
                                                        int64_t now_ms) {
  const bool use_cache = spec.reuse_results && !policy.builds.empty();
  const std::string key =
      use_cache ? TaskKey(spec, group.head_index, group.rank, group.recipe) : std::string();
  // The recipe's max_steps bounds a served result's steps.
  const int max_steps =
      MakeTaskSpec(spec, group.head_index, group.rank, group.recipe, {}).train.max_steps;
  int64_t created = 0, cached = 0;
  for (uint64_t seed : SweepSeeds(spec)) {
    int64_t cell_id = 0;
    {
      static const std::string* sql = new std::string(
          absl::StrCat("INSERT OR IGNORE INTO cells (sweep_id, head_index, rank, recipe, seed, "
                       "state) VALUES (:sweep_id, :head, :rank, :recipe, :seed, ", kCellPending, ")"));
      ASSIGN_OR_RETURN(Statement ins, c.Prepare(*sql));
      ins.Bind(":sweep_id", sweep_id).Bind(":head", group.head_index).Bind(":rank", group.rank);
      ins.Bind(":recipe", group.recipe).Bind(":seed", SeedToDb(seed));
      RETURN_IF_ERROR(ins.Run());
      if (c.Changes() == 0) continue;  // a repeated seed
      cell_id = c.LastInsertRowId();
      ++created;
    }
    if (!use_cache) continue;
    // The copy's packed row is the source's with this cell's fields. Only a
    // source that passes ValidateSeedResult is served: a row stored before
    // results were checked at CompleteTasks may hold anything.
    ResultRow copied;
    ASSIGN_OR_RETURN(const int64_t source,
                     FindCacheSource(c, key, seed, policy, sweep_id, max_steps, &copied));
    if (source == 0) continue;
    {
      copied.head_index = group.head_index;
      copied.rank = group.rank;
      copied.recipe = group.recipe;
      copied.finished_unix_ms = now_ms;
      copied.cached_from_cell_id = source;
    }
    {
      static const std::string* copy = new std::string(absl::StrCat(
          "INSERT INTO results (cell_id, sweep_id, head_index, rank, recipe, seed, state, "
          "lease_id, attempt, worker_id, worker_build_id, worker_torch_version, "
          "worker_cuda_version, finished_ms, task_key, cached_from, ",
          ResultColumns(),
          ") SELECT :cell_id, :sweep_id, :head, :rank, :recipe, seed, ", kCellDone,
          ", lease_id, attempt, worker_id, worker_build_id, "
          "worker_torch_version, worker_cuda_version, :finished_ms, task_key, cell_id, ",
          ResultColumns(), " FROM results WHERE cell_id = :source"));
      ASSIGN_OR_RETURN(Statement ins, c.Prepare(*copy));
      ins.Bind(":cell_id", cell_id).Bind(":sweep_id", sweep_id).Bind(":head", group.head_index);
      ins.Bind(":rank", group.rank).Bind(":recipe", group.recipe);
      ins.Bind(":finished_ms", now_ms).Bind(":source", source);
      RETURN_IF_ERROR(ins.Run());
    }
    RETURN_IF_ERROR(InsertPack(c, cell_id, sweep_id, copied));
    RETURN_IF_ERROR(AddToResultGroup(c, sweep_id, group.head_index, group.rank, group.recipe,
                                     *copied.result, true));
    {
      static const std::string* sql =
          new std::string(absl::StrCat("UPDATE cells SET state = ", kCellDone, " WHERE id = :id"));
      ASSIGN_OR_RETURN(Statement u, c.Prepare(*sql));
      u.Bind(":id", cell_id);
      RETURN_IF_ERROR(u.Run());
    }
    ++cached;
  }
  return std::make_pair(created, cached);
}

}  // namespace ranksweep::server
