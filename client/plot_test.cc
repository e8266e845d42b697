#include "client/plot.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep::client {
namespace {

using ::testing::HasSubstr;

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

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
            "t interval; transition rank: the smallest swept rank at which every seed is exact");
  EXPECT_THAT(PlotCriterion("exact_accuracy", true, 1),
              ::testing::StartsWith("test exact-sequence accuracy; marker: mean over 1 seed,"));
}

}  // namespace
}  // namespace ranksweep::client
