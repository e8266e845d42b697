#include "client/hints.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep::client {
namespace {

const std::vector<std::string> kSubcommands = {"submit", "presets", "list", "status", "watch",
                                               "results", "plot", "cancel", "workers", "health"};

TEST(HintsTest, EditDistanceCountsASwapOfNeighboursAsOneEdit) {
  EXPECT_EQ(EditDistance("sumbit", "submit"), 1);
  EXPECT_EQ(EditDistance("submit", "submit"), 0);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(HintsTest, ClosestMatchSuggestsOnlyNearWords) {
  EXPECT_EQ(ClosestMatch("sumbit", kSubcommands), "submit");
  EXPECT_EQ(ClosestMatch("reslts", kSubcommands), "results");
  EXPECT_EQ(ClosestMatch("WATCH", kSubcommands), "watch");
  EXPECT_EQ(ClosestMatch("lst", kSubcommands), "list");
  EXPECT_EQ(ClosestMatch("frobnicate", kSubcommands), "");
  EXPECT_EQ(ClosestMatch("x", kSubcommands), "");
  EXPECT_EQ(DidYouMeanSuffix("elu", {"elu1", "relu_eps", "softplus", "exp", "favor"}),
            "; did you mean \"elu1\"?");
  EXPECT_EQ(DidYouMeanSuffix("tanh", {"elu1", "relu_eps", "softplus", "exp", "favor"}), "");
}

TEST(HintsTest, AnAddressWithoutAPortIsAnErrorThatSuggestsOne) {
  absl::Status s = CheckAddressHasPort("localhost", "--addr");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--addr: \"localhost\" has no port; use HOST:PORT, e.g. localhost:50051");
  EXPECT_EQ(CheckAddressHasPort("10.0.0.5:", "--addr").message(),
            "--addr: \"10.0.0.5:\" has no port; use HOST:PORT, e.g. 10.0.0.5:50051");
  EXPECT_EQ(CheckAddressHasPort("[::1]", "--addr").message(),
            "--addr: \"[::1]\" has no port; use HOST:PORT, e.g. [::1]:50051");
  EXPECT_EQ(CheckAddressHasPort("::1", "--addr").message(),
            "--addr: \"::1\" has no port; use HOST:PORT, e.g. [::1]:50051");
  EXPECT_EQ(CheckAddressHasPort("host:http", "--addr").message(),
            "--addr: \"host:http\" has port \"http\", which is not a number in 0..65535");
  EXPECT_TRUE(CheckAddressHasPort("localhost:50051", "--addr").ok());
  EXPECT_TRUE(CheckAddressHasPort("[::1]:9000", "--addr").ok());
  EXPECT_TRUE(CheckAddressHasPort("unix:/tmp/rs.sock", "--addr").ok());
  EXPECT_TRUE(CheckAddressHasPort("dns:///coordinator:50051", "--addr").ok());
}

}  // namespace
}  // namespace ranksweep::client
