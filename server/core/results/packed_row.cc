#include "server/core/results/packed_row.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/spec/result_metrics.h"

namespace ranksweep::server {
namespace {

constexpr uint8_t kVersion1 = 1;
constexpr uint8_t kVersion2 = 2;  // + recipe after rank
constexpr uint8_t kHasResult = 1;

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  void Byte(uint8_t b) { out_->push_back(static_cast<char>(b)); }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      Byte(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    Byte(static_cast<uint8_t>(v));
  }
  void Signed(int64_t v) {
    Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void Double(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    for (int i = 0; i < 8; ++i) Byte(static_cast<uint8_t>(bits >> (8 * i)));
  }
  void String(std::string_view s) {
    Varint(s.size());
    out_->append(s.data(), s.size());
  }

 private:
  std::string* out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : p_(in.data()), end_(in.data() + in.size()) {}
  bool ok() const { return ok_; }
  uint8_t Byte() {
    if (p_ == end_) return Fail();
    return static_cast<uint8_t>(*p_++);
  }
  uint64_t Varint() {
    if (p_ != end_ && (static_cast<uint8_t>(*p_) & 0x80) == 0) return static_cast<uint8_t>(*p_++);
    // At most ten bytes (the longest varint), and never past the end: one
    // bound for both, checked once per byte.
    const char* const limit = end_ - p_ > 10 ? p_ + 10 : end_;
    uint64_t v = 0;
    for (int shift = 0; p_ != limit; shift += 7) {
      const uint8_t b = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return Fail();
  }
  int64_t Signed() {
    const uint64_t v = Varint();
    return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
  }
  double Double() {
    if (end_ - p_ < 8) return Fail();
    uint64_t bits = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    std::memcpy(&bits, p_, sizeof bits);
#else
    for (int i = 0; i < 8; ++i) {
      bits |= static_cast<uint64_t>(static_cast<uint8_t>(p_[i])) << (8 * i);
    }
#endif
    p_ += 8;
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  void String(std::string* s) {
    const uint64_t n = Varint();
    if (!ok_ || n > static_cast<uint64_t>(end_ - p_)) {
      Fail();
      return;
    }
    // Rows read one after another mostly repeat the previous row's
    // strings (its worker, build, device): those are left as they are.
    if (s->size() != n || std::memcmp(s->data(), p_, static_cast<size_t>(n)) != 0) {
      s->assign(p_, static_cast<size_t>(n));
    }
    p_ += n;
  }
  bool AtEnd() const { return p_ == end_; }

 private:
  uint8_t Fail() {
    ok_ = false;
    p_ = end_;
    return 0;
  }
  const char* p_;
  const char* end_;
  bool ok_ = true;
};

// The built-in metrics in table order (common/spec/result_metrics.h): an
// integer as Signed, a real as Double; one not measured (test_error without
// a test split) as its default, as the columns read it.
void PackBuiltIns(Writer& w, const SeedResult& r) {
  for (const BuiltInMetric& m : kBuiltInMetrics) {
    const double v = BuiltInValue(m, r).value_or(BuiltInDefault(m));
    if (m.integer) {
      w.Signed(static_cast<int64_t>(v));
    } else {
      w.Double(v);
    }
  }
}

void UnpackBuiltIns(Reader& r, SeedResult* res) {
  for (const BuiltInMetric& m : kBuiltInMetrics) {
    m.set(*res, m.integer ? static_cast<double>(r.Signed()) : r.Double());
  }
}

}  // namespace

std::string PackResultRow(const ResultRow& row) {
  std::string out;
  out.reserve(160);
  Writer w(&out);
  w.Byte(row.recipe == 0 ? kVersion1 : kVersion2);
  w.Signed(row.head_index);
  w.Signed(row.rank);
  if (row.recipe != 0) w.Signed(row.recipe);
  w.Varint(row.seed);
  w.Signed(static_cast<int>(row.state));
  w.Signed(row.attempt);
  w.Signed(row.lease_id);
  w.Signed(row.finished_unix_ms);
  w.Signed(row.cached_from_cell_id);
  w.String(row.worker_id);
  w.String(row.worker_version.build_id);
  w.String(row.worker_version.torch_version);
  w.String(row.worker_version.cuda_version);
  w.String(row.failure);
  w.Byte(row.result.has_value() ? kHasResult : 0);
  if (row.result.has_value()) {
    const SeedResult& r = *row.result;
    PackBuiltIns(w, r);
    w.String(r.device);
    w.Signed(r.facts.train_sequences);
    w.Signed(r.facts.test_sequences);
    w.Signed(r.facts.distinct_queries);
    w.Signed(r.facts.rank_lower_bound);
    w.Signed(r.facts.rank_upper_bound);
    // The optional metrics: their count, then in table order a presence
    // byte and the value (as a double, so a reader that knows fewer
    // metrics can skip the rest). A row packed before the metrics existed
    // ends after the facts; one packed before a metric, before it: missing.
    w.Varint(kResultMetricCount);
    for (const ResultMetric& m : kResultMetrics) {
      const std::optional<double> v = GetMetric(m, r);
      w.Byte(v.has_value() ? 1 : 0);
      if (v.has_value()) w.Double(*v);
    }
  }
  return out;
}

absl::Status UnpackResultRow(std::string_view packed, ResultRow* row) {
  Reader r(packed);
  const uint8_t version = r.Byte();
  if (!r.ok() || (version != kVersion1 && version != kVersion2)) {
    return absl::InternalError(absl::StrCat("packed result row: unknown version ",
                                            static_cast<int>(version), " (",
                                            packed.size(), " bytes)"));
  }
  row->head_index = static_cast<int>(r.Signed());
  row->rank = static_cast<int>(r.Signed());
  row->recipe = version == kVersion2 ? static_cast<int32_t>(r.Signed()) : 0;
  row->seed = r.Varint();
  row->state = static_cast<CellState>(r.Signed());
  row->attempt = static_cast<int>(r.Signed());
  row->lease_id = r.Signed();
  row->finished_unix_ms = r.Signed();
  row->cached_from_cell_id = r.Signed();
  r.String(&row->worker_id);
  r.String(&row->worker_version.build_id);
  r.String(&row->worker_version.torch_version);
  r.String(&row->worker_version.cuda_version);
  r.String(&row->failure);
  if (r.Byte() == kHasResult) {
    // A row object reused from row to row keeps its SeedResult (and the
    // capacity of its strings).
    SeedResult& res = row->result.has_value() ? *row->result : row->result.emplace();
    res.seed = row->seed;
    UnpackBuiltIns(r, &res);
    r.String(&res.device);
    res.facts.train_sequences = r.Signed();
    res.facts.test_sequences = r.Signed();
    res.facts.distinct_queries = r.Signed();
    res.facts.rank_lower_bound = r.Signed();
    res.facts.rank_upper_bound = r.Signed();
    const uint64_t known = kResultMetricCount;
    const uint64_t packed_metrics = r.AtEnd() ? 0 : r.Varint();
    for (uint64_t k = 0; k < packed_metrics && r.ok(); ++k) {
      std::optional<double> v;
      if (r.Byte() != 0) v = r.Double();
      if (k < known) SetMetric(kResultMetrics[k], v, &res);
    }
    // The metrics not packed are missing (the row may be reused: a value
    // left from the previous row is cleared).
    for (uint64_t k = packed_metrics; k < res.metrics.size(); ++k) res.metrics[k].reset();
  } else {
    row->result.reset();
  }
  if (!r.ok() || !r.AtEnd()) {
    return absl::InternalError(
        absl::StrCat("packed result row: malformed (", packed.size(), " bytes)"));
  }
  return absl::OkStatus();
}

namespace {

int64_t IntArg(sqlite3_value* v) { return sqlite3_value_int64(v); }
double DoubleArg(sqlite3_value* v) { return sqlite3_value_double(v); }
std::string TextArg(sqlite3_value* v) {
  const unsigned char* t = sqlite3_value_text(v);
  return t == nullptr ? std::string()
                      : std::string(reinterpret_cast<const char*>(t), sqlite3_value_bytes(v));
}

constexpr int kPackRowArguments = 32;

void PackRowFunction(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  if (argc != kPackRowArguments) {
    sqlite3_result_error(ctx, "ranksweep_pack_row: wrong number of arguments", -1);
    return;
  }
  int i = 0;
  ResultRow row;
  row.head_index = static_cast<int>(IntArg(argv[i++]));
  row.rank = static_cast<int>(IntArg(argv[i++]));
  row.seed = static_cast<uint64_t>(IntArg(argv[i++]));
  row.state = static_cast<CellState>(IntArg(argv[i++]));
  row.lease_id = IntArg(argv[i++]);
  row.attempt = static_cast<int>(IntArg(argv[i++]));
  row.worker_id = TextArg(argv[i++]);
  row.worker_version.build_id = TextArg(argv[i++]);
  row.worker_version.torch_version = TextArg(argv[i++]);
  row.worker_version.cuda_version = TextArg(argv[i++]);
  row.failure = TextArg(argv[i++]);
  row.finished_unix_ms = IntArg(argv[i++]);
  row.cached_from_cell_id = IntArg(argv[i++]);
  if (row.state == CellState::kDone) {
    SeedResult& r = row.result.emplace();
    r.seed = row.seed;
    // The built-in metrics' columns, in table order; NULL: not measured.
    for (const BuiltInMetric& m : kBuiltInMetrics) {
      sqlite3_value* v = argv[i++];
      if (sqlite3_value_type(v) == SQLITE_NULL) {
        m.set(r, BuiltInDefault(m));
      } else {
        m.set(r, m.integer ? static_cast<double>(IntArg(v)) : DoubleArg(v));
      }
    }
    r.device = TextArg(argv[i++]);
    r.facts.train_sequences = IntArg(argv[i++]);
    r.facts.test_sequences = IntArg(argv[i++]);
    r.facts.distinct_queries = IntArg(argv[i++]);
    r.facts.rank_lower_bound = IntArg(argv[i++]);
    r.facts.rank_upper_bound = IntArg(argv[i++]);
  }
  const std::string packed = PackResultRow(row);
  sqlite3_result_blob(ctx, packed.data(), static_cast<int>(packed.size()), SQLITE_TRANSIENT);
}

}  // namespace

absl::Status RegisterPackRowFunction(sqlite3* db) {
  const int rc = sqlite3_create_function_v2(
      db, "ranksweep_pack_row", kPackRowArguments, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr,
      &PackRowFunction, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return absl::InternalError(
        absl::StrCat("sqlite: cannot register ranksweep_pack_row: ", sqlite3_errstr(rc)));
  }
  return absl::OkStatus();
}

}  // namespace ranksweep::server
