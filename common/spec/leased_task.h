// A leased task: the cells of one (sweep, head, rank, recipe) that one
// worker trains together. One type for its whole life: the coordinator's
// lease manager makes it, the wire carries it (ranksweep.v1.Task, mapped in
// proto/convert.h, the one place), and the worker's agent trains and
// reports it.
//
// Thread-safety: plain values.
#ifndef RANKSWEEP_COMMON_SPEC_LEASED_TASK_H_
#define RANKSWEEP_COMMON_SPEC_LEASED_TASK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec/spec.h"

namespace ranksweep {

// One cell of a task, leased to one worker.
struct LeasedCell {
  int64_t cell_id = 0;
  uint64_t seed = 0;
  int64_t lease_id = 0;  // fencing token, echoed in Heartbeat/Complete/Fail
  int attempt = 0;       // 1 for the first lease of the cell
};

struct LeasedTask {
  std::string sweep_id;
  int head_index = 0;
  int rank = 0;    // spec.rank (0 for a head without a rank)
  int recipe = 0;  // the coordinator's index into the sweep's recipes (spec.h);
                   // not on the wire, so 0 on a worker: spec has its values
  TaskSpec spec;   // spec.seeds lists the cells' seeds in `cells` order
  std::vector<LeasedCell> cells;
  int64_t deadline_unix_ms = 0;  // the leases expire then unless extended
  // Recipe pruning: the steps at which the worker reports each seed's
  // training error (PruneRungSteps, ReportProgress); empty when the sweep
  // does not prune.
  std::vector<int64_t> rung_steps;
};

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_LEASED_TASK_H_
