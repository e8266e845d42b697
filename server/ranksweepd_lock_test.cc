// One coordinator per database and per port, and a database it cannot write,
// through real ranksweepd processes: the second one exits 5 at start-up with
// a message that says why, and the first one serves on untouched.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "tests/support/process.h"

namespace ranksweep {
namespace {

using ::ranksweep::testing::CommandResult;
using ::ranksweep::testing::Process;
using ::ranksweep::testing::RunCommand;
using ::ranksweep::testing::TempDir;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

class RanksweepdLockTest : public ::testing::Test {
 protected:
  std::unique_ptr<Process> Start(const std::string& db, const std::string& port = "0",
                                 std::vector<std::string> prefix = {}) {
    std::vector<std::string> argv = std::move(prefix);
    for (const char* a : {RANKSWEEPD_BIN, "--insecure_local"}) argv.push_back(a);
    argv.push_back("--listen=127.0.0.1:" + port);
    argv.push_back("--db=" + db);
    return std::make_unique<Process>(argv, dir_.path() + "/d" + std::to_string(runs_++));
  }
  // Starts a coordinator and waits until it serves; returns its port.
  std::string StartServing(const std::string& db, std::unique_ptr<Process>* out) {
    *out = Start(db);
    std::optional<std::string> port =
        (*out)->WaitForStdout(std::regex("listening on 127\\.0\\.0\\.1:(\\d+)"), 30s);
    EXPECT_TRUE(port.has_value()) << (*out)->Stderr();
    return port.value_or("");
  }
  // A call that needs the database: the first coordinator still serves.
  static void ExpectServes(const std::string& port) {
    auto stub = v1::SweepService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + port, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::ListSweepsResponse resp;
    grpc::Status s = stub->ListSweeps(&ctx, v1::ListSweepsRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }

  TempDir dir_;
  int runs_ = 0;
};

TEST_F(RanksweepdLockTest, SecondCoordinatorOnTheSameDatabaseExits1NamingItAndTheHolder) {
  const std::string db = dir_.path() + "/ranksweep.db";
  std::unique_ptr<Process> first;
  const std::string port = StartServing(db, &first);
  ASSERT_FALSE(port.empty());
  const std::string holder = "(pid " + std::to_string(first->pid()) + " on host ";

  std::unique_ptr<Process> second = Start(db);
  EXPECT_EQ(second->Wait(30s), std::optional<int>(5));  // common/exit_codes.h: a failure
  EXPECT_THAT(second->Stderr(), HasSubstr("ranksweepd: database " + db +
                                          " is in use by another ranksweepd " + holder));
  EXPECT_EQ(second->Stdout(), "");  // never said it was listening

  // Through a hard link in another directory: another path, the same file.
  std::filesystem::create_directory(dir_.path() + "/elsewhere");
  const std::string link = dir_.path() + "/elsewhere/link.db";
  std::filesystem::create_hard_link(db, link);
  std::unique_ptr<Process> linked = Start(link);
  EXPECT_EQ(linked->Wait(30s), std::optional<int>(5));  // common/exit_codes.h: a failure
  EXPECT_THAT(linked->Stderr(),
              HasSubstr("ranksweepd: database " + link + " is in use by another ranksweepd " + holder));
  // The loser opened nothing through SQLite: no WAL beside the link.
  EXPECT_FALSE(std::filesystem::exists(link + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(link + "-shm"));

  // The admin subcommands still work beside the running coordinator.
  CommandResult tokens = RunCommand({RANKSWEEPD_BIN, "token", "list", "--db=" + db},
                                    dir_.path() + "/tokens", 30s);
  EXPECT_EQ(tokens.exit_code, 0) << tokens.err;
  EXPECT_THAT(tokens.out, HasSubstr("NAME"));

  ExpectServes(port);
  first->Signal(SIGTERM);
  EXPECT_EQ(first->Wait(30s), std::optional<int>(0)) << first->Stderr();
  // Released with its process: the next one starts.
  std::unique_ptr<Process> next;
  EXPECT_FALSE(StartServing(link, &next).empty());
}

TEST_F(RanksweepdLockTest, SecondCoordinatorOnTheSamePortExits1) {
  std::unique_ptr<Process> first;
  const std::string port = StartServing(dir_.path() + "/a.db", &first);
  ASSERT_FALSE(port.empty());
  std::unique_ptr<Process> second = Start(dir_.path() + "/b.db", port);
  EXPECT_EQ(second->Wait(30s), std::optional<int>(5));  // common/exit_codes.h: a failure
  EXPECT_THAT(second->Stderr(), HasSubstr("ranksweepd: cannot listen on 127.0.0.1:" + port));
  EXPECT_EQ(second->Stdout(), "");
  ExpectServes(port);
}

TEST_F(RanksweepdLockTest, ReadOnlyDatabaseExits1AtStartUp) {
  const std::string db = dir_.path() + "/ranksweep.db";
  CommandResult created =
      RunCommand({RANKSWEEPD_BIN, "token", "create", "--db=" + db, "--name=a", "--role=admin"},
                 dir_.path() + "/create", 30s);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  ASSERT_EQ(chmod(db.c_str(), 0444), 0);
  // The directory stays writable: only the file is read-only. Root writes
  // any file whatever its mode, so as root the coordinator runs as nobody.
  ASSERT_EQ(chmod(dir_.path().c_str(), 0777), 0);
  std::vector<std::string> as_nobody;
  if (geteuid() == 0) {
    as_nobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  }
  std::unique_ptr<Process> server = Start(db, "0", as_nobody);
  EXPECT_EQ(server->Wait(30s), std::optional<int>(5));  // common/exit_codes.h: a failure
  EXPECT_THAT(server->Stderr(), HasSubstr("ranksweepd: database " + db + " is not writable ("));
  EXPECT_THAT(server->Stderr(), ::testing::Not(HasSubstr("UPDATE")));  // no SQL
  EXPECT_EQ(server->Stdout(), "");
}

}  // namespace
}  // namespace ranksweep
