#include "server/core/results/packed_row.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec/result_metrics.h"
#include "gtest/gtest.h"
#include "tests/support/result_row.h"

namespace ranksweep::server {
namespace {

ResultRow DoneRow() {
  ResultRow row;
  row.head_index = 2;
  row.rank = 256;
  row.seed = std::numeric_limits<uint64_t>::max();  // stored as a negative INTEGER
  row.state = CellState::kDone;
  row.attempt = 2;
  row.lease_id = 1234567890123;
  row.finished_unix_ms = 1'796'000'000'000;
  row.cached_from_cell_id = 77;
  row.worker_id = "w-3f9a";
  row.worker_version = {"0123456789abcdef0123456789abcdef01234567", "2.11.0", "13.0"};
  SeedResult r;
  r.seed = row.seed;
  r.train = {4096, 0.999755859375, 0.75, 0.25, 0.4999};
  r.test = {512, 0.5, 0.125, 0.875, 3.25};
  r.final_loss = 1e-9;
  r.steps = 30000;
  r.wall_seconds = 12.5;
  r.device = "cuda:0 (NVIDIA H200)";
  r.facts = {4096, 512, 64, 32, 64};
  row.result = r;
  return row;
}

TEST(PackedRowTest, ADoneRowComesBackFieldForField) {
  ResultRow want = DoneRow();
  ResultRow got;
  // What the reader knows is not packed and is left alone.
  got.sweep_id = want.sweep_id = "sw-kept";
  got.cell_id = want.cell_id = 5;
  got.head = want.head = "kernel/elu1";
  ASSERT_TRUE(UnpackResultRow(PackResultRow(want), &got).ok());
  ranksweep::testing::ExpectSameResultRow(got, want);
}

TEST(PackedRowTest, AFailedRowHasNoResultEvenInAReusedRow) {
  ResultRow want;
  want.head_index = 0;
  want.rank = 1;
  want.seed = 3;
  want.state = CellState::kFailed;
  want.attempt = 3;
  want.lease_id = 9;
  want.worker_id = "w-1";
  want.failure = "worker lost (attempt 3 of 3)";
  ResultRow got = DoneRow();  // a row object reused from a done row
  ASSERT_TRUE(UnpackResultRow(PackResultRow(want), &got).ok());
  ranksweep::testing::ExpectSameResultRow(got, want);
}

// A reader reuses one row object from row to row and keeps a string that
// repeats: a string of the same length but other bytes must still be taken.
TEST(PackedRowTest, AReusedRowTakesEveryStringOfTheNextRowEvenOfTheSameLength) {
  ResultRow first = DoneRow();
  ResultRow second = DoneRow();
  second.worker_id = "w-3f9b";
  second.worker_version.torch_version = "2.11.1";
  second.result->device = "cuda:1 (NVIDIA H200)";
  ResultRow got;
  for (ResultRow* want : {&first, &second, &second, &first}) {
    ASSERT_TRUE(UnpackResultRow(PackResultRow(*want), &got).ok());
    ranksweep::testing::ExpectSameResultRow(got, *want);
  }
}

TEST(PackedRowTest, ARecipeIsVersion2AndRecipe0StaysVersion1) {
  ResultRow row = DoneRow();
  row.recipe = 0;
  const std::string v1 = PackResultRow(row);
  EXPECT_EQ(v1[0], 1);
  row.recipe = 37;
  const std::string v2 = PackResultRow(row);
  EXPECT_EQ(v2[0], 2);
  EXPECT_EQ(v2.size(), v1.size() + 1);  // zigzag 37 = 74: one byte
  ResultRow got = DoneRow();
  got.recipe = 5;
  ASSERT_TRUE(UnpackResultRow(v2, &got).ok());
  ranksweep::testing::ExpectSameResultRow(got, row);
  EXPECT_EQ(got.recipe, 37);
  ASSERT_TRUE(UnpackResultRow(v1, &got).ok());
  EXPECT_EQ(got.recipe, 0);
}

TEST(PackedRowTest, NoTestSplitStoresTestErrorAsOneLikeTheColumns) {
  ResultRow row = DoneRow();
  row.result->test = {};
  row.result->test.error = 0;  // not meaningful without a test split
  ResultRow got;
  ASSERT_TRUE(UnpackResultRow(PackResultRow(row), &got).ok());
  EXPECT_EQ(got.result->test.sequences, 0);
  EXPECT_EQ(got.result->test.error, 1.0);
}

// An optional metric packs as set or missing; a row packed before the
// metric existed (its bytes end after the facts) reads it as missing.
TEST(PackedRowTest, OptionalMetricsComeBackSetOrMissing) {
  ResultRow row = DoneRow();
  SetMetric("first_exact_step", 1200, &*row.result);
  ResultRow got;
  ASSERT_TRUE(UnpackResultRow(PackResultRow(row), &got).ok());
  ASSERT_TRUE(GetMetric("first_exact_step", *got.result).has_value());
  EXPECT_EQ(*GetMetric("first_exact_step", *got.result), 1200);
  SetMetric("first_exact_step", std::nullopt, &*row.result);
  const std::string packed = PackResultRow(row);
  ResultRow reused = got;  // still holds 1200
  ASSERT_TRUE(UnpackResultRow(packed, &reused).ok());
  EXPECT_FALSE(GetMetric("first_exact_step", *reused.result).has_value());
  // The metric count and one presence byte (0) per missing metric end the
  // row; without them it is a row packed before the metrics existed.
  const std::string older = packed.substr(0, packed.size() - 1 - kResultMetricCount);
  ResultRow old_row = got;
  ASSERT_TRUE(UnpackResultRow(older, &old_row).ok());
  EXPECT_FALSE(GetMetric("first_exact_step", *old_row.result).has_value());
  EXPECT_EQ(old_row.result->facts.rank_upper_bound, 64);
  // Each metric of the table, the later ones too, in its own slot.
  for (const ResultMetric& m : ResultMetrics()) {
    ResultRow one = DoneRow();
    SetMetric(m, 7, &*one.result);
    ASSERT_TRUE(UnpackResultRow(PackResultRow(one), &got).ok());
    for (const ResultMetric& other : ResultMetrics()) {
      EXPECT_EQ(GetMetric(other, *got.result),
                &other == &m ? std::optional<double>(7) : std::nullopt)
          << m.name << " / " << other.name;
    }
  }
}

TEST(PackedRowTest, NanAndNegativeValuesSurvive) {
  ResultRow row = DoneRow();
  row.result->final_loss = std::numeric_limits<double>::quiet_NaN();
  row.result->train.max_abs_error = -0.0;
  row.lease_id = -5;
  ResultRow got;
  ASSERT_TRUE(UnpackResultRow(PackResultRow(row), &got).ok());
  EXPECT_TRUE(std::isnan(got.result->final_loss));
  EXPECT_TRUE(std::signbit(got.result->train.max_abs_error));
  EXPECT_EQ(got.lease_id, -5);
}

TEST(PackedRowTest, TruncatedExtendedOrForeignBytesAreInternalErrors) {
  const std::string packed = PackResultRow(DoneRow());
  ResultRow row;
  for (size_t n : {size_t{0}, size_t{1}, size_t{10}, packed.size() - 1}) {
    absl::Status s = UnpackResultRow(std::string_view(packed).substr(0, n), &row);
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << n;
  }
  EXPECT_EQ(UnpackResultRow(packed + "x", &row).code(), absl::StatusCode::kInternal);
  // A varint longer than ten bytes, with room after it and without.
  for (size_t after : {size_t{40}, size_t{0}}) {
    std::string too_long(1, '\x01');
    too_long.append(11, '\xff');
    too_long.push_back('\x01');
    too_long.append(after, '\x00');
    absl::Status s = UnpackResultRow(too_long, &row);
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << after;
    EXPECT_EQ(s.message(), absl::StrCat("packed result row: malformed (", too_long.size(),
                                        " bytes)"))
        << after;
  }
  std::string other = packed;
  other[0] = 3;
  absl::Status s = UnpackResultRow(other, &row);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), absl::StrCat("packed result row: unknown version 3 (", packed.size(),
                                      " bytes)"));
}

}  // namespace
}  // namespace ranksweep::server
