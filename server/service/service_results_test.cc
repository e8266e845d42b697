// Results read back over gRPC, from a real server on 127.0.0.1:0 over a
// coordinator on a temporary SQLite file: rows as columns, an optional
// metric as sent or missing, recipes on rows, columns and groups.
#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/spec/result_metrics.h"
#include "common/status_macros.h"
#include "server/service/service_test_fixture.h"

namespace ranksweep::server {
namespace {

// Every query shape gives the same rows, and the same page tokens, as
// columns (read back with RowsFromColumns) as it does as rows.
TEST_F(ServiceTest, RowsAsColumnsAreTheSameRows) {
  // A pool dataset, so that results may have a test split.
  v1::SweepSpec spec = Spec("columns", {1, 2, 4}, 4);  // 16 cells
  spec.mutable_dataset()->set_kind(v1::DATASET_KIND_POOL);
  spec.mutable_dataset()->set_m(8);
  spec.mutable_dataset()->set_pool_size(64);
  spec.mutable_dataset()->set_train_size(64);
  spec.mutable_dataset()->set_test_size(20);
  const std::string sweep = Submit(spec);
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
    sessions_[b] = resp.session();
  }
  // One cell fails for good: three leases, each failed.
  for (int attempt = 0; attempt < 3; ++attempt) {
    v1::AcquireTasksResponse got;
    ASSERT_TRUE(Acquire(a, 0, &got, 1).ok());
    ASSERT_EQ(got.tasks_size(), 1);
    grpc::ClientContext ctx;
    v1::FailTaskRequest req;
    req.set_worker_id(a);
    req.set_session(Session(a));
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
    // Every result has the dataset's test split (20); a row without one
    // is an exhaustive dataset's (proto/columns_test.cc).
    r->mutable_test()->set_sequences(20);
    r->mutable_test()->set_error(i / 20.0);
    r->mutable_test()->set_exact_accuracy(1 - i / 20.0);
    r->mutable_test()->set_position_accuracy(1 - i / 40.0);
    r->set_final_loss(1e-3 * (i + 1));  // never 0: no seed here is exact
    r->set_steps(100 * i);
    r->set_device(i % 2 == 0 ? "cpu" : "cuda:0 (NVIDIA H200)");
    r->mutable_facts()->set_train_sequences(64);
    r->mutable_facts()->set_test_sequences(20);
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

// The built-ins every group aggregates are the table's rows with a group
// prefix (kGroupedBuiltIns), and each reaches the wire in v1::ResultGroup's
// Aggregate field of its name; that message has no other Aggregate field.
TEST(TranslateTest, EachGroupedBuiltInTravelsInTheAggregateFieldOfItsName) {
  ResultGroup g;
  g.n = 3;
  for (size_t k = 0; k < g.built_ins.size(); ++k) {
    g.built_ins[k] = Aggregate{0.1 * static_cast<double>(k + 1), 0.5, 0.0, 1.0, 0.25};
  }
  const v1::ResultGroup p = ToProto(g);
  EXPECT_DOUBLE_EQ(p.train_position_accuracy().mean(), 0.1);
  EXPECT_DOUBLE_EQ(p.train_exact_accuracy().mean(), 0.2);
  EXPECT_DOUBLE_EQ(p.train_error().mean(), 0.3);
  EXPECT_DOUBLE_EQ(p.test_error().mean(), 0.4);
  EXPECT_DOUBLE_EQ(p.test_error().ci95(), 0.25);
  std::vector<std::string> aggregate_fields, grouped;
  const google::protobuf::Descriptor* d = v1::ResultGroup::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    if (!d->field(i)->is_repeated() && d->field(i)->message_type() == v1::Aggregate::descriptor()) {
      aggregate_fields.push_back(d->field(i)->name());
    }
  }
  for (int b : kGroupedBuiltIns) grouped.push_back(kBuiltInMetrics[b].name);
  std::sort(aggregate_fields.begin(), aggregate_fields.end());
  std::sort(grouped.begin(), grouped.end());
  EXPECT_EQ(aggregate_fields, grouped);
  EXPECT_EQ(grouped, (std::vector<std::string>{"test_error", "train_error",
                                               "train_exact_accuracy",
                                               "train_position_accuracy"}));
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

// The reply cache (server/service/query_cache.h) serves the same row query
// again only while the sweep's results stand: a result stored or taken back
// by any call makes the next query read afresh. Groups are never kept.
TEST_F(ServiceTest, AKeptReplyIsServedOnlyWhileTheSweepsResultsStand) {
  const std::string sweep = SubmitKernelCells("cached", 4);
  const std::string worker = Register();
  auto complete_two = [&] {
    v1::AcquireTasksResponse got;
    ASSERT_TRUE(Acquire(worker, 0, &got, 2).ok());
    ASSERT_EQ(got.tasks_size(), 1);
    ASSERT_EQ(got.tasks(0).cells_size(), 2);
    v1::CompleteTasksResponse done;
    ASSERT_TRUE(Complete(ResultsFor(worker, got.tasks(0)), &done).ok());
    ASSERT_EQ(done.recorded(), 2);
  };
  // The rows of a query, and the reply as sent.
  auto query = [&](bool columns, v1::GroupBy group_by, std::string* bytes = nullptr) {
    v1::QueryResultsRequest req;
    req.set_sweep_id(sweep);
    req.set_columns(columns);
    req.set_group_by(group_by);
    grpc::ClientContext ctx;
    v1::QueryResultsResponse resp;
    grpc::Status s = sweep_stub_->QueryResults(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (bytes != nullptr) *bytes = resp.SerializeAsString();
    EXPECT_TRUE(RowsFromColumns(&resp).ok());
    return group_by == v1::GROUP_BY_HEAD_RANK ? resp.groups(0).n() : resp.rows_size();
  };
  auto hits = [&] { return metrics_.Value("ranksweep_query_cache_hits_total", {}); };
  auto misses = [&] { return metrics_.Value("ranksweep_query_cache_misses_total", {}); };

  ASSERT_NO_FATAL_FAILURE(complete_two());
  std::string first, again;
  EXPECT_EQ(query(true, v1::GROUP_BY_UNSPECIFIED, &first), 2);
  EXPECT_EQ(hits(), 0);
  EXPECT_EQ(misses(), 1);
  EXPECT_GT(metrics_.Value("ranksweep_query_cache_bytes", {}), 0);
  EXPECT_EQ(query(true, v1::GROUP_BY_UNSPECIFIED, &again), 2);
  EXPECT_EQ(hits(), 1);
  EXPECT_EQ(again, first);
  // Another shape is another reply.
  EXPECT_EQ(query(false, v1::GROUP_BY_UNSPECIFIED), 2);
  EXPECT_EQ(misses(), 2);
  // Groups are read every time, and counted in neither.
  EXPECT_EQ(query(false, v1::GROUP_BY_HEAD_RANK), 2);
  EXPECT_EQ(query(false, v1::GROUP_BY_HEAD_RANK), 2);
  EXPECT_EQ(hits() + misses(), 3);

  // Two more results: both shapes read them.
  ASSERT_NO_FATAL_FAILURE(complete_two());
  EXPECT_EQ(query(true, v1::GROUP_BY_UNSPECIFIED), 4);
  EXPECT_EQ(query(false, v1::GROUP_BY_UNSPECIFIED), 4);
  EXPECT_EQ(misses(), 4);
  EXPECT_EQ(query(true, v1::GROUP_BY_UNSPECIFIED), 4);
  EXPECT_EQ(hits(), 2);

  // A quarantine takes the worker's results back: no row is left.
  grpc::ClientContext ctx;
  v1::QuarantineWorkerRequest quarantine;
  quarantine.set_worker_id(worker);
  v1::QuarantineWorkerResponse quarantined;
  ASSERT_TRUE(sweep_stub_->QuarantineWorker(&ctx, quarantine, &quarantined).ok());
  EXPECT_EQ(quarantined.results_invalidated(), 4);
  EXPECT_EQ(query(true, v1::GROUP_BY_UNSPECIFIED), 0);
  EXPECT_EQ(query(false, v1::GROUP_BY_UNSPECIFIED), 0);
  EXPECT_EQ(hits(), 2);
  EXPECT_EQ(misses(), 6);
}


// Column blocks (server/service/column_blocks.h), on: an ended sweep is
// sealed into blocks of 256 rows, and a query of every row joins them. No
// reply is kept: every query is read.
class ColumnBlockTest : public ServiceTest {
 protected:
  ColumnBlockTest() {
    query_cache_bytes_ = 0;
    column_block_rows_ = 256;
  }

  int64_t Count(const std::string& sql) {
    int64_t n = -1;
    EXPECT_TRUE(store_
                    ->Read([&](Connection& c) -> absl::Status {
                      ASSIGN_OR_RETURN(Statement q, c.Prepare(sql));
                      ASSIGN_OR_RETURN(bool row, q.Step());
                      n = row ? q.ColumnInt(0) : -1;
                      return absl::OkStatus();
                    })
                    .ok());
    return n;
  }
  // Waits (10 s at most) until the sweep has `n` blocks: they are sealed
  // on the sealer's thread after the sweep ends.
  bool BlocksBecome(const std::string& sweep, int64_t n) {
    const std::string sql =
        "SELECT COUNT(*) FROM result_blocks WHERE sweep_id = '" + sweep + "'";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (Count(sql) != n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  // Leases up to `seeds` cells to `worker` and completes them.
  void CompleteCells(const std::string& worker, int seeds) {
    v1::AcquireTasksResponse got;
    ASSERT_TRUE(Acquire(worker, 0, &got, seeds).ok());
    ASSERT_EQ(got.tasks_size(), 1);
    ASSERT_EQ(got.tasks(0).cells_size(), seeds);
    v1::CompleteTasksRequest req = ResultsFor(worker, got.tasks(0));
    for (int i = 0; i < req.results_size(); ++i) {
      // Values that differ from row to row.
      req.mutable_results(i)->mutable_result()->set_final_loss(1e-3 * (i + 1));
      req.mutable_results(i)->mutable_result()->set_wall_seconds(0.5 * (i % 7));
    }
    v1::CompleteTasksResponse done;
    const grpc::Status s = Complete(req, &done);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(done.recorded(), seeds);
  }
  // The sweep's columns in one reply (joined from its blocks where it has
  // them), serialized.
  std::string Columns(const std::string& sweep) {
    v1::QueryResultsRequest req;
    req.set_sweep_id(sweep);
    req.set_columns(true);
    grpc::ClientContext ctx;
    v1::QueryResultsResponse resp;
    grpc::Status s = sweep_stub_->QueryResults(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.next_page_token(), "");
    EXPECT_TRUE(CheckColumns(resp.columns()).ok());
    return resp.columns().SerializeAsString();
  }
  // The sweep's rows (each serialized) as columns in pages of `page_size`:
  // 0 is one reply; 100, shorter than a block, reads every row as a row.
  std::vector<std::string> Rows(const std::string& sweep, int page_size) {
    std::vector<std::string> rows;
    v1::QueryResultsRequest req;
    req.set_sweep_id(sweep);
    req.set_columns(true);
    req.set_page_size(page_size);
    for (int page = 0; page < 100; ++page) {
      grpc::ClientContext ctx;
      v1::QueryResultsResponse resp;
      grpc::Status s = sweep_stub_->QueryResults(&ctx, req, &resp);
      EXPECT_TRUE(s.ok()) << s.error_message();
      EXPECT_TRUE(RowsFromColumns(&resp).ok());
      for (const v1::ResultRow& row : resp.rows()) rows.push_back(row.SerializeAsString());
      if (resp.next_page_token().empty()) break;
      req.set_page_token(resp.next_page_token());
    }
    return rows;
  }
};

TEST_F(ColumnBlockTest, AnEndedSweepIsJoinedFromBlocksIntoTheSameColumns) {
  const std::string sweep = SubmitKernelCells("blocks", 600);
  const std::string a = Register();
  const std::string b = Register();
  ASSERT_NO_FATAL_FAILURE(CompleteCells(a, 256));
  ASSERT_NO_FATAL_FAILURE(CompleteCells(a, 256));
  // Running: nothing is sealed, and the query reads rows.
  EXPECT_EQ(Rows(sweep, 0), Rows(sweep, 100));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM result_blocks"), 0);
  ASSERT_NO_FATAL_FAILURE(CompleteCells(b, 88));
  // Ended: 256 + 256 + 88 rows.
  ASSERT_TRUE(BlocksBecome(sweep, 3));
  EXPECT_EQ(Count("SELECT SUM(rows) FROM result_blocks"), 600);
  EXPECT_EQ(Rows(sweep, 0), Rows(sweep, 100));
  EXPECT_EQ(Rows(sweep, 0).size(), 600u);
  // Pages of 600 rows or more hold the three blocks; of 512, the first two,
  // then the third.
  EXPECT_EQ(Rows(sweep, 1000), Rows(sweep, 100));
  EXPECT_EQ(Rows(sweep, 512), Rows(sweep, 100));
  v1::ResultColumns joined;
  ASSERT_TRUE(joined.ParseFromString(Columns(sweep)));
  EXPECT_EQ(joined.cell_id_size(), 600);
  EXPECT_EQ(joined.workers_size(), 2);

  // A quarantine of b takes its 88 rows back: their block goes with them,
  // the other two stay, and the query joins them with no row left over.
  grpc::ClientContext ctx;
  v1::QuarantineWorkerRequest quarantine;
  quarantine.set_worker_id(b);
  v1::QuarantineWorkerResponse quarantined;
  ASSERT_TRUE(sweep_stub_->QuarantineWorker(&ctx, quarantine, &quarantined).ok());
  EXPECT_EQ(quarantined.results_invalidated(), 88);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM result_blocks"), 2);
  EXPECT_EQ(Rows(sweep, 0), Rows(sweep, 100));
  ASSERT_TRUE(joined.ParseFromString(Columns(sweep)));
  EXPECT_EQ(joined.cell_id_size(), 512);

  // a trains them again: the sweep ends again, and the stretch is sealed.
  ASSERT_NO_FATAL_FAILURE(CompleteCells(a, 88));
  ASSERT_TRUE(BlocksBecome(sweep, 3));
  const std::string again = Columns(sweep);
  EXPECT_EQ(Rows(sweep, 0), Rows(sweep, 100));
  ASSERT_TRUE(joined.ParseFromString(again));
  EXPECT_EQ(joined.cell_id_size(), 600);
  EXPECT_EQ(joined.workers_size(), 1);

  // The query reads the blocks, not the rows: with the first block's bytes
  // in the second's place, rows 256-511 come back as rows 0-255 did.
  auto write = [&](const std::string& sql) {
    ASSERT_TRUE(store_->Write([&](Connection& c) { return c.Exec(sql); }).ok()) << sql;
  };
  write("UPDATE result_blocks SET columns = (SELECT columns FROM result_blocks WHERE "
        "first_cell_id = (SELECT MIN(first_cell_id) FROM result_blocks)) WHERE first_cell_id = "
        "(SELECT MIN(first_cell_id) FROM result_blocks WHERE first_cell_id > (SELECT "
        "MIN(first_cell_id) FROM result_blocks))");
  ASSERT_TRUE(joined.ParseFromString(Columns(sweep)));
  ASSERT_EQ(joined.cell_id_size(), 600);
  EXPECT_EQ(joined.cell_id(256), joined.cell_id(0));
  EXPECT_EQ(joined.cell_id(511), joined.cell_id(255));
  // A block that is not one is read as rows instead.
  write("UPDATE result_blocks SET columns = x'08'");
  EXPECT_EQ(Columns(sweep), again);
}

}  // namespace
}  // namespace ranksweep::server
