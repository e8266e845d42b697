#include "common/flag_help.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <tuple>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/did_you_mean.h"
#include "common/exit_codes.h"
#include "common/flag_names.h"

namespace ranksweep {
namespace {

constexpr size_t kWidth = 80;
constexpr absl::string_view kEntryIndent = "    ";
constexpr absl::string_view kWrapIndent = "      ";

// Appends `text` word by word, starting a new line (indented by kWrapIndent)
// before a word that would pass kWidth.
void AppendWrapped(absl::string_view first_indent, absl::string_view text, std::string& out) {
  std::string line(first_indent);
  bool line_has_word = false;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (line_has_word && line.size() + 1 + word.size() > kWidth) {
      absl::StrAppend(&out, line, "\n");
      line = std::string(kWrapIndent);
      line_has_word = false;
    }
    if (line_has_word) line += ' ';
    absl::StrAppend(&line, word);
    line_has_word = true;
  }
  absl::StrAppend(&out, line, "\n");
}


// One flag argument of argv before a bare "--": "--NAME", "--NAME=VALUE" or,
// for a registered flag that is not a boolean, "--NAME VALUE" (the next
// argument is its value whatever it looks like, "-1" included, as Abseil's
// parser takes it).
struct FlagArg {
  int index = 0;         // of the flag in argv
  std::string name;      // underscored, without dashes or value
  const absl::CommandLineFlag* flag = nullptr;  // null: not in the registry
  bool negated = false;  // --noNAME of a boolean NAME
  bool has_value = false;
  bool separate_value = false;  // the value is argv[index + 1]
  std::string value;
};

std::vector<FlagArg> FlagArgs(int argc, char** argv) {
  std::vector<FlagArg> out;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // a value or a subcommand
    FlagArg a;
    a.index = i;
    const absl::string_view body = absl::StripPrefix(absl::StripPrefix(arg, "-"), "-");
    const size_t eq = body.find('=');
    a.name = UnderscoreFlagName(std::string(body.substr(0, eq)));
    a.flag = absl::FindCommandLineFlag(a.name);
    if (a.flag == nullptr && absl::StartsWith(a.name, "no")) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(a.name.substr(2));
      if (flag != nullptr && flag->IsOfType<bool>()) {
        a.flag = flag;
        a.negated = true;
      }
    }
    if (eq != absl::string_view::npos) {
      a.has_value = true;
      a.value = std::string(body.substr(eq + 1));
    } else if (a.flag != nullptr && !a.flag->IsOfType<bool>() && i + 1 < argc) {
      a.has_value = true;
      a.separate_value = true;
      a.value = argv[++i];
    }
    out.push_back(std::move(a));
  }
  return out;
}

// Abseil's own flags, which ParseCommandLine knows even where their
// definitions are not linked into the registry.
bool IsBuiltInFlag(const std::string& underscored) {
  static const char* const kBuiltIn[] = {"help", "helpfull", "helpshort", "helppackage",
                                         "helpmatch", "helpon", "version", "only_check_args",
                                         "flagfile", "fromenv", "tryfromenv", "undefok"};
  return std::find(std::begin(kBuiltIn), std::end(kBuiltIn), underscored) != std::end(kBuiltIn);
}

// "an integer in 1..64", "a number in 0..1", "a number": what a flag of this
// type within `range` (or its type's limits) takes.
std::string Allowed(const absl::CommandLineFlag& flag, const FlagRange* range) {
  auto integers = [&](absl::string_view what, auto lowest, auto highest) {
    if (range == nullptr) return absl::StrCat(what, " in ", lowest, "..", highest);
    return absl::StrCat(what, " in ", absl::StrFormat("%.0f", range->min), "..",
                        absl::StrFormat("%.0f", range->max));
  };
  if (flag.IsOfType<int>()) {
    return integers("an integer", std::numeric_limits<int>::min(),
                    std::numeric_limits<int>::max());
  }
  if (flag.IsOfType<int64_t>()) {
    return integers("an integer", std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max());
  }
  if (flag.IsOfType<uint64_t>()) {
    return integers("an integer", uint64_t{0}, std::numeric_limits<uint64_t>::max());
  }
  if (flag.IsOfType<std::vector<std::string>>()) {
    return integers("a comma-separated list of integers", int64_t{0}, int64_t{0});
  }
  if (flag.IsOfType<bool>()) return "true or false";
  if (range == nullptr) return "a number";
  return absl::StrCat("a number in ", range->min, "..", range->max);
}

// Whether `text` is a value of `flag`'s type within `range` (when given).
bool GoodValue(const absl::CommandLineFlag& flag, const FlagRange* range,
               absl::string_view text) {
  auto in_range = [&](double v) { return range == nullptr || (v >= range->min && v <= range->max); };
  if (flag.IsOfType<int>()) {
    int v;
    return absl::SimpleAtoi(text, &v) && in_range(v);
  }
  if (flag.IsOfType<int64_t>()) {
    int64_t v;
    return absl::SimpleAtoi(text, &v) && in_range(static_cast<double>(v));
  }
  if (flag.IsOfType<uint64_t>()) {
    uint64_t v;
    return absl::SimpleAtoi(text, &v) && in_range(static_cast<double>(v));
  }
  if (flag.IsOfType<double>()) {
    double v;
    return absl::SimpleAtod(text, &v) && std::isfinite(v) && in_range(v);
  }
  if (flag.IsOfType<bool>()) {
    bool v;
    return absl::SimpleAtob(text, &v);
  }
  if (flag.IsOfType<std::vector<std::string>>() && range != nullptr) {
    if (text.empty()) return true;  // an empty list
    for (absl::string_view item : absl::StrSplit(text, ',')) {
      int64_t v;
      if (!absl::SimpleAtoi(item, &v) || !in_range(static_cast<double>(v))) return false;
    }
    return true;
  }
  return true;  // strings, and types Abseil checks itself
}

}  // namespace

std::optional<std::string> UnknownFlagError(int argc, char** argv, absl::string_view program,
                                            absl::string_view own_file) {
  for (const FlagArg& a : FlagArgs(argc, argv)) {
    if (a.flag != nullptr || IsBuiltInFlag(a.name)) continue;
    std::vector<std::string> choices;
    for (const FlagHelpEntry& e : RegisteredFlags(own_file, /*only_own_file=*/true)) {
      choices.push_back(DashFlagName(e.name));
    }
    const std::string dashed = DashFlagName(a.name);
    const std::string match = ClosestMatch(dashed, choices);
    return absl::StrCat(program, ": unknown flag --", dashed,
                        match.empty() ? "" : absl::StrCat("; did you mean \"--", match, "\"?"),
                        " (", program, " --help lists them)\n");
  }
  return std::nullopt;
}

std::optional<std::string> BadFlagValueError(int argc, char** argv, absl::string_view program,
                                             const std::vector<FlagRange>& ranges) {
  for (const FlagArg& a : FlagArgs(argc, argv)) {
    if (a.flag == nullptr || a.negated) continue;
    if (a.flag->IsOfType<bool>() && !a.has_value) continue;  // --NAME: true
    const FlagRange* range = nullptr;
    for (const FlagRange& r : ranges) {
      if (r.name == a.flag->Name()) range = &r;
    }
    if (a.has_value && GoodValue(*a.flag, range, a.value)) continue;
    // A string takes any value, but needs one.
    if (!a.has_value && a.flag->IsOfType<std::string>()) {
      return absl::StrCat(program, ": --", DashFlagName(a.name), " needs a value\n");
    }
    if (a.has_value && a.flag->IsOfType<std::string>()) continue;
    std::string got = "nothing";
    if (a.has_value) {
      double number;
      const bool plain_number = absl::SimpleAtod(a.value, &number) && std::isfinite(number) &&
                                !a.flag->IsOfType<std::vector<std::string>>();
      got = plain_number ? a.value : absl::StrCat("\"", a.value, "\"");
    }
    return absl::StrCat(program, ": --", DashFlagName(a.name), " must be ",
                        Allowed(*a.flag, range), ", got ", got, "\n");
  }
  return std::nullopt;
}

std::set<std::string> GivenFlags(int argc, char** argv) {
  std::set<std::string> given;
  for (const FlagArg& a : FlagArgs(argc, argv)) {
    if (a.flag != nullptr) given.insert(std::string(a.flag->Name()));
  }
  return given;
}

std::optional<int> ParseFlagsOnly(int argc, char** argv, absl::string_view program,
                                  absl::string_view own_file,
                                  const std::vector<FlagRange>& ranges, std::ostream& out,
                                  std::ostream& err) {
  if (PrintFlagsHelpIfAsked(argc, argv, program, own_file, out)) return kExitOk;
  if (auto unknown = UnknownFlagError(argc, argv, program, own_file)) {
    err << *unknown;
    return kExitUsage;
  }
  if (auto bad = BadFlagValueError(argc, argv, program, ranges)) {
    err << *bad;
    return kExitUsage;
  }
  // Flags are defined with underscores; the dashed spelling is rewritten to
  // them (common/flag_names.h).
  std::vector<std::string> underscored = UnderscoreFlagNames(argc, argv);
  std::vector<char*> parsed_argv = ArgvOf(underscored);
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(underscored.size()), parsed_argv.data());
  if (positional.size() > 1) {
    // A boolean's value goes after '=': "--print-spec false" leaves "false".
    std::string hint;
    for (const FlagArg& a : FlagArgs(argc, argv)) {
      if (a.flag != nullptr && a.flag->IsOfType<bool>() && !a.has_value && !a.negated &&
          a.index + 1 < argc && positional[1] == absl::string_view(argv[a.index + 1])) {
        hint = absl::StrCat("; a true-or-false flag takes its value after '=' (--",
                            DashFlagName(a.name), "=", positional[1], ")");
      }
    }
    err << program << ": unexpected argument \"" << positional[1] << "\"" << hint << " ("
        << program << " takes only flags; " << program << " --help lists them)\n";
    return kExitUsage;
  }
  return std::nullopt;
}

HelpRequest FindHelpRequest(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "--helpshort" || arg == "-helpshort") {
      return HelpRequest::kOwnFlags;
    }
    if (arg == "--helpfull" || arg == "-helpfull") return HelpRequest::kAllFlags;
  }
  return HelpRequest::kNone;
}

std::vector<FlagHelpEntry> RegisteredFlags(absl::string_view own_file, bool only_own_file) {
  std::vector<FlagHelpEntry> entries;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->IsRetired()) continue;
    FlagHelpEntry e;
    e.file = flag->Filename();
    if (!own_file.empty() && absl::EndsWith(e.file, own_file)) {
      e.file = std::string(own_file);
    } else if (only_own_file) {
      continue;
    } else if (const size_t absl_dir = e.file.rfind("absl/"); absl_dir != std::string::npos) {
      e.file = e.file.substr(absl_dir);
    }
    e.name = std::string(name);
    e.help = flag->Help();
    e.default_value = flag->DefaultValue();
    e.is_string = flag->IsOfType<std::string>();
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const FlagHelpEntry& a, const FlagHelpEntry& b) {
    return std::tie(a.file, a.name) < std::tie(b.file, b.name);
  });
  return entries;
}

std::string FormatFlagsHelp(absl::string_view program, absl::string_view usage,
                            const std::vector<FlagHelpEntry>& entries) {
  std::string out = absl::StrCat(program, ": ", usage, "\n");
  const std::string* file = nullptr;
  for (const FlagHelpEntry& e : entries) {
    if (file == nullptr || *file != e.file) {
      absl::StrAppend(&out, "\n  Flags from ", e.file, ":\n");
      file = &e.file;
    }
    const std::string value = e.is_string ? absl::StrCat("\"", e.default_value, "\"")
                                          : e.default_value;
    AppendWrapped(kEntryIndent,
                  absl::StrCat("--", DashFlagName(e.name), " (", e.help, "); default: ", value,
                               ";"),
                  out);
  }
  absl::StrAppend(&out,
                  "\nEvery flag may also be written with underscores instead of dashes, the\n"
                  "older spelling, until the next release.\n");
  return out;
}

bool PrintFlagsHelpIfAsked(int argc, char** argv, absl::string_view program,
                           absl::string_view own_file, std::ostream& out) {
  const HelpRequest request = FindHelpRequest(argc, argv);
  if (request == HelpRequest::kNone) return false;
  out << FormatFlagsHelp(program, absl::ProgramUsageMessage(),
                         RegisteredFlags(own_file, request == HelpRequest::kOwnFlags));
  out.flush();
  return true;
}

}  // namespace ranksweep
