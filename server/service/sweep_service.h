// SweepService (ranksweep.v1) over the coordinator core: the calls people
// make through the CLI. Unary calls run on the service's own CallPool
// (kCallThreads threads; a 100,000-row query takes a while, and must not hold
// one of gRPC's few callback threads that worker calls pass through) and
// finish through DefaultReactor(); WatchSweep is a write reactor fed by the
// coordinator's change listener, so a watch holds no thread while it waits.
//
// Every call is first authorized (server/service/call_auth.h): people's
// calls need role user or admin. A sweep's owner is the caller's name; a
// user lists, reads, watches and cancels only its own sweeps
// (PERMISSION_DENIED for another's), an admin all of them.
//
// Ownership: the coordinator and the authorizer are not owned and must
// outlive this service and the gRPC server it is registered with. Watch reactors are owned by gRPC
// and delete themselves when done.
//
// Shutdown(): every open watch ends with UNAVAILABLE and new watches are
// refused, so that grpc::Server::Shutdown() does not wait for streams that
// would otherwise stay open until their sweep ends; unary calls already
// handed to the pool run to the end, later ones fail with UNAVAILABLE. Call
// it before grpc::Server::Shutdown().
//
// Thread-safety: all methods may be called concurrently, as gRPC does.
#ifndef RANKSWEEP_SERVER_SERVICE_SWEEP_SERVICE_H_
#define RANKSWEEP_SERVER_SERVICE_SWEEP_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "server/core/auth.h"
#include "server/core/coordinator.h"
#include "server/core/metrics.h"
#include "server/service/call_pool.h"
#include "server/service/column_blocks.h"
#include "server/service/query_cache.h"

namespace ranksweep::server {

struct SweepServiceOptions {
  // Bytes of QueryResults replies kept for the same query of an unchanged
  // sweep (server/service/query_cache.h); 0 keeps none.
  int64_t query_cache_bytes = 0;
  // Rows per column block (server/service/column_blocks.h): a columns
  // query of a whole ended sweep reads its stored blocks, and one that read
  // this many rows or more outside them has the sweep sealed into blocks
  // behind it. 0: no blocks are read or sealed.
  int64_t column_block_rows = 0;
  // Where the reply cache counts its hits and misses and sets its size
  // (ranksweep_query_cache_*; DefineCoordinatorMetrics defines them); null =
  // not counted. Not owned; must outlive the service.
  MetricsRegistry* metrics = nullptr;
};

// QueryResults is served raw (its request and reply as bytes), so that a
// kept reply goes out as the bytes it was sent as before; every other
// method is typed.
class SweepServiceImpl final
    : public v1::SweepService::WithRawCallbackMethod_QueryResults<
          v1::SweepService::CallbackService> {
 public:
  SweepServiceImpl(Coordinator* coordinator, const Authorizer* authorizer,
                   SweepServiceOptions options = {});
  ~SweepServiceImpl() override;

  // Threads running SweepService calls (queries, submits) at once.
  static constexpr int kCallThreads = 8;

  void Shutdown();

  grpc::ServerUnaryReactor* SubmitSweep(grpc::CallbackServerContext* context,
                                        const v1::SubmitSweepRequest* request,
                                        v1::SubmitSweepResponse* response) override;
  grpc::ServerUnaryReactor* GetSweep(grpc::CallbackServerContext* context,
                                     const v1::GetSweepRequest* request,
                                     v1::GetSweepResponse* response) override;
  grpc::ServerUnaryReactor* ValidateSweep(grpc::CallbackServerContext* context,
                                          const v1::ValidateSweepRequest* request,
                                          v1::ValidateSweepResponse* response) override;
  grpc::ServerUnaryReactor* ListSweeps(grpc::CallbackServerContext* context,
                                       const v1::ListSweepsRequest* request,
                                       v1::ListSweepsResponse* response) override;
  grpc::ServerUnaryReactor* CancelSweep(grpc::CallbackServerContext* context,
                                        const v1::CancelSweepRequest* request,
                                        v1::CancelSweepResponse* response) override;
  grpc::ServerWriteReactor<v1::SweepEvent>* WatchSweep(
      grpc::CallbackServerContext* context, const v1::WatchSweepRequest* request) override;
  // Parses a v1::QueryResultsRequest and answers a v1::QueryResultsResponse;
  // a row query (no group_by, no state, no curves) is answered from the
  // reply cache while its sweep's results version stands.
  grpc::ServerUnaryReactor* QueryResults(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;
  grpc::ServerUnaryReactor* QuarantineWorker(grpc::CallbackServerContext* context,
                                             const v1::QuarantineWorkerRequest* request,
                                             v1::QuarantineWorkerResponse* response) override;
  grpc::ServerUnaryReactor* UnquarantineWorker(grpc::CallbackServerContext* context,
                                               const v1::UnquarantineWorkerRequest* request,
                                               v1::UnquarantineWorkerResponse* response) override;

 private:
  class WatchReactor;
  void Forget(WatchReactor* reactor);

  // OK when `caller` may `action` the sweep (admins always; users only
  // their own); NotFound for an unknown sweep.
  absl::Status CheckAccess(const Principal& caller, const std::string& sweep_id,
                           std::string_view action);
  // QueryResults' answer, read afresh, for a caller already allowed to read
  // the sweep. When its columns were joined from column blocks, they are
  // in `*columns` (a serialized ResultColumns, in parts that may lie on the
  // response's arena) and not in the response.
  absl::Status AnswerQuery(const v1::QueryResultsRequest& request,
                           v1::QueryResultsResponse* response, JoinedColumns* columns);
  // Keeps `reply` in the reply cache under `key` at results `version` and
  // sends it.
  absl::Status KeepAndSend(const std::string& key, int64_t version,
                           std::shared_ptr<const std::string> reply,
                           grpc::ByteBuffer* response_bytes);
  // Counts a lookup of the reply cache in the metrics, if any.
  void CountCacheLookup(bool hit);

  Coordinator* const coordinator_;
  const Authorizer* const authorizer_;
  MetricsRegistry* const metrics_;
  QueryReplyCache query_cache_;
  std::unique_ptr<BlockSealer> sealer_;  // null without column blocks
  int64_t end_subscription_ = 0;         // the sealer's, of every sweep's changes

  std::mutex mu_;
  bool shutting_down_ = false;
  std::set<WatchReactor*> watches_;
  // Runs the unary calls' bodies (queries can take a while), off gRPC's
  // own threads. Declared last: its jobs use everything above.
  CallPool pool_{kCallThreads};
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_SWEEP_SERVICE_H_
