#pragma once
// A real `korch serve` process on loopback for the API, OpenEnv and kill
// tests: started with fork+exec, its ports read from its "LISTEN" lines,
// talked to with cpp-httplib's client.
#include <httplib.h>

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

inline nlohmann::json body_json(const httplib::Result& r) {
  if (!r) return nlohmann::json();
  return nlohmann::json::parse(r->body, nullptr, false);
}

}  // namespace korch::testing
