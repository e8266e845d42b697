#include "common/flag_help.h"

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
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(own[0].file, "common/flag_help_test.cc");
  EXPECT_EQ(own[0].name, "flag_help_lease_seconds");
  EXPECT_EQ(own[0].default_value, "60");
  EXPECT_FALSE(own[0].is_string);
  EXPECT_EQ(own[1].name, "flag_help_listen");
  EXPECT_EQ(own[1].default_value, "127.0.0.1:50051");
  EXPECT_TRUE(own[1].is_string);
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
}

}  // namespace
}  // namespace ranksweep
