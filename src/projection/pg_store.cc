// The PostgreSQL store: libpq, a writer connection and a reader connection.
//
// A Commit is one transaction: the insert-only tables are loaded with COPY
// FROM STDIN (text format), and so are the orders placed in the batch (under
// a savepoint: if one is stored already they join the upsert); the other
// orders are upserted by one prepared statement over arrays (INSERT ...
// SELECT FROM unnest(...) ON CONFLICT), and projector_state by another.
// Either all of it becomes visible or none.
//
// The columns, queries and row readers are the ones the SQLite store uses
// (sql_rows.h), with '?' numbered into $n and every parameter typed int8 or
// text, so both stores return the same results and the same dump.
//
// Outages: a connection found broken is reset (PQreset) before its next use
// and its statements are prepared again. A read, or the BEGIN of a write,
// that fails because the connection had broken while idle (the server
// restarted between two calls) is retried once on the reset connection. A
// transaction that broke midway is not retried: Commit returns kUnavailable
// and the projector applies the batch again.
//
// Commits are asynchronous (synchronous_commit=off, the SQLite store's
// synchronous=NORMAL): a crash of the server may lose the last commits, but
// the rows and projector_state go back together and the journal still holds
// the events, so the projector applies them again.
//
// No message carries the password of the connection string.
#include <libpq-fe.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <unordered_set>
#include <utility>

#include "common/thread_annotations.h"
#include "projection/schema.h"
#include "projection/sql_rows.h"
#include "projection/store.h"

namespace mb::projection {
namespace {

constexpr Oid kInt8Oid = 20;  // pg_type: int8
constexpr Oid kTextOid = 25;  // pg_type: text

// Serialises migrations of one database between processes.
constexpr std::string_view kMigrationLockSql = "SELECT pg_advisory_xact_lock(7165064733440143203)";

struct ResultDeleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

struct ConnDeleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
using PgConn = std::unique_ptr<PGconn, ConnDeleter>;

// One line: trailing newlines dropped, inner line breaks and tabs as spaces.
std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\t') c = ' ';
    if (c != ' ' || out.empty() || out.back() != ' ') out += c;
  }
  return out;
}

// Every spelling of the password the connection string holds: as libpq
// decodes it, and as written in a URI's user:password@ or a password=.
std::vector<std::string> Secrets(const std::string& url) {
  std::vector<std::string> out;
  char* err = nullptr;
  if (PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err); opts != nullptr) {
    for (const PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
      if (std::strcmp(o->keyword, "password") == 0 && o->val != nullptr) out.emplace_back(o->val);
    }
    PQconninfoFree(opts);
  }
  PQfreemem(err);
  if (const std::size_t scheme = url.find("://"); scheme != std::string::npos) {
    const std::size_t begin = scheme + 3;
    const std::size_t at = url.find('@', begin);
    const std::size_t colon = url.find(':', begin);
    if (at != std::string::npos && colon < at && url.find('/', begin) > at) {
      out.push_back(url.substr(colon + 1, at - colon - 1));
    }
  }
  for (std::size_t at = url.find("password="); at != std::string::npos;
       at = url.find("password=", at + 1)) {
    std::size_t begin = at + 9;
    if (begin < url.size() && url[begin] == '\'') ++begin;
    const std::size_t end = url.find_first_of(" &'", begin);
    out.push_back(url.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
  }
  std::erase_if(out, [](const std::string& s) { return s.empty(); });
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

std::string Scrub(std::string msg, const std::vector<std::string>& secrets) {
  for (const std::string& s : secrets) {
    for (std::size_t at = msg.find(s); at != std::string::npos; at = msg.find(s, at + 3)) {
      msg.replace(at, s.size(), "***");
    }
  }
  return msg;
}

// A statement prepared on each connection the first time it runs there.
struct Statement {
  int id = 0;  // index into Connection::prepared_
  std::string name;
  std::string sql;
  std::vector<Oid> types;
};

// One libpq connection.
class Connection {
 public:
  Connection(std::string url, std::vector<std::string> secrets, std::string_view role)
      : url_(std::move(url)), secrets_(std::move(secrets)), role_(role) {}

  // Connects; a bad connection string or credentials are kInvalidArgument,
  // a server that cannot be reached kUnavailable.
  Status Connect() {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(url_.c_str(), &err);
    if (opts == nullptr) {
      std::string msg = err != nullptr ? err : "out of memory";
      PQfreemem(err);
      return InvalidArgument("postgres: bad connection string: " + Trim(Scrub(msg, secrets_)));
    }
    PQconninfoFree(opts);
    // The URL's own settings come after ours and override them.
    const std::array<const char*, 6> keys = {"connect_timeout", "fallback_application_name",
                                             "client_encoding", "options",
                                             "dbname",          nullptr};
    const std::array<const char*, 6> values = {
        "10", "matchbook-projection", "UTF8", "-c synchronous_commit=off", url_.c_str(), nullptr};
    conn_.reset(PQconnectdbParams(keys.data(), values.data(), 1));
    if (conn_ == nullptr) return Unavailable("postgres: connect: out of memory");
    PQsetNoticeProcessor(
        conn_.get(), [](void*, const char*) {}, nullptr);
    if (PQstatus(conn_.get()) != CONNECTION_OK) return ConnectError();
    prepared_.clear();
    return Status::Ok();
  }

  bool broken() const { return conn_ == nullptr || PQstatus(conn_.get()) != CONNECTION_OK; }

  // Resets a broken connection (its prepared statements are gone with it).
  Status Ensure() {
    if (conn_ == nullptr) return Connect();
    if (!broken()) return Status::Ok();
    prepared_.clear();
    PQreset(conn_.get());
    if (broken()) return ConnectError();
    return Status::Ok();
  }

  // Runs a statement without parameters; `expect` is its success status.
  Result<PgResult> Exec(std::string_view sql, ExecStatusType expect = PGRES_TUPLES_OK) {
    PgResult r(PQexec(conn_.get(), std::string(sql).c_str()));
    if (PQresultStatus(r.get()) != expect) return Error(r.get(), sql);
    return r;
  }
  Status Command(std::string_view sql) { return Exec(sql, PGRES_COMMAND_OK).status(); }

  // Runs a statement with text parameters, unprepared.
  Result<PgResult> ExecParams(std::string_view sql, const std::vector<std::string>& params,
                              ExecStatusType expect) {
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    PgResult r(PQexecParams(conn_.get(), std::string(sql).c_str(), static_cast<int>(values.size()),
                            nullptr, values.data(), nullptr, nullptr, 0));
    if (PQresultStatus(r.get()) != expect) return Error(r.get(), sql);
    return r;
  }

  // Runs a prepared statement, preparing it on this connection first if needed.
  Result<PgResult> Run(const Statement& s, const std::vector<std::string>& params,
                       ExecStatusType expect = PGRES_TUPLES_OK) {
    if (prepared_.size() <= static_cast<std::size_t>(s.id)) {
      prepared_.resize(static_cast<std::size_t>(s.id) + 1, false);
    }
    if (!prepared_[static_cast<std::size_t>(s.id)]) {
      PgResult p(PQprepare(conn_.get(), s.name.c_str(), s.sql.c_str(),
                           static_cast<int>(s.types.size()),
                           s.types.empty() ? nullptr : s.types.data()));
      if (PQresultStatus(p.get()) != PGRES_COMMAND_OK) return Error(p.get(), "prepare " + s.name);
      prepared_[static_cast<std::size_t>(s.id)] = true;
    }
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    PgResult r(PQexecPrepared(conn_.get(), s.name.c_str(), static_cast<int>(values.size()),
                              values.data(), nullptr, nullptr, 0));
    if (PQresultStatus(r.get()) != expect) return Error(r.get(), s.name);
    return r;
  }

  // COPY table FROM STDIN with rows in COPY's text format. *sqlstate (if
  // given) receives the failure's SQLSTATE.
  Status Copy(std::string_view table, const std::string& data, std::string* sqlstate = nullptr) {
    const std::string sql = "COPY " + std::string(table) + " FROM STDIN";
    PgResult start(PQexec(conn_.get(), sql.c_str()));
    if (PQresultStatus(start.get()) != PGRES_COPY_IN) return Error(start.get(), sql);
    constexpr std::size_t kChunk = 1 << 20;
    bool sent = true;
    for (std::size_t at = 0; at < data.size() && sent; at += kChunk) {
      const std::size_t n = std::min(kChunk, data.size() - at);
      sent = PQputCopyData(conn_.get(), data.data() + at, static_cast<int>(n)) == 1;
    }
    if (PQputCopyEnd(conn_.get(), sent ? nullptr : "client failed to send the rows") != 1) {
      sent = false;
    }
    Status st;
    while (PGresult* raw = PQgetResult(conn_.get())) {
      PgResult r(raw);
      if (st.ok() && PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
        st = Error(r.get(), sql);
        const char* code = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
        if (sqlstate != nullptr && code != nullptr) *sqlstate = code;
      }
    }
    if (st.ok() && !sent) st = Error(nullptr, sql);
    return st;
  }

  // Ends a transaction left open by a failure (nothing to do when the
  // connection broke: the server rolled it back).
  void Rollback() {
    if (broken() || PQtransactionStatus(conn_.get()) == PQTRANS_IDLE) return;
    PgResult r(PQexec(conn_.get(), "ROLLBACK"));
  }

  // A failed statement: kUnavailable when the connection or the server is
  // the cause (retry later), kInternal otherwise.
  Status Error(const PGresult* r, std::string_view what) const {
    std::string msg;
    const char* primary = r != nullptr ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
    if (primary != nullptr) {
      msg = primary;
      if (const char* detail = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL); detail != nullptr) {
        msg += std::string(" (") + detail + ")";
      }
    } else {
      msg = PQerrorMessage(conn_.get());
    }
    const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    const std::string_view code = state != nullptr ? state : "";
    if (!code.empty()) msg += " [SQLSTATE " + std::string(code) + "]";
    std::string where(what.substr(what.find_first_not_of(" \n") == std::string_view::npos
                                      ? what.size()
                                      : what.find_first_not_of(" \n")));
    if (where.size() > 60) where = where.substr(0, 60) + "...";
    const std::string text =
        "postgres " + role_ + ": " + Trim(where) + ": " + Trim(Scrub(msg, secrets_));
    if (broken() || code.starts_with("08") || code.starts_with("57P") || code.starts_with("53") ||
        code == "40001" || code == "40P01" || code == "55P03") {
      return Unavailable(text);
    }
    return Status(StatusCode::kInternal, text);
  }

 private:
  Status ConnectError() const {
    const std::string msg =
        Trim(Scrub(conn_ != nullptr ? PQerrorMessage(conn_.get()) : "out of memory", secrets_));
    const std::string text = "postgres " + role_ + ": cannot connect: " + msg;
    // Retrying cannot cure a refused login or an unknown database.
    for (std::string_view permanent :
         {"authentication failed", "no password supplied", "does not exist", "no pg_hba.conf",
          "invalid", "permission denied", "password is required", "not permitted to log in"}) {
      if (msg.find(permanent) != std::string::npos) return InvalidArgument(text);
    }
    return Unavailable(text);
  }

  std::string url_;
  std::vector<std::string> secrets_;
  std::string role_;
  PgConn conn_;
  std::vector<bool> prepared_;  // by Statement::id, for this connection
};

// Runs f(c); when it failed because the connection had broken, resets the
// connection and runs it once more. REQUIRES: f is safe to repeat (a read, or
// a transaction that did not commit). f is handed the connection rather than
// reaching for it, so that a lambda need not name a member guarded by a lock
// (the analysis checks a lambda on its own, without the caller's locks).
template <class F>
auto Retrying(Connection& c, F&& f) -> decltype(f(c)) {
  MB_RETURN_IF_ERROR(c.Ensure());
  auto r = f(c);
  if (!r.ok() && c.broken()) {
    MB_RETURN_IF_ERROR(c.Ensure());
    r = f(c);
  }
  return r;
}

// BEGIN (retried once on a connection that broke while idle), body(), COMMIT;
// ROLLBACK when anything fails.
template <class F>
Status InTransaction(Connection& c, std::string_view begin, F&& body) {
  MB_RETURN_IF_ERROR(c.Ensure());
  Status st = c.Command(begin);
  if (!st.ok() && c.broken()) {
    MB_RETURN_IF_ERROR(c.Ensure());
    st = c.Command(begin);
  }
  if (st.ok()) st = body();
  if (st.ok()) {
    Result<PgResult> r = c.Exec("COMMIT", PGRES_COMMAND_OK);
    if (!r.ok()) {
      st = r.status();
    } else if (std::strcmp(PQcmdStatus(r->get()), "COMMIT") != 0) {
      st = Status(StatusCode::kInternal, "postgres: the transaction was rolled back");
    }
  }
  if (!st.ok()) c.Rollback();
  return st;
}

// A result row for sql_rows.h's readers.
struct PgRow {
  const PGresult* r;
  int row;
  int64_t Int(int col) const {
    const char* v = PQgetvalue(r, row, col);
    int64_t x = 0;
    (void)std::from_chars(v, v + PQgetlength(r, row, col), x);
    return x;
  }
  std::string_view Text(int col) const {
    return {PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col))};
  }
};

// ---- COPY text format and array literals ----

void AppendInt(std::string* out, int64_t v) {
  std::array<char, 24> buf;
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  out->append(buf.data(), res.ptr);
}

void AppendCopy(std::string* out, int64_t v) { AppendInt(out, v); }
void AppendCopy(std::string* out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        *out += c;
    }
  }
}

template <class Row>
void AppendCopyRow(std::string* out, const Row& row) {
  std::apply(
      [out](const auto&... v) {
        bool first = true;
        ((first ? void() : out->push_back('\t'), first = false, AppendCopy(out, v)), ...);
      },
      Values(row));
  out->push_back('\n');
}

template <class Row>
const std::string& CopyRows(std::string* buf, const std::vector<Row>& rows) {
  buf->clear();
  for (const Row& r : rows) AppendCopyRow(buf, r);
  return *buf;
}

void AppendElement(std::string* out, int64_t v) { AppendInt(out, v); }
void AppendElement(std::string* out, std::string_view s) {
  *out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') *out += '\\';
    *out += c;
  }
  *out += '"';
}

template <class Row>
using RowValues = decltype(Values(std::declval<const Row&>()));
template <class Row>
constexpr std::size_t kFields = std::tuple_size_v<RowValues<Row>>;

// The rows as one array literal per column ("{1,2,3}").
template <class Row>
void Arrays(const std::vector<Row>& rows, std::vector<std::string>* arrays) {
  arrays->assign(kFields<Row>, "{");
  for (const Row& row : rows) {
    const RowValues<Row> v = Values(row);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (((*arrays)[I].size() > 1 ? (*arrays)[I].push_back(',') : void(),
        AppendElement(&(*arrays)[I], std::get<I>(v))),
       ...);
    }
    (std::make_index_sequence<kFields<Row>>{});
  }
  for (std::string& a : *arrays) a += '}';
}

// INSERT INTO table SELECT FROM unnest($1::bigint[], ...) ON CONFLICT ... :
// the conflict clause is the SQLite store's (`single`).
template <class Row>
std::string UpsertArraysSql(std::string_view table, std::string_view columns,
                            const std::string& single) {
  std::string sql =
      "INSERT INTO " + std::string(table) + " (" + std::string(columns) + ") SELECT * FROM unnest(";
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((sql +=
      (I == 0 ? "$" : ", $") + std::to_string(I + 1) +
      (std::is_same_v<std::tuple_element_t<I, RowValues<Row>>, std::string_view> ? "::text[]"
                                                                                 : "::bigint[]")),
     ...);
  }
  (std::make_index_sequence<kFields<Row>>{});
  return sql + ")" + single.substr(single.find(" ON CONFLICT"));
}

std::string Str(int64_t v) { return std::to_string(v); }
std::string Str(uint64_t v) { return std::to_string(Signed(v)); }

class PgStore final : public Store {
 public:
  PgStore(const std::string& url, const engine::EngineConfig& config)
      : config_(config),
        writer_(url, Secrets(url), "writer"),
        reader_(url, Secrets(url), "reader") {
    auto add = [this](std::string name, std::string sql, std::vector<Oid> types) {
      const int id = static_cast<int>(statements_.size());
      statements_.push_back(Statement{id, "mb_" + name, std::move(sql), std::move(types)});
      return id;
    };
    auto ints = [](std::size_t n) { return std::vector<Oid>(n, kInt8Oid); };
    const std::string orders =
        std::string(kOrderSelect) + " WHERE account_id = ? AND market_id = ?";
    upsert_orders_ = add("upsert_orders",
                         UpsertArraysSql<OrderRow>("orders", kOrderColumns, UpsertOrderSql()), {});
    upsert_lists_ = add("upsert_lists",
                        UpsertArraysSql<ListRow>("order_lists", kListColumns, UpsertListSql()), {});
    set_placed_ = add("set_placed", NumberPlaceholders(kSetPlacedSql), ints(3));
    set_state_ = add("set_state", NumberPlaceholders(kSetStateSql), ints(4));
    state_ = add("state", std::string(kStateSql), {});
    open_orders_ =
        add("open_orders", std::string(kOrderSelect) + std::string(kOpenOrdersWhere), {});
    open_lists_ = add("open_lists", std::string(kListSelect) + std::string(kOpenListsWhere), {});
    all_lists_asc_ = add("all_lists_asc", NumberPlaceholders(AllListsSql(true)), ints(5));
    all_lists_desc_ = add("all_lists_desc", NumberPlaceholders(AllListsSql(false)), ints(5));
    find_list_ = add("find_list", NumberPlaceholders(FindListSql(false)), ints(2));
    find_list_client_ =
        add("find_list_client", NumberPlaceholders(FindListSql(true)), {kInt8Oid, kTextOid});
    all_orders_asc_ = add("all_orders_asc", NumberPlaceholders(AllOrdersSql(true)), ints(6));
    all_orders_desc_ = add("all_orders_desc", NumberPlaceholders(AllOrdersSql(false)), ints(6));
    find_order_ = add("find_order", NumberPlaceholders(orders + " AND order_id = ?"), ints(3));
    find_client_ =
        add("find_client",
            NumberPlaceholders(std::string(kOrderSelect) + std::string(kOrderByClientIdWhere)),
            {kInt8Oid, kInt8Oid, kTextOid});
    trades_asc_ = add("trades_asc", NumberPlaceholders(MyTradesSql(true)), ints(12));
    trades_desc_ = add("trades_desc", NumberPlaceholders(MyTradesSql(false)), ints(12));
    ledger_ = add("ledger", NumberPlaceholders(kLedgerSql), ints(3));
    // One parameter list each (TransferParams), all int8.
    auto transfers = [&](std::string name, const std::string& sql) {
      const auto n = static_cast<std::size_t>(std::count(sql.begin(), sql.end(), '?'));
      return add(std::move(name), NumberPlaceholders(sql), ints(n));
    };
    withdrawals_of_account_ = transfers("withdrawals_of_account", WithdrawalsSql(true));
    withdrawals_all_ = transfers("withdrawals_all", WithdrawalsSql(false));
    deposits_of_account_ = transfers("deposits_of_account", DepositsSql(true));
    deposits_all_ = transfers("deposits_all", DepositsSql(false));
    find_withdrawal_ =
        add("find_withdrawal", NumberPlaceholders(FindWithdrawalSql(false)), ints(2));
    find_withdrawal_ref_ = add("find_withdrawal_ref", NumberPlaceholders(FindWithdrawalSql(true)),
                               {kInt8Oid, kTextOid});
    all_order_rows_ = add("all_order_rows", std::string(kOrderSelect) + " ORDER BY order_id", {});
  }

  Status Open() {
    MB_RETURN_IF_ERROR(writer_.Connect());
    MB_RETURN_IF_ERROR(Migrate());
    MutexLock lock(read_mu_);  // uncontended: no query runs before Open() returns
    return reader_.Connect();
  }

  std::string_view backend() const noexcept override { return "postgres"; }

  // ---- writer ----

  Result<ProjectorState> State() override { return ReadState(writer_); }

  Result<std::vector<OrderRow>> OpenOrders() override {
    return Retrying(writer_, [&](Connection& conn) { return OrderRows(conn, open_orders_); });
  }

  Result<std::vector<ListRow>> OpenOrderLists() override {
    return Retrying(writer_, [&](Connection& conn) { return ListRows(conn, open_lists_); });
  }

  Status Commit(const RowBatch& b, const ProjectorState& state) override {
    // An order placed in this batch cannot be stored yet (the rows of a
    // sequence commit with it): those are loaded by COPY, which costs half an
    // upsert, and only the others are upserted. An order listed twice keeps
    // its last row, as a row-by-row upsert would. A pending order placed in
    // this batch has its placing sequence but may be stored already: upserted.
    placed_.clear();
    updated_.clear();
    seen_.clear();
    pending_placed_.clear();
    for (const PendingPlacedRow& p : b.pending_placed) pending_placed_.insert(p.order_id);
    for (auto it = b.orders.rbegin(); it != b.orders.rend(); ++it) {
      const uint64_t id = Raw(it->order.id);
      if (!seen_.insert(id).second) continue;
      const bool fresh =
          b.first_seq > 0 && it->created_seq >= b.first_seq && pending_placed_.count(id) == 0;
      (fresh ? placed_ : updated_).push_back(*it);
    }
    // Lists too: one row each (an upsert may not touch a row twice).
    lists_.clear();
    seen_.clear();
    for (auto it = b.lists.rbegin(); it != b.lists.rend(); ++it) {
      if (seen_.insert(it->list.id).second) lists_.push_back(*it);
    }
    const std::vector<std::string> state_values = {
        Str(state.applied_seq), Str(state.applied_checksum), Str(state.config_hash),
        Str(state.applied_time_ns)};
    return InTransaction(writer_, "BEGIN", [&]() -> Status {
      if (!b.order_events.empty()) {
        MB_RETURN_IF_ERROR(writer_.Copy("order_events", CopyRows(&copy_, b.order_events)));
      }
      if (!b.trades.empty()) MB_RETURN_IF_ERROR(writer_.Copy("trades", CopyRows(&copy_, b.trades)));
      if (!b.ledger.empty()) {
        MB_RETURN_IF_ERROR(writer_.Copy("ledger_entries", CopyRows(&copy_, b.ledger)));
      }
      if (!b.deposits.empty()) {
        MB_RETURN_IF_ERROR(writer_.Copy("deposits", CopyRows(&copy_, b.deposits)));
      }
      if (!b.withdrawals.empty()) {
        MB_RETURN_IF_ERROR(writer_.Copy("withdrawals", CopyRows(&copy_, b.withdrawals)));
      }
      if (!b.transfers_out.empty()) {
        MB_RETURN_IF_ERROR(writer_.Copy("transfers_out", CopyRows(&copy_, b.transfers_out)));
      }
      if (!b.transfers_resolved.empty()) {
        MB_RETURN_IF_ERROR(
            writer_.Copy("transfers_resolved", CopyRows(&copy_, b.transfers_resolved)));
      }
      if (!placed_.empty()) {
        MB_RETURN_IF_ERROR(writer_.Command("SAVEPOINT placed_orders"));
        std::string code;
        Status st = writer_.Copy("orders", CopyRows(&copy_, placed_), &code);
        if (st.ok()) {
          MB_RETURN_IF_ERROR(writer_.Command("RELEASE SAVEPOINT placed_orders"));
        } else if (code == "23505") {
          // Already stored after all (a batch built by hand): upsert them too.
          MB_RETURN_IF_ERROR(writer_.Command("ROLLBACK TO SAVEPOINT placed_orders"));
          updated_.insert(updated_.end(), placed_.begin(), placed_.end());
        } else {
          return st;
        }
      }
      if (!updated_.empty()) {
        Arrays(updated_, &order_arrays_);
        MB_RETURN_IF_ERROR(
            writer_.Run(Stmt(upsert_orders_), order_arrays_, PGRES_COMMAND_OK).status());
      }
      for (const PendingPlacedRow& t : b.pending_placed) {
        MB_RETURN_IF_ERROR(writer_
                               .Run(Stmt(set_placed_),
                                    {Str(t.time_ns), Str(t.created_seq), Str(t.order_id)},
                                    PGRES_COMMAND_OK)
                               .status());
      }
      if (!lists_.empty()) {
        Arrays(lists_, &order_arrays_);
        MB_RETURN_IF_ERROR(
            writer_.Run(Stmt(upsert_lists_), order_arrays_, PGRES_COMMAND_OK).status());
      }
      Result<PgResult> r = writer_.Run(Stmt(set_state_), state_values, PGRES_COMMAND_OK);
      if (!r.ok()) return r.status();
      if (std::strcmp(PQcmdTuples(r->get()), "1") != 0) {
        return Corruption("projection: projector_state has no row");
      }
      return Status::Ok();
    });
  }

  Status Reset() override {
    std::string truncate = "TRUNCATE ";
    for (const TableSpec& t : DataTables()) {
      if (truncate.size() > 9) truncate += ", ";
      truncate += t.name;
    }
    return InTransaction(writer_, "BEGIN", [&]() -> Status {
      MB_RETURN_IF_ERROR(writer_.Command(truncate));
      return writer_.Command(
          "UPDATE projector_state SET applied_seq = 0, applied_checksum = 0, config_hash = 0, "
          "applied_time_ns = 0");
    });
  }

  // ---- queries ----

  Result<std::vector<OrderRecord>> AllOrders(const HistoryQuery& q) override {
    MutexLock lock(read_mu_);
    const auto [lo, hi] = TimeBounds(q);
    const std::vector<std::string> params = {
        Str(int64_t{q.account}), Str(int64_t{q.market}), Str(q.from_id), Str(lo), Str(hi),
        Str(Limit(q.limit))};
    const int s = Ascending(q) ? all_orders_asc_ : all_orders_desc_;
    Result<std::vector<OrderRow>> rows =
        Retrying(reader_, [&](Connection& conn) { return OrderRows(conn, s, params); });
    if (!rows.ok()) return rows.status();
    std::vector<OrderRecord> out;
    out.reserve(rows->size());
    for (const OrderRow& r : *rows) out.push_back(r.order);
    if (!Ascending(q)) std::reverse(out.begin(), out.end());
    return out;
  }

  Result<std::optional<OrderRecord>> FindOrder(uint32_t account, uint16_t market,
                                               uint64_t order_id) override {
    MutexLock lock(read_mu_);
    return FirstOrder(find_order_, {Str(int64_t{account}), Str(int64_t{market}), Str(order_id)});
  }

  Result<std::optional<OrderRecord>> FindOrderByClientId(uint32_t account, uint16_t market,
                                                         std::string_view client_id) override {
    MutexLock lock(read_mu_);
    return FirstOrder(find_client_,
                      {Str(int64_t{account}), Str(int64_t{market}), std::string(client_id)});
  }

  Result<std::vector<marketdata::Fill>> MyTrades(const HistoryQuery& q) override {
    MutexLock lock(read_mu_);
    const auto [lo, hi] = TimeBounds(q);
    const std::string account = Str(int64_t{q.account});
    const std::string market = Str(int64_t{q.market});
    const std::string order = Str(q.order_id);
    const std::vector<std::string> params = {account,        market,  order,   order,
                                             account,        market,  order,   order,
                                             Str(q.from_id), Str(lo), Str(hi), Str(Limit(q.limit))};
    const int s = Ascending(q) ? trades_asc_ : trades_desc_;
    return Retrying(reader_, [&](Connection& conn) -> Result<std::vector<marketdata::Fill>> {
      Result<PgResult> r = conn.Run(Stmt(s), params);
      if (!r.ok()) return r.status();
      std::vector<marketdata::Fill> out;
      const int n = PQntuples(r->get());
      out.reserve(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) {
        const PgRow row{r->get(), i};
        if (static_cast<std::size_t>(row.Int(1)) >= config_.markets.size()) {
          return Corruption("projection: trade " + std::string(row.Text(0)) +
                            " of unknown market " + std::string(row.Text(1)));
        }
        out.push_back(ReadFill(row, config_));
      }
      if (!Ascending(q)) std::reverse(out.begin(), out.end());
      return out;
    });
  }

  Result<std::vector<ListRecord>> AllOrderLists(const HistoryQuery& q) override {
    MutexLock lock(read_mu_);
    const auto [lo, hi] = TimeBounds(q);
    const std::vector<std::string> params = {Str(int64_t{q.account}), Str(q.from_id), Str(lo),
                                             Str(hi), Str(Limit(q.limit))};
    Result<std::vector<ListRow>> rows = Retrying(reader_, [&](Connection& conn) {
      return ListRows(conn, Ascending(q) ? all_lists_asc_ : all_lists_desc_, params);
    });
    if (!rows.ok()) return rows.status();
    std::vector<ListRecord> out;
    out.reserve(rows->size());
    for (const ListRow& r : *rows) out.push_back(r.list);
    if (!Ascending(q)) std::reverse(out.begin(), out.end());
    return out;
  }

  Result<std::optional<ListRecord>> FindOrderList(uint32_t account, uint64_t list_id) override {
    MutexLock lock(read_mu_);
    return FirstList(find_list_, {Str(int64_t{account}), Str(list_id)});
  }

  Result<std::optional<ListRecord>> FindOrderListByClientId(uint32_t account,
                                                            std::string_view client_id) override {
    MutexLock lock(read_mu_);
    return FirstList(find_list_client_, {Str(int64_t{account}), std::string(client_id)});
  }

  Result<std::vector<LedgerRow>> Ledger(const LedgerQuery& q) override {
    MutexLock lock(read_mu_);
    const std::vector<std::string> params = {Str(int64_t{q.account}), Str(q.from_seq),
                                             Str(Limit(q.limit))};
    return Retrying(reader_, [&](Connection& conn) -> Result<std::vector<LedgerRow>> {
      Result<PgResult> r = conn.Run(Stmt(ledger_), params);
      if (!r.ok()) return r.status();
      std::vector<LedgerRow> out;
      for (int i = 0; i < PQntuples(r->get()); ++i)
        out.push_back(ReadLedgerRow(PgRow{r->get(), i}));
      return out;
    });
  }

  Result<std::vector<WithdrawalRow>> Withdrawals(const TransferQuery& q) override {
    MutexLock lock(read_mu_);
    return Rows<WithdrawalRow>(q.account ? withdrawals_of_account_ : withdrawals_all_,
                               Strs(TransferParams(q, true)), ReadWithdrawalRow<PgRow>);
  }

  Result<std::vector<TransferRow>> Deposits(const TransferQuery& q) override {
    MutexLock lock(read_mu_);
    return Rows<TransferRow>(q.account ? deposits_of_account_ : deposits_all_,
                             Strs(TransferParams(q, false)), ReadTransferRow<PgRow>);
  }

  Result<std::optional<WithdrawalRow>> FindWithdrawal(uint32_t account, uint64_t id,
                                                      std::string_view ref) override {
    MutexLock lock(read_mu_);
    const std::vector<std::string> params = {Str(int64_t{account}),
                                             id != 0 ? Str(id) : std::string(ref)};
    Result<std::vector<WithdrawalRow>> rows = Rows<WithdrawalRow>(
        id != 0 ? find_withdrawal_ : find_withdrawal_ref_, params, ReadWithdrawalRow<PgRow>);
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return std::optional<WithdrawalRow>{};
    return std::optional<WithdrawalRow>(std::move(rows->front()));
  }

  Result<ProjectorState> CommittedState() override {
    MutexLock lock(read_mu_);
    return ReadState(reader_);
  }

  // ---- checks ----

  Result<std::vector<TableDump>> Dump() override {
    MutexLock lock(read_mu_);
    return Retrying(reader_, [&](Connection& conn) -> Result<std::vector<TableDump>> {
      std::vector<TableDump> out;
      Status st = InTransaction(conn, kSnapshotBegin, [&]() -> Status {
        for (const TableSpec& t : DataTables()) {
          Result<PgResult> r = conn.Exec("SELECT * FROM " + std::string(t.name) + " ORDER BY " +
                                         std::string(t.order_by));
          if (!r.ok()) return r.status();
          TableDump d;
          d.table = std::string(t.name);
          const int rows = PQntuples(r->get());
          const int cols = PQnfields(r->get());
          d.rows.reserve(static_cast<std::size_t>(rows));
          for (int i = 0; i < rows; ++i) {
            std::string line;
            for (int c = 0; c < cols; ++c) {
              if (c > 0) line += '|';
              line.append(PQgetvalue(r->get(), i, c),
                          static_cast<std::size_t>(PQgetlength(r->get(), i, c)));
            }
            d.rows.push_back(std::move(line));
          }
          out.push_back(std::move(d));
        }
        return Status::Ok();
      });
      if (!st.ok()) return st;
      return out;
    });
  }

  Result<ProjectionTotals> Totals() override {
    MutexLock lock(read_mu_);
    std::string counts = "SELECT ";
    for (const TableSpec& t : DataTables()) {
      if (counts.size() > 7) counts += ", ";
      counts += "(SELECT COUNT(*) FROM " + std::string(t.name) + ")";
    }
    return Retrying(reader_, [&](Connection& conn) -> Result<ProjectionTotals> {
      ProjectionTotals totals;
      Status st = InTransaction(conn, kSnapshotBegin, [&]() -> Status {
        Result<PgResult> c = conn.Exec(counts);
        if (!c.ok()) return c.status();
        int col = 0;
        for (const TableSpec& t : DataTables()) {
          *CountOf(totals, t.name) = static_cast<uint64_t>(PgRow{c->get(), 0}.Int(col++));
        }
        Result<PgResult> b = conn.Exec(kBalanceTotalsSql);
        if (!b.ok()) return b.status();
        for (int i = 0; i < PQntuples(b->get()); ++i) {
          totals.balances.push_back(ReadBalanceTotal(PgRow{b->get(), i}));
        }
        return Status::Ok();
      });
      if (!st.ok()) return st;
      return totals;
    });
  }

  Result<std::vector<OrderRow>> AllOrderRows() override {
    MutexLock lock(read_mu_);
    return Retrying(reader_, [&](Connection& conn) { return OrderRows(conn, all_order_rows_); });
  }

 private:
  static constexpr std::string_view kSnapshotBegin =
      "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

  const Statement& Stmt(int id) const { return statements_[static_cast<std::size_t>(id)]; }

  // schema_migrations, then each missing migration in its own transaction
  // with its row; the advisory lock keeps two processes from migrating at once.
  Status Migrate() {
    int64_t have = 0;
    auto lock_and_read = [&]() -> Status {
      MB_RETURN_IF_ERROR(writer_.Exec(kMigrationLockSql).status());
      MB_RETURN_IF_ERROR(
          writer_.Command("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY "
                          "KEY, description TEXT NOT NULL)"));
      Result<PgResult> r = writer_.Exec("SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
      if (!r.ok()) return r.status();
      have = PgRow{r->get(), 0}.Int(0);
      return CheckSchemaVersion(have);
    };
    MB_RETURN_IF_ERROR(InTransaction(writer_, "BEGIN", lock_and_read));
    for (const Migration& m : Migrations()) {
      if (m.version <= have) continue;
      Status applied = InTransaction(writer_, "BEGIN", [&]() -> Status {
        MB_RETURN_IF_ERROR(lock_and_read());
        if (m.version <= have) return Status::Ok();  // another process applied it
        for (const std::string& sql : Statements(m, Dialect::kPostgres)) {
          Status st = writer_.Command(sql);
          if (!st.ok()) {
            return Status(st.code(), "projection migration " + std::to_string(m.version) + ": " +
                                         st.message());
          }
        }
        return writer_
            .ExecParams("INSERT INTO schema_migrations (version, description) VALUES ($1, $2)",
                        {std::to_string(m.version), std::string(m.description)}, PGRES_COMMAND_OK)
            .status();
      });
      if (!applied.ok()) return applied;
    }
    return Status::Ok();
  }

  Result<ProjectorState> ReadState(Connection& c) {
    return Retrying(c, [&](Connection& conn) -> Result<ProjectorState> {
      Result<PgResult> r = conn.Run(Stmt(state_), {});
      if (!r.ok()) return r.status();
      if (PQntuples(r->get()) != 1) return Corruption("projection: projector_state has no row");
      return ReadStateRow(PgRow{r->get(), 0});
    });
  }

  Result<std::vector<OrderRow>> OrderRows(Connection& c, int s,
                                          const std::vector<std::string>& params = {}) {
    Result<PgResult> r = c.Run(Stmt(s), params);
    if (!r.ok()) return r.status();
    std::vector<OrderRow> out;
    const int n = PQntuples(r->get());
    out.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) out.push_back(ReadOrderRow(PgRow{r->get(), i}, 0));
    return out;
  }

  Result<std::vector<ListRow>> ListRows(Connection& c, int s,
                                        const std::vector<std::string>& params = {}) {
    Result<PgResult> r = c.Run(Stmt(s), params);
    if (!r.ok()) return r.status();
    std::vector<ListRow> out;
    const int n = PQntuples(r->get());
    out.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) out.push_back(ReadListRow(PgRow{r->get(), i}));
    return out;
  }

  Result<std::optional<ListRecord>> FirstList(int s, const std::vector<std::string>& params)
      MB_REQUIRES(read_mu_) {
    Result<std::vector<ListRow>> rows =
        Retrying(reader_, [&](Connection& conn) { return ListRows(conn, s, params); });
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return std::optional<ListRecord>{};
    return std::optional<ListRecord>(rows->front().list);
  }

  // Every row of the statement s on the reader, each read by read(PgRow).
  template <class T, class Read>
  Result<std::vector<T>> Rows(int s, const std::vector<std::string>& params, Read read)
      MB_REQUIRES(read_mu_) {
    return Retrying(reader_, [&](Connection& conn) -> Result<std::vector<T>> {
      Result<PgResult> r = conn.Run(Stmt(s), params);
      if (!r.ok()) return r.status();
      std::vector<T> out;
      const int n = PQntuples(r->get());
      out.reserve(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) out.push_back(read(PgRow{r->get(), i}));
      return out;
    });
  }

  static std::vector<std::string> Strs(const std::vector<int64_t>& values) {
    std::vector<std::string> out;
    out.reserve(values.size());
    for (int64_t v : values) out.push_back(Str(v));
    return out;
  }

  Result<std::optional<OrderRecord>> FirstOrder(int s, const std::vector<std::string>& params)
      MB_REQUIRES(read_mu_) {
    Result<std::vector<OrderRow>> rows =
        Retrying(reader_, [&](Connection& conn) { return OrderRows(conn, s, params); });
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return std::optional<OrderRecord>{};
    return std::optional<OrderRecord>(rows->front().order);
  }

  const engine::EngineConfig& config_;
  std::vector<Statement> statements_;
  int upsert_orders_ = 0, set_state_ = 0, state_ = 0, open_orders_ = 0;
  int upsert_lists_ = 0, set_placed_ = 0, open_lists_ = 0, all_lists_asc_ = 0;
  int all_lists_desc_ = 0, find_list_ = 0, find_list_client_ = 0;
  int all_orders_asc_ = 0, all_orders_desc_ = 0, find_order_ = 0, find_client_ = 0;
  int trades_asc_ = 0, trades_desc_ = 0, ledger_ = 0, all_order_rows_ = 0;
  int withdrawals_of_account_ = 0, withdrawals_all_ = 0, deposits_of_account_ = 0;
  int deposits_all_ = 0, find_withdrawal_ = 0, find_withdrawal_ref_ = 0;

  Connection writer_;                            // writer thread only
  std::string copy_;                             // writer thread only: COPY rows of one table
  std::vector<std::string> order_arrays_;        // writer thread only
  std::vector<OrderRow> placed_, updated_;       // writer thread only: the orders of one batch
  std::vector<ListRow> lists_;                   // writer thread only: the lists of one batch
  std::unordered_set<uint64_t> seen_;            // writer thread only
  std::unordered_set<uint64_t> pending_placed_;  // writer thread only

  Mutex read_mu_;  // the history queries: one at a time on the reader connection
  Connection reader_ MB_GUARDED_BY(read_mu_);
};

}  // namespace

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url,
                                                 const engine::EngineConfig& config) {
  if (url.empty()) return InvalidArgument("postgres: empty connection URL");
  auto store = std::make_unique<PgStore>(url, config);
  MB_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace mb::projection
