#include "projection/schema.h"

#include <array>

namespace mb::projection {
namespace {

// Version 1: everything the history API and the checks read. Amounts are the
// engine's integers (ticks, lots, smallest units), so sums are exact.
constexpr std::string_view kV1 = R"sql(
CREATE TABLE projector_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  applied_seq BIGINT NOT NULL,
  applied_checksum BIGINT NOT NULL,
  config_hash BIGINT NOT NULL,
  applied_time_ns BIGINT NOT NULL);
INSERT INTO projector_state VALUES (1, 0, 0, 0, 0);
CREATE TABLE orders (
  order_id {KEY} PRIMARY KEY,
  account_id BIGINT NOT NULL,
  market_id INTEGER NOT NULL,
  side SMALLINT NOT NULL,
  type SMALLINT NOT NULL,
  tif SMALLINT NOT NULL,
  stp SMALLINT NOT NULL,
  price BIGINT NOT NULL,
  qty BIGINT NOT NULL,
  quote_qty BIGINT NOT NULL,
  executed_qty BIGINT NOT NULL,
  cumulative_quote BIGINT NOT NULL,
  remaining BIGINT NOT NULL,
  status SMALLINT NOT NULL,
  expire_reason SMALLINT NOT NULL,
  working SMALLINT NOT NULL,
  client_order_id TEXT NOT NULL,
  time_ns BIGINT NOT NULL,
  update_ns BIGINT NOT NULL,
  created_seq BIGINT NOT NULL,
  updated_seq BIGINT NOT NULL);
CREATE INDEX orders_by_account ON orders (account_id, market_id, order_id);
CREATE INDEX orders_by_time ON orders (account_id, market_id, time_ns);
CREATE INDEX orders_by_client_id ON orders (account_id, market_id, client_order_id);
CREATE INDEX orders_open ON orders (order_id) WHERE status < 2;
CREATE TABLE order_events (
  seq BIGINT NOT NULL,
  idx INTEGER NOT NULL,
  order_id BIGINT NOT NULL,
  account_id BIGINT NOT NULL,
  market_id INTEGER NOT NULL,
  exec_type SMALLINT NOT NULL,
  status SMALLINT NOT NULL,
  price BIGINT NOT NULL,
  qty BIGINT NOT NULL,
  executed_qty BIGINT NOT NULL,
  cumulative_quote BIGINT NOT NULL,
  remaining BIGINT NOT NULL,
  trade_id BIGINT NOT NULL,
  reject_reason SMALLINT NOT NULL,
  client_order_id TEXT NOT NULL,
  time_ns BIGINT NOT NULL,
  PRIMARY KEY (seq, idx)){CLUSTERED};
CREATE INDEX order_events_by_order ON order_events (order_id, seq, idx);
CREATE TABLE trades (
  trade_id {KEY} PRIMARY KEY,
  seq BIGINT NOT NULL,
  market_id INTEGER NOT NULL,
  taker_side SMALLINT NOT NULL,
  price BIGINT NOT NULL,
  qty BIGINT NOT NULL,
  base_qty BIGINT NOT NULL,
  notional BIGINT NOT NULL,
  maker_order_id BIGINT NOT NULL,
  taker_order_id BIGINT NOT NULL,
  maker_account BIGINT NOT NULL,
  taker_account BIGINT NOT NULL,
  maker_fee BIGINT NOT NULL,
  taker_fee BIGINT NOT NULL,
  time_ns BIGINT NOT NULL);
CREATE INDEX trades_by_maker ON trades (maker_account, market_id, trade_id);
CREATE INDEX trades_by_taker ON trades (taker_account, market_id, trade_id);
CREATE TABLE ledger_entries (
  seq BIGINT NOT NULL,
  idx INTEGER NOT NULL,
  account_id BIGINT NOT NULL,
  asset_id INTEGER NOT NULL,
  bucket SMALLINT NOT NULL,
  delta BIGINT NOT NULL,
  reason SMALLINT NOT NULL,
  ref_kind SMALLINT NOT NULL,
  ref BIGINT NOT NULL,
  time_ns BIGINT NOT NULL,
  PRIMARY KEY (seq, idx)){CLUSTERED};
CREATE INDEX ledger_by_account ON ledger_entries (account_id, seq, idx);
CREATE TABLE deposits (
  transfer_id {KEY} PRIMARY KEY,
  account_id BIGINT NOT NULL,
  asset_id INTEGER NOT NULL,
  amount BIGINT NOT NULL,
  ref TEXT NOT NULL,
  time_ns BIGINT NOT NULL);
CREATE INDEX deposits_by_account ON deposits (account_id, transfer_id);
CREATE TABLE withdrawals (
  transfer_id {KEY} PRIMARY KEY,
  account_id BIGINT NOT NULL,
  asset_id INTEGER NOT NULL,
  amount BIGINT NOT NULL,
  ref TEXT NOT NULL,
  time_ns BIGINT NOT NULL);
CREATE INDEX withdrawals_by_account ON withdrawals (account_id, transfer_id)
)sql";

// Version 2: transfers to other venues. A transfer is held (transfers_out)
// and later resolved (transfers_resolved: completed, or refunded with a
// reason); both tables only grow, so a pending transfer is one without a
// resolution row. The engine refuses a transfer reference used before, so
// (account, ref) finds at most one transfer: the client's withdrawOrderId.
constexpr std::string_view kV2 = R"sql(
CREATE TABLE transfers_out (
  transfer_id {KEY} PRIMARY KEY,
  account_id BIGINT NOT NULL,
  asset_id INTEGER NOT NULL,
  amount BIGINT NOT NULL,
  fee BIGINT NOT NULL,
  ref TEXT NOT NULL,
  address TEXT NOT NULL,
  time_ns BIGINT NOT NULL);
CREATE INDEX transfers_out_by_account ON transfers_out (account_id, transfer_id);
CREATE INDEX transfers_out_by_ref ON transfers_out (account_id, ref);
CREATE TABLE transfers_resolved (
  transfer_id {KEY} PRIMARY KEY,
  account_id BIGINT NOT NULL,
  completed SMALLINT NOT NULL,
  reason SMALLINT NOT NULL,
  time_ns BIGINT NOT NULL)
)sql";

// Version 3: conditional orders. An order's stop price (ticks; 0: none),
// trailing delta (basis points; 0: not a trailing stop), when a trailing
// stop began tracking the price and when the order was triggered (ns; 0: not
// yet). Orders written before have none of them: 0.
constexpr std::string_view kV3 = R"sql(
ALTER TABLE orders ADD COLUMN stop_price BIGINT NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN trailing_delta INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN trailing_ns BIGINT NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN trigger_ns BIGINT NOT NULL DEFAULT 0
)sql";

// Version 4: order lists (OCO, OTO, OTOCO). An order's iceberg slice (lots;
// 0: not an iceberg) and the list it belongs to (0: none); the lists
// themselves, with their (up to three) orders' ids and client ids (order k
// of a list: order_id_k, client_id_k; 0 and '' when the list has fewer) and
// their status (0 executing, 1 all done). An OTO / OTOCO's pending orders
// (PENDING_NEW, status 6) are open: orders_open covers them from now on.
// Orders written before have neither: 0.
constexpr std::string_view kV4 = R"sql(
ALTER TABLE orders ADD COLUMN iceberg_qty BIGINT NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN order_list_id BIGINT NOT NULL DEFAULT 0;
DROP INDEX orders_open;
CREATE INDEX orders_open ON orders (order_id) WHERE status < 2 OR status = 6;
CREATE TABLE order_lists (
  list_id {KEY} PRIMARY KEY,
  account_id BIGINT NOT NULL,
  market_id INTEGER NOT NULL,
  type SMALLINT NOT NULL,
  list_client_order_id TEXT NOT NULL,
  order_id_0 BIGINT NOT NULL,
  order_id_1 BIGINT NOT NULL,
  order_id_2 BIGINT NOT NULL,
  client_id_0 TEXT NOT NULL,
  client_id_1 TEXT NOT NULL,
  client_id_2 TEXT NOT NULL,
  status SMALLINT NOT NULL,
  time_ns BIGINT NOT NULL,
  update_ns BIGINT NOT NULL,
  created_seq BIGINT NOT NULL,
  updated_seq BIGINT NOT NULL);
CREATE INDEX order_lists_by_account ON order_lists (account_id, list_id);
CREATE INDEX order_lists_by_client_id ON order_lists (account_id, list_client_order_id);
CREATE INDEX order_lists_by_time ON order_lists (account_id, time_ns);
CREATE INDEX order_lists_open ON order_lists (list_id) WHERE status = 0
)sql";

constexpr std::array<Migration, 4> kMigrations = {{
    {1, "orders, order_events, trades, ledger_entries, deposits, withdrawals", kV1},
    {2, "transfers_out, transfers_resolved", kV2},
    {3, "orders: stop_price, trailing_delta, trailing_ns, trigger_ns", kV3},
    {4, "order_lists; orders: iceberg_qty, order_list_id", kV4},
}};

// Versions are 1, 2, ... in order, and the last is the one this build knows.
constexpr bool Numbered() {
  for (std::size_t i = 0; i < kMigrations.size(); ++i) {
    if (kMigrations[i].version != static_cast<int>(i) + 1) return false;
  }
  return true;
}
static_assert(Numbered(), "migrations are numbered 1, 2, ... in order");
static_assert(kMigrations.back().version == kSchemaVersion,
              "kSchemaVersion (schema.h) is the last migration's version");

constexpr std::array<TableSpec, 9> kTables = {{
    {"orders", "order_id"},
    {"order_events", "seq, idx"},
    {"trades", "trade_id"},
    {"ledger_entries", "seq, idx"},
    {"deposits", "transfer_id"},
    {"withdrawals", "transfer_id"},
    {"transfers_out", "transfer_id"},
    {"transfers_resolved", "transfer_id"},
    {"order_lists", "list_id"},
}};

}  // namespace

std::span<const Migration> Migrations() { return kMigrations; }
std::span<const TableSpec> DataTables() { return kTables; }

std::vector<std::string> Statements(const Migration& m, Dialect dialect) {
  const bool sqlite = dialect == Dialect::kSqlite;
  std::string sql(m.sql);
  auto replace = [&sql](std::string_view from, std::string_view to) {
    for (std::size_t at = sql.find(from); at != std::string::npos; at = sql.find(from, at)) {
      sql.replace(at, from.size(), to);
    }
  };
  replace("{KEY}", sqlite ? "INTEGER" : "BIGINT");
  replace("{CLUSTERED}", sqlite ? " WITHOUT ROWID" : "");
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < sql.size()) {
    std::size_t end = sql.find(';', start);
    if (end == std::string::npos) end = sql.size();
    std::string stmt = sql.substr(start, end - start);
    if (stmt.find_first_not_of(" \n\t") != std::string::npos) out.push_back(std::move(stmt));
    start = end + 1;
  }
  return out;
}

}  // namespace mb::projection
