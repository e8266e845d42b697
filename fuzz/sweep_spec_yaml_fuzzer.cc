// libFuzzer target: the YAML path of the CLI and the coordinator,
// ParseSweepSpecText(kYaml)
// (YAML -> JSON -> SweepSpec) on arbitrary bytes, then ValidateSweepSpec.
// Any crash, uncaught exception or sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/spec/spec.h"
#include "common/spec/spec_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ranksweep::SweepSpec> spec =
      ranksweep::ParseSweepSpecText(text, ranksweep::SpecFormat::kYaml, "fuzz");
  if (spec.ok()) (void)ranksweep::ValidateSweepSpec(*spec);
  return 0;
}
