// The coordinator's sweeps and leases: submit, acquire in priority and turn
// order within the memory a worker has, expiry, heartbeats, release and
// cancel.
#include <string>
#include <vector>

#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// ------------------------------------------------------------------ submit

TEST_F(CoordinatorTest, SubmitExpandsRankedHeadsByRanksAndRanklessHeadsBySeedsOnly) {
  auto out = coordinator_->Submit(MakeSpec("grid"), "local");
  ASSERT_TRUE(out.ok()) << out.status();
  // kernel: 3 ranks x 4 seeds; softmax: 4 seeds.
  EXPECT_EQ(out->cells, 16);
  EXPECT_EQ(out->sweep_id.rfind("sw-", 0), 0u);
  EXPECT_EQ(out->sweep_id.size(), 11u);
  EXPECT_EQ(Cells(out->sweep_id, CellState::kPending), 16);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE head_index = 1 AND rank = 0"), 4);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE head_index = 0 AND rank = 4"), 4);
  SweepInfo info = Get(out->sweep_id);
  EXPECT_EQ(info.state, SweepState::kRunning);
  EXPECT_EQ(info.counts.total, 16);
  EXPECT_EQ(info.counts.pending, 16);
  EXPECT_EQ(info.name, "grid");
  EXPECT_EQ(info.owner, "local");
  EXPECT_EQ(info.created_unix_ms, clock_.NowMs());
  EXPECT_EQ(info.finished_unix_ms, 0);
  EXPECT_EQ(info.spec.ranks, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(info.spec.heads.size(), 2u);
}

TEST_F(CoordinatorTest, CellsAreCountedByStateAcrossSweeps) {
  auto empty = coordinator_->CountCellsByState();
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  auto first = coordinator_->Submit(MakeSpec("grid"), "local");
  auto second = coordinator_->Submit(MakeSpec("grid2"), "local");
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(coordinator_->Cancel(second->sweep_id).ok());
  auto counts = coordinator_->CountCellsByState();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(*counts, (std::map<CellState, int64_t>{{CellState::kPending, 16},
                                                   {CellState::kCancelled, 16}}));
}

TEST_F(CoordinatorTest, SweepsAreCountedByState) {
  auto empty = coordinator_->CountSweepsByState();
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  auto first = coordinator_->Submit(MakeSpec("grid"), "local");
  auto second = coordinator_->Submit(MakeSpec("grid2"), "local");
  auto third = coordinator_->Submit(MakeSpec("grid3"), "local");
  ASSERT_TRUE(first.ok() && second.ok() && third.ok());
  ASSERT_TRUE(coordinator_->Cancel(second->sweep_id).ok());
  auto counts = coordinator_->CountSweepsByState();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(*counts, (std::map<SweepState, int64_t>{{SweepState::kRunning, 2},
                                                    {SweepState::kCancelled, 1}}));
}

TEST_F(CoordinatorTest, SubmitRejectsBadSpecNamingTheFieldAndStoresNothing) {
  SweepSpec spec = MakeSpec("bad");
  spec.dataset.m = 0;
  auto out = coordinator_->Submit(spec, "local");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("dataset.m"));

  spec = MakeSpec("bad");
  spec.ranks = {};
  out = coordinator_->Submit(spec, "local");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("ranks"));

  EXPECT_EQ(Count("SELECT COUNT(*) FROM sweeps"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells"), 0);
}

TEST_F(CoordinatorTest, GetAndCancelUnknownSweepAreNotFound) {
  EXPECT_EQ(coordinator_->GetSweep("sw-00000000").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_->Cancel("sw-00000000").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_->GetSweep("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorTest, ListSweepsNewestFirstWithStateFilter) {
  std::string a = Submit(MakeSpec("a"));
  clock_.AdvanceMs(1);
  std::string b = Submit(MakeSpec("b"));
  ASSERT_TRUE(coordinator_->Cancel(a).ok());
  auto all = coordinator_->ListSweeps(std::nullopt, 0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].sweep_id, b);
  EXPECT_EQ((*all)[1].sweep_id, a);
  auto running = coordinator_->ListSweeps(SweepState::kRunning, 0);
  ASSERT_TRUE(running.ok());
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ((*running)[0].sweep_id, b);
  auto limited = coordinator_->ListSweeps(std::nullopt, 1);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->size(), 1u);
}

TEST_F(CoordinatorTest, ListSweepsByOwnerAndSweepOwner) {
  auto alice1 = coordinator_->Submit(MakeSpec("a1"), "alice");
  clock_.AdvanceMs(1);
  auto bob = coordinator_->Submit(MakeSpec("b"), "bob");
  clock_.AdvanceMs(1);
  auto alice2 = coordinator_->Submit(MakeSpec("a2"), "alice");
  ASSERT_TRUE(alice1.ok() && bob.ok() && alice2.ok());
  ASSERT_TRUE(coordinator_->Cancel(alice1->sweep_id).ok());

  auto mine = coordinator_->ListSweeps(std::nullopt, 0, std::string("alice"));
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].sweep_id, alice2->sweep_id);
  EXPECT_EQ((*mine)[1].sweep_id, alice1->sweep_id);
  auto running = coordinator_->ListSweeps(SweepState::kRunning, 0, std::string("alice"));
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ((*running)[0].sweep_id, alice2->sweep_id);
  auto limited = coordinator_->ListSweeps(std::nullopt, 1, std::string("alice"));
  ASSERT_EQ(limited->size(), 1u);  // the limit applies after the owner filter
  EXPECT_EQ((*limited)[0].owner, "alice");
  EXPECT_EQ(coordinator_->ListSweeps(std::nullopt, 0, std::string("carol"))->size(), 0u);
  EXPECT_EQ(coordinator_->ListSweeps(std::nullopt, 0)->size(), 3u);

  EXPECT_EQ(*coordinator_->SweepOwner(bob->sweep_id), "bob");
  EXPECT_EQ(coordinator_->SweepOwner("sw-00000000").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_->SweepOwner("").status().code(), absl::StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------------ leasing

TEST_F(CoordinatorTest, AcquireLeasesCellsOfOneSweepHeadRankOnly) {
  std::string sweep = Submit(MakeSpec("grid"));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, /*max_tasks=*/1, /*max_seeds=*/3);
  ASSERT_EQ(tasks.size(), 1u);
  const Task& t = tasks[0];
  EXPECT_EQ(t.sweep_id, sweep);
  EXPECT_EQ(t.head_index, 0);
  EXPECT_EQ(t.rank, 1);
  ASSERT_EQ(t.cells.size(), 3u);
  EXPECT_EQ(t.spec.seeds, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(t.spec.rank, 1);
  EXPECT_EQ(t.deadline_unix_ms, clock_.NowMs() + kLeaseMs);
  std::set<int64_t> leases;
  for (size_t i = 0; i < t.cells.size(); ++i) {
    EXPECT_EQ(t.cells[i].seed, i);
    EXPECT_EQ(t.cells[i].attempt, 1);
    leases.insert(t.cells[i].lease_id);
  }
  EXPECT_EQ(leases.size(), 3u);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 3);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE state = 2 AND head_index = 0 AND rank = 1"),
            3);

  // The rest of the group first, then the next groups, each task one group.
  tasks = Acquire(w, /*max_tasks=*/10, /*max_seeds=*/64);
  ASSERT_EQ(tasks.size(), 4u);
  EXPECT_EQ(tasks[0].rank, 1);
  EXPECT_EQ(tasks[0].cells.size(), 1u);
  EXPECT_EQ(tasks[0].cells[0].seed, 3u);
  EXPECT_EQ(tasks[1].rank, 2);
  EXPECT_EQ(tasks[2].rank, 4);
  EXPECT_EQ(tasks[3].head_index, 1);
  EXPECT_EQ(tasks[3].rank, 0);
  EXPECT_EQ(tasks[3].spec.head.kind, HeadKind::kSoftmax);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(tasks[i].cells.size(), 4u);
  // Every lease gets an id of its own (random, so not in any order).
  EXPECT_EQ(leases.count(tasks[0].cells[0].lease_id), 0u);
  EXPECT_NE(tasks[0].cells[0].lease_id, 0);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 16);
  EXPECT_THAT(Acquire(w), IsEmpty());
}

TEST_F(CoordinatorTest, AcquireServesPriorityFirstThenRoundRobin) {
  // Two groups (ranks 1 and 2) of one seed each per sweep.
  std::string a = Submit(MakeSpec("a", {1, 2}, 1, 0, false));
  std::string b = Submit(MakeSpec("b", {1, 2}, 1, 0, false));
  std::string c = Submit(MakeSpec("c", {1, 2}, 1, 5, false));
  std::string w = Register();
  EXPECT_THAT(SweepsOfNextTasks(w, 6), ElementsAre(c, c, a, b, a, b));
  EXPECT_THAT(Acquire(w), IsEmpty());
}

// People share the pool, not sweeps: at equal priority the owner served
// longest ago goes first, then that owner's sweep served longest ago. Three
// sweeps of ann's do not get three turns to every one of bob's.
TEST_F(CoordinatorTest, AcquireTakesTurnsBetweenOwnersThenBetweenTheirSweeps) {
  std::string a1 = Submit(MakeSpec("a1", {1, 2}, 1, 0, false), "ann");
  std::string a2 = Submit(MakeSpec("a2", {1, 2}, 1, 0, false), "ann");
  std::string a3 = Submit(MakeSpec("a3", {1, 2}, 1, 0, false), "ann");
  std::string b = Submit(MakeSpec("b", {1, 2, 4, 8}, 1, 0, false), "bob");
  std::string w = Register();
  EXPECT_THAT(SweepsOfNextTasks(w, 10), ElementsAre(a1, b, a2, b, a3, b, a1, b, a2, a3));
  EXPECT_THAT(Acquire(w), IsEmpty());

  // A higher priority still goes first, whoever owns it.
  std::string low = Submit(MakeSpec("low", {1}, 1, 0, false), "bob");
  std::string high = Submit(MakeSpec("high", {1}, 1, 5, false), "ann");
  EXPECT_THAT(SweepsOfNextTasks(w, 2), ElementsAre(high, low));
}

TEST_F(CoordinatorTest, AcquireRejectsUnknownWorkerAndBadLimits) {
  Submit(MakeSpec("grid"));
  EXPECT_EQ(coordinator_->Acquire("wk-nobody", 1, 1).status().code(),
            absl::StatusCode::kNotFound);
  std::string w = Register();
  EXPECT_EQ(coordinator_->Acquire(w, 65, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coordinator_->Acquire(w, 1, 1025).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE state = 2"), 0);
}

// ------------------------------------------------------------------ memory

// The estimate of `seeds` seeds of (head_index, rank) of `spec`.
int64_t TaskBytes(const SweepSpec& spec, int head_index, int rank, int64_t seeds) {
  return EstimateTaskMemory(MakeTaskSpec(spec, head_index, rank, {})).Total(seeds);
}

TEST_F(CoordinatorTest, SubmitRejectsACellOverTheMemoryLimitAndStoresNothing) {
  CoordinatorOptions options;
  options.max_task_memory_bytes = int64_t{1} << 30;  // 1 GiB
  Coordinator limited(store_.get(), &clock_, options);
  // Exhaustive m=3, N=6: 2^18 sequences. Rank 1 fits in 1 GiB; rank 65536
  // (features alone 2^18 * 6 * 65536 floats per map) does not.
  SweepSpec spec = MakeSpec("huge", {1, 65536}, 2);
  spec.dataset.m = 3;
  spec.dataset.seq_len = 6;
  ASSERT_LE(TaskBytes(spec, 0, 1, 1), int64_t{1} << 30);
  ASSERT_LE(TaskBytes(spec, 1, 0, 1), int64_t{1} << 30);
  const int64_t estimate = TaskBytes(spec, 0, 65536, 1);
  ASSERT_GT(estimate, int64_t{1} << 30);
  auto out = limited.Submit(spec, "local");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(out.status().message()),
            "heads[0] (kernel/elu1) at rank 65536: estimated memory " + FormatBytes(estimate) +
                " for one seed exceeds the limit of 1 GiB (--max-task-memory-bytes)");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sweeps"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells"), 0);

  // Without the big rank it is accepted; limit 0 means no limit.
  spec.ranks = {1};
  EXPECT_TRUE(limited.Submit(spec, "local").ok());
  options.max_task_memory_bytes = 0;
  Coordinator unlimited(store_.get(), &clock_, options);
  spec.ranks = {1, 65536};
  EXPECT_TRUE(unlimited.Submit(spec, "local").ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sweeps"), 2);
}

TEST_F(CoordinatorTest, AcquireLeasesOnlyTheSeedsThatFitTheMemory) {
  const SweepSpec spec = MakeSpec("grid");
  std::string sweep = Submit(spec);
  std::string w = Register();
  const int64_t two = TaskBytes(spec, 0, 1, 2);
  ASSERT_LT(two, TaskBytes(spec, 0, 1, 3));
  // Exactly two seeds, and up to one byte short of three.
  for (int64_t memory : {two, TaskBytes(spec, 0, 1, 3) - 1}) {
    auto tasks = coordinator_->Acquire(w, 1, 64, memory);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    ASSERT_EQ(tasks->size(), 1u);
    EXPECT_EQ((*tasks)[0].head_index, 0);
    EXPECT_EQ((*tasks)[0].rank, 1);
    ASSERT_EQ((*tasks)[0].cells.size(), 2u);
    EXPECT_EQ((*tasks)[0].spec.seeds.size(), 2u);
  }
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);
  // The budget is shared by the tasks of one call: rank 2 gets two seeds,
  // and nothing is left for a second task.
  auto tasks = coordinator_->Acquire(w, 10, 64, TaskBytes(spec, 0, 2, 2));
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].rank, 2);
  EXPECT_EQ((*tasks)[0].cells.size(), 2u);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 6);
  // Enough for two seeds of rank 2 and one of rank 4 (the next group).
  const int64_t rest = TaskBytes(spec, 0, 2, 2) + TaskBytes(spec, 0, 4, 1);
  tasks = coordinator_->Acquire(w, 10, 64, rest);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_EQ((*tasks)[0].rank, 2);
  EXPECT_EQ((*tasks)[0].cells.size(), 2u);
  EXPECT_EQ((*tasks)[1].rank, 4);
  EXPECT_EQ((*tasks)[1].cells.size(), 1u);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 9);
  EXPECT_EQ(coordinator_->Acquire(w, 1, 64, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorTest, AcquireSkipsAGroupTooBigForTheWorker) {
  // The high-priority sweep's only group (rank 4096) is too big for the
  // worker; the low-priority sweep's rank-1 group fits one seed.
  const SweepSpec big = MakeSpec("big", {4096}, 2, /*priority=*/5, false);
  const SweepSpec small = MakeSpec("small", {1}, 2, 0, false);
  std::string big_id = Submit(big);
  std::string small_id = Submit(small);
  const int64_t memory = TaskBytes(small, 0, 1, 1);
  ASSERT_LT(memory, TaskBytes(big, 0, 4096, 1));
  std::string w = Register();
  auto tasks = coordinator_->Acquire(w, 10, 64, memory);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].sweep_id, small_id);
  EXPECT_EQ((*tasks)[0].rank, 1);
  EXPECT_EQ((*tasks)[0].cells.size(), 1u);
  EXPECT_EQ(Cells(big_id, CellState::kPending), 2);
  EXPECT_EQ(Cells(small_id, CellState::kPending), 1);
  // Inside one sweep too: the big group is skipped for a later small one.
  const SweepSpec mixed = MakeSpec("mixed", {4096, 1}, 1, /*priority=*/9, false);
  std::string mixed_id = Submit(mixed);
  tasks = coordinator_->Acquire(w, 1, 64, memory);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].sweep_id, mixed_id);
  EXPECT_EQ((*tasks)[0].rank, 1);
  // Then the small sweep's other seed; the big groups stay pending.
  tasks = coordinator_->Acquire(w, 1, 64, memory);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].sweep_id, small_id);
  EXPECT_THAT(Acquire(w, 1, 64), SizeIs(1));  // unlimited: mixed's rank 4096
  // Nothing left that fits: an empty reply, not an error.
  tasks = coordinator_->Acquire(w, 1, 64, memory);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_THAT(*tasks, IsEmpty());
  EXPECT_EQ(Cells(big_id, CellState::kPending), 2);
  EXPECT_EQ(Cells(mixed_id, CellState::kPending), 0);
}

TEST_F(CoordinatorTest, AcquireFallsBackToTheRegisteredMemoryAndZeroIsUnlimited) {
  const SweepSpec spec = MakeSpec("grid");
  Submit(spec);
  WorkerRegistration reg;
  reg.hostname = "small";
  reg.device = "cpu";
  reg.memory_bytes = TaskBytes(spec, 0, 1, 3);
  auto small = coordinator_->RegisterWorker(reg);
  ASSERT_TRUE(small.ok()) << small.status();
  auto tasks = coordinator_->Acquire(small->worker_id, 1, 64, /*memory_bytes=*/0);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].cells.size(), 3u);
  // The request's memory wins over the registered one.
  tasks = coordinator_->Acquire(small->worker_id, 1, 64, TaskBytes(spec, 0, 2, 4));
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].cells.size(), 1u);  // the rest of rank 1
  // Registered 0 and requested 0: unlimited, every group whole.
  std::string unlimited = Register("big");
  tasks = coordinator_->Acquire(unlimited, 10, 64, 0);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 3u);
  for (const Task& t : *tasks) EXPECT_EQ(t.cells.size(), 4u);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE state = 1"), 0);
}

// ------------------------------------------------------------------ expiry

TEST_F(CoordinatorTest, ExpiredLeaseReturnsCellsToPendingWithTheirAttempt) {
  std::string sweep = Submit(MakeSpec("grid"));
  std::string w = Register();
  std::vector<Task> first = Acquire(w, 1, 4);
  ASSERT_EQ(first.size(), 1u);

  clock_.AdvanceMs(kLeaseMs - 1);
  auto expired = coordinator_->ExpireLeases();
  ASSERT_TRUE(expired.ok());
  EXPECT_EQ(*expired, 0);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);

  clock_.AdvanceMs(1);
  expired = coordinator_->ExpireLeases();
  ASSERT_TRUE(expired.ok());
  EXPECT_EQ(*expired, 4);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 0);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 16);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE attempt = 1 AND state = 1"), 4);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE last_failure LIKE '%expired%'"), 4);

  std::vector<Task> second = Acquire(w, 1, 4);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].rank, 1);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(second[0].cells[i].cell_id, first[0].cells[i].cell_id);
    EXPECT_EQ(second[0].cells[i].attempt, 2);
    for (const LeasedCell& old : first[0].cells) EXPECT_NE(second[0].cells[i].lease_id, old.lease_id);
  }
}

TEST_F(CoordinatorTest, CellFailsWithLastReasonAfterMaxAttempts) {
  std::string sweep = Submit(MakeSpec("one", {1}, 1, 0, false));
  std::string w = Register();
  for (int attempt = 1; attempt <= 3; ++attempt) {
    std::vector<Task> tasks = Acquire(w);
    ASSERT_EQ(tasks.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(tasks[0].cells[0].attempt, attempt);
    clock_.AdvanceMs(kLeaseMs);
    auto expired = coordinator_->ExpireLeases();
    ASSERT_TRUE(expired.ok());
    EXPECT_EQ(*expired, 1);
  }
  EXPECT_EQ(Cells(sweep, CellState::kFailed), 1);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 0);
  EXPECT_THAT(Acquire(w), IsEmpty());

  SweepInfo info = Get(sweep);
  EXPECT_EQ(info.state, SweepState::kFailed);
  EXPECT_EQ(info.counts.failed, 1);
  EXPECT_EQ(info.finished_unix_ms, clock_.NowMs());
  ASSERT_EQ(info.recent_failures.size(), 1u);
  EXPECT_THAT(info.recent_failures[0], HasSubstr("seed=0"));
  EXPECT_THAT(info.recent_failures[0], HasSubstr("expired"));
  EXPECT_THAT(info.recent_failures[0], HasSubstr("attempt 3 of 3"));

  auto q = coordinator_->Query(ResultQuery{sweep});
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->rows.size(), 1u);
  EXPECT_EQ(q->rows[0].state, CellState::kFailed);
  EXPECT_EQ(q->rows[0].attempt, 3);
  EXPECT_EQ(q->rows[0].worker_id, w);
  EXPECT_FALSE(q->rows[0].result.has_value());
  EXPECT_THAT(q->rows[0].failure, HasSubstr("expired"));
}

TEST_F(CoordinatorTest, HeartbeatExtendsLiveLeases) {
  std::string sweep = Submit(MakeSpec("grid"));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 4);
  clock_.AdvanceMs(kLeaseMs - 1000);
  auto hb = coordinator_->Heartbeat(w, LeaseIds(tasks[0]));
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_THAT(hb->lost_lease_ids, IsEmpty());
  EXPECT_THAT(hb->cancelled_lease_ids, IsEmpty());
  EXPECT_EQ(hb->deadline_unix_ms, clock_.NowMs() + kLeaseMs);
  clock_.AdvanceMs(2000);  // past the original deadline
  auto expired = coordinator_->ExpireLeases();
  ASSERT_TRUE(expired.ok());
  EXPECT_EQ(*expired, 0);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);
  EXPECT_EQ(coordinator_->Heartbeat("wk-nobody", {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CoordinatorTest, FailWithReleaseGivesTheAttemptBack) {
  std::string sweep = Submit(MakeSpec("one", {1}, 1, 0, false));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w);
  ASSERT_TRUE(coordinator_->Fail(w, LeaseIds(tasks[0]), "shutting down", true).ok());
  EXPECT_EQ(Cells(sweep, CellState::kPending), 1);
  EXPECT_EQ(Count("SELECT attempt FROM cells"), 0);
  tasks = Acquire(w);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].cells[0].attempt, 1);
}

TEST_F(CoordinatorTest, FailWithoutReleaseUsesAttemptsThenFailsTheCell) {
  std::string sweep = Submit(MakeSpec("one", {1}, 1, 0, false));
  std::string w = Register();
  for (int attempt = 1; attempt <= 3; ++attempt) {
    std::vector<Task> tasks = Acquire(w);
    ASSERT_EQ(tasks.size(), 1u);
    EXPECT_EQ(tasks[0].cells[0].attempt, attempt);
    ASSERT_TRUE(coordinator_->Fail(w, LeaseIds(tasks[0]), "out of memory", false).ok());
    // Failing the same lease again is harmless.
    ASSERT_TRUE(coordinator_->Fail(w, LeaseIds(tasks[0]), "out of memory", false).ok());
  }
  EXPECT_EQ(Cells(sweep, CellState::kFailed), 1);
  SweepInfo info = Get(sweep);
  EXPECT_EQ(info.state, SweepState::kFailed);
  ASSERT_EQ(info.recent_failures.size(), 1u);
  EXPECT_THAT(info.recent_failures[0], HasSubstr("out of memory"));
}

// ------------------------------------------------------------------ cancel

TEST_F(CoordinatorTest, CancelStopsLeasingAndHeartbeatReportsCancelledLeases) {
  std::string sweep = Submit(MakeSpec("grid"));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 4);
  auto cancelled = coordinator_->Cancel(sweep);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(*cancelled, 16);  // 12 pending + 4 leased
  EXPECT_EQ(Cells(sweep, CellState::kCancelled), 16);
  EXPECT_THAT(Acquire(w, 64, 64), IsEmpty());

  auto hb = coordinator_->Heartbeat(w, LeaseIds(tasks[0]));
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->cancelled_lease_ids, LeaseIds(tasks[0]));
  EXPECT_THAT(hb->lost_lease_ids, IsEmpty());

  auto late = coordinator_->Complete(w, ResultsFor(tasks[0]));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);

  SweepInfo info = Get(sweep);
  EXPECT_EQ(info.state, SweepState::kCancelled);
  EXPECT_EQ(info.counts.cancelled, 16);
  EXPECT_EQ(coordinator_->Cancel(sweep).status().code(), absl::StatusCode::kFailedPrecondition);
  // Expiry leaves cancelled cells alone.
  clock_.AdvanceMs(kLeaseMs);
  EXPECT_EQ(*coordinator_->ExpireLeases(), 0);
  EXPECT_EQ(Cells(sweep, CellState::kCancelled), 16);
}

}  // namespace
}  // namespace ranksweep::server
