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
  EXPECT_EQ(r.err, "ranksweep-train: unknown flag --max-step; did you mean \"--max-steps\"? "
                   "(ranksweep-train --help lists them)\n");
  // 1: a value out of range, named with its range.
  r = Run({RANKSWEEPD_BIN, "--lease-seconds=0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweepd: --lease-seconds must be 1..86400\n");
  r = Run({RANKSWEEP_WORKER_BIN, "--slots=0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-worker: --slots must be in 1..64, got 0\n");
  r = Run({RANKSWEEP_TRAIN_BIN, "--rank=0", "--max-steps=1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-train: rank must be in 1..65536, got 0\n");
  r = Run({RANKSWEEP_TRAIN_BIN, "--seeds=-3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-train: --seeds must be a comma-separated list of integers in "
                   "0..9007199254740991, got \"-3\"\n");
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

// ranksweep-train and the benchmarks read their flags as the daemons do
// (common/flags.h): either spelling, "did you mean", a bad value named
// with its range and exit 1, the same --help.
TEST_F(CliFaceTest, TrainTakesFlagsAsTheDaemonsDo) {
  // ranksweep-train: dashed and underscored flags, "--flag value" and
  // "--flag=value", a negative value after its flag.
  CommandResult r = Run({RANKSWEEP_TRAIN_BIN, "--m=2", "--seq_len", "2", "--max-steps=1",
                         "--eval_every=1", "--seeds=0,1", "--device=cpu", "--indent", "-1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json result = Json::parse(r.out);
  EXPECT_EQ(result["seeds"].size(), 2u);
  EXPECT_EQ(result["facts"]["train_sequences"], 16);  // 2^(2*2)
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "--indent -1: one line";
  const std::string dashed = dir_.path() + "/dashed.json";
  const std::string underscored = dir_.path() + "/underscored.json";
  r = Run({RANKSWEEP_TRAIN_BIN, "--m=2", "--seq-len=2", "--final-query-only",
           "--dump-dataset=" + dashed});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Run({RANKSWEEP_TRAIN_BIN, "--m=2", "--seq_len=2", "--final_query_only=true",
           "--dump_dataset", underscored});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(::ranksweep::testing::ReadFile(dashed), ::ranksweep::testing::ReadFile(underscored));
  EXPECT_EQ(Json::parse(::ranksweep::testing::ReadFile(dashed))["final_query_only"], true);
  // A bad value, in either spelling: the flag by its dashed name and range.
  for (const char* flag : {"--eval-every=0", "--eval_every=0"}) {
    r = Run({RANKSWEEP_TRAIN_BIN, flag});
    EXPECT_EQ(r.exit_code, 1) << flag;
    EXPECT_EQ(r.err, "ranksweep-train: --eval-every must be an integer in 1..10000000, got 0\n");
  }
  r = Run({RANKSWEEP_TRAIN_BIN, "--lr=fast"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-train: --lr must be a number in 0..10, got \"fast\"\n");
  r = Run({RANKSWEEP_TRAIN_BIN, "--head=kernl"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-train: --head must be one of kernel, softmax, signed_kernel, "
                   "multihead_kernel; got \"kernl\"; did you mean \"kernel\"?\n");
  r = Run({RANKSWEEP_TRAIN_BIN, "--feature_mapp=elu1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-train: unknown flag --feature-mapp; did you mean "
                   "\"--feature-map\"? (ranksweep-train --help lists them)\n");
  // A boolean's value goes after '='; flags that do not fit the mode.
  r = Run({RANKSWEEP_TRAIN_BIN, "--final-query-only", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-train: unexpected argument \"true\"; a true-or-false flag takes "
                   "its value after '=' (--final-query-only=true) (ranksweep-train takes only "
                   "flags; ranksweep-train --help lists them)\n");
  r = Run({RANKSWEEP_TRAIN_BIN, "--sweep=x.json", "--m=2", "--max_steps=1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-train: --m, --max-steps does not apply with --sweep (only --device, "
                   "--max-seeds and --slots do); edit the sweep file instead\n");
  r = Run({RANKSWEEP_TRAIN_BIN, "--slots=2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-train: --slots applies only with --sweep\n");
  r = Run({RANKSWEEP_TRAIN_BIN, "--sweep", dir_.path() + "/none.json"});
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_THAT(r.err, HasSubstr("--sweep: cannot open"));
}

TEST_F(CliFaceTest, TheBenchmarksTakeFlagsAsTheDaemonsDo) {
#ifndef TRAIN_BENCH_BIN
  GTEST_SKIP() << "the benchmarks are not built (-DRANKSWEEP_BUILD_BENCHMARKS=OFF)";
#else
  // train_bench: both spellings, its range, its suggestion, its help.
  CommandResult r = Run({TRAIN_BENCH_BIN, "--print-spec", "--max-steps=7"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["train"]["max_steps"], 7);
  CommandResult old = Run({TRAIN_BENCH_BIN, "--print_spec", "--max_steps", "7"});
  EXPECT_EQ(old.exit_code, 0) << old.err;
  EXPECT_EQ(old.out, r.out);
  r = Run({TRAIN_BENCH_BIN, "--repeat=0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "train_bench: --repeat must be an integer in 1..1000, got 0\n");
  r = Run({TRAIN_BENCH_BIN, "--counts=1,abc"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "train_bench: --counts must be a comma-separated list of integers in "
                   "1..1024, got \"abc\"\n");
  r = Run({TRAIN_BENCH_BIN, "--max-step=5"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "train_bench: unknown flag --max-step; did you mean \"--max-steps\"? "
                   "(train_bench --help lists them)\n");
  r = Run({TRAIN_BENCH_BIN, "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::StartsWith("train_bench: trained models per second"));
  EXPECT_THAT(r.out, HasSubstr("\nOptions:\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  --print-spec "));
  EXPECT_FALSE(std::regex_search(r.out, std::regex("--[a-z]+_"))) << r.out;

  // roofline_bench: its range, and its one required choice.
  r = Run({ROOFLINE_BENCH_BIN, "--warmup=0", "--spec=x.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "roofline_bench: --warmup must be an integer in 1..1000000, got 0\n");
  r = Run({ROOFLINE_BENCH_BIN});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "roofline_bench: --gemm or --spec=FILE is required (roofline_bench --help)\n");

  // dispatch_bench: what atoi used to read as 0 is refused with the range;
  // a tiny run with dashed and underscored flags mixed.
  r = Run({DISPATCH_BENCH_BIN, "--ranksweepd=" RANKSWEEPD_BIN, "--seeds-per-task=-3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "dispatch_bench: --seeds-per-task must be an integer in 1..1024, got -3\n");
  r = Run({DISPATCH_BENCH_BIN, "--ranksweepd=" RANKSWEEPD_BIN, "--cells=abc"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "dispatch_bench: --cells must be an integer in 1..327680, got \"abc\"\n");
  r = Run({DISPATCH_BENCH_BIN, "--ranksweepd=" RANKSWEEPD_BIN, "--workerz=2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "dispatch_bench: unknown flag --workerz; did you mean \"--workers\"? "
                   "(dispatch_bench --help lists them)\n");
  r = Run({DISPATCH_BENCH_BIN, "--ranksweepd=" RANKSWEEPD_BIN, "--cells=1031"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "dispatch_bench: --cells=1031 cannot be split into heads (1..5) x ranks "
                   "(1..64) x seeds (1..1024); pick a multiple of a rank count and a head "
                   "count\n");
  r = Run({DISPATCH_BENCH_BIN, "--workers=2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "dispatch_bench: --ranksweepd=PATH is required (dispatch_bench --help)\n");
  r = Run({DISPATCH_BENCH_BIN, "--ranksweepd=" RANKSWEEPD_BIN, "--workers=2", "--cells=8",
           "--query_rows=0", "--paced-tasks=0", "--tasks_per_call=2", "--next-in-complete=false",
           "--client=threads"},
          120s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("dispatch workers=2 client=threads tasks_per_call=2 "
                               "seeds_per_task=1 next_in_complete=0 cells=8 "));
  EXPECT_THAT(r.out, Not(HasSubstr("query ")));
#endif
}

}  // namespace
}  // namespace ranksweep
