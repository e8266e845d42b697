// Column blocks in the core (server/core/results/result_blocks.h): what a
// query hands a sink that takes them, and when they are stored. The bytes
// are the core's opaque strings here; the service's encoding and joining
// are tested in proto/column_blocks_test.cc and service_results_test.cc.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/core/coordinator_test_fixture.h"

namespace ranksweep::server {
namespace {

using ::testing::ElementsAre;

// Writes down what a query hands it: "row <cell id>" and "block <bytes>".
class Recorder final : public RowSink {
 public:
  explicit Recorder(std::string layout) : layout_(std::move(layout)) {}
  std::string_view BlockLayout() const override { return layout_; }
  void Add(const ResultRow& row) override { seen.push_back(absl::StrCat("row ", row.cell_id)); }
  void AddBlock(std::string_view bytes, int64_t rows) override {
    seen.push_back(absl::StrCat("block ", std::string(bytes), " ", rows));
  }
  std::vector<std::string> seen;

 private:
  std::string layout_;
};

class ColumnBlocksTest : public CoordinatorTest {
 protected:
  std::vector<std::string> Seen(const ResultQuery& query, const std::string& layout,
                                int64_t* version = nullptr) {
    Recorder r(layout);
    absl::StatusOr<QueryOutcome> out = coordinator_->Query(query, r);
    EXPECT_TRUE(out.ok()) << out.status();
    if (version != nullptr && out.ok()) *version = out->results_version;
    return r.seen;
  }
  ColumnBlock Block(int64_t first, int64_t last, int64_t rows, const std::string& bytes) {
    ColumnBlock b;
    b.first_cell_id = first;
    b.last_cell_id = last;
    b.rows = rows;
    b.bytes = bytes;
    return b;
  }
};

TEST_F(ColumnBlocksTest, AQueryHandsEachBlockInItsPlaceAndReadsTheOtherRows) {
  std::string sweep = Submit(MakeSpec("blocks", {1}, 6, 0, false));  // 6 cells
  std::string w = Register();
  for (const Task& t : Acquire(w, 64, 64)) {
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t)).ok());
  }
  auto all = coordinator_->Query(ResultQuery{sweep});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->rows.size(), 6u);
  std::vector<int64_t> id;
  for (const ResultRow& r : all->rows) id.push_back(r.cell_id);
  auto row = [&](int i) { return absl::StrCat("row ", id[i]); };

  // No block yet: rows, and the version they were read at.
  int64_t version = 0;
  EXPECT_THAT(Seen(ResultQuery{sweep}, "L", &version),
              ElementsAre(row(0), row(1), row(2), row(3), row(4), row(5)));
  ASSERT_TRUE(coordinator_->ResultsVersion(sweep).ok());
  EXPECT_EQ(version, *coordinator_->ResultsVersion(sweep));
  EXPECT_GT(version, 0);

  // Blocks over rows 1-2 and 4: each comes once, in its place.
  absl::StatusOr<int> stored = coordinator_->StoreColumnBlocks(
      sweep, version, "L", {Block(id[1], id[2], 2, "b12"), Block(id[4], id[4], 1, "b4")});
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, 2);
  EXPECT_THAT(Seen(ResultQuery{sweep}, "L"),
              ElementsAre(row(0), "block b12 2", row(3), "block b4 1", row(5)));
  // A sink of another layout, or none, gets rows.
  EXPECT_THAT(Seen(ResultQuery{sweep}, "M"),
              ElementsAre(row(0), row(1), row(2), row(3), row(4), row(5)));
  EXPECT_THAT(Seen(ResultQuery{sweep}, ""),
              ElementsAre(row(0), row(1), row(2), row(3), row(4), row(5)));
  // So does a query with a filter: blocks hold every row.
  ResultQuery filtered{sweep};
  filtered.seeds = {all->rows[1].seed};
  EXPECT_THAT(Seen(filtered, "L"), ElementsAre(row(1)));

  // Pages of two rows: a page ends before a block that would not fit, and
  // one that starts inside a block, or is shorter than it, reads its rows.
  auto pages = [&](int page_size) {
    std::vector<std::vector<std::string>> got;
    ResultQuery q{sweep};
    q.page_size = page_size;
    for (int i = 0; i < 10; ++i) {
      Recorder r("L");
      absl::StatusOr<QueryOutcome> out = coordinator_->Query(q, r);
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) break;
      got.push_back(r.seen);
      if (out->next_after_cell_id == 0) break;
      q.after_cell_id = out->next_after_cell_id;
    }
    return got;
  };
  EXPECT_THAT(pages(2), ElementsAre(ElementsAre(row(0)), ElementsAre("block b12 2"),
                                    ElementsAre(row(3), "block b4 1"), ElementsAre(row(5))));
  EXPECT_THAT(pages(1), ElementsAre(ElementsAre(row(0)), ElementsAre(row(1)), ElementsAre(row(2)),
                                    ElementsAre(row(3)), ElementsAre("block b4 1"),
                                    ElementsAre(row(5))));
  ResultQuery from_inside{sweep};
  from_inside.after_cell_id = id[1];
  EXPECT_THAT(Seen(from_inside, "L"), ElementsAre(row(2), row(3), "block b4 1", row(5)));

  // A block over rows 2-3 replaces the one it overlaps.
  ASSERT_TRUE(coordinator_->StoreColumnBlocks(sweep, version, "L",
                                              {Block(id[2], id[3], 2, "b23")})
                  .ok());
  EXPECT_THAT(Seen(ResultQuery{sweep}, "L"),
              ElementsAre(row(0), row(1), "block b23 2", "block b4 1", row(5)));
  // Blocks of another layout replace every block of the sweep.
  ASSERT_TRUE(coordinator_->StoreColumnBlocks(sweep, version, "M",
                                              {Block(id[0], id[0], 1, "m0")})
                  .ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM result_blocks"), 1);
  EXPECT_THAT(Seen(ResultQuery{sweep}, "M"),
              ElementsAre("block m0 1", row(1), row(2), row(3), row(4), row(5)));
}

TEST_F(ColumnBlocksTest, BlocksOfRowsThatMovedSinceTheReadAreNotStored) {
  std::string sweep = Submit(MakeSpec("moved", {1}, 4, 0, false));  // 4 cells
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 2);
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(tasks[0])).ok());
  int64_t version = 0;
  std::vector<std::string> seen = Seen(ResultQuery{sweep}, "L", &version);
  ASSERT_EQ(seen.size(), 2u);
  // Two more results: the version moves, and blocks read before are refused.
  for (const Task& t : Acquire(w, 64, 64)) {
    ASSERT_TRUE(coordinator_->Complete(w, ResultsFor(t)).ok());
  }
  const int64_t first = Count("SELECT MIN(cell_id) FROM result_packs");
  absl::StatusOr<int> stored = coordinator_->StoreColumnBlocks(
      sweep, version, "L", {Block(first, first + 1, 2, "stale")});
  EXPECT_EQ(stored.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM result_blocks"), 0);
}

TEST_F(ColumnBlocksTest, ABlockOverACellWithoutItsResultIsNotStored) {
  std::string sweep = Submit(MakeSpec("gap", {1}, 4, 0, false));  // 4 cells
  std::string w = Register();
  std::vector<Task> tasks = Acquire(w, 1, 4);
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_EQ(tasks[0].cells.size(), 4u);
  // Cells 0, 1 and 3 done; cell 2 still leased.
  std::vector<CellResult> results = ResultsFor(tasks[0]);
  const int64_t open_cell = results[2].cell_id;
  results.erase(results.begin() + 2);
  ASSERT_TRUE(coordinator_->Complete(w, results).ok());
  int64_t version = 0;
  Seen(ResultQuery{sweep}, "L", &version);
  const int64_t c0 = results[0].cell_id, c3 = results[2].cell_id;
  // Over cells 0-3 (three rows, four cells): left out; over 0-1: stored.
  absl::StatusOr<int> stored = coordinator_->StoreColumnBlocks(
      sweep, version, "L", {Block(c0, c3, 3, "gap"), Block(c0, open_cell - 1, 2, "b01")});
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, 1);
  EXPECT_THAT(Seen(ResultQuery{sweep}, "L"),
              ElementsAre("block b01 2", absl::StrCat("row ", c3)));
}

}  // namespace
}  // namespace ranksweep::server
