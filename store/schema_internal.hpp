#pragma once
// Internal to korch_store: the numbered schema migrations. Migration N turns
// a version N-1 database into version N; store::k_schema_version is the
// number of the last one. Applied migrations are recorded in
// schema_migrations(version, applied_at) and in PRAGMA user_version.
#include <span>
#include <string_view>

namespace korch::store::detail {

struct Migration {
  int version;
  std::string_view sql;
};

// All migrations, in increasing version order (1, 2, ...).
std::span<const Migration> migrations();
// The same migrations in PostgreSQL's dialect (same numbers, same tables and
// columns; types translated). Recorded in schema_migrations alone.
std::span<const Migration> pg_migrations();

}  // namespace korch::store::detail
