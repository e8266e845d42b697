#include "server/core/db_lock.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/temp_dir.h"
#include "gtest/gtest.h"

namespace ranksweep::server {
namespace {

class DatabaseLockTest : public ::testing::Test {
 protected:
  TempDir temp_;
  const std::string dir_ = temp_.path();
};

TEST_F(DatabaseLockTest, CreatesAMissingFileAndLocksIt) {
  const std::string db = dir_ + "/new.db";
  absl::StatusOr<std::unique_ptr<DatabaseLock>> lock = DatabaseLock::Acquire(db);
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_TRUE(std::filesystem::exists(db));
  EXPECT_EQ(std::filesystem::file_size(db), 0u);  // SQLite takes it as a new database
}

// flock locks belong to an open file description, so a second Acquire in the
// same process conflicts just as a second process would.
TEST_F(DatabaseLockTest, SecondLockOnTheSameFileNamesTheDatabaseAndTheHolder) {
  const std::string db = dir_ + "/a.db";
  auto first = DatabaseLock::Acquire(db);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = DatabaseLock::Acquire(db);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(second.status().message());
  EXPECT_NE(message.find("database " + db + " is in use by another ranksweepd (pid " +
                         std::to_string(getpid()) + " on host "),
            std::string::npos)
      << message;
}

TEST_F(DatabaseLockTest, AHardLinkOrASymlinkReachesTheSameLock) {
  const std::string db = dir_ + "/a.db";
  std::filesystem::create_directory(dir_ + "/other");
  auto first = DatabaseLock::Acquire(db);
  ASSERT_TRUE(first.ok()) << first.status();
  std::filesystem::create_hard_link(db, dir_ + "/other/link.db");
  std::filesystem::create_symlink(db, dir_ + "/sym.db");
  EXPECT_EQ(DatabaseLock::Acquire(dir_ + "/other/link.db").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(DatabaseLock::Acquire(dir_ + "/sym.db").status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Another database is free.
  EXPECT_TRUE(DatabaseLock::Acquire(dir_ + "/b.db").ok());
}

TEST_F(DatabaseLockTest, ReleasedWithTheObject) {
  const std::string db = dir_ + "/a.db";
  {
    auto first = DatabaseLock::Acquire(db);
    ASSERT_TRUE(first.ok()) << first.status();
  }
  EXPECT_TRUE(DatabaseLock::Acquire(db).ok());
}

TEST_F(DatabaseLockTest, MissingDirectoryIsAnErrorNamingThePath) {
  auto lock = DatabaseLock::Acquire(dir_ + "/no/such/dir.db");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(lock.status().message().find(dir_ + "/no/such/dir.db: No such file or directory"),
            std::string::npos)
      << lock.status();
}

}  // namespace
}  // namespace ranksweep::server
