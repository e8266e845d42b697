// The rows of a result query (SweepQueries::Query, result_queries.h): the
// select list of a cell joined with its result and one row read from it,
// the cells a query keeps, a page of rows, and the finished rows read from
// their packed copies (packed_row.h) on one thread or, for a large read,
// two. Internal to server/core/results/.
//
// Thread-safety: a RowPage and a FinishedRows belong to one query.
#ifndef RANKSWEEP_SERVER_CORE_RESULTS_ROW_READS_H_
#define RANKSWEEP_SERVER_CORE_RESULTS_ROW_READS_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/core/results/packed_row.h"
#include "server/core/results/result_queries.h"
#include "server/core/results/result_schema.h"
#include "server/core/sqlite.h"
#include "server/core/types.h"

namespace ranksweep::server::result_reads {

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
// The select list of a query row, in QueryCol order.
const std::string& QueryColumns();

// The label of head `head_index`; empty past the end of `labels`.
const std::string& LabelOf(const std::vector<std::string>& labels, int head_index);

// The row `q` (columns QueryColumns()) stands on.
ResultRow QueryRow(const Statement& q, const std::string& sweep_id,
                   const std::vector<std::string>& labels);

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

// One page of a row query: the rows it keeps go to `sink` until page_size
// of them have gone; the next kept row sets out->next_after_cell_id.
class RowPage {
 public:
  RowPage(const ResultQuery& query, const CellFilter& filter, RowSink& sink, QueryOutcome* out)
      : page_size_(query.page_size), filter_(filter), sink_(sink), out_(out) {}

  bool Keeps(int head_index, int rank, uint64_t seed) const {
    return filter_.Keeps(head_index, rank, seed);
  }

  int64_t page_size() const { return page_size_; }
  int64_t added() const { return added_; }
  // A stored column block of `rows` rows handed to the sink, counted as if
  // its rows had been added one by one.
  void Added(int64_t rows, int64_t last_cell_id) {
    added_ += rows;
    last_cell_id_ = last_cell_id;
  }
  // Ends the page after the rows added so far: the next page starts after
  // the last of them.
  void EndHere() { out_->next_after_cell_id = last_cell_id_; }

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
absl::Status ReadFinishedRows(Statement& q, FinishedRows& rows);

// The same, with the unpacking and the sink on a second thread while this
// one steps SQLite: chunks of rows are copied out of SQLite and handed over
// through a short queue, so both cores work on one large query.
absl::Status ReadFinishedRowsOnTwoThreads(Statement& q, FinishedRows& rows);

}  // namespace ranksweep::server::result_reads

#endif  // RANKSWEEP_SERVER_CORE_RESULTS_ROW_READS_H_
