#include "server/core/events.h"

#include "server/core/log.h"

namespace ranksweep::server {

void ChangeListeners::Dispatch(const TransactionEvents& events) {
  for (const std::string& line : events.log_lines) LogLine(line);
  std::vector<std::shared_ptr<Entry>> targets;
  std::shared_ptr<Entry> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, entry] : listeners_) targets.push_back(entry);
    work = work_listener_;
  }
  for (const SweepChange& change : events.changes) {
    for (auto& entry : targets) {
      if (!entry->sweep_id.empty() && entry->sweep_id != change.sweep_id) continue;
      std::lock_guard<std::mutex> lock(entry->mu);
      if (entry->active) entry->on_change(change);
    }
  }
  if (events.work_available && work != nullptr) {
    std::lock_guard<std::mutex> lock(work->mu);
    if (work->active && work->on_work) work->on_work();
  }
}

int64_t ChangeListeners::Subscribe(const std::string& sweep_id, SweepListener listener) {
  auto entry = std::make_shared<Entry>();
  entry->sweep_id = sweep_id;
  entry->on_change = std::move(listener);
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t id = next_subscription_++;
  listeners_.emplace(id, std::move(entry));
  return id;
}

void ChangeListeners::Unsubscribe(int64_t subscription) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = listeners_.find(subscription);
    if (it == listeners_.end()) return;
    entry = std::move(it->second);
    listeners_.erase(it);
  }
  std::lock_guard<std::mutex> lock(entry->mu);  // waits for a call in progress
  entry->active = false;
}

void ChangeListeners::SetWorkListener(WorkListener listener) {
  auto entry = std::make_shared<Entry>();
  entry->on_work = std::move(listener);
  std::shared_ptr<Entry> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(work_listener_);
    work_listener_ = std::move(entry);
  }
  if (old != nullptr) {
    std::lock_guard<std::mutex> lock(old->mu);
    old->active = false;
  }
}

}  // namespace ranksweep::server
