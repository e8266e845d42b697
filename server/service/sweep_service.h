// SweepService (ranksweep.v1) over the coordinator core: the calls people
// make through the CLI. Unary calls translate and finish at once through
// DefaultReactor(); WatchSweep is a write reactor fed by the coordinator's
// change listener, so a watch holds no thread while it waits.
//
// Ownership: the coordinator is not owned and must outlive this service and
// the gRPC server it is registered with. Watch reactors are owned by gRPC
// and delete themselves when done.
//
// Shutdown(): every open watch ends with UNAVAILABLE and new watches are
// refused, so that grpc::Server::Shutdown() does not wait for streams that
// would otherwise stay open until their sweep ends. Call it before
// grpc::Server::Shutdown().
//
// Thread-safety: all methods may be called concurrently, as gRPC does.
#ifndef RANKSWEEP_SERVER_SERVICE_SWEEP_SERVICE_H_
#define RANKSWEEP_SERVER_SERVICE_SWEEP_SERVICE_H_

#include <mutex>
#include <set>
#include <string>

#include <grpcpp/grpcpp.h>

#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "server/core/coordinator.h"

namespace ranksweep::server {

class SweepServiceImpl final : public v1::SweepService::CallbackService {
 public:
  // `owner` is recorded on every submitted sweep (authentication comes later).
  explicit SweepServiceImpl(Coordinator* coordinator, std::string owner = "local");
  ~SweepServiceImpl() override;

  void Shutdown();

  grpc::ServerUnaryReactor* SubmitSweep(grpc::CallbackServerContext* context,
                                        const v1::SubmitSweepRequest* request,
                                        v1::SubmitSweepResponse* response) override;
  grpc::ServerUnaryReactor* GetSweep(grpc::CallbackServerContext* context,
                                     const v1::GetSweepRequest* request,
                                     v1::GetSweepResponse* response) override;
  grpc::ServerUnaryReactor* ListSweeps(grpc::CallbackServerContext* context,
                                       const v1::ListSweepsRequest* request,
                                       v1::ListSweepsResponse* response) override;
  grpc::ServerUnaryReactor* CancelSweep(grpc::CallbackServerContext* context,
                                        const v1::CancelSweepRequest* request,
                                        v1::CancelSweepResponse* response) override;
  grpc::ServerWriteReactor<v1::SweepEvent>* WatchSweep(
      grpc::CallbackServerContext* context, const v1::WatchSweepRequest* request) override;
  grpc::ServerUnaryReactor* QueryResults(grpc::CallbackServerContext* context,
                                         const v1::QueryResultsRequest* request,
                                         v1::QueryResultsResponse* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;

 private:
  class WatchReactor;
  void Forget(WatchReactor* reactor);

  Coordinator* const coordinator_;
  const std::string owner_;

  std::mutex mu_;
  bool shutting_down_ = false;
  std::set<WatchReactor*> watches_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_SWEEP_SERVICE_H_
