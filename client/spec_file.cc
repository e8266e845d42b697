#include "client/spec_file.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/hints.h"
#include "common/spec/dataset_kinds.h"
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

std::string AxisFlag(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

absl::Status ApplyOverrides(const SpecOverrides& o, SweepSpec* spec) {
  if (o.name) spec->name = *o.name;
  if (o.dataset) {
    ASSIGN_OR_RETURN(spec->dataset.kind, ParseDatasetKind(*o.dataset, "--dataset"));
  }
  if (o.m) spec->dataset.m = *o.m;
  if (o.seq_len) spec->dataset.seq_len = *o.seq_len;
  if (o.final_query_only) spec->dataset.final_query_only = *o.final_query_only;
  if (o.data_seed) spec->dataset.data_seed = *o.data_seed;
  DatasetSpec& d = spec->dataset;
  if (o.code_weight) d.code_weight = *o.code_weight;
  if (o.max_overlap) d.max_overlap = *o.max_overlap;
  if (o.num_queries) d.num_queries = *o.num_queries;
  if (o.weight) d.weight = *o.weight;
  if (o.bernoulli_p) d.bernoulli_p = *o.bernoulli_p;
  if (o.pool_size) d.pool_size = *o.pool_size;
  if (o.train_size) d.train_size = *o.train_size;
  if (o.test_size) d.test_size = *o.test_size;
  if (o.heads) {
    ASSIGN_OR_RETURN(spec->heads, ParseHeadList(*o.heads));
  }
  if (o.ranks) spec->ranks = *o.ranks;
  if (o.seed_count) {
    spec->seed_count = *o.seed_count;
    spec->seeds.clear();
  }
  if (o.seeds) spec->seeds = *o.seeds;
  if (o.max_steps) spec->train.max_steps = *o.max_steps;
  if (o.lr) spec->train.lr = *o.lr;
  if (o.batch_size) spec->train.batch_size = *o.batch_size;
  if (o.eval_every) spec->train.eval_every = *o.eval_every;
  if (o.early_stop_evals) spec->train.early_stop_evals = *o.early_stop_evals;
  if (o.loss) {
    ASSIGN_OR_RETURN(spec->train.loss, ParseLossKind(*o.loss, "--loss"));
  }
  if (o.schedule) {
    ASSIGN_OR_RETURN(spec->train.schedule, ParseLrSchedule(*o.schedule, "--schedule"));
  }
  if (o.warmup_steps) spec->train.warmup_steps = *o.warmup_steps;
  if (o.priority) spec->priority = *o.priority;
  for (const SweepAxis& axis : o.axes) {
    absl::Status s = SetAxisValues(axis.name, axis.values, spec);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(AxisFlag(axis.name), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace ranksweep::client
