#include "client/ui/listen.h"

#include "gtest/gtest.h"

namespace ranksweep::client::ui {
namespace {

TEST(IsLoopbackHostTest, LoopbackForms) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("LocalHost"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("0:0:0:0:0:0:0:1"));
}

TEST(IsLoopbackHostTest, NotLoopback) {
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("::"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("128.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("localhost.evil.example"));
  EXPECT_FALSE(IsLoopbackHost("127.0.0.1.nip.io"));
  EXPECT_FALSE(IsLoopbackHost(""));
  EXPECT_FALSE(IsLoopbackHost("::ffff:127.0.0.1"));  // mapped: a v6 socket, not ::1
}

TEST(ParseListenAddressTest, AcceptsLoopback) {
  auto a = ParseListenAddress("127.0.0.1:8080", false);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8080);
  auto b = ParseListenAddress("[::1]:0", false);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 0);
  auto c = ParseListenAddress("localhost:65535", false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->port, 65535);
}

TEST(ParseListenAddressTest, RefusesRemoteUnlessAllowed) {
  auto a = ParseListenAddress("0.0.0.0:8080", false);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.status().message(),
            "--listen: 0.0.0.0 is not a loopback address (127.0.0.1, ::1, localhost); the "
            "dashboard calls the coordinator with your token, so anyone who reaches it acts as "
            "you. Pass --allow-remote to serve it to other machines anyway");
  auto b = ParseListenAddress("0.0.0.0:8080", true);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->host, "0.0.0.0");
  EXPECT_FALSE(ParseListenAddress("example.com:80", false).ok());
}

TEST(ParseListenAddressTest, BadForms) {
  auto no_port = ParseListenAddress("127.0.0.1", false);
  EXPECT_EQ(no_port.status().message(),
            "--listen: \"127.0.0.1\" is not HOST:PORT (e.g. 127.0.0.1:8080, [::1]:8080)");
  auto big = ParseListenAddress("127.0.0.1:65536", false);
  EXPECT_EQ(big.status().message(), "--listen: port \"65536\" must be in 0..65535 (0 = any free port)");
  EXPECT_FALSE(ParseListenAddress("127.0.0.1:-1", false).ok());
  EXPECT_FALSE(ParseListenAddress("127.0.0.1:http", false).ok());
  EXPECT_FALSE(ParseListenAddress(":8080", false).ok());
  EXPECT_FALSE(ParseListenAddress("::1:8080", false).ok());  // ambiguous without brackets
  EXPECT_FALSE(ParseListenAddress("[::1]8080", false).ok());
}

TEST(HostHeaderAllowedTest, OnlyLoopbackNamesWithOurPort) {
  EXPECT_TRUE(HostHeaderAllowed("127.0.0.1:8080", 8080, false));
  EXPECT_TRUE(HostHeaderAllowed("localhost:8080", 8080, false));
  EXPECT_TRUE(HostHeaderAllowed("[::1]:8080", 8080, false));
  EXPECT_FALSE(HostHeaderAllowed("127.0.0.1:8081", 8080, false));
  EXPECT_FALSE(HostHeaderAllowed("127.0.0.1", 8080, false));
  // DNS rebinding: an attacker's name that resolves to 127.0.0.1.
  EXPECT_FALSE(HostHeaderAllowed("evil.example:8080", 8080, false));
  EXPECT_FALSE(HostHeaderAllowed("", 8080, false));
  EXPECT_TRUE(HostHeaderAllowed("dashboard.lab:8080", 8080, true));
}

}  // namespace
}  // namespace ranksweep::client::ui
