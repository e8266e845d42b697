// The exit codes of every binary (ranksweep, ranksweepd, ranksweep-worker,
// ranksweep-train): one table, so that a script reads the same mistake the
// same way whichever binary made it. README.md prints it; cli_face_test
// checks each code through real processes.
//
//   0  ok
//   1  usage error or invalid argument: an unknown flag or subcommand, a
//      value out of range, an invalid spec (the message names the field and
//      its allowed range)
//   2  the coordinator is unreachable or timed out
//   3  not found (no such sweep or worker)
//   4  `watch`: the sweep ended FAILED or CANCELLED
//   5  any other error (a server error, a database that cannot be opened, a
//      training that failed)
//
// Header-only; no state.
#ifndef RANKSWEEP_COMMON_EXIT_CODES_H_
#define RANKSWEEP_COMMON_EXIT_CODES_H_

#include "absl/status/status.h"

namespace ranksweep {

enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,
  kExitUnreachable = 2,
  kExitNotFound = 3,
  kExitSweepFailed = 4,
  kExitFailure = 5,
};

// The exit code for a failed operation with this status code (absl's and
// gRPC's numbering is the same, so a grpc::StatusCode cast to int reads too).
inline int ExitCodeForStatusCode(int code) {
  switch (static_cast<absl::StatusCode>(code)) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return kExitUsage;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnreachable;
    case absl::StatusCode::kNotFound:
      return kExitNotFound;
    default:
      return kExitFailure;
  }
}

inline int ExitCodeFor(const absl::Status& status) {
  return ExitCodeForStatusCode(static_cast<int>(status.code()));
}

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_EXIT_CODES_H_
