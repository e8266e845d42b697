#include "server/core/leases/lease_order.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec/spec.h"
#include "common/status_macros.h"
#include "server/core/sweeps/cell_plan.h"
#include "server/core/sql_columns.h"
#include "server/core/types.h"

namespace ranksweep::server {

absl::StatusOr<std::optional<LeasePick>> NextGroupToLease(Connection& c, SpecCache& specs,
                                                          int64_t max_seeds, bool limited,
                                                          int64_t budget, TooBigGroups& too_big) {
  std::vector<std::string> sweep_ids;
  {
    enum Col : int { kId, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"s.id"},
        absl::StrCat(
            "FROM sweeps s WHERE s.state = ", kSweepRunning, " AND EXISTS "
            "(SELECT 1 FROM cells c WHERE c.sweep_id = s.id AND c.state = ", kCellPending, ") "
            "ORDER BY s.priority DESC, (SELECT MAX(o.served) FROM sweeps o WHERE "
            "o.owner = s.owner AND o.state = ", kSweepRunning, " AND o.priority = s.priority) ASC, "
            "s.served ASC, s.rowid ASC"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      sweep_ids.push_back(q.ColumnText(kId));
      if (!limited) break;  // the first group of the first sweep always fits
    }
  }
  for (const std::string& sweep_id : sweep_ids) {
    std::vector<CellGroupKey> groups;
    {
      // Unlimited, only the first group is needed: the cheap query.
      enum Col : int { kHeadIndex, kRank, kRecipe, kCount };
      static const std::string* all_groups = NewSelect<kCount>(
          {"head_index", "rank", "recipe"},
          absl::StrCat("FROM cells WHERE sweep_id = :sweep_id AND state = ", kCellPending,
                       " GROUP BY head_index, rank, recipe ORDER BY MIN(id)"));
      static const std::string* first_group = NewSelect<kCount>(
          {"head_index", "rank", "recipe"},
          absl::StrCat("FROM cells WHERE sweep_id = :sweep_id AND state = ", kCellPending,
                       " ORDER BY id LIMIT 1"));
      ASSIGN_OR_RETURN(Statement q, c.Prepare(limited ? *all_groups : *first_group));
      q.Bind(":sweep_id", sweep_id);
      while (true) {
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) break;
        groups.push_back({static_cast<int>(q.ColumnInt(kHeadIndex)),
                          static_cast<int>(q.ColumnInt(kRank)),
                          static_cast<int>(q.ColumnInt(kRecipe))});
        if (!limited) break;
      }
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec_ptr, specs.Get(c, sweep_id));
    const SweepSpec& spec = *spec_ptr;
    for (const CellGroupKey& g : groups) {
      if (too_big.count({sweep_id, g.head_index, g.rank, g.recipe}) > 0) continue;
      int64_t fit = max_seeds;
      if (limited) {
        const MemoryEstimate estimate =
            EstimateTaskMemory(MakeTaskSpec(spec, g.head_index, g.rank, g.recipe, {}));
        fit = std::min<int64_t>(fit, estimate.SeedsThatFit(budget));
      }
      if (fit < 1) {
        too_big.insert({sweep_id, g.head_index, g.rank, g.recipe});
        continue;
      }
      return std::optional<LeasePick>(LeasePick{sweep_id, g.head_index, g.rank, g.recipe, fit});
    }
  }
  return std::optional<LeasePick>();
}

}  // namespace ranksweep::server
