// The contents of a file a flag names (a TLS certificate, a key, a token
// file), read whole; InvalidArgument naming the flag when it cannot be read.
#ifndef RANKSWEEP_COMMON_FLAG_FILE_H_
#define RANKSWEEP_COMMON_FLAG_FILE_H_

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace ranksweep {

inline absl::StatusOr<std::string> ReadFlagFile(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_FLAG_FILE_H_
