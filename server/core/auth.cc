#include "server/core/auth.h"

#include <arpa/inet.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/spec/result_validation.h"  // Clip
#include "common/status_macros.h"
#include "server/core/sql_columns.h"

namespace ranksweep::server {
namespace {

// Debian's Abseil has its own string_view; the API speaks std::string_view.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }
std::string_view StdSv(absl::string_view s) { return std::string_view(s.data(), s.size()); }

constexpr char kTokenPrefix[] = "rs_";
constexpr int kTokenRandomBytes = 32;
// Longer "tokens" are not ours; they are rejected before hashing.
constexpr size_t kMaxPresentedToken = 256;
constexpr size_t kMaxTokenName = 64;

struct Rule {
  const char* method;
  std::vector<Role> roles;
};

const std::vector<Rule>& Rules() {
  static const std::vector<Rule>* rules = [] {
    const std::vector<Role> people = {Role::kAdmin, Role::kUser};
    const std::vector<Role> workers = {Role::kAdmin, Role::kWorker};
    const std::vector<Role> admins = {Role::kAdmin};
    return new std::vector<Rule>{
        {methods::kSubmitSweep, people},    {methods::kGetSweep, people},
        {methods::kValidateSweep, people},
        {methods::kListSweeps, people},     {methods::kCancelSweep, people},
        {methods::kWatchSweep, people},     {methods::kQueryResults, people},
        {methods::kListWorkers, people},    {methods::kRegisterWorker, workers},
        {methods::kAcquireTasks, workers},  {methods::kHeartbeat, workers},
        {methods::kCompleteTasks, workers}, {methods::kFailTask, workers},
        {methods::kQuarantineWorker, admins}, {methods::kUnquarantineWorker, admins},
    };
  }();
  return *rules;
}

std::string RoleList(const std::vector<Role>& roles) {
  return absl::StrJoin(roles, ", ", [](std::string* out, Role r) { out->append(RoleName(r)); });
}

// A token's record, read by ReadRecord() in this order.
enum RecordCol : int { kName, kRole, kCreatedMs, kRevokedMs, kRecordColCount };
constexpr absl::string_view kRecordCols[] = {"name", "role", "created_ms", "revoked_ms"};

// "SELECT <a token's record> FROM tokens <rest>", built once per statement.
const std::string* NewRecordSelect(absl::string_view rest) {
  return NewSelect<kRecordColCount>(kRecordCols, absl::StrCat("FROM tokens ", rest));
}

// Whether a token of that name exists and when it was revoked (0: active).
enum RevokedCol : int { kRevokedOnly, kRevokedColCount };
const std::string& RevokedByNameSql() {
  static const std::string* sql =
      NewSelect<kRevokedColCount>({"revoked_ms"}, "FROM tokens WHERE name = :name");
  return *sql;
}

absl::StatusOr<TokenRecord> ReadRecord(const Statement& q) {
  TokenRecord r;
  r.name = q.ColumnText(kName);
  absl::StatusOr<Role> role = ParseRole(q.ColumnText(kRole));
  if (!role.ok()) {
    return absl::InternalError(absl::StrCat(
        "token '", r.name, "' has a bad role in the database: ", role.status().message()));
  }
  r.role = *role;
  r.created_unix_ms = q.ColumnInt(kCreatedMs);
  r.revoked_unix_ms = q.ColumnInt(kRevokedMs);
  return r;
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kUser:
      return "user";
    case Role::kWorker:
      return "worker";
  }
  return "unknown";
}

absl::StatusOr<Role> ParseRole(std::string_view name) {
  for (Role r : {Role::kAdmin, Role::kUser, Role::kWorker}) {
    if (name == RoleName(r)) return r;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("role must be one of admin, user, worker; got \"", Sv(name), "\""));
}

Principal LocalPrincipal() { return Principal{"local", Role::kAdmin}; }

absl::Status ValidateTokenName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTokenName) {
    return absl::InvalidArgumentError(
        absl::StrCat("token name must be 1..", kMaxTokenName, " characters, got ", name.size()));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("token name \"", Sv(name), "\" may contain only A-Z a-z 0-9 . _ -"));
    }
  }
  return absl::OkStatus();
}

std::string HashToken(std::string_view token) {
  // The digest fetched once: SHA256() looks the algorithm up by name, under
  // OpenSSL's locks, on every call, and every worker call hashes its session.
  static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  if (kSha256 == nullptr ||
      EVP_Digest(token.data(), token.size(), digest, nullptr, kSha256, nullptr) != 1) {
    SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

// ------------------------------------------------------------------ TokenStore

TokenStore::TokenStore(Store* store, const Clock* clock) : store_(store), clock_(clock) {}

absl::StatusOr<std::string> TokenStore::Create(const std::string& name, Role role) {
  RETURN_IF_ERROR(ValidateTokenName(name));
  unsigned char random[kTokenRandomBytes];
  if (RAND_bytes(random, sizeof(random)) != 1) {
    return absl::InternalError("the random source (OpenSSL RAND_bytes) failed");
  }
  std::string token =
      absl::StrCat(kTokenPrefix, absl::WebSafeBase64Escape(absl::string_view(
                                     reinterpret_cast<char*>(random), sizeof(random))));
  const std::string hash = HashToken(token);
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    {
      ASSIGN_OR_RETURN(Statement q, c.Prepare(RevokedByNameSql()));
      q.Bind(":name", name);
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (row) {
        const bool revoked = q.ColumnInt(kRevokedOnly) != 0;
        return absl::AlreadyExistsError(
            absl::StrCat("a token named \"", name, "\" already exists",
                         revoked ? " (revoked; names of revoked tokens stay taken)" : ""));
      }
    }
    ASSIGN_OR_RETURN(Statement ins,
                     c.Prepare("INSERT INTO tokens (name, role, hash, created_ms, revoked_ms) "
                               "VALUES (:name, :role, :hash, :created_ms, 0)"));
    ins.Bind(":name", name).Bind(":role", RoleName(role)).Bind(":hash", hash);
    ins.Bind(":created_ms", clock_->NowMs());
    return ins.Run();
  }));
  return token;
}

absl::StatusOr<std::vector<TokenRecord>> TokenStore::List() {
  std::vector<TokenRecord> records;
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    static const std::string* sql = NewRecordSelect("ORDER BY created_ms, name");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      ASSIGN_OR_RETURN(TokenRecord r, ReadRecord(q));
      records.push_back(std::move(r));
    }
    return absl::OkStatus();
  }));
  return records;
}

absl::StatusOr<bool> TokenStore::Revoke(const std::string& name) {
  RETURN_IF_ERROR(ValidateTokenName(name));
  bool revoked = false;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    revoked = false;
    {
      ASSIGN_OR_RETURN(Statement q, c.Prepare(RevokedByNameSql()));
      q.Bind(":name", name);
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) return absl::NotFoundError(absl::StrCat("no token named \"", name, "\""));
      if (q.ColumnInt(kRevokedOnly) != 0) return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE tokens SET revoked_ms = :revoked_ms WHERE name = :name"));
    // Never 0, which means "active", even on a clock at the epoch.
    u.Bind(":name", name).Bind(":revoked_ms", std::max<int64_t>(1, clock_->NowMs()));
    RETURN_IF_ERROR(u.Run());
    revoked = true;
    return absl::OkStatus();
  }));
  return revoked;
}

absl::StatusOr<std::optional<TokenRecord>> TokenStore::Lookup(std::string_view token) {
  const std::string hash = HashToken(token);
  std::optional<TokenRecord> record;
  RETURN_IF_ERROR(store_->QuickRead([&](Connection& c) -> absl::Status {
    static const std::string* sql = NewRecordSelect("WHERE hash = :hash");
    ASSIGN_OR_RETURN(Statement q, c.Prepare(*sql));
    q.Bind(":hash", hash);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      ASSIGN_OR_RETURN(record, ReadRecord(q));
    }
    return absl::OkStatus();
  }));
  return record;
}

// ------------------------------------------------------------------ Authorizer

std::vector<Role> AllowedRoles(std::string_view method) {
  for (const Rule& rule : Rules()) {
    if (method == rule.method) return rule.roles;
  }
  return {};
}

Authorizer::Authorizer(TokenStore* tokens) : tokens_(tokens) {}

Authorizer Authorizer::InsecureLocal() { return Authorizer(); }

absl::StatusOr<Principal> Authorizer::Authorize(const std::vector<std::string_view>& authorization,
                                                std::string_view method) const {
  if (insecure()) return LocalPrincipal();

  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "missing credentials: send the metadata 'authorization: Bearer TOKEN' "
        "(ranksweep and ranksweep-worker take it from RANKSWEEP_TOKEN)");
  }
  if (authorization.size() > 1) {
    return absl::UnauthenticatedError("more than one 'authorization' metadata entry");
  }
  // "Bearer TOKEN": the scheme is case-insensitive (RFC 7235), the token one
  // word. The header is never echoed: it may hold a real token.
  std::string_view header = StdSv(absl::StripAsciiWhitespace(Sv(authorization.front())));
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(Sv(header.substr(0, kScheme.size())), Sv(kScheme))) {
    return absl::UnauthenticatedError("the 'authorization' metadata must be 'Bearer TOKEN'");
  }
  std::string_view token =
      StdSv(absl::StripLeadingAsciiWhitespace(Sv(header.substr(kScheme.size()))));
  if (token.empty() || token.size() > kMaxPresentedToken ||
      std::any_of(token.begin(), token.end(),
                  [](char c) { return !absl::ascii_isgraph(static_cast<unsigned char>(c)); })) {
    return absl::UnauthenticatedError("the 'authorization' metadata must be 'Bearer TOKEN'");
  }

  ASSIGN_OR_RETURN(std::optional<TokenRecord> record, tokens_->Lookup(token));
  if (!record.has_value()) return absl::UnauthenticatedError("unknown token");
  if (record->revoked_unix_ms != 0) {
    return absl::UnauthenticatedError(
        absl::StrCat("token \"", record->name, "\" has been revoked"));
  }
  Principal principal{record->name, record->role};

  const std::vector<Role> allowed = AllowedRoles(method);
  if (allowed.empty()) {
    return absl::PermissionDeniedError(absl::StrCat("no access rule for ", Sv(method)));
  }
  if (std::find(allowed.begin(), allowed.end(), principal.role) == allowed.end()) {
    return absl::PermissionDeniedError(absl::StrCat("token \"", principal.name, "\" has role ",
                                                    RoleName(principal.role), "; ", Sv(method),
                                                    " needs role ", RoleList(allowed)));
  }
  return principal;
}

// ------------------------------------------------------------------ ownership

bool SeesAllSweeps(const Principal& principal) { return principal.role == Role::kAdmin; }

absl::Status CheckSweepAccess(const Principal& principal, std::string_view sweep_id,
                              std::string_view owner, std::string_view action) {
  (void)action;
  if (SeesAllSweeps(principal) || owner == principal.name) return absl::OkStatus();
  // The very words an unknown id gets (SweepQueries::SweepOwner), so that
  // what a caller can see never depends on knowing another's sweep id.
  return absl::NotFoundError(absl::StrCat("no sweep ", Clip(absl::string_view(sweep_id.data(), sweep_id.size()))));
}

// ------------------------------------------------------------------ addresses

bool IsLoopbackListenAddress(std::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return false;
  std::string host(address.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  unsigned char v4[4];
  if (inet_pton(AF_INET, host.c_str(), v4) == 1) return v4[0] == 127;
  unsigned char v6[16];
  if (inet_pton(AF_INET6, host.c_str(), v6) == 1) {
    static const unsigned char kLoopback6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return std::equal(v6, v6 + 16, kLoopback6);
  }
  return false;
}

}  // namespace ranksweep::server
