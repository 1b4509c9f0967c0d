#include "server/access_policy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "util/error.h"

namespace lift {
namespace {

TEST(AccessPolicy, LoopbackAddressesAndHostHeaders) {
  for (const char* a : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"}) {
    EXPECT_TRUE(is_loopback_address(a)) << a;
  }
  for (const char* a : {"0.0.0.0", "::", "10.0.0.1", "192.168.1.1", "example.com"}) {
    EXPECT_FALSE(is_loopback_address(a)) << a;
  }
  for (const char* h : {"localhost", "localhost:8080", "127.0.0.1", "127.0.0.1:1", "[::1]",
                        "[::1]:8080", "ui.localhost:3000", "Localhost"}) {
    EXPECT_TRUE(host_header_is_loopback(h)) << h;
  }
  for (const char* h :
       {"", "evil.com", "evil.com:8080", "localhost.evil.com", "127.0.0.1.nip.io",
        "localhost:", "localhost:80x", "[::1", "[::2]:80", "[::1]x", "0.0.0.0", "128.0.0.1"}) {
    EXPECT_FALSE(host_header_is_loopback(h)) << h;
  }
}

TEST(AccessPolicy, OriginsAreMatchedExactlyOrByStar) {
  OriginPolicy none;
  EXPECT_FALSE(none.allows("http://localhost:3000"));
  OriginPolicy some({"http://localhost:3000", "https://ui.example/"});
  EXPECT_TRUE(some.allows("http://localhost:3000"));
  EXPECT_TRUE(some.allows("HTTPS://UI.EXAMPLE"));
  EXPECT_FALSE(some.allows("http://localhost:3001"));
  EXPECT_FALSE(some.allows("http://localhost:3000.evil.com"));
  EXPECT_FALSE(some.allows("null"));
  EXPECT_TRUE(OriginPolicy({"*"}).allows("http://anything"));
}

TEST(AccessPolicy, KeysAreCheckedAgainstEveryKey) {
  const ApiKeys keys({"sk-one", "sk-two-longer"});
  const std::string one = "Bearer sk-one", two = "bearer sk-two-longer";
  EXPECT_TRUE(keys.accepts(&one));
  EXPECT_TRUE(keys.accepts(&two));
  for (const std::string bad : {"Bearer sk-on", "Bearer sk-one1", "Bearer ", "sk-one",
                                "Basic sk-one", "Bearer sk-two", "Bearer SK-ONE"}) {
    EXPECT_FALSE(keys.accepts(&bad)) << bad;
  }
  EXPECT_FALSE(keys.accepts(nullptr));
  EXPECT_TRUE(ApiKeys().accepts(nullptr));  // no keys: open
  EXPECT_TRUE(constant_time_equals("abc", "abc"));
  EXPECT_FALSE(constant_time_equals("abc", "abcabc"));  // a cycled secret is no match
  EXPECT_FALSE(constant_time_equals("", "abc"));
  EXPECT_FALSE(constant_time_equals("", ""));
}

TEST(AccessPolicy, KeysComeFromFlagsFileAndEnvironment) {
  char path[] = "/tmp/lift-keys-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream f(path);
    f << "# comment\n\n  sk-file \r\nsk-flag\n";
  }
  const auto keys = gather_api_keys({"sk-flag"}, path, "sk-env1,,sk-env2");
  EXPECT_EQ(keys, (std::vector<std::string>{"sk-env1", "sk-env2", "sk-file", "sk-flag"}));
  EXPECT_THROW(gather_api_keys({}, "/nonexistent/keys", nullptr), Error);
  {
    std::ofstream f(path);
    f << "# only comments\n";
  }
  EXPECT_THROW(gather_api_keys({}, path, nullptr), Error);
  EXPECT_THROW(gather_api_keys({"has space"}, "", nullptr), Error);
  EXPECT_TRUE(gather_api_keys({}, "", nullptr).empty());
  std::remove(path);
}

}  // namespace
}  // namespace lift
