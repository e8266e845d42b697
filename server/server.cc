#include "server/server.h"

#include <chrono>
#include <initializer_list>
#include <map>
#include <utility>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/flag_file.h"
#include "common/status_macros.h"
#include "server/core/log.h"
#include "server/service/malformed_request.h"
#include "server/service/metrics_interceptor.h"

namespace ranksweep::server {
namespace {

// Replaces the port of HOST:PORT (or [V6]:PORT) with `port`.
std::string WithPort(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  return host + ":" + std::to_string(port);
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

// The server's credentials: plaintext, or TLS from --tls-cert/--tls-key.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const ServerOptions& o) {
  if (o.tls_cert.empty()) return grpc::InsecureServerCredentials();
  ASSIGN_OR_RETURN(const std::string cert, ReadFlagFile(o.tls_cert, "--tls-cert"));
  ASSIGN_OR_RETURN(const std::string key, ReadFlagFile(o.tls_key, "--tls-key"));
  RETURN_IF_ERROR(CheckKeyPair(cert, key));
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({key, cert});
  return grpc::SslServerCredentials(ssl);
}

// A runtime failure (exit 1), never mistaken for bad options.
absl::Status Failure(const std::string& message) { return absl::UnavailableError(message); }

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

}  // namespace

absl::Status CheckServerOptions(const ServerOptions& o) {
  auto bad = [](const std::string& message) { return absl::InvalidArgumentError(message); };
  if (o.lease_seconds < 1 || o.lease_seconds > 86400) {
    return bad("--lease-seconds must be 1..86400");
  }
  if (o.max_attempts < 1 || o.max_attempts > 100) return bad("--max-attempts must be 1..100");
  if (o.max_task_memory_bytes < 0) {
    return bad("--max-task-memory-bytes must be >= 0 (0 = no limit)");
  }
  if (o.max_message_bytes < 1 << 20) return bad("--max-message-bytes must be at least 1 MiB");
  // A duration of 0 or less would make every write fail at once.
  if (o.busy_timeout_ms < 1) {
    return bad(absl::StrCat("--busy-timeout-ms must be at least 1 (milliseconds), got ",
                            o.busy_timeout_ms));
  }
  for (const std::string& build : o.trusted_builds) {
    if (build.empty() || build.size() > 256) {
      return bad(absl::StrCat("--trusted-build must be a build id of 1..256 bytes, got ",
                              build.size(), " bytes"));
    }
  }
  if (o.call_threads < 1 || o.call_threads > 1024) {
    return bad(absl::StrCat("--call-threads must be 1..1024, got ", o.call_threads));
  }
  if (o.query_cache_mb < 0 || o.query_cache_mb > 65536) {
    return bad(absl::StrCat("--query-cache-mb must be 0..65536 (MiB; 0 = none), got ",
                            o.query_cache_mb));
  }
  if (o.column_block_rows != 0 &&
      (o.column_block_rows < 16 || o.column_block_rows > 1048576)) {
    return bad(absl::StrCat("--column-block-rows must be 0 (none) or 16..1048576, got ",
                            o.column_block_rows));
  }
  if (o.insecure_local && !IsLoopbackListenAddress(o.listen)) {
    return bad(absl::StrCat(
        "--insecure-local turns authentication off and is allowed only on a loopback address "
        "(127.0.0.1, [::1], localhost), not --listen=",
        o.listen,
        ". To serve other machines, create tokens with `ranksweepd token create` and drop "
        "--insecure-local (docs/SECURITY.md)."));
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) return bad("--tls-cert and --tls-key go together");
  return absl::OkStatus();
}

Server::Server(const ServerOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  RETURN_IF_ERROR(CheckServerOptions(options));
  std::unique_ptr<Server> server(new Server(options));
  if (absl::Status started = server->StartAll(); !started.ok()) {
    server->Stop();
    return started;
  }
  return server;
}

absl::Status Server::StartAll() {
  const ServerOptions& o = options_;
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials, Credentials(o));

  // One coordinator per database: two would hand out the same cells and
  // fencing tokens. The lock is taken before SQLite opens the file, so a
  // second coordinator exits without touching it.
  absl::StatusOr<std::unique_ptr<DatabaseLock>> lock = DatabaseLock::Acquire(o.db);
  if (!lock.ok()) return Failure(std::string(lock.status().message()));
  db_lock_ = *std::move(lock);
  StoreOptions store_options;
  store_options.busy_timeout_ms = o.busy_timeout_ms;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(o.db, store_options);
  if (!store.ok()) return Failure(absl::StrCat("cannot open ", o.db, ": ", store.status().ToString()));
  store_ = *std::move(store);
  // A read-only file opens fine and would fail only at the first write.
  if (absl::Status writable = store_->CheckWritable(); !writable.ok()) {
    return Failure(std::string(writable.message()));
  }

  CoordinatorOptions coordinator_options;
  coordinator_options.lease_ms = int64_t{o.lease_seconds} * 1000;
  coordinator_options.max_attempts = o.max_attempts;
  // The result cache serves only results trained by workers of this build.
  coordinator_options.code_version = o.build_id;
  coordinator_options.trusted_builds = o.trusted_builds;
  coordinator_options.shared_cache = o.shared_cache;
  coordinator_options.max_task_memory_bytes = o.max_task_memory_bytes;
  LogEvent("result cache: results of build %s%s%s, served %s", o.build_id,
           o.trusted_builds.empty() ? "" : " and the trusted builds ",
           absl::StrJoin(o.trusted_builds, ", "),
           o.shared_cache ? "to every user (--shared-cache)"
                          : "only to the user whose sweeps they were trained for");
  coordinator_ = std::make_unique<Coordinator>(store_.get(), &clock_, coordinator_options);
  absl::StatusOr<RecoveryReport> recovered = coordinator_->Recover();
  if (!recovered.ok()) return Failure(absl::StrCat("recovery failed: ", recovered.status().ToString()));

  // Operators' metrics (--metrics-listen): counted whether served or not,
  // which costs a map update per call.
  DefineCoordinatorMetrics(&metrics_, o.build_id);
  // Made now, before the endpoint serves, so its zero samples of
  // ranksweep_rpcs_total are there from the first scrape.
  auto metrics_interceptor = std::make_unique<MetricsInterceptorFactory>(&metrics_);
  store_->SetCommitObserver(
      [this](double seconds) { metrics_.Observe("ranksweep_store_commit_seconds", {}, seconds); });
  metrics_.AddCollector([this](MetricsRegistry* m) {
    SetCountsByState(m, "ranksweep_sweeps",
                     {SweepState::kRunning, SweepState::kDone, SweepState::kFailed,
                      SweepState::kCancelled},
                     coordinator_->CountSweepsByState());
    SetCountsByState(m, "ranksweep_cells",
                     {CellState::kPending, CellState::kLeased, CellState::kDone,
                      CellState::kFailed, CellState::kCancelled, CellState::kPruned},
                     coordinator_->CountCellsByState());
    m->ClearGauge("ranksweep_workers_alive");
    absl::StatusOr<std::vector<WorkerInfo>> workers = coordinator_->ListWorkers();
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
  metrics_.Add("ranksweep_leases_expired_total", {},
               static_cast<double>(recovered->leases_expired));
  if (!o.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
        MetricsHttpServer::Start(o.metrics_listen, &metrics_);
    if (!started.ok()) {
      // A bad address is bad options (exit 2); one in use is a failure.
      return started.status().code() == absl::StatusCode::kInvalidArgument
                 ? started.status()
                 : Failure(std::string(started.status().message()));
    }
    metrics_http_ = *std::move(started);
    LogEvent("metrics on http://%s/metrics", metrics_http_->address());
  }

  tokens_ = std::make_unique<TokenStore>(store_.get(), &clock_);
  authorizer_ = std::make_unique<Authorizer>(o.insecure_local ? Authorizer::InsecureLocal()
                                                              : Authorizer(tokens_.get()));
  if (o.insecure_local) {
    LogEvent("WARNING: --insecure-local: no authentication; every caller is the admin \"local\"");
  } else {
    absl::StatusOr<std::vector<TokenRecord>> records = tokens_->List();
    if (!records.ok()) {
      return Failure(absl::StrCat("cannot read tokens: ", records.status().ToString()));
    }
    int active = 0;
    for (const TokenRecord& r : *records) active += r.revoked_unix_ms == 0 ? 1 : 0;
    LogEvent("authentication on: %d active token(s)%s", active,
             active > 0 ? ""
                        : "; create one with `ranksweepd token create --db=FILE --name=NAME "
                          "--role=admin`");
    if (!IsLoopbackListenAddress(o.listen) && o.tls_cert.empty()) {
      LogEvent("WARNING: serving %s without TLS: bearer tokens cross the network in plaintext; "
               "use --tls-cert/--tls-key",
               o.listen);
    }
  }

  SweepServiceOptions sweep_options;
  sweep_options.query_cache_bytes = int64_t{o.query_cache_mb} << 20;
  sweep_options.column_block_rows = o.column_block_rows;
  sweep_options.metrics = &metrics_;
  sweep_service_ =
      std::make_unique<SweepServiceImpl>(coordinator_.get(), authorizer_.get(), sweep_options);
  worker_service_ =
      std::make_unique<WorkerServiceImpl>(coordinator_.get(), authorizer_.get(), o.call_threads);
  sweep_admin_ = std::make_unique<SweepAdmin>(store_.get(), coordinator_.get());
  sweep_admin_service_ = std::make_unique<SweepAdminServiceImpl>(
      sweep_admin_.get(), coordinator_.get(), authorizer_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(o.listen, credentials, &port);
  // gRPC sets SO_REUSEPORT by default, which lets a second coordinator bind
  // the same port and take half of the connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(o.max_message_bytes);
  builder.SetMaxSendMessageSize(o.max_message_bytes);
  builder.RegisterService(sweep_service_.get());
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(sweep_admin_service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  // First, so that the metrics count the status the caller gets.
  interceptors.push_back(std::make_unique<MalformedRequestInterceptorFactory>());
  interceptors.push_back(std::move(metrics_interceptor));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || port == 0) {
    return Failure(absl::StrCat("cannot listen on ", o.listen,
                                " (is the port in use by another process?)"));
  }
  address_ = WithPort(o.listen, port);

  // Reclaims expired leases a few times per lease period (at least every
  // second), so a dead worker's cells return within about one lease.
  const auto period =
      std::chrono::milliseconds(std::min<int64_t>(1000, coordinator_options.lease_ms / 4));
  expiry_ = std::thread([this, period] {
    std::unique_lock<std::mutex> lock(expiry_mu_);
    while (!expiry_cv_.wait_for(lock, period, [this] { return stopping_; })) {
      lock.unlock();
      absl::StatusOr<int64_t> n = coordinator_->ExpireLeases();
      if (!n.ok()) LogEvent("lease expiry failed: %s", n.status().ToString());
      if (n.ok()) metrics_.Add("ranksweep_leases_expired_total", {}, static_cast<double>(*n));
      lock.lock();
    }
  });
  LogEvent("ranksweepd serving %s on %s with %s (lease %ds, max attempts %d)", o.db, address_,
           o.tls_cert.empty() ? "plaintext" : "TLS", o.lease_seconds, o.max_attempts);
  return absl::OkStatus();
}

std::string Server::metrics_address() const {
  return metrics_http_ == nullptr ? std::string() : metrics_http_->address();
}

void Server::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (expiry_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(expiry_mu_);
      stopping_ = true;
    }
    expiry_cv_.notify_all();
    expiry_.join();
  }
  if (metrics_http_ != nullptr) metrics_http_->Stop();
  if (grpc_server_ != nullptr) {
    grpc_server_->GetHealthCheckService()->SetServingStatus(false);
    // Parked long-polls and open watches end first, so that the server's
    // shutdown does not wait on them.
    worker_service_->Shutdown();
    sweep_service_->Shutdown();
    sweep_admin_service_->Shutdown();
    // Calls still running get 5 s to finish; so do idle client connections,
    // which grpc waits for too. A call cut off here is safe to repeat:
    // CompleteTasks is all-or-nothing and idempotent under its lease.
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc_server_->Wait();
    grpc_server_.reset();
  }
  if (store_ != nullptr) {
    const Store::WriteStats stats = store_->write_stats();
    LogEvent("ranksweepd: %d writes in %d commits this run; %d transactions rolled back for a "
             "failed write and run again without it",
             stats.writes, stats.commits, stats.reruns);
  }
  // The services and the coordinator go before the store they use.
  sweep_admin_service_.reset();
  sweep_admin_.reset();
  worker_service_.reset();
  sweep_service_.reset();
  authorizer_.reset();
  tokens_.reset();
  metrics_http_.reset();
  coordinator_.reset();
  store_.reset();  // closes the database (and checkpoints the WAL)
  db_lock_.reset();
  if (!address_.empty()) LogEvent("ranksweepd stopped");
}

Server::~Server() { Stop(); }

}  // namespace ranksweep::server
