// The table of optional per-seed metrics: its rows, reading and writing a
// metric, its checks, and the recipe of docs/ARCHITECTURE.md ("How to add a
// metric"): a metric is its row and the trainer's line, and no other
// production file names it.
#include "common/spec/result_metrics.h"

#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "common/spec/source_files_testing.h"
#include "gtest/gtest.h"

namespace ranksweep {
namespace {

using testing_support::FilesNaming;

TEST(ResultMetricsTest, EveryRowHasAUniqueColumnNameAndIsFoundByIt) {
  std::set<std::string> names;
  for (const ResultMetric& m : ResultMetrics()) {
    const std::string name = m.name;
    EXPECT_TRUE(names.insert(name).second) << name;
    // The name is a SQL column and a Python identifier as it stands.
    ASSERT_FALSE(name.empty());
    EXPECT_TRUE(std::islower(static_cast<unsigned char>(name[0]))) << name;
    for (char c : name) {
      EXPECT_TRUE(std::islower(static_cast<unsigned char>(c)) ||
                  std::isdigit(static_cast<unsigned char>(c)) || c == '_')
          << name;
    }
    EXPECT_EQ(FindResultMetric(name), &m);
    EXPECT_STRNE(m.table_header, "") << name;
    EXPECT_STRNE(m.label, "") << name;
  }
  EXPECT_EQ(FindResultMetric("no_such_metric"), nullptr);
  EXPECT_EQ(ResultMetrics().size(), 2u);
}

TEST(ResultMetricsTest, AMetricIsMissingUntilSetAndAnIntegerIsWhole) {
  SeedResult r;
  for (const ResultMetric& m : ResultMetrics()) EXPECT_FALSE(GetMetric(m, r).has_value());
  SetMetric("final_test_loss", 0.25, &r);
  EXPECT_EQ(GetMetric("final_test_loss", r), std::optional<double>(0.25));
  EXPECT_FALSE(GetMetric("first_exact_step", r).has_value());
  SetMetric("first_exact_step", 120.9, &r);
  EXPECT_EQ(GetMetric("first_exact_step", r), std::optional<double>(120.0));
  SetMetric("final_test_loss", std::nullopt, &r);
  EXPECT_FALSE(GetMetric("final_test_loss", r).has_value());
  EXPECT_EQ(GetMetric("first_exact_step", r), std::optional<double>(120.0));
}

TEST(ResultMetricsDeathTest, ANameNotInTheTableAborts) {
  SeedResult r;
  EXPECT_DEATH(SetMetric("final_tset_loss", 1.0, &r),
               "result metric 'final_tset_loss' is not in kResultMetrics");
}

// A test-split metric exists only where the dataset has a test split; each
// metric is held to its range.
TEST(ResultMetricsTest, ValidationHoldsEachMetricToItsRangeAndSplit) {
  SeedResult r;
  r.test.sequences = 0;
  SetMetric("final_test_loss", 0.5, &r);
  EXPECT_EQ(ValidateResultMetrics(r, 100).message(),
            "result.final_test_loss must be missing: the dataset has no test split "
            "(result.test.sequences is 0), got 0.5");
  r.test.sequences = 16;
  EXPECT_TRUE(ValidateResultMetrics(r, 100).ok());
  SetMetric("final_test_loss", -0.5, &r);
  EXPECT_EQ(ValidateResultMetrics(r, 100).message(),
            "result.final_test_loss must be a finite number >= 0 or missing, got -0.5");
  SetMetric("final_test_loss", std::nullopt, &r);
  SetMetric("first_exact_step", 101, &r);
  EXPECT_EQ(ValidateResultMetrics(r, 100).message(),
            "result.first_exact_step must be in 0..100 or missing, got 101");
}

// The recipe: final_test_loss, added by it, is named by its row and by the
// trainer's line that computes it, and by no other production file: the
// store's column, the wire, validation, the CLI's CSV, JSON and tables, the
// dashboard and the Python frames all read the table.
TEST(ResultMetricsTest, EveryBuiltInRowReadsAndWritesItsOwnField) {
  std::set<std::string> names;
  for (const ResultMetric& m : ResultMetrics()) names.insert(m.name);
  SeedResult r;
  for (int k = 0; k < kBuiltInMetricCount; ++k) {
    const BuiltInMetric& m = kBuiltInMetrics[k];
    EXPECT_TRUE(names.insert(m.name).second) << m.name;  // unique among every metric
    EXPECT_EQ(BuiltInMetricIndex(m.name), k);
    const std::string prefix = m.split == MetricSplit::kTrain  ? "train_"
                               : m.split == MetricSplit::kTest ? "test_"
                                                               : "";
    EXPECT_EQ(std::string(m.name), prefix + m.field);
    // An integer is a count or a step; a real is a share or a magnitude.
    const bool integer_range = m.range == MetricRange::kStep || m.range == MetricRange::kCount ||
                               m.range == MetricRange::kPositiveCount;
    EXPECT_EQ(integer_range, m.integer) << m.name;
    m.set(r, 100 + k + (m.integer ? 0 : 0.5));
  }
  // Each row wrote its own field: every value is still its row's.
  for (int k = 0; k < kBuiltInMetricCount; ++k) {
    const BuiltInMetric& m = kBuiltInMetrics[k];
    EXPECT_EQ(m.get(r), 100 + k + (m.integer ? 0 : 0.5)) << m.name;
  }
  EXPECT_EQ(r.train.sequences, 100);
  EXPECT_EQ(r.train.error, 103.5);
  EXPECT_EQ(r.test.max_abs_error, 109.5);
  EXPECT_EQ(r.final_loss, 110.5);
  EXPECT_EQ(r.steps, 111);
  EXPECT_EQ(r.wall_seconds, 112.5);
  EXPECT_EQ(kBuiltInMetricCount, 13);
}

TEST(ResultMetricsTest, AMetricIsNamedOnlyByItsRowAndTheTrainer) {
  EXPECT_EQ(FilesNaming("final_test_loss"),
            (std::set<std::string>{"common/spec/result_metrics.h",
                                   "worker/trainer/fused_trainer.cc"}));
}

// A built-in metric (train_max_abs_error, test_max_abs_error) is named by
// its row, the fields that hold it (SeedResult, the proto's SplitMetrics and
// ResultColumns), the `results` column of the schema and its migrations,
// the packing function's historical argument list, the trainer's JSON, the
// trainer that computes it and the benchmark's made-up results; nothing
// else: validation, storage, the wire's columns, the CLI's CSV and the
// Python frames read the table (docs/ARCHITECTURE.md, "How to add a
// metric").
TEST(ResultMetricsTest, ABuiltInMetricIsNamedOnlyWhereItIsHeld) {
  EXPECT_EQ(FilesNaming("max_abs_error"),
            (std::set<std::string>{
                "bench/dispatch_bench.cc", "common/spec/result_metrics.h", "common/spec/spec.h",
                "common/spec/spec_json.cc", "proto/ranksweep/v1/ranksweep.proto",
                "server/core/results/packed_row.h", "server/core/schema.cc",
                "worker/trainer/fused_trainer.cc"}));
}

// The built-ins the groups aggregate are the rows with a group prefix, in
// table order, found by name. Each one's running aggregate is a set of
// result_groups columns under that prefix, named by no production file but
// the schema's migrations that made them: the store, the group reads, the
// wire and the CLI's grouped CSV and JSON loop over the table.
TEST(ResultMetricsTest, TheGroupedBuiltInsAreNamedOnlyByTheTableAndTheSchema) {
  std::vector<std::string> grouped;
  for (int b : kGroupedBuiltIns) grouped.push_back(kBuiltInMetrics[b].name);
  EXPECT_EQ(grouped, (std::vector<std::string>{"train_position_accuracy", "train_exact_accuracy",
                                               "train_error", "test_error"}));
  static_assert(GroupedBuiltInIndex("test_error") == 3);
  EXPECT_EQ(FindBuiltInMetric("train_error"), &kBuiltInMetrics[BuiltInMetricIndex("train_error")]);
  EXPECT_EQ(FindBuiltInMetric("first_exact_step"), nullptr);
  for (int b : kGroupedBuiltIns) {
    const std::string column = std::string(kBuiltInMetrics[b].group_columns) + "_m2";
    EXPECT_EQ(FilesNaming(column), (std::set<std::string>{"server/core/schema.cc"})) << column;
  }
}

}  // namespace
}  // namespace ranksweep
