// Test helper: every field of two SeedResults compared exactly.
#ifndef RANKSWEEP_TESTS_SUPPORT_SEED_RESULT_H_
#define RANKSWEEP_TESTS_SUPPORT_SEED_RESULT_H_

#include <utility>

#include "common/spec/spec.h"
#include "gtest/gtest.h"

namespace ranksweep::testing {

inline void ExpectSameSeedResult(const SeedResult& got, const SeedResult& want) {
  EXPECT_EQ(got.seed, want.seed);
  for (const auto& [g, e] : {std::pair{got.train, want.train}, std::pair{got.test, want.test}}) {
    EXPECT_EQ(g.sequences, e.sequences);
    EXPECT_EQ(g.position_accuracy, e.position_accuracy);
    EXPECT_EQ(g.exact_accuracy, e.exact_accuracy);
    EXPECT_EQ(g.error, e.error);
    EXPECT_EQ(g.max_abs_error, e.max_abs_error);
  }
  EXPECT_EQ(got.final_loss, want.final_loss);
  EXPECT_EQ(got.steps, want.steps);
  EXPECT_EQ(got.wall_seconds, want.wall_seconds);
  EXPECT_EQ(got.device, want.device);
  EXPECT_EQ(got.facts.train_sequences, want.facts.train_sequences);
  EXPECT_EQ(got.facts.test_sequences, want.facts.test_sequences);
  EXPECT_EQ(got.facts.distinct_queries, want.facts.distinct_queries);
  EXPECT_EQ(got.facts.rank_lower_bound, want.facts.rank_lower_bound);
  EXPECT_EQ(got.facts.rank_upper_bound, want.facts.rank_upper_bound);
}

}  // namespace ranksweep::testing

#endif  // RANKSWEEP_TESTS_SUPPORT_SEED_RESULT_H_
