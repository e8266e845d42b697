// Malformed request bytes answered as INVALID_ARGUMENT with a message.
//
// gRPC C++ (1.51, the callback API this server uses) parses a request before
// any code of ours runs, and when the bytes are not a valid message of the
// method's request type it finishes the call itself with UNIMPLEMENTED and
// an empty message (CallbackUnaryHandler and CallbackServerStreamingHandler
// in grpcpp/impl/codegen/server_callback_handlers.h: a failed Deserialize
// leaves no request, and RunHandler then installs an "unimplemented"
// reactor). No hook of a registered method sees the failure: the handler,
// its allocator and the status are the library's. What does see the call is
// a server interceptor: this one replaces that status, on its way out
// (PRE_SEND_STATUS, ModifySendStatus), with INVALID_ARGUMENT naming the
// request type, for a method of ranksweep.v1 whose request was never
// parsed (POST_RECV_MESSAGE saw no message) and whose status is UNIMPLEMENTED
// with no message: the one combination the library makes and no handler of
// ours does. Unknown methods keep UNIMPLEMENTED.
//
// It must come first among the server's interceptors, so that the others
// (the metrics' count by status code) see the status the caller gets.
//
// Thread-safety: the factory is shared by every call; each interceptor
// belongs to one call.
#ifndef RANKSWEEP_SERVER_SERVICE_MALFORMED_REQUEST_H_
#define RANKSWEEP_SERVER_SERVICE_MALFORMED_REQUEST_H_

#include <string>
#include <string_view>

#include "grpcpp/support/server_interceptor.h"

namespace ranksweep::server {

// The full name of the request type of a ranksweep.v1 method
// ("/ranksweep.v1.SweepService/GetSweep" -> "ranksweep.v1.GetSweepRequest"),
// kept for the life of the process; null for any other method. Found
// without a copy of the name: the factory looks one up for every call.
const std::string* RequestTypeOf(std::string_view method);

// The message a malformed request of `request_type` gets.
std::string MalformedRequestMessage(const std::string& request_type);

class MalformedRequestInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_MALFORMED_REQUEST_H_
