// JSON form of the spec and result types (spec.h). The keys are the struct
// field names; enums use the names of spec.h's Name(). Missing keys keep the
// struct's default; unknown keys are rejected so that typos do not pass
// silently. Parse errors report line and column.
#ifndef RANKSWEEP_COMMON_SPEC_SPEC_JSON_H_
#define RANKSWEEP_COMMON_SPEC_SPEC_JSON_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"

namespace ranksweep {

std::string SweepSpecToJson(const SweepSpec& spec, int indent = -1);
absl::StatusOr<SweepSpec> SweepSpecFromJson(const std::string& text);

std::string TaskSpecToJson(const TaskSpec& spec, int indent = -1);
absl::StatusOr<TaskSpec> TaskSpecFromJson(const std::string& text);

std::string SeedResultToJson(const SeedResult& result, int indent = -1);
absl::StatusOr<SeedResult> SeedResultFromJson(const std::string& text);

// A JSON array of SeedResult objects.
std::string SeedResultsToJson(const std::vector<SeedResult>& results, int indent = -1);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_SPEC_JSON_H_
