#include "client/format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/result_metrics.h"
#include "client/format_internal.h"
#include "client/json_writer.h"
#include "nlohmann/json.hpp"
#include "proto/columns.h"
#include "proto/convert.h"

namespace ranksweep::client {

using format_internal::AddAxisKeys;
using format_internal::InsertAxisColumns;
using format_internal::JsonArrayClose;

namespace {

// A row with metrics: done, or invalidated by a quarantine (its metrics as
// they were stored).
bool IsDone(const v1::ResultRow& row) {
  return (row.state() == v1::CELL_STATE_DONE || row.state() == v1::CELL_STATE_INVALID) &&
         row.has_result();
}

std::string TestErrorText(const v1::SeedResult& r) {
  return r.test().sequences() > 0 ? FixedText(r.test().error(), 4) : "-";
}

// The text of an optional metric: the shortest round trip, an integer as
// one; empty when missing.
void AppendMetric(const ResultMetric& m, std::optional<double> v, std::string* out) {
  if (!v.has_value()) return;
  if (m.integer) {
    absl::StrAppend(out, static_cast<int64_t>(*v));
  } else {
    AppendShortestDouble(*v, out);
  }
}

// Sizes `out` for `count` items printed about as long as the first one was
// (`first` bytes), so that 100,000 rows are not grown, and copied, again and
// again. Capped, since a long first item (a failure message) would
// otherwise reserve far too much.
void ReserveLike(size_t first, size_t count, std::string* out) {
  constexpr size_t kMaxReserve = size_t{256} << 20;
  out->reserve(out->size() + std::min(kMaxReserve, first * count / 8 * 9));
}

// A JSON array of messages, one object per line, in pieces: "[", each item,
// then the close. JsonArray and ResultRowsWriter both write it so.
void AppendJsonArrayItem(const google::protobuf::Message& m, bool first, std::string* out) {
  *out += first ? "\n  " : ",\n  ";
  AppendMessageJson(m, out);
}

template <typename Message>
std::string JsonArray(const std::vector<Message>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    AppendJsonArrayItem(items[i], i == 0, &out);
    if (i == 0) ReserveLike(out.size(), items.size(), &out);
  }
  out += JsonArrayClose(items.empty());
  return out;
}

// RFC 4180: a cell holding a comma, quote or line break is quoted, with its
// quotes doubled.
void AppendCsvCell(std::string_view cell, std::string* out) {
  if (cell.find_first_of(",\"\n\r") == std::string::npos) {
    *out += cell;
    return;
  }
  out->push_back('"');
  for (char c : cell) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

}  // namespace

std::string FixedText(double v, int digits) { return absl::StrFormat("%.*f", digits, v); }

void AppendShortestDouble(double v, std::string* out) {
  if (!std::isfinite(v)) return;  // missing: an empty cell
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
  (void)ec;  // 32 bytes hold any double
  out->append(buffer, static_cast<size_t>(end - buffer));
}

std::string ShortestCell(bool shown, double v) {
  std::string out;
  if (shown) AppendShortestDouble(v, &out);
  return out;
}

std::string RankText(int32_t rank) { return rank > 0 ? absl::StrCat(rank) : "-"; }
std::string RankCell(int32_t rank) { return rank > 0 ? absl::StrCat(rank) : ""; }
std::string BoundCell(int64_t bound) { return bound > 0 ? absl::StrCat(bound) : ""; }

std::string RenderTable(const Table& table) {
  std::vector<size_t> width(table.header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  measure(table.header);
  for (const auto& row : table.rows) measure(row);
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      const size_t pad = width[i] - row[i].size();
      const bool right = i < table.right_align.size() && table.right_align[i];
      if (right) line.append(pad, ' ');
      line += row[i];
      if (!right) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  emit(table.header);
  for (const auto& row : table.rows) emit(row);
  return out;
}

std::string RenderCsv(const Table& table) {
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) out += ',';
      AppendCsvCell(row[i], &out);
    }
    out += '\n';
  };
  emit(table.header);
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const size_t before = out.size();
    emit(table.rows[r]);
    if (r == 0) ReserveLike(out.size() - before, table.rows.size(), &out);
  }
  return out;
}

absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& s) {
  if (s == "table") return OutputFormat::kTable;
  if (s == "csv") return OutputFormat::kCsv;
  if (s == "json") return OutputFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--format: \"", s, "\" is not one of table, csv, json"));
}

std::string SweepStateName(v1::SweepState state) {
  switch (state) {
    case v1::SWEEP_STATE_RUNNING: return "RUNNING";
    case v1::SWEEP_STATE_DONE: return "DONE";
    case v1::SWEEP_STATE_FAILED: return "FAILED";
    case v1::SWEEP_STATE_CANCELLED: return "CANCELLED";
    default: return "UNSPECIFIED";
  }
}

std::string CellStateName(v1::CellState state) {
  switch (state) {
    case v1::CELL_STATE_PENDING: return "PENDING";
    case v1::CELL_STATE_LEASED: return "LEASED";
    case v1::CELL_STATE_DONE: return "DONE";
    case v1::CELL_STATE_FAILED: return "FAILED";
    case v1::CELL_STATE_CANCELLED: return "CANCELLED";
    case v1::CELL_STATE_INVALID: return "INVALID";
    case v1::CELL_STATE_PRUNED: return "PRUNED";
    default: return "UNSPECIFIED";
  }
}

absl::StatusOr<v1::SweepState> ParseSweepState(const std::string& s) {
  const std::string upper = absl::AsciiStrToUpper(s);
  for (auto state : {v1::SWEEP_STATE_RUNNING, v1::SWEEP_STATE_DONE, v1::SWEEP_STATE_FAILED,
                     v1::SWEEP_STATE_CANCELLED}) {
    if (SweepStateName(state) == upper) return state;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--state: \"", s, "\" is not one of running, done, failed, cancelled"));
}

absl::StatusOr<v1::CellState> ParseCellState(const std::string& s) {
  const std::string upper = absl::AsciiStrToUpper(s);
  for (auto state : {v1::CELL_STATE_PENDING, v1::CELL_STATE_LEASED, v1::CELL_STATE_DONE,
                     v1::CELL_STATE_FAILED, v1::CELL_STATE_CANCELLED, v1::CELL_STATE_INVALID,
                     v1::CELL_STATE_PRUNED}) {
    if (CellStateName(state) == upper) return state;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--state: \"", s,
      "\" is not one of pending, leased, done, failed, cancelled, invalid, pruned"));
}

std::string FormatUnixMs(int64_t unix_ms, absl::TimeZone tz) {
  if (unix_ms == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(unix_ms), tz);
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, (s % 86400) / 3600);
}

Table SweepsTable(const std::vector<v1::SweepInfo>& sweeps, absl::TimeZone tz) {
  Table t;
  t.header = {"ID", "NAME", "STATE", "DONE/TOTAL", "FAILED", "CREATED"};
  t.right_align = {false, false, false, true, true, false};
  for (const auto& s : sweeps) {
    t.rows.push_back({s.sweep_id(), s.name(), SweepStateName(s.state()),
                      absl::StrCat(s.counts().done(), "/", s.counts().total()),
                      absl::StrCat(s.counts().failed()), FormatUnixMs(s.created_unix_ms(), tz)});
  }
  return t;
}

RecipeAxes RecipeAxes::Of(const SweepSpec& spec) {
  RecipeAxes axes;
  for (const SweepAxis& a : spec.axes) axes.names.push_back(a.name);
  if (axes.empty()) return axes;
  const int64_t recipes = RecipeCount(spec);
  axes.values.reserve(static_cast<size_t>(recipes));
  for (int64_t k = 0; k < recipes; ++k) {
    axes.values.push_back(RecipeValues(spec, static_cast<int>(k)));
  }
  return axes;
}

double RecipeAxes::Value(int recipe, size_t axis) const {
  if (recipe < 0 || static_cast<size_t>(recipe) >= values.size()) return std::nan("");
  return values[static_cast<size_t>(recipe)][axis];
}

std::string RecipeAxes::Text(int recipe, size_t axis) const {
  if (recipe < 0 || static_cast<size_t>(recipe) >= values.size()) return "?";
  return FormatAxisValue(names[axis], Value(recipe, axis));
}

namespace format_internal {

const char* JsonArrayClose(bool empty) { return empty ? "]\n" : "\n]\n"; }

// The axes' values of `recipe` as keys of a JSON object.
void AddAxisKeys(const RecipeAxes& axes, int recipe, nlohmann::ordered_json* j) {
  for (size_t i = 0; i < axes.names.size(); ++i) {
    const double v = axes.Value(recipe, i);
    if (std::isnan(v)) {
      (*j)[axes.names[i]] = nullptr;
    } else if (v == std::floor(v) && std::abs(v) < 1e15 &&
               FormatAxisValue(axes.names[i], v).find_first_of(".e") == std::string::npos) {
      (*j)[axes.names[i]] = static_cast<int64_t>(v);
    } else {
      (*j)[axes.names[i]] = v;
    }
  }
}

}  // namespace format_internal

Table ResultRowsTable(const std::vector<v1::ResultRow>& rows, const RecipeAxes& axes) {
  Table t;
  t.header = {"HEAD", "RANK", "SEED", "STATE", "TRAIN_ERR", "TEST_ERR", "POS_ACC", "STEPS"};
  t.right_align = {false, true, true, false, true, true, true, true};
  // The optional metrics after STEPS, "-" when missing.
  for (const ResultMetric& m : kResultMetrics) {
    t.header.push_back(m.table_header);
    t.right_align.push_back(true);
  }
  t.header.insert(t.header.end(), {"SECONDS", "WORKER"});
  t.right_align.insert(t.right_align.end(), {true, false});
  for (const auto& r : rows) {
    std::vector<std::string> cells = {r.head(), RankText(r.rank()), absl::StrCat(r.seed()),
                                      CellStateName(r.state())};
    if (IsDone(r)) {
      const auto& res = r.result();
      cells.insert(cells.end(),
                   {FixedText(res.train().error(), 4), TestErrorText(res),
                    FixedText(res.train().position_accuracy(), 4), absl::StrCat(res.steps())});
      for (const ResultMetric& m : kResultMetrics) {
        std::string text;
        AppendMetric(m, GetProtoMetric(m, res), &text);
        cells.push_back(text.empty() ? "-" : text);
      }
      cells.push_back(FixedText(res.wall_seconds(), 1));
    } else {
      cells.insert(cells.end(), 5 + kResultMetricCount, "-");
    }
    std::string worker = r.worker_id().empty() ? "-" : r.worker_id();
    if (r.cached_from_cell_id() != 0) {
      absl::StrAppend(&worker, " (cached from cell ", r.cached_from_cell_id(), ")");
    }
    cells.push_back(std::move(worker));
    t.rows.push_back(std::move(cells));
  }
  InsertAxisColumns(axes, 2, rows, true, &t);
  return t;
}

namespace {

// The built-in metrics (common/spec/result_metrics.h) in table order after
// the cell's identity; the optional metrics last, by name.
const std::string& ResultRowsCsvHeader() {
  static const std::string* header = [] {
    auto* h = new std::string("sweep_id,cell_id,head,head_index,rank,seed,state");
    for (const BuiltInMetric& m : kBuiltInMetrics) absl::StrAppend(h, ",", m.name);
    absl::StrAppend(h, ",device,failure,worker_id,build_id,torch_version,cuda_version,attempt,"
                       "lease_id,finished_unix_ms,cached_from_cell_id");
    for (const ResultMetric& m : kResultMetrics) absl::StrAppend(h, ",", m.name);
    *h += "\n";
    return h;
  }();
  return *header;
}


// One CSV line of every field of `r`, in ResultRowsCsvHeader's order;
// metrics are empty unless the cell is done, the test split's (but its
// sequence count) unless it has a test split.
void AppendResultRowCsv(const v1::ResultRow& r, std::string* out) {
  const auto& res = r.result();
  const bool done = IsDone(r);
  const bool test = done && res.test().sequences() > 0;
  auto text = [out](const std::string& s) {
    AppendCsvCell(s, out);
    out->push_back(',');
  };
  auto number = [out](auto v) { absl::StrAppend(out, v, ","); };
  text(r.sweep_id());
  number(r.cell_id());
  text(r.head());
  number(r.head_index());
  text(RankCell(r.rank()));
  number(r.seed());
  text(CellStateName(r.state()));
  for (const BuiltInMetric& m : kBuiltInMetrics) {
    const bool measured = m.split == MetricSplit::kTest && std::string_view(m.field) != "sequences"
                              ? test
                              : done;
    if (measured) {
      const double v = GetProtoBuiltIn(m, res);
      if (m.integer) {
        absl::StrAppend(out, static_cast<int64_t>(v));
      } else {
        AppendShortestDouble(v, out);
      }
    }
    out->push_back(',');
  }
  text(res.device());
  text(r.failure());
  text(r.worker_id());
  text(r.worker_version().build_id());
  text(r.worker_version().torch_version());
  text(r.worker_version().cuda_version());
  number(r.attempt());
  number(r.lease_id());
  number(r.finished_unix_ms());
  // 0 is "not cached": an empty cell, as JSON's null (json_writer.cc).
  if (r.cached_from_cell_id() != 0) absl::StrAppend(out, r.cached_from_cell_id());
  for (const ResultMetric& m : kResultMetrics) {
    out->push_back(',');
    if (done) AppendMetric(m, GetProtoMetric(m, res), out);
  }
  out->push_back('\n');
}

}  // namespace

ResultRowsWriter::ResultRowsWriter(OutputFormat format, RecipeAxes axes)
    : json_(format == OutputFormat::kJson), axes_(std::move(axes)) {}

void ResultRowsWriter::Begin(std::string* out) const {
  if (json_) {
    *out += "[";
    return;
  }
  *out += ResultRowsCsvHeader();
  if (axes_.empty()) return;
  out->pop_back();  // the header's newline
  *out += ",recipe";
  for (const std::string& name : axes_.names) absl::StrAppend(out, ",", name);
  *out += "\n";
}

void ResultRowsWriter::Add(const v1::ResultRow& row, std::string* out) {
  if (json_ && axes_.empty()) {
    AppendJsonArrayItem(row, rows_ == 0, out);
  } else if (json_) {
    nlohmann::ordered_json j = MessageJsonTree(row);
    AddAxisKeys(axes_, row.recipe(), &j);
    absl::StrAppend(out, rows_ == 0 ? "\n  " : ",\n  ", j.dump());
  } else {
    AppendResultRowCsv(row, out);
    if (!axes_.empty()) {
      out->pop_back();  // the line's newline
      absl::StrAppend(out, ",", row.recipe());
      for (size_t i = 0; i < axes_.names.size(); ++i) {
        absl::StrAppend(out, ",", axes_.Text(row.recipe(), i));
      }
      *out += "\n";
    }
  }
  ++rows_;
}

void ResultRowsWriter::AddColumns(const v1::ResultColumns& columns, std::string* out) {
  int failure = 0;
  for (int i = 0; i < columns.cell_id_size(); ++i) {
    failure = FailureIndex(columns, i, failure);
    RowFromColumns(columns, i, failure, &row_);
    Add(row_, out);
  }
}

void ResultRowsWriter::End(std::string* out) const {
  if (json_) *out += JsonArrayClose(rows_ == 0);
}

std::string ResultRowsCsv(const std::vector<v1::ResultRow>& rows, const RecipeAxes& axes) {
  if (!axes.empty()) {
    ResultRowsWriter writer(OutputFormat::kCsv, axes);
    std::string out;
    writer.Begin(&out);
    for (const v1::ResultRow& row : rows) writer.Add(row, &out);
    return out;
  }
  std::string out = ResultRowsCsvHeader();
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t before = out.size();
    AppendResultRowCsv(rows[i], &out);
    if (i == 0) ReserveLike(out.size() - before, rows.size(), &out);
  }
  return out;
}

std::string ResultRowsJson(const std::vector<v1::ResultRow>& rows, const RecipeAxes& axes) {
  if (axes.empty()) return JsonArray(rows);
  ResultRowsWriter writer(OutputFormat::kJson, axes);
  std::string out;
  writer.Begin(&out);
  for (const v1::ResultRow& row : rows) writer.Add(row, &out);
  writer.End(&out);
  return out;
}

Table WorkersTable(const std::vector<v1::WorkerInfo>& workers, absl::Time now) {
  Table t;
  t.header = {"ID",     "HOST",      "DEVICE", "SLOTS",    "LEASED",
              "COMPLETED", "ALIVE", "LAST_SEEN", "VERSION"};
  t.right_align = {false, false, false, true, true, true, false, true, false};
  for (const auto& w : workers) {
    std::string device = w.device();
    if (!w.device_name().empty() && w.device_name() != w.device()) {
      absl::StrAppend(&device, " (", w.device_name(), ")");
    }
    std::string seen = "-";
    if (w.last_seen_unix_ms() > 0) {
      seen = absl::StrCat(
          FormatDuration(absl::ToDoubleSeconds(now - absl::FromUnixMillis(w.last_seen_unix_ms()))),
          " ago");
    }
    std::string version = w.version().build_id();
    if (!w.version().torch_version().empty()) {
      absl::StrAppend(&version, " torch ", w.version().torch_version());
    }
    if (!w.version().cuda_version().empty()) {
      absl::StrAppend(&version, " cuda ", w.version().cuda_version());
    }
    t.rows.push_back({w.worker_id(), w.hostname(), device, absl::StrCat(w.slots()),
                      absl::StrCat(w.leased_cells()), absl::StrCat(w.completed_cells()),
                      w.quarantined_unix_ms() != 0  ? "quarantined"
                      : !w.token_held_by().empty() ? "held (token)"
                      : w.alive()                  ? "yes"
                                                   : "no",
                      seen, version});
  }
  return t;
}

}  // namespace ranksweep::client
