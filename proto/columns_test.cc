#include "proto/columns.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include <string>

#include "common/spec/result_metrics.h"
#include "gtest/gtest.h"
#include "proto/convert.h"

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

// kThreeRows as rows.
constexpr char kThreeRowsDecoded[] = R"pb(
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
  )pb";

std::string Diff(const google::protobuf::Message& got, const google::protobuf::Message& want) {
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  return d.Compare(got, want) ? "" : diff;
}

TEST(ColumnsTest, EveryRowComesBackAsItsResultRow) {
  v1::QueryResultsResponse got = Parse(kThreeRows);
  ASSERT_TRUE(RowsFromColumns(&got).ok());
  const v1::QueryResultsResponse want = Parse(kThreeRowsDecoded);
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(got, want)) << diff;
}

// The rows of kThreeRows as the coordinator hands them to the encoder.
void EncodeThreeRows(ResultColumnsEncoder* encoder) {
  SeedResult a;
  a.seed = 0;
  a.train = {64, 0.5, 0.25, 0.75, 2.5};
  a.final_loss = 0.0625;
  a.steps = 3000;
  a.wall_seconds = 1.5;
  a.device = "cpu";
  a.facts = {64, 0, 8, 4, 8};
  SeedResult c = a;
  c.seed = 2;
  c.train = {64, 1, 1, 0, 0.125};
  c.final_loss = 0.001;
  ResultColumnsRow row;
  row.build_id = "b1";
  row.torch_version = "1.13.1";
  row.worker_id = "w-a";
  row.attempt = 1;
  row.lease_id = 5;
  row.state = v1::CELL_STATE_DONE;
  row.cell_id = 10;
  row.head = "kernel/elu1";
  row.head_index = 1;
  row.rank = 8;
  row.seed = 0;
  row.result = &a;
  row.finished_unix_ms = 1000;
  encoder->Add(row);
  ResultColumnsRow failed = row;
  failed.cell_id = 11;
  failed.head = "softmax";
  failed.head_index = 0;
  failed.rank = 0;
  failed.seed = 1;
  failed.state = v1::CELL_STATE_FAILED;
  failed.result = nullptr;
  failed.failure = "out of memory (attempt 3 of 3)";
  failed.worker_id = "w-b";
  failed.attempt = 3;
  failed.lease_id = 6;
  failed.finished_unix_ms = 2000;
  encoder->Add(failed);
  row.cell_id = 12;
  row.rank = 16;
  row.seed = 2;
  row.result = &c;
  row.finished_unix_ms = 3000;
  row.cached_from_cell_id = 10;
  encoder->Add(row);
}

TEST(ColumnsTest, WhatTheEncoderWritesTheDecoderReadsBack) {
  v1::QueryResultsResponse got;
  got.set_next_page_token("c12");
  ResultColumnsEncoder encoder(got.mutable_columns(), "sw-1");
  encoder.Expect(3);
  EncodeThreeRows(&encoder);
  encoder.Finish();
  const v1::ResultColumns& c = got.columns();
  // The tables hold each value once; the failure only where there is one.
  EXPECT_EQ(c.workers_size(), 2);
  EXPECT_EQ(c.worker_versions_size(), 1);
  EXPECT_EQ(c.devices_size(), 2);  // "cpu", and "" for the failed row
  EXPECT_EQ(c.facts_table_size(), 2);
  ASSERT_EQ(c.failure_row_size(), 1);
  EXPECT_EQ(c.failure_row(0), 1);
  // No test split anywhere: those lists go empty; the others keep a value per row.
  EXPECT_EQ(c.test_sequences_size(), 0);
  EXPECT_EQ(c.test_error_size(), 0);
  EXPECT_EQ(c.test_max_abs_error_size(), 0);
  EXPECT_EQ(c.train_error_size(), 3);
  ASSERT_TRUE(RowsFromColumns(&got).ok());
  EXPECT_EQ(Diff(got, Parse(kThreeRowsDecoded)), "");
}

TEST(ColumnsTest, EveryMetricOfATestSplitRoundTrips) {
  SeedResult r;
  r.seed = 7;
  r.train = {12, 0.875, 0.5, 0.5, 0.25};
  r.test = {4, 0.625, 0.25, 0.75, 3.5};
  r.final_loss = 0.03125;
  r.steps = 250;
  r.wall_seconds = 0.75;
  r.device = "cuda:0";
  r.facts = {12, 4, 6, 2, 5};
  SetMetric("first_exact_step", 150, &r);
  ResultColumnsRow row;
  row.cell_id = 3;
  row.head = "kernel/elu1";
  row.head_index = 0;
  row.rank = 2;
  row.seed = 7;
  row.state = v1::CELL_STATE_INVALID;
  row.result = &r;
  row.worker_id = "w";
  row.build_id = "b";
  row.torch_version = "t";
  row.cuda_version = "c";
  row.attempt = 2;
  row.lease_id = 9;
  row.finished_unix_ms = 42;
  v1::QueryResultsResponse got;
  ResultColumnsEncoder encoder(got.mutable_columns(), "sw-2");
  encoder.Add(row);
  encoder.Finish();
  ASSERT_TRUE(RowsFromColumns(&got).ok());
  v1::ResultRow want;
  want.set_sweep_id("sw-2");
  want.set_cell_id(3);
  want.set_head("kernel/elu1");
  want.set_rank(2);
  want.set_seed(7);
  want.set_state(v1::CELL_STATE_INVALID);
  FillProto(r, want.mutable_result());
  want.set_worker_id("w");
  want.mutable_worker_version()->set_build_id("b");
  want.mutable_worker_version()->set_torch_version("t");
  want.mutable_worker_version()->set_cuda_version("c");
  want.set_attempt(2);
  want.set_lease_id(9);
  want.set_finished_unix_ms(42);
  ASSERT_EQ(got.rows_size(), 1);
  EXPECT_EQ(Diff(got.rows(0), want), "");
}

// An optional metric travels as one column with the rows that lack it; a
// metric no row has is left out, and every row reads it as missing.
TEST(ColumnsTest, AnOptionalMetricIsSentWhereSomeRowHasIt) {
  v1::QueryResultsResponse some;
  {
    ResultColumnsEncoder encoder(some.mutable_columns(), "sw-4");
    EncodeThreeRows(&encoder);
    encoder.Finish();
  }
  EXPECT_EQ(some.columns().metrics_size(), 0);  // no row has one
  ASSERT_TRUE(RowsFromColumns(&some).ok());
  for (const v1::ResultRow& row : some.rows()) {
    EXPECT_FALSE(row.result().has_first_exact_step()) << row.cell_id();
  }
  SeedResult exact;
  exact.train = {8, 1, 1, 0, 0};
  SetMetric("first_exact_step", 60, &exact);
  SeedResult never = exact;
  never.train = {8, 0.5, 0, 1, 1};
  SetMetric("first_exact_step", std::nullopt, &never);
  v1::QueryResultsResponse got;
  ResultColumnsEncoder encoder(got.mutable_columns(), "sw-5");
  ResultColumnsRow row;
  row.state = v1::CELL_STATE_DONE;
  row.head = "softmax";
  for (const SeedResult* r : {&never, &exact, &never}) {
    row.result = r;
    encoder.Add(row);
    ++row.cell_id;
  }
  encoder.Finish();
  ASSERT_EQ(got.columns().metrics_size(), 1);
  const v1::MetricColumn& m = got.columns().metrics(0);
  EXPECT_EQ(m.name(), "first_exact_step");
  EXPECT_EQ(m.values_size(), 3);
  EXPECT_EQ(m.values(1), 60);
  ASSERT_EQ(m.missing_rows_size(), 2);
  EXPECT_EQ(m.missing_rows(0), 0);
  EXPECT_EQ(m.missing_rows(1), 2);
  v1::QueryResultsResponse bad = got;
  bad.mutable_columns()->mutable_metrics(0)->set_missing_rows(1, 0);
  absl::Status s = RowsFromColumns(&bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "columns.metrics[0].missing_rows[1]: 0 is not a row after the previous one (3 rows)");
  ASSERT_TRUE(RowsFromColumns(&got).ok());
  ASSERT_EQ(got.rows_size(), 3);
  EXPECT_FALSE(got.rows(0).result().has_first_exact_step());
  ASSERT_TRUE(got.rows(1).result().has_first_exact_step());
  EXPECT_EQ(got.rows(1).result().first_exact_step(), 60);
  EXPECT_FALSE(got.rows(2).result().has_first_exact_step());
}

// Every reply carries the coordinator's metric table, whether or not a row
// has a metric; a real metric (the test loss, on a test split) rides its own
// column and reads back into SeedResult.metrics.
TEST(ColumnsTest, TheMetricTableTravelsAndEachMetricRoundTrips) {
  SeedResult r;
  r.train = {8, 1, 1, 0, 0};
  r.test = {4, 0.5, 0.5, 0.5, 0.75};
  r.facts.test_sequences = 4;
  SetMetric("final_test_loss", 0.375, &r);
  v1::QueryResultsResponse got;
  ResultColumnsEncoder encoder(got.mutable_columns(), "sw-6");
  ResultColumnsRow row;
  row.state = v1::CELL_STATE_DONE;
  row.head = "kernel/elu1";
  row.result = &r;
  encoder.Add(row);
  encoder.Finish();
  const v1::ResultColumns& c = got.columns();
  ASSERT_EQ(c.metric_table_size(), static_cast<int>(ResultMetrics().size()));
  for (int k = 0; k < c.metric_table_size(); ++k) {
    const ResultMetric& m = ResultMetrics()[static_cast<size_t>(k)];
    EXPECT_EQ(c.metric_table(k).name(), m.name);
    EXPECT_EQ(c.metric_table(k).integer(), m.integer);
    EXPECT_EQ(c.metric_table(k).label(), m.label);
    EXPECT_EQ(c.metric_table(k).test_split(), m.split == MetricSplit::kTest);
  }
  ASSERT_EQ(c.metrics_size(), 1);  // first_exact_step: no row has it
  EXPECT_EQ(c.metrics(0).name(), "final_test_loss");
  ASSERT_TRUE(RowsFromColumns(&got).ok());
  ASSERT_EQ(got.rows_size(), 1);
  EXPECT_EQ(got.rows(0).result().metrics().at("final_test_loss"), 0.375);
  EXPECT_EQ(got.rows(0).result().metrics().count("first_exact_step"), 0u);
  EXPECT_FALSE(got.rows(0).result().has_first_exact_step());
}

// The built-in table travels in every columns reply, in table order, each
// entry naming a ResultColumns field of its name and the SplitMetrics or
// SeedResult field it reads.
TEST(ColumnsTest, TheBuiltInTableTravelsAndNamesFieldsOfTheReply) {
  v1::QueryResultsResponse got;
  ResultColumnsEncoder encoder(got.mutable_columns(), "sw-7");
  encoder.Finish();
  const v1::ResultColumns& c = got.columns();
  ASSERT_EQ(c.built_in_table_size(), 13);
  for (int k = 0; k < c.built_in_table_size(); ++k) {
    const v1::MetricInfo& info = c.built_in_table(k);
    EXPECT_EQ(info.name(), kBuiltInMetrics[k].name);
    const auto* field = v1::ResultColumns::descriptor()->FindFieldByName(info.name());
    ASSERT_NE(field, nullptr) << info.name();
    EXPECT_TRUE(field->is_repeated()) << info.name();
    EXPECT_EQ(info.integer(), field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64)
        << info.name();
  }
  const v1::MetricInfo& train_error = c.built_in_table(BuiltInMetricIndex("train_error"));
  EXPECT_EQ(train_error.field(), "error");
  EXPECT_FALSE(train_error.test_split());
  EXPECT_EQ(train_error.empty(), 1.0);
  const v1::MetricInfo& test_sequences = c.built_in_table(BuiltInMetricIndex("test_sequences"));
  EXPECT_EQ(test_sequences.field(), "sequences");
  EXPECT_TRUE(test_sequences.test_split());
  EXPECT_TRUE(test_sequences.integer());
  EXPECT_EQ(test_sequences.empty(), 0.0);
  const v1::MetricInfo& loss = c.built_in_table(BuiltInMetricIndex("final_loss"));
  EXPECT_EQ(loss.field(), "final_loss");
  EXPECT_FALSE(loss.test_split());
  EXPECT_FALSE(loss.integer());
}

TEST(ColumnsTest, NoRowsEncodeAndDecodeToNoRows) {
  v1::QueryResultsResponse got;
  ResultColumnsEncoder encoder(got.mutable_columns(), "sw-3");
  encoder.Expect(100);
  encoder.Finish();
  EXPECT_EQ(got.columns().cell_id_size(), 0);
  ASSERT_TRUE(RowsFromColumns(&got).ok());
  EXPECT_EQ(got.rows_size(), 0);
  EXPECT_FALSE(got.has_columns());
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
