// `ranksweep report SWEEP... -o DIR [--criteria LIST]`: fetches each sweep,
// its done rows and its summary under each criterion asked for (`all`
// alone by default; ParseReportCriteria), and writes the page and plots of
// BuildReport (report.h) into DIR.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/format.h"
#include "client/report.h"
#include "common/spec/spec.h"
#include "proto/convert.h"

namespace ranksweep::client {
namespace {

struct ReportArgs {
  std::vector<std::string> sweep_ids;
  std::string output;
  std::string criteria;  // "" = all
};

int WriteReport(Client* client, const ReportArgs& a) {
  // The list is checked before any call (its seeds:K against each sweep).
  if (absl::StatusOr<std::vector<std::string>> c = ParseReportCriteria(a.criteria, 1); !c.ok()) {
    return ReportLocal(c.status());
  }
  std::vector<ReportSweep> sweeps;
  for (const std::string& id : a.sweep_ids) {
    int code = kExitOk;
    absl::StatusOr<v1::SweepInfo> sweep = GetSweep(client, id, &code);
    if (!sweep.ok()) return code;
    ReportSweep s;
    s.sweep = *std::move(sweep);
    s.spec = FromProto(s.sweep.spec());
    v1::QueryResultsRequest req;
    req.set_sweep_id(id);
    req.set_state(v1::CELL_STATE_DONE);
    grpc::Status status = QueryAllRows(client, req, &s.rows);
    if (!status.ok()) return Report(client->globals(), status, "report");
    req.set_state(v1::CELL_STATE_UNSPECIFIED);
    req.set_group_by(v1::GROUP_BY_HEAD_RANK);
    absl::StatusOr<std::vector<std::string>> criteria =
        ParseReportCriteria(a.criteria, static_cast<int>(SweepSeeds(s.spec).size()));
    if (!criteria.ok()) return ReportLocal(criteria.status());
    for (const std::string& criterion : *criteria) {
      req.set_criterion(criterion);
      v1::QueryResultsResponse& summary = s.summaries.emplace_back();
      auto ctx = client->Context();
      status = client->stub().QueryResults(ctx.get(), req, &summary);
      if (!status.ok()) return Report(client->globals(), status, "report");
    }
    sweeps.push_back(std::move(s));
  }
  const std::vector<ReportFile> files = BuildReport(sweeps);
  std::error_code ec;
  std::filesystem::create_directories(a.output, ec);
  if (ec) {
    return ReportLocal(absl::InvalidArgumentError(
        absl::StrCat("-o: cannot create directory ", a.output, ": ", ec.message())));
  }
  for (const ReportFile& f : files) {
    const std::string path = (std::filesystem::path(a.output) / f.name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << f.contents;
    out.close();
    if (!out) {
      return ReportLocal(absl::InvalidArgumentError(
          absl::StrCat("-o: cannot write ", path, ": ", std::strerror(errno))));
    }
  }
  std::cerr << "wrote " << (std::filesystem::path(a.output) / files[0].name).string() << " ("
            << sweeps.size() << (sweeps.size() == 1 ? " sweep, " : " sweeps, ")
            << files.size() - 1 << (files.size() == 2 ? " plot)\n" : " plots)\n");
  return kExitOk;
}

}  // namespace

void AddReportCommand(CLI::App* app, Command* command) {
  auto ra = std::make_shared<ReportArgs>();
  CLI::App* report = app->add_subcommand(
      "report", "Write a Markdown report of sweeps: provenance, transition ranks and summary "
                "tables (train and test), plots, the specs' non-default fields");
  report->footer(kHelpFooter);
  report->add_option("sweep", ra->sweep_ids, "Sweep ids, reported in this order")->required();
  report->add_option("-o,--output", ra->output,
                     "Directory to write report.md and its SVG plots into (created if missing)")
      ->required();
  report->add_option("--criteria", ra->criteria,
                     "Criteria to report, comma-separated: all (default), mean:X, seeds:K; or "
                     "standard for all, mean:0.99 and seeds:ceil(seeds/2)");
  report->callback([command, ra] {
    command->action = [ra](Client* c) { return WriteReport(c, *ra); };
  });
}

}  // namespace ranksweep::client
