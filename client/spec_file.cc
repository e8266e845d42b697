#include "client/spec_file.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/hints.h"
#include "common/spec/dataset_kinds.h"
#include "common/spec/spec_fields.h"
#include "common/status_macros.h"

namespace ranksweep::client {

absl::StatusOr<HeadSpec> ParseHeadShorthand(const std::string& text, const std::string& field) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  HeadSpec head;
  absl::StatusOr<HeadKind> kind = ParseHeadKind(parts[0], field);
  if (!kind.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kind.status().message(),
        DidYouMeanSuffix(parts[0], {"kernel", "softmax", "signed_kernel", "multihead_kernel"})));
  }
  head.kind = *kind;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (absl::StartsWith(part, "h=")) {
      head.hidden.clear();
      for (absl::string_view w : absl::StrSplit(part.substr(2), '/')) {
        int width;
        if (!absl::SimpleAtoi(w, &width)) {
          return absl::InvalidArgumentError(absl::StrCat(
              field, ": hidden width \"", w, "\" in \"", text, "\" is not an integer"));
        }
        head.hidden.push_back(width);
      }
      continue;
    }
    if (part.size() > 1 && part[0] == 'x') {
      int n;
      if (!absl::SimpleAtoi(part.substr(1), &n)) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": head count \"", part, "\" in \"", text, "\" is not xN"));
      }
      head.num_heads = n;
      continue;
    }
    if (auto map = ParseFeatureMap(part, field); map.ok()) {
      head.feature_map = *map;
      continue;
    }
    if (auto construction = ParseConstruction(part, field); construction.ok()) {
      head.construction = *construction;
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": unknown part \"", part, "\" in \"", text,
        "\"; expected a feature map (elu1 relu_eps softplus exp favor), a construction "
        "(none rank1 indicator softmax_exact), xN or h=W1/W2",
        DidYouMeanSuffix(part, {"elu1", "relu_eps", "softplus", "exp", "favor", "none", "rank1",
                                "indicator", "softmax_exact"})));
  }
  return head;
}

absl::StatusOr<std::vector<HeadSpec>> ParseHeadList(const std::vector<std::string>& items) {
  std::vector<HeadSpec> heads;
  for (size_t i = 0; i < items.size(); ++i) {
    ASSIGN_OR_RETURN(HeadSpec head,
                     ParseHeadShorthand(items[i], absl::StrCat("--heads[", i, "]")));
    heads.push_back(std::move(head));
  }
  return heads;
}

namespace {

// The row of a dataset, training or pruning field, by name (the structs
// share no field name); all nullptr for none.
struct FieldRow {
  const SpecField<DatasetSpec>* dataset = nullptr;
  const SpecField<TrainSpec>* train = nullptr;
  const SpecField<PruneSpec>* prune = nullptr;

  bool found() const { return dataset != nullptr || train != nullptr || prune != nullptr; }
  // Its flag; the dashed `name` for none.
  std::string Flag(std::string name) const {
    if (dataset != nullptr) name = FieldFlag(*dataset);
    if (train != nullptr) name = FieldFlag(*train);
    if (prune != nullptr) name = FieldFlag(*prune);
    std::replace(name.begin(), name.end(), '_', '-');
    return "--" + name;
  }
  // SetFromText on the struct of the row found.
  absl::Status Set(const std::string& text, const std::string& flag, SweepSpec* spec) const {
    if (dataset != nullptr) return SetFromText(*dataset, text, flag, &spec->dataset);
    if (train != nullptr) return SetFromText(*train, text, flag, &spec->train);
    return SetFromText(*prune, text, flag, &spec->prune);
  }
};

FieldRow FindRow(const std::string& name) {
  FieldRow row;
  row.dataset = FindDatasetField(name);
  if (row.dataset == nullptr) row.train = FindTrainField(name);
  if (!row.found()) row.prune = FindPruneField(name);
  return row;
}

}  // namespace

std::string FieldFlagOf(const std::string& name) { return FindRow(name).Flag(name); }

absl::Status ApplyOverrides(const SpecOverrides& o, SweepSpec* spec) {
  if (o.name) spec->name = *o.name;
  if (o.heads) {
    ASSIGN_OR_RETURN(spec->heads, ParseHeadList(*o.heads));
  }
  if (o.ranks) spec->ranks = *o.ranks;
  if (o.seed_count) {
    spec->seed_count = *o.seed_count;
    spec->seeds.clear();
  }
  if (o.seeds) spec->seeds = *o.seeds;
  if (o.priority) spec->priority = *o.priority;
  for (const FieldValues& field : o.fields) {
    const FieldRow row = FindRow(field.name);
    const std::string flag = row.Flag(field.name);
    if (!row.found()) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": \"", field.name, "\" is not a field of the dataset, training or pruning"));
    }
    if (IsAxisName(field.name)) {
      std::vector<double> values;
      for (const std::string& text : field.values) {
        ASSIGN_OR_RETURN(double v, ParseAxisValue(field.name, text, flag));
        values.push_back(v);
      }
      absl::Status s = SetAxisValues(field.name, std::move(values), spec);
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", s.message()));
      continue;
    }
    if (field.values.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " takes one value, got ", field.values.size(),
          "; it is not a recipe axis (axes: ", absl::StrJoin(AxisNames(), ", "), ")"));
    }
    RETURN_IF_ERROR(row.Set(field.values[0], flag, spec));
  }
  return absl::OkStatus();
}

}  // namespace ranksweep::client
