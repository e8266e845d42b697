// A seed's learning curve: what the trainer measured at each evaluation
// (every eval_every steps, and the last step), kept beside the result's
// final metrics. The trainer fills it, the worker sends it
// (v1::SeedResult.curve), the coordinator checks it (CheckCurve) and stores
// it as one blob per result (EncodeCurve: the `curve` column of `results`), and
// `ranksweep results --curves` / `plot --curves`, the dashboard and the
// Python client read it back.
//
// Thread-safety: plain data and pure functions.
#ifndef RANKSWEEP_COMMON_SPEC_CURVE_H_
#define RANKSWEEP_COMMON_SPEC_CURVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ranksweep {

// One evaluation. Errors are 1 - exact accuracy of the split (the share of
// sequences with some scored position wrong); position accuracy is the
// share of scored positions right; loss is the training loss over the whole
// train split with the parameters of that step.
struct CurvePoint {
  int64_t step = 0;  // steps taken before the evaluation, 1..steps
  float loss = 0;
  float train_error = 1;
  float train_position_accuracy = 0;
  float test_error = 1;               // only when the curve has_test
  float test_position_accuracy = 0;   // only when the curve has_test
  bool operator==(const CurvePoint& o) const {
    return step == o.step && loss == o.loss && train_error == o.train_error &&
           train_position_accuracy == o.train_position_accuracy &&
           test_error == o.test_error && test_position_accuracy == o.test_position_accuracy;
  }
};

struct Curve {
  bool has_test = false;  // the dataset has a test split, measured at each point
  std::vector<CurvePoint> points;  // ascending steps; empty: no evaluation ran
  bool operator==(const Curve& o) const {
    return has_test == o.has_test && points == o.points;
  }
};

struct CurveLimits {
  // A curve holds at most this many points: more than the longest training
  // evaluates at its finest (docs/LIMITS.md).
  static constexpr int64_t kMaxPoints = 20000;
};

// OK when `curve` is one the trainer could have measured for a result of
// `steps` steps (with a test split iff `has_test_split`): at most
// kMaxPoints points, at most ceil(steps / eval_every) + 1 of them, steps
// strictly ascending in 1..steps, every value finite, errors and accuracies
// in [0, 1], loss >= 0, has_test equal to has_test_split (an empty curve
// may say either). Otherwise InvalidArgument naming the field
// ("result.curve.points[3].step must be above 100 (the point before), got 50").
absl::Status CheckCurve(const Curve& curve, int64_t steps, int eval_every, bool has_test_split);

// A compact byte string (format 1: a version byte, a flags byte, the point
// count and each point's step delta as varints, then the point's floats as
// little-endian IEEE-754 binary32): about 13 bytes per point without a test
// split, 21 with one. DecodeCurve reads it back exactly; it refuses bytes
// that are not such a string (DataLoss naming what is wrong).
std::string EncodeCurve(const Curve& curve);
absl::StatusOr<Curve> DecodeCurve(absl::string_view bytes);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_CURVE_H_
