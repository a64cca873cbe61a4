// The embedded store: one SQLite file in WAL mode, a writer connection that
// commits each batch in one transaction with prepared statements, and a
// reader connection for the history queries (WAL lets it read while the
// writer writes).
//
// synchronous=NORMAL: a power cut may lose the last commits, but the rows and
// projector_state go back together, and the journal still holds the events,
// so the projector simply applies them again.
#include <pthread.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "projection/schema.h"
#include "projection/sql_rows.h"
#include "projection/store.h"

namespace mb::projection {
namespace {

class Db {
 public:
  Db() = default;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db() {
    if (db_ != nullptr) sqlite3_close_v2(db_);
  }

  Status Open(const std::string& path, bool create) {
    const int flags =
        SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      return IoError("sqlite: cannot open " + path + ": " +
                     (db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory"));
    }
    sqlite3_busy_timeout(db_, 5000);
    sqlite3_extended_result_codes(db_, 1);
    path_ = path;
    return Status::Ok();
  }

  Status Exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err != nullptr ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      return Error(msg);
    }
    return Status::Ok();
  }

  Status Error(std::string_view what) const {
    const int code = sqlite3_extended_errcode(db_);
    std::string msg = "sqlite " + path_ + ": " + std::string(what);
    if ((code & 0xff) == SQLITE_FULL || (code & 0xff) == SQLITE_IOERR) return IoError(msg);
    if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) return Unavailable(msg);
    if ((code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB) return Corruption(msg);
    return Status(StatusCode::kInternal, msg);
  }
  Status LastError() const { return Error(sqlite3_errmsg(db_)); }

  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// A prepared statement, reset after each use.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
  }

  Status Prepare(Db& db, std::string_view sql) {
    db_ = &db;
    if (sqlite3_prepare_v3(db.get(), sql.data(), static_cast<int>(sql.size()),
                           SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK) {
      return db.LastError();
    }
    return Status::Ok();
  }

  Stmt& Bind(int64_t v) {
    sqlite3_bind_int64(stmt_, ++bound_, v);
    return *this;
  }
  Stmt& Bind(std::string_view v) {
    sqlite3_bind_text(stmt_, ++bound_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  // Binds every value of a row (sql_rows.h lists them per table).
  template <class... T>
  Stmt& BindAll(const std::tuple<T...>& values) {
    std::apply([this](const auto&... v) { (Bind(v), ...); }, values);
    return *this;
  }

  // Runs a statement that returns no rows.
  Status Run() {
    const int rc = sqlite3_step(stmt_);
    Reset();
    if (rc != SQLITE_DONE) return db_->LastError();
    return Status::Ok();
  }
  // Steps a query: true while there is a row; *error set on failure.
  bool Next(Status* error) {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) *error = db_->LastError();
    Reset();
    return false;
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string_view Text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p == nullptr
               ? std::string_view{}
               : std::string_view(reinterpret_cast<const char*>(p),
                                  static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  int columns() const { return sqlite3_column_count(stmt_); }

  void Reset() {
    sqlite3_reset(stmt_);  // every parameter is bound again before the next step
    bound_ = 0;
  }

 private:
  Db* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  int bound_ = 0;
};

// The rows of a query as the store's value types.
struct SqliteRow {
  const Stmt* s;
  int64_t Int(int col) const { return s->Int(col); }
  std::string_view Text(int col) const { return s->Text(col); }
};

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(const engine::EngineConfig& config) : config_(config) {}

  Status Open(const std::string& path) {
    MB_RETURN_IF_ERROR(writer_.Open(path, true));
    // Larger pages: fewer WAL frames (one write each) per batch. Takes effect
    // only on a new database (before the first table).
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA page_size=16384"));
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA journal_mode=WAL"));
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA synchronous=NORMAL"));
    // Batches are large and indexes grow: a big page cache. Checkpoints (each
    // one copies the WAL into the database and fsyncs) run on their own
    // thread and connection, never inside a commit: a commit only appends to
    // the WAL.
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA cache_size=-262144"));
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA wal_autocheckpoint=0"));
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA temp_store=MEMORY"));
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA foreign_keys=OFF"));
    MB_RETURN_IF_ERROR(Migrate());
    MB_RETURN_IF_ERROR(reader_.Open(path, false));
    MB_RETURN_IF_ERROR(checkpointer_.Open(path, false));
    MB_RETURN_IF_ERROR(Prepare());
    checkpoint_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "mb-checkpoint");
      Checkpoints();
    });
    return Status::Ok();
  }

  ~SqliteStore() override {
    {
      std::lock_guard lock(checkpoint_mu_);
      stop_ = true;
    }
    checkpoint_cv_.notify_all();
    if (checkpoint_thread_.joinable()) checkpoint_thread_.join();
    // A last checkpoint, so that a closed store is one file.
    if (writer_.get() != nullptr) (void)writer_.Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }

  std::string_view backend() const noexcept override { return "sqlite"; }

  Result<ProjectorState> State() override { return ReadState(writer_state_); }

  Result<std::vector<OrderRow>> OpenOrders() override { return OrderRows(writer_open_orders_); }

  Status Commit(const RowBatch& b, const ProjectorState& state) override {
    MB_RETURN_IF_ERROR(begin_.Run());
    Status st = Write(b, state);
    if (!st.ok()) {
      (void)rollback_.Run();
      return st;
    }
    st = commit_.Run();
    if (!st.ok()) {
      (void)rollback_.Run();
      return st;
    }
    if (++commits_since_checkpoint_ >= kCommitsPerCheckpoint) {
      commits_since_checkpoint_ = 0;
      checkpoint_cv_.notify_one();
    }
    return st;
  }

  Status Reset() override {
    std::string sql = "BEGIN IMMEDIATE;";
    for (const TableSpec& t : DataTables()) sql += "DELETE FROM " + std::string(t.name) + ";";
    sql +=
        "UPDATE projector_state SET applied_seq = 0, applied_checksum = 0, config_hash = 0, "
        "applied_time_ns = 0;COMMIT;";
    Status st = writer_.Exec(sql);
    if (!st.ok()) (void)writer_.Exec("ROLLBACK");
    return st;
  }

  Result<std::vector<OrderRecord>> AllOrders(const HistoryQuery& q) override {
    std::lock_guard lock(read_mu_);
    Stmt& s = Ascending(q) ? all_orders_asc_ : all_orders_desc_;
    s.Bind(q.account).Bind(q.market);
    BindFilter(s, q);
    std::vector<OrderRecord> out;
    Status err;
    while (s.Next(&err)) out.push_back(ReadOrderRow(SqliteRow{&s}, 0).order);
    if (!err.ok()) return err;
    if (!Ascending(q)) std::reverse(out.begin(), out.end());
    return out;
  }

  Result<std::optional<OrderRecord>> FindOrder(uint32_t account, uint16_t market,
                                               uint64_t order_id) override {
    std::lock_guard lock(read_mu_);
    find_order_.Bind(account).Bind(market).Bind(static_cast<int64_t>(order_id));
    return FirstOrder(find_order_);
  }

  Result<std::optional<OrderRecord>> FindOrderByClientId(uint32_t account, uint16_t market,
                                                         std::string_view client_id) override {
    std::lock_guard lock(read_mu_);
    find_client_.Bind(account).Bind(market).Bind(client_id);
    return FirstOrder(find_client_);
  }

  Result<std::vector<marketdata::Fill>> MyTrades(const HistoryQuery& q) override {
    std::lock_guard lock(read_mu_);
    Stmt& s = Ascending(q) ? trades_asc_ : trades_desc_;
    const auto order = static_cast<int64_t>(q.order_id);
    s.Bind(q.account).Bind(q.market).Bind(order).Bind(order);  // maker side
    s.Bind(q.account).Bind(q.market).Bind(order).Bind(order);  // taker side
    BindFilter(s, q);
    std::vector<marketdata::Fill> out;
    Status err;
    while (s.Next(&err)) out.push_back(ReadFill(SqliteRow{&s}, config_));
    if (!err.ok()) return err;
    if (!Ascending(q)) std::reverse(out.begin(), out.end());
    return out;
  }

  Result<std::vector<LedgerRow>> Ledger(const LedgerQuery& q) override {
    std::lock_guard lock(read_mu_);
    ledger_.Bind(q.account).Bind(static_cast<int64_t>(q.from_seq)).Bind(Limit(q.limit));
    std::vector<LedgerRow> out;
    Status err;
    while (ledger_.Next(&err)) out.push_back(ReadLedgerRow(SqliteRow{&ledger_}));
    if (!err.ok()) return err;
    return out;
  }

  Result<ProjectorState> CommittedState() override {
    std::lock_guard lock(read_mu_);
    return ReadState(reader_state_);
  }

  Result<std::vector<TableDump>> Dump() override {
    std::lock_guard lock(read_mu_);
    std::vector<TableDump> out;
    for (const TableSpec& t : DataTables()) {
      Stmt s;
      MB_RETURN_IF_ERROR(s.Prepare(reader_, "SELECT * FROM " + std::string(t.name) + " ORDER BY " +
                                                std::string(t.order_by)));
      TableDump d;
      d.table = std::string(t.name);
      Status err;
      while (s.Next(&err)) {
        std::string row;
        for (int c = 0; c < s.columns(); ++c) {
          if (c > 0) row += '|';
          row += s.Text(c);
        }
        d.rows.push_back(std::move(row));
      }
      if (!err.ok()) return err;
      out.push_back(std::move(d));
    }
    return out;
  }

  Result<ProjectionTotals> Totals() override {
    std::lock_guard lock(read_mu_);
    ProjectionTotals t;
    for (const TableSpec& spec : DataTables()) {
      Stmt s;
      MB_RETURN_IF_ERROR(s.Prepare(reader_, "SELECT COUNT(*) FROM " + std::string(spec.name)));
      Status err;
      if (!s.Next(&err)) return err.ok() ? Status(StatusCode::kInternal, "no count") : err;
      *CountOf(t, spec.name) = static_cast<uint64_t>(s.Int(0));
      s.Reset();
    }
    Stmt s;
    MB_RETURN_IF_ERROR(s.Prepare(reader_, kBalanceTotalsSql));
    Status err;
    while (s.Next(&err)) t.balances.push_back(ReadBalanceTotal(SqliteRow{&s}));
    if (!err.ok()) return err;
    return t;
  }

  Result<std::vector<OrderRow>> AllOrderRows() override {
    std::lock_guard lock(read_mu_);
    Stmt s;
    MB_RETURN_IF_ERROR(s.Prepare(reader_, std::string(kOrderSelect) + " ORDER BY order_id"));
    return OrderRows(s);
  }

 private:
  static constexpr int kCommitsPerCheckpoint = 64;

  // The checkpointer: PASSIVE checkpoints (they never block the writer or a
  // reader) every 64 commits or 200 ms.
  void Checkpoints() {
    std::unique_lock lock(checkpoint_mu_);
    while (!stop_) {
      checkpoint_cv_.wait_for(lock, std::chrono::milliseconds(200));
      if (stop_) break;
      lock.unlock();
      (void)sqlite3_wal_checkpoint_v2(checkpointer_.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                      nullptr, nullptr);
      lock.lock();
    }
  }

  Status Migrate() {
    MB_RETURN_IF_ERROR(
        writer_.Exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                     "description TEXT NOT NULL)"));
    MB_RETURN_IF_ERROR(writer_.Exec("BEGIN IMMEDIATE"));
    Stmt max;
    Status st = max.Prepare(writer_, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
    int64_t have = 0;
    if (st.ok() && max.Next(&st)) {
      have = max.Int(0);
      max.Reset();
    }
    if (st.ok()) st = CheckSchemaVersion(have);
    for (const Migration& m : Migrations()) {
      if (!st.ok() || m.version <= have) continue;
      for (const std::string& sql : Statements(m, Dialect::kSqlite)) {
        st = writer_.Exec(sql);
        if (!st.ok()) break;
      }
      Stmt add;
      if (st.ok()) st = add.Prepare(writer_, "INSERT INTO schema_migrations VALUES (?, ?)");
      if (st.ok()) st = add.Bind(int64_t{m.version}).Bind(m.description).Run();
    }
    if (!st.ok()) {
      (void)writer_.Exec("ROLLBACK");
      return st;
    }
    return writer_.Exec("COMMIT");
  }

  Status Prepare() {
    MB_RETURN_IF_ERROR(begin_.Prepare(writer_, "BEGIN IMMEDIATE"));
    MB_RETURN_IF_ERROR(commit_.Prepare(writer_, "COMMIT"));
    MB_RETURN_IF_ERROR(rollback_.Prepare(writer_, "ROLLBACK"));
    MB_RETURN_IF_ERROR(ins_order_.Prepare(writer_, UpsertOrderSql()));
    MB_RETURN_IF_ERROR(ins_event_.Prepare(writer_, InsertSql("order_events", 16)));
    MB_RETURN_IF_ERROR(ins_trade_.Prepare(writer_, InsertSql("trades", 15)));
    MB_RETURN_IF_ERROR(ins_ledger_.Prepare(writer_, InsertSql("ledger_entries", 10)));
    MB_RETURN_IF_ERROR(ins_deposit_.Prepare(writer_, InsertSql("deposits", 6)));
    MB_RETURN_IF_ERROR(ins_withdrawal_.Prepare(writer_, InsertSql("withdrawals", 6)));
    MB_RETURN_IF_ERROR(set_state_.Prepare(writer_, kSetStateSql));
    MB_RETURN_IF_ERROR(writer_state_.Prepare(writer_, kStateSql));
    MB_RETURN_IF_ERROR(writer_open_orders_.Prepare(
        writer_, std::string(kOrderSelect) + " WHERE status < 2 ORDER BY order_id"));

    MB_RETURN_IF_ERROR(reader_state_.Prepare(reader_, kStateSql));
    MB_RETURN_IF_ERROR(all_orders_asc_.Prepare(reader_, AllOrdersSql(true)));
    MB_RETURN_IF_ERROR(all_orders_desc_.Prepare(reader_, AllOrdersSql(false)));
    const std::string orders =
        std::string(kOrderSelect) + " WHERE account_id = ? AND market_id = ?";
    MB_RETURN_IF_ERROR(find_order_.Prepare(reader_, orders + " AND order_id = ?"));
    MB_RETURN_IF_ERROR(find_client_.Prepare(
        reader_, orders + " AND client_order_id = ? ORDER BY order_id DESC LIMIT 1"));
    MB_RETURN_IF_ERROR(trades_asc_.Prepare(reader_, MyTradesSql(true)));
    MB_RETURN_IF_ERROR(trades_desc_.Prepare(reader_, MyTradesSql(false)));
    MB_RETURN_IF_ERROR(ledger_.Prepare(reader_, kLedgerSql));
    return Status::Ok();
  }

  static std::string InsertSql(std::string_view table, int columns) {
    std::string sql = "INSERT INTO " + std::string(table) + " VALUES (";
    for (int i = 0; i < columns; ++i) sql += i == 0 ? "?" : ", ?";
    return sql + ")";
  }

  // from_id, the time window, the limit.
  static void BindFilter(Stmt& s, const HistoryQuery& q) {
    const auto [lo, hi] = TimeBounds(q);
    s.Bind(static_cast<int64_t>(q.from_id)).Bind(lo).Bind(hi).Bind(Limit(q.limit));
  }

  Status Write(const RowBatch& b, const ProjectorState& state) {
    for (const OrderEventRow& r : b.order_events) {
      MB_RETURN_IF_ERROR(ins_event_.BindAll(Values(r)).Run());
    }
    for (const TradeRecord& r : b.trades) MB_RETURN_IF_ERROR(ins_trade_.BindAll(Values(r)).Run());
    for (const LedgerRow& r : b.ledger) MB_RETURN_IF_ERROR(ins_ledger_.BindAll(Values(r)).Run());
    for (const TransferRow& r : b.deposits) {
      MB_RETURN_IF_ERROR(ins_deposit_.BindAll(Values(r)).Run());
    }
    for (const TransferRow& r : b.withdrawals) {
      MB_RETURN_IF_ERROR(ins_withdrawal_.BindAll(Values(r)).Run());
    }
    for (const OrderRow& r : b.orders) MB_RETURN_IF_ERROR(ins_order_.BindAll(Values(r)).Run());
    return set_state_.BindAll(Values(state)).Run();
  }

  Result<ProjectorState> ReadState(Stmt& s) {
    Status err;
    if (!s.Next(&err)) {
      return err.ok() ? Corruption("projection: projector_state has no row") : err;
    }
    ProjectorState st = ReadStateRow(SqliteRow{&s});
    s.Reset();
    return st;
  }

  Result<std::vector<OrderRow>> OrderRows(Stmt& s) {
    std::vector<OrderRow> out;
    Status err;
    while (s.Next(&err)) out.push_back(ReadOrderRow(SqliteRow{&s}, 0));
    if (!err.ok()) return err;
    return out;
  }

  Result<std::optional<OrderRecord>> FirstOrder(Stmt& s) {
    Status err;
    if (!s.Next(&err)) {
      if (!err.ok()) return err;
      return std::optional<OrderRecord>{};
    }
    OrderRecord o = ReadOrderRow(SqliteRow{&s}, 0).order;
    s.Reset();
    return std::optional<OrderRecord>(o);
  }

  const engine::EngineConfig& config_;
  Db writer_;
  Db reader_;
  Db checkpointer_;
  std::mutex read_mu_;
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool stop_ = false;
  int commits_since_checkpoint_ = 0;
  std::thread checkpoint_thread_;

  Stmt begin_, commit_, rollback_;
  Stmt ins_order_, ins_event_, ins_trade_, ins_ledger_, ins_deposit_, ins_withdrawal_;
  Stmt set_state_, writer_state_, writer_open_orders_;
  Stmt reader_state_, all_orders_asc_, all_orders_desc_, find_order_, find_client_;
  Stmt trades_asc_, trades_desc_, ledger_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const engine::EngineConfig& config) {
  auto store = std::make_unique<SqliteStore>(config);
  MB_RETURN_IF_ERROR(store->Open(path));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace mb::projection
