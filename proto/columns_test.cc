#include "proto/columns.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include <string>

#include "gtest/gtest.h"

namespace ranksweep {
namespace {

v1::QueryResultsResponse Parse(const std::string& text) {
  v1::QueryResultsResponse r;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &r)) << text;
  return r;
}

// Row 0: done on worker w-a; row 1: failed on w-b; row 2: done, from the cache.
constexpr char kThreeRows[] = R"pb(
  next_page_token: "c12"
  columns {
    sweep_id: "sw-1"
    cell_id: [ 10, 11, 12 ]
    head_index: [ 1, 0, 1 ]
    heads: [ "softmax", "kernel/elu1" ]
    rank: [ 8, 0, 16 ]
    seed: [ 0, 1, 2 ]
    state: [ CELL_STATE_DONE, CELL_STATE_FAILED, CELL_STATE_DONE ]
    attempt: [ 1, 3, 1 ]
    lease_id: [ 5, 6, 5 ]
    finished_unix_ms: [ 1000, 2000, 3000 ]
    cached_from_cell_id: [ 0, 0, 10 ]
    worker: [ 0, 1, 0 ]
    workers: [ "w-a", "w-b" ]
    worker_version: [ 0, 0, 0 ]
    worker_versions { build_id: "b1" torch_version: "1.13.1" }
    failure_row: [ 1 ]
    failure: [ "out of memory (attempt 3 of 3)" ]
    train_sequences: [ 64, 0, 64 ]
    train_position_accuracy: [ 0.5, 0, 1 ]
    train_exact_accuracy: [ 0.25, 0, 1 ]
    train_error: [ 0.75, 0, 0 ]
    train_max_abs_error: [ 2.5, 0, 0.125 ]
    test_sequences: [ 0, 0, 0 ]
    test_position_accuracy: [ 0, 0, 0 ]
    test_exact_accuracy: [ 0, 0, 0 ]
    test_error: [ 1, 0, 1 ]
    test_max_abs_error: [ 0, 0, 0 ]
    final_loss: [ 0.0625, 0, 0.001 ]
    steps: [ 3000, 0, 3000 ]
    wall_seconds: [ 1.5, 0, 1.5 ]
    device: [ 0, 1, 0 ]
    devices: [ "cpu", "" ]
    facts: [ 0, 1, 0 ]
    facts_table { train_sequences: 64 distinct_queries: 8 rank_lower_bound: 4 rank_upper_bound: 8 }
    facts_table {}
  }
)pb";

TEST(ColumnsTest, EveryRowComesBackAsItsResultRow) {
  v1::QueryResultsResponse got = Parse(kThreeRows);
  ASSERT_TRUE(RowsFromColumns(&got).ok());
  const v1::QueryResultsResponse want = Parse(R"pb(
    next_page_token: "c12"
    rows {
      sweep_id: "sw-1" cell_id: 10 head: "kernel/elu1" head_index: 1 rank: 8 seed: 0
      state: CELL_STATE_DONE
      result {
        seed: 0
        train { sequences: 64 position_accuracy: 0.5 exact_accuracy: 0.25 error: 0.75
                max_abs_error: 2.5 }
        test { error: 1 }
        final_loss: 0.0625 steps: 3000 wall_seconds: 1.5 device: "cpu"
        facts { train_sequences: 64 distinct_queries: 8 rank_lower_bound: 4 rank_upper_bound: 8 }
      }
      worker_id: "w-a" worker_version { build_id: "b1" torch_version: "1.13.1" }
      attempt: 1 lease_id: 5 finished_unix_ms: 1000
    }
    rows {
      sweep_id: "sw-1" cell_id: 11 head: "softmax" head_index: 0 rank: 0 seed: 1
      state: CELL_STATE_FAILED failure: "out of memory (attempt 3 of 3)"
      worker_id: "w-b" worker_version { build_id: "b1" torch_version: "1.13.1" }
      attempt: 3 lease_id: 6 finished_unix_ms: 2000
    }
    rows {
      sweep_id: "sw-1" cell_id: 12 head: "kernel/elu1" head_index: 1 rank: 16 seed: 2
      state: CELL_STATE_DONE
      result {
        seed: 2
        train { sequences: 64 position_accuracy: 1 exact_accuracy: 1 max_abs_error: 0.125 }
        test { error: 1 }
        final_loss: 0.001 steps: 3000 wall_seconds: 1.5 device: "cpu"
        facts { train_sequences: 64 distinct_queries: 8 rank_lower_bound: 4 rank_upper_bound: 8 }
      }
      worker_id: "w-a" worker_version { build_id: "b1" torch_version: "1.13.1" }
      attempt: 1 lease_id: 5 finished_unix_ms: 3000 cached_from_cell_id: 10
    }
  )pb");
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(got, want)) << diff;
}

TEST(ColumnsTest, AnEmptyMetricListReadsAsTheEmptyValue) {
  v1::QueryResultsResponse got = Parse(kThreeRows);
  v1::ResultColumns* c = got.mutable_columns();
  c->clear_test_sequences();
  c->clear_test_position_accuracy();
  c->clear_test_exact_accuracy();
  c->clear_test_error();
  c->clear_test_max_abs_error();
  c->clear_train_error();
  ASSERT_TRUE(RowsFromColumns(&got).ok());
  const v1::SeedResult& r = got.rows(0).result();
  EXPECT_EQ(r.test().sequences(), 0);
  EXPECT_EQ(r.test().error(), 1.0);
  EXPECT_EQ(r.test().position_accuracy(), 0.0);
  EXPECT_EQ(r.train().error(), 1.0);
  EXPECT_EQ(r.train().exact_accuracy(), 0.25);  // still from its list
  v1::QueryResultsResponse short_list = Parse(kThreeRows);
  short_list.mutable_columns()->mutable_test_error()->RemoveLast();
  absl::Status s = RowsFromColumns(&short_list);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "columns.test_error: 2 values for 3 rows");
}

TEST(ColumnsTest, RecipesComeBackPerRowAndAnEmptyListIsRecipe0) {
  v1::QueryResultsResponse got = Parse(kThreeRows);
  ASSERT_TRUE(RowsFromColumns(&got).ok());
  for (const v1::ResultRow& row : got.rows()) EXPECT_EQ(row.recipe(), 0);
  got = Parse(kThreeRows);
  for (int recipe : {2, 0, 5}) got.mutable_columns()->add_recipe(recipe);
  ASSERT_TRUE(RowsFromColumns(&got).ok());
  ASSERT_EQ(got.rows_size(), 3);
  EXPECT_EQ(got.rows(0).recipe(), 2);
  EXPECT_EQ(got.rows(1).recipe(), 0);
  EXPECT_EQ(got.rows(2).recipe(), 5);
  got = Parse(kThreeRows);
  got.mutable_columns()->add_recipe(1);
  absl::Status s = RowsFromColumns(&got);
  EXPECT_EQ(s.message(), "columns.recipe: 1 values for 3 rows");
}

TEST(ColumnsTest, RowsGoOnTheResponsesArena) {
  google::protobuf::Arena arena;
  auto* response = google::protobuf::Arena::CreateMessage<v1::QueryResultsResponse>(&arena);
  *response = Parse(kThreeRows);
  ASSERT_TRUE(RowsFromColumns(response).ok());
  ASSERT_EQ(response->rows_size(), 3);
  EXPECT_EQ(response->rows(2).GetArena(), &arena);
  EXPECT_FALSE(response->has_columns());
}

TEST(ColumnsTest, AReplyWithRowsOrGroupsIsLeftAsItIs) {
  v1::QueryResultsResponse rows = Parse(R"pb(rows { cell_id: 3 } rows { cell_id: 4 })pb");
  ASSERT_TRUE(RowsFromColumns(&rows).ok());
  EXPECT_EQ(rows.rows_size(), 2);
  v1::QueryResultsResponse groups = Parse(R"pb(groups { rank: 8 })pb");
  ASSERT_TRUE(RowsFromColumns(&groups).ok());
  EXPECT_EQ(groups.rows_size(), 0);
  EXPECT_EQ(groups.groups_size(), 1);
}

TEST(ColumnsTest, ColumnsThatDoNotFitTogetherNameTheField) {
  struct Case {
    std::string edit;  // appended to the columns of kThreeRows
    std::string error;
  };
  const Case cases[] = {
      {"steps: 7", "columns.steps: 4 values for 3 rows"},
      {"worker: 0", "columns.worker: 4 values for 3 rows"},
      {"cell_id: 13", "columns.head_index: 3 values for 4 rows"},
      {"failure: \"x\"", "columns.failure: 2 texts for 1 failure_row entries"},
      {"failure_row: 1 failure: \"again\"",
       "columns.failure_row[1]: 1 is not a row after the previous one (3 rows)"},
  };
  for (const Case& c : cases) {
    std::string text = kThreeRows;
    text.insert(text.rfind('}'), c.edit + "\n");
    v1::QueryResultsResponse r = Parse(text);
    absl::Status s = RowsFromColumns(&r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.edit;
    EXPECT_EQ(s.message(), c.error) << c.edit;
    EXPECT_EQ(r.rows_size(), 0) << c.edit;
  }
  v1::QueryResultsResponse bad_index = Parse(kThreeRows);
  bad_index.mutable_columns()->set_device(1, 2);
  absl::Status s = RowsFromColumns(&bad_index);
  EXPECT_EQ(s.message(), "columns.device[1]: 2 is not an index into devices (2 entries)");
  bad_index = Parse(kThreeRows);
  bad_index.mutable_columns()->set_head_index(0, -1);
  s = RowsFromColumns(&bad_index);
  EXPECT_EQ(s.message(), "columns.head_index[0]: -1 is not an index into heads (2 entries)");
}

}  // namespace
}  // namespace ranksweep
