#include "server/core/results/row_reads.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/sql_columns.h"

namespace ranksweep::server::result_reads {

namespace {

const std::string kNoLabel;

constexpr const char* kQueryColumnNames[] = {
    "c.id", "c.head_index", "c.rank", "c.seed", "c.state", "c.attempt", "c.lease_id",
    "c.worker_id", "r.lease_id", "r.attempt", "r.worker_id", "r.worker_build_id",
    "r.worker_torch_version", "r.worker_cuda_version", "r.failure", "r.finished_ms",
    "r.cell_id IS NOT NULL", "c.recipe"};

}  // namespace

// The select list of a query row, in QueryCol order.
const std::string& QueryColumns() {
  static const std::string* columns =
      new std::string(absl::StrCat(ColumnList<QueryCol::kResultFirst>(kQueryColumnNames), ", ",
                                   ResultColumns(), ", r.cached_from"));
  return *columns;
}

const std::string& LabelOf(const std::vector<std::string>& labels, int head_index) {
  return head_index < static_cast<int>(labels.size()) ? labels[head_index] : kNoLabel;
}

ResultRow QueryRow(const Statement& q, const std::string& sweep_id,
                   const std::vector<std::string>& labels) {
  ResultRow row;
  row.sweep_id = sweep_id;
  using C = QueryCol;
  row.cell_id = q.ColumnInt(C::kCellId);
  row.head_index = static_cast<int>(q.ColumnInt(C::kHeadIndex));
  row.head = LabelOf(labels, row.head_index);
  row.rank = static_cast<int>(q.ColumnInt(C::kRank));
  row.recipe = static_cast<int32_t>(q.ColumnInt(C::kRecipe));
  row.seed = SeedFromDb(q.ColumnInt(C::kSeed));
  row.state = static_cast<CellState>(q.ColumnInt(C::kState));
  if (q.ColumnInt(C::kHasResult) != 0) {
    row.lease_id = q.ColumnInt(C::kLeaseId);
    row.attempt = static_cast<int>(q.ColumnInt(C::kAttempt));
    row.worker_id = q.ColumnText(C::kWorkerId);
    row.worker_version = {q.ColumnText(C::kBuildId), q.ColumnText(C::kTorchVersion),
                          q.ColumnText(C::kCudaVersion)};
    row.failure = q.ColumnText(C::kFailure);
    row.finished_unix_ms = q.ColumnInt(C::kFinishedMs);
    if (row.state == CellState::kDone) {
      SeedResult result;
      ReadResultColumns(q, C::kResultFirst, &result);
      result.seed = row.seed;
      row.result = std::move(result);
      row.cached_from_cell_id = q.ColumnInt(C::kCachedFrom);
    }
  } else {
    row.attempt = static_cast<int>(q.ColumnInt(C::kCellAttempt));
    row.lease_id = q.ColumnInt(C::kCellLeaseId);
    row.worker_id = q.ColumnText(C::kCellWorkerId);
  }
  return row;
}

absl::Status ReadFinishedRows(Statement& q, FinishedRows& rows) {
  while (true) {
    ASSIGN_OR_RETURN(bool more, q.Step());
    if (!more || !rows.Take(q.ColumnInt(PackedCol::kCellId), q.ColumnBlob(PackedCol::kPacked))) {
      return rows.status();
    }
  }
}

absl::Status ReadFinishedRowsOnTwoThreads(Statement& q, FinishedRows& rows) {
  struct Chunk {
    std::vector<int64_t> cell_ids;
    std::vector<size_t> ends;  // of each packed row in `bytes`
    std::string bytes;
  };
  constexpr size_t kChunkRows = 2048, kQueuedChunks = 4;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Chunk> queue;
  bool read_all = false, enough = false;  // guarded by mu
  std::thread unpacker([&] {
    while (true) {
      Chunk chunk;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return !queue.empty() || read_all; });
        if (queue.empty()) return;
        chunk = std::move(queue.front());
        queue.pop_front();
      }
      cv.notify_all();
      size_t begin = 0;
      for (size_t i = 0; i < chunk.cell_ids.size(); ++i) {
        const std::string_view packed(chunk.bytes.data() + begin, chunk.ends[i] - begin);
        begin = chunk.ends[i];
        if (!rows.Take(chunk.cell_ids[i], packed)) {
          {
            std::lock_guard<std::mutex> lock(mu);
            enough = true;
          }
          cv.notify_all();
          return;
        }
      }
    }
  });
  absl::Status read;
  Chunk chunk;
  auto hand_over = [&]() -> bool {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return queue.size() < kQueuedChunks || enough; });
    if (enough) return false;
    queue.push_back(std::move(chunk));
    chunk = Chunk();
    lock.unlock();
    cv.notify_all();
    return true;
  };
  while (true) {
    absl::StatusOr<bool> more = q.Step();
    if (!more.ok()) {
      read = more.status();
      break;
    }
    if (!*more) {
      if (!chunk.cell_ids.empty()) hand_over();
      break;
    }
    const std::string_view packed = q.ColumnBlob(PackedCol::kPacked);
    chunk.cell_ids.push_back(q.ColumnInt(PackedCol::kCellId));
    chunk.bytes.append(packed.data(), packed.size());
    chunk.ends.push_back(chunk.bytes.size());
    if (chunk.cell_ids.size() == kChunkRows && !hand_over()) break;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    read_all = true;
  }
  cv.notify_all();
  unpacker.join();
  RETURN_IF_ERROR(read);
  return rows.status();
}

}  // namespace ranksweep::server::result_reads
