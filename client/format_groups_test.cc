// The writers of grouped results (format.h) and of the summary
// (sweep_views.h), and the axes' columns of rows and groups. Sweeps, rows
// and workers: format_test.cc.
#include "client/format.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/format_test_util.h"
#include "client/sweep_views.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ranksweep::client {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;

// A group's optional metrics: n and the aggregate per metric in CSV, an
// object per metric in JSON; empty cells and null where no done cell has it.
TEST(FormatTest, GroupsCarryEachOptionalMetricsAggregate) {
  v1::ResultGroup g = CompleteGroup();
  v1::MetricAggregate* exact = g.add_metrics();
  exact->set_name("first_exact_step");
  exact->set_n(2);
  exact->mutable_aggregate()->set_mean(70);
  exact->mutable_aggregate()->set_min(40);
  exact->mutable_aggregate()->set_max(100);
  g.add_metrics()->set_name("final_test_loss");  // n 0: no seed has it
  const Table t = ResultGroupsCsvTable({g}, false, {});
  ASSERT_EQ(t.header.size(), 38u);
  EXPECT_EQ(std::vector<std::string>(t.header.end() - 12, t.header.end()),
            (std::vector<std::string>{
                "first_exact_step_n", "first_exact_step_mean", "first_exact_step_std",
                "first_exact_step_min", "first_exact_step_max", "first_exact_step_ci95",
                "final_test_loss_n", "final_test_loss_mean", "final_test_loss_std",
                "final_test_loss_min", "final_test_loss_max", "final_test_loss_ci95"}));
  EXPECT_EQ(std::vector<std::string>(t.rows[0].end() - 12, t.rows[0].end()),
            (std::vector<std::string>{"2", "70", "0", "40", "100", "0", "0", "", "", "", "",
                                      ""}));
  const nlohmann::ordered_json j = ResultGroupJson(g, false, {});
  EXPECT_FALSE(j.contains("metrics"));
  EXPECT_EQ(j["first_exact_step"].dump(),
            R"({"mean":70.0,"std":0.0,"min":40.0,"max":100.0,"ci95":0.0,"n":2})");
  EXPECT_TRUE(j["final_test_loss"].is_null());
}

// Groups of a dataset without a test split have no test aggregates, and a
// group without a done seed has none at all: empty in CSV, null in JSON
// (they used to read 0, as if every seed were exact).
TEST(FormatTest, GroupCsvAndJsonLeaveMissingAggregatesEmpty) {
  const v1::ResultGroup g = CompleteGroup();
  v1::ResultGroup empty;
  empty.set_head("softmax");
  empty.set_head_index(1);
  empty.set_expected(3);
  const Table csv = ResultGroupsCsvTable({g, empty}, /*has_test_split=*/false);
  ASSERT_EQ(csv.header[6], "train_error_mean");
  ASSERT_EQ(csv.header[11], "test_error_mean");
  EXPECT_EQ(csv.rows[0][2], "4");
  EXPECT_EQ(csv.rows[0][6], "0.25");
  EXPECT_EQ(csv.rows[0][11], "");
  EXPECT_EQ(csv.rows[1][2], "");  // softmax has no rank
  EXPECT_EQ(csv.rows[1][6], "");  // no done seed
  EXPECT_EQ(ResultGroupsCsvTable({g}, /*has_test_split=*/true).rows[0][11], "0");

  const nlohmann::json json = nlohmann::json::parse(ResultGroupsJson({g, empty}, false));
  EXPECT_EQ(json[0]["train_error"]["mean"], 0.25);
  EXPECT_TRUE(json[0]["test_error"].is_null());
  EXPECT_TRUE(json[1]["rank"].is_null());
  EXPECT_TRUE(json[1]["train_error"].is_null());
  const nlohmann::json with_test = nlohmann::json::parse(ResultGroupsJson({g}, true));
  EXPECT_EQ(with_test[0]["test_error"]["mean"], 0.0);
}

TEST(FormatTest, ResultGroupsTable) {
  v1::ResultGroup g = CompleteGroup();
  g.mutable_train_error()->set_std(0.1);
  g.mutable_train_error()->set_min(0.125);
  g.mutable_train_error()->set_max(0.375);
  g.mutable_test_error()->set_mean(0.5);
  g.set_exact_seeds(0);
  v1::ResultGroup empty;
  empty.set_head("softmax");
  empty.set_expected(3);
  EXPECT_EQ(RenderTable(ResultGroupsTable({g, empty}, /*has_test_split=*/true)),
            "HEAD         RANK    N  TRAIN_ERR_MEAN  TRAIN_ERR_STD  TRAIN_ERR_MIN  TRAIN_ERR_MAX"
            "  TEST_ERR  EXACT_SEEDS\n"
            "kernel/elu1     4  3/3          0.2500         0.1000         0.1250         0.3750"
            "    0.5000            0\n"
            "softmax         -  0/3               -              -              -              -"
            "         -            0\n");
  EXPECT_THAT(RenderTable(ResultGroupsTable({g}, /*has_test_split=*/false)),
              ::testing::HasSubstr("0.3750         -            0\n"));
}

v1::QueryResultsResponse SummaryResponse() {
  v1::QueryResultsResponse r;
  auto group = [&](const std::string& head, int index, int rank, int64_t n, int64_t expected,
                   double mean, double ci95, double std, int64_t exact,
                   std::vector<uint64_t> missing) {
    v1::ResultGroup* g = r.add_groups();
    g->set_head(head);
    g->set_head_index(index);
    g->set_rank(rank);
    g->set_n(n);
    g->set_expected(expected);
    g->mutable_train_error()->set_mean(mean);
    g->mutable_train_error()->set_ci95(ci95);
    g->mutable_train_error()->set_std(std);
    g->set_exact_seeds(exact);
    for (uint64_t m : missing) g->add_missing_seeds(m);
  };
  group("kernel/elu1", 0, 1, 3, 3, 0.9, 0.05, 0.02, 0, {});
  group("kernel/elu1", 0, 32, 2, 3, 0, 0, 0, 2, {1});
  group("kernel/elu1", 0, 64, 3, 3, 0, 0, 0, 3, {});
  group("softmax", 1, 0, 3, 3, 0, 0, 0, 3, {});
  v1::HeadSummary* k = r.add_heads();
  k->set_head("kernel/elu1");
  k->set_head_index(0);
  k->set_has_rank(true);
  k->set_reason("undecided: rank 32 is incomplete");
  v1::HeadSummary* sm = r.add_heads();
  sm->set_head("softmax");
  sm->set_head_index(1);
  sm->set_reason("no rank; exact on 3/3 seeds");
  r.mutable_facts()->set_rank_lower_bound(8);
  r.mutable_facts()->set_rank_upper_bound(24);
  return r;
}

TEST(FormatTest, SummaryTextPerHeadWithTransitionAndTheory) {
  v1::QueryResultsResponse r = SummaryResponse();
  EXPECT_EQ(SummaryText(r, false),
            "kernel/elu1\n"
            "  RANK    N  ERROR (MEAN ± CI95)    STD  EXACT  COMPLETENESS\n"
            "     1  3/3        0.900 ± 0.050  0.020    0/3  complete\n"
            "    32  2/3        0.000 ± 0.000  0.000    2/2  seed 1 missing\n"
            "    64  3/3        0.000 ± 0.000  0.000    3/3  complete\n"
            "  transition rank: undefined (undecided: rank 32 is incomplete) (theory: lower "
            "bound 8, upper bound 24)\n"
            "\n"
            "softmax\n"
            "  RANK    N  ERROR (MEAN ± CI95)    STD  EXACT  COMPLETENESS\n"
            "     -  3/3        0.000 ± 0.000  0.000    3/3  complete\n"
            "  no rank; exact on 3/3 seeds\n");
  r.mutable_heads(0)->set_transition_defined(true);
  r.mutable_heads(0)->set_transition_rank(64);
  r.mutable_facts()->set_rank_lower_bound(0);
  r.mutable_facts()->set_rank_upper_bound(0);
  EXPECT_THAT(SummaryText(r, false),
              ::testing::HasSubstr(
                  "  transition rank: 64 (theory: no bound for this dataset)\n"));
  // A caveat follows the head's transition line.
  r.mutable_heads(0)->set_caveat("loss ce: not the paper's model");
  EXPECT_THAT(SummaryText(r, false),
              ::testing::HasSubstr("  transition rank: 64 (theory: no bound for this dataset)\n"
                                   "  caveat: loss ce: not the paper's model\n\nsoftmax\n"));
}

TEST(FormatTest, SummaryCsvAndJson) {
  v1::QueryResultsResponse r = SummaryResponse();
  Table t = SummaryCsvTable(r);
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(t.header[11], "missing_seeds");
  EXPECT_EQ(t.rows[1][11], "1");
  EXPECT_EQ(t.rows[1][12], "");  // transition undefined
  EXPECT_EQ(t.rows[1][14], "8");
  EXPECT_EQ(t.rows[1][15], "24");
  const std::string json = SummaryJson(r);
  EXPECT_THAT(json, ::testing::HasSubstr("\"rank_lower_bound\": 8"));
  // Missing values are null: the undefined transition's rank, the softmax
  // head's rank, and bounds the dataset does not have.
  const nlohmann::json tree = nlohmann::json::parse(json);
  EXPECT_TRUE(tree["heads"][0]["transition_rank"].is_null());
  EXPECT_TRUE(tree["heads"][1]["groups"][0]["rank"].is_null());
  EXPECT_EQ(t.rows[3][2], "");  // softmax's rank in CSV
  r.mutable_facts()->set_rank_lower_bound(0);
  r.mutable_facts()->set_rank_upper_bound(0);
  const nlohmann::json unbounded = nlohmann::json::parse(SummaryJson(r));
  EXPECT_TRUE(unbounded["facts"]["rank_lower_bound"].is_null());
  EXPECT_TRUE(unbounded["facts"]["rank_upper_bound"].is_null());
  EXPECT_EQ(SummaryCsvTable(r).rows[1][14], "");
  EXPECT_THAT(json, ::testing::HasSubstr("\"missing_seeds\": [\n"));
  EXPECT_THAT(json, ::testing::HasSubstr("\"transition_defined\": false"));
}

TEST(FormatTest, SummaryTextNamesTheCriterionAndPrintsBoundsOnlyWhereTheyApply) {
  v1::QueryResultsResponse r = SummaryResponse();
  r.set_criterion("seeds:2");
  r.mutable_heads(0)->set_transition_defined(true);
  r.mutable_heads(0)->set_transition_rank(32);
  const std::string kernel = SummaryText(r, false);
  EXPECT_THAT(kernel, ::testing::StartsWith("criterion: at least 2 seeds exact (seeds:2)\n\n"
                                            "kernel/elu1\n"));
  EXPECT_THAT(kernel, ::testing::HasSubstr(
                          "  transition rank: 32 (theory: lower bound 8, upper bound 24)\n"));
  for (const char* why : {"multi-head", "signed", "construction", "loss ce"}) {
    r.mutable_heads(0)->set_no_bound(why);
    EXPECT_THAT(SummaryText(r, false),
                ::testing::HasSubstr(std::string("  transition rank: 32 (theory: no bound (") +
                                     why + "))\n"));
  }
  // A dataset without bounds says so whatever the head.
  r.mutable_facts()->set_rank_lower_bound(0);
  r.mutable_facts()->set_rank_upper_bound(0);
  EXPECT_THAT(SummaryText(r, false),
              ::testing::HasSubstr("  transition rank: 32 (theory: no bound for this dataset)\n"));
  r.set_criterion("all");
  EXPECT_THAT(SummaryText(r, false),
              ::testing::StartsWith("criterion: every seed exact (all)\n\nkernel/elu1\n"));
}

TEST(FormatTest, SummaryTextWithRecipesHasARecipeColumn) {
  v1::QueryResultsResponse r = SummaryResponse();
  r.mutable_groups(1)->set_recipe(1);
  (*r.mutable_recipe_labels())[1] = "lr=0.003";
  const std::string text = SummaryText(r, false);
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "kernel/elu1\n"
                        "  RANK  RECIPE      N  ERROR (MEAN ± CI95)    STD  EXACT  COMPLETENESS\n"
                        "     1  recipe 0  3/3        0.900 ± 0.050  0.020    0/3  complete\n"
                        "    32  lr=0.003  2/3        0.000 ± 0.000  0.000    2/2  seed 1 missing\n"));
}

TEST(FormatTest, SummaryCsvAndJsonCarryTheCriterionRecipeAndVerdicts) {
  v1::QueryResultsResponse r = SummaryResponse();
  r.set_criterion("mean:0.99");
  r.mutable_groups(0)->set_verdict(v1::CRITERION_VERDICT_NOT_MET);
  r.mutable_groups(1)->set_verdict(v1::CRITERION_VERDICT_UNDECIDED);
  r.mutable_groups(2)->set_verdict(v1::CRITERION_VERDICT_MEETS);
  r.mutable_groups(2)->set_recipe(2);
  r.mutable_heads(1)->set_no_bound("softmax");
  Table t = SummaryCsvTable(r);
  ASSERT_EQ(t.header.size(), 20u);
  EXPECT_EQ(t.header[16], "criterion");
  EXPECT_EQ(t.header[17], "recipe");
  EXPECT_EQ(t.header[18], "meets");
  EXPECT_EQ(t.header[19], "test_meets");
  EXPECT_EQ(t.rows[0][16], "mean:0.99");
  EXPECT_EQ(t.rows[0][18], "no");
  EXPECT_EQ(t.rows[1][18], "undecided");
  EXPECT_EQ(t.rows[2][17], "2");
  EXPECT_EQ(t.rows[2][18], "yes");
  EXPECT_EQ(t.rows[2][19], "");  // no test split
  EXPECT_EQ(t.rows[0][14], "8");
  EXPECT_EQ(t.rows[3][14], "");  // softmax: the bounds do not apply
  EXPECT_EQ(t.rows[3][15], "");
  const nlohmann::json tree = nlohmann::json::parse(SummaryJson(r));
  EXPECT_EQ(tree["criterion"], "mean:0.99");
  EXPECT_EQ(tree["heads"][1]["no_bound"], "softmax");
  EXPECT_EQ(tree["heads"][0]["groups"][2]["recipe"], 2);
  EXPECT_TRUE(tree["heads"][0]["groups"][0]["test_verdict"].is_null());
  r.clear_criterion();
  EXPECT_TRUE(nlohmann::json::parse(SummaryJson(r))["criterion"].is_null());
}

// A sweep with axes: every output gets the axes' values of each row's and
// group's recipe; without axes nothing changes.
TEST(FormatTest, AxesBecomeColumnsInTableCsvAndJson) {
  SweepSpec spec;
  spec.axes = {{"lr", {0.01, 0.003}}, {"max_steps", {200, 400}}};
  const RecipeAxes axes = RecipeAxes::Of(spec);
  ASSERT_EQ(axes.names, (std::vector<std::string>{"lr", "max_steps"}));
  v1::ResultRow a = DoneRow("kernel/elu1", 8, 0, 0.125, 0, 0);
  a.set_recipe(1);  // lr 0.01, max_steps 400
  v1::ResultRow b = DoneRow("kernel/elu1", 8, 1, 0, 0, 0);
  b.set_recipe(2);  // lr 0.003, max_steps 200
  const std::string table = RenderTable(ResultRowsTable({a, b}, axes));
  EXPECT_THAT(table, HasSubstr("HEAD         RANK     LR  MAX_STEPS  SEED"));
  EXPECT_THAT(table, HasSubstr("kernel/elu1     8   0.01        400     0"));
  EXPECT_THAT(table, HasSubstr("kernel/elu1     8  0.003        200     1"));

  const std::string csv = ResultRowsCsv({a, b}, axes);
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[0], EndsWith(",cached_from_cell_id,first_exact_step,final_test_loss,recipe,lr,max_steps"));
  EXPECT_THAT(lines[1], EndsWith(",1,0.01,400"));
  EXPECT_THAT(lines[2], EndsWith(",2,0.003,200"));
  // Page by page, the same text.
  ResultRowsWriter writer(OutputFormat::kCsv, axes);
  std::string paged;
  writer.Begin(&paged);
  writer.Add(a, &paged);
  writer.Add(b, &paged);
  writer.End(&paged);
  EXPECT_EQ(paged, csv);

  const nlohmann::json rows = nlohmann::json::parse(ResultRowsJson({a, b}, axes));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["recipe"], 1);
  EXPECT_EQ(rows[0]["lr"], 0.01);
  EXPECT_EQ(rows[0]["max_steps"], 400);
  EXPECT_TRUE(rows[0]["max_steps"].is_number_integer());
  EXPECT_EQ(rows[1]["lr"], 0.003);

  v1::ResultGroup g = CompleteGroup();
  g.set_recipe(3);
  const Table groups = ResultGroupsCsvTable({g}, false, axes);
  // 9 keys and counts, 4 x 5 aggregates, 2 optional metrics x (n + 5).
  ASSERT_EQ(groups.header.size(), 41u);
  EXPECT_EQ(std::vector<std::string>(groups.header.begin(), groups.header.begin() + 9),
            (std::vector<std::string>{"head", "head_index", "rank", "recipe", "lr", "max_steps",
                                      "n", "expected", "exact_seeds"}));
  EXPECT_EQ(groups.rows[0][3], "3");
  EXPECT_EQ(groups.rows[0][4], "0.003");
  EXPECT_EQ(groups.rows[0][5], "400");
  const nlohmann::json gj = nlohmann::json::parse(ResultGroupsJson({g}, false, axes));
  EXPECT_EQ(gj[0]["lr"], 0.003);
  EXPECT_EQ(gj[0]["max_steps"], 400);
  EXPECT_THAT(RenderTable(ResultGroupsTable({g}, false, axes)), HasSubstr("LR  MAX_STEPS"));

  // Without axes: the outputs of before.
  EXPECT_EQ(ResultRowsCsv({a}, RecipeAxes::Of(SweepSpec{})), ResultRowsCsv({a}));
  EXPECT_EQ(RenderTable(ResultRowsTable({a}, RecipeAxes::Of(SweepSpec{}))),
            RenderTable(ResultRowsTable({a})));
}

}  // namespace
}  // namespace ranksweep::client
