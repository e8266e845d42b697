#include "server/core/sweeps/sweep_admin.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/spec/result_validation.h"  // Clip
#include "common/spec/spec.h"
#include "common/status_macros.h"
#include "server/core/sql_columns.h"

namespace ranksweep::server {
namespace {

absl::Status CheckTag(const std::string& tag, const std::string& field) {
  if (tag.empty() || tag.size() > static_cast<size_t>(kMaxTagLength)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must have 1..", kMaxTagLength,
                                                   " characters, got ", tag.size()));
  }
  for (char c : tag) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                    c == '_' || c == '-' || c == ':';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " must use only the characters A-Z a-z 0-9 . _ : -, got \"", Clip(tag), "\""));
    }
  }
  return absl::OkStatus();
}

// NotFound unless the sweep exists; its state otherwise.
absl::StatusOr<int> SweepStateIn(Connection& c, const std::string& sweep_id) {
  ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT state FROM sweeps WHERE id = :sweep_id"));
  q.Bind(":sweep_id", sweep_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  return static_cast<int>(q.ColumnInt(0));
}

absl::StatusOr<SweepNotes> NotesIn(Connection& c, const std::string& sweep_id) {
  SweepNotes notes;
  {
    ASSIGN_OR_RETURN(Statement q,
                     c.Prepare("SELECT note, archived FROM sweep_notes WHERE sweep_id = :sweep_id"));
    q.Bind(":sweep_id", sweep_id);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      notes.note = q.ColumnText(0);
      notes.archived = q.ColumnInt(1) != 0;
    }
  }
  ASSIGN_OR_RETURN(Statement q,
                   c.Prepare("SELECT tag FROM sweep_tags WHERE sweep_id = :sweep_id ORDER BY tag"));
  q.Bind(":sweep_id", sweep_id);
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    notes.tags.push_back(q.ColumnText(0));
  }
  return notes;
}

bool ContainsFolded(const std::string& haystack, const std::string& needle_lower) {
  return absl::StrContains(absl::AsciiStrToLower(haystack), needle_lower);
}

}  // namespace

SweepAdmin::SweepAdmin(Store* store, Coordinator* coordinator)
    : store_(store), coordinator_(coordinator) {}

absl::StatusOr<SweepNotes> SweepAdmin::Update(const std::string& sweep_id,
                                              const SweepUpdate& update) {
  if (sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  if (update.name.has_value()) {
    // The name follows the spec's rule (ValidateSweepSpec), checked on the
    // stored spec, which is valid, with the new name.
    ASSIGN_OR_RETURN(SweepInfo info, coordinator_->GetSweep(sweep_id));
    info.spec.name = *update.name;
    RETURN_IF_ERROR(ValidateSweepSpec(info.spec));
  }
  if (update.note.has_value() && update.note->size() > static_cast<size_t>(kMaxNoteBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("note must have 0..", kMaxNoteBytes,
                                                   " bytes, got ", update.note->size()));
  }
  for (size_t i = 0; i < update.add_tags.size(); ++i) {
    RETURN_IF_ERROR(CheckTag(update.add_tags[i], absl::StrCat("tags[", i, "]")));
  }
  SweepNotes out;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    out = SweepNotes();
    RETURN_IF_ERROR(SweepStateIn(c, sweep_id).status());
    if (update.name.has_value()) {
      ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE sweeps SET name = :name WHERE id = :sweep_id"));
      RETURN_IF_ERROR(u.Bind(":sweep_id", sweep_id).Bind(":name", *update.name).Run());
    }
    {
      ASSIGN_OR_RETURN(Statement u, c.Prepare(
          "INSERT INTO sweep_notes (sweep_id) VALUES (:sweep_id) ON CONFLICT (sweep_id) DO NOTHING"));
      RETURN_IF_ERROR(u.Bind(":sweep_id", sweep_id).Run());
    }
    if (update.note.has_value()) {
      ASSIGN_OR_RETURN(Statement u,
                       c.Prepare("UPDATE sweep_notes SET note = :note WHERE sweep_id = :sweep_id"));
      RETURN_IF_ERROR(u.Bind(":sweep_id", sweep_id).Bind(":note", *update.note).Run());
    }
    if (update.archived.has_value()) {
      ASSIGN_OR_RETURN(Statement u,
                       c.Prepare("UPDATE sweep_notes SET archived = :archived WHERE sweep_id = :sweep_id"));
      RETURN_IF_ERROR(u.Bind(":sweep_id", sweep_id).Bind(":archived", *update.archived ? 1 : 0).Run());
    }
    for (const std::string& tag : update.remove_tags) {
      ASSIGN_OR_RETURN(Statement u,
                       c.Prepare("DELETE FROM sweep_tags WHERE sweep_id = :sweep_id AND tag = :tag"));
      RETURN_IF_ERROR(u.Bind(":sweep_id", sweep_id).Bind(":tag", tag).Run());
    }
    for (const std::string& tag : update.add_tags) {
      ASSIGN_OR_RETURN(Statement u, c.Prepare(
          "INSERT INTO sweep_tags (sweep_id, tag) VALUES (:sweep_id, :tag) ON CONFLICT DO NOTHING"));
      RETURN_IF_ERROR(u.Bind(":sweep_id", sweep_id).Bind(":tag", tag).Run());
    }
    ASSIGN_OR_RETURN(out, NotesIn(c, sweep_id));
    if (out.tags.size() > static_cast<size_t>(kMaxTags)) {
      return absl::InvalidArgumentError(absl::StrCat("tags: a sweep has at most ", kMaxTags,
                                                     " tags, got ", out.tags.size()));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<SweepNotes> SweepAdmin::Notes(const std::string& sweep_id) {
  SweepNotes out;
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    RETURN_IF_ERROR(SweepStateIn(c, sweep_id).status());
    ASSIGN_OR_RETURN(out, NotesIn(c, sweep_id));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<DeleteOutcome> SweepAdmin::Delete(const std::string& sweep_id,
                                                 const std::string& confirm) {
  if (sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  if (confirm != sweep_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "delete of sweep ", sweep_id, " not confirmed: confirm must repeat the sweep id"));
  }
  DeleteOutcome out;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    out = DeleteOutcome();
    ASSIGN_OR_RETURN(const int state, SweepStateIn(c, sweep_id));
    if (state == kSweepRunning) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sweep ", sweep_id, " is RUNNING; cancel it first (ranksweep cancel ", sweep_id, ")"));
    }
    // Children first; each table keyed or indexed by the sweep.
    for (const char* sql : {"DELETE FROM result_packs WHERE sweep_id = :sweep_id",
                            "DELETE FROM rung_scores WHERE cell_id IN "
                            "(SELECT id FROM cells WHERE sweep_id = :sweep_id)",
                            "DELETE FROM results WHERE sweep_id = :sweep_id",
                            "DELETE FROM result_groups WHERE sweep_id = :sweep_id",
                            "DELETE FROM invalid_results WHERE sweep_id = :sweep_id",
                            "DELETE FROM cells WHERE sweep_id = :sweep_id",
                            "DELETE FROM sweep_tags WHERE sweep_id = :sweep_id",
                            "DELETE FROM sweep_notes WHERE sweep_id = :sweep_id",
                            "DELETE FROM sweeps WHERE id = :sweep_id"}) {
      ASSIGN_OR_RETURN(Statement u, c.Prepare(sql));
      RETURN_IF_ERROR(u.Bind(":sweep_id", sweep_id).Run());
      if (absl::StartsWith(sql, "DELETE FROM results ")) out.results_deleted = c.Changes();
      if (absl::StartsWith(sql, "DELETE FROM cells ")) out.cells_deleted = c.Changes();
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<int64_t> SweepAdmin::Retry(const std::string& sweep_id, bool failed,
                                          bool cancelled) {
  if (sweep_id.empty()) return absl::InvalidArgumentError("sweep_id: required");
  if (!failed && !cancelled) {
    return absl::InvalidArgumentError(
        "retry needs the cells to retry: failed, cancelled or both");
  }
  ASSIGN_OR_RETURN(const SweepInfo info, coordinator_->GetSweep(sweep_id));
  if (info.spec.mode == SweepMode::kSearch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sweep ", sweep_id, " is a search: its cells are decided as it goes; retry is for "
        "grid sweeps (submit it again with --no-cache)"));
  }
  std::string states;
  if (failed) states = absl::StrCat(kCellFailed);
  if (cancelled) absl::StrAppend(&states, states.empty() ? "" : ", ", kCellCancelled);
  const std::string chosen =
      absl::StrCat("SELECT id FROM cells WHERE sweep_id = :sweep_id AND state IN (", states, ")");
  int64_t retried = 0;
  RETURN_IF_ERROR(store_->Write([&](Connection& c) -> absl::Status {
    retried = 0;
    RETURN_IF_ERROR(SweepStateIn(c, sweep_id).status());
    // A failed cell's result row goes, so that its next attempt stores its
    // own; cancelled cells have none.
    for (const char* table : {"result_packs", "results"}) {
      ASSIGN_OR_RETURN(Statement u, c.Prepare(absl::StrCat(
          "DELETE FROM ", table, " WHERE cell_id IN (", chosen, ")")));
      RETURN_IF_ERROR(u.Bind(":sweep_id", sweep_id).Run());
    }
    {
      ASSIGN_OR_RETURN(Statement u, c.Prepare(absl::StrCat(
          "UPDATE cells SET state = ", kCellPending, ", attempt = 0, lease_id = 0, "
          "lease_deadline_ms = 0, worker_id = '', last_failure = '', next_of = 0, "
          "next_task = 0 WHERE sweep_id = :sweep_id AND state IN (", states, ")")));
      RETURN_IF_ERROR(u.Bind(":sweep_id", sweep_id).Run());
      retried = c.Changes();
    }
    if (retried > 0) {
      ASSIGN_OR_RETURN(Statement u, c.Prepare(absl::StrCat(
          "UPDATE sweeps SET state = ", kSweepRunning, ", finished_ms = 0 WHERE id = :sweep_id")));
      RETURN_IF_ERROR(u.Bind(":sweep_id", sweep_id).Run());
    }
    return absl::OkStatus();
  }));
  return retried;
}

absl::StatusOr<std::vector<ManagedSweepInfo>> SweepAdmin::List(const SweepFilter& filter) {
  if (filter.limit < 0 || filter.limit > kMaxListLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be in 0..", kMaxListLimit, " (0 = 100), got ", filter.limit));
  }
  const int limit = filter.limit == 0 ? 100 : filter.limit;
  // Every note and tag at once: small tables, one read.
  std::map<std::string, SweepNotes> notes;
  RETURN_IF_ERROR(store_->Read([&](Connection& c) -> absl::Status {
    notes.clear();
    {
      ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT sweep_id, note, archived FROM sweep_notes"));
      while (true) {
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) break;
        SweepNotes& n = notes[q.ColumnText(0)];
        n.note = q.ColumnText(1);
        n.archived = q.ColumnInt(2) != 0;
      }
    }
    ASSIGN_OR_RETURN(Statement q,
                     c.Prepare("SELECT sweep_id, tag FROM sweep_tags ORDER BY sweep_id, tag"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      notes[q.ColumnText(0)].tags.push_back(q.ColumnText(1));
    }
    return absl::OkStatus();
  }));
  const bool filtered = !filter.tag.empty() || !filter.search.empty() || !filter.include_archived;
  // Without a filter the coordinator's limit is the answer's; with one, the
  // filter runs over every sweep the state and owner allow.
  ASSIGN_OR_RETURN(std::vector<SweepInfo> sweeps,
                   coordinator_->ListSweeps(filter.state, filtered ? INT32_MAX : limit,
                                            filter.owner));
  const std::string search = absl::AsciiStrToLower(filter.search);
  std::vector<ManagedSweepInfo> out;
  for (SweepInfo& s : sweeps) {
    if (static_cast<int>(out.size()) >= limit) break;
    auto it = notes.find(s.sweep_id);
    SweepNotes n = it == notes.end() ? SweepNotes() : it->second;
    if (n.archived && !filter.include_archived) continue;
    if (!filter.tag.empty() &&
        std::find(n.tags.begin(), n.tags.end(), filter.tag) == n.tags.end()) {
      continue;
    }
    if (!search.empty()) {
      bool hit = ContainsFolded(s.sweep_id, search) || ContainsFolded(s.name, search) ||
                 ContainsFolded(s.owner, search) || ContainsFolded(n.note, search);
      for (const std::string& tag : n.tags) hit = hit || ContainsFolded(tag, search);
      if (!hit) continue;
    }
    out.push_back(ManagedSweepInfo{std::move(s), std::move(n)});
  }
  return out;
}

}  // namespace ranksweep::server
