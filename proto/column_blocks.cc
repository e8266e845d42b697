#include "proto/column_blocks.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/spec/result_metrics.h"
#include "proto/columns.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep {
namespace {

using C = v1::ResultColumns;

// The highest field number of ResultColumns, and of MetricColumn.
constexpr int kLastField = C::kBuiltInTableFieldNumber;
constexpr int kLengthDelimited = 2;

// Raised when the block format changes, so that older blocks are read again
// from their rows instead of joined.
constexpr int kBlockFormat = 1;

bool ReadVarint(const char*& p, const char* end, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const uint8_t b = static_cast<uint8_t>(*p++);
    result |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

void PutVarint(uint64_t v, std::string* out) {
  char buf[10];
  int n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}

void PutTag(int field, std::string* out) {
  PutVarint(static_cast<uint64_t>(field) << 3 | kLengthDelimited, out);
}

// Writes `v` as a varint at `p`; returns the end.
char* WriteVarint(uint64_t v, char* p) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

// The values in a packed list of varints: the bytes that end one, eight
// bytes at a time.
int64_t CountVarints(std::string_view payload) {
  const char* p = payload.data();
  const char* end = p + payload.size();
  int64_t continued = 0;
  for (; end - p >= 8; p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    // Each byte's top bit moved to its lowest, then the eight summed by a
    // multiply (no popcount instruction is assumed).
    const uint64_t tops = (word & 0x8080808080808080ull) >> 7;
    continued += static_cast<int64_t>((tops * 0x0101010101010101ull) >> 56);
  }
  int64_t n = static_cast<int64_t>(payload.size()) - continued;
  for (; p < end; ++p) n -= (static_cast<uint8_t>(*p) & 0x80) != 0;
  return n;
}

// The length-delimited fields of one message, by field number, in order.
using Fields = std::array<std::vector<std::string_view>, kLastField + 1>;

absl::Status Split(std::string_view message, int last_field, Fields* fields, const char* what) {
  const char* p = message.data();
  const char* end = p + message.size();
  while (p < end) {
    uint64_t tag = 0, length = 0;
    if (!ReadVarint(p, end, &tag)) return absl::InvalidArgumentError(absl::StrCat(what, ": a tag is cut short"));
    const int field = static_cast<int>(tag >> 3);
    if ((tag & 7) != kLengthDelimited || field < 1 || field > last_field) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": field ", field, " with wire type ",
                                                     tag & 7, " is not one a block holds"));
    }
    if (!ReadVarint(p, end, &length) || length > static_cast<uint64_t>(end - p)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": field ", field, " runs past the end"));
    }
    (*fields)[field].emplace_back(p, length);
    p += length;
  }
  return absl::OkStatus();
}

size_t TotalSize(const std::vector<std::string_view>& parts) {
  size_t n = 0;
  for (std::string_view s : parts) n += s.size();
  return n;
}

// One block, split.
struct Block {
  Fields fields;
  int64_t rows = 0;
  int64_t first_row = 0;  // the rows of the blocks before it
};

// How a packed list of the reply is joined.
enum class Join {
  kConcat,     // every block holds a value per row
  kElidable,   // empty in a block whose every value is the empty one
  kRenumber,   // an index into a table, renumbered
  kRowNumber,  // row numbers, moved by the rows before
};

struct ListRule {
  int field;
  Join join;
  bool fixed64 = false;  // doubles; else varints
  double empty = 0;      // kElidable: the empty value
  int table = 0;         // kRenumber: the table's field
};

// Every packed list of ResultColumns and how it joins; the built-in
// metrics' come from their table (common/spec/result_metrics.h).
const std::vector<ListRule>& ListRules() {
  static const auto* rules = [] {
    auto* r = new std::vector<ListRule>{
        {C::kCellIdFieldNumber, Join::kConcat},
        {C::kHeadIndexFieldNumber, Join::kConcat},
        {C::kRankFieldNumber, Join::kConcat},
        {C::kSeedFieldNumber, Join::kConcat},
        {C::kStateFieldNumber, Join::kConcat},
        {C::kAttemptFieldNumber, Join::kConcat},
        {C::kLeaseIdFieldNumber, Join::kConcat},
        {C::kFinishedUnixMsFieldNumber, Join::kConcat},
        {C::kCachedFromCellIdFieldNumber, Join::kConcat},
        {C::kWorkerFieldNumber, Join::kRenumber, false, 0, C::kWorkersFieldNumber},
        {C::kWorkerVersionFieldNumber, Join::kRenumber, false, 0, C::kWorkerVersionsFieldNumber},
        {C::kFailureRowFieldNumber, Join::kRowNumber},
        {C::kDeviceFieldNumber, Join::kRenumber, false, 0, C::kDevicesFieldNumber},
        {C::kFactsFieldNumber, Join::kRenumber, false, 0, C::kFactsTableFieldNumber},
        {C::kRecipeFieldNumber, Join::kElidable},
    };
    for (const BuiltInMetric& m : kBuiltInMetrics) {
      const google::protobuf::FieldDescriptor* f = C::descriptor()->FindFieldByName(m.name);
      r->push_back({f->number(), Join::kElidable, !m.integer, BuiltInDefault(m)});
    }
    return r;
  }();
  return *rules;
}

// The bytes `count` empty values of an elided list take.
size_t EmptySize(const ListRule& rule, int64_t count) {
  if (rule.fixed64) return static_cast<size_t>(8 * count);
  std::string one;
  PutVarint(static_cast<uint64_t>(static_cast<int64_t>(rule.empty)), &one);
  return one.size() * static_cast<size_t>(count);
}

// The bytes of `count` empty values of an elided list.
void PutEmpty(const ListRule& rule, int64_t count, std::string* out) {
  std::string one;
  if (rule.fixed64) {
    one.resize(8);
    std::memcpy(one.data(), &rule.empty, 8);
  } else {
    PutVarint(static_cast<uint64_t>(static_cast<int64_t>(rule.empty)), &one);
  }
  if (one.size() == 1) {
    out->append(static_cast<size_t>(count), one[0]);
    return;
  }
  for (int64_t i = 0; i < count; ++i) out->append(one);
}

// A table of the reply (workers, versions, devices, facts): each block's
// entries in order, those not yet in it added; `index[b][i]` is block b's
// entry i's place in the joined table.
struct JoinedTable {
  std::vector<std::string_view> entries;
  std::vector<std::vector<uint64_t>> index;
};

JoinedTable JoinTable(const std::vector<Block>& blocks, int field) {
  JoinedTable t;
  absl::flat_hash_map<std::string_view, uint64_t> seen;
  t.index.resize(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (std::string_view entry : blocks[b].fields[field]) {
      auto [it, added] = seen.emplace(entry, t.entries.size());
      if (added) t.entries.push_back(entry);
      t.index[b].push_back(it->second);
    }
  }
  return t;
}

std::string BlockName(size_t b) { return absl::StrCat("block ", b); }

}  // namespace

// Writes the joined bytes: small writes into a buffer of its own, the
// long lists copied as they are referred to where they lie.
class JoinedWriter {
 public:
  explicit JoinedWriter(JoinedColumns* out) : out_(out) {}
  // The buffer small writes go to.
  std::string* buf() { return &buf_; }
  void Refer(std::string_view s) {
    if (s.size() < kLeastReferred) {
      buf_.append(s);
      return;
    }
    Close();
    out_->parts_.push_back(s);
  }
  // Ends the buffer as a part; later writes go to a new one.
  void Close() {
    if (buf_.empty()) return;
    out_->owned_.push_back(std::move(buf_));
    out_->parts_.push_back(out_->owned_.back());
    buf_ = std::string();
  }

 private:
  // Shorter lists are copied: a part costs more than their bytes.
  static constexpr size_t kLeastReferred = 1024;
  JoinedColumns* out_;
  std::string buf_;
};

namespace {

// Writes list `rule` of every block, joined: a concatenated list through
// `writer`, which refers to the blocks' lists where they lie; a renumbered
// one into `payload`.
absl::Status JoinList(const std::vector<Block>& blocks, const ListRule& rule,
                      const JoinedTable* table, std::string* payload, JoinedWriter* writer) {
  for (size_t b = 0; b < blocks.size(); ++b) {
    const Block& block = blocks[b];
    const std::vector<std::string_view>& parts = block.fields[rule.field];
    // For errors only: made when one is returned.
    auto where = [&] { return absl::StrCat(BlockName(b), ", field ", rule.field); };
    switch (rule.join) {
      case Join::kConcat:
      case Join::kElidable: {
        if (parts.empty() && rule.join == Join::kElidable) {
          PutEmpty(rule, block.rows, writer->buf());
          continue;
        }
        int64_t values = 0;
        for (std::string_view s : parts) {
          values += rule.fixed64 ? static_cast<int64_t>(s.size() / 8) : CountVarints(s);
          if (rule.fixed64 && s.size() % 8 != 0) {
            return absl::InvalidArgumentError(absl::StrCat(where(), ": not whole doubles"));
          }
        }
        if (values != block.rows) {
          return absl::InvalidArgumentError(
              absl::StrCat(where(), ": ", values, " values for ", block.rows, " rows"));
        }
        for (std::string_view s : parts) writer->Refer(s);
        break;
      }
      case Join::kRenumber:
      case Join::kRowNumber: {
        // Written in place: room for the longest varint per value first.
        const size_t at = payload->size();
        payload->resize(at + 10 * TotalSize(parts));
        char* w = payload->data() + at;
        const uint64_t first_row = static_cast<uint64_t>(block.first_row);
        const std::vector<uint64_t>* index =
            rule.join == Join::kRenumber ? &table->index[b] : nullptr;
        int64_t values = 0;
        for (std::string_view s : parts) {
          const char* p = s.data();
          const char* end = p + s.size();
          while (p < end) {
            uint64_t v = static_cast<uint8_t>(*p);
            if (v < 0x80) {
              ++p;
            } else if (!ReadVarint(p, end, &v)) {
              return absl::InvalidArgumentError(absl::StrCat(where(), ": a value is cut short"));
            }
            if (index == nullptr) {
              if (v >= static_cast<uint64_t>(block.rows)) {
                return absl::InvalidArgumentError(
                    absl::StrCat(where(), ": row ", v, " of ", block.rows));
              }
              w = WriteVarint(v + first_row, w);
            } else {
              if (v >= index->size()) {
                return absl::InvalidArgumentError(absl::StrCat(where(), ": index ", v, " of ",
                                                               index->size(), " entries"));
              }
              w = WriteVarint((*index)[v], w);
            }
            ++values;
          }
        }
        payload->resize(static_cast<size_t>(w - payload->data()));
        if (rule.join == Join::kRenumber && values != block.rows) {
          return absl::InvalidArgumentError(
              absl::StrCat(where(), ": ", values, " values for ", block.rows, " rows"));
        }
        break;
      }
    }
  }
  return absl::OkStatus();
}

// One optional metric's column in one block (MetricColumn).
struct MetricPart {
  std::string_view values, missing_rows;
};

// ResultColumns.metrics, joined: a column per metric some block has, in the
// metric table's order.
absl::Status JoinMetrics(const std::vector<Block>& blocks, std::string* out) {
  const absl::Span<const ResultMetric> metrics = ResultMetrics();
  // parts[k][b]: metric k's column in block b, if it has one.
  std::vector<std::vector<const MetricPart*>> parts(metrics.size(),
                                                    std::vector<const MetricPart*>(blocks.size()));
  std::vector<std::vector<MetricPart>> owned(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    const std::vector<std::string_view>& columns = blocks[b].fields[C::kMetricsFieldNumber];
    owned[b].reserve(columns.size());
    for (std::string_view column : columns) {
      Fields f;
      const std::string where = absl::StrCat(BlockName(b), ", a metric column");
      if (absl::Status s = Split(column, v1::MetricColumn::kMissingRowsFieldNumber, &f,
                                 where.c_str());
          !s.ok()) {
        return s;
      }
      if (f[v1::MetricColumn::kNameFieldNumber].size() != 1 ||
          f[v1::MetricColumn::kValuesFieldNumber].size() != 1 ||
          f[v1::MetricColumn::kMissingRowsFieldNumber].size() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(where, " is not one the encoder writes"));
      }
      const std::string_view name = f[v1::MetricColumn::kNameFieldNumber][0];
      const auto k = std::find_if(metrics.begin(), metrics.end(),
                                  [&](const ResultMetric& m) { return name == m.name; });
      if (k == metrics.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": metric \"", std::string(name), "\" is not in this build's table"));
      }
      MetricPart part;
      part.values = f[v1::MetricColumn::kValuesFieldNumber][0];
      if (!f[v1::MetricColumn::kMissingRowsFieldNumber].empty()) {
        part.missing_rows = f[v1::MetricColumn::kMissingRowsFieldNumber][0];
      }
      if (static_cast<int64_t>(part.values.size()) != 8 * blocks[b].rows) {
        return absl::InvalidArgumentError(absl::StrCat(where, " (", std::string(name), "): ",
                                                       part.values.size() / 8, " values for ",
                                                       blocks[b].rows, " rows"));
      }
      owned[b].push_back(part);
      parts[static_cast<size_t>(k - metrics.begin())][b] = &owned[b].back();
    }
  }
  std::string column, list;
  for (size_t k = 0; k < metrics.size(); ++k) {
    if (std::none_of(parts[k].begin(), parts[k].end(),
                     [](const MetricPart* p) { return p != nullptr; })) {
      continue;
    }
    column.clear();
    PutTag(v1::MetricColumn::kNameFieldNumber, &column);
    PutVarint(std::strlen(metrics[k].name), &column);
    column.append(metrics[k].name);
    list.clear();
    for (size_t b = 0; b < blocks.size(); ++b) {
      if (parts[k][b] != nullptr) {
        list.append(parts[k][b]->values);
      } else {
        list.append(static_cast<size_t>(8 * blocks[b].rows), '\0');  // 0.0, missing
      }
    }
    PutTag(v1::MetricColumn::kValuesFieldNumber, &column);
    PutVarint(list.size(), &column);
    column.append(list);
    list.clear();
    for (size_t b = 0; b < blocks.size(); ++b) {
      const uint64_t first = static_cast<uint64_t>(blocks[b].first_row);
      if (parts[k][b] == nullptr) {
        for (int64_t i = 0; i < blocks[b].rows; ++i) PutVarint(first + i, &list);
        continue;
      }
      const std::string_view s = parts[k][b]->missing_rows;
      const char* p = s.data();
      const char* end = p + s.size();
      while (p < end) {
        uint64_t v = 0;
        if (!ReadVarint(p, end, &v) || v >= static_cast<uint64_t>(blocks[b].rows)) {
          return absl::InvalidArgumentError(absl::StrCat(
              BlockName(b), ", metric ", metrics[k].name, ": a missing row is not one of its rows"));
        }
        PutVarint(first + v, &list);
      }
    }
    if (!list.empty()) {
      PutTag(v1::MetricColumn::kMissingRowsFieldNumber, &column);
      PutVarint(list.size(), &column);
      column.append(list);
    }
    PutTag(C::kMetricsFieldNumber, out);
    PutVarint(column.size(), out);
    out->append(column);
  }
  return absl::OkStatus();
}

void PutEntries(int field, const std::vector<std::string_view>& entries, std::string* out) {
  for (std::string_view e : entries) {
    PutTag(field, out);
    PutVarint(e.size(), out);
    out->append(e);
  }
}

absl::Status JoinInto(const std::vector<Block>& blocks, JoinedWriter& writer);

}  // namespace

const std::string& ColumnBlockLayout() {
  static const std::string* layout = [] {
    // The tables an encoder writes into every reply, whatever its rows.
    v1::ResultColumns empty;
    ResultColumnsEncoder(&empty, "").Finish();
    std::string bytes = absl::StrCat("format ", kBlockFormat, ";");
    bytes += empty.SerializeAsString();
    uint64_t h = 14695981039346656037ull;  // FNV-1a
    for (char c : bytes) {
      h ^= static_cast<uint8_t>(c);
      h *= 1099511628211ull;
    }
    return new std::string(absl::StrFormat("%016x", h));
  }();
  return *layout;
}

size_t JoinedColumns::size() const {
  size_t n = 0;
  for (std::string_view p : parts_) n += p.size();
  return n;
}

void JoinedColumns::AppendTo(std::string* out) const {
  out->reserve(out->size() + size());
  for (std::string_view p : parts_) out->append(p);
}

absl::Status MergeColumns(absl::Span<const std::string_view> pieces, JoinedColumns* out) {
  std::vector<Block> blocks(pieces.size());
  int64_t rows = 0;
  for (size_t b = 0; b < pieces.size(); ++b) {
    const std::string name = BlockName(b);
    if (absl::Status s = Split(pieces[b], kLastField, &blocks[b].fields, name.c_str()); !s.ok()) {
      return s;
    }
    for (std::string_view s : blocks[b].fields[C::kCellIdFieldNumber]) {
      blocks[b].rows += CountVarints(s);
    }
    blocks[b].first_row = rows;
    rows += blocks[b].rows;
  }
  JoinedWriter writer(out);
  absl::Status joined_ok = JoinInto(blocks, writer);
  if (!joined_ok.ok()) out->Clear();
  return joined_ok;
}

namespace {

absl::Status JoinInto(const std::vector<Block>& blocks, JoinedWriter& writer) {
  std::string& joined = *writer.buf();
  // sweep_id: the first block's that has one.
  for (const Block& block : blocks) {
    if (block.fields[C::kSweepIdFieldNumber].empty()) continue;
    PutEntries(C::kSweepIdFieldNumber, {block.fields[C::kSweepIdFieldNumber][0]}, &joined);
    break;
  }
  // The tables, each joined once.
  std::array<JoinedTable, kLastField + 1> tables;
  for (int field : {C::kWorkersFieldNumber, C::kWorkerVersionsFieldNumber, C::kDevicesFieldNumber,
                    C::kFactsTableFieldNumber}) {
    tables[field] = JoinTable(blocks, field);
  }
  // Head labels by head index: a block holds the labels up to its highest
  // index, empty for the heads none of its rows has.
  std::vector<std::string_view> heads;
  for (const Block& block : blocks) {
    const std::vector<std::string_view>& labels = block.fields[C::kHeadsFieldNumber];
    if (labels.size() > heads.size()) heads.resize(labels.size());
    for (size_t i = 0; i < labels.size(); ++i) {
      if (heads[i].empty()) heads[i] = labels[i];
    }
  }
  // The fields in number order, as protobuf writes them.
  std::string payload;
  for (int field = C::kSweepIdFieldNumber + 1; field <= kLastField; ++field) {
    if (field == C::kHeadsFieldNumber) {
      PutEntries(field, heads, &joined);
      continue;
    }
    if (field == C::kFailureFieldNumber) {
      for (const Block& block : blocks) PutEntries(field, block.fields[field], &joined);
      continue;
    }
    if (field == C::kMetricsFieldNumber) {
      if (absl::Status s = JoinMetrics(blocks, &joined); !s.ok()) return s;
      continue;
    }
    if (field == C::kMetricTableFieldNumber || field == C::kBuiltInTableFieldNumber) {
      if (!blocks.empty()) PutEntries(field, blocks[0].fields[field], &joined);
      continue;
    }
    if (field == C::kWorkersFieldNumber || field == C::kWorkerVersionsFieldNumber ||
        field == C::kDevicesFieldNumber || field == C::kFactsTableFieldNumber) {
      PutEntries(field, tables[field].entries, &joined);
      continue;
    }
    const auto rule = std::find_if(ListRules().begin(), ListRules().end(),
                                   [field](const ListRule& r) { return r.field == field; });
    if (rule == ListRules().end()) {
      for (size_t b = 0; b < blocks.size(); ++b) {
        if (!blocks[b].fields[field].empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat(BlockName(b), ": field ", field, " is not one a block holds"));
        }
      }
      continue;
    }
    // An elidable list stays empty when it is empty in every block.
    if (rule->join == Join::kElidable &&
        std::all_of(blocks.begin(), blocks.end(),
                    [field](const Block& block) { return block.fields[field].empty(); })) {
      continue;
    }
    if (rule->join == Join::kConcat || rule->join == Join::kElidable) {
      // Sized first, then written in place: most of the reply's bytes.
      size_t size = 0;
      for (const Block& block : blocks) {
        size += block.fields[field].empty()
                    ? EmptySize(*rule, block.rows)
                    : TotalSize(block.fields[field]);
      }
      if (size == 0) continue;
      PutTag(field, &joined);
      PutVarint(size, &joined);
      if (absl::Status s = JoinList(blocks, *rule, nullptr, nullptr, &writer); !s.ok()) {
        return s;
      }
      continue;
    }
    payload.clear();
    if (absl::Status s = JoinList(blocks, *rule, &tables[rule->table], &payload, nullptr);
        !s.ok()) {
      return s;
    }
    if (payload.empty()) continue;
    PutTag(field, &joined);
    PutVarint(payload.size(), &joined);
    joined.append(payload);
  }
  writer.Close();
  return absl::OkStatus();
}

}  // namespace

}  // namespace ranksweep
