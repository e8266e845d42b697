// --help for the binaries whose flags are Abseil flags (ranksweepd,
// ranksweep-worker): every flag under its dashed name ("--lease-seconds"),
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
// spelling (common/flag_names.h; a boolean's --noNAME counts), such as
// "ranksweepd: unknown flag --lease-secnds; did you mean \"--lease-seconds\"?
// (ranksweepd --help lists them)"; the suggestion is among the flags of
// `own_file`. Nothing when every flag is known. The caller prints it and
// exits kExitUsage (common/exit_codes.h).
std::optional<std::string> UnknownFlagError(int argc, char** argv, absl::string_view program,
                                            absl::string_view own_file);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_FLAG_HELP_H_
