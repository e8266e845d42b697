#include "server/core/schema.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "server/core/packed_row.h"
#include "server/core/sqlite.h"

namespace ranksweep::server {
namespace {

TEST(SchemaTest, MigrationsRunInVersionOrderUpToTheCurrentVersion) {
  const std::vector<Migration>& migrations = Migrations();
  ASSERT_EQ(migrations.size(), static_cast<size_t>(kSchemaVersion));
  for (size_t i = 0; i < migrations.size(); ++i) {
    EXPECT_EQ(migrations[i].version, static_cast<int>(i) + 1);
    // Every named state was replaced by its number.
    EXPECT_EQ(migrations[i].sql.find("{cell_"), std::string::npos) << migrations[i].version;
  }
}

std::string IndexSql(Connection& c, const std::string& name) {
  auto q = c.Prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?1");
  if (!q.ok()) return q.status().ToString();
  q->Bind(1, name);
  auto row = q->Step();
  if (!row.ok()) return row.status().ToString();
  return *row ? q->ColumnText(0) : "(none)";
}

// The partial indexes name the cell states they hold by the numbers stored
// in the rows, exactly as the migrations that made them shipped: a file
// migrated by an older binary and one migrated now have the same schema.
TEST(SchemaTest, PartialIndexesKeepTheStateNumbersTheyShippedWith) {
  auto c = Connection::Open(":memory:", Connection::Mode::kReadWrite, 1000);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(RegisterPackRowFunction((*c)->handle()).ok());
  ASSERT_TRUE(Migrate(**c, ":memory:").ok());
  auto version = ReadSchemaVersion(**c);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, kSchemaVersion);
  EXPECT_EQ(IndexSql(**c, "cells_pending_by_group"),
            "CREATE INDEX cells_pending_by_group ON cells(sweep_id, head_index, rank) "
            "WHERE state = 1");
  EXPECT_EQ(IndexSql(**c, "cells_leased"),
            "CREATE INDEX cells_leased ON cells(worker_id, lease_deadline_ms) WHERE state = 2");
  EXPECT_EQ(IndexSql(**c, "results_by_task"),
            "CREATE INDEX results_by_task ON results(task_key, seed, worker_build_id)\n"
            "  WHERE task_key != '' AND cached_from = 0 AND state = 3");
}

}  // namespace
}  // namespace ranksweep::server
