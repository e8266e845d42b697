// The table, CSV and JSON writers of what the CLI prints: sweeps, per-seed
// results, groups and workers, and the exit codes. (The progress line, the
// status text and the summary are in sweep_views.h; JSON by reflection in
// json_writer.h.) Input is plain data (the ranksweep.v1
// messages are used as plain structs here); output is a string, so every
// format is unit-tested byte for byte. No RPCs, no I/O, no clocks: callers
// pass the time zone and the current time.
//
// Errors: only the parsers return absl::Status (InvalidArgument naming the
// flag and the allowed values). Thread-safety: free functions, no state.
#ifndef RANKSWEEP_CLIENT_FORMAT_H_
#define RANKSWEEP_CLIENT_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/exit_codes.h"
#include "common/spec/spec.h"
#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep::client {

// Exit codes: the one table of every binary (common/exit_codes.h); a
// server error is kExitFailure.
using ::ranksweep::ExitCodeForStatusCode;
using ::ranksweep::kExitNotFound;
using ::ranksweep::kExitOk;
using ::ranksweep::kExitSweepFailed;
using ::ranksweep::kExitUnreachable;
using ::ranksweep::kExitUsage;
constexpr int kExitServerError = ::ranksweep::kExitFailure;

// A rectangular table of cells; `right_align[i]` right-aligns column i
// (numbers). Missing right_align entries mean left-aligned.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right_align;
};

// Columns separated by two spaces, padded to the widest cell, header first,
// no trailing spaces, every line ending in '\n'.
std::string RenderTable(const Table& table);
// RFC 4180 CSV: header line then rows; cells containing , " or newlines are
// quoted with "" escaping; lines end in '\n'.
std::string RenderCsv(const Table& table);

// The cells every form shares. FixedText: "%.*f". AppendShortestDouble: the
// shortest text that reads back as the same double (std::to_chars), nothing
// for NaN or infinities; ShortestCell: that text, or empty unless `shown`.
// RankText: "-" for rank 0 (a head without a rank); RankCell and BoundCell:
// the CSV forms, empty for 0 (a missing rank, no theory bound).
std::string FixedText(double v, int digits);
void AppendShortestDouble(double v, std::string* out);
std::string ShortestCell(bool shown, double v);
std::string RankText(int32_t rank);
std::string RankCell(int32_t rank);
std::string BoundCell(int64_t bound);

enum class OutputFormat { kTable, kCsv, kJson };
absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& s);

// "RUNNING", "DONE", ... ; "UNSPECIFIED" for 0.
std::string SweepStateName(v1::SweepState state);
std::string CellStateName(v1::CellState state);
// Accepts the names above in any case ("done", "FAILED").
absl::StatusOr<v1::SweepState> ParseSweepState(const std::string& s);
absl::StatusOr<v1::CellState> ParseCellState(const std::string& s);

// "-" for 0 (not set), else "YYYY-MM-DD HH:MM:SS" in `tz`.
std::string FormatUnixMs(int64_t unix_ms, absl::TimeZone tz);
// Human durations: "0s", "45s", "3m05s", "1h02m", "2d03h"; "?" when negative
// or not finite.
std::string FormatDuration(double seconds);

// The axis columns of a sweep's rows and groups (common/spec/spec.h,
// SweepAxis): one per axis, named as the axis, holding the value the row's
// recipe gives it. Empty for a sweep without axes, whose outputs then have
// no such columns (and read as they always did).
struct RecipeAxes {
  std::vector<std::string> names;
  std::vector<std::vector<double>> values;  // [recipe][axis]
  static RecipeAxes Of(const SweepSpec& spec);
  bool empty() const { return names.empty(); }
  // Axis `axis` of `recipe`: its value, or the shortest text of it (an
  // integer axis without a point); NaN and "?" for a recipe out of range.
  double Value(int recipe, size_t axis) const;
  std::string Text(int recipe, size_t axis) const;
};

// `ranksweep list`: id, name, state, done/total, failed, created.
Table SweepsTable(const std::vector<v1::SweepInfo>& sweeps, absl::TimeZone tz);
// `ranksweep results` per-seed table: head, rank, seed, state, train error,
// test error, position accuracy (train), steps, seconds, worker. Metrics are
// "-" for failed cells and the test error is "-" without a test split.
// With axes, their columns follow RANK (upper-case names: LR, MAX_STEPS).
Table ResultRowsTable(const std::vector<v1::ResultRow>& rows, const RecipeAxes& axes = {});
// The CSV form carries every field of a row, for analysis tools: a header
// line, then one line per row. Floats are the shortest text that reads back
// as the same double; a missing value (the metrics of a failed cell, the
// test metrics without a test split, the rank of a rank-less head) is an
// empty cell; states by their short names ("DONE").
// With axes, the last columns are the recipe's index and the axes' values.
std::string ResultRowsCsv(const std::vector<v1::ResultRow>& rows, const RecipeAxes& axes = {});
// One JSON array of row objects: proto field names, every field printed,
// enums by their short names ("DONE", as the table and CSV print them),
// 64-bit integers as JSON numbers; one object per line. A missing value is
// null: an unset message (the result of a failed cell), a split without
// sequences (the test split of a dataset without one), rank 0 (a head
// without a rank).
// With axes, each object also has one key per axis with its value.
std::string ResultRowsJson(const std::vector<v1::ResultRow>& rows, const RecipeAxes& axes = {});

// The same CSV or JSON written a piece at a time, so that the rows of a
// sweep of any size can be printed page by page as they arrive, in the
// memory of a page or two: Begin(), Add() for each row, then End() append
// exactly the text ResultRowsCsv / ResultRowsJson return for all the rows.
class ResultRowsWriter {
 public:
  // kCsv or kJson; the table form needs every row first, for its widths.
  explicit ResultRowsWriter(OutputFormat format, RecipeAxes axes = {});
  void Begin(std::string* out) const;
  void Add(const v1::ResultRow& row, std::string* out);
  // Add for each row of `columns` (proto/columns.h's form, checked with
  // CheckColumns), read a row at a time into one reused message.
  void AddColumns(const v1::ResultColumns& columns, std::string* out);
  void End(std::string* out) const;

 private:
  bool json_;
  RecipeAxes axes_;
  int64_t rows_ = 0;
  v1::ResultRow row_;  // AddColumns' scratch row
};

// Grouped results: head, rank, n/expected, train error mean/std/min/max,
// test error mean ("-" unless `has_test_split`: a group cannot tell a
// missing test split from a perfect one), exact seeds.
// With axes, their columns follow RANK, as in the per-seed table.
Table ResultGroupsTable(const std::vector<v1::ResultGroup>& groups, bool has_test_split,
                        const RecipeAxes& axes = {});
// The CSV form carries every aggregate. A missing value (docs: "Output
// formats") is an empty cell in CSV and null in JSON: the aggregates of a
// group without a done seed, the test ones without a test split, the rank
// of a head without one.
// With axes, their columns follow rank, then the recipe's index.
Table ResultGroupsCsvTable(const std::vector<v1::ResultGroup>& groups, bool has_test_split,
                           const RecipeAxes& axes = {});
// One group as a JSON tree (json_writer.h's form), its aggregates null when
// missing: all of them without a done seed, the test ones without a test
// split.
// With axes, one key per axis with its value.
nlohmann::ordered_json ResultGroupJson(const v1::ResultGroup& g, bool has_test_split,
                                       const RecipeAxes& axes = {});
std::string ResultGroupsJson(const std::vector<v1::ResultGroup>& groups, bool has_test_split,
                             const RecipeAxes& axes = {});

// `ranksweep workers`: id, host, device, slots, leased, completed, alive,
// last seen (ago, relative to `now`), version.
Table WorkersTable(const std::vector<v1::WorkerInfo>& workers, absl::Time now);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_FORMAT_H_
