// The worker's outbox on disk (outbox.h): one directory per worker process,
// locked while the process lives, holding
//   lock         flock(2)ed by the process that owns the directory;
//   session      the registration to resume (worker id, session secret,
//                lease and heartbeat periods), mode 0600;
//   batch-ID     one task's results: a header line, a label line, then a
//                serialized ranksweep.v1.CompleteTasksRequest (results only).
// Every file is written whole to NAME.tmp, fsync'd, renamed over NAME, and
// the directory fsync'd, so a crash at any point leaves either the old
// file or the new one, never a part. Leftover *.tmp files are removed when
// the outbox opens; a batch file that does not parse is renamed
// batch-ID.bad and reported in problems().
//
// Bounds: at most `max_batches` batch files and `max_bytes` bytes of them
// (ranksweep-worker --outbox-max-batches, --outbox-max-bytes). Add beyond
// them is ResourceExhausted and writes nothing.
//
// Thread-safety: all methods may be called from any thread (one mutex).
// Two processes never share a directory: Open fails while another holds
// the lock.
#ifndef RANKSWEEP_WORKER_AGENT_FILE_OUTBOX_H_
#define RANKSWEEP_WORKER_AGENT_FILE_OUTBOX_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/agent/outbox.h"

namespace ranksweep::agent {

struct OutboxLimits {
  int max_batches = 1000;
  int64_t max_bytes = int64_t{64} << 20;
};

class FileOutbox : public Outbox {
 public:
  // Creates `dir` (mode 0700, parents too) when missing, takes its lock and
  // reads what a previous process left. FailedPrecondition, naming the
  // directory, when another process holds the lock; InvalidArgument for bad
  // limits; Internal (with errno's text) when the directory cannot be made
  // or read.
  static absl::StatusOr<std::unique_ptr<FileOutbox>> Open(const std::string& dir,
                                                          OutboxLimits limits = {});
  ~FileOutbox() override;  // releases the lock

  std::optional<OutboxSession> LeftSession() const override;
  std::vector<OutboxBatch> LeftBatches() const override;
  absl::Status SaveSession(const OutboxSession& session) override;
  absl::Status Add(const OutboxBatch& batch) override;
  absl::Status Remove(int64_t id) override;
  std::string Describe() const override;

  const std::string& dir() const { return dir_; }
  // Batch files on disk now, and their bytes.
  int batches() const;
  int64_t bytes() const;
  // What Open could not read (a corrupt batch, an unreadable session), one
  // line each, for the caller to log.
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  FileOutbox(std::string dir, OutboxLimits limits, int lock_fd);
  absl::Status Load();
  // Writes `content` to `name` in the directory as the file comment says.
  absl::Status WriteDurably(const std::string& name, const std::string& content);
  absl::Status SyncDir();

  const std::string dir_;
  const OutboxLimits limits_;
  const int lock_fd_;
  std::optional<OutboxSession> left_session_;
  std::vector<OutboxBatch> left_batches_;
  std::vector<std::string> problems_;
  mutable std::mutex mu_;
  std::map<int64_t, int64_t> sizes_;  // guarded by mu_: batch id -> bytes on disk
  int64_t bytes_ = 0;                 // guarded by mu_
};

// The directory default outboxes live under: $XDG_STATE_HOME/ranksweep/
// worker-outbox, else $HOME/.local/state/ranksweep/worker-outbox.
// FailedPrecondition, saying to set --outbox-dir, when neither is set.
absl::StatusOr<std::string> DefaultOutboxBase();

// The default outbox of a worker of coordinator `address`, under `base`:
// BASE/ADDRESS/id-WORKER_ID when `worker_id` is given (FailedPrecondition
// while another process has it), else the first of BASE/ADDRESS/seat-0 ..
// seat-63 no other process holds (a worker restarted on the same machine
// thus takes back a seat and the results its predecessor left there).
// ADDRESS is the address with every character outside [A-Za-z0-9._-]
// written as '_'.
absl::StatusOr<std::unique_ptr<FileOutbox>> OpenDefaultOutbox(const std::string& base,
                                                              const std::string& address,
                                                              const std::string& worker_id,
                                                              OutboxLimits limits = {});

}  // namespace ranksweep::agent

#endif  // RANKSWEEP_WORKER_AGENT_FILE_OUTBOX_H_
