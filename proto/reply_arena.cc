#include "proto/reply_arena.h"

#include <sys/mman.h>

#include <cstdint>

namespace ranksweep {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
// The block's head (where a reply's first bytes go) stays small pages, so
// that a small reply touches no huge page; so does its last huge page (below).
constexpr uintptr_t kSmallHead = uintptr_t{256} << 10;

uintptr_t AlignUp(uintptr_t x, uintptr_t a) { return (x + a - 1) & ~(a - 1); }
uintptr_t AlignDown(uintptr_t x, uintptr_t a) { return x & ~(a - 1); }

}  // namespace

ReplyArena::ReplyArena(size_t reserve_bytes) {
  // Too small to hold a huge page past its small head and before its small
  // tail, or more than the address space: an ordinary arena.
  if (reserve_bytes < kSmallHead + 2 * kHugePage || reserve_bytes > (size_t{1} << 46)) {
    arena_.emplace();
    return;
  }
  // One huge page more than asked for, so that the block can start where
  // its first huge page begins kSmallHead in.
  const size_t bytes = reserve_bytes + kHugePage;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    arena_.emplace();
    return;
  }
  region_ = p;
  region_bytes_ = bytes;
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first_huge = AlignUp(start + kSmallHead, kHugePage);
  block_ = reinterpret_cast<char*>(first_huge - kSmallHead);
  block_bytes_ = reserve_bytes;
  // The block's last huge page, where its far end lies, stays small pages.
  const uintptr_t huge_end = AlignDown(first_huge - kSmallHead + reserve_bytes, kHugePage) -
                             kHugePage;
  // Advice only: where the kernel has no transparent huge pages this fails
  // and the block is small pages, as any arena's.
  madvise(reinterpret_cast<void*>(first_huge), huge_end - first_huge, MADV_HUGEPAGE);
  google::protobuf::ArenaOptions options;
  options.initial_block = block_;
  options.initial_block_size = block_bytes_;
  arena_.emplace(options);
}

ReplyArena::~ReplyArena() {
  arena_.reset();
  if (region_ != nullptr) munmap(region_, region_bytes_);
}

bool ReplyArena::Holds(const void* p) const {
  const char* c = static_cast<const char*>(p);
  return block_ != nullptr && c >= block_ && c < block_ + block_bytes_;
}

}  // namespace ranksweep
