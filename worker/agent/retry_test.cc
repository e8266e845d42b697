// The agent's retry policy (retry.h): exponential backoff with its cap and
// jitter, and which status codes are transient.
#include "worker/agent/retry.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ranksweep::agent {
namespace {


TEST(BackoffTest, DoublesUpToTheCapWithoutJitter) {
  RetryPolicy policy;
  policy.initial_backoff = absl::Milliseconds(100);
  policy.max_backoff = absl::Milliseconds(350);
  policy.jitter = 0;
  Backoff b(policy, 1);
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(200));
  EXPECT_EQ(b.Next(), absl::Milliseconds(350));
  EXPECT_EQ(b.Next(), absl::Milliseconds(350));
  b.Reset();
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, JitterStaysInItsBand) {
  RetryPolicy policy;
  policy.initial_backoff = absl::Milliseconds(100);
  policy.jitter = 0.2;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Backoff b(policy, seed);
    const absl::Duration d = b.Next();
    EXPECT_GE(d, absl::Milliseconds(80));
    EXPECT_LE(d, absl::Milliseconds(120));
  }
}

TEST(RetryTest, TransientCodes) {
  EXPECT_TRUE(IsTransient(absl::UnavailableError("")));
  EXPECT_TRUE(IsTransient(absl::DeadlineExceededError("")));
  EXPECT_TRUE(IsTransient(absl::ResourceExhaustedError("")));
  EXPECT_TRUE(IsTransient(absl::CancelledError("")));
  EXPECT_FALSE(IsTransient(absl::FailedPreconditionError("")));
  EXPECT_FALSE(IsTransient(absl::NotFoundError("")));
  EXPECT_FALSE(IsTransient(absl::OkStatus()));
}

}  // namespace
}  // namespace ranksweep::agent
