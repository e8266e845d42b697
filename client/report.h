// `ranksweep report`: a Markdown page about one or more sweeps, built from
// what the coordinator answers (docs/ANALYSIS.md, "The report"). Per sweep:
// its state, its provenance (builds, LibTorch, devices, dates, wall time),
// the transition ranks under each criterion asked for (train, and test when
// the dataset has a test split), the summary table per criterion and split,
// the plots, and the spec's fields that differ from the defaults. Input is
// plain data (the sweep, its grouped replies, its done rows); output is the
// page and the SVG files, so the page is unit-tested line by line. No RPCs,
// no I/O.
//
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_CLIENT_REPORT_H_
#define RANKSWEEP_CLIENT_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "client/plot.h"
#include "common/spec/spec.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep::client {

// What the report shows of one sweep.
struct ReportSweep {
  v1::SweepInfo sweep;  // GetSweep's answer
  SweepSpec spec;       // sweep.spec() as the spec vocabulary reads it
  // One grouped QueryResults reply per criterion of ReportCriteria, in that
  // order (each says its criterion).
  std::vector<v1::QueryResultsResponse> summaries;
  std::vector<v1::ResultRow> rows;  // its done rows: the plots' points
};

struct ReportFile {
  std::string name;      // relative to the output directory
  std::string contents;
};

// The three standard criteria of a sweep with `seeds` seeds: "all",
// "mean:0.99", and "seeds:K" with K = ceil(seeds / 2) (at least half the
// seeds exact) unless that is `all` again (one seed).
std::vector<std::string> ReportCriteria(int seeds);

// `report --criteria`: "" is "all" alone; else a comma-separated list of
// criteria (all, mean:X, seeds:K) in canonical text, or "standard" for
// ReportCriteria(seeds). InvalidArgument naming --criteria for a criterion
// ParseCriterion refuses or one given twice.
absl::StatusOr<std::vector<std::string>> ParseReportCriteria(const std::string& flag,
                                                             int seeds);

// The spec as JSON with only the fields that differ from a default
// SweepSpec of its dataset kind (each head's from a default HeadSpec), the
// name and the dataset's and each head's kind always: what `submit -f` reads back into the same spec. The top
// object one key a line, each value on one line where it fits in 96
// characters.
std::string NonDefaultSpecJson(const SweepSpec& spec);

// The provenance lines of a sweep (Markdown list items, each ending in a
// newline), from what the coordinator stores: the builds and LibTorch
// versions of the workers that trained its done rows, their devices (each
// with its count of cells), when it was submitted and finished, and the
// training wall time of the cells it trained (cells served from the result
// cache counted apart).
std::string ProvenanceText(const v1::SweepInfo& sweep, const std::vector<v1::ResultRow>& rows);

// Adds one sweep's heads, done seeds and theory bounds to `plot`, as
// `ranksweep plot` and the report draw them: one line per head, or with
// recipe axes one per (head, recipe) labelled "kernel/elu1 lr=0.003"
// (RecipeLabel), head by head in recipe order; `metric` "error" or
// "exact_accuracy" of the test split (`test`) or the train split. With
// `several` sweeps on one figure the heads and bounds are prefixed with the
// sweep's name and the caption line names it; alone, the sweep also sets
// the title and subtitle.
void AddSweepToPlot(const std::string& sweep_id, const SweepSpec& spec,
                    const std::vector<v1::ResultRow>& rows, const v1::DatasetFacts& facts,
                    const std::string& metric, bool test, bool several, PlotInput* plot);

// The figure of one sweep's error on one split, as `ranksweep plot` draws it.
PlotInput SweepPlot(const std::string& sweep_id, const SweepSpec& spec,
                    const std::vector<v1::ResultRow>& rows, const v1::DatasetFacts& facts,
                    bool test);

// "report.md" first, then one SVG per sweep and split with a done cell
// ("1-NAME-train.svg", "1-NAME-test.svg": the sweep's place in `sweeps`
// and its name with anything but [A-Za-z0-9._-] made '_'). A sweep with a
// numeric dataset axis also gets a "Transition against the problem size"
// section (LawText) and the figure of each split's transition against the
// axis ("1-NAME-m-train.svg", "1-NAME-m-test.svg").
std::vector<ReportFile> BuildReport(const std::vector<ReportSweep>& sweeps);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_REPORT_H_
