#include "common/witness_code.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace ranksweep {

uint64_t NextSamePopcount(uint64_t v, uint64_t mask) {
  const uint64_t c = v & (~v + 1);
  const uint64_t r = v + c;
  if (r == 0) return 0;  // overflow past bit 63
  const uint64_t next = (((r ^ v) >> 2) / c) | r;
  return (next & ~mask) ? 0 : next;
}

namespace {

// One greedy search, resumable: the words found so far, the step count at
// which each was found, and where the scan stands. The words ever found do
// not depend on the limits asked for, so a search's answers do not depend on
// what was asked before.
struct CodeSearch {
  std::vector<uint64_t> words;
  std::vector<uint64_t> found_at;  // steps taken when words[i] was kept
  uint64_t next = 0;               // the next word to scan; 0 when done
  uint64_t steps = 0;
  bool out_of_steps = false;
};

}  // namespace

absl::StatusOr<std::vector<uint64_t>> GreedyConstantWeightCode(int m, int weight,
                                                               int max_overlap, int limit,
                                                               uint64_t* steps_left) {
  if (m < 1 || m > 64 || weight < 1 || weight > m) {
    return absl::InvalidArgumentError(absl::StrCat("dataset.code_weight must be in 1..", m,
                                                   ", got ", weight));
  }
  // The search takes a step per word scanned and per overlap check; bound it
  // so that no spec, however hostile, holds a thread for long. The full scan
  // alone visits C(m, w) words.
  constexpr uint64_t kMaxSteps = SpecLimits::kMaxWitnessCodeSteps;
  if (limit <= 0 && Binomial(m, weight, kMaxSteps + 1) > kMaxSteps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.num_queries must be > 0 when C(m, code_weight) > ", kMaxSteps,
        " (the full greedy code would take too long), got 0"));
  }
  static std::mutex mu;
  // Bounded: a stream of distinct specs must not grow it without end.
  static std::map<std::tuple<int, int, int>, CodeSearch> searches;
  constexpr size_t kMaxSearches = 64;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(m, weight, max_overlap);
  auto it = searches.find(key);
  if (it == searches.end()) {
    if (searches.size() >= kMaxSearches) searches.clear();
    it = searches.emplace(key, CodeSearch()).first;
    it->second.next = LowMask(weight);
  }
  CodeSearch& s = it->second;
  const uint64_t mask = LowMask(m);
  const auto enough = [&] { return limit > 0 && static_cast<int>(s.words.size()) >= limit; };
  while (s.next != 0 && !s.out_of_steps && !enough()) {
    const uint64_t v = s.next;
    uint64_t steps = s.steps + 1;
    bool ok = true;
    for (uint64_t c : s.words) {
      ++steps;
      if (__builtin_popcountll(c & v) > max_overlap) {
        ok = false;
        break;
      }
    }
    if (steps > kMaxSteps) {
      s.out_of_steps = true;
      break;
    }
    s.steps = steps;
    s.next = NextSamePopcount(v, mask);
    if (ok) {
      s.words.push_back(v);
      s.found_at.push_back(steps);
    }
  }
  if (limit > 0 ? !enough() && s.next != 0 : s.next != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.num_queries must be in 2..", s.words.size(),
        " (the words the greedy code for m=", m, ", code_weight=", weight,
        ", max_overlap=", max_overlap, " finds within ", kMaxSteps, " steps), got ", limit));
  }
  const size_t n = enough() ? static_cast<size_t>(limit) : s.words.size();
  const uint64_t cost = enough() ? s.found_at[n - 1] : s.steps;
  if (steps_left != nullptr) {
    if (cost > *steps_left) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset.num_queries: the greedy codes of one sweep may take ", kMaxSteps,
          " steps together; this one (m=", m, ", code_weight=", weight, ", max_overlap=",
          max_overlap, ", num_queries=", limit, ") takes ", cost, " with ", *steps_left,
          " left: use fewer queries or fewer values of m"));
    }
    *steps_left -= cost;
  }
  return std::vector<uint64_t>(s.words.begin(), s.words.begin() + n);
}

absl::StatusOr<std::vector<uint64_t>> WitnessQueries(const DatasetSpec& spec,
                                                     uint64_t* steps_left) {
  if (spec.seq_len != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.seq_len must be in 3..3 for witness, got ", spec.seq_len));
  }
  if (spec.code_weight < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.code_weight must be in 2..", spec.m, " for witness, got ", spec.code_weight));
  }
  if (spec.max_overlap < 0 || spec.max_overlap > spec.code_weight - 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.max_overlap must be in 0..", spec.code_weight - 2,
        " (code_weight - 2, so every gap is >= 2), got ", spec.max_overlap));
  }
  if (spec.num_queries < 0 || spec.num_queries == 1 ||
      spec.num_queries > SpecLimits::kMaxWitnessQueries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.num_queries must be 0 (all) or in 2..", SpecLimits::kMaxWitnessQueries,
        " (family size n(2n-1) <= ", SpecLimits::kMaxDatasetSequences, "), got ",
        spec.num_queries));
  }
  auto code_or = GreedyConstantWeightCode(spec.m, spec.code_weight, spec.max_overlap,
                                          spec.num_queries, steps_left);
  if (!code_or.ok()) return code_or.status();
  const std::vector<uint64_t>& code = *code_or;
  if (spec.num_queries > 0 && static_cast<int>(code.size()) < spec.num_queries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.num_queries must be in 0..", code.size(), " (the size of the code for m=",
        spec.m, ", code_weight=", spec.code_weight, ", max_overlap=", spec.max_overlap,
        "), got ", spec.num_queries));
  }
  const int n = static_cast<int>(code.size());
  if (n < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.code_weight/max_overlap give a code of ", n,
        " word(s); a witness family needs >= 2"));
  }
  const int64_t size = static_cast<int64_t>(n) * (2 * n - 1);
  if (size > SpecLimits::kMaxDatasetSequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.num_queries must be in 2..", SpecLimits::kMaxWitnessQueries, " (family size n(2n-1) <= ",
        SpecLimits::kMaxDatasetSequences, "), got n=", n));
  }
  return code;
}

}  // namespace ranksweep
