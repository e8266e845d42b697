// ranksweepd: the ranksweep coordinator. Opens (or creates) the SQLite
// database, recovers the state a previous process left, and serves
// SweepService and WorkerService over gRPC, with the standard health service
// and server reflection. Prints "ranksweepd listening on HOST:PORT" (the
// bound port, also for --listen=...:0) on stdout once it serves; logs events
// on stderr. SIGTERM or SIGINT shuts it down cleanly. One ranksweepd serves a
// database and a port at a time: a second one on either, or one on a
// database it cannot write, exits 5 at start-up (docs/ARCHITECTURE.md).
//
// Every ranksweep.v1 call needs a bearer token (docs/SECURITY.md) unless the
// server runs with --insecure-local, which only a loopback --listen address
// may use. --tls-cert/--tls-key serve TLS.
//
// `ranksweepd token create|list|revoke` manages the tokens in the same
// database, also while a server runs on it: a new or revoked token takes
// effect on the server's next call.
//
// Exit codes (common/exit_codes.h): 0 done; 1 bad flags or arguments; 5 a
// runtime failure (database in use or not writable, port in use).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "ranksweep_build_id.h"  // RANKSWEEP_BUILD_ID (cmake/BuildId.cmake)
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/exit_codes.h"
#include "common/flag_help.h"
#include "common/flag_names.h"
#include "common/version.h"
#include "common/status_macros.h"
#include "server/core/auth.h"
#include "server/core/clock.h"
#include "server/core/log.h"
#include "server/core/store.h"
#include "server/server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "Address to serve on, HOST:PORT; port 0 picks a free port (printed at start-up)");
ABSL_FLAG(std::string, db, "ranksweep.db", "SQLite database file; created if missing");
ABSL_FLAG(int, lease_seconds, 60,
          "How long a lease lasts without a heartbeat before its cells go back to pending");
ABSL_FLAG(int, max_attempts, 3, "Leases a cell may use before it is marked FAILED");
ABSL_FLAG(int, max_message_bytes, 64 << 20, "Largest gRPC message accepted or sent");
ABSL_FLAG(int64_t, max_task_memory_bytes, int64_t{64} << 30,
          "Reject a sweep any of whose cells, for one seed, is estimated to need more memory "
          "than this (docs/LIMITS.md); 0 = no limit");
ABSL_FLAG(int, call_threads, 64,
          "Threads that run RegisterWorker, Heartbeat and FailTask calls (1..1024); as many "
          "of them can wait for one commit");
ABSL_FLAG(int, busy_timeout_ms, 5000,
          "How long a database write waits for a lock held by another process");
ABSL_FLAG(bool, insecure_local, false,
          "Serve without authentication: every caller is the admin \"local\". Only with a "
          "loopback --listen address (127.0.0.0/8, [::1], localhost)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain to serve TLS with (needs --tls-key); empty = plaintext");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, metrics_listen, "",
          "Serve Prometheus metrics at http://HOST:PORT/metrics (docs/DEPLOY.md); port 0 picks "
          "a free port (printed at start-up); empty = no metrics endpoint");
ABSL_FLAG(std::vector<std::string>, trusted_build, {},
          "A worker build id whose results the result cache may serve, besides this "
          "coordinator's own (printed by --version); repeat it or separate ids with commas "
          "(docs/SECURITY.md, \"The result cache\")");
ABSL_FLAG(bool, shared_cache, false,
          "Let the result cache serve one user's sweeps from results trained for another's "
          "(off: each user is served only from their own sweeps; docs/SECURITY.md)");
ABSL_FLAG(std::string, name, "", "token create/revoke: the token's name, 1..64 of [A-Za-z0-9._-]");
ABSL_FLAG(std::string, role, "", "token create: admin, user or worker");

namespace ranksweep::server {
namespace {

// Every --trusted-build given, in order (Abseil keeps only the last
// occurrence of a flag; main collects them all before parsing).
std::vector<std::string>& TrustedBuilds() {
  static auto* builds = new std::vector<std::string>();
  return *builds;
}

constexpr int kUsageError = kExitUsage;  // the one table: common/exit_codes.h

// Exit code for a failed token command: bad input is a usage error.
int ExitCodeFor(const absl::Status& status) {
  return ::ranksweep::ExitCodeFor(status);
}

// Opens (and migrates) the database of --db with --busy-timeout-ms for a
// token command; on failure says why on stderr and returns null.
std::unique_ptr<Store> OpenStore(const std::string& db) {
  StoreOptions options;
  options.busy_timeout_ms = absl::GetFlag(FLAGS_busy_timeout_ms);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, options);
  if (!store.ok()) {
    std::cerr << "ranksweepd: cannot open " << db << ": " << store.status() << "\n";
    return nullptr;
  }
  return *std::move(store);
}

// `ranksweepd token create|list|revoke`.
int TokenCommand(const std::vector<std::string>& args) {
  const std::string verb = args.size() >= 2 ? args[1] : "";
  const std::string name = absl::GetFlag(FLAGS_name);
  const std::string role_name = absl::GetFlag(FLAGS_role);
  const bool create = verb == "create", list = verb == "list", revoke = verb == "revoke";
  if (args.size() != 2 || !(create || list || revoke)) {
    std::cerr << "usage: ranksweepd token create --db=FILE --name=NAME --role=admin|user|worker\n"
                 "       ranksweepd token list --db=FILE\n"
                 "       ranksweepd token revoke --db=FILE --name=NAME\n";
    return kUsageError;
  }
  if ((create || revoke) && name.empty()) {
    std::cerr << "ranksweepd: token " << verb << " needs --name\n";
    return kUsageError;
  }
  if (list && !name.empty()) {
    std::cerr << "ranksweepd: token list takes no --name\n";
    return kUsageError;
  }
  if (create != !role_name.empty()) {
    std::cerr << (create ? "ranksweepd: token create needs --role (admin, user or worker)\n"
                         : "ranksweepd: --role is only for token create\n");
    return kUsageError;
  }
  Role role = Role::kUser;
  if (create) {
    absl::StatusOr<Role> parsed = ParseRole(role_name);
    if (!parsed.ok()) {
      std::cerr << "ranksweepd: --role: " << parsed.status().message() << "\n";
      return kUsageError;
    }
    role = *parsed;
  }

  const std::string db = absl::GetFlag(FLAGS_db);
  // create may make the database, so that the first admin token can exist
  // before the first start; list and revoke on a mistyped path must not.
  if (!create && access(db.c_str(), F_OK) != 0) {
    std::cerr << "ranksweepd: no database at " << db << " (--db)\n";
    return kUsageError;
  }
  std::unique_ptr<Store> store = OpenStore(db);
  if (store == nullptr) return kExitFailure;
  RealClock clock;
  TokenStore tokens(store.get(), &clock);

  if (create) {
    absl::StatusOr<std::string> token = tokens.Create(name, role);
    if (!token.ok()) {
      std::cerr << "ranksweepd: " << token.status().message() << "\n";
      return ExitCodeFor(token.status());
    }
    // stdout carries the token alone, so that it can be redirected into a
    // secret file; the note goes to stderr.
    std::cout << *token << std::endl;
    std::cerr << "ranksweepd: created token \"" << name << "\" with role " << RoleName(role)
              << " in " << db << ". It is shown only this once; the database keeps only its "
                 "SHA-256.\n";
    return 0;
  }
  if (revoke) {
    absl::StatusOr<bool> revoked = tokens.Revoke(name);
    if (!revoked.ok()) {
      std::cerr << "ranksweepd: " << revoked.status().message() << "\n";
      return ExitCodeFor(revoked.status());
    }
    std::cerr << "ranksweepd: token \"" << name << "\" "
              << (*revoked ? "revoked" : "was already revoked") << "\n";
    return 0;
  }
  absl::StatusOr<std::vector<TokenRecord>> records = tokens.List();
  if (!records.ok()) {
    std::cerr << "ranksweepd: " << records.status().message() << "\n";
    return kExitFailure;
  }
  auto time = [](int64_t ms) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(ms), absl::UTCTimeZone());
  };
  size_t width = 4;
  for (const TokenRecord& r : *records) width = std::max(width, r.name.size());
  auto row = [&](const std::string& n, const std::string& ro, const std::string& created,
                 const std::string& revoked) {
    std::cout << n << std::string(width - n.size() + 2, ' ') << ro
              << std::string(8 - ro.size(), ' ') << created
              << std::string(created.size() < 22 ? 22 - created.size() : 1, ' ') << revoked << "\n";
  };
  row("NAME", "ROLE", "CREATED", "REVOKED");
  for (const TokenRecord& r : *records) {
    row(r.name, RoleName(r.role), time(r.created_unix_ms),
        r.revoked_unix_ms == 0 ? "-" : time(r.revoked_unix_ms));
  }
  std::cout << std::flush;
  return 0;
}

// Sets the gauge `name`{state} to each state's count from the store, 0 for
// the listed states that have none (so that every state has its series);
// only the zeros when the store cannot count, which is logged.
// The server until SIGTERM or SIGINT (server/server.h).
int Serve() {
  if (!absl::GetFlag(FLAGS_name).empty() || !absl::GetFlag(FLAGS_role).empty()) {
    std::cerr << "ranksweepd: --name and --role belong to `ranksweepd token`\n";
    return kUsageError;
  }
  ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.db = absl::GetFlag(FLAGS_db);
  options.lease_seconds = absl::GetFlag(FLAGS_lease_seconds);
  options.max_attempts = absl::GetFlag(FLAGS_max_attempts);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.max_task_memory_bytes = absl::GetFlag(FLAGS_max_task_memory_bytes);
  options.call_threads = absl::GetFlag(FLAGS_call_threads);
  options.busy_timeout_ms = absl::GetFlag(FLAGS_busy_timeout_ms);
  options.insecure_local = absl::GetFlag(FLAGS_insecure_local);
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.trusted_builds = TrustedBuilds();
  options.shared_cache = absl::GetFlag(FLAGS_shared_cache);
  options.build_id = RANKSWEEP_BUILD_ID;
  // Bad options are refused before anything is touched.
  if (absl::Status ok = CheckServerOptions(options); !ok.ok()) {
    std::cerr << "ranksweepd: " << ok.message() << "\n";
    return kUsageError;
  }

  // SIGTERM / SIGINT are taken by sigwait below; block them before any
  // thread starts so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A file size limit (ulimit -f) would kill the process with SIGXFSZ at
  // the first write past it, without a word. Ignored, the write fails
  // (EFBIG) and so does the call, with an error in the log.
  signal(SIGXFSZ, SIG_IGN);
  if (struct rlimit fsize; getrlimit(RLIMIT_FSIZE, &fsize) == 0 &&
                           fsize.rlim_cur != RLIM_INFINITY) {
    LogEvent("WARNING: file size limit (ulimit -f) of %d bytes: SIGXFSZ is ignored, a write "
             "past the limit fails and the call that made it gets an error",
             static_cast<int64_t>(fsize.rlim_cur));
  }

  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  if (!server.ok()) {
    std::cerr << "ranksweepd: " << server.status().message() << "\n";
    return server.status().code() == absl::StatusCode::kInvalidArgument ? kUsageError
                                                                         : kExitFailure;
  }
  // The metrics line comes before the "listening" line, which tells scripts
  // that all is up.
  if (const std::string metrics = (*server)->metrics_address(); !metrics.empty()) {
    std::cout << "ranksweepd metrics on http://" << metrics << "/metrics\n";
  }
  std::cout << "ranksweepd listening on " << (*server)->address() << std::endl;  // flushes

  int sig = 0;
  sigwait(&signals, &sig);
  LogEvent("ranksweepd: %s received, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Stop();
  return 0;
}

}  // namespace
}  // namespace ranksweep::server

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, which turns on absl::Mutex's lock-order
  // (deadlock) detection: every lock and unlock, gRPC's included, then updates a
  // global lock graph under a global lock. That is a debugging aid; the server
  // does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(
      "ranksweep coordinator: serves SweepService and WorkerService over gRPC.\n"
      "Usage: ranksweepd [--listen=HOST:PORT] [--db=FILE] [--lease-seconds=N] "
      "[--max-attempts=N] [--tls-cert=PEM --tls-key=PEM] [--insecure-local]\n"
      "       ranksweepd token create --db=FILE --name=NAME --role=admin|user|worker\n"
      "       ranksweepd token list --db=FILE\n"
      "       ranksweepd token revoke --db=FILE --name=NAME");
  // --help lists this file's flags (Abseil's default looks for a file named
  // after the program); --version prints what every ranksweep binary prints.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "server/main.cc");
  };
  usage.version_string = [] { return ranksweep::VersionText("ranksweepd", RANKSWEEP_BUILD_ID); };
  absl::SetFlagsUsageConfig(usage);
  // --help names the flags with dashes, as the docs do (common/flag_help.h).
  if (ranksweep::PrintFlagsHelpIfAsked(argc, argv, "ranksweepd", "server/main.cc", std::cout)) {
    return 0;
  }
  if (auto unknown = ranksweep::UnknownFlagError(argc, argv, "ranksweepd", "server/main.cc")) {
    std::cerr << *unknown;
    return ranksweep::kExitUsage;
  }
  // Flags are defined with underscores; the dashed spelling is rewritten to
  // them (common/flag_names.h).
  std::vector<std::string> underscored = ranksweep::UnderscoreFlagNames(argc, argv);
  // --trusted-build may be repeated: collect every occurrence (each a
  // comma-separated list) before Abseil keeps the last.
  for (size_t i = 1; i < underscored.size(); ++i) {
    const std::string& a = underscored[i];
    std::string value;
    if (absl::StartsWith(a, "--trusted_build=")) {
      value = a.substr(std::string("--trusted_build=").size());
    } else if (a == "--trusted_build" && i + 1 < underscored.size()) {
      value = underscored[i + 1];
    } else {
      continue;
    }
    for (absl::string_view id : absl::StrSplit(value, ',')) {
      ranksweep::server::TrustedBuilds().emplace_back(id);
    }
  }
  std::vector<char*> parsed_argv = ranksweep::ArgvOf(underscored);
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(underscored.size()), parsed_argv.data());
  const std::vector<std::string> args(positional.begin() + 1, positional.end());
  if (args.empty()) return ranksweep::server::Serve();
  if (args[0] == "token") return ranksweep::server::TokenCommand(args);
  std::cerr << "ranksweepd: unknown command \"" << args[0]
            << "\"; the only subcommand is `token` (see --help)\n";
  return ranksweep::server::kUsageError;
}
