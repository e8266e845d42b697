// JSON (and CSV) views of the coordinator's data, as the dashboard's pages
// read them: plain data in, nlohmann JSON out, no RPCs, no I/O, no clocks
// (callers pass the current time). Missing values are JSON null, never a
// stand-in number: the rank of a rank-less head (softmax) is null, a test
// error without a test split is null, the metrics of a failed cell are null.
// Enums are short names ("RUNNING", "DONE").
//
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_CLIENT_UI_VIEWS_H_
#define RANKSWEEP_CLIENT_UI_VIEWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "ranksweep/v1/ranksweep.pb.h"
#include "ranksweep/v1/sweep_admin.pb.h"

namespace ranksweep::client::ui {

using Json = nlohmann::ordered_json;

// A sweep: id, name, owner, state, priority, counts, grid/cached cells,
// eta_seconds (null unless running with an estimate; format.h's
// EstimateEtaSeconds), eta ("3m05s", "" when null), created/finished times
// (unix ms; finished null while running), mean cell seconds, recent
// failures, the heads (index, label, has_rank), ranks, seeds, dataset kind,
// has_test_split, the recipe axes ([{name, values}], empty without), the
// recipes ([{recipe, label ("lr=0.003", "" without axes), values {axis:
// value}}], one without axes) and the whole spec (spec.h field names).
Json SweepView(const v1::SweepInfo& sweep);
// SweepView and what people wrote about the sweep: note ("" = none), tags
// (sorted), archived.
Json ManagedSweepView(const v1::ManagedSweep& sweep);
Json ManagedSweepsView(const std::vector<v1::ManagedSweep>& sweeps);

// The column names of a per-seed row, in order: the keys of RowView and the
// header of RowsCsv.
const std::vector<std::string>& RowColumns();
// A per-seed row: cell_id, head, head_index, rank, seed, recipe (an index
// into SweepView's recipes; 0 without axes), state, the train
// and test error, train exact and position accuracy, final loss, steps,
// wall seconds, device, worker_id, attempt, finished time, cached (served
// from the result cache), failure. A row a quarantine invalidated (state
// INVALID) keeps its metrics as stored, and `failure` says who invalidated
// it and when; such a row never counts in a plot or summary.
Json RowView(const v1::ResultRow& row);
Json RowsView(const std::vector<v1::ResultRow>& rows);
// The same rows as RFC 4180 CSV (header RowColumns()); null is an empty
// cell, floats in the shortest form that reads back to the same double.
std::string RowsCsv(const std::vector<v1::ResultRow>& rows);
// The learning curves of done rows (a rows reply asked for with `curves`):
// one object per seed that has one, {cell_id, seed, recipe, has_test, step,
// loss, train_error, train_position_accuracy, test_error,
// test_position_accuracy}, each metric an array with one value per
// evaluation (the test ones null without a test split).
Json CurvesView(const std::vector<v1::ResultRow>& rows);

// A grouped QueryResults reply: {"facts": {...} or null, "heads": [...]}.
// Each head has its transition (rank or null, reason) for train and, with
// a test split, test, the caveat, and its groups: rank, n, expected, train
// and test error aggregates (mean, ci95, std, min, max; null when n is 0 or
// there is no test split), exact seeds and missing seeds, per (rank,
// recipe): `recipe` and `recipe_label` (the reply's label; "" without
// axes). Bounds of 0 (not applicable) are null.
Json SummaryView(const v1::QueryResultsResponse& grouped);

// A worker: id, hostname, device, device_name, memory_bytes, slots,
// version {build_id, torch, cuda}, registered and last-seen times,
// last_seen_ago_seconds (relative to `now_unix_ms`), alive, leased and
// completed cells.
Json WorkerView(const v1::WorkerInfo& worker, int64_t now_unix_ms);
Json WorkersView(const std::vector<v1::WorkerInfo>& workers, int64_t now_unix_ms);

// The shortest decimal form of `v` that parses back to exactly `v`
// ("0.1", "1e-05", "0.30000000000000004").
std::string ShortestDouble(double v);

}  // namespace ranksweep::client::ui

#endif  // RANKSWEEP_CLIENT_UI_VIEWS_H_
