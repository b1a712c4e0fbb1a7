#include "llm_clients/probe.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace korch::llm {
namespace {

struct HostPort {
  std::string host;
  std::string port;
};

Result<HostPort> split_url(const std::string& url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return fail(url + ": not a URL (expected http://host:port/...)");
  auto scheme = url.substr(0, scheme_end);
  auto rest = url.substr(scheme_end + 3);
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  if (auto at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
  HostPort hp;
  if (!authority.empty() && authority[0] == '[') {
    auto close = authority.find(']');
    hp.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') hp.port = authority.substr(close + 2);
  } else if (auto colon = authority.rfind(':'); colon != std::string::npos) {
    hp.host = authority.substr(0, colon);
    hp.port = authority.substr(colon + 1);
  } else {
    hp.host = authority;
  }
  if (hp.port.empty()) hp.port = scheme == "https" ? "443" : "80";
  if (hp.host.empty()) return fail(url + ": no host");
  return hp;
}

}  // namespace

Result<void> probe_endpoint(const std::string& base_url, double timeout_s) {
  auto hp = split_url(base_url);
  if (!hp) return std::unexpected(hp.error());
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(hp->host.c_str(), hp->port.c_str(), &hints, &res); rc != 0) {
    return fail(base_url + ": cannot resolve host '" + hp->host + "': " + ::gai_strerror(rc));
  }
  std::string last_error = "no address";
  for (auto* ai = res; ai; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int polled = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
      if (polled == 1) {
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        rc = -1;
        if (polled == 0) errno = ETIMEDOUT;
      }
    }
    int saved = errno;
    ::close(fd);
    if (rc == 0) {
      ::freeaddrinfo(res);
      return {};
    }
    last_error = std::strerror(saved);
  }
  ::freeaddrinfo(res);
  return fail(base_url + ": cannot connect: " + last_error);
}

}  // namespace korch::llm
