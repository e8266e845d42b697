// The command-line surface through real processes: every binary's --version
// and --help, the CLI's hints for what a newcomer mistypes, --dry-run's one
// JSON value and its size estimate, cancelling an ended sweep, plotting, and
// `ranksweepd --metrics-listen` scraped during a real sweep (ranksweepd on a
// temporary SQLite file, a real ranksweep-worker training small heads).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
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
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kSpec = ranksweep::testing::SmallSweepSpec("cli");
constexpr int kCells = ranksweep::testing::kSmallSweepCells;

CommandResult RunIn(const TempDir& dir, std::vector<std::string> argv,
                  std::chrono::milliseconds timeout = 60s) {
  static int runs = 0;
  return RunCommand(argv, dir.path() + "/run" + std::to_string(runs++), timeout);
}

// A coordinator on a fresh database, with its metrics endpoint on (the flag
// spelled with dashes, as operators may write any flag).
class Coordinator {
 public:
  explicit Coordinator(const TempDir& dir) : dir_(dir) {
    server_ = std::make_unique<Process>(
        std::vector<std::string>{RANKSWEEPD_BIN, "--listen=127.0.0.1:0",
                                 "--db=" + dir.path() + "/ranksweep.db", "--insecure_local",
                                 "--metrics-listen=127.0.0.1:0"},
        dir.path() + "/server");
    auto bound = server_->WaitForStdout(std::regex("listening on (\\S+)"), 30s);
    EXPECT_TRUE(bound.has_value()) << server_->Stderr();
    addr_ = bound.value_or("");
    auto metrics = server_->WaitForStdout(std::regex("metrics on http://([0-9.]+:[0-9]+)/"), 1s);
    EXPECT_TRUE(metrics.has_value()) << server_->Stdout();
    metrics_ = metrics.value_or("");
  }

  CommandResult Cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 120s) {
    std::vector<std::string> argv = {RANKSWEEP_CLI_BIN, "--addr=" + addr_};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunIn(dir_, argv, timeout);
  }

  std::string Submit(const std::string& spec = kSpec) {
    const std::string path = dir_.path() + "/spec.json";
    std::ofstream(path) << spec;
    CommandResult r = Cli({"submit", "-f", path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out;
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    return id;
  }

  // GET /metrics over a plain socket: the body of the reply.
  std::string Scrape() {
    const size_t colon = metrics_.rfind(':');
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(std::stoi(metrics_.substr(colon + 1))));
    inet_pton(AF_INET, metrics_.substr(0, colon).c_str(), &sa.sin_addr);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: " + metrics_ + "\r\n\r\n";
    EXPECT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
    std::string reply;
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) reply.append(buf, static_cast<size_t>(n));
    close(fd);
    EXPECT_THAT(reply, StartsWith("HTTP/1.1 200 OK\r\n"));
    EXPECT_THAT(reply, HasSubstr("Content-Type: text/plain; version=0.0.4"));
    const size_t body = reply.find("\r\n\r\n");
    return body == std::string::npos ? "" : reply.substr(body + 4);
  }

  const std::string& addr() const { return addr_; }
  Process& server() { return *server_; }

 private:
  const TempDir& dir_;
  std::string addr_;
  std::string metrics_;
  std::unique_ptr<Process> server_;
};

// How often `needle` occurs in `text`.
int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// One sample's value from Prometheus text, e.g. Sample(text,
// "ranksweep_cells{state=\"done\"}"); -1 when absent.
double Sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST(CliTest, EveryBinaryPrintsItsVersionAndBuildIdAndTheTrainersTheirLibTorch) {
  TempDir dir;
  const std::map<std::string, std::string> binaries = {
      {"ranksweep", RANKSWEEP_CLI_BIN},
      {"ranksweepd", RANKSWEEPD_BIN},
      {"ranksweep-worker", RANKSWEEP_WORKER_BIN},
      {"ranksweep-train", RANKSWEEP_TRAIN_BIN}};
  for (const auto& [name, bin] : binaries) {
    CommandResult r = RunIn(dir, {bin, "--version"});
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_THAT(r.out, MatchesRegex(name + " [0-9]+\\.[0-9]+\\.[0-9]+\nbuild id: [0-9.]+\\+"
                                           "[0-9a-z]+\\.[0-9a-f]{12}\n(LibTorch: .*\n)?"))
        << name;
    const bool links_torch = name == "ranksweep-worker" || name == "ranksweep-train";
    EXPECT_EQ(r.out.find("\nLibTorch: ") != std::string::npos, links_torch) << r.out;
    if (links_torch) EXPECT_THAT(r.out, HasSubstr(", CUDA: ")) << r.out;
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("NDEBUG"))) << name;
  }
}

TEST(CliTest, EveryDaemonsHelpListsItsFlagsWithDashesAndDefaults) {
  TempDir dir;
  CommandResult d = RunIn(dir, {RANKSWEEPD_BIN, "--help"});
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_THAT(d.out, StartsWith("ranksweepd: ranksweep coordinator"));
  EXPECT_THAT(d.out, HasSubstr("\nOptions:\n"));
  EXPECT_THAT(d.out, HasSubstr("\n  --lease-seconds INT=60      How long a lease lasts"));
  EXPECT_THAT(d.out, HasSubstr("\n  --metrics-listen TEXT       Serve Prometheus metrics"));
  EXPECT_THAT(d.out, HasSubstr("\n  --insecure-local            Serve without authentication"));
  EXPECT_THAT(d.out, HasSubstr("\n  --listen TEXT=127.0.0.1:50051\n"));
  // No underscored flag name anywhere: not in the list, the usage line or a
  // flag's help text; and the words of `ranksweepd token` are not a flag.
  EXPECT_FALSE(std::regex_search(d.out, std::regex("--[a-z]+_"))) << d.out;
  EXPECT_THAT(d.out, ::testing::Not(HasSubstr("words")));
  CommandResult w = RunIn(dir, {RANKSWEEP_WORKER_BIN, "--help"});
  EXPECT_EQ(w.exit_code, 0) << w.err;
  EXPECT_THAT(w.out, StartsWith("ranksweep-worker: trains ranksweep tasks"));
  EXPECT_THAT(w.out, HasSubstr("\n  --slots INT=1               Tasks trained at once"));
  EXPECT_THAT(w.out, HasSubstr("\n  --drain-seconds INT=30 "));
  EXPECT_THAT(w.out, HasSubstr("\n  --max-seeds INT=64 "));
  EXPECT_FALSE(std::regex_search(w.out, std::regex("--[a-z]+_"))) << w.out;
  // ranksweep-train: the same help, -h as well.
  for (const char* help : {"--help", "-h"}) {
    CommandResult t = RunIn(dir, {RANKSWEEP_TRAIN_BIN, help});
    EXPECT_EQ(t.exit_code, 0) << t.err;
    EXPECT_THAT(t.out, StartsWith("ranksweep-train: runs one task locally"));
    EXPECT_THAT(t.out, HasSubstr("\n  --seq-len INT=3             dataset.seq_len: tokens per "
                                 "sequence, 1..64\n"));
    EXPECT_THAT(t.out, HasSubstr("\n  --final-query-only "));
    EXPECT_THAT(t.out, HasSubstr("\n  --max-seeds INT=64          With --sweep"));
    EXPECT_THAT(t.out, HasSubstr("\n  --head TEXT=kernel          head.kind: kernel | softmax | "
                                 "signed_kernel |\n"));
    EXPECT_THAT(t.out, HasSubstr("\n  --beta1 FLOAT=0.9           train.beta1: Adam beta1, [0, 1)\n"));
    EXPECT_FALSE(std::regex_search(t.out, std::regex("--[a-z]+_"))) << t.out;
  }
}

// Every field of the dataset and the training has its flag on `submit`,
// made from the field's row: a field with no hand-written flag (beta1) is
// set, a true-or-false one is a switch, and one that is not an axis takes
// one value.
TEST(CliTest, SubmitHasAFlagForEveryDatasetAndTrainingField) {
  TempDir dir;
  CommandResult r = RunIn(dir, {RANKSWEEP_CLI_BIN, "submit", "--name", "rows", "--m", "2",
                              "--seq-len", "3", "--heads", "softmax", "--seeds", "1", "--beta1",
                              "0.8", "--beta2=0.99", "--final-query-only", "--data-seed", "7",
                              "--loss", "ce", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json spec = Json::parse(r.out);
  EXPECT_EQ(spec["train"]["beta1"], 0.8);
  EXPECT_EQ(spec["train"]["beta2"], 0.99);
  EXPECT_EQ(spec["train"]["loss"], "ce");
  EXPECT_EQ(spec["dataset"]["final_query_only"], true);
  EXPECT_EQ(spec["dataset"]["data_seed"], 7);
  r = RunIn(dir, {RANKSWEEP_CLI_BIN, "submit", "--name", "rows", "--heads", "softmax", "--seeds",
                  "1", "--beta1", "0.5,0.9", "--dry-run"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("ranksweep: --beta1 takes one value, got 2; it is not a recipe "
                                "axis (axes: lr, "));
  CommandResult help = RunIn(dir, {RANKSWEEP_CLI_BIN, "submit", "--help"});
  ASSERT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("\n  --beta2 FLOAT ...           train.beta2: Adam beta2, [0, 1)\n"));
  EXPECT_THAT(help.out, HasSubstr("\n  --lr FLOAT ...              train.lr: Adam learning rate, (0, "
                                  "10]; a comma-separated list sweeps it (an axis)\n"));
}

TEST(CliTest, FlagsReadTheSameWithDashesOrUnderscores) {
  TempDir dir;
  // The CLI names its flags with dashes and takes underscores as well.
  CommandResult r = RunIn(dir, {RANKSWEEP_CLI_BIN, "submit", "--name", "flags", "--dataset",
                              "exhaustive", "--m", "2", "--seq_len", "3", "--heads", "softmax",
                              "--seeds", "1", "--max_steps=0", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json spec = Json::parse(r.out);
  EXPECT_EQ(spec["dataset"]["seq_len"], 3);
  EXPECT_EQ(spec["train"]["max_steps"], 0);
  // ranksweepd: a value that is not of the flag's type is named with what it
  // takes, exit 1.
  r = RunIn(dir, {RANKSWEEPD_BIN, "--lease-seconds=abc"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "ranksweepd: --lease-seconds must be an integer in -2147483648..2147483647, got "
            "\"abc\"\n");
  // The deprecated underscored spellings still reach the flag, whose range
  // check then answers under the dashed name.
  r = RunIn(dir, {RANKSWEEPD_BIN, "--lease_seconds=0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweepd: --lease-seconds must be 1..86400\n");
  r = RunIn(dir, {RANKSWEEP_WORKER_BIN, "--max_seeds=0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ranksweep-worker: --max-seeds must be in 1..1024, got 0\n");
  // ranksweep-train's too, with the flag's range.
  for (const char* flag : {"--max_steps=abc", "--max-steps=abc"}) {
    r = RunIn(dir, {RANKSWEEP_TRAIN_BIN, flag});
    EXPECT_EQ(r.exit_code, 1) << flag;
    EXPECT_EQ(r.err, "ranksweep-train: --max-steps must be an integer in 0..10000000, got \"abc\"\n")
        << flag;
  }
}

TEST(CliTest, DryRunOfAWitnessWithoutNumQueriesWarnsAboutItsSize) {
  TempDir dir;
  std::vector<std::string> argv = {RANKSWEEP_CLI_BIN, "submit",      "--name",   "w",
                                   "--dataset",       "witness",     "--m",      "24",
                                   "--seq-len",       "3",           "--code-weight", "8",
                                   "--max-overlap",   "4",           "--heads",  "kernel:elu1",
                                   "--ranks",         "64",          "--seeds",  "3",
                                   "--dry-run"};
  CommandResult r = RunIn(dir, argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("w: dataset: 1,151,403 train sequences, no test split\n"));
  EXPECT_THAT(r.err, HasSubstr("warning: w: the dataset has 1,151,403 sequences, more than "
                               "200,000"));
  EXPECT_EQ(Json::parse(r.out)["dataset"]["code_weight"], 8);
  argv.insert(argv.end() - 1, {"--num-queries", "12"});
  r = RunIn(dir, argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("w: dataset: 276 train sequences, no test split\n"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("warning")));
  EXPECT_EQ(Json::parse(r.out)["dataset"]["num_queries"], 12);
}

TEST(CliTest, CancellingAnEndedSweepSaysSoAndExitsZero) {
  TempDir dir;
  Coordinator c(dir);
  const std::string id = c.Submit();
  CommandResult r = c.Cli({"cancel", id});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "cancelled " + std::to_string(kCells) + " cells of " + id + "\n");
  r = c.Cli({"cancel", id});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sweep " + id + " has already ended CANCELLED; nothing to cancel\n");
  r = c.Cli({"cancel", "no-such-sweep"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
}

TEST(CliTest, PlottingTheTestSplitOfADatasetWithoutOneIsAnError) {
  TempDir dir;
  Coordinator c(dir);
  const std::string id = c.Submit();
  const std::string out = dir.path() + "/t.svg";
  CommandResult r = c.Cli({"plot", id, "--split", "test", "-o", out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--split test: sweep " + id + " (cli) has no test split"));
  EXPECT_NE(access(out.c_str(), F_OK), 0);  // nothing written
  r = c.Cli({"plot", id, "-o", dir.path() + "/x.jpg"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("-o: \"" + dir.path() + "/x.jpg\" must end in .svg, .png or .pdf, "
                               "or give --format svg|png|pdf"));
}

// A real sweep, scraped while it runs and after: the counters are exact.
TEST(CliTest, MetricsCountEveryCellLeaseResultAndCallOfARealSweep) {
  TempDir dir;
  Coordinator c(dir);
  const std::string before = c.Scrape();
  EXPECT_EQ(Sample(before, "ranksweep_results_accepted_total"), 0);
  EXPECT_THAT(before, HasSubstr("# TYPE ranksweep_store_commit_seconds histogram\n"));
  // Every counter has a sample from start-up, before anything happened to
  // count: a rate() over a fresh coordinator has a first point.
  EXPECT_EQ(Sample(before, "ranksweep_results_rejected_total{reason=\"FAILED_PRECONDITION\"}"), 0)
      << before;
  EXPECT_EQ(Sample(before, "ranksweep_rpcs_total{code=\"OK\",method=\"/ranksweep.v1."
                           "WorkerService/FailTask\"}"),
            0);
  for (size_t at = before.find("# TYPE "); at != std::string::npos;
       at = before.find("# TYPE ", at + 1)) {
    const size_t end = before.find('\n', at);
    const std::string line = before.substr(at + 7, end - at - 7);  // "NAME counter"
    if (line.substr(line.rfind(' ') + 1) != "counter") continue;
    const std::string name = line.substr(0, line.rfind(' '));
    EXPECT_TRUE(before.find("\n" + name + " ") != std::string::npos ||
                before.find("\n" + name + "{") != std::string::npos)
        << name << " has no sample at start-up";
  }
  // The build, as --version says it; no sweep in any state yet.
  CommandResult version = RunIn(dir, {RANKSWEEPD_BIN, "--version"});
  std::smatch found;
  ASSERT_TRUE(std::regex_search(version.out, found, std::regex("build id: ([^\n]+)\n")))
      << version.out;
  const std::string build_id = found[1];
  EXPECT_EQ(Sample(before, "ranksweep_build_info{build_id=\"" + build_id + "\",version=\"" +
                               build_id.substr(0, build_id.find('+')) + "\"}"),
            1)
      << before;
  for (const char* state : {"running", "done", "failed", "cancelled"}) {
    EXPECT_EQ(Sample(before, std::string("ranksweep_sweeps{state=\"") + state + "\"}"), 0);
  }

  const std::string id = c.Submit();
  const std::string during = c.Scrape();
  double cells = 0;
  for (const char* state : {"pending", "leased", "done", "failed", "cancelled"}) {
    cells += Sample(during, std::string("ranksweep_cells{state=\"") + state + "\"}");
  }
  EXPECT_EQ(cells, kCells);
  EXPECT_EQ(Sample(during, "ranksweep_sweeps{state=\"running\"}"), 1);

  Process worker({RANKSWEEP_WORKER_BIN, "--coordinator=" + c.addr(), "--device=cpu",
                  "--slots=1", "--once", "--idle_exit_seconds=2"},
                 dir.path() + "/worker", {"RANKSWEEP_TORCH_THREADS=1"});
  CommandResult watch = c.Cli({"watch", id}, 300s);
  ASSERT_EQ(watch.exit_code, 0) << watch.out << watch.err;
  const std::string mid = c.Scrape();
  EXPECT_EQ(Sample(mid, "ranksweep_workers_alive{device=\"cpu\"}"), 1) << mid;
  ASSERT_TRUE(worker.Wait(60s).has_value()) << worker.Stderr();

  const std::string after = c.Scrape();
  EXPECT_EQ(Sample(after, "ranksweep_cells{state=\"done\"}"), kCells) << after;
  EXPECT_EQ(Sample(after, "ranksweep_cells{state=\"pending\"}"), 0);
  EXPECT_EQ(Sample(after, "ranksweep_results_accepted_total"), kCells);
  EXPECT_EQ(Sample(after, "ranksweep_leases_granted_total"), kCells);
  EXPECT_EQ(Sample(after, "ranksweep_leases_expired_total"), 0);
  EXPECT_EQ(Sample(after, "ranksweep_leases_lost_total"), 0);
  EXPECT_EQ(Sample(after, "ranksweep_sweeps{state=\"done\"}"), 1);
  EXPECT_EQ(Sample(after, "ranksweep_sweeps{state=\"running\"}"), 0);
  // Nothing refused: each reason still at 0.
  EXPECT_EQ(Sample(after, "ranksweep_results_rejected_total{reason=\"FAILED_PRECONDITION\"}"), 0);
  EXPECT_EQ(Sample(after, "ranksweep_results_rejected_total{reason=\"INVALID_ARGUMENT\"}"), 0);
  // Each call timed under its method: one SubmitSweep, one RegisterWorker.
  EXPECT_EQ(Sample(after, "ranksweep_rpc_duration_seconds_count{method=\"/ranksweep.v1."
                          "SweepService/SubmitSweep\"}"),
            1);
  EXPECT_EQ(Sample(after, "ranksweep_rpc_duration_seconds_bucket{method=\"/ranksweep.v1."
                          "WorkerService/RegisterWorker\",le=\"+Inf\"}"),
            1);
  EXPECT_EQ(Sample(after, "ranksweep_rpcs_total{code=\"OK\",method=\"/ranksweep.v1."
                          "SweepService/SubmitSweep\"}"),
            1);
  EXPECT_EQ(Sample(after, "ranksweep_rpcs_total{code=\"OK\",method=\"/ranksweep.v1."
                          "WorkerService/RegisterWorker\"}"),
            1);
  EXPECT_GE(Sample(after, "ranksweep_store_commit_seconds_count"), 3);
  EXPECT_EQ(Sample(after, "ranksweep_store_commit_seconds_bucket{le=\"+Inf\"}"),
            Sample(after, "ranksweep_store_commit_seconds_count"));

  // The finished sweep through the other outputs: one convention for
  // states and missing values, and a PNG plot.
  CommandResult json = c.Cli({"results", id, "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json rows = Json::parse(json.out);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kCells));
  for (const Json& row : rows) {
    EXPECT_EQ(row["state"], "DONE");
    EXPECT_TRUE(row["result"]["test"].is_null());  // exhaustive: no test split
    EXPECT_EQ(row["rank"].is_null(), row["head"] == "softmax");
  }
  const std::string png = dir.path() + "/sweep.png";
  CommandResult plot = c.Cli({"plot", id, id, "-o", png});
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  EXPECT_EQ(plot.err, "wrote " + png + " (" + std::to_string(2 * kCells) + " points)\n");
  EXPECT_EQ(testing::ReadFile(png).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));

  // The same cells with 2 seeds, all served from the result cache, on one
  // figure with the first sweep's 3: each line says its own seed count, and
  // the caption no longer claims 3 for all.
  std::string two = kSpec;
  two.replace(two.find("\"seed_count\": 3"), 15, "\"seed_count\": 2");
  two.replace(two.find("\"name\": \"cli\""), 13, "\"name\": \"cli2\"");
  const std::string id2 = c.Submit(two);
  ASSERT_EQ(c.Cli({"watch", id2}, 60s).exit_code, 0);
  const std::string cmp = dir.path() + "/cmp.svg";
  plot = c.Cli({"plot", id, id2, "-o", cmp});
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  const std::string cmp_svg = testing::ReadFile(cmp);
  EXPECT_THAT(cmp_svg, ::testing::Not(HasSubstr("mean over 3 seeds")));
  EXPECT_THAT(cmp_svg, HasSubstr("mean over its line's seeds"));
  EXPECT_THAT(cmp_svg, HasSubstr(">cli: kernel/elu1 (n = 3)</text>"));
  EXPECT_THAT(cmp_svg, HasSubstr(">cli2: kernel/elu1 (n = 2)</text>"));
  EXPECT_THAT(cmp_svg, HasSubstr(">cli2: softmax (n = 2)</text>"));

  // A figure for a paper: vector PDF, no title or caption, its size and
  // text size set; a size the legend cannot fit in is refused, naming it.
  const std::string pdf = dir.path() + "/paper.pdf";
  plot = c.Cli({"plot", id, "-o", pdf, "--no-title", "--no-caption", "--size", "640x400",
                "--font-size", "11"});
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  const std::string pdf_bytes = testing::ReadFile(pdf);
  EXPECT_EQ(pdf_bytes.substr(0, 5), "%PDF-");
  EXPECT_THAT(pdf_bytes, HasSubstr("/MediaBox [ 0 0 480 300 ]"));  // 640 x 400 px
  const std::string svg = dir.path() + "/paper.svg";
  plot = c.Cli({"plot", id, "-o", svg, "--no-title", "--size", "640x400"});
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  const std::string svg_text = testing::ReadFile(svg);
  EXPECT_THAT(svg_text, HasSubstr("width=\"640\" height=\"400\""));
  EXPECT_THAT(svg_text, ::testing::Not(HasSubstr("class=\"title\"")));
  EXPECT_THAT(svg_text, HasSubstr("class=\"caption\""));
  plot = c.Cli({"plot", id, "-o", dir.path() + "/tiny.svg", "--size", "200x200"});
  EXPECT_EQ(plot.exit_code, 1);
  EXPECT_THAT(plot.err, HasSubstr("--size: a width of 200 px leaves the plot area"));
  EXPECT_NE(access((dir.path() + "/tiny.svg").c_str(), F_OK), 0);

  // The report of the same sweep: one criterion, its provenance from the
  // stored rows (the worker's build, a CPU), the spec's non-default fields.
  CommandResult report = c.Cli({"report", id, "-o", dir.path() + "/report"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string page = testing::ReadFile(dir.path() + "/report/" + "report.md");
  CommandResult worker_version = RunIn(dir, {RANKSWEEP_WORKER_BIN, "--version"});
  ASSERT_TRUE(std::regex_search(worker_version.out, found, std::regex("build id: ([^\n]+)\n")))
      << worker_version.out;
  EXPECT_THAT(page, HasSubstr("\n- build: `" + found[1].str() + "` (" + std::to_string(kCells) +
                              " cells)\n"));
  EXPECT_THAT(page, HasSubstr("\n- devices: cpu (" + std::to_string(kCells) + " cells)\n"));
  EXPECT_EQ(Occurrences(page, "### Criterion `"), 1) << page;
  EXPECT_THAT(page, ::testing::Not(HasSubstr("\"priority\"")));
  report = c.Cli({"report", id, "-o", dir.path() + "/report2", "--criteria", "all,mean:0.99"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(Occurrences(testing::ReadFile(dir.path() + "/report2/" + "report.md"),
                        "### Criterion `"),
            2);
  report = c.Cli({"report", id, "-o", dir.path() + "/report3", "--criteria", "all,all"});
  EXPECT_EQ(report.exit_code, 1);
  EXPECT_THAT(report.err, HasSubstr("--criteria: \"all\" is given twice"));
}

// A witness family of 28 sequences (4 queries of a weight-4 code in
// {0,1}^8; theory lower bound 2, upper bound 8) with a kernel head and a
// two-head kernel trained at rank 1, the rank-1 construction and the exact
// softmax construction (both without a rank here), two seeds: 8 cells of
// well under a second each. Below the lower bound no single kernel head is
// exact on every input, so at most 27 of 28 sequences are right (accuracy
// 0.964): every criterion fails there, whatever the training. The
// constructions do not train, so their numbers are exact.
const char kReportSpec[] = R"({
  "name": "report-e2e",
  "dataset": {"kind": "witness", "m": 8, "seq_len": 3, "code_weight": 4, "max_overlap": 2,
              "num_queries": 4},
  "heads": [{"kind": "kernel", "feature_map": "elu1"},
            {"kind": "multihead_kernel", "feature_map": "elu1", "num_heads": 2},
            {"kind": "kernel", "construction": "rank1"},
            {"kind": "softmax", "construction": "softmax_exact"}],
  "ranks": [1],
  "seed_count": 2,
  "train": {"max_steps": 100, "eval_every": 50, "lr": 0.02}
})";

// `results --criterion` and `report` on a real sweep: the criterion is
// checked by the CLI, applied by the coordinator and printed; the report
// holds every criterion's rows, the bounds only beside the single kernel
// head, the plot and the spec.
TEST(CliTest, ReportOfARealSweepWritesThePageThePlotAndEveryCriterion) {
  TempDir dir;
  Coordinator c(dir);
  const std::string id = c.Submit(kReportSpec);
  Process worker({RANKSWEEP_WORKER_BIN, "--coordinator=" + c.addr(), "--device=cpu",
                  "--slots=1", "--once", "--idle_exit_seconds=2"},
                 dir.path() + "/worker", {"RANKSWEEP_TORCH_THREADS=1"});
  CommandResult watch = c.Cli({"watch", id}, 300s);
  ASSERT_EQ(watch.exit_code, 0) << watch.out << watch.err;

  CommandResult r = c.Cli({"results", id, "--summary", "--criterion", "seeds:0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--criterion: \"seeds:0\" is out of range: K must be at least 1; "
                               "use all (every seed exact), mean:X (mean exact accuracy >= X, "
                               "0 < X <= 1) or seeds:K (at least K seeds exact, K >= 1)"));
  r = c.Cli({"results", id, "--criterion", "all"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--criterion: judges groups; use it with --summary or --group-by "
                               "head,rank"));
  r = c.Cli({"results", id, "--summary", "--criterion", "seeds:1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("criterion: at least 1 seed exact (seeds:1)\n\nkernel/elu1\n"));
  EXPECT_THAT(r.out, HasSubstr("  transition rank: undefined (no swept rank has at least 1 seed "
                               "exact) (theory: lower bound 2, upper bound 8)\n"));
  EXPECT_THAT(r.out, HasSubstr(" (theory: no bound (multi-head))\n"));
  EXPECT_THAT(r.out, HasSubstr("  no rank; exact on 2/2 seeds; meets at least 1 seed exact\n"));
  r = c.Cli({"results", id, "--summary"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("criterion: every seed exact (all)\n\n"));

  // The three standard criteria (the default is `all` alone).
  const std::string out = dir.path() + "/report";
  r = c.Cli({"report", id, "-o", out, "--criteria", "standard"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page_path = out + "/" + "report.md";
  EXPECT_EQ(r.err, "wrote " + page_path + " (1 sweep, 1 plot)\n");
  const std::string page = testing::ReadFile(page_path);
  EXPECT_THAT(page, HasSubstr("| 1 | `" + id + "` | report-e2e | witness dataset, m = 8, N = 3, "
                              "2 seeds | DONE | 8/8 |\n"));
  // Transition ranks: the bounds beside the single kernel head only.
  EXPECT_THAT(page, HasSubstr("| head | criterion | train | theory |\n|---|---|--:|---|\n"
                              "| kernel/elu1 | `all` | undefined | lower bound 2, upper bound 8 |\n"
                              "| kernel/elu1 | `mean:0.99` | undefined | lower bound 2, upper "
                              "bound 8 |\n"
                              "| kernel/elu1 | `seeds:1` | undefined | lower bound 2, upper bound "
                              "8 |\n"));
  EXPECT_THAT(page, ::testing::ContainsRegex("\\| multihead_kernel/elu1x2 \\| `seeds:1` \\| "
                                             "[a-z0-9]+ \\| no bound \\(multi-head\\) \\|\n"));
  EXPECT_THAT(page, HasSubstr("| kernel/rank1* | `all` | no rank | - |\n"));
  // Each criterion's table; the constructions' rows exactly.
  for (const char* heading : {"### Criterion `all`: every seed exact\n\n",
                              "### Criterion `mean:0.99`: mean exact accuracy >= 0.99\n\n",
                              "### Criterion `seeds:1`: at least 1 seed exact\n\n"}) {
    EXPECT_THAT(page, HasSubstr(std::string(heading) +
                                "#### Train split\n\n| head | rank | N | error (mean ± CI95) | "
                                "exact | meets | completeness |\n|---|--:|--:|--:|--:|---|---|\n"
                                "| kernel/elu1 | 1 | 2/2 | "));
  }
  EXPECT_THAT(page, ::testing::ContainsRegex("\\| kernel/elu1 \\| 1 \\| 2/2 \\| [01]\\.[0-9]{3} ± "
                                             "[0-9]+\\.[0-9]{3} \\| 0/2 \\| no \\| complete \\|\n"));
  EXPECT_THAT(page, HasSubstr("| kernel/rank1* | - | 2/2 | 1.000 ± 0.000 | 0/2 | no | complete "
                              "|\n| softmax/exact* | - | 2/2 | 0.000 ± 0.000 | 2/2 | yes | "
                              "complete |\n"));
  EXPECT_THAT(page, HasSubstr("- kernel/elu1: transition rank undefined (no swept rank has mean "
                              "exact accuracy >= 0.99) (theory: lower bound 2, upper bound 8)\n"));
  EXPECT_THAT(page, HasSubstr("- kernel/rank1*: no rank; exact on 0/2 seeds; does not meet at "
                              "least 1 seed exact\n"
                              "- softmax/exact*: no rank; exact on 2/2 seeds; meets at least 1 "
                              "seed exact\n"));
  EXPECT_THAT(page, ::testing::Not(HasSubstr("Test split")));
  EXPECT_THAT(page, HasSubstr("### Plots\n\n![report-e2e: train error against feature rank]"
                              "(1-report-e2e-train.svg)\n"));
  EXPECT_THAT(page, HasSubstr("### Spec\n\nThe fields that differ from the defaults (`submit -f` "
                              "reads it back):\n\n```json\n{\n  \"dataset\": {"));
  EXPECT_THAT(page, HasSubstr("  \"name\": \"report-e2e\",\n"));
  EXPECT_THAT(testing::ReadFile(out + "/1-report-e2e-train.svg"), HasSubstr("<svg"));

  // Learning curves: two trained heads (the constructions train no step),
  // two seeds each, evaluated at steps 50 and 100.
  r = c.Cli({"results", id, "--curves", "--format", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Count(r.out, "\n" + id + ","), 8) << r.out;
  const std::string curves = dir.path() + "/curves.svg";
  r = c.Cli({"plot", id, "--curves", "-o", curves});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "wrote " + curves + " (4 seeds' curves)\n");
  std::string drawn = testing::ReadFile(curves);
  EXPECT_EQ(Count(drawn, "<g class=\"panel\">"), 2);
  EXPECT_THAT(drawn, HasSubstr("width=\"590.0\" height=\"330.0\""));
  EXPECT_EQ(Count(drawn, "class=\"title\""), 1);
  EXPECT_EQ(Count(drawn, "class=\"x-label\""), 1);
  // For a paper: no title or caption, its own size and text size.
  r = c.Cli({"plot", id, "--curves", "-o", curves, "--no-title", "--no-caption", "--size",
             "700x300", "--font-size", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  drawn = testing::ReadFile(curves);
  EXPECT_THAT(drawn, HasSubstr("width=\"700.0\" height=\"300.0\""));
  EXPECT_EQ(Count(drawn, "class=\"title\""), 0);
  EXPECT_EQ(Count(drawn, "class=\"x-label\""), 0);
  EXPECT_EQ(Count(drawn, "class=\"mean-line\""), 2);
  r = c.Cli({"plot", id, "--curves", "-o", curves, "--size", "300x300"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--size: a width of 300 px leaves each of the 2 panels 85 px wide "
                               "(at least 120 px); use a width of at least 370 or a smaller "
                               "--font-size"));
  r = c.Cli({"plot", id, "--curves", "-o", curves, "--bands"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--bands: the curves figure (--curves) draws every seed's curve "
                               "and their mean, not bands"));

  // A directory that cannot be made, and a sweep that does not exist.
  std::ofstream(dir.path() + "/file") << "x";
  r = c.Cli({"report", id, "-o", dir.path() + "/file/sub"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("-o: cannot create directory " + dir.path() + "/file/sub: "));
  r = c.Cli({"report", "no-such-sweep", "-o", out});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  ASSERT_TRUE(worker.Wait(60s).has_value()) << worker.Stderr();
}

}  // namespace
}  // namespace ranksweep
