#include "server/service/arena_allocator.h"

#include <gtest/gtest.h>

#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep::server {
namespace {

using Allocator = ArenaMessageAllocator<v1::QueryResultsRequest, v1::QueryResultsResponse>;

TEST(ArenaMessageAllocatorTest, RequestAndResponseShareOneArena) {
  Allocator allocator;
  grpc::MessageHolder<v1::QueryResultsRequest, v1::QueryResultsResponse>* holder =
      allocator.AllocateMessages();
  ASSERT_NE(holder->request(), nullptr);
  ASSERT_NE(holder->response(), nullptr);
  google::protobuf::Arena* arena = holder->response()->GetArena();
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(holder->request()->GetArena(), arena);
  // Rows added to the reply land on the same arena.
  v1::ResultRow* row = holder->response()->add_rows();
  row->set_head("kernel/elu1");
  row->mutable_result()->mutable_train()->set_error(0.25);
  EXPECT_EQ(row->GetArena(), arena);
  EXPECT_EQ(holder->response()->rows(0).result().train().error(), 0.25);
  holder->Release();
}

TEST(ArenaMessageAllocatorTest, EachCallGetsItsOwnArena) {
  Allocator allocator;
  auto* a = allocator.AllocateMessages();
  auto* b = allocator.AllocateMessages();
  EXPECT_NE(a->response()->GetArena(), b->response()->GetArena());
  a->Release();
  b->Release();
}

}  // namespace
}  // namespace ranksweep::server
