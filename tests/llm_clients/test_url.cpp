// llm_clients/url.hpp: the one URL parser of the client and the probe.
#include "llm_clients/url.hpp"

#include <gtest/gtest.h>

#include <ostream>
#include <string>

namespace korch::llm {
namespace {

struct UrlCase {
  std::string url;
  std::string host;
  std::string port;
  bool ipv6 = false;
};

void PrintTo(const UrlCase& c, std::ostream* os) { *os << c.url; }

class SplitUrl : public ::testing::TestWithParam<UrlCase> {};

TEST_P(SplitUrl, HostAndPort) {
  const auto& c = GetParam();
  auto hp = split_url(c.url);
  ASSERT_TRUE(hp) << hp.error().message;
  EXPECT_EQ(hp->host, c.host);
  EXPECT_EQ(hp->port, c.port);
  EXPECT_EQ(hp->ipv6_literal, c.ipv6);
}

INSTANTIATE_TEST_SUITE_P(
    Urls, SplitUrl,
    ::testing::Values(UrlCase{"http://127.0.0.1:8080/v1", "127.0.0.1", "8080"},
                      UrlCase{"http://localhost/v1/chat/completions", "localhost", "80"},
                      UrlCase{"https://api.example.com/v1", "api.example.com", "443"},
                      UrlCase{"https://api.example.com:8443", "api.example.com", "8443"},
                      UrlCase{"http://[::1]:9/v1", "::1", "9", true},
                      UrlCase{"https://[2001:db8::2]/v1", "2001:db8::2", "443", true}));

class BadUrl : public ::testing::TestWithParam<std::string> {};

TEST_P(BadUrl, IsInvalidAndNamesTheUrl) {
  auto hp = split_url(GetParam());
  ASSERT_FALSE(hp);
  EXPECT_EQ(hp.error().kind, ErrorKind::invalid);
  EXPECT_EQ(hp.error().message, GetParam() + ": not a URL (expected http://host:port/...)");
}

INSTANTIATE_TEST_SUITE_P(Urls, BadUrl,
                         ::testing::Values("", "not a url", "api.example.com/v1", "http://",
                                           "http://[::1/v1", "http://host:99999/v1"));

}  // namespace
}  // namespace korch::llm
