#include "client/json_writer.h"

#include <charconv>
#include <cmath>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/result_metrics.h"
#include "google/protobuf/descriptor.h"
#include "proto/convert.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep::client {
namespace {

// Scalars without presence on the wire whose zero value means "none"
// (ranksweep.proto says so beside each): a bound a dataset does not have,
// the failure of a cell that did not fail, the source of a result that was
// not served from the cache. JSON prints them as null, as it prints every
// other missing value, never as 0 or "".
struct ZeroIsNone {
  const char* message;
  const char* field;
};
constexpr ZeroIsNone kZeroIsNone[] = {
    {"DatasetFacts", "rank_lower_bound"},
    {"DatasetFacts", "rank_upper_bound"},
    {"ResultRow", "failure"},
    {"ResultRow", "cached_from_cell_id"},
};

bool IsZero(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor* f) {
  using google::protobuf::FieldDescriptor;
  const auto* refl = m.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return refl->GetInt32(m, f) == 0;
    case FieldDescriptor::CPPTYPE_INT64:
      return refl->GetInt64(m, f) == 0;
    case FieldDescriptor::CPPTYPE_STRING:
      return refl->GetString(m, f).empty();
    default:
      return false;
  }
}

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
  // An `optional` scalar that is unset.
  if (f->has_presence() && !refl->HasField(m, f)) return true;
  for (const ZeroIsNone& none : kZeroIsNone) {
    if (f->name() == none.field && m.GetDescriptor()->name() == none.message) return IsZero(m, f);
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

namespace {

// A field sent only when asked for (SeedResult.curve: QueryResultsRequest.
// curves) is left out while unset, so that rows read without it print as
// they always did rather than with a null for it.
bool LeftOutWhenUnset(const google::protobuf::Message& m,
                      const google::protobuf::FieldDescriptor* f) {
  return f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE &&
         !f->is_repeated() && f->full_name() == "ranksweep.v1.SeedResult.curve" &&
         !m.GetReflection()->HasField(m, f);
}

// SeedResult's optional metrics print as keys of their own, one per metric
// of the table (common/spec/result_metrics.h), right after `facts`: null
// when missing, a whole number for an integer metric. The `metrics` map and
// the fields that also carry one (first_exact_step) are not printed as such.
bool IsSeedResult(const google::protobuf::Message& m) {
  return m.GetDescriptor() == v1::SeedResult::descriptor();
}

bool PrintedAsMetric(const google::protobuf::Message& m,
                     const google::protobuf::FieldDescriptor* f) {
  return IsSeedResult(m) && (f->name() == "metrics" || FindResultMetric(f->name()) != nullptr);
}

bool MetricsFollow(const google::protobuf::Message& m,
                   const google::protobuf::FieldDescriptor* f) {
  return IsSeedResult(m) && f->name() == "facts";
}

template <typename Emit>
void ForEachMetric(const google::protobuf::Message& m, Emit emit) {
  const auto& r = static_cast<const v1::SeedResult&>(m);
  for (const ResultMetric& metric : ResultMetrics()) emit(metric, GetProtoMetric(metric, r));
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
    if (LeftOutWhenUnset(m, f) || PrintedAsMetric(m, f)) continue;
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
    if (MetricsFollow(m, f)) {
      ForEachMetric(m, [&](const ResultMetric& metric, std::optional<double> v) {
        out[metric.name] = !v.has_value()  ? nlohmann::ordered_json()
                           : metric.integer ? nlohmann::ordered_json(static_cast<int64_t>(*v))
                                            : nlohmann::ordered_json(*v);
      });
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
  bool first = true;
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* f = desc->field(i);
    if (LeftOutWhenUnset(m, f) || PrintedAsMetric(m, f)) continue;
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(f->name(), out);
    out->push_back(':');
    const bool rep = f->is_repeated();
    // SeedResult's metrics follow `facts`, whether or not it is missing.
    auto metrics_after = [&] {
      if (!MetricsFollow(m, f)) return;
      ForEachMetric(m, [out](const ResultMetric& metric, std::optional<double> v) {
        out->push_back(',');
        AppendJsonString(metric.name, out);
        out->push_back(':');
        if (!v.has_value()) {
          *out += "null";
        } else if (metric.integer) {
          absl::StrAppend(out, static_cast<int64_t>(*v));
        } else {
          AppendJsonDouble(*v, out);
        }
      });
    };
    if (IsMissingField(m, f)) {
      *out += "null";
      metrics_after();
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
    metrics_after();
  }
  out->push_back('}');
}

}  // namespace ranksweep::client
