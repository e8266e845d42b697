#include "server/service/call_auth.h"

#include <string>
#include <vector>

#include "server/core/log.h"

namespace ranksweep::server {

absl::StatusOr<Principal> AuthorizeCall(const Authorizer& authorizer,
                                        grpc::CallbackServerContext* context,
                                        std::string_view method) {
  if (authorizer.insecure()) return LocalPrincipal();
  std::vector<std::string_view> values;
  const auto range = context->client_metadata().equal_range("authorization");
  for (auto it = range.first; it != range.second; ++it) {
    values.emplace_back(it->second.data(), it->second.size());
  }
  absl::StatusOr<Principal> principal = authorizer.Authorize(values, method);
  if (!principal.ok()) {
    LogEvent("denied %s from %s: %s %s", method, context->peer(),
             absl::StatusCodeToString(principal.status().code()), principal.status().message());
  }
  return principal;
}

}  // namespace ranksweep::server
