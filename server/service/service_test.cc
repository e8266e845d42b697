// The gRPC adapters with a real server on 127.0.0.1:0 and real client stubs,
// over a coordinator on a temporary SQLite file: submitting, leasing,
// completing, and the errors they answer. Reading results back is in
// service_results_test.cc, streams in service_stream_test.cc.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "server/service/service_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

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
  // test_pool_share 0 leaves no test vector: legal only without a test split.
  SweepSpec pool_no_test = pool;
  pool_no_test.dataset.test_size = 0;
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
      {"dataset.test_pool_share", &pool_no_test,
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

// "A reply exceeded the 1,024 bytes docs/LIMITS.md promises": the cut
// itself, with its "... (N bytes)", stays within them.
TEST(ToGrpcStatusTest, NoReplyMessageExceeds1024Bytes) {
  for (size_t n : {size_t{1024}, size_t{1025}, size_t{5000}, size_t{1} << 20}) {
    grpc::Status s = ToGrpcStatus(absl::InvalidArgumentError(std::string(n, 'x')));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_LE(s.error_message().size(), 1024u) << n;
    if (n > 1024) {
      EXPECT_NE(s.error_message().find("... (" + std::to_string(n) + " bytes)"),
                std::string::npos);
    } else {
      EXPECT_EQ(s.error_message(), std::string(n, 'x'));
    }
  }
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

// The metrics' method label comes from a fixed set: the methods served.
TEST(MethodLabelTest, ServedMethodsKeepTheirNameAndEveryOtherIsUnknown) {
  for (const char* served :
       {"/ranksweep.v1.SweepService/SubmitSweep", "/ranksweep.v1.SweepService/QuarantineWorker",
        "/ranksweep.v1.WorkerService/CompleteTasks", "/ranksweep.v1.WorkerService/FailTask",
        "/grpc.health.v1.Health/Check"}) {
    EXPECT_EQ(MethodLabel(served), served);
  }
  for (const std::string& other :
       {std::string(), std::string("/ranksweep.v1.WorkerService/Nope"),
        std::string("/ranksweep.v1.WorkerService/") + std::string(4096, 'x'),
        std::string("ranksweep.v1.SweepService/SubmitSweep")}) {
    EXPECT_EQ(MethodLabel(other), "unknown") << other.substr(0, 64);
  }
}

}  // namespace
}  // namespace ranksweep::server