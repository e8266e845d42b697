// The fixture of the gRPC adapters' tests (service_test.cc,
// service_results_test.cc, service_stream_test.cc): a real server on
// 127.0.0.1:0 and real client stubs, over a coordinator on a temporary
// SQLite file.
#ifndef RANKSWEEP_SERVER_SERVICE_SERVICE_TEST_FIXTURE_H_
#define RANKSWEEP_SERVER_SERVICE_SERVICE_TEST_FIXTURE_H_

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include "common/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/spec/spec_json.h"
#include "proto/columns.h"
#include "proto/convert.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "server/core/auth.h"
#include "server/core/clock.h"
#include "server/core/coordinator.h"
#include "server/core/log.h"
#include "server/core/store.h"
#include "server/core/metrics.h"
#include "server/service/metrics_interceptor.h"
#include "server/service/sweep_service.h"
#include "server/service/translate.h"
#include "server/service/worker_service.h"

namespace ranksweep::server {

using ::ranksweep::TempDir;

// kernel + softmax on exhaustive m=2, N=3; `ranks` x `seeds` kernel cells plus
// `seeds` softmax cells.
inline v1::SweepSpec Spec(const std::string& name, std::vector<int> ranks = {1, 2, 4}, int seeds = 4) {
  v1::SweepSpec s;
  s.set_name(name);
  s.mutable_dataset()->set_kind(v1::DATASET_KIND_EXHAUSTIVE);
  s.mutable_dataset()->set_m(2);
  s.mutable_dataset()->set_seq_len(3);
  s.add_heads()->set_kind(v1::HEAD_KIND_KERNEL);
  s.add_heads()->set_kind(v1::HEAD_KIND_SOFTMAX);
  for (int r : ranks) s.add_ranks(r);
  s.set_seed_count(seeds);
  return s;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogEnabled(false);
    auto store = Store::Open(dir_.File("service.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    CoordinatorOptions options;
    options.lease_ms = 10'000;
    coordinator_ = std::make_unique<Coordinator>(store_.get(), &clock_, options);
    // The operators' metrics, counted by the interceptor ranksweepd installs.
    DefineCoordinatorMetrics(&metrics_);
    // The reply cache on, as ranksweepd runs it: every query of these tests
    // that follows a change reads the change.
    SweepServiceOptions sweep_options;
    sweep_options.query_cache_bytes = query_cache_bytes_;
    sweep_options.column_block_rows = column_block_rows_;
    sweep_options.metrics = &metrics_;
    sweeps_ = std::make_unique<SweepServiceImpl>(coordinator_.get(), &authorizer_, sweep_options);
    workers_ = std::make_unique<WorkerServiceImpl>(coordinator_.get(), &authorizer_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(sweeps_.get());
    builder.RegisterService(workers_.get());
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counters;
    counters.push_back(std::make_unique<MetricsInterceptorFactory>(&metrics_));
    builder.experimental().SetInterceptorCreators(std::move(counters));
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                       grpc::InsecureChannelCredentials());
    sweep_stub_ = v1::SweepService::NewStub(channel);
    worker_stub_ = v1::WorkerService::NewStub(channel);
  }

  void TearDown() override {
    workers_->Shutdown();
    sweeps_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_.reset();
  }

  std::string Submit(const v1::SweepSpec& spec, int64_t* cells = nullptr) {
    grpc::ClientContext ctx;
    v1::SubmitSweepRequest req;
    *req.mutable_spec() = spec;
    v1::SubmitSweepResponse resp;
    grpc::Status s = sweep_stub_->SubmitSweep(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (cells != nullptr) *cells = resp.cells();
    return resp.sweep_id();
  }

  std::string Register() {
    grpc::ClientContext ctx;
    v1::RegisterWorkerRequest req;
    req.set_hostname("test-host");
    req.set_device("cpu");
    req.set_slots(1);
    req.mutable_version()->set_build_id("0.1.0+test");
    req.mutable_version()->set_torch_version("2.1.0");
    v1::RegisterWorkerResponse resp;
    grpc::Status s = worker_stub_->RegisterWorker(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.lease_seconds(), 10);
    EXPECT_EQ(resp.heartbeat_seconds(), 3);
    sessions_[resp.worker_id()] = resp.session();
    return resp.worker_id();
  }

  // The session secret Register got for `worker`, which every later worker
  // call must carry (empty for a worker this fixture did not register).
  std::string Session(const std::string& worker) const {
    auto it = sessions_.find(worker);
    return it == sessions_.end() ? std::string() : it->second;
  }

  grpc::Status Acquire(const std::string& worker, int wait_ms, v1::AcquireTasksResponse* resp,
                       int max_seeds = 64) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::AcquireTasksRequest req;
    req.set_worker_id(worker);
    req.set_session(Session(worker));
    req.set_max_tasks(1);
    req.set_max_seeds(max_seeds);
    req.set_wait_ms(wait_ms);
    return worker_stub_->AcquireTasks(&ctx, req, resp);
  }

  v1::CompleteTasksRequest ResultsFor(const std::string& worker, const v1::Task& task) {
    v1::CompleteTasksRequest req;
    req.set_worker_id(worker);
    req.set_session(Session(worker));
    for (const v1::LeasedCell& c : task.cells()) {
      v1::CellResult* r = req.add_results();
      r->set_cell_id(c.cell_id());
      r->set_lease_id(c.lease_id());
      r->mutable_result()->set_seed(c.seed());
      r->mutable_result()->mutable_train()->set_sequences(64);
      r->mutable_result()->mutable_train()->set_error(0.25);
      r->mutable_result()->mutable_train()->set_exact_accuracy(0.75);
      r->mutable_result()->mutable_train()->set_position_accuracy(0.75);
      r->mutable_result()->set_wall_seconds(1.5);
      // Coherent with the task (server/core/results/result_checks.h): Spec's
      // dataset has 2^(2*3) sequences, the loss is not 0 for an error.
      r->mutable_result()->mutable_facts()->set_train_sequences(64);
      r->mutable_result()->set_final_loss(0.0625);
      r->mutable_result()->set_steps(100);
    }
    return req;
  }

  grpc::Status Complete(const v1::CompleteTasksRequest& req, v1::CompleteTasksResponse* resp) {
    grpc::ClientContext ctx;
    return worker_stub_->CompleteTasks(&ctx, req, resp);
  }

  // A kernel-only sweep of `seeds` cells (rank 1), submitted.
  std::string SubmitKernelCells(const std::string& name, int seeds) {
    v1::SweepSpec spec = Spec(name, {1}, seeds);
    spec.mutable_heads()->RemoveLast();
    return Submit(spec);
  }

  // A WatchSweep stream on `sweep` (30 s deadline on `ctx`) whose first
  // event has been read into `first`; null when there was none.
  std::unique_ptr<grpc::ClientReader<v1::SweepEvent>> Watch(grpc::ClientContext* ctx,
                                                            const std::string& sweep,
                                                            v1::SweepEvent* first) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::WatchSweepRequest req;
    req.set_sweep_id(sweep);
    auto reader = sweep_stub_->WatchSweep(ctx, req);
    if (!reader->Read(first)) return nullptr;
    return reader;
  }

  TempDir dir_;
  ManualClock clock_;
  // SweepServiceOptions' query_cache_bytes and column_block_rows; a fixture
  // may set them first.
  int64_t query_cache_bytes_ = 64 << 20;
  int64_t column_block_rows_ = 0;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
  // Authentication has its own suite (service_auth_test.cc).
  const Authorizer authorizer_ = Authorizer::InsecureLocal();
  std::unique_ptr<SweepServiceImpl> sweeps_;
  std::unique_ptr<WorkerServiceImpl> workers_;
  MetricsRegistry metrics_;  // outlives the server
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::SweepService::Stub> sweep_stub_;
  std::unique_ptr<v1::WorkerService::Stub> worker_stub_;
  std::map<std::string, std::string> sessions_;  // worker id -> its session
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_SERVICE_TEST_FIXTURE_H_
