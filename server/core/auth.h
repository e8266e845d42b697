// Who may call what on ranksweepd: bearer tokens with a role, stored hashed
// in the coordinator's database, and the rules that map a call to the roles
// allowed to make it. Knows nothing of gRPC: the service adapters hand in the
// call's `authorization` metadata and its full method name.
//
// Roles:
//   admin   everything: every method, every sweep
//   user    SweepService; sees and cancels only the sweeps it submitted
//   worker  WorkerService only
// Methods outside ranksweep.v1 (grpc.health.v1, server reflection) never
// reach Authorize(): ranksweepd leaves them open so that probes and grpcurl
// work without a token.
//
// Tokens are "rs_" followed by 43 base64url characters (32 bytes from
// OpenSSL's CSPRNG). Only their SHA-256 is stored, so the database file alone
// does not let anyone call the server. A token is shown once, by Create().
// Tokens are looked up per call on the store's QuickRead() connection, with no
// cache: a token created or revoked by another process (`ranksweepd token`)
// takes effect on the next call.
//
// Thread-safety: TokenStore and Authorizer are safe to use from many threads;
// the free functions are pure.
#ifndef RANKSWEEP_SERVER_CORE_AUTH_H_
#define RANKSWEEP_SERVER_CORE_AUTH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/clock.h"
#include "server/core/store.h"

namespace ranksweep::server {

enum class Role { kAdmin, kUser, kWorker };

// "admin", "user", "worker".
const char* RoleName(Role role);
// InvalidArgument naming the allowed roles for anything else.
absl::StatusOr<Role> ParseRole(std::string_view name);

// The caller a request is made for.
struct Principal {
  std::string name;  // the token's name; "local" in insecure-local mode
  Role role = Role::kUser;
};

// Every caller of a server run with --insecure-local: "local", an admin.
Principal LocalPrincipal();

// A token as the tokens table keeps it; the token itself is never kept.
struct TokenRecord {
  std::string name;
  Role role = Role::kUser;
  int64_t created_unix_ms = 0;
  int64_t revoked_unix_ms = 0;  // 0: active
};

// OK for 1..64 characters of [A-Za-z0-9._-]; InvalidArgument otherwise.
absl::Status ValidateTokenName(std::string_view name);

// Lowercase hex SHA-256 of `token`: what the tokens table stores. A token
// carries 256 random bits, so an unsalted fast hash is enough: there is
// nothing to guess offline.
std::string HashToken(std::string_view token);

// The tokens table. Create, List and Revoke are for the `ranksweepd token`
// subcommands; Lookup is for the Authorizer on every call.
class TokenStore {
 public:
  // `store` and `clock` are not owned and must outlive this object.
  TokenStore(Store* store, const Clock* clock);

  // Makes a new token for `name` with `role` and returns it: the only time
  // the token exists outside the caller. InvalidArgument for a bad name;
  // AlreadyExists when the name is taken (also by a revoked token); Internal
  // when the random source fails.
  absl::StatusOr<std::string> Create(const std::string& name, Role role);

  // Every token, active and revoked, in creation order.
  absl::StatusOr<std::vector<TokenRecord>> List();

  // Revokes the token called `name`: calls with it fail from the next one on.
  // Returns true when this call revoked it, false when it already was (the
  // first revocation time is kept). NotFound for an unknown name.
  absl::StatusOr<bool> Revoke(const std::string& name);

  // The record of `token`, revoked or not; nullopt when no token has its
  // hash. A point lookup on Store::QuickRead().
  absl::StatusOr<std::optional<TokenRecord>> Lookup(std::string_view token);

 private:
  Store* const store_;
  const Clock* const clock_;
};

// Full gRPC method names of ranksweep.v1, as the adapters pass them to
// Authorize(). Every one of them has a rule.
namespace methods {
inline constexpr char kSubmitSweep[] = "/ranksweep.v1.SweepService/SubmitSweep";
inline constexpr char kGetSweep[] = "/ranksweep.v1.SweepService/GetSweep";
inline constexpr char kValidateSweep[] = "/ranksweep.v1.SweepService/ValidateSweep";
inline constexpr char kListSweeps[] = "/ranksweep.v1.SweepService/ListSweeps";
inline constexpr char kCancelSweep[] = "/ranksweep.v1.SweepService/CancelSweep";
inline constexpr char kWatchSweep[] = "/ranksweep.v1.SweepService/WatchSweep";
inline constexpr char kQueryResults[] = "/ranksweep.v1.SweepService/QueryResults";
inline constexpr char kListWorkers[] = "/ranksweep.v1.SweepService/ListWorkers";
inline constexpr char kQuarantineWorker[] = "/ranksweep.v1.SweepService/QuarantineWorker";
inline constexpr char kUnquarantineWorker[] =
    "/ranksweep.v1.SweepService/UnquarantineWorker";
inline constexpr char kRegisterWorker[] = "/ranksweep.v1.WorkerService/RegisterWorker";
inline constexpr char kAcquireTasks[] = "/ranksweep.v1.WorkerService/AcquireTasks";
inline constexpr char kHeartbeat[] = "/ranksweep.v1.WorkerService/Heartbeat";
inline constexpr char kCompleteTasks[] = "/ranksweep.v1.WorkerService/CompleteTasks";
inline constexpr char kFailTask[] = "/ranksweep.v1.WorkerService/FailTask";
}  // namespace methods

// The roles that may call `method`, in the order admin, user, worker; empty
// for a method without a rule (which nobody may call).
std::vector<Role> AllowedRoles(std::string_view method);

class Authorizer {
 public:
  // Authentication on: every call needs an active token. `tokens` is not
  // owned and must outlive this object.
  explicit Authorizer(TokenStore* tokens);

  // --insecure-local: nothing is checked and every caller, with a token or
  // without, is LocalPrincipal(). Only for a server bound to loopback.
  static Authorizer InsecureLocal();

  bool insecure() const { return tokens_ == nullptr; }

  // Decides one call. `authorization` holds the values of the call's
  // `authorization` metadata (normally one: "Bearer TOKEN", the scheme
  // case-insensitive); `method` is the full gRPC method name. Returns the
  // caller, or
  //   Unauthenticated: no authorization, more than one, not "Bearer TOKEN",
  //     or a token that is unknown or revoked;
  //   PermissionDenied: the token's role may not call `method` (the message
  //     names the roles that may), or `method` has no rule;
  //   the store's error (Unavailable, Internal) when the lookup fails.
  // Messages never contain the presented token or header.
  absl::StatusOr<Principal> Authorize(const std::vector<std::string_view>& authorization,
                                      std::string_view method) const;

 private:
  Authorizer() = default;

  TokenStore* tokens_ = nullptr;
};

// Admins see every sweep; users only their own.
bool SeesAllSweeps(const Principal& principal);

// OK when `principal` may `action` ("read", "cancel") the sweep `sweep_id`
// owned by `owner`: admins any sweep, others only their own. NotFound
// otherwise, with the message an unknown sweep id gets ("no sweep ID"), so
// that another's sweep cannot be told from one that does not exist.
absl::Status CheckSweepAccess(const Principal& principal, std::string_view sweep_id,
                              std::string_view owner, std::string_view action);

// Whether a --listen address (HOST:PORT) binds loopback only: a host in
// 127.0.0.0/8, [::1] (or ::1) or "localhost". An empty host, 0.0.0.0, [::],
// any other name and URI forms ("ipv4:...", "unix:...") are not.
bool IsLoopbackListenAddress(std::string_view address);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_AUTH_H_
