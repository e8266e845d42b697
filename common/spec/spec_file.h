// Reading sweep spec text (YAML or JSON) and what a spec will cost: one
// parser for every reader, the CLI's `submit -f` and the coordinator's
// ValidateSweep/SubmitSweep with spec text alike.
//
// Both forms go through one parser, SweepSpecFromJson (spec_json.h): YAML is
// first converted to JSON, so a YAML file and a JSON file use exactly the
// field names of spec.h and give the same SweepSpec. Syntax errors name the
// source and a 1-based "line:column"; errors from the spec parser (an
// unknown key, a wrong type) keep its message, and for YAML the location of
// the offending key is added when it can be found.
//
// Errors: InvalidArgument for anything wrong with the input; NotFound when a
// file cannot be opened. No gRPC, no Torch; yaml-cpp and nlohmann-json stay
// inside the .cc (library ranksweep_spec_file, built with the service only).
// Thread-safety: free functions without shared state.
#ifndef RANKSWEEP_COMMON_SPEC_SPEC_FILE_H_
#define RANKSWEEP_COMMON_SPEC_SPEC_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"

namespace ranksweep {

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

// "json" and "yaml" name a format; "" guesses it from `text` as
// GuessSpecFormat does for a name with neither extension. Anything else is
// InvalidArgument "FIELD must be one of json, yaml or empty (guess); got "X"".
absl::StatusOr<SpecFormat> ParseSpecFormat(const std::string& name, const std::string& text,
                                           const std::string& field);

// Spec text a client sends: the text itself, past kMaxSpecTextBytes, and its
// source name, past kMaxSpecSourceBytes, are refused before anything is
// parsed (CheckTextLength, result_validation.h). The largest example spec
// is under 3 KB.
constexpr size_t kMaxSpecTextBytes = size_t{1} << 20;
constexpr size_t kMaxSpecSourceBytes = 256;

// Parses spec text in the given format. `source` names it in errors.
absl::StatusOr<SweepSpec> ParseSweepSpecText(const std::string& text, SpecFormat format,
                                             const std::string& source);

// Reads `path` ("-" = stdin) and parses it, guessing the format.
absl::StatusOr<SweepSpec> LoadSweepSpecFile(const std::string& path);

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
// `submit --dry-run` prints on stderr
// and ValidateSweep returns.
std::vector<std::string> SweepCostLines(const SweepCost& cost);
// One warning per limit above that `cost` passes, naming the flags that
// shrink it; empty when none.
std::vector<std::string> SweepCostWarnings(const SweepSpec& spec, const SweepCost& cost);

// SpecWarnings then SweepCostWarnings: every warning `submit` prints and
// ValidateSweep returns, in that order.
std::vector<std::string> SweepWarnings(const SweepSpec& spec, const SweepCost& cost);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_SPEC_FILE_H_
