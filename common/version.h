// The text every ranksweep binary prints for --version, so that all four say
// the same things in the same order:
//
//   ranksweepd 0.1.0
//   build id: 0.1.0+1a2b3c4d5e6f.0123456789ab
//   LibTorch: 1.13.1, CUDA: not available        (binaries that link LibTorch)
//
// The build id (cmake/BuildId.cmake) is the one workers report and the
// result cache keys on; the version is its part before '+'.
// Thread-safety: a pure function.
#ifndef RANKSWEEP_COMMON_VERSION_H_
#define RANKSWEEP_COMMON_VERSION_H_

#include <string>
#include <string_view>

namespace ranksweep {

// `torch_line` is "LibTorch: ..." for a binary that links LibTorch, empty
// for one that does not (the line is then left out). Ends in '\n'.
inline std::string VersionText(std::string_view program, std::string_view build_id,
                               std::string_view torch_line = {}) {
  const std::string_view version = build_id.substr(0, build_id.find('+'));
  std::string out;
  out.append(program).append(" ").append(version).append("\n");
  out.append("build id: ").append(build_id).append("\n");
  if (!torch_line.empty()) out.append(torch_line).append("\n");
  return out;
}

// The LibTorch line: "LibTorch: 1.13.1, CUDA: not available", or for a CUDA
// build "LibTorch: 2.5.1 (CUDA 12.4), CUDA: available (cuda:0 (NVIDIA H200))".
// `cuda_build` is the CUDA version LibTorch was built with (empty: a CPU
// build); `cuda_device` the device "cuda" resolves to here (empty: none).
inline std::string TorchVersionLine(std::string_view torch_version, std::string_view cuda_build,
                                    std::string_view cuda_device) {
  std::string out = "LibTorch: ";
  out.append(torch_version);
  if (!cuda_build.empty()) out.append(" (CUDA ").append(cuda_build).append(")");
  out.append(", CUDA: ");
  if (cuda_device.empty()) {
    out.append("not available");
  } else {
    out.append("available (").append(cuda_device).append(")");
  }
  return out;
}

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_VERSION_H_
