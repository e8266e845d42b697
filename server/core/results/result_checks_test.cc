// One test per row of docs/SECURITY.md's table of cross-field checks: a
// result that a real run of the task could report passes; the same result
// with one field made impossible for the task is refused, naming it.
#include "server/core/results/result_checks.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec/result_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep::server {
namespace {

using ::testing::HasSubstr;

TaskSpec Exhaustive() {  // m=2, seq_len=3: 64 sequences, no test split
  TaskSpec t;
  t.dataset.kind = DatasetKind::kExhaustive;
  t.dataset.m = 2;
  t.dataset.seq_len = 3;
  t.train.max_steps = 200;
  return t;
}

TaskSpec Witness() {  // 12 queries: 12 * 23 = 276 sequences
  TaskSpec t;
  t.dataset.kind = DatasetKind::kWitness;
  t.dataset.m = 8;
  t.dataset.seq_len = 3;
  t.dataset.code_weight = 4;
  t.dataset.max_overlap = 1;
  t.dataset.num_queries = 12;
  t.dataset.final_query_only = true;
  t.train.max_steps = 200;
  return t;
}

TaskSpec Pool(int test_size) {
  TaskSpec t;
  t.dataset.kind = DatasetKind::kPool;
  t.dataset.m = 8;
  t.dataset.seq_len = 3;
  t.dataset.pool_size = 64;
  t.dataset.train_size = 64;
  t.dataset.test_size = test_size;
  t.train.max_steps = 200;
  return t;
}

// What a run of `task` could report: sizes as the task says.
SeedResult Honest(const TaskSpec& task) {
  SeedResult r;
  int64_t train = 64, test = 0;
  if (task.dataset.kind == DatasetKind::kWitness) train = 276;
  if (task.dataset.kind == DatasetKind::kPool) test = task.dataset.test_size;
  r.train = {train, 0.75, 0.5, 0.5, 0.75};
  r.test = {test, test > 0 ? 0.5 : 0.0, 0, 1, 0};
  r.final_loss = 0.125;
  r.steps = 200;
  SetMetric("first_exact_step", std::nullopt, &r);
  r.facts = {train, test, 4, 0, 0};
  if (task.dataset.kind == DatasetKind::kWitness) r.facts = {train, 0, 12, 3, 12};
  return r;
}

void ExpectRefused(const SeedResult& r, const TaskSpec& task, const std::string& message) {
  absl::Status s = CheckResultAgainstTask(r, task);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), message);
}

TEST(ResultChecksTest, HonestResultsPass) {
  for (const TaskSpec& t : {Exhaustive(), Witness(), Pool(0), Pool(16)}) {
    EXPECT_TRUE(CheckResultAgainstTask(Honest(t), t).ok()) << CheckResultAgainstTask(Honest(t), t);
  }
}

TEST(ResultChecksTest, FirstExactStepIsAtMostSteps) {
  SeedResult r = Honest(Exhaustive());
  r.steps = 1;
  SetMetric("first_exact_step", 1, &r);
  EXPECT_TRUE(CheckResultAgainstTask(r, Exhaustive()).ok());
  SetMetric("first_exact_step", 200, &r);
  ExpectRefused(r, Exhaustive(), "result.first_exact_step must be at most steps (1), got 200");
}

TEST(ResultChecksTest, ACurveHasOnePointPerEvaluationOnTheDatasetsSplits) {
  // 200 steps at the default eval_every 50: at most 5 points.
  SeedResult r = Honest(Pool(16));
  r.curve.has_test = true;
  r.curve.points = {{50, 0.5f, 0.75f, 0.5f, 0.875f, 0.25f}, {200, 0.125f, 0.5f, 0.75f, 1.0f, 0.5f}};
  EXPECT_TRUE(CheckResultAgainstTask(r, Pool(16)).ok());
  r.curve.points[1].step = 250;
  ExpectRefused(r, Pool(16), "result.curve.points[1].step must be at most steps (200), got 250");
  r = Honest(Exhaustive());
  r.curve.has_test = true;
  r.curve.points = {{50, 0.5f, 0.75f, 0.5f, 1.0f, 0.0f}};
  ExpectRefused(r, Exhaustive(),
                "result.curve.has_test must be false (the dataset has no test split)");
  r.curve.has_test = false;
  for (int64_t step = 100; step <= 300; step += 50) r.curve.points.push_back({step, 0, 0, 1});
  ExpectRefused(r, Exhaustive(),
                "result.curve must have at most 5 points (one per evaluation of 200 steps at "
                "eval_every 50, at most 20000), got 6");
}

TEST(ResultChecksTest, SplitMetricsAreTakenOnTheReportedSplits) {
  SeedResult r = Honest(Exhaustive());
  r.train.sequences = 7;
  ExpectRefused(r, Exhaustive(), "result.train.sequences must be facts.train_sequences (64), got 7");
  r = Honest(Pool(16));
  r.test.sequences = 15;
  ExpectRefused(r, Pool(16), "result.test.sequences must be facts.test_sequences (16), got 15");
}

TEST(ResultChecksTest, AnExhaustiveDatasetHasEverySequence) {
  SeedResult r = Honest(Exhaustive());
  r.train.sequences = r.facts.train_sequences = 7;
  ExpectRefused(r, Exhaustive(),
                "result.facts.train_sequences must be 64 (exhaustive dataset, m=2, seq_len=3), "
                "got 7");
}

TEST(ResultChecksTest, AWitnessFamilyWithNumQueriesHasItsSize) {
  SeedResult r = Honest(Witness());
  r.train.sequences = r.facts.train_sequences = 275;
  ExpectRefused(r, Witness(),
                "result.facts.train_sequences must be 276 (a witness family of num_queries=12: "
                "n(2n-1)), got 275");
  r = Honest(Witness());
  r.facts.distinct_queries = r.facts.rank_upper_bound = 13;
  ExpectRefused(r, Witness(), "result.facts.distinct_queries must be at most num_queries (12), got 13");
  // With every position scored, the keys count too: up to 2n.
  TaskSpec every = Witness();
  every.dataset.final_query_only = false;
  r.facts.distinct_queries = r.facts.rank_upper_bound = 24;
  EXPECT_TRUE(CheckResultAgainstTask(r, every).ok());
  r.facts.distinct_queries = r.facts.rank_upper_bound = 25;
  ExpectRefused(r, every,
                "result.facts.distinct_queries must be at most 2 * num_queries (24: queries and "
                "keys are scored), got 25");
}

TEST(ResultChecksTest, APoolDatasetHasExactlyItsSizes) {
  // Either split builds exactly train_size and test_size sequences: fewer
  // is as impossible as more.
  for (int64_t train : {63, 65}) {
    SeedResult r = Honest(Pool(16));
    r.train.sequences = r.facts.train_sequences = train;
    ExpectRefused(r, Pool(16),
                  absl::StrCat("result.facts.train_sequences must be the task's train_size (64), "
                               "got ", train));
  }
  for (int64_t test : {15, 17}) {
    SeedResult r = Honest(Pool(16));
    r.test.sequences = r.facts.test_sequences = test;
    ExpectRefused(r, Pool(16),
                  absl::StrCat("result.facts.test_sequences must be the task's test_size (16), "
                               "got ", test));
  }
  // A result without the test split a pool dataset has.
  SeedResult r = Honest(Pool(16));
  r.test = SplitMetrics{};
  r.facts.test_sequences = 0;
  ExpectRefused(r, Pool(16), "result.facts.test_sequences must be the task's test_size (16), got 0");
}

TEST(ResultChecksTest, NoTestSplitWhereTheDatasetHasNone) {
  for (const TaskSpec& t : {Exhaustive(), Witness()}) {
    SeedResult r = Honest(t);
    r.test.sequences = r.facts.test_sequences = 16;
    ExpectRefused(r, t,
                  absl::StrCat("result.facts.test_sequences must be 0 (the task's ",
                               Name(t.dataset.kind), " dataset has no test split), got 16"));
  }
  SeedResult r = Honest(Pool(0));
  r.test.sequences = r.facts.test_sequences = 16;
  ExpectRefused(r, Pool(0),
                "result.facts.test_sequences must be 0 (the task's pool dataset has no test "
                "split), got 16");
}

TEST(ResultChecksTest, DistinctQueriesAreAtMostTwoToTheM) {
  SeedResult r = Honest(Exhaustive());
  r.facts.distinct_queries = 5;
  ExpectRefused(r, Exhaustive(), "result.facts.distinct_queries must be at most 2^m = 4, got 5");
}

TEST(ResultChecksTest, RankBoundsExistForWitnessFamiliesOnlyAndAreOrdered) {
  SeedResult r = Honest(Exhaustive());
  r.facts.rank_lower_bound = 6;
  ExpectRefused(r, Exhaustive(),
                "result.facts.rank_lower_bound must be 0 (no bound for the task's exhaustive dataset), got 6");
  r = Honest(Pool(16));
  r.facts.rank_upper_bound = 24;
  ExpectRefused(r, Pool(16),
                "result.facts.rank_upper_bound must be 0 (no bound for the task's pool dataset), got 24");
  r = Honest(Witness());
  r.facts.rank_upper_bound = 24;
  ExpectRefused(r, Witness(),
                "result.facts.rank_upper_bound must be facts.distinct_queries (12), got 24");
  r = Honest(Witness());
  r.facts.rank_lower_bound = 13;
  ExpectRefused(r, Witness(),
                "result.facts.rank_lower_bound must be at most facts.rank_upper_bound (12), got 13");
}

TEST(ResultChecksTest, ALossOfZeroIsAnExactTrainSplit) {
  SeedResult r = Honest(Exhaustive());
  r.final_loss = 0;
  r.train = {64, 0, 0, 1, 1};
  ExpectRefused(r, Exhaustive(),
                "result.train.error must be 0 when final_loss is 0 (the loss over the same split "
                "with the same parameters), got 1");
  r.train = {64, 1, 1, 0, 0};
  EXPECT_TRUE(CheckResultAgainstTask(r, Exhaustive()).ok());
}

}  // namespace
}  // namespace ranksweep::server
