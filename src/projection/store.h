// Where the projection lives: a database behind one interface, with an
// embedded SQLite store (the default) and a PostgreSQL store (at scale).
//
// The contract every store keeps:
//   - Open() applies the schema migrations it has not applied yet (one
//     versioned mechanism, schema.h) and refuses a schema newer than it knows.
//   - Commit() writes one RowBatch and the new ProjectorState in ONE
//     transaction: after a crash at any point the rows and the applied
//     sequence agree, so resuming from applied_seq + 1 neither loses nor
//     duplicates a row.
//   - Reads (history queries) use their own connection and see committed
//     batches only.
//
//   - A store whose log would pass its ceiling (SQLite's write-ahead log, see
//     StoreOptions::wal_max_bytes) answers Commit() with kUnavailable before
//     writing anything: the projector waits and tries again, the engine never
//     notices.
//
// Thread safety: the writer calls (Open, State, OpenOrders, OpenOrderLists,
// Commit, Reset)
// from one thread. The query calls and Storage() may come from any thread,
// concurrently with the writer.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/market.h"
#include "marketdata/records.h"
#include "projection/rows.h"

namespace mb::projection {

// What the projection has applied. The checksum and config hash identify the
// journal it came from: a projection from another data directory is refused
// even when its sequence is not ahead of this journal's.
struct ProjectorState {
  uint64_t applied_seq = 0;
  uint64_t applied_checksum = 0;  // of the record applied_seq (0 when nothing applied)
  uint64_t config_hash = 0;
  int64_t applied_time_ns = 0;  // event time of that record
  friend bool operator==(const ProjectorState&, const ProjectorState&) = default;
};

// History filters, as Binance defines them (see docs/api.md): ids >= from_id
// and times (ms, 0 = unbounded, both ends inclusive) within [start_ms, end_ms];
// with a lower bound (from_id > 0 or start_ms != 0) the oldest `limit` rows,
// otherwise the newest `limit`; always returned oldest first. Order lists
// (AllOrderLists) are of the account in every market: `market` and
// `order_id` do not apply.
struct HistoryQuery {
  uint32_t account = 0;
  uint16_t market = 0;
  uint64_t order_id = 0;  // myTrades: of that order only (0 = any)
  uint64_t from_id = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::size_t limit = 500;
};

struct LedgerQuery {
  uint32_t account = 0;
  uint64_t from_seq = 0;  // lines with seq >= from_seq, oldest first
  std::size_t limit = 500;
};

// Where a transfer to another venue stands: pending while it has no
// resolution row.
enum class TransferState : uint8_t { kPending = 0, kCompleted = 1, kRefunded = 2 };

// The transfer histories: rows of one account (or of all), of one asset (or
// of all), whose time (ms, 0 = unbounded, both ends inclusive) is within
// [start_ms, end_ms]; newest first (by transfer id), at most `limit` after
// skipping `offset`.
struct TransferQuery {
  std::optional<uint32_t> account = std::nullopt;     // nullopt: every account
  std::optional<uint16_t> asset = std::nullopt;       // nullopt: every asset
  std::optional<TransferState> state = std::nullopt;  // withdrawals only (deposits have none)
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::size_t offset = 0;
  std::size_t limit = 1000;
};

// A transfer to another venue as it stands: held, and how it ended if it has.
struct WithdrawalRow {
  TransferOutRow held;
  TransferState state = TransferState::kPending;
  engine::RefundReason reason = engine::RefundReason::kVoided;  // kRefunded only
  int64_t resolved_ns = 0;                                      // 0 while pending
  friend bool operator==(const WithdrawalRow&, const WithdrawalRow&) = default;
};

// Every row of every table, ordered by key, as text: what "row-for-row
// identical" compares.
struct TableDump {
  std::string table;
  std::vector<std::string> rows;
};

// Per-asset and per-order figures the verifier compares with a replay.
struct ProjectionTotals {
  uint64_t orders = 0, order_events = 0, trades = 0, ledger_entries = 0, deposits = 0,
           withdrawals = 0, transfers_out = 0, transfers_resolved = 0, order_lists = 0;
  // (account, asset, bucket) -> sum of ledger deltas, sorted by key
  struct Balance {
    uint32_t account = 0;
    uint16_t asset = 0;
    uint8_t bucket = 0;
    int64_t sum = 0;
    friend bool operator==(const Balance&, const Balance&) = default;
  };
  std::vector<Balance> balances;
};

// What the database occupies on disk and how its checkpoints go: the SQLite
// store reports it; a server database (PostgreSQL) manages its own log and
// reports nothing.
struct StorageStats {
  uint64_t db_bytes = 0;                 // the database file
  uint64_t wal_bytes = 0;                // the -wal file as it is on disk now
  uint64_t wal_max_bytes = 0;            // its ceiling
  uint64_t frame_bytes = 0;              // one WAL frame: a page and its header
  uint64_t wal_frames = 0;               // frames (pages) the WAL holds since it last started over
  uint64_t frames_written = 0;           // every frame ever appended to the WAL
  uint64_t frames_checkpointed = 0;      // every frame copied into the database
  uint64_t checkpoints = 0;              // checkpoint runs
  uint64_t checkpoints_completed = 0;    // runs that left nothing in the WAL to copy
  uint64_t ceiling_waits = 0;            // commits refused because the WAL was at its ceiling
  uint64_t last_commit_bytes = 0;        // WAL bytes the last commit appended
  double seconds_since_checkpoint = -1;  // since the last completed one (-1: none yet)
  bool over_ceiling = false;             // the last commit was refused for the ceiling (unhealthy)
};

class Store {
 public:
  virtual ~Store() = default;

  virtual std::string_view backend() const noexcept = 0;  // "sqlite" | "postgres" | "rocksdb"
  // True for the history store (RocksDB), which also keeps every market's
  // trades and candles (MarketTrades, Candles, OpenCandles).
  virtual bool keeps_market_data() const noexcept { return false; }

  // ---- writer ----
  virtual Result<ProjectorState> State() = 0;
  // Status NEW, PARTIALLY_FILLED or PENDING_NEW, by order id.
  virtual Result<std::vector<OrderRow>> OpenOrders() = 0;
  virtual Result<std::vector<ListRow>> OpenOrderLists() = 0;  // executing, by list id
  // The newest candle of each market and interval (empty where candles are
  // not kept): what a resumed RowBuilder goes on from.
  virtual Result<std::vector<CandleRow>> OpenCandles() { return std::vector<CandleRow>{}; }
  virtual Status Commit(const RowBatch& batch, const ProjectorState& state) = 0;
  // Drops every row (schema kept), state back to nothing applied.
  virtual Status Reset() = 0;

  // ---- queries (any thread) ----
  virtual Result<std::vector<OrderRecord>> AllOrders(const HistoryQuery& q) = 0;
  virtual Result<std::optional<OrderRecord>> FindOrder(uint32_t account, uint16_t market,
                                                       uint64_t order_id) = 0;
  // The newest order of the account and market with that client order id.
  virtual Result<std::optional<OrderRecord>> FindOrderByClientId(uint32_t account, uint16_t market,
                                                                 std::string_view client_id) = 0;
  virtual Result<std::vector<marketdata::Fill>> MyTrades(const HistoryQuery& q) = 0;
  // Order lists of q.account (allOrderList), by list id.
  virtual Result<std::vector<ListRecord>> AllOrderLists(const HistoryQuery& q) = 0;
  // The account's list with that id; nullopt when the account has none such.
  virtual Result<std::optional<ListRecord>> FindOrderList(uint32_t account, uint64_t list_id) = 0;
  // The account's newest list with that list client order id.
  virtual Result<std::optional<ListRecord>> FindOrderListByClientId(uint32_t account,
                                                                    std::string_view client_id) = 0;
  virtual Result<std::vector<LedgerRow>> Ledger(const LedgerQuery& q) = 0;
  // Transfers to other venues (transfers_out with their resolution).
  virtual Result<std::vector<WithdrawalRow>> Withdrawals(const TransferQuery& q) = 0;
  // Deposits (the deposits table); q.state is ignored.
  virtual Result<std::vector<TransferRow>> Deposits(const TransferQuery& q) = 0;
  // The account's transfer to another venue with that id or, when id is 0,
  // with that reference; nullopt when the account has none such.
  virtual Result<std::optional<WithdrawalRow>> FindWithdrawal(uint32_t account, uint64_t id,
                                                              std::string_view ref) = 0;
  virtual Result<ProjectorState> CommittedState() = 0;  // as a reader sees it
  // A market's trades by id: from_id > 0, the first `limit` with ids >=
  // from_id; otherwise the newest `limit`; oldest first. And the candles of
  // one interval opening in [start_ms, end_ms] (0: unbounded): the first
  // `limit` with a start, otherwise the newest `limit`; oldest first (the
  // last may be the open one). Stores that do not keep market data
  // (keeps_market_data()) answer kInvalidArgument.
  virtual Result<std::vector<TradeRecord>> MarketTrades(uint16_t market, uint64_t from_id,
                                                        std::size_t limit) {
    (void)market, (void)from_id, (void)limit;
    return InvalidArgument(std::string(backend()) + " keeps no market data");
  }
  // The id of the market's first trade at or after time_ns; 0 when none.
  virtual Result<uint64_t> FirstTradeFrom(uint16_t market, int64_t time_ns) {
    (void)market, (void)time_ns;
    return InvalidArgument(std::string(backend()) + " keeps no market data");
  }
  virtual Result<std::vector<marketdata::Kline>> Candles(uint16_t market, uint8_t interval,
                                                         int64_t start_ms, int64_t end_ms,
                                                         std::size_t limit) {
    (void)market, (void)interval, (void)start_ms, (void)end_ms, (void)limit;
    return InvalidArgument(std::string(backend()) + " keeps no market data");
  }
  // Disk use and checkpoints; nullopt for a backend that does not report them
  // (or a store not opened yet).
  virtual std::optional<StorageStats> Storage() { return std::nullopt; }

  // ---- checks ----
  virtual Result<std::vector<TableDump>> Dump() = 0;
  virtual Result<ProjectionTotals> Totals() = 0;
  virtual Result<std::vector<OrderRow>> AllOrderRows() = 0;  // by order id
};

inline constexpr uint64_t kMinWalMaxBytes = uint64_t{4} << 20;

struct StoreOptions {
  // "sqlite" (path = <data>/projection.sqlite unless given) or "postgres"
  // (url = a libpq connection string / URI).
  std::string backend = "sqlite";
  std::string path;
  std::string url;
  // SQLite: the write-ahead log never grows past wal_max_bytes. Checkpoints
  // run beside the writer and one is completed by the writer itself whenever
  // the WAL holds a quarter of the ceiling, so the WAL starts over from its
  // beginning (and its file is cut back to that quarter). If a reader keeps
  // that checkpoint from completing, commits continue up to the ceiling and
  // then wait for it.
  uint64_t wal_max_bytes = uint64_t{64} << 20;  // at least kMinWalMaxBytes
  // SQLite: the writer's page cache (memory the process keeps for it);
  // RocksDB: its block cache.
  uint64_t cache_bytes = uint64_t{64} << 20;
  // RocksDB: one memtable's size (at most three are kept): what is written
  // to disk at once by a flush.
  uint64_t write_buffer_bytes = uint64_t{16} << 20;
  // rocksdb: the most rows a newest-first scan holds at once (tests set it
  // small to exercise the window's halving).
  std::size_t scan_window_rows = 4096;
  // RocksDB: where its warnings and errors go (null: stderr). It writes no
  // log file of its own: one that fails on a full disk is not written again.
  std::function<void(std::string_view)> log;
};

// Opens a store and migrates its schema. The engine configuration converts
// ids into the query results' types (commission asset of a fill): it must
// outlive the store and name every market the store holds (a server passes
// the gateway's, which grows with the markets added at run time).
Result<std::unique_ptr<Store>> OpenStore(const StoreOptions& options,
                                         const engine::EngineConfig& config);

// A store that opens itself on first use and, while its database cannot be
// reached, answers every call with kUnavailable (trying again at most every
// `retry`) — so a server starts and trades while the database is down.
std::unique_ptr<Store> OpenStoreWhenReachable(const StoreOptions& options,
                                              const engine::EngineConfig& config,
                                              std::chrono::milliseconds retry);

Result<std::unique_ptr<Store>> OpenSqliteStore(const StoreOptions& options,
                                               const engine::EngineConfig& config);
// The SQLite store at `path` with the default options.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const engine::EngineConfig& config);
// The history store: RocksDB in the directory options.path (made if
// missing); options.cache_bytes bounds its block cache.
Result<std::unique_ptr<Store>> OpenRocksStore(const StoreOptions& options,
                                              const engine::EngineConfig& config);
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url,
                                                 const engine::EngineConfig& config);

}  // namespace mb::projection
