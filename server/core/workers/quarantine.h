// Quarantine: taking back the results of a worker that can no longer be
// trusted (a GPU with silent memory errors in a shared pool).
//
// A quarantined result is not deleted. Its `results` row (and packed copy)
// moves to `invalid_results` with who invalidated it, when and under which
// quarantine (schema version 10), so every reader of `results` — row and
// group queries, summaries, the transition rank, the result cache — stops
// seeing it without a filter of its own, and the cell can take a fresh
// result under a new lease (`results` keeps one row per cell). Copies the
// result cache served of such a row are invalidated with it, and their
// cells re-run too. The groups (`result_groups`) of every touched (sweep,
// head, rank) are summed up again from the rows that remain.
//
// These functions run inside the caller's transaction (Store::Write or
// Store::Read) and write nothing outside it; Coordinator::Quarantine and
// Coordinator::Query call them.
//
// Thread-safety: as the Connection they are given.
#ifndef RANKSWEEP_SERVER_CORE_WORKERS_QUARANTINE_H_
#define RANKSWEEP_SERVER_CORE_WORKERS_QUARANTINE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/store.h"
#include "server/core/types.h"

namespace ranksweep::server {

// One cell a quarantine touched, for the caller's events and log.
struct QuarantinedCell {
  std::string sweep_id;
  int64_t cell_id = 0;
  bool reset = false;  // back to pending; false: its sweep was cancelled
  bool released = false;  // a lease the worker held, not a result: released
};

// Invalidates, in the open write transaction of `c`, every DONE row that
// `worker_id` trained (not copied) finishing at or after `since_ms`, and
// every copy of those rows, as the file comment says; records the
// quarantine (who: `by`, when: `now_ms`) in `quarantines`; returns the
// counts and fills `cells` with the cells touched. NotFound for a worker
// that never registered; InvalidArgument for a negative `since_ms`.
// The quarantine holds: the worker is marked (workers.quarantined_ms =
// `now_ms`), so that CheckNotQuarantined (worker_registry.h) refuses it
// until LiftQuarantine, and the cells it holds now are released (pending,
// their attempt given back). A reset cell's attempt count starts again at
// 0: the invalidated training does not count against --max-attempts.
// With `hold_token`, the token that registered the worker (workers.owner) is
// held too (table held_tokens, schema version 16): every worker it
// registered, or registers from now on, is refused as a quarantined one is,
// and the cells they hold now are released as well; their results stay
// valid. FailedPrecondition for a worker bound to no token.
absl::StatusOr<QuarantineOutcome> QuarantineIn(Connection& c, const std::string& worker_id,
                                               int64_t since_ms, const std::string& by,
                                               int64_t now_ms, bool hold_token,
                                               std::vector<QuarantinedCell>* cells);

// Lifts the hold of a quarantine on `worker_id`, and on the token its
// quarantine held: returns whether either was held; NotFound for an unknown
// worker.
absl::StatusOr<bool> LiftQuarantine(Connection& c, const std::string& worker_id);

// The invalidated rows of `sweep_id` in the order they were invalidated,
// from after `after_id` (an invalid_results id; 0 = from the start), that
// `keep` accepts (head_index, rank, seed), to `sink`: at most `page_size`
// (0 = all). Each row has state kInvalid, its result as it was stored, its
// head labelled from `head_labels` (the sweep's, by head index: the stored
// result keeps the index only) and in `failure` who invalidated it and
// when. `*next_after` is set to the id to continue after when more rows
// match, else 0.
absl::Status ReadInvalidRows(Connection& c, const std::string& sweep_id,
                             const std::vector<std::string>& head_labels,
                             const std::function<bool(int, int, uint64_t)>& keep,
                             int64_t page_size, int64_t after_id, RowSink& sink,
                             int64_t* next_after);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_WORKERS_QUARANTINE_H_
