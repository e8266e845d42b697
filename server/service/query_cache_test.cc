#include "server/service/query_cache.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace ranksweep::server {
namespace {

std::shared_ptr<const std::string> Bytes(size_t n, char c = 'x') {
  return std::make_shared<const std::string>(n, c);
}

TEST(QueryReplyCacheTest, AReplyIsFoundOnlyAtTheVersionItWasKeptAt) {
  QueryReplyCache cache(1000);
  EXPECT_EQ(cache.Find("a", 1), nullptr);
  cache.Put("a", 1, Bytes(10, 'a'));
  std::shared_ptr<const std::string> got = cache.Find("a", 1);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(*got, std::string(10, 'a'));
  // Another version: a miss, and the stale reply is dropped.
  EXPECT_EQ(cache.Find("a", 2), nullptr);
  EXPECT_EQ(cache.Find("a", 1), nullptr);
  const QueryReplyCache::Stats s = cache.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 3);
  EXPECT_EQ(s.replies, 0);
  EXPECT_EQ(s.bytes, 0);
}

TEST(QueryReplyCacheTest, TheLeastRecentlyUsedGoFirstWhenTheBytesRunOut) {
  QueryReplyCache cache(100);
  cache.Put("a", 1, Bytes(40));
  cache.Put("b", 1, Bytes(40));
  ASSERT_NE(cache.Find("a", 1), nullptr);  // b is now the least recently used
  cache.Put("c", 1, Bytes(40));
  EXPECT_NE(cache.Find("a", 1), nullptr);
  EXPECT_EQ(cache.Find("b", 1), nullptr);
  EXPECT_NE(cache.Find("c", 1), nullptr);
  EXPECT_EQ(cache.stats().replies, 2);
  EXPECT_EQ(cache.stats().bytes, 80);
}

TEST(QueryReplyCacheTest, AReplyLargerThanTheWholeIsNotKeptAndTakesNothingOut) {
  QueryReplyCache cache(100);
  cache.Put("a", 1, Bytes(60));
  cache.Put("big", 1, Bytes(101));
  EXPECT_EQ(cache.Find("big", 1), nullptr);
  EXPECT_NE(cache.Find("a", 1), nullptr);
  // Exactly the whole fits, once the rest is gone.
  cache.Put("full", 1, Bytes(100));
  EXPECT_NE(cache.Find("full", 1), nullptr);
  EXPECT_EQ(cache.Find("a", 1), nullptr);
  EXPECT_EQ(cache.stats().bytes, 100);
}

TEST(QueryReplyCacheTest, PuttingAKeyAgainReplacesItsReply) {
  QueryReplyCache cache(100);
  cache.Put("a", 1, Bytes(30, '1'));
  cache.Put("a", 2, Bytes(50, '2'));
  EXPECT_EQ(cache.Find("a", 1), nullptr);  // and dropped
  cache.Put("a", 2, Bytes(50, '2'));
  std::shared_ptr<const std::string> got = cache.Find("a", 2);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(*got, std::string(50, '2'));
  EXPECT_EQ(cache.stats().replies, 1);
  EXPECT_EQ(cache.stats().bytes, 50);
}

TEST(QueryReplyCacheTest, ZeroBytesKeepsNothing) {
  QueryReplyCache cache(0);
  cache.Put("a", 1, Bytes(1));
  EXPECT_EQ(cache.Find("a", 1), nullptr);
  EXPECT_EQ(cache.stats().replies, 0);
}

// A reply handed out stays whole while the cache drops it.
TEST(QueryReplyCacheTest, AReplyInUseOutlivesItsEviction) {
  QueryReplyCache cache(50);
  cache.Put("a", 1, Bytes(50, 'a'));
  std::shared_ptr<const std::string> held = cache.Find("a", 1);
  cache.Put("b", 1, Bytes(50, 'b'));
  EXPECT_EQ(cache.Find("a", 1), nullptr);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(*held, std::string(50, 'a'));
}

}  // namespace
}  // namespace ranksweep::server
