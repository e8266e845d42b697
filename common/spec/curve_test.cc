#include "common/spec/curve.h"

#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace ranksweep {
namespace {

Curve ThreePoints(bool has_test) {
  Curve c;
  c.has_test = has_test;
  c.points = {{50, 0.25f, 0.75f, 0.5f, 0.875f, 0.375f},
              {100, 0.125f, 0.5f, 0.75f, 0.625f, 0.5f},
              {130, 0.0f, 0.0f, 1.0f, 0.25f, 0.875f}};
  if (!has_test) {
    for (CurvePoint& p : c.points) p.test_error = 1, p.test_position_accuracy = 0;
  }
  return c;
}

TEST(CurveCodecTest, RoundTripsExactlyWithAndWithoutATestSplit) {
  for (bool has_test : {false, true}) {
    const Curve c = ThreePoints(has_test);
    const std::string bytes = EncodeCurve(c);
    // 2 header bytes, 1 count byte, per point a 1-byte delta and 3 or 5 floats.
    EXPECT_EQ(bytes.size(), has_test ? 3u + 3 * 21 : 3u + 3 * 13);
    absl::StatusOr<Curve> back = DecodeCurve(bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, c);
  }
}

TEST(CurveCodecTest, AnEmptyCurveIsThreeBytes) {
  Curve c;
  EXPECT_EQ(EncodeCurve(c).size(), 3u);
  absl::StatusOr<Curve> back = DecodeCurve(EncodeCurve(c));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->points.empty());
}

TEST(CurveCodecTest, RefusesBytesThatAreNotACurve) {
  const std::string good = EncodeCurve(ThreePoints(true));
  EXPECT_EQ(DecodeCurve("").status().message(), "stored curve: shorter than its header");
  EXPECT_EQ(DecodeCurve(std::string("\x02\x00\x00", 3)).status().message(),
            "stored curve: unknown format 2");
  EXPECT_EQ(DecodeCurve(std::string("\x01\x04\x00", 3)).status().message(),
            "stored curve: unknown flags 4");
  EXPECT_EQ(DecodeCurve(good.substr(0, good.size() - 1)).status().message(),
            "stored curve: cut short");
  EXPECT_EQ(DecodeCurve(good + "xy").status().message(),
            "stored curve: 2 bytes after the last point");
  EXPECT_EQ(DecodeCurve(good).status().code(), absl::StatusCode::kOk);
  EXPECT_EQ(DecodeCurve(good.substr(0, good.size() - 1)).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(CheckCurveTest, AcceptsWhatTheTrainerMeasures) {
  EXPECT_TRUE(CheckCurve(ThreePoints(true), 130, 50, true).ok());
  EXPECT_TRUE(CheckCurve(ThreePoints(false), 130, 50, false).ok());
  EXPECT_TRUE(CheckCurve(Curve{}, 0, 50, true).ok());
}

TEST(CheckCurveTest, NamesTheFieldAndTheRule) {
  Curve c = ThreePoints(true);
  EXPECT_EQ(CheckCurve(c, 120, 50, true).message(),
            "result.curve.points[2].step must be at most steps (120), got 130");
  EXPECT_EQ(CheckCurve(c, 130, 50, false).message(),
            "result.curve.has_test must be false (the dataset has no test split)");
  EXPECT_EQ(CheckCurve(c, 130, 100, true).message(),
            "result.curve must have at most 2 points (one per evaluation of 130 steps at "
            "eval_every 100, at most 20000), got 3");
  c.points[1].step = 50;
  EXPECT_EQ(CheckCurve(c, 130, 50, true).message(),
            "result.curve.points[1].step must be above 50 (the point before), got 50");
  c = ThreePoints(true);
  c.points[0].step = 0;
  EXPECT_EQ(CheckCurve(c, 130, 50, true).message(),
            "result.curve.points[0].step must be at least 1, got 0");
  c = ThreePoints(true);
  c.points[1].loss = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(CheckCurve(c, 130, 50, true).message(),
            "result.curve.points[1].loss must be finite and >= 0, got nan");
  c = ThreePoints(true);
  c.points[2].test_error = 1.5f;
  EXPECT_EQ(CheckCurve(c, 130, 50, true).message(),
            "result.curve.points[2].test_error must be in [0, 1], got 1.5");
  c = ThreePoints(true);
  c.points[0].train_position_accuracy = -0.25f;
  EXPECT_EQ(CheckCurve(c, 130, 50, true).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ranksweep
