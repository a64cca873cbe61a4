// The read side: market data and account views built from durable events,
// never from the engine's own state.
//
//   journal thread ── on_durable(events) ──▶ fan-out thread: ReadSide::Apply()
//        ├─ per market: an immutable MarketSnapshot (book levels with
//        │  last_update_id, recent trades, klines) swapped atomically
//        ├─ per account: balances, open orders, bounded order/trade history
//        └─ BatchOutput: what changed in this batch (depth diffs with
//           U/u update ids, trades, execution reports, balance changes) for
//           the WebSocket streams
//
// Depth update ids are per market and dense: each batch that changes a book
// gets the next id, so a diff has first_update_id == last_update_id == id and
// the published snapshot's last_update_id equals the id of the last diff.
// Coalescing several diffs keeps U of the first and u of the last.
//
// Prices are ticks, quantities lots, amounts smallest units of the asset; the
// gateway formats them with the market's specification. The order and fill
// records (OrderRecord, Fill, OrderStatus, ExecType) are in records.h, which
// the projection shares.
//
// Thread safety: one writer thread calls Bootstrap() once, then Apply(). Any
// thread may call Snapshot() (a per-market mutex held only to copy or swap one
// shared_ptr: readers never wait for the writer's work, and the engine never
// touches it) and the account queries (a shared_mutex the engine never
// touches).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/fixed_string.h"
#include "common/strong.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/market.h"
#include "engine/types.h"
#include "marketdata/records.h"

namespace mb::marketdata {

using engine::MarketStatus;

struct Level {
  Price price{};
  Qty qty{};  // 0 in a diff: the level is gone
  friend bool operator==(const Level&, const Level&) = default;
};

struct TradeRow {
  TradeId id{};
  MarketId market{};
  Price price{};
  Qty qty{};
  Amount base_qty{};
  Amount notional{};
  int64_t time_ns = 0;
  bool buyer_is_maker = false;
  OrderId buy_order{};
  OrderId sell_order{};
  Sequence seq{};
};

enum class KlineInterval : uint8_t {
  k1m,
  k3m,
  k5m,
  k15m,
  k30m,
  k1h,
  k2h,
  k4h,
  k6h,
  k8h,
  k12h,
  k1d
};
inline constexpr std::size_t kKlineIntervals = 12;
std::optional<KlineInterval> ParseKlineInterval(std::string_view s) noexcept;  // "1m".."1d"
std::string_view ToString(KlineInterval i) noexcept;
int64_t IntervalMs(KlineInterval i) noexcept;

struct Kline {
  int64_t open_time_ms = 0;  // aligned to the interval (UTC)
  Price open{}, high{}, low{}, close{};
  Qty volume{};          // lots
  Amount base_volume{};  // base units
  Amount quote_volume{};
  Amount taker_buy_base{};
  Amount taker_buy_quote{};
  uint32_t trades = 0;
  TradeId first_trade{};
  TradeId last_trade{};
};

// Rolling 24 h statistics (from the 1m klines of the last 1440 minutes).
struct Ticker24h {
  bool any_trade = false;
  Price open{}, high{}, low{}, last{};
  Qty last_qty{};
  Amount base_volume{};
  Amount quote_volume{};
  uint32_t trades = 0;
  TradeId first_trade{}, last_trade{};
  int64_t open_time_ms = 0, close_time_ms = 0;
};

// Immutable recent trades: newest chunk first, chunks shared between
// successive snapshots (a batch adds one chunk; compaction is amortised).
struct TradeChunk {
  std::vector<TradeRow> rows;  // oldest first
  std::shared_ptr<const TradeChunk> older;
  std::size_t total = 0;  // rows in this chunk and all older ones
};

struct KlineSeries {
  std::shared_ptr<const std::vector<Kline>> closed;  // oldest first, bounded
  std::optional<Kline> current;                      // the open candle
};

// One market as of one durable batch. Never changes once published.
struct MarketSnapshot {
  MarketId market{};
  MarketStatus status = MarketStatus::kTrading;
  Sequence seq{};               // last sequence applied
  uint64_t last_update_id = 0;  // depth: the u of the last diff published
  int64_t time_ns = 0;          // time of the last event applied to this market
  std::vector<Level> bids;      // best first (highest price), at most max_depth_levels
  std::vector<Level> asks;      // best first (lowest price)
  std::shared_ptr<const TradeChunk> trades;
  std::array<KlineSeries, kKlineIntervals> klines;

  // Up to `limit` most recent trades, oldest first; from_id > 0: trades with id
  // >= from_id (oldest first) as far as they are still held.
  std::vector<TradeRow> RecentTrades(std::size_t limit, uint64_t from_id = 0) const;
  // Klines with open time in [start_ms, end_ms] (0 = unbounded), the open one
  // included, at most `limit`, oldest first (the newest `limit` when no start).
  std::vector<Kline> Klines(KlineInterval interval, int64_t start_ms, int64_t end_ms,
                            std::size_t limit) const;
  Ticker24h Ticker(int64_t now_ms) const;
};

// One change to one order, in event order: what an executionReport carries.
struct ExecutionReport {
  ExecType type = ExecType::kNew;
  OrderRecord order;                                          // the order after this change
  std::optional<Fill> fill;                                   // kTrade
  engine::RejectReason reject = engine::RejectReason::kNone;  // kRejected
  Sequence seq{};
  int64_t time_ns = 0;
};

// A deposit or withdrawal (balanceUpdate).
struct BalanceDelta {
  AccountId account{};
  AssetId asset{};
  Amount delta{};  // + deposit, - withdrawal
  Sequence seq{};
  int64_t time_ns = 0;
};

struct BalanceRow {
  AssetId asset{};
  Amount available{};
  Amount locked{};
};

struct AccountUpdate {
  AccountId account{};
  std::vector<ExecutionReport> reports;  // in event order
  std::vector<BalanceDelta> transfers;   // deposits / withdrawals
  std::vector<BalanceRow> balances;      // every asset whose balance changed, after the batch
};

struct DepthDiff {
  MarketId market{};
  uint64_t first_update_id = 0;  // U
  uint64_t last_update_id = 0;   // u
  int64_t time_ns = 0;
  std::vector<Level> bids;  // levels whose total changed, with the new total (0 = gone)
  std::vector<Level> asks;
};

// What one Apply() changed, for the streams. Reused between batches.
struct BatchOutput {
  Sequence first_seq{}, last_seq{};
  int64_t time_ns = 0;                  // the last event's time
  std::vector<DepthDiff> depth;         // one per market whose book changed
  std::vector<TradeRow> trades;         // in trade order
  std::vector<MarketId> markets;        // every market touched (tickers, klines, status)
  std::vector<AccountUpdate> accounts;  // one per account touched
  void Clear();
};

struct ReadSideOptions {
  std::size_t max_depth_levels = 5000;     // per side in a snapshot
  std::size_t recent_trades = 1000;        // per market
  std::size_t klines_per_interval = 1000;  // per market and interval
  std::size_t history_orders = 1000;       // closed orders kept per account
  std::size_t history_trades = 1000;       // fills kept per account
};

class ReadSide {
 public:
  // REQUIRES: config validated (the exchange's configuration).
  ReadSide(const engine::EngineConfig& config, ReadSideOptions options = {});
  ~ReadSide();
  ReadSide(const ReadSide&) = delete;
  ReadSide& operator=(const ReadSide&) = delete;

  // The state recovered at start: balances, resting orders (as open orders
  // and book levels), market states. History starts empty.
  void Bootstrap(const engine::EngineImage& image);

  // Applies one durable batch in order and describes what changed in *out
  // (cleared first). Publishes the new snapshots of the markets touched
  // before it returns.
  void Apply(std::span<const engine::Event> events, BatchOutput* out);

  // --- any thread ---
  std::shared_ptr<const MarketSnapshot> Snapshot(MarketId market) const;
  uint64_t applied_seq() const noexcept;  // acquire: everything up to it is visible
  // Orders resting now, and orders closed since the start (as of the last
  // batch applied; for the metrics).
  uint64_t open_orders() const noexcept;
  uint64_t closed_orders() const noexcept;

  engine::Balance balance(AccountId account, AssetId asset) const;
  std::vector<BalanceRow> Balances(AccountId account) const;  // every asset of the config
  std::vector<OrderRecord> OpenOrders(AccountId account, std::optional<MarketId> market) const;
  // An open order, or a closed one still in the history.
  std::optional<OrderRecord> FindOrder(AccountId account, MarketId market, OrderId id) const;
  std::optional<OrderRecord> FindOrderByClientId(AccountId account, MarketId market,
                                                 std::string_view client_order_id) const;
  // Orders of one market, open and closed (as far as held), ordered by id;
  // from_id > 0: ids >= from_id; start/end (ms, 0 = unbounded) filter on the
  // placing time; at most limit (the newest when neither from_id nor start).
  std::vector<OrderRecord> AllOrders(AccountId account, MarketId market, uint64_t from_id,
                                     int64_t start_ms, int64_t end_ms, std::size_t limit) const;
  // Fills of one market (same filters on trade id and time); order_id > 0: of
  // that order only.
  std::vector<Fill> MyTrades(AccountId account, MarketId market, uint64_t order_id,
                             uint64_t from_id, int64_t start_ms, int64_t end_ms,
                             std::size_t limit) const;
  int64_t account_update_ns(AccountId account) const;  // last balance change

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mb::marketdata
