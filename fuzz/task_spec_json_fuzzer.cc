// libFuzzer target: TaskSpecFromJson on arbitrary bytes, then
// ValidateTaskSpec and, for a valid task, the JSON round trip (same JSON,
// still valid). Any crash, sanitizer report or failed check is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/spec/spec.h"
#include "common/spec/spec_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ranksweep::TaskSpec> task = ranksweep::TaskSpecFromJson(text);
  if (!task.ok()) return 0;
  if (!ranksweep::ValidateTaskSpec(*task).ok()) return 0;
  const std::string json = ranksweep::TaskSpecToJson(*task);
  absl::StatusOr<ranksweep::TaskSpec> again = ranksweep::TaskSpecFromJson(json);
  if (!again.ok() || !ranksweep::ValidateTaskSpec(*again).ok() ||
      ranksweep::TaskSpecToJson(*again) != json) {
    fprintf(stderr, "round trip changed a valid task:\n%s\n", json.c_str());
    abort();
  }
  return 0;
}
