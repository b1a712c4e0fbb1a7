#pragma once
// Shared by the integration tests: a running korch-fake-llm process and a
// campaign config written into a temp dir, plus helpers to run `korch`.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
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
      if (auto pos = text.find("PORT "); pos != std::string::npos && text.find('\n', pos) != std::string::npos) {
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

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace korch::testing
