#include "proto/columns.h"

#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace ranksweep {
namespace {

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
  // Metric lists may also be empty: every row holds the empty value.
  struct Length {
    int size;
    const char* field;
    bool metric;
  };
  const Length lengths[] = {
      {c.head_index_size(), "head_index", false},
      {c.rank_size(), "rank", false},
      {c.seed_size(), "seed", false},
      {c.state_size(), "state", false},
      {c.attempt_size(), "attempt", false},
      {c.lease_id_size(), "lease_id", false},
      {c.finished_unix_ms_size(), "finished_unix_ms", false},
      {c.cached_from_cell_id_size(), "cached_from_cell_id", false},
      {c.worker_size(), "worker", false},
      {c.worker_version_size(), "worker_version", false},
      {c.device_size(), "device", false},
      {c.facts_size(), "facts", false},
      {c.train_sequences_size(), "train_sequences", true},
      {c.train_position_accuracy_size(), "train_position_accuracy", true},
      {c.train_exact_accuracy_size(), "train_exact_accuracy", true},
      {c.train_error_size(), "train_error", true},
      {c.train_max_abs_error_size(), "train_max_abs_error", true},
      {c.test_sequences_size(), "test_sequences", true},
      {c.test_position_accuracy_size(), "test_position_accuracy", true},
      {c.test_exact_accuracy_size(), "test_exact_accuracy", true},
      {c.test_error_size(), "test_error", true},
      {c.test_max_abs_error_size(), "test_max_abs_error", true},
      {c.final_loss_size(), "final_loss", true},
      {c.steps_size(), "steps", true},
      {c.wall_seconds_size(), "wall_seconds", true},
      {c.recipe_size(), "recipe", true},
  };
  for (const Length& l : lengths) {
    if (l.size == n || (l.metric && l.size == 0)) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("columns.", l.field, ": ", l.size, " values for ", n, " rows"));
  }
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
    row->set_recipe(ValueOr(c.recipe(), i, 0));
    row->set_seed(c.seed(i));
    row->set_state(c.state(i));
    if (c.state(i) == v1::CELL_STATE_DONE || c.state(i) == v1::CELL_STATE_INVALID) {
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
