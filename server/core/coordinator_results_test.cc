// Reading results back: rows with their provenance, every result field
// through the store, grouped aggregates (from the rows and from the running
// aggregates), the criterion and filters. Pages are in
// coordinator_rows_test.cc, search-mode sweeps in coordinator_search_test.cc.
#include <string>
#include <vector>

#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

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
  // A pool dataset, so that a result may have a test split.
  SweepSpec spec = WithTestSplit(MakeSpec("fields", {1}, 2, 0, false));
  spec.dataset.train_size = 276;
  spec.dataset.test_size = 50;
  std::string sweep = Submit(spec);
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 64);
  ASSERT_EQ(tasks.size(), 1u);
  std::vector<CellResult> results;
  for (const LeasedCell& c : tasks[0].cells) {
    SeedResult r;
    r.seed = c.seed;
    r.train = {276, 0.75, 0.5, 0.5, 1.25};
    // Both seeds have the dataset's test split (a result without one, whose
    // test_error is stored as NULL and reads back as the default 1, is an
    // exhaustive dataset's: MakeSpec's, in the other tests).
    r.test = c.seed == 0 ? SplitMetrics{50, 0.875, 0.625, 0.375, 2.5}
                         : SplitMetrics{50, 0.5, 0.25, 0.75, 1.5};
    r.final_loss = 0.0625;
    r.steps = 1234;
    r.wall_seconds = 3.25;
    r.device = "cuda:0 (NVIDIA H200)";
    r.facts = {276, 50, 4, 0, 0};  // no rank bounds: not a witness family
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
  std::string sweep = Submit(WithTestSplit(MakeSpec("agg", {1, 2}, 3)));
  std::string w = Register();
  // Group (kernel, r=1): train errors 0, 0.25, 0.5; test errors 0.1, 0.2, 0.3.
  std::vector<Task> tasks = Acquire(w, 1, 64);
  ASSERT_EQ(tasks[0].rank, 1);
  std::vector<CellResult> results;
  const double train[] = {0, 0.25, 0.5};
  const double test[] = {0.1, 0.2, 0.3};
  for (size_t i = 0; i < 3; ++i) {
    const LeasedCell& c = tasks[0].cells[i];
    results.push_back(CellResult{c.cell_id, c.lease_id, MakeResult(c.seed, train[i], test[i], 40)});
  }
  ASSERT_TRUE(coordinator_->Complete(w, results).ok());
  // Group (kernel, r=2): one seed done out of 3, exact on both splits.
  tasks = Acquire(w, 1, 1);
  ASSERT_EQ(tasks[0].rank, 2);
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(tasks[0], 0.0, 40)).ok());

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
  EXPECT_DOUBLE_EQ(g.BuiltIn("train_error").mean, 0.25);
  EXPECT_DOUBLE_EQ(g.BuiltIn("train_error").std, 0.25);
  EXPECT_DOUBLE_EQ(g.BuiltIn("train_error").min, 0.0);
  EXPECT_DOUBLE_EQ(g.BuiltIn("train_error").max, 0.5);
  EXPECT_NEAR(g.BuiltIn("train_error").ci95, 4.303 * 0.25 / std::sqrt(3.0), 1e-12);
  EXPECT_NEAR(g.BuiltIn("test_error").mean, 0.2, 1e-12);
  EXPECT_NEAR(g.BuiltIn("test_error").std, 0.1, 1e-12);
  EXPECT_NEAR(g.BuiltIn("train_exact_accuracy").mean, 0.75, 1e-12);
  EXPECT_NEAR(g.BuiltIn("train_position_accuracy").mean, 0.875, 1e-12);

  const ResultGroup& g2 = q->groups[1];
  EXPECT_EQ(g2.rank, 2);
  EXPECT_EQ(g2.n, 1);
  EXPECT_EQ(g2.expected, 3);
  EXPECT_EQ(g2.exact_seeds, 1);
  EXPECT_DOUBLE_EQ(g2.BuiltIn("train_error").mean, 0.0);
  EXPECT_DOUBLE_EQ(g2.BuiltIn("train_error").std, 0.0);
  EXPECT_DOUBLE_EQ(g2.BuiltIn("train_error").ci95, 0.0);
  EXPECT_DOUBLE_EQ(g2.BuiltIn("test_error").mean, 0.0);

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
  std::string sweep = Submit(WithWitnessFamily(MakeSpec("transition", {1, 2, 4}, 2)));
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
      r.train.sequences = 276;
      r.facts.train_sequences = 276;
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
  // varied errors on both splits; two cells failed for
  // good, one leased, the rest pending.
  std::string sweep = Submit(WithTestSplit(MakeSpec("agree", {1, 2}, 6)));
  std::string w = Register();
  int k = 0;
  for (const Task& t : Acquire(w, 3, 4)) {
    std::vector<CellResult> results;
    for (const LeasedCell& c : t.cells) {
      ++k;
      const double train = (k % 5) * 0.125;
      results.push_back(CellResult{c.cell_id, c.lease_id,
                                   MakeResult(c.seed, train, (k % 3) * 0.3, 40)});
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
    for (size_t m = 0; m < a.built_ins.size(); ++m) {
      const Aggregate* x = &a.built_ins[m];
      const Aggregate* y = &b.built_ins[m];
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

}  // namespace
}  // namespace ranksweep::server
