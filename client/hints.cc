#include "client/hints.h"

#include <algorithm>
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ranksweep::client {

std::string WithEnumSuggestion(const std::string& message) {
  static const std::regex kEnumError("must be one of ([^;]+); got \"([^\"]*)\"$");
  std::smatch m;
  if (!std::regex_search(message, m, kEnumError)) return message;
  const std::vector<std::string> choices = absl::StrSplit(m[1].str(), ", ");
  return message + DidYouMeanSuffix(m[2].str(), choices);
}

absl::Status CheckAddressHasPort(const std::string& address, const std::string& flag,
                                 int default_port) {
  for (const char* scheme : {"unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:", "vsock:"}) {
    if (absl::StartsWith(address, scheme)) return absl::OkStatus();
  }
  std::string host = address;
  std::string port;
  if (absl::StartsWith(address, "[")) {  // [V6] or [V6]:PORT
    const size_t close = address.find(']');
    if (close != std::string::npos) {
      host = address.substr(0, close + 1);
      if (close + 1 < address.size() && address[close + 1] == ':') {
        port = address.substr(close + 2);
      }
    }
  } else if (const size_t colon = address.rfind(':'); colon != std::string::npos) {
    if (address.find(':') != colon) {
      // Several colons without brackets: a bare IPv6 address, no port.
      host = absl::StrCat("[", address, "]");
    } else {
      host = address.substr(0, colon);
      port = address.substr(colon + 1);
    }
  }
  int number = 0;
  if (!port.empty() && absl::SimpleAtoi(port, &number) && number >= 0 && number <= 65535) {
    return absl::OkStatus();
  }
  if (host.empty()) host = "127.0.0.1";
  if (!port.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", address, "\" has port \"", port,
                                                   "\", which is not a number in 0..65535"));
  }
  return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", address,
                                                 "\" has no port; use HOST:PORT, e.g. ", host,
                                                 ":", default_port));
}

}  // namespace ranksweep::client
