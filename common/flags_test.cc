#include "common/flags.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "common/flag_names.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A binary's flags as the daemons declare theirs.
struct TestFlags {
  std::string listen = "127.0.0.1:50051";
  int lease_seconds = 60;
  double share = 0.5;
  bool once = false;
  bool ack = true;
  uint64_t seed = 1;
  std::vector<std::string> counts;
  std::vector<std::string> builds;
  std::vector<std::string> words;
  Flags flags{"prog", "prog: a test binary.\nUsage: prog [--listen=HOST:PORT]", "prog 1.0\n"};

  explicit TestFlags(bool take_words = false) {
    flags.Add("listen", &listen, "Address to serve on");
    flags.Add("lease-seconds", &lease_seconds, "How long a lease lasts", 1, 86400);
    flags.Add("share", &share, "A share", 0, 1);
    flags.Add("once", &once, "Run once");
    flags.Add("ack", &ack, "Acknowledge");
    flags.Add("seed", &seed, "A seed");
    flags.AddIntegerList("counts", &counts, "Counts", 1, 1024);
    flags.Add("build", &builds, "A build; repeatable");
    if (take_words) flags.TakeWords(&words);
  }

  // The exit code Parse returns, -1 for "go on"; what it wrote in out/err.
  int Parse(std::vector<std::string> args, std::string* out = nullptr,
            std::string* err = nullptr) {
    args.insert(args.begin(), "prog");
    std::vector<char*> argv = ArgvOf(args);
    std::ostringstream o, e;
    const std::optional<int> code = flags.Parse(static_cast<int>(args.size()), argv.data(), o, e);
    if (out != nullptr) *out = o.str();
    if (err != nullptr) *err = e.str();
    return code.value_or(-1);
  }
};

// The error text of one parse, "" when it succeeds.
std::string ErrorOf(std::vector<std::string> args) {
  TestFlags t;
  std::string err;
  t.Parse(std::move(args), nullptr, &err);
  return err;
}

TEST(FlagsTest, SetsEveryTypeInEitherSpellingAndForm) {
  TestFlags t;
  EXPECT_EQ(t.Parse({"--lease_seconds", "7", "--listen=x:1", "--share", "0.25", "--once",
                     "--seed=18446744073709551615", "--counts=1,4,1024", "--build=a,b",
                     "--build", "c"}),
            -1);
  EXPECT_EQ(t.lease_seconds, 7);
  EXPECT_EQ(t.listen, "x:1");
  EXPECT_DOUBLE_EQ(t.share, 0.25);
  EXPECT_TRUE(t.once);
  EXPECT_EQ(t.seed, UINT64_MAX);
  EXPECT_EQ(t.counts, (std::vector<std::string>{"1", "4", "1024"}));
  // A list flag may be repeated; every item counts.
  EXPECT_EQ(t.builds, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(t.flags.Given("lease-seconds"));
  EXPECT_TRUE(t.flags.Given("once"));
  EXPECT_FALSE(t.flags.Given("listen-x"));
  EXPECT_FALSE(TestFlags().flags.Given("lease-seconds"));

  TestFlags u;
  // A true-or-false flag takes its value after '='; the last of a repeated
  // flag counts; a negative number is a value, not a flag.
  EXPECT_EQ(u.Parse({"--once=false", "--ack=false", "--lease-seconds=3", "--lease-seconds", "9"}),
            -1);
  EXPECT_FALSE(u.once);
  EXPECT_FALSE(u.ack);
  EXPECT_EQ(u.lease_seconds, 9);
  TestFlags v;
  v.ack = false;
  EXPECT_EQ(v.Parse({"--share", "-0", "--once=true", "--ack"}), -1);
  EXPECT_TRUE(v.once);
  EXPECT_TRUE(v.ack);
  // "--NAME=" is the empty value, not a request for the next argument.
  TestFlags w;
  EXPECT_EQ(w.Parse({"--listen=", "--counts=", "--lease-seconds=4"}), -1);
  EXPECT_EQ(w.listen, "");
  EXPECT_EQ(w.lease_seconds, 4);
  for (const std::string& item : w.counts) EXPECT_EQ(item, "");
}

TEST(FlagsTest, ABadValueIsNamedWithDashesAndTheAllowedRange) {
  EXPECT_EQ(ErrorOf({"--lease-seconds=abc"}),
            "prog: --lease-seconds must be an integer in 1..86400, got \"abc\"\n");
  EXPECT_EQ(ErrorOf({"--lease_seconds", "-3"}),
            "prog: --lease-seconds must be an integer in 1..86400, got -3\n");
  EXPECT_EQ(ErrorOf({"--lease-seconds=1.5"}),
            "prog: --lease-seconds must be an integer in 1..86400, got 1.5\n");
  EXPECT_EQ(ErrorOf({"--lease-seconds"}), "prog: --lease-seconds needs a value\n");
  EXPECT_EQ(ErrorOf({"--share=1.5"}), "prog: --share must be a number in 0..1, got 1.5\n");
  EXPECT_EQ(ErrorOf({"--share=nan"}), "prog: --share must be a number in 0..1, got \"nan\"\n");
  EXPECT_EQ(ErrorOf({"--once=maybe"}), "prog: --once must be true or false, got \"maybe\"\n");
  EXPECT_EQ(ErrorOf({"--seed=-3"}),
            "prog: --seed must be an integer in 0..18446744073709551615, got -3\n");
  EXPECT_EQ(ErrorOf({"--counts=1,0"}),
            "prog: --counts must be a comma-separated list of integers in 1..1024, got \"0\"\n");
  EXPECT_EQ(ErrorOf({"--listen"}), "prog: --listen needs a value\n");
}

TEST(FlagsTest, AnUnknownFlagIsNamedWithTheNearestKnownOne) {
  EXPECT_EQ(ErrorOf({"--lease-secnds=5"}),
            "prog: unknown flag --lease-secnds; did you mean \"--lease-seconds\"? "
            "(prog --help lists them)\n");
  EXPECT_EQ(ErrorOf({"--lisen", "x"}),
            "prog: unknown flag --lisen; did you mean \"--listen\"? (prog --help lists them)\n");
  EXPECT_EQ(ErrorOf({"--zzz"}), "prog: unknown flag --zzz (prog --help lists them)\n");
}

TEST(FlagsTest, AWordIsRefusedUnlessTheBinaryTakesWords) {
  EXPECT_EQ(ErrorOf({"--once", "false"}),
            "prog: unexpected argument \"false\"; a true-or-false flag takes its value after "
            "'=' (--once=false) (prog takes only flags; prog --help lists them)\n");
  EXPECT_EQ(ErrorOf({"token"}),
            "prog: unexpected argument \"token\" (prog takes only flags; prog --help lists "
            "them)\n");
  TestFlags t(/*take_words=*/true);
  EXPECT_EQ(t.Parse({"token", "--lease-seconds=5", "create"}), -1);
  EXPECT_EQ(t.words, (std::vector<std::string>{"token", "create"}));
  EXPECT_EQ(t.lease_seconds, 5);
}

TEST(FlagsTest, HelpListsEveryFlagDashedWithItsDefaultAndVersionPrintsTheText) {
  TestFlags t;
  std::string out, err;
  EXPECT_EQ(t.Parse({"--help", "--lease-seconds=0"}, &out, &err), 0);
  EXPECT_EQ(err, "");
  EXPECT_THAT(out, HasSubstr("prog: a test binary.\nUsage: prog [--listen=HOST:PORT]\n\n"));
  EXPECT_THAT(out, Not(HasSubstr("[OPTIONS]")));
  EXPECT_THAT(out, HasSubstr("--lease-seconds INT=60"));
  EXPECT_THAT(out, HasSubstr("--listen TEXT=127.0.0.1:50051"));
  EXPECT_THAT(out, HasSubstr("How long a lease lasts"));
  // A switch that is off shows no default; one that is on shows it.
  EXPECT_THAT(out, HasSubstr("\n  --once                      Run once\n"));
  EXPECT_THAT(out, HasSubstr("\n  --ack=true                  Acknowledge\n"));
  EXPECT_THAT(out, HasSubstr("underscores instead of dashes"));
  EXPECT_THAT(out, Not(HasSubstr("--lease_seconds")));
  TestFlags h;
  EXPECT_EQ(h.Parse({"-h"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("--lease-seconds"));
  TestFlags v;
  EXPECT_EQ(v.Parse({"--version"}, &out, &err), 0);
  EXPECT_EQ(out, "prog 1.0\n");
}

}  // namespace
}  // namespace ranksweep
