// WorkerService (ranksweep.v1) over the coordinator core: the calls worker
// agents make. gRPC's own threads never wait for a commit, so that
// concurrent writes share commits:
//  * AcquireTasks and CompleteTasks, the calls every task makes, are
//    authorized and translated on gRPC's thread and queue their transaction
//    without waiting (Coordinator::AcquireAsync, CompleteAsync). The store's
//    writer thread runs it, and its finisher thread finishes the call as
//    soon as its commit has synced: no thread waits per call, and one
//    hand-over per commit answers all of that commit's calls.
//  * The other calls' bodies run on a thread of the service's CallPool
//    (call_pool.h), which waits for the store there.
// AcquireTasks is a long-poll: when no work is available the call is parked
// in a waiter list (no thread is held) and finished later by one pump
// thread, either when the coordinator reports new work (a submit, an expired
// or released lease, a retry) or with an empty response when its wait_ms
// elapses. Waiters are served first come, first served. CompleteTasks with
// `next` leases in the same transaction as its results and never parks: it
// returns what was free at that moment.
//
// Every call is first authorized (server/service/call_auth.h): worker calls
// need role worker or admin.
//
// Ownership: the coordinator and the authorizer are not owned and must
// outlive this service.
// The service registers itself as the coordinator's work listener and
// unregisters in Shutdown(). Parked reactors are owned by gRPC.
//
// Shutdown(): parked AcquireTasks calls finish at once with an empty
// response, calls already handed to the pool or queued on the store run to
// the end, later ones fail with UNAVAILABLE, and the pump and pool threads
// stop.
// Call it before grpc::Server::Shutdown(); the destructor calls it too.
//
// Thread-safety: all methods may be called concurrently, as gRPC does.
#ifndef RANKSWEEP_SERVER_SERVICE_WORKER_SERVICE_H_
#define RANKSWEEP_SERVER_SERVICE_WORKER_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "server/core/auth.h"
#include "server/core/coordinator.h"
#include "server/service/call_pool.h"

namespace ranksweep::server {

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  static constexpr int kMaxWaitMs = 60'000;

  // Threads of the call pool (call_pool.h) that run RegisterWorker,
  // Heartbeat and FailTask.
  static constexpr int kDefaultCallThreads = 64;

  WorkerServiceImpl(Coordinator* coordinator, const Authorizer* authorizer,
                    int call_threads = kDefaultCallThreads);
  ~WorkerServiceImpl() override;

  void Shutdown();

  // Long-polls parked right now (for tests and logs).
  size_t waiting() const;

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* context,
                                           const v1::RegisterWorkerRequest* request,
                                           v1::RegisterWorkerResponse* response) override;
  grpc::ServerUnaryReactor* AcquireTasks(grpc::CallbackServerContext* context,
                                         const v1::AcquireTasksRequest* request,
                                         v1::AcquireTasksResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* CompleteTasks(grpc::CallbackServerContext* context,
                                          const v1::CompleteTasksRequest* request,
                                          v1::CompleteTasksResponse* response) override;
  grpc::ServerUnaryReactor* FailTask(grpc::CallbackServerContext* context,
                                     const v1::FailTaskRequest* request,
                                     v1::FailTaskResponse* response) override;

 private:
  class AcquireReactor;
  using SteadyTime = std::chrono::steady_clock::time_point;

  struct Waiter {
    AcquireReactor* reactor;
    grpc::CallbackServerContext* context;
    const v1::AcquireTasksRequest* request;  // owned by gRPC until finished
    v1::AcquireTasksResponse* response;
    SteadyTime deadline;
  };

  bool IsShuttingDown() const;
  // Parks an AcquireTasks call that found no work, unless the server is
  // shutting down or the client has gone. `generation` is work_generation_
  // from before the lease attempt.
  void Park(AcquireReactor* reactor, grpc::CallbackServerContext* context,
            const v1::AcquireTasksRequest* request, v1::AcquireTasksResponse* response,
            uint64_t generation);
  void OnWork();
  void Pump();
  // Removes the waiter of `reactor` if it is still parked; true if it was.
  bool Unpark(AcquireReactor* reactor);

  Coordinator* const coordinator_;
  const Authorizer* const authorizer_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool shutting_down_ = false;
  bool work_ = false;  // the coordinator reported new work since the last pass
  std::atomic<uint64_t> work_generation_{0};
  std::list<Waiter> waiters_;  // oldest first
  std::thread pump_;
  CallPool pool_;  // declared last: its jobs use everything above
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_WORKER_SERVICE_H_
