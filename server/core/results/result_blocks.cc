#include "server/core/results/result_blocks.h"

#include "common/status_macros.h"

namespace ranksweep::server {

namespace {

const std::string& MoveVersionSql() {
  static const std::string* const kSql = new std::string(
      "INSERT INTO result_versions (sweep_id, version) VALUES (:key, 1) "
      "ON CONFLICT (sweep_id) DO UPDATE SET version = version + 1");
  return *kSql;
}

}  // namespace

absl::StatusOr<int64_t> ReadResultsVersion(Connection& c, const std::string& sweep_id) {
  ASSIGN_OR_RETURN(Statement q,
                   c.Prepare("SELECT version FROM result_versions WHERE sweep_id = :id"));
  q.Bind(":id", sweep_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  const int64_t stored = row ? q.ColumnInt(0) : 0;
  return c.Owes(MoveVersionSql(), sweep_id) ? stored + 1 : stored;
}

absl::Status NoteResultsAdded(Connection& c, const std::string& sweep_id) {
  return c.OweBeforeCommit(MoveVersionSql(), sweep_id);
}

absl::StatusOr<int> StoreColumnBlocks(Connection& c, const std::string& sweep_id,
                                      int64_t version, const std::string& layout,
                                      const std::vector<ColumnBlock>& blocks) {
  ASSIGN_OR_RETURN(const int64_t now, ReadResultsVersion(c, sweep_id));
  if (now != version) return kResultsMoved;
  {
    ASSIGN_OR_RETURN(Statement del, c.Prepare("DELETE FROM result_blocks WHERE sweep_id = "
                                              ":sweep_id AND layout <> :layout"));
    del.Bind(":sweep_id", sweep_id).Bind(":layout", layout);
    RETURN_IF_ERROR(del.Run());
  }
  int stored = 0;
  for (const ColumnBlock& b : blocks) {
    // Only a range whose every cell has its result: a plain INSERT, which
    // deletes no block, can then never add a row inside it.
    ASSIGN_OR_RETURN(Statement cells, c.Prepare(
        "SELECT COUNT(*) FROM cells WHERE id >= :first AND id <= :last AND sweep_id = "
        ":sweep_id"));
    cells.Bind(":sweep_id", sweep_id).Bind(":first", b.first_cell_id).Bind(":last",
                                                                            b.last_cell_id);
    ASSIGN_OR_RETURN(bool counted, cells.Step());
    if (!counted || cells.ColumnInt(0) != b.rows) continue;
    ASSIGN_OR_RETURN(Statement del, c.Prepare(
        "DELETE FROM result_blocks WHERE sweep_id = :sweep_id AND last_cell_id >= :first AND "
        "first_cell_id <= :last"));
    del.Bind(":sweep_id", sweep_id).Bind(":first", b.first_cell_id).Bind(":last", b.last_cell_id);
    RETURN_IF_ERROR(del.Run());
    ASSIGN_OR_RETURN(Statement ins, c.Prepare(
        "INSERT INTO result_blocks (sweep_id, first_cell_id, last_cell_id, rows, layout, "
        "columns) VALUES (:sweep_id, :first, :last, :rows, :layout, :columns)"));
    ins.Bind(":sweep_id", sweep_id).Bind(":first", b.first_cell_id).Bind(":last", b.last_cell_id);
    ins.Bind(":rows", b.rows).Bind(":layout", layout);
    ins.BindBlob(":columns", b.bytes);
    RETURN_IF_ERROR(ins.Run());
    ++stored;
  }
  return stored;
}

}  // namespace ranksweep::server
