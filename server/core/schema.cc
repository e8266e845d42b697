#include "server/core/schema.h"

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "server/core/metric_columns.h"
#include "server/core/types.h"

namespace ranksweep::server {
namespace {

// A migration as written: its SQL names cell states as {cell_pending},
// {cell_leased} and {cell_done}, which Migrations() replaces by the numbers
// of types.h. Those numbers are stored in every row and in the partial
// indexes' definitions, so they never change: the replaced text is the one
// each migration shipped with, byte for byte, and a file migrated by an
// older binary has the same schema as one migrated by this one.
struct MigrationText {
  int version;
  const char* sql;
};

// Append new migrations at the end; never edit one that has shipped.
constexpr MigrationText kMigrations[] = {
    {1, R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
INSERT INTO meta(key, value) VALUES ('next_lease_id', 1), ('serve_counter', 0);

CREATE TABLE sweeps (
  id          TEXT PRIMARY KEY,
  name        TEXT NOT NULL,
  owner       TEXT NOT NULL,
  spec_json   TEXT NOT NULL,
  priority    INTEGER NOT NULL,
  state       INTEGER NOT NULL,
  created_ms  INTEGER NOT NULL,
  finished_ms INTEGER NOT NULL DEFAULT 0,
  served      INTEGER NOT NULL DEFAULT 0  -- round-robin position
);
CREATE INDEX sweeps_by_state ON sweeps(state, priority);

CREATE TABLE cells (
  id                INTEGER PRIMARY KEY,
  sweep_id          TEXT NOT NULL REFERENCES sweeps(id),
  head_index        INTEGER NOT NULL,
  rank              INTEGER NOT NULL,
  seed              INTEGER NOT NULL,  -- uint64 stored bit for bit
  state             INTEGER NOT NULL,
  attempt           INTEGER NOT NULL DEFAULT 0,
  lease_id          INTEGER NOT NULL DEFAULT 0,
  lease_deadline_ms INTEGER NOT NULL DEFAULT 0,
  worker_id         TEXT NOT NULL DEFAULT '',
  last_failure      TEXT NOT NULL DEFAULT '',
  UNIQUE (sweep_id, head_index, rank, seed)
);
-- Pending cells of a sweep in creation order, and of one (head, rank) group.
CREATE INDEX cells_by_state ON cells(sweep_id, state);
CREATE INDEX cells_by_group ON cells(sweep_id, state, head_index, rank);
CREATE INDEX cells_by_lease ON cells(lease_id) WHERE lease_id != 0;
CREATE INDEX cells_by_deadline ON cells(state, lease_deadline_ms);
CREATE INDEX cells_by_worker ON cells(worker_id, state);

CREATE TABLE results (
  cell_id                 INTEGER PRIMARY KEY REFERENCES cells(id),
  sweep_id                TEXT NOT NULL,
  head_index              INTEGER NOT NULL,
  rank                    INTEGER NOT NULL,
  seed                    INTEGER NOT NULL,
  state                   INTEGER NOT NULL,  -- done or failed
  lease_id                INTEGER NOT NULL,
  attempt                 INTEGER NOT NULL,
  worker_id               TEXT NOT NULL,
  worker_build_id         TEXT NOT NULL DEFAULT '',
  worker_torch_version    TEXT NOT NULL DEFAULT '',
  worker_cuda_version     TEXT NOT NULL DEFAULT '',
  failure                 TEXT NOT NULL DEFAULT '',
  train_error             REAL,
  train_exact_accuracy    REAL,
  train_position_accuracy REAL,
  test_error              REAL,
  test_sequences          INTEGER,
  wall_seconds            REAL,
  result_json             TEXT,
  finished_ms             INTEGER NOT NULL
);
CREATE INDEX results_by_group ON results(sweep_id, head_index, rank);
CREATE INDEX results_by_finish ON results(sweep_id, state, finished_ms);

CREATE TABLE workers (
  id            TEXT PRIMARY KEY,
  hostname      TEXT NOT NULL,
  device        TEXT NOT NULL,
  device_name   TEXT NOT NULL,
  memory_bytes  INTEGER NOT NULL,
  slots         INTEGER NOT NULL,
  build_id      TEXT NOT NULL,
  torch_version TEXT NOT NULL,
  cuda_version  TEXT NOT NULL,
  registered_ms INTEGER NOT NULL,
  last_seen_ms  INTEGER NOT NULL,
  completed     INTEGER NOT NULL DEFAULT 0
);
)sql"},
    // Bearer tokens (server/core/auth.h). Only the SHA-256 of a token is
    // stored; revoked tokens keep their row (and name) for the record.
    {2, R"sql(
CREATE TABLE tokens (
  name       TEXT PRIMARY KEY,
  role       TEXT NOT NULL,
  hash       TEXT NOT NULL UNIQUE,
  created_ms INTEGER NOT NULL,
  revoked_ms INTEGER NOT NULL DEFAULT 0  -- 0: active
);
-- A user's sweeps, newest first (ListSweeps for a non-admin caller).
CREATE INDEX sweeps_by_owner ON sweeps(owner, created_ms);
)sql"},
    // Every field of a result in its own column, so that queries read rows
    // without parsing JSON; the JSON of existing rows is moved into them and
    // result_json is no longer written (it stays NULL).
    {3, R"sql(
ALTER TABLE results ADD COLUMN train_sequences INTEGER;
ALTER TABLE results ADD COLUMN train_max_abs_error REAL;
ALTER TABLE results ADD COLUMN test_position_accuracy REAL;
ALTER TABLE results ADD COLUMN test_exact_accuracy REAL;
ALTER TABLE results ADD COLUMN test_max_abs_error REAL;
ALTER TABLE results ADD COLUMN final_loss REAL;
ALTER TABLE results ADD COLUMN steps INTEGER;
ALTER TABLE results ADD COLUMN device TEXT;
ALTER TABLE results ADD COLUMN facts_train_sequences INTEGER;
ALTER TABLE results ADD COLUMN facts_test_sequences INTEGER;
ALTER TABLE results ADD COLUMN facts_distinct_queries INTEGER;
ALTER TABLE results ADD COLUMN facts_rank_lower_bound INTEGER;
ALTER TABLE results ADD COLUMN facts_rank_upper_bound INTEGER;
UPDATE results SET
  train_sequences = json_extract(result_json, '$.train.sequences'),
  train_max_abs_error = json_extract(result_json, '$.train.max_abs_error'),
  test_position_accuracy = json_extract(result_json, '$.test.position_accuracy'),
  test_exact_accuracy = json_extract(result_json, '$.test.exact_accuracy'),
  test_max_abs_error = json_extract(result_json, '$.test.max_abs_error'),
  final_loss = json_extract(result_json, '$.final_loss'),
  steps = json_extract(result_json, '$.steps'),
  device = json_extract(result_json, '$.device'),
  facts_train_sequences = json_extract(result_json, '$.facts.train_sequences'),
  facts_test_sequences = json_extract(result_json, '$.facts.test_sequences'),
  facts_distinct_queries = json_extract(result_json, '$.facts.distinct_queries'),
  facts_rank_lower_bound = json_extract(result_json, '$.facts.rank_lower_bound'),
  facts_rank_upper_bound = json_extract(result_json, '$.facts.rank_upper_bound'),
  result_json = NULL
WHERE result_json IS NOT NULL AND json_valid(result_json);
)sql"},
    // The result cache: a result row names the task it trained (task_key,
    // the SHA-256 of the task spec without seeds) and, for a row served
    // from the cache, the cell whose training it copies (cached_from).
    {4, R"sql(
ALTER TABLE results ADD COLUMN task_key TEXT NOT NULL DEFAULT '';
ALTER TABLE results ADD COLUMN cached_from INTEGER NOT NULL DEFAULT 0;
CREATE INDEX results_by_task ON results(task_key, seed, worker_build_id)
  WHERE task_key != '' AND cached_from = 0 AND state = {cell_done};
)sql"},
    // Grouped queries: the running aggregates of every (sweep, head, rank)
    // over its done cells, updated with each result, so that a grouped
    // query reads one row per group instead of every result; and an index
    // that pages a sweep's results in cell order. Existing results are
    // summed up here (two passes: the mean, then squared deviations from it).
    // Fewer index pages written per lease and per result: results_by_group
    // had no reader left, and the lease deadline and lease holder indexes
    // now hold leased cells only (every query of them asks for leased cells), so
    // a cell enters them when leased and leaves when done instead of moving
    // within them twice.
    {5, R"sql(
CREATE TABLE result_groups (
  sweep_id         TEXT NOT NULL,
  head_index       INTEGER NOT NULL,
  rank             INTEGER NOT NULL,
  n                INTEGER NOT NULL,  -- done cells
  exact_seeds      INTEGER NOT NULL,  -- of those, train error 0
  test_n           INTEGER NOT NULL,  -- of those, with a test split
  test_exact_seeds INTEGER NOT NULL,  -- of those, test error 0
  -- Per metric: mean, sum of squared deviations from it, min, max (NULL
  -- reads as 0).
  train_error_mean REAL, train_error_m2 REAL,
  train_error_min  REAL, train_error_max REAL,
  exact_mean REAL, exact_m2 REAL,
  exact_min  REAL, exact_max REAL,
  position_mean REAL, position_m2 REAL,
  position_min  REAL, position_max REAL,
  test_error_mean REAL, test_error_m2 REAL,
  test_error_min  REAL, test_error_max REAL,
  PRIMARY KEY (sweep_id, head_index, rank)
) WITHOUT ROWID;
CREATE INDEX results_by_sweep ON results(sweep_id);
DROP INDEX results_by_group;
DROP INDEX cells_by_deadline;
CREATE INDEX cells_by_deadline ON cells(lease_deadline_ms) WHERE state = {cell_leased};
DROP INDEX cells_by_worker;
CREATE INDEX cells_by_worker ON cells(worker_id) WHERE state = {cell_leased};
INSERT INTO result_groups
SELECT r.sweep_id, r.head_index, r.rank, COUNT(*),
  TOTAL(r.train_error = 0),
  TOTAL(r.test_sequences > 0),
  TOTAL(r.test_sequences > 0 AND r.test_error = 0),
  a.te, SUM((r.train_error - a.te) * (r.train_error - a.te)),
  MIN(r.train_error), MAX(r.train_error),
  a.ea, SUM((r.train_exact_accuracy - a.ea) * (r.train_exact_accuracy - a.ea)),
  MIN(r.train_exact_accuracy), MAX(r.train_exact_accuracy),
  a.pa, SUM((r.train_position_accuracy - a.pa) * (r.train_position_accuracy - a.pa)),
  MIN(r.train_position_accuracy), MAX(r.train_position_accuracy),
  COALESCE(a.ts, 0),
  COALESCE(SUM(CASE WHEN r.test_sequences > 0
                    THEN (r.test_error - a.ts) * (r.test_error - a.ts) END), 0),
  COALESCE(MIN(CASE WHEN r.test_sequences > 0 THEN r.test_error END), 0),
  COALESCE(MAX(CASE WHEN r.test_sequences > 0 THEN r.test_error END), 0)
FROM results r
JOIN (SELECT sweep_id, head_index, rank, AVG(train_error) AS te,
             AVG(train_exact_accuracy) AS ea, AVG(train_position_accuracy) AS pa,
             AVG(CASE WHEN test_sequences > 0 THEN test_error END) AS ts
      FROM results WHERE state = {cell_done} GROUP BY sweep_id, head_index, rank) a
  ON a.sweep_id = r.sweep_id AND a.head_index = r.head_index AND a.rank = r.rank
WHERE r.state = {cell_done}
GROUP BY r.sweep_id, r.head_index, r.rank;
)sql"},
    // Each result row also packed into one BLOB (server/core/results/packed_row.h),
    // in a narrow table of its own keyed like results, so that row queries
    // step through small records and read one column per row instead of
    // ~36; rows already stored are packed here from their columns.
    {6, R"sql(
CREATE TABLE result_packs (
  cell_id  INTEGER PRIMARY KEY,  -- results.cell_id
  sweep_id TEXT NOT NULL,
  packed   BLOB NOT NULL
);
INSERT INTO result_packs (cell_id, sweep_id, packed)
SELECT cell_id, sweep_id, ranksweep_pack_row(
  head_index, rank, seed, state, lease_id, attempt, worker_id, worker_build_id,
  worker_torch_version, worker_cuda_version, failure, finished_ms, cached_from,
  train_sequences, train_position_accuracy, train_exact_accuracy, train_error,
  train_max_abs_error, test_sequences, test_position_accuracy, test_exact_accuracy,
  test_error, test_max_abs_error, final_loss, steps, wall_seconds, device,
  facts_train_sequences, facts_test_sequences, facts_distinct_queries,
  facts_rank_lower_bound, facts_rank_upper_bound)
FROM results;
)sql"},
    // Per group also the done cells trained and their summed wall seconds,
    // and the done cells copied from the cache, so that a sweep's mean cell
    // time and cached count read one row per group instead of every result.
    {7, R"sql(
ALTER TABLE result_groups ADD COLUMN trained_n INTEGER NOT NULL DEFAULT 0;
ALTER TABLE result_groups ADD COLUMN trained_seconds REAL NOT NULL DEFAULT 0;
ALTER TABLE result_groups ADD COLUMN cached_n INTEGER NOT NULL DEFAULT 0;
UPDATE result_groups SET trained_n = a.tn, trained_seconds = a.ts, cached_n = a.cn
FROM (SELECT sweep_id, head_index, rank, SUM(cached_from = 0) AS tn,
             TOTAL(CASE WHEN cached_from = 0 THEN wall_seconds END) AS ts,
             SUM(cached_from != 0) AS cn
      FROM results WHERE state = {cell_done} GROUP BY sweep_id, head_index, rank) a
WHERE a.sweep_id = result_groups.sweep_id AND a.head_index = result_groups.head_index
  AND a.rank = result_groups.rank;
)sql"},
    // Fewer index entries moved per lease and per result. A (head, rank)
    // group's pending cells are found through an index of pending cells
    // only, which a cell leaves when leased instead of moving within it
    // twice; and one index of leased cells by worker and deadline replaces
    // the two (by deadline, by worker), so a cell enters and leaves one
    // index instead of two. Lease expiry reads the whole leased index, which
    // holds only the cells out on workers.
    {8, R"sql(
DROP INDEX cells_by_group;
CREATE INDEX cells_pending_by_group ON cells(sweep_id, head_index, rank) WHERE state = {cell_pending};
DROP INDEX cells_by_deadline;
DROP INDEX cells_by_worker;
CREATE INDEX cells_leased ON cells(worker_id, lease_deadline_ms) WHERE state = {cell_leased};
)sql"},
    // Which CompleteTasks call leased a cell as `next`: the smallest lease id
    // among that call's results, and the task's place in its reply (0 for a
    // cell leased by AcquireTasks). The same results sent again, after their
    // reply was lost, get the same tasks back instead of leasing more.
    {9, R"sql(
ALTER TABLE cells ADD COLUMN next_of INTEGER NOT NULL DEFAULT 0;
ALTER TABLE cells ADD COLUMN next_task INTEGER NOT NULL DEFAULT 0;
)sql"},
    // Quarantine (server/core/workers/quarantine.h): who took back which worker's
    // results and when, and the rows it invalidated, kept as they were
    // (packed, server/core/results/packed_row.h) but out of `results`, so that no
    // reader of `results` (queries, groups, the result cache) sees them and
    // the cell can take a fresh result. Copies of a result are found by
    // their source through an index of copies only.
    {10, R"sql(
CREATE TABLE quarantines (
  id          INTEGER PRIMARY KEY,
  worker_id   TEXT NOT NULL,
  since_ms    INTEGER NOT NULL,  -- results finished at or after this; 0 = all
  by          TEXT NOT NULL,     -- the caller's name (its token's)
  at_ms       INTEGER NOT NULL,
  results     INTEGER NOT NULL DEFAULT 0,  -- rows the worker trained
  copies      INTEGER NOT NULL DEFAULT 0,  -- rows the cache served from those
  cells_reset INTEGER NOT NULL DEFAULT 0   -- cells back to pending
);
CREATE TABLE invalid_results (
  id            INTEGER PRIMARY KEY,
  cell_id       INTEGER NOT NULL,
  sweep_id      TEXT NOT NULL,
  worker_id     TEXT NOT NULL,  -- the worker that trained it
  packed        BLOB NOT NULL,  -- the results row as it was
  invalid_ms    INTEGER NOT NULL,
  invalid_by    TEXT NOT NULL,
  quarantine_id INTEGER NOT NULL REFERENCES quarantines(id)
);
CREATE INDEX invalid_results_by_sweep ON invalid_results(sweep_id, id);
CREATE INDEX results_by_source ON results(cached_from) WHERE cached_from != 0;
)sql"},
    // The optional metrics of a result (common/spec/result_metrics.h), one
    // column each; NULL is missing, as every row stored before reads.
    {11, R"sql(
ALTER TABLE results ADD COLUMN first_exact_step INTEGER;
)sql"},
    // Recipes (common/spec/spec.h, SweepAxis): a cell, its result and its
    // group are one (head, rank, recipe); every existing row is recipe 0. A
    // UNIQUE constraint and a primary key cannot change in place, so cells
    // and result_groups are rebuilt (Migrate turns foreign keys off around
    // migrations and checks them before each commit).
    {12, R"sql(
CREATE TABLE cells_v11 (
  id                INTEGER PRIMARY KEY,
  sweep_id          TEXT NOT NULL REFERENCES sweeps(id),
  head_index        INTEGER NOT NULL,
  rank              INTEGER NOT NULL,
  recipe            INTEGER NOT NULL DEFAULT 0,
  seed              INTEGER NOT NULL,  -- uint64 stored bit for bit
  state             INTEGER NOT NULL,
  attempt           INTEGER NOT NULL DEFAULT 0,
  lease_id          INTEGER NOT NULL DEFAULT 0,
  lease_deadline_ms INTEGER NOT NULL DEFAULT 0,
  worker_id         TEXT NOT NULL DEFAULT '',
  last_failure      TEXT NOT NULL DEFAULT '',
  next_of           INTEGER NOT NULL DEFAULT 0,
  next_task         INTEGER NOT NULL DEFAULT 0,
  UNIQUE (sweep_id, head_index, rank, recipe, seed)
);
INSERT INTO cells_v11 (id, sweep_id, head_index, rank, recipe, seed, state, attempt, lease_id,
                       lease_deadline_ms, worker_id, last_failure, next_of, next_task)
SELECT id, sweep_id, head_index, rank, 0, seed, state, attempt, lease_id, lease_deadline_ms,
       worker_id, last_failure, next_of, next_task FROM cells;
DROP TABLE cells;
ALTER TABLE cells_v11 RENAME TO cells;
CREATE INDEX cells_by_state ON cells(sweep_id, state);
CREATE INDEX cells_by_lease ON cells(lease_id) WHERE lease_id != 0;
CREATE INDEX cells_pending_by_group ON cells(sweep_id, head_index, rank, recipe) WHERE state = {cell_pending};
CREATE INDEX cells_leased ON cells(worker_id, lease_deadline_ms) WHERE state = {cell_leased};
ALTER TABLE results ADD COLUMN recipe INTEGER NOT NULL DEFAULT 0;
CREATE TABLE result_groups_v11 (
  sweep_id         TEXT NOT NULL,
  head_index       INTEGER NOT NULL,
  rank             INTEGER NOT NULL,
  recipe           INTEGER NOT NULL DEFAULT 0,
  n                INTEGER NOT NULL,
  exact_seeds      INTEGER NOT NULL,
  test_n           INTEGER NOT NULL,
  test_exact_seeds INTEGER NOT NULL,
  train_error_mean REAL, train_error_m2 REAL,
  train_error_min  REAL, train_error_max REAL,
  exact_mean REAL, exact_m2 REAL,
  exact_min  REAL, exact_max REAL,
  position_mean REAL, position_m2 REAL,
  position_min  REAL, position_max REAL,
  test_error_mean REAL, test_error_m2 REAL,
  test_error_min  REAL, test_error_max REAL,
  trained_n        INTEGER NOT NULL DEFAULT 0,
  trained_seconds  REAL NOT NULL DEFAULT 0,
  cached_n         INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (sweep_id, head_index, rank, recipe)
) WITHOUT ROWID;
INSERT INTO result_groups_v11
SELECT sweep_id, head_index, rank, 0, n, exact_seeds, test_n, test_exact_seeds,
  train_error_mean, train_error_m2, train_error_min, train_error_max,
  exact_mean, exact_m2, exact_min, exact_max,
  position_mean, position_m2, position_min, position_max,
  test_error_mean, test_error_m2, test_error_min, test_error_max,
  trained_n, trained_seconds, cached_n
FROM result_groups;
DROP TABLE result_groups;
ALTER TABLE result_groups_v11 RENAME TO result_groups;
)sql"},
    // A worker is bound to the token that registered it (`owner`, the
    // token's name) and to its registration (`session_hash`, the SHA-256 of
    // the session secret RegisterWorker handed out; server/core/workers/worker_registry.h).
    // Rows from before have neither: the next registration of the id binds it.
    {13, R"sql(
ALTER TABLE workers ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN session_hash TEXT NOT NULL DEFAULT '';
)sql"},
    // Quarantine holds (server/core/workers/quarantine.h): a quarantined worker
    // leases and completes nothing until an admin lifts it; 0 = in good
    // standing, else when the quarantine that holds it was ordered.
    {14, R"sql(
ALTER TABLE workers ADD COLUMN quarantined_ms INTEGER NOT NULL DEFAULT 0;
)sql"},
    // What people write about a sweep (server/core/sweeps/sweep_admin.h): a note,
    // the archived mark, and tags, each tag a row so that a list by tag
    // reads an index.
    {15, R"sql(
CREATE TABLE sweep_notes (
  sweep_id TEXT PRIMARY KEY REFERENCES sweeps(id),
  note     TEXT NOT NULL DEFAULT '',
  archived INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE sweep_tags (
  sweep_id TEXT NOT NULL REFERENCES sweeps(id),
  tag      TEXT NOT NULL,
  PRIMARY KEY (sweep_id, tag)
) WITHOUT ROWID;
CREATE INDEX sweep_tags_by_tag ON sweep_tags(tag);
)sql"},
    // A quarantine that also holds the worker's token (`ranksweep workers
    // quarantine W --token`, server/core/workers/quarantine.h): every worker that
    // token registered, or registers later, is held until the worker that
    // was quarantined is lifted. A row per held token name.
    {16, R"sql(
CREATE TABLE held_tokens (
  name      TEXT PRIMARY KEY,
  worker_id TEXT NOT NULL,
  by        TEXT NOT NULL,
  at_ms     INTEGER NOT NULL
) WITHOUT ROWID;
)sql"},
    // Learning curves (common/spec/curve.h): a DONE result's encoded
    // curve, NULL when it has none; a cached row reads its source cell's.
    // Row queries read result_packs and groups result_groups, so neither
    // pages through curves.
    {17, R"sql(
ALTER TABLE results ADD COLUMN curve BLOB;
)sql"},
    // Recipe pruning (server/core/sweeps/pruning.h): each seed's training error at
    // each rung of its recipe, as a heartbeat reported it or its curve
    // read it when done. Cells have no foreign key to it: deleting a sweep
    // deletes its rows first.
    {18, R"sql(
CREATE TABLE rung_scores (
  cell_id     INTEGER NOT NULL,
  rung        INTEGER NOT NULL,
  train_error REAL NOT NULL,
  PRIMARY KEY (cell_id, rung)
) WITHOUT ROWID;
)sql"},
    // A counter per sweep that moves whenever one of its result_packs rows
    // is written or deleted, by whatever statement does it, so that a reply
    // built from those rows can be kept and served again while the counter
    // stands (server/service/query_cache.h). A deleted sweep keeps its row:
    // a counter that never restarts never matches a reply kept from before.
    {19, R"sql(
CREATE TABLE result_versions (
  sweep_id TEXT PRIMARY KEY,
  version  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER result_packs_inserted AFTER INSERT ON result_packs BEGIN
  INSERT INTO result_versions (sweep_id, version) VALUES (NEW.sweep_id, 1)
  ON CONFLICT (sweep_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER result_packs_deleted AFTER DELETE ON result_packs BEGIN
  INSERT INTO result_versions (sweep_id, version) VALUES (OLD.sweep_id, 1)
  ON CONFLICT (sweep_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER result_packs_updated AFTER UPDATE ON result_packs BEGIN
  INSERT INTO result_versions (sweep_id, version) VALUES (NEW.sweep_id, 1)
  ON CONFLICT (sweep_id) DO UPDATE SET version = version + 1;
  INSERT INTO result_versions (sweep_id, version)
  SELECT OLD.sweep_id, 1 WHERE OLD.sweep_id <> NEW.sweep_id
  ON CONFLICT (sweep_id) DO UPDATE SET version = version + 1;
END;
)sql"},
    // Column blocks (server/core/results/result_blocks.h): replacing,
    // updating or deleting a result row of a block's range deletes the
    // block, whatever statement does it.
    {20, R"sql(
CREATE TABLE result_blocks (
  id            INTEGER PRIMARY KEY,
  sweep_id      TEXT NOT NULL,
  first_cell_id INTEGER NOT NULL,
  last_cell_id  INTEGER NOT NULL,
  rows          INTEGER NOT NULL,
  layout        TEXT NOT NULL,
  columns       BLOB NOT NULL
);
CREATE INDEX result_blocks_by_sweep ON result_blocks (sweep_id, last_cell_id);
CREATE TRIGGER result_blocks_on_delete AFTER DELETE ON result_packs BEGIN
  DELETE FROM result_blocks WHERE sweep_id = OLD.sweep_id AND last_cell_id >= OLD.cell_id
  AND first_cell_id <= OLD.cell_id;
END;
CREATE TRIGGER result_blocks_on_update AFTER UPDATE ON result_packs BEGIN
  DELETE FROM result_blocks WHERE sweep_id = OLD.sweep_id AND last_cell_id >= OLD.cell_id
  AND first_cell_id <= OLD.cell_id;
  DELETE FROM result_blocks WHERE sweep_id = NEW.sweep_id AND last_cell_id >= NEW.cell_id
  AND first_cell_id <= NEW.cell_id;
END;
)sql"},
    // A done cell keeps its lease id (a repeated completion is answered from
    // it) but no lease lookup needs it, and random ids of every done cell
    // put each commit's index changes on as many pages as it has cells.
    {21, R"sql(
DROP INDEX cells_by_lease;
CREATE INDEX cells_by_lease ON cells(lease_id) WHERE lease_id != 0 AND state != {cell_done};
)sql"},
    // An added result row moves its sweep's results version once per
    // transaction, from the statement that adds it (NoteResultsAdded).
    {22, R"sql(
DROP TRIGGER result_packs_inserted;
)sql"},
};
constexpr bool VersionsAreOneToN() {
  for (size_t i = 0; i < std::size(kMigrations); ++i) {
    if (kMigrations[i].version != static_cast<int>(i) + 1) return false;
  }
  return true;
}
static_assert(VersionsAreOneToN(), "one migration per version, 1 to the last, in order");

const char kVersionSql[] = "SELECT COALESCE(MAX(version), 0) FROM schema_version";

}  // namespace

const int kSchemaVersion = static_cast<int>(std::size(kMigrations));

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration>* migrations = [] {
    const std::vector<std::pair<const absl::string_view, std::string>> states = {
        {"{cell_pending}", absl::StrCat(kCellPending)},
        {"{cell_leased}", absl::StrCat(kCellLeased)},
        {"{cell_done}", absl::StrCat(kCellDone)},
    };
    auto* list = new std::vector<Migration>();
    for (const MigrationText& m : kMigrations) {
      list->push_back({m.version, absl::StrReplaceAll(m.sql, states)});
    }
    return list;
  }();
  return *migrations;
}

absl::StatusOr<int> ReadSchemaVersion(Connection& c) {
  ASSIGN_OR_RETURN(Statement q, c.Prepare(kVersionSql));
  ASSIGN_OR_RETURN(bool row, q.Step());
  return row ? static_cast<int>(q.ColumnInt(0)) : 0;
}

absl::Status Migrate(Connection& w, const std::string& path) {
  RETURN_IF_ERROR(w.Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
  ASSIGN_OR_RETURN(int current, ReadSchemaVersion(w));
  if (current > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("database ", path, " has schema version ", current,
                     ", newer than this binary supports (", kSchemaVersion, ")"));
  }
  // A migration that rebuilds a table (create, copy, drop, rename) needs
  // foreign keys off: dropping the old table would otherwise delete, in
  // effect, the rows that reference it. They are checked before each commit
  // instead, and on again after.
  RETURN_IF_ERROR(w.Exec("PRAGMA foreign_keys=OFF"));
  for (const Migration& m : Migrations()) {
    if (m.version <= current) continue;
    RETURN_IF_ERROR(w.Exec("BEGIN IMMEDIATE"));
    absl::Status s = w.Exec(m.sql);
    if (s.ok()) {
      auto check = w.Prepare("PRAGMA foreign_key_check");
      s = check.status();
      if (s.ok()) {
        absl::StatusOr<bool> row = check->Step();
        s = !row.ok() ? row.status()
            : *row    ? absl::InternalError(absl::StrCat("a foreign key of table ",
                                                         check->ColumnText(0), " fails"))
                      : absl::OkStatus();
      }
    }
    if (s.ok()) {
      s = w.Exec(absl::StrCat("DELETE FROM schema_version; INSERT INTO schema_version VALUES (",
                              m.version, ")"));
    }
    if (s.ok()) s = w.Exec("COMMIT");
    if (!s.ok()) {
      w.Exec("ROLLBACK").IgnoreError();
      return absl::Status(s.code(), absl::StrCat("migration to schema version ", m.version,
                                                 " failed: ", s.message()));
    }
    current = m.version;
  }
  RETURN_IF_ERROR(EnsureMetricColumns(w));
  return w.Exec("PRAGMA foreign_keys=ON");
}

}  // namespace ranksweep::server
