#include "server/core/results/result_queries.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/criterion.h"
#include "common/spec/result_validation.h"
#include "common/status_macros.h"
#include "server/core/results/analysis.h"
#include "server/core/results/packed_row.h"
#include "server/core/workers/quarantine.h"
#include "server/core/results/result_schema.h"
#include "server/core/sql_columns.h"
#include "server/core/results/statistics.h"
#include "server/core/results/transition_law.h"

namespace ranksweep::server {
namespace {

constexpr int kMaxRecentFailures = 10;
constexpr int kDefaultListLimit = 100;
const std::string kNoLabel;

// Columns of a query row (cells c LEFT JOIN results r): the cell as
// `cells` has it (for a finished cell, `results` has the same), its result
// row's fields when it has one (kHasResult), the result's fields from
// kResultFirst on (ResultCol), then the cache source.
struct QueryCol {
  enum : int {
    kCellId,
    kHeadIndex,
    kRank,
    kSeed,
    kState,
    kCellAttempt,
    kCellLeaseId,
    kCellWorkerId,
    kLeaseId,
    kAttempt,
    kWorkerId,
    kBuildId,
    kTorchVersion,
    kCudaVersion,
    kFailure,
    kFinishedMs,
    kHasResult,
    kRecipe,
    kResultFirst,
    kCachedFrom = kResultFirst + ResultCol::kCount,
  };
};
constexpr const char* kQueryColumnNames[] = {
    "c.id", "c.head_index", "c.rank", "c.seed", "c.state", "c.attempt", "c.lease_id",
    "c.worker_id", "r.lease_id", "r.attempt", "r.worker_id", "r.worker_build_id",
    "r.worker_torch_version", "r.worker_cuda_version", "r.failure", "r.finished_ms",
    "r.cell_id IS NOT NULL", "c.recipe"};

// The select list of a query row, in QueryCol order.
const std::string& QueryColumns() {
  static const std::string* columns =
      new std::string(absl::StrCat(ColumnList<QueryCol::kResultFirst>(kQueryColumnNames), ", ",
                                   ResultColumns(), ", r.cached_from"));
  return *columns;
}

const std::string& LabelOf(const std::vector<std::string>& labels, int head_index) {
  return head_index < static_cast<int>(labels.size()) ? labels[head_index] : kNoLabel;
}

ResultRow QueryRow(const Statement& q, const std::string& sweep_id,
                   const std::vector<std::string>& labels) {
  ResultRow row;
  row.sweep_id = sweep_id;
  using C = QueryCol;
  row.cell_id = q.ColumnInt(C::kCellId);
  row.head_index = static_cast<int>(q.ColumnInt(C::kHeadIndex));
  row.head = LabelOf(labels, row.head_index);
  row.rank = static_cast<int>(q.ColumnInt(C::kRank));
  row.recipe = static_cast<int32_t>(q.ColumnInt(C::kRecipe));
  row.seed = SeedFromDb(q.ColumnInt(C::kSeed));
  row.state = static_cast<CellState>(q.ColumnInt(C::kState));
  if (q.ColumnInt(C::kHasResult) != 0) {
    row.lease_id = q.ColumnInt(C::kLeaseId);
    row.attempt = static_cast<int>(q.ColumnInt(C::kAttempt));
    row.worker_id = q.ColumnText(C::kWorkerId);
    row.worker_version = {q.ColumnText(C::kBuildId), q.ColumnText(C::kTorchVersion),
                          q.ColumnText(C::kCudaVersion)};
    row.failure = q.ColumnText(C::kFailure);
    row.finished_unix_ms = q.ColumnInt(C::kFinishedMs);
    if (row.state == CellState::kDone) {
      SeedResult result;
      ReadResultColumns(q, C::kResultFirst, &result);
      result.seed = row.seed;
      row.result = std::move(result);
      row.cached_from_cell_id = q.ColumnInt(C::kCachedFrom);
    }
  } else {
    row.attempt = static_cast<int>(q.ColumnInt(C::kCellAttempt));
    row.lease_id = q.ColumnInt(C::kCellLeaseId);
    row.worker_id = q.ColumnText(C::kCellWorkerId);
  }
  return row;
}

// Which cells a query asks for, besides its sweep and state.
struct CellFilter {
  std::set<int> heads, ranks;
  std::set<uint64_t> seeds;
  bool Keeps(int head_index, int rank) const {
    return (heads.empty() || heads.count(head_index) > 0) &&
           (ranks.empty() || ranks.count(rank) > 0);
  }
  bool Keeps(int head_index, int rank, uint64_t seed) const {
    return Keeps(head_index, rank) && (seeds.empty() || seeds.count(seed) > 0);
  }
};

// (head_index, rank, recipe): groups in this order, as the grid creates them.
using GroupMap = std::map<std::tuple<int, int, int>, ResultGroup>;

ResultGroup& GroupFor(GroupMap& groups, int head_index, int rank, int recipe,
                      const std::vector<std::string>& labels) {
  ResultGroup& g = groups[{head_index, rank, recipe}];
  if (g.head.empty()) {
    g.head = LabelOf(labels, head_index);
    g.head_index = head_index;
    g.rank = rank;
    g.recipe = recipe;
  }
  return g;
}

// The first columns of the statements ForEachKeptGroupRow steps through:
// the group's key, then what each reads from kCount on.
struct GroupKeyCol {
  enum : int { kHeadIndex, kRank, kRecipe, kCount };
};

// Steps through `q`, whose first columns are GroupKeyCol's, and calls `fn`
// with the group of each row that `filter` keeps, `q` on that row.
absl::Status ForEachKeptGroupRow(Statement& q, const CellFilter& filter,
                                 const std::vector<std::string>& labels,
                                 GroupMap* groups, absl::FunctionRef<void(ResultGroup&)> fn) {
  while (true) {
    ASSIGN_OR_RETURN(bool more, q.Step());
    if (!more) return absl::OkStatus();
    const int head_index = static_cast<int>(q.ColumnInt(GroupKeyCol::kHeadIndex));
    const int rank = static_cast<int>(q.ColumnInt(GroupKeyCol::kRank));
    const int recipe = static_cast<int>(q.ColumnInt(GroupKeyCol::kRecipe));
    if (filter.Keeps(head_index, rank)) fn(GroupFor(*groups, head_index, rank, recipe, labels));
  }
}

// Groups from the running aggregates (result_groups) and the seeds of the
// cells that are not done: one row per group plus one per open cell,
// however many results the sweep has.
absl::Status GroupsFromSummaries(Connection& c, const std::string& sweep_id,
                                 const std::vector<std::string>& labels, const CellFilter& filter,
                                 GroupMap* groups) {
  {
    static const std::string* sql = new std::string(absl::StrCat(
        "SELECT head_index, rank, recipe, ", GroupColumns(),
        " FROM result_groups WHERE sweep_id = ?1"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(1, sweep_id);
    RETURN_IF_ERROR(ForEachKeptGroupRow(q, filter, labels, groups, [&](ResultGroup& g) {
      const GroupStats stats = ReadGroupStats(q, GroupKeyCol::kCount);
      g.n = stats.train_error.n;
      g.expected += stats.train_error.n;
      g.exact_seeds = stats.exact_seeds;
      g.test_exact_seeds = stats.test_exact_seeds;
      g.train_error = stats.train_error.Summary();
      g.test_error = stats.test_error.Summary();
      g.train_exact_accuracy = stats.exact.Summary();
      g.train_position_accuracy = stats.position.Summary();
    }));
  }
  // Every state but done, so that SQLite reads only those ranges of
  // cells_by_state.
  static const std::string* sql = new std::string(absl::StrCat(
      "SELECT head_index, rank, recipe, seed, state FROM cells WHERE sweep_id = ?1 AND state IN (",
      kCellPending, ", ", kCellLeased, ", ", kCellFailed, ", ", kCellCancelled, ", ", kCellPruned,
      ")"));
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(1, sweep_id);
  return ForEachKeptGroupRow(q, filter, labels, groups, [&](ResultGroup& g) {
    ++g.expected;
    g.missing_seeds.push_back(SeedFromDb(q.ColumnInt(GroupKeyCol::kCount)));
    if (q.ColumnInt(GroupKeyCol::kCount + 1) == kCellPruned) ++g.pruned;
  });
}

// RowSink::Expect's bound never exceeds this, so that a sink may reserve
// room for all of it.
constexpr int64_t kMostRowsExpected = 100'000;

// One page of a row query: the rows it keeps go to `sink` until page_size
// of them have gone; the next kept row sets out->next_after_cell_id.
class RowPage {
 public:
  RowPage(const ResultQuery& query, const CellFilter& filter, RowSink& sink, QueryOutcome* out)
      : page_size_(query.page_size), filter_(filter), sink_(sink), out_(out) {}

  bool Keeps(int head_index, int rank, uint64_t seed) const {
    return filter_.Keeps(head_index, rank, seed);
  }

  // Hands on a kept row; false, with the next page's start set, when the
  // page is already full.
  bool Add(const ResultRow& row) {
    if (page_size_ > 0 && added_ == page_size_) {
      out_->next_after_cell_id = last_cell_id_;
      return false;
    }
    sink_.Add(row);
    ++added_;
    last_cell_id_ = row.cell_id;
    return true;
  }

 private:
  const int64_t page_size_;
  const CellFilter& filter_;
  RowSink& sink_;
  QueryOutcome* out_;
  int64_t added_ = 0, last_cell_id_ = 0;
};

// The finished rows of a row query, handed in cell id order as (cell id,
// packed row): unpacks them and hands them on to `page`.
class FinishedRows {
 public:
  FinishedRows(const std::string& sweep_id, const std::vector<std::string>& labels,
               RowPage& page)
      : labels_(labels), page_(page) {
    row_.sweep_id = sweep_id;
  }

  // False when no more rows are wanted: the page is full, or `packed` is
  // not a packed row (status() says so).
  bool Take(int64_t cell_id, std::string_view packed) {
    row_.cell_id = cell_id;
    absl::Status unpacked = UnpackResultRow(packed, &row_);
    if (!unpacked.ok()) {
      status_ = absl::InternalError(absl::StrCat("result of cell ", cell_id, ": ",
                                                 unpacked.message()));
      return false;
    }
    if (!page_.Keeps(row_.head_index, row_.rank, row_.seed)) return true;
    row_.head = LabelOf(labels_, row_.head_index);
    return page_.Add(row_);
  }

  const absl::Status& status() const { return status_; }

 private:
  const std::vector<std::string>& labels_;
  RowPage& page_;
  ResultRow row_;
  absl::Status status_;
};

// Steps `q` (columns: cell id, packed row) into `rows` on this thread.
absl::Status ReadFinishedRows(Statement& q, FinishedRows& rows) {
  while (true) {
    ASSIGN_OR_RETURN(bool more, q.Step());
    if (!more || !rows.Take(q.ColumnInt(PackedCol::kCellId), q.ColumnBlob(PackedCol::kPacked))) {
      return rows.status();
    }
  }
}

// The same, with the unpacking and the sink on a second thread while this
// one steps SQLite: chunks of rows are copied out of SQLite and handed over
// through a short queue, so both cores work on one large query.
absl::Status ReadFinishedRowsOnTwoThreads(Statement& q, FinishedRows& rows) {
  struct Chunk {
    std::vector<int64_t> cell_ids;
    std::vector<size_t> ends;  // of each packed row in `bytes`
    std::string bytes;
  };
  constexpr size_t kChunkRows = 2048, kQueuedChunks = 4;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Chunk> queue;
  bool read_all = false, enough = false;  // guarded by mu
  std::thread unpacker([&] {
    while (true) {
      Chunk chunk;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return !queue.empty() || read_all; });
        if (queue.empty()) return;
        chunk = std::move(queue.front());
        queue.pop_front();
      }
      cv.notify_all();
      size_t begin = 0;
      for (size_t i = 0; i < chunk.cell_ids.size(); ++i) {
        const std::string_view packed(chunk.bytes.data() + begin, chunk.ends[i] - begin);
        begin = chunk.ends[i];
        if (!rows.Take(chunk.cell_ids[i], packed)) {
          {
            std::lock_guard<std::mutex> lock(mu);
            enough = true;
          }
          cv.notify_all();
          return;
        }
      }
    }
  });
  absl::Status read;
  Chunk chunk;
  auto hand_over = [&]() -> bool {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return queue.size() < kQueuedChunks || enough; });
    if (enough) return false;
    queue.push_back(std::move(chunk));
    chunk = Chunk();
    lock.unlock();
    cv.notify_all();
    return true;
  };
  while (true) {
    absl::StatusOr<bool> more = q.Step();
    if (!more.ok()) {
      read = more.status();
      break;
    }
    if (!*more) {
      if (!chunk.cell_ids.empty()) hand_over();
      break;
    }
    const std::string_view packed = q.ColumnBlob(PackedCol::kPacked);
    chunk.cell_ids.push_back(q.ColumnInt(PackedCol::kCellId));
    chunk.bytes.append(packed.data(), packed.size());
    chunk.ends.push_back(chunk.bytes.size());
    if (chunk.cell_ids.size() == kChunkRows && !hand_over()) break;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    read_all = true;
  }
  cv.notify_all();
  unpacker.join();
  RETURN_IF_ERROR(read);
  return rows.status();
}

// Groups aggregated from the result rows themselves: for a seed filter,
// which the running aggregates cannot answer. Sets `facts` from the first
// done cell kept.
// The rank bounds of the dataset at each point of `law`: read from one done
// result of a recipe with the point's value (the facts are the dataset's,
// the same for every cell of a recipe). Left 0 when no such cell is done.
absl::Status FillLawBounds(Connection& c, const std::string& sweep_id, const SweepSpec& spec,
                           AxisLaw& law) {
  static const std::string* sql = new std::string(
      absl::StrCat("SELECT ", ResultColumns(), " FROM results WHERE sweep_id = ?1 AND recipe = ?2 "
                   "AND state = ", kCellDone, " LIMIT 1"));
  const int64_t recipes = RecipeCount(spec);
  for (AxisPoint& point : law.points) {
    for (int32_t recipe = 0; recipe < recipes; ++recipe) {
      double v = 0;
      if (!RecipeAxisValue(spec, recipe, law.axis, &v) || v != point.value) continue;
      ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
      q.Bind(1, sweep_id);
      q.Bind(2, static_cast<int64_t>(recipe));
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) continue;
      SeedResult result;
      ReadResultColumns(q, 0, &result);
      point.rank_lower_bound = result.facts.rank_lower_bound;
      point.rank_upper_bound = result.facts.rank_upper_bound;
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status GroupsFromRows(Connection& c, const std::string& sweep_id,
                            const std::vector<std::string>& labels, const CellFilter& filter,
                            GroupMap* groups, std::optional<DatasetFacts>* facts) {
  static const std::string* sql = new std::string(
      absl::StrCat("SELECT ", QueryColumns(),
                   " FROM cells c LEFT JOIN results r ON r.cell_id = c.id WHERE c.sweep_id = ?1"));
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(1, sweep_id);
  struct Values {
    std::vector<double> train_error, test_error, exact, position;
  };
  std::map<std::tuple<int, int, int>, Values> values;
  while (true) {
    ASSIGN_OR_RETURN(bool more, q.Step());
    if (!more) break;
    const int head_index = static_cast<int>(q.ColumnInt(QueryCol::kHeadIndex));
    const int rank = static_cast<int>(q.ColumnInt(QueryCol::kRank));
    const int recipe = static_cast<int>(q.ColumnInt(QueryCol::kRecipe));
    const uint64_t seed = SeedFromDb(q.ColumnInt(QueryCol::kSeed));
    if (!filter.Keeps(head_index, rank, seed)) continue;
    ResultGroup& g = GroupFor(*groups, head_index, rank, recipe, labels);
    ++g.expected;
    if (q.ColumnInt(QueryCol::kState) != kCellDone || q.ColumnInt(QueryCol::kHasResult) == 0) {
      g.missing_seeds.push_back(seed);
      if (q.ColumnInt(QueryCol::kState) == kCellPruned) ++g.pruned;
      continue;
    }
    ++g.n;
    Values& v = values[{head_index, rank, recipe}];
    // Only the columns the aggregates need.
    const int f = QueryCol::kResultFirst;
    const double train_error = q.ColumnDouble(f + ResultCol::kTrainError);
    v.train_error.push_back(train_error);
    v.exact.push_back(q.ColumnDouble(f + ResultCol::kTrainExactAccuracy));
    v.position.push_back(q.ColumnDouble(f + ResultCol::kTrainPositionAccuracy));
    if (q.ColumnInt(f + ResultCol::kTestSequences) > 0) {
      const double test_error = q.ColumnDouble(f + ResultCol::kTestError);
      v.test_error.push_back(test_error);
      if (test_error == 0) ++g.test_exact_seeds;
    }
    if (train_error == 0) ++g.exact_seeds;
    if (!facts->has_value()) {
      SeedResult result;
      ReadResultColumns(q, f, &result);
      *facts = result.facts;
    }
  }
  for (auto& [key, v] : values) {
    ResultGroup& g = (*groups)[key];
    g.train_error = Summarize(v.train_error);
    g.test_error = Summarize(v.test_error);
    g.train_exact_accuracy = Summarize(v.exact);
    g.train_position_accuracy = Summarize(v.position);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SweepInfo> SweepQueries::LoadSweep(Connection& c, const std::string& sweep_id) {
  SweepInfo info;
  {
    enum Col : int { kName, kOwner, kPriority, kState, kCreatedMs, kFinishedMs, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"name", "owner", "priority", "state", "created_ms", "finished_ms"},
        "FROM sweeps WHERE id = ?1");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(1, sweep_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::NotFoundError(absl::StrCat("no sweep ", Clip(sweep_id)));
    info.sweep_id = sweep_id;
    info.name = q.ColumnText(kName);
    info.owner = q.ColumnText(kOwner);
    info.priority = static_cast<int>(q.ColumnInt(kPriority));
    info.state = static_cast<SweepState>(q.ColumnInt(kState));
    info.created_unix_ms = q.ColumnInt(kCreatedMs);
    info.finished_unix_ms = q.ColumnInt(kFinishedMs);
  }
  {
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec, specs_->Get(c, sweep_id));
    info.spec = *spec;
  }
  {
    ASSIGN_OR_RETURN(Statement q, c.Prepare(StateCountSql()));
    q.Bind(":sweep_id", sweep_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      const int64_t n = q.ColumnInt(StateCountCol::kCells);
      info.counts.total += n;
      switch (static_cast<CellState>(q.ColumnInt(StateCountCol::kState))) {
        case CellState::kPending: info.counts.pending += n; break;
        case CellState::kLeased: info.counts.leased += n; break;
        case CellState::kDone: info.counts.done += n; break;
        case CellState::kFailed: info.counts.failed += n; break;
        case CellState::kCancelled: info.counts.cancelled += n; break;
        case CellState::kPruned: info.counts.pruned += n; break;
        case CellState::kInvalid: break;  // rows only, never a cell
      }
    }
  }
  {
    // From the running sums of the sweep's groups, one row per (head, rank)
    // however many results it has. Cached rows repeat another cell's
    // training time: left out of the mean.
    enum Col : int { kTrainedSeconds, kTrainedN, kCachedN, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"TOTAL(trained_seconds)", "TOTAL(trained_n)", "TOTAL(cached_n)"},
        "FROM result_groups WHERE sweep_id = ?1");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(1, sweep_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      const double trained = q.ColumnDouble(kTrainedN);
      info.mean_cell_seconds = trained > 0 ? q.ColumnDouble(kTrainedSeconds) / trained : 0;
      info.cached_cells = q.ColumnInt(kCachedN);
    }
  }
  info.grid_cells = GridCellCount(info.spec);
  {
    enum Col : int { kHeadIndex, kRank, kRecipe, kSeed, kFailure, kCount };
    static const std::string* sql = NewSelect<kCount>(
        {"head_index", "rank", "recipe", "seed", "failure"},
        absl::StrCat("FROM results WHERE sweep_id = ?1 AND state = ", kCellFailed,
                     " ORDER BY finished_ms DESC, cell_id DESC LIMIT ?2"));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(1, sweep_id).Bind(2, kMaxRecentFailures);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      info.recent_failures.push_back(absl::StrCat(
          CellLabel(info.spec, static_cast<int>(q.ColumnInt(kHeadIndex)),
                    static_cast<int>(q.ColumnInt(kRank)), static_cast<int>(q.ColumnInt(kRecipe)),
                    SeedFromDb(q.ColumnInt(kSeed))),
          ": ", q.ColumnText(kFailure)));
    }
  }
  return info;
}

absl::StatusOr<SweepInfo> SweepQueries::GetSweep(const std::string& sweep_id) {
  if (sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  SweepInfo info;
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(info, LoadSweep(c, sweep_id));
    return absl::OkStatus();
  }));
  return info;
}

absl::StatusOr<std::vector<SweepInfo>> SweepQueries::ListSweeps(
    std::optional<SweepState> state, int limit, const std::optional<std::string>& owner) {
  if (limit <= 0) limit = kDefaultListLimit;
  std::vector<SweepInfo> sweeps;
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    std::vector<std::string> ids;
    {
      ASSIGN_OR_RETURN(Statement q,
                       c.Prepare("SELECT id FROM sweeps WHERE (?1 = 0 OR state = ?1) "
                                 "AND (?3 IS NULL OR owner = ?3) "
                                 "ORDER BY created_ms DESC, rowid DESC LIMIT ?2"));
      q.Bind(1, state.has_value() ? static_cast<int>(*state) : 0).Bind(2, limit);
      if (owner.has_value()) {
        q.Bind(3, *owner);
      } else {
        q.BindNull(3);
      }
      while (true) {
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) break;
        ids.push_back(q.ColumnText(0));
      }
    }
    for (const std::string& id : ids) {
      ASSIGN_OR_RETURN(SweepInfo info, LoadSweep(c, id));
      sweeps.push_back(std::move(info));
    }
    return absl::OkStatus();
  }));
  return sweeps;
}

absl::StatusOr<std::string> SweepQueries::SweepOwner(const std::string& sweep_id) {
  if (sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  std::string owner;
  // A primary-key lookup: it does not need to queue behind long queries.
  RETURN_IF_ERROR(store_->QuickRead([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT owner FROM sweeps WHERE id = ?1"));
    q.Bind(1, sweep_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::NotFoundError(absl::StrCat("no sweep ", Clip(sweep_id)));
    owner = q.ColumnText(0);
    return absl::OkStatus();
  }));
  return owner;
}


namespace {

// Passes rows on to `next`, each DONE row with its learning curve.
class WithCurves final : public RowSink {
 public:
  explicit WithCurves(RowSink& next) : next_(next) {}
  // The read's connection, set before the first row.
  void Use(Connection& c) { c_ = &c; }
  // The first curve that could not be read; OK when none.
  const absl::Status& status() const { return status_; }
  void Expect(int64_t at_most) override { next_.Expect(at_most); }
  void Add(const ResultRow& row) override {
    if (!row.result.has_value() || !status_.ok()) {
      next_.Add(row);
      return;
    }
    absl::StatusOr<Curve> curve =
        ReadCurve(*c_, row.cached_from_cell_id > 0 ? row.cached_from_cell_id : row.cell_id);
    if (!curve.ok()) {
      status_ = curve.status();
      next_.Add(row);
      return;
    }
    ResultRow with = row;
    with.result->curve = *std::move(curve);
    next_.Add(with);
  }

 private:
  Connection* c_ = nullptr;
  RowSink& next_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<QueryOutcome> SweepQueries::Query(const ResultQuery& query) {
  struct Collect final : RowSink {
    std::vector<ResultRow> rows;
    void Expect(int64_t at_most) override {
      rows.reserve(static_cast<size_t>(at_most));
    }
    void Add(const ResultRow& row) override { rows.push_back(row); }
  } collect;
  absl::StatusOr<QueryOutcome> out = Query(query, collect);
  if (out.ok()) out->rows = std::move(collect.rows);
  return out;
}

absl::StatusOr<QueryOutcome> SweepQueries::Query(const ResultQuery& query,
                                                 RowSink& outer_sink) {
  if (query.sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  const bool grouped = query.group_by == GroupBy::kHeadRank;
  if (query.page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size: ", query.page_size, " is negative; use 0 (every row) or more"));
  }
  if (query.after_cell_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token: cell id ", query.after_cell_id, " is negative"));
  }
  if (grouped && query.after_cell_id != 0) {
    return absl::InvalidArgumentError(
        "page_token: grouped queries return every group in one reply; only rows are paged");
  }
  if (grouped && query.curves) {
    return absl::InvalidArgumentError(
        "curves: learning curves come with rows; query them without group_by");
  }
  // Checked before anything is read; only grouped queries use it.
  ASSIGN_OR_RETURN(const Criterion criterion, ParseCriterion(query.criterion, "criterion"));
  QueryOutcome out;
  // With curves, each DONE row goes on with its curve, read on the query's
  // connection as the row passes (on this thread: curves keep the read on
  // one thread, below).
  WithCurves with_curves(outer_sink);
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    with_curves.Use(c);
    RowSink& sink = query.curves ? static_cast<RowSink&>(with_curves) : outer_sink;
    ASSIGN_OR_RETURN(std::shared_ptr<const SweepSpec> spec_ptr, specs_->Get(c, query.sweep_id));
    const SweepSpec& spec = *spec_ptr;
    std::vector<std::string> labels;
    for (const HeadSpec& h : spec.heads) labels.push_back(HeadLabel(h));
    CellFilter filter;
    if (!query.head.empty()) {
      for (int i = 0; i < static_cast<int>(labels.size()); ++i) {
        if (labels[i] == query.head) filter.heads.insert(i);
      }
      if (filter.heads.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("head: sweep ", Clip(query.sweep_id),
                                                       " has no head \"", Clip(query.head),
                                                       "\"; its heads are ",
                                                       absl::StrJoin(labels, ", ")));
      }
    }
    filter.ranks.insert(query.ranks.begin(), query.ranks.end());
    filter.seeds.insert(query.seeds.begin(), query.seeds.end());

    if (query.state == CellState::kInvalid) {
      if (grouped) {
        return absl::InvalidArgumentError(
            "state: invalid rows never count in groups; query them without group_by");
      }
      return ReadInvalidRows(
          c, query.sweep_id, labels,
          [&](int head_index, int rank, uint64_t seed) {
            return filter.Keeps(head_index, rank, seed);
          },
          query.page_size, query.after_cell_id, sink, &out.next_after_cell_id);
    }
    if (grouped) {
      GroupMap groups;
      if (filter.seeds.empty()) {
        RETURN_IF_ERROR(GroupsFromSummaries(c, query.sweep_id, labels, filter, &groups));
        bool any_done = false;
        for (const auto& [key, g] : groups) any_done = any_done || g.n > 0;
        if (any_done) {
          // The facts describe the dataset, the same for every cell.
          static const std::string* sql = new std::string(
              absl::StrCat("SELECT ", ResultColumns(),
                           " FROM results WHERE sweep_id = ?1 AND state = ", kCellDone,
                           " LIMIT 1"));
          ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
          q.Bind(1, query.sweep_id);
          ASSIGN_OR_RETURN(bool row, q.Step());
          if (row) {
            SeedResult result;
            ReadResultColumns(q, 0, &result);
            out.facts = result.facts;
          }
        }
      } else {
        RETURN_IF_ERROR(
            GroupsFromRows(c, query.sweep_id, labels, filter, &groups, &out.facts));
      }
      for (auto& [key, g] : groups) {
        std::sort(g.missing_seeds.begin(), g.missing_seeds.end());
        out.groups.push_back(std::move(g));
      }
      const bool has_test_split = HasTestSplit(spec);
      // The one place recipes get their labels, in the reasons and the reply:
      // the axes' values ("lr=0.003 max_steps=4000"), "recipe N" without axes.
      const RecipeLabeler label = [&spec](int32_t recipe) {
        return spec.axes.empty() ? DefaultRecipeLabel(recipe) : RecipeLabel(spec, recipe);
      };
      out.criterion = CriterionText(criterion);
      for (const ResultGroup& g : out.groups) {
        if (out.recipe_labels.count(g.recipe) == 0) out.recipe_labels.emplace(g.recipe, label(g.recipe));
      }
      JudgeGroups(out.groups, has_test_split, criterion);
      out.heads = SummarizeHeads(out.groups, has_test_split, criterion, label);
      for (HeadSummary& h : out.heads) {
        if (h.head_index >= static_cast<int>(spec.heads.size())) continue;
        const HeadSpec& head = spec.heads[h.head_index];
        if (ReadoutEscapesRankBound(head, spec.train)) {
          h.caveat = "loss ce: the argmax readout is not the paper's model, so this head's "
                     "transition does not test the rank bound";
        }
        h.no_bound = NoBoundReason(head, spec.train);
      }
      out.laws = SummarizeAxisLaws(out.groups, spec, has_test_split, criterion, label);
      for (AxisLaw& law : out.laws) {
        if (law.head_index < static_cast<int>(spec.heads.size())) {
          // Bounds only where they apply to the head (NoBoundReason).
          if (!NoBoundReason(spec.heads[law.head_index], spec.train).empty()) continue;
        }
        RETURN_IF_ERROR(FillLawBounds(c, query.sweep_id, spec, law));
      }
      return absl::OkStatus();
    }

    // Rows in cell id order from after_cell_id on. Done and failed cells
    // (the default) are exactly the sweep's result rows, each read from its
    // packed copy: a walk of result_packs over the cell ids between the
    // sweep's first and last result (from results_by_sweep), from
    // after_cell_id on, without touching `cells`.
    if (!query.state.has_value()) {
      int64_t first_result = 0, last_result = 0;
      {
        // Two subqueries: each is one index lookup, where MIN and MAX in
        // one SELECT would read every entry of the sweep.
        enum Col : int { kFirst, kLast, kCount };
        static const std::string* sql = NewSelect<kCount>(
            {"(SELECT MIN(cell_id) FROM results WHERE sweep_id = ?1)",
             "(SELECT MAX(cell_id) FROM results WHERE sweep_id = ?1)"},
            "");
        ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
        q.Bind(1, query.sweep_id);
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (row) {
          first_result = q.ColumnInt(kFirst);
          last_result = q.ColumnInt(kLast);
        }
      }
      const int64_t after = std::max(query.after_cell_id, first_result - 1);
      // "+sweep_id" keeps SQLite on the cell id range: cells of other
      // sweeps fall inside it only when a search sweep added cells later.
      static const std::string* sql = NewSelect<PackedCol::kCount>(
          {"cell_id", "packed"},
          "FROM result_packs WHERE cell_id > ?2 AND cell_id <= ?3 AND +sweep_id = ?1 "
          "ORDER BY cell_id");
      ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
      q.Bind(1, query.sweep_id).Bind(2, after).Bind(3, last_result);
      const int64_t in_range = std::max<int64_t>(0, last_result - after);
      const int64_t at_most = query.page_size > 0 ? std::min(query.page_size, in_range) : in_range;
      sink.Expect(std::min<int64_t>(at_most, kMostRowsExpected));
      RowPage page(query, filter, sink, &out);
      FinishedRows rows(query.sweep_id, labels, page);
      const int64_t two_threads = two_thread_query_rows_;
      return two_threads > 0 && at_most >= two_threads && !query.curves
                 ? ReadFinishedRowsOnTwoThreads(q, rows)
                 : ReadFinishedRows(q, rows);
    }
    // A state filter walks cells_by_state.
    static const std::string* state_sql = new std::string(absl::StrCat(
        "SELECT ", QueryColumns(),
        " FROM cells c LEFT JOIN results r ON r.cell_id = c.id WHERE c.sweep_id = ?1 AND "
        "c.id > ?2 AND c.state = ?3 ORDER BY c.id"));
    if (query.page_size > 0) sink.Expect(std::min<int64_t>(query.page_size, kMostRowsExpected));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*state_sql));
    q.Bind(1, query.sweep_id).Bind(2, query.after_cell_id).Bind(3, static_cast<int>(*query.state));
    RowPage page(query, filter, sink, &out);
    while (true) {
      ASSIGN_OR_RETURN(bool more, q.Step());
      if (!more) return absl::OkStatus();
      if (!page.Keeps(static_cast<int>(q.ColumnInt(QueryCol::kHeadIndex)),
                      static_cast<int>(q.ColumnInt(QueryCol::kRank)),
                      SeedFromDb(q.ColumnInt(QueryCol::kSeed)))) {
        continue;
      }
      if (!page.Add(QueryRow(q, query.sweep_id, labels))) return absl::OkStatus();
    }
  }));
  RETURN_IF_ERROR(with_curves.status());
  return out;
}

namespace {

// The rows of `table` (cells or sweeps) by their state column.
template <typename State>
absl::StatusOr<std::map<State, int64_t>> CountByState(Store* store, const char* table) {
  std::map<State, int64_t> counts;
  RETURN_IF_ERROR(store->Read([&](Connection& c) -> absl::Status {
    counts.clear();
    enum Col : int { kState, kRows, kCount };
    static constexpr absl::string_view kColumns[] = {"state", "COUNT(*)"};
    const std::string sql = absl::StrCat("SELECT ", ColumnList<kCount>(kColumns), " FROM ", table,
                                         " GROUP BY state");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(sql));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) return absl::OkStatus();
      counts[static_cast<State>(q.ColumnInt(kState))] = q.ColumnInt(kRows);
    }
  }));
  return counts;
}

}  // namespace

absl::StatusOr<std::map<CellState, int64_t>> SweepQueries::CountCellsByState() {
  return CountByState<CellState>(store_, "cells");
}

absl::StatusOr<std::map<SweepState, int64_t>> SweepQueries::CountSweepsByState() {
  return CountByState<SweepState>(store_, "sweeps");
}

absl::StatusOr<std::vector<WorkerInfo>> SweepQueries::ListWorkers() {
  const int64_t now = clock_->NowMs();
  std::vector<WorkerInfo> workers;
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    enum Col : int {
      kId, kHostname, kDevice, kDeviceName, kMemoryBytes, kSlots, kBuildId, kTorchVersion,
      kCudaVersion, kRegisteredMs, kLastSeenMs, kCompleted, kLeased, kQuarantinedMs,
      kTokenHeldBy, kCount
    };
    static const std::string* leased = new std::string(absl::StrCat(
        "(SELECT COUNT(*) FROM cells c WHERE c.worker_id = w.id AND c.state = ", kCellLeased,
        ")"));
    static const std::string* sql = NewSelect<kCount>(
        {"w.id", "w.hostname", "w.device", "w.device_name", "w.memory_bytes", "w.slots",
         "w.build_id", "w.torch_version", "w.cuda_version", "w.registered_ms", "w.last_seen_ms",
         "w.completed", leased->c_str(), "w.quarantined_ms", "COALESCE(h.worker_id, '')"},
        "FROM workers w LEFT JOIN held_tokens h ON h.name = w.owner AND w.owner != '' "
        "ORDER BY w.id");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      WorkerInfo w;
      w.worker_id = q.ColumnText(kId);
      w.hostname = q.ColumnText(kHostname);
      w.device = q.ColumnText(kDevice);
      w.device_name = q.ColumnText(kDeviceName);
      w.memory_bytes = q.ColumnInt(kMemoryBytes);
      w.slots = static_cast<int>(q.ColumnInt(kSlots));
      w.version = {q.ColumnText(kBuildId), q.ColumnText(kTorchVersion),
                   q.ColumnText(kCudaVersion)};
      w.registered_unix_ms = q.ColumnInt(kRegisteredMs);
      w.last_seen_unix_ms = q.ColumnInt(kLastSeenMs);
      w.completed_cells = q.ColumnInt(kCompleted);
      w.leased_cells = static_cast<int>(q.ColumnInt(kLeased));
      w.alive = now - w.last_seen_unix_ms <= 3 * lease_ms_;
      w.quarantined_unix_ms = q.ColumnInt(kQuarantinedMs);
      w.token_held_by = q.ColumnText(kTokenHeldBy);
      workers.push_back(std::move(w));
    }
    return absl::OkStatus();
  }));
  return workers;
}

}  // namespace ranksweep::server
