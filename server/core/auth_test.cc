// Tokens and authorization on a real SQLite file: what is stored (the hash,
// never the token), the token lifecycle, every decision of the Authorizer
// with its exact code, ownership and the loopback rule.
#include "server/core/auth.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/clock.h"
#include "server/core/store.h"

namespace ranksweep::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

using ::ranksweep::TempDir;

// Every byte of the database, its WAL and its shared-memory index.
std::string AllBytes(const std::string& db) {
  std::string bytes;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::ifstream in(db + suffix, std::ios::binary);
    bytes.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return bytes;
}

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(dir_.File("auth.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    tokens_ = std::make_unique<TokenStore>(store_.get(), &clock_);
    authorizer_ = std::make_unique<Authorizer>(tokens_.get());
  }

  std::string Create(const std::string& name, Role role) {
    absl::StatusOr<std::string> token = tokens_->Create(name, role);
    EXPECT_TRUE(token.ok()) << token.status();
    return token.value_or("");
  }

  absl::StatusOr<Principal> Call(const std::string& header, const char* method) {
    std::vector<std::string_view> values;
    if (!header.empty()) values.push_back(header);
    return authorizer_->Authorize(values, method);
  }

  TempDir dir_;
  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<TokenStore> tokens_;
  std::unique_ptr<Authorizer> authorizer_;
};

TEST(RoleTest, NamesRoundTripAndBadNamesListTheRoles) {
  for (Role r : {Role::kAdmin, Role::kUser, Role::kWorker}) {
    EXPECT_EQ(*ParseRole(RoleName(r)), r);
  }
  absl::StatusOr<Role> bad = ParseRole("root");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "role must be one of admin, user, worker; got \"root\"");
  EXPECT_EQ(ParseRole("Admin").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TokenNameTest, AllowsOneToSixtyFourSafeCharacters) {
  EXPECT_TRUE(ValidateTokenName("a").ok());
  EXPECT_TRUE(ValidateTokenName("k8s-workers_2.prod").ok());
  EXPECT_TRUE(ValidateTokenName(std::string(64, 'x')).ok());
  EXPECT_EQ(ValidateTokenName("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateTokenName(std::string(65, 'x')).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateTokenName("alice bob").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateTokenName("a/b").code(), absl::StatusCode::kInvalidArgument);
}

TEST(HashTokenTest, IsLowercaseHexSha256) {
  EXPECT_EQ(HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(AuthTest, CreateStoresOnlyTheHash) {
  const std::string token = Create("alice", Role::kUser);
  EXPECT_TRUE(std::regex_match(token, std::regex("rs_[A-Za-z0-9_-]{43}"))) << token;
  EXPECT_NE(Create("bob", Role::kUser), token);

  std::string hash;
  ASSERT_TRUE(store_
                  ->Read([&](Connection& c) -> absl::Status {
                    auto q = c.Prepare("SELECT hash FROM tokens WHERE name = 'alice'");
                    if (!q.ok()) return q.status();
                    auto row = q->Step();
                    if (!row.ok()) return row.status();
                    hash = q->ColumnText(0);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(hash, HashToken(token));

  // Nowhere in the files: not the token, not its random part.
  const std::string bytes = AllBytes(store_->path());
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(bytes.find(token), std::string::npos);
  EXPECT_EQ(bytes.find(token.substr(3)), std::string::npos);
  EXPECT_NE(bytes.find(hash), std::string::npos);
  store_.reset();  // checkpointed into the main file: still absent
  EXPECT_EQ(AllBytes(dir_.File("auth.db")).find(token.substr(3)), std::string::npos);
}

TEST_F(AuthTest, NamesAreUniqueEvenAfterRevocation) {
  Create("alice", Role::kUser);
  absl::StatusOr<std::string> again = tokens_->Create("alice", Role::kAdmin);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(tokens_->Revoke("alice").ok());
  again = tokens_->Create("alice", Role::kUser);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("revoked"));
  EXPECT_EQ(tokens_->Create("bad name", Role::kUser).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tokens_->List()->size(), 1u);
}

TEST_F(AuthTest, ListShowsEveryTokenInCreationOrder) {
  Create("ops", Role::kAdmin);
  clock_.AdvanceMs(1000);
  Create("alice", Role::kUser);
  clock_.AdvanceMs(1000);
  Create("pool", Role::kWorker);
  clock_.AdvanceMs(1000);
  ASSERT_TRUE(tokens_->Revoke("alice").ok());

  absl::StatusOr<std::vector<TokenRecord>> list = tokens_->List();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].name, "ops");
  EXPECT_EQ((*list)[0].role, Role::kAdmin);
  EXPECT_EQ((*list)[0].created_unix_ms, 1'700'000'000'000);
  EXPECT_EQ((*list)[0].revoked_unix_ms, 0);
  EXPECT_EQ((*list)[1].name, "alice");
  EXPECT_EQ((*list)[1].role, Role::kUser);
  EXPECT_EQ((*list)[1].revoked_unix_ms, 1'700'000'003'000);
  EXPECT_EQ((*list)[2].name, "pool");
  EXPECT_EQ((*list)[2].role, Role::kWorker);
}

TEST_F(AuthTest, RevokeIsImmediateAndIdempotent) {
  const std::string token = Create("alice", Role::kUser);
  ASSERT_TRUE(Call("Bearer " + token, methods::kGetSweep).ok());

  clock_.AdvanceMs(5);
  absl::StatusOr<bool> revoked = tokens_->Revoke("alice");
  ASSERT_TRUE(revoked.ok());
  EXPECT_TRUE(*revoked);
  absl::StatusOr<Principal> after = Call("Bearer " + token, methods::kGetSweep);
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(after.status().message(), "token \"alice\" has been revoked");

  clock_.AdvanceMs(5);
  revoked = tokens_->Revoke("alice");
  ASSERT_TRUE(revoked.ok());
  EXPECT_FALSE(*revoked);
  EXPECT_EQ((*tokens_->List())[0].revoked_unix_ms, 1'700'000'000'005);  // the first time kept
  EXPECT_EQ(tokens_->Revoke("nobody").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(AuthTest, TokensWrittenByAnotherStoreOnTheFileAreSeenAtOnce) {
  // As `ranksweepd token create` does while a server runs on the file.
  auto other = Store::Open(store_->path());
  ASSERT_TRUE(other.ok()) << other.status();
  TokenStore cli(other->get(), &clock_);
  const std::string token = *cli.Create("late", Role::kWorker);
  absl::StatusOr<Principal> p = Call("Bearer " + token, methods::kHeartbeat);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "late");
  ASSERT_TRUE(cli.Revoke("late").ok());
  EXPECT_EQ(Call("Bearer " + token, methods::kHeartbeat).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(AuthTest, MissingMalformedAndUnknownTokensAreUnauthenticated) {
  const std::string token = Create("alice", Role::kUser);
  auto code = [&](const std::string& header) {
    return Call(header, methods::kListSweeps).status().code();
  };
  absl::StatusOr<Principal> none = Call("", methods::kListSweeps);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(none.status().message(), HasSubstr("authorization: Bearer TOKEN"));
  EXPECT_EQ(code("Bearer"), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(code("Bearer "), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(code("Basic " + token), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(code(token), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(code("Bearer " + token + " extra"), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(code("Bearer " + std::string(300, 'a')), absl::StatusCode::kUnauthenticated);
  absl::StatusOr<Principal> unknown =
      Call("Bearer rs_" + std::string(43, 'A'), methods::kListSweeps);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(unknown.status().message(), "unknown token");
  // A malformed header is never echoed: it may be a real token.
  absl::StatusOr<Principal> basic = Call("Basic " + token, methods::kListSweeps);
  EXPECT_THAT(std::string(basic.status().message()), Not(HasSubstr(token)));

  // Two authorization entries are refused even when one is good.
  const std::string good = "Bearer " + token;
  const std::vector<std::string_view> two = {good, good};
  EXPECT_EQ(authorizer_->Authorize(two, methods::kListSweeps).status().code(),
            absl::StatusCode::kUnauthenticated);

  // The scheme is case-insensitive; surrounding blanks are ignored.
  absl::StatusOr<Principal> ok = Call("  bEaReR   " + token + " ", methods::kListSweeps);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->name, "alice");
  EXPECT_EQ(ok->role, Role::kUser);
}

TEST_F(AuthTest, RolesMayCallOnlyTheirService) {
  const std::string admin = "Bearer " + Create("ops", Role::kAdmin);
  const std::string user = "Bearer " + Create("alice", Role::kUser);
  const std::string worker = "Bearer " + Create("pool", Role::kWorker);
  const char* sweep_methods[] = {
      methods::kSubmitSweep, methods::kGetSweep,     methods::kListSweeps, methods::kCancelSweep,
      methods::kWatchSweep,  methods::kQueryResults, methods::kListWorkers};
  const char* worker_methods[] = {methods::kRegisterWorker, methods::kAcquireTasks,
                                  methods::kHeartbeat, methods::kCompleteTasks, methods::kFailTask};
  for (const char* m : sweep_methods) {
    EXPECT_TRUE(Call(admin, m).ok()) << m;
    EXPECT_TRUE(Call(user, m).ok()) << m;
    EXPECT_EQ(Call(worker, m).status().code(), absl::StatusCode::kPermissionDenied) << m;
  }
  for (const char* m : worker_methods) {
    EXPECT_TRUE(Call(admin, m).ok()) << m;
    EXPECT_TRUE(Call(worker, m).ok()) << m;
    EXPECT_EQ(Call(user, m).status().code(), absl::StatusCode::kPermissionDenied) << m;
  }
  EXPECT_EQ(Call(worker, methods::kSubmitSweep).status().message(),
            "token \"pool\" has role worker; /ranksweep.v1.SweepService/SubmitSweep needs role "
            "admin, user");
  // A method without a rule is closed to everyone, admins too.
  absl::StatusOr<Principal> unruled = Call(admin, "/ranksweep.v1.SweepService/DropDatabase");
  EXPECT_EQ(unruled.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(AllowedRoles("/ranksweep.v1.SweepService/DropDatabase"), ElementsAre());
  EXPECT_THAT(AllowedRoles(methods::kAcquireTasks), ElementsAre(Role::kAdmin, Role::kWorker));
}

TEST_F(AuthTest, InsecureLocalMakesEveryCallerTheLocalAdmin) {
  const std::string worker = "Bearer " + Create("pool", Role::kWorker);
  const Authorizer open = Authorizer::InsecureLocal();
  EXPECT_TRUE(open.insecure());
  EXPECT_FALSE(authorizer_->insecure());
  for (const std::vector<std::string_view>& header :
       {std::vector<std::string_view>{}, std::vector<std::string_view>{worker},
        std::vector<std::string_view>{"Bearer nonsense"}}) {
    absl::StatusOr<Principal> p = open.Authorize(header, methods::kSubmitSweep);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->name, "local");
    EXPECT_EQ(p->role, Role::kAdmin);
  }
}

TEST(SweepAccessTest, AdminsAnySweepUsersTheirOwn) {
  const Principal admin{"ops", Role::kAdmin};
  const Principal alice{"alice", Role::kUser};
  EXPECT_TRUE(SeesAllSweeps(admin));
  EXPECT_FALSE(SeesAllSweeps(alice));
  EXPECT_TRUE(CheckSweepAccess(admin, "sw-1", "bob", "cancel").ok());
  EXPECT_TRUE(CheckSweepAccess(alice, "sw-1", "alice", "cancel").ok());
  absl::Status denied = CheckSweepAccess(alice, "sw-1", "bob", "cancel");
  EXPECT_EQ(denied.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(denied.message(), "no sweep sw-1");
}

TEST(LoopbackTest, OnlyLoopbackHostsCount) {
  for (const char* a : {"127.0.0.1:0", "127.0.0.1:50051", "127.3.2.1:1", "localhost:50051",
                        "LOCALHOST:1", "[::1]:50051", "::1:50051"}) {
    EXPECT_TRUE(IsLoopbackListenAddress(a)) << a;
  }
  for (const char* a : {"0.0.0.0:0", "0.0.0.0:50051", "[::]:50051", ":50051", "10.0.0.5:1",
                        "128.0.0.1:1", "example.com:50051", "127.0.0.1", "ipv4:127.0.0.1:1",
                        "unix:/tmp/sock", "[::ffff:10.0.0.1]:1", "127.1:50051"}) {
    EXPECT_FALSE(IsLoopbackListenAddress(a)) << a;
  }
}

}  // namespace
}  // namespace ranksweep::server
