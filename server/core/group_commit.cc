#include "server/core/group_commit.h"

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ranksweep::server {

GroupCommit::GroupCommit(Connection& writer) : writer_(writer) {
  finisher_thread_ = std::thread([this] { FinisherLoop(); });
  writer_thread_ = std::thread([this] { WriterLoop(); });
}

GroupCommit::~GroupCommit() { Close(); }

void GroupCommit::Close() {
  if (!writer_thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    closing_ = true;
  }
  queue_cv_.notify_all();
  writer_thread_.join();
  {
    std::lock_guard<std::mutex> lock(finish_mu_);
    writer_stopped_ = true;
  }
  finish_cv_.notify_all();
  finisher_thread_.join();
}

absl::Status GroupCommit::Write(absl::FunctionRef<absl::Status(Connection&)> fn) {
  if (std::this_thread::get_id() == writer_thread_.get_id() ||
      std::this_thread::get_id() == finisher_thread_.get_id()) {
    return absl::FailedPreconditionError(
        "Store::Write called on the store's writer or finisher thread, which would wait for "
        "itself");
  }
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  absl::Status result;
  WriteAsync([fn](Connection& c) { return fn(c); },
             [&](absl::Status s) {
               // Notified under the lock: the waiter's frame (mu, cv) may be
               // gone as soon as it sees `finished`.
               std::lock_guard<std::mutex> lock(mu);
               result = std::move(s);
               finished = true;
               cv.notify_one();
             });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return finished; });
  return result;
}

void GroupCommit::WriteAsync(WriteFn fn, WriteDone done) {
  auto* request = new WriteRequest{std::move(fn), std::move(done), absl::OkStatus()};
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (!closing_) {
      queue_.push_back(request);
      request = nullptr;
    }
  }
  if (request == nullptr) {
    // Cheap when the writer is busy: nobody waits on the condition variable
    // then, so no system call.
    queue_cv_.notify_one();
    return;
  }
  request->done(absl::UnavailableError("the store is closing"));
  delete request;
}

void GroupCommit::WriterLoop() {
  std::vector<WriteRequest*> batch;
  std::unique_lock<std::mutex> lock(queue_mu_);
  while (true) {
    queue_cv_.wait(lock, [this] { return closing_ || !queue_.empty(); });
    if (queue_.empty()) return;  // closing, and everything queued has run
    // Everything queued while the last batch ran, up to one batch, under
    // one commit and one sync.
    batch.clear();
    while (!queue_.empty() && batch.size() < kMaxWriteBatch) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    lock.unlock();
    RunBatch(batch);
    lock.lock();
    stats_.writes += static_cast<int64_t>(batch.size());
    lock.unlock();
    // The calls finish on the finisher thread while the next batch runs.
    {
      std::lock_guard<std::mutex> finish_lock(finish_mu_);
      finish_queue_.push_back(std::move(batch));  // cleared before it is filled again
    }
    finish_cv_.notify_one();
    lock.lock();
  }
}

void GroupCommit::FinisherLoop() {
  std::unique_lock<std::mutex> lock(finish_mu_);
  while (true) {
    finish_cv_.wait(lock, [this] { return writer_stopped_ || !finish_queue_.empty(); });
    if (finish_queue_.empty()) return;  // the writer stopped, and all is finished
    std::vector<WriteRequest*> batch = std::move(finish_queue_.front());
    finish_queue_.pop_front();
    lock.unlock();
    for (WriteRequest* r : batch) {
      r->done(std::move(r->status));
      delete r;
    }
    lock.lock();
  }
}

void GroupCommit::SetCommitObserver(std::function<void(double seconds)> observer) {
  commit_observer_ = std::move(observer);
}

GroupCommit::WriteStats GroupCommit::stats() {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return stats_;
}

size_t GroupCommit::queued() {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return queue_.size();
}

void GroupCommit::RunBatch(const std::vector<WriteRequest*>& batch) {
  static const std::string kBegin = "BEGIN IMMEDIATE";
  static const std::string kSavepoint = "SAVEPOINT write_request";
  static const std::string kRelease = "RELEASE write_request";
  Connection& w = writer_;
  // The requests of a batch first run one after another with nothing
  // around each: a savepoint makes SQLite copy every page a request first
  // changes into its statement journal, about a quarter of the SQL time of
  // a small request. When one of them fails (a stale lease, an unknown
  // cell), the transaction with its partial changes is rolled back; it keeps
  // its error without running again, and the others run again from the
  // start, now each in a savepoint, so that a second failure in the batch
  // undoes only its own changes. A lone request never needs a savepoint:
  // the transaction's rollback undoes it.
  std::vector<WriteRequest*> todo(batch.begin(), batch.end());
  bool savepoints = false;
  size_t next = 0;  // the first request of todo not yet run
  while (next < todo.size()) {
    absl::Status begin = w.Run(kBegin);
    if (!begin.ok()) {
      for (size_t i = next; i < todo.size(); ++i) todo[i]->status = begin;
      return;
    }
    const size_t first = next;
    const bool guard = savepoints && todo.size() - first > 1;
    // Requests run in this transaction, in order; those that succeeded wait
    // for the commit to learn their outcome.
    std::vector<WriteRequest*> applied;
    bool aborted = false, run_again = false;
    for (; next < todo.size() && !aborted && !run_again; ++next) {
      WriteRequest* r = todo[next];
      absl::Status s = guard ? w.Run(kSavepoint) : absl::OkStatus();
      if (s.ok()) s = r->fn(w);
      if (!w.InTransaction()) {
        // SQLite rolled the whole transaction back (I/O error, disk full):
        // what the earlier requests did is gone with it.
        const absl::Status lost = s.ok() ? absl::InternalError("write transaction rolled back")
                                         : s;
        r->status = lost;
        for (WriteRequest* done : applied) {
          done->status = absl::Status(lost.code(),
                                      absl::StrCat("transaction rolled back by a later write in "
                                                   "the same commit: ",
                                                   lost.message()));
        }
        applied.clear();
        aborted = true;
        continue;  // ++next: the remaining requests get a fresh transaction
      }
      if (s.ok() && guard) s = w.Run(kRelease);
      r->status = s;
      if (s.ok()) {
        applied.push_back(r);
      } else if (guard) {
        w.Exec("ROLLBACK TO write_request").IgnoreError();
        w.Exec("RELEASE write_request").IgnoreError();
      } else if (next + 1 < todo.size() || !applied.empty()) {
        // Unguarded, its partial changes are mixed with the others': undo
        // the transaction, drop the failed request, run the rest again.
        w.Exec("ROLLBACK").IgnoreError();
        todo.erase(todo.begin() + static_cast<std::ptrdiff_t>(next));
        next = first;
        savepoints = true;
        run_again = true;
        std::lock_guard<std::mutex> lock(queue_mu_);
        ++stats_.reruns;
        break;
      }
    }
    if (aborted || run_again) continue;
    // One COMMIT, one sync, for every request that succeeded. A batch whose
    // requests all failed has nothing to keep.
    const auto commit_start = std::chrono::steady_clock::now();
    absl::Status commit = applied.empty() ? w.Exec("ROLLBACK") : w.Commit();
    if (commit.ok() && !applied.empty() && commit_observer_) {
      commit_observer_(std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                     commit_start)
                           .count());
    }
    if (!commit.ok()) {
      w.Exec("ROLLBACK").IgnoreError();
      for (WriteRequest* r : applied) r->status = commit;
    } else if (!applied.empty()) {
      std::lock_guard<std::mutex> lock(queue_mu_);
      ++stats_.commits;
    }
  }
}

}  // namespace ranksweep::server
