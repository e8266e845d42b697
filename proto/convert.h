// Translation between the ranksweep.v1 proto messages and the spec types of
// common/spec/spec.h. Proto zero values ("unspecified") become the spec's
// defaults, so a client may leave any field unset. The reverse direction
// writes every field explicitly.
#ifndef RANKSWEEP_PROTO_CONVERT_H_
#define RANKSWEEP_PROTO_CONVERT_H_

#include <optional>

#include "common/spec/worker_calls.h"
#include "common/spec/result_metrics.h"
#include "common/spec/spec.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep {

DatasetSpec FromProto(const v1::DatasetSpec& p);
HeadSpec FromProto(const v1::HeadSpec& p);
TrainSpec FromProto(const v1::TrainSpec& p);
SweepSpec FromProto(const v1::SweepSpec& p);
TaskSpec FromProto(const v1::TaskSpec& p);
// A leased task both ways, for the coordinator's AcquireTasks and
// CompleteTasks replies and the worker that reads them. `recipe` is not on
// the wire (FromProto leaves it 0); `rank` is spec.rank.
LeasedTask FromProto(const v1::Task& p);
VersionManifest FromProto(const v1::VersionManifest& p);
LeaseProgress FromProto(const v1::LeaseProgress& p);
TaskWant FromProto(const v1::NextTasks& p);
// A registration as the worker sends it; `owner` is the coordinator's (the
// calling token), not on the wire, and stays empty.
WorkerRegistration FromProto(const v1::RegisterWorkerRequest& p);
// The heartbeat reply's lease lists and deadline.
HeartbeatOutcome FromProto(const v1::HeartbeatResponse& p);
SeedResult FromProto(const v1::SeedResult& p);
// A learning curve alone (what FromProto(SeedResult) puts in `curve`).
Curve FromProto(const v1::Curve& c);
DatasetFacts FromProto(const v1::DatasetFacts& p);

v1::DatasetSpec ToProto(const DatasetSpec& s);
v1::HeadSpec ToProto(const HeadSpec& s);
v1::TrainSpec ToProto(const TrainSpec& s);
v1::SweepSpec ToProto(const SweepSpec& s);
v1::TaskSpec ToProto(const TaskSpec& s);
v1::Task ToProto(const LeasedTask& t);
v1::VersionManifest ToProto(const VersionManifest& v);
v1::SeedResult ToProto(const SeedResult& s);
v1::DatasetFacts ToProto(const DatasetFacts& s);

// In place, into a message that may live on an arena (no temporaries): the
// same fields as ToProto. For the bulk of a query reply.
void FillProto(const SeedResult& s, v1::SeedResult* p);
void FillProto(const DatasetFacts& s, v1::DatasetFacts* p);
void FillProto(const VersionManifest& s, v1::VersionManifest* p);
void FillProto(const LeaseProgress& s, v1::LeaseProgress* p);
void FillProto(const TaskWant& s, v1::NextTasks* p);
// An AcquireTasksRequest's want: its max_tasks, max_seeds and memory_bytes.
TaskWant WantOf(const v1::AcquireTasksRequest& p);
void FillProto(const TaskWant& s, v1::AcquireTasksRequest* p);
void FillProto(const WorkerRegistration& s, v1::RegisterWorkerRequest* p);
void FillProto(const HeartbeatOutcome& s, v1::HeartbeatResponse* p);

// An optional metric of v1::SeedResult: the entry of its name in the
// `metrics` map (nullopt when there is none). A metric that also has a field
// of its own (first_exact_step, from before the map) is written to both and
// read from the field when the map lacks it, as a sender older than the map
// sends it. A metric of common/spec/result_metrics.h needs no code here.
const google::protobuf::FieldDescriptor* LegacyMetricField(const ResultMetric& metric);
std::optional<double> GetProtoMetric(const ResultMetric& metric, const v1::SeedResult& p);
void SetProtoMetric(const ResultMetric& metric, std::optional<double> value, v1::SeedResult* p);

// A built-in metric of v1::SeedResult (common/spec/result_metrics.h,
// kBuiltInMetrics): the field of the row's `field` name in the seed's
// message, or in its train or test v1::SplitMetrics. Found by name once;
// a row of the table needs no code here.
double GetProtoBuiltIn(const BuiltInMetric& metric, const v1::SeedResult& p);
void SetProtoBuiltIn(const BuiltInMetric& metric, double value, v1::SeedResult* p);

}  // namespace ranksweep

#endif  // RANKSWEEP_PROTO_CONVERT_H_
