#include "common/spec/curve.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ranksweep {
namespace {

constexpr unsigned char kFormat = 1;
constexpr unsigned char kHasTest = 1;

absl::Status Bad(int64_t i, absl::string_view field, absl::string_view rule, double got) {
  return absl::InvalidArgumentError(absl::StrCat("result.curve.points[", i, "].", field,
                                                 " must be ", rule, ", got ", got));
}

absl::Status CheckShare(int64_t i, absl::string_view field, float v) {
  if (!std::isfinite(v) || v < 0 || v > 1) return Bad(i, field, "in [0, 1]", v);
  return absl::OkStatus();
}

// Writes v at `at` (room for 10 bytes) and returns the byte after it.
char* PutVarint(uint64_t v, char* at) {
  while (v >= 0x80) {
    *at++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *at++ = static_cast<char>(v);
  return at;
}

bool GetVarint(absl::string_view* in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in->empty()) return false;
    const auto byte = static_cast<unsigned char>(in->front());
    in->remove_prefix(1);
    *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// Writes f's four bytes, least significant first, at `at`.
char* PutFloat(float f, char* at) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  for (int k = 0; k < 4; ++k) at[k] = static_cast<char>((bits >> (8 * k)) & 0xff);
  return at + 4;
}

bool GetFloat(absl::string_view* in, float* f) {
  if (in->size() < 4) return false;
  uint32_t bits = 0;
  for (int k = 0; k < 4; ++k) {
    bits |= static_cast<uint32_t>(static_cast<unsigned char>((*in)[k])) << (8 * k);
  }
  in->remove_prefix(4);
  std::memcpy(f, &bits, sizeof bits);
  return true;
}

}  // namespace

absl::Status CheckCurve(const Curve& curve, int64_t steps, int eval_every, bool has_test_split) {
  const int64_t n = static_cast<int64_t>(curve.points.size());
  if (n == 0) return absl::OkStatus();
  const int64_t most =
      std::min<int64_t>(CurveLimits::kMaxPoints, steps / std::max(eval_every, 1) + 1);
  if (n > most) {
    return absl::InvalidArgumentError(absl::StrCat(
        "result.curve must have at most ", most, " points (one per evaluation of ", steps,
        " steps at eval_every ", eval_every, ", at most ", CurveLimits::kMaxPoints, "), got ", n));
  }
  if (curve.has_test != has_test_split) {
    return absl::InvalidArgumentError(
        absl::StrCat("result.curve.has_test must be ", has_test_split ? "true" : "false",
                     has_test_split ? " (the dataset has a test split)"
                                    : " (the dataset has no test split)"));
  }
  int64_t before = 0;
  for (int64_t i = 0; i < n; ++i) {
    const CurvePoint& p = curve.points[i];
    if (p.step <= before) {
      return Bad(i, "step",
                 i == 0 ? std::string("at least 1")
                        : absl::StrCat("above ", before, " (the point before)"),
                 static_cast<double>(p.step));
    }
    if (p.step > steps) {
      return Bad(i, "step", absl::StrCat("at most steps (", steps, ")"),
                 static_cast<double>(p.step));
    }
    before = p.step;
    if (!std::isfinite(p.loss) || p.loss < 0) return Bad(i, "loss", "finite and >= 0", p.loss);
    absl::Status s = CheckShare(i, "train_error", p.train_error);
    if (s.ok()) s = CheckShare(i, "train_position_accuracy", p.train_position_accuracy);
    if (s.ok() && curve.has_test) s = CheckShare(i, "test_error", p.test_error);
    if (s.ok() && curve.has_test) {
      s = CheckShare(i, "test_position_accuracy", p.test_position_accuracy);
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string EncodeCurve(const Curve& curve) {
  // Written into a buffer sized for the longest encoding (a varint is at
  // most 10 bytes) and cut to what was written: one allocation, no
  // per-byte growth check, on the path of every completed result.
  const size_t floats = curve.has_test ? 5 : 3;
  std::string out(2 + 10 + curve.points.size() * (10 + 4 * floats), '\0');
  char* at = out.data();
  *at++ = static_cast<char>(kFormat);
  *at++ = static_cast<char>(curve.has_test ? kHasTest : 0);
  at = PutVarint(curve.points.size(), at);
  int64_t before = 0;
  for (const CurvePoint& p : curve.points) {
    // Steps ascend (CheckCurve), so the delta is small and positive.
    at = PutVarint(static_cast<uint64_t>(p.step - before), at);
    before = p.step;
    at = PutFloat(p.loss, at);
    at = PutFloat(p.train_error, at);
    at = PutFloat(p.train_position_accuracy, at);
    if (curve.has_test) {
      at = PutFloat(p.test_error, at);
      at = PutFloat(p.test_position_accuracy, at);
    }
  }
  out.resize(static_cast<size_t>(at - out.data()));
  return out;
}

absl::StatusOr<Curve> DecodeCurve(absl::string_view bytes) {
  auto lost = [](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("stored curve: ", what));
  };
  if (bytes.size() < 2) return lost("shorter than its header");
  if (static_cast<unsigned char>(bytes[0]) != kFormat) {
    return lost(absl::StrCat("unknown format ", static_cast<int>(bytes[0])));
  }
  const auto flags = static_cast<unsigned char>(bytes[1]);
  if ((flags & ~kHasTest) != 0) return lost(absl::StrCat("unknown flags ", flags));
  bytes.remove_prefix(2);
  Curve curve;
  curve.has_test = (flags & kHasTest) != 0;
  uint64_t count = 0;
  if (!GetVarint(&bytes, &count)) return lost("no point count");
  if (count > static_cast<uint64_t>(CurveLimits::kMaxPoints)) {
    return lost(absl::StrCat(count, " points, more than ", CurveLimits::kMaxPoints));
  }
  curve.points.resize(count);
  int64_t step = 0;
  for (CurvePoint& p : curve.points) {
    uint64_t delta = 0;
    if (!GetVarint(&bytes, &delta)) return lost("cut short");
    step += static_cast<int64_t>(delta);
    p.step = step;
    bool ok = GetFloat(&bytes, &p.loss) && GetFloat(&bytes, &p.train_error) &&
              GetFloat(&bytes, &p.train_position_accuracy);
    if (ok && curve.has_test) {
      ok = GetFloat(&bytes, &p.test_error) && GetFloat(&bytes, &p.test_position_accuracy);
    }
    if (!ok) return lost("cut short");
  }
  if (!bytes.empty()) return lost(absl::StrCat(bytes.size(), " bytes after the last point"));
  return curve;
}

}  // namespace ranksweep
