// The coordinator database's schema: the version this binary writes, the
// list of migrations that build it, and applying them to a file.
//
// The table `schema_version` holds the version a file is at. Migrate()
// applies every migration above it, each in its own transaction, and refuses
// a file written by a newer binary (FailedPrecondition). A migration that
// fails is rolled back whole and named in the error; the file stays at the
// version before it.
//
// Adding to the schema: append a migration with the next version and raise
// kSchemaVersion; never edit one that has shipped, since files in use have
// already run it.
//
// Thread-safety: Migrations() and kSchemaVersion are immutable. Migrate()
// needs the only writer of the file (Store::Open calls it before the store
// is shared).
#ifndef RANKSWEEP_SERVER_CORE_SCHEMA_H_
#define RANKSWEEP_SERVER_CORE_SCHEMA_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/metric_columns.h"
#include "server/core/sqlite.h"

namespace ranksweep::server {

// The schema version this binary writes: the last migration's, taken from
// the list in schema.cc, so adding a migration is an edit of that file only.
extern const int kSchemaVersion;

// One migration takes the schema from `version - 1` to `version`.
struct Migration {
  int version;
  std::string sql;
};

// Every migration in version order, 1 to kSchemaVersion, with the cell
// states its SQL names already written as their numbers (types.h).
const std::vector<Migration>& Migrations();

// The version the file behind `c` is at; 0 for a file without
// `schema_version` rows.
absl::StatusOr<int> ReadSchemaVersion(Connection& c);

// Brings the file behind `writer` (read-write, no transaction open) to
// kSchemaVersion. `path` names the file in errors. Migration 6 calls the SQL
// function ranksweep_pack_row, which the caller registers on `writer` first
// (server/core/results/packed_row.h).
// Last, it calls EnsureMetricColumns (server/core/metric_columns.h).
absl::Status Migrate(Connection& writer, const std::string& path);


}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_SCHEMA_H_
