// Workers, over the `workers` and quarantine tables (worker_registry.h,
// quarantine.h): registration bound to the token that made it, the session
// check every later worker call passes, and quarantine that takes a
// worker's results back and holds it (and, on request, its token) until an
// admin lifts it.
//
// The calls run their own write transaction and fill `events` for the
// caller to dispatch after the commit.
//
// Errors: InvalidArgument naming the field for a bad registration;
// NotFound for an unknown worker; PermissionDenied for another token's
// worker id, a stale session or a quarantined worker or token.
//
// Thread-safety: safe from any thread; writes are serialized by the store.
#ifndef RANKSWEEP_SERVER_CORE_WORKERS_WORKER_MANAGER_H_
#define RANKSWEEP_SERVER_CORE_WORKERS_WORKER_MANAGER_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/clock.h"
#include "server/core/events.h"
#include "server/core/leases/lease_manager.h"
#include "server/core/store.h"
#include "server/core/types.h"

namespace ranksweep::server {

class WorkerManager {
 public:
  using Events = TransactionEvents;

  // `store`, `clock` and `leases` are not owned and must outlive it.
  WorkerManager(Store* store, const Clock* clock, LeaseManager* leases);
  WorkerManager(const WorkerManager&) = delete;
  WorkerManager& operator=(const WorkerManager&) = delete;

  // Coordinator::RegisterWorker: a known id keeps its identity and the
  // cells its previous process held go back to pending (attempts given
  // back).
  absl::StatusOr<RegisteredWorker> Register(const WorkerRegistration& registration,
                                            Events& events);
  // Coordinator::CheckWorkerSession, on the store's quick read connection.
  // A check that passed is remembered (the owner and the session, for at
  // most kKnownSessions workers, in memory only) and answered from memory until the next
  // Register, Quarantine or Unquarantine: those are the only writes that
  // change what it reads, and each forgets every remembered check once it
  // has committed, before it returns. A check that read the store before
  // such a write ended keeps its answer but does not remember it. Anything
  // that does not match a remembered check reads the store.
  absl::Status CheckSession(const std::string& worker_id, const std::string& owner,
                            const std::string& session);
  // Coordinator::Quarantine.
  absl::StatusOr<QuarantineOutcome> Quarantine(const std::string& worker_id, int64_t since_ms,
                                               const std::string& by, bool hold_token,
                                               Events& events);
  // Coordinator::Unquarantine.
  absl::StatusOr<bool> Unquarantine(const std::string& worker_id, const std::string& by);

 private:
  // A session check that passed: the owner the store held for a worker that
  // was neither quarantined nor held, and the session whose hash it held.
  struct KnownSession {
    std::string owner;
    std::string session;
  };
  // Checks remembered at most; the map starts afresh when full.
  static constexpr size_t kKnownSessions = 4096;

  // store_->Write(fn), then forgets every remembered check: the writes
  // that can change one (Register, Quarantine, Unquarantine) go through it.
  absl::Status WriteAndForgetSessions(absl::FunctionRef<absl::Status(Connection&)> fn);

  Store* const store_;
  const Clock* const clock_;
  LeaseManager* const leases_;
  std::mutex sessions_mu_;
  uint64_t sessions_generation_ = 0;                         // guarded by sessions_mu_
  std::unordered_map<std::string, KnownSession> sessions_;  // guarded by sessions_mu_
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_WORKERS_WORKER_MANAGER_H_
