#include "server/service/worker_service.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/convert.h"
#include "proto/wire_check.h"
#include "server/service/call_auth.h"
#include "server/service/translate.h"

namespace ranksweep::server {
namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

const grpc::Status kShuttingDown(grpc::StatusCode::UNAVAILABLE, "server shutting down");

}  // namespace

// A parked AcquireTasks call. Whoever removes it from the waiter list
// finishes it; a client that goes away unparks it through OnCancel.
class WorkerServiceImpl::AcquireReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit AcquireReactor(WorkerServiceImpl* service) : service_(service) {}

  void OnCancel() override {
    if (service_->Unpark(this)) Finish(grpc::Status::CANCELLED);
  }
  void OnDone() override { delete this; }

 private:
  WorkerServiceImpl* const service_;
};

WorkerServiceImpl::WorkerServiceImpl(Coordinator* coordinator, const Authorizer* authorizer,
                                     int call_threads)
    : coordinator_(coordinator), authorizer_(authorizer), pool_(call_threads) {
  coordinator_->SetWorkListener([this] { OnWork(); });
  pump_ = std::thread([this] { Pump(); });
}

WorkerServiceImpl::~WorkerServiceImpl() { Shutdown(); }

void WorkerServiceImpl::Shutdown() {
  std::list<Waiter> parked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutting_down_ && !pump_.joinable()) return;
    shutting_down_ = true;
    parked.swap(waiters_);
  }
  coordinator_->SetWorkListener(nullptr);
  cv_.notify_all();
  if (pump_.joinable()) pump_.join();
  // An empty response: the worker simply asks again, and then learns that
  // the server is gone.
  for (Waiter& w : parked) w.reactor->Finish(grpc::Status::OK);
  // Calls already handed to the pool run to the end and finish.
  pool_.Shutdown();
}

size_t WorkerServiceImpl::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiters_.size();
}

void WorkerServiceImpl::OnWork() {
  work_generation_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_ = true;
  }
  cv_.notify_all();
}

bool WorkerServiceImpl::Unpark(AcquireReactor* reactor) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (it->reactor == reactor) {
      waiters_.erase(it);
      return true;
    }
  }
  return false;
}

void WorkerServiceImpl::Pump() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutting_down_) {
    if (!work_) {
      if (waiters_.empty()) {
        cv_.wait(lock);
      } else {
        SteadyTime next = waiters_.front().deadline;
        for (const Waiter& w : waiters_) next = std::min(next, w.deadline);
        cv_.wait_until(lock, next);
      }
      if (shutting_down_) break;
    }

    // Waits that have run out end with an empty response.
    const SteadyTime now = std::chrono::steady_clock::now();
    std::vector<Waiter> expired;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->deadline <= now) {
        expired.push_back(*it);
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    if (!expired.empty()) {
      lock.unlock();
      for (Waiter& w : expired) w.reactor->Finish(grpc::Status::OK);
      lock.lock();
    }

    if (!work_) continue;
    work_ = false;
    // Oldest waiter first, until one finds nothing: work is not per worker,
    // so the rest would find nothing either.
    while (!shutting_down_ && !waiters_.empty()) {
      Waiter w = waiters_.front();
      waiters_.pop_front();
      lock.unlock();
      bool served = true;
      if (w.context->IsCancelled()) {
        w.reactor->Finish(grpc::Status::CANCELLED);
      } else {
        absl::StatusOr<std::vector<Task>> tasks = coordinator_->Acquire(
            w.request->worker_id(), w.request->max_tasks(), w.request->max_seeds(),
            w.request->memory_bytes());
        if (!tasks.ok()) {
          w.reactor->Finish(ToGrpcStatus(tasks.status()));
        } else if (!tasks->empty()) {
          for (const Task& t : *tasks) *w.response->add_tasks() = ToProto(t);
          w.reactor->Finish(grpc::Status::OK);
        } else {
          served = false;
        }
      }
      lock.lock();
      if (!served) {
        if (shutting_down_) {
          lock.unlock();
          w.reactor->Finish(grpc::Status::OK);
          lock.lock();
        } else {
          waiters_.push_front(w);
        }
        break;
      }
    }
  }
}

grpc::ServerUnaryReactor* WorkerServiceImpl::RegisterWorker(
    grpc::CallbackServerContext* context, const v1::RegisterWorkerRequest* request,
    v1::RegisterWorkerResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller =
        AuthorizeCall(*authorizer_, context, methods::kRegisterWorker);
    if (!caller.ok()) return caller.status();
    WorkerRegistration reg = FromProto(*request);
    reg.owner = caller->name;
    absl::StatusOr<RegisteredWorker> id = coordinator_->RegisterWorker(reg);
    if (id.ok()) {
      const int lease_seconds =
          static_cast<int>(std::max<int64_t>(1, coordinator_->options().lease_ms / 1000));
      response->set_worker_id(id->worker_id);
      response->set_session(id->session);
      response->set_lease_seconds(lease_seconds);
      response->set_heartbeat_seconds(std::max(1, lease_seconds / 3));
    }
    return id.status();
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::AcquireTasks(grpc::CallbackServerContext* context,
                                                          const v1::AcquireTasksRequest* request,
                                                          v1::AcquireTasksResponse* response) {
  // Its own reactor, so that the call can be parked (finished later by the
  // pump) as well as finished by the store's finisher thread. Not on the call
  // pool: nothing here waits (the lease is written with AcquireAsync).
  auto* reactor = new AcquireReactor(this);
  absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kAcquireTasks);
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  if (request->wait_ms() < 0 || request->wait_ms() > kMaxWaitMs) {
    reactor->Finish(ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("wait_ms: must be 0..", kMaxWaitMs, ", got ", request->wait_ms()))));
    return reactor;
  }
  if (IsShuttingDown()) {
    reactor->Finish(kShuttingDown);
    return reactor;
  }
  if (absl::Status s = coordinator_->CheckWorkerSession(request->worker_id(), caller->name,
                                                        request->session());
      !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  const uint64_t generation = work_generation_.load();
  coordinator_->AcquireAsync(
      request->worker_id(),
      ranksweep::WantOf(*request),
      [this, reactor, context, request, response,
       generation](absl::StatusOr<std::vector<Task>> tasks) {
        if (!tasks.ok()) return reactor->Finish(ToGrpcStatus(tasks.status()));
        if (!tasks->empty() || request->wait_ms() == 0) {
          for (const Task& t : *tasks) *response->add_tasks() = ToProto(t);
          return reactor->Finish(grpc::Status::OK);
        }
        Park(reactor, context, request, response, generation);
      });
  return reactor;
}

bool WorkerServiceImpl::IsShuttingDown() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutting_down_;
}

void WorkerServiceImpl::Park(AcquireReactor* reactor, grpc::CallbackServerContext* context,
                             const v1::AcquireTasksRequest* request,
                             v1::AcquireTasksResponse* response, uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return reactor->Finish(grpc::Status::OK);
  if (context->IsCancelled()) return reactor->Finish(grpc::Status::CANCELLED);
  waiters_.push_back(Waiter{reactor, context, request, response,
                            std::chrono::steady_clock::now() +
                                std::chrono::milliseconds(request->wait_ms())});
  // Work that arrived between the lease attempt and parking must not be
  // missed.
  if (work_generation_.load() != generation) work_ = true;
  cv_.notify_all();
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* context,
                                                       const v1::HeartbeatRequest* request,
                                                       v1::HeartbeatResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kHeartbeat);
    if (!caller.ok()) return caller.status();
    RETURN_IF_ERROR(coordinator_->CheckWorkerSession(request->worker_id(), caller->name,
                                                     request->session()));
    std::vector<int64_t> leases(request->lease_ids().begin(), request->lease_ids().end());
    std::vector<LeaseProgress> progress;
    progress.reserve(request->progress_size());
    for (const v1::LeaseProgress& p : request->progress()) progress.push_back(FromProto(p));
    absl::StatusOr<HeartbeatOutcome> out =
        coordinator_->Heartbeat(request->worker_id(), leases, progress);
    if (out.ok()) FillProto(*out, response);
    return out.status();
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::CompleteTasks(
    grpc::CallbackServerContext* context, const v1::CompleteTasksRequest* request,
    v1::CompleteTasksResponse* response) {
  // Not on the call pool: nothing here waits. The store's writer thread
  // runs the transaction, and its finisher thread finishes the call once
  // its commit has synced.
  if (IsShuttingDown()) return Done(context, absl::UnavailableError("server shutting down"));
  absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kCompleteTasks);
  if (!caller.ok()) return Done(context, caller.status());
  if (absl::Status s = coordinator_->CheckWorkerSession(request->worker_id(), caller->name,
                                                        request->session());
      !s.ok()) {
    return Done(context, s);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::vector<CellResult> results;
  results.reserve(request->results_size());
  for (int i = 0; i < request->results_size(); ++i) {
    const v1::CellResult& r = request->results(i);
    if (absl::Status s = CheckWireSeedResult(r.result()); !s.ok()) {
      return Done(context, absl::InvalidArgumentError(
                               absl::StrCat("results[", i, "]: ", s.message())));
    }
    results.push_back(CellResult{r.cell_id(), r.lease_id(), ranksweep::FromProto(r.result())});
  }
  std::optional<TaskWant> next;
  if (request->has_next()) {
    next = FromProto(request->next());
  }
  coordinator_->CompleteAsync(
      request->worker_id(), std::move(results), next,
      [reactor, response](absl::StatusOr<CompleteOutcome> out) {
        if (out.ok()) {
          response->set_recorded(out->recorded);
          response->set_duplicates(out->duplicates);
          for (const Task& t : out->next_tasks) *response->add_next_tasks() = ToProto(t);
        }
        reactor->Finish(ToGrpcStatus(out.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::FailTask(grpc::CallbackServerContext* context,
                                                      const v1::FailTaskRequest* request,
                                                      v1::FailTaskResponse* response) {
  (void)response;
  return OffloadUnary(pool_, context, [this, context, request]() -> absl::Status {
    absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kFailTask);
    if (!caller.ok()) return caller.status();
    RETURN_IF_ERROR(coordinator_->CheckWorkerSession(request->worker_id(), caller->name,
                                                     request->session()));
    std::vector<int64_t> leases(request->lease_ids().begin(), request->lease_ids().end());
    return coordinator_->Fail(request->worker_id(), leases, request->reason(),
                              request->release());
  });
}

}  // namespace ranksweep::server
