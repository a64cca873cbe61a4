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
// Depth update ids are per market and chained: a diff's u is the journal
// sequence of the last command in its batch that changed a level of the book,
// its U the previous diff's u + 1, and the published snapshot's
// last_update_id equals the u of the last diff. Ids depend on the records, not
// on how they were batched: a replica applying the same journal publishes the
// same ids (from each book's first change after its Bootstrap, which starts
// them at the image's sequence). Coalescing several diffs keeps U of the first and u of the last.
//
// Prices are ticks, quantities lots, amounts smallest units of the asset; the
// gateway formats them with the market's specification. The order and fill
// records (OrderRecord, Fill, OrderStatus, ExecType) are in records.h, which
// the projection shares.
//
// Thread safety: one writer thread calls Bootstrap(), then Apply() (a replica
// that resynchronises calls Bootstrap() again, which forgets everything). Any
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
  // The aggregate trade this one belongs to: the id of its first trade (0:
  // not set, the trade is its own aggregate). See AggTrade.
  TradeId agg_id{};
};

// Binance's aggregate trade: consecutive fills of one taker order at one
// price (one command's sweep of a price level) with their quantities summed.
// Its id `a` is the id of its first trade: unique, increasing and the same
// after a restart, though not dense as Binance's are.
struct AggTrade {
  TradeId id{};  // a == first
  MarketId market{};
  Price price{};
  Qty qty{};  // summed, lots
  TradeId first{}, last{};
  int64_t time_ns = 0;  // of its first trade
  bool buyer_is_maker = false;
};

// Groups rows (in trade order) into aggregate trades: rows of one market
// with the same aggregate id, next to each other, make one.
std::vector<AggTrade> Aggregate(std::span<const TradeRow> rows);

// Binance's kline intervals. The first twelve are the original ones; the
// rest were added later and keep their own indices so that the order of
// the older ones (and of snapshots' `klines`) never changes.
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
  k1d,
  k1s,
  k3d,
  k1w,
  k1M
};
inline constexpr std::size_t kKlineIntervals = 16;
// "1s", "1m".."12h", "1d", "3d", "1w", "1M" (case-sensitive, as Binance).
std::optional<KlineInterval> ParseKlineInterval(std::string_view s) noexcept;
std::string_view ToString(KlineInterval i) noexcept;
// The nominal length: exact for every interval but 1M (31 days, its longest).
int64_t IntervalMs(KlineInterval i) noexcept;

// Time zones of candles, in minutes east of UTC: Binance's `timeZone`
// ("+08:00", "-1:00", "05:45", "8", "0"), strictly within [-12:00, +14:00].
inline constexpr int32_t kMinZoneMinutes = -12 * 60;
inline constexpr int32_t kMaxZoneMinutes = 14 * 60;
std::optional<int32_t> ParseTimeZone(std::string_view s) noexcept;

// Candle bounds (ms since the epoch, UTC) in a zone `zone_min` minutes east
// of UTC. Candles are aligned as Binance aligns them, in local time:
// fixed-length intervals (1s..1d, 3d) on multiples of their length since
// 1970-01-01 00:00, 1w on Mondays 00:00, 1M on the 1st of the month 00:00.
// The open time of the candle holding t_ms:
int64_t KlineOpenMs(KlineInterval i, int64_t t_ms, int32_t zone_min = 0) noexcept;
// The open time of the candle after the one opening at open_ms (its close
// time is this minus 1).
int64_t KlineNextOpenMs(KlineInterval i, int64_t open_ms, int32_t zone_min = 0) noexcept;
// True when the candles of `i` in the zone are the UTC candles (the zone's
// offset is a whole number of candles: always for 1s, never for 1w and 1M
// but at UTC itself).
bool ZoneAligned(KlineInterval i, int32_t zone_min) noexcept;

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

// Adds a trade to the candle of `interval` it falls in: *current, or a new
// one when the trade's time opens a later candle, in which case the candle
// it closes is returned. A trade stamped before the open candle (a clock
// stepping back at intake) counts in it: candles never reopen. The read
// side's series and the history store's candles are made by this one rule.
std::optional<Kline> AddToCandle(KlineInterval interval, const TradeRow& row, bool taker_buys,
                                 std::optional<Kline>* current);

// Statistics of a window of trades: rolling (the 1m klines opened in the
// window; 24 h for the classic ticker, 1 minute to 7 days for windowSize) or
// a trading day in a time zone.
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

// Closed candles of one interval, oldest first. Immutable: the candles sit
// in chunks of kChunk shared between successive snapshots, so closing a
// candle copies the list of chunks and at most one partial chunk, never the
// whole history (the 1s and 1m series close a candle every second and
// minute and hold thousands).
class KlineHistory {
 public:
  static constexpr std::size_t kChunk = 64;

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const Kline& operator[](std::size_t i) const noexcept {
    const std::size_t j = skip_ + i;
    return (*chunks_[j / kChunk])[j % kChunk];
  }
  const Kline& back() const noexcept { return (*this)[size_ - 1]; }
  // Index of the first candle opening at or after open_ms (size() if none).
  std::size_t LowerBound(int64_t open_ms) const noexcept;
  // Index of the first candle opening after open_ms (size() if none).
  std::size_t UpperBound(int64_t open_ms) const noexcept;
  // Whether older candles of this series were dropped to the bound.
  bool truncated() const noexcept { return truncated_; }

  // `history` (null: empty) with k appended, keeping the newest `bound` (> 0).
  static std::shared_ptr<const KlineHistory> Append(const KlineHistory* history, const Kline& k,
                                                    std::size_t bound);

 private:
  // Every chunk but the last holds kChunk candles; the first skip_ of the
  // first chunk are no longer held.
  std::vector<std::shared_ptr<const std::vector<Kline>>> chunks_;
  std::size_t skip_ = 0;
  std::size_t size_ = 0;
  bool truncated_ = false;
};

struct KlineSeries {
  std::shared_ptr<const KlineHistory> closed;  // oldest first, bounded
  std::optional<Kline> current;                // the open candle
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
  // Aggregate trades of the trades held, whole ones only (an aggregate whose
  // first trades are no longer held is left out): ids >= from_id, first
  // trade time (ms) in [start_ms, end_ms] (0 = unbounded); at most `limit`,
  // oldest first: the oldest matches with a lower bound (from_id or
  // start_ms), otherwise the newest.
  std::vector<AggTrade> AggTrades(std::size_t limit, uint64_t from_id, int64_t start_ms,
                                  int64_t end_ms) const;
  // Whether trades from from_id (or, without it, from start_ms) reach back
  // to the oldest trade held or before it: older ones may be in a history
  // store only (from_id and start_ms 0: the newest, always held).
  bool TradesBeyondHeld(uint64_t from_id, int64_t start_ms) const;
  // Klines with open time in [start_ms, end_ms] (0 = unbounded), the open one
  // included, at most `limit`, oldest first (the newest `limit` when no start).
  // In a zone whose candles are not the UTC ones (ZoneAligned), they are
  // summed from the longest held series whose candles tile them (ZoneSource),
  // as far back as that series reaches.
  std::vector<Kline> Klines(KlineInterval interval, int64_t start_ms, int64_t end_ms,
                            std::size_t limit, int32_t zone_min = 0) const;
  // Whether Klines() with these arguments would miss candles older than the
  // held ones that the series no longer holds (UTC-aligned candles only).
  bool KlinesBeyondHeld(KlineInterval interval, int64_t start_ms, int64_t end_ms, std::size_t limit,
                        int32_t zone_min = 0) const;
  // The candle of `interval` in the zone opening at open_ms, if it traded
  // and is still held.
  std::optional<Kline> Candle(KlineInterval interval, int64_t open_ms, int32_t zone_min = 0) const;
  // The newest candle of `interval` in the zone (the one the last trade is in).
  std::optional<Kline> LatestCandle(KlineInterval interval, int32_t zone_min = 0) const;
  // The 24 h before now_ms: Rolling(24 h, now_ms).
  Ticker24h Ticker(int64_t now_ms) const;
  // The 1m candles opened in (now_ms - window_ms, now_ms]; open_time_ms =
  // now_ms - window_ms, close_time_ms = now_ms. REQUIRES: window_ms at most
  // kRollingWindowMaxMs (older candles are not kept).
  Ticker24h Rolling(int64_t window_ms, int64_t now_ms) const;
  // The trading day holding now_ms in the zone, from its 00:00 to now:
  // open_time_ms / close_time_ms are the day's bounds (close = next day - 1).
  Ticker24h TradingDay(int32_t zone_min, int64_t now_ms) const;
  // Binance's current average price: quote volume over base volume of the
  // 1m candles opened in the last kAvgPriceMinutes, and the last trade (its
  // price stands in when nothing traded in the window).
  struct AvgPrice {
    bool any_trade = false;                // ever (as far as held)
    Amount base_volume{}, quote_volume{};  // in the window
    Price last{};
    int64_t last_trade_ms = 0;
  };
  AvgPrice AveragePrice(int64_t now_ms) const;
};

// One change to one order, in event order: what an executionReport carries.
struct ExecutionReport {
  ExecType type = ExecType::kNew;
  OrderRecord order;                                          // the order after this change
  std::optional<Fill> fill;                                   // kTrade
  engine::RejectReason reject = engine::RejectReason::kNone;  // kRejected
  // kAmended that gave the order a new client order id: the id it had before.
  ClientOrderId orig_client_order_id{};
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
  Amount held{};  // on its way to another venue: in neither available nor locked
};

// A change of an order list (Binance's listStatus event): placed
// (EXEC_STARTED) or done (ALL_DONE).
struct ListStatusReport {
  ListRecord list;  // after this change
  // How many of the account's reports of this batch come before it.
  std::size_t after_reports = 0;
  Sequence seq{};
  int64_t time_ns = 0;
};

struct AccountUpdate {
  AccountId account{};
  std::vector<ExecutionReport> reports;  // in event order
  std::vector<ListStatusReport> lists;   // in event order, placed among reports by after_reports
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

// The series the candles of `interval` in the zone are summed from when
// they are not the UTC candles: the longest fixed-length interval that
// divides them and the zone's offset (1m at worst: offsets are whole minutes).
KlineInterval ZoneSource(KlineInterval interval, int32_t zone_min) noexcept;

// Rolling windows reach back at most 7 days: the 1m series keeps at least
// 7 x 24 x 60 closed candles (per market, about 1.1 MB), whatever
// klines_per_interval says.
inline constexpr int64_t kRollingWindowMaxMs = 7 * 24 * 60 * 60'000;
inline constexpr int kAvgPriceMinutes = 5;

struct ReadSideOptions {
  std::size_t max_depth_levels = 5000;     // per side in a snapshot
  std::size_t recent_trades = 1000;        // per market
  std::size_t klines_per_interval = 1000;  // per market and interval
  std::size_t history_orders = 1000;       // closed orders kept per account
  std::size_t history_trades = 1000;       // fills kept per account
};

// One market's history from the history store: its newest trades (oldest
// first, aggregate ids set) and, per interval, its newest candles (oldest
// first; the last is the open one).
struct MarketHistory {
  MarketId market{};
  std::vector<TradeRow> trades;
  std::array<std::vector<Kline>, kKlineIntervals> candles;
};

// How many closed candles of `interval` the read side keeps per market: 1m
// keeps at least the rolling windows' 7 days.
std::size_t ClosedCandlesKept(const ReadSideOptions& options, KlineInterval interval) noexcept;

// Whether `row` continues `prev`'s aggregate trade: the same taker order's
// next fill at the same price, in the same command.
bool SameAggregate(const TradeRow& prev, const TradeRow& row) noexcept;

class ReadSide {
 public:
  // REQUIRES: config validated (the exchange's configuration).
  ReadSide(const engine::EngineConfig& config, ReadSideOptions options = {});
  ~ReadSide();
  ReadSide(const ReadSide&) = delete;
  ReadSide& operator=(const ReadSide&) = delete;

  // The state recovered at start: balances, resting orders (as open orders
  // and book levels), conditional orders waiting for their trigger (open
  // orders in no level), market states. History starts empty; whatever was
  // held before is forgotten.
  void Bootstrap(const engine::EngineImage& image);
  // After Bootstrap(), before any Apply(): the markets' history as the
  // history store holds it up to the recovered sequence (recent trades and
  // candles), so that trades, klines and the tickers answer after a restart
  // what they answered before it; and the open orders as it holds them,
  // whose client order ids the image does not keep.
  void SeedHistory(std::span<const MarketHistory> markets,
                   std::span<const OrderRecord> open_orders);

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
  // The account's conditional orders of `market` waiting for their trigger
  // (open, untriggered: Waiting()).
  std::size_t WaitingOrders(AccountId account, MarketId market) const;
  // The account's open iceberg orders of `market` (MAX_NUM_ICEBERG_ORDERS).
  std::size_t IcebergOrders(AccountId account, MarketId market) const;

  // Order lists: open ones, and done ones still held (as many as
  // history_orders, per account). By id (any market), or by list client
  // order id (an open list first, else the newest done one).
  std::optional<ListRecord> FindList(AccountId account, uint64_t list_id) const;
  std::optional<ListRecord> FindListByClientId(AccountId account,
                                               std::string_view list_client_order_id) const;
  std::vector<ListRecord> OpenLists(AccountId account) const;
  // Lists by id ascending: from_id > 0: ids >= from_id; start/end (ms, 0 =
  // unbounded) on the placing time; at most limit (the newest when neither
  // from_id nor start).
  std::vector<ListRecord> AllLists(AccountId account, uint64_t from_id, int64_t start_ms,
                                   int64_t end_ms, std::size_t limit) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mb::marketdata
