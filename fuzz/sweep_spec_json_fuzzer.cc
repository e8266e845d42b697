// libFuzzer target: SweepSpecFromJson on arbitrary bytes, then
// ValidateSweepSpec and, for a valid spec, the JSON round trip: writing a
// valid spec and reading it back must give the same spec (same JSON) and
// still validate. Any crash, sanitizer report or failed check is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/spec/spec.h"
#include "common/spec/spec_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ranksweep::SweepSpec> spec = ranksweep::SweepSpecFromJson(text);
  if (!spec.ok()) return 0;
  if (!ranksweep::ValidateSweepSpec(*spec).ok()) return 0;
  (void)ranksweep::SweepSeeds(*spec);
  const std::string json = ranksweep::SweepSpecToJson(*spec);
  absl::StatusOr<ranksweep::SweepSpec> again = ranksweep::SweepSpecFromJson(json);
  if (!again.ok() || !ranksweep::ValidateSweepSpec(*again).ok() ||
      ranksweep::SweepSpecToJson(*again) != json) {
    fprintf(stderr, "round trip changed a valid spec:\n%s\n", json.c_str());
    abort();
  }
  return 0;
}
