// Flag spelling shared by every ranksweep binary: a flag may be written with
// dashes or with underscores (`--lease-seconds=5` and `--lease_seconds=5`).
// Every binary names its flags with dashes (common/flags.h) and rewrites the
// underscored spelling, the older one, to dashes before parsing. Only a
// flag's name changes: its value (after '=' or in the next argument) never
// does, nor does anything after a bare "--", which ends the flags.
#ifndef RANKSWEEP_COMMON_FLAG_NAMES_H_
#define RANKSWEEP_COMMON_FLAG_NAMES_H_

#include <algorithm>
#include <string>
#include <vector>

namespace ranksweep {

// argv with '_' replaced by '-' in the NAME of every "--NAME" or
// "--NAME=VALUE" argument: "--max_steps=5" -> "--max-steps=5". Arguments
// that are not flags ("-h", values, positional words) and every argument
// after a bare "--" are copied unchanged.
inline std::vector<std::string> DashFlagNames(int argc, char** argv) {
  std::vector<std::string> out(argv, argv + argc);
  for (size_t i = 1; i < out.size(); ++i) {
    std::string& arg = out[i];
    if (arg == "--") break;
    if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    std::replace(arg.begin() + 2, arg.begin() + static_cast<std::ptrdiff_t>(end), '_', '-');
  }
  return out;
}

// Pointers into `args` for an argv-style parser; `args` must outlive them.
inline std::vector<char*> ArgvOf(std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_FLAG_NAMES_H_
