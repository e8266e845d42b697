// ranksweepd: the ranksweep coordinator. Opens (or creates) the SQLite
// database, recovers the state a previous process left, and serves
// SweepService and WorkerService over gRPC, with the standard health service
// and server reflection. Prints "ranksweepd listening on HOST:PORT" (the
// bound port, also for --listen=...:0) on stdout once it serves; logs events
// on stderr. SIGTERM or SIGINT shuts it down cleanly. One ranksweepd serves a
// database and a port at a time: a second one on either, or one on a
// database it cannot write, exits 1 at start-up (docs/ARCHITECTURE.md).
//
// Every ranksweep.v1 call needs a bearer token (docs/SECURITY.md) unless the
// server runs with --insecure-local, which only a loopback --listen address
// may use. --tls-cert/--tls-key serve TLS.
//
// `ranksweepd token create|list|revoke` manages the tokens in the same
// database, also while a server runs on it: a new or revoked token takes
// effect on the server's next call.
//
// Exit codes: 0 done; 1 a runtime failure (database in use or not
// writable, port in use); 2 bad flags or arguments.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

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
#include "server/core/coordinator.h"
#include "server/core/db_lock.h"
#include "server/core/log.h"
#include "server/core/store.h"
#include "server/core/metrics.h"
#include "server/metrics_http.h"
#include "server/service/malformed_request.h"
#include "server/service/metrics_interceptor.h"
#include "server/service/sweep_admin_service.h"
#include "server/service/sweep_service.h"
#include "server/service/worker_service.h"

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

// Replaces the port of HOST:PORT (or [V6]:PORT) with `port`.
std::string WithPort(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  return host + ":" + std::to_string(port);
}

constexpr int kUsageError = kExitUsage;  // the one table: common/exit_codes.h

// Exit code for a failed token command: bad input is a usage error.
int ExitCodeFor(const absl::Status& status) {
  return ::ranksweep::ExitCodeFor(status);
}

// Opens (and migrates) the database of --db with --busy-timeout-ms; on
// failure says why on stderr and returns null.
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

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Checks that `cert_pem` and `key_pem` are a certificate and its private key,
// so that a wrong file fails at start-up instead of at the first handshake.
absl::Status CheckKeyPair(const std::string& cert_pem, const std::string& key_pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> cert_bio(
      BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())), &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (cert == nullptr) return absl::InvalidArgumentError("--tls-cert: no PEM certificate");
  std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), &BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (key == nullptr) {
    return absl::InvalidArgumentError("--tls-key: no unencrypted PEM private key");
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError("--tls-key is not the private key of --tls-cert");
  }
  return absl::OkStatus();
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
template <typename State>
void SetCountsByState(MetricsRegistry* m, const char* name, std::initializer_list<State> states,
                      const absl::StatusOr<std::map<State, int64_t>>& counts) {
  m->ClearGauge(name);
  for (State state : states) m->Set(name, {{"state", Name(state)}}, 0);
  if (!counts.ok()) {
    LogEvent("metrics: cannot count %s: %s", name, counts.status().ToString());
    return;
  }
  for (const auto& [state, n] : *counts) {
    m->Set(name, {{"state", Name(state)}}, static_cast<double>(n));
  }
}

int Serve() {
  const std::string listen = absl::GetFlag(FLAGS_listen);
  const std::string db = absl::GetFlag(FLAGS_db);
  const int lease_seconds = absl::GetFlag(FLAGS_lease_seconds);
  const int max_attempts = absl::GetFlag(FLAGS_max_attempts);
  const int max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  if (lease_seconds < 1 || lease_seconds > 86400) {
    std::cerr << "ranksweepd: --lease-seconds must be 1..86400\n";
    return kUsageError;
  }
  if (max_attempts < 1 || max_attempts > 100) {
    std::cerr << "ranksweepd: --max-attempts must be 1..100\n";
    return kUsageError;
  }
  const int64_t max_task_memory_bytes = absl::GetFlag(FLAGS_max_task_memory_bytes);
  if (max_task_memory_bytes < 0) {
    std::cerr << "ranksweepd: --max-task-memory-bytes must be >= 0 (0 = no limit)\n";
    return kUsageError;
  }
  if (max_message_bytes < 1 << 20) {
    std::cerr << "ranksweepd: --max-message-bytes must be at least 1 MiB\n";
    return kUsageError;
  }
  // A duration of 0 or less would make every write fail at once.
  if (const int busy = absl::GetFlag(FLAGS_busy_timeout_ms); busy < 1) {
    std::cerr << "ranksweepd: --busy-timeout-ms must be at least 1 (milliseconds), got " << busy
              << "\n";
    return kUsageError;
  }
  for (const std::string& build : TrustedBuilds()) {
    if (build.empty() || build.size() > 256) {
      std::cerr << "ranksweepd: --trusted-build must be a build id of 1..256 bytes, got "
                << build.size() << " bytes\n";
      return kUsageError;
    }
  }
  const int call_threads = absl::GetFlag(FLAGS_call_threads);
  if (call_threads < 1 || call_threads > 1024) {
    std::cerr << "ranksweepd: --call-threads must be 1..1024, got " << call_threads << "\n";
    return kUsageError;
  }
  if (!absl::GetFlag(FLAGS_name).empty() || !absl::GetFlag(FLAGS_role).empty()) {
    std::cerr << "ranksweepd: --name and --role belong to `ranksweepd token`\n";
    return kUsageError;
  }
  const bool insecure_local = absl::GetFlag(FLAGS_insecure_local);
  const bool loopback = IsLoopbackListenAddress(listen);
  if (insecure_local && !loopback) {
    std::cerr << "ranksweepd: --insecure-local turns authentication off and is allowed only on "
                 "a loopback address (127.0.0.1, [::1], localhost), not --listen="
              << listen
              << ". To serve other machines, create tokens with `ranksweepd token create` "
                 "and drop --insecure-local (docs/SECURITY.md).\n";
    return kUsageError;
  }
  const std::string tls_cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string tls_key = absl::GetFlag(FLAGS_tls_key);
  if (tls_cert.empty() != tls_key.empty()) {
    std::cerr << "ranksweepd: --tls-cert and --tls-key go together\n";
    return kUsageError;
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!tls_cert.empty()) {
    absl::StatusOr<std::string> cert = ReadFile(tls_cert, "--tls-cert");
    absl::StatusOr<std::string> key = ReadFile(tls_key, "--tls-key");
    absl::Status pair = !cert.ok() ? cert.status()
                        : !key.ok() ? key.status()
                                    : CheckKeyPair(*cert, *key);
    if (!pair.ok()) {
      std::cerr << "ranksweepd: " << pair.message() << "\n";
      return kUsageError;
    }
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    credentials = grpc::SslServerCredentials(ssl);
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

  // One coordinator per database: two would hand out the same cells and
  // fencing tokens. The lock is taken before SQLite opens the file, so a
  // second coordinator exits without touching it; it outlives the store
  // (declared first, destroyed last; server/core/db_lock.h says why).
  absl::StatusOr<std::unique_ptr<DatabaseLock>> db_lock = DatabaseLock::Acquire(db);
  if (!db_lock.ok()) {
    std::cerr << "ranksweepd: " << db_lock.status().message() << "\n";
    return kExitFailure;
  }
  std::unique_ptr<Store> store = OpenStore(db);
  if (store == nullptr) return kExitFailure;
  // A read-only file opens fine and would fail only at the first write.
  if (absl::Status writable = store->CheckWritable(); !writable.ok()) {
    std::cerr << "ranksweepd: " << writable.message() << "\n";
    return kExitFailure;
  }

  RealClock clock;
  CoordinatorOptions options;
  options.lease_ms = int64_t{lease_seconds} * 1000;
  options.max_attempts = max_attempts;
  // The result cache serves only results trained by workers of this build.
  options.code_version = RANKSWEEP_BUILD_ID;
  options.trusted_builds = TrustedBuilds();
  options.shared_cache = absl::GetFlag(FLAGS_shared_cache);
  LogEvent("result cache: results of build %s%s%s, served %s", RANKSWEEP_BUILD_ID,
           options.trusted_builds.empty() ? "" : " and the trusted builds ",
           absl::StrJoin(options.trusted_builds, ", "),
           options.shared_cache ? "to every user (--shared-cache)"
                                : "only to the user whose sweeps they were trained for");
  options.max_task_memory_bytes = max_task_memory_bytes;
  Coordinator coordinator(store.get(), &clock, options);
  absl::StatusOr<RecoveryReport> recovered = coordinator.Recover();
  if (!recovered.ok()) {
    std::cerr << "ranksweepd: recovery failed: " << recovered.status() << "\n";
    return kExitFailure;
  }

  // Operators' metrics (--metrics-listen): counted whether served or not,
  // which costs a map update per call.
  MetricsRegistry metrics;
  DefineCoordinatorMetrics(&metrics, RANKSWEEP_BUILD_ID);
  // Made now, before the endpoint serves, so its zero samples of
  // ranksweep_rpcs_total are there from the first scrape.
  auto metrics_interceptor = std::make_unique<MetricsInterceptorFactory>(&metrics);
  store->SetCommitObserver(
      [&metrics](double seconds) { metrics.Observe("ranksweep_store_commit_seconds", {}, seconds); });
  metrics.AddCollector([&coordinator](MetricsRegistry* m) {
    SetCountsByState(m, "ranksweep_sweeps",
                     {SweepState::kRunning, SweepState::kDone, SweepState::kFailed,
                      SweepState::kCancelled},
                     coordinator.CountSweepsByState());
    SetCountsByState(m, "ranksweep_cells",
                     {CellState::kPending, CellState::kLeased, CellState::kDone,
                      CellState::kFailed, CellState::kCancelled, CellState::kPruned},
                     coordinator.CountCellsByState());
    m->ClearGauge("ranksweep_workers_alive");
    absl::StatusOr<std::vector<WorkerInfo>> workers = coordinator.ListWorkers();
    if (!workers.ok()) {
      LogEvent("metrics: cannot list workers: %s", workers.status().ToString());
      return;
    }
    // The device a worker registered is its own text: the label takes it
    // only from a fixed set, so that registrations cannot add series.
    std::map<std::string, int> alive;
    for (const WorkerInfo& w : *workers) {
      const std::string device = w.device == "cpu" || w.device == "cuda" ? w.device : "other";
      alive[device] += w.alive ? 1 : 0;
    }
    for (const auto& [device, n] : alive) {
      m->Set("ranksweep_workers_alive", {{"device", device}}, n);
    }
  });
  metrics.Add("ranksweep_leases_expired_total", {}, static_cast<double>(recovered->leases_expired));
  std::unique_ptr<MetricsHttpServer> metrics_http;
  if (const std::string address = absl::GetFlag(FLAGS_metrics_listen); !address.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
        MetricsHttpServer::Start(address, &metrics);
    if (!started.ok()) {
      std::cerr << "ranksweepd: " << started.status().message() << "\n";
      return started.status().code() == absl::StatusCode::kInvalidArgument ? kUsageError
                                                                            : kExitFailure;
    }
    metrics_http = *std::move(started);
    LogEvent("metrics on http://%s/metrics", metrics_http->address());
    // Before the "listening" line, which tells scripts that all is up.
    std::cout << "ranksweepd metrics on http://" << metrics_http->address() << "/metrics\n";
  }

  TokenStore tokens(store.get(), &clock);
  const Authorizer authorizer = insecure_local ? Authorizer::InsecureLocal() : Authorizer(&tokens);
  if (insecure_local) {
    LogEvent("WARNING: --insecure-local: no authentication; every caller is the admin \"local\"");
  } else {
    absl::StatusOr<std::vector<TokenRecord>> records = tokens.List();
    if (!records.ok()) {
      std::cerr << "ranksweepd: cannot read tokens: " << records.status() << "\n";
      return kExitFailure;
    }
    int active = 0;
    for (const TokenRecord& r : *records) active += r.revoked_unix_ms == 0 ? 1 : 0;
    LogEvent("authentication on: %d active token(s)%s", active,
             active > 0 ? ""
                        : "; create one with `ranksweepd token create --db=FILE --name=NAME "
                          "--role=admin`");
    if (!loopback && tls_cert.empty()) {
      LogEvent("WARNING: serving %s without TLS: bearer tokens cross the network in plaintext; "
               "use --tls-cert/--tls-key",
               listen);
    }
  }

  SweepServiceImpl sweep_service(&coordinator, &authorizer);
  WorkerServiceImpl worker_service(&coordinator, &authorizer, call_threads);
  SweepAdmin sweep_admin(store.get(), &coordinator);  // server/core/sweep_admin.h
  SweepAdminServiceImpl sweep_admin_service(&sweep_admin, &coordinator, &authorizer);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, credentials, &port);
  // gRPC sets SO_REUSEPORT by default, which lets a second coordinator bind
  // the same port and take half of the connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(max_message_bytes);
  builder.RegisterService(&sweep_service);
  builder.RegisterService(&worker_service);
  builder.RegisterService(&sweep_admin_service);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  // First, so that the metrics count the status the caller gets.
  interceptors.push_back(std::make_unique<MalformedRequestInterceptorFactory>());
  interceptors.push_back(std::move(metrics_interceptor));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "ranksweepd: cannot listen on " << listen
              << " (is the port in use by another process?)\n";
    return kExitFailure;
  }

  // Reclaims expired leases a few times per lease period (at least every
  // second), so a dead worker's cells return within about one lease.
  std::mutex expiry_mu;
  std::condition_variable expiry_cv;
  bool stopping = false;
  const auto period = std::chrono::milliseconds(std::min<int64_t>(1000, options.lease_ms / 4));
  std::thread expiry([&] {
    std::unique_lock<std::mutex> lock(expiry_mu);
    while (!expiry_cv.wait_for(lock, period, [&] { return stopping; })) {
      lock.unlock();
      absl::StatusOr<int64_t> n = coordinator.ExpireLeases();
      if (!n.ok()) LogEvent("lease expiry failed: %s", n.status().ToString());
      if (n.ok()) metrics.Add("ranksweep_leases_expired_total", {}, static_cast<double>(*n));
      lock.lock();
    }
  });

  const std::string bound = WithPort(listen, port);
  LogEvent("ranksweepd serving %s on %s with %s (lease %ds, max attempts %d)", db, bound,
           tls_cert.empty() ? "plaintext" : "TLS", lease_seconds, max_attempts);
  std::cout << "ranksweepd listening on " << bound << std::endl;  // flushes

  int sig = 0;
  sigwait(&signals, &sig);
  LogEvent("ranksweepd: %s received, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");

  {
    std::lock_guard<std::mutex> lock(expiry_mu);
    stopping = true;
  }
  expiry_cv.notify_all();
  expiry.join();
  if (metrics_http != nullptr) metrics_http->Stop();
  server->GetHealthCheckService()->SetServingStatus(false);
  // Parked long-polls and open watches end first, so that the server's
  // shutdown does not wait on them.
  worker_service.Shutdown();
  sweep_service.Shutdown();
  sweep_admin_service.Shutdown();
  // Calls still running get 5 s to finish; so do idle client connections,
  // which grpc waits for too. A call cut off here is safe to repeat:
  // CompleteTasks is all-or-nothing and idempotent under its lease.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
  server.reset();
  const Store::WriteStats stats = store->write_stats();
  LogEvent("ranksweepd: %d writes in %d commits this run; %d transactions rolled back for a "
           "failed write and run again without it",
           stats.writes, stats.commits, stats.reruns);
  store.reset();  // closes the database (and checkpoints the WAL)
  LogEvent("ranksweepd stopped");
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
