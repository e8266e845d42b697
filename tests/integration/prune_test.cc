// Recipe pruning through the whole service: a real ranksweepd on a
// temporary SQLite file, a real ranksweep-worker on one CPU core, and the
// CLI. The same small sweep (two learning rates, one of them far too small
// to learn in its budget) runs twice, without and with `--prune halving`;
// the summary's verdicts must be the same, and the pruned run must train
// fewer cells and fewer steps, its stopped cells PRUNED, never failed.
#include <chrono>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/local_service.h"
#include "tests/support/process.h"

namespace ranksweep {
namespace {

using ::ranksweep::testing::CommandResult;
using ::ranksweep::testing::Process;
using ::ranksweep::testing::TempDir;
using ::testing::HasSubstr;
using Json = nlohmann::json;
using namespace std::chrono_literals;

// Exhaustive m=2, N=3: kernel ranks 1 and 4 and softmax, 3 seeds, 900
// steps evaluated every 10, at lr 0.05 and at lr 0.0001 (which moves a
// weight by at most about 0.1 in 900 Adam steps). 9 cells per lr.
std::vector<std::string> SubmitArgs(const std::string& name, bool prune) {
  std::vector<std::string> args = {
      "submit",     "--name",       name,         "--dataset",   "exhaustive", "--m",
      "2",          "--seq-len",    "3",          "--heads",     "kernel:elu1,softmax",
      "--ranks",    "1,4",          "--seeds",    "3",           "--max-steps", "900",
      "--eval-every", "10",         "--lr",       "0.05,0.0001", "--no-cache"};
  if (prune) {
    // Rungs at steps 150 and 450 (eta 3).
    for (const char* a : {"--prune", "halving", "--prune-min-steps", "150"}) args.push_back(a);
  }
  return args;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Submits, trains with a worker that exits when idle, waits for the end.
std::string RunSweep(testing::LocalService& service, const TempDir& dir, const std::string& name,
                     bool prune) {
  CommandResult submitted = service.Cli(SubmitArgs(name, prune));
  EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id = Trimmed(submitted.out);
  Process worker({RANKSWEEP_WORKER_BIN, "--coordinator=" + service.addr(), "--device=cpu",
                  "--slots=1", "--once", "--idle_exit_seconds=2"},
                 dir.path() + "/worker-" + name, {"RANKSWEEP_TORCH_THREADS=1"});
  CommandResult watch = service.Cli({"watch", id}, 300s);
  EXPECT_EQ(watch.exit_code, 0) << watch.out << watch.err;
  EXPECT_TRUE(worker.Wait(60s).has_value()) << worker.Stderr();
  return id;
}

// Per head: the transition (train) and each rank's verdict.
using Verdicts = std::map<std::string, std::vector<std::string>>;
Verdicts VerdictsOf(const Json& summary) {
  Verdicts out;
  for (const Json& head : summary["heads"]) {
    std::vector<std::string>& v = out[head["head"].get<std::string>()];
    v.push_back(head["transition_rank"].dump());
    for (const Json& rank : head["ranks"]) {
      v.push_back(rank.value("rank", 0) == 0 ? "-" : std::to_string(rank["rank"].get<int>()));
      v.push_back(rank["verdict"].dump());
    }
  }
  return out;
}

struct Trained {
  int done = 0, pruned = 0, other = 0;
  int64_t steps = 0;  // over the DONE rows
};
Trained TrainedOf(const Json& rows) {
  Trained t;
  for (const Json& row : rows) {
    if (row["state"] == "DONE") {
      ++t.done;
      t.steps += row["result"]["steps"].get<int64_t>();
    } else if (row["state"] == "PRUNED") {
      ++t.pruned;
    } else {
      ++t.other;
    }
  }
  return t;
}

TEST(PruneTest, HalvingStopsTheLosingLrWithTheSameVerdictsAndFewerStepsTrained) {
  TempDir dir;
  testing::LocalService service(dir, RANKSWEEPD_BIN, RANKSWEEP_CLI_BIN);

  const std::string full = RunSweep(service, dir, "every-lr", false);
  const std::string halved = RunSweep(service, dir, "halved", true);

  CommandResult full_summary = service.Cli({"results", full, "--summary", "--format", "json"});
  ASSERT_EQ(full_summary.exit_code, 0) << full_summary.err;
  CommandResult halved_summary =
      service.Cli({"results", halved, "--summary", "--format", "json"});
  ASSERT_EQ(halved_summary.exit_code, 0) << halved_summary.err;
  const Verdicts before = VerdictsOf(Json::parse(full_summary.out));
  const Verdicts after = VerdictsOf(Json::parse(halved_summary.out));
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(after, before);

  CommandResult full_rows = service.Cli({"results", full, "--format", "json"});
  ASSERT_EQ(full_rows.exit_code, 0) << full_rows.err;
  CommandResult halved_rows = service.Cli({"results", halved, "--format", "json"});
  ASSERT_EQ(halved_rows.exit_code, 0) << halved_rows.err;
  const Trained a = TrainedOf(Json::parse(full_rows.out));
  const Trained b = TrainedOf(Json::parse(halved_rows.out));
  EXPECT_EQ(a.done, 18);
  EXPECT_EQ(a.pruned, 0);
  EXPECT_EQ(b.other, 0);  // nothing failed or cancelled
  EXPECT_EQ(b.done + b.pruned, 18);
  EXPECT_GT(b.pruned, 0);
  EXPECT_LT(b.steps, a.steps);

  // Every pruned row is the small lr's, and says where and by how much.
  for (const Json& row : Json::parse(halved_rows.out)) {
    if (row["state"] != "PRUNED") continue;
    EXPECT_EQ(row["lr"].get<double>(), 0.0001) << row.dump();
    EXPECT_THAT(row["failure"].get<std::string>(), HasSubstr("pruned at rung "));
  }
  // Status counts them apart from failures.
  CommandResult status = service.Cli({"status", halved});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr(std::to_string(b.pruned) + " pruned"));
  EXPECT_THAT(status.out, HasSubstr("0 failed"));
  EXPECT_THAT(status.out, HasSubstr("prune:      halving, eta 3"));
}

TEST(PruneTest, ABadPruneValueIsRefusedNamingTheFieldAndItsRange) {
  TempDir dir;
  testing::LocalService service(dir, RANKSWEEPD_BIN, RANKSWEEP_CLI_BIN);
  std::vector<std::string> args = SubmitArgs("bad", true);
  args.push_back("--prune-eta");
  args.push_back("1");
  CommandResult eta = service.Cli(args);
  EXPECT_EQ(eta.exit_code, 1);
  EXPECT_EQ(eta.err, "ranksweep: --prune-eta must be an integer in 2..16, got 1\n");
  CommandResult rule = service.Cli({"submit", "--name", "x", "--prune", "asha", "--dry-run"});
  EXPECT_EQ(rule.exit_code, 1);
  EXPECT_THAT(rule.err, HasSubstr("--prune must be one of none, halving"));
}

}  // namespace
}  // namespace ranksweep
