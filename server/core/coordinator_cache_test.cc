// The result cache (cells served from identical earlier training) and
// quarantine (a worker's results taken back).
#include <string>
#include <vector>

#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// ------------------------------------------------------------------ result cache

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
    EXPECT_DOUBLE_EQ(g.BuiltIn("train_error").mean, 0.25);
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
  auto trained = coord->Submit(WithTestSplit(MakeSpec("a", {1, 2}, 3)), "local");
  ASSERT_TRUE(trained.ok()) << trained.status();
  int n = 0;
  while (true) {
    auto tasks = coord->Acquire(w, 1, 64);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    if (tasks->empty()) break;
    std::vector<CellResult> results;
    for (const LeasedCell& c : (*tasks)[0].cells) {
      // Every result has the pool's test split; rows without one come from
      // the exhaustive sweep "c" below.
      SeedResult r = MakeResult(c.seed, 0.125 * (n % 5), 0.125 * (n % 3), 40);
      r.train.max_abs_error = 0.01 * n;
      r.final_loss = 1.0 / (n + 1);
      r.wall_seconds = 1.0 + n;  // 1 .. 9 s
      r.facts = {64, 40, 4, 0, 0};  // a pool dataset has no rank bounds
      ++n;
      results.push_back(CellResult{c.cell_id, c.lease_id, r});
    }
    ASSERT_TRUE(coord->Complete(w, results).ok());
  }
  clock_.AdvanceMs(500);
  auto cached = coord->Submit(WithTestSplit(MakeSpec("b", {1, 2}, 3)), "local");
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

// "A lying worker claiming the current build fed another user's identical
// sweep": a build id is a worker's own claim, so the cache keeps each user
// to results trained for that user's sweeps unless the operator shares it.
TEST_F(ResultCacheTest, EachUserIsServedOnlyFromTheirOwnSweepsUnlessTheCacheIsShared) {
  auto coord = WithCodeVersion("0.1.0+abc");
  std::string w = Register();
  auto a = coord->Submit(MakeSpec("a", {1, 2}, 2), "alice");
  ASSERT_TRUE(a.ok());
  TrainEverything(*coord, w);
  ASSERT_EQ(Count("SELECT COUNT(*) FROM results"), 6);

  auto bob = coord->Submit(MakeSpec("b", {1, 2}, 2), "bob");
  ASSERT_TRUE(bob.ok());
  EXPECT_EQ(bob->cached_cells, 0);
  EXPECT_EQ(Cells(bob->sweep_id, CellState::kPending), 6);
  auto alice = coord->Submit(MakeSpec("a2", {1, 2}, 2), "alice");
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->cached_cells, 6);
  // Every copy names its source cell and the worker that trained it.
  auto a_rows = coord->Query(ResultQuery{a->sweep_id});
  auto copies = coord->Query(ResultQuery{alice->sweep_id});
  ASSERT_TRUE(a_rows.ok() && copies.ok());
  ASSERT_EQ(copies->rows.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(copies->rows[i].cached_from_cell_id, a_rows->rows[i].cell_id);
    EXPECT_EQ(copies->rows[i].worker_id, w);
  }

  // Shared (--shared-cache): bob's next identical sweep is served too.
  auto shared = WithCodeVersion("0.1.0+abc", {}, /*shared=*/true);
  auto bob2 = shared->Submit(MakeSpec("b2", {1, 2}, 2), "bob");
  ASSERT_TRUE(bob2.ok());
  EXPECT_EQ(bob2->cached_cells, 6);
}

TEST_F(ResultCacheTest, OnlyTheOwnBuildAndAdmittedBuildsAreServed) {
  auto old_build = WithCodeVersion("0.1.0+abc");
  std::string w = Register();  // reports 0.1.0+abc
  ASSERT_TRUE(old_build->Submit(MakeSpec("a", {1}, 2, 0, false), "local").ok());
  TrainEverything(*old_build, w);

  // A coordinator of a newer build serves nothing of 0.1.0+abc...
  auto newer = WithCodeVersion("0.2.0+def");
  auto plain = newer->Submit(MakeSpec("b", {1}, 2, 0, false), "local");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->cached_cells, 0);
  // ... unless an admin admitted it (--trusted-build); an admitted build
  // alone, with no own build, keeps the cache on.
  for (const std::string& own : {std::string("0.2.0+def"), std::string()}) {
    auto admitted = WithCodeVersion(own, {"0.9.9+zzz", "0.1.0+abc"});
    auto sub = admitted->Submit(MakeSpec("c", {1}, 2, 0, false), "local");
    ASSERT_TRUE(sub.ok());
    EXPECT_EQ(sub->cached_cells, 2) << own;
  }
}

// "A quarantine invalidates every copy" and a worker out of good standing
// feeds nothing: rows a quarantine kept (--since) are not served while it
// holds.
TEST_F(ResultCacheTest, AQuarantinedWorkersKeptRowsAreNotServedWhileItIsHeld) {
  auto coord = WithCodeVersion("0.1.0+abc");
  std::string w = Register();
  ASSERT_TRUE(coord->Submit(MakeSpec("a", {1}, 2, 0, false), "local").ok());
  TrainEverything(*coord, w);
  clock_.AdvanceMs(1000);
  auto out = coord->Quarantine(w, clock_.NowMs() + 1, "ops");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->results_invalidated, 0);
  ASSERT_EQ(Count("SELECT COUNT(*) FROM results"), 2);
  auto held = coord->Submit(MakeSpec("b", {1}, 2, 0, false), "local");
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->cached_cells, 0);
  ASSERT_TRUE(coord->Unquarantine(w, "ops").ok());
  auto lifted = coord->Submit(MakeSpec("c", {1}, 2, 0, false), "local");
  ASSERT_TRUE(lifted.ok());
  EXPECT_EQ(lifted->cached_cells, 2);
}

// ------------------------------------------------------------------ quarantine

class QuarantineTest : public ResultCacheTest {
 protected:
  // Sweep "a" (kernel r=1, 4 seeds): seeds 0, 1 trained by `bad_`, seeds 2,
  // 3 by `good_`; then sweep "b", the same cells, all four served from the
  // cache. Both end DONE.
  void SetUp() override {
    ResultCacheTest::SetUp();
    // Shared between users (--shared-cache), so that bob's sweep copies
    // alice's results and a quarantine must find copies in other users'
    // sweeps too.
    coord_ = WithCodeVersion("0.1.0+abc", {}, /*shared=*/true);
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
  EXPECT_DOUBLE_EQ(Group(a_).BuiltIn("train_error").mean, 0.25);

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
    EXPECT_DOUBLE_EQ(g.BuiltIn("train_error").mean, 0.0);
    EXPECT_DOUBLE_EQ(g.BuiltIn("train_error").max, 0.0);
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

  // The cells go out again under new leases, each starting its attempts
  // afresh (the quarantine's reset grants them), and the sweeps end DONE
  // once trained.
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
  // a's cells took a new lease, again as attempt 1; the invalid rows keep
  // the first one's.
  auto a_rows = coord_->Query(ResultQuery{a_});
  ASSERT_TRUE(a_rows.ok());
  ASSERT_EQ(a_rows->rows.size(), 4u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(a_rows->rows[i].worker_id, fixed);
    EXPECT_EQ(a_rows->rows[i].attempt, 1);
    EXPECT_NE(a_rows->rows[i].lease_id, rows->rows[i].lease_id);
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

TEST_F(QuarantineTest, TheQuarantineHoldsUntilItIsLiftedAndReleasesWhatTheWorkerHeld) {
  // bad_ holds two cells of a new sweep when the quarantine comes.
  auto e = coord_->Submit(MakeSpec("e", {1, 2}, 2, 0, false), "erin");
  ASSERT_TRUE(e.ok());
  auto held = coord_->Acquire(bad_, 1, 2);
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->size(), 1u);
  auto out = coord_->Quarantine(bad_, 0, "ops");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->leases_released, 2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE state = 2"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE state = 1 AND attempt > 0"), 0);

  // Held: no lease, no result, no registration under its id.
  EXPECT_EQ(coord_->Acquire(bad_, 1, 2).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(coord_->Complete(bad_, ResultsFor((*held)[0], 0.5)).status().code(),
            absl::StatusCode::kPermissionDenied);
  WorkerRegistration reg;
  reg.worker_id = bad_;
  reg.hostname = "h";
  EXPECT_EQ(coord_->RegisterWorker(reg).status().code(), absl::StatusCode::kPermissionDenied);
  auto workers = coord_->ListWorkers();
  ASSERT_TRUE(workers.ok());
  for (const WorkerInfo& w : *workers) {
    EXPECT_EQ(w.quarantined_unix_ms != 0, w.worker_id == bad_) << w.worker_id;
  }
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE state = 2"), 0);

  // Lifted: it leases again; lifting twice is harmless.
  EXPECT_EQ(*coord_->Unquarantine(bad_, "ops"), true);
  EXPECT_EQ(*coord_->Unquarantine(bad_, "ops"), false);
  EXPECT_EQ(coord_->Unquarantine("wk-nobody", "ops").status().code(), absl::StatusCode::kNotFound);
  auto again = coord_->Acquire(bad_, 1, 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->size(), 1u);
}

// `ranksweep workers quarantine W --token`: every worker of W's token, the
// ones registered and any registered later under a new id, is held with W
// until W is lifted; their results stay valid.
TEST_F(QuarantineTest, HoldingTheTokenHoldsEveryWorkerOfItUntilTheWorkerIsLifted) {
  auto reg = [&](const std::string& owner, const std::string& id = "") {
    WorkerRegistration r;
    r.worker_id = id;
    r.hostname = "h";
    r.device = "cpu";
    r.version = {"0.1.0+abc", "2.1.0", ""};
    r.owner = owner;
    return coord_->RegisterWorker(r);
  };
  auto liar = reg("pool-a");
  auto sibling = reg("pool-a");
  auto other = reg("pool-b");
  ASSERT_TRUE(liar.ok() && sibling.ok() && other.ok());
  ASSERT_TRUE(coord_->Submit(MakeSpec("e", {1, 2}, 2, 0, false), "erin").ok());
  auto held = coord_->Acquire(sibling->worker_id, 1, 2);
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->size(), 1u);

  // bad_ (no token) cannot have its token held; nothing is recorded.
  EXPECT_EQ(coord_->Quarantine(bad_, 0, "ops", true).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM quarantines"), 0);

  auto out = coord_->Quarantine(liar->worker_id, 0, "ops", /*hold_token=*/true);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->token_held, "pool-a");
  EXPECT_EQ(out->leases_released, 2);  // the sibling's
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE state = 2"), 0);
  for (const std::string& id : {sibling->worker_id, liar->worker_id}) {
    EXPECT_EQ(coord_->Acquire(id, 1, 2).status().code(), absl::StatusCode::kPermissionDenied)
        << id;
  }
  EXPECT_EQ(coord_->Complete(sibling->worker_id, ResultsFor((*held)[0], 0.0)).status().code(),
            absl::StatusCode::kPermissionDenied);
  auto fresh = reg("pool-a");
  EXPECT_EQ(fresh.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(fresh.status().message(),
              HasSubstr("ranksweep workers unquarantine " + liar->worker_id));
  EXPECT_EQ(reg("pool-a", sibling->worker_id).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Another token's worker is not held.
  auto theirs = coord_->Acquire(other->worker_id, 1, 2);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ(theirs->size(), 1u);
  auto workers = coord_->ListWorkers();
  ASSERT_TRUE(workers.ok());
  int marked = 0;
  for (const WorkerInfo& w : *workers) {
    if (w.token_held_by.empty()) continue;
    EXPECT_EQ(w.token_held_by, liar->worker_id);
    ++marked;
  }
  EXPECT_EQ(marked, 2);

  // Lifting the worker lifts its token: a new id registers and leases.
  EXPECT_EQ(*coord_->Unquarantine(liar->worker_id, "ops"), true);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM held_tokens"), 0);
  auto later = reg("pool-a");
  ASSERT_TRUE(later.ok()) << later.status();
  ASSERT_TRUE(coord_->Submit(MakeSpec("f", {4}, 2, 0, false), "erin").ok());
  auto leased = coord_->Acquire(sibling->worker_id, 1, 2);
  ASSERT_TRUE(leased.ok()) << leased.status();
  EXPECT_EQ(leased->size(), 1u);
}

}  // namespace
}  // namespace ranksweep::server
