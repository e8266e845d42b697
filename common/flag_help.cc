#include "common/flag_help.h"

#include <algorithm>
#include <iterator>
#include <tuple>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/did_you_mean.h"
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

}  // namespace

std::optional<std::string> UnknownFlagError(int argc, char** argv, absl::string_view program,
                                            absl::string_view own_file) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // a value or a subcommand
    absl::string_view name = absl::StripPrefix(absl::StripPrefix(arg, "-"), "-");
    name = name.substr(0, name.find('='));
    const std::string underscored = UnderscoreFlagName(std::string(name));
    if (absl::FindCommandLineFlag(underscored) != nullptr) continue;
    // Abseil's own flags, which ParseCommandLine knows even where their
    // definitions are not linked into the registry.
    static const char* const kBuiltIn[] = {"help", "helpfull", "helpshort", "helppackage",
                                           "helpmatch", "helpon", "version", "only_check_args",
                                           "flagfile", "fromenv", "tryfromenv", "undefok"};
    if (std::find(std::begin(kBuiltIn), std::end(kBuiltIn), underscored) != std::end(kBuiltIn)) {
      continue;
    }
    if (absl::StartsWith(underscored, "no")) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(underscored.substr(2));
      if (flag != nullptr && flag->IsOfType<bool>()) continue;
    }
    std::vector<std::string> choices;
    for (const FlagHelpEntry& e : RegisteredFlags(own_file, /*only_own_file=*/true)) {
      choices.push_back(DashFlagName(e.name));
    }
    const std::string dashed = DashFlagName(std::string(name));
    const std::string match = ClosestMatch(dashed, choices);
    return absl::StrCat(program, ": unknown flag --", dashed,
                        match.empty() ? "" : absl::StrCat("; did you mean \"--", match, "\"?"),
                        " (", program, " --help lists them)\n");
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
