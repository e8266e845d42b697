// Where `ranksweep ui` listens and who may talk to it. The dashboard calls
// the coordinator with the user's token, so whoever reaches its port acts as
// the user: it listens on loopback unless the user says otherwise, and it
// answers only requests whose Host header names it (a page from another
// site that resolves its own name to 127.0.0.1, "DNS rebinding", is turned
// away).
//
// Errors: InvalidArgument naming --listen and what is allowed.
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_CLIENT_UI_LISTEN_H_
#define RANKSWEEP_CLIENT_UI_LISTEN_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace ranksweep::client::ui {

struct ListenAddress {
  std::string host;  // as given, without IPv6 brackets: "127.0.0.1", "::1", "localhost"
  int port = 0;      // 0: any free port
};

// True for "localhost", IPv4 127.0.0.0/8 and IPv6 ::1 (written in any of its
// forms). Host names other than "localhost" are not resolved: they are not
// loopback.
bool IsLoopbackHost(absl::string_view host);

// Parses "HOST:PORT" or "[V6]:PORT"; PORT is 0..65535 (0 = any free port).
// A host that is not loopback is an error unless `allow_remote`.
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text, bool allow_remote);

// Whether a request with this Host header may be served by a dashboard
// bound to `port`: a loopback host (with or without brackets) and exactly
// that port. With `allow_remote` any Host is accepted (the user chose to
// serve other machines, whose names this process cannot know).
bool HostHeaderAllowed(absl::string_view host_header, int port, bool allow_remote);

}  // namespace ranksweep::client::ui

#endif  // RANKSWEEP_CLIENT_UI_LISTEN_H_
