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

absl::StatusOr<std::vector<uint64_t>> GreedyConstantWeightCode(int m, int weight,
                                                               int max_overlap, int limit) {
  if (m < 1 || m > 64 || weight < 1 || weight > m) {
    return absl::InvalidArgumentError(absl::StrCat("dataset.code_weight must be in 1..", m,
                                                   ", got ", weight));
  }
  // The full scan visits C(m, w) words; bound it unless a limit stops it early.
  constexpr uint64_t kMaxScan = 50000000;
  if (limit <= 0 && Binomial(m, weight, kMaxScan + 1) > kMaxScan) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.num_queries must be > 0 when C(m, code_weight) > ", kMaxScan,
        " (the full greedy code would take too long), got 0"));
  }
  static std::mutex mu;
  static std::map<std::tuple<int, int, int, int>, std::vector<uint64_t>> cache;
  const auto key = std::make_tuple(m, weight, max_overlap, limit);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const uint64_t mask = LowMask(m);
  std::vector<uint64_t> code;
  uint64_t scanned = 0;
  for (uint64_t v = LowMask(weight); v != 0; v = NextSamePopcount(v, mask)) {
    if (++scanned > kMaxScan) break;
    bool ok = true;
    for (uint64_t c : code) {
      if (__builtin_popcountll(c & v) > max_overlap) {
        ok = false;
        break;
      }
    }
    if (ok) {
      code.push_back(v);
      if (limit > 0 && static_cast<int>(code.size()) >= limit) break;
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  cache[key] = code;
  return code;
}

absl::StatusOr<std::vector<uint64_t>> WitnessQueries(const DatasetSpec& spec) {
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
  if (spec.num_queries < 0 || spec.num_queries == 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.num_queries must be 0 (all) or >= 2, got ", spec.num_queries));
  }
  auto code_or = GreedyConstantWeightCode(spec.m, spec.code_weight, spec.max_overlap,
                                          spec.num_queries);
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
        "dataset.num_queries must be in 2..", 2236, " (family size n(2n-1) <= ",
        SpecLimits::kMaxDatasetSequences, "), got n=", n));
  }
  return code;
}

}  // namespace ranksweep
