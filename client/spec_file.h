// Turning what a user types into a SweepSpec: spec files (YAML or JSON) and
// the `ranksweep submit` shorthand for heads.
//
// Both file forms go through one parser, SweepSpecFromJson (spec_json.h):
// YAML is first converted to JSON, so a YAML file and a JSON file use exactly
// the field names of spec.h and give the same SweepSpec. Syntax errors name
// the source and a 1-based "line:column"; errors from the spec parser (an
// unknown key, a wrong type) keep its message, and for YAML the location of
// the offending key is added when it can be found.
//
// Errors: InvalidArgument for anything wrong with the input; NotFound when a
// file cannot be opened. No gRPC here.
// Thread-safety: free functions without shared state.
#ifndef RANKSWEEP_CLIENT_SPEC_FILE_H_
#define RANKSWEEP_CLIENT_SPEC_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"

namespace ranksweep::client {

enum class SpecFormat { kJson, kYaml };

// kJson for names ending in ".json", kYaml for ".yaml"/".yml"; otherwise
// kJson when the first non-blank character is '{', else kYaml.
SpecFormat GuessSpecFormat(const std::string& path, const std::string& text);

// Converts a YAML document to JSON text (pretty-printed). Scalars follow the
// YAML 1.2 core schema: plain `true`/`false`, `null`/`~`, integers and floats
// become JSON literals; quoted scalars stay strings. Errors:
// "<source>:<line>:<col>: <what>" for syntax errors, duplicate keys,
// non-scalar keys, integers out of range and non-finite floats.
absl::StatusOr<std::string> YamlToJson(const std::string& yaml_text,
                                       const std::string& source = "<yaml>");

// Parses spec text in the given format. `source` names it in errors.
absl::StatusOr<SweepSpec> ParseSweepSpecText(const std::string& text, SpecFormat format,
                                             const std::string& source);

// Reads `path` ("-" = stdin) and parses it, guessing the format.
absl::StatusOr<SweepSpec> LoadSweepSpecFile(const std::string& path);

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

// Valid settings whose results do not test the paper's claims, one line
// each, for `submit` to print as warnings (empty: none). Today one: the
// cross-entropy loss with a trained kernel head. Its prediction is the argmax
// of m+1 logits, each affine in the attention output, which is not the
// paper's model (one affine readout within 1/2 of the target); on the witness
// family a trained rank-1 kernel head is exact under it (docs/TRAINER.md).
std::vector<std::string> SpecWarnings(const SweepSpec& spec);

// What a sweep will cost, as far as the spec tells (common/spec/spec.h
// EstimateDatasetSize and EstimateTaskMemory): the dataset's train and test
// sequences, and the memory of its largest task, one (head, rank) with every
// seed trained together as a worker fuses them (up to 64).
struct SweepCost {
  int64_t train_sequences = 0;
  int64_t test_sequences = 0;
  int64_t task_memory_bytes = 0;
  std::string largest_task;  // e.g. "kernel/elu1 at rank 64, 3 seeds"
};
SweepCost EstimateSweepCost(const SweepSpec& spec);

// Past these a sweep is large enough to surprise someone trying things on a
// laptop (a witness family at m = 24 without num_queries is 1.15 million
// sequences: minutes per task and 1.4 GiB); `submit` warns, and submits.
constexpr int64_t kLargeDatasetSequences = 200'000;
constexpr int64_t kLargeTaskMemoryBytes = int64_t{1} << 30;

// "dataset: 1,151,403 train sequences, no test split" and "memory: up to
// 42.1 GiB for the largest task (kernel/elu1 at rank 64, 3 seeds; an
// upper-bound estimate, docs/LIMITS.md)": what
// `submit --dry-run` prints on stderr.
std::vector<std::string> SweepCostLines(const SweepCost& cost);
// One warning per limit above that `cost` passes, naming the flags that
// shrink it; empty when none.
std::vector<std::string> SweepCostWarnings(const SweepSpec& spec, const SweepCost& cost);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_SPEC_FILE_H_
