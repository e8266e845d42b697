#include "server/core/sweeps/sweep_admin.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SweepAdminTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    admin_ = std::make_unique<SweepAdmin>(store_.get(), coordinator_.get());
  }

  // Uses up every attempt of the first task `worker` leases: its cells FAIL.
  int FailOneTask(const std::string& worker) {
    int failed = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
      std::vector<Task> tasks = Acquire(worker, 1, 2);
      EXPECT_EQ(tasks.size(), 1u);
      if (tasks.empty()) return failed;
      EXPECT_TRUE(coordinator_->Fail(worker, LeaseIds(tasks[0]), "out of memory", false).ok());
      failed = static_cast<int>(tasks[0].cells.size());
    }
    return failed;
  }

  void DoneAll(const std::string& worker) {
    while (true) {
      std::vector<Task> tasks = Acquire(worker, 1, 64);
      if (tasks.empty()) return;
      ASSERT_TRUE(coordinator_->Complete(worker, ResultsFor(tasks[0])).ok());
    }
  }

  std::unique_ptr<SweepAdmin> admin_;
};

TEST_F(SweepAdminTest, NotesTagsNamesAndArchiveAreStoredAndListedByTagAndSearch) {
  const std::string a = Submit(MakeSpec("lengths"));
  const std::string b = Submit(MakeSpec("widths"));
  SweepUpdate u;
  u.note = "lr too high; rerun at 0.003";
  u.add_tags = {"paper", "ood", "paper"};
  auto notes = admin_->Update(a, u);
  ASSERT_TRUE(notes.ok()) << notes.status();
  EXPECT_EQ(notes->note, "lr too high; rerun at 0.003");
  EXPECT_THAT(notes->tags, ElementsAre("ood", "paper"));
  EXPECT_FALSE(notes->archived);
  SweepUpdate rename;
  rename.name = "lengths-v2";
  rename.remove_tags = {"ood", "absent"};
  ASSERT_TRUE(admin_->Update(a, rename).ok());
  EXPECT_EQ(Get(a).name, "lengths-v2");
  EXPECT_THAT(admin_->Notes(a)->tags, ElementsAre("paper"));

  SweepFilter paper;
  paper.tag = "paper";
  auto by_tag = admin_->List(paper);
  ASSERT_TRUE(by_tag.ok()) << by_tag.status();
  ASSERT_EQ(by_tag->size(), 1u);
  EXPECT_EQ((*by_tag)[0].sweep.sweep_id, a);
  SweepFilter rerun;
  rerun.search = "RERUN";  // the note, any case
  auto searched = admin_->List(rerun);
  ASSERT_EQ(searched->size(), 1u);
  EXPECT_EQ((*searched)[0].sweep.sweep_id, a);
  SweepFilter widths;
  widths.search = "widths";
  EXPECT_EQ(admin_->List(widths)->size(), 1u);
  EXPECT_EQ(admin_->List({})->size(), 2u);

  SweepUpdate archive;
  archive.archived = true;
  ASSERT_TRUE(admin_->Update(b, archive).ok());
  auto listed = admin_->List({});
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].sweep.sweep_id, a);
  SweepFilter all;
  all.include_archived = true;
  EXPECT_EQ(admin_->List(all)->size(), 2u);
  EXPECT_TRUE(Get(b).sweep_id == b);  // kept
}

TEST_F(SweepAdminTest, BadValuesNameTheFieldAndItsRange) {
  const std::string a = Submit(MakeSpec("a"));
  SweepUpdate u;
  u.name = "has space";
  EXPECT_THAT(admin_->Update(a, u).status().message(),
              HasSubstr("name must use only the characters A-Z a-z 0-9 . _ -"));
  u = SweepUpdate();
  u.add_tags = {"ok", "bad tag"};
  EXPECT_EQ(admin_->Update(a, u).status().message(),
            "tags[1] must use only the characters A-Z a-z 0-9 . _ : -, got \"bad tag\"");
  u = SweepUpdate();
  u.note = std::string(kMaxNoteBytes + 1, 'x');
  EXPECT_EQ(admin_->Update(a, u).status().message(), "note must have 0..4096 bytes, got 4097");
  u = SweepUpdate();
  for (int i = 0; i <= kMaxTags; ++i) u.add_tags.push_back("t" + std::to_string(i));
  EXPECT_EQ(admin_->Update(a, u).status().message(),
            "tags: a sweep has at most 32 tags, got 33");
  EXPECT_TRUE(admin_->Notes(a)->tags.empty());  // nothing of the refused change stayed
  EXPECT_EQ(admin_->Update("sw-nosuch", SweepUpdate()).status().code(),
            absl::StatusCode::kNotFound);
  SweepFilter too_many;
  too_many.limit = 10001;
  EXPECT_EQ(admin_->List(too_many).status().message(),
            "limit must be in 0..10000 (0 = 100), got 10001");
}

TEST_F(SweepAdminTest, RetryGivesFailedAndCancelledCellsNewAttemptsAndNothingElse) {
  // 3 ranks x 4 seeds + 4 softmax = 16 cells; tasks of 2 seeds.
  const std::string sweep = Submit(MakeSpec("retry"));
  const std::string w = Register();
  ASSERT_EQ(FailOneTask(w), 2);
  DoneAll(w);
  EXPECT_EQ(Cells(sweep, CellState::kFailed), 2);
  EXPECT_EQ(Cells(sweep, CellState::kDone), 14);
  EXPECT_EQ(Get(sweep).state, SweepState::kFailed);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results WHERE sweep_id = '" + sweep + "'"), 16);

  EXPECT_EQ(admin_->Retry(sweep, false, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto retried = admin_->Retry(sweep, /*failed=*/true, /*cancelled=*/false);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(*retried, 2);
  EXPECT_EQ(Cells(sweep, CellState::kPending), 2);
  EXPECT_EQ(Cells(sweep, CellState::kDone), 14);  // nothing else trains again
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results WHERE sweep_id = '" + sweep + "'"), 14);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE sweep_id = '" + sweep + "' AND state = " +
                  std::to_string(kCellPending) + " AND attempt = 0 AND worker_id = ''"),
            2);
  EXPECT_EQ(Get(sweep).state, SweepState::kRunning);
  // The two cells train again (a new attempt) and the sweep is DONE.
  std::vector<Task> tasks = Acquire(w, 4, 64);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].cells.size(), 2u);
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(tasks[0])).ok());
  EXPECT_EQ(Cells(sweep, CellState::kDone), 16);
  EXPECT_EQ(Get(sweep).state, SweepState::kDone);
  EXPECT_EQ(*admin_->Retry(sweep, true, true), 0);  // nothing left to retry
  EXPECT_EQ(Get(sweep).state, SweepState::kDone);

  // Cancelled cells, only with `cancelled`.
  const std::string other = Submit(MakeSpec("cancelled", {1}, 2, 0, false));
  ASSERT_EQ(*coordinator_->Cancel(other), 2);
  EXPECT_EQ(*admin_->Retry(other, true, false), 0);
  EXPECT_EQ(*admin_->Retry(other, false, true), 2);
  EXPECT_EQ(Cells(other, CellState::kPending), 2);
  EXPECT_EQ(Get(other).state, SweepState::kRunning);
}

TEST_F(SweepAdminTest, DeleteNeedsTheIdAsConfirmationAndAnEndedSweepThenRemovesEveryRow) {
  const std::string sweep = Submit(MakeSpec("gone", {1}, 2, 0, false));
  const std::string kept = Submit(MakeSpec("kept", {1}, 2, 0, false));
  SweepUpdate u;
  u.add_tags = {"x"};
  ASSERT_TRUE(admin_->Update(sweep, u).ok());
  EXPECT_THAT(admin_->Delete(sweep, sweep).status().message(),
              HasSubstr("is RUNNING; cancel it first"));
  const std::string w = Register();
  DoneAll(w);
  EXPECT_EQ(admin_->Delete(sweep, "sw-").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE sweep_id = '" + sweep + "'"), 2);
  auto out = admin_->Delete(sweep, sweep);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->cells_deleted, 2);
  EXPECT_EQ(out->results_deleted, 2);
  for (const char* table : {"cells", "results", "result_packs", "result_groups",
                            "sweep_tags", "sweep_notes"}) {
    EXPECT_EQ(Count(std::string("SELECT COUNT(*) FROM ") + table + " WHERE sweep_id = '" +
                    sweep + "'"),
              0)
        << table;
  }
  EXPECT_EQ(coordinator_->GetSweep(sweep).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE sweep_id = '" + kept + "'"), 2);
  EXPECT_EQ(admin_->Delete(sweep, sweep).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ranksweep::server
