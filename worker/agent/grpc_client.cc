#include "worker/agent/grpc_client.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "proto/convert.h"

namespace ranksweep::agent {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

absl::Status DrainDeadlinePassed() {
  return absl::DeadlineExceededError("the worker's drain deadline passed (--drain-seconds)");
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(const std::string& address,
                                                      const std::string& tls_ca_pem,
                                                      absl::Duration max_reconnect_backoff) {
  grpc::ChannelArguments args;
  const int max_ms = static_cast<int>(absl::ToInt64Milliseconds(max_reconnect_backoff));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::min(200, max_ms));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, std::min(200, max_ms));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_ms);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = tls_ca_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(address, credentials, args);
}

GrpcCoordinatorClient::GrpcCoordinatorClient(std::shared_ptr<grpc::Channel> channel,
                                             absl::Duration rpc_timeout, std::string token)
    : stub_(v1::WorkerService::NewStub(std::move(channel))),
      rpc_timeout_(rpc_timeout),
      token_(std::move(token)) {}

// Registers a context for SetDeadline's canceller while its call runs.
class GrpcCoordinatorClient::Call {
 public:
  Call(GrpcCoordinatorClient* client, grpc::ClientContext* ctx) : client_(client), ctx_(ctx) {
    std::lock_guard<std::mutex> lock(client_->mu_);
    client_->in_flight_.insert(ctx_);
  }
  ~Call() {
    std::lock_guard<std::mutex> lock(client_->mu_);
    client_->in_flight_.erase(ctx_);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

 private:
  GrpcCoordinatorClient* const client_;
  grpc::ClientContext* const ctx_;
};

GrpcCoordinatorClient::~GrpcCoordinatorClient() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (canceller_.joinable()) canceller_.join();
}

void GrpcCoordinatorClient::ResumeSession(const std::string& session) {
  std::lock_guard<std::mutex> lock(mu_);
  session_ = session;
}

void GrpcCoordinatorClient::SetDeadline(absl::Time deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    deadline_ = std::min(deadline_, deadline);
    if (!canceller_.joinable()) canceller_ = std::thread([this] { CancelAtDeadline(); });
  }
  changed_.notify_all();
}

void GrpcCoordinatorClient::CancelAtDeadline() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (absl::Now() < deadline_) {
      changed_.wait_until(lock, absl::ToChronoTime(deadline_));
      continue;
    }
    // Calls started before the deadline was set may run past it; calls
    // started since carry it themselves.
    for (grpc::ClientContext* ctx : in_flight_) ctx->TryCancel();
    changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
}

absl::Status GrpcCoordinatorClient::Finish(const grpc::Status& s) const {
  if (s.error_code() == grpc::StatusCode::CANCELLED) {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Now() >= deadline_) return DrainDeadlinePassed();
  }
  return FromGrpc(s);
}

std::string GrpcCoordinatorClient::Session() const {
  std::lock_guard<std::mutex> lock(mu_);
  return session_;
}

absl::Status GrpcCoordinatorClient::Prepare(grpc::ClientContext* ctx,
                                            absl::Duration timeout) const {
  const absl::Time now = absl::Now();
  absl::Time deadline = now + timeout;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // gRPC may still complete a call whose deadline is already past (on
    // loopback the answer can beat the deadline's timer), so such a call is
    // not started at all.
    if (now >= deadline_) return DrainDeadlinePassed();
    deadline = std::min(deadline, deadline_);
  }
  ctx->set_deadline(absl::ToChronoTime(deadline));
  if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
  return absl::OkStatus();
}

absl::StatusOr<RegisterReply> GrpcCoordinatorClient::Register(const WorkerRegistration& r) {
  v1::RegisterWorkerRequest req;
  ranksweep::FillProto(r, &req);
  v1::RegisterWorkerResponse resp;
  grpc::ClientContext ctx;
  RETURN_IF_ERROR(Prepare(&ctx, rpc_timeout_));
  Call in_flight(this, &ctx);
  absl::Status s = Finish(stub_->RegisterWorker(&ctx, req, &resp));
  if (!s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    session_ = resp.session();
  }
  return RegisterReply{resp.worker_id(), resp.lease_seconds(), resp.heartbeat_seconds(),
                       resp.session()};
}

absl::StatusOr<std::vector<Task>> GrpcCoordinatorClient::Acquire(const std::string& worker_id,
                                                                 const TaskWant& want,
                                                                 int wait_ms) {
  v1::AcquireTasksRequest req;
  req.set_worker_id(worker_id);
  req.set_session(Session());
  ranksweep::FillProto(want, &req);
  req.set_wait_ms(wait_ms);
  v1::AcquireTasksResponse resp;
  grpc::ClientContext ctx;
  RETURN_IF_ERROR(Prepare(&ctx, rpc_timeout_ + absl::Milliseconds(wait_ms)));
  Call in_flight(this, &ctx);
  absl::Status s = Finish(stub_->AcquireTasks(&ctx, req, &resp));
  if (!s.ok()) return s;
  std::vector<Task> tasks;
  for (const v1::Task& t : resp.tasks()) tasks.push_back(ranksweep::FromProto(t));
  return tasks;
}

absl::StatusOr<HeartbeatOutcome> GrpcCoordinatorClient::Heartbeat(
    const std::string& worker_id, const std::vector<int64_t>& lease_ids) {
  return ReportProgress(worker_id, lease_ids, {});
}

absl::StatusOr<HeartbeatOutcome> GrpcCoordinatorClient::ReportProgress(
    const std::string& worker_id, const std::vector<int64_t>& lease_ids,
    const std::vector<LeaseProgress>& progress) {
  v1::HeartbeatRequest req;
  req.set_worker_id(worker_id);
  req.set_session(Session());
  for (int64_t id : lease_ids) req.add_lease_ids(id);
  for (const LeaseProgress& p : progress) ranksweep::FillProto(p, req.add_progress());
  v1::HeartbeatResponse resp;
  grpc::ClientContext ctx;
  RETURN_IF_ERROR(Prepare(&ctx, rpc_timeout_));
  Call in_flight(this, &ctx);
  absl::Status s = Finish(stub_->Heartbeat(&ctx, req, &resp));
  if (!s.ok()) return s;
  return ranksweep::FromProto(resp);
}

absl::StatusOr<CompleteOutcome> GrpcCoordinatorClient::Complete(
    const std::string& worker_id, const std::vector<CellResult>& results,
    const std::optional<TaskWant>& next) {
  v1::CompleteTasksRequest req;
  req.set_worker_id(worker_id);
  req.set_session(Session());
  for (const CellResult& r : results) {
    v1::CellResult* out = req.add_results();
    out->set_cell_id(r.cell_id);
    out->set_lease_id(r.lease_id);
    *out->mutable_result() = ToProto(r.result);
  }
  if (next.has_value()) ranksweep::FillProto(*next, req.mutable_next());
  v1::CompleteTasksResponse resp;
  grpc::ClientContext ctx;
  RETURN_IF_ERROR(Prepare(&ctx, rpc_timeout_));
  Call in_flight(this, &ctx);
  absl::Status s = Finish(stub_->CompleteTasks(&ctx, req, &resp));
  if (!s.ok()) return s;
  CompleteOutcome reply{resp.recorded(), resp.duplicates(), {}};
  for (const v1::Task& t : resp.next_tasks()) reply.next_tasks.push_back(ranksweep::FromProto(t));
  return reply;
}

absl::Status GrpcCoordinatorClient::Fail(const std::string& worker_id,
                                         const std::vector<int64_t>& lease_ids,
                                         const std::string& reason, bool release) {
  v1::FailTaskRequest req;
  req.set_worker_id(worker_id);
  req.set_session(Session());
  for (int64_t id : lease_ids) req.add_lease_ids(id);
  req.set_reason(reason);
  req.set_release(release);
  v1::FailTaskResponse resp;
  grpc::ClientContext ctx;
  RETURN_IF_ERROR(Prepare(&ctx, rpc_timeout_));
  Call in_flight(this, &ctx);
  return Finish(stub_->FailTask(&ctx, req, &resp));
}

}  // namespace ranksweep::agent
