#include "proto/convert.h"

#include <cstddef>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <variant>
#include <vector>

#include <google/protobuf/reflection.h>

#include "common/spec/spec_fields.h"

namespace ranksweep {
namespace {

// Proto enums put "unspecified" at 0 and the spec's values from 1 in the
// order of spec.h, so the mapping is an offset with 0 meaning the default.
template <typename E, typename P>
E EnumFromProto(P p, E fallback) {
  int v = static_cast<int>(p);
  return v <= 0 ? fallback : static_cast<E>(v - 1);
}
template <typename P, typename E>
P EnumToProto(E e) {
  return static_cast<P>(static_cast<int>(e) + 1);
}

}  // namespace

// ---------------------------------------------------------------- recipe structs
// DatasetSpec, HeadSpec, TrainSpec and PruneSpec field by field from their rows
// (common/spec/spec_fields.h): each row's proto field has its name. A field
// with presence that is unset, and an enum at 0 (unspecified), read as the
// struct's default; ToProto writes every field that would be sent (all but
// the zeros without presence).

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The message's reflection and the proto field of each row, in row order;
// found once per message type (GetReflection checks the descriptors' set-up
// on every call).
struct RowFields {
  const Reflection* reflection;
  std::vector<const FieldDescriptor*> fields;
};

template <typename S>
const RowFields& FieldsOf(absl::Span<const SpecField<S>> rows, const Message& message) {
  static const RowFields* fields = [&] {
    auto* out = new RowFields{message.GetReflection(), {}};
    std::vector<const FieldDescriptor*>* v = &out->fields;
    for (const SpecField<S>& row : rows) {
      const FieldDescriptor* f = message.GetDescriptor()->FindFieldByName(row.name);
      const FieldDescriptor::CppType want = std::visit(
          [](const auto& m) {
            using M = std::decay_t<decltype(m)>;
            if constexpr (std::is_same_v<M, EnumMember<S>>) return FieldDescriptor::CPPTYPE_ENUM;
            if constexpr (std::is_same_v<M, std::vector<int> S::*>) return FieldDescriptor::CPPTYPE_INT32;
            if constexpr (std::is_same_v<M, int S::*>) return FieldDescriptor::CPPTYPE_INT32;
            if constexpr (std::is_same_v<M, uint64_t S::*>) return FieldDescriptor::CPPTYPE_UINT64;
            if constexpr (std::is_same_v<M, double S::*>) return FieldDescriptor::CPPTYPE_DOUBLE;
            return FieldDescriptor::CPPTYPE_BOOL;
          },
          row.member);
      const bool list = std::holds_alternative<std::vector<int> S::*>(row.member);
      // A programming error, caught by proto_convert_test on every build.
      if (f == nullptr || f->cpp_type() != want || f->is_repeated() != list) {
        std::fprintf(stderr, "%s has no field %s of its spec row's type\n",
                     message.GetDescriptor()->full_name().c_str(), row.name);
        std::abort();
      }
      v->push_back(f);
    }
    return out;
  }();
  return *fields;
}

template <typename S>
void FieldsFromProto(absl::Span<const SpecField<S>> rows, const Message& p, S* s) {
  static const S def;
  const RowFields& of = FieldsOf(rows, p);
  const Reflection* r = of.reflection;
  const std::vector<const FieldDescriptor*>& fields = of.fields;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SpecField<S>& row = rows[i];
    const FieldDescriptor* f = fields[i];
    const bool unset = f->has_presence() && !f->is_repeated() && !r->HasField(p, f);
    std::visit(
        [&](const auto& m) {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, EnumMember<S>>) {
            const int v = r->GetEnumValue(p, f);
            m.set(v <= 0 ? m.get(def) : v - 1, s);
          } else if constexpr (std::is_same_v<M, std::vector<int> S::*>) {
            const auto list = r->GetRepeatedFieldRef<int32_t>(p, f);
            (s->*m).assign(list.begin(), list.end());
          } else if constexpr (std::is_same_v<M, int S::*>) {
            const int v = r->GetInt32(p, f);
            if (row.wire_minus_one_is_zero) {
              s->*m = v == 0 ? def.*m : v < 0 ? 0 : v;
            } else {
              s->*m = unset ? def.*m : v;
            }
          } else if constexpr (std::is_same_v<M, uint64_t S::*>) {
            s->*m = unset ? def.*m : r->GetUInt64(p, f);
          } else if constexpr (std::is_same_v<M, double S::*>) {
            s->*m = unset ? def.*m : r->GetDouble(p, f);
          } else {
            s->*m = unset ? def.*m : r->GetBool(p, f);
          }
        },
        row.member);
  }
}

template <typename S>
void FieldsToProto(absl::Span<const SpecField<S>> rows, const S& s, Message* p) {
  const RowFields& of = FieldsOf(rows, *p);
  const Reflection* r = of.reflection;
  const std::vector<const FieldDescriptor*>& fields = of.fields;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SpecField<S>& row = rows[i];
    const FieldDescriptor* f = fields[i];
    // The message is new: a zero without presence is already there (and
    // not sent), so it is not written, which halves the reflection calls of
    // a typical task (one per leased task on the coordinator).
    const bool presence = f->has_presence();
    std::visit(
        [&](const auto& m) {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, EnumMember<S>>) {
            r->SetEnumValue(p, f, m.get(s) + 1);
          } else if constexpr (std::is_same_v<M, std::vector<int> S::*>) {
            for (int w : s.*m) r->AddInt32(p, f, w);
          } else if constexpr (std::is_same_v<M, int S::*>) {
            const int v = row.wire_minus_one_is_zero && s.*m == 0 ? -1 : s.*m;
            if (v != 0 || presence) r->SetInt32(p, f, v);
          } else if constexpr (std::is_same_v<M, uint64_t S::*>) {
            if (s.*m != 0 || presence) r->SetUInt64(p, f, s.*m);
          } else if constexpr (std::is_same_v<M, double S::*>) {
            // A -0.0 is written: it is sent, as a generated setter sends it.
            if (s.*m != 0 || std::signbit(s.*m) || presence) r->SetDouble(p, f, s.*m);
          } else {
            if (s.*m || presence) r->SetBool(p, f, s.*m);
          }
        },
        row.member);
  }
}

}  // namespace

DatasetSpec FromProto(const v1::DatasetSpec& p) {
  DatasetSpec d;
  FieldsFromProto(DatasetFields(), p, &d);
  return d;
}
HeadSpec FromProto(const v1::HeadSpec& p) {
  HeadSpec h;
  FieldsFromProto(HeadFields(), p, &h);
  return h;
}
TrainSpec FromProto(const v1::TrainSpec& p) {
  TrainSpec t;
  FieldsFromProto(TrainFields(), p, &t);
  return t;
}
v1::DatasetSpec ToProto(const DatasetSpec& d) {
  v1::DatasetSpec p;
  FieldsToProto(DatasetFields(), d, &p);
  return p;
}
v1::HeadSpec ToProto(const HeadSpec& h) {
  v1::HeadSpec p;
  FieldsToProto(HeadFields(), h, &p);
  return p;
}
v1::TrainSpec ToProto(const TrainSpec& t) {
  v1::TrainSpec p;
  FieldsToProto(TrainFields(), t, &p);
  return p;
}

SweepSpec FromProto(const v1::SweepSpec& p) {
  SweepSpec s;
  s.name = p.name();
  s.dataset = FromProto(p.dataset());
  for (const auto& h : p.heads()) s.heads.push_back(FromProto(h));
  s.ranks.assign(p.ranks().begin(), p.ranks().end());
  s.seeds.assign(p.seeds().begin(), p.seeds().end());
  s.seed_count = p.seed_count();
  s.train = FromProto(p.train());
  s.priority = p.priority();
  s.mode = EnumFromProto(p.mode(), SweepMode::kGrid);
  s.reuse_results = !p.no_result_cache();
  for (const auto& a : p.axes()) {
    s.axes.push_back(SweepAxis{a.name(), {a.values().begin(), a.values().end()}});
  }
  if (p.has_prune()) FieldsFromProto(PruneFields(), p.prune(), &s.prune);
  return s;
}

v1::SweepSpec ToProto(const SweepSpec& s) {
  v1::SweepSpec p;
  p.set_name(s.name);
  *p.mutable_dataset() = ToProto(s.dataset);
  for (const auto& h : s.heads) *p.add_heads() = ToProto(h);
  for (int r : s.ranks) p.add_ranks(r);
  for (uint64_t seed : s.seeds) p.add_seeds(seed);
  p.set_seed_count(s.seed_count);
  *p.mutable_train() = ToProto(s.train);
  p.set_priority(s.priority);
  p.set_mode(EnumToProto<v1::SweepMode>(s.mode));
  p.set_no_result_cache(!s.reuse_results);
  for (const SweepAxis& a : s.axes) {
    v1::SweepAxis* axis = p.add_axes();
    axis->set_name(a.name);
    for (double v : a.values) axis->add_values(v);
  }
  if (s.prune.rule != PruneRule::kNone) FieldsToProto(PruneFields(), s.prune, p.mutable_prune());
  return p;
}

TaskSpec FromProto(const v1::TaskSpec& p) {
  TaskSpec t;
  t.dataset = FromProto(p.dataset());
  t.head = FromProto(p.head());
  t.rank = p.rank();
  t.train = FromProto(p.train());
  t.seeds.assign(p.seeds().begin(), p.seeds().end());
  return t;
}

v1::TaskSpec ToProto(const TaskSpec& t) {
  v1::TaskSpec p;
  *p.mutable_dataset() = ToProto(t.dataset);
  *p.mutable_head() = ToProto(t.head);
  p.set_rank(t.rank);
  *p.mutable_train() = ToProto(t.train);
  for (uint64_t seed : t.seeds) p.add_seeds(seed);
  return p;
}

VersionManifest FromProto(const v1::VersionManifest& p) {
  return VersionManifest{p.build_id(), p.torch_version(), p.cuda_version()};
}

void FillProto(const VersionManifest& v, v1::VersionManifest* p) {
  p->set_build_id(v.build_id);
  p->set_torch_version(v.torch_version);
  p->set_cuda_version(v.cuda_version);
}

v1::VersionManifest ToProto(const VersionManifest& v) {
  v1::VersionManifest p;
  FillProto(v, &p);
  return p;
}

WorkerRegistration FromProto(const v1::RegisterWorkerRequest& p) {
  WorkerRegistration r;
  r.worker_id = p.worker_id();
  r.hostname = p.hostname();
  r.device = p.device();
  r.device_name = p.device_name();
  r.memory_bytes = p.memory_bytes();
  r.slots = p.slots();
  r.version = FromProto(p.version());
  return r;
}

void FillProto(const WorkerRegistration& s, v1::RegisterWorkerRequest* p) {
  p->set_worker_id(s.worker_id);
  p->set_hostname(s.hostname);
  p->set_device(s.device);
  p->set_device_name(s.device_name);
  p->set_memory_bytes(s.memory_bytes);
  p->set_slots(s.slots);
  FillProto(s.version, p->mutable_version());
}

TaskWant FromProto(const v1::NextTasks& p) {
  return TaskWant{p.max_tasks(), p.max_seeds(), p.memory_bytes()};
}

void FillProto(const TaskWant& s, v1::NextTasks* p) {
  p->set_max_tasks(s.max_tasks);
  p->set_max_seeds(s.max_seeds);
  p->set_memory_bytes(s.memory_bytes);
}

TaskWant WantOf(const v1::AcquireTasksRequest& p) {
  return TaskWant{p.max_tasks(), p.max_seeds(), p.memory_bytes()};
}

void FillProto(const TaskWant& s, v1::AcquireTasksRequest* p) {
  p->set_max_tasks(s.max_tasks);
  p->set_max_seeds(s.max_seeds);
  p->set_memory_bytes(s.memory_bytes);
}

LeaseProgress FromProto(const v1::LeaseProgress& p) {
  return LeaseProgress{p.lease_id(), p.step(), p.train_error()};
}

void FillProto(const LeaseProgress& s, v1::LeaseProgress* p) {
  p->set_lease_id(s.lease_id);
  p->set_step(s.step);
  p->set_train_error(s.train_error);
}

HeartbeatOutcome FromProto(const v1::HeartbeatResponse& p) {
  HeartbeatOutcome out;
  out.cancelled_lease_ids.assign(p.cancelled_lease_ids().begin(), p.cancelled_lease_ids().end());
  out.lost_lease_ids.assign(p.lost_lease_ids().begin(), p.lost_lease_ids().end());
  out.pruned_lease_ids.assign(p.pruned_lease_ids().begin(), p.pruned_lease_ids().end());
  out.deadline_unix_ms = p.deadline_unix_ms();
  return out;
}

void FillProto(const HeartbeatOutcome& s, v1::HeartbeatResponse* p) {
  for (int64_t id : s.cancelled_lease_ids) p->add_cancelled_lease_ids(id);
  for (int64_t id : s.pruned_lease_ids) p->add_pruned_lease_ids(id);
  for (int64_t id : s.lost_lease_ids) p->add_lost_lease_ids(id);
  p->set_deadline_unix_ms(s.deadline_unix_ms);
}

LeasedTask FromProto(const v1::Task& p) {
  LeasedTask task;
  task.sweep_id = p.sweep_id();
  task.head_index = p.head_index();
  task.spec = FromProto(p.spec());
  task.rank = task.spec.rank;
  for (const v1::LeasedCell& c : p.cells()) {
    task.cells.push_back({c.cell_id(), c.seed(), c.lease_id(), c.attempt()});
  }
  task.deadline_unix_ms = p.deadline_unix_ms();
  task.rung_steps.assign(p.rung_steps().begin(), p.rung_steps().end());
  return task;
}

v1::Task ToProto(const LeasedTask& task) {
  v1::Task p;
  p.set_sweep_id(task.sweep_id);
  p.set_head_index(task.head_index);
  *p.mutable_spec() = ToProto(task.spec);
  for (const LeasedCell& cell : task.cells) {
    v1::LeasedCell* c = p.add_cells();
    c->set_cell_id(cell.cell_id);
    c->set_seed(cell.seed);
    c->set_lease_id(cell.lease_id);
    c->set_attempt(cell.attempt);
  }
  p.set_deadline_unix_ms(task.deadline_unix_ms);
  for (int64_t step : task.rung_steps) p.add_rung_steps(step);
  return p;
}

DatasetFacts FromProto(const v1::DatasetFacts& p) {
  DatasetFacts f;
  f.train_sequences = p.train_sequences();
  f.test_sequences = p.test_sequences();
  f.distinct_queries = p.distinct_queries();
  f.rank_lower_bound = p.rank_lower_bound();
  f.rank_upper_bound = p.rank_upper_bound();
  return f;
}

void FillProto(const DatasetFacts& f, v1::DatasetFacts* p) {
  p->set_train_sequences(f.train_sequences);
  p->set_test_sequences(f.test_sequences);
  p->set_distinct_queries(f.distinct_queries);
  p->set_rank_lower_bound(f.rank_lower_bound);
  p->set_rank_upper_bound(f.rank_upper_bound);
}

v1::DatasetFacts ToProto(const DatasetFacts& f) {
  v1::DatasetFacts p;
  FillProto(f, &p);
  return p;
}

namespace {

// The Reflection of the messages that hold the metrics, looked up once:
// GetReflection() runs protobuf's descriptor set-up check on every call, and
// these run for every row and metric (the CLI's CSV of 100,000 rows spent
// an eighth of its time in that check).
const google::protobuf::Reflection* SeedResultReflection() {
  static const google::protobuf::Reflection* const kReflection = v1::SeedResult::GetReflection();
  return kReflection;
}

// Where each built-in metric lives in the message that holds it (a
// v1::SplitMetrics for a split's, v1::SeedResult for the seed's): its
// field, that message's Reflection, and whether the field is an int64.
// Looked up once, in table order: this runs for every row and metric.
struct BuiltInProtoField {
  const google::protobuf::FieldDescriptor* field;
  const google::protobuf::Reflection* reflection;
  bool int64;
};
const std::vector<BuiltInProtoField>& BuiltInFields() {
  static const auto* kFields = [] {
    auto* fields = new std::vector<BuiltInProtoField>;
    for (const BuiltInMetric& m : kBuiltInMetrics) {
      const bool seed = m.split == MetricSplit::kNone;
      const google::protobuf::Descriptor* holder =
          seed ? v1::SeedResult::descriptor() : v1::SplitMetrics::descriptor();
      const google::protobuf::FieldDescriptor* f = holder->FindFieldByName(m.field);
      if (f == nullptr) {
        std::fprintf(stderr, "built-in metric %s: no field %s in %s\n", m.name, m.field,
                     holder->full_name().c_str());
        std::abort();
      }
      fields->push_back(
          {f, seed ? SeedResultReflection() : v1::SplitMetrics::GetReflection(),
           f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64});
    }
    return fields;
  }();
  return *kFields;
}
const BuiltInProtoField& BuiltInField(const BuiltInMetric& metric) {
  return BuiltInFields()[static_cast<size_t>(&metric - kBuiltInMetrics)];
}

const google::protobuf::Message& Holder(const BuiltInMetric& metric, const v1::SeedResult& p) {
  switch (metric.split) {
    case MetricSplit::kTrain: return p.train();
    case MetricSplit::kTest: return p.test();
    case MetricSplit::kNone: break;
  }
  return p;
}

google::protobuf::Message* MutableHolder(const BuiltInMetric& metric, v1::SeedResult* p) {
  switch (metric.split) {
    case MetricSplit::kTrain: return p->mutable_train();
    case MetricSplit::kTest: return p->mutable_test();
    case MetricSplit::kNone: break;
  }
  return p;
}

void SetBuiltInField(const BuiltInProtoField& f, double value, google::protobuf::Message* holder) {
  if (f.int64) {
    f.reflection->SetInt64(holder, f.field, static_cast<int64_t>(value));
  } else {
    f.reflection->SetDouble(holder, f.field, value);
  }
}

}  // namespace

double GetProtoBuiltIn(const BuiltInMetric& metric, const v1::SeedResult& p) {
  const BuiltInProtoField& f = BuiltInField(metric);
  const google::protobuf::Message& holder = Holder(metric, p);
  return f.int64 ? static_cast<double>(f.reflection->GetInt64(holder, f.field))
                 : f.reflection->GetDouble(holder, f.field);
}

void SetProtoBuiltIn(const BuiltInMetric& metric, double value, v1::SeedResult* p) {
  SetBuiltInField(BuiltInField(metric), value, MutableHolder(metric, p));
}

// The field of SeedResult that a metric older than the `metrics` map also
// travels in (first_exact_step), or nullptr. Looked up once per metric of the
// table: this runs for every row.
const google::protobuf::FieldDescriptor* LegacyMetricField(const ResultMetric& metric) {
  static const auto* kFields = [] {
    auto* fields = new std::vector<const google::protobuf::FieldDescriptor*>;
    for (const ResultMetric& m : kResultMetrics) {
      fields->push_back(v1::SeedResult::descriptor()->FindFieldByName(m.name));
    }
    return fields;
  }();
  const std::ptrdiff_t i = &metric - kResultMetrics;
  if (i >= 0 && i < kResultMetricCount) return (*kFields)[static_cast<size_t>(i)];
  return nullptr;
}

std::optional<double> GetProtoMetric(const ResultMetric& metric, const v1::SeedResult& p) {
  if (!p.metrics().empty()) {
    const auto it = p.metrics().find(metric.name);
    if (it != p.metrics().end()) return it->second;
  }
  // From a sender older than the map: the metric's own field, if it has one.
  const google::protobuf::FieldDescriptor* f = LegacyMetricField(metric);
  const google::protobuf::Reflection* refl = SeedResultReflection();
  if (f == nullptr || !refl->HasField(p, f)) return std::nullopt;
  return f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64
             ? static_cast<double>(refl->GetInt64(p, f))
             : refl->GetDouble(p, f);
}

void SetProtoMetric(const ResultMetric& metric, std::optional<double> value,
                    v1::SeedResult* p) {
  const google::protobuf::FieldDescriptor* f = LegacyMetricField(metric);
  const google::protobuf::Reflection* refl = SeedResultReflection();
  if (!value.has_value()) {
    // Checked first: this runs for every missing metric of every row, and
    // the map's erase builds and hashes a string even when it is empty.
    if (!p->metrics().empty()) p->mutable_metrics()->erase(metric.name);
    if (f != nullptr && refl->HasField(*p, f)) refl->ClearField(p, f);
    return;
  }
  const double v = metric.integer ? std::trunc(*value) : *value;
  (*p->mutable_metrics())[metric.name] = v;
  if (f == nullptr) return;
  if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64) {
    refl->SetInt64(p, f, static_cast<int64_t>(v));
  } else {
    refl->SetDouble(p, f, v);
  }
}

Curve FromProto(const v1::Curve& c) {
  Curve curve;
  curve.has_test = c.has_test();
  curve.points.resize(c.steps_size());
  // The lists' lengths are checked before (CheckWireSeedResult); a short
  // list reads as the defaults.
  auto at = [](const google::protobuf::RepeatedField<float>& v, int i, float fallback) {
    return i < v.size() ? v.Get(i) : fallback;
  };
  for (int i = 0; i < c.steps_size(); ++i) {
    CurvePoint& point = curve.points[i];
    point.step = c.steps(i);
    point.loss = at(c.loss(), i, 0);
    point.train_error = at(c.train_error(), i, 1);
    point.train_position_accuracy = at(c.train_position_accuracy(), i, 0);
    if (c.has_test()) {
      point.test_error = at(c.test_error(), i, 1);
      point.test_position_accuracy = at(c.test_position_accuracy(), i, 0);
    }
  }
  return curve;
}

SeedResult FromProto(const v1::SeedResult& p) {
  SeedResult r;
  r.seed = p.seed();
  for (const BuiltInMetric& m : kBuiltInMetrics) m.set(r, GetProtoBuiltIn(m, p));
  r.device = p.device();
  r.facts = FromProto(p.facts());
  for (const ResultMetric& m : ResultMetrics()) SetMetric(m, GetProtoMetric(m, p), &r);
  r.curve = FromProto(p.curve());
  return r;
}

void FillProto(const SeedResult& r, v1::SeedResult* p) {
  p->set_seed(r.seed);
  // SetProtoBuiltIn's work with the table of fields found once: this runs
  // for every row of a reply.
  const std::vector<BuiltInProtoField>& fields = BuiltInFields();
  for (int k = 0; k < kBuiltInMetricCount; ++k) {
    const BuiltInMetric& m = kBuiltInMetrics[k];
    SetBuiltInField(fields[static_cast<size_t>(k)], m.get(r), MutableHolder(m, p));
  }
  p->set_device(r.device);
  FillProto(r.facts, p->mutable_facts());
  for (const ResultMetric& m : ResultMetrics()) SetProtoMetric(m, GetMetric(m, r), p);
  if (r.curve.points.empty()) {
    p->clear_curve();
    return;
  }
  v1::Curve* c = p->mutable_curve();
  c->Clear();
  c->set_has_test(r.curve.has_test);
  const int n = static_cast<int>(r.curve.points.size());
  c->mutable_steps()->Reserve(n);
  c->mutable_loss()->Reserve(n);
  c->mutable_train_error()->Reserve(n);
  c->mutable_train_position_accuracy()->Reserve(n);
  for (const CurvePoint& point : r.curve.points) {
    c->add_steps(point.step);
    c->add_loss(point.loss);
    c->add_train_error(point.train_error);
    c->add_train_position_accuracy(point.train_position_accuracy);
    if (r.curve.has_test) {
      c->add_test_error(point.test_error);
      c->add_test_position_accuracy(point.test_position_accuracy);
    }
  }
}

v1::SeedResult ToProto(const SeedResult& r) {
  v1::SeedResult p;
  FillProto(r, &p);
  return p;
}

}  // namespace ranksweep
