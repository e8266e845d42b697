#include "common/plural.h"

#include "gtest/gtest.h"

namespace ranksweep {
namespace {

TEST(PluralTest, OneIsSingularEveryOtherCountPlural) {
  EXPECT_EQ(CountOf(1, "slot"), "1 slot");
  EXPECT_EQ(CountOf(2, "slot"), "2 slots");
  EXPECT_EQ(CountOf(0, "cell"), "0 cells");
  EXPECT_EQ(CountOf(-1, "cell"), "-1 cell");
  EXPECT_EQ(CountOf(3, "word", "words"), "3 words");
  EXPECT_EQ(CountOf(1, "query", "queries"), "1 query");
  EXPECT_EQ(CountOf(5, "query", "queries"), "5 queries");
}

}  // namespace
}  // namespace ranksweep
