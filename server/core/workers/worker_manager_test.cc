// WorkerManager on its own (no Coordinator): registration bound to its
// token, sessions, and quarantine that holds.
#include "server/core/workers/worker_manager.h"

#include "absl/strings/str_cat.h"
#include "server/core/manager_test_fixture.h"
#include "server/core/workers/worker_registry.h"

namespace ranksweep::server {
namespace {

using WorkerManagerTest = ManagerTest;

TEST_F(WorkerManagerTest, RegisteringAgainReleasesWhatTheOldProcessHeldAndEndsItsSession) {
  const std::string sweep = Submit(MakeSpec("a", {1}, 2, 0, /*with_softmax=*/false));
  const RegisteredWorker first = Register();
  EXPECT_EQ(first.worker_id.rfind("wk-", 0), 0u);
  ASSERT_EQ(Lease(first.worker_id).size(), 1u);
  EXPECT_EQ(Cells(sweep, CellState::kLeased), 2);
  const RegisteredWorker second = Register(first.worker_id);
  EXPECT_EQ(second.worker_id, first.worker_id);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 2);
  EXPECT_EQ(Count("SELECT SUM(attempt) FROM cells"), 0);  // the attempts given back
  EXPECT_TRUE(workers_->CheckSession(first.worker_id, "a", second.session).ok());
  EXPECT_EQ(workers_->CheckSession(first.worker_id, "a", first.session).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(workers_->CheckSession(first.worker_id, "b", second.session).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(workers_->CheckSession("wk-none", "a", second.session).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(WorkerManagerTest, AnotherTokenCannotTakeAWorkerIdAndNothingIsWritten) {
  const RegisteredWorker w = Register("", "a");
  WorkerRegistration reg;
  reg.worker_id = w.worker_id;
  reg.hostname = "elsewhere";
  reg.owner = "b";
  Events events;
  EXPECT_EQ(workers_->Register(reg, events).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM workers WHERE hostname = 'elsewhere'"), 0);
}

TEST_F(WorkerManagerTest, AQuarantinedWorkerCannotRegisterUntilItIsLifted) {
  const RegisteredWorker w = Register();
  Events events;
  auto q = workers_->Quarantine(w.worker_id, 0, "admin", /*hold_token=*/false, events);
  ASSERT_TRUE(q.ok()) << q.status();
  WorkerRegistration reg;
  reg.worker_id = w.worker_id;
  reg.hostname = "host";
  reg.owner = "a";
  EXPECT_EQ(workers_->Register(reg, events).status().code(),
            absl::StatusCode::kPermissionDenied);
  auto lifted = workers_->Unquarantine(w.worker_id, "admin");
  ASSERT_TRUE(lifted.ok()) << lifted.status();
  EXPECT_TRUE(*lifted);
  EXPECT_TRUE(workers_->Register(reg, events).ok());
  EXPECT_EQ(workers_->Unquarantine("wk-none", "admin").status().code(),
            absl::StatusCode::kNotFound);
}

// A check that passed is remembered, and forgotten by every write that can
// change its answer: each remembered check below would pass if it were not.
TEST_F(WorkerManagerTest, ARememberedSessionCheckEndsWithTheWritesThatChangeIt) {
  const RegisteredWorker w = Register("", "a");
  const RegisteredWorker other = Register("", "a");  // the same token's second worker
  ASSERT_TRUE(workers_->CheckSession(w.worker_id, "a", w.session).ok());
  ASSERT_TRUE(workers_->CheckSession(other.worker_id, "a", other.session).ok());
  // Asked again, the same answers (from memory); a wrong session or owner
  // is still refused.
  EXPECT_TRUE(workers_->CheckSession(w.worker_id, "a", w.session).ok());
  EXPECT_EQ(workers_->CheckSession(w.worker_id, "a", other.session).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(workers_->CheckSession(w.worker_id, "b", w.session).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(workers_->CheckSession(w.worker_id, "a", "").code(),
            absl::StatusCode::kPermissionDenied);
  // A remembered session matches itself only: not its prefix, not a longer
  // secret that starts with it, not one that differs in its last byte.
  std::string flipped = w.session;
  flipped.back() = static_cast<char>(flipped.back() ^ 1);
  for (const std::string& wrong :
       {w.session.substr(0, w.session.size() - 1), w.session + "x", flipped}) {
    EXPECT_EQ(workers_->CheckSession(w.worker_id, "a", wrong).code(),
              absl::StatusCode::kPermissionDenied)
        << wrong;
  }
  EXPECT_TRUE(workers_->CheckSession(w.worker_id, "a", w.session).ok());

  // Registering again ends the old session at once.
  const RegisteredWorker again = Register(w.worker_id, "a");
  EXPECT_EQ(workers_->CheckSession(w.worker_id, "a", w.session).code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(workers_->CheckSession(w.worker_id, "a", again.session).ok());

  // A quarantine that holds the token refuses the worker and every other
  // worker of its token, though both passed a moment before.
  Events events;
  ASSERT_TRUE(workers_->Quarantine(w.worker_id, 0, "admin", /*hold_token=*/true, events).ok());
  EXPECT_EQ(workers_->CheckSession(w.worker_id, "a", again.session).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(workers_->CheckSession(other.worker_id, "a", other.session).code(),
            absl::StatusCode::kPermissionDenied);

  // Lifted, both pass again.
  ASSERT_TRUE(workers_->Unquarantine(w.worker_id, "admin").ok());
  EXPECT_TRUE(workers_->CheckSession(w.worker_id, "a", again.session).ok());
  EXPECT_TRUE(workers_->CheckSession(other.worker_id, "a", other.session).ok());
}

// A completion's one read of the worker (ActiveWorkerVersion) refuses what
// the session check refuses, inside the write transaction: an unknown
// worker, a quarantined one, one whose token a quarantine holds.
TEST_F(WorkerManagerTest, ACompletingWorkerIsReadOnceAndRefusedAsTheSessionCheckRefusesIt) {
  WorkerRegistration reg;
  reg.hostname = "host";
  reg.owner = "a";
  reg.version = {"0.1.0+test", "2.1.0", "12.1"};
  Events events;
  absl::StatusOr<RegisteredWorker> registered = workers_->Register(reg, events);
  ASSERT_TRUE(registered.ok()) << registered.status();
  const RegisteredWorker w = *registered;
  const RegisteredWorker other = Register("", "a");
  auto version_of = [&](const std::string& id) {
    absl::StatusOr<VersionManifest> out;
    EXPECT_TRUE(store_->Write([&](Connection& c) {
                        out = ActiveWorkerVersion(c, id);
                        return absl::OkStatus();
                      }).ok());
    return out;
  };
  const absl::StatusOr<VersionManifest> version = version_of(w.worker_id);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(version->build_id, "0.1.0+test");
  EXPECT_EQ(version->torch_version, "2.1.0");
  EXPECT_EQ(version->cuda_version, "12.1");
  EXPECT_EQ(version_of("wk-none").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(version_of("").status().code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(workers_->Quarantine(w.worker_id, 0, "admin", /*hold_token=*/false, events).ok());
  const absl::Status quarantined = version_of(w.worker_id).status();
  EXPECT_EQ(quarantined.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(quarantined.message(),
            absl::StrCat("worker ", w.worker_id,
                         " is quarantined: it leases and completes nothing until an admin runs "
                         "`ranksweep workers unquarantine ",
                         w.worker_id, "`"));
  EXPECT_TRUE(version_of(other.worker_id).ok());  // its token is not held

  ASSERT_TRUE(workers_->Unquarantine(w.worker_id, "admin").ok());
  ASSERT_TRUE(workers_->Quarantine(w.worker_id, 0, "admin", /*hold_token=*/true, events).ok());
  const absl::Status held = version_of(other.worker_id).status();
  EXPECT_EQ(held.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(held.message(),
            absl::StrCat("the token this worker uses is held with quarantined worker ",
                         w.worker_id,
                         ": no worker of it leases or completes anything until an admin runs "
                         "`ranksweep workers unquarantine ",
                         w.worker_id, "`"));

  ASSERT_TRUE(workers_->Unquarantine(w.worker_id, "admin").ok());
  EXPECT_TRUE(version_of(w.worker_id).ok());
  EXPECT_TRUE(version_of(other.worker_id).ok());
}

}  // namespace
}  // namespace ranksweep::server
