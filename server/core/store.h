// The coordinator's SQLite database: opening it, the versioned schema and its
// migrations, and transactions on two connections.
//
//  * One writer connection, used only by the store's writer thread. Write()
//    and WriteAsync() queue a function; the thread runs it inside BEGIN
//    IMMEDIATE ... COMMIT and rolls it back when it returns an error. The
//    writer runs with journal_mode=WAL and synchronous=FULL: in WAL mode FULL
//    syncs the log on every commit, so an OK outcome means the transaction
//    is durable and survives a crash or power loss.
//  * Group commit: the thread takes every function queued while it was busy
//    (up to kMaxWriteBatch) into one transaction and commits them under one
//    sync. Under load a commit serves many calls. A function that fails
//    keeps only its error: the others' changes stay. They first run with
//    nothing around each; when one fails, the transaction is rolled back and
//    the others run again from its start, each in a savepoint from then on.
//    So a function may run more than once, and must start from nothing each
//    time: set what it hands back, never add to what an earlier run left,
//    and leave anything that must happen once (a log line) until after the
//    commit.
//  * One read-only connection (SQLITE_OPEN_READONLY), guarded by its own
//    mutex. Read() runs a function inside one read transaction, a consistent
//    snapshot. In WAL mode readers never block the writer and the writer never
//    blocks readers, so a long query does not hold up leases or results.
//  * A second read-only connection with its own mutex for QuickRead(): short
//    indexed lookups made on every call (bearer-token checks), so that they
//    never queue behind a long query on the first one.
//
// Prepared statements are cached per connection, keyed by their SQL text;
// Connection::Prepare hands one out reset and unbound, and the Statement
// handle resets it again when it goes out of scope.
//
// Schema: the table `schema_version` holds the version the file is at; Open()
// applies every migration above it, each in its own transaction, and refuses
// a file written by a newer binary (FailedPrecondition).
//
// Errors: SQLite failures become absl::Status (kUnavailable for SQLITE_BUSY,
// kInternal otherwise) whose message holds SQLite's message and the SQL.
//
// Thread-safety: Store is safe to use from many threads. A Connection and its
// Statements belong to the one Write()/Read() call that handed them out and
// must not escape it.
#ifndef RANKSWEEP_SERVER_CORE_STORE_H_
#define RANKSWEEP_SERVER_CORE_STORE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ranksweep::server {

// A prepared statement checked out of a connection's cache. Move-only; resets
// the statement and clears its bindings on destruction. Bind indexes are
// 1-based, column indexes 0-based (SQLite's convention).
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) {
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

  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

// One SQLite connection with its statement cache. Handed out by Store.
class Connection {
 public:
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Returns the cached statement for `sql`, preparing it on first use. One
  // SQL text must not be checked out twice at the same time.
  absl::StatusOr<Statement> Prepare(const std::string& sql);
  // Runs one or more statements without caching (schema, pragmas).
  absl::Status Exec(const std::string& sql);
  // Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t Changes() const;
  int64_t LastInsertRowId() const;

 private:
  friend class Store;
  explicit Connection(sqlite3* db) : db_(db) {}

  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

struct StoreOptions {
  // How long a connection waits for a lock held by another connection (for
  // example another process opening the same file) before failing.
  int busy_timeout_ms = 5000;
};

class Store {
 public:
  // The schema version this binary writes.
  static constexpr int kSchemaVersion = 11;

  // Opens (creating if needed) the database at `path`, migrates it to
  // kSchemaVersion, then opens the read-only connections.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     const StoreOptions& options = {});
  // Runs every write already queued, stops the writer thread, then closes
  // the connections.
  ~Store();

  // Runs `fn` in a write transaction on the writer thread, possibly together
  // with other callers' functions (group commit, above), and waits for the
  // outcome. Keeps its changes when `fn` returns OK and the commit succeeds;
  // rolls them back and returns the error otherwise. Writes are serialized.
  // `fn` may run more than once (group commit, above). OK means durable.
  // Must not be called on the writer thread (from a function or a `done`
  // below): that is FailedPrecondition, not a deadlock.
  absl::Status Write(absl::FunctionRef<absl::Status(Connection&)> fn);

  // Like Write(), without waiting: queues `fn` and returns at once. `fn`
  // runs on the writer thread, and so does `done`, with the outcome, as soon
  // as the commit has synced (or failed): the thread that committed finishes
  // the call, with no hand-over to a waiting thread. `done` holds up the
  // next commit while it runs, so it must be short and must not block; it
  // may queue more writes with WriteAsync().
  using WriteFn = std::function<absl::Status(Connection&)>;
  using WriteDone = std::function<void(absl::Status)>;
  void WriteAsync(WriteFn fn, WriteDone done);

  // Runs `fn` in one read transaction on the read-only connection. Read
  // transactions are serialized among themselves but run alongside writes.
  absl::Status Read(absl::FunctionRef<absl::Status(Connection&)> fn);

  // Like Read(), on a separate read-only connection reserved for short point
  // lookups by an index (a token by its hash), so that they never wait for a
  // long query running in Read(). Scans belong in Read().
  absl::Status QuickRead(absl::FunctionRef<absl::Status(Connection&)> fn);

  // Counters of the writer since Open: functions run by Write() and the
  // transactions committed for them (fewer when calls shared a commit), and
  // the transactions rolled back because a function in them failed, after
  // which the others ran again (group commit, above).
  struct WriteStats {
    int64_t writes = 0;
    int64_t commits = 0;
    int64_t reruns = 0;
  };
  WriteStats write_stats();
  // Called on the writer thread after every COMMIT that succeeded, with the
  // seconds it took (its sync included): the operators' commit latency
  // (server/core/metrics.h). Set it before the first write; it must be short
  // and must not block.
  void SetCommitObserver(std::function<void(double seconds)> observer);

  // Writes waiting for the writer thread right now (not counting a batch
  // being run). For tests and diagnostics.
  size_t queued_writes();

  // The schema version the file is at (kSchemaVersion after Open).
  absl::StatusOr<int> SchemaVersion();

  // Runs a real write transaction (it rewrites one row with its own value)
  // and commits it, so that a file SQLite could open only for reading (a
  // read-only file or directory, a read-only mount) is found before the
  // first call needs a write. FailedPrecondition naming the file and
  // SQLite's reason, without the SQL, when it cannot be written.
  absl::Status CheckWritable();

  const std::string& path() const { return path_; }

 private:
  // One function waiting in the group-commit queue, owned by the queue until
  // the writer thread has run its `done`.
  struct WriteRequest {
    WriteFn fn;
    WriteDone done;
    absl::Status status;
  };
  // The most functions one commit takes; the rest wait for the next one.
  static constexpr size_t kMaxWriteBatch = 256;

  Store(std::string path, std::unique_ptr<Connection> writer);
  absl::Status Migrate();
  // The writer thread: takes what is queued, runs it, finishes it; until
  // the store closes and the queue is empty.
  void WriterLoop();
  // Runs `batch` as described above and sets every request's status. Only
  // the writer thread runs it.
  void RunBatch(const std::vector<WriteRequest*>& batch);

  const std::string path_;
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;  // work queued, or closing
  std::deque<WriteRequest*> queue_;   // waiting, in arrival order
  bool closing_ = false;              // guarded by queue_mu_
  WriteStats stats_;                  // guarded by queue_mu_
  std::function<void(double)> commit_observer_;  // set before the first write
  std::thread writer_thread_;
  std::unique_ptr<Connection> writer_;
  std::mutex read_mu_;
  std::unique_ptr<Connection> reader_;
  std::mutex quick_mu_;
  std::unique_ptr<Connection> quick_reader_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_STORE_H_
