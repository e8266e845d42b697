#include "client/ui/ui_command.h"

#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <thread>

#include "client/format.h"
#include "client/ui/http_server.h"
#include "client/ui/listen.h"

namespace ranksweep::client::ui {

CLI::App* AddUiSubcommand(CLI::App* app, UiFlags* flags) {
  CLI::App* ui = app->add_subcommand(
      "ui", "Serve a web dashboard of the coordinator's sweeps and workers on this machine");
  ui->footer(
      "The dashboard calls the coordinator with --addr, --tls_ca and RANKSWEEP_TOKEN, so the\n"
      "browser holds no token and the coordinator opens no port. Whoever reaches the dashboard\n"
      "acts as you: it listens on loopback only unless --allow-remote. Stop it with Ctrl-C.");
  ui->add_option("--listen", flags->listen, "HOST:PORT to serve on; port 0 = any free port")
      ->capture_default_str();
  ui->add_flag("--allow-remote", flags->allow_remote,
               "Allow a --listen address that is not loopback (anyone who reaches it uses "
               "your token)");
  return ui;
}

int RunUi(const UiFlags& flags, Coordinator coordinator) {
  absl::StatusOr<ListenAddress> address = ParseListenAddress(flags.listen, flags.allow_remote);
  if (!address.ok()) {
    std::cerr << "ranksweep: " << address.status().message() << "\n";
    return kExitUsage;
  }
  // SIGINT and SIGTERM are taken by a thread of their own (sigwait), so that
  // stopping the server happens outside a signal handler. Blocked before
  // any thread starts, so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string addr = coordinator.addr;
  GrpcBackend backend(std::move(coordinator));
  DashboardServer server(&backend, *address, flags.allow_remote);
  absl::StatusOr<int> port = server.Bind();
  if (!port.ok()) {
    std::cerr << "ranksweep: " << port.status().message() << "\n";
    return kExitUsage;
  }
  const bool v6 = address->host.find(':') != std::string::npos;
  std::cout << "dashboard at http://" << (v6 ? "[" : "") << address->host << (v6 ? "]" : "")
            << ":" << *port << "/ (coordinator " << addr << ")" << std::endl;
  std::thread waiter([&server, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    server.Stop();
  });
  const bool served = server.Serve();
  // Serve() returning without a signal (it failed): wake the waiter.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  return served ? kExitOk : kExitServerError;
}

}  // namespace ranksweep::client::ui
