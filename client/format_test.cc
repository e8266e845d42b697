// The writers of sweeps, per-seed rows and workers, and the shared cells,
// tables and parsers (format.h), and the progress and status views
// (sweep_views.h). Groups and summaries: format_groups_test.cc.
#include "client/format.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/format_test_util.h"
#include "client/json_writer.h"
#include "client/sweep_views.h"
#include "proto/columns.h"
#include "proto/convert.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ranksweep::client {
namespace {

using ::testing::HasSubstr;

v1::SweepInfo Sweep(int64_t total, int64_t pending, int64_t leased, int64_t done,
                    int64_t failed, double mean_seconds) {
  v1::SweepInfo s;
  s.set_sweep_id("s-1");
  s.set_name("demo");
  s.set_state(v1::SWEEP_STATE_RUNNING);
  s.mutable_counts()->set_total(total);
  s.mutable_counts()->set_pending(pending);
  s.mutable_counts()->set_leased(leased);
  s.mutable_counts()->set_done(done);
  s.mutable_counts()->set_failed(failed);
  s.set_mean_cell_seconds(mean_seconds);
  s.set_created_unix_ms(1700000000000);  // 2023-11-14 22:13:20 UTC
  return s;
}

TEST(FormatTest, TableAlignsColumnsWithoutTrailingSpaces) {
  Table t;
  t.header = {"A", "NUM", "C"};
  t.right_align = {false, true, false};
  t.rows = {{"long-name", "7", ""}, {"x", "1234", "z"}};
  EXPECT_EQ(RenderTable(t),
            "A           NUM  C\n"
            "long-name     7\n"
            "x          1234  z\n");
}

TEST(FormatTest, CsvQuotesOnlyWhenNeeded) {
  Table t;
  t.header = {"a", "b"};
  t.rows = {{"plain", "has,comma"}, {"say \"hi\"", "line\nbreak"}};
  EXPECT_EQ(RenderCsv(t),
            "a,b\n"
            "plain,\"has,comma\"\n"
            "\"say \"\"hi\"\"\",\"line\nbreak\"\n");
}

TEST(FormatTest, Durations) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(44.6), "45s");
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
  EXPECT_EQ(FormatDuration(183600), "2d03h");
  EXPECT_EQ(FormatDuration(-1), "?");
}

TEST(FormatTest, EtaUsesMeanCellTimeAndRunningCells) {
  // 30 pending + 10 running = 40 cells, 2 s each, 10 at a time: 8 s.
  EXPECT_DOUBLE_EQ(EstimateEtaSeconds(Sweep(48, 30, 10, 8, 0, 2.0)), 8.0);
  // Nothing running: one at a time.
  EXPECT_DOUBLE_EQ(EstimateEtaSeconds(Sweep(48, 40, 0, 8, 0, 2.0)), 80.0);
  // No cell finished yet: unknown.
  EXPECT_DOUBLE_EQ(EstimateEtaSeconds(Sweep(48, 48, 0, 0, 0, 0.0)), -1.0);
  EXPECT_DOUBLE_EQ(EstimateEtaSeconds(Sweep(48, 0, 0, 48, 0, 2.0)), 0.0);
}

TEST(FormatTest, ProgressLine) {
  EXPECT_EQ(ProgressLine(Sweep(48, 30, 10, 7, 1, 2.0)),
            "[###.................] 7/48 done  10 running  1 failed  ETA 8s");
  EXPECT_EQ(ProgressLine(Sweep(48, 48, 0, 0, 0, 0.0), 10),
            "[..........] 0/48 done  0 running  0 failed  ETA ?");
  v1::SweepInfo done = Sweep(4, 0, 0, 3, 0, 1.0);
  done.mutable_counts()->set_cancelled(1);
  done.set_state(v1::SWEEP_STATE_CANCELLED);
  EXPECT_EQ(ProgressLine(done, 8),
            "[########] 3/4 done  0 running  0 failed  1 cancelled  CANCELLED");
}

TEST(FormatTest, SweepsTable) {
  v1::SweepInfo a = Sweep(48, 30, 10, 7, 1, 2.0);
  v1::SweepInfo b = Sweep(4, 0, 0, 4, 0, 1.0);
  b.set_sweep_id("s-22");
  b.set_name("witness-m16");
  b.set_state(v1::SWEEP_STATE_DONE);
  EXPECT_EQ(RenderTable(SweepsTable({a, b}, absl::UTCTimeZone())),
            "ID    NAME         STATE    DONE/TOTAL  FAILED  CREATED\n"
            "s-1   demo         RUNNING        7/48       1  2023-11-14 22:13:20\n"
            "s-22  witness-m16  DONE            4/4       0  2023-11-14 22:13:20\n");
}

TEST(FormatTest, SweepStatusText) {
  v1::SweepInfo s = Sweep(48, 30, 10, 7, 1, 2.0);
  s.add_recent_failures("cell kernel/elu1 r=2 seed=1: out of memory");
  EXPECT_EQ(SweepStatusText(s, absl::UTCTimeZone()),
            "sweep:      s-1\n"
            "name:       demo\n"
            "state:      RUNNING\n"
            "priority:   0\n"
            "cells:      48 total, 7 done, 10 running, 30 pending, 1 failed, 0 cancelled\n"
            "mean cell:  2.00s\n"
            "eta:        8s\n"
            "created:    2023-11-14 22:13:20\n"
            "finished:   -\n"
            "recent failures:\n"
            "  cell kernel/elu1 r=2 seed=1: out of memory\n");
}

TEST(FormatTest, ResultRowsTable) {
  v1::ResultRow failed;
  failed.set_head("softmax");
  failed.set_rank(0);
  failed.set_seed(2);
  failed.set_state(v1::CELL_STATE_FAILED);
  failed.set_failure("boom");
  v1::ResultRow exact = DoneRow("kernel/elu1", 8, 1, 0, 100, 0.5);
  exact.mutable_result()->set_first_exact_step(150);
  (*exact.mutable_result()->mutable_metrics())["final_test_loss"] = 0.0625;
  EXPECT_EQ(RenderTable(ResultRowsTable({DoneRow("kernel/elu1", 8, 0, 0.125, 0, 0), exact,
                                         failed})),
            "HEAD         RANK  SEED  STATE   TRAIN_ERR  TEST_ERR  POS_ACC  STEPS  EXACT_AT  TEST_LOSS  "
            "SECONDS  WORKER\n"
            "kernel/elu1     8     0  DONE       0.1250         -   0.9375    150         -          -  "
            "    2.2  w-1\n"
            "kernel/elu1     8     1  DONE       0.0000    0.5000   1.0000    150       150     0.0625  "
            "    2.2  w-1\n"
            "softmax         -     2  FAILED          -         -        -      -         -          -  "
            "      -  -\n");
}

TEST(FormatTest, ResultRowsCsvCarriesProvenance) {
  v1::ResultRow exact = DoneRow("kernel/elu1", 8, 1, 0, 100, 0.5);
  exact.mutable_result()->set_first_exact_step(120);
  const std::string csv = ResultRowsCsv({DoneRow("kernel/elu1", 8, 1, 0, 100, 0.5), exact});
  EXPECT_EQ(csv,
            "sweep_id,cell_id,head,head_index,rank,seed,state,train_sequences,"
            "train_position_accuracy,train_exact_accuracy,train_error,train_max_abs_error,"
            "test_sequences,test_position_accuracy,test_exact_accuracy,test_error,"
            "test_max_abs_error,final_loss,steps,wall_seconds,device,failure,worker_id,"
            "build_id,torch_version,cuda_version,attempt,lease_id,finished_unix_ms,"
            "cached_from_cell_id,first_exact_step,final_test_loss\n"
            "s-1,11,kernel/elu1,0,8,1,DONE,64,1,0,0,0,100,0,0,0.5,0,0,150,2.25,cpu,,w-1,0.1.0+abc,,,"
            "1,42,0,,,\n"
            "s-1,11,kernel/elu1,0,8,1,DONE,64,1,0,0,0,100,0,0,0.5,0,0,150,2.25,cpu,,w-1,0.1.0+abc,,,"
            "1,42,0,,120,\n");
  // In JSON a missing metric is null, a present one a number.
  const std::string json = ResultRowsJson({DoneRow("kernel/elu1", 8, 1, 0, 100, 0.5), exact});
  EXPECT_THAT(json, ::testing::HasSubstr("\"first_exact_step\":null,\"final_test_loss\":null}"));
  EXPECT_THAT(json, ::testing::HasSubstr("\"first_exact_step\":120,\"final_test_loss\":null}"));
}

// Written page by page (the CLI prints each page as it arrives), both forms
// are exactly the all-at-once text, whatever the page boundaries.
TEST(FormatTest, ResultRowsWriterPageByPageIsTheWholeText) {
  v1::ResultRow failed = DoneRow("softmax", 0, 2, 0, 0, 0);
  failed.set_state(v1::CELL_STATE_FAILED);
  failed.clear_result();
  failed.set_failure("worker \"w-2\" lost, then: out of memory\nretry");
  const std::vector<v1::ResultRow> rows = {DoneRow("kernel/elu1", 8, 0, 0.125, 0, 0), failed,
                                           DoneRow("kernel/elu1", 8, 1, 0, 100, 0.5)};
  for (OutputFormat format : {OutputFormat::kCsv, OutputFormat::kJson}) {
    const std::string whole =
        format == OutputFormat::kCsv ? ResultRowsCsv(rows) : ResultRowsJson(rows);
    for (size_t page = 1; page <= rows.size(); ++page) {
      ResultRowsWriter writer(format);
      std::string text, printed;
      writer.Begin(&text);
      for (size_t i = 0; i < rows.size(); ++i) {
        writer.Add(rows[i], &text);
        if ((i + 1) % page == 0) {
          printed += text;
          text.clear();
        }
      }
      writer.End(&text);
      printed += text;
      EXPECT_EQ(printed, whole) << "page of " << page;
    }
  }
  EXPECT_THAT(ResultRowsCsv(rows),
              ::testing::HasSubstr(",FAILED,,,,,,,,,,,,,,,\"worker \"\"w-2\"\" lost, then: out of "
                                   "memory\nretry\",w-1,"));
  EXPECT_EQ(ResultRowsCsv({}),
            "sweep_id,cell_id,head,head_index,rank,seed,state,train_sequences,"
            "train_position_accuracy,train_exact_accuracy,train_error,train_max_abs_error,"
            "test_sequences,test_position_accuracy,test_exact_accuracy,test_error,"
            "test_max_abs_error,final_loss,steps,wall_seconds,device,failure,worker_id,"
            "build_id,torch_version,cuda_version,attempt,lease_id,finished_unix_ms,"
            "cached_from_cell_id,first_exact_step,final_test_loss\n");
}

// `results --format csv|json` prints straight from the columns of each
// reply: the same text as from its rows.
TEST(FormatTest, ResultRowsWriterReadsColumnsAsItReadsRows) {
  v1::ResultRow failed = DoneRow("softmax", 0, 2, 0, 0, 0);
  failed.set_head_index(1);
  failed.set_state(v1::CELL_STATE_FAILED);
  failed.clear_result();
  failed.set_failure("out of memory");
  std::vector<v1::ResultRow> rows = {DoneRow("kernel/elu1", 8, 0, 0.125, 0, 0), failed,
                                     DoneRow("kernel/elu1", 8, 1, 0, 100, 0.5)};
  // Columns always carry a done row's facts (a table entry).
  rows[0].mutable_result()->mutable_facts()->set_train_sequences(64);
  rows[2].mutable_result()->mutable_facts()->set_train_sequences(64);
  rows[2].mutable_result()->set_first_exact_step(100);
  v1::ResultColumns columns;
  ResultColumnsEncoder encoder(&columns, "s-1");
  for (const v1::ResultRow& row : rows) {
    const SeedResult result = FromProto(row.result());
    ResultColumnsRow r;
    r.cell_id = row.cell_id();
    r.head = row.head();
    r.head_index = row.head_index();
    r.rank = row.rank();
    r.seed = row.seed();
    r.state = row.state();
    r.result = row.has_result() ? &result : nullptr;
    r.failure = row.failure();
    r.worker_id = row.worker_id();
    r.build_id = row.worker_version().build_id();
    r.attempt = row.attempt();
    r.lease_id = row.lease_id();
    encoder.Add(r);
  }
  encoder.Finish();
  ASSERT_TRUE(CheckColumns(columns).ok());
  for (OutputFormat format : {OutputFormat::kCsv, OutputFormat::kJson}) {
    ResultRowsWriter writer(format);
    std::string text;
    writer.Begin(&text);
    writer.AddColumns(columns, &text);
    writer.End(&text);
    EXPECT_EQ(text, format == OutputFormat::kCsv ? ResultRowsCsv(rows) : ResultRowsJson(rows));
  }
}

TEST(FormatTest, SearchAndCacheLinesInStatusAndCachedRowsNameTheirSource) {
  v1::SweepInfo s;
  s.set_sweep_id("sw-1");
  s.set_state(v1::SWEEP_STATE_DONE);
  s.mutable_spec()->set_mode(v1::SWEEP_MODE_SEARCH);
  s.mutable_counts()->set_total(10);
  s.mutable_counts()->set_done(10);
  s.set_grid_cells(20);
  s.set_cached_cells(4);
  const std::string text = SweepStatusText(s, absl::UTCTimeZone());
  EXPECT_THAT(text, ::testing::HasSubstr("search:     10 of 20 grid cells created (10 saved)\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("cached:     4 done cells served from the result cache\n"));

  v1::ResultRow row = DoneRow("kernel/elu1", 8, 1, 0, 100, 0.5);
  row.set_cached_from_cell_id(7);
  const Table t = ResultRowsTable({row});
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0].back(), "w-1 (cached from cell 7)");
}

TEST(FormatTest, ResultRowsJsonHasWorkerAttemptAndLease) {
  const std::string json = ResultRowsJson({DoneRow("kernel/elu1", 8, 1, 0, 100, 0.5)});
  EXPECT_THAT(json, ::testing::StartsWith("[\n  {\"sweep_id\":\"s-1\""));
  EXPECT_THAT(json, ::testing::HasSubstr("\"worker_id\":\"w-1\""));
  EXPECT_THAT(json, ::testing::HasSubstr("\"worker_version\":{\"build_id\":\"0.1.0+abc\""));
  EXPECT_THAT(json, ::testing::HasSubstr("\"attempt\":1"));
  EXPECT_THAT(json, ::testing::HasSubstr("\"lease_id\":42,"));  // int64 as a JSON number
  EXPECT_THAT(json, ::testing::HasSubstr("\"state\":\"DONE\""));
  EXPECT_THAT(json, ::testing::HasSubstr("\"test\":{\"sequences\":100,"));
  EXPECT_EQ(ResultRowsJson({}), "[]\n");
  // One rule for "none": null, never the wire's 0 or "" (a done cell has
  // no failure; a result trained here was served from no other cell).
  EXPECT_THAT(json, ::testing::HasSubstr("\"failure\":null,"));
  EXPECT_THAT(json, ::testing::HasSubstr("\"cached_from_cell_id\":null,"));
  v1::ResultRow cached = DoneRow("kernel/elu1", 8, 1, 0, 100, 0.5);
  cached.set_cached_from_cell_id(7);
  cached.mutable_result()->mutable_facts()->set_distinct_queries(4);  // no bounds
  EXPECT_THAT(ResultRowsJson({cached}), ::testing::HasSubstr("\"cached_from_cell_id\":7,"));
  const nlohmann::json tree = nlohmann::json::parse(ResultRowsJson({cached}));
  EXPECT_TRUE(tree.at(0).at("result").at("facts").at("rank_lower_bound").is_null())
      << tree.dump();
}

// The direct writer prints exactly what the tree prints, for every kind of
// field: escapes and control characters, non-ASCII text, doubles of every
// shape (integral, tiny, huge, NaN, infinity), 64-bit extremes, enums,
// nested and repeated messages, repeated scalars, empty messages.
TEST(FormatTest, AppendMessageJsonWritesWhatTheTreeDumps) {
  v1::ResultRow row = DoneRow("kernel/elu1", 8, 1, 0, 100, 0.5);
  row.set_failure(std::string("quote \" backslash \\ tab \t nl \n cr \r bs \b ff \f ") +
                  std::string(1, '\x01') + std::string(1, '\x1f') + "\x7f é ∑ /");
  row.set_worker_id("\"escapes first and last\n");
  row.set_head("\\");
  row.set_seed(UINT64_MAX);
  row.set_lease_id(INT64_MIN);
  row.set_cell_id(INT64_MAX);
  v1::SeedResult* r = row.mutable_result();
  r->set_final_loss(1e-300);
  r->mutable_train()->set_error(5e-324);  // the smallest subnormal
  r->set_wall_seconds(1.5e300);
  r->mutable_train()->set_position_accuracy(1.0);
  r->mutable_train()->set_max_abs_error(std::nan(""));
  r->mutable_test()->set_max_abs_error(-std::numeric_limits<double>::infinity());
  r->mutable_test()->set_error(0.1 + 0.2);
  r->mutable_test()->set_exact_accuracy(-0.0);
  r->mutable_test()->set_position_accuracy(123456789012345680.0);

  v1::ResultGroup group;
  group.set_head("softmax");
  group.add_missing_seeds(3);
  group.add_missing_seeds(UINT64_MAX);
  group.mutable_train_error()->set_ci95(2.5e-5);

  v1::SweepInfo sweep;  // nested spec with repeated messages and enums
  sweep.mutable_spec()->add_heads()->set_kind(v1::HEAD_KIND_SOFTMAX);
  sweep.mutable_spec()->add_heads()->set_kind(v1::HEAD_KIND_KERNEL);
  sweep.mutable_spec()->add_ranks(1);
  sweep.mutable_spec()->add_ranks(256);

  const google::protobuf::Message* messages[] = {&row, &group, &sweep, &v1::ResultRow::default_instance(),
                                                 &v1::Aggregate::default_instance()};
  for (const google::protobuf::Message* m : messages) {
    std::string direct;
    AppendMessageJson(*m, &direct);
    EXPECT_EQ(direct, MessageJsonTree(*m).dump()) << m->GetTypeName();
  }
  std::string failure;
  AppendMessageJson(row, &failure);
  EXPECT_THAT(failure, ::testing::HasSubstr("\\u0001\\u001f\x7f é ∑ /\""));
  EXPECT_THAT(failure, ::testing::HasSubstr("\"seed\":18446744073709551615,"));
}

// One convention across table, CSV and JSON: a state is its short name
// everywhere, and a value that does not exist (no test split, no rank, no
// result) is "-" in the table, an empty cell in CSV and null in JSON, never
// a number (a missing test split used to read 1.0 in JSON).
TEST(FormatTest, TableCsvAndJsonAgreeOnStateNamesAndMissingValues) {
  v1::ResultRow no_test = DoneRow("softmax", 0, 0, 0.25, 0, 0);
  no_test.mutable_result()->mutable_test()->set_error(1.0);  // what a worker reports
  v1::ResultRow failed = DoneRow("kernel/elu1", 4, 1, 0, 0, 0);
  failed.set_state(v1::CELL_STATE_FAILED);
  failed.clear_result();

  const Table table = ResultRowsTable({no_test, failed});
  EXPECT_EQ(table.rows[0][1], "-");     // rank
  EXPECT_EQ(table.rows[0][3], "DONE");  // state
  EXPECT_EQ(table.rows[0][5], "-");     // test error

  const std::string csv = ResultRowsCsv({no_test, failed});
  EXPECT_THAT(csv, ::testing::HasSubstr("\ns-1,10,softmax,0,,0,DONE,64,0.875,0,0.25,0,0,,,,,0,150,"));
  EXPECT_THAT(csv, ::testing::HasSubstr("\ns-1,11,kernel/elu1,0,4,1,FAILED,,,,,,,,,,,"));

  const nlohmann::json json = nlohmann::json::parse(ResultRowsJson({no_test, failed}));
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0]["state"], "DONE");
  EXPECT_TRUE(json[0]["rank"].is_null());
  EXPECT_TRUE(json[0]["result"]["test"].is_null());
  EXPECT_EQ(json[0]["result"]["train"]["error"], 0.25);
  EXPECT_EQ(json[1]["state"], "FAILED");
  EXPECT_EQ(json[1]["rank"], 4);
  EXPECT_TRUE(json[1]["result"].is_null());

  v1::SweepInfo sweep;
  sweep.set_state(v1::SWEEP_STATE_CANCELLED);
  sweep.mutable_spec()->add_heads()->set_kind(v1::HEAD_KIND_MULTIHEAD_KERNEL);
  const nlohmann::ordered_json tree = MessageJsonTree(sweep);
  EXPECT_EQ(tree["state"], SweepStateName(v1::SWEEP_STATE_CANCELLED));
  EXPECT_EQ(tree["spec"]["heads"][0]["kind"], "MULTIHEAD_KERNEL");
}

// CSV floats are the shortest text that reads back as the same double (they
// were cut to 6 significant digits).
TEST(FormatTest, CsvFloatsReadBackAsTheSameDouble) {
  const double values[] = {0.1 + 0.2, 1.0 / 3, 2.0 / 3 * 1e-7, 123456.789012345, 0.5, 0};
  for (double v : values) {
    const std::string csv = ResultRowsCsv({DoneRow("kernel/elu1", 8, 1, v, 0, 0)});
    const std::string line = csv.substr(csv.find('\n') + 1);
    const std::vector<std::string> cells = absl::StrSplit(line, ',');
    ASSERT_GT(cells.size(), 10u);
    // train_error, after the cell's identity and three train columns.
    EXPECT_EQ(std::strtod(cells[10].c_str(), nullptr), v) << cells[10];
  }
  const std::string csv = ResultRowsCsv({DoneRow("kernel/elu1", 8, 1, 0.1 + 0.2, 0, 0)});
  EXPECT_THAT(csv, ::testing::HasSubstr(",DONE,64,0.85,0,0.30000000000000004,"));
}

TEST(FormatTest, WorkersTable) {
  v1::WorkerInfo w;
  w.set_worker_id("w-1");
  w.set_hostname("gpu7");
  w.set_device("cuda");
  w.set_device_name("cuda:0 (NVIDIA H200)");
  w.set_slots(2);
  w.set_leased_cells(64);
  w.set_completed_cells(1000);
  w.set_alive(true);
  w.set_last_seen_unix_ms(1700000000000);
  w.mutable_version()->set_build_id("0.1.0+abc");
  w.mutable_version()->set_torch_version("2.5.1");
  w.mutable_version()->set_cuda_version("12.4");
  EXPECT_EQ(RenderTable(WorkersTable({w}, absl::FromUnixMillis(1700000003000))),
            "ID   HOST  DEVICE                       SLOTS  LEASED  COMPLETED  ALIVE  LAST_SEEN"
            "  VERSION\n"
            "w-1  gpu7  cuda (cuda:0 (NVIDIA H200))      2      64       1000  yes       3s ago"
            "  0.1.0+abc torch 2.5.1 cuda 12.4\n");
}

TEST(FormatTest, ExitCodes) {
  EXPECT_EQ(ExitCodeForStatusCode(0), 0);
  EXPECT_EQ(ExitCodeForStatusCode(static_cast<int>(absl::StatusCode::kInvalidArgument)), 1);
  EXPECT_EQ(ExitCodeForStatusCode(static_cast<int>(absl::StatusCode::kUnavailable)), 2);
  EXPECT_EQ(ExitCodeForStatusCode(static_cast<int>(absl::StatusCode::kDeadlineExceeded)), 2);
  EXPECT_EQ(ExitCodeForStatusCode(static_cast<int>(absl::StatusCode::kNotFound)), 3);
  EXPECT_EQ(ExitCodeForStatusCode(static_cast<int>(absl::StatusCode::kInternal)), 5);
  EXPECT_EQ(ExitCodeForStatusCode(static_cast<int>(absl::StatusCode::kFailedPrecondition)), 5);
}

TEST(FormatTest, ParsersNameTheFlag) {
  EXPECT_EQ(ParseOutputFormat("yaml").status(),
            absl::InvalidArgumentError("--format: \"yaml\" is not one of table, csv, json"));
  EXPECT_EQ(*ParseSweepState("done"), v1::SWEEP_STATE_DONE);
  EXPECT_EQ(*ParseCellState("Failed"), v1::CELL_STATE_FAILED);
  EXPECT_EQ(ParseCellState("x").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ranksweep::client
