// Retry policy of the worker agent: which coordinator errors are transient
// and how long to wait between attempts (exponential backoff with jitter).
//
// Thread-safety: RetryPolicy is a value; a Backoff belongs to one caller.
#ifndef RANKSWEEP_WORKER_AGENT_RETRY_H_
#define RANKSWEEP_WORKER_AGENT_RETRY_H_

#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ranksweep::agent {

struct RetryPolicy {
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(5);
  double multiplier = 2.0;
  // Each wait is scaled by a uniform factor in [1 - jitter, 1 + jitter], so
  // workers that lost the coordinator together do not retry in lockstep.
  double jitter = 0.2;
  // Attempts of one call before the caller gives up on it for now (results
  // stay queued and are sent again later).
  int max_attempts = 6;
};

// UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED and CANCELLED: the
// coordinator is down, restarting (a shutdown cancels the calls it has not
// finished), slow or busy; the same call may succeed later.
bool IsTransient(const absl::Status& status);

// Successive waits: initial, initial*multiplier, ... capped at max, each
// jittered.
class Backoff {
 public:
  explicit Backoff(const RetryPolicy& policy, uint64_t seed = std::random_device{}());
  absl::Duration Next();
  void Reset() { current_ = policy_.initial_backoff; }

 private:
  RetryPolicy policy_;
  absl::Duration current_;
  std::mt19937_64 rng_;
};

}  // namespace ranksweep::agent

#endif  // RANKSWEEP_WORKER_AGENT_RETRY_H_
