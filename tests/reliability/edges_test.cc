// The edges of the service through real processes on loopback: what a
// caller sees when the disk fills or a file size limit is hit, when it asks
// for a sweep it may not see, when its request bytes do not parse, when it
// sends long text that errors quote, and what the binaries say about a
// duration flag that makes no sense.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "grpcpp/generic/generic_stub.h"
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

// A cluster of this build's binaries in `dir`, with tokens or --insecure-local.
ClusterOptions Options(const TempDir& dir, bool tokens) {
  ClusterOptions o;
  o.dir = dir.path();
  o.bin = {RANKSWEEPD_BIN, RANKSWEEP_FAKE_WORKER_BIN, RANKSWEEP_CLI_BIN};
  o.tokens = tokens;
  return o;
}

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
  Cluster cluster(Options(dir, /*tokens=*/true));
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
                  "--db=" + db, "--insecure-local"},
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

// Sends `bytes` as the request of `method` through the generic stub (no
// protobuf on the client side) with `token` (none when empty).
grpc::Status CallWithBytes(const std::string& address, const std::string& method,
                           const std::string& bytes, const std::string& token = "") {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

// "Malformed request bytes get UNIMPLEMENTED with an empty message."
TEST(EdgesTest, MalformedRequestBytesAreInvalidArgumentNamingTheRequestType) {
  TempDir dir;
  Cluster cluster(Options(dir, /*tokens=*/true));
  const std::string admin = cluster.CreateToken("ops", "admin");
  ASSERT_FALSE(admin.empty()) << cluster.error();
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();

  // Field 1 with wire type 7 (none exists), and a varint that never ends.
  const std::vector<std::string> garbage = {std::string("\x0f\x00", 2),
                                            std::string(12, '\xff')};
  const std::vector<std::pair<std::string, std::string>> methods = {
      {"/ranksweep.v1.SweepService/GetSweep", "ranksweep.v1.GetSweepRequest"},
      {"/ranksweep.v1.SweepService/SubmitSweep", "ranksweep.v1.SubmitSweepRequest"},
      {"/ranksweep.v1.SweepService/WatchSweep", "ranksweep.v1.WatchSweepRequest"},
      // Served raw (its reply may be kept bytes): parsed by the service.
      {"/ranksweep.v1.SweepService/QueryResults", "ranksweep.v1.QueryResultsRequest"},
      {"/ranksweep.v1.WorkerService/CompleteTasks", "ranksweep.v1.CompleteTasksRequest"},
      {"/ranksweep.v1.WorkerService/AcquireTasks", "ranksweep.v1.AcquireTasksRequest"},
  };
  for (const std::string& token : {admin, std::string()}) {
    for (const std::string& bytes : garbage) {
      for (const auto& [method, type] : methods) {
        const grpc::Status s = CallWithBytes(cluster.address(), method, bytes, token);
        EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
        EXPECT_EQ(s.error_message(), "request: the bytes received are not a valid " + type +
                                         " message (protobuf wire format); nothing was done")
            << method;
      }
    }
  }
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM sweeps"), 0);
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM workers"), 0);
  // Well-formed bytes reach the service (an empty GetSweep names its
  // field), and a method the server does not serve stays UNIMPLEMENTED.
  grpc::Status s = CallWithBytes(cluster.address(), "/ranksweep.v1.SweepService/GetSweep", "",
                                 admin);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().find("request: the bytes"), std::string::npos) << s.error_message();
  s = CallWithBytes(cluster.address(), "/ranksweep.v1.SweepService/Nope", garbage[0], admin);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

// The longest run of `c` in `text`.
size_t LongestRun(const std::string& text, char c) {
  size_t best = 0, run = 0;
  for (char x : text) {
    run = x == c ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

// "A 300-byte axis name is quoted whole and a reply exceeded the 1,024
// bytes docs/LIMITS.md promises."
TEST(EdgesTest, QuotedInputIsCutTo200BytesAndNoReplyMessageExceeds1024) {
  TempDir dir;
  Cluster cluster(Options(dir, /*tokens=*/false));  // --insecure-local: every caller is admin
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  auto channel = grpc::CreateChannel(cluster.address(), grpc::InsecureChannelCredentials());
  auto sweeps = v1::SweepService::NewStub(channel);
  auto workers = v1::WorkerService::NewStub(channel);
  auto ctx = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + 30s);
    return c;
  };

  SweepSpec spec;
  spec.name = "long";
  spec.heads = {HeadSpec{}};
  spec.ranks = {1};
  spec.seed_count = 1;
  spec.dataset.m = 2;
  spec.dataset.seq_len = 3;
  v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = ToProto(spec);
  v1::SweepAxis* axis = submit.mutable_spec()->add_axes();
  axis->set_name(std::string(300, 'x'));
  axis->add_values(0.01);
  std::vector<std::pair<std::string, grpc::Status>> replies;
  {
    v1::SubmitSweepResponse out;
    replies.emplace_back("SubmitSweep axis name", sweeps->SubmitSweep(ctx().get(), submit, &out));
    const grpc::Status& s = replies.back().second;
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("axes[0]: \"" + std::string(200, 'x') +
                                     "... (300 bytes)\" is not an axis"),
              std::string::npos)
        << s.error_message();
  }
  submit.mutable_spec()->clear_axes();
  submit.mutable_spec()->set_name("bad name " + std::string(100, 'x'));
  {
    v1::SubmitSweepResponse out;
    replies.emplace_back("SubmitSweep name", sweeps->SubmitSweep(ctx().get(), submit, &out));
  }
  const std::string huge(5000, 'x');
  {
    v1::GetSweepRequest req;
    req.set_sweep_id(huge);
    v1::GetSweepResponse out;
    replies.emplace_back("GetSweep", sweeps->GetSweep(ctx().get(), req, &out));
  }
  {
    v1::CancelSweepRequest req;
    req.set_sweep_id(huge);
    v1::CancelSweepResponse out;
    replies.emplace_back("CancelSweep", sweeps->CancelSweep(ctx().get(), req, &out));
  }
  {
    v1::QuarantineWorkerRequest req;
    req.set_worker_id(huge);
    v1::QuarantineWorkerResponse out;
    replies.emplace_back("QuarantineWorker", sweeps->QuarantineWorker(ctx().get(), req, &out));
  }
  {
    v1::RegisterWorkerRequest req;
    req.set_worker_id(huge);
    req.set_hostname(huge);
    v1::RegisterWorkerResponse out;
    replies.emplace_back("RegisterWorker", workers->RegisterWorker(ctx().get(), req, &out));
  }
  {
    v1::HeartbeatRequest req;
    req.set_worker_id(huge);
    req.set_session(huge);
    v1::HeartbeatResponse out;
    replies.emplace_back("Heartbeat", workers->Heartbeat(ctx().get(), req, &out));
  }
  {
    v1::FailTaskRequest req;
    req.set_worker_id(huge);
    req.set_reason(huge);
    v1::FailTaskResponse out;
    replies.emplace_back("FailTask", workers->FailTask(ctx().get(), req, &out));
  }
  for (const auto& [what, s] : replies) {
    EXPECT_NE(s.error_code(), grpc::StatusCode::OK) << what;
    EXPECT_FALSE(s.error_message().empty()) << what;
    EXPECT_LE(s.error_message().size(), 1024u) << what << ": " << s.error_message();
    EXPECT_LE(LongestRun(s.error_message(), 'x'), 200u) << what << ": " << s.error_message();
  }
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM sweeps"), 0);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

}  // namespace
}  // namespace ranksweep
