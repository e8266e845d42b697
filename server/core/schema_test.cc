// The schema (schema.h): its migrations in version order, the partial
// indexes as they shipped, and the migrations up to version 10 of files
// older binaries wrote.
#include "server/core/schema.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "common/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/results/packed_row.h"
#include "server/core/schema_test_util.h"
#include "server/core/sqlite.h"
#include "server/core/store.h"
#include "server/core/store_test_util.h"

namespace ranksweep::server {
namespace {

TEST(SchemaTest, MigrationsRunInVersionOrderUpToTheCurrentVersion) {
  const std::vector<Migration>& migrations = Migrations();
  ASSERT_EQ(migrations.size(), static_cast<size_t>(kSchemaVersion));
  for (size_t i = 0; i < migrations.size(); ++i) {
    EXPECT_EQ(migrations[i].version, static_cast<int>(i) + 1);
    // Every named state was replaced by its number.
    EXPECT_EQ(migrations[i].sql.find("{cell_"), std::string::npos) << migrations[i].version;
  }
}

std::string IndexSql(Connection& c, const std::string& name) {
  auto q = c.Prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?1");
  if (!q.ok()) return q.status().ToString();
  q->Bind(1, name);
  auto row = q->Step();
  if (!row.ok()) return row.status().ToString();
  return *row ? q->ColumnText(0) : "(none)";
}

// The partial indexes name the cell states they hold by the numbers stored
// in the rows, exactly as the migrations that made them shipped: a file
// migrated by an older binary and one migrated now have the same schema.
TEST(SchemaTest, PartialIndexesKeepTheStateNumbersTheyShippedWith) {
  std::unique_ptr<Connection> c = NewMemoryDatabase();
  ASSERT_NE(c, nullptr);
  auto version = ReadSchemaVersion(*c);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, kSchemaVersion);
  EXPECT_EQ(IndexSql(*c, "cells_pending_by_group"),
            "CREATE INDEX cells_pending_by_group ON cells(sweep_id, head_index, rank, recipe) "
            "WHERE state = 1");
  EXPECT_EQ(IndexSql(*c, "cells_by_lease"),
            "CREATE INDEX cells_by_lease ON cells(lease_id) WHERE lease_id != 0 AND state != 3");
  EXPECT_EQ(IndexSql(*c, "cells_leased"),
            "CREATE INDEX cells_leased ON cells(worker_id, lease_deadline_ms) WHERE state = 2");
  EXPECT_EQ(IndexSql(*c, "results_by_task"),
            "CREATE INDEX results_by_task ON results(task_key, seed, worker_build_id)\n"
            "  WHERE task_key != '' AND cached_from = 0 AND state = 3");
}

// ------------------------------------------------------------------ migrations
// Files written by older binaries, opened by this one: the migrations up to
// version 10 (later ones: schema_later_migrations_test.cc).

TEST(StoreTest, MigratesAVersion1FileToTheCurrentVersionKeepingItsData) {
  TempDir dir;
  {
    // A file as version 1 left it: no tokens table, no owner index, results
    // without their version 3 columns.
    auto store = Store::Open(File(dir, "a.db"));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)
                    ->Write([](Connection& c) -> absl::Status {
                      RETURN_IF_ERROR(DowngradeToVersion2(c));
                      absl::Status s = c.Exec(
                          "DROP TABLE tokens; DROP INDEX sweeps_by_owner; "
                          "UPDATE schema_version SET version = 1");
                      if (!s.ok()) return s;
                      return InsertMeta(c, "x", 42);
                    })
                    .ok());
  }
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_EQ(CountRows(**store, "schema_version"), 1);
  EXPECT_EQ(CountRows(**store, "tokens"), 0);
  EXPECT_EQ(CountRows(**store, "meta"), 3);
}

TEST(StoreTest, MigrationToVersion3MovesResultJsonIntoColumns) {
  TempDir dir;
  const std::string json =
      R"({"seed":7,"train":{"sequences":276,"position_accuracy":0.75,"exact_accuracy":0.5,)"
      R"("error":0.5,"max_abs_error":1.25},"test":{"sequences":0,"position_accuracy":0,)"
      R"("exact_accuracy":0,"error":1,"max_abs_error":0},"final_loss":0.125,"steps":1500,)"
      R"("wall_seconds":2.5,"device":"cpu","facts":{"train_sequences":276,"test_sequences":0,)"
      R"("distinct_queries":12,"rank_lower_bound":6,"rank_upper_bound":12}})";
  {
    auto store = Store::Open(File(dir, "a.db"));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)
                    ->Write([&](Connection& c) -> absl::Status {
                      RETURN_IF_ERROR(DowngradeToVersion2(c));
                      RETURN_IF_ERROR(c.Exec(
                          "INSERT INTO sweeps (id, name, owner, spec_json, priority, state, "
                          "created_ms) VALUES ('sw-1', 'n', 'o', '{}', 0, 2, 0)"));
                      RETURN_IF_ERROR(c.Exec(
                          "INSERT INTO cells (id, sweep_id, head_index, rank, seed, state) "
                          "VALUES (1, 'sw-1', 0, 4, 7, 3), (2, 'sw-1', 0, 4, 8, 4)"));
                      auto ins = c.Prepare(
                          "INSERT INTO results (cell_id, sweep_id, head_index, rank, seed, state, "
                          "lease_id, attempt, worker_id, train_error, result_json, finished_ms) "
                          "VALUES (?1, 'sw-1', 0, 4, ?2, ?3, 1, 1, 'wk', ?4, ?5, 0)");
                      if (!ins.ok()) return ins.status();
                      ins->Bind(1, 1).Bind(2, 7).Bind(3, 3).Bind(4, 0.5).Bind(5, json);
                      RETURN_IF_ERROR(ins->Run());
                      ins->Reset();
                      // A failed cell's row has no result.
                      ins->Bind(1, 2).Bind(2, 8).Bind(3, 4).BindNull(4).BindNull(5);
                      return ins->Run();
                    })
                    .ok());
  }
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  const std::vector<std::string> got = RowsAsText(
      **store,
      "SELECT train_sequences, train_max_abs_error, test_exact_accuracy, final_loss, steps, "
      "device, facts_distinct_queries, facts_rank_lower_bound, facts_rank_upper_bound, "
      "result_json IS NULL FROM results ORDER BY cell_id",
      10);
  EXPECT_THAT(got, ::testing::ElementsAre("276 1.25 0.0 0.125 1500 cpu 12 6 12 1 ",
                                          "NULL NULL NULL NULL NULL NULL NULL NULL NULL 1 "));
}

TEST(StoreTest, MigrationToVersion5SumsUpExistingResultsPerGroup) {
  TempDir dir;
  // Group (0, 4): three done cells, two with a test split, one failed cell.
  // Group (1, 8): one done cell.
  WriteOldFileWithFiveCells(dir, DowngradeToVersion4,
                            "INSERT INTO results (cell_id, sweep_id, head_index, rank, seed, "
                            "state, lease_id, attempt, worker_id, finished_ms, train_error, "
                            "train_exact_accuracy, train_position_accuracy, test_sequences, "
                            "test_error) VALUES "
                            "(1, 'sw-1', 0, 4, 1, 3, 1, 1, 'wk', 0, 0.0, 1.0, 1.0, 10, 0.0), "
                            "(2, 'sw-1', 0, 4, 2, 3, 2, 1, 'wk', 0, 0.5, 0.5, 0.75, 10, 0.25), "
                            "(3, 'sw-1', 0, 4, 3, 3, 3, 1, 'wk', 0, 1.0, 0.0, 0.5, 0, NULL), "
                            "(4, 'sw-1', 0, 4, 4, 4, 4, 3, 'wk', 0, NULL, NULL, NULL, NULL, NULL), "
                            "(5, 'sw-1', 1, 8, 1, 3, 5, 1, 'wk', 0, 0.25, 0.75, 0.5, 0, NULL)");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  const std::vector<std::string> got = RowsAsText(
      **store,
      "SELECT head_index, rank, n, exact_seeds, test_n, test_exact_seeds, train_error_mean, "
      "train_error_m2, train_error_min, train_error_max, exact_mean, position_max, "
      "test_error_mean, test_error_m2, test_error_max FROM result_groups "
      "ORDER BY head_index, rank",
      15);
  // Train error 0, 0.5, 1: mean 0.5, squared deviations 0.25 + 0 + 0.25.
  // Test error over the two cells with a test split: 0, 0.25.
  EXPECT_THAT(got, ::testing::ElementsAre(
                       "0 4 3 1 2 1 0.5 0.5 0.0 1.0 0.5 1.0 0.125 0.03125 0.25 ",
                       "1 8 1 0 0 0 0.25 0.0 0.25 0.25 0.75 0.5 0.0 0.0 0.0 "));
}

TEST(StoreTest, MigrationToVersion6PacksExistingResultRows) {
  TempDir dir;
  {
    auto store = Store::Open(File(dir, "a.db"));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)
                    ->Write([&](Connection& c) -> absl::Status {
                      RETURN_IF_ERROR(DowngradeToVersion5(c));
                      RETURN_IF_ERROR(c.Exec(
                          "INSERT INTO sweeps (id, name, owner, spec_json, priority, state, "
                          "created_ms) VALUES ('sw-1', 'n', 'o', '{}', 0, 2, 0)"));
                      // Cell 1: done with a test split; 2: done without one,
                      // served from the cache of cell 1; 3: failed.
                      return c.Exec(
                          "INSERT INTO cells (id, sweep_id, head_index, rank, seed, state) "
                          "VALUES (1, 'sw-1', 0, 4, 7, 3), (2, 'sw-1', 1, 8, 7, 3), "
                          "(3, 'sw-1', 0, 4, 9, 4);"
                          "INSERT INTO results (cell_id, sweep_id, head_index, rank, seed, state, "
                          "lease_id, attempt, worker_id, worker_build_id, worker_torch_version, "
                          "worker_cuda_version, failure, finished_ms, cached_from, "
                          "train_sequences, train_position_accuracy, train_exact_accuracy, "
                          "train_error, train_max_abs_error, test_sequences, "
                          "test_position_accuracy, test_exact_accuracy, test_error, "
                          "test_max_abs_error, final_loss, steps, wall_seconds, device, "
                          "facts_train_sequences, facts_test_sequences, "
                          "facts_distinct_queries, facts_rank_lower_bound, "
                          "facts_rank_upper_bound) VALUES "
                          "(1, 'sw-1', 0, 4, 7, 3, 11, 1, 'wk-a', 'b1', '1.13.1', '', '', 1000, "
                          "0, 276, 0.75, 0.5, 0.5, 1.25, 40, 0.625, 0.25, 0.75, 2.5, 0.125, "
                          "1500, 2.5, 'cpu', 276, 40, 12, 6, 12), "
                          "(2, 'sw-1', 1, 8, 7, 3, 11, 1, 'wk-a', 'b1', '1.13.1', '', '', 2000, "
                          "1, 10, 1.0, 1.0, 0.0, 0.25, 0, 0.0, 0.0, NULL, 0.0, 0.0625, 30, "
                          "0.5, 'cpu', 10, 0, 4, 0, 0), "
                          "(3, 'sw-1', 0, 4, 9, 4, 12, 3, 'wk-b', 'b2', '2.1.0', '12.1', "
                          "'out of memory (attempt 3 of 3)', 3000, 0, NULL, NULL, NULL, NULL, "
                          "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
                          "NULL, NULL, NULL, NULL)");
                    })
                    .ok());
  }
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  std::vector<ResultRow> rows;
  ASSERT_TRUE((*store)
                  ->Read([&](Connection& c) -> absl::Status {
                    ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT packed FROM result_packs "
                                                            "ORDER BY cell_id"));
                    while (true) {
                      ASSIGN_OR_RETURN(bool row, q.Step());
                      if (!row) return absl::OkStatus();
                      RETURN_IF_ERROR(UnpackResultRow(q.ColumnBlob(0), &rows.emplace_back()));
                    }
                  })
                  .ok());
  ASSERT_EQ(rows.size(), 3u);
  const ResultRow& a = rows[0];
  EXPECT_EQ(a.head_index, 0);
  EXPECT_EQ(a.rank, 4);
  EXPECT_EQ(a.seed, 7u);
  EXPECT_EQ(a.state, CellState::kDone);
  EXPECT_EQ(a.lease_id, 11);
  EXPECT_EQ(a.attempt, 1);
  EXPECT_EQ(a.worker_id, "wk-a");
  EXPECT_EQ(a.worker_version.build_id, "b1");
  EXPECT_EQ(a.worker_version.torch_version, "1.13.1");
  EXPECT_EQ(a.finished_unix_ms, 1000);
  EXPECT_EQ(a.cached_from_cell_id, 0);
  ASSERT_TRUE(a.result.has_value());
  EXPECT_EQ(a.result->seed, 7u);
  EXPECT_EQ(a.result->train.sequences, 276);
  EXPECT_EQ(a.result->train.position_accuracy, 0.75);
  EXPECT_EQ(a.result->train.max_abs_error, 1.25);
  EXPECT_EQ(a.result->test.sequences, 40);
  EXPECT_EQ(a.result->test.position_accuracy, 0.625);
  EXPECT_EQ(a.result->test.exact_accuracy, 0.25);
  EXPECT_EQ(a.result->test.error, 0.75);
  EXPECT_EQ(a.result->test.max_abs_error, 2.5);
  EXPECT_EQ(a.result->final_loss, 0.125);
  EXPECT_EQ(a.result->steps, 1500);
  EXPECT_EQ(a.result->wall_seconds, 2.5);
  EXPECT_EQ(a.result->device, "cpu");
  EXPECT_EQ(a.result->facts.test_sequences, 40);
  EXPECT_EQ(a.result->facts.distinct_queries, 12);
  EXPECT_EQ(a.result->facts.rank_lower_bound, 6);
  EXPECT_EQ(a.result->facts.rank_upper_bound, 12);
  const ResultRow& b = rows[1];
  EXPECT_EQ(b.head_index, 1);
  EXPECT_EQ(b.rank, 8);
  EXPECT_EQ(b.cached_from_cell_id, 1);
  ASSERT_TRUE(b.result.has_value());
  EXPECT_EQ(b.result->train.error, 0.0);
  EXPECT_EQ(b.result->test.sequences, 0);
  EXPECT_EQ(b.result->test.error, 1.0);  // NULL without a test split reads as 1
  EXPECT_EQ(b.result->steps, 30);
  const ResultRow& f = rows[2];
  EXPECT_EQ(f.state, CellState::kFailed);
  EXPECT_FALSE(f.result.has_value());
  EXPECT_EQ(f.failure, "out of memory (attempt 3 of 3)");
  EXPECT_EQ(f.attempt, 3);
  EXPECT_EQ(f.worker_id, "wk-b");
  EXPECT_EQ(f.worker_version.cuda_version, "12.1");
  EXPECT_EQ(f.finished_unix_ms, 3000);
}

TEST(StoreTest, MigrationToVersion7CountsTrainedAndCachedCellsPerGroup) {
  TempDir dir;
  // Group (0, 4): two trained (1.5 s, 2.5 s), one copied from the cache, one
  // failed. Group (1, 8): one copied.
  WriteOldFileWithFiveCells(dir, DowngradeToVersion6,
                            "INSERT INTO results (cell_id, sweep_id, head_index, rank, seed, "
                            "state, lease_id, attempt, worker_id, finished_ms, wall_seconds, "
                            "cached_from, train_error) VALUES "
                            "(1, 'sw-1', 0, 4, 1, 3, 1, 1, 'wk', 0, 1.5, 0, 0.0), "
                            "(2, 'sw-1', 0, 4, 2, 3, 2, 1, 'wk', 0, 2.5, 0, 0.0), "
                            "(3, 'sw-1', 0, 4, 3, 3, 1, 1, 'wk', 0, 9.0, 1, 0.0), "
                            "(4, 'sw-1', 0, 4, 4, 4, 4, 3, 'wk', 0, NULL, 0, NULL), "
                            "(5, 'sw-1', 1, 8, 1, 3, 1, 1, 'wk', 0, 7.0, 1, 0.0);"
                            "INSERT INTO result_groups (sweep_id, head_index, rank, n, "
                            "exact_seeds, test_n, test_exact_seeds) VALUES "
                            "('sw-1', 0, 4, 3, 3, 0, 0), "
                            "('sw-1', 1, 8, 1, 1, 0, 0)");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_THAT(RowsAsText(**store,
                         "SELECT head_index, rank, trained_n, trained_seconds, cached_n "
                         "FROM result_groups ORDER BY head_index, rank",
                         5),
              ::testing::ElementsAre("0 4 2 4.0 1 ", "1 8 0 0.0 1 "));
}

TEST(StoreTest, MigrationToVersion8IndexesPendingCellsByGroupAndLeasedCellsByWorker) {
  TempDir dir;
  // Cell 1 back to pending, cell 2 leased to worker wk until 50.
  WriteOldFileWithFiveCells(dir, DowngradeToVersion7,
                            "UPDATE cells SET state = 1 WHERE id = 1; "
                            "UPDATE cells SET state = 2, lease_id = 7, lease_deadline_ms = 50, "
                            "worker_id = 'wk' WHERE id = 2");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_THAT(RowsAsText(**store,
                         "SELECT name FROM sqlite_master WHERE type = 'index' AND "
                         "tbl_name = 'cells' ORDER BY name",
                         1),
              ::testing::ElementsAre("cells_by_lease ", "cells_by_state ", "cells_leased ",
                                     "cells_pending_by_group ", "sqlite_autoindex_cells_1 "));
  // INDEXED BY fails to prepare unless the index exists and serves the query.
  EXPECT_THAT(RowsAsText(**store,
                         "SELECT id FROM cells INDEXED BY cells_pending_by_group WHERE "
                         "sweep_id = 'sw-1' AND state = 1 AND head_index = 0 AND rank = 4",
                         1),
              ::testing::ElementsAre("1 "));
  EXPECT_THAT(RowsAsText(**store,
                         "SELECT id, lease_deadline_ms FROM cells INDEXED BY cells_leased "
                         "WHERE worker_id = 'wk' AND state = 2",
                         2),
              ::testing::ElementsAre("2 50 "));
  EXPECT_THAT(RowsAsText(**store, "SELECT id, state FROM cells ORDER BY id", 2),
              ::testing::ElementsAre("1 1 ", "2 2 ", "3 3 ", "4 4 ", "5 3 "));
}

TEST(StoreTest, MigrationToVersion9GivesEveryCellNoNextOfCall) {
  TempDir dir;
  WriteOldFileWithFiveCells(dir, DowngradeToVersion8,
                            "UPDATE cells SET state = 2, lease_id = 7, lease_deadline_ms = 50, "
                            "worker_id = 'wk' WHERE id = 2");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_THAT(RowsAsText(**store, "SELECT id, state, next_of, next_task FROM cells ORDER BY id", 4),
              ::testing::ElementsAre("1 3 0 0 ", "2 2 0 0 ", "3 3 0 0 ", "4 4 0 0 ", "5 3 0 0 "));
}

TEST(StoreTest, MigrationToVersion10KeepsEveryResultAndStartsWithNoQuarantine) {
  TempDir dir;
  WriteOldFileWithFiveCells(dir, DowngradeToVersion9, "");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_THAT(RowsAsText(**store, "SELECT COUNT(*) FROM quarantines", 1),
              ::testing::ElementsAre("0 "));
  EXPECT_THAT(RowsAsText(**store, "SELECT COUNT(*) FROM invalid_results", 1),
              ::testing::ElementsAre("0 "));
  // Copies are found by their source through the new partial index.
  EXPECT_THAT(RowsAsText(**store,
                         "SELECT COUNT(*) FROM results INDEXED BY results_by_source "
                         "WHERE cached_from = 3 AND cached_from != 0",
                         1),
              ::testing::ElementsAre("0 "));
}

}  // namespace
}  // namespace ranksweep::server
