// Rendering of what the CLI prints: tables, CSV, JSON and progress lines for
// sweeps, results, groups and workers. Input is plain data (the ranksweep.v1
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
#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep::client {

// Exit codes of the `ranksweep` CLI.
enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,        // bad flags, invalid spec, server said InvalidArgument
  kExitUnreachable = 2,  // server unreachable or timed out
  kExitNotFound = 3,     // no such sweep
  kExitSweepFailed = 4,  // watch: the sweep ended FAILED or CANCELLED
  kExitServerError = 5,  // any other server error
};

// The exit code for a failed call with this (absl or gRPC; the numbering is
// the same) status code.
int ExitCodeForStatusCode(int code);

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

// Seconds until the sweep finishes: remaining cells (pending + leased) times
// the mean cell time, divided by the cells running now (at least 1), which
// stands for the parallelism the workers give the sweep. -1 when unknown (no
// cell has finished yet).
double EstimateEtaSeconds(const v1::SweepInfo& sweep);

// One line of progress without a newline, e.g.
// "[#####...............] 12/48 done  4 running  1 failed  ETA 8s".
// Cancelled cells are shown when there are any; a finished sweep shows its
// state instead of an ETA.
std::string ProgressLine(const v1::SweepInfo& sweep, int bar_width = 20);

// `ranksweep list`: id, name, state, done/total, failed, created.
Table SweepsTable(const std::vector<v1::SweepInfo>& sweeps, absl::TimeZone tz);
// `ranksweep status`: "key: value" lines, then recent failures.
std::string SweepStatusText(const v1::SweepInfo& sweep, absl::TimeZone tz);

// `ranksweep results` per-seed table: head, rank, seed, state, train error,
// test error, position accuracy (train), steps, seconds, worker. Metrics are
// "-" for failed cells and the test error is "-" without a test split.
Table ResultRowsTable(const std::vector<v1::ResultRow>& rows);
// The CSV form carries every field of a row, for analysis tools: a header
// line, then one line per row. Floats are the shortest text that reads back
// as the same double; a missing value (the metrics of a failed cell, the
// test metrics without a test split, the rank of a rank-less head) is an
// empty cell; states by their short names ("DONE").
std::string ResultRowsCsv(const std::vector<v1::ResultRow>& rows);
// One JSON array of row objects: proto field names, every field printed,
// enums by their short names ("DONE", as the table and CSV print them),
// 64-bit integers as JSON numbers; one object per line. A missing value is
// null: an unset message (the result of a failed cell), a split without
// sequences (the test split of a dataset without one), rank 0 (a head
// without a rank).
std::string ResultRowsJson(const std::vector<v1::ResultRow>& rows);

// The same CSV or JSON written a piece at a time, so that the rows of a
// sweep of any size can be printed page by page as they arrive, in the
// memory of a page or two: Begin(), Add() for each row, then End() append
// exactly the text ResultRowsCsv / ResultRowsJson return for all the rows.
class ResultRowsWriter {
 public:
  // kCsv or kJson; the table form needs every row first, for its widths.
  explicit ResultRowsWriter(OutputFormat format);
  void Begin(std::string* out) const;
  void Add(const v1::ResultRow& row, std::string* out);
  void End(std::string* out) const;

 private:
  bool json_;
  int64_t rows_ = 0;
};

// Proto -> JSON by reflection, in that form (every field, proto field names,
// enums by short name, missing values null, 64-bit integers as numbers). MessageJsonTree builds an
// nlohmann tree, for output that adds fields of its own; AppendMessageJson
// writes the same text as MessageJsonTree(m).dump() straight into `out`,
// without the tree (the per-row form: ten times less work for 100,000 rows).
nlohmann::ordered_json MessageJsonTree(const google::protobuf::Message& m);
void AppendMessageJson(const google::protobuf::Message& m, std::string* out);

// Grouped results: head, rank, n/expected, train error mean/std/min/max,
// test error mean ("-" unless `has_test_split`: a group cannot tell a
// missing test split from a perfect one), exact seeds.
Table ResultGroupsTable(const std::vector<v1::ResultGroup>& groups, bool has_test_split);
// The CSV form carries every aggregate. A missing value (docs: "Output
// formats") is an empty cell in CSV and null in JSON: the aggregates of a
// group without a done seed, the test ones without a test split, the rank
// of a head without one.
Table ResultGroupsCsvTable(const std::vector<v1::ResultGroup>& groups, bool has_test_split);
std::string ResultGroupsJson(const std::vector<v1::ResultGroup>& groups, bool has_test_split);

// `ranksweep results --summary`, from a grouped QueryResultsResponse (groups,
// heads, facts). Per head: a title line, then a table with rank ("-" for
// rank-less heads), n/expected, train error "mean ± ci95" (just the mean when
// n < 2; "-" when n == 0), std, exact seeds "e/n", completeness ("complete"
// or "seed 3 missing"); with `has_test_split` also test error and test exact
// seeds. Then one line per head: "transition rank: 32 (theory: lower bound
// 6, upper bound 24)", "transition rank: undefined (REASON)", or for a
// rank-less head "exact on 3/3 seeds"; with a test split a second line
// "test transition rank: ...". Heads are separated by a blank line. The
// theory part reads "(theory: no bound for this dataset)" when both bounds
// are 0, and is left out when no cell is done (no facts).
std::string SummaryText(const v1::QueryResultsResponse& response, bool has_test_split);
// One row per group: head, head_index, rank (empty for a head without
// one), n, expected, train error mean/ci95/std (empty when missing), exact
// seeds, test error mean and test exact seeds (empty without a test split),
// missing_seeds ("3;5"), then the head's transition_rank ("" when
// undefined), transition_reason, rank_lower_bound, rank_upper_bound (""
// when the dataset has none).
Table SummaryCsvTable(const v1::QueryResultsResponse& response);
// {"facts": {...} or null, "heads": [{HeadSummary fields..., "groups": [...]}]}
// with every field of the messages (proto field names, 64-bit as numbers);
// missing values null: a bound the dataset lacks, the rank of an undefined
// transition, the aggregates GroupJson leaves out.
std::string SummaryJson(const v1::QueryResultsResponse& response);

// `ranksweep workers`: id, host, device, slots, leased, completed, alive,
// last seen (ago, relative to `now`), version.
Table WorkersTable(const std::vector<v1::WorkerInfo>& workers, absl::Time now);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_FORMAT_H_
