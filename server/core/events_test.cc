#include "server/core/events.h"

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/core/log.h"

namespace ranksweep::server {
namespace {

class ChangeListenersTest : public ::testing::Test {
 protected:
  void SetUp() override { SetLogEnabled(false); }
  void TearDown() override { SetLogEnabled(true); }

  ChangeListeners listeners_;
};

TEST_F(ChangeListenersTest, EachListenerHearsItsOwnSweepsChangesInOrder) {
  std::vector<std::string> a, b;
  listeners_.Subscribe("sw-a", [&](const SweepChange& c) { a.push_back(c.message); });
  listeners_.Subscribe("sw-b", [&](const SweepChange& c) {
    b.push_back(c.message + (c.final ? " (final)" : ""));
  });
  TransactionEvents events;
  events.Add("sw-a", "one");
  events.Add("sw-b", "two");
  events.Add("sw-a", "three");
  events.Add("sw-b", "ended", /*final=*/true);
  events.Add("sw-c", "nobody listens");
  listeners_.Dispatch(events);
  EXPECT_EQ(a, (std::vector<std::string>{"one", "three"}));
  EXPECT_EQ(b, (std::vector<std::string>{"two", "ended (final)"}));
}

TEST_F(ChangeListenersTest, AnUnsubscribedListenerIsNeverCalledAgain) {
  int calls = 0;
  const int64_t id = listeners_.Subscribe("sw-a", [&](const SweepChange&) { ++calls; });
  const int64_t other = listeners_.Subscribe("sw-a", [](const SweepChange&) {});
  EXPECT_NE(id, other);
  TransactionEvents events;
  events.Add("sw-a", "change");
  listeners_.Dispatch(events);
  listeners_.Unsubscribe(id);
  listeners_.Unsubscribe(id);      // again: ignored
  listeners_.Unsubscribe(12345);   // unknown: ignored
  listeners_.Dispatch(events);
  EXPECT_EQ(calls, 1);
}

TEST_F(ChangeListenersTest, TheWorkListenerHearsOnlyAvailableWorkAndOnlyTheLatestOne) {
  int first = 0, second = 0;
  listeners_.SetWorkListener([&] { ++first; });
  TransactionEvents quiet;
  quiet.Add("sw-a", "no new work");
  listeners_.Dispatch(quiet);
  EXPECT_EQ(first, 0);
  TransactionEvents work;
  work.work_available = true;
  listeners_.Dispatch(work);
  EXPECT_EQ(first, 1);
  listeners_.SetWorkListener([&] { ++second; });
  listeners_.Dispatch(work);
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 1);
}

TEST_F(ChangeListenersTest, UnsubscribeWaitsForACallInProgress) {
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  const int64_t id = listeners_.Subscribe("sw-a", [&](const SweepChange&) {
    entered.set_value();
    released.wait();
  });
  TransactionEvents events;
  events.Add("sw-a", "slow");
  std::thread dispatcher([&] { listeners_.Dispatch(events); });
  entered.get_future().wait();
  std::atomic<bool> unsubscribed{false};
  std::thread unsubscriber([&] {
    listeners_.Unsubscribe(id);
    unsubscribed = true;
  });
  // The listener is still running: Unsubscribe must not have returned.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(unsubscribed.load());
  release.set_value();
  unsubscriber.join();
  dispatcher.join();
  EXPECT_TRUE(unsubscribed.load());
}

}  // namespace
}  // namespace ranksweep::server
