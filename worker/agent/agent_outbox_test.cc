// The agent over its outbox on disk (file_outbox.h): results are on disk
// before they are first sent and gone once acknowledged, the next process
// sends what one left, stale leases and a full outbox, the drain's deadline.
#include <dirent.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/agent/agent.h"
#include "worker/agent/agent_test_fixture.h"
#include "worker/agent/file_outbox.h"

namespace ranksweep::agent {
namespace {

using ::testing::ElementsAre;


// The batch files in an outbox directory.
int BatchFiles(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) n += std::string(e->d_name).rfind("batch-", 0) == 0 ? 1 : 0;
  closedir(d);
  return n;
}

std::unique_ptr<FileOutbox> OpenOutbox(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<FileOutbox>> outbox = FileOutbox::Open(dir);
  EXPECT_TRUE(outbox.ok()) << outbox.status();
  return outbox.ok() ? std::move(*outbox) : nullptr;
}

// What one agent process did: it ran on `outbox` against `coordinator`
// until idle, training with ResultsFor.
struct IdleRun {
  absl::Status status;
  AgentStats stats;
  std::string worker_id;
  std::vector<std::vector<uint64_t>> trained;  // the seeds of every task run
};

IdleRun RunUntilIdle(FakeCoordinator& coordinator, Outbox* outbox) {
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  AgentOptions options = TestOptions();
  options.outbox = outbox;
  Agent agent(&coordinator, &runner, options);
  IdleRun run;
  run.status = agent.Run();
  run.stats = agent.stats();
  run.worker_id = agent.worker_id();
  run.trained = runner.ran();
  return run;
}

TEST(AgentOutboxTest, ResultsAreOnDiskBeforeTheyAreFirstSentAndGoneOnceAcknowledged) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {4, 5}, 40, 400)});
  std::vector<int> on_disk_when_sent;
  coordinator.on_complete = [&] { on_disk_when_sent.push_back(BatchFiles(dir)); };
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  AgentOptions options = TestOptions();
  options.outbox = outbox.get();
  Agent agent(&coordinator, &runner, options);
  ASSERT_TRUE(agent.Run().ok());

  EXPECT_THAT(on_disk_when_sent, ElementsAre(1));
  EXPECT_EQ(BatchFiles(dir), 0);
  EXPECT_EQ(outbox->batches(), 0);
  ASSERT_EQ(coordinator.acknowledged.size(), 1u);
  // The registration's session is kept for a later process.
  outbox.reset();
  std::optional<OutboxSession> session = OpenOutbox(dir)->LeftSession();
  ASSERT_TRUE(session.has_value());
  EXPECT_EQ(session->worker_id, "w-1");
  EXPECT_EQ(session->session, "ws_secret");
  EXPECT_EQ(session->lease_seconds, 30);
  EXPECT_EQ(session->heartbeat_seconds, 10);
}

// A worker that stops before the coordinator acknowledged its results
// leaves them on disk; the next process sends them under the same worker id
// and session, before it registers, without training them again.
TEST(AgentOutboxTest, ResultsLeftByOneProcessAreSentByTheNextUnderItsSession) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  {
    std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
    FakeCoordinator down;
    down.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {4, 5}, 40, 400)});
    down.complete_errors.assign(1000, absl::UnavailableError("connection refused"));
    Agent* drained = nullptr;
    FakeRunner runner([&drained](const TaskSpec& spec, const RunControl&) {
      drained->RequestDrain();
      return ResultsFor(spec);
    });
    AgentOptions options = TestOptions();
    options.exit_when_idle = false;
    options.drain_timeout = absl::Milliseconds(200);
    options.outbox = outbox.get();
    Agent agent(&down, &runner, options);
    drained = &agent;
    ASSERT_TRUE(agent.Run().ok());
    EXPECT_TRUE(down.acknowledged.empty());
    EXPECT_EQ(outbox->batches(), 1);
  }
  EXPECT_EQ(BatchFiles(dir), 1);

  std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
  FakeCoordinator back;
  const IdleRun run = RunUntilIdle(back, outbox.get());
  ASSERT_TRUE(run.status.ok()) << run.status;

  EXPECT_TRUE(run.trained.empty());  // nothing trained again
  ASSERT_GE(back.calls.size(), 3u);
  EXPECT_THAT(std::vector<std::string>(back.calls.begin(), back.calls.begin() + 3),
              ElementsAre("resume ws_secret", "complete w-1 leases 400 401 next=0",
                          "register w-1"));
  ASSERT_EQ(back.acknowledged.size(), 1u);
  EXPECT_THAT(Flatten(back.acknowledged[0]),
              ElementsAre(std::make_tuple(40, 400, 4u, 104), std::make_tuple(41, 401, 5u, 105)));
  EXPECT_EQ(run.stats.batches_resumed, 1);
  EXPECT_EQ(run.stats.cells_completed, 2);
  EXPECT_EQ(BatchFiles(dir), 0);
}

// One stale lease makes the coordinator refuse a whole call; the batch is
// then sent a result at a time, so the others still count and the stale
// one is dropped on its own.
TEST(AgentOutboxTest, ABatchRefusedForAStaleLeaseIsResolvedOneResultAtATime) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  {
    std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
    ASSERT_TRUE(outbox->SaveSession({"w-9", "ws_old", 30, 10}).ok());
    OutboxBatch batch{3, "s-1 r=4 seeds=2", {}};
    for (const SeedResult& r : ResultsFor(MakeTask("s-1", {4, 5}, 40, 400).spec)) {
      batch.results.push_back({40 + static_cast<int64_t>(r.seed) - 4,
                               400 + static_cast<int64_t>(r.seed) - 4, r});
    }
    ASSERT_TRUE(outbox->Add(batch).ok());
  }
  std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
  FakeCoordinator coordinator;
  const absl::Status stale = absl::FailedPreconditionError(
      "lease 400 for cell 40 is not held by this worker (expired, reassigned or never its own)");
  coordinator.complete_errors = {stale, stale, absl::OkStatus()};
  const IdleRun run = RunUntilIdle(coordinator, outbox.get());
  ASSERT_TRUE(run.status.ok()) << run.status;

  ASSERT_GE(coordinator.calls.size(), 5u);
  EXPECT_THAT(std::vector<std::string>(coordinator.calls.begin(), coordinator.calls.begin() + 5),
              ElementsAre("resume ws_old", "complete w-9 leases 400 401 next=0",
                          "complete w-9 leases 400 next=0", "complete w-9 leases 401 next=0",
                          "register w-9"));
  ASSERT_EQ(coordinator.acknowledged.size(), 1u);
  EXPECT_THAT(Flatten(coordinator.acknowledged[0]), ElementsAre(std::make_tuple(41, 401, 5u, 105)));
  EXPECT_EQ(run.stats.cells_completed, 1);
  EXPECT_EQ(run.stats.results_discarded, 1);
  EXPECT_EQ(BatchFiles(dir), 0);
}

// With nothing left to send, a restarted worker still keeps its identity;
// an id the coordinator refuses (another token's, a quarantined one) is
// given up for a new one.
TEST(AgentOutboxTest, ARestartKeepsTheWorkerIdUnlessTheCoordinatorRefusesIt) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  ASSERT_TRUE(OpenOutbox(dir)->SaveSession({"w-9", "ws_old", 30, 10}).ok());
  {
    std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
    FakeCoordinator coordinator;
    const IdleRun run = RunUntilIdle(coordinator, outbox.get());
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_THAT(coordinator.calls, ElementsAre("register w-9"));
    EXPECT_EQ(run.worker_id, "w-9");
  }
  std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
  FakeCoordinator coordinator;
  coordinator.register_errors.push_back(
      absl::PermissionDeniedError("worker w-9 is quarantined; an admin lifts it"));
  const IdleRun run = RunUntilIdle(coordinator, outbox.get());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_THAT(coordinator.calls, ElementsAre("register w-9", "register "));
  EXPECT_EQ(run.worker_id, "w-1");
}

// A full outbox refuses the batch with a line naming its bound; the
// results are still sent (from memory) and acknowledged.
TEST(AgentOutboxTest, AFullOutboxIsLoggedAndTheResultsAreSentFromMemory) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  absl::StatusOr<std::unique_ptr<FileOutbox>> outbox =
      FileOutbox::Open(dir, OutboxLimits{1000, 4096});
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  std::vector<uint64_t> seeds;
  for (uint64_t seed = 0; seed < 200; ++seed) seeds.push_back(seed);  // well over 4 kB
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", seeds, 1000, 5000)});
  FakeRunner runner([](const TaskSpec& spec, const RunControl&) { return ResultsFor(spec); });
  AgentOptions options = TestOptions();
  options.outbox = outbox->get();
  absl::Mutex log_mu;
  std::vector<std::string> lines;
  options.log = [&](const std::string& line) {
    absl::MutexLock lock(&log_mu);
    lines.push_back(line);
  };
  Agent agent(&coordinator, &runner, options);
  ASSERT_TRUE(agent.Run().ok());

  ASSERT_EQ(coordinator.acknowledged.size(), 1u);
  EXPECT_EQ(coordinator.acknowledged[0].size(), 200u);
  EXPECT_EQ(BatchFiles(dir), 0);
  int full = 0;
  for (const std::string& line : lines) {
    if (line.rfind("outbox: outbox " + dir + " is full: 0 bytes held and ", 0) == 0 &&
        line.find(" more would pass the bound of 4096 bytes (--outbox-max-bytes); the results "
                  "of s-1 ") != std::string::npos &&
        line.find(" are kept in memory only until acknowledged") != std::string::npos) {
      ++full;
    }
  }
  EXPECT_EQ(full, 1) << ::testing::PrintToString(lines);
}

// --drain-seconds is a hard deadline: it goes to the client (which cuts
// calls in flight), and no backoff between attempts outlives it. Results
// not acknowledged by then stay in the outbox.
TEST(AgentOutboxTest, TheDrainsDeadlineHoldsAgainstLongBackoffs) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  std::unique_ptr<FileOutbox> outbox = OpenOutbox(dir);
  FakeCoordinator coordinator;
  coordinator.acquire_script.push_back(std::vector<Task>{MakeTask("s-1", {4}, 40, 400)});
  coordinator.complete_errors.assign(1000, absl::UnavailableError("connection refused"));
  Agent* drained = nullptr;
  absl::Time requested;
  FakeRunner runner([&](const TaskSpec& spec, const RunControl&) {
    requested = absl::Now();
    drained->RequestDrain();
    return ResultsFor(spec);
  });
  AgentOptions options = TestOptions();
  options.exit_when_idle = false;
  options.drain_timeout = absl::Milliseconds(300);
  options.retry.initial_backoff = absl::Seconds(20);
  options.retry.max_backoff = absl::Seconds(20);
  options.retry.max_attempts = 100;
  options.outbox = outbox.get();
  Agent agent(&coordinator, &runner, options);
  drained = &agent;
  ASSERT_TRUE(agent.Run().ok());
  const absl::Duration took = absl::Now() - requested;

  EXPECT_LT(took, absl::Seconds(3));  // not one 20 s backoff
  ASSERT_EQ(coordinator.deadlines.size(), 1u);
  EXPECT_GE(coordinator.deadlines[0], requested + absl::Milliseconds(300));
  EXPECT_LT(coordinator.deadlines[0], requested + absl::Milliseconds(400));
  EXPECT_TRUE(coordinator.acknowledged.empty());
  EXPECT_EQ(BatchFiles(dir), 1);
}

}  // namespace
}  // namespace ranksweep::agent
