// A thin C++ face of SQLite: one connection with its statement cache, and a
// prepared statement checked out of that cache.
//
// Prepared statements are cached per connection, keyed by their SQL text;
// Connection::Prepare hands one out reset and unbound, and the Statement
// handle resets it again when it goes out of scope.
//
// Errors: SQLite failures become absl::Status (kUnavailable for SQLITE_BUSY
// and SQLITE_LOCKED, kInternal otherwise) whose message holds SQLite's
// message and the SQL.
//
// Thread-safety: none. A Connection is opened with SQLITE_OPEN_NOMUTEX and
// must be used by one thread at a time; its owner (server/core/store.h)
// serializes the calls. A Statement belongs to the call that prepared it and
// must not outlive its Connection.
#ifndef RANKSWEEP_SERVER_CORE_SQLITE_H_
#define RANKSWEEP_SERVER_CORE_SQLITE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ranksweep::server {

// The parameter indexes a cached statement's named binds found, by the
// address and the text of the name: SQLite looks a name up by comparing it
// with each of the statement's parameters in turn, and a statement that binds
// a dozen names runs on every call of a worker.
struct ParameterNames {
  struct Known {
    const char* address;
    std::string name;
    int index;
  };
  std::vector<Known> known;
};

// A prepared statement checked out of a connection's cache. Move-only; resets
// the statement and clears its bindings on destruction. Bind indexes are
// 1-based, column indexes 0-based (SQLite's convention).
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt, ParameterNames* names)
      : db_(db), stmt_(stmt), names_(names) {}
  Statement(Statement&& other) noexcept
      : db_(other.db_), stmt_(other.stmt_), names_(other.names_) {
    other.stmt_ = nullptr;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Statement& Bind(int index, double value);
  Statement& Bind(int index, std::string_view value);
  Statement& Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }
  Statement& BindBlob(int index, std::string_view value);
  Statement& BindNull(int index);
  Statement& BindNull(const char* name) { return BindNull(IndexOf(name)); }
  Statement& BindBlob(const char* name, std::string_view value) {
    return BindBlob(IndexOf(name), value);
  }
  // By name (":name" in the SQL), as new statements bind. A name the
  // statement does not have is a programming error and aborts, so that a
  // misspelt name fails the first test that runs the statement instead of
  // binding nothing.
  Statement& Bind(const char* name, int64_t value) { return Bind(IndexOf(name), value); }
  Statement& Bind(const char* name, int value) { return Bind(IndexOf(name), value); }
  Statement& Bind(const char* name, double value) { return Bind(IndexOf(name), value); }
  Statement& Bind(const char* name, std::string_view value) { return Bind(IndexOf(name), value); }
  Statement& Bind(const char* name, const char* value) {
    return Bind(IndexOf(name), std::string_view(value));
  }

  // Rewinds the statement so it can run again; bindings are kept.
  Statement& Reset();

  // Advances to the next row: true when there is one, false when done.
  absl::StatusOr<bool> Step();
  // Runs a statement that returns no rows (or ignores them) to completion.
  absl::Status Run();

  int64_t ColumnInt(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;
  // Valid until the next Step, Reset or column call on this column.
  std::string_view ColumnBlob(int column) const;
  bool ColumnIsNull(int column) const;

 private:
  absl::Status Error(int rc) const;
  int IndexOf(const char* name) const;

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  ParameterNames* names_;  // the cache entry's; outlives the Statement
};

// One SQLite connection with its statement cache. Closes the connection,
// and finalizes every cached statement, on destruction.
class Connection {
 public:
  enum class Mode {
    kReadWrite,  // creates the file when it does not exist
    kReadOnly,
  };
  // Opens `path` with extended result codes and a busy timeout of
  // `busy_timeout_ms` (how long a call waits for a lock another connection
  // holds before it fails with kUnavailable). A `path` that starts with
  // "file:" is an SQLite URI ("file:name?mode=memory&cache=shared": a
  // database in memory that the connections of one process share).
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const std::string& path, Mode mode,
                                                          int busy_timeout_ms);

  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Returns the cached statement for `sql`, preparing it on first use. One
  // SQL text must not be checked out twice at the same time.
  absl::StatusOr<Statement> Prepare(const std::string& sql);
  // Runs one or more statements without caching (schema, pragmas).
  absl::Status Exec(const std::string& sql);
  // Runs one statement that returns no rows from the statement cache
  // (BEGIN, COMMIT, SAVEPOINT): compiling it again for every transaction
  // costs more than running it.
  absl::Status Run(const std::string& sql);
  // Work the open write transaction owes before it commits, done once
  // however many times it was owed: `sql`, a statement whose one parameter
  // is :key, run with `key`. A counter that must move once per transaction
  // (the results version, server/core/results/result_blocks.h) then costs
  // one statement per commit instead of one per row.
  //  * `sql` must outlive the transaction (a static string).
  //  * Outside a transaction it runs at once.
  //  * Commit() runs what is owed, in the order first owed, then COMMIT.
  //  * A rollback of the whole transaction forgets it. A rollback to a
  //    savepoint does not, so it may run for a change that was undone: owe
  //    only work for which that is harmless.
  //  * Committing any other way while something is owed fails: SQLite turns
  //    that COMMIT into a rollback (SQLITE_CONSTRAINT_COMMITHOOK), so owed
  //    work is never skipped.
  absl::Status OweBeforeCommit(const std::string& sql, std::string_view key);
  // Whether `sql` with `key` is owed and has not run yet.
  bool Owes(const std::string& sql, std::string_view key) const;
  // Runs the owed work, then COMMIT. On an error the transaction stays open
  // for the caller to roll back.
  absl::Status Commit();

  // Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t Changes() const;
  int64_t LastInsertRowId() const;
  // Whether a transaction is open: false after COMMIT or ROLLBACK, and after
  // SQLite rolled a transaction back by itself (an I/O error, a full disk).
  bool InTransaction() const;

  // The SQLite handle, for registering SQL functions
  // (server/core/results/packed_row.h). The Connection keeps owning it.
  sqlite3* handle() const { return db_; }

 private:
  explicit Connection(sqlite3* db) : db_(db) {}
  // SQLite's commit and rollback hooks of a read-write connection.
  static int OnCommit(void* self);
  static void OnRollback(void* self);

  struct Cached {
    sqlite3_stmt* stmt = nullptr;
    ParameterNames names;
  };

  sqlite3* db_;
  // Node-based: a Statement keeps a pointer to its entry's names.
  std::unordered_map<std::string, Cached> cache_;
  struct Owed {
    const std::string* sql;  // the caller's, which outlives the transaction
    std::string key;
  };
  std::vector<Owed> owed_;  // by the open transaction, in the order first owed
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_SQLITE_H_
