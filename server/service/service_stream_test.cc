// The gRPC adapters' waiting calls with a real server on 127.0.0.1:0:
// cancellation through heartbeats, long polls, watch streams, shutdown, and
// the metrics interceptor.
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "server/service/service_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

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
  hb.set_session(Session(worker));
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
  // Before any call, each served method has its OK sample at 0, and so
  // does every refusal reason.
  const std::string fresh = metrics_.Render();
  for (const std::string& method : ServedMethodNames()) {
    EXPECT_THAT(fresh, HasSubstr("\nranksweep_rpcs_total{code=\"OK\",method=\"" + method +
                                 "\"} 0\n"));
  }
  EXPECT_GT(ServedMethodNames().size(), 10u);  // the ranksweep.v1 services at least
  EXPECT_THAT(fresh, HasSubstr("\nranksweep_results_rejected_total{reason=\"FAILED_PRECONDITION\"} "
                               "0\n"));
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
  beat.set_session(Session(worker));
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
  // Every call timed under its method, the refused one included: three
  // CompleteTasks, each within the histogram's buckets.
  const std::string text = metrics_.Render();
  const std::string series = "{method=\"" + complete + "\"";
  EXPECT_THAT(text, HasSubstr("\nranksweep_rpc_duration_seconds_count" + series + "} 3\n"));
  EXPECT_THAT(text, HasSubstr("\nranksweep_rpc_duration_seconds_bucket" + series +
                              ",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("\nranksweep_rpc_duration_seconds_bucket" + series +
                              ",le=\"60\"} 3\n"));
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(static_cast<grpc::StatusCode>(99)), "UNKNOWN");
}

}  // namespace
}  // namespace ranksweep::server
