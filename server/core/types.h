// Plain data types the coordinator core speaks: sweep and cell states, sweep
// summaries, workers, leased tasks, result rows and groups. They mirror the
// ranksweep.v1 messages field for field, so the gRPC adapters translate them
// one to one, but they carry no protobuf or gRPC dependency.
//
// Thread-safety: plain value types; no shared state.
#ifndef RANKSWEEP_SERVER_CORE_TYPES_H_
#define RANKSWEEP_SERVER_CORE_TYPES_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/spec/result_metrics.h"
#include "common/spec/spec.h"
#include "common/spec/worker_calls.h"

namespace ranksweep::server {

// The numeric values are stored in the database and equal the proto enums'.
enum class SweepState : int {
  kRunning = 1,    // cells pending or leased
  kDone = 2,       // every cell done
  kFailed = 3,     // every cell finished, at least one failed
  kCancelled = 4,
};

enum class CellState : int {
  kPending = 1,
  kLeased = 2,
  kDone = 3,
  kFailed = 4,
  kCancelled = 5,
  // Never a cell's state: a result row invalidated by a quarantine
  // (server/core/workers/quarantine.h), as queries report it.
  kInvalid = 6,
  // Stopped by recipe pruning (server/core/sweeps/pruning.h): its recipe was
  // clearly losing at a rung. Not a failure; never retried.
  kPruned = 7,
};

// The states' numbers as the `state` columns of sweeps, cells and results
// store them. SQL text is built from these (absl::StrCat, once per
// statement), never written with a state number by hand.
inline constexpr int kSweepRunning = static_cast<int>(SweepState::kRunning);
inline constexpr int kSweepDone = static_cast<int>(SweepState::kDone);
inline constexpr int kSweepFailed = static_cast<int>(SweepState::kFailed);
inline constexpr int kSweepCancelled = static_cast<int>(SweepState::kCancelled);
inline constexpr int kCellPending = static_cast<int>(CellState::kPending);
inline constexpr int kCellLeased = static_cast<int>(CellState::kLeased);
inline constexpr int kCellDone = static_cast<int>(CellState::kDone);
inline constexpr int kCellFailed = static_cast<int>(CellState::kFailed);
inline constexpr int kCellCancelled = static_cast<int>(CellState::kCancelled);
inline constexpr int kCellPruned = static_cast<int>(CellState::kPruned);

const char* Name(SweepState s);  // "running" "done" "failed" "cancelled"
const char* Name(CellState s);   // "pending" "leased" "done" "failed" "cancelled" "invalid" "pruned"

struct CellCounts {
  int64_t total = 0;
  int64_t pending = 0;
  int64_t leased = 0;
  int64_t done = 0;
  int64_t failed = 0;
  int64_t cancelled = 0;
  int64_t pruned = 0;  // stopped by recipe pruning
};

struct SweepInfo {
  std::string sweep_id;
  std::string name;
  std::string owner;
  SweepState state = SweepState::kRunning;
  CellCounts counts;
  int64_t created_unix_ms = 0;
  int64_t finished_unix_ms = 0;  // 0 while running
  int priority = 0;
  SweepSpec spec;
  double mean_cell_seconds = 0;              // over trained done cells; 0 before any
  std::vector<std::string> recent_failures;  // most recent first, at most 10
  int64_t grid_cells = 0;    // cells of the full grid (search mode creates fewer)
  int64_t cached_cells = 0;  // done cells served from the result cache
};

// What RegisterWorker hands back: the worker's id and the secret of this
// registration, which every later worker call must present
// (CheckWorkerSession in worker_registry.h). Only its SHA-256 is stored.
struct RegisteredWorker {
  std::string worker_id;
  std::string session;
};

struct WorkerInfo {
  std::string worker_id;
  std::string hostname;
  std::string device;
  std::string device_name;
  int64_t memory_bytes = 0;
  int slots = 1;
  VersionManifest version;
  int64_t registered_unix_ms = 0;
  int64_t last_seen_unix_ms = 0;
  int leased_cells = 0;
  int64_t completed_cells = 0;
  bool alive = false;  // seen within 3 lease periods
  int64_t quarantined_unix_ms = 0;  // 0: in good standing; else quarantined since
  // Set when the token that registered it is held by the quarantine of a
  // worker (this one or another): that worker's id. Held as if quarantined.
  std::string token_held_by;
};

// A leased task and the other values of the worker calls (LeasedCell,
// VersionManifest, WorkerRegistration, TaskWant, LeaseProgress,
// HeartbeatOutcome, CellResult, CompleteOutcome) are
// common/spec/worker_calls.h's, the worker's types too; this namespace
// sees them as they are.
using Task = ::ranksweep::LeasedTask;

struct SubmitOutcome {
  std::string sweep_id;
  int64_t cells = 0;         // cells created
  int64_t cached_cells = 0;  // of those, done at once from the result cache
};

enum class GroupBy { kNone, kHeadRank };

struct ResultQuery {
  std::string sweep_id;              // required
  std::string head;                  // HeadLabel filter; empty = all
  std::vector<int> ranks;            // empty = all
  std::vector<uint64_t> seeds;       // empty = all
  std::optional<CellState> state;    // unset = done and failed
  GroupBy group_by = GroupBy::kNone;
  // Grouped only: what counts as solving a (head, rank) group in the
  // summaries, as common/spec/criterion.h spells it; "" = "all".
  std::string criterion;
  // Rows only (grouped queries return every group): at most page_size rows
  // per reply, 0 = all; only cells with an id above after_cell_id (the
  // previous reply's next_after_cell_id).
  int64_t page_size = 0;
  int64_t after_cell_id = 0;
  // Rows only: each DONE row's result carries its learning curve
  // (SeedResult.curve; a cached row, its source cell's).
  bool curves = false;
};

// One cell. For finished cells the worker, version, attempt and lease are
// those of the lease that finished it; for pending or leased cells they are
// the current lease holder's (empty when pending).
struct ResultRow {
  std::string sweep_id;
  int64_t cell_id = 0;
  std::string head;  // HeadLabel
  int head_index = 0;
  int rank = 0;
  int32_t recipe = 0;  // index into the sweep's recipes (spec.h); 0 without axes
  uint64_t seed = 0;
  CellState state = CellState::kPending;
  std::optional<SeedResult> result;  // set when done
  std::string failure;               // set when failed
  std::string worker_id;
  VersionManifest worker_version;
  int attempt = 0;
  int64_t lease_id = 0;
  int64_t finished_unix_ms = 0;
  // Set when the result was served from the cache: the cell whose training
  // produced it (worker, version, attempt and lease are that training's).
  int64_t cached_from_cell_id = 0;
};

struct Aggregate {
  double mean = 0;
  double std = 0;   // sample standard deviation (n-1); 0 when n < 2
  double min = 0;
  double max = 0;
  double ci95 = 0;  // half-width of the 95% t interval; 0 when n < 2
};

// How a (head, rank) group, or a rank over its recipes, stands under a
// criterion (server/core/results/analysis.h has the rule).
enum class Verdict { kUndecided, kMeets, kNotMet };

// One optional metric (common/spec/result_metrics.h) of a group: `n` done
// cells have it, and its aggregate over them.
struct MetricAggregate {
  std::string name;
  int64_t n = 0;
  Aggregate aggregate;
};

// One (head, rank, recipe) of a sweep.
struct ResultGroup {
  std::string head;
  int head_index = 0;
  int rank = 0;
  int32_t recipe = 0;  // index into the sweep's recipes (spec.h); 0 without axes
  int64_t n = 0;         // done cells in the group
  int64_t expected = 0;  // cells in the group
  // Per built-in metric the groups aggregate (kGroupedBuiltIns,
  // common/spec/result_metrics.h), in that order: its aggregate over the
  // done cells (a test-split metric's over those with a test split; zeros
  // if none). `BuiltIn("train_error")` reads one by name.
  std::array<Aggregate, kGroupedBuiltInCount> built_ins{};
  const Aggregate& BuiltIn(std::string_view name) const {
    return built_ins[static_cast<size_t>(GroupedBuiltInIndex(name))];
  }
  Aggregate& BuiltIn(std::string_view name) {
    return built_ins[static_cast<size_t>(GroupedBuiltInIndex(name))];
  }
  int64_t exact_seeds = 0;  // done cells with train error == 0
  // Seeds of the group's cells that have no DONE result (pending, leased,
  // failed or cancelled), ascending.
  std::vector<uint64_t> missing_seeds;
  // Done cells with a test split and test error == 0.
  int64_t test_exact_seeds = 0;
  // Grouped queries: the group's verdict under the query's criterion, on
  // the train split and (with one) the test split (JudgeGroups).
  Verdict verdict = Verdict::kUndecided;
  Verdict test_verdict = Verdict::kUndecided;
  // Cells of the group stopped by recipe pruning (their seeds are among
  // missing_seeds); such a group is NOT MET (analysis.h).
  int64_t pruned = 0;
  // Per optional metric, in kResultMetrics order.
  std::vector<MetricAggregate> metrics;
};

// One rank of a head under the query's criterion, over its recipes: the
// recipes whose group meets it (ascending) and the verdict over recipes
// (meets when some recipe meets, not met when every recipe is not met).
struct RankOutcome {
  int rank = 0;  // 0 for a head without a rank
  Verdict verdict = Verdict::kUndecided;
  std::vector<int32_t> recipes_meeting;
  Verdict test_verdict = Verdict::kUndecided;  // only with a test split
  std::vector<int32_t> test_recipes_meeting;
};

// The transition rank of one head (server/core/results/analysis.h has the rule).
struct HeadSummary {
  std::string head;  // HeadLabel
  int head_index = 0;
  bool has_rank = false;  // false: softmax or a rank-less construction
  // Train split: smallest swept rank at which every seed is exact.
  bool transition_defined = false;
  int transition_rank = 0;   // 0 unless transition_defined
  std::string reason;        // why (or why not), one line
  // The same rule on the test split; only when the dataset has one.
  bool has_test_split = false;
  bool test_transition_defined = false;
  int test_transition_rank = 0;
  std::string test_reason;
  // Non-empty when the head's numbers cannot test the paper's rank bound.
  std::string caveat;
  // Every rank of the head (rank 0 alone for a head without one), ascending.
  std::vector<RankOutcome> ranks;
  // Empty when the dataset's single-head rank bounds apply to this head;
  // else why not: "multi-head", "signed", "softmax", "construction",
  // "loss ce" (NoBoundReason in server/core/results/analysis.h).
  std::string no_bound;
};

// Takes a row query's rows as they are read (Coordinator::Query).
class RowSink {
 public:
  virtual ~RowSink() = default;
  // Called once before the rows when an upper bound on their number is
  // known (page_size when set, else one from the cell id range; it may be
  // far above the rows that come when few cells of the range are finished),
  // capped at 100,000: room for that many may be reserved.
  virtual void Expect(int64_t at_most) { (void)at_most; }
  virtual void Add(const ResultRow& row) = 0;
  // Column blocks (server/core/results/result_blocks.h). A sink that takes
  // stored blocks returns their layout; then a query of every finished row
  // of a sweep (no filter or curves; one page or all) hands each stored
  // block of that layout to AddBlock in its place among the rows, instead of
  // its rows. A page then ends before a block that would not fit in it.
  // Empty (the default): rows only.
  virtual std::string_view BlockLayout() const { return {}; }
  // A block of `rows` rows; `bytes` last only for the call.
  virtual void AddBlock(std::string_view bytes, int64_t rows) {
    (void)bytes;
    (void)rows;
  }
};

// A least-squares line through (x, log2 transition rank): the transition
// grows like 2^(slope * x + intercept). Defined from two points with
// distinct x; the 95% interval of the slope (Student t, n - 2 degrees of
// freedom) from three.
struct LawFit {
  bool defined = false;
  int points = 0;             // the values fitted
  double slope = 0;           // log2 rank per unit of the axis
  double intercept = 0;
  bool has_interval = false;  // points >= 3
  double slope_ci95 = 0;      // half-width of the slope's 95% interval
  // Values whose transition is undefined, so not fitted, ascending.
  std::vector<double> left_out;
};

// One head at one value of a dataset axis: its summary over only the
// recipes with that value (best over the sweep's other axes), and the
// dataset's rank bounds there (0 when none applies or none is known).
struct AxisPoint {
  double value = 0;
  std::string label;  // the value as written ("4", "sequences")
  HeadSummary summary;
  int64_t rank_lower_bound = 0;
  int64_t rank_upper_bound = 0;
};

// How one head's transition rank depends on one dataset axis (m,
// pool_size, split, ...): a point per value of the axis, and for a
// numeric axis the fit of log2 transition against it, train and test.
struct AxisLaw {
  std::string axis;
  std::string head;  // HeadLabel
  int head_index = 0;
  bool has_rank = false;
  std::vector<AxisPoint> points;  // in the axis' order of values
  bool numeric = false;           // false for a named axis (split): no fit
  LawFit fit;
  LawFit test_fit;  // only with a test split
};

struct QueryOutcome {
  std::vector<ResultRow> rows;      // when group_by == kNone
  std::vector<ResultGroup> groups;  // when grouped
  // When grouped: one summary per head present in `groups`, by head index,
  // and the dataset's facts from any done cell (unset when none is done).
  std::vector<HeadSummary> heads;
  std::optional<DatasetFacts> facts;
  // When grouped: the criterion the summaries used, canonical ("all",
  // "mean:0.99", "seeds:3"), and a label for every recipe in `groups`.
  std::string criterion;
  std::map<int32_t, std::string> recipe_labels;
  // When grouped and the sweep has dataset axes: per dataset axis and head,
  // the transition at each value and its fit (transition_law.h).
  std::vector<AxisLaw> laws;
  // Rows: > 0 when more rows match than page_size allowed; query again with
  // it as after_cell_id for the next page. 0 on the last page.
  int64_t next_after_cell_id = 0;
  // Rows handed with blocks (RowSink::BlockLayout): the sweep's results
  // version in the read they came from (result_blocks.h), else 0.
  int64_t results_version = 0;
};

// What Coordinator::Quarantine did.
struct QuarantineOutcome {
  int64_t quarantine_id = 0;        // the row of `quarantines` that records it
  int64_t results_invalidated = 0;  // DONE rows the worker trained
  int64_t copies_invalidated = 0;   // rows the result cache served from those
  int64_t cells_reset = 0;          // cells returned to pending
  std::vector<std::string> sweeps_reopened;  // DONE or FAILED sweeps now RUNNING
  int64_t leases_released = 0;      // cells the worker held, back to pending
  // With the token held too: the token's name (its other workers are held
  // with it, and their leases count in leases_released); else empty.
  std::string token_held;
};

// Summary of Coordinator::Recover().
struct RecoveryReport {
  int64_t running_sweeps = 0;
  int64_t pending_cells = 0;
  int64_t leases_kept = 0;     // still within their deadline
  int64_t leases_expired = 0;  // past their deadline at start-up
  int64_t sweeps_finished = 0; // RUNNING sweeps found with nothing left to run
};

// A change to one sweep, delivered to listeners after it is committed.
struct SweepChange {
  std::string sweep_id;
  std::string message;  // e.g. "cell kernel/elu1 r=8 seed=2 done"
  bool final = false;   // the sweep has ended (done, failed or cancelled)
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_TYPES_H_
