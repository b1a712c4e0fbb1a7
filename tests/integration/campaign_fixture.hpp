#pragma once
// Shared by the integration tests: a running korch-fake-llm process and a
// campaign config written into a temp dir, plus helpers to run `korch`.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace korch::testing {

// A korch-fake-llm child process on a free port.
class FakeLlmProcess {
 public:
  bool start(const std::string& dir, const std::vector<std::string>& extra) {
    m_out = dir + "/fake-llm.out";
    std::vector<std::string> argv = {KORCH_FAKE_LLM_BIN, "--port", "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    m_proc = Process::start(argv, m_out, dir + "/fake-llm.err");
    for (int i = 0; i < 500; ++i) {
      auto text = slurp(m_out);
      if (auto pos = text.find("PORT ");
          pos != std::string::npos && text.find('\n', pos) != std::string::npos) {
        m_port = std::stoi(text.substr(pos + 5));
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(m_port) + "/v1"; }

 private:
  Process m_proc;
  std::string m_out;
  int m_port = 0;
};

// Reads rows of a query from a database file with the SQLite C API (a second,
// independent reader of what korch wrote).
inline std::vector<std::vector<std::string>> query(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  std::vector<std::vector<std::string>> rows;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    // No rows from a database that is not there would pass every "no
    // duplicates" check: a test that queries expects the file.
    ADD_FAILURE() << "cannot open " << db << ": " << (h ? sqlite3_errmsg(h) : "out of memory");
    sqlite3_close(h);
    return rows;
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        auto* t = sqlite3_column_text(st, i);
        row.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
      }
      rows.push_back(std::move(row));
    }
  } else {
    ADD_FAILURE() << "bad query: " << sqlite3_errmsg(h);
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return rows;
}

// The first column of the first row of a query, or nullopt when the file,
// the table or the row is not there yet. Silent: for polling a database that
// a running korch is writing.
inline std::optional<std::string> poll_value(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  std::optional<std::string> value;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(h, 1000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      auto* t = sqlite3_column_text(st, 0);
      value = t ? reinterpret_cast<const char*>(t) : "";
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(h);
  return value;
}

// Polls `done` every 20 ms until it returns true (true), `process` exits or
// `timeout` passes (false). Tests wait for states, never for fixed times: a
// loaded 2-core CI machine can be slow at any step.
template <typename Pred>
bool wait_until(Process& process, Pred done,
                std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    if (process.wait_for(std::chrono::milliseconds(20))) return done();
  }
  return false;
}

// How many times the fake server received each request id: its --log file
// ("<unix seconds> <X-Request-Id>" per request), from line `skip` on.
inline std::map<std::string, int> receptions(const std::string& log_path, std::size_t skip = 0) {
  std::map<std::string, int> seen;
  std::ifstream log(log_path);
  std::string line;
  for (std::size_t i = 0; i < skip && std::getline(log, line); ++i) {}
  double t = 0;
  std::string id;
  while (log >> t >> id) ++seen[id];
  return seen;
}

inline std::size_t line_count(const std::string& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace korch::testing
