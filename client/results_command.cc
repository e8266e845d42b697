// `ranksweep results` (per seed, --group-by, --summary; table, CSV or JSON)
// and `ranksweep plot`.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/curves.h"
#include "client/format.h"
#include "client/law_plot.h"
#include "client/plot.h"
#include "client/report.h"
#include "client/sweep_views.h"
#include "common/spec/criterion.h"
#include "common/spec/spec.h"
#include "proto/convert.h"

namespace ranksweep::client {
namespace {

struct ResultsArgs {
  bool summary = false;
  bool curves = false;           // one line per evaluation of each seed
  bool include_invalid = false;  // also the rows a quarantine invalidated
  std::string sweep_id, group_by, format = "table", head, state, criterion;
  int page_size = kResultsPageSize;
  std::vector<int> ranks;
  std::vector<uint64_t> seeds;
};

// --group-by: head and rank, and every axis of the sweep, in any order.
// Groups are per (head, rank, recipe); pooling recipes into one group is
// not offered, so each axis must be named.
absl::Status CheckGroupBy(const std::string& group_by, const SweepSpec& spec) {
  std::vector<std::string> allowed = {"head", "rank"};
  for (const SweepAxis& axis : spec.axes) allowed.push_back(axis.name);
  std::vector<std::string> given = absl::StrSplit(group_by, ',');
  for (const std::string& name : given) {
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--group-by: \"", name, "\" is not a key of this sweep; its keys are ",
          absl::StrJoin(allowed, ",")));
    }
  }
  for (const std::string& name : allowed) {
    if (std::count(given.begin(), given.end(), name) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--group-by: groups are one per ", absl::StrJoin(allowed, ", "),
          ", so name each once: --group-by ", absl::StrJoin(allowed, ",")));
    }
  }
  return absl::OkStatus();
}

int Results(Client* client, const ResultsArgs& a) {
  absl::StatusOr<OutputFormat> format = ParseOutputFormat(a.format);
  if (!format.ok()) return ReportLocal(format.status());
  if (a.page_size < 1 || a.page_size > kMaxResultsPageSize) {
    return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
        "--page-size: ", a.page_size, " is out of range; use 1 to ", kMaxResultsPageSize)));
  }
  v1::QueryResultsRequest req;
  req.set_sweep_id(a.sweep_id);
  req.set_head(a.head);
  for (int r : a.ranks) req.add_ranks(r);
  for (uint64_t s : a.seeds) req.add_seeds(s);
  if (!a.state.empty()) {
    absl::StatusOr<v1::CellState> state = ParseCellState(a.state);
    if (!state.ok()) return ReportLocal(state.status());
    req.set_state(*state);
  }
  // The sweep's axes label the rows and groups of each recipe.
  int code = kExitOk;
  absl::StatusOr<v1::SweepInfo> sweep = GetSweep(client, a.sweep_id, &code);
  if (!sweep.ok()) return code;
  const SweepSpec spec = FromProto(sweep->spec());
  const RecipeAxes axes = RecipeAxes::Of(spec);
  if (a.summary) {
    req.set_group_by(v1::GROUP_BY_HEAD_RANK);
  } else if (!a.group_by.empty()) {
    if (absl::Status s = CheckGroupBy(a.group_by, spec); !s.ok()) return ReportLocal(s);
    req.set_group_by(v1::GROUP_BY_HEAD_RANK);
  }
  if (!a.criterion.empty()) {
    if (req.group_by() == v1::GROUP_BY_UNSPECIFIED) {
      return ReportLocal(absl::InvalidArgumentError(
          "--criterion: judges groups; use it with --summary or --group-by head,rank"));
    }
    absl::StatusOr<Criterion> criterion = ParseCriterion(a.criterion, "--criterion");
    if (!criterion.ok()) return ReportLocal(criterion.status());
    req.set_criterion(CriterionText(*criterion));
  }
  if (a.curves) {
    if (req.group_by() != v1::GROUP_BY_UNSPECIFIED || a.include_invalid) {
      return ReportLocal(absl::InvalidArgumentError(
          "--curves: one line per evaluation of each done seed; use it without --summary, "
          "--group-by and --include-invalid"));
    }
    if (!a.state.empty() && req.state() != v1::CELL_STATE_DONE) {
      return ReportLocal(absl::InvalidArgumentError(
          "--curves: only done seeds have curves; use --state done or no --state"));
    }
    req.set_state(v1::CELL_STATE_DONE);
    req.set_curves(true);
    std::vector<v1::ResultRow> rows;
    grpc::Status status = QueryAllRows(client, req, &rows, std::min(a.page_size, kCurvesPageSize));
    if (!status.ok()) return Report(client->globals(), status, "results");
    const std::vector<SeedCurve> curves = CurvesOfRows(rows);
    switch (*format) {
      case OutputFormat::kJson: std::cout << CurvesJson(curves, axes); break;
      case OutputFormat::kCsv: std::cout << CurvesCsv(curves, axes); break;
      case OutputFormat::kTable: std::cout << RenderTable(CurvesTable(curves, axes)); break;
    }
    if (curves.empty()) {
      std::cerr << "no done seed of " << a.sweep_id << " has a learning curve"
                << (rows.empty() ? " (none is done yet)" : "") << "\n";
    }
    return kExitOk;
  }
  if (a.include_invalid && req.group_by() != v1::GROUP_BY_UNSPECIFIED) {
    return ReportLocal(absl::InvalidArgumentError(
        "--include-invalid: invalid rows never count in groups or summaries; use it without "
        "--group-by and --summary"));
  }
  // With --include-invalid the rows of the query come first, then the
  // invalidated ones (state INVALID), in the order they were invalidated.
  std::vector<v1::QueryResultsRequest> queries = {req};
  if (a.include_invalid) {
    queries.push_back(req);
    queries.back().set_state(v1::CELL_STATE_INVALID);
  }
  if (req.group_by() == v1::GROUP_BY_UNSPECIFIED) {
    if (*format == OutputFormat::kTable) {
      std::vector<v1::ResultRow> rows;
      for (const v1::QueryResultsRequest& q : queries) {
        grpc::Status status = QueryAllRows(client, q, &rows, a.page_size);
        if (!status.ok()) return Report(client->globals(), status, "results");
      }
      std::cout << RenderTable(ResultRowsTable(rows, axes));
      return kExitOk;
    }
    // CSV and JSON are printed page by page as the pages arrive. A call
    // that fails part way leaves the rows printed so far, and the exit code
    // says it failed.
    ResultRowsWriter writer(*format, axes);
    std::string text;
    writer.Begin(&text);
    for (const v1::QueryResultsRequest& q : queries) {
      grpc::Status status =
          ForEachResultPage(client, q, [&](const v1::QueryResultsResponse& page) {
            for (const v1::ResultRow& row : page.rows()) writer.Add(row, &text);
            writer.AddColumns(page.columns(), &text);
            std::cout << text;
            text.clear();
          },
          a.page_size, PageRows::kColumns);
      if (!status.ok()) {
        std::cout.flush();
        return Report(client->globals(), status, "results");
      }
    }
    writer.End(&text);
    std::cout << text;
    return kExitOk;
  }
  v1::QueryResultsResponse resp;
  auto ctx = client->Context();
  grpc::Status status = client->stub().QueryResults(ctx.get(), req, &resp);
  if (!status.ok()) return Report(client->globals(), status, "results");
  if (a.summary) {
    switch (*format) {
      case OutputFormat::kJson: std::cout << SummaryJson(resp); break;
      case OutputFormat::kCsv: std::cout << RenderCsv(SummaryCsvTable(resp)); break;
      case OutputFormat::kTable: {
        const bool has_test = !resp.heads().empty() && resp.heads(0).has_test_split();
        std::cout << SummaryText(resp, has_test);
        break;
      }
    }
    return kExitOk;
  }
  std::vector<v1::ResultGroup> groups(resp.groups().begin(), resp.groups().end());
  // Every head of a sweep shares its dataset, so one says for all.
  const bool test_split = !resp.heads().empty() && resp.heads(0).has_test_split();
  switch (*format) {
    case OutputFormat::kJson: std::cout << ResultGroupsJson(groups, test_split, axes); break;
    case OutputFormat::kCsv:
      std::cout << RenderCsv(ResultGroupsCsvTable(groups, test_split, axes));
      break;
    case OutputFormat::kTable: {
      std::cout << RenderTable(ResultGroupsTable(groups, HasTestSplit(spec), axes));
      break;
    }
  }
  return kExitOk;
}

struct PlotArgs {
  bool curves = false;  // learning curves (curves.h) instead of metric against rank
  std::string head;     // --curves: only this head
  std::vector<int> ranks;  // --curves: only these ranks
  std::vector<std::string> sweep_ids;
  std::string output, metric = "error", split = "train";
  std::string x;  // a dataset axis: transition rank against it (law_plot.h)
  std::string format;  // svg | png | pdf; empty: -o's extension
  bool no_title = false, no_caption = false, bands = false;
  std::string size;  // WIDTHxHEIGHT in px
  double font_size = 13;
};

// --size WIDTHxHEIGHT: the two numbers (their range is CheckPlotInput's).
absl::Status ParseFigureSize(const std::string& text, int* width, int* height) {
  const std::vector<std::string> parts = absl::StrSplit(absl::AsciiStrToLower(text), 'x');
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], width) ||
      !absl::SimpleAtoi(parts[1], height)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--size: \"", text, "\" is not WIDTHxHEIGHT in px, e.g. 640x400 (each ", kMinPlotSize,
        " to ", kMaxPlotSize, ")"));
  }
  return absl::OkStatus();
}

// A sweep's done rows (the figures' points) and its grouped summary (its
// facts, transitions and laws), as every figure reads them.
grpc::Status FetchDoneRowsAndSummary(Client* client, const std::string& id,
                                     std::vector<v1::ResultRow>* rows,
                                     v1::QueryResultsResponse* summary) {
  v1::QueryResultsRequest req;
  req.set_sweep_id(id);
  req.set_state(v1::CELL_STATE_DONE);
  grpc::Status status = QueryAllRows(client, req, rows);
  if (!status.ok()) return status;
  req.set_state(v1::CELL_STATE_UNSPECIFIED);
  req.set_group_by(v1::GROUP_BY_HEAD_RANK);
  auto ctx = client->Context();
  return client->stub().QueryResults(ctx.get(), req, summary);
}

// Writes `svg` to `path` as SVG, PNG or PDF.
int WriteFigure(const std::string& path, FigureFormat format, const std::string& svg) {
  absl::StatusOr<std::string> bytes = EncodeFigure(svg, format);
  if (!bytes.ok()) return ReportLocal(bytes.status());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << *bytes;
  out.close();
  if (!out) return ReportLocal(absl::InvalidArgumentError(absl::StrCat("-o: cannot write ", path)));
  return kExitOk;
}

// The spec of the one sweep a figure of `flag` draws; nullopt (the error
// reported, *code set) for another number of sweeps or a failed GetSweep.
std::optional<SweepSpec> OneSweepSpec(Client* client, const PlotArgs& a, const char* flag,
                                      int* code) {
  if (a.sweep_ids.size() != 1) {
    *code = ReportLocal(absl::InvalidArgumentError(
        absl::StrCat(flag, ": draws one sweep, got ", a.sweep_ids.size())));
    return std::nullopt;
  }
  absl::StatusOr<v1::SweepInfo> sweep = GetSweep(client, a.sweep_ids[0], code);
  if (!sweep.ok()) return std::nullopt;
  return FromProto(sweep->spec());
}

// The presentation flags of `plot`, as PlotInput holds them, onto another
// figure's input (LawPlotInput, CurvePlotInput: fields of the same names).
template <typename FigureInput>
void CopyLook(const PlotInput& look, FigureInput* in) {
  in->show_title = look.show_title;
  in->show_caption = look.show_caption;
  in->font_size = look.font_size;
  in->width = look.width;
  in->height = look.height;
}

// `plot ID --x AXIS`: each ranked head's transition rank against a dataset
// axis of one sweep, with the seeds' own transitions and the fit.
// `look` holds the presentation flags, already checked against their ranges.
int PlotLaw(Client* client, const PlotArgs& a, bool test, FigureFormat format,
            const PlotInput& look) {
  int code = kExitOk;
  const std::optional<SweepSpec> one = OneSweepSpec(client, a, "--x", &code);
  if (!one.has_value()) return code;
  const std::string& id = a.sweep_ids[0];
  const SweepSpec& spec = *one;
  std::vector<std::string> dataset_axes;
  for (const SweepAxis& axis : spec.axes) {
    if (absl::StartsWith(AxisField(axis.name), "dataset.")) dataset_axes.push_back(axis.name);
  }
  if (std::find(dataset_axes.begin(), dataset_axes.end(), a.x) == dataset_axes.end()) {
    return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
        "--x: sweep ", id, " (", spec.name, ") has no dataset axis \"", a.x, "\"; ",
        dataset_axes.empty() ? "it has none (sweep m, pool_size, ... with a list of values)"
                             : absl::StrCat("its dataset axes are ",
                                            absl::StrJoin(dataset_axes, ", ")))));
  }
  if (test && !HasTestSplit(spec)) {
    return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
        "--split test: sweep ", id, " (", spec.name, ") has no test split")));
  }
  std::vector<v1::ResultRow> rows;
  v1::QueryResultsResponse summary;
  if (grpc::Status status = FetchDoneRowsAndSummary(client, id, &rows, &summary); !status.ok()) {
    return Report(client->globals(), status, "plot");
  }

  LawPlotInput in;
  in.title = spec.name;
  in.subtitle = LawSubtitle(spec, a.x, test);
  in.axis = a.x;
  in.test = test;
  for (const v1::AxisLaw& law : summary.laws()) {
    if (law.axis() == a.x) in.laws.push_back(law);
  }
  in.seeds = SeedTransitions(spec, rows, a.x, test);
  in.caption.push_back(absl::StrCat("sweep ", id, "; ", CriterionLine(summary),
                                    "; best over the other recipe axes at each ", a.x));
  for (const v1::AxisLaw& law : in.laws) {
    if (!law.has_rank()) in.caption.push_back(RanklessCaption(law, a.x, test));
  }
  if (rows.empty()) {
    return ReportLocal(absl::InvalidArgumentError(
        absl::StrCat("plot: no done cell to plot yet in ", id)));
  }
  CopyLook(look, &in);
  if (absl::Status s = CheckLawPlotSize(in); !s.ok()) return ReportLocal(s);
  if (const int written = WriteFigure(a.output, format, RenderLawSvg(in)); written != kExitOk) {
    return written;
  }
  std::cerr << "wrote " << a.output << " (" << in.laws.size() << " heads against " << a.x
            << ")\n";
  return kExitOk;
}

// `plot ID --curves`: each done seed's learning curve, a panel per head,
// rank and recipe.
int PlotCurves(Client* client, const PlotArgs& a, bool test, FigureFormat format,
               const PlotInput& look) {
  int code = kExitOk;
  const std::optional<SweepSpec> one = OneSweepSpec(client, a, "--curves", &code);
  if (!one.has_value()) return code;
  const std::string& id = a.sweep_ids[0];
  const SweepSpec& spec = *one;
  if (test && !HasTestSplit(spec)) {
    return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
        "--split test: sweep ", id, " (", spec.name, ") has no test split")));
  }
  CurvePlotInput in;
  in.title = spec.name;
  in.subtitle = absl::StrCat("sweep ", id);
  in.metric = a.metric;
  in.test = test;
  if (absl::Status s = CheckCurvePlot(in); !s.ok()) return ReportLocal(s);
  for (int r = 0; r < RecipeCount(spec) && !spec.axes.empty(); ++r) {
    in.recipe_labels.push_back(RecipeLabel(spec, r));
  }
  v1::QueryResultsRequest req;
  req.set_sweep_id(id);
  req.set_head(a.head);
  for (int r : a.ranks) req.add_ranks(r);
  req.set_state(v1::CELL_STATE_DONE);
  req.set_curves(true);
  std::vector<v1::ResultRow> rows;
  if (grpc::Status status = QueryAllRows(client, req, &rows, kCurvesPageSize); !status.ok()) {
    return Report(client->globals(), status, "plot");
  }
  in.curves = CurvesOfRows(rows);
  if (in.curves.empty()) {
    return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
        "plot --curves: no done seed of ", id, " has a learning curve",
        rows.empty() ? " (none is done yet)" : " (heads trained for no step have none)")));
  }
  CopyLook(look, &in);
  if (absl::Status s = CheckCurvePlotSize(in); !s.ok()) return ReportLocal(s);
  if (const int written = WriteFigure(a.output, format, RenderCurvesSvg(in)); written != kExitOk) {
    return written;
  }
  std::cerr << "wrote " << a.output << " (" << in.curves.size() << " seeds' curves)\n";
  return kExitOk;
}

// Fetches each sweep, its done rows and its summary (for the theory bounds)
// and writes the figure of RenderPlotSvg as SVG, PNG or PDF (ResolveFigureFormat).
// Several sweeps share one figure, their heads labelled "NAME: HEAD".
int Plot(Client* client, const PlotArgs& a) {
  if (!a.curves && (!a.head.empty() || !a.ranks.empty())) {
    return ReportLocal(absl::InvalidArgumentError(
        "--head and --rank choose the panels of --curves; use them with --curves"));
  }
  // The presentation flags, shared by the three figures. Their own ranges
  // first; whether a size fits the text is known once the sweeps' labels are.
  PlotInput in;
  in.show_title = !a.no_title;
  in.show_caption = !a.no_caption;
  in.all_bands = a.bands;
  in.font_size = a.font_size;
  if (!a.size.empty()) {
    if (absl::Status s = ParseFigureSize(a.size, &in.width, &in.height); !s.ok()) {
      return ReportLocal(s);
    }
  }
  if (absl::Status s = CheckPlotRanges(in); !s.ok()) return ReportLocal(s);
  if (a.curves) {
    if (!a.x.empty()) {
      return ReportLocal(absl::InvalidArgumentError(
          "--curves: draws learning curves against the step; drop --x"));
    }
    if (a.split != "train" && a.split != "test") {
      return ReportLocal(absl::InvalidArgumentError(
          absl::StrCat("--split: \"", a.split, "\" is not one of train, test")));
    }
    if (a.bands) {
      return ReportLocal(absl::InvalidArgumentError(
          "--bands: the curves figure (--curves) draws every seed's curve and their mean, not "
          "bands; drop --bands"));
    }
    absl::StatusOr<FigureFormat> format = ResolveFigureFormat(a.output, a.format);
    if (!format.ok()) return ReportLocal(format.status());
    return PlotCurves(client, a, a.split == "test", *format, in);
  }
  if (a.metric != "error" && a.metric != "exact_accuracy") {
    return ReportLocal(absl::InvalidArgumentError(
        absl::StrCat("--metric: \"", a.metric, "\" is not one of error, exact_accuracy")));
  }
  if (a.split != "train" && a.split != "test") {
    return ReportLocal(absl::InvalidArgumentError(
        absl::StrCat("--split: \"", a.split, "\" is not one of train, test")));
  }
  absl::StatusOr<FigureFormat> format = ResolveFigureFormat(a.output, a.format);
  if (!format.ok()) return ReportLocal(format.status());
  const bool test = a.split == "test";
  if (!a.x.empty()) {
    if (a.bands) {
      return ReportLocal(absl::InvalidArgumentError(
          "--bands: the transition figure (--x) draws each seed's transition, not bands; "
          "drop --bands"));
    }
    return PlotLaw(client, a, test, *format, in);
  }
  const bool several = a.sweep_ids.size() > 1;
  std::vector<std::string> names;
  for (const std::string& id : a.sweep_ids) {
    int code = kExitOk;
    absl::StatusOr<v1::SweepInfo> sweep = GetSweep(client, id, &code);
    if (!sweep.ok()) return code;
    const SweepSpec spec = FromProto(sweep->spec());
    if (test && !HasTestSplit(spec)) {
      return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
          "--split test: sweep ", id, " (", spec.name,
          ") has no test split; only pool datasets with test_size > 0 have one")));
    }
    std::vector<v1::ResultRow> rows;
    v1::QueryResultsResponse summary;
    if (grpc::Status status = FetchDoneRowsAndSummary(client, id, &rows, &summary);
        !status.ok()) {
      return Report(client->globals(), status, "plot");
    }

    AddSweepToPlot(id, spec, rows, summary.facts(), a.metric, test, several, &in);
    names.push_back(spec.name);
  }
  if (in.points.empty()) {
    return ReportLocal(absl::InvalidArgumentError(
        absl::StrCat("plot: no done cell to plot yet in ", absl::StrJoin(a.sweep_ids, ", "))));
  }
  if (several) {
    in.title = absl::StrJoin(names, " vs ");
    in.subtitle = absl::StrCat(a.sweep_ids.size(), " sweeps, ", a.split, " split");
  }
  // Each line's own seed count: sweeps of one figure may differ.
  const int seeds = MarkSeedCounts(&in);
  in.caption.push_back(PlotCriterion(a.metric, test, seeds, a.bands));
  in.y_label = a.metric == "error"
                   ? absl::StrCat(a.split, " error (1 - exact-sequence accuracy)")
                   : absl::StrCat(a.split, " exact-sequence accuracy");
  if (absl::Status s = CheckPlotInput(in); !s.ok()) return ReportLocal(s);
  if (const int written = WriteFigure(a.output, *format, RenderPlotSvg(in));
      written != kExitOk) {
    return written;
  }
  std::cerr << "wrote " << a.output << " (" << in.points.size() << " points)\n";
  return kExitOk;
}

}  // namespace

void AddResultsCommand(CLI::App* app, Command* command) {
  // The flags' values, kept alive by the callbacks that read them.
  auto ra = std::make_shared<ResultsArgs>();
  CLI::App* results = app->add_subcommand("results", "Per-seed results or per-(head, rank) groups");
  results->footer(kHelpFooter);
  results->add_option("sweep", ra->sweep_id, "Sweep id")->required();
  results->add_option("--group-by", ra->group_by,
                      "head,rank and the sweep's axes (e.g. head,rank,lr): mean/std/min/max/n "
                      "per group");
  results->add_flag("--summary", ra->summary,
                    "Per head: error mean ± 95% interval per rank, completeness, the "
                    "transition rank and the dataset's theory bounds");
  results->add_option("--criterion", ra->criterion,
                      "What solves a (head, rank): all (every seed exact; default), mean:X "
                      "(mean exact accuracy >= X, 0 < X <= 1), seeds:K (at least K seeds exact)");
  results->add_option("--format", ra->format, "table | csv | json")->capture_default_str();
  results->add_option("--head", ra->head, "Only this head label, e.g. kernel/elu1");
  results->add_option("--rank", ra->ranks, "Only these ranks (comma-separated)")->delimiter(',');
  results->add_option("--seed", ra->seeds, "Only these seeds (comma-separated)")->delimiter(',');
  results->add_option("--state", ra->state,
                      "done | failed | pruned (default all three) | invalid");
  results->add_flag("--include-invalid", ra->include_invalid,
                    "Also the rows a quarantine invalidated (state INVALID), after the others");
  results->add_option("--page-size", ra->page_size,
                      "Per-seed rows per call, 1-100000; csv and json print each page as it "
                      "arrives")
      ->capture_default_str();
  results->add_flag("--curves", ra->curves,
                    "Learning curves: one line per evaluation of each done seed (step, loss, "
                    "train and test error and position accuracy)");
  results->callback([command, ra] {
    command->action = [ra](Client* c) { return Results(c, *ra); };
  });
}

void AddPlotCommand(CLI::App* app, Command* command) {
  auto pa = std::make_shared<PlotArgs>();
  CLI::App* plot = app->add_subcommand(
      "plot", "Write an SVG, PNG or PDF of error (or exact accuracy) against rank, one line per "
              "head of each sweep");
  plot->footer(kHelpFooter);
  plot->add_option("sweep", pa->sweep_ids, "Sweep ids: several share one figure")->required();
  plot->add_option("-o,--output", pa->output, "File to write: NAME.svg, NAME.png or NAME.pdf")
      ->required();
  plot->add_option("--format", pa->format,
                   "svg | png | pdf (default: from -o's extension; PDF is vector, for papers)");
  plot->add_option("--metric", pa->metric, "error | exact_accuracy")->capture_default_str();
  plot->add_option("--split", pa->split, "train | test (pool datasets)")->capture_default_str();
  plot->add_option("--x", pa->x,
                   "A dataset axis of the sweep (m, pool_size, ...): draw each head's transition "
                   "rank against it on a log2 axis, the seeds' own transitions as dots, and the "
                   "fit of log2 rank (with 2^m beside an m axis)");
  plot->add_flag("--curves", pa->curves,
                 "Learning curves of one sweep: a panel per head, rank and recipe, each seed a "
                 "thin line, their mean bold; --metric error | loss | position_accuracy");
  plot->add_option("--head", pa->head, "With --curves: only this head label, e.g. kernel/elu1");
  plot->add_option("--rank", pa->ranks, "With --curves: only these ranks (comma-separated)")
      ->delimiter(',');
  plot->add_flag("--no-title", pa->no_title,
                 "Leave out the title and subtitle (a paper's caption says them)");
  plot->add_flag("--no-caption", pa->no_caption,
                 "Leave out the caption lines under the x axis (sweep ids, criterion)");
  plot->add_flag("--bands", pa->bands,
                 "Draw the 95% band at ranks with 2 seeds too (default: from 3 seeds; with 2, "
                 "Student's t is 12.7 and the band covers the axis)");
  plot->add_option("--size", pa->size,
                   "Figure size WIDTHxHEIGHT in px, e.g. 640x400 (200-10000 each); the plot area "
                   "takes what the legend and text leave");
  plot->add_option("--font-size", pa->font_size,
                   "Base text size in px, 6-40; other text scales with it")
      ->capture_default_str();
  plot->callback([command, pa] {
    command->action = [pa](Client* c) { return Plot(c, *pa); };
  });
}

}  // namespace ranksweep::client
