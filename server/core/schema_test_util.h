// What the tests of the schema's migrations (schema_test.cc,
// schema_later_migrations_test.cc) share: files as older binaries wrote
// them, made by turning a freshly created file back into an older schema
// version (DowngradeToVersionN), and a.db with a sweep of five cells written
// so. Tests only.
#ifndef RANKSWEEP_SERVER_CORE_SCHEMA_TEST_UTIL_H_
#define RANKSWEEP_SERVER_CORE_SCHEMA_TEST_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/spec/result_metrics.h"
#include "common/status_macros.h"
#include "common/temp_dir.h"
#include "gtest/gtest.h"
#include "server/core/schema.h"
#include "server/core/sqlite.h"
#include "server/core/store.h"

namespace ranksweep::server {

// The path of `name` in `dir`.
inline std::string File(const TempDir& dir, const std::string& name) {
  return dir.path() + "/" + name;
}

// The columns schema version 3 added to `results`.
inline constexpr const char* kVersion3Columns[] = {
    "train_sequences",       "train_max_abs_error",    "test_position_accuracy",
    "test_exact_accuracy",   "test_max_abs_error",     "final_loss",
    "steps",                 "device",                 "facts_train_sequences",
    "facts_test_sequences",  "facts_distinct_queries", "facts_rank_lower_bound",
    "facts_rank_upper_bound"};

// Drops the columns that EnsureMetricColumns adds (the `results` column of
// every metric of the table that no numbered migration made, and every
// metric's result_groups columns): a file as a binary without those rows of
// the table wrote it.
inline absl::Status DropTableMetricColumns(Connection& c) {
  for (const ResultMetric& m : ResultMetrics()) {
    for (const std::string& column : GroupMetricColumns(m)) {
      RETURN_IF_ERROR(c.Exec(absl::StrCat("ALTER TABLE result_groups DROP COLUMN ", column)));
    }
    if (std::string(m.name) == "first_exact_step") continue;  // migration 11
    RETURN_IF_ERROR(c.Exec(absl::StrCat("ALTER TABLE results DROP COLUMN ", m.name)));
  }
  return absl::OkStatus();
}

// Turns a freshly created (empty) file back into what schema version 21 wrote.
inline absl::Status DowngradeToVersion21(Connection& c) {
  RETURN_IF_ERROR(DropTableMetricColumns(c));
  // Version 22: no trigger moves the results version on an insert.
  RETURN_IF_ERROR(c.Exec(
      "CREATE TRIGGER result_packs_inserted AFTER INSERT ON result_packs BEGIN "
      "INSERT INTO result_versions (sweep_id, version) VALUES (NEW.sweep_id, 1) "
      "ON CONFLICT (sweep_id) DO UPDATE SET version = version + 1; END"));
  return c.Exec("UPDATE schema_version SET version = 21");
}

// Turns a freshly created (empty) file back into what schema version 20 wrote.
inline absl::Status DowngradeToVersion20(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion21(c));
  // Version 21: done cells out of the lease index.
  RETURN_IF_ERROR(c.Exec("DROP INDEX cells_by_lease"));
  RETURN_IF_ERROR(c.Exec("CREATE INDEX cells_by_lease ON cells(lease_id) WHERE lease_id != 0"));
  return c.Exec("UPDATE schema_version SET version = 20");
}

// Turns a freshly created (empty) file back into what schema version 19 wrote.
inline absl::Status DowngradeToVersion19(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion20(c));
  // Version 20: column blocks, and the triggers that delete them.
  for (const char* trigger : {"result_blocks_on_delete", "result_blocks_on_update"}) {
    RETURN_IF_ERROR(c.Exec(absl::StrCat("DROP TRIGGER ", trigger)));
  }
  RETURN_IF_ERROR(c.Exec("DROP TABLE result_blocks"));
  return c.Exec("UPDATE schema_version SET version = 19");
}

// Turns a freshly created (empty) file back into what schema version 18 wrote.
inline absl::Status DowngradeToVersion18(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion19(c));
  // Version 19: the results version of each sweep, kept by triggers.
  for (const char* trigger :
       {"result_packs_inserted", "result_packs_deleted", "result_packs_updated"}) {
    RETURN_IF_ERROR(c.Exec(absl::StrCat("DROP TRIGGER ", trigger)));
  }
  RETURN_IF_ERROR(c.Exec("DROP TABLE result_versions"));
  return c.Exec("UPDATE schema_version SET version = 18");
}

// Turns a freshly created (empty) file back into what schema version 17 wrote.
inline absl::Status DowngradeToVersion17(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion18(c));
  // Version 18: recipe pruning's rung scores.
  RETURN_IF_ERROR(c.Exec("DROP TABLE rung_scores"));
  return c.Exec("UPDATE schema_version SET version = 17");
}

// Turns a freshly created (empty) file back into what schema version 16 wrote.
inline absl::Status DowngradeToVersion16(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion17(c));
  // Version 17: learning curves.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE results DROP COLUMN curve"));
  return c.Exec("UPDATE schema_version SET version = 16");
}

// Turns a freshly created (empty) file back into what schema version 15 wrote.
inline absl::Status DowngradeToVersion15(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion16(c));
  // Version 16: tokens held by a quarantine (server/core/workers/quarantine.h).
  RETURN_IF_ERROR(c.Exec("DROP TABLE held_tokens"));
  return c.Exec("UPDATE schema_version SET version = 15");
}

// Turns a freshly created file back into what schema version 14 wrote.
inline absl::Status DowngradeToVersion14(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion15(c));
  // Version 15: notes, archive marks and tags (server/core/sweeps/sweep_admin.h).
  RETURN_IF_ERROR(c.Exec("DROP TABLE sweep_tags; DROP TABLE sweep_notes"));
  return c.Exec("UPDATE schema_version SET version = 14");
}

// Turns a freshly created file back into what schema version 13 wrote.
inline absl::Status DowngradeToVersion13(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion14(c));
  // Version 14: quarantine that holds.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE workers DROP COLUMN quarantined_ms"));
  return c.Exec("UPDATE schema_version SET version = 13");
}

// Turns a freshly created file back into what schema version 12 wrote.
inline absl::Status DowngradeToVersion12(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion13(c));
  // Version 13: workers bound to their token and session.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE workers DROP COLUMN owner; "
                         "ALTER TABLE workers DROP COLUMN session_hash"));
  return c.Exec("UPDATE schema_version SET version = 12");
}

// Turns a freshly created file back into what schema version 11 wrote.
inline absl::Status DowngradeToVersion11(Connection& c) {
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
inline absl::Status DowngradeToVersion10(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion11(c));
  // Version 11: the optional metrics' columns.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE results DROP COLUMN first_exact_step"));
  return c.Exec("UPDATE schema_version SET version = 10");
}

// Turns a freshly created file back into what schema version 9 wrote.
inline absl::Status DowngradeToVersion9(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion10(c));
  // Version 10: quarantines and the rows they invalidated.
  RETURN_IF_ERROR(c.Exec("DROP TABLE invalid_results; DROP TABLE quarantines; "
                         "DROP INDEX results_by_source"));
  return c.Exec("UPDATE schema_version SET version = 9");
}

// Turns a freshly created file back into what schema version 8 wrote.
inline absl::Status DowngradeToVersion8(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion9(c));
  // Version 9: which CompleteTasks call leased a cell as `next`.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE cells DROP COLUMN next_of; "
                         "ALTER TABLE cells DROP COLUMN next_task"));
  return c.Exec("UPDATE schema_version SET version = 8");
}

// Turns a freshly created file back into what schema version 7 wrote.
inline absl::Status DowngradeToVersion7(Connection& c) {
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
inline absl::Status DowngradeToVersion6(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion7(c));
  // Version 7: the trained and cached counts of each group.
  RETURN_IF_ERROR(c.Exec("ALTER TABLE result_groups DROP COLUMN trained_n; "
                         "ALTER TABLE result_groups DROP COLUMN trained_seconds; "
                         "ALTER TABLE result_groups DROP COLUMN cached_n"));
  return c.Exec("UPDATE schema_version SET version = 6");
}

// Turns a freshly created file back into what schema version 5 wrote.
inline absl::Status DowngradeToVersion5(Connection& c) {
  RETURN_IF_ERROR(DowngradeToVersion6(c));
  // Version 6: the packed copy of each result row.
  RETURN_IF_ERROR(c.Exec("DROP TABLE result_packs"));
  return c.Exec("UPDATE schema_version SET version = 5");
}

// Turns a freshly created file back into what schema version 4 wrote.
inline absl::Status DowngradeToVersion4(Connection& c) {
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

inline absl::Status DowngradeToVersion2(Connection& c) {
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
inline void WriteOldFileWithFiveCells(const TempDir& dir,
                                      absl::Status (*downgrade)(Connection&),
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

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_SCHEMA_TEST_UTIL_H_
