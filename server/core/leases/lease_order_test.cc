#include "server/core/leases/lease_order.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/core/store_test_util.h"
#include "server/core/types.h"

namespace ranksweep::server {
namespace {

SweepSpec KernelSpec() {
  SweepSpec s;
  s.name = "s";
  s.dataset.kind = DatasetKind::kExhaustive;
  s.dataset.m = 2;
  s.dataset.seq_len = 3;
  HeadSpec kernel;
  kernel.kind = HeadKind::kKernel;
  s.heads.push_back(kernel);
  s.ranks = {1, 2, 4, 8};
  s.seed_count = 4;
  return s;
}

class LeaseOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c_ = NewMemoryDatabase();
    ASSERT_NE(c_, nullptr);
  }

  void AddSweep(const std::string& id, const std::string& owner, int priority, int served,
                int state = kSweepRunning) {
    ASSERT_TRUE(c_->Exec(absl::StrCat("INSERT INTO sweeps (id, name, owner, spec_json, priority, "
                                      "state, created_ms, served) VALUES ('", id, "', 'n', '",
                                      owner, "', '{}', ", priority, ", ", state, ", 0, ", served,
                                      ")"))
                    .ok());
    specs_.Put(id, KernelSpec());
  }

  void AddCell(int64_t id, const std::string& sweep, int rank, int state = kCellPending) {
    ASSERT_TRUE(c_->Exec(absl::StrCat("INSERT INTO cells (id, sweep_id, head_index, rank, seed, "
                                      "state) VALUES (", id, ", '", sweep, "', 0, ", rank, ", ",
                                      id, ", ", state, ")"))
                    .ok());
  }

  void SetCellState(const std::string& sweep, int state) {
    ASSERT_TRUE(c_->Exec(absl::StrCat("UPDATE cells SET state = ", state, " WHERE sweep_id = '",
                                      sweep, "'"))
                    .ok());
  }

  // The pick as "sweep head rank seeds", or "none".
  std::string Next(int64_t max_seeds, bool limited = false, int64_t budget = 0) {
    auto pick = NextGroupToLease(*c_, specs_, max_seeds, limited, budget, too_big_);
    if (!pick.ok()) return pick.status().ToString();
    if (!pick->has_value()) return "none";
    return absl::StrCat((*pick)->sweep_id, " ", (*pick)->head_index, " ", (*pick)->rank, " ",
                        (*pick)->seeds);
  }

  std::unique_ptr<Connection> c_;
  SpecCache specs_;
  TooBigGroups too_big_;
};

TEST_F(LeaseOrderTest, PriorityFirstThenTheOwnerAndTheSweepServedLongestAgo) {
  EXPECT_EQ(Next(64), "none");
  AddSweep("a", "alice", 0, 3);
  AddCell(10, "a", 2);
  AddCell(11, "a", 2);
  AddCell(12, "a", 1);
  AddSweep("a2", "alice", 0, 1);
  AddCell(30, "a2", 8);
  AddSweep("b", "bob", 0, 2);
  AddCell(20, "b", 4);
  AddSweep("cancelled", "carol", 9, 0, kSweepCancelled);
  AddCell(40, "cancelled", 1);
  AddSweep("top", "dave", 5, 50);
  AddCell(50, "top", 1, kCellDone);  // nothing pending

  // Alice was served at 3, Bob at 2: Bob's turn, though Alice's a2 (1) is older.
  EXPECT_EQ(Next(64), "b 0 4 64");
  SetCellState("b", kCellLeased);
  // Then Alice's sweep served longest ago.
  EXPECT_EQ(Next(3), "a2 0 8 3");
  SetCellState("a2", kCellLeased);
  // Inside a sweep, the group whose first cell was created first.
  EXPECT_EQ(Next(64), "a 0 2 64");
  // A pending cell of a higher priority goes before all of them.
  AddCell(51, "top", 4);
  EXPECT_EQ(Next(64), "top 0 4 64");
  EXPECT_TRUE(too_big_.empty());
}

TEST_F(LeaseOrderTest, WithABudgetOnlyTheSeedsThatFitAndTooBigGroupsAreRemembered) {
  AddSweep("a", "alice", 0, 0);
  AddCell(1, "a", 8);
  AddCell(2, "a", 1);
  const SweepSpec spec = KernelSpec();
  const MemoryEstimate rank1 = EstimateTaskMemory(MakeTaskSpec(spec, 0, 1, {}));
  const MemoryEstimate rank8 = EstimateTaskMemory(MakeTaskSpec(spec, 0, 8, {}));
  ASSERT_LT(rank1.Total(1), rank8.Total(1));

  // Two rank-8 seeds fit exactly.
  EXPECT_EQ(Next(64, true, rank8.Total(2)), "a 0 8 2");
  EXPECT_EQ(Next(1, true, rank8.Total(2)), "a 0 8 1");
  // Not even one rank-8 seed fits: the rank-1 group, created later, goes.
  EXPECT_EQ(Next(64, true, rank1.Total(1)), "a 0 1 1");
  EXPECT_EQ(too_big_.count({"a", 0, 8, 0}), 1u);
  EXPECT_EQ(too_big_.size(), 1u);
  // Nothing fits at all.
  EXPECT_EQ(Next(64, true, 1), "none");
  EXPECT_EQ(too_big_.size(), 2u);
}

}  // namespace
}  // namespace ranksweep::server
