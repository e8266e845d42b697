// The gRPC client against an in-process WorkerService that records what it
// receives: field-for-field translation and status-code mapping.
#include "worker/agent/grpc_client.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace ranksweep::agent {
namespace {

class RecordingService : public v1::WorkerService::Service {
 public:
  grpc::Status RegisterWorker(grpc::ServerContext* ctx, const v1::RegisterWorkerRequest* req,
                              v1::RegisterWorkerResponse* resp) override {
    last_register = *req;
    auto auth = ctx->client_metadata().find("authorization");
    if (auth != ctx->client_metadata().end()) {
      last_authorization.assign(auth->second.data(), auth->second.size());
    }
    resp->set_worker_id("w-7");
    resp->set_lease_seconds(30);
    resp->set_heartbeat_seconds(10);
    resp->set_session("ws_fresh");
    return grpc::Status::OK;
  }
  grpc::Status AcquireTasks(grpc::ServerContext*, const v1::AcquireTasksRequest* req,
                            v1::AcquireTasksResponse* resp) override {
    last_acquire = *req;
    AddTask(resp->add_tasks());
    return grpc::Status::OK;
  }
  static void AddTask(v1::Task* t) {
    t->set_sweep_id("s-1");
    t->set_head_index(1);
    t->mutable_spec()->set_rank(8);
    t->mutable_spec()->add_seeds(3);
    t->mutable_spec()->add_seeds(4);
    for (int i = 0; i < 2; ++i) {
      v1::LeasedCell* c = t->add_cells();
      c->set_cell_id(10 + i);
      c->set_seed(3 + i);
      c->set_lease_id(100 + i);
      c->set_attempt(2);
    }
    t->set_deadline_unix_ms(1234);
  }
  // A heartbeat for lease 777 hangs until the client gives up on it (a
  // coordinator that does not answer, as a SIGSTOPped one).
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      last_heartbeat_session = req->session();
      ++heartbeats;
    }
    if (req->lease_ids_size() == 1 && req->lease_ids(0) == 777) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!ctx->IsCancelled() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      return grpc::Status::CANCELLED;
    }
    if (req->lease_ids_size() < 2) return grpc::Status::OK;
    resp->add_cancelled_lease_ids(req->lease_ids(0));
    resp->add_lost_lease_ids(req->lease_ids(1));
    resp->set_deadline_unix_ms(99);
    return grpc::Status::OK;
  }
  // Refuses a call without `next`; with it, records and leases one task.
  grpc::Status CompleteTasks(grpc::ServerContext*, const v1::CompleteTasksRequest* req,
                             v1::CompleteTasksResponse* resp) override {
    last_complete = *req;
    if (!req->has_next()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "lease 100 is stale");
    }
    resp->set_recorded(req->results_size());
    AddTask(resp->add_next_tasks());
    return grpc::Status::OK;
  }
  grpc::Status FailTask(grpc::ServerContext*, const v1::FailTaskRequest* req,
                        v1::FailTaskResponse*) override {
    last_fail = *req;
    return grpc::Status::OK;
  }

  std::mutex mu;
  std::string last_heartbeat_session;  // guarded by mu
  int heartbeats = 0;                  // guarded by mu
  v1::RegisterWorkerRequest last_register;
  std::string last_authorization;
  v1::AcquireTasksRequest last_acquire;
  v1::CompleteTasksRequest last_complete;
  v1::FailTaskRequest last_fail;
};

class GrpcClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    client_ = std::make_unique<GrpcCoordinatorClient>(
        MakeCoordinatorChannel("127.0.0.1:" + std::to_string(port)), absl::Seconds(10),
        "tok-123");
  }
  void TearDown() override { server_->Shutdown(); }

  RecordingService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcCoordinatorClient> client_;
};

TEST_F(GrpcClientTest, RegisterSendsTheManifest) {
  WorkerRegistration req;
  req.hostname = "h";
  req.device = "cuda";
  req.device_name = "cuda:0 (NVIDIA H200)";
  req.memory_bytes = 1LL << 40;
  req.slots = 2;
  req.version = {"0.1.0+abc", "2.5.1", "12.4"};
  req.worker_id = "w-7";
  absl::StatusOr<RegisterReply> reply = client_->Register(req);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->worker_id, "w-7");
  EXPECT_EQ(reply->lease_seconds, 30);
  EXPECT_EQ(reply->heartbeat_seconds, 10);
  const auto& got = service_.last_register;
  EXPECT_EQ(got.device(), "cuda");
  EXPECT_EQ(got.device_name(), "cuda:0 (NVIDIA H200)");
  EXPECT_EQ(got.memory_bytes(), 1LL << 40);
  EXPECT_EQ(got.slots(), 2);
  EXPECT_EQ(got.version().build_id(), "0.1.0+abc");
  EXPECT_EQ(got.version().torch_version(), "2.5.1");
  EXPECT_EQ(got.version().cuda_version(), "12.4");
  EXPECT_EQ(got.worker_id(), "w-7");
  EXPECT_EQ(service_.last_authorization, "Bearer tok-123");
}

TEST_F(GrpcClientTest, AcquireTranslatesTasks) {
  absl::StatusOr<std::vector<Task>> tasks = client_->Acquire("w-7", TaskWant{2, 32, int64_t{1} << 30}, 5);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_EQ(service_.last_acquire.max_tasks(), 2);
  EXPECT_EQ(service_.last_acquire.max_seeds(), 32);
  EXPECT_EQ(service_.last_acquire.memory_bytes(), int64_t{1} << 30);
  EXPECT_EQ(service_.last_acquire.wait_ms(), 5);
  ASSERT_EQ(tasks->size(), 1u);
  const Task& t = (*tasks)[0];
  EXPECT_EQ(t.sweep_id, "s-1");
  EXPECT_EQ(t.head_index, 1);
  EXPECT_EQ(t.spec.rank, 8);
  EXPECT_EQ(t.spec.seeds, (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(t.spec.dataset.m, 3);  // proto zero = the spec default
  ASSERT_EQ(t.cells.size(), 2u);
  EXPECT_EQ(t.cells[1].cell_id, 11);
  EXPECT_EQ(t.cells[1].seed, 4u);
  EXPECT_EQ(t.cells[1].lease_id, 101);
  EXPECT_EQ(t.cells[1].attempt, 2);
  EXPECT_EQ(t.deadline_unix_ms, 1234);
}

TEST_F(GrpcClientTest, HeartbeatAndFail) {
  absl::StatusOr<HeartbeatOutcome> hb = client_->Heartbeat("w-7", {5, 6});
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->cancelled_lease_ids, (std::vector<int64_t>{5}));
  EXPECT_EQ(hb->lost_lease_ids, (std::vector<int64_t>{6}));
  EXPECT_EQ(hb->deadline_unix_ms, 99);
  ASSERT_TRUE(client_->Fail("w-7", {5, 6}, "worker shutting down", true).ok());
  EXPECT_EQ(service_.last_fail.lease_ids_size(), 2);
  EXPECT_EQ(service_.last_fail.reason(), "worker shutting down");
  EXPECT_TRUE(service_.last_fail.release());
}

TEST_F(GrpcClientTest, CompleteKeepsTheServersCodeAndMessage) {
  CellResult r;
  r.cell_id = 10;
  r.lease_id = 100;
  r.result.seed = 3;
  r.result.steps = 42;
  r.result.train.sequences = 64;
  absl::StatusOr<CompleteOutcome> reply = client_->Complete("w-7", {r}, std::nullopt);
  EXPECT_EQ(reply.status(), absl::FailedPreconditionError("lease 100 is stale"));
  ASSERT_EQ(service_.last_complete.results_size(), 1);
  EXPECT_FALSE(service_.last_complete.has_next());
  EXPECT_EQ(service_.last_complete.results(0).lease_id(), 100);
  EXPECT_EQ(service_.last_complete.results(0).result().steps(), 42);
  EXPECT_EQ(service_.last_complete.results(0).result().train().sequences(), 64);
}

TEST_F(GrpcClientTest, CompleteAsksForTheNextTasksAndTranslatesThem) {
  CellResult r;
  r.cell_id = 10;
  r.lease_id = 100;
  r.result.seed = 3;
  absl::StatusOr<CompleteOutcome> reply = client_->Complete("w-7", {r}, TaskWant{1, 16, 1 << 20});
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(service_.last_complete.has_next());
  EXPECT_EQ(service_.last_complete.next().max_tasks(), 1);
  EXPECT_EQ(service_.last_complete.next().max_seeds(), 16);
  EXPECT_EQ(service_.last_complete.next().memory_bytes(), 1 << 20);
  EXPECT_EQ(reply->recorded, 1);
  ASSERT_EQ(reply->next_tasks.size(), 1u);
  const Task& t = reply->next_tasks[0];
  EXPECT_EQ(t.sweep_id, "s-1");
  EXPECT_EQ(t.spec.seeds, (std::vector<uint64_t>{3, 4}));
  ASSERT_EQ(t.cells.size(), 2u);
  EXPECT_EQ(t.cells[1].lease_id, 101);
  EXPECT_EQ(t.deadline_unix_ms, 1234);
}

TEST_F(GrpcClientTest, RegisterHandsOverTheSessionAndResumeSessionReplacesIt) {
  absl::StatusOr<RegisterReply> reply = client_->Register(WorkerRegistration{});
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->session, "ws_fresh");
  ASSERT_TRUE(client_->Heartbeat("w-7", {}).ok());
  {
    std::lock_guard<std::mutex> lock(service_.mu);
    EXPECT_EQ(service_.last_heartbeat_session, "ws_fresh");
  }
  client_->ResumeSession("ws_left_by_the_last_process");
  ASSERT_TRUE(client_->Heartbeat("w-7", {}).ok());
  std::lock_guard<std::mutex> lock(service_.mu);
  EXPECT_EQ(service_.last_heartbeat_session, "ws_left_by_the_last_process");
}

// The drain's deadline cuts a call already in flight (its own deadline is
// the 10 s rpc timeout) and every later one.
TEST_F(GrpcClientTest, SetDeadlineCutsACallInFlightAndEveryLaterOne) {
  absl::Status hung = absl::UnknownError("not returned");
  absl::Time returned;
  std::thread call([&] {
    hung = client_->Heartbeat("w-7", {777}).status();
    returned = absl::Now();
  });
  // The call is in flight once the server has it.
  bool in_flight = false;
  for (int i = 0; i < 1000 && !in_flight; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    std::lock_guard<std::mutex> lock(service_.mu);
    in_flight = service_.heartbeats == 1;
  }
  if (!in_flight) {
    client_->SetDeadline(absl::Now());
    call.join();
    FAIL() << "the server never received the heartbeat";
  }
  const absl::Time deadline = absl::Now() + absl::Milliseconds(300);
  client_->SetDeadline(deadline);
  call.join();
  const absl::Status drain_passed =
      absl::DeadlineExceededError("the worker's drain deadline passed (--drain-seconds)");
  EXPECT_EQ(hung, drain_passed);
  EXPECT_GE(returned, deadline);
  EXPECT_LT(returned, deadline + absl::Seconds(1));

  // A later call is refused before it is sent: gRPC alone may still let a
  // call whose deadline has passed reach the server and succeed.
  EXPECT_EQ(client_->Heartbeat("w-7", {1, 2}).status(), drain_passed);
  EXPECT_EQ(client_->Fail("w-7", {1}, "drained", true), drain_passed);
  std::lock_guard<std::mutex> lock(service_.mu);
  EXPECT_EQ(service_.heartbeats, 1);
}

TEST(GrpcClientUnreachableTest, IsUnavailable) {
  GrpcCoordinatorClient client(MakeCoordinatorChannel("127.0.0.1:1"), absl::Seconds(5));
  EXPECT_EQ(client.Heartbeat("w", {}).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ranksweep::agent
