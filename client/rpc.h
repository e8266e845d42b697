// The CLI's side of the SweepService: the channel (credentials, message
// size, reconnect backoff), per-call contexts (deadline, bearer token), the
// report of a failed call as an exit code, and the calls more than one
// command makes (GetSweep, QueryResults a page at a time).
//
// Errors: a failed call is printed on stderr ("ranksweep: WHAT: MESSAGE")
// and its exit code (format.h) returned. Thread-safety: a Client may be used
// from several threads at once (gRPC stubs are thread-safe); ForEachResultPage
// fetches the next page on a thread of its own.
#ifndef RANKSWEEP_CLIENT_RPC_H_
#define RANKSWEEP_CLIENT_RPC_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "ranksweep/v1/ranksweep.grpc.pb.h"

namespace ranksweep::client {

// The global flags every command shares.
struct Globals {
  std::string addr;
  double timeout_seconds = 30;
  std::string token;   // sent as "authorization: Bearer TOKEN" when set
  std::string tls_ca;  // PEM file of the CA to trust; empty = plaintext
};

// RANKSWEEP_ADDR when set and not empty, else 127.0.0.1:50051.
std::string DefaultAddr();

// Plaintext without --tls-ca; TLS trusting the CA of that PEM file with it.
// InvalidArgument naming --tls-ca when the file cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const std::string& tls_ca);

// One channel to the coordinator and its stub. Owns both.
class Client {
 public:
  Client(Globals g, std::shared_ptr<grpc::ChannelCredentials> credentials);

  const Globals& globals() const { return g_; }
  v1::SweepService::Stub& stub() { return *stub_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // A context with the bearer token and, when `with_deadline`, the --timeout
  // deadline (none when --timeout is 0).
  std::unique_ptr<grpc::ClientContext> Context(bool with_deadline = true) const;

 private:
  Globals g_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> stub_;
};

// Prints a failed call's message and returns its exit code.
int Report(const Globals& g, const grpc::Status& status, const std::string& what);
// Prints a local error (a bad flag, an invalid spec) and returns its exit code.
int ReportLocal(const absl::Status& status);

// GetSweep; on failure reports it (as "status"), sets *exit_code and
// returns an error that needs no further report.
absl::StatusOr<v1::SweepInfo> GetSweep(Client* client, const std::string& id, int* exit_code);

// Rows per QueryResults call unless --page-size says otherwise: every reply
// stays under a MB however large the sweep (about 73 bytes per row as
// columns for a dataset without a test split).
constexpr int kResultsPageSize = 10000;
constexpr int kMaxResultsPageSize = 100000;
// Rows per call when they carry their learning curves (`curves`): 100 rows
// of the longest curve (20,000 points, about 21 bytes each) stay under the
// 64 MB a reply may have; a typical curve of 60-600 points makes a page of
// 0.2-1.5 MB.
constexpr int kCurvesPageSize = 100;

// How ForEachResultPage hands over a page's rows: in `rows`, or as they
// came, in `columns` (checked with proto/columns.h's CheckColumns) for a
// reader that goes through them once. A coordinator that predates columns
// sends rows either way.
enum class PageRows { kRows, kColumns };

// Every row `req` matches, a page at a time: `fn` gets each reply in turn.
// The rows travel as columns (QueryResultsRequest.columns, far cheaper for
// both ends); with PageRows::kRows they are turned back into rows on the
// fetching thread. The next page is asked for before `fn` runs on this one,
// so the server reads it while this process prints. Each reply is parsed
// onto its own arena, freed in one go once `fn` returns.
grpc::Status ForEachResultPage(Client* client, v1::QueryResultsRequest req,
                               absl::FunctionRef<void(const v1::QueryResultsResponse&)> fn,
                               int page_size = kResultsPageSize,
                               PageRows as = PageRows::kRows);

// Every row `req` matches, all in memory (for the table and the plot).
grpc::Status QueryAllRows(Client* client, const v1::QueryResultsRequest& req,
                          std::vector<v1::ResultRow>* rows, int page_size = kResultsPageSize);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_RPC_H_
