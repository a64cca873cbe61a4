// The projection's schema and its one migration mechanism.
//
// Migrations are numbered from 1 and applied in order, each in its own
// transaction together with its row in schema_migrations. A store opened on a
// database whose highest applied version is above kSchemaVersion refuses it
// (a newer Matchbook wrote it); it never guesses.
//
// The SQL is written once for both dialects: {KEY} stands for the 64-bit key
// type ("INTEGER" in SQLite, where INTEGER PRIMARY KEY is the rowid, and
// "BIGINT" in PostgreSQL); {CLUSTERED} after a table with a composite key
// makes SQLite store the rows in key order (WITHOUT ROWID: one b-tree, not a
// table plus a key index) and is empty in PostgreSQL.
//
// Thread safety: constant data.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mb::projection {

enum class Dialect { kSqlite, kPostgres };

struct Migration {
  int version = 0;
  std::string_view description;
  std::string_view sql;  // statements separated by ';'
};

// The last migration's version (schema.cc asserts it): a database at a lower
// version is migrated on open, one at a higher version refused.
inline constexpr int kSchemaVersion = 4;

std::span<const Migration> Migrations();

// The migration's SQL in a dialect, split into statements.
std::vector<std::string> Statements(const Migration& m, Dialect dialect);

// The tables a dump / reset covers, with the key order of their rows.
struct TableSpec {
  std::string_view name;
  std::string_view order_by;
};
std::span<const TableSpec> DataTables();

}  // namespace mb::projection
