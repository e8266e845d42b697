// The one flag library of every ranksweep binary: ranksweepd,
// ranksweep-worker, ranksweep-train, the `ranksweep` CLI, the soak tools and
// the benchmarks all parse with CLI11 and share what is here.
//
// - Flags are named with dashes ("--lease-seconds"); the underscored
//   spelling ("--lease_seconds") is rewritten to it before parsing
//   (common/flag_names.h) and stays accepted until the next release.
// - A bad value is named with what the flag allows:
//   "ranksweep-train: --max-steps must be an integer in 1..10000000, got 0".
// - An unknown flag is named with the nearest known one:
//   "ranksweepd: unknown flag --lease-secnds; did you mean "--lease-seconds"?
//   (ranksweepd --help lists them)".
// - --help lists the flags with their defaults; --version prints the
//   version text; both exit 0. Every error exits kExitUsage
//   (common/exit_codes.h).
//
// No gRPC and no Abseil flags: ranksweep-train and the trainer benchmarks
// link this in builds without the service. Thread-safety: use from main()'s
// thread.
#ifndef RANKSWEEP_COMMON_FLAGS_H_
#define RANKSWEEP_COMMON_FLAGS_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "CLI/CLI.hpp"

namespace ranksweep {

// Checks of a flag's value whose message names what it allows; with
// FlagErrorText the error reads "--NAME must be an integer in 1..64, got 0"
// (a value that is not a plain number is quoted: got "abc").
CLI::Validator IntegerIn(int64_t min, int64_t max);
CLI::Validator UnsignedIn(uint64_t min, uint64_t max);
// A finite number in min..max; "a number" when both are infinite.
CLI::Validator NumberIn(double min, double max);
// true, false, 1, 0, yes, no (what a true-or-false flag takes after '=').
CLI::Validator TrueOrFalse();

// The error for an unknown --flag of argv (before a bare "--") that neither
// `app` nor the subcommands argv chose know: "unknown flag --max-step; did
// you mean "--max-steps"? (ranksweep submit --help lists them)", without the
// program's prefix. Nothing when every flag is known.
std::optional<std::string> UnknownFlagMessage(const CLI::App& app, const std::string& program,
                                              int argc, char** argv);

// What a parse error says, without the program's prefix: an unknown flag as
// UnknownFlagMessage, a bad value as the validators above word it, a flag
// without its value as "--db needs a value", an unexpected word as
// "unexpected argument "x" (PROGRAM takes only flags; ...)" (with the
// '=' hint when it follows a true-or-false flag), anything else as CLI11 words it.
std::string FlagErrorText(const CLI::App& app, const std::string& program,
                          const CLI::ParseError& error, int argc, char** argv);

// The flags of a binary that takes flags only (every binary but the
// `ranksweep` CLI, whose subcommands are a CLI::App of their own).
//
//   Flags flags("ranksweepd", "ranksweep coordinator: ...", VersionText(...));
//   int lease_seconds = 60;
//   flags.Add("lease-seconds", &lease_seconds, "How long a lease lasts", 1, 86400);
//   if (std::optional<int> exit = flags.Parse(argc, argv, std::cout, std::cerr)) return *exit;
class Flags {
 public:
  // `usage` opens --help; `version_text` (may end in a newline) is what
  // --version prints, or what `version` returns, called only then (it may
  // probe a device). Without either (empty) there is no --version.
  Flags(std::string program, std::string usage, std::string version_text);
  Flags(std::string program, std::string usage, std::function<std::string()> version);

  // A flag of `*value`'s type; `name` is dashed, without "--". Its current
  // value is the default --help shows. Integers are checked against their
  // type's limits or [min, max]; doubles must be finite (and within
  // [min, max]); a bool is a true-or-false flag (--NAME, --NAME=false); a
  // std::vector<std::string> takes comma-separated items and may be
  // repeated (each item then checked by `item_check`, when given).
  template <typename T>
  CLI::Option* Add(const std::string& name, T* value, const std::string& help) {
    if constexpr (std::is_same_v<T, bool>) {
      CLI::Option* option = app_.add_flag("--" + name, *value, help)->check(TrueOrFalse());
      return *value ? option->default_str("true") : option;
    } else if constexpr (std::is_same_v<T, std::string>) {
      return app_.add_option("--" + name, *value, help);
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      return app_.add_option("--" + name, *value, help)
          ->delimiter(',')
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    } else if constexpr (std::is_floating_point_v<T>) {
      return Add(name, value, help, -std::numeric_limits<T>::infinity(),
                 std::numeric_limits<T>::infinity());
    } else {
      static_assert(std::is_integral_v<T>, "flags are bools, integers, doubles or strings");
      return Add(name, value, help, std::numeric_limits<T>::lowest(),
                 std::numeric_limits<T>::max());
    }
  }
  template <typename T, typename Bound>
  CLI::Option* Add(const std::string& name, T* value, const std::string& help, Bound min,
                   Bound max) {
    CLI::Option* option = app_.add_option("--" + name, *value, help);
    if constexpr (std::is_floating_point_v<T>) {
      return option->check(NumberIn(static_cast<double>(min), static_cast<double>(max)));
    } else if constexpr (std::is_unsigned_v<T>) {
      return option->check(UnsignedIn(static_cast<uint64_t>(min), static_cast<uint64_t>(max)));
    } else {
      return option->check(IntegerIn(static_cast<int64_t>(min), static_cast<int64_t>(max)));
    }
  }
  // A comma-separated, repeatable list of integers, each in [min, max]; a bad
  // item reads "--NAME must be a comma-separated list of integers in
  // MIN..MAX, got "ITEM"". "--NAME=" gives the empty list (an empty item, to
  // be skipped).
  CLI::Option* AddIntegerList(const std::string& name, std::vector<std::string>* value,
                              const std::string& help, int64_t min, int64_t max);

  // Words that are not flags, for a binary with subcommands of its own
  // (`ranksweepd token create`); without this any such word is an error.
  void TakeWords(std::vector<std::string>* words);

  // Whether the parsed argv gave --NAME (`name` dashed, without "--").
  bool Given(const std::string& name) const;
  // The flags the parsed argv gave, dashed without "--", in the order they
  // were added.
  std::vector<std::string> GivenNames() const;

  // Parses argv (underscored flag names rewritten to dashes first). Returns
  // nothing when the flags are set and main goes on; otherwise the exit code
  // main() returns at once: 0 after --help (to `out`) or --version, or
  // kExitUsage after an error ("PROGRAM: ..." to `err`).
  std::optional<int> Parse(int argc, char** argv, std::ostream& out, std::ostream& err);

  const std::string& program() const { return program_; }
  CLI::App& app() { return app_; }

 private:
  std::string program_;
  CLI::App app_;
};

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_FLAGS_H_
