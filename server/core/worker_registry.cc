#include "server/core/worker_registry.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/plural.h"
#include "common/spec/result_validation.h"
#include "common/status_macros.h"
#include "server/core/log.h"
#include "server/core/sql_columns.h"

namespace ranksweep::server {
namespace {

bool ValidWorkerId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
  });
}

// The free-text fields of a registration against their length limits.
absl::Status CheckRegistrationText(const WorkerRegistration& reg) {
  const struct {
    const char* field;
    const std::string& value;
  } texts[] = {{"hostname", reg.hostname},
               {"device", reg.device},
               {"device_name", reg.device_name},
               {"version.build_id", reg.version.build_id},
               {"version.torch_version", reg.version.torch_version},
               {"version.cuda_version", reg.version.cuda_version}};
  for (const auto& t : texts) {
    RETURN_IF_ERROR(CheckTextLength(t.field, t.value, ResultLimits::kMaxLabelLength));
  }
  return absl::OkStatus();
}

absl::Status UnknownWorker(const std::string& worker_id) {
  return absl::NotFoundError(absl::StrCat("unknown worker ", Clip(worker_id), "; register first"));
}

// The version manifest `worker_id` registered with; nullopt for an unknown
// worker.
absl::StatusOr<std::optional<VersionManifest>> FindWorkerVersion(Connection& c,
                                                                 const std::string& worker_id) {
  enum Col : int { kBuildId, kTorchVersion, kCudaVersion, kCount };
  static const std::string* sql = NewSelect<kCount>(
      {"build_id", "torch_version", "cuda_version"}, "FROM workers WHERE id = ?1");
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(1, worker_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<VersionManifest>();
  return VersionManifest{q.ColumnText(kBuildId), q.ColumnText(kTorchVersion),
                         q.ColumnText(kCudaVersion)};
}

}  // namespace

absl::StatusOr<int> CheckRegistration(const WorkerRegistration& reg) {
  int slots = reg.slots == 0 ? 1 : reg.slots;
  if (slots < 1 || slots > 64) {
    return absl::InvalidArgumentError(absl::StrCat("slots: must be 1..64, got ", reg.slots));
  }
  if (!reg.worker_id.empty() && !ValidWorkerId(reg.worker_id)) {
    return absl::InvalidArgumentError(
        "worker_id: must be 1..64 characters of [A-Za-z0-9._-]");
  }
  RETURN_IF_ERROR(CheckRegistrationText(reg));
  return slots;
}

absl::StatusOr<bool> WorkerExists(Connection& c, const std::string& worker_id) {
  ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT 1 FROM workers WHERE id = ?1"));
  q.Bind(1, worker_id);
  return q.Step();
}

absl::StatusOr<std::string> NewWorkerId(Connection& c, absl::FunctionRef<std::string()> random_id) {
  for (int tries = 0;; ++tries) {
    std::string worker_id = random_id();
    ASSIGN_OR_RETURN(bool taken, WorkerExists(c, worker_id));
    if (!taken) return worker_id;
    if (tries > 100) return absl::InternalError("cannot find a free worker id");
  }
}

absl::StatusOr<std::vector<int64_t>> LeasedCellsOf(Connection& c, const std::string& worker_id) {
  enum Col : int { kId, kCount };
  static const std::string* sql = NewSelect<kCount>(
      {"id"}, absl::StrCat("FROM cells WHERE worker_id = ?1 AND state = ", kCellLeased));
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(1, worker_id);
  std::vector<int64_t> cells;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    cells.push_back(q.ColumnInt(kId));
  }
  return cells;
}

absl::Status SaveWorker(Connection& c, const std::string& worker_id,
                        const WorkerRegistration& reg, int slots, int64_t now_ms) {
  // One statement for both cases; a known worker keeps its registered_ms.
  ASSIGN_OR_RETURN(Statement up,
                   c.Prepare("INSERT INTO workers (id, hostname, device, device_name, "
                             "memory_bytes, slots, build_id, torch_version, cuda_version, "
                             "registered_ms, last_seen_ms) "
                             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10) "
                             "ON CONFLICT(id) DO UPDATE SET hostname = excluded.hostname, "
                             "device = excluded.device, device_name = excluded.device_name, "
                             "memory_bytes = excluded.memory_bytes, slots = excluded.slots, "
                             "build_id = excluded.build_id, "
                             "torch_version = excluded.torch_version, "
                             "cuda_version = excluded.cuda_version, "
                             "last_seen_ms = excluded.last_seen_ms"));
  up.Bind(1, worker_id).Bind(2, reg.hostname).Bind(3, reg.device).Bind(4, reg.device_name);
  up.Bind(5, reg.memory_bytes).Bind(6, slots).Bind(7, reg.version.build_id);
  up.Bind(8, reg.version.torch_version).Bind(9, reg.version.cuda_version).Bind(10, now_ms);
  return up.Run();
}

void LogRegistration(const WorkerRegistration& reg, const std::string& worker_id, int slots,
                     bool known, int64_t released) {
  LogEvent("worker %s %s: host=%s device=%s (%s) slots=%d build=%s torch=%s cuda=%s%s", worker_id,
           known ? "re-registered" : "registered", Clip(reg.hostname), Clip(reg.device),
           Clip(reg.device_name), slots, Clip(reg.version.build_id),
           Clip(reg.version.torch_version),
           reg.version.cuda_version.empty() ? "-" : Clip(reg.version.cuda_version),
           released > 0 ? absl::StrCat(", released ", CountOf(released, "leased cell")) : "");
}

absl::Status TouchWorker(Connection& c, const std::string& worker_id, int64_t now_ms) {
  if (worker_id.empty()) return absl::InvalidArgumentError("worker_id: required");
  ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE workers SET last_seen_ms = ?2 WHERE id = ?1"));
  u.Bind(1, worker_id).Bind(2, now_ms);
  RETURN_IF_ERROR(u.Run());
  if (c.Changes() == 0) {
    return UnknownWorker(worker_id);
  }
  return absl::OkStatus();
}

absl::StatusOr<VersionManifest> KnownWorkerVersion(Connection& c, const std::string& worker_id) {
  if (worker_id.empty()) return absl::InvalidArgumentError("worker_id: required");
  ASSIGN_OR_RETURN(std::optional<VersionManifest> version, FindWorkerVersion(c, worker_id));
  if (!version.has_value()) return UnknownWorker(worker_id);
  return *std::move(version);
}

absl::StatusOr<VersionManifest> WorkerVersion(Connection& c, const std::string& worker_id) {
  ASSIGN_OR_RETURN(std::optional<VersionManifest> version, FindWorkerVersion(c, worker_id));
  return version.value_or(VersionManifest{});
}

absl::StatusOr<int64_t> RegisteredMemoryBytes(Connection& c, const std::string& worker_id) {
  enum Col : int { kMemoryBytes, kCount };
  static const std::string* sql =
      NewSelect<kCount>({"memory_bytes"}, "FROM workers WHERE id = ?1");
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(1, worker_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  return row ? q.ColumnInt(kMemoryBytes) : 0;
}

}  // namespace ranksweep::server
