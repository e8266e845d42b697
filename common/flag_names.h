// Flag spelling shared by every ranksweep binary: a flag may be written with
// dashes or with underscores (`--lease-seconds=5` and `--lease_seconds=5`).
// ranksweepd, ranksweep-worker, ranksweep-train and the benchmarks parse their
// flags with Abseil, whose flag names are C++ identifiers, so the dashed
// spelling is rewritten to the underscored one before parsing
// (common/flag_help.h); the `ranksweep` CLI names its flags with dashes and
// rewrites underscores to dashes. Only a flag's name changes: its
// value (after '=' or in the next argument) never does, nor does anything
// after a bare "--", which ends the flags.
#ifndef RANKSWEEP_COMMON_FLAG_NAMES_H_
#define RANKSWEEP_COMMON_FLAG_NAMES_H_

#include <algorithm>
#include <string>
#include <vector>

namespace ranksweep {

// `name` without its leading dashes, e.g. "lease-seconds" -> "lease_seconds".
inline std::string UnderscoreFlagName(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// `name` without its leading dashes, e.g. "lease_seconds" -> "lease-seconds":
// how help and documentation spell a flag.
inline std::string DashFlagName(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// argv with `from` replaced by `to` in the NAME of every "--NAME" or
// "--NAME=VALUE" argument. Arguments that are not flags ("-h", values,
// positional words) and every argument after a bare "--" are copied unchanged.
inline std::vector<std::string> RespellFlagNames(int argc, char** argv, char from, char to) {
  std::vector<std::string> out(argv, argv + argc);
  for (size_t i = 1; i < out.size(); ++i) {
    std::string& arg = out[i];
    if (arg == "--") break;
    if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    std::replace(arg.begin() + 2, arg.begin() + static_cast<std::ptrdiff_t>(end), from, to);
  }
  return out;
}

// For Abseil's parser: "--lease-seconds=5" -> "--lease_seconds=5".
inline std::vector<std::string> UnderscoreFlagNames(int argc, char** argv) {
  return RespellFlagNames(argc, argv, '-', '_');
}

// For the CLI's parser: "--max_steps=5" -> "--max-steps=5".
inline std::vector<std::string> DashFlagNames(int argc, char** argv) {
  return RespellFlagNames(argc, argv, '_', '-');
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
