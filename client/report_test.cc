#include "client/report.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/spec/spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep::client {
namespace {

using ::testing::HasSubstr;

// A witness spec (m = 8, N = 3) of a kernel head and softmax.
SweepSpec KernelAndSoftmax(const std::string& name, std::vector<int> ranks, int seeds) {
  SweepSpec spec;
  spec.name = name;
  spec.dataset.kind = DatasetKind::kWitness;
  spec.dataset.m = 8;
  spec.dataset.seq_len = 3;
  HeadSpec softmax;
  softmax.kind = HeadKind::kSoftmax;
  spec.heads = {HeadSpec{}, softmax};
  spec.ranks = std::move(ranks);
  spec.seed_count = seeds;
  return spec;
}

// A witness sweep of a kernel head (ranks 2, 4) and softmax, 2 seeds.
ReportSweep WitnessSweep() {
  ReportSweep s;
  s.spec = KernelAndSoftmax("wit", {2, 4}, 2);
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

// One criterion unless asked for more: three made every table three times.
TEST(ReportCriteriaTest, OneByDefaultAndTheListOrTheStandardThreeWhenAsked) {
  EXPECT_EQ(*ParseReportCriteria("", 5), (std::vector<std::string>{"all"}));
  EXPECT_EQ(*ParseReportCriteria("standard", 5), ReportCriteria(5));
  EXPECT_EQ(*ParseReportCriteria("all, mean:0.9,seeds:2", 5),
            (std::vector<std::string>{"all", "mean:0.9", "seeds:2"}));
  EXPECT_EQ(ParseReportCriteria("all,all", 5).status().message(),
            "--criteria: \"all\" is given twice");
  const absl::Status bad = ParseReportCriteria("all,mean:2", 5).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), ::testing::StartsWith("--criteria"));
}

ReportSweep TinySweep(const std::string& id, const std::string& name, int seeds);

// What the report shows of a spec reads back as the same spec, recipe
// axes included.
TEST(NonDefaultSpecJsonTest, ReadsBackAsTheSameSpec) {
  SweepSpec spec = TinySweep("sw-1", "demo", 3).spec;
  spec.axes = {{"lr", {0.01, 0.003}}};
  spec.heads[0].feature_map = FeatureMap::kReluEps;
  spec.priority = 5;
  const std::string json = NonDefaultSpecJson(spec);
  EXPECT_THAT(json, HasSubstr("\"lr\": [0.01, 0.003]"));
  EXPECT_THAT(json, HasSubstr("\"priority\": 5"));
  absl::StatusOr<SweepSpec> back = SweepSpecFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << json;
  EXPECT_EQ(SweepSpecToJson(*back), SweepSpecToJson(spec));
  EXPECT_EQ(SweepSpecToJson(*SweepSpecFromJson(NonDefaultSpecJson(WitnessSweep().spec))),
            SweepSpecToJson(WitnessSweep().spec));
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
  EXPECT_THAT(page, HasSubstr("### Spec\n\nThe fields that differ from the defaults (`submit -f` "
                              "reads it back):\n\n```json\n{\n  \"dataset\": {\"kind\": "
                              "\"witness\", \"m\": 8},\n"));
  EXPECT_THAT(page, HasSubstr("  \"name\": \"wit\",\n"));
  EXPECT_THAT(page, HasSubstr("  \"seed_count\": 2\n}\n```\n"));
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

// A tiny sweep as a newcomer runs it: kernel/elu1 over ranks 1..32 and
// softmax, `seeds` seeds, done by one CPU worker, summarized under `all`
// (what `report` asks for by default).
ReportSweep TinySweep(const std::string& id, const std::string& name, int seeds) {
  ReportSweep s;
  s.spec = KernelAndSoftmax(name, {1, 2, 4, 8, 16, 32}, seeds);
  s.spec.train.max_steps = 300;
  s.sweep.set_sweep_id(id);
  s.sweep.set_state(v1::SWEEP_STATE_DONE);
  s.sweep.set_created_unix_ms(1764669600000);   // 2025-12-02 10:00:00 UTC
  s.sweep.set_finished_unix_ms(1764669672000);  // 72 s later
  const int cells = 7 * seeds;
  s.sweep.mutable_counts()->set_total(cells);
  s.sweep.mutable_counts()->set_done(cells);
  v1::QueryResultsResponse r;
  r.set_criterion("all");
  for (int rank : {1, 2, 4, 8, 16, 32, 0}) {
    v1::ResultGroup* g = r.add_groups();
    g->set_head(rank > 0 ? "kernel/elu1" : "softmax");
    g->set_head_index(rank > 0 ? 0 : 1);
    g->set_rank(rank);
    g->set_n(seeds);
    g->set_expected(seeds);
    g->mutable_train_error()->set_mean(rank > 0 && rank < 8 ? 0.5 : 0);
    g->set_exact_seeds(rank > 0 && rank < 8 ? 0 : seeds);
    g->set_verdict(rank > 0 && rank < 8 ? v1::CRITERION_VERDICT_NOT_MET
                                        : v1::CRITERION_VERDICT_MEETS);
  }
  v1::HeadSummary* k = r.add_heads();
  k->set_head("kernel/elu1");
  k->set_has_rank(true);
  k->set_transition_defined(true);
  k->set_transition_rank(8);
  k->set_reason("rank 8 is the smallest swept rank with every seed exact");
  v1::HeadSummary* sm = r.add_heads();
  sm->set_head("softmax");
  sm->set_head_index(1);
  sm->set_reason("no rank; exact on every seed");
  r.mutable_facts()->set_rank_lower_bound(3);
  r.mutable_facts()->set_rank_upper_bound(12);
  s.summaries.push_back(r);
  int64_t cell = 0;
  for (int rank : {1, 2, 4, 8, 16, 32, 0}) {
    for (int seed = 0; seed < seeds; ++seed) {
      v1::ResultRow row;
      row.set_cell_id(++cell);
      row.set_head(rank > 0 ? "kernel/elu1" : "softmax");
      row.set_head_index(rank > 0 ? 0 : 1);
      row.set_rank(rank);
      row.set_seed(static_cast<uint64_t>(seed));
      row.set_state(v1::CELL_STATE_DONE);
      row.mutable_worker_version()->set_build_id("0.9.0+1a2b3c4d5e6f.0123456789ab");
      row.mutable_worker_version()->set_torch_version("2.5.1");
      row.mutable_result()->set_device("cpu");
      row.mutable_result()->set_wall_seconds(1.5);
      row.mutable_result()->mutable_train()->set_error(rank > 0 && rank < 8 ? 0.5 : 0);
      s.rows.push_back(row);
    }
  }
  return s;
}

size_t Lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Two tiny sweeps made a 381-line page: every table three times (one per
// criterion), the full spec with every default. One criterion and the
// non-default fields keep it to a page a reader can take in.
TEST(BuildReportTest, TwoTinySweepsFitInAboutAHundredAndTwentyLines) {
  const std::vector<ReportFile> files =
      BuildReport({TinySweep("sw-1", "demo", 3), TinySweep("sw-2", "demo-b", 2)});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_LE(Lines(files[0].contents), 120u) << files[0].contents;
  // Each table once per sweep: the transition ranks, the train summary.
  size_t tables = 0;
  for (size_t at = files[0].contents.find("\n| head |"); at != std::string::npos;
       at = files[0].contents.find("\n| head |", at + 1)) {
    ++tables;
  }
  EXPECT_EQ(tables, 4u);
}

// The spec as the fields that differ from the defaults: the name, dataset,
// heads, ranks, seeds and the steps set; nothing at its default value.
TEST(BuildReportTest, TheSpecShowsOnlyItsNonDefaultFields) {
  const std::string page = BuildReport({TinySweep("sw-1", "demo", 3)})[0].contents;
  const size_t spec = page.find("### Spec");
  ASSERT_NE(spec, std::string::npos);
  const std::string json = page.substr(page.find("```json\n", spec) + 8);
  EXPECT_EQ(json.substr(0, json.find("```")),
            "{\n"
            "  \"dataset\": {\"kind\": \"witness\", \"m\": 8},\n"
            "  \"heads\": [{\"kind\": \"kernel\"}, {\"kind\": \"softmax\"}],\n"
            "  \"name\": \"demo\",\n"
            "  \"ranks\": [1, 2, 4, 8, 16, 32],\n"
            "  \"seed_count\": 3,\n"
            "  \"train\": {\"max_steps\": 300}\n"
            "}\n");
  EXPECT_THAT(page, ::testing::Not(HasSubstr("\"priority\"")));
}

// Where the numbers came from, from what the coordinator stores: the
// workers' build and LibTorch, their devices, when the sweep ran and for
// how long its cells trained.
TEST(BuildReportTest, ProvenanceSaysBuildLibTorchDevicesDatesAndWallTime) {
  ReportSweep s = TinySweep("sw-1", "demo", 2);
  // Two cells served from the result cache, one trained on a GPU.
  s.rows[0].set_cached_from_cell_id(77);
  s.rows[1].set_cached_from_cell_id(78);
  s.rows[2].mutable_result()->set_device("cuda");
  s.rows[2].mutable_worker_version()->set_cuda_version("12.4");
  s.rows[2].mutable_worker_version()->set_build_id("0.9.0+ffffffffffff.0123456789ab");
  const std::string page = BuildReport({s})[0].contents;
  EXPECT_THAT(page, HasSubstr("DONE: 14 of 14 cells done, 0 failed, 0 cancelled.\n\n"
                              "- build: `0.9.0+1a2b3c4d5e6f.0123456789ab` (13 cells), "
                              "`0.9.0+ffffffffffff.0123456789ab` (1 cell)\n"
                              "- LibTorch: 2.5.1, CPU (13 cells), 2.5.1, CUDA 12.4 (1 cell)\n"
                              "- devices: cpu (13 cells), cuda (1 cell)\n"
                              "- dates: submitted 2025-12-02 10:00:00 UTC, finished 2025-12-02 "
                              "10:01:12 UTC (1m12s later)\n"
                              "- wall time: 18.0 s training 12 cells (mean 1.5 s); 2 cells served "
                              "from the result cache\n\n"));
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
