#include "common/flag_names.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ranksweep {
namespace {

std::vector<std::string> Dashed(std::vector<std::string> args) {
  std::vector<char*> argv = ArgvOf(args);
  return DashFlagNames(static_cast<int>(args.size()), argv.data());
}

TEST(FlagNamesTest, UnderscoredNamesBecomeDashedAndValuesStayAsWritten) {
  EXPECT_EQ(Dashed({"ranksweepd", "--metrics_listen=127.0.0.1:9090", "--lease_seconds", "5",
                    "--db=/tmp/my_sweeps.db", "--insecure-local"}),
            (std::vector<std::string>{"ranksweepd", "--metrics-listen=127.0.0.1:9090",
                                      "--lease-seconds", "5", "--db=/tmp/my_sweeps.db",
                                      "--insecure-local"}));
}

TEST(FlagNamesTest, ProgramNamePositionalsShortFlagsAndAnythingAfterDoubleDashAreUntouched) {
  EXPECT_EQ(Dashed({"ranksweep_worker", "token", "-h", "my_name", "--", "--not_a_flag"}),
            (std::vector<std::string>{"ranksweep_worker", "token", "-h", "my_name", "--",
                                      "--not_a_flag"}));
}

TEST(FlagNamesTest, TheCliGetsDashesInNamesOnly) {
  std::vector<std::string> args = {"ranksweep", "submit", "--max_steps=5", "--tls_ca", "my_ca.pem"};
  std::vector<char*> argv = ArgvOf(args);
  EXPECT_EQ(DashFlagNames(static_cast<int>(args.size()), argv.data()),
            (std::vector<std::string>{"ranksweep", "submit", "--max-steps=5", "--tls-ca",
                                      "my_ca.pem"}));
}

TEST(FlagNamesTest, ArgvOfPointsIntoTheStringsAndEndsWithNull) {
  std::vector<std::string> args = {"a", "--b-c"};
  std::vector<char*> argv = ArgvOf(args);
  ASSERT_EQ(argv.size(), 3u);
  EXPECT_EQ(argv[1], args[1].data());
  EXPECT_EQ(argv[2], nullptr);
}

}  // namespace
}  // namespace ranksweep
