// A result row packed into one BLOB (table result_packs, schema 6).
//
// The results table keeps every field of a result in its own column, for
// SQL (aggregates, the result cache, filters). Reading ~36 columns per row
// through SQLite's API is most of what a query of a large sweep costs, so
// each row also has this packed copy of the fields a query returns, in a
// narrow table of its own, and row queries read (cell_id, packed) there.
//
// Layout, version 1: a version byte, then varints (signed ones zigzag) and
// little-endian doubles in a fixed order, strings as a varint length and
// bytes. The order is in packed_row.cc; a new field means a new version,
// and Unpack keeps reading the old ones. Version 2 adds the recipe after the
// rank; a row of recipe 0 is still written as version 1 (it reads back the
// same), so sweeps without axes store what they always did.
#ifndef RANKSWEEP_SERVER_CORE_RESULTS_PACKED_ROW_H_
#define RANKSWEEP_SERVER_CORE_RESULTS_PACKED_ROW_H_

#include <sqlite3.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "server/core/types.h"

namespace ranksweep::server {

// Everything of `row` but sweep_id, cell_id and head (the label), which the
// reader knows; the optional metrics (common/spec/result_metrics.h) after
// the rest, so a row packed before one existed reads it as missing. `row.result` is stored when set; its seed is row.seed.
// Without a test split (test.sequences <= 0) test.error is stored as 1, as
// the columns read back.
std::string PackResultRow(const ResultRow& row);

// Fills every field of `row` that PackResultRow stored; leaves sweep_id,
// cell_id and head alone. InternalError when `packed` is not a packed row.
absl::Status UnpackResultRow(std::string_view packed, ResultRow* row);

// Registers the SQL function ranksweep_pack_row on `db`; migration 6 fills
// the column of existing rows with it. Its 32 arguments, in this order, are
// the results columns:
//   head_index, rank, seed, state, lease_id, attempt, worker_id,
//   worker_build_id, worker_torch_version, worker_cuda_version, failure,
//   finished_ms, cached_from, train_sequences, train_position_accuracy,
//   train_exact_accuracy, train_error, train_max_abs_error, test_sequences,
//   test_position_accuracy, test_exact_accuracy, test_error,
//   test_max_abs_error, final_loss, steps, wall_seconds, device,
//   facts_train_sequences, facts_test_sequences, facts_distinct_queries,
//   facts_rank_lower_bound, facts_rank_upper_bound.
// The metrics are read only when state is done (3).
absl::Status RegisterPackRowFunction(sqlite3* db);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_RESULTS_PACKED_ROW_H_
