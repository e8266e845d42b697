// Which (sweep, head, rank, recipe) group a worker is leased next, and how many of
// its pending seeds: the coordinator's serving order, apart from the
// transaction that leases the cells (LeaseManager::LeaseTasksIn).
//
// Order: the highest priority first. Among equals, the owner whose running
// sweeps of that priority were served longest ago, so that people, not
// sweeps, take turns; then that owner's sweep served longest ago. Inside a
// sweep, groups in the order their cells were created. With a memory budget,
// a group none of whose seeds fits is skipped, and remembered so that later
// picks of the same call skip it at once (the budget only shrinks).
//
// Thread-safety: runs on the Connection of the one transaction that called
// it; `specs` is thread-safe.
#ifndef RANKSWEEP_SERVER_CORE_LEASES_LEASE_ORDER_H_
#define RANKSWEEP_SERVER_CORE_LEASES_LEASE_ORDER_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"
#include "server/core/sweeps/spec_cache.h"
#include "server/core/sqlite.h"

namespace ranksweep::server {

// A group to lease: its pending cells, up to `seeds` of them.
struct LeasePick {
  std::string sweep_id;
  int head_index = 0;
  int rank = 0;
  int recipe = 0;
  int64_t seeds = 0;  // >= 1
};

// (sweep, head, rank, recipe) groups that did not fit one call's budget.
using TooBigGroups = std::set<std::tuple<std::string, int, int, int>>;

// The next group in serving order that has a pending cell and fits: up to
// `max_seeds` seeds, and when `limited`, only as many as the estimate lets
// fit in `budget` bytes. nullopt when no group is pending or none fits.
// Adds the groups it skipped for their size to `too_big`.
absl::StatusOr<std::optional<LeasePick>> NextGroupToLease(Connection& c, SpecCache& specs,
                                                          int64_t max_seeds, bool limited,
                                                          int64_t budget, TooBigGroups& too_big);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_LEASES_LEASE_ORDER_H_
