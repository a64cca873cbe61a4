#include "projection/store.h"

#include <atomic>
#include <limits>

#include "common/thread_annotations.h"
#include "projection/sql_rows.h"

namespace mb::projection {

std::string UpsertOrderSql() {
  // Only what an order's life changes is set on conflict: the indexes on the
  // fixed columns (account, market, placing time) stay untouched. The client
  // order id changes when an amend gives the order a new one.
  constexpr std::string_view kMutable[] = {
      "price",       "qty",         "executed_qty",   "cumulative_quote",
      "remaining",   "status",      "expire_reason",  "working",
      "update_ns",   "updated_seq", "stop_price",     "trailing_delta",
      "trailing_ns", "trigger_ns",  "client_order_id"};
  std::string sql = "INSERT INTO orders (" + std::string(kOrderColumns) + ") VALUES (?";
  for (std::size_t i = 1; i < kOrderColumnCount; ++i) sql += ", ?";
  sql += ") ON CONFLICT (order_id) DO UPDATE SET ";
  bool first = true;
  for (std::string_view col : kMutable) {
    if (!first) sql += ", ";
    sql += std::string(col) + " = excluded." + std::string(col);
    first = false;
  }
  return sql;
}

std::string UpsertListSql() {
  // The list client order id is indexed and never changes; a list's orders'
  // client ids are set as they are accepted.
  constexpr std::string_view kMutable[] = {"client_id_0", "client_id_1", "client_id_2",
                                           "status",      "update_ns",   "updated_seq"};
  std::string sql = "INSERT INTO order_lists (" + std::string(kListColumns) + ") VALUES (?";
  for (std::size_t i = 1; i < kListColumnCount; ++i) sql += ", ?";
  sql += ") ON CONFLICT (list_id) DO UPDATE SET ";
  bool first = true;
  for (std::string_view col : kMutable) {
    if (!first) sql += ", ";
    sql += std::string(col) + " = excluded." + std::string(col);
    first = false;
  }
  return sql;
}

std::string AllListsSql(bool ascending) {
  return std::string(kListSelect) +
         " WHERE account_id = ? AND list_id >= ? AND time_ns >= ? AND time_ns <= ? ORDER BY "
         "list_id " +
         (ascending ? "ASC" : "DESC") + " LIMIT ?";
}

std::string FindListSql(bool by_client_id) {
  return std::string(kListSelect) + " WHERE account_id = ? AND " +
         (by_client_id ? "list_client_order_id = ? ORDER BY list_id DESC LIMIT 1" : "list_id = ?");
}

std::string AllOrdersSql(bool ascending) {
  return std::string(kOrderSelect) +
         " WHERE account_id = ? AND market_id = ? AND order_id >= ? AND time_ns >= ? AND "
         "time_ns <= ? ORDER BY order_id " +
         (ascending ? "ASC" : "DESC") + " LIMIT ?";
}

std::string MyTradesSql(bool ascending) {
  // One fill per side the account took: a self-trade is two fills.
  constexpr std::string_view kSide =
      "SELECT trade_id, market_id, price, qty, base_qty, notional, time_ns, {S}_order_id, "
      "{S}_account, {M}, taker_side, {S}_fee FROM trades WHERE {S}_account = ? AND market_id = ? "
      "AND (? = 0 OR {S}_order_id = ?)";
  auto side = [&](std::string_view s, std::string_view maker) {
    std::string q(kSide);
    for (std::size_t at = q.find("{S}"); at != std::string::npos; at = q.find("{S}", at)) {
      q.replace(at, 3, s);
    }
    q.replace(q.find("{M}"), 3, maker);
    return q;
  };
  return "SELECT * FROM (" + side("maker", "1 AS is_maker") + " UNION ALL " +
         side("taker", "0 AS is_maker") +
         ") AS fills WHERE trade_id >= ? AND time_ns >= ? AND time_ns <= ? ORDER BY " +
         (ascending ? "trade_id ASC, is_maker DESC" : "trade_id DESC, is_maker ASC") + " LIMIT ?";
}

namespace {

// A pending transfer has no resolution row; a resolved one is completed or refunded.
constexpr std::string_view kWithdrawalState =
    "CASE WHEN r.transfer_id IS NULL THEN 0 WHEN r.completed <> 0 THEN 1 ELSE 2 END";

std::string WithdrawalSelect() {
  return "SELECT o.transfer_id, o.account_id, o.asset_id, o.amount, o.fee, o.ref, o.address, "
         "o.time_ns, " +
         std::string(kWithdrawalState) +
         ", COALESCE(r.reason, 0), COALESCE(r.time_ns, 0) FROM transfers_out o LEFT JOIN "
         "transfers_resolved r ON r.transfer_id = o.transfer_id";
}

}  // namespace

std::string WithdrawalsSql(bool by_account) {
  // The account's rows come from transfers_out_by_account, every account's
  // from the key, both in transfer id order: no sort.
  return WithdrawalSelect() + " WHERE " + (by_account ? "o.account_id = ? AND " : "") +
         "(? < 0 OR o.asset_id = ?) AND (? < 0 OR " + std::string(kWithdrawalState) +
         " = ?) AND o.time_ns >= ? AND o.time_ns <= ? ORDER BY o.transfer_id DESC LIMIT ? OFFSET ?";
}

std::string DepositsSql(bool by_account) {
  return std::string(
             "SELECT transfer_id, account_id, asset_id, amount, ref, time_ns FROM deposits "
             "WHERE ") +
         (by_account ? "account_id = ? AND " : "") +
         "(? < 0 OR asset_id = ?) AND time_ns >= ? AND time_ns <= ? ORDER BY transfer_id DESC "
         "LIMIT ? OFFSET ?";
}

std::string FindWithdrawalSql(bool by_ref) {
  return WithdrawalSelect() + " WHERE o.account_id = ? AND " +
         (by_ref ? "o.ref = ? ORDER BY o.transfer_id DESC LIMIT 1" : "o.transfer_id = ?");
}

std::vector<int64_t> TransferParams(const TransferQuery& q, bool withdrawals) {
  std::vector<int64_t> p;
  if (q.account) p.push_back(int64_t{*q.account});
  const int64_t asset = q.asset ? int64_t{*q.asset} : -1;
  p.insert(p.end(), {asset, asset});
  if (withdrawals) {
    const int64_t state = q.state ? Small(*q.state) : -1;
    p.insert(p.end(), {state, state});
  }
  const auto [lo, hi] = TimeBounds(q.start_ms, q.end_ms);
  p.insert(p.end(), {lo, hi, Limit(q.limit), Limit(q.offset)});
  return p;
}

std::pair<int64_t, int64_t> TimeBounds(int64_t start_ms, int64_t end_ms) {
  constexpr int64_t kMsNs = 1'000'000;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t lo = start_ms == 0             ? std::numeric_limits<int64_t>::min()
                     : start_ms > kMax / kMsNs ? kMax
                                               : start_ms * kMsNs;
  const int64_t hi = end_ms == 0 || end_ms >= kMax / kMsNs ? kMax : end_ms * kMsNs + kMsNs - 1;
  return {lo, hi};
}

std::string NumberPlaceholders(std::string_view sql) {
  std::string out;
  int n = 0;
  bool quoted = false;
  for (char c : sql) {
    if (c == '\'') quoted = !quoted;
    if (c == '?' && !quoted) {
      out += '$' + std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

Status CheckSchemaVersion(int64_t applied) {
  if (applied > kSchemaVersion) {
    return InvalidArgument("projection schema version " + std::to_string(applied) +
                           " is newer than this build (" + std::to_string(kSchemaVersion) +
                           "): it was written by a newer Matchbook; use that, or rebuild the "
                           "projection into an empty database");
  }
  return Status::Ok();
}

uint64_t* CountOf(ProjectionTotals& t, std::string_view table) {
  if (table == "orders") return &t.orders;
  if (table == "order_events") return &t.order_events;
  if (table == "trades") return &t.trades;
  if (table == "ledger_entries") return &t.ledger_entries;
  if (table == "deposits") return &t.deposits;
  if (table == "withdrawals") return &t.withdrawals;
  if (table == "transfers_out") return &t.transfers_out;
  if (table == "transfers_resolved") return &t.transfers_resolved;
  MB_CHECK(table == "order_lists");  // every table of DataTables() has a count
  return &t.order_lists;
}

Result<std::unique_ptr<Store>> OpenStore(const StoreOptions& options,
                                         const engine::EngineConfig& config) {
  if (options.backend == "sqlite") {
    if (options.path.empty()) return InvalidArgument("projection: sqlite needs a path");
    return OpenSqliteStore(options, config);
  }
  if (options.backend == "rocksdb") return OpenRocksStore(options, config);
  if (options.backend == "postgres") {
    if (options.url.empty()) {
      return InvalidArgument(
          "projection: postgres needs a url (projection.url or MATCHBOOK_PG_URL)");
    }
    return OpenPostgresStore(options.url, config);
  }
  return InvalidArgument("projection: unknown backend '" + options.backend +
                         "' (expected sqlite or postgres)");
}

namespace {

class ReconnectingStore final : public Store {
 public:
  ReconnectingStore(StoreOptions options, const engine::EngineConfig& config,
                    std::chrono::milliseconds retry)
      : options_(std::move(options)), config_(config), retry_(retry) {}

  std::string_view backend() const noexcept override {
    return options_.backend == "postgres" ? "postgres" : "sqlite";
  }
  Result<ProjectorState> State() override { return Call(&Store::State); }
  Result<std::vector<OrderRow>> OpenOrders() override { return Call(&Store::OpenOrders); }
  Result<std::vector<ListRow>> OpenOrderLists() override { return Call(&Store::OpenOrderLists); }
  Status Commit(const RowBatch& batch, const ProjectorState& state) override {
    auto inner = Inner();
    if (!inner.ok()) return inner.status();
    return (*inner)->Commit(batch, state);
  }
  Status Reset() override {
    auto inner = Inner();
    if (!inner.ok()) return inner.status();
    return (*inner)->Reset();
  }
  Result<std::vector<OrderRecord>> AllOrders(const HistoryQuery& q) override {
    return Call(&Store::AllOrders, q);
  }
  Result<std::optional<OrderRecord>> FindOrder(uint32_t account, uint16_t market,
                                               uint64_t order_id) override {
    return Call(&Store::FindOrder, account, market, order_id);
  }
  Result<std::optional<OrderRecord>> FindOrderByClientId(uint32_t account, uint16_t market,
                                                         std::string_view client_id) override {
    return Call(&Store::FindOrderByClientId, account, market, client_id);
  }
  Result<std::vector<marketdata::Fill>> MyTrades(const HistoryQuery& q) override {
    return Call(&Store::MyTrades, q);
  }
  Result<std::vector<ListRecord>> AllOrderLists(const HistoryQuery& q) override {
    return Call(&Store::AllOrderLists, q);
  }
  Result<std::optional<ListRecord>> FindOrderList(uint32_t account, uint64_t list_id) override {
    return Call(&Store::FindOrderList, account, list_id);
  }
  Result<std::optional<ListRecord>> FindOrderListByClientId(uint32_t account,
                                                            std::string_view client_id) override {
    return Call(&Store::FindOrderListByClientId, account, client_id);
  }
  Result<std::vector<LedgerRow>> Ledger(const LedgerQuery& q) override {
    return Call(&Store::Ledger, q);
  }
  Result<std::vector<WithdrawalRow>> Withdrawals(const TransferQuery& q) override {
    return Call(&Store::Withdrawals, q);
  }
  Result<std::vector<TransferRow>> Deposits(const TransferQuery& q) override {
    return Call(&Store::Deposits, q);
  }
  Result<std::optional<WithdrawalRow>> FindWithdrawal(uint32_t account, uint64_t id,
                                                      std::string_view ref) override {
    return Call(&Store::FindWithdrawal, account, id, ref);
  }
  Result<ProjectorState> CommittedState() override { return Call(&Store::CommittedState); }
  Result<std::vector<TableDump>> Dump() override { return Call(&Store::Dump); }
  Result<ProjectionTotals> Totals() override { return Call(&Store::Totals); }
  Result<std::vector<OrderRow>> AllOrderRows() override { return Call(&Store::AllOrderRows); }
  std::optional<StorageStats> Storage() override {
    Store* inner = opened_.load(std::memory_order_acquire);
    return inner != nullptr ? inner->Storage() : std::nullopt;
  }

 private:
  // The opened store, or why it cannot be opened (tried again after retry_).
  Result<Store*> Inner() {
    MutexLock lock(mu_);
    if (inner_) return inner_.get();
    const auto now = std::chrono::steady_clock::now();
    if (tried_ && now - last_try_ < retry_) return last_error_;
    tried_ = true;
    last_try_ = now;
    auto opened = OpenStore(options_, config_);
    if (!opened.ok()) {
      last_error_ = Unavailable(opened.status().message());
      return last_error_;
    }
    inner_ = std::move(*opened);
    opened_.store(inner_.get(), std::memory_order_release);
    return inner_.get();
  }

  template <class R, class... P, class... A>
  R Call(R (Store::*fn)(P...), A&&... args) {
    auto inner = Inner();
    if (!inner.ok()) return inner.status();
    return ((*inner)->*fn)(std::forward<A>(args)...);
  }

  const StoreOptions options_;
  const engine::EngineConfig& config_;
  const std::chrono::milliseconds retry_;
  Mutex mu_;
  std::unique_ptr<Store> inner_ MB_GUARDED_BY(mu_);
  std::atomic<Store*> opened_{nullptr};  // inner_ once set (it never changes after): no lock
  bool tried_ MB_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point last_try_ MB_GUARDED_BY(mu_);
  Status last_error_ MB_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Store> OpenStoreWhenReachable(const StoreOptions& options,
                                              const engine::EngineConfig& config,
                                              std::chrono::milliseconds retry) {
  return std::make_unique<ReconnectingStore>(options, config, retry);
}

}  // namespace mb::projection
