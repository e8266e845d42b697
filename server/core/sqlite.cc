#include "server/core/sqlite.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <sqlite3.h>

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/log.h"
#include "server/core/wal_buffer.h"

namespace ranksweep::server {
namespace {

absl::Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string text = absl::StrCat("sqlite: ", msg, " (", sqlite3_errstr(rc), ") in: ", std::string(what));
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return absl::UnavailableError(text);
  // A write past a file size limit (EFBIG, SIGXFSZ being ignored) or onto
  // a full disk (ENOSPC) that SQLite reports as an I/O error is the same
  // condition as SQLITE_FULL for the caller.
  const int os_error = db != nullptr && primary == SQLITE_IOERR ? sqlite3_system_errno(db) : 0;
  if (primary == SQLITE_FULL || os_error == EFBIG || os_error == ENOSPC) {
    // A full disk (or file size limit, or max_page_count) reaches the
    // caller in these words, without the SQL, which goes to the log; the
    // transaction is rolled back, so nothing of it is written.
    LogEvent("error: %s", text);
    return absl::ResourceExhaustedError("database or disk is full");
  }
  return absl::InternalError(text);
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

int Statement::IndexOf(const char* name) const {
  // Names are string literals, so the address finds one; the text guards
  // against a name built at run time at an address an earlier one used.
  for (const ParameterNames::Known& known : names_->known) {
    if (known.address == name && std::strcmp(known.name.c_str(), name) == 0) return known.index;
  }
  const int index = sqlite3_bind_parameter_index(stmt_, name);
  if (index == 0) {
    std::fprintf(stderr, "ranksweepd: no parameter %s in: %s\n", name, sqlite3_sql(stmt_));
    std::abort();
  }
  // Bounded: names built at run time must not grow it without end.
  if (names_->known.size() < static_cast<size_t>(2 * sqlite3_bind_parameter_count(stmt_))) {
    names_->known.push_back({name, name, index});
  }
  return index;
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
  for (auto& [sql, cached] : cache_) sqlite3_finalize(cached.stmt);
  sqlite3_close_v2(db_);
}

absl::StatusOr<Statement> Connection::Prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                                SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db_, rc, sql);
    it = cache_.emplace(sql, Cached{stmt, {}}).first;
  }
  return Statement(db_, it->second.stmt, &it->second.names);
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

absl::Status Connection::Run(const std::string& sql) {
  ASSIGN_OR_RETURN(Statement statement, Prepare(sql));
  return statement.Run();
}

absl::Status Connection::OweBeforeCommit(const std::string& sql, std::string_view key) {
  if (!InTransaction()) {
    ASSIGN_OR_RETURN(Statement now, Prepare(sql));
    now.Bind(":key", key);
    return now.Run();
  }
  if (!Owes(sql, key)) owed_.push_back({&sql, std::string(key)});
  return absl::OkStatus();
}

bool Connection::Owes(const std::string& sql, std::string_view key) const {
  for (const Owed& o : owed_) {
    if ((o.sql == &sql || *o.sql == sql) && o.key == key) return true;
  }
  return false;
}

absl::Status Connection::Commit() {
  static const std::string kCommit = "COMMIT";
  for (const Owed& o : owed_) {
    ASSIGN_OR_RETURN(Statement owed, Prepare(*o.sql));
    owed.Bind(":key", o.key);
    RETURN_IF_ERROR(owed.Run());
  }
  owed_.clear();
  return Run(kCommit);
}

int Connection::OnCommit(void* self) {
  return static_cast<Connection*>(self)->owed_.empty() ? 0 : 1;
}

void Connection::OnRollback(void* self) { static_cast<Connection*>(self)->owed_.clear(); }

int64_t Connection::Changes() const { return sqlite3_changes64(db_); }

int64_t Connection::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

bool Connection::InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const std::string& path, Mode mode,
                                                             int busy_timeout_ms) {
  // Once per process, before SQLite initializes (the first open does): no
  // memory statistics. With them, each of SQLite's allocations and frees
  // takes a global mutex to count itself; nothing here reads the counts, and
  // on the dispatch benchmark they were a tenth of the writer thread's
  // instructions (bench/dispatch_bench.cc). Where SQLite was already
  // initialized by other code of the process, the call is refused and
  // changes nothing.
  static const int kConfigured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  (void)kConfigured;
  const int flags = mode == Mode::kReadWrite ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                                             : SQLITE_OPEN_READONLY;
  sqlite3* db = nullptr;
  const int uri = absl::StartsWith(path, "file:") ? SQLITE_OPEN_URI : 0;
  // A writer gathers its write-ahead log's frames into few system calls
  // (server/core/wal_buffer.h); readers write nothing.
  const char* vfs = mode == Mode::kReadWrite ? WalBufferVfs() : nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | uri | SQLITE_OPEN_NOMUTEX, vfs);
  if (rc != SQLITE_OK) {
    absl::Status s = SqliteError(db, rc, absl::StrCat("open ", path));
    sqlite3_close_v2(db);
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  std::unique_ptr<Connection> connection(new Connection(db));
  if (mode == Mode::kReadWrite) {
    sqlite3_commit_hook(db, &Connection::OnCommit, connection.get());
    sqlite3_rollback_hook(db, &Connection::OnRollback, connection.get());
  }
  return connection;
}

}  // namespace ranksweep::server
