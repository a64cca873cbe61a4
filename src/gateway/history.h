// What the gateway asks of a history: allOrders, myTrades, GET order of an
// order that is no longer open, allOrderList, GET orderList of a list that
// is not open, and the operator's ledger, kept by a database that follows
// the journal. The gateway owns this interface and never sees where history
// lives; the app implements it with the projection (app/history.h) and hands
// it over with Gateway::SetHistory().
//
// Answers are as of applied_seq(). Before a query the gateway waits
// (WaitApplied) until the history has applied what its read side had applied
// when the request arrived, so an answer never misses what an earlier answer
// or stream event showed.
//
// Errors: kUnavailable while the database cannot be reached; the gateway
// answers 503 for any error.
//
// Thread safety: every method from any thread, concurrently (the gateway
// calls the queries and WaitApplied from its history thread, Health() from io
// threads).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/strong.h"
#include "engine/ledger.h"
#include "marketdata/read_side.h"
#include "marketdata/records.h"

namespace mb::gateway {

// The history endpoints' filters, as Binance defines them (docs/api.md): ids
// >= from_id and times (ms, 0 = unbounded, both ends inclusive) within
// [start_ms, end_ms]; with a lower bound (from_id > 0 or start_ms != 0) the
// oldest `limit` rows, otherwise the newest `limit`; always oldest first.
struct HistoryFilter {
  AccountId account{};
  MarketId market{};
  uint64_t order_id = 0;  // myTrades: of that order only (0 = any)
  uint64_t from_id = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::size_t limit = 500;
};

// An account's ledger lines with seq >= from_seq, oldest first, at most limit.
struct LedgerFilter {
  AccountId account{};
  uint64_t from_seq = 0;
  std::size_t limit = 500;
};

// One line of the ledger: a change of one balance bucket, keyed by the
// record's sequence and the line's index within it.
struct LedgerLine {
  uint64_t seq = 0;
  uint32_t idx = 0;
  AccountId account{};
  AssetId asset{};
  engine::Bucket bucket = engine::Bucket::kAvailable;
  Amount delta{};
  engine::LedgerReason reason = engine::LedgerReason::kOrderLock;
  engine::RefKind ref_kind = engine::RefKind::kOrder;
  uint64_t ref = 0;  // order, trade or transfer id
  int64_t time_ns = 0;
};

// Transfers: the withdrawal and deposit histories and the operator's list.
// Newest first (Binance's order), at most `limit` after skipping `offset`;
// times in ms, 0 = unbounded, both ends inclusive.
enum class TransferState : uint8_t { kPending = 0, kCompleted = 1, kRefunded = 2 };

struct TransferFilter {
  std::optional<AccountId> account;  // nullopt: every account (the operator's list)
  std::optional<AssetId> asset;
  std::optional<TransferState> state;  // withdrawals only
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::size_t offset = 0;
  std::size_t limit = 1000;
};

// A transfer to another venue (TransferHeld, and its resolution if any).
struct WithdrawalRecord {
  uint64_t transfer_id = 0;  // == its sequence
  AccountId account{};
  AssetId asset{};
  Amount amount{};  // what left the account; the destination receives amount - fee
  Amount fee{};
  std::string ref;  // the client's withdrawOrderId, or the generated one
  std::string address;
  int64_t time_ns = 0;  // held
  TransferState state = TransferState::kPending;
  engine::RefundReason reason = engine::RefundReason::kVoided;  // when refunded
  int64_t resolved_ns = 0;                                      // 0 while pending
};

// A deposit (an operator's, or a transfer from another venue: ref
// "<venue>:<transfer id>").
struct DepositRecord {
  uint64_t transfer_id = 0;
  AccountId account{};
  AssetId asset{};
  Amount amount{};
  std::string ref;
  int64_t time_ns = 0;
};

// The disk figures of a history database that reports them (SQLite).
struct HistoryStorage {
  uint64_t db_bytes = 0;
  uint64_t wal_bytes = 0;
  uint64_t wal_max_bytes = 0;
  uint64_t frames_written = 0;
  uint64_t frames_checkpointed = 0;
  uint64_t checkpoints = 0;
  uint64_t checkpoints_completed = 0;
  uint64_t ceiling_waits = 0;
  double seconds_since_checkpoint = -1;  // -1: no checkpoint completed yet
  bool over_ceiling = false;             // the last commit was refused for the log's ceiling
};

// How the history keeps up, for /admin/v1/health.
struct HistoryHealth {
  std::string backend;  // "sqlite" | "postgres"
  uint64_t applied_seq = 0;
  uint64_t lag_events = 0;  // records durable, not yet applied
  double lag_seconds = 0;   // since the oldest of them became durable
  bool healthy = true;
  std::string last_error;
  std::optional<HistoryStorage> storage;  // nullopt: a backend that reports none
};

class History {
 public:
  virtual ~History() = default;

  virtual Result<std::vector<marketdata::OrderRecord>> AllOrders(const HistoryFilter& f) = 0;
  virtual Result<std::optional<marketdata::OrderRecord>> FindOrder(AccountId account,
                                                                   MarketId market, OrderId id) = 0;
  // The newest order of the account and market with that client order id.
  virtual Result<std::optional<marketdata::OrderRecord>> FindOrderByClientId(
      AccountId account, MarketId market, std::string_view client_order_id) = 0;
  virtual Result<std::vector<marketdata::Fill>> MyTrades(const HistoryFilter& f) = 0;
  // The account's order lists (OCO, OTO, OTOCO) in every market: f.market and
  // f.order_id do not apply.
  virtual Result<std::vector<marketdata::ListRecord>> AllOrderLists(const HistoryFilter& f) = 0;
  virtual Result<std::optional<marketdata::ListRecord>> FindOrderList(AccountId account,
                                                                      uint64_t list_id) = 0;
  // The newest list of the account with that list client order id.
  virtual Result<std::optional<marketdata::ListRecord>> FindOrderListByClientId(
      AccountId account, std::string_view list_client_order_id) = 0;
  virtual Result<std::vector<LedgerLine>> Ledger(const LedgerFilter& f) = 0;
  virtual Result<std::vector<WithdrawalRecord>> Withdrawals(const TransferFilter& f) = 0;
  virtual Result<std::vector<DepositRecord>> Deposits(const TransferFilter& f) = 0;
  // One transfer to another venue by id, or by the account's ref (id 0).
  virtual Result<std::optional<WithdrawalRecord>> FindWithdrawal(AccountId account, uint64_t id,
                                                                 std::string_view ref) = 0;

  // A market's trades with ids >= from_id, oldest first, at most `limit`
  // (historicalTrades and trades?fromId= reaching past the read side's
  // recent trades). kNotFound: this history keeps no market trades.
  virtual Result<std::vector<marketdata::TradeRow>> MarketTrades(MarketId market, uint64_t from_id,
                                                                 std::size_t limit) {
    (void)market, (void)from_id, (void)limit;
    return NotFound("this history keeps no market trades");
  }

  // A market's aggregate trades with ids >= from_id and first-trade times in
  // [start_ms, end_ms] (0: unbounded), the oldest `limit`, as
  // MarketSnapshot::AggTrades builds them (aggTrades reaching past the read
  // side's recent trades; from_id or start_ms is set). kNotFound: this
  // history keeps no market trades.
  virtual Result<std::vector<marketdata::AggTrade>> AggTrades(MarketId market, uint64_t from_id,
                                                              int64_t start_ms, int64_t end_ms,
                                                              std::size_t limit) {
    (void)market, (void)from_id, (void)start_ms, (void)end_ms, (void)limit;
    return NotFound("this history keeps no market trades");
  }

  // A market's candles of one interval (UTC) opening in [start_ms, end_ms]
  // (0: unbounded), as MarketSnapshot::Klines selects them (klines reaching
  // past the read side's candles). kNotFound: this history keeps no candles.
  virtual Result<std::vector<marketdata::Kline>> Klines(MarketId market,
                                                        marketdata::KlineInterval interval,
                                                        int64_t start_ms, int64_t end_ms,
                                                        std::size_t limit) {
    (void)market, (void)interval, (void)start_ms, (void)end_ms, (void)limit;
    return NotFound("this history keeps no candles");
  }

  // The last journal sequence the answers include.
  virtual uint64_t applied_seq() const noexcept = 0;
  // Waits until applied_seq() >= seq; false on timeout.
  virtual bool WaitApplied(uint64_t seq, std::chrono::milliseconds timeout) = 0;
  virtual HistoryHealth Health() const = 0;
};

}  // namespace mb::gateway
