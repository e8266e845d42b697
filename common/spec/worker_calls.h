// The values a worker and the coordinator trade (WorkerService: register,
// acquire, heartbeat, complete), above all the leased task: one type each
// for both sides. The coordinator's lease manager makes a task, the
// wire carries it (ranksweep.v1.Task, mapped in proto/convert.h, the one
// place), and the worker's agent trains and reports it.
//
// Thread-safety: plain values.
#ifndef RANKSWEEP_COMMON_SPEC_WORKER_CALLS_H_
#define RANKSWEEP_COMMON_SPEC_WORKER_CALLS_H_

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

// The build a worker runs, as it registers and as results record it.
struct VersionManifest {
  std::string build_id;
  std::string torch_version;
  std::string cuda_version;  // empty: CPU-only LibTorch
};

// What a worker says about itself when it registers.
struct WorkerRegistration {
  std::string worker_id;  // empty: assign a new id; else keep this identity
  std::string hostname;
  std::string device;       // "cpu" or "cuda"
  std::string device_name;  // e.g. "cuda:0 (NVIDIA H200)"
  int64_t memory_bytes = 0;
  int slots = 1;
  VersionManifest version;
  // The coordinator's: the name of the token that registers (its
  // Principal::name; "local" without tokens), from the call, not the wire.
  // A worker id stays bound to the token that first registered it.
  std::string owner;
};

// What to lease: AcquireTasks' limits, and a CompleteTasks call's `next`
// (the slots its results free; no `next` at all leases nothing).
struct TaskWant {
  int max_tasks = 1;         // 1..64 (0 = 1)
  int max_seeds = 0;         // cells per task, 1..1024 (0 = the coordinator's default, 64)
  int64_t memory_bytes = 0;  // >= 0; 0 = the worker's registered memory
};

// A running seed's training error at an evaluation, as a heartbeat reports
// it for recipe pruning (HeartbeatRequest.progress).
struct LeaseProgress {
  int64_t lease_id = 0;
  int64_t step = 0;
  double train_error = 0;
};

// What a heartbeat learns of the leases it names.
struct HeartbeatOutcome {
  std::vector<int64_t> cancelled_lease_ids;  // sweep cancelled: stop them
  std::vector<int64_t> lost_lease_ids;       // expired, reassigned or unknown
  std::vector<int64_t> pruned_lease_ids;     // recipe pruned: stop them
  int64_t deadline_unix_ms = 0;              // new deadline of the live leases
};

// One finished seed of a leased cell.
struct CellResult {
  int64_t cell_id = 0;
  int64_t lease_id = 0;
  SeedResult result;
};

// What a CompleteTasks call did.
struct CompleteOutcome {
  int recorded = 0;    // newly recorded
  int duplicates = 0;  // already recorded under the same lease
  std::vector<LeasedTask> next_tasks;  // leased for the call's `next`, if any; never waited for
};

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_WORKER_CALLS_H_
