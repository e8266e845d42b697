#include "client/report.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/format.h"
#include "client/law_plot.h"
#include "client/sweep_views.h"
#include "common/spec/criterion.h"
#include "common/spec/spec_json.h"
#include "nlohmann/json.hpp"

namespace ranksweep::client {
namespace {

// A Markdown table: header, alignment row, one line per row; '|' in a cell
// escaped.
std::string MarkdownTable(const Table& t) {
  auto line = [](const std::vector<std::string>& cells) {
    std::vector<std::string> escaped;
    for (const std::string& c : cells) escaped.push_back(absl::StrReplaceAll(c, {{"|", "\\|"}}));
    return absl::StrCat("| ", absl::StrJoin(escaped, " | "), " |\n");
  };
  std::string out = line(t.header);
  std::vector<std::string> align;
  for (size_t i = 0; i < t.header.size(); ++i) {
    align.push_back(i < t.right_align.size() && t.right_align[i] ? "--:" : "---");
  }
  absl::StrAppend(&out, "|", absl::StrJoin(align, "|"), "|\n");
  for (const auto& row : t.rows) out += line(row);
  return out;
}

std::string FileStem(size_t index, const std::string& name) {
  std::string stem = absl::StrCat(index + 1, "-");
  for (char c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    stem += keep ? c : '_';
  }
  return stem;
}

const char* VerdictWord(v1::CriterionVerdict v) {
  switch (v) {
    case v1::CRITERION_VERDICT_MEETS: return "yes";
    case v1::CRITERION_VERDICT_NOT_MET: return "no";
    case v1::CRITERION_VERDICT_UNDECIDED: return "undecided";
    default: return "-";
  }
}

// The head's transition on a split as the transition table shows it: the
// rank (and, with recipes, the recipes meeting it there), "undefined", or
// "no rank".
std::string TransitionCell(const v1::QueryResultsResponse& r, const v1::HeadSummary& h,
                           bool test) {
  if (!h.has_rank()) return "no rank";
  const bool defined = test ? h.test_transition_defined() : h.transition_defined();
  if (!defined) return "undefined";
  const int32_t rank = test ? h.test_transition_rank() : h.transition_rank();
  std::string out = absl::StrCat(rank);
  if (SummaryHasRecipes(r)) {
    for (const v1::RankOutcome& o : h.ranks()) {
      if (o.rank() != rank) continue;
      std::vector<std::string> labels;
      for (int32_t recipe : test ? o.test_recipes_meeting() : o.recipes_meeting()) {
        labels.push_back(RecipeLabelOf(r, recipe));
      }
      absl::StrAppend(&out, " (", absl::StrJoin(labels, ", "), ")");
    }
  }
  return out;
}

// One split's table of a sweep under one criterion, then a line per head.
std::string SplitSection(const v1::QueryResultsResponse& r, bool test) {
  const bool recipes = SummaryHasRecipes(r);
  Table t;
  t.header = {"head", "rank"};
  if (recipes) t.header.push_back("recipe");
  for (const char* c : {"N", test ? "test error (mean ± CI95)" : "error (mean ± CI95)", "exact",
                        "meets", "completeness"}) {
    t.header.push_back(c);
  }
  t.right_align = {false, true};
  if (recipes) t.right_align.push_back(false);
  for (bool right : {true, true, true, false, false}) t.right_align.push_back(right);
  for (const v1::ResultGroup& g : r.groups()) {
    std::vector<std::string> row = {g.head(), g.rank() > 0 ? absl::StrCat(g.rank()) : "-"};
    if (recipes) row.push_back(RecipeLabelOf(r, g.recipe()));
    row.push_back(absl::StrCat(g.n(), "/", g.expected()));
    row.push_back(ErrorMeanCi(test ? g.test_error() : g.train_error(), g.n()));
    row.push_back(absl::StrCat(test ? g.test_exact_seeds() : g.exact_seeds(), "/", g.n()));
    row.push_back(VerdictWord(test ? g.test_verdict() : g.verdict()));
    row.push_back(CompletenessText(g));
    t.rows.push_back(std::move(row));
  }
  std::string out = MarkdownTable(t);
  out += "\n";
  for (const v1::HeadSummary& h : r.heads()) {
    const std::string& reason = test ? h.test_reason() : h.reason();
    if (!h.has_rank()) {
      absl::StrAppend(&out, "- ", h.head(), ": ", reason, "\n");
      continue;
    }
    const bool defined = test ? h.test_transition_defined() : h.transition_defined();
    const int32_t rank = test ? h.test_transition_rank() : h.transition_rank();
    absl::StrAppend(&out, "- ", h.head(), ": transition rank ",
                    defined ? absl::StrCat(rank) : "undefined", " (", reason, ")",
                    BoundNote(r, h), "\n");
    if (!h.caveat().empty()) absl::StrAppend(&out, "  caveat: ", h.caveat(), "\n");
  }
  return out;
}

// A figure of the report: its file and what it shows (the image's text).
using Figure = std::pair<std::string, std::string>;

std::string SweepSection(size_t index, const ReportSweep& s, const std::vector<Figure>& plots) {
  const bool test = HasTestSplit(s.spec);
  const v1::SweepInfo& info = s.sweep;
  std::string out = absl::StrCat("## ", index + 1, ". ", s.spec.name, "\n\n");
  absl::StrAppend(&out, "Sweep `", info.sweep_id(), "`: ", PlotSubtitle(s.spec, test), ". ",
                  SweepStateName(info.state()), ": ", info.counts().done(), " of ",
                  info.counts().total(), " cells done, ", info.counts().failed(), " failed, ",
                  info.counts().cancelled(), " cancelled",
                  info.counts().pruned() > 0
                      ? absl::StrCat(", ", info.counts().pruned(), " pruned (recipe pruning)")
                      : "",
                  ".\n\n");
  absl::StrAppend(&out, ProvenanceText(info, s.rows), "\n");

  absl::StrAppend(&out, "### Transition ranks\n\n");
  const bool laws = !s.summaries.empty() && s.summaries[0].laws_size() > 0;
  Table t;
  t.header = {"head", "criterion", "train"};
  if (test) t.header.push_back("test");
  t.header.push_back("theory");
  t.right_align = {false, false, true};
  if (test) t.right_align.push_back(true);
  for (int head = 0; head < static_cast<int>(s.spec.heads.size()); ++head) {
    for (const v1::QueryResultsResponse& r : s.summaries) {
      for (const v1::HeadSummary& h : r.heads()) {
        if (h.head_index() != head) continue;
        std::vector<std::string> row = {h.head(), absl::StrCat("`", r.criterion(), "`"),
                                        TransitionCell(r, h, false)};
        if (test) row.push_back(TransitionCell(r, h, true));
        std::string bound = BoundNote(r, h);
        // " (theory: lower bound 5, upper bound 14)" -> "lower bound 5, upper bound 14"
        if (absl::StartsWith(bound, " (theory: ")) bound = bound.substr(10, bound.size() - 11);
        row.push_back(h.has_rank() && !bound.empty() ? bound : "-");
        t.rows.push_back(std::move(row));
      }
    }
  }
  out += MarkdownTable(t);
  out += "\n";
  if (laws) {
    absl::StrAppend(&out, "### Transition against the problem size\n\n",
                    "Criterion `", s.summaries[0].criterion(), "`; at each value of a dataset "
                    "axis, the transition is the best over the sweep's other recipe axes. A "
                    "slope of 1 on m is 2^m.\n\n```\n", LawText(s.summaries[0], test),
                    "```\n\n");
  }

  for (const v1::QueryResultsResponse& r : s.summaries) {
    absl::StatusOr<Criterion> c = ParseCriterion(r.criterion(), "criterion");
    absl::StrAppend(&out, "### Criterion `", r.criterion(), "`: ",
                    c.ok() ? CriterionPhrase(*c) : r.criterion(), "\n\n");
    absl::StrAppend(&out, "#### Train split\n\n", SplitSection(r, false), "\n");
    if (test) absl::StrAppend(&out, "#### Test split\n\n", SplitSection(r, true), "\n");
  }

  if (!plots.empty()) {
    absl::StrAppend(&out, "### Plots\n\n");
    for (const Figure& p : plots) {
      absl::StrAppend(&out, "![", s.spec.name, ": ", p.second, "](", p.first, ")\n\n");
    }
  }
  absl::StrAppend(&out, "### Spec\n\nThe fields that differ from the defaults (`submit -f` reads "
                  "it back):\n\n```json\n", NonDefaultSpecJson(s.spec), "\n```\n");
  return out;
}

using Json = nlohmann::json;

// `value` without the keys of objects that equal `defaults`' (recursively);
// lists and scalars are kept whole when they differ at all.
Json WithoutDefaults(const Json& value, const Json& defaults) {
  if (!value.is_object() || !defaults.is_object()) return value;
  Json out = Json::object();
  for (auto it = value.begin(); it != value.end(); ++it) {
    auto d = defaults.find(it.key());
    if (d != defaults.end() && *d == it.value()) continue;
    Json kept = d == defaults.end() ? it.value() : WithoutDefaults(it.value(), *d);
    if (kept.is_object() && kept.empty()) continue;
    out[it.key()] = std::move(kept);
  }
  return out;
}

// JSON on one line, with a space after each comma and colon.
std::string OneLine(const Json& j) {
  if (j.is_array()) {
    std::vector<std::string> parts;
    for (const Json& e : j) parts.push_back(OneLine(e));
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  }
  if (j.is_object()) {
    std::vector<std::string> parts;
    for (auto it = j.begin(); it != j.end(); ++it) {
      parts.push_back(absl::StrCat(Json(it.key()).dump(), ": ", OneLine(it.value())));
    }
    return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
  }
  return j.dump();
}

// The top object one key a line; below it, a value on one line when the
// line stays within kJsonLineWidth, else spread the same way (objects one
// key a line, lists one element a line).
constexpr size_t kJsonLineWidth = 96;

void AppendCompactJson(const Json& j, int depth, std::string* out) {
  const std::string pad(2 * static_cast<size_t>(depth + 1), ' ');
  const std::string close(2 * static_cast<size_t>(depth), ' ');
  if (j.is_object() && !j.empty()) {
    *out += "{\n";
    size_t i = 0;
    for (auto it = j.begin(); it != j.end(); ++it, ++i) {
      const std::string key = absl::StrCat(pad, Json(it.key()).dump(), ": ");
      const std::string line = OneLine(it.value());
      *out += key;
      if (key.size() + line.size() + 1 <= kJsonLineWidth) {
        *out += line;
      } else {
        AppendCompactJson(it.value(), depth + 1, out);
      }
      absl::StrAppend(out, i + 1 < j.size() ? ",\n" : "\n");
    }
    absl::StrAppend(out, close, "}");
    return;
  }
  const bool nested = j.is_array() && std::any_of(j.begin(), j.end(), [](const Json& e) {
                        return e.is_object() || e.is_array();
                      });
  if (!nested) {
    *out += OneLine(j);
    return;
  }
  *out += "[\n";
  for (size_t i = 0; i < j.size(); ++i) {
    absl::StrAppend(out, pad, OneLine(j[i]), i + 1 < j.size() ? ",\n" : "\n");
  }
  absl::StrAppend(out, close, "]");
}

// "`abc` (4 cells), `def` (2 cells)": each value and its count, most first.
std::string Counted(const std::map<std::string, int>& counts, bool code) {
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> parts;
  for (const auto& [value, n] : sorted) {
    parts.push_back(absl::StrCat(code ? "`" : "", value, code ? "`" : "", " (", n,
                                 n == 1 ? " cell)" : " cells)"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

std::string NonDefaultSpecJson(const SweepSpec& spec) {
  const Json full = Json::parse(SweepSpecToJson(spec));
  // Each dataset kind writes its own fields: the defaults are those of a
  // dataset of the same kind.
  SweepSpec defaults;
  defaults.dataset.kind = spec.dataset.kind;
  defaults.heads = {HeadSpec{}};
  const Json base = Json::parse(SweepSpecToJson(defaults));
  Json out = WithoutDefaults(full, base);
  // The name and the dataset's and heads' kinds say what the sweep is,
  // defaults or not.
  out["name"] = full["name"];
  out["dataset"]["kind"] = full["dataset"]["kind"];
  Json heads = Json::array();
  for (const Json& h : full["heads"]) {
    Json head = WithoutDefaults(h, base["heads"][0]);
    head["kind"] = h["kind"];
    heads.push_back(std::move(head));
  }
  out["heads"] = std::move(heads);
  std::string text;
  AppendCompactJson(out, 0, &text);
  return text;
}

std::string ProvenanceText(const v1::SweepInfo& sweep, const std::vector<v1::ResultRow>& rows) {
  std::map<std::string, int> builds, torch, devices;
  double wall = 0;
  int trained = 0, cached = 0;
  for (const v1::ResultRow& row : rows) {
    if (!row.has_result()) continue;
    const v1::VersionManifest& v = row.worker_version();
    ++builds[v.build_id().empty() ? "unknown" : v.build_id()];
    ++torch[absl::StrCat(v.torch_version().empty() ? "unknown" : v.torch_version(),
                         v.cuda_version().empty() ? ", CPU" : ", CUDA " + v.cuda_version())];
    ++devices[row.result().device().empty() ? "unknown" : row.result().device()];
    if (row.cached_from_cell_id() != 0) {
      ++cached;
    } else {
      ++trained;
      wall += row.result().wall_seconds();
    }
  }
  std::string out;
  if (builds.empty()) {
    out += "- workers: no done cell yet\n";
  } else {
    absl::StrAppend(&out, "- build: ", Counted(builds, true), "\n");
    absl::StrAppend(&out, "- LibTorch: ", Counted(torch, false), "\n");
    absl::StrAppend(&out, "- devices: ", Counted(devices, false), "\n");
  }
  const absl::TimeZone utc = absl::UTCTimeZone();
  absl::StrAppend(&out, "- dates: submitted ", FormatUnixMs(sweep.created_unix_ms(), utc), " UTC");
  if (sweep.finished_unix_ms() > 0) {
    absl::StrAppend(&out, ", finished ", FormatUnixMs(sweep.finished_unix_ms(), utc), " UTC (",
                    FormatDuration((sweep.finished_unix_ms() - sweep.created_unix_ms()) / 1000.0),
                    " later)\n");
  } else {
    out += ", not finished\n";
  }
  absl::StrAppend(&out, "- wall time: ", absl::StrFormat("%.1f", wall), " s training ", trained,
                  trained == 1 ? " cell" : " cells");
  if (trained > 0) absl::StrAppend(&out, absl::StrFormat(" (mean %.1f s)", wall / trained));
  absl::StrAppend(&out, "; ", cached, cached == 1 ? " cell" : " cells",
                  " served from the result cache\n");
  return out;
}

absl::StatusOr<std::vector<std::string>> ParseReportCriteria(const std::string& flag,
                                                             int seeds) {
  if (flag.empty()) return std::vector<std::string>{"all"};
  if (flag == "standard") return ReportCriteria(seeds);
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(flag, ',')) {
    absl::StatusOr<Criterion> c = ParseCriterion(absl::StripAsciiWhitespace(part), "--criteria");
    if (!c.ok()) return c.status();
    std::string text = CriterionText(*c);
    if (std::find(out.begin(), out.end(), text) != out.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--criteria: \"", text, "\" is given twice"));
    }
    out.push_back(std::move(text));
  }
  return out;
}

std::vector<std::string> ReportCriteria(int seeds) {
  std::vector<std::string> out = {"all", "mean:0.99"};
  const int k = (seeds + 1) / 2;
  if (k >= 1 && k < seeds) out.push_back(absl::StrCat("seeds:", k));
  return out;
}

void AddSweepToPlot(const std::string& sweep_id, const SweepSpec& spec,
                    const std::vector<v1::ResultRow>& rows, const v1::DatasetFacts& facts,
                    const std::string& metric, bool test, bool several, PlotInput* plot) {
  // One line per (head, recipe), head-major: line base + head * R + recipe.
  // Without axes R is 1 and a line is a head, labelled as before.
  const int base = static_cast<int>(plot->heads.size());
  const int recipes = static_cast<int>(RecipeCount(spec));
  for (int i = 0; i < static_cast<int>(spec.heads.size()); ++i) {
    const std::string head = HeadLabel(spec.heads[i]);
    for (int k = 0; k < recipes; ++k) {
      const std::string recipe = RecipeLabel(spec, k);
      const std::string label = recipe.empty() ? head : absl::StrCat(head, " ", recipe);
      plot->heads.push_back({base + i * recipes + k,
                             several ? absl::StrCat(spec.name, ": ", label) : label,
                             HeadHasRank(spec.heads[i]), spec.ranks});
    }
  }
  for (const v1::ResultRow& row : rows) {
    if (!row.has_result() || row.recipe() < 0 || row.recipe() >= recipes) continue;
    const v1::SplitMetrics& m = test ? row.result().test() : row.result().train();
    plot->points.push_back({base + row.head_index() * recipes + row.recipe(), row.rank(),
                            row.seed(), metric == "error" ? m.error() : m.exact_accuracy()});
  }
  const std::string prefix = several ? absl::StrCat(spec.name, ": ") : "";
  if (const int64_t lo = facts.rank_lower_bound(); lo > 0) {
    plot->bounds.push_back({lo, absl::StrCat(prefix, "lower bound ", lo)});
  }
  if (const int64_t hi = facts.rank_upper_bound(); hi > 0) {
    plot->bounds.push_back({hi, absl::StrCat(prefix, "upper bound ", hi)});
  }
  plot->caption.push_back(several ? absl::StrCat("sweep ", sweep_id, " (", spec.name, "): ",
                                                 PlotSubtitle(spec, test))
                                  : absl::StrCat("sweep ", sweep_id));
  if (!several) {
    plot->title = spec.name;
    plot->subtitle = PlotSubtitle(spec, test);
  }
}

PlotInput SweepPlot(const std::string& sweep_id, const SweepSpec& spec,
                    const std::vector<v1::ResultRow>& rows, const v1::DatasetFacts& facts,
                    bool test) {
  PlotInput in;
  AddSweepToPlot(sweep_id, spec, rows, facts, "error", test, /*several=*/false, &in);
  const char* split = test ? "test" : "train";
  const int seeds = MarkSeedCounts(&in);
  in.caption.push_back(PlotCriterion("error", test, seeds));
  in.y_label = absl::StrCat(split, " error (1 - exact-sequence accuracy)");
  return in;
}

std::vector<ReportFile> BuildReport(const std::vector<ReportSweep>& sweeps) {
  // The page goes first; the plots are added while it is written.
  std::vector<ReportFile> files = {{"report.md", ""}};
  std::string page = "# Sweep report\n\n";
  Table index;
  index.header = {"#", "sweep", "name", "dataset", "state", "cells done"};
  index.right_align = {true, false, false, false, false, true};
  for (size_t i = 0; i < sweeps.size(); ++i) {
    const ReportSweep& s = sweeps[i];
    index.rows.push_back({absl::StrCat(i + 1), absl::StrCat("`", s.sweep.sweep_id(), "`"),
                          s.spec.name, PlotSubtitle(s.spec, HasTestSplit(s.spec)),
                          SweepStateName(s.sweep.state()),
                          absl::StrCat(s.sweep.counts().done(), "/", s.sweep.counts().total())});
  }
  absl::StrAppend(&page, MarkdownTable(index), "\n");
  absl::StrAppend(
      &page,
      "Every number below is the coordinator's summary of the sweep (docs/ANALYSIS.md): a group "
      "is a (head, rank) over its seeds; \"meets\" is its verdict under the criterion (yes, no, "
      "or undecided while missing seeds could still change it), and the transition rank is the "
      "smallest swept rank that meets it.\n\n");
  for (size_t i = 0; i < sweeps.size(); ++i) {
    const ReportSweep& s = sweeps[i];
    const v1::DatasetFacts facts =
        s.summaries.empty() ? v1::DatasetFacts() : s.summaries[0].facts();
    std::vector<Figure> plots;
    for (bool test : {false, true}) {
      if (test && !HasTestSplit(s.spec)) continue;
      PlotInput in = SweepPlot(s.sweep.sweep_id(), s.spec, s.rows, facts, test);
      if (in.points.empty()) continue;
      const std::string name = absl::StrCat(FileStem(i, s.spec.name), test ? "-test" : "-train",
                                            ".svg");
      files.push_back({name, RenderPlotSvg(in)});
      plots.emplace_back(name, absl::StrCat(test ? "test" : "train", " error against feature rank"));
    }
    // The transition against each dataset axis (the first criterion's laws).
    if (!s.summaries.empty() && s.summaries[0].laws_size() > 0 && !s.rows.empty()) {
      const v1::QueryResultsResponse& r = s.summaries[0];
      std::vector<std::string> axes;
      for (const v1::AxisLaw& law : r.laws()) {
        if (law.numeric() && std::find(axes.begin(), axes.end(), law.axis()) == axes.end()) {
          axes.push_back(law.axis());
        }
      }
      for (const std::string& axis : axes) {
        for (bool test : {false, true}) {
          if (test && !HasTestSplit(s.spec)) continue;
          LawPlotInput in;
          in.title = s.spec.name;
          in.subtitle = LawSubtitle(s.spec, axis, test);
          in.axis = axis;
          in.test = test;
          for (const v1::AxisLaw& law : r.laws()) {
            if (law.axis() == axis) in.laws.push_back(law);
          }
          in.seeds = SeedTransitions(s.spec, s.rows, axis, test);
          in.caption.push_back(absl::StrCat("sweep ", s.sweep.sweep_id(), "; ", CriterionLine(r)));
          for (const v1::AxisLaw& law : in.laws) {
            if (!law.has_rank()) in.caption.push_back(RanklessCaption(law, axis, test));
          }
          const std::string name = absl::StrCat(FileStem(i, s.spec.name), "-", axis,
                                                test ? "-test" : "-train", ".svg");
          files.push_back({name, RenderLawSvg(in)});
          plots.emplace_back(name, absl::StrCat(test ? "test" : "train",
                                                " transition rank against ", axis));
        }
      }
    }
    absl::StrAppend(&page, SweepSection(i, s, plots), "\n");
  }
  files[0].contents = std::move(page);
  return files;
}

}  // namespace ranksweep::client
