// What the coordinator's writes have to say, and who hears it.
//
// A write transaction may run more than once (store.h, group commit) or be
// rolled back, so nothing inside it tells listeners or writes the log: it
// collects its changes, log lines and "work available" in a
// TransactionEvents, set afresh on every run, and the caller hands that to
// ChangeListeners::Dispatch once the transaction has committed.
//
// Thread-safety: TransactionEvents is a plain value, used by one
// transaction at a time. ChangeListeners is safe to call concurrently:
// listeners are called with no registry lock held, each under its own
// mutex, so that Unsubscribe can wait for a call in progress without
// serializing unrelated listeners. Listeners must be quick and must not
// call Subscribe, Unsubscribe or SetWorkListener from inside the callback.
#ifndef RANKSWEEP_SERVER_CORE_EVENTS_H_
#define RANKSWEEP_SERVER_CORE_EVENTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "server/core/types.h"

namespace ranksweep::server {

// The changes, log lines and "work available" of one write transaction.
struct TransactionEvents {
  std::vector<SweepChange> changes;
  std::vector<std::string> log_lines;
  bool work_available = false;  // cells may have become pending

  void Add(const std::string& sweep_id, std::string message, bool final = false) {
    changes.push_back(SweepChange{sweep_id, std::move(message), final});
  }
  template <typename... Args>
  void Log(const absl::FormatSpec<Args...>& format, const Args&... args) {
    log_lines.push_back(absl::StrFormat(format, args...));
  }
};

// The registry of change listeners (per sweep) and the one work listener.
class ChangeListeners {
 public:
  using SweepListener = std::function<void(const SweepChange&)>;
  using WorkListener = std::function<void()>;

  // Calls `listener` for every change of `sweep_id` (of every sweep when
  // it is empty) dispatched until Unsubscribe(id) returns; after that it is
  // never called again.
  int64_t Subscribe(const std::string& sweep_id, SweepListener listener);
  // Unknown or repeated ids are ignored.
  void Unsubscribe(int64_t subscription);
  // Replaces the work listener; the old one is never called again once this
  // returns.
  void SetWorkListener(WorkListener listener);

  // Writes `events`' log lines (server/core/log.h), calls the listeners of
  // each change's sweep in order, then the work listener if work is
  // available.
  void Dispatch(const TransactionEvents& events);

 private:
  struct Entry {
    std::string sweep_id;
    SweepListener on_change;
    WorkListener on_work;
    std::mutex mu;
    bool active = true;  // guarded by mu
  };
  std::mutex mu_;
  int64_t next_subscription_ = 1;                         // guarded by mu_
  std::map<int64_t, std::shared_ptr<Entry>> listeners_;  // guarded by mu_
  std::shared_ptr<Entry> work_listener_;                  // guarded by mu_
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_EVENTS_H_
