// Kills a real ranksweepd process with SIGKILL between submit and completion,
// restarts it on the same database file, and checks that no cell is lost or
// recorded twice and that a lease in flight survives the restart.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "common/temp_dir.h"
#include "gtest/gtest.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"

namespace ranksweep {
namespace {

using namespace std::chrono_literals;

class Ranksweepd {
 public:
  explicit Ranksweepd(const std::string& db) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      if (getenv("RANKSWEEPD_TEST_LOG") == nullptr) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDERR_FILENO);
      }
      close(out[0]);
      execl(RANKSWEEPD_BIN, RANKSWEEPD_BIN, "--listen=127.0.0.1:0", ("--db=" + db).c_str(),
            "--lease_seconds=30", "--insecure_local", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    // The first line is "ranksweepd listening on HOST:PORT".
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line.push_back(c);
    stdout_fd_ = out[0];
    const std::string prefix = "ranksweepd listening on ";
    if (line.rfind(prefix, 0) == 0) address_ = line.substr(prefix.size());
  }
  ~Ranksweepd() {
    if (pid_ > 0) Kill(SIGKILL);
    if (stdout_fd_ >= 0) close(stdout_fd_);
  }

  // Sends `sig` and returns the exit status (-1 when it does not exit).
  int Kill(int sig) {
    kill(pid_, sig);
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(50ms);
    }
    return -1;
  }

  const std::string& address() const { return address_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string address_;
};

struct Stubs {
  explicit Stubs(const std::string& address) {
    auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    sweeps = v1::SweepService::NewStub(channel);
    workers = v1::WorkerService::NewStub(channel);
  }
  std::unique_ptr<v1::SweepService::Stub> sweeps;
  std::unique_ptr<v1::WorkerService::Stub> workers;
};

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + 10s);
  return ctx;
}

// A worker as RegisterWorker named it: its id and its session secret, which
// every later call carries (and which survives the coordinator's restart).
struct Worker {
  std::string id;
  std::string session;
};

v1::CompleteTasksRequest ResultsFor(const Worker& worker, const v1::Task& task) {
  v1::CompleteTasksRequest req;
  req.set_worker_id(worker.id);
  req.set_session(worker.session);
  for (const v1::LeasedCell& c : task.cells()) {
    v1::CellResult* r = req.add_results();
    r->set_cell_id(c.cell_id());
    r->set_lease_id(c.lease_id());
    r->mutable_result()->set_seed(c.seed());
    r->mutable_result()->mutable_train()->set_sequences(64);
    r->mutable_result()->mutable_train()->set_error(0.5);
    r->mutable_result()->mutable_train()->set_exact_accuracy(0.5);
    r->mutable_result()->mutable_train()->set_position_accuracy(0.75);
    r->mutable_result()->mutable_facts()->set_train_sequences(64);
    r->mutable_result()->set_final_loss(0.125);
  }
  return req;
}

v1::Task AcquireOne(Stubs& s, const Worker& worker) {
  v1::AcquireTasksRequest req;
  req.set_worker_id(worker.id);
  req.set_session(worker.session);
  req.set_max_tasks(1);
  req.set_max_seeds(1);
  v1::AcquireTasksResponse resp;
  EXPECT_TRUE(s.workers->AcquireTasks(Ctx().get(), req, &resp).ok());
  return resp.tasks_size() == 1 ? resp.tasks(0) : v1::Task();
}

TEST(RanksweepdRestartTest, SigkillBetweenSubmitAndCompletionLosesAndDuplicatesNoCell) {
  TempDir temp;
  const std::string dir = temp.path();
  const std::string db = dir + "/ranksweep.db";

  std::string sweep;
  Worker worker;
  v1::Task done_task, inflight;
  {
    Ranksweepd server(db);
    ASSERT_FALSE(server.address().empty());
    Stubs s(server.address());
    v1::SubmitSweepRequest submit;
    v1::SweepSpec* spec = submit.mutable_spec();
    spec->set_name("restart");
    spec->mutable_dataset()->set_m(2);
    spec->mutable_dataset()->set_seq_len(3);
    spec->add_heads()->set_kind(v1::HEAD_KIND_KERNEL);
    spec->add_heads()->set_kind(v1::HEAD_KIND_SOFTMAX);
    spec->add_ranks(1);
    spec->add_ranks(2);
    spec->set_seed_count(2);  // 2 x 2 + 2 = 6 cells
    v1::SubmitSweepResponse submitted;
    ASSERT_TRUE(s.sweeps->SubmitSweep(Ctx().get(), submit, &submitted).ok());
    ASSERT_EQ(submitted.cells(), 6);
    sweep = submitted.sweep_id();

    v1::RegisterWorkerRequest reg;
    reg.set_hostname("h");
    reg.set_slots(1);
    v1::RegisterWorkerResponse registered;
    ASSERT_TRUE(s.workers->RegisterWorker(Ctx().get(), reg, &registered).ok());
    worker = Worker{registered.worker_id(), registered.session()};

    done_task = AcquireOne(s, worker);
    ASSERT_EQ(done_task.cells_size(), 1);
    v1::CompleteTasksResponse completed;
    ASSERT_TRUE(s.workers->CompleteTasks(Ctx().get(), ResultsFor(worker, done_task), &completed)
                    .ok());
    ASSERT_EQ(completed.recorded(), 1);
    inflight = AcquireOne(s, worker);
    ASSERT_EQ(inflight.cells_size(), 1);

    int status = server.Kill(SIGKILL);
    ASSERT_TRUE(WIFSIGNALED(status));
  }

  Ranksweepd server(db);
  ASSERT_FALSE(server.address().empty());
  Stubs s(server.address());

  // The lease in flight was kept with its deadline: the worker carries on.
  v1::HeartbeatRequest hb;
  hb.set_worker_id(worker.id);
  hb.set_session(worker.session);
  hb.add_lease_ids(inflight.cells(0).lease_id());
  v1::HeartbeatResponse hb_resp;
  ASSERT_TRUE(s.workers->Heartbeat(Ctx().get(), hb, &hb_resp).ok());
  EXPECT_EQ(hb_resp.lost_lease_ids_size(), 0);
  v1::CompleteTasksResponse completed;
  ASSERT_TRUE(
      s.workers->CompleteTasks(Ctx().get(), ResultsFor(worker, inflight), &completed).ok());
  EXPECT_EQ(completed.recorded(), 1);
  // The result stored before the kill is still there: sending it again is a duplicate.
  ASSERT_TRUE(
      s.workers->CompleteTasks(Ctx().get(), ResultsFor(worker, done_task), &completed).ok());
  EXPECT_EQ(completed.recorded(), 0);
  EXPECT_EQ(completed.duplicates(), 1);

  int recorded = 2;
  for (v1::Task t = AcquireOne(s, worker); t.cells_size() > 0; t = AcquireOne(s, worker)) {
    ASSERT_TRUE(s.workers->CompleteTasks(Ctx().get(), ResultsFor(worker, t), &completed).ok());
    recorded += completed.recorded();
  }
  EXPECT_EQ(recorded, 6);

  v1::GetSweepRequest get;
  get.set_sweep_id(sweep);
  v1::GetSweepResponse got;
  ASSERT_TRUE(s.sweeps->GetSweep(Ctx().get(), get, &got).ok());
  EXPECT_EQ(got.sweep().state(), v1::SWEEP_STATE_DONE);
  EXPECT_EQ(got.sweep().counts().done(), 6);

  v1::QueryResultsRequest query;
  query.set_sweep_id(sweep);
  v1::QueryResultsResponse rows;
  ASSERT_TRUE(s.sweeps->QueryResults(Ctx().get(), query, &rows).ok());
  ASSERT_EQ(rows.rows_size(), 6);
  std::set<int64_t> cells;
  for (const auto& row : rows.rows()) {
    cells.insert(row.cell_id());
    EXPECT_EQ(row.attempt(), 1);
    EXPECT_EQ(row.worker_id(), worker.id);
  }
  EXPECT_EQ(cells.size(), 6u);
  // Idle client connections hold grpc::Server::Shutdown until its grace
  // deadline (5 s); closing ours makes the SIGTERM exit immediate.
  s.sweeps.reset();
  s.workers.reset();

  int status = server.Kill(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ranksweep
