// Column blocks: runs of a sweep's result rows also kept as one encoded
// block each (table result_blocks, schema 20), so that a query of the whole
// sweep joins a few stored blocks instead of unpacking and encoding every
// row (docs/ARCHITECTURE.md, "Column blocks").
//
// The core does not read the blocks' bytes: they are what the service's
// encoder wrote (proto/column_blocks.h), tagged with its `layout`. A block
// covers its sweep's result rows from first_cell_id to last_cell_id, and
// is stored only when every cell of the sweep in that range has its
// result; the triggers on result_packs delete it when any row in the range
// is replaced (the writer runs with recursive_triggers, so a REPLACE fires
// them), updated or deleted. A new row can only be added in the range
// after one was deleted, so a block that is still there holds exactly the
// rows of its range, and storing a result costs nothing more. A query
// (SweepQueries::Query with a RowSink whose BlockLayout() is set) hands on
// each block of that layout in its place and reads the rows between and
// after them as rows.
//
// Thread-safety: functions over the caller's connection, in its
// transaction.
#ifndef RANKSWEEP_SERVER_CORE_RESULTS_RESULT_BLOCKS_H_
#define RANKSWEEP_SERVER_CORE_RESULTS_RESULT_BLOCKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/sqlite.h"

namespace ranksweep::server {

// One block: its rows' first and last cell id, how many rows, and its bytes.
struct ColumnBlock {
  int64_t first_cell_id = 0;
  int64_t last_cell_id = 0;
  int64_t rows = 0;
  std::string bytes;
};

// Stores `blocks` of `sweep_id`, made from its rows as they stood at results
// version `version` (SweepQueries::ResultsVersion), in a write transaction.
// Returns kResultsMoved, storing nothing, when the sweep's version has moved
// since: a row may have changed after it was read, before this block existed
// to be deleted (not an error, so that the transaction commits as it is). Else deletes the sweep's blocks of another layout, then stores
// each block whose range has no cell of the sweep without its result (its
// row count is the sweep's cells in the range), replacing any it overlaps;
// returns how many it stored.
inline constexpr int kResultsMoved = -1;
absl::StatusOr<int> StoreColumnBlocks(Connection& c, const std::string& sweep_id,
                                      int64_t version, const std::string& layout,
                                      const std::vector<ColumnBlock>& blocks);

// The sweep's results version, read on `c` (0 before its first result).
// Inside a write transaction that added a row of the sweep, it counts the
// move that transaction owes (NoteResultsAdded): what was read before has
// changed.
absl::StatusOr<int64_t> ReadResultsVersion(Connection& c, const std::string& sweep_id);

// Moves the sweep's results version once for the transaction on `c`, at
// its commit, however many rows of the sweep it adds (or at once outside a
// transaction). The statement that adds a row to result_packs calls it;
// the triggers of schema 19 move it for every row replaced, updated or
// deleted, whatever statement does that. A trigger on each insert did the
// same for every row, at about 9,000 instructions per result (3% of the
// writer thread's).
absl::Status NoteResultsAdded(Connection& c, const std::string& sweep_id);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_RESULTS_RESULT_BLOCKS_H_
