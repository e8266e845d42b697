#include "server/core/results/analysis.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/spec/head_kinds.h"

namespace ranksweep::server {
namespace {

constexpr size_t kMaxListedSeeds = 8;
// The mean criterion's tolerance (see the header).
constexpr double kMeanTolerance = 1e-9;

// One group's standing on one split.
struct SplitCounts {
  int64_t n = 0, expected = 0, exact = 0;
  int64_t pruned = 0;  // cells stopped by recipe pruning
  double accuracy_sum = 0;  // exact accuracy summed over the n done seeds
};

SplitCounts CountsOf(const ResultGroup& g, bool test) {
  SplitCounts c;
  c.n = g.n;
  c.expected = g.expected;
  c.pruned = g.pruned;
  c.exact = test ? g.test_exact_seeds : g.exact_seeds;
  constexpr int kTestError = GroupedBuiltInIndex("test_error");
  constexpr int kTrainExact = GroupedBuiltInIndex("train_exact_accuracy");
  const double mean_accuracy =
      test ? 1.0 - g.built_ins[kTestError].mean : g.built_ins[kTrainExact].mean;
  c.accuracy_sum = g.n > 0 ? mean_accuracy * static_cast<double>(g.n) : 0.0;
  return c;
}

Verdict Judge(const SplitCounts& c, const Criterion& criterion) {
  const int64_t missing = c.expected - c.n;
  // Pruning stopped this recipe as clearly losing: it counts as not
  // meeting the criterion, whatever its done seeds show (the header).
  if (c.pruned > 0) return Verdict::kNotMet;
  switch (criterion.kind) {
    case Criterion::Kind::kAll:
      if (c.expected > 0 && c.exact == c.expected) return Verdict::kMeets;
      return c.exact < c.n ? Verdict::kNotMet : Verdict::kUndecided;
    case Criterion::Kind::kSeeds:
      if (c.exact >= criterion.seeds) return Verdict::kMeets;
      return c.exact + missing < criterion.seeds ? Verdict::kNotMet : Verdict::kUndecided;
    case Criterion::Kind::kMean: {
      if (c.expected <= 0) return Verdict::kUndecided;
      const double e = static_cast<double>(c.expected);
      if (c.accuracy_sum / e >= criterion.mean - kMeanTolerance) return Verdict::kMeets;
      if ((c.accuracy_sum + static_cast<double>(missing)) / e < criterion.mean - kMeanTolerance) {
        return Verdict::kNotMet;
      }
      return Verdict::kUndecided;
    }
  }
  return Verdict::kUndecided;
}

// "(5/5)" for all and seeds:K; "(mean 0.996 over 5/5 seeds)", or "(at least
// 0.800 with 4/5 seeds done)" when incomplete, for mean:X.
std::string MeetsDetail(const SplitCounts& c, const Criterion& criterion) {
  if (criterion.kind != Criterion::Kind::kMean) {
    return absl::StrCat("(", c.exact, "/", c.expected, ")");
  }
  const double lower = c.accuracy_sum / static_cast<double>(c.expected);
  if (c.n == c.expected) {
    return absl::StrFormat("(mean %.3f over %d/%d seeds)", lower, c.n, c.expected);
  }
  return absl::StrFormat("(at least %.3f with %d/%d seeds done)", lower, c.n, c.expected);
}

// A rank not met, as the not-monotone note lists it (one recipe).
std::string NotMetNote(int rank, const SplitCounts& c, const Criterion& criterion) {
  if (criterion.kind != Criterion::Kind::kMean) {
    return absl::StrCat("rank ", rank, " has ", c.exact, "/", c.expected, " seeds exact");
  }
  const double upper = (c.accuracy_sum + static_cast<double>(c.expected - c.n)) /
                       static_cast<double>(c.expected);
  return absl::StrFormat(c.n == c.expected ? "rank %d has mean exact accuracy %.3f"
                                           : "rank %d has mean exact accuracy at most %.3f",
                         rank, upper);
}

// The groups of one rank of one head, by recipe.
struct RankGroups {
  int rank = 0;
  std::map<int32_t, const ResultGroup*> by_recipe;
};

struct Transition {
  bool defined = false;
  int rank = 0;
  std::string reason;
};

// Judges every rank of `ranks` (increasing) on one split, fills the verdicts
// of `outcomes` (same order) and applies the header's transition rule.
Transition FindTransition(const std::vector<RankGroups>& ranks, bool test,
                          const Criterion& criterion, bool several_recipes,
                          const RecipeLabeler& label, std::vector<RankOutcome>* outcomes) {
  const std::string phrase = CriterionPhrase(criterion);
  // Verdicts first: the not-monotone note looks at larger ranks.
  for (size_t i = 0; i < ranks.size(); ++i) {
    RankOutcome& o = (*outcomes)[i];
    Verdict& v = test ? o.test_verdict : o.verdict;
    std::vector<int32_t>& meeting = test ? o.test_recipes_meeting : o.recipes_meeting;
    bool all_not = true;
    for (const auto& [recipe, g] : ranks[i].by_recipe) {
      const Verdict gv = Judge(CountsOf(*g, test), criterion);
      if (gv == Verdict::kMeets) meeting.push_back(recipe);
      all_not = all_not && gv == Verdict::kNotMet;
    }
    v = !meeting.empty() ? Verdict::kMeets : all_not ? Verdict::kNotMet : Verdict::kUndecided;
  }
  Transition t;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankOutcome& o = (*outcomes)[i];
    const Verdict v = test ? o.test_verdict : o.verdict;
    const int rank = ranks[i].rank;
    if (v == Verdict::kNotMet) continue;
    if (v == Verdict::kMeets) {
      t.defined = true;
      t.rank = rank;
      if (!several_recipes) {
        const SplitCounts c = CountsOf(*ranks[i].by_recipe.begin()->second, test);
        t.reason = absl::StrCat("rank ", rank, " is the smallest swept rank with ", phrase, " ",
                                MeetsDetail(c, criterion));
      } else {
        std::vector<std::string> met;
        for (int32_t recipe : test ? o.test_recipes_meeting : o.recipes_meeting) {
          met.push_back(absl::StrCat(
              label(recipe), " ",
              MeetsDetail(CountsOf(*ranks[i].by_recipe.at(recipe), test), criterion)));
        }
        t.reason = absl::StrCat("rank ", rank, " is the smallest swept rank with ", phrase,
                                " under some recipe: ", absl::StrJoin(met, ", "));
      }
      std::vector<std::string> dips;
      for (size_t j = i + 1; j < ranks.size(); ++j) {
        const RankOutcome& later = (*outcomes)[j];
        if ((test ? later.test_verdict : later.verdict) != Verdict::kNotMet) continue;
        if (several_recipes) {
          dips.push_back(absl::StrCat("rank ", ranks[j].rank, " meets it under no recipe"));
        } else {
          dips.push_back(NotMetNote(ranks[j].rank,
                                    CountsOf(*ranks[j].by_recipe.begin()->second, test),
                                    criterion));
        }
      }
      if (!dips.empty()) {
        absl::StrAppend(&t.reason, "; not monotone: ", absl::StrJoin(dips, ", "));
      }
      return t;
    }
    // Undecided: name the first recipe that is.
    for (const auto& [recipe, g] : ranks[i].by_recipe) {
      if (Judge(CountsOf(*g, test), criterion) != Verdict::kUndecided) continue;
      const std::string where =
          several_recipes ? absl::StrCat("rank ", rank, " under ", label(recipe))
                          : absl::StrCat("rank ", rank);
      std::string why;
      if (g->n == 0) {
        why = ") and none of its seeds is done yet";
      } else if (criterion.kind == Criterion::Kind::kAll) {
        why = ") and every done seed there is exact";
      } else {
        why = absl::StrCat(") and its missing seeds decide whether it has ", phrase);
      }
      t.reason = absl::StrCat("undecided: ", where, " is incomplete (", CompletenessNote(*g), why);
      return t;
    }
  }
  t.reason = absl::StrCat("no swept rank has ", phrase, several_recipes ? " under any recipe" : "");
  return t;
}

// The rank-less head's line on one split: "no rank; exact on 3/3 seeds",
// with the criterion's verdict when it is not `all` or there are recipes.
std::string RanklessNote(const std::map<int32_t, std::vector<const ResultGroup*>>& by_recipe,
                         bool test, const Criterion& criterion, bool several_recipes,
                         const RecipeLabeler& label, Verdict* verdict,
                         std::vector<int32_t>* meeting) {
  std::vector<std::string> parts;
  bool all_not = true;
  for (const auto& [recipe, groups] : by_recipe) {
    // One group (rank 0) per head and recipe; sum in case of several.
    ResultGroup sum;
    double accuracy_sum = 0;
    for (const ResultGroup* g : groups) {
      sum.n += g->n;
      sum.expected += g->expected;
      sum.exact_seeds += g->exact_seeds;
      sum.test_exact_seeds += g->test_exact_seeds;
      sum.pruned += g->pruned;
      sum.missing_seeds.insert(sum.missing_seeds.end(), g->missing_seeds.begin(),
                               g->missing_seeds.end());
      accuracy_sum += CountsOf(*g, test).accuracy_sum;
    }
    SplitCounts c = CountsOf(sum, test);
    c.accuracy_sum = accuracy_sum;
    const Verdict v = Judge(c, criterion);
    if (v == Verdict::kMeets) meeting->push_back(recipe);
    all_not = all_not && v == Verdict::kNotMet;
    std::string part = absl::StrCat(c.exact, "/", c.expected, " seeds");
    if (c.n < c.expected) absl::StrAppend(&part, " (", MissingSeedsNote(sum.missing_seeds), ")");
    if (several_recipes) absl::StrAppend(&part, " under ", label(recipe));
    parts.push_back(std::move(part));
  }
  *verdict = !meeting->empty() ? Verdict::kMeets : all_not ? Verdict::kNotMet : Verdict::kUndecided;
  std::string out = absl::StrCat("no rank; exact on ", absl::StrJoin(parts, ", "));
  if (several_recipes) {
    std::vector<std::string> met;
    for (int32_t recipe : *meeting) met.push_back(label(recipe));
    absl::StrAppend(&out, "; ", CriterionPhrase(criterion), " under ",
                    met.empty() ? "no recipe" : absl::StrJoin(met, ", "));
  } else if (criterion.kind != Criterion::Kind::kAll) {
    const char* what = *verdict == Verdict::kMeets    ? "meets "
                       : *verdict == Verdict::kNotMet ? "does not meet "
                                                      : "undecided: ";
    absl::StrAppend(&out, "; ", what, CriterionPhrase(criterion));
  }
  return out;
}

}  // namespace

std::string DefaultRecipeLabel(int32_t recipe) { return absl::StrCat("recipe ", recipe); }

Verdict JudgeGroup(const ResultGroup& group, const Criterion& criterion, bool test) {
  return Judge(CountsOf(group, test), criterion);
}

void JudgeGroups(std::vector<ResultGroup>& groups, bool has_test_split,
                 const Criterion& criterion) {
  for (ResultGroup& g : groups) {
    g.verdict = JudgeGroup(g, criterion, false);
    if (has_test_split) g.test_verdict = JudgeGroup(g, criterion, true);
  }
}

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

HeadSummary SummarizeHead(const std::vector<ResultGroup>& groups, bool has_test_split,
                          const Criterion& criterion, const RecipeLabeler& label) {
  HeadSummary s;
  if (groups.empty()) return s;
  s.head = groups[0].head;
  s.head_index = groups[0].head_index;
  s.has_test_split = has_test_split;
  std::set<int32_t> recipes;
  for (const ResultGroup& g : groups) recipes.insert(g.recipe);
  // Without recipe axes (every group recipe 0) the lines read as they
  // always have; with them they name the recipes.
  const bool several_recipes = recipes.size() > 1 || *recipes.begin() != 0;
  std::map<int, RankGroups> by_rank;
  for (const ResultGroup& g : groups) {
    if (g.rank <= 0) continue;
    RankGroups& r = by_rank[g.rank];
    r.rank = g.rank;
    r.by_recipe.emplace(g.recipe, &g);  // the first group of a (rank, recipe) key
  }
  s.has_rank = !by_rank.empty();
  if (!s.has_rank) {
    std::map<int32_t, std::vector<const ResultGroup*>> by_recipe;
    for (const ResultGroup& g : groups) by_recipe[g.recipe].push_back(&g);
    RankOutcome o;
    s.reason = RanklessNote(by_recipe, false, criterion, several_recipes, label, &o.verdict,
                            &o.recipes_meeting);
    if (has_test_split) {
      s.test_reason = RanklessNote(by_recipe, true, criterion, several_recipes, label,
                                   &o.test_verdict, &o.test_recipes_meeting);
    }
    s.ranks.push_back(std::move(o));
    return s;
  }
  std::vector<RankGroups> sorted;
  for (auto& [rank, r] : by_rank) sorted.push_back(std::move(r));
  s.ranks.resize(sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) s.ranks[i].rank = sorted[i].rank;
  Transition train = FindTransition(sorted, false, criterion, several_recipes, label, &s.ranks);
  s.transition_defined = train.defined;
  s.transition_rank = train.rank;
  s.reason = std::move(train.reason);
  if (has_test_split) {
    Transition test = FindTransition(sorted, true, criterion, several_recipes, label, &s.ranks);
    s.test_transition_defined = test.defined;
    s.test_transition_rank = test.rank;
    s.test_reason = std::move(test.reason);
  }
  return s;
}

std::vector<HeadSummary> SummarizeHeads(const std::vector<ResultGroup>& groups,
                                        bool has_test_split, const Criterion& criterion,
                                        const RecipeLabeler& label) {
  std::map<int, std::vector<ResultGroup>> by_head;
  for (const ResultGroup& g : groups) by_head[g.head_index].push_back(g);
  std::vector<HeadSummary> out;
  for (const auto& [index, head_groups] : by_head) {
    out.push_back(SummarizeHead(head_groups, has_test_split, criterion, label));
  }
  return out;
}

std::string NoBoundReason(const HeadSpec& head, const TrainSpec& train) {
  // The head kinds the bound is not about say why in their row.
  const HeadKindRow* kind = FindHeadKind(head.kind);
  if (kind != nullptr && kind->no_bound[0] != '\0') return kind->no_bound;
  if (head.construction != Construction::kNone) return "construction";
  if (ReadoutEscapesRankBound(head, train)) return "loss ce";
  return "";
}

}  // namespace ranksweep::server
