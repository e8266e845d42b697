#include "server/core/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
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

// Holds the writer inside one write until `waiting` more calls have queued
// behind it, so that they are certain to share the next commit.
void HoldWriterUntilQueued(Store& store, size_t waiting) {
  while (store.queued_writes() < waiting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// Starts a write on its own thread that holds the writer until `waiting`
// more calls have queued behind it and then runs `then`; returns once the
// writer is held. Join the thread after queueing the calls.
std::thread HoldWriter(Store& store, size_t waiting,
                       std::function<absl::Status(Connection&)> then = nullptr) {
  std::promise<void> held;
  std::future<void> is_held = held.get_future();
  std::thread holder([&store, waiting, then, held = std::move(held)]() mutable {
    const absl::Status s = store.Write([&](Connection& c) -> absl::Status {
      held.set_value();
      HoldWriterUntilQueued(store, waiting);
      return then ? then(c) : absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
  });
  is_held.wait();
  return holder;
}

TEST(StoreTest, ConcurrentWritesShareOneCommitAndFailuresStayIsolated) {
  TempDir dir;
  auto store = Store::Open(dir.File("rs.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  constexpr int kQueued = 9;  // request 4 fails after inserting its row
  std::vector<absl::Status> results(kQueued);
  std::thread first =
      HoldWriter(**store, kQueued, [](Connection& c) { return InsertMeta(c, "first", 1); });
  std::vector<std::thread> threads;
  for (int i = 0; i < kQueued; ++i) {
    threads.emplace_back([&, i] {
      results[i] = (*store)->Write([&](Connection& c) -> absl::Status {
        RETURN_IF_ERROR(InsertMeta(c, "k" + std::to_string(i), i));
        if (i == 4) return absl::FailedPreconditionError("request 4 refuses");
        return absl::OkStatus();
      });
    });
  }
  first.join();
  for (auto& t : threads) t.join();

  for (int i = 0; i < kQueued; ++i) {
    if (i == 4) {
      EXPECT_EQ(results[i].code(), absl::StatusCode::kFailedPrecondition);
    } else {
      EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
    }
  }
  // 'first' and 8 of the 9 queued rows; the failed request left nothing.
  EXPECT_EQ(CountRows(**store, "meta WHERE key = 'first' OR key LIKE 'k%'"), 9);
  EXPECT_EQ(CountRows(**store, "meta WHERE key = 'k4'"), 0);
  const Store::WriteStats stats = (*store)->write_stats();
  EXPECT_EQ(stats.writes, 10);
  EXPECT_EQ(stats.commits, 2);  // the held write alone, then the 9 queued together
  EXPECT_EQ(stats.reruns, 1);
}

TEST(StoreTest, AFailureRunsTheOthersAgainAndASecondFailureIsUndoneAlone) {
  TempDir dir;
  auto store = Store::Open(dir.File("rs.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  // Requests 3 and 6 fail after inserting their row.
  constexpr int kQueued = 9;
  std::vector<absl::Status> results(kQueued);
  std::vector<int> runs(kQueued, 0);
  std::vector<int> first_runs;  // request numbers, in the order they first ran
  std::thread first = HoldWriter(**store, kQueued);
  std::vector<std::thread> threads;
  for (int i = 0; i < kQueued; ++i) {
    threads.emplace_back([&, i] {
      results[i] = (*store)->Write([&](Connection& c) -> absl::Status {
        // Only the writer thread runs these: no lock needed.
        if (runs[i]++ == 0) first_runs.push_back(i);
        RETURN_IF_ERROR(InsertMeta(c, "k" + std::to_string(i), i));
        if (i == 3 || i == 6) return absl::FailedPreconditionError(absl::StrCat("request ", i));
        return absl::OkStatus();
      });
    });
  }
  first.join();
  for (auto& t : threads) t.join();

  // The batch ran without savepoints until the first failure, was rolled
  // back, and ran again without it, each request in a savepoint: those
  // before it ran twice, it and every later one once.
  ASSERT_EQ(first_runs.size(), static_cast<size_t>(kQueued));
  const auto failed_first = std::find_if(first_runs.begin(), first_runs.end(),
                                         [](int i) { return i == 3 || i == 6; });
  for (auto it = first_runs.begin(); it != first_runs.end(); ++it) {
    EXPECT_EQ(runs[*it], it < failed_first ? 2 : 1) << "request " << *it;
  }
  for (int i = 0; i < kQueued; ++i) {
    if (i == 3 || i == 6) {
      EXPECT_EQ(results[i].code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_EQ(results[i].message(), absl::StrCat("request ", i));
    } else {
      EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
    }
  }
  EXPECT_EQ(CountRows(**store, "meta WHERE key LIKE 'k%'"), 7);
  EXPECT_EQ(CountRows(**store, "meta WHERE key IN ('k3', 'k6')"), 0);
  const Store::WriteStats stats = (*store)->write_stats();
  EXPECT_EQ(stats.writes, 10);
  EXPECT_EQ(stats.commits, 2);  // the held write alone, then the 7 that succeeded
  EXPECT_EQ(stats.reruns, 1);   // the second failure was undone by its savepoint
}

TEST(StoreTest, LaterWritesInABatchSeeEarlierOnes) {
  TempDir dir;
  auto store = Store::Open(dir.File("rs.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Write([](Connection& c) { return InsertMeta(c, "counter", 0); }).ok());
  constexpr int kQueued = 20;
  std::thread first = HoldWriter(**store, kQueued);
  std::vector<std::thread> threads;
  for (int i = 0; i < kQueued; ++i) {
    threads.emplace_back([&] {
      EXPECT_TRUE((*store)
                      ->Write([](Connection& c) -> absl::Status {
                        auto u = c.Prepare("UPDATE meta SET value = value + 1 WHERE key = 'counter'");
                        if (!u.ok()) return u.status();
                        return u->Run();
                      })
                      .ok());
    });
  }
  first.join();
  for (auto& t : threads) t.join();
  int64_t counter = -1;
  ASSERT_TRUE((*store)
                  ->Read([&](Connection& c) -> absl::Status {
                    auto q = c.Prepare("SELECT value FROM meta WHERE key = 'counter'");
                    if (!q.ok()) return q.status();
                    auto row = q->Step();
                    if (!row.ok()) return row.status();
                    counter = q->ColumnInt(0);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(counter, kQueued);
  EXPECT_EQ((*store)->write_stats().commits, 3);  // insert, held write, the 20 together
}

// WriteAsync: the caller does not wait; the writer thread runs the function
// and then `done`, with the outcome, once the commit has synced.
TEST(StoreTest, WriteAsyncFinishesOnTheWriterThreadAfterTheCommit) {
  TempDir dir;
  auto store = Store::Open(dir.File("rs.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<absl::Status> outcomes;
  std::vector<int64_t> rows_seen;
  std::thread::id fn_thread, done_thread;
  auto done = [&](absl::Status s) {
    // A reader sees the write already: `done` runs after the commit.
    const int64_t rows = CountRows(**store, "meta WHERE key LIKE 'a%'");
    std::lock_guard<std::mutex> lock(mu);
    done_thread = std::this_thread::get_id();
    outcomes.push_back(std::move(s));
    rows_seen.push_back(rows);
    cv.notify_all();
  };
  (*store)->WriteAsync(
      [&](Connection& c) {
        fn_thread = std::this_thread::get_id();
        return InsertMeta(c, "a1", 1);
      },
      done);
  (*store)->WriteAsync(
      [](Connection& c) -> absl::Status {
        RETURN_IF_ERROR(InsertMeta(c, "a2", 2));
        return absl::NotFoundError("a2 refuses");
      },
      done);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return outcomes.size() == 2; }));
  }
  EXPECT_TRUE(outcomes[0].ok()) << outcomes[0];
  EXPECT_EQ(outcomes[1].code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(outcomes[1].message(), "a2 refuses");
  EXPECT_EQ(rows_seen[0], 1);
  EXPECT_EQ(CountRows(**store, "meta WHERE key LIKE 'a%'"), 1);  // a2 rolled back
  EXPECT_NE(fn_thread, std::this_thread::get_id());
  EXPECT_EQ(done_thread, fn_thread);
  EXPECT_EQ((*store)->write_stats().writes, 2);
}

// Write() on the writer thread would wait for itself: it is refused instead,
// and the write that asked fails with nothing kept.
TEST(StoreTest, WriteOnTheWriterThreadIsRefusedNotADeadlock) {
  TempDir dir;
  auto store = Store::Open(dir.File("rs.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  absl::Status inner;
  absl::Status outer = (*store)->Write([&](Connection& c) -> absl::Status {
    RETURN_IF_ERROR(InsertMeta(c, "outer", 1));
    inner = (*store)->Write([](Connection& c2) { return InsertMeta(c2, "inner", 2); });
    return inner;
  });
  EXPECT_EQ(inner.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(inner.message(),
            "Store::Write called on the writer thread, which would wait for itself");
  EXPECT_EQ(outer.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CountRows(**store, "meta WHERE key IN ('outer', 'inner')"), 0);
}

// Closing the store runs what is still queued: every `done` is called and
// every write that succeeded is in the file.
TEST(StoreTest, ClosingRunsEveryQueuedWrite) {
  TempDir dir;
  const std::string path = dir.File("rs.db");
  constexpr int kQueued = 12;
  std::atomic<int> ok_done{0};
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    std::atomic<bool> holding{false};
    (*store)->WriteAsync(
        [&](Connection& c) {
          holding = true;
          HoldWriterUntilQueued(**store, kQueued);
          return InsertMeta(c, "first", 0);
        },
        [&](absl::Status s) { ok_done += s.ok() ? 1 : 0; });
    while (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int i = 0; i < kQueued; ++i) {
      (*store)->WriteAsync([i](Connection& c) { return InsertMeta(c, "q" + std::to_string(i), i); },
                           [&](absl::Status s) { ok_done += s.ok() ? 1 : 0; });
    }
  }  // closes the store with 12 writes queued
  EXPECT_EQ(ok_done.load(), kQueued + 1);
  auto reopened = Store::Open(path);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(CountRows(**reopened, "meta WHERE key = 'first' OR key LIKE 'q%'"), kQueued + 1);
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
