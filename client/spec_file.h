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

// The values given to the flag of a dataset, training or pruning field (a
// row of DatasetFields(), TrainFields() or PruneFields(), spec_fields.h, by
// its name: "seq_len"; the dataset's "kind" is --dataset), as typed. A
// recipe axis takes one value or several (an axis); any other field takes
// one.
struct FieldValues {
  std::string name;
  std::vector<std::string> values;
};

// Fields `ranksweep submit` sets from flags. Each set field replaces the
// spec's (the file's, when -f is given); unset fields leave it alone.
struct SpecOverrides {
  std::optional<std::string> name;
  std::optional<std::vector<std::string>> heads;  // ParseHeadShorthand items
  std::optional<std::vector<int>> ranks;
  std::optional<int> seed_count;                 // also clears explicit seeds
  std::optional<std::vector<uint64_t>> seeds;    // explicit seeds
  std::optional<int> priority;
  // The dataset's, the training's and the pruning's fields, applied after
  // the above in this order (the dataset's kind first, as the flags are
  // listed).
  std::vector<FieldValues> fields;
};

// Applies `overrides` to `spec`. InvalidArgument naming the flag for a value
// that is not of the field's type or outside its bounds (FieldBounds), a bad
// enum name or head shorthand, or several values for a field that is not an
// axis; the checks across fields are left to ValidateSweepSpec.
absl::Status ApplyOverrides(const SpecOverrides& overrides, SweepSpec* spec);

// The command-line flag of a dataset, training or pruning field:
// "--max-steps" for max_steps, "--dataset" for the dataset's kind,
// "--prune-eta" for the pruning's eta.
std::string FieldFlagOf(const std::string& name);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_SPEC_FILE_H_
