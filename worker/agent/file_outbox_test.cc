// The outbox on disk, over a real temporary directory: what one process
// writes the next one reads, bounds, the lock, half-written and corrupt
// files, permissions, the default directories.
#include "worker/agent/file_outbox.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <string>

#include "common/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep::agent {
namespace {

using ::testing::HasSubstr;

std::set<std::string> Files(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.insert(name);
  }
  closedir(d);
  return out;
}

OutboxBatch MakeBatch(int64_t id, uint64_t first_seed, int cells) {
  OutboxBatch b;
  b.id = id;
  b.label = "sw-1 kernel/elu1 r=4 seeds=" + std::to_string(cells);
  for (int i = 0; i < cells; ++i) {
    CellResult r;
    r.cell_id = 100 + id * 10 + i;
    r.lease_id = (int64_t{1} << 62) + id * 10 + i;  // lease ids use 63 bits
    r.result.seed = first_seed + i;
    r.result.steps = 250;
    r.result.final_loss = 0.125;
    r.result.train.sequences = 64;
    r.result.train.exact_accuracy = 0.75;
    r.result.train.position_accuracy = 0.875;
    r.result.train.error = 0.25;
    r.result.device = "cpu";
    r.result.wall_seconds = 1.5;
    b.results.push_back(r);
  }
  return b;
}

TEST(FileOutboxTest, WhatOneProcessWritesTheNextReads) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/a/b/outbox";  // parents made too
  {
    absl::StatusOr<std::unique_ptr<FileOutbox>> outbox = FileOutbox::Open(dir);
    ASSERT_TRUE(outbox.ok()) << outbox.status();
    EXPECT_FALSE((*outbox)->LeftSession().has_value());
    EXPECT_TRUE((*outbox)->LeftBatches().empty());
    ASSERT_TRUE((*outbox)->SaveSession({"wk-0000abcd", "ws_secret", 30, 10}).ok());
    ASSERT_TRUE((*outbox)->Add(MakeBatch(1, 7, 2)).ok());
    ASSERT_TRUE((*outbox)->Add(MakeBatch(2, 9, 1)).ok());
    ASSERT_TRUE((*outbox)->Add(MakeBatch(3, 11, 1)).ok());
    ASSERT_TRUE((*outbox)->Remove(1).ok());
    ASSERT_TRUE((*outbox)->Remove(1).ok());  // twice: harmless
    EXPECT_EQ((*outbox)->batches(), 2);
  }
  EXPECT_EQ(Files(dir), (std::set<std::string>{"lock", "session", "batch-2", "batch-3"}));
  absl::StatusOr<std::unique_ptr<FileOutbox>> again = FileOutbox::Open(dir);
  ASSERT_TRUE(again.ok()) << again.status();
  std::optional<OutboxSession> session = (*again)->LeftSession();
  ASSERT_TRUE(session.has_value());
  EXPECT_EQ(session->worker_id, "wk-0000abcd");
  EXPECT_EQ(session->session, "ws_secret");
  EXPECT_EQ(session->lease_seconds, 30);
  EXPECT_EQ(session->heartbeat_seconds, 10);
  std::vector<OutboxBatch> left = (*again)->LeftBatches();
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].id, 2);
  EXPECT_EQ(left[1].id, 3);
  const OutboxBatch want = MakeBatch(2, 9, 1);
  EXPECT_EQ(left[0].label, want.label);
  ASSERT_EQ(left[0].results.size(), 1u);
  const CellResult& got = left[0].results[0];
  EXPECT_EQ(got.cell_id, want.results[0].cell_id);
  EXPECT_EQ(got.lease_id, want.results[0].lease_id);
  EXPECT_EQ(got.result.seed, 9u);
  EXPECT_EQ(got.result.steps, 250);
  EXPECT_EQ(got.result.final_loss, 0.125);
  EXPECT_EQ(got.result.train.sequences, 64);
  EXPECT_EQ(got.result.train.exact_accuracy, 0.75);
  EXPECT_EQ(got.result.train.position_accuracy, 0.875);
  EXPECT_EQ(got.result.train.error, 0.25);
  EXPECT_EQ(got.result.device, "cpu");
  EXPECT_EQ(got.result.wall_seconds, 1.5);
  EXPECT_EQ((*again)->batches(), 2);
  EXPECT_GT((*again)->bytes(), 0);
  EXPECT_TRUE((*again)->problems().empty());
}

TEST(FileOutboxTest, TheSessionAndBatchesAreReadableByTheOwnerOnly) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  absl::StatusOr<std::unique_ptr<FileOutbox>> outbox = FileOutbox::Open(dir);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  ASSERT_TRUE((*outbox)->SaveSession({"w", "ws_secret", 30, 10}).ok());
  ASSERT_TRUE((*outbox)->Add(MakeBatch(1, 1, 1)).ok());
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((dir + "/session").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir + "/batch-1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(FileOutboxTest, ASecondOpenOfOneDirectoryIsRefusedWhileTheFirstHoldsIt) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  absl::StatusOr<std::unique_ptr<FileOutbox>> first = FileOutbox::Open(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<FileOutbox>> second = FileOutbox::Open(dir);
  EXPECT_EQ(second.status(),
            absl::FailedPreconditionError(
                "outbox " + dir +
                " is in use by another worker process; give each worker its own --outbox-dir"));
  first->reset();
  EXPECT_TRUE(FileOutbox::Open(dir).ok());
}

TEST(FileOutboxTest, BoundsRefuseABatchAndWriteNothingOfIt) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  absl::StatusOr<std::unique_ptr<FileOutbox>> outbox =
      FileOutbox::Open(dir, OutboxLimits{2, int64_t{1} << 20});
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  ASSERT_TRUE((*outbox)->Add(MakeBatch(1, 1, 1)).ok());
  ASSERT_TRUE((*outbox)->Add(MakeBatch(2, 2, 1)).ok());
  EXPECT_EQ((*outbox)->Add(MakeBatch(3, 3, 1)),
            absl::ResourceExhaustedError("outbox " + dir +
                                         " is full: 2 batches already, the bound is 2 "
                                         "(--outbox-max-batches)"));
  EXPECT_EQ(Files(dir), (std::set<std::string>{"lock", "batch-1", "batch-2"}));
  // Room again once one is acknowledged.
  ASSERT_TRUE((*outbox)->Remove(1).ok());
  EXPECT_TRUE((*outbox)->Add(MakeBatch(3, 3, 1)).ok());

  TempDir tmp2;
  const std::string small = tmp2.path() + "/outbox";
  absl::StatusOr<std::unique_ptr<FileOutbox>> tiny =
      FileOutbox::Open(small, OutboxLimits{1000, 4096});
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  const absl::Status s = (*tiny)->Add(MakeBatch(1, 1, 200));  // well over 4 kB
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("would pass the bound of 4096 bytes (--outbox-max-bytes)"));
  EXPECT_EQ(Files(small), (std::set<std::string>{"lock"}));
  EXPECT_EQ((*tiny)->bytes(), 0);
}

TEST(FileOutboxTest, BadLimitsNameTheirFlag) {
  TempDir tmp;
  EXPECT_EQ(FileOutbox::Open(tmp.path() + "/o", OutboxLimits{0, 1 << 20}).status(),
            absl::InvalidArgumentError("--outbox-max-batches must be at least 1, got 0"));
  EXPECT_EQ(FileOutbox::Open(tmp.path() + "/o", OutboxLimits{10, 100}).status(),
            absl::InvalidArgumentError("--outbox-max-bytes must be at least 4096, got 100"));
}

// A process killed in the middle of a write leaves NAME.tmp, never a part
// of NAME; a file that does not parse is set aside, not sent.
TEST(FileOutboxTest, HalfWrittenFilesAreDroppedAndCorruptOnesSetAside) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/outbox";
  {
    absl::StatusOr<std::unique_ptr<FileOutbox>> outbox = FileOutbox::Open(dir);
    ASSERT_TRUE(outbox.ok()) << outbox.status();
    ASSERT_TRUE((*outbox)->Add(MakeBatch(4, 1, 1)).ok());
  }
  std::ofstream(dir + "/batch-5.tmp") << "ranksweep-outbox-batch 1\nlabel x\n\x08";
  std::ofstream(dir + "/batch-6") << "not a batch";
  std::ofstream(dir + "/session") << "garbage";
  absl::StatusOr<std::unique_ptr<FileOutbox>> outbox = FileOutbox::Open(dir);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  ASSERT_EQ((*outbox)->LeftBatches().size(), 1u);
  EXPECT_EQ((*outbox)->LeftBatches()[0].id, 4);
  EXPECT_FALSE((*outbox)->LeftSession().has_value());
  EXPECT_THAT((*outbox)->problems(),
              ::testing::ElementsAre(dir + "/session is not a session file; ignored",
                                     dir + "/batch-6 does not parse as a batch; moved to " + dir +
                                         "/batch-6.bad"));
  EXPECT_EQ(Files(dir),
            (std::set<std::string>{"lock", "session", "batch-4", "batch-6.bad"}));
}

TEST(FileOutboxTest, DefaultOutboxesAreOnePerWorkerIdOrTheFirstFreeSeat) {
  TempDir tmp;
  const std::string base = tmp.path() + "/state";
  auto a = OpenDefaultOutbox(base, "127.0.0.1:50051", "");
  auto b = OpenDefaultOutbox(base, "127.0.0.1:50051", "");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->dir(), base + "/127.0.0.1_50051/seat-0");
  EXPECT_EQ((*b)->dir(), base + "/127.0.0.1_50051/seat-1");
  // A restarted worker takes back the seat its predecessor freed.
  a->reset();
  auto c = OpenDefaultOutbox(base, "127.0.0.1:50051", "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->dir(), base + "/127.0.0.1_50051/seat-0");

  auto named = OpenDefaultOutbox(base, "gpu-host:50051", "w-3");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ((*named)->dir(), base + "/gpu-host_50051/id-w-3");
  EXPECT_EQ(OpenDefaultOutbox(base, "gpu-host:50051", "w-3").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(FileOutboxTest, TheDefaultBaseFollowsXdgStateHomeThenHome) {
  const char* old_state = getenv("XDG_STATE_HOME");
  const char* old_home = getenv("HOME");
  const std::string saved_state = old_state ? old_state : "";
  const std::string saved_home = old_home ? old_home : "";
  setenv("XDG_STATE_HOME", "/var/lib/w", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(DefaultOutboxBase().value_or(""), "/var/lib/w/ranksweep/worker-outbox");
  unsetenv("XDG_STATE_HOME");
  EXPECT_EQ(DefaultOutboxBase().value_or(""), "/home/u/.local/state/ranksweep/worker-outbox");
  unsetenv("HOME");
  EXPECT_EQ(DefaultOutboxBase().status().code(), absl::StatusCode::kFailedPrecondition);
  if (old_state) setenv("XDG_STATE_HOME", saved_state.c_str(), 1);
  if (old_home) setenv("HOME", saved_home.c_str(), 1);
}

}  // namespace
}  // namespace ranksweep::agent
