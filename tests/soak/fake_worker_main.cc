// `ranksweep-fake-worker`: the real worker agent core (worker/agent/agent.h)
// and gRPC client, with a TaskRunner that trains nothing. Each task sleeps a
// random time in [--min-sleep-ms, --max-sleep-ms] and returns one synthetic
// SeedResult per seed (the seed filled in, metrics derived from the seed), so
// soak and reliability tests can run dozens of workers on a small machine
// while exercising the agent's real retries, outbox, heartbeats and drain.
//
// --lose-replies=N makes the first N CompleteTasks calls that leased next
// tasks look failed to the agent (UNAVAILABLE) after the coordinator
// committed them: a reply lost on the way, which the agent answers by
// sending the same results again.
//
// --ack-log=FILE appends "ack CELL LEASE" for every result of a CompleteTasks
// call that returned OK (the coordinator's promise that the result is
// durable), one write(2) per call on an O_APPEND descriptor, before the
// agent sees the reply. A SIGKILL can lose the last acknowledgement (between
// the reply and the write) but never records one that was not given.
//
// --lie-rate=P makes it a liar: before a share P of its CompleteTasks calls
// it first sends the same call with one result made impossible (NaN or
// infinite metrics, accuracy 2, negative steps, an empty result, a 100 kB
// device string, ...; chosen at random), and before registering it tries a
// 100 kB hostname. The coordinator must refuse each lie with
// INVALID_ARGUMENT and store nothing of it; the ack log gets "rejected CELL
// LEASE" for each lie refused so and "poisoned CELL LEASE" for one accepted.
// The honest call follows, so a liar still finishes its cells.
//
// With --ack-log it also appends "lease CELL LEASE" for every cell it is
// leased (AcquireTasks, or CompleteTasks' next tasks), as the reply arrives:
// what a hijacker would steal (below), and whose worker a lease was for.
//
// --plausible-lies makes every result say what no check can refuse but is
// wrong: every seed exact (a GPU with silent errors); only a quarantine takes
// such results back.
//
// --hijack-dir=DIR makes it a hijacker instead of a worker: it registers
// under its own id with its own token and trains nothing; every
// --hijack-period-ms it reads the "lease" lines the other workers' ack logs
// in DIR (ack-*.log) gained, and with the newest leases (at most 8) sends,
// as itself, a Heartbeat, a CompleteTasks with plausible results and a
// FailTask, then the same three in the name of the lease's worker (the log
// file names it), with its own session. The coordinator must honour none:
// every lease reads as lost, the CompleteTasks and the calls in another's
// name are refused. Its --ack-log gets "refused 0 N" after each round of N
// refused calls and "hijacked CELL LEASE" for every call that was honoured
// (a result recorded, a lease extended, a call in another's name accepted).
//
// Prints "ranksweep-fake-worker ready" on stdout once SIGTERM/SIGINT are
// handled (a drain); before that line they kill it.
//
// Exit codes: 0 after a drain (SIGTERM/SIGINT) or an idle exit (--once);
// 1 for bad flags or a registration the coordinator refuses.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "worker/agent/agent.h"
#include "worker/agent/file_outbox.h"
#include "worker/agent/grpc_client.h"

namespace ranksweep::agent {
namespace {

// The flags, with their defaults (registered in Main).
struct FakeWorkerFlags {
  std::string coordinator = "127.0.0.1:50051";
  int slots = 1;
  int max_seeds = 64;
  std::string worker_id;
  bool once = false;
  int idle_exit_seconds = 5;
  int drain_seconds = 30;
  int poll_ms = 1000;
  int rpc_timeout_seconds = 10;
  int heartbeat_ms = 0;
  int min_sleep_ms = 0;
  int max_sleep_ms = 20;
  std::string ack_log;
  int lose_replies = 0;
  bool quiet = false;
  double lie_rate = 0;
  std::string outbox_dir;
  bool plausible_lies = false;
  std::string hijack_dir;
  int hijack_period_ms = 50;
  bool fail_tasks = false;
};

// Sleeps, then makes up a result per seed. Deterministic in the seed, so two
// runs of one cell report the same numbers.
class FakeRunner : public TaskRunner {
 public:
  FakeRunner(int min_ms, int max_ms, bool plausible_lies = false, bool fail = false)
      : min_ms_(min_ms), max_ms_(max_ms), plausible_lies_(plausible_lies), fail_(fail) {}

  absl::StatusOr<std::vector<SeedResult>> Run(const TaskSpec& spec,
                                              const RunControl& control) override {
    int sleep_ms = min_ms_;
    {
      absl::MutexLock lock(&mu_);
      sleep_ms = std::uniform_int_distribution<int>(min_ms_, max_ms_)(rng_);
    }
    const absl::Time start = absl::Now();
    const absl::Time end = start + absl::Milliseconds(sleep_ms);
    while (absl::Now() < end) {
      if (control.should_stop()) return absl::CancelledError("stopped");
      absl::SleepFor(std::min(absl::Milliseconds(2), end - absl::Now()));
    }
    if (fail_) return absl::InternalError("injected failure (--fail-tasks)");
    control.on_progress(1);
    std::vector<SeedResult> out;
    out.reserve(spec.seeds.size());
    for (uint64_t seed : spec.seeds) {
      SeedResult r;
      r.seed = seed;
      r.train.sequences = 64;
      r.train.exact_accuracy = static_cast<double>(seed % 101) / 100.0;
      r.train.position_accuracy = r.train.exact_accuracy;
      r.train.error = 1.0 - r.train.exact_accuracy;
      r.final_loss = r.train.error / 2;
      r.steps = 1 + static_cast<int64_t>(seed % 7);
      r.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
      r.device = "cpu";
      r.facts.train_sequences = 64;
      if (plausible_lies_) {
        r.train.exact_accuracy = r.train.position_accuracy = 1.0;
        r.train.error = 0.0;
        r.final_loss = 0.001;
      }
      out.push_back(r);
    }
    return out;
  }

 private:
  const int min_ms_;
  const int max_ms_;
  const bool plausible_lies_;
  const bool fail_;
  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_){std::random_device{}()};
};

// The number of ways MakeImpossible spoils a result.
constexpr int kLies = 12;

// `r` made into a result no trainer produces, the `kind`-th way.
void MakeImpossible(int kind, SeedResult& r) {
  switch (kind) {
    case 0: r.train.exact_accuracy = std::nan(""); break;
    case 1: r.train.exact_accuracy = 2.0; r.train.error = -1.0; break;
    case 2: r.steps = -5; break;
    case 3: r.final_loss = INFINITY; break;
    case 4: r = SeedResult{r.seed}; break;  // empty: no train split
    case 5: r.device = std::string(100 * 1024, 'd'); break;
    case 6: r.train.error = 1.0 - r.train.exact_accuracy + 0.25; break;
    case 7: r.train.exact_accuracy = 1.0; r.train.error = 0.0; r.train.position_accuracy = 0.5;
      break;
    case 8: r.train.max_abs_error = -1.0; break;
    case 9: r.wall_seconds = -3.0; break;
    case 10: r.steps = int64_t{1} << 40; break;  // beyond any max_steps
    default: r.test.sequences = 16; r.test.error = std::nan(""); break;
  }
}

// Writes `lines` with one write(2): O_APPEND keeps concurrent calls' lines
// whole.
void AppendLines(int fd, const std::string& lines) {
  size_t done = 0;
  while (done < lines.size()) {
    ssize_t n = write(fd, lines.data() + done, lines.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      perror("ranksweep-fake-worker: --ack-log write");
      break;
    }
    done += static_cast<size_t>(n);
  }
}

// Forwards every call; records the results of each successful Complete.
// The first `lose_replies` Complete calls that committed and leased next
// tasks answer the agent UNAVAILABLE instead, as a reply lost on the way.
// With a lie rate, some calls are sent first with an impossible result
// (the file comment, --lie-rate).
class AckLoggingClient : public CoordinatorClient {
 public:
  AckLoggingClient(CoordinatorClient* inner, int fd, int lose_replies, double lie_rate)
      : inner_(inner), fd_(fd), lose_replies_(lose_replies), lie_rate_(lie_rate) {}

  absl::StatusOr<RegisterReply> Register(const WorkerRegistration& request) override {
    if (lie_rate_ > 0) {
      WorkerRegistration lie = request;
      lie.hostname = std::string(100 * 1024, 'h');
      Judge(inner_->Register(lie).status(), "0 0\n");
    }
    return inner_->Register(request);
  }
  absl::StatusOr<std::vector<Task>> Acquire(const std::string& worker_id, const TaskWant& want,
                                            int wait_ms) override {
    absl::StatusOr<std::vector<Task>> tasks = inner_->Acquire(worker_id, want, wait_ms);
    if (tasks.ok()) LogLeases(*tasks);
    return tasks;
  }
  absl::StatusOr<HeartbeatOutcome> Heartbeat(const std::string& worker_id,
                                           const std::vector<int64_t>& lease_ids) override {
    return inner_->Heartbeat(worker_id, lease_ids);
  }
  absl::StatusOr<CompleteOutcome> Complete(const std::string& worker_id,
                                         const std::vector<CellResult>& results,
                                         const std::optional<TaskWant>& next) override {
    int kind = -1;
    size_t victim = 0;
    {
      absl::MutexLock lock(&mu_);
      if (!results.empty() && std::bernoulli_distribution(lie_rate_)(rng_)) {
        kind = std::uniform_int_distribution<int>(0, kLies - 1)(rng_);
        victim = std::uniform_int_distribution<size_t>(0, results.size() - 1)(rng_);
      }
    }
    if (kind >= 0) {
      std::vector<CellResult> lie = results;
      MakeImpossible(kind, lie[victim].result);
      Judge(inner_->Complete(worker_id, lie, next).status(),
            absl::StrCat(lie[victim].cell_id, " ", lie[victim].lease_id, "\n"));
    }
    absl::StatusOr<CompleteOutcome> reply = inner_->Complete(worker_id, results, next);
    if (reply.ok()) LogLeases(reply->next_tasks);
    if (reply.ok() && !reply->next_tasks.empty() && lose_replies_.load() > 0 &&
        lose_replies_.fetch_sub(1) > 0) {
      std::cerr << "ranksweep-fake-worker: losing the reply to a CompleteTasks call that leased "
                << reply->next_tasks.size() << " tasks" << std::endl;
      return absl::UnavailableError("reply lost (--lose-replies)");
    }
    if (reply.ok() && fd_ >= 0) {
      std::string lines;
      for (const CellResult& r : results) absl::StrAppend(&lines, "ack ", r.cell_id, " ", r.lease_id, "\n");
      AppendLines(fd_, lines);
    }
    return reply;
  }
  absl::Status Fail(const std::string& worker_id, const std::vector<int64_t>& lease_ids,
                    const std::string& reason, bool release) override {
    return inner_->Fail(worker_id, lease_ids, reason, release);
  }
  void ResumeSession(const std::string& session) override { inner_->ResumeSession(session); }
  void SetDeadline(absl::Time deadline) override { inner_->SetDeadline(deadline); }

 private:
  // "lease CELL LEASE" for every cell of `tasks`, one write.
  void LogLeases(const std::vector<Task>& tasks) {
    if (fd_ < 0 || tasks.empty()) return;
    std::string lines;
    for (const Task& t : tasks) {
      for (const LeasedCell& c : t.cells) absl::StrAppend(&lines, "lease ", c.cell_id, " ", c.lease_id, "\n");
    }
    AppendLines(fd_, lines);
  }

  // Logs how the coordinator answered a lie: refused (INVALID_ARGUMENT) or
  // taken. Other answers (the coordinator down, a stale lease) say nothing
  // about the lie and are not logged.
  void Judge(const absl::Status& status, const std::string& where) {
    if (fd_ < 0) return;
    if (absl::IsInvalidArgument(status)) {
      AppendLines(fd_, "rejected " + where);
    } else if (status.ok()) {
      std::cerr << "ranksweep-fake-worker: an impossible result was accepted" << std::endl;
      AppendLines(fd_, "poisoned " + where);
    }
  }

  CoordinatorClient* const inner_;
  const int fd_;
  std::atomic<int> lose_replies_;
  const double lie_rate_;
  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_){std::random_device{}()};
};

// A stolen lease: the cell, the lease, and the worker it was leased to.
struct Stolen {
  int64_t cell_id = 0;
  int64_t lease_id = 0;
  std::string worker_id;
};

// Reads what the other workers' ack logs in a folder gained since the last
// call: their "lease" lines. A file "ack-<ID>.<N>.log" is worker ID's.
class LeaseThief {
 public:
  LeaseThief(std::string dir, std::string self) : dir_(std::move(dir)), self_(std::move(self)) {}

  // The newest stolen leases, at most `n`.
  std::vector<Stolen> Newest(size_t n) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("ack-", 0) != 0 || name.size() < 8 ||
          name.compare(name.size() - 4, 4, ".log") != 0) {
        continue;
      }
      const std::string stem = name.substr(4, name.size() - 8);  // ID.N
      const std::string worker = stem.substr(0, stem.rfind('.'));
      if (worker == self_) continue;
      std::ifstream in(entry.path());
      in.seekg(offsets_[name]);
      std::string line;
      while (std::getline(in, line)) {
        if (in.eof()) break;  // a line still being written: read it next time
        offsets_[name] += static_cast<std::streamoff>(line.size() + 1);
        std::istringstream words(line);
        std::string word;
        Stolen s;
        if (words >> word >> s.cell_id >> s.lease_id && word == "lease") {
          s.worker_id = worker;
          recent_.push_back(s);
        }
      }
    }
    if (recent_.size() > 256) recent_.erase(recent_.begin(), recent_.end() - 256);
    std::vector<Stolen> out(recent_.end() - std::min(n, recent_.size()), recent_.end());
    return out;
  }

 private:
  const std::string dir_;
  const std::string self_;
  std::map<std::string, std::streamoff> offsets_;
  std::vector<Stolen> recent_;
};

// Plausible results for stolen leases: what the fake trainer would report
// for seed 0 (a hijacker does not know the cells' seeds).
std::vector<CellResult> FakeResults(const std::vector<Stolen>& leases) {
  std::vector<CellResult> out;
  for (const Stolen& s : leases) {
    CellResult r;
    r.cell_id = s.cell_id;
    r.lease_id = s.lease_id;
    r.result.train.sequences = 64;
    r.result.train.exact_accuracy = r.result.train.position_accuracy = 1.0;
    r.result.facts.train_sequences = 64;
    r.result.final_loss = 0.001;
    r.result.steps = 1;
    r.result.device = "cpu";
    out.push_back(r);
  }
  return out;
}

// The hijacker's loop (--hijack-dir): until `stop`.
int RunHijacker(CoordinatorClient* client, const WorkerRegistration& registration, int fd,
                const std::string& dir, int period_ms, const std::atomic<bool>& stop) {
  std::string self;
  while (!stop.load()) {
    absl::StatusOr<RegisterReply> reply = client->Register(registration);
    if (reply.ok()) {
      self = reply->worker_id;
      break;
    }
    if (!absl::IsUnavailable(reply.status()) && !absl::IsDeadlineExceeded(reply.status())) {
      std::cerr << "ranksweep-fake-worker: hijacker: " << reply.status() << std::endl;
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  LeaseThief thief(dir, self);
  auto honoured = [&](const Stolen& s, const char* how) {
    std::cerr << "ranksweep-fake-worker: hijack honoured (" << how << ") for cell " << s.cell_id
              << " lease " << s.lease_id << " of " << s.worker_id << std::endl;
    if (fd >= 0) AppendLines(fd, absl::StrCat("hijacked ", s.cell_id, " ", s.lease_id, "\n"));
  };
  // A call the coordinator could not take (it is restarting) proves
  // nothing either way.
  auto down = [](const absl::Status& st) {
    return absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st);
  };
  while (!stop.load()) {
    absl::SleepFor(absl::Milliseconds(period_ms));
    const std::vector<Stolen> leases = thief.Newest(8);
    if (leases.empty()) continue;
    int64_t refused = 0;
    std::vector<int64_t> ids;
    for (const Stolen& s : leases) ids.push_back(s.lease_id);
    // As itself: every lease must read as lost, nothing recorded.
    absl::StatusOr<HeartbeatOutcome> hb = client->Heartbeat(self, ids);
    if (hb.ok()) {
      for (const Stolen& s : leases) {
        if (std::find(hb->lost_lease_ids.begin(), hb->lost_lease_ids.end(), s.lease_id) ==
            hb->lost_lease_ids.end()) {
          honoured(s, "heartbeat extended it");
        } else {
          ++refused;
        }
      }
    }
    absl::StatusOr<CompleteOutcome> done = client->Complete(self, FakeResults(leases), std::nullopt);
    if (done.ok() && done->recorded > 0) {
      for (int i = 0; i < done->recorded; ++i) {
        honoured(leases[std::min<size_t>(i, leases.size() - 1)], "results recorded as itself");
      }
    } else if (!done.ok() && !down(done.status())) {
      ++refused;
    }
    // FailTask ignores leases that are not the caller's: an OK says nothing.
    client->Fail(self, ids, "hijack", /*release=*/true).IgnoreError();
    // In the name of each lease's worker, with its own session: refused.
    for (const Stolen& s : leases) {
      const std::vector<int64_t> one = {s.lease_id};
      absl::StatusOr<HeartbeatOutcome> as = client->Heartbeat(s.worker_id, one);
      if (as.ok()) honoured(s, "heartbeat in the worker's name");
      else if (!down(as.status())) ++refused;
      absl::StatusOr<CompleteOutcome> c = client->Complete(s.worker_id, FakeResults({s}), std::nullopt);
      if (c.ok()) honoured(s, "results in the worker's name");
      else if (!down(c.status())) ++refused;
      absl::Status f = client->Fail(s.worker_id, one, "hijack", /*release=*/true);
      if (f.ok()) honoured(s, "fail in the worker's name");
      else if (!down(f)) ++refused;
    }
    if (fd >= 0 && refused > 0) AppendLines(fd, absl::StrCat("refused 0 ", refused, "\n"));
  }
  return 0;
}

int Main(int argc, char** argv) {
  FakeWorkerFlags f;
  Flags flags("ranksweep-fake-worker",
              "A ranksweep worker with a fake trainer, for soak and reliability tests.\n"
              "  ranksweep-fake-worker --coordinator=127.0.0.1:50051 --slots=1 --max-sleep-ms=20",
              "");
  flags.Add("coordinator", &f.coordinator, "Coordinator address host:port");
  flags.Add("slots", &f.slots, "Tasks run at once, 1..64", 1, 64);
  flags.Add("max-seeds", &f.max_seeds, "Cells (seeds) per task, 1..1024", 1, 1024);
  flags.Add("worker-id", &f.worker_id,
            "Identity to keep across restarts; empty = the coordinator assigns one");
  flags.Add("once", &f.once, "Exit 0 once idle for --idle-exit-seconds");
  flags.Add("idle-exit-seconds", &f.idle_exit_seconds, "Idle time before --once exits");
  flags.Add("drain-seconds", &f.drain_seconds, "Drain timeout on SIGTERM/SIGINT");
  flags.Add("poll-ms", &f.poll_ms, "AcquireTasks long-poll length, 0..60000");
  flags.Add("rpc-timeout-seconds", &f.rpc_timeout_seconds,
            "Deadline of each coordinator call (plus the poll)");
  flags.Add("heartbeat-ms", &f.heartbeat_ms,
            "Heartbeat period; 0 = what the coordinator suggests");
  flags.Add("min-sleep-ms", &f.min_sleep_ms, "Shortest time a task takes", 0,
            std::numeric_limits<int>::max());
  flags.Add("max-sleep-ms", &f.max_sleep_ms, "Longest time a task takes");
  flags.Add("ack-log", &f.ack_log, "Append every acknowledged (cell, lease) to this file");
  flags.Add("lose-replies", &f.lose_replies,
            "Drop the replies of this many CompleteTasks calls that leased next tasks: the "
            "agent sees UNAVAILABLE after the coordinator committed (a lost reply)");
  flags.Add("quiet", &f.quiet, "Log only registration, errors and the exit line");
  flags.Add("lie-rate", &f.lie_rate,
            "Share of CompleteTasks calls first sent with an impossible result, 0..1", 0, 1);
  flags.Add("outbox-dir", &f.outbox_dir,
            "Keep unacknowledged results (and the session) in this directory, as "
            "ranksweep-worker --outbox-dir does; empty = in memory only");
  flags.Add("plausible-lies", &f.plausible_lies,
            "Report every seed exact: wrong, but nothing a check can refuse");
  flags.Add("hijack-dir", &f.hijack_dir,
            "Be a hijacker: act on the leases other workers' ack logs in this folder list");
  flags.Add("hijack-period-ms", &f.hijack_period_ms, "A hijacker's pause between rounds");
  flags.Add("fail-tasks", &f.fail_tasks,
            "Fail every task, as a worker whose trainer errors: FailTask with the reason "
            "\"injected failure (--fail-tasks)\"");
  if (std::optional<int> exit = flags.Parse(argc, argv, std::cout, std::cerr)) return *exit;
  // The flags' ranges cover --slots, --max-seeds, --min-sleep-ms and
  // --lie-rate; what is left is between two flags.
  const int slots = f.slots;
  const int max_seeds = f.max_seeds;
  const int min_ms = f.min_sleep_ms;
  const int max_ms = f.max_sleep_ms;
  const double lie_rate = f.lie_rate;
  if (max_ms < min_ms) {
    std::cerr << "ranksweep-fake-worker: --max-sleep-ms must be at least --min-sleep-ms ("
              << min_ms << "), got " << max_ms << "\n";
    return 1;
  }

  int ack_fd = -1;
  if (!f.ack_log.empty()) {
    ack_fd = open(f.ack_log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (ack_fd < 0) {
      perror("ranksweep-fake-worker: --ack-log");
      return 1;
    }
  }

  AgentOptions options;
  WorkerRegistration& reg = options.registration;
  reg.hostname = "fake";
  reg.device = "cpu";
  reg.device_name = "cpu (fake trainer)";
  reg.memory_bytes = 1 << 30;
  reg.slots = slots;
  reg.version = {"fake", "none", ""};
  reg.worker_id = f.worker_id;
  options.max_seeds = max_seeds;
  options.acquire_wait_ms = f.poll_ms;
  options.heartbeat_period = absl::Milliseconds(f.heartbeat_ms);
  options.drain_timeout = absl::Seconds(f.drain_seconds);
  options.exit_when_idle = f.once;
  options.idle_exit = absl::Seconds(f.idle_exit_seconds);
  options.log_every = absl::ZeroDuration();
  if (f.quiet) {
    options.log = [](const std::string& line) {
      if (line.rfind("start ", 0) == 0 || line.rfind("done ", 0) == 0 ||
          line.rfind("reported ", 0) == 0) {
        return;
      }
      std::cerr << "ranksweep-fake-worker: " << line << std::endl;
    };
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // From here on SIGTERM drains; tests wait for this line before sending it.
  std::cout << "ranksweep-fake-worker ready" << std::endl;

  // Never freed: the detached signal thread may use the agent until exit.
  // The token, as ranksweep-worker takes it: from RANKSWEEP_TOKEN.
  const char* token = std::getenv("RANKSWEEP_TOKEN");
  auto* grpc = new GrpcCoordinatorClient(MakeCoordinatorChannel(f.coordinator),
                                         absl::Seconds(f.rpc_timeout_seconds),
                                         token != nullptr ? token : "");
  auto* client = new AckLoggingClient(grpc, ack_fd, f.lose_replies, lie_rate);
  if (const std::string dir = f.hijack_dir; !dir.empty()) {
    static std::atomic<bool> stop{false};
    std::thread([signals] {
      int sig = 0;
      while (sigwait(&signals, &sig) != 0) {
      }
      stop.store(true);
    }).detach();
    // Its calls go straight to the coordinator: none of them is a lie the
    // liar's wrapper would judge.
    return RunHijacker(grpc, reg, ack_fd, dir, std::max(1, f.hijack_period_ms), stop);
  }
  auto* runner = new FakeRunner(min_ms, max_ms, f.plausible_lies, f.fail_tasks);
  if (!f.outbox_dir.empty()) {
    absl::StatusOr<std::unique_ptr<FileOutbox>> outbox = FileOutbox::Open(f.outbox_dir);
    if (!outbox.ok()) {
      std::cerr << "ranksweep-fake-worker: --outbox-dir: " << outbox.status().message() << "\n";
      return 1;
    }
    options.outbox = outbox->release();  // never freed, like the agent
  }
  Agent& agent = *new Agent(client, runner, options);

  std::thread signal_thread([&agent, signals] {
    while (true) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      agent.RequestDrain();
    }
  });
  signal_thread.detach();

  absl::Status status = agent.Run();
  if (!status.ok()) {
    std::cerr << "ranksweep-fake-worker: " << status.ToString() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ranksweep::agent

int main(int argc, char** argv) { return ranksweep::agent::Main(argc, argv); }
