#include "worker/agent/file_outbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/convert.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep::agent {
namespace {

constexpr char kBatchHeader[] = "ranksweep-outbox-batch 1\n";
constexpr char kBatchPrefix[] = "batch-";
constexpr char kTmpSuffix[] = ".tmp";
constexpr int kSeats = 64;

std::string Errno(const std::string& what) {
  return absl::StrCat(what, ": ", std::strerror(errno));
}

// ENOSPC and kin are the disk's bound, not a bug.
absl::Status WriteError(const std::string& what) {
  if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG) {
    return absl::ResourceExhaustedError(Errno(what));
  }
  return absl::InternalError(Errno(what));
}

absl::Status MakeDirs(const std::string& dir) {
  std::string path;
  for (absl::string_view part : absl::StrSplit(dir, '/')) {
    if (part.empty()) {
      if (path.empty()) path = "/";
      continue;
    }
    if (!path.empty() && path.back() != '/') path += '/';
    absl::StrAppend(&path, part);
    if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::InternalError(Errno(absl::StrCat("outbox: cannot create ", path)));
    }
  }
  return absl::OkStatus();
}

bool ReadWhole(const std::string& path, std::string* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->clear();
  char buf[65536];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return false;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return true;
}

std::string OneLine(const std::string& text) {
  std::string out = text;
  std::replace(out.begin(), out.end(), '\n', ' ');
  return out;
}

std::string EncodeBatch(const OutboxBatch& batch) {
  v1::CompleteTasksRequest req;
  for (const CellResult& r : batch.results) {
    v1::CellResult* out = req.add_results();
    out->set_cell_id(r.cell_id);
    out->set_lease_id(r.lease_id);
    *out->mutable_result() = ToProto(r.result);
  }
  return absl::StrCat(kBatchHeader, "label ", OneLine(batch.label), "\n",
                      req.SerializeAsString());
}

std::optional<OutboxBatch> DecodeBatch(int64_t id, absl::string_view content) {
  if (!absl::ConsumePrefix(&content, kBatchHeader)) return std::nullopt;
  if (!absl::ConsumePrefix(&content, "label ")) return std::nullopt;
  const size_t eol = content.find('\n');
  if (eol == absl::string_view::npos) return std::nullopt;
  OutboxBatch batch;
  batch.id = id;
  batch.label = std::string(content.substr(0, eol));
  content.remove_prefix(eol + 1);
  v1::CompleteTasksRequest req;
  if (!req.ParseFromArray(content.data(), static_cast<int>(content.size()))) return std::nullopt;
  if (req.results_size() == 0) return std::nullopt;
  for (const v1::CellResult& r : req.results()) {
    batch.results.push_back({r.cell_id(), r.lease_id(), FromProto(r.result())});
  }
  return batch;
}

std::string EncodeSession(const OutboxSession& s) {
  return absl::StrCat("worker_id ", s.worker_id, "\nsession ", s.session, "\nlease_seconds ",
                      s.lease_seconds, "\nheartbeat_seconds ", s.heartbeat_seconds, "\n");
}

std::optional<OutboxSession> DecodeSession(const std::string& content) {
  OutboxSession s;
  bool id = false, secret = false;
  for (absl::string_view line : absl::StrSplit(content, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits(' ', 1));
    if (kv.first == "worker_id") {
      s.worker_id = kv.second;
      id = !s.worker_id.empty();
    } else if (kv.first == "session") {
      s.session = kv.second;
      secret = !s.session.empty();
    } else if (kv.first == "lease_seconds") {
      if (!absl::SimpleAtoi(kv.second, &s.lease_seconds)) return std::nullopt;
    } else if (kv.first == "heartbeat_seconds") {
      if (!absl::SimpleAtoi(kv.second, &s.heartbeat_seconds)) return std::nullopt;
    }
  }
  if (!id || !secret) return std::nullopt;
  return s;
}

std::string HumanBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  if (bytes < (int64_t{1} << 20)) return absl::StrCat(bytes / 1024, " kB");
  return absl::StrCat(bytes >> 20, " MiB");
}

}  // namespace

FileOutbox::FileOutbox(std::string dir, OutboxLimits limits, int lock_fd)
    : dir_(std::move(dir)), limits_(limits), lock_fd_(lock_fd) {}

FileOutbox::~FileOutbox() { close(lock_fd_); }

absl::StatusOr<std::unique_ptr<FileOutbox>> FileOutbox::Open(const std::string& dir,
                                                             OutboxLimits limits) {
  if (limits.max_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--outbox-max-batches must be at least 1, got ", limits.max_batches));
  }
  if (limits.max_bytes < 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--outbox-max-bytes must be at least 4096, got ", limits.max_bytes));
  }
  if (dir.empty()) return absl::InvalidArgumentError("--outbox-dir: empty path");
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  const std::string lock_path = dir + "/lock";
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(Errno(absl::StrCat("outbox: cannot open ", lock_path)));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const bool busy = errno == EWOULDBLOCK;
    const std::string why = Errno("flock");
    close(fd);
    if (busy) {
      return absl::FailedPreconditionError(absl::StrCat(
          "outbox ", dir, " is in use by another worker process; give each worker its own "
          "--outbox-dir"));
    }
    return absl::InternalError(absl::StrCat("outbox ", dir, ": ", why));
  }
  std::unique_ptr<FileOutbox> outbox(new FileOutbox(dir, limits, fd));
  if (absl::Status s = outbox->Load(); !s.ok()) return s;
  return outbox;
}

absl::Status FileOutbox::Load() {
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return absl::InternalError(Errno(absl::StrCat("outbox: cannot read ", dir_)));
  std::vector<std::pair<int64_t, std::string>> files;
  std::vector<std::string> temporaries;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (absl::EndsWith(name, kTmpSuffix)) {
      temporaries.push_back(name);
      continue;
    }
    absl::string_view rest = name;
    int64_t id = 0;
    if (absl::ConsumePrefix(&rest, kBatchPrefix) && absl::SimpleAtoi(rest, &id) && id > 0) {
      files.emplace_back(id, name);
    }
  }
  closedir(d);
  // A write the previous process did not finish: never renamed, so never
  // a batch.
  for (const std::string& name : temporaries) unlink((dir_ + "/" + name).c_str());
  std::sort(files.begin(), files.end());

  std::string content;
  const std::string session_path = dir_ + "/session";
  if (ReadWhole(session_path, &content)) {
    left_session_ = DecodeSession(content);
    if (!left_session_.has_value()) {
      problems_.push_back(absl::StrCat(session_path, " is not a session file; ignored"));
    }
  }
  for (const auto& [id, name] : files) {
    const std::string path = dir_ + "/" + name;
    if (!ReadWhole(path, &content)) {
      problems_.push_back(Errno(absl::StrCat("cannot read ", path)));
      continue;
    }
    std::optional<OutboxBatch> batch = DecodeBatch(id, content);
    if (!batch.has_value()) {
      const std::string bad = path + ".bad";
      rename(path.c_str(), bad.c_str());
      problems_.push_back(absl::StrCat(path, " does not parse as a batch; moved to ", bad));
      continue;
    }
    sizes_[id] = static_cast<int64_t>(content.size());
    bytes_ += static_cast<int64_t>(content.size());
    left_batches_.push_back(std::move(*batch));
  }
  return absl::OkStatus();
}

std::optional<OutboxSession> FileOutbox::LeftSession() const { return left_session_; }

std::vector<OutboxBatch> FileOutbox::LeftBatches() const { return left_batches_; }

absl::Status FileOutbox::SyncDir() {
  const int fd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(Errno(absl::StrCat("outbox: cannot open ", dir_)));
  const int rc = fsync(fd);
  const absl::Status s =
      rc == 0 ? absl::OkStatus() : WriteError(absl::StrCat("outbox: fsync ", dir_));
  close(fd);
  return s;
}

absl::Status FileOutbox::WriteDurably(const std::string& name, const std::string& content) {
  const std::string path = dir_ + "/" + name;
  const std::string tmp = path + kTmpSuffix;
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return WriteError(absl::StrCat("outbox: cannot create ", tmp));
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const absl::Status s = WriteError(absl::StrCat("outbox: writing ", tmp));
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    const absl::Status s = WriteError(absl::StrCat("outbox: fsync ", tmp));
    close(fd);
    unlink(tmp.c_str());
    return s;
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const absl::Status s = WriteError(absl::StrCat("outbox: renaming ", tmp));
    unlink(tmp.c_str());
    return s;
  }
  return SyncDir();
}

absl::Status FileOutbox::SaveSession(const OutboxSession& session) {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteDurably("session", EncodeSession(session));
}

absl::Status FileOutbox::Add(const OutboxBatch& batch) {
  const std::string content = EncodeBatch(batch);
  const int64_t size = static_cast<int64_t>(content.size());
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int>(sizes_.size()) + 1 > limits_.max_batches) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "outbox ", dir_, " is full: ", sizes_.size(), " batches already, the bound is ",
        limits_.max_batches, " (--outbox-max-batches)"));
  }
  if (bytes_ + size > limits_.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "outbox ", dir_, " is full: ", bytes_, " bytes held and ", size,
        " more would pass the bound of ", limits_.max_bytes, " bytes (--outbox-max-bytes)"));
  }
  if (absl::Status s = WriteDurably(absl::StrCat(kBatchPrefix, batch.id), content); !s.ok()) {
    return s;
  }
  bytes_ += size - (sizes_.count(batch.id) ? sizes_[batch.id] : 0);
  sizes_[batch.id] = size;
  return absl::OkStatus();
}

absl::Status FileOutbox::Remove(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sizes_.find(id);
  if (it == sizes_.end()) return absl::OkStatus();
  const std::string path = absl::StrCat(dir_, "/", kBatchPrefix, id);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(Errno(absl::StrCat("outbox: cannot remove ", path)));
  }
  bytes_ -= it->second;
  sizes_.erase(it);
  return SyncDir();
}

int FileOutbox::batches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(sizes_.size());
}

int64_t FileOutbox::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

std::string FileOutbox::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  return absl::StrCat(sizes_.size(), sizes_.size() == 1 ? " batch, " : " batches, ",
                      HumanBytes(bytes_), " in ", dir_, " (bounds: ", limits_.max_batches,
                      " batches, ", HumanBytes(limits_.max_bytes), ")");
}

absl::StatusOr<std::string> DefaultOutboxBase() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && *state == '/') return absl::StrCat(state, "/ranksweep/worker-outbox");
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home == '/') {
    return absl::StrCat(home, "/.local/state/ranksweep/worker-outbox");
  }
  return absl::FailedPreconditionError(
      "neither XDG_STATE_HOME nor HOME is set: set --outbox-dir, the directory where finished "
      "results wait until the coordinator acknowledges them");
}

absl::StatusOr<std::unique_ptr<FileOutbox>> OpenDefaultOutbox(const std::string& base,
                                                              const std::string& address,
                                                              const std::string& worker_id,
                                                              OutboxLimits limits) {
  std::string key = address;
  for (char& ch : key) {
    const bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                       (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    if (!plain) ch = '_';
  }
  const std::string parent = absl::StrCat(base, "/", key);
  if (!worker_id.empty()) return FileOutbox::Open(absl::StrCat(parent, "/id-", worker_id), limits);
  for (int seat = 0; seat < kSeats; ++seat) {
    absl::StatusOr<std::unique_ptr<FileOutbox>> outbox =
        FileOutbox::Open(absl::StrCat(parent, "/seat-", seat), limits);
    if (outbox.ok() || !absl::IsFailedPrecondition(outbox.status())) return outbox;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "all ", kSeats, " default outboxes under ", parent,
      " are in use by other worker processes; set --outbox-dir"));
}

}  // namespace ranksweep::agent
