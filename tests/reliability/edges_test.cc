// The edges of the service through real processes on loopback: what a
// caller sees when the disk fills or a file size limit is hit, when it asks
// for a sweep it may not see, and what the binaries say about a duration
// flag that makes no sense.
#include <signal.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/convert.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "tests/soak/soak_cluster.h"
#include "tests/support/process.h"

namespace ranksweep {
namespace {

using ::ranksweep::soak::Cluster;
using ::ranksweep::soak::ClusterOptions;
using ::ranksweep::soak::QueryInt;
using ::ranksweep::soak::SweepJson;
using ::ranksweep::testing::CommandResult;
using ::ranksweep::testing::Process;
using ::ranksweep::testing::RunCommand;
using ::ranksweep::testing::TempDir;
using namespace std::chrono_literals;

// "Negative --busy-timeout-ms, --drain-seconds, --heartbeat-ms are accepted."
TEST(EdgesTest, NegativeOrZeroDurationsAreRefusedAtStartUpNamingTheFlag) {
  TempDir dir;
  for (const char* value : {"-1", "0"}) {
    CommandResult r = RunCommand({RANKSWEEPD_BIN, "--listen=127.0.0.1:0", "--db=" + dir.path() + "/a.db",
                                  "--insecure-local", std::string("--busy-timeout-ms=") + value},
                                 dir.path() + "/d" + value, 30s);
    EXPECT_EQ(r.exit_code, 1) << r.err;  // a bad value: usage (common/exit_codes.h)
    EXPECT_NE(r.err.find("--busy-timeout-ms must be at least 1 (milliseconds), got " +
                         std::string(value)),
              std::string::npos)
        << r.err;
  }
  const std::vector<std::pair<std::string, std::string>> worker = {
      {"--drain-seconds=-3", "--drain-seconds must be at least 1 (seconds), got -3"},
      {"--drain-seconds=0", "--drain-seconds must be at least 1 (seconds), got 0"},
      {"--heartbeat-ms=-5", "--heartbeat-ms must be at least 0"},
      {"--rpc-timeout-seconds=0", "--rpc-timeout-seconds must be at least 1 (seconds), got 0"},
  };
  int n = 0;
  for (const auto& [flag, message] : worker) {
    CommandResult r = RunCommand({RANKSWEEP_WORKER_BIN, "--coordinator=127.0.0.1:1", flag},
                                 dir.path() + "/w" + std::to_string(n++), 60s);
    EXPECT_EQ(r.exit_code, 1) << flag << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << flag << ": " << r.err;
  }
}

// "Another user's sweep answers PERMISSION_DENIED naming its owner while an
// unknown id answers NOT_FOUND."
TEST(EdgesTest, AnotherUsersSweepIsNotFoundInTheWordsOfAnUnknownOne) {
  TempDir dir;
  ClusterOptions o;
  o.dir = dir.path();
  o.bin = {RANKSWEEPD_BIN, RANKSWEEP_FAKE_WORKER_BIN, RANKSWEEP_CLI_BIN};
  o.tokens = true;
  Cluster cluster(o);
  const std::string alice = cluster.CreateToken("alice", "user");
  const std::string bob = cluster.CreateToken("bob", "user");
  ASSERT_FALSE(alice.empty() || bob.empty()) << cluster.error();
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  cluster.set_cli_token(alice);
  const std::string id = cluster.Submit(SweepJson("mine", 1, 2));
  ASSERT_FALSE(id.empty()) << cluster.error();

  cluster.set_cli_token(bob);
  const std::string unknown = "sw-00000000";
  for (const std::string& command : {"status", "cancel", "results"}) {
    CommandResult theirs = cluster.Cli({command, id});
    CommandResult none = cluster.Cli({command, unknown});
    EXPECT_EQ(theirs.exit_code, 3) << command << ": " << theirs.err;  // not found
    EXPECT_EQ(none.exit_code, 3) << command << ": " << none.err;
    std::string said = theirs.err;
    for (size_t at = said.find(id); at != std::string::npos; at = said.find(id)) {
      said.replace(at, id.size(), unknown);
    }
    EXPECT_EQ(said, none.err) << command;
    EXPECT_EQ(theirs.err.find("alice"), std::string::npos) << theirs.err;
  }
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT state FROM sweeps"), 1);  // still running
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

// "A file-size limit kills ranksweepd with SIGXFSZ and no log line"; "a full
// disk reaches the user as `internal error ID` only."
TEST(EdgesTest, AFileSizeLimitFailsTheCallNotTheCoordinator) {
  TempDir dir;
  const std::string db = dir.path() + "/a.db";
  Process server({"/usr/bin/prlimit", "--fsize=2000000", RANKSWEEPD_BIN, "--listen=127.0.0.1:0",
                  "--db=" + db, "--insecure_local"},
                 dir.path() + "/server");
  auto bound = server.WaitForStdout(std::regex("listening on (\\S+)"), 30s);
  ASSERT_TRUE(bound.has_value()) << server.Stderr();
  auto stub = v1::SweepService::NewStub(
      grpc::CreateChannel(*bound, grpc::InsecureChannelCredentials()));

  // 100,000 cells: several MB of rows, past the 2 MB limit.
  SweepSpec spec;
  spec.name = "big";
  spec.heads = {HeadSpec{}};
  for (int r = 1; r <= 50; ++r) spec.ranks.push_back(r);
  spec.seed_count = 1000;
  spec.dataset.m = 2;
  spec.dataset.seq_len = 3;
  v1::SubmitSweepRequest big;
  *big.mutable_spec() = ToProto(spec);
  grpc::Status s;
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    v1::SubmitSweepResponse reply;
    s = stub->SubmitSweep(&ctx, big, &reply);
    if (!s.ok()) break;
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(s.error_message(), "database or disk is full");
  EXPECT_TRUE(server.running()) << server.Stderr();
  EXPECT_NE(server.Stderr().find("file size limit (ulimit -f) of 2000000 bytes"),
            std::string::npos)
      << server.Stderr();

  // The coordinator still answers, and the refused sweep left nothing.
  grpc::ClientContext ctx;
  v1::ListSweepsResponse listed;
  EXPECT_TRUE(stub->ListSweeps(&ctx, v1::ListSweepsRequest(), &listed).ok());
  server.Signal(SIGTERM);
  EXPECT_TRUE(server.Wait(30s).has_value());
}

}  // namespace
}  // namespace ranksweep
