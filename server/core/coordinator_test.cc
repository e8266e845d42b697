#include "server/core/coordinator.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/clock.h"
#include "server/core/log.h"
#include "server/core/packed_row.h"
#include "server/core/store.h"
#include "tests/support/result_row.h"
#include "tests/support/seed_result.h"

namespace ranksweep::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr int64_t kLeaseMs = 10'000;

class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "coordinator_test.XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Exhaustive m=2, N=3; a kernel head and a softmax head unless told otherwise.
SweepSpec MakeSpec(const std::string& name, std::vector<int> ranks = {1, 2, 4},
                   int seed_count = 4, int priority = 0, bool with_softmax = true) {
  SweepSpec s;
  s.name = name;
  s.dataset.kind = DatasetKind::kExhaustive;
  s.dataset.m = 2;
  s.dataset.seq_len = 3;
  HeadSpec kernel;
  kernel.kind = HeadKind::kKernel;
  s.heads.push_back(kernel);
  if (with_softmax) {
    HeadSpec softmax;
    softmax.kind = HeadKind::kSoftmax;
    s.heads.push_back(softmax);
  }
  s.ranks = std::move(ranks);
  s.seed_count = seed_count;
  s.priority = priority;
  return s;
}

SeedResult MakeResult(uint64_t seed, double train_error, double test_error = 0,
                      int64_t test_sequences = 0) {
  SeedResult r;
  r.seed = seed;
  r.train.sequences = 64;
  r.train.error = train_error;
  r.train.exact_accuracy = 1 - train_error;
  r.train.position_accuracy = 1 - train_error / 2;
  r.test.sequences = test_sequences;
  r.test.error = test_error;
  r.test.exact_accuracy = 1 - test_error;
  r.test.position_accuracy = 1 - test_error;
  r.steps = 100;
  r.wall_seconds = 2.0;
  r.device = "cpu";
  return r;
}

std::vector<CellResult> ResultsFor(const Task& task, double train_error = 0) {
  std::vector<CellResult> out;
  for (const LeasedCell& c : task.cells) {
    out.push_back(CellResult{c.cell_id, c.lease_id, MakeResult(c.seed, train_error)});
  }
  return out;
}

std::vector<int64_t> LeaseIds(const Task& task) {
  std::vector<int64_t> ids;
  for (const LeasedCell& c : task.cells) ids.push_back(c.lease_id);
  return ids;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogEnabled(false);
    Open();
  }

  void Open() {
    coordinator_.reset();
    store_.reset();
    auto store = Store::Open(dir_.File("coordinator.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    CoordinatorOptions options;
    options.lease_ms = kLeaseMs;
    options.max_attempts = 3;
    coordinator_ = std::make_unique<Coordinator>(store_.get(), &clock_, options);
  }

  std::string Submit(const SweepSpec& spec, const std::string& owner = "local") {
    auto out = coordinator_->Submit(spec, owner);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->sweep_id : "";
  }

  std::string Register(const std::string& host = "host") {
    WorkerRegistration reg;
    reg.hostname = host;
    reg.device = "cpu";
    reg.slots = 1;
    reg.version = {"0.1.0+abc", "2.1.0", ""};
    auto id = coordinator_->RegisterWorker(reg);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }

  std::vector<Task> Acquire(const std::string& worker, int max_tasks = 1, int max_seeds = 64) {
    auto tasks = coordinator_->Acquire(worker, max_tasks, max_seeds);
    EXPECT_TRUE(tasks.ok()) << tasks.status();
    return tasks.ok() ? *tasks : std::vector<Task>{};
  }

  // The sweeps of `n` one-task acquisitions by `worker`, in order; "" for
  // a call that did not return exactly one task.
  std::vector<std::string> SweepsOfNextTasks(const std::string& worker, int n) {
    std::vector<std::string> order;
    for (int i = 0; i < n; ++i) {
      std::vector<Task> tasks = Acquire(worker);
      EXPECT_EQ(tasks.size(), 1u);
      order.push_back(tasks.size() == 1 ? tasks[0].sweep_id : "");
    }
    return order;
  }

  // Exact count of cells of `sweep` in `state`, straight from the database.
  int64_t Cells(const std::string& sweep, CellState state) {
    return Count("SELECT COUNT(*) FROM cells WHERE sweep_id = '" + sweep +
                 "' AND state = " + std::to_string(static_cast<int>(state)));
  }

  int64_t Count(const std::string& sql) {
    int64_t n = -1;
    absl::Status s = store_->Read([&](Connection& c) -> absl::Status {
      auto q = c.Prepare(sql);
      if (!q.ok()) return q.status();
      auto row = q->Step();
      if (!row.ok()) return row.status();
      n = q->ColumnInt(0);
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
    return n;
  }

  SweepInfo Get(const std::string& sweep) {
    auto info = coordinator_->GetSweep(sweep);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.value_or(SweepInfo{});
  }

  TempDir dir_;
  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
};

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
  // Lease ids only grow.
  EXPECT_GT(tasks[0].cells[0].lease_id, *leases.rbegin());
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
                " for one seed exceeds the limit of 1 GiB (--max_task_memory_bytes)");
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
  auto tasks = coordinator_->Acquire(*small, 1, 64, /*memory_bytes=*/0);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].cells.size(), 3u);
  // The request's memory wins over the registered one.
  tasks = coordinator_->Acquire(*small, 1, 64, TaskBytes(spec, 0, 2, 4));
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
    EXPECT_GT(second[0].cells[i].lease_id, first[0].cells[3].lease_id);
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

// ------------------------------------------------------------------ fencing

TEST_F(CoordinatorTest, StaleAndForeignLeasesAreRejectedAndNothingIsRecorded) {
  std::string sweep = Submit(MakeSpec("one", {1}, 1, 0, false));
  std::string w1 = Register("a");
  std::string w2 = Register("b");
  std::vector<Task> old_tasks = Acquire(w1);
  ASSERT_EQ(old_tasks.size(), 1u);
  clock_.AdvanceMs(kLeaseMs);
  ASSERT_EQ(*coordinator_->ExpireLeases(), 1);
  std::vector<Task> new_tasks = Acquire(w2);
  ASSERT_EQ(new_tasks.size(), 1u);

  // w1 completes under its expired lease: stale.
  auto stale = coordinator_->Complete(w1, ResultsFor(old_tasks[0]));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(stale.status().message()), HasSubstr("stale lease"));
  // w1 completes under w2's lease: foreign.
  auto foreign = coordinator_->Complete(w1, ResultsFor(new_tasks[0]));
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 1);

  // Heartbeat: the stale lease is reported lost; a foreign one is refused.
  auto hb = coordinator_->Heartbeat(w1, LeaseIds(old_tasks[0]));
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->lost_lease_ids, LeaseIds(old_tasks[0]));
  auto hb_foreign = coordinator_->Heartbeat(w1, LeaseIds(new_tasks[0]));
  EXPECT_EQ(hb_foreign.status().code(), absl::StatusCode::kFailedPrecondition);
  // FailTask on someone else's lease is refused too.
  EXPECT_EQ(coordinator_->Fail(w1, LeaseIds(new_tasks[0]), "x", false).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 1);

  // The holder completes normally.
  auto ok = coordinator_->Complete(w2, ResultsFor(new_tasks[0]));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->recorded, 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 1);
}

TEST_F(CoordinatorTest, CompleteIsAllOrNothing) {
  std::string sweep = Submit(MakeSpec("grid"));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 2);
  std::vector<CellResult> results = ResultsFor(tasks[0]);
  results[1].lease_id += 1000;  // not the cell's lease
  auto out = coordinator_->Complete(w, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Cells(sweep, CellState::kDone), 0);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 2);

  results = ResultsFor(tasks[0]);
  results[0].result.seed = 77;  // not the cell's seed
  out = coordinator_->Complete(w, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);

  results = ResultsFor(tasks[0]);
  results[1].cell_id = 999999;
  out = coordinator_->Complete(w, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
}

TEST_F(CoordinatorTest, RepeatedCompletionUnderTheSameLeaseIsADuplicate) {
  std::string sweep = Submit(MakeSpec("grid"));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 4);
  auto first = coordinator_->Complete(w, ResultsFor(tasks[0], 0.25));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->recorded, 4);
  EXPECT_EQ(first->duplicates, 0);
  auto again = coordinator_->Complete(w, ResultsFor(tasks[0], 0.25));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->recorded, 0);
  EXPECT_EQ(again->duplicates, 4);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 4);
  EXPECT_EQ(Cells(sweep, CellState::kDone), 4);
  // A done cell is never leased again.
  std::vector<Task> rest = Acquire(w, 64, 64);
  int64_t leased = 0;
  for (const Task& t : rest) leased += static_cast<int64_t>(t.cells.size());
  EXPECT_EQ(leased, 12);
  // A heartbeat for a completed lease reports it lost.
  auto hb = coordinator_->Heartbeat(w, LeaseIds(tasks[0]));
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->lost_lease_ids.size(), 4u);
  // The worker's completed count went up once per cell.
  auto workers = coordinator_->ListWorkers();
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].completed_cells, 4);
  EXPECT_EQ((*workers)[0].leased_cells, 12);
  EXPECT_TRUE((*workers)[0].alive);
}

// A worker hands in its results and takes its next tasks in one call.
TEST_F(CoordinatorTest, CompleteLeasesTheNextTasksInTheSameTransaction) {
  std::string sweep = Submit(MakeSpec("grid"));  // kernel ranks 1, 2, 4 and softmax; 4 seeds
  std::string w = Register();
  std::vector<Task> first = Acquire(w, 1, 4);
  ASSERT_EQ(first.size(), 1u);

  // Out-of-range wants are refused before anything is written.
  for (const TaskWant& bad : {TaskWant{65, 4, 0}, TaskWant{-1, 4, 0}, TaskWant{1, 1025, 0},
                              TaskWant{1, 4, -1}}) {
    auto out = coordinator_->Complete(w, ResultsFor(first[0]), bad);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  }
  auto too_many = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{65, 4, 0});
  EXPECT_EQ(too_many.status().message(), "next.max_tasks: must be 1..64, got 65");
  auto negative = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{1, 4, -1});
  EXPECT_EQ(negative.status().message(),
            "next.memory_bytes: must be >= 0 (0 = unknown), got -1");
  // A stale lease fails the call: nothing recorded, nothing leased.
  std::vector<CellResult> stale = ResultsFor(first[0]);
  stale[0].lease_id += 1000;
  EXPECT_EQ(coordinator_->Complete(w, stale, TaskWant{2, 4, 0}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);

  auto out = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{2, 4, 0});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->recorded, 4);
  ASSERT_EQ(out->next_tasks.size(), 2u);
  EXPECT_EQ(out->next_tasks[0].head_index, 0);
  EXPECT_EQ(out->next_tasks[0].rank, 2);
  EXPECT_EQ(out->next_tasks[1].rank, 4);
  for (const Task& t : out->next_tasks) {
    EXPECT_EQ(t.sweep_id, sweep);
    EXPECT_EQ(t.cells.size(), 4u);
    EXPECT_EQ(t.spec.seeds, (std::vector<uint64_t>{0, 1, 2, 3}));
    EXPECT_EQ(t.deadline_unix_ms, clock_.NowMs() + kLeaseMs);
    EXPECT_GT(t.cells[0].lease_id, first[0].cells.back().lease_id);
  }
  EXPECT_EQ(Cells(sweep, CellState::kDone), 4);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 8);

  // Both tasks' results at once; max_seeds 0 is the default (64).
  std::vector<CellResult> both = ResultsFor(out->next_tasks[0]);
  for (const CellResult& r : ResultsFor(out->next_tasks[1])) both.push_back(r);
  auto second = coordinator_->Complete(w, both, TaskWant{1, 0, 0});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->recorded, 8);
  ASSERT_EQ(second->next_tasks.size(), 1u);
  EXPECT_EQ(second->next_tasks[0].head_index, 1);
  EXPECT_EQ(second->next_tasks[0].cells.size(), 4u);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);

  // No work left: the results are recorded and nothing comes back.
  auto last = coordinator_->Complete(w, ResultsFor(second->next_tasks[0]), TaskWant{1, 4, 0});
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->recorded, 4);
  EXPECT_THAT(last->next_tasks, IsEmpty());
  EXPECT_EQ(Cells(sweep, CellState::kDone), 16);
  EXPECT_EQ(Get(sweep).state, SweepState::kDone);
  // A repeat is a duplicate and, with no work, still leases nothing.
  auto again = coordinator_->Complete(w, ResultsFor(second->next_tasks[0]), TaskWant{1, 4, 0});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->duplicates, 4);
  EXPECT_THAT(again->next_tasks, IsEmpty());
}

// A worker that lost the reply to CompleteTasks sends the same results
// again: the tasks that reply leased go to it again (the same leases, task
// by task, deadlines extended) and nothing more is leased. Once those
// leases are gone, the same results lease afresh.
TEST_F(CoordinatorTest, ResultsSentAgainGetTheTasksTheirLostReplyLeased) {
  std::string sweep = Submit(MakeSpec("grid"));  // 4 groups of 4 seeds
  std::string w = Register();
  std::vector<Task> first = Acquire(w, 1, 4);
  ASSERT_EQ(first.size(), 1u);
  // Two tasks of two seeds, both from group (0, 2): the boundary between
  // them is kept on the second answer.
  auto out = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{2, 2, 0});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->next_tasks.size(), 2u);
  const int64_t leases = Count("SELECT value FROM meta WHERE key = 'next_lease_id'");

  clock_.AdvanceMs(1000);
  auto again = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{2, 2, 0});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->recorded, 0);
  EXPECT_EQ(again->duplicates, 4);
  ASSERT_EQ(again->next_tasks.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Task& was = out->next_tasks[i];
    const Task& now = again->next_tasks[i];
    EXPECT_EQ(now.sweep_id, sweep);
    EXPECT_EQ(now.head_index, was.head_index);
    EXPECT_EQ(now.rank, was.rank);
    EXPECT_EQ(now.spec.seeds, was.spec.seeds);
    EXPECT_EQ(now.spec.rank, was.spec.rank);
    ASSERT_EQ(now.cells.size(), 2u);
    for (size_t j = 0; j < 2; ++j) {
      EXPECT_EQ(now.cells[j].cell_id, was.cells[j].cell_id);
      EXPECT_EQ(now.cells[j].lease_id, was.cells[j].lease_id);
      EXPECT_EQ(now.cells[j].attempt, 1);
    }
    EXPECT_EQ(now.deadline_unix_ms, clock_.NowMs() + kLeaseMs);
  }
  EXPECT_EQ(again->next_tasks[0].spec.seeds, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(again->next_tasks[1].spec.seeds, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(Count("SELECT value FROM meta WHERE key = 'next_lease_id'"), leases);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 8);
  EXPECT_EQ(Count(absl::StrCat("SELECT COUNT(*) FROM cells WHERE state = 2 AND "
                               "lease_deadline_ms = ",
                               clock_.NowMs() + kLeaseMs)),
            4);

  // Sent again without `next`: acknowledged, nothing handed out.
  auto bare = coordinator_->Complete(w, ResultsFor(first[0]), std::nullopt);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->duplicates, 4);
  EXPECT_THAT(bare->next_tasks, IsEmpty());

  // The leases expire (the worker never heard of them); the same results
  // then lease new tasks, which later resends get.
  clock_.AdvanceMs(kLeaseMs);
  auto expired = coordinator_->ExpireLeases();
  ASSERT_TRUE(expired.ok());
  EXPECT_EQ(*expired, 4);
  auto fresh = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{1, 4, 0});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_EQ(fresh->next_tasks.size(), 1u);
  EXPECT_EQ(fresh->next_tasks[0].cells.size(), 4u);
  EXPECT_EQ(fresh->next_tasks[0].cells[0].lease_id, leases);
  EXPECT_EQ(Count("SELECT value FROM meta WHERE key = 'next_lease_id'"), leases + 4);
  auto repeat = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{1, 4, 0});
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  ASSERT_EQ(repeat->next_tasks.size(), 1u);
  EXPECT_EQ(repeat->next_tasks[0].cells[0].lease_id, leases);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);

  // A task leased by AcquireTasks is never taken for a resend's.
  std::vector<Task> acquired = Acquire(w, 1, 4);
  ASSERT_EQ(acquired.size(), 1u);
  auto done = coordinator_->Complete(w, ResultsFor(repeat->next_tasks[0]), std::nullopt);
  ASSERT_TRUE(done.ok()) << done.status();
  auto last = coordinator_->Complete(w, ResultsFor(first[0]), TaskWant{1, 4, 0});
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(last->next_tasks.size(), 1u);
  EXPECT_NE(last->next_tasks[0].cells[0].cell_id, acquired[0].cells[0].cell_id);
  EXPECT_GT(last->next_tasks[0].cells[0].lease_id, acquired[0].cells.back().lease_id);
}

// The calls that do not wait: the same outcome, delivered once the commit
// has synced; an argument out of range is answered at once, on the caller's
// thread, with nothing written.
TEST_F(CoordinatorTest, AcquireAsyncAndCompleteAsyncDeliverTheOutcomeAfterTheCommit) {
  std::string sweep = Submit(MakeSpec("grid"));  // 16 cells in 4 groups of 4 seeds
  std::string w = Register();
  std::promise<absl::StatusOr<std::vector<Task>>> leased;
  coordinator_->AcquireAsync(w, TaskWant{1, 4, 0},
                             [&](absl::StatusOr<std::vector<Task>> t) { leased.set_value(t); });
  absl::StatusOr<std::vector<Task>> tasks = leased.get_future().get();
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].cells.size(), 4u);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);

  std::thread::id answered_on;
  absl::Status refused;
  coordinator_->AcquireAsync(w, TaskWant{65, 4, 0}, [&](absl::StatusOr<std::vector<Task>> t) {
    answered_on = std::this_thread::get_id();
    refused = t.status();
  });
  EXPECT_EQ(answered_on, std::this_thread::get_id());
  EXPECT_EQ(refused.message(), "max_tasks: must be 1..64, got 65");
  coordinator_->CompleteAsync(w, ResultsFor((*tasks)[0]), TaskWant{1, 0, -1},
                              [&](absl::StatusOr<CompleteOutcome> out) {
                                answered_on = std::this_thread::get_id();
                                refused = out.status();
                              });
  EXPECT_EQ(answered_on, std::this_thread::get_id());
  EXPECT_EQ(refused.message(), "next.memory_bytes: must be >= 0 (0 = unknown), got -1");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);

  // A stale lease: the transaction fails and nothing is kept.
  std::vector<CellResult> stale = ResultsFor((*tasks)[0]);
  stale[0].lease_id += 1000;
  std::promise<absl::StatusOr<CompleteOutcome>> failed;
  coordinator_->CompleteAsync(w, stale, TaskWant{1, 4, 0},
                              [&](absl::StatusOr<CompleteOutcome> out) { failed.set_value(out); });
  EXPECT_EQ(failed.get_future().get().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);

  std::vector<std::string> events;
  std::mutex events_mu;
  const int64_t sub = coordinator_->Subscribe(sweep, [&](const SweepChange& c) {
    std::lock_guard<std::mutex> lock(events_mu);
    events.push_back(c.message);
  });
  std::promise<absl::StatusOr<CompleteOutcome>> completed;
  coordinator_->CompleteAsync(w, ResultsFor((*tasks)[0]), TaskWant{1, 4, 0},
                              [&](absl::StatusOr<CompleteOutcome> out) {
                                // Committed before `done`: a reader sees it.
                                out->duplicates = static_cast<int>(Cells(sweep, CellState::kDone));
                                completed.set_value(out);
                              });
  absl::StatusOr<CompleteOutcome> out = completed.get_future().get();
  coordinator_->Unsubscribe(sub);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->recorded, 4);
  EXPECT_EQ(out->duplicates, 4);  // the done cells a reader saw from `done`
  ASSERT_EQ(out->next_tasks.size(), 1u);
  EXPECT_EQ(out->next_tasks[0].rank, 2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 4);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 4);
  // The watchers heard of the four results and the new lease before `done`.
  std::lock_guard<std::mutex> lock(events_mu);
  EXPECT_EQ(events.size(), 5u);
}

TEST_F(CoordinatorTest, ACompletionRunAgainAfterAFailedOneInItsCommitCountsItsResultsOnce) {
  std::string sweep = Submit(MakeSpec("grid"));  // 16 cells in 4 groups of 4 seeds
  std::string w1 = Register("a");
  std::string w2 = Register("b");
  std::vector<Task> t1 = Acquire(w1, 1, 4);
  std::vector<Task> t2 = Acquire(w2, 1, 4);
  ASSERT_EQ(t1.size(), 1u);
  ASSERT_EQ(t2.size(), 1u);
  // The fourth result is stale: the first three are written before the
  // request fails, so its commit is rolled back and the other request runs
  // again (store.h, group commit).
  std::vector<CellResult> stale = ResultsFor(t2[0]);
  stale[3].lease_id += 1000;

  std::vector<std::string> events;
  std::mutex events_mu;
  const int64_t sub = coordinator_->Subscribe(sweep, [&](const SweepChange& c) {
    std::lock_guard<std::mutex> lock(events_mu);
    events.push_back(c.message);
  });
  // Hold the writer until both calls have queued, so that they share a commit.
  std::promise<void> held;
  store_->WriteAsync(
      [&](Connection&) -> absl::Status {
        held.set_value();
        while (store_->queued_writes() < 2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return absl::OkStatus();
      },
      [](absl::Status) {});
  held.get_future().wait();
  std::promise<absl::StatusOr<CompleteOutcome>> good, bad;
  coordinator_->CompleteAsync(w1, ResultsFor(t1[0]), TaskWant{1, 4, 0},
                              [&](absl::StatusOr<CompleteOutcome> out) { good.set_value(out); });
  coordinator_->CompleteAsync(w2, stale, std::nullopt,
                              [&](absl::StatusOr<CompleteOutcome> out) { bad.set_value(out); });
  absl::StatusOr<CompleteOutcome> out = good.get_future().get();
  absl::StatusOr<CompleteOutcome> refused = bad.get_future().get();
  coordinator_->Unsubscribe(sub);

  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            absl::StrFormat("stale lease %d for cell %d: the cell is leased under lease %d",
                            stale[3].lease_id, stale[3].cell_id, stale[3].lease_id - 1000));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->recorded, 4);
  EXPECT_EQ(out->duplicates, 0);
  ASSERT_EQ(out->next_tasks.size(), 1u);
  EXPECT_EQ(out->next_tasks[0].cells.size(), 4u);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 4);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM result_packs"), 4);
  EXPECT_EQ(Count("SELECT SUM(n) FROM result_groups"), 4);
  EXPECT_EQ(Cells(sweep, CellState::kDone), 4);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 8);  // w2's four, and w1's next four
  EXPECT_EQ(Cells(sweep, CellState::kPending), 4);
  // Four results and one lease, told once.
  std::lock_guard<std::mutex> lock(events_mu);
  EXPECT_EQ(events.size(), 5u);
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

// ------------------------------------------------------------------ results

TEST_F(CoordinatorTest, SweepIsDoneWhenEveryCellIsDoneAndRowsCarryProvenance) {
  std::string sweep = Submit(MakeSpec("small", {1}, 2, 0, false));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 64);
  ASSERT_EQ(tasks.size(), 1u);
  clock_.AdvanceMs(500);
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(tasks[0], 0.5)).ok());
  SweepInfo info = Get(sweep);
  EXPECT_EQ(info.state, SweepState::kDone);
  EXPECT_EQ(info.counts.done, 2);
  EXPECT_EQ(info.finished_unix_ms, clock_.NowMs());
  EXPECT_DOUBLE_EQ(info.mean_cell_seconds, 2.0);

  auto q = coordinator_->Query(ResultQuery{sweep});
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->rows.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ResultRow& row = q->rows[i];
    EXPECT_EQ(row.sweep_id, sweep);
    EXPECT_EQ(row.cell_id, tasks[0].cells[i].cell_id);
    EXPECT_EQ(row.head, "kernel/elu1");
    EXPECT_EQ(row.rank, 1);
    EXPECT_EQ(row.seed, i);
    EXPECT_EQ(row.state, CellState::kDone);
    EXPECT_EQ(row.worker_id, w);
    EXPECT_EQ(row.worker_version.build_id, "0.1.0+abc");
    EXPECT_EQ(row.worker_version.torch_version, "2.1.0");
    EXPECT_EQ(row.attempt, 1);
    EXPECT_EQ(row.lease_id, tasks[0].cells[i].lease_id);
    EXPECT_EQ(row.finished_unix_ms, clock_.NowMs());
    ASSERT_TRUE(row.result.has_value());
    EXPECT_EQ(row.result->seed, i);
    EXPECT_DOUBLE_EQ(row.result->train.error, 0.5);
    EXPECT_EQ(row.result->train.sequences, 64);
  }
}

TEST_F(CoordinatorTest, EveryResultFieldComesBackFromTheStoreUnchanged) {
  std::string sweep = Submit(MakeSpec("fields", {1}, 2, 0, false));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 64);
  ASSERT_EQ(tasks.size(), 1u);
  std::vector<CellResult> results;
  for (const LeasedCell& c : tasks[0].cells) {
    SeedResult r;
    r.seed = c.seed;
    r.train = {276, 0.75, 0.5, 0.5, 1.25};
    // Seed 0 has a test split; seed 1 has none (its test_error is stored as
    // NULL and reads back as the default, 1).
    r.test = c.seed == 0 ? SplitMetrics{50, 0.875, 0.625, 0.375, 2.5} : SplitMetrics{};
    r.final_loss = 0.0625;
    r.steps = 1234;
    r.wall_seconds = 3.25;
    r.device = "cuda:0 (NVIDIA H200)";
    r.facts = {276, c.seed == 0 ? 50 : 0, 12, 6, 12};
    results.push_back(CellResult{c.cell_id, c.lease_id, r});
  }
  ASSERT_TRUE(coordinator_->Complete(w, results).ok());
  auto q = coordinator_->Query(ResultQuery{sweep});
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->rows.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(q->rows[i].result.has_value());
    ranksweep::testing::ExpectSameSeedResult(*q->rows[i].result, results[i].result);
  }
}

TEST_F(CoordinatorTest, GroupByHeadRankComputesAggregatesOnKnownNumbers) {
  std::string sweep = Submit(MakeSpec("agg", {1, 2}, 3));
  std::string w = Register();
  // Group (kernel, r=1): train errors 0, 0.25, 0.5; test errors 0.1, 0.2, 0.3.
  std::vector<Task> tasks = Acquire(w, 1, 64);
  ASSERT_EQ(tasks[0].rank, 1);
  std::vector<CellResult> results;
  const double train[] = {0, 0.25, 0.5};
  const double test[] = {0.1, 0.2, 0.3};
  for (size_t i = 0; i < 3; ++i) {
    const LeasedCell& c = tasks[0].cells[i];
    results.push_back(CellResult{c.cell_id, c.lease_id, MakeResult(c.seed, train[i], test[i], 10)});
  }
  ASSERT_TRUE(coordinator_->Complete(w, results).ok());
  // Group (kernel, r=2): one seed done out of 3, no test split.
  tasks = Acquire(w, 1, 1);
  ASSERT_EQ(tasks[0].rank, 2);
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(tasks[0], 0.0)).ok());

  ResultQuery query{sweep};
  query.group_by = GroupBy::kHeadRank;
  auto q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_THAT(q->rows, IsEmpty());
  ASSERT_EQ(q->groups.size(), 3u);

  const ResultGroup& g = q->groups[0];
  EXPECT_EQ(g.head, "kernel/elu1");
  EXPECT_EQ(g.head_index, 0);
  EXPECT_EQ(g.rank, 1);
  EXPECT_EQ(g.n, 3);
  EXPECT_EQ(g.expected, 3);
  EXPECT_EQ(g.exact_seeds, 1);
  EXPECT_DOUBLE_EQ(g.train_error.mean, 0.25);
  EXPECT_DOUBLE_EQ(g.train_error.std, 0.25);
  EXPECT_DOUBLE_EQ(g.train_error.min, 0.0);
  EXPECT_DOUBLE_EQ(g.train_error.max, 0.5);
  EXPECT_NEAR(g.train_error.ci95, 4.303 * 0.25 / std::sqrt(3.0), 1e-12);
  EXPECT_NEAR(g.test_error.mean, 0.2, 1e-12);
  EXPECT_NEAR(g.test_error.std, 0.1, 1e-12);
  EXPECT_NEAR(g.train_exact_accuracy.mean, 0.75, 1e-12);
  EXPECT_NEAR(g.train_position_accuracy.mean, 0.875, 1e-12);

  const ResultGroup& g2 = q->groups[1];
  EXPECT_EQ(g2.rank, 2);
  EXPECT_EQ(g2.n, 1);
  EXPECT_EQ(g2.expected, 3);
  EXPECT_EQ(g2.exact_seeds, 1);
  EXPECT_DOUBLE_EQ(g2.train_error.mean, 0.0);
  EXPECT_DOUBLE_EQ(g2.train_error.std, 0.0);
  EXPECT_DOUBLE_EQ(g2.train_error.ci95, 0.0);
  EXPECT_DOUBLE_EQ(g2.test_error.mean, 0.0);  // no test split

  const ResultGroup& g3 = q->groups[2];
  EXPECT_EQ(g3.head, "softmax");
  EXPECT_EQ(g3.rank, 0);
  EXPECT_EQ(g3.n, 0);
  EXPECT_EQ(g3.expected, 3);

  // Completeness and the transition: r=1 is decided (seeds 1, 2 not exact);
  // r=2 has its one done seed exact but seeds 1, 2 missing, so undecided.
  EXPECT_THAT(g.missing_seeds, IsEmpty());
  EXPECT_THAT(g2.missing_seeds, ElementsAre(1u, 2u));
  EXPECT_THAT(g3.missing_seeds, ElementsAre(0u, 1u, 2u));
  ASSERT_EQ(q->heads.size(), 2u);
  EXPECT_EQ(q->heads[0].head, "kernel/elu1");
  EXPECT_TRUE(q->heads[0].has_rank);
  EXPECT_FALSE(q->heads[0].transition_defined);
  EXPECT_EQ(q->heads[0].reason,
            "undecided: rank 2 is incomplete (1/3 seeds; seeds 1, 2 missing) and every done "
            "seed there is exact");
  EXPECT_FALSE(q->heads[1].has_rank);
  EXPECT_EQ(q->heads[1].reason, "no rank; exact on 0/3 seeds (seeds 0, 1, 2 missing)");
  ASSERT_TRUE(q->facts.has_value());
}

TEST_F(CoordinatorTest, GroupedQueryReportsTransitionAndDatasetFacts) {
  std::string sweep = Submit(MakeSpec("transition", {1, 2, 4}, 2));
  std::string w = Register();
  ResultQuery query{sweep};
  query.group_by = GroupBy::kHeadRank;
  auto empty = coordinator_->Query(query);
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->facts.has_value());  // nothing done yet

  // r=1 fails on both seeds, r=2 and r=4 are exact, softmax exact.
  for (const Task& t : Acquire(w, 64, 64)) {
    std::vector<CellResult> results;
    for (const LeasedCell& c : t.cells) {
      SeedResult r = MakeResult(c.seed, t.rank == 1 ? 0.5 : 0.0);
      r.facts.train_sequences = 64;
      r.facts.distinct_queries = 12;
      r.facts.rank_lower_bound = 2;
      r.facts.rank_upper_bound = 12;
      results.push_back(CellResult{c.cell_id, c.lease_id, r});
    }
    ASSERT_TRUE(coordinator_->Complete(w, results).ok());
  }
  auto q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->heads.size(), 2u);
  EXPECT_TRUE(q->heads[0].transition_defined);
  EXPECT_EQ(q->heads[0].transition_rank, 2);
  EXPECT_FALSE(q->heads[0].has_test_split);
  EXPECT_EQ(q->heads[1].reason, "no rank; exact on 2/2 seeds");
  ASSERT_TRUE(q->facts.has_value());
  EXPECT_EQ(q->facts->rank_lower_bound, 2);
  EXPECT_EQ(q->facts->rank_upper_bound, 12);
  EXPECT_EQ(q->facts->distinct_queries, 12);

  // A rank filter changes what the transition is computed over.
  query.ranks = {4};
  q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->heads.size(), 1u);
  EXPECT_EQ(q->heads[0].transition_rank, 4);

  // Per-seed queries carry no summaries.
  q = coordinator_->Query(ResultQuery{sweep});
  ASSERT_TRUE(q.ok());
  EXPECT_THAT(q->heads, IsEmpty());
  EXPECT_FALSE(q->facts.has_value());
}

TEST_F(CoordinatorTest, CrossEntropySummariesSayTheyDoNotTestTheBound) {
  SweepSpec spec = MakeSpec("ce", {1, 2}, 2);
  spec.train.loss = LossKind::kCrossEntropy;
  std::string sweep = Submit(spec);
  std::string w = Register();
  for (const Task& t : Acquire(w, 64, 64)) {
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t)).ok());
  }
  ResultQuery query{sweep};
  query.group_by = GroupBy::kHeadRank;
  auto q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->heads.size(), 2u);
  EXPECT_EQ(q->heads[0].caveat,
            "loss ce: the argmax readout is not the paper's model, so this head's transition "
            "does not test the rank bound");
  EXPECT_EQ(q->heads[1].caveat, "");  // softmax: not bounded
  // Neither head gets the single-head bounds, and each says why.
  EXPECT_EQ(q->heads[0].no_bound, "loss ce");
  EXPECT_EQ(q->heads[1].no_bound, "softmax");

  // The same sweep under MSE carries no such note.
  spec.name = "mse";
  spec.train.loss = LossKind::kMse;
  std::string plain = Submit(spec);
  for (const Task& t : Acquire(w, 64, 64)) {
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t)).ok());
  }
  query.sweep_id = plain;
  q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->heads.size(), 2u);
  EXPECT_EQ(q->heads[0].caveat, "");
  EXPECT_EQ(q->heads[0].no_bound, "");  // a single kernel head under MSE: bounded
}

TEST_F(CoordinatorTest, GroupedQueryAppliesTheCriterionAndSaysWhereBoundsApply) {
  std::string sweep = Submit(MakeSpec("criterion", {1, 2}, 3));
  std::string w = Register();
  // Rank 1: seed 0 exact, seeds 1 and 2 at error 0.02; rank 2 and softmax exact.
  for (const Task& t : Acquire(w, 64, 64)) {
    std::vector<CellResult> results;
    for (const LeasedCell& c : t.cells) {
      const double error = t.rank == 1 && c.seed != 0 ? 0.02 : 0.0;
      results.push_back(CellResult{c.cell_id, c.lease_id, MakeResult(c.seed, error)});
    }
    ASSERT_TRUE(coordinator_->Complete(w, results).ok());
  }
  ResultQuery query{sweep};
  query.group_by = GroupBy::kHeadRank;
  auto all = coordinator_->Query(query);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->criterion, "all");
  EXPECT_EQ(all->heads[0].transition_rank, 2);
  EXPECT_EQ(all->recipe_labels, (std::map<int32_t, std::string>{{0, "recipe 0"}}));
  // The single-head bounds apply to the kernel head only.
  EXPECT_EQ(all->heads[0].no_bound, "");
  EXPECT_EQ(all->heads[1].no_bound, "softmax");

  query.criterion = "seeds:1";
  auto one = coordinator_->Query(query);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->criterion, "seeds:1");
  EXPECT_EQ(one->heads[0].transition_rank, 1);
  EXPECT_EQ(one->heads[0].reason,
            "rank 1 is the smallest swept rank with at least 1 seed exact (1/3)");

  // Mean accuracy at rank 1: (1 + 0.98 + 0.98) / 3 = 0.98667.
  query.criterion = "mean:0.98";
  auto mean = coordinator_->Query(query);
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(mean->heads[0].transition_rank, 1);
  query.criterion = "mean:0.99";
  mean = coordinator_->Query(query);
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(mean->heads[0].transition_rank, 2);
  EXPECT_EQ(mean->heads[1].reason,
            "no rank; exact on 3/3 seeds; meets mean exact accuracy >= 0.99");

  query.criterion = "seeds:0";
  auto bad = coordinator_->Query(query);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "criterion: \"seeds:0\" is out of range: K must be at least 1; use all (every seed "
            "exact), mean:X (mean exact accuracy >= X, 0 < X <= 1) or seeds:K (at least K seeds "
            "exact, K >= 1)");
}

TEST_F(CoordinatorTest, QueryFiltersByHeadRankSeedAndState) {
  std::string sweep = Submit(MakeSpec("filters", {1, 2}, 3));
  std::string w = Register();
  for (const Task& t : Acquire(w, 64, 64)) {
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t)).ok());
  }
  ResultQuery query{sweep};
  query.head = "softmax";
  auto q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->rows.size(), 3u);

  query = ResultQuery{sweep};
  query.ranks = {2};
  query.seeds = {0, 2};
  q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->rows.size(), 2u);
  EXPECT_EQ(q->rows[0].seed, 0u);
  EXPECT_EQ(q->rows[1].seed, 2u);

  query = ResultQuery{sweep};
  query.state = CellState::kFailed;
  q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok());
  EXPECT_THAT(q->rows, IsEmpty());

  query = ResultQuery{sweep};
  query.head = "nope";
  EXPECT_EQ(coordinator_->Query(query).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coordinator_->Query(ResultQuery{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coordinator_->Query(ResultQuery{"sw-00000000"}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CoordinatorTest, GroupsFromTheRunningAggregatesEqualGroupsFromTheRows) {
  // 2 ranks x 6 seeds + softmax: three tasks of up to 4 seeds done with
  // varied errors, with and without a test split; two cells failed for
  // good, one leased, the rest pending.
  std::string sweep = Submit(MakeSpec("agree", {1, 2}, 6));
  std::string w = Register();
  int k = 0;
  for (const Task& t : Acquire(w, 3, 4)) {
    std::vector<CellResult> results;
    for (const LeasedCell& c : t.cells) {
      ++k;
      const double train = (k % 5) * 0.125;
      results.push_back(CellResult{c.cell_id, c.lease_id,
                                   MakeResult(c.seed, train, (k % 3) * 0.3, k % 2 ? 16 : 0)});
    }
    ASSERT_TRUE(coordinator_->Complete(w, results).ok());
  }
  for (const Task& t : Acquire(w, 1, 2)) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      std::vector<int64_t> leases;
      for (const Task& again : attempt == 0 ? std::vector<Task>{t} : Acquire(w, 1, 2)) {
        for (int64_t id : LeaseIds(again)) leases.push_back(id);
      }
      ASSERT_TRUE(coordinator_->Fail(w, leases, "diverged", false).ok());
    }
  }
  Acquire(w, 1, 1);  // one cell stays leased
  ASSERT_GE(k, 8);
  ASSERT_EQ(Cells(sweep, CellState::kDone), k);
  ASSERT_EQ(Cells(sweep, CellState::kFailed), 2);
  ASSERT_EQ(Cells(sweep, CellState::kLeased), 1);
  ASSERT_EQ(Cells(sweep, CellState::kPending), 18 - k - 3);

  ResultQuery query{sweep};
  query.group_by = GroupBy::kHeadRank;
  auto fast = coordinator_->Query(query);
  query.seeds = {0, 1, 2, 3, 4, 5};  // every seed: aggregated from the rows
  auto slow = coordinator_->Query(query);
  ASSERT_TRUE(fast.ok() && slow.ok()) << fast.status() << slow.status();
  ASSERT_EQ(fast->groups.size(), 3u);
  ASSERT_EQ(slow->groups.size(), 3u);
  int64_t done = 0;
  for (size_t i = 0; i < 3; ++i) {
    const ResultGroup& a = fast->groups[i];
    const ResultGroup& b = slow->groups[i];
    SCOPED_TRACE(a.head + " rank " + std::to_string(a.rank));
    EXPECT_EQ(a.head, b.head);
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.n, b.n);
    EXPECT_EQ(a.expected, 6);
    EXPECT_EQ(b.expected, 6);
    EXPECT_EQ(a.exact_seeds, b.exact_seeds);
    EXPECT_EQ(a.test_exact_seeds, b.test_exact_seeds);
    EXPECT_EQ(a.missing_seeds, b.missing_seeds);
    EXPECT_EQ(static_cast<int64_t>(a.missing_seeds.size()), 6 - a.n);
    done += a.n;
    const std::pair<const Aggregate*, const Aggregate*> pairs[] = {
        {&a.train_error, &b.train_error},
        {&a.test_error, &b.test_error},
        {&a.train_exact_accuracy, &b.train_exact_accuracy},
        {&a.train_position_accuracy, &b.train_position_accuracy}};
    for (const auto& [x, y] : pairs) {
      EXPECT_NEAR(x->mean, y->mean, 1e-12);
      EXPECT_NEAR(x->std, y->std, 1e-12);
      EXPECT_EQ(x->min, y->min);
      EXPECT_EQ(x->max, y->max);
      EXPECT_NEAR(x->ci95, y->ci95, 1e-12);
    }
  }
  EXPECT_EQ(done, k);
  ASSERT_EQ(fast->heads.size(), slow->heads.size());
  for (size_t i = 0; i < fast->heads.size(); ++i) {
    EXPECT_EQ(fast->heads[i].reason, slow->heads[i].reason);
  }
  EXPECT_EQ(fast->facts.has_value(), slow->facts.has_value());
}

TEST_F(CoordinatorTest, RowsComeInPagesInCellOrder) {
  std::string sweep = Submit(MakeSpec("pages", {1, 2}, 3));  // 9 cells
  std::string w = Register();
  for (const Task& t : Acquire(w, 64, 64)) {
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t)).ok());
  }
  auto all = coordinator_->Query(ResultQuery{sweep});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->rows.size(), 9u);
  EXPECT_EQ(all->next_after_cell_id, 0);

  ResultQuery query{sweep};
  query.page_size = 4;
  std::vector<int64_t> ids;
  std::vector<size_t> page_sizes;
  for (int page = 0; page < 10; ++page) {
    auto q = coordinator_->Query(query);
    ASSERT_TRUE(q.ok()) << q.status();
    page_sizes.push_back(q->rows.size());
    for (const ResultRow& r : q->rows) ids.push_back(r.cell_id);
    if (q->next_after_cell_id == 0) break;
    EXPECT_EQ(q->next_after_cell_id, q->rows.back().cell_id);
    query.after_cell_id = q->next_after_cell_id;
  }
  EXPECT_THAT(page_sizes, ElementsAre(4u, 4u, 1u));
  ASSERT_EQ(ids.size(), 9u);
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(ids[i], all->rows[i].cell_id);

  // Filters apply before the page is cut: rank 2 has 3 rows, a page of 3
  // holds them all and says there is no more.
  query = ResultQuery{sweep};
  query.ranks = {2};
  query.page_size = 3;
  auto q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->rows.size(), 3u);
  EXPECT_EQ(q->next_after_cell_id, 0);

  // A state filter pages through `cells`.
  std::string open = Submit(MakeSpec("open", {1}, 3, 0, false));  // 3 pending
  query = ResultQuery{open};
  query.state = CellState::kPending;
  query.page_size = 2;
  q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->rows.size(), 2u);
  query.after_cell_id = q->next_after_cell_id;
  q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->rows.size(), 1u);
  EXPECT_EQ(q->rows[0].seed, 2u);
  EXPECT_EQ(q->next_after_cell_id, 0);

  query = ResultQuery{sweep};
  query.page_size = -1;
  auto bad = coordinator_->Query(query);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "page_size: -1 is negative; use 0 (every row) or more");
  query = ResultQuery{sweep};
  query.group_by = GroupBy::kHeadRank;
  query.after_cell_id = 3;
  bad = coordinator_->Query(query);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("page_token: grouped queries"));
}

// ------------------------------------------------------------------ result cache

class ResultCacheTest : public CoordinatorTest {
 protected:
  // A coordinator of build "0.1.0+abc", the build Register() reports.
  std::unique_ptr<Coordinator> WithCodeVersion(const std::string& version) {
    CoordinatorOptions options;
    options.lease_ms = kLeaseMs;
    options.code_version = version;
    return std::make_unique<Coordinator>(store_.get(), &clock_, options);
  }

  // Trains every cell of whatever is pending: train error 0.25 everywhere.
  void TrainEverything(Coordinator& c, const std::string& worker) {
    while (true) {
      auto tasks = c.Acquire(worker, 8, 64);
      ASSERT_TRUE(tasks.ok()) << tasks.status();
      if (tasks->empty()) return;
      for (const Task& t : *tasks) ASSERT_TRUE(c.Complete(worker, ResultsFor(t, 0.25)).ok());
    }
  }
};

TEST_F(ResultCacheTest, AnIdenticalSweepIsServedFromTheStoreAndMarkedCached) {
  auto coord = WithCodeVersion("0.1.0+abc");
  std::string w = Register();
  auto first = coord->Submit(MakeSpec("a", {1, 2}, 2), "local");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->cells, 6);  // kernel r=1, 2 and softmax, 2 seeds each
  EXPECT_EQ(first->cached_cells, 0);
  TrainEverything(*coord, w);

  clock_.AdvanceMs(1000);
  auto again = coord->Submit(MakeSpec("b", {1, 2}, 2), "local");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->cells, 6);
  EXPECT_EQ(again->cached_cells, 6);
  auto info = coord->GetSweep(again->sweep_id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, SweepState::kDone);  // nothing left to train
  EXPECT_EQ(info->counts.done, 6);
  EXPECT_EQ(info->cached_cells, 6);
  EXPECT_EQ(info->grid_cells, 6);
  EXPECT_EQ(info->mean_cell_seconds, 0);  // no cell of b was trained

  auto a_rows = coord->Query(ResultQuery{first->sweep_id});
  auto b_rows = coord->Query(ResultQuery{again->sweep_id});
  ASSERT_TRUE(a_rows.ok() && b_rows.ok());
  ASSERT_EQ(b_rows->rows.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const ResultRow& a = a_rows->rows[i];
    const ResultRow& b = b_rows->rows[i];
    EXPECT_EQ(a.cached_from_cell_id, 0);
    EXPECT_EQ(b.cached_from_cell_id, a.cell_id);
    EXPECT_EQ(b.head, a.head);
    EXPECT_EQ(b.rank, a.rank);
    EXPECT_EQ(b.seed, a.seed);
    EXPECT_EQ(b.worker_id, w);
    EXPECT_EQ(b.lease_id, a.lease_id);
    EXPECT_EQ(b.finished_unix_ms, a.finished_unix_ms + 1000);
    ASSERT_TRUE(b.result.has_value());
    EXPECT_EQ(b.result->train.error, 0.25);
  }
  // The copies count in the grouped query like trained results.
  ResultQuery grouped{again->sweep_id};
  grouped.group_by = GroupBy::kHeadRank;
  auto groups = coord->Query(grouped);
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->groups.size(), 3u);
  for (const ResultGroup& g : groups->groups) {
    EXPECT_EQ(g.n, 2);
    EXPECT_EQ(g.expected, 2);
    EXPECT_DOUBLE_EQ(g.train_error.mean, 0.25);
    EXPECT_THAT(g.missing_seeds, IsEmpty());
  }
  // Only results trained by the worker count as sources: a third identical
  // sweep copies a's cells, not b's copies.
  auto third = coord->Submit(MakeSpec("c", {1, 2}, 2), "local");
  ASSERT_TRUE(third.ok());
  auto c_rows = coord->Query(ResultQuery{third->sweep_id});
  ASSERT_TRUE(c_rows.ok());
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(c_rows->rows[i].cached_from_cell_id, a_rows->rows[i].cell_id);
  }
}

// Rows are read from their packed copies (result_packs); a state filter
// reads the same rows from the columns of `results`. Every way a result row
// is written (done with and without a test split, copied from the cache,
// failed for good) must give the same row both ways.
TEST_F(ResultCacheTest, PackedRowsEqualTheRowsReadFromTheColumns) {
  auto coord = WithCodeVersion("0.1.0+abc");
  std::string w = Register();
  auto trained = coord->Submit(MakeSpec("a", {1, 2}, 3), "local");
  ASSERT_TRUE(trained.ok()) << trained.status();
  int n = 0;
  while (true) {
    auto tasks = coord->Acquire(w, 1, 64);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    if (tasks->empty()) break;
    std::vector<CellResult> results;
    for (const LeasedCell& c : (*tasks)[0].cells) {
      SeedResult r = MakeResult(c.seed, 0.125 * (n % 5), 0.5, n % 2 == 0 ? 0 : 40);
      r.train.max_abs_error = 0.01 * n;
      r.final_loss = 1.0 / (n + 1);
      r.wall_seconds = 1.0 + n;  // 1 .. 9 s
      r.facts = {64, n % 2 == 0 ? 0 : 40, 8, 4, 8};
      ++n;
      results.push_back(CellResult{c.cell_id, c.lease_id, r});
    }
    ASSERT_TRUE(coord->Complete(w, results).ok());
  }
  clock_.AdvanceMs(500);
  auto cached = coord->Submit(MakeSpec("b", {1, 2}, 3), "local");
  ASSERT_TRUE(cached.ok()) << cached.status();
  ASSERT_EQ(cached->cached_cells, 9);
  // The mean cell time counts trained cells only (schema 7's running sums).
  auto trained_info = coord->GetSweep(trained->sweep_id);
  auto cached_info = coord->GetSweep(cached->sweep_id);
  ASSERT_TRUE(trained_info.ok() && cached_info.ok());
  EXPECT_EQ(trained_info->mean_cell_seconds, 5.0);
  EXPECT_EQ(trained_info->cached_cells, 0);
  EXPECT_EQ(cached_info->mean_cell_seconds, 0);
  EXPECT_EQ(cached_info->cached_cells, 9);
  auto failing = coord->Submit(MakeSpec("c", {4}, 2, 0, /*with_softmax=*/false), "local");
  ASSERT_TRUE(failing.ok()) << failing.status();
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto tasks = coord->Acquire(w, 1, 1);
    ASSERT_TRUE(tasks.ok() && tasks->size() == 1u);
    ASSERT_TRUE(coord->Fail(w, LeaseIds((*tasks)[0]), "diverged", false).ok());
  }
  TrainEverything(*coord, w);

  for (const std::string& sweep : {trained->sweep_id, cached->sweep_id, failing->sweep_id}) {
    auto packed = coord->Query(ResultQuery{sweep});
    ASSERT_TRUE(packed.ok()) << packed.status();
    std::vector<ResultRow> columns;
    for (CellState state : {CellState::kDone, CellState::kFailed}) {
      ResultQuery q{sweep};
      q.state = state;
      auto out = coord->Query(q);
      ASSERT_TRUE(out.ok()) << out.status();
      columns.insert(columns.end(), out->rows.begin(), out->rows.end());
    }
    std::sort(columns.begin(), columns.end(),
              [](const ResultRow& a, const ResultRow& b) { return a.cell_id < b.cell_id; });
    ASSERT_EQ(packed->rows.size(), columns.size()) << sweep;
    ASSERT_EQ(packed->rows.size(), sweep == failing->sweep_id ? 2u : 9u);
    for (size_t i = 0; i < columns.size(); ++i) {
      const ResultRow& p = packed->rows[i];
      const ResultRow& c = columns[i];
      SCOPED_TRACE(sweep + " cell " + std::to_string(c.cell_id));
      ranksweep::testing::ExpectSameResultRow(p, c);
    }
  }
  auto failed = coord->Query(ResultQuery{failing->sweep_id});
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->rows[0].state, CellState::kFailed);
  EXPECT_EQ(failed->rows[0].failure, w + ": diverged (attempt 3 of 3)");
}

TEST_F(ResultCacheTest, OnlyTheSameTaskSeedAndBuildAreReused) {
  auto coord = WithCodeVersion("0.1.0+abc");
  std::string w = Register();
  ASSERT_TRUE(coord->Submit(MakeSpec("a", {1, 2}, 2), "local").ok());
  TrainEverything(*coord, w);

  // More seeds: seeds 0 and 1 come from the cache, seed 2 trains.
  auto more = coord->Submit(MakeSpec("more-seeds", {1, 2}, 3), "local");
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->cells, 9);
  EXPECT_EQ(more->cached_cells, 6);
  EXPECT_EQ(Cells(more->sweep_id, CellState::kPending), 3);

  // A different training hyperparameter is a different task.
  SweepSpec other_lr = MakeSpec("other-lr", {1, 2}, 2);
  other_lr.train.lr = 0.02;
  auto lr = coord->Submit(other_lr, "local");
  ASSERT_TRUE(lr.ok());
  EXPECT_EQ(lr->cached_cells, 0);

  // The user can ask for every cell to be trained again.
  SweepSpec fresh = MakeSpec("fresh", {1, 2}, 2);
  fresh.reuse_results = false;
  auto no_reuse = coord->Submit(fresh, "local");
  ASSERT_TRUE(no_reuse.ok());
  EXPECT_EQ(no_reuse->cached_cells, 0);
  EXPECT_EQ(Cells(no_reuse->sweep_id, CellState::kPending), 6);

  // A coordinator of another build serves nothing trained by this one, and
  // one with the cache off (empty code version) neither.
  for (const char* version : {"0.2.0+def", ""}) {
    auto other = WithCodeVersion(version);
    auto sub = other->Submit(MakeSpec("other-build", {1, 2}, 2), "local");
    ASSERT_TRUE(sub.ok()) << sub.status();
    EXPECT_EQ(sub->cached_cells, 0) << version;
  }
}

// ------------------------------------------------------------------ search mode

TEST_F(CoordinatorTest, SearchModeBisectsToTheTransitionAndCountsTheCellsSaved) {
  SweepSpec spec = MakeSpec("search", {1, 2, 4, 8, 16, 32, 64, 128, 256}, 2);
  spec.mode = SweepMode::kSearch;
  auto sub = coordinator_->Submit(spec, "local");
  ASSERT_TRUE(sub.ok()) << sub.status();
  // The first probe is the middle rank (16) for the kernel head, plus the
  // softmax head's cells.
  EXPECT_EQ(sub->cells, 4);
  std::string w = Register();
  std::vector<int> probed;
  while (true) {
    std::vector<Task> tasks = Acquire(w, 1, 64);
    if (tasks.empty()) break;
    const Task& t = tasks[0];
    if (t.rank > 0) probed.push_back(t.rank);
    // The kernel head is exact from rank 8 on; softmax always.
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t, t.rank == 0 || t.rank >= 8 ? 0 : 0.5))
                    .ok());
  }
  // 16 exact -> 2 not -> 4 not -> 8 exact: the transition is 8.
  EXPECT_THAT(probed, ::testing::ElementsAre(16, 2, 4, 8));
  SweepInfo info = Get(sub->sweep_id);
  EXPECT_EQ(info.state, SweepState::kDone);
  EXPECT_EQ(info.counts.total, 10);  // 4 ranks x 2 seeds + softmax x 2
  EXPECT_EQ(info.grid_cells, 20);    // (9 ranks + softmax) x 2 seeds
  ResultQuery q{sub->sweep_id};
  q.group_by = GroupBy::kHeadRank;
  auto out = coordinator_->Query(q);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->heads.size(), 2u);
  EXPECT_TRUE(out->heads[0].transition_defined);
  EXPECT_EQ(out->heads[0].transition_rank, 8);
}

// A search sweep adds cells as it goes, so its cell ids interleave with a
// sweep submitted after it; each sweep's rows are still exactly its own, in
// cell id order, whole or in pages.
TEST_F(CoordinatorTest, RowsOfSweepsWhoseCellsInterleaveAreEachTheirOwn) {
  SweepSpec spec = MakeSpec("search", {1, 2, 4, 8, 16, 32, 64, 128, 256}, 2);
  spec.mode = SweepMode::kSearch;
  const std::string a = Submit(spec);
  const std::string b = Submit(MakeSpec("plain", {1, 2}, 2, 0, /*with_softmax=*/false));
  std::string w = Register();
  while (true) {
    std::vector<Task> tasks = Acquire(w, 1, 64);
    if (tasks.empty()) break;
    const Task& t = tasks[0];
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t, t.rank == 0 || t.rank >= 8 ? 0 : 0.5))
                    .ok());
  }
  // Cells of b lie between the first and the last cell of a.
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE sweep_id = '" + b +
                  "' AND id > (SELECT MIN(id) FROM cells WHERE sweep_id = '" + a +
                  "') AND id < (SELECT MAX(id) FROM cells WHERE sweep_id = '" + a + "')"),
            4);
  for (const auto& [sweep, cells] : {std::make_pair(a, 10), std::make_pair(b, 4)}) {
    std::vector<int64_t> want;
    {
      absl::Status s = store_->Read([&, sweep = sweep](Connection& c) -> absl::Status {
        ASSIGN_OR_RETURN(Statement q,
                         c.Prepare("SELECT id FROM cells WHERE sweep_id = ?1 ORDER BY id"));
        q.Bind(1, sweep);
        while (true) {
          ASSIGN_OR_RETURN(bool row, q.Step());
          if (!row) return absl::OkStatus();
          want.push_back(q.ColumnInt(0));
        }
      });
      ASSERT_TRUE(s.ok()) << s;
    }
    ASSERT_EQ(want.size(), static_cast<size_t>(cells));
    for (int64_t page_size : {0, 3}) {
      ResultQuery q{sweep};
      q.page_size = page_size;
      std::vector<int64_t> got;
      int pages = 0;
      while (true) {
        auto out = coordinator_->Query(q);
        ASSERT_TRUE(out.ok()) << out.status();
        ++pages;
        for (const ResultRow& row : out->rows) {
          EXPECT_EQ(row.sweep_id, sweep);
          EXPECT_EQ(row.state, CellState::kDone);
          got.push_back(row.cell_id);
        }
        if (out->next_after_cell_id == 0) break;
        q.after_cell_id = out->next_after_cell_id;
      }
      EXPECT_EQ(got, want) << sweep << " page_size " << page_size;
      EXPECT_EQ(pages, page_size == 0 ? 1 : (cells + 2) / 3) << sweep;
    }
  }
}

// Large row queries read SQLite on one thread and unpack on another; they
// must give exactly the rows of the one-thread read, whole, in pages that
// end inside and across the chunks handed over, and filtered, and report a
// damaged packed row the same way.
TEST_F(CoordinatorTest, RowsReadOnTwoThreadsAreTheRowsReadOnOne) {
  const std::string sweep = Submit(MakeSpec("big", {1, 2, 4}, 1000));  // 4,000 cells
  std::string w = Register();
  while (true) {
    std::vector<Task> tasks = Acquire(w, 1, 1024);
    if (tasks.empty()) break;
    std::vector<CellResult> results;
    for (const LeasedCell& c : tasks[0].cells) {
      results.push_back(CellResult{c.cell_id, c.lease_id,
                                   MakeResult(c.seed, static_cast<double>(c.seed % 7) / 8)});
    }
    ASSERT_TRUE(coordinator_->Complete(w, results).ok());
  }
  CoordinatorOptions one_thread, two_threads;
  one_thread.two_thread_query_rows = 0;
  two_threads.two_thread_query_rows = 1;
  Coordinator one(store_.get(), &clock_, one_thread);
  Coordinator two(store_.get(), &clock_, two_threads);
  // Every row (cell id, seed, train error) of `query`, page by page.
  auto rows = [&](Coordinator& c, ResultQuery query, int* pages) {
    std::vector<std::tuple<int64_t, uint64_t, double>> got;
    *pages = 0;
    while (true) {
      auto out = c.Query(query);
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) break;
      ++*pages;
      for (const ResultRow& r : out->rows) {
        got.emplace_back(r.cell_id, r.seed, r.result.has_value() ? r.result->train.error : -1);
      }
      if (out->next_after_cell_id == 0) break;
      query.after_cell_id = out->next_after_cell_id;
    }
    return got;
  };
  ResultQuery all{sweep};
  ResultQuery pages_of_3000{sweep};
  pages_of_3000.page_size = 3000;
  ResultQuery pages_of_7{sweep};
  pages_of_7.page_size = 7;
  pages_of_7.seeds = {5, 500, 999};
  ResultQuery kernel_only{sweep};
  kernel_only.head = "kernel/elu1";
  kernel_only.page_size = 2100;
  const struct {
    const ResultQuery* query;
    size_t rows;
    int pages;
  } cases[] = {{&all, 4000, 1}, {&pages_of_3000, 4000, 2}, {&pages_of_7, 12, 2},
               {&kernel_only, 3000, 2}};
  for (const auto& c : cases) {
    int one_pages = 0, two_pages = 0;
    const auto want = rows(one, *c.query, &one_pages);
    const auto got = rows(two, *c.query, &two_pages);
    EXPECT_EQ(want.size(), c.rows);
    EXPECT_EQ(one_pages, c.pages);
    EXPECT_EQ(got, want);
    EXPECT_EQ(two_pages, one_pages);
  }
  // A damaged packed row in the second chunk fails both reads alike.
  int64_t damaged = 0;
  ASSERT_TRUE(store_
                  ->Write([&](Connection& c) -> absl::Status {
                    ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT MIN(cell_id) + 3000 FROM "
                                                            "result_packs WHERE sweep_id = ?1"));
                    q.Bind(1, sweep);
                    ASSIGN_OR_RETURN(bool row, q.Step());
                    if (row) damaged = q.ColumnInt(0);
                    ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE result_packs SET packed = "
                                                            "x'02' WHERE cell_id = ?1"));
                    u.Bind(1, damaged);
                    return u.Run();
                  })
                  .ok());
  for (Coordinator* c : {&one, &two}) {
    auto out = c->Query(all);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal);
    EXPECT_EQ(out.status().message(),
              absl::StrCat("result of cell ", damaged,
                           ": packed result row: unknown version 2 (1 bytes)"));
  }
}

TEST_F(CoordinatorTest, SearchModeStopsAtTheTopRankWhenNothingIsExact) {
  SweepSpec spec = MakeSpec("never", {1, 2, 4, 8}, 1, 0, /*with_softmax=*/false);
  spec.mode = SweepMode::kSearch;
  auto sub = coordinator_->Submit(spec, "local");
  ASSERT_TRUE(sub.ok()) << sub.status();
  std::string w = Register();
  std::vector<int> probed;
  while (true) {
    std::vector<Task> tasks = Acquire(w, 1, 64);
    if (tasks.empty()) break;
    probed.push_back(tasks[0].rank);
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(tasks[0], 1.0)).ok());
  }
  EXPECT_THAT(probed, ::testing::ElementsAre(2, 4, 8));
  SweepInfo info = Get(sub->sweep_id);
  EXPECT_EQ(info.state, SweepState::kDone);
  EXPECT_EQ(info.counts.total, 3);
  EXPECT_EQ(info.grid_cells, 4);
}

// ------------------------------------------------------------------ durability

TEST_F(CoordinatorTest, ResultsAreDurableAcrossCloseAndReopen) {
  std::string sweep = Submit(MakeSpec("durable", {1}, 4, 0, false));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 2);
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(tasks[0], 0.125)).ok());
  Open();  // a new process on the same file
  auto q = coordinator_->Query(ResultQuery{sweep});
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->rows.size(), 2u);
  EXPECT_DOUBLE_EQ(q->rows[0].result->train.error, 0.125);
  EXPECT_EQ(q->rows[0].worker_id, w);
  EXPECT_EQ(Get(sweep).counts.done, 2);
}

TEST_F(CoordinatorTest, RecoveryKeepsLiveLeasesAndLosesOrDuplicatesNoCell) {
  std::string sweep = Submit(MakeSpec("restart", {1, 2}, 2, 0, false));  // 4 cells
  std::string w = Register();
  std::vector<Task> done = Acquire(w, 1, 64);     // rank 1: 2 cells
  std::vector<Task> inflight = Acquire(w, 1, 64); // rank 2: 2 cells
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(done[0])).ok());
  const int64_t last_lease = inflight[0].cells.back().lease_id;

  Open();
  auto report = coordinator_->Recover();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->running_sweeps, 1);
  EXPECT_EQ(report->pending_cells, 0);
  EXPECT_EQ(report->leases_kept, 2);
  EXPECT_EQ(report->leases_expired, 0);
  // The surviving worker carries on under its leases.
  auto hb = coordinator_->Heartbeat(w, LeaseIds(inflight[0]));
  ASSERT_TRUE(hb.ok());
  EXPECT_THAT(hb->lost_lease_ids, IsEmpty());
  auto out = coordinator_->Complete(w, ResultsFor(inflight[0]));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->recorded, 2);
  EXPECT_EQ(Get(sweep).state, SweepState::kDone);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 4);
  EXPECT_EQ(Count("SELECT COUNT(DISTINCT cell_id) FROM results"), 4);

  // Lease ids keep growing across the restart.
  std::string other = Submit(MakeSpec("after", {1}, 1, 0, false));
  std::vector<Task> next = Acquire(w);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_GT(next[0].cells[0].lease_id, last_lease);
}

TEST_F(CoordinatorTest, RecoveryExpiresLeasesWhoseDeadlinePassedWhileDown) {
  std::string sweep = Submit(MakeSpec("restart", {1}, 3, 0, false));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 2);
  Open();
  clock_.AdvanceMs(kLeaseMs + 1);
  auto report = coordinator_->Recover();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->leases_expired, 2);
  EXPECT_EQ(report->leases_kept, 0);
  EXPECT_EQ(report->pending_cells, 3);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 3);
  // The old worker's completion is stale now; the cells run again as attempt 2.
  EXPECT_EQ(coordinator_->Complete(w, ResultsFor(tasks[0])).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<Task> again = Acquire(w, 1, 64);
  ASSERT_EQ(again[0].cells.size(), 3u);
  EXPECT_EQ(again[0].cells[0].attempt, 2);
  EXPECT_EQ(again[0].cells[2].attempt, 1);
}

TEST_F(CoordinatorTest, ReRegisteringWorkerReleasesItsLeasesWithoutUsingAnAttempt) {
  std::string sweep = Submit(MakeSpec("one", {1}, 2, 0, false));
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w);
  WorkerRegistration reg;
  reg.worker_id = w;
  reg.hostname = "host";
  reg.slots = 2;
  auto id = coordinator_->RegisterWorker(reg);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, w);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 2);
  EXPECT_EQ(Count("SELECT MAX(attempt) FROM cells"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM workers"), 1);
  EXPECT_EQ(Count("SELECT slots FROM workers"), 2);
}

TEST_F(CoordinatorTest, WritesProceedWhileAnotherConnectionHoldsAReadTransaction) {
  std::string sweep = Submit(MakeSpec("grid"));
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open_v2(dir_.File("coordinator.db").c_str(), &reader, SQLITE_OPEN_READONLY,
                            nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT COUNT(*) FROM cells;", nullptr, nullptr, nullptr),
            SQLITE_OK);
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 4);
  ASSERT_EQ(tasks.size(), 1u);
  auto out = coordinator_->Complete(w, ResultsFor(tasks[0]));
  EXPECT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Cells(sweep, CellState::kDone), 4);
  sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(reader);
}

// ------------------------------------------------------------------ listeners

TEST_F(CoordinatorTest, ListenersSeeCommittedChangesUntilUnsubscribed) {
  std::string sweep = Submit(MakeSpec("watch", {1}, 2, 0, false));
  std::vector<SweepChange> seen;
  int64_t sub = coordinator_->Subscribe(sweep, [&](const SweepChange& c) {
    // Listeners see the change already committed.
    EXPECT_TRUE(coordinator_->GetSweep(sweep).ok());
    seen.push_back(c);
  });
  int work_calls = 0;
  coordinator_->SetWorkListener([&] { ++work_calls; });
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w);
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(tasks[0])).ok());
  ASSERT_EQ(seen.size(), 4u);  // leased, done, done, sweep done
  EXPECT_THAT(seen[0].message, HasSubstr("leased"));
  EXPECT_THAT(seen[1].message, HasSubstr("seed=0 done"));
  EXPECT_FALSE(seen[2].final);
  EXPECT_TRUE(seen[3].final);
  EXPECT_THAT(seen[3].message, HasSubstr("done"));

  coordinator_->Unsubscribe(sub);
  Submit(MakeSpec("more"));
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(work_calls, 1);  // the second submit made work available
}

// ------------------------------------------------------------------ result validation

TEST_F(CoordinatorTest, AnImpossibleResultFailsTheWholeCallAndStoresNothing) {
  std::string sweep = Submit(MakeSpec("checked", {1}, 2, 0, false));
  std::string w = Register();
  auto tasks = coordinator_->Acquire(w, 1, 64);
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 1u);
  const Task& t = (*tasks)[0];
  std::vector<CellResult> results = ResultsFor(t);
  results[1].result.train.exact_accuracy = std::nan("");
  auto out = coordinator_->Complete(w, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            absl::StrCat("results[1] for cell ", t.cells[1].cell_id,
                         " (kernel/elu1 r=1 seed=1): result.train.exact_accuracy must be in "
                         "[0, 1], got nan"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM result_groups"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE state = 2"), 2);

  // Steps beyond the sweep's max_steps (2000 by default) and an empty
  // result are refused the same way.
  results = ResultsFor(t);
  results[0].result.steps = 2001;
  out = coordinator_->Complete(w, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("result.steps must be in 0..2000, got 2001"));
  results = ResultsFor(t);
  results[0].result = SeedResult();
  out = coordinator_->Complete(w, results);
  EXPECT_THAT(out.status().message(),
              HasSubstr("result.train.sequences must be in 1..9223372036854775807, got 0"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);

  // The same leases then take valid results.
  out = coordinator_->Complete(w, ResultsFor(t));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->recorded, 2);
  EXPECT_EQ(coordinator_->GetSweep(sweep)->state, SweepState::kDone);
}

TEST_F(CoordinatorTest, WorkerTextIsHeldToItsLimitsAndEchoedClipped) {
  WorkerRegistration reg;
  reg.hostname = std::string(1 << 20, 'h');
  reg.device = "cpu";
  auto id = coordinator_->RegisterWorker(reg);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(id.status().message(), "hostname must be at most 256 bytes, got 1048576");
  reg.hostname = "h";
  reg.version.build_id = std::string(257, 'b');
  EXPECT_EQ(coordinator_->RegisterWorker(reg).status().message(),
            "version.build_id must be at most 256 bytes, got 257");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM workers"), 0);

  Submit(MakeSpec("text", {1}, 1, 0, false));
  std::string w = Register();
  auto tasks = coordinator_->Acquire(w, 1, 64);
  ASSERT_TRUE(tasks.ok());
  absl::Status fail = coordinator_->Fail(w, LeaseIds((*tasks)[0]), std::string(5000, 'r'), false);
  EXPECT_EQ(fail.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fail.message(), "reason must be at most 4096 bytes, got 5000");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE state = 2"), 1);  // still leased

  auto sweep = coordinator_->GetSweep(std::string(7000, 's'));
  EXPECT_EQ(sweep.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(sweep.status().message(), "no sweep " + std::string(200, 's') + "... (7000 bytes)");
  auto unknown = coordinator_->Acquire(std::string(7000, 'w'), 1, 1);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_LT(unknown.status().message().size(), 260u);
}

TEST_F(ResultCacheTest, AStoredRowThatIsNotValidIsNeverServed) {
  auto coord = WithCodeVersion("0.1.0+abc");
  std::string w = Register();
  auto first = coord->Submit(MakeSpec("a", {1}, 2, 0, false), "local");
  ASSERT_TRUE(first.ok());
  TrainEverything(*coord, w);
  // A row stored before results were checked: seed 0's exact accuracy NaN,
  // in its columns and in its packed copy.
  ASSERT_TRUE(store_
                  ->Write([&](Connection& c) -> absl::Status {
                    ASSIGN_OR_RETURN(Statement q,
                                     c.Prepare("SELECT cell_id, packed FROM result_packs "
                                               "ORDER BY cell_id LIMIT 1"));
                    ASSIGN_OR_RETURN(bool row, q.Step());
                    if (!row) return absl::NotFoundError("no row");
                    const int64_t cell = q.ColumnInt(0);
                    ResultRow r;
                    RETURN_IF_ERROR(UnpackResultRow(q.ColumnBlob(1), &r));
                    r.result->train.exact_accuracy = std::nan("");
                    ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE result_packs SET packed = ?2 "
                                                            "WHERE cell_id = ?1"));
                    u.Bind(1, cell).BindBlob(2, PackResultRow(r));
                    return u.Run();
                  })
                  .ok());
  auto again = coord->Submit(MakeSpec("b", {1}, 2, 0, false), "local");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cells, 2);
  EXPECT_EQ(again->cached_cells, 1);  // seed 1 only; seed 0 trains again
  EXPECT_EQ(coord->GetSweep(again->sweep_id)->counts.pending, 1);
}

// ------------------------------------------------------------------ quarantine

class QuarantineTest : public ResultCacheTest {
 protected:
  // Sweep "a" (kernel r=1, 4 seeds): seeds 0, 1 trained by `bad_`, seeds 2,
  // 3 by `good_`; then sweep "b", the same cells, all four served from the
  // cache. Both end DONE.
  void SetUp() override {
    ResultCacheTest::SetUp();
    coord_ = WithCodeVersion("0.1.0+abc");
    bad_ = Register("bad-gpu");
    good_ = Register("good-gpu");
    auto a = coord_->Submit(MakeSpec("a", {1}, 4, 0, false), "alice");
    ASSERT_TRUE(a.ok());
    a_ = a->sweep_id;
    for (const std::string* w : {&bad_, &good_}) {
      auto tasks = coord_->Acquire(*w, 1, 2);
      ASSERT_TRUE(tasks.ok());
      ASSERT_EQ(tasks->size(), 1u);
      ASSERT_TRUE(coord_->Complete(*w, ResultsFor((*tasks)[0], w == &bad_ ? 0.5 : 0.0)).ok());
    }
    clock_.AdvanceMs(1000);
    auto b = coord_->Submit(MakeSpec("b", {1}, 4, 0, false), "bob");
    ASSERT_TRUE(b.ok());
    ASSERT_EQ(b->cached_cells, 4);
    b_ = b->sweep_id;
  }

  ResultGroup Group(const std::string& sweep) {
    ResultQuery q{sweep};
    q.group_by = GroupBy::kHeadRank;
    auto out = coord_->Query(q);
    EXPECT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->groups.size(), 1u);
    return out->groups.empty() ? ResultGroup() : out->groups[0];
  }

  std::unique_ptr<Coordinator> coord_;
  std::string bad_, good_, a_, b_;
};

TEST_F(QuarantineTest, TakesBackAWorkersResultsAndTheirCopiesAndTrainsTheCellsAgain) {
  ASSERT_EQ(coord_->GetSweep(a_)->state, SweepState::kDone);
  ASSERT_EQ(Count("SELECT COUNT(*) FROM results"), 8);
  EXPECT_DOUBLE_EQ(Group(a_).train_error.mean, 0.25);

  clock_.AdvanceMs(1000);
  auto out = coord_->Quarantine(bad_, 0, "ops");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->quarantine_id, 1);
  EXPECT_EQ(out->results_invalidated, 2);
  EXPECT_EQ(out->copies_invalidated, 2);
  EXPECT_EQ(out->cells_reset, 4);
  EXPECT_THAT(out->sweeps_reopened, ::testing::UnorderedElementsAre(a_, b_));

  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 4);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM result_packs"), 4);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invalid_results"), 4);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM quarantines WHERE worker_id = '" + bad_ +
                  "' AND by = 'ops' AND results = 2 AND copies = 2 AND cells_reset = 4"),
            1);
  for (const std::string& sweep : {a_, b_}) {
    auto info = coord_->GetSweep(sweep);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->state, SweepState::kRunning);
    EXPECT_EQ(info->finished_unix_ms, 0);
    EXPECT_EQ(info->counts.done, 2);
    EXPECT_EQ(info->counts.pending, 2);
    // The groups count the good worker's rows only.
    ResultGroup g = Group(sweep);
    EXPECT_EQ(g.n, 2);
    EXPECT_EQ(g.exact_seeds, 2);
    EXPECT_DOUBLE_EQ(g.train_error.mean, 0.0);
    EXPECT_DOUBLE_EQ(g.train_error.max, 0.0);
    EXPECT_THAT(g.missing_seeds, ElementsAre(0u, 1u));
  }
  EXPECT_EQ(coord_->GetSweep(b_)->cached_cells, 2);

  // The invalid rows stay queryable, by themselves, with who and when.
  ResultQuery invalid{a_};
  invalid.state = CellState::kInvalid;
  auto rows = coord_->Query(invalid);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows.size(), 2u);
  for (const ResultRow& r : rows->rows) {
    EXPECT_EQ(r.state, CellState::kInvalid);
    EXPECT_EQ(r.head, "kernel/elu1");  // labelled, though stored by index
    EXPECT_EQ(r.worker_id, bad_);
    ASSERT_TRUE(r.result.has_value());
    EXPECT_EQ(r.result->train.error, 0.5);
    EXPECT_THAT(r.failure, HasSubstr("by ops: quarantine 1 of worker " + bad_));
  }
  EXPECT_EQ(coord_->Query(ResultQuery{a_})->rows.size(), 2u);  // valid rows only
  invalid.group_by = GroupBy::kHeadRank;
  EXPECT_EQ(coord_->Query(invalid).status().code(), absl::StatusCode::kInvalidArgument);

  // A new sweep of the same cells is served only the good worker's rows.
  auto c = coord_->Submit(MakeSpec("c", {1}, 4, 0, false), "carol");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cached_cells, 2);

  // The cells go out again under new leases, as new attempts, and the
  // sweeps end DONE once trained.
  std::string fixed = Register("fixed-gpu");
  int leased = 0;
  while (true) {
    auto tasks = coord_->Acquire(fixed, 8, 64);
    ASSERT_TRUE(tasks.ok());
    if (tasks->empty()) break;
    for (const Task& t : *tasks) {
      leased += static_cast<int>(t.cells.size());
      ASSERT_TRUE(coord_->Complete(fixed, ResultsFor(t, 0.0)).ok());
    }
  }
  EXPECT_EQ(leased, 6);  // a: 2, b: 2, c: 2
  // a's cells took a second attempt under a new lease; the invalid rows
  // keep the first one's.
  auto a_rows = coord_->Query(ResultQuery{a_});
  ASSERT_TRUE(a_rows.ok());
  ASSERT_EQ(a_rows->rows.size(), 4u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(a_rows->rows[i].worker_id, fixed);
    EXPECT_EQ(a_rows->rows[i].attempt, 2);
    EXPECT_GT(a_rows->rows[i].lease_id, rows->rows[i].lease_id);
    EXPECT_EQ(rows->rows[i].attempt, 1);
  }
  for (const std::string& sweep : {a_, b_, c->sweep_id}) {
    EXPECT_EQ(coord_->GetSweep(sweep)->state, SweepState::kDone);
    EXPECT_EQ(Group(sweep).n, 4);
    EXPECT_EQ(Group(sweep).exact_seeds, 4);
  }
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invalid_results"), 4);
}

TEST_F(QuarantineTest, SinceKeepsEarlierResultsAndUnknownWorkersAreNotFound) {
  auto out = coord_->Quarantine(bad_, clock_.NowMs() + 1, "ops");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->results_invalidated, 0);
  EXPECT_EQ(out->cells_reset, 0);
  EXPECT_THAT(out->sweeps_reopened, IsEmpty());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 8);
  EXPECT_EQ(coord_->GetSweep(a_)->state, SweepState::kDone);

  EXPECT_EQ(coord_->Quarantine("wk-nobody", 0, "ops").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(coord_->Quarantine(bad_, -1, "ops").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM quarantines"), 1);  // the first call's record
}

TEST_F(QuarantineTest, CellsOfACancelledSweepStayCancelled) {
  // A third sweep, still running with two cells copied and two pending, is
  // cancelled; then the quarantine takes back its copies.
  auto d = coord_->Submit(MakeSpec("d", {1}, 6, 0, false), "dave");
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->cached_cells, 4);
  ASSERT_TRUE(coord_->Cancel(d->sweep_id).ok());
  auto out = coord_->Quarantine(bad_, 0, "ops");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->copies_invalidated, 4);  // b's two and d's two
  EXPECT_EQ(out->cells_reset, 4);         // a's and b's; d's stay cancelled
  auto info = coord_->GetSweep(d->sweep_id);
  EXPECT_EQ(info->state, SweepState::kCancelled);
  EXPECT_EQ(info->counts.cancelled, 4);
  EXPECT_EQ(info->counts.done, 2);
  EXPECT_EQ(Group(d->sweep_id).n, 2);
}

}  // namespace
}  // namespace ranksweep::server
