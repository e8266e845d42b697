// The write-ahead log's write buffer (server/core/wal_buffer.h) on real
// files: a commit's frames reach the log in a few writes, another
// connection sees every committed row at once whatever `synchronous` is,
// and transactions larger than what it holds come back whole after a
// checkpoint and a reopen.
#include "server/core/wal_buffer.h"

#include <sqlite3.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/temp_dir.h"
#include "gtest/gtest.h"
#include "server/core/sqlite.h"
#include "server/core/store_test_util.h"

namespace ranksweep::server {
namespace {

std::unique_ptr<Connection> Open(const std::string& path, Connection::Mode mode) {
  auto c = Connection::Open(path, mode, 1000);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// A writer on `path` with each of `pragmas` ("name=value") set and table t
// made; null, with the test failed, when that does not work.
std::unique_ptr<Connection> Writer(const std::string& path,
                                   const std::vector<std::string>& pragmas) {
  std::unique_ptr<Connection> w = Open(path, Connection::Mode::kReadWrite);
  if (w == nullptr) return nullptr;
  absl::Status s;
  for (const std::string& pragma : pragmas) {
    if (s.ok()) s = w->Exec("PRAGMA " + pragma);
  }
  if (s.ok()) s = w->Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)");
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(w) : nullptr;
}

// Each commit, by a writer under `synchronous`, is seen by a reader on its
// own connection as soon as it returns, and costs the log one write.
void CommitsAreSeenAtOnce(const std::string& synchronous) {
  TempDir dir;
  const std::string path = dir.File("a.db");
  std::unique_ptr<Connection> w =
      Writer(path, {"journal_mode=WAL", "synchronous=" + synchronous, "wal_autocheckpoint=0"});
  ASSERT_NE(w, nullptr);
  std::unique_ptr<Connection> r = Open(path, Connection::Mode::kReadOnly);
  ASSERT_NE(r, nullptr);
  for (int i = 1; i <= 20; ++i) {
    const int64_t writes = WalBufferWrites();
    ASSERT_TRUE(w->Exec("BEGIN IMMEDIATE").ok());
    // Eight rows of 1 KiB: two or three pages, each a frame of two writes
    // by SQLite.
    for (int k = 0; k < 8; ++k) {
      ASSERT_TRUE(w->Exec("INSERT INTO t (v) VALUES (zeroblob(1000))").ok());
    }
    ASSERT_TRUE(w->Commit().ok());
    EXPECT_EQ(WalBufferWrites() - writes, 1) << "commit " << i;
    EXPECT_EQ(FirstInt(*r, "SELECT COUNT(*) FROM t"), 8 * i);
  }
}

TEST(WalBufferTest, ACommitIsOneWriteAndSeenAtOnceWithFullSync) {
  CommitsAreSeenAtOnce("FULL");
}

TEST(WalBufferTest, ACommitIsOneWriteAndSeenAtOnceWithoutSync) {
  CommitsAreSeenAtOnce("OFF");
}

TEST(WalBufferTest, ATransactionLargerThanWhatIsHeldComesBackWhole) {
  TempDir dir;
  const std::string path = dir.File("a.db");
  {
    // A cache of 16 pages spills before the commit.
    std::unique_ptr<Connection> w =
        Writer(path, {"journal_mode=WAL", "synchronous=FULL", "cache_size=16"});
    ASSERT_NE(w, nullptr);
    ASSERT_TRUE(w->Exec("BEGIN IMMEDIATE").ok());
    // 3,000 rows of 1 KiB: about 3 MiB of frames, over what is held.
    for (int k = 1; k <= 3000; ++k) {
      ASSERT_TRUE(
          w->Exec(absl::StrCat("INSERT INTO t VALUES (", k, ", randomblob(1000))")).ok());
    }
    ASSERT_TRUE(w->Exec("UPDATE t SET v = zeroblob(1000) WHERE id % 7 = 0").ok());
    ASSERT_TRUE(w->Commit().ok());
    EXPECT_EQ(FirstInt(*w, "SELECT COUNT(*) FROM t WHERE v = zeroblob(1000)"), 428);
    ASSERT_TRUE(w->Exec("PRAGMA wal_checkpoint(TRUNCATE)").ok());
  }
  std::unique_ptr<Connection> r = Open(path, Connection::Mode::kReadOnly);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(FirstInt(*r, "SELECT COUNT(*) FROM t"), 3000);
  EXPECT_EQ(FirstInt(*r, "SELECT COUNT(*) FROM t WHERE length(v) = 1000"), 3000);
  EXPECT_EQ(FirstInt(*r, "SELECT COUNT(*) FROM t WHERE v = zeroblob(1000)"), 428);
  EXPECT_EQ(FirstInt(*r, "SELECT SUM(id) FROM t"), 3000 * 3001 / 2);
}

// A file not in WAL mode (its rollback journal) is written as ever.
TEST(WalBufferTest, ARollbackJournalFileIsWrittenAsEver) {
  TempDir dir;
  const std::string path = dir.File("a.db");
  {
    std::unique_ptr<Connection> w = Writer(path, {"journal_mode=DELETE"});
    ASSERT_NE(w, nullptr);
    const int64_t writes = WalBufferWrites();
    ASSERT_TRUE(w->Exec("BEGIN IMMEDIATE").ok());
    ASSERT_TRUE(w->Exec("INSERT INTO t VALUES (1, zeroblob(5000))").ok());
    ASSERT_TRUE(w->Exec("ROLLBACK").ok());
    ASSERT_TRUE(w->Exec("INSERT INTO t VALUES (2, zeroblob(5000))").ok());
    EXPECT_EQ(WalBufferWrites(), writes);
  }
  std::unique_ptr<Connection> r = Open(path, Connection::Mode::kReadOnly);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(FirstInt(*r, "SELECT group_concat(id) FROM t"), 2);
}

}  // namespace
}  // namespace ranksweep::server
