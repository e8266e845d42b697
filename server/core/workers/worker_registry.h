// The `workers` table: who registered, with which version and memory, and
// when each worker was last seen. The coordinator (server/core/coordinator.h)
// runs these inside its write transactions; RegisterWorker there also
// releases the cells a re-registered worker held.
//
// A worker id is 1..64 characters of [A-Za-z0-9._-]; one the coordinator
// assigns is "wk-" and eight hex digits. Every result row records the
// version manifest its worker registered with.
//
// Errors: InvalidArgument naming the field for a bad registration or an
// empty worker id; NotFound ("unknown worker ...; register first") for a
// worker id with no row, where a registered worker is required; store
// errors as they come.
//
// Thread-safety: pure functions, or functions on the Connection of the one
// transaction that called them.
#ifndef RANKSWEEP_SERVER_CORE_WORKERS_WORKER_REGISTRY_H_
#define RANKSWEEP_SERVER_CORE_WORKERS_WORKER_REGISTRY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/sqlite.h"
#include "server/core/types.h"

namespace ranksweep::server {

// The slots to store for `reg` (1..64; 0 means 1), or InvalidArgument for
// the first bad field: slots, worker_id (empty, or a valid id), then the
// free-text fields against ResultLimits::kMaxLabelLength.
absl::StatusOr<int> CheckRegistration(const WorkerRegistration& reg);

// Whether `worker_id` has a row.
absl::StatusOr<bool> WorkerExists(Connection& c, const std::string& worker_id);

// A worker id no row has yet, from candidates `random_id` makes (Internal
// when a hundred of them are all taken).
absl::StatusOr<std::string> NewWorkerId(Connection& c, absl::FunctionRef<std::string()> random_id);

// The cells leased to `worker_id` right now.
absl::StatusOr<std::vector<int64_t>> LeasedCellsOf(Connection& c, const std::string& worker_id);

// Writes `reg` as the row of `worker_id` with `slots`, last seen at
// `now_ms`, bound to `reg.owner` and to the session whose SHA-256 is
// `session_hash`; a new row is also registered at `now_ms`, a known worker
// keeps its registered time.
absl::Status SaveWorker(Connection& c, const std::string& worker_id,
                        const WorkerRegistration& reg, int slots, int64_t now_ms,
                        const std::string& session_hash);

// A fresh session secret: "ws_" and 43 base64url characters (32 bytes from
// OpenSSL's RAND_bytes). Internal when the random source fails.
absl::StatusOr<std::string> NewSessionSecret();

// PermissionDenied when `worker_id` has a row bound to another token than
// `owner` (a worker id cannot move between tokens); OK for an unknown id or
// one no token has bound yet (a row from before binding existed).
absl::Status CheckWorkerOwner(Connection& c, const std::string& worker_id,
                              const std::string& owner);

// The check every worker call after RegisterWorker passes: `worker_id` is
// registered (NotFound, "register first", otherwise), by the token `owner`,
// and `session_hash` is HashToken (auth.h) of the secret of its latest
// registration, empty for a call that sent none (PermissionDenied
// otherwise, naming neither the holder nor the secret), and it is not
// quarantined (CheckNotQuarantined). Writes nothing. The caller hashes, so
// that a check it also remembers hashes the secret once.
absl::Status CheckWorkerSession(Connection& c, const std::string& worker_id,
                                const std::string& owner, const std::string& session_hash);

// The operators' log line of a registration (server/core/log.h), after it
// committed: `known` for a re-registration, `released` the cells it freed.
void LogRegistration(const WorkerRegistration& reg, const std::string& worker_id, int slots,
                     bool known, int64_t released);

// NotFound unless `worker_id` is registered; marks it seen at `now_ms`.
absl::Status TouchWorker(Connection& c, const std::string& worker_id, int64_t now_ms);

// Marks `worker_id` seen at `now_ms` and adds `recorded` to the results it
// completed (a CompleteTasks call); the worker is known to exist.
absl::Status RecordCompletions(Connection& c, const std::string& worker_id, int64_t now_ms,
                               int64_t recorded);

// PermissionDenied when `worker_id` is quarantined (Quarantine in
// quarantine.h holds it until Unquarantine), naming the command that lifts
// it; OK for one in good standing or an unknown one. Writes nothing.
// A worker whose token a quarantine holds (QuarantineIn with hold_token) is
// refused the same way, naming the quarantined worker.
absl::Status CheckNotQuarantined(Connection& c, const std::string& worker_id);

// PermissionDenied when the token named `owner` is held by a quarantine, so
// that no new worker id registers with it; OK otherwise. Writes nothing.
absl::Status CheckTokenNotHeld(Connection& c, const std::string& owner);

// The version manifest `worker_id` registered with, for a worker that may
// complete: NotFound, as TouchWorker says it, for an unknown one, and
// CheckNotQuarantined's refusal for a quarantined one or one whose token a
// quarantine holds. One read of its row. Writes nothing.
absl::StatusOr<VersionManifest> ActiveWorkerVersion(Connection& c, const std::string& worker_id);

// The version manifest `worker_id` registered with, empty for an unknown
// worker (a failure recorded for a worker whose row is gone).
absl::StatusOr<VersionManifest> WorkerVersion(Connection& c, const std::string& worker_id);

// The memory `worker_id` registered with; 0 (unknown) for an unknown worker.
absl::StatusOr<int64_t> RegisteredMemoryBytes(Connection& c, const std::string& worker_id);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_WORKERS_WORKER_REGISTRY_H_
