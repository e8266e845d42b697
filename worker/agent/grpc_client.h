// CoordinatorClient over gRPC: translates the agent's plain structs to the
// ranksweep.v1 WorkerService messages (through proto/convert.h) and
// grpc::Status to absl::Status (same code numbers, same message).
//
// Every call carries a deadline: `rpc_timeout`, plus the long-poll wait for
// AcquireTasks. Connection loss shows up as UNAVAILABLE; the channel made by
// MakeCoordinatorChannel reconnects with short backoff (at most a few
// seconds) so a restarted coordinator is found again quickly.
//
// Register keeps the session secret the coordinator hands out and every
// later call sends it (docs/SECURITY.md, "What a worker token can do"); a
// new Register or ResumeSession replaces it. The agent sees it only to keep
// it in its outbox for a restarted process.
//
// SetDeadline caps every later call's deadline and, from a thread of the
// client's own started then, cancels the calls still in flight when it
// passes; those answer DEADLINE_EXCEEDED.
//
// Ownership: shares the channel. Thread-safety: all methods may be called
// concurrently (gRPC stubs are thread-safe; the session has a mutex).
#ifndef RANKSWEEP_WORKER_AGENT_GRPC_CLIENT_H_
#define RANKSWEEP_WORKER_AGENT_GRPC_CLIENT_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "worker/agent/coordinator_client.h"

namespace ranksweep::agent {

// A channel to `address` (host:port) with reconnect backoff bounded by
// `max_reconnect_backoff`: TLS trusting the PEM CA certificates
// `tls_ca_pem` when that is non-empty, plaintext otherwise.
std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(
    const std::string& address, const std::string& tls_ca_pem = "",
    absl::Duration max_reconnect_backoff = absl::Seconds(2));

class GrpcCoordinatorClient : public CoordinatorClient {
 public:
  // A non-empty `token` goes on every call as "authorization: Bearer TOKEN"
  // (docs/SECURITY.md).
  explicit GrpcCoordinatorClient(std::shared_ptr<grpc::Channel> channel,
                                 absl::Duration rpc_timeout = absl::Seconds(30),
                                 std::string token = "");

  absl::StatusOr<RegisterReply> Register(const WorkerRegistration& request) override;
  absl::StatusOr<std::vector<Task>> Acquire(const std::string& worker_id, const TaskWant& want,
                                            int wait_ms) override;
  absl::StatusOr<HeartbeatOutcome> Heartbeat(const std::string& worker_id,
                                           const std::vector<int64_t>& lease_ids) override;
  absl::StatusOr<HeartbeatOutcome> ReportProgress(
      const std::string& worker_id, const std::vector<int64_t>& lease_ids,
      const std::vector<LeaseProgress>& progress) override;
  absl::StatusOr<CompleteOutcome> Complete(const std::string& worker_id,
                                         const std::vector<CellResult>& results,
                                         const std::optional<TaskWant>& next) override;
  absl::Status Fail(const std::string& worker_id, const std::vector<int64_t>& lease_ids,
                    const std::string& reason, bool release) override;
  void ResumeSession(const std::string& session) override;
  void SetDeadline(absl::Time deadline) override;

  ~GrpcCoordinatorClient() override;

 private:
  class Call;  // one call in flight: its context, registered for cancelling
  // Sets the call's deadline and token; DEADLINE_EXCEEDED, and no call, once
  // SetDeadline's deadline has passed.
  absl::Status Prepare(grpc::ClientContext* ctx, absl::Duration timeout) const;
  std::string Session() const;
  // `s` as absl, DEADLINE_EXCEEDED for a call SetDeadline's thread cut.
  absl::Status Finish(const grpc::Status& s) const;
  void CancelAtDeadline();

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  absl::Duration rpc_timeout_;
  std::string token_;
  mutable std::mutex mu_;
  std::string session_;  // guarded by mu_; from the last Register
  absl::Time deadline_ = absl::InfiniteFuture();  // guarded by mu_
  std::set<grpc::ClientContext*> in_flight_;      // guarded by mu_
  bool stopping_ = false;                         // guarded by mu_
  std::condition_variable changed_;
  std::thread canceller_;  // started by the first SetDeadline
};

}  // namespace ranksweep::agent

#endif  // RANKSWEEP_WORKER_AGENT_GRPC_CLIENT_H_
