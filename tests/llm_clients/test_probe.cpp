// llm_clients/probe.hpp: the reachability check before a run, against a
// listening loopback socket, a closed port and names that do not resolve.
#include "llm_clients/probe.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

namespace korch::llm {
namespace {

// A listening TCP socket on 127.0.0.1 (any free port); nothing accepts, the
// kernel completes the handshake from its backlog.
class Listener {
 public:
  Listener() {
    m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (m_fd < 0 || ::bind(m_fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(m_fd, 16) != 0 ||
        ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    m_port = ntohs(addr.sin_port);
  }
  ~Listener() {
    if (m_fd >= 0) ::close(m_fd);
  }
  int port() const { return m_port; }

 private:
  int m_fd = -1;
  int m_port = 0;
};

// A loopback port with nothing listening: bound then closed.
int closed_port() {
  Listener l;
  return l.port();
}

TEST(Probe, ReachableEndpointPasses) {
  Listener l;
  ASSERT_NE(l.port(), 0);
  auto r = probe_endpoint("http://127.0.0.1:" + std::to_string(l.port()) + "/v1", 2);
  EXPECT_TRUE(r) << r.error().message;
  auto named = probe_endpoint("http://localhost:" + std::to_string(l.port()) + "/v1", 2);
  EXPECT_TRUE(named) << named.error().message;
}

TEST(Probe, ClosedPortIsUnavailable) {
  const int port = closed_port();
  ASSERT_NE(port, 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  auto r = probe_endpoint(url, 2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::unavailable);
  EXPECT_EQ(r.error().message.rfind(url + ": cannot connect: ", 0), 0u) << r.error().message;
}

TEST(Probe, UnresolvableHostIsUnavailable) {
  const std::string url = "http://no-such-host.invalid:9/v1";
  auto r = probe_endpoint(url, 2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::unavailable);
  EXPECT_EQ(r.error().message.rfind(url + ": cannot resolve host 'no-such-host.invalid': ", 0), 0u)
      << r.error().message;
}

TEST(Probe, UnparsableUrlIsUnavailableAndSaysSo) {
  auto r = probe_endpoint("http://", 2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::unavailable);
  EXPECT_EQ(r.error().message, "http://: not a URL (expected http://host:port/...)");
}

}  // namespace
}  // namespace korch::llm
