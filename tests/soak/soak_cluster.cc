#include "tests/soak/soak_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

namespace ranksweep::soak {

using testing::CommandResult;
using testing::Process;
using testing::RunCommand;
using namespace std::chrono_literals;

namespace {

// The environment that hands `token` to the CLI or a worker; none for "".
std::vector<std::string> TokenEnv(const std::string& token) {
  if (token.empty()) return {};
  return {"RANKSWEEP_TOKEN=" + token};
}

}  // namespace

Cluster::Cluster(ClusterOptions options)
    : options_(std::move(options)), db_(options_.dir + "/ranksweep.db") {}

Cluster::~Cluster() = default;  // each Process SIGKILLs its child

bool Cluster::StartCoordinator() {
  std::vector<std::string> argv = {options_.bin.ranksweepd,
                                   "--listen=127.0.0.1:" + port_,
                                   "--db=" + db_,
                                   "--lease-seconds=" + std::to_string(options_.lease_seconds),
                                   "--max-attempts=" + std::to_string(options_.max_attempts)};
  if (!options_.tokens) argv.push_back("--insecure-local");
  if (options_.metrics) argv.push_back("--metrics-listen=127.0.0.1:0");
  if (options_.max_message_bytes > 0) {
    argv.push_back("--max-message-bytes=" + std::to_string(options_.max_message_bytes));
  }
  argv.insert(argv.end(), options_.coordinator_args.begin(), options_.coordinator_args.end());
  coordinator_ = std::make_unique<Process>(
      argv, options_.dir + "/coordinator" + std::to_string(coordinator_starts_++));
  std::optional<std::string> bound =
      coordinator_->WaitForStdout(std::regex("listening on (\\S+)"), 30s);
  if (!bound.has_value()) {
    error_ = "ranksweepd did not come up: " + coordinator_->Stderr();
    return false;
  }
  address_ = *bound;
  port_ = address_.substr(address_.rfind(':') + 1);
  if (options_.metrics) {
    // Printed before the "listening" line.
    std::optional<std::string> metrics =
        coordinator_->WaitForStdout(std::regex("metrics on http://([0-9.]+:[0-9]+)/"), 1s);
    if (!metrics.has_value()) {
      error_ = "ranksweepd printed no metrics address: " + coordinator_->Stdout();
      return false;
    }
    metrics_address_ = *metrics;
  }
  return true;
}

int Cluster::coordinator_pid() const {
  return coordinator_ && coordinator_->running() ? coordinator_->pid() : 0;
}

std::string Cluster::ScrapeMetrics() const {
  const size_t colon = metrics_address_.rfind(':');
  if (colon == std::string::npos) return "";
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(metrics_address_.substr(colon + 1))));
  inet_pton(AF_INET, metrics_address_.substr(0, colon).c_str(), &sa.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: " + metrics_address_ + "\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) {
        reply.append(buf, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  const size_t body = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.1 200", 0) != 0 || body == std::string::npos) return "";
  return reply.substr(body + 4);
}

bool Cluster::StopCoordinator(int sig) {
  if (!coordinator_) return true;
  coordinator_->Signal(sig);
  return coordinator_->Wait(30s).has_value();
}

bool Cluster::coordinator_running() { return coordinator_ && coordinator_->running(); }

std::string Cluster::CoordinatorStderr() const {
  return coordinator_ ? coordinator_->Stderr() : std::string();
}

void Cluster::StartWorker(int index) {
  if (index >= worker_count()) {
    workers_.resize(index + 1);
    incarnations_.resize(index + 1, 0);
  }
  const std::string id = WorkerId(index);
  const std::string name = id + "." + std::to_string(incarnations_[index]++);
  const std::string ack_log = options_.dir + "/ack-" + name + ".log";
  ack_logs_.push_back(ack_log);
  ack_log_workers_.push_back(index);
  const auto setup = setups_.find(index);
  std::vector<std::string> argv{
          options_.bin.fake_worker, "--coordinator=" + address_, "--worker-id=" + id,
          "--slots=1", "--max-seeds=" + std::to_string(options_.max_seeds),
          "--min-sleep-ms=" + std::to_string(options_.min_sleep_ms),
          "--max-sleep-ms=" + std::to_string(options_.max_sleep_ms),
          "--heartbeat-ms=" + std::to_string(options_.heartbeat_ms),
          "--poll-ms=" + std::to_string(options_.poll_ms), "--rpc-timeout-seconds=5",
          "--drain-seconds=10", "--ack-log=" + ack_log, "--quiet",
          "--lose-replies=" + std::to_string(options_.lose_replies),
          "--lie-rate=" + std::to_string(index < options_.liars ? options_.lie_rate : 0.0)};
  std::string token = options_.worker_token;
  if (setup != setups_.end()) {
    argv.insert(argv.end(), setup->second.args.begin(), setup->second.args.end());
    if (!setup->second.token.empty()) token = setup->second.token;
  }
  workers_[index] =
      std::make_unique<Process>(argv, options_.dir + "/worker-" + name, TokenEnv(token));
}

void Cluster::SetupWorker(int index, WorkerSetup setup) { setups_[index] = std::move(setup); }

std::string Cluster::WorkerId(int index) const {
  char id[64];
  snprintf(id, sizeof(id), "%s%02d", options_.worker_id_prefix.c_str(), index);
  return id;
}

std::optional<int> Cluster::WorkerExit(int index) {
  if (index >= worker_count() || !workers_[index] || workers_[index]->running()) {
    return std::nullopt;
  }
  return workers_[index]->Wait(0s);
}

int Cluster::StopWorker(int index, int sig, int wait_s) {
  SignalWorker(index, sig);
  return WaitWorker(index, wait_s);
}

void Cluster::SignalWorker(int index, int sig) { workers_.at(index)->Signal(sig); }

bool Cluster::WaitWorkerReady(int index, int wait_s) {
  return workers_.at(index)
      ->WaitForStdout(std::regex("ranksweep-fake-worker ready"), std::chrono::seconds(wait_s))
      .has_value();
}

int Cluster::WaitWorker(int index, int wait_s) {
  return workers_.at(index)->Wait(std::chrono::seconds(wait_s)).value_or(-1);
}

bool Cluster::worker_running(int index) {
  return workers_.at(index) && workers_[index]->running();
}

std::string Cluster::Submit(const std::string& spec_json) {
  const std::string n = std::to_string(cli_runs_++);
  const std::string path = options_.dir + "/spec" + n + ".json";
  std::ofstream(path) << spec_json;
  CommandResult r = RunCommand({options_.bin.cli, "--addr=" + address_, "submit", "-f", path},
                               options_.dir + "/cli" + n, 60s, TokenEnv(options_.cli_token));
  if (r.exit_code != 0) {
    error_ = "ranksweep submit exited " + std::to_string(r.exit_code) + ": " + r.err;
    return "";
  }
  std::string id = r.out;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

std::string Cluster::CreateToken(const std::string& name, const std::string& role) {
  CommandResult r = RunCommand(
      {options_.bin.ranksweepd, "token", "create", "--name=" + name, "--role=" + role,
       "--db=" + db_},
      options_.dir + "/token-" + name, 60s);
  if (r.exit_code != 0) {
    error_ = "ranksweepd token create exited " + std::to_string(r.exit_code) + ": " + r.err;
    return "";
  }
  std::string token = r.out;
  while (!token.empty() && (token.back() == '\n' || token.back() == ' ')) token.pop_back();
  return token;
}

CommandResult Cluster::Cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {options_.bin.cli, "--addr=" + address_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, options_.dir + "/cli" + std::to_string(cli_runs_++), 60s,
                    TokenEnv(options_.cli_token));
}

// ------------------------------------------------------------- the database

namespace {

// A read-only connection; closed on scope exit.
class ReadOnlyDb {
 public:
  explicit ReadOnlyDb(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      std::cerr << "open " << path << ": " << sqlite3_errmsg(db_) << "\n";
    }
    sqlite3_busy_timeout(db_, 5000);
  }
  ~ReadOnlyDb() { sqlite3_close(db_); }
  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace

int64_t QueryInt(const std::string& db, const std::string& sql) {
  ReadOnlyDb h(db);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(h.get(), sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    std::cerr << sql << ": " << sqlite3_errmsg(h.get()) << "\n";
    return -1;
  }
  int64_t value = -1;
  if (sqlite3_step(st) == SQLITE_ROW) {
    value = sqlite3_column_int64(st, 0);
  } else {
    std::cerr << sql << ": " << sqlite3_errmsg(h.get()) << "\n";
  }
  sqlite3_finalize(st);
  return value;
}

std::string IntegrityCheck(const std::string& db) {
  ReadOnlyDb h(db);
  sqlite3_stmt* st = nullptr;
  std::string out = "error";
  if (sqlite3_prepare_v2(h.get(), "PRAGMA integrity_check", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  return out;
}

namespace {

// Calls `line(i, word, a, b)` for every "WORD A B" line of paths[i], in
// order. A worker killed mid-write can leave a torn last line; it fails to
// parse and ends the file.
template <typename F>
void ForEachLogLine(const std::vector<std::string>& paths, F line) {
  for (size_t i = 0; i < paths.size(); ++i) {
    std::ifstream in(paths[i]);
    std::string word;
    int64_t a = 0, b = 0;
    while (in >> word >> a >> b) line(i, word, a, b);
  }
}

}  // namespace

std::map<int64_t, std::set<int64_t>> ReadAcks(const std::vector<std::string>& paths) {
  std::map<int64_t, std::set<int64_t>> acks;
  ForEachLogLine(paths, [&](size_t, const std::string& word, int64_t cell, int64_t lease) {
    if (word == "ack") acks[cell].insert(lease);
  });
  return acks;
}

LieCounts ReadLies(const std::vector<std::string>& paths) {
  LieCounts counts;
  ForEachLogLine(paths, [&](size_t, const std::string& word, int64_t, int64_t) {
    if (word == "rejected") ++counts.rejected;
    if (word == "poisoned") ++counts.accepted;
  });
  return counts;
}

HijackCounts ReadHijacks(const std::vector<std::string>& paths) {
  HijackCounts counts;
  ForEachLogLine(paths, [&](size_t, const std::string& word, int64_t, int64_t n) {
    if (word == "refused") counts.refused += n;
    if (word == "hijacked") ++counts.honoured;
  });
  return counts;
}

std::map<int64_t, std::string> ReadLeaseHolders(const std::vector<std::string>& paths,
                                                const std::vector<std::string>& worker_ids) {
  std::map<int64_t, std::string> holders;
  ForEachLogLine(paths, [&](size_t i, const std::string& word, int64_t, int64_t lease) {
    if (word == "lease" && i < worker_ids.size()) holders[lease] = worker_ids[i];
  });
  return holders;
}

int64_t RowsThroughOthersLeases(const std::string& db,
                                const std::map<int64_t, std::string>& holders,
                                const std::vector<std::string>& hijackers) {
  ReadOnlyDb h(db);
  sqlite3_stmt* st = nullptr;
  int64_t n = 0;
  if (sqlite3_prepare_v2(h.get(),
                         "SELECT lease_id, worker_id FROM results WHERE cached_from = 0", -1,
                         &st, nullptr) != SQLITE_OK) {
    std::cerr << "results: " << sqlite3_errmsg(h.get()) << "\n";
    return -1;
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    const int64_t lease = sqlite3_column_int64(st, 0);
    const std::string worker = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
    const bool hijacker =
        std::find(hijackers.begin(), hijackers.end(), worker) != hijackers.end();
    const auto holder = holders.find(lease);
    if (hijacker || (holder != holders.end() && holder->second != worker)) ++n;
  }
  sqlite3_finalize(st);
  return n;
}

namespace {

// A DONE (state 3) result row whose values no trainer produces, in SQL. SQLite stores
// NaN as NULL, so a NULL where a metric belongs counts (COALESCE). The same
// rules as ValidateSeedResult, written again on purpose: the check must not
// share the code it checks.
constexpr char kPoisonedRows[] =
    "SELECT count(*) FROM results WHERE state = 3 AND NOT COALESCE("
    "train_sequences >= 1 AND test_sequences >= 0 "
    "AND train_exact_accuracy BETWEEN 0 AND 1 AND train_position_accuracy BETWEEN 0 AND 1 "
    "AND train_error BETWEEN 0 AND 1 AND abs(train_error - (1 - train_exact_accuracy)) <= 1e-9 "
    "AND train_position_accuracy >= train_exact_accuracy - 1e-9 "
    "AND train_max_abs_error BETWEEN 0 AND 1e308 "
    "AND test_exact_accuracy BETWEEN 0 AND 1 AND test_position_accuracy BETWEEN 0 AND 1 "
    "AND (test_sequences = 0 OR (test_error BETWEEN 0 AND 1 "
    "     AND abs(test_error - (1 - test_exact_accuracy)) <= 1e-9)) "
    "AND test_max_abs_error BETWEEN 0 AND 1e308 AND final_loss BETWEEN 0 AND 1e308 "
    "AND steps BETWEEN 0 AND 10000000 AND wall_seconds BETWEEN 0 AND 1e308 "
    "AND length(device) <= 256, 0)";
// A group whose aggregates hold a value outside its metric's range.
constexpr char kPoisonedGroups[] =
    "SELECT count(*) FROM result_groups WHERE NOT COALESCE("
    "train_error_mean BETWEEN 0 AND 1 AND train_error_min BETWEEN 0 AND 1 "
    "AND train_error_max BETWEEN 0 AND 1 AND exact_mean BETWEEN 0 AND 1 "
    "AND exact_min BETWEEN 0 AND 1 AND exact_max BETWEEN 0 AND 1 "
    "AND position_mean BETWEEN 0 AND 1 AND position_min BETWEEN 0 AND 1 "
    "AND position_max BETWEEN 0 AND 1 AND train_error_m2 BETWEEN -1e-9 AND 1e308 "
    "AND trained_seconds BETWEEN 0 AND 1e308 AND n >= 0, 0)";

}  // namespace

Verdict Verify(const std::string& db, const std::map<int64_t, std::set<int64_t>>& acks) {
  Verdict v;
  v.integrity = IntegrityCheck(db);
  const int64_t poisoned_rows = QueryInt(db, kPoisonedRows);
  const int64_t poisoned_groups = QueryInt(db, kPoisonedGroups);
  v.poisoned = poisoned_rows + poisoned_groups;
  if (v.poisoned != 0) {
    v.problems.push_back(std::to_string(poisoned_rows) + " result rows and " +
                         std::to_string(poisoned_groups) + " groups hold impossible values");
  }
  v.cells = QueryInt(db, "SELECT count(*) FROM cells");
  v.results = QueryInt(db, "SELECT count(*) FROM results");
  // Cells state 3 = DONE; results state 3 = DONE.
  const int64_t without_result = QueryInt(
      db,
      "SELECT count(*) FROM cells c WHERE c.state != 3 OR NOT EXISTS "
      "(SELECT 1 FROM results r WHERE r.cell_id = c.id AND r.state = 3)");
  v.lost += without_result;
  if (without_result != 0) {
    v.problems.push_back(std::to_string(without_result) + " cells without a DONE result");
  }
  const int64_t extra_rows = v.results - QueryInt(db, "SELECT count(DISTINCT cell_id) FROM results");
  const int64_t foreign_rows = QueryInt(
      db,
      "SELECT count(*) FROM results r LEFT JOIN cells c ON c.id = r.cell_id "
      "WHERE c.id IS NULL OR c.lease_id != r.lease_id OR c.seed != r.seed");
  // workers.completed counts what each CompleteTasks recorded (not
  // duplicates): more than the result rows means a cell was recorded twice.
  // Rows a quarantine took back were recorded and are no longer results.
  const int64_t recorded =
      QueryInt(db, "SELECT COALESCE(sum(completed), 0) FROM workers") -
      QueryInt(db, "SELECT COALESCE(sum(results), 0) FROM quarantines");
  const int64_t over_recorded = recorded > v.results ? recorded - v.results : 0;
  if (extra_rows != 0 || foreign_rows != 0 || over_recorded != 0 || recorded < v.results) {
    v.problems.push_back("results: " + std::to_string(extra_rows) + " extra rows, " +
                         std::to_string(foreign_rows) + " not matching their cell's lease, " +
                         "workers recorded " + std::to_string(recorded) + " for " +
                         std::to_string(v.results) + " rows");
  }
  v.duplicated += extra_rows + foreign_rows + over_recorded;

  // Every acknowledgement must be the stored result, under the same lease.
  ReadOnlyDb h(db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(h.get(), "SELECT lease_id FROM results WHERE cell_id = ?1 AND state = 3", -1,
                     &st, nullptr);
  for (const auto& [cell, leases] : acks) {
    ++v.acked_cells;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, cell);
    if (sqlite3_step(st) != SQLITE_ROW) {
      ++v.lost;
      v.problems.push_back("cell " + std::to_string(cell) + " acknowledged but has no result");
      continue;
    }
    const int64_t stored = sqlite3_column_int64(st, 0);
    for (int64_t lease : leases) {
      if (lease == stored) continue;
      ++v.duplicated;
      v.problems.push_back("cell " + std::to_string(cell) + " acknowledged under lease " +
                           std::to_string(lease) + " but stored under " + std::to_string(stored));
    }
  }
  sqlite3_finalize(st);
  return v;
}

std::string SweepJson(const std::string& name, int ranks, int seeds, int priority) {
  std::ostringstream out;
  out << R"({"name": ")" << name
      << R"(", "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3}, )"
      << R"("heads": [{"kind": "kernel", "feature_map": "elu1"}], "ranks": [)";
  for (int r = 1; r <= ranks; ++r) out << (r > 1 ? ", " : "") << r;
  out << R"(], "seed_count": )" << seeds << R"(, "priority": )" << priority
      << R"(, "train": {"max_steps": 100, "eval_every": 50}})";
  return out.str();
}

}  // namespace ranksweep::soak
