// `ranksweep-worker`: trains the coordinator's tasks on one device. Wires
// flags, signals, the gRPC client and the trainer-backed runner to the agent
// core (agent.h), which holds all the behaviour.
//
// Exit codes: 0 after a drain (SIGTERM/SIGINT) or an idle exit (--once);
// 1 for bad flags, an unusable device, an outbox it cannot take (another
// worker holds it) or a registration the coordinator refuses.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "absl/time/time.h"
#include "common/flag_file.h"
#include "common/exit_codes.h"
#include "common/flags.h"
#include "common/version.h"
#include "worker/agent/agent.h"
#include "worker/agent/file_outbox.h"
#include "worker/agent/grpc_client.h"
#include "worker/agent/trainer_runner.h"
#include "worker/trainer/trainer.h"

#include "ranksweep_build_id.h"  // RANKSWEEP_BUILD_ID (cmake/BuildId.cmake)

namespace ranksweep::agent {
namespace {

// The flags (--help shows them with their defaults).
struct WorkerFlags {
  std::string coordinator;
  int slots = 1;
  std::string device = "auto";
  int max_seeds = 64;
  std::string worker_id;
  std::string hostname;
  int64_t memory_bytes = 0;
  bool once = false;
  int idle_exit_seconds = 5;
  int drain_seconds = 30;
  std::string outbox_dir;
  int outbox_max_batches = 1000;
  int64_t outbox_max_bytes = int64_t{64} << 20;
  int poll_ms = 5000;
  int rpc_timeout_seconds = 30;
  int heartbeat_ms = 0;
  std::string tls_ca;
  std::string token_file;
  int log_every = 60;
};

// Registers every flag of ranksweep-worker on `flags`, its value in `f`.
void AddFlags(Flags& flags, WorkerFlags& f) {
  flags.Add("coordinator", &f.coordinator,
            "Coordinator address host:port; default $RANKSWEEP_ADDR, else 127.0.0.1:50051");
  flags.Add("slots", &f.slots,
            "Tasks trained at once on the device, 1..64");
  flags.Add("device", &f.device,
            "cpu | cuda | cuda:N | auto (CUDA when present)");
  flags.Add("max-seeds", &f.max_seeds,
            "Cells (seeds) per task, trained together; 1..1024");
  flags.Add("worker-id", &f.worker_id,
            "Identity to keep across restarts; empty = the coordinator assigns one");
  flags.Add("hostname", &f.hostname,
            "Host name to report; empty = gethostname()");
  flags.Add("memory-bytes", &f.memory_bytes,
            "Memory to report; 0 = the GPU's total memory on cuda, physical RAM on cpu");
  flags.Add("once", &f.once,
            "Exit 0 once no work has been available for --idle-exit-seconds and nothing is "
            "running (for tests and batch jobs)");
  flags.Add("idle-exit-seconds", &f.idle_exit_seconds,
            "Idle time before --once exits");
  flags.Add("drain-seconds", &f.drain_seconds,
            "On SIGTERM/SIGINT: the hard deadline of the drain. Running tasks may finish in "
            "all of it but the last third (at most 5 s), then they are stopped and released; "
            "no coordinator call outlives it; unacknowledged results stay in the outbox. A "
            "second signal ends it at once");
  flags.Add("outbox-dir", &f.outbox_dir,
            "Where finished results wait, fsync'd, until the coordinator acknowledges them, "
            "and what the next start of this worker sends. Default: "
            "$XDG_STATE_HOME (else ~/.local/state)/ranksweep/worker-outbox/ADDRESS/ "
            "id-WORKER_ID with --worker-id, else the first free seat-N there");
  flags.Add("outbox-max-batches", &f.outbox_max_batches,
            "Result batches the outbox holds at most, 1..1000000");
  flags.Add("outbox-max-bytes", &f.outbox_max_bytes,
            "Bytes of result batches the outbox holds at most, 4096..2^40");
  flags.Add("poll-ms", &f.poll_ms,
            "AcquireTasks long-poll length, 0..60000");
  flags.Add("rpc-timeout-seconds", &f.rpc_timeout_seconds,
            "Deadline of each coordinator call (plus the poll)");
  flags.Add("heartbeat-ms", &f.heartbeat_ms,
            "Heartbeat period; 0 = what the coordinator suggests");
  flags.Add("tls-ca", &f.tls_ca,
            "PEM file of the CA that signed the coordinator's certificate; enables TLS");
  flags.Add("token-file", &f.token_file,
            "File holding the bearer token; default $RANKSWEEP_TOKEN (docs/SECURITY.md)");
  flags.Add("log-every", &f.log_every,
            "Seconds between progress lines of a running task; 0 = never");
}


std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

int64_t PhysicalMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

int Main(int argc, char** argv) {
  Flags flags(
      "ranksweep-worker",
      "ranksweep-worker: trains ranksweep tasks from a coordinator.\n"
      "  ranksweep-worker --coordinator=host:50051 --device=cuda --slots=2\n"
      "SIGTERM/SIGINT drain: stop acquiring, release unstarted tasks, let running ones "
      "finish and send what finished, all within --drain-seconds (a hard deadline); results "
      "not acknowledged stay in the outbox for the next start; exit 0.",
      [] {  // --version only: it probes for CUDA
        const trainer::BuildInfo build = trainer::GetBuildInfo();
        const absl::StatusOr<std::string> cuda = trainer::ResolveDeviceName("cuda");
        return VersionText("ranksweep-worker", RANKSWEEP_BUILD_ID,
                           TorchVersionLine(build.torch_version, build.cuda_version,
                                            cuda.ok() ? *cuda : ""));
      });
  WorkerFlags f;
  AddFlags(flags, f);
  if (std::optional<int> exit = flags.Parse(argc, argv, std::cout, std::cerr)) return *exit;

  std::string address = f.coordinator;
  if (address.empty()) {
    const char* env = std::getenv("RANKSWEEP_ADDR");
    address = env != nullptr && *env != '\0' ? env : "127.0.0.1:50051";
  }
  const int slots = f.slots;
  const int max_seeds = f.max_seeds;
  const int poll_ms = f.poll_ms;
  if (slots < 1 || slots > 64) {
    std::cerr << "ranksweep-worker: --slots must be in 1..64, got " << slots << "\n";
    return 1;
  }
  if (max_seeds < 1 || max_seeds > 1024) {
    std::cerr << "ranksweep-worker: --max-seeds must be in 1..1024, got " << max_seeds << "\n";
    return 1;
  }
  if (poll_ms < 0 || poll_ms > 60000) {
    std::cerr << "ranksweep-worker: --poll-ms must be in 0..60000, got " << poll_ms << "\n";
    return 1;
  }
  // Durations: a negative one is never meant; 0 means "the default" only
  // where the flag's help says so.
  const struct {
    const char* flag;
    int value;
    int min;
    const char* unit;
  } durations[] = {
      {"--drain-seconds", f.drain_seconds, 1, "seconds"},
      {"--rpc-timeout-seconds", f.rpc_timeout_seconds, 1, "seconds"},
      {"--heartbeat-ms", f.heartbeat_ms, 0, "milliseconds; 0 = what the coordinator suggests"},
      {"--idle-exit-seconds", f.idle_exit_seconds, 0, "seconds"},
      {"--log-every", f.log_every, 0, "seconds; 0 = never"},
  };
  for (const auto& d : durations) {
    if (d.value < d.min) {
      std::cerr << "ranksweep-worker: " << d.flag << " must be at least " << d.min << " ("
                << d.unit << "), got " << d.value << "\n";
      return 1;
    }
  }

  const std::string device_flag = f.device;
  absl::StatusOr<std::string> device_name = trainer::ResolveDeviceName(device_flag);
  if (!device_name.ok()) {
    std::cerr << "ranksweep-worker: --device=" << device_flag << ": "
              << device_name.status().message() << "\n";
    return 1;
  }
  const bool cuda = absl::StartsWith(*device_name, "cuda");
  // The runner gets the concrete device, so "auto" is decided once.
  std::string run_device = "cpu";
  if (cuda) run_device = absl::StartsWith(device_flag, "cuda:") ? device_flag : "cuda";

  const int outbox_max_batches = f.outbox_max_batches;
  const int64_t outbox_max_bytes = f.outbox_max_bytes;
  if (outbox_max_batches < 1 || outbox_max_batches > 1000000) {
    std::cerr << "ranksweep-worker: --outbox-max-batches must be in 1..1000000, got "
              << outbox_max_batches << "\n";
    return 1;
  }
  if (outbox_max_bytes < 4096 || outbox_max_bytes > (int64_t{1} << 40)) {
    std::cerr << "ranksweep-worker: --outbox-max-bytes must be in 4096..1099511627776, got "
              << outbox_max_bytes << "\n";
    return 1;
  }
  // The outbox is taken before anything is leased: a second worker on the
  // same directory stops here.
  const OutboxLimits limits{outbox_max_batches, outbox_max_bytes};
  absl::StatusOr<std::unique_ptr<FileOutbox>> outbox;
  if (!f.outbox_dir.empty()) {
    outbox = FileOutbox::Open(f.outbox_dir, limits);
  } else if (absl::StatusOr<std::string> base = DefaultOutboxBase(); base.ok()) {
    outbox = OpenDefaultOutbox(*base, address, f.worker_id, limits);
  } else {
    outbox = base.status();
  }
  if (!outbox.ok()) {
    std::cerr << "ranksweep-worker: --outbox-dir: " << outbox.status().message() << "\n";
    return 1;
  }
  for (const std::string& problem : (*outbox)->problems()) {
    std::cerr << "ranksweep-worker: outbox: " << problem << "\n";
  }

  const trainer::BuildInfo build = trainer::GetBuildInfo();
  AgentOptions options;
  options.outbox = outbox->release();  // never freed: the agent may use it until exit
  WorkerRegistration& reg = options.registration;
  reg.hostname = f.hostname.empty() ? Hostname() : f.hostname;
  reg.device = cuda ? "cuda" : "cpu";
  reg.device_name = *device_name;
  reg.memory_bytes = f.memory_bytes;
  if (reg.memory_bytes == 0 && cuda) {
    // The GPU's total memory; 0 (unknown) if it cannot be read.
    reg.memory_bytes = trainer::DeviceMemoryBytes(run_device).value_or(0);
  } else if (reg.memory_bytes == 0) {
    reg.memory_bytes = PhysicalMemory();
  }
  reg.slots = slots;
  reg.version = {RANKSWEEP_BUILD_ID, build.torch_version, build.cuda_version};
  reg.worker_id = f.worker_id;
  options.max_seeds = max_seeds;
  options.acquire_wait_ms = poll_ms;
  options.heartbeat_period = absl::Milliseconds(f.heartbeat_ms);
  options.drain_timeout = absl::Seconds(f.drain_seconds);
  options.exit_when_idle = f.once;
  options.idle_exit = absl::Seconds(f.idle_exit_seconds);
  options.log_every = absl::Seconds(f.log_every);

  // Signals are taken synchronously by one thread, so the handler can call
  // into the agent (a mutex) safely; every other thread has them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::string tls_ca_pem;
  if (!f.tls_ca.empty()) {
    absl::StatusOr<std::string> pem = ReadFlagFile(f.tls_ca, "--tls-ca");
    if (!pem.ok()) {
      std::cerr << "ranksweep-worker: " << pem.status().message() << "\n";
      return 1;
    }
    tls_ca_pem = *pem;
  }
  std::string token;
  if (const char* env = std::getenv("RANKSWEEP_TOKEN"); env != nullptr) token = env;
  if (!f.token_file.empty()) {
    absl::StatusOr<std::string> file = ReadFlagFile(f.token_file, "--token-file");
    if (!file.ok()) {
      std::cerr << "ranksweep-worker: " << file.status().message() << "\n";
      return 1;
    }
    token = std::string(absl::StripAsciiWhitespace(*file));
  }

  // Never freed: the detached signal thread may use the agent until the
  // process is gone.
  auto* client = new GrpcCoordinatorClient(MakeCoordinatorChannel(address, tls_ca_pem),
                                           absl::Seconds(f.rpc_timeout_seconds),
                                           token);
  auto* runner = new TrainerTaskRunner(run_device);
  Agent& agent = *new Agent(client, runner, options);
  std::cerr << "ranksweep-worker " << RANKSWEEP_BUILD_ID << " (torch " << build.torch_version
            << (build.cuda_version.empty() ? "" : ", cuda " + build.cuda_version) << ") on "
            << *device_name << ", coordinator " << address << ", outbox "
            << options.outbox->Describe() << std::endl;

  std::thread signal_thread([&agent, signals] {
    while (true) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      std::cerr << "ranksweep-worker: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
                << ": draining" << std::endl;
      agent.RequestDrain();
    }
  });
  signal_thread.detach();  // blocked in sigwait for the life of the process

  absl::Status status = agent.Run();
  if (!status.ok()) {
    std::cerr << "ranksweep-worker: " << status.ToString() << "\n";
    return ExitCodeFor(status);  // common/exit_codes.h: 2 when unreachable
  }
  return 0;
}

}  // namespace
}  // namespace ranksweep::agent

int main(int argc, char** argv) { return ranksweep::agent::Main(argc, argv); }
