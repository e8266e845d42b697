// The registry of dataset kinds: one row per kind holds everything the
// spec side knows of it -- its name, the ranges of its own fields, the checks
// that need its construction, its size, whether it has a test split and the
// theory's rank bounds, the sizes a result's facts must report, and what
// shrinks it. Validation (spec.h), the size and memory estimates, the
// result checks of the coordinator (server/core/results/result_checks.h),
// the CLI's size warning and the JSON writer read the row, so none of them
// names a kind. The trainer registers how a kind is built
// (worker/trainer/dataset.cc, kBuilders).
//
// Adding a kind (docs/ARCHITECTURE.md, "How to add a dataset kind"): a
// DatasetKind value and its row in dataset_kinds.cc, its builder in the
// trainer, its proto enum value, and tests.
//
// Thread-safety: the rows are constant.
#ifndef RANKSWEEP_COMMON_SPEC_DATASET_KINDS_H_
#define RANKSWEEP_COMMON_SPEC_DATASET_KINDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/spec/spec.h"

namespace ranksweep {

struct DatasetKindRow {
  DatasetKind kind;
  const char* name;  // as specs and the CLI write it
  // The ranges of the kind's own fields, after the shared ones (kind, m,
  // seq_len) have passed. InvalidArgument naming the field and its range.
  absl::Status (*validate)(const DatasetSpec& d);
  // The checks that need the data's construction (a witness code), taking
  // their steps from `steps_left` (a sweep's budget, SpecLimits); nullptr
  // when the static ranges say all.
  absl::Status (*check_buildable)(const DatasetSpec& d, uint64_t* steps_left);
  // Train and test sequences, exact where the spec determines them
  // (EstimateDatasetSize).
  DatasetSize (*size)(const DatasetSpec& d);
  // Whether a task of this dataset has a test split.
  bool (*has_test_split)(const DatasetSpec& d);
  // Whether the theory's rank bounds exist for it (the result's facts carry
  // rank_lower_bound and rank_upper_bound = distinct queries).
  bool has_rank_bounds;
  // The sizes a result's facts must report where the spec determines them:
  // InvalidArgument "result.facts.train_sequences must be N (why), got M".
  absl::Status (*check_fact_sizes)(const DatasetSpec& d, const DatasetFacts& f);
  // Host bytes a task of it needs beyond its tokens and targets (a pool's
  // vectors); nullptr for none.
  double (*extra_memory_bytes)(const DatasetSpec& d);
  // The spec fields of its own, beyond kind, m, seq_len, final_query_only and
  // data_seed, as JSON names them: what a spec of the kind writes.
  std::vector<std::string> fields;
  // The CLI flags that make its dataset smaller, for submit's size warning.
  const char* shrink_flags;
};

// The row of `kind`; nullptr for a value no row has (a spec built in code).
const DatasetKindRow* FindDatasetKind(DatasetKind kind);
// Every row, in DatasetKind order.
const std::vector<DatasetKindRow>& DatasetKinds();
// Whether `d`'s kind writes `field` (DatasetKindRow::fields).
bool DatasetKindHasField(DatasetKind kind, const std::string& field);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_DATASET_KINDS_H_
