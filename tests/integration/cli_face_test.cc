// One face for every binary, through real processes: the exit-code table of
// common/exit_codes.h for the same mistakes in ranksweep, ranksweepd,
// ranksweep-worker and ranksweep-train; suggestions for mistyped flags, enum
// values and preset names; progress on stderr when stdout is not a
// terminal; a witness spec asking for more queries than its code has,
// refused at dry-run and at submit with the worker's own message; plurals;
// and JSON's one rule for "none" (null).
#include <signal.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/process.h"
#include "tests/support/small_sweep.h"

namespace ranksweep {
namespace {

using ::ranksweep::testing::CommandResult;
using ::ranksweep::testing::Process;
using ::ranksweep::testing::RunCommand;
using ::ranksweep::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using Json = nlohmann::json;
using namespace std::chrono_literals;

// A witness family whose code has 2 words (weight 2 in {0,1}^4, disjoint)
// asking for 5 queries.
const char kTooManyQueries[] = R"({
  "name": "too-many-queries",
  "dataset": {"kind": "witness", "m": 4, "seq_len": 3, "code_weight": 2, "max_overlap": 0,
              "num_queries": 5},
  "heads": [{"kind": "kernel", "feature_map": "elu1"}],
  "ranks": [2],
  "seed_count": 1
})";
const char kTooManyQueriesError[] =
    "dataset.num_queries must be in 0..2 (the size of the code for m=4, code_weight=2, "
    "max_overlap=0), got 5";

class CliFaceTest : public ::testing::Test {
 protected:
  CommandResult Run(std::vector<std::string> argv, std::chrono::milliseconds timeout = 60s) {
    return RunCommand(argv, dir_.path() + "/run" + std::to_string(runs_++), timeout);
  }
  CommandResult Cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 120s) {
    args.insert(args.begin(), {RANKSWEEP_CLI_BIN, "--addr=" + addr_});
    return Run(args, timeout);
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  void StartServer() {
    server_ = std::make_unique<Process>(
        std::vector<std::string>{RANKSWEEPD_BIN, "--listen=127.0.0.1:0",
                                 "--db=" + dir_.path() + "/ranksweep.db", "--insecure-local"},
        dir_.path() + "/server");
    addr_ = server_->WaitForStdout(std::regex("listening on (\\S+)"), 30s).value_or("");
    ASSERT_FALSE(addr_.empty()) << server_->Stderr();
  }

  TempDir dir_;
  int runs_ = 0;
  std::string addr_ = "127.0.0.1:1";  // nothing listens there
  std::unique_ptr<Process> server_;
};

TEST_F(CliFaceTest, MistypedFlagsEnumsAndPresetsGetTheNearestNameAndExit1) {
  CommandResult r = Cli({"submit", "--max-step", "5", "--dry-run"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep: unknown flag --max-step; did you mean \"--max-steps\"? "
                   "(ranksweep submit --help lists them)\n");
  r = Cli({"submit", "--dataset", "exhausive", "--dry-run"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep: --dataset must be one of exhaustive, witness, pool; got "
                   "\"exhausive\"; did you mean \"exhaustive\"?\n");
  r = Cli({"submit", "--preset", "wtness", "--dry-run"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, MatchesRegex("ranksweep: --preset: no preset \"wtness\"; the presets are "
                                  "[a-z, -]+; did you mean \"witness\"\\?\n"));
  // A spec file's enum too, and a value nothing is near gets no guess.
  const std::string file = Write("heads.json", R"({"heads": [{"kind": "sofmax"}]})");
  r = Cli({"submit", "-f", file, "--dry-run"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("; did you mean \"softmax\"?"));
  r = Cli({"submit", "--dataset", "zzzzzzzz", "--dry-run"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, Not(HasSubstr("did you mean")));
}

TEST_F(CliFaceTest, TheSameMistakeExitsTheSameInEveryBinary) {
  // 1: an unknown flag, named with dashes, with the nearest flag.
  CommandResult r = Run({RANKSWEEPD_BIN, "--lease-secnds=3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweepd: unknown flag --lease-secnds; did you mean \"--lease-seconds\"? "
                   "(ranksweepd --help lists them)\n");
  r = Run({RANKSWEEP_WORKER_BIN, "--slotz=2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-worker: unknown flag --slotz; did you mean \"--slots\"? "
                   "(ranksweep-worker --help lists them)\n");
  r = Run({RANKSWEEP_TRAIN_BIN, "--max-step=5"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-train: INVALID_ARGUMENT: unknown flag --max-step; did you mean "
                   "\"--max-steps\"? (see --help)\n");
  // 1: a value out of range, named with its range.
  r = Run({RANKSWEEPD_BIN, "--lease-seconds=0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweepd: --lease-seconds must be 1..86400\n");
  r = Run({RANKSWEEP_WORKER_BIN, "--slots=0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-worker: --slots must be in 1..64, got 0\n");
  r = Run({RANKSWEEP_TRAIN_BIN, "--rank=0", "--max-steps=1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("rank"));
  r = Cli({"submit", "--ranks", "0", "--dry-run"});
  EXPECT_EQ(r.exit_code, 1);
  // 2: the coordinator unreachable.
  r = Cli({"list", "--timeout", "2"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // 3: not found, from the CLI and from ranksweepd's own commands.
  StartServer();
  r = Cli({"status", "sw-nosuch"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  r = Run({RANKSWEEPD_BIN, "token", "revoke", "--db=" + dir_.path() + "/ranksweep.db",
           "--name=nobody"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  // 5: any other failure: a second coordinator on the same database.
  r = Run({RANKSWEEPD_BIN, "--listen=127.0.0.1:0", "--db=" + dir_.path() + "/ranksweep.db",
           "--insecure-local"});
  EXPECT_EQ(r.exit_code, 5) << r.err;
}

TEST_F(CliFaceTest, AWitnessSpecAskingForMoreQueriesThanItsCodeHasIsRefusedBeforeAnyWorker) {
  const std::string file = Write("witness.json", kTooManyQueries);
  CommandResult r = Cli({"submit", "-f", file, "--dry-run"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(kTooManyQueriesError));
  StartServer();
  r = Cli({"submit", "-f", file});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(kTooManyQueriesError));
  EXPECT_EQ(r.out, "");
  r = Cli({"list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("too-many-queries")));  // nothing stored
  // The same family with the 2 queries it has is accepted.
  r = Cli({"submit", "-f", file, "--num-queries", "2", "--dry-run"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CliFaceTest, ProgressGoesToStderrPluralsReadAndJsonSaysNullForNone) {
  StartServer();
  Process worker({RANKSWEEP_WORKER_BIN, "--coordinator=" + addr_, "--device=cpu", "--slots=1"},
                 dir_.path() + "/worker", {"RANKSWEEP_TORCH_THREADS=1"});
  const std::string spec = Write("small.json", ranksweep::testing::SmallSweepSpec("face"));
  // stdout is a file here, not a terminal: it gets the id alone, so that
  // `id=$(ranksweep submit ... --watch)` works; progress goes to stderr.
  CommandResult r = Cli({"submit", "-f", spec, "--watch"}, 300s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, MatchesRegex("sw-[0-9a-f]+\n"));
  const std::string id = r.out.substr(0, r.out.size() - 1);
  EXPECT_THAT(r.err, HasSubstr("watching " + id));
  EXPECT_THAT(r.err, HasSubstr("sweep " + id + " DONE"));
  r = Cli({"watch", id});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("] 9/9 done  0 running  0 failed  DONE"));
  // "1 slot", not "1 slots".
  EXPECT_THAT(worker.Stderr(), HasSubstr(", 1 slot, build "));
  EXPECT_THAT(worker.Stderr(), Not(HasSubstr("1 slots")));
  // JSON: a done cell's failure, an uncached result's source and the
  // bounds of a dataset without any are null, never "" or 0.
  r = Cli({"results", id, "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json rows = Json::parse(r.out);
  ASSERT_EQ(rows.size(), static_cast<size_t>(ranksweep::testing::kSmallSweepCells));
  for (const Json& row : rows) {
    EXPECT_TRUE(row.at("failure").is_null()) << row.dump();
    EXPECT_TRUE(row.at("cached_from_cell_id").is_null()) << row.dump();
    EXPECT_TRUE(row.at("result").at("facts").at("rank_lower_bound").is_null()) << row.dump();
    EXPECT_TRUE(row.at("result").at("facts").at("rank_upper_bound").is_null()) << row.dump();
  }
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(60s), std::optional<int>(0)) << worker.Stderr();
}

}  // namespace
}  // namespace ranksweep
