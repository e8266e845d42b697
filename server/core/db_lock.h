// One coordinator per database: an exclusive lock on the database file that a
// serving ranksweepd holds for its whole life.
//
// The lock is flock(2) on the database file itself, not on a file named after
// it, so it is the file (its inode) that is locked, whatever path reaches it:
// a hard link, a symlink or a second mount of the same directory finds the
// lock taken. flock locks are independent of the POSIX record locks SQLite
// takes on the same file on Linux, so the lock neither blocks SQLite's own
// locking nor other processes that only open the database through SQLite
// (`ranksweepd token ...` keeps working beside a running coordinator). The
// kernel drops the lock when the process dies, so a coordinator killed with
// SIGKILL leaves nothing to clean up. The database must be on a local
// filesystem, as SQLite's WAL mode needs anyway.
//
// Errors: FailedPrecondition naming the database and the holder (its pid, when
// /proc/locks shows it, and this host) when another process holds the lock;
// the errno text when the file cannot be opened or created.
//
// Ownership and order: the lock owns one file descriptor on the database.
// Closing any descriptor of a file drops every POSIX lock the process holds
// on it, SQLite's included, so a DatabaseLock must outlive every Store open on
// the same file in this process (destroy the Store first).
//
// Thread-safety: immutable after Acquire.
#ifndef RANKSWEEP_SERVER_CORE_DB_LOCK_H_
#define RANKSWEEP_SERVER_CORE_DB_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ranksweep::server {

class DatabaseLock {
 public:
  // Locks the database at `path`, creating an empty file (which SQLite takes
  // as a new database) when none exists. Never blocks.
  static absl::StatusOr<std::unique_ptr<DatabaseLock>> Acquire(const std::string& path);
  ~DatabaseLock();  // releases the lock
  DatabaseLock(const DatabaseLock&) = delete;
  DatabaseLock& operator=(const DatabaseLock&) = delete;

 private:
  explicit DatabaseLock(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_DB_LOCK_H_
