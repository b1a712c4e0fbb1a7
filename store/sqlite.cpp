#include <chrono>
#include <thread>

#include "store/sqlite_internal.hpp"

namespace korch::store::detail {

int retry_delay_ms(int attempt, std::mt19937_64& rng) {
  int base = 1;
  for (int i = 0; i < attempt && base < k_max_retry_delay_ms; ++i) base *= 2;
  if (base > k_max_retry_delay_ms) base = k_max_retry_delay_ms;
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  int delay = static_cast<int>(base * jitter(rng));
  return delay < 1 ? 1 : (delay > k_max_retry_delay_ms ? k_max_retry_delay_ms : delay);
}

void retry_busy(const std::function<void()>& fn, int timeout_ms) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int attempt = 0;; ++attempt) {
    try {
      fn();
      return;
    } catch (const SqliteError& e) {
      if (!e.busy() || std::chrono::steady_clock::now() >= deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(retry_delay_ms(attempt, rng)));
  }
}

// --- Stmt --------------------------------------------------------------------

Stmt::Stmt(sqlite3* db, std::string_view sql, const std::string& path) : m_db(db), m_path(path) {
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &m_stmt, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = m_path + ": preparing statement: " + sqlite3_errmsg(db);
    sqlite3_finalize(m_stmt);
    m_stmt = nullptr;
    throw SqliteError(rc, message);
  }
}

Stmt::~Stmt() { sqlite3_finalize(m_stmt); }

void Stmt::reset() {
  // The result of reset repeats the last step's error, which was already reported.
  sqlite3_reset(m_stmt);
  sqlite3_clear_bindings(m_stmt);
}

void Stmt::check_bind(int rc, int index) {
  if (rc != SQLITE_OK) {
    throw SqliteError(
        rc, m_path + ": binding parameter " + std::to_string(index) + ": " + sqlite3_errmsg(m_db));
  }
}

void Stmt::bind_text(int index, std::string_view value) {
  check_bind(
      sqlite3_bind_text64(m_stmt, index, value.data(), value.size(), SQLITE_STATIC, SQLITE_UTF8),
      index);
}

void Stmt::bind_i64(int index, std::int64_t value) {
  check_bind(sqlite3_bind_int64(m_stmt, index, value), index);
}

void Stmt::bind_f64(int index, double value) {
  check_bind(sqlite3_bind_double(m_stmt, index, value), index);
}

void Stmt::bind_null(int index) { check_bind(sqlite3_bind_null(m_stmt, index), index); }

bool Stmt::step() {
  int rc = sqlite3_step(m_stmt);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  std::string message = m_path + ": " + sqlite3_errmsg(m_db);
  sqlite3_reset(m_stmt);
  throw SqliteError(rc, message);
}

std::string Stmt::text(int col) const {
  const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, col));
  if (data == nullptr) return {};
  return std::string(data, static_cast<std::size_t>(sqlite3_column_bytes(m_stmt, col)));
}

// --- Db ----------------------------------------------------------------------

namespace {

// Once per process, before the first connection: no memory statistics.
// With them on (the build default) every sqlite3_malloc and free takes a
// global mutex to count bytes; korch never reads the counts.
void configure_sqlite_once() {
  static const bool done = [] {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    return true;
  }();
  (void)done;
}

}  // namespace

Db::Db(const std::string& path, Mode mode, int busy_timeout_ms)
    : m_path(path), m_busy_timeout_ms(busy_timeout_ms) {
  configure_sqlite_once();
  int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  flags |= mode == Mode::read_write ? (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
                                    : SQLITE_OPEN_READONLY;
  int rc = sqlite3_open_v2(path.c_str(), &m_db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = m_path + ": cannot open database: " +
                          (m_db != nullptr ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc));
    sqlite3_close_v2(m_db);
    m_db = nullptr;
    throw SqliteError(rc, message);
  }
  sqlite3_busy_timeout(m_db, busy_timeout_ms);
}

Db::~Db() {
  m_stmts.clear();  // finalize before closing
  if (m_db != nullptr) sqlite3_close_v2(m_db);
}

void Db::throw_error(int rc, std::string_view context) const {
  std::string message = m_path + ": ";
  if (!context.empty()) {
    message += context;
    message += ": ";
  }
  message += sqlite3_errmsg(m_db);
  throw SqliteError(rc, message);
}

void Db::exec(std::string_view sql, std::string_view context) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(m_db, text.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) throw_error(sqlite3_extended_errcode(m_db), context);
}

Stmt& Db::stmt(std::string_view sql) {
  return m_stmts.get(sql, [&] { return std::make_unique<Stmt>(m_db, sql, m_path); });
}

std::string Db::query_text(std::string_view sql) {
  return query_value<std::string>(*this, sql, [](const Stmt& q) { return q.text(0); });
}

std::int64_t Db::query_i64(std::string_view sql) {
  return query_value<std::int64_t>(*this, sql, [](const Stmt& q) { return q.i64(0); });
}

// --- Txn ---------------------------------------------------------------------

Txn::Txn(Db& db, Kind kind) : m_db(db) {
  const char* sql = kind == Kind::immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED";
  retry_busy([&] { m_db.exec(sql, "beginning transaction"); }, m_db.busy_timeout_ms());
  m_active = true;
}

void Txn::commit() {
  retry_busy([&] { m_db.exec("COMMIT", "committing"); }, m_db.busy_timeout_ms());
  m_active = false;
}

Txn::~Txn() {
  if (!m_active) return;
  // ROLLBACK can fail when SQLite already rolled back (e.g. after SQLITE_FULL);
  // that is fine, nothing to undo. Never throw from a destructor.
  sqlite3_exec(m_db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

}  // namespace korch::store::detail
