// The groups of a grouped result query (SweepQueries::Query with group_by,
// result_queries.h): from the running aggregates of result_groups, or, for
// a seed filter, from the result rows themselves; and the rank bounds at
// each point of a dataset axis' law. Internal to server/core/results/.
#ifndef RANKSWEEP_SERVER_CORE_RESULTS_GROUP_READS_H_
#define RANKSWEEP_SERVER_CORE_RESULTS_GROUP_READS_H_

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "common/spec/spec.h"
#include "server/core/results/row_reads.h"
#include "server/core/results/transition_law.h"
#include "server/core/sqlite.h"
#include "server/core/types.h"

namespace ranksweep::server::result_reads {

// (head_index, rank, recipe): groups in this order, as the grid creates them.
using GroupMap = std::map<std::tuple<int, int, int>, ResultGroup>;

// Groups from the running aggregates (result_groups) and the seeds of the
// cells that are not done: one row per group plus one per open cell,
// however many results the sweep has.
absl::Status GroupsFromSummaries(Connection& c, const std::string& sweep_id,
                                 const std::vector<std::string>& labels, const CellFilter& filter,
                                 GroupMap* groups);

// Groups aggregated from the result rows themselves: for a seed filter,
// which the running aggregates cannot answer. Sets `facts` from the first
// done cell kept.
absl::Status GroupsFromRows(Connection& c, const std::string& sweep_id,
                            const std::vector<std::string>& labels, const CellFilter& filter,
                            GroupMap* groups, std::optional<DatasetFacts>* facts);

// The rank bounds of the dataset at each point of `law`: read from one done
// result of a recipe with the point's value (the facts are the dataset's,
// the same for every cell of a recipe). Left 0 when no such cell is done.
absl::Status FillLawBounds(Connection& c, const std::string& sweep_id, const SweepSpec& spec,
                           AxisLaw& law);

}  // namespace ranksweep::server::result_reads

#endif  // RANKSWEEP_SERVER_CORE_RESULTS_GROUP_READS_H_
