// Where a worker's finished results wait until the coordinator acknowledges
// them, so that a worker killed (or a coordinator gone) between training and
// acknowledgement loses nothing: the next process of the worker sends them
// again under the same leases, with the session they were leased under
// (docs/PROTOCOL.md, "Results that outlive the worker").
//
// This is the agent's seam for it, in plain types; the implementation on
// disk is FileOutbox (file_outbox.h). The agent runs without one (results
// then live in memory only, as the fake workers of some tests do).
//
// Thread-safety: implementations must allow calls from several threads.
#ifndef RANKSWEEP_WORKER_AGENT_OUTBOX_H_
#define RANKSWEEP_WORKER_AGENT_OUTBOX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/agent/coordinator_client.h"

namespace ranksweep::agent {

// The registration the results of an outbox were leased under: what a
// restarted worker needs to act for the same worker again.
struct OutboxSession {
  std::string worker_id;
  std::string session;  // RegisterWorkerResponse.session: a secret
  int lease_seconds = 0;
  int heartbeat_seconds = 0;
};

// One task's results, as one CompleteTasks call sends them.
struct OutboxBatch {
  int64_t id = 0;       // unique within the outbox, increasing
  std::string label;    // for log lines: "SWEEP head r=R seeds=N"
  std::vector<CellResult> results;
};

class Outbox {
 public:
  virtual ~Outbox() = default;

  // What the previous process left: the session it last registered (none
  // when it never registered or the file is unreadable), and its batches,
  // oldest first. Fixed when the outbox was opened.
  virtual std::optional<OutboxSession> LeftSession() const = 0;
  virtual std::vector<OutboxBatch> LeftBatches() const = 0;

  // Makes `session` the one a later process resumes; durable on OK.
  virtual absl::Status SaveSession(const OutboxSession& session) = 0;
  // Durable on OK. ResourceExhausted, naming the bound and its flag, when
  // the batch would take the outbox past its bounds (nothing is written
  // then); another error when the disk refuses.
  virtual absl::Status Add(const OutboxBatch& batch) = 0;
  // Forgets batch `id` (acknowledged or refused); OK when it is not there.
  virtual absl::Status Remove(int64_t id) = 0;
  // "2 batches, 3.1 kB (bounds: 1000 batches, 64 MiB)", for log lines.
  virtual std::string Describe() const = 0;
};

}  // namespace ranksweep::agent

#endif  // RANKSWEEP_WORKER_AGENT_OUTBOX_H_
