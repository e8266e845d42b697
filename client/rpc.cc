#include "client/rpc.h"

#include <cstdlib>
#include <fstream>
#include <future>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/format.h"
#include "client/hints.h"
#include "google/protobuf/arena.h"
#include "proto/columns.h"
#include "proto/reply_arena.h"

namespace ranksweep::client {
namespace {

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

}  // namespace

std::string DefaultAddr() {
  const char* env = std::getenv("RANKSWEEP_ADDR");
  return env != nullptr && *env != '\0' ? env : "127.0.0.1:50051";
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const std::string& tls_ca) {
  if (tls_ca.empty()) return grpc::InsecureChannelCredentials();
  std::ifstream in(tls_ca, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--tls-ca: cannot read ", tls_ca));
  std::ostringstream pem;
  pem << in.rdbuf();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem.str();
  return grpc::SslCredentials(ssl);
}

Client::Client(Globals g, std::shared_ptr<grpc::ChannelCredentials> credentials)
    : g_(std::move(g)),
      channel_(grpc::CreateCustomChannel(g_.addr, std::move(credentials), ChannelArgs())),
      stub_(v1::SweepService::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> Client::Context(bool with_deadline) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (with_deadline && g_.timeout_seconds > 0) {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(g_.timeout_seconds)));
  }
  if (!g_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + g_.token);
  return ctx;
}

int Report(const Globals& g, const grpc::Status& status, const std::string& what) {
  const int code = ExitCodeForStatusCode(static_cast<int>(status.error_code()));
  if (code == kExitUnreachable) {
    std::cerr << "ranksweep: " << what << ": coordinator at " << g.addr
              << " unreachable: " << status.error_message() << "\n";
  } else {
    std::cerr << "ranksweep: " << what << ": " << WithEnumSuggestion(status.error_message())
              << "\n";
  }
  return code;
}

int ReportLocal(const absl::Status& status) {
  std::cerr << "ranksweep: " << WithEnumSuggestion(std::string(status.message())) << "\n";
  return ExitCodeForStatusCode(static_cast<int>(status.code()));
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

grpc::Status ForEachResultPage(Client* client, v1::QueryResultsRequest req,
                               absl::FunctionRef<void(const v1::QueryResultsResponse&)> fn,
                               int page_size, PageRows as) {
  struct Page {
    grpc::Status status;
    // A page of many rows is megabytes of lists: ReplyArena keeps their
    // parse to few page faults.
    std::unique_ptr<ReplyArena> arena;
    v1::QueryResultsResponse* reply = nullptr;
  };
  auto fetch = [client, as](v1::QueryResultsRequest r) {
    Page page;
    page.arena = std::make_unique<ReplyArena>();
    page.reply =
        google::protobuf::Arena::CreateMessage<v1::QueryResultsResponse>(page.arena->get());
    auto ctx = client->Context();
    page.status = client->stub().QueryResults(ctx.get(), r, page.reply);
    if (page.status.ok()) {
      absl::Status rows = as == PageRows::kRows ? RowsFromColumns(page.reply)
                                                : CheckColumns(page.reply->columns());
      if (!rows.ok()) {
        page.status = grpc::Status(grpc::StatusCode::INTERNAL,
                                   absl::StrCat("QueryResults reply: ", rows.message()));
      }
    }
    return page;
  };
  req.set_page_size(page_size);
  // Curves come with rows only (QueryResultsRequest.curves).
  req.set_columns(!req.curves());
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

grpc::Status QueryAllRows(Client* client, const v1::QueryResultsRequest& req,
                          std::vector<v1::ResultRow>* rows, int page_size) {
  return ForEachResultPage(
      client, req,
      [rows](const v1::QueryResultsResponse& page) {
        rows->insert(rows->end(), page.rows().begin(), page.rows().end());
      },
      page_size);
}

}  // namespace ranksweep::client
