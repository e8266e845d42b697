// Replies to QueryResults kept as the bytes that were sent, so that the same
// query of an unchanged sweep is answered without reading or encoding a row.
//
// Why: a person's dashboard and `ranksweep results` ask for the same rows of
// a sweep again and again (the dashboard every few seconds), and a reply of
// 100,000 rows costs tens of milliseconds of reading, packing and encoding
// each time. A kept reply is sent as it is: its bytes go out by reference.
//
// A reply is kept under its request (the key) and the sweep's results
// version when it was read (Coordinator::ResultsVersion, read before the
// rows): a later call with the same key is served the kept bytes only if the
// version still equals it, so a result stored, replaced or deleted since,
// by any path, makes the next call read afresh. A version read before the
// rows can only be older than what was read, never newer, so a match never
// serves rows older than the store's.
//
// Memory: at most `max_bytes` of replies are kept, the least recently used
// dropped first; a reply larger than `max_bytes` is not kept. 0 keeps
// nothing.
//
// Thread-safety: every method may be called concurrently.
#ifndef RANKSWEEP_SERVER_SERVICE_QUERY_CACHE_H_
#define RANKSWEEP_SERVER_SERVICE_QUERY_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ranksweep::server {

class QueryReplyCache {
 public:
  explicit QueryReplyCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // The reply kept for `key` at `version`; null when none is (a reply kept
  // at another version is dropped).
  std::shared_ptr<const std::string> Find(const std::string& key, int64_t version);
  // Keeps `reply` for `key` at `version`, replacing what `key` held, and
  // drops the least recently used replies until the rest fit.
  void Put(const std::string& key, int64_t version, std::shared_ptr<const std::string> reply);

  struct Stats {
    int64_t hits = 0;    // calls of Find that returned a reply
    int64_t misses = 0;  // calls of Find that did not
    int64_t replies = 0;
    int64_t bytes = 0;   // the kept replies' bytes (keys not counted)
  };
  Stats stats() const;
  int64_t max_bytes() const { return max_bytes_; }

 private:
  struct Entry {
    std::string key;
    int64_t version;
    std::shared_ptr<const std::string> reply;
  };
  using Lru = std::list<Entry>;  // most recently used first

  void DropLocked(Lru::iterator it);

  const int64_t max_bytes_;
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<std::string, Lru::iterator> by_key_;
  Stats stats_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_QUERY_CACHE_H_
