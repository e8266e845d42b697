// Coordinator throughput and query latency, through real gRPC and a real
// SQLite file.
//
//   dispatch: W concurrent fake workers (one channel each) acquire
//             K tasks of up to S seeds each (--tasks-per-call,
//             --seeds-per-task; both default 1, the worst case; the real
//             worker asks for one task per free slot and up to 64 seeds) and
//             complete them in one CompleteTasks call with synthetic
//             results. That call also leases the next K tasks (`next`), as
//             the worker agent does, so a cycle is one call; with
//             --next-in-complete=false every cycle is an AcquireTasks call and a
//             CompleteTasks call, and the latencies are AcquireTasks'. cells/s is
//             completed-and-durable cells (one seed of one (head, rank): one
//             trained model, what an Optuna trial is) per wall second, with
//             p50/p99 latency of the calls that lease. The server's own count of writes,
//             commits (group commit) and transactions run again after a failed
//             write is printed too, and the CPU time
//             (user + system) that ranksweepd and the fake workers each
//             spent per cell: on a shared machine the two compete for the
//             same cores, so these say where the cores went. The busiest
//             server thread's CPU per cell, and the share of the wall time
//             it was on a core, show how close the store's writer thread,
//             which runs every write, is to being the limit. --watchers=N
//             adds N WatchSweep streams on the sweep for the whole phase
//             (people running `ranksweep watch`), each reading every event.
//             --client=callback (the default) drives the W workers with
//             gRPC's callback API, each reply's callback sending the next
//             call; --client=threads gives each worker a thread making
//             blocking calls, as the bench did before. Real workers run on
//             other machines; here their CPU comes out of the same two
//             cores as the server's, and the threaded client's costs about
//             half as much again per cell.
//   paced:    the same workers, each pausing between cycles so that all of
//             them together offer --paced-tasks-per-second (default 500)
//             evenly spaced one-task cycles, each an AcquireTasks call and
//             a CompleteTasks call (worker i starts i/W of a period
//             after worker 0): acquire latency when the coordinator is not
//             saturated (in the dispatch phase every call waits behind the
//             others, so its latency is mostly queueing: workers / rate).
//   query:    QueryResults latency on a sweep of Q result rows, median of
//             several runs: per-seed rows in one reply (page_size 0); in
//             pages of --page-size rows (the CLI's 10,000), the first page
//             and all of them; and grouped by (head, rank). Its floor, in
//             the same run: the same rows read straight from the database
//             file by the bench itself (no coordinator, no gRPC), from
//             `results` with every column and from `result_packs`. The
//             median's runs after the first may be answered by the
//             coordinator's reply cache (the sweep no longer changes); the
//             first run of the one-reply columns query is printed too, and
//             a ranksweepd run with --query-cache-mb=0 reads every run.
//             `query_columns_split` times the one-reply columns query in
//             two parts: until its bytes are all here (the coordinator's
//             read and encoding, and the wire), and then their parse into
//             the message (and its page faults), which is the client's own
//             work whichever coordinator answered.
//
// It starts its own ranksweepd (temporary database, port 0). The peer
// (Optuna with SQLite storage running no-op trials) is run by
// bench/run_dispatch_bench, which prints the ratio.
//
// Flags are parsed as ranksweepd's are (common/flags.h): dashes or the
// older underscores, --help, "did you mean", a bad value refused with its
// range (exit 1); a failed run exits 5.
#include <google/protobuf/arena.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "common/exit_codes.h"
#include "common/flags.h"
#include "common/subprocess.h"
#include "common/temp_dir.h"
#include "proto/columns.h"
#include "proto/reply_arena.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "sqlite3.h"

namespace {

using namespace std::chrono_literals;
namespace v1 = ranksweep::v1;
using Clock = std::chrono::steady_clock;

struct BenchFlags {
  std::string ranksweepd;
  int workers = 64;
  int cells = 20000;
  int query_rows = 100000;
  int query_runs = 5;
  int tasks_per_call = 1;
  int seeds_per_task = 1;
  int paced_tasks_per_second = 500;
  int paced_tasks = 5000;
  int page_size = 10000;  // the CLI's
  int watchers = 0;
  bool next_in_complete = true;  // the dispatch phase's CompleteTasks leases the next tasks
  bool callback_client = true;   // --client=callback (default) or --client=threads
  // Each result carries a learning curve of this many evaluations (every 25
  // steps, with a test split's worth of values left out: an exhaustive
  // dataset); 0 = none.
  int curve_points = 0;
};

// Set from --curve-points before any result is made.
int g_curve_points = 0;

// The flags, parsed as ranksweepd parses its own; exits on --help (0) or a
// usage error (kExitUsage).
BenchFlags ParseFlags(int argc, char** argv) {
  BenchFlags f;
  std::string client = "callback";
  ranksweep::Flags flags(
      "dispatch_bench",
      "dispatch_bench: coordinator throughput and query latency through real gRPC and a real "
      "SQLite file.\n"
      "Usage: dispatch_bench --ranksweepd=PATH [--workers=64] [--cells=20000] "
      "[--tasks-per-call=1] [--seeds-per-task=1] [--query-rows=100000] [--paced-tasks=5000] "
      "[--watchers=0] [--client=callback|threads] ...",
      "dispatch_bench\n");
  flags.Add("ranksweepd", &f.ranksweepd, "The ranksweepd binary to start (required)");
  flags.Add("workers", &f.workers, "Concurrent fake workers, one channel each, 1..4096", 1, 4096);
  flags.Add("cells", &f.cells, "Cells of the dispatch phase, 1..327680", 1, 327680);
  flags.Add("query-rows", &f.query_rows,
            "Result rows of the query phase, 0..327680; 0 = no query phase", 0, 327680);
  flags.Add("query-runs", &f.query_runs, "Runs of each query, the median reported, 1..1000", 1,
            1000);
  flags.Add("tasks-per-call", &f.tasks_per_call, "Tasks a fake worker asks for per call, 1..64",
            1, 64);
  flags.Add("seeds-per-task", &f.seeds_per_task, "Seeds (cells) per task, 1..1024", 1, 1024);
  flags.Add("paced-tasks-per-second", &f.paced_tasks_per_second,
            "One-task cycles per second all workers offer in the paced phase, 0..1000000; 0 = no "
            "paced phase",
            0, 1000000);
  flags.Add("paced-tasks", &f.paced_tasks,
            "Tasks of the paced phase, 0..327680; 0 = no paced phase", 0, 327680);
  flags.Add("page-size", &f.page_size,
            "Rows per page of the paged queries, 0..1000000 (the CLI's 10000)", 0, 1000000);
  flags.Add("watchers", &f.watchers, "WatchSweep streams on the dispatch sweep, 0..1000", 0,
            1000);
  flags.Add("next-in-complete", &f.next_in_complete,
            "The dispatch phase's CompleteTasks call leases the next tasks (false: a separate "
            "AcquireTasks call per cycle)");
  flags.Add("client", &client,
            "callback: gRPC's callback API drives the workers; threads: a thread per worker "
            "making blocking calls");
  flags.Add("curve-points", &f.curve_points,
            "Evaluations of the learning curve each result carries, 0..80 (2,000 steps at "
            "eval_every 25); 0 = none",
            0, 80);
  if (std::optional<int> exit = flags.Parse(argc, argv, std::cout, std::cerr)) std::exit(*exit);
  if (client != "callback" && client != "threads") {
    std::fprintf(stderr, "dispatch_bench: --client must be callback or threads, got \"%s\"\n",
                 client.c_str());
    std::exit(ranksweep::kExitUsage);
  }
  f.callback_client = client == "callback";
  if (f.ranksweepd.empty()) {
    std::fprintf(stderr, "dispatch_bench: --ranksweepd=PATH is required (dispatch_bench --help)\n");
    std::exit(ranksweep::kExitUsage);
  }
  return f;
}

std::shared_ptr<grpc::Channel> Channel(const std::string& addr) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  // Separate connections per fake worker, like separate worker processes.
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args);
}

// Every call waits for the connection instead of failing fast: 64 workers
// connecting at once can see a transient connect failure, which a real
// worker retries.
void WaitForReady(grpc::ClientContext* ctx) { ctx->set_wait_for_ready(true); }

// The server this run started; a failed call stops it before exiting, so
// that no ranksweepd outlives the bench.
ranksweep::subprocess::Process* g_server = nullptr;

[[noreturn]] void Fail() {
  if (g_server != nullptr) g_server->Signal(SIGKILL);
  std::exit(ranksweep::kExitFailure);
}

void Check(const grpc::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s failed: %d %s\n", what, s.error_code(), s.error_message().c_str());
    Fail();
  }
}

// `cells` as heads x ranks x seeds within the sweep limits: kernel heads
// (one per feature map, up to 5) x ranks 1..R (R <= 64) x seeds (<= 1024);
// false when no product makes it.
bool SplitCells(int cells, int* heads, int* ranks, int* seeds) {
  for (int h = 1; h <= 5; ++h) {
    for (int r = 64; r >= 1; --r) {
      if (cells % (h * r) == 0 && cells / (h * r) <= 1024) {
        *heads = h;
        *ranks = r;
        *seeds = cells / (h * r);
        return true;
      }
    }
  }
  return false;
}

// A sweep of exactly `cells` cells (SplitCells, checked with the flags).
std::string Submit(v1::SweepService::Stub& stub, const std::string& name, int cells) {
  const v1::FeatureMap kMaps[] = {v1::FEATURE_MAP_ELU1, v1::FEATURE_MAP_SOFTPLUS,
                                  v1::FEATURE_MAP_EXP, v1::FEATURE_MAP_RELU_EPS,
                                  v1::FEATURE_MAP_FAVOR};
  int heads = 0, ranks = 0, seeds = 0;
  if (!SplitCells(cells, &heads, &ranks, &seeds)) {
    std::fprintf(stderr, "cannot split %d cells into heads x ranks x seeds within limits\n", cells);
    Fail();
  }
  v1::SubmitSweepRequest req;
  v1::SweepSpec* spec = req.mutable_spec();
  spec->set_name(name);
  spec->mutable_dataset()->set_kind(v1::DATASET_KIND_EXHAUSTIVE);
  spec->mutable_dataset()->set_m(2);  // 2^(2*3) = 64 sequences, as FakeResult says
  spec->mutable_dataset()->set_seq_len(3);
  for (int h = 0; h < heads; ++h) {
    v1::HeadSpec* head = spec->add_heads();
    head->set_kind(v1::HEAD_KIND_KERNEL);
    head->set_feature_map(kMaps[h]);
  }
  for (int r = 1; r <= ranks; ++r) spec->add_ranks(r);
  spec->set_seed_count(seeds);
  if (g_curve_points > 0) spec->mutable_train()->set_eval_every(25);
  v1::SubmitSweepResponse resp;
  grpc::ClientContext ctx;
  WaitForReady(&ctx);
  Check(stub.SubmitSweep(&ctx, req, &resp), "SubmitSweep");
  if (resp.cells() != cells) {
    std::fprintf(stderr, "expected %d cells, got %lld\n", cells,
                 static_cast<long long>(resp.cells()));
    Fail();
  }
  return resp.sweep_id();
}

// Every field an exhaustive-dataset result has (no test split), with values
// that vary from seed to seed.
v1::SeedResult FakeResult(uint64_t seed) {
  v1::SeedResult r;
  r.set_seed(seed);
  r.mutable_train()->set_sequences(64);
  r.mutable_train()->set_exact_accuracy(seed % 2 ? 1.0 : 0.5);
  r.mutable_train()->set_error(seed % 2 ? 0.0 : 0.5);
  r.mutable_train()->set_position_accuracy(seed % 2 ? 1.0
                                                   : 0.9 + static_cast<double>(seed % 10) / 100);
  r.mutable_train()->set_max_abs_error(0.25 + static_cast<double>(seed % 7) / 64);
  r.set_final_loss(1e-3 * static_cast<double>(seed % 13 + 1));
  r.set_steps(100 + static_cast<int64_t>(seed % 3));
  r.set_wall_seconds(0.01 * static_cast<double>(seed % 5 + 1));
  r.set_device("cpu");
  r.mutable_facts()->set_train_sequences(64);
  r.mutable_facts()->set_distinct_queries(4);  // an exhaustive dataset has no rank bounds
  if (g_curve_points > 0) {
    // An evaluation every 25 steps (the sweep's eval_every), the last at
    // the last step.
    r.set_steps(25 * g_curve_points);
    v1::Curve* c = r.mutable_curve();
    // Sized once, as a worker that knows its evaluation count would.
    c->mutable_steps()->Reserve(g_curve_points);
    c->mutable_loss()->Reserve(g_curve_points);
    c->mutable_train_error()->Reserve(g_curve_points);
    c->mutable_train_position_accuracy()->Reserve(g_curve_points);
    for (int i = 1; i <= g_curve_points; ++i) {
      const float f = static_cast<float>(g_curve_points - i) / static_cast<float>(g_curve_points);
      c->add_steps(25 * i);
      c->add_loss(0.25f * f + 1e-3f * static_cast<float>(seed % 13));
      c->add_train_error(f);
      c->add_train_position_accuracy(1.0f - f / 2);
    }
  }
  return r;
}

// A raw SQLite scan of one sweep's rows, median of `runs`: every column of
// every row read (text and blobs touched byte by byte, as a consumer
// would), on a read-only connection of this process.
struct ScanTimes {
  int64_t rows = 0;
  double median_ms = 0;
};
ScanTimes RawScanMs(const std::string& db_path, const std::string& sql,
                    const std::string& sweep_id, int runs) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "raw scan: cannot open %s: %s\n", db_path.c_str(), sqlite3_errmsg(db));
    std::exit(1);
  }
  ScanTimes out;
  std::vector<double> ms;
  uint64_t checksum = 0;
  for (int run = 0; run < runs; ++run) {
    const auto t0 = Clock::now();
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      std::fprintf(stderr, "raw scan: %s: %s\n", sql.c_str(), sqlite3_errmsg(db));
      std::exit(1);
    }
    sqlite3_bind_text(st, 1, sweep_id.data(), static_cast<int>(sweep_id.size()), SQLITE_STATIC);
    int64_t rows = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      ++rows;
      const int n = sqlite3_column_count(st);
      for (int i = 0; i < n; ++i) {
        switch (sqlite3_column_type(st, i)) {
          case SQLITE_INTEGER:
            checksum += static_cast<uint64_t>(sqlite3_column_int64(st, i));
            break;
          case SQLITE_FLOAT:
            checksum += static_cast<uint64_t>(sqlite3_column_double(st, i) * 1024);
            break;
          case SQLITE_TEXT:
          case SQLITE_BLOB: {
            const auto* bytes = static_cast<const unsigned char*>(sqlite3_column_blob(st, i));
            const int size = sqlite3_column_bytes(st, i);
            for (int k = 0; k < size; ++k) checksum += bytes[k];
            break;
          }
          default:
            break;
        }
      }
    }
    if (rc != SQLITE_DONE) {
      std::fprintf(stderr, "raw scan: %s\n", sqlite3_errmsg(db));
      std::exit(1);
    }
    sqlite3_finalize(st);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    out.rows = rows;
  }
  sqlite3_close(db);
  std::sort(ms.begin(), ms.end());
  out.median_ms = ms.empty() ? 0 : ms[ms.size() / 2];
  if (checksum == 1) std::fprintf(stderr, "raw scan checksum %llu\n",
                                  static_cast<unsigned long long>(checksum));  // keeps the reads
  return out;
}

// A registered worker: its id and the session every later call carries.
struct Registered {
  std::string id;
  std::string session;
};

Registered RegisterWorker(v1::WorkerService::Stub& stub) {
  v1::RegisterWorkerRequest req;
  req.set_hostname("bench");
  req.set_device("cpu");
  req.set_slots(1);
  req.mutable_version()->set_build_id("bench");
  v1::RegisterWorkerResponse resp;
  grpc::ClientContext ctx;
  WaitForReady(&ctx);
  Check(stub.RegisterWorker(&ctx, req, &resp), "RegisterWorker");
  return Registered{resp.worker_id(), resp.session()};
}

// The CompleteTasks call for `tasks`: a synthetic result per leased cell
// and, with `next`, a request for the next tasks.
void FillComplete(const Registered& worker,
                  const google::protobuf::RepeatedPtrField<v1::Task>& tasks, bool next,
                  int max_tasks, int max_seeds, v1::CompleteTasksRequest* req) {
  req->set_worker_id(worker.id);
  req->set_session(worker.session);
  for (const v1::Task& task : tasks) {
    for (const v1::LeasedCell& cell : task.cells()) {
      v1::CellResult* r = req->add_results();
      r->set_cell_id(cell.cell_id());
      r->set_lease_id(cell.lease_id());
      *r->mutable_result() = FakeResult(cell.seed());
    }
  }
  if (next) {
    req->mutable_next()->set_max_tasks(max_tasks);
    req->mutable_next()->set_max_seeds(max_seeds);
  }
}

// Acquires and completes cells until none are left. The latencies (us) of
// the calls that lease tasks are appended to `latencies`. With
// `next_in_complete`, only the first lease is an AcquireTasks call; every
// CompleteTasks call then asks for the next tasks (`next`), as the worker
// agent does, so a cycle is one call instead of two.
void FakeWorker(const std::string& addr, int max_tasks, int max_seeds, bool next_in_complete,
                std::vector<double>* latencies, std::atomic<int64_t>* completed,
                std::chrono::microseconds period, Clock::time_point first_cycle) {
  auto stub = v1::WorkerService::NewStub(Channel(addr));
  const Registered id = RegisterWorker(*stub);
  auto next = first_cycle;
  auto record = [&](Clock::time_point t0) {
    if (latencies) {
      latencies->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
  };
  google::protobuf::RepeatedPtrField<v1::Task> tasks;
  bool acquire = true;
  while (true) {
    if (period.count() > 0) {
      // Paced: one cycle per period, whatever the last one took.
      std::this_thread::sleep_until(next);
      next += period;
    }
    if (acquire) {
      v1::AcquireTasksRequest req;
      req.set_worker_id(id.id);
      req.set_session(id.session);
      req.set_max_tasks(max_tasks);
      req.set_max_seeds(max_seeds);
      req.set_wait_ms(0);
      v1::AcquireTasksResponse resp;
      grpc::ClientContext ctx;
      WaitForReady(&ctx);
      auto t0 = Clock::now();
      Check(stub->AcquireTasks(&ctx, req, &resp), "AcquireTasks");
      record(t0);
      tasks.Swap(resp.mutable_tasks());
    }
    if (tasks.empty()) return;
    v1::CompleteTasksRequest done;
    FillComplete(id, tasks, next_in_complete, max_tasks, max_seeds, &done);
    v1::CompleteTasksResponse done_resp;
    grpc::ClientContext done_ctx;
    WaitForReady(&done_ctx);
    auto t0 = Clock::now();
    Check(stub->CompleteTasks(&done_ctx, done, &done_resp), "CompleteTasks");
    completed->fetch_add(done.results_size());
    acquire = !next_in_complete;
    if (next_in_complete) {
      record(t0);
      tasks.Swap(done_resp.mutable_next_tasks());
    }
  }
}

// FakeWorker's dispatch loop on gRPC's callback API (--client=callback):
// the same calls with the same contents, but no thread of its own. Each
// reply's callback, on one of gRPC's few threads, sends the next call, so
// 64 of these do not cost the 64 blocked threads' wake-ups of the threaded
// client. Registered before it starts; counts `finished` down when no
// task is left.
class CallbackWorker {
 public:
  CallbackWorker(const std::string& addr, int max_tasks, int max_seeds, bool next_in_complete,
                 std::vector<double>* latencies, std::atomic<int64_t>* completed,
                 absl::BlockingCounter* finished)
      : stub_(v1::WorkerService::NewStub(Channel(addr))),
        max_tasks_(max_tasks),
        max_seeds_(max_seeds),
        next_in_complete_(next_in_complete),
        latencies_(latencies),
        completed_(completed),
        finished_(finished) {
    id_ = RegisterWorker(*stub_);
  }

  void Start() { Acquire(); }

 private:
  void Acquire() {
    acquire_req_.set_worker_id(id_.id);
    acquire_req_.set_session(id_.session);
    acquire_req_.set_max_tasks(max_tasks_);
    acquire_req_.set_max_seeds(max_seeds_);
    acquire_req_.set_wait_ms(0);
    acquire_resp_.Clear();
    NewContext();
    stub_->async()->AcquireTasks(ctx_.get(), &acquire_req_, &acquire_resp_,
                                 [this](grpc::Status s) {
                                   Check(s, "AcquireTasks");
                                   Record();
                                   tasks_.Swap(acquire_resp_.mutable_tasks());
                                   Complete();
                                 });
  }

  void Complete() {
    if (tasks_.empty()) {
      finished_->DecrementCount();
      return;
    }
    done_req_.Clear();
    FillComplete(id_, tasks_, next_in_complete_, max_tasks_, max_seeds_, &done_req_);
    done_resp_.Clear();
    NewContext();
    stub_->async()->CompleteTasks(ctx_.get(), &done_req_, &done_resp_, [this](grpc::Status s) {
      Check(s, "CompleteTasks");
      completed_->fetch_add(done_req_.results_size());
      if (!next_in_complete_) return Acquire();
      Record();
      tasks_.Swap(done_resp_.mutable_next_tasks());
      Complete();
    });
  }

  void NewContext() {
    ctx_ = std::make_unique<grpc::ClientContext>();
    WaitForReady(ctx_.get());
    t0_ = Clock::now();
  }
  void Record() {
    latencies_->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0_).count());
  }

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  Registered id_;
  const int max_tasks_, max_seeds_;
  const bool next_in_complete_;
  std::vector<double>* const latencies_;
  std::atomic<int64_t>* const completed_;
  absl::BlockingCounter* const finished_;
  std::unique_ptr<grpc::ClientContext> ctx_;  // the call in flight
  Clock::time_point t0_;
  v1::AcquireTasksRequest acquire_req_;
  v1::AcquireTasksResponse acquire_resp_;
  v1::CompleteTasksRequest done_req_;
  v1::CompleteTasksResponse done_resp_;
  google::protobuf::RepeatedPtrField<v1::Task> tasks_;
};

// CPU seconds (user + system) process `pid` (or its thread `tid`) has used
// so far, from /proc/PID/stat (fields 14 and 15, in clock ticks); -1 if
// unreadable.
double ProcessCpuSeconds(pid_t pid, const std::string& tid = "") {
  std::ifstream in("/proc/" + std::to_string(pid) + (tid.empty() ? "" : "/task/" + tid) +
                   "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) is in parentheses and may hold spaces.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::strtod(field.c_str(), nullptr);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds each thread of process `pid` has used so far, by thread id,
// from /proc/PID/task/TID/stat.
std::map<std::string, double> ThreadCpuSeconds(pid_t pid) {
  std::map<std::string, double> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string tid = entry.path().filename().string();
    const double seconds = ProcessCpuSeconds(pid, tid);
    if (seconds >= 0) out[tid] = seconds;
  }
  return out;
}

// The most CPU one thread of `pid` used since `before`: in ranksweepd that
// is the store's writer thread, through which every write passes.
double BusiestThreadSeconds(pid_t pid, const std::map<std::string, double>& before) {
  double most = 0;
  for (const auto& [tid, seconds] : ThreadCpuSeconds(pid)) {
    auto it = before.find(tid);
    most = std::max(most, seconds - (it == before.end() ? 0.0 : it->second));
  }
  return most;
}

// CPU seconds this process (the fake workers) has used so far.
double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Minor page faults this process has taken so far (its threads together:
// gRPC's too, though none of them runs while the bench parses).
long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Median over `runs` of the time to read every page of `req` (one call
// when page_size is 0 or everything fits), and of the first page alone.
struct QueryTimes {
  double all_ms = 0, first_page_ms = 0;
  // The first run alone: the one a reply cache cannot have seen (the
  // others may be served from it while the sweep stands).
  double first_run_ms = 0;
  size_t items = 0, pages = 0;
};
// `as_rows`: a reply of columns is turned back into ResultRow messages (on
// the reply's arena) before the clock stops, as a client that wants rows does.
QueryTimes MedianMs(v1::SweepService::Stub& stub, v1::QueryResultsRequest req, int runs,
                    bool as_rows = false) {
  std::vector<double> all, first;
  QueryTimes out;
  for (int i = 0; i < runs; ++i) {
    req.clear_page_token();
    out.items = out.pages = 0;
    auto t0 = Clock::now();
    while (true) {
      ranksweep::ReplyArena arena;  // as the CLI's ForEachResultPage does
      auto* resp = google::protobuf::Arena::CreateMessage<v1::QueryResultsResponse>(arena.get());
      grpc::ClientContext ctx;
      WaitForReady(&ctx);
      Check(stub.QueryResults(&ctx, req, resp), "QueryResults");
      if (as_rows) {
        absl::Status s = ranksweep::RowsFromColumns(resp);
        if (!s.ok()) {
          std::fprintf(stderr, "columns: %s\n", std::string(s.message()).c_str());
          Fail();
        }
      }
      if (++out.pages == 1) {
        first.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
      out.items += static_cast<size_t>(resp->rows_size() + resp->groups_size() +
                                       resp->columns().cell_id_size());
      if (resp->next_page_token().empty()) break;
      req.set_page_token(resp->next_page_token());
    }
    all.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  out.first_run_ms = all.empty() ? 0 : all.front();
  out.all_ms = Percentile(all, 0.5);
  out.first_page_ms = Percentile(first, 0.5);
  return out;
}

}  // namespace

// The one-reply query split in two, to tell the coordinator's share from the
// client's: the same call made for raw bytes, timed until the reply's bytes
// are all in this process (the coordinator's read, its encoding and the
// wire), then those bytes parsed into the message on a fresh arena, as
// MedianMs's client does (a ReplyArena, as the CLI's), timed apart, with
// the page faults it takes. The parse is the client's own work, the same
// whichever coordinator sent the bytes; on a plain arena most of it was the
// first touch of the memory the message's lists grow into, where a page
// fault is dear.
struct SplitTimes {
  double received_ms = 0, parse_ms = 0;
  long parse_faults = 0;  // this process's minor page faults in the parse (median)
  size_t bytes = 0;
};
SplitTimes ReceivedThenParsedMs(const std::string& addr, const v1::QueryResultsRequest& req,
                                int runs) {
  grpc::GenericStub stub(Channel(addr));
  std::vector<double> received, parse, faults;
  SplitTimes out;
  for (int i = 0; i < runs; ++i) {
    grpc::ByteBuffer request, reply;
    bool own = false;
    Check(grpc::GenericSerialize<grpc::ProtoBufferWriter, v1::QueryResultsRequest>(req, &request,
                                                                                   &own),
          "serialize QueryResultsRequest");
    grpc::ClientContext ctx;
    WaitForReady(&ctx);
    std::mutex mu;
    std::condition_variable cv;
    std::optional<grpc::Status> status;
    const auto t0 = Clock::now();
    stub.UnaryCall(&ctx, "/ranksweep.v1.SweepService/QueryResults", grpc::StubOptions(), &request,
                   &reply, [&](grpc::Status s) {
                     std::lock_guard<std::mutex> lock(mu);
                     status = std::move(s);
                     cv.notify_one();
                   });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return status.has_value(); });
    }
    received.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    Check(*status, "QueryResults (bytes)");
    out.bytes = reply.Length();
    const long faults0 = MinorFaults();
    const auto t1 = Clock::now();
    {
      ranksweep::ReplyArena arena;
      auto* resp = google::protobuf::Arena::CreateMessage<v1::QueryResultsResponse>(arena.get());
      Check(grpc::GenericDeserialize<grpc::ProtoBufferReader, v1::QueryResultsResponse>(&reply,
                                                                                        resp),
            "parse QueryResultsResponse");
      if (resp->columns().cell_id_size() == 0) {
        std::fprintf(stderr, "QueryResults (bytes): the reply has no columns\n");
        Fail();
      }
    }
    parse.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t1).count());
    faults.push_back(static_cast<double>(MinorFaults() - faults0));
  }
  out.received_ms = Percentile(received, 0.5);
  out.parse_ms = Percentile(parse, 0.5);
  out.parse_faults = static_cast<long>(Percentile(faults, 0.5));
  return out;
}

int main(int argc, char** argv) {
  BenchFlags flags = ParseFlags(argc, argv);
  // Each phase's sweep must be a heads x ranks x seeds product within the
  // limits: checked before the server starts.
  const struct {
    const char* flag;
    int cells;
  } sizes[] = {{"--cells", flags.cells},
               {"--query-rows", flags.query_rows},
               {"--paced-tasks", flags.paced_tasks_per_second > 0 ? flags.paced_tasks : 0}};
  for (const auto& size : sizes) {
    int heads, ranks, seeds;
    if (size.cells > 0 && !SplitCells(size.cells, &heads, &ranks, &seeds)) {
      std::fprintf(stderr,
                   "dispatch_bench: %s=%d cannot be split into heads (1..5) x ranks (1..64) x "
                   "seeds (1..1024); pick a multiple of a rank count and a head count\n",
                   size.flag, size.cells);
      return ranksweep::kExitUsage;
    }
  }
  g_curve_points = flags.curve_points;
  ranksweep::TempDir dir;
  ranksweep::subprocess::Process server(
      {flags.ranksweepd, "--listen=127.0.0.1:0", "--db=" + dir.path() + "/bench.db",
       "--lease-seconds=600", "--insecure-local"},
      dir.path() + "/ranksweepd");
  g_server = &server;
  auto addr = server.WaitForStdout(std::regex("listening on (\\S+)"), 30s);
  if (!addr) {
    std::fprintf(stderr, "ranksweepd did not start:\n%s\n", server.Stderr().c_str());
    return ranksweep::kExitFailure;
  }
  auto sweeps = v1::SweepService::NewStub(Channel(*addr));

  // ---- dispatch
  const std::string dispatch_id = Submit(*sweeps, "dispatch", flags.cells);
  // --watchers: people following the sweep (`ranksweep watch`) while it runs;
  // each reads every event until the stream ends with the sweep.
  std::atomic<int64_t> watch_events{0};
  std::vector<std::thread> watchers;
  for (int i = 0; i < flags.watchers; ++i) {
    watchers.emplace_back([&addr, &dispatch_id, &watch_events] {
      auto stub = v1::SweepService::NewStub(Channel(*addr));
      grpc::ClientContext ctx;
      v1::WatchSweepRequest req;
      req.set_sweep_id(dispatch_id);
      auto reader = stub->WatchSweep(&ctx, req);
      v1::SweepEvent event;
      while (reader->Read(&event)) ++watch_events;
      reader->Finish();
    });
  }
  std::vector<std::vector<double>> latencies(static_cast<size_t>(flags.workers));
  std::atomic<int64_t> completed{0};
  const double server_cpu0 = ProcessCpuSeconds(server.pid());
  const std::map<std::string, double> server_threads0 = ThreadCpuSeconds(server.pid());
  const double bench_cpu0 = SelfCpuSeconds();
  auto t0 = Clock::now();
  if (flags.callback_client) {
    absl::BlockingCounter finished(flags.workers);
    std::vector<std::unique_ptr<CallbackWorker>> workers;
    for (int i = 0; i < flags.workers; ++i) {
      workers.push_back(std::make_unique<CallbackWorker>(
          *addr, flags.tasks_per_call, flags.seeds_per_task, flags.next_in_complete,
          &latencies[static_cast<size_t>(i)], &completed, &finished));
    }
    for (auto& w : workers) w->Start();
    finished.Wait();
  } else {
    std::vector<std::thread> threads;
    for (int i = 0; i < flags.workers; ++i) {
      threads.emplace_back(FakeWorker, *addr, flags.tasks_per_call, flags.seeds_per_task,
                           flags.next_in_complete, &latencies[static_cast<size_t>(i)], &completed,
                           std::chrono::microseconds(0), Clock::time_point());
    }
    for (auto& t : threads) t.join();
  }
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double server_cpu = ProcessCpuSeconds(server.pid()) - server_cpu0;
  const double busiest_cpu = BusiestThreadSeconds(server.pid(), server_threads0);
  const double bench_cpu = SelfCpuSeconds() - bench_cpu0;
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  if (completed.load() != flags.cells) {
    std::fprintf(stderr, "completed %lld of %d cells\n", static_cast<long long>(completed.load()),
                 flags.cells);
    for (auto& t : watchers) t.detach();  // their sweep never ends
    return ranksweep::kExitFailure;
  }
  std::printf("dispatch workers=%d client=%s tasks_per_call=%d seeds_per_task=%d "
              "next_in_complete=%d cells=%d seconds=%.3f cells_per_second=%.0f "
              "acquire_p50_ms=%.3f acquire_p99_ms=%.3f\n",
              flags.workers, flags.callback_client ? "callback" : "threads",
              flags.tasks_per_call, flags.seeds_per_task,
              flags.next_in_complete ? 1 : 0, flags.cells, seconds,
              flags.cells / seconds, Percentile(all, 0.5) / 1000.0,
              Percentile(all, 0.99) / 1000.0);
  if (flags.watchers > 0) {
    for (auto& t : watchers) t.join();
    std::printf("watch watchers=%d events=%lld\n", flags.watchers,
                static_cast<long long>(watch_events.load()));
  }
  std::printf("cpu server_us_per_cell=%.0f workers_us_per_cell=%.0f cores_busy=%.2f "
              "busiest_server_thread_us_per_cell=%.0f busiest_server_thread_busy=%.2f\n",
              1e6 * server_cpu / flags.cells, 1e6 * bench_cpu / flags.cells,
              (server_cpu + bench_cpu) / seconds, 1e6 * busiest_cpu / flags.cells,
              busiest_cpu / seconds);
  std::fflush(stdout);

  // ---- paced
  if (flags.paced_tasks > 0 && flags.paced_tasks_per_second > 0) {
    Submit(*sweeps, "paced", flags.paced_tasks);
    std::vector<std::vector<double>> paced(static_cast<size_t>(flags.workers));
    std::atomic<int64_t> done{0};
    const auto period = std::chrono::microseconds(
        static_cast<int64_t>(1e6 * flags.workers / flags.paced_tasks_per_second));
    // Worker i starts i/W of a period after the first, so that together
    // they offer evenly spaced cycles (all starting at once would offer
    // bursts of W simultaneous calls every period instead).
    auto p0 = Clock::now();
    const auto start = p0 + 100ms;  // after every worker has registered
    std::vector<std::thread> threads;
    for (int i = 0; i < flags.workers; ++i) {
      threads.emplace_back(FakeWorker, *addr, 1, 1, false, &paced[static_cast<size_t>(i)], &done,
                           period, start + period * i / flags.workers);
    }
    for (auto& t : threads) t.join();
    double paced_seconds = std::chrono::duration<double>(Clock::now() - p0).count();
    std::vector<double> lat;
    for (auto& l : paced) lat.insert(lat.end(), l.begin(), l.end());
    std::printf("paced offered_tasks_per_second=%d achieved=%.0f acquire_p50_ms=%.3f "
                "acquire_p90_ms=%.3f acquire_p99_ms=%.3f acquire_max_ms=%.3f\n",
                flags.paced_tasks_per_second, static_cast<double>(done.load()) / paced_seconds,
                Percentile(lat, 0.5) / 1000.0, Percentile(lat, 0.9) / 1000.0,
                Percentile(lat, 0.99) / 1000.0, Percentile(lat, 1.0) / 1000.0);
    std::fflush(stdout);
  }

  // ---- query: fill a sweep of query_rows results quickly (1024 seeds per
  // acquisition), then time the two query shapes.
  if (flags.query_rows > 0) {
    std::string id = Submit(*sweeps, "query", flags.query_rows);
    std::atomic<int64_t> filled{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back(FakeWorker, *addr, 1, 1024, true, nullptr, &filled,
                           std::chrono::microseconds(0), Clock::time_point());
    }
    for (auto& t : threads) t.join();
    v1::QueryResultsRequest req;
    req.set_sweep_id(id);
    const QueryTimes one_reply = MedianMs(*sweeps, req, flags.query_runs);
    req.set_page_size(flags.page_size);
    const QueryTimes paged = MedianMs(*sweeps, req, flags.query_runs);
    req.set_page_size(0);
    req.set_columns(true);
    const QueryTimes columns = MedianMs(*sweeps, req, flags.query_runs);
    const QueryTimes columns_as_rows = MedianMs(*sweeps, req, flags.query_runs, true);
    const SplitTimes columns_split = ReceivedThenParsedMs(*addr, req, flags.query_runs);
    req.set_page_size(flags.page_size);
    const QueryTimes columns_paged = MedianMs(*sweeps, req, flags.query_runs);
    req.set_page_size(0);
    req.set_columns(false);
    req.set_group_by(v1::GROUP_BY_HEAD_RANK);
    const QueryTimes grouped = MedianMs(*sweeps, req, flags.query_runs);
    std::printf("query result_rows=%lld ungrouped_rows=%zu ungrouped_median_ms=%.1f "
                "page_size=%d pages=%zu first_page_median_ms=%.1f all_pages_median_ms=%.1f "
                "groups=%zu grouped_median_ms=%.1f\n",
                static_cast<long long>(filled.load()), one_reply.items, one_reply.all_ms,
                flags.page_size, paged.pages, paged.first_page_ms, paged.all_ms, grouped.items,
                grouped.all_ms);
    std::printf("query_columns rows=%zu one_reply_median_ms=%.1f one_reply_first_run_ms=%.1f "
                "first_page_median_ms=%.1f all_pages_median_ms=%.1f "
                "one_reply_as_rows_median_ms=%.1f\n",
                columns.items, columns.all_ms, columns.first_run_ms, columns_paged.first_page_ms,
                columns_paged.all_ms, columns_as_rows.all_ms);
    std::printf(
        "query_columns_split bytes=%zu received_median_ms=%.1f parse_median_ms=%.1f "
        "parse_page_faults=%ld\n",
        columns_split.bytes, columns_split.received_ms, columns_split.parse_ms,
        columns_split.parse_faults);
    // The floor: the same rows read straight from the file by this process,
    // no coordinator, no gRPC. `results` with every column, as a program of
    // its own would read them; `result_packs`, the packed copy the
    // coordinator's query reads.
    const std::string db = dir.path() + "/bench.db";
    const ScanTimes results_scan = RawScanMs(
        db, "SELECT * FROM results WHERE sweep_id = ?1 ORDER BY cell_id", id, flags.query_runs);
    const ScanTimes packs_scan = RawScanMs(
        db, "SELECT cell_id, packed FROM result_packs WHERE sweep_id = ?1 ORDER BY cell_id", id,
        flags.query_runs);
    std::printf("query_raw_sqlite results_rows=%lld results_median_ms=%.1f packs_rows=%lld "
                "packs_median_ms=%.1f columns_over_results_scan=%.2f\n",
                static_cast<long long>(results_scan.rows), results_scan.median_ms,
                static_cast<long long>(packs_scan.rows), packs_scan.median_ms,
                results_scan.median_ms > 0 ? columns.all_ms / results_scan.median_ms : 0.0);
  }
  server.Signal(SIGTERM);
  server.Wait(30s);
  std::smatch m;
  const std::string log = server.Stderr();
  if (std::regex_search(log, m,
                        std::regex("(\\d+) writes in (\\d+) commits this run; (\\d+) "
                                   "transactions rolled back"))) {
    std::printf("store writes=%s commits=%s reruns=%s (whole run, both phases)\n",
                m[1].str().c_str(), m[2].str().c_str(), m[3].str().c_str());
  }
  return 0;
}
