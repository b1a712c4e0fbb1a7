#include "llm_clients/probe.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "llm_clients/curl_handles.hpp"
#include "llm_clients/url.hpp"

namespace korch::llm {
namespace {

struct AddrinfoDeleter {
  void operator()(addrinfo* ai) const { ::freeaddrinfo(ai); }
};

// Connects `ai`'s non-blocking socket within `timeout_s`; 0 or an errno.
int try_connect(const addrinfo& ai, double timeout_s) {
  curl::Fd fd(
      ::socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol));
  if (!fd.valid()) return errno;
  if (::connect(fd.get(), ai.ai_addr, ai.ai_addrlen) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  pollfd p{fd.get(), POLLOUT, 0};
  const int polled = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
  if (polled == 0) return ETIMEDOUT;
  if (polled < 0) return errno;
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

}  // namespace

Result<void> probe_endpoint(const std::string& base_url, double timeout_s) {
  // Every failure of the probe is "cannot reach the endpoint", a URL that
  // does not parse included (the config loader has checked the scheme).
  auto hp = split_url(base_url);
  if (!hp) return fail(ErrorKind::unavailable, hp.error().message);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  if (int rc = ::getaddrinfo(hp->host.c_str(), hp->port.c_str(), &hints, &raw); rc != 0) {
    return fail(ErrorKind::unavailable,
                base_url + ": cannot resolve host '" + hp->host + "': " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, AddrinfoDeleter> res(raw);
  std::string last_error = "no address";
  for (const addrinfo* ai = res.get(); ai != nullptr; ai = ai->ai_next) {
    const int err = try_connect(*ai, timeout_s);
    if (err == 0) return {};
    last_error = std::strerror(err);
  }
  return fail(ErrorKind::unavailable, base_url + ": cannot connect: " + last_error);
}

}  // namespace korch::llm
