// The fixture the coordinator's test files share (one binary, a file per
// area: leases, completion, results, rows, search mode, cache, recovery): a
// Coordinator on a real SQLite file in a fresh directory, a manual clock,
// and helpers that submit, register, lease and count exactly.
// Tests only.
#ifndef RANKSWEEP_SERVER_CORE_COORDINATOR_TEST_FIXTURE_H_
#define RANKSWEEP_SERVER_CORE_COORDINATOR_TEST_FIXTURE_H_

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
#include "common/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/clock.h"
#include "server/core/log.h"
#include "server/core/results/packed_row.h"
#include "server/core/store.h"
#include "tests/support/result_row.h"
#include "tests/support/seed_result.h"

namespace ranksweep::server {

inline constexpr int64_t kLeaseMs = 10'000;

using ::ranksweep::TempDir;

// Exhaustive m=2, N=3; a kernel head and a softmax head unless told otherwise.
inline SweepSpec MakeSpec(const std::string& name, std::vector<int> ranks = {1, 2, 4},
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

// `spec` with a pool dataset that has a test split (64 train sequences, at
// most 40 test ones), for tests of test metrics: only a pool dataset has one.
inline SweepSpec WithTestSplit(SweepSpec spec) {
  spec.dataset.kind = DatasetKind::kPool;
  spec.dataset.m = 8;  // 256 vectors: room for a pool of 64
  spec.dataset.pool_size = 64;
  spec.dataset.test_pool_share = 0.25;
  spec.dataset.train_size = 64;
  spec.dataset.test_size = 40;
  return spec;
}

// `spec` with a witness family of 12 queries (12 * 23 = 276 train
// sequences, no test split), for tests of the theory bounds' facts.
inline SweepSpec WithWitnessFamily(SweepSpec spec) {
  spec.dataset.kind = DatasetKind::kWitness;
  spec.dataset.m = 24;  // the octads: a code of 759 words, 12 of them used
  spec.dataset.seq_len = 3;
  spec.dataset.code_weight = 8;
  spec.dataset.max_overlap = 4;
  spec.dataset.num_queries = 12;
  return spec;
}

inline SeedResult MakeResult(uint64_t seed, double train_error, double test_error = 0,
                      int64_t test_sequences = 0) {
  SeedResult r;
  r.seed = seed;
  r.train.sequences = 64;
  r.facts.train_sequences = 64;  // MakeSpec's dataset: 2^(2*3) sequences
  r.facts.test_sequences = test_sequences;
  r.final_loss = train_error / 4;  // 0 only when exact, as a real run's
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

// `test_sequences`: the test split of a pool dataset (WithTestSplit's 40).
inline std::vector<CellResult> ResultsFor(const Task& task, double train_error = 0,
                                          int64_t test_sequences = 0) {
  std::vector<CellResult> out;
  for (const LeasedCell& c : task.cells) {
    out.push_back(CellResult{c.cell_id, c.lease_id,
                             MakeResult(c.seed, train_error, 0, test_sequences)});
  }
  return out;
}

inline std::vector<int64_t> LeaseIds(const Task& task) {
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
    return id.ok() ? id->worker_id : std::string();
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

class ResultCacheTest : public CoordinatorTest {
 protected:
  // A coordinator of build `version` (Register() reports "0.1.0+abc") that
  // also trusts `trusted` builds, with the cache shared between users or not.
  std::unique_ptr<Coordinator> WithCodeVersion(const std::string& version,
                                               std::vector<std::string> trusted = {},
                                               bool shared = false) {
    CoordinatorOptions options;
    options.lease_ms = kLeaseMs;
    options.code_version = version;
    options.trusted_builds = std::move(trusted);
    options.shared_cache = shared;
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

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_COORDINATOR_TEST_FIXTURE_H_
