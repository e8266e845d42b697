// The seams of the worker agent: how it talks to the coordinator
// (CoordinatorClient) and how it trains a task (TaskRunner), in plain C++
// types so the agent core needs neither gRPC nor LibTorch. The gRPC
// implementation is grpc_client.h; the trainer-backed runner is
// trainer_runner.h; tests use fakes.
//
// The structs mirror the WorkerService messages of ranksweep.proto field for
// field; see that file for the meaning of each.
#ifndef RANKSWEEP_WORKER_AGENT_COORDINATOR_CLIENT_H_
#define RANKSWEEP_WORKER_AGENT_COORDINATOR_CLIENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/spec/worker_calls.h"
#include "common/spec/spec.h"

namespace ranksweep::agent {

struct RegisterReply {
  std::string worker_id;
  int lease_seconds = 0;
  int heartbeat_seconds = 0;
  // The registration's session secret, which the client also keeps and
  // sends on every later call; the agent only stores it in its outbox
  // (outbox.h) so that a restarted process can resume the session.
  std::string session;
};

// A leased task and the other values of the worker calls (LeasedCell,
// VersionManifest, WorkerRegistration, TaskWant, LeaseProgress,
// HeartbeatOutcome, CellResult, CompleteOutcome) are
// common/spec/worker_calls.h's, the coordinator's types too, so what it
// leased is what the worker trains.
using Task = ::ranksweep::LeasedTask;

// The WorkerService calls, one method per RPC. Errors are the coordinator's
// status codes (docs/PROTOCOL.md): UNAVAILABLE / DEADLINE_EXCEEDED /
// RESOURCE_EXHAUSTED are transient and worth retrying; NOT_FOUND for an
// unknown worker; FAILED_PRECONDITION for a stale or foreign lease.
//
// Thread-safety: implementations must allow concurrent calls from several
// threads (the agent heartbeats from its own thread while others complete).
class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;
  virtual absl::StatusOr<RegisterReply> Register(const WorkerRegistration& request) = 0;
  // Leases what `want` asks for, long-polling up to `wait_ms`; an empty
  // vector means no work.
  virtual absl::StatusOr<std::vector<Task>> Acquire(const std::string& worker_id,
                                                    const TaskWant& want, int wait_ms) = 0;
  virtual absl::StatusOr<HeartbeatOutcome> Heartbeat(const std::string& worker_id,
                                                   const std::vector<int64_t>& lease_ids) = 0;
  // A Heartbeat of `lease_ids` that also carries `progress` (recipe
  // pruning). A client that cannot send progress heartbeats without it.
  virtual absl::StatusOr<HeartbeatOutcome> ReportProgress(
      const std::string& worker_id, const std::vector<int64_t>& lease_ids,
      const std::vector<LeaseProgress>& progress) {
    (void)progress;
    return Heartbeat(worker_id, lease_ids);
  }
  // OK means every result is durable; idempotent under the same leases.
  // With `next` the same call also leases up to next->max_tasks tasks;
  // without it, or from a coordinator that predates `next`, none.
  virtual absl::StatusOr<CompleteOutcome> Complete(const std::string& worker_id,
                                                 const std::vector<CellResult>& results,
                                                 const std::optional<TaskWant>& next) = 0;
  virtual absl::Status Fail(const std::string& worker_id, const std::vector<int64_t>& lease_ids,
                            const std::string& reason, bool release) = 0;

  // Sends `session` (a secret an earlier Register of this worker returned,
  // kept in the outbox) on every later call, as if that Register had just
  // returned it: a restarted worker resumes its predecessor's session to
  // send the results it left. A client without sessions ignores it.
  virtual void ResumeSession(const std::string& session) { (void)session; }
  // Every call ends by `deadline` at the latest, calls in flight included
  // (DEADLINE_EXCEEDED): the hard end of a drain. A later call may only move
  // it earlier. A client without deadlines ignores it.
  virtual void SetDeadline(absl::Time deadline) { (void)deadline; }
};

// Control hooks handed to a running task.
struct RunControl {
  // Polled by the runner after every training step; true means stop and
  // return kCancelled. Never empty.
  std::function<bool()> should_stop;
  // Called with the steps done so far. Never empty.
  std::function<void(int64_t steps)> on_progress;
  // Called after each evaluation with its step and each seed's training
  // error (spec.seeds order; a seed stopped early keeps its last). May be
  // empty.
  std::function<void(int64_t step, const std::vector<double>& train_error)> on_eval;
};

// Trains one task: all of spec.seeds together. Returns one SeedResult per
// seed (the runner's order; the agent matches them to cells by seed);
// kCancelled when should_stop stopped it; any other error is the task's
// failure, reported to the coordinator as such (kResourceExhausted counts as
// the worker's fault, e.g. out of memory, and releases the cells instead).
//
// Thread-safety: Run may be called from several threads at once (one per
// slot).
class TaskRunner {
 public:
  virtual ~TaskRunner() = default;
  virtual absl::StatusOr<std::vector<SeedResult>> Run(const TaskSpec& spec,
                                                      const RunControl& control) = 0;
};

}  // namespace ranksweep::agent

#endif  // RANKSWEEP_WORKER_AGENT_COORDINATOR_CLIENT_H_
