// The optional metrics of common/spec/result_metrics.h through the
// coordinator: stored with their result, aggregated per group (the running
// aggregates of result_groups, and the same from the rows for a query that
// filters seeds), and filled in for groups stored before a metric had its
// columns.
#include <cmath>
#include <string>
#include <vector>

#include "common/spec/result_metrics.h"
#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

class MetricGroupsTest : public CoordinatorTest {
 protected:
  // One kernel group of four seeds with a test split: first_exact_step 100
  // and 40 on the two exact seeds, none on the others; final_test_loss
  // 0.5, 0.25, 0.125 and 0.625.
  std::string StoreFourSeeds() {
    const std::string sweep =
        Submit(WithTestSplit(MakeSpec("metrics", {1}, 4, 0, /*with_softmax=*/false)));
    const std::string w = Register();
    std::vector<Task> tasks = Acquire(w, 1, 64);
    EXPECT_EQ(tasks.size(), 1u);
    if (tasks.empty()) return sweep;
    const double train_error[] = {0, 0.5, 0, 0.25};
    const std::optional<double> first_exact[] = {100, std::nullopt, 40, std::nullopt};
    const double test_loss[] = {0.5, 0.25, 0.125, 0.625};
    std::vector<CellResult> results;
    for (const LeasedCell& c : tasks[0].cells) {
      const size_t i = static_cast<size_t>(c.seed);
      SeedResult r = MakeResult(c.seed, train_error[i], 0.25, 40);
      SetMetric("first_exact_step", first_exact[i], &r);
      SetMetric("final_test_loss", test_loss[i], &r);
      results.push_back(CellResult{c.cell_id, c.lease_id, r});
    }
    auto done = coordinator_->Complete(w, results);
    EXPECT_TRUE(done.ok()) << done.status();
    return sweep;
  }

  std::vector<ResultGroup> Groups(const std::string& sweep, std::vector<uint64_t> seeds = {}) {
    ResultQuery query{sweep};
    query.group_by = GroupBy::kHeadRank;
    query.seeds = std::move(seeds);
    auto q = coordinator_->Query(query);
    EXPECT_TRUE(q.ok()) << q.status();
    return q.ok() ? q->groups : std::vector<ResultGroup>{};
  }

  static void ExpectKnownAggregates(const ResultGroup& g) {
    ASSERT_EQ(g.metrics.size(), 2u);
    const MetricAggregate& exact = g.metrics[0];
    EXPECT_EQ(exact.name, "first_exact_step");
    EXPECT_EQ(exact.n, 2);  // the exact seeds
    EXPECT_NEAR(exact.aggregate.mean, 70, 1e-9);
    EXPECT_NEAR(exact.aggregate.std, std::sqrt(2 * 30.0 * 30.0), 1e-9);
    EXPECT_EQ(exact.aggregate.min, 40);
    EXPECT_EQ(exact.aggregate.max, 100);
    const MetricAggregate& loss = g.metrics[1];
    EXPECT_EQ(loss.name, "final_test_loss");
    EXPECT_EQ(loss.n, 4);
    EXPECT_NEAR(loss.aggregate.mean, 0.375, 1e-12);
    // Deviations 0.125, -0.125, -0.25, 0.25: squares sum to 0.15625.
    EXPECT_NEAR(loss.aggregate.std, std::sqrt(0.15625 / 3), 1e-12);
    EXPECT_EQ(loss.aggregate.min, 0.125);
    EXPECT_EQ(loss.aggregate.max, 0.625);
  }
};

TEST_F(MetricGroupsTest, EachGroupAggregatesEachMetricOverTheSeedsThatHaveIt) {
  const std::string sweep = StoreFourSeeds();
  const std::vector<ResultGroup> groups = Groups(sweep);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].n, 4);
  ExpectKnownAggregates(groups[0]);
  // Filtering seeds reads the rows instead of result_groups: the same.
  const std::vector<ResultGroup> from_rows = Groups(sweep, {0, 1, 2, 3});
  ASSERT_EQ(from_rows.size(), 1u);
  ExpectKnownAggregates(from_rows[0]);
  // Seeds 1 and 3: never exact, so no first exact step at all.
  const std::vector<ResultGroup> inexact = Groups(sweep, {1, 3});
  ASSERT_EQ(inexact.size(), 1u);
  ASSERT_EQ(inexact[0].metrics.size(), 2u);
  EXPECT_EQ(inexact[0].metrics[0].n, 0);
  EXPECT_EQ(inexact[0].metrics[0].aggregate.mean, 0);
  EXPECT_EQ(inexact[0].metrics[1].n, 2);
  EXPECT_NEAR(inexact[0].metrics[1].aggregate.mean, 0.4375, 1e-12);
}

TEST_F(MetricGroupsTest, AGroupWithNoDoneCellHasEveryMetricAtZero) {
  const std::string sweep =
      Submit(WithTestSplit(MakeSpec("none-done", {1}, 2, 0, /*with_softmax=*/false)));
  const std::vector<ResultGroup> groups = Groups(sweep);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].n, 0);
  ASSERT_EQ(groups[0].metrics.size(), 2u);
  for (const MetricAggregate& m : groups[0].metrics) EXPECT_EQ(m.n, 0) << m.name;
}

// A file whose groups were stored before the metrics had group columns:
// opening it adds them, filled from the stored results.
TEST_F(MetricGroupsTest, GroupsStoredBeforeTheMetricColumnsAreFilledWhenTheStoreOpens) {
  const std::string sweep = StoreFourSeeds();
  absl::Status s = store_->Write([](Connection& c) -> absl::Status {
    for (const char* m : {"first_exact_step", "final_test_loss"}) {
      for (const char* suffix : {"_n", "_mean", "_m2", "_min", "_max"}) {
        RETURN_IF_ERROR(
            c.Exec(absl::StrCat("ALTER TABLE result_groups DROP COLUMN ", m, suffix)));
      }
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  Open();
  EXPECT_EQ(Count("SELECT first_exact_step_n FROM result_groups"), 2);
  EXPECT_EQ(Count("SELECT final_test_loss_n FROM result_groups"), 4);
  const std::vector<ResultGroup> groups = Groups(sweep);
  ASSERT_EQ(groups.size(), 1u);
  ExpectKnownAggregates(groups[0]);
}

}  // namespace
}  // namespace ranksweep::server
