#include "server/core/wal_buffer.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <string>

namespace ranksweep::server {
namespace {

constexpr size_t kPiece = 64 * 1024;    // the most one write hands on
constexpr size_t kMostHeld = 1 << 20;  // held beyond this, it is written
constexpr int kFrameHeaderBytes = 24;  // SQLite's WAL frame header

std::atomic<int64_t> log_writes{0};

// Our file, with the default VFS's file right after it in the same block.
struct File {
  sqlite3_file base;
  sqlite3_file* real;
  bool log;             // a write-ahead log, whose writes are held
  bool commit_pending;  // a commit frame's header is held; its page comes next
  std::string* held;    // contiguous bytes not yet written, from `offset`
  sqlite3_int64 offset;
};

File* Of(sqlite3_file* f) { return reinterpret_cast<File*>(f); }
const sqlite3_io_methods* Real(File* f) { return f->real->pMethods; }

int Flush(File* f) {
  if (f->held == nullptr || f->held->empty()) return SQLITE_OK;
  int rc = SQLITE_OK;
  // The default VFS writes at most 128 KiB per call; pieces stay under it.
  for (size_t done = 0; done < f->held->size() && rc == SQLITE_OK; done += kPiece) {
    const size_t n = std::min(kPiece, f->held->size() - done);
    rc = Real(f)->xWrite(f->real, f->held->data() + done, static_cast<int>(n),
                         f->offset + static_cast<sqlite3_int64>(done));
    log_writes.fetch_add(1, std::memory_order_relaxed);
  }
  f->held->clear();
  return rc;
}

int Close(sqlite3_file* p) {
  File* f = Of(p);
  const int flushed = Flush(f);
  delete f->held;
  f->held = nullptr;
  const int closed = Real(f)->xClose(f->real);
  return flushed != SQLITE_OK ? flushed : closed;
}

int Read(sqlite3_file* p, void* out, int n, sqlite3_int64 offset) {
  File* f = Of(p);
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->xRead(f->real, out, n, offset);
}

int Write(sqlite3_file* p, const void* data, int n, sqlite3_int64 offset) {
  File* f = Of(p);
  if (!f->log) return Real(f)->xWrite(f->real, data, n, offset);
  if (!f->held->empty() && offset != f->offset + static_cast<sqlite3_int64>(f->held->size())) {
    if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  }
  if (f->held->empty()) f->offset = offset;
  f->held->append(static_cast<const char*>(data), static_cast<size_t>(n));
  if (f->commit_pending) {
    // The page of a commit frame: the whole commit is held.
    f->commit_pending = false;
    return Flush(f);
  }
  if (n == kFrameHeaderBytes) {
    // Bytes 4-7 of a frame header: the database's size after the commit,
    // zero unless the frame ends a transaction.
    const auto* b = static_cast<const unsigned char*>(data);
    f->commit_pending = (b[4] | b[5] | b[6] | b[7]) != 0;
  }
  return f->held->size() >= kMostHeld ? Flush(f) : SQLITE_OK;
}

int Truncate(sqlite3_file* p, sqlite3_int64 size) {
  File* f = Of(p);
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->xTruncate(f->real, size);
}

int Sync(sqlite3_file* p, int flags) {
  File* f = Of(p);
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->xSync(f->real, flags);
}

int FileSize(sqlite3_file* p, sqlite3_int64* size) {
  File* f = Of(p);
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->xFileSize(f->real, size);
}

int FileControl(sqlite3_file* p, int op, void* arg) {
  File* f = Of(p);
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->xFileControl(f->real, op, arg);
}

int Fetch(sqlite3_file* p, sqlite3_int64 offset, int n, void** out) {
  File* f = Of(p);
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->xFetch(f->real, offset, n, out);
}

// The rest pass through.
int Lock(sqlite3_file* p, int l) { return Real(Of(p))->xLock(Of(p)->real, l); }
int Unlock(sqlite3_file* p, int l) { return Real(Of(p))->xUnlock(Of(p)->real, l); }
int CheckReservedLock(sqlite3_file* p, int* out) {
  return Real(Of(p))->xCheckReservedLock(Of(p)->real, out);
}
int SectorSize(sqlite3_file* p) { return Real(Of(p))->xSectorSize(Of(p)->real); }
int DeviceCharacteristics(sqlite3_file* p) {
  return Real(Of(p))->xDeviceCharacteristics(Of(p)->real);
}
int ShmMap(sqlite3_file* p, int region, int size, int extend, void volatile** out) {
  return Real(Of(p))->xShmMap(Of(p)->real, region, size, extend, out);
}
int ShmLock(sqlite3_file* p, int offset, int n, int flags) {
  return Real(Of(p))->xShmLock(Of(p)->real, offset, n, flags);
}
void ShmBarrier(sqlite3_file* p) { Real(Of(p))->xShmBarrier(Of(p)->real); }
int ShmUnmap(sqlite3_file* p, int delete_flag) {
  return Real(Of(p))->xShmUnmap(Of(p)->real, delete_flag);
}
int Unfetch(sqlite3_file* p, sqlite3_int64 offset, void* page) {
  return Real(Of(p))->xUnfetch(Of(p)->real, offset, page);
}

const sqlite3_io_methods kMethods = {
    3,          Close,       Read,       Write,    Truncate,   Sync,
    FileSize,   Lock,        Unlock,     CheckReservedLock,     FileControl,
    SectorSize, DeviceCharacteristics,   ShmMap,   ShmLock,    ShmBarrier,
    ShmUnmap,   Fetch,       Unfetch};

sqlite3_vfs* Base() {
  static sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
  return base;
}

int Open(sqlite3_vfs*, const char* name, sqlite3_file* p, int flags, int* out_flags) {
  File* f = Of(p);
  std::memset(f, 0, sizeof(File));
  f->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(f) + sizeof(File));
  const int rc = Base()->xOpen(Base(), name, f->real, flags, out_flags);
  if (f->real->pMethods == nullptr) {
    p->pMethods = nullptr;  // nothing to close
    return rc;
  }
  f->log = (flags & SQLITE_OPEN_WAL) != 0;
  f->held = new std::string();
  p->pMethods = &kMethods;
  return rc;
}

}  // namespace

const char* WalBufferVfs() {
  static const char* const kName = [] {
    static sqlite3_vfs vfs = *Base();
    vfs.zName = "ranksweep-wal-buffer";
    vfs.szOsFile = static_cast<int>(sizeof(File)) + Base()->szOsFile;
    vfs.xOpen = Open;
    vfs.pNext = nullptr;
    sqlite3_vfs_register(&vfs, 0);
    return vfs.zName;
  }();
  return kName;
}

int64_t WalBufferWrites() { return log_writes.load(std::memory_order_relaxed); }

}  // namespace ranksweep::server
