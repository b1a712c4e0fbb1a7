#pragma once
// A real, throwaway PostgreSQL 15 server for tests (scripts/pg-test-server.sh
// starts it: initdb into a temp dir, a unix socket in that dir, trust auth,
// run as an unprivileged user when the test runs as root). One server per test
// process, started on first use; it is stopped when the process exits, and a
// watchdog stops it if the process dies without exiting (a crash, kill -9).
//
//   auto& pg = korch::testing::PostgresServer::shared();
//   if (!pg.ok()) KORCH_SKIP_OR_FAIL(pg.error());   // fails under KORCH_CI=1
//   std::string url = pg.fresh_database();          // postgresql://korch@/korch_t3?host=...
//
// Thread-safety: shared() and fresh_database() may be called from any thread.
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>

#ifndef KORCH_SOURCE_DIR
#error "define KORCH_SOURCE_DIR (the checkout) for tests/support/postgres_server.hpp"
#endif

namespace korch::testing {

class PostgresServer {
 public:
  static PostgresServer& shared() {
    static PostgresServer server;
    return server;
  }

  ~PostgresServer() { stop(); }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // False when no server could be started; error() says why.
  bool ok() const { return !m_url.empty(); }
  const std::string& error() const { return m_error; }
  // The folder holding the server's socket, data and logs.
  const std::string& dir() const { return m_dir; }
  // The URL of `database` on this server (no password: trust auth).
  std::string url(const std::string& database) const {
    return "postgresql://korch@/" + database + "?host=" + m_dir + "&port=5432";
  }
  // Creates a new, empty database and returns its URL; "" (and error() set)
  // when that fails.
  std::string fresh_database() {
    std::lock_guard lock(m_mutex);
    std::string name = "korch_t" + std::to_string(++m_databases);
    std::string cmd = "psql -q -X -v ON_ERROR_STOP=1 '" + url("postgres") +
                      "' -c 'CREATE DATABASE " + name + "' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      m_error = "cannot create database " + name + " on the test server in " + m_dir;
      return "";
    }
    return url(name);
  }

  // Restarts the server (fast shutdown: every client connection is dropped).
  // True on success.
  bool restart() {
    std::lock_guard lock(m_mutex);
    std::string cmd = script() + " restart '" + m_dir + "' >/dev/null 2>&1";
    return !m_dir.empty() && std::system(cmd.c_str()) == 0;
  }

  void stop() {
    if (m_dir.empty()) return;
    std::string cmd = script() + " stop '" + m_dir + "' >/dev/null 2>&1";
    [[maybe_unused]] int rc = std::system(cmd.c_str());
    std::error_code ec;
    std::filesystem::remove_all(m_dir, ec);
    m_dir.clear();
    m_url.clear();
  }

 private:
  PostgresServer() {
    if (const char* skip = std::getenv("KORCH_TEST_NO_POSTGRES"); skip && *skip == '1') {
      m_error = "KORCH_TEST_NO_POSTGRES=1";
      return;
    }
    // Short and fixed-length: the socket path must fit in sun_path.
    std::string pattern = "/tmp/korch-pg-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      m_error = "mkdtemp failed";
      return;
    }
    m_dir = pattern;
    std::string cmd = script() + " start '" + m_dir + "' " + std::to_string(::getpid()) + " 2>&1";
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      std::array<char, 512> buf{};
      while (std::fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
      int rc = ::pclose(p);
      while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
      if (rc == 0 && out.rfind("postgresql://", 0) == 0) {
        m_url = out;
        return;
      }
    }
    m_error = "PostgreSQL test server did not start (" + out +
              "); install postgresql-15 (scripts/install-deps.sh)";
    stop();
  }

  static std::string script() {
    return std::string(KORCH_SOURCE_DIR) + "/scripts/pg-test-server.sh";
  }

  std::mutex m_mutex;
  std::string m_dir;
  std::string m_url;
  std::string m_error;
  int m_databases = 0;
};

}  // namespace korch::testing
