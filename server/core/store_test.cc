#include "server/core/store.h"

#include <sqlite3.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "gmock/gmock.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "server/core/results/packed_row.h"
#include "server/core/store_test_util.h"

namespace ranksweep::server {
namespace {

using ::ranksweep::TempDir;

std::string Pragma(const std::string& db_path, const std::string& pragma) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, ("PRAGMA " + pragma).c_str(), -1, &st, nullptr);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

TEST(StoreTest, OpenCreatesSchemaAtCurrentVersionInWalMode) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto version = (*store)->SchemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, Store::kSchemaVersion);
  EXPECT_EQ(CountRows(**store, "schema_version"), 1);
  EXPECT_EQ(CountRows(**store, "sweeps"), 0);
  EXPECT_EQ(CountRows(**store, "cells"), 0);
  EXPECT_EQ(CountRows(**store, "results"), 0);
  EXPECT_EQ(CountRows(**store, "workers"), 0);
  EXPECT_EQ(CountRows(**store, "tokens"), 0);
  EXPECT_EQ(CountRows(**store, "meta"), 2);  // next_lease_id, serve_counter
  EXPECT_EQ(Pragma(dir.File("a.db"), "journal_mode"), "wal");
}

TEST(StoreTest, WriterUsesSynchronousFull) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  int64_t sync = -1;
  // synchronous is per connection: ask the writer itself.
  ASSERT_TRUE((*store)
                  ->Write([&](Connection& c) -> absl::Status {
                    auto q = c.Prepare("PRAGMA synchronous");
                    if (!q.ok()) return q.status();
                    auto row = q->Step();
                    if (!row.ok()) return row.status();
                    sync = q->ColumnInt(0);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(sync, 2);  // FULL
}

// SQLite's memory statistics are off in a process whose first connection
// Connection::Open made (server/core/sqlite.cc): with them, every
// allocation and free of SQLite's would take a global mutex. Opening a
// store and writing to it allocates pages and a schema, which the counter
// would show.
TEST(StoreTest, SqliteCountsNoMemoryOnceAConnectionIsOpen) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)
                  ->Write([](Connection& c) -> absl::Status {
                    RETURN_IF_ERROR(c.Run("CREATE TABLE probe (b BLOB)"));
                    return c.Run("INSERT INTO probe VALUES (randomblob(100000))");
                  })
                  .ok());
  EXPECT_EQ(sqlite3_memory_used(), 0);
  EXPECT_EQ(sqlite3_memory_highwater(/*resetFlag=*/0), 0);
}

// The operators' commit latency histogram is fed by this observer: one call
// per COMMIT that kept something, none for a write that failed.
TEST(StoreTest, CommitObserverSeesEveryCommitThatKeptAWrite) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<double> seconds;  // the writer thread calls it; read after the writes return
  (*store)->SetCommitObserver([&seconds](double s) { seconds.push_back(s); });
  auto insert = [](Connection& c) { return c.Exec("INSERT INTO meta VALUES ('k', 1)"); };
  ASSERT_TRUE((*store)->Write(insert).ok());
  EXPECT_FALSE((*store)->Write(insert).ok());  // duplicate key: rolled back, no commit
  ASSERT_TRUE(
      (*store)->Write([](Connection& c) { return c.Exec("DELETE FROM meta WHERE key = 'k'"); })
          .ok());
  ASSERT_EQ(seconds.size(), 2u);
  for (double s : seconds) {
    EXPECT_GT(s, 0);
    EXPECT_LT(s, 60);
  }
  EXPECT_EQ((*store)->write_stats().commits, 2);
}

TEST(StoreTest, ReopenKeepsDataAndDoesNotMigrateAgain) {
  TempDir dir;
  {
    auto store = Store::Open(dir.File("a.db"));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Write([](Connection& c) { return InsertMeta(c, "x", 42); }).ok());
  }
  auto store = Store::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(CountRows(**store, "schema_version"), 1);
  EXPECT_EQ(CountRows(**store, "meta"), 3);
}

// A full disk, here a database that may not grow (max_page_count, which
// SQLite reports as it reports a full disk: SQLITE_FULL), reaches callers
// as RESOURCE_EXHAUSTED "database or disk is full", without the SQL, and
// the failed write leaves nothing behind.
TEST(StoreTest, AFullDiskIsResourceExhaustedAndWritesNothing) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Write([](Connection& c) { return InsertMeta(c, "x", 42); }).ok());
  const int64_t before = CountRows(**store, "meta");
  absl::Status full = (*store)->Write([](Connection& c) -> absl::Status {
    RETURN_IF_ERROR(c.Exec("PRAGMA max_page_count = 1"));
    RETURN_IF_ERROR(InsertMeta(c, "y", 1));
    return c.Exec("CREATE TABLE big (b BLOB); INSERT INTO big VALUES (zeroblob(1000000))");
  });
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(full.message(), "database or disk is full");
  ASSERT_TRUE((*store)->Write([](Connection& c) {
                       return c.Exec("PRAGMA max_page_count = 1073741823");
                     }).ok());
  EXPECT_EQ(CountRows(**store, "meta"), before);  // "y" rolled back with the rest
}

TEST(StoreTest, QuickReadSeesCommittedWrites) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Write([](Connection& c) { return InsertMeta(c, "x", 42); }).ok());
  int64_t value = 0;
  ASSERT_TRUE((*store)
                  ->QuickRead([&](Connection& c) -> absl::Status {
                    auto q = c.Prepare("SELECT value FROM meta WHERE key = 'x'");
                    if (!q.ok()) return q.status();
                    auto row = q->Step();
                    if (!row.ok()) return row.status();
                    value = q->ColumnInt(0);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(value, 42);
  // Read-only, like the other reader.
  absl::Status write = (*store)->QuickRead(
      [](Connection& c) { return c.Exec("DELETE FROM meta"); });
  EXPECT_EQ(write.code(), absl::StatusCode::kInternal);
}

TEST(StoreTest, RefusesNewerSchema) {
  TempDir dir;
  {
    auto store = Store::Open(dir.File("a.db"));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)
                    ->Write([](Connection& c) {
                      return c.Exec("UPDATE schema_version SET version = 99");
                    })
                    .ok());
  }
  auto store = Store::Open(dir.File("a.db"));
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()), ::testing::HasSubstr("schema version 99"));
}

TEST(StoreTest, FailedWriteRollsBackEverything) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok());
  absl::Status s = (*store)->Write([](Connection& c) -> absl::Status {
    absl::Status st = InsertMeta(c, "a", 1);
    if (!st.ok()) return st;
    return absl::AbortedError("changed my mind");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(CountRows(**store, "meta"), 2);
  // A constraint violation also rolls back the rows written before it.
  s = (*store)->Write([](Connection& c) -> absl::Status {
    absl::Status st = InsertMeta(c, "b", 1);
    if (!st.ok()) return st;
    return InsertMeta(c, "b", 2);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(CountRows(**store, "meta"), 2);
}

TEST(StoreTest, ReadConnectionIsReadOnly) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok());
  absl::Status s = (*store)->Read([](Connection& c) { return InsertMeta(c, "x", 1); });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(CountRows(**store, "meta"), 2);
}

TEST(StoreTest, WritesAreVisibleToReadsAfterCommit) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(CountRows(**store, "meta"), 2);
  ASSERT_TRUE((*store)->Write([](Connection& c) { return InsertMeta(c, "x", 1); }).ok());
  EXPECT_EQ(CountRows(**store, "meta"), 3);
}

TEST(StoreTest, OpenReadTransactionDoesNotBlockWrites) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db"), StoreOptions{.busy_timeout_ms = 10000});
  ASSERT_TRUE(store.ok());
  // A long reader on its own connection holds a snapshot open.
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open_v2(dir.File("a.db").c_str(), &reader, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT COUNT(*) FROM meta;", nullptr, nullptr, nullptr),
            SQLITE_OK);

  // The store's own read connection is also inside a transaction meanwhile.
  absl::Status inner;
  auto start = std::chrono::steady_clock::now();
  absl::Status outer = (*store)->Read([&](Connection& rc) -> absl::Status {
    auto q = rc.Prepare("SELECT COUNT(*) FROM meta");
    if (!q.ok()) return q.status();
    auto row = q->Step();
    if (!row.ok()) return row.status();
    inner = (*store)->Write([](Connection& c) { return InsertMeta(c, "x", 1); });
    return absl::OkStatus();
  });
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(outer.ok()) << outer;
  EXPECT_TRUE(inner.ok()) << inner;
  // Without WAL the write would wait out the 10 s busy timeout and fail.
  EXPECT_LT(elapsed, std::chrono::seconds(2));

  // The old snapshot still sees 2 rows; a new read sees 3.
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(reader, "SELECT COUNT(*) FROM meta", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 2);
  sqlite3_finalize(st);
  sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(reader);
  EXPECT_EQ(CountRows(**store, "meta"), 3);
}

TEST(StoreTest, CommittedWriteSurvivesReopenWithoutCheckpoint) {
  TempDir dir;
  const std::string path = dir.File("a.db");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Write([](Connection& c) { return InsertMeta(c, "x", 7); }).ok());
  // A second process opens the file while the first still has it open (the
  // WAL has not been checkpointed into the main file yet).
  auto other = Store::Open(path);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(CountRows(**other, "meta"), 3);
}

}  // namespace
}  // namespace ranksweep::server

namespace ranksweep::server {
namespace {

// A store in memory (for the managers' unit tests): the current schema, its
// readers see what the writer committed, and each name is its own database.
TEST(InMemoryStoreTest, ReadersSeeCommitsAndEachNameIsItsOwnDatabase) {
  auto a = Store::OpenInMemory("store-test-a");
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Store::OpenInMemory("store-test-b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*(*a)->SchemaVersion(), Store::kSchemaVersion);
  ASSERT_TRUE((*a)->Write([](Connection& c) {
                     return c.Exec("INSERT INTO sweeps (id, name, owner, spec_json, priority, "
                                   "state, created_ms) VALUES ('sw-1', 'n', 'o', '{}', 0, 1, 0)");
                   })
                  .ok());
  auto count = [](Store& store) {
    int64_t n = -1;
    absl::Status s = store.Read([&](Connection& c) -> absl::Status {
      ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT COUNT(*) FROM sweeps"));
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (row) n = q.ColumnInt(0);
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
    return n;
  };
  EXPECT_EQ(count(**a), 1);
  EXPECT_EQ(count(**b), 0);
  // The readers are read-only, as a file's are.
  absl::Status s = (*a)->Read([](Connection& c) { return c.Exec("DELETE FROM sweeps"); });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(count(**a), 1);
}

}  // namespace
}  // namespace ranksweep::server
