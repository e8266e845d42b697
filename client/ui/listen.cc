#include "client/ui/listen.h"

#include <arpa/inet.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ranksweep::client::ui {
namespace {

// Splits "HOST:PORT" / "[V6]:PORT" into host (brackets removed) and port
// text; false when there is no ':'.
bool SplitHostPort(absl::string_view text, absl::string_view* host, absl::string_view* port) {
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return false;
    }
    *host = text.substr(1, close - 1);
    *port = text.substr(close + 2);
    return true;
  }
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) return false;
  *host = text.substr(0, colon);
  // An unbracketed IPv6 address has several colons: ambiguous.
  if (host->find(':') != absl::string_view::npos) return false;
  *port = text.substr(colon + 1);
  return true;
}

}  // namespace

bool IsLoopbackHost(absl::string_view host) {
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  const std::string h(host);
  in_addr v4;
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    return std::memcmp(&v6, &in6addr_loopback, sizeof(v6)) == 0;
  }
  return false;
}

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text, bool allow_remote) {
  absl::string_view host, port_text;
  if (!SplitHostPort(text, &host, &port_text) || host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen: \"", text, "\" is not HOST:PORT (e.g. 127.0.0.1:8080, [::1]:8080)"));
  }
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen: port \"", port_text, "\" must be in 0..65535 (0 = any free port)"));
  }
  if (!allow_remote && !IsLoopbackHost(host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen: ", host,
        " is not a loopback address (127.0.0.1, ::1, localhost); the dashboard calls the "
        "coordinator with your token, so anyone who reaches it acts as you. Pass "
        "--allow-remote to serve it to other machines anyway"));
  }
  return ListenAddress{std::string(host), port};
}

bool HostHeaderAllowed(absl::string_view host_header, int port, bool allow_remote) {
  if (allow_remote) return true;
  absl::string_view host, port_text;
  if (!SplitHostPort(host_header, &host, &port_text)) return false;
  int p = -1;
  return absl::SimpleAtoi(port_text, &p) && p == port && IsLoopbackHost(host);
}

}  // namespace ranksweep::client::ui
