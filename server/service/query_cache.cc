#include "server/service/query_cache.h"

#include <iterator>
#include <utility>

namespace ranksweep::server {

std::shared_ptr<const std::string> QueryReplyCache::Find(const std::string& key,
                                                         int64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  if (it->second->version != version) {
    DropLocked(it->second);
    ++stats_.misses;
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  ++stats_.hits;
  return it->second->reply;
}

void QueryReplyCache::Put(const std::string& key, int64_t version,
                          std::shared_ptr<const std::string> reply) {
  if (reply == nullptr) return;
  const int64_t size = static_cast<int64_t>(reply->size());
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_key_.find(key); it != by_key_.end()) DropLocked(it->second);
  if (size > max_bytes_) return;
  while (!lru_.empty() && stats_.bytes + size > max_bytes_) DropLocked(std::prev(lru_.end()));
  lru_.push_front(Entry{key, version, std::move(reply)});
  by_key_.emplace(key, lru_.begin());
  stats_.bytes += size;
  ++stats_.replies;
}

QueryReplyCache::Stats QueryReplyCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void QueryReplyCache::DropLocked(Lru::iterator it) {
  stats_.bytes -= static_cast<int64_t>(it->reply->size());
  --stats_.replies;
  by_key_.erase(it->key);
  lru_.erase(it);
}

}  // namespace ranksweep::server
