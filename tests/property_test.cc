// Property test: the real engine (engine::Engine) and the reference engine
// (tests/reference_engine.*) run the same seeded random command stream and must
// emit identical events, command by command, while every invariant of
// docs/architecture.md ("The domain's invariants") holds after each command; a journal replay, a
// snapshot restore and a second run all reproduce the live engine; the ledger view of the events
// reproduces every balance.
//
//   MB_SEED=<n>                 seed of the command stream (default kDefaultSeed)
//   MB_PROPERTY_COMMANDS=<n>    stream length (default 100000)
//   MB_REPLAY_EVERY=<n>         compare the replayed engine's StateHash every n commands (100;
//                               1 checks after every command but StateHash costs ~0.2 ms)
//   MB_SHRINK=1                 on an event mismatch or a broken invariant, search a small
//                               failing command sequence and print it
//   MB_PROPERTY_CLEAN=1         never put values in the fields an order type ignores or refuses
//                               (MARKET price / tif, LIMIT quote_qty)
//
// Plus hand-written scenarios that pin tricky rules on both engines.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "codec/codec.h"
#include "common/checked.h"
#include "engine/engine.h"
#include "engine/ledger.h"
#include "reference_engine.h"

namespace mb::testing {
namespace {

using engine::Balance;
using engine::CommandType;
using engine::Engine;
using engine::EngineConfig;
using engine::Event;
using engine::EventType;
using engine::ExpireReason;
using engine::MarketStatus;
using engine::OrderType;
using engine::RejectReason;
using engine::Side;
using engine::StpMode;
using engine::TimeInForce;

constexpr uint64_t kDefaultSeed = 0x4d42'5052'4f50'0001;  // "MBPROP" 1
constexpr uint64_t kDefaultCommands = 100'000;
constexpr uint64_t kSnapshotEvery = 10'000;
constexpr uint32_t kAccounts = 50;
constexpr std::size_t kAssets = 3;
constexpr std::size_t kMarkets = 3;

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 0);
}

// ---------------------------------------------------------------------------
// Configuration: the demo's assets and markets (the ticks and lots of
// config/matchbook.toml), with limits small enough that rejects happen, odd fee
// rates so that fees round, and a small client-id memory so that ids recycle.

// BTC, ETH, USDT (scale 8).
// BTCUSDT: tick 0.01 USDT, lot 0.00001 BTC -> npt 10; min notional 10 USDT.
// ETHUSDT: tick 0.01 USDT, lot 0.0001 ETH  -> npt 100; min notional 1 USDT.
// ETHBTC:  tick 0.00001 BTC, lot 0.001 ETH -> npt 1; max 500 lots, min 2 lots.
EngineConfig DemoConfig() {
  EngineConfig c;
  c.assets = {{"BTC", 8}, {"ETH", 8}, {"USDT", 8}};
  engine::MarketSpec btc;
  btc.symbol = "BTCUSDT";
  btc.base = AssetId{0};
  btc.quote = AssetId{2};
  btc.tick_units = 1'000'000;
  btc.lot_units = 1'000;
  btc.min_qty = Qty{1};
  btc.max_qty = Qty{10'000'000};
  btc.max_price = Price{10'000'000'000};
  btc.min_notional = Amount{1'000'000'000};
  btc.maker_fee_bps = 7;
  btc.taker_fee_bps = 13;
  engine::MarketSpec eth;
  eth.symbol = "ETHUSDT";
  eth.base = AssetId{1};
  eth.quote = AssetId{2};
  eth.tick_units = 1'000'000;
  eth.lot_units = 10'000;
  eth.min_qty = Qty{1};
  eth.max_qty = Qty{50'000};
  eth.max_price = Price{1'000'000'000};
  eth.min_notional = Amount{100'000'000};
  eth.maker_fee_bps = 0;
  eth.taker_fee_bps = 10;
  engine::MarketSpec ethbtc;
  ethbtc.symbol = "ETHBTC";
  ethbtc.base = AssetId{1};
  ethbtc.quote = AssetId{0};
  ethbtc.tick_units = 1'000;
  ethbtc.lot_units = 100'000;
  ethbtc.min_qty = Qty{2};
  ethbtc.max_qty = Qty{500};
  ethbtc.max_price = Price{10'000'000};
  ethbtc.min_notional = Amount{20'000};
  ethbtc.maker_fee_bps = 3;
  ethbtc.taker_fee_bps = 25;
  c.markets = {btc, eth, ethbtc};
  c.max_accounts = kAccounts;
  c.fee_account = AccountId{0};
  c.expected_open_orders = 4096;
  c.client_id_memory = 64;  // small, so that reserved ids are evicted and reusable
  // MB_PRICE_WINDOW narrows the engine's direct-indexed price window so that
  // levels spill to its ordered map and the window re-centres (the reference
  // engine has no such structure; events must not change).
  if (const char* w = std::getenv("MB_PRICE_WINDOW")) {
    c.price_window_ticks = static_cast<uint32_t>(std::strtoul(w, nullptr, 10));
  }
  return c;
}

EngineConfig ValidConfig() {
  EngineConfig c = DemoConfig();
  Status st = c.Validate();
  MB_CHECK(st.ok());
  return c;
}

// ---------------------------------------------------------------------------
// Field lists: one place that names every field of every command and event,
// used for equality, printing and hashing.

template <class T>
struct Fields;

#define MB_FIELDS(Type, names, ...)                                  \
  template <>                                                        \
  struct Fields<Type> {                                              \
    static constexpr std::string_view kType = #Type;                 \
    static constexpr std::string_view kNames = names;                \
    static auto Tie(const Type& x) { return std::tie(__VA_ARGS__); } \
  }

MB_FIELDS(engine::PlaceOrder,
          "account,market,side,type,tif,stp,price,qty,quote_qty,client_order_id,stop_price,"
          "trailing_delta,iceberg_qty",
          x.account, x.market, x.side, x.type, x.tif, x.stp, x.price, x.qty, x.quote_qty,
          x.client_order_id, x.stop_price, x.trailing_delta, x.iceberg_qty);
MB_FIELDS(engine::CancelOrder, "account,market,order_id,orig_client_order_id,restriction",
          x.account, x.market, x.order_id, x.orig_client_order_id, x.restriction);
MB_FIELDS(engine::CancelAll, "account,market", x.account, x.market);
MB_FIELDS(engine::AmendOrder,
          "account,market,order_id,orig_client_order_id,new_price,new_qty,keep_priority,"
          "new_client_order_id",
          x.account, x.market, x.order_id, x.orig_client_order_id, x.new_price, x.new_qty,
          x.keep_priority, x.new_client_order_id);
MB_FIELDS(engine::Deposit, "account,asset,amount,ref", x.account, x.asset, x.amount, x.ref);
MB_FIELDS(engine::Withdraw, "account,asset,amount,ref", x.account, x.asset, x.amount, x.ref);
MB_FIELDS(engine::SetMarketStatus, "market,status", x.market, x.status);
MB_FIELDS(engine::CancelReplace, "cancel,place,mode", x.cancel, x.place, x.mode);
MB_FIELDS(engine::TransferOut, "account,asset,amount,fee,ref,address", x.account, x.asset, x.amount,
          x.fee, x.ref, x.address);
MB_FIELDS(engine::ListOrder,
          "side,type,tif,trailing_delta,price,qty,stop_price,iceberg_qty,client_order_id", x.side,
          x.type, x.tif, x.trailing_delta, x.price, x.qty, x.stop_price, x.iceberg_qty,
          x.client_order_id);
MB_FIELDS(engine::PlaceOrderList,
          "account,market,type,stp,list_client_order_id,orders[0],orders[1],orders[2]", x.account,
          x.market, x.type, x.stp, x.list_client_order_id, x.orders[0], x.orders[1], x.orders[2]);
MB_FIELDS(engine::CancelOrderList, "account,market,list_id,list_client_order_id", x.account,
          x.market, x.list_id, x.list_client_order_id);
MB_FIELDS(engine::ResolveTransfer, "transfer_id,completed,reason", x.transfer_id, x.completed,
          x.reason);

MB_FIELDS(engine::OrderAccepted,
          "order_id,account,market,side,type,tif,stp,price,qty,quote_qty,locked,client_order_id",
          x.order_id, x.terms.account, x.terms.market, x.terms.side, x.terms.type, x.terms.tif,
          x.terms.stp, x.terms.price, x.terms.qty, x.quote_qty, x.locked, x.client_order_id);
MB_FIELDS(engine::Rejected, "command,reason,account,market,order_id,existing_id,client_order_id",
          x.command, x.reason, x.account, x.market, x.order_id, x.existing_id, x.client_order_id);
MB_FIELDS(engine::Trade,
          "trade_id,market,taker_side,maker_order_id,taker_order_id,maker_account,taker_account,"
          "price,qty,base_qty,notional,maker_fee,taker_fee,taker_released,maker_filled,"
          "taker_filled",
          x.trade_id, x.market, x.taker_side, x.maker_order_id, x.taker_order_id, x.maker_account,
          x.taker_account, x.price, x.qty, x.base_qty, x.notional, x.maker_fee, x.taker_fee,
          x.taker_released, x.maker_filled, x.taker_filled);
MB_FIELDS(engine::OrderRested, "order_id,account,market,side,remaining,released", x.order_id,
          x.account, x.market, x.side, x.remaining, x.released);
MB_FIELDS(engine::OrderCanceled, "order_id,account,market,side,remaining,released", x.order_id,
          x.account, x.market, x.side, x.remaining, x.released);
MB_FIELDS(engine::OrderExpired, "order_id,account,market,side,reason,remaining,released",
          x.order_id, x.account, x.market, x.side, x.reason, x.remaining, x.released);
MB_FIELDS(engine::OrderAmended,
          "order_id,account,market,side,new_price,new_qty,new_remaining,lock_delta,keeps_priority",
          x.order_id, x.account, x.market, x.side, x.new_price, x.new_qty, x.new_remaining,
          x.lock_delta, x.keeps_priority);
MB_FIELDS(engine::Deposited, "transfer_id,account,asset,amount,ref", x.transfer_id, x.account,
          x.asset, x.amount, x.ref);
MB_FIELDS(engine::Withdrawn, "transfer_id,account,asset,amount,ref", x.transfer_id, x.account,
          x.asset, x.amount, x.ref);
MB_FIELDS(engine::MarketStatusChanged, "market,status", x.market, x.status);
MB_FIELDS(engine::ClientOrderIdChanged, "order_id,account,market,client_order_id", x.order_id,
          x.account, x.market, x.client_order_id);
MB_FIELDS(engine::TransferHeld, "transfer_id,account,asset,amount,fee,ref,address", x.transfer_id,
          x.account, x.asset, x.amount, x.fee, x.ref, x.address);
MB_FIELDS(engine::TransferCompleted, "transfer_id,account,asset,amount,fee", x.transfer_id,
          x.account, x.asset, x.amount, x.fee);
MB_FIELDS(engine::TransferRefunded, "transfer_id,account,asset,amount,reason", x.transfer_id,
          x.account, x.asset, x.amount, x.reason);
MB_FIELDS(engine::OrderArmed, "order_id,account,market,side,stop_price,trailing_delta", x.order_id,
          x.account, x.market, x.side, x.stop_price, x.trailing_delta);
MB_FIELDS(engine::OrderTriggered, "order_id,account,market,side,last_price,lock_delta", x.order_id,
          x.account, x.market, x.side, x.last_price, x.lock_delta);
MB_FIELDS(engine::IcebergAccepted, "order_id,account,market,side,slice", x.order_id, x.account,
          x.market, x.side, x.slice);
MB_FIELDS(engine::IcebergRefilled, "order_id,account,market,side,price,visible,hidden", x.order_id,
          x.account, x.market, x.side, x.price, x.visible, x.hidden);
MB_FIELDS(engine::ListAccepted,
          "list_id,account,market,type,list_client_order_id,order_ids[0],order_ids[1],order_ids[2]",
          x.list_id, x.account, x.market, x.type, x.list_client_order_id, x.order_ids[0],
          x.order_ids[1], x.order_ids[2]);
MB_FIELDS(engine::OrderPending,
          "order_id,list_id,account,market,side,type,tif,stp,price,qty,stop_price,trailing_delta,"
          "iceberg_qty,client_order_id",
          x.order_id, x.list_id, x.terms.account, x.terms.market, x.terms.side, x.terms.type,
          x.terms.tif, x.terms.stp, x.terms.price, x.terms.qty, x.stop_price, x.trailing_delta,
          x.iceberg_qty, x.client_order_id);
MB_FIELDS(engine::ListDone, "list_id,account,market", x.list_id, x.account, x.market);
MB_FIELDS(engine::AuthChange, "kind,account,permissions,ed25519,created_ms,subject,secret", x.kind,
          x.account, x.permissions, x.ed25519, x.created_ms, x.subject, x.secret);
MB_FIELDS(engine::AuthChanged, "kind,account,permissions,ed25519,created_ms,subject,secret", x.kind,
          x.account, x.permissions, x.ed25519, x.created_ms, x.subject, x.secret);
MB_FIELDS(engine::AddAsset, "symbol,scale", x.symbol, x.scale);
MB_FIELDS(engine::AssetAdded, "asset,symbol,scale", x.asset, x.symbol, x.scale);
MB_FIELDS(engine::AddMarket,
          "symbol,base,quote,tick_units,lot_units,min_qty,max_qty,max_price,min_notional,"
          "maker_fee_bps,taker_fee_bps,status",
          x.symbol, x.base, x.quote, x.tick_units, x.lot_units, x.min_qty, x.max_qty, x.max_price,
          x.min_notional, x.maker_fee_bps, x.taker_fee_bps, x.status);
MB_FIELDS(engine::MarketAdded,
          "market,symbol,base,quote,tick_units,lot_units,min_qty,max_qty,max_price,min_notional,"
          "maker_fee_bps,taker_fee_bps,status",
          x.market, x.symbol, x.base, x.quote, x.tick_units, x.lot_units, x.min_qty, x.max_qty,
          x.max_price, x.min_notional, x.maker_fee_bps, x.taker_fee_bps, x.status);

#undef MB_FIELDS

template <class T>
constexpr std::size_t CountNames() {
  std::size_t n = 1;
  for (char c : Fields<T>::kNames) n += c == ',' ? 1 : 0;
  return n;
}

template <class T>
constexpr bool kNamesMatch =
    CountNames<T>() == std::tuple_size_v<decltype(Fields<T>::Tie(std::declval<const T&>()))>;

// Counts an aggregate's fields: the most initializers T{...} accepts. Guards
// the lists above against a field added to a header and not to them.
struct AnyField {
  template <class U>
  constexpr operator U() const noexcept;  // NOLINT(google-explicit-constructor): unevaluated only
};
template <class T, class... A>
constexpr std::size_t FieldCount() {
  if constexpr (requires { T{std::declval<A>()..., AnyField{}}; }) {
    return FieldCount<T, A..., AnyField>();
  } else {
    return sizeof...(A);
  }
}

// An embedded OrderTerms (`terms`) is listed field by field in its place.
template <class T>
constexpr std::size_t ListedFieldCount() {
  if constexpr (requires(const T& x) { x.terms; }) {
    return FieldCount<T>() - 1 + FieldCount<engine::OrderTerms>();
  } else {
    return FieldCount<T>();
  }
}

template <class... Ts>
constexpr bool AllNamesMatch(std::variant<Ts...>*) {
  return ((kNamesMatch<Ts> && CountNames<Ts>() == ListedFieldCount<Ts>()) && ...);
}
static_assert(FieldCount<engine::Trade>() == 16 && FieldCount<engine::OrderRested>() == 6);
static_assert(AllNamesMatch(static_cast<engine::EventBody*>(nullptr)));
static_assert(AllNamesMatch(static_cast<engine::CommandBody*>(nullptr)));

template <class>
struct IsFixed : std::false_type {};
template <class Tag>
struct IsFixed<Fixed<Tag>> : std::true_type {};
template <class>
struct IsFixedString : std::false_type {};
template <std::size_t N>
struct IsFixedString<FixedString<N>> : std::true_type {};

template <class T>
void PrintStruct(std::ostream& os, const T& x);

template <class V>
void PrintValue(std::ostream& os, const V& v) {
  if constexpr (std::is_same_v<V, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (std::is_enum_v<V>) {
    if constexpr (requires { engine::ToString(v); }) {
      os << engine::ToString(v);
      os << '(' << static_cast<uint64_t>(Raw(v)) << ')';
    } else {
      os << static_cast<uint64_t>(Raw(v));
    }
  } else if constexpr (IsFixed<V>::value) {
    os << v.value;
  } else if constexpr (IsFixedString<V>::value) {
    os << '"' << v.view() << '"';
  } else if constexpr (requires { Fields<V>::kNames; }) {
    PrintStruct(os, v);  // a command inside a command (CancelReplace)
  } else {
    os << v;
  }
}

template <class T>
void PrintStruct(std::ostream& os, const T& x) {
  os << Fields<T>::kType.substr(Fields<T>::kType.rfind(':') + 1) << '{';
  std::string_view names = Fields<T>::kNames;
  bool first = true;
  std::apply(
      [&](const auto&... v) {
        auto one = [&](const auto& value) {
          const std::size_t comma = names.find(',');
          if (!first) os << ", ";
          first = false;
          os << names.substr(0, comma) << '=';
          PrintValue(os, value);
          names = comma == std::string_view::npos ? std::string_view{} : names.substr(comma + 1);
        };
        (one(v), ...);
      },
      Fields<T>::Tie(x));
  os << '}';
}

std::string ToText(const engine::Command& c) {
  std::ostringstream os;
  os << "t=" << c.timestamp_ns << ' ';
  std::visit([&](const auto& body) { PrintStruct(os, body); }, c.body);
  return os.str();
}

std::string ToText(const Event& e) {
  std::ostringstream os;
  os << "seq=" << Raw(e.seq) << " t=" << e.timestamp_ns << ' ';
  std::visit([&](const auto& body) { PrintStruct(os, body); }, e.body);
  return os.str();
}

std::string ToText(const std::vector<Event>& events) {
  std::string s;
  for (const Event& e : events) s += "    " + ToText(e) + "\n";
  if (events.empty()) s = "    (no events)\n";
  return s;
}

bool SameEvent(const Event& a, const Event& b) {
  if (a.seq != b.seq || a.timestamp_ns != b.timestamp_ns || a.body.index() != b.body.index()) {
    return false;
  }
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        return Fields<T>::Tie(x) == Fields<T>::Tie(std::get<T>(b.body));
      },
      a.body);
}

bool SameEvents(const std::vector<Event>& a, const std::vector<Event>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!SameEvent(a[i], b[i])) return false;
  }
  return true;
}

// FNV-1a over every field of every event, in a fixed little-endian layout:
// equal hashes mean byte-identical event streams (up to collisions).
class EventHasher {
 public:
  void Add(const Event& e) {
    U64(Raw(e.seq));
    U64(static_cast<uint64_t>(e.timestamp_ns));
    U64(e.body.index());
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          std::apply([&](const auto&... v) { (Value(v), ...); }, Fields<T>::Tie(x));
        },
        e.body);
  }
  uint64_t value() const { return h_; }

 private:
  void Byte(uint8_t b) {
    h_ ^= b;
    h_ *= 0x100000001b3ULL;
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) Byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  template <class V>
  void Value(const V& v) {
    if constexpr (std::is_same_v<V, bool>) {
      Byte(v ? 1 : 0);
    } else if constexpr (std::is_enum_v<V>) {
      U64(static_cast<uint64_t>(Raw(v)));
    } else if constexpr (IsFixed<V>::value) {
      U64(static_cast<uint64_t>(v.value));
    } else if constexpr (IsFixedString<V>::value) {
      Byte(v.len);
      for (char c : v.view()) Byte(static_cast<uint8_t>(c));
    } else {
      U64(static_cast<uint64_t>(v));
    }
  }
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

// ---------------------------------------------------------------------------
// The random command stream. It looks at the reference engine's state to aim
// at open orders, own orders (self-trades), used client ids and references.

class Generator {
 public:
  Generator(uint64_t seed, const EngineConfig& config, bool dirty)
      : rng_(seed), config_(config), dirty_(dirty) {}

  engine::Command Next(const ReferenceEngine& ref) {
    engine::Command c;
    ts_ += R(1, 5000);
    c.timestamp_ns = ts_;
    c.body = Body(ref);
    ++count_;
    return c;
  }

  // Remembers ids the engines handed out, to aim at them later.
  void Observe(const std::vector<Event>& events) {
    for (const Event& e : events) {
      if (const auto* a = std::get_if<engine::OrderAccepted>(&e.body)) {
        Remember(&recent_orders_, &recent_next_, a->order_id, 512);
      }
      if (const auto* c = std::get_if<engine::TransferCompleted>(&e.body)) {
        Remember(&resolved_, &resolved_next_, c->transfer_id, 128);
      }
      if (const auto* r = std::get_if<engine::TransferRefunded>(&e.body)) {
        Remember(&resolved_, &resolved_next_, r->transfer_id, 128);
      }
    }
  }

 private:
  // Uniform in [0, n).
  uint64_t U(uint64_t n) { return rng_() % n; }
  // Uniform in [lo, hi].
  int64_t R(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(U(static_cast<uint64_t>(hi - lo) + 1));
  }
  bool P(uint64_t per_mille) { return U(1000) < per_mille; }
  // A ring of the last `cap` values.
  template <class T>
  static void Remember(std::vector<T>* v, std::size_t* next, T x, std::size_t cap) {
    if (v->size() < cap) {
      v->push_back(x);
    } else {
      (*v)[*next % cap] = x;
    }
    ++*next;
  }
  template <class T>
  const T& Pick(const std::vector<T>& v) {
    return v[U(v.size())];
  }

  static int64_t Mid(std::size_t m) {
    static constexpr std::array<int64_t, kMarkets> kMid = {3'000'000, 200'000, 6'000};
    return kMid[m];
  }
  Price NearPrice(std::size_t m) { return Price{Mid(m) + R(-8, 8)}; }
  Qty NormalQty(std::size_t m) {
    if (P(30)) return Qty{R(400, 3000)};  // sweeps several levels
    static constexpr std::array<int64_t, kMarkets> kMax = {400, 300, 560};
    return Qty{R(1, kMax[m])};
  }
  Amount QuoteBudget(std::size_t m) {
    static constexpr std::array<int64_t, kMarkets> kLo = {1'000'000'000, 100'000'000, 20'000};
    static constexpr std::array<int64_t, kMarkets> kHi = {30'000'000'000, 10'000'000'000,
                                                          3'000'000};
    if (P(30)) return Amount{R(1, kLo[m])};  // below min notional
    return Amount{R(kLo[m], kHi[m])};
  }
  AccountId Trader() { return AccountId{static_cast<uint32_t>(R(1, kAccounts - 1))}; }
  MarketId Market() { return MarketId{static_cast<uint16_t>(U(kMarkets))}; }
  StpMode Stp() {
    const uint64_t r = U(10);
    if (r < 4) return StpMode::kNone;
    if (r < 6) return StpMode::kExpireTaker;
    if (r < 8) return StpMode::kExpireMaker;
    return StpMode::kExpireBoth;
  }

  ClientOrderId FreshCid(AccountId a) {
    ClientOrderId cid =
        ClientOrderId::From("c" + std::to_string(Raw(a)) + "-" + std::to_string(next_cid_++));
    return cid;
  }
  ClientOrderId NewOrderCid(AccountId a) {
    auto& used = cids_[a];
    if (!used.empty() && P(150)) return Pick(used);  // duplicate on purpose
    ClientOrderId cid;
    if (P(50)) {
      cid = ClientOrderId::From("shared-" + std::to_string(U(8)));  // same id, other accounts
    } else {
      cid = FreshCid(a);
    }
    if (used.size() < 24) {
      used.push_back(cid);
    } else {
      used[U(used.size())] = cid;
    }
    return cid;
  }

  TransferRef NewRef() {
    if (!refs_.empty() && P(70)) return Pick(refs_);  // duplicate on purpose
    TransferRef r = TransferRef::From("tx-" + std::to_string(next_ref_++));
    if (refs_.size() < 256) {
      refs_.push_back(r);
    } else {
      refs_[U(refs_.size())] = r;
    }
    return r;
  }

  // A random open order, if any (optionally of one market).
  const RefOrder* AnyOpen(const ReferenceEngine& ref, std::optional<MarketId> market) {
    std::vector<OrderId> ids = ref.OpenOrderIds();
    if (ids.empty()) return nullptr;
    for (int tries = 0; tries < 8; ++tries) {
      const RefOrder* o = ref.FindOrder(Pick(ids));
      if (!market || o->market == *market) return o;
    }
    return nullptr;
  }

  engine::CommandBody Body(const ReferenceEngine& ref) {
    // Warm-up: fund every trader in every asset.
    const uint64_t warmup = (kAccounts - 1) * kAssets;
    if (count_ < warmup) {
      engine::Deposit d;
      d.account = AccountId{static_cast<uint32_t>(1 + count_ / kAssets)};
      d.asset = AssetId{static_cast<uint16_t>(count_ % kAssets)};
      d.amount = FundingAmount(d.asset);
      d.ref = TransferRef::From("tx-" + std::to_string(next_ref_++));
      return d;
    }
    // A market that is not trading goes back to trading after a while.
    for (std::size_t m = 0; m < kMarkets; ++m) {
      if (ref.market_status(MarketId{static_cast<uint16_t>(m)}) != MarketStatus::kTrading &&
          P(25)) {
        return engine::SetMarketStatus{MarketId{static_cast<uint16_t>(m)}, MarketStatus::kTrading};
      }
    }
    if (P(30)) return ListCmd(ref);
    if (P(15)) return AtList(ref);
    const uint64_t roll = U(1000);
    if (roll < 300) return Limit(ref, TimeInForce::kGtc);
    if (roll < 345) return Limit(ref, TimeInForce::kIoc);
    if (roll < 380) return Limit(ref, TimeInForce::kFok);
    if (roll < 435) return Maker(ref);
    if (roll < 470) return MarketOrder(ref, false);
    if (roll < 505) return MarketOrder(ref, true);
    if (roll < 590) return StopOrder(ref);
    if (roll < 680) return Cancel(ref);
    if (roll < 695) return CancelAllCmd(ref);
    if (roll < 780) return Amend(ref);
    if (roll < 800) return CancelReplaceCmd(ref);
    if (roll < 815) return AtWaiting(ref);
    if (roll < 855) return DepositCmd(ref);
    if (roll < 885) return WithdrawCmd(ref);
    if (roll < 888) return StatusCmd();
    if (roll < 915) return TransferOutCmd(ref);
    if (roll < 945) return ResolveTransferCmd(ref);
    return BadInput(ref);
  }

  Amount FundingAmount(AssetId asset) {
    switch (Raw(asset)) {
      case 0:
        return Amount{R(5'000'000, 2'000'000'000)};  // 0.05 .. 20 BTC
      case 1:
        return Amount{R(50'000'000, 20'000'000'000)};  // 0.5 .. 200 ETH
      default:
        return Amount{R(10'000'000'000, 20'000'000'000'000)};  // 100 .. 200k USDT
    }
  }

  // A new order's common fields; sometimes aimed at an own resting order of
  // the opposite side so that self-trade prevention triggers.
  engine::PlaceOrder Base(const ReferenceEngine& ref) {
    engine::PlaceOrder p;
    p.market = Market();
    p.side = P(500) ? Side::kBuy : Side::kSell;
    p.account = Trader();
    p.stp = Stp();
    p.price = NearPrice(Raw(p.market));
    if (P(800)) {  // passive: builds depth behind the touch
      const int64_t away = R(0, 30);
      p.price = Price{Mid(Raw(p.market)) + (p.side == Side::kBuy ? -away : away)};
    }
    p.qty = NormalQty(Raw(p.market));
    if (P(120)) {  // aimed at an own order across the spread: self-trade prevention
      std::vector<RefOrder> opp = ref.Orders(p.market, engine::Opposite(p.side));
      if (!opp.empty()) {
        const RefOrder& o = opp[U(std::min<std::size_t>(opp.size(), 6))];  // near the top
        p.account = o.account;
        p.price = Price{o.price.value + (p.side == Side::kBuy ? R(0, 3) : -R(0, 3))};
      }
    }
    if (P(500)) p.client_order_id = NewOrderCid(p.account);
    // An iceberg (refused but on a GTC LIMIT / LIMIT_MAKER, or when its
    // slice is not below the quantity).
    if (P(25)) p.iceberg_qty = Qty{R(1, std::max<int64_t>(1, p.qty.value / 3))};
    return p;
  }

  engine::PlaceOrder Limit(const ReferenceEngine& ref, TimeInForce tif) {
    engine::PlaceOrder p = Base(ref);
    p.type = OrderType::kLimit;
    p.tif = tif;
    if (tif == TimeInForce::kGtc && P(45) && p.qty.value >= 2) {
      p.iceberg_qty = Qty{R(1, std::max<int64_t>(1, p.qty.value / 4))};
    }
    if (dirty_ && P(30)) p.quote_qty = Amount{R(1, 1'000'000)};
    return p;
  }

  engine::PlaceOrder Maker(const ReferenceEngine& ref) {
    engine::PlaceOrder p = Base(ref);
    p.type = OrderType::kLimitMaker;
    p.tif = P(950) ? TimeInForce::kGtc : (P(500) ? TimeInForce::kIoc : TimeInForce::kFok);
    // Post-only orders mostly sit just outside the spread.
    const std::size_t m = Raw(p.market);
    if (P(700)) {
      p.price = Price{p.side == Side::kBuy ? Mid(m) - R(0, 10) : Mid(m) + R(0, 10)};
    }
    return p;
  }

  engine::PlaceOrder MarketOrder(const ReferenceEngine& ref, bool by_quote) {
    engine::PlaceOrder p = Base(ref);
    p.type = OrderType::kMarket;
    p.tif = TimeInForce::kIoc;
    if (dirty_) {
      if (P(200)) p.tif = static_cast<TimeInForce>(U(3));
      if (P(800)) p.price = Price{0};
    } else {
      p.price = Price{0};
    }
    if (by_quote) {
      p.qty = Qty{0};
      p.quote_qty = QuoteBudget(Raw(p.market));
      if (P(100)) {
        // A budget that buys whole lots at the best price: filled exactly.
        auto best = p.side == Side::kBuy ? ref.BestAsk(p.market) : ref.BestBid(p.market);
        if (best) {
          p.quote_qty =
              Amount{best->value * config_.markets[Raw(p.market)].notional_per_tick_lot * R(1, 5)};
        }
      }
    }
    return p;
  }

  // Whether a stop of this type and side waits for the price to rise to its
  // stop price (Binance's table: STOP_LOSS* BUY, TAKE_PROFIT* SELL).
  static bool Rises(OrderType type, Side side) {
    const bool stop_loss = type == OrderType::kStopLoss || type == OrderType::kStopLossLimit;
    return stop_loss == (side == Side::kBuy);
  }

  // The price stops are placed around: the last trade price, unless there is
  // none or a sweep left it far from where the book trades.
  int64_t StopAnchor(const ReferenceEngine& ref, MarketId market) {
    const int64_t last = ref.last_price(market).value;
    const int64_t mid = Mid(Raw(market));
    return last != 0 && last > mid - 40 && last < mid + 40 ? last : mid;
  }

  // A trailing delta that the market's price moves can reach: a tick is
  // ~0.003 bps of BTCUSDT, ~0.05 of ETHUSDT and ~1.7 of ETHBTC; sometimes any
  // valid delta.
  int32_t TrailingDelta(MarketId market) {
    if (P(100)) return static_cast<int32_t>(R(1, 9'999));
    switch (Raw(market)) {
      case 2:  // multiples of 5 bps put the trigger exactly on a tick when the best price is 6000
        return static_cast<int32_t>(P(400) ? 5 * R(1, 5) : R(1, 25));
      case 1:
        return static_cast<int32_t>(R(1, 2));
      default:
        return 1;
    }
  }

  // A STOP_LOSS, STOP_LOSS_LIMIT, TAKE_PROFIT or TAKE_PROFIT_LIMIT order of
  // either side: a stop price a few ticks from the last price, mostly not yet
  // met (sometimes already met: rejected), a trailing delta on some (with an
  // activation price or without a stop price).
  engine::PlaceOrder StopOrder(const ReferenceEngine& ref) {
    engine::PlaceOrder p = Base(ref);
    static constexpr std::array<OrderType, 4> kTypes = {
        OrderType::kStopLoss, OrderType::kStopLossLimit, OrderType::kTakeProfit,
        OrderType::kTakeProfitLimit};
    p.type = kTypes[U(kTypes.size())];
    const bool limit = p.type == OrderType::kStopLossLimit || p.type == OrderType::kTakeProfitLimit;
    const bool rise = Rises(p.type, p.side);
    const int64_t anchor = StopAnchor(ref, p.market);
    const int64_t ahead = P(120) ? -R(0, 3) : R(1, 12);
    p.stop_price = Price{anchor + (rise ? ahead : -ahead)};
    if (P(300)) {
      p.trailing_delta = TrailingDelta(p.market);
      if (P(450)) p.stop_price = Price{0};
    }
    if (limit) {
      const uint64_t r = U(10);
      p.tif = r < 6 ? TimeInForce::kGtc : (r < 8 ? TimeInForce::kIoc : TimeInForce::kFok);
      if (P(700)) {  // near where it triggers, mostly marketable then
        const int64_t at = p.stop_price.value != 0 ? p.stop_price.value : anchor;
        const int64_t slack = R(-4, 10);
        p.price = Price{at + (p.side == Side::kBuy ? slack : -slack)};
      }
    } else {
      p.tif = TimeInForce::kIoc;
      p.price = Price{0};
      if (dirty_) {  // ignored, as a MARKET order's
        if (P(150)) p.tif = static_cast<TimeInForce>(U(3));
        if (P(150)) p.price = NearPrice(Raw(p.market));
      }
      if (p.side == Side::kBuy && P(250)) {
        // The poorest of a few traders: when it triggers, the book walk may
        // cost more than it has.
        AccountId poorest = p.account;
        const AssetId quote = config_.markets[Raw(p.market)].quote;
        for (int i = 0; i < 4; ++i) {
          const AccountId a = Trader();
          if (ref.balance(a, quote).available < ref.balance(poorest, quote).available) poorest = a;
        }
        p.account = poorest;
        if (P(300)) p.qty = Qty{R(1'000, 20'000)};
      }
    }
    return p;
  }

  // --- order lists ---

  ClientOrderId ListCid(AccountId a) {
    if (!list_cids_.empty() && P(120)) return Pick(list_cids_);  // perhaps an open list's
    ClientOrderId c =
        ClientOrderId::From("L" + std::to_string(Raw(a)) + "-" + std::to_string(next_cid_++));
    Remember(&list_cids_, &list_cids_next_, c, 64);
    return c;
  }

  // A stop leg of a list: stop-market or stop-limit at `stop`, sometimes
  // trailing.
  void StopLeg(MarketId m, Side side, OrderType market_type, OrderType limit_type, int64_t stop,
               engine::ListOrder* o) {
    const bool limit = P(600);
    o->side = side;
    o->type = limit ? limit_type : market_type;
    o->stop_price = Price{stop};
    o->tif = TimeInForce::kIoc;
    o->price = Price{0};
    if (limit) {
      const uint64_t r = U(10);
      o->tif = r < 8 ? TimeInForce::kGtc : (r < 9 ? TimeInForce::kIoc : TimeInForce::kFok);
      const int64_t slack = R(-2, 6);
      o->price = Price{stop + (side == Side::kBuy ? slack : -slack)};
    }
    if (P(120)) {
      o->trailing_delta = TrailingDelta(m);
      if (P(400)) o->stop_price = Price{0};
    }
  }

  // A LIMIT_MAKER leg just behind the touch (or around the anchor).
  void MakerLeg(const ReferenceEngine& ref, MarketId m, Side side, int64_t fallback,
                engine::ListOrder* o, bool far = false) {
    o->side = side;
    o->type = OrderType::kLimitMaker;
    o->tif = TimeInForce::kGtc;
    auto opp = side == Side::kBuy ? ref.BestAsk(m) : ref.BestBid(m);
    o->price = Price{fallback};
    if (opp && !far && P(700)) {
      o->price = Price{opp->value + (side == Side::kBuy ? -R(1, 3) : R(1, 3))};
    }
    if (P(80) && o->qty.value >= 2) o->iceberg_qty = Qty{R(1, o->qty.value - 1)};
  }

  // An OCO pair of `side` around the market's last price: above, below.
  // `far`: out of reach for a while, so that lists stay open across snapshots.
  void OcoLegs(const ReferenceEngine& ref, MarketId m, Side side, Qty qty, engine::ListOrder* above,
               engine::ListOrder* below, bool far) {
    const int64_t anchor = StopAnchor(ref, m);
    const int64_t up = anchor + (far ? R(150, 400) : R(1, 10));
    const int64_t down = anchor - (far ? R(150, 400) : R(1, 10));
    above->qty = below->qty = qty;
    if (side == Side::kSell) {
      if (P(550)) {
        MakerLeg(ref, m, side, up, above, far);
      } else {
        StopLeg(m, side, OrderType::kTakeProfit, OrderType::kTakeProfitLimit, up, above);
      }
      StopLeg(m, side, OrderType::kStopLoss, OrderType::kStopLossLimit, down, below);
    } else {
      StopLeg(m, side, OrderType::kStopLoss, OrderType::kStopLossLimit, up, above);
      if (P(550)) {
        MakerLeg(ref, m, side, down, below, far);
      } else {
        StopLeg(m, side, OrderType::kTakeProfit, OrderType::kTakeProfitLimit, down, below);
      }
    }
  }

  // Any order that a filled working order may place.
  engine::ListOrder PendingOrder(const ReferenceEngine& ref, MarketId m, Side side) {
    engine::ListOrder o;
    o.side = side;
    static constexpr std::array<int64_t, kMarkets> kLow = {40, 6, 5};
    o.qty = Qty{R(kLow[Raw(m)], kLow[Raw(m)] + 60)};
    const int64_t anchor = StopAnchor(ref, m);
    switch (U(6)) {
      case 0:
        o.type = OrderType::kLimit;
        o.tif = P(800) ? TimeInForce::kGtc : TimeInForce::kIoc;
        o.price = Price{anchor + (side == Side::kBuy ? -R(-3, 10) : R(-3, 10))};
        if (P(150) && o.tif == TimeInForce::kGtc) o.iceberg_qty = Qty{1};
        break;
      case 1:
        MakerLeg(ref, m, side, anchor + (side == Side::kBuy ? -R(2, 12) : R(2, 12)), &o);
        break;
      case 2:
        o.type = OrderType::kMarket;
        o.tif = TimeInForce::kIoc;
        break;
      default: {
        static constexpr std::array<OrderType, 4> kTypes = {
            OrderType::kStopLoss, OrderType::kStopLossLimit, OrderType::kTakeProfit,
            OrderType::kTakeProfitLimit};
        const OrderType t = kTypes[U(kTypes.size())];
        const bool rise = Rises(t, side);
        const int64_t stop = anchor + (rise ? R(1, 10) : -R(1, 10));
        const bool limit = t == OrderType::kStopLossLimit || t == OrderType::kTakeProfitLimit;
        StopLeg(m, side, limit ? OrderType::kStopLoss : t, limit ? t : OrderType::kTakeProfit, stop,
                &o);
        o.type = t;
        if (!limit) o.price = Price{0}, o.tif = TimeInForce::kIoc;
        if (limit && o.price.value == 0) o.price = Price{stop}, o.tif = TimeInForce::kGtc;
        break;
      }
    }
    return o;
  }

  // OCO, OTO or OTOCO: mostly well formed, the working orders often
  // marketable so that pending orders get placed; sometimes a shape the
  // engine refuses, or pending orders that cannot be placed when their time
  // comes (too large for the account).
  engine::PlaceOrderList ListCmd(const ReferenceEngine& ref) {
    engine::PlaceOrderList l;
    l.account = Trader();
    l.market = Market();
    l.stp = Stp();
    l.type = static_cast<engine::ListType>(U(3));
    if (P(400)) l.list_client_order_id = ListCid(l.account);
    const MarketId m = l.market;
    const std::size_t mi = Raw(m);
    const int64_t min_qty = config_.markets[mi].min_qty.value;
    const Side side = P(500) ? Side::kBuy : Side::kSell;
    // Mostly above the minimum notional: {BTCUSDT 34, ETHUSDT 5, ETHBTC 4} lots.
    static constexpr std::array<int64_t, kMarkets> kListQty = {40, 6, 5};
    const Qty qty{std::max<int64_t>(
        min_qty, P(900) ? R(kListQty[mi], kListQty[mi] + 80) : NormalQty(mi).value)};
    const bool far = P(300);
    if (l.type == engine::ListType::kOco) {
      OcoLegs(ref, m, side, qty, &l.orders[0], &l.orders[1], far);
    } else {
      engine::ListOrder& w = l.orders[0];
      w.side = side;
      w.qty = qty;
      w.type = OrderType::kLimit;
      w.tif = P(850) ? TimeInForce::kGtc : (P(500) ? TimeInForce::kIoc : TimeInForce::kFok);
      auto opp = side == Side::kBuy ? ref.BestAsk(m) : ref.BestBid(m);
      if (opp && !far && P(500)) {  // marketable: fills at once, or partly and rests
        w.price = Price{opp->value + (side == Side::kBuy ? R(0, 3) : -R(0, 3))};
        if (P(600)) w.qty = Qty{std::max<int64_t>(min_qty, R(1, 10))};
      } else {
        const int64_t away = far ? R(150, 400) : R(0, 12);
        w.price = Price{Mid(mi) + (side == Side::kBuy ? -away : away)};
      }
      if (P(150)) MakerLeg(ref, m, side, w.price.value, &w, far);
      if (P(60) && w.tif == TimeInForce::kGtc && w.qty.value >= 2) {
        w.iceberg_qty = Qty{R(1, w.qty.value - 1)};
      }
      const Side next = P(750) ? engine::Opposite(side) : side;
      if (l.type == engine::ListType::kOto) {
        l.orders[1] = PendingOrder(ref, m, next);
      } else {
        OcoLegs(ref, m, next, Qty{std::max<int64_t>(min_qty, R(kListQty[mi], kListQty[mi] + 60))},
                &l.orders[1], &l.orders[2], false);
      }
      if (P(120)) {  // more than the account will have: refused when placed
        const std::size_t k = l.type == engine::ListType::kOto ? 1 : 1 + U(2);
        const Qty big = config_.markets[mi].max_qty;
        l.orders[k].qty = big;
        if (l.type == engine::ListType::kOtoco) l.orders[1].qty = l.orders[2].qty = big;
      }
    }
    for (engine::ListOrder& o : l.orders) {
      if (P(300)) o.client_order_id = NewOrderCid(l.account);
    }
    if (P(150)) {  // a shape the engine refuses
      const int first = l.type == engine::ListType::kOtoco ? 1 : 0;
      switch (U(7)) {
        case 0:
          std::swap(l.orders[first], l.orders[first + 1]);
          break;
        case 1:
          l.orders[first].qty.value += 1;
          break;
        case 2:
          l.orders[first + 1].side = engine::Opposite(l.orders[first + 1].side);
          break;
        case 3:  // the prices the wrong way round
          if (l.orders[first].type == OrderType::kLimitMaker) {
            l.orders[first].price = Price{l.orders[first + 1].stop_price.value - R(0, 2)};
          } else {
            l.orders[first].stop_price =
                Price{std::max<int64_t>(1, l.orders[first + 1].price.value - R(0, 2))};
          }
          break;
        case 4:
          l.orders[0].type = P(500) ? OrderType::kMarket : OrderType::kStopLossLimit;
          break;
        case 5:
          l.type = static_cast<engine::ListType>(R(3, 255));
          break;
        default:
          l.orders[1].client_order_id = l.orders[0].client_order_id =
              ClientOrderId::From("same-" + std::to_string(U(4)));
          break;
      }
    }
    return l;
  }

  // A cancel, cancel of the list, amend, cancel-all or cancel-replace aimed
  // at an open list.
  engine::CommandBody AtList(const ReferenceEngine& ref) {
    const auto& lists = ref.lists();
    if (lists.empty()) return ListCmd(ref);
    auto it = lists.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(U(lists.size())));
    const RefList& l = it->second;
    std::vector<const RefOrder*> open;
    for (OrderId id : l.orders) {
      if (const RefOrder* o = Raw(id) != 0 ? ref.FindOrder(id) : nullptr) open.push_back(o);
    }
    const uint64_t r = U(100);
    if (r < 30 || open.empty()) {
      engine::CancelOrderList c;
      c.account = l.account;
      c.market = l.market;
      const uint64_t how = U(10);
      if (how < 5 || l.client_id.empty()) {
        c.list_id = l.id;
      } else if (how < 8) {
        c.list_client_order_id = ClientOrderId::From(l.client_id);
      } else {
        c.list_id = l.id;
        c.list_client_order_id =
            P(500) ? ClientOrderId::From(l.client_id) : ClientOrderId::From("other");
      }
      if (P(100)) c.account = Trader();
      if (P(60)) c.market = MarketId{static_cast<uint16_t>((Raw(c.market) + 1) % kMarkets)};
      if (P(60)) c.list_id = l.id + engine::kListOrderStride;  // an order's id, not the list's
      return c;
    }
    const RefOrder& o = *open[U(open.size())];
    Target t;
    t.account = o.account;
    t.market = o.market;
    t.order = &o;
    if (!o.client_id.empty() && P(300)) {
      t.cid = ClientOrderId::From(o.client_id);
    } else {
      t.id = o.id;
    }
    if (r < 65) {
      engine::CancelOrder c;
      c.account = t.account;
      c.market = t.market;
      c.order_id = t.id;
      c.orig_client_order_id = t.cid;
      if (P(150)) {
        c.restriction = P(500) ? engine::CancelRestriction::kOnlyNew
                               : engine::CancelRestriction::kOnlyPartiallyFilled;
      }
      return c;
    }
    if (r < 80) return AmendBody(t);  // refused: a list's order
    if (r < 90) {
      engine::CancelAll c;
      c.account = o.account;
      c.market = o.market;
      return c;
    }
    engine::CancelReplace cr;
    cr.cancel.account = t.account;
    cr.cancel.market = t.market;
    cr.cancel.order_id = t.id;
    cr.cancel.orig_client_order_id = t.cid;
    cr.place = Limit(ref, TimeInForce::kGtc);
    cr.place.account = o.account;
    cr.place.market = o.market;
    cr.mode = P(500) ? engine::CancelReplaceMode::kAllowFailure
                     : engine::CancelReplaceMode::kStopOnFailure;
    return cr;
  }

  // A cancel, amend or cancel-replace aimed at a waiting stop order.
  engine::CommandBody AtWaiting(const ReferenceEngine& ref) {
    const auto& waiting = ref.waiting();
    if (waiting.empty()) return StopOrder(ref);
    const RefOrder& o = waiting[U(waiting.size())].order;
    Target t;
    t.account = o.account;
    t.market = o.market;
    t.order = &o;
    if (!o.client_id.empty() && P(400)) {
      t.cid = ClientOrderId::From(o.client_id);
    } else {
      t.id = o.id;
    }
    const uint64_t r = U(10);
    if (r < 5) {
      engine::CancelOrder c;
      c.account = t.account;
      c.market = t.market;
      c.order_id = t.id;
      c.orig_client_order_id = t.cid;
      if (P(150)) {
        c.restriction = P(500) ? engine::CancelRestriction::kOnlyNew
                               : engine::CancelRestriction::kOnlyPartiallyFilled;
      }
      return c;
    }
    if (r < 7) {  // refused: a waiting order has no place in a book to amend
      engine::AmendOrder a = AmendBody(t);
      a.keep_priority = P(200);
      return a;
    }
    if (r < 8) {
      engine::CancelAll c;
      c.account = o.account;
      c.market = o.market;
      return c;
    }
    engine::CancelReplace cr;
    cr.cancel.account = t.account;
    cr.cancel.market = t.market;
    cr.cancel.order_id = t.id;
    cr.cancel.orig_client_order_id = t.cid;
    cr.place = P(700) ? StopOrder(ref) : Limit(ref, TimeInForce::kGtc);
    cr.place.account = o.account;
    cr.place.market = o.market;
    cr.mode = P(500) ? engine::CancelReplaceMode::kAllowFailure
                     : engine::CancelReplaceMode::kStopOnFailure;
    return cr;
  }

  // Targets an open order: own (valid), foreign, closed, or unknown.
  struct Target {
    AccountId account{};
    MarketId market{};
    OrderId id{};
    ClientOrderId cid{};
    const RefOrder* order = nullptr;  // when it is a valid target
  };
  Target PickTarget(const ReferenceEngine& ref) {
    Target t;
    t.market = Market();
    t.account = Trader();
    const uint64_t r = U(100);
    if (r < 70) {
      if (const RefOrder* o = AnyOpen(ref, std::nullopt)) {
        t.account = o->account;
        t.market = o->market;
        t.order = o;
        if (!o->client_id.empty() && P(350)) {
          t.cid = ClientOrderId::From(o->client_id);
        } else {
          t.id = o->id;
          if (P(100)) {
            t.cid = ClientOrderId::From("other");  // not this order's: an unknown order
          } else if (!o->client_id.empty() && P(100)) {
            t.cid = ClientOrderId::From(o->client_id);  // both ids, naming the same order
          }
        }
        if (P(40)) {  // the right order, the wrong market
          t.market = MarketId{static_cast<uint16_t>((Raw(t.market) + 1) % kMarkets)};
          t.order = nullptr;
        }
        return t;
      }
    }
    if (r < 80) {
      if (const RefOrder* o = AnyOpen(ref, std::nullopt)) {  // someone else's order
        t.market = o->market;
        t.id = o->id;
        t.account = AccountId{(Raw(o->account) % (kAccounts - 1)) + 1};
        return t;
      }
    }
    if (r < 90 && !recent_orders_.empty()) {  // probably filled or canceled by now
      t.id = Pick(recent_orders_);
      if (const RefOrder* o = ref.FindOrder(t.id)) {
        t.account = o->account;
        t.market = o->market;
        t.order = o;
      }
      return t;
    }
    if (r < 96 && !cids_[t.account].empty()) {  // a client id, maybe of a closed order
      t.cid = Pick(cids_[t.account]);
      return t;
    }
    if (P(500)) {
      t.id = OrderId{static_cast<uint64_t>(R(1, 1'000'000'000))};
    }  // else: neither id nor client id
    return t;
  }

  engine::CancelOrder Cancel(const ReferenceEngine& ref) {
    Target t = PickTarget(ref);
    engine::CancelOrder c;
    c.account = t.account;
    c.market = t.market;
    c.order_id = t.id;
    c.orig_client_order_id = t.cid;
    if (P(200)) {  // cancelRestrictions
      c.restriction = P(500) ? engine::CancelRestriction::kOnlyNew
                             : engine::CancelRestriction::kOnlyPartiallyFilled;
    }
    return c;
  }

  engine::CancelAll CancelAllCmd(const ReferenceEngine& ref) {
    engine::CancelAll c;
    c.market = Market();
    c.account = Trader();
    if (P(700)) {
      if (const RefOrder* o = AnyOpen(ref, std::nullopt)) {
        c.account = o->account;
        c.market = o->market;
      }
    }
    return c;
  }

  engine::AmendOrder Amend(const ReferenceEngine& ref) {
    Target t = PickTarget(ref);
    engine::AmendOrder a;
    a.account = t.account;
    a.market = t.market;
    a.order_id = t.id;
    a.orig_client_order_id = t.cid;
    if (t.order == nullptr) {
      a.new_price = P(500) ? NearPrice(Raw(t.market)) : Price{0};
      a.new_qty = Qty{R(0, 50)};
      a.keep_priority = P(200);
      return a;
    }
    a = AmendBody(t);
    a.keep_priority = P(200);  // amend/keepPriority: only a smaller quantity
    // newClientOrderId: fresh, an old one (perhaps the order's own), or
    // another open order's (refused).
    if (P(250)) {
      if (P(300)) {
        for (int tries = 0; tries < 8 && a.new_client_order_id.empty(); ++tries) {
          const RefOrder* o = AnyOpen(ref, a.market);
          if (o != nullptr && o->account == a.account && !o->client_id.empty()) {
            a.new_client_order_id = ClientOrderId::From(o->client_id);
          }
        }
      }
      if (a.new_client_order_id.empty()) {
        a.new_client_order_id = P(700) ? FreshCid(a.account) : NewOrderCid(a.account);
        cids_[a.account].push_back(a.new_client_order_id);
      }
    }
    return a;
  }

  // cancelReplace: a cancel (valid or not, with its restrictions) and a new
  // order of the same account and market, in either mode.
  engine::CancelReplace CancelReplaceCmd(const ReferenceEngine& ref) {
    engine::CancelReplace cr;
    cr.cancel = Cancel(ref);
    const uint64_t r = U(10);
    cr.place = r < 5   ? Limit(ref, TimeInForce::kGtc)
               : r < 7 ? Limit(ref, TimeInForce::kIoc)
               : r < 8 ? MarketOrder(ref, P(500))
                       : StopOrder(ref);
    if (P(900)) {
      cr.place.account = cr.cancel.account;
      cr.place.market = cr.cancel.market;
    }
    cr.mode = P(500) ? engine::CancelReplaceMode::kAllowFailure
                     : engine::CancelReplaceMode::kStopOnFailure;
    return cr;
  }

  engine::AmendOrder AmendBody(const Target& t) {
    engine::AmendOrder a;
    a.account = t.account;
    a.market = t.market;
    a.order_id = t.id;
    a.orig_client_order_id = t.cid;
    const RefOrder& o = *t.order;
    const int64_t filled = o.qty.value - o.remaining.value;
    const uint64_t r = U(100);
    if (r < 30) {  // price change (may cross), sometimes with a quantity
      a.new_price = Price{o.price.value + R(-6, 6)};
      if (a.new_price.value == o.price.value) a.new_price.value += 1;
      if (P(300)) a.new_qty = Qty{filled + R(1, 2 * o.remaining.value + 1)};
    } else if (r < 55) {  // quantity down, same price: keeps priority
      if (o.remaining.value > 1) {
        a.new_qty = Qty{filled + R(1, o.remaining.value - 1)};
      } else {
        a.new_qty = Qty{o.qty.value};
      }
      if (P(300)) a.new_price = o.price;
    } else if (r < 75) {  // quantity up
      a.new_qty = Qty{o.qty.value + R(1, 300)};
      if (P(300)) a.new_price = o.price;
    } else if (r < 82) {  // no change, spelled two ways
      if (P(500)) {
        a.new_price = o.price;
        a.new_qty = o.qty;
      }
    } else {  // invalid
      switch (U(6)) {
        case 0:
          a.new_qty = Qty{std::max<int64_t>(filled, 0) - R(0, 1)};  // <= filled (or 0)
          break;
        case 1:
          a.new_price = Price{-R(1, 100)};
          break;
        case 2:
          a.new_price = Price{config_.markets[Raw(o.market)].max_price.value + R(1, 10)};
          break;
        case 3:
          a.new_qty = Qty{config_.markets[Raw(o.market)].max_qty.value + R(1, 10)};
          break;
        case 4:
          a.new_qty = Qty{std::numeric_limits<int64_t>::max()};
          break;
        default:
          a.new_qty = Qty{filled + 1};  // tiny: often below min notional
          a.new_price = Price{o.price.value + 1};
          break;
      }
    }
    return a;
  }

  engine::Deposit DepositCmd(const ReferenceEngine& ref) {
    engine::Deposit d;
    d.account = P(30) ? AccountId{0} : Trader();
    d.asset = AssetId{static_cast<uint16_t>(U(kAssets))};
    d.amount = FundingAmount(d.asset);
    d.ref = NewRef();
    const uint64_t r = U(100);
    if (r < 3) {
      d.amount = Amount{-R(0, 1000)};
    } else if (r < 6 && ref.balance(d.account, d.asset).available.value > 0) {
      d.amount = Amount{std::numeric_limits<int64_t>::max() - R(0, 1000)};  // overflows
    }
    return d;
  }

  engine::Withdraw WithdrawCmd(const ReferenceEngine& ref) {
    engine::Withdraw w;
    w.account = P(50) ? AccountId{0} : Trader();
    w.asset = AssetId{static_cast<uint16_t>(U(kAssets))};
    const int64_t avail = ref.balance(w.account, w.asset).available.value;
    const uint64_t r = U(100);
    if (r < 15) {
      w.amount = Amount{avail};  // everything
    } else if (r < 30) {
      w.amount = Amount{avail + R(1, 1000)};  // a little too much
    } else if (r < 33) {
      w.amount = Amount{-R(0, 5)};
    } else {
      w.amount = Amount{avail > 0 ? R(1, std::max<int64_t>(avail / 4, 1)) : R(1, 1000)};
    }
    w.ref = NewRef();
    return w;
  }

  // A transfer to another venue: mostly a part of the available balance with
  // a small fee; sometimes all of it, too much, a fee above the amount or
  // negative, a used reference (NewRef), an unknown account or asset.
  engine::TransferOut TransferOutCmd(const ReferenceEngine& ref) {
    engine::TransferOut t;
    t.account = P(50) ? AccountId{0} : Trader();
    t.asset = AssetId{static_cast<uint16_t>(U(kAssets))};
    const int64_t avail = ref.balance(t.account, t.asset).available.value;
    const uint64_t r = U(100);
    if (r < 10) {
      t.amount = Amount{avail};  // everything (0 when empty: an invalid amount)
    } else if (r < 22) {
      t.amount = Amount{avail + R(1, 1000)};  // a little too much
    } else if (r < 25) {
      t.amount = Amount{-R(0, 5)};
    } else {
      t.amount = Amount{avail > 0 ? R(1, std::max<int64_t>(avail / 4, 1)) : R(1, 1000)};
    }
    const uint64_t f = U(100);
    if (f < 6) {
      t.fee = Amount{t.amount.value + R(1, 100)};  // more than the amount
    } else if (f < 9) {
      t.fee = Amount{-R(1, 10)};
    } else if (f < 30) {
      t.fee = Amount{0};
    } else if (f < 36) {
      t.fee = t.amount;  // the destination receives nothing: still valid
    } else {
      t.fee = Amount{t.amount.value > 0 ? R(0, t.amount.value / 100) : 0};
    }
    t.ref = NewRef();
    const uint64_t a = U(100);
    if (a < 5) {
      t.address = TransferAddress{};
    } else if (a < 15) {
      t.address = TransferAddress::From(std::string(64, static_cast<char>('a' + U(26))));
    } else {
      t.address = TransferAddress::From("mbx:venue-b/" + std::to_string(R(1, 999)));
    }
    if (P(15)) t.account = AccountId{static_cast<uint32_t>(R(kAccounts, 1'000'000))};
    if (P(15)) t.asset = AssetId{static_cast<uint16_t>(R(kAssets, 65535))};
    return t;
  }

  // Resolves a pending transfer (completed or refunded), one resolved before,
  // an order's id, or an id nothing holds; sometimes a refund reason out of
  // range.
  engine::ResolveTransfer ResolveTransferCmd(const ReferenceEngine& ref) {
    engine::ResolveTransfer r;
    r.completed = P(500);
    r.reason = static_cast<engine::RefundReason>(U(5));
    if (P(40)) r.reason = static_cast<engine::RefundReason>(R(5, 255));
    const auto& pending = ref.pending_transfers();
    const uint64_t k = U(100);
    if (k < 75 && !pending.empty()) {
      auto it = pending.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(U(pending.size())));
      r.transfer_id = it->first;
    } else if (k < 85 && !resolved_.empty()) {
      r.transfer_id = Pick(resolved_);  // resolved already
    } else if (k < 92 && !recent_orders_.empty()) {
      r.transfer_id = TransferId{Raw(Pick(recent_orders_))};  // a sequence, not a transfer
    } else {
      r.transfer_id = TransferId{P(200) ? 0 : static_cast<uint64_t>(R(1, 1'000'000'000'000))};
    }
    return r;
  }

  engine::SetMarketStatus StatusCmd() {
    engine::SetMarketStatus s;
    s.market = Market();
    s.status = P(500) ? MarketStatus::kHalted : MarketStatus::kCancelOnly;
    if (P(100)) s.status = MarketStatus::kTrading;
    return s;
  }

  engine::CommandBody BadInput(const ReferenceEngine& ref) {
    switch (U(20)) {
      case 0: {  // unknown market
        engine::PlaceOrder p = Limit(ref, TimeInForce::kGtc);
        p.market = MarketId{static_cast<uint16_t>(R(kMarkets, 65535))};
        return p;
      }
      case 1: {  // unknown or fee account
        engine::PlaceOrder p = Limit(ref, TimeInForce::kGtc);
        p.account =
            P(500) ? AccountId{0} : AccountId{static_cast<uint32_t>(R(kAccounts, 4'000'000'000))};
        return p;
      }
      case 2: {  // enum values out of range
        engine::PlaceOrder p = Limit(ref, TimeInForce::kGtc);
        switch (U(4)) {
          case 0:
            p.side = static_cast<Side>(R(2, 255));
            break;
          case 1:
            p.type = static_cast<OrderType>(R(7, 255));
            break;
          case 2:
            p.tif = static_cast<TimeInForce>(R(3, 255));
            break;
          default:
            p.stp = static_cast<StpMode>(R(4, 255));
            break;
        }
        return p;
      }
      case 3: {  // bad prices
        engine::PlaceOrder p = Limit(ref, TimeInForce::kGtc);
        const int64_t max = config_.markets[Raw(p.market)].max_price.value;
        const std::array<int64_t, 5> prices = {0, -1, -R(2, 1'000'000), max + 1,
                                               std::numeric_limits<int64_t>::max()};
        p.price = Price{prices[U(prices.size())]};
        if (P(200)) p.price = Price{max};  // valid, but expensive
        return p;
      }
      case 4: {  // bad quantities
        engine::PlaceOrder p = Limit(ref, TimeInForce::kGtc);
        const int64_t max = config_.markets[Raw(p.market)].max_qty.value;
        const std::array<int64_t, 6> qtys = {0,
                                             -1,
                                             max + 1,
                                             std::numeric_limits<int64_t>::max(),
                                             std::numeric_limits<int64_t>::min(),
                                             max};
        p.qty = Qty{qtys[U(qtys.size())]};
        if (P(300)) p.type = OrderType::kMarket, p.price = Price{0};
        return p;
      }
      case 5: {  // the largest valid order: insufficient balance, never overflow
        engine::PlaceOrder p = Limit(ref, TimeInForce::kGtc);
        p.price = config_.markets[Raw(p.market)].max_price;
        p.qty = config_.markets[Raw(p.market)].max_qty;
        return p;
      }
      case 6: {  // MARKET with both or neither of qty and quote_qty, or a bad budget
        engine::PlaceOrder p = MarketOrder(ref, false);
        switch (U(4)) {
          case 0:
            p.qty = Qty{0};
            break;
          case 1:
            p.quote_qty = Amount{R(1, 1'000'000'000)};
            break;
          case 2:
            p.qty = Qty{0};
            p.quote_qty = Amount{-R(1, 1000)};
            break;
          default:
            p.qty = Qty{0};
            p.quote_qty = Amount{std::numeric_limits<int64_t>::max()};
            break;
        }
        return p;
      }
      case 7: {  // MARKET by qty beyond max, or negative
        engine::PlaceOrder p = MarketOrder(ref, false);
        p.qty = Qty{P(500) ? config_.markets[Raw(p.market)].max_qty.value + R(1, 100) : -R(1, 9)};
        return p;
      }
      case 8: {  // cancel in an unknown market / for an unknown account
        engine::CancelOrder c = Cancel(ref);
        if (P(500)) {
          c.market = MarketId{static_cast<uint16_t>(R(kMarkets, 100))};
        } else {
          c.account = AccountId{static_cast<uint32_t>(R(kAccounts, 1'000'000))};
        }
        return c;
      }
      case 9: {
        engine::CancelAll c = CancelAllCmd(ref);
        if (P(500)) {
          c.market = MarketId{static_cast<uint16_t>(R(kMarkets, 100))};
        } else {
          c.account = P(500) ? AccountId{0} : AccountId{kAccounts};
        }
        return c;
      }
      case 10: {
        engine::AmendOrder a = Amend(ref);
        if (P(500)) {
          a.market = MarketId{static_cast<uint16_t>(R(kMarkets, 100))};
        } else {
          a.account = AccountId{static_cast<uint32_t>(R(kAccounts, 1'000'000))};
        }
        return a;
      }
      case 11: {  // deposit: unknown account / asset
        engine::Deposit d = DepositCmd(ref);
        if (P(500)) {
          d.account = AccountId{static_cast<uint32_t>(R(kAccounts, 1'000'000))};
        } else {
          d.asset = AssetId{static_cast<uint16_t>(R(kAssets, 65535))};
        }
        return d;
      }
      case 12: {
        engine::Withdraw w = WithdrawCmd(ref);
        if (P(500)) {
          w.account = AccountId{static_cast<uint32_t>(R(kAccounts, 1'000'000))};
        } else {
          w.asset = AssetId{static_cast<uint16_t>(R(kAssets, 65535))};
        }
        return w;
      }
      case 13: {  // status: unknown market or value
        engine::SetMarketStatus s;
        s.market = Market();
        if (P(500)) {
          s.market = MarketId{static_cast<uint16_t>(R(kMarkets, 65535))};
        } else {
          s.status = static_cast<MarketStatus>(R(3, 255));
        }
        return s;
      }
      case 14: {  // MARKET buy of a huge quantity: walks the whole book
        engine::PlaceOrder p = MarketOrder(ref, false);
        p.side = Side::kBuy;
        p.qty = config_.markets[Raw(p.market)].max_qty;
        return p;
      }
      case 16: {  // a stop with a bad stop price (or the highest valid one)
        engine::PlaceOrder p = StopOrder(ref);
        const int64_t max = config_.markets[Raw(p.market)].max_price.value;
        const std::array<int64_t, 6> stops = {
            0, -1, -R(2, 1'000'000), max + 1, std::numeric_limits<int64_t>::max(), max};
        p.stop_price = Price{stops[U(stops.size())]};
        if (P(300)) p.trailing_delta = TrailingDelta(p.market);
        return p;
      }
      case 17: {  // a stop with a bad trailing delta
        engine::PlaceOrder p = StopOrder(ref);
        const std::array<int32_t, 5> deltas = {-1, -static_cast<int32_t>(R(2, 100'000)), 10'000,
                                               static_cast<int32_t>(R(10'001, 1'000'000)),
                                               std::numeric_limits<int32_t>::min()};
        p.trailing_delta = deltas[U(deltas.size())];
        if (P(300)) p.stop_price = Price{0};
        return p;
      }
      case 18: {  // stop fields on a LIMIT, LIMIT_MAKER or MARKET order
        const uint64_t r = U(3);
        engine::PlaceOrder p = r == 0 ? Limit(ref, TimeInForce::kGtc)
                                      : (r == 1 ? Maker(ref) : MarketOrder(ref, P(500)));
        if (P(600)) p.stop_price = Price{StopAnchor(ref, p.market) + R(-5, 5)};
        if (p.stop_price.value == 0 || P(400)) p.trailing_delta = TrailingDelta(p.market);
        return p;
      }
      case 19: {  // a stop's other fields wrong
        engine::PlaceOrder p = StopOrder(ref);
        const bool market_like = p.type == OrderType::kStopLoss || p.type == OrderType::kTakeProfit;
        switch (U(5)) {
          case 0:  // quote_qty: a stop-market order is by quantity only
            p.quote_qty = QuoteBudget(Raw(p.market));
            if (P(600)) p.qty = Qty{0};
            break;
          case 1:
            p.qty = Qty{P(500) ? 0 : -R(1, 9)};
            break;
          case 2:
            p.qty = Qty{config_.markets[Raw(p.market)].max_qty.value + R(1, 100)};
            break;
          case 3:  // a limit price out of range (ignored by the stop-market ones)
            p.price = Price{P(500) ? 0 : config_.markets[Raw(p.market)].max_price.value + 1};
            break;
          default:  // the largest order: locks too much (or, stop-market buy, nothing yet)
            p.qty = config_.markets[Raw(p.market)].max_qty;
            if (!market_like) p.price = Price{p.price.value * 50};
            break;
        }
        return p;
      }
      default: {  // a FOK far through the book
        engine::PlaceOrder p = Limit(ref, TimeInForce::kFok);
        p.qty = Qty{R(200, 5000)};
        p.price = Price{Mid(Raw(p.market)) + (p.side == Side::kBuy ? 20 : -20)};
        return p;
      }
    }
  }

  std::mt19937_64 rng_;
  const EngineConfig& config_;
  bool dirty_;
  uint64_t count_ = 0;
  int64_t ts_ = 1'700'000'000'000'000'000;
  uint64_t next_cid_ = 1;
  uint64_t next_ref_ = 1;
  std::vector<OrderId> recent_orders_;
  std::size_t recent_next_ = 0;
  std::map<AccountId, std::vector<ClientOrderId>> cids_;
  std::vector<TransferRef> refs_;
  std::vector<TransferId> resolved_;  // transfers to other venues resolved already
  std::size_t resolved_next_ = 0;
  std::vector<ClientOrderId> list_cids_;
  std::size_t list_cids_next_ = 0;
};

// ---------------------------------------------------------------------------
// State checks

std::string BalanceText(Balance b) {
  return "{available " + std::to_string(b.available.value) + ", locked " +
         std::to_string(b.locked.value) + "}";
}

std::string OrderText(const engine::OrderView& o) {
  std::ostringstream os;
  os << "id=" << Raw(o.id) << " account=" << Raw(o.terms.account)
     << " side=" << engine::ToString(o.terms.side) << " type=" << engine::ToString(o.terms.type)
     << " tif=" << engine::ToString(o.terms.tif) << " stp=" << engine::ToString(o.terms.stp)
     << " price=" << o.terms.price.value << " qty=" << o.terms.qty.value
     << " remaining=" << o.remaining.value << " locked=" << o.locked.value
     << " created_ns=" << o.created_ns;
  return os.str();
}

engine::OrderView View(const RefOrder& o) {
  engine::OrderView v;
  v.id = o.id;
  v.terms.account = o.account;
  v.terms.market = o.market;
  v.terms.side = o.side;
  v.terms.type = o.type;
  v.terms.tif = o.tif;
  v.terms.stp = o.stp;
  v.terms.price = o.price;
  v.terms.qty = o.qty;
  v.remaining = o.iceberg.value != 0 ? o.visible : o.remaining;  // the part the book shows
  v.locked = o.locked;
  v.created_ns = o.created_ns;
  return v;
}

bool SameOrder(const engine::OrderView& a, const engine::OrderView& b) {
  return std::tie(a.id, a.terms, a.remaining, a.locked, a.created_ns) ==
         std::tie(b.id, b.terms, b.remaining, b.locked, b.created_ns);
}

// The invariants of docs/architecture.md on the real engine, re-checked from its
// queries, and its state against the reference's. `deep` adds the books order
// by order. Returns "" when all hold.
std::string CheckState(const Engine& real, const ReferenceEngine& ref, bool deep) {
  std::ostringstream err;
  if (Status st = real.CheckInvariants(); !st.ok()) {
    err << "real.CheckInvariants(): " << st.message() << "\n";
  }
  if (Status st = ref.CheckInvariants(); !st.ok()) {
    err << "reference CheckInvariants(): " << st.message() << "\n";
  }
  const EngineConfig& config = real.config();
  // Transfers to other venues: the same pending ones on both sides.
  const std::vector<engine::PendingTransfer> pending = real.PendingTransfers();
  std::vector<int128> pending_sum(config.assets.size(), 0);
  {
    const auto& want = ref.pending_transfers();
    bool same = pending.size() == want.size();
    auto it = want.begin();
    for (std::size_t i = 0; same && i < pending.size(); ++i, ++it) {
      const engine::PendingTransfer& p = pending[i];
      const RefPendingTransfer& w = it->second;
      same = p.id == w.id && p.account == w.account && p.asset == w.asset && p.amount == w.amount &&
             p.fee == w.fee && p.address.view() == w.address;
    }
    if (!same) {
      err << "pending transfers differ: real " << pending.size() << ", reference " << want.size()
          << "\n";
    }
    for (std::size_t i = 0; i < pending.size(); ++i) {
      const engine::PendingTransfer& p = pending[i];
      if (i > 0 && !(pending[i - 1].id < p.id)) err << "PendingTransfers() is not by id\n";
      if (Raw(p.asset) < config.assets.size()) pending_sum[Raw(p.asset)] += p.amount.value;
    }
  }
  for (std::size_t a = 0; a < config.assets.size(); ++a) {
    const AssetId asset{static_cast<uint16_t>(a)};
    int128 in_accounts = 0;
    for (uint32_t acc = 0; acc < config.max_accounts; ++acc) {
      const Balance b = real.balance(AccountId{acc}, asset);
      const Balance want = ref.balance(AccountId{acc}, asset);
      if (b.available.value < 0 || b.locked.value < 0) {
        err << "negative balance: account " << acc << " asset " << a << " " << BalanceText(b)
            << "\n";
      }
      if (!(b == want)) {
        err << "balance of account " << acc << " asset " << a << ": real " << BalanceText(b)
            << ", reference " << BalanceText(want) << "\n";
      }
      in_accounts += static_cast<int128>(b.available.value) + b.locked.value;
    }
    const int128 held = real.held(asset).value;
    if (held != pending_sum[a]) {
      err << "held total of asset " << a << ": " << static_cast<int64_t>(held)
          << " != the pending transfers' " << static_cast<int64_t>(pending_sum[a]) << "\n";
    }
    if (real.held(asset) != ref.held(asset)) {
      err << "held total of asset " << a << ": real " << real.held(asset).value << ", reference "
          << ref.held(asset).value << "\n";
    }
    const int128 net = real.supply(asset).value;
    if (in_accounts + held != net) {
      err << "conservation broken for asset " << a << ": balances "
          << static_cast<int64_t>(in_accounts) << " + held " << static_cast<int64_t>(held)
          << " != deposited - withdrawn - sent " << static_cast<int64_t>(net) << "\n";
    }
    if (real.supply(asset) != ref.supply(asset)) {
      err << "supply of asset " << a << " differs\n";
    }
  }
  for (std::size_t m = 0; m < config.markets.size(); ++m) {
    const MarketId market{static_cast<uint16_t>(m)};
    const auto bid = real.BestBid(market);
    const auto ask = real.BestAsk(market);
    if (bid && ask && !(*bid < *ask)) {
      err << "market " << m << " crossed: bid " << bid->value << " >= ask " << ask->value << "\n";
    }
    if (bid != ref.BestBid(market) || ask != ref.BestAsk(market)) {
      err << "market " << m << " best prices differ from the reference\n";
    }
    if (real.market_status(market) != ref.market_status(market)) {
      err << "market " << m << " status differs\n";
    }
  }
  if (Raw(real.last_sequence()) != ref.last_sequence()) err << "last_sequence differs\n";
  if (Raw(real.next_trade_id()) != ref.next_trade_id()) err << "next_trade_id differs\n";
  if (real.open_orders() != ref.open_orders()) {
    err << "open orders: real " << real.open_orders() << ", reference " << ref.open_orders()
        << "\n";
  }
  if (deep) {
    // The waiting stop orders, which no book lists.
    for (const RefWaiting& w : ref.waiting()) {
      const std::optional<engine::OrderView> got = real.FindOrder(w.order.id);
      if (!got || !SameOrder(*got, View(w.order))) {
        err << "waiting order " << Raw(w.order.id)
            << " differs:\n    real:      " << (got ? OrderText(*got) : "(none)")
            << "\n    reference: " << OrderText(View(w.order)) << "\n";
        break;
      }
    }
    for (std::size_t m = 0; m < config.markets.size(); ++m) {
      const MarketId market{static_cast<uint16_t>(m)};
      for (Side side : {Side::kBuy, Side::kSell}) {
        const std::vector<engine::OrderView> got = real.Orders(market, side);
        const std::vector<RefOrder> want = ref.Orders(market, side);
        const std::size_t n = std::max(got.size(), want.size());
        for (std::size_t i = 0; i < n; ++i) {
          if (i < got.size() && i < want.size() && SameOrder(got[i], View(want[i]))) continue;
          err << "market " << m << " " << engine::ToString(side) << " book differs at position "
              << i << ":\n    real:      " << (i < got.size() ? OrderText(got[i]) : "(none)")
              << "\n    reference: " << (i < want.size() ? OrderText(View(want[i])) : "(none)")
              << "\n";
          break;
        }
        const auto depth = real.Depth(market, side, 1'000'000);
        const auto want_depth = ref.Depth(market, side, 1'000'000);
        bool same = depth.size() == want_depth.size();
        for (std::size_t i = 0; same && i < depth.size(); ++i) {
          same = depth[i].price == want_depth[i].price && depth[i].qty == want_depth[i].qty &&
                 depth[i].orders == want_depth[i].orders;
        }
        if (!same) err << "market " << m << " " << engine::ToString(side) << " depth differs\n";
      }
    }
  }
  return err.str();
}

// ---------------------------------------------------------------------------
// The ledger view: AppendLedgerEntries over every event, summed per (account,
// asset, bucket), must reproduce the balances.

class LedgerSums {
 public:
  static constexpr std::size_t kBuckets = 3;  // available, locked, held

  explicit LedgerSums(const EngineConfig& config)
      : config_(config), sums_(config.max_accounts * config.assets.size() * kBuckets, 0) {}

  // Adds one event's lines; checks each trade sums to zero per asset and each
  // lock / release to zero per account and asset. Returns "" when they do.
  std::string Add(const Event& e) {
    lines_.clear();
    engine::AppendLedgerEntries(config_, e, &lines_);
    std::map<std::pair<uint32_t, uint16_t>, int128> per_account_asset;
    std::map<uint16_t, int128> per_asset;
    for (const engine::LedgerEntry& l : lines_) {
      if (Raw(l.account) >= config_.max_accounts || Raw(l.asset) >= config_.assets.size()) {
        return "ledger line for an unknown account or asset";
      }
      int64_t& s = sums_[Index(l.account, l.asset, l.bucket)];
      if (!CheckedAdd(s, l.delta, &s)) return "ledger sum overflow";
      per_account_asset[{Raw(l.account), Raw(l.asset)}] += l.delta;
      per_asset[Raw(l.asset)] += l.delta;
      if (Raw(l.seq) != Raw(e.seq)) return "ledger line with another sequence";
    }
    switch (e.type()) {
      case EventType::kTrade:
        for (const auto& [asset, sum] : per_asset) {
          if (sum != 0)
            return "trade ledger lines do not sum to zero for asset " + std::to_string(asset);
        }
        break;
      case EventType::kOrderAccepted:
      case EventType::kOrderCanceled:
      case EventType::kOrderExpired:
      case EventType::kOrderAmended:
        for (const auto& [key, sum] : per_account_asset) {
          if (sum != 0) return "lock/release ledger lines do not sum to zero";
        }
        break;
      case EventType::kTransferHeld:
      case EventType::kTransferRefunded:
        // available <-> held of one account: nothing enters or leaves.
        if (per_account_asset.empty()) return "a transfer's hold or refund has no ledger lines";
        for (const auto& [key, sum] : per_account_asset) {
          if (sum != 0) return "hold/refund ledger lines do not sum to zero";
        }
        break;
      case EventType::kTransferCompleted: {
        // What left for the destination: amount - fee; the fee stays here.
        const auto& t = std::get<engine::TransferCompleted>(e.body);
        if (per_asset.size() != 1 || per_asset.begin()->first != Raw(t.asset) ||
            per_asset.begin()->second != -(static_cast<int128>(t.amount.value) - t.fee.value)) {
          return "completed transfer ledger lines do not sum to -(amount - fee)";
        }
        break;
      }
      default:
        break;
    }
    return "";
  }

  // "" when every balance equals its ledger sums, and every account's held
  // bucket what its pending transfers hold.
  std::string Compare(const Engine& real) const {
    const std::vector<int64_t> held = HeldByAccount(real);
    for (uint32_t acc = 0; acc < config_.max_accounts; ++acc) {
      for (std::size_t a = 0; a < config_.assets.size(); ++a) {
        const AssetId asset{static_cast<uint16_t>(a)};
        const Balance b = real.balance(AccountId{acc}, asset);
        const int64_t avail = sums_[Index(AccountId{acc}, asset, engine::Bucket::kAvailable)];
        const int64_t locked = sums_[Index(AccountId{acc}, asset, engine::Bucket::kLocked)];
        const int64_t in_held = sums_[Index(AccountId{acc}, asset, engine::Bucket::kHeld)];
        const int64_t want_held = held[acc * config_.assets.size() + a];
        if (b.available.value != avail || b.locked.value != locked || in_held != want_held) {
          return "account " + std::to_string(acc) + " asset " + std::to_string(a) + ": balance " +
                 BalanceText(b) + " held " + std::to_string(want_held) +
                 ", ledger sums {available " + std::to_string(avail) + ", locked " +
                 std::to_string(locked) + ", held " + std::to_string(in_held) + "}";
        }
      }
    }
    return "";
  }

  // Continues from the engine's balances after a reported mismatch.
  void Resync(const Engine& real) {
    const std::vector<int64_t> held = HeldByAccount(real);
    for (uint32_t acc = 0; acc < config_.max_accounts; ++acc) {
      for (std::size_t a = 0; a < config_.assets.size(); ++a) {
        const AssetId asset{static_cast<uint16_t>(a)};
        const Balance b = real.balance(AccountId{acc}, asset);
        sums_[Index(AccountId{acc}, asset, engine::Bucket::kAvailable)] = b.available.value;
        sums_[Index(AccountId{acc}, asset, engine::Bucket::kLocked)] = b.locked.value;
        sums_[Index(AccountId{acc}, asset, engine::Bucket::kHeld)] =
            held[acc * config_.assets.size() + a];
      }
    }
  }

 private:
  std::size_t Index(AccountId acc, AssetId asset, engine::Bucket bucket) const {
    MB_CHECK(Raw(bucket) < kBuckets);
    return (Raw(acc) * config_.assets.size() + Raw(asset)) * kBuckets + Raw(bucket);
  }
  // What the pending transfers hold, per (account, asset).
  std::vector<int64_t> HeldByAccount(const Engine& real) const {
    std::vector<int64_t> held(config_.max_accounts * config_.assets.size(), 0);
    for (const engine::PendingTransfer& p : real.PendingTransfers()) {
      held[Raw(p.account) * config_.assets.size() + Raw(p.asset)] += p.amount.value;
    }
    return held;
  }

  const EngineConfig& config_;
  std::vector<int64_t> sums_;
  std::vector<engine::LedgerEntry> lines_;
};

// What the stream exercised, printed at the end so that coverage is visible.
class Coverage {
 public:
  void Add(const std::vector<Event>& events) {
    Stops(events);
    Lists(events);
    for (const Event& e : events) {
      ++by_type_[std::string(engine::ToString(e.type()))];
      if (const auto* r = std::get_if<engine::Rejected>(&e.body)) {
        ++rejects_[std::string(engine::ToString(r->command)) + "/" +
                   std::string(engine::ToString(r->reason))];
      }
      if (const auto* x = std::get_if<engine::OrderExpired>(&e.body)) {
        ++other_["expired/" + std::string(engine::ToString(x->reason))];
      }
      if (const auto* a = std::get_if<engine::OrderAmended>(&e.body)) {
        ++other_[a->keeps_priority ? "amend/keeps_priority" : "amend/loses_priority"];
      }
      if (const auto* t = std::get_if<engine::Trade>(&e.body)) {
        if (t->taker_released.value != 0) ++other_["trade/taker_released"];
        if (t->maker_account == t->taker_account) ++other_["trade/self"];
      }
      if (const auto* h = std::get_if<engine::TransferHeld>(&e.body)) {
        if (h->fee == h->amount) ++other_["transfer/all_fee"];
        if (h->account == AccountId{0}) ++other_["transfer/from_fee_account"];
      }
      if (const auto* r = std::get_if<engine::TransferRefunded>(&e.body)) {
        ++other_["refunded/" + std::string(engine::ToString(r->reason))];
      }
    }
  }
  uint64_t Events(std::string_view type) const { return Get(by_type_, type); }
  uint64_t Rejects(std::string_view command_reason) const { return Get(rejects_, command_reason); }
  uint64_t Other(std::string_view key) const { return Get(other_, key); }

  std::string Text() const {
    std::string s;
    auto dump = [&](const char* title, const std::map<std::string, uint64_t>& m) {
      s += std::string("  ") + title + ":";
      for (const auto& [k, v] : m) s += " " + k + "=" + std::to_string(v);
      s += "\n";
    };
    dump("events", by_type_);
    dump("rejects", rejects_);
    dump("other", other_);
    return s;
  }

 private:
  static uint64_t Get(const std::map<std::string, uint64_t>& m, std::string_view key) {
    auto it = m.find(std::string(key));
    return it == m.end() ? 0 : it->second;
  }

  // A waiting stop order, from its OrderAccepted and OrderArmed.
  struct Armed {
    OrderType type = OrderType::kStopLoss;
    Side side = Side::kBuy;
    bool trailing = false;
    bool stop_price = false;
    int64_t stop = 0;
  };

  // The lists' life: pending orders placed or refused, an OCO order canceled
  // because its sibling triggered (the OrderTriggered right after) or traded
  // (a Trade earlier in the command).
  void Lists(const std::vector<Event>& events) {
    std::vector<OrderId> traded;
    for (std::size_t i = 0; i < events.size(); ++i) {
      const Event& e = events[i];
      if (const auto* a = std::get_if<engine::ListAccepted>(&e.body)) {
        if (a->type != engine::ListType::kOto) {
          const int first = a->type == engine::ListType::kOco ? 0 : 1;
          sibling_[a->order_ids[first]] = a->order_ids[first + 1];
          sibling_[a->order_ids[first + 1]] = a->order_ids[first];
        }
        ++other_["list/accepted/" + std::string(engine::ToString(a->type))];
      }
      if (const auto* p = std::get_if<engine::OrderPending>(&e.body)) pending_.insert(p->order_id);
      if (const auto* a = std::get_if<engine::OrderAccepted>(&e.body)) {
        if (Raw(a->order_id) >= engine::kListOrderStride) ++other_["list/accepted_order_2_or_3"];
        if (pending_.erase(a->order_id) != 0) ++other_["list/pending_placed"];
      }
      if (const auto* r = std::get_if<engine::Rejected>(&e.body)) {
        if (r->command == CommandType::kPlaceOrderList && Raw(r->order_id) != 0) {
          ++other_["list/pending_rejected"];
          pending_.erase(r->order_id);
        }
      }
      if (const auto* t = std::get_if<engine::Trade>(&e.body)) {
        traded.push_back(t->maker_order_id);
        traded.push_back(t->taker_order_id);
      }
      if (const auto* c = std::get_if<engine::OrderCanceled>(&e.body)) {
        auto s = sibling_.find(c->order_id);
        if (s == sibling_.end()) continue;
        const OrderId other = s->second;
        if (i + 1 < events.size()) {
          const auto* t = std::get_if<engine::OrderTriggered>(&events[i + 1].body);
          if (t != nullptr && t->order_id == other) ++other_["list/oco_canceled_on_trigger"];
        }
        if (std::find(traded.begin(), traded.end(), other) != traded.end()) {
          ++other_["list/oco_canceled_on_trade"];
        }
      }
      if (const auto* d = std::get_if<engine::ListDone>(&e.body)) {
        // Forget the done list's orders.
        for (uint64_t k = 0; k < 3; ++k) {
          const OrderId id{d->list_id + k * engine::kListOrderStride};
          sibling_.erase(id);
          pending_.erase(id);
        }
      }
    }
  }
  std::map<OrderId, OrderId> sibling_;  // OCO orders of open lists
  std::set<OrderId> pending_;           // announced, not yet placed or refused

  // The conditional orders' life: armed, canceled while waiting, triggered
  // (by type, side, trailing or not), and what a triggered order did next.
  void Stops(const std::vector<Event>& events) {
    std::map<OrderId, Armed> triggered;  // this command's
    OrderType accepted_type = OrderType::kLimit;
    bool canceled = false;  // this command canceled an order (a cancel-replace's cancel, say)
    bool first_canceled_waiting = false;
    for (const Event& e : events) {
      if (const auto* a = std::get_if<engine::OrderAccepted>(&e.body)) {
        accepted_type = a->terms.type;
      }
      if (const auto* a = std::get_if<engine::OrderArmed>(&e.body)) {
        armed_[a->order_id] = Armed{accepted_type, a->side, a->trailing_delta != 0,
                                    a->stop_price.value != 0, a->stop_price.value};
        ++other_[a->trailing_delta == 0     ? "armed/plain"
                 : a->stop_price.value == 0 ? "armed/trailing"
                                            : "armed/trailing_with_stop"];
        if (canceled) ++other_["armed/replacing_an_order"];
      }
      if (const auto* c = std::get_if<engine::OrderCanceled>(&e.body)) {
        canceled = true;
        if (armed_.erase(c->order_id) != 0) {
          ++other_["canceled/waiting"];
          first_canceled_waiting = first_canceled_waiting || &e == &events.front();
        }
      }
      if (const auto* t = std::get_if<engine::OrderTriggered>(&e.body)) {
        auto it = armed_.find(t->order_id);
        if (it == armed_.end()) {
          ++other_["triggered/never_armed"];
          continue;
        }
        const Armed& a = it->second;
        triggered[t->order_id] = a;
        ++other_["triggered/" + std::string(engine::ToString(a.type)) + "/" +
                 std::string(engine::ToString(a.side))];
        if (a.trailing) {
          ++other_[a.stop_price ? "triggered/trailing_with_stop" : "triggered/trailing"];
        }
        if (t->lock_delta.value != 0) ++other_["triggered/locked_at_trigger"];
        if (!a.trailing) {
          // Met by a trade of the command, not by the last price.
          const bool stop_loss =
              a.type == OrderType::kStopLoss || a.type == OrderType::kStopLossLimit;
          const bool rise = stop_loss == (a.side == Side::kBuy);
          const int64_t last = t->last_price.value;
          if (rise ? last < a.stop : last > a.stop) ++other_["triggered/by_an_earlier_trade"];
        }
        armed_.erase(it);
      }
      if (const auto* t = std::get_if<engine::Trade>(&e.body)) {
        if (triggered.count(t->taker_order_id) != 0) ++other_["triggered/traded"];
        if (triggered.count(t->maker_order_id) != 0) ++other_["triggered/traded_as_maker"];
      }
      if (const auto* r = std::get_if<engine::OrderRested>(&e.body)) {
        if (triggered.count(r->order_id) != 0) ++other_["triggered/rested"];
      }
      if (const auto* x = std::get_if<engine::OrderExpired>(&e.body)) {
        if (triggered.count(x->order_id) != 0) {
          ++other_["triggered_expired/" + std::string(engine::ToString(x->reason))];
        }
      }
    }
    if (triggered.size() >= 2) ++other_["triggered/several_in_one_command"];
    // A cancel-replace whose cancel took a waiting order: the new order's
    // OrderAccepted or Rejected follows (after a CancelAll, another cancel).
    if (first_canceled_waiting && events.size() >= 2 &&
        (std::holds_alternative<engine::OrderAccepted>(events[1].body) ||
         std::holds_alternative<engine::Rejected>(events[1].body))) {
      ++other_["replaced/waiting"];
    }
  }

  std::map<OrderId, Armed> armed_;  // waiting, as far as the events tell

  std::map<std::string, uint64_t> by_type_;
  std::map<std::string, uint64_t> rejects_;
  std::map<std::string, uint64_t> other_;
};

// ---------------------------------------------------------------------------
// Shrinking a failing stream (MB_SHRINK=1): delta debugging over the commands,
// keeping any event mismatch between the two engines.

std::optional<std::size_t> FirstMismatch(const EngineConfig& config,
                                         const std::vector<engine::Command>& commands) {
  Engine real(config);
  ReferenceEngine ref(config);
  engine::EventBuffer events;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    events.clear();
    real.Process(commands[i], &events);
    if (!SameEvents(events, ref.Process(commands[i]))) return i;
    if (!real.CheckInvariants().ok()) return i;
  }
  return std::nullopt;
}

std::string Shrink(const EngineConfig& config, std::vector<engine::Command> commands) {
  const auto start = std::chrono::steady_clock::now();
  auto out_of_time = [&] {
    return std::chrono::steady_clock::now() - start > std::chrono::minutes(3);
  };
  auto first = FirstMismatch(config, commands);
  if (!first) return "  (shrink: the failure did not reproduce)\n";
  commands.resize(*first + 1);
  std::size_t parts = 2;
  while (commands.size() >= 2 && !out_of_time()) {
    const std::size_t chunk = (commands.size() + parts - 1) / parts;
    bool reduced = false;
    for (std::size_t begin = 0; begin < commands.size() && !out_of_time(); begin += chunk) {
      std::vector<engine::Command> rest(commands.begin(),
                                        commands.begin() + static_cast<std::ptrdiff_t>(begin));
      const std::size_t end = std::min(commands.size(), begin + chunk);
      rest.insert(rest.end(), commands.begin() + static_cast<std::ptrdiff_t>(end), commands.end());
      if (auto f = FirstMismatch(config, rest)) {
        rest.resize(*f + 1);
        commands = std::move(rest);
        parts = std::max<std::size_t>(parts - 1, 2);
        reduced = true;
        break;
      }
    }
    if (!reduced) {
      if (parts >= commands.size()) break;
      parts = std::min(commands.size(), parts * 2);
    }
  }
  // Print the small stream with both engines' events.
  std::string s = "  shrunk to " + std::to_string(commands.size()) + " commands:\n";
  Engine real(config);
  ReferenceEngine ref(config);
  engine::EventBuffer events;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    events.clear();
    real.Process(commands[i], &events);
    const std::vector<Event> want = ref.Process(commands[i]);
    s += "  [" + std::to_string(i) + "] " + ToText(commands[i]) + "\n";
    if (SameEvents(events, want)) {
      s += ToText(events);
    } else {
      s += "   real:\n" + ToText(events) + "   reference:\n" + ToText(want);
    }
  }
  if (Status st = real.CheckInvariants(); !st.ok()) {
    s += "  then real.CheckInvariants(): " + st.message() + "\n";
  }
  return s;
}

// ---------------------------------------------------------------------------
// The property test

volatile std::sig_atomic_t g_running = 0;
uint64_t g_seed = 0;
uint64_t g_index = 0;

extern "C" void OnAbort(int) {
  if (g_running != 0) {
    std::fprintf(stderr, "\n[property] aborted at command #%llu (seq %llu), MB_SEED=%llu\n",
                 static_cast<unsigned long long>(g_index),
                 static_cast<unsigned long long>(g_index + 1),
                 static_cast<unsigned long long>(g_seed));
  }
}

// The random command stream through the real engine and the reference, under
// one client order id rule.
void MatchesReference(engine::ClientOrderIds rule) {
  const uint64_t seed = EnvU64("MB_SEED", kDefaultSeed);
  const uint64_t n = EnvU64("MB_PROPERTY_COMMANDS", kDefaultCommands);
  const uint64_t replay_every = std::max<uint64_t>(1, EnvU64("MB_REPLAY_EVERY", 100));
  const bool dirty = EnvU64("MB_PROPERTY_CLEAN", 0) == 0;
  std::printf("[property] MB_SEED=%llu MB_PROPERTY_COMMANDS=%llu\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(n));
  g_seed = seed;
  g_running = 1;
  std::signal(SIGABRT, OnAbort);
  const auto started = std::chrono::steady_clock::now();

  const EngineConfig config = [rule] {
    EngineConfig c = ValidConfig();
    c.client_order_ids = rule;
    return c;
  }();
  Engine real(config);
  Engine replay(config);
  std::optional<Engine> restored;
  ReferenceEngine ref(config);
  Generator gen(seed, config, dirty);
  LedgerSums ledger(config);
  EventHasher hasher;
  Coverage coverage;
  std::vector<engine::Command> commands;
  commands.reserve(n);
  engine::EventBuffer events;
  engine::EventBuffer restored_events;
  uint64_t ledger_mismatches = 0;
  std::string first_ledger_mismatch;
  // What the snapshots carried, summed over them.
  std::size_t snapshot_icebergs = 0;
  std::size_t snapshot_lists = 0;
  std::size_t snapshot_pending = 0;

  auto header = [&](uint64_t i, const engine::Command& cmd) {
    return "MB_SEED=" + std::to_string(seed) + ", command #" + std::to_string(i) + " (seq " +
           std::to_string(i + 1) + "):\n  " + ToText(cmd) + "\n";
  };

  for (uint64_t i = 0; i < n; ++i) {
    g_index = i;
    const engine::Command cmd = gen.Next(ref);
    commands.push_back(cmd);
    events.clear();
    real.Process(cmd, &events);
    const std::vector<Event> want = ref.Process(cmd);
    if (!SameEvents(events, want)) {
      std::string msg = header(i, cmd) + "  events differ\n  real:\n" + ToText(events) +
                        "  reference:\n" + ToText(want);
      if (EnvU64("MB_SHRINK", 0) != 0) msg += Shrink(config, commands);
      g_running = 0;
      FAIL() << msg;
    }
    gen.Observe(want);
    coverage.Add(events);

    // Replay through Apply, the ledger view, the event hash.
    std::string ledger_err;
    for (const Event& e : events) {
      replay.Apply(e);
      hasher.Add(e);
      if (std::string err = ledger.Add(e); !err.empty() && ledger_err.empty()) {
        ledger_err = err + " in " + ToText(e);
      }
    }
    if (ledger_err.empty()) ledger_err = ledger.Compare(real);
    if (!ledger_err.empty()) {
      if (ledger_mismatches++ == 0) {
        first_ledger_mismatch = header(i, cmd) + "  events:\n" + ToText(events) + "  " + ledger_err;
      }
      ledger.Resync(real);
    }

    // A restored snapshot keeps running in step with the live engine.
    if (restored) {
      restored_events.clear();
      restored->Process(cmd, &restored_events);
      if (!SameEvents(restored_events, events)) {
        g_running = 0;
        FAIL() << header(i, cmd) << "  the engine restored from the last snapshot diverged\n"
               << "  live:\n"
               << ToText(events) << "  restored:\n"
               << ToText(restored_events);
      }
    }

    const bool deep = (i + 1) % 100 == 0 || i + 1 == n;
    if (std::string err = CheckState(real, ref, deep); !err.empty()) {
      g_running = 0;
      std::string msg = header(i, cmd) + "  events:\n" + ToText(events) + "  " + err;
      if (EnvU64("MB_SHRINK", 0) != 0) msg += Shrink(config, commands);
      FAIL() << msg;
    }
    if ((i + 1) % replay_every == 0 || i + 1 == n) {
      if (replay.StateHash() != real.StateHash()) {
        g_running = 0;
        FAIL() << header(i, cmd) << "  the engine replaying the events through Apply() has "
               << "another StateHash than the live engine\n  events:\n"
               << ToText(events);
      }
    }

    if ((i + 1) % kSnapshotEvery == 0) {
      if (restored && restored->StateHash() != real.StateHash()) {
        g_running = 0;
        FAIL() << header(i, cmd) << "  the restored engine's state drifted";
      }
      const engine::EngineImage image = real.ExportImage();
      const std::vector<std::byte> bytes = codec::EncodeImage(image);
      Result<engine::EngineImage> decoded = codec::DecodeImage(bytes);
      if (!decoded.ok()) {
        g_running = 0;
        FAIL() << header(i, cmd) << "  DecodeImage: " << decoded.status().message();
      }
      Engine fresh(config);
      if (Status st = fresh.Restore(*decoded); !st.ok()) {
        g_running = 0;
        FAIL() << header(i, cmd) << "  Restore: " << st.message();
      }
      if (fresh.StateHash() != real.StateHash()) {
        g_running = 0;
        FAIL() << header(i, cmd) << "  restored StateHash differs from the live engine's";
      }
      if (codec::EncodeImage(fresh.ExportImage()) != bytes) {
        g_running = 0;
        FAIL() << header(i, cmd) << "  a restored engine exports another image";
      }
      restored.emplace(std::move(fresh));
      snapshot_icebergs += image.icebergs.size();
      snapshot_lists += image.lists.size();
      snapshot_pending += image.pending.size();
      std::printf(
          "[property] %llu commands, %zu open orders (%zu waiting, %zu icebergs), %zu lists "
          "(%zu pending orders), %zu pending transfers\n",
          static_cast<unsigned long long>(i + 1), real.open_orders(), image.stops.size(),
          image.icebergs.size(), image.lists.size(), image.pending.size(),
          image.pending_transfers.size());
    }
  }
  g_running = 0;

  // Determinism: the same commands through a new engine give the same events.
  Engine again(config);
  EventHasher again_hasher;
  for (const engine::Command& cmd : commands) {
    events.clear();
    again.Process(cmd, &events);
    for (const Event& e : events) again_hasher.Add(e);
  }
  EXPECT_EQ(again_hasher.value(), hasher.value())
      << "MB_SEED=" << seed << ": a second run emitted other events";
  EXPECT_EQ(again.StateHash(), real.StateHash()) << "MB_SEED=" << seed;

  EXPECT_EQ(ledger_mismatches, 0u)
      << "MB_SEED=" << seed << ": the ledger view of the events "
      << "does not reproduce the balances (" << ledger_mismatches << " commands); first:\n"
      << first_ledger_mismatch;

  // The stream exercised the transfers to other venues, accepted and refused.
  if (n >= 20'000) {
    for (const char* type : {"TransferHeld", "TransferCompleted", "TransferRefunded"}) {
      EXPECT_GT(coverage.Events(type), 0u) << type;
    }
    for (const char* reject :
         {"TransferOut/DuplicateTransfer", "TransferOut/InsufficientBalance",
          "TransferOut/InvalidAmount", "TransferOut/UnknownAccount", "TransferOut/UnknownAsset",
          "ResolveTransfer/UnknownTransfer", "ResolveTransfer/InvalidStatus"}) {
      EXPECT_GT(coverage.Rejects(reject), 0u) << reject;
    }
    // ... and the conditional orders: each type and side triggered, trailing
    // stops with and without an activation price, a triggered stop-market buy
    // that could not pay and a FOK one that could not fill, several triggers
    // in one command, and every refusal of the stop fields.
    EXPECT_GT(coverage.Events("OrderArmed"), 0u);
    EXPECT_GT(coverage.Events("OrderTriggered"), 0u);
    for (const char* key : {"triggered/STOP_LOSS/BUY",
                            "triggered/STOP_LOSS/SELL",
                            "triggered/STOP_LOSS_LIMIT/BUY",
                            "triggered/STOP_LOSS_LIMIT/SELL",
                            "triggered/TAKE_PROFIT/BUY",
                            "triggered/TAKE_PROFIT/SELL",
                            "triggered/TAKE_PROFIT_LIMIT/BUY",
                            "triggered/TAKE_PROFIT_LIMIT/SELL",
                            "triggered/trailing",
                            "triggered/trailing_with_stop",
                            "triggered/locked_at_trigger",
                            "triggered/traded",
                            "triggered/rested",
                            "triggered/several_in_one_command",
                            "triggered_expired/InsufficientBalance",
                            "triggered_expired/FokNotFillable",
                            "triggered_expired/NoLiquidity",
                            "triggered_expired/IocRemainder",
                            "canceled/waiting",
                            "armed/replacing_an_order",
                            "replaced/waiting"}) {
      EXPECT_GT(coverage.Other(key), 0u) << key;
    }
    EXPECT_EQ(coverage.Other("triggered/never_armed"), 0u);
    // ... icebergs and order lists, in the snapshots too.
    EXPECT_GT(snapshot_icebergs, 0u);
    EXPECT_GT(snapshot_lists, 0u);
    EXPECT_GT(snapshot_pending, 0u);
    for (const char* type :
         {"IcebergAccepted", "IcebergRefilled", "ListAccepted", "OrderPending", "ListDone"}) {
      EXPECT_GT(coverage.Events(type), 0u) << type;
    }
    for (const char* key : {"list/accepted/OCO", "list/accepted/OTO", "list/accepted/OTOCO",
                            "list/accepted_order_2_or_3", "list/pending_placed",
                            "list/pending_rejected", "list/oco_canceled_on_trigger",
                            "list/oco_canceled_on_trade", "triggered/by_an_earlier_trade"}) {
      EXPECT_GT(coverage.Other(key), 0u) << key;
    }
    for (const char* reject :
         {"PlaceOrder/InvalidIcebergQty", "PlaceOrderList/InvalidOrderList",
          "PlaceOrderList/DuplicateClientOrderId", "PlaceOrderList/InsufficientBalance",
          "CancelOrderList/UnknownOrderList"}) {
      EXPECT_GT(coverage.Rejects(reject), 0u) << reject;
    }
    for (const char* reject : {"PlaceOrder/WouldTriggerImmediately", "PlaceOrder/InvalidStopPrice",
                               "PlaceOrder/InvalidTrailingDelta", "AmendOrder/InvalidOrderType"}) {
      EXPECT_GT(coverage.Rejects(reject), 0u) << reject;
    }
  }

  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf(
      "[property] %llu commands in %.1f s, %zu open orders at the end, event hash %016llx\n%s",
      static_cast<unsigned long long>(n), secs, real.open_orders(),
      static_cast<unsigned long long>(hasher.value()), coverage.Text().c_str());
}

TEST(PropertyTest, RealEngineMatchesReference) {
  MatchesReference(engine::ClientOrderIds::kBinance);
}

TEST(PropertyTest, RealEngineMatchesReferenceWithIdempotentClientOrderIds) {
  MatchesReference(engine::ClientOrderIds::kIdempotent);
}

// The generator itself is reproducible: same seed, same commands.
TEST(PropertyTest, SameSeedSameCommands) {
  const EngineConfig config = ValidConfig();
  auto run = [&](uint64_t seed) {
    ReferenceEngine ref(config);
    Generator gen(seed, config, true);
    std::vector<engine::Command> out;
    for (int i = 0; i < 3000; ++i) {
      out.push_back(gen.Next(ref));
      gen.Observe(ref.Process(out.back()));
    }
    return out;
  };
  const auto a = run(7);
  const auto b = run(7);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(ToText(a[i]), ToText(b[i])) << i;
}

// ---------------------------------------------------------------------------
// Scenarios: small hand-written streams that pin the trickiest rules. Each
// command runs on both engines, which must agree; the expectations are the
// numbers docs/engine.md gives, checked on the real engine's events.

constexpr MarketId kBtcUsdt{0};  // npt 10, lot 1000, maker 7 / taker 13 bps
constexpr MarketId kEthUsdt{1};  // npt 100, lot 10000, maker 0 / taker 10 bps
constexpr MarketId kEthBtc{2};   // npt 1, lot 100000, maker 3 / taker 25 bps
constexpr AssetId kBtc{0};
constexpr AssetId kEth{1};
constexpr AssetId kUsdt{2};
constexpr AccountId kFee{0};
constexpr AccountId kAlice{1};
constexpr AccountId kBob{2};
constexpr AccountId kCarol{3};
constexpr AccountId kDave{4};  // funded by the test that uses it

class Scenario : public ::testing::Test {
 protected:
  Scenario() : config_(ValidConfig()), real_(config_), ref_(config_), ledger_(config_) {
    for (AccountId a : {kAlice, kBob, kCarol}) {
      Fund(a, kBtc, 100'000'000'000);       // 1000 BTC
      Fund(a, kEth, 1'000'000'000'000);     // 10000 ETH
      Fund(a, kUsdt, 100'000'000'000'000);  // 1M USDT
    }
  }

  std::vector<Event> Run(engine::CommandBody body) {
    engine::Command c;
    c.timestamp_ns = ts_ += 10;
    c.body = body;
    engine::EventBuffer got;
    real_.Process(c, &got);
    const std::vector<Event> want = ref_.Process(c);
    EXPECT_TRUE(SameEvents(got, want)) << ToText(c) << "\n real:\n"
                                       << ToText(got) << " reference:\n"
                                       << ToText(want);
    for (const Event& e : got) {
      std::string err = ledger_.Add(e);
      EXPECT_EQ(err, "") << ToText(e);
    }
    EXPECT_EQ(CheckState(real_, ref_, true), "") << ToText(c);
    return got;
  }

  void Fund(AccountId a, AssetId asset, int64_t amount) {
    engine::Deposit d;
    d.account = a;
    d.asset = asset;
    d.amount = Amount{amount};
    d.ref = TransferRef::From("fund-" + std::to_string(next_ref_++));
    Run(d);
  }

  std::vector<Event> Place(AccountId a, MarketId m, Side side, OrderType type, TimeInForce tif,
                           int64_t price, int64_t qty, StpMode stp = StpMode::kNone,
                           int64_t quote_qty = 0, std::string_view cid = "") {
    engine::PlaceOrder p;
    p.account = a;
    p.market = m;
    p.side = side;
    p.type = type;
    p.tif = tif;
    p.stp = stp;
    p.price = Price{price};
    p.qty = Qty{qty};
    p.quote_qty = Amount{quote_qty};
    p.client_order_id = ClientOrderId::From(cid);
    return Run(p);
  }
  // A STOP_LOSS(_LIMIT) / TAKE_PROFIT(_LIMIT) order; price 0 for the
  // stop-market ones.
  std::vector<Event> Stop(AccountId a, MarketId m, Side side, OrderType type, int64_t stop,
                          int32_t delta, int64_t qty, int64_t price = 0,
                          TimeInForce tif = TimeInForce::kGtc) {
    engine::PlaceOrder p;
    p.account = a;
    p.market = m;
    p.side = side;
    p.type = type;
    p.tif = price == 0 ? TimeInForce::kIoc : tif;
    p.price = Price{price};
    p.qty = Qty{qty};
    p.stop_price = Price{stop};
    p.trailing_delta = delta;
    return Run(p);
  }
  // One trade at `price` between Alice (maker, selling) and Bob (taker):
  // the market's last price becomes `price`. Returns Bob's events.
  std::vector<Event> TradeAt(MarketId m, int64_t price, int64_t qty) {
    Limit(kAlice, m, Side::kSell, price, qty);
    return Limit(kBob, m, Side::kBuy, price, qty, StpMode::kNone, TimeInForce::kIoc);
  }
  std::vector<Event> Limit(AccountId a, MarketId m, Side side, int64_t price, int64_t qty,
                           StpMode stp = StpMode::kNone, TimeInForce tif = TimeInForce::kGtc) {
    return Place(a, m, side, OrderType::kLimit, tif, price, qty, stp);
  }

  uint64_t NextSeq() const { return Raw(real_.last_sequence()) + 1; }
  Balance Bal(AccountId a, AssetId asset) const { return real_.balance(a, asset); }
  void ExpectLedgerMatches() { EXPECT_EQ(ledger_.Compare(real_), ""); }

  EngineConfig config_;
  Engine real_;
  ReferenceEngine ref_;
  LedgerSums ledger_;
  int64_t ts_ = 1'000'000;
  uint64_t next_ref_ = 1;
};

template <class T>
const T& As(const std::vector<Event>& events, std::size_t i) {
  static const T kEmpty{};
  if (i >= events.size() || !std::holds_alternative<T>(events[i].body)) {
    ADD_FAILURE() << "event " << i << " is not " << Fields<T>::kType << ":\n" << ToText(events);
    return kEmpty;
  }
  return std::get<T>(events[i].body);
}

TEST_F(Scenario, PriceImprovementIsReleasedByTheCompletingFill) {
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 50);
  const Balance before = Bal(kBob, kUsdt);
  const auto ev = Limit(kBob, kBtcUsdt, Side::kBuy, 3'000'010, 50);
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  EXPECT_EQ(As<engine::OrderAccepted>(ev, 0).locked.value, 3'000'010LL * 50 * 10);
  const auto& t = As<engine::Trade>(ev, 1);
  EXPECT_EQ(t.price.value, 3'000'000);
  EXPECT_EQ(t.notional.value, 1'500'000'000);
  EXPECT_EQ(t.base_qty.value, 50'000);
  EXPECT_EQ(t.taker_fee.value, 65);         // ceil(50000 * 13 / 10000) BTC units
  EXPECT_EQ(t.maker_fee.value, 1'050'000);  // ceil(1.5e9 * 7 / 10000) USDT units
  EXPECT_EQ(t.taker_released.value, 10LL * 50 * 10);
  EXPECT_TRUE(t.maker_filled);
  EXPECT_TRUE(t.taker_filled);
  EXPECT_EQ(Bal(kBob, kUsdt).available.value, before.available.value - 1'500'000'000);
  EXPECT_EQ(Bal(kBob, kUsdt).locked.value, 0);
  EXPECT_EQ(Bal(kFee, kBtc).available.value, 65);
  EXPECT_EQ(Bal(kFee, kUsdt).available.value, 1'050'000);
  ExpectLedgerMatches();
}

TEST_F(Scenario, PriceImprovementIsReleasedWhenTheRemainderRests) {
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 50);
  const uint64_t id = NextSeq();
  const auto ev = Limit(kBob, kBtcUsdt, Side::kBuy, 3'000'010, 80);
  ASSERT_EQ(ev.size(), 3u) << ToText(ev);
  EXPECT_EQ(As<engine::Trade>(ev, 1).taker_released.value, 0);
  EXPECT_FALSE(As<engine::Trade>(ev, 1).taker_filled);
  // 80 lots locked at the limit, 50 bought 10 ticks below it: the surplus comes
  // back as the 30 left rest, which then lock exactly price x remaining x npt.
  const auto& r = As<engine::OrderRested>(ev, 2);
  EXPECT_EQ(r.remaining.value, 30);
  EXPECT_EQ(r.account, kBob);
  EXPECT_EQ(r.side, Side::kBuy);
  EXPECT_EQ(r.released.value, 10LL * 50 * 10);
  const int64_t exact = 3'000'010LL * 30 * 10;
  EXPECT_EQ(Bal(kBob, kUsdt).locked.value, exact);
  engine::CancelOrder c;
  c.account = kBob;
  c.market = kBtcUsdt;
  c.order_id = OrderId{id};
  const auto cev = Run(c);
  EXPECT_EQ(As<engine::OrderCanceled>(cev, 0).released.value, exact);
  EXPECT_EQ(As<engine::OrderCanceled>(cev, 0).remaining.value, 30);
  EXPECT_EQ(Bal(kBob, kUsdt).locked.value, 0);
  ExpectLedgerMatches();
}

// The rested remainder of a price-improved buy later fills as a maker with
// nothing left locked, and the ledger follows every step.
TEST_F(Scenario, RestedRemainderFillsAsMakerWithNothingLeftLocked) {
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 50);
  Limit(kBob, kBtcUsdt, Side::kBuy, 3'000'010, 100);  // 50 filled below the limit, 50 rest
  const auto ev = Limit(kCarol, kBtcUsdt, Side::kSell, 3'000'010, 50);
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  EXPECT_TRUE(As<engine::Trade>(ev, 1).maker_filled);
  EXPECT_EQ(Bal(kBob, kUsdt).locked.value, 0);
  ExpectLedgerMatches();
}

// A rested sell returns nothing.
TEST_F(Scenario, RestedSellReleasesNothing) {
  Limit(kAlice, kBtcUsdt, Side::kBuy, 3'000'010, 50);
  const auto ev = Limit(kBob, kBtcUsdt, Side::kSell, 3'000'000, 80);
  ASSERT_EQ(ev.size(), 3u) << ToText(ev);
  EXPECT_EQ(As<engine::Trade>(ev, 1).price.value, 3'000'010);
  EXPECT_EQ(As<engine::OrderRested>(ev, 2).released.value, 0);
  EXPECT_EQ(Bal(kBob, kBtc).locked.value, 30 * 1'000);
}

TEST_F(Scenario, StpExpireTaker) {
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 50);
  Limit(kBob, kBtcUsdt, Side::kSell, 3'000'000, 50);
  const uint64_t id = NextSeq();
  const auto ev = Limit(kAlice, kBtcUsdt, Side::kBuy, 3'000'000, 100, StpMode::kExpireTaker);
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  const auto& x = As<engine::OrderExpired>(ev, 1);
  EXPECT_EQ(Raw(x.order_id), id);
  EXPECT_EQ(x.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(x.remaining.value, 100);
  EXPECT_EQ(x.released.value, 3'000'000LL * 100 * 10);
  EXPECT_EQ(real_.open_orders(), 2u);
}

TEST_F(Scenario, StpExpireMakerThenTrades) {
  const uint64_t own = NextSeq();
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 50);
  Limit(kBob, kBtcUsdt, Side::kSell, 3'000'000, 50);
  const auto ev = Limit(kAlice, kBtcUsdt, Side::kBuy, 3'000'000, 100, StpMode::kExpireMaker);
  ASSERT_EQ(ev.size(), 4u) << ToText(ev);
  const auto& x = As<engine::OrderExpired>(ev, 1);
  EXPECT_EQ(Raw(x.order_id), own);
  EXPECT_EQ(x.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(x.released.value, 50'000);
  EXPECT_EQ(As<engine::Trade>(ev, 2).maker_account, kBob);
  EXPECT_EQ(As<engine::OrderRested>(ev, 3).remaining.value, 50);
}

TEST_F(Scenario, StpExpireBoth) {
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 50);
  Limit(kBob, kBtcUsdt, Side::kSell, 3'000'000, 50);
  const auto ev = Limit(kAlice, kBtcUsdt, Side::kBuy, 3'000'000, 100, StpMode::kExpireBoth);
  ASSERT_EQ(ev.size(), 3u) << ToText(ev);
  EXPECT_EQ(As<engine::OrderExpired>(ev, 1).account, kAlice);
  EXPECT_EQ(As<engine::OrderExpired>(ev, 1).side, Side::kSell);
  EXPECT_EQ(As<engine::OrderExpired>(ev, 2).side, Side::kBuy);
  EXPECT_EQ(real_.open_orders(), 1u);
}

TEST_F(Scenario, StpNoneTradesWithItself) {
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 50);
  const auto ev = Limit(kAlice, kBtcUsdt, Side::kBuy, 3'000'000, 50, StpMode::kNone);
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  const auto& t = As<engine::Trade>(ev, 1);
  EXPECT_EQ(t.maker_account, kAlice);
  EXPECT_EQ(t.taker_account, kAlice);
  EXPECT_EQ(t.taker_fee.value, 65);
  EXPECT_EQ(t.maker_fee.value, 1'050'000);
  ExpectLedgerMatches();
}

// The taker's mode decides: a NONE taker trades with its own EXPIRE_TAKER maker.
TEST_F(Scenario, StpTakerModeDecides) {
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 50, StpMode::kExpireTaker);
  const auto ev = Limit(kAlice, kBtcUsdt, Side::kBuy, 3'000'000, 50, StpMode::kNone);
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  As<engine::Trade>(ev, 1);
}

TEST_F(Scenario, QuoteBudgetBuyStopsOnDust) {
  Limit(kAlice, kEthBtc, Side::kSell, 6'000, 4);
  Limit(kBob, kEthBtc, Side::kSell, 6'001, 5);
  const auto ev = Place(kCarol, kEthBtc, Side::kBuy, OrderType::kMarket, TimeInForce::kIoc, 0, 0,
                        StpMode::kNone, 24'000 + 12'002 + 5'000);
  ASSERT_EQ(ev.size(), 4u) << ToText(ev);
  EXPECT_EQ(As<engine::OrderAccepted>(ev, 0).locked.value, 41'002);
  EXPECT_EQ(As<engine::Trade>(ev, 1).qty.value, 4);
  EXPECT_EQ(As<engine::Trade>(ev, 2).qty.value, 2);  // floor(17002 / 6001)
  EXPECT_FALSE(As<engine::Trade>(ev, 2).taker_filled);
  const auto& x = As<engine::OrderExpired>(ev, 3);
  EXPECT_EQ(x.reason, ExpireReason::kQuoteBudgetSpent);  // 3 lots at 6001 left on the book
  EXPECT_EQ(x.released.value, 5'000);
  EXPECT_EQ(Bal(kCarol, kBtc).locked.value, 0);
  ExpectLedgerMatches();
}

TEST_F(Scenario, QuoteBudgetBuySpentExactlyIsFilled) {
  Limit(kAlice, kEthBtc, Side::kSell, 6'000, 4);
  Limit(kBob, kEthBtc, Side::kSell, 6'001, 5);
  const auto ev = Place(kCarol, kEthBtc, Side::kBuy, OrderType::kMarket, TimeInForce::kIoc, 0, 0,
                        StpMode::kNone, 24'000 + 6'001 * 2);
  ASSERT_EQ(ev.size(), 3u) << ToText(ev);
  EXPECT_TRUE(As<engine::Trade>(ev, 2).taker_filled);
  EXPECT_EQ(As<engine::Trade>(ev, 2).taker_released.value, 0);
}

TEST_F(Scenario, QuoteBudgetSellLocksWhatTheWalkSells) {
  Limit(kAlice, kEthBtc, Side::kBuy, 6'000, 4);
  Limit(kBob, kEthBtc, Side::kBuy, 5'999, 4);
  const auto ev = Place(kCarol, kEthBtc, Side::kSell, OrderType::kMarket, TimeInForce::kIoc, 0, 0,
                        StpMode::kNone, 30'000);
  // 4 lots at 6000 (24000), 1 lot at 5999 (5999); 1 left: dust.
  ASSERT_EQ(ev.size(), 4u) << ToText(ev);
  EXPECT_EQ(As<engine::OrderAccepted>(ev, 0).locked.value, 5 * 100'000);
  EXPECT_EQ(As<engine::Trade>(ev, 1).qty.value, 4);
  EXPECT_EQ(As<engine::Trade>(ev, 2).qty.value, 1);
  EXPECT_EQ(As<engine::OrderExpired>(ev, 3).reason, ExpireReason::kQuoteBudgetSpent);
  EXPECT_EQ(As<engine::OrderExpired>(ev, 3).released.value, 0);
  ExpectLedgerMatches();
}

TEST_F(Scenario, MarketBuyByQtyLocksTheWalkCost) {
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 40);
  Limit(kBob, kBtcUsdt, Side::kSell, 3'000'005, 40);
  const auto ev = Place(kCarol, kBtcUsdt, Side::kBuy, OrderType::kMarket, TimeInForce::kIoc, 0, 60);
  ASSERT_EQ(ev.size(), 3u) << ToText(ev);
  EXPECT_EQ(As<engine::OrderAccepted>(ev, 0).locked.value,
            3'000'000LL * 40 * 10 + 3'000'005LL * 20 * 10);
  EXPECT_TRUE(As<engine::Trade>(ev, 2).taker_filled);
  EXPECT_EQ(As<engine::Trade>(ev, 2).taker_released.value, 0);
}

TEST_F(Scenario, MarketBuyWalkSkipsOwnOrdersWithExpireMaker) {
  Limit(kCarol, kBtcUsdt, Side::kSell, 3'000'000, 40);
  Limit(kBob, kBtcUsdt, Side::kSell, 3'000'005, 40);
  const auto ev = Place(kCarol, kBtcUsdt, Side::kBuy, OrderType::kMarket, TimeInForce::kIoc, 0, 60,
                        StpMode::kExpireMaker);
  ASSERT_EQ(ev.size(), 4u) << ToText(ev);
  EXPECT_EQ(As<engine::OrderAccepted>(ev, 0).locked.value, 3'000'005LL * 40 * 10);
  As<engine::OrderExpired>(ev, 1);
  As<engine::Trade>(ev, 2);
  EXPECT_EQ(As<engine::OrderExpired>(ev, 3).reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(As<engine::OrderExpired>(ev, 3).remaining.value, 20);
  EXPECT_EQ(As<engine::OrderExpired>(ev, 3).released.value, 0);
}

// A FOK that cannot fill completely is accepted, then expires whole with its
// whole lock released: no trade, and balances and book as before.
void ExpectFokExpired(const std::vector<Event>& ev, uint64_t id, int64_t qty, int64_t lock) {
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  const auto& a = As<engine::OrderAccepted>(ev, 0);
  EXPECT_EQ(Raw(a.order_id), id);
  EXPECT_EQ(a.terms.tif, TimeInForce::kFok);
  EXPECT_EQ(a.locked.value, lock);
  const auto& x = As<engine::OrderExpired>(ev, 1);
  EXPECT_EQ(Raw(x.order_id), id);
  EXPECT_EQ(x.reason, ExpireReason::kFokNotFillable);
  EXPECT_EQ(x.remaining.value, qty);
  EXPECT_EQ(x.released.value, lock);
}

TEST_F(Scenario, FokStopsAtOwnOrderWithExpireTaker) {
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 50);
  Limit(kBob, kBtcUsdt, Side::kSell, 3'000'001, 50);
  const Balance usdt = Bal(kAlice, kUsdt);
  const uint64_t id = NextSeq();
  const auto ev =
      Limit(kAlice, kBtcUsdt, Side::kBuy, 3'000'001, 80, StpMode::kExpireTaker, TimeInForce::kFok);
  ExpectFokExpired(ev, id, 80, 3'000'001LL * 80 * 10);
  EXPECT_EQ(Bal(kAlice, kUsdt), usdt);
  EXPECT_EQ(real_.open_orders(), 2u);
  EXPECT_EQ(Raw(real_.next_trade_id()), 1u);
  ExpectLedgerMatches();
}

TEST_F(Scenario, FokSkipsOwnOrderWithExpireMaker) {
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 50);
  Limit(kBob, kBtcUsdt, Side::kSell, 3'000'001, 50);
  const Balance usdt = Bal(kAlice, kUsdt);
  const uint64_t id = NextSeq();
  auto ev =
      Limit(kAlice, kBtcUsdt, Side::kBuy, 3'000'001, 80, StpMode::kExpireMaker, TimeInForce::kFok);
  // Only Bob's 50 count; Alice's own ask stays (nothing matched).
  ExpectFokExpired(ev, id, 80, 3'000'001LL * 80 * 10);
  EXPECT_EQ(Bal(kAlice, kUsdt), usdt);
  EXPECT_EQ(real_.open_orders(), 2u);
  ev = Limit(kAlice, kBtcUsdt, Side::kBuy, 3'000'001, 50, StpMode::kExpireMaker, TimeInForce::kFok);
  ASSERT_EQ(ev.size(), 3u) << ToText(ev);
  As<engine::OrderExpired>(ev, 1);
  EXPECT_TRUE(As<engine::Trade>(ev, 2).taker_filled);
  EXPECT_EQ(As<engine::Trade>(ev, 2).taker_released.value, 0);
  EXPECT_EQ(real_.open_orders(), 0u);
}

TEST_F(Scenario, FokWithStpNoneCountsOwnOrders) {
  Limit(kAlice, kBtcUsdt, Side::kSell, 3'000'000, 50);
  Limit(kBob, kBtcUsdt, Side::kSell, 3'000'001, 50);
  const auto ev =
      Limit(kAlice, kBtcUsdt, Side::kBuy, 3'000'001, 80, StpMode::kNone, TimeInForce::kFok);
  ASSERT_EQ(ev.size(), 3u) << ToText(ev);
  EXPECT_EQ(As<engine::Trade>(ev, 1).maker_account, kAlice);
  EXPECT_EQ(As<engine::Trade>(ev, 2).qty.value, 30);
  EXPECT_TRUE(As<engine::Trade>(ev, 2).taker_filled);
  EXPECT_EQ(As<engine::Trade>(ev, 2).taker_released.value, 50LL * 1 * 10);
  ExpectLedgerMatches();
}

TEST_F(Scenario, AmendDownKeepsPriorityUpLosesIt) {
  const uint64_t a = NextSeq();
  Limit(kAlice, kEthUsdt, Side::kBuy, 200'000, 50);
  const uint64_t b = NextSeq();
  Limit(kBob, kEthUsdt, Side::kBuy, 200'000, 50);
  engine::AmendOrder am;
  am.account = kAlice;
  am.market = kEthUsdt;
  am.order_id = OrderId{a};
  am.new_qty = Qty{30};
  auto ev = Run(am);
  ASSERT_EQ(ev.size(), 1u) << ToText(ev);
  EXPECT_TRUE(As<engine::OrderAmended>(ev, 0).keeps_priority);
  EXPECT_EQ(As<engine::OrderAmended>(ev, 0).lock_delta.value, -200'000LL * 20 * 100);
  auto orders = real_.Orders(kEthUsdt, Side::kBuy);
  ASSERT_EQ(orders.size(), 2u);
  EXPECT_EQ(Raw(orders[0].id), a);
  am.new_qty = Qty{60};
  ev = Run(am);
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  EXPECT_FALSE(As<engine::OrderAmended>(ev, 0).keeps_priority);
  EXPECT_EQ(As<engine::OrderRested>(ev, 1).remaining.value, 60);
  orders = real_.Orders(kEthUsdt, Side::kBuy);
  ASSERT_EQ(orders.size(), 2u);
  EXPECT_EQ(Raw(orders[0].id), b);
  ExpectLedgerMatches();
}

TEST_F(Scenario, AmendPriceCrossesAndTrades) {
  Limit(kAlice, kEthUsdt, Side::kSell, 200'010, 40);
  const uint64_t id = NextSeq();
  Limit(kBob, kEthUsdt, Side::kBuy, 200'000, 50);
  engine::AmendOrder am;
  am.account = kBob;
  am.market = kEthUsdt;
  am.order_id = OrderId{id};
  am.new_price = Price{200'020};
  const auto ev = Run(am);
  ASSERT_EQ(ev.size(), 3u) << ToText(ev);
  EXPECT_EQ(As<engine::OrderAmended>(ev, 0).lock_delta.value, 20LL * 50 * 100);
  EXPECT_EQ(As<engine::Trade>(ev, 1).price.value, 200'010);
  EXPECT_EQ(As<engine::Trade>(ev, 1).taker_order_id, OrderId{id});
  EXPECT_EQ(As<engine::OrderRested>(ev, 2).remaining.value, 10);
  EXPECT_EQ(As<engine::OrderRested>(ev, 2).released.value, 10LL * 40 * 100);
  ExpectLedgerMatches();
}

// Binance's rule: a closed order's client id is free at once; an open one's is
// refused.
TEST_F(Scenario, ClientIdsAreFreeOnceTheOrderCloses) {
  Place(kAlice, kEthUsdt, Side::kBuy, OrderType::kLimit, TimeInForce::kIoc, 200'000, 10,
        StpMode::kNone, 0, "my-order");  // expires at once: closed
  const uint64_t second = NextSeq();
  auto ev = Place(kAlice, kEthUsdt, Side::kBuy, OrderType::kLimit, TimeInForce::kGtc, 200'000, 10,
                  StpMode::kNone, 0, "my-order");
  As<engine::OrderAccepted>(ev, 0);
  ev = Place(kAlice, kEthUsdt, Side::kBuy, OrderType::kLimit, TimeInForce::kGtc, 200'000, 10,
             StpMode::kNone, 0, "my-order");
  ASSERT_EQ(ev.size(), 1u) << ToText(ev);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).existing_id, second);
  // Another account may use the same id.
  ev = Place(kBob, kEthUsdt, Side::kBuy, OrderType::kLimit, TimeInForce::kGtc, 200'000, 10,
             StpMode::kNone, 0, "my-order");
  As<engine::OrderAccepted>(ev, 0);
  engine::CancelOrder c;
  c.account = kBob;
  c.market = kEthUsdt;
  c.orig_client_order_id = ClientOrderId::From("my-order");
  ev = Run(c);
  As<engine::OrderCanceled>(ev, 0);
  ev = Run(c);  // closed: no longer open
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kUnknownOrder);
}

TEST_F(Scenario, LimitMakerNeverTakes) {
  Limit(kAlice, kEthUsdt, Side::kSell, 200'010, 40);
  auto ev =
      Place(kBob, kEthUsdt, Side::kBuy, OrderType::kLimitMaker, TimeInForce::kGtc, 200'010, 10);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kWouldTakeLiquidity);
  // Even against its own account's order.
  ev = Place(kAlice, kEthUsdt, Side::kBuy, OrderType::kLimitMaker, TimeInForce::kGtc, 200'011, 10);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kWouldTakeLiquidity);
  ev = Place(kBob, kEthUsdt, Side::kBuy, OrderType::kLimitMaker, TimeInForce::kGtc, 200'009, 10);
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  As<engine::OrderRested>(ev, 1);
}

TEST_F(Scenario, CancelOnlyAllowsCancelsHaltedNothing) {
  const uint64_t id = NextSeq();
  Limit(kAlice, kEthUsdt, Side::kBuy, 200'000, 10);
  Run(engine::SetMarketStatus{kEthUsdt, MarketStatus::kCancelOnly});
  auto ev = Limit(kAlice, kEthUsdt, Side::kBuy, 200'000, 10);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kMarketNotTrading);
  Run(engine::SetMarketStatus{kEthUsdt, MarketStatus::kHalted});
  engine::CancelOrder c;
  c.account = kAlice;
  c.market = kEthUsdt;
  c.order_id = OrderId{id};
  ev = Run(c);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kMarketNotTrading);
  Run(engine::SetMarketStatus{kEthUsdt, MarketStatus::kCancelOnly});
  ev = Run(c);
  As<engine::OrderCanceled>(ev, 0);
}

// Transfers to other venues: held, then completed (the supply goes down by
// what left, the fee stays with the fee account) or refunded; a transfer
// resolves once.
TEST_F(Scenario, TransferOutHoldsThenCompletes) {
  const Balance before = Bal(kAlice, kBtc);
  const Amount supply = real_.supply(kBtc);
  engine::TransferOut t;
  t.account = kAlice;
  t.asset = kBtc;
  t.amount = Amount{1'000'000};
  t.fee = Amount{2'500};
  t.ref = TransferRef::From("out-1");
  t.address = TransferAddress::From("mbx:venue-b/alice");
  const uint64_t id = NextSeq();
  auto ev = Run(t);
  ASSERT_EQ(ev.size(), 1u) << ToText(ev);
  const auto& h = As<engine::TransferHeld>(ev, 0);
  EXPECT_EQ(Raw(h.transfer_id), id);
  EXPECT_EQ(h.account, kAlice);
  EXPECT_EQ(h.amount.value, 1'000'000);
  EXPECT_EQ(h.fee.value, 2'500);
  EXPECT_EQ(h.address.view(), "mbx:venue-b/alice");
  EXPECT_EQ(Bal(kAlice, kBtc).available.value, before.available.value - 1'000'000);
  EXPECT_EQ(Bal(kAlice, kBtc).locked, before.locked);
  EXPECT_EQ(real_.held(kBtc).value, 1'000'000);
  EXPECT_EQ(real_.supply(kBtc), supply);
  ExpectLedgerMatches();

  const int64_t fee_before = Bal(kFee, kBtc).available.value;
  ev = Run(engine::ResolveTransfer{TransferId{id}, true, engine::RefundReason::kVoided});
  ASSERT_EQ(ev.size(), 1u) << ToText(ev);
  const auto& c = As<engine::TransferCompleted>(ev, 0);
  EXPECT_EQ(Raw(c.transfer_id), id);
  EXPECT_EQ(c.amount.value, 1'000'000);
  EXPECT_EQ(c.fee.value, 2'500);
  EXPECT_EQ(real_.held(kBtc).value, 0);
  EXPECT_EQ(real_.supply(kBtc).value, supply.value - 997'500);
  EXPECT_EQ(Bal(kFee, kBtc).available.value, fee_before + 2'500);
  EXPECT_EQ(Bal(kAlice, kBtc).available.value, before.available.value - 1'000'000);
  ExpectLedgerMatches();

  for (bool completed : {true, false}) {
    ev = Run(engine::ResolveTransfer{TransferId{id}, completed, engine::RefundReason::kRefused});
    ASSERT_EQ(ev.size(), 1u) << ToText(ev);
    EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kUnknownTransfer);
    EXPECT_EQ(As<engine::Rejected>(ev, 0).existing_id, id);
  }
  // The reference stays used.
  t.amount = Amount{1};
  t.fee = Amount{0};
  ev = Run(t);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kDuplicateTransfer);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).existing_id, id);
}

TEST_F(Scenario, TransferOutRefundsAndRefusals) {
  const Balance before = Bal(kBob, kUsdt);
  engine::TransferOut t;
  t.account = kBob;
  t.asset = kUsdt;
  t.amount = Amount{before.available.value};  // everything
  t.fee = t.amount;                           // all of it a fee: valid
  t.ref = TransferRef::From("out-2");
  const uint64_t id = NextSeq();
  auto ev = Run(t);
  As<engine::TransferHeld>(ev, 0);
  EXPECT_EQ(Bal(kBob, kUsdt).available.value, 0);
  // Nothing left: the next one is refused, as is a fee above the amount.
  t.ref = TransferRef::From("out-3");
  t.amount = Amount{1};
  t.fee = Amount{0};
  ev = Run(t);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kInsufficientBalance);
  t.fee = Amount{2};
  ev = Run(t);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kInvalidAmount);
  // A deposit's reference cannot be reused.
  t.fee = Amount{0};
  t.ref = TransferRef::From("fund-1");
  ev = Run(t);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kDuplicateTransfer);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).existing_id, 1u);

  // A refund with a reason out of range is refused and changes nothing.
  ev = Run(engine::ResolveTransfer{TransferId{id}, false, static_cast<engine::RefundReason>(5)});
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kInvalidStatus);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).account, kBob);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).existing_id, id);
  EXPECT_EQ(real_.PendingTransfers().size(), 1u);

  ev = Run(engine::ResolveTransfer{TransferId{id}, false, engine::RefundReason::kInvalidAddress});
  const auto& r = As<engine::TransferRefunded>(ev, 0);
  EXPECT_EQ(r.reason, engine::RefundReason::kInvalidAddress);
  EXPECT_EQ(r.amount, before.available);
  EXPECT_EQ(Bal(kBob, kUsdt), before);
  EXPECT_EQ(real_.held(kUsdt).value, 0);
  EXPECT_TRUE(real_.PendingTransfers().empty());
  ExpectLedgerMatches();
}

// A snapshot taken while transfers are pending restores them; the restored
// engine resolves them as the live one does.
TEST_F(Scenario, PendingTransfersSurviveASnapshot) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < 2; ++i) {
    engine::TransferOut t;
    t.account = kCarol;
    t.asset = kEth;
    t.amount = Amount{1'000 + i};
    t.fee = Amount{i};
    t.ref = TransferRef::From("snap-" + std::to_string(i));
    t.address = TransferAddress::From("addr-" + std::to_string(i));
    ids.push_back(NextSeq());
    As<engine::TransferHeld>(Run(t), 0);
  }
  // The fee account holds no ETH (nothing traded): refused.
  auto ev = Run(engine::TransferOut{kFee, kEth, Amount{1}, Amount{0}, TransferRef::From("fee-1"),
                                    TransferAddress{}});
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kInsufficientBalance);

  const auto bytes = codec::EncodeImage(real_.ExportImage());
  auto image = codec::DecodeImage(bytes);
  ASSERT_TRUE(image.ok()) << image.status().message();
  ASSERT_EQ(image->pending_transfers.size(), 2u);
  EXPECT_EQ(image->pending_transfers[1].address.view(), "addr-1");
  Engine restored(config_);
  ASSERT_TRUE(restored.Restore(*image).ok());
  EXPECT_EQ(restored.StateHash(), real_.StateHash());
  EXPECT_EQ(restored.held(kEth).value, 2'001);
  // Both resolve the second transfer alike (Run stamps ts_ + 10).
  const engine::Command c{ts_ + 10,
                          engine::ResolveTransfer{TransferId{ids[1]}, false,
                                                  engine::RefundReason::kAccountUnavailable}};
  engine::EventBuffer from_restored;
  restored.Process(c, &from_restored);
  const std::vector<Event> live = Run(c.body);
  EXPECT_TRUE(SameEvents(from_restored, live)) << ToText(from_restored) << ToText(live);
  EXPECT_EQ(restored.StateHash(), real_.StateHash());
  EXPECT_EQ(real_.PendingTransfers().size(), 1u);
  ExpectLedgerMatches();
}

// ---------------------------------------------------------------------------
// Conditional orders (spec: last trade price against the stop price; Binance's
// trailing-stop FAQ for the trailing ones).

template <class T>
std::size_t CountOf(const std::vector<Event>& events) {
  std::size_t n = 0;
  for (const Event& e : events) n += std::holds_alternative<T>(e.body) ? 1u : 0u;
  return n;
}

// A STOP_LOSS SELL waits for a trade at or below its stop price, then sells
// as a MARKET order; one whose stop the last price already meets is refused.
TEST_F(Scenario, StopLossSellTriggersAtTheStopPrice) {
  Limit(kAlice, kEthUsdt, Side::kBuy, 200'000, 10);
  Limit(kAlice, kEthUsdt, Side::kBuy, 199'990, 10);
  Limit(kBob, kEthUsdt, Side::kSell, 200'000, 5, StpMode::kNone, TimeInForce::kIoc);  // last 200000
  auto ev = Stop(kCarol, kEthUsdt, Side::kSell, OrderType::kStopLoss, 200'000, 0, 10);
  ASSERT_EQ(ev.size(), 1u) << ToText(ev);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kWouldTriggerImmediately);
  const uint64_t id = NextSeq();
  ev = Stop(kCarol, kEthUsdt, Side::kSell, OrderType::kStopLoss, 199'995, 0, 10);
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  const auto& a = As<engine::OrderAccepted>(ev, 0);
  EXPECT_EQ(a.terms.type, OrderType::kStopLoss);
  EXPECT_EQ(a.terms.tif, TimeInForce::kIoc);
  EXPECT_EQ(a.locked.value, 10 * 10'000);
  EXPECT_EQ(As<engine::OrderArmed>(ev, 1).stop_price.value, 199'995);
  EXPECT_EQ(Bal(kCarol, kEth).locked.value, 10 * 10'000);
  // A trade at 200000 leaves it waiting; one at 199990 triggers it.
  ev = Limit(kBob, kEthUsdt, Side::kSell, 200'000, 5, StpMode::kNone, TimeInForce::kIoc);
  EXPECT_EQ(CountOf<engine::OrderTriggered>(ev), 0u) << ToText(ev);
  ev = Limit(kBob, kEthUsdt, Side::kSell, 199'990, 6, StpMode::kNone, TimeInForce::kIoc);
  ASSERT_EQ(ev.size(), 5u) << ToText(ev);
  const auto& t = As<engine::OrderTriggered>(ev, 2);
  EXPECT_EQ(Raw(t.order_id), id);
  EXPECT_EQ(t.last_price.value, 199'990);
  EXPECT_EQ(t.lock_delta.value, 0);
  EXPECT_EQ(As<engine::Trade>(ev, 3).taker_order_id, OrderId{id});
  EXPECT_EQ(As<engine::Trade>(ev, 3).qty.value, 4);  // what Bob left of Alice's bid
  const auto& x = As<engine::OrderExpired>(ev, 4);
  EXPECT_EQ(x.reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(x.remaining.value, 6);
  EXPECT_EQ(x.released.value, 6 * 10'000);
  EXPECT_EQ(Bal(kCarol, kEth).locked.value, 0);
  ExpectLedgerMatches();
}

// A stop-market buy locks nothing while it waits; triggered, it locks what
// its walk of the book costs, or expires when the account cannot pay it.
TEST_F(Scenario, StopMarketBuyLocksItsBookWalkWhenTriggered) {
  TradeAt(kEthUsdt, 200'000, 5);
  Limit(kAlice, kEthUsdt, Side::kSell, 200'010, 10);
  Limit(kAlice, kEthUsdt, Side::kSell, 200'020, 10);
  Fund(kDave, kUsdt, 50'000'000);  // 0.5 USDT: five lots cost 1
  const uint64_t poor = NextSeq();
  auto ev = Stop(kDave, kEthUsdt, Side::kBuy, OrderType::kStopLoss, 200'005, 0, 5);
  EXPECT_EQ(As<engine::OrderAccepted>(ev, 0).locked.value, 0);
  const uint64_t id = NextSeq();
  ev = Stop(kCarol, kEthUsdt, Side::kBuy, OrderType::kTakeProfit, 199'000, 0, 12);
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);  // waits for a fall to 199000
  const uint64_t rich = NextSeq();
  Stop(kCarol, kEthUsdt, Side::kBuy, OrderType::kStopLoss, 200'005, 0, 12);
  const Balance before = Bal(kCarol, kUsdt);
  ev = Limit(kBob, kEthUsdt, Side::kBuy, 200'010, 5, StpMode::kNone, TimeInForce::kIoc);
  // Bob's trade, then Dave's stop (the lower id) expires, then Carol's buys.
  ASSERT_EQ(ev.size(), 7u) << ToText(ev);
  EXPECT_EQ(Raw(As<engine::OrderTriggered>(ev, 2).order_id), poor);
  EXPECT_EQ(As<engine::OrderTriggered>(ev, 2).lock_delta.value, 0);
  EXPECT_EQ(As<engine::OrderExpired>(ev, 3).reason, ExpireReason::kInsufficientBalance);
  EXPECT_EQ(As<engine::OrderExpired>(ev, 3).remaining.value, 5);
  EXPECT_EQ(As<engine::OrderExpired>(ev, 3).released.value, 0);
  const auto& t = As<engine::OrderTriggered>(ev, 4);
  EXPECT_EQ(Raw(t.order_id), rich);
  EXPECT_EQ(t.last_price.value, 200'010);
  EXPECT_EQ(t.lock_delta.value, (5 * 200'010LL + 7 * 200'020LL) * 100);
  EXPECT_EQ(As<engine::Trade>(ev, 5).qty.value, 5);
  EXPECT_TRUE(As<engine::Trade>(ev, 6).taker_filled);
  EXPECT_EQ(Bal(kCarol, kUsdt).available.value, before.available.value - t.lock_delta.value);
  EXPECT_EQ(Bal(kDave, kUsdt).locked.value, 0);
  // The take-profit buy still waits, and locks nothing.
  ASSERT_TRUE(real_.FindOrder(OrderId{id}).has_value());
  EXPECT_EQ(real_.FindOrder(OrderId{id})->locked.value, 0);
  ExpectLedgerMatches();
}

// Several orders qualify: the lowest id triggers first, and what its trades
// do to the last price may trigger the next, all in one command.
TEST_F(Scenario, LowestIdTriggersFirstAndTriggersCascade) {
  TradeAt(kEthUsdt, 200'000, 5);
  for (int64_t p : {200'010, 200'020, 200'030}) Limit(kAlice, kEthUsdt, Side::kSell, p, 5);
  const uint64_t a = NextSeq();
  Stop(kCarol, kEthUsdt, Side::kBuy, OrderType::kStopLoss, 200'010, 0, 5);
  const uint64_t b = NextSeq();
  Stop(kCarol, kEthUsdt, Side::kBuy, OrderType::kStopLossLimit, 200'005, 0, 5, 200'030);
  const uint64_t c = NextSeq();
  Stop(kCarol, kEthUsdt, Side::kSell, OrderType::kTakeProfit, 200'030, 0, 5);
  const auto ev = Limit(kBob, kEthUsdt, Side::kBuy, 200'010, 5, StpMode::kNone, TimeInForce::kIoc);
  std::vector<std::pair<uint64_t, int64_t>> triggered;
  for (const Event& e : ev) {
    if (const auto* t = std::get_if<engine::OrderTriggered>(&e.body)) {
      triggered.emplace_back(Raw(t->order_id), t->last_price.value);
    }
  }
  // A (200010 <= 200010) before B (200005), though B's stop is nearer; A's
  // buy at 200020 and B's at 200030 then lift the price to C's stop.
  const std::vector<std::pair<uint64_t, int64_t>> want = {{a, 200'010}, {b, 200'020}, {c, 200'030}};
  EXPECT_EQ(triggered, want) << ToText(ev);
  // C sells into an empty bid side: it expires whole.
  EXPECT_EQ(As<engine::OrderExpired>(ev, ev.size() - 1).reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(As<engine::OrderExpired>(ev, ev.size() - 1).order_id, OrderId{c});
  ExpectLedgerMatches();
}

// Binance's trailing-stop FAQ, scenario A at a tenth of its prices: a
// STOP_LOSS_LIMIT BUY with stopPrice 4400 and trailingDelta 500 ignores the
// fall to 3700, starts tracking at 4400, follows the low to 4200 and
// triggers at 4410 = 4200 x 1.05.
TEST_F(Scenario, TrailingStopWithActivationPriceFollowsBinanceScenarioA) {
  TradeAt(kEthBtc, 4'000, 5);
  const uint64_t id = NextSeq();
  auto ev = Stop(kCarol, kEthBtc, Side::kBuy, OrderType::kStopLossLimit, 4'400, 500, 5, 4'500);
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  EXPECT_EQ(As<engine::OrderArmed>(ev, 1).trailing_delta, 500);
  for (int64_t p : {3'700, 4'400, 4'500, 4'600, 4'200, 4'409}) {
    ev = TradeAt(kEthBtc, p, 5);
    EXPECT_EQ(CountOf<engine::OrderTriggered>(ev), 0u) << p << "\n" << ToText(ev);
  }
  ev = TradeAt(kEthBtc, 4'410, 5);
  ASSERT_EQ(CountOf<engine::OrderTriggered>(ev), 1u) << ToText(ev);
  const auto& t = As<engine::OrderTriggered>(ev, 2);
  EXPECT_EQ(Raw(t.order_id), id);
  EXPECT_EQ(t.last_price.value, 4'410);
  // Nothing to buy at 4500 or below: it rests, still a STOP_LOSS_LIMIT.
  EXPECT_EQ(As<engine::OrderRested>(ev, 3).remaining.value, 5);
  ASSERT_TRUE(real_.FindOrder(OrderId{id}).has_value());
  EXPECT_EQ(real_.FindOrder(OrderId{id})->terms.type, OrderType::kStopLossLimit);
  ExpectLedgerMatches();
}

// Scenario E: no stop price, so tracking starts at the last price (6000);
// a trailing 7% sell then follows the high to 6500 and triggers at 6045.
TEST_F(Scenario, TrailingStopWithoutStopPriceFollowsBinanceScenarioE) {
  TradeAt(kEthBtc, 6'000, 5);
  Limit(kAlice, kEthBtc, Side::kBuy, 5'000, 10);  // where the triggered sell lands
  const uint64_t id = NextSeq();
  auto ev = Stop(kCarol, kEthBtc, Side::kSell, OrderType::kStopLossLimit, 0, 700, 5, 5'000);
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  for (int64_t p : {6'200, 6'500, 6'100, 6'046}) {
    ev = TradeAt(kEthBtc, p, 5);
    EXPECT_EQ(CountOf<engine::OrderTriggered>(ev), 0u) << p << "\n" << ToText(ev);
  }
  ev = TradeAt(kEthBtc, 6'045, 5);
  ASSERT_EQ(CountOf<engine::OrderTriggered>(ev), 1u) << ToText(ev);
  EXPECT_EQ(Raw(As<engine::OrderTriggered>(ev, 2).order_id), id);
  const auto& trade = As<engine::Trade>(ev, 3);
  EXPECT_EQ(trade.price.value, 5'000);
  EXPECT_TRUE(trade.taker_filled);
  ExpectLedgerMatches();
}

// A waiting order cannot be amended; it survives a snapshot (its trailing
// state and the last price included) and is canceled, alone or with the
// account's other orders, like a resting one.
TEST_F(Scenario, WaitingOrdersAreCanceledNotAmendedAndSurviveASnapshot) {
  TradeAt(kEthBtc, 6'000, 5);
  const uint64_t limit_id = NextSeq();
  Stop(kCarol, kEthBtc, Side::kBuy, OrderType::kTakeProfitLimit, 5'990, 0, 10, 5'995,
       TimeInForce::kFok);
  const uint64_t trailing_id = NextSeq();
  Stop(kCarol, kEthBtc, Side::kSell, OrderType::kTakeProfit, 0, 100, 10);
  TradeAt(kEthBtc, 6'100, 5);  // the trailing sell's high: 6100

  const auto bytes = codec::EncodeImage(real_.ExportImage());
  auto image = codec::DecodeImage(bytes);
  ASSERT_TRUE(image.ok()) << image.status().message();
  Engine restored(config_);
  ASSERT_TRUE(restored.Restore(*image).ok());
  EXPECT_EQ(restored.StateHash(), real_.StateHash());
  // Each command from here on runs on the restored engine too (Run stamps ts_ + 10).
  auto both = [&](engine::CommandBody body) {
    engine::EventBuffer from_restored;
    restored.Process(engine::Command{ts_ + 10, body}, &from_restored);
    const std::vector<Event> live = Run(body);
    EXPECT_TRUE(SameEvents(from_restored, live)) << ToText(from_restored) << ToText(live);
    return live;
  };

  engine::AmendOrder am;
  am.account = kCarol;
  am.market = kEthBtc;
  am.order_id = OrderId{limit_id};
  am.new_qty = Qty{5};
  auto ev = both(am);
  EXPECT_EQ(As<engine::Rejected>(ev, 0).reason, RejectReason::kInvalidOrderType);
  // 6039 = 6100 x 0.99: the trailing sell triggers, and finds no bid.
  both(engine::PlaceOrder{kAlice, kEthBtc, Side::kSell, OrderType::kLimit, TimeInForce::kGtc,
                          StpMode::kNone, Price{6'039}, Qty{5}});
  ev = both(engine::PlaceOrder{kBob, kEthBtc, Side::kBuy, OrderType::kLimit, TimeInForce::kIoc,
                               StpMode::kNone, Price{6'039}, Qty{5}});
  ASSERT_EQ(ev.size(), 4u) << ToText(ev);
  EXPECT_EQ(As<engine::OrderTriggered>(ev, 2).order_id, OrderId{trailing_id});
  EXPECT_EQ(As<engine::OrderExpired>(ev, 3).reason, ExpireReason::kNoLiquidity);

  engine::CancelOrder cancel;
  cancel.account = kCarol;
  cancel.market = kEthBtc;
  cancel.order_id = OrderId{limit_id};
  ev = both(cancel);
  EXPECT_EQ(As<engine::OrderCanceled>(ev, 0).remaining.value, 10);
  EXPECT_EQ(As<engine::OrderCanceled>(ev, 0).released.value, 5'995 * 10);
  // A resting order and a waiting one: CancelAll takes both, by id.
  const uint64_t resting = NextSeq();
  both(engine::PlaceOrder{kCarol, kEthBtc, Side::kBuy, OrderType::kLimit, TimeInForce::kGtc,
                          StpMode::kNone, Price{5'000}, Qty{10}});
  const uint64_t waiting = NextSeq();
  both(engine::PlaceOrder{kCarol, kEthBtc, Side::kSell, OrderType::kStopLoss, TimeInForce::kIoc,
                          StpMode::kNone, Price{0}, Qty{4}, Amount{0}, ClientOrderId{},
                          Price{5'500}});
  ev = both(engine::CancelAll{kCarol, kEthBtc});
  ASSERT_EQ(ev.size(), 2u) << ToText(ev);
  EXPECT_EQ(As<engine::OrderCanceled>(ev, 0).order_id, OrderId{resting});
  EXPECT_EQ(As<engine::OrderCanceled>(ev, 1).order_id, OrderId{waiting});
  EXPECT_EQ(As<engine::OrderCanceled>(ev, 1).released.value, 4 * 100'000);
  EXPECT_EQ(real_.open_orders(), 0u);
  EXPECT_EQ(restored.StateHash(), real_.StateHash());
  ExpectLedgerMatches();
}

}  // namespace
}  // namespace mb::testing
