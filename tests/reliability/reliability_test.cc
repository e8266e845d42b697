// Reliability through real processes on loopback: ranksweepd on a temporary
// SQLite file and ranksweep-fake-worker processes (tests/soak).
//  - kill -9 of the coordinator right after CompleteTasks acknowledged
//    results: every acknowledged result is in the file, under its lease;
//  - a lost CompleteTasks reply: the results sent again get back the next
//    task it leased, which does not wait for its lease to expire;
//  - a reader holding a read transaction open in the sqlite3 shell does not
//    block the coordinator's writes;
//  - a message over --max-message-bytes is refused with RESOURCE_EXHAUSTED
//    and stores nothing;
//  - the CLI lists every row of a sweep larger than one QueryResults page,
//    each once, in cell order;
//  - a worker that lies (impossible results, a 100 kB hostname) is refused
//    every time and nothing of its lies is stored;
//  - `ranksweep workers quarantine` takes a worker's results back, its
//    cells train again, and the invalid rows stay queryable.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/convert.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "tests/soak/soak_cluster.h"
#include "tests/support/process.h"

namespace ranksweep {
namespace {

using ::ranksweep::soak::Cluster;
using ::ranksweep::soak::ClusterOptions;
using ::ranksweep::soak::QueryInt;
using ::ranksweep::soak::ReadAcks;
using ::ranksweep::soak::SweepJson;
using ::ranksweep::soak::Verdict;
using ::ranksweep::soak::Verify;
using ::ranksweep::testing::TempDir;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

ClusterOptions Options(const TempDir& dir) {
  ClusterOptions o;
  o.dir = dir.path();
  o.bin = {RANKSWEEPD_BIN, RANKSWEEP_FAKE_WORKER_BIN, RANKSWEEP_CLI_BIN};
  return o;
}

// Polls `sql` (one integer) until it equals `want`; returns the last value.
int64_t WaitForCount(const std::string& db, const std::string& sql, int64_t want,
                     std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  int64_t got = QueryInt(db, sql);
  while (got != want && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    got = QueryInt(db, sql);
  }
  return got;
}

// Acknowledgements ("ack" lines) in the workers' logs, which also hold the
// leases they were given.
int64_t AckCount(const std::vector<std::string>& paths) {
  int64_t total = 0;
  for (const auto& [cell, leases] : ReadAcks(paths)) total += static_cast<int64_t>(leases.size());
  return total;
}

// The stopped cluster's file holds `cells` cells, each with one result, and
// every acknowledged result under its lease; the file is intact.
void ExpectEveryCellStoredOnce(const Cluster& cluster, int64_t cells) {
  Verdict v = Verify(cluster.db(), ReadAcks(cluster.ack_logs()));
  EXPECT_EQ(v.cells, cells);
  EXPECT_EQ(v.results, cells);
  EXPECT_EQ(v.lost, 0);
  EXPECT_EQ(v.duplicated, 0);
  EXPECT_EQ(v.integrity, "ok");
  for (const std::string& p : v.problems) ADD_FAILURE() << p;
}

// ------------------------------------------------- kill -9 after an ack

TEST(CoordinatorCrashTest, EveryAcknowledgedResultSurvivesKill9RightAfterTheAck) {
  constexpr int kKills = 8;
  constexpr int kCells = 4 * 100;
  TempDir dir;
  ClusterOptions options = Options(dir);
  options.max_seeds = 1;  // one CompleteTasks per cell
  options.max_sleep_ms = 2;
  options.lease_seconds = 3;
  Cluster cluster(options);
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  ASSERT_FALSE(cluster.Submit(SweepJson("crash", 4, 100)).empty()) << cluster.error();
  for (int i = 0; i < 4; ++i) cluster.StartWorker(i);

  int64_t verified = 0;
  for (int kill = 0; kill < kKills; ++kill) {
    // Wait for a fresh acknowledgement, then kill at once.
    const int64_t before = AckCount(cluster.ack_logs());
    const auto deadline = Clock::now() + 60s;
    while (AckCount(cluster.ack_logs()) == before && Clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_GT(AckCount(cluster.ack_logs()), before) << "no acknowledgement within 60 s, kill "
                                                     << kill << "\n" << cluster.CoordinatorStderr();
    ASSERT_TRUE(cluster.StopCoordinator(SIGKILL));

    // Every result acknowledged so far is in the file, under its lease.
    const auto acks = ReadAcks(cluster.ack_logs());
    ASSERT_FALSE(acks.empty());
    for (const auto& [cell, leases] : acks) {
      ASSERT_EQ(leases.size(), 1u) << "cell " << cell << " acknowledged under two leases";
      EXPECT_EQ(QueryInt(cluster.db(), "SELECT lease_id FROM results WHERE state = 3 AND cell_id = " +
                                           std::to_string(cell)),
                *leases.begin())
          << "cell " << cell << " acknowledged but not stored (kill " << kill << ")";
    }
    verified = static_cast<int64_t>(acks.size());
    EXPECT_EQ(soak::IntegrityCheck(cluster.db()), "ok");
    ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  }
  EXPECT_GT(verified, 0);

  EXPECT_EQ(WaitForCount(cluster.db(), "SELECT count(*) FROM sweeps WHERE state = 2", 1, 120s), 1)
      << cluster.CoordinatorStderr();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cluster.WaitWorkerReady(i)) << "worker " << i;
  for (int i = 0; i < 4; ++i) cluster.SignalWorker(i, SIGTERM);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(cluster.WaitWorker(i, 30), 0) << "worker " << i;
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
  ExpectEveryCellStoredOnce(cluster, kCells);
}

// ------------------------------------------------- a lost CompleteTasks reply

// The worker's results reach the store but the reply, with the next task the
// call leased, is lost three times. The worker sends the same results again
// and gets that task back: the sweep finishes long before the 600 s lease of
// an abandoned task could expire, and no cell needed a second lease.
TEST(LostReplyTest, ResultsSentAgainGetTheirNextTaskBackInsteadOfLeavingItToExpire) {
  constexpr int kCells = 3 * 4;
  TempDir dir;
  ClusterOptions options = Options(dir);
  options.max_seeds = 1;  // one CompleteTasks per cell, each leasing the next
  options.lease_seconds = 600;
  options.lose_replies = 3;
  Cluster cluster(options);
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  ASSERT_FALSE(cluster.Submit(SweepJson("lost", 3, 4)).empty()) << cluster.error();
  cluster.StartWorker(0);

  EXPECT_EQ(WaitForCount(cluster.db(), "SELECT count(*) FROM sweeps WHERE state = 2", 1, 60s), 1)
      << cluster.CoordinatorStderr();
  ASSERT_TRUE(cluster.WaitWorkerReady(0));
  EXPECT_EQ(cluster.StopWorker(0, SIGTERM), 0);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM cells WHERE attempt = 1"), kCells);
  const std::string log = cluster.CoordinatorStderr();
  int resent = 0;
  for (size_t at = log.find("sent results again"); at != std::string::npos;
       at = log.find("sent results again", at + 1)) {
    ++resent;
  }
  EXPECT_EQ(resent, 3) << log;
  ExpectEveryCellStoredOnce(cluster, kCells);
}

// ------------------------------------------------- readers and the writer

// The sqlite3 shell on a pipe: commands go to its stdin, its output to a
// file that the test polls.
class SqliteShell {
 public:
  SqliteShell(const std::string& db, const std::string& out_path) : out_path_(out_path) {
    const std::string cmd = std::string(SQLITE3_SHELL) + " -batch '" + db + "' > '" + out_path +
                            "' 2>&1";
    pipe_ = popen(cmd.c_str(), "w");
  }
  ~SqliteShell() {
    if (pipe_ != nullptr) Close();
  }
  bool ok() const { return pipe_ != nullptr; }
  void Send(const std::string& sql) {
    fputs(sql.c_str(), pipe_);
    fflush(pipe_);
  }
  // Waits until the output holds a line equal to `line`.
  bool WaitForLine(const std::string& line, std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (("\n" + testing::ReadFile(out_path_)).find("\n" + line + "\n") != std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  std::string Output() const { return testing::ReadFile(out_path_); }
  int Close() {
    int status = pclose(pipe_);
    pipe_ = nullptr;
    return status;
  }

 private:
  std::string out_path_;
  FILE* pipe_ = nullptr;
};

TEST(ReaderTest, LongReadTransactionInTheSqliteShellDoesNotBlockTheWriter) {
  constexpr int kFirst = 4 * 50;   // cells before the reader opens
  constexpr int kSecond = 4 * 75;  // submitted while it is open
  TempDir dir;
  ClusterOptions options = Options(dir);
  Cluster cluster(options);
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  ASSERT_FALSE(cluster.Submit(SweepJson("before-reader", 4, 50)).empty()) << cluster.error();

  SqliteShell reader(cluster.db(), dir.path() + "/reader.out");
  ASSERT_TRUE(reader.ok());
  reader.Send(
      "BEGIN;\n"
      "SELECT 'cells', count(*) FROM cells;\n"
      "SELECT 'results', count(*) FROM results;\n");
  ASSERT_TRUE(reader.WaitForLine("results|0", 30s)) << reader.Output();
  ASSERT_TRUE(reader.WaitForLine("cells|" + std::to_string(kFirst), 1s)) << reader.Output();

  // With the read transaction open: a submit and every cell's result.
  const auto start = Clock::now();
  ASSERT_FALSE(cluster.Submit(SweepJson("beside-reader", 4, 75)).empty()) << cluster.error();
  for (int i = 0; i < 4; ++i) cluster.StartWorker(i);
  EXPECT_EQ(WaitForCount(cluster.db(), "SELECT count(*) FROM sweeps WHERE state = 2", 2, 60s), 2)
      << cluster.CoordinatorStderr();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM cells"), kFirst + kSecond);
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM results WHERE state = 3"),
            kFirst + kSecond);
  EXPECT_LT(seconds, 60.0);

  // The reader's snapshot is still the one it began with, so its
  // transaction really was open throughout; after COMMIT it sees it all.
  reader.Send("SELECT 'still', count(*) FROM results;\n");
  EXPECT_TRUE(reader.WaitForLine("still|0", 10s)) << reader.Output();
  reader.Send("COMMIT;\nSELECT 'after', count(*) FROM results;\n.quit\n");
  EXPECT_TRUE(reader.WaitForLine("after|" + std::to_string(kFirst + kSecond), 10s))
      << reader.Output();
  EXPECT_EQ(reader.Close(), 0) << reader.Output();

  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cluster.WaitWorkerReady(i)) << "worker " << i;
  for (int i = 0; i < 4; ++i) cluster.SignalWorker(i, SIGTERM);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(cluster.WaitWorker(i, 30), 0) << "worker " << i;
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
  Verdict v = Verify(cluster.db(), ReadAcks(cluster.ack_logs()));
  EXPECT_EQ(v.lost, 0);
  EXPECT_EQ(v.duplicated, 0);
  EXPECT_EQ(v.integrity, "ok");
}

// ------------------------------------------------- message size limit

TEST(MessageLimitTest, SubmitOverMaxMessageBytesIsResourceExhaustedAndStoresNothing) {
  constexpr int kLimit = 1 << 20;  // the smallest ranksweepd accepts
  TempDir dir;
  ClusterOptions options = Options(dir);
  options.max_message_bytes = kLimit;
  Cluster cluster(options);
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  auto stub = v1::SweepService::NewStub(
      grpc::CreateChannel(cluster.address(), grpc::InsecureChannelCredentials()));

  SweepSpec spec;
  spec.name = "big";
  spec.heads = {HeadSpec{}};
  spec.ranks = {1};
  // Seeds near 2^63 take 9 bytes each as varints: 150,000 of them are
  // about 1.35 MB, over the 1 MiB limit.
  for (uint64_t i = 0; i < 150000; ++i) spec.seeds.push_back((uint64_t{1} << 62) + i);
  v1::SubmitSweepRequest big;
  *big.mutable_spec() = ToProto(spec);
  ASSERT_GT(big.ByteSizeLong(), static_cast<size_t>(kLimit));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    v1::SubmitSweepResponse reply;
    grpc::Status s = stub->SubmitSweep(&ctx, big, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_TRUE(reply.sweep_id().empty());
  }

  // Under the limit the same kind of request reaches validation ...
  spec.seeds.resize(50000);  // ~450 KB; more seeds than a sweep may have
  v1::SubmitSweepRequest invalid;
  *invalid.mutable_spec() = ToProto(spec);
  ASSERT_LT(invalid.ByteSizeLong(), static_cast<size_t>(kLimit));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    v1::SubmitSweepResponse reply;
    grpc::Status s = stub->SubmitSweep(&ctx, invalid, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find("seeds"), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM sweeps"), 0);
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM cells"), 0);

  // ... and a valid one is stored: the server was healthy all along.
  spec.seeds.resize(8);
  v1::SubmitSweepRequest small;
  *small.mutable_spec() = ToProto(spec);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    v1::SubmitSweepResponse reply;
    grpc::Status s = stub->SubmitSweep(&ctx, small, &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(reply.cells(), 8);
  }
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM sweeps"), 1);
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM cells"), 8);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

// ------------------------------------------------- rows beyond one page

TEST(ResultPagesTest, CliListsEveryRowOfASweepLargerThanOnePage) {
  TempDir dir;
  ClusterOptions options = Options(dir);
  options.max_seeds = 1024;
  options.max_sleep_ms = 0;
  Cluster cluster(options);
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  // 11 ranks x 1,000 seeds: 11,000 rows, two pages of the CLI's 10,000.
  constexpr int kRows = 11000;
  const std::string id = cluster.Submit(SweepJson("pages", 11, 1000));
  ASSERT_FALSE(id.empty()) << cluster.error();
  cluster.StartWorker(0);
  ASSERT_EQ(WaitForCount(cluster.db(), "SELECT count(*) FROM results WHERE state = 3", kRows,
                         120s),
            kRows);
  EXPECT_EQ(cluster.StopWorker(0, SIGTERM), 0);

  ::ranksweep::testing::CommandResult csv = ::ranksweep::testing::RunCommand(
      {RANKSWEEP_CLI_BIN, "--addr=" + cluster.address(), "results", id, "--format", "csv"},
      dir.path() + "/cli");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  // Columns sweep_id, cell_id, ...: the second field of every line after
  // the header.
  ASSERT_EQ(csv.out.rfind("sweep_id,cell_id,", 0), 0u) << csv.out.substr(0, 200);
  std::vector<int64_t> cell_ids;
  size_t start = csv.out.find('\n') + 1;
  while (start < csv.out.size()) {
    const size_t end = csv.out.find('\n', start);
    const size_t field = csv.out.find(',', start) + 1;
    cell_ids.push_back(std::stoll(csv.out.substr(field, csv.out.find(',', field) - field)));
    start = end == std::string::npos ? csv.out.size() : end + 1;
  }
  ASSERT_EQ(cell_ids.size(), static_cast<size_t>(kRows));
  EXPECT_TRUE(std::is_sorted(cell_ids.begin(), cell_ids.end()));
  EXPECT_EQ(std::set<int64_t>(cell_ids.begin(), cell_ids.end()).size(),
            static_cast<size_t>(kRows));
  EXPECT_EQ(cell_ids.front(), QueryInt(cluster.db(), "SELECT min(cell_id) FROM results"));
  EXPECT_EQ(cell_ids.back(), QueryInt(cluster.db(), "SELECT max(cell_id) FROM results"));
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

// ------------------------------------------------- liars and quarantine

// The number of lines of `csv` after its header.
int64_t CsvRows(const std::string& csv) {
  int64_t lines = 0;
  for (char c : csv) lines += c == '\n';
  return lines > 0 ? lines - 1 : 0;
}

int64_t Occurrences(const std::string& text, const std::string& word) {
  int64_t n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

TEST(LiarTest, EveryImpossibleResultIsRefusedAndNothingOfItIsStored) {
  TempDir dir;
  ClusterOptions options = Options(dir);
  options.max_seeds = 4;
  options.liars = 1;
  options.lie_rate = 1.0;  // every report is preceded by a lie
  Cluster cluster(options);
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  const std::string id = cluster.Submit(SweepJson("lies", 2, 4));  // 8 cells, 2 tasks of 4
  ASSERT_FALSE(id.empty()) << cluster.error();
  cluster.StartWorker(0);
  ASSERT_EQ(WaitForCount(cluster.db(), "SELECT count(*) FROM sweeps WHERE state = 2", 1, 60s), 1);
  EXPECT_EQ(cluster.StopWorker(0, SIGTERM), 0);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));

  // One lie at registration and one before each of the two reports, each
  // refused; the honest reports stored all 8 results.
  const soak::LieCounts lies = soak::ReadLies(cluster.ack_logs());
  EXPECT_EQ(lies.rejected, 3);
  EXPECT_EQ(lies.accepted, 0);
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM results WHERE state = 3"), 8);
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT count(*) FROM workers"), 1);
  EXPECT_EQ(QueryInt(cluster.db(), "SELECT max(length(hostname)) FROM workers"), 4);  // "fake"
  const Verdict v = Verify(cluster.db(), ReadAcks(cluster.ack_logs()));
  EXPECT_EQ(v.poisoned, 0);
  EXPECT_EQ(v.lost, 0);
  EXPECT_EQ(v.duplicated, 0);
  // Neither the log nor a reply repeats the 100 kB hostname.
  EXPECT_EQ(cluster.CoordinatorStderr().find(std::string(300, 'h')), std::string::npos);
}

TEST(EchoTest, AHugeSweepIdIsQuotedShortly) {
  TempDir dir;
  Cluster cluster(Options(dir));
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  ::ranksweep::testing::CommandResult status = ::ranksweep::testing::RunCommand(
      {RANKSWEEP_CLI_BIN, "--addr=" + cluster.address(), "status", std::string(7000, 's')},
      dir.path() + "/cli");
  EXPECT_EQ(status.exit_code, 3) << status.err;  // not found
  EXPECT_NE(status.err.find("... (7000 bytes)"), std::string::npos) << status.err;
  EXPECT_LT(status.err.size(), 400u);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

TEST(QuarantineTest, AWorkersCellsTrainAgainAndItsRowsStayQueryableAsInvalid) {
  TempDir dir;
  ClusterOptions options = Options(dir);
  options.max_seeds = 4;
  options.max_sleep_ms = 0;
  Cluster cluster(options);
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.error();
  const std::string id = cluster.Submit(SweepJson("quarantine", 2, 4));  // 8 cells
  ASSERT_FALSE(id.empty()) << cluster.error();
  cluster.StartWorker(0);  // fake-w00, the worker that goes bad
  ASSERT_EQ(WaitForCount(cluster.db(), "SELECT count(*) FROM sweeps WHERE state = 2", 1, 60s), 1);
  EXPECT_EQ(cluster.StopWorker(0, SIGTERM), 0);
  const std::string db = cluster.db();
  ASSERT_EQ(QueryInt(db, "SELECT count(*) FROM results WHERE worker_id = 'fake-w00'"), 8);

  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {RANKSWEEP_CLI_BIN, "--addr=" + cluster.address()});
    return ::ranksweep::testing::RunCommand(args, dir.path() + "/cli");
  };
  auto q = cli({"workers", "quarantine", "fake-w00"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.out, "quarantine 1 of worker fake-w00: 8 results and 0 cached copies invalid, 8 "
                   "cells pending again, running again: " + id + "\n");
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM result_packs"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM result_groups"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM invalid_results WHERE invalid_by = 'local'"), 8);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM cells WHERE state = 1"), 8);
  EXPECT_EQ(QueryInt(db, "SELECT state FROM sweeps"), 1);  // running again
  auto rows = cli({"results", id, "--format", "csv"});
  ASSERT_EQ(rows.exit_code, 0) << rows.err;
  EXPECT_EQ(CsvRows(rows.out), 0);
  rows = cli({"results", id, "--format", "csv", "--include-invalid"});
  ASSERT_EQ(rows.exit_code, 0) << rows.err;
  EXPECT_EQ(CsvRows(rows.out), 8);
  EXPECT_EQ(Occurrences(rows.out, ",INVALID,"), 8);

  // Another worker trains the cells again, under new leases.
  cluster.StartWorker(1);
  ASSERT_EQ(WaitForCount(db, "SELECT count(*) FROM sweeps WHERE state = 2", 1, 60s), 1);
  EXPECT_EQ(cluster.StopWorker(1, SIGTERM), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results WHERE worker_id = 'fake-w01'"), 8);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results r JOIN invalid_results i "
                         "ON i.cell_id = r.cell_id"),
            8);
  EXPECT_EQ(QueryInt(db, "SELECT sum(n) FROM result_groups"), 8);
  rows = cli({"results", id, "--format", "csv", "--include-invalid"});
  ASSERT_EQ(rows.exit_code, 0) << rows.err;
  EXPECT_EQ(CsvRows(rows.out), 16);
  EXPECT_EQ(Occurrences(rows.out, ",INVALID,"), 8);
  EXPECT_EQ(Occurrences(rows.out, ",DONE,"), 8);
  EXPECT_EQ(cli({"results", id, "--summary", "--include-invalid"}).exit_code, 1);

  // Results older than --since stay; a bad time is a usage error.
  q = cli({"workers", "quarantine", "fake-w01", "--since", "2100-01-01T00:00:00Z"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.out, "quarantine 2 of worker fake-w01: 0 results and 0 cached copies invalid, 0 "
                   "cells pending again\n");
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results"), 8);
  EXPECT_EQ(cli({"workers", "quarantine", "fake-w01", "--since", "yesterday"}).exit_code, 1);
  EXPECT_EQ(cli({"workers", "quarantine", "fake-w99"}).exit_code, 3);  // not found
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM quarantines"), 2);
  ASSERT_TRUE(cluster.StopCoordinator(SIGTERM));
}

}  // namespace
}  // namespace ranksweep
