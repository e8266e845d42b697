#include "proto/columns.h"

#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace ranksweep {
namespace {

template <typename List>
absl::Status CheckLength(const List& list, const char* field, int rows) {
  if (list.size() == rows) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("columns.", field, ": ", list.size(),
                                                 " values for ", rows, " rows"));
}

// A metric list: one value per row, or none (every row holds `empty`).
template <typename List>
absl::Status CheckMetricLength(const List& list, const char* field, int rows) {
  if (list.empty()) return absl::OkStatus();
  return CheckLength(list, field, rows);
}

template <typename T>
T ValueOr(const google::protobuf::RepeatedField<T>& list, int i, T empty) {
  return list.empty() ? empty : list.Get(i);
}

template <typename Indexes>
absl::Status CheckIndexes(const Indexes& indexes, const char* field, int table_size,
                          const char* table) {
  for (int i = 0; i < indexes.size(); ++i) {
    if (indexes.Get(i) < 0 || indexes.Get(i) >= table_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("columns.", field, "[", i, "]: ", indexes.Get(i), " is not an index into ",
                       table, " (", table_size, " entries)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Check(const v1::ResultColumns& c) {
  const int n = c.cell_id_size();
#define RS_CHECK_LENGTH(field)                                 \
  do {                                                         \
    absl::Status s = CheckLength(c.field(), #field, n);        \
    if (!s.ok()) return s;                                     \
  } while (false)
  RS_CHECK_LENGTH(head_index);
  RS_CHECK_LENGTH(rank);
  RS_CHECK_LENGTH(seed);
  RS_CHECK_LENGTH(state);
  RS_CHECK_LENGTH(attempt);
  RS_CHECK_LENGTH(lease_id);
  RS_CHECK_LENGTH(finished_unix_ms);
  RS_CHECK_LENGTH(cached_from_cell_id);
  RS_CHECK_LENGTH(worker);
  RS_CHECK_LENGTH(worker_version);
  RS_CHECK_LENGTH(device);
  RS_CHECK_LENGTH(facts);
#undef RS_CHECK_LENGTH
#define RS_CHECK_METRIC(field)                                  \
  do {                                                          \
    absl::Status s = CheckMetricLength(c.field(), #field, n);   \
    if (!s.ok()) return s;                                      \
  } while (false)
  RS_CHECK_METRIC(train_sequences);
  RS_CHECK_METRIC(train_position_accuracy);
  RS_CHECK_METRIC(train_exact_accuracy);
  RS_CHECK_METRIC(train_error);
  RS_CHECK_METRIC(train_max_abs_error);
  RS_CHECK_METRIC(test_sequences);
  RS_CHECK_METRIC(test_position_accuracy);
  RS_CHECK_METRIC(test_exact_accuracy);
  RS_CHECK_METRIC(test_error);
  RS_CHECK_METRIC(test_max_abs_error);
  RS_CHECK_METRIC(final_loss);
  RS_CHECK_METRIC(steps);
  RS_CHECK_METRIC(wall_seconds);
#undef RS_CHECK_METRIC
  for (const auto& [indexes, field, size, table] :
       {std::make_tuple(&c.head_index(), "head_index", c.heads_size(), "heads"),
        std::make_tuple(&c.worker(), "worker", c.workers_size(), "workers"),
        std::make_tuple(&c.worker_version(), "worker_version", c.worker_versions_size(),
                        "worker_versions"),
        std::make_tuple(&c.device(), "device", c.devices_size(), "devices"),
        std::make_tuple(&c.facts(), "facts", c.facts_table_size(), "facts_table")}) {
    absl::Status s = CheckIndexes(*indexes, field, size, table);
    if (!s.ok()) return s;
  }
  if (c.failure_row_size() != c.failure_size()) {
    return absl::InvalidArgumentError(absl::StrCat("columns.failure: ", c.failure_size(),
                                                   " texts for ", c.failure_row_size(),
                                                   " failure_row entries"));
  }
  for (int i = 0; i < c.failure_row_size(); ++i) {
    const int row = c.failure_row(i);
    if (row < 0 || row >= n || (i > 0 && row <= c.failure_row(i - 1))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "columns.failure_row[", i, "]: ", row, " is not a row after the previous one (",
          n, " rows)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RowsFromColumns(v1::QueryResultsResponse* response) {
  if (!response->has_columns()) return absl::OkStatus();
  const v1::ResultColumns& c = response->columns();
  if (absl::Status s = Check(c); !s.ok()) return s;
  const int n = c.cell_id_size();
  auto* rows = response->mutable_rows();
  rows->Reserve(rows->size() + n);
  int next_failure = 0;
  for (int i = 0; i < n; ++i) {
    v1::ResultRow* row = rows->Add();
    row->set_sweep_id(c.sweep_id());
    row->set_cell_id(c.cell_id(i));
    row->set_head(c.heads(c.head_index(i)));
    row->set_head_index(c.head_index(i));
    row->set_rank(c.rank(i));
    row->set_seed(c.seed(i));
    row->set_state(c.state(i));
    if (c.state(i) == v1::CELL_STATE_DONE) {
      v1::SeedResult* r = row->mutable_result();
      r->set_seed(c.seed(i));
      v1::SplitMetrics* train = r->mutable_train();
      train->set_sequences(ValueOr<int64_t>(c.train_sequences(), i, 0));
      train->set_position_accuracy(ValueOr(c.train_position_accuracy(), i, 0.0));
      train->set_exact_accuracy(ValueOr(c.train_exact_accuracy(), i, 0.0));
      train->set_error(ValueOr(c.train_error(), i, 1.0));
      train->set_max_abs_error(ValueOr(c.train_max_abs_error(), i, 0.0));
      v1::SplitMetrics* test = r->mutable_test();
      test->set_sequences(ValueOr<int64_t>(c.test_sequences(), i, 0));
      test->set_position_accuracy(ValueOr(c.test_position_accuracy(), i, 0.0));
      test->set_exact_accuracy(ValueOr(c.test_exact_accuracy(), i, 0.0));
      test->set_error(ValueOr(c.test_error(), i, 1.0));
      test->set_max_abs_error(ValueOr(c.test_max_abs_error(), i, 0.0));
      r->set_final_loss(ValueOr(c.final_loss(), i, 0.0));
      r->set_steps(ValueOr<int64_t>(c.steps(), i, 0));
      r->set_wall_seconds(ValueOr(c.wall_seconds(), i, 0.0));
      r->set_device(c.devices(c.device(i)));
      *r->mutable_facts() = c.facts_table(c.facts(i));
    }
    if (next_failure < c.failure_row_size() && c.failure_row(next_failure) == i) {
      row->set_failure(c.failure(next_failure++));
    }
    row->set_worker_id(c.workers(c.worker(i)));
    *row->mutable_worker_version() = c.worker_versions(c.worker_version(i));
    row->set_attempt(c.attempt(i));
    row->set_lease_id(c.lease_id(i));
    row->set_finished_unix_ms(c.finished_unix_ms(i));
    row->set_cached_from_cell_id(c.cached_from_cell_id(i));
  }
  response->clear_columns();
  return absl::OkStatus();
}

}  // namespace ranksweep
