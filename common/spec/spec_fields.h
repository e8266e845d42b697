// The fields of the recipe structs (DatasetSpec, HeadSpec, TrainSpec) as
// rows of one table per struct. A row names its field once: the name is the
// JSON key (spec_json.h), the protobuf field's name in ranksweep.v1
// (proto/convert.h) and, where the field is a recipe axis, the axis' name
// (AxisNames in spec.h). Those forms loop over the rows; none of them names
// a field of these structs.
//
// Adding a field to one of these structs is: the member (spec.h), its row
// here (spec_fields.cc), a field of the same name and type in the proto
// message, its range check (dataset_kinds.cc, head_kinds.cc or spec.cc), the
// code that uses it, and its tests (docs/ARCHITECTURE.md, "How to add a spec
// field"). proto_convert_test checks that every row has its proto field and
// every proto field its row; spec_fields_test pins the JSON a task key hashes.
//
// Thread-safety: the tables are immutable after static initialization.
#ifndef RANKSWEEP_COMMON_SPEC_SPEC_FIELDS_H_
#define RANKSWEEP_COMMON_SPEC_SPEC_FIELDS_H_

#include <cstdint>
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

template <typename S>
struct SpecField {
  const char* name;
  std::variant<int S::*, uint64_t S::*, double S::*, bool S::*, std::vector<int> S::*,
               EnumMember<S>>
      member;
  JsonWrite json = JsonWrite::kAlways;
  // On the wire 0 is "unset" (the default) and -1 stands for the spec's 0
  // ("never"), for an integer whose 0 means never and whose default is not.
  bool wire_minus_one_is_zero = false;
};

absl::Span<const SpecField<DatasetSpec>> DatasetFields();
absl::Span<const SpecField<HeadSpec>> HeadFields();
absl::Span<const SpecField<TrainSpec>> TrainFields();

// A row by name; nullptr when the struct has no such field.
const SpecField<DatasetSpec>* FindDatasetField(const std::string& name);
const SpecField<TrainSpec>* FindTrainField(const std::string& name);

// Whether a row's value is an integer (int, uint64, bool or enum).
template <typename S>
bool IsIntegerField(const SpecField<S>& f) {
  return !std::holds_alternative<double S::*>(f.member) &&
         !std::holds_alternative<std::vector<int> S::*>(f.member);
}

// Sets a scalar row's value from a double (integers rounded to nearest,
// enums by index), as a recipe axis does. A list row is left as it is.
template <typename S>
void SetFromDouble(const SpecField<S>& f, double v, S* s);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_SPEC_FIELDS_H_
