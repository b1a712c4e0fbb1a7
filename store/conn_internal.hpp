#pragma once
// Internal to korch_store: what the two backends' connection classes (Db in
// sqlite_internal.hpp, PgConn in pg_internal.hpp) share.
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace korch::store::detail {

// A connection's prepared statements (Stmt or PgStmt), by their SQL text:
// each is prepared once and reused.
template <typename StmtT>
class StmtCache {
 public:
  // The statement for `sql`; `prepare()` makes it (a std::unique_ptr<StmtT>)
  // on first use.
  template <typename Prepare>
  StmtT& get(std::string_view sql, Prepare&& prepare) {
    auto it = m_stmts.find(std::string(sql));
    if (it != m_stmts.end()) return *it->second;
    return *m_stmts.emplace(std::string(sql), prepare()).first->second;
  }

  // Finalises every statement (before the connection closes).
  void clear() { m_stmts.clear(); }

 private:
  std::unordered_map<std::string, std::unique_ptr<StmtT>> m_stmts;
};

// Runs `sql` (no parameters) on `db`, a Db or PgConn, and returns what
// read(stmt) reads from its first row, or T{} when it returns no row.
template <typename T, typename DbT, typename Read>
T query_value(DbT& db, std::string_view sql, Read&& read) {
  auto& q = db.stmt(sql);
  q.bind();
  T value = q.step() ? read(q) : T{};
  q.run();
  return value;
}

}  // namespace korch::store::detail
