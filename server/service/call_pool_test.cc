#include "server/service/call_pool.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"

namespace ranksweep::server {
namespace {

TEST(CallPoolTest, RunsJobsOnAsManyThreadsAsItHasAtOnce) {
  CallPool pool(8);
  EXPECT_EQ(pool.threads(), 8);
  std::mutex mu;
  int running = 0, most = 0;
  std::atomic<int> done{0};
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(pool.Run([&] {
      {
        std::lock_guard<std::mutex> lock(mu);
        most = std::max(most, ++running);
      }
      // Every job waits until all 8 have started: only possible if they
      // run side by side.
      while (true) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (most == 8) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      done.fetch_add(1);
    }));
  }
  pool.Shutdown();
  EXPECT_EQ(done.load(), 8);
  EXPECT_EQ(most, 8);
}

TEST(CallPoolTest, ShutdownRunsQueuedJobsThenRefusesNewOnes) {
  CallPool pool(1);
  std::atomic<int> done{0};
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.Run([&] { done.fetch_add(1); }));
  pool.Shutdown();
  EXPECT_EQ(done.load(), 100);
  EXPECT_FALSE(pool.Run([&] { done.fetch_add(1); }));
  EXPECT_EQ(done.load(), 100);
  pool.Shutdown();  // a second Shutdown is harmless
}

}  // namespace
}  // namespace ranksweep::server
