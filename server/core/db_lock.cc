#include "server/core/db_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ranksweep::server {
namespace {

// The pid holding a flock on (dev, ino), from /proc/locks; 0 when it is not
// listed (another pid namespace, no /proc). A lock on the same inode number
// on another device is taken only when no line matches the device exactly:
// overlay filesystems may list the lower device.
int64_t FlockHolder(dev_t dev, ino_t ino) {
  std::ifstream locks("/proc/locks");
  std::string line;
  int64_t inode_only = 0;
  while (std::getline(locks, line)) {
    if (line.find("->") != std::string::npos) continue;  // a waiter, not a holder
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (f.size() < 6 || f[1] != "FLOCK") continue;
    std::vector<std::string> id = absl::StrSplit(f[5], ':');
    uint64_t inode = 0;
    int64_t pid = 0;
    if (id.size() != 3 || !absl::SimpleAtoi(id[2], &inode) || inode != ino ||
        !absl::SimpleAtoi(f[4], &pid)) {
      continue;
    }
    unsigned maj = 0, min = 0;
    if (std::sscanf(id[0].c_str(), "%x", &maj) == 1 && std::sscanf(id[1].c_str(), "%x", &min) == 1 &&
        maj == major(dev) && min == minor(dev)) {
      return pid;
    }
    inode_only = pid;
  }
  return inode_only;
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "this host";
  return host;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DatabaseLock>> DatabaseLock::Acquire(const std::string& path) {
  // Read-only is enough for flock, and lets a read-only file reach the
  // writability check (which names the problem) instead of failing here.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open database ", path, ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) return std::unique_ptr<DatabaseLock>(new DatabaseLock(fd));
  const int err = errno;
  struct stat st {};
  const bool have_stat = fstat(fd, &st) == 0;
  close(fd);  // nothing of SQLite's is open on this file in this process yet
  if (err != EWOULDBLOCK) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot lock database ", path, ": ", std::strerror(err)));
  }
  const int64_t pid = have_stat ? FlockHolder(st.st_dev, st.st_ino) : 0;
  return absl::FailedPreconditionError(absl::StrCat(
      "database ", path, " is in use by another ranksweepd (",
      pid > 0 ? absl::StrCat("pid ", pid) : std::string("pid unknown"), " on host ", HostName(),
      "); one coordinator serves a database at a time: stop that one first, or use "
      "another --db"));
}

DatabaseLock::~DatabaseLock() { close(fd_); }

}  // namespace ranksweep::server
