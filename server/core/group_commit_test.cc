// Group commit (server/core/group_commit.h) through a Store on a real file:
// writes that share a commit, failures undone alone, WriteAsync's outcomes
// handed out in order on the finisher thread, and closing with writes
// queued.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/temp_dir.h"
#include "gtest/gtest.h"
#include "server/core/store.h"
#include "server/core/store_test_util.h"

namespace ranksweep::server {
namespace {

using ::ranksweep::TempDir;

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

// WriteAsync: the caller does not wait; the writer thread runs the function,
// and the finisher thread `done`, with the outcome, once the commit has
// synced, in the order the writes were queued.
TEST(StoreTest, WriteAsyncFinishesOnTheFinisherThreadAfterTheCommitInOrder) {
  TempDir dir;
  auto store = Store::Open(dir.File("rs.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<absl::Status> outcomes;
  std::vector<int64_t> rows_seen;
  std::vector<std::thread::id> done_threads;
  std::thread::id fn_thread;
  auto done = [&](absl::Status s) {
    // A reader sees the write already: `done` runs after the commit.
    const int64_t rows = CountRows(**store, "meta WHERE key LIKE 'a%'");
    std::lock_guard<std::mutex> lock(mu);
    done_threads.push_back(std::this_thread::get_id());
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
  (*store)->WriteAsync([](Connection& c) { return InsertMeta(c, "a3", 3); }, done);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return outcomes.size() == 3; }));
  }
  EXPECT_TRUE(outcomes[0].ok()) << outcomes[0];
  EXPECT_EQ(outcomes[1].code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(outcomes[1].message(), "a2 refuses");
  EXPECT_TRUE(outcomes[2].ok()) << outcomes[2];
  EXPECT_GE(rows_seen[0], 1);
  EXPECT_EQ(rows_seen[2], 2);
  EXPECT_EQ(CountRows(**store, "meta WHERE key LIKE 'a%'"), 2);  // a2 rolled back
  EXPECT_NE(fn_thread, std::this_thread::get_id());
  EXPECT_NE(done_threads[0], fn_thread);
  EXPECT_EQ(done_threads[1], done_threads[0]);
  EXPECT_EQ(done_threads[2], done_threads[0]);
  EXPECT_EQ((*store)->write_stats().writes, 3);
}

// A `done` still running does not hold up the next commit: the writer
// commits the next write while the finisher is busy with the last one's.
TEST(StoreTest, ASlowDoneDoesNotHoldUpTheNextCommit) {
  TempDir dir;
  auto store = Store::Open(dir.File("rs.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  std::mutex mu;
  std::condition_variable cv;
  bool first_done_started = false, release = false, first_done_ended = false;
  (*store)->WriteAsync([](Connection& c) { return InsertMeta(c, "first", 1); },
                       [&](absl::Status) {
                         std::unique_lock<std::mutex> lock(mu);
                         first_done_started = true;
                         cv.notify_all();
                         cv.wait_for(lock, std::chrono::seconds(30), [&] { return release; });
                         first_done_ended = true;
                       });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return first_done_started; }));
  }
  std::atomic<bool> second_done{false};
  (*store)->WriteAsync([](Connection& c) { return InsertMeta(c, "second", 2); },
                       [&](absl::Status) { second_done = true; });
  // The second write commits while the first `done` still runs...
  int64_t second_rows = 0;
  for (int i = 0; i < 10000 && second_rows == 0; ++i) {
    second_rows = CountRows(**store, "meta WHERE key = 'second'");
    if (second_rows == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(second_rows, 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_FALSE(first_done_ended);
    // ...and its own `done` waits for the first: they finish in order.
    EXPECT_FALSE(second_done.load());
    release = true;
  }
  cv.notify_all();
  for (int i = 0; i < 10000 && !second_done; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(second_done.load());
}

// Write() on the writer thread, or on the finisher thread from a `done`,
// would wait for itself: it is refused instead, and a write that asked fails
// with nothing kept.
TEST(StoreTest, WriteOnTheWriterOrFinisherThreadIsRefusedNotADeadlock) {
  TempDir dir;
  auto store = Store::Open(dir.File("rs.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  constexpr const char* kRefused =
      "Store::Write called on the store's writer or finisher thread, which would wait for "
      "itself";
  absl::Status inner;
  absl::Status outer = (*store)->Write([&](Connection& c) -> absl::Status {
    RETURN_IF_ERROR(InsertMeta(c, "outer", 1));
    inner = (*store)->Write([](Connection& c2) { return InsertMeta(c2, "inner", 2); });
    return inner;
  });
  EXPECT_EQ(inner.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(inner.message(), kRefused);
  EXPECT_EQ(outer.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CountRows(**store, "meta WHERE key IN ('outer', 'inner')"), 0);

  std::mutex mu;
  std::condition_variable cv;
  std::optional<absl::Status> from_done;
  (*store)->WriteAsync([](Connection& c) { return InsertMeta(c, "async", 3); },
                       [&](absl::Status) {
                         absl::Status s = (*store)->Write(
                             [](Connection& c2) { return InsertMeta(c2, "from-done", 4); });
                         std::lock_guard<std::mutex> lock(mu);
                         from_done = s;
                         cv.notify_all();
                       });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return from_done.has_value(); }));
  }
  EXPECT_EQ(from_done->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(from_done->message(), kRefused);
  EXPECT_EQ(CountRows(**store, "meta WHERE key = 'async'"), 1);
  EXPECT_EQ(CountRows(**store, "meta WHERE key = 'from-done'"), 0);
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

}  // namespace
}  // namespace ranksweep::server
