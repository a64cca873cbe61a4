// The history store: RocksDB, one key space, fixed-width big-endian keys
// that begin with a table tag and then the account, so that every history
// question Binance's API asks is one prefix or range scan (docs/history.md
// has the layout and why).
//
// A Commit is one WriteBatch: the rows and the projector's state go in
// together, and RocksDB applies a write batch to one memtable atomically. Its
// own write-ahead log is off — the journal is the log. After a crash the
// store holds a prefix of the batches it was given (memtables are flushed
// whole, in order, with the state key inside), so the projector resumes from
// the state it reads back and nothing is applied twice or skipped.
//
// Rows are stored as the SQL stores bind them (sql_rows.h's Values(): the
// same columns in the same order), each integer as a zigzag varint and each
// text with its length, so the SQL stores' row readers read them back and a
// dump is the same text as a SQL dump of the same journal.
//
// Orders and lists are written whole, as the row builder holds them after
// each batch: no read before a write.
#include <fmt/format.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "projection/sql_rows.h"
#include "projection/store.h"

namespace mb::projection {
namespace {

namespace fs = std::filesystem;

// ---- keys ----------------------------------------------------------------

// One byte names the table (or index) a key belongs to.
enum Tag : char {
  kState = 's',
  kOrder = 'O',          // account, market, order id -> order
  kOpenOrder = 'P',      // order id -> account, market (open orders only)
  kOrderClient = 'C',    // account, market, client id, 0, order id
  kTrade = 'T',          // market, trade id -> trade
  kFill = 'F',           // account, market, trade id, 0 maker / 1 taker
  kLedger = 'L',         // account, seq -> the account's lines of that record
  kDeposit = 'D',        // transfer id -> deposit
  kDepositBy = 'd',      // account, transfer id
  kWithdrawal = 'W',     // transfer id -> withdrawal
  kTransferOut = 'X',    // transfer id -> transfer to another venue
  kTransferOutBy = 'x',  // account, transfer id
  kTransferRef = 'r',    // account, ref, 0, transfer id
  kResolved = 'R',       // transfer id -> resolution
  kList = 'G',           // account, list id -> order list
  kOpenList = 'g',       // list id -> account (executing lists only)
  kListClient = 'H',     // account, list client id, 0, list id
  kCandle = 'K',         // market, interval, open time -> candle
};

class Key {
 public:
  explicit Key(Tag tag) {
    s_.reserve(32);  // one allocation for every fixed-width key
    s_.push_back(tag);
  }
  Key& U8(uint8_t v) {
    s_.push_back(static_cast<char>(v));
    return *this;
  }
  Key& U16(uint16_t v) { return Put(v, 2); }
  Key& U32(uint32_t v) { return Put(v, 4); }
  Key& U64(uint64_t v) { return Put(v, 8); }
  // A signed value, ordered: the sign bit flipped.
  Key& I64(int64_t v) { return Put(Unsigned(v) ^ (uint64_t{1} << 63), 8); }
  // Text ended by a 0 byte (client ids and references hold none).
  Key& Text(std::string_view t) {
    s_.append(t);
    s_.push_back('\0');
    return *this;
  }
  const std::string& str() const { return s_; }
  rocksdb::Slice slice() const { return s_; }
  // An id as keys hold it: 8 bytes, big-endian.
  static std::string Big(uint64_t v) {
    std::string s;
    PutBig(&s, v, 8);
    return s;
  }

 private:
  static void PutBig(std::string* s, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  Key& Put(uint64_t v, int bytes) {
    PutBig(&s_, v, bytes);
    return *this;
  }
  std::string s_;
};

uint64_t ReadBig(std::string_view s, std::size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v = (v << 8) | static_cast<uint8_t>(s[at + static_cast<std::size_t>(i)]);
  }
  return v;
}

// The first key after every key that begins with `prefix`.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<uint8_t>(prefix.back()) == 0xff) prefix.pop_back();
  if (!prefix.empty()) prefix.back() = static_cast<char>(static_cast<uint8_t>(prefix.back()) + 1);
  return prefix;
}

// ---- values --------------------------------------------------------------

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(std::string_view* in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const auto b = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    *v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

void PutCell(std::string* out, int64_t v) {
  PutVarint(out, (Unsigned(v) << 1) ^ Unsigned(v >> 63));  // zigzag
}
void PutCell(std::string* out, std::string_view t) {
  PutVarint(out, t.size());
  out->append(t);
}

template <class Tuple>
std::string Encode(const Tuple& t) {
  std::string out;
  out.reserve(std::tuple_size_v<Tuple> * 4);  // most cells take 1-4 bytes
  std::apply([&](const auto&... v) { (PutCell(&out, v), ...); }, t);
  return out;
}

// A stored row read back: its columns, each an integer or a text. What the
// SQL stores' row readers (sql_rows.h) take.
struct Cells {
  std::vector<int64_t> ints;
  std::vector<std::string> texts;
  std::vector<bool> is_text;
  std::vector<std::size_t> at;  // index into ints or texts

  int64_t Int(int c) const { return ints[at[static_cast<std::size_t>(c)]]; }
  std::string_view Text(int c) const { return texts[at[static_cast<std::size_t>(c)]]; }
  void AddInt(int64_t v) {
    at.push_back(ints.size());
    is_text.push_back(false);
    ints.push_back(v);
  }
  void AddText(std::string_view t) {
    at.push_back(texts.size());
    is_text.push_back(true);
    texts.emplace_back(t);
  }
  std::size_t size() const { return at.size(); }
  // As a SQL dump shows the row: the columns joined by '|'.
  std::string Line() const {
    std::string s;
    for (std::size_t c = 0; c < size(); ++c) {
      if (c > 0) s += '|';
      if (is_text[c]) {
        s += texts[at[c]];
      } else {
        s += std::to_string(ints[at[c]]);
      }
    }
    return s;
  }
};

template <class T>
bool GetCell(std::string_view* in, Cells* cells) {
  uint64_t v = 0;
  if (!GetVarint(in, &v)) return false;
  if constexpr (std::is_same_v<T, std::string_view>) {
    if (v > in->size()) return false;
    cells->AddText(in->substr(0, v));
    in->remove_prefix(v);
  } else {
    cells->AddInt(Signed((v >> 1) ^ (~(v & 1) + 1)));
  }
  return true;
}

// The columns of the row at the front of *in (taken off it), whose
// Values() tuple type is Tuple.
template <class Tuple>
Result<Cells> DecodeNext(std::string_view* in, std::string_view what) {
  Cells cells;
  bool ok = true;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((ok = ok && GetCell<std::tuple_element_t<I, Tuple>>(in, &cells)), ...);
  }
  (std::make_index_sequence<std::tuple_size_v<Tuple>>{});
  if (!ok) return Corruption(fmt::format("history store: a stored {} row does not decode", what));
  return cells;
}

// A value that holds one row.
template <class Tuple>
Result<Cells> Decode(std::string_view in, std::string_view what) {
  auto cells = DecodeNext<Tuple>(&in, what);
  if (cells.ok() && !in.empty()) {
    return Corruption(fmt::format("history store: a stored {} row has bytes after it", what));
  }
  return cells;
}

// A value that holds rows one after another.
template <class Tuple>
Result<std::vector<Cells>> DecodeAll(std::string_view in, std::string_view what) {
  std::vector<Cells> out;
  while (!in.empty()) {
    auto cells = DecodeNext<Tuple>(&in, what);
    if (!cells.ok()) return cells.status();
    out.push_back(std::move(*cells));
  }
  return out;
}

template <class Tuple>
Result<std::vector<Cells>> DecodeOne(std::string_view in, std::string_view what) {
  auto cells = Decode<Tuple>(in, what);
  if (!cells.ok()) return cells.status();
  return std::vector<Cells>{std::move(*cells)};
}

auto Values(const CandleRow& r) {
  const marketdata::Kline& k = r.candle;
  return std::make_tuple(int64_t{r.market}, int64_t{r.interval}, k.open_time_ms, k.open.value,
                         k.high.value, k.low.value, k.close.value, k.volume.value,
                         k.base_volume.value, k.quote_volume.value, k.taker_buy_base.value,
                         k.taker_buy_quote.value, int64_t{k.trades}, Signed(Raw(k.first_trade)),
                         Signed(Raw(k.last_trade)));
}
template <class Row>
using TupleOf = decltype(Values(std::declval<const Row&>()));

using OrderTuple = TupleOf<OrderRow>;
using ListTuple = TupleOf<ListRow>;
using TradeTuple = TupleOf<TradeRecord>;
using LedgerTuple = TupleOf<LedgerRow>;
using TransferTuple = TupleOf<TransferRow>;
using TransferOutTuple = TupleOf<TransferOutRow>;
using ResolvedTuple = TupleOf<TransferResolvedRow>;
using StateTuple = TupleOf<ProjectorState>;

using CandleTuple = TupleOf<CandleRow>;

CandleRow ReadCandle(const Cells& c) {
  CandleRow r;
  r.market = static_cast<uint16_t>(c.Int(0));
  r.interval = static_cast<uint8_t>(c.Int(1));
  marketdata::Kline& k = r.candle;
  k.open_time_ms = c.Int(2);
  k.open = Price{c.Int(3)};
  k.high = Price{c.Int(4)};
  k.low = Price{c.Int(5)};
  k.close = Price{c.Int(6)};
  k.volume = Qty{c.Int(7)};
  k.base_volume = Amount{c.Int(8)};
  k.quote_volume = Amount{c.Int(9)};
  k.taker_buy_base = Amount{c.Int(10)};
  k.taker_buy_quote = Amount{c.Int(11)};
  k.trades = static_cast<uint32_t>(c.Int(12));
  k.first_trade = static_cast<TradeId>(Unsigned(c.Int(13)));
  k.last_trade = static_cast<TradeId>(Unsigned(c.Int(14)));
  return r;
}

TradeRecord ReadTrade(const Cells& c) {
  TradeRecord t;
  t.trade_id = Unsigned(c.Int(0));
  t.seq = Unsigned(c.Int(1));
  t.market = static_cast<uint16_t>(c.Int(2));
  t.taker_side = static_cast<engine::Side>(c.Int(3));
  t.price = c.Int(4);
  t.qty = c.Int(5);
  t.base_qty = c.Int(6);
  t.notional = c.Int(7);
  t.maker_order_id = Unsigned(c.Int(8));
  t.taker_order_id = Unsigned(c.Int(9));
  t.maker_account = static_cast<uint32_t>(c.Int(10));
  t.taker_account = static_cast<uint32_t>(c.Int(11));
  t.maker_fee = c.Int(12);
  t.taker_fee = c.Int(13);
  t.time_ns = c.Int(14);
  return t;
}

// The fill of one side of a trade, as the SQL stores' MyTradesSql row gives it.
marketdata::Fill FillOf(const TradeRecord& t, bool maker, const engine::EngineConfig& config) {
  Cells c;
  c.AddInt(Signed(t.trade_id));
  c.AddInt(t.market);
  c.AddInt(t.price);
  c.AddInt(t.qty);
  c.AddInt(t.base_qty);
  c.AddInt(t.notional);
  c.AddInt(t.time_ns);
  c.AddInt(Signed(maker ? t.maker_order_id : t.taker_order_id));
  c.AddInt(maker ? t.maker_account : t.taker_account);
  c.AddInt(maker ? 1 : 0);
  c.AddInt(Small(t.taker_side));
  c.AddInt(maker ? t.maker_fee : t.taker_fee);
  return ReadFill(c, config);
}

bool IsOpen(OrderStatus s) { return Raw(s) < 2 || s == OrderStatus::kPendingNew; }

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::Ok();
  const std::string msg = fmt::format("history store: {}: {}", what, s.ToString());
  if (s.IsCorruption()) return Corruption(msg);
  if (s.IsIOError() || s.IsNoSpace()) return IoError(msg);
  if (s.IsBusy() || s.IsTryAgain() || s.IsIncomplete()) return Unavailable(msg);
  return Status(StatusCode::kInternal, msg);
}

// RocksDB's warnings and errors, into the server's log. RocksDB's own log
// file (LOG in the store's directory) is not used: after a failed write to
// it (a full disk) its writer refuses every later line, and this build of
// RocksDB asserts on that.
class StoreLogger final : public rocksdb::Logger {
 public:
  explicit StoreLogger(std::function<void(std::string_view)> sink)
      : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL), sink_(std::move(sink)) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[1024];
    const int n = std::vsnprintf(line, sizeof line, format, ap);
    if (n <= 0) return;
    const std::string_view text(
        line, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof line - 1));
    if (sink_) {
      sink_("rocksdb: " + std::string(text));
    } else {
      std::fprintf(stderr, "history store: rocksdb: %.*s\n", static_cast<int>(text.size()),
                   text.data());
    }
  }

 private:
  const std::function<void(std::string_view)> sink_;
};

// A commit's writes, given to RocksDB in key order: the memtable's skip list
// keeps where its last insert went, so each key of a sorted batch is found
// from its predecessor's place instead of from the top of the list.
class SortedBatch {
 public:
  void Put(std::string key, std::string value) {
    ops_.push_back(Op{std::move(key), std::move(value), false});
  }
  void Delete(std::string key) { ops_.push_back(Op{std::move(key), {}, true}); }
  // Later writes of one key stay after earlier ones (and win).
  void AppendTo(rocksdb::WriteBatch* wb) {
    std::stable_sort(ops_.begin(), ops_.end(),
                     [](const Op& a, const Op& b) { return a.key < b.key; });
    for (const Op& op : ops_) {
      if (op.erase) {
        wb->Delete(op.key);
      } else {
        wb->Put(op.key, op.value);
      }
    }
  }

 private:
  struct Op {
    std::string key;
    std::string value;
    bool erase = false;
  };
  std::vector<Op> ops_;
};

class RocksStore final : public Store {
 public:
  RocksStore(StoreOptions options, const engine::EngineConfig& config)
      : config_(config), options_(std::move(options)) {}

  ~RocksStore() override {
    if (db_ == nullptr) return;
    // What the memtable holds is written out, so the next start resumes
    // here rather than replaying from the last flush.
    (void)db_->Flush(rocksdb::FlushOptions());
    (void)db_->Close();
  }

  Status Open() {
    std::error_code ec;
    const fs::path dir(options_.path);
    const bool exists = fs::exists(dir / "CURRENT", ec);
    if (!exists && fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
      return Corruption(fmt::format(
          "history store {}: the directory holds files but no RocksDB database (CURRENT is "
          "missing); move it aside and run `matchbook history rebuild`",
          options_.path));
    }
    // Made here: RocksDB reports a missing directory as an error before it
    // makes it.
    fs::create_directories(dir, ec);
    if (ec) return IoError("history store " + options_.path + ": create: " + ec.message());
    rocksdb::Options o;
    o.create_if_missing = true;
    o.info_log = std::make_shared<StoreLogger>(options_.log);
    o.paranoid_checks = true;
    // Two background jobs (flush and compaction) on a machine of two cores.
    o.max_background_jobs = 2;
    o.max_subcompactions = 1;
    o.write_buffer_size = std::max<uint64_t>(options_.write_buffer_bytes, 64 << 10);
    o.max_write_buffer_number = 3;
    o.target_file_size_base = 32 << 20;
    o.max_bytes_for_level_base = 128 << 20;
    o.level_compaction_dynamic_level_bytes = true;
    // Level 0 files slow writes down at 20 and stop them at 36: far beyond
    // what the flushes of a projector ever leave while compaction keeps up.
    o.level0_file_num_compaction_trigger = 4;
    o.level0_slowdown_writes_trigger = 20;
    o.level0_stop_writes_trigger = 36;
    o.compression = rocksdb::kLZ4Compression;
    o.bottommost_compression = rocksdb::kZSTD;
    o.max_manifest_file_size = 16 << 20;
    o.avoid_flush_during_shutdown = false;
    // Keys begin with a table tag and 6 bytes of account and market (or of
    // an id): the prefix bloom filters skip files for the account scans.
    o.prefix_extractor.reset(rocksdb::NewCappedPrefixTransform(7));
    rocksdb::BlockBasedTableOptions t;
    t.block_cache = rocksdb::NewLRUCache(std::max<uint64_t>(options_.cache_bytes, 1 << 20));
    t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    t.whole_key_filtering = true;
    t.cache_index_and_filter_blocks = true;
    t.pin_l0_filter_and_index_blocks_in_cache = true;
    t.block_size = 16 << 10;
    t.format_version = 5;
    o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
    o.memtable_prefix_bloom_size_ratio = 0.05;
    // Ids grow with time, so most keys a batch writes land right after the
    // last key of their (table, account, market) prefix: the memtable keeps
    // the place of each prefix's last insert and starts there.
    o.memtable_insert_with_hint_prefix_extractor.reset(rocksdb::NewCappedPrefixTransform(7));
    // One writer: its batches come sorted (SortedBatch), so the skip list's
    // own cached splice serves each insert.
    o.allow_concurrent_memtable_write = false;

    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(o, options_.path, &db);
    if (!s.ok()) {
      if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
        return Unavailable(
            fmt::format("history store {}: in use by another process (another server on this data "
                        "directory?): {}",
                        options_.path, s.ToString()));
      }
      Status st = FromRocks(s, "cannot open " + options_.path);
      if (st.code() == StatusCode::kCorruption || s.IsIOError() || s.IsNotFound()) {
        return Corruption(st.message() +
                          " (the store is damaged: stop the server and run `matchbook history "
                          "rebuild`, which builds it again from the journal)");
      }
      return st;
    }
    db_.reset(db);
    std::string v;
    s = db_->Get(rocksdb::ReadOptions(), Key(kState).slice(), &v);
    if (s.IsNotFound()) return WriteState(ProjectorState{});
    if (!s.ok()) return FromRocks(s, "reading the projector state");
    return Status::Ok();
  }

  std::string_view backend() const noexcept override { return "rocksdb"; }
  bool keeps_market_data() const noexcept override { return true; }

  // ---- writer ----

  Result<ProjectorState> State() override { return ReadState(nullptr); }

  Result<std::vector<OrderRow>> OpenOrders() override {
    std::vector<OrderRow> out;
    Snap snap(db_.get());
    Status st =
        Scan(snap, Key(kOpenOrder).str(), true, [&](std::string_view k, std::string_view v) {
          if (v.size() != 6) {
            return Status(Corruption("history store: an open-order entry is not 6 bytes"));
          }
          const uint64_t id = ReadBig(k, 1, 8);
          auto row = GetOrder(snap, static_cast<uint32_t>(ReadBig(v, 0, 4)),
                              static_cast<uint16_t>(ReadBig(v, 4, 2)), id);
          if (!row.ok()) return row.status();
          if (!row->has_value()) {
            return Corruption(fmt::format("history store: open order {} has no row", id));
          }
          out.push_back(std::move(**row));
          return Status::Ok();
        });
    if (!st.ok()) return st;
    return out;
  }

  Result<std::vector<ListRow>> OpenOrderLists() override {
    std::vector<ListRow> out;
    Snap snap(db_.get());
    Status st = Scan(snap, Key(kOpenList).str(), true, [&](std::string_view k, std::string_view v) {
      if (v.size() != 4)
        return Status(Corruption("history store: an open-list entry is not 4 bytes"));
      const uint64_t id = ReadBig(k, 1, 8);
      auto row = GetList(snap, static_cast<uint32_t>(ReadBig(v, 0, 4)), id);
      if (!row.ok()) return row.status();
      if (!row->has_value()) {
        return Corruption(fmt::format("history store: open order list {} has no row", id));
      }
      out.push_back(std::move(**row));
      return Status::Ok();
    });
    if (!st.ok()) return st;
    return out;
  }

  Result<std::vector<CandleRow>> OpenCandles() override {
    // The newest candle of each market and interval: the last key of each
    // (market, interval) prefix.
    std::vector<CandleRow> out;
    Snap snap(db_.get());
    Status st = Scan(snap, Key(kCandle).str(), true, [&](std::string_view k, std::string_view v) {
      auto cells = Decode<CandleTuple>(v, "candle");
      if (!cells.ok()) return cells.status();
      CandleRow row = ReadCandle(*cells);
      if (!out.empty() && out.back().market == row.market && out.back().interval == row.interval) {
        out.back() = row;
      } else {
        out.push_back(row);
      }
      (void)k;
      return Status::Ok();
    });
    if (!st.ok()) return st;
    return out;
  }

  Status Commit(const RowBatch& b, const ProjectorState& state) override {
    // RocksDB counts every key comparison in a thread-local by default (a
    // __tls_get_addr each, from a shared library): nobody reads the counts.
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    if (failed_) {
      // A background error (a full disk) left the database read-only: try
      // to leave that state before writing again.
      rocksdb::Status r = db_->Resume();
      if (!r.ok()) return FromRocks(r, "resuming after a write error");
      failed_ = false;
    }
    SortedBatch sorted;
    Status st = Write(b, state, &sorted);
    rocksdb::WriteBatch wb;
    sorted.AppendTo(&wb);
    if (!st.ok()) return st;
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;  // the journal is the log
    rocksdb::Status s = db_->Write(wo, &wb);
    if (!s.ok()) {
      failed_ = true;
      return FromRocks(s, "commit");
    }
    return Status::Ok();
  }

  Status Reset() override {
    rocksdb::WriteBatch wb;
    wb.DeleteRange(std::string(1, '\0'), std::string(1, '\x7f'));
    wb.Put(Key(kState).slice(), Encode(Values(ProjectorState{})));
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    MB_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &wb), "reset"));
    MB_RETURN_IF_ERROR(FromRocks(db_->Flush(rocksdb::FlushOptions()), "flush after reset"));
    rocksdb::CompactRangeOptions co;
    return FromRocks(db_->CompactRange(co, nullptr, nullptr), "compaction after reset");
  }

  // ---- queries ----

  Result<std::vector<OrderRecord>> AllOrders(const HistoryQuery& q) override {
    Snap snap(db_.get());
    const auto [lo, hi] = TimeBounds(q);
    std::vector<OrderRecord> out;
    const std::string prefix = Key(kOrder).U32(q.account).U16(q.market).str();
    Status st =
        ScanIds(snap, prefix, q.from_id, Ascending(q), [&](std::string_view, std::string_view v) {
          auto cells = Decode<OrderTuple>(v, "order");
          if (!cells.ok()) return cells.status();
          OrderRecord o = ReadOrderRow(*cells, 0).order;
          if (o.time_ns >= lo && o.time_ns <= hi) out.push_back(o);
          return out.size() < q.limit ? Status::Ok() : Stop();
        });
    if (!st.ok()) return st;
    if (!Ascending(q)) std::reverse(out.begin(), out.end());
    return out;
  }

  Result<std::optional<OrderRecord>> FindOrder(uint32_t account, uint16_t market,
                                               uint64_t order_id) override {
    Snap snap(db_.get());
    auto row = GetOrder(snap, account, market, order_id);
    if (!row.ok()) return row.status();
    if (!row->has_value()) return std::optional<OrderRecord>{};
    return std::optional<OrderRecord>((*row)->order);
  }

  Result<std::optional<OrderRecord>> FindOrderByClientId(uint32_t account, uint16_t market,
                                                         std::string_view client_id) override {
    Snap snap(db_.get());
    std::optional<OrderRow> best;
    const std::string prefix = Key(kOrderClient).U32(account).U16(market).Text(client_id).str();
    Status st = Scan(snap, prefix, true, [&](std::string_view k, std::string_view) {
      auto row = GetOrder(snap, account, market, ReadBig(k, k.size() - 8, 8));
      if (!row.ok()) return row.status();
      // An entry of an id the order had before an amend renamed it is passed over.
      if (row->has_value() && (*row)->order.client_order_id.view() == client_id &&
          (!best || (*row)->created_seq > best->created_seq)) {
        best = **row;
      }
      return Status::Ok();
    });
    if (!st.ok()) return st;
    if (!best) return std::optional<OrderRecord>{};
    return std::optional<OrderRecord>(best->order);
  }

  Result<std::vector<marketdata::Fill>> MyTrades(const HistoryQuery& q) override {
    Snap snap(db_.get());
    const auto [lo, hi] = TimeBounds(q);
    const bool asc = Ascending(q);
    const std::string prefix = Key(kFill).U32(q.account).U16(q.market).str();
    std::vector<marketdata::Fill> out;
    Status st = ScanIds(snap, prefix, q.from_id, asc, [&](std::string_view k, std::string_view v) {
      const uint64_t trade_id = ReadBig(k, 7, 8);
      const bool maker = k[15] == 0;
      // A fill written before fills carried their trade has an empty value.
      auto trade = v.empty() ? GetTrade(snap, q.market, trade_id) : DecodeTrade(v);
      if (!trade.ok()) return trade.status();
      const TradeRecord& t = *trade;
      if (q.order_id != 0 && (maker ? t.maker_order_id : t.taker_order_id) != q.order_id) {
        return Status::Ok();
      }
      if (t.time_ns < lo || t.time_ns > hi) return Status::Ok();
      out.push_back(FillOf(t, maker, config_));
      return out.size() < q.limit ? Status::Ok() : Stop();
    });
    if (!st.ok()) return st;
    if (!asc) std::reverse(out.begin(), out.end());
    return out;
  }

  Result<std::vector<ListRecord>> AllOrderLists(const HistoryQuery& q) override {
    Snap snap(db_.get());
    const auto [lo, hi] = TimeBounds(q);
    const bool asc = Ascending(q);
    const std::string prefix = Key(kList).U32(q.account).str();
    std::vector<ListRecord> out;
    Status st = ScanIds(snap, prefix, q.from_id, asc, [&](std::string_view, std::string_view v) {
      auto cells = Decode<ListTuple>(v, "order list");
      if (!cells.ok()) return cells.status();
      ListRecord l = ReadListRow(*cells).list;
      if (l.time_ns >= lo && l.time_ns <= hi) out.push_back(l);
      return out.size() < q.limit ? Status::Ok() : Stop();
    });
    if (!st.ok()) return st;
    if (!asc) std::reverse(out.begin(), out.end());
    return out;
  }

  Result<std::optional<ListRecord>> FindOrderList(uint32_t account, uint64_t list_id) override {
    Snap snap(db_.get());
    auto row = GetList(snap, account, list_id);
    if (!row.ok()) return row.status();
    if (!row->has_value()) return std::optional<ListRecord>{};
    return std::optional<ListRecord>((*row)->list);
  }

  Result<std::optional<ListRecord>> FindOrderListByClientId(uint32_t account,
                                                            std::string_view client_id) override {
    Snap snap(db_.get());
    uint64_t newest = 0;
    bool found = false;
    const std::string prefix = Key(kListClient).U32(account).Text(client_id).str();
    Status st = Scan(snap, prefix, false, [&](std::string_view k, std::string_view) {
      newest = ReadBig(k, k.size() - 8, 8);
      found = true;
      return Stop();
    });
    if (!st.ok()) return st;
    if (!found) return std::optional<ListRecord>{};
    return FindOrderListIn(snap, account, newest);
  }

  Result<std::vector<LedgerRow>> Ledger(const LedgerQuery& q) override {
    Snap snap(db_.get());
    const std::string prefix = Key(kLedger).U32(q.account).str();
    std::vector<LedgerRow> out;
    if (q.limit == 0) return out;
    Status st = ScanRange(snap, Key(kLedger).U32(q.account).U64(q.from_seq).str(),
                          PrefixEnd(prefix), true, [&](std::string_view, std::string_view v) {
                            auto lines = DecodeAll<LedgerTuple>(v, "ledger");
                            if (!lines.ok()) return lines.status();
                            for (const Cells& c : *lines) {
                              if (out.size() >= q.limit) return Stop();
                              out.push_back(ReadLedgerRow(c));
                            }
                            return out.size() < q.limit ? Status::Ok() : Stop();
                          });
    if (!st.ok()) return st;
    return out;
  }

  Result<std::vector<WithdrawalRow>> Withdrawals(const TransferQuery& q) override {
    Snap snap(db_.get());
    const auto [lo, hi] = TimeBounds(q.start_ms, q.end_ms);
    std::vector<WithdrawalRow> out;
    std::size_t skipped = 0;
    auto consider = [&](uint64_t id) -> Status {
      auto w = GetWithdrawal(snap, id);
      if (!w.ok()) return w.status();
      if (!w->has_value())
        return Corruption(fmt::format("history store: transfer {} has no row", id));
      const WithdrawalRow& row = **w;
      if (q.asset && row.held.asset != *q.asset) return Status::Ok();
      if (q.state && row.state != *q.state) return Status::Ok();
      if (row.held.time_ns < lo || row.held.time_ns > hi) return Status::Ok();
      if (skipped < q.offset) {
        ++skipped;
        return Status::Ok();
      }
      if (out.size() >= q.limit) return Stop();
      out.push_back(row);
      return out.size() < q.limit ? Status::Ok() : Stop();
    };
    if (q.limit == 0) return out;
    Status st;
    if (q.account) {
      st = Scan(snap, Key(kTransferOutBy).U32(*q.account).str(), false,
                [&](std::string_view k, std::string_view) { return consider(ReadBig(k, 5, 8)); });
    } else {
      st = Scan(snap, Key(kTransferOut).str(), false,
                [&](std::string_view k, std::string_view) { return consider(ReadBig(k, 1, 8)); });
    }
    if (!st.ok()) return st;
    return out;
  }

  Result<std::vector<TransferRow>> Deposits(const TransferQuery& q) override {
    Snap snap(db_.get());
    const auto [lo, hi] = TimeBounds(q.start_ms, q.end_ms);
    std::vector<TransferRow> out;
    if (q.limit == 0) return out;
    std::size_t skipped = 0;
    auto consider = [&](std::string_view v) -> Status {
      auto cells = Decode<TransferTuple>(v, "deposit");
      if (!cells.ok()) return cells.status();
      TransferRow row = ReadTransferRow(*cells);
      if (q.asset && row.asset != *q.asset) return Status::Ok();
      if (row.time_ns < lo || row.time_ns > hi) return Status::Ok();
      if (skipped < q.offset) {
        ++skipped;
        return Status::Ok();
      }
      out.push_back(std::move(row));
      return out.size() < q.limit ? Status::Ok() : Stop();
    };
    Status st;
    if (q.account) {
      st = Scan(snap, Key(kDepositBy).U32(*q.account).str(), false,
                [&](std::string_view k, std::string_view) -> Status {
                  std::string v;
                  MB_RETURN_IF_ERROR(Get(snap, Key(kDeposit).U64(ReadBig(k, 5, 8)).str(), &v));
                  return consider(v);
                });
    } else {
      st = Scan(snap, Key(kDeposit).str(), false,
                [&](std::string_view, std::string_view v) { return consider(v); });
    }
    if (!st.ok()) return st;
    return out;
  }

  Result<std::optional<WithdrawalRow>> FindWithdrawal(uint32_t account, uint64_t id,
                                                      std::string_view ref) override {
    Snap snap(db_.get());
    if (id == 0) {
      bool found = false;
      Status st = Scan(snap, Key(kTransferRef).U32(account).Text(ref).str(), false,
                       [&](std::string_view k, std::string_view) {
                         id = ReadBig(k, k.size() - 8, 8);
                         found = true;
                         return Stop();
                       });
      if (!st.ok()) return st;
      if (!found) return std::optional<WithdrawalRow>{};
    }
    auto w = GetWithdrawal(snap, id);
    if (!w.ok()) return w.status();
    if (!w->has_value() || (*w)->held.account != account) return std::optional<WithdrawalRow>{};
    return *w;
  }

  Result<ProjectorState> CommittedState() override { return ReadState(nullptr); }

  Result<std::vector<TradeRecord>> MarketTrades(uint16_t market, uint64_t from_id,
                                                std::size_t limit) override {
    Snap snap(db_.get());
    std::vector<TradeRecord> out;
    if (limit == 0) return out;
    const std::string prefix = Key(kTrade).U16(market).str();
    const bool asc = from_id > 0;
    Status st = ScanIds(snap, prefix, from_id, asc, [&](std::string_view, std::string_view v) {
      auto trade = DecodeTrade(v);
      if (!trade.ok()) return trade.status();
      out.push_back(*trade);
      return out.size() < limit ? Status::Ok() : Stop();
    });
    if (!st.ok()) return st;
    if (!asc) std::reverse(out.begin(), out.end());
    return out;
  }

  Result<uint64_t> FirstTradeFrom(uint16_t market, int64_t time_ns) override {
    Snap snap(db_.get());
    const std::string prefix = Key(kTrade).U16(market).str();
    // The first trade with an id >= id: its id and time (0, 0 when none).
    auto first_from = [&](uint64_t id) -> Result<std::pair<uint64_t, int64_t>> {
      std::pair<uint64_t, int64_t> got{0, 0};
      Status st = ScanIds(snap, prefix, id, true, [&](std::string_view k, std::string_view v) {
        auto trade = DecodeTrade(v);
        if (!trade.ok()) return trade.status();
        got = {ReadBig(k, prefix.size(), 8), trade->time_ns};
        return Stop();
      });
      if (!st.ok()) return st;
      return got;
    };
    // Trade times never go back as ids grow: the smallest id whose first
    // trade is at or after time_ns, by halving [lo, hi].
    uint64_t newest = 0;
    MB_RETURN_IF_ERROR(ScanIds(snap, prefix, 0, false, [&](std::string_view k, std::string_view) {
      newest = ReadBig(k, prefix.size(), 8);
      return Stop();
    }));
    uint64_t lo = 0, hi = newest + 1;  // the answer's id is in [lo, hi]; hi: none
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      auto at = first_from(mid);
      if (!at.ok()) return at.status();
      if (at->first != 0 && at->second >= time_ns) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    if (lo > newest) return uint64_t{0};
    auto at = first_from(lo);
    if (!at.ok()) return at.status();
    return at->first;
  }

  Result<std::vector<marketdata::Kline>> Candles(uint16_t market, uint8_t interval,
                                                 int64_t start_ms, int64_t end_ms,
                                                 std::size_t limit) override {
    Snap snap(db_.get());
    std::vector<marketdata::Kline> out;
    if (limit == 0) return out;
    const std::string prefix = Key(kCandle).U16(market).U8(interval).str();
    const std::string begin =
        start_ms == 0 ? prefix : Key(kCandle).U16(market).U8(interval).I64(start_ms).str();
    const std::string end = end_ms == 0 || end_ms == std::numeric_limits<int64_t>::max()
                                ? PrefixEnd(prefix)
                                : Key(kCandle).U16(market).U8(interval).I64(end_ms + 1).str();
    const bool asc = start_ms != 0;
    Status st = ScanRange(snap, begin, end, asc, [&](std::string_view, std::string_view v) {
      auto cells = Decode<CandleTuple>(v, "candle");
      if (!cells.ok()) return cells.status();
      out.push_back(ReadCandle(*cells).candle);
      return out.size() < limit ? Status::Ok() : Stop();
    });
    if (!st.ok()) return st;
    if (!asc) std::reverse(out.begin(), out.end());
    return out;
  }

  // ---- checks ----

  Result<std::vector<TableDump>> Dump() override {
    Snap snap(db_.get());
    std::vector<TableDump> out;
    // The tables of the SQL stores, in their key order, then the candles.
    struct Table {
      std::string_view name;
      Tag tag;
      Result<std::vector<Cells>> (*decode)(std::string_view);
      int sort_cols;  // leading integer columns that order the rows (0: key order)
    };
    static constexpr Table kTables[] = {
        {"orders", kOrder, [](std::string_view v) { return DecodeOne<OrderTuple>(v, "order"); }, 1},
        {"trades", kTrade, [](std::string_view v) { return DecodeOne<TradeTuple>(v, "trade"); }, 1},
        {"ledger_entries", kLedger,
         [](std::string_view v) { return DecodeAll<LedgerTuple>(v, "ledger"); }, 2},
        {"deposits", kDeposit,
         [](std::string_view v) { return DecodeOne<TransferTuple>(v, "deposit"); }, 0},
        {"withdrawals", kWithdrawal,
         [](std::string_view v) { return DecodeOne<TransferTuple>(v, "withdrawal"); }, 0},
        {"transfers_out", kTransferOut,
         [](std::string_view v) { return DecodeOne<TransferOutTuple>(v, "transfer"); }, 0},
        {"transfers_resolved", kResolved,
         [](std::string_view v) { return DecodeOne<ResolvedTuple>(v, "resolution"); }, 0},
        {"order_lists", kList,
         [](std::string_view v) { return DecodeOne<ListTuple>(v, "order list"); }, 1},
        {"candles", kCandle, [](std::string_view v) { return DecodeOne<CandleTuple>(v, "candle"); },
         0},
    };
    for (const Table& t : kTables) {
      std::vector<std::pair<std::vector<int64_t>, std::string>> rows;
      Status st =
          Scan(snap, std::string(1, t.tag), true, [&](std::string_view, std::string_view v) {
            auto decoded = t.decode(v);
            if (!decoded.ok()) return decoded.status();
            for (const Cells& cells : *decoded) {
              std::vector<int64_t> order;
              for (int c = 0; c < t.sort_cols; ++c) order.push_back(cells.Int(c == 0 ? 0 : 1));
              rows.emplace_back(std::move(order), cells.Line());
            }
            return Status::Ok();
          });
      if (!st.ok()) return st;
      if (t.sort_cols > 0) {
        std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
          for (std::size_t i = 0; i < a.first.size(); ++i) {
            if (a.first[i] != b.first[i]) return Unsigned(a.first[i]) < Unsigned(b.first[i]);
          }
          return false;
        });
      }
      TableDump d;
      d.table = std::string(t.name);
      for (auto& r : rows) d.rows.push_back(std::move(r.second));
      out.push_back(std::move(d));
    }
    return out;
  }

  Result<ProjectionTotals> Totals() override {
    auto dump = Dump();
    if (!dump.ok()) return dump.status();
    ProjectionTotals t;
    for (const TableDump& d : *dump) {
      if (d.table != "candles") *CountOf(t, d.table) = d.rows.size();
    }
    Snap snap(db_.get());
    std::map<std::tuple<uint32_t, uint16_t, uint8_t>, int64_t> sums;
    Status st = Scan(snap, Key(kLedger).str(), true, [&](std::string_view, std::string_view v) {
      auto lines = DecodeAll<LedgerTuple>(v, "ledger");
      if (!lines.ok()) return lines.status();
      for (const Cells& c : *lines) {
        const LedgerRow l = ReadLedgerRow(c);
        sums[{l.account, l.asset, static_cast<uint8_t>(l.bucket)}] += l.delta;
      }
      return Status::Ok();
    });
    if (!st.ok()) return st;
    for (const auto& [k, sum] : sums) {
      t.balances.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), sum});
    }
    return t;
  }

  Result<std::vector<OrderRow>> AllOrderRows() override {
    Snap snap(db_.get());
    std::vector<OrderRow> out;
    Status st = Scan(snap, Key(kOrder).str(), true, [&](std::string_view, std::string_view v) {
      auto cells = Decode<OrderTuple>(v, "order");
      if (!cells.ok()) return cells.status();
      out.push_back(ReadOrderRow(*cells, 0));
      return Status::Ok();
    });
    if (!st.ok()) return st;
    std::sort(out.begin(), out.end(), [](const OrderRow& a, const OrderRow& b) {
      return Raw(a.order.id) < Raw(b.order.id);
    });
    return out;
  }

 private:
  // A consistent view for the reads of one question.
  class Snap {
   public:
    explicit Snap(rocksdb::DB* db) : db_(db), snap_(db->GetSnapshot()) {
      rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);  // as in Commit()
    }
    ~Snap() { db_->ReleaseSnapshot(snap_); }
    Snap(const Snap&) = delete;
    Snap& operator=(const Snap&) = delete;
    rocksdb::ReadOptions Options() const {
      rocksdb::ReadOptions ro;
      ro.snapshot = snap_;
      ro.verify_checksums = true;
      return ro;
    }

   private:
    rocksdb::DB* db_;
    const rocksdb::Snapshot* snap_;
  };

  // The status a scan's visitor returns to end the scan early.
  static Status Stop() { return Status(StatusCode::kOutOfRange, "stop"); }

  // Visits the keys in [begin, end), ascending or descending. (Keys are
  // fixed-width after their prefix, so prefix + id 0 bounds the same keys as
  // the prefix alone.)
  template <class F>
  Status ScanRange(const Snap& snap, const std::string& begin, const std::string& end, bool asc,
                   F&& visit) {
    rocksdb::ReadOptions ro = snap.Options();
    rocksdb::Slice lo(begin), hi(end);
    ro.iterate_lower_bound = &lo;
    ro.iterate_upper_bound = &hi;
    ro.auto_prefix_mode = true;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    if (asc) {
      it->Seek(lo);
    } else {
      it->SeekToLast();  // the last key below the upper bound
    }
    for (; it->Valid(); asc ? it->Next() : it->Prev()) {
      Status st = visit(std::string_view(it->key().data(), it->key().size()),
                        std::string_view(it->value().data(), it->value().size()));
      if (st.code() == StatusCode::kOutOfRange) return Status::Ok();
      if (!st.ok()) return st;
    }
    return FromRocks(it->status(), "scan");
  }

  // The keys prefix + id (+ whatever follows the id) with id >= from_id,
  // ascending or newest first. RocksDB's memtable steps backwards with a
  // search from the top of its skip list for each key, so the newest keys
  // are read with forward scans of id windows, each twice as wide as the one
  // after it, back from the newest id.
  template <class F>
  Status ScanIds(const Snap& snap, const std::string& prefix, uint64_t from_id, bool asc,
                 F&& visit) {
    const std::string end = PrefixEnd(prefix);
    const auto at = [&](uint64_t id) { return prefix + Key::Big(id); };
    if (asc) return ScanRange(snap, at(from_id), end, true, std::forward<F>(visit));
    uint64_t hi = 0;  // one past the newest id
    MB_RETURN_IF_ERROR(ScanRange(snap, at(from_id), end, false, [&](std::string_view k, auto) {
      hi = std::min<uint64_t>(ReadBig(k, prefix.size(), 8), UINT64_MAX - 1) + 1;
      return Stop();
    }));
    // A window holds at most max_rows rows: one that would hold more is
    // halved and read again (an id has at most two keys, maker and taker),
    // so a scan that skips most rows (an old orderId, an old endTime) never
    // holds the whole prefix in memory.
    const std::size_t max_rows = std::max<std::size_t>(options_.scan_window_rows, 4);
    std::vector<std::pair<std::string, std::string>> rows;
    uint64_t window = 64;
    while (hi > from_id) {
      const uint64_t lo = hi - from_id > window ? hi - window : from_id;
      rows.clear();
      bool full = false;
      MB_RETURN_IF_ERROR(
          ScanRange(snap, at(lo), at(hi), true, [&](std::string_view k, std::string_view v) {
            if (rows.size() == max_rows && window > 1) {
              full = true;
              return Stop();
            }
            rows.emplace_back(k, v);
            return Status::Ok();
          }));
      if (full) {
        window /= 2;
        continue;
      }
      for (auto r = rows.rbegin(); r != rows.rend(); ++r) {
        Status st = visit(std::string_view(r->first), std::string_view(r->second));
        if (st.code() == StatusCode::kOutOfRange) return Status::Ok();
        if (!st.ok()) return st;
      }
      hi = lo;
      if (rows.size() < max_rows / 4) window = std::min(window * 2, uint64_t{1} << 62);
    }
    return Status::Ok();
  }

  // Every key that begins with `prefix`, ascending or descending.
  template <class F>
  Status Scan(const Snap& snap, const std::string& prefix, bool asc, F&& visit) {
    return ScanRange(snap, prefix, PrefixEnd(prefix), asc, std::forward<F>(visit));
  }

  Status Get(const Snap& snap, const std::string& key, std::string* value) {
    rocksdb::Status s = db_->Get(snap.Options(), key, value);
    if (s.IsNotFound()) return NotFound("history store: no such row");
    return FromRocks(s, "read");
  }

  Result<std::optional<OrderRow>> GetOrder(const Snap& snap, uint32_t account, uint16_t market,
                                           uint64_t id) {
    std::string v;
    Status st = Get(snap, Key(kOrder).U32(account).U16(market).U64(id).str(), &v);
    if (st.code() == StatusCode::kNotFound) return std::optional<OrderRow>{};
    if (!st.ok()) return st;
    auto cells = Decode<OrderTuple>(v, "order");
    if (!cells.ok()) return cells.status();
    return std::optional<OrderRow>(ReadOrderRow(*cells, 0));
  }

  Result<std::optional<ListRow>> GetList(const Snap& snap, uint32_t account, uint64_t id) {
    std::string v;
    Status st = Get(snap, Key(kList).U32(account).U64(id).str(), &v);
    if (st.code() == StatusCode::kNotFound) return std::optional<ListRow>{};
    if (!st.ok()) return st;
    auto cells = Decode<ListTuple>(v, "order list");
    if (!cells.ok()) return cells.status();
    return std::optional<ListRow>(ReadListRow(*cells));
  }

  Result<std::optional<ListRecord>> FindOrderListIn(const Snap& snap, uint32_t account,
                                                    uint64_t id) {
    auto row = GetList(snap, account, id);
    if (!row.ok()) return row.status();
    if (!row->has_value()) return std::optional<ListRecord>{};
    return std::optional<ListRecord>((*row)->list);
  }

  Result<TradeRecord> GetTrade(const Snap& snap, uint16_t market, uint64_t id) {
    std::string v;
    Status st = Get(snap, Key(kTrade).U16(market).U64(id).str(), &v);
    if (st.code() == StatusCode::kNotFound) {
      return Corruption(fmt::format("history store: a fill names trade {}, which has no row", id));
    }
    if (!st.ok()) return st;
    return DecodeTrade(v);
  }

  static Result<TradeRecord> DecodeTrade(std::string_view v) {
    auto cells = Decode<TradeTuple>(v, "trade");
    if (!cells.ok()) return cells.status();
    return ReadTrade(*cells);
  }

  Result<std::optional<WithdrawalRow>> GetWithdrawal(const Snap& snap, uint64_t id) {
    std::string v;
    Status st = Get(snap, Key(kTransferOut).U64(id).str(), &v);
    if (st.code() == StatusCode::kNotFound) return std::optional<WithdrawalRow>{};
    if (!st.ok()) return st;
    auto cells = Decode<TransferOutTuple>(v, "transfer");
    if (!cells.ok()) return cells.status();
    std::string r;
    st = Get(snap, Key(kResolved).U64(id).str(), &r);
    if (st.code() == StatusCode::kNotFound) {
      cells->AddInt(Small(TransferState::kPending));
      cells->AddInt(0);
      cells->AddInt(0);
    } else if (!st.ok()) {
      return st;
    } else {
      auto res = Decode<ResolvedTuple>(r, "resolution");
      if (!res.ok()) return res.status();
      const bool completed = res->Int(2) != 0;
      cells->AddInt(Small(completed ? TransferState::kCompleted : TransferState::kRefunded));
      cells->AddInt(res->Int(3));
      cells->AddInt(res->Int(4));
    }
    return std::optional<WithdrawalRow>(ReadWithdrawalRow(*cells));
  }

  Result<ProjectorState> ReadState(const Snap* snap) {
    std::string v;
    rocksdb::ReadOptions ro = snap != nullptr ? snap->Options() : rocksdb::ReadOptions();
    rocksdb::Status s = db_->Get(ro, Key(kState).slice(), &v);
    if (s.IsNotFound()) return Corruption("history store: the projector state has no row");
    if (!s.ok()) return FromRocks(s, "reading the projector state");
    auto cells = Decode<StateTuple>(v, "projector state");
    if (!cells.ok()) return cells.status();
    return ReadStateRow(*cells);
  }

  Status WriteState(const ProjectorState& state) {
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    MB_RETURN_IF_ERROR(
        FromRocks(db_->Put(wo, Key(kState).slice(), Encode(Values(state))), "writing the state"));
    return FromRocks(db_->Flush(rocksdb::FlushOptions()), "flush");
  }

  // The batch's rows as one write batch. Orders and lists stored before the
  // batch keep their fixed columns (read back here).
  Status Write(const RowBatch& b, const ProjectorState& state, SortedBatch* wb) {
    // Order events (executionReports as the streams sent them) are not
    // kept: no history question asks for them (the SQL projection keeps them).
    for (const TradeRecord& r : b.trades) {
      // Each side's fill carries the trade's row too, so myTrades reads one
      // key per fill instead of two.
      std::string row = Encode(Values(r));
      wb->Put(Key(kFill).U32(r.maker_account).U16(r.market).U64(r.trade_id).U8(0).str(), row);
      wb->Put(Key(kFill).U32(r.taker_account).U16(r.market).U64(r.trade_id).U8(1).str(), row);
      wb->Put(Key(kTrade).U16(r.market).U64(r.trade_id).str(), std::move(row));
    }
    // One value per account and record: its lines, in line order.
    {
      std::map<std::pair<uint32_t, uint64_t>, std::string> lines;
      for (const LedgerRow& r : b.ledger) {
        std::string& v = lines[{r.account, r.seq}];
        std::apply([&](const auto&... c) { (PutCell(&v, c), ...); }, Values(r));
      }
      for (const auto& [key, v] : lines) {
        wb->Put(Key(kLedger).U32(key.first).U64(key.second).str(), v);
      }
    }
    for (const TransferRow& r : b.deposits) {
      wb->Put(Key(kDeposit).U64(r.transfer_id).str(), Encode(Values(r)));
      wb->Put(Key(kDepositBy).U32(r.account).U64(r.transfer_id).str(), "");
    }
    for (const TransferRow& r : b.withdrawals) {
      wb->Put(Key(kWithdrawal).U64(r.transfer_id).str(), Encode(Values(r)));
    }
    for (const TransferOutRow& r : b.transfers_out) {
      wb->Put(Key(kTransferOut).U64(r.transfer_id).str(), Encode(Values(r)));
      wb->Put(Key(kTransferOutBy).U32(r.account).U64(r.transfer_id).str(), "");
      wb->Put(Key(kTransferRef).U32(r.account).Text(r.ref).U64(r.transfer_id).str(), "");
    }
    for (const TransferResolvedRow& r : b.transfers_resolved) {
      wb->Put(Key(kResolved).U64(r.transfer_id).str(), Encode(Values(r)));
    }
    for (const CandleRow& r : b.candles) {
      wb->Put(Key(kCandle).U16(r.market).U8(r.interval).I64(r.candle.open_time_ms).str(),
              Encode(Values(r)));
    }

    // Orders and lists: the row builder holds each one whole as it stands
    // after the batch, so they are written as they are, without a read. An
    // order gets a client-id entry when it is placed and when an amend
    // renames it (the query checks the order still has that id); it is in the
    // open set while NEW, PARTIALLY_FILLED or PENDING_NEW.
    std::vector<uint64_t> renamed;
    for (const OrderEventRow& e : b.order_events) {
      if (e.exec_type == ExecType::kAmended) renamed.push_back(e.order_id);
    }
    std::vector<uint64_t> written;
    written.reserve(b.orders.size());
    for (const OrderRow& r : b.orders) {
      const OrderRecord& o = r.order;
      const uint32_t account = Raw(o.terms.account);
      const uint16_t market = Raw(o.terms.market);
      const uint64_t id = Raw(o.id);
      const bool placed_now = r.created_seq >= b.first_seq;
      wb->Put(Key(kOrder).U32(account).U16(market).U64(id).str(), Encode(Values(r)));
      if (placed_now || std::find(renamed.begin(), renamed.end(), id) != renamed.end()) {
        wb->Put(
            Key(kOrderClient).U32(account).U16(market).Text(o.client_order_id.view()).U64(id).str(),
            "");
      }
      if (IsOpen(o.status)) {
        wb->Put(Key(kOpenOrder).U64(id).str(),
                Key(kOpenOrder).U32(account).U16(market).str().substr(1));
      } else if (!placed_now) {
        wb->Delete(Key(kOpenOrder).U64(id).str());
      }
      written.push_back(id);
    }
    // A list's pending order placed in this batch is among the rows above
    // (the builder touches it when it places it); one that is not is read
    // back and given its placing time and command.
    for (const PendingPlacedRow& p : b.pending_placed) {
      if (std::find(written.begin(), written.end(), p.order_id) != written.end()) continue;
      Snap snap(db_.get());
      std::string where;
      Status st = Get(snap, Key(kOpenOrder).U64(p.order_id).str(), &where);
      if (!st.ok()) {
        return Corruption(fmt::format("history store: pending order {} is not open", p.order_id));
      }
      auto row = GetOrder(snap, static_cast<uint32_t>(ReadBig(where, 0, 4)),
                          static_cast<uint16_t>(ReadBig(where, 4, 2)), p.order_id);
      if (!row.ok()) return row.status();
      if (!row->has_value()) {
        return Corruption(fmt::format("history store: pending order {} has no row", p.order_id));
      }
      OrderRow placed = **row;
      placed.order.time_ns = p.time_ns;
      placed.created_seq = p.created_seq;
      wb->Put(Key(kOrder)
                  .U32(Raw(placed.order.terms.account))
                  .U16(Raw(placed.order.terms.market))
                  .U64(p.order_id)
                  .str(),
              Encode(Values(placed)));
    }
    for (const ListRow& r : b.lists) {
      const ListRecord& l = r.list;
      const uint32_t account = Raw(l.account);
      wb->Put(Key(kList).U32(account).U64(l.id).str(), Encode(Values(r)));
      if (r.created_seq >= b.first_seq) {
        wb->Put(Key(kListClient).U32(account).Text(l.list_client_order_id.view()).U64(l.id).str(),
                "");
      }
      if (l.status == ListStatus::kExecuting) {
        wb->Put(Key(kOpenList).U64(l.id).str(), Key(kOpenList).U32(account).str().substr(1));
      } else {
        wb->Delete(Key(kOpenList).U64(l.id).str());
      }
    }
    wb->Put(Key(kState).str(), Encode(Values(state)));
    return Status::Ok();
  }

  const engine::EngineConfig& config_;
  const StoreOptions options_;
  struct DbCloser {
    void operator()(rocksdb::DB* db) const { delete db; }
  };
  std::unique_ptr<rocksdb::DB, DbCloser> db_;
  bool failed_ = false;  // writer thread: the last commit failed
};

}  // namespace

Result<std::unique_ptr<Store>> OpenRocksStore(const StoreOptions& options,
                                              const engine::EngineConfig& config) {
  if (options.path.empty()) return InvalidArgument("history store: rocksdb needs a directory");
  auto store = std::make_unique<RocksStore>(options, config);
  MB_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace mb::projection
