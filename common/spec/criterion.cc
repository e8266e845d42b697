#include "common/spec/criterion.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace ranksweep {
namespace {

// The shortest text that reads back as `v` ("0.99", not "0.98999999999999999").
std::string Shortest(double v) {
  for (int digits = 1; digits <= 17; ++digits) {
    std::string s = absl::StrFormat("%.*g", digits, v);
    double back = 0;
    if (absl::SimpleAtod(s, &back) && back == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

absl::Status Bad(absl::string_view field, absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": \"", text.substr(0, 64), "\" ", why,
      "; use all (every seed exact), mean:X (mean exact accuracy >= X, 0 < X <= 1) or "
      "seeds:K (at least K seeds exact, K >= 1)"));
}

}  // namespace

absl::StatusOr<Criterion> ParseCriterion(absl::string_view text, absl::string_view field) {
  Criterion c;
  if (text.empty() || text == "all") return c;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "mean:")) {
    double x = 0;
    if (!absl::SimpleAtod(rest, &x) || !std::isfinite(x)) {
      return Bad(field, text, "is not a number after mean:");
    }
    if (!(x > 0 && x <= 1)) return Bad(field, text, "is out of range: X must be in (0, 1]");
    c.kind = Criterion::Kind::kMean;
    c.mean = x;
    return c;
  }
  if (absl::ConsumePrefix(&rest, "seeds:")) {
    int64_t k = 0;
    if (!absl::SimpleAtoi(rest, &k)) return Bad(field, text, "is not an integer after seeds:");
    if (k < 1) return Bad(field, text, "is out of range: K must be at least 1");
    c.kind = Criterion::Kind::kSeeds;
    c.seeds = k;
    return c;
  }
  return Bad(field, text, "is not a criterion");
}

std::string CriterionText(const Criterion& c) {
  switch (c.kind) {
    case Criterion::Kind::kAll: return "all";
    case Criterion::Kind::kMean: return absl::StrCat("mean:", Shortest(c.mean));
    case Criterion::Kind::kSeeds: return absl::StrCat("seeds:", c.seeds);
  }
  return "all";
}

std::string CriterionPhrase(const Criterion& c) {
  switch (c.kind) {
    case Criterion::Kind::kAll: return "every seed exact";
    case Criterion::Kind::kMean:
      return absl::StrCat("mean exact accuracy >= ", Shortest(c.mean));
    case Criterion::Kind::kSeeds:
      return absl::StrCat("at least ", c.seeds, c.seeds == 1 ? " seed" : " seeds", " exact");
  }
  return "every seed exact";
}

}  // namespace ranksweep
