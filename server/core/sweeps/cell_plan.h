// Where a sweep's cells come from: the (head, rank, recipe) groups of its
// grid, the task key the result cache matches on, and the creation of one
// group's cells, each served from the result cache when it can be.
//
// Functions of a Connection run inside the caller's write transaction
// (Store::Write) and change nothing outside it. The rest are pure.
// Thread-safety: no shared state.
#ifndef RANKSWEEP_SERVER_CORE_SWEEPS_CELL_PLAN_H_
#define RANKSWEEP_SERVER_CORE_SWEEPS_CELL_PLAN_H_

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

// Whose results the result cache may serve: what the coordinator can vouch
// for (docs/SECURITY.md, "The result cache"). A worker's build id is its own
// claim, so a build alone never makes a result trustworthy: the cache also
// keeps every user to results trained for that user's own sweeps unless the
// operator shares it, and serves nothing a quarantined worker trained.
struct CachePolicy {
  // Builds whose results are served (the build id a worker registered
  // with). Empty turns the cache off.
  std::vector<std::string> builds;
  // Serve results trained for any user's sweeps; false: only for sweeps of
  // the new sweep's owner.
  bool shared = false;
};

// The result the cache serves for (task key, seed) to a cell of `sweep_id`
// (a sweep already stored) under `policy`: the first trained (not copied)
// DONE row, in cell order, whose worker registered one of policy.builds, is
// not quarantined (nor its token), whose sweep has the same owner as
// `sweep_id` unless policy.shared, and whose result passes
// ValidateSeedResult; unpacked into `row`. 0 when there is none.
absl::StatusOr<int64_t> FindCacheSource(Connection& c, const std::string& key, uint64_t seed,
                                        const CachePolicy& policy, const std::string& sweep_id,
                                        int max_steps, ResultRow* row);

// Creates the cells of `group` for every seed of the sweep (a seed whose
// cell exists is skipped). Unless policy.builds is empty or the sweep says
// reuse_results = false, a cell whose (task key, seed) has a result the
// policy lets FindCacheSource serve is DONE at once with a copy of it
// (naming the source cell and, as its worker, the source's), added to its
// result group. Returns {created, of those served from the cache}.
absl::StatusOr<std::pair<int64_t, int64_t>> CreateCells(Connection& c,
                                                        const std::string& sweep_id,
                                                        const SweepSpec& spec,
                                                        const CellGroupKey& group,
                                                        const CachePolicy& policy,
                                                        int64_t now_ms);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_SWEEPS_CELL_PLAN_H_
