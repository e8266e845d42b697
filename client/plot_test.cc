#include "client/plot.h"

#include <string>
#include <vector>
#include <cmath>
#include <cstdio>

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
  in.heads = {{0, "kernel/elu1", true}, {1, "kernel/favor", true}, {2, "softmax", false}};
  for (int head = 0; head < 2; ++head) {
    for (int rank = 1; rank <= 256; rank *= 2) {
      for (uint64_t seed = 0; seed < 3; ++seed) {
        in.points.push_back({head, rank, seed, rank >= 32 ? 0.0 : 0.9});
      }
    }
  }
  for (uint64_t seed = 0; seed < 3; ++seed) in.points.push_back({2, 0, seed, 0.0});
  in.lower_bound = 8;
  in.upper_bound = 24;
  return in;
}

TEST(PlotTest, OneCirclePerPointOnePolylinePerRankedHead) {
  const PlotInput in = WitnessLike();
  const std::string svg = RenderPlotSvg(in);
  EXPECT_EQ(in.points.size(), 57u);
  EXPECT_EQ(Count(svg, "<circle"), 57);
  EXPECT_EQ(Count(svg, "<polyline class=\"mean\""), 2);
  EXPECT_EQ(Count(svg, "<line class=\"flat\""), 1);
  EXPECT_EQ(Count(svg, "<line class=\"bound\""), 2);
  EXPECT_THAT(svg, HasSubstr(">lower bound 8</text>"));
  EXPECT_THAT(svg, HasSubstr(">upper bound 24</text>"));
  EXPECT_THAT(svg, HasSubstr(">witness-m24</text>"));
  EXPECT_THAT(svg, HasSubstr(">witness dataset, m = 24, N = 3, 3 seeds</text>"));
  EXPECT_THAT(svg, HasSubstr(">feature rank r (log2 scale)</text>"));
  EXPECT_THAT(svg, HasSubstr(">no rank</text>"));
  EXPECT_THAT(svg, HasSubstr(">kernel/favor</text>"));
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
}

TEST(PlotTest, BoundLinesSitAtTheirLog2Position) {
  const PlotInput in = WitnessLike();
  const PlotLayout l = ComputePlotLayout(in);
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
}

TEST(PlotTest, EscapesLabelsAndHandlesNoRankedHeads) {
  PlotInput in;
  in.title = "a<b & c";
  in.heads = {{0, "softmax", false}};
  in.points = {{0, 0, 0, 0.0}, {0, 0, 1, 1.0}};
  const std::string svg = RenderPlotSvg(in);
  EXPECT_THAT(svg, HasSubstr(">a&lt;b &amp; c</text>"));
  EXPECT_EQ(Count(svg, "<circle"), 2);
  EXPECT_EQ(Count(svg, "<polyline"), 0);
  EXPECT_EQ(Count(svg, "<line class=\"flat\""), 1);
  EXPECT_EQ(Count(svg, "<line class=\"bound\""), 0);
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

}  // namespace
}  // namespace ranksweep::client
