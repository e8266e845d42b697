#include "common/spec/spec_fields.h"

#include <cmath>
#include <cstring>

namespace ranksweep {
namespace {

// An enum member `M` of S, named by Name() and parsed by `P`. Its names are
// Name(0), Name(1), ... up to the first value Name does not know ("?").
template <typename S, typename E, E S::*M,
          absl::StatusOr<E> (*P)(const std::string&, const std::string&)>
EnumMember<S> Enum() {
  EnumMember<S> e;
  e.get = [](const S& s) { return static_cast<int>(s.*M); };
  e.set = [](int value, S* s) { s->*M = static_cast<E>(value); };
  e.parse = [](const std::string& text, const std::string& field) -> absl::StatusOr<int> {
    absl::StatusOr<E> v = P(text, field);
    if (!v.ok()) return v.status();
    return static_cast<int>(*v);
  };
  for (int i = 0; std::strcmp(Name(static_cast<E>(i)), "?") != 0; ++i) {
    e.names.push_back(Name(static_cast<E>(i)));
  }
  return e;
}

using D = DatasetSpec;
using H = HeadSpec;
using T = TrainSpec;
using J = JsonWrite;

// Built on first use (the enums' names come from the kind registries).
// In the order of the structs; a JSON document's first bad field is
// reported in this order.
const std::vector<SpecField<D>>& DatasetRows() {
  static const auto* rows = new std::vector<SpecField<D>>{
    {"kind", Enum<D, DatasetKind, &D::kind, &ParseDatasetKind>()},
    {"m", &D::m},
    {"seq_len", &D::seq_len},
    {"final_query_only", &D::final_query_only},
    {"data_seed", &D::data_seed},
    // The fields of some kinds only (dataset_kinds.h): a spec's JSON names
    // only its own kind's, so that it reads as it did before the other
    // kinds' fields existed and its task key stays.
    {"code_weight", &D::code_weight, J::kForItsKinds},
    {"max_overlap", &D::max_overlap, J::kForItsKinds},
    {"num_queries", &D::num_queries, J::kForItsKinds},
    {"weight", &D::weight, J::kForItsKinds},
    {"bernoulli_p", &D::bernoulli_p, J::kForItsKinds},
    {"pool_size", &D::pool_size, J::kForItsKinds},
    {"test_pool_share", &D::test_pool_share, J::kForItsKinds},
    {"train_size", &D::train_size, J::kForItsKinds},
    {"test_size", &D::test_size, J::kForItsKinds},
    {"hard_share", &D::hard_share, J::kForItsKinds},
    {"split", Enum<D, PoolSplit, &D::split, &ParsePoolSplit>(), J::kForItsKindsUnlessDefault},
  };
  return *rows;
}

const std::vector<SpecField<H>>& HeadRows() {
  static const auto* rows = new std::vector<SpecField<H>>{
    {"kind", Enum<H, HeadKind, &H::kind, &ParseHeadKind>()},
    {"feature_map", Enum<H, FeatureMap, &H::feature_map, &ParseFeatureMap>()},
    {"hidden", &H::hidden},
    {"num_heads", &H::num_heads},
    {"value_dim", &H::value_dim},
    {"score_dim", &H::score_dim},
    {"relu_eps", &H::relu_eps},
    {"construction", Enum<H, Construction, &H::construction, &ParseConstruction>()},
    {"beta", &H::beta},
  };
  return *rows;
}

const std::vector<SpecField<T>>& TrainRows() {
  static const auto* rows = new std::vector<SpecField<T>>{
    {"lr", &T::lr},
    {"beta1", &T::beta1},
    {"beta2", &T::beta2},
    {"weight_decay", &T::weight_decay},
    {"batch_size", &T::batch_size},
    {"max_steps", &T::max_steps},
    {"eval_every", &T::eval_every},
    {"early_stop_evals", &T::early_stop_evals, J::kAlways, /*wire_minus_one_is_zero=*/true},
    {"loss", Enum<T, LossKind, &T::loss, &ParseLossKind>()},
    // Written only when not the default (constant, no warm-up), so that a
    // spec without a schedule reads as it did before these fields existed.
    {"schedule", Enum<T, LrSchedule, &T::schedule, &ParseLrSchedule>(), J::kUnlessDefault},
    {"warmup_steps", &T::warmup_steps, J::kUnlessDefault},
  };
  return *rows;
}

template <typename S>
const SpecField<S>* Find(const std::vector<SpecField<S>>& rows, const std::string& name) {
  for (const SpecField<S>& row : rows) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

}  // namespace

absl::Span<const SpecField<DatasetSpec>> DatasetFields() { return DatasetRows(); }
absl::Span<const SpecField<HeadSpec>> HeadFields() { return HeadRows(); }
absl::Span<const SpecField<TrainSpec>> TrainFields() { return TrainRows(); }

const SpecField<DatasetSpec>* FindDatasetField(const std::string& name) {
  return Find(DatasetRows(), name);
}
const SpecField<TrainSpec>* FindTrainField(const std::string& name) {
  return Find(TrainRows(), name);
}

template <typename S>
void SetFromDouble(const SpecField<S>& f, double v, S* s) {
  const auto rounded = static_cast<int64_t>(std::llround(v));
  if (auto m = std::get_if<int S::*>(&f.member)) {
    s->**m = static_cast<int>(rounded);
  } else if (auto m = std::get_if<uint64_t S::*>(&f.member)) {
    s->**m = static_cast<uint64_t>(rounded);
  } else if (auto m = std::get_if<double S::*>(&f.member)) {
    s->**m = v;
  } else if (auto m = std::get_if<bool S::*>(&f.member)) {
    s->**m = rounded != 0;
  } else if (auto e = std::get_if<EnumMember<S>>(&f.member)) {
    e->set(static_cast<int>(rounded), s);
  }
}

template void SetFromDouble(const SpecField<DatasetSpec>&, double, DatasetSpec*);
template void SetFromDouble(const SpecField<TrainSpec>&, double, TrainSpec*);

}  // namespace ranksweep
