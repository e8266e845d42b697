// The sweeps' specs, parsed once and shared: a spec never changes after
// Submit, so every later reader (the write path's per-call Acquire and
// Complete, the read path's queries) takes the same immutable copy.
//
// Errors: NotFound for an unknown sweep, DataLoss for a stored spec that
// does not parse, store errors as they come. Thread-safety: safe to call
// concurrently, from any connection's transaction.
#ifndef RANKSWEEP_SERVER_CORE_SWEEPS_SPEC_CACHE_H_
#define RANKSWEEP_SERVER_CORE_SWEEPS_SPEC_CACHE_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"
#include "server/core/store.h"

namespace ranksweep::server {

// Bounded: at most kMaxSpecs entries; one more evicts an arbitrary entry
// (specs are immutable and read again on a miss, so eviction only costs a
// parse), so the cache does not grow with every sweep a store ever held.
class SpecCache {
 public:
  static constexpr size_t kMaxSpecs = 4096;

  // The spec of `sweep_id`, from the cache, else read on `c` and cached.
  absl::StatusOr<std::shared_ptr<const SweepSpec>> Get(Connection& c,
                                                       const std::string& sweep_id);
  // Caches the spec of a sweep just stored (keeps an earlier entry).
  void Put(const std::string& sweep_id, const SweepSpec& spec);

 private:
  // Inserts under mu_, evicting first when the cache is full.
  std::shared_ptr<const SweepSpec> Insert(const std::string& sweep_id,
                                          std::shared_ptr<const SweepSpec> spec);

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const SweepSpec>> specs_;  // guarded by mu_
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_SWEEPS_SPEC_CACHE_H_
