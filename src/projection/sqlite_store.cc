// The embedded store: one SQLite file in WAL mode, a writer connection that
// commits each batch in one transaction with prepared statements, and a
// reader connection for the history queries (WAL lets it read while the
// writer writes).
//
// synchronous=NORMAL: a power cut may lose the last commits, but the rows and
// projector_state go back together, and the journal still holds the events,
// so the projector simply applies them again.
//
// The write-ahead log stays bounded. A WAL only starts over from its
// beginning when a checkpoint has copied every frame into the database and no
// reader still reads an older snapshot from it; a writer that commits every
// few milliseconds never leaves such a moment on its own, so:
//   - a checkpointer thread (its own connection) copies frames beside the
//     writer with PASSIVE checkpoints, which never block anyone;
//   - when the WAL holds a quarter of its ceiling, the writer itself runs a
//     RESTART checkpoint before its next transaction (only the frames the
//     checkpointer has not copied yet are left, and it waits for readers
//     still in the WAL), so that transaction writes from the WAL's start and
//     journal_size_limit cuts the file back to that quarter;
//   - if a reader keeps it from completing, commits go on while the WAL has
//     room below the ceiling and are then refused (kUnavailable) until a
//     checkpoint completes: the projector waits, the engine never does.
// A checkpoint is only real on a connection that has opened the WAL (a
// connection that never read the database checkpoints nothing and reports
// success), so every connection reads the schema before it is used.
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "concurrency/agent.h"
#include "projection/schema.h"
#include "projection/sql_rows.h"
#include "projection/store.h"

namespace mb::projection {
namespace {

constexpr int kBusyTimeoutMs = 5000;

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
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
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

  // The first column of the first row of `sql`.
  Result<int64_t> QueryInt(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) return LastError();
    const int rc = sqlite3_step(s);
    const int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW) return Error(std::string("no row from ") + sql);
    return v;
  }

  // Reads the schema once, which opens the write-ahead log on this
  // connection: before that, a checkpoint through it copies nothing.
  Status OpenWal() { return QueryInt("SELECT COUNT(*) FROM sqlite_master").status(); }

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
    std::apply([this](const auto&... v) { (this->Bind(v), ...); }, values);
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

uint64_t FileBytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

class SqliteStore final : public Store, private concurrency::Agent {
 public:
  SqliteStore(const StoreOptions& options, const engine::EngineConfig& config)
      : config_(config), path_(options.path), options_(options) {}

  Status Open() {
    MB_RETURN_IF_ERROR(writer_.Open(path_, true));
    // Takes effect only on a new database (before the first table); an
    // existing one keeps its page size, read back below.
    MB_RETURN_IF_ERROR(writer_.Exec(fmt::format("PRAGMA page_size={}", kPageBytes)));
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA journal_mode=WAL"));
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA synchronous=NORMAL"));
    MB_RETURN_IF_ERROR(writer_.Exec(fmt::format(
        "PRAGMA cache_size=-{}", std::max<uint64_t>(options_.cache_bytes >> 10, 1024))));
    // Checkpoints are this store's own (header comment): never inside a
    // commit on their own.
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA wal_autocheckpoint=0"));
    MB_RETURN_IF_ERROR(writer_.Exec(fmt::format("PRAGMA journal_size_limit={}", restart_bytes())));
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA temp_store=MEMORY"));
    MB_RETURN_IF_ERROR(writer_.Exec("PRAGMA foreign_keys=OFF"));
    MB_RETURN_IF_ERROR(Migrate());
    auto page = writer_.QueryInt("PRAGMA page_size");
    if (!page.ok()) return page.status();
    frame_bytes_ = static_cast<uint64_t>(*page) + kWalFrameHeaderBytes;
    // What an earlier run left in the WAL (a crash, or a WAL that an older
    // build let grow) goes into the database now, and the file is emptied.
    auto emptied = RunCheckpoint(writer_, SQLITE_CHECKPOINT_TRUNCATE);
    if (!emptied.ok()) return emptied.status();
    int unused = 0;  // the WAL's accounting starts here: nothing written yet
    sqlite3_db_status(writer_.get(), SQLITE_DBSTATUS_CACHE_WRITE, &unused, &unused, 1);
    sqlite3_wal_hook(writer_.get(), &SqliteStore::OnWalCommit, this);
    {
      MutexLock lock(read_mu_);  // uncontended: no query runs before Open() returns
      MB_RETURN_IF_ERROR(reader_.Open(path_, false));
    }
    MB_RETURN_IF_ERROR(checkpointer_.Open(path_, false));
    MB_RETURN_IF_ERROR(checkpointer_.OpenWal());
    MB_RETURN_IF_ERROR(Prepare());
    (void)checkpoint_runner_.Start();
    return Status::Ok();
  }

  ~SqliteStore() override {
    checkpoint_runner_.Stop();
    // A last checkpoint, so that a closed store is one file.
    if (writer_.get() != nullptr) (void)writer_.Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }

  std::string_view backend() const noexcept override { return "sqlite"; }

  Result<ProjectorState> State() override { return ReadState(writer_state_); }

  Result<std::vector<OrderRow>> OpenOrders() override { return OrderRows(writer_open_orders_); }

  Result<std::vector<ListRow>> OpenOrderLists() override { return ListRows(writer_open_lists_); }

  Status Commit(const RowBatch& b, const ProjectorState& state) override {
    MB_RETURN_IF_ERROR(MakeRoom());
    MB_RETURN_IF_ERROR(begin_.Run());
    Status st = Write(b, state);
    if (!st.ok()) {
      (void)rollback_.Run();
      return st;
    }
    const uint64_t frames_before = wal_frames_.load(std::memory_order_relaxed);
    st = commit_.Run();
    if (!st.ok()) {
      (void)rollback_.Run();
      return st;
    }
    Committed(frames_before);
    return st;
  }

  std::optional<StorageStats> Storage() override {
    StorageStats s;
    s.db_bytes = FileBytes(path_);
    s.wal_bytes = FileBytes(path_ + "-wal");
    s.wal_max_bytes = options_.wal_max_bytes;
    s.frame_bytes = frame_bytes_;
    s.wal_frames = wal_frames_.load(std::memory_order_relaxed);
    s.frames_written = frames_written_.load(std::memory_order_relaxed);
    s.frames_checkpointed = frames_checkpointed_.load(std::memory_order_relaxed);
    s.checkpoints = checkpoints_.load(std::memory_order_relaxed);
    s.checkpoints_completed = checkpoints_completed_.load(std::memory_order_relaxed);
    s.ceiling_waits = ceiling_waits_.load(std::memory_order_relaxed);
    s.last_commit_bytes = last_commit_frames_.load(std::memory_order_relaxed) * frame_bytes_;
    const int64_t done = last_completed_ns_.load(std::memory_order_relaxed);
    s.seconds_since_checkpoint = done == 0 ? -1 : static_cast<double>(SteadyNs() - done) / 1e9;
    s.over_ceiling = over_ceiling_.load(std::memory_order_relaxed);
    return s;
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
    MutexLock lock(read_mu_);
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
    MutexLock lock(read_mu_);
    find_order_.Bind(account).Bind(market).Bind(static_cast<int64_t>(order_id));
    return FirstOrder(find_order_);
  }

  Result<std::optional<OrderRecord>> FindOrderByClientId(uint32_t account, uint16_t market,
                                                         std::string_view client_id) override {
    MutexLock lock(read_mu_);
    find_client_.Bind(account).Bind(market).Bind(client_id);
    return FirstOrder(find_client_);
  }

  Result<std::vector<marketdata::Fill>> MyTrades(const HistoryQuery& q) override {
    MutexLock lock(read_mu_);
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

  Result<std::vector<ListRecord>> AllOrderLists(const HistoryQuery& q) override {
    MutexLock lock(read_mu_);
    Stmt& s = Ascending(q) ? all_lists_asc_ : all_lists_desc_;
    s.Bind(q.account);
    BindFilter(s, q);
    auto rows = ListRows(s);
    if (!rows.ok()) return rows.status();
    std::vector<ListRecord> out;
    out.reserve(rows->size());
    for (const ListRow& r : *rows) out.push_back(r.list);
    if (!Ascending(q)) std::reverse(out.begin(), out.end());
    return out;
  }

  Result<std::optional<ListRecord>> FindOrderList(uint32_t account, uint64_t list_id) override {
    MutexLock lock(read_mu_);
    find_list_.Bind(account).Bind(Signed(list_id));
    return FirstList(find_list_);
  }

  Result<std::optional<ListRecord>> FindOrderListByClientId(uint32_t account,
                                                            std::string_view client_id) override {
    MutexLock lock(read_mu_);
    find_list_client_.Bind(account).Bind(client_id);
    return FirstList(find_list_client_);
  }

  Result<std::vector<LedgerRow>> Ledger(const LedgerQuery& q) override {
    MutexLock lock(read_mu_);
    ledger_.Bind(q.account).Bind(static_cast<int64_t>(q.from_seq)).Bind(Limit(q.limit));
    std::vector<LedgerRow> out;
    Status err;
    while (ledger_.Next(&err)) out.push_back(ReadLedgerRow(SqliteRow{&ledger_}));
    if (!err.ok()) return err;
    return out;
  }

  Result<std::vector<WithdrawalRow>> Withdrawals(const TransferQuery& q) override {
    MutexLock lock(read_mu_);
    Stmt& s = q.account ? withdrawals_of_account_ : withdrawals_all_;
    for (int64_t v : TransferParams(q, true)) s.Bind(v);
    std::vector<WithdrawalRow> out;
    Status err;
    while (s.Next(&err)) out.push_back(ReadWithdrawalRow(SqliteRow{&s}));
    if (!err.ok()) return err;
    return out;
  }

  Result<std::vector<TransferRow>> Deposits(const TransferQuery& q) override {
    MutexLock lock(read_mu_);
    Stmt& s = q.account ? deposits_of_account_ : deposits_all_;
    for (int64_t v : TransferParams(q, false)) s.Bind(v);
    std::vector<TransferRow> out;
    Status err;
    while (s.Next(&err)) out.push_back(ReadTransferRow(SqliteRow{&s}));
    if (!err.ok()) return err;
    return out;
  }

  Result<std::optional<WithdrawalRow>> FindWithdrawal(uint32_t account, uint64_t id,
                                                      std::string_view ref) override {
    MutexLock lock(read_mu_);
    Stmt& s = id != 0 ? find_withdrawal_ : find_withdrawal_ref_;
    s.Bind(int64_t{account});
    if (id != 0) {
      s.Bind(Signed(id));
    } else {
      s.Bind(ref);
    }
    Status err;
    if (!s.Next(&err)) {
      if (!err.ok()) return err;
      return std::optional<WithdrawalRow>{};
    }
    WithdrawalRow w = ReadWithdrawalRow(SqliteRow{&s});
    s.Reset();
    return std::optional<WithdrawalRow>(std::move(w));
  }

  Result<ProjectorState> CommittedState() override {
    MutexLock lock(read_mu_);
    return ReadState(reader_state_);
  }

  Result<std::vector<TableDump>> Dump() override {
    MutexLock lock(read_mu_);
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
    MutexLock lock(read_mu_);
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
    MutexLock lock(read_mu_);
    Stmt s;
    MB_RETURN_IF_ERROR(s.Prepare(reader_, std::string(kOrderSelect) + " ORDER BY order_id"));
    return OrderRows(s);
  }

 private:
  // A commit writes every page it touched to the WAL in full, and a batch of
  // orders from many accounts touches a page per account in each secondary
  // index: 4 KiB pages (the file system's) halve the WAL bytes per order of
  // 16 KiB ones while serving, at the same catch-up speed
  // (docs/benchmarks.md, "Projection disk use").
  static constexpr int kPageBytes = 4096;
  static constexpr uint64_t kWalFrameHeaderBytes = 24;
  static constexpr auto kCheckpointEvery = std::chrono::milliseconds(200);
  static constexpr int64_t kCheckpointEveryNs =
      std::chrono::duration_cast<std::chrono::nanoseconds>(kCheckpointEvery).count();
  static constexpr int kRestartWaitMs = 100;

  // The WAL starts over from its beginning once it holds this much.
  uint64_t restart_bytes() const { return options_.wal_max_bytes / 4; }
  uint64_t restart_frames() const { return restart_bytes() / frame_bytes_; }
  uint64_t max_frames() const { return options_.wal_max_bytes / frame_bytes_; }

  // Writer thread, inside COMMIT: the WAL holds `frames` frames now.
  static int OnWalCommit(void* self, sqlite3*, const char*, int frames) {
    static_cast<SqliteStore*>(self)->hook_frames_ = static_cast<uint64_t>(frames);
    return SQLITE_OK;
  }

  // Writer thread, after a commit: what it wrote, whether the WAL started
  // over, whether the checkpointer has enough to copy.
  void Committed(uint64_t frames_before) {
    int written = 0, unused = 0;
    // Pages the writer connection wrote (to the WAL) since the last commit.
    sqlite3_db_status(writer_.get(), SQLITE_DBSTATUS_CACHE_WRITE, &written, &unused, 1);
    const auto added = static_cast<uint64_t>(std::max(written, 0));
    const uint64_t frames = hook_frames_;
    if (frames < frames_before + added) wal_generation_.fetch_add(1, std::memory_order_relaxed);
    wal_frames_.store(frames, std::memory_order_relaxed);
    frames_written_.fetch_add(added, std::memory_order_relaxed);
    last_commit_frames_.store(added, std::memory_order_relaxed);
    largest_commit_frames_ = std::max(added, largest_commit_frames_ - largest_commit_frames_ / 16);
    frames_since_wakeup_ += added;
    if (frames_since_wakeup_ >= std::max<uint64_t>(restart_frames() / 4, 1)) {
      frames_since_wakeup_ = 0;
      checkpoint_wanted_.store(true, std::memory_order_release);
      checkpoint_runner_.Wake();
    }
  }

  // Writer thread, before a transaction: keeps the WAL under its ceiling.
  Status MakeRoom() {
    const uint64_t frames = wal_frames_.load(std::memory_order_relaxed);
    if (frames < restart_frames()) return Status::Ok();
    // Readers of this process are short; one that is not holds the writer
    // only briefly, and the next commit tries again.
    sqlite3_busy_timeout(writer_.get(), kRestartWaitMs);
    auto complete = RunCheckpoint(writer_, SQLITE_CHECKPOINT_RESTART);
    sqlite3_busy_timeout(writer_.get(), kBusyTimeoutMs);
    if (!complete.ok()) return complete.status();
    if (*complete || frames + largest_commit_frames_ < max_frames()) {
      over_ceiling_.store(false, std::memory_order_relaxed);
      return Status::Ok();
    }
    ceiling_waits_.fetch_add(1, std::memory_order_relaxed);
    over_ceiling_.store(true, std::memory_order_relaxed);
    return Unavailable(fmt::format(
        "sqlite {}: the write-ahead log holds {} MiB, its ceiling is {} MiB, and a checkpoint "
        "cannot complete while a reader keeps an older snapshot open; the projection waits",
        path_, (frames * frame_bytes_) >> 20, options_.wal_max_bytes >> 20));
  }

  // One checkpoint of `mode` on `db` (never two at once: SQLite refuses a
  // second with SQLITE_BUSY). True when nothing was left to copy. SQLITE_BUSY
  // (a reader the busy timeout did not see leave) is an incomplete
  // checkpoint, not an error.
  Result<bool> RunCheckpoint(Db& db, int mode) {
    MutexLock run(checkpoint_run_mu_);
    int log = -1, copied = -1;
    const int rc = sqlite3_wal_checkpoint_v2(db.get(), nullptr, mode, &log, &copied);
    if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY) return db.LastError();
    if (log < 0) {
      return Status(StatusCode::kInternal,
                    "sqlite " + path_ +
                        ": a checkpoint on a connection that has not opened the "
                        "write-ahead log (it would copy nothing)");
    }
    checkpoints_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t generation = wal_generation_.load(std::memory_order_relaxed);
    if (generation != checkpoint_generation_ || static_cast<uint64_t>(log) < checkpoint_log_) {
      checkpoint_generation_ = generation;
      checkpoint_copied_ = 0;
    }
    const auto now_copied = static_cast<uint64_t>(std::max(copied, 0));
    if (now_copied > checkpoint_copied_) {
      frames_checkpointed_.fetch_add(now_copied - checkpoint_copied_, std::memory_order_relaxed);
    }
    checkpoint_copied_ = now_copied;
    checkpoint_log_ = static_cast<uint64_t>(log);
    const bool complete = rc == SQLITE_OK && copied == log;
    if (complete) {
      checkpoints_completed_.fetch_add(1, std::memory_order_relaxed);
      last_completed_ns_.store(SteadyNs(), std::memory_order_relaxed);
      if (mode == SQLITE_CHECKPOINT_TRUNCATE) wal_frames_.store(0, std::memory_order_relaxed);
    }
    return complete;
  }

  // The checkpointer's rounds (an agent on its own thread and connection):
  // a PASSIVE checkpoint (it never blocks the writer or a reader) when the
  // writer asks (it has added a sixteenth of the ceiling) and, while the WAL
  // holds frames, whenever a park of kCheckpointEvery ends.
  int DoWork() override {
    const bool asked = checkpoint_wanted_.exchange(false, std::memory_order_acquire);
    const int64_t now = SteadyNs();
    if (!asked && now - last_passive_ns_ < kCheckpointEveryNs) return 0;
    last_passive_ns_ = now;
    if (wal_frames_.load(std::memory_order_relaxed) == 0) return 0;
    (void)RunCheckpoint(checkpointer_, SQLITE_CHECKPOINT_PASSIVE);
    return 1;
  }
  bool HasWork() const override { return checkpoint_wanted_.load(std::memory_order_acquire); }

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
    MB_RETURN_IF_ERROR(ins_transfer_out_.Prepare(writer_, InsertSql("transfers_out", 8)));
    MB_RETURN_IF_ERROR(ins_transfer_resolved_.Prepare(writer_, InsertSql("transfers_resolved", 5)));
    MB_RETURN_IF_ERROR(set_placed_.Prepare(writer_, kSetPlacedSql));
    MB_RETURN_IF_ERROR(ins_list_.Prepare(writer_, UpsertListSql()));
    MB_RETURN_IF_ERROR(set_state_.Prepare(writer_, kSetStateSql));
    MB_RETURN_IF_ERROR(writer_state_.Prepare(writer_, kStateSql));
    MB_RETURN_IF_ERROR(writer_open_orders_.Prepare(
        writer_, std::string(kOrderSelect) + std::string(kOpenOrdersWhere)));
    MB_RETURN_IF_ERROR(writer_open_lists_.Prepare(
        writer_, std::string(kListSelect) + std::string(kOpenListsWhere)));

    MutexLock lock(read_mu_);  // uncontended: no query runs before Open() returns
    MB_RETURN_IF_ERROR(reader_state_.Prepare(reader_, kStateSql));
    MB_RETURN_IF_ERROR(all_orders_asc_.Prepare(reader_, AllOrdersSql(true)));
    MB_RETURN_IF_ERROR(all_orders_desc_.Prepare(reader_, AllOrdersSql(false)));
    const std::string orders =
        std::string(kOrderSelect) + " WHERE account_id = ? AND market_id = ?";
    MB_RETURN_IF_ERROR(find_order_.Prepare(reader_, orders + " AND order_id = ?"));
    MB_RETURN_IF_ERROR(find_client_.Prepare(
        reader_, std::string(kOrderSelect) + std::string(kOrderByClientIdWhere)));
    MB_RETURN_IF_ERROR(all_lists_asc_.Prepare(reader_, AllListsSql(true)));
    MB_RETURN_IF_ERROR(all_lists_desc_.Prepare(reader_, AllListsSql(false)));
    MB_RETURN_IF_ERROR(find_list_.Prepare(reader_, FindListSql(false)));
    MB_RETURN_IF_ERROR(find_list_client_.Prepare(reader_, FindListSql(true)));
    MB_RETURN_IF_ERROR(trades_asc_.Prepare(reader_, MyTradesSql(true)));
    MB_RETURN_IF_ERROR(trades_desc_.Prepare(reader_, MyTradesSql(false)));
    MB_RETURN_IF_ERROR(ledger_.Prepare(reader_, kLedgerSql));
    MB_RETURN_IF_ERROR(withdrawals_of_account_.Prepare(reader_, WithdrawalsSql(true)));
    MB_RETURN_IF_ERROR(withdrawals_all_.Prepare(reader_, WithdrawalsSql(false)));
    MB_RETURN_IF_ERROR(deposits_of_account_.Prepare(reader_, DepositsSql(true)));
    MB_RETURN_IF_ERROR(deposits_all_.Prepare(reader_, DepositsSql(false)));
    MB_RETURN_IF_ERROR(find_withdrawal_.Prepare(reader_, FindWithdrawalSql(false)));
    MB_RETURN_IF_ERROR(find_withdrawal_ref_.Prepare(reader_, FindWithdrawalSql(true)));
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
    for (const TransferOutRow& r : b.transfers_out) {
      MB_RETURN_IF_ERROR(ins_transfer_out_.BindAll(Values(r)).Run());
    }
    for (const TransferResolvedRow& r : b.transfers_resolved) {
      MB_RETURN_IF_ERROR(ins_transfer_resolved_.BindAll(Values(r)).Run());
    }
    for (const OrderRow& r : b.orders) MB_RETURN_IF_ERROR(ins_order_.BindAll(Values(r)).Run());
    for (const PendingPlacedRow& r : b.pending_placed) {
      MB_RETURN_IF_ERROR(set_placed_.BindAll(Values(r)).Run());
    }
    for (const ListRow& r : b.lists) MB_RETURN_IF_ERROR(ins_list_.BindAll(Values(r)).Run());
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

  Result<std::vector<ListRow>> ListRows(Stmt& s) {
    std::vector<ListRow> out;
    Status err;
    while (s.Next(&err)) out.push_back(ReadListRow(SqliteRow{&s}));
    if (!err.ok()) return err;
    return out;
  }

  Result<std::optional<ListRecord>> FirstList(Stmt& s) {
    Status err;
    if (!s.Next(&err)) {
      if (!err.ok()) return err;
      return std::optional<ListRecord>{};
    }
    ListRecord l = ReadListRow(SqliteRow{&s}).list;
    s.Reset();
    return std::optional<ListRecord>(l);
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
  const std::string path_;
  const StoreOptions options_;
  uint64_t frame_bytes_ = kPageBytes + kWalFrameHeaderBytes;
  Db writer_;
  Mutex read_mu_;  // the history queries: one at a time on the reader connection
  Db reader_ MB_GUARDED_BY(read_mu_);
  Db checkpointer_;

  // Writer thread only.
  uint64_t hook_frames_ = 0;            // set by OnWalCommit during COMMIT
  uint64_t largest_commit_frames_ = 0;  // a recent commit's size, decaying
  uint64_t frames_since_wakeup_ = 0;

  // One checkpoint at a time (SQLite refuses a second).
  Mutex checkpoint_run_mu_;
  uint64_t checkpoint_generation_ MB_GUARDED_BY(checkpoint_run_mu_) = 0;
  // WAL frames at the last checkpoint, and how many of them it copied.
  uint64_t checkpoint_log_ MB_GUARDED_BY(checkpoint_run_mu_) = 0;
  uint64_t checkpoint_copied_ MB_GUARDED_BY(checkpoint_run_mu_) = 0;

  // Written by the writer or a checkpoint, read by Storage() on any thread.
  std::atomic<uint64_t> wal_frames_{0};
  std::atomic<uint64_t> wal_generation_{0};  // +1 each time the WAL starts over
  std::atomic<uint64_t> frames_written_{0}, frames_checkpointed_{0}, last_commit_frames_{0};
  std::atomic<uint64_t> checkpoints_{0}, checkpoints_completed_{0}, ceiling_waits_{0};
  std::atomic<int64_t> last_completed_ns_{0};
  std::atomic<bool> over_ceiling_{false};

  // The checkpointer (mb-checkpoint): asked by the writer, parks between rounds.
  std::atomic<bool> checkpoint_wanted_{false};
  int64_t last_passive_ns_ = 0;  // the checkpointer's
  concurrency::AgentRunner checkpoint_runner_{
      this,
      {"mb-checkpoint",
       {concurrency::WaitKind::kBackOff, 0, 0,
        static_cast<uint32_t>(std::chrono::microseconds(kCheckpointEvery).count())}}};

  Stmt begin_, commit_, rollback_;
  Stmt ins_order_, ins_event_, ins_trade_, ins_ledger_, ins_deposit_, ins_withdrawal_;
  Stmt ins_transfer_out_, ins_transfer_resolved_, set_placed_, ins_list_;
  Stmt set_state_, writer_state_, writer_open_orders_, writer_open_lists_;
  // The reader connection's statements.
  Stmt reader_state_ MB_GUARDED_BY(read_mu_);
  Stmt all_orders_asc_ MB_GUARDED_BY(read_mu_);
  Stmt all_orders_desc_ MB_GUARDED_BY(read_mu_);
  Stmt find_order_ MB_GUARDED_BY(read_mu_);
  Stmt find_client_ MB_GUARDED_BY(read_mu_);
  Stmt all_lists_asc_ MB_GUARDED_BY(read_mu_);
  Stmt all_lists_desc_ MB_GUARDED_BY(read_mu_);
  Stmt find_list_ MB_GUARDED_BY(read_mu_);
  Stmt find_list_client_ MB_GUARDED_BY(read_mu_);
  Stmt trades_asc_ MB_GUARDED_BY(read_mu_);
  Stmt trades_desc_ MB_GUARDED_BY(read_mu_);
  Stmt ledger_ MB_GUARDED_BY(read_mu_);
  Stmt withdrawals_of_account_ MB_GUARDED_BY(read_mu_);
  Stmt withdrawals_all_ MB_GUARDED_BY(read_mu_);
  Stmt deposits_of_account_ MB_GUARDED_BY(read_mu_);
  Stmt deposits_all_ MB_GUARDED_BY(read_mu_);
  Stmt find_withdrawal_ MB_GUARDED_BY(read_mu_);
  Stmt find_withdrawal_ref_ MB_GUARDED_BY(read_mu_);
};

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const StoreOptions& options,
                                               const engine::EngineConfig& config) {
  if (options.wal_max_bytes < kMinWalMaxBytes) {
    return InvalidArgument(
        fmt::format("sqlite: a write-ahead log ceiling of {} bytes is below "
                    "the least this store works with ({} MiB)",
                    options.wal_max_bytes, kMinWalMaxBytes >> 20));
  }
  auto store = std::make_unique<SqliteStore>(options, config);
  MB_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<Store>(std::move(store));
}

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const engine::EngineConfig& config) {
  StoreOptions options;
  options.path = path;
  return OpenSqliteStore(options, config);
}

}  // namespace mb::projection
