// Authentication and authorization through the gRPC adapters: a real server
// on 127.0.0.1:0 with authentication on, tokens in a temporary SQLite file,
// and client stubs that send `authorization: Bearer TOKEN`.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>

#include "common/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "server/core/auth.h"
#include "server/core/clock.h"
#include "server/core/coordinator.h"
#include "server/core/log.h"
#include "server/core/store.h"
#include "server/service/sweep_service.h"
#include "server/service/worker_service.h"

namespace ranksweep::server {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

using ::ranksweep::TempDir;

// kernel on exhaustive m=2, N=3, ranks {1, 2}, 2 seeds: 4 cells.
v1::SweepSpec Spec(const std::string& name) {
  v1::SweepSpec s;
  s.set_name(name);
  s.mutable_dataset()->set_m(2);
  s.mutable_dataset()->set_seq_len(3);
  s.add_heads()->set_kind(v1::HEAD_KIND_KERNEL);
  s.add_ranks(1);
  s.add_ranks(2);
  s.set_seed_count(2);
  return s;
}

class ServiceAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogEnabled(false);
    auto store = Store::Open(dir_.File("auth.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    coordinator_ = std::make_unique<Coordinator>(store_.get(), &clock_);
    tokens_ = std::make_unique<TokenStore>(store_.get(), &clock_);
    authorizer_ = std::make_unique<Authorizer>(tokens_.get());
    admin_ = *tokens_->Create("ops", Role::kAdmin);
    alice_ = *tokens_->Create("alice", Role::kUser);
    bob_ = *tokens_->Create("bob", Role::kUser);
    worker_ = *tokens_->Create("pool", Role::kWorker);

    sweeps_ = std::make_unique<SweepServiceImpl>(coordinator_.get(), authorizer_.get());
    workers_ = std::make_unique<WorkerServiceImpl>(coordinator_.get(), authorizer_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(sweeps_.get());
    builder.RegisterService(workers_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                       grpc::InsecureChannelCredentials());
    sweep_stub_ = v1::SweepService::NewStub(channel);
    worker_stub_ = v1::WorkerService::NewStub(channel);
  }

  void TearDown() override {
    workers_->Shutdown();
    sweeps_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + 5s);
  }

  // A context that sends `token` (none when empty).
  static std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + 10s);
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  }

  grpc::Status Submit(const std::string& token, const std::string& name, std::string* id) {
    v1::SubmitSweepRequest req;
    *req.mutable_spec() = Spec(name);
    v1::SubmitSweepResponse resp;
    grpc::Status s = sweep_stub_->SubmitSweep(As(token).get(), req, &resp);
    if (id != nullptr) *id = resp.sweep_id();
    return s;
  }

  grpc::Status List(const std::string& token, v1::ListSweepsResponse* resp) {
    return sweep_stub_->ListSweeps(As(token).get(), v1::ListSweepsRequest(), resp);
  }

  grpc::Status Get(const std::string& token, const std::string& id, v1::GetSweepResponse* resp) {
    v1::GetSweepRequest req;
    req.set_sweep_id(id);
    return sweep_stub_->GetSweep(As(token).get(), req, resp);
  }

  grpc::Status Cancel(const std::string& token, const std::string& id, int64_t* cells = nullptr) {
    v1::CancelSweepRequest req;
    req.set_sweep_id(id);
    v1::CancelSweepResponse resp;
    grpc::Status s = sweep_stub_->CancelSweep(As(token).get(), req, &resp);
    if (cells != nullptr) *cells = resp.cells_cancelled();
    return s;
  }

  grpc::Status Watch(const std::string& token, const std::string& id, int* events) {
    auto ctx = As(token);
    v1::WatchSweepRequest req;
    req.set_sweep_id(id);
    auto reader = sweep_stub_->WatchSweep(ctx.get(), req);
    v1::SweepEvent event;
    *events = 0;
    // A sweep that is still running would stream on: stop after the first.
    if (reader->Read(&event)) {
      ++*events;
      ctx->TryCancel();
    }
    while (reader->Read(&event)) {
    }
    return reader->Finish();
  }

  grpc::Status Query(const std::string& token, const std::string& id) {
    v1::QueryResultsRequest req;
    req.set_sweep_id(id);
    v1::QueryResultsResponse resp;
    return sweep_stub_->QueryResults(As(token).get(), req, &resp);
  }

  grpc::Status Register(const std::string& token, std::string* id = nullptr) {
    v1::RegisterWorkerRequest req;
    req.set_hostname("h");
    req.set_slots(1);
    v1::RegisterWorkerResponse resp;
    grpc::Status s = worker_stub_->RegisterWorker(As(token).get(), req, &resp);
    if (id != nullptr) *id = resp.worker_id();
    sessions_[resp.worker_id()] = resp.session();
    return s;
  }

  grpc::Status Acquire(const std::string& token, const std::string& worker,
                       v1::AcquireTasksResponse* resp) {
    v1::AcquireTasksRequest req;
    req.set_worker_id(worker);
    req.set_session(sessions_[worker]);
    req.set_max_tasks(1);
    return worker_stub_->AcquireTasks(As(token).get(), req, resp);
  }

  TempDir dir_;
  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<TokenStore> tokens_;
  std::unique_ptr<Authorizer> authorizer_;
  std::string admin_, alice_, bob_, worker_;
  std::unique_ptr<SweepServiceImpl> sweeps_;
  std::unique_ptr<WorkerServiceImpl> workers_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::SweepService::Stub> sweep_stub_;
  std::unique_ptr<v1::WorkerService::Stub> worker_stub_;
  std::map<std::string, std::string> sessions_;  // worker id -> its session
};

TEST_F(ServiceAuthTest, NoTokenOrAnUnknownOneIsUnauthenticatedOnEveryService) {
  const std::string unknown = "rs_" + std::string(43, 'x');
  for (const std::string& token : {std::string(), unknown}) {
    v1::ListSweepsResponse listed;
    grpc::Status s = List(token, &listed);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    std::string id;
    EXPECT_EQ(Submit(token, "x", &id).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    int events = -1;
    EXPECT_EQ(Watch(token, "sw-00000000", &events).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(events, 0);
    EXPECT_EQ(Register(token).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    v1::AcquireTasksResponse acquired;
    EXPECT_EQ(Acquire(token, "wk-1", &acquired).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  v1::ListSweepsResponse listed;
  EXPECT_EQ(List("", &listed).error_message(),
            "missing credentials: send the metadata 'authorization: Bearer TOKEN' "
            "(ranksweep and ranksweep-worker take it from RANKSWEEP_TOKEN)");
  EXPECT_EQ(List(unknown, &listed).error_message(), "unknown token");

  // A header that is not "Bearer TOKEN".
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Basic " + alice_);
  EXPECT_EQ(sweep_stub_->ListSweeps(&ctx, v1::ListSweepsRequest(), &listed).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // Nothing was written by the refused calls.
  EXPECT_EQ(coordinator_->ListSweeps(std::nullopt, 0)->size(), 0u);
  EXPECT_EQ(coordinator_->ListWorkers()->size(), 0u);
}

TEST_F(ServiceAuthTest, ARevokedTokenFailsFromTheNextCallOn) {
  v1::ListSweepsResponse listed;
  ASSERT_TRUE(List(alice_, &listed).ok());
  // Revoked through a second store on the file, as `ranksweepd token revoke`
  // does while the server runs.
  auto cli_store = Store::Open(dir_.File("auth.db"));
  ASSERT_TRUE(cli_store.ok()) << cli_store.status();
  TokenStore cli(cli_store->get(), &clock_);
  ASSERT_TRUE(*cli.Revoke("alice"));
  grpc::Status s = List(alice_, &listed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(), "token \"alice\" has been revoked");
  EXPECT_TRUE(List(bob_, &listed).ok());
}

TEST_F(ServiceAuthTest, EachRoleReachesOnlyItsService) {
  // A user may not act as a worker.
  std::string worker_id;
  ASSERT_TRUE(Register(worker_, &worker_id).ok());
  v1::AcquireTasksResponse acquired;
  grpc::Status s = Acquire(alice_, worker_id, &acquired);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(),
            "token \"alice\" has role user; /ranksweep.v1.WorkerService/AcquireTasks needs role "
            "admin, worker");
  EXPECT_EQ(Register(alice_).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // A worker may not submit, list or read sweeps.
  std::string id;
  s = Submit(worker_, "x", &id);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("SubmitSweep needs role admin, user"));
  v1::ListSweepsResponse listed;
  EXPECT_EQ(List(worker_, &listed).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  v1::ListWorkersResponse workers;
  EXPECT_EQ(
      sweep_stub_->ListWorkers(As(worker_).get(), v1::ListWorkersRequest(), &workers).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(coordinator_->ListSweeps(std::nullopt, 0)->size(), 0u);

  // Each does its own job; an admin does both.
  ASSERT_TRUE(Submit(alice_, "a", &id).ok());
  ASSERT_TRUE(Acquire(worker_, worker_id, &acquired).ok());
  ASSERT_EQ(acquired.tasks_size(), 1);
  EXPECT_EQ(acquired.tasks(0).sweep_id(), id);
  EXPECT_TRUE(Register(admin_).ok());
  EXPECT_TRUE(sweep_stub_->ListWorkers(As(alice_).get(), v1::ListWorkersRequest(), &workers).ok());
  EXPECT_EQ(workers.workers_size(), 2);

  // Only an admin may quarantine a worker; the admin's name is recorded.
  v1::QuarantineWorkerRequest quarantine;
  quarantine.set_worker_id(worker_id);
  v1::QuarantineWorkerResponse quarantined;
  for (const std::string* token : {&alice_, &worker_}) {
    grpc::Status q = sweep_stub_->QuarantineWorker(As(*token).get(), quarantine, &quarantined);
    EXPECT_EQ(q.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(q.error_message(), HasSubstr("QuarantineWorker needs role admin"));
  }
  ASSERT_TRUE(sweep_stub_->QuarantineWorker(As(admin_).get(), quarantine, &quarantined).ok());
  EXPECT_EQ(quarantined.quarantine_id(), 1);
  EXPECT_EQ(quarantined.results_invalidated(), 0);
}

TEST_F(ServiceAuthTest, UsersSeeAndCancelOnlyTheirOwnSweepsAdminsAll) {
  std::string a1, a2, b1;
  ASSERT_TRUE(Submit(alice_, "a1", &a1).ok());
  clock_.AdvanceMs(1);
  ASSERT_TRUE(Submit(bob_, "b1", &b1).ok());
  clock_.AdvanceMs(1);
  ASSERT_TRUE(Submit(alice_, "a2", &a2).ok());

  v1::ListSweepsResponse listed;
  ASSERT_TRUE(List(alice_, &listed).ok());
  ASSERT_EQ(listed.sweeps_size(), 2);
  EXPECT_EQ(listed.sweeps(0).sweep_id(), a2);
  EXPECT_EQ(listed.sweeps(1).sweep_id(), a1);
  EXPECT_EQ(listed.sweeps(0).owner(), "alice");
  EXPECT_EQ(listed.sweeps(1).owner(), "alice");
  ASSERT_TRUE(List(bob_, &listed).ok());
  ASSERT_EQ(listed.sweeps_size(), 1);
  EXPECT_EQ(listed.sweeps(0).sweep_id(), b1);
  EXPECT_EQ(listed.sweeps(0).owner(), "bob");
  ASSERT_TRUE(List(admin_, &listed).ok());
  EXPECT_EQ(listed.sweeps_size(), 3);

  // Alice cannot touch Bob's sweep, nor tell it from one that does not
  // exist: not cancel it, not read it, NOT_FOUND with an unknown id's words.
  int64_t cells = -1;
  grpc::Status s = Cancel(alice_, b1, &cells);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "no sweep " + b1);
  grpc::Status unknown = Cancel(alice_, "sw-00000000", &cells);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(unknown.error_message(), "no sweep sw-00000000");
  v1::GetSweepResponse got;
  EXPECT_EQ(Get(alice_, b1, &got).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_FALSE(got.has_sweep());
  EXPECT_EQ(Query(alice_, b1).error_code(), grpc::StatusCode::NOT_FOUND);
  int events = -1;
  EXPECT_EQ(Watch(alice_, b1, &events).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(events, 0);
  ASSERT_TRUE(Get(bob_, b1, &got).ok());
  EXPECT_EQ(got.sweep().state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_EQ(got.sweep().counts().pending(), 4);
  // An unknown sweep is NOT_FOUND for everyone.
  EXPECT_EQ(Cancel(alice_, "sw-00000000").error_code(), grpc::StatusCode::NOT_FOUND);

  // Her own: read, watch, query, cancel.
  ASSERT_TRUE(Get(alice_, a1, &got).ok());
  EXPECT_EQ(got.sweep().owner(), "alice");
  EXPECT_TRUE(Query(alice_, a1).ok());
  EXPECT_EQ(Watch(alice_, a1, &events).error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(events, 1);
  ASSERT_TRUE(Cancel(alice_, a1, &cells).ok());
  EXPECT_EQ(cells, 4);

  // The admin reads and cancels anyone's.
  ASSERT_TRUE(Get(admin_, b1, &got).ok());
  EXPECT_TRUE(Query(admin_, b1).ok());
  ASSERT_TRUE(Cancel(admin_, b1, &cells).ok());
  EXPECT_EQ(cells, 4);
  ASSERT_TRUE(Cancel(admin_, a2, &cells).ok());
  EXPECT_EQ(cells, 4);
  ASSERT_TRUE(List(admin_, &listed).ok());
  for (const v1::SweepInfo& sweep : listed.sweeps()) {
    EXPECT_EQ(sweep.state(), v1::SWEEP_STATE_CANCELLED) << sweep.sweep_id();
  }
  // An admin's own sweeps are recorded under its token's name.
  std::string mine;
  ASSERT_TRUE(Submit(admin_, "ops-sweep", &mine).ok());
  ASSERT_TRUE(Get(admin_, mine, &got).ok());
  EXPECT_EQ(got.sweep().owner(), "ops");
}

// Every RPC of ranksweep.v1 has a rule, and the adapters' names are the
// proto's: a method added to the proto without a rule would be closed.
TEST(AccessRulesTest, CoverEveryMethodOfTheProto) {
  const google::protobuf::DescriptorPool* pool = google::protobuf::DescriptorPool::generated_pool();
  std::set<std::string> seen;
  for (const char* service :
       {v1::SweepService::service_full_name(), v1::WorkerService::service_full_name()}) {
    const google::protobuf::ServiceDescriptor* d = pool->FindServiceByName(service);
    ASSERT_NE(d, nullptr) << service;
    for (int i = 0; i < d->method_count(); ++i) {
      const std::string method = "/" + d->full_name() + "/" + d->method(i)->name();
      EXPECT_FALSE(AllowedRoles(method).empty()) << method;
      seen.insert(method);
    }
  }
  EXPECT_EQ(seen.size(), 15u);
  for (const char* m : {methods::kSubmitSweep, methods::kGetSweep, methods::kValidateSweep,
                        methods::kListSweeps,
                        methods::kCancelSweep, methods::kWatchSweep, methods::kQueryResults,
                        methods::kListWorkers, methods::kRegisterWorker, methods::kAcquireTasks,
                        methods::kHeartbeat, methods::kCompleteTasks, methods::kFailTask,
                        methods::kQuarantineWorker, methods::kUnquarantineWorker}) {
    EXPECT_EQ(seen.count(m), 1u) << m;
  }
}

}  // namespace
}  // namespace ranksweep::server
