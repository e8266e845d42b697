// Helpers the tests of the store, of its schema and of the modules that run
// on its connections share: a fresh database in memory, a number read on a
// connection, exact row counts and rows as text read on the store's read
// connection, and a row written into `meta`. Tests only.
#ifndef RANKSWEEP_SERVER_CORE_STORE_TEST_UTIL_H_
#define RANKSWEEP_SERVER_CORE_STORE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/core/results/packed_row.h"
#include "server/core/schema.h"
#include "server/core/sqlite.h"
#include "server/core/store.h"

namespace ranksweep::server {

// A database in memory at the current schema, set up as Store::Open sets up
// its writer (with the SQL function ranksweep_pack_row); null, with the test
// failed, when that does not work.
inline std::unique_ptr<Connection> NewMemoryDatabase() {
  auto c = Connection::Open(":memory:", Connection::Mode::kReadWrite, 1000);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  absl::Status s = RegisterPackRowFunction((*c)->handle());
  if (s.ok()) s = Migrate(**c, ":memory:");
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(*c) : nullptr;
}

// The first column of the first row of `sql`, read on `c`; -1, with the
// test failed, when there is none.
inline int64_t FirstInt(Connection& c, const std::string& sql) {
  auto q = c.Prepare(sql);
  EXPECT_TRUE(q.ok()) << q.status();
  if (!q.ok()) return -1;
  auto row = q->Step();
  EXPECT_TRUE(row.ok() && *row) << sql;
  return row.ok() && *row ? q->ColumnInt(0) : -1;
}

inline int64_t CountRows(Store& store, const std::string& table) {
  int64_t n = -1;
  EXPECT_TRUE(store
                  .Read([&](Connection& c) -> absl::Status {
                    auto q = c.Prepare("SELECT COUNT(*) FROM " + table);
                    if (!q.ok()) return q.status();
                    auto row = q->Step();
                    if (!row.ok()) return row.status();
                    n = q->ColumnInt(0);
                    return absl::OkStatus();
                  })
                  .ok());
  return n;
}

// Every row of `sql` as its first `columns` values, space-separated (NULL as
// "NULL"), each followed by a space.
inline std::vector<std::string> RowsAsText(Store& store, const std::string& sql, int columns) {
  std::vector<std::string> rows;
  EXPECT_TRUE(store
                  .Read([&](Connection& c) -> absl::Status {
                    auto q = c.Prepare(sql);
                    if (!q.ok()) return q.status();
                    while (true) {
                      auto row = q->Step();
                      if (!row.ok()) return row.status();
                      if (!*row) break;
                      std::string line;
                      for (int i = 0; i < columns; ++i) {
                        line += (q->ColumnIsNull(i) ? "NULL" : q->ColumnText(i)) + " ";
                      }
                      rows.push_back(line);
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  return rows;
}

inline absl::Status InsertMeta(Connection& c, const std::string& key, int64_t value) {
  auto q = c.Prepare("INSERT INTO meta(key, value) VALUES (?1, ?2)");
  if (!q.ok()) return q.status();
  q->Bind(1, key).Bind(2, value);
  return q->Run();
}

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_STORE_TEST_UTIL_H_
