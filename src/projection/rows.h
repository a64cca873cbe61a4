// The projection's rows, derived from the journal's events alone.
//
//   events of one record ──▶ RowBuilder ──▶ RowBatch (orders and order
//        lists to upsert, order_events, trades, ledger_entries, deposits,
//        withdrawals, transfers_out, transfers_resolved)
//
// Every key comes from the journal: order ids and transfer ids are the
// sequence of the command, trade ids the engine's dense counter, and an
// order event or a ledger line is keyed by (sequence, index in the record).
// Building the same journal twice therefore produces identical rows, which
// is what makes a rebuild row-for-row equal to the incremental projection.
//
// The builder keeps the current state of open orders (it needs an order's
// executed quantity to describe the next fill) and of open order lists (a
// list's orders take its id; its pending orders are canceled when it ends).
// After a restart it is seeded from the store's open orders and lists
// (Seed), so a resumed projection and one built from the start agree.
//
// Orders and lists are what the read side (marketdata/read_side.cc) holds,
// field for field: an OTO / OTOCO's pending order is an open order in
// PENDING_NEW (reported NEW) from its OrderPending; its OrderAccepted places
// it (NEW again, placed then: its time is the placing time), a Rejected
// naming it refuses it, and a ListDone that finds it still pending cancels
// it. An iceberg's slice comes from its IcebergAccepted.
//
// Thread safety: one thread owns a RowBuilder.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/event.h"
#include "engine/ledger.h"
#include "engine/market.h"
#include "marketdata/read_side.h"
#include "marketdata/records.h"

namespace mb::projection {

using marketdata::ExecType;
using marketdata::ListRecord;
using marketdata::ListStatus;
using marketdata::OrderRecord;
using marketdata::OrderStatus;

// An order's current state: OrderRecord plus where it came from.
struct OrderRow {
  OrderRecord order;
  uint64_t created_seq = 0;
  uint64_t updated_seq = 0;
};

// An order list's current state: ListRecord plus where it came from.
struct ListRow {
  ListRecord list;
  uint64_t created_seq = 0;
  uint64_t updated_seq = 0;
};

// A pending order of a list placed once its working order filled: from then
// on it is placed at time_ns by the command created_seq (as the read side
// sees it: its time, and the newest order with its client order id). The
// orders' upsert leaves those alone (the placing time is indexed, and the
// row may be stored already), so the store sets them apart.
struct PendingPlacedRow {
  uint64_t order_id = 0;
  int64_t time_ns = 0;
  uint64_t created_seq = 0;
  friend bool operator==(const PendingPlacedRow&, const PendingPlacedRow&) = default;
};

// One change to one order (an executionReport, as the stream sent it).
struct OrderEventRow {
  uint64_t seq = 0;
  uint32_t idx = 0;  // report index within the record (a trade reports twice)
  uint64_t order_id = 0;
  uint32_t account = 0;
  uint16_t market = 0;
  ExecType exec_type = ExecType::kNew;
  OrderStatus status = OrderStatus::kNew;
  int64_t price = 0;
  int64_t qty = 0;
  int64_t executed = 0;
  int64_t cumulative_quote = 0;
  int64_t remaining = 0;
  uint64_t trade_id = 0;                                      // kTrade
  engine::RejectReason reject = engine::RejectReason::kNone;  // kRejected
  std::string client_order_id;
  int64_t time_ns = 0;
  friend bool operator==(const OrderEventRow&, const OrderEventRow&) = default;
};

struct TradeRecord {
  uint64_t trade_id = 0;
  uint64_t seq = 0;
  uint16_t market = 0;
  engine::Side taker_side = engine::Side::kBuy;
  int64_t price = 0;
  int64_t qty = 0;
  int64_t base_qty = 0;
  int64_t notional = 0;
  uint64_t maker_order_id = 0;
  uint64_t taker_order_id = 0;
  uint32_t maker_account = 0;
  uint32_t taker_account = 0;
  int64_t maker_fee = 0;
  int64_t taker_fee = 0;
  int64_t time_ns = 0;
  friend bool operator==(const TradeRecord&, const TradeRecord&) = default;
};

struct LedgerRow {
  uint64_t seq = 0;
  uint32_t idx = 0;  // line index within the record
  uint32_t account = 0;
  uint16_t asset = 0;
  engine::Bucket bucket = engine::Bucket::kAvailable;
  int64_t delta = 0;
  engine::LedgerReason reason = engine::LedgerReason::kOrderLock;
  engine::RefKind ref_kind = engine::RefKind::kOrder;
  uint64_t ref = 0;
  int64_t time_ns = 0;
  friend bool operator==(const LedgerRow&, const LedgerRow&) = default;
};

// A deposit or a withdrawal.
struct TransferRow {
  uint64_t transfer_id = 0;  // == its sequence
  uint32_t account = 0;
  uint16_t asset = 0;
  int64_t amount = 0;  // > 0
  std::string ref;
  int64_t time_ns = 0;
  friend bool operator==(const TransferRow&, const TransferRow&) = default;
};

// A transfer to another venue, held (TransferHeld).
struct TransferOutRow {
  uint64_t transfer_id = 0;  // == its sequence
  uint32_t account = 0;
  uint16_t asset = 0;
  int64_t amount = 0;  // what leaves the account; the destination receives amount - fee
  int64_t fee = 0;
  std::string ref;
  std::string address;
  int64_t time_ns = 0;
  friend bool operator==(const TransferOutRow&, const TransferOutRow&) = default;
};

// How a held transfer ended (TransferCompleted or TransferRefunded): a row of
// its own, so both transfer tables only grow.
struct TransferResolvedRow {
  uint64_t transfer_id = 0;  // the held transfer's
  uint32_t account = 0;
  bool completed = false;                                       // false: refunded
  engine::RefundReason reason = engine::RefundReason::kVoided;  // kVoided (0) when completed
  int64_t time_ns = 0;
  friend bool operator==(const TransferResolvedRow&, const TransferResolvedRow&) = default;
};

// A trade row as the read side holds it (agg_id left to the caller: it
// depends on the trades before it).
marketdata::TradeRow ToTradeRow(const TradeRecord& t);

// A market's candle of one interval as it stands after a batch (upserted by
// market, interval and open time): what klines and the tickers are built
// from after a restart. Only the history store keeps them.
struct CandleRow {
  uint16_t market = 0;
  uint8_t interval = 0;  // marketdata::KlineInterval
  marketdata::Kline candle;
};

// What a batch of records changes. Orders and lists hold each touched
// order's / list's state after the batch (one row each: upserted).
struct RowBatch {
  uint64_t first_seq = 0;
  uint64_t last_seq = 0;
  uint64_t last_checksum = 0;  // of the record last_seq
  int64_t last_time_ns = 0;
  uint64_t events = 0;
  std::vector<OrderRow> orders;
  std::vector<PendingPlacedRow> pending_placed;  // set after the orders
  std::vector<ListRow> lists;
  std::vector<OrderEventRow> order_events;
  std::vector<TradeRecord> trades;
  std::vector<LedgerRow> ledger;
  std::vector<TransferRow> deposits;
  std::vector<TransferRow> withdrawals;
  std::vector<TransferOutRow> transfers_out;
  std::vector<TransferResolvedRow> transfers_resolved;
  std::vector<CandleRow> candles;  // every candle a trade of the batch changed or closed

  void Clear();
  bool empty() const noexcept { return events == 0; }
};

class RowBuilder {
 public:
  explicit RowBuilder(const engine::EngineConfig& config);

  // The open orders (pending ones included) and the open lists as the store
  // holds them (after a restart).
  // The newest candle of each market and interval, when the store keeps
  // candles (SeedCandles; without it a resumed builder starts new ones).
  void Seed(std::span<const OrderRow> open_orders, std::span<const ListRow> open_lists = {});
  void SeedCandles(std::span<const CandleRow> newest);

  // Adds one record's events (all of one sequence) to *batch.
  void AddRecord(uint64_t seq, uint64_t checksum, std::span<const engine::Event> events,
                 RowBatch* batch);
  // Ends a batch: writes the state of every order and list it touched into
  // batch->orders and batch->lists and forgets those that closed.
  void Finish(RowBatch* batch);

  std::size_t open_orders() const noexcept { return open_.size(); }
  // The open orders (pending ones included), by id.
  std::vector<OrderRow> OpenOrders() const;
  std::size_t open_lists() const noexcept { return lists_.size(); }

 private:
  OrderRow* Touch(uint64_t order_id);
  void Event(const engine::Event& e, RowBatch* batch);
  void Report(const OrderRow& row, ExecType type, uint64_t trade_id, engine::RejectReason reject,
              RowBatch* batch);
  void Fill(const engine::Trade& t, bool maker, RowBatch* batch);
  // Applies `change` to the order's last report in the batch when it is of
  // `type` (a later event of the same command refines it).
  template <class F>
  void LastReport(uint64_t order_id, ExecType type, RowBatch* batch, F&& change);
  void Close(uint64_t order_id, OrderStatus status, engine::ExpireReason reason, ExecType type,
             RowBatch* batch);
  // Trailing stops with an activation price that have not begun tracking:
  // the first trade of their market at a price meeting the stop condition
  // starts them (trailing_ns), as in the engine.
  struct TrailWatch {
    MarketId market{};
    Price stop{};
    bool rise = false;  // the condition is "price >= stop" (else "<=")
  };
  void Watch(const OrderRecord& o);
  void Activate(MarketId market, Price price);
  // The open list an order belongs to (0: none).
  uint64_t ListOf(OrderId id) const;
  // The list's order `id` has client order id `cid` (as the read side's
  // SetListClientId).
  void SetListClientId(uint64_t list_id, OrderId id, const ClientOrderId& cid);
  void ListDone(const engine::ListDone& x, RowBatch* batch);

  // Adds a trade to its market's candles, marking those it changed.
  void Candles(const TradeRecord& t);

  const engine::EngineConfig& config_;
  // The open candle of each market and interval, and which of them this
  // batch changed (written in Finish()).
  std::map<uint16_t, std::array<std::optional<marketdata::Kline>, marketdata::kKlineIntervals>>
      candles_;
  std::vector<uint16_t> touched_candles_;  // markets a trade of the batch changed
  std::vector<CandleRow> closed_candles_;
  std::unordered_map<uint64_t, OrderRow> open_;    // orders not yet closed
  std::unordered_map<uint64_t, OrderRow> parked_;  // written in Finish(), still open
  std::vector<uint64_t> touched_;                  // in first-touch order
  std::vector<uint64_t> placed_pending_;  // pending orders placed in this batch (pending_placed)
  std::map<uint64_t, ListRow> lists_;     // open lists, by id
  std::unordered_map<uint64_t, uint64_t> list_of_;  // an open list's order id -> list id
  std::vector<uint64_t> touched_lists_;             // in this batch (written by id)
  std::map<uint64_t, TrailWatch> trailing_;         // by order id
  std::vector<engine::LedgerEntry> lines_;
  uint64_t seq_ = 0;
  int64_t ts_ = 0;
  uint32_t report_idx_ = 0;  // order events numbered within the record
};

}  // namespace mb::projection
