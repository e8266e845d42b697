#include "client/ui/ui_command.h"

#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/format.h"
#include "client/ui/http_server.h"
#include "client/ui/listen.h"

namespace ranksweep::client::ui {
namespace {

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int) {
  const char byte = 1;
  // Nothing to do on failure: the pipe holds a byte already.
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
}

}  // namespace

absl::StatusOr<std::string> NewActionKey() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string key;
  for (unsigned char b : bytes) {
    key += kHex[b >> 4];
    key += kHex[b & 15];
  }
  return key;
}

CLI::App* AddUiSubcommand(CLI::App* app, UiFlags* flags) {
  CLI::App* ui = app->add_subcommand(
      "ui", "Serve a web dashboard of the coordinator's sweeps and workers on this machine");
  ui->footer(
      "The dashboard calls the coordinator with --addr, --tls-ca and RANKSWEEP_TOKEN, so the\n"
      "browser holds no token and the coordinator opens no port. Whoever reaches the dashboard\n"
      "reads what you may read: it listens on loopback only unless --allow-remote. Changing a\n"
      "sweep (note, tags, rename, archive, cancel, retry, delete) needs the manage link it\n"
      "prints, whose key is new each run; other browsers are viewers. Stop it with Ctrl-C.");
  ui->add_option("--listen", flags->listen, "HOST:PORT to serve on; port 0 = any free port")
      ->capture_default_str();
  ui->add_flag("--allow-remote", flags->allow_remote,
               "Allow a --listen address that is not loopback (anyone who reaches it uses "
               "your token to read)");
  ui->add_flag("--read-only", flags->read_only,
               "Print no manage link: no browser may change sweeps through this dashboard");
  return ui;
}

int RunUi(const UiFlags& flags, Coordinator coordinator) {
  absl::StatusOr<ListenAddress> address = ParseListenAddress(flags.listen, flags.allow_remote);
  if (!address.ok()) {
    std::cerr << "ranksweep: " << address.status().message() << "\n";
    return kExitUsage;
  }
  std::string key;
  if (!flags.read_only) {
    absl::StatusOr<std::string> made = NewActionKey();
    if (!made.ok()) {
      std::cerr << "ranksweep: ui: " << made.status().message() << "\n";
      return kExitServerError;
    }
    key = *made;
  }
  const std::string addr = coordinator.addr;
  GrpcBackend backend(std::move(coordinator));
  DashboardServer server(&backend, *address, flags.allow_remote, key);
  absl::StatusOr<int> port = server.Bind();
  if (!port.ok()) {
    std::cerr << "ranksweep: " << port.status().message() << "\n";
    return kExitUsage;
  }
  // SIGINT and SIGTERM write a byte to a pipe (all a handler may safely do);
  // a thread waiting on it stops the server. A handler, not a blocked mask:
  // gRPC's threads started before this function, with the signals unblocked.
  // Set before the address is printed: a caller may signal once it reads it.
  if (pipe(g_signal_pipe) != 0) {
    std::cerr << "ranksweep: ui: pipe: " << std::strerror(errno) << "\n";
    return kExitServerError;
  }
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  const bool v6 = address->host.find(':') != std::string::npos;
  const std::string base = absl::StrCat("http://", v6 ? "[" : "", address->host, v6 ? "]" : "",
                                        ":", *port, "/");
  std::cout << "dashboard at " << base << " (coordinator " << addr << ")" << std::endl;
  if (!key.empty()) {
    std::cout << "manage sweeps at " << base << "#key=" << key
              << " (whoever opens it may change and delete your sweeps)" << std::endl;
  }
  std::atomic<bool> served_out{false};
  std::thread waiter([&server, &served_out] {
    char byte = 0;
    while (read(g_signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    // httplib ignores a stop() that comes before it listens: repeat it
    // until Serve() has returned.
    while (!served_out) {
      server.Stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const bool served = server.Serve();
  served_out = true;
  // Serve() returning without a signal (it failed): wake the waiter.
  OnSignal(0);
  waiter.join();
  return served ? kExitOk : kExitServerError;
}

}  // namespace ranksweep::client::ui
