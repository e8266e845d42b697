#include "server/core/workers/worker_registry.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/plural.h"
#include "common/spec/result_validation.h"
#include "common/status_macros.h"
#include "server/core/auth.h"
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

// The refusal of a worker whose token a quarantine holds; names the worker
// whose quarantine holds it, never the token's secret.
absl::Status TokenHeld(const std::string& quarantined_worker) {
  return absl::PermissionDeniedError(absl::StrCat(
      "the token this worker uses is held with quarantined worker ", Clip(quarantined_worker),
      ": no worker of it leases or completes anything until an admin runs `ranksweep workers "
      "unquarantine ",
      Clip(quarantined_worker), "`"));
}

// The version manifest `worker_id` registered with; nullopt for an unknown
// worker.
absl::StatusOr<std::optional<VersionManifest>> FindWorkerVersion(Connection& c,
                                                                 const std::string& worker_id) {
  enum Col : int { kBuildId, kTorchVersion, kCudaVersion, kCount };
  static const std::string* sql = NewSelect<kCount>(
      {"build_id", "torch_version", "cuda_version"}, "FROM workers WHERE id = :id");
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":id", worker_id);
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
  ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT 1 FROM workers WHERE id = :id"));
  q.Bind(":id", worker_id);
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
      {"id"}, absl::StrCat("FROM cells WHERE worker_id = :id AND state = ", kCellLeased));
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":id", worker_id);
  std::vector<int64_t> cells;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    cells.push_back(q.ColumnInt(kId));
  }
  return cells;
}

absl::Status SaveWorker(Connection& c, const std::string& worker_id,
                        const WorkerRegistration& reg, int slots, int64_t now_ms,
                        const std::string& session_hash) {
  // One statement for both cases; a known worker keeps its registered_ms.
  ASSIGN_OR_RETURN(Statement up,
                   c.Prepare("INSERT INTO workers (id, hostname, device, device_name, "
                             "memory_bytes, slots, build_id, torch_version, cuda_version, "
                             "registered_ms, last_seen_ms, owner, session_hash) "
                             "VALUES (:id, :hostname, :device, :device_name, :memory_bytes, "
                             ":slots, :build_id, :torch_version, :cuda_version, :now, :now, "
                             ":owner, :session_hash) "
                             "ON CONFLICT(id) DO UPDATE SET hostname = excluded.hostname, "
                             "device = excluded.device, device_name = excluded.device_name, "
                             "memory_bytes = excluded.memory_bytes, slots = excluded.slots, "
                             "build_id = excluded.build_id, "
                             "torch_version = excluded.torch_version, "
                             "cuda_version = excluded.cuda_version, "
                             "last_seen_ms = excluded.last_seen_ms, owner = excluded.owner, "
                             "session_hash = excluded.session_hash"));
  up.Bind(":id", worker_id).Bind(":hostname", reg.hostname).Bind(":device", reg.device);
  up.Bind(":device_name", reg.device_name).Bind(":memory_bytes", reg.memory_bytes);
  up.Bind(":slots", slots).Bind(":build_id", reg.version.build_id);
  up.Bind(":torch_version", reg.version.torch_version);
  up.Bind(":cuda_version", reg.version.cuda_version).Bind(":now", now_ms);
  up.Bind(":owner", reg.owner).Bind(":session_hash", session_hash);
  return up.Run();
}

absl::StatusOr<std::string> NewSessionSecret() {
  unsigned char random[32];
  if (RAND_bytes(random, sizeof(random)) != 1) {
    return absl::InternalError("the random source (OpenSSL RAND_bytes) failed");
  }
  return absl::StrCat("ws_", absl::WebSafeBase64Escape(absl::string_view(
                                 reinterpret_cast<const char*>(random), sizeof(random))));
}

absl::Status CheckWorkerOwner(Connection& c, const std::string& worker_id,
                              const std::string& owner) {
  enum Col : int { kOwner, kCount };
  static const std::string* sql = NewSelect<kCount>({"owner"}, "FROM workers WHERE id = :id");
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":id", worker_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return absl::OkStatus();
  const std::string bound = q.ColumnText(kOwner);
  if (bound.empty() || bound == owner) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("worker id ", Clip(worker_id), " belongs to another token"));
}

namespace {

// The refusal of a worker by its row's quarantined_ms and the worker whose
// quarantine holds its token ('' for none): CheckNotQuarantined's verdict.
absl::Status Standing(const std::string& worker_id, int64_t quarantined_ms,
                      const std::string& held_by) {
  if (quarantined_ms != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "worker ", Clip(worker_id),
        " is quarantined: it leases and completes nothing until an admin runs `ranksweep "
        "workers unquarantine ",
        Clip(worker_id), "`"));
  }
  if (held_by.empty()) return absl::OkStatus();
  return TokenHeld(held_by);
}

// The columns and FROM clause that read a worker's standing: its
// quarantine, and the worker whose quarantine holds its token.
constexpr const char* kStandingColumns[] = {"w.quarantined_ms", "COALESCE(h.worker_id, '')"};
constexpr const char* kStandingFrom =
    "FROM workers w LEFT JOIN held_tokens h ON h.name = w.owner AND w.owner != '' "
    "WHERE w.id = :id";

}  // namespace

absl::Status CheckNotQuarantined(Connection& c, const std::string& worker_id) {
  enum Col : int { kQuarantinedMs, kHeldBy, kCount };
  static const std::string* sql =
      NewSelect<kCount>({kStandingColumns[0], kStandingColumns[1]}, kStandingFrom);
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":id", worker_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return absl::OkStatus();
  return Standing(worker_id, q.ColumnInt(kQuarantinedMs), q.ColumnText(kHeldBy));
}

absl::Status CheckTokenNotHeld(Connection& c, const std::string& owner) {
  if (owner.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT worker_id FROM held_tokens WHERE name = :name"));
  q.Bind(":name", owner);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return absl::OkStatus();
  return TokenHeld(q.ColumnText(0));
}

absl::Status CheckWorkerSession(Connection& c, const std::string& worker_id,
                                const std::string& owner, const std::string& session_hash) {
  if (worker_id.empty()) return absl::InvalidArgumentError("worker_id: required");
  enum Col : int { kOwner, kSessionHash, kCount };
  static const std::string* sql =
      NewSelect<kCount>({"owner", "session_hash"}, "FROM workers WHERE id = :id");
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":id", worker_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return UnknownWorker(worker_id);
  // The stored hash is compared, never the secret: equal hashes of
  // different lengths cannot leak a prefix through timing.
  if (q.ColumnText(kOwner) != owner || session_hash.empty() ||
      session_hash != q.ColumnText(kSessionHash)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "worker ", Clip(worker_id),
        " is bound to another registration: send the session its RegisterWorker returned, "
        "with the token that registered it"));
  }
  return CheckNotQuarantined(c, worker_id);
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
  ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE workers SET last_seen_ms = :now WHERE id = :id"));
  u.Bind(":id", worker_id).Bind(":now", now_ms);
  RETURN_IF_ERROR(u.Run());
  if (c.Changes() == 0) {
    return UnknownWorker(worker_id);
  }
  return absl::OkStatus();
}

absl::Status RecordCompletions(Connection& c, const std::string& worker_id, int64_t now_ms,
                               int64_t recorded) {
  // One UPDATE of the worker's row for both, the per-call write that
  // TouchWorker is elsewhere.
  ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE workers SET last_seen_ms = :now, completed = "
                                          "completed + :recorded WHERE id = :id"));
  u.Bind(":id", worker_id).Bind(":now", now_ms).Bind(":recorded", recorded);
  return u.Run();
}

absl::StatusOr<VersionManifest> ActiveWorkerVersion(Connection& c, const std::string& worker_id) {
  if (worker_id.empty()) return absl::InvalidArgumentError("worker_id: required");
  // One read of the row for both: a completion asks on every call.
  enum Col : int { kBuildId, kTorchVersion, kCudaVersion, kQuarantinedMs, kHeldBy, kCount };
  static const std::string* sql = NewSelect<kCount>(
      {"w.build_id", "w.torch_version", "w.cuda_version", kStandingColumns[0],
       kStandingColumns[1]},
      kStandingFrom);
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":id", worker_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return UnknownWorker(worker_id);
  RETURN_IF_ERROR(Standing(worker_id, q.ColumnInt(kQuarantinedMs), q.ColumnText(kHeldBy)));
  return VersionManifest{q.ColumnText(kBuildId), q.ColumnText(kTorchVersion),
                         q.ColumnText(kCudaVersion)};
}

absl::StatusOr<VersionManifest> WorkerVersion(Connection& c, const std::string& worker_id) {
  ASSIGN_OR_RETURN(std::optional<VersionManifest> version, FindWorkerVersion(c, worker_id));
  return version.value_or(VersionManifest{});
}

absl::StatusOr<int64_t> RegisteredMemoryBytes(Connection& c, const std::string& worker_id) {
  enum Col : int { kMemoryBytes, kCount };
  static const std::string* sql =
      NewSelect<kCount>({"memory_bytes"}, "FROM workers WHERE id = :id");
  ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
  q.Bind(":id", worker_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  return row ? q.ColumnInt(kMemoryBytes) : 0;
}

}  // namespace ranksweep::server
