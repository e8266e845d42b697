// `ranksweep`: the command-line client of the coordinator. Wires CLI11
// subcommands to SweepService calls; parsing and rendering live in
// spec_file.h and format.h.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/functional/function_ref.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/format.h"
#include "client/hints.h"
#include "client/plot.h"
#include "client/presets.h"
#include "client/spec_file.h"
#include "client/ui/ui_command.h"
#include "common/flag_names.h"
#include "common/spec/spec.h"
#include "common/spec/spec_json.h"
#include "common/version.h"
#include "grpcpp/generic/generic_stub.h"
#include "google/protobuf/arena.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "proto/columns.h"
#include "proto/convert.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"
#include "ranksweep_build_id.h"  // RANKSWEEP_BUILD_ID (cmake/BuildId.cmake)

namespace ranksweep::client {
namespace {

constexpr char kFooter[] = R"(Exit codes:
  0  ok
  1  usage error or invalid argument (bad flags, invalid spec)
  2  coordinator unreachable or timed out
  3  not found (no such sweep)
  4  watch: the sweep ended FAILED or CANCELLED
  5  other server error
health: 0 when SERVING, 2 when unreachable or not serving.
Environment: RANKSWEEP_ADDR is the default for --addr; RANKSWEEP_TOKEN is sent
as "authorization: Bearer TOKEN" on every call.)";

struct Globals {
  std::string addr;
  double timeout_seconds = 30;
  std::string token;   // sent as "authorization: Bearer TOKEN" when set
  std::string tls_ca;  // PEM file of the CA to trust; empty = plaintext
};

std::string DefaultAddr() {
  const char* env = std::getenv("RANKSWEEP_ADDR");
  return env != nullptr && *env != '\0' ? env : "127.0.0.1:50051";
}

// Prints a failed call's message and returns its exit code.
int Report(const Globals& g, const grpc::Status& status, const std::string& what) {
  const int code = ExitCodeForStatusCode(static_cast<int>(status.error_code()));
  if (code == kExitUnreachable) {
    std::cerr << "ranksweep: " << what << ": coordinator at " << g.addr
              << " unreachable: " << status.error_message() << "\n";
  } else {
    std::cerr << "ranksweep: " << what << ": " << status.error_message() << "\n";
  }
  return code;
}

int ReportLocal(const absl::Status& status) {
  std::cerr << "ranksweep: " << status.message() << "\n";
  return ExitCodeForStatusCode(static_cast<int>(status.code()));
}

// Per-seed results of a large sweep (100,000 rows are about 14 MB) exceed
// gRPC's default 4 MiB receive limit; accept what ranksweepd may send by
// default (--max_message_bytes, 64 MiB).
grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // A lost coordinator is tried again at least every 10 s (gRPC's own
  // default backs off to 2 min), so `watch` notices a restart soon.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 10'000);
  return args;
}

class Client {
 public:
  Client(Globals g, std::shared_ptr<grpc::ChannelCredentials> credentials)
      : g_(std::move(g)),
        channel_(grpc::CreateCustomChannel(g_.addr, std::move(credentials), ChannelArgs())),
        stub_(v1::SweepService::NewStub(channel_)) {}

  const Globals& globals() const { return g_; }
  v1::SweepService::Stub& stub() { return *stub_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // A context with the bearer token and, when `with_deadline`, the --timeout
  // deadline (none when --timeout is 0).
  std::unique_ptr<grpc::ClientContext> Context(bool with_deadline = true) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (with_deadline && g_.timeout_seconds > 0) {
      ctx->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(g_.timeout_seconds)));
    }
    if (!g_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + g_.token);
    return ctx;
  }

 private:
  Globals g_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> stub_;
};

// How long `watch` keeps trying to reach a coordinator it lost mid-sweep
// (a restart, a dropped connection) unless --reconnect says otherwise.
constexpr double kDefaultReconnectSeconds = 300;

// --reconnect, for `watch` and `submit --watch`.
void AddReconnectOption(CLI::App* app, double* seconds) {
  app->add_option("--reconnect", *seconds,
                  "Seconds `watch` keeps reconnecting to a coordinator lost mid-sweep; 0 = exit "
                  "at once (code 2)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

// Follows a sweep until it ends. Redraws one line with '\r' on a TTY, prints
// one line per event otherwise. If the stream breaks with UNAVAILABLE or
// CANCELLED while the sweep is running (the coordinator restarted or the connection
// dropped), it opens a new one, retrying with backoff for up to
// `reconnect_seconds` (0: not at all); the sweep's state is in the store,
// so nothing is missed but the messages of the gap.
int Watch(Client& client, const std::string& sweep_id,
          double reconnect_seconds = kDefaultReconnectSeconds) {
  v1::WatchSweepRequest req;
  req.set_sweep_id(sweep_id);
  const bool tty = isatty(STDOUT_FILENO) != 0;
  v1::SweepEvent event;
  v1::SweepInfo last;
  bool any = false;       // an event came on any stream
  bool on_line = false;   // a progress line without its newline is on the TTY
  absl::Time lost_at = absl::InfinitePast();  // when the current outage began
  absl::Duration backoff = absl::Seconds(1);
  grpc::Status status;
  while (true) {
    // No deadline: a sweep may run for days.
    auto ctx = client.Context(/*with_deadline=*/false);
    auto reader = client.stub().WatchSweep(ctx.get(), req);
    bool got = false;
    while (reader->Read(&event)) {
      if (!got && lost_at != absl::InfinitePast()) {
        std::cerr << "ranksweep: watch: reconnected\n";
        lost_at = absl::InfinitePast();
        backoff = absl::Seconds(1);
      }
      got = any = true;
      last = event.sweep();
      if (tty) {
        std::cout << "\r" << ProgressLine(last) << "\033[K" << std::flush;
        on_line = true;
      } else {
        std::cout << ProgressLine(last);
        if (!event.message().empty()) std::cout << "  " << event.message();
        std::cout << "\n" << std::flush;
      }
    }
    status = reader->Finish();
    // A coordinator that shuts down ends open streams with UNAVAILABLE, or
    // with CANCELLED when it cuts one mid-write or at its grace deadline;
    // watch never cancels its own stream, so both mean "lost", not "done".
    const bool lost = (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                       status.error_code() == grpc::StatusCode::CANCELLED) &&
                      any && last.state() == v1::SWEEP_STATE_RUNNING;
    if (!lost || reconnect_seconds <= 0) break;
    const absl::Time now = absl::Now();
    if (lost_at == absl::InfinitePast()) {
      lost_at = now;
      if (on_line) std::cout << "\n" << std::flush;
      on_line = false;
      std::cerr << "ranksweep: watch: lost the coordinator (" << status.error_message()
                << "); reconnecting for up to " << reconnect_seconds << " s\n";
    } else if (now - lost_at >= absl::Seconds(reconnect_seconds)) {
      break;
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(10));
  }
  if (on_line) std::cout << "\n";
  if (!status.ok()) return Report(client.globals(), status, "watch");
  switch (last.state()) {
    case v1::SWEEP_STATE_DONE:
      std::cerr << "sweep " << sweep_id << " DONE\n";
      return kExitOk;
    case v1::SWEEP_STATE_FAILED:
    case v1::SWEEP_STATE_CANCELLED:
      std::cerr << "sweep " << sweep_id << " " << SweepStateName(last.state()) << "\n";
      for (const auto& f : last.recent_failures()) std::cerr << "  " << f << "\n";
      return kExitSweepFailed;
    default:
      std::cerr << "ranksweep: watch: the stream closed while the sweep was "
                << SweepStateName(last.state()) << "\n";
      return kExitServerError;
  }
}

struct SubmitArgs {
  std::string file;
  std::string preset;
  double scale = 1.0;
  bool watch = false;
  double reconnect = kDefaultReconnectSeconds;
  bool dry_run = false;
  std::string name, dataset, loss, mode, schedule;
  int warmup_steps = 0;
  bool no_cache = false;
  int m = 0, seq_len = 0, seed_count = 0, max_steps = 0, batch_size = 0, eval_every = 0,
      early_stop_evals = 0, priority = 0;
  bool final_query_only = false;
  uint64_t data_seed = 0;
  int code_weight = 0, max_overlap = 0, num_queries = 0, weight = 0, pool_size = 0,
      train_size = 0, test_size = 0;
  double bernoulli_p = 0, test_pool_share = 0, hard_share = 0;
  double lr = 0;
  std::vector<std::string> heads;
  std::vector<int> ranks;
  std::vector<uint64_t> seed_list;
};

int Submit(Client* client, const SubmitArgs& a, CLI::App* sub) {
  // A preset may stand for several sweeps (e.g. one per sequence length);
  // everything below applies to each of them.
  std::vector<SweepSpec> specs(1);
  std::vector<std::string> resolution;
  if (!a.preset.empty()) {
    if (!a.file.empty()) {
      return ReportLocal(absl::InvalidArgumentError("--preset and -f cannot be used together"));
    }
    absl::StatusOr<ResolvedPreset> preset = ResolvePreset(a.preset, a.scale);
    if (!preset.ok()) return ReportLocal(preset.status());
    specs = preset->sweeps;
    resolution = preset->resolution;
  } else if (sub->count("--scale") > 0) {
    return ReportLocal(absl::InvalidArgumentError("--scale needs --preset"));
  }
  SweepSpec& spec = specs[0];
  if (!a.file.empty()) {
    absl::StatusOr<SweepSpec> loaded = LoadSweepSpecFile(a.file);
    if (!loaded.ok()) {
      std::cerr << "ranksweep: " << loaded.status().message() << "\n";
      return kExitUsage;
    }
    spec = *std::move(loaded);
  }
  auto given = [&](const char* flag) { return sub->count(flag) > 0; };
  SpecOverrides o;
  if (given("--name")) o.name = a.name;
  if (given("--dataset")) o.dataset = a.dataset;
  if (given("--m")) o.m = a.m;
  if (given("--seq-len")) o.seq_len = a.seq_len;
  if (given("--final-query-only")) o.final_query_only = a.final_query_only;
  if (given("--data-seed")) o.data_seed = a.data_seed;
  if (given("--code-weight")) o.code_weight = a.code_weight;
  if (given("--max-overlap")) o.max_overlap = a.max_overlap;
  if (given("--num-queries")) o.num_queries = a.num_queries;
  if (given("--weight")) o.weight = a.weight;
  if (given("--bernoulli-p")) o.bernoulli_p = a.bernoulli_p;
  if (given("--pool-size")) o.pool_size = a.pool_size;
  if (given("--test-pool-share")) o.test_pool_share = a.test_pool_share;
  if (given("--train-size")) o.train_size = a.train_size;
  if (given("--test-size")) o.test_size = a.test_size;
  if (given("--hard-share")) o.hard_share = a.hard_share;
  if (given("--heads")) o.heads = a.heads;
  if (given("--ranks")) o.ranks = a.ranks;
  if (given("--seeds")) o.seed_count = a.seed_count;
  if (given("--seed-list")) o.seeds = a.seed_list;
  if (given("--max-steps")) o.max_steps = a.max_steps;
  if (given("--lr")) o.lr = a.lr;
  if (given("--batch-size")) o.batch_size = a.batch_size;
  if (given("--eval-every")) o.eval_every = a.eval_every;
  if (given("--early-stop-evals")) o.early_stop_evals = a.early_stop_evals;
  if (given("--loss")) o.loss = a.loss;
  if (given("--schedule")) o.schedule = a.schedule;
  if (given("--warmup-steps")) o.warmup_steps = a.warmup_steps;
  if (given("--priority")) o.priority = a.priority;
  std::optional<SweepMode> mode;
  if (given("--mode")) {
    absl::StatusOr<SweepMode> parsed = ParseSweepMode(a.mode, "--mode");
    if (!parsed.ok()) return ReportLocal(parsed.status());
    mode = *parsed;
  }
  for (SweepSpec& one : specs) {
    if (absl::Status s = ApplyOverrides(o, &one); !s.ok()) return ReportLocal(s);
    if (mode.has_value()) one.mode = *mode;
    if (a.no_cache) one.reuse_results = false;
    // The server validates too; checking here gives the same message offline.
    if (absl::Status s = ValidateSweepSpec(one); !s.ok()) return ReportLocal(s);
  }
  if (!resolution.empty()) {
    std::cerr << "preset " << a.preset << " at scale " << a.scale << ":\n";
    for (const std::string& line : resolution) std::cerr << "  " << line << "\n";
  }
  for (const SweepSpec& one : specs) {
    const SweepCost cost = EstimateSweepCost(one);
    if (a.dry_run) {
      for (const std::string& line : SweepCostLines(cost)) {
        std::cerr << one.name << ": " << line << "\n";
      }
    }
    std::vector<std::string> warnings = SpecWarnings(one);
    for (std::string& w : SweepCostWarnings(one, cost)) warnings.push_back(std::move(w));
    for (const std::string& w : warnings) {
      std::cerr << "warning: " << one.name << ": " << w << "\n";
    }
  }
  if (a.dry_run) {
    // Always one JSON value on stdout: the spec, or an array of them for a
    // preset of several sweeps.
    if (specs.size() == 1) {
      std::cout << SweepSpecToJson(specs[0], 2) << "\n";
    } else {
      nlohmann::ordered_json all = nlohmann::ordered_json::array();
      for (const SweepSpec& one : specs) {
        all.push_back(nlohmann::ordered_json::parse(SweepSpecToJson(one, -1)));
      }
      std::cout << all.dump(2) << "\n";
    }
    return kExitOk;
  }
  if (a.watch && specs.size() > 1) {
    return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
        "--watch follows one sweep; preset ", a.preset, " submits ", specs.size())));
  }
  std::string last_id;
  for (const SweepSpec& one : specs) {
    v1::SubmitSweepRequest req;
    *req.mutable_spec() = ToProto(one);
    v1::SubmitSweepResponse resp;
    auto ctx = client->Context();
    grpc::Status status = client->stub().SubmitSweep(ctx.get(), req, &resp);
    if (!status.ok()) return Report(client->globals(), status, "submit");
    std::cout << resp.sweep_id() << "\n" << std::flush;
    std::cerr << "submitted " << one.name << ": " << resp.cells() << " cells";
    if (resp.cached_cells() > 0) {
      std::cerr << " (" << resp.cached_cells() << " done from the result cache)";
    }
    if (one.mode == SweepMode::kSearch) std::cerr << " (search: more as ranks are probed)";
    std::cerr << "\n";
    last_id = resp.sweep_id();
  }
  if (a.watch) return Watch(*client, last_id, a.reconnect);
  return kExitOk;
}

absl::StatusOr<v1::SweepInfo> GetSweep(Client* client, const std::string& id, int* exit_code) {
  v1::GetSweepRequest req;
  req.set_sweep_id(id);
  v1::GetSweepResponse resp;
  auto ctx = client->Context();
  grpc::Status status = client->stub().GetSweep(ctx.get(), req, &resp);
  if (!status.ok()) {
    *exit_code = Report(client->globals(), status, "status");
    return absl::UnknownError("reported");
  }
  return resp.sweep();
}

// Rows per QueryResults call unless --page-size says otherwise: every reply
// stays under a MB however large the sweep (about 73 bytes per row as
// columns for a dataset without a test split).
constexpr int kResultsPageSize = 10000;
constexpr int kMaxResultsPageSize = 100000;

// Every row `req` matches, a page at a time: `fn` gets each reply in turn,
// its rows in `rows`. The rows travel as columns (QueryResultsRequest.columns,
// far cheaper for both ends) and are turned back into rows on the fetching
// thread. The next page is asked for before `fn` runs on this one, so the
// server reads it while this process prints. Each reply is parsed onto its
// own arena, freed in one go once `fn` returns.
grpc::Status ForEachResultPage(Client* client, v1::QueryResultsRequest req,
                               absl::FunctionRef<void(const v1::QueryResultsResponse&)> fn,
                               int page_size = kResultsPageSize) {
  struct Page {
    grpc::Status status;
    std::unique_ptr<google::protobuf::Arena> arena;
    v1::QueryResultsResponse* reply = nullptr;
  };
  auto fetch = [client](v1::QueryResultsRequest r) {
    Page page;
    page.arena = std::make_unique<google::protobuf::Arena>();
    page.reply = google::protobuf::Arena::CreateMessage<v1::QueryResultsResponse>(page.arena.get());
    auto ctx = client->Context();
    page.status = client->stub().QueryResults(ctx.get(), r, page.reply);
    if (page.status.ok()) {
      absl::Status rows = RowsFromColumns(page.reply);
      if (!rows.ok()) {
        page.status = grpc::Status(grpc::StatusCode::INTERNAL,
                                   absl::StrCat("QueryResults reply: ", rows.message()));
      }
    }
    return page;
  };
  req.set_page_size(page_size);
  req.set_columns(true);
  std::future<Page> next = std::async(std::launch::async, fetch, req);
  while (true) {
    Page page = next.get();
    if (!page.status.ok()) return page.status;
    const std::string& token = page.reply->next_page_token();
    if (!token.empty()) {
      req.set_page_token(token);
      next = std::async(std::launch::async, fetch, req);
    }
    fn(*page.reply);
    if (token.empty()) return grpc::Status::OK;
  }
}

// Every row `req` matches, all in memory (for the table and the plot).
grpc::Status QueryAllRows(Client* client, const v1::QueryResultsRequest& req,
                          std::vector<v1::ResultRow>* rows, int page_size = kResultsPageSize) {
  return ForEachResultPage(
      client, req,
      [rows](const v1::QueryResultsResponse& page) {
        rows->insert(rows->end(), page.rows().begin(), page.rows().end());
      },
      page_size);
}

struct ResultsArgs {
  bool summary = false;
  bool include_invalid = false;  // also the rows a quarantine invalidated
  std::string sweep_id, group_by, format = "table", head, state;
  int page_size = kResultsPageSize;
  std::vector<int> ranks;
  std::vector<uint64_t> seeds;
};

int Results(Client* client, const ResultsArgs& a) {
  absl::StatusOr<OutputFormat> format = ParseOutputFormat(a.format);
  if (!format.ok()) return ReportLocal(format.status());
  if (a.page_size < 1 || a.page_size > kMaxResultsPageSize) {
    return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
        "--page-size: ", a.page_size, " is out of range; use 1 to ", kMaxResultsPageSize)));
  }
  v1::QueryResultsRequest req;
  req.set_sweep_id(a.sweep_id);
  req.set_head(a.head);
  for (int r : a.ranks) req.add_ranks(r);
  for (uint64_t s : a.seeds) req.add_seeds(s);
  if (!a.state.empty()) {
    absl::StatusOr<v1::CellState> state = ParseCellState(a.state);
    if (!state.ok()) return ReportLocal(state.status());
    req.set_state(*state);
  }
  if (a.summary) {
    req.set_group_by(v1::GROUP_BY_HEAD_RANK);
  } else if (!a.group_by.empty()) {
    if (a.group_by != "head,rank" && a.group_by != "rank,head") {
      return ReportLocal(absl::InvalidArgumentError(
          absl::StrCat("--group-by: \"", a.group_by, "\" is not supported; use head,rank")));
    }
    req.set_group_by(v1::GROUP_BY_HEAD_RANK);
  }
  if (a.include_invalid && req.group_by() != v1::GROUP_BY_UNSPECIFIED) {
    return ReportLocal(absl::InvalidArgumentError(
        "--include-invalid: invalid rows never count in groups or summaries; use it without "
        "--group-by and --summary"));
  }
  // With --include-invalid the rows of the query come first, then the
  // invalidated ones (state INVALID), in the order they were invalidated.
  std::vector<v1::QueryResultsRequest> queries = {req};
  if (a.include_invalid) {
    queries.push_back(req);
    queries.back().set_state(v1::CELL_STATE_INVALID);
  }
  if (req.group_by() == v1::GROUP_BY_UNSPECIFIED) {
    if (*format == OutputFormat::kTable) {
      std::vector<v1::ResultRow> rows;
      for (const v1::QueryResultsRequest& q : queries) {
        grpc::Status status = QueryAllRows(client, q, &rows, a.page_size);
        if (!status.ok()) return Report(client->globals(), status, "results");
      }
      std::cout << RenderTable(ResultRowsTable(rows));
      return kExitOk;
    }
    // CSV and JSON are printed page by page as the pages arrive. A call
    // that fails part way leaves the rows printed so far, and the exit code
    // says it failed.
    ResultRowsWriter writer(*format);
    std::string text;
    writer.Begin(&text);
    for (const v1::QueryResultsRequest& q : queries) {
      grpc::Status status =
          ForEachResultPage(client, q, [&](const v1::QueryResultsResponse& page) {
            for (const v1::ResultRow& row : page.rows()) writer.Add(row, &text);
            std::cout << text;
            text.clear();
          },
          a.page_size);
      if (!status.ok()) {
        std::cout.flush();
        return Report(client->globals(), status, "results");
      }
    }
    writer.End(&text);
    std::cout << text;
    return kExitOk;
  }
  v1::QueryResultsResponse resp;
  auto ctx = client->Context();
  grpc::Status status = client->stub().QueryResults(ctx.get(), req, &resp);
  if (!status.ok()) return Report(client->globals(), status, "results");
  if (a.summary) {
    switch (*format) {
      case OutputFormat::kJson: std::cout << SummaryJson(resp); break;
      case OutputFormat::kCsv: std::cout << RenderCsv(SummaryCsvTable(resp)); break;
      case OutputFormat::kTable: {
        const bool has_test = !resp.heads().empty() && resp.heads(0).has_test_split();
        std::cout << SummaryText(resp, has_test);
        break;
      }
    }
    return kExitOk;
  }
  std::vector<v1::ResultGroup> groups(resp.groups().begin(), resp.groups().end());
  // Every head of a sweep shares its dataset, so one says for all.
  const bool test_split = !resp.heads().empty() && resp.heads(0).has_test_split();
  switch (*format) {
    case OutputFormat::kJson: std::cout << ResultGroupsJson(groups, test_split); break;
    case OutputFormat::kCsv:
      std::cout << RenderCsv(ResultGroupsCsvTable(groups, test_split));
      break;
    case OutputFormat::kTable: {
      int code = kExitOk;
      absl::StatusOr<v1::SweepInfo> sweep = GetSweep(client, a.sweep_id, &code);
      if (!sweep.ok()) return code;
      const auto& d = sweep->spec().dataset();
      const bool has_test = d.kind() == v1::DATASET_KIND_POOL && d.test_size() > 0;
      std::cout << RenderTable(ResultGroupsTable(groups, has_test));
      break;
    }
  }
  return kExitOk;
}

struct PlotArgs {
  std::vector<std::string> sweep_ids;
  std::string output, metric = "error", split = "train";
};

// Fetches each sweep, its done rows and its summary (for the theory bounds)
// and writes the figure of RenderPlotSvg: SVG, or PNG for a name ending in
// ".png". Several sweeps share one figure, their heads labelled "NAME: HEAD".
int Plot(Client* client, const PlotArgs& a) {
  if (a.metric != "error" && a.metric != "exact_accuracy") {
    return ReportLocal(absl::InvalidArgumentError(
        absl::StrCat("--metric: \"", a.metric, "\" is not one of error, exact_accuracy")));
  }
  if (a.split != "train" && a.split != "test") {
    return ReportLocal(absl::InvalidArgumentError(
        absl::StrCat("--split: \"", a.split, "\" is not one of train, test")));
  }
  const bool png = absl::EndsWithIgnoreCase(a.output, ".png");
  if (!png && !absl::EndsWithIgnoreCase(a.output, ".svg")) {
    return ReportLocal(absl::InvalidArgumentError(
        absl::StrCat("-o: \"", a.output, "\" must end in .svg or .png")));
  }
  const bool test = a.split == "test";
  const bool several = a.sweep_ids.size() > 1;
  PlotInput in;
  std::vector<std::string> names;
  int max_seeds = 0;
  for (const std::string& id : a.sweep_ids) {
    int code = kExitOk;
    absl::StatusOr<v1::SweepInfo> sweep = GetSweep(client, id, &code);
    if (!sweep.ok()) return code;
    const SweepSpec spec = FromProto(sweep->spec());
    if (test && !(spec.dataset.kind == DatasetKind::kPool && spec.dataset.test_size > 0)) {
      return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
          "--split test: sweep ", id, " (", spec.name,
          ") has no test split; only pool datasets with test_size > 0 have one")));
    }
    v1::QueryResultsRequest req;
    req.set_sweep_id(id);
    req.set_state(v1::CELL_STATE_DONE);
    std::vector<v1::ResultRow> rows;
    grpc::Status status = QueryAllRows(client, req, &rows);
    if (!status.ok()) return Report(client->globals(), status, "plot");
    req.set_state(v1::CELL_STATE_UNSPECIFIED);
    req.set_group_by(v1::GROUP_BY_HEAD_RANK);
    v1::QueryResultsResponse summary;
    auto ctx = client->Context();
    status = client->stub().QueryResults(ctx.get(), req, &summary);
    if (!status.ok()) return Report(client->globals(), status, "plot");

    const int base = static_cast<int>(in.heads.size());
    for (int i = 0; i < static_cast<int>(spec.heads.size()); ++i) {
      const std::string label = HeadLabel(spec.heads[i]);
      in.heads.push_back({base + i, several ? absl::StrCat(spec.name, ": ", label) : label,
                          HeadHasRank(spec.heads[i]), spec.ranks});
    }
    for (const v1::ResultRow& row : rows) {
      if (!row.has_result()) continue;
      const v1::SplitMetrics& m = test ? row.result().test() : row.result().train();
      in.points.push_back({base + row.head_index(), row.rank(), row.seed(),
                           a.metric == "error" ? m.error() : m.exact_accuracy()});
    }
    const std::string prefix = several ? absl::StrCat(spec.name, ": ") : "";
    if (const int64_t lo = summary.facts().rank_lower_bound(); lo > 0) {
      in.bounds.push_back({lo, absl::StrCat(prefix, "lower bound ", lo)});
    }
    if (const int64_t hi = summary.facts().rank_upper_bound(); hi > 0) {
      in.bounds.push_back({hi, absl::StrCat(prefix, "upper bound ", hi)});
    }
    names.push_back(spec.name);
    max_seeds = std::max(max_seeds, static_cast<int>(SweepSeeds(spec).size()));
    in.caption.push_back(absl::StrCat("sweep ", id, " (", spec.name, "): ",
                                      PlotSubtitle(spec, test)));
    if (!several) {
      in.title = spec.name;
      in.subtitle = PlotSubtitle(spec, test);
      in.caption.back() = absl::StrCat("sweep ", id);
    }
  }
  if (in.points.empty()) {
    return ReportLocal(absl::InvalidArgumentError(
        absl::StrCat("plot: no done cell to plot yet in ", absl::StrJoin(a.sweep_ids, ", "))));
  }
  if (several) {
    in.title = absl::StrJoin(names, " vs ");
    in.subtitle = absl::StrCat(a.sweep_ids.size(), " sweeps, ", a.split, " split");
  }
  in.caption.push_back(PlotCriterion(a.metric, test, max_seeds));
  in.y_label = a.metric == "error"
                   ? absl::StrCat(a.split, " error (1 - exact-sequence accuracy)")
                   : absl::StrCat(a.split, " exact-sequence accuracy");
  std::string bytes = RenderPlotSvg(in);
  if (png) {
    absl::StatusOr<std::string> rendered = RenderSvgToPng(bytes);
    if (!rendered.ok()) return ReportLocal(rendered.status());
    bytes = *std::move(rendered);
  }
  std::ofstream out(a.output, std::ios::binary | std::ios::trunc);
  out << bytes;
  out.close();
  if (!out) {
    return ReportLocal(absl::InvalidArgumentError(absl::StrCat("-o: cannot write ", a.output)));
  }
  std::cerr << "wrote " << a.output << " (" << in.points.size() << " points)\n";
  return kExitOk;
}

// `ranksweep workers quarantine WORKER [--since TIME]`.
int Quarantine(Client* client, const std::string& worker_id, const std::string& since) {
  v1::QuarantineWorkerRequest req;
  req.set_worker_id(worker_id);
  if (!since.empty()) {
    absl::Time t;
    int64_t seconds = 0;
    std::string error;
    if (absl::SimpleAtoi(since, &seconds) && seconds >= 0) {
      req.set_since_unix_ms(seconds * 1000);
    } else if (absl::ParseTime(absl::RFC3339_full, since, &t, &error)) {
      req.set_since_unix_ms(absl::ToUnixMillis(t));
    } else {
      return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
          "--since: \"", since.substr(0, 64),
          "\" is not an RFC 3339 time (2026-12-01T13:00:00Z) or Unix seconds >= 0")));
    }
    if (req.since_unix_ms() < 0) {
      return ReportLocal(absl::InvalidArgumentError("--since: must be 1970 or later"));
    }
  }
  v1::QuarantineWorkerResponse resp;
  auto ctx = client->Context();
  grpc::Status status = client->stub().QuarantineWorker(ctx.get(), req, &resp);
  if (!status.ok()) return Report(client->globals(), status, "workers quarantine");
  std::cout << "quarantine " << resp.quarantine_id() << " of worker " << worker_id << ": "
            << resp.results_invalidated() << " results and " << resp.copies_invalidated()
            << " cached copies invalid, " << resp.cells_reset() << " cells pending again";
  if (resp.sweeps_reopened_size() > 0) {
    std::cout << ", running again:";
    for (const std::string& id : resp.sweeps_reopened()) std::cout << " " << id;
  }
  std::cout << "\n";
  return kExitOk;
}

// The first argument that is neither an option nor the value of a global
// option: where a subcommand belongs.
std::optional<std::string> FirstPositional(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--addr" || arg == "--timeout" || arg == "--tls-ca") {
      ++i;
      continue;
    }
    if (!arg.empty() && arg[0] == '-') continue;
    return arg;
  }
  return std::nullopt;
}

int Main(int argc, char** argv) {
  // `--max_steps` reads as `--max-steps` (common/flag_names.h).
  std::vector<std::string> dashed = DashFlagNames(argc, argv);
  std::vector<char*> dashed_argv = ArgvOf(dashed);
  argc = static_cast<int>(dashed.size());
  argv = dashed_argv.data();
  CLI::App app{"ranksweep: submit rank sweeps to the coordinator and query their results"};
  app.footer(kFooter);
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version", [] {
    std::string text = VersionText("ranksweep", RANKSWEEP_BUILD_ID);
    text.pop_back();  // CLI11 ends the line itself
    return text;
  }, "Print the version and build id and exit");
  Globals g;
  g.addr = DefaultAddr();
  app.add_option("--addr", g.addr, "Coordinator address host:port (env RANKSWEEP_ADDR)")
      ->capture_default_str();
  app.add_option("--timeout", g.timeout_seconds, "Seconds per call; 0 = no deadline")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  if (const char* token = std::getenv("RANKSWEEP_TOKEN"); token != nullptr) g.token = token;
  app.add_option("--tls-ca", g.tls_ca,
                 "PEM file of the CA that signed the coordinator's certificate; enables TLS");

  int exit_code = kExitOk;
  std::function<int(Client*)> action;
  bool action_needs_addr = true;  // false for what never calls the coordinator

  // ---- submit
  SubmitArgs sa;
  CLI::App* submit = app.add_subcommand(
      "submit", "Submit a sweep; prints its id on stdout and the cell count on stderr");
  submit->footer(
      "Flags override the fields of the -f file. Heads: KIND[:PART]... with PART a feature map\n"
      "(elu1 relu_eps softplus exp favor), a construction (rank1 indicator softmax_exact), xN\n"
      "(num_heads) or h=W1/W2 (hidden widths), e.g. --heads kernel:elu1,softmax,"
      "multihead_kernel:elu1:x4\n\n" +
      std::string(kFooter));
  submit->add_option("-f,--file", sa.file, "Spec file, YAML or JSON (spec.h field names; - = stdin)");
  submit->add_option("--preset", sa.preset,
                     "A named sweep (see `ranksweep presets`); may submit several sweeps, "
                     "one id per line");
  submit->add_option("--scale", sa.scale,
                     "Shrink the preset: 0 < S <= 1 (fewer ranks, seeds, steps, queries, pool "
                     "sizes; --dry-run shows what it resolved to)")
      ->capture_default_str();
  submit->add_option("--name", sa.name, "Sweep name, 1..128 of [A-Za-z0-9._-]");
  submit->add_option("--dataset", sa.dataset, "exhaustive | witness | pool");
  submit->add_option("--m", sa.m, "Token dimension m, 1..64");
  submit->add_option("--seq-len", sa.seq_len, "Tokens per sequence N, 1..64");
  submit->add_flag("--final-query-only", sa.final_query_only, "Score only the last position");
  submit->add_option("--data-seed", sa.data_seed, "Dataset seed");
  submit->add_option("--code-weight", sa.code_weight, "witness: codeword weight w, 1..m");
  submit->add_option("--max-overlap", sa.max_overlap,
                     "witness: most coordinates two codewords share, 0..w-1");
  submit->add_option("--num-queries", sa.num_queries,
                     "witness: codewords used as queries; 0 = the whole code (can be large: "
                     "--dry-run shows the size)");
  submit->add_option("--weight", sa.weight, "pool: token weight, 0..m (0 = Bernoulli tokens)");
  submit->add_option("--bernoulli-p", sa.bernoulli_p, "pool: Bernoulli probability, (0, 1]");
  submit->add_option("--pool-size", sa.pool_size, "pool: distinct token vectors drawn");
  submit->add_option("--test-pool-share", sa.test_pool_share,
                     "pool: share of the vectors held out for the test split, [0, 1)");
  submit->add_option("--train-size", sa.train_size, "pool: train sequences");
  submit->add_option("--test-size", sa.test_size, "pool: test sequences; 0 = no test split");
  submit->add_option("--hard-share", sa.hard_share, "pool: share of hard triples, [0, 1]");
  submit->add_option("--heads", sa.heads, "Comma-separated heads, e.g. kernel:elu1,softmax")
      ->delimiter(',');
  submit->add_option("--ranks", sa.ranks, "Comma-separated ranks, e.g. 1,2,4,8")->delimiter(',');
  submit->add_option("--seeds", sa.seed_count, "Number of seeds: 0..N-1");
  submit->add_option("--seed-list", sa.seed_list, "Explicit comma-separated seeds")
      ->delimiter(',');
  submit->add_option("--max-steps", sa.max_steps, "Training steps per seed");
  submit->add_option("--lr", sa.lr, "Adam learning rate");
  submit->add_option("--batch-size", sa.batch_size, "Batch size; 0 = full batch");
  submit->add_option("--eval-every", sa.eval_every, "Evaluate every E steps");
  submit->add_option("--early-stop-evals", sa.early_stop_evals,
                     "Stop after k exact evaluations in a row; 0 = never");
  submit->add_option("--loss", sa.loss, "mse | ce");
  submit->add_option("--schedule", sa.schedule, "Learning-rate schedule: constant | cosine");
  submit->add_option("--warmup-steps", sa.warmup_steps,
                     "Linear learning-rate warm-up over the first W steps; 0 = none");
  submit->add_option("--priority", sa.priority, "-100..100, higher runs first");
  submit->add_option("--mode", sa.mode,
                     "grid (every rank) | search (bisection for each head's transition rank)");
  submit->add_flag("--no-cache", sa.no_cache,
                   "Train every cell, even those already trained by this build");
  submit->add_flag("--watch", sa.watch, "Follow the sweep after submitting (as `watch`)");
  AddReconnectOption(submit, &sa.reconnect);
  submit->add_flag("--dry-run", sa.dry_run,
                   "Print the spec as JSON (an array for several sweeps) instead of submitting; "
                   "the dataset's size and a memory estimate go to stderr");
  submit->callback([&] {
    action_needs_addr = !sa.dry_run;
    action = [&](Client* c) { return Submit(c, sa, submit); };
  });

  // ---- presets
  CLI::App* presets = app.add_subcommand(
      "presets", "List the named sweeps `submit --preset` knows (examples/presets/)");
  presets->footer(kFooter);
  presets->callback([&] {
    action_needs_addr = false;
    action = [&](Client*) {
      std::cout << PresetsListText();
      return static_cast<int>(kExitOk);
    };
  });

  // ---- list
  std::string list_state;
  int list_limit = 0;
  CLI::App* list = app.add_subcommand("list", "List sweeps, newest first");
  list->footer(kFooter);
  list->add_option("--state", list_state, "running | done | failed | cancelled");
  list->add_option("--limit", list_limit, "At most this many; 0 = server default (100)");
  list->callback([&] {
    action = [&](Client* c) {
      v1::ListSweepsRequest req;
      if (!list_state.empty()) {
        absl::StatusOr<v1::SweepState> state = ParseSweepState(list_state);
        if (!state.ok()) return ReportLocal(state.status());
        req.set_state(*state);
      }
      req.set_limit(list_limit);
      v1::ListSweepsResponse resp;
      auto ctx = c->Context();
      grpc::Status status = c->stub().ListSweeps(ctx.get(), req, &resp);
      if (!status.ok()) return Report(c->globals(), status, "list");
      std::vector<v1::SweepInfo> sweeps(resp.sweeps().begin(), resp.sweeps().end());
      std::cout << RenderTable(SweepsTable(sweeps, absl::LocalTimeZone()));
      return static_cast<int>(kExitOk);
    };
  });

  // ---- status
  std::string status_id;
  CLI::App* status_cmd = app.add_subcommand("status", "Show one sweep: counts, state, failures");
  status_cmd->footer(kFooter);
  status_cmd->add_option("sweep", status_id, "Sweep id")->required();
  status_cmd->callback([&] {
    action = [&](Client* c) {
      int code = kExitOk;
      absl::StatusOr<v1::SweepInfo> sweep = GetSweep(c, status_id, &code);
      if (!sweep.ok()) return code;
      std::cout << SweepStatusText(*sweep, absl::LocalTimeZone());
      return static_cast<int>(kExitOk);
    };
  });

  // ---- watch
  std::string watch_id;
  CLI::App* watch = app.add_subcommand(
      "watch", "Follow a sweep until it ends; exit 0 if DONE, 4 if FAILED/CANCELLED");
  watch->footer(kFooter);
  watch->add_option("sweep", watch_id, "Sweep id")->required();
  double watch_reconnect = kDefaultReconnectSeconds;
  AddReconnectOption(watch, &watch_reconnect);
  watch->callback(
      [&] { action = [&](Client* c) { return Watch(*c, watch_id, watch_reconnect); }; });

  // ---- results
  ResultsArgs ra;
  CLI::App* results = app.add_subcommand("results", "Per-seed results or per-(head, rank) groups");
  results->footer(kFooter);
  results->add_option("sweep", ra.sweep_id, "Sweep id")->required();
  results->add_option("--group-by", ra.group_by, "head,rank: mean/std/min/max/n per group");
  results->add_flag("--summary", ra.summary,
                    "Per head: error mean ± 95% interval per rank, completeness, the "
                    "transition rank and the dataset's theory bounds");
  results->add_option("--format", ra.format, "table | csv | json")->capture_default_str();
  results->add_option("--head", ra.head, "Only this head label, e.g. kernel/elu1");
  results->add_option("--rank", ra.ranks, "Only these ranks (comma-separated)")->delimiter(',');
  results->add_option("--seed", ra.seeds, "Only these seeds (comma-separated)")->delimiter(',');
  results->add_option("--state", ra.state, "done | failed (default both) | invalid");
  results->add_flag("--include-invalid", ra.include_invalid,
                    "Also the rows a quarantine invalidated (state INVALID), after the others");
  results->add_option("--page-size", ra.page_size,
                      "Per-seed rows per call, 1-100000; csv and json print each page as it "
                      "arrives")
      ->capture_default_str();
  results->callback([&] { action = [&](Client* c) { return Results(c, ra); }; });

  // ---- plot
  PlotArgs pa;
  CLI::App* plot = app.add_subcommand(
      "plot", "Write an SVG or PNG of error (or exact accuracy) against rank, one line per head "
              "of each sweep");
  plot->footer(kFooter);
  plot->add_option("sweep", pa.sweep_ids, "Sweep ids: several share one figure")->required();
  plot->add_option("-o,--output", pa.output, "File to write: NAME.svg or NAME.png")->required();
  plot->add_option("--metric", pa.metric, "error | exact_accuracy")->capture_default_str();
  plot->add_option("--split", pa.split, "train | test (pool datasets)")->capture_default_str();
  plot->callback([&] { action = [&](Client* c) { return Plot(c, pa); }; });

  // ---- cancel
  std::string cancel_id;
  CLI::App* cancel = app.add_subcommand("cancel", "Cancel a sweep's unfinished cells");
  cancel->footer(kFooter);
  cancel->add_option("sweep", cancel_id, "Sweep id")->required();
  cancel->callback([&] {
    action = [&](Client* c) {
      v1::CancelSweepRequest req;
      req.set_sweep_id(cancel_id);
      v1::CancelSweepResponse resp;
      auto ctx = c->Context();
      grpc::Status status = c->stub().CancelSweep(ctx.get(), req, &resp);
      if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
        // Already ended: what the user asked for holds, so this is no error.
        int code = kExitOk;
        absl::StatusOr<v1::SweepInfo> sweep = GetSweep(c, cancel_id, &code);
        if (!sweep.ok()) return code;
        if (sweep->state() != v1::SWEEP_STATE_RUNNING) {
          std::cout << "sweep " << cancel_id << " has already ended "
                    << SweepStateName(sweep->state()) << "; nothing to cancel\n";
          return static_cast<int>(kExitOk);
        }
      }
      if (!status.ok()) return Report(c->globals(), status, "cancel");
      std::cout << "cancelled " << resp.cells_cancelled() << " cells of " << cancel_id << "\n";
      return static_cast<int>(kExitOk);
    };
  });

  // ---- workers
  CLI::App* workers = app.add_subcommand("workers", "List registered workers");
  workers->footer(kFooter);
  workers->callback([&] {
    if (workers->got_subcommand("quarantine")) return;  // its own action
    action = [&](Client* c) {
      v1::ListWorkersResponse resp;
      auto ctx = c->Context();
      grpc::Status status = c->stub().ListWorkers(ctx.get(), v1::ListWorkersRequest(), &resp);
      if (!status.ok()) return Report(c->globals(), status, "workers");
      std::vector<v1::WorkerInfo> list(resp.workers().begin(), resp.workers().end());
      std::cout << RenderTable(WorkersTable(list, absl::Now()));
      return static_cast<int>(kExitOk);
    };
  });
  std::string quarantine_worker, quarantine_since;
  CLI::App* quarantine = workers->add_subcommand(
      "quarantine",
      "Admin: invalidate a worker's results (and the cache's copies of them) and train their "
      "cells again");
  quarantine->footer(kFooter);
  quarantine->add_option("worker", quarantine_worker, "Worker id")->required();
  quarantine->add_option("--since", quarantine_since,
                         "Only results finished at or after this time: RFC 3339 "
                         "(2026-12-01T13:00:00Z) or Unix seconds (default: all)");
  quarantine->callback([&] {
    action = [&](Client* c) { return Quarantine(c, quarantine_worker, quarantine_since); };
  });

  // ---- health
  CLI::App* health = app.add_subcommand(
      "health", "Check the coordinator's grpc.health.v1 status; exit 0 when SERVING");
  health->footer(kFooter);
  health->callback([&] {
    action = [&](Client* c) {
      // The standard health service through a generic call, so no extra
      // generated code is needed: an empty HealthCheckRequest (service "")
      // and a HealthCheckResponse whose field 1 is SERVING (1).
      grpc::GenericStub stub(c->channel());
      auto ctx = c->Context();
      grpc::Slice empty{std::string()};
      grpc::ByteBuffer request(&empty, 1), response;
      std::promise<grpc::Status> done;
      stub.UnaryCall(ctx.get(), "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                     &response, [&](grpc::Status s) { done.set_value(std::move(s)); });
      grpc::Status status = done.get_future().get();
      if (!status.ok()) return Report(c->globals(), status, "health");
      std::vector<grpc::Slice> slices;
      (void)response.Dump(&slices);
      std::string bytes;
      for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
      const bool serving = bytes.size() == 2 && bytes[0] == 0x08 && bytes[1] == 0x01;
      std::cout << (serving ? "SERVING" : "NOT_SERVING") << "\n";
      return serving ? static_cast<int>(kExitOk) : static_cast<int>(kExitUnreachable);
    };
  });

  // ---- ui (client/ui/)
  ui::UiFlags ui_flags;
  ui::AddUiSubcommand(&app, &ui_flags)->callback([&] {
    action = [&](Client* c) {
      return ui::RunUi(ui_flags, {c->channel(), g.addr, g.token, g.timeout_seconds});
    };
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (app.get_subcommands().empty()) {
      if (const std::optional<std::string> word = FirstPositional(argc, argv)) {
        std::vector<std::string> names;
        for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
        if (std::find(names.begin(), names.end(), *word) == names.end()) {
          std::cerr << "ranksweep: unknown subcommand \"" << *word << "\""
                    << DidYouMeanSuffix(*word, names) << " (ranksweep --help lists them)\n";
          return kExitUsage;
        }
      }
    }
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (!action) return kExitUsage;
  if (absl::Status s = CheckAddressHasPort(g.addr, "--addr"); !s.ok() && action_needs_addr) {
    return ReportLocal(s);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!g.tls_ca.empty()) {
    std::ifstream in(g.tls_ca, std::ios::binary);
    if (!in) {
      std::cerr << "ranksweep: --tls-ca: cannot read " << g.tls_ca << "\n";
      return kExitUsage;
    }
    std::ostringstream pem;
    pem << in.rdbuf();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pem.str();
    credentials = grpc::SslCredentials(ssl);
  }
  Client client(g, credentials);
  exit_code = action(&client);
  return exit_code;
}

}  // namespace
}  // namespace ranksweep::client

int main(int argc, char** argv) { return ranksweep::client::Main(argc, argv); }
