#include "common/spec/spec.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/result_validation.h"  // Clip: quoted input is cut
#include "common/spec/checks.h"
#include "common/spec/dataset_kinds.h"
#include "common/spec/head_kinds.h"
#include "common/spec/spec_fields.h"
#include "common/spec/spec_json.h"
#include "common/witness_code.h"

namespace ranksweep {
namespace {

using spec_checks::CheckRange;
using spec_checks::CheckUnit;

template <typename E>
struct NameTable {
  E value;
  const char* name;
};

constexpr NameTable<FeatureMap> kFeatureMaps[] = {
    {FeatureMap::kEluPlusOne, "elu1"},
    {FeatureMap::kReluEps, "relu_eps"},
    {FeatureMap::kSoftplus, "softplus"},
    {FeatureMap::kExp, "exp"},
    {FeatureMap::kFavorPlus, "favor"}};
constexpr NameTable<Construction> kConstructions[] = {
    {Construction::kNone, "none"},
    {Construction::kRank1, "rank1"},
    {Construction::kIndicator, "indicator"},
    {Construction::kSoftmaxExact, "softmax_exact"}};
constexpr NameTable<LossKind> kLossKinds[] = {
    {LossKind::kMse, "mse"}, {LossKind::kCrossEntropy, "ce"}};
constexpr NameTable<LrSchedule> kLrSchedules[] = {{LrSchedule::kConstant, "constant"},
                                                  {LrSchedule::kCosine, "cosine"}};
constexpr NameTable<SweepMode> kSweepModes[] = {{SweepMode::kGrid, "grid"},
                                                {SweepMode::kSearch, "search"}};
constexpr NameTable<PruneRule> kPruneRules[] = {{PruneRule::kNone, "none"},
                                                {PruneRule::kHalving, "halving"}};
constexpr NameTable<PoolSplit> kPoolSplits[] = {{PoolSplit::kTokens, "tokens"},
                                                {PoolSplit::kSequences, "sequences"}};

template <typename E, size_t K>
const char* Lookup(const NameTable<E> (&table)[K], E v) {
  for (const auto& row : table)
    if (row.value == v) return row.name;
  return "?";
}

template <typename E, size_t K>
absl::StatusOr<E> Parse(const NameTable<E> (&table)[K], const std::string& s,
                        const std::string& field) {
  std::vector<std::string> names;
  for (const auto& row : table) {
    if (s == row.name) return row.value;
    names.push_back(row.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, " must be one of ", absl::StrJoin(names, ", "), "; got \"", Clip(s), "\""));
}

// Specs built in code (not parsed) can carry enum values outside the named
// set; reject them with the allowed names.
template <typename E, size_t K>
absl::Status CheckEnum(const NameTable<E> (&table)[K], E v, const std::string& field) {
  for (const auto& row : table)
    if (row.value == v) return absl::OkStatus();
  std::vector<std::string> names;
  for (const auto& row : table) names.push_back(row.name);
  return absl::InvalidArgumentError(absl::StrCat(field, " must be one of ", absl::StrJoin(names, ", "),
                                                 "; got value ", static_cast<int>(v)));
}

}  // namespace

const char* Name(DatasetKind v) {
  const DatasetKindRow* row = FindDatasetKind(v);
  return row != nullptr ? row->name : "?";
}
const char* Name(HeadKind v) {
  const HeadKindRow* row = FindHeadKind(v);
  return row != nullptr ? row->name : "?";
}
const char* Name(FeatureMap v) { return Lookup(kFeatureMaps, v); }
const char* Name(Construction v) { return Lookup(kConstructions, v); }
const char* Name(LossKind v) { return Lookup(kLossKinds, v); }
const char* Name(LrSchedule v) { return Lookup(kLrSchedules, v); }
const char* Name(SweepMode v) { return Lookup(kSweepModes, v); }
const char* Name(PoolSplit v) { return Lookup(kPoolSplits, v); }
const char* Name(PruneRule v) { return Lookup(kPruneRules, v); }

absl::StatusOr<DatasetKind> ParseDatasetKind(const std::string& s, const std::string& field) {
  std::vector<std::string> names;
  for (const DatasetKindRow& row : DatasetKinds()) {
    if (s == row.name) return row.kind;
    names.push_back(row.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, " must be one of ", absl::StrJoin(names, ", "), "; got \"", Clip(s), "\""));
}
absl::StatusOr<HeadKind> ParseHeadKind(const std::string& s, const std::string& field) {
  std::vector<std::string> names;
  for (const HeadKindRow& row : HeadKinds()) {
    if (s == row.name) return row.kind;
    names.push_back(row.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, " must be one of ", absl::StrJoin(names, ", "), "; got \"", Clip(s), "\""));
}
absl::StatusOr<FeatureMap> ParseFeatureMap(const std::string& s, const std::string& field) {
  return Parse(kFeatureMaps, s, field);
}
absl::StatusOr<Construction> ParseConstruction(const std::string& s, const std::string& field) {
  return Parse(kConstructions, s, field);
}
absl::StatusOr<LossKind> ParseLossKind(const std::string& s, const std::string& field) {
  return Parse(kLossKinds, s, field);
}
absl::StatusOr<LrSchedule> ParseLrSchedule(const std::string& s, const std::string& field) {
  return Parse(kLrSchedules, s, field);
}
absl::StatusOr<PoolSplit> ParsePoolSplit(const std::string& s, const std::string& field) {
  return Parse(kPoolSplits, s, field);
}
absl::StatusOr<SweepMode> ParseSweepMode(const std::string& s, const std::string& field) {
  return Parse(kSweepModes, s, field);
}
absl::StatusOr<PruneRule> ParsePruneRule(const std::string& s, const std::string& field) {
  return Parse(kPruneRules, s, field);
}

std::vector<int64_t> PruneRungSteps(const SweepSpec& spec, const TrainSpec& train) {
  constexpr size_t kMaxRungs = 16;
  std::vector<int64_t> rungs;
  if (spec.prune.rule == PruneRule::kNone || RecipeCount(spec) < 2) return rungs;
  const int64_t eta = std::max(2, spec.prune.eta);
  const int64_t every = std::max(1, train.eval_every);
  const int64_t max_steps = train.max_steps;
  int64_t first = spec.prune.min_steps;
  if (first <= 0) first = (max_steps + eta * eta * eta - 1) / (eta * eta * eta);
  first = std::max<int64_t>(1, first);
  first = (first + every - 1) / every * every;
  for (int64_t s = first; s < max_steps && rungs.size() < kMaxRungs; s *= eta) {
    rungs.push_back(s);
  }
  return rungs;
}

bool HeadHasRank(const HeadSpec& head) {
  const HeadKindRow* kind = FindHeadKind(head.kind);
  return kind != nullptr && kind->has_rank && head.construction == Construction::kNone;
}

bool ReadoutEscapesRankBound(const HeadSpec& head, const TrainSpec& train) {
  return train.loss == LossKind::kCrossEntropy && HeadHasRank(head);
}

std::vector<uint64_t> SweepSeeds(const SweepSpec& spec) {
  if (!spec.seeds.empty()) return spec.seeds;
  std::vector<uint64_t> seeds;
  for (int i = 0; i < spec.seed_count; ++i) seeds.push_back(static_cast<uint64_t>(i));
  return seeds;
}

std::string HeadLabel(const HeadSpec& head) {
  switch (head.construction) {
    case Construction::kRank1: return "kernel/rank1*";
    case Construction::kIndicator: return "kernel/indicator*";
    case Construction::kSoftmaxExact: return "softmax/exact*";
    case Construction::kNone: break;
  }
  std::string label = Name(head.kind);
  const HeadKindRow* kind = FindHeadKind(head.kind);
  if (kind == nullptr) return label;
  if (kind->has_feature_map) absl::StrAppend(&label, "/", Name(head.feature_map));
  if (kind->has_num_heads) absl::StrAppend(&label, "x", head.num_heads);
  if (kind->softmax_scores && head.score_dim > 0) absl::StrAppend(&label, "/d", head.score_dim);
  if (!head.hidden.empty()) absl::StrAppend(&label, "[", absl::StrJoin(head.hidden, ","), "]");
  return label;
}

// ---------------------------------------------------------------- axes

namespace {

// One recipe field of the dataset or the training (spec_fields.h) that a
// sweep may list several values for. Its kind of value comes from its field.
struct AxisRow {
  const char* name;
  std::string field;  // "train.lr"
  bool integer;
  // A field of some dataset kinds only (DatasetKindRow::fields): the axis
  // needs one of those kinds.
  bool kind_field;
  const SpecField<DatasetSpec>* dataset;  // one of these two
  const SpecField<TrainSpec>* train;
  // An enum field: its value is the index of a name in `names` (nullptr for
  // numbers), written and read by name.
  const std::vector<std::string>* names;

  void apply(double v, TaskSpec* t) const {
    if (dataset != nullptr) SetFromDouble(*dataset, v, &t->dataset);
    if (train != nullptr) SetFromDouble(*train, v, &t->train);
  }
};

// The axes in their order, which numbers the recipes of stored sweeps: a new
// axis goes at the end. Each is the field of the same name of `train` or
// `dataset`.
const std::vector<AxisRow>& Axes() {
  static const auto* axes = [] {
    struct Named {
      bool train;
      const char* name;
    };
    const Named kOrder[] = {
        {true, "lr"},         {true, "weight_decay"}, {true, "max_steps"},
        {true, "batch_size"}, {false, "m"},           {false, "weight"},
        {false, "num_queries"}, {false, "pool_size"}, {false, "train_size"},
        {false, "test_size"}, {true, "schedule"},     {true, "warmup_steps"},
        {false, "split"},     {false, "hard_share"},  {false, "test_pool_share"},
    };
    auto* rows = new std::vector<AxisRow>;
    for (const Named& n : kOrder) {
      AxisRow row{n.name, absl::StrCat(n.train ? "train." : "dataset.", n.name), false, false,
                  nullptr, nullptr, nullptr};
      if (n.train) {
        row.train = FindTrainField(n.name);
        row.integer = IsIntegerField(*row.train);
        if (auto* e = std::get_if<EnumMember<TrainSpec>>(&row.train->member)) row.names = &e->names;
      } else {
        row.dataset = FindDatasetField(n.name);
        row.integer = IsIntegerField(*row.dataset);
        row.kind_field = ForItsKindsOnly(row.dataset->json);
        if (auto* e = std::get_if<EnumMember<DatasetSpec>>(&row.dataset->member)) {
          row.names = &e->names;
        }
      }
      rows->push_back(std::move(row));
    }
    return rows;
  }();
  return *axes;
}

const AxisRow* FindAxis(const std::string& name) {
  for (const AxisRow& row : Axes())
    if (name == row.name) return &row;
  return nullptr;
}

int AxisOrder(const std::string& name) {
  for (size_t i = 0; i < Axes().size(); ++i)
    if (name == Axes()[i].name) return static_cast<int>(i);
  return -1;
}

// The sweep's dataset and training with `values` (one per axis) applied.
TaskSpec ApplyAxes(const SweepSpec& sweep, const std::vector<double>& values) {
  TaskSpec t;
  t.dataset = sweep.dataset;
  t.train = sweep.train;
  for (size_t i = 0; i < sweep.axes.size() && i < values.size(); ++i) {
    if (const AxisRow* row = FindAxis(sweep.axes[i].name)) row->apply(values[i], &t);
  }
  return t;
}

}  // namespace

const std::vector<std::string>& AxisNames() {
  static const std::vector<std::string>* names = [] {
    auto* v = new std::vector<std::string>;
    for (const AxisRow& row : Axes()) v->push_back(row.name);
    return v;
  }();
  return *names;
}

bool IsAxisName(const std::string& name) { return FindAxis(name) != nullptr; }

bool AxisIsInteger(const std::string& name) {
  const AxisRow* row = FindAxis(name);
  return row != nullptr && row->integer;
}

bool AxisIsNamed(const std::string& name) {
  const AxisRow* row = FindAxis(name);
  return row != nullptr && row->names != nullptr;
}

std::string AxisField(const std::string& name) {
  const AxisRow* row = FindAxis(name);
  return row == nullptr ? name : row->field;
}

absl::StatusOr<double> ParseAxisValue(const std::string& name, const std::string& text,
                                      const std::string& field) {
  const AxisRow* row = FindAxis(name);
  if (row == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": \"", Clip(name), "\" is not an axis; axes: ",
                                                   absl::StrJoin(AxisNames(), ", ")));
  }
  if (row->names != nullptr) {
    const auto it = std::find(row->names->begin(), row->names->end(), text);
    if (it == row->names->end()) {
      return absl::InvalidArgumentError(absl::StrCat(field, " must be one of ",
                                                     absl::StrJoin(*row->names, ", "), "; got \"",
                                                     Clip(text), "\""));
    }
    return static_cast<double>(it - row->names->begin());
  }
  double v = 0;
  const bool ok = row->integer ? [&] {
    int64_t i = 0;
    if (!absl::SimpleAtoi(text, &i)) return false;
    v = static_cast<double>(i);
    return true;
  }()
                               : absl::SimpleAtod(text, &v) && std::isfinite(v);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " must be ", row->integer ? "an integer" : "a number", ", got \"", Clip(text), "\""));
  }
  return v;
}

std::string FormatAxisValue(const std::string& name, double value) {
  const AxisRow* row = FindAxis(name);
  if (row != nullptr && row->names != nullptr) {
    const int64_t i = std::llround(value);
    return i >= 0 && i < static_cast<int64_t>(row->names->size()) ? (*row->names)[i]
                                                                     : absl::StrCat(i);
  }
  if (row != nullptr && row->integer) return absl::StrCat(static_cast<int64_t>(std::llround(value)));
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

absl::Status SetAxisValues(const std::string& name, std::vector<double> values,
                           SweepSpec* spec) {
  const AxisRow* row = FindAxis(name);
  if (row == nullptr || values.empty()) {
    return absl::InvalidArgumentError(
        row == nullptr ? absl::StrCat("\"", Clip(name), "\" is not an axis; axes: ",
                                      absl::StrJoin(AxisNames(), ", "))
                       : absl::StrCat(name, ": at least one value"));
  }
  std::vector<SweepAxis>& axes = spec->axes;
  axes.erase(std::remove_if(axes.begin(), axes.end(),
                            [&](const SweepAxis& a) { return a.name == name; }),
             axes.end());
  if (values.size() == 1) {
    TaskSpec t;
    t.dataset = spec->dataset;
    t.train = spec->train;
    row->apply(values[0], &t);
    spec->dataset = t.dataset;
    spec->train = t.train;
    return absl::OkStatus();
  }
  auto at = std::find_if(axes.begin(), axes.end(), [&](const SweepAxis& a) {
    return AxisOrder(a.name) > AxisOrder(name);
  });
  axes.insert(at, SweepAxis{name, std::move(values)});
  return absl::OkStatus();
}

std::string KeepFirstRecipe(SweepSpec* spec) {
  std::vector<std::string> dropped;
  const std::vector<SweepAxis> axes = spec->axes;
  for (const SweepAxis& axis : axes) {
    if (axis.values.empty() || !IsAxisName(axis.name)) continue;
    // A dataset axis is the problem's size (the law's m), not the recipe.
    if (AxisField(axis.name).rfind("dataset.", 0) == 0) continue;
    std::vector<std::string> all;
    for (double v : axis.values) all.push_back(FormatAxisValue(axis.name, v));
    dropped.push_back(absl::StrCat(axis.name, " ", all[0], " (of ", absl::StrJoin(all, ","), ")"));
    // One value writes the field and drops the axis; it cannot fail for a
    // known name.
    SetAxisValues(axis.name, {axis.values[0]}, spec).IgnoreError();
  }
  return absl::StrJoin(dropped, "; ");
}

int64_t GridCellCount(const SweepSpec& s) {
  int64_t cells = 0;
  const int64_t seeds = static_cast<int64_t>(SweepSeeds(s).size());
  for (const HeadSpec& h : s.heads) {
    cells += (HeadHasRank(h) ? static_cast<int64_t>(s.ranks.size()) : 1) * seeds;
  }
  return cells * std::min<int64_t>(RecipeCount(s), int64_t{1} << 40);  // <= 2^61
}

int64_t RecipeCount(const SweepSpec& spec) {
  int64_t n = 1;
  for (const SweepAxis& axis : spec.axes) {
    n *= static_cast<int64_t>(axis.values.size());
    if (n > int64_t{1} << 40) return n;  // far past any limit; no overflow
  }
  return n;
}

std::vector<double> RecipeValues(const SweepSpec& spec, int recipe) {
  std::vector<double> values(spec.axes.size());
  int64_t rest = recipe;
  for (size_t i = spec.axes.size(); i-- > 0;) {
    const int64_t size = static_cast<int64_t>(spec.axes[i].values.size());
    if (size == 0) continue;
    values[i] = spec.axes[i].values[static_cast<size_t>(rest % size)];
    rest /= size;
  }
  return values;
}

std::string RecipeLabel(const SweepSpec& spec, int recipe) {
  const std::vector<double> values = RecipeValues(spec, recipe);
  std::string label;
  for (size_t i = 0; i < spec.axes.size(); ++i) {
    absl::StrAppend(&label, i == 0 ? "" : " ", spec.axes[i].name, "=",
                    FormatAxisValue(spec.axes[i].name, values[i]));
  }
  return label;
}

bool RecipeAxisValue(const SweepSpec& spec, int recipe, const std::string& name,
                     double* value) {
  for (size_t i = 0; i < spec.axes.size(); ++i) {
    if (spec.axes[i].name != name) continue;
    *value = RecipeValues(spec, recipe)[i];
    return true;
  }
  return false;
}

// ---------------------------------------------------------------- datasets

uint64_t Binomial(int n, int k, uint64_t cap) {
  if (k < 0 || k > n) return 0;
  k = std::min(k, n - k);
  long double r = 1;
  for (int i = 1; i <= k; ++i) {
    r = r * (n - k + i) / i;
    if (r >= static_cast<long double>(cap)) return cap;
  }
  return static_cast<uint64_t>(std::llround(static_cast<double>(r)));
}

absl::Status ValidateDataset(const DatasetSpec& d) {
  using L = SpecLimits;
  // The kind's own ranges are its row's (dataset_kinds.h).
  const DatasetKindRow* kind = FindDatasetKind(d.kind);
  if (kind == nullptr) {
    std::vector<std::string> names;
    for (const DatasetKindRow& row : DatasetKinds()) names.push_back(row.name);
    return absl::InvalidArgumentError(absl::StrCat("dataset.kind must be one of ",
                                                   absl::StrJoin(names, ", "), "; got value ",
                                                   static_cast<int>(d.kind)));
  }
  RS_CHECK(CheckRange("dataset.m", d.m, 1, L::kMaxM));
  RS_CHECK(CheckRange("dataset.seq_len", d.seq_len, 1, L::kMaxSeqLen));
  return kind->validate(d);
}

absl::Status ValidateHead(const HeadSpec& h, const DatasetSpec& d) {
  using L = SpecLimits;
  // What the kind reads and can be built as are its row's (head_kinds.h).
  const HeadKindRow* kind = FindHeadKind(h.kind);
  if (kind == nullptr) {
    std::vector<std::string> names;
    for (const HeadKindRow& row : HeadKinds()) names.push_back(row.name);
    return absl::InvalidArgumentError(absl::StrCat("head.kind must be one of ",
                                                   absl::StrJoin(names, ", "), "; got value ",
                                                   static_cast<int>(h.kind)));
  }
  RS_CHECK(CheckEnum(kFeatureMaps, h.feature_map, "head.feature_map"));
  RS_CHECK(CheckEnum(kConstructions, h.construction, "head.construction"));
  if (h.hidden.size() > 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "head.hidden must have 0..4 widths, got ", h.hidden.size()));
  }
  for (int w : h.hidden) RS_CHECK(CheckRange("head.hidden[]", w, 1, L::kMaxWidth));
  RS_CHECK(CheckRange("head.value_dim", h.value_dim, 0, L::kMaxWidth));
  RS_CHECK(CheckRange("head.score_dim", h.score_dim, 0, L::kMaxWidth));
  if (kind->has_num_heads) {
    RS_CHECK(CheckRange("head.num_heads", h.num_heads, 1, L::kMaxNumHeads));
  }
  if (h.feature_map == FeatureMap::kReluEps) {
    RS_CHECK(CheckUnit("head.relu_eps", h.relu_eps, true, false, 0.0, 1.0));
  }
  if (!(std::isfinite(h.beta) && h.beta >= 0 && h.beta <= 1000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("head.beta must be in [0, 1000] (0 = automatic), got ", h.beta));
  }
  if (h.construction != Construction::kNone &&
      std::find(kind->constructions.begin(), kind->constructions.end(), h.construction) ==
          kind->constructions.end()) {
    std::vector<std::string> kinds;
    for (const HeadKindRow& row : HeadKinds()) {
      if (std::find(row.constructions.begin(), row.constructions.end(), h.construction) !=
          row.constructions.end()) {
        kinds.push_back(row.name);
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "head.construction \"", Name(h.construction), "\" needs head.kind \"",
        absl::StrJoin(kinds, "\" or \""), "\", got \"", Name(h.kind), "\""));
  }
  if (h.construction == Construction::kIndicator) {
    RS_CHECK(CheckRange("dataset.m (indicator construction)", d.m, 1, L::kMaxIndicatorM));
  }
  return absl::OkStatus();
}

absl::Status ValidateTrain(const TrainSpec& t) {
  using L = SpecLimits;
  RS_CHECK(CheckEnum(kLossKinds, t.loss, "train.loss"));
  RS_CHECK(CheckUnit("train.lr", t.lr, true, false, 0.0, 10.0));
  RS_CHECK(CheckUnit("train.beta1", t.beta1, false, true));
  RS_CHECK(CheckUnit("train.beta2", t.beta2, false, true));
  RS_CHECK(CheckUnit("train.eps", t.eps, true, false));
  RS_CHECK(CheckUnit("train.weight_decay", t.weight_decay, false, false, 0.0, 1.0));
  RS_CHECK(CheckRange("train.batch_size", t.batch_size, 0, L::kMaxDatasetSequences));
  RS_CHECK(CheckRange("train.max_steps", t.max_steps, 0, L::kMaxSteps));
  RS_CHECK(CheckRange("train.eval_every", t.eval_every, 1, L::kMaxSteps));
  RS_CHECK(CheckRange("train.early_stop_evals", t.early_stop_evals, 0, 1000));
  RS_CHECK(CheckEnum(kLrSchedules, t.schedule, "train.schedule"));
  if (t.warmup_steps < 0 || t.warmup_steps > t.max_steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("train.warmup_steps must be in 0..train.max_steps (", t.max_steps,
                     "), got ", t.warmup_steps));
  }
  return absl::OkStatus();
}

double LearningRateAt(const TrainSpec& t, int64_t step) {
  const int64_t last = std::max<int64_t>(t.max_steps, 1);
  step = std::clamp<int64_t>(step, 1, last);
  if (t.warmup_steps > 0 && step <= t.warmup_steps) {
    return t.lr * static_cast<double>(step) / t.warmup_steps;
  }
  if (t.schedule == LrSchedule::kConstant) return t.lr;
  // step > warmup_steps here, so last > warmup_steps and the division is safe.
  const double progress =
      static_cast<double>(step - t.warmup_steps) / static_cast<double>(last - t.warmup_steps);
  return t.lr * 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
}

namespace {
absl::Status CheckSeeds(const std::string& field, const std::vector<uint64_t>& seeds) {
  RS_CHECK(CheckRange<size_t>(field + " count", seeds.size(), 1, SpecLimits::kMaxSeeds));
  std::set<uint64_t> seen;
  for (uint64_t s : seeds) {
    if (!seen.insert(s).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " must not repeat a seed; ", s, " appears twice"));
    }
  }
  return absl::OkStatus();
}

// The checks the worker runs when it builds the dataset, beyond
// ValidateDataset's static ranges: for a witness family its code's
// (common/witness_code.h), so that a sweep the worker would fail is refused
// at submit with the worker's own message. One per sweep: its recipes'
// constructions share one step budget, each distinct dataset charged once.
class BuildableCheck {
 public:
  absl::Status Check(const DatasetSpec& d) {
    const DatasetKindRow* kind = FindDatasetKind(d.kind);
    if (kind == nullptr || kind->check_buildable == nullptr) return absl::OkStatus();
    TaskSpec only_dataset;
    only_dataset.dataset = d;
    if (!checked_.insert(TaskSpecToJson(only_dataset)).second) return absl::OkStatus();
    return kind->check_buildable(d, &steps_left_);
  }

 private:
  uint64_t steps_left_ = SpecLimits::kMaxWitnessCodeSteps;
  std::set<std::string> checked_;  // the datasets checked, as JSON
};

}  // namespace

absl::Status ValidateTaskSpec(const TaskSpec& t) {
  RS_CHECK(ValidateDataset(t.dataset));
  RS_CHECK(ValidateHead(t.head, t.dataset));
  if (HeadHasRank(t.head)) {
    RS_CHECK(CheckRange("rank", t.rank, 1, SpecLimits::kMaxRank));
  }
  RS_CHECK(ValidateTrain(t.train));
  return CheckSeeds("seeds", t.seeds);
}

namespace {

// The axes' structure and each value on its own: a known name, in the
// canonical order, once; 1..kMaxAxisValues distinct values; integral where
// the field is an integer; each value valid in its field with the other
// axes at their first value.
absl::Status ValidateAxes(const SweepSpec& s) {
  int last_order = -1;
  for (size_t i = 0; i < s.axes.size(); ++i) {
    const SweepAxis& axis = s.axes[i];
    const std::string where = absl::StrCat("axes[", i, "] (", axis.name, ")");
    const AxisRow* row = FindAxis(axis.name);
    if (row == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "axes[", i, "]: \"", Clip(axis.name), "\" is not an axis; axes: ",
          absl::StrJoin(AxisNames(), ", ")));
    }
    const int order = AxisOrder(axis.name);
    if (order <= last_order) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": axes must be listed once each, in the order ",
          absl::StrJoin(AxisNames(), ", ")));
    }
    last_order = order;
    if (row->kind_field && !DatasetKindHasField(s.dataset.kind, row->name)) {
      std::vector<std::string> kinds;
      for (const DatasetKindRow& k : DatasetKinds()) {
        if (DatasetKindHasField(k.kind, row->name)) kinds.push_back(k.name);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", row->field, " needs dataset.kind \"", absl::StrJoin(kinds, "\" or \""),
          "\", got \"", Name(s.dataset.kind), "\""));
    }
    RS_CHECK(CheckRange<size_t>(where + " values count", axis.values.size(), 1,
                                SpecLimits::kMaxAxisValues));
  }
  for (size_t i = 0; i < s.axes.size(); ++i) {
    const SweepAxis& axis = s.axes[i];
    const std::string where = absl::StrCat("axes[", i, "] (", axis.name, ")");
    const AxisRow* row = FindAxis(axis.name);
    std::vector<double> values = RecipeValues(s, 0);
    for (size_t j = 0; j < axis.values.size(); ++j) {
      const double v = axis.values[j];
      const std::string at = absl::StrCat(where, " values[", j, "]");
      if (!std::isfinite(v) || (row->integer && (std::abs(v) > 1e15 || v != std::floor(v)))) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, " must be ", row->integer ? "an integer" : "a finite number", ", got ", v));
      }
      for (size_t k = 0; k < j; ++k) {
        if (axis.values[k] == v) {
          return absl::InvalidArgumentError(
              absl::StrCat(at, ": ", FormatAxisValue(axis.name, v), " repeats values[", k, "]"));
        }
      }
      values[i] = v;
      const TaskSpec t = ApplyAxes(s, values);
      absl::Status st = AxisField(axis.name).rfind("train.", 0) == 0 ? ValidateTrain(t.train)
                                                                     : ValidateDataset(t.dataset);
      if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat(at, ": ", st.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSweepSpec(const SweepSpec& s) {
  using L = SpecLimits;
  if (s.name.empty() || s.name.size() > static_cast<size_t>(L::kMaxNameLength)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "name must have 1..", L::kMaxNameLength, " characters, got ", s.name.size()));
  }
  for (char c : s.name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "name must use only the characters A-Z a-z 0-9 . _ -, got \"", Clip(s.name), "\""));
    }
  }
  RS_CHECK(ValidateAxes(s));
  // A field with an axis takes the axis' values, so the checks below read
  // recipe 0's dataset and training; the other recipes are checked after.
  const TaskSpec first = ApplyAxes(s, RecipeValues(s, 0));
  RS_CHECK(ValidateDataset(first.dataset));
  BuildableCheck buildable;
  RS_CHECK(buildable.Check(first.dataset));
  RS_CHECK(CheckRange<size_t>("heads count", s.heads.size(), 1, L::kMaxHeads));
  bool any_ranked = false;
  for (size_t i = 0; i < s.heads.size(); ++i) {
    absl::Status st = ValidateHead(s.heads[i], first.dataset);
    if (!st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("heads[", i, "]: ", st.message()));
    }
    any_ranked = any_ranked || HeadHasRank(s.heads[i]);
  }
  if (any_ranked) {
    RS_CHECK(CheckRange<size_t>("ranks count", s.ranks.size(), 1, L::kMaxRanks));
  } else {
    RS_CHECK(CheckRange<size_t>("ranks count", s.ranks.size(), 0, L::kMaxRanks));
  }
  std::set<int> seen;
  for (int r : s.ranks) {
    RS_CHECK(CheckRange("ranks[]", r, 1, L::kMaxRank));
    if (!seen.insert(r).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ranks must not repeat a rank; ", r, " appears twice"));
    }
  }
  if (s.seeds.empty()) {
    RS_CHECK(CheckRange("seed_count", s.seed_count, 1, L::kMaxSeeds));
  } else {
    RS_CHECK(CheckSeeds("seeds", s.seeds));
  }
  RS_CHECK(ValidateTrain(first.train));
  RS_CHECK(CheckRange("priority", s.priority, -100, 100));
  RS_CHECK(CheckEnum(kSweepModes, s.mode, "mode"));
  RS_CHECK(CheckEnum(kPruneRules, s.prune.rule, "prune.rule"));
  RS_CHECK(CheckRange("prune.eta", s.prune.eta, 2, 16));
  RS_CHECK(CheckRange("prune.min_steps", s.prune.min_steps, 0, 1'000'000'000));
  RS_CHECK(CheckUnit("prune.margin", s.prune.margin, false, false));
  const int64_t cells = GridCellCount(s);
  const int64_t recipes = RecipeCount(s);
  RS_CHECK(CheckRange<int64_t>(
      s.axes.empty() ? "total cells (heads x ranks x seeds)"
                     : "total cells (heads x ranks x seeds x recipes)",
      cells, 1, L::kMaxCells));
  // Dataset axes combine (m with weight, m with an indicator head): every
  // recipe's dataset must hold with every head. Training axes were checked
  // value by value in ValidateAxes.
  const bool dataset_axes = std::any_of(s.axes.begin(), s.axes.end(), [](const SweepAxis& a) {
    return AxisField(a.name).rfind("dataset.", 0) == 0;
  });
  for (int64_t k = 1; dataset_axes && k < recipes; ++k) {
    const TaskSpec t = ApplyAxes(s, RecipeValues(s, static_cast<int>(k)));
    absl::Status st = ValidateDataset(t.dataset);
    if (st.ok()) st = buildable.Check(t.dataset);
    for (size_t i = 0; st.ok() && i < s.heads.size(); ++i) {
      st = ValidateHead(s.heads[i], t.dataset);
      if (!st.ok()) st = absl::InvalidArgumentError(absl::StrCat("heads[", i, "]: ", st.message()));
    }
    if (!st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "recipe ", k, " (", RecipeLabel(s, static_cast<int>(k)), "): ", st.message()));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- memory

namespace {

constexpr double kInt64Max = 9.2e18;  // just below INT64_MAX as a double

int64_t SaturatedBytes(double bytes) {
  if (!(bytes < kInt64Max)) return INT64_MAX;
  return static_cast<int64_t>(std::ceil(bytes));
}


}  // namespace

DatasetSize EstimateDatasetSize(const DatasetSpec& d) {
  const DatasetKindRow* kind = FindDatasetKind(d.kind);
  return kind != nullptr ? kind->size(d) : DatasetSize();
}

int64_t EstimateDatasetSequences(const DatasetSpec& d) {
  const DatasetSize size = EstimateDatasetSize(d);
  return size.train + size.test;
}

int64_t MemoryEstimate::Total(int64_t seeds) const {
  return SaturatedBytes(static_cast<double>(fixed_bytes) +
                        static_cast<double>(seeds) * static_cast<double>(per_seed_bytes));
}

int64_t MemoryEstimate::SeedsThatFit(int64_t bytes) const {
  if (bytes < fixed_bytes) return 0;
  if (per_seed_bytes <= 0) return INT64_MAX;
  return (bytes - fixed_bytes) / per_seed_bytes;
}

MemoryEstimate EstimateTaskMemory(const TaskSpec& t) {
  const double m = t.dataset.m, n = t.dataset.seq_len;
  const HeadSpec& h = t.head;
  const bool constructed = h.construction != Construction::kNone;
  // Constructions use the scalar readout and m-wide value and score maps.
  const double k = !constructed && t.train.loss == LossKind::kCrossEntropy ? m + 1 : 1;
  const double dv = !constructed && h.value_dim > 0 ? h.value_dim : m;

  double params = 0;          // P: floats per seed
  double act_token = 0;       // A per token
  double act_sequence = 0;    // A per sequence on top of N * act_token
  double eval_width = 0;      // the trainer's chunking width per token
  const HeadKindRow* kind = FindHeadKind(h.kind);
  if (kind == nullptr) return MemoryEstimate();
  if (kind->softmax_scores) {
    const double ds = !constructed && h.score_dim > 0 ? h.score_dim : m;
    params = 2 * m * ds + 1 + (m + 1) * dv + (m + 1) * k * dv + (m + 1) * k;
    act_token = 2 * ds + 3 * dv + 2 * k * dv + 4 * k + m;
    act_sequence = 3 * n * n;  // scores, scaled scores, softmax weights
    eval_width = 2 * m;
  } else {
    double r = t.rank;
    if (h.construction == Construction::kRank1) r = 1;
    if (h.construction == Construction::kIndicator) r = std::ldexp(1.0, t.dataset.m);
    const double heads = kind->has_num_heads ? h.num_heads : 1;
    const bool favor = h.feature_map == FeatureMap::kFavorPlus && !kind->signed_features &&
                       !constructed;
    const double map_out = favor ? heads * m : heads * r;
    double hidden_sum = 0;
    double din = m;
    double one_map_params = 0;
    for (int w : constructed ? std::vector<int>{} : h.hidden) {
      one_map_params += (din + 1) * w;
      hidden_sum += w;
      din = w;
    }
    one_map_params += (din + 1) * map_out;
    params = 2 * one_map_params + (m + 1) * heads * dv + (m + 1) * k * heads * dv + (m + 1) * k;
    if (favor) params += heads * r * m;  // the fixed projection (a buffer)
    // One token map: each hidden layer's affine output and ReLU, the last
    // affine output, then the feature map (its input, output and the +eps or
    // /sqrt(r) step; FAVOR+ also the per-head z and the projection).
    const double feature_map = favor ? heads * m + 3 * heads * r : 2 * heads * r;
    const double one_map = 2 * hidden_sum + map_out + feature_map;
    act_token = 2 * one_map + 3 * heads * dv + heads + 2 * k * heads * dv + 4 * k + m;
    if (heads > 1) act_token += 2 * heads * r + 2 * heads * dv;  // per-head copies
    act_sequence = n * n * heads;
    eval_width = heads * std::max(r, m) * 2;
  }
  const double act_per_seq = n * act_token + act_sequence;

  const DatasetSize size = EstimateDatasetSize(t.dataset);
  const double train = static_cast<double>(size.train);
  const double test = static_cast<double>(size.test);
  const double batch =
      t.train.batch_size > 0 ? std::min<double>(t.train.batch_size, train) : train;
  // EvaluateSplit's chunk for one seed: ~16M floats of features and scores.
  // Training steps and evaluations alternate, so the larger of the two counts.
  const double chunk =
      std::max(1.0, std::floor(16777216.0 / std::max(1.0, n * (eval_width + n * n + m))));
  const double eval_seqs = std::min(std::max(train, test), chunk);

  MemoryEstimate e;
  e.per_seed_bytes = SaturatedBytes(
      4.0 * (8 * params + act_per_seq * std::max(2 * batch, eval_seqs)));
  double fixed = 12.0 * n * (train + test)                     // host tokens and targets
                 + 4.0 * n * (m + 1) * (train + std::max(train, test));  // float tensors
  // What the kind keeps besides (a pool's vectors), from its row.
  const DatasetKindRow* dataset = FindDatasetKind(t.dataset.kind);
  if (dataset != nullptr && dataset->extra_memory_bytes != nullptr) {
    fixed += dataset->extra_memory_bytes(t.dataset);
  }
  e.fixed_bytes = SaturatedBytes(fixed);
  return e;
}

int64_t EstimateTaskMemoryBytes(const TaskSpec& t) {
  return EstimateTaskMemory(t).Total(static_cast<int64_t>(t.seeds.size()));
}

std::string FormatBytes(int64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(bytes, " B");
  const int decimals = v >= 100 ? 0 : v >= 10 ? 1 : 2;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string num = buf;
  if (num.find('.') != std::string::npos) {
    while (num.back() == '0') num.pop_back();
    if (num.back() == '.') num.pop_back();
  }
  return absl::StrCat(num, " ", kUnits[unit]);
}

bool HasTestSplit(const SweepSpec& spec) {
  // Recipe 0's dataset, without a head: a spec may not list one yet.
  const DatasetSpec first = ApplyAxes(spec, RecipeValues(spec, 0)).dataset;
  const DatasetKindRow* kind = FindDatasetKind(first.kind);
  return kind != nullptr && kind->has_test_split(first);
}

TaskSpec MakeTaskSpec(const SweepSpec& sweep, int head_index, int rank,
                      std::vector<uint64_t> seeds) {
  return MakeTaskSpec(sweep, head_index, rank, 0, std::move(seeds));
}

TaskSpec MakeTaskSpec(const SweepSpec& sweep, int head_index, int rank, int recipe,
                      std::vector<uint64_t> seeds) {
  TaskSpec t = ApplyAxes(sweep, RecipeValues(sweep, recipe));
  t.head = sweep.heads.at(static_cast<size_t>(head_index));
  t.rank = HeadHasRank(t.head) ? rank : 0;
  t.seeds = std::move(seeds);
  return t;
}

}  // namespace ranksweep
