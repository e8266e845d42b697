#include "server/core/results/result_queries.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/criterion.h"
#include "common/spec/result_validation.h"
#include "common/status_macros.h"
#include "server/core/results/analysis.h"
#include "server/core/results/group_reads.h"
#include "server/core/results/result_blocks.h"
#include "server/core/workers/quarantine.h"
#include "server/core/results/result_schema.h"
#include "server/core/results/row_reads.h"
#include "server/core/sql_columns.h"

namespace ranksweep::server {

using result_reads::CellFilter;
using result_reads::FillLawBounds;
using result_reads::FinishedRows;
using result_reads::GroupMap;
using result_reads::GroupsFromRows;
using result_reads::GroupsFromSummaries;
using result_reads::QueryCol;
using result_reads::QueryColumns;
using result_reads::QueryRow;
using result_reads::ReadFinishedRows;
using result_reads::ReadFinishedRowsOnTwoThreads;
using result_reads::RowPage;

namespace {

// RowSink::Expect's bound never exceeds this, so that a sink may reserve
// room for all of it.
constexpr int64_t kMostRowsExpected = 100'000;

}  // namespace

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

namespace {

// The finished rows of the query's sweep with cell ids in (after, last],
// from their packed copies, into `rows` and its `page`; on two threads
// when there are `two_thread_rows` or more of them to read (0: never).
absl::Status ReadFinishedRange(Connection& c, const ResultQuery& query, int64_t after,
                               int64_t last, int64_t two_thread_rows, RowSink& sink,
                               RowPage& page, FinishedRows& rows) {
  if (last <= after) return absl::OkStatus();
  // "+sweep_id" keeps SQLite on the cell id range: cells of other sweeps
  // fall inside it only when a search sweep added cells later.
  static const std::string* sql = NewSelect<PackedCol::kCount>(
      {"cell_id", "packed"},
      "FROM result_packs WHERE cell_id > :after AND cell_id <= :last AND "
      "+sweep_id = :sweep_id ORDER BY cell_id");
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":sweep_id", query.sweep_id).Bind(":after", after).Bind(":last", last);
  const int64_t room = page.page_size() > 0 ? page.page_size() - page.added() : last - after;
  const int64_t at_most = std::min(last - after, room);
  sink.Expect(std::min(at_most, kMostRowsExpected));
  return two_thread_rows > 0 && at_most >= two_thread_rows && !query.curves
             ? ReadFinishedRowsOnTwoThreads(q, rows)
             : ReadFinishedRows(q, rows);
}

}  // namespace

absl::Status SweepQueries::ReadRowsAndBlocks(Connection& c, const ResultQuery& query,
                                             const CellFilter& filter,
                                             const std::vector<std::string>& labels,
                                             int64_t first_result, int64_t last_result,
                                             RowSink& sink, QueryOutcome* out) {
  RowPage page(query, filter, sink, out);
  FinishedRows rows(query.sweep_id, labels, page);
  auto read_rows = [&](int64_t after, int64_t last) {
    return ReadFinishedRange(c, query, after, last, two_thread_query_rows_, sink, page, rows);
  };
  enum Col : int { kFirst, kLast, kRows, kColumns, kCount };
  static const std::string* blocks_sql = NewSelect<kCount>(
      {"first_cell_id", "last_cell_id", "rows", "columns"},
      "FROM result_blocks WHERE sweep_id = :sweep_id AND layout = :layout AND last_cell_id > "
      ":after ORDER BY last_cell_id");
  ASSIGN_OR_RETURN(Statement blocks, c.Prepare(*blocks_sql));
  blocks.Bind(":sweep_id", query.sweep_id).Bind(":layout", std::string(sink.BlockLayout()));
  blocks.Bind(":after", query.after_cell_id);
  // Rows up to this cell id are handed on (or before the page).
  int64_t done_to = std::max(query.after_cell_id, first_result - 1);
  const int64_t page_size = page.page_size();
  while (true) {
    ASSIGN_OR_RETURN(bool more, blocks.Step());
    if (!more) break;
    const int64_t first = blocks.ColumnInt(kFirst), last = blocks.ColumnInt(kLast);
    const int64_t rows_in = blocks.ColumnInt(kRows);
    // A block the page starts inside is read as rows, as would be one that
    // overlapped another (StoreColumnBlocks never stores one).
    if (first <= done_to) continue;
    RETURN_IF_ERROR(read_rows(done_to, first - 1));
    if (out->next_after_cell_id != 0) return absl::OkStatus();  // the page is full
    if (page_size > 0 && page.added() + rows_in > page_size) {
      // The block does not fit: the page ends before it, a little short,
      // unless nothing is in it yet (a block longer than a page is read as
      // rows, a page of them).
      if (page.added() > 0) {
        page.EndHere();
        return absl::OkStatus();
      }
      RETURN_IF_ERROR(read_rows(done_to, last));
      if (out->next_after_cell_id != 0) return absl::OkStatus();
      done_to = last;
      continue;
    }
    sink.AddBlock(blocks.ColumnBlob(kColumns), rows_in);
    page.Added(rows_in, last);
    done_to = last;
  }
  return read_rows(done_to, last_result);
}

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
                           " FROM results WHERE sweep_id = :sweep_id AND state = ", kCellDone,
                           " LIMIT 1"));
          ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
          q.Bind(":sweep_id", query.sweep_id);
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
            {"(SELECT MIN(cell_id) FROM results WHERE sweep_id = :sweep_id)",
             "(SELECT MAX(cell_id) FROM results WHERE sweep_id = :sweep_id)"},
            "");
        ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
        q.Bind(":sweep_id", query.sweep_id);
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (row) {
          first_result = q.ColumnInt(kFirst);
          last_result = q.ColumnInt(kLast);
        }
      }
      // With column blocks: the sweep's blocks of the sink's layout in
      // their places, the rows before, between and after them read as rows.
      const bool with_blocks = !sink.BlockLayout().empty() && !query.curves &&
                               filter.heads.empty() && filter.ranks.empty() &&
                               filter.seeds.empty();
      if (with_blocks) {
        ASSIGN_OR_RETURN(out.results_version, ReadResultsVersion(c, query.sweep_id));
        return ReadRowsAndBlocks(c, query, filter, labels, first_result, last_result, sink,
                                 &out);
      }
      RowPage page(query, filter, sink, &out);
      FinishedRows rows(query.sweep_id, labels, page);
      return ReadFinishedRange(c, query, std::max(query.after_cell_id, first_result - 1),
                               last_result, two_thread_query_rows_, sink, page, rows);
    }
    // A state filter walks cells_by_state.
    static const std::string* state_sql = new std::string(absl::StrCat(
        "SELECT ", QueryColumns(),
        " FROM cells c LEFT JOIN results r ON r.cell_id = c.id WHERE c.sweep_id = :sweep_id "
        "AND c.id > :after AND c.state = :state ORDER BY c.id"));
    if (query.page_size > 0) sink.Expect(std::min<int64_t>(query.page_size, kMostRowsExpected));
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*state_sql));
    q.Bind(":sweep_id", query.sweep_id).Bind(":after", query.after_cell_id);
    q.Bind(":state", static_cast<int>(*query.state));
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

}  // namespace ranksweep::server
