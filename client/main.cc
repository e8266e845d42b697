// `ranksweep`: the command-line client of the coordinator. Parses the global
// flags and hands the rest to the subcommands (commands.h, one file per
// group); rpc.h holds the channel and the calls, format.h and sweep_views.h
// the rendering, spec_file.h the spec files.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "client/commands.h"
#include "client/format.h"
#include "client/hints.h"
#include "client/rpc.h"
#include "client/spec_file.h"
#include "client/ui/ui_command.h"
#include "common/flag_names.h"
#include "common/flags.h"
#include "common/version.h"
#include "ranksweep_build_id.h"  // RANKSWEEP_BUILD_ID (cmake/BuildId.cmake)

namespace ranksweep::client {

const char kHelpFooter[] = R"(Exit codes (the same in ranksweepd, ranksweep-worker, ranksweep-train):
  0  ok
  1  usage error or invalid argument (bad flags, invalid spec)
  2  coordinator unreachable or timed out
  3  not found (no such sweep)
  4  watch: the sweep ended FAILED or CANCELLED
  5  any other error (a server error)
health: 0 when SERVING, 2 when unreachable or not serving.
Environment: RANKSWEEP_ADDR is the default for --addr; RANKSWEEP_TOKEN is sent
as "authorization: Bearer TOKEN" on every call.)";

namespace {

// The first argument that is neither an option nor the value of a global
// option: where a subcommand belongs.
std::optional<std::string> FirstPositional(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--addr" || arg == "--timeout" || arg == "--tls-ca") {
      ++i;
      continue;
    }
    if (!arg.empty() && arg[0] == '-') continue;
    return arg;
  }
  return std::nullopt;
}

int Main(int argc, char** argv) {
  // `--max_steps` reads as `--max-steps` (common/flag_names.h).
  std::vector<std::string> dashed = DashFlagNames(argc, argv);
  std::vector<char*> dashed_argv = ArgvOf(dashed);
  argc = static_cast<int>(dashed.size());
  argv = dashed_argv.data();
  CLI::App app{"ranksweep: submit rank sweeps to the coordinator and query their results"};
  app.footer(kHelpFooter);
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version", [] {
    std::string text = VersionText("ranksweep", RANKSWEEP_BUILD_ID);
    text.pop_back();  // CLI11 ends the line itself
    return text;
  }, "Print the version and build id and exit");
  Globals g;
  g.addr = DefaultAddr();
  app.add_option("--addr", g.addr, "Coordinator address host:port (env RANKSWEEP_ADDR)")
      ->capture_default_str();
  app.add_option("--timeout", g.timeout_seconds, "Seconds per call; 0 = no deadline")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  if (const char* token = std::getenv("RANKSWEEP_TOKEN"); token != nullptr) g.token = token;
  app.add_option("--tls-ca", g.tls_ca,
                 "PEM file of the CA that signed the coordinator's certificate; enables TLS");

  Command command;
  AddSubmitCommand(&app, &command);
  AddPresetsCommand(&app, &command);
  AddListCommand(&app, &command);
  AddStatusCommand(&app, &command);
  AddWatchCommand(&app, &command);
  AddResultsCommand(&app, &command);
  AddPlotCommand(&app, &command);
  AddReportCommand(&app, &command);
  AddCancelCommand(&app, &command);
  AddSweepCommand(&app, &command);
  AddWorkersCommand(&app, &command);
  AddHealthCommand(&app, &command);

  // `ranksweep ui` (client/ui/).
  ui::UiFlags ui_flags;
  ui::AddUiSubcommand(&app, &ui_flags)->callback([&] {
    command.action = [&](Client* c) {
      return ui::RunUi(ui_flags, {c->channel(), g.addr, g.token, g.timeout_seconds});
    };
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // ExtrasError's name is the subcommand's when a subcommand threw it.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      if (const std::optional<std::string> unknown = UnknownFlagMessage(app, "ranksweep", argc, argv)) {
        std::cerr << "ranksweep: " << *unknown << "\n";
        return kExitUsage;
      }
    }
    if (app.get_subcommands().empty()) {
      if (const std::optional<std::string> word = FirstPositional(argc, argv)) {
        std::vector<std::string> names;
        for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
        if (std::find(names.begin(), names.end(), *word) == names.end()) {
          std::cerr << "ranksweep: unknown subcommand \"" << *word << "\""
                    << DidYouMeanSuffix(*word, names) << " (ranksweep --help lists them)\n";
          return kExitUsage;
        }
      }
    }
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (!command.action) return kExitUsage;
  if (absl::Status s = CheckAddressHasPort(g.addr, "--addr"); !s.ok() && command.needs_addr) {
    return ReportLocal(s);
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentials(g.tls_ca);
  if (!credentials.ok()) return ReportLocal(credentials.status());
  Client client(g, *std::move(credentials));
  return command.action(&client);
}

}  // namespace
}  // namespace ranksweep::client

int main(int argc, char** argv) { return ranksweep::client::Main(argc, argv); }
