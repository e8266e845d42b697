#include "server/service/sweep_admin_service.h"

#include <optional>
#include <utility>
#include <vector>

#include "server/service/call_auth.h"
#include "server/service/translate.h"

namespace ranksweep::server {

SweepAdminServiceImpl::SweepAdminServiceImpl(SweepAdmin* admin, Coordinator* coordinator,
                                             const Authorizer* authorizer)
    : admin_(admin), coordinator_(coordinator), authorizer_(authorizer) {}

SweepAdminServiceImpl::~SweepAdminServiceImpl() { Shutdown(); }

void SweepAdminServiceImpl::Shutdown() { pool_.Shutdown(); }

absl::StatusOr<Principal> SweepAdminServiceImpl::Authorize(grpc::CallbackServerContext* context,
                                                           const std::string& sweep_id,
                                                           const char* action) {
  // Changing a sweep is what cancelling it is: the same roles may.
  absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kCancelSweep);
  if (!caller.ok()) return caller.status();
  if (sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  if (SeesAllSweeps(*caller)) return caller;
  absl::StatusOr<std::string> owner = coordinator_->SweepOwner(sweep_id);
  if (!owner.ok()) return owner.status();
  absl::Status access = CheckSweepAccess(*caller, sweep_id, *owner, action);
  if (!access.ok()) return access;
  return caller;
}

void SweepAdminServiceImpl::Fill(const std::string& sweep_id, const SweepNotes& notes,
                                 v1::ManagedSweep* out) {
  absl::StatusOr<SweepInfo> info = coordinator_->GetSweep(sweep_id);
  if (info.ok()) *out->mutable_sweep() = ToProto(*info);
  out->set_note(notes.note);
  for (const std::string& tag : notes.tags) out->add_tags(tag);
  out->set_archived(notes.archived);
}

grpc::ServerUnaryReactor* SweepAdminServiceImpl::UpdateSweep(
    grpc::CallbackServerContext* context, const v1::UpdateSweepRequest* request,
    v1::UpdateSweepResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller = Authorize(context, request->sweep_id(), "change");
    if (!caller.ok()) return caller.status();
    SweepUpdate update;
    if (request->has_name()) update.name = request->name();
    if (request->has_note()) update.note = request->note();
    if (request->has_archived()) update.archived = request->archived();
    update.add_tags.assign(request->add_tags().begin(), request->add_tags().end());
    update.remove_tags.assign(request->remove_tags().begin(), request->remove_tags().end());
    absl::StatusOr<SweepNotes> notes = admin_->Update(request->sweep_id(), update);
    if (!notes.ok()) return notes.status();
    Fill(request->sweep_id(), *notes, response->mutable_sweep());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SweepAdminServiceImpl::DeleteSweep(
    grpc::CallbackServerContext* context, const v1::DeleteSweepRequest* request,
    v1::DeleteSweepResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller = Authorize(context, request->sweep_id(), "delete");
    if (!caller.ok()) return caller.status();
    absl::StatusOr<DeleteOutcome> out = admin_->Delete(request->sweep_id(), request->confirm());
    if (!out.ok()) return out.status();
    response->set_cells_deleted(out->cells_deleted);
    response->set_results_deleted(out->results_deleted);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SweepAdminServiceImpl::RetrySweep(grpc::CallbackServerContext* context,
                                                            const v1::RetrySweepRequest* request,
                                                            v1::RetrySweepResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller = Authorize(context, request->sweep_id(), "retry");
    if (!caller.ok()) return caller.status();
    absl::StatusOr<int64_t> n =
        admin_->Retry(request->sweep_id(), request->failed(), request->cancelled());
    if (!n.ok()) return n.status();
    response->set_cells_retried(*n);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SweepAdminServiceImpl::ListManagedSweeps(
    grpc::CallbackServerContext* context, const v1::ListManagedSweepsRequest* request,
    v1::ListManagedSweepsResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kListSweeps);
    if (!caller.ok()) return caller.status();
    absl::StatusOr<std::optional<SweepState>> state =
        SweepStateFromProto(request->state(), "state");
    if (!state.ok()) return state.status();
    SweepFilter filter;
    filter.state = *state;
    filter.limit = request->limit();
    filter.tag = request->tag();
    filter.search = request->search();
    filter.include_archived = request->include_archived();
    if (!SeesAllSweeps(*caller)) filter.owner = caller->name;
    absl::StatusOr<std::vector<ManagedSweepInfo>> sweeps = admin_->List(filter);
    if (!sweeps.ok()) return sweeps.status();
    for (const ManagedSweepInfo& s : *sweeps) {
      v1::ManagedSweep* out = response->add_sweeps();
      *out->mutable_sweep() = ToProto(s.sweep);
      out->set_note(s.notes.note);
      for (const std::string& tag : s.notes.tags) out->add_tags(tag);
      out->set_archived(s.notes.archived);
    }
    return absl::OkStatus();
  });
}

}  // namespace ranksweep::server
