#include "server/core/analysis.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ranksweep::server {
namespace {

constexpr size_t kMaxListedSeeds = 8;

struct Transition {
  bool defined = false;
  int rank = 0;
  std::string reason;
};

// Applies the header's rule to `sorted` (ranked groups, increasing rank).
// `exact_of` gives a group's exact seed count on the split.
template <typename ExactOf>
Transition FindTransition(const std::vector<const ResultGroup*>& sorted, ExactOf exact_of) {
  Transition t;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const ResultGroup& g = *sorted[i];
    const int64_t exact = exact_of(g);
    if (g.expected > 0 && g.n == g.expected && exact == g.expected) {
      t.defined = true;
      t.rank = g.rank;
      t.reason = absl::StrCat("rank ", g.rank, " is the smallest swept rank with every seed exact (",
                              exact, "/", g.expected, ")");
      std::vector<std::string> dips;
      for (size_t j = i + 1; j < sorted.size(); ++j) {
        const ResultGroup& h = *sorted[j];
        if (exact_of(h) < h.n) {
          dips.push_back(absl::StrCat("rank ", h.rank, " has ", exact_of(h), "/", h.expected,
                                      " seeds exact"));
        }
      }
      if (!dips.empty()) {
        absl::StrAppend(&t.reason, "; not monotone: ", absl::StrJoin(dips, ", "));
      }
      return t;
    }
    if (exact < g.n) continue;  // decided: some done seed is not exact
    // With no seed done yet there is nothing to call exact.
    t.reason = absl::StrCat("undecided: rank ", g.rank, " is incomplete (", CompletenessNote(g),
                            g.n == 0 ? ") and none of its seeds is done yet"
                                     : ") and every done seed there is exact");
    return t;
  }
  t.reason = "no swept rank has every seed exact";
  return t;
}

}  // namespace

std::string MissingSeedsNote(const std::vector<uint64_t>& missing_seeds) {
  if (missing_seeds.empty()) return "";
  std::vector<std::string> listed;
  for (size_t i = 0; i < missing_seeds.size() && i < kMaxListedSeeds; ++i) {
    listed.push_back(absl::StrCat(missing_seeds[i]));
  }
  std::string out = absl::StrCat(missing_seeds.size() == 1 ? "seed " : "seeds ",
                                 absl::StrJoin(listed, ", "));
  if (missing_seeds.size() > kMaxListedSeeds) {
    absl::StrAppend(&out, " and ", missing_seeds.size() - kMaxListedSeeds, " more");
  }
  absl::StrAppend(&out, " missing");
  return out;
}

std::string CompletenessNote(const ResultGroup& group) {
  std::string out = absl::StrCat(group.n, "/", group.expected, " seeds");
  if (!group.missing_seeds.empty()) {
    absl::StrAppend(&out, "; ", MissingSeedsNote(group.missing_seeds));
  }
  return out;
}

HeadSummary SummarizeHead(const std::vector<ResultGroup>& groups, bool has_test_split) {
  HeadSummary s;
  if (groups.empty()) return s;
  s.head = groups[0].head;
  s.head_index = groups[0].head_index;
  s.has_test_split = has_test_split;
  std::vector<const ResultGroup*> sorted;
  for (const ResultGroup& g : groups) {
    if (g.rank > 0) sorted.push_back(&g);
  }
  s.has_rank = !sorted.empty();
  if (!s.has_rank) {
    // Rank-less: one group (rank 0) per head; sum in case of several.
    int64_t n = 0, expected = 0, exact = 0, test_exact = 0;
    std::vector<uint64_t> missing;
    for (const ResultGroup& g : groups) {
      n += g.n;
      expected += g.expected;
      exact += g.exact_seeds;
      test_exact += g.test_exact_seeds;
      missing.insert(missing.end(), g.missing_seeds.begin(), g.missing_seeds.end());
    }
    auto note = [&](int64_t e) {
      std::string out = absl::StrCat("no rank; exact on ", e, "/", expected, " seeds");
      if (n < expected) absl::StrAppend(&out, " (", MissingSeedsNote(missing), ")");
      return out;
    };
    s.reason = note(exact);
    if (has_test_split) s.test_reason = note(test_exact);
    return s;
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const ResultGroup* a, const ResultGroup* b) { return a->rank < b->rank; });
  Transition train = FindTransition(sorted, [](const ResultGroup& g) { return g.exact_seeds; });
  s.transition_defined = train.defined;
  s.transition_rank = train.rank;
  s.reason = std::move(train.reason);
  if (has_test_split) {
    Transition test =
        FindTransition(sorted, [](const ResultGroup& g) { return g.test_exact_seeds; });
    s.test_transition_defined = test.defined;
    s.test_transition_rank = test.rank;
    s.test_reason = std::move(test.reason);
  }
  return s;
}

std::vector<HeadSummary> SummarizeHeads(const std::vector<ResultGroup>& groups,
                                        bool has_test_split) {
  std::map<int, std::vector<ResultGroup>> by_head;
  for (const ResultGroup& g : groups) by_head[g.head_index].push_back(g);
  std::vector<HeadSummary> out;
  for (const auto& [index, head_groups] : by_head) {
    out.push_back(SummarizeHead(head_groups, has_test_split));
  }
  return out;
}

}  // namespace ranksweep::server
