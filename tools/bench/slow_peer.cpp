// korch-bench-peer: a slow OpenAI-compatible peer for load benchmarks. One
// thread, epoll, HTTP/1.1 keep-alive, no framework: it holds every POST for
// --latency-ms and then answers a fixed chat completion, so thousands of
// concurrent slow requests cost no threads (DESIGN §7: cpp-httplib cannot).
//   korch-bench-peer [--port N] [--host H] [--latency-ms N] [--reply-file FILE]
// Prints "PORT <n>" as the first stdout line. Each reply carries
// "x-request-id: peer-hold-<us>", the time the peer held that request (from
// its last byte received to the reply being written), so a client can
// subtract server-side latency from what it measured. GET /health answers at
// once. Runs until SIGINT/SIGTERM.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr int k_backlog = 65535;  // the kernel clamps it to somaxconn
constexpr std::size_t k_max_request = 16u << 20;
constexpr int k_epoll_batch = 1024;
constexpr const char* k_default_reply = "Hello from korch-bench-peer.";

volatile sig_atomic_t g_stop = 0;

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 16);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out;
}

struct Conn {
  int fd = -1;
  std::uint64_t generation = 0;  // bumped when the fd slot is reused
  std::string in;
  std::string out;
  std::size_t out_off = 0;
  bool want_write = false;
};

struct Pending {
  std::int64_t due_us;
  std::int64_t received_us;
  int fd;
  std::uint64_t generation;
  std::size_t prompt_bytes;
};

class Peer {
 public:
  Peer(std::int64_t latency_us, std::string content)
      : m_latency_us(latency_us),
        m_content_json(json_escape(content)),
        m_content_tokens(static_cast<std::int64_t>(content.size() / 4 + 1)) {}

  bool listen_on(const std::string& host, int port) {
    m_listen = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(m_listen, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return false;
    if (bind(m_listen, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return false;
    if (listen(m_listen, k_backlog) != 0) return false;
    socklen_t len = sizeof addr;
    getsockname(m_listen, reinterpret_cast<sockaddr*>(&addr), &len);
    m_port = ntohs(addr.sin_port);
    m_epoll = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = m_listen;
    epoll_ctl(m_epoll, EPOLL_CTL_ADD, m_listen, &ev);
    return true;
  }

  int port() const { return m_port; }

  void run() {
    std::vector<epoll_event> events(k_epoll_batch);
    while (!g_stop) {
      int timeout_ms = 1000;
      if (!m_pending.empty()) {
        const std::int64_t wait = m_pending.front().due_us - now_us();
        timeout_ms = wait <= 0 ? 0 : static_cast<int>((wait + 999) / 1000);
      }
      const int n = epoll_wait(m_epoll, events.data(), k_epoll_batch, timeout_ms);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == m_listen) {
          accept_all();
          continue;
        }
        if (events[i].events & (EPOLLERR | EPOLLHUP)) {
          close_conn(fd);
          continue;
        }
        if (events[i].events & EPOLLIN) on_readable(fd);
        if ((events[i].events & EPOLLOUT) && conn(fd).fd == fd) flush(fd);
      }
      fire_due();
    }
  }

 private:
  Conn& conn(int fd) {
    if (static_cast<std::size_t>(fd) >= m_conns.size())
      m_conns.resize(static_cast<std::size_t>(fd) + 1024);
    return m_conns[static_cast<std::size_t>(fd)];
  }

  void accept_all() {
    for (;;) {
      const int fd = accept4(m_listen, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or EMFILE (the client retries)
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Conn& c = conn(fd);
      c.fd = fd;
      ++c.generation;
      c.in.clear();
      c.out.clear();
      c.out_off = 0;
      c.want_write = false;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = fd;
      epoll_ctl(m_epoll, EPOLL_CTL_ADD, fd, &ev);
    }
  }

  void close_conn(int fd) {
    Conn& c = conn(fd);
    if (c.fd < 0) return;
    epoll_ctl(m_epoll, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    c.fd = -1;
    ++c.generation;  // invalidates pending replies
    c.in.clear();
    c.out.clear();
  }

  void on_readable(int fd) {
    Conn& c = conn(fd);
    char buf[65536];
    for (;;) {
      const ssize_t r = read(fd, buf, sizeof buf);
      if (r > 0) {
        c.in.append(buf, static_cast<std::size_t>(r));
        if (c.in.size() > k_max_request) {
          close_conn(fd);
          return;
        }
        continue;
      }
      if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        close_conn(fd);
        return;
      }
      if (errno == EAGAIN) break;
    }
    parse_requests(fd);
  }

  void parse_requests(int fd) {
    Conn& c = conn(fd);
    std::size_t consumed = 0;
    for (;;) {
      std::string_view rest(c.in.data() + consumed, c.in.size() - consumed);
      const std::size_t end = rest.find("\r\n\r\n");
      if (end == std::string_view::npos) break;
      const std::string_view head = rest.substr(0, end);
      std::size_t length = 0;
      // Content-Length, case-insensitively.
      for (std::size_t pos = 0; pos < head.size();) {
        std::size_t eol = head.find("\r\n", pos);
        if (eol == std::string_view::npos) eol = head.size();
        std::string_view line = head.substr(pos, eol - pos);
        if (line.size() > 15 && strncasecmp(line.data(), "content-length:", 15) == 0) {
          length = std::strtoull(std::string(line.substr(15)).c_str(), nullptr, 10);
        }
        pos = eol + 2;
      }
      if (rest.size() < end + 4 + length) break;
      const bool is_get = head.starts_with("GET ");
      consumed += end + 4 + length;
      if (is_get) {
        const std::string body = "{\"status\":\"ok\"}";
        queue_write(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body);
      } else {
        const std::int64_t now = now_us();
        m_pending.push_back({now + m_latency_us, now, fd, c.generation, length});
      }
    }
    c.in.erase(0, consumed);
  }

  void fire_due() {
    const std::int64_t now = now_us();
    while (!m_pending.empty() && m_pending.front().due_us <= now) {
      Pending p = m_pending.front();
      m_pending.pop_front();
      Conn& c = conn(p.fd);
      if (c.fd != p.fd || c.generation != p.generation) continue;  // client went away
      const std::int64_t prompt_tokens = static_cast<std::int64_t>(p.prompt_bytes / 4 + 1);
      std::string body;
      body.reserve(m_content_json.size() + 320);
      body +=
          R"({"id":"chatcmpl-peer","object":"chat.completion","created":0,"model":"peer","choices":[{"index":0,"message":{"role":"assistant","content":")";
      body += m_content_json;
      body += R"("},"finish_reason":"stop"}],"usage":{"prompt_tokens":)";
      body += std::to_string(prompt_tokens);
      body += R"(,"completion_tokens":)";
      body += std::to_string(m_content_tokens);
      body += R"(,"total_tokens":)";
      body += std::to_string(prompt_tokens + m_content_tokens);
      body += "}}";
      const std::int64_t held = now_us() - p.received_us;
      queue_write(p.fd,
                  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nx-request-id: peer-hold-" +
                      std::to_string(held) + "\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\n\r\n" + body);
    }
  }

  void queue_write(int fd, std::string data) {
    Conn& c = conn(fd);
    c.out += data;
    flush(fd);
  }

  void flush(int fd) {
    Conn& c = conn(fd);
    while (c.out_off < c.out.size()) {
      const ssize_t w = send(fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (w > 0) {
        c.out_off += static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) break;
      close_conn(fd);
      return;
    }
    const bool pending = c.out_off < c.out.size();
    if (!pending) {
      c.out.clear();
      c.out_off = 0;
    }
    if (pending != c.want_write) {
      c.want_write = pending;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP | (pending ? EPOLLOUT : 0u);
      ev.data.fd = fd;
      epoll_ctl(m_epoll, EPOLL_CTL_MOD, fd, &ev);
    }
  }

  std::int64_t m_latency_us;
  std::string m_content_json;
  std::int64_t m_content_tokens;
  int m_listen = -1;
  int m_epoll = -1;
  int m_port = 0;
  std::vector<Conn> m_conns;
  // Constant latency: deadlines are pushed in increasing order, so a FIFO is
  // a sorted deadline queue.
  std::deque<Pending> m_pending;
};

void on_signal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  std::string host = "127.0.0.1";
  std::int64_t latency_ms = 1000;
  std::string content = k_default_reply;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (i + 1 >= argc && arg != "--help") {
      std::fprintf(stderr, "korch-bench-peer: %s needs a value\n", argv[i]);
      return 2;
    }
    if (arg == "--port") {
      port = std::atoi(argv[++i]);
    } else if (arg == "--host") {
      host = argv[++i];
    } else if (arg == "--latency-ms") {
      latency_ms = std::atoll(argv[++i]);
    } else if (arg == "--reply-file") {
      std::ifstream in(argv[++i], std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "korch-bench-peer: cannot read %s\n", argv[i]);
        return 2;
      }
      std::stringstream ss;
      ss << in.rdbuf();
      content = ss.str();
    } else {
      std::fprintf(
          stderr,
          "usage: korch-bench-peer [--port N] [--host H] [--latency-ms N] [--reply-file FILE]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  Peer peer(latency_ms * 1000, content);
  if (!peer.listen_on(host, port)) {
    std::fprintf(stderr, "korch-bench-peer: cannot listen on %s:%d: %s\n", host.c_str(), port,
                 std::strerror(errno));
    return 1;
  }
  std::printf("PORT %d\n", peer.port());
  std::fflush(stdout);
  peer.run();
  return 0;
}
