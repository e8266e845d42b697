// Managing sweeps after they are submitted: a note, tags, a new name,
// archiving (hidden from lists, kept), deleting (rows gone), and retrying a
// sweep's failed or cancelled cells. Knows nothing of gRPC or of who calls:
// the service adapter (server/service/sweep_admin_service.h) checks the
// caller's role and ownership first.
//
// Notes, tags and the archived mark live in their own tables (sweep_notes,
// sweep_tags: schema migration 13); a retry and a delete change cells and
// results in one transaction each, the store's contract (store.h) kept: each
// function starts from nothing whenever it runs.
//
// Errors: InvalidArgument naming the field and its allowed range; NotFound
// for an unknown sweep; FailedPrecondition for a delete of a running sweep,
// a delete whose confirmation is not the sweep id, or a retry of a search
// sweep; the store's errors otherwise.
//
// Thread-safety: safe from many threads (the store serializes writes).
#ifndef RANKSWEEP_SERVER_CORE_SWEEPS_SWEEP_ADMIN_H_
#define RANKSWEEP_SERVER_CORE_SWEEPS_SWEEP_ADMIN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/coordinator.h"
#include "server/core/store.h"
#include "server/core/types.h"

namespace ranksweep::server {

// What people wrote about a sweep.
struct SweepNotes {
  std::string note;               // "" = none
  std::vector<std::string> tags;  // sorted, distinct
  bool archived = false;
};

// A change to a sweep's name and notes; what is unset stays as it is.
struct SweepUpdate {
  std::optional<std::string> name;  // 1..128 chars of [A-Za-z0-9._-]
  std::optional<std::string> note;  // 0..4096 bytes; "" clears it
  std::vector<std::string> add_tags;     // each 1..64 chars of [A-Za-z0-9._:-]
  std::vector<std::string> remove_tags;  // absent ones are ignored
  std::optional<bool> archived;
};

struct ManagedSweepInfo {
  SweepInfo sweep;
  SweepNotes notes;
};

// Which sweeps List() returns.
struct SweepFilter {
  std::optional<SweepState> state;      // unset: all
  int limit = 0;                        // 0: 100; 1..10000
  std::string tag;                      // "": any
  std::string search;                   // "": any; else a case-insensitive substring of the
                                        // id, name, owner, note or a tag
  bool include_archived = false;
  std::optional<std::string> owner;     // set: only this owner's sweeps
};

struct DeleteOutcome {
  int64_t cells_deleted = 0;
  int64_t results_deleted = 0;
};

inline constexpr int kMaxNoteBytes = 4096;
inline constexpr int kMaxTagLength = 64;
inline constexpr int kMaxTags = 32;
inline constexpr int kMaxListLimit = 10000;

class SweepAdmin {
 public:
  // Neither is owned; both must outlive this object.
  SweepAdmin(Store* store, Coordinator* coordinator);

  // Applies `update` in one transaction; returns the notes as they are now.
  // InvalidArgument naming "name", "note", "tags[i]" or "tags" (more than
  // kMaxTags) with the allowed range; NotFound for an unknown sweep.
  absl::StatusOr<SweepNotes> Update(const std::string& sweep_id, const SweepUpdate& update);

  // The sweep's notes; NotFound for an unknown sweep.
  absl::StatusOr<SweepNotes> Notes(const std::string& sweep_id);

  // Deletes the sweep and every row of it (cells, results, groups, invalid
  // rows, notes, tags). `confirm` must equal `sweep_id` (FailedPrecondition
  // otherwise, nothing deleted); a RUNNING sweep is FailedPrecondition
  // (cancel it first). Results other sweeps copied from it through the
  // result cache keep their own rows.
  absl::StatusOr<DeleteOutcome> Delete(const std::string& sweep_id, const std::string& confirm);

  // Gives the sweep's FAILED (`failed`) and/or CANCELLED (`cancelled`) cells
  // a new attempt: pending again, attempts from zero, their failed results
  // removed, and the sweep RUNNING again when any was; no other cell
  // changes. Returns the cells retried (0: none in those states; the sweep
  // is left as it is). InvalidArgument when neither is asked for;
  // FailedPrecondition for a search sweep.
  absl::StatusOr<int64_t> Retry(const std::string& sweep_id, bool failed, bool cancelled);

  // Sweeps newest first with their notes, filtered by `filter` (the limit
  // applies after the filter). InvalidArgument for a limit out of 0..10000.
  absl::StatusOr<std::vector<ManagedSweepInfo>> List(const SweepFilter& filter);

 private:
  Store* const store_;
  Coordinator* const coordinator_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_SWEEPS_SWEEP_ADMIN_H_
