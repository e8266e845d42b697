// The subcommands of `ranksweep`, one Add* each, in files by group: each
// declares its subcommand and flags on the CLI11 app and, when parsed, sets
// the Command to run. main.cc adds them in the order --help lists them. main.cc
// wires them together; rpc.h makes the calls; format.h and sweep_views.h
// render what comes back.
//
// Ownership: the flags' values live in state each Add* allocates and the
// callbacks it installs keep alive, so they outlive parsing. Thread-safety:
// used from main's thread only.
#ifndef RANKSWEEP_CLIENT_COMMANDS_H_
#define RANKSWEEP_CLIENT_COMMANDS_H_

#include <functional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "client/rpc.h"
#include "ranksweep/v1/sweep_admin.pb.h"

namespace ranksweep::client {

// The exit codes and environment, the footer of every --help.
extern const char kHelpFooter[];

// What the parsed command line asks for: `action` runs it against the
// coordinator (its exit code back); `needs_addr` is false for what never
// calls it (presets, submit --dry-run), so a bad --addr does not stop it.
struct Command {
  std::function<int(Client*)> action;
  bool needs_addr = true;
};

// submit (with --dry-run and --watch) and presets: submit_command.cc.
void AddSubmitCommand(CLI::App* app, Command* command);
void AddPresetsCommand(CLI::App* app, Command* command);
// list, status, watch and cancel: watch_command.cc.
void AddListCommand(CLI::App* app, Command* command);
void AddStatusCommand(CLI::App* app, Command* command);
void AddWatchCommand(CLI::App* app, Command* command);
void AddCancelCommand(CLI::App* app, Command* command);
// results (per seed, --group-by, --summary; table, CSV, JSON) and plot:
// results_command.cc.
void AddResultsCommand(CLI::App* app, Command* command);
void AddPlotCommand(CLI::App* app, Command* command);
// report (a Markdown page of sweeps with plots): report_command.cc.
void AddReportCommand(CLI::App* app, Command* command);
// sweep note|tag|rename|archive|delete|retry (SweepAdminService):
// sweep_command.cc.
void AddSweepCommand(CLI::App* app, Command* command);
// The sweeps `list` shows (SweepAdminService.ListManagedSweeps, which hides
// archived sweeps unless asked); on failure reports it as "list", sets
// *exit_code and returns an error that needs no further report.
absl::StatusOr<std::vector<v1::SweepInfo>> ListManaged(
    Client* c, const v1::ListManagedSweepsRequest& req, int* exit_code);
// workers, workers quarantine and health: admin_command.cc.
void AddWorkersCommand(CLI::App* app, Command* command);
void AddHealthCommand(CLI::App* app, Command* command);

// How long `watch` keeps trying to reach a coordinator it lost mid-sweep
// (a restart, a dropped connection) unless --reconnect says otherwise.
constexpr double kDefaultReconnectSeconds = 300;

// --reconnect, for `watch` and `submit --watch`.
void AddReconnectOption(CLI::App* app, double* seconds);

// Follows a sweep until it ends. Redraws one line with '\r' on a TTY, prints
// one line per event otherwise. If the stream breaks with UNAVAILABLE or
// CANCELLED while the sweep is running (the coordinator restarted or the
// connection dropped), it opens a new one, retrying with backoff for up to
// `reconnect_seconds` (0: not at all); the sweep's state is in the store,
// so nothing is missed but the messages of the gap. Returns the exit code:
// 0 DONE, 4 FAILED or CANCELLED.
int Watch(Client& client, const std::string& sweep_id,
          double reconnect_seconds = kDefaultReconnectSeconds);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_COMMANDS_H_
