#include "server/core/schema.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/spec/result_metrics.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/results/packed_row.h"
#include "server/core/results/result_schema.h"
#include "server/core/sqlite.h"
#include "server/core/store.h"
#include "server/core/store_test_util.h"
#include "common/temp_dir.h"

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
  EXPECT_EQ(IndexSql(*c, "cells_leased"),
            "CREATE INDEX cells_leased ON cells(worker_id, lease_deadline_ms) WHERE state = 2");
  EXPECT_EQ(IndexSql(*c, "results_by_task"),
            "CREATE INDEX results_by_task ON results(task_key, seed, worker_build_id)\n"
            "  WHERE task_key != '' AND cached_from = 0 AND state = 3");
}

// ------------------------------------------------------------------ migrations
// Files written by older binaries, opened by this one.

using ::ranksweep::TempDir;

std::string File(const TempDir& dir, const std::string& name) { return dir.path() + "/" + name; }

// The columns schema version 3 added to `results`.
constexpr const char* kVersion3Columns[] = {
    "train_sequences",       "train_max_abs_error",    "test_position_accuracy",
    "test_exact_accuracy",   "test_max_abs_error",     "final_loss",
    "steps",                 "device",                 "facts_train_sequences",
    "facts_test_sequences",  "facts_distinct_queries", "facts_rank_lower_bound",
    "facts_rank_upper_bound"};

// Drops the columns that EnsureMetricColumns adds (the `results` column of
// every metric of the table that no numbered migration made, and every
// metric's result_groups columns): a file as a binary without those rows of
// the table wrote it.
absl::Status DropTableMetricColumns(Connection& c) {
  for (const ResultMetric& m : ResultMetrics()) {
    for (const std::string& column : GroupMetricColumns(m)) {
      RETURN_IF_ERROR(c.Exec(absl::StrCat("ALTER TABLE result_groups DROP COLUMN ", column)));
    }
    if (std::string(m.name) == "first_exact_step") continue;  // migration 11
    RETURN_IF_ERROR(c.Exec(absl::StrCat("ALTER TABLE results DROP COLUMN ", m.name)));
  }
  return absl::OkStatus();
}

// Turns a freshly created (empty) file back into what schema version 17 wrote.
absl::Status DowngradeToVersion17(Connection& c) {
  RETURN_IF_ERROR(DropTableMetricColumns(c));
  // Version 18: recipe pruning's rung scores.
  RETURN_IF_ERROR(c.Exec("DROP TABLE rung_scores"));
  return c.Exec("UPDATE schema_version SET version = 17");
}

// Turns a freshly created (empty) file back into what schema version 16 wrote.
absl::Status DowngradeToVersion16(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion17(c));
  // Version 17: learning curves.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE results DROP COLUMN curve"));
  return c.Exec("UPDATE schema_version SET version = 16");
}

// Turns a freshly created (empty) file back into what schema version 15 wrote.
absl::Status DowngradeToVersion15(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion16(c));
  // Version 16: tokens held by a quarantine (server/core/workers/quarantine.h).
  RETURN_IF_ERROR(c.Exec("DROP TABLE held_tokens"));
  return c.Exec("UPDATE schema_version SET version = 15");
}

// Turns a freshly created file back into what schema version 14 wrote.
absl::Status DowngradeToVersion14(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion15(c));
  // Version 15: notes, archive marks and tags (server/core/sweeps/sweep_admin.h).
  RETURN_IF_ERROR(c.Exec("DROP TABLE sweep_tags; DROP TABLE sweep_notes"));
  return c.Exec("UPDATE schema_version SET version = 14");
}

// Turns a freshly created file back into what schema version 13 wrote.
absl::Status DowngradeToVersion13(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion14(c));
  // Version 14: quarantine that holds.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE workers DROP COLUMN quarantined_ms"));
  return c.Exec("UPDATE schema_version SET version = 13");
}

// Turns a freshly created file back into what schema version 12 wrote.
absl::Status DowngradeToVersion12(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion13(c));
  // Version 13: workers bound to their token and session.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE workers DROP COLUMN owner; "
                         "ALTER TABLE workers DROP COLUMN session_hash"));
  return c.Exec("UPDATE schema_version SET version = 12");
}

// Turns a freshly created file back into what schema version 11 wrote.
absl::Status DowngradeToVersion11(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion12(c));
  // Version 12: the recipe of cells, results and groups.
  RETURN_IF_ERROR(c.Exec(R"sql(
CREATE TABLE cells_v11old (
  id                INTEGER PRIMARY KEY,
  sweep_id          TEXT NOT NULL REFERENCES sweeps(id),
  head_index        INTEGER NOT NULL,
  rank              INTEGER NOT NULL,
  seed              INTEGER NOT NULL,
  state             INTEGER NOT NULL,
  attempt           INTEGER NOT NULL DEFAULT 0,
  lease_id          INTEGER NOT NULL DEFAULT 0,
  lease_deadline_ms INTEGER NOT NULL DEFAULT 0,
  worker_id         TEXT NOT NULL DEFAULT '',
  last_failure      TEXT NOT NULL DEFAULT '',
  next_of           INTEGER NOT NULL DEFAULT 0,
  next_task         INTEGER NOT NULL DEFAULT 0,
  UNIQUE (sweep_id, head_index, rank, seed)
);
DROP TABLE cells;
ALTER TABLE cells_v11old RENAME TO cells;
CREATE INDEX cells_by_state ON cells(sweep_id, state);
CREATE INDEX cells_by_lease ON cells(lease_id) WHERE lease_id != 0;
CREATE INDEX cells_pending_by_group ON cells(sweep_id, head_index, rank) WHERE state = 1;
CREATE INDEX cells_leased ON cells(worker_id, lease_deadline_ms) WHERE state = 2;
ALTER TABLE results DROP COLUMN recipe;
CREATE TABLE result_groups_v11old (
  sweep_id TEXT NOT NULL, head_index INTEGER NOT NULL, rank INTEGER NOT NULL,
  n INTEGER NOT NULL, exact_seeds INTEGER NOT NULL, test_n INTEGER NOT NULL,
  test_exact_seeds INTEGER NOT NULL,
  train_error_mean REAL, train_error_m2 REAL, train_error_min REAL, train_error_max REAL,
  exact_mean REAL, exact_m2 REAL, exact_min REAL, exact_max REAL,
  position_mean REAL, position_m2 REAL, position_min REAL, position_max REAL,
  test_error_mean REAL, test_error_m2 REAL, test_error_min REAL, test_error_max REAL,
  trained_n INTEGER NOT NULL DEFAULT 0, trained_seconds REAL NOT NULL DEFAULT 0,
  cached_n INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (sweep_id, head_index, rank)
) WITHOUT ROWID;
DROP TABLE result_groups;
ALTER TABLE result_groups_v11old RENAME TO result_groups;
)sql"));
  return c.Exec("UPDATE schema_version SET version = 11");
}

// Turns a freshly created file back into what schema version 10 wrote.
absl::Status DowngradeToVersion10(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion11(c));
  // Version 11: the optional metrics' columns.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE results DROP COLUMN first_exact_step"));
  return c.Exec("UPDATE schema_version SET version = 10");
}

// Turns a freshly created file back into what schema version 9 wrote.
absl::Status DowngradeToVersion9(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion10(c));
  // Version 10: quarantines and the rows they invalidated.
  RETURN_IF_ERROR(c.Exec("DROP TABLE invalid_results; DROP TABLE quarantines; "
                         "DROP INDEX results_by_source"));
  return c.Exec("UPDATE schema_version SET version = 9");
}

// Turns a freshly created file back into what schema version 8 wrote.
absl::Status DowngradeToVersion8(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion9(c));
  // Version 9: which CompleteTasks call leased a cell as `next`.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE cells DROP COLUMN next_of; "
                         "ALTER TABLE cells DROP COLUMN next_task"));
  return c.Exec("UPDATE schema_version SET version = 8");
}

// Turns a freshly created file back into what schema version 7 wrote.
absl::Status DowngradeToVersion7(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion8(c));
  // Version 8: the pending-group and leased-cell indexes.
  RETURN_IF_ERROR(c.Exec(
      "DROP INDEX cells_pending_by_group; DROP INDEX cells_leased; "
      "CREATE INDEX cells_by_group ON cells(sweep_id, state, head_index, rank); "
      "CREATE INDEX cells_by_deadline ON cells(lease_deadline_ms) WHERE state = 2; "
      "CREATE INDEX cells_by_worker ON cells(worker_id) WHERE state = 2"));
  return c.Exec("UPDATE schema_version SET version = 7");
}

// Turns a freshly created file back into what schema version 6 wrote.
absl::Status DowngradeToVersion6(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion7(c));
  // Version 7: the trained and cached counts of each group.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE result_groups DROP COLUMN trained_n; "
                         "ALTER TABLE result_groups DROP COLUMN trained_seconds; "
                         "ALTER TABLE result_groups DROP COLUMN cached_n"));
  return c.Exec("UPDATE schema_version SET version = 6");
}

// Turns a freshly created file back into what schema version 5 wrote.
absl::Status DowngradeToVersion5(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion6(c));
  // Version 6: the packed copy of each result row.
  RETURN_IF_ERROR(c.Exec("DROP TABLE result_packs"));
  return c.Exec("UPDATE schema_version SET version = 5");
}

// Turns a freshly created file back into what schema version 4 wrote.
absl::Status DowngradeToVersion4(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion5(c));
  // Version 5: the running group aggregates and the results-by-sweep index.
  RETURN_IF_ERROR(c.Exec(
      "DROP TABLE result_groups; DROP INDEX results_by_sweep; "
      "CREATE INDEX results_by_group ON results(sweep_id, head_index, rank); "
      "DROP INDEX cells_by_deadline; "
      "CREATE INDEX cells_by_deadline ON cells(state, lease_deadline_ms); "
      "DROP INDEX cells_by_worker; CREATE INDEX cells_by_worker ON cells(worker_id, state)"));
  return c.Exec("UPDATE schema_version SET version = 4");
}

absl::Status DowngradeToVersion2(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion4(c));
  // Version 4: the result cache's index and columns.
  RETURN_IF_ERROR(c.Exec("DROP INDEX results_by_task; ALTER TABLE results DROP COLUMN task_key; "
                         "ALTER TABLE results DROP COLUMN cached_from"));
  for (const char* column : kVersion3Columns) {
    RETURN_IF_ERROR(c.Exec(std::string("ALTER TABLE results DROP COLUMN ") + column));
  }
  return c.Exec("UPDATE schema_version SET version = 2");
}

// Writes a.db in `dir` as schema version `downgrade` leaves it, with sweep
// sw-1 and its cells 1-4 in group (head 0, rank 4; cell 4 failed) and cell 5
// in group (1, 8), then runs `sql` (their results).
void WriteOldFileWithFiveCells(const TempDir& dir, absl::Status (*downgrade)(Connection&),
                               const std::string& sql) {
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok());
  absl::Status s = (*store)->Write([&](Connection& c) -> absl::Status {
    RETURN_IF_ERROR(downgrade(c));
    RETURN_IF_ERROR(
        c.Exec("INSERT INTO sweeps (id, name, owner, spec_json, priority, state, created_ms) "
               "VALUES ('sw-1', 'n', 'o', '{}', 0, 2, 0)"));
    RETURN_IF_ERROR(
        c.Exec("INSERT INTO cells (id, sweep_id, head_index, rank, seed, state) VALUES "
               "(1, 'sw-1', 0, 4, 1, 3), (2, 'sw-1', 0, 4, 2, 3), (3, 'sw-1', 0, 4, 3, 3), "
               "(4, 'sw-1', 0, 4, 4, 4), (5, 'sw-1', 1, 8, 1, 3)"));
    return c.Exec(sql);
  });
  ASSERT_TRUE(s.ok()) << s;
}

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

TEST(StoreTest, MigrationToVersion18KeepsEveryCellWithNoRungScore) {
  TempDir dir;
  WriteOldFileWithFiveCells(dir, DowngradeToVersion17, "");
  auto store = Store::Open(File(dir, "a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  EXPECT_EQ(Store::kSchemaVersion, 18);
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
