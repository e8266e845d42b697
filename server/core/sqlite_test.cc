// Connection's owed work (OweBeforeCommit, Commit): run once per
// transaction however often owed, forgotten by a rollback, and never
// skipped by a COMMIT that bypasses it. Also the results version that uses
// it (server/core/results/result_blocks.h).
#include "server/core/sqlite.h"

#include <sqlite3.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/core/results/result_blocks.h"
#include "server/core/store_test_util.h"

namespace ranksweep::server {
namespace {

// Counters a test moves by owing kMove with a counter's name.
const std::string kMove = "UPDATE counters SET n = n + 1 WHERE name = :key";

std::unique_ptr<Connection> CountersDatabase() {
  auto c = Connection::Open(":memory:", Connection::Mode::kReadWrite, 1000);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  EXPECT_TRUE((*c)->Exec("CREATE TABLE counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL);"
                         "INSERT INTO counters VALUES ('a', 0), ('b', 0);"
                         "CREATE TABLE rows (id INTEGER PRIMARY KEY)")
                  .ok());
  return std::move(*c);
}

int64_t Counter(Connection& c, const std::string& name) {
  return FirstInt(c, "SELECT n FROM counters WHERE name = '" + name + "'");
}

TEST(ConnectionTest, OwedWorkRunsOnceAtTheCommitHoweverOftenOwed) {
  std::unique_ptr<Connection> c = CountersDatabase();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Exec("BEGIN IMMEDIATE").ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c->OweBeforeCommit(kMove, "a").ok());
  ASSERT_TRUE(c->OweBeforeCommit(kMove, "b").ok());
  EXPECT_TRUE(c->Owes(kMove, "a"));
  EXPECT_TRUE(c->Owes(kMove, "b"));
  EXPECT_FALSE(c->Owes(kMove, "c"));
  // Nothing ran yet: it waits for the commit.
  EXPECT_EQ(Counter(*c, "a"), 0);
  ASSERT_TRUE(c->Commit().ok());
  EXPECT_EQ(Counter(*c, "a"), 1);
  EXPECT_EQ(Counter(*c, "b"), 1);
  EXPECT_FALSE(c->Owes(kMove, "a"));
  EXPECT_FALSE(c->InTransaction());
  // The next transaction owes afresh.
  ASSERT_TRUE(c->Exec("BEGIN IMMEDIATE").ok());
  ASSERT_TRUE(c->OweBeforeCommit(kMove, "a").ok());
  ASSERT_TRUE(c->Commit().ok());
  EXPECT_EQ(Counter(*c, "a"), 2);
  EXPECT_EQ(Counter(*c, "b"), 1);
}

TEST(ConnectionTest, OwedOutsideATransactionRunsAtOnce) {
  std::unique_ptr<Connection> c = CountersDatabase();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->OweBeforeCommit(kMove, "b").ok());
  EXPECT_FALSE(c->Owes(kMove, "b"));
  EXPECT_EQ(Counter(*c, "b"), 1);
}

TEST(ConnectionTest, ARollbackForgetsOwedWorkAndASavepointRollbackKeepsIt) {
  std::unique_ptr<Connection> c = CountersDatabase();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Exec("BEGIN IMMEDIATE").ok());
  ASSERT_TRUE(c->OweBeforeCommit(kMove, "a").ok());
  ASSERT_TRUE(c->Exec("ROLLBACK").ok());
  EXPECT_FALSE(c->Owes(kMove, "a"));
  ASSERT_TRUE(c->Exec("BEGIN IMMEDIATE").ok());
  ASSERT_TRUE(c->Commit().ok());
  EXPECT_EQ(Counter(*c, "a"), 0);
  // A savepoint rolled back keeps what was owed inside it: the count moves
  // for a change that was undone, never misses one that was kept.
  ASSERT_TRUE(c->Exec("BEGIN IMMEDIATE").ok());
  ASSERT_TRUE(c->Exec("SAVEPOINT s").ok());
  ASSERT_TRUE(c->OweBeforeCommit(kMove, "a").ok());
  ASSERT_TRUE(c->Exec("ROLLBACK TO s").ok());
  ASSERT_TRUE(c->Exec("RELEASE s").ok());
  EXPECT_TRUE(c->Owes(kMove, "a"));
  ASSERT_TRUE(c->Commit().ok());
  EXPECT_EQ(Counter(*c, "a"), 1);
}

TEST(ConnectionTest, ACommitThatSkipsOwedWorkFailsAndLosesNothingStored) {
  std::unique_ptr<Connection> c = CountersDatabase();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Exec("INSERT INTO rows VALUES (1)").ok());
  ASSERT_TRUE(c->Exec("BEGIN IMMEDIATE").ok());
  ASSERT_TRUE(c->Exec("INSERT INTO rows VALUES (2)").ok());
  ASSERT_TRUE(c->OweBeforeCommit(kMove, "a").ok());
  absl::Status plain = c->Exec("COMMIT");
  EXPECT_EQ(plain.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(plain.message(), "constraint failed")) << plain;
  // SQLite rolled the transaction back: the row it added is gone, the one
  // stored before stays, and nothing is owed any more.
  EXPECT_FALSE(c->InTransaction());
  EXPECT_FALSE(c->Owes(kMove, "a"));
  EXPECT_EQ(FirstInt(*c, "SELECT COUNT(*) FROM rows"), 1);
  EXPECT_EQ(Counter(*c, "a"), 0);
  // A statement outside a transaction commits as ever.
  ASSERT_TRUE(c->Exec("INSERT INTO rows VALUES (3)").ok());
  EXPECT_EQ(FirstInt(*c, "SELECT COUNT(*) FROM rows"), 2);
}

// The results version counts the move an open transaction owes: a block
// read before a row was added in the same transaction is not stored.
TEST(ResultsVersionTest, AnAddedRowMovesTheVersionWithinItsTransaction) {
  std::unique_ptr<Connection> c = NewMemoryDatabase();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Exec("BEGIN IMMEDIATE").ok());
  ASSERT_EQ(*ReadResultsVersion(*c, "sw-1"), 0);
  ASSERT_TRUE(NoteResultsAdded(*c, "sw-1").ok());
  ASSERT_TRUE(NoteResultsAdded(*c, "sw-1").ok());
  EXPECT_EQ(*ReadResultsVersion(*c, "sw-1"), 1);
  EXPECT_EQ(*ReadResultsVersion(*c, "sw-2"), 0);
  absl::StatusOr<int> stored = StoreColumnBlocks(*c, "sw-1", 0, "layout", {});
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, kResultsMoved);
  ASSERT_TRUE(c->Commit().ok());
  EXPECT_EQ(*ReadResultsVersion(*c, "sw-1"), 1);
  EXPECT_EQ(FirstInt(*c, "SELECT COUNT(*) FROM result_versions"), 1);
}

}  // namespace
}  // namespace ranksweep::server
