// Turning what a user types on `ranksweep submit` into a SweepSpec: the
// shorthand for heads and the flags that override a spec's fields. Spec
// files themselves (YAML or JSON) and the cost estimate are read by
// common/spec/spec_file.h, the one parser the coordinator uses too.
//
// Errors: InvalidArgument naming the flag. No gRPC here.
// Thread-safety: free functions without shared state.
#ifndef RANKSWEEP_CLIENT_SPEC_FILE_H_
#define RANKSWEEP_CLIENT_SPEC_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"
#include "common/spec/spec_file.h"

namespace ranksweep::client {

// The CLI shorthand for one head: KIND[:PART]... where KIND is a head kind
// name (spec.h Name()) and each PART is a feature map name ("elu1"), a
// construction name ("rank1", "indicator", "softmax_exact"), "xN" for
// num_heads (multihead_kernel), or "h=W1/W2/..." for the hidden widths of
// the token map. Examples: "kernel:elu1", "softmax", "multihead_kernel:elu1:x4",
// "kernel:favor:h=32/32", "kernel:rank1". Errors name `field` and the part.
absl::StatusOr<HeadSpec> ParseHeadShorthand(const std::string& text, const std::string& field);

// Parses each element with ParseHeadShorthand; field is "--heads[i]".
absl::StatusOr<std::vector<HeadSpec>> ParseHeadList(const std::vector<std::string>& items);

// Fields `ranksweep submit` sets from flags. Each set field replaces the
// spec's (the file's, when -f is given); unset fields leave it alone.
struct SpecOverrides {
  std::optional<std::string> name;
  std::optional<std::string> dataset;  // a DatasetKind name
  std::optional<int> m;
  std::optional<int> seq_len;
  std::optional<bool> final_query_only;
  std::optional<uint64_t> data_seed;
  // witness
  std::optional<int> code_weight;
  std::optional<int> max_overlap;
  std::optional<int> num_queries;
  // pool
  std::optional<int> weight;
  std::optional<double> bernoulli_p;
  std::optional<int> pool_size;
  std::optional<int> train_size;
  std::optional<int> test_size;
  std::optional<std::vector<std::string>> heads;  // ParseHeadShorthand items
  std::optional<std::vector<int>> ranks;
  std::optional<int> seed_count;                 // also clears explicit seeds
  std::optional<std::vector<uint64_t>> seeds;    // explicit seeds
  std::optional<int> max_steps;
  std::optional<double> lr;
  std::optional<int> batch_size;
  std::optional<int> eval_every;
  std::optional<int> early_stop_evals;
  std::optional<std::string> loss;  // a LossKind name
  std::optional<std::string> schedule;  // an LrSchedule name
  std::optional<int> warmup_steps;
  std::optional<int> priority;
  // Recipe axes given by their flags (--lr 0.01,0.003): one value sets the
  // field, several make the axis (SetAxisValues); applied after the fields
  // above.
  std::vector<SweepAxis> axes;
};

// Applies `overrides` to `spec`. InvalidArgument naming the flag for a bad
// enum name or head shorthand; range checks are left to ValidateSweepSpec.
absl::Status ApplyOverrides(const SpecOverrides& overrides, SweepSpec* spec);

// The command-line flag of a recipe axis: "--max-steps" for max_steps.
std::string AxisFlag(std::string name);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_SPEC_FILE_H_
