#include "client/plot.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/text.h"

namespace ranksweep::client {
namespace {

using ::ranksweep::testing::Count;

using ::testing::HasSubstr;


// Two ranked heads over ranks 1..256 (3 seeds each), softmax, bounds 8 and 24.
PlotInput WitnessLike() {
  PlotInput in;
  in.title = "witness-m24";
  in.subtitle = "witness dataset, m = 24, N = 3, 3 seeds";
  in.y_label = "error";
  in.caption = {"sweep s-1", "train error = 1 - exact-sequence accuracy"};
  in.heads = {{0, "kernel/elu1", true, {}}, {1, "kernel/favor", true, {}}, {2, "softmax", false, {}}};
  for (int head = 0; head < 2; ++head) {
    for (int rank = 1; rank <= 256; rank *= 2) {
      for (uint64_t seed = 0; seed < 3; ++seed) {
        in.points.push_back({head, rank, seed, rank >= 32 ? 0.0 : 0.9 - 0.01 * seed});
      }
    }
  }
  for (uint64_t seed = 0; seed < 3; ++seed) in.points.push_back({2, 0, seed, 0.0});
  in.bounds = {{8, "lower bound 8"}, {24, "upper bound 24"}};
  return in;
}

TEST(PlotTest, EverySeedIsADotAndEveryRankedHeadALineWithAMarkerPerRank) {
  const PlotInput in = WitnessLike();
  const std::string svg = RenderPlotSvg(in);
  EXPECT_EQ(in.points.size(), 57u);
  EXPECT_EQ(Count(svg, "<circle class=\"seed\""), 57);
  EXPECT_EQ(Count(svg, "<circle class=\"mean-marker\""), 9 + 9 + 1);
  EXPECT_EQ(Count(svg, "<path class=\"mean\""), 2);
  EXPECT_EQ(Count(svg, "<path class=\"band\""), 2);
  EXPECT_EQ(Count(svg, "<path class=\"gap\""), 0);  // every power of two swept
  EXPECT_EQ(Count(svg, "<line class=\"flat\""), 1);
  EXPECT_EQ(Count(svg, "<line class=\"bound\""), 2);
  EXPECT_EQ(Count(svg, "<rect class=\"bound-label-ground\""), 2);
  EXPECT_THAT(svg, HasSubstr(">lower bound 8</text>"));
  EXPECT_THAT(svg, HasSubstr(">upper bound 24</text>"));
  EXPECT_THAT(svg, HasSubstr(">witness-m24</text>"));
  EXPECT_THAT(svg, HasSubstr(">witness dataset, m = 24, N = 3, 3 seeds</text>"));
  EXPECT_THAT(svg, HasSubstr("<text class=\"caption\" x=\"70.0\" y=\"536.0\" fill=\"#333\" "
                             "font-size=\"12\">sweep s-1</text>"));
  EXPECT_THAT(svg, HasSubstr(">no rank</text>"));
  EXPECT_THAT(svg, HasSubstr(">kernel/favor</text>"));
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
}

TEST(PlotTest, TicksAreTheSweptRanksAndBoundsSitAtTheirLog2Position) {
  PlotInput in = WitnessLike();
  const PlotLayout l = ComputePlotLayout(in);
  EXPECT_EQ(l.tick_ranks, (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  // Ranks 1..256 -> log2 0..8, half a power of two on the left, the "no
  // rank" column at 9 and half a power beyond it.
  EXPECT_DOUBLE_EQ(l.log2_min, -0.5);
  EXPECT_DOUBLE_EQ(l.log2_max, 9.5);
  EXPECT_DOUBLE_EQ(l.no_rank_log2, 9.0);
  // x = 70 + (log2 r + 0.5) / 10 * 620.
  EXPECT_DOUBLE_EQ(l.XForRank(8), 70 + 3.5 * 62);  // 287
  const std::string svg = RenderPlotSvg(in);
  EXPECT_THAT(svg, HasSubstr("<line class=\"bound\" x1=\"287.0\" y1=\"70.0\" x2=\"287.0\""));
  const double x24 = 70 + (std::log2(24.0) + 0.5) * 62;
  char buf[64];
  std::snprintf(buf, sizeof buf, "<line class=\"bound\" x1=\"%.1f\"", x24);
  EXPECT_THAT(svg, HasSubstr(buf));

  // Only the swept ranks get ticks: 1, 3 and 64 here, not the powers of two.
  in.heads[0].ranks = {1, 3, 64};
  in.heads[1].ranks = {1, 3, 64};
  in.points.clear();
  in.points.push_back({0, 3, 0, 0.5});
  EXPECT_EQ(ComputePlotLayout(in).tick_ranks, (std::vector<int>{1, 3, 64}));
  const std::string sparse = RenderPlotSvg(in);
  EXPECT_EQ(Count(sparse, "<text class=\"xtick\""), 4);  // 1, 3, 64, "no rank"
  EXPECT_THAT(sparse, HasSubstr("text-anchor=\"middle\">3</text>"));
  EXPECT_THAT(sparse, ::testing::Not(HasSubstr("text-anchor=\"middle\">16</text>")));
}

// The demo's old sweep, ranks 1 and 64 only: a solid line between them
// would claim an error at rank 6 nobody measured. Ranks more than a factor
// of two apart are joined by a dotted gap; so are ranks on either side of a
// swept rank without a done seed.
TEST(PlotTest, RanksMoreThanAFactorOfTwoApartAreJoinedByADottedGapNotALine) {
  PlotInput in;
  in.heads = {{0, "kernel/elu1", true, {1, 64}}};
  for (uint64_t seed = 0; seed < 3; ++seed) {
    in.points.push_back({0, 1, seed, 0.9 - 0.1 * static_cast<double>(seed)});
    in.points.push_back({0, 64, seed, 0.0});
  }
  std::string svg = RenderPlotSvg(in);
  EXPECT_EQ(Count(svg, "<path class=\"mean\""), 0);
  EXPECT_EQ(Count(svg, "<path class=\"gap\""), 1);
  EXPECT_EQ(Count(svg, "<circle class=\"mean-marker\""), 2);
  EXPECT_EQ(Count(svg, "<line class=\"ci\""), 1);  // rank 1 varies; rank 64 does not

  // 1, 2, 4 swept, 4 without a done seed, 8: one solid segment 1-2, a gap
  // from 2 over the missing 4 to 8.
  in.heads[0].ranks = {1, 2, 4, 8};
  in.points.clear();
  for (int rank : {1, 2, 8}) in.points.push_back({0, rank, 0, 0.5});
  svg = RenderPlotSvg(in);
  const PlotLayout l = ComputePlotLayout(in);
  char solid[96];
  std::snprintf(solid, sizeof solid, "<path class=\"mean\" d=\"M%.1f,%.1f L%.1f,%.1f\"",
                l.XForRank(1), l.YForValue(0.5), l.XForRank(2), l.YForValue(0.5));
  EXPECT_THAT(svg, HasSubstr(solid));
  char gap[96];
  std::snprintf(gap, sizeof gap, "<path class=\"gap\" d=\"M%.1f,%.1f L%.1f,%.1f\"",
                l.XForRank(2), l.YForValue(0.5), l.XForRank(8), l.YForValue(0.5));
  EXPECT_THAT(svg, HasSubstr(gap));
}

// The legend's key to the dotted line is there only when a line has a gap.
TEST(PlotTest, TheLegendExplainsDottedLinesOnlyWhenOneIsDrawn) {
  const std::string dense = RenderPlotSvg(WitnessLike());
  EXPECT_EQ(Count(dense, "<path class=\"gap\""), 0);
  EXPECT_EQ(Count(dense, "<text class=\"legend-note\""), 3);
  EXPECT_THAT(dense, HasSubstr(">dots: one per seed</text>"));
  EXPECT_THAT(dense, ::testing::Not(HasSubstr("ranks not swept")));

  PlotInput in = WitnessLike();
  in.heads[1].ranks = {1, 64};  // kernel/favor: 1 and 64 only, a gap between
  const std::string sparse = RenderPlotSvg(in);
  EXPECT_EQ(Count(sparse, "<path class=\"gap\""), 1);
  EXPECT_EQ(Count(sparse, "<text class=\"legend-note\""), 4);
  EXPECT_THAT(sparse, HasSubstr(">dotted: ranks not swept</text>"));
  // The legend box holds its labels either way.
  for (const PlotInput& input : {WitnessLike(), in}) {
    const PlotLayout l = ComputePlotLayout(input);
    for (const PlotLabel& t : l.legend_labels) EXPECT_TRUE(t.box.Inside(l.legend)) << t.text;
  }
}

TEST(PlotTest, TheBandIsTheNinetyFivePercentTIntervalOfTheMean) {
  EXPECT_DOUBLE_EQ(MeanCi95({0.5}), 0);
  // n = 3, sd = 0.1: t(0.975, 2) = 4.303, half-width 4.303 * 0.1 / sqrt(3).
  EXPECT_NEAR(MeanCi95({0.4, 0.5, 0.6}), 4.303 * 0.1 / std::sqrt(3.0), 1e-12);
  PlotInput in;
  in.heads = {{0, "kernel/elu1", true, {1, 2}}};
  for (double v : {0.4, 0.5, 0.6}) {
    in.points.push_back({0, 1, static_cast<uint64_t>(v * 10), v});
    in.points.push_back({0, 2, static_cast<uint64_t>(v * 10), v + 0.2});
  }
  const PlotLayout l = ComputePlotLayout(in);
  const double ci = MeanCi95({0.4, 0.5, 0.6});
  char band[128];
  std::snprintf(band, sizeof band, "<path class=\"band\" d=\"M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f",
                l.XForRank(1), l.YForValue(0.5 + ci), l.XForRank(2), l.YForValue(0.7 + ci),
                l.XForRank(2), l.YForValue(0.7 - ci));
  EXPECT_THAT(RenderPlotSvg(in), HasSubstr(band));
}

// Bound labels never collide with each other, stay inside the plot area,
// and the legend, outside it, never covers a label, however close the
// bounds are and however long the head labels (several sweeps on one
// figure).
TEST(PlotTest, LabelsNeverOverlapEachOtherOrTheLegend) {
  PlotInput in = WitnessLike();
  in.bounds = {{8, "demo-a: lower bound 8"},   {9, "demo-b: lower bound 9"},
               {24, "demo-a: upper bound 24"}, {26, "demo-b: upper bound 26"},
               {250, "demo-c: upper bound 250"}};
  in.heads.push_back({3, "a-sweep-with-a-long-name: multihead_kernel/elu1/x4/h=32", true, {}});
  in.points.push_back({3, 64, 0, 0.25});
  const PlotLayout l = ComputePlotLayout(in);
  ASSERT_EQ(l.bound_labels.size(), 5u);
  const PlotBox figure = {0, 0, l.width, l.height};
  std::vector<PlotBox> boxes;
  for (const PlotLabel& t : l.bound_labels) {
    EXPECT_TRUE(t.box.Inside(l.Area())) << t.text;
    boxes.push_back(t.box);
  }
  for (const PlotLabel& t : l.tick_labels) boxes.push_back(t.box);
  for (size_t i = 0; i < boxes.size(); ++i) {
    EXPECT_FALSE(boxes[i].Overlaps(l.legend)) << i;
    for (size_t j = i + 1; j < boxes.size(); ++j) {
      EXPECT_FALSE(boxes[i].Overlaps(boxes[j])) << i << " and " << j;
    }
  }
  EXPECT_FALSE(l.legend.Overlaps(l.Area()));
  // A caption longer than the figure is wrapped, never cut off.
  in.caption = {std::string(40, 'x') + " " + PlotCriterion("error", false, 3)};
  const PlotLayout wrapped = ComputePlotLayout(in);
  EXPECT_GE(wrapped.caption_labels.size(), 2u);
  for (const PlotLabel& t : wrapped.caption_labels) {
    EXPECT_TRUE(t.box.Inside({0, 0, wrapped.width, wrapped.height})) << t.text;
    EXPECT_FALSE(t.box.Overlaps(wrapped.legend)) << t.text;
  }
  EXPECT_TRUE(l.legend.Inside(figure));
  for (const PlotLabel& t : l.legend_labels) EXPECT_TRUE(t.box.Inside(l.legend)) << t.text;
  EXPECT_GT(l.width, 900);  // widened for the long label
  // The label near the right edge turns to the left of its line.
  EXPECT_TRUE(l.bound_labels.back().anchor_end);
}

// Softmax rows have rank 0, which a log2 axis cannot place: a rank-less
// head is a reference line plus its seeds at a marked "no rank" column.
TEST(PlotTest, RanklessHeadsAreAReferenceLineAtAMarkedColumn) {
  PlotInput in;
  in.title = "a<b & c";
  in.heads = {{0, "softmax", false, {}}};
  in.points = {{0, 0, 0, 0.0}, {0, 0, 1, 1.0}};
  const std::string svg = RenderPlotSvg(in);
  EXPECT_THAT(svg, HasSubstr(">a&lt;b &amp; c</text>"));
  EXPECT_EQ(Count(svg, "<circle class=\"seed\""), 2);
  EXPECT_EQ(Count(svg, "<path class=\"mean\""), 0);
  EXPECT_EQ(Count(svg, "<line class=\"flat\""), 1);
  EXPECT_EQ(Count(svg, "<line class=\"no-rank\""), 1);
  EXPECT_EQ(Count(svg, "<line class=\"bound\""), 0);
  EXPECT_THAT(svg, ::testing::Not(HasSubstr("nan")));
  EXPECT_THAT(svg, ::testing::Not(HasSubstr("inf")));
}

// Two seeds give Student's t 12.7: a "95% band" that covers the whole axis
// and swamps the figure. Below three seeds at a rank there is none.
TEST(PlotTest, TwoSeedBandsAreLeftOut) {
  PlotInput in;
  in.heads = {{0, "kernel/elu1", true, {1, 2, 4}}, {1, "softmax", false, {}}};
  for (uint64_t seed = 0; seed < 2; ++seed) {
    for (int rank : {1, 2}) in.points.push_back({0, rank, seed, 0.3 + 0.4 * seed});
    in.points.push_back({0, 4, seed, 0.1 * seed});
    in.points.push_back({1, 0, seed, 0.2 * seed});
  }
  const std::string svg = RenderPlotSvg(in);
  EXPECT_EQ(Count(svg, "<path class=\"band\""), 0);
  EXPECT_EQ(Count(svg, "<line class=\"ci\""), 0);
  EXPECT_EQ(Count(svg, "<path class=\"mean\""), 1);  // the line itself stays
  EXPECT_EQ(Count(svg, "<circle class=\"seed\""), 8);
}

// Twelve lines (three sweeps of two heads and two recipes) once shared
// colours: no two lines of a figure may look the same, in line or marker.
TEST(PlotTest, TwelveLinesNeverShareAStyle) {
  PlotInput in;
  for (int head = 0; head < 12; ++head) {
    in.heads.push_back({head, "line " + std::to_string(head), true, {1, 2}});
    for (int rank : {1, 2}) in.points.push_back({head, rank, 0, 0.05 * head});
  }
  const std::string svg = RenderPlotSvg(in);
  // Each line's look: its stroke and dash, and the element its markers are.
  std::vector<std::string> looks;
  for (size_t at = svg.find("<path class=\"mean\""); at != std::string::npos;
       at = svg.find("<path class=\"mean\"", at + 1)) {
    const std::string element = svg.substr(at, svg.find("/>", at) - at);
    const size_t stroke = element.find(" stroke=\"");
    const size_t dash = element.find("stroke-dasharray=\"");
    const size_t marker = svg.find("class=\"mean-marker\"", at);
    looks.push_back(element.substr(stroke, 17) +
                    (dash == std::string::npos ? "solid" : element.substr(dash)) +
                    svg.substr(svg.rfind('<', marker), 6));
  }
  ASSERT_EQ(looks.size(), 12u);
  for (size_t i = 0; i < looks.size(); ++i) {
    for (size_t j = i + 1; j < looks.size(); ++j) {
      EXPECT_NE(looks[i], looks[j]) << "lines " << i << " and " << j;
    }
  }
}

TEST(PlotTest, PngIsTheRenderedSvg) {
  const std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"40\" height=\"20\">"
      "<rect width=\"40\" height=\"20\" fill=\"#ff0000\"/></svg>";
  absl::StatusOr<std::string> png = RenderSvgToPng(svg, 2);
  ASSERT_TRUE(png.ok()) << png.status();
  ASSERT_GT(png->size(), 24u);
  EXPECT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto be32 = [&](size_t at) {
    const auto* b = reinterpret_cast<const unsigned char*>(png->data() + at);
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  };
  EXPECT_EQ(png->substr(12, 4), "IHDR");
  EXPECT_EQ(be32(16), 80u);  // width at scale 2
  EXPECT_EQ(be32(20), 40u);

  absl::StatusOr<std::string> figure = RenderSvgToPng(RenderPlotSvg(WitnessLike()), 1);
  ASSERT_TRUE(figure.ok()) << figure.status();
  EXPECT_EQ(figure->substr(1, 3), "PNG");

  EXPECT_EQ(RenderSvgToPng("not svg").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlotTest, SubtitleNamesTheDataAndFlagsCrossEntropyKernels) {
  SweepSpec spec;
  spec.dataset.kind = DatasetKind::kWitness;
  spec.dataset.m = 24;
  spec.dataset.seq_len = 3;
  spec.seed_count = 5;
  HeadSpec kernel;
  HeadSpec softmax;
  softmax.kind = HeadKind::kSoftmax;
  spec.heads = {kernel, softmax};
  EXPECT_EQ(PlotSubtitle(spec, false), "witness dataset, m = 24, N = 3, 5 seeds");
  EXPECT_EQ(PlotSubtitle(spec, true), "witness dataset, m = 24, N = 3, 5 seeds, test split");
  spec.train.loss = LossKind::kCrossEntropy;
  EXPECT_EQ(PlotSubtitle(spec, false),
            "witness dataset, m = 24, N = 3, 5 seeds; loss ce: kernel transitions do not test "
            "the rank bound");
  spec.heads = {softmax};  // nothing bounded to misread
  EXPECT_EQ(PlotSubtitle(spec, false), "witness dataset, m = 24, N = 3, 5 seeds");
}

TEST(PlotTest, CriterionSaysWhatIsPlottedAndHowTheTransitionIsRead) {
  EXPECT_EQ(PlotCriterion("error", false, 3),
            "train error = 1 - exact-sequence accuracy; marker: mean over 3 seeds, band: its 95% "
            "t interval (drawn from 3 seeds); transition rank: the smallest swept rank at which "
            "every seed is exact");
  EXPECT_THAT(PlotCriterion("exact_accuracy", true, 1),
              ::testing::StartsWith("test exact-sequence accuracy; marker: mean over 1 seed,"));
  EXPECT_THAT(PlotCriterion("error", false, 2, /*all_bands=*/true),
              HasSubstr("mean over 2 seeds, band: its 95% t interval; transition"));
  EXPECT_THAT(PlotCriterion("error", false, 0),
              HasSubstr("marker: mean over its line's seeds (n in the legend), band:"));
}

// A caption once said "mean over 4 seeds" of two sweeps, one of 3 seeds:
// each line's count is its own, in the legend when lines differ.
TEST(PlotTest, SeedCountsAreEachLinesOwn) {
  PlotInput in;
  in.heads = {{0, "a: kernel/elu1", true, {1}}, {1, "b: kernel/elu1", true, {1}},
              {2, "c: softmax", false, {}}};
  for (uint64_t seed = 0; seed < 4; ++seed) {
    if (seed < 3) in.points.push_back({0, 1, seed, 0.5});
    in.points.push_back({1, 1, seed, 0.5});
    if (seed < 3) in.points.push_back({2, 0, seed, 0.0});
  }
  EXPECT_EQ(MarkSeedCounts(&in), 0);
  EXPECT_EQ(in.heads[0].label, "a: kernel/elu1 (n = 3)");
  EXPECT_EQ(in.heads[1].label, "b: kernel/elu1 (n = 4)");
  EXPECT_EQ(in.heads[2].label, "c: softmax (n = 3)");
  in.caption = {PlotCriterion("error", false, 0)};
  const std::string svg = RenderPlotSvg(in);
  EXPECT_THAT(svg, HasSubstr(">b: kernel/elu1 (n = 4)</text>"));
  EXPECT_THAT(svg, ::testing::Not(HasSubstr("4 seeds")));
  // Every line alike: the count, and the labels as they were.
  PlotInput same = WitnessLike();
  EXPECT_EQ(MarkSeedCounts(&same), 3);
  EXPECT_EQ(same.heads[0].label, "kernel/elu1");
}

TEST(PlotTest, BandsBelowThreeSeedsAreDrawnWhenAskedFor) {
  PlotInput in;
  in.heads = {{0, "kernel/elu1", true, {1, 2}}, {1, "softmax", false, {}}};
  for (uint64_t seed = 0; seed < 2; ++seed) {
    for (int rank : {1, 2}) in.points.push_back({0, rank, seed, 0.3 + 0.4 * seed});
    in.points.push_back({1, 0, seed, 0.2 * seed});
  }
  EXPECT_EQ(Count(RenderPlotSvg(in), "<path class=\"band\""), 0);
  EXPECT_THAT(RenderPlotSvg(in), HasSubstr(">band: 95% CI of the mean, 3+ seeds</text>"));
  in.all_bands = true;
  const std::string svg = RenderPlotSvg(in);
  EXPECT_EQ(Count(svg, "<path class=\"band\""), 1);
  EXPECT_EQ(Count(svg, "<line class=\"ci\""), 1);  // softmax's, at the "no rank" column
  EXPECT_THAT(svg, HasSubstr(">band: 95% interval of the mean</text>"));
}

// The palette is Okabe-Ito's (colour-blind safe, its yellow left out); past
// its seven colours, dashes and marker shapes keep every line apart.
TEST(PlotTest, StylesAreColourBlindSafeAndDistinctFarPastThePalette) {
  const std::set<std::string> okabe_ito = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                           "#56B4E9", "#E69F00", "#000000"};
  std::set<std::tuple<std::string, std::string, int>> seen;
  for (size_t i = 0; i < kDistinctPlotStyles; ++i) {
    const PlotStyle st = PlotStyleOf(i);
    EXPECT_EQ(okabe_ito.count(st.color), 1u) << i;
    EXPECT_TRUE(seen.insert({st.color, st.dash, st.marker}).second) << "style " << i;
    if (i < kPlotColors) {
      EXPECT_STREQ(st.dash, "") << i;  // up to seven lines: solid, circles
      EXPECT_EQ(st.marker, 0) << i;
    }
    // Never the rank-less reference line's dash or a gap's dots.
    EXPECT_STRNE(st.dash, "10,5");
    EXPECT_STRNE(st.dash, "1,4");
  }
  EXPECT_EQ(kDistinctPlotStyles, 112u);
  // Every marker shape carries its class and attributes.
  for (int shape = 0; shape < 4; ++shape) {
    const std::string m = PlotMarkerSvg(shape, "mean-marker", 10, 10, 5, "fill=\"white\"");
    EXPECT_THAT(m, HasSubstr("class=\"mean-marker\""));
    EXPECT_THAT(m, HasSubstr(" fill=\"white\"/>\n"));
  }
}

// --no-title and --no-caption: the figure without them, the plot area
// moved up and the figure shorter.
TEST(PlotTest, TitleAndCaptionCanBeLeftOut) {
  PlotInput in = WitnessLike();
  const PlotLayout full = ComputePlotLayout(in);
  in.show_title = false;
  in.show_caption = false;
  const std::string svg = RenderPlotSvg(in);
  EXPECT_EQ(Count(svg, "class=\"title\""), 0);
  EXPECT_EQ(Count(svg, "class=\"subtitle\""), 0);
  EXPECT_EQ(Count(svg, "class=\"caption\""), 0);
  EXPECT_THAT(svg, ::testing::Not(HasSubstr("witness-m24")));
  EXPECT_THAT(svg, HasSubstr("class=\"xlabel\""));  // the axes keep their labels
  const PlotLayout bare = ComputePlotLayout(in);
  EXPECT_DOUBLE_EQ(bare.top, 20);
  EXPECT_DOUBLE_EQ(bare.bottom - bare.top, full.bottom - full.top);  // the same plot area
  EXPECT_DOUBLE_EQ(bare.height, bare.bottom + 50);
  EXPECT_LT(bare.height, full.height - 50 - 2 * 16);
}

// --size WxH: the figure is that size and the plot area takes what the
// legend and the text leave; --font-size scales every text and the room it
// takes. Nothing overlaps and everything stays inside the figure.
TEST(PlotTest, SizeAndFontSizeShapeTheFigureAndNothingOverlaps) {
  for (double font : {9.0, 13.0, 16.0}) {
    PlotInput in = WitnessLike();
    in.width = 640;
    in.height = 420;
    in.font_size = font;
    ASSERT_TRUE(CheckPlotInput(in).ok()) << font << ": " << CheckPlotInput(in);
    const PlotLayout l = ComputePlotLayout(in);
    EXPECT_DOUBLE_EQ(l.width, 640);
    EXPECT_DOUBLE_EQ(l.height, 420);
    const PlotBox figure = {0, 0, l.width, l.height};
    EXPECT_TRUE(l.legend.Inside(figure)) << font;
    EXPECT_FALSE(l.legend.Overlaps(l.Area())) << font;
    std::vector<PlotBox> boxes;
    for (const auto* labels : {&l.tick_labels, &l.caption_labels, &l.legend_labels}) {
      for (const PlotLabel& t : *labels) {
        EXPECT_TRUE(t.box.Inside(figure)) << font << ": " << t.text;
        boxes.push_back(t.box);
      }
    }
    // Bound labels stay inside the plot area however narrow it gets.
    for (const PlotLabel& t : l.bound_labels) {
      EXPECT_TRUE(t.box.Inside(l.Area())) << font << ": " << t.text;
    }
    // No two texts (ticks, caption lines, legend rows) overlap.
    for (size_t i = 0; i < boxes.size(); ++i) {
      for (size_t j = i + 1; j < boxes.size(); ++j) {
        EXPECT_FALSE(boxes[i].Overlaps(boxes[j])) << font << ": " << i << " and " << j;
      }
    }
    const std::string svg = RenderPlotSvg(in);
    EXPECT_THAT(svg, HasSubstr("width=\"640\" height=\"420\" viewBox=\"0 0 640 420\""));
    EXPECT_THAT(svg, HasSubstr(absl::StrCat("font-family=\"sans-serif\" font-size=\"",
                                            font, "\">")));
  }
  PlotInput big = WitnessLike();
  big.font_size = 26;  // twice the default: the title at 34 px, the margins twice as wide
  const PlotLayout l = ComputePlotLayout(big);
  EXPECT_DOUBLE_EQ(l.left, 140);
  EXPECT_DOUBLE_EQ(l.top, 140);
  EXPECT_THAT(RenderPlotSvg(big), HasSubstr("font-size=\"34\" font-weight=\"bold\""));
}

// Each bad size or font names its flag and range; a size too small for the
// legend says the smallest that fits, and that one does.
TEST(PlotTest, SizesAndFontSizesOutOfRangeAreRefusedNamingTheFlag) {
  PlotInput in = WitnessLike();
  in.font_size = 5;
  EXPECT_EQ(CheckPlotInput(in).message(), "--font-size: 5 is out of range; use 6 to 40 (px)");
  in.font_size = 13;
  in.width = 100;
  in.height = 400;
  EXPECT_EQ(CheckPlotInput(in).message(),
            "--size: the width 100 is out of range; use 200 to 10000 (px)");
  in.width = 400;
  in.height = 20000;
  EXPECT_EQ(CheckPlotInput(in).message(),
            "--size: the height 20000 is out of range; use 200 to 10000 (px)");
  // A long legend label leaves a 400 px figure no room to plot.
  in.height = 400;
  in.heads[0].label = "a-sweep-with-a-long-name: multihead_kernel/elu1/x4/h=32 lr=0.003";
  absl::Status s = CheckPlotInput(in);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("--size: a width of 400 px leaves the plot area"));
  const size_t at = s.message().find("at least ", s.message().find("; use"));
  ASSERT_NE(at, std::string::npos) << s.message();
  in.width = std::stoi(std::string(s.message().substr(at + 9)));
  EXPECT_TRUE(CheckPlotInput(in).ok()) << in.width << ": " << CheckPlotInput(in);
  EXPECT_FALSE(CheckPlotInput([&] { PlotInput n = in; --n.width; return n; }()).ok());
  // Too low for the title, caption and legend.
  in.height = 200;
  s = CheckPlotInput(in);
  EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("--size: a height of 200 px leaves the plot area"));
  const size_t h = s.message().find("at least ", s.message().find("; use"));
  in.height = std::stoi(std::string(s.message().substr(h + 9)));
  EXPECT_TRUE(CheckPlotInput(in).ok()) << in.height << ": " << CheckPlotInput(in);
}

TEST(PlotTest, PdfIsAVectorPageTheSizeOfTheFigure) {
  const std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"40\" height=\"20\">"
      "<rect width=\"40\" height=\"20\" fill=\"#ff0000\"/></svg>";
  absl::StatusOr<std::string> pdf = RenderSvgToPdf(svg);
  ASSERT_TRUE(pdf.ok()) << pdf.status();
  EXPECT_EQ(pdf->substr(0, 5), "%PDF-");
  EXPECT_THAT(*pdf, HasSubstr("/MediaBox [ 0 0 30 15 ]"));  // 96 px to the inch, 72 pt
  // The figure's text is text, in an embedded font, not pixels.
  absl::StatusOr<std::string> figure = RenderSvgToPdf(RenderPlotSvg(WitnessLike()));
  ASSERT_TRUE(figure.ok()) << figure.status();
  EXPECT_THAT(*figure, HasSubstr("/FontFile"));
  EXPECT_THAT(*figure, ::testing::Not(HasSubstr("/Subtype /Image")));
  EXPECT_EQ(RenderSvgToPdf("not svg").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlotTest, TheFigureFormatIsTheExtensionOrFormatAndTheyMustAgree) {
  auto format = [](const std::string& path, const std::string& flag) {
    absl::StatusOr<FigureFormat> f = ResolveFigureFormat(path, flag);
    return f.ok() ? static_cast<int>(*f) : -1;
  };
  EXPECT_EQ(format("a.svg", ""), static_cast<int>(FigureFormat::kSvg));
  EXPECT_EQ(format("out/a.PNG", ""), static_cast<int>(FigureFormat::kPng));
  EXPECT_EQ(format("a.pdf", ""), static_cast<int>(FigureFormat::kPdf));
  EXPECT_EQ(format("figure", "pdf"), static_cast<int>(FigureFormat::kPdf));
  EXPECT_EQ(format("a.pdf", "pdf"), static_cast<int>(FigureFormat::kPdf));
  EXPECT_EQ(ResolveFigureFormat("a.jpg", "").status().message(),
            "-o: \"a.jpg\" must end in .svg, .png or .pdf, or give --format svg|png|pdf");
  EXPECT_EQ(ResolveFigureFormat("a.svg", "pdf").status().message(),
            "--format pdf: -o \"a.svg\" names another format; drop one or make them agree");
  EXPECT_EQ(ResolveFigureFormat("a", "eps").status().message(),
            "--format: \"eps\" is not one of svg, png, pdf");
  absl::StatusOr<std::string> pdf = EncodeFigure(RenderPlotSvg(WitnessLike()), FigureFormat::kPdf);
  ASSERT_TRUE(pdf.ok());
  EXPECT_EQ(pdf->substr(0, 5), "%PDF-");
}

}  // namespace
}  // namespace ranksweep::client
