#include "client/format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace ranksweep::client {
namespace {

std::string Fixed(double v, int digits) { return absl::StrFormat("%.*f", digits, v); }

void AppendShortest(double v, std::string* out) {
  if (!std::isfinite(v)) return;  // missing: an empty cell
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
  (void)ec;  // 32 bytes hold any double
  out->append(buffer, static_cast<size_t>(end - buffer));
}

std::string ShortestCell(bool shown, double v) {
  std::string out;
  if (shown) AppendShortest(v, &out);
  return out;
}

std::string RankText(int32_t rank) { return rank > 0 ? absl::StrCat(rank) : "-"; }
// The CSV forms of a rank, a theory bound and an aggregate: empty when
// missing.
std::string RankCell(int32_t rank) { return rank > 0 ? absl::StrCat(rank) : ""; }
std::string BoundCell(int64_t bound) { return bound > 0 ? absl::StrCat(bound) : ""; }

// A row with metrics: done, or invalidated by a quarantine (its metrics as
// they were stored).
bool IsDone(const v1::ResultRow& row) {
  return (row.state() == v1::CELL_STATE_DONE || row.state() == v1::CELL_STATE_INVALID) &&
         row.has_result();
}

std::string TestErrorText(const v1::SeedResult& r) {
  return r.test().sequences() > 0 ? Fixed(r.test().error(), 4) : "-";
}

}  // namespace

namespace {

// The one convention of every output form for a value that does not exist:
// null in JSON, an empty cell in CSV, "-" in tables. A value is missing when
// it is an unset message (the result of a failed cell), a split without
// sequences (the test split of a dataset that has none: its error would read
// 1.0) or the rank of a head without one (softmax: 0 would break a log axis).
bool IsMissingField(const google::protobuf::Message& m,
                    const google::protobuf::FieldDescriptor* f) {
  using google::protobuf::FieldDescriptor;
  if (f->is_repeated()) return false;
  const auto* refl = m.GetReflection();
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    // An aggregate's presence means nothing (the group decides whether it
    // exists: GroupJson); any other unset message is missing.
    if (!refl->HasField(m, f)) return f->message_type()->name() != "Aggregate";
    const auto* split = dynamic_cast<const v1::SplitMetrics*>(&refl->GetMessage(m, f));
    return split != nullptr && split->sequences() == 0;
  }
  if (f->name() == "rank" && f->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
    const std::string& type = m.GetDescriptor()->name();
    return (type == "ResultRow" || type == "ResultGroup") && refl->GetInt32(m, f) == 0;
  }
  return false;
}

// An enum value by its short name, the name the tables and CSV print:
// CELL_STATE_DONE -> "DONE", HEAD_KIND_SOFTMAX -> "SOFTMAX". The prefix is
// the enum type's name in upper snake case, as the proto style guide has it.
std::string EnumShortName(const google::protobuf::EnumValueDescriptor* v) {
  std::string prefix;
  for (char c : v->type()->name()) {
    if (absl::ascii_isupper(static_cast<unsigned char>(c)) && !prefix.empty()) prefix += '_';
    prefix += absl::ascii_toupper(static_cast<unsigned char>(c));
  }
  prefix += '_';
  const std::string& name = v->name();
  return absl::StartsWith(name, prefix) && name.size() > prefix.size()
             ? name.substr(prefix.size())
             : name;
}

}  // namespace

// Proto → JSON by reflection rather than MessageToJsonString: the latter
// prints 64-bit integers as strings, and rows are meant for jq and
// nlohmann-style readers that expect numbers (lease ids, sequence counts).
// Proto field names, every field printed (missing ones as null), enums by
// short name.
nlohmann::ordered_json MessageJsonTree(const google::protobuf::Message& m) {
  using google::protobuf::FieldDescriptor;
  const auto* desc = m.GetDescriptor();
  const auto* refl = m.GetReflection();
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* f = desc->field(i);
    auto one = [&](int index) -> nlohmann::ordered_json {
      const bool rep = f->is_repeated();
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          return rep ? refl->GetRepeatedInt32(m, f, index) : refl->GetInt32(m, f);
        case FieldDescriptor::CPPTYPE_INT64:
          return rep ? refl->GetRepeatedInt64(m, f, index) : refl->GetInt64(m, f);
        case FieldDescriptor::CPPTYPE_UINT32:
          return rep ? refl->GetRepeatedUInt32(m, f, index) : refl->GetUInt32(m, f);
        case FieldDescriptor::CPPTYPE_UINT64:
          return rep ? refl->GetRepeatedUInt64(m, f, index) : refl->GetUInt64(m, f);
        case FieldDescriptor::CPPTYPE_DOUBLE:
          return rep ? refl->GetRepeatedDouble(m, f, index) : refl->GetDouble(m, f);
        case FieldDescriptor::CPPTYPE_FLOAT:
          return rep ? refl->GetRepeatedFloat(m, f, index) : refl->GetFloat(m, f);
        case FieldDescriptor::CPPTYPE_BOOL:
          return rep ? refl->GetRepeatedBool(m, f, index) : refl->GetBool(m, f);
        case FieldDescriptor::CPPTYPE_STRING:
          return rep ? refl->GetRepeatedString(m, f, index) : refl->GetString(m, f);
        case FieldDescriptor::CPPTYPE_ENUM: {
          const auto* v = rep ? refl->GetRepeatedEnum(m, f, index) : refl->GetEnum(m, f);
          return EnumShortName(v);
        }
        case FieldDescriptor::CPPTYPE_MESSAGE:
          return MessageJsonTree(rep ? refl->GetRepeatedMessage(m, f, index)
                                   : refl->GetMessage(m, f));
      }
      return nullptr;
    };
    if (f->is_repeated()) {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (int k = 0; k < refl->FieldSize(m, f); ++k) arr.push_back(one(k));
      out[f->name()] = std::move(arr);
    } else {
      out[f->name()] = IsMissingField(m, f) ? nlohmann::ordered_json() : one(0);
    }
  }
  return out;
}

namespace {

// A JSON string as nlohmann's dump() writes it (UTF-8 passed through; quote,
// backslash and control characters escaped, the latter as \u00xx). Runs of
// characters that need no escape are copied whole.
void AppendJsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  size_t run = 0;  // start of the characters not yet copied
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s, run, i - run);
    run = i + 1;
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default: absl::StrAppendFormat(out, "\\u%04x", c);
    }
  }
  out->append(s, run, s.size() - run);
  out->push_back('"');
}

// A double as nlohmann's dump() writes it: null for NaN and infinities,
// else the shortest digits that read back the same (std::to_chars), laid out
// as dump() lays them out: plain decimals for exponents -4..15, "1.0" for
// integral values, otherwise d.ddde+XX. No json value or string per number.
void AppendJsonDouble(double v, std::string* out) {
  if (!std::isfinite(v)) {
    *out += "null";
    return;
  }
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v,
                                       std::chars_format::scientific);
  (void)ec;  // 64 bytes hold any double
  // buffer: [-]d[.ddd]e(+|-)XX
  std::string_view text(buffer, static_cast<size_t>(end - buffer));
  const size_t e = text.find('e');
  std::string_view mantissa = text.substr(0, e);
  int exponent = 0;
  std::from_chars(text.data() + e + 1 + (text[e + 1] == '+' ? 1 : 0), text.data() + text.size(),
                  exponent);
  if (!mantissa.empty() && mantissa[0] == '-') {
    out->push_back('-');
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  const int k = static_cast<int>(digits.size());
  const int n = exponent + 1;  // digits before the decimal point
  if (k <= n && n <= 15) {
    *out += digits;
    out->append(static_cast<size_t>(n - k), '0');
    *out += ".0";
  } else if (0 < n && n <= 15) {
    out->append(digits, 0, static_cast<size_t>(n));
    out->push_back('.');
    out->append(digits, static_cast<size_t>(n));
  } else if (-4 < n && n <= 0) {
    *out += "0.";
    out->append(static_cast<size_t>(-n), '0');
    *out += digits;
  } else {
    out->push_back(digits[0]);
    if (k > 1) {
      out->push_back('.');
      out->append(digits, 1);
    }
    absl::StrAppendFormat(out, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  }
}

}  // namespace

void AppendMessageJson(const google::protobuf::Message& m, std::string* out) {
  using google::protobuf::FieldDescriptor;
  const auto* desc = m.GetDescriptor();
  const auto* refl = m.GetReflection();
  out->push_back('{');
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* f = desc->field(i);
    if (i > 0) out->push_back(',');
    AppendJsonString(f->name(), out);
    out->push_back(':');
    const bool rep = f->is_repeated();
    if (IsMissingField(m, f)) {
      *out += "null";
      continue;
    }
    auto one = [&](int index) {
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          absl::StrAppend(out, rep ? refl->GetRepeatedInt32(m, f, index) : refl->GetInt32(m, f));
          return;
        case FieldDescriptor::CPPTYPE_INT64:
          absl::StrAppend(out, rep ? refl->GetRepeatedInt64(m, f, index) : refl->GetInt64(m, f));
          return;
        case FieldDescriptor::CPPTYPE_UINT32:
          absl::StrAppend(out,
                          rep ? refl->GetRepeatedUInt32(m, f, index) : refl->GetUInt32(m, f));
          return;
        case FieldDescriptor::CPPTYPE_UINT64:
          absl::StrAppend(out,
                          rep ? refl->GetRepeatedUInt64(m, f, index) : refl->GetUInt64(m, f));
          return;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          AppendJsonDouble(rep ? refl->GetRepeatedDouble(m, f, index) : refl->GetDouble(m, f),
                           out);
          return;
        case FieldDescriptor::CPPTYPE_FLOAT:
          AppendJsonDouble(rep ? refl->GetRepeatedFloat(m, f, index) : refl->GetFloat(m, f),
                           out);
          return;
        case FieldDescriptor::CPPTYPE_BOOL:
          *out += (rep ? refl->GetRepeatedBool(m, f, index) : refl->GetBool(m, f)) ? "true"
                                                                                   : "false";
          return;
        case FieldDescriptor::CPPTYPE_STRING: {
          std::string scratch;
          AppendJsonString(rep ? refl->GetRepeatedStringReference(m, f, index, &scratch)
                               : refl->GetStringReference(m, f, &scratch),
                           out);
          return;
        }
        case FieldDescriptor::CPPTYPE_ENUM:
          AppendJsonString(
              EnumShortName(rep ? refl->GetRepeatedEnum(m, f, index) : refl->GetEnum(m, f)),
              out);
          return;
        case FieldDescriptor::CPPTYPE_MESSAGE:
          AppendMessageJson(rep ? refl->GetRepeatedMessage(m, f, index) : refl->GetMessage(m, f),
                            out);
          return;
      }
      *out += "null";
    };
    if (rep) {
      out->push_back('[');
      for (int k = 0; k < refl->FieldSize(m, f); ++k) {
        if (k > 0) out->push_back(',');
        one(k);
      }
      out->push_back(']');
    } else {
      one(0);
    }
  }
  out->push_back('}');
}

namespace {

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
const char* JsonArrayClose(bool empty) { return empty ? "]\n" : "\n]\n"; }

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

int ExitCodeForStatusCode(int code) {
  switch (static_cast<absl::StatusCode>(code)) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return kExitUsage;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnreachable;
    case absl::StatusCode::kNotFound:
      return kExitNotFound;
    default:
      return kExitServerError;
  }
}

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
                     v1::CELL_STATE_FAILED, v1::CELL_STATE_CANCELLED, v1::CELL_STATE_INVALID}) {
    if (CellStateName(state) == upper) return state;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--state: \"", s, "\" is not one of pending, leased, done, failed, cancelled, invalid"));
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

double EstimateEtaSeconds(const v1::SweepInfo& sweep) {
  const auto& c = sweep.counts();
  const int64_t remaining = c.pending() + c.leased();
  if (remaining == 0) return 0;
  if (sweep.mean_cell_seconds() <= 0) return -1;
  const int64_t parallel = std::max<int64_t>(1, c.leased());
  return sweep.mean_cell_seconds() * static_cast<double>(remaining) /
         static_cast<double>(parallel);
}

std::string ProgressLine(const v1::SweepInfo& sweep, int bar_width) {
  const auto& c = sweep.counts();
  const int64_t finished = c.done() + c.failed() + c.cancelled();
  int filled = 0;
  if (c.total() > 0) {
    filled = static_cast<int>(finished * bar_width / c.total());
  }
  filled = std::clamp(filled, 0, bar_width);
  std::string line = absl::StrCat("[", std::string(filled, '#'),
                                  std::string(bar_width - filled, '.'), "] ", c.done(), "/",
                                  c.total(), " done  ", c.leased(), " running  ", c.failed(),
                                  " failed");
  if (c.cancelled() > 0) absl::StrAppend(&line, "  ", c.cancelled(), " cancelled");
  if (sweep.state() == v1::SWEEP_STATE_RUNNING || sweep.state() == v1::SWEEP_STATE_UNSPECIFIED) {
    const double eta = EstimateEtaSeconds(sweep);
    absl::StrAppend(&line, "  ETA ", eta < 0 ? "?" : FormatDuration(eta));
  } else {
    absl::StrAppend(&line, "  ", SweepStateName(sweep.state()));
  }
  return line;
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

std::string SweepStatusText(const v1::SweepInfo& s, absl::TimeZone tz) {
  const auto& c = s.counts();
  std::string out;
  absl::StrAppend(&out, "sweep:      ", s.sweep_id(), "\n");
  absl::StrAppend(&out, "name:       ", s.name(), "\n");
  absl::StrAppend(&out, "state:      ", SweepStateName(s.state()), "\n");
  absl::StrAppend(&out, "priority:   ", s.priority(), "\n");
  absl::StrAppend(&out, "cells:      ", c.total(), " total, ", c.done(), " done, ", c.leased(),
                  " running, ", c.pending(), " pending, ", c.failed(), " failed, ",
                  c.cancelled(), " cancelled\n");
  if (s.spec().mode() == v1::SWEEP_MODE_SEARCH) {
    absl::StrAppend(&out, "search:     ", c.total(), " of ", s.grid_cells(),
                    " grid cells created (", s.grid_cells() - c.total(), " saved)\n");
  }
  if (s.cached_cells() > 0) {
    absl::StrAppend(&out, "cached:     ", s.cached_cells(),
                    " done cells served from the result cache\n");
  }
  absl::StrAppend(&out, "mean cell:  ",
                  s.mean_cell_seconds() > 0 ? absl::StrFormat("%.2fs", s.mean_cell_seconds())
                                            : std::string("-"),
                  "\n");
  if (s.state() == v1::SWEEP_STATE_RUNNING) {
    const double eta = EstimateEtaSeconds(s);
    absl::StrAppend(&out, "eta:        ", eta < 0 ? "?" : FormatDuration(eta), "\n");
  }
  absl::StrAppend(&out, "created:    ", FormatUnixMs(s.created_unix_ms(), tz), "\n");
  absl::StrAppend(&out, "finished:   ", FormatUnixMs(s.finished_unix_ms(), tz), "\n");
  if (s.recent_failures_size() > 0) {
    absl::StrAppend(&out, "recent failures:\n");
    for (const auto& f : s.recent_failures()) absl::StrAppend(&out, "  ", f, "\n");
  }
  return out;
}

Table ResultRowsTable(const std::vector<v1::ResultRow>& rows) {
  Table t;
  t.header = {"HEAD",      "RANK",    "SEED",  "STATE",   "TRAIN_ERR",
              "TEST_ERR",  "POS_ACC", "STEPS", "SECONDS", "WORKER"};
  t.right_align = {false, true, true, false, true, true, true, true, true, false};
  for (const auto& r : rows) {
    std::vector<std::string> cells = {r.head(), RankText(r.rank()), absl::StrCat(r.seed()),
                                      CellStateName(r.state())};
    if (IsDone(r)) {
      const auto& res = r.result();
      cells.insert(cells.end(),
                   {Fixed(res.train().error(), 4), TestErrorText(res),
                    Fixed(res.train().position_accuracy(), 4), absl::StrCat(res.steps()),
                    Fixed(res.wall_seconds(), 1)});
    } else {
      cells.insert(cells.end(), {"-", "-", "-", "-", "-"});
    }
    std::string worker = r.worker_id().empty() ? "-" : r.worker_id();
    if (r.cached_from_cell_id() != 0) {
      absl::StrAppend(&worker, " (cached from cell ", r.cached_from_cell_id(), ")");
    }
    cells.push_back(std::move(worker));
    t.rows.push_back(std::move(cells));
  }
  return t;
}

namespace {

constexpr char kResultRowsCsvHeader[] =
    "sweep_id,cell_id,head,head_index,rank,seed,state,train_error,train_exact_accuracy,"
    "train_position_accuracy,train_max_abs_error,test_sequences,test_error,"
    "test_position_accuracy,final_loss,steps,wall_seconds,device,failure,worker_id,build_id,"
    "torch_version,cuda_version,attempt,lease_id,finished_unix_ms,cached_from_cell_id\n";

// One CSV line of every field of `r`, in kResultRowsCsvHeader's order;
// metrics are empty unless the cell is done, the test ones unless it has a
// test split.
void AppendResultRowCsv(const v1::ResultRow& r, std::string* out) {
  const auto& res = r.result();
  const bool done = IsDone(r);
  const bool test = done && res.test().sequences() > 0;
  auto text = [out](const std::string& s) {
    AppendCsvCell(s, out);
    out->push_back(',');
  };
  auto number = [out](auto v) { absl::StrAppend(out, v, ","); };
  auto metric = [out](bool shown, double v) {
    if (shown) AppendShortest(v, out);
    out->push_back(',');
  };
  text(r.sweep_id());
  number(r.cell_id());
  text(r.head());
  number(r.head_index());
  text(RankCell(r.rank()));
  number(r.seed());
  text(CellStateName(r.state()));
  metric(done, res.train().error());
  metric(done, res.train().exact_accuracy());
  metric(done, res.train().position_accuracy());
  metric(done, res.train().max_abs_error());
  if (done) absl::StrAppend(out, res.test().sequences());
  out->push_back(',');
  metric(test, res.test().error());
  metric(test, res.test().position_accuracy());
  metric(done, res.final_loss());
  if (done) absl::StrAppend(out, res.steps());
  out->push_back(',');
  metric(done, res.wall_seconds());
  text(res.device());
  text(r.failure());
  text(r.worker_id());
  text(r.worker_version().build_id());
  text(r.worker_version().torch_version());
  text(r.worker_version().cuda_version());
  number(r.attempt());
  number(r.lease_id());
  number(r.finished_unix_ms());
  absl::StrAppend(out, r.cached_from_cell_id(), "\n");
}

}  // namespace

ResultRowsWriter::ResultRowsWriter(OutputFormat format) : json_(format == OutputFormat::kJson) {}

void ResultRowsWriter::Begin(std::string* out) const {
  *out += json_ ? "[" : kResultRowsCsvHeader;
}

void ResultRowsWriter::Add(const v1::ResultRow& row, std::string* out) {
  if (json_) {
    AppendJsonArrayItem(row, rows_ == 0, out);
  } else {
    AppendResultRowCsv(row, out);
  }
  ++rows_;
}

void ResultRowsWriter::End(std::string* out) const {
  if (json_) *out += JsonArrayClose(rows_ == 0);
}

std::string ResultRowsCsv(const std::vector<v1::ResultRow>& rows) {
  std::string out = kResultRowsCsvHeader;
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t before = out.size();
    AppendResultRowCsv(rows[i], &out);
    if (i == 0) ReserveLike(out.size() - before, rows.size(), &out);
  }
  return out;
}

std::string ResultRowsJson(const std::vector<v1::ResultRow>& rows) { return JsonArray(rows); }

Table ResultGroupsTable(const std::vector<v1::ResultGroup>& groups, bool has_test_split) {
  Table t;
  t.header = {"HEAD",          "RANK",          "N",        "TRAIN_ERR_MEAN", "TRAIN_ERR_STD",
              "TRAIN_ERR_MIN", "TRAIN_ERR_MAX", "TEST_ERR", "EXACT_SEEDS"};
  t.right_align = {false, true, true, true, true, true, true, true, true};
  for (const auto& g : groups) {
    const bool any = g.n() > 0;
    auto agg = [&](double v) { return any ? Fixed(v, 4) : std::string("-"); };
    const auto& te = g.test_error();
    const bool has_test = any && has_test_split;
    t.rows.push_back({g.head(), RankText(g.rank()), absl::StrCat(g.n(), "/", g.expected()),
                      agg(g.train_error().mean()), agg(g.train_error().std()),
                      agg(g.train_error().min()), agg(g.train_error().max()),
                      has_test ? Fixed(te.mean(), 4) : "-", absl::StrCat(g.exact_seeds())});
  }
  return t;
}

namespace {

std::string MissingNote(const v1::ResultGroup& g) {
  if (g.missing_seeds_size() == 0) return "complete";
  constexpr int kMaxListed = 8;
  std::vector<std::string> listed;
  for (int i = 0; i < g.missing_seeds_size() && i < kMaxListed; ++i) {
    listed.push_back(absl::StrCat(g.missing_seeds(i)));
  }
  std::string out = absl::StrCat(g.missing_seeds_size() == 1 ? "seed " : "seeds ",
                                 absl::StrJoin(listed, ", "));
  if (g.missing_seeds_size() > kMaxListed) {
    absl::StrAppend(&out, " and ", g.missing_seeds_size() - kMaxListed, " more");
  }
  return out + " missing";
}

std::string MeanCi(const v1::Aggregate& a, int64_t n) {
  if (n == 0) return "-";
  if (n < 2) return Fixed(a.mean(), 3);
  return absl::StrCat(Fixed(a.mean(), 3), " ± ", Fixed(a.ci95(), 3));
}

std::string TheoryNote(const v1::QueryResultsResponse& r) {
  if (!r.has_facts()) return "";
  const auto& f = r.facts();
  if (f.rank_lower_bound() == 0 && f.rank_upper_bound() == 0) {
    return " (theory: no bound for this dataset)";
  }
  return absl::StrCat(" (theory: lower bound ", f.rank_lower_bound(), ", upper bound ",
                      f.rank_upper_bound(), ")");
}

std::string TransitionLine(const char* prefix, bool defined, int32_t rank,
                           const std::string& reason, const std::string& theory) {
  if (defined) return absl::StrCat(prefix, "transition rank: ", rank, theory, "\n");
  return absl::StrCat(prefix, "transition rank: undefined (", reason, ")", theory, "\n");
}

}  // namespace

std::string SummaryText(const v1::QueryResultsResponse& response, bool has_test_split) {
  std::string out;
  const std::string theory = TheoryNote(response);
  bool first = true;
  for (const v1::HeadSummary& h : response.heads()) {
    if (!first) out += "\n";
    first = false;
    absl::StrAppend(&out, h.head(), "\n");
    Table t;
    t.header = {"RANK", "N", "ERROR (MEAN ± CI95)", "STD", "EXACT"};
    if (has_test_split) {
      t.header.push_back("TEST ERROR (MEAN ± CI95)");
      t.header.push_back("TEST EXACT");
    }
    t.header.push_back("COMPLETENESS");
    t.right_align = {true, true, true, true, true};
    if (has_test_split) {
      t.right_align.push_back(true);
      t.right_align.push_back(true);
    }
    for (const v1::ResultGroup& g : response.groups()) {
      if (g.head_index() != h.head_index()) continue;
      std::vector<std::string> row = {
          RankText(g.rank()), absl::StrCat(g.n(), "/", g.expected()),
          MeanCi(g.train_error(), g.n()), g.n() >= 2 ? Fixed(g.train_error().std(), 3) : "-",
          absl::StrCat(g.exact_seeds(), "/", g.n())};
      if (has_test_split) {
        row.push_back(MeanCi(g.test_error(), g.n()));
        row.push_back(absl::StrCat(g.test_exact_seeds(), "/", g.n()));
      }
      row.push_back(MissingNote(g));
      t.rows.push_back(std::move(row));
    }
    // Indent the table under its head.
    for (absl::string_view line : absl::StrSplit(RenderTable(t), '\n', absl::SkipEmpty())) {
      absl::StrAppend(&out, "  ", line, "\n");
    }
    if (!h.has_rank()) {
      absl::StrAppend(&out, "  ", h.reason(), "\n");
      if (has_test_split) absl::StrAppend(&out, "  test: ", h.test_reason(), "\n");
      continue;
    }
    out += TransitionLine("  ", h.transition_defined(), h.transition_rank(), h.reason(), theory);
    if (has_test_split) {
      out += TransitionLine("  test ", h.test_transition_defined(), h.test_transition_rank(),
                            h.test_reason(), theory);
    }
    if (!h.caveat().empty()) absl::StrAppend(&out, "  caveat: ", h.caveat(), "\n");
  }
  return out;
}

Table SummaryCsvTable(const v1::QueryResultsResponse& response) {
  Table t;
  t.header = {"head",           "head_index",       "rank",          "n",
              "expected",       "train_error_mean", "train_error_ci95", "train_error_std",
              "exact_seeds",    "test_error_mean",  "test_exact_seeds", "missing_seeds",
              "transition_rank", "transition_reason", "rank_lower_bound", "rank_upper_bound"};
  const auto& f = response.facts();
  for (const v1::ResultGroup& g : response.groups()) {
    const v1::HeadSummary* head = nullptr;
    for (const auto& h : response.heads()) {
      if (h.head_index() == g.head_index()) head = &h;
    }
    std::vector<std::string> missing;
    for (uint64_t seed : g.missing_seeds()) missing.push_back(absl::StrCat(seed));
    const bool defined = head != nullptr && head->transition_defined();
    const bool any = g.n() > 0;
    const bool test = any && head != nullptr && head->has_test_split();
    t.rows.push_back({g.head(), absl::StrCat(g.head_index()), RankCell(g.rank()),
                      absl::StrCat(g.n()), absl::StrCat(g.expected()),
                      ShortestCell(any, g.train_error().mean()),
                      ShortestCell(g.n() >= 2, g.train_error().ci95()),
                      ShortestCell(g.n() >= 2, g.train_error().std()),
                      absl::StrCat(g.exact_seeds()), ShortestCell(test, g.test_error().mean()),
                      test ? absl::StrCat(g.test_exact_seeds()) : "",
                      absl::StrJoin(missing, ";"),
                      defined ? absl::StrCat(head->transition_rank()) : "",
                      head != nullptr ? head->reason() : "",
                      BoundCell(f.rank_lower_bound()), BoundCell(f.rank_upper_bound())});
  }
  return t;
}

namespace {

// A group's aggregates, with the missing ones (no done seed; no test split)
// as null.
nlohmann::ordered_json GroupJson(const v1::ResultGroup& g, bool has_test_split) {
  nlohmann::ordered_json j = MessageJsonTree(g);
  if (g.n() == 0) {
    for (const char* a : {"train_error", "train_exact_accuracy", "train_position_accuracy"}) {
      j[a] = nullptr;
    }
  }
  if (g.n() == 0 || !has_test_split) {
    j["test_error"] = nullptr;
    j["test_exact_seeds"] = nullptr;
  }
  return j;
}

}  // namespace

std::string SummaryJson(const v1::QueryResultsResponse& response) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["facts"] =
      response.has_facts() ? MessageJsonTree(response.facts()) : nlohmann::ordered_json();
  // A bound of 0 is no bound for this dataset.
  for (const char* bound : {"rank_lower_bound", "rank_upper_bound"}) {
    if (out["facts"].is_object() && out["facts"][bound] == 0) out["facts"][bound] = nullptr;
  }
  nlohmann::ordered_json heads = nlohmann::ordered_json::array();
  for (const v1::HeadSummary& h : response.heads()) {
    nlohmann::ordered_json head = MessageJsonTree(h);
    // An undefined transition has no rank (it reads 0 on the wire).
    if (!h.transition_defined()) head["transition_rank"] = nullptr;
    if (!h.test_transition_defined()) head["test_transition_rank"] = nullptr;
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const v1::ResultGroup& g : response.groups()) {
      if (g.head_index() == h.head_index()) groups.push_back(GroupJson(g, h.has_test_split()));
    }
    head["groups"] = std::move(groups);
    heads.push_back(std::move(head));
  }
  out["heads"] = std::move(heads);
  return out.dump(2) + "\n";
}

Table ResultGroupsCsvTable(const std::vector<v1::ResultGroup>& groups, bool has_test_split) {
  Table t;
  t.header = {"head", "head_index", "rank", "n", "expected", "exact_seeds"};
  const char* kAggs[] = {"train_error", "test_error", "train_exact_accuracy",
                         "train_position_accuracy"};
  for (const char* a : kAggs) {
    for (const char* f : {"mean", "std", "min", "max", "ci95"}) {
      t.header.push_back(absl::StrCat(a, "_", f));
    }
  }
  for (const auto& g : groups) {
    std::vector<std::string> row = {g.head(),
                                    absl::StrCat(g.head_index()),
                                    RankCell(g.rank()),
                                    absl::StrCat(g.n()),
                                    absl::StrCat(g.expected()),
                                    absl::StrCat(g.exact_seeds())};
    for (const v1::Aggregate* a : {&g.train_error(), &g.test_error(), &g.train_exact_accuracy(),
                                   &g.train_position_accuracy()}) {
      const bool shown = g.n() > 0 && (a != &g.test_error() || has_test_split);
      for (double v : {a->mean(), a->std(), a->min(), a->max(), a->ci95()}) {
        row.push_back(ShortestCell(shown, v));
      }
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string ResultGroupsJson(const std::vector<v1::ResultGroup>& groups, bool has_test_split) {
  // One object per line, as JsonArray writes the rows.
  std::string out = "[";
  for (size_t i = 0; i < groups.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "\n  " : ",\n  ", GroupJson(groups[i], has_test_split).dump());
  }
  return out + JsonArrayClose(groups.empty());
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
                      w.alive() ? "yes" : "no", seen, version});
  }
  return t;
}

}  // namespace ranksweep::client
