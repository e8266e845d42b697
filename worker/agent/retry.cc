#include "worker/agent/retry.h"

#include <algorithm>

namespace ranksweep::agent {

bool IsTransient(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    // The agent never cancels its own calls, so CANCELLED is a coordinator
    // that shut down with the call in flight: a restart, not a refusal.
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

Backoff::Backoff(const RetryPolicy& policy, uint64_t seed)
    : policy_(policy), current_(policy.initial_backoff), rng_(seed) {}

absl::Duration Backoff::Next() {
  const absl::Duration base = current_;
  current_ = std::min(policy_.max_backoff, current_ * policy_.multiplier);
  if (policy_.jitter <= 0) return base;
  std::uniform_real_distribution<double> factor(1.0 - policy_.jitter, 1.0 + policy_.jitter);
  return base * factor(rng_);
}

}  // namespace ranksweep::agent
