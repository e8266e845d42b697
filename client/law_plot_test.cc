#include "client/law_plot.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/text.h"

namespace ranksweep::client {
namespace {

using ::ranksweep::testing::Count;

using ::testing::HasSubstr;


// lr {0.01, 0.001} x m {2, 3}: recipe = 2 * lr index + m index.
SweepSpec TwoAxisSpec() {
  SweepSpec spec;
  spec.name = "law";
  HeadSpec kernel;
  HeadSpec softmax;
  softmax.kind = HeadKind::kSoftmax;
  spec.heads = {kernel, softmax};
  spec.ranks = {1, 2, 4};
  spec.seed_count = 2;
  spec.axes = {{"lr", {0.01, 0.001}}, {"m", {2, 3}}};
  return spec;
}

v1::ResultRow Row(int head, int rank, int recipe, uint64_t seed, double train_error) {
  v1::ResultRow r;
  r.set_head_index(head);
  r.set_rank(rank);
  r.set_recipe(recipe);
  r.set_seed(seed);
  r.mutable_result()->mutable_train()->set_sequences(64);
  r.mutable_result()->mutable_train()->set_error(train_error);
  return r;
}

// A seed's own transition is its smallest exact rank over the recipes of a
// value; a seed exact nowhere has none (0); rank-less heads have none.
TEST(SeedTransitionsTest, SmallestExactRankOverTheRecipesOfEachValue) {
  const SweepSpec spec = TwoAxisSpec();
  std::vector<v1::ResultRow> rows = {
      Row(0, 1, 0, 0, 0.5), Row(0, 2, 0, 0, 0.1), Row(0, 4, 0, 0, 0.0),  // m=2 lr=0.01: 4
      Row(0, 1, 2, 0, 0.5), Row(0, 2, 2, 0, 0.0), Row(0, 4, 2, 0, 0.0),  // m=2 lr=0.001: 2
      Row(0, 4, 1, 1, 0.2), Row(0, 4, 3, 1, 0.3),                        // m=3 seed 1: none
      Row(1, 0, 0, 0, 0.0)};
  std::vector<SeedTransition> t = SeedTransitions(spec, rows, "m", false);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].head_index, 0);
  EXPECT_EQ(t[0].value, 2);
  EXPECT_EQ(t[0].seed, 0u);
  EXPECT_EQ(t[0].rank, 2);
  EXPECT_EQ(t[1].value, 3);
  EXPECT_EQ(t[1].seed, 1u);
  EXPECT_EQ(t[1].rank, 0);
  EXPECT_TRUE(SeedTransitions(spec, rows, "pool_size", false).empty());
}

TEST(FitTextTest, SlopeInterceptIntervalAndWhatWasLeftOut) {
  v1::LawFit fit;
  fit.set_defined(true);
  fit.set_points(4);
  fit.set_slope(1.02);
  fit.set_intercept(-0.1);
  fit.set_has_interval(true);
  fit.set_slope_ci95(0.18);
  fit.add_left_out(7);
  EXPECT_EQ(FitText(fit, "m"),
            "log2 r = 1.02 m - 0.10 (slope 95%: 0.84..1.20; 4 values; m = 7 left out "
            "(transition undefined))");
  fit.set_has_interval(false);
  fit.set_points(2);
  fit.clear_left_out();
  fit.set_intercept(0.5);
  EXPECT_EQ(FitText(fit, "m"), "log2 r = 1.02 m + 0.50 (2 values, no interval)");
  EXPECT_EQ(FitText(v1::LawFit(), "m"), "no fit: fewer than two values with a transition");
}

v1::AxisPoint Point(double value, bool defined, int rank, int64_t lower_bound = 0) {
  v1::AxisPoint p;
  p.set_value(value);
  p.set_label(absl::StrCat(value));
  p.mutable_summary()->set_has_rank(true);
  p.mutable_summary()->set_transition_defined(defined);
  p.mutable_summary()->set_transition_rank(defined ? rank : 0);
  p.mutable_summary()->add_ranks()->set_rank(64);
  p.set_rank_lower_bound(lower_bound);
  return p;
}

TEST(RenderLawSvgTest, TransitionsUndefinedMarksSeedsFitReferenceAndBounds) {
  LawPlotInput in;
  in.title = "law";
  in.axis = "m";
  v1::AxisLaw kernel;
  kernel.set_axis("m");
  kernel.set_head("kernel/elu1");
  kernel.set_has_rank(true);
  *kernel.add_points() = Point(2, true, 4, 3);
  *kernel.add_points() = Point(3, true, 8, 5);
  *kernel.add_points() = Point(4, false, 0);
  kernel.mutable_fit()->set_defined(true);
  kernel.mutable_fit()->set_points(2);
  kernel.mutable_fit()->set_slope(1);
  kernel.mutable_fit()->add_left_out(4);
  v1::AxisLaw softmax;
  softmax.set_head("softmax");
  softmax.set_has_rank(false);
  v1::AxisPoint flat;
  flat.set_value(2);
  *softmax.add_points() = flat;
  in.laws = {kernel, softmax};
  in.seeds = {{0, 2, 0, 4}, {0, 2, 1, 2}, {0, 4, 0, 0}};
  in.caption = {"softmax: exact on 3/3 seeds at every m"};
  const std::string svg = RenderLawSvg(in);
  EXPECT_EQ(Count(svg, "class=\"transition\""), 2);
  EXPECT_EQ(Count(svg, "class=\"transition-line\""), 1);
  EXPECT_EQ(Count(svg, "class=\"undefined\""), 1);
  EXPECT_EQ(Count(svg, "class=\"seed\""), 3);
  EXPECT_EQ(Count(svg, "class=\"fit\""), 1);
  EXPECT_EQ(Count(svg, "class=\"reference\""), 1);
  EXPECT_EQ(Count(svg, "class=\"lower-bound\""), 2);
  EXPECT_THAT(svg, HasSubstr(">kernel/elu1</text>"));
  EXPECT_THAT(svg, HasSubstr("softmax: exact on 3/3 seeds at every m"));
  EXPECT_THAT(svg, HasSubstr("2^m (every vector a feature)"));
  // Softmax has no rank: nothing of it on the rank axis, no legend line.
  EXPECT_THAT(svg, ::testing::Not(HasSubstr(">softmax</text>")));
  in.axis = "pool_size";
  EXPECT_EQ(Count(RenderLawSvg(in), "class=\"reference\""), 0);
}

// The presentation fields: no title, no caption, a size of its own, text
// scaled with the font size; a size the text does not leave room in is
// refused with the smallest that fits.
TEST(RenderLawSvgTest, TitleCaptionSizeAndFontSizeAreChoices) {
  LawPlotInput in;
  in.title = "law";
  in.subtitle = "exhaustive dataset";
  in.axis = "m";
  v1::AxisLaw kernel;
  kernel.set_head("kernel/elu1");
  kernel.set_has_rank(true);
  *kernel.add_points() = Point(2, true, 4, 3);
  *kernel.add_points() = Point(3, true, 8, 5);
  in.laws = {kernel};
  in.caption = {"sweep sw-1", "criterion all"};
  const std::string plain = RenderLawSvg(in);
  EXPECT_THAT(plain, HasSubstr("width=\"960\" height=\"552\""));  // 450 + 70 + 2 x 16
  EXPECT_EQ(Count(plain, "class=\"title\""), 1);
  EXPECT_EQ(Count(plain, "class=\"caption\""), 2);

  in.show_title = false;
  in.show_caption = false;
  const std::string bare = RenderLawSvg(in);
  EXPECT_THAT(bare, HasSubstr("width=\"960\" height=\"470\""));  // 20 + 380 + 70
  EXPECT_EQ(Count(bare, "class=\"title\""), 0);
  EXPECT_EQ(Count(bare, "class=\"subtitle\""), 0);
  EXPECT_EQ(Count(bare, "class=\"caption\""), 0);
  EXPECT_EQ(Count(bare, "class=\"transition\""), 2);

  in.font_size = 26;  // twice the base: margins and legend twice as wide
  EXPECT_THAT(RenderLawSvg(in), HasSubstr("width=\"1380\" height=\"560\""));
  EXPECT_THAT(RenderLawSvg(in), HasSubstr("font-family=\"sans-serif\" font-size=\"26\""));
  EXPECT_THAT(RenderLawSvg(in), HasSubstr("font-size=\"24\""));  // the legend's 12, doubled
  in.width = 1200;
  in.height = 500;
  ASSERT_TRUE(CheckLawPlotSize(in).ok()) << CheckLawPlotSize(in);
  EXPECT_THAT(RenderLawSvg(in), HasSubstr("width=\"1200\" height=\"500\""));
  in.width = 700;  // 700 - 160 - 680 leaves no plot area
  EXPECT_EQ(std::string(CheckLawPlotSize(in).message()),
            "--size: a width of 700 px leaves the plot area 0 px wide beside the legend (at "
            "least 120 px); use a width of at least 960 or a smaller --font-size");
  in.width = 0;
  in.height = 250;  // 250 - 40 - 140 = 70 px high; the legend needs 278
  EXPECT_EQ(std::string(CheckLawPlotSize(in).message()),
            "--size: a height of 250 px leaves the plot area 70 px high with the title, caption "
            "and legend (at least 80 px, and room for the legend); use a height of at least 278, "
            "--no-title, --no-caption or a smaller --font-size");
}

// A rank-less head reads "exact on 3/3 seeds" once when every value agrees.
TEST(RanklessCaptionTest, OneLineWhenEveryValueReadsTheSameElseEach) {
  v1::AxisLaw law;
  law.set_head("softmax");
  for (const char* label : {"2", "3"}) {
    v1::AxisPoint* p = law.add_points();
    p->set_label(label);
    p->mutable_summary()->set_reason(absl::StrCat("no rank; exact on 3/3 seeds under m=", label,
                                                  "; every seed exact under m=", label));
  }
  EXPECT_EQ(RanklessCaption(law, "m", false), "softmax (no rank): exact on 3/3 seeds at every m (2, 3)");
  law.mutable_points(1)->mutable_summary()->set_reason("no rank; exact on 2/3 seeds");
  EXPECT_EQ(RanklessCaption(law, "m", false),
            "softmax (no rank): m = 2: exact on 3/3 seeds; m = 3: exact on 2/3 seeds");
  EXPECT_EQ(LawSubtitle(TwoAxisSpec(), "m", false), "exhaustive dataset, N = 3, 2 seeds; m = 2, 3");
}

}  // namespace
}  // namespace ranksweep::client
