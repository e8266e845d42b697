// The coordinator's SQLite database: opening it, bringing its schema up to
// date, and transactions on three connections.
//
//  * One writer connection, used only by the writer thread of a GroupCommit
//    (server/core/group_commit.h). Write() and WriteAsync() queue a function;
//    the thread runs it inside BEGIN IMMEDIATE ... COMMIT, several callers'
//    functions under one commit, and rolls it back when it returns an error.
//    The writer runs with journal_mode=WAL and synchronous=FULL: in WAL mode
//    FULL syncs the log on every commit, so an OK outcome means the
//    transaction is durable and survives a crash or power loss. A function
//    may run more than once, and must start from nothing each time (see
//    group_commit.h).
//  * One read-only connection (SQLITE_OPEN_READONLY), guarded by its own
//    mutex. Read() runs a function inside one read transaction, a consistent
//    snapshot. In WAL mode readers never block the writer and the writer never
//    blocks readers, so a long query does not hold up leases or results.
//  * A second read-only connection with its own mutex for QuickRead(): short
//    indexed lookups made on every call (bearer-token checks), so that they
//    never queue behind a long query on the first one.
//
// The connections and statements are server/core/sqlite.h's; the schema and
// its migrations are server/core/schema.h's, which Open() applies.
//
// Errors: SQLite failures become absl::Status (kUnavailable for SQLITE_BUSY,
// kInternal otherwise) whose message holds SQLite's message and the SQL.
//
// Thread-safety: Store is safe to use from many threads. A Connection and its
// Statements belong to the one Write()/Read() call that handed them out and
// must not escape it.
#ifndef RANKSWEEP_SERVER_CORE_STORE_H_
#define RANKSWEEP_SERVER_CORE_STORE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/group_commit.h"
#include "server/core/schema.h"
#include "server/core/sqlite.h"

namespace ranksweep::server {

struct StoreOptions {
  // How long a connection waits for a lock held by another connection (for
  // example another process opening the same file) before failing.
  int busy_timeout_ms = 5000;
};

class Store {
 public:
  // The schema version this binary writes (server/core/schema.h).
  static const int kSchemaVersion;

  // Opens (creating if needed) the database at `path`, migrates it to
  // kSchemaVersion, then opens the read-only connections.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     const StoreOptions& options = {});
  // A database in memory named `name` (one per name in the process), with
  // the same schema, writer thread and three connections, for unit tests of
  // what runs over a Store: nothing is synced or kept after the Store goes.
  // Durability and the WAL are the file's, and their tests use Open().
  static absl::StatusOr<std::unique_ptr<Store>> OpenInMemory(const std::string& name);

  // Runs every write already queued, stops the writer thread, then closes
  // the connections.
  ~Store();

  // Runs `fn` in a write transaction on the writer thread, possibly together
  // with other callers' functions (server/core/group_commit.h), and waits
  // for the outcome. Keeps its changes when `fn` returns OK and the commit succeeds;
  // rolls them back and returns the error otherwise. Writes are serialized.
  // `fn` may run more than once (group_commit.h). OK means durable.
  // Must not be called on the writer thread (from a function) or the
  // finisher thread (from a `done` below): that is FailedPrecondition, not a
  // deadlock.
  absl::Status Write(absl::FunctionRef<absl::Status(Connection&)> fn);

  // Like Write(), without waiting: queues `fn` and returns at once. `fn`
  // runs on the writer thread, and `done`, with the outcome, on the store's
  // finisher thread as soon as the commit has synced (or failed), while the
  // writer runs the next batch: one hand-over per commit, none per call.
  // The `done`s run one at a time in the order their writes were queued, so
  // each must be short and must not block; one may queue more writes with
  // WriteAsync().
  using WriteFn = GroupCommit::WriteFn;
  using WriteDone = GroupCommit::WriteDone;
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
  // which the others ran again (server/core/group_commit.h).
  using WriteStats = GroupCommit::WriteStats;
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
  Store(std::string path, std::unique_ptr<Connection> writer);

  const std::string path_;
  std::unique_ptr<Connection> writer_;
  std::unique_ptr<GroupCommit> group_commit_;  // the only user of writer_ once set
  std::mutex read_mu_;
  std::unique_ptr<Connection> reader_;
  std::mutex quick_mu_;
  std::unique_ptr<Connection> quick_reader_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_STORE_H_
