// End to end through real processes on loopback: ranksweepd on a temporary
// SQLite file (port 0), real ranksweep-worker processes training real (small)
// heads, and the real ranksweep CLI. Checks every cell's result both through
// the CLI's JSON and by opening the SQLite file.
#include <signal.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/process.h"
#include "tests/support/small_sweep.h"
#include "tests/support/text.h"

namespace ranksweep {
namespace {

using ::ranksweep::testing::Count;

using ::ranksweep::testing::CommandResult;
using ::ranksweep::testing::Process;
using ::ranksweep::testing::RunCommand;
using ::ranksweep::testing::TempDir;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kSpec = ranksweep::testing::SmallSweepSpec("e2e");
constexpr int kCells = ranksweep::testing::kSmallSweepCells;
// Steps of OneLongCell (below) for a task that outlasts the test's kill of
// the coordinator by seconds: 20,000 steps took 14.7 s on one core of a
// 2-core machine under a load of 12, so this is about 4 s there.
constexpr int kOutageSteps = 5000;

class Cluster {
 public:
  explicit Cluster(const TempDir& dir) : dir_(dir.path()), db_(dir.path() + "/ranksweep.db") {}

  // Starts ranksweepd; `port` 0 picks a free one. Returns the address.
  // `lease_seconds` outlives a planned outage where a test needs it to.
  std::string StartServer(const std::string& port = "0", int lease_seconds = 10,
                          std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {RANKSWEEPD_BIN, "--listen=127.0.0.1:" + port, "--db=" + db_,
                                     "--lease_seconds=" + std::to_string(lease_seconds),
                                     "--insecure_local"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    server_ = std::make_unique<Process>(argv, dir_ + "/server" + std::to_string(server_starts_++));
    auto bound = server_->WaitForStdout(std::regex("listening on (\\S+)"), 30s);
    EXPECT_TRUE(bound.has_value()) << server_->Stderr();
    addr_ = bound.value_or("");
    return addr_;
  }

  void StopServer(int sig) {
    server_->Signal(sig);
    EXPECT_TRUE(server_->Wait(30s).has_value());
  }

  void StartWorker(std::vector<std::string> extra = {}) {
    int i = static_cast<int>(workers_.size());
    std::vector<std::string> argv = {RANKSWEEP_WORKER_BIN, "--coordinator=" + addr_,
                                     "--device=cpu", "--slots=1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    workers_.push_back(std::make_unique<Process>(
        argv,
        dir_ + "/worker" + std::to_string(i), std::vector<std::string>{"RANKSWEEP_TORCH_THREADS=1"}));
  }

  CommandResult Cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 120s) {
    std::vector<std::string> argv = {RANKSWEEP_CLI_BIN, "--addr=" + addr_};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, dir_ + "/cli" + std::to_string(cli_runs_++), timeout);
  }

  std::string Submit(const std::string& spec = kSpec, CommandResult* out = nullptr) {
    std::string path = dir_ + "/spec" + std::to_string(cli_runs_) + ".json";
    std::ofstream(path) << spec;
    CommandResult r = Cli({"submit", "-f", path});
    if (out != nullptr) *out = r;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out;
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    return id;
  }

  // `ranksweep watch ID` until the sweep ends; true when it ended DONE.
  bool WatchToTheEnd(const std::string& id) {
    CommandResult watch = Cli({"watch", id}, 300s);
    EXPECT_EQ(watch.exit_code, 0) << watch.out << watch.err;
    return watch.exit_code == 0;
  }

  // `ranksweep results ID --format json`, parsed; an empty array on failure.
  Json ResultRows(const std::string& id) {
    CommandResult results = Cli({"results", id, "--format", "json"});
    EXPECT_EQ(results.exit_code, 0) << results.err;
    Json rows = results.exit_code == 0 ? Json::parse(results.out) : Json::array();
    EXPECT_TRUE(rows.is_array()) << results.out;
    return rows;
  }

  void StopWorkers() {
    for (auto& w : workers_) w->Signal(SIGTERM);
    for (auto& w : workers_) EXPECT_TRUE(w->Wait(60s).has_value()) << w->Stderr();
  }

  // Waits until worker `i`'s log has `text`; false on timeout or exit.
  bool WaitForWorkerLog(size_t i, const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (workers_[i]->Stderr().find(text) == std::string::npos) {
      if (!workers_[i]->running() || std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }

  const std::string& db() const { return db_; }
  Process& server() { return *server_; }
  Process& worker(size_t i) { return *workers_[i]; }

 private:
  std::string dir_;
  std::string db_;
  std::string addr_;
  int server_starts_ = 0;
  int cli_runs_ = 0;
  std::unique_ptr<Process> server_;
  std::vector<std::unique_ptr<Process>> workers_;
};

// A JSON row's rank; 0 for a head without one (softmax), whose rank is null.
int RankOf(const Json& row) { return row.at("rank").is_null() ? 0 : row.at("rank").get<int>(); }

// Rows of the results table for `sweep`, read straight from the SQLite file.
struct DbRow {
  int head_index;
  int rank;
  int64_t seed;
  int state;
  std::string worker_id;
  int attempt;
  int64_t lease_id;
  double train_error;
};
std::vector<DbRow> ReadDbRows(const std::string& db, const std::string& sweep) {
  sqlite3* h = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(h,
                               "SELECT head_index, rank, seed, state, worker_id, attempt, "
                               "lease_id, train_error FROM results WHERE sweep_id = ?",
                               -1, &st, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(h);
  sqlite3_bind_text(st, 1, sweep.c_str(), -1, SQLITE_TRANSIENT);
  std::vector<DbRow> rows;
  while (sqlite3_step(st) == SQLITE_ROW) {
    rows.push_back({sqlite3_column_int(st, 0), sqlite3_column_int(st, 1),
                    sqlite3_column_int64(st, 2), sqlite3_column_int(st, 3),
                    reinterpret_cast<const char*>(sqlite3_column_text(st, 4)),
                    sqlite3_column_int(st, 5), sqlite3_column_int64(st, 6),
                    sqlite3_column_double(st, 7)});
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return rows;
}

// The first column of the first row `sql` gives (its one `?` bound to
// `arg`), read from the SQLite file; empty when there is no row.
std::string ReadOneText(const std::string& db, const char* sql, const std::string& arg = "") {
  sqlite3* h = nullptr;
  sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(h, sql, -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  if (sqlite3_bind_parameter_count(st) > 0) {
    sqlite3_bind_text(st, 1, arg.c_str(), -1, SQLITE_TRANSIENT);
  }
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

std::string IntegrityCheck(const std::string& db) {
  return ReadOneText(db, "PRAGMA integrity_check");
}

// Every (head, rank, seed) of kSpec exactly once.
void ExpectOneRowPerCell(const std::vector<DbRow>& rows) {
  std::set<std::tuple<int, int, int64_t>> want;
  for (int64_t seed = 0; seed < 3; ++seed) {
    want.insert({0, 1, seed});
    want.insert({0, 4, seed});
    want.insert({1, 0, seed});
  }
  std::map<std::tuple<int, int, int64_t>, int> got;
  for (const DbRow& r : rows) ++got[{r.head_index, r.rank, r.seed}];
  EXPECT_EQ(rows.size(), static_cast<size_t>(kCells));
  for (const auto& key : want) {
    EXPECT_EQ(got[key], 1) << "head " << std::get<0>(key) << " rank " << std::get<1>(key)
                           << " seed " << std::get<2>(key);
  }
}

TEST(ServiceE2ETest, SweepThroughCliAndTwoWorkersStoresEveryCellOnce) {
  TempDir dir;
  Cluster cluster(dir);
  // Column blocks of 16 rows: the ended sweep's nine rows are sealed into
  // one (docs/ARCHITECTURE.md, "Column blocks").
  cluster.StartServer("0", 10, {"--column-block-rows=16"});
  cluster.StartWorker();
  cluster.StartWorker();
  std::string id = cluster.Submit();
  ASSERT_FALSE(id.empty());

  ASSERT_TRUE(cluster.WatchToTheEnd(id));
  Json rows = cluster.ResultRows(id);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kCells));
  std::set<std::string> workers;
  for (const Json& row : rows) {
    EXPECT_EQ(row.at("sweep_id"), id);
    EXPECT_EQ(row.at("state"), "DONE");
    EXPECT_EQ(row.at("attempt"), 1);
    EXPECT_GT(row.at("lease_id").get<int64_t>(), 0);
    ASSERT_FALSE(row.at("worker_id").get<std::string>().empty());
    workers.insert(row.at("worker_id").get<std::string>());
    const Json& version = row.at("worker_version");
    EXPECT_FALSE(version.at("build_id").get<std::string>().empty());
    EXPECT_FALSE(version.at("torch_version").get<std::string>().empty());
    const Json& result = row.at("result");
    EXPECT_EQ(result.at("train").at("sequences").get<int64_t>(), 64);  // 4^3
    double err = result.at("train").at("error").get<double>();
    EXPECT_GE(err, 0.0);
    EXPECT_LE(err, 1.0);
    EXPECT_GT(result.at("steps").get<int64_t>(), 0);
    EXPECT_EQ(result.at("device"), "cpu");
  }
  EXPECT_GE(workers.size(), 1u);

  // The same cells, straight from the SQLite file.
  std::vector<DbRow> db_rows = ReadDbRows(cluster.db(), id);
  ExpectOneRowPerCell(db_rows);
  for (const DbRow& r : db_rows) {
    EXPECT_EQ(r.attempt, 1);
    EXPECT_GT(r.lease_id, 0);
    EXPECT_TRUE(workers.count(r.worker_id)) << r.worker_id;
  }

  // In pages of 2 rows (five calls, each next page asked for while the last
  // one prints), CSV and JSON are exactly what one call prints: pages are
  // read from the rows, one call of every row from the sweep's column block,
  // sealed behind the sweep's end.
  auto sealed_rows = [&] {
    return ReadOneText(cluster.db(),
                       "SELECT COALESCE(SUM(rows), 0) FROM result_blocks WHERE sweep_id = ?", id);
  };
  const auto sealed_by = std::chrono::steady_clock::now() + 30s;
  while (sealed_rows() != std::to_string(kCells) && std::chrono::steady_clock::now() < sealed_by) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(sealed_rows(), std::to_string(kCells));
  for (const char* format : {"csv", "json"}) {
    CommandResult one = cluster.Cli({"results", id, "--format", format});
    CommandResult paged = cluster.Cli({"results", id, "--format", format, "--page-size", "2"});
    ASSERT_EQ(one.exit_code, 0) << one.err;
    ASSERT_EQ(paged.exit_code, 0) << paged.err;
    EXPECT_EQ(paged.out, one.out) << format;
  }
  CommandResult csv = cluster.Cli({"results", id, "--format", "csv", "--page-size", "4"});
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), kCells + 1);  // and the header
  CommandResult bad = cluster.Cli({"results", id, "--format", "csv", "--page-size", "0"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.out, "");
  EXPECT_NE(bad.err.find("--page-size: 0 is out of range; use 1 to 100000"), std::string::npos)
      << bad.err;

  // Softmax solves N = 3 exactly on m = 2 on every seed (docs/SCIENCE.md, claim 3).
  CommandResult grouped = cluster.Cli({"results", id, "--group-by", "head,rank", "--format", "json"});
  ASSERT_EQ(grouped.exit_code, 0) << grouped.err;

  cluster.StopWorkers();
  cluster.StopServer(SIGTERM);
  EXPECT_EQ(IntegrityCheck(cluster.db()), "ok");
}

TEST(ServiceE2ETest, CoordinatorRestartMidSweepLosesAndDuplicatesNothing) {
  TempDir dir;
  Cluster cluster(dir);
  std::string addr = cluster.StartServer();
  std::string port = addr.substr(addr.rfind(':') + 1);
  std::string id = cluster.Submit();
  ASSERT_FALSE(id.empty());
  // One seed per task, so results arrive one cell at a time.
  cluster.StartWorker({"--max_seeds=1"});
  // Someone follows the sweep across the restart (`submit --watch` does the
  // same): the stream breaks, and watch reconnects on its own.
  Process watch({RANKSWEEP_CLI_BIN, "--addr=" + addr, "watch", id}, dir.path() + "/watch");
  ASSERT_TRUE(watch.WaitForStderr(std::regex("watching"), 30s).has_value()) << watch.Stderr();

  // Wait for the first result to be stored, then kill the coordinator hard.
  auto deadline = std::chrono::steady_clock::now() + 120s;
  while (ReadDbRows(cluster.db(), id).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  size_t before = ReadDbRows(cluster.db(), id).size();
  ASSERT_GE(before, 1u);
  ASSERT_LT(before, static_cast<size_t>(kCells)) << "sweep finished before the restart";
  cluster.StopServer(SIGKILL);
  EXPECT_EQ(IntegrityCheck(cluster.db()), "ok");

  // Same file, same port: the worker reconnects on its own.
  cluster.StartServer(port);
  ASSERT_TRUE(cluster.WatchToTheEnd(id));
  // The watch started before the restart ends as a fresh one does.
  EXPECT_EQ(watch.Wait(120s), std::optional<int>(0)) << watch.Stderr();
  EXPECT_NE(watch.Stderr().find("ranksweep: watch: lost the coordinator"), std::string::npos)
      << watch.Stderr();
  EXPECT_NE(watch.Stderr().find("ranksweep: watch: reconnected\n"), std::string::npos)
      << watch.Stderr();
  EXPECT_NE(watch.Stderr().find("sweep " + id + " DONE\n"), std::string::npos) << watch.Stderr();

  std::vector<DbRow> rows = ReadDbRows(cluster.db(), id);
  ExpectOneRowPerCell(rows);
  for (const DbRow& r : rows) EXPECT_EQ(r.state, rows.front().state);

  CommandResult status = cluster.Cli({"status", id});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  cluster.StopWorkers();
  cluster.StopServer(SIGTERM);
  EXPECT_EQ(IntegrityCheck(cluster.db()), "ok");
}

// Search mode over five ranks, then the same spec again: the second sweep's
// whole search is answered from the result cache at submit.
TEST(ServiceE2ETest, SearchFindsTheTransitionAndAResubmissionComesFromTheCache) {
  constexpr char kSearch[] = R"({
    "name": "search",
    "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3},
    "heads": [{"kind": "kernel", "feature_map": "elu1"}, {"kind": "softmax"}],
    "ranks": [1, 2, 4, 8, 16],
    "seed_count": 2,
    "mode": "search",
    "train": {"max_steps": 300, "eval_every": 50, "lr": 0.02}
  })";
  TempDir dir;
  Cluster cluster(dir);
  cluster.StartServer();
  cluster.StartWorker();
  std::string id = cluster.Submit(kSearch);
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(cluster.WatchToTheEnd(id));
  Json rows = cluster.ResultRows(id);
  // Kernel ranks probed by bisection over 1..16 (middle first: 4), and the
  // softmax head's 2 seeds.
  std::map<std::tuple<std::string, int, int64_t>, double> errors;
  std::set<int> probed;
  for (const Json& row : rows) {
    EXPECT_EQ(row.at("state"), "DONE");
    EXPECT_TRUE(row.at("cached_from_cell_id").is_null()) << row.dump();  // trained here
    const int rank = RankOf(row);
    if (rank > 0) probed.insert(rank);
    errors[{row.at("head").get<std::string>(), rank, row.value("seed", int64_t{0})}] =
        row.at("result").at("train").at("error").get<double>();
  }
  ASSERT_TRUE(probed.count(4)) << rows.dump();
  EXPECT_GE(probed.size(), 2u);
  EXPECT_LE(probed.size(), 3u);  // ceil(log2(5 + 1)) probes at most
  EXPECT_EQ(rows.size(), 2 * (probed.size() + 1));
  // The probes are a bisection: every probed rank on which some seed is not
  // exact lies below every probed rank on which both seeds are.
  int highest_not_exact = 0, lowest_exact = 1 << 20;
  for (int rank : probed) {
    const bool exact = errors[{"kernel/elu1", rank, 0}] == 0 && errors[{"kernel/elu1", rank, 1}] == 0;
    if (exact) lowest_exact = std::min(lowest_exact, rank);
    else highest_not_exact = std::max(highest_not_exact, rank);
  }
  EXPECT_LT(highest_not_exact, lowest_exact) << rows.dump();
  CommandResult status = cluster.Cli({"status", id});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("search:     " + std::to_string(rows.size()) + " of 12 grid cells"),
            std::string::npos)
      << status.out;

  CommandResult again_submit;
  std::string again = cluster.Submit(kSearch, &again_submit);
  ASSERT_FALSE(again.empty());
  EXPECT_NE(again_submit.err.find("(" + std::to_string(rows.size()) +
                                  " done from the result cache)"),
            std::string::npos)
      << again_submit.err;
  CommandResult again_status = cluster.Cli({"status", again});
  EXPECT_NE(again_status.out.find("state:      DONE"), std::string::npos) << again_status.out;
  Json again_rows = cluster.ResultRows(again);
  ASSERT_EQ(again_rows.size(), rows.size());
  for (const Json& row : again_rows) {
    EXPECT_GT(row.value("cached_from_cell_id", 0), 0) << row.dump();
    auto key = std::make_tuple(row.at("head").get<std::string>(), RankOf(row),
                               row.value("seed", int64_t{0}));
    ASSERT_TRUE(errors.count(key)) << row.dump();
    EXPECT_EQ(row.at("result").at("train").at("error").get<double>(), errors[key]);
  }
  cluster.StopWorkers();
  cluster.StopServer(SIGTERM);
  EXPECT_EQ(IntegrityCheck(cluster.db()), "ok");
}

// Occurrences of `text` in `log`.

// One cell (kernel rank 1, one seed) that trains `steps` steps, evaluated
// only at the end and never stopped early: a task whose length the test sets.
std::string OneLongCell(const std::string& name, int steps) {
  return R"({"name": ")" + name + R"(",
    "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3},
    "heads": [{"kind": "kernel", "feature_map": "elu1"}], "ranks": [1], "seed_count": 1,
    "train": {"max_steps": )" + std::to_string(steps) + R"(, "eval_every": )" +
         std::to_string(steps) + R"(, "early_stop_evals": 0}})";
}

// A cancelled sweep's running task stops at the worker's next heartbeat, not
// at the end of its training: the task here would train for many minutes
// and evaluates only at its end. The slot is free for the next sweep, and
// the cancelled cell is neither stored nor trained again.
TEST(ServiceE2ETest, CancelStopsARunningTaskWithinAHeartbeat) {
  TempDir dir;
  Cluster cluster(dir);
  cluster.StartServer();
  const std::string id = cluster.Submit(OneLongCell("long", 10'000'000));
  ASSERT_FALSE(id.empty());
  constexpr auto kHeartbeat = 1000ms;
  cluster.StartWorker({"--heartbeat_ms=1000"});
  ASSERT_TRUE(cluster.WaitForWorkerLog(0, "start " + id, 60s)) << cluster.worker(0).Stderr();
  std::this_thread::sleep_for(500ms);  // past the dataset, into the steps

  const auto cancelled_at = std::chrono::steady_clock::now();
  CommandResult cancel = cluster.Cli({"cancel", id});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  ASSERT_TRUE(cluster.WaitForWorkerLog(0, "stopped " + id, 60s)) << cluster.worker(0).Stderr();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - cancelled_at);
  // One heartbeat period, plus a margin for the heartbeat call, the step in
  // progress and a loaded machine.
  EXPECT_LT(took, kHeartbeat + 3000ms) << took.count() << " ms";
  std::cerr << "cancel to stop: " << took.count() << " ms\n";
  EXPECT_NE(cluster.worker(0).Stderr().find("stopped " + id + " kernel/elu1 r=1 seeds=1: leases "
                                            "cancelled, lost or pruned"),
            std::string::npos);

  // The slot is free: the next sweep runs to its end on the same worker.
  const std::string next = cluster.Submit();
  ASSERT_TRUE(cluster.WatchToTheEnd(next));
  EXPECT_EQ(ReadDbRows(cluster.db(), next).size(), static_cast<size_t>(kCells));
  EXPECT_EQ(ReadDbRows(cluster.db(), id).size(), 0u);
  EXPECT_EQ(Count(cluster.worker(0).Stderr(), "start " + id), 1);
  cluster.StopWorkers();
  cluster.StopServer(SIGTERM);
}

// The coordinator goes away (SIGKILL, then a graceful SIGTERM) while a
// worker trains; the task ends during the outage, its report fails and is
// kept; the coordinator comes back on the same file and port and takes the
// report under the lease it handed out. One row, first attempt, trained
// once; a `watch` that followed the sweep across the graceful shutdown ends
// DONE.
TEST(ServiceE2ETest, AResultFinishedWhileTheCoordinatorIsDownIsStoredOnceAfterItsRestart) {
  for (int sig : {SIGKILL, SIGTERM}) {
    SCOPED_TRACE(sig == SIGKILL ? "SIGKILL" : "SIGTERM");
    TempDir dir;
    Cluster cluster(dir);
    // The lease in flight must outlive the outage.
    constexpr int kLeaseSeconds = 120;
    const std::string addr = cluster.StartServer("0", kLeaseSeconds);
    const std::string port = addr.substr(addr.rfind(':') + 1);
    const std::string id = cluster.Submit(OneLongCell("outage", kOutageSteps));
    ASSERT_FALSE(id.empty());
    // A graceful shutdown ends the watch's stream (UNAVAILABLE, or CANCELLED
    // when cut mid-write); after SIGKILL CoordinatorRestartMidSweep... has
    // one, and here it would only wait out its backoff.
    std::optional<Process> watch;
    if (sig == SIGTERM) {
      watch.emplace(std::vector<std::string>{RANKSWEEP_CLI_BIN, "--addr=" + addr, "watch", id},
                    dir.path() + "/watch");
      ASSERT_TRUE(watch->WaitForStderr(std::regex("watching"), 30s).has_value())
          << watch->Stderr();
    }
    cluster.StartWorker({"--heartbeat_ms=1000"});
    ASSERT_TRUE(cluster.WaitForWorkerLog(0, "start " + id, 60s)) << cluster.worker(0).Stderr();
    cluster.StopServer(sig);

    // The task ends while the coordinator is down: the report fails.
    ASSERT_TRUE(cluster.WaitForWorkerLog(0, "done " + id, 120s)) << cluster.worker(0).Stderr();
    ASSERT_TRUE(cluster.WaitForWorkerLog(0, "complete: ", 60s)) << cluster.worker(0).Stderr();
    ASSERT_EQ(ReadDbRows(cluster.db(), id).size(), 0u) << "stored before the outage";

    cluster.StartServer(port, kLeaseSeconds);
    ASSERT_TRUE(cluster.WatchToTheEnd(id));
    const std::vector<DbRow> rows = ReadDbRows(cluster.db(), id);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].attempt, 1);
    EXPECT_EQ(Count(cluster.worker(0).Stderr(), "start " + id), 1) << cluster.worker(0).Stderr();
    EXPECT_NE(cluster.worker(0).Stderr().find("reported " + id + " kernel/elu1 r=1 seeds=1: 1 "
                                              "recorded, 0 duplicates"),
              std::string::npos)
        << cluster.worker(0).Stderr();
    if (watch.has_value()) {
      EXPECT_EQ(watch->Wait(120s), std::optional<int>(0)) << watch->Stderr();
      EXPECT_NE(watch->Stderr().find("sweep " + id + " DONE\n"), std::string::npos)
          << watch->Stderr();
    }
    cluster.StopWorkers();
    cluster.StopServer(SIGTERM);
    EXPECT_EQ(IntegrityCheck(cluster.db()), "ok");
  }
}

// Zeros that are legal and differ from the defaults (beta1, beta2,
// hard_share, test_pool_share from YAML, max_steps from a flag) are what
// --dry-run shows, what the coordinator stores, and what the worker trains:
// no step at all, where a 0 that became the default trained 2,000.
TEST(ServiceE2ETest, TheSpecAWorkerTrainsIsTheSpecDryRunShows) {
  TempDir dir;
  Cluster cluster(dir);
  cluster.StartServer();
  const std::string yaml = dir.path() + "/zeros.yaml";
  std::ofstream(yaml) << "name: zeros\n"
                         "dataset: {kind: pool, m: 4, seq_len: 3, pool_size: 16, train_size: 8,\n"
                         "          test_size: 0, test_pool_share: 0, hard_share: 0}\n"
                         "heads: [{kind: kernel}]\n"
                         "ranks: [2]\n"
                         "seed_count: 2\n"
                         "train: {beta1: 0, beta2: 0, max_steps: 500}\n";
  CommandResult dry = cluster.Cli({"submit", "-f", yaml, "--max-steps", "0", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  const Json shown = Json::parse(dry.out);
  EXPECT_EQ(shown.at("train").at("max_steps"), 0);
  EXPECT_EQ(shown.at("train").at("beta1"), 0.0);
  EXPECT_EQ(shown.at("train").at("beta2"), 0.0);
  EXPECT_EQ(shown.at("dataset").at("hard_share"), 0.0);
  EXPECT_EQ(shown.at("dataset").at("test_pool_share"), 0.0);

  CommandResult submitted = cluster.Cli({"submit", "-f", yaml, "--max-steps", "0"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  std::string id = submitted.out.substr(0, submitted.out.find('\n'));
  EXPECT_EQ(Json::parse(ReadOneText(cluster.db(), "SELECT spec_json FROM sweeps WHERE id = ?", id)),
            shown);

  cluster.StartWorker();
  ASSERT_TRUE(cluster.WatchToTheEnd(id));
  Json rows = cluster.ResultRows(id);
  ASSERT_EQ(rows.size(), 2u);
  for (const Json& row : rows) EXPECT_EQ(row.at("result").at("steps"), 0) << row.dump();
  cluster.StopWorkers();
  cluster.StopServer(SIGTERM);
}

}  // namespace
}  // namespace ranksweep
