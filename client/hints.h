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

namespace ranksweep::client {

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
int EditDistance(const std::string& a, const std::string& b);

// The choice closest to `word` when it is close enough to be a slip: at most
// one edit for words up to 4 letters, two up to 8, three beyond (ties: the
// first in `choices`). Empty when none is.
std::string ClosestMatch(const std::string& word, const std::vector<std::string>& choices);

// "; did you mean \"submit\"?" for ClosestMatch, "" when there is none: to
// append to an error message.
std::string DidYouMeanSuffix(const std::string& word, const std::vector<std::string>& choices);

// An address gRPC would take as HOST:PORT but that has no port ("localhost",
// "10.0.0.5", "[::1]", "host:") fails at the first call with a resolver
// error that does not say why; this says so up front, naming `flag` and
// suggesting `default_port`. Addresses with a scheme ("unix:", "dns:///",
// "ipv4:") are left to gRPC.
absl::Status CheckAddressHasPort(const std::string& address, const std::string& flag,
                                 int default_port = 50051);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_HINTS_H_
