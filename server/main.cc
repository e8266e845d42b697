// ranksweepd: the ranksweep coordinator. Opens (or creates) the SQLite
// database, recovers the state a previous process left, and serves
// SweepService and WorkerService over gRPC, with the standard health service
// and server reflection. Prints "ranksweepd listening on HOST:PORT" (the
// bound port, also for --listen=...:0) on stdout once it serves; logs events
// on stderr. SIGTERM or SIGINT shuts it down cleanly.
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "server/core/clock.h"
#include "server/core/coordinator.h"
#include "server/core/log.h"
#include "server/core/store.h"
#include "server/service/sweep_service.h"
#include "server/service/worker_service.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "Address to serve on, HOST:PORT; port 0 picks a free port (printed at start-up)");
ABSL_FLAG(std::string, db, "ranksweep.db", "SQLite database file; created if missing");
ABSL_FLAG(int, lease_seconds, 60,
          "How long a lease lasts without a heartbeat before its cells go back to pending");
ABSL_FLAG(int, max_attempts, 3, "Leases a cell may use before it is marked FAILED");
ABSL_FLAG(int, max_message_bytes, 64 << 20, "Largest gRPC message accepted or sent");
ABSL_FLAG(int, busy_timeout_ms, 5000,
          "How long a database write waits for a lock held by another process");

namespace ranksweep::server {
namespace {

// Replaces the port of HOST:PORT (or [V6]:PORT) with `port`.
std::string WithPort(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  return host + ":" + std::to_string(port);
}

int Run() {
  const std::string listen = absl::GetFlag(FLAGS_listen);
  const std::string db = absl::GetFlag(FLAGS_db);
  const int lease_seconds = absl::GetFlag(FLAGS_lease_seconds);
  const int max_attempts = absl::GetFlag(FLAGS_max_attempts);
  const int max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  if (lease_seconds < 1 || lease_seconds > 86400) {
    std::cerr << "ranksweepd: --lease_seconds must be 1..86400\n";
    return 2;
  }
  if (max_attempts < 1 || max_attempts > 100) {
    std::cerr << "ranksweepd: --max_attempts must be 1..100\n";
    return 2;
  }
  if (max_message_bytes < 1 << 20) {
    std::cerr << "ranksweepd: --max_message_bytes must be at least 1 MiB\n";
    return 2;
  }

  // SIGTERM / SIGINT are taken by sigwait below; block them before any
  // thread starts so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  StoreOptions store_options;
  store_options.busy_timeout_ms = absl::GetFlag(FLAGS_busy_timeout_ms);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, store_options);
  if (!store.ok()) {
    std::cerr << "ranksweepd: cannot open " << db << ": " << store.status() << "\n";
    return 1;
  }

  RealClock clock;
  CoordinatorOptions options;
  options.lease_ms = int64_t{lease_seconds} * 1000;
  options.max_attempts = max_attempts;
  Coordinator coordinator(store->get(), &clock, options);
  absl::StatusOr<RecoveryReport> recovered = coordinator.Recover();
  if (!recovered.ok()) {
    std::cerr << "ranksweepd: recovery failed: " << recovered.status() << "\n";
    return 1;
  }

  SweepServiceImpl sweep_service(&coordinator);
  WorkerServiceImpl worker_service(&coordinator);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(max_message_bytes);
  builder.RegisterService(&sweep_service);
  builder.RegisterService(&worker_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "ranksweepd: cannot listen on " << listen << "\n";
    return 1;
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
      lock.lock();
    }
  });

  const std::string bound = WithPort(listen, port);
  LogEvent("ranksweepd serving %s on %s (lease %ds, max attempts %d)", db, bound, lease_seconds,
           max_attempts);
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
  server->GetHealthCheckService()->SetServingStatus(false);
  // Parked long-polls and open watches end first, so that the server's
  // shutdown does not wait on them.
  worker_service.Shutdown();
  sweep_service.Shutdown();
  // Calls still running get 5 s to finish; so do idle client connections,
  // which grpc waits for too. A call cut off here is safe to repeat:
  // CompleteTasks is all-or-nothing and idempotent under its lease.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
  server.reset();
  store->reset();  // closes the database (and checkpoints the WAL)
  LogEvent("ranksweepd stopped");
  return 0;
}

}  // namespace
}  // namespace ranksweep::server

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ranksweep coordinator: serves SweepService and WorkerService over gRPC.\n"
      "Usage: ranksweepd [--listen=HOST:PORT] [--db=FILE] [--lease_seconds=N] "
      "[--max_attempts=N]");
  absl::ParseCommandLine(argc, argv);
  return ranksweep::server::Run();
}
