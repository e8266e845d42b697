// Shared by the soak driver and the reliability tests: a ranksweepd process
// on a temporary SQLite file plus ranksweep-fake-worker processes on
// loopback, and the checks that read the database file directly.
//
// The coordinator first binds port 0; every restart binds the same port on
// the same file, so workers reconnect on their own. Workers get stable ids
// ("<prefix>NN") and keep them across restarts, like a supervised worker.
//
// Thread-safety: none; one thread drives a cluster.
#ifndef RANKSWEEP_TESTS_SOAK_SOAK_CLUSTER_H_
#define RANKSWEEP_TESTS_SOAK_SOAK_CLUSTER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace ranksweep::soak {

struct Binaries {
  std::string ranksweepd;
  std::string fake_worker;
  std::string cli;  // the `ranksweep` CLI
};

struct ClusterOptions {
  std::string dir;  // holds the database, logs and ack logs; must exist
  Binaries bin;
  int lease_seconds = 2;
  int max_attempts = 50;
  int max_message_bytes = 0;  // 0 = ranksweepd's default
  // Passed to every worker.
  int max_seeds = 4;
  int min_sleep_ms = 0;
  int max_sleep_ms = 20;
  int heartbeat_ms = 500;
  int poll_ms = 1000;
  int lose_replies = 0;  // per worker: CompleteTasks replies it drops
  // Workers 0..liars-1 also lie (ranksweep-fake-worker --lie-rate): before
  // a share lie_rate of their CompleteTasks calls they send an impossible
  // result, which the coordinator must refuse.
  int liars = 0;
  double lie_rate = 0.3;
  std::string worker_id_prefix = "fake-w";
  // Authentication on (docs/SECURITY.md): ranksweepd runs without
  // --insecure-local, and tokens come from CreateToken. The CLI sends
  // cli_token, every worker worker_token (as RANKSWEEP_TOKEN).
  bool tokens = false;
  // ranksweepd --metrics-listen on a free loopback port (ScrapeMetrics).
  bool metrics = false;
  std::string cli_token;
  std::string worker_token;
  // More ranksweepd flags, as given (e.g. "--shared-cache"); read at every
  // StartCoordinator, so a test may change them between restarts.
  std::vector<std::string> coordinator_args;
};

// How one worker runs when it is not like the others: its own token and
// more flags, after the usual ones (so they win: "--worker-id=" makes the
// coordinator assign a fresh id).
struct WorkerSetup {
  std::string token;  // empty: ClusterOptions::worker_token
  std::vector<std::string> args;
};

class Cluster {
 public:
  explicit Cluster(ClusterOptions options);
  ~Cluster();  // SIGKILLs whatever still runs

  // Starts ranksweepd (port 0 the first time, the same port afterwards) and
  // waits for its "listening on" line. Returns false, with the reason in
  // error(), when it does not come up within 30 s.
  bool StartCoordinator();
  // Sends `sig` and waits for the exit (at most 30 s). True when it exited.
  bool StopCoordinator(int sig);
  bool coordinator_running();
  // The running coordinator's process id (0 when none runs).
  int coordinator_pid() const;
  // GET /metrics of the running coordinator (ClusterOptions::metrics): the
  // body, or an empty string when the request failed.
  std::string ScrapeMetrics() const;

  // Starts worker `index` (0-based; a new index appends a worker). Its acks
  // go to a fresh file per incarnation, listed by ack_logs().
  void StartWorker(int index);
  // Worker `index` starts (from its next StartWorker on) as `setup` says.
  void SetupWorker(int index, WorkerSetup setup);
  // The stable id of worker `index`: "<prefix>NN".
  std::string WorkerId(int index) const;
  // The exit code of worker `index` if it has exited, else nullopt.
  std::optional<int> WorkerExit(int index);
  // Sends `sig` to worker `index` and waits for its exit (at most `wait_s`).
  // Returns the exit code, or -1 on timeout.
  int StopWorker(int index, int sig, int wait_s = 30);
  // The two halves of StopWorker, to signal many workers before waiting.
  void SignalWorker(int index, int sig);
  // Waits until worker `index` handles SIGTERM as a drain (its "ready"
  // line); false on timeout or exit.
  bool WaitWorkerReady(int index, int wait_s = 30);
  int WaitWorker(int index, int wait_s);
  bool worker_running(int index);
  int worker_count() const { return static_cast<int>(workers_.size()); }

  // Submits a sweep (JSON text) through the CLI; returns the sweep id, or
  // an empty string with the reason in error().
  std::string Submit(const std::string& spec_json);

  // `ranksweepd token create --name NAME --role ROLE` on the cluster's
  // database: the token, or an empty string with the reason in error().
  std::string CreateToken(const std::string& name, const std::string& role);
  // Sets the token the CLI (Submit, Cli) and workers started from now on send.
  void set_cli_token(std::string token) { options_.cli_token = std::move(token); }
  void set_worker_token(std::string token) { options_.worker_token = std::move(token); }
  // The extra ranksweepd flags of the next StartCoordinator.
  void set_coordinator_args(std::vector<std::string> args) {
    options_.coordinator_args = std::move(args);
  }
  // Runs `ranksweep --addr=ADDRESS ARGS...` with the CLI token.
  testing::CommandResult Cli(const std::vector<std::string>& args);

  const std::string& address() const { return address_; }
  const std::string& db() const { return db_; }
  const std::vector<std::string>& ack_logs() const { return ack_logs_; }
  // The worker index of each of ack_logs(), in the same order.
  const std::vector<int>& ack_log_workers() const { return ack_log_workers_; }
  const std::string& error() const { return error_; }
  std::string CoordinatorStderr() const;

 private:
  ClusterOptions options_;
  std::string db_;
  std::string port_ = "0";
  std::string address_;
  std::string metrics_address_;
  std::string error_;
  int coordinator_starts_ = 0;
  int cli_runs_ = 0;
  std::unique_ptr<testing::Process> coordinator_;
  std::vector<std::unique_ptr<testing::Process>> workers_;
  std::vector<int> incarnations_;
  std::vector<std::string> ack_logs_;
  std::vector<int> ack_log_workers_;
  std::map<int, WorkerSetup> setups_;
};

// ------------------------------------------------------------- the database

// Runs a query returning one integer on a read-only connection; -1 when
// the query fails (the message goes to stderr).
int64_t QueryInt(const std::string& db, const std::string& sql);
// PRAGMA integrity_check's first row ("ok" when sound).
std::string IntegrityCheck(const std::string& db);

// cell id -> lease ids acknowledged for it, from "ack CELL LEASE" lines.
std::map<int64_t, std::set<int64_t>> ReadAcks(const std::vector<std::string>& paths);

// What the liars' lies met, from the same logs: "rejected" lines (the
// coordinator refused the lie) and "poisoned" lines (it took it).
struct LieCounts {
  int64_t rejected = 0;
  int64_t accepted = 0;
};
LieCounts ReadLies(const std::vector<std::string>& paths);

// What the hijackers (ranksweep-fake-worker --hijack-dir) met, from their
// logs: "refused 0 N" lines (N calls refused) and "hijacked" lines (a call
// the coordinator honoured).
struct HijackCounts {
  int64_t refused = 0;
  int64_t honoured = 0;
};
HijackCounts ReadHijacks(const std::vector<std::string>& paths);

// worker id -> the lease ids its "lease" lines in `paths` record, with each
// path's worker id from `worker_ids` (same order).
std::map<int64_t, std::string> ReadLeaseHolders(const std::vector<std::string>& paths,
                                                const std::vector<std::string>& worker_ids);

// Result rows stored through another worker's lease: trained rows (not
// copies) whose lease `holders` says was leased to another worker than the
// row's, plus every row whose worker is one of `hijackers` (they lease
// nothing). Rows whose lease no log recorded are not judged.
int64_t RowsThroughOthersLeases(const std::string& db,
                                const std::map<int64_t, std::string>& holders,
                                const std::vector<std::string>& hijackers);

struct Verdict {
  int64_t cells = 0;
  int64_t results = 0;
  int64_t acked_cells = 0;  // cells with at least one acknowledgement seen
  // Cells without a DONE result, plus acknowledged cells with no result.
  int64_t lost = 0;
  // Result rows beyond one per cell; acknowledged leases other than the
  // stored one (a cell completed twice); recorded completions counted by
  // the workers table beyond the result rows.
  int64_t duplicated = 0;
  std::string integrity;
  // Stored values no trainer produces (common/spec/result_validation.h,
  // checked here in SQL on the file): result rows (trained or copied from
  // the cache) and group aggregates.
  int64_t poisoned = 0;
  std::vector<std::string> problems;  // one line per finding, for logs
};

// Checks the whole database file against the acknowledgements.
Verdict Verify(const std::string& db, const std::map<int64_t, std::set<int64_t>>& acks);

// A sweep of `ranks` kernel ranks (1..ranks) times `seeds` seeds:
// ranks * seeds cells. Small exhaustive dataset; the fake trainer ignores it.
std::string SweepJson(const std::string& name, int ranks, int seeds, int priority = 0);

}  // namespace ranksweep::soak

#endif  // RANKSWEEP_TESTS_SOAK_SOAK_CLUSTER_H_
