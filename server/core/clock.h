// Time for the coordinator's lease logic. Everything that compares against a
// lease deadline reads the time through a Clock, so tests drive expiry with a
// ManualClock instead of sleeping.
//
// Times are Unix milliseconds: deadlines are persisted in the store and must
// keep their meaning across a restart of the process.
//
// Thread-safety: both implementations are safe to call from any thread.
#ifndef RANKSWEEP_SERVER_CORE_CLOCK_H_
#define RANKSWEEP_SERVER_CORE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ranksweep::server {

class Clock {
 public:
  virtual ~Clock() = default;
  // Current time in Unix milliseconds.
  virtual int64_t NowMs() const = 0;
};

// The system wall clock.
class RealClock final : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to. Starts at `start_ms`.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_.load(); }
  void SetMs(int64_t now_ms) { now_ms_.store(now_ms); }
  void AdvanceMs(int64_t delta_ms) { now_ms_.fetch_add(delta_ms); }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_CLOCK_H_
