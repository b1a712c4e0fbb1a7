// The libpq layer of the PostgreSQL backend (pg_internal.hpp).
#include <libpq-fe.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "store/pg_internal.hpp"
#include "store/store.hpp"
#include "util/log.hpp"

namespace korch::store::detail {

std::string redacted(std::string_view url) { return redact_url(url); }

std::string to_dollar_params(std::string_view sql, int* params) {
  std::string out;
  out.reserve(sql.size());
  char quote = 0;
  int highest = 0;
  for (std::size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
      out += c;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      out += c;
      continue;
    }
    if (c == '?' && i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9') {
      int n = 0;
      std::size_t j = i + 1;
      while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9') n = n * 10 + (sql[j++] - '0');
      if (n > highest) highest = n;
      out += '$';
      out.append(sql.substr(i + 1, j - i - 1));
      i = j - 1;
      continue;
    }
    out += c;
  }
  if (params != nullptr) *params = highest;
  return out;
}

namespace {

// Notices (e.g. "relation already exists, skipping") go to the debug log,
// not to stderr as libpq's default processor would.
void on_notice(void*, const char* message) {
  std::string_view m(message);
  while (!m.empty() && m.back() == '\n') m.remove_suffix(1);
  KLOG_DEBUG("[store] postgres: {}", m);
}

// The result's status is one of the successful ones.
bool succeeded(PGresult* r) {
  if (r == nullptr) return false;
  auto s = PQresultStatus(r);
  return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

// libpq's multi-line messages ("...failed: Connection refused\n\tIs the
// server running...") as one line.
std::string one_line(const std::string& text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\t' || c == '\r' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// Seconds a connection attempt may take when the URL does not say.
constexpr const char* k_connect_timeout_s = "10";

}  // namespace

// --- PgStmt ------------------------------------------------------------------

PgStmt::PgStmt(PgConn& conn, std::string name, int params)
    : m_conn(conn), m_name(std::move(name)), m_params(params) {}

PgStmt::~PgStmt() { PQclear(m_result); }

void PgStmt::reset() {
  PQclear(m_result);
  m_result = nullptr;
  m_values.clear();
  m_ran = false;
  m_row = -1;
  m_rows = 0;
}

void PgStmt::bind_text(std::string_view value) {
  if (value.find('\0') != std::string_view::npos) {
    throw PgError("22021", false,
                  m_conn.path() + ": parameter " + std::to_string(m_values.size() + 1) + " of " +
                      std::to_string(value.size()) +
                      " bytes holds a NUL byte, which PostgreSQL text cannot store");
  }
  m_values.emplace_back(value);
}

void PgStmt::bind_f64(double value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  m_values.emplace_back(std::string(buf, ec == std::errc() ? end : buf));
}

bool PgStmt::step() {
  if (!m_ran) {
    m_ran = true;
    if (static_cast<int>(m_values.size()) != m_params) {
      throw PgError("", false,
                    m_conn.path() + ": statement " + m_name + " takes " + std::to_string(m_params) +
                        " parameters, " + std::to_string(m_values.size()) + " bound");
    }
    std::vector<const char*> values;
    values.reserve(m_values.size());
    for (const auto& v : m_values) values.push_back(v ? v->c_str() : nullptr);
    PGresult* r =
        PQexecPrepared(m_conn.get(), m_name.c_str(), m_params, values.data(), nullptr, nullptr, 0);
    if (!succeeded(r)) m_conn.throw_error(r, "");
    m_result = r;
    m_rows = PQntuples(r);
    const char* tuples = PQcmdTuples(r);
    m_conn.set_changes(tuples != nullptr && *tuples != '\0' ? std::atoll(tuples) : 0);
  }
  ++m_row;
  return m_row < m_rows;
}

std::string PgStmt::text(int col) const {
  if (PQgetisnull(m_result, m_row, col)) return {};
  return std::string(PQgetvalue(m_result, m_row, col),
                     static_cast<std::size_t>(PQgetlength(m_result, m_row, col)));
}

std::int64_t PgStmt::i64(int col) const {
  if (PQgetisnull(m_result, m_row, col)) return 0;
  const char* v = PQgetvalue(m_result, m_row, col);
  // SUM() of integers is numeric: "12" (no fraction for integer sums).
  return std::strtoll(v, nullptr, 10);
}

double PgStmt::f64(int col) const {
  if (PQgetisnull(m_result, m_row, col)) return 0;
  return std::strtod(PQgetvalue(m_result, m_row, col), nullptr);
}

bool PgStmt::is_null(int col) const { return PQgetisnull(m_result, m_row, col) != 0; }

void PgStmt::throw_corrupt(const std::string& message) const {
  throw PgError("XX001", false, m_conn.path() + ": " + message);
}

// --- PgConn ------------------------------------------------------------------

PgConn::PgConn(const std::string& url, bool read_only, bool synchronous_commit)
    : m_url(url), m_name(redacted(url)) {
  // The URL's own settings win over these defaults (expand_dbname: keywords
  // after dbname override, keywords before it are overridden).
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {k_connect_timeout_s, "korch", m_url.c_str(), nullptr};
  m_conn = PQconnectdbParams(keys, values, 1);
  if (m_conn == nullptr) throw PgError("", true, m_name + ": cannot connect: out of memory");
  if (PQstatus(m_conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(m_conn);
    message = one_line(message);
    PQfinish(m_conn);
    m_conn = nullptr;
    throw PgError("", true, m_name + ": cannot connect: " + message);
  }
  PQsetNoticeProcessor(m_conn, on_notice, nullptr);
  exec(std::string("SET client_min_messages = warning; SET client_encoding = 'UTF8'; "
                   "SET synchronous_commit = ") +
           (synchronous_commit ? "on" : "off") + "; SET default_transaction_read_only = " +
           (read_only ? "on" : "off") + "; SET extra_float_digits = 3",
       "setting up the session");
}

PgConn::~PgConn() {
  m_stmts.clear();
  if (m_conn != nullptr) PQfinish(m_conn);
}

bool PgConn::broken() const { return m_conn == nullptr || PQstatus(m_conn) != CONNECTION_OK; }

void PgConn::throw_error(PGresult* result, std::string_view context) const {
  std::string sqlstate;
  std::string message;
  if (result != nullptr) {
    if (const char* s = PQresultErrorField(result, PG_DIAG_SQLSTATE)) sqlstate = s;
    if (const char* m = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY)) message = m;
    if (const char* d = PQresultErrorField(result, PG_DIAG_MESSAGE_DETAIL)) {
      message += " (";
      message += d;
      message += ")";
    }
  }
  if (message.empty()) message = PQerrorMessage(m_conn);
  PQclear(result);
  message = one_line(message);
  std::string out = m_name + ": ";
  if (!context.empty()) {
    out += context;
    out += ": ";
  }
  out += message;
  // Class 08: connection exception; 57P0x: the server is shutting down.
  bool lost = broken() || sqlstate.rfind("08", 0) == 0 || sqlstate.rfind("57P", 0) == 0;
  throw PgError(sqlstate, lost, out);
}

void PgConn::exec(std::string_view sql, std::string_view context) {
  std::string text(sql);
  PGresult* r = PQexec(m_conn, text.c_str());
  if (!succeeded(r)) throw_error(r, context);
  const char* tuples = PQcmdTuples(r);
  m_changes = tuples != nullptr && *tuples != '\0' ? std::atoll(tuples) : 0;
  PQclear(r);
}

PgStmt& PgConn::stmt(std::string_view sql) {
  return m_stmts.get(sql, [&] {
    int params = 0;
    std::string text = to_dollar_params(sql, &params);
    std::string name = "k" + std::to_string(++m_next_stmt);
    PGresult* r = PQprepare(m_conn, name.c_str(), text.c_str(), params, nullptr);
    if (!succeeded(r)) throw_error(r, "preparing statement");
    PQclear(r);
    return std::make_unique<PgStmt>(*this, name, params);
  });
}

std::int64_t PgConn::query_i64(std::string_view sql) {
  return query_value<std::int64_t>(*this, sql, [](const PgStmt& q) { return q.i64(0); });
}

// --- PgTxn -------------------------------------------------------------------

PgTxn::PgTxn(PgConn& conn, Kind kind) : m_conn(conn) {
  m_conn.exec(kind == Kind::write ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
              "beginning transaction");
  m_active = true;
}

void PgTxn::commit() {
  m_active = false;  // a failed COMMIT ends the transaction too
  m_conn.exec("COMMIT", "committing");
}

PgTxn::~PgTxn() {
  if (!m_active || m_conn.broken()) return;
  PGresult* r = PQexec(m_conn.get(), "ROLLBACK");
  PQclear(r);
}

}  // namespace korch::store::detail
