// A worker that keeps what it trained, through real processes: ranksweepd on
// a temporary SQLite file and real ranksweep-worker processes (LibTorch on
// one CPU thread) on loopback, each with its own --outbox-dir.
//  - kill -9 of the worker right after a cell finished (its result on disk,
//    the coordinator frozen so it cannot be acknowledged): the next start
//    sends the row, trains nothing, and the cell keeps attempt 1;
//  - SIGTERM with --drain-seconds=3 while the coordinator is SIGSTOPped, or
//    killed: the worker exits within a few seconds, its result stays on
//    disk and arrives with the next start;
//  - no hole: the result a killed worker left, sent after its cell was
//    leased to and completed by another worker, stores nothing (the exact
//    FAILED_PRECONDITION of a stale lease); sent for a quarantined worker,
//    nothing either (PERMISSION_DENIED).
#include <signal.h>

#include <chrono>
#include <iostream>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/soak/soak_cluster.h"
#include "tests/support/process.h"

namespace ranksweep {
namespace {

using ::ranksweep::soak::Cluster;
using ::ranksweep::soak::ClusterOptions;
using ::ranksweep::soak::QueryInt;
using ::ranksweep::testing::Process;
using ::ranksweep::testing::TempDir;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

ClusterOptions Options(const TempDir& dir, int lease_seconds) {
  ClusterOptions o;
  o.dir = dir.path();
  o.bin = {RANKSWEEPD_BIN, RANKSWEEP_FAKE_WORKER_BIN, RANKSWEEP_CLI_BIN};
  o.lease_seconds = lease_seconds;
  return o;
}

// One cell that trains for a second or more on one CPU thread (no early
// stop), so the test can freeze the coordinator between the start of
// training and the report.
std::string OneCellSweep(const std::string& name) {
  return R"({"name": ")" + name + R"(",
  "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3},
  "heads": [{"kind": "kernel", "feature_map": "elu1"}],
  "ranks": [1],
  "seed_count": 1,
  "train": {"max_steps": 2000, "eval_every": 100, "early_stop_evals": 0}
})";
}

int BatchFiles(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("batch-", 0) == 0 && name.find('.') == std::string::npos) ++n;
  }
  return n;
}

bool WaitForBatchFiles(const std::string& dir, int want, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (BatchFiles(dir) != want && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  return BatchFiles(dir) == want;
}

int64_t WaitForCount(const std::string& db, const std::string& sql, int64_t want,
                     std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  int64_t got = QueryInt(db, sql);
  while (got != want && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    got = QueryInt(db, sql);
  }
  return got;
}

class OutboxTest : public ::testing::Test {
 protected:
  std::unique_ptr<Process> StartWorker(const Cluster& cluster, const std::string& worker_id,
                                       const std::string& outbox,
                                       std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {RANKSWEEP_WORKER_BIN,
                                     "--coordinator=" + cluster.address(),
                                     "--device=cpu",
                                     "--slots=1",
                                     "--worker-id=" + worker_id,
                                     "--outbox-dir=" + outbox,
                                     "--poll-ms=200",
                                     "--heartbeat-ms=500",
                                     "--rpc-timeout-seconds=30",
                                     "--log-every=0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<Process>(
        argv, dir_.path() + "/" + worker_id + "-" + std::to_string(starts_++),
        std::vector<std::string>{"RANKSWEEP_TORCH_THREADS=1"});
  }

  // Starts `worker_id` and waits until it trains the sweep's one cell;
  // then freezes the coordinator (so no result can be acknowledged) and
  // waits until the worker's result is on disk. Returns the worker.
  std::unique_ptr<Process> TrainWithTheCoordinatorFrozen(Cluster& cluster,
                                                         const std::string& worker_id,
                                                         const std::string& outbox,
                                                         std::vector<std::string> extra = {}) {
    std::unique_ptr<Process> w = StartWorker(cluster, worker_id, outbox, std::move(extra));
    EXPECT_TRUE(w->WaitForStderr(std::regex("ranksweep-worker: start "), 60s).has_value())
        << w->Stderr();
    EXPECT_EQ(kill(cluster.coordinator_pid(), SIGSTOP), 0);
    EXPECT_TRUE(WaitForBatchFiles(outbox, 1, 60s)) << w->Stderr();
    return w;
  }

  // Thaws the coordinator when `frozen` (it held the result back), checks
  // that nothing of the result was stored, starts `worker_id` again on its
  // outbox and checks that the row arrives with attempt 1 and nothing is
  // trained; then drains that worker.
  void ExpectTheNextStartSendsTheRowWithoutTraining(Cluster& cluster, bool frozen,
                                                    const std::string& worker_id,
                                                    const std::string& outbox) {
    if (frozen) EXPECT_EQ(kill(cluster.coordinator_pid(), SIGCONT), 0);
    const std::string db = cluster.db();
    EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results"), 0);
    EXPECT_EQ(BatchFiles(outbox), 1);
    std::unique_ptr<Process> again = StartWorker(cluster, worker_id, outbox);
    EXPECT_EQ(WaitForCount(db, "SELECT count(*) FROM results", 1, 60s), 1) << again->Stderr();
    EXPECT_TRUE(WaitForBatchFiles(outbox, 0, 10s));
    EXPECT_TRUE(again->WaitForStderr(std::regex("ranksweep-worker: registered as " + worker_id),
                                     30s)
                    .has_value())
        << again->Stderr();
    again->Signal(SIGTERM);
    EXPECT_EQ(again->Wait(30s), std::optional<int>(0));
    EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results WHERE worker_id = '" + worker_id + "'"),
              1);
    EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM cells WHERE state = 3 AND attempt = 1"), 1);
    const std::string log = again->Stderr();
    EXPECT_NE(log.find("resuming the session of " + worker_id +
                       " to send 1 result batch a previous process left"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find(": 1 recorded, 0 duplicates"), std::string::npos) << log;
    EXPECT_EQ(log.find("ranksweep-worker: start "), std::string::npos) << log;  // no retraining
  }

  // Sends SIGTERM to `w` and checks that it exits 0 within a few seconds
  // of its --drain-seconds=3, keeping its one result on disk.
  void ExpectADrainOnTime(Process& w, const std::string& outbox, const std::string& what) {
    const auto signalled = Clock::now();
    w.Signal(SIGTERM);
    const std::optional<int> code = w.Wait(60s);
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - signalled);
    EXPECT_EQ(code, std::optional<int>(0)) << w.Stderr();
    EXPECT_LT(took, 6s) << "exited " << took.count() << " ms after SIGTERM\n" << w.Stderr();
    std::cout << "drain with the coordinator " << what << ": exited " << took.count()
              << " ms after SIGTERM (--drain-seconds=3)\n";
    EXPECT_EQ(BatchFiles(outbox), 1);
    EXPECT_NE(w.Stderr().find("exiting with 1 unacknowledged result batch, kept for the next "
                              "start"),
              std::string::npos)
        << w.Stderr();
  }

  TempDir dir_;
  int starts_ = 0;
};

TEST_F(OutboxTest, KilledRightAfterACellFinishesTheRowArrivesWithNoRetraining) {
  Cluster cluster(Options(dir_, 60));
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  ASSERT_FALSE(cluster.Submit(OneCellSweep("kill9")).empty()) << cluster.error();
  const std::string outbox = dir_.path() + "/outbox-alpha";
  std::unique_ptr<Process> w = TrainWithTheCoordinatorFrozen(cluster, "alpha", outbox);
  w->Signal(SIGKILL);
  ASSERT_EQ(w->Wait(10s), std::optional<int>(128 + SIGKILL));
  ExpectTheNextStartSendsTheRowWithoutTraining(cluster, /*frozen=*/true, "alpha", outbox);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

// SIGTERM with the coordinator frozen: --drain-seconds is a hard deadline,
// the call in flight included; the result stays on disk.
TEST_F(OutboxTest, DrainWithTheCoordinatorStoppedEndsOnTimeAndKeepsTheResult) {
  Cluster cluster(Options(dir_, 60));
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  ASSERT_FALSE(cluster.Submit(OneCellSweep("frozen")).empty()) << cluster.error();
  const std::string outbox = dir_.path() + "/outbox-alpha";
  std::unique_ptr<Process> w =
      TrainWithTheCoordinatorFrozen(cluster, "alpha", outbox, {"--drain-seconds=3"});
  ExpectADrainOnTime(*w, outbox, "stopped");
  ExpectTheNextStartSendsTheRowWithoutTraining(cluster, /*frozen=*/true, "alpha", outbox);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

// The coordinator killed: the worker exits on time; the result is sent to
// the restarted coordinator (same file, same port) by the next start.
TEST_F(OutboxTest, WithTheCoordinatorKilledTheWorkerExitsOnTimeAndTheResultArrivesLater) {
  Cluster cluster(Options(dir_, 60));
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  ASSERT_FALSE(cluster.Submit(OneCellSweep("killed")).empty()) << cluster.error();
  const std::string outbox = dir_.path() + "/outbox-alpha";
  std::unique_ptr<Process> w =
      StartWorker(cluster, "alpha", outbox, {"--drain-seconds=3"});
  ASSERT_TRUE(w->WaitForStderr(std::regex("ranksweep-worker: start "), 60s).has_value())
      << w->Stderr();
  ASSERT_TRUE(cluster.StopCoordinator(SIGKILL));
  ASSERT_TRUE(WaitForBatchFiles(outbox, 1, 60s)) << w->Stderr();
  ExpectADrainOnTime(*w, outbox, "killed");
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  ExpectTheNextStartSendsTheRowWithoutTraining(cluster, /*frozen=*/false, "alpha", outbox);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

// The resend is no way around the lease: once the cell was leased to and
// completed by another worker, the result left on disk is refused as stale
// and nothing of it is stored.
TEST_F(OutboxTest, AResultSentAfterAnotherWorkerCompletedItsCellStoresNothing) {
  Cluster cluster(Options(dir_, 2));
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  ASSERT_FALSE(cluster.Submit(OneCellSweep("stale")).empty()) << cluster.error();
  const std::string outbox_a = dir_.path() + "/outbox-alpha";
  std::unique_ptr<Process> a = TrainWithTheCoordinatorFrozen(cluster, "alpha", outbox_a);
  a->Signal(SIGKILL);
  ASSERT_EQ(a->Wait(10s), std::optional<int>(128 + SIGKILL));
  ASSERT_EQ(kill(cluster.coordinator_pid(), SIGCONT), 0);

  // alpha's lease expires (2 s, no heartbeat); beta trains the cell again.
  const std::string db = cluster.db();
  std::unique_ptr<Process> b = StartWorker(cluster, "beta", dir_.path() + "/outbox-beta");
  ASSERT_EQ(WaitForCount(db, "SELECT count(*) FROM results", 1, 90s), 1) << b->Stderr();
  b->Signal(SIGTERM);
  EXPECT_EQ(b->Wait(30s), std::optional<int>(0));
  const int64_t lease = QueryInt(db, "SELECT lease_id FROM results");

  std::unique_ptr<Process> again = StartWorker(cluster, "alpha", outbox_a);
  EXPECT_TRUE(again->WaitForStderr(
      std::regex("FAILED_PRECONDITION: lease [0-9]+ for cell [0-9]+ is not held by this worker "
                 "\\(expired, reassigned or never its own\\); discarding its results"),
      30s).has_value())
      << again->Stderr();
  EXPECT_TRUE(WaitForBatchFiles(outbox_a, 0, 10s));
  again->Signal(SIGTERM);
  EXPECT_EQ(again->Wait(30s), std::optional<int>(0));
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results"), 1);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results WHERE worker_id = 'beta'"), 1);
  EXPECT_EQ(QueryInt(db, "SELECT lease_id FROM results"), lease);
  EXPECT_EQ(QueryInt(db, "SELECT attempt FROM cells"), 2);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

// Nor around a quarantine: the session a quarantined worker left is refused
// (PERMISSION_DENIED), its result is not stored, and it cannot register.
TEST_F(OutboxTest, AQuarantinedWorkersLeftResultIsRefused) {
  Cluster cluster(Options(dir_, 60));
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  ASSERT_FALSE(cluster.Submit(OneCellSweep("quarantined")).empty()) << cluster.error();
  const std::string outbox = dir_.path() + "/outbox-alpha";
  std::unique_ptr<Process> a = TrainWithTheCoordinatorFrozen(cluster, "alpha", outbox);
  a->Signal(SIGKILL);
  ASSERT_EQ(a->Wait(10s), std::optional<int>(128 + SIGKILL));
  ASSERT_EQ(kill(cluster.coordinator_pid(), SIGCONT), 0);
  testing::CommandResult q = cluster.Cli({"workers", "quarantine", "alpha"});
  ASSERT_EQ(q.exit_code, 0) << q.err;

  std::unique_ptr<Process> again = StartWorker(cluster, "alpha", outbox);
  const std::optional<int> code = again->Wait(60s);
  ASSERT_TRUE(code.has_value()) << again->Stderr();
  EXPECT_NE(*code, 0);
  const std::string log = again->Stderr();
  EXPECT_NE(log.find("PERMISSION_DENIED"), std::string::npos) << log;
  EXPECT_NE(log.find("; discarding its results"), std::string::npos) << log;
  EXPECT_EQ(BatchFiles(outbox), 0);
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM results"), 0);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

// Bad outbox flags, and a directory another worker holds, stop a worker at
// start-up (exit 1) with the flag's name, before anything is leased.
TEST_F(OutboxTest, BadOutboxFlagsAndAnOutboxInUseAreRefusedAtStart) {
  Cluster cluster(Options(dir_, 60));
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  const std::string outbox = dir_.path() + "/outbox-alpha";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--outbox-max-batches=0", "--outbox-max-batches must be in 1..1000000, got 0"},
      {"--outbox-max-bytes=100", "--outbox-max-bytes must be in 4096..1099511627776, got 100"},
  };
  for (const auto& [flag, message] : bad) {
    std::unique_ptr<Process> w = StartWorker(cluster, "alpha", outbox, {flag});
    EXPECT_EQ(w->Wait(60s), std::optional<int>(1)) << flag;
    EXPECT_EQ(w->Stderr(), "ranksweep-worker: " + message + "\n") << flag;
  }
  std::unique_ptr<Process> first = StartWorker(cluster, "alpha", outbox);
  ASSERT_TRUE(first->WaitForStderr(std::regex("registered as alpha"), 60s).has_value())
      << first->Stderr();
  std::unique_ptr<Process> second = StartWorker(cluster, "beta", outbox);
  EXPECT_EQ(second->Wait(60s), std::optional<int>(1));
  EXPECT_EQ(second->Stderr(), "ranksweep-worker: --outbox-dir: outbox " + outbox +
                                  " is in use by another worker process; give each worker its "
                                  "own --outbox-dir\n");
  first->Signal(SIGTERM);
  EXPECT_EQ(first->Wait(30s), std::optional<int>(0));
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM workers"), 1);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

}  // namespace
}  // namespace ranksweep
