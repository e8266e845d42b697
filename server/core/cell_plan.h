// Where a sweep's cells come from: the (head, rank, recipe) groups of its
// grid, the task key the result cache matches on, and the creation of one
// group's cells, each served from the result cache when it can be.
//
// Functions of a Connection run inside the caller's write transaction
// (Store::Write) and change nothing outside it. The rest are pure.
// Thread-safety: no shared state.
#ifndef RANKSWEEP_SERVER_CORE_CELL_PLAN_H_
#define RANKSWEEP_SERVER_CORE_CELL_PLAN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"
#include "server/core/store.h"
#include "server/core/types.h"

namespace ranksweep::server {

// One group of cells: a head, a rank (0 for a rank-less head) and a recipe
// (an index into the sweep's recipes, spec.h). A group's cells differ only
// in their seed and train as one task.
struct CellGroupKey {
  int head_index = 0;
  int rank = 0;
  int recipe = 0;
};

// Every group of the full grid, in the order their cells are created (and
// so leased): by head, then rank, then recipe. Search mode creates only
// some of the ranked heads' groups (AdvanceSearch).
std::vector<CellGroupKey> GridGroups(const SweepSpec& spec);

// The cache key of one group of a sweep: SHA-256 (hex) of its task spec
// with the seeds removed and the recipe's axis values applied, so every
// field that shapes training counts and two recipes never share a key. A
// sweep without axes keys its groups as it did before axes existed.
std::string TaskKey(const SweepSpec& spec, int head_index, int rank, int recipe);

// A finished cell's row as Complete and the failure path store it, without
// its result or failure.
ResultRow FinishedRow(const CellGroupKey& group, uint64_t seed, CellState state, int attempt,
                      int64_t lease_id, const std::string& worker_id,
                      const VersionManifest& version, int64_t finished_ms);

// The result the cache serves for (task key, seed) under `build_id`: the
// first trained (not copied) DONE row, in cell order, whose result passes
// ValidateSeedResult, unpacked into `row`. 0 when there is none.
absl::StatusOr<int64_t> FindCacheSource(Connection& c, const std::string& key, uint64_t seed,
                                        const std::string& build_id, int max_steps,
                                        ResultRow* row);

// Creates the cells of `group` for every seed of the sweep (a seed whose
// cell exists is skipped). Unless `build_id` is empty or the sweep says
// reuse_results = false, a cell whose (task key, seed) has a result trained
// under `build_id` is DONE at once with a copy of it, added to its result
// group. Returns {created, of those served from the cache}.
absl::StatusOr<std::pair<int64_t, int64_t>> CreateCells(Connection& c,
                                                        const std::string& sweep_id,
                                                        const SweepSpec& spec,
                                                        const CellGroupKey& group,
                                                        const std::string& build_id,
                                                        int64_t now_ms);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_CELL_PLAN_H_
