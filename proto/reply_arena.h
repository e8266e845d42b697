// An arena for one large reply message (QueryResults' rows as columns: a
// few lists of 100,000 values each), laid out so that the memory its parse
// or its encoding grows into costs few page faults.
//
// The arena's first block is a reservation of address space (1 GiB by
// default, backed only where it is touched), and all of it but its first
// 256 KiB and its last 2 MiB is advised to the kernel as huge pages
// (madvise MADV_HUGEPAGE, which transparent huge pages honour in the
// "madvise" and "always" modes). A reply of a few rows touches a few small
// pages, as a plain arena would; a reply of megabytes takes one fault per
// 2 MiB instead of one per 4 KiB. Where a page fault is dear (a virtual
// machine: about 15 µs each on the 2-core benchmark machine), the faults
// were most of a 100,000-row parse's time (BENCHMARKS.md, "Coordinator:
// dispatch and query").
//
// Where the reservation is refused (an address-space limit, strict
// overcommit) it is an ordinary arena. Past the reservation, blocks come
// from malloc as usual. A message on it must be parsed or built on the
// thread that made the ReplyArena: the arena gives the first block to that
// thread only.
#ifndef RANKSWEEP_PROTO_REPLY_ARENA_H_
#define RANKSWEEP_PROTO_REPLY_ARENA_H_

#include <google/protobuf/arena.h>

#include <cstddef>
#include <optional>

namespace ranksweep {

class ReplyArena {
 public:
  static constexpr size_t kDefaultReserveBytes = size_t{1} << 30;

  explicit ReplyArena(size_t reserve_bytes = kDefaultReserveBytes);
  ~ReplyArena();
  ReplyArena(const ReplyArena&) = delete;
  ReplyArena& operator=(const ReplyArena&) = delete;

  google::protobuf::Arena* get() { return &*arena_; }

  // Whether the reservation was made (else this is an ordinary arena), and
  // whether `p` lies in it.
  bool reserved() const { return block_ != nullptr; }
  bool Holds(const void* p) const;

 private:
  void* region_ = nullptr;  // the mapping, as mmap returned it
  size_t region_bytes_ = 0;
  char* block_ = nullptr;  // the arena's first block, inside the mapping
  size_t block_bytes_ = 0;
  std::optional<google::protobuf::Arena> arena_;
};

}  // namespace ranksweep

#endif  // RANKSWEEP_PROTO_REPLY_ARENA_H_
