// The registries of dataset kinds and head kinds: every kind has one row
// the rest of the code reads, and no production file outside the registry,
// the enum and the trainer's builders names a kind.
#include "common/spec/dataset_kinds.h"

#include <set>
#include <string>
#include <vector>

#include "common/spec/head_kinds.h"
#include "common/spec/source_files_testing.h"
#include "common/spec/spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep {
namespace {

TEST(DatasetKindsTest, EveryRowNamesItsKindAndParsesBack) {
  ASSERT_EQ(DatasetKinds().size(), 3u);
  for (const DatasetKindRow& row : DatasetKinds()) {
    EXPECT_EQ(FindDatasetKind(row.kind), &row);
    EXPECT_STREQ(Name(row.kind), row.name);
    auto parsed = ParseDatasetKind(row.name, "dataset.kind");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, row.kind);
    EXPECT_NE(row.validate, nullptr) << row.name;
    EXPECT_NE(row.size, nullptr) << row.name;
    EXPECT_NE(row.has_test_split, nullptr) << row.name;
    EXPECT_NE(row.check_fact_sizes, nullptr) << row.name;
  }
  EXPECT_EQ(FindDatasetKind(static_cast<DatasetKind>(99)), nullptr);
  EXPECT_EQ(ValidateDataset([] {
              DatasetSpec d;
              d.kind = static_cast<DatasetKind>(99);
              return d;
            }()).message(),
            "dataset.kind must be one of exhaustive, witness, pool; got value 99");
}

TEST(DatasetKindsTest, ASpecWritesTheFieldsOfItsKindOnly) {
  TaskSpec t;
  t.dataset.kind = DatasetKind::kWitness;
  t.dataset.m = 24;
  t.dataset.code_weight = 8;
  t.dataset.max_overlap = 4;
  t.dataset.num_queries = 12;
  const std::string witness = TaskSpecToJson(t);
  EXPECT_THAT(witness, ::testing::HasSubstr("\"num_queries\":12"));
  EXPECT_THAT(witness, ::testing::Not(::testing::HasSubstr("pool_size")));
  EXPECT_TRUE(DatasetKindHasField(DatasetKind::kPool, "pool_size"));
  EXPECT_FALSE(DatasetKindHasField(DatasetKind::kExhaustive, "num_queries"));
}

TEST(DatasetKindsTest, AnAxisOfAnotherKindsFieldNamesTheKindsThatHaveIt) {
  SweepSpec s;
  s.name = "axis";
  s.dataset.m = 2;
  s.dataset.seq_len = 3;
  s.heads.push_back(HeadSpec());
  s.ranks = {1};
  s.seed_count = 1;
  s.axes = {{"num_queries", {2, 3}}};
  EXPECT_EQ(ValidateSweepSpec(s).message(),
            "axes[0] (num_queries): dataset.num_queries needs dataset.kind \"witness\", got "
            "\"exhaustive\"");
}

TEST(DatasetKindsTest, TheFactSizesOfEachKindAreItsRows) {
  DatasetSpec pool;
  pool.kind = DatasetKind::kPool;
  pool.train_size = 20;
  pool.test_size = 8;
  DatasetFacts f;
  f.train_sequences = 20;
  f.test_sequences = 9;
  EXPECT_EQ(FindDatasetKind(pool.kind)->check_fact_sizes(pool, f).message(),
            "result.facts.test_sequences must be the task's test_size (8), got 9");
  f.test_sequences = 8;
  EXPECT_TRUE(FindDatasetKind(pool.kind)->check_fact_sizes(pool, f).ok());
  EXPECT_TRUE(FindDatasetKind(pool.kind)->has_test_split(pool));
  pool.test_size = 0;
  EXPECT_FALSE(FindDatasetKind(pool.kind)->has_test_split(pool));
}

using testing_support::FilesNaming;

// The recipes in docs/ARCHITECTURE.md ("How to add a dataset kind", "How
// to add a head") hold: outside the registry, the enum and the trainer's
// builders, no production file names a kind. (The benchmarks name the kinds
// they measure, and need no change when a kind is added.)
const std::vector<std::string> kProductionDirs = {"common", "client", "server", "worker",
                                                  "proto", "python"};

TEST(DatasetKindsTest, OnlyTheRegistryTheEnumAndTheBuildersNameAKind) {
  EXPECT_EQ(FilesNaming("DatasetKind::k", kProductionDirs),
            (std::set<std::string>{"common/spec/dataset_kinds.cc", "common/spec/spec.h",
                                   "worker/trainer/dataset.cc"}));
}

TEST(HeadKindsTest, OnlyTheRegistryTheEnumAndTheTrainersHeadsNameAKind) {
  EXPECT_EQ(FilesNaming("HeadKind::k", kProductionDirs),
            (std::set<std::string>{"common/spec/head_kinds.cc", "common/spec/spec.h",
                                   "worker/trainer/heads.cc", "worker/trainer/heads.h"}));
}

TEST(HeadKindsTest, EveryRowNamesItsKindAndTheValidatorReadsIt) {
  ASSERT_EQ(HeadKinds().size(), 4u);
  for (const HeadKindRow& row : HeadKinds()) {
    EXPECT_EQ(FindHeadKind(row.kind), &row);
    EXPECT_STREQ(Name(row.kind), row.name);
    auto parsed = ParseHeadKind(row.name, "head.kind");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, row.kind);
  }
  DatasetSpec d;
  d.m = 2;
  d.seq_len = 3;
  HeadSpec h;
  h.kind = HeadKind::kSoftmax;
  h.construction = Construction::kRank1;
  EXPECT_EQ(ValidateHead(h, d).message(),
            "head.construction \"rank1\" needs head.kind \"kernel\", got \"softmax\"");
  h.kind = HeadKind::kMultiheadKernel;
  h.construction = Construction::kNone;
  h.num_heads = 0;
  EXPECT_EQ(ValidateHead(h, d).message(), "head.num_heads must be in 1..64, got 0");
  h.num_heads = 4;
  EXPECT_EQ(HeadLabel(h), "multihead_kernel/elu1x4");
  EXPECT_TRUE(HeadHasRank(h));
  h.kind = static_cast<HeadKind>(9);
  EXPECT_EQ(ValidateHead(h, d).message(),
            "head.kind must be one of kernel, softmax, signed_kernel, multihead_kernel; got "
            "value 9");
}

}  // namespace
}  // namespace ranksweep
