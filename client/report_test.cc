#include "client/report.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep::client {
namespace {

using ::testing::HasSubstr;

// A witness sweep of a kernel head (ranks 2, 4) and softmax, 2 seeds.
ReportSweep WitnessSweep() {
  ReportSweep s;
  s.spec.name = "wit";
  s.spec.dataset.kind = DatasetKind::kWitness;
  s.spec.dataset.m = 8;
  s.spec.dataset.seq_len = 3;
  HeadSpec softmax;
  softmax.kind = HeadKind::kSoftmax;
  s.spec.heads = {HeadSpec{}, softmax};
  s.spec.ranks = {2, 4};
  s.spec.seed_count = 2;
  s.sweep.set_sweep_id("sw-1");
  s.sweep.set_state(v1::SWEEP_STATE_DONE);
  s.sweep.mutable_counts()->set_total(6);
  s.sweep.mutable_counts()->set_done(6);
  for (const char* criterion : {"all", "mean:0.99", "seeds:1"}) {
    v1::QueryResultsResponse r;
    r.set_criterion(criterion);
    const bool seeds1 = std::string(criterion) == "seeds:1";
    auto group = [&](const std::string& head, int index, int rank, double mean, double ci,
                     int exact, v1::CriterionVerdict verdict) {
      v1::ResultGroup* g = r.add_groups();
      g->set_head(head);
      g->set_head_index(index);
      g->set_rank(rank);
      g->set_n(2);
      g->set_expected(2);
      g->mutable_train_error()->set_mean(mean);
      g->mutable_train_error()->set_ci95(ci);
      g->set_exact_seeds(exact);
      g->set_verdict(verdict);
    };
    group("kernel/elu1", 0, 2, 0.25, 3.177, 1,
          seeds1 ? v1::CRITERION_VERDICT_MEETS : v1::CRITERION_VERDICT_NOT_MET);
    group("kernel/elu1", 0, 4, 0, 0, 2, v1::CRITERION_VERDICT_MEETS);
    group("softmax", 1, 0, 0, 0, 2, v1::CRITERION_VERDICT_MEETS);
    v1::HeadSummary* k = r.add_heads();
    k->set_head("kernel/elu1");
    k->set_has_rank(true);
    k->set_transition_defined(true);
    k->set_transition_rank(seeds1 ? 2 : 4);
    k->set_reason(seeds1 ? "rank 2 is the smallest swept rank with at least 1 seed exact (1/2)"
                         : "rank 4 is the smallest ...");
    v1::HeadSummary* sm = r.add_heads();
    sm->set_head("softmax");
    sm->set_head_index(1);
    sm->set_reason("no rank; exact on 2/2 seeds");
    sm->set_no_bound("softmax");
    r.mutable_facts()->set_rank_lower_bound(3);
    r.mutable_facts()->set_rank_upper_bound(12);
    (*r.mutable_recipe_labels())[0] = "recipe 0";
    s.summaries.push_back(r);
  }
  for (int rank : {2, 4}) {
    for (uint64_t seed : {0, 1}) {
      v1::ResultRow row;
      row.set_head("kernel/elu1");
      row.set_rank(rank);
      row.set_seed(seed);
      row.set_state(v1::CELL_STATE_DONE);
      row.mutable_result()->mutable_train()->set_error(rank == 2 && seed == 1 ? 0.5 : 0);
      s.rows.push_back(row);
    }
  }
  return s;
}

TEST(ReportCriteriaTest, AllMeanAndHalfTheSeeds) {
  EXPECT_EQ(ReportCriteria(5), (std::vector<std::string>{"all", "mean:0.99", "seeds:3"}));
  EXPECT_EQ(ReportCriteria(2), (std::vector<std::string>{"all", "mean:0.99", "seeds:1"}));
  // With one seed, seeds:1 is `all` again.
  EXPECT_EQ(ReportCriteria(1), (std::vector<std::string>{"all", "mean:0.99"}));
}

TEST(BuildReportTest, PageTablesPlotsAndSpec) {
  std::vector<ReportFile> files = BuildReport({WitnessSweep()});
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, "report.md");
  EXPECT_EQ(files[1].name, "1-wit-train.svg");
  EXPECT_THAT(files[1].contents, HasSubstr("<svg"));
  const std::string& page = files[0].contents;
  // The index of sweeps.
  EXPECT_THAT(page, HasSubstr("| # | sweep | name | dataset | state | cells done |\n"
                              "|--:|---|---|---|---|--:|\n"
                              "| 1 | `sw-1` | wit | witness dataset, m = 8, N = 3, 2 seeds | "
                              "DONE | 6/6 |\n"));
  // Transition ranks under each criterion; bounds only beside the kernel head.
  EXPECT_THAT(page,
              HasSubstr("### Transition ranks\n\n"
                        "| head | criterion | train | theory |\n"
                        "|---|---|--:|---|\n"
                        "| kernel/elu1 | `all` | 4 | lower bound 3, upper bound 12 |\n"
                        "| kernel/elu1 | `mean:0.99` | 4 | lower bound 3, upper bound 12 |\n"
                        "| kernel/elu1 | `seeds:1` | 2 | lower bound 3, upper bound 12 |\n"
                        "| softmax | `all` | no rank | - |\n"));
  // A summary table per criterion and split.
  EXPECT_THAT(page, HasSubstr("### Criterion `seeds:1`: at least 1 seed exact\n\n"
                              "#### Train split\n\n"
                              "| head | rank | N | error (mean ± CI95) | exact | meets | "
                              "completeness |\n"
                              "|---|--:|--:|--:|--:|---|---|\n"
                              "| kernel/elu1 | 2 | 2/2 | 0.250 ± 3.177 | 1/2 | yes | complete |\n"
                              "| kernel/elu1 | 4 | 2/2 | 0.000 ± 0.000 | 2/2 | yes | complete |\n"
                              "| softmax | - | 2/2 | 0.000 ± 0.000 | 2/2 | yes | complete |\n"
                              "\n"
                              "- kernel/elu1: transition rank 2 (rank 2 is the smallest swept "
                              "rank with at least 1 seed exact (1/2)) (theory: lower bound 3, "
                              "upper bound 12)\n"
                              "- softmax: no rank; exact on 2/2 seeds\n"));
  EXPECT_THAT(page, HasSubstr("| kernel/elu1 | 2 | 2/2 | 0.250 ± 3.177 | 1/2 | no | complete |\n"));
  EXPECT_THAT(page, ::testing::Not(HasSubstr("Test split")));
  EXPECT_THAT(page, HasSubstr("### Plots\n\n![wit: train error against feature rank]"
                              "(1-wit-train.svg)\n"));
  EXPECT_THAT(page, HasSubstr("### Spec\n\n```json\n{\n  \"dataset\": {\n"));
  EXPECT_THAT(page, HasSubstr("  \"name\": \"wit\",\n"));
  EXPECT_THAT(page, HasSubstr("  }\n}\n```\n"));
}

TEST(BuildReportTest, TestSplitRecipesAndNames) {
  ReportSweep s = WitnessSweep();
  s.spec.name = "ood small/1";
  s.spec.dataset.kind = DatasetKind::kPool;
  s.spec.dataset.test_size = 50;
  for (v1::ResultRow& row : s.rows) row.mutable_result()->mutable_test()->set_error(0.1);
  // Two recipes at rank 4 under `all`: recipe 1 meets it.
  v1::QueryResultsResponse& r = s.summaries[0];
  r.clear_facts();
  (*r.mutable_recipe_labels())[1] = "lr=0.003";
  v1::ResultGroup* g = r.add_groups();
  g->set_head("kernel/elu1");
  g->set_rank(4);
  g->set_recipe(1);
  g->set_n(1);
  g->set_expected(2);
  g->set_exact_seeds(1);
  g->add_missing_seeds(1);
  g->set_verdict(v1::CRITERION_VERDICT_UNDECIDED);
  v1::RankOutcome* o = r.mutable_heads(0)->add_ranks();
  o->set_rank(4);
  o->add_recipes_meeting(0);
  o->add_recipes_meeting(1);
  std::vector<ReportFile> files = BuildReport({s});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[1].name, "1-ood_small_1-train.svg");
  EXPECT_EQ(files[2].name, "1-ood_small_1-test.svg");
  const std::string& page = files[0].contents;
  EXPECT_THAT(page,
              HasSubstr("| head | criterion | train | test | theory |\n|---|---|--:|--:|---|\n"));
  EXPECT_THAT(page, HasSubstr("| kernel/elu1 | `all` | 4 (recipe 0, lr=0.003) | undefined | - "
                              "|\n"));
  EXPECT_THAT(page, HasSubstr("| head | rank | recipe | N | error (mean ± CI95) | exact | meets "
                              "| completeness |\n"));
  EXPECT_THAT(page, HasSubstr("| kernel/elu1 | 4 | lr=0.003 | 1/2 | 0.000 | 1/1 | undecided | "
                              "seed 1 missing |\n"));
  EXPECT_THAT(page, HasSubstr("#### Test split\n\n| head | rank | recipe | N | "
                              "test error (mean ± CI95) |"));
}

// With recipe axes the plot has a line per (head, recipe), labelled with the
// recipe, and each seed lands on its recipe's line; without axes a line per
// head, labelled as the head.
TEST(AddSweepToPlotTest, OneLinePerHeadAndRecipe) {
  ReportSweep s = WitnessSweep();
  PlotInput plain;
  AddSweepToPlot("sw-1", s.spec, s.rows, {}, "error", false, false, &plain);
  ASSERT_EQ(plain.heads.size(), 2u);
  EXPECT_EQ(plain.heads[0].label, "kernel/elu1");
  EXPECT_EQ(plain.heads[1].label, "softmax");
  EXPECT_EQ(plain.points.size(), 4u);

  s.spec.axes = {{"lr", {0.02, 0.003}}};
  for (size_t i = 0; i < s.rows.size(); ++i) s.rows[i].set_recipe(static_cast<int>(i % 2));
  PlotInput in;
  AddSweepToPlot("sw-1", s.spec, s.rows, {}, "error", false, false, &in);
  ASSERT_EQ(in.heads.size(), 4u);
  std::vector<std::string> labels;
  for (const PlotHead& h : in.heads) labels.push_back(h.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"kernel/elu1 lr=0.02", "kernel/elu1 lr=0.003",
                                              "softmax lr=0.02", "softmax lr=0.003"}));
  EXPECT_EQ(in.heads[3].head_index, 3);
  EXPECT_FALSE(in.heads[3].has_rank);
  ASSERT_EQ(in.points.size(), 4u);
  for (size_t i = 0; i < in.points.size(); ++i) {
    EXPECT_EQ(in.points[i].head_index, static_cast<int>(i % 2)) << i;  // kernel, recipe i % 2
  }
  const std::string svg = RenderPlotSvg(in);
  EXPECT_THAT(svg, HasSubstr(">kernel/elu1 lr=0.003</text>"));
  // Two seeds per recipe-line at ranks 2 and 4 apart: one solid line each.
  size_t lines = 0;
  for (size_t at = svg.find("<path class=\"mean\""); at != std::string::npos;
       at = svg.find("<path class=\"mean\"", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 2u);
  // A recipe the spec does not have is dropped, not drawn on another line.
  s.rows[0].set_recipe(2);
  PlotInput bad;
  AddSweepToPlot("sw-1", s.spec, s.rows, {}, "error", false, false, &bad);
  EXPECT_EQ(bad.points.size(), 3u);
}

}  // namespace
}  // namespace ranksweep::client
