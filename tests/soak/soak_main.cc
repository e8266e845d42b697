// `ranksweep-soak`: the soak test driver. Runs ranksweepd and many
// ranksweep-fake-worker processes on loopback, submits sweeps totalling
// --cells cells per round, and meanwhile SIGKILLs random workers (restarting
// each after a random delay under the same worker id) and SIGKILLs and
// restarts the coordinator on the same database file and port. The kills
// fire at random points of progress (share of the round's cells done), drawn
// from --seed, so every requested kill lands before the round ends. With
// --duration-seconds it starts new rounds until that much time has passed.
//
// Meanwhile --watchers `ranksweep watch` processes per round follow the
// round's sweeps (one each, in turn) through those restarts, as people do;
// each must end by itself with exit 0 (its sweep DONE).
//
// --liars of the workers also lie (soak_cluster.h, ClusterOptions::liars):
// before some of their CompleteTasks calls, and once when they register,
// they send a result or a registration no trainer produces, which the
// coordinator must refuse.
//
// The pool is a shared one: ranksweepd runs with tokens, the workers share a
// worker token, the CLI and watchers use an admin token. Beside them:
//
// --hijackers more processes (ranksweep-fake-worker --hijack-dir) with a
// worker token of their own steal the leases the other workers log and
// heartbeat, complete and fail them, as themselves and in the leases'
// workers' names, every 50 ms. hijacked = result rows stored through
// another worker's lease (rows of a hijacker, and rows whose lease the logs
// show was leased to another worker than the row names) plus every hijack
// call the coordinator honoured (the hijackers' logs).
//
// --quarantined-liar adds one worker, with a token of its own, whose results
// are plausible but wrong (every seed exact). Once --quarantine-at of round
// 0's cells are done (and it has stored some) the driver quarantines it
// with its token (`ranksweep workers quarantine ID --token`), kills it, and
// from then on starts it again whenever it is down, as a supervisor would,
// alternately under its id and under a fresh one. requarantined = leases and
// results its incarnations after the quarantine logged, plus result rows
// any worker of its token holds at the end (the quarantine invalidated
// every earlier one).
//
// When every sweep is DONE it drains the workers, stops the coordinator and
// checks the SQLite file directly against every acknowledgement the workers
// logged (soak_cluster.h, Verify) and for impossible values in any result
// row, copy from the result cache or group. The last line of stdout is
//   cells=N worker_kills=K coordinator_restarts=R lost=L duplicated=D integrity=I
//   rejected=J poisoned=P watchers=W watch_failures=F hijacked=H requarantined=Q
//   hijack_refused=A liar_reconnects=C
// (one line; rejected: the lies refused; poisoned: lies taken plus stored
// impossible values; hijack_refused: hijack calls refused; liar_reconnects:
// starts of the quarantined liar after its quarantine) and the exit code is
// 0 only for lost=0 duplicated=0 integrity=ok poisoned=0 watch_failures=0
// hijacked=0 requarantined=0, at least one lie refused when there are
// liars, at least one hijack refused when there are hijackers, the liar
// quarantined and refused on reconnecting when there is one, all sweeps
// DONE and at least the requested kills done; 1 otherwise, and for a flag
// that is unknown or does not parse (common/flags.h); 2 for flag values the
// checks in Main refuse.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/flags.h"
#include "tests/soak/soak_cluster.h"
#include "tests/support/process.h"

#ifndef RANKSWEEPD_BIN
#define RANKSWEEPD_BIN "ranksweepd"
#endif
#ifndef RANKSWEEP_FAKE_WORKER_BIN
#define RANKSWEEP_FAKE_WORKER_BIN "ranksweep-fake-worker"
#endif
#ifndef RANKSWEEP_CLI_BIN
#define RANKSWEEP_CLI_BIN "ranksweep"
#endif

namespace ranksweep::soak {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Event {
  double at;  // share of the round's cells done
  bool coordinator;
};

// The flags, with their defaults (registered in Main).
struct SoakFlags {
  int workers = 32;
  int cells = 2000;
  int worker_kills = 5;
  int coordinator_restarts = 1;
  int duration_seconds = 0;
  int timeout_seconds = 600;
  uint64_t seed = 0;
  int max_seeds = 4;
  int max_sleep_ms = 20;
  int lease_seconds = 2;
  int max_attempts = 50;
  int worker_restart_ms = 1500;
  int coordinator_down_ms = 1000;
  int liars = 0;
  double lie_rate = 0.3;
  int watchers = 1;
  int hijackers = 0;
  bool quarantined_liar = false;
  double quarantine_at = 0.3;
  std::string dir;
  std::string ranksweepd = RANKSWEEPD_BIN;
  std::string fake_worker = RANKSWEEP_FAKE_WORKER_BIN;
  std::string cli = RANKSWEEP_CLI_BIN;
};

// Sweeps of at most 4 ranks x 256 seeds, totalling exactly `cells`.
std::vector<std::string> RoundSweeps(int round, int cells) {
  std::vector<std::string> specs;
  int left = cells;
  for (int i = 0; left > 0; ++i) {
    const std::string name = "soak-" + std::to_string(round) + "-" + std::to_string(i);
    int ranks = left >= 4 ? 4 : 1;
    int seeds = std::min(256, left / ranks);
    specs.push_back(SweepJson(name, ranks, seeds, /*priority=*/i % 3));
    left -= ranks * seeds;
  }
  return specs;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

int Main(int argc, char** argv) {
  SoakFlags f;
  Flags flags("ranksweep-soak",
              "Soak test: many fake workers, thousands of cells, random kill -9 of workers and "
              "of the coordinator; verifies the database.\n"
              "  ranksweep-soak --workers=32 --cells=2000 --worker-kills=5 "
              "--coordinator-restarts=1",
              "");
  flags.Add("workers", &f.workers, "Fake worker processes");
  flags.Add("cells", &f.cells, "Cells per round");
  flags.Add("worker-kills", &f.worker_kills, "Worker SIGKILLs per round (each restarted)");
  flags.Add("coordinator-restarts", &f.coordinator_restarts,
            "Coordinator SIGKILL + restart per round");
  flags.Add("duration-seconds", &f.duration_seconds,
            "Start new rounds until this much time has passed; 0 = one");
  flags.Add("timeout-seconds", &f.timeout_seconds, "Give up (and fail) after this long");
  flags.Add("seed", &f.seed, "Seed of the kill schedule; 0 = from the clock (printed)");
  flags.Add("max-seeds", &f.max_seeds, "Cells per task");
  flags.Add("max-sleep-ms", &f.max_sleep_ms, "Longest fake task, ms (shortest is 0)");
  flags.Add("lease-seconds", &f.lease_seconds, "ranksweepd --lease-seconds");
  flags.Add("max-attempts", &f.max_attempts, "ranksweepd --max-attempts");
  flags.Add("worker-restart-ms", &f.worker_restart_ms,
            "Longest delay before a killed worker restarts");
  flags.Add("coordinator-down-ms", &f.coordinator_down_ms, "Longest coordinator downtime");
  flags.Add("liars", &f.liars, "Workers that also send impossible results (the first N)");
  flags.Add("lie-rate", &f.lie_rate, "Share of a liar's CompleteTasks calls preceded by a lie");
  flags.Add("watchers", &f.watchers,
            "`ranksweep watch` processes per round, on the round's sweeps in turn");
  flags.Add("hijackers", &f.hijackers, "Processes that try to act on other workers' leases");
  flags.Add("quarantined-liar", &f.quarantined_liar,
            "Add a worker with plausible wrong results that is quarantined (with its token) "
            "during round 0 and keeps reconnecting");
  flags.Add("quarantine-at", &f.quarantine_at,
            "Share of round 0's cells done when the liar is quarantined");
  flags.Add("dir", &f.dir, "Work directory (kept); empty = a temporary one (removed)");
  flags.Add("ranksweepd", &f.ranksweepd, "ranksweepd binary");
  flags.Add("fake-worker", &f.fake_worker, "ranksweep-fake-worker binary");
  flags.Add("cli", &f.cli, "ranksweep CLI binary");
  if (std::optional<int> exit = flags.Parse(argc, argv, std::cout, std::cerr)) return *exit;
  const int n_workers = f.workers;
  const int cells_per_round = f.cells;
  const int kills_per_round = f.worker_kills;
  const int restarts_per_round = f.coordinator_restarts;
  const int watchers_per_round = f.watchers;
  if (n_workers < 1 || cells_per_round < 1 || kills_per_round < 0 || restarts_per_round < 0 ||
      watchers_per_round < 0) {
    std::cerr << "ranksweep-soak: --workers and --cells must be positive, kills and "
                 "--watchers >= 0\n";
    return 2;
  }
  uint64_t seed = f.seed;
  if (seed == 0) seed = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) | 1;
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };

  std::optional<testing::TempDir> temp;
  std::string dir = f.dir;
  if (dir.empty()) {
    temp.emplace();
    dir = temp->path();
  } else {
    std::filesystem::create_directories(dir);
  }
  std::cout << "soak: seed=" << seed << " workers=" << n_workers
            << " cells_per_round=" << cells_per_round << " dir=" << dir << std::endl;

  ClusterOptions options;
  options.dir = dir;
  options.bin = {f.ranksweepd, f.fake_worker, f.cli};
  options.lease_seconds = f.lease_seconds;
  options.max_attempts = f.max_attempts;
  options.max_seeds = f.max_seeds;
  options.max_sleep_ms = f.max_sleep_ms;
  options.heartbeat_ms = std::max(100, options.lease_seconds * 1000 / 4);
  options.worker_id_prefix = "soak-w";
  options.liars = f.liars;
  options.lie_rate = f.lie_rate;
  options.tokens = true;
  Cluster cluster(options);
  const int n_hijackers = f.hijackers;
  const bool with_liar = f.quarantined_liar;
  const double quarantine_at = f.quarantine_at;
  if (n_hijackers < 0 || !(quarantine_at > 0 && quarantine_at < 1)) {
    std::cerr << "ranksweep-soak: --hijackers must be >= 0 and --quarantine-at in (0, 1)\n";
    return 2;
  }
  // A shared pool: tokens for the CLI, the workers, the hijackers and the
  // liar, each its own.
  const std::string admin_token = cluster.CreateToken("soak-ops", "admin");
  const std::string pool_token = cluster.CreateToken("soak-pool", "worker");
  const std::string hijack_token = cluster.CreateToken("soak-hijack", "worker");
  const std::string liar_token = cluster.CreateToken("soak-liar", "worker");
  if (admin_token.empty() || pool_token.empty() || hijack_token.empty() || liar_token.empty()) {
    std::cerr << "ranksweep-soak: " << cluster.error() << "\n";
    return 1;
  }
  cluster.set_cli_token(admin_token);
  cluster.set_worker_token(pool_token);
  // Workers 0..n-1 train; then the hijackers; then the quarantined liar.
  std::vector<int> hijackers;
  for (int i = 0; i < n_hijackers; ++i) {
    hijackers.push_back(n_workers + i);
    cluster.SetupWorker(n_workers + i, {hijack_token, {"--hijack-dir=" + dir}});
  }
  const int liar = with_liar ? n_workers + n_hijackers : -1;
  if (with_liar) cluster.SetupWorker(liar, {liar_token, {"--plausible-lies"}});
  const int all_workers = n_workers + n_hijackers + (with_liar ? 1 : 0);

  const Clock::time_point start = Clock::now();
  const Clock::time_point give_up = start + std::chrono::seconds(f.timeout_seconds);
  const auto duration = std::chrono::seconds(f.duration_seconds);
  bool ok = true;
  if (!cluster.StartCoordinator()) {
    std::cerr << "ranksweep-soak: " << cluster.error() << "\n";
    return 1;
  }
  for (int i = 0; i < all_workers; ++i) cluster.StartWorker(i);
  // The quarantine of the liar: when, and the first ack log after it.
  bool quarantined = false;
  size_t first_log_after_quarantine = 0;
  int64_t liar_reconnects = 0, liar_refused = 0;
  Clock::time_point next_reconnect;
  // Starts the quarantined liar again, as a supervisor would: under its id,
  // then under a fresh one (the same token), in turn.
  auto reconnect_liar = [&] {
    std::vector<std::string> args = {"--plausible-lies"};
    if (liar_reconnects % 2 == 1) args.push_back("--worker-id=");
    cluster.SetupWorker(liar, {liar_token, args});
    cluster.StartWorker(liar);
    ++liar_reconnects;
  };

  int64_t worker_kills = 0;
  int64_t coordinator_restarts = 0;
  int64_t total_cells = 0;
  int64_t sweeps = 0;
  // Killed workers and when they come back.
  std::vector<std::pair<Clock::time_point, int>> restarts;
  std::vector<std::unique_ptr<testing::Process>> watches;
  for (int round = 0; ok && (round == 0 || Clock::now() - start < duration); ++round) {
    const int64_t done_before = QueryInt(cluster.db(), "SELECT count(*) FROM results");
    std::vector<std::string> ids;
    for (const std::string& spec : RoundSweeps(round, cells_per_round)) {
      ids.push_back(cluster.Submit(spec));
      if (ids.back().empty()) {
        std::cerr << "ranksweep-soak: " << cluster.error() << "\n";
        return 1;
      }
      ++sweeps;
    }
    for (int i = 0; i < watchers_per_round; ++i) {
      const std::string& id = ids[static_cast<size_t>(i) % ids.size()];
      watches.push_back(std::make_unique<testing::Process>(
          std::vector<std::string>{f.cli, "--addr=" + cluster.address(), "watch", id},
          dir + "/watch-" + std::to_string(round) + "-" + std::to_string(i),
          std::vector<std::string>{"RANKSWEEP_TOKEN=" + admin_token}));
      // Connected before any kill: a watch that never reached the
      // coordinator reports that at once instead of reconnecting.
      if (!watches.back()->WaitForStderr(std::regex("watching"), 30s)) {
        std::cerr << "ranksweep-soak: watch " << watches.size() - 1 << " did not start:\n"
                  << watches.back()->Stderr();
        return 1;
      }
    }
    total_cells += cells_per_round;
    std::vector<Event> events;
    for (int i = 0; i < kills_per_round; ++i) events.push_back({uniform(0.05, 0.9), false});
    for (int i = 0; i < restarts_per_round; ++i) events.push_back({uniform(0.1, 0.8), true});
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.at < b.at; });
    size_t next_event = 0;
    const Clock::time_point round_start = Clock::now();

    while (true) {
      const Clock::time_point now = Clock::now();
      for (auto it = restarts.begin(); it != restarts.end();) {
        if (it->first <= now) {
          // The quarantined liar comes back through its reconnects below.
          if (!(quarantined && it->second == liar)) cluster.StartWorker(it->second);
          it = restarts.erase(it);
        } else {
          ++it;
        }
      }
      const int64_t done = QueryInt(cluster.db(), "SELECT count(*) FROM results") - done_before;
      const double progress = static_cast<double>(done) / cells_per_round;
      if (with_liar && round == 0 && !quarantined && progress >= quarantine_at &&
          (progress >= 0.8 ||
           QueryInt(cluster.db(), "SELECT count(*) FROM results WHERE worker_id = '" +
                                      cluster.WorkerId(liar) + "'") > 0)) {
        testing::CommandResult q =
            cluster.Cli({"workers", "quarantine", cluster.WorkerId(liar), "--token"});
        if (q.exit_code != 0) {
          std::cerr << "ranksweep-soak: quarantine of the liar exited " << q.exit_code << ": "
                    << q.err;
          return 1;
        }
        cluster.StopWorker(liar, SIGKILL);
        quarantined = true;
        first_log_after_quarantine = cluster.ack_logs().size();
        next_reconnect = Clock::now() + 200ms;
        std::cout << "soak: +" << Seconds(Clock::now() - start) << "s at " << done << "/"
                  << cells_per_round << " " << q.out << std::flush;
      }
      if (quarantined && !cluster.worker_running(liar) && Clock::now() >= next_reconnect) {
        if (cluster.WorkerExit(liar) == std::optional<int>(1)) ++liar_refused;
        reconnect_liar();
        next_reconnect = Clock::now() + 500ms;
      }
      while (next_event < events.size() && events[next_event].at <= progress) {
        const Event e = events[next_event++];
        if (e.coordinator) {
          if (!cluster.StopCoordinator(SIGKILL)) {
            std::cerr << "ranksweep-soak: ranksweepd survived SIGKILL\n";
            return 1;
          }
          const int down_ms = static_cast<int>(uniform(0, f.coordinator_down_ms));
          std::cout << "soak: +" << Seconds(Clock::now() - start) << "s at " << done << "/"
                    << cells_per_round << " kill -9 coordinator, down " << down_ms << " ms"
                    << std::endl;
          std::this_thread::sleep_for(std::chrono::milliseconds(down_ms));
          if (!cluster.StartCoordinator()) {
            std::cerr << "ranksweep-soak: restart: " << cluster.error() << "\n";
            return 1;
          }
          ++coordinator_restarts;
        } else {
          std::vector<int> alive;
          for (int i = 0; i < cluster.worker_count(); ++i) {
            if (cluster.worker_running(i) && !(quarantined && i == liar)) alive.push_back(i);
          }
          if (alive.empty()) continue;
          const int victim = alive[std::uniform_int_distribution<size_t>(0, alive.size() - 1)(rng)];
          const int code = cluster.StopWorker(victim, SIGKILL);
          const int back_ms = static_cast<int>(uniform(0, f.worker_restart_ms));
          std::cout << "soak: +" << Seconds(Clock::now() - start) << "s at " << done << "/"
                    << cells_per_round << " kill -9 worker " << victim << " (exit " << code
                    << "), back in " << back_ms << " ms" << std::endl;
          restarts.push_back({Clock::now() + std::chrono::milliseconds(back_ms), victim});
          ++worker_kills;
        }
      }
      if (next_event == events.size() &&
          QueryInt(cluster.db(), "SELECT count(*) FROM sweeps WHERE state != 2") == 0) {
        break;
      }
      if (Clock::now() > give_up) {
        std::cerr << "ranksweep-soak: timed out after " << f.timeout_seconds
                  << " s with " << done << "/" << cells_per_round << " cells of round " << round
                  << " done\n";
        ok = false;
        break;
      }
      // A worker that exits on its own is a failure of the agent.
      for (int i = 0; i < cluster.worker_count(); ++i) {
        bool pending = std::any_of(restarts.begin(), restarts.end(),
                                   [i](const auto& r) { return r.second == i; });
        // The quarantined liar is refused and exits; it is started again.
        if (quarantined && i == liar) continue;
        if (!pending && !cluster.worker_running(i)) {
          std::cerr << "ranksweep-soak: worker " << i << " exited on its own\n";
          ok = false;
        }
      }
      if (!ok) break;
      std::this_thread::sleep_for(20ms);
    }
    std::cout << "soak: round " << round << " done in " << Seconds(Clock::now() - round_start)
              << " s" << std::endl;
  }

  // Every sweep is DONE (or the run gave up): each watch ends by itself.
  int64_t watch_failures = 0;
  for (size_t i = 0; i < watches.size(); ++i) {
    const std::optional<int> code = watches[i]->Wait(60s);
    if (code != std::optional<int>(0)) {
      std::cerr << "ranksweep-soak: watch " << i << " "
                << (code ? "exited " + std::to_string(*code) : std::string("did not end"))
                << ":\n" << watches[i]->Stderr();
      ++watch_failures;
    }
  }

  // Bring back the workers still down, then drain everyone (but the
  // quarantined liar, which is stopped).
  for (const auto& r : restarts) {
    if (!(quarantined && r.second == liar)) cluster.StartWorker(r.second);
  }
  if (quarantined) {
    // Every reconnect must be refused (exit 1): wait for the last one, and
    // try both kinds (its id, a fresh id) at least once.
    for (int extra = 0;; ++extra) {
      const int code = cluster.WaitWorker(liar, 15);
      if (code == 1) ++liar_refused;
      if (code == -1) {
        std::cerr << "ranksweep-soak: the quarantined liar did not exit within 15 s\n";
        cluster.StopWorker(liar, SIGKILL);
      }
      if (liar_reconnects >= 2 || extra >= 2) break;
      reconnect_liar();
    }
  }
  auto drained = [&](int i) { return !(quarantined && i == liar); };
  for (int i = 0; i < cluster.worker_count(); ++i) {
    if (drained(i) && !cluster.WaitWorkerReady(i)) {
      std::cerr << "ranksweep-soak: worker " << i << " never became ready\n";
      ok = false;
    }
  }
  for (int i = 0; i < cluster.worker_count(); ++i) {
    if (drained(i)) cluster.SignalWorker(i, SIGTERM);
  }
  for (int i = 0; i < cluster.worker_count(); ++i) {
    if (!drained(i)) continue;
    if (const int code = cluster.WaitWorker(i, 30); code != 0) {
      std::cerr << "ranksweep-soak: worker " << i << " exited " << code << " on SIGTERM\n";
      ok = false;
    }
  }
  if (!cluster.StopCoordinator(SIGTERM)) {
    std::cerr << "ranksweep-soak: ranksweepd did not stop on SIGTERM\n";
    ok = false;
  }

  // The logs by role. The liar's acknowledgements are of rows its
  // quarantine took back: not the stored results, so not Verify's.
  std::vector<std::string> pool_logs, pool_ids, hijack_logs, liar_logs_after;
  for (size_t k = 0; k < cluster.ack_logs().size(); ++k) {
    const int w = cluster.ack_log_workers()[k];
    const std::string& path = cluster.ack_logs()[k];
    if (std::find(hijackers.begin(), hijackers.end(), w) != hijackers.end()) {
      hijack_logs.push_back(path);
    } else if (w == liar) {
      if (quarantined && k >= first_log_after_quarantine) liar_logs_after.push_back(path);
    } else {
      pool_logs.push_back(path);
      pool_ids.push_back(cluster.WorkerId(w));
    }
  }
  const auto acks = ReadAcks(pool_logs);
  Verdict v = Verify(cluster.db(), acks);
  const LieCounts lies = ReadLies(pool_logs);

  // Hijacks: rows through another worker's lease, and calls honoured.
  std::vector<std::string> hijacker_ids;
  for (int h : hijackers) hijacker_ids.push_back(cluster.WorkerId(h));
  const HijackCounts hijacks = ReadHijacks(hijack_logs);
  const int64_t stolen_rows = RowsThroughOthersLeases(
      cluster.db(), ReadLeaseHolders(pool_logs, pool_ids), hijacker_ids);
  const int64_t hijacked = stolen_rows + hijacks.honoured;
  if (hijacked != 0) {
    std::cerr << "ranksweep-soak: " << stolen_rows << " rows stored through another worker's "
              << "lease, " << hijacks.honoured << " hijack calls honoured\n";
  }
  if (n_hijackers > 0 && hijacks.refused == 0) {
    std::cerr << "ranksweep-soak: hijackers ran but no hijack was refused\n";
    ok = false;
  }
  // The quarantined liar: what it took after its quarantine.
  int64_t requarantined = 0;
  if (with_liar) {
    const int64_t rows = QueryInt(cluster.db(),
                                  "SELECT count(*) FROM results WHERE worker_id IN "
                                  "(SELECT id FROM workers WHERE owner = 'soak-liar')");
    int64_t taken = 0;
    for (const auto& [cell, leases] : ReadAcks(liar_logs_after)) taken += leases.size();
    taken += static_cast<int64_t>(ReadLeaseHolders(liar_logs_after,
                                                   std::vector<std::string>(
                                                       liar_logs_after.size(), "liar"))
                                      .size());
    requarantined = rows + taken;
    if (requarantined != 0) {
      std::cerr << "ranksweep-soak: the quarantined liar holds " << rows << " result rows and "
                << "took " << taken << " leases and acknowledgements after its quarantine\n";
    }
    if (!quarantined || liar_reconnects < 2 || liar_refused != liar_reconnects) {
      std::cerr << "ranksweep-soak: the liar was " << (quarantined ? "" : "not ")
                << "quarantined, reconnected " << liar_reconnects << " times, refused "
                << liar_refused << " times\n";
      ok = false;
    }
  }
  const int64_t poisoned = v.poisoned + lies.accepted;
  if (lies.accepted != 0) {
    std::cerr << "ranksweep-soak: the coordinator accepted " << lies.accepted << " lies\n";
  }
  if (options.liars > 0 && lies.rejected == 0) {
    std::cerr << "ranksweep-soak: liars ran but no lie was refused\n";
    ok = false;
  }
  const int64_t not_done = QueryInt(cluster.db(), "SELECT count(*) FROM sweeps WHERE state != 2");
  for (const std::string& p : v.problems) std::cerr << "ranksweep-soak: " << p << "\n";
  std::cout << "soak: " << sweeps << " sweeps, " << v.results << " results, " << v.acked_cells
            << " acknowledged cells seen in worker logs, " << Seconds(Clock::now() - start)
            << " s" << std::endl;
  if (v.cells != total_cells) {
    std::cerr << "ranksweep-soak: the database has " << v.cells << " cells, submitted "
              << total_cells << "\n";
    ok = false;
  }
  if (not_done != 0) {
    std::cerr << "ranksweep-soak: " << not_done << " sweeps not DONE\n";
    ok = false;
  }
  if (worker_kills < static_cast<int64_t>(kills_per_round) ||
      coordinator_restarts < static_cast<int64_t>(restarts_per_round)) {
    std::cerr << "ranksweep-soak: fewer kills than asked for\n";
    ok = false;
  }
  std::cout << "cells=" << v.cells << " worker_kills=" << worker_kills
            << " coordinator_restarts=" << coordinator_restarts << " lost=" << v.lost
            << " duplicated=" << v.duplicated << " integrity=" << v.integrity
            << " rejected=" << lies.rejected << " poisoned=" << poisoned
            << " watchers=" << watches.size() << " watch_failures=" << watch_failures
            << " hijacked=" << hijacked << " requarantined=" << requarantined
            << " hijack_refused=" << hijacks.refused << " liar_reconnects=" << liar_reconnects
            << std::endl;
  ok = ok && v.lost == 0 && v.duplicated == 0 && v.integrity == "ok" && poisoned == 0 &&
       watch_failures == 0 && hijacked == 0 && requarantined == 0;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace ranksweep::soak

int main(int argc, char** argv) { return ranksweep::soak::Main(argc, argv); }
