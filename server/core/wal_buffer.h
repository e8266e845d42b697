// A SQLite VFS over the default one that gathers the writes of a
// write-ahead log into few system calls.
//
// SQLite writes each frame of the log with two calls (its 24-byte header,
// then its page), so a commit of 31 pages made 62 `pwrite`s: about 86,500
// per 20,000 cells on the dispatch benchmark, and about 8,000 through this
// VFS (bench/dispatch_bench.cc under `perf stat`). This VFS keeps a log file's
// contiguous writes in memory and hands them to the real file in pieces of
// up to 64 KiB:
//  * after the page that follows a commit frame's header (a frame header
//    whose "database size after commit" is not zero), so that a commit's
//    frames are in the file before the transaction publishes them to other
//    connections, whatever `synchronous` is;
//  * before a sync, a read, a truncate, a size query, a file control or a
//    close of that file, and whenever 1 MiB has gathered;
//  * before a write that does not follow on from what is held.
// The main database file, its journal and every other file are the default
// VFS's, untouched. A write the real file then fails is reported by the
// call that flushed it (a commit's last page write, or the sync), which
// fails the transaction as the write itself would have.
//
// Thread-safety: registering is once per process and safe from any
// thread. Each open file belongs to one connection, which SQLite uses from
// one thread at a time.
#ifndef RANKSWEEP_SERVER_CORE_WAL_BUFFER_H_
#define RANKSWEEP_SERVER_CORE_WAL_BUFFER_H_

#include <cstdint>

namespace ranksweep::server {

// The VFS's name, registered (not as the default) on the first call; pass
// it to sqlite3_open_v2.
const char* WalBufferVfs();

// Writes this process has made to write-ahead log files through the VFS,
// since it started: a count to check that commits gather their frames.
int64_t WalBufferWrites();

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_WAL_BUFFER_H_
