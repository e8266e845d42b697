// --help and argument checks for the binaries whose flags are Abseil flags
// (ranksweepd, ranksweep-worker, ranksweep-train and the benchmarks in
// bench/): every flag under its dashed name ("--lease-seconds"),
// the spelling the documentation uses. Abseil's own --help would list the
// underscored names its flags are defined with (common/flag_names.h explains
// why both spellings parse); the underscored spellings stay accepted until
// the next release.
//
// Errors: none; a flag registry without matching flags prints only the usage
// message. Thread-safety: call from main() before other threads start.
#ifndef RANKSWEEP_COMMON_FLAG_HELP_H_
#define RANKSWEEP_COMMON_FLAG_HELP_H_

#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ranksweep {

// What argv asks for: nothing, the binary's own flags (--help, --helpshort,
// also written with one dash) or every flag, Abseil's included (--helpfull).
// Arguments after a bare "--" are not flags and ask for nothing.
enum class HelpRequest { kNone, kOwnFlags, kAllFlags };
HelpRequest FindHelpRequest(int argc, char** argv);

// One flag as --help shows it.
struct FlagHelpEntry {
  std::string file;           // where it is defined, as shown ("server/main.cc")
  std::string name;           // as defined, e.g. "lease_seconds"
  std::string help;
  std::string default_value;  // as Abseil prints it; quoted in the text when `is_string`
  bool is_string = false;
};

// The flags in Abseil's registry, sorted by file then name. With a
// non-empty `own_file` (a path suffix such as "server/main.cc") only the flags
// defined in that file; otherwise all of them. A flag's `file` is `own_file`
// when it matches, else its path from "absl/" on (or as registered).
std::vector<FlagHelpEntry> RegisteredFlags(absl::string_view own_file,
                                           bool only_own_file);

// The help text: "PROGRAM: USAGE", then for each file "  Flags from FILE:"
// and one entry per flag, "    --dashed-name (help); default: VALUE;",
// wrapped at 80 columns; `entries` in the order given.
std::string FormatFlagsHelp(absl::string_view program, absl::string_view usage,
                            const std::vector<FlagHelpEntry>& entries);

// For main(): when argv asks for help, writes it to `out` (the usage message
// is Abseil's program usage message) and returns true; the caller then exits
// 0 without parsing. Otherwise returns false and writes nothing.
bool PrintFlagsHelpIfAsked(int argc, char** argv, absl::string_view program,
                           absl::string_view own_file, std::ostream& out);

// For main(), before absl::ParseCommandLine (which would name the flag with
// underscores and suggest nothing): the error for the first argument before
// a bare "--" that is a flag Abseil's registry does not know, in either
// spelling (common/flag_names.h; a boolean's --noNAME counts; the argument
// after a known flag that is not a boolean is its value, "-1" included), such as
// "ranksweepd: unknown flag --lease-secnds; did you mean \"--lease-seconds\"?
// (ranksweepd --help lists them)"; the suggestion is among the flags of
// `own_file`. Nothing when every flag is known. The caller prints it and
// exits kExitUsage (common/exit_codes.h).
std::optional<std::string> UnknownFlagError(int argc, char** argv, absl::string_view program,
                                            absl::string_view own_file);

// The values a numeric flag allows, named in the error for a bad one. For a
// flag of type std::vector<std::string> (a comma-separated list) each item
// is an integer in the range.
struct FlagRange {
  std::string name;  // as defined, e.g. "max_steps"
  double min;
  double max;
};

// For main(), after UnknownFlagError and before absl::ParseCommandLine (which
// would name the flag with underscores, give no range, and take "-3" for an
// int flag that must be positive): the error for the first flag before a
// bare "--" whose value is missing, cannot be parsed as the flag's type
// (int, int64_t, uint64_t, double, bool; a list of integers when `ranges`
// has it) or is outside its entry in `ranges`, such as
// "train_bench: --max-steps must be an integer in 1..10000000, got \"abc\"".
// A flag without an entry is checked against its type's limits. Nothing when
// every value is good. The caller prints it and exits kExitUsage.
std::optional<std::string> BadFlagValueError(int argc, char** argv, absl::string_view program,
                                             const std::vector<FlagRange>& ranges);

// The registered flags argv names before a bare "--", by their defined
// (underscored) names, in either spelling; a boolean's --noNAME counts as
// NAME. For a binary whose flags override another source (a spec file) only
// where they were given.
std::set<std::string> GivenFlags(int argc, char** argv);

// The daemons' sequence in one call, for a binary that takes flags and no
// other arguments: --help (PrintFlagsHelpIfAsked, to `out`), then
// UnknownFlagError and BadFlagValueError (to `err`), then
// absl::ParseCommandLine on the underscored spelling (which answers
// --version and exits), then a refusal of any argument that is not a flag.
// Returns the exit code main() should return at once (0 after help,
// kExitUsage after an error), or nothing when the flags are set and main
// goes on.
std::optional<int> ParseFlagsOnly(int argc, char** argv, absl::string_view program,
                                  absl::string_view own_file,
                                  const std::vector<FlagRange>& ranges, std::ostream& out,
                                  std::ostream& err);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_FLAG_HELP_H_
