// Translation between the coordinator core's plain types (server/core) and
// the ranksweep.v1 messages, and between absl::Status and grpc::Status. The
// service adapters do nothing but this translation and waiting.
//
// Status codes map one to one (Abseil and gRPC share the numbering).
// Enum values outside the proto's range are rejected by the *FromProto
// functions with InvalidArgument naming the field.
//
// Thread-safety: pure functions.
#ifndef RANKSWEEP_SERVER_SERVICE_TRANSLATE_H_
#define RANKSWEEP_SERVER_SERVICE_TRANSLATE_H_

#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include <grpcpp/support/status.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ranksweep/v1/ranksweep.pb.h"
#include "server/core/types.h"

namespace ranksweep::server {

// The same code and message, but: INTERNAL, UNKNOWN and DATA_LOSS replies
// carry only an error id ("internal error E123-4 (the coordinator's log has
// the details)") while the full text (which may hold SQL) goes to the log
// under that id; other messages are cut to 1,024 bytes.
grpc::Status ToGrpcStatus(const absl::Status& status);

v1::SweepInfo ToProto(const SweepInfo& info);
v1::WorkerInfo ToProto(const WorkerInfo& info);
v1::Task ToProto(const Task& task);
// In place, into a message that may live on an arena (a query reply's rows:
// no temporary messages to copy).
void FillProto(const ResultRow& row, v1::ResultRow* p);
v1::ResultGroup ToProto(const ResultGroup& group);

// Appends rows to a ResultColumns message (which may live on an arena), one
// Add per row in reply order; the tables of repeated strings grow as new
// values come. Expect reserves room for the rows expected. Finish, after
// the last row, empties the metric lists that hold only the empty value.
class ResultColumnsBuilder final : public RowSink {
 public:
  ResultColumnsBuilder(v1::ResultColumns* p, const std::string& sweep_id);
  void Expect(int64_t at_most) override;
  void Add(const ResultRow& row) override;
  void Finish();

 private:
  // A table of distinct strings of the reply (workers, devices) and the
  // index of each. The keys point into the table's own strings, which stay
  // put as it grows.
  struct StringTable {
    explicit StringTable(google::protobuf::RepeatedPtrField<std::string>* v) : values(v) {}
    int IndexOf(const std::string& value);
    google::protobuf::RepeatedPtrField<std::string>* values;
    absl::flat_hash_map<std::string_view, int> index;
    int last = -1;  // the index given last (-1: none yet)
  };
  int VersionIndex(const VersionManifest& v);
  int FactsIndex(const DatasetFacts& f);

  v1::ResultColumns* p_;
  int rows_ = 0;
  StringTable workers_, devices_;
  // Values already in the other tables -> their index.
  absl::flat_hash_map<std::tuple<std::string_view, std::string_view, std::string_view>, int>
      versions_;
  using FactsKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;
  absl::flat_hash_map<FactsKey, int> facts_;
  // The index each table gave last (-1: none yet).
  int last_version_ = -1, last_facts_ = -1;
  FactsKey last_facts_key_;
};
v1::HeadSummary ToProto(const HeadSummary& head);
v1::VersionManifest ToProto(const VersionManifest& version);
void FillProto(const VersionManifest& version, v1::VersionManifest* p);
VersionManifest FromProto(const v1::VersionManifest& version);

// UNSPECIFIED becomes std::nullopt ("any").
absl::StatusOr<std::optional<SweepState>> SweepStateFromProto(v1::SweepState state,
                                                               const char* field);
absl::StatusOr<std::optional<CellState>> CellStateFromProto(v1::CellState state,
                                                            const char* field);
absl::StatusOr<GroupBy> GroupByFromProto(v1::GroupBy group_by);

// QueryResults' page tokens: the last cell id of the previous page, as "c"
// followed by the decimal id. "" is the first page (0). InvalidArgument
// naming page_token for anything else.
std::string PageToken(int64_t after_cell_id);
absl::StatusOr<int64_t> CellIdFromPageToken(const std::string& token);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_TRANSLATE_H_
