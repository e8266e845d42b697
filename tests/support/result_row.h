// Test helper: every field of two coordinator result rows compared exactly.
#ifndef RANKSWEEP_TESTS_SUPPORT_RESULT_ROW_H_
#define RANKSWEEP_TESTS_SUPPORT_RESULT_ROW_H_

#include "gtest/gtest.h"
#include "server/core/types.h"
#include "tests/support/seed_result.h"

namespace ranksweep::testing {

inline void ExpectSameResultRow(const server::ResultRow& got, const server::ResultRow& want) {
  EXPECT_EQ(got.sweep_id, want.sweep_id);
  EXPECT_EQ(got.cell_id, want.cell_id);
  EXPECT_EQ(got.head, want.head);
  EXPECT_EQ(got.head_index, want.head_index);
  EXPECT_EQ(got.rank, want.rank);
  EXPECT_EQ(got.recipe, want.recipe);
  EXPECT_EQ(got.seed, want.seed);
  EXPECT_EQ(got.state, want.state);
  EXPECT_EQ(got.failure, want.failure);
  EXPECT_EQ(got.worker_id, want.worker_id);
  EXPECT_EQ(got.worker_version.build_id, want.worker_version.build_id);
  EXPECT_EQ(got.worker_version.torch_version, want.worker_version.torch_version);
  EXPECT_EQ(got.worker_version.cuda_version, want.worker_version.cuda_version);
  EXPECT_EQ(got.attempt, want.attempt);
  EXPECT_EQ(got.lease_id, want.lease_id);
  EXPECT_EQ(got.finished_unix_ms, want.finished_unix_ms);
  EXPECT_EQ(got.cached_from_cell_id, want.cached_from_cell_id);
  ASSERT_EQ(got.result.has_value(), want.result.has_value());
  if (want.result.has_value()) ExpectSameSeedResult(*got.result, *want.result);
}

}  // namespace ranksweep::testing

#endif  // RANKSWEEP_TESTS_SUPPORT_RESULT_ROW_H_
