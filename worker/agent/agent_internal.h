// What the worker agent's files (agent*.cc) share: the reason sent with
// tasks given back at shutdown, and Agent::Retrying, the retry loop of the
// calls the agent makes to report (completions, failures, releases).
//
// Internal to the worker agent (agent*.cc).
#ifndef RANKSWEEP_WORKER_AGENT_AGENT_INTERNAL_H_
#define RANKSWEEP_WORKER_AGENT_AGENT_INTERNAL_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/agent/agent.h"
#include "worker/agent/retry.h"

namespace ranksweep::agent {
namespace agent_internal {

inline absl::Status StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

inline constexpr char kShutdownReason[] = "worker shutting down";

}  // namespace agent_internal

template <typename Fn>
auto Agent::Retrying(const char* what, Fn fn) -> decltype(fn()) {
  Backoff backoff(options_.retry);
  for (int attempt = 1;; ++attempt) {
    auto result = fn();
    const absl::Status status = agent_internal::StatusOf(result);
    if (status.ok() || !IsTransient(status) || attempt >= options_.retry.max_attempts) {
      return result;
    }
    {
      absl::MutexLock lock(&mu_);
      if (OutOfTime()) return result;
    }
    const absl::Duration wait = backoff.Next();
    Log(absl::StrCat(what, ": ", status.ToString(), "; retrying in ",
                     absl::FormatDuration(absl::Trunc(wait, absl::Milliseconds(1)))));
    SleepFor(wait);
  }
}

}  // namespace ranksweep::agent

#endif  // RANKSWEEP_WORKER_AGENT_AGENT_INTERNAL_H_
