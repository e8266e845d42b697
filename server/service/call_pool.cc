#include "server/service/call_pool.h"

#include <utility>

#include "server/service/translate.h"

namespace ranksweep::server {

CallPool::CallPool(int threads) {
  if (threads < 1) threads = 1;
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

CallPool::~CallPool() { Shutdown(); }

bool CallPool::Run(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void CallPool::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void CallPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and everything queued has run
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

grpc::ServerUnaryReactor* OffloadUnary(CallPool& pool, grpc::CallbackServerContext* context,
                                       std::function<absl::Status()> body) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!pool.Run([reactor, body = std::move(body)] { reactor->Finish(ToGrpcStatus(body())); })) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  }
  return reactor;
}

}  // namespace ranksweep::server
