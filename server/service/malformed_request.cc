#include "server/service/malformed_request.h"

#include <functional>
#include <map>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Method full name -> request type, for every method of ranksweep.proto.
const std::map<std::string, std::string, std::less<>>& RequestTypes() {
  static const auto* types = [] {
    auto* map = new std::map<std::string, std::string, std::less<>>();
    const google::protobuf::FileDescriptor* file = v1::SubmitSweepRequest::descriptor()->file();
    for (int k = 0; k < file->service_count(); ++k) {
      const google::protobuf::ServiceDescriptor* service = file->service(k);
      for (int i = 0; i < service->method_count(); ++i) {
        const google::protobuf::MethodDescriptor* m = service->method(i);
        (*map)["/" + service->full_name() + "/" + m->name()] = m->input_type()->full_name();
      }
    }
    return map;
  }();
  return *types;
}

class MalformedRequestInterceptor : public grpc::experimental::Interceptor {
 public:
  // `request_type` is an entry of RequestTypes(), which lives as long as
  // the process.
  explicit MalformedRequestInterceptor(const std::string* request_type)
      : request_type_(request_type) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      parsed_ = methods->GetRecvMessage() != nullptr;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        !parsed_) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
          status.error_message().empty()) {
        methods->ModifySendStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                               MalformedRequestMessage(*request_type_)));
      }
    }
    methods->Proceed();
  }

 private:
  const std::string* const request_type_;
  bool parsed_ = false;  // a request message was received and parsed
};

}  // namespace

const std::string* RequestTypeOf(std::string_view method) {
  auto it = RequestTypes().find(method);
  return it == RequestTypes().end() ? nullptr : &it->second;
}

std::string MalformedRequestMessage(const std::string& request_type) {
  return absl::StrCat("request: the bytes received are not a valid ", request_type,
                      " message (protobuf wire format); nothing was done");
}

grpc::experimental::Interceptor* MalformedRequestInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  const std::string* type = info->method() != nullptr ? RequestTypeOf(info->method()) : nullptr;
  // Other methods (health, reflection, unknown names) are left alone.
  return type != nullptr ? new MalformedRequestInterceptor(type) : nullptr;
}

}  // namespace ranksweep::server
