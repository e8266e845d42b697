#include "server/core/store.h"

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/results/packed_row.h"

namespace ranksweep::server {

const int Store::kSchemaVersion = ::ranksweep::server::kSchemaVersion;

Store::Store(std::string path, std::unique_ptr<Connection> writer)
    : path_(std::move(path)), writer_(std::move(writer)) {}

Store::~Store() {
  // Runs what is queued and stops the writer thread; a queued function may
  // still call the store meanwhile.
  if (group_commit_ != nullptr) group_commit_->Close();
  group_commit_.reset();
  // The readers go first so that the writer's close can checkpoint the WAL.
  quick_reader_.reset();
  reader_.reset();
  writer_.reset();
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const StoreOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> writer,
                   Connection::Open(path, Connection::Mode::kReadWrite, options.busy_timeout_ms));
  std::unique_ptr<Store> store(new Store(path, std::move(writer)));
  RETURN_IF_ERROR(RegisterPackRowFunction(store->writer_->handle()));
  Connection& w = *store->writer_;
  // WAL: readers and the writer do not block each other. FULL: every commit
  // syncs the WAL, so a committed transaction survives power loss.
  RETURN_IF_ERROR(w.Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(w.Exec("PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(w.Exec("PRAGMA wal_autocheckpoint=10000"));
  RETURN_IF_ERROR(w.Exec("PRAGMA foreign_keys=ON"));
  // A row an INSERT OR REPLACE replaces fires the delete triggers, which
  // delete the column blocks over it (schema 20).
  RETURN_IF_ERROR(w.Exec("PRAGMA recursive_triggers=ON"));
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
  // Before the store is shared: no other writer exists.
  RETURN_IF_ERROR(Migrate(w, path));

  ASSIGN_OR_RETURN(store->reader_,
                   Connection::Open(path, Connection::Mode::kReadOnly, options.busy_timeout_ms));
  RETURN_IF_ERROR(store->reader_->Exec("PRAGMA query_only=ON"));
  // Long scans (a sweep's results) read the file through a memory map and a
  // 64 MiB page cache instead of one pread per page.
  RETURN_IF_ERROR(store->reader_->Exec("PRAGMA mmap_size=1073741824"));
  RETURN_IF_ERROR(store->reader_->Exec("PRAGMA cache_size=-65536"));
  ASSIGN_OR_RETURN(store->quick_reader_,
                   Connection::Open(path, Connection::Mode::kReadOnly, options.busy_timeout_ms));
  RETURN_IF_ERROR(store->quick_reader_->Exec("PRAGMA query_only=ON"));
  store->group_commit_ = std::make_unique<GroupCommit>(w);
  return store;
}

absl::StatusOr<std::unique_ptr<Store>> Store::OpenInMemory(const std::string& name) {
  const std::string uri = absl::StrCat("file:", name, "?mode=memory&cache=shared");
  const int busy_timeout_ms = StoreOptions().busy_timeout_ms;
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> writer,
                   Connection::Open(uri, Connection::Mode::kReadWrite, busy_timeout_ms));
  std::unique_ptr<Store> store(new Store(uri, std::move(writer)));
  RETURN_IF_ERROR(RegisterPackRowFunction(store->writer_->handle()));
  Connection& w = *store->writer_;
  RETURN_IF_ERROR(w.Exec("PRAGMA foreign_keys=ON"));
  RETURN_IF_ERROR(w.Exec("PRAGMA recursive_triggers=ON"));  // as Open's
  RETURN_IF_ERROR(w.Exec("PRAGMA temp_store=MEMORY"));
  RETURN_IF_ERROR(Migrate(w, uri));
  // The readers share the writer's cache: they read what it committed.
  ASSIGN_OR_RETURN(store->reader_, Connection::Open(uri, Connection::Mode::kReadWrite,
                                                    busy_timeout_ms));
  RETURN_IF_ERROR(store->reader_->Exec("PRAGMA query_only=ON"));
  ASSIGN_OR_RETURN(store->quick_reader_, Connection::Open(uri, Connection::Mode::kReadWrite,
                                                          busy_timeout_ms));
  RETURN_IF_ERROR(store->quick_reader_->Exec("PRAGMA query_only=ON"));
  store->group_commit_ = std::make_unique<GroupCommit>(w);
  return store;
}

absl::StatusOr<int> Store::SchemaVersion() {
  int version = 0;
  RETURN_IF_ERROR(Read([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(version, ReadSchemaVersion(c));
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
  return group_commit_->Write(fn);
}

void Store::WriteAsync(WriteFn fn, WriteDone done) {
  group_commit_->WriteAsync(std::move(fn), std::move(done));
}

void Store::SetCommitObserver(std::function<void(double seconds)> observer) {
  group_commit_->SetCommitObserver(std::move(observer));
}

Store::WriteStats Store::write_stats() { return group_commit_->stats(); }

size_t Store::queued_writes() { return group_commit_->queued(); }

namespace {

// A read transaction on `r` around `fn`. Its statements come from the
// statement cache: a quick read (a worker's session check) runs for every
// call of a worker, and compiling BEGIN and COMMIT each time cost more than
// the read itself.
absl::Status ReadOn(Connection& r, absl::FunctionRef<absl::Status(Connection&)> fn) {
  static const std::string kBegin = "BEGIN", kCommit = "COMMIT", kRollback = "ROLLBACK";
  RETURN_IF_ERROR(r.Run(kBegin));
  absl::Status s = fn(r);
  // A read transaction has nothing to commit; ending it releases the snapshot.
  absl::Status end = r.Run(s.ok() ? kCommit : kRollback);
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
