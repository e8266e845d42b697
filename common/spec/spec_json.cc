#include "common/spec/spec_json.h"

#include <limits>
#include <set>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/spec/dataset_kinds.h"
#include "common/spec/result_metrics.h"
#include "common/spec/result_validation.h"  // Clip: quoted input is cut
#include "common/spec/spec_fields.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace ranksweep {
namespace {

using Json = nlohmann::json;

absl::Status NumberTypeError(const std::string& field, const char* want, const Json& got) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be ", want, ", got ", got.dump()));
}

// Reads one JSON number into T, rejecting non-integers for integral T and
// values that do not fit rather than wrapping them silently.
template <typename T>
absl::Status ReadNumber(const Json& v, const std::string& field, T* out) {
  if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) return NumberTypeError(field, "an integer", v);
    if constexpr (std::is_unsigned_v<T>) {
      if (!v.is_number_unsigned()) return NumberTypeError(field, "a nonnegative integer", v);
    } else {
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        return NumberTypeError(field, "an integer in range", v);
      }
      int64_t x = v.get<int64_t>();
      if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          x > static_cast<int64_t>(std::numeric_limits<T>::max())) {
        return NumberTypeError(field, "an integer in range", v);
      }
    }
  } else {
    if (!v.is_number()) return NumberTypeError(field, "a number", v);
  }
  *out = v.get<T>();
  return absl::OkStatus();
}

// Reads the fields of one JSON object into a struct, remembering which keys
// it consumed so that leftover (unknown) keys can be rejected by name.
class ObjectReader {
 public:
  ObjectReader(const Json& j, std::string path) : j_(j), path_(std::move(path)) {}

  absl::Status CheckObject() const {
    if (!j_.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(), " must be a JSON object, got ", j_.type_name()));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Number(const char* key, T* out) {
    const Json* v = Take(key);
    if (v == nullptr) return absl::OkStatus();
    return ReadNumber(*v, Field(key), out);
  }

  // Absent or null: nullopt.
  template <typename T>
  absl::Status OptionalNumber(const char* key, std::optional<T>* out) {
    const Json* v = Take(key);
    if (v == nullptr || v->is_null()) {
      out->reset();
      return absl::OkStatus();
    }
    T value{};
    RETURN_IF_ERROR(ReadNumber(*v, Field(key), &value));
    *out = value;
    return absl::OkStatus();
  }

  absl::Status Bool(const char* key, bool* out) {
    const Json* v = Take(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_boolean()) return TypeError(key, "true or false", *v);
    *out = v->get<bool>();
    return absl::OkStatus();
  }

  absl::Status String(const char* key, std::string* out) {
    const Json* v = Take(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_string()) return TypeError(key, "a string", *v);
    *out = v->get<std::string>();
    return absl::OkStatus();
  }

  template <typename E>
  absl::Status Enum(const char* key, E* out,
                    absl::StatusOr<E> (*parse)(const std::string&, const std::string&)) {
    std::string s;
    bool present = j_.contains(key);
    RETURN_IF_ERROR(String(key, &s));
    if (!present) return absl::OkStatus();
    ASSIGN_OR_RETURN(*out, parse(s, Field(key)));
    return absl::OkStatus();
  }

  // An enum row of spec_fields.h, by name.
  template <typename S>
  absl::Status EnumField(const char* key, const EnumMember<S>& e, S* out) {
    std::string s;
    bool present = j_.contains(key);
    RETURN_IF_ERROR(String(key, &s));
    if (!present) return absl::OkStatus();
    ASSIGN_OR_RETURN(const int v, e.parse(s, Field(key)));
    e.set(v, out);
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status NumberList(const char* key, std::vector<T>* out) {
    const Json* v = Take(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_array()) return TypeError(key, "an array of integers", *v);
    out->clear();
    for (size_t i = 0; i < v->size(); ++i) {
      T x{};
      RETURN_IF_ERROR(ReadNumber((*v)[i], absl::StrCat(Field(key), "[", i, "]"), &x));
      out->push_back(x);
    }
    return absl::OkStatus();
  }

  // Returns the sub-object for `key`, or nullptr when absent.
  const Json* Child(const char* key) { return Take(key); }

  absl::Status Finish() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!taken_.count(it.key())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "unknown field \"", Clip(Field(it.key().c_str())), "\""));
      }
    }
    return absl::OkStatus();
  }

  std::string Field(const char* key) const {
    return path_.empty() ? key : absl::StrCat(path_, ".", key);
  }

 private:
  const Json* Take(const char* key) {
    taken_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::string Where() const { return path_.empty() ? "the document" : path_; }
  absl::Status TypeError(const char* key, const char* want, const Json& got) const {
    return absl::InvalidArgumentError(
        absl::StrCat(Field(key), " must be ", want, ", got ", got.dump()));
  }

  const Json& j_;
  std::string path_;
  std::set<std::string> taken_;
};

absl::StatusOr<Json> ParseText(const std::string& text) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // e.byte is 1-based; turn it into line:column.
    size_t line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    // Keep nlohmann's explanation, without its own prefix.
    std::string what = e.what();
    size_t cut = what.find("syntax error");
    if (cut != std::string::npos) what = what.substr(cut);
    return absl::InvalidArgumentError(
        absl::StrCat("JSON syntax error at line ", line, ", column ", col, ": ", what));
  } catch (const Json::exception& e) {
    // Anything else nlohmann rejects while parsing (a number too large for
    // a double, for example) is bad input too, not a crash.
    return absl::InvalidArgumentError(absl::StrCat("JSON error: ", e.what()));
  }
}

// ---------------------------------------------------------------- to JSON

// The recipe structs: their rows of spec_fields.h.

template <typename S>
bool IsDefault(const SpecField<S>& f, const S& s) {
  static const S def;
  return std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, EnumMember<S>>) {
          return m.get(s) == m.get(def);
        } else {
          return s.*m == def.*m;
        }
      },
      f.member);
}

template <typename S>
bool KindHas(const SpecField<S>& f, const S& s) {
  if constexpr (std::is_same_v<S, DatasetSpec>) {
    return DatasetKindHasField(s.kind, f.name);
  } else {
    return true;
  }
}

template <typename S>
bool Writes(const SpecField<S>& f, const S& s) {
  switch (f.json) {
    case JsonWrite::kAlways: return true;
    case JsonWrite::kUnlessDefault: return !IsDefault(f, s);
    case JsonWrite::kForItsKinds: return KindHas(f, s);
    case JsonWrite::kForItsKindsUnlessDefault: return KindHas(f, s) && !IsDefault(f, s);
  }
  return true;
}

template <typename S>
Json FieldsToJ(absl::Span<const SpecField<S>> rows, const S& s) {
  Json j = Json::object();
  for (const SpecField<S>& f : rows) {
    if (!Writes(f, s)) continue;
    std::visit(
        [&](const auto& m) {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, EnumMember<S>>) {
            const int v = m.get(s);
            j[f.name] = v >= 0 && v < static_cast<int>(m.names.size()) ? m.names[v] : "?";
          } else {
            j[f.name] = s.*m;
          }
        },
        f.member);
  }
  return j;
}

Json ToJ(const DatasetSpec& d) { return FieldsToJ(DatasetFields(), d); }
Json ToJ(const HeadSpec& h) { return FieldsToJ(HeadFields(), h); }
Json ToJ(const TrainSpec& t) { return FieldsToJ(TrainFields(), t); }

Json ToJ(const DatasetFacts& f) {
  return {{"train_sequences", f.train_sequences},
          {"test_sequences", f.test_sequences},
          {"distinct_queries", f.distinct_queries},
          {"rank_lower_bound", f.rank_lower_bound},
          {"rank_upper_bound", f.rank_upper_bound}};
}

Json ToJ(const SplitMetrics& m) {
  return {{"sequences", m.sequences},
          {"position_accuracy", m.position_accuracy},
          {"exact_accuracy", m.exact_accuracy},
          {"error", m.error},
          {"max_abs_error", m.max_abs_error}};
}

Json ToJ(const SeedResult& r) {
  Json j = {{"seed", r.seed},           {"train", ToJ(r.train)},
            {"test", ToJ(r.test)},      {"final_loss", r.final_loss},
            {"steps", r.steps},         {"wall_seconds", r.wall_seconds},
            {"device", r.device},       {"facts", ToJ(r.facts)}};
  // The optional metrics when present (a missing one is left out).
  for (const ResultMetric& m : ResultMetrics()) {
    const std::optional<double> v = GetMetric(m, r);
    if (!v.has_value()) continue;
    if (m.integer) {
      j[m.name] = static_cast<int64_t>(*v);
    } else {
      j[m.name] = *v;
    }
  }
  // The learning curve when there is one: a row per evaluation, [step,
  // loss, train_error, train_position_accuracy] and, with a test split,
  // test_error and test_position_accuracy.
  if (!r.curve.points.empty()) {
    Json points = Json::array();
    for (const CurvePoint& p : r.curve.points) {
      Json row = {p.step, p.loss, p.train_error, p.train_position_accuracy};
      if (r.curve.has_test) {
        row.push_back(p.test_error);
        row.push_back(p.test_position_accuracy);
      }
      points.push_back(std::move(row));
    }
    j["curve"] = {{"has_test", r.curve.has_test}, {"points", std::move(points)}};
  }
  return j;
}

std::string Dump(const Json& j, int indent) { return j.dump(indent); }

// ---------------------------------------------------------------- from JSON

template <typename S>
absl::Status FieldsFromJ(absl::Span<const SpecField<S>> rows, const Json& j,
                         const std::string& path, S* s) {
  ObjectReader r(j, path);
  RETURN_IF_ERROR(r.CheckObject());
  for (const SpecField<S>& f : rows) {
    RETURN_IF_ERROR(std::visit(
        [&](const auto& m) -> absl::Status {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, EnumMember<S>>) {
            return r.EnumField(f.name, m, s);
          } else if constexpr (std::is_same_v<M, bool S::*>) {
            return r.Bool(f.name, &(s->*m));
          } else if constexpr (std::is_same_v<M, std::vector<int> S::*>) {
            return r.NumberList(f.name, &(s->*m));
          } else {
            return r.Number(f.name, &(s->*m));
          }
        },
        f.member));
  }
  return r.Finish();
}

absl::Status FromJ(const Json& j, const std::string& path, DatasetSpec* d) {
  return FieldsFromJ(DatasetFields(), j, path, d);
}
absl::Status FromJ(const Json& j, const std::string& path, HeadSpec* h) {
  return FieldsFromJ(HeadFields(), j, path, h);
}
absl::Status FromJ(const Json& j, const std::string& path, TrainSpec* t) {
  return FieldsFromJ(TrainFields(), j, path, t);
}

absl::Status FromJ(const Json& j, const std::string& path, DatasetFacts* f) {
  ObjectReader r(j, path);
  RETURN_IF_ERROR(r.CheckObject());
  RETURN_IF_ERROR(r.Number("train_sequences", &f->train_sequences));
  RETURN_IF_ERROR(r.Number("test_sequences", &f->test_sequences));
  RETURN_IF_ERROR(r.Number("distinct_queries", &f->distinct_queries));
  RETURN_IF_ERROR(r.Number("rank_lower_bound", &f->rank_lower_bound));
  RETURN_IF_ERROR(r.Number("rank_upper_bound", &f->rank_upper_bound));
  return r.Finish();
}

absl::Status FromJ(const Json& j, const std::string& path, SplitMetrics* m) {
  ObjectReader r(j, path);
  RETURN_IF_ERROR(r.CheckObject());
  RETURN_IF_ERROR(r.Number("sequences", &m->sequences));
  RETURN_IF_ERROR(r.Number("position_accuracy", &m->position_accuracy));
  RETURN_IF_ERROR(r.Number("exact_accuracy", &m->exact_accuracy));
  RETURN_IF_ERROR(r.Number("error", &m->error));
  RETURN_IF_ERROR(r.Number("max_abs_error", &m->max_abs_error));
  return r.Finish();
}

absl::Status FromJ(const Json& j, const std::string& path, Curve* c) {
  ObjectReader r(j, path);
  RETURN_IF_ERROR(r.CheckObject());
  RETURN_IF_ERROR(r.Bool("has_test", &c->has_test));
  const Json* points = r.Child("points");
  c->points.clear();
  if (points != nullptr) {
    const size_t width = c->has_test ? 6 : 4;
    if (!points->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(r.Field("points"), " must be an array"));
    }
    for (size_t i = 0; i < points->size(); ++i) {
      const Json& row = (*points)[i];
      const std::string where = absl::StrCat(r.Field("points"), "[", i, "]");
      if (!row.is_array() || row.size() != width) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " must be an array of ", width, " numbers"));
      }
      double v[6] = {0, 0, 1, 0, 1, 0};
      for (size_t k = 0; k < width; ++k) {
        RETURN_IF_ERROR(ReadNumber(row[k], absl::StrCat(where, "[", k, "]"), &v[k]));
      }
      c->points.push_back({static_cast<int64_t>(v[0]), static_cast<float>(v[1]),
                           static_cast<float>(v[2]), static_cast<float>(v[3]),
                           static_cast<float>(v[4]), static_cast<float>(v[5])});
    }
  }
  return r.Finish();
}

// `prune` is a rule's name ("halving") or an object {rule, eta,
// min_steps, margin}.
absl::Status FromJ(const Json& j, const std::string& path, PruneSpec* p) {
  if (j.is_string()) {
    ASSIGN_OR_RETURN(p->rule, ParsePruneRule(j.get<std::string>(), path));
    return absl::OkStatus();
  }
  ObjectReader r(j, path);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " must be \"none\", \"halving\" or an object {rule, eta, min_steps, margin}, got ",
        j.type_name()));
  }
  return FieldsFromJ(PruneFields(), j, path, p);
}

template <typename T>
absl::Status Sub(ObjectReader& r, const char* key, T* out) {
  const Json* c = r.Child(key);
  if (c == nullptr) return absl::OkStatus();
  return FromJ(*c, r.Field(key), out);
}

absl::Status FromJ(const Json& j, const std::string& path, SeedResult* s) {
  ObjectReader r(j, path);
  RETURN_IF_ERROR(r.CheckObject());
  RETURN_IF_ERROR(r.Number("seed", &s->seed));
  RETURN_IF_ERROR(Sub(r, "train", &s->train));
  RETURN_IF_ERROR(Sub(r, "test", &s->test));
  RETURN_IF_ERROR(r.Number("final_loss", &s->final_loss));
  RETURN_IF_ERROR(r.Number("steps", &s->steps));
  RETURN_IF_ERROR(r.Number("wall_seconds", &s->wall_seconds));
  RETURN_IF_ERROR(r.String("device", &s->device));
  RETURN_IF_ERROR(Sub(r, "facts", &s->facts));
  for (const ResultMetric& m : ResultMetrics()) {
    if (m.integer) {
      std::optional<int64_t> v;
      RETURN_IF_ERROR(r.OptionalNumber(m.name, &v));
      SetMetric(m, v.has_value() ? std::optional<double>(static_cast<double>(*v)) : std::nullopt,
                s);
    } else {
      std::optional<double> v;
      RETURN_IF_ERROR(r.OptionalNumber(m.name, &v));
      SetMetric(m, v, s);
    }
  }
  RETURN_IF_ERROR(Sub(r, "curve", &s->curve));
  return r.Finish();
}

// The object ("dataset" or "train") and key of an axis' field.
std::pair<std::string, std::string> SplitField(const std::string& field) {
  const size_t dot = field.find('.');
  return {field.substr(0, dot), field.substr(dot + 1)};
}

// A list where a value stood in the document's "dataset" or "train" makes
// that field an axis (spec.h): its values are taken into `axes`, in
// AxisNames() order, and the list is replaced by its first value so that
// the field reads as usual.
absl::Status TakeAxes(Json* doc, std::vector<SweepAxis>* axes) {
  for (const std::string& name : AxisNames()) {
    const std::string field = AxisField(name);
    const auto [object, key] = SplitField(field);
    auto obj = doc->find(object);
    if (obj == doc->end() || !obj->is_object()) continue;
    auto it = obj->find(key);
    if (it == obj->end() || !it->is_array()) continue;
    if (it->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " must be a number or a non-empty list of numbers, got []"));
    }
    SweepAxis axis;
    axis.name = name;
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string at = absl::StrCat(field, "[", i, "]");
      double v = 0;
      if ((*it)[i].is_string()) {
        ASSIGN_OR_RETURN(v, ParseAxisValue(name, (*it)[i].get<std::string>(), at));
      } else if ((*it)[i].is_number_integer()) {
        int64_t x = 0;
        RETURN_IF_ERROR(ReadNumber((*it)[i], at, &x));
        v = static_cast<double>(x);
      } else {
        RETURN_IF_ERROR(ReadNumber((*it)[i], at, &v));
      }
      axis.values.push_back(v);
    }
    Json first = (*it)[0];
    *it = first;
    axes->push_back(std::move(axis));
  }
  return absl::OkStatus();
}

}  // namespace

std::string SweepSpecToJson(const SweepSpec& spec, int indent) {
  Json heads = Json::array();
  for (const HeadSpec& h : spec.heads) heads.push_back(ToJ(h));
  Json j = {{"name", spec.name},         {"dataset", ToJ(spec.dataset)},
            {"heads", heads},            {"ranks", spec.ranks},
            {"seeds", spec.seeds},       {"seed_count", spec.seed_count},
            {"train", ToJ(spec.train)},  {"priority", spec.priority},
            {"mode", Name(spec.mode)},   {"reuse_results", spec.reuse_results}};
  // An axis is its list of values where the field's value stands.
  for (const SweepAxis& axis : spec.axes) {
    const auto [object, key] = SplitField(AxisField(axis.name));
    Json& slot = j[object][key];
    const bool integer = AxisIsInteger(axis.name);
    Json values = Json::array();
    for (double v : axis.values) {
      if (AxisIsNamed(axis.name)) {
        values.push_back(FormatAxisValue(axis.name, v));
      } else if (integer) {
        values.push_back(static_cast<int64_t>(v));
      } else {
        values.push_back(v);
      }
    }
    slot = std::move(values);
  }
  // Written only when on, so a spec without pruning reads as it always has.
  if (spec.prune.rule != PruneRule::kNone) j["prune"] = FieldsToJ(PruneFields(), spec.prune);
  return Dump(j, indent);
}

absl::StatusOr<SweepSpec> SweepSpecFromJson(const std::string& text) {
  ASSIGN_OR_RETURN(Json j, ParseText(text));
  SweepSpec s;
  if (j.is_object()) RETURN_IF_ERROR(TakeAxes(&j, &s.axes));
  ObjectReader r(j, "");
  RETURN_IF_ERROR(r.CheckObject());
  RETURN_IF_ERROR(r.String("name", &s.name));
  RETURN_IF_ERROR(Sub(r, "dataset", &s.dataset));
  if (const Json* heads = r.Child("heads")) {
    if (!heads->is_array()) {
      return absl::InvalidArgumentError("heads must be an array of head objects");
    }
    for (size_t i = 0; i < heads->size(); ++i) {
      HeadSpec h;
      RETURN_IF_ERROR(FromJ((*heads)[i], absl::StrCat("heads[", i, "]"), &h));
      s.heads.push_back(std::move(h));
    }
  }
  RETURN_IF_ERROR(r.NumberList("ranks", &s.ranks));
  RETURN_IF_ERROR(r.NumberList("seeds", &s.seeds));
  RETURN_IF_ERROR(r.Number("seed_count", &s.seed_count));
  RETURN_IF_ERROR(Sub(r, "train", &s.train));
  RETURN_IF_ERROR(r.Number("priority", &s.priority));
  RETURN_IF_ERROR(r.Enum("mode", &s.mode, &ParseSweepMode));
  RETURN_IF_ERROR(r.Bool("reuse_results", &s.reuse_results));
  RETURN_IF_ERROR(Sub(r, "prune", &s.prune));
  RETURN_IF_ERROR(r.Finish());
  return s;
}

std::string TaskSpecToJson(const TaskSpec& spec, int indent) {
  Json j = {{"dataset", ToJ(spec.dataset)},
            {"head", ToJ(spec.head)},
            {"rank", spec.rank},
            {"train", ToJ(spec.train)},
            {"seeds", spec.seeds}};
  return Dump(j, indent);
}

absl::StatusOr<TaskSpec> TaskSpecFromJson(const std::string& text) {
  ASSIGN_OR_RETURN(Json j, ParseText(text));
  TaskSpec t;
  ObjectReader r(j, "");
  RETURN_IF_ERROR(r.CheckObject());
  RETURN_IF_ERROR(Sub(r, "dataset", &t.dataset));
  RETURN_IF_ERROR(Sub(r, "head", &t.head));
  RETURN_IF_ERROR(r.Number("rank", &t.rank));
  RETURN_IF_ERROR(Sub(r, "train", &t.train));
  RETURN_IF_ERROR(r.NumberList("seeds", &t.seeds));
  RETURN_IF_ERROR(r.Finish());
  return t;
}

std::string SeedResultToJson(const SeedResult& result, int indent) {
  return Dump(ToJ(result), indent);
}

absl::StatusOr<SeedResult> SeedResultFromJson(const std::string& text) {
  ASSIGN_OR_RETURN(Json j, ParseText(text));
  SeedResult s;
  RETURN_IF_ERROR(FromJ(j, "", &s));
  return s;
}

std::string SeedResultsToJson(const std::vector<SeedResult>& results, int indent) {
  Json a = Json::array();
  for (const SeedResult& r : results) a.push_back(ToJ(r));
  return Dump(a, indent);
}

}  // namespace ranksweep
