#pragma once
// Internal to korch_store: a thin RAII layer over the SQLite C API (STYLE.md
// habit 5, after Nix libstore/sqlite.hh). Only store/*.cpp include this file;
// no public header shows sqlite3*.
//
// Errors inside this layer are thrown as SqliteError and converted to
// korch::Error at every public Store method and at the writer thread's
// boundary; they never escape those.
#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>

#include "store/conn_internal.hpp"
#include "util/enum_names.hpp"

#include "util/error.hpp"

namespace korch::store::detail {

// A failed SQLite call. what() is one line: "<path>: <context>: <sqlite message>".
class SqliteError : public korch::Fatal {
 public:
  SqliteError(int code, const std::string& message) : korch::Fatal(message), m_code(code) {}
  // The extended SQLite result code.
  int code() const { return m_code; }
  // True for SQLITE_BUSY / SQLITE_LOCKED (and their extended codes).
  bool busy() const {
    int primary = m_code & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
  }

 private:
  int m_code;
};

// Delay before retry number `attempt` (0-based) after SQLITE_BUSY: grows from
// about 1 ms to at most k_max_retry_delay_ms, jittered by ±50% so that
// contending writers do not wake in lockstep. Pure apart from `rng`.
inline constexpr int k_max_retry_delay_ms = 50;
int retry_delay_ms(int attempt, std::mt19937_64& rng);

// A prepared statement, created once per connection and reused (reset before
// each use). Text is bound without copying: the bound data must outlive the
// step()s that use it.
class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql, const std::string& path);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Resets the statement, clears its bindings and binds `args` to ?1, ?2, ...
  // std::string/string_view/const char* bind as TEXT, integers and bool as
  // INTEGER, floating point as REAL, std::nullopt / empty optionals as NULL.
  template <typename... Args>
  Stmt& bind(const Args&... args) {
    reset();
    int index = 1;
    (bind_one(index++, args), ...);
    return *this;
  }

  // Steps once: true when a row is available, false when done. Throws
  // SqliteError on failure (constraint, busy, I/O ...).
  bool step();
  // Steps until done.
  void run() {
    while (step()) {}
  }

  // Column accessors for the current row (0-based).
  std::string text(int col) const;
  std::int64_t i64(int col) const { return sqlite3_column_int64(m_stmt, col); }
  int i32(int col) const { return sqlite3_column_int(m_stmt, col); }
  double f64(int col) const { return sqlite3_column_double(m_stmt, col); }
  bool is_null(int col) const { return sqlite3_column_type(m_stmt, col) == SQLITE_NULL; }
  std::optional<double> opt_f64(int col) const {
    if (is_null(col)) return std::nullopt;
    return f64(col);
  }
  // Throws the error for a stored value this binary cannot read.
  [[noreturn]] void throw_corrupt(const std::string& message) const {
    throw SqliteError(SQLITE_CORRUPT, message);
  }

 private:
  void reset();
  void bind_text(int index, std::string_view value);
  void bind_i64(int index, std::int64_t value);
  void bind_f64(int index, double value);
  void bind_null(int index);
  void check_bind(int rc, int index);

  template <typename T>
  void bind_one(int index, const T& value) {
    if constexpr (std::is_same_v<T, std::nullopt_t>) {
      bind_null(index);
    } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      bind_text(index, std::string_view(value));
    } else if constexpr (NamedEnum<T>) {
      bind_text(index, enum_name(value));  // its stored name (store/vocabulary.hpp)
    } else if constexpr (std::is_same_v<T, bool>) {
      bind_i64(index, value ? 1 : 0);
    } else if constexpr (std::is_integral_v<T>) {
      bind_i64(index, static_cast<std::int64_t>(value));
    } else if constexpr (std::is_floating_point_v<T>) {
      bind_f64(index, static_cast<double>(value));
    } else {
      // std::optional<U>
      if (value.has_value()) {
        bind_one(index, *value);
      } else {
        bind_null(index);
      }
    }
  }

  sqlite3* m_db;
  sqlite3_stmt* m_stmt = nullptr;
  const std::string& m_path;
};

// One SQLite connection, used by one thread at a time, with its cache of
// prepared statements.
class Db {
 public:
  using Stmt = detail::Stmt;
  enum class Mode { read_write, read_only };

  // Opens `path`. read_write creates the file if missing. Throws SqliteError
  // naming the path on failure. Sets busy_timeout.
  Db(const std::string& path, Mode mode, int busy_timeout_ms);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* get() const { return m_db; }
  const std::string& path() const { return m_path; }
  int busy_timeout_ms() const { return m_busy_timeout_ms; }

  // Runs one or more SQL statements without results. Throws SqliteError.
  void exec(std::string_view sql, std::string_view context = {});
  // Returns the cached prepared statement for `sql`, preparing it on first use.
  Stmt& stmt(std::string_view sql);
  // Rows changed by the last INSERT/UPDATE/DELETE on this connection.
  std::int64_t changes() const { return sqlite3_changes64(m_db); }
  // Runs a PRAGMA (or any statement) that returns one value and returns it as text.
  std::string query_text(std::string_view sql);
  std::int64_t query_i64(std::string_view sql);

  // Throws SqliteError for `rc` with this connection's message and path.
  [[noreturn]] void throw_error(int rc, std::string_view context) const;

 private:
  std::string m_path;
  sqlite3* m_db = nullptr;
  int m_busy_timeout_ms;
  StmtCache<Stmt> m_stmts;
};

// Runs `fn` and retries it while it throws a busy SqliteError, with jittered
// sleeps (retry_delay_ms), until about `timeout_ms` have passed; then rethrows.
// `fn` must be safe to repeat (it is: a BEGIN, a COMMIT, or a whole
// transaction that rolled back).
void retry_busy(const std::function<void()>& fn, int timeout_ms);

// RAII transaction: BEGIN IMMEDIATE (writes) or BEGIN DEFERRED (reads); rolls
// back in the destructor unless commit() succeeded. BEGIN and COMMIT retry on
// SQLITE_BUSY.
class Txn {
 public:
  enum class Kind { immediate, deferred };
  Txn(Db& db, Kind kind);
  ~Txn();
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  // Commits; throws SqliteError (the transaction is then rolled back by the destructor).
  void commit();

 private:
  Db& m_db;
  bool m_active = false;
};

}  // namespace korch::store::detail
