// Rows read back a page at a time, in cell order: of one sweep, of sweeps
// whose cells interleave, and read on two threads.
#include <string>
#include <vector>

#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(CoordinatorTest, RowsComeInPagesInCellOrder) {
  std::string sweep = Submit(MakeSpec("pages", {1, 2}, 3));  // 9 cells
  std::string w = Register();
  for (const Task& t : Acquire(w, 64, 64)) {
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t)).ok());
  }
  auto all = coordinator_->Query(ResultQuery{sweep});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->rows.size(), 9u);
  EXPECT_EQ(all->next_after_cell_id, 0);

  ResultQuery query{sweep};
  query.page_size = 4;
  std::vector<int64_t> ids;
  std::vector<size_t> page_sizes;
  for (int page = 0; page < 10; ++page) {
    auto q = coordinator_->Query(query);
    ASSERT_TRUE(q.ok()) << q.status();
    page_sizes.push_back(q->rows.size());
    for (const ResultRow& r : q->rows) ids.push_back(r.cell_id);
    if (q->next_after_cell_id == 0) break;
    EXPECT_EQ(q->next_after_cell_id, q->rows.back().cell_id);
    query.after_cell_id = q->next_after_cell_id;
  }
  EXPECT_THAT(page_sizes, ElementsAre(4u, 4u, 1u));
  ASSERT_EQ(ids.size(), 9u);
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(ids[i], all->rows[i].cell_id);

  // Filters apply before the page is cut: rank 2 has 3 rows, a page of 3
  // holds them all and says there is no more.
  query = ResultQuery{sweep};
  query.ranks = {2};
  query.page_size = 3;
  auto q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->rows.size(), 3u);
  EXPECT_EQ(q->next_after_cell_id, 0);

  // A state filter pages through `cells`.
  std::string open = Submit(MakeSpec("open", {1}, 3, 0, false));  // 3 pending
  query = ResultQuery{open};
  query.state = CellState::kPending;
  query.page_size = 2;
  q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->rows.size(), 2u);
  query.after_cell_id = q->next_after_cell_id;
  q = coordinator_->Query(query);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->rows.size(), 1u);
  EXPECT_EQ(q->rows[0].seed, 2u);
  EXPECT_EQ(q->next_after_cell_id, 0);

  query = ResultQuery{sweep};
  query.page_size = -1;
  auto bad = coordinator_->Query(query);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "page_size: -1 is negative; use 0 (every row) or more");
  query = ResultQuery{sweep};
  query.group_by = GroupBy::kHeadRank;
  query.after_cell_id = 3;
  bad = coordinator_->Query(query);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("page_token: grouped queries"));
}

// A search sweep adds cells as it goes, so its cell ids interleave with a
// sweep submitted after it; each sweep's rows are still exactly its own, in
// cell id order, whole or in pages.
TEST_F(CoordinatorTest, RowsOfSweepsWhoseCellsInterleaveAreEachTheirOwn) {
  SweepSpec spec = MakeSpec("search", {1, 2, 4, 8, 16, 32, 64, 128, 256}, 2);
  spec.mode = SweepMode::kSearch;
  const std::string a = Submit(spec);
  const std::string b = Submit(MakeSpec("plain", {1, 2}, 2, 0, /*with_softmax=*/false));
  std::string w = Register();
  while (true) {
    std::vector<Task> tasks = Acquire(w, 1, 64);
    if (tasks.empty()) break;
    const Task& t = tasks[0];
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t, t.rank == 0 || t.rank >= 8 ? 0 : 0.5))
                    .ok());
  }
  // Cells of b lie between the first and the last cell of a.
  EXPECT_EQ(Count("SELECT COUNT(*) FROM cells WHERE sweep_id = '" + b +
                  "' AND id > (SELECT MIN(id) FROM cells WHERE sweep_id = '" + a +
                  "') AND id < (SELECT MAX(id) FROM cells WHERE sweep_id = '" + a + "')"),
            4);
  for (const auto& [sweep, cells] : {std::make_pair(a, 10), std::make_pair(b, 4)}) {
    std::vector<int64_t> want;
    {
      absl::Status s = store_->Read([&, sweep = sweep](Connection& c) -> absl::Status {
        ASSIGN_OR_RETURN(Statement q,
                         c.Prepare("SELECT id FROM cells WHERE sweep_id = ?1 ORDER BY id"));
        q.Bind(1, sweep);
        while (true) {
          ASSIGN_OR_RETURN(bool row, q.Step());
          if (!row) return absl::OkStatus();
          want.push_back(q.ColumnInt(0));
        }
      });
      ASSERT_TRUE(s.ok()) << s;
    }
    ASSERT_EQ(want.size(), static_cast<size_t>(cells));
    for (int64_t page_size : {0, 3}) {
      ResultQuery q{sweep};
      q.page_size = page_size;
      std::vector<int64_t> got;
      int pages = 0;
      while (true) {
        auto out = coordinator_->Query(q);
        ASSERT_TRUE(out.ok()) << out.status();
        ++pages;
        for (const ResultRow& row : out->rows) {
          EXPECT_EQ(row.sweep_id, sweep);
          EXPECT_EQ(row.state, CellState::kDone);
          got.push_back(row.cell_id);
        }
        if (out->next_after_cell_id == 0) break;
        q.after_cell_id = out->next_after_cell_id;
      }
      EXPECT_EQ(got, want) << sweep << " page_size " << page_size;
      EXPECT_EQ(pages, page_size == 0 ? 1 : (cells + 2) / 3) << sweep;
    }
  }
}

// Large row queries read SQLite on one thread and unpack on another; they
// must give exactly the rows of the one-thread read, whole, in pages that
// end inside and across the chunks handed over, and filtered, and report a
// damaged packed row the same way.
TEST_F(CoordinatorTest, RowsReadOnTwoThreadsAreTheRowsReadOnOne) {
  const std::string sweep = Submit(MakeSpec("big", {1, 2, 4}, 1000));  // 4,000 cells
  std::string w = Register();
  while (true) {
    std::vector<Task> tasks = Acquire(w, 1, 1024);
    if (tasks.empty()) break;
    std::vector<CellResult> results;
    for (const LeasedCell& c : tasks[0].cells) {
      results.push_back(CellResult{c.cell_id, c.lease_id,
                                   MakeResult(c.seed, static_cast<double>(c.seed % 7) / 8)});
    }
    ASSERT_TRUE(coordinator_->Complete(w, results).ok());
  }
  CoordinatorOptions one_thread, two_threads;
  one_thread.two_thread_query_rows = 0;
  two_threads.two_thread_query_rows = 1;
  Coordinator one(store_.get(), &clock_, one_thread);
  Coordinator two(store_.get(), &clock_, two_threads);
  // Every row (cell id, seed, train error) of `query`, page by page.
  auto rows = [&](Coordinator& c, ResultQuery query, int* pages) {
    std::vector<std::tuple<int64_t, uint64_t, double>> got;
    *pages = 0;
    while (true) {
      auto out = c.Query(query);
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) break;
      ++*pages;
      for (const ResultRow& r : out->rows) {
        got.emplace_back(r.cell_id, r.seed, r.result.has_value() ? r.result->train.error : -1);
      }
      if (out->next_after_cell_id == 0) break;
      query.after_cell_id = out->next_after_cell_id;
    }
    return got;
  };
  ResultQuery all{sweep};
  ResultQuery pages_of_3000{sweep};
  pages_of_3000.page_size = 3000;
  ResultQuery pages_of_7{sweep};
  pages_of_7.page_size = 7;
  pages_of_7.seeds = {5, 500, 999};
  ResultQuery kernel_only{sweep};
  kernel_only.head = "kernel/elu1";
  kernel_only.page_size = 2100;
  const struct {
    const ResultQuery* query;
    size_t rows;
    int pages;
  } cases[] = {{&all, 4000, 1}, {&pages_of_3000, 4000, 2}, {&pages_of_7, 12, 2},
               {&kernel_only, 3000, 2}};
  for (const auto& c : cases) {
    int one_pages = 0, two_pages = 0;
    const auto want = rows(one, *c.query, &one_pages);
    const auto got = rows(two, *c.query, &two_pages);
    EXPECT_EQ(want.size(), c.rows);
    EXPECT_EQ(one_pages, c.pages);
    EXPECT_EQ(got, want);
    EXPECT_EQ(two_pages, one_pages);
  }
  // A damaged packed row in the second chunk fails both reads alike.
  int64_t damaged = 0;
  ASSERT_TRUE(store_
                  ->Write([&](Connection& c) -> absl::Status {
                    ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT MIN(cell_id) + 3000 FROM "
                                                            "result_packs WHERE sweep_id = ?1"));
                    q.Bind(1, sweep);
                    ASSIGN_OR_RETURN(bool row, q.Step());
                    if (row) damaged = q.ColumnInt(0);
                    ASSIGN_OR_RETURN(Statement u, c.Prepare("UPDATE result_packs SET packed = "
                                                            "x'03' WHERE cell_id = ?1"));
                    u.Bind(1, damaged);
                    return u.Run();
                  })
                  .ok());
  for (Coordinator* c : {&one, &two}) {
    auto out = c->Query(all);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal);
    EXPECT_EQ(out.status().message(),
              absl::StrCat("result of cell ", damaged,
                           ": packed result row: unknown version 3 (1 bytes)"));
  }
}

}  // namespace
}  // namespace ranksweep::server
