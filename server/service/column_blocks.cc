#include "server/service/column_blocks.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <grpcpp/support/slice.h>
#include <google/protobuf/io/coded_stream.h>

#include "common/status_macros.h"
#include "proto/column_blocks.h"
#include "server/core/log.h"

namespace ranksweep::server {

// ---------------------------------------------------------------- ColumnReply

ColumnReply::ColumnReply(v1::ResultColumns* columns, google::protobuf::Arena* arena,
                         const std::string& sweep_id, bool blocks)
    : columns_(columns), arena_(arena), sweep_id_(sweep_id), blocks_(blocks) {
  piece_ = std::make_unique<ResultColumnsBuilder>(columns_, sweep_id_);
  piece_columns_ = columns_;
}

ColumnReply::~ColumnReply() = default;

std::string_view ColumnReply::BlockLayout() const {
  return blocks_ ? std::string_view(ColumnBlockLayout()) : std::string_view();
}

void ColumnReply::StartPiece() {
  if (piece_ != nullptr) return;
  // Rows after a block: a piece of their own, joined with the blocks.
  piece_columns_ = google::protobuf::Arena::CreateMessage<v1::ResultColumns>(arena_);
  piece_ = std::make_unique<ResultColumnsBuilder>(piece_columns_, sweep_id_);
}

void ColumnReply::Expect(int64_t at_most) {
  StartPiece();
  piece_->Expect(at_most);
}

void ColumnReply::Add(const ResultRow& row) {
  StartPiece();
  piece_->Add(row);
  ++piece_rows_;
  ++rows_read_;
}

char* ColumnReply::Room(size_t bytes) {
  if (arena_ != nullptr) return google::protobuf::Arena::CreateArray<char>(arena_, bytes);
  owned_.emplace_back(bytes, '\0');
  return owned_.back().data();
}

void ColumnReply::EndPiece() {
  if (piece_ == nullptr) return;
  piece_->Finish();
  if (piece_rows_ > 0) {
    const size_t size = piece_columns_->ByteSizeLong();
    char* at = Room(size);
    piece_columns_->SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(at));
    pieces_.emplace_back(at, size);
  }
  piece_columns_->Clear();
  piece_.reset();
  piece_rows_ = 0;
}

void ColumnReply::AddBlock(std::string_view bytes, int64_t rows) {
  (void)rows;
  EndPiece();
  // Copied out of SQLite, onto the reply's arena (whose huge pages take
  // few faults), where the reply refers to it.
  char* at = Room(bytes.size());
  std::memcpy(at, bytes.data(), bytes.size());
  pieces_.emplace_back(at, bytes.size());
  any_block_ = true;
}

absl::StatusOr<bool> ColumnReply::Finish(JoinedColumns* joined) {
  if (!any_block_) {
    if (piece_ != nullptr) piece_->Finish();
    return false;
  }
  EndPiece();
  columns_->Clear();
  RETURN_IF_ERROR(MergeColumns(pieces_, joined));
  return true;
}

absl::StatusOr<QueryOutcome> QueryColumns(Coordinator& coordinator, const ResultQuery& query,
                                          v1::QueryResultsResponse* response,
                                          JoinedColumns* joined, BlockSealer* sealer) {
  ColumnReply columns(response->mutable_columns(), response->GetArena(), query.sweep_id,
                      sealer != nullptr);
  absl::StatusOr<QueryOutcome> out = coordinator.Query(query, columns);
  if (!out.ok()) return out;
  absl::StatusOr<bool> from_blocks = columns.Finish(joined);
  if (!from_blocks.ok()) {
    // A stored block that cannot be joined (it should never happen: this
    // build wrote it) costs a read of the rows, not the reply.
    LogEvent("column blocks of sweep %s not joined, rows read instead: %s", query.sweep_id,
             from_blocks.status().ToString());
    joined->Clear();
    response->clear_columns();
    ColumnReply rows_only(response->mutable_columns(), response->GetArena(), query.sweep_id,
                          false);
    out = coordinator.Query(query, rows_only);
    if (out.ok()) RETURN_IF_ERROR(rows_only.Finish(joined).status());
    return out;
  }
  if (*from_blocks) response->clear_columns();
  if (sealer != nullptr && out->results_version > 0 &&
      columns.rows_read() >= sealer->least_rows()) {
    // Rows of the sweep read outside its blocks, enough for one: sealed
    // behind it (if it has ended).
    sealer->Seal(query.sweep_id);
  }
  return out;
}

namespace {

// The reply's fields but `columns`, then the tag and length of `columns`
// (numbered above every other field a columns reply has, so in the order
// protobuf writes them).
absl::StatusOr<std::string> ReplyHead(const v1::QueryResultsResponse& response,
                                      size_t columns_bytes) {
  std::string head;
  if (!response.SerializeToString(&head)) {
    return absl::InternalError("the reply could not be encoded");
  }
  uint8_t tag[1 + 10];  // the tag, and the length as a varint
  tag[0] = v1::QueryResultsResponse::kColumnsFieldNumber << 3 | 2;  // length-delimited
  uint8_t* end =
      google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(columns_bytes, tag + 1);
  head.append(reinterpret_cast<const char*>(tag), static_cast<size_t>(end - tag));
  return head;
}

}  // namespace

absl::Status JoinedReplyBytes(const v1::QueryResultsResponse& response,
                              const std::shared_ptr<JoinedReply>& held, grpc::ByteBuffer* bytes) {
  ASSIGN_OR_RETURN(std::string head, ReplyHead(response, held->columns.size()));
  std::vector<grpc::Slice> slices;
  slices.reserve(held->columns.parts().size() + 1);
  slices.emplace_back(head);
  // A slice per part, sent where it lies.
  for (std::string_view part : held->columns.parts()) {
    auto* keep = new std::shared_ptr<JoinedReply>(held);
    slices.emplace_back(const_cast<char*>(part.data()), part.size(),
                        [](void* p) { delete static_cast<std::shared_ptr<JoinedReply>*>(p); },
                        keep);
  }
  *bytes = grpc::ByteBuffer(slices.data(), slices.size());
  return absl::OkStatus();
}

absl::StatusOr<std::string> JoinedReplyString(const v1::QueryResultsResponse& response,
                                              const JoinedReply& held) {
  ASSIGN_OR_RETURN(std::string bytes, ReplyHead(response, held.columns.size()));
  held.columns.AppendTo(&bytes);
  return bytes;
}

// ---------------------------------------------------------------- BlockSealer

namespace {

// Cuts the rows a query hands on into blocks of `block_rows`: a stretch
// ends at each stored block, and its last, shorter block is kept when it
// has at least `least_rows` rows.
class BlockCutter final : public RowSink {
 public:
  BlockCutter(const std::string& sweep_id, int64_t block_rows, int64_t least_rows)
      : sweep_id_(sweep_id), block_rows_(block_rows), least_rows_(least_rows) {}
  std::string_view BlockLayout() const override { return ColumnBlockLayout(); }
  void Add(const ResultRow& row) override {
    if (builder_ == nullptr) {
      columns_.Clear();
      builder_ = std::make_unique<ResultColumnsBuilder>(&columns_, sweep_id_);
      first_ = row.cell_id;
      rows_ = 0;
    }
    builder_->Add(row);
    last_ = row.cell_id;
    if (++rows_ == block_rows_) Cut();
  }
  void AddBlock(std::string_view bytes, int64_t rows) override {
    (void)bytes;
    (void)rows;
    End();
  }
  // Ends the stretch: its last block is kept if long enough.
  void End() {
    if (builder_ != nullptr && rows_ >= least_rows_) {
      Cut();
    } else {
      builder_.reset();
    }
  }
  std::vector<ColumnBlock>& blocks() { return blocks_; }

 private:
  void Cut() {
    builder_->Finish();
    ColumnBlock b;
    b.first_cell_id = first_;
    b.last_cell_id = last_;
    b.rows = rows_;
    b.bytes = columns_.SerializeAsString();
    blocks_.push_back(std::move(b));
    builder_.reset();
  }

  const std::string sweep_id_;
  const int64_t block_rows_, least_rows_;
  v1::ResultColumns columns_;
  std::unique_ptr<ResultColumnsBuilder> builder_;
  int64_t first_ = 0, last_ = 0, rows_ = 0;
  std::vector<ColumnBlock> blocks_;
};

// Blocks stored per write: a sweep's blocks go in several short
// transactions, not one long one that holds up every other write.
constexpr size_t kBlocksPerWrite = 4;

}  // namespace

BlockSealer::BlockSealer(Coordinator* coordinator, int64_t block_rows)
    : coordinator_(coordinator), block_rows_(block_rows), thread_([this] { Run(); }) {}

BlockSealer::~BlockSealer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BlockSealer::Seal(const std::string& sweep_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !queued_.insert(sweep_id).second) return;
    queue_.push_back(sweep_id);
  }
  cv_.notify_all();
}

void BlockSealer::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const std::string sweep_id = std::move(queue_.front());
    queue_.pop_front();
    queued_.erase(sweep_id);
    lock.unlock();
    absl::StatusOr<int> stored = SealNow(sweep_id);
    if (!stored.ok()) {
      LogEvent("column blocks of sweep %s not sealed: %s", sweep_id,
               stored.status().ToString());
    }
    lock.lock();
  }
}

absl::StatusOr<int> BlockSealer::SealNow(const std::string& sweep_id) {
  ASSIGN_OR_RETURN(const SweepInfo sweep, coordinator_->GetSweep(sweep_id));
  if (sweep.state == SweepState::kRunning) return 0;
  BlockCutter cutter(sweep_id, block_rows_, least_rows());
  ResultQuery query;
  query.sweep_id = sweep_id;
  ASSIGN_OR_RETURN(const QueryOutcome out, coordinator_->Query(query, cutter));
  cutter.End();
  std::vector<ColumnBlock>& blocks = cutter.blocks();
  int stored = 0;
  for (size_t at = 0; at < blocks.size(); at += kBlocksPerWrite) {
    std::vector<ColumnBlock> some(
        std::make_move_iterator(blocks.begin() + at),
        std::make_move_iterator(blocks.begin() + std::min(blocks.size(), at + kBlocksPerWrite)));
    absl::StatusOr<int> n = coordinator_->StoreColumnBlocks(sweep_id, out.results_version,
                                                            ColumnBlockLayout(), some);
    // Aborted: the sweep's results moved since the read; a later end or
    // query seals it again.
    if (absl::IsAborted(n.status())) break;
    if (!n.ok()) return n.status();
    stored += *n;
  }
  return stored;
}

}  // namespace ranksweep::server
