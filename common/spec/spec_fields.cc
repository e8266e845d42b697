#include "common/spec/spec_fields.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/dataset_kinds.h"
#include "common/spec/result_validation.h"  // Clip: quoted input is cut

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
using P = PruneSpec;
using J = JsonWrite;

using L = SpecLimits;

// Built on first use (the enums' names come from the kind registries).
// In the order of the structs; a JSON document's first bad field is
// reported in this order, and the flags are listed in it.
const std::vector<SpecField<D>>& DatasetRows() {
  static const auto* rows = new std::vector<SpecField<D>>{
    {"kind", Enum<D, DatasetKind, &D::kind, &ParseDatasetKind>(), "", {}, J::kAlways, false,
     "dataset"},
    {"m", &D::m, "token dimension m, 1..64", {1, L::kMaxM}},
    {"seq_len", &D::seq_len, "tokens per sequence, 1..64", {1, L::kMaxSeqLen}},
    {"final_query_only", &D::final_query_only, "score only the last position"},
    {"data_seed", &D::data_seed, "the dataset's seed (the same seed, the same data)"},
    // The fields of some kinds only (dataset_kinds.h): a spec's JSON names
    // only its own kind's, so that it reads as it did before the other
    // kinds' fields existed and its task key stays.
    {"code_weight", &D::code_weight, "codeword weight w, 1..m", {1, L::kMaxM}, J::kForItsKinds},
    {"max_overlap", &D::max_overlap, "most coordinates two codewords share, 0..w-1",
     {0, L::kMaxM}, J::kForItsKinds},
    {"num_queries", &D::num_queries,
     "codewords used as queries, 0..2236; 0 = the whole code, which can be large",
     {0, L::kMaxWitnessQueries}, J::kForItsKinds},
    {"weight", &D::weight, "token weight, 0..m; 0 = Bernoulli tokens", {0, L::kMaxM},
     J::kForItsKinds},
    {"bernoulli_p", &D::bernoulli_p, "a Bernoulli token's probability of a 1, (0, 1]", {0, 1},
     J::kForItsKinds},
    {"pool_size", &D::pool_size, "distinct token vectors drawn; 0 = every vector, enumerated",
     {0, L::kMaxDatasetSequences}, J::kForItsKinds},
    {"test_pool_share", &D::test_pool_share,
     "with split tokens, the share of the vectors held out for the test split, [0, 1)", {0, 1},
     J::kForItsKinds},
    {"train_size", &D::train_size, "train sequences", {1, L::kMaxDatasetSequences},
     J::kForItsKinds},
    {"test_size", &D::test_size, "test sequences; 0 = no test split",
     {0, L::kMaxDatasetSequences}, J::kForItsKinds},
    {"hard_share", &D::hard_share, "share of hard triples, [0, 1]", {0, 1}, J::kForItsKinds},
    {"split", Enum<D, PoolSplit, &D::split, &ParsePoolSplit>(),
     "what training never sees of the test split, its vectors or its sequences", {},
     J::kForItsKindsUnlessDefault},
  };
  return *rows;
}

const std::vector<SpecField<H>>& HeadRows() {
  static const auto* rows = new std::vector<SpecField<H>>{
    {"kind", Enum<H, HeadKind, &H::kind, &ParseHeadKind>(), "", {}, J::kAlways, false, "head"},
    {"feature_map", Enum<H, FeatureMap, &H::feature_map, &ParseFeatureMap>()},
    {"hidden", &H::hidden, "the token map's hidden widths, comma-separated, 0..4 of them",
     {1, L::kMaxWidth}},
    {"num_heads", &H::num_heads, "heads of a multihead kernel, 1..64", {1, L::kMaxNumHeads}},
    {"value_dim", &H::value_dim, "value dimension; 0 = m", {0, L::kMaxWidth}},
    {"score_dim", &H::score_dim, "score dimension; 0 = m", {0, L::kMaxWidth}},
    {"relu_eps", &H::relu_eps, "the relu_eps feature map's epsilon, (0, 1]", {0, 1}},
    {"construction", Enum<H, Construction, &H::construction, &ParseConstruction>(),
     "weights set by a construction instead of trained"},
    {"beta", &H::beta, "an exact softmax construction's inverse temperature; 0 = automatic",
     {0, 1000}},
  };
  return *rows;
}

const std::vector<SpecField<T>>& TrainRows() {
  static const auto* rows = new std::vector<SpecField<T>>{
    {"lr", &T::lr, "Adam learning rate, (0, 10]", {0, 10}},
    {"beta1", &T::beta1, "Adam beta1, [0, 1)", {0, 1}},
    {"beta2", &T::beta2, "Adam beta2, [0, 1)", {0, 1}},
    // Written only when not the default (1e-8, the epsilon every task used
    // before the field existed), so that earlier tasks keep their keys.
    {"eps", &T::eps, "Adam epsilon, (0, 1]", {0, 1}, J::kUnlessDefault},
    {"weight_decay", &T::weight_decay, "Adam weight decay, [0, 1]", {0, 1}},
    {"batch_size", &T::batch_size, "batch size; 0 = full batch", {0, L::kMaxDatasetSequences}},
    {"max_steps", &T::max_steps, "training steps per seed", {0, L::kMaxSteps}},
    {"eval_every", &T::eval_every, "evaluate every E steps", {1, L::kMaxSteps}},
    {"early_stop_evals", &T::early_stop_evals,
     "stop after k exact evaluations in a row, 0..1000; 0 = never", {0, 1000}, J::kAlways,
     /*wire_minus_one_is_zero=*/true},
    {"loss", Enum<T, LossKind, &T::loss, &ParseLossKind>()},
    // Written only when not the default (constant, no warm-up), so that a
    // spec without a schedule reads as it did before these fields existed.
    {"schedule", Enum<T, LrSchedule, &T::schedule, &ParseLrSchedule>(), "learning-rate schedule",
     {}, J::kUnlessDefault},
    {"warmup_steps", &T::warmup_steps,
     "linear learning-rate warm-up over the first W steps, 0..max_steps; 0 = none",
     {0, L::kMaxSteps}, J::kUnlessDefault},
  };
  return *rows;
}

// Successive halving's settings (docs/ANALYSIS.md, "Recipe pruning").
const std::vector<SpecField<P>>& PruneRows() {
  static const auto* rows = new std::vector<SpecField<P>>{
    {"rule", Enum<P, PruneRule, &P::rule, &ParsePruneRule>(),
     "whether to stop the recipes of a (head, rank) that are clearly losing on training error "
     "at the rungs (successive halving, docs/ANALYSIS.md)", {}, J::kAlways, false, "prune"},
    {"eta", &P::eta,
     "halving's reduction factor, 2..16 (default 3): the best 1/eta of the recipes go on at a "
     "rung", {2, 16}, J::kAlways, false, "prune-eta"},
    {"min_steps", &P::min_steps,
     "the first rung's step, 0..10^9; 0 = max_steps / eta^3 (the default)", {0, 1'000'000'000},
     J::kAlways, false, "prune-min-steps"},
    {"margin", &P::margin,
     "how far above the best training error at a rung a recipe must be to be stopped, [0, 1] "
     "(default 0.05)", {0, 1}, J::kAlways, false, "prune-margin"},
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
absl::Span<const SpecField<PruneSpec>> PruneFields() { return PruneRows(); }

const SpecField<DatasetSpec>* FindDatasetField(const std::string& name) {
  return Find(DatasetRows(), name);
}
const SpecField<TrainSpec>* FindTrainField(const std::string& name) {
  return Find(TrainRows(), name);
}
const SpecField<PruneSpec>* FindPruneField(const std::string& name) {
  return Find(PruneRows(), name);
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

template <typename S>
std::string FieldHelp(const SpecField<S>& f, const std::string& part) {
  std::string help = absl::StrCat(part, ".", f.name, ": ", f.help);
  if (const auto* e = std::get_if<EnumMember<S>>(&f.member)) {
    absl::StrAppend(&help, *f.help == '\0' ? "" : ": ", absl::StrJoin(e->names, " | "));
  }
  if (ForItsKindsOnly(f.json)) {
    std::vector<std::string> kinds;
    for (const DatasetKindRow& row : DatasetKinds()) {
      if (DatasetKindHasField(row.kind, f.name)) kinds.push_back(row.name);
    }
    absl::StrAppend(&help, " (", absl::StrJoin(kinds, ", "), " only)");
  }
  return help;
}

template <typename S>
std::string FieldFlag(const SpecField<S>& f) {
  if (f.flag != nullptr) return f.flag;
  std::string flag = f.name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

namespace {

// As the flag library words it: a plain number as it is, anything else
// quoted and clipped ("got 0", "got \"abc\"").
std::string Quoted(const std::string& text) {
  double v = 0;
  if (absl::SimpleAtod(text, &v) && std::isfinite(v)) return text;
  return absl::StrCat("\"", Clip(text), "\"");
}

// "an integer in 1..64", "a number in 0..10", "an integer" (unbounded).
std::string Takes(bool integer, const FieldBounds& b) {
  std::string what = integer ? "an integer" : "a number";
  if (!b.bounded()) return what;
  if (integer) {
    absl::StrAppend(&what, " in ", static_cast<int64_t>(b.min), "..", static_cast<int64_t>(b.max));
  } else {
    absl::StrAppend(&what, " in ", b.min, "..", b.max);
  }
  return what;
}

}  // namespace

template <typename S>
absl::Status SetFromText(const SpecField<S>& f, const std::string& text, const std::string& flag,
                         S* s) {
  const FieldBounds& b = f.bounds;
  auto refuse = [&](bool integer) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " must be ", Takes(integer, b), ", got ", Quoted(text)));
  };
  if (auto e = std::get_if<EnumMember<S>>(&f.member)) {
    absl::StatusOr<int> v = e->parse(text, flag);
    if (!v.ok()) return v.status();
    e->set(*v, s);
  } else if (auto m = std::get_if<bool S::*>(&f.member)) {
    const std::string t = absl::AsciiStrToLower(text);
    if (t == "true" || t == "1" || t == "yes") {
      s->**m = true;
    } else if (t == "false" || t == "0" || t == "no") {
      s->**m = false;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " must be true or false, got ", Quoted(text)));
    }
  } else if (auto m = std::get_if<double S::*>(&f.member)) {
    double v = 0;
    if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v < b.min || v > b.max) {
      return refuse(false);
    }
    s->**m = v;
  } else if (auto m = std::get_if<uint64_t S::*>(&f.member)) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(text, &v) || (b.bounded() && (v < b.min || v > b.max))) {
      return refuse(true);
    }
    s->**m = v;
  } else if (auto m = std::get_if<int S::*>(&f.member)) {
    int v = 0;
    if (!absl::SimpleAtoi(text, &v) || v < b.min || v > b.max) return refuse(true);
    s->**m = v;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(flag, " is a list; it takes no single value"));
  }
  return absl::OkStatus();
}

#define RS_INSTANTIATE(S)                                                             \
  template std::string FieldHelp(const SpecField<S>&, const std::string&);            \
  template std::string FieldFlag(const SpecField<S>&);                                \
  template absl::Status SetFromText(const SpecField<S>&, const std::string&,          \
                                    const std::string&, S*);
RS_INSTANTIATE(DatasetSpec)
RS_INSTANTIATE(HeadSpec)
RS_INSTANTIATE(TrainSpec)
RS_INSTANTIATE(PruneSpec)
#undef RS_INSTANTIATE

template void SetFromDouble(const SpecField<DatasetSpec>&, double, DatasetSpec*);
template void SetFromDouble(const SpecField<HeadSpec>&, double, HeadSpec*);
template void SetFromDouble(const SpecField<TrainSpec>&, double, TrainSpec*);
template void SetFromDouble(const SpecField<PruneSpec>&, double, PruneSpec*);

}  // namespace ranksweep
