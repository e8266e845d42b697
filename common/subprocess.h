// Child processes for integration tests and benchmarks: start a binary with
// its output captured to files, wait for a line it prints, signal it, wait for
// its exit. Used to run ranksweepd, ranksweep-worker and the ranksweep CLI on
// loopback (tests/support/process.h brings these names into the tests).
//
// Thread-safety: one Process per thread; not internally synchronized.
#ifndef RANKSWEEP_COMMON_SUBPROCESS_H_
#define RANKSWEEP_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace ranksweep::subprocess {

class Process {
 public:
  // Starts argv[0] with the given arguments; stdout and stderr go to
  // `log_prefix`.out / .err. `env` entries ("K=V") are added to the
  // environment. Aborts the calling program if fork fails; a failed exec
  // makes the child exit 127.
  Process(std::vector<std::string> argv, std::string log_prefix,
          std::vector<std::string> env = {});
  ~Process();  // SIGKILLs the child if it still runs
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool running();

  // Waits until stdout has a line matching `re`; returns its first capture
  // group (or the whole line) or nullopt on timeout or exit.
  std::optional<std::string> WaitForStdout(const std::regex& re,
                                           std::chrono::milliseconds timeout);
  // The same on stderr.
  std::optional<std::string> WaitForStderr(const std::regex& re,
                                           std::chrono::milliseconds timeout);

  void Signal(int sig);
  // Waits for exit; returns the exit code (128+signal when killed) or nullopt
  // on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);

  std::string Stdout() const;
  std::string Stderr() const;

 private:
  std::optional<std::string> WaitForLine(const std::string& path, const std::regex& re,
                                         std::chrono::milliseconds timeout);

  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string out_path_;
  std::string err_path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs a command to completion (at most `timeout`), capturing its output.
CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& log_prefix,
                         std::chrono::milliseconds timeout = std::chrono::seconds(120),
                         std::vector<std::string> env = {});

// The whole file at `path`; empty when it cannot be read.
std::string ReadFile(const std::string& path);

}  // namespace ranksweep::subprocess

#endif  // RANKSWEEP_COMMON_SUBPROCESS_H_
