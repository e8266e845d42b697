// The fields of the recipe structs (DatasetSpec, HeadSpec, TrainSpec) and
// of a sweep's PruneSpec as rows of one table per struct. A row names its field once: the name is the
// JSON key (spec_json.h), the protobuf field's name in ranksweep.v1
// (proto/convert.h) and, where the field is a recipe axis, the axis' name
// (AxisNames in spec.h). Those forms loop over the rows; none of them names
// a field of these structs.
//
// The rows also make the flags: `ranksweep submit` (the dataset's, the
// training's and the pruning's rows) and `ranksweep-train` (the task's) have
// one per row (FieldFlag), with the row's help and bounds.
//
// Adding a field to one of these structs is: the member (spec.h), its row
// here (spec_fields.cc), a field of the same name and type in the proto
// message, its range check (dataset_kinds.cc, head_kinds.cc or spec.cc), the
// code that uses it, and its tests (docs/ARCHITECTURE.md, "How to add a spec
// field"). proto_convert_test checks that every row has its proto field and
// every proto field its row; spec_fields_test pins the JSON a task key hashes
// and checks that a value outside a row's bounds fails validation.
//
// Thread-safety: the tables are immutable after static initialization.
#ifndef RANKSWEEP_COMMON_SPEC_SPEC_FIELDS_H_
#define RANKSWEEP_COMMON_SPEC_SPEC_FIELDS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/spec/spec.h"

namespace ranksweep {

// An enum field, read and written as the index of its value in the enum's
// declaration order (the proto's value minus one), and by name in JSON.
template <typename S>
struct EnumMember {
  int (*get)(const S& s);
  void (*set)(int value, S* s);
  // Every value's name, in declaration order.
  std::vector<std::string> names;
  // Parses a name; InvalidArgument naming `field` and the allowed names.
  absl::StatusOr<int> (*parse)(const std::string& text, const std::string& field);
};

// Where the JSON form writes a field. A spec's JSON is hashed into its task
// key, so a field added after others had stored results is written only
// when its value could not have been written before.
enum class JsonWrite {
  kAlways,
  // Only when not the struct's default value.
  kUnlessDefault,
  // DatasetSpec: only for a kind that has the field (DatasetKindHasField).
  kForItsKinds,
  // Both of the above.
  kForItsKindsUnlessDefault,
};

// Whether a field is one of some dataset kinds only.
inline bool ForItsKindsOnly(JsonWrite w) {
  return w == JsonWrite::kForItsKinds || w == JsonWrite::kForItsKindsUnlessDefault;
}

// The widest values a field may take whatever the rest of the spec holds
// (a list's bounds hold for each item). A flag may refuse a value outside
// them at once; validation checks the rest (code_weight <= m, ...).
struct FieldBounds {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool bounded() const { return min > -std::numeric_limits<double>::infinity(); }
};

template <typename S>
struct SpecField {
  const char* name;
  std::variant<int S::*, uint64_t S::*, double S::*, bool S::*, std::vector<int> S::*,
               EnumMember<S>>
      member;
  // What the field is, for its flags' help: "tokens per sequence, 1..64";
  // an enum's names are added by FieldHelp.
  const char* help = "";
  FieldBounds bounds = {};
  JsonWrite json = JsonWrite::kAlways;
  // On the wire 0 is "unset" (the default) and -1 stands for the spec's 0
  // ("never"), for an integer whose 0 means never and whose default is not.
  bool wire_minus_one_is_zero = false;
  // The flag, dashed without "--", where it is not the dashed name: a
  // struct's kind is --dataset or --head, the pruning's fields --prune-*.
  const char* flag = nullptr;
};

absl::Span<const SpecField<DatasetSpec>> DatasetFields();
absl::Span<const SpecField<HeadSpec>> HeadFields();
absl::Span<const SpecField<TrainSpec>> TrainFields();
absl::Span<const SpecField<PruneSpec>> PruneFields();

// A row by name; nullptr when the struct has no such field.
const SpecField<DatasetSpec>* FindDatasetField(const std::string& name);
const SpecField<TrainSpec>* FindTrainField(const std::string& name);
const SpecField<PruneSpec>* FindPruneField(const std::string& name);

// Whether a row's value is an integer (int, uint64, bool or enum).
template <typename S>
bool IsIntegerField(const SpecField<S>& f) {
  return !std::holds_alternative<double S::*>(f.member) &&
         !std::holds_alternative<std::vector<int> S::*>(f.member);
}

// A row's help for a flag, after its path in a spec (`part` is "dataset",
// "head" or "train"): the help, an enum's names and, for a field of some
// dataset kinds only, which: "dataset.code_weight: codeword weight w, 1..m
// (witness only)", "train.loss: mse | ce".
template <typename S>
std::string FieldHelp(const SpecField<S>& f, const std::string& part);

// The flag of a row, dashed without "--": `flag`, or the dashed name
// ("seq-len").
template <typename S>
std::string FieldFlag(const SpecField<S>& f);

// Sets a scalar row's value from what a user typed for `flag` ("--lr"):
// an integer, a number, true/false/1/0/yes/no or an enum's name, within the
// row's bounds. InvalidArgument naming `flag` and what it takes. A list row
// is refused (its flags parse lists themselves).
template <typename S>
absl::Status SetFromText(const SpecField<S>& f, const std::string& text, const std::string& flag,
                         S* s);

// What a flag of the row takes, for its help: "INT", "FLOAT", "NAME" (an
// enum), "BOOL" or "INTS" (a list).
template <typename S>
const char* FieldTypeName(const SpecField<S>& f) {
  if (std::holds_alternative<EnumMember<S>>(f.member)) return "NAME";
  if (std::holds_alternative<std::vector<int> S::*>(f.member)) return "INTS";
  if (std::holds_alternative<double S::*>(f.member)) return "FLOAT";
  if (std::holds_alternative<bool S::*>(f.member)) return "BOOL";
  return "INT";
}

// Whether a row is true-or-false (a switch on the command line).
template <typename S>
bool IsBoolField(const SpecField<S>& f) {
  return std::holds_alternative<bool S::*>(f.member);
}

// Sets a scalar row's value from a double (integers rounded to nearest,
// enums by index), as a recipe axis does. A list row is left as it is.
template <typename S>
void SetFromDouble(const SpecField<S>& f, double v, S* s);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_SPEC_FIELDS_H_
