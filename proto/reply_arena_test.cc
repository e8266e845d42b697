#include "proto/reply_arena.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/util/message_differencer.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep {
namespace {

// A reply of `rows` rows as columns, with strings (the arena keeps their
// destructors at its block's far end) and ~9 MB of lists at 100,000 rows.
v1::QueryResultsResponse ColumnsReply(int rows) {
  v1::QueryResultsResponse r;
  r.set_next_page_token("c99");
  v1::ResultColumns* c = r.mutable_columns();
  c->set_sweep_id("sw-1");
  c->add_heads("softmax");
  c->add_heads("kernel/elu1");
  c->add_workers("w-a");
  for (int i = 0; i < rows; ++i) {
    c->add_cell_id(1000 + i);
    c->add_head_index(i % 2);
    c->add_rank(1 + i % 64);
    c->add_seed(static_cast<uint64_t>(i % 10));
    c->add_state(v1::CELL_STATE_DONE);
    c->add_lease_id(int64_t{1} << 40 | i);
    c->add_worker(0);
    c->add_train_error(1.0 / (1 + i));
    c->add_test_error(0.5 / (1 + i));
    c->add_final_loss(static_cast<double>(i) * 1e-3);
  }
  c->add_failure_row(rows - 1);
  c->add_failure("out of memory");
  return r;
}

// Parses `bytes` on `arena`, checks it against `want`, and returns it.
const v1::QueryResultsResponse& ParseOn(ReplyArena& arena, const std::string& bytes,
                                        const v1::QueryResultsResponse& want) {
  auto* got = google::protobuf::Arena::CreateMessage<v1::QueryResultsResponse>(arena.get());
  EXPECT_TRUE(got->ParseFromString(bytes));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*got, want));
  return *got;
}

// Whether this process may map `bytes` of address space as ReplyArena asks
// for it: not where an address-space limit (ulimit -v) or strict overcommit
// refuses it.
bool MachineGrants(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  munmap(p, bytes);
  return true;
}

// This process's address space now, in bytes (VmSize of /proc/self/status).
size_t AddressSpaceInUse() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmSize:") {
      size_t kib = 0;
      status >> kib;
      return kib << 10;
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}

// The child of the test below: limits its address space to 256 MiB more
// than it has, then parses `bytes` on a default ReplyArena. 0 when the
// reservation was refused and the reply parsed equal to `want` in ordinary
// blocks, else the number of the check that failed.
int ParseUnderAnAddressSpaceLimit(const std::string& bytes, const v1::QueryResultsResponse& want) {
  const size_t in_use = AddressSpaceInUse();
  if (in_use == 0) return 1;
  rlimit limit;
  limit.rlim_cur = limit.rlim_max = in_use + (size_t{256} << 20);
  if (setrlimit(RLIMIT_AS, &limit) != 0) return 2;
  ReplyArena arena;
  if (arena.reserved()) return 3;
  auto* got = google::protobuf::Arena::CreateMessage<v1::QueryResultsResponse>(arena.get());
  if (!got->ParseFromString(bytes)) return 4;
  if (!google::protobuf::util::MessageDifferencer::Equals(*got, want)) return 5;
  if (arena.Holds(got->columns().cell_id().data())) return 6;
  return 0;
}

TEST(ReplyArenaTest, ALargeReplyParsesIntoTheReservation) {
  const v1::QueryResultsResponse want = ColumnsReply(100'000);
  const std::string bytes = want.SerializeAsString();
  ReplyArena arena;
  // The reservation is made wherever the machine grants the mapping; where
  // it does not, the refusal is checked by the test below.
  ASSERT_EQ(arena.reserved(), MachineGrants(ReplyArena::kDefaultReserveBytes + (size_t{2} << 20)));
  if (!arena.reserved()) GTEST_SKIP() << "this machine refuses 1 GiB of address space";
  const v1::QueryResultsResponse& got = ParseOn(arena, bytes, want);
  EXPECT_EQ(got.columns().cell_id_size(), 100'000);
  EXPECT_EQ(got.columns().cell_id(99'999), 100'999);
  EXPECT_EQ(got.columns().failure(0), "out of memory");
  // Every list, the first and the last parsed, lies in the reserved block.
  EXPECT_TRUE(arena.Holds(&got));
  EXPECT_TRUE(arena.Holds(got.columns().cell_id().data()));
  EXPECT_TRUE(arena.Holds(got.columns().final_loss().data()));
  EXPECT_TRUE(arena.Holds(got.columns().heads(1).data()));
  EXPECT_FALSE(arena.Holds(bytes.data()));
}

TEST(ReplyArenaTest, ASmallReplyParsesAsOnAnyArena) {
  const v1::QueryResultsResponse want = ColumnsReply(3);
  ReplyArena arena;
  const v1::QueryResultsResponse& got = ParseOn(arena, want.SerializeAsString(), want);
  EXPECT_EQ(got.next_page_token(), "c99");
  EXPECT_EQ(got.columns().rank_size(), 3);
  // In the reservation where the machine granted it (see the test above).
  EXPECT_EQ(arena.Holds(got.columns().rank().data()), arena.reserved());
}

TEST(ReplyArenaTest, PastTheReservationTheListsGoOnInOrdinaryBlocks) {
  // 5 MiB reserved; the reply's lists need more than that.
  const v1::QueryResultsResponse want = ColumnsReply(100'000);
  ReplyArena arena(size_t{5} << 20);
  ASSERT_TRUE(arena.reserved());
  const v1::QueryResultsResponse& got = ParseOn(arena, want.SerializeAsString(), want);
  EXPECT_TRUE(arena.Holds(got.columns().cell_id().data()));
  EXPECT_FALSE(arena.Holds(got.columns().final_loss().data()));
  EXPECT_EQ(got.columns().final_loss(99'999), 99.999);
}

TEST(ReplyArenaTest, TooSmallAReservationIsAnOrdinaryArena) {
  const v1::QueryResultsResponse want = ColumnsReply(1'000);
  ReplyArena arena(size_t{1} << 20);
  EXPECT_FALSE(arena.reserved());
  const v1::QueryResultsResponse& got = ParseOn(arena, want.SerializeAsString(), want);
  EXPECT_FALSE(arena.Holds(got.columns().cell_id().data()));
  EXPECT_EQ(got.columns().cell_id_size(), 1'000);
}

TEST(ReplyArenaTest, WhereTheAddressSpaceIsLimitedTheReplyParsesOnAnOrdinaryArena) {
  // In a child process limited (RLIMIT_AS) to 256 MiB more address space
  // than it has: the 1 GiB reservation is refused, and a 100,000-row reply
  // still parses, in ordinary blocks.
  const v1::QueryResultsResponse want = ColumnsReply(100'000);
  const std::string bytes = want.SerializeAsString();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(ParseUnderAnAddressSpaceLimit(bytes, want)),
      ::testing::ExitedWithCode(0), "");
}

TEST(ReplyArenaTest, MoreThanTheAddressSpaceIsAnOrdinaryArena) {
  ReplyArena arena(size_t{1} << 50);
  EXPECT_FALSE(arena.reserved());
  auto* m = google::protobuf::Arena::CreateMessage<v1::QueryResultsResponse>(arena.get());
  m->mutable_columns()->add_cell_id(7);
  EXPECT_EQ(m->columns().cell_id(0), 7);
}

}  // namespace
}  // namespace ranksweep
