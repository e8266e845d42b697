#include "client/curves.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/convert.h"
#include "tests/support/text.h"

namespace ranksweep::client {
namespace {

using ::ranksweep::testing::Count;

using ::testing::HasSubstr;

// A DONE row of `sweep` with a curve of two evaluations.
v1::ResultRow Row(int64_t cell, int rank, uint64_t seed, bool has_test, int recipe = 0) {
  v1::ResultRow row;
  row.set_sweep_id("sw-1");
  row.set_cell_id(cell);
  row.set_head(rank > 0 ? "kernel/elu1" : "softmax");
  row.set_head_index(rank > 0 ? 0 : 1);
  row.set_rank(rank);
  row.set_seed(seed);
  row.set_recipe(recipe);
  row.set_state(v1::CELL_STATE_DONE);
  SeedResult r;
  r.seed = seed;
  r.steps = 100;
  r.curve.has_test = has_test;
  r.curve.points = {{50, 0.5f, 0.75f, 0.25f, has_test ? 0.875f : 1.0f, has_test ? 0.125f : 0.0f},
                    {100, 0.125f, 0.5f, 0.5f, has_test ? 0.625f : 1.0f, has_test ? 0.25f : 0.0f}};
  *row.mutable_result() = ToProto(r);
  return row;
}

TEST(CurvesOfRowsTest, KeepsTheDoneRowsWithACurveInOrder) {
  std::vector<v1::ResultRow> rows = {Row(1, 4, 0, false), Row(2, 4, 1, false)};
  rows.push_back(Row(3, 4, 2, false));
  rows.back().set_state(v1::CELL_STATE_FAILED);
  rows.push_back(Row(4, 8, 0, false));
  rows.back().mutable_result()->clear_curve();  // trained for no step
  const std::vector<SeedCurve> curves = CurvesOfRows(rows);
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[0].cell_id, 1);
  EXPECT_EQ(curves[1].cell_id, 2);
  EXPECT_EQ(curves[1].curve.points.size(), 2u);
  EXPECT_EQ(curves[1].curve.points[1].step, 100);
}

TEST(CurvesFormsTest, CsvHasOneLinePerEvaluationAndEmptyTestCellsWithoutATestSplit) {
  const std::vector<SeedCurve> curves = CurvesOfRows({Row(1, 4, 0, false), Row(2, 0, 3, true)});
  EXPECT_EQ(CurvesCsv(curves, {}),
            "sweep_id,cell_id,head,rank,recipe,seed,step,loss,train_error,"
            "train_position_accuracy,test_error,test_position_accuracy\n"
            "sw-1,1,kernel/elu1,4,0,0,50,0.5,0.75,0.25,,\n"
            "sw-1,1,kernel/elu1,4,0,0,100,0.125,0.5,0.5,,\n"
            "sw-1,2,softmax,,0,3,50,0.5,0.75,0.25,0.875,0.125\n"
            "sw-1,2,softmax,,0,3,100,0.125,0.5,0.5,0.625,0.25\n");
}

TEST(CurvesFormsTest, JsonHasTheCsvKeysWithNullForMissing) {
  const std::vector<SeedCurve> curves = CurvesOfRows({Row(1, 4, 0, false)});
  EXPECT_EQ(CurvesJson(curves, {}),
            "[\n"
            R"({"sweep_id":"sw-1","cell_id":1,"head":"kernel/elu1","rank":4,"recipe":0,)"
            R"("seed":0,"step":50,"loss":0.5,"train_error":0.75,"train_position_accuracy":0.25,)"
            R"("test_error":null,"test_position_accuracy":null},)"
            "\n"
            R"({"sweep_id":"sw-1","cell_id":1,"head":"kernel/elu1","rank":4,"recipe":0,)"
            R"("seed":0,"step":100,"loss":0.125,"train_error":0.5,"train_position_accuracy":0.5,)"
            R"("test_error":null,"test_position_accuracy":null})"
            "\n]\n");
  EXPECT_EQ(CurvesJson({}, {}), "[]\n");
}

TEST(CurvesFormsTest, TheTableNamesTheAxesOfTheRecipe) {
  SweepSpec spec;
  spec.axes = {{"lr", {0.01, 0.003}}};
  const RecipeAxes axes = RecipeAxes::Of(spec);
  const std::vector<SeedCurve> curves = CurvesOfRows({Row(1, 4, 0, false, 1)});
  const Table t = CurvesTable(curves, axes);
  EXPECT_THAT(t.header, ::testing::ElementsAre("HEAD", "RANK", "LR", "SEED", "STEP", "LOSS",
                                               "TRAIN_ERR", "TRAIN_POS", "TEST_ERR",
                                               "TEST_POS"));
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_THAT(t.rows[1], ::testing::ElementsAre("kernel/elu1", "4", "0.003", "0", "100",
                                                "0.1250", "0.5000", "0.5000", "-", "-"));
}

TEST(MeanCurveTest, ASeedThatStoppedKeepsItsLastValue) {
  // Seed 0 stopped at step 100 with error 0; seed 1 went on to 200.
  const auto mean = MeanCurve({{{50, 0.5}, {100, 0.0}}, {{50, 1.0}, {100, 0.5}, {150, 0.25},
                                                          {200, 0.0}}});
  ASSERT_EQ(mean.size(), 4u);
  EXPECT_EQ(mean[0], (std::pair<int64_t, double>{50, 0.75}));
  EXPECT_EQ(mean[1], (std::pair<int64_t, double>{100, 0.25}));
  EXPECT_EQ(mean[2], (std::pair<int64_t, double>{150, 0.125}));
  EXPECT_EQ(mean[3], (std::pair<int64_t, double>{200, 0.0}));
  EXPECT_TRUE(MeanCurve({}).empty());
}


TEST(CurvesPlotTest, APanelPerHeadRankAndRecipeWithASeedLineEachAndOneMean) {
  CurvePlotInput in;
  in.title = "tiny";
  in.curves = CurvesOfRows({Row(1, 4, 0, false), Row(2, 4, 1, false), Row(3, 8, 0, false),
                            Row(4, 0, 0, false)});
  ASSERT_TRUE(CheckCurvePlot(in).ok());
  const std::string svg = RenderCurvesSvg(in);
  EXPECT_EQ(Count(svg, "<g class=\"panel\">"), 3);
  EXPECT_EQ(Count(svg, "class=\"seed-line\""), 4);
  EXPECT_EQ(Count(svg, "class=\"mean-line\""), 3);
  EXPECT_THAT(svg, HasSubstr(">kernel/elu1 r=4</text>"));
  EXPECT_THAT(svg, HasSubstr(">softmax</text>"));
  EXPECT_THAT(svg, HasSubstr("train error (1 - exact-sequence accuracy)"));
  // Recipes get panels of their own, labelled.
  in.curves = CurvesOfRows({Row(1, 4, 0, false, 0), Row(2, 4, 0, false, 1)});
  in.recipe_labels = {"lr=0.01", "lr=0.003"};
  const std::string two = RenderCurvesSvg(in);
  EXPECT_EQ(Count(two, "<g class=\"panel\">"), 2);
  EXPECT_THAT(two, HasSubstr(">kernel/elu1 r=4 lr=0.003</text>"));
  in.curves.clear();
  EXPECT_THAT(RenderCurvesSvg(in), HasSubstr("no done seed has a learning curve"));
}

// Title, key and x label are choices; a size shares its room among the
// panels, and one that leaves a panel under 120 x 80 px is refused with the
// smallest that fits.
TEST(CurvesPlotTest, TitleCaptionSizeAndFontSizeAreChoices) {
  CurvePlotInput in;
  in.title = "tiny";
  in.curves = CurvesOfRows({Row(1, 4, 0, false), Row(2, 8, 0, false), Row(3, 16, 0, false),
                            Row(4, 32, 0, false), Row(5, 64, 0, false)});  // 4 + 1 panels
  std::string svg = RenderCurvesSvg(in);
  // 60 + 3 x 40 + 30 + 4 x 230 wide; 100 + 56 + 60 + 2 x 170 high.
  EXPECT_THAT(svg, HasSubstr("width=\"1130.0\" height=\"556.0\""));
  EXPECT_EQ(Count(svg, "class=\"key\""), 1);
  in.show_title = false;
  in.show_caption = false;
  in.font_size = 26;  // margins and gaps doubled, panels as they were
  svg = RenderCurvesSvg(in);
  EXPECT_THAT(svg, HasSubstr("width=\"1340.0\" height=\"560.0\""));
  EXPECT_THAT(svg, HasSubstr("font-size=\"24\""));
  EXPECT_EQ(Count(svg, "class=\"title\""), 0);
  EXPECT_EQ(Count(svg, "class=\"key\""), 0);
  EXPECT_EQ(Count(svg, "class=\"x-label\""), 0);
  EXPECT_EQ(Count(svg, "class=\"mean-line\""), 5);
  in.font_size = 13;
  in.width = 800;
  in.height = 400;
  ASSERT_TRUE(CheckCurvePlotSize(in).ok());
  EXPECT_THAT(RenderCurvesSvg(in), HasSubstr("width=\"800.0\" height=\"400.0\""));
  in.width = 600;  // (600 - 60 - 120 - 30) / 4 = 97.5
  EXPECT_EQ(std::string(CheckCurvePlotSize(in).message()),
            "--size: a width of 600 px leaves each of the 4 panels 97 px wide (at least 120 px); "
            "use a width of at least 690 or a smaller --font-size");
  in.width = 0;
  in.height = 250;  // (250 - 24 - 56 - 30) / 2 = 70
  EXPECT_EQ(std::string(CheckCurvePlotSize(in).message()),
            "--size: a height of 250 px leaves each of the 2 rows of panels 70 px high (at least "
            "80 px); use a height of at least 270, --no-title, --no-caption or a smaller "
            "--font-size");
}

TEST(CurvesPlotTest, RefusesWhatTheCurvesDoNotHold) {
  CurvePlotInput in;
  in.curves = CurvesOfRows({Row(1, 4, 0, false)});
  in.metric = "exact_accuracy";
  EXPECT_EQ(CheckCurvePlot(in).message(),
            "--metric: with --curves, one of error, loss, position_accuracy; got "
            "\"exact_accuracy\"");
  in.metric = "loss";
  in.test = true;
  EXPECT_EQ(CheckCurvePlot(in).message(),
            "--split test: the curves hold the training loss only; use --metric error or "
            "position_accuracy");
  in.metric = "error";
  EXPECT_EQ(CheckCurvePlot(in).message(),
            "--split test: this sweep's dataset has no test split; use --split train");
  in.curves = CurvesOfRows({Row(1, 4, 0, true)});
  EXPECT_TRUE(CheckCurvePlot(in).ok());
}

}  // namespace
}  // namespace ranksweep::client
