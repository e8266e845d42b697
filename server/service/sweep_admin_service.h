// SweepAdminService (proto/ranksweep/v1/sweep_admin.proto): the gRPC adapter
// of SweepAdmin (server/core/sweeps/sweep_admin.h). It only translates and checks
// the caller: every call needs a role that may cancel a sweep (the rule of
// SweepService/CancelSweep in server/core/auth.cc: admin or user), and a
// user may touch only their own sweeps; admins see and manage all. Unary
// calls run on the service's own CallPool, never on gRPC's threads.
//
// Thread-safety: gRPC calls the handlers from many threads; SweepAdmin is
// thread-safe and the handlers share nothing else.
#ifndef RANKSWEEP_SERVER_SERVICE_SWEEP_ADMIN_SERVICE_H_
#define RANKSWEEP_SERVER_SERVICE_SWEEP_ADMIN_SERVICE_H_

#include <string>

#include <grpcpp/grpcpp.h>

#include "ranksweep/v1/sweep_admin.grpc.pb.h"
#include "server/core/auth.h"
#include "server/core/coordinator.h"
#include "server/core/sweeps/sweep_admin.h"
#include "server/service/call_pool.h"

namespace ranksweep::server {

class SweepAdminServiceImpl final : public v1::SweepAdminService::CallbackService {
 public:
  // None is owned; all must outlive the service.
  SweepAdminServiceImpl(SweepAdmin* admin, Coordinator* coordinator,
                        const Authorizer* authorizer);
  ~SweepAdminServiceImpl() override;

  // Calls after this finish UNAVAILABLE; waits for those running.
  void Shutdown();

  grpc::ServerUnaryReactor* UpdateSweep(grpc::CallbackServerContext* context,
                                        const v1::UpdateSweepRequest* request,
                                        v1::UpdateSweepResponse* response) override;
  grpc::ServerUnaryReactor* DeleteSweep(grpc::CallbackServerContext* context,
                                        const v1::DeleteSweepRequest* request,
                                        v1::DeleteSweepResponse* response) override;
  grpc::ServerUnaryReactor* RetrySweep(grpc::CallbackServerContext* context,
                                       const v1::RetrySweepRequest* request,
                                       v1::RetrySweepResponse* response) override;
  grpc::ServerUnaryReactor* ListManagedSweeps(grpc::CallbackServerContext* context,
                                              const v1::ListManagedSweepsRequest* request,
                                              v1::ListManagedSweepsResponse* response) override;

 private:
  // The caller, when it may `action` the sweep; its error otherwise.
  absl::StatusOr<Principal> Authorize(grpc::CallbackServerContext* context,
                                      const std::string& sweep_id, const char* action);
  void Fill(const std::string& sweep_id, const SweepNotes& notes, v1::ManagedSweep* out);

  SweepAdmin* const admin_;
  Coordinator* const coordinator_;
  const Authorizer* const authorizer_;
  CallPool pool_{2};
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_SERVICE_SWEEP_ADMIN_SERVICE_H_
