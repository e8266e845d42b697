// The writer of the coordinator database: one thread that owns the writer
// connection and runs every write transaction, several callers' writes under
// one commit.
//
//  * Write() and WriteAsync() queue a function; the thread runs it inside
//    BEGIN IMMEDIATE ... COMMIT and rolls it back when it returns an error.
//    With the connection in WAL mode and synchronous=FULL (Store::Open sets
//    both), an OK outcome means the transaction is durable.
//  * Group commit: the thread takes every function queued while it was busy
//    (up to kMaxWriteBatch) into one transaction and commits them under one
//    sync. Under load a commit serves many calls. A function that fails
//    keeps only its error: the others' changes stay. They first run with
//    nothing around each; when one fails, the transaction is rolled back and
//    the others run again from its start, each in a savepoint from then on.
//    So a function may run more than once, and must start from nothing each
//    time: set what it hands back, never add to what an earlier run left,
//    and leave anything that must happen once (a log line) until after the
//    commit.
//
//  * The outcomes are handed out on a second thread, the finisher: each
//    request's `done` runs there, in the order the requests were queued,
//    after its commit. The writer starts the next batch meanwhile, so a
//    call's reply (built and sent by its `done`) never holds up the next
//    commit.
//
// Ownership: borrows the writer connection, which must outlive this object
// and which nothing else may use while it lives.
//
// Thread-safety: every method but Close() is safe to call from many threads;
// Write() must not be called on the writer or the finisher thread
// (FailedPrecondition, not a deadlock), and SetCommitObserver() must come
// before the first write.
#ifndef RANKSWEEP_SERVER_CORE_GROUP_COMMIT_H_
#define RANKSWEEP_SERVER_CORE_GROUP_COMMIT_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "server/core/sqlite.h"

namespace ranksweep::server {

class GroupCommit {
 public:
  using WriteFn = std::function<absl::Status(Connection&)>;
  using WriteDone = std::function<void(absl::Status)>;

  // Counters since the start: functions run, the transactions committed for
  // them (fewer when calls shared a commit), and the transactions rolled
  // back because a function in them failed, after which the others ran
  // again.
  struct WriteStats {
    int64_t writes = 0;
    int64_t commits = 0;
    int64_t reruns = 0;
  };

  // Starts the writer thread on `writer`.
  explicit GroupCommit(Connection& writer);
  // Close(), if not called before.
  ~GroupCommit();
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Runs `fn` in a write transaction on the writer thread, possibly together
  // with other callers' functions, and waits for the outcome. Keeps its
  // changes when `fn` returns OK and the commit succeeds; rolls them back
  // and returns the error otherwise. `fn` may run more than once.
  absl::Status Write(absl::FunctionRef<absl::Status(Connection&)> fn);

  // Like Write(), without waiting: `fn` runs on the writer thread, and
  // `done`, with the outcome, on the finisher thread once the commit has
  // synced (or failed). The `done`s run one at a time in the order their
  // writes were queued, so each must be short and must not block; one may
  // queue more writes with WriteAsync().
  void WriteAsync(WriteFn fn, WriteDone done);

  // Runs every write already queued and hands out their outcomes, then
  // stops both threads; writes queued from then on fail with kUnavailable.
  // The methods stay callable while it runs (a queued function may ask for
  // queued()). Called by the owner, from one thread; calling it again does
  // nothing.
  void Close();

  WriteStats stats();
  // Called on the writer thread after every COMMIT that succeeded, with the
  // seconds it took (its sync included). Must be short and must not block.
  void SetCommitObserver(std::function<void(double seconds)> observer);
  // Writes waiting for the writer thread right now (not counting a batch
  // being run).
  size_t queued();

 private:
  // One function waiting in the queue, owned by the queue until the
  // finisher thread has run its `done`.
  struct WriteRequest {
    WriteFn fn;
    WriteDone done;
    absl::Status status;
  };
  // The most functions one commit takes; the rest wait for the next one.
  static constexpr size_t kMaxWriteBatch = 256;

  // The writer thread: takes what is queued, runs it, hands it to the
  // finisher; until closing and the queue is empty.
  void WriterLoop();
  // The finisher thread: runs the `done` of every batch the writer hands
  // it, in order; until the writer has stopped and nothing is left.
  void FinisherLoop();
  // Runs `batch` as described above and sets every request's status. Only
  // the writer thread runs it.
  void RunBatch(const std::vector<WriteRequest*>& batch);

  Connection& writer_;
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;  // work queued, or closing
  std::deque<WriteRequest*> queue_;   // waiting, in arrival order
  bool closing_ = false;              // guarded by queue_mu_
  WriteStats stats_;                  // guarded by queue_mu_
  std::function<void(double)> commit_observer_;  // set before the first write
  std::mutex finish_mu_;
  std::condition_variable finish_cv_;           // a batch to finish, or the writer stopped
  std::deque<std::vector<WriteRequest*>> finish_queue_;  // committed, in order
  bool writer_stopped_ = false;                 // guarded by finish_mu_
  // Last: they start once the rest exists.
  std::thread finisher_thread_;
  std::thread writer_thread_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_GROUP_COMMIT_H_
