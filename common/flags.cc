#include "common/flags.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <type_traits>
#include <utility>

#include "common/did_you_mean.h"
#include "common/exit_codes.h"
#include "common/flag_names.h"

namespace ranksweep {
namespace {

// `text` as an error shows it: a plain number as it is, anything else quoted.
std::string Got(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  const bool number = !text.empty() && end == text.c_str() + text.size() && std::isfinite(v);
  return number ? text : "\"" + text + "\"";
}

// Whether all of `text` is a decimal integer (an optional sign, digits).
bool AllDigits(const std::string& text, bool allow_minus) {
  size_t i = (!text.empty() && (text[0] == '-' && allow_minus)) ? 1 : 0;
  if (!text.empty() && text[0] == '+') i = 1;
  if (i == text.size()) return false;
  return std::all_of(text.begin() + static_cast<std::ptrdiff_t>(i), text.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// "--NAME" of the option a CLI11 message "--NAME: ..." is about.
std::string NameOf(const std::string& what) { return what.substr(0, what.find(':')); }

// --help as every binary shows it: without CLI11's "Usage: PROGRAM
// [OPTIONS]" line (the usage text a binary gives shows its flags better),
// each flag's description wrapped to end by column 80.
class FlagsFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* /*app*/, std::string /*name*/) const override {
    return "\n";
  }
  // A true-or-false flag that is on unless turned off shows "=true", as
  // other flags show their default (Flags::Add sets it).
  std::string make_option_opts(const CLI::Option* option) const override {
    if (option->get_expected_max() == 0 && option->get_type_size() == 0 &&
        !option->get_default_str().empty()) {
      return "=" + option->get_default_str();
    }
    return CLI::Formatter::make_option_opts(option);
  }
  std::string make_option_desc(const CLI::Option* option) const override {
    const size_t width = 80 - get_column_width();
    std::string out, line;
    std::istringstream words(option->get_description());
    for (std::string word; words >> word;) {
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        out += line + "\n";
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
    }
    return out + line;
  }
};

}  // namespace

namespace {

// An integer of type T (int64_t or uint64_t) in [min, max], read whole in
// base 10; strtoll or strtoull by T's signedness.
template <typename T>
CLI::Validator IntegerCheck(T min, T max) {
  const std::string allowed =
      "must be an integer in " + std::to_string(min) + ".." + std::to_string(max);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        if (AllDigits(text, /*allow_minus=*/std::is_signed_v<T>)) {
          errno = 0;
          char* end = nullptr;
          const T v = std::is_signed_v<T> ? static_cast<T>(std::strtoll(text.c_str(), &end, 10))
                                          : static_cast<T>(std::strtoull(text.c_str(), &end, 10));
          if (errno == 0 && v >= min && v <= max) return "";
        }
        return allowed + ", got " + Got(text);
      },
      "");
}

}  // namespace

CLI::Validator IntegerIn(int64_t min, int64_t max) { return IntegerCheck(min, max); }

CLI::Validator UnsignedIn(uint64_t min, uint64_t max) { return IntegerCheck(min, max); }

CLI::Validator NumberIn(double min, double max) {
  std::string allowed = "must be a number";
  if (std::isfinite(min) || std::isfinite(max)) {
    auto shown = [](double v) {
      std::string s = std::to_string(v);  // "0.500000": trim the zeros
      if (s.find('.') != std::string::npos) {
        s.erase(s.find_last_not_of('0') + 1);
        if (s.back() == '.') s.pop_back();
      }
      return s;
    };
    allowed += " in " + shown(min) + ".." + shown(max);
  }
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool parsed = !text.empty() && end == text.c_str() + text.size();
        if (parsed && std::isfinite(v) && v >= min && v <= max) return "";
        return allowed + ", got " + Got(text);
      },
      "");
}

CLI::Validator TrueOrFalse() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        static const char* const kWords[] = {"true", "false", "1", "0", "yes", "no"};
        if (std::find(std::begin(kWords), std::end(kWords), text) != std::end(kWords)) return "";
        return "must be true or false, got " + Got(text);
      },
      "");
}

std::optional<std::string> UnknownFlagMessage(const CLI::App& app, const std::string& program,
                                              int argc, char** argv) {
  // The app and the subcommands argv chose, outermost first.
  std::vector<const CLI::App*> scopes = {&app};
  for (size_t i = 0; i < scopes.size(); ++i) {
    for (const CLI::App* sub : scopes[i]->get_subcommands()) scopes.push_back(sub);
  }
  std::vector<std::string> known;
  for (const CLI::App* scope : scopes) {
    for (const CLI::Option* option : scope->get_options()) {
      for (const std::string& name : option->get_lnames()) known.push_back("--" + name);
    }
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    const std::string name = arg.substr(0, arg.find('='));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string where = program;
    for (size_t s = 1; s < scopes.size(); ++s) where += " " + scopes[s]->get_name();
    return "unknown flag " + name + DidYouMeanSuffix(name, known) + " (" + where +
           " --help lists them)";
  }
  return std::nullopt;
}

std::string FlagErrorText(const CLI::App& app, const std::string& program,
                          const CLI::ParseError& error, int argc, char** argv) {
  const std::string what = error.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    if (std::optional<std::string> unknown = UnknownFlagMessage(app, program, argc, argv)) {
      return *unknown;
    }
    const std::vector<std::string> extras = app.remaining(false);
    if (extras.empty()) return what;
    // A true-or-false flag's value goes after '=': "--print-spec false"
    // leaves "false".
    std::string hint;
    for (int i = 1; i + 1 < argc; ++i) {
      if (argv[i + 1] != extras.front()) continue;
      const std::string arg = argv[i];
      if (arg.rfind("--", 0) != 0 || arg.find('=') != std::string::npos) continue;
      const CLI::Option* option = app.get_option_no_throw(arg);
      if (option != nullptr && option->get_expected_max() == 0) {
        hint = "; a true-or-false flag takes its value after '=' (" + arg + "=" + extras.front() +
               ")";
      }
    }
    return "unexpected argument \"" + extras.front() + "\"" + hint + " (" + program +
           " takes only flags; " + program + " --help lists them)";
  }
  if (dynamic_cast<const CLI::ValidationError*>(&error) != nullptr) {
    // CLI11 words it "--NAME: MESSAGE"; the validators above start their
    // message with "must be".
    const size_t colon = what.find(": must be ");
    if (colon != std::string::npos) return what.substr(0, colon) + what.substr(colon + 1);
    return what;
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr &&
      what.rfind("--", 0) == 0) {
    return NameOf(what) + " needs a value";
  }
  return what;
}

Flags::Flags(std::string program, std::string usage, std::string version_text)
    : Flags(std::move(program), std::move(usage),
            version_text.empty() ? std::function<std::string()>()
                                 : [version_text] { return version_text; }) {}

Flags::Flags(std::string program, std::string usage, std::function<std::string()> version)
    : program_(std::move(program)), app_(std::move(usage), program_) {
  // The last of a repeated flag counts (a list flag takes every item), so
  // that a wrapper script's flag can be overridden by one given after it.
  app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app_.option_defaults()->always_capture_default();
  app_.formatter(std::make_shared<FlagsFormatter>());
  app_.footer(
      "Every flag may also be written with underscores instead of dashes, the\n"
      "older spelling, until the next release.");
  if (!version) return;  // no --version
  app_.set_version_flag(
      "--version",
      [version] {
        std::string text = version();
        if (!text.empty() && text.back() == '\n') text.pop_back();  // Parse ends the line
        return text;
      },
      "Print the version and exit");
}

CLI::Option* Flags::AddIntegerList(const std::string& name, std::vector<std::string>* value,
                                   const std::string& help, int64_t min, int64_t max) {
  const CLI::Validator integer = IntegerIn(min, max);
  const std::string allowed = "must be a comma-separated list of integers in " +
                              std::to_string(min) + ".." + std::to_string(max);
  CLI::Validator check(
      [integer, allowed](std::string& text) -> std::string {
        // An empty item ("--NAME=" for an empty list) is no item at all.
        if (text.empty() || integer(text).empty()) return "";
        return allowed + ", got \"" + text + "\"";
      },
      "");
  return Add(name, value, help)->check(check);
}

void Flags::TakeWords(std::vector<std::string>* words) {
  // Hidden from --help (an empty group); the usage text names the words.
  app_.add_option("words", *words)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->group("");
}

bool Flags::Given(const std::string& name) const {
  const CLI::Option* option = app_.get_option_no_throw("--" + name);
  return option != nullptr && option->count() > 0;
}

std::vector<std::string> Flags::GivenNames() const {
  std::vector<std::string> names;
  for (const CLI::Option* option : app_.get_options()) {
    if (option->count() > 0 && !option->get_lnames().empty()) {
      names.push_back(option->get_lnames().front());
    }
  }
  return names;
}

std::optional<int> Flags::Parse(int argc, char** argv, std::ostream& out, std::ostream& err) {
  // `--max_steps` reads as `--max-steps` (common/flag_names.h).
  std::vector<std::string> dashed = DashFlagNames(argc, argv);
  // "--NAME=" sets NAME to the empty value; CLI11 would take the next
  // argument as the value instead, so it gets the empty one as the next.
  for (size_t i = 1; i < dashed.size() && dashed[i] != "--"; ++i) {
    const std::string& arg = dashed[i];
    if (arg.size() > 3 && arg.rfind("--", 0) == 0 && arg.back() == '=' &&
        arg.find('=') == arg.size() - 1) {
      dashed[i].pop_back();
      dashed.insert(dashed.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::string());
      ++i;
    }
  }
  std::vector<char*> dashed_argv = ArgvOf(dashed);
  const int n = static_cast<int>(dashed.size());
  // --help wins over every other flag, a bad one included (CLI11 would
  // check values first).
  for (int i = 1; i < n; ++i) {
    const std::string arg = dashed[static_cast<size_t>(i)];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h") {
      out << app_.help() << std::flush;
      return kExitOk;
    }
  }
  try {
    app_.parse(n, dashed_argv.data());
  } catch (const CLI::CallForHelp&) {
    out << app_.help() << std::flush;
    return kExitOk;
  } catch (const CLI::CallForVersion& version) {
    out << version.what() << std::endl;
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << program_ << ": " << FlagErrorText(app_, program_, e, n, dashed_argv.data()) << "\n";
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace ranksweep
