#include "server/core/ids.h"

#include <cstdint>
#include <mutex>
#include <random>

#include "absl/strings/str_format.h"

namespace ranksweep::server {

std::string RandomId(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 gen{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  return absl::StrFormat("%s%08x", prefix, static_cast<uint32_t>(gen()));
}

}  // namespace ranksweep::server
