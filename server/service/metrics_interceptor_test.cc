// The metrics interceptor on a real gRPC server (127.0.0.1:0) with the real
// adapters over a coordinator on a temporary SQLite file: each counter moves
// by exactly what the calls did, the refused ones included.
#include "server/service/metrics_interceptor.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "gtest/gtest.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "server/core/auth.h"
#include "server/core/clock.h"
#include "server/core/coordinator.h"
#include "server/core/log.h"
#include "server/core/metrics.h"
#include "server/core/store.h"
#include "server/service/sweep_service.h"
#include "server/service/worker_service.h"

namespace ranksweep::server {
namespace {

using namespace std::chrono_literals;

constexpr char kWorkers[] = "/ranksweep.v1.WorkerService/";

class MetricsInterceptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogEnabled(false);
    std::string tmpl = (std::filesystem::temp_directory_path() / "metrics_test.XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    auto store = Store::Open(dir_ + "/metrics.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    coordinator_ = std::make_unique<Coordinator>(store_.get(), &clock_);
    sweeps_ = std::make_unique<SweepServiceImpl>(coordinator_.get(), &authorizer_);
    workers_ = std::make_unique<WorkerServiceImpl>(coordinator_.get(), &authorizer_);
    DefineCoordinatorMetrics(&metrics_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(sweeps_.get());
    builder.RegisterService(workers_.get());
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> factories;
    factories.push_back(std::make_unique<MetricsInterceptorFactory>(&metrics_));
    builder.experimental().SetInterceptorCreators(std::move(factories));
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
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Counters are added when a call's status is sent, just before the
  // client sees it; wait for a count rather than race it.
  double Await(const std::string& name, const MetricLabels& labels, double want) {
    for (int i = 0; i < 200 && metrics_.Value(name, labels) != want; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    return metrics_.Value(name, labels);
  }

  std::string dir_;
  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
  const Authorizer authorizer_ = Authorizer::InsecureLocal();
  std::unique_ptr<SweepServiceImpl> sweeps_;
  std::unique_ptr<WorkerServiceImpl> workers_;
  MetricsRegistry metrics_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::SweepService::Stub> sweep_stub_;
  std::unique_ptr<v1::WorkerService::Stub> worker_stub_;
};

TEST_F(MetricsInterceptorTest, CountsLeasesResultsAndCallsIncludingTheRefusedOnes) {
  // A kernel head at rank 1 with 3 seeds: one task of 3 cells.
  v1::SubmitSweepRequest submit;
  v1::SweepSpec* spec = submit.mutable_spec();
  spec->set_name("metrics");
  spec->mutable_dataset()->set_kind(v1::DATASET_KIND_EXHAUSTIVE);
  spec->mutable_dataset()->set_m(2);
  spec->mutable_dataset()->set_seq_len(3);
  spec->add_heads()->set_kind(v1::HEAD_KIND_KERNEL);
  spec->add_ranks(1);
  spec->set_seed_count(3);
  v1::SubmitSweepResponse submitted;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(sweep_stub_->SubmitSweep(&ctx, submit, &submitted).ok());
  }
  v1::RegisterWorkerRequest reg;
  reg.set_hostname("h");
  reg.set_device("cpu");
  reg.set_slots(1);
  v1::RegisterWorkerResponse registered;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(worker_stub_->RegisterWorker(&ctx, reg, &registered).ok());
  }
  v1::AcquireTasksRequest acquire;
  acquire.set_worker_id(registered.worker_id());
  acquire.set_max_tasks(1);
  acquire.set_max_seeds(64);
  v1::AcquireTasksResponse acquired;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(worker_stub_->AcquireTasks(&ctx, acquire, &acquired).ok());
  }
  ASSERT_EQ(acquired.tasks_size(), 1);
  const v1::Task& task = acquired.tasks(0);
  ASSERT_EQ(task.cells_size(), 3);
  EXPECT_EQ(Await("ranksweep_leases_granted_total", {}, 3), 3);

  // A heartbeat naming one real lease and one that never existed.
  v1::HeartbeatRequest beat;
  beat.set_worker_id(registered.worker_id());
  beat.add_lease_ids(task.cells(0).lease_id());
  beat.add_lease_ids(987654321);
  v1::HeartbeatResponse beaten;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(worker_stub_->Heartbeat(&ctx, beat, &beaten).ok());
  }
  EXPECT_EQ(beaten.lost_lease_ids_size(), 1);
  EXPECT_EQ(Await("ranksweep_leases_lost_total", {}, 1), 1);

  v1::CompleteTasksRequest complete;
  complete.set_worker_id(registered.worker_id());
  for (const v1::LeasedCell& c : task.cells()) {
    v1::CellResult* r = complete.add_results();
    r->set_cell_id(c.cell_id());
    r->set_lease_id(c.lease_id());
    r->mutable_result()->set_seed(c.seed());
    r->mutable_result()->mutable_train()->set_sequences(64);
  }
  // The same three results under a stale lease: refused, nothing stored.
  v1::CompleteTasksRequest stale = complete;
  for (v1::CellResult& r : *stale.mutable_results()) r.set_lease_id(r.lease_id() + 1000);
  v1::CompleteTasksResponse done;
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(worker_stub_->CompleteTasks(&ctx, stale, &done).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
  EXPECT_EQ(Await("ranksweep_results_rejected_total", {{"reason", "FAILED_PRECONDITION"}}, 3),
            3);
  EXPECT_EQ(metrics_.Value("ranksweep_results_accepted_total", {}), 0);
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(worker_stub_->CompleteTasks(&ctx, complete, &done).ok());
  }
  EXPECT_EQ(done.recorded(), 3);
  EXPECT_EQ(Await("ranksweep_results_accepted_total", {}, 3), 3);
  // Sent again after a lost reply: acknowledged, not counted twice.
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(worker_stub_->CompleteTasks(&ctx, complete, &done).ok());
  }
  EXPECT_EQ(done.duplicates(), 3);
  const std::string method = std::string(kWorkers) + "CompleteTasks";
  EXPECT_EQ(Await("ranksweep_rpcs_total", {{"method", method}, {"code", "OK"}}, 2), 2);
  EXPECT_EQ(metrics_.Value("ranksweep_results_accepted_total", {}), 3);
  EXPECT_EQ(metrics_.Value("ranksweep_rpcs_total",
                           {{"method", method}, {"code", "FAILED_PRECONDITION"}}),
            1);
  EXPECT_EQ(metrics_.Value("ranksweep_rpcs_total",
                           {{"method", "/ranksweep.v1.SweepService/SubmitSweep"}, {"code", "OK"}}),
            1);
  EXPECT_EQ(metrics_.Value("ranksweep_leases_granted_total", {}), 3);
}

TEST(StatusCodeNameTest, NamesEveryCodeAsGrpcSpellsIt) {
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::FAILED_PRECONDITION), "FAILED_PRECONDITION");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(static_cast<grpc::StatusCode>(99)), "UNKNOWN");
}

}  // namespace
}  // namespace ranksweep::server
