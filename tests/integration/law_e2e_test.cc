// The law and ood presets through the whole service at a small scale: a real
// ranksweepd on a temporary SQLite file, a real ranksweep-worker, and the
// CLI submitting `--preset law` (an m axis, every sequence of
// ({0,1}^m)^3 at each m) and `--preset ood` (disjoint sequences of every
// token, one sweep per m), then reading the transition at each m, its fit,
// the figure against m and the report. Which ranks turn out exact depends
// on the machine's arithmetic, so the test holds the structure and the
// fit's arithmetic to the points the summary itself reports, not a rank.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/local_service.h"
#include "tests/support/process.h"
#include "tests/support/text.h"

namespace ranksweep {
namespace {

using ::ranksweep::testing::Count;

using ::ranksweep::testing::CommandResult;
using ::ranksweep::testing::Process;
using ::ranksweep::testing::TempDir;
using ::testing::HasSubstr;
using Json = nlohmann::json;
using namespace std::chrono_literals;

std::vector<std::string> Ids(const std::string& out) {
  return absl::StrSplit(out, '\n', absl::SkipEmpty());
}


TEST(LawE2eTest, LawAndOodPresetsGiveTheTransitionAtEachMItsFitAndTheirFigures) {
  TempDir dir;
  testing::LocalService service(dir, RANKSWEEPD_BIN, RANKSWEEP_CLI_BIN);
  // law at scale 0.1 (ranks 1, 8, 64; 2 seeds; 300 steps) over m = 2, 3:
  // (3 ranks + softmax) x 2 seeds x 2 values of m.
  CommandResult law = service.Cli({"submit", "--preset", "law", "--scale", "0.1", "--m", "2,3"});
  ASSERT_EQ(law.exit_code, 0) << law.err;
  const std::vector<std::string> law_ids = Ids(law.out);
  ASSERT_EQ(law_ids.size(), 1u) << law.out;
  EXPECT_THAT(law.err, HasSubstr("law-s0.1: ranks 1,8,64 (of 7); seeds 2 (of 3); max_steps 300 "
                                 "(of 3000); "));
  // ood at scale 0.1: three sweeps, m = 3, 4, 5, disjoint sequences.
  CommandResult ood = service.Cli({"submit", "--preset", "ood", "--scale", "0.1"});
  ASSERT_EQ(ood.exit_code, 0) << ood.err;
  const std::vector<std::string> ood_ids = Ids(ood.out);
  ASSERT_EQ(ood_ids.size(), 3u) << ood.out;

  Process worker({RANKSWEEP_WORKER_BIN, "--coordinator=" + service.addr(), "--device=cpu",
                  "--slots=2", "--once", "--idle_exit_seconds=3"},
                 dir.path() + "/worker", {"RANKSWEEP_TORCH_THREADS=1"});
  for (const std::string& id : law_ids) {
    CommandResult w = service.Cli({"watch", id}, 400s);
    ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  }
  for (const std::string& id : ood_ids) {
    CommandResult w = service.Cli({"watch", id}, 400s);
    ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  }

  // The summary's laws: one per head along m, a point per value.
  const std::string& id = law_ids[0];
  CommandResult r = service.Cli({"results", id, "--summary", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json summary = Json::parse(r.out);
  ASSERT_EQ(summary["laws"].size(), 2u) << r.out;
  const Json& kernel = summary["laws"][0];
  const Json& softmax = summary["laws"][1];
  EXPECT_EQ(kernel["axis"], "m");
  EXPECT_EQ(kernel["head"], "kernel/elu1");
  EXPECT_EQ(kernel["has_rank"], true);
  EXPECT_EQ(kernel["numeric"], true);
  EXPECT_EQ(softmax["head"], "softmax");
  EXPECT_EQ(softmax["has_rank"], false);
  EXPECT_TRUE(softmax["fit"].is_null());
  ASSERT_EQ(kernel["points"].size(), 2u);
  EXPECT_EQ(kernel["points"][0]["label"], "2");
  EXPECT_EQ(kernel["points"][1]["label"], "3");
  // The fit is the line through the defined points, and names the others.
  std::vector<std::pair<double, int>> defined;
  std::vector<double> undefined;
  for (const Json& p : kernel["points"]) {
    ASSERT_EQ(p["summary"]["ranks"].size(), 3u) << p.dump();
    if (p["summary"]["transition_defined"] == true) {
      defined.emplace_back(p["value"].get<double>(), p["summary"]["transition_rank"].get<int>());
    } else {
      undefined.push_back(p["value"].get<double>());
    }
  }
  if (defined.size() == 2) {
    ASSERT_TRUE(kernel["fit"].is_object()) << kernel.dump();
    EXPECT_EQ(kernel["fit"]["points"], 2);
    EXPECT_NEAR(kernel["fit"]["slope"].get<double>(),
                std::log2(defined[1].second) - std::log2(defined[0].second), 1e-9);
  } else {
    EXPECT_TRUE(kernel["fit"].is_null()) << kernel.dump();
  }
  r = service.Cli({"results", id, "--summary"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("transition rank against m (best over the other recipe axes)\n"));
  EXPECT_THAT(r.out, HasSubstr("  M  KERNEL/ELU1"));
  EXPECT_THAT(r.out, HasSubstr("kernel/elu1 fit: "));

  // The figure: a dot per defined point, an open triangle per undefined one.
  const std::string svg = dir.path() + "/law.svg";
  r = service.Cli({"plot", id, "--x", "m", "-o", svg});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "wrote " + svg + " (2 heads against m)\n");
  const std::string drawn = testing::ReadFile(svg);
  EXPECT_EQ(Count(drawn, "class=\"transition\""), static_cast<int>(defined.size()));
  EXPECT_EQ(Count(drawn, "class=\"undefined\""), static_cast<int>(undefined.size()));
  EXPECT_EQ(Count(drawn, "class=\"reference\""), 1);
  // The figure for a paper: no title or caption, its own size and text size,
  // PDF; a size too small for the text is refused before anything is written.
  const std::string pdf = dir.path() + "/law.pdf";
  r = service.Cli({"plot", id, "--x", "m", "-o", pdf, "--no-title", "--no-caption", "--size",
                   "700x420", "--font-size", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFile(pdf).rfind("%PDF-", 0), 0u);
  r = service.Cli({"plot", id, "--x", "m", "-o", svg, "--no-title", "--no-caption", "--size",
                   "700x420", "--font-size", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string bare = testing::ReadFile(svg);
  EXPECT_THAT(bare, HasSubstr("width=\"700\" height=\"420\""));
  EXPECT_THAT(bare, HasSubstr("font-size=\"16\""));
  EXPECT_EQ(Count(bare, "class=\"title\""), 0);
  EXPECT_EQ(Count(bare, "class=\"caption\""), 0);
  EXPECT_EQ(Count(bare, "class=\"transition\""), static_cast<int>(defined.size()));
  r = service.Cli({"plot", id, "--x", "m", "-o", dir.path() + "/small.svg", "--size", "300x420"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--size: a width of 300 px leaves the plot area 0 px wide beside "
                               "the legend (at least 120 px); use a width of at least 540"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/small.svg"));
  r = service.Cli({"plot", id, "--x", "m", "-o", svg, "--bands"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--bands: the transition figure (--x) draws each seed's "
                               "transition, not bands"));
  r = service.Cli({"plot", id, "--x", "pool_size", "-o", svg});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--x: sweep " + id + " (law-s0.1) has no dataset axis "
                               "\"pool_size\"; its dataset axes are m"));

  // The report: the section and the figure against m.
  const std::string out = dir.path() + "/report";
  r = service.Cli({"report", id, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = testing::ReadFile(out + "/" + "report.md");
  EXPECT_THAT(page, HasSubstr("### Transition against the problem size\n"));
  EXPECT_THAT(page, HasSubstr("![law-s0.1: train transition rank against m](1-law-s0.1-m-train.svg)"));
  EXPECT_THAT(testing::ReadFile(out + "/1-law-s0.1-m-train.svg"), HasSubstr("<svg"));

  // ood: disjoint sequences of every token, sizes as the preset scales them.
  const int want_train[] = {200, 200, 800}, want_test[] = {50, 200, 400};
  for (int i = 0; i < 3; ++i) {
    r = service.Cli({"results", ood_ids[i], "--format", "json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Json rows = Json::parse(r.out);
    ASSERT_EQ(rows.size(), 8u) << r.out;  // (3 ranks + softmax) x 2 seeds
    for (const Json& row : rows) {
      EXPECT_EQ(row["state"], "DONE");
      EXPECT_EQ(row["result"]["facts"]["train_sequences"], want_train[i]) << row.dump();
      EXPECT_EQ(row["result"]["facts"]["test_sequences"], want_test[i]) << row.dump();
    }
    r = service.Cli({"results", ood_ids[i], "--summary"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("  test transition rank: "));
  }
  ASSERT_TRUE(worker.Wait(60s).has_value()) << worker.Stderr();
}

}  // namespace
}  // namespace ranksweep
