#include "client/ui/sse.h"

#include "gtest/gtest.h"

namespace ranksweep::client::ui {
namespace {

TEST(SseEventTest, OneLine) {
  EXPECT_EQ(SseEvent("progress", R"({"a":1})"), "event: progress\ndata: {\"a\":1}\n\n");
}

TEST(SseEventTest, NoEventName) { EXPECT_EQ(SseEvent("", "x"), "data: x\n\n"); }

TEST(SseEventTest, EveryLineBreakStartsADataLine) {
  EXPECT_EQ(SseEvent("m", "a\nb\r\nc\rd"), "event: m\ndata: a\ndata: b\ndata: c\ndata: d\n\n");
  // A trailing break keeps its empty last line, so the browser sees "a\n".
  EXPECT_EQ(SseEvent("m", "a\n"), "event: m\ndata: a\ndata: \n\n");
  EXPECT_EQ(SseEvent("m", ""), "event: m\ndata: \n\n");
}

TEST(SseEventTest, EventNameCannotBreakTheFrame) {
  EXPECT_EQ(SseEvent("end\ndata: forged", "x"), "event: end\ndata: x\n\n");
}

TEST(SseCommentTest, Comment) {
  EXPECT_EQ(SseComment("keep-alive"), ": keep-alive\n\n");
  EXPECT_EQ(SseComment("a\nb"), ": a\n\n");
}

}  // namespace
}  // namespace ranksweep::client::ui
