// The fixture the managers' own tests share: the four managers of
// server/core (sweeps/, leases/, results/, workers/) wired over a store in
// memory (Store::OpenInMemory) and a manual clock, without the
// Coordinator facade, and helpers that run one manager call in a write
// transaction and count rows exactly. The spec and result makers are the
// coordinator tests' (coordinator_test_fixture.h). Tests only.
#ifndef RANKSWEEP_SERVER_CORE_MANAGER_TEST_FIXTURE_H_
#define RANKSWEEP_SERVER_CORE_MANAGER_TEST_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/core/coordinator_test_fixture.h"
#include "server/core/leases/lease_manager.h"
#include "server/core/results/result_recorder.h"
#include "server/core/sweeps/sweep_lifecycle.h"
#include "server/core/workers/worker_manager.h"

namespace ranksweep::server {

class ManagerTest : public ::testing::Test {
 protected:
  using Events = TransactionEvents;

  void SetUp() override {
    SetLogEnabled(false);
    // In memory, one database per test: the managers' logic, not the
    // file's durability (the coordinator's tests run over a real file).
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    auto store = Store::OpenInMemory(absl::StrCat("managers-", test->test_suite_name(), "-",
                                                  test->name()));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    Wire(LeaseOptions{kLeaseMs, /*max_attempts=*/2});
  }

  // The managers again over the same store, with `options` for leases.
  void Wire(LeaseOptions options, int64_t max_task_memory_bytes = 0) {
    workers_.reset();
    results_.reset();
    leases_.reset();
    sweeps_ = std::make_unique<SweepLifecycle>(store_.get(), &clock_, &specs_, CachePolicy(),
                                               max_task_memory_bytes);
    leases_ = std::make_unique<LeaseManager>(store_.get(), &clock_, &specs_, sweeps_.get(),
                                             options);
    results_ = std::make_unique<ResultRecorder>(sweeps_.get(), leases_.get());
    workers_ = std::make_unique<WorkerManager>(store_.get(), &clock_, leases_.get());
  }

  std::string Submit(const SweepSpec& spec) {
    Events events;
    auto out = sweeps_->Submit(spec, "local", events);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->sweep_id : std::string();
  }

  RegisteredWorker Register(const std::string& worker_id = "", const std::string& owner = "a") {
    WorkerRegistration reg;
    reg.worker_id = worker_id;
    reg.hostname = "host";
    reg.owner = owner;
    Events events;
    auto out = workers_->Register(reg, events);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.value_or(RegisteredWorker{});
  }

  // LeaseManager::AcquireIn in a transaction of its own.
  std::vector<Task> Lease(const std::string& worker_id, int max_tasks = 1, int max_seeds = 64) {
    TaskWant want{max_tasks, max_seeds, 0};
    EXPECT_TRUE(leases_->CheckWant(want, "").ok());
    std::vector<Task> tasks;
    Events events;
    absl::Status s = store_->Write([&](Connection& c) {
      return leases_->AcquireIn(c, worker_id, want, clock_.NowMs(), events, tasks);
    });
    EXPECT_TRUE(s.ok()) << s;
    return tasks;
  }

  // ResultRecorder::CompleteIn in a transaction of its own.
  absl::StatusOr<CompleteOutcome> Complete(const std::string& worker_id,
                                           const std::vector<CellResult>& results) {
    CompleteOutcome out;
    Events events;
    absl::Status s = store_->Write([&](Connection& c) {
      return results_->CompleteIn(c, worker_id, results, std::nullopt, clock_.NowMs(), events,
                                  out);
    });
    if (!s.ok()) return s;
    return out;
  }

  int64_t Count(const std::string& sql) {
    int64_t n = -1;
    absl::Status s = store_->Read([&](Connection& c) -> absl::Status {
      ASSIGN_OR_RETURN(Statement q, c.Prepare(sql));
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (row) n = q.ColumnInt(0);
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
    return n;
  }

  int64_t Cells(const std::string& sweep, CellState state) {
    return Count(absl::StrCat("SELECT COUNT(*) FROM cells WHERE sweep_id = '", sweep,
                              "' AND state = ", static_cast<int>(state)));
  }

  int64_t SweepStateOf(const std::string& sweep) {
    return Count(absl::StrCat("SELECT state FROM sweeps WHERE id = '", sweep, "'"));
  }

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  SpecCache specs_;
  std::unique_ptr<SweepLifecycle> sweeps_;
  std::unique_ptr<LeaseManager> leases_;
  std::unique_ptr<ResultRecorder> results_;
  std::unique_ptr<WorkerManager> workers_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_MANAGER_TEST_FIXTURE_H_
