// Files written by older binaries, opened by this one: the migrations to
// versions 11 to 21 (the optional metrics, recipes, workers bound to their
// token, quarantines that hold, sweeps' notes and tags, held tokens,
// learning curves, rung scores, results versions, column blocks, done cells
// out of the lease index), and a metric's columns added when the store
// opens a file without them. Up to version 10: schema_test.cc.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/spec/result_metrics.h"
#include "common/status_macros.h"
#include "common/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/results/result_blocks.h"
#include "server/core/results/result_schema.h"
#include "server/core/schema.h"
#include "server/core/schema_test_util.h"
#include "server/core/sqlite.h"
#include "server/core/store.h"
#include "server/core/store_test_util.h"

namespace ranksweep::server {
namespace {

// Version 11: the optional metrics' columns. A result stored before reads
// them as missing.
TEST(StoreTest, MigrationToVersion11ReadsOldResultsWithoutTheOptionalMetrics) {
  TempDir dir;
  WriteOldFileWithFiveCells(
      dir, DowngradeToVersion10,
      "INSERT INTO results (cell_id, sweep_id, head_index, rank, seed, state, lease_id, attempt, "
      "worker_id, worker_build_id, worker_torch_version, worker_cuda_version, failure, "
      "finished_ms, cached_from, train_sequences, steps) VALUES "
      "(1, 'sw-1', 0, 4, 1, 3, 11, 1, 'wk-a', 'b1', '', '', '', 1000, 0, 4, 30)");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  SeedResult r;
  SetMetric("first_exact_step", 5, &r);  // the read must clear it
  absl::Status s = (*store)->Read([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(Statement q,
                     c.Prepare("SELECT " + ResultColumns() + " FROM results WHERE cell_id = 1"));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::NotFoundError("no result of cell 1");
    ReadResultColumns(q, 0, &r);
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(GetMetric("first_exact_step", r).has_value());
  EXPECT_EQ(r.steps, 30);
  EXPECT_EQ(r.train.sequences, 4);
}

// A metric added to the table (a row of common/spec/result_metrics.h, no
// numbered migration) gets its `results` column when the store opens a file
// that lacks it, at the same schema version; a result stored before reads it
// as missing, and a result stored after keeps it.
TEST(StoreTest, AMetricAddedToTheTableGetsItsColumnWhenTheStoreOpens) {
  TempDir dir;
  WriteOldFileWithFiveCells(
      dir, DropTableMetricColumns,
      "INSERT INTO results (cell_id, sweep_id, head_index, rank, seed, state, lease_id, attempt, "
      "worker_id, worker_build_id, worker_torch_version, worker_cuda_version, failure, "
      "finished_ms, cached_from, train_sequences, steps) VALUES "
      "(1, 'sw-1', 0, 4, 1, 3, 11, 1, 'wk-a', 'b1', '', '', '', 1000, 0, 4, 30)");
  auto columns_of_results = [](Store& store) {
    return RowsAsText(store, "SELECT name FROM pragma_table_info('results') ORDER BY cid", 1);
  };
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  auto fresh = Store::Open(File(dir, "b.db"));  // a new file, for its columns
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  const std::vector<std::string> got = columns_of_results(**store);
  EXPECT_EQ(got, columns_of_results(**fresh));
  EXPECT_EQ(got.back(), "final_test_loss ");
  EXPECT_EQ(RowsAsText(**store,
                       "SELECT type FROM pragma_table_info('results') "
                       "WHERE name IN ('first_exact_step', 'final_test_loss') ORDER BY cid",
                       1),
            (std::vector<std::string>{"INTEGER ", "REAL "}));
  EXPECT_EQ(RowsAsText(**store, "SELECT COUNT(*) FROM results WHERE final_test_loss IS NULL", 1),
            (std::vector<std::string>{"1 "}));
  SeedResult r;
  SetMetric("final_test_loss", 0.5, &r);  // the read must clear it
  absl::Status s = (*store)->Read([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(Statement q,
                     c.Prepare("SELECT " + ResultColumns() + " FROM results WHERE cell_id = 1"));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::NotFoundError("no result of cell 1");
    ReadResultColumns(q, 0, &r);
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(GetMetric("final_test_loss", r).has_value());
  EXPECT_EQ(r.steps, 30);
}

TEST(StoreTest, MigrationToVersion12PutsEveryCellResultAndGroupInRecipe0) {
  TempDir dir;
  WriteOldFileWithFiveCells(
      dir, DowngradeToVersion11,
      "INSERT INTO results (cell_id, sweep_id, head_index, rank, seed, state, lease_id, attempt, "
      "worker_id, finished_ms, train_error, task_key) VALUES "
      "(1, 'sw-1', 0, 4, 1, 3, 1, 1, 'wk', 0, 0.0, 'k'), "
      "(5, 'sw-1', 1, 8, 1, 3, 5, 1, 'wk', 0, 0.25, 'k2');"
      "INSERT INTO result_groups (sweep_id, head_index, rank, n, exact_seeds, test_n, "
      "test_exact_seeds, train_error_mean, trained_n) VALUES "
      "('sw-1', 0, 4, 1, 1, 0, 0, 0.0, 1), ('sw-1', 1, 8, 1, 0, 0, 0, 0.25, 1)");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_THAT(RowsAsText(**store, "SELECT id, head_index, rank, recipe, seed, state FROM cells "
                                  "ORDER BY id", 6),
              ::testing::ElementsAre("1 0 4 0 1 3 ", "2 0 4 0 2 3 ", "3 0 4 0 3 3 ",
                                     "4 0 4 0 4 4 ", "5 1 8 0 1 3 "));
  EXPECT_THAT(RowsAsText(**store, "SELECT cell_id, recipe, task_key FROM results ORDER BY cell_id",
                         3),
              ::testing::ElementsAre("1 0 k ", "5 0 k2 "));
  EXPECT_THAT(RowsAsText(**store, "SELECT head_index, rank, recipe, n, train_error_mean, "
                                  "trained_n FROM result_groups ORDER BY head_index", 6),
              ::testing::ElementsAre("0 4 0 1 0.0 1 ", "1 8 0 1 0.25 1 "));
  // The same (head, rank, seed) may now exist once per recipe, and only once.
  absl::Status s = (*store)->Write([](Connection& c) {
    return c.Exec("INSERT INTO cells (sweep_id, head_index, rank, recipe, seed, state) "
                  "VALUES ('sw-1', 0, 4, 1, 1, 1)");
  });
  EXPECT_TRUE(s.ok()) << s;
  s = (*store)->Write([](Connection& c) {
    return c.Exec("INSERT INTO cells (sweep_id, head_index, rank, recipe, seed, state) "
                  "VALUES ('sw-1', 0, 4, 1, 1, 1)");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  // Foreign keys are on again after the migration.
  s = (*store)->Write([](Connection& c) {
    return c.Exec("INSERT INTO cells (sweep_id, head_index, rank, seed, state) "
                  "VALUES ('sw-none', 0, 4, 1, 1)");
  });
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("FOREIGN KEY"));
}

TEST(StoreTest, MigrationToVersion13KeepsWorkersUnboundUntilTheyRegisterAgain) {
  TempDir dir;
  WriteOldFileWithFiveCells(
      dir, DowngradeToVersion12,
      "INSERT INTO workers (id, hostname, device, device_name, memory_bytes, slots, build_id, "
      "torch_version, cuda_version, registered_ms, last_seen_ms, completed) VALUES "
      "('wk-old', 'h', 'cpu', 'c', 0, 1, 'b', 't', '', 1, 2, 4)");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_THAT(RowsAsText(**store, "SELECT id, completed, owner, session_hash FROM workers", 4),
              ::testing::ElementsAre("wk-old 4   "));
}

TEST(StoreTest, MigrationToVersion14LeavesEveryWorkerInGoodStanding) {
  TempDir dir;
  WriteOldFileWithFiveCells(
      dir, DowngradeToVersion13,
      "INSERT INTO workers (id, hostname, device, device_name, memory_bytes, slots, build_id, "
      "torch_version, cuda_version, registered_ms, last_seen_ms, completed) VALUES "
      "('wk-old', 'h', 'cpu', 'c', 0, 1, 'b', 't', '', 1, 2, 4)");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_THAT(RowsAsText(**store, "SELECT id, quarantined_ms FROM workers", 2),
              ::testing::ElementsAre("wk-old 0 "));
}

TEST(StoreTest, MigrationToVersion15KeepsEverySweepWithNoNoteTagOrArchiveMark) {
  TempDir dir;
  {
    auto store = Store::Open(File(dir, "a.db"));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)
                    ->Write([](Connection& c) -> absl::Status {
                      RETURN_IF_ERROR(DowngradeToVersion14(c));
                      return c.Exec(
                          "INSERT INTO sweeps (id, name, owner, spec_json, priority, state, "
                          "created_ms) VALUES ('sw-1', 'n', 'o', '{}', 0, 2, 0)");
                    })
                    .ok());
  }
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_EQ(CountRows(**store, "sweeps"), 1);
  EXPECT_EQ(CountRows(**store, "sweep_notes"), 0);
  EXPECT_EQ(CountRows(**store, "sweep_tags"), 0);
}

TEST(StoreTest, MigrationToVersion16HoldsNoToken) {
  TempDir dir;
  WriteOldFileWithFiveCells(
      dir, DowngradeToVersion15,
      "INSERT INTO workers (id, hostname, device, device_name, memory_bytes, slots, build_id, "
      "torch_version, cuda_version, registered_ms, last_seen_ms, completed, owner) VALUES "
      "('wk-old', 'h', 'cpu', 'c', 0, 1, 'b', 't', '', 1, 2, 4, 'pool')");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_EQ(CountRows(**store, "held_tokens"), 0);
  EXPECT_THAT(RowsAsText(**store, "SELECT id, owner, quarantined_ms FROM workers", 3),
              ::testing::ElementsAre("wk-old pool 0 "));
}

// Version 19: the results version moves with every result_packs row
// replaced, updated or deleted, whichever statement does it, and starts
// from nothing for rows written before. (Version 19 moved it for an insert
// too; since version 22 the statement that adds a row does that, once per
// transaction: MigrationToVersion22LeavesAddedRowsToTheirWriter.)
TEST(StoreTest, MigrationToVersion19CountsEveryResultPackChangeFromThenOn) {
  TempDir dir;
  WriteOldFileWithFiveCells(dir, DowngradeToVersion18,
                            "INSERT INTO result_packs (cell_id, sweep_id, packed) VALUES "
                            "(1, 'sw-1', x'00')");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_EQ(CountRows(**store, "result_versions"), 0);
  auto version_after = [&](const char* sql) {
    EXPECT_TRUE((*store)->Write([&](Connection& c) { return c.Exec(sql); }).ok()) << sql;
    return RowsAsText(**store, "SELECT sweep_id, version FROM result_versions ORDER BY 1", 2);
  };
  EXPECT_THAT(version_after("INSERT INTO result_packs VALUES (2, 'sw-1', x'01')"),
              ::testing::ElementsAre());
  // A replaced row is deleted, which moves it (the writer runs with
  // recursive_triggers since schema 20).
  EXPECT_THAT(version_after("INSERT OR REPLACE INTO result_packs VALUES (2, 'sw-1', x'02')"),
              ::testing::ElementsAre("sw-1 1 "));
  EXPECT_THAT(version_after("UPDATE result_packs SET packed = x'03' WHERE cell_id = 2"),
              ::testing::ElementsAre("sw-1 2 "));
  // A row moved to another sweep moves both.
  EXPECT_THAT(version_after("UPDATE result_packs SET sweep_id = 'sw-2' WHERE cell_id = 2"),
              ::testing::ElementsAre("sw-1 3 ", "sw-2 1 "));
  // Deleting every row keeps the count going: it never restarts.
  EXPECT_THAT(version_after("DELETE FROM result_packs"),
              ::testing::ElementsAre("sw-1 4 ", "sw-2 2 "));
  // A statement that writes no row moves nothing.
  EXPECT_THAT(version_after("DELETE FROM result_packs WHERE cell_id = 99"),
              ::testing::ElementsAre("sw-1 4 ", "sw-2 2 "));
}

// Version 20: column blocks, each deleted when a result row in its range is
// replaced, updated or deleted, whichever statement does it. A plain insert
// deletes none: a block is stored only over cells that all have their row
// (result_blocks.h), so none can be added inside one.
TEST(StoreTest, MigrationToVersion20DeletesABlockWhenARowInItsRangeIsWritten) {
  TempDir dir;
  WriteOldFileWithFiveCells(dir, DowngradeToVersion19,
                            "INSERT INTO result_packs (cell_id, sweep_id, packed) VALUES "
                            "(1, 'sw-1', x'00')");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_EQ(CountRows(**store, "result_blocks"), 0);
  // Blocks of sw-1 over cells 10-19 and 30-39, and of sw-2 over 10-19.
  auto blocks_after = [&](const char* sql) {
    EXPECT_TRUE((*store)
                    ->Write([&](Connection& c) -> absl::Status {
                      RETURN_IF_ERROR(c.Exec("DELETE FROM result_blocks"));
                      RETURN_IF_ERROR(c.Exec(
                          "INSERT INTO result_blocks (sweep_id, first_cell_id, last_cell_id, "
                          "rows, layout, columns) VALUES ('sw-1', 10, 19, 10, 'l', x'00'), "
                          "('sw-1', 30, 39, 10, 'l', x'00'), ('sw-2', 10, 19, 10, 'l', x'00')"));
                      return c.Exec(sql);
                    })
                    .ok())
        << sql;
    return RowsAsText(**store,
                      "SELECT sweep_id, first_cell_id FROM result_blocks ORDER BY 1, 2", 2);
  };
  // A new row deletes none.
  EXPECT_THAT(blocks_after("INSERT INTO result_packs VALUES (25, 'sw-1', x'01')"),
              ::testing::ElementsAre("sw-1 10 ", "sw-1 30 ", "sw-2 10 "));
  EXPECT_THAT(blocks_after("INSERT INTO result_packs VALUES (12, 'sw-1', x'01')"),
              ::testing::ElementsAre("sw-1 10 ", "sw-1 30 ", "sw-2 10 "));
  // A replaced row, an updated one or a deleted one in a range deletes that
  // block only.
  EXPECT_THAT(blocks_after("INSERT OR REPLACE INTO result_packs VALUES (12, 'sw-1', x'02')"),
              ::testing::ElementsAre("sw-1 30 ", "sw-2 10 "));
  EXPECT_THAT(blocks_after("UPDATE result_packs SET packed = x'03' WHERE cell_id = 12"),
              ::testing::ElementsAre("sw-1 30 ", "sw-2 10 "));
  EXPECT_THAT(blocks_after("INSERT INTO result_packs VALUES (39, 'sw-1', x'01')"),
              ::testing::ElementsAre("sw-1 10 ", "sw-1 30 ", "sw-2 10 "));
  EXPECT_THAT(blocks_after("DELETE FROM result_packs WHERE cell_id = 39"),
              ::testing::ElementsAre("sw-1 10 ", "sw-2 10 "));
  // A row moved to another sweep deletes the blocks of both its places.
  EXPECT_THAT(blocks_after("UPDATE result_packs SET sweep_id = 'sw-2' WHERE cell_id = 12"),
              ::testing::ElementsAre("sw-1 30 "));
  // The row written at version 21 (its insert trigger), and the rows of
  // sw-1 replaced, updated or deleted since; the inserts here, with no
  // writer to note them, count nothing.
  EXPECT_EQ(RowsAsText(**store, "SELECT version FROM result_versions WHERE sweep_id = 'sw-1'", 1),
            std::vector<std::string>{"5 "});
}

TEST(StoreTest, MigrationToVersion18KeepsEveryCellWithNoRungScore) {
  TempDir dir;
  WriteOldFileWithFiveCells(dir, DowngradeToVersion17, "");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_EQ(CountRows(**store, "cells"), 5);
  EXPECT_EQ(CountRows(**store, "rung_scores"), 0);
}

TEST(StoreTest, MigrationToVersion17KeepsEveryResultWithNoCurve) {
  TempDir dir;
  {
    auto store = Store::Open(File(dir, "a.db"));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)
                    ->Write([](Connection& c) -> absl::Status {
                      RETURN_IF_ERROR(DowngradeToVersion16(c));
                      return c.Exec(
                          "INSERT INTO sweeps (id, name, owner, spec_json, priority, state, "
                          "created_ms) VALUES ('sw-1', 'n', 'o', '{}', 0, 2, 0)");
                    })
                    .ok());
  }
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_EQ(CountRows(**store, "sweeps"), 1);
  EXPECT_EQ(CountRows(**store, "results"), 0);
}

// Version 21: a done cell keeps its lease id but leaves the lease index,
// which then holds the leases a lookup can still answer about: live ones,
// and those of cells failed, cancelled or pruned under them.
TEST(StoreTest, MigrationToVersion21KeepsDoneCellsOutOfTheLeaseIndex) {
  TempDir dir;
  // Cells 1, 2, 3 and 5 are done and 4 failed; each gets lease 10 + id, and
  // cell 2 is leased again.
  WriteOldFileWithFiveCells(dir, DowngradeToVersion20,
                            "UPDATE cells SET lease_id = 10 + id; "
                            "UPDATE cells SET state = 2 WHERE id = 2");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  // INDEXED BY fails to prepare unless the index exists and serves the
  // query, and a scan of a partial index yields only the rows it holds.
  EXPECT_THAT(RowsAsText(**store,
                         "SELECT id, lease_id FROM cells INDEXED BY cells_by_lease "
                         "WHERE lease_id != 0 AND state != 3 ORDER BY lease_id",
                         2),
              ::testing::ElementsAre("2 12 ", "4 14 "));
  EXPECT_THAT(RowsAsText(**store, "SELECT lease_id FROM cells WHERE state = 3 ORDER BY id", 1),
              ::testing::ElementsAre("11 ", "13 ", "15 "));
}

// Version 22: no trigger moves the results version when a row is added;
// the statement that adds one owes the move to its transaction's commit
// (NoteResultsAdded), once however many rows it adds. The count kept so far
// stays, and the other triggers stay.
TEST(StoreTest, MigrationToVersion22LeavesAddedRowsToTheirWriter) {
  TempDir dir;
  WriteOldFileWithFiveCells(dir, DowngradeToVersion21,
                            "INSERT INTO result_packs (cell_id, sweep_id, packed) VALUES "
                            "(1, 'sw-1', x'00'), (2, 'sw-1', x'00')");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_EQ(Store::kSchemaVersion, 22);
  EXPECT_THAT(RowsAsText(**store,
                         "SELECT name FROM sqlite_master WHERE type = 'trigger' AND "
                         "tbl_name = 'result_packs' ORDER BY name",
                         1),
              ::testing::ElementsAre("result_blocks_on_delete ", "result_blocks_on_update ",
                                     "result_packs_deleted ", "result_packs_updated "));
  const char* kVersion = "SELECT version FROM result_versions WHERE sweep_id = 'sw-1'";
  EXPECT_THAT(RowsAsText(**store, kVersion, 1), ::testing::ElementsAre("2 "));
  // Three rows added by one transaction that notes each: one move.
  ASSERT_TRUE((*store)
                  ->Write([](Connection& c) -> absl::Status {
                    for (int cell : {3, 4, 5}) {
                      RETURN_IF_ERROR(c.Exec(absl::StrCat(
                          "INSERT INTO result_packs VALUES (", cell, ", 'sw-1', x'01')")));
                      RETURN_IF_ERROR(NoteResultsAdded(c, "sw-1"));
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_THAT(RowsAsText(**store, kVersion, 1), ::testing::ElementsAre("3 "));
}

}  // namespace
}  // namespace ranksweep::server
