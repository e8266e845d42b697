// Managing sweeps through real processes: `ranksweep sweep note|tag|rename|
// archive|retry|delete` and `ranksweep list --tag/--search/--archived`
// against ranksweepd on a temporary SQLite file, a real worker training
// the retried cells, and ownership checked with tokens: a user may not
// delete another's sweep, its owner and an admin may.
#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/process.h"
#include "tests/support/small_sweep.h"

namespace ranksweep {
namespace {

using ::ranksweep::testing::CommandResult;
using ::ranksweep::testing::Process;
using ::ranksweep::testing::RunCommand;
using ::ranksweep::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr int kCells = ranksweep::testing::kSmallSweepCells;

class SweepAdminTest : public ::testing::Test {
 protected:
  void StartServer(bool insecure) {
    std::vector<std::string> argv = {RANKSWEEPD_BIN, "--listen=127.0.0.1:0", "--db=" + Db()};
    if (insecure) argv.push_back("--insecure-local");
    server_ = std::make_unique<Process>(argv, dir_.path() + "/server");
    addr_ = server_->WaitForStdout(std::regex("listening on (\\S+)"), 30s).value_or("");
    ASSERT_FALSE(addr_.empty()) << server_->Stderr();
  }
  std::string Db() const { return dir_.path() + "/ranksweep.db"; }
  std::string Token(const std::string& name, const std::string& role) {
    CommandResult r = RunCommand({RANKSWEEPD_BIN, "token", "create", "--db=" + Db(),
                                  "--name=" + name, "--role=" + role},
                                 dir_.path() + "/token-" + name, 30s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
  CommandResult Cli(std::vector<std::string> args, const std::string& token = "",
                    std::chrono::milliseconds timeout = 120s) {
    args.insert(args.begin(), {RANKSWEEP_CLI_BIN, "--addr=" + addr_});
    std::vector<std::string> env;
    if (!token.empty()) env.push_back("RANKSWEEP_TOKEN=" + token);
    return RunCommand(args, dir_.path() + "/run" + std::to_string(runs_++), timeout, env);
  }
  std::string Submit(const std::string& name, const std::string& token = "") {
    const std::string path = dir_.path() + "/" + name + ".json";
    std::ofstream(path) << ranksweep::testing::SmallSweepSpec(name);
    CommandResult r = Cli({"submit", "-f", path}, token);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
  // The data rows of `ranksweep list ARGS` (the table less its header).
  std::vector<std::string> ListRows(std::vector<std::string> args) {
    args.insert(args.begin(), "list");
    CommandResult r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
    if (!lines.empty()) lines.erase(lines.begin());
    return lines;
  }

  TempDir dir_;
  int runs_ = 0;
  std::string addr_;
  std::unique_ptr<Process> server_;
};

TEST_F(SweepAdminTest, NotesTagsRenameArchiveRetryAndDeleteWithExactRows) {
  StartServer(/*insecure=*/true);
  const std::string a = Submit("lengths");
  const std::string b = Submit("other");

  CommandResult r = Cli({"sweep", "note", a, "lr too high; rerun at 0.003"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("note: lr too high; rerun at 0.003\n"));
  r = Cli({"sweep", "tag", a, "paper", "ood"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tags: ood paper\n"));
  r = Cli({"sweep", "rename", a, "lengths-v2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Cli({"sweep", "tag", a, "bad tag"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tags[0] must use only the characters A-Z a-z 0-9 . _ : -"));
  EXPECT_EQ(Cli({"sweep", "note", "sw-nosuch", "x"}).exit_code, 3);

  std::vector<std::string> rows = ListRows({"--tag", "paper"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0], HasSubstr(a));
  EXPECT_THAT(rows[0], HasSubstr("lengths-v2"));
  rows = ListRows({"--search", "RERUN"});  // the note, any case
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0], HasSubstr(a));
  rows = ListRows({"--search", "other"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0], HasSubstr(b));
  EXPECT_EQ(ListRows({}).size(), 2u);

  // Archived: hidden from lists, kept.
  ASSERT_EQ(Cli({"sweep", "archive", b}).exit_code, 0);
  rows = ListRows({});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0], HasSubstr(a));
  EXPECT_EQ(ListRows({"--archived"}).size(), 2u);
  EXPECT_EQ(Cli({"status", b}).exit_code, 0);
  ASSERT_EQ(Cli({"sweep", "archive", b, "--undo"}).exit_code, 0);
  EXPECT_EQ(ListRows({}).size(), 2u);

  // Retry: every cell of `a` cancelled before any trained, then retried
  // and trained by a real worker; `b` is left alone.
  r = Cli({"cancel", a});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "cancelled 9 cells of " + a + "\n");
  r = Cli({"sweep", "retry", a, "--failed"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "retrying 0 cells of " + a + "\n");
  r = Cli({"sweep", "retry", a, "--cancelled"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "retrying 9 cells of " + a + "\n");
  ASSERT_EQ(Cli({"cancel", b}).exit_code, 0);
  Process worker({RANKSWEEP_WORKER_BIN, "--coordinator=" + addr_, "--device=cpu", "--slots=1"},
                 dir_.path() + "/worker", {"RANKSWEEP_TORCH_THREADS=1"});
  r = Cli({"watch", a}, "", 300s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Cli({"results", a, "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json done = Json::parse(r.out);
  ASSERT_EQ(done.size(), static_cast<size_t>(kCells));
  for (const Json& row : done) EXPECT_EQ(row.at("state"), "DONE") << row.dump();
  r = Cli({"results", b, "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out).size(), 0u);  // nothing of b trained

  // Delete: the id typed again (here stdin is empty: refused), or --yes.
  r = Cli({"sweep", "delete", a});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("not confirmed (got \"\"); nothing deleted"));
  EXPECT_EQ(Json::parse(Cli({"results", a, "--format", "json"}).out).size(),
            static_cast<size_t>(kCells));
  r = Cli({"sweep", "delete", a, "--yes"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "deleted sweep " + a + ": 9 cells, 9 results\n");
  EXPECT_EQ(Cli({"status", a}).exit_code, 3);
  rows = ListRows({"--archived"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0], HasSubstr(b));
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(60s), std::optional<int>(0)) << worker.Stderr();
}

TEST_F(SweepAdminTest, OnlyTheOwnerOrAnAdminManagesASweep) {
  const std::string alice = Token("alice", "user");
  const std::string bob = Token("bob", "user");
  const std::string admin = Token("ops", "admin");
  StartServer(/*insecure=*/false);
  const std::string sweep = Submit("alices", alice);
  ASSERT_EQ(Cli({"cancel", sweep}, alice).exit_code, 0);

  // Another user's sweep is NOT_FOUND, word for word an unknown id's
  // answer (docs/SECURITY.md: what a caller may see does not depend on
  // knowing an id).
  CommandResult r = Cli({"sweep", "delete", sweep, "--yes"}, bob);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("no sweep " + sweep));
  r = Cli({"sweep", "tag", sweep, "mine"}, bob);
  EXPECT_EQ(r.exit_code, 3);
  // Bob's list does not show Alice's sweep; the admin's does.
  r = Cli({"list"}, bob);
  EXPECT_THAT(r.out, Not(HasSubstr(sweep)));
  r = Cli({"list", "--search", "alice"}, admin);
  EXPECT_THAT(r.out, HasSubstr(sweep));
  EXPECT_EQ(Cli({"sweep", "tag", sweep, "mine"}, alice).exit_code, 0);
  r = Cli({"sweep", "delete", sweep, "--yes"}, admin);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "deleted sweep " + sweep + ": 9 cells, 0 results\n");
}

}  // namespace
}  // namespace ranksweep
