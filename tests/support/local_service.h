// A ranksweepd on a fresh SQLite file in a test's temporary directory,
// listening on a free loopback port without authentication, and the CLI run
// against it: what integration tests that drive the service through
// `ranksweep` start with. The binaries' paths come from the test target
// (RANKSWEEPD_BIN, RANKSWEEP_CLI_BIN).
#ifndef RANKSWEEP_TESTS_SUPPORT_LOCAL_SERVICE_H_
#define RANKSWEEP_TESTS_SUPPORT_LOCAL_SERVICE_H_

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/process.h"

namespace ranksweep::testing {

class LocalService {
 public:
  LocalService(const TempDir& dir, std::string server_bin, std::string cli_bin)
      : dir_(dir), cli_bin_(std::move(cli_bin)) {
    server_ = std::make_unique<Process>(
        std::vector<std::string>{std::move(server_bin), "--listen=127.0.0.1:0",
                                 "--db=" + dir.path() + "/ranksweep.db", "--insecure_local"},
        dir.path() + "/server");
    auto bound = server_->WaitForStdout(std::regex("listening on (\\S+)"),
                                        std::chrono::seconds(30));
    EXPECT_TRUE(bound.has_value()) << server_->Stderr();
    addr_ = bound.value_or("");
  }

  // `ranksweep --addr=ADDR ARGS...`, its output kept under the directory.
  CommandResult Cli(std::vector<std::string> args,
                    std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
    std::vector<std::string> argv = {cli_bin_, "--addr=" + addr_};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, dir_.path() + "/cli" + std::to_string(runs_++), timeout);
  }

  const std::string& addr() const { return addr_; }

 private:
  const TempDir& dir_;
  std::string cli_bin_;
  std::string addr_;
  int runs_ = 0;
  std::unique_ptr<Process> server_;
};

}  // namespace ranksweep::testing

#endif  // RANKSWEEP_TESTS_SUPPORT_LOCAL_SERVICE_H_
