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
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ranksweep_build_id.h"  // RANKSWEEP_BUILD_ID (cmake/BuildId.cmake)
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/exit_codes.h"
#include "common/flags.h"
#include "common/version.h"
#include "common/status_macros.h"
#include "server/core/auth.h"
#include "server/core/clock.h"
#include "server/core/log.h"
#include "server/core/store.h"
#include "server/server.h"

namespace ranksweep::server {
namespace {

// The flags: the server's options, plus the token command's.
struct DaemonFlags {
  ServerOptions server;  // its defaults are the flags'
  std::string name;
  std::string role;
  std::vector<std::string> words;  // `token create|list|revoke`
};

// Registers every flag of ranksweepd on `flags`, its value in `f`.
void AddFlags(Flags& flags, DaemonFlags& f) {
  ServerOptions& o = f.server;
  flags.Add("listen", &o.listen,
            "Address to serve on, HOST:PORT; port 0 picks a free port (printed at start-up)");
  flags.Add("db", &o.db, "SQLite database file; created if missing");
  flags.Add("lease-seconds", &o.lease_seconds,
            "How long a lease lasts without a heartbeat before its cells go back to pending");
  flags.Add("max-attempts", &o.max_attempts, "Leases a cell may use before it is marked FAILED");
  flags.Add("max-message-bytes", &o.max_message_bytes, "Largest gRPC message accepted or sent");
  flags.Add("max-task-memory-bytes", &o.max_task_memory_bytes,
            "Reject a sweep any of whose cells, for one seed, is estimated to need more memory "
            "than this (docs/LIMITS.md); 0 = no limit");
  flags.Add("call-threads", &o.call_threads,
            "Threads that run RegisterWorker, Heartbeat and FailTask calls (1..1024); as many "
            "of them can wait for one commit");
  flags.Add("busy-timeout-ms", &o.busy_timeout_ms,
            "How long a database write waits for a lock held by another process");
  flags.Add("insecure-local", &o.insecure_local,
            "Serve without authentication: every caller is the admin \"local\". Only with a "
            "loopback --listen address (127.0.0.0/8, [::1], localhost)");
  flags.Add("tls-cert", &o.tls_cert,
            "PEM certificate chain to serve TLS with (needs --tls-key); empty = plaintext");
  flags.Add("tls-key", &o.tls_key, "PEM private key of --tls-cert");
  flags.Add("metrics-listen", &o.metrics_listen,
            "Serve Prometheus metrics at http://HOST:PORT/metrics (docs/DEPLOY.md); port 0 picks "
            "a free port (printed at start-up); empty = no metrics endpoint");
  flags.Add("trusted-build", &o.trusted_builds,
            "A worker build id whose results the result cache may serve, besides this "
            "coordinator's own (printed by --version); repeat it or separate ids with commas "
            "(docs/SECURITY.md, \"The result cache\")");
  flags.Add("shared-cache", &o.shared_cache,
            "Let the result cache serve one user's sweeps from results trained for another's "
            "(off: each user is served only from their own sweeps; docs/SECURITY.md)");
  flags.Add("query-cache-mb", &o.query_cache_mb,
            "MiB of replies to row queries kept and sent again while their sweep's results "
            "stay unchanged (the dashboard and scripts that ask again); 0 = none",
            0, 65536);
  flags.Add("column-block-rows", &o.column_block_rows,
            "Rows per column block: an ended sweep's rows are also kept as encoded blocks of "
            "this many rows, which a query of every row joins instead of reading the rows "
            "(docs/ARCHITECTURE.md, \"Column blocks\"); 0 = none, else 16..1048576",
            0, 1048576);
  flags.Add("name", &f.name, "token create/revoke: the token's name, 1..64 of [A-Za-z0-9._-]");
  flags.Add("role", &f.role, "token create: admin, user or worker");
  flags.TakeWords(&f.words);
}

constexpr int kUsageError = kExitUsage;  // the one table: common/exit_codes.h

// Exit code for a failed token command: bad input is a usage error.
int ExitCodeFor(const absl::Status& status) {
  return ::ranksweep::ExitCodeFor(status);
}

// Opens (and migrates) the database of --db with --busy-timeout-ms for a
// token command; on failure says why on stderr and returns null.
std::unique_ptr<Store> OpenStore(const std::string& db, int busy_timeout_ms) {
  StoreOptions options;
  options.busy_timeout_ms = busy_timeout_ms;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, options);
  if (!store.ok()) {
    std::cerr << "ranksweepd: cannot open " << db << ": " << store.status() << "\n";
    return nullptr;
  }
  return *std::move(store);
}

// `ranksweepd token create|list|revoke`.
int TokenCommand(const DaemonFlags& f) {
  const std::vector<std::string>& args = f.words;
  const std::string verb = args.size() >= 2 ? args[1] : "";
  const std::string& name = f.name;
  const std::string& role_name = f.role;
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

  const std::string& db = f.server.db;
  // create may make the database, so that the first admin token can exist
  // before the first start; list and revoke on a mistyped path must not.
  if (!create && access(db.c_str(), F_OK) != 0) {
    std::cerr << "ranksweepd: no database at " << db << " (--db)\n";
    return kUsageError;
  }
  std::unique_ptr<Store> store = OpenStore(db, f.server.busy_timeout_ms);
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
int Serve(const DaemonFlags& f) {
  if (!f.name.empty() || !f.role.empty()) {
    std::cerr << "ranksweepd: --name and --role belong to `ranksweepd token`\n";
    return kUsageError;
  }
  ServerOptions options = f.server;
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
#ifdef __GLIBC__
  // A large query builds and frees tens of MB per call (the reply on its
  // arena, the encoded bytes). By default glibc maps blocks of 128 KiB or
  // more fresh from the kernel and hands freed memory back, so every such
  // call faults its pages in again, and on a virtual machine a page fault
  // is dear (a third of a 100,000-row query's time on one). Blocks under
  // 32 MiB come from the heap instead, and up to 64 MiB freed at its top
  // stay there for the next call. Set before any thread starts: the
  // thresholds are global to every malloc arena.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
  ranksweep::Flags flags(
      "ranksweepd",
      "ranksweepd: ranksweep coordinator: serves SweepService and WorkerService over gRPC.\n"
      "Usage: ranksweepd [--listen=HOST:PORT] [--db=FILE] [--lease-seconds=N] "
      "[--max-attempts=N] [--tls-cert=PEM --tls-key=PEM] [--insecure-local]\n"
      "       ranksweepd token create --db=FILE --name=NAME --role=admin|user|worker\n"
      "       ranksweepd token list --db=FILE\n"
      "       ranksweepd token revoke --db=FILE --name=NAME",
      ranksweep::VersionText("ranksweepd", RANKSWEEP_BUILD_ID));
  ranksweep::server::DaemonFlags f;
  ranksweep::server::AddFlags(flags, f);
  if (std::optional<int> exit = flags.Parse(argc, argv, std::cout, std::cerr)) return *exit;
  if (f.words.empty()) return ranksweep::server::Serve(f);
  if (f.words[0] == "token") return ranksweep::server::TokenCommand(f);
  std::cerr << "ranksweepd: unknown command \"" << f.words[0]
            << "\"; the only subcommand is `token` (see --help)\n";
  return ranksweep::server::kUsageError;
}
