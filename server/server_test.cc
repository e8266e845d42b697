// The coordinator as one object (server.h), in process: options refused
// before anything is touched, one server per database, a call served on the
// bound port, and a stop that lets the next server take the same file.
#include "server/server.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "common/temp_dir.h"
#include "gtest/gtest.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"

namespace ranksweep::server {
namespace {

using ::ranksweep::TempDir;

ServerOptions Local(const TempDir& dir) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db = dir.path() + "/sweeps.db";
  o.insecure_local = true;
  o.build_id = "server-test";
  return o;
}

// ListSweeps on `address`: the status of one real call.
grpc::StatusCode ListSweeps(const std::string& address, int* count) {
  auto stub = v1::SweepService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListSweepsResponse out;
  grpc::Status s = stub->ListSweeps(&ctx, v1::ListSweepsRequest(), &out);
  *count = out.sweeps_size();
  return s.error_code();
}

TEST(ServerTest, OptionsOutOfRangeAreRefusedNamingTheFlagBeforeTheFileIsMade) {
  TempDir dir;
  struct Case {
    void (*edit)(ServerOptions*);
    const char* message;
  };
  const Case cases[] = {
      {[](ServerOptions* o) { o->lease_seconds = 0; }, "--lease-seconds must be 1..86400"},
      {[](ServerOptions* o) { o->max_attempts = 101; }, "--max-attempts must be 1..100"},
      {[](ServerOptions* o) { o->max_task_memory_bytes = -1; },
       "--max-task-memory-bytes must be >= 0 (0 = no limit)"},
      {[](ServerOptions* o) { o->max_message_bytes = 1000; },
       "--max-message-bytes must be at least 1 MiB"},
      {[](ServerOptions* o) { o->busy_timeout_ms = 0; },
       "--busy-timeout-ms must be at least 1 (milliseconds), got 0"},
      {[](ServerOptions* o) { o->call_threads = 1025; }, "--call-threads must be 1..1024, got 1025"},
      {[](ServerOptions* o) { o->query_cache_mb = -1; },
       "--query-cache-mb must be 0..65536 (MiB; 0 = none), got -1"},
      {[](ServerOptions* o) { o->column_block_rows = 10; },
       "--column-block-rows must be 0 (none) or 16..1048576, got 10"},
      {[](ServerOptions* o) { o->trusted_builds = {""}; },
       "--trusted-build must be a build id of 1..256 bytes, got 0 bytes"},
      {[](ServerOptions* o) { o->tls_cert = "cert.pem"; }, "--tls-cert and --tls-key go together"},
      {[](ServerOptions* o) { o->listen = "0.0.0.0:0"; },
       "--insecure-local turns authentication off and is allowed only on a loopback address"},
  };
  for (const Case& c : cases) {
    ServerOptions o = Local(dir);
    c.edit(&o);
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
    ASSERT_FALSE(server.ok()) << c.message;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(std::string(server.status().message()).rfind(c.message, 0), 0u)
        << server.status().message();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/sweeps.db"));
}

TEST(ServerTest, ServesOnTheBoundPortHoldsTheFileAndLetsItGoOnStop) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Server>> first = Server::Start(Local(dir));
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string address = (*first)->address();
  EXPECT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  EXPECT_NE(address, "127.0.0.1:0");
  EXPECT_EQ((*first)->metrics_address(), "");
  int count = -1;
  EXPECT_EQ(ListSweeps(address, &count), grpc::StatusCode::OK);
  EXPECT_EQ(count, 0);

  // A second server on the same file is a runtime failure, not bad options.
  absl::StatusOr<std::unique_ptr<Server>> second = Server::Start(Local(dir));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(second.status().message()).find("sweeps.db"), std::string::npos)
      << second.status().message();

  (*first)->Stop();
  (*first)->Stop();  // twice is fine
  EXPECT_NE(ListSweeps(address, &count), grpc::StatusCode::OK);
  // The lock went with it: the next server opens the same file.
  absl::StatusOr<std::unique_ptr<Server>> third = Server::Start(Local(dir));
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(ListSweeps((*third)->address(), &count), grpc::StatusCode::OK);
}

TEST(ServerTest, AMetricsEndpointComesUpWithTheServer) {
  TempDir dir;
  ServerOptions o = Local(dir);
  o.metrics_listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->metrics_address().rfind("127.0.0.1:", 0), 0u)
      << (*server)->metrics_address();
  o.metrics_listen = "nonsense";
  o.db = dir.path() + "/other.db";
  absl::StatusOr<std::unique_ptr<Server>> bad = Server::Start(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
}

}  // namespace
}  // namespace ranksweep::server
