// Checks of a ranksweep.v1 spec that only its wire form can fail, run before
// it is translated (convert.h) and validated as a spec (ValidateSweepSpec).
//
// An enum field may carry any number on the wire, and a number the protocol
// does not define would otherwise reach the spec shifted by convert.h's
// offset (head kind 5 became the spec's value 4 and was reported as such).
// train.early_stop_evals has a wire-only meaning for -1 (never stop early)
// that a lower number must not share.
//
// Thread-safety: pure functions of their arguments.
#ifndef RANKSWEEP_PROTO_WIRE_CHECK_H_
#define RANKSWEEP_PROTO_WIRE_CHECK_H_

#include <cstddef>

#include "absl/status/status.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep {

// InvalidArgument naming the field and the number sent ("heads[0]:
// head.kind must be one of kernel, softmax, signed_kernel, multihead_kernel;
// got value 5") for an enum number the protocol does not define, or
// "train.early_stop_evals" below -1. Field names are ValidateSweepSpec's.
absl::Status CheckWireSweepSpec(const v1::SweepSpec& p);
// The same for a task (the dataset, the head, the training settings).
absl::Status CheckWireTaskSpec(const v1::TaskSpec& p);
struct WireLimits {
  // SeedResult.metrics: entries, and the bytes of a name. A worker newer
  // than the coordinator may send metrics it does not know (ignored).
  static constexpr int kMaxResultMetrics = 64;
  static constexpr size_t kMaxMetricNameLength = 64;
};

// A result's learning curve as lists: every list as long as curve.steps
// (the test lists empty without has_test), else InvalidArgument
// "result.curve.loss must have as many elements as result.curve.steps (3),
// got 2"; its `metrics` map within WireLimits ("result.metrics must have at
// most 64 entries, got 65").
absl::Status CheckWireSeedResult(const v1::SeedResult& p);

}  // namespace ranksweep

#endif  // RANKSWEEP_PROTO_WIRE_CHECK_H_
