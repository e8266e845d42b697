#include "client/sweep_views.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/format.h"
#include "client/json_writer.h"
#include "client/law_plot.h"
#include "common/spec/criterion.h"

namespace ranksweep::client {

double EstimateEtaSeconds(const v1::SweepInfo& sweep) {
  const auto& c = sweep.counts();
  const int64_t remaining = c.pending() + c.leased();
  if (remaining == 0) return 0;
  if (sweep.mean_cell_seconds() <= 0) return -1;
  const int64_t parallel = std::max<int64_t>(1, c.leased());
  return sweep.mean_cell_seconds() * static_cast<double>(remaining) /
         static_cast<double>(parallel);
}

std::string ProgressLine(const v1::SweepInfo& sweep, int bar_width) {
  const auto& c = sweep.counts();
  const int64_t finished = c.done() + c.failed() + c.cancelled() + c.pruned();
  int filled = 0;
  if (c.total() > 0) {
    filled = static_cast<int>(finished * bar_width / c.total());
  }
  filled = std::clamp(filled, 0, bar_width);
  std::string line = absl::StrCat("[", std::string(filled, '#'),
                                  std::string(bar_width - filled, '.'), "] ", c.done(), "/",
                                  c.total(), " done  ", c.leased(), " running  ", c.failed(),
                                  " failed");
  if (c.cancelled() > 0) absl::StrAppend(&line, "  ", c.cancelled(), " cancelled");
  if (c.pruned() > 0) absl::StrAppend(&line, "  ", c.pruned(), " pruned");
  if (sweep.state() == v1::SWEEP_STATE_RUNNING || sweep.state() == v1::SWEEP_STATE_UNSPECIFIED) {
    const double eta = EstimateEtaSeconds(sweep);
    absl::StrAppend(&line, "  ETA ", eta < 0 ? "?" : FormatDuration(eta));
  } else {
    absl::StrAppend(&line, "  ", SweepStateName(sweep.state()));
  }
  return line;
}

std::string SweepStatusText(const v1::SweepInfo& s, absl::TimeZone tz) {
  const auto& c = s.counts();
  std::string out;
  absl::StrAppend(&out, "sweep:      ", s.sweep_id(), "\n");
  absl::StrAppend(&out, "name:       ", s.name(), "\n");
  absl::StrAppend(&out, "state:      ", SweepStateName(s.state()), "\n");
  absl::StrAppend(&out, "priority:   ", s.priority(), "\n");
  absl::StrAppend(&out, "cells:      ", c.total(), " total, ", c.done(), " done, ", c.leased(),
                  " running, ", c.pending(), " pending, ", c.failed(), " failed, ",
                  c.cancelled(), " cancelled", c.pruned() > 0 ? absl::StrCat(", ", c.pruned(), " pruned") : "", "\n");
  if (s.spec().prune().rule() == v1::PRUNE_RULE_HALVING) {
    const v1::PruneSpec& p = s.spec().prune();
    absl::StrAppend(&out, "prune:      halving, eta ", p.has_eta() ? p.eta() : 3, ", margin ",
                    p.has_margin() ? p.margin() : 0.05, ", first rung ",
                    p.min_steps() > 0 ? absl::StrCat("step ", p.min_steps())
                                      : std::string("max_steps / eta^3"),
                    "; ", c.pruned(), " cells pruned\n");
  }
  if (s.spec().mode() == v1::SWEEP_MODE_SEARCH) {
    absl::StrAppend(&out, "search:     ", c.total(), " of ", s.grid_cells(),
                    " grid cells created (", s.grid_cells() - c.total(), " saved)\n");
  }
  if (s.cached_cells() > 0) {
    absl::StrAppend(&out, "cached:     ", s.cached_cells(),
                    " done cells served from the result cache\n");
  }
  absl::StrAppend(&out, "mean cell:  ",
                  s.mean_cell_seconds() > 0 ? absl::StrFormat("%.2fs", s.mean_cell_seconds())
                                            : std::string("-"),
                  "\n");
  if (s.state() == v1::SWEEP_STATE_RUNNING) {
    const double eta = EstimateEtaSeconds(s);
    absl::StrAppend(&out, "eta:        ", eta < 0 ? "?" : FormatDuration(eta), "\n");
  }
  absl::StrAppend(&out, "created:    ", FormatUnixMs(s.created_unix_ms(), tz), "\n");
  absl::StrAppend(&out, "finished:   ", FormatUnixMs(s.finished_unix_ms(), tz), "\n");
  if (s.recent_failures_size() > 0) {
    absl::StrAppend(&out, "recent failures:\n");
    for (const auto& f : s.recent_failures()) absl::StrAppend(&out, "  ", f, "\n");
  }
  return out;
}

std::string CompletenessText(const v1::ResultGroup& g) {
  if (g.missing_seeds_size() == 0) return "complete";
  // Stopped by recipe pruning: its recipe lost (not met), not missing.
  if (g.pruned() > 0 && g.pruned() == g.missing_seeds_size()) {
    return absl::StrCat("pruned (", g.pruned(), g.pruned() == 1 ? " seed)" : " seeds)");
  }
  constexpr int kMaxListed = 8;
  std::vector<std::string> listed;
  for (int i = 0; i < g.missing_seeds_size() && i < kMaxListed; ++i) {
    listed.push_back(absl::StrCat(g.missing_seeds(i)));
  }
  std::string out = absl::StrCat(g.missing_seeds_size() == 1 ? "seed " : "seeds ",
                                 absl::StrJoin(listed, ", "));
  if (g.missing_seeds_size() > kMaxListed) {
    absl::StrAppend(&out, " and ", g.missing_seeds_size() - kMaxListed, " more");
  }
  return out + " missing";
}

std::string ErrorMeanCi(const v1::Aggregate& a, int64_t n) {
  if (n == 0) return "-";
  if (n < 2) return FixedText(a.mean(), 3);
  return absl::StrCat(FixedText(a.mean(), 3), " ± ", FixedText(a.ci95(), 3));
}

std::string BoundNote(const v1::QueryResultsResponse& r, const v1::HeadSummary& head) {
  if (!r.has_facts()) return "";
  const auto& f = r.facts();
  if (f.rank_lower_bound() == 0 && f.rank_upper_bound() == 0) {
    return " (theory: no bound for this dataset)";
  }
  if (!head.no_bound().empty()) return absl::StrCat(" (theory: no bound (", head.no_bound(), "))");
  return absl::StrCat(" (theory: lower bound ", f.rank_lower_bound(), ", upper bound ",
                      f.rank_upper_bound(), ")");
}

bool SummaryHasRecipes(const v1::QueryResultsResponse& r) {
  for (const v1::ResultGroup& g : r.groups()) {
    if (g.recipe() != 0) return true;
  }
  return false;
}

std::string RecipeLabelOf(const v1::QueryResultsResponse& r, int32_t recipe) {
  auto it = r.recipe_labels().find(recipe);
  return it != r.recipe_labels().end() ? it->second : absl::StrCat("recipe ", recipe);
}

std::string CriterionLine(const v1::QueryResultsResponse& r) {
  if (r.criterion().empty()) return "";
  absl::StatusOr<Criterion> c = ParseCriterion(r.criterion(), "criterion");
  return absl::StrCat("criterion: ", c.ok() ? CriterionPhrase(*c) : r.criterion(), " (",
                      r.criterion(), ")");
}

namespace {

std::string TransitionLine(const char* prefix, bool defined, int32_t rank,
                           const std::string& reason, const std::string& theory) {
  if (defined) return absl::StrCat(prefix, "transition rank: ", rank, theory, "\n");
  return absl::StrCat(prefix, "transition rank: undefined (", reason, ")", theory, "\n");
}

}  // namespace

std::string SummaryText(const v1::QueryResultsResponse& response, bool has_test_split) {
  std::string out;
  if (const std::string line = CriterionLine(response); !line.empty()) {
    absl::StrAppend(&out, line, "\n\n");
  }
  const bool recipes = SummaryHasRecipes(response);
  bool first = true;
  for (const v1::HeadSummary& h : response.heads()) {
    if (!first) out += "\n";
    first = false;
    absl::StrAppend(&out, h.head(), "\n");
    Table t;
    t.header = {"RANK", "N", "ERROR (MEAN ± CI95)", "STD", "EXACT"};
    if (recipes) t.header.insert(t.header.begin() + 1, "RECIPE");
    if (has_test_split) {
      t.header.push_back("TEST ERROR (MEAN ± CI95)");
      t.header.push_back("TEST EXACT");
    }
    t.header.push_back("COMPLETENESS");
    t.right_align = {true, true, true, true, true};
    if (recipes) t.right_align.insert(t.right_align.begin() + 1, false);
    if (has_test_split) {
      t.right_align.push_back(true);
      t.right_align.push_back(true);
    }
    for (const v1::ResultGroup& g : response.groups()) {
      if (g.head_index() != h.head_index()) continue;
      std::vector<std::string> row = {RankText(g.rank()), absl::StrCat(g.n(), "/", g.expected()),
                                      ErrorMeanCi(g.train_error(), g.n()),
                                      g.n() >= 2 ? FixedText(g.train_error().std(), 3) : "-",
                                      absl::StrCat(g.exact_seeds(), "/", g.n())};
      if (recipes) row.insert(row.begin() + 1, RecipeLabelOf(response, g.recipe()));
      if (has_test_split) {
        row.push_back(ErrorMeanCi(g.test_error(), g.n()));
        row.push_back(absl::StrCat(g.test_exact_seeds(), "/", g.n()));
      }
      row.push_back(CompletenessText(g));
      t.rows.push_back(std::move(row));
    }
    // Indent the table under its head.
    for (absl::string_view line : absl::StrSplit(RenderTable(t), '\n', absl::SkipEmpty())) {
      absl::StrAppend(&out, "  ", line, "\n");
    }
    if (!h.has_rank()) {
      absl::StrAppend(&out, "  ", h.reason(), "\n");
      if (has_test_split) absl::StrAppend(&out, "  test: ", h.test_reason(), "\n");
      continue;
    }
    const std::string theory = BoundNote(response, h);
    out += TransitionLine("  ", h.transition_defined(), h.transition_rank(), h.reason(), theory);
    if (has_test_split) {
      out += TransitionLine("  test ", h.test_transition_defined(), h.test_transition_rank(),
                            h.test_reason(), theory);
    }
    if (!h.caveat().empty()) absl::StrAppend(&out, "  caveat: ", h.caveat(), "\n");
  }
  if (response.laws_size() > 0) absl::StrAppend(&out, "\n", LawText(response, has_test_split));
  return out;
}

namespace {

// A ranked head's transition at one point, "undefined" when it has none; a
// rank-less head's "exact on 3/3 seeds" (RanklessText).
std::string LawCell(const v1::AxisLaw& law, const v1::AxisPoint& p, bool test) {
  const v1::HeadSummary& s = p.summary();
  if (!law.has_rank()) return RanklessText(s, test);
  const bool defined = test ? s.test_transition_defined() : s.transition_defined();
  return defined ? absl::StrCat(test ? s.test_transition_rank() : s.transition_rank())
                 : "undefined";
}

}  // namespace

std::string LawText(const v1::QueryResultsResponse& response, bool has_test_split) {
  std::vector<std::string> axes;
  for (const v1::AxisLaw& law : response.laws()) {
    if (std::find(axes.begin(), axes.end(), law.axis()) == axes.end()) axes.push_back(law.axis());
  }
  std::string out;
  for (const std::string& axis : axes) {
    std::vector<const v1::AxisLaw*> laws;
    for (const v1::AxisLaw& law : response.laws()) {
      if (law.axis() == axis) laws.push_back(&law);
    }
    absl::StrAppend(&out, "transition rank against ", axis,
                    " (best over the other recipe axes)\n");
    Table t;
    t.header = {absl::AsciiStrToUpper(axis)};
    t.right_align = {true};
    for (const v1::AxisLaw* law : laws) {
      t.header.push_back(absl::AsciiStrToUpper(law->head()));
      t.right_align.push_back(false);
      if (has_test_split) {
        t.header.push_back(absl::StrCat("TEST ", absl::AsciiStrToUpper(law->head())));
        t.right_align.push_back(false);
      }
    }
    const bool two_to_the_m = axis == "m";
    if (two_to_the_m) {
      t.header.push_back("2^M");
      t.right_align.push_back(true);
    }
    bool bounds = false;
    for (const v1::AxisLaw* law : laws) {
      for (const v1::AxisPoint& p : law->points()) bounds = bounds || p.rank_lower_bound() > 0;
    }
    if (bounds) {
      t.header.push_back("LOWER BOUND");
      t.right_align.push_back(true);
    }
    // Rows in the order of the first head's points (the axis' order).
    for (const v1::AxisPoint& first : laws.front()->points()) {
      std::vector<std::string> row = {first.label()};
      int64_t lower = 0;
      for (const v1::AxisLaw* law : laws) {
        const v1::AxisPoint* at = nullptr;
        for (const v1::AxisPoint& p : law->points()) {
          if (p.value() == first.value()) at = &p;
        }
        row.push_back(at != nullptr ? LawCell(*law, *at, false) : "-");
        if (has_test_split) row.push_back(at != nullptr ? LawCell(*law, *at, true) : "-");
        if (at != nullptr) lower = std::max(lower, at->rank_lower_bound());
      }
      if (two_to_the_m) {
        row.push_back(first.value() <= 62 ? absl::StrCat(int64_t{1} << static_cast<int>(first.value()))
                                          : "-");
      }
      if (bounds) row.push_back(lower > 0 ? absl::StrCat(lower) : "-");
      t.rows.push_back(std::move(row));
    }
    for (absl::string_view line : absl::StrSplit(RenderTable(t), '\n', absl::SkipEmpty())) {
      absl::StrAppend(&out, "  ", line, "\n");
    }
    for (const v1::AxisLaw* law : laws) {
      if (!law->has_rank() || !law->numeric()) continue;
      absl::StrAppend(&out, law->head(), " fit: ", FitText(law->fit(), axis), "\n");
      if (has_test_split) {
        absl::StrAppend(&out, law->head(), " test fit: ", FitText(law->test_fit(), axis), "\n");
      }
    }
  }
  return out;
}

namespace {

// "yes", "no", "undecided"; "" when the coordinator did not say.
std::string VerdictCell(v1::CriterionVerdict v) {
  switch (v) {
    case v1::CRITERION_VERDICT_MEETS: return "yes";
    case v1::CRITERION_VERDICT_NOT_MET: return "no";
    case v1::CRITERION_VERDICT_UNDECIDED: return "undecided";
    default: return "";
  }
}

}  // namespace

Table SummaryCsvTable(const v1::QueryResultsResponse& response) {
  Table t;
  t.header = {"head",           "head_index",       "rank",          "n",
              "expected",       "train_error_mean", "train_error_ci95", "train_error_std",
              "exact_seeds",    "test_error_mean",  "test_exact_seeds", "missing_seeds",
              "transition_rank", "transition_reason", "rank_lower_bound", "rank_upper_bound",
              "criterion",       "recipe",            "meets",            "test_meets"};
  const auto& f = response.facts();
  for (const v1::ResultGroup& g : response.groups()) {
    const v1::HeadSummary* head = nullptr;
    for (const auto& h : response.heads()) {
      if (h.head_index() == g.head_index()) head = &h;
    }
    std::vector<std::string> missing;
    for (uint64_t seed : g.missing_seeds()) missing.push_back(absl::StrCat(seed));
    const bool defined = head != nullptr && head->transition_defined();
    const bool any = g.n() > 0;
    const bool test = any && head != nullptr && head->has_test_split();
    // The single-head bounds only beside heads they apply to.
    const bool bounded = head == nullptr || head->no_bound().empty();
    t.rows.push_back({g.head(), absl::StrCat(g.head_index()), RankCell(g.rank()),
                      absl::StrCat(g.n()), absl::StrCat(g.expected()),
                      ShortestCell(any, g.train_error().mean()),
                      ShortestCell(g.n() >= 2, g.train_error().ci95()),
                      ShortestCell(g.n() >= 2, g.train_error().std()),
                      absl::StrCat(g.exact_seeds()), ShortestCell(test, g.test_error().mean()),
                      test ? absl::StrCat(g.test_exact_seeds()) : "",
                      absl::StrJoin(missing, ";"),
                      defined ? absl::StrCat(head->transition_rank()) : "",
                      head != nullptr ? head->reason() : "",
                      BoundCell(bounded ? f.rank_lower_bound() : 0),
                      BoundCell(bounded ? f.rank_upper_bound() : 0), response.criterion(),
                      absl::StrCat(g.recipe()), VerdictCell(g.verdict()),
                      test ? VerdictCell(g.test_verdict()) : ""});
  }
  return t;
}

std::string SummaryJson(const v1::QueryResultsResponse& response) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["criterion"] = response.criterion().empty() ? nlohmann::ordered_json()
                                                  : nlohmann::ordered_json(response.criterion());
  out["facts"] =
      response.has_facts() ? MessageJsonTree(response.facts()) : nlohmann::ordered_json();
  // A bound of 0 is no bound for this dataset: null (MessageJsonTree).
  nlohmann::ordered_json heads = nlohmann::ordered_json::array();
  for (const v1::HeadSummary& h : response.heads()) {
    nlohmann::ordered_json head = MessageJsonTree(h);
    // An undefined transition has no rank (it reads 0 on the wire).
    if (!h.transition_defined()) head["transition_rank"] = nullptr;
    if (!h.test_transition_defined()) head["test_transition_rank"] = nullptr;
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const v1::ResultGroup& g : response.groups()) {
      if (g.head_index() == h.head_index()) groups.push_back(ResultGroupJson(g, h.has_test_split()));
    }
    head["groups"] = std::move(groups);
    heads.push_back(std::move(head));
  }
  out["heads"] = std::move(heads);
  if (response.laws_size() > 0) {
    nlohmann::ordered_json laws = nlohmann::ordered_json::array();
    for (const v1::AxisLaw& law : response.laws()) {
      nlohmann::ordered_json j = MessageJsonTree(law);
      // An undefined fit has no slope, an undefined transition no rank.
      for (const char* fit : {"fit", "test_fit"}) {
        if (!j[fit].is_object() || !j[fit].value("defined", false)) j[fit] = nullptr;
      }
      laws.push_back(std::move(j));
    }
    out["laws"] = std::move(laws);
  }
  return out.dump(2) + "\n";
}

}  // namespace ranksweep::client
