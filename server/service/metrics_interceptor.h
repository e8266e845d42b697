// A gRPC server interceptor that counts what the operators' metrics need
// (server/core/metrics.h) from the calls themselves, so that the service
// adapters stay as they are:
//
//   ranksweep_rpcs_total{method,code}      every finished call; `method` is
//                                          MethodLabel's, from a fixed set
//   ranksweep_rpc_duration_seconds{method} each call's time from its start
//                                          (the interceptor's creation) to
//                                          its status
//   ranksweep_leases_granted_total         cells in the tasks AcquireTasks and
//                                          CompleteTasks (next_tasks) return
//   ranksweep_leases_lost_total            Heartbeat's lost_lease_ids
//   ranksweep_results_accepted_total       CompleteTasks' `recorded`
//   ranksweep_results_rejected_total{reason}  the results of a CompleteTasks
//                                          call that failed, by status code
//
// Thread-safety: the factory is shared by every call; each interceptor
// belongs to one call. The registry must outlive the server.
#ifndef RANKSWEEP_SERVER_SERVICE_METRICS_INTERCEPTOR_H_
#define RANKSWEEP_SERVER_SERVICE_METRICS_INTERCEPTOR_H_

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"
#include "server/core/metrics.h"

namespace ranksweep::server {

// "OK", "INVALID_ARGUMENT", ...: the names of grpc::StatusCode.
std::string StatusCodeName(grpc::StatusCode code);

// The method label of a call: its full name ("/ranksweep.v1.WorkerService/
// Heartbeat") when it is one the server serves (the ranksweep.v1 services,
// gRPC health and reflection), else "unknown". So a caller, with or without
// a token, cannot add a series per name it makes up.
std::string MethodLabel(const std::string& method);

// Every method MethodLabel keeps, by full name, sorted.
std::vector<std::string> ServedMethodNames();

struct MethodSeries;

class MetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` is not owned; DefineCoordinatorMetrics must have run on it.
  // Gives ranksweep_rpcs_total a zero sample for each served method with
  // code OK, so that the family has its series before the first call.
  explicit MetricsInterceptorFactory(MetricsRegistry* metrics);
  ~MetricsInterceptorFactory() override;
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

  // The series without labels that calls count into.
  struct Totals {
    Totals();
    MetricsRegistry::Series leases_granted;
    MetricsRegistry::Series results_accepted;
    MetricsRegistry::Series leases_lost;
  };

 private:
  MetricsRegistry* const metrics_;
  // Each served method's series, found once for every call of it (a call
  // counts on each of its hook points, most calls with code OK), and those
  // of every method the server does not serve.
  std::unordered_map<std::string_view, std::unique_ptr<MethodSeries>> methods_;
  std::unique_ptr<MethodSeries> unknown_;
  Totals totals_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_METRICS_INTERCEPTOR_H_
