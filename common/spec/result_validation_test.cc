#include "common/spec/result_validation.h"

#include <cmath>
#include <functional>
#include <string>

#include "common/spec/result_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep {
namespace {

using ::testing::HasSubstr;

// A result the trainer could produce: 3 of 4 train sequences exact, a test
// split of 8 with none exact, 120 of 200 steps.
SeedResult Good() {
  SeedResult r;
  r.seed = 2;
  r.train = SplitMetrics{4, 0.9, 0.75, 0.25, 0.4};
  r.test = SplitMetrics{8, 0.5, 0.0, 1.0, 0.7};
  r.final_loss = 0.03;
  r.steps = 120;
  r.wall_seconds = 1.5;
  r.device = "cpu";
  r.facts.train_sequences = 4;
  r.facts.test_sequences = 8;
  return r;
}

TEST(ValidateSeedResultTest, AcceptsWhatATrainerProduces) {
  EXPECT_TRUE(ValidateSeedResult(Good(), 200).ok());
  SeedResult no_test = Good();
  no_test.test = SplitMetrics();  // the trainer's empty test split
  EXPECT_TRUE(ValidateSeedResult(no_test, 200).ok());
  // Stored without a test split, the test error reads back as 1 whatever
  // the exact accuracy: the shares relate only in a split with sequences.
  no_test.test.exact_accuracy = 1;
  EXPECT_TRUE(ValidateSeedResult(no_test, 200).ok());
  no_test.test.exact_accuracy = 1.5;
  EXPECT_FALSE(ValidateSeedResult(no_test, 200).ok());
  SeedResult exact = Good();
  exact.train = SplitMetrics{4, 1.0, 1.0, 0.0, 0.0};
  exact.steps = 200;
  EXPECT_TRUE(ValidateSeedResult(exact, 200).ok());
  exact.steps = 0;
  EXPECT_TRUE(ValidateSeedResult(exact, 0).ok());
}

struct BadCase {
  std::function<void(SeedResult&)> edit;
  std::string message;
};

TEST(ValidateSeedResultTest, RefusesImpossibleValuesNamingTheFieldAndRange) {
  const BadCase cases[] = {
      {[](SeedResult& r) { r.train.exact_accuracy = NAN; },
       "result.train.exact_accuracy must be in [0, 1], got nan"},
      {[](SeedResult& r) { r.train.exact_accuracy = 2; },
       "result.train.exact_accuracy must be in [0, 1], got 2"},
      {[](SeedResult& r) { r.train.error = -1; }, "result.train.error must be in [0, 1], got -1"},
      {[](SeedResult& r) { r.train.error = 0.5; },
       "result.train.error must equal 1 - result.train.exact_accuracy (0.25) within 1e-09, got 0.5"},
      {[](SeedResult& r) { r.train.position_accuracy = 0.5; },
       "result.train.position_accuracy must be at least result.train.exact_accuracy (0.75), got 0.5"},
      {[](SeedResult& r) { r.train.max_abs_error = -0.1; },
       "result.train.max_abs_error must be in [0, inf), got -0.1"},
      {[](SeedResult& r) { r.train.max_abs_error = INFINITY; },
       "result.train.max_abs_error must be in [0, inf), got inf"},
      {[](SeedResult& r) { r.train.sequences = 0; },
       "result.train.sequences must be in 1..9223372036854775807, got 0"},
      {[](SeedResult& r) { r.test.sequences = -1; },
       "result.test.sequences must be in 0..9223372036854775807, got -1"},
      {[](SeedResult& r) { r.test.position_accuracy = -0.5; },
       "result.test.position_accuracy must be in [0, 1], got -0.5"},
      {[](SeedResult& r) { r.final_loss = INFINITY; }, "result.final_loss must be in [0, inf), got inf"},
      {[](SeedResult& r) { r.steps = -5; }, "result.steps must be in 0..200, got -5"},
      {[](SeedResult& r) { r.steps = 201; }, "result.steps must be in 0..200, got 201"},
      {[](SeedResult& r) { r.wall_seconds = -1; }, "result.wall_seconds must be in [0, inf), got -1"},
      {[](SeedResult& r) { r.device = std::string(257, 'x'); },
       "result.device must be at most 256 bytes, got 257"},
      {[](SeedResult& r) { r.facts.rank_upper_bound = -3; },
       "result.facts.rank_upper_bound must be in 0..9223372036854775807, got -3"},
      // An empty SeedResult: no train sequences.
      {[](SeedResult& r) { r = SeedResult(); },
       "result.train.sequences must be in 1..9223372036854775807, got 0"},
  };
  for (const BadCase& c : cases) {
    SeedResult r = Good();
    c.edit(r);
    absl::Status s = ValidateSeedResult(r, 200);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
  }
}

// first_exact_step: missing, or a step in 0..max_steps.
TEST(ValidateSeedResultTest, FirstExactStepIsMissingOrAStepOfTheRun) {
  SeedResult r = Good();
  EXPECT_FALSE(GetMetric("first_exact_step", r).has_value());
  EXPECT_TRUE(ValidateSeedResult(r, 200).ok());
  for (int64_t step : {0, 1, 120, 200}) {
    SetMetric("first_exact_step", step, &r);
    EXPECT_TRUE(ValidateSeedResult(r, 200).ok()) << step;
  }
  SetMetric("first_exact_step", 201, &r);
  absl::Status s = ValidateSeedResult(r, 200);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "result.first_exact_step must be in 0..200 or missing, got 201");
  SetMetric("first_exact_step", -1, &r);
  s = ValidateSeedResult(r, 200);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "result.first_exact_step must be in 0..200 or missing, got -1");
}

TEST(ValidateSeedResultTest, ToleratesRoundingOnly) {
  SeedResult r = Good();
  r.train.error = 0.25 + 1e-12;
  EXPECT_TRUE(ValidateSeedResult(r, 200).ok());
  r.train.error = 0.25 + 1e-6;
  EXPECT_FALSE(ValidateSeedResult(r, 200).ok());
}

TEST(CheckTextLengthTest, NamesTheFieldAndLimit) {
  EXPECT_TRUE(CheckTextLength("hostname", std::string(256, 'h'), 256).ok());
  absl::Status s = CheckTextLength("hostname", std::string(1 << 20, 'h'), 256);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "hostname must be at most 256 bytes, got 1048576");
}

TEST(ClipTest, CutsLongTextAndKeepsCharactersWhole) {
  EXPECT_EQ(Clip("short"), "short");
  std::string long_id(7000, 's');
  std::string clipped = Clip(long_id);
  EXPECT_EQ(clipped, std::string(200, 's') + "... (7000 bytes)");
  // "é" is two bytes; a cut at byte 3 of "aéé" backs off to byte 3's start.
  EXPECT_EQ(Clip("a\xC3\xA9\xC3\xA9", 2), "a... (5 bytes)");
  EXPECT_THAT(Clip("a\xC3\xA9\xC3\xA9", 3), HasSubstr("a\xC3\xA9..."));
}

}  // namespace
}  // namespace ranksweep
