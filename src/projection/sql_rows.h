// What the SQL stores share: the column lists of each table as bindable
// values, the readers that turn a result row back into the store's types,
// and the query texts. Placeholders are '?' in order; a dialect that numbers
// them ($1, $2, ...) converts with NumberPlaceholders().
//
// A result row is anything with Int(col) and Text(col).
//
// Thread safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engine/market.h"
#include "projection/rows.h"
#include "projection/schema.h"
#include "projection/store.h"

namespace mb::projection {

inline int64_t Signed(uint64_t v) { return std::bit_cast<int64_t>(v); }
inline uint64_t Unsigned(int64_t v) { return std::bit_cast<uint64_t>(v); }
inline int64_t Small(auto e) { return static_cast<int64_t>(e); }

// ---- the columns of each table, in schema order ----

inline auto Values(const OrderRow& r) {
  const OrderRecord& o = r.order;
  const engine::OrderTerms& t = o.terms;
  return std::make_tuple(Signed(Raw(o.id)), int64_t{Raw(t.account)}, int64_t{Raw(t.market)},
                         Small(t.side), Small(t.type), Small(t.tif), Small(t.stp), t.price.value,
                         t.qty.value, o.quote_qty.value, o.executed.value, o.cumulative_quote.value,
                         o.remaining.value, Small(o.status), Small(o.expire_reason),
                         int64_t{o.working ? 1 : 0}, o.client_order_id.view(), o.time_ns,
                         o.update_ns, Signed(r.created_seq), Signed(r.updated_seq),
                         o.stop_price.value, int64_t{o.trailing_delta}, o.trailing_ns, o.trigger_ns,
                         o.iceberg_qty.value, Signed(o.list_id));
}

inline auto Values(const ListRow& r) {
  const ListRecord& l = r.list;
  return std::make_tuple(Signed(l.id), int64_t{Raw(l.account)}, int64_t{Raw(l.market)},
                         Small(l.type), l.list_client_order_id.view(), Signed(Raw(l.orders[0])),
                         Signed(Raw(l.orders[1])), Signed(Raw(l.orders[2])), l.client_ids[0].view(),
                         l.client_ids[1].view(), l.client_ids[2].view(), Small(l.status), l.time_ns,
                         l.update_ns, Signed(r.created_seq), Signed(r.updated_seq));
}

inline auto Values(const OrderEventRow& r) {
  return std::make_tuple(Signed(r.seq), int64_t{r.idx}, Signed(r.order_id), int64_t{r.account},
                         int64_t{r.market}, Small(r.exec_type), Small(r.status), r.price, r.qty,
                         r.executed, r.cumulative_quote, r.remaining, Signed(r.trade_id),
                         Small(r.reject), std::string_view(r.client_order_id), r.time_ns);
}

inline auto Values(const TradeRecord& r) {
  return std::make_tuple(Signed(r.trade_id), Signed(r.seq), int64_t{r.market}, Small(r.taker_side),
                         r.price, r.qty, r.base_qty, r.notional, Signed(r.maker_order_id),
                         Signed(r.taker_order_id), int64_t{r.maker_account},
                         int64_t{r.taker_account}, r.maker_fee, r.taker_fee, r.time_ns);
}

inline auto Values(const LedgerRow& r) {
  return std::make_tuple(Signed(r.seq), int64_t{r.idx}, int64_t{r.account}, int64_t{r.asset},
                         Small(r.bucket), r.delta, Small(r.reason), Small(r.ref_kind),
                         Signed(r.ref), r.time_ns);
}

inline auto Values(const TransferRow& r) {
  return std::make_tuple(Signed(r.transfer_id), int64_t{r.account}, int64_t{r.asset}, r.amount,
                         std::string_view(r.ref), r.time_ns);
}

inline auto Values(const TransferOutRow& r) {
  return std::make_tuple(Signed(r.transfer_id), int64_t{r.account}, int64_t{r.asset}, r.amount,
                         r.fee, std::string_view(r.ref), std::string_view(r.address), r.time_ns);
}

inline auto Values(const PendingPlacedRow& r) {
  return std::make_tuple(r.time_ns, Signed(r.created_seq), Signed(r.order_id));  // kSetPlacedSql
}

inline auto Values(const TransferResolvedRow& r) {
  return std::make_tuple(Signed(r.transfer_id), int64_t{r.account}, int64_t{r.completed ? 1 : 0},
                         Small(r.reason), r.time_ns);
}

// projector_state's values for kSetStateSql.
inline auto Values(const ProjectorState& s) {
  return std::make_tuple(Signed(s.applied_seq), Signed(s.applied_checksum), Signed(s.config_hash),
                         s.applied_time_ns);
}

// ---- queries ----

inline constexpr std::string_view kOrderColumns =
    "order_id, account_id, market_id, side, type, tif, stp, price, qty, quote_qty, executed_qty, "
    "cumulative_quote, remaining, status, expire_reason, working, client_order_id, time_ns, "
    "update_ns, created_seq, updated_seq, stop_price, trailing_delta, trailing_ns, trigger_ns, "
    "iceberg_qty, order_list_id";
inline constexpr std::size_t kOrderColumnCount = 27;
inline constexpr std::string_view kOrderSelect =
    "SELECT order_id, account_id, market_id, side, type, tif, stp, price, qty, quote_qty, "
    "executed_qty, cumulative_quote, remaining, status, expire_reason, working, client_order_id, "
    "time_ns, update_ns, created_seq, updated_seq, stop_price, trailing_delta, trailing_ns, "
    "trigger_ns, iceberg_qty, order_list_id FROM orders";
// After kOrderSelect: the open orders, NEW, PARTIALLY_FILLED and
// PENDING_NEW (the partial index orders_open has the same condition, so it
// serves the query).
inline constexpr std::string_view kOpenOrdersWhere =
    " WHERE status < 2 OR status = 6 ORDER BY order_id";
// After kOrderSelect: the newest order of an account and market with a
// client order id (account, market, client id), the one placed last: by the
// placing sequence, not the id (a list's later orders have ids far above
// every sequence, engine::kListOrderStride).
inline constexpr std::string_view kOrderByClientIdWhere =
    " WHERE account_id = ? AND market_id = ? AND client_order_id = ? ORDER BY created_seq DESC "
    "LIMIT 1";
// A pending order placed: time_ns, created_seq, order_id.
inline constexpr std::string_view kSetPlacedSql =
    "UPDATE orders SET time_ns = ?, created_seq = ? WHERE order_id = ?";

inline constexpr std::string_view kListColumns =
    "list_id, account_id, market_id, type, list_client_order_id, order_id_0, order_id_1, "
    "order_id_2, client_id_0, client_id_1, client_id_2, status, time_ns, update_ns, created_seq, "
    "updated_seq";
inline constexpr std::size_t kListColumnCount = 16;
inline constexpr std::string_view kListSelect =
    "SELECT list_id, account_id, market_id, type, list_client_order_id, order_id_0, order_id_1, "
    "order_id_2, client_id_0, client_id_1, client_id_2, status, time_ns, update_ns, created_seq, "
    "updated_seq FROM order_lists";
// After kListSelect: the open (executing) lists (the partial index
// order_lists_open serves it).
inline constexpr std::string_view kOpenListsWhere = " WHERE status = 0 ORDER BY list_id";
inline constexpr std::string_view kStateSql =
    "SELECT applied_seq, applied_checksum, config_hash, applied_time_ns FROM projector_state";
inline constexpr std::string_view kSetStateSql =
    "UPDATE projector_state SET applied_seq = ?, applied_checksum = ?, config_hash = ?, "
    "applied_time_ns = ?";
inline constexpr std::string_view kLedgerSql =
    "SELECT seq, idx, account_id, asset_id, bucket, delta, reason, ref_kind, ref, time_ns "
    "FROM ledger_entries WHERE account_id = ? AND seq >= ? ORDER BY seq, idx LIMIT ?";
inline constexpr std::string_view kBalanceTotalsSql =
    "SELECT account_id, asset_id, bucket, SUM(delta) FROM ledger_entries "
    "GROUP BY account_id, asset_id, bucket ORDER BY account_id, asset_id, bucket";

// INSERT ... ON CONFLICT (order_id) DO UPDATE SET what an order's life
// changes (not its placing time and sequence: kSetPlacedSql).
std::string UpsertOrderSql();
// INSERT ... ON CONFLICT (list_id) DO UPDATE SET what a list's life changes.
std::string UpsertListSql();

// allOrders: account, market, from_id, lo_ns, hi_ns, limit.
std::string AllOrdersSql(bool ascending);
// allOrderList: account, from_id, lo_ns, hi_ns, limit.
std::string AllListsSql(bool ascending);
// One list of the account: account, list_id (or, by_client_id, the list
// client order id; the newest such).
std::string FindListSql(bool by_client_id);
// myTrades: account, market, order_id, order_id (maker side), the same four
// for the taker side, then from_id, lo_ns, hi_ns, limit.
std::string MyTradesSql(bool ascending);

// Withdrawals (ReadWithdrawalRow's columns) and deposits (ReadTransferRow's):
// with by_account, the account first; then the asset (-1 = any) twice, for
// withdrawals the state (-1 = any) twice, lo_ns, hi_ns, limit, offset
// (TransferParams). Newest first.
std::string WithdrawalsSql(bool by_account);
std::string DepositsSql(bool by_account);
// One withdrawal: account, then the transfer id (or, by_ref, the reference).
std::string FindWithdrawalSql(bool by_ref);
// The parameters of WithdrawalsSql / DepositsSql(q.account.has_value()).
std::vector<int64_t> TransferParams(const TransferQuery& q, bool withdrawals);

// Bound values of a window in ms (0 = unbounded) as ns, both ends inclusive.
std::pair<int64_t, int64_t> TimeBounds(int64_t start_ms, int64_t end_ms);
inline std::pair<int64_t, int64_t> TimeBounds(const HistoryQuery& q) {
  return TimeBounds(q.start_ms, q.end_ms);
}
inline bool Ascending(const HistoryQuery& q) { return q.from_id > 0 || q.start_ms != 0; }
inline int64_t Limit(std::size_t limit) {
  return limit > static_cast<std::size_t>(std::numeric_limits<int64_t>::max())
             ? std::numeric_limits<int64_t>::max()
             : static_cast<int64_t>(limit);
}

// "?, ?" -> "$1, $2" (outside quotes).
std::string NumberPlaceholders(std::string_view sql);

// A schema newer than this build: refused.
Status CheckSchemaVersion(int64_t applied);

// The count of a table of DataTables().
uint64_t* CountOf(ProjectionTotals& t, std::string_view table);

// ---- reading rows back ----

template <class Row>
OrderRow ReadOrderRow(const Row& r, int c) {
  OrderRow row;
  OrderRecord& o = row.order;
  engine::OrderTerms& t = o.terms;
  o.id = static_cast<OrderId>(Unsigned(r.Int(c + 0)));
  t.account = static_cast<AccountId>(r.Int(c + 1));
  t.market = static_cast<MarketId>(r.Int(c + 2));
  t.side = static_cast<engine::Side>(r.Int(c + 3));
  t.type = static_cast<engine::OrderType>(r.Int(c + 4));
  t.tif = static_cast<engine::TimeInForce>(r.Int(c + 5));
  t.stp = static_cast<engine::StpMode>(r.Int(c + 6));
  t.price = Price{r.Int(c + 7)};
  t.qty = Qty{r.Int(c + 8)};
  o.quote_qty = Amount{r.Int(c + 9)};
  o.executed = Qty{r.Int(c + 10)};
  o.cumulative_quote = Amount{r.Int(c + 11)};
  o.remaining = Qty{r.Int(c + 12)};
  o.status = static_cast<OrderStatus>(r.Int(c + 13));
  o.expire_reason = static_cast<engine::ExpireReason>(r.Int(c + 14));
  o.working = r.Int(c + 15) != 0;
  o.client_order_id = ClientOrderId::From(r.Text(c + 16));
  o.time_ns = r.Int(c + 17);
  o.update_ns = r.Int(c + 18);
  row.created_seq = Unsigned(r.Int(c + 19));
  row.updated_seq = Unsigned(r.Int(c + 20));
  o.stop_price = Price{r.Int(c + 21)};
  o.trailing_delta = static_cast<int32_t>(r.Int(c + 22));
  o.trailing_ns = r.Int(c + 23);
  o.trigger_ns = r.Int(c + 24);
  o.iceberg_qty = Qty{r.Int(c + 25)};
  o.list_id = Unsigned(r.Int(c + 26));
  return row;
}

// A row of kListSelect.
template <class Row>
ListRow ReadListRow(const Row& r) {
  ListRow row;
  ListRecord& l = row.list;
  l.id = Unsigned(r.Int(0));
  l.account = static_cast<AccountId>(r.Int(1));
  l.market = static_cast<MarketId>(r.Int(2));
  l.type = static_cast<engine::ListType>(r.Int(3));
  l.list_client_order_id = ClientOrderId::From(r.Text(4));
  for (int k = 0; k < 3; ++k) {
    l.orders[k] = static_cast<OrderId>(Unsigned(r.Int(5 + k)));
    l.client_ids[k] = ClientOrderId::From(r.Text(8 + k));
  }
  l.status = static_cast<ListStatus>(r.Int(11));
  l.time_ns = r.Int(12);
  l.update_ns = r.Int(13);
  row.created_seq = Unsigned(r.Int(14));
  row.updated_seq = Unsigned(r.Int(15));
  return row;
}

// A row of MyTradesSql.
template <class Row>
marketdata::Fill ReadFill(const Row& r, const engine::EngineConfig& config) {
  marketdata::Fill f;
  f.trade_id = static_cast<TradeId>(Unsigned(r.Int(0)));
  f.market = static_cast<MarketId>(r.Int(1));
  f.price = Price{r.Int(2)};
  f.qty = Qty{r.Int(3)};
  f.base_qty = Amount{r.Int(4)};
  f.notional = Amount{r.Int(5)};
  f.time_ns = r.Int(6);
  f.order_id = static_cast<OrderId>(Unsigned(r.Int(7)));
  f.account = static_cast<AccountId>(r.Int(8));
  f.is_maker = r.Int(9) != 0;
  const auto taker_side = static_cast<engine::Side>(r.Int(10));
  f.side = f.is_maker ? engine::Opposite(taker_side) : taker_side;
  f.commission = Amount{r.Int(11)};
  const engine::MarketSpec& spec = config.markets[Raw(f.market)];
  f.commission_asset = f.side == engine::Side::kBuy ? spec.base : spec.quote;
  return f;
}

template <class Row>
LedgerRow ReadLedgerRow(const Row& r) {
  LedgerRow l;
  l.seq = Unsigned(r.Int(0));
  l.idx = static_cast<uint32_t>(r.Int(1));
  l.account = static_cast<uint32_t>(r.Int(2));
  l.asset = static_cast<uint16_t>(r.Int(3));
  l.bucket = static_cast<engine::Bucket>(r.Int(4));
  l.delta = r.Int(5);
  l.reason = static_cast<engine::LedgerReason>(r.Int(6));
  l.ref_kind = static_cast<engine::RefKind>(r.Int(7));
  l.ref = Unsigned(r.Int(8));
  l.time_ns = r.Int(9);
  return l;
}

// A row of DepositsSql.
template <class Row>
TransferRow ReadTransferRow(const Row& r) {
  TransferRow t;
  t.transfer_id = Unsigned(r.Int(0));
  t.account = static_cast<uint32_t>(r.Int(1));
  t.asset = static_cast<uint16_t>(r.Int(2));
  t.amount = r.Int(3);
  t.ref = std::string(r.Text(4));
  t.time_ns = r.Int(5);
  return t;
}

// A row of WithdrawalsSql or FindWithdrawalSql: the held transfer, its state
// (0 pending, 1 completed, 2 refunded), refund reason and resolution time.
template <class Row>
WithdrawalRow ReadWithdrawalRow(const Row& r) {
  WithdrawalRow w;
  TransferOutRow& h = w.held;
  h.transfer_id = Unsigned(r.Int(0));
  h.account = static_cast<uint32_t>(r.Int(1));
  h.asset = static_cast<uint16_t>(r.Int(2));
  h.amount = r.Int(3);
  h.fee = r.Int(4);
  h.ref = std::string(r.Text(5));
  h.address = std::string(r.Text(6));
  h.time_ns = r.Int(7);
  w.state = static_cast<TransferState>(r.Int(8));
  w.reason = static_cast<engine::RefundReason>(r.Int(9));
  w.resolved_ns = r.Int(10);
  return w;
}

template <class Row>
ProjectorState ReadStateRow(const Row& r) {
  return ProjectorState{Unsigned(r.Int(0)), Unsigned(r.Int(1)), Unsigned(r.Int(2)), r.Int(3)};
}

template <class Row>
ProjectionTotals::Balance ReadBalanceTotal(const Row& r) {
  return ProjectionTotals::Balance{static_cast<uint32_t>(r.Int(0)), static_cast<uint16_t>(r.Int(1)),
                                   static_cast<uint8_t>(r.Int(2)), r.Int(3)};
}

}  // namespace mb::projection
