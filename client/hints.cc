#include "client/hints.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ranksweep::client {

int EditDistance(const std::string& a, const std::string& b) {
  // Optimal string alignment distance: Levenshtein plus adjacent swaps
  // ("sumbit" is one slip from "submit").
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string ClosestMatch(const std::string& word, const std::vector<std::string>& choices) {
  const std::string lower = absl::AsciiStrToLower(word);
  const int allowed = lower.size() <= 4 ? 1 : lower.size() <= 8 ? 2 : 3;
  std::string best;
  int best_distance = allowed + 1;
  for (const std::string& c : choices) {
    const int d = EditDistance(lower, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::string DidYouMeanSuffix(const std::string& word, const std::vector<std::string>& choices) {
  const std::string match = ClosestMatch(word, choices);
  return match.empty() ? "" : absl::StrCat("; did you mean \"", match, "\"?");
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
