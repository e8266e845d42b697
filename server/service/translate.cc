#include "server/service/translate.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/spec/result_metrics.h"
#include "common/spec/result_validation.h"
#include "proto/convert.h"
#include "server/core/log.h"

namespace ranksweep::server {
namespace {

constexpr size_t kMaxReplyMessageLength = 1024;
constexpr size_t kMaxLoggedErrorLength = 8192;

void FillAggregate(const Aggregate& a, v1::Aggregate* p) {
  p->set_mean(a.mean);
  p->set_std(a.std);
  p->set_min(a.min);
  p->set_max(a.max);
  p->set_ci95(a.ci95);
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  if (status.code() == absl::StatusCode::kInternal || status.code() == absl::StatusCode::kUnknown ||
      status.code() == absl::StatusCode::kDataLoss) {
    // The text may hold SQL and file paths: the log gets it, the caller an
    // id to find it by.
    static std::atomic<uint64_t> next_id{1};
    const std::string id = absl::StrCat("E", absl::ToUnixMillis(absl::Now()) % 1000000000, "-",
                                        next_id.fetch_add(1));
    LogEvent("error %s: %s", id, Clip(status.message(), kMaxLoggedErrorLength));
    return grpc::Status(code, absl::StrCat("internal error ", id,
                                           " (the coordinator's log has the details)"));
  }
  // Messages quote caller input clipped (Clip); this bounds what any
  // message can grow to, Clip's "... (N bytes)" included (at most 32 bytes:
  // "... (", 20 digits, " bytes)").
  constexpr size_t kClipSuffix = 32;
  if (status.message().size() <= kMaxReplyMessageLength) {
    return grpc::Status(code, std::string(status.message()));
  }
  return grpc::Status(code, Clip(status.message(), kMaxReplyMessageLength - kClipSuffix));
}

v1::SweepInfo ToProto(const SweepInfo& info) {
  v1::SweepInfo p;
  p.set_sweep_id(info.sweep_id);
  p.set_name(info.name);
  p.set_owner(info.owner);
  p.set_state(static_cast<v1::SweepState>(static_cast<int>(info.state)));
  v1::CellCounts* c = p.mutable_counts();
  c->set_total(info.counts.total);
  c->set_pending(info.counts.pending);
  c->set_leased(info.counts.leased);
  c->set_done(info.counts.done);
  c->set_failed(info.counts.failed);
  c->set_cancelled(info.counts.cancelled);
  c->set_pruned(info.counts.pruned);
  p.set_created_unix_ms(info.created_unix_ms);
  p.set_finished_unix_ms(info.finished_unix_ms);
  p.set_priority(info.priority);
  *p.mutable_spec() = ranksweep::ToProto(info.spec);
  p.set_mean_cell_seconds(info.mean_cell_seconds);
  for (const std::string& f : info.recent_failures) p.add_recent_failures(f);
  p.set_grid_cells(info.grid_cells);
  p.set_cached_cells(info.cached_cells);
  return p;
}

v1::WorkerInfo ToProto(const WorkerInfo& info) {
  v1::WorkerInfo p;
  p.set_worker_id(info.worker_id);
  p.set_hostname(info.hostname);
  p.set_device(info.device);
  p.set_device_name(info.device_name);
  p.set_memory_bytes(info.memory_bytes);
  p.set_slots(info.slots);
  *p.mutable_version() = ToProto(info.version);
  p.set_registered_unix_ms(info.registered_unix_ms);
  p.set_last_seen_unix_ms(info.last_seen_unix_ms);
  p.set_leased_cells(info.leased_cells);
  p.set_completed_cells(info.completed_cells);
  p.set_alive(info.alive);
  p.set_quarantined_unix_ms(info.quarantined_unix_ms);
  p.set_token_held_by(info.token_held_by);
  return p;
}

void FillProto(const ResultRow& row, v1::ResultRow* p) {
  p->set_sweep_id(row.sweep_id);
  p->set_cell_id(row.cell_id);
  p->set_head(row.head);
  p->set_head_index(row.head_index);
  p->set_rank(row.rank);
  p->set_recipe(row.recipe);
  p->set_seed(row.seed);
  p->set_state(static_cast<v1::CellState>(static_cast<int>(row.state)));
  if (row.result.has_value()) ranksweep::FillProto(*row.result, p->mutable_result());
  p->set_failure(row.failure);
  p->set_worker_id(row.worker_id);
  FillProto(row.worker_version, p->mutable_worker_version());
  p->set_attempt(row.attempt);
  p->set_lease_id(row.lease_id);
  p->set_finished_unix_ms(row.finished_unix_ms);
  p->set_cached_from_cell_id(row.cached_from_cell_id);
}

ResultColumnsBuilder::ResultColumnsBuilder(v1::ResultColumns* p, const std::string& sweep_id)
    : encoder_(p, sweep_id) {}

void ResultColumnsBuilder::Expect(int64_t at_most) { encoder_.Expect(at_most); }

void ResultColumnsBuilder::Add(const ResultRow& row) {
  ResultColumnsRow r;
  r.cell_id = row.cell_id;
  r.head = row.head;
  r.head_index = row.head_index;
  r.rank = row.rank;
  r.recipe = row.recipe;
  r.seed = row.seed;
  r.state = static_cast<v1::CellState>(static_cast<int>(row.state));
  r.result = row.result.has_value() ? &*row.result : nullptr;
  r.failure = row.failure;
  r.worker_id = row.worker_id;
  r.build_id = row.worker_version.build_id;
  r.torch_version = row.worker_version.torch_version;
  r.cuda_version = row.worker_version.cuda_version;
  r.attempt = row.attempt;
  r.lease_id = row.lease_id;
  r.finished_unix_ms = row.finished_unix_ms;
  r.cached_from_cell_id = row.cached_from_cell_id;
  encoder_.Add(r);
}

void ResultColumnsBuilder::Finish() { encoder_.Finish(); }

namespace {

v1::CriterionVerdict ToProto(Verdict v) {
  switch (v) {
    case Verdict::kUndecided: return v1::CRITERION_VERDICT_UNDECIDED;
    case Verdict::kMeets: return v1::CRITERION_VERDICT_MEETS;
    case Verdict::kNotMet: return v1::CRITERION_VERDICT_NOT_MET;
  }
  return v1::CRITERION_VERDICT_UNSPECIFIED;
}

// ResultGroup's Aggregate field of each grouped built-in metric, in
// kGroupedBuiltIns order, found by the metric's name once.
const std::array<const google::protobuf::FieldDescriptor*, kGroupedBuiltInCount>&
GroupedBuiltInFields() {
  static const auto* fields = [] {
    auto* f = new std::array<const google::protobuf::FieldDescriptor*, kGroupedBuiltInCount>();
    const google::protobuf::Descriptor* d = v1::ResultGroup::descriptor();
    for (size_t k = 0; k < f->size(); ++k) {
      const char* name = kBuiltInMetrics[kGroupedBuiltIns[k]].name;
      (*f)[k] = d->FindFieldByName(name);
      if ((*f)[k] == nullptr || (*f)[k]->message_type() != v1::Aggregate::descriptor()) {
        std::fprintf(stderr, "grouped built-in metric %s: no Aggregate field of its name in "
                     "ranksweep.v1.ResultGroup\n", name);
        std::abort();
      }
    }
    return f;
  }();
  return *fields;
}

}  // namespace

v1::ResultGroup ToProto(const ResultGroup& group) {
  v1::ResultGroup p;
  p.set_head(group.head);
  p.set_head_index(group.head_index);
  p.set_rank(group.rank);
  p.set_recipe(group.recipe);
  p.set_n(group.n);
  p.set_expected(group.expected);
  const google::protobuf::Reflection* reflection = p.GetReflection();
  const std::array<const google::protobuf::FieldDescriptor*, kGroupedBuiltInCount>& fields =
      GroupedBuiltInFields();
  for (size_t k = 0; k < fields.size(); ++k) {
    FillAggregate(group.built_ins[k],
                  static_cast<v1::Aggregate*>(reflection->MutableMessage(&p, fields[k])));
  }
  p.set_exact_seeds(group.exact_seeds);
  for (uint64_t seed : group.missing_seeds) p.add_missing_seeds(seed);
  p.set_test_exact_seeds(group.test_exact_seeds);
  p.set_verdict(ToProto(group.verdict));
  p.set_test_verdict(ToProto(group.test_verdict));
  p.set_pruned(group.pruned);
  for (const MetricAggregate& m : group.metrics) {
    v1::MetricAggregate* out = p.add_metrics();
    out->set_name(m.name);
    out->set_n(m.n);
    FillAggregate(m.aggregate, out->mutable_aggregate());
  }
  return p;
}

v1::HeadSummary ToProto(const HeadSummary& head) {
  v1::HeadSummary p;
  p.set_head(head.head);
  p.set_head_index(head.head_index);
  p.set_has_rank(head.has_rank);
  p.set_transition_defined(head.transition_defined);
  p.set_transition_rank(head.transition_rank);
  p.set_reason(head.reason);
  p.set_has_test_split(head.has_test_split);
  p.set_test_transition_defined(head.test_transition_defined);
  p.set_test_transition_rank(head.test_transition_rank);
  p.set_test_reason(head.test_reason);
  p.set_caveat(head.caveat);
  for (const RankOutcome& r : head.ranks) {
    v1::RankOutcome* o = p.add_ranks();
    o->set_rank(r.rank);
    o->set_verdict(ToProto(r.verdict));
    o->mutable_recipes_meeting()->Add(r.recipes_meeting.begin(), r.recipes_meeting.end());
    if (head.has_test_split) {
      o->set_test_verdict(ToProto(r.test_verdict));
      o->mutable_test_recipes_meeting()->Add(r.test_recipes_meeting.begin(),
                                             r.test_recipes_meeting.end());
    }
  }
  p.set_no_bound(head.no_bound);
  return p;
}

namespace {

void FillFit(const LawFit& fit, v1::LawFit* p) {
  p->set_defined(fit.defined);
  p->set_points(fit.points);
  p->set_slope(fit.slope);
  p->set_intercept(fit.intercept);
  p->set_has_interval(fit.has_interval);
  p->set_slope_ci95(fit.slope_ci95);
  p->mutable_left_out()->Add(fit.left_out.begin(), fit.left_out.end());
}

}  // namespace

v1::AxisLaw ToProto(const AxisLaw& law) {
  v1::AxisLaw p;
  p.set_axis(law.axis);
  p.set_head(law.head);
  p.set_head_index(law.head_index);
  p.set_has_rank(law.has_rank);
  for (const AxisPoint& point : law.points) {
    v1::AxisPoint* q = p.add_points();
    q->set_value(point.value);
    q->set_label(point.label);
    *q->mutable_summary() = ToProto(point.summary);
    q->set_rank_lower_bound(point.rank_lower_bound);
    q->set_rank_upper_bound(point.rank_upper_bound);
  }
  p.set_numeric(law.numeric);
  FillFit(law.fit, p.mutable_fit());
  FillFit(law.test_fit, p.mutable_test_fit());
  return p;
}

absl::StatusOr<std::optional<SweepState>> SweepStateFromProto(v1::SweepState state,
                                                              const char* field) {
  const int v = static_cast<int>(state);
  if (v == 0) return std::optional<SweepState>();
  if (v < 1 || v > 4) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": unknown sweep state ", v));
  }
  return std::optional<SweepState>(static_cast<SweepState>(v));
}

absl::StatusOr<std::optional<CellState>> CellStateFromProto(v1::CellState state,
                                                            const char* field) {
  const int v = static_cast<int>(state);
  if (v == 0) return std::optional<CellState>();
  if (v < 1 || v > static_cast<int>(CellState::kPruned)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": unknown cell state ", v));
  }
  return std::optional<CellState>(static_cast<CellState>(v));
}

absl::StatusOr<GroupBy> GroupByFromProto(v1::GroupBy group_by) {
  switch (group_by) {
    case v1::GROUP_BY_UNSPECIFIED: return GroupBy::kNone;
    case v1::GROUP_BY_HEAD_RANK: return GroupBy::kHeadRank;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("group_by: unknown value ", static_cast<int>(group_by)));
  }
}

std::string PageToken(int64_t after_cell_id) {
  return after_cell_id > 0 ? absl::StrCat("c", after_cell_id) : std::string();
}

absl::StatusOr<int64_t> CellIdFromPageToken(const std::string& token) {
  if (token.empty()) return 0;
  int64_t id = 0;
  if (token[0] != 'c' || !absl::SimpleAtoi(absl::string_view(token).substr(1), &id) || id <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: \"", token.substr(0, 64),
        "\" is not a next_page_token of QueryResults; leave it empty for the first page"));
  }
  return id;
}

}  // namespace ranksweep::server
