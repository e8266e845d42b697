// A shared pool tried as a hostile member would, through real processes on
// loopback: ranksweepd with tokens (tests/soak/soak_cluster.h) and clients
// that use nothing but the generated ranksweep.v1 stubs. Each test names
// the "Why" of the issue it closes and checks exact status codes and row
// counts before and after.
//  - Lease hijack: no token, and no process without the registration's
//    session, can heartbeat, complete, fail or acquire for another worker;
//    lease ids are random and no reply tells another worker's leases.
//  - Quarantine that holds: a quarantined worker registers, leases,
//    heartbeats, completes and fails nothing until an admin lifts it; its
//    reset cells start their attempts afresh.
//  - Impossible results: every cross-field check against the task the
//    coordinator handed out refuses its result with INVALID_ARGUMENT.
//  - Unbounded memory without a token: unknown method names share one
//    metrics series, and the coordinator's memory stays flat under them.
//  - Cache poisoning across users: a liar claiming the coordinator's own
//    build feeds no other user's identical sweep unless the operator shares
//    the cache, and its quarantine takes back every copy.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <random>
#include <sstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>


#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "ranksweep_build_id.h"  // RANKSWEEP_BUILD_ID: the build a liar claims
#include "tests/soak/soak_cluster.h"
#include "tests/support/process.h"

namespace ranksweep {
namespace {

using ::ranksweep::soak::Cluster;
using ::ranksweep::soak::ClusterOptions;
using ::ranksweep::soak::QueryInt;
using ::ranksweep::soak::SweepJson;
using ::ranksweep::testing::TempDir;
using namespace std::chrono_literals;

// A WorkerService client holding one token, as a hostile pool member would
// write it from proto/ alone.
class WorkerClient {
 public:
  WorkerClient(const std::string& address, std::string token)
      : stub_(v1::WorkerService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        token_(std::move(token)) {}

  grpc::Status Register(const std::string& worker_id, v1::RegisterWorkerResponse* out,
                        const std::string& build_id = "hostile-test") {
    v1::RegisterWorkerRequest req;
    req.set_hostname("h");
    req.set_device("cpu");
    req.set_slots(1);
    req.mutable_version()->set_build_id(build_id);
    req.set_worker_id(worker_id);
    auto ctx = Ctx();
    return stub_->RegisterWorker(ctx.get(), req, out);
  }
  grpc::Status Acquire(const std::string& worker_id, const std::string& session, int max_seeds,
                       v1::AcquireTasksResponse* out) {
    v1::AcquireTasksRequest req;
    req.set_worker_id(worker_id);
    req.set_session(session);
    req.set_max_tasks(1);
    req.set_max_seeds(max_seeds);
    auto ctx = Ctx();
    return stub_->AcquireTasks(ctx.get(), req, out);
  }
  grpc::Status Heartbeat(const std::string& worker_id, const std::string& session,
                         const std::vector<int64_t>& leases, v1::HeartbeatResponse* out) {
    v1::HeartbeatRequest req;
    req.set_worker_id(worker_id);
    req.set_session(session);
    for (int64_t id : leases) req.add_lease_ids(id);
    auto ctx = Ctx();
    return stub_->Heartbeat(ctx.get(), req, out);
  }
  grpc::Status Complete(const std::string& worker_id, const std::string& session,
                        const v1::Task& task, v1::CompleteTasksResponse* out,
                        const std::function<void(v1::SeedResult*)>& edit = nullptr) {
    v1::CompleteTasksRequest req;
    req.set_worker_id(worker_id);
    req.set_session(session);
    for (const v1::LeasedCell& c : task.cells()) {
      v1::CellResult* r = req.add_results();
      r->set_cell_id(c.cell_id());
      r->set_lease_id(c.lease_id());
      v1::SeedResult* res = r->mutable_result();
      res->set_seed(c.seed());
      res->mutable_train()->set_sequences(64);
      res->mutable_train()->set_exact_accuracy(1);
      res->mutable_train()->set_position_accuracy(1);
      res->mutable_train()->set_error(0);
      res->mutable_facts()->set_train_sequences(64);  // SweepJson's dataset: m=2, seq_len=3
      res->set_steps(50);
      if (edit) edit(res);
    }
    auto ctx = Ctx();
    return stub_->CompleteTasks(ctx.get(), req, out);
  }
  grpc::Status Fail(const std::string& worker_id, const std::string& session,
                    const std::vector<int64_t>& leases, bool release) {
    v1::FailTaskRequest req;
    req.set_worker_id(worker_id);
    req.set_session(session);
    for (int64_t id : leases) req.add_lease_ids(id);
    req.set_reason("sabotage");
    req.set_release(release);
    v1::FailTaskResponse out;
    auto ctx = Ctx();
    return stub_->FailTask(ctx.get(), req, &out);
  }

 private:
  std::unique_ptr<grpc::ClientContext> Ctx() const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + 30s);
    ctx->AddMetadata("authorization", "Bearer " + token_);
    return ctx;
  }

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::string token_;
};

std::vector<int64_t> LeaseIds(const v1::Task& task) {
  std::vector<int64_t> ids;
  for (const v1::LeasedCell& c : task.cells()) ids.push_back(c.lease_id());
  return ids;
}

// A coordinator with tokens: an admin (the CLI's), two worker tokens.
class HostilePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.dir = dir_.path();
    o.bin = {RANKSWEEPD_BIN, RANKSWEEP_FAKE_WORKER_BIN, RANKSWEEP_CLI_BIN};
    o.tokens = true;
    o.lease_seconds = 60;
    o.max_attempts = 1;  // a lease past it would show at once
    cluster_ = std::make_unique<Cluster>(o);
    admin_ = cluster_->CreateToken("ops", "admin");
    pool_a_ = cluster_->CreateToken("pool-a", "worker");
    pool_b_ = cluster_->CreateToken("pool-b", "worker");
    ASSERT_FALSE(admin_.empty() || pool_a_.empty() || pool_b_.empty()) << cluster_->error();
    cluster_->set_cli_token(admin_);
    ASSERT_TRUE(cluster_->StartCoordinator()) << cluster_->error();
  }
  void TearDown() override {
    if (cluster_) EXPECT_TRUE(cluster_->StopCoordinator(SIGTERM));
  }

  int64_t Q(const std::string& sql) { return QueryInt(cluster_->db(), sql); }

  // A result edited by a lie, and the start of the refusal it must get.
  using Lies = std::vector<std::pair<std::string, std::function<void(v1::SeedResult*)>>>;

  // Each lie, sent by liar-1 for `task`, is refused with INVALID_ARGUMENT
  // and its message; nothing is stored and the task's `cells` stay leased.
  void ExpectEveryLieRefused(WorkerClient& liar, const std::string& session,
                             const v1::Task& task, const Lies& lies, int cells) {
    for (const auto& [message, lie] : lies) {
      v1::CompleteTasksResponse done;
      grpc::Status s = liar.Complete("liar-1", session, task, &done, lie);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << message;
      EXPECT_NE(s.error_message().find(message), std::string::npos) << s.error_message();
      EXPECT_EQ(Q("SELECT count(*) FROM results"), 0) << message;
      EXPECT_EQ(Q("SELECT count(*) FROM cells WHERE state = 2"), cells) << message;
    }
  }

  TempDir dir_;
  std::unique_ptr<Cluster> cluster_;
  std::string admin_, pool_a_, pool_b_;
};

// "Any worker token can act as any worker": a Heartbeat in another
// worker's name over lease ids 1..399 revealed its leases, a CompleteTasks
// with them stored fake rows under its name.
TEST_F(HostilePoolTest, NoTokenOrSessionButTheRegistrationsActsForAWorker) {
  ASSERT_FALSE(cluster_->Submit(SweepJson("hijack", 2, 4)).empty()) << cluster_->error();
  ASSERT_EQ(Q("SELECT count(*) FROM cells"), 8);

  WorkerClient victim(cluster_->address(), pool_a_);
  v1::RegisterWorkerResponse reg;
  ASSERT_TRUE(victim.Register("victim-1", &reg).ok());
  ASSERT_EQ(reg.worker_id(), "victim-1");
  EXPECT_EQ(reg.session().size(), 46u) << reg.session();  // "ws_" + 43
  const std::string session = reg.session();
  v1::AcquireTasksResponse acquired;
  ASSERT_TRUE(victim.Acquire("victim-1", session, 4, &acquired).ok());
  ASSERT_EQ(acquired.tasks_size(), 1);
  const v1::Task task = acquired.tasks(0);
  ASSERT_EQ(task.cells_size(), 4);
  const std::vector<int64_t> leases = LeaseIds(task);

  // Lease ids are random 63-bit numbers: none is small, none follows
  // another (the chance that this fails is about 2^-40).
  for (int64_t id : leases) EXPECT_GT(id, int64_t{1} << 20) << id;
  std::vector<int64_t> sorted = leases;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i) EXPECT_GT(sorted[i] - sorted[i - 1], 1 << 20);
  std::vector<int64_t> probe = leases;
  for (int64_t id = 1; id < 400; ++id) probe.push_back(id);

  const std::string deadlines = "SELECT sum(lease_deadline_ms) FROM cells WHERE state = 2";
  const int64_t deadline_before = Q(deadlines);
  auto unchanged = [&] {
    EXPECT_EQ(Q("SELECT count(*) FROM results"), 0);
    EXPECT_EQ(Q("SELECT count(*) FROM cells WHERE state = 2 AND worker_id = 'victim-1' "
                "AND attempt = 1"),
              4);
    EXPECT_EQ(Q("SELECT count(*) FROM cells WHERE state = 1"), 4);
    EXPECT_EQ(Q(deadlines), deadline_before);
    EXPECT_EQ(Q("SELECT completed FROM workers WHERE id = 'victim-1'"), 0);
  };
  std::this_thread::sleep_for(5ms);  // a heartbeat that got through would move the deadlines

  // Another token, in the victim's name: refused everywhere, nothing done.
  WorkerClient thief(cluster_->address(), pool_b_);
  for (const std::string& guess : {std::string(), session}) {
    v1::HeartbeatResponse hb;
    grpc::Status s = thief.Heartbeat("victim-1", guess, probe, &hb);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
    EXPECT_EQ(hb.lost_lease_ids_size() + hb.cancelled_lease_ids_size(), 0);
    v1::CompleteTasksResponse done;
    s = thief.Complete("victim-1", guess, task, &done);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
    EXPECT_EQ(thief.Fail("victim-1", guess, leases, false).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    v1::AcquireTasksResponse stolen;
    EXPECT_EQ(thief.Acquire("victim-1", guess, 4, &stolen).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(stolen.tasks_size(), 0);
    unchanged();
  }
  // ... nor can it take the victim's id over by registering it.
  v1::RegisterWorkerResponse taken;
  grpc::Status s = thief.Register("victim-1", &taken);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_TRUE(taken.session().empty());
  EXPECT_EQ(Q("SELECT count(*) FROM workers"), 1);
  EXPECT_EQ(Q("SELECT count(*) FROM workers WHERE owner = 'pool-a'"), 1);
  unchanged();

  // The victim's own token without the victim's session (another machine
  // sharing the token): refused too.
  WorkerClient sharer(cluster_->address(), pool_a_);
  for (const std::string& guess : {std::string(), std::string("ws_") + std::string(43, 'A')}) {
    v1::HeartbeatResponse hb;
    EXPECT_EQ(sharer.Heartbeat("victim-1", guess, probe, &hb).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    v1::CompleteTasksResponse done;
    EXPECT_EQ(sharer.Complete("victim-1", guess, task, &done).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(sharer.Fail("victim-1", guess, leases, true).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    unchanged();
  }

  // In its own name the thief learns nothing of the victim's leases: every
  // probed id is "lost", alike, and nothing is extended, completed or failed.
  v1::RegisterWorkerResponse own;
  ASSERT_TRUE(thief.Register("thief-1", &own).ok());
  v1::HeartbeatResponse hb;
  ASSERT_TRUE(thief.Heartbeat("thief-1", own.session(), probe, &hb).ok());
  EXPECT_EQ(hb.lost_lease_ids_size(), static_cast<int>(probe.size()));
  EXPECT_EQ(hb.cancelled_lease_ids_size(), 0);
  v1::CompleteTasksResponse done;
  s = thief.Complete("thief-1", own.session(), task, &done);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message().find("victim"), std::string::npos) << s.error_message();
  EXPECT_TRUE(thief.Fail("thief-1", own.session(), leases, false).ok());
  unchanged();

  // The victim's honest report is stored, under its name, not as duplicates.
  ASSERT_TRUE(victim.Complete("victim-1", session, task, &done).ok());
  EXPECT_EQ(done.recorded(), 4);
  EXPECT_EQ(done.duplicates(), 0);
  EXPECT_EQ(Q("SELECT count(*) FROM results WHERE worker_id = 'victim-1'"), 4);
  EXPECT_EQ(Q("SELECT count(*) FROM results"), 4);
  EXPECT_EQ(Q("SELECT completed FROM workers WHERE id = 'victim-1'"), 4);
  EXPECT_EQ(Q("SELECT completed FROM workers WHERE id = 'thief-1'"), 0);

  // A new registration with the same token ends the old session.
  v1::RegisterWorkerResponse again;
  ASSERT_TRUE(victim.Register("victim-1", &again).ok());
  EXPECT_NE(again.session(), session);
  v1::AcquireTasksResponse more;
  EXPECT_EQ(victim.Acquire("victim-1", session, 4, &more).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(victim.Acquire("victim-1", again.session(), 4, &more).ok());
  EXPECT_EQ(more.tasks_size(), 1);
}

// ------------------------------------------------- quarantine

// "After `ranksweep workers quarantine W`, W re-registered and took and
// completed all 19 reset cells at once; `workers` shows no mark; a cell
// already at --max-attempts was leased once more."
TEST_F(HostilePoolTest, AQuarantinedWorkerLeasesAndCompletesNothingUntilLifted) {
  ASSERT_FALSE(cluster_->Submit(SweepJson("held", 2, 4)).empty()) << cluster_->error();
  WorkerClient bad(cluster_->address(), pool_a_);
  v1::RegisterWorkerResponse reg;
  ASSERT_TRUE(bad.Register("bad-1", &reg).ok());
  const std::string session = reg.session();
  v1::AcquireTasksResponse first, second;
  ASSERT_TRUE(bad.Acquire("bad-1", session, 4, &first).ok());
  ASSERT_EQ(first.tasks_size(), 1);
  v1::CompleteTasksResponse done;
  ASSERT_TRUE(bad.Complete("bad-1", session, first.tasks(0), &done).ok());
  ASSERT_EQ(done.recorded(), 4);
  ASSERT_TRUE(bad.Acquire("bad-1", session, 4, &second).ok());
  ASSERT_EQ(second.tasks_size(), 1);
  ASSERT_EQ(Q("SELECT count(*) FROM results"), 4);
  ASSERT_EQ(Q("SELECT count(*) FROM cells WHERE attempt = 1"), 8);  // at --max-attempts

  testing::CommandResult q = cluster_->Cli({"workers", "quarantine", "bad-1"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.out, "quarantine 1 of worker bad-1: 4 results and 0 cached copies invalid, 4 cells "
                   "pending again, 4 leases released\n");
  auto held = [&] {
    EXPECT_EQ(Q("SELECT count(*) FROM results"), 0);
    EXPECT_EQ(Q("SELECT count(*) FROM invalid_results"), 4);
    EXPECT_EQ(Q("SELECT count(*) FROM cells WHERE state = 1 AND attempt = 0"), 8);
    EXPECT_EQ(Q("SELECT count(*) FROM workers WHERE id = 'bad-1' AND quarantined_ms > 0"), 1);
  };
  held();

  // Held: nothing it sends is taken, in its own name or by registering again.
  v1::AcquireTasksResponse none;
  grpc::Status s = bad.Acquire("bad-1", session, 4, &none);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("ranksweep workers unquarantine bad-1"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(none.tasks_size(), 0);
  EXPECT_EQ(bad.Complete("bad-1", session, second.tasks(0), &done).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::HeartbeatResponse hb;
  EXPECT_EQ(bad.Heartbeat("bad-1", session, LeaseIds(second.tasks(0)), &hb).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(bad.Fail("bad-1", session, LeaseIds(second.tasks(0)), false).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::RegisterWorkerResponse again;
  EXPECT_EQ(bad.Register("bad-1", &again).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(again.session().empty());
  held();

  // `workers` shows the mark.
  testing::CommandResult list = cluster_->Cli({"workers"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const size_t line = list.out.find("\nbad-1 ");
  ASSERT_NE(line, std::string::npos) << list.out;
  EXPECT_NE(list.out.substr(line, list.out.find('\n', line + 1) - line).find("quarantined"),
            std::string::npos)
      << list.out;

  // Another worker trains every cell again, each at attempt 1 of 1: the
  // reset gave them fresh attempts and none is leased past --max-attempts.
  WorkerClient good(cluster_->address(), pool_b_);
  v1::RegisterWorkerResponse greg;
  ASSERT_TRUE(good.Register("good-1", &greg).ok());
  for (int i = 0; i < 2; ++i) {
    v1::AcquireTasksResponse got;
    ASSERT_TRUE(good.Acquire("good-1", greg.session(), 4, &got).ok());
    ASSERT_EQ(got.tasks_size(), 1);
    for (const v1::LeasedCell& c : got.tasks(0).cells()) EXPECT_EQ(c.attempt(), 1);
    ASSERT_TRUE(good.Complete("good-1", greg.session(), got.tasks(0), &done).ok());
    EXPECT_EQ(done.recorded(), 4);
  }
  EXPECT_EQ(Q("SELECT count(*) FROM results WHERE worker_id = 'good-1'"), 8);
  EXPECT_EQ(Q("SELECT max(attempt) FROM cells"), 1);
  EXPECT_EQ(Q("SELECT state FROM sweeps"), 2);  // DONE

  // Lifted: it may register and lease again; lifting twice says so.
  testing::CommandResult lift = cluster_->Cli({"workers", "unquarantine", "bad-1"});
  ASSERT_EQ(lift.exit_code, 0) << lift.err;
  EXPECT_EQ(lift.out, "worker bad-1 may lease again\n");
  lift = cluster_->Cli({"workers", "unquarantine", "bad-1"});
  EXPECT_EQ(lift.out, "worker bad-1 was not quarantined\n");
  EXPECT_EQ(cluster_->Cli({"workers", "unquarantine", "nobody"}).exit_code, 3);  // not found
  ASSERT_TRUE(bad.Register("bad-1", &again).ok());
  EXPECT_TRUE(bad.Acquire("bad-1", again.session(), 4, &none).ok());
  EXPECT_EQ(Q("SELECT count(*) FROM workers WHERE quarantined_ms > 0"), 0);
  EXPECT_EQ(Q("SELECT count(*) FROM invalid_results"), 4);  // the rows stay invalid
}

// "A new worker id registered with the same token is not held": with
// --token the quarantine holds the token too, until the worker is lifted.
TEST_F(HostilePoolTest, AQuarantineWithTheTokenHoldsEveryWorkerOfTheToken) {
  ASSERT_FALSE(cluster_->Submit(SweepJson("token", 2, 4)).empty()) << cluster_->error();
  WorkerClient bad(cluster_->address(), pool_a_), other(cluster_->address(), pool_b_);
  v1::RegisterWorkerResponse reg, sibling, theirs;
  ASSERT_TRUE(bad.Register("bad-1", &reg).ok());
  ASSERT_TRUE(bad.Register("bad-2", &sibling).ok());
  ASSERT_TRUE(other.Register("other-1", &theirs).ok());
  v1::AcquireTasksResponse held;
  ASSERT_TRUE(bad.Acquire("bad-2", sibling.session(), 4, &held).ok());
  ASSERT_EQ(held.tasks_size(), 1);

  testing::CommandResult q = cluster_->Cli({"workers", "quarantine", "bad-1", "--token"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.out, "quarantine 1 of worker bad-1: 0 results and 0 cached copies invalid, 0 cells "
                   "pending again, 4 leases released; token pool-a held: none of its workers "
                   "leases\n");
  EXPECT_EQ(Q("SELECT count(*) FROM held_tokens WHERE name = 'pool-a' AND worker_id = 'bad-1'"),
            1);
  EXPECT_EQ(Q("SELECT count(*) FROM cells WHERE state = 1 AND attempt = 0"), 8);

  // The sibling and a new id of the same token: refused, nothing recorded.
  v1::AcquireTasksResponse none;
  grpc::Status s = bad.Acquire("bad-2", sibling.session(), 4, &none);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("ranksweep workers unquarantine bad-1"), std::string::npos)
      << s.error_message();
  v1::CompleteTasksResponse done;
  EXPECT_EQ(bad.Complete("bad-2", sibling.session(), held.tasks(0), &done).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::RegisterWorkerResponse fresh;
  EXPECT_EQ(bad.Register("", &fresh).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(bad.Register("bad-3", &fresh).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(fresh.session().empty());
  EXPECT_EQ(Q("SELECT count(*) FROM workers"), 3);
  EXPECT_EQ(Q("SELECT count(*) FROM results"), 0);
  EXPECT_EQ(Q("SELECT count(*) FROM cells WHERE state = 2"), 0);

  // `workers` marks both; another token's worker leases as before.
  testing::CommandResult list = cluster_->Cli({"workers"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  for (const std::string& id : {"bad-1", "bad-2"}) {
    const size_t line = list.out.find("\n" + id + " ");
    ASSERT_NE(line, std::string::npos) << list.out;
    const std::string row = list.out.substr(line, list.out.find('\n', line + 1) - line);
    EXPECT_NE(row.find(id == "bad-1" ? "quarantined" : "held (token)"), std::string::npos)
        << row;
  }
  v1::AcquireTasksResponse got;
  ASSERT_TRUE(other.Acquire("other-1", theirs.session(), 4, &got).ok());
  EXPECT_EQ(got.tasks_size(), 1);

  // Lifting bad-1 lifts the token: a new id registers and leases.
  testing::CommandResult lift = cluster_->Cli({"workers", "unquarantine", "bad-1"});
  ASSERT_EQ(lift.exit_code, 0) << lift.err;
  EXPECT_EQ(Q("SELECT count(*) FROM held_tokens"), 0);
  ASSERT_TRUE(bad.Register("bad-3", &fresh).ok());
  ASSERT_TRUE(bad.Acquire("bad-3", fresh.session(), 4, &got).ok());
  EXPECT_EQ(got.tasks_size(), 1);
}

// ------------------------------------------------- impossible results

// "Impossible results still stored: first_exact_step 200 with steps 1; 7
// train sequences where the dataset has 64; dataset facts that are not the
// spec's; a test split on a dataset that has none; loss 0 with error 1."
TEST_F(HostilePoolTest, EveryImpossibleResultIsRefusedAgainstItsTask) {
  ASSERT_FALSE(cluster_->Submit(SweepJson("liar", 1, 4)).empty()) << cluster_->error();
  WorkerClient liar(cluster_->address(), pool_a_);
  v1::RegisterWorkerResponse reg;
  ASSERT_TRUE(liar.Register("liar-1", &reg).ok());
  v1::AcquireTasksResponse got;
  ASSERT_TRUE(liar.Acquire("liar-1", reg.session(), 4, &got).ok());
  ASSERT_EQ(got.tasks_size(), 1);
  const v1::Task task = got.tasks(0);

  // SweepJson's task: exhaustive m=2, seq_len=3 (64 sequences), max_steps 100.
  const Lies lies = {
      {"result.first_exact_step must be at most steps (1), got 50",
       [](v1::SeedResult* r) { r->set_steps(1); r->set_first_exact_step(50); }},
      {"result.train.sequences must be facts.train_sequences (64), got 7",
       [](v1::SeedResult* r) { r->mutable_train()->set_sequences(7); }},
      {"result.facts.train_sequences must be 64 (exhaustive dataset, m=2, seq_len=3), got 7",
       [](v1::SeedResult* r) {
         r->mutable_train()->set_sequences(7);
         r->mutable_facts()->set_train_sequences(7);
       }},
      {"result.facts.rank_upper_bound must be 0 (no bound for the task's exhaustive dataset), "
       "got 24",
       [](v1::SeedResult* r) { r->mutable_facts()->set_rank_upper_bound(24); }},
      {"result.facts.distinct_queries must be at most 2^m = 4, got 759",
       [](v1::SeedResult* r) { r->mutable_facts()->set_distinct_queries(759); }},
      {"result.facts.test_sequences must be 0 (the task's exhaustive dataset has no test "
       "split), got 16",
       [](v1::SeedResult* r) {
         r->mutable_test()->set_sequences(16);
         r->mutable_test()->set_exact_accuracy(1);
         r->mutable_test()->set_position_accuracy(1);
         r->mutable_test()->set_error(0);
         r->mutable_facts()->set_test_sequences(16);
       }},
      {"result.train.error must be 0 when final_loss is 0 (the loss over the same split with "
       "the same parameters), got 1",
       [](v1::SeedResult* r) {
         r->set_final_loss(0);
         r->mutable_train()->set_exact_accuracy(0);
         r->mutable_train()->set_position_accuracy(0);
         r->mutable_train()->set_error(1);
       }},
  };
  ExpectEveryLieRefused(liar, reg.session(), task, lies, 4);
  // The truth is stored.
  v1::CompleteTasksResponse done;
  ASSERT_TRUE(liar.Complete("liar-1", reg.session(), task, &done).ok());
  EXPECT_EQ(done.recorded(), 4);
  EXPECT_EQ(Q("SELECT count(*) FROM results"), 4);
}

// A pool dataset builds exactly train_size and test_size sequences: a
// result that claims fewer (a worker that trained on a smaller split and
// reports it consistently, train.sequences and facts alike) is refused,
// and so is one that claims more.
TEST_F(HostilePoolTest, APoolResultWithAnyOtherSplitSizeIsRefused) {
  const std::string spec =
      R"({"name": "pool-liar", "dataset": {"kind": "pool", "m": 8, "seq_len": 3, )"
      R"("weight": 2, "pool_size": 24, "test_pool_share": 0.25, "train_size": 20, )"
      R"("test_size": 8}, "heads": [{"kind": "kernel", "feature_map": "elu1"}], )"
      R"("ranks": [1], "seed_count": 2, "train": {"max_steps": 100, "eval_every": 50}})";
  ASSERT_FALSE(cluster_->Submit(spec).empty()) << cluster_->error();
  WorkerClient liar(cluster_->address(), pool_a_);
  v1::RegisterWorkerResponse reg;
  ASSERT_TRUE(liar.Register("liar-1", &reg).ok());
  v1::AcquireTasksResponse got;
  ASSERT_TRUE(liar.Acquire("liar-1", reg.session(), 4, &got).ok());
  ASSERT_EQ(got.tasks_size(), 1);
  const v1::Task task = got.tasks(0);
  ASSERT_EQ(task.cells_size(), 2);

  // Sizes for both splits, consistent between the metrics and the facts.
  auto sized = [](int64_t train, int64_t test) {
    return [train, test](v1::SeedResult* r) {
      r->mutable_train()->set_sequences(train);
      r->mutable_facts()->set_train_sequences(train);
      r->mutable_test()->set_sequences(test);
      r->mutable_test()->set_exact_accuracy(1);
      r->mutable_test()->set_position_accuracy(1);
      r->mutable_test()->set_error(0);
      r->mutable_facts()->set_test_sequences(test);
    };
  };
  const Lies lies = {
      {"result.facts.train_sequences must be the task's train_size (20), got 19", sized(19, 8)},
      {"result.facts.train_sequences must be the task's train_size (20), got 21", sized(21, 8)},
      {"result.facts.test_sequences must be the task's test_size (8), got 7", sized(20, 7)},
      {"result.facts.test_sequences must be the task's test_size (8), got 9", sized(20, 9)},
  };
  ExpectEveryLieRefused(liar, reg.session(), task, lies, 2);
  // The exact sizes are stored.
  v1::CompleteTasksResponse done;
  ASSERT_TRUE(liar.Complete("liar-1", reg.session(), task, &done, sized(20, 8)).ok());
  EXPECT_EQ(done.recorded(), 2);
  EXPECT_EQ(Q("SELECT count(*) FROM results"), 2);
}

// ------------------------------------------------- the result cache

// "The cache trusts the build id a worker reports about itself: a lying
// worker claiming the current build fed another user's identical sweep."
TEST_F(HostilePoolTest, ALiarClaimingTheCurrentBuildFeedsNoOtherUsersSweep) {
  const std::string alice = cluster_->CreateToken("alice", "user");
  const std::string bob = cluster_->CreateToken("bob", "user");
  ASSERT_FALSE(alice.empty() || bob.empty()) << cluster_->error();
  const std::string spec = SweepJson("same", 1, 4);
  auto submit = [&](const std::string& token) {
    cluster_->set_cli_token(token);
    std::string id = cluster_->Submit(spec);
    EXPECT_FALSE(id.empty()) << cluster_->error();
    return id;
  };
  auto cells = [&](const std::string& sweep, int state) {
    return Q("SELECT count(*) FROM cells WHERE sweep_id = '" + sweep +
             "' AND state = " + std::to_string(state));
  };

  // The liar claims the coordinator's own build and trains alice's sweep
  // with plausible numbers no check can refuse.
  const std::string a1 = submit(alice);
  WorkerClient liar(cluster_->address(), pool_a_);
  v1::RegisterWorkerResponse reg;
  ASSERT_TRUE(liar.Register("liar-1", &reg, RANKSWEEP_BUILD_ID).ok());
  v1::AcquireTasksResponse got;
  ASSERT_TRUE(liar.Acquire("liar-1", reg.session(), 4, &got).ok());
  ASSERT_EQ(got.tasks_size(), 1);
  v1::CompleteTasksResponse done;
  ASSERT_TRUE(liar.Complete("liar-1", reg.session(), got.tasks(0), &done).ok());
  ASSERT_EQ(done.recorded(), 4);
  ASSERT_EQ(Q("SELECT count(*) FROM results WHERE worker_build_id = '" +
              std::string(RANKSWEEP_BUILD_ID) + "'"),
            4);

  // Bob's identical sweep gets nothing of it: all 4 cells wait for training.
  const std::string b1 = submit(bob);
  EXPECT_EQ(cells(b1, 1), 4);
  EXPECT_EQ(cells(b1, 3), 0);
  // Alice's own second sweep is served, each row naming its source cell and
  // the worker that trained it.
  const std::string a2 = submit(alice);
  EXPECT_EQ(cells(a2, 3), 4);
  EXPECT_EQ(Q("SELECT count(*) FROM results c JOIN results s ON s.cell_id = c.cached_from "
              "WHERE c.sweep_id = '" + a2 + "' AND s.sweep_id = '" + a1 +
              "' AND c.worker_id = 'liar-1' AND s.worker_id = 'liar-1' AND c.seed = s.seed"),
            4);
  EXPECT_EQ(Q("SELECT count(*) FROM results WHERE cached_from != 0"), 4);

  // The operator shares the cache (--shared-cache): bob's next sweep is
  // served from alice's.
  ASSERT_TRUE(cluster_->StopCoordinator(SIGTERM));
  cluster_->set_coordinator_args({"--shared-cache"});
  ASSERT_TRUE(cluster_->StartCoordinator()) << cluster_->error();
  const std::string b2 = submit(bob);
  EXPECT_EQ(cells(b2, 3), 4);
  EXPECT_EQ(Q("SELECT count(*) FROM results WHERE cached_from != 0"), 8);

  // A quarantine takes back every copy, in every user's sweep, and nothing
  // of the liar is served any more.
  cluster_->set_cli_token(admin_);
  testing::CommandResult q = cluster_->Cli({"workers", "quarantine", "liar-1"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.out.rfind("quarantine 1 of worker liar-1: 4 results and 8 cached copies invalid, "
                        "12 cells pending again, running again: ",
                        0),
            0u)
      << q.out;
  EXPECT_EQ(Q("SELECT count(*) FROM results"), 0);
  EXPECT_EQ(Q("SELECT count(*) FROM invalid_results"), 12);
  for (const std::string& sweep : {a1, a2, b1, b2}) EXPECT_EQ(cells(sweep, 1), 4) << sweep;
  const std::string b3 = submit(bob);
  EXPECT_EQ(cells(b3, 1), 4);
  EXPECT_EQ(Q("SELECT count(*) FROM results"), 0);
}

// ------------------------------------------------- bounded memory

// Resident memory of process `pid`, in kB (VmRSS); -1 if unreadable.
int64_t RssKb(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// Lines of a metrics page that are series (not # comments).
int64_t SeriesLines(const std::string& page) {
  int64_t n = 0;
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) n += !line.empty() && line[0] != '#';
  return n;
}

// The series of a metrics page without their values, in page order.
std::vector<std::string> SeriesNames(const std::string& page) {
  std::vector<std::string> names;
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') names.push_back(line.substr(0, line.rfind(' ')));
  }
  return names;
}

// `calls` calls, without a token, each to a method of its own with a name
// of about 4 kB; every one must be UNIMPLEMENTED.
void CallUnknownMethods(const std::string& address, int calls, std::mt19937_64& random) {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::Slice empty{std::string()};
  for (int i = 0; i < calls; ++i) {
    std::string name = "/ranksweep.v1.WorkerService/";
    while (name.size() < 4096) name += std::to_string(random());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    grpc::ByteBuffer request(&empty, 1), response;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, name, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) { done.set_value(std::move(s)); });
    const grpc::Status s = done.get_future().get();
    ASSERT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << i << ": " << s.error_message();
  }
}

// "Every unknown method name becomes a new metrics series that is never
// freed: 20,000 calls with 4 kB names added ~84 MB to ranksweepd."
TEST(BoundedMemoryTest, TwentyThousandUnknownMethodsShareOneSeriesAndMemoryStaysFlat) {
  TempDir dir;
  ClusterOptions o;
  o.dir = dir.path();
  o.bin = {RANKSWEEPD_BIN, RANKSWEEP_FAKE_WORKER_BIN, RANKSWEEP_CLI_BIN};
  o.tokens = true;  // the calls carry none
  o.metrics = true;
  Cluster cluster(o);
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  const int pid = cluster.coordinator_pid();
  std::mt19937_64 random(31);

  // A first 2,000 calls warm up what any call allocates once (gRPC's
  // pools, the allocator's arenas); the next 18,000 must add nothing.
  CallUnknownMethods(cluster.address(), 2000, random);
  const std::string warm_page = cluster.ScrapeMetrics();
  ASSERT_FALSE(warm_page.empty());
  const int64_t warm_series = SeriesLines(warm_page);
  const int64_t warm_rss = RssKb(pid);
  ASSERT_GT(warm_rss, 0);
  EXPECT_NE(warm_page.find("ranksweep_rpcs_total{code=\"UNIMPLEMENTED\",method=\"unknown\"} 2000\n"),
            std::string::npos)
      << warm_page;

  CallUnknownMethods(cluster.address(), 18000, random);
  const std::string page = cluster.ScrapeMetrics();
  const int64_t rss = RssKb(pid);
  EXPECT_EQ(SeriesLines(page), warm_series) << page;
  EXPECT_NE(page.find("ranksweep_rpcs_total{code=\"UNIMPLEMENTED\",method=\"unknown\"} 20000\n"),
            std::string::npos)
      << page;
  // The latency histogram times them under the same one label.
  EXPECT_NE(page.find("ranksweep_rpc_duration_seconds_count{method=\"unknown\"} 20000\n"),
            std::string::npos)
      << page;
  EXPECT_LT(page.size(), 16u * 1024) << page;
  EXPECT_EQ(SeriesNames(page), SeriesNames(warm_page));  // only the values may grow
  // 18,000 names of 4 kB kept would be about 74 MB; the bound leaves room
  // for the allocator's noise and nothing like that.
  EXPECT_LT(rss - warm_rss, 8 * 1024) << "RSS " << warm_rss << " kB after 2,000 calls, " << rss
                                      << " kB after 20,000";
  std::cout << "ranksweepd RSS: " << warm_rss << " kB after 2,000 unknown methods, " << rss
            << " kB after 20,000; metrics page " << page.size() << " bytes, "
            << SeriesLines(page) << " series\n";
  EXPECT_TRUE(cluster.StopCoordinator(SIGTERM));
}

}  // namespace
}  // namespace ranksweep
