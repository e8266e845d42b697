#include "server/service/metrics_interceptor.h"

#include <chrono>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

#include "google/protobuf/descriptor.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"

namespace ranksweep::server {

// What a call of one method counts into, found once (MetricsRegistry::Series).
struct MethodSeries {
  enum Which { kOther, kAcquire, kComplete, kHeartbeat };
  MethodSeries(const std::string& method, Which which)
      : label(method),
        which(which),
        ok("ranksweep_rpcs_total", {{"method", method}, {"code", "OK"}}),
        duration("ranksweep_rpc_duration_seconds", {{"method", method}}) {}
  const std::string label;
  const Which which;
  MetricsRegistry::Series ok;        // ranksweep_rpcs_total{method, code="OK"}
  MetricsRegistry::Series duration;  // ranksweep_rpc_duration_seconds{method}
};

namespace {

using grpc::experimental::InterceptionHookPoints;

constexpr char kAcquire[] = "/ranksweep.v1.WorkerService/AcquireTasks";
constexpr char kComplete[] = "/ranksweep.v1.WorkerService/CompleteTasks";
constexpr char kHeartbeat[] = "/ranksweep.v1.WorkerService/Heartbeat";

int64_t CellsIn(const google::protobuf::RepeatedPtrField<v1::Task>& tasks) {
  int64_t cells = 0;
  for (const v1::Task& t : tasks) cells += t.cells_size();
  return cells;
}

class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(MethodSeries* method, MetricsInterceptorFactory::Totals* totals,
                     MetricsRegistry* metrics)
      : method_(method),
        totals_(totals),
        metrics_(metrics),
        start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    const MethodSeries::Which which = method_->which;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        which == MethodSeries::kComplete) {
      if (const void* m = methods->GetRecvMessage(); m != nullptr) {
        results_ = static_cast<const v1::CompleteTasksRequest*>(m)->results_size();
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      // The reply, before it is serialized: only sent when the call is OK.
      const void* m = methods->GetSendMessage();
      if (m != nullptr && which == MethodSeries::kAcquire) {
        const auto* reply = static_cast<const v1::AcquireTasksResponse*>(m);
        metrics_->Add(totals_->leases_granted, CellsIn(reply->tasks()));
      } else if (m != nullptr && which == MethodSeries::kComplete) {
        const auto* reply = static_cast<const v1::CompleteTasksResponse*>(m);
        metrics_->Add(totals_->results_accepted, reply->recorded());
        metrics_->Add(totals_->leases_granted, CellsIn(reply->next_tasks()));
      } else if (m != nullptr && which == MethodSeries::kHeartbeat) {
        const auto* reply = static_cast<const v1::HeartbeatResponse*>(m);
        metrics_->Add(totals_->leases_lost, reply->lost_lease_ids_size());
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.ok()) {
        metrics_->Add(method_->ok);
      } else {
        const std::string code = StatusCodeName(status.error_code());
        metrics_->Add("ranksweep_rpcs_total", {{"method", method_->label}, {"code", code}});
        if (which == MethodSeries::kComplete && results_ > 0) {
          metrics_->Add("ranksweep_results_rejected_total", {{"reason", code}}, results_);
        }
      }
      metrics_->Observe(
          method_->duration,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
    methods->Proceed();
  }

 private:
  MethodSeries* const method_;
  MetricsInterceptorFactory::Totals* const totals_;
  MetricsRegistry* const metrics_;
  const std::chrono::steady_clock::time_point start_;
  int results_ = 0;  // CompleteTasks: results in the request
};

// Every method the server serves, by full name.
const std::set<std::string>& ServedMethods() {
  static const std::set<std::string>* methods = [] {
    auto* set = new std::set<std::string>{
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    };
    // Every service of ranksweep.proto, from its file descriptor.
    const google::protobuf::FileDescriptor* file = v1::SubmitSweepRequest::descriptor()->file();
    for (int k = 0; k < file->service_count(); ++k) {
      const google::protobuf::ServiceDescriptor* service = file->service(k);
      for (int i = 0; i < service->method_count(); ++i) {
        set->insert("/" + service->full_name() + "/" + service->method(i)->name());
      }
    }
    return set;
  }();
  return *methods;
}

}  // namespace

std::vector<std::string> ServedMethodNames() {
  return {ServedMethods().begin(), ServedMethods().end()};
}

MetricsInterceptorFactory::Totals::Totals()
    : leases_granted("ranksweep_leases_granted_total", {}),
      results_accepted("ranksweep_results_accepted_total", {}),
      leases_lost("ranksweep_leases_lost_total", {}) {}

MetricsInterceptorFactory::MetricsInterceptorFactory(MetricsRegistry* metrics)
    : metrics_(metrics) {
  // The keys view the names ServedMethods() holds for the process's life.
  for (const std::string& method : ServedMethods()) {
    const MethodSeries::Which which = method == kAcquire    ? MethodSeries::kAcquire
                                      : method == kComplete ? MethodSeries::kComplete
                                      : method == kHeartbeat ? MethodSeries::kHeartbeat
                                                             : MethodSeries::kOther;
    auto series = std::make_unique<MethodSeries>(method, which);
    metrics_->Add(series->ok, 0);
    methods_.emplace(std::string_view(method), std::move(series));
  }
  unknown_ = std::make_unique<MethodSeries>("unknown", MethodSeries::kOther);
}

MetricsInterceptorFactory::~MetricsInterceptorFactory() = default;

std::string MethodLabel(const std::string& method) {
  return ServedMethods().count(method) > 0 ? method : std::string("unknown");
}

std::string StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

grpc::experimental::Interceptor* MetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  MethodSeries* method = unknown_.get();
  if (info->method() != nullptr) {
    if (auto it = methods_.find(std::string_view(info->method())); it != methods_.end()) {
      method = it->second.get();
    }
  }
  return new MetricsInterceptor(method, &totals_, metrics_);
}

}  // namespace ranksweep::server
