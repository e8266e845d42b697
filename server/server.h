// The coordinator as one object: everything `ranksweepd` runs between its
// flags and its signals. Start takes the database's lock, opens (and
// migrates) the store, recovers what a previous process left, starts the
// metrics endpoint when asked, serves SweepService, WorkerService and
// SweepAdminService (with the health service and reflection) on the listen
// address, and reclaims expired leases on a thread of its own. Stop ends it
// in the order a clean shutdown needs: lease expiry, the metrics endpoint,
// parked long-polls and watches, the calls still running (5 s), then the
// store (which checkpoints the WAL) and last the lock.
//
// server/main.cc turns flags into ServerOptions, blocks SIGTERM and SIGINT
// before Start (so every thread Start makes inherits the mask), prints the
// listening line, waits for a signal and calls Stop. Tests start one in
// process (server_test.cc).
//
// Errors from Start: InvalidArgument for options that cannot work (the
// flag named, with its allowed range: ranksweepd exits 2); anything else is
// a runtime failure (database in use or not writable, port in use, failed
// recovery: exit 1). Nothing is left running after an error.
//
// Thread-safety: Start, Stop and the destructor from one thread; the
// accessors from any thread while it runs.
#ifndef RANKSWEEP_SERVER_SERVER_H_
#define RANKSWEEP_SERVER_SERVER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "server/core/auth.h"
#include "server/core/clock.h"
#include "server/core/coordinator.h"
#include "server/core/db_lock.h"
#include "server/core/metrics.h"
#include "server/core/store.h"
#include "server/core/sweeps/sweep_admin.h"
#include "server/metrics_http.h"
#include "server/service/sweep_admin_service.h"
#include "server/service/sweep_service.h"
#include "server/service/worker_service.h"

namespace ranksweep::server {

// What ranksweepd's flags set (server/main.cc documents each).
struct ServerOptions {
  std::string listen = "127.0.0.1:50051";
  std::string db = "ranksweep.db";
  int lease_seconds = 60;                           // 1..86400
  int max_attempts = 3;                             // 1..100
  int max_message_bytes = 64 << 20;                 // at least 1 MiB
  int64_t max_task_memory_bytes = int64_t{64} << 30;  // >= 0; 0 = no limit
  int call_threads = 64;                            // 1..1024
  int busy_timeout_ms = 5000;                       // at least 1
  bool insecure_local = false;                      // loopback --listen only
  std::string tls_cert, tls_key;                    // PEM files, both or neither
  std::string metrics_listen;                       // "" = no endpoint
  std::vector<std::string> trusted_builds;          // each 1..256 bytes
  bool shared_cache = false;
  int query_cache_mb = 256;                         // 0..65536; 0 = keep no reply
  int column_block_rows = 4096;  // 0 or 16..1048576; 0 = no column blocks
  // The build this coordinator is (RANKSWEEP_BUILD_ID): the result cache
  // serves results of workers of this build, and build_info reports it.
  std::string build_id;
};

// OK when every option is in its range; else InvalidArgument naming the flag
// ("--lease-seconds must be 1..86400"). Reads no file.
absl::Status CheckServerOptions(const ServerOptions& options);

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();  // Stop, if not stopped yet
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // HOST:PORT it serves on (the bound port, also for a --listen port of 0).
  const std::string& address() const { return address_; }
  // HOST:PORT of the metrics endpoint; "" without one.
  std::string metrics_address() const;
  // Ends everything (above); safe to call twice.
  void Stop();

 private:
  explicit Server(const ServerOptions& options);
  absl::Status StartAll();

  const ServerOptions options_;
  // Declared in the order they are made; destroyed in reverse, the lock
  // last (server/core/db_lock.h says why it outlives the store).
  std::unique_ptr<DatabaseLock> db_lock_;
  std::unique_ptr<Store> store_;
  RealClock clock_;
  std::unique_ptr<Coordinator> coordinator_;
  MetricsRegistry metrics_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;
  std::unique_ptr<TokenStore> tokens_;
  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<SweepServiceImpl> sweep_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<SweepAdmin> sweep_admin_;
  std::unique_ptr<SweepAdminServiceImpl> sweep_admin_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::string address_;

  std::mutex expiry_mu_;
  std::condition_variable expiry_cv_;
  bool stopping_ = false;  // guarded by expiry_mu_
  std::thread expiry_;
  bool stopped_ = false;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVER_H_
