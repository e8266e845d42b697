// `ranksweep workers`, `workers quarantine` and `workers unquarantine`
// (admin) and `health`.
#include <cstdint>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/commands.h"
#include "client/format.h"
#include "grpcpp/generic/generic_stub.h"

namespace ranksweep::client {
namespace {

// `ranksweep workers quarantine WORKER [--since TIME]`.
int Quarantine(Client* client, const std::string& worker_id, const std::string& since,
               bool hold_token) {
  v1::QuarantineWorkerRequest req;
  req.set_worker_id(worker_id);
  req.set_hold_token(hold_token);
  if (!since.empty()) {
    absl::Time t;
    int64_t seconds = 0;
    std::string error;
    if (absl::SimpleAtoi(since, &seconds) && seconds >= 0) {
      req.set_since_unix_ms(seconds * 1000);
    } else if (absl::ParseTime(absl::RFC3339_full, since, &t, &error)) {
      req.set_since_unix_ms(absl::ToUnixMillis(t));
    } else {
      return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
          "--since: \"", since.substr(0, 64),
          "\" is not an RFC 3339 time (2026-12-01T13:00:00Z) or Unix seconds >= 0")));
    }
    if (req.since_unix_ms() < 0) {
      return ReportLocal(absl::InvalidArgumentError("--since: must be 1970 or later"));
    }
  }
  v1::QuarantineWorkerResponse resp;
  auto ctx = client->Context();
  grpc::Status status = client->stub().QuarantineWorker(ctx.get(), req, &resp);
  if (!status.ok()) return Report(client->globals(), status, "workers quarantine");
  std::cout << "quarantine " << resp.quarantine_id() << " of worker " << worker_id << ": "
            << resp.results_invalidated() << " results and " << resp.copies_invalidated()
            << " cached copies invalid, " << resp.cells_reset() << " cells pending again";
  if (resp.leases_released() > 0) {
    std::cout << ", " << resp.leases_released() << " leases released";
  }
  if (resp.sweeps_reopened_size() > 0) {
    std::cout << ", running again:";
    for (const std::string& id : resp.sweeps_reopened()) std::cout << " " << id;
  }
  if (!resp.token_held().empty()) {
    std::cout << "; token " << resp.token_held() << " held: none of its workers leases";
  }
  std::cout << "\n";
  return kExitOk;
}

// `ranksweep workers unquarantine WORKER`.
int Unquarantine(Client* client, const std::string& worker_id) {
  v1::UnquarantineWorkerRequest req;
  req.set_worker_id(worker_id);
  v1::UnquarantineWorkerResponse resp;
  auto ctx = client->Context();
  grpc::Status status = client->stub().UnquarantineWorker(ctx.get(), req, &resp);
  if (!status.ok()) return Report(client->globals(), status, "workers unquarantine");
  std::cout << "worker " << worker_id
            << (resp.was_quarantined() ? " may lease again\n" : " was not quarantined\n");
  return kExitOk;
}


}  // namespace

void AddWorkersCommand(CLI::App* app, Command* command) {
  CLI::App* workers = app->add_subcommand("workers", "List registered workers");
  workers->footer(kHelpFooter);
  workers->callback([command, workers] {
    if (workers->got_subcommand("quarantine") || workers->got_subcommand("unquarantine")) {
      return;  // their own actions
    }
    command->action = [](Client* c) {
      v1::ListWorkersResponse resp;
      auto ctx = c->Context();
      grpc::Status status = c->stub().ListWorkers(ctx.get(), v1::ListWorkersRequest(), &resp);
      if (!status.ok()) return Report(c->globals(), status, "workers");
      std::vector<v1::WorkerInfo> list(resp.workers().begin(), resp.workers().end());
      std::cout << RenderTable(WorkersTable(list, absl::Now()));
      return static_cast<int>(kExitOk);
    };
  });
  // The flags' values, kept alive by the callbacks that read them.
  struct Flags {
    std::string worker, since;
    bool token = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* quarantine = workers->add_subcommand(
      "quarantine",
      "Admin: invalidate a worker's results (and the cache's copies of them) and train their "
      "cells again");
  quarantine->footer(kHelpFooter);
  quarantine->add_option("worker", f->worker, "Worker id")->required();
  quarantine->add_option("--since", f->since,
                         "Only results finished at or after this time: RFC 3339 "
                         "(2026-12-01T13:00:00Z) or Unix seconds (default: all)");
  quarantine->add_flag("--token", f->token,
                       "Also hold the worker's token: every worker it registered or registers "
                       "later is held until this worker is unquarantined");
  quarantine->callback([command, f] {
    command->action = [f](Client* c) { return Quarantine(c, f->worker, f->since, f->token); };
  });
  CLI::App* unquarantine = workers->add_subcommand(
      "unquarantine", "Admin: let a quarantined worker (and the workers of a token its quarantine held) "
      "register, lease and complete again");
  unquarantine->footer(kHelpFooter);
  unquarantine->add_option("worker", f->worker, "Worker id")->required();
  unquarantine->callback([command, f] {
    command->action = [f](Client* c) { return Unquarantine(c, f->worker); };
  });
}

void AddHealthCommand(CLI::App* app, Command* command) {
  CLI::App* health = app->add_subcommand(
      "health", "Check the coordinator's grpc.health.v1 status; exit 0 when SERVING");
  health->footer(kHelpFooter);
  health->callback([command] {
    command->action = [](Client* c) {
      // The standard health service through a generic call, so no extra
      // generated code is needed: an empty HealthCheckRequest (service "")
      // and a HealthCheckResponse whose field 1 is SERVING (1).
      grpc::GenericStub stub(c->channel());
      auto ctx = c->Context();
      grpc::Slice empty{std::string()};
      grpc::ByteBuffer request(&empty, 1), response;
      std::promise<grpc::Status> done;
      stub.UnaryCall(ctx.get(), "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                     &response, [&](grpc::Status s) { done.set_value(std::move(s)); });
      grpc::Status status = done.get_future().get();
      if (!status.ok()) return Report(c->globals(), status, "health");
      std::vector<grpc::Slice> slices;
      (void)response.Dump(&slices);
      std::string bytes;
      for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
      const bool serving = bytes.size() == 2 && bytes[0] == 0x08 && bytes[1] == 0x01;
      std::cout << (serving ? "SERVING" : "NOT_SERVING") << "\n";
      return serving ? static_cast<int>(kExitOk) : static_cast<int>(kExitUnreachable);
    };
  });
}

}  // namespace ranksweep::client
