// The coordinator's read side: sweeps (GetSweep, ListSweeps, SweepOwner),
// workers (ListWorkers) and results (Query), read on the store's read
// connection, so that they never wait for writes nor hold them up. The
// Coordinator serves its read methods from one of these; their contracts
// (arguments, errors) are those coordinator.h states.
//
// Thread-safety: every method is safe to call concurrently.
#ifndef RANKSWEEP_SERVER_CORE_RESULTS_RESULT_QUERIES_H_
#define RANKSWEEP_SERVER_CORE_RESULTS_RESULT_QUERIES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/clock.h"
#include "server/core/sweeps/spec_cache.h"
#include "server/core/store.h"
#include "server/core/types.h"

namespace ranksweep::server {

namespace result_reads {
struct CellFilter;
}  // namespace result_reads

class SweepQueries {
 public:
  // `store`, `clock` and `specs` are not owned and must outlive this.
  // `lease_ms`: a worker seen within three of them is alive.
  // `two_thread_query_rows`: CoordinatorOptions::two_thread_query_rows.
  SweepQueries(Store* store, const Clock* clock, SpecCache* specs, int64_t lease_ms,
               int64_t two_thread_query_rows)
      : store_(store),
        clock_(clock),
        specs_(specs),
        lease_ms_(lease_ms),
        two_thread_query_rows_(two_thread_query_rows) {}

  absl::StatusOr<SweepInfo> GetSweep(const std::string& sweep_id);
  absl::StatusOr<std::vector<SweepInfo>> ListSweeps(std::optional<SweepState> state, int limit,
                                                    const std::optional<std::string>& owner);
  absl::StatusOr<std::string> SweepOwner(const std::string& sweep_id);
  absl::StatusOr<int64_t> ResultsVersion(const std::string& sweep_id);
  absl::StatusOr<std::vector<WorkerInfo>> ListWorkers();
  absl::StatusOr<std::map<CellState, int64_t>> CountCellsByState();
  absl::StatusOr<std::map<SweepState, int64_t>> CountSweepsByState();
  absl::StatusOr<QueryOutcome> Query(const ResultQuery& query);
  absl::StatusOr<QueryOutcome> Query(const ResultQuery& query, RowSink& sink);

 private:
  absl::StatusOr<SweepInfo> LoadSweep(Connection& c, const std::string& sweep_id);
  // Every finished row of the query's sweep, its column blocks of the
  // sink's layout in their places (result_blocks.h) and rows elsewhere.
  absl::Status ReadRowsAndBlocks(Connection& c, const ResultQuery& query,
                                 const result_reads::CellFilter& filter,
                                 const std::vector<std::string>& labels, int64_t first_result,
                                 int64_t last_result, RowSink& sink, QueryOutcome* out);

  Store* const store_;
  const Clock* const clock_;
  SpecCache* const specs_;
  const int64_t lease_ms_;
  const int64_t two_thread_query_rows_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_RESULTS_RESULT_QUERIES_H_
