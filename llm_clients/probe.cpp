#include "llm_clients/probe.hpp"

#include <curl/curl.h>
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

// Host and port (the scheme's default when absent) of `url`, with libcurl's
// URL parser, the same one the client uses (client.cpp, resolve_entry).
Result<HostPort> split_url(const std::string& url) {
  CURLU* h = curl_url();
  if (h == nullptr) return fail(url + ": out of memory");
  char* host = nullptr;
  char* port = nullptr;
  HostPort hp;
  bool ok = curl_url_set(h, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK &&
            curl_url_get(h, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
            curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK;
  if (ok) {
    hp.host = host;
    hp.port = port;
    // An IPv6 literal comes back as "[::1]"; getaddrinfo wants "::1".
    if (hp.host.size() > 1 && hp.host.front() == '[' && hp.host.back() == ']') {
      hp.host = hp.host.substr(1, hp.host.size() - 2);
    }
  }
  curl_free(host);
  curl_free(port);
  curl_url_cleanup(h);
  if (!ok || hp.host.empty()) return fail(url + ": not a URL (expected http://host:port/...)");
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
