#include "common/did_you_mean.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ranksweep {

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

}  // namespace ranksweep
