// A fixed set of threads that run the bodies of unary calls which block on
// the store (RegisterWorker, Heartbeat, FailTask, the SweepService calls).
// AcquireTasks and CompleteTasks do not use it: they queue their write with
// Store::WriteAsync, and the store's finisher thread finishes them.
//
// Why: gRPC's callback API runs handlers on a few threads of its own, and a
// handler that blocks there (a write transaction waiting for its commit)
// holds one of them. With handlers run inline, only that many writes could
// ever wait for the same commit, so group commit (server/core/store.h)
// found batches of one or two and each call paid a whole sync. Handing the
// body to this pool returns gRPC's thread at once; the pool's threads wait
// on the store instead, as many at a time as there are threads, and their
// writes share commits.
//
// Run() queues a job; jobs run in arrival order on whichever thread is free.
// Shutdown() runs every job already queued, then stops the threads; Run()
// after that returns false and does not run the job, so the caller finishes
// its call itself (UNAVAILABLE). The destructor calls Shutdown().
//
// SweepService and WorkerService each have a pool, so that a long query never
// delays a worker's call.
//
// Thread-safety: Run() may be called from any thread, concurrently.
#ifndef RANKSWEEP_SERVER_SERVICE_CALL_POOL_H_
#define RANKSWEEP_SERVER_SERVICE_CALL_POOL_H_

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace ranksweep::server {

class CallPool {
 public:
  // `threads` must be >= 1.
  explicit CallPool(int threads);
  ~CallPool();
  CallPool(const CallPool&) = delete;
  CallPool& operator=(const CallPool&) = delete;

  // Queues `job`; false (job not run) once Shutdown() has begun.
  bool Run(std::function<void()> job);
  void Shutdown();

  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// A unary call whose body runs on `pool`: the status `body` returns (after
// filling the response) finishes the call through its DefaultReactor. Once
// the pool has shut down the call finishes at once with UNAVAILABLE.
grpc::ServerUnaryReactor* OffloadUnary(CallPool& pool, grpc::CallbackServerContext* context,
                                       std::function<absl::Status()> body);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_CALL_POOL_H_
