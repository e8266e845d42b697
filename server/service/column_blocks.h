// The service's half of column blocks (server/core/results/result_blocks.h
// stores them; proto/column_blocks.h joins them): a row sink that builds a
// columns reply from stored blocks and rows, and a thread that seals an
// ended sweep's rows into blocks in the background.
//
// Thread-safety: a ColumnReply belongs to one query. BlockSealer::Seal may
// be called from any thread.
#ifndef RANKSWEEP_SERVER_SERVICE_COLUMN_BLOCKS_H_
#define RANKSWEEP_SERVER_SERVICE_COLUMN_BLOCKS_H_

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <google/protobuf/arena.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "proto/column_blocks.h"
#include "proto/reply_arena.h"
#include "ranksweep/v1/ranksweep.pb.h"
#include "server/core/coordinator.h"
#include "server/service/translate.h"

namespace ranksweep::server {

// The rows of a columns reply (QueryResults with columns): into `columns`
// as rows come, until a stored block comes; from then on, rows become
// pieces of their own, and Finish joins the pieces and the blocks byte by
// byte. With `blocks` false it takes rows only, like ResultColumnsBuilder.
class ColumnReply final : public RowSink {
 public:
  ColumnReply(v1::ResultColumns* columns, google::protobuf::Arena* arena,
              const std::string& sweep_id, bool blocks);
  ~ColumnReply() override;
  std::string_view BlockLayout() const override;
  void Expect(int64_t at_most) override;
  void Add(const ResultRow& row) override;
  void AddBlock(std::string_view bytes, int64_t rows) override;
  // After the query. False when no block came: `columns` holds the reply's
  // columns, finished. True when blocks came: `columns` is cleared and
  // `*joined` is the serialized ResultColumns of every row, in parts that
  // refer to the blocks' bytes, which live on `arena` (or in this reply
  // without one).
  absl::StatusOr<bool> Finish(JoinedColumns* joined);
  // The rows that came as rows, not in blocks.
  int64_t rows_read() const { return rows_read_; }

 private:
  void StartPiece();
  void EndPiece();

  v1::ResultColumns* const columns_;
  google::protobuf::Arena* const arena_;
  const std::string sweep_id_;
  const bool blocks_;
  std::unique_ptr<ResultColumnsBuilder> piece_;
  v1::ResultColumns* piece_columns_ = nullptr;
  int64_t piece_rows_ = 0;
  // Serialized, in order: on the arena, or in `owned_` without one.
  std::vector<std::string_view> pieces_;
  std::deque<std::string> owned_;
  // Room for `bytes` bytes that last as long as the reply.
  char* Room(size_t bytes);
  bool any_block_ = false;
  int64_t rows_read_ = 0;
};

// A QueryResults reply whose columns may be joined from blocks: its arena,
// and the joined columns, whose parts may lie on it.
struct JoinedReply {
  ReplyArena arena;
  JoinedColumns columns;
};

class BlockSealer;

// A columns query (QueryResults with `columns`, ungrouped) into
// `response`, on `response`'s arena: with `sealer`, a query of every row
// (one page or all) joins the sweep's stored blocks into `*joined` and
// leaves the response's columns empty, and one that read least_rows() rows
// or more outside them has the sweep sealed behind it. A block that cannot be joined is logged and
// the rows are read instead.
absl::StatusOr<QueryOutcome> QueryColumns(Coordinator& coordinator, const ResultQuery& query,
                                          v1::QueryResultsResponse* response,
                                          JoinedColumns* joined, BlockSealer* sealer);

// The reply's bytes: `response` (without columns) and then `held`'s joined
// columns as its `columns` field, as gRPC slices that refer to them and
// keep `held` until gRPC is done; or as one string, to keep.
absl::Status JoinedReplyBytes(const v1::QueryResultsResponse& response,
                              const std::shared_ptr<JoinedReply>& held, grpc::ByteBuffer* bytes);
absl::StatusOr<std::string> JoinedReplyString(const v1::QueryResultsResponse& response,
                                              const JoinedReply& held);

// Seals the finished rows of ended sweeps into column blocks of
// `block_rows` rows, on a thread of its own: Seal(sweep) queues the sweep
// (once, however often it is asked); the thread reads the rows no block
// holds yet, cuts them into blocks (a stretch between two stored blocks,
// or the last, becomes a block of its own when it has a sixteenth of
// block_rows or more) and stores them a few at a time, each write only if
// the sweep's results have not moved since the read. A sweep that has not
// ended is left alone: its rows still change.
class BlockSealer {
 public:
  // `coordinator` is not owned and must outlive this.
  BlockSealer(Coordinator* coordinator, int64_t block_rows);
  // Finishes the sweep being sealed, drops the others queued.
  ~BlockSealer();
  void Seal(const std::string& sweep_id);
  // Seals one sweep now, on the calling thread: the blocks stored.
  absl::StatusOr<int> SealNow(const std::string& sweep_id);
  // The fewest rows a block is sealed with: a sixteenth of block_rows.
  int64_t least_rows() const { return std::max<int64_t>(1, block_rows_ / 16); }

 private:
  void Run();

  Coordinator* const coordinator_;
  const int64_t block_rows_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_COLUMN_BLOCKS_H_
