#include "proto/column_blocks.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec/result_metrics.h"
#include "gtest/gtest.h"
#include "proto/columns.h"

namespace ranksweep {
namespace {

// A row and the strings its ResultColumnsRow points into.
struct TestRow {
  ResultColumnsRow row;
  SeedResult result;
  std::string head, worker, build, failure;
};

// `n` rows that use every table and every kind of list: workers, versions,
// devices and facts that change from row to row, failures, recipes and
// optional metrics only in some stretches, a test split only in some.
std::vector<TestRow> MakeRows(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<TestRow> rows(n);
  for (int i = 0; i < n; ++i) {
    TestRow& t = rows[i];
    t.row.cell_id = 100 + 2 * i;
    t.row.head_index = static_cast<int>(rng() % 3);
    t.head = t.row.head_index == 0 ? "kernel/elu1" : t.row.head_index == 1 ? "softmax" : "signed_kernel";
    t.row.rank = 1 << (rng() % 6);
    t.row.recipe = i >= n / 2 && i < 3 * n / 4 ? static_cast<int>(rng() % 3) : 0;
    t.row.seed = rng() % 8;
    const bool failed = rng() % 9 == 0;
    t.row.state = failed ? v1::CELL_STATE_FAILED : v1::CELL_STATE_DONE;
    if (failed) t.failure = "out of memory (attempt " + std::to_string(1 + i % 3) + " of 3)";
    t.worker = "w-" + std::to_string(rng() % 5);
    t.build = "b" + std::to_string(i / 40 % 3);
    t.row.attempt = 1 + static_cast<int>(rng() % 3);
    t.row.lease_id = 1000 + i;
    t.row.finished_unix_ms = 1700000000000 + 37 * i;
    t.row.cached_from_cell_id = rng() % 7 == 0 ? 100 : 0;
    if (!failed) {
      SeedResult& r = t.result;
      r.seed = t.row.seed;
      r.train.sequences = 64;
      r.train.position_accuracy = (rng() % 1000) / 1000.0;
      r.train.exact_accuracy = (rng() % 1000) / 1000.0;
      r.train.error = 1 - r.train.exact_accuracy;
      r.train.max_abs_error = (rng() % 100) / 8.0;
      if (i >= n / 3) {  // a test split from a third of the way on
        r.test.sequences = 32;
        r.test.error = (rng() % 1000) / 1000.0;
        r.test.exact_accuracy = 1 - r.test.error;
      } else {
        r.test.error = 1;
      }
      r.final_loss = (rng() % 1000) / 1e4;
      r.steps = 3000;
      r.wall_seconds = (rng() % 100) / 10.0;
      r.device = rng() % 4 == 0 ? "cuda:0 (NVIDIA H200)" : "cpu";
      r.facts.train_sequences = 64;
      r.facts.distinct_queries = 8 + t.row.head_index;
      // The first optional metric only in the second half, on most rows.
      if (i >= n / 2 && rng() % 5 != 0) {
        SetMetric(kResultMetrics[0], static_cast<double>(rng() % 3000), &r);
      }
    }
  }
  return rows;
}

void Encode(std::vector<TestRow>& rows, size_t from, size_t to, std::string* out) {
  v1::ResultColumns c;
  ResultColumnsEncoder encoder(&c, "sw-blocks");
  encoder.Expect(static_cast<int64_t>(to - from));
  for (size_t i = from; i < to; ++i) {
    TestRow& t = rows[i];
    t.row.head = t.head;
    t.row.worker_id = t.worker;
    t.row.build_id = t.build;
    t.row.torch_version = "1.13.1";
    t.row.failure = t.failure;
    t.row.result = t.row.state == v1::CELL_STATE_DONE ? &t.result : nullptr;
    encoder.Add(t.row);
  }
  encoder.Finish();
  ASSERT_TRUE(c.SerializeToString(out));
}

// The blocks of `rows` cut at `cuts`, joined.
std::string Joined(std::vector<TestRow>& rows, const std::vector<size_t>& cuts) {
  std::vector<std::string> blocks;
  size_t from = 0;
  for (size_t cut : cuts) {
    blocks.emplace_back();
    Encode(rows, from, cut, &blocks.back());
    from = cut;
  }
  blocks.emplace_back();
  Encode(rows, from, rows.size(), &blocks.back());
  std::vector<std::string_view> views(blocks.begin(), blocks.end());
  JoinedColumns joined;
  EXPECT_TRUE(MergeColumns(views, &joined).ok());
  std::string bytes = "kept";
  joined.AppendTo(&bytes);
  return bytes.substr(4);
}

TEST(ColumnBlocksTest, JoinedBlocksAreTheBytesOfOneEncodingOfEveryRow) {
  std::vector<TestRow> rows = MakeRows(1000, 7);
  std::string whole;
  Encode(rows, 0, rows.size(), &whole);
  v1::ResultColumns parsed;
  ASSERT_TRUE(parsed.ParseFromString(whole));
  // What the rows exercise: every table has several entries, a metric and
  // the recipes start part of the way, some rows fail.
  EXPECT_EQ(parsed.workers_size(), 5);
  EXPECT_EQ(parsed.worker_versions_size(), 3);
  EXPECT_EQ(parsed.devices_size(), 3);  // with the failed rows' ""
  EXPECT_EQ(parsed.facts_table_size(), 4);
  EXPECT_EQ(parsed.metrics_size(), 1);
  EXPECT_GT(parsed.failure_size(), 50);
  EXPECT_EQ(parsed.recipe_size(), 1000);

  EXPECT_EQ(Joined(rows, {}), whole);
  EXPECT_EQ(Joined(rows, {500}), whole);
  // Blocks before the test split, the metric or the recipes start, and
  // blocks of one row or none.
  EXPECT_EQ(Joined(rows, {100, 200, 333, 334, 334, 499, 500, 501, 750, 999}), whole);
  std::vector<size_t> every_64;
  for (size_t cut = 64; cut < rows.size(); cut += 64) every_64.push_back(cut);
  EXPECT_EQ(Joined(rows, every_64), whole);
}

TEST(ColumnBlocksTest, ABlockThatIsNotOneIsRefusedAndNothingIsJoined) {
  std::vector<TestRow> rows = MakeRows(10, 1);
  std::string good;
  Encode(rows, 0, rows.size(), &good);
  JoinedColumns out;
  // A varint field (wire type 0) where every field of a block is packed.
  const std::string varint_field("\x10\x05", 2);
  absl::Status s = MergeColumns({good, varint_field}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "block 1: field 2 with wire type 0 is not one a block holds");
  EXPECT_TRUE(out.parts().empty());
  // A list one value short: rank with 9 values for the 10 rows cell_id has.
  v1::ResultColumns short_list;
  ASSERT_TRUE(short_list.ParseFromString(good));
  short_list.mutable_rank()->RemoveLast();
  s = MergeColumns({good, short_list.SerializeAsString()}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "block 1, field 5: 9 values for 10 rows");
  EXPECT_TRUE(out.parts().empty());
  // An index past its block's table.
  v1::ResultColumns bad_index;
  ASSERT_TRUE(bad_index.ParseFromString(good));
  bad_index.set_worker(0, bad_index.workers_size());
  s = MergeColumns({bad_index.SerializeAsString()}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), absl::StrCat("block 0, field 12: index ", bad_index.workers_size(), " of ",
                                    bad_index.workers_size(), " entries"));
  EXPECT_TRUE(out.parts().empty());
}

TEST(ColumnBlocksTest, TheLayoutIsSixteenHexDigitsAndTheSameOnEveryCall) {
  const std::string& layout = ColumnBlockLayout();
  ASSERT_EQ(layout.size(), 16u);
  EXPECT_EQ(layout.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(&ColumnBlockLayout(), &layout);
}

}  // namespace
}  // namespace ranksweep
