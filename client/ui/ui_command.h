// `ranksweep ui`: the subcommand's flags and what it runs. The CLI's main
// registers it with AddUiSubcommand and calls RunUi with the channel built
// from its global flags (--addr, --timeout, --tls-ca, RANKSWEEP_TOKEN).
#ifndef RANKSWEEP_CLIENT_UI_UI_COMMAND_H_
#define RANKSWEEP_CLIENT_UI_UI_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "client/ui/grpc_backend.h"

namespace ranksweep::client::ui {

struct UiFlags {
  std::string listen = "127.0.0.1:8080";
  bool allow_remote = false;
  bool read_only = false;
};

// A new action key: 64 hex digits from the kernel's random source
// (getrandom); Internal when that fails.
absl::StatusOr<std::string> NewActionKey();

// Adds the `ui` subcommand and its flags to `app`; `flags` outlives parsing.
CLI::App* AddUiSubcommand(CLI::App* app, UiFlags* flags);

// Serves the dashboard until SIGINT or SIGTERM. Prints
// "dashboard at http://HOST:PORT/ (coordinator ADDR)" on stdout once it
// listens, then, unless --read-only, "manage sweeps at
// http://HOST:PORT/#key=KEY": the link whose browser may act (a new random
// key each run; the page keeps it and sends it with every action). Returns the CLI's exit code: 0 after a signal, 1 for a bad
// --listen or one that cannot be bound.
int RunUi(const UiFlags& flags, Coordinator coordinator);

}  // namespace ranksweep::client::ui

#endif  // RANKSWEEP_CLIENT_UI_UI_COMMAND_H_
