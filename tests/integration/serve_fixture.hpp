#pragma once
// A real `korch serve` process on loopback for the API, OpenEnv and kill
// tests: started with fork+exec, its ports read from its "LISTEN" lines,
// talked to with cpp-httplib's client.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "tests/integration/campaign_fixture.hpp"

namespace korch::testing {

class ServeProcess {
 public:
  // Starts `korch serve --db DB --listen 127.0.0.1:0 EXTRA...`; waits for its ports.
  bool start(const std::string& dir, const std::string& db,
             const std::vector<std::string>& extra = {},
             const std::map<std::string, std::string>& env = {}) {
    static int starts = 0;  // every process of a test its own files
    m_out = dir + "/serve-" + std::to_string(starts) + ".out";
    m_err = dir + "/serve-" + std::to_string(starts) + ".err";
    ++starts;
    std::vector<std::string> argv = {KORCH_BIN, "serve", "--db", db, "--listen", "127.0.0.1:0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    m_proc = Process::start(argv, m_out, m_err, env);
    for (int i = 0; i < 1500; ++i) {
      auto text = slurp(m_out);
      if (auto pos = text.find("LISTEN api ");
          pos != std::string::npos && text.find('\n', pos) != std::string::npos) {
        m_port = std::stoi(text.substr(pos + 11));
        if (auto e = text.find("LISTEN env "); e != std::string::npos)
          m_env_port = std::stoi(text.substr(e + 11));
        bool want_env = std::find(extra.begin(), extra.end(), "--env-listen") != extra.end();
        if (!want_env || m_env_port > 0) return true;
      }
      if (m_proc.wait_for(std::chrono::milliseconds(20))) return false;
    }
    return false;
  }
  int port() const { return m_port; }
  int env_port() const { return m_env_port; }
  Process& process() { return m_proc; }
  // SIGTERM, then waits: the daemon's exit status (0 when it stopped cleanly).
  int terminate() {
    m_proc.signal(SIGTERM);
    return m_proc.wait();
  }
  std::string err() const { return slurp(m_err); }

  httplib::Client client(const std::string& token = "") const {
    httplib::Client c("127.0.0.1", m_port);
    c.set_read_timeout(60, 0);
    c.set_connection_timeout(5, 0);
    if (!token.empty()) c.set_bearer_token_auth(token.c_str());
    return c;
  }

 private:
  Process m_proc;
  std::string m_out, m_err;
  int m_port = 0, m_env_port = 0;
};

// A response read off a raw socket: what a client that writes its own bytes
// (curl's habits: no Content-Length on a bodiless POST, chunked uploads)
// gets. status 0: no response within the timeout.
struct RawReply {
  int status = 0;
  std::string head, body;
  double seconds = 0;
};

// Sends `request` (bytes as they are) to 127.0.0.1:port and reads until the
// server closes or `timeout_s` passes; send "Connection: close" requests.
inline RawReply raw_http(int port, const std::string& request, double timeout_s = 5) {
  RawReply out;
  auto t0 = std::chrono::steady_clock::now();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return out;
  }
  timeval tv{static_cast<time_t>(timeout_s),
             static_cast<suseconds_t>((timeout_s - static_cast<int>(timeout_s)) * 1e6)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (std::size_t sent = 0; sent < request.size();) {
    auto n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string all;
  char buf[65536];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    all.append(buf, static_cast<std::size_t>(n));
    auto end = all.find("\r\n\r\n");
    if (end == std::string::npos) continue;
    // Stop once a Content-Length response is complete (keep-alive servers).
    auto cl = all.find("Content-Length: ");
    if (cl != std::string::npos && cl < end) {
      auto len = std::stoul(all.substr(cl + 16));
      if (all.size() >= end + 4 + len) break;
    }
  }
  ::close(fd);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto end = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return out;
  out.status = std::stoi(all.substr(9, 3));
  out.head = all.substr(0, end);
  out.body = all.substr(end + 4);
  return out;
}

// The value of the Prometheus sample `name{labels}` in `text`, 0 if absent.
inline double metric_value(const std::string& text, const std::string& series) {
  auto pos = text.find("\n" + series + " ");
  if (pos == std::string::npos) return 0;
  return std::stod(text.substr(pos + 1 + series.size() + 1));
}

inline nlohmann::json body_json(const httplib::Result& r) {
  if (!r) return nlohmann::json();
  return nlohmann::json::parse(r->body, nullptr, false);
}

// GET /health needs no token and answers 200 with {"status": `status`}.
inline void expect_health(httplib::Client& c, const std::string& status) {
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(body_json(h)["status"], status);
}

}  // namespace korch::testing
