// A tiny event log for ranksweepd: one line per event on stderr, prefixed
// with the UTC time. Debian's Abseil 20220623 has no absl/log, and the
// coordinator logs only a handful of event kinds (sweeps, workers, leases),
// so this is all it needs.
//
// Thread-safety: LogEvent may be called from any thread; lines never
// interleave.
#ifndef RANKSWEEP_SERVER_CORE_LOG_H_
#define RANKSWEEP_SERVER_CORE_LOG_H_

#include <string_view>

#include "absl/strings/str_format.h"

namespace ranksweep::server {

// Writes `line` (no trailing newline needed) to the current sink.
void LogLine(std::string_view line);

// Silences (false) or restores (true) the log; tests silence it.
void SetLogEnabled(bool enabled);

template <typename... Args>
void LogEvent(const absl::FormatSpec<Args...>& format, const Args&... args) {
  LogLine(absl::StrFormat(format, args...));
}

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_LOG_H_
