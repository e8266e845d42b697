#include "client/ui/grpc_backend.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/rpc.h"
#include "proto/columns.h"

namespace ranksweep::client::ui {
namespace {

// Rows per QueryResults call, as the CLI reads them.
constexpr int kPageSize = 10000;

class GrpcEventStream : public EventStream {
 public:
  GrpcEventStream(std::unique_ptr<grpc::ClientContext> ctx, v1::SweepService::Stub* stub,
                  const std::string& sweep_id, std::function<absl::Status(grpc::Status)> to_absl)
      : ctx_(std::move(ctx)), to_absl_(std::move(to_absl)) {
    v1::WatchSweepRequest req;
    req.set_sweep_id(sweep_id);
    reader_ = stub->WatchSweep(ctx_.get(), req);
  }

  bool Next(v1::SweepEvent* event) override { return reader_->Read(event); }
  void Cancel() override { ctx_->TryCancel(); }
  absl::Status Finish() override { return to_absl_(reader_->Finish()); }

 private:
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::function<absl::Status(grpc::Status)> to_absl_;
  std::unique_ptr<grpc::ClientReader<v1::SweepEvent>> reader_;
};

}  // namespace

GrpcBackend::GrpcBackend(Coordinator coordinator)
    : coordinator_(std::move(coordinator)),
      stub_(v1::SweepService::NewStub(coordinator_.channel)),
      admin_(v1::SweepAdminService::NewStub(coordinator_.channel)) {}

std::unique_ptr<grpc::ClientContext> GrpcBackend::Context(bool with_deadline) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (with_deadline && coordinator_.timeout_seconds > 0) {
    ctx->set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Seconds(coordinator_.timeout_seconds)));
  }
  if (!coordinator_.token.empty()) {
    ctx->AddMetadata("authorization", "Bearer " + coordinator_.token);
  }
  return ctx;
}

absl::Status GrpcBackend::ToAbsl(const grpc::Status& status) const {
  if (status.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (code == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(absl::StrCat("coordinator at ", coordinator_.addr,
                                               " unreachable: ", status.error_message()));
  }
  return absl::Status(code, status.error_message());
}

absl::StatusOr<std::vector<v1::ManagedSweep>> GrpcBackend::ListSweeps(
    const v1::ListManagedSweepsRequest& request) {
  v1::ListManagedSweepsResponse resp;
  auto ctx = Context(true);
  if (grpc::Status s = admin_->ListManagedSweeps(ctx.get(), request, &resp); !s.ok()) {
    return ToAbsl(s);
  }
  return std::vector<v1::ManagedSweep>(resp.sweeps().begin(), resp.sweeps().end());
}

absl::StatusOr<v1::ManagedSweep> GrpcBackend::GetSweep(const std::string& sweep_id) {
  v1::GetSweepRequest req;
  req.set_sweep_id(sweep_id);
  v1::GetSweepResponse resp;
  auto ctx = Context(true);
  if (grpc::Status s = stub_->GetSweep(ctx.get(), req, &resp); !s.ok()) return ToAbsl(s);
  v1::ManagedSweep out;
  *out.mutable_sweep() = resp.sweep();
  // The notes come with the managed listing only: the sweeps whose id, name,
  // owner, note or a tag contain this id, of which one is this sweep.
  v1::ListManagedSweepsRequest list;
  list.set_search(sweep_id);
  list.set_include_archived(true);
  list.set_limit(10000);
  auto listed = ListSweeps(list);
  if (!listed.ok()) return listed.status();
  for (const v1::ManagedSweep& s : *listed) {
    if (s.sweep().sweep_id() != sweep_id) continue;
    out.set_note(s.note());
    *out.mutable_tags() = s.tags();
    out.set_archived(s.archived());
  }
  return out;
}

absl::StatusOr<std::vector<v1::ResultRow>> GrpcBackend::QueryRows(
    const v1::QueryResultsRequest& request) {
  v1::QueryResultsRequest req = request;
  // Rows with their learning curves are large and come as rows only.
  req.set_page_size(request.curves() ? kCurvesPageSize : kPageSize);
  req.set_columns(!request.curves());
  std::vector<v1::ResultRow> rows;
  while (true) {
    v1::QueryResultsResponse resp;
    auto ctx = Context(true);
    if (grpc::Status s = stub_->QueryResults(ctx.get(), req, &resp); !s.ok()) return ToAbsl(s);
    if (absl::Status s = RowsFromColumns(&resp); !s.ok()) {
      return absl::InternalError(absl::StrCat("QueryResults reply: ", s.message()));
    }
    rows.insert(rows.end(), resp.rows().begin(), resp.rows().end());
    if (resp.next_page_token().empty()) return rows;
    req.set_page_token(resp.next_page_token());
  }
}

absl::StatusOr<v1::QueryResultsResponse> GrpcBackend::QueryGroups(const std::string& sweep_id) {
  v1::QueryResultsRequest req;
  req.set_sweep_id(sweep_id);
  req.set_group_by(v1::GROUP_BY_HEAD_RANK);
  v1::QueryResultsResponse resp;
  auto ctx = Context(true);
  if (grpc::Status s = stub_->QueryResults(ctx.get(), req, &resp); !s.ok()) return ToAbsl(s);
  return resp;
}

absl::StatusOr<std::vector<v1::WorkerInfo>> GrpcBackend::ListWorkers() {
  v1::ListWorkersResponse resp;
  auto ctx = Context(true);
  if (grpc::Status s = stub_->ListWorkers(ctx.get(), v1::ListWorkersRequest(), &resp); !s.ok()) {
    return ToAbsl(s);
  }
  return std::vector<v1::WorkerInfo>(resp.workers().begin(), resp.workers().end());
}

std::unique_ptr<EventStream> GrpcBackend::WatchSweep(const std::string& sweep_id) {
  // No deadline: a sweep may run for days; the page's closing cancels it.
  return std::make_unique<GrpcEventStream>(
      Context(false), stub_.get(), sweep_id,
      [this](const grpc::Status& s) { return ToAbsl(s); });
}

absl::StatusOr<v1::ManagedSweep> GrpcBackend::UpdateSweep(const v1::UpdateSweepRequest& request) {
  v1::UpdateSweepResponse resp;
  auto ctx = Context(true);
  if (grpc::Status s = admin_->UpdateSweep(ctx.get(), request, &resp); !s.ok()) return ToAbsl(s);
  return resp.sweep();
}

absl::StatusOr<v1::DeleteSweepResponse> GrpcBackend::DeleteSweep(
    const v1::DeleteSweepRequest& request) {
  v1::DeleteSweepResponse resp;
  auto ctx = Context(true);
  if (grpc::Status s = admin_->DeleteSweep(ctx.get(), request, &resp); !s.ok()) return ToAbsl(s);
  return resp;
}

absl::StatusOr<int64_t> GrpcBackend::RetrySweep(const v1::RetrySweepRequest& request) {
  v1::RetrySweepResponse resp;
  auto ctx = Context(true);
  if (grpc::Status s = admin_->RetrySweep(ctx.get(), request, &resp); !s.ok()) return ToAbsl(s);
  return resp.cells_retried();
}

absl::StatusOr<int64_t> GrpcBackend::CancelSweep(const std::string& sweep_id) {
  v1::CancelSweepRequest req;
  req.set_sweep_id(sweep_id);
  v1::CancelSweepResponse resp;
  auto ctx = Context(true);
  if (grpc::Status s = stub_->CancelSweep(ctx.get(), req, &resp); !s.ok()) return ToAbsl(s);
  return resp.cells_cancelled();
}

}  // namespace ranksweep::client::ui
