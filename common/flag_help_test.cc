#include "common/flag_help.h"

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/flag_names.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, flag_help_lease_seconds, 60, "How long a lease lasts");
ABSL_FLAG(std::string, flag_help_listen, "127.0.0.1:50051", "Address to serve on");
ABSL_FLAG(bool, flag_help_once, false, "Exit when idle");
ABSL_FLAG(double, flag_help_share, 0.5, "A share");
ABSL_FLAG(uint64_t, flag_help_seed, 0, "A seed");
ABSL_FLAG(std::vector<std::string>, flag_help_counts, {}, "Counts");

namespace ranksweep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

HelpRequest Request(std::vector<std::string> args) {
  std::vector<char*> argv = ArgvOf(args);
  return FindHelpRequest(static_cast<int>(args.size()), argv.data());
}

TEST(FlagHelpTest, HelpHelpshortAndHelpfullAreFoundBeforeADoubleDash) {
  EXPECT_EQ(Request({"ranksweepd"}), HelpRequest::kNone);
  EXPECT_EQ(Request({"ranksweepd", "--db=x.db", "--help"}), HelpRequest::kOwnFlags);
  EXPECT_EQ(Request({"ranksweepd", "-help"}), HelpRequest::kOwnFlags);
  EXPECT_EQ(Request({"ranksweepd", "--helpshort"}), HelpRequest::kOwnFlags);
  EXPECT_EQ(Request({"ranksweepd", "--helpfull"}), HelpRequest::kAllFlags);
  EXPECT_EQ(Request({"ranksweepd", "token", "--", "--help"}), HelpRequest::kNone);
}

TEST(FlagHelpTest, EntriesShowDashedNamesQuotedStringsAndFileHeadings) {
  const std::vector<FlagHelpEntry> entries = {
      {"server/main.cc", "lease_seconds", "How long a lease lasts", "60", false},
      {"server/main.cc", "metrics_listen", "Serve metrics", "", true},
      {"worker/agent/main.cc", "slots", "Tasks at once", "1", false},
  };
  EXPECT_EQ(FormatFlagsHelp("ranksweepd", "Serves sweeps.", entries),
            "ranksweepd: Serves sweeps.\n"
            "\n"
            "  Flags from server/main.cc:\n"
            "    --lease-seconds (How long a lease lasts); default: 60;\n"
            "    --metrics-listen (Serve metrics); default: \"\";\n"
            "\n"
            "  Flags from worker/agent/main.cc:\n"
            "    --slots (Tasks at once); default: 1;\n"
            "\n"
            "Every flag may also be written with underscores instead of dashes, the\n"
            "older spelling, until the next release.\n");
}

TEST(FlagHelpTest, LongHelpWrapsAtEightyColumns) {
  const std::string help =
      std::string(30, 'a') + " " + std::string(30, 'b') + " " + std::string(30, 'c');
  const std::string text =
      FormatFlagsHelp("p", "u", {{"server/main.cc", "long_flag", help, "0", false}});
  EXPECT_THAT(text, HasSubstr("    --long-flag (" + std::string(30, 'a') + " " +
                              std::string(30, 'b') + "\n      " + std::string(30, 'c') +
                              "); default: 0;\n"));
}

TEST(FlagHelpTest, TheRegistryGivesThisFilesFlagsOnlyWhenAskedFor) {
  const std::vector<FlagHelpEntry> own =
      RegisteredFlags("common/flag_help_test.cc", /*only_own_file=*/true);
  ASSERT_EQ(own.size(), 6u);
  EXPECT_EQ(own[0].file, "common/flag_help_test.cc");
  EXPECT_EQ(own[0].name, "flag_help_counts");
  EXPECT_EQ(own[1].name, "flag_help_lease_seconds");
  EXPECT_EQ(own[1].default_value, "60");
  EXPECT_FALSE(own[1].is_string);
  EXPECT_EQ(own[2].name, "flag_help_listen");
  EXPECT_EQ(own[2].default_value, "127.0.0.1:50051");
  EXPECT_TRUE(own[2].is_string);
  // Every flag: Abseil's own (--flagfile, defined beside the parser the
  // binaries call) as well, under its path from "absl/".
  std::vector<std::string> args = {"flag_help_test"};
  std::vector<char*> argv = ArgvOf(args);
  absl::ParseCommandLine(1, argv.data());
  const std::vector<FlagHelpEntry> all =
      RegisteredFlags("common/flag_help_test.cc", /*only_own_file=*/false);
  EXPECT_GT(all.size(), own.size());
  bool flagfile = false;
  for (const FlagHelpEntry& e : all) {
    if (e.name == "flagfile") {
      flagfile = true;
      EXPECT_EQ(e.file.rfind("absl/", 0), 0u) << e.file;
    }
  }
  EXPECT_TRUE(flagfile);
}

TEST(FlagHelpTest, PrintsOnlyWhenAskedAndThenEveryOwnFlagDashed) {
  std::vector<std::string> args = {"prog", "--flag_help_lease_seconds=5"};
  std::vector<char*> argv = ArgvOf(args);
  std::ostringstream out;
  EXPECT_FALSE(PrintFlagsHelpIfAsked(2, argv.data(), "prog", "common/flag_help_test.cc", out));
  EXPECT_EQ(out.str(), "");
  args = {"prog", "--help"};
  argv = ArgvOf(args);
  EXPECT_TRUE(PrintFlagsHelpIfAsked(2, argv.data(), "prog", "common/flag_help_test.cc", out));
  EXPECT_THAT(out.str(), HasSubstr("    --flag-help-lease-seconds (How long a lease lasts); "
                                   "default: 60;\n"));
  EXPECT_THAT(out.str(), HasSubstr("    --flag-help-listen (Address to serve on); default: "
                                   "\"127.0.0.1:50051\";\n"));
  EXPECT_THAT(out.str(), Not(HasSubstr("--flag_help_")));
  EXPECT_THAT(out.str(), Not(HasSubstr("--flagfile")));
}

}  // namespace
}  // namespace ranksweep

namespace ranksweep {
namespace {

std::optional<std::string> UnknownIn(std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv = ArgvOf(args);
  return UnknownFlagError(static_cast<int>(args.size()), argv.data(), "prog",
                          "common/flag_help_test.cc");
}

TEST(FlagHelpTest, AnUnknownFlagIsNamedWithDashesWithTheNearestOwnFlag) {
  EXPECT_EQ(UnknownIn({"--flag-help-lease-secnds=5"}),
            "prog: unknown flag --flag-help-lease-secnds; did you mean "
            "\"--flag-help-lease-seconds\"? (prog --help lists them)\n");
  EXPECT_EQ(UnknownIn({"--flag_help_lisen", "x"}),
            "prog: unknown flag --flag-help-lisen; did you mean \"--flag-help-listen\"? "
            "(prog --help lists them)\n");
  EXPECT_EQ(UnknownIn({"--zzz"}), "prog: unknown flag --zzz (prog --help lists them)\n");
  // Known flags in either spelling, values, subcommands, Abseil's own flags
  // and anything after "--" pass.
  EXPECT_EQ(UnknownIn({"token", "--flag-help-lease-seconds", "5", "--flag_help_listen=:1",
                       "--helpfull", "--", "--zzz"}),
            std::nullopt);
  // The value of a flag that is not a boolean, in the next argument, is not
  // a flag even when it starts with a dash; a boolean takes no next argument.
  EXPECT_EQ(UnknownIn({"--flag-help-lease-seconds", "-1", "--noflag-help-once"}), std::nullopt);
  EXPECT_EQ(UnknownIn({"--flag-help-once", "-1"}),
            "prog: unknown flag --1 (prog --help lists them)\n");
}

std::optional<std::string> BadIn(std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv = ArgvOf(args);
  return BadFlagValueError(static_cast<int>(args.size()), argv.data(), "prog",
                           {{"flag_help_lease_seconds", 1, 86400},
                            {"flag_help_share", 0, 1},
                            {"flag_help_counts", 1, 1024}});
}

TEST(FlagHelpTest, ABadValueIsNamedWithDashesAndTheAllowedRange) {
  EXPECT_EQ(BadIn({"--flag-help-lease-seconds=abc"}),
            "prog: --flag-help-lease-seconds must be an integer in 1..86400, got \"abc\"\n");
  EXPECT_EQ(BadIn({"--flag_help_lease_seconds", "-3"}),
            "prog: --flag-help-lease-seconds must be an integer in 1..86400, got -3\n");
  EXPECT_EQ(BadIn({"--flag-help-lease-seconds"}),
            "prog: --flag-help-lease-seconds must be an integer in 1..86400, got nothing\n");
  EXPECT_EQ(BadIn({"--flag-help-share=1.5"}),
            "prog: --flag-help-share must be a number in 0..1, got 1.5\n");
  EXPECT_EQ(BadIn({"--flag-help-once=maybe"}),
            "prog: --flag-help-once must be true or false, got \"maybe\"\n");
  EXPECT_EQ(BadIn({"--flag-help-seed=-3"}),
            "prog: --flag-help-seed must be an integer in 0..18446744073709551615, got -3\n");
  EXPECT_EQ(BadIn({"--flag-help-counts=1,0"}),
            "prog: --flag-help-counts must be a comma-separated list of integers in 1..1024, "
            "got \"1,0\"\n");
  EXPECT_EQ(BadIn({"--flag-help-listen"}), "prog: --flag-help-listen needs a value\n");
  // Good values in either spelling and form, unknown flags (UnknownFlagError's
  // business) and anything after "--" pass.
  EXPECT_EQ(BadIn({"--flag-help-lease-seconds=5", "--flag_help_share", "0.25", "--flag-help-once",
                   "--noflag_help_once", "--flag-help-once=false", "--flag-help-seed=7",
                   "--flag-help-counts=1,4,1024", "--flag-help-listen=", "--zzz=abc", "--",
                   "--flag-help-share=9"}),
            std::nullopt);
}

TEST(FlagHelpTest, GivenFlagsAreTheRegisteredOnesNamedInEitherSpelling) {
  std::vector<std::string> args = {"prog", "--flag-help-lease-seconds", "5", "--noflag_help_once",
                                   "--zzz", "--", "--flag-help-share=1"};
  std::vector<char*> argv = ArgvOf(args);
  EXPECT_EQ(GivenFlags(static_cast<int>(args.size()), argv.data()),
            (std::set<std::string>{"flag_help_lease_seconds", "flag_help_once"}));
}

int ParseOnly(std::vector<std::string> args, std::string* out, std::string* err) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv = ArgvOf(args);
  std::ostringstream o, e;
  std::optional<int> code =
      ParseFlagsOnly(static_cast<int>(args.size()), argv.data(), "prog",
                     "common/flag_help_test.cc", {{"flag_help_lease_seconds", 1, 86400}}, o, e);
  *out = o.str();
  *err = e.str();
  return code.value_or(-1);
}

TEST(FlagHelpTest, ParseFlagsOnlySetsTheFlagsOrSaysWhyNot) {
  std::string out, err;
  EXPECT_EQ(ParseOnly({"--flag-help-lease-seconds=7", "--flag_help_listen", "x:1"}, &out, &err),
            -1);
  EXPECT_EQ(absl::GetFlag(FLAGS_flag_help_lease_seconds), 7);
  EXPECT_EQ(absl::GetFlag(FLAGS_flag_help_listen), "x:1");
  EXPECT_EQ(err, "");
  EXPECT_EQ(ParseOnly({"--help"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("    --flag-help-lease-seconds ("));
  EXPECT_EQ(ParseOnly({"--flag-help-lease-secnds=7"}, &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("did you mean \"--flag-help-lease-seconds\"?"));
  EXPECT_EQ(ParseOnly({"--flag-help-lease-seconds=0"}, &out, &err), 1);
  EXPECT_EQ(err, "prog: --flag-help-lease-seconds must be an integer in 1..86400, got 0\n");
  EXPECT_EQ(ParseOnly({"--flag-help-once", "false"}, &out, &err), 1);
  EXPECT_EQ(err, "prog: unexpected argument \"false\"; a true-or-false flag takes its value "
                 "after '=' (--flag-help-once=false) (prog takes only flags; prog --help lists "
                 "them)\n");
}

}  // namespace
}  // namespace ranksweep
