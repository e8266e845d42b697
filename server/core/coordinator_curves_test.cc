// Learning curves through the coordinator: stored with their result, read
// back with rows when asked, a cached row's from its source, refused when
// impossible, gone with a quarantine and with the sweep.
#include <string>
#include <vector>

#include "server/core/coordinator_test_fixture.h"
#include "server/core/sweeps/sweep_admin.h"

namespace ranksweep::server {
namespace {

// Two evaluations of a 100-step run at eval_every 50.
Curve TwoPoints(uint64_t seed) {
  Curve c;
  const float s = static_cast<float>(seed);
  c.points = {{50, 0.5f + s, 0.75f, 0.5f}, {100, 0.25f, 0.25f, 0.875f}};
  return c;
}

std::vector<CellResult> WithCurves(const Task& task) {
  std::vector<CellResult> out = ResultsFor(task, 0.25);
  for (CellResult& r : out) r.result.curve = TwoPoints(r.result.seed);
  return out;
}

class CurvesTest : public ResultCacheTest {
 protected:
  void TrainWithCurves(Coordinator& c, const std::string& worker) {
    while (true) {
      auto tasks = c.Acquire(worker, 8, 64);
      ASSERT_TRUE(tasks.ok()) << tasks.status();
      if (tasks->empty()) return;
      for (const Task& t : *tasks) ASSERT_TRUE(c.Complete(worker, WithCurves(t)).ok());
    }
  }

  std::vector<ResultRow> Rows(Coordinator& c, const std::string& sweep, bool curves) {
    ResultQuery q{sweep};
    q.curves = curves;
    auto out = c.Query(q);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->rows : std::vector<ResultRow>{};
  }
};

TEST_F(CurvesTest, StoredWithTheResultAndReadBackOnlyWhenAsked) {
  auto coord = WithCodeVersion("0.1.0+abc");
  const std::string w = Register();
  auto a = coord->Submit(MakeSpec("a", {1, 2}, 2), "local");
  ASSERT_TRUE(a.ok()) << a.status();
  TrainWithCurves(*coord, w);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results WHERE curve IS NOT NULL"), 6);

  for (const ResultRow& row : Rows(*coord, a->sweep_id, false)) {
    ASSERT_TRUE(row.result.has_value());
    EXPECT_TRUE(row.result->curve.points.empty()) << "cell " << row.cell_id;
  }
  const std::vector<ResultRow> rows = Rows(*coord, a->sweep_id, true);
  ASSERT_EQ(rows.size(), 6u);
  for (const ResultRow& row : rows) {
    ASSERT_TRUE(row.result.has_value());
    EXPECT_EQ(row.result->curve, TwoPoints(row.seed)) << "cell " << row.cell_id;
  }

  // An identical sweep is served from the cache: its rows read the
  // source's curves, stored once.
  auto b = coord->Submit(MakeSpec("b", {1, 2}, 2), "local");
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->cached_cells, 6);
  const std::vector<ResultRow> copies = Rows(*coord, b->sweep_id, true);
  ASSERT_EQ(copies.size(), 6u);
  for (const ResultRow& row : copies) {
    EXPECT_NE(row.cached_from_cell_id, 0);
    EXPECT_EQ(row.result->curve, TwoPoints(row.seed)) << "cell " << row.cell_id;
  }
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results WHERE curve IS NOT NULL"), 6);

  ResultQuery grouped{a->sweep_id};
  grouped.group_by = GroupBy::kHeadRank;
  grouped.curves = true;
  auto refused = coord->Query(grouped);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "curves: learning curves come with rows; query them without group_by");
}

TEST_F(CurvesTest, AnImpossibleCurveIsRefusedAndNothingOfTheCallStored) {
  const std::string w = Register();
  Submit(MakeSpec("a", {1}, 1));
  std::vector<Task> tasks = Acquire(w);
  ASSERT_EQ(tasks.size(), 1u);
  std::vector<CellResult> results = WithCurves(tasks[0]);
  results[0].result.curve.points[1].step = 150;  // the run took 100 steps
  auto out = coordinator_->Complete(w, results);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              ::testing::HasSubstr(
                  "result.curve.points[1].step must be at most steps (100), got 150"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results WHERE curve IS NOT NULL"), 0);
}

TEST_F(CurvesTest, AQuarantineAndADeleteTakeTheCurvesWithTheirResults) {
  const std::string w = Register();
  const std::string a = Submit(MakeSpec("a", {1, 2}, 2));
  TrainWithCurves(*coordinator_, w);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results WHERE curve IS NOT NULL"), 6);
  auto q = coordinator_->Quarantine(w, 0, "admin");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results WHERE curve IS NOT NULL"), 0);

  ASSERT_TRUE(coordinator_->Unquarantine(w, "admin").ok());
  const std::string w2 = Register("host2");
  TrainWithCurves(*coordinator_, w2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results WHERE curve IS NOT NULL"), 6);
  SweepAdmin admin(store_.get(), coordinator_.get());
  auto deleted = admin.Delete(a, a);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results WHERE curve IS NOT NULL"), 0);
}

}  // namespace
}  // namespace ranksweep::server
