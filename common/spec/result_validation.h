// What a stored result may hold, checked where results cross a boundary: the
// coordinator checks every result a worker sends (CompleteTasks) and every
// cached row before serving it, and the worker checks its trainer's results
// before sending them. One function, so both sides hold results to the same
// rules; docs/LIMITS.md lists them (the "Every range check" table, which
// limits_doc_test.cc probes against these functions).
//
// Also the length limits on the free-text fields of worker requests and the
// clipping of untrusted text before it is echoed in an error or a log line.
//
// Thread-safety: pure functions of their arguments.
#ifndef RANKSWEEP_COMMON_SPEC_RESULT_VALIDATION_H_
#define RANKSWEEP_COMMON_SPEC_RESULT_VALIDATION_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/spec/spec.h"

namespace ranksweep {

struct ResultLimits {
  // SeedResult.device, RegisterWorker's hostname, device, device_name and
  // the version manifest's build_id, torch_version and cuda_version.
  static constexpr size_t kMaxLabelLength = 256;
  // FailTask.reason; the worker cuts its own reasons to this before sending.
  static constexpr size_t kMaxReasonLength = 4096;
  // How far `error` may lie from 1 - exact_accuracy, and position accuracy
  // below exact accuracy: both are shares of the same counts, so only
  // rounding separates them.
  static constexpr double kTolerance = 1e-9;
  // Untrusted text quoted in an error message or a log line is cut to this
  // many bytes (Clip).
  static constexpr size_t kMaxEchoLength = 200;
};

// OK when `r` is a result a trainer could have produced for a task with
// `max_steps`: every built-in metric in its range (kBuiltInMetrics in
// result_metrics.h, checked in table order: every real finite, accuracies
// and errors in [0, 1], the other reals >= 0, at least one train sequence,
// steps in 0..max_steps);
// then in a split with sequences, error within kTolerance of
// 1 - exact_accuracy and position accuracy >= exact accuracy (less
// kTolerance); the dataset facts >= 0; device at most kMaxLabelLength
// bytes; the optional metrics missing or in their range. Otherwise
// InvalidArgument naming the first bad field ("result.train.exact_accuracy
// must be in [0, 1], got nan").
absl::Status ValidateSeedResult(const SeedResult& r, int max_steps);

// InvalidArgument "FIELD must be at most MAX bytes, got N" when `value` is
// longer than `max_bytes`.
absl::Status CheckTextLength(absl::string_view field, absl::string_view value, size_t max_bytes);

// `text` when at most `max_bytes` long, else its first `max_bytes` bytes
// (never splitting a UTF-8 sequence) and "... (N bytes)".
std::string Clip(absl::string_view text, size_t max_bytes = ResultLimits::kMaxEchoLength);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_RESULT_VALIDATION_H_
