// The columnar form of QueryResults rows (QueryResultsRequest.columns,
// message ResultColumns), both ways: ResultColumnsEncoder writes it (the
// coordinator's reply), RowsFromColumns reads it back into one ResultRow per
// row. Side by side so that the two cannot drift; columns_test.cc checks the
// round trip.
//
// The form: one list per field, a value per row, in reply order. Strings
// that repeat (head labels, workers, devices) and the version and dataset
// facts messages are tables, the rows holding indexes into them. A failure
// text is kept only for the rows that have one (failure_row). A metric list
// whose every value is the empty one (0; 1 for an error) is sent empty. The
// optional metrics (common/spec/result_metrics.h) are one MetricColumn each,
// with the rows that lack the metric; one no row has is left out.
#ifndef RANKSWEEP_PROTO_COLUMNS_H_
#define RANKSWEEP_PROTO_COLUMNS_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/spec/result_metrics.h"
#include "common/spec/spec.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep {

// One row as the encoder takes it: the fields of a v1::ResultRow in plain
// types. The views and `result` need only last for the Add call.
struct ResultColumnsRow {
  int64_t cell_id = 0;
  std::string_view head;  // the label of head_index
  int head_index = 0;
  int rank = 0;
  int recipe = 0;  // index into the sweep's recipes; 0 without axes
  uint64_t seed = 0;
  v1::CellState state = v1::CELL_STATE_UNSPECIFIED;
  const SeedResult* result = nullptr;  // null: no metrics (not done)
  std::string_view failure;
  std::string_view worker_id;
  std::string_view build_id, torch_version, cuda_version;  // the worker's
  int attempt = 0;
  int64_t lease_id = 0;
  int64_t finished_unix_ms = 0;
  int64_t cached_from_cell_id = 0;
};

// Appends rows to a ResultColumns message (which may live on an arena), one
// Add per row in reply order; the tables grow as new values come. Expect
// reserves room for the rows expected. Finish, after the last row, empties
// the metric lists that hold only the empty value. Does not own the
// message. Not thread-safe: one encoder per reply.
class ResultColumnsEncoder {
 public:
  ResultColumnsEncoder(v1::ResultColumns* p, const std::string& sweep_id);
  void Expect(int64_t at_most);
  void Add(const ResultColumnsRow& row);
  void Finish();

 private:
  // A table of distinct strings of the reply (workers, devices) and the
  // index of each. The keys point into the table's own strings, which stay
  // put as it grows.
  struct StringTable {
    explicit StringTable(google::protobuf::RepeatedPtrField<std::string>* v) : values(v) {}
    int IndexOf(std::string_view value);
    google::protobuf::RepeatedPtrField<std::string>* values;
    absl::flat_hash_map<std::string_view, int> index;
    int last = -1;  // the index given last (-1: none yet)
  };
  int VersionIndex(const ResultColumnsRow& row);
  int FactsIndex(const DatasetFacts& f);

  v1::ResultColumns* p_;
  // The column of each built-in metric (kBuiltInMetrics order): an
  // integer's in `integers_`, a real's in `reals_` (the other is null).
  std::array<google::protobuf::RepeatedField<int64_t>*, kBuiltInMetricCount> integers_{};
  std::array<google::protobuf::RepeatedField<double>*, kBuiltInMetricCount> reals_{};
  int rows_ = 0;
  // The rows Expect was told of, reserved in an optional metric's column
  // when its first value comes.
  int expected_rows_ = 0;
  StringTable workers_, devices_;
  // Values already in the other tables -> their index.
  absl::flat_hash_map<std::tuple<std::string_view, std::string_view, std::string_view>, int>
      versions_;
  using FactsKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;
  absl::flat_hash_map<FactsKey, int> facts_;
  // The index each table gave last (-1: none yet).
  int last_version_ = -1, last_facts_ = -1;
  FactsKey last_facts_key_;
};

// Appends the rows of `response->columns()` to `response->rows()` (on the
// response's arena, if it has one) and clears the columns. A reply without
// columns (grouped, or from a coordinator that predates them and sent rows)
// is left as it is. An empty metric list reads as its empty value on every
// row. InvalidArgument naming the field when the columns do not fit
// together (a list of the wrong length, an index past its table); the rows
// are then left unchanged.
absl::Status RowsFromColumns(v1::QueryResultsResponse* response);

// The same, a row at a time, for readers that go through the columns
// without keeping the rows. CheckColumns first (the errors above); then
// for each row i in order, `failure` = FailureIndex(c, i, previous failure)
// (0 for the first row) and RowFromColumns(c, i, failure, row) sets every
// field of `row`, which may be reused from the previous row.
absl::Status CheckColumns(const v1::ResultColumns& c);
int FailureIndex(const v1::ResultColumns& c, int row, int from);
void RowFromColumns(const v1::ResultColumns& c, int i, int failure, v1::ResultRow* row);

}  // namespace ranksweep

#endif  // RANKSWEEP_PROTO_COLUMNS_H_
