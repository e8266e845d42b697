#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace ranksweep::subprocess {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Process::Process(std::vector<std::string> argv, std::string log_prefix,
                 std::vector<std::string> env)
    : out_path_(log_prefix + ".out"), err_path_(log_prefix + ".err") {
  pid_ = fork();
  if (pid_ < 0) {
    perror("fork");
    abort();
  }
  if (pid_ == 0) {
    int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(out, 1);
    dup2(err, 2);
    for (const std::string& kv : env) putenv(strdup(kv.c_str()));
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    perror("execv");
    _exit(127);
  }
}

Process::~Process() {
  if (running()) {
    kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
  }
}

bool Process::running() {
  if (exit_code_.has_value()) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

std::optional<std::string> Process::WaitForStdout(const std::regex& re,
                                                  std::chrono::milliseconds timeout) {
  return WaitForLine(out_path_, re, timeout);
}

std::optional<std::string> Process::WaitForStderr(const std::regex& re,
                                                  std::chrono::milliseconds timeout) {
  return WaitForLine(err_path_, re, timeout);
}

std::optional<std::string> Process::WaitForLine(const std::string& path, const std::regex& re,
                                                std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::istringstream lines(ReadFile(path));
    std::string line;
    std::smatch m;
    while (std::getline(lines, line)) {
      if (std::regex_search(line, m, re)) return m.size() > 1 ? m[1].str() : line;
    }
    if (!running() || std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Process::Signal(int sig) {
  if (running()) kill(pid_, sig);
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exit_code_;
}

std::string Process::Stdout() const { return ReadFile(out_path_); }
std::string Process::Stderr() const { return ReadFile(err_path_); }

CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& log_prefix,
                         std::chrono::milliseconds timeout, std::vector<std::string> env) {
  Process p(argv, log_prefix, std::move(env));
  CommandResult r;
  std::optional<int> code = p.Wait(timeout);
  if (!code.has_value()) {
    p.Signal(SIGKILL);
    code = p.Wait(std::chrono::seconds(5));
  }
  r.exit_code = code.value_or(-1);
  r.out = p.Stdout();
  r.err = p.Stderr();
  return r;
}

}  // namespace ranksweep::subprocess
