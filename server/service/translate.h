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
#include "proto/columns.h"
#include "proto/convert.h"
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
// In place, into a message that may live on an arena (a query reply's rows:
// no temporary messages to copy).
void FillProto(const ResultRow& row, v1::ResultRow* p);
v1::ResultGroup ToProto(const ResultGroup& group);

// A RowSink that writes the rows into a ResultColumns message (which may
// live on an arena) through proto/columns.h's encoder: one Add per row in
// reply order; Expect reserves room; Finish after the last row.
class ResultColumnsBuilder final : public RowSink {
 public:
  ResultColumnsBuilder(v1::ResultColumns* p, const std::string& sweep_id);
  void Expect(int64_t at_most) override;
  void Add(const ResultRow& row) override;
  void Finish();

 private:
  ResultColumnsEncoder encoder_;
};

v1::HeadSummary ToProto(const HeadSummary& head);
v1::AxisLaw ToProto(const AxisLaw& law);
using ::ranksweep::FillProto;
using ::ranksweep::FromProto;
using ::ranksweep::ToProto;

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
