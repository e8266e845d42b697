#include "server/core/store.h"

#include <sqlite3.h>

#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/packed_row.h"

namespace ranksweep::server {
namespace {

absl::Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string text = absl::StrCat("sqlite: ", msg, " (", sqlite3_errstr(rc), ") in: ", std::string(what));
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return absl::UnavailableError(text);
  return absl::InternalError(text);
}

// One migration takes the schema from `version - 1` to `version`.
struct Migration {
  int version;
  const char* sql;
};

// Append new migrations at the end; never edit one that has shipped.
const Migration kMigrations[] = {
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
  WHERE task_key != '' AND cached_from = 0 AND state = 3;
)sql"},
    // Grouped queries: the running aggregates of every (sweep, head, rank)
    // over its done cells, updated with each result, so that a grouped
    // query reads one row per group instead of every result; and an index
    // that pages a sweep's results in cell order. Existing results are
    // summed up here (two passes: the mean, then squared deviations from it).
    // Fewer index pages written per lease and per result: results_by_group
    // had no reader left, and the lease deadline and lease holder indexes
    // now hold leased cells only (every query of them asks for state 2), so
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
CREATE INDEX cells_by_deadline ON cells(lease_deadline_ms) WHERE state = 2;
DROP INDEX cells_by_worker;
CREATE INDEX cells_by_worker ON cells(worker_id) WHERE state = 2;
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
      FROM results WHERE state = 3 GROUP BY sweep_id, head_index, rank) a
  ON a.sweep_id = r.sweep_id AND a.head_index = r.head_index AND a.rank = r.rank
WHERE r.state = 3
GROUP BY r.sweep_id, r.head_index, r.rank;
)sql"},
    // Each result row also packed into one BLOB (server/core/packed_row.h),
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
      FROM results WHERE state = 3 GROUP BY sweep_id, head_index, rank) a
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
CREATE INDEX cells_pending_by_group ON cells(sweep_id, head_index, rank) WHERE state = 1;
DROP INDEX cells_by_deadline;
DROP INDEX cells_by_worker;
CREATE INDEX cells_leased ON cells(worker_id, lease_deadline_ms) WHERE state = 2;
)sql"},
    // Which CompleteTasks call leased a cell as `next`: the smallest lease id
    // among that call's results, and the task's place in its reply (0 for a
    // cell leased by AcquireTasks). The same results sent again, after their
    // reply was lost, get the same tasks back instead of leasing more.
    {9, R"sql(
ALTER TABLE cells ADD COLUMN next_of INTEGER NOT NULL DEFAULT 0;
ALTER TABLE cells ADD COLUMN next_task INTEGER NOT NULL DEFAULT 0;
)sql"},
    // Quarantine (server/core/quarantine.h): who took back which worker's
    // results and when, and the rows it invalidated, kept as they were
    // (packed, server/core/packed_row.h) but out of `results`, so that no
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
    // Recipes (common/spec/spec.h, SweepAxis): a cell, its result and its
    // group are one (head, rank, recipe); every existing row is recipe 0. A
    // UNIQUE constraint and a primary key cannot change in place, so cells
    // and result_groups are rebuilt (Migrate turns foreign keys off around
    // migrations and checks them before each commit).
    {11, R"sql(
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
CREATE INDEX cells_pending_by_group ON cells(sweep_id, head_index, rank, recipe) WHERE state = 1;
CREATE INDEX cells_leased ON cells(worker_id, lease_deadline_ms) WHERE state = 2;
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
};

absl::StatusOr<sqlite3*> OpenConnection(const std::string& path, int flags,
                                        const StoreOptions& options) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = SqliteError(db, rc, absl::StrCat("open ", path));
    sqlite3_close_v2(db);
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, options.busy_timeout_ms);
  return db;
}

}  // namespace

// ------------------------------------------------------------------ Statement

Statement::~Statement() {
  if (stmt_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}

Statement& Statement::Bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                    SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::BindBlob(int index, std::string_view value) {
  sqlite3_bind_blob(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Statement& Statement::Reset() {
  sqlite3_reset(stmt_);
  return *this;
}

absl::Status Statement::Error(int rc) const { return SqliteError(db_, rc, sqlite3_sql(stmt_)); }

absl::StatusOr<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Error(rc);
}

absl::Status Statement::Run() {
  while (true) {
    ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return absl::OkStatus();
  }
}

int64_t Statement::ColumnInt(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::ColumnDouble(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return std::string();
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column));
}

std::string_view Statement::ColumnBlob(int column) const {
  const void* blob = sqlite3_column_blob(stmt_, column);
  if (blob == nullptr) return std::string_view();
  return std::string_view(static_cast<const char*>(blob),
                          static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

bool Statement::ColumnIsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

// ------------------------------------------------------------------ Connection

Connection::~Connection() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

absl::StatusOr<Statement> Connection::Prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                                SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db_, rc, sql);
    it = cache_.emplace(sql, stmt).first;
  }
  return Statement(db_, it->second);
}

absl::Status Connection::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string what = absl::StrCat(err != nullptr ? err : "", " in: ", sql.substr(0, 200));
    sqlite3_free(err);
    return SqliteError(db_, rc, what);
  }
  return absl::OkStatus();
}

int64_t Connection::Changes() const { return sqlite3_changes64(db_); }

int64_t Connection::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

// ------------------------------------------------------------------ Store

Store::Store(std::string path, std::unique_ptr<Connection> writer)
    : path_(std::move(path)), writer_(std::move(writer)) {}

Store::~Store() {
  if (writer_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      closing_ = true;
    }
    queue_cv_.notify_all();
    writer_thread_.join();
  }
  // The readers go first so that the writer's close can checkpoint the WAL.
  quick_reader_.reset();
  reader_.reset();
  writer_.reset();
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const StoreOptions& options) {
  ASSIGN_OR_RETURN(sqlite3 * wdb,
                   OpenConnection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, options));
  std::unique_ptr<Store> store(new Store(path, std::unique_ptr<Connection>(new Connection(wdb))));
  RETURN_IF_ERROR(RegisterPackRowFunction(wdb));
  Connection& w = *store->writer_;
  // WAL: readers and the writer do not block each other. FULL: every commit
  // syncs the WAL, so a committed transaction survives power loss.
  RETURN_IF_ERROR(w.Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(w.Exec("PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(w.Exec("PRAGMA wal_autocheckpoint=10000"));
  RETURN_IF_ERROR(w.Exec("PRAGMA foreign_keys=ON"));
  // The savepoints of a group commit that had a failed request, and the
  // statement journal of a statement that may fail halfway, keep the
  // original of every page they change. With temp files that journal spills
  // to a file past 64 KiB and then costs two pwrite calls per page (most of
  // the server's system calls in a dispatch run when every request had a
  // savepoint). In memory it is a memcpy; it lives for one request.
  RETURN_IF_ERROR(w.Exec("PRAGMA temp_store=MEMORY"));
  {
    ASSIGN_OR_RETURN(Statement mode, w.Prepare("PRAGMA journal_mode"));
    ASSIGN_OR_RETURN(bool row, mode.Step());
    if (!row || mode.ColumnText(0) != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat("database ", path, " cannot use WAL mode (", row ? mode.ColumnText(0) : "",
                       "); is it on a network filesystem?"));
    }
  }
  RETURN_IF_ERROR(store->Migrate());

  ASSIGN_OR_RETURN(sqlite3 * rdb, OpenConnection(path, SQLITE_OPEN_READONLY, options));
  store->reader_.reset(new Connection(rdb));
  RETURN_IF_ERROR(store->reader_->Exec("PRAGMA query_only=ON"));
  // Long scans (a sweep's results) read the file through a memory map and a
  // 64 MiB page cache instead of one pread per page.
  RETURN_IF_ERROR(store->reader_->Exec("PRAGMA mmap_size=1073741824"));
  RETURN_IF_ERROR(store->reader_->Exec("PRAGMA cache_size=-65536"));
  ASSIGN_OR_RETURN(sqlite3 * qdb, OpenConnection(path, SQLITE_OPEN_READONLY, options));
  store->quick_reader_.reset(new Connection(qdb));
  RETURN_IF_ERROR(store->quick_reader_->Exec("PRAGMA query_only=ON"));
  Store* s = store.get();
  store->writer_thread_ = std::thread([s] { s->WriterLoop(); });
  return store;
}

absl::Status Store::Migrate() {
  // Called by Open() before the store is shared: no other writer exists.
  Connection& w = *writer_;
  RETURN_IF_ERROR(w.Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
  int current = 0;
  {
    ASSIGN_OR_RETURN(Statement q, w.Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version"));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) current = static_cast<int>(q.ColumnInt(0));
  }
  if (current > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("database ", path_, " has schema version ", current,
                     ", newer than this binary supports (", kSchemaVersion, ")"));
  }
  // A migration that rebuilds a table (create, copy, drop, rename) needs
  // foreign keys off: dropping the old table would otherwise delete, in
  // effect, the rows that reference it. They are checked before each commit
  // instead, and on again after.
  RETURN_IF_ERROR(w.Exec("PRAGMA foreign_keys=OFF"));
  for (const Migration& m : kMigrations) {
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
  return w.Exec("PRAGMA foreign_keys=ON");
}

absl::StatusOr<int> Store::SchemaVersion() {
  int version = 0;
  RETURN_IF_ERROR(Read([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version"));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) version = static_cast<int>(q.ColumnInt(0));
    return absl::OkStatus();
  }));
  return version;
}

absl::Status Store::CheckWritable() {
  absl::Status s = Write([](Connection& c) {
    return c.Exec("UPDATE meta SET value = value WHERE key = 'next_lease_id'");
  });
  if (s.ok()) return s;
  std::string reason(s.message());
  reason = reason.substr(0, reason.find(" in: "));  // SQLite's words, not the SQL
  if (absl::StartsWith(reason, "sqlite: ")) reason = reason.substr(8);
  // "MESSAGE (CODE TEXT)": the two are often the same words.
  const std::string message = reason.substr(0, reason.find(" ("));
  if (reason == absl::StrCat(message, " (", message, ")")) reason = message;
  return absl::FailedPreconditionError(
      absl::StrCat("database ", path_, " is not writable (", reason,
                   "); the coordinator needs to write the file, its -wal and -shm files and "
                   "their directory"));
}

absl::Status Store::Write(absl::FunctionRef<absl::Status(Connection&)> fn) {
  if (std::this_thread::get_id() == writer_thread_.get_id()) {
    return absl::FailedPreconditionError(
        "Store::Write called on the writer thread, which would wait for itself");
  }
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  absl::Status result;
  WriteAsync([fn](Connection& c) { return fn(c); },
             [&](absl::Status s) {
               // Notified under the lock: the waiter's frame (mu, cv) may be
               // gone as soon as it sees `finished`.
               std::lock_guard<std::mutex> lock(mu);
               result = std::move(s);
               finished = true;
               cv.notify_one();
             });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return finished; });
  return result;
}

void Store::WriteAsync(WriteFn fn, WriteDone done) {
  auto* request = new WriteRequest{std::move(fn), std::move(done), absl::OkStatus()};
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (!closing_) {
      queue_.push_back(request);
      request = nullptr;
    }
  }
  if (request == nullptr) {
    // Cheap when the writer is busy: nobody waits on the condition variable
    // then, so no system call.
    queue_cv_.notify_one();
    return;
  }
  request->done(absl::UnavailableError("the store is closing"));
  delete request;
}

void Store::WriterLoop() {
  std::vector<WriteRequest*> batch;
  std::unique_lock<std::mutex> lock(queue_mu_);
  while (true) {
    queue_cv_.wait(lock, [this] { return closing_ || !queue_.empty(); });
    if (queue_.empty()) return;  // closing, and everything queued has run
    // Everything queued while the last batch ran, up to one batch, under
    // one commit and one sync.
    batch.clear();
    while (!queue_.empty() && batch.size() < kMaxWriteBatch) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    lock.unlock();
    RunBatch(batch);
    lock.lock();
    stats_.writes += static_cast<int64_t>(batch.size());
    lock.unlock();
    // The calls finish here, on the thread that committed them.
    for (WriteRequest* r : batch) {
      r->done(std::move(r->status));
      delete r;
    }
    lock.lock();
  }
}

void Store::SetCommitObserver(std::function<void(double seconds)> observer) {
  commit_observer_ = std::move(observer);
}

Store::WriteStats Store::write_stats() {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return stats_;
}

size_t Store::queued_writes() {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return queue_.size();
}

namespace {

// Runs one of the group commit's own statements (BEGIN, SAVEPOINT, RELEASE,
// COMMIT) from the statement cache: compiling it again for every request
// cost more than running it.
absl::Status RunCached(Connection& w, const std::string& sql) {
  ASSIGN_OR_RETURN(Statement statement, w.Prepare(sql));
  return statement.Run();
}

}  // namespace

void Store::RunBatch(const std::vector<WriteRequest*>& batch) {
  static const std::string kBegin = "BEGIN IMMEDIATE";
  static const std::string kSavepoint = "SAVEPOINT write_request";
  static const std::string kRelease = "RELEASE write_request";
  static const std::string kCommit = "COMMIT";
  Connection& w = *writer_;
  // The requests of a batch first run one after another with nothing
  // around each: a savepoint makes SQLite copy every page a request first
  // changes into its statement journal, about a quarter of the SQL time of
  // a small request. When one of them fails (a stale lease, an unknown
  // cell), the transaction with its partial changes is rolled back; it keeps
  // its error without running again, and the others run again from the
  // start, now each in a savepoint, so that a second failure in the batch
  // undoes only its own changes. A lone request never needs a savepoint:
  // the transaction's rollback undoes it.
  std::vector<WriteRequest*> todo(batch.begin(), batch.end());
  bool savepoints = false;
  size_t next = 0;  // the first request of todo not yet run
  while (next < todo.size()) {
    absl::Status begin = RunCached(w, kBegin);
    if (!begin.ok()) {
      for (size_t i = next; i < todo.size(); ++i) todo[i]->status = begin;
      return;
    }
    const size_t first = next;
    const bool guard = savepoints && todo.size() - first > 1;
    // Requests run in this transaction, in order; those that succeeded wait
    // for the commit to learn their outcome.
    std::vector<WriteRequest*> applied;
    bool aborted = false, run_again = false;
    for (; next < todo.size() && !aborted && !run_again; ++next) {
      WriteRequest* r = todo[next];
      absl::Status s = guard ? RunCached(w, kSavepoint) : absl::OkStatus();
      if (s.ok()) s = r->fn(w);
      if (sqlite3_get_autocommit(w.db_) != 0) {
        // SQLite rolled the whole transaction back (I/O error, disk full):
        // what the earlier requests did is gone with it.
        const absl::Status lost = s.ok() ? absl::InternalError("write transaction rolled back")
                                         : s;
        r->status = lost;
        for (WriteRequest* done : applied) {
          done->status = absl::Status(lost.code(),
                                      absl::StrCat("transaction rolled back by a later write in "
                                                   "the same commit: ",
                                                   lost.message()));
        }
        applied.clear();
        aborted = true;
        continue;  // ++next: the remaining requests get a fresh transaction
      }
      if (s.ok() && guard) s = RunCached(w, kRelease);
      r->status = s;
      if (s.ok()) {
        applied.push_back(r);
      } else if (guard) {
        w.Exec("ROLLBACK TO write_request").IgnoreError();
        w.Exec("RELEASE write_request").IgnoreError();
      } else if (next + 1 < todo.size() || !applied.empty()) {
        // Unguarded, its partial changes are mixed with the others': undo
        // the transaction, drop the failed request, run the rest again.
        w.Exec("ROLLBACK").IgnoreError();
        todo.erase(todo.begin() + static_cast<std::ptrdiff_t>(next));
        next = first;
        savepoints = true;
        run_again = true;
        std::lock_guard<std::mutex> lock(queue_mu_);
        ++stats_.reruns;
        break;
      }
    }
    if (aborted || run_again) continue;
    // One COMMIT, one sync, for every request that succeeded. A batch whose
    // requests all failed has nothing to keep.
    const auto commit_start = std::chrono::steady_clock::now();
    absl::Status commit = applied.empty() ? w.Exec("ROLLBACK") : RunCached(w, kCommit);
    if (commit.ok() && !applied.empty() && commit_observer_) {
      commit_observer_(std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                     commit_start)
                           .count());
    }
    if (!commit.ok()) {
      w.Exec("ROLLBACK").IgnoreError();
      for (WriteRequest* r : applied) r->status = commit;
    } else if (!applied.empty()) {
      std::lock_guard<std::mutex> lock(queue_mu_);
      ++stats_.commits;
    }
  }
}

namespace {

absl::Status ReadOn(Connection& r, absl::FunctionRef<absl::Status(Connection&)> fn) {
  RETURN_IF_ERROR(r.Exec("BEGIN"));
  absl::Status s = fn(r);
  // A read transaction has nothing to commit; ending it releases the snapshot.
  absl::Status end = r.Exec(s.ok() ? "COMMIT" : "ROLLBACK");
  return s.ok() ? end : s;
}

}  // namespace

absl::Status Store::Read(absl::FunctionRef<absl::Status(Connection&)> fn) {
  std::lock_guard<std::mutex> lock(read_mu_);
  return ReadOn(*reader_, fn);
}

absl::Status Store::QuickRead(absl::FunctionRef<absl::Status(Connection&)> fn) {
  std::lock_guard<std::mutex> lock(quick_mu_);
  return ReadOn(*quick_reader_, fn);
}

}  // namespace ranksweep::server
