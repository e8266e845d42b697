// A sweep with a learning-rate axis through the whole service: a real
// ranksweepd on a temporary SQLite file, a real ranksweep-worker training
// the small sweep's heads on one CPU core, and the CLI submitting it with
// `--lr A,B` and reading it back as JSON, CSV and groups. Every cell of
// every recipe must be trained once and come back carrying its lr.
#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/local_service.h"
#include "tests/support/process.h"

namespace ranksweep {
namespace {

using ::ranksweep::testing::CommandResult;
using ::ranksweep::testing::Process;
using ::ranksweep::testing::RunCommand;
using ::ranksweep::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;
using namespace std::chrono_literals;

// Exhaustive m=2, N=3: kernel ranks 1 and 4 and softmax, 3 seeds = 9 cells
// per recipe, two learning rates.
const std::vector<std::string> kSubmit = {
    "submit",  "--name",  "lr-axis", "--dataset",    "exhaustive",      "--m",
    "2",       "--seq-len", "3",     "--heads",      "kernel:elu1,softmax", "--ranks",
    "1,4",     "--seeds", "3",       "--max-steps",  "300",             "--lr",
    "0.05,0.01"};
constexpr int kCellsPerLr = 9;

TEST(RecipeAxesTest, AnLrAxisTrainsEveryCellOfEveryLrOnceAndRowsCarryTheirLr) {
  TempDir dir;
  testing::LocalService service(dir, RANKSWEEPD_BIN, RANKSWEEP_CLI_BIN);

  CommandResult dry = service.Cli([] {
    std::vector<std::string> args = kSubmit;
    args.push_back("--dry-run");
    return args;
  }());
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_THAT(dry.err, HasSubstr("lr-axis: 18 cells in 2 recipes; axes: lr 0.05,0.01\n"));
  EXPECT_EQ(Json::parse(dry.out)["train"]["lr"], Json::parse("[0.05, 0.01]"));

  CommandResult submitted = service.Cli(kSubmit);
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  EXPECT_THAT(submitted.err, HasSubstr("submitted lr-axis: 18 cells"));
  std::string id = submitted.out;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();

  Process worker({RANKSWEEP_WORKER_BIN, "--coordinator=" + service.addr(), "--device=cpu",
                  "--slots=1", "--once", "--idle_exit_seconds=2"},
                 dir.path() + "/worker", {"RANKSWEEP_TORCH_THREADS=1"});
  CommandResult watch = service.Cli({"watch", id}, 300s);
  ASSERT_EQ(watch.exit_code, 0) << watch.out << watch.err;
  ASSERT_TRUE(worker.Wait(60s).has_value()) << worker.Stderr();

  // JSON rows: 9 per lr, each with its recipe and its lr.
  CommandResult json = service.Cli({"results", id, "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json rows = Json::parse(json.out);
  ASSERT_EQ(rows.size(), 2u * kCellsPerLr);
  std::map<double, int> rows_per_lr;
  for (const Json& row : rows) {
    EXPECT_EQ(row["state"], "DONE");
    ASSERT_TRUE(row["lr"].is_number()) << row.dump();
    EXPECT_EQ(row["lr"].get<double>(), row["recipe"] == 0 ? 0.05 : 0.01) << row.dump();
    EXPECT_LE(row["result"]["steps"].get<int>(), 300);
    ++rows_per_lr[row["lr"].get<double>()];
  }
  EXPECT_THAT(rows_per_lr, ElementsAre(std::pair(0.01, kCellsPerLr), std::pair(0.05, kCellsPerLr)));

  // CSV: the recipe and lr columns last, the same counts.
  CommandResult csv = service.Cli({"results", id, "--format", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  std::vector<std::string> lines = absl::StrSplit(csv.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u + 2 * kCellsPerLr);
  EXPECT_THAT(lines[0], ::testing::EndsWith(",cached_from_cell_id,first_exact_step,final_test_loss,recipe,lr"));
  std::map<std::string, int> csv_per_lr;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    ++csv_per_lr[cells[cells.size() - 2] + " " + cells.back()];
  }
  EXPECT_THAT(csv_per_lr, ElementsAre(std::pair("0 0.05", kCellsPerLr),
                                      std::pair("1 0.01", kCellsPerLr)));

  // Groups by head, rank and lr: 3 (head, rank) x 2 lr, 3 seeds each.
  CommandResult grouped =
      service.Cli({"results", id, "--group-by", "head,rank,lr", "--format", "json"});
  ASSERT_EQ(grouped.exit_code, 0) << grouped.err;
  const Json groups = Json::parse(grouped.out);
  ASSERT_EQ(groups.size(), 6u);
  std::map<double, int> groups_per_lr;
  for (const Json& g : groups) {
    EXPECT_EQ(g["n"], 3) << g.dump();
    EXPECT_EQ(g["expected"], 3);
    ++groups_per_lr[g["lr"].get<double>()];
  }
  EXPECT_THAT(groups_per_lr, ElementsAre(std::pair(0.01, 3), std::pair(0.05, 3)));

  // Groups are per recipe: leaving the axis out is refused, naming it.
  CommandResult no_lr = service.Cli({"results", id, "--group-by", "head,rank"});
  EXPECT_EQ(no_lr.exit_code, 1);
  EXPECT_THAT(no_lr.err, HasSubstr("--group-by head,rank,lr"));

  // The per-seed table has an LR column after RANK.
  CommandResult table = service.Cli({"results", id, "--head", "softmax"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, ::testing::ContainsRegex("HEAD +RANK +LR +SEED"));
}

}  // namespace
}  // namespace ranksweep
