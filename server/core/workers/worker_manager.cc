#include "server/core/workers/worker_manager.h"

#include <openssl/crypto.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec/result_validation.h"
#include "common/status_macros.h"
#include "server/core/auth.h"
#include "server/core/ids.h"
#include "server/core/log.h"
#include "server/core/workers/quarantine.h"
#include "server/core/workers/worker_registry.h"

namespace ranksweep::server {

WorkerManager::WorkerManager(Store* store, const Clock* clock, LeaseManager* leases)
    : store_(store), clock_(clock), leases_(leases) {}

absl::StatusOr<RegisteredWorker> WorkerManager::Register(const WorkerRegistration& reg,
                                                         Events& events) {
  ASSIGN_OR_RETURN(const int slots, CheckRegistration(reg));
  ASSIGN_OR_RETURN(const std::string session, NewSessionSecret());
  const std::string session_hash = HashToken(session);
  const int64_t now = clock_->NowMs();
  std::string worker_id = reg.worker_id;
  bool known = false;
  int64_t released = 0;
  RETURN_IF_ERROR(WriteAndForgetSessions([&](Connection& c) -> absl::Status {
    worker_id = reg.worker_id;
    known = false;
    released = 0;
    events = Events();
    // A token held by a quarantine registers nothing, under any id.
    RETURN_IF_ERROR(CheckTokenNotHeld(c, reg.owner));
    if (!worker_id.empty()) {
      RETURN_IF_ERROR(CheckWorkerOwner(c, worker_id, reg.owner));
      // A quarantined worker cannot come back by registering again.
      RETURN_IF_ERROR(CheckNotQuarantined(c, worker_id));
      ASSIGN_OR_RETURN(known, WorkerExists(c, worker_id));
    } else {
      ASSIGN_OR_RETURN(worker_id, NewWorkerId(c, [] { return RandomId("wk-"); }));
    }
    if (known) {
      // The previous process of this worker is gone: what it held is released.
      ASSIGN_OR_RETURN(const std::vector<int64_t> cells, LeasedCellsOf(c, worker_id));
      for (int64_t cell : cells) {
        RETURN_IF_ERROR(leases_->ReturnCellIn(c, cell, "worker re-registered",
                                              /*use_attempt=*/false, events));
      }
      released = static_cast<int64_t>(cells.size());
    }
    return SaveWorker(c, worker_id, reg, slots, now, session_hash);
  }));  // the worker's previous session ends here
  LogRegistration(reg, worker_id, slots, known, released);
  return RegisteredWorker{worker_id, session};
}

absl::Status WorkerManager::CheckSession(const std::string& worker_id, const std::string& owner,
                                         const std::string& session) {
  // Every worker call passes here: reading the store costs a read
  // transaction whose snapshot SQLite rebuilds after each commit, and
  // hashing the session a SHA-256, so a remembered check compares the
  // secret itself (in constant time).
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    auto it = sessions_.find(worker_id);
    if (it != sessions_.end() && !session.empty() && it->second.owner == owner &&
        it->second.session.size() == session.size() &&
        CRYPTO_memcmp(it->second.session.data(), session.data(), session.size()) == 0) {
      return absl::OkStatus();
    }
    generation = sessions_generation_;
  }
  const std::string session_hash = session.empty() ? std::string() : HashToken(session);
  RETURN_IF_ERROR(store_->QuickRead([&](Connection& c) -> absl::Status {
    return CheckWorkerSession(c, worker_id, owner, session_hash);
  }));
  std::lock_guard<std::mutex> lock(sessions_mu_);
  if (generation == sessions_generation_) {
    if (sessions_.size() >= kKnownSessions) sessions_.clear();
    sessions_[worker_id] = KnownSession{owner, session};
  }
  return absl::OkStatus();
}

// Every remembered check is forgotten after the write, even one that
// failed: forgetting costs the next checks a read, never an answer.
absl::Status WorkerManager::WriteAndForgetSessions(
    absl::FunctionRef<absl::Status(Connection&)> fn) {
  const absl::Status written = store_->Write(fn);
  std::lock_guard<std::mutex> lock(sessions_mu_);
  ++sessions_generation_;
  sessions_.clear();
  return written;
}

absl::StatusOr<QuarantineOutcome> WorkerManager::Quarantine(const std::string& worker_id,
                                                            int64_t since_ms,
                                                            const std::string& by,
                                                            bool hold_token, Events& events) {
  const int64_t now = clock_->NowMs();
  QuarantineOutcome out;
  RETURN_IF_ERROR(WriteAndForgetSessions([&](Connection& c) -> absl::Status {
    events = Events();
    std::vector<QuarantinedCell> cells;
    ASSIGN_OR_RETURN(out, QuarantineIn(c, worker_id, since_ms, by, now, hold_token, &cells));
    for (const QuarantinedCell& cell : cells) {
      events.Add(cell.sweep_id,
                 absl::StrCat("cell ", cell.cell_id,
                              cell.released ? " released by quarantine "
                                            : " invalidated by quarantine ",
                              out.quarantine_id, cell.reset ? ": pending again" : ""));
      events.work_available = events.work_available || cell.reset;
    }
    return absl::OkStatus();
  }));  // the worker (and, held, its token's workers) are refused from here
  LogEvent("quarantine %d of worker %s by %s (since %d ms): %d results and %d copies invalid, "
           "%d cells pending again, %d leases released, %d sweeps running again; the worker "
           "%sis held until unquarantined",
           out.quarantine_id, Clip(worker_id), Clip(by), since_ms, out.results_invalidated,
           out.copies_invalidated, out.cells_reset, out.leases_released,
           out.sweeps_reopened.size(),
           out.token_held.empty() ? ""
                                  : absl::StrCat("(and every worker of token ",
                                                 Clip(out.token_held), ") "));
  return out;
}

absl::StatusOr<bool> WorkerManager::Unquarantine(const std::string& worker_id,
                                                 const std::string& by) {
  bool was = false;
  RETURN_IF_ERROR(WriteAndForgetSessions([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(was, LiftQuarantine(c, worker_id));
    return absl::OkStatus();
  }));
  LogEvent("worker %s unquarantined by %s%s", Clip(worker_id), Clip(by),
           was ? "" : " (it was not quarantined)");
  return was;
}

}  // namespace ranksweep::server
