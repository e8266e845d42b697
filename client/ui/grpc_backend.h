// The dashboard's Backend over the coordinator's SweepService: the same
// calls the CLI makes, with the user's token and per-call deadline. Thin:
// no logic beyond paging and turning gRPC statuses into absl ones.
//
// Thread-safety: every method may be called from many threads at once (a
// gRPC stub is thread-safe).
#ifndef RANKSWEEP_CLIENT_UI_GRPC_BACKEND_H_
#define RANKSWEEP_CLIENT_UI_GRPC_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "client/ui/dashboard.h"
#include "grpcpp/grpcpp.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "ranksweep/v1/sweep_admin.grpc.pb.h"

namespace ranksweep::client::ui {

// How to reach the coordinator, as the CLI's global flags say.
struct Coordinator {
  std::shared_ptr<grpc::Channel> channel;
  std::string addr;              // for messages
  std::string token;             // "authorization: Bearer TOKEN" when set
  double timeout_seconds = 30;   // per unary call; 0 = none
};

class GrpcBackend : public Backend {
 public:
  explicit GrpcBackend(Coordinator coordinator);

  absl::StatusOr<std::vector<v1::ManagedSweep>> ListSweeps(
      const v1::ListManagedSweepsRequest& request) override;
  absl::StatusOr<v1::ManagedSweep> GetSweep(const std::string& sweep_id) override;
  absl::StatusOr<std::vector<v1::ResultRow>> QueryRows(
      const v1::QueryResultsRequest& request) override;
  absl::StatusOr<v1::QueryResultsResponse> QueryGroups(const std::string& sweep_id) override;
  absl::StatusOr<std::vector<v1::WorkerInfo>> ListWorkers() override;
  std::unique_ptr<EventStream> WatchSweep(const std::string& sweep_id) override;
  absl::StatusOr<v1::ManagedSweep> UpdateSweep(const v1::UpdateSweepRequest& request) override;
  absl::StatusOr<v1::DeleteSweepResponse> DeleteSweep(
      const v1::DeleteSweepRequest& request) override;
  absl::StatusOr<int64_t> RetrySweep(const v1::RetrySweepRequest& request) override;
  absl::StatusOr<int64_t> CancelSweep(const std::string& sweep_id) override;
 private:
  std::unique_ptr<grpc::ClientContext> Context(bool with_deadline) const;
  absl::Status ToAbsl(const grpc::Status& status) const;

  Coordinator coordinator_;
  std::unique_ptr<v1::SweepService::Stub> stub_;
  std::unique_ptr<v1::SweepAdminService::Stub> admin_;
};

}  // namespace ranksweep::client::ui

#endif  // RANKSWEEP_CLIENT_UI_GRPC_BACKEND_H_
