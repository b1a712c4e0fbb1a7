#pragma once
// Internal to korch_store: a thin RAII layer over libpq (PostgreSQL's C API)
// that offers what sqlite_internal.hpp offers for SQLite, with the same
// names, so that the queries (read.cpp), the batch rules (apply_internal.hpp)
// and the codecs serve both backends. Only store/*.cpp include this file; no
// public header shows PGconn*.
//
// SQL is written once, in the dialect both engines run, with ?1, ?2, ...
// placeholders; PgConn::stmt turns them into $1, $2, ... Values travel as
// text (integers in decimal, doubles in their shortest round-trip form), so a
// double read back is bit-identical to the one written.
//
// Errors inside this layer are thrown as PgError, whose message names the
// store by its redacted URL (never a password), and converted to korch::Error
// at every public Store method and at the writer thread's boundary.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "store/conn_internal.hpp"
#include "util/enum_names.hpp"
#include "util/error.hpp"

struct pg_conn;
struct pg_result;

namespace korch::store::detail {

// A failed libpq call. what() is one line: "<redacted url>: <context>: <message>".
class PgError : public korch::Fatal {
 public:
  PgError(std::string sqlstate, bool connection_lost, const std::string& message)
      : korch::Fatal(message),
        m_sqlstate(std::move(sqlstate)),
        m_connection_lost(connection_lost) {}
  // The five-character SQLSTATE ("" when the server sent none).
  const std::string& sqlstate() const { return m_sqlstate; }
  // True when the connection broke (server gone, restarted, network).
  bool connection_lost() const { return m_connection_lost; }

 private:
  std::string m_sqlstate;
  bool m_connection_lost;
};

// "postgresql://u:****@host/db?password=****": `url` with every password
// replaced. Same as store::redact_url; here for the layer's messages.
std::string redacted(std::string_view url);

class PgConn;

// A prepared statement of one connection, created once and reused. bind()
// copies its values (unlike SQLite's Stmt), step() runs the statement on the
// first call after bind() and then walks its rows.
class PgStmt {
 public:
  PgStmt(PgConn& conn, std::string name, int params);
  ~PgStmt();
  PgStmt(const PgStmt&) = delete;
  PgStmt& operator=(const PgStmt&) = delete;

  // Clears the previous result and binds `args` to $1, $2, ... (the same
  // types as Stmt::bind: strings, integers, bool as 0/1, doubles, named
  // enums by their names, nullopt / empty optionals as NULL).
  template <typename... Args>
  PgStmt& bind(const Args&... args) {
    reset();
    (bind_one(args), ...);
    return *this;
  }

  // Runs the statement on the first call after bind(); true while a row is
  // available. Throws PgError on failure.
  bool step();
  // Runs the statement (if not yet run) and walks past its rows.
  void run() {
    while (step()) {}
  }

  std::string text(int col) const;
  std::int64_t i64(int col) const;
  int i32(int col) const { return static_cast<int>(i64(col)); }
  double f64(int col) const;
  bool is_null(int col) const;
  std::optional<double> opt_f64(int col) const {
    if (is_null(col)) return std::nullopt;
    return f64(col);
  }
  [[noreturn]] void throw_corrupt(const std::string& message) const;

 private:
  void reset();
  // PostgreSQL's text cannot hold a NUL byte (and libpq's text parameters
  // end at one): refused with an error rather than cut short.
  void bind_text(std::string_view value);
  void bind_i64(std::int64_t value) { m_values.emplace_back(std::to_string(value)); }
  void bind_f64(double value);
  void bind_null() { m_values.emplace_back(std::nullopt); }

  template <typename T>
  void bind_one(const T& value) {
    if constexpr (std::is_same_v<T, std::nullopt_t>) {
      bind_null();
    } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      bind_text(std::string_view(value));
    } else if constexpr (NamedEnum<T>) {
      bind_text(enum_name(value));
    } else if constexpr (std::is_same_v<T, bool>) {
      bind_i64(value ? 1 : 0);
    } else if constexpr (std::is_integral_v<T>) {
      bind_i64(static_cast<std::int64_t>(value));
    } else if constexpr (std::is_floating_point_v<T>) {
      bind_f64(static_cast<double>(value));
    } else {
      if (value.has_value()) {
        bind_one(*value);
      } else {
        bind_null();
      }
    }
  }

  PgConn& m_conn;
  std::string m_name;
  int m_params;
  std::vector<std::optional<std::string>> m_values;
  pg_result* m_result = nullptr;
  bool m_ran = false;
  int m_row = -1;
  int m_rows = 0;
};

// One libpq connection, used by one thread at a time, with its cache of
// prepared statements.
class PgConn {
 public:
  using Stmt = PgStmt;

  // Connects to `url` (a postgres:// or postgresql:// URL, libpq's syntax).
  // Throws PgError naming the redacted URL on failure. A read-only connection
  // refuses writes (default_transaction_read_only).
  PgConn(const std::string& url, bool read_only, bool synchronous_commit);
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  pg_conn* get() const { return m_conn; }
  // The redacted URL: what messages and logs name.
  const std::string& path() const { return m_name; }

  // Runs one or more SQL statements without parameters or results. Throws PgError.
  void exec(std::string_view sql, std::string_view context = {});
  // Returns the cached prepared statement for `sql` (?N placeholders),
  // preparing it on first use.
  PgStmt& stmt(std::string_view sql);
  // Rows changed by the last INSERT/UPDATE/DELETE run on this connection.
  std::int64_t changes() const { return m_changes; }
  void set_changes(std::int64_t n) { m_changes = n; }
  std::int64_t query_i64(std::string_view sql);

  // True when the connection is broken (the server went away).
  bool broken() const;
  // Throws PgError for a failed result (or a broken connection when
  // `result` is null), with this connection's message. Clears `result`.
  [[noreturn]] void throw_error(pg_result* result, std::string_view context) const;

 private:
  std::string m_url;
  std::string m_name;
  pg_conn* m_conn = nullptr;
  std::int64_t m_changes = 0;
  int m_next_stmt = 0;
  StmtCache<PgStmt> m_stmts;
};

// RAII transaction: BEGIN (READ COMMITTED, for writes) or BEGIN ISOLATION
// LEVEL REPEATABLE READ READ ONLY (reads: one snapshot for every statement);
// rolls back in the destructor unless commit() succeeded.
class PgTxn {
 public:
  enum class Kind { write, snapshot };
  PgTxn(PgConn& conn, Kind kind);
  ~PgTxn();
  PgTxn(const PgTxn&) = delete;
  PgTxn& operator=(const PgTxn&) = delete;
  void commit();

 private:
  PgConn& m_conn;
  bool m_active = false;
};

// ?1, ?2, ... -> $1, $2, ... outside quoted literals and identifiers.
std::string to_dollar_params(std::string_view sql, int* params = nullptr);

}  // namespace korch::store::detail
