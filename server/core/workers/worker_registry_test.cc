#include "server/core/workers/worker_registry.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/core/auth.h"
#include "server/core/store_test_util.h"

namespace ranksweep::server {
namespace {

WorkerRegistration Registration() {
  WorkerRegistration reg;
  reg.hostname = "host";
  reg.device = "cpu";
  reg.memory_bytes = 1 << 30;
  reg.version = {"0.1.0+abc", "2.1.0", ""};
  return reg;
}

TEST(WorkerRegistryTest, RegistrationIsCheckedFieldByFieldInOrder) {
  WorkerRegistration reg = Registration();
  reg.slots = 0;
  auto slots = CheckRegistration(reg);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, 1);  // 0 means one slot
  reg.slots = 64;
  EXPECT_EQ(*CheckRegistration(reg), 64);

  reg.slots = 65;
  reg.worker_id = "bad id";  // also bad: slots is named first
  EXPECT_EQ(CheckRegistration(reg).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckRegistration(reg).status().message(), "slots: must be 1..64, got 65");
  reg.slots = 1;
  EXPECT_EQ(CheckRegistration(reg).status().message(),
            "worker_id: must be 1..64 characters of [A-Za-z0-9._-]");
  reg.worker_id = std::string(65, 'w');
  EXPECT_EQ(CheckRegistration(reg).status().code(), absl::StatusCode::kInvalidArgument);
  reg.worker_id = "gpu-1.a_b";
  reg.device_name = std::string(257, 'd');
  EXPECT_EQ(CheckRegistration(reg).status().message(),
            "device_name must be at most 256 bytes, got 257");
  reg.device_name = "";
  EXPECT_EQ(*CheckRegistration(reg), 1);
}

class WorkerRowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c_ = NewMemoryDatabase();
    ASSERT_NE(c_, nullptr);
  }

  int64_t RegisteredMs(const std::string& id) {
    auto q = c_->Prepare("SELECT registered_ms FROM workers WHERE id = ?1");
    EXPECT_TRUE(q.ok());
    q->Bind(1, id);
    auto row = q->Step();
    return row.ok() && *row ? q->ColumnInt(0) : -1;
  }

  std::unique_ptr<Connection> c_;
};

TEST_F(WorkerRowsTest, UnknownWorkersAreNotFoundAndRegisteredOnesAreSeen) {
  absl::Status touch = TouchWorker(*c_, "wk-1", 5);
  EXPECT_EQ(touch.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(touch.message(), "unknown worker wk-1; register first");
  EXPECT_EQ(TouchWorker(*c_, "", 5).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ActiveWorkerVersion(*c_, "wk-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(WorkerVersion(*c_, "wk-1")->build_id, "");
  EXPECT_EQ(*RegisteredMemoryBytes(*c_, "wk-1"), 0);
  EXPECT_FALSE(*WorkerExists(*c_, "wk-1"));

  WorkerRegistration reg = Registration();
  ASSERT_TRUE(SaveWorker(*c_, "wk-1", reg, 2, 100, "").ok());
  EXPECT_TRUE(*WorkerExists(*c_, "wk-1"));
  EXPECT_TRUE(TouchWorker(*c_, "wk-1", 150).ok());
  EXPECT_EQ(ActiveWorkerVersion(*c_, "wk-1")->build_id, "0.1.0+abc");
  EXPECT_EQ(WorkerVersion(*c_, "wk-1")->torch_version, "2.1.0");
  EXPECT_EQ(*RegisteredMemoryBytes(*c_, "wk-1"), int64_t{1} << 30);
  EXPECT_TRUE(LeasedCellsOf(*c_, "wk-1")->empty());

  // Registering again updates the row and keeps the first registration time.
  reg.memory_bytes = 0;
  ASSERT_TRUE(SaveWorker(*c_, "wk-1", reg, 1, 200, "").ok());
  EXPECT_EQ(RegisteredMs("wk-1"), 100);
  EXPECT_EQ(*RegisteredMemoryBytes(*c_, "wk-1"), 0);
}

TEST_F(WorkerRowsTest, ANewWorkerIdIsOneNoWorkerHas) {
  ASSERT_TRUE(SaveWorker(*c_, "wk-taken", Registration(), 1, 100, "").ok());
  std::vector<std::string> candidates = {"wk-taken", "wk-taken", "wk-free"};
  size_t next = 0;
  auto id = NewWorkerId(*c_, [&] { return candidates[next++]; });
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "wk-free");
  EXPECT_EQ(next, 3u);

  auto none = NewWorkerId(*c_, [] { return std::string("wk-taken"); });
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(none.status().message(), "cannot find a free worker id");
}

TEST_F(WorkerRowsTest, AWorkerActsOnlyWithItsTokenAndItsLatestSession) {
  absl::StatusOr<std::string> first = NewSessionSecret();
  absl::StatusOr<std::string> second = NewSessionSecret();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->size(), 46u);
  EXPECT_EQ(first->rfind("ws_", 0), 0u);
  EXPECT_NE(*first, *second);

  EXPECT_EQ(CheckWorkerSession(*c_, "wk-1", "pool", HashToken(*first)).code(),
            absl::StatusCode::kNotFound);
  WorkerRegistration reg = Registration();
  reg.owner = "pool";
  EXPECT_TRUE(CheckWorkerOwner(*c_, "wk-1", "pool").ok());  // unknown: free to take
  ASSERT_TRUE(SaveWorker(*c_, "wk-1", reg, 1, 100, HashToken(*first)).ok());
  EXPECT_TRUE(CheckWorkerSession(*c_, "wk-1", "pool", HashToken(*first)).ok());
  // The check compares hashes: the secret itself in place of its hash is refused.
  EXPECT_EQ(CheckWorkerSession(*c_, "wk-1", "pool", *first).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckWorkerSession(*c_, "wk-1", "pool", HashToken(*second)).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckWorkerSession(*c_, "wk-1", "pool", "").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckWorkerSession(*c_, "wk-1", "other", HashToken(*first)).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckWorkerSession(*c_, "", "pool", HashToken(*first)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckWorkerOwner(*c_, "wk-1", "pool").ok());
  absl::Status taken = CheckWorkerOwner(*c_, "wk-1", "other");
  EXPECT_EQ(taken.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(taken.message(), "worker id wk-1 belongs to another token");

  // A new registration replaces the session: the old one no longer works.
  ASSERT_TRUE(SaveWorker(*c_, "wk-1", reg, 1, 200, HashToken(*second)).ok());
  EXPECT_EQ(CheckWorkerSession(*c_, "wk-1", "pool", HashToken(*first)).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(CheckWorkerSession(*c_, "wk-1", "pool", HashToken(*second)).ok());
}

}  // namespace
}  // namespace ranksweep::server
