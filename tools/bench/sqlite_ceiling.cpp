// korch-bench-sqlite-ceiling: the most turns per second SQLite itself can
// make durable on this machine, with none of korch's work around it — the
// ceiling that korch-bench-store's figures are to be read against.
//
//   korch-bench-sqlite-ceiling [--db PATH] [--seconds S] [--group N]
//                              [--page-size B] [--synchronous MODE]
//                              [--turn-bytes B] [--rows-per-turn R]
//
// The most favourable case SQLite offers for korch's turn: one table with
// integer keys appended in order (no secondary index, no text key, no
// upsert), a turn's bytes split into R rows (default 4: the reply, the code,
// the feedback and the report of korch-bench-store's turn, 14.5 KB), N turns
// per transaction (default 1000, more than korch ever groups), WAL with
// synchronous=FULL (an fsync per commit) and SQLite's own automatic
// checkpoints, one thread, prepared statement reused. It prints turns/s and
// the bytes the process wrote per turn (/proc/self/io: WAL frames and
// checkpoint copies). Same incompressible-ish text as korch-bench-store.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/bench/store_bench.hpp"

namespace {

using korch::bench::disk_write_bytes;
using korch::bench::now_s;
using korch::bench::text;

void exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::fprintf(stderr, "korch-bench-sqlite-ceiling: %s: %s\n", sql.c_str(), err ? err : "?");
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  double seconds = 5;
  int group = 1000, page_size = 4096, rows_per_turn = 4;
  std::size_t turn_bytes = 14848;  // 6 KB + 5 KB + 2 KB + 1.5 KB
  std::string synchronous = "FULL";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "korch-bench-sqlite-ceiling: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--db")
      path = next();
    else if (a == "--seconds")
      seconds = std::atof(next().c_str());
    else if (a == "--group")
      group = std::atoi(next().c_str());
    else if (a == "--page-size")
      page_size = std::atoi(next().c_str());
    else if (a == "--synchronous")
      synchronous = next();
    else if (a == "--turn-bytes")
      turn_bytes = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--rows-per-turn")
      rows_per_turn = std::atoi(next().c_str());
    else {
      std::fprintf(stderr,
                   "usage: korch-bench-sqlite-ceiling [--db PATH] [--seconds S] [--group N] "
                   "[--page-size B] [--synchronous MODE] [--turn-bytes B] [--rows-per-turn R]\n");
      return 2;
    }
  }
  if (group < 1 || rows_per_turn < 1 || turn_bytes < static_cast<std::size_t>(rows_per_turn)) {
    std::fprintf(stderr, "korch-bench-sqlite-ceiling: bad --group/--rows-per-turn/--turn-bytes\n");
    return 2;
  }
  std::filesystem::path dir;
  if (path.empty()) {
    dir = std::filesystem::temp_directory_path() / ("korch-ceiling-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    path = (dir / "ceiling.db").string();
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);

  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    std::fprintf(stderr, "korch-bench-sqlite-ceiling: cannot open %s\n", path.c_str());
    return 1;
  }
  exec(db, "PRAGMA page_size=" + std::to_string(page_size));
  exec(db, "PRAGMA journal_mode=WAL");
  exec(db, "PRAGMA synchronous=" + synchronous);
  exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)");
  sqlite3_stmt* insert = nullptr;
  sqlite3_prepare_v3(db, "INSERT INTO t (body) VALUES (?1)", -1, SQLITE_PREPARE_PERSISTENT, &insert,
                     nullptr);
  std::vector<std::string> rows;
  for (int r = 0; r < rows_per_turn; ++r) rows.push_back(text(turn_bytes / rows_per_turn, 2 + r));

  const std::int64_t bytes0 = disk_write_bytes();
  const double t0 = now_s();
  long long turns = 0, commits = 0;
  while (now_s() - t0 < seconds) {
    exec(db, "BEGIN IMMEDIATE");
    for (int g = 0; g < group; ++g) {
      for (auto& body : rows) {
        sqlite3_bind_text(insert, 1, body.data(), static_cast<int>(body.size()), SQLITE_STATIC);
        if (sqlite3_step(insert) != SQLITE_DONE) {
          std::fprintf(stderr, "korch-bench-sqlite-ceiling: insert: %s\n", sqlite3_errmsg(db));
          return 1;
        }
        sqlite3_reset(insert);
      }
    }
    exec(db, "COMMIT");
    turns += group;
    ++commits;
  }
  const double wall = now_s() - t0;
  const std::int64_t bytes1 = disk_write_bytes();
  const double kb_per_turn =
      bytes0 < 0 || bytes1 < 0 ? -1 : (bytes1 - bytes0) / 1024.0 / std::max(turns, 1LL);
  std::printf(
      "sqlite ceiling: %lld turns of %zu B in %d rows, %d per commit, page %d, synchronous=%s: "
      "%.0f turns/s (%.1f MB/s of rows), %.1f KB written per turn (-1: unknown), %lld commits in "
      "%.2f s\n",
      turns, turn_bytes, rows_per_turn, group, page_size, synchronous.c_str(), turns / wall,
      turns * static_cast<double>(turn_bytes) / wall / 1e6, kb_per_turn, commits, wall);
  sqlite3_finalize(insert);
  sqlite3_close(db);
  if (!dir.empty()) std::filesystem::remove_all(dir);
  return 0;
}
