#include "proto/columns.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec/result_metrics.h"
#include "proto/convert.h"

namespace ranksweep {
namespace {

// Empties `list` when every value is `empty` (bit for bit: -0.0 and NaN stay).
template <typename T>
void ClearIfAll(google::protobuf::RepeatedField<T>* list, T empty) {
  for (const T& v : *list) {
    if (std::memcmp(&v, &empty, sizeof(T)) != 0) return;
  }
  list->Clear();
}


template <typename T>
T ValueOr(const google::protobuf::RepeatedField<T>& list, int i, T empty) {
  return list.empty() ? empty : list.Get(i);
}

// The field of v1::ResultColumns named as each built-in metric, in table
// order (common/spec/result_metrics.h): a row of the table needs no code
// here. Looked up once.
const google::protobuf::FieldDescriptor* BuiltInColumnField(const BuiltInMetric& m) {
  static const auto* kFields = [] {
    auto* fields = new std::vector<const google::protobuf::FieldDescriptor*>;
    for (const BuiltInMetric& metric : kBuiltInMetrics) {
      fields->push_back(v1::ResultColumns::descriptor()->FindFieldByName(metric.name));
      if (fields->back() == nullptr || !fields->back()->is_repeated()) {
        std::fprintf(stderr, "built-in metric %s: no repeated field of its name in "
                     "ranksweep.v1.ResultColumns\n", metric.name);
        std::abort();
      }
    }
    return fields;
  }();
  return (*kFields)[static_cast<size_t>(&m - kBuiltInMetrics)];
}

// The column of built-in metric `m` (int64_t for an integer, double for a
// real). Protobuf marks direct access to a repeated field by reflection
// deprecated in favour of a RepeatedFieldRef, whose every Add is a virtual
// call; the encoder takes each column once per reply and adds to it per row.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
// ResultColumns' Reflection, looked up once (GetReflection() checks the
// descriptors' set-up on every call; a reply's rows are read one by one).
const google::protobuf::Reflection* ColumnsReflection() {
  static const google::protobuf::Reflection* const kReflection =
      v1::ResultColumns::GetReflection();
  return kReflection;
}
template <typename T>
google::protobuf::RepeatedField<T>* MutableBuiltInColumn(v1::ResultColumns* c,
                                                         const BuiltInMetric& m) {
  return ColumnsReflection()->MutableRepeatedField<T>(c, BuiltInColumnField(m));
}
template <typename T>
const google::protobuf::RepeatedField<T>& BuiltInColumn(const v1::ResultColumns& c,
                                                        const BuiltInMetric& m) {
  return ColumnsReflection()->GetRepeatedField<T>(c, BuiltInColumnField(m));
}
#pragma GCC diagnostic pop

// The number of values in built-in metric `m`'s column.
int BuiltInColumnSize(const v1::ResultColumns& c, const BuiltInMetric& m) {
  return m.integer ? BuiltInColumn<int64_t>(c, m).size() : BuiltInColumn<double>(c, m).size();
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
      {c.recipe_size(), "recipe", true},
  };
  for (const Length& l : lengths) {
    if (l.size == n || (l.metric && l.size == 0)) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("columns.", l.field, ": ", l.size, " values for ", n, " rows"));
  }
  for (const BuiltInMetric& m : kBuiltInMetrics) {
    const int size = BuiltInColumnSize(c, m);
    if (size == n || size == 0) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("columns.", m.name, ": ", size, " values for ", n, " rows"));
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
  for (int k = 0; k < c.metrics_size(); ++k) {
    const v1::MetricColumn& m = c.metrics(k);
    if (m.values_size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("columns.metrics[", k, "] (", m.name(),
                                                     "): ", m.values_size(), " values for ", n,
                                                     " rows"));
    }
    for (int i = 0; i < m.missing_rows_size(); ++i) {
      const int row = m.missing_rows(i);
      if (row < 0 || row >= n || (i > 0 && row <= m.missing_rows(i - 1))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "columns.metrics[", k, "].missing_rows[", i, "]: ", row,
            " is not a row after the previous one (", n, " rows)"));
      }
    }
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

ResultColumnsEncoder::ResultColumnsEncoder(v1::ResultColumns* p, const std::string& sweep_id)
    : p_(p), workers_(p->mutable_workers()), devices_(p->mutable_devices()) {
  p_->set_sweep_id(sweep_id);
  for (int k = 0; k < kBuiltInMetricCount; ++k) {
    const BuiltInMetric& m = kBuiltInMetrics[k];
    if (m.integer) {
      integers_[k] = MutableBuiltInColumn<int64_t>(p_, m);
    } else {
      reals_[k] = MutableBuiltInColumn<double>(p_, m);
    }
    // The table of built-ins, for readers that make a column of each.
    v1::MetricInfo* info = p_->add_built_in_table();
    info->set_name(m.name);
    info->set_integer(m.integer);
    info->set_test_split(m.split == MetricSplit::kTest);
    info->set_field(m.field);
    info->set_empty(BuiltInDefault(m));
  }
  // One column per metric of the table, in its order, until Finish; the
  // table itself, for readers that make a column of each.
  for (const ResultMetric& m : ResultMetrics()) {
    p_->add_metrics()->set_name(m.name);
    v1::MetricInfo* info = p_->add_metric_table();
    info->set_name(m.name);
    info->set_integer(m.integer);
    info->set_label(m.label);
    info->set_test_split(m.split == MetricSplit::kTest);
  }
}

void ResultColumnsEncoder::Expect(int64_t at_most) {
  const int rows = static_cast<int>(at_most);
  p_->mutable_cell_id()->Reserve(rows);
  p_->mutable_head_index()->Reserve(rows);
  p_->mutable_rank()->Reserve(rows);
  p_->mutable_recipe()->Reserve(rows);
  p_->mutable_seed()->Reserve(rows);
  p_->mutable_state()->Reserve(rows);
  p_->mutable_attempt()->Reserve(rows);
  p_->mutable_lease_id()->Reserve(rows);
  p_->mutable_finished_unix_ms()->Reserve(rows);
  p_->mutable_cached_from_cell_id()->Reserve(rows);
  p_->mutable_worker()->Reserve(rows);
  p_->mutable_worker_version()->Reserve(rows);
  for (int k = 0; k < kBuiltInMetricCount; ++k) {
    if (integers_[k] != nullptr) integers_[k]->Reserve(rows);
    if (reals_[k] != nullptr) reals_[k]->Reserve(rows);
  }
  p_->mutable_device()->Reserve(rows);
  p_->mutable_facts()->Reserve(rows);
  expected_rows_ = rows;
}

int ResultColumnsEncoder::StringTable::IndexOf(std::string_view value) {
  // Most rows repeat the previous row's values: checked before the map.
  if (last >= 0 && values->Get(last) == value) return last;
  auto it = index.find(value);
  if (it != index.end()) return last = it->second;
  const int at = values->size();
  values->Add()->assign(value.data(), value.size());
  index.emplace(values->Get(at), at);
  return last = at;
}

int ResultColumnsEncoder::VersionIndex(const ResultColumnsRow& v) {
  if (last_version_ >= 0) {
    const v1::VersionManifest& last = p_->worker_versions(last_version_);
    if (last.build_id() == v.build_id && last.torch_version() == v.torch_version &&
        last.cuda_version() == v.cuda_version) {
      return last_version_;
    }
  }
  auto it = versions_.find(std::make_tuple(v.build_id, v.torch_version, v.cuda_version));
  if (it != versions_.end()) return last_version_ = it->second;
  const int index = p_->worker_versions_size();
  v1::VersionManifest* added = p_->add_worker_versions();
  added->set_build_id(std::string(v.build_id));
  added->set_torch_version(std::string(v.torch_version));
  added->set_cuda_version(std::string(v.cuda_version));
  versions_.emplace(std::make_tuple(std::string_view(added->build_id()),
                                    std::string_view(added->torch_version()),
                                    std::string_view(added->cuda_version())),
                    index);
  return last_version_ = index;
}

int ResultColumnsEncoder::FactsIndex(const DatasetFacts& f) {
  const auto key = std::make_tuple(f.train_sequences, f.test_sequences, f.distinct_queries,
                                   f.rank_lower_bound, f.rank_upper_bound);
  if (last_facts_ >= 0 && key == last_facts_key_) return last_facts_;
  auto [it, added] = facts_.emplace(key, p_->facts_table_size());
  if (added) FillProto(f, p_->add_facts_table());
  last_facts_key_ = key;
  return last_facts_ = it->second;
}

void ResultColumnsEncoder::Add(const ResultColumnsRow& row) {
  v1::ResultColumns& c = *p_;
  c.add_cell_id(row.cell_id);
  c.add_head_index(row.head_index);
  if (row.head_index >= 0) {
    while (c.heads_size() <= row.head_index) c.add_heads();
    if (c.heads(row.head_index).empty()) {
      c.mutable_heads(row.head_index)->assign(row.head.data(), row.head.size());
    }
  }
  c.add_rank(row.rank);
  c.add_recipe(row.recipe);
  c.add_seed(row.seed);
  c.add_state(row.state);
  c.add_attempt(row.attempt);
  c.add_lease_id(row.lease_id);
  c.add_finished_unix_ms(row.finished_unix_ms);
  c.add_cached_from_cell_id(row.cached_from_cell_id);
  c.add_worker(workers_.IndexOf(row.worker_id));
  c.add_worker_version(VersionIndex(row));
  if (!row.failure.empty()) {
    c.add_failure_row(rows_);
    c.add_failure(std::string(row.failure));
  }
  static const SeedResult kNone;
  const SeedResult& r = row.result != nullptr ? *row.result : kNone;
  for (int k = 0; k < kBuiltInMetricCount; ++k) {
    const double v = kBuiltInMetrics[k].get(r);
    if (integers_[k] != nullptr) {
      integers_[k]->Add(static_cast<int64_t>(v));
    } else {
      reals_[k]->Add(v);
    }
  }
  c.add_device(devices_.IndexOf(r.device));
  c.add_facts(FactsIndex(r.facts));
  // Most replies hold no optional metric at all: a column (ResultMetrics()
  // order) holds no values until its metric's first value, which fills in
  // the rows before it as missing, so the message is the same as if every
  // row had been written.
  const absl::Span<const ResultMetric> metrics = ResultMetrics();
  for (size_t k = 0; k < metrics.size(); ++k) {
    const std::optional<double> v =
        row.result != nullptr ? GetMetric(metrics[k], r) : std::nullopt;
    const bool started = !c.metrics(static_cast<int>(k)).values().empty();
    if (!started && !v.has_value()) continue;
    v1::MetricColumn* column = c.mutable_metrics(static_cast<int>(k));
    if (!started) {
      column->mutable_values()->Reserve(std::max(expected_rows_, rows_ + 1));
      column->mutable_values()->Resize(rows_, 0.0);
      column->mutable_missing_rows()->Reserve(rows_);
      for (int i = 0; i < rows_; ++i) column->add_missing_rows(i);
    }
    column->add_values(v.value_or(0.0));
    if (!v.has_value()) column->add_missing_rows(rows_);
  }
  ++rows_;
}


void ResultColumnsEncoder::Finish() {
  v1::ResultColumns& c = *p_;
  // A built-in column whose every row holds the empty result's value.
  for (int k = 0; k < kBuiltInMetricCount; ++k) {
    const double none = BuiltInDefault(kBuiltInMetrics[k]);
    if (integers_[k] != nullptr) {
      ClearIfAll(integers_[k], static_cast<int64_t>(none));
    } else {
      ClearIfAll(reals_[k], none);
    }
  }
  ClearIfAll(c.mutable_recipe(), int32_t{0});
  // A metric no row has is left out: its column never started.
  for (int k = c.metrics_size() - 1; k >= 0; --k) {
    if (c.metrics(k).values().empty()) c.mutable_metrics()->DeleteSubrange(k, 1);
  }
}

absl::Status CheckColumns(const v1::ResultColumns& c) { return Check(c); }

namespace {

// The optional metrics of row i into `r`: from the columns sent, for the
// metrics this build knows (a newer coordinator's others are left out);
// the ones not sent are missing.
void SetMetrics(const v1::ResultColumns& c, int i, v1::SeedResult* r) {
  for (const ResultMetric& metric : ResultMetrics()) {
    std::optional<double> value;
    for (const v1::MetricColumn& m : c.metrics()) {
      if (m.name() != metric.name) continue;
      if (!std::binary_search(m.missing_rows().begin(), m.missing_rows().end(), i)) {
        value = m.values(i);
      }
      break;
    }
    SetProtoMetric(metric, value, r);
  }
}

}  // namespace

int FailureIndex(const v1::ResultColumns& c, int row, int from) {
  while (from < c.failure_row_size() && c.failure_row(from) < row) ++from;
  return from;
}

void RowFromColumns(const v1::ResultColumns& c, int i, int failure, v1::ResultRow* row) {
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
    // An empty column holds the empty result's value on every row.
    for (const BuiltInMetric& m : kBuiltInMetrics) {
      const double none = BuiltInDefault(m);
      const double v = m.integer ? static_cast<double>(ValueOr(
                                       BuiltInColumn<int64_t>(c, m), i, static_cast<int64_t>(none)))
                                 : ValueOr(BuiltInColumn<double>(c, m), i, none);
      SetProtoBuiltIn(m, v, r);
    }
    r->set_device(c.devices(c.device(i)));
    *r->mutable_facts() = c.facts_table(c.facts(i));
    SetMetrics(c, i, r);
  } else {
    row->clear_result();
  }
  if (failure < c.failure_row_size() && c.failure_row(failure) == i) {
    row->set_failure(c.failure(failure));
  } else {
    row->clear_failure();
  }
  row->set_worker_id(c.workers(c.worker(i)));
  *row->mutable_worker_version() = c.worker_versions(c.worker_version(i));
  row->set_attempt(c.attempt(i));
  row->set_lease_id(c.lease_id(i));
  row->set_finished_unix_ms(c.finished_unix_ms(i));
  row->set_cached_from_cell_id(c.cached_from_cell_id(i));
}

absl::Status RowsFromColumns(v1::QueryResultsResponse* response) {
  if (!response->has_columns()) return absl::OkStatus();
  const v1::ResultColumns& c = response->columns();
  if (absl::Status s = Check(c); !s.ok()) return s;
  const int n = c.cell_id_size();
  auto* rows = response->mutable_rows();
  rows->Reserve(rows->size() + n);
  int failure = 0;
  for (int i = 0; i < n; ++i) {
    failure = FailureIndex(c, i, failure);
    RowFromColumns(c, i, failure, rows->Add());
  }
  response->clear_columns();
  return absl::OkStatus();
}

}  // namespace ranksweep
