// Column blocks: the rows of a sweep kept as encoded ResultColumns messages
// (docs/ARCHITECTURE.md, "Column blocks"), joined into one reply byte by
// byte instead of being unpacked and encoded again.
//
// A block is exactly what ResultColumnsEncoder writes (Finish included) for
// its rows alone, serialized. MergeColumns joins the blocks of consecutive
// row ranges into the bytes that encoding all their rows at once would
// give: the packed lists are concatenated, the indexes into the tables
// (workers, versions, devices, facts) renumbered into one table, the row
// numbers (failure_row, missing_rows) moved by the rows before, and a list
// one block left empty (every value the empty one) filled with that value
// where another block has values. column_blocks_test.cc checks the bytes
// against one encoding of every row.
#ifndef RANKSWEEP_PROTO_COLUMN_BLOCKS_H_
#define RANKSWEEP_PROTO_COLUMN_BLOCKS_H_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace ranksweep {

// The layout of the blocks this build writes and can join: a fingerprint
// (16 hex digits) of the built-in and optional metric tables the encoder
// writes into every ResultColumns, and of the block format. Blocks of
// another layout (written by a build with another metric table) are not
// joined; they are read again from their rows.
const std::string& ColumnBlockLayout();

// The bytes MergeColumns joins, as parts in order: views into the blocks
// it joined (the lists it copies as they are, which must outlive this) and
// bytes of its own, so that a reply can be sent without copying the bulk.
class JoinedColumns {
 public:
  JoinedColumns() = default;
  JoinedColumns(const JoinedColumns&) = delete;
  JoinedColumns& operator=(const JoinedColumns&) = delete;
  absl::Span<const std::string_view> parts() const { return parts_; }
  size_t size() const;
  void AppendTo(std::string* out) const;
  void Clear() {
    parts_.clear();
    owned_.clear();
  }

 private:
  friend class JoinedWriter;
  std::deque<std::string> owned_;  // the parts' own bytes; never moved
  std::vector<std::string_view> parts_;
};

// Joins the serialized ResultColumns of every row of `blocks`, in order:
// each a serialized ResultColumns of the same sweep and layout, into
// `out` (empty). InvalidArgument naming the block and the field when a
// block is not one (a wire type or a list length that ResultColumnsEncoder
// never writes); `out` is then empty.
absl::Status MergeColumns(absl::Span<const std::string_view> blocks, JoinedColumns* out);

}  // namespace ranksweep

#endif  // RANKSWEEP_PROTO_COLUMN_BLOCKS_H_
