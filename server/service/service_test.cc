// The gRPC adapters with a real server on 127.0.0.1:0 and real client stubs,
// over a coordinator on a temporary SQLite file.
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
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

using ::ranksweep::TempDir;

// kernel + softmax on exhaustive m=2, N=3; `ranks` x `seeds` kernel cells plus
// `seeds` softmax cells.
v1::SweepSpec Spec(const std::string& name, std::vector<int> ranks = {1, 2, 4}, int seeds = 4) {
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
    sweeps_ = std::make_unique<SweepServiceImpl>(coordinator_.get(), &authorizer_);
    workers_ = std::make_unique<WorkerServiceImpl>(coordinator_.get(), &authorizer_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(sweeps_.get());
    builder.RegisterService(workers_.get());
    // The operators' metrics, counted by the interceptor ranksweepd installs.
    DefineCoordinatorMetrics(&metrics_);
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
    server_->Shutdown(std::chrono::system_clock::now() + 5s);
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
    return resp.worker_id();
  }

  grpc::Status Acquire(const std::string& worker, int wait_ms, v1::AcquireTasksResponse* resp,
                       int max_seeds = 64) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    v1::AcquireTasksRequest req;
    req.set_worker_id(worker);
    req.set_max_tasks(1);
    req.set_max_seeds(max_seeds);
    req.set_wait_ms(wait_ms);
    return worker_stub_->AcquireTasks(&ctx, req, resp);
  }

  v1::CompleteTasksRequest ResultsFor(const std::string& worker, const v1::Task& task) {
    v1::CompleteTasksRequest req;
    req.set_worker_id(worker);
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
    ctx->set_deadline(std::chrono::system_clock::now() + 30s);
    v1::WatchSweepRequest req;
    req.set_sweep_id(sweep);
    auto reader = sweep_stub_->WatchSweep(ctx, req);
    if (!reader->Read(first)) return nullptr;
    return reader;
  }

  TempDir dir_;
  ManualClock clock_;
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
};

// Every spec field whose default is not zero, at zero, at its default and at
// another value, submitted as the CLI submits it (ToProto of the spec) and
// read back from the TaskSpec a worker is leased: the worker trains exactly
// what was submitted. A value the spec check refuses (m = 0) is refused by
// the server with the same message instead of becoming the default.
TEST_F(ServiceTest, EverySpecValueReachesTheWorkerAsSubmitted) {
  SweepSpec exhaustive;
  exhaustive.dataset.m = 2;
  exhaustive.dataset.seq_len = 3;
  exhaustive.heads = {HeadSpec{}};
  exhaustive.ranks = {1};
  exhaustive.seed_count = 1;
  SweepSpec witness = exhaustive;
  witness.dataset.kind = DatasetKind::kWitness;
  witness.dataset.m = 10;
  witness.dataset.code_weight = 3;
  witness.dataset.max_overlap = 1;
  SweepSpec pool = exhaustive;
  pool.dataset.kind = DatasetKind::kPool;
  pool.dataset.m = 4;
  pool.dataset.pool_size = 16;
  pool.dataset.train_size = 8;
  pool.dataset.test_size = 4;
  SweepSpec multihead = exhaustive;
  multihead.heads[0].kind = HeadKind::kMultiheadKernel;
  SweepSpec relu = exhaustive;
  relu.heads[0].feature_map = FeatureMap::kReluEps;

  struct Case {
    const char* field;
    const SweepSpec* base;
    std::function<void(SweepSpec&, double)> set;
    double zero_default_other[3];
    bool zero_is_legal;
  };
  const DatasetSpec d;
  const HeadSpec h;
  const TrainSpec t;
  const std::vector<Case> cases = {
      {"dataset.m", &exhaustive, [](SweepSpec& s, double v) { s.dataset.m = static_cast<int>(v); }, {0, 3, 4}, false},
      {"dataset.seq_len", &exhaustive, [](SweepSpec& s, double v) { s.dataset.seq_len = static_cast<int>(v); },
       {0, 3, 4}, false},
      {"dataset.code_weight", &witness,
       [](SweepSpec& s, double v) { s.dataset.code_weight = static_cast<int>(v); }, {0, 8, 4}, false},
      {"dataset.max_overlap", &witness,
       [](SweepSpec& s, double v) { s.dataset.max_overlap = static_cast<int>(v); }, {0, 4, 2}, true},
      {"dataset.bernoulli_p", &pool, [](SweepSpec& s, double v) { s.dataset.bernoulli_p = v; },
       {0, d.bernoulli_p, 0.25}, false},
      {"dataset.test_pool_share", &pool,
       [](SweepSpec& s, double v) { s.dataset.test_pool_share = v; }, {0, d.test_pool_share, 0.25},
       true},
      {"dataset.hard_share", &pool, [](SweepSpec& s, double v) { s.dataset.hard_share = v; },
       {0, d.hard_share, 0.75}, true},
      {"head.num_heads", &multihead, [](SweepSpec& s, double v) { s.heads[0].num_heads = static_cast<int>(v); },
       {0, 1, 4}, false},
      {"head.relu_eps", &relu, [](SweepSpec& s, double v) { s.heads[0].relu_eps = v; },
       {0, h.relu_eps, 0.01}, false},
      {"train.lr", &exhaustive, [](SweepSpec& s, double v) { s.train.lr = v; }, {0, t.lr, 0.05},
       false},
      {"train.beta1", &exhaustive, [](SweepSpec& s, double v) { s.train.beta1 = v; },
       {0, t.beta1, 0.5}, true},
      {"train.beta2", &exhaustive, [](SweepSpec& s, double v) { s.train.beta2 = v; },
       {0, t.beta2, 0.9}, true},
      {"train.max_steps", &exhaustive, [](SweepSpec& s, double v) { s.train.max_steps = static_cast<int>(v); },
       {0, 2000, 10}, true},
      {"train.eval_every", &exhaustive, [](SweepSpec& s, double v) { s.train.eval_every = static_cast<int>(v); },
       {0, 50, 5}, false},
      {"train.early_stop_evals", &exhaustive,  // 0 = never
       [](SweepSpec& s, double v) { s.train.early_stop_evals = static_cast<int>(v); }, {0, 3, 7}, true},
  };
  const std::string worker = Register();
  int n = 0;
  for (const Case& c : cases) {
    for (int pick = 0; pick < 3; ++pick) {
      const double value = c.zero_default_other[pick];
      SCOPED_TRACE(std::string(c.field) + " = " + std::to_string(value));
      SweepSpec spec = *c.base;
      spec.name = "field-" + std::to_string(++n);
      c.set(spec, value);
      const absl::Status valid = ValidateSweepSpec(spec);
      if (pick == 0) EXPECT_EQ(valid.ok(), c.zero_is_legal) << valid;
      grpc::ClientContext ctx;
      v1::SubmitSweepRequest req;
      *req.mutable_spec() = ToProto(spec);
      v1::SubmitSweepResponse submitted;
      grpc::Status s = sweep_stub_->SubmitSweep(&ctx, req, &submitted);
      if (!valid.ok()) {
        EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
        EXPECT_EQ(s.error_message(), valid.message());
        EXPECT_THAT(s.error_message(), HasSubstr(c.field));
        continue;
      }
      ASSERT_TRUE(s.ok()) << s.error_message();
      v1::AcquireTasksResponse acquired;
      ASSERT_TRUE(Acquire(worker, 0, &acquired).ok());
      ASSERT_EQ(acquired.tasks_size(), 1);
      ASSERT_EQ(acquired.tasks(0).sweep_id(), submitted.sweep_id());
      TaskSpec want;
      want.dataset = spec.dataset;
      want.head = spec.heads[0];
      want.rank = 1;
      want.train = spec.train;
      want.seeds = {0};
      EXPECT_EQ(TaskSpecToJson(::ranksweep::FromProto(acquired.tasks(0).spec())), TaskSpecToJson(want));
      // Cancelled, so that the next case's task is the next one leased.
      grpc::ClientContext cctx;
      v1::CancelSweepRequest cancel;
      cancel.set_sweep_id(submitted.sweep_id());
      v1::CancelSweepResponse cancelled;
      ASSERT_TRUE(sweep_stub_->CancelSweep(&cctx, cancel, &cancelled).ok());
    }
  }
}

TEST_F(ServiceTest, SubmitAndGetSweep) {
  int64_t cells = 0;
  std::string id = Submit(Spec("grid"), &cells);
  EXPECT_EQ(cells, 16);
  grpc::ClientContext ctx;
  v1::GetSweepRequest req;
  req.set_sweep_id(id);
  v1::GetSweepResponse resp;
  ASSERT_TRUE(sweep_stub_->GetSweep(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.sweep().sweep_id(), id);
  EXPECT_EQ(resp.sweep().state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_EQ(resp.sweep().counts().total(), 16);
  EXPECT_EQ(resp.sweep().counts().pending(), 16);
  EXPECT_EQ(resp.sweep().owner(), "local");
  EXPECT_EQ(resp.sweep().spec().ranks_size(), 3);
  EXPECT_EQ(resp.sweep().spec().heads(1).kind(), v1::HEAD_KIND_SOFTMAX);

  grpc::ClientContext ctx2;
  v1::ListSweepsRequest list;
  list.set_state(v1::SWEEP_STATE_RUNNING);
  v1::ListSweepsResponse listed;
  ASSERT_TRUE(sweep_stub_->ListSweeps(&ctx2, list, &listed).ok());
  ASSERT_EQ(listed.sweeps_size(), 1);
  EXPECT_EQ(listed.sweeps(0).sweep_id(), id);
}

TEST_F(ServiceTest, ErrorsKeepTheirCodes) {
  v1::SweepSpec bad = Spec("bad");
  bad.mutable_dataset()->set_m(100);
  grpc::ClientContext ctx;
  v1::SubmitSweepRequest req;
  *req.mutable_spec() = bad;
  v1::SubmitSweepResponse resp;
  grpc::Status s = sweep_stub_->SubmitSweep(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("dataset.m"));

  grpc::ClientContext ctx2;
  v1::GetSweepRequest get;
  get.set_sweep_id("sw-00000000");
  v1::GetSweepResponse got;
  EXPECT_EQ(sweep_stub_->GetSweep(&ctx2, get, &got).error_code(), grpc::StatusCode::NOT_FOUND);

  v1::AcquireTasksResponse acquired;
  EXPECT_EQ(Acquire("wk-nobody", 0, &acquired).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Acquire("wk-nobody", 60001, &acquired).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServiceTest, WireErrorsNameWhatWasSentAndEchoLittleOfIt) {
  // An enum number the protocol does not define is named as sent.
  v1::SubmitSweepRequest req;
  *req.mutable_spec() = Spec("enum");
  req.mutable_spec()->mutable_heads(0)->set_kind(static_cast<v1::HeadKind>(5));
  v1::SubmitSweepResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = sweep_stub_->SubmitSweep(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "heads[0]: head.kind must be one of kernel, softmax, "
                               "signed_kernel, multihead_kernel; got value 5");
  // early_stop_evals -2 is refused, not stored as "never".
  *req.mutable_spec() = Spec("early");
  req.mutable_spec()->mutable_train()->set_early_stop_evals(-2);
  grpc::ClientContext ctx2;
  s = sweep_stub_->SubmitSweep(&ctx2, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("train.early_stop_evals must be -1"));
  EXPECT_EQ(coordinator_->ListSweeps(std::nullopt, 0)->size(), 0u);

  // A 7,000-character sweep id comes back cut to 200 characters.
  v1::GetSweepRequest get;
  get.set_sweep_id(std::string(7000, 's'));
  v1::GetSweepResponse got;
  grpc::ClientContext ctx3;
  s = sweep_stub_->GetSweep(&ctx3, get, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "no sweep " + std::string(200, 's') + "... (7000 bytes)");
}

TEST(ToGrpcStatusTest, InternalRepliesCarryAnIdInsteadOfTheText) {
  grpc::Status s = ToGrpcStatus(absl::InternalError(
      "INSERT INTO results (cell_id) VALUES (?1): attempt to write a readonly database"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(s.error_message(), ::testing::MatchesRegex(
                                     "internal error E[0-9]+-[0-9]+ \\(the coordinator's log "
                                     "has the details\\)"));
  EXPECT_THAT(s.error_message(), ::testing::Not(HasSubstr("INSERT")));
  grpc::Status other = ToGrpcStatus(absl::InvalidArgumentError(std::string(5000, 'x')));
  EXPECT_EQ(other.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(other.error_message().size(), 1024u + 20u);
}

TEST_F(ServiceTest, WorkerLifecycleRecordsProvenanceAndFencesStaleLeases) {
  std::string sweep = Submit(Spec("grid"));
  std::string worker = Register();
  v1::AcquireTasksResponse acquired;
  ASSERT_TRUE(Acquire(worker, 0, &acquired, 2).ok());
  ASSERT_EQ(acquired.tasks_size(), 1);
  const v1::Task& task = acquired.tasks(0);
  EXPECT_EQ(task.sweep_id(), sweep);
  EXPECT_EQ(task.head_index(), 0);
  EXPECT_EQ(task.spec().rank(), 1);
  ASSERT_EQ(task.cells_size(), 2);
  EXPECT_EQ(task.spec().seeds_size(), 2);
  EXPECT_EQ(task.cells(0).attempt(), 1);
  EXPECT_EQ(task.deadline_unix_ms(), clock_.NowMs() + 10'000);

  v1::CompleteTasksResponse done;
  ASSERT_TRUE(Complete(ResultsFor(worker, task), &done).ok());
  EXPECT_EQ(done.recorded(), 2);
  EXPECT_EQ(done.duplicates(), 0);
  ASSERT_TRUE(Complete(ResultsFor(worker, task), &done).ok());
  EXPECT_EQ(done.recorded(), 0);
  EXPECT_EQ(done.duplicates(), 2);

  // A made-up lease is stale: FAILED_PRECONDITION, nothing recorded.
  v1::AcquireTasksResponse more;
  ASSERT_TRUE(Acquire(worker, 0, &more, 1).ok());
  v1::CompleteTasksRequest stale = ResultsFor(worker, more.tasks(0));
  stale.mutable_results(0)->set_lease_id(more.tasks(0).cells(0).lease_id() + 100);
  EXPECT_EQ(Complete(stale, &done).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  grpc::ClientContext qctx;
  v1::QueryResultsRequest query;
  query.set_sweep_id(sweep);
  v1::QueryResultsResponse rows;
  ASSERT_TRUE(sweep_stub_->QueryResults(&qctx, query, &rows).ok());
  ASSERT_EQ(rows.rows_size(), 2);
  const v1::ResultRow& row = rows.rows(0);
  EXPECT_EQ(row.state(), v1::CELL_STATE_DONE);
  EXPECT_EQ(row.head(), "kernel/elu1");
  EXPECT_EQ(row.worker_id(), worker);
  EXPECT_EQ(row.worker_version().build_id(), "0.1.0+test");
  EXPECT_EQ(row.worker_version().torch_version(), "2.1.0");
  EXPECT_EQ(row.attempt(), 1);
  EXPECT_EQ(row.lease_id(), task.cells(0).lease_id());
  EXPECT_DOUBLE_EQ(row.result().train().error(), 0.25);

  EXPECT_EQ(rows.next_page_token(), "");

  // Pages of one row: the token names the last cell; a made-up token is
  // INVALID_ARGUMENT naming page_token.
  query.set_page_size(1);
  grpc::ClientContext p1ctx;
  ASSERT_TRUE(sweep_stub_->QueryResults(&p1ctx, query, &rows).ok());
  ASSERT_EQ(rows.rows_size(), 1);
  EXPECT_EQ(rows.rows(0).cell_id(), task.cells(0).cell_id());
  EXPECT_EQ(rows.next_page_token(), "c" + std::to_string(task.cells(0).cell_id()));
  query.set_page_token(rows.next_page_token());
  grpc::ClientContext p2ctx;
  ASSERT_TRUE(sweep_stub_->QueryResults(&p2ctx, query, &rows).ok());
  ASSERT_EQ(rows.rows_size(), 1);
  EXPECT_EQ(rows.rows(0).cell_id(), task.cells(1).cell_id());
  EXPECT_EQ(rows.next_page_token(), "");
  query.set_page_token("page-2");
  grpc::ClientContext p3ctx;
  grpc::Status bad = sweep_stub_->QueryResults(&p3ctx, query, &rows);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message(),
            "page_token: \"page-2\" is not a next_page_token of QueryResults; leave it empty "
            "for the first page");
  query.clear_page_token();
  query.clear_page_size();

  grpc::ClientContext gctx;
  query.set_group_by(v1::GROUP_BY_HEAD_RANK);
  ASSERT_TRUE(sweep_stub_->QueryResults(&gctx, query, &rows).ok());
  ASSERT_EQ(rows.groups_size(), 4);
  EXPECT_EQ(rows.groups(0).n(), 2);
  EXPECT_EQ(rows.groups(0).expected(), 4);
  EXPECT_DOUBLE_EQ(rows.groups(0).train_error().mean(), 0.25);

  grpc::ClientContext wctx;
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(sweep_stub_->ListWorkers(&wctx, v1::ListWorkersRequest(), &workers).ok());
  ASSERT_EQ(workers.workers_size(), 1);
  EXPECT_EQ(workers.workers(0).completed_cells(), 2);
  EXPECT_EQ(workers.workers(0).leased_cells(), 1);
}

// Every query shape gives the same rows, and the same page tokens, as
// columns (read back with RowsFromColumns) as it does as rows.
// CompleteTasks with `next`: the results and the next lease in one call.
TEST_F(ServiceTest, CompleteTasksLeasesTheNextTasksItAsksFor) {
  std::string sweep = SubmitKernelCells("next", 3);
  std::string worker = Register();
  v1::AcquireTasksResponse acquired;
  ASSERT_TRUE(Acquire(worker, 0, &acquired, 1).ok());
  ASSERT_EQ(acquired.tasks_size(), 1);

  v1::CompleteTasksRequest req = ResultsFor(worker, acquired.tasks(0));
  req.mutable_next()->set_max_tasks(65);
  v1::CompleteTasksResponse done;
  grpc::Status bad = Complete(req, &done);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message(), "next.max_tasks: must be 1..64, got 65");

  req.mutable_next()->set_max_tasks(1);
  req.mutable_next()->set_max_seeds(2);
  ASSERT_TRUE(Complete(req, &done).ok());
  EXPECT_EQ(done.recorded(), 1);
  ASSERT_EQ(done.next_tasks_size(), 1);
  const v1::Task& next = done.next_tasks(0);
  EXPECT_EQ(next.sweep_id(), sweep);
  ASSERT_EQ(next.cells_size(), 2);
  EXPECT_EQ(next.cells(0).seed(), 1u);
  EXPECT_EQ(next.cells(1).seed(), 2u);
  EXPECT_EQ(next.spec().seeds_size(), 2);
  EXPECT_EQ(next.deadline_unix_ms(), clock_.NowMs() + 10'000);

  // The last results: no work left, so next_tasks is empty and the call
  // does not wait for any.
  v1::CompleteTasksRequest last = ResultsFor(worker, next);
  last.mutable_next()->set_max_tasks(1);
  v1::CompleteTasksResponse last_done;
  ASSERT_TRUE(Complete(last, &last_done).ok());
  EXPECT_EQ(last_done.recorded(), 2);
  EXPECT_EQ(last_done.next_tasks_size(), 0);
  grpc::ClientContext ctx;
  v1::GetSweepRequest get;
  get.set_sweep_id(sweep);
  v1::GetSweepResponse got;
  ASSERT_TRUE(sweep_stub_->GetSweep(&ctx, get, &got).ok());
  EXPECT_EQ(got.sweep().state(), v1::SWEEP_STATE_DONE);
}

TEST_F(ServiceTest, RowsAsColumnsAreTheSameRows) {
  const std::string sweep = Submit(Spec("columns", {1, 2, 4}, 4));  // 16 cells
  const std::string a = Register();
  std::string b;
  {
    grpc::ClientContext ctx;
    v1::RegisterWorkerRequest req;
    req.set_hostname("gpu-host");
    req.set_device("cuda");
    req.set_slots(1);
    req.mutable_version()->set_build_id("0.2.0+test");
    req.mutable_version()->set_torch_version("2.11.0");
    req.mutable_version()->set_cuda_version("13.0");
    v1::RegisterWorkerResponse resp;
    ASSERT_TRUE(worker_stub_->RegisterWorker(&ctx, req, &resp).ok());
    b = resp.worker_id();
  }
  // One cell fails for good: three leases, each failed.
  for (int attempt = 0; attempt < 3; ++attempt) {
    v1::AcquireTasksResponse got;
    ASSERT_TRUE(Acquire(a, 0, &got, 1).ok());
    ASSERT_EQ(got.tasks_size(), 1);
    grpc::ClientContext ctx;
    v1::FailTaskRequest req;
    req.set_worker_id(a);
    req.add_lease_ids(got.tasks(0).cells(0).lease_id());
    req.set_reason("diverged");
    v1::FailTaskResponse resp;
    ASSERT_TRUE(worker_stub_->FailTask(&ctx, req, &resp).ok());
  }
  // Ten cells done, alternating workers, with every result field set; five
  // stay pending.
  for (int i = 0; i < 10; ++i) {
    const std::string& worker = i % 2 == 0 ? a : b;
    v1::AcquireTasksResponse got;
    ASSERT_TRUE(Acquire(worker, 0, &got, 1).ok());
    ASSERT_EQ(got.tasks_size(), 1);
    v1::CompleteTasksRequest req = ResultsFor(worker, got.tasks(0));
    v1::SeedResult* r = req.mutable_results(0)->mutable_result();
    r->mutable_train()->set_position_accuracy(0.5 + i / 32.0);
    r->mutable_train()->set_exact_accuracy(i / 16.0);
    r->mutable_train()->set_error(1 - i / 16.0);
    r->mutable_train()->set_max_abs_error(1.0 / (i + 1));
    r->mutable_test()->set_sequences(i % 3 == 0 ? 0 : 20);
    r->mutable_test()->set_error(i % 3 == 0 ? 1.0 : i / 20.0);
    r->mutable_test()->set_exact_accuracy(i % 3 == 0 ? 0.0 : 1 - i / 20.0);
    r->mutable_test()->set_position_accuracy(i % 3 == 0 ? 0.0 : 1 - i / 40.0);
    r->set_final_loss(1e-3 * i);
    r->set_steps(100 * i);
    r->set_device(i % 2 == 0 ? "cpu" : "cuda:0 (NVIDIA H200)");
    r->mutable_facts()->set_train_sequences(64);
    r->mutable_facts()->set_distinct_queries(i < 5 ? 8 : 9);
    v1::CompleteTasksResponse done;
    ASSERT_TRUE(Complete(req, &done).ok());
    ASSERT_EQ(done.recorded(), 1);
  }

  auto query = [&](v1::QueryResultsRequest req, bool columns) {
    req.set_sweep_id(sweep);
    req.set_columns(columns);
    grpc::ClientContext ctx;
    v1::QueryResultsResponse resp;
    grpc::Status s = sweep_stub_->QueryResults(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.has_columns(), columns);
    EXPECT_TRUE(RowsFromColumns(&resp).ok());
    return resp;
  };
  auto same = [&](const v1::QueryResultsRequest& req, int want_rows) {
    const v1::QueryResultsResponse rows = query(req, false);
    const v1::QueryResultsResponse columns = query(req, true);
    EXPECT_EQ(rows.rows_size(), want_rows) << req.ShortDebugString();
    std::string diff;
    google::protobuf::util::MessageDifferencer d;
    d.ReportDifferencesToString(&diff);
    EXPECT_TRUE(d.Compare(columns, rows)) << req.ShortDebugString() << "\n" << diff;
    return rows;
  };

  v1::QueryResultsRequest all;
  const v1::QueryResultsResponse every = same(all, 11);
  int failed = 0;
  for (const v1::ResultRow& row : every.rows()) failed += row.state() == v1::CELL_STATE_FAILED;
  EXPECT_EQ(failed, 1);
  v1::QueryResultsRequest softmax;
  softmax.set_head("softmax");
  same(softmax, 0);
  v1::QueryResultsRequest filtered;
  filtered.add_ranks(2);
  filtered.add_seeds(1);
  filtered.add_seeds(3);
  same(filtered, 2);
  v1::QueryResultsRequest pending;
  pending.set_state(v1::CELL_STATE_PENDING);
  same(pending, 5);
  {
    // Pending cells have no result: every metric list is left empty.
    pending.set_sweep_id(sweep);
    pending.set_columns(true);
    grpc::ClientContext ctx;
    v1::QueryResultsResponse raw;
    ASSERT_TRUE(sweep_stub_->QueryResults(&ctx, pending, &raw).ok());
    EXPECT_EQ(raw.columns().cell_id_size(), 5);
    EXPECT_EQ(raw.columns().train_error_size(), 0);
    EXPECT_EQ(raw.columns().test_error_size(), 0);
    EXPECT_EQ(raw.columns().steps_size(), 0);
    EXPECT_EQ(raw.columns().worker_size(), 5);
  }
  v1::QueryResultsRequest page;
  page.set_page_size(4);
  int pages = 0, rows = 0;
  while (true) {
    const v1::QueryResultsResponse got = same(page, page.page_token().empty() || pages < 2 ? 4 : 3);
    ++pages;
    rows += got.rows_size();
    if (got.next_page_token().empty()) break;
    page.set_page_token(got.next_page_token());
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(rows, 11);
  // Grouped queries have no rows to send as columns.
  v1::QueryResultsRequest grouped;
  grouped.set_group_by(v1::GROUP_BY_HEAD_RANK);
  grouped.set_columns(true);
  grouped.set_sweep_id(sweep);
  grpc::ClientContext gctx;
  v1::QueryResultsResponse groups;
  ASSERT_TRUE(sweep_stub_->QueryResults(&gctx, grouped, &groups).ok());
  EXPECT_FALSE(groups.has_columns());
  EXPECT_EQ(groups.groups_size(), 4);
}

// An optional metric (first_exact_step) goes through validation, the store
// and both reply forms as sent: set where the worker set it, missing where
// it did not; one out of range fails the call, naming the field.
TEST_F(ServiceTest, AnOptionalMetricIsStoredAndQueriedAsSentOrMissing) {
  v1::SweepSpec spec = Spec("metric", {1}, 3);
  spec.mutable_heads()->RemoveLast();
  spec.mutable_train()->set_max_steps(500);
  const std::string sweep = Submit(spec);
  const std::string worker = Register();
  v1::AcquireTasksResponse got;
  ASSERT_TRUE(Acquire(worker, 0, &got).ok());
  ASSERT_EQ(got.tasks_size(), 1);
  ASSERT_EQ(got.tasks(0).cells_size(), 3);
  v1::CompleteTasksRequest req = ResultsFor(worker, got.tasks(0));
  req.mutable_results(0)->mutable_result()->set_first_exact_step(501);
  v1::CompleteTasksResponse done;
  grpc::Status refused = Complete(req, &done);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              ::testing::HasSubstr("result.first_exact_step must be in 0..500 or missing, got 501"));
  req.mutable_results(0)->mutable_result()->set_first_exact_step(40);
  req.mutable_results(2)->mutable_result()->set_first_exact_step(0);
  ASSERT_TRUE(Complete(req, &done).ok());
  EXPECT_EQ(done.recorded(), 3);
  for (const bool columns : {false, true}) {
    v1::QueryResultsRequest query;
    query.set_sweep_id(sweep);
    query.set_columns(columns);
    grpc::ClientContext ctx;
    v1::QueryResultsResponse resp;
    ASSERT_TRUE(sweep_stub_->QueryResults(&ctx, query, &resp).ok());
    ASSERT_TRUE(RowsFromColumns(&resp).ok());
    ASSERT_EQ(resp.rows_size(), 3) << columns;
    std::map<uint64_t, const v1::SeedResult*> by_seed;
    for (const v1::ResultRow& row : resp.rows()) by_seed[row.seed()] = &row.result();
    const uint64_t seed0 = got.tasks(0).cells(0).seed();
    const uint64_t seed1 = got.tasks(0).cells(1).seed();
    const uint64_t seed2 = got.tasks(0).cells(2).seed();
    ASSERT_TRUE(by_seed[seed0]->has_first_exact_step()) << columns;
    EXPECT_EQ(by_seed[seed0]->first_exact_step(), 40) << columns;
    EXPECT_FALSE(by_seed[seed1]->has_first_exact_step()) << columns;
    ASSERT_TRUE(by_seed[seed2]->has_first_exact_step()) << columns;
    EXPECT_EQ(by_seed[seed2]->first_exact_step(), 0) << columns;
  }
}

// An lr axis over the wire: each leased task trains its recipe's lr, and
// rows (as messages and as columns) and groups carry the recipe.
TEST_F(ServiceTest, RecipesReachTheWorkerAndComeBackOnRowsColumnsAndGroups) {
  v1::SweepSpec spec = Spec("axes", {2}, 2);
  spec.mutable_heads()->RemoveLast();
  v1::SweepAxis* lr = spec.add_axes();
  lr->set_name("lr");
  lr->add_values(0.05);
  lr->add_values(0.002);
  int64_t cells = 0;
  const std::string sweep = Submit(spec, &cells);
  EXPECT_EQ(cells, 4);
  const std::string w = Register();
  std::map<double, int> cells_per_lr;
  for (int i = 0; i < 2; ++i) {
    v1::AcquireTasksResponse got;
    ASSERT_TRUE(Acquire(w, 0, &got).ok());
    ASSERT_EQ(got.tasks_size(), 1);
    cells_per_lr[got.tasks(0).spec().train().lr()] += got.tasks(0).cells_size();
    v1::CompleteTasksResponse done;
    ASSERT_TRUE(Complete(ResultsFor(w, got.tasks(0)), &done).ok());
  }
  EXPECT_THAT(cells_per_lr, ::testing::ElementsAre(std::pair(0.002, 2), std::pair(0.05, 2)));
  for (bool columns : {false, true}) {
    grpc::ClientContext ctx;
    v1::QueryResultsRequest req;
    req.set_sweep_id(sweep);
    req.set_columns(columns);
    v1::QueryResultsResponse resp;
    ASSERT_TRUE(sweep_stub_->QueryResults(&ctx, req, &resp).ok());
    if (columns) {
      EXPECT_THAT(resp.columns().recipe(), ::testing::ElementsAre(0, 0, 1, 1));
      ASSERT_TRUE(RowsFromColumns(&resp).ok());
    }
    ASSERT_EQ(resp.rows_size(), 4);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(resp.rows(i).recipe(), i / 2) << columns;
  }
  grpc::ClientContext ctx;
  v1::QueryResultsRequest req;
  req.set_sweep_id(sweep);
  req.set_group_by(v1::GROUP_BY_HEAD_RANK);
  v1::QueryResultsResponse resp;
  ASSERT_TRUE(sweep_stub_->QueryResults(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.groups_size(), 2);
  EXPECT_EQ(resp.groups(0).recipe(), 0);
  EXPECT_EQ(resp.groups(1).recipe(), 1);
  EXPECT_EQ(resp.groups(1).n(), 2);
  v1::GetSweepResponse info;
  grpc::ClientContext get_ctx;
  v1::GetSweepRequest get;
  get.set_sweep_id(sweep);
  ASSERT_TRUE(sweep_stub_->GetSweep(&get_ctx, get, &info).ok());
  ASSERT_EQ(info.sweep().spec().axes_size(), 1);
  EXPECT_THAT(info.sweep().spec().axes(0).values(), ::testing::ElementsAre(0.05, 0.002));
}

TEST_F(ServiceTest, CancelReachesTheWorkerThroughHeartbeat) {
  std::string sweep = Submit(Spec("grid"));
  std::string worker = Register();
  v1::AcquireTasksResponse acquired;
  ASSERT_TRUE(Acquire(worker, 0, &acquired, 4).ok());
  grpc::ClientContext cctx;
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(sweep);
  v1::CancelSweepResponse cancelled;
  ASSERT_TRUE(sweep_stub_->CancelSweep(&cctx, cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.cells_cancelled(), 16);

  grpc::ClientContext hctx;
  v1::HeartbeatRequest hb;
  hb.set_worker_id(worker);
  for (const auto& c : acquired.tasks(0).cells()) hb.add_lease_ids(c.lease_id());
  v1::HeartbeatResponse hb_resp;
  ASSERT_TRUE(worker_stub_->Heartbeat(&hctx, hb, &hb_resp).ok());
  EXPECT_EQ(hb_resp.cancelled_lease_ids_size(), 4);
  EXPECT_EQ(hb_resp.lost_lease_ids_size(), 0);

  v1::AcquireTasksResponse none;
  ASSERT_TRUE(Acquire(worker, 0, &none).ok());
  EXPECT_EQ(none.tasks_size(), 0);

  grpc::ClientContext cctx2;
  EXPECT_EQ(sweep_stub_->CancelSweep(&cctx2, cancel, &cancelled).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ServiceTest, LongPollReturnsEmptyWhenTheWaitElapses) {
  std::string worker = Register();
  v1::AcquireTasksResponse resp;
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(Acquire(worker, 300, &resp).ok());
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(resp.tasks_size(), 0);
  EXPECT_GE(elapsed, 300ms);
  EXPECT_LT(elapsed, 5s);
  EXPECT_EQ(workers_->waiting(), 0u);
}

TEST_F(ServiceTest, LongPollWakesWhenASweepIsSubmitted) {
  std::string worker = Register();
  auto pending = std::async(std::launch::async, [&] {
    v1::AcquireTasksResponse resp;
    grpc::Status s = Acquire(worker, 20'000, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  });
  // Wait until the call is parked (it holds no thread on the server).
  for (int i = 0; i < 500 && workers_->waiting() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(workers_->waiting(), 1u);
  auto start = std::chrono::steady_clock::now();
  std::string sweep = Submit(Spec("wake"));
  ASSERT_EQ(pending.wait_for(5s), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  v1::AcquireTasksResponse resp = pending.get();
  ASSERT_EQ(resp.tasks_size(), 1);
  EXPECT_EQ(resp.tasks(0).sweep_id(), sweep);
  EXPECT_EQ(workers_->waiting(), 0u);
}

TEST_F(ServiceTest, LongPollWakesWhenALeaseExpires) {
  std::string worker = Register();
  Submit(Spec("expire", {1}, 1));  // 2 cells: kernel r=1 and softmax
  v1::AcquireTasksResponse first, second;
  ASSERT_TRUE(Acquire(worker, 0, &first).ok());
  ASSERT_TRUE(Acquire(worker, 0, &second).ok());
  ASSERT_EQ(first.tasks_size(), 1);
  ASSERT_EQ(second.tasks_size(), 1);
  auto pending = std::async(std::launch::async, [&] {
    v1::AcquireTasksResponse resp;
    EXPECT_TRUE(Acquire(worker, 20'000, &resp).ok());
    return resp;
  });
  for (int i = 0; i < 500 && workers_->waiting() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(workers_->waiting(), 1u);
  clock_.AdvanceMs(10'000);
  ASSERT_EQ(*coordinator_->ExpireLeases(), 2);
  ASSERT_EQ(pending.wait_for(5s), std::future_status::ready);
  v1::AcquireTasksResponse resp = pending.get();
  ASSERT_EQ(resp.tasks_size(), 1);
  EXPECT_EQ(resp.tasks(0).cells(0).attempt(), 2);
}

TEST_F(ServiceTest, ShutdownFinishesParkedLongPolls) {
  std::string worker = Register();
  auto pending = std::async(std::launch::async, [&] {
    v1::AcquireTasksResponse resp;
    return Acquire(worker, 20'000, &resp);
  });
  for (int i = 0; i < 500 && workers_->waiting() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(workers_->waiting(), 1u);
  workers_->Shutdown();
  ASSERT_EQ(pending.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(pending.get().ok());
  v1::AcquireTasksResponse resp;
  EXPECT_EQ(Acquire(worker, 1000, &resp).error_code(), grpc::StatusCode::UNAVAILABLE);
  // Results that arrive after Shutdown are refused, not recorded.
  v1::CompleteTasksRequest results;
  results.set_worker_id(worker);
  v1::CompleteTasksResponse done;
  grpc::Status refused = Complete(results, &done);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(refused.error_message(), "server shutting down");
}

TEST_F(ServiceTest, WatchStreamsChangesAndClosesOkWhenTheSweepEnds) {
  std::string sweep = SubmitKernelCells("watch", 1);
  std::string worker = Register();

  grpc::ClientContext ctx;
  v1::SweepEvent event;
  auto reader = Watch(&ctx, sweep, &event);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(event.sweep().sweep_id(), sweep);
  EXPECT_EQ(event.sweep().state(), v1::SWEEP_STATE_RUNNING);

  v1::AcquireTasksResponse acquired;
  ASSERT_TRUE(Acquire(worker, 0, &acquired).ok());
  v1::CompleteTasksResponse done;
  ASSERT_TRUE(Complete(ResultsFor(worker, acquired.tasks(0)), &done).ok());

  std::vector<v1::SweepEvent> events;
  while (reader->Read(&event)) events.push_back(event);
  grpc::Status s = reader->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  ASSERT_GE(events.size(), 2u);  // leased, cell done (and the sweep's end)
  EXPECT_EQ(events.back().sweep().state(), v1::SWEEP_STATE_DONE);
  EXPECT_EQ(events.back().sweep().counts().done(), 1);
  EXPECT_THAT(events.back().message(), HasSubstr("done"));

  // Watching an ended sweep sends one event and closes OK.
  v1::WatchSweepRequest req;
  req.set_sweep_id(sweep);
  grpc::ClientContext ctx2;
  auto again = sweep_stub_->WatchSweep(&ctx2, req);
  int n = 0;
  while (again->Read(&event)) ++n;
  EXPECT_TRUE(again->Finish().ok());
  EXPECT_EQ(n, 1);
  EXPECT_EQ(event.sweep().state(), v1::SWEEP_STATE_DONE);

  // An unknown sweep: NOT_FOUND.
  grpc::ClientContext ctx3;
  req.set_sweep_id("sw-00000000");
  auto unknown = sweep_stub_->WatchSweep(&ctx3, req);
  while (unknown->Read(&event)) {
  }
  EXPECT_EQ(unknown->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// A watcher's events read the sweep's counts on the read connection. Those
// reads must never run on a worker's call: while a long read holds the
// connection (here: held on purpose), CompleteTasks still returns, and the
// watcher gets every change once the connection is free, the last one with
// the final counts.
TEST_F(ServiceTest, AWatcherNeverHoldsUpAWorkersCall) {
  std::string sweep = SubmitKernelCells("watched", 4);
  std::string worker = Register();
  grpc::ClientContext ctx;
  v1::SweepEvent event;
  auto reader = Watch(&ctx, sweep, &event);  // "watching": the first snapshot
  ASSERT_NE(reader, nullptr);
  v1::AcquireTasksResponse acquired;
  ASSERT_TRUE(Acquire(worker, 0, &acquired).ok());
  ASSERT_EQ(acquired.tasks_size(), 1);
  ASSERT_EQ(acquired.tasks(0).cells_size(), 4);

  std::promise<void> holding, release;
  std::shared_future<void> released = release.get_future().share();
  std::thread long_read([&] {
    absl::Status s = store_->Read([&](Connection&) {
      holding.set_value();
      released.wait();
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
  });
  holding.get_future().wait();
  std::future<grpc::Status> completed = std::async(std::launch::async, [&] {
    v1::CompleteTasksResponse done;
    return Complete(ResultsFor(worker, acquired.tasks(0)), &done);
  });
  // Generous: the call needs no read, so it returns long before this.
  const bool returned = completed.wait_for(20s) == std::future_status::ready;
  release.set_value();
  long_read.join();
  ASSERT_TRUE(returned) << "CompleteTasks waited for the read connection";
  EXPECT_TRUE(completed.get().ok());

  std::vector<v1::SweepEvent> events;
  while (reader->Read(&event)) events.push_back(event);
  EXPECT_TRUE(reader->Finish().ok());
  // Leased, four cells done, the sweep's end: every change, in order.
  ASSERT_EQ(events.size(), 6u);
  EXPECT_THAT(events[0].message(), HasSubstr("4 cells leased"));
  for (int i = 1; i <= 4; ++i) EXPECT_THAT(events[i].message(), HasSubstr(" done"));
  EXPECT_EQ(events.back().sweep().state(), v1::SWEEP_STATE_DONE);
  EXPECT_EQ(events.back().sweep().counts().done(), 4);
}

TEST_F(ServiceTest, ShutdownEndsOpenWatches) {
  std::string sweep = Submit(Spec("open"));
  grpc::ClientContext ctx;
  v1::WatchSweepRequest req;
  req.set_sweep_id(sweep);
  auto reader = sweep_stub_->WatchSweep(&ctx, req);
  v1::SweepEvent event;
  ASSERT_TRUE(reader->Read(&event));
  sweeps_->Shutdown();
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

// The metrics interceptor counts from the calls themselves, the refused
// ones included: a stale lease's results as rejected, a heartbeat naming an
// unknown lease as one lost lease, and results sent again after a lost reply
// as acknowledged but not accepted twice.
TEST_F(ServiceTest, MetricsCountLeasesResultsAndCallsIncludingTheRefusedOnes) {
  SubmitKernelCells("metrics", 3);  // one task of 3 cells
  const std::string worker = Register();
  v1::AcquireTasksResponse acquired;
  ASSERT_TRUE(Acquire(worker, 0, &acquired).ok());
  ASSERT_EQ(acquired.tasks_size(), 1);
  const v1::Task& task = acquired.tasks(0);
  ASSERT_EQ(task.cells_size(), 3);
  EXPECT_EQ(metrics_.Value("ranksweep_leases_granted_total", {}), 3);

  v1::HeartbeatRequest beat;
  beat.set_worker_id(worker);
  beat.add_lease_ids(task.cells(0).lease_id());
  beat.add_lease_ids(987654321);
  v1::HeartbeatResponse beaten;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(worker_stub_->Heartbeat(&ctx, beat, &beaten).ok());
  }
  EXPECT_EQ(beaten.lost_lease_ids_size(), 1);
  EXPECT_EQ(metrics_.Value("ranksweep_leases_lost_total", {}), 1);

  const v1::CompleteTasksRequest results = ResultsFor(worker, task);
  v1::CompleteTasksRequest stale = results;
  for (v1::CellResult& r : *stale.mutable_results()) r.set_lease_id(r.lease_id() + 1000);
  v1::CompleteTasksResponse done;
  EXPECT_EQ(Complete(stale, &done).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(metrics_.Value("ranksweep_results_rejected_total", {{"reason", "FAILED_PRECONDITION"}}),
            3);
  EXPECT_EQ(metrics_.Value("ranksweep_results_accepted_total", {}), 0);
  ASSERT_TRUE(Complete(results, &done).ok());
  EXPECT_EQ(done.recorded(), 3);
  ASSERT_TRUE(Complete(results, &done).ok());  // the reply was lost: sent again
  EXPECT_EQ(done.duplicates(), 3);
  EXPECT_EQ(metrics_.Value("ranksweep_results_accepted_total", {}), 3);

  const std::string complete = "/ranksweep.v1.WorkerService/CompleteTasks";
  EXPECT_EQ(metrics_.Value("ranksweep_rpcs_total", {{"method", complete}, {"code", "OK"}}), 2);
  EXPECT_EQ(metrics_.Value("ranksweep_rpcs_total",
                           {{"method", complete}, {"code", "FAILED_PRECONDITION"}}),
            1);
  EXPECT_EQ(metrics_.Value("ranksweep_rpcs_total",
                           {{"method", "/ranksweep.v1.SweepService/SubmitSweep"}, {"code", "OK"}}),
            1);
  EXPECT_EQ(metrics_.Value("ranksweep_leases_granted_total", {}), 3);
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(static_cast<grpc::StatusCode>(99)), "UNKNOWN");
}

}  // namespace
}  // namespace ranksweep::server
