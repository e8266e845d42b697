#include "common/spec/spec.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ranksweep {
namespace {

template <typename E>
struct NameTable {
  E value;
  const char* name;
};

constexpr NameTable<DatasetKind> kDatasetKinds[] = {
    {DatasetKind::kExhaustive, "exhaustive"},
    {DatasetKind::kWitness, "witness"},
    {DatasetKind::kPool, "pool"}};
constexpr NameTable<HeadKind> kHeadKinds[] = {
    {HeadKind::kKernel, "kernel"},
    {HeadKind::kSoftmax, "softmax"},
    {HeadKind::kSignedKernel, "signed_kernel"},
    {HeadKind::kMultiheadKernel, "multihead_kernel"}};
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
constexpr NameTable<SweepMode> kSweepModes[] = {{SweepMode::kGrid, "grid"}};

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
      field, " must be one of ", absl::StrJoin(names, ", "), "; got \"", s, "\""));
}

// "field must be in lo..hi, got v"
template <typename T>
absl::Status CheckRange(const std::string& field, T v, T lo, T hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be in ", lo, "..", hi, ", got ", v));
}

absl::Status CheckUnit(const std::string& field, double v, bool open_low,
                       bool open_high, double lo = 0.0, double hi = 1.0) {
  bool ok = std::isfinite(v) && (open_low ? v > lo : v >= lo) &&
            (open_high ? v < hi : v <= hi);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, " must be in ", open_low ? "(" : "[", lo, ", ", hi,
      open_high ? ")" : "]", ", got ", v));
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

#define RS_CHECK(expr)                   \
  do {                                   \
    absl::Status rs_s_ = (expr);         \
    if (!rs_s_.ok()) return rs_s_;       \
  } while (0)

}  // namespace

const char* Name(DatasetKind v) { return Lookup(kDatasetKinds, v); }
const char* Name(HeadKind v) { return Lookup(kHeadKinds, v); }
const char* Name(FeatureMap v) { return Lookup(kFeatureMaps, v); }
const char* Name(Construction v) { return Lookup(kConstructions, v); }
const char* Name(LossKind v) { return Lookup(kLossKinds, v); }
const char* Name(SweepMode v) { return Lookup(kSweepModes, v); }

absl::StatusOr<DatasetKind> ParseDatasetKind(const std::string& s, const std::string& field) {
  return Parse(kDatasetKinds, s, field);
}
absl::StatusOr<HeadKind> ParseHeadKind(const std::string& s, const std::string& field) {
  return Parse(kHeadKinds, s, field);
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
absl::StatusOr<SweepMode> ParseSweepMode(const std::string& s, const std::string& field) {
  return Parse(kSweepModes, s, field);
}

bool HeadHasRank(const HeadSpec& head) {
  return head.kind != HeadKind::kSoftmax && head.construction == Construction::kNone;
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
  if (head.kind == HeadKind::kKernel || head.kind == HeadKind::kMultiheadKernel) {
    absl::StrAppend(&label, "/", Name(head.feature_map));
  }
  if (head.kind == HeadKind::kMultiheadKernel) absl::StrAppend(&label, "x", head.num_heads);
  if (head.kind == HeadKind::kSoftmax && head.score_dim > 0) {
    absl::StrAppend(&label, "/d", head.score_dim);
  }
  if (!head.hidden.empty()) absl::StrAppend(&label, "[", absl::StrJoin(head.hidden, ","), "]");
  return label;
}

absl::Status ValidateDataset(const DatasetSpec& d) {
  using L = SpecLimits;
  RS_CHECK(CheckEnum(kDatasetKinds, d.kind, "dataset.kind"));
  RS_CHECK(CheckRange("dataset.m", d.m, 1, L::kMaxM));
  RS_CHECK(CheckRange("dataset.seq_len", d.seq_len, 1, L::kMaxSeqLen));
  switch (d.kind) {
    case DatasetKind::kExhaustive:
      if (d.m * d.seq_len > L::kMaxExhaustiveBits) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dataset.m * dataset.seq_len must be in 1..", L::kMaxExhaustiveBits,
            " for an exhaustive dataset, got ", d.m, " * ", d.seq_len, " = ",
            d.m * d.seq_len));
      }
      break;
    case DatasetKind::kWitness:
      RS_CHECK(CheckRange("dataset.code_weight", d.code_weight, 1, d.m));
      RS_CHECK(CheckRange("dataset.max_overlap", d.max_overlap, 0, d.code_weight - 1));
      RS_CHECK(CheckRange("dataset.num_queries", d.num_queries, 0, 1 << 20));
      break;
    case DatasetKind::kPool:
      RS_CHECK(CheckRange("dataset.weight", d.weight, 0, d.m));
      if (d.weight == 0) RS_CHECK(CheckUnit("dataset.bernoulli_p", d.bernoulli_p, true, false));
      RS_CHECK(CheckRange("dataset.pool_size", d.pool_size, 2, L::kMaxDatasetSequences));
      RS_CHECK(CheckUnit("dataset.test_pool_share", d.test_pool_share, false, true));
      RS_CHECK(CheckRange("dataset.train_size", d.train_size, 1, L::kMaxDatasetSequences));
      RS_CHECK(CheckRange("dataset.test_size", d.test_size, 0, L::kMaxDatasetSequences));
      RS_CHECK(CheckUnit("dataset.hard_share", d.hard_share, false, false));
      break;
  }
  return absl::OkStatus();
}

absl::Status ValidateHead(const HeadSpec& h, const DatasetSpec& d) {
  using L = SpecLimits;
  RS_CHECK(CheckEnum(kHeadKinds, h.kind, "head.kind"));
  RS_CHECK(CheckEnum(kFeatureMaps, h.feature_map, "head.feature_map"));
  RS_CHECK(CheckEnum(kConstructions, h.construction, "head.construction"));
  if (h.hidden.size() > 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "head.hidden must have 0..4 widths, got ", h.hidden.size()));
  }
  for (int w : h.hidden) RS_CHECK(CheckRange("head.hidden[]", w, 1, L::kMaxWidth));
  RS_CHECK(CheckRange("head.value_dim", h.value_dim, 0, L::kMaxWidth));
  RS_CHECK(CheckRange("head.score_dim", h.score_dim, 0, L::kMaxWidth));
  if (h.kind == HeadKind::kMultiheadKernel) {
    RS_CHECK(CheckRange("head.num_heads", h.num_heads, 1, L::kMaxNumHeads));
  }
  if (h.feature_map == FeatureMap::kReluEps) {
    RS_CHECK(CheckUnit("head.relu_eps", h.relu_eps, true, false, 0.0, 1.0));
  }
  if (!(std::isfinite(h.beta) && h.beta >= 0 && h.beta <= 1000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("head.beta must be in [0, 1000] (0 = automatic), got ", h.beta));
  }
  switch (h.construction) {
    case Construction::kNone:
      break;
    case Construction::kRank1:
    case Construction::kIndicator:
      if (h.kind != HeadKind::kKernel) {
        return absl::InvalidArgumentError(absl::StrCat(
            "head.construction \"", Name(h.construction),
            "\" needs head.kind \"kernel\", got \"", Name(h.kind), "\""));
      }
      if (h.construction == Construction::kIndicator) {
        RS_CHECK(CheckRange("dataset.m (indicator construction)", d.m, 1, L::kMaxIndicatorM));
      }
      break;
    case Construction::kSoftmaxExact:
      if (h.kind != HeadKind::kSoftmax) {
        return absl::InvalidArgumentError(absl::StrCat(
            "head.construction \"softmax_exact\" needs head.kind \"softmax\", got \"",
            Name(h.kind), "\""));
      }
      break;
  }
  return absl::OkStatus();
}

absl::Status ValidateTrain(const TrainSpec& t) {
  using L = SpecLimits;
  RS_CHECK(CheckEnum(kLossKinds, t.loss, "train.loss"));
  RS_CHECK(CheckUnit("train.lr", t.lr, true, false, 0.0, 10.0));
  RS_CHECK(CheckUnit("train.beta1", t.beta1, false, true));
  RS_CHECK(CheckUnit("train.beta2", t.beta2, false, true));
  RS_CHECK(CheckUnit("train.weight_decay", t.weight_decay, false, false, 0.0, 1.0));
  RS_CHECK(CheckRange("train.batch_size", t.batch_size, 0, L::kMaxDatasetSequences));
  RS_CHECK(CheckRange("train.max_steps", t.max_steps, 0, L::kMaxSteps));
  RS_CHECK(CheckRange("train.eval_every", t.eval_every, 1, L::kMaxSteps));
  RS_CHECK(CheckRange("train.early_stop_evals", t.early_stop_evals, 0, 1000));
  return absl::OkStatus();
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
          "name must use only the characters A-Z a-z 0-9 . _ -, got \"", s.name, "\""));
    }
  }
  RS_CHECK(ValidateDataset(s.dataset));
  RS_CHECK(CheckRange<size_t>("heads count", s.heads.size(), 1, L::kMaxHeads));
  bool any_ranked = false;
  for (size_t i = 0; i < s.heads.size(); ++i) {
    absl::Status st = ValidateHead(s.heads[i], s.dataset);
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
  RS_CHECK(ValidateTrain(s.train));
  RS_CHECK(CheckRange("priority", s.priority, -100, 100));
  RS_CHECK(CheckEnum(kSweepModes, s.mode, "mode"));
  int64_t cells = 0;
  const int64_t seeds = static_cast<int64_t>(SweepSeeds(s).size());
  for (const HeadSpec& h : s.heads) {
    cells += (HeadHasRank(h) ? static_cast<int64_t>(s.ranks.size()) : 1) * seeds;
  }
  RS_CHECK(CheckRange<int64_t>("total cells (heads x ranks x seeds)", cells, 1, L::kMaxCells));
  return absl::OkStatus();
}

TaskSpec MakeTaskSpec(const SweepSpec& sweep, int head_index, int rank,
                      std::vector<uint64_t> seeds) {
  TaskSpec t;
  t.dataset = sweep.dataset;
  t.head = sweep.heads.at(static_cast<size_t>(head_index));
  t.rank = HeadHasRank(t.head) ? rank : 0;
  t.train = sweep.train;
  t.seeds = std::move(seeds);
  return t;
}

}  // namespace ranksweep
