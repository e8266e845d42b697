// The one place where the service adapters authorize a call: it reads the
// call's `authorization` metadata and asks the Authorizer (server/core/auth.h)
// whether the caller may run `method`.
//
// Denied calls are logged with the method, the peer and the reason, which
// names at most the token's name and role; the token itself and the header
// are never logged.
//
// Thread-safety: safe to call from any gRPC callback thread.
#ifndef RANKSWEEP_SERVER_SERVICE_CALL_AUTH_H_
#define RANKSWEEP_SERVER_SERVICE_CALL_AUTH_H_

#include <string_view>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "server/core/auth.h"

namespace ranksweep::server {

// The caller of the call behind `context`, or the Authorizer's error
// (Unauthenticated, PermissionDenied, or a store error).
absl::StatusOr<Principal> AuthorizeCall(const Authorizer& authorizer,
                                        grpc::CallbackServerContext* context,
                                        std::string_view method);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_CALL_AUTH_H_
