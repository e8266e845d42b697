// Hints for what a user mistyped: the closest of the words a place accepts
// ("did you mean"), and an address without a port. Pure functions; no gRPC,
// no I/O.
//
// Errors: CheckAddressHasPort returns InvalidArgument naming the flag.
// Thread-safety: free functions without shared state.
#ifndef RANKSWEEP_CLIENT_HINTS_H_
#define RANKSWEEP_CLIENT_HINTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/did_you_mean.h"

namespace ranksweep::client {

// EditDistance, ClosestMatch, DidYouMeanSuffix: common/did_you_mean.h.
using ::ranksweep::ClosestMatch;
using ::ranksweep::DidYouMeanSuffix;
using ::ranksweep::EditDistance;

// An enum error in the words every spec check uses ("FIELD must be one of
// A, B, C; got \"X\"", common/spec) with "; did you mean \"A\"?" appended
// when X is a slip of one of them; any other message as it is.
std::string WithEnumSuggestion(const std::string& message);

// An address gRPC would take as HOST:PORT but that has no port ("localhost",
// "10.0.0.5", "[::1]", "host:") fails at the first call with a resolver
// error that does not say why; this says so up front, naming `flag` and
// suggesting `default_port`. Addresses with a scheme ("unix:", "dns:///",
// "ipv4:") are left to gRPC.
absl::Status CheckAddressHasPort(const std::string& address, const std::string& flag,
                                 int default_port = 50051);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_HINTS_H_
