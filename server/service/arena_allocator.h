// A grpc::MessageAllocator that puts each call's request and response on one
// protobuf arena, freed in one step when the call ends.
//
// Why: a QueryResults reply is a tree of many small messages (a page of
// 10,000 rows holds 60,000 of them, plus their strings). Allocated one by one
// on the heap, building and freeing that tree cost more than serializing it;
// on an arena each allocation is a pointer bump and the whole reply is freed
// at once. The third round of docs/benchmarks/history.md has the before and
// after.
//
// Register it with the generated SetMessageAllocatorFor_<Method>(); it must
// outlive the service it is registered with.
//
// Thread-safety: AllocateMessages() may be called concurrently; each holder
// belongs to one call.
#ifndef RANKSWEEP_SERVER_SERVICE_ARENA_ALLOCATOR_H_
#define RANKSWEEP_SERVER_SERVICE_ARENA_ALLOCATOR_H_

#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

namespace ranksweep::server {

template <typename Request, typename Response>
class ArenaMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder(); }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    google::protobuf::Arena arena_;
  };
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_ARENA_ALLOCATOR_H_
