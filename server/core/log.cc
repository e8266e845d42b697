#include "server/core/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ranksweep::server {
namespace {

std::atomic<bool> g_enabled{true};
std::mutex g_mu;

}  // namespace

void LogLine(std::string_view line) {
  if (!g_enabled.load()) return;
  std::string out = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ ", absl::Now(), absl::UTCTimeZone());
  out.append(line.data(), line.size());
  out.push_back('\n');
  std::lock_guard<std::mutex> lock(g_mu);
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

void SetLogEnabled(bool enabled) { g_enabled.store(enabled); }

}  // namespace ranksweep::server
