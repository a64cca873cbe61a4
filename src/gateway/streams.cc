// WebSocket streams (see streams.h).
//
// Who owns what:
//   io threads     OnOpen / OnMessage / OnClose and the listenKey calls change
//                  the registry under mu_: topics_ (stream name → subscribers),
//                  and for each market an immutable MarketRoute rebuilt on every
//                  change (copy on write), plus the user data subscriptions.
//   fan-out thread Publish / Tick read the routes through a cached copy that
//                  is refreshed only when routes_version_ moved, so a batch that
//                  nobody watches costs one atomic load; every piece of
//                  coalescing state (pending depth diffs, ticker throttles,
//                  kline candles, best bid/ask) belongs to this thread alone.
//
// Ordering: an answer to SUBSCRIBE or userDataStream.subscribe.signature is
// queued while mu_ is held, before the fan-out thread can see the new
// subscriber, so it always precedes the first message of that subscription.
// This relies on WsConnection::Send never calling back into the handler;
// Close() is never called with mu_ held.
#include "gateway/streams.h"

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "common/append_only.h"
#include "common/hmac.h"
#include "common/thread_annotations.h"
#include "gateway/binance_json.h"
#include "gateway/params.h"

namespace mb::gateway {
namespace {

namespace json = boost::json;
using marketdata::BatchOutput;
using marketdata::KlineInterval;
using marketdata::Level;
using marketdata::MarketSnapshot;

// Depth intervals by index: @depth@0ms (every batch), @depth@100ms, @depth (1000 ms).
constexpr std::array<int64_t, 3> kIntervalMs = {0, 100, 1000};
constexpr uint8_t kInterval0ms = 0;
constexpr uint8_t kInterval100ms = 1;
constexpr uint8_t kInterval1000ms = 2;
constexpr std::array<uint8_t, 3> kPartialLevels = {5, 10, 20};
constexpr int64_t kTickerThrottleMs = 1000;
// Rolling window tickers (<symbol>@ticker_<window>, !ticker_<window>@arr), by index.
struct TickerWindow {
  std::string_view name;
  int64_t ms;
};
constexpr std::array<TickerWindow, 3> kTickerWindows = {
    {{"1h", 3'600'000}, {"4h", 4 * 3'600'000}, {"1d", 24 * 3'600'000}}};
constexpr int64_t kListenKeySweepMs = 1000;
constexpr std::size_t kListenKeyLength = 60;
constexpr int64_t kDefaultRecvWindowMs = 5000;
constexpr int64_t kListenKeySubscription = -1;  // a /ws/<listenKey> connection: no wrapper
constexpr int64_t kNsPerMs = 1'000'000;
constexpr int64_t kNoOrigin = 0;  // WsConnection::Send: a message no engine batch caused

enum class Kind : uint8_t {
  kDepth,
  kPartialDepth,
  kTrade,
  kAggTrade,
  kTicker,
  kMiniTicker,
  kBookTicker,
  kKline,
  kWindowTicker,  // <symbol>@ticker_<window>: interval indexes kTickerWindows
  kAvgPrice,
  // Streams of every market ("!..."): one array a second of the markets that changed.
  kAllTicker,        // !ticker@arr
  kAllMiniTicker,    // !miniTicker@arr
  kAllWindowTicker,  // !ticker_<window>@arr: interval indexes kTickerWindows
};

// Streams of every market have no symbol; their names start with '!'.
bool IsAllMarkets(Kind k) {
  return k == Kind::kAllTicker || k == Kind::kAllMiniTicker || k == Kind::kAllWindowTicker;
}

std::optional<uint8_t> TickerWindowIndex(std::string_view name) {
  for (std::size_t i = 0; i < kTickerWindows.size(); ++i) {
    if (kTickerWindows[i].name == name) return static_cast<uint8_t>(i);
  }
  return std::nullopt;
}

struct StreamKey {
  MarketId market{};
  Kind kind = Kind::kTrade;
  uint8_t interval = 0;  // kDepth, kPartialDepth: index into kIntervalMs; kKline: KlineInterval
  uint8_t levels = 0;    // kPartialDepth: 5, 10 or 20
  int32_t zone_min = 0;  // kKline: the candles' time zone, minutes east of UTC
};

using Markets = AppendOnlyVector<engine::MarketSpec>;

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// The market whose symbol, in lower case, is `lower` (stream names are lower
// case, as Binance's).
std::optional<MarketId> FindLowerSymbol(const Markets& markets, std::string_view lower) {
  for (std::size_t i = 0; i < markets.size(); ++i) {
    const std::string& s = markets[i].symbol;
    if (s.size() == lower.size() && std::equal(s.begin(), s.end(), lower.begin(),
                                               [](char a, char b) { return Lower(a) == b; })) {
      return static_cast<MarketId>(i);
    }
  }
  return std::nullopt;
}

// "<symbol>@" in lower case: the prefix of every stream name of a market.
std::string LowerPrefix(std::string_view symbol) {
  std::string lower(symbol);
  std::transform(lower.begin(), lower.end(), lower.begin(), Lower);
  return lower + "@";
}

// Topic selectors for StreamHub::Impl::SendToTopics.
struct MatchKind {
  Kind kind;
  bool operator()(const StreamKey& k) const { return k.kind == kind; }
};
struct MatchDepth {
  uint8_t interval;
  bool operator()(const StreamKey& k) const {
    return k.kind == Kind::kDepth && k.interval == interval;
  }
};

// Parses "btcusdt@depth5@100ms" and friends; nullopt when the name is not a
// stream of a configured market.
std::optional<StreamKey> ParseStreamName(std::string_view name, const Markets& markets) {
  if (name.starts_with('!')) {
    StreamKey key;
    if (name == "!ticker@arr") {
      key.kind = Kind::kAllTicker;
    } else if (name == "!miniTicker@arr") {
      key.kind = Kind::kAllMiniTicker;
    } else if (name.starts_with("!ticker_") && name.ends_with("@arr")) {
      const auto w = TickerWindowIndex(name.substr(8, name.size() - 8 - 4));
      if (!w) return std::nullopt;
      key.kind = Kind::kAllWindowTicker;
      key.interval = *w;
    } else {
      return std::nullopt;
    }
    return key;
  }
  const std::size_t at = name.find('@');
  if (at == std::string_view::npos) return std::nullopt;
  const auto market = FindLowerSymbol(markets, name.substr(0, at));
  if (!market) return std::nullopt;
  StreamKey key;
  key.market = *market;
  std::string_view rest = name.substr(at + 1);
  if (rest == "trade") {
    key.kind = Kind::kTrade;
  } else if (rest == "aggTrade") {
    key.kind = Kind::kAggTrade;
  } else if (rest == "ticker") {
    key.kind = Kind::kTicker;
  } else if (rest == "miniTicker") {
    key.kind = Kind::kMiniTicker;
  } else if (rest == "bookTicker") {
    key.kind = Kind::kBookTicker;
  } else if (rest == "avgPrice") {
    key.kind = Kind::kAvgPrice;
  } else if (rest.starts_with("ticker_")) {
    const auto w = TickerWindowIndex(rest.substr(7));
    if (!w) return std::nullopt;
    key.kind = Kind::kWindowTicker;
    key.interval = *w;
  } else if (rest.starts_with("kline_")) {
    // kline_<interval>, or kline_<interval>@<zone> (Binance: "@+08:00").
    rest.remove_prefix(6);
    const std::size_t zone_at = rest.find('@');
    const auto interval = marketdata::ParseKlineInterval(rest.substr(0, zone_at));
    if (!interval) return std::nullopt;
    if (zone_at != std::string_view::npos) {
      const auto zone = marketdata::ParseTimeZone(rest.substr(zone_at + 1));
      if (!zone) return std::nullopt;
      key.zone_min = *zone;
    }
    key.kind = Kind::kKline;
    key.interval = static_cast<uint8_t>(*interval);
  } else if (rest.starts_with("depth")) {
    rest.remove_prefix(5);
    std::size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    const std::string_view levels = rest.substr(0, digits);
    const std::string_view speed = rest.substr(digits);
    if (levels.empty()) {
      key.kind = Kind::kDepth;
      if (speed.empty()) {
        key.interval = kInterval1000ms;
      } else if (speed == "@100ms") {
        key.interval = kInterval100ms;
      } else if (speed == "@0ms") {
        key.interval = kInterval0ms;
      } else {
        return std::nullopt;
      }
    } else {
      key.kind = Kind::kPartialDepth;
      if (levels == "5") {
        key.levels = 5;
      } else if (levels == "10") {
        key.levels = 10;
      } else if (levels == "20") {
        key.levels = 20;
      } else {
        return std::nullopt;
      }
      if (speed.empty() || speed == "@1000ms") {
        key.interval = kInterval1000ms;
      } else if (speed == "@100ms") {
        key.interval = kInterval100ms;
      } else {
        return std::nullopt;
      }
    }
  } else {
    return std::nullopt;
  }
  return key;
}

bool IsListenKeyShaped(std::string_view s) {
  if (s.size() != kListenKeyLength) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  });
}

}  // namespace

bool IsUserDataTarget(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  return path.starts_with("/ws/") && IsListenKeyShaped(path.substr(4));
}

namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    const std::size_t p = s.find(sep);
    parts.push_back(s.substr(0, p));
    if (p == std::string_view::npos) break;
    s.remove_prefix(p + 1);
  }
  return parts;
}

// --- answers ---

// Market stream control answers: {"result":...,"id":...} and
// {"error":{"code":N,"msg":"..."},"id":...}.
std::string ResultAnswer(json::value result, const json::value& id) {
  json::object o;
  o["result"] = std::move(result);
  o["id"] = id;
  return json::serialize(o);
}

std::string ErrorAnswer(int code, std::string_view msg, const json::value& id) {
  json::object error;
  error["code"] = code;
  error["msg"] = msg;
  json::object o;
  o["error"] = std::move(error);
  o["id"] = id;
  return json::serialize(o);
}

// WebSocket API answers: {"id","status":200,"result",rateLimits} and
// {"id","status","error":{"code","msg"}}.
std::string ApiResult(const json::value& id, json::value result) {
  json::object o;
  o["id"] = id;
  o["status"] = 200;
  o["result"] = std::move(result);
  o["rateLimits"] = json::array();
  return json::serialize(o);
}

std::string ApiFailure(const json::value& id, const ApiError& e) {
  json::object error;
  error["code"] = e.code;
  error["msg"] = e.msg;
  json::object o;
  o["id"] = id;
  o["status"] = e.http_status;
  o["error"] = std::move(error);
  return json::serialize(o);
}

bool IsValidId(const json::value& v) {
  return v.is_null() || v.is_int64() || v.is_uint64() || v.is_string();
}

// A WebSocket API parameter as the signature covers it: strings as they are,
// integers in decimal, booleans as true/false.
std::optional<std::string> SignedValueText(const json::value& v) {
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_int64()) return std::to_string(v.get_int64());
  if (v.is_uint64()) return std::to_string(v.get_uint64());
  if (v.is_bool()) return std::string(v.get_bool() ? "true" : "false");
  return std::nullopt;
}

// An integer parameter given as a JSON integer or a decimal string.
std::optional<int64_t> IntParam(const json::value& v) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64()) {
    if (v.get_uint64() > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(v.get_uint64());
  }
  if (v.is_string()) {
    const json::string& s = v.get_string();
    if (s.empty() || s.size() > 18) return std::nullopt;
    int64_t n = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + (c - '0');
    }
    return n;
  }
  return std::nullopt;
}

// --- registry ---

// Per-connection state, in WsConnection::user.
struct ConnState {
  enum class Type : uint8_t { kRaw, kCombined, kWsApi };
  Type type = Type::kRaw;
  TimeUnit unit = TimeUnit::kMillisecond;  // of market stream events; set at open

  // The connection's part of the registry, under the hub's mutex
  // (StreamHub::Impl::mu_). The analysis names a mutex only through the
  // object that holds it, so this part is reached through registry(hub_mu),
  // which requires the mutex passed in (for the analysis only) to be held.
  struct Registry {
    bool closed = false;
    std::vector<std::string> streams;  // in subscription order (LIST_SUBSCRIPTIONS)
    std::string listen_key;            // a /ws/<listenKey> connection while the key is open
    AccountId listen_account{};
    std::vector<std::pair<int64_t, AccountId>> user_subs;  // WebSocket API: subscriptionId, account
    int64_t next_subscription_id = 0;
    int64_t rate_window_ms = 0;  // start of the current one-second request window
    uint32_t rate_count = 0;
  };
  Registry& registry([[maybe_unused]] const Mutex& hub_mu) MB_REQUIRES(hub_mu) { return registry_; }

 private:
  Registry registry_;
};

using ConnPtr = std::shared_ptr<WsConnection>;

// Subscribers of one stream by the time unit of their connection.
using UnitConns = std::array<std::vector<ConnPtr>, kTimeUnits>;

std::size_t UnitIndex(TimeUnit unit) { return static_cast<std::size_t>(unit); }

bool NoConns(const UnitConns& conns) {
  return std::all_of(conns.begin(), conns.end(), [](const auto& v) { return v.empty(); });
}

struct TopicEntry {
  StreamKey key;
  UnitConns raw;       // the data object alone
  UnitConns combined;  // {"stream":name,"data":...}
};

// What the fan-out thread sees of one market's subscriptions. Immutable.
struct RouteTopic {
  std::string name;
  StreamKey key;
  UnitConns raw;
  UnitConns combined;
};

// One watched candle series: an interval in a time zone.
struct KlineWatchKey {
  uint8_t interval = 0;  // KlineInterval
  int32_t zone_min = 0;
  friend bool operator==(const KlineWatchKey&, const KlineWatchKey&) = default;
};

struct MarketRoute {
  std::vector<RouteTopic> topics;
  std::array<bool, 3> depth{};    // diff depth, by interval index
  std::array<bool, 3> partial{};  // partial depth, by interval index
  bool trade = false;
  bool agg_trade = false;
  bool ticker = false;
  bool mini_ticker = false;
  bool book_ticker = false;
  std::vector<KlineWatchKey> klines;  // distinct
  bool any_kline = false;
  std::array<bool, kTickerWindows.size()> window_ticker{};
  bool avg_price = false;
  // The route of the streams of every market only:
  bool all_ticker = false;
  bool all_mini_ticker = false;
  std::array<bool, kTickerWindows.size()> all_window_ticker{};

  // Any stream sent on the ticker cadence (at most once a second).
  bool AnyTicker() const {
    return ticker || mini_ticker || avg_price ||
           std::any_of(window_ticker.begin(), window_ticker.end(), [](bool b) { return b; });
  }
};

struct UserSub {
  ConnPtr conn;
  int64_t subscription_id = kListenKeySubscription;
};

struct ListenKeyEntry {
  AccountId account{};
  int64_t expires_ms = 0;
  std::vector<ConnPtr> conns;
};

// --- fan-out thread state ---

struct PendingDepth {
  bool active = false;
  uint64_t first_update_id = 0;
  uint64_t last_update_id = 0;
  int64_t time_ns = 0;
  std::map<Price, Qty, std::greater<>> bids;  // last value wins
  std::map<Price, Qty> asks;

  void Clear() {
    active = false;
    bids.clear();
    asks.clear();
  }
};

struct MarketFanout {
  std::array<PendingDepth, 3> depth;  // [kInterval0ms] unused: sent at Publish
  std::array<bool, 3> partial_dirty{};
  std::optional<int64_t> ticker_sent_ms;
  bool ticker_dirty = false;
  bool has_best = false;
  Level best_bid;
  Level best_ask;
  // Per watched series: the open time of the candle last sent with
  // x=false; -1: none.
  struct KlineWatch {
    KlineWatchKey key;
    int64_t open_ms = -1;
  };
  std::vector<KlineWatch> klines;
};

int64_t FloorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0 && (a < 0) != (b < 0)) ? 1 : 0);
}

}  // namespace

class StreamHub::Impl {
 public:
  Impl(const engine::EngineConfig& config, const marketdata::ReadSide& read_side,
       const KeyStore& keys, StreamOptions options, std::function<int64_t()> clock_ms)
      : config_(config),
        read_side_(read_side),
        keys_(keys),
        options_(options),
        clock_ms_(std::move(clock_ms)),
        routes_(config.markets.size()),
        partial_kick_(config.markets.size(), false),
        routes_cache_(config.markets.size()),
        all_dirty_(config.markets.size(), 0),
        fanout_(config.markets.size()),
        touched_(config.markets.size(), 0) {
    MutexLock lock(mu_);
    for (const engine::MarketSpec& m : config.markets) prefixes_.push_back(LowerPrefix(m.symbol));
  }

  // Fan-out thread: a market added at run time, before the configuration the
  // io threads read names it.
  void AddMarket(std::string_view symbol) {
    {
      MutexLock lock(mu_);
      prefixes_.push_back(LowerPrefix(symbol));
      routes_.emplace_back();
      partial_kick_.push_back(false);
    }
    all_dirty_.push_back(0);
    fanout_.emplace_back();
    touched_.push_back(0);
    routes_version_.fetch_add(1, std::memory_order_release);
  }

  StreamStats stats_;  // subscriptions and user_connections are gauges; messages counts every send

  // ---------------------------------------------------------------- io side

  // What an upgrade target asks for.
  struct Target {
    ConnState::Type type = ConnState::Type::kRaw;
    TimeUnit unit = TimeUnit::kMillisecond;
    std::vector<std::pair<std::string, StreamKey>> streams;
    std::string listen_key;  // non-empty: the user data of this open key
  };

  // nullopt when the target is refused; *error then says why.
  std::optional<Target> ParseTarget(std::string_view target, std::string* error) {
    const std::size_t q = target.find('?');
    const std::string_view path = target.substr(0, q);
    const std::string_view query =
        q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
    *error = "invalid stream or expired listenKey";
    Target t;
    // Binance's timeUnit, on every stream URL; user data stays in ms.
    for (std::string_view pair : Split(query, '&')) {
      if (!pair.starts_with("timeUnit=")) continue;
      std::string decoded;
      const bool ok = PercentDecode(pair.substr(9), &decoded);
      const std::optional<TimeUnit> unit = ok ? ParseTimeUnit(decoded) : std::nullopt;
      if (!unit) {
        *error =
            "invalid timeUnit '" + decoded.substr(0, 32) + "': expected MILLISECOND or MICROSECOND";
        return std::nullopt;
      }
      t.unit = *unit;
    }
    if (path == "/ws-api/v3") {
      t.type = ConnState::Type::kWsApi;
      return t;
    }
    if (path == "/ws" || path == "/ws/") return t;
    if (path.starts_with("/ws/")) {
      const std::string_view rest = path.substr(4);
      if (rest.find('@') != std::string_view::npos) {
        // Binance raw streams: /ws/btcusdt@trade (or several, '/'-separated).
        for (std::string_view name : Split(rest, '/')) {
          if (!AddTargetStream(name, &t)) return std::nullopt;
        }
        return t;
      }
      if (IsListenKeyShaped(rest)) {
        MutexLock lock(mu_);
        const auto it = listen_keys_.find(rest);
        // An unknown or expired key is refused rather than silently served nothing.
        if (it == listen_keys_.end() || it->second.expires_ms <= clock_ms_()) return std::nullopt;
        t.listen_key = std::string(rest);
        return t;
      }
      return t;  // /ws/0, /ws/1, ...: a raw connection that subscribes later
    }
    if (path == "/stream") {
      t.type = ConnState::Type::kCombined;
      for (std::string_view pair : Split(query, '&')) {
        if (!pair.starts_with("streams=")) continue;
        // A '+' is the sign of a time zone ("@kline_1h@+08:00"), never a
        // space: no stream name has one.
        std::string names;
        for (char ch : pair.substr(8)) {
          if (ch == '+') {
            names += "%2B";
          } else {
            names += ch;
          }
        }
        std::string decoded;
        if (!PercentDecode(names, &decoded)) return std::nullopt;
        for (std::string_view name : Split(decoded, '/')) {
          if (name.empty()) continue;
          if (!AddTargetStream(name, &t)) return std::nullopt;
        }
      }
      return t;
    }
    return std::nullopt;
  }

  bool AddTargetStream(std::string_view name, Target* t) const {
    const auto key = ParseStreamName(name, config_.markets);
    if (!key) return false;
    for (const auto& s : t->streams) {
      if (s.first == name) return true;
    }
    if (t->streams.size() >= options_.max_streams_per_connection) return false;
    t->streams.emplace_back(std::string(name), *key);
    return true;
  }

  bool Accepts(const Request& request) {
    if (request.method() != http::verb::get) return false;
    const auto target = request.target();
    std::string error;
    return ParseTarget(std::string_view(target.data(), target.size()), &error).has_value();
  }

  void OnOpen(const ConnPtr& conn) {
    std::string error;
    auto target = ParseTarget(conn->target(), &error);
    if (!target) {
      conn->Close(1008, std::move(error));
      return;
    }
    auto state = std::make_shared<ConnState>();
    state->type = target->type;
    state->unit = target->unit;
    conn->user = state;
    bool refused = false;
    {
      MutexLock lock(mu_);
      if (!target->streams.empty()) {
        std::vector<MarketId> touched;
        for (auto& [name, key] : target->streams) {
          SubscribeLocked(conn, *state, name, key, &touched);
        }
        RebuildRoutesLocked(&touched);
      }
      if (!target->listen_key.empty()) {
        const auto it = listen_keys_.find(target->listen_key);
        if (it == listen_keys_.end() || it->second.expires_ms <= clock_ms_()) {
          refused = true;
        } else {
          it->second.conns.push_back(conn);
          ConnState::Registry& reg = state->registry(mu_);
          reg.listen_key = target->listen_key;
          reg.listen_account = it->second.account;
          AddUserSubLocked(it->second.account, UserSub{conn, kListenKeySubscription});
        }
      }
    }
    if (refused) conn->Close(1008, "listenKey expired");
  }

  void OnMessage(const ConnPtr& conn, std::string_view text) {
    auto state = std::static_pointer_cast<ConnState>(conn->user);
    if (!state) return;
    bool flood = false;
    {
      MutexLock lock(mu_);
      ConnState::Registry& reg = state->registry(mu_);
      if (reg.closed) return;
      const int64_t now = clock_ms_();
      if (reg.rate_count == 0 || now - reg.rate_window_ms >= 1000 || now < reg.rate_window_ms) {
        reg.rate_window_ms = now;
        reg.rate_count = 0;
      }
      flood = ++reg.rate_count > options_.max_requests_per_second;
    }
    if (flood) {
      conn->Close(1008, "too many requests");
      return;
    }
    try {
      if (state->type == ConnState::Type::kWsApi) {
        HandleApiRequest(conn, *state, text);
      } else {
        HandleStreamRequest(conn, *state, text);
      }
    } catch (const std::exception& e) {
      // A library exception (allocation, JSON) answers this request only.
      Reply(*conn, state->type == ConnState::Type::kWsApi
                       ? ApiFailure(nullptr, ApiError::Unknown(e.what()))
                       : ErrorAnswer(2, std::string("Invalid request: ") + e.what(), nullptr));
    }
  }

  void OnClose(const ConnPtr& conn) {
    auto state = std::static_pointer_cast<ConnState>(conn->user);
    if (!state) return;
    MutexLock lock(mu_);
    ConnState::Registry& reg = state->registry(mu_);
    if (reg.closed) return;
    reg.closed = true;
    if (!reg.streams.empty()) {
      std::vector<MarketId> touched;
      for (const std::string& name : reg.streams) RemoveFromTopicLocked(conn, name, &touched);
      stats_.subscriptions.fetch_sub(reg.streams.size(), std::memory_order_relaxed);
      reg.streams.clear();
      RebuildRoutesLocked(&touched);
    }
    if (!reg.listen_key.empty()) {
      const auto it = listen_keys_.find(reg.listen_key);
      if (it != listen_keys_.end()) std::erase(it->second.conns, conn);
      RemoveUserSubLocked(reg.listen_account, conn, kListenKeySubscription);
      reg.listen_key.clear();
    }
    for (const auto& [id, account] : reg.user_subs) RemoveUserSubLocked(account, conn, id);
    reg.user_subs.clear();
  }

  // ----------------------------------------------------- market requests

  void HandleStreamRequest(const ConnPtr& conn, ConnState& state, std::string_view text) {
    boost::system::error_code ec;
    json::value doc = json::parse(text, ec);
    if (ec) return Reply(*conn, ErrorAnswer(3, "Invalid JSON: " + ec.message(), nullptr));
    if (!doc.is_object()) {
      return Reply(*conn, ErrorAnswer(2, "Invalid request: expected a JSON object", nullptr));
    }
    const json::object& req = doc.get_object();
    json::value id = nullptr;
    if (const json::value* v = req.if_contains("id")) {
      if (!IsValidId(*v)) {
        return Reply(*conn, ErrorAnswer(2,
                                        "Invalid request: request ID must be an integer, a "
                                        "string or null",
                                        nullptr));
      }
      id = *v;
    }
    for (const auto& kv : req) {
      if (kv.key() != "method" && kv.key() != "params" && kv.key() != "id") {
        return Reply(*conn, ErrorAnswer(0, "Unknown property: " + std::string(kv.key()), id));
      }
    }
    const json::value* method_value = req.if_contains("method");
    if (method_value == nullptr) {
      return Reply(*conn, ErrorAnswer(2, "Invalid request: missing field `method`", id));
    }
    if (!method_value->is_string()) {
      return Reply(*conn, ErrorAnswer(1, "Invalid value type: expected a string for `method`", id));
    }
    const std::string_view method = method_value->get_string();
    const json::value* params = req.if_contains("params");

    if (method == "LIST_SUBSCRIPTIONS") {
      json::array list;
      {
        MutexLock lock(mu_);
        for (const std::string& s : state.registry(mu_).streams) list.emplace_back(s);
      }
      return Reply(*conn, ResultAnswer(std::move(list), id));
    }
    if (method == "SET_PROPERTY" || method == "GET_PROPERTY") {
      return HandleProperty(conn, state, method == "SET_PROPERTY", params, id);
    }
    if (method != "SUBSCRIBE" && method != "UNSUBSCRIBE") {
      return Reply(*conn, ErrorAnswer(2,
                                      "Invalid request: unknown variant `" + std::string(method) +
                                          "`, expected one of `SUBSCRIBE`, `UNSUBSCRIBE`, "
                                          "`LIST_SUBSCRIPTIONS`, `SET_PROPERTY`, `GET_PROPERTY`",
                                      id));
    }
    if (params == nullptr) {
      return Reply(*conn, ErrorAnswer(2, "Invalid request: missing field `params`", id));
    }
    if (!params->is_array()) {
      return Reply(*conn,
                   ErrorAnswer(1, "Invalid value type: expected an array of stream names", id));
    }
    std::vector<std::pair<std::string, StreamKey>> wanted;
    for (const json::value& p : params->get_array()) {
      if (!p.is_string()) {
        return Reply(*conn,
                     ErrorAnswer(1, "Invalid value type: expected an array of stream names", id));
      }
      const std::string_view name = p.get_string();
      const auto key = ParseStreamName(name, config_.markets);
      if (!key) {
        return Reply(*conn, ErrorAnswer(2,
                                        "Invalid request: unknown stream '" +
                                            std::string(name.substr(0, 100)) + "'",
                                        id));
      }
      const bool dup =
          std::any_of(wanted.begin(), wanted.end(), [&](const auto& w) { return w.first == name; });
      if (!dup) wanted.emplace_back(std::string(name), *key);
    }

    MutexLock lock(mu_);
    ConnState::Registry& reg = state.registry(mu_);
    if (reg.closed) return;
    std::vector<MarketId> touched;
    if (method == "SUBSCRIBE") {
      std::size_t added = 0;
      for (const auto& w : wanted) {
        if (std::find(reg.streams.begin(), reg.streams.end(), w.first) == reg.streams.end()) {
          ++added;
        }
      }
      if (reg.streams.size() + added > options_.max_streams_per_connection) {
        lock.Unlock();
        return Reply(*conn, ErrorAnswer(2,
                                        "Invalid request: too many streams: at most " +
                                            std::to_string(options_.max_streams_per_connection) +
                                            " per connection",
                                        id));
      }
      for (const auto& [name, key] : wanted) SubscribeLocked(conn, state, name, key, &touched);
    } else {
      for (const auto& w : wanted) UnsubscribeLocked(conn, state, w.first, &touched);
    }
    RebuildRoutesLocked(&touched);
    // Under mu_: the answer is queued before the fan-out thread can see the
    // new subscription (ccxt asks for the REST snapshot once it has it).
    Reply(*conn, ResultAnswer(nullptr, id));
  }

  // SET_PROPERTY ["combined", bool] / GET_PROPERTY ["combined"]: whether the
  // connection's messages are wrapped as {"stream":..,"data":..}. The only
  // property, as on Binance; /ws starts false, /stream true.
  void HandleProperty(const ConnPtr& conn, ConnState& state, bool set, const json::value* params,
                      const json::value& id) {
    if (params == nullptr || !params->is_array() || params->get_array().empty() ||
        !params->get_array()[0].is_string()) {
      return Reply(*conn, ErrorAnswer(2, "Invalid request: property name must be a string", id));
    }
    const json::array& args = params->get_array();
    if (args.size() > (set ? 2U : 1U)) {
      return Reply(*conn, ErrorAnswer(2, "Invalid request: too many parameters", id));
    }
    if (args[0].get_string() != "combined")
      return Reply(*conn, ErrorAnswer(0, "Unknown property", id));
    if (!set) {
      return Reply(*conn, ResultAnswer(state.type == ConnState::Type::kCombined, id));
    }
    if (args.size() < 2 || !args[1].is_bool()) {
      return Reply(*conn, ErrorAnswer(1, "Invalid value type: expected Boolean", id));
    }
    const ConnState::Type type =
        args[1].get_bool() ? ConnState::Type::kCombined : ConnState::Type::kRaw;
    MutexLock lock(mu_);
    ConnState::Registry& reg = state.registry(mu_);
    if (reg.closed) return;
    if (type != state.type) {
      // The connection moves between each of its topics' raw and combined
      // subscribers; the fan-out sees the change with the new routes.
      std::vector<MarketId> touched;
      const std::size_t unit = UnitIndex(state.unit);
      for (const std::string& name : reg.streams) {
        const auto it = topics_.find(name);
        if (it == topics_.end()) continue;
        auto& from =
            state.type == ConnState::Type::kCombined ? it->second.combined : it->second.raw;
        auto& to = type == ConnState::Type::kCombined ? it->second.combined : it->second.raw;
        std::erase(from[unit], conn);
        to[unit].push_back(conn);
        touched.push_back(it->second.key.market);
      }
      state.type = type;
      RebuildRoutesLocked(&touched);
    }
    // Under mu_, as for SUBSCRIBE: answered before any message in the new shape.
    Reply(*conn, ResultAnswer(nullptr, id));
  }

  void SubscribeLocked(const ConnPtr& conn, ConnState& state, const std::string& name,
                       const StreamKey& key, std::vector<MarketId>* touched) MB_REQUIRES(mu_) {
    std::vector<std::string>& streams = state.registry(mu_).streams;
    if (std::find(streams.begin(), streams.end(), name) != streams.end()) return;
    streams.push_back(name);
    auto [it, inserted] = topics_.try_emplace(name);
    if (inserted) it->second.key = key;
    (state.type == ConnState::Type::kCombined ? it->second.combined
                                              : it->second.raw)[UnitIndex(state.unit)]
        .push_back(conn);
    if (IsAllMarkets(key.kind)) {
      all_markets_dirty_ = true;
    } else {
      touched->push_back(key.market);
    }
    if (key.kind == Kind::kPartialDepth) partial_kick_[Index(key.market)] = true;
    stats_.subscriptions.fetch_add(1, std::memory_order_relaxed);
  }

  void UnsubscribeLocked(const ConnPtr& conn, ConnState& state, const std::string& name,
                         std::vector<MarketId>* touched) MB_REQUIRES(mu_) {
    std::vector<std::string>& streams = state.registry(mu_).streams;
    const auto it = std::find(streams.begin(), streams.end(), name);
    if (it == streams.end()) return;
    streams.erase(it);
    RemoveFromTopicLocked(conn, name, touched);
    stats_.subscriptions.fetch_sub(1, std::memory_order_relaxed);
  }

  void RemoveFromTopicLocked(const ConnPtr& conn, const std::string& name,
                             std::vector<MarketId>* touched) MB_REQUIRES(mu_) {
    const auto it = topics_.find(name);
    if (it == topics_.end()) return;
    for (auto& conns : it->second.raw) std::erase(conns, conn);
    for (auto& conns : it->second.combined) std::erase(conns, conn);
    if (IsAllMarkets(it->second.key.kind)) {
      all_markets_dirty_ = true;
    } else {
      touched->push_back(it->second.key.market);
    }
    if (NoConns(it->second.raw) && NoConns(it->second.combined)) topics_.erase(it);
  }

  // Publishes the new routes of the markets in *touched.
  void RebuildRoutesLocked(std::vector<MarketId>* touched) MB_REQUIRES(mu_) {
    if (touched->empty() && !all_markets_dirty_) return;
    if (all_markets_dirty_) {
      all_markets_dirty_ = false;
      // '!' sorts before every symbol: these names come first.
      auto route = std::make_shared<MarketRoute>();
      for (auto it = topics_.begin(); it != topics_.end() && it->first.starts_with('!'); ++it) {
        const StreamKey& k = it->second.key;
        if (k.kind == Kind::kAllTicker) route->all_ticker = true;
        if (k.kind == Kind::kAllMiniTicker) route->all_mini_ticker = true;
        if (k.kind == Kind::kAllWindowTicker) route->all_window_ticker[k.interval] = true;
        route->topics.push_back(RouteTopic{it->first, k, it->second.raw, it->second.combined});
      }
      if (route->topics.empty()) {
        all_route_.reset();
      } else {
        all_route_ = std::move(route);
      }
    }
    std::sort(touched->begin(), touched->end());
    touched->erase(std::unique(touched->begin(), touched->end()), touched->end());
    for (MarketId m : *touched) {
      const std::string& prefix = prefixes_[Index(m)];
      auto route = std::make_shared<MarketRoute>();
      // Names of one market share the prefix "<symbol>@", so they are adjacent.
      for (auto it = topics_.lower_bound(prefix);
           it != topics_.end() && std::string_view(it->first).starts_with(prefix); ++it) {
        const StreamKey& k = it->second.key;
        switch (k.kind) {
          case Kind::kDepth:
            route->depth[k.interval] = true;
            break;
          case Kind::kPartialDepth:
            route->partial[k.interval] = true;
            break;
          case Kind::kTrade:
            route->trade = true;
            break;
          case Kind::kAggTrade:
            route->agg_trade = true;
            break;
          case Kind::kTicker:
            route->ticker = true;
            break;
          case Kind::kMiniTicker:
            route->mini_ticker = true;
            break;
          case Kind::kBookTicker:
            route->book_ticker = true;
            break;
          case Kind::kWindowTicker:
            route->window_ticker[k.interval] = true;
            break;
          case Kind::kAvgPrice:
            route->avg_price = true;
            break;
          case Kind::kAllTicker:
          case Kind::kAllMiniTicker:
          case Kind::kAllWindowTicker:
            break;  // never under a symbol's prefix
          case Kind::kKline: {
            const KlineWatchKey w{k.interval, k.zone_min};
            if (std::find(route->klines.begin(), route->klines.end(), w) == route->klines.end()) {
              route->klines.push_back(w);
            }
            route->any_kline = true;
            break;
          }
        }
        route->topics.push_back(RouteTopic{it->first, k, it->second.raw, it->second.combined});
      }
      if (route->topics.empty()) {
        routes_[Index(m)].reset();
      } else {
        routes_[Index(m)] = std::move(route);
      }
    }
    // Release: pairs with the acquire in RefreshRoutes (which then takes mu_ anyway).
    routes_version_.fetch_add(1, std::memory_order_release);
  }

  // ------------------------------------------------- WebSocket API requests

  void HandleApiRequest(const ConnPtr& conn, ConnState& state, std::string_view text) {
    boost::system::error_code ec;
    json::value doc = json::parse(text, ec);
    if (ec) {
      return Reply(*conn,
                   ApiFailure(nullptr, ApiError{400, -1135, "Invalid JSON: " + ec.message()}));
    }
    if (!doc.is_object()) {
      return Reply(
          *conn,
          ApiFailure(nullptr, ApiError{400, -1135, "Invalid request: expected a JSON object."}));
    }
    const json::object& req = doc.get_object();
    json::value id = nullptr;
    if (const json::value* v = req.if_contains("id")) {
      if (!IsValidId(*v)) {
        return Reply(*conn, ApiFailure(nullptr, ApiError{400, -1135,
                                                         "Invalid 'id' in JSON request; expected a "
                                                         "string, an integer or null."}));
      }
      id = *v;
    }
    const json::value* method_value = req.if_contains("method");
    if (method_value == nullptr) {
      return Reply(*conn, ApiFailure(id, ApiError::MandatoryMissing("method")));
    }
    if (!method_value->is_string()) {
      return Reply(*conn, ApiFailure(id, ApiError::BadParam("method", "Expected a string.")));
    }
    const std::string_view method = method_value->get_string();
    static const json::object kNoParams;
    const json::object* params = &kNoParams;
    if (const json::value* p = req.if_contains("params")) {
      if (!p->is_object()) {
        return Reply(*conn, ApiFailure(id, ApiError{400, -1135,
                                                    "Invalid 'params' in JSON request; expected "
                                                    "an object."}));
      }
      params = &p->get_object();
    }

    if (method == "ping") return Reply(*conn, ApiResult(id, json::object()));
    if (method == "time") {
      json::object r;
      r["serverTime"] = clock_ms_();
      return Reply(*conn, ApiResult(id, std::move(r)));
    }
    if (method == "userDataStream.subscribe.signature") {
      return SubscribeSigned(conn, state, id, *params);
    }
    if (method == "userDataStream.unsubscribe") return UnsubscribeUser(conn, state, id, *params);
    Reply(*conn, ApiFailure(id, ApiError::BadParam("method", "Unknown method '" +
                                                                 std::string(method.substr(0, 64)) +
                                                                 "'.")));
  }

  // Verifies {apiKey, timestamp, recvWindow?, signature}; the account, or the error.
  std::variant<AccountId, ApiError> VerifySignedParams(const json::object& params) {
    const json::value* api_key = params.if_contains("apiKey");
    const json::value* timestamp = params.if_contains("timestamp");
    const json::value* signature = params.if_contains("signature");
    if (api_key == nullptr) return ApiError::MandatoryMissing("apiKey");
    if (timestamp == nullptr) return ApiError::MandatoryMissing("timestamp");
    if (signature == nullptr) return ApiError::MandatoryMissing("signature");
    if (!api_key->is_string()) return ApiError::BadParam("apiKey", "Expected a string.");
    if (!signature->is_string()) return ApiError::BadParam("signature", "Expected a string.");
    const auto ts = IntParam(*timestamp);
    if (!ts) return ApiError::BadParam("timestamp", "Expected an integer (ms).");
    int64_t recv_window = kDefaultRecvWindowMs;
    if (const json::value* rw = params.if_contains("recvWindow")) {
      const auto v = IntParam(*rw);
      if (!v) return ApiError::BadParam("recvWindow", "Expected an integer (ms).");
      if (*v > options_.recv_window_max_ms) {
        return ApiError::BadParam(
            "recvWindow",
            "It must be at most " + std::to_string(options_.recv_window_max_ms) + " ms.");
      }
      recv_window = *v;
    }

    const std::optional<ApiKey> key = keys_.FindKey(api_key->get_string());
    if (!key || key->revoked) return ApiError::RejectedApiKey();
    if (auto e = CheckTimestamp(*ts, recv_window, clock_ms_())) return *e;

    // Every parameter but the signature, sorted by name, as k=v&k=v, unencoded.
    std::map<std::string_view, std::string> sorted;
    for (const auto& kv : params) {
      if (kv.key() == "signature") continue;
      auto text = SignedValueText(kv.value());
      if (!text) return ApiError::BadParam(kv.key(), "Expected a string, an integer or a boolean.");
      sorted.emplace(kv.key(), std::move(*text));
    }
    std::string payload;
    for (const auto& [k, v] : sorted) {
      if (!payload.empty()) payload += '&';
      payload.append(k);
      payload += '=';
      payload += v;
    }
    if (!VerifySignature(*key, payload, signature->get_string())) {
      return ApiError::BadSignature();
    }
    return key->account;
  }

  void SubscribeSigned(const ConnPtr& conn, ConnState& state, const json::value& id,
                       const json::object& params) {
    auto verified = VerifySignedParams(params);
    if (const ApiError* e = std::get_if<ApiError>(&verified)) {
      return Reply(*conn, ApiFailure(id, *e));
    }
    const AccountId account = std::get<AccountId>(verified);
    MutexLock lock(mu_);
    ConnState::Registry& reg = state.registry(mu_);
    if (reg.closed) return;
    if (reg.user_subs.size() >= options_.max_streams_per_connection) {
      lock.Unlock();
      return Reply(
          *conn, ApiFailure(id, ApiError::BadParam("subscriptionId",
                                                   "Too many subscriptions on this connection.")));
    }
    const int64_t sub_id = reg.next_subscription_id++;
    reg.user_subs.emplace_back(sub_id, account);
    AddUserSubLocked(account, UserSub{conn, sub_id});
    json::object r;
    r["subscriptionId"] = sub_id;
    // Under mu_: queued before the fan-out thread can push this subscription's events.
    Reply(*conn, ApiResult(id, std::move(r)));
  }

  void UnsubscribeUser(const ConnPtr& conn, ConnState& state, const json::value& id,
                       const json::object& params) {
    std::optional<int64_t> which;
    if (const json::value* v = params.if_contains("subscriptionId")) {
      which = IntParam(*v);
      if (!which) {
        return Reply(*conn,
                     ApiFailure(id, ApiError::BadParam("subscriptionId", "Expected an integer.")));
      }
    }
    bool found = false;
    {
      MutexLock lock(mu_);
      std::vector<std::pair<int64_t, AccountId>>& subs = state.registry(mu_).user_subs;
      for (auto it = subs.begin(); it != subs.end();) {
        if (!which || it->first == *which) {
          RemoveUserSubLocked(it->second, conn, it->first);
          it = subs.erase(it);
          found = true;
        } else {
          ++it;
        }
      }
    }
    if (which && !found) {
      return Reply(*conn,
                   ApiFailure(id, ApiError::BadParam("subscriptionId", "No such subscription.")));
    }
    Reply(*conn, ApiResult(id, json::object()));
  }

  void AddUserSubLocked(AccountId account, UserSub sub) MB_REQUIRES(mu_) {
    auto& slot = user_subs_[static_cast<uint32_t>(account)];
    auto next = slot ? std::make_shared<std::vector<UserSub>>(*slot)
                     : std::make_shared<std::vector<UserSub>>();
    next->push_back(std::move(sub));
    slot = std::move(next);
    stats_.user_connections.fetch_add(1, std::memory_order_relaxed);
    user_sub_count_.fetch_add(1, std::memory_order_relaxed);
  }

  void RemoveUserSubLocked(AccountId account, const ConnPtr& conn, int64_t subscription_id)
      MB_REQUIRES(mu_) {
    const auto it = user_subs_.find(static_cast<uint32_t>(account));
    if (it == user_subs_.end()) return;
    auto next = std::make_shared<std::vector<UserSub>>(*it->second);
    const std::size_t removed = std::erase_if(*next, [&](const UserSub& s) {
      return s.conn == conn && s.subscription_id == subscription_id;
    });
    if (removed == 0) return;
    stats_.user_connections.fetch_sub(removed, std::memory_order_relaxed);
    user_sub_count_.fetch_sub(removed, std::memory_order_relaxed);
    if (next->empty()) {
      user_subs_.erase(it);
    } else {
      it->second = std::move(next);
    }
  }

  // ---------------------------------------------------------- listenKeys

  std::string CreateListenKey(AccountId account) {
    std::vector<ConnPtr> to_close;
    std::string key;
    {
      MutexLock lock(mu_);
      const int64_t now = clock_ms_();
      const auto existing = account_key_.find(static_cast<uint32_t>(account));
      if (existing != account_key_.end()) {
        const auto it = listen_keys_.find(existing->second);
        if (it != listen_keys_.end() && it->second.expires_ms > now) {
          // Binance: the open key is returned again and its validity extended.
          it->second.expires_ms = now + options_.listen_key_ttl_ms;
          return it->first;
        }
        if (it != listen_keys_.end()) RetireKeyLocked(it, &to_close);
      }
      do {
        key = RandomToken(kListenKeyLength);
      } while (listen_keys_.contains(key));
      listen_keys_.emplace(key, ListenKeyEntry{account, now + options_.listen_key_ttl_ms, {}});
      account_key_[static_cast<uint32_t>(account)] = key;
    }
    CloseAll(to_close, "listenKey expired");
    return key;
  }

  bool KeepAliveListenKey(AccountId account, std::string_view key) {
    MutexLock lock(mu_);
    const int64_t now = clock_ms_();
    const auto it = listen_keys_.find(key);
    if (it == listen_keys_.end() || it->second.account != account || it->second.expires_ms <= now) {
      return false;
    }
    it->second.expires_ms = now + options_.listen_key_ttl_ms;
    return true;
  }

  bool CloseListenKey(AccountId account, std::string_view key) {
    std::vector<ConnPtr> to_close;
    {
      MutexLock lock(mu_);
      const auto it = listen_keys_.find(key);
      if (it == listen_keys_.end() || it->second.account != account) return false;
      RetireKeyLocked(it, &to_close);
    }
    CloseAll(to_close, "listenKey closed");
    return true;
  }

  // Forgets the key and detaches its connections, which the caller closes
  // once mu_ is released.
  void RetireKeyLocked(std::map<std::string, ListenKeyEntry, std::less<>>::iterator it,
                       std::vector<ConnPtr>* to_close) MB_REQUIRES(mu_) {
    for (const ConnPtr& c : it->second.conns) {
      auto state = std::static_pointer_cast<ConnState>(c->user);
      if (state) state->registry(mu_).listen_key.clear();
      RemoveUserSubLocked(it->second.account, c, kListenKeySubscription);
      to_close->push_back(c);
    }
    const auto owner = account_key_.find(static_cast<uint32_t>(it->second.account));
    if (owner != account_key_.end() && owner->second == it->first) account_key_.erase(owner);
    listen_keys_.erase(it);
  }

  static void CloseAll(const std::vector<ConnPtr>& conns, const std::string& reason) {
    for (const ConnPtr& c : conns) c->Close(1000, reason);
  }

  void ExpireListenKeys(int64_t now) {
    std::vector<std::pair<std::string, std::vector<ConnPtr>>> expired;
    {
      MutexLock lock(mu_);
      for (auto it = listen_keys_.begin(); it != listen_keys_.end();) {
        auto next = std::next(it);
        if (it->second.expires_ms <= now) {
          std::vector<ConnPtr> conns;
          std::string key = it->first;
          RetireKeyLocked(it, &conns);
          expired.emplace_back(std::move(key), std::move(conns));
        }
        it = next;
      }
    }
    for (auto& [key, conns] : expired) {
      if (conns.empty()) continue;
      // Binance tells the stream why it ends before closing it.
      json::object o;
      o["e"] = "listenKeyExpired";
      o["E"] = now;
      o["listenKey"] = key;
      auto text = std::make_shared<const std::string>(json::serialize(o));
      for (const ConnPtr& c : conns) {
        Deliver(*c, text, kNoOrigin);
        c->Close(1000, "listenKey expired");
      }
    }
  }

  // ------------------------------------------------------- fan-out thread

  void Publish(const BatchOutput& batch) {
    RefreshRoutes();
    const bool users =
        user_sub_count_.load(std::memory_order_relaxed) > 0 && !batch.accounts.empty();
    if (!any_route_ && !users) return;
    const int64_t now = clock_ms_();
    if (any_route_) PublishMarkets(batch, now);
    if (users) PublishUsers(batch, now);
  }

  void Tick(int64_t now) {
    RefreshRoutes();
    if (!ticked_) {
      last_sweep_ms_ = now;
      ticked_ = true;
    }
    if (any_route_) {
      // Intervals are aligned to the clock (…100, …200 ms): a flush whenever
      // the clock entered a new slot since the last one.
      for (uint8_t i : {kInterval100ms, kInterval1000ms}) {
        const int64_t slot = FloorDiv(now, kIntervalMs[i]);
        if (slot == flush_slot_[i]) continue;
        flush_slot_[i] = slot;
        FlushInterval(i);
      }
      for (std::size_t m = 0; m < fanout_.size(); ++m) {
        const MarketRoute* route = routes_cache_[m].get();
        if (route == nullptr) continue;
        MarketFanout& f = fanout_[m];
        if (f.ticker_dirty && (!f.ticker_sent_ms || now - *f.ticker_sent_ms >= kTickerThrottleMs)) {
          SendTickers(static_cast<MarketId>(m), *route, &f, now);
        }
        if (route->any_kline) CloseCandles(static_cast<MarketId>(m), *route, &f, now);
      }
      if (all_cache_ && now - all_sent_ms_ >= kTickerThrottleMs) SendAllMarketTickers(now);
    }
    if (now - last_sweep_ms_ >= kListenKeySweepMs) {
      last_sweep_ms_ = now;
      ExpireListenKeys(now);
    }
  }

  // Picks up subscription changes; drops the state of streams nobody watches
  // any more so that a later subscriber starts afresh.
  void RefreshRoutes() {
    if (routes_version_.load(std::memory_order_acquire) == seen_version_) return;
    std::vector<bool> kicks;
    {
      MutexLock lock(mu_);
      seen_version_ = routes_version_.load(std::memory_order_relaxed);
      routes_cache_ = routes_;
      all_cache_ = all_route_;
      kicks.swap(partial_kick_);
      partial_kick_.assign(routes_.size(), false);
    }
    any_route_ = all_cache_ != nullptr;
    if (!all_cache_) std::fill(all_dirty_.begin(), all_dirty_.end(), 0);
    for (std::size_t m = 0; m < routes_cache_.size(); ++m) {
      const MarketRoute* r = routes_cache_[m].get();
      MarketFanout& f = fanout_[m];
      static const MarketRoute kNone;
      const MarketRoute& route = r != nullptr ? *r : kNone;
      any_route_ = any_route_ || r != nullptr;
      for (std::size_t i = 0; i < 3; ++i) {
        if (!route.depth[i]) f.depth[i].Clear();
        f.partial_dirty[i] = route.partial[i] && (f.partial_dirty[i] || kicks[m]);
      }
      if (!route.AnyTicker()) f.ticker_dirty = false;
      if (!route.book_ticker) f.has_best = false;
      std::vector<MarketFanout::KlineWatch> klines;
      for (const KlineWatchKey& w : route.klines) {
        MarketFanout::KlineWatch watch{w, -1};
        for (const auto& old : f.klines) {
          if (old.key == w) watch.open_ms = old.open_ms;
        }
        klines.push_back(watch);
      }
      f.klines = std::move(klines);
    }
  }

  void PublishMarkets(const BatchOutput& batch, int64_t now) {
    for (const marketdata::DepthDiff& d : batch.depth) {
      const MarketRoute* route = RouteOf(d.market);
      if (route == nullptr) continue;
      MarketFanout& f = fanout_[Index(d.market)];
      if (route->depth[kInterval0ms]) {
        SendToTopics(*route, MatchDepth{kInterval0ms}, d.time_ns,
                     [&](TimeUnit u) { return DepthUpdateJson(config_, d, d.time_ns, u); });
      }
      for (uint8_t i : {kInterval100ms, kInterval1000ms}) {
        if (route->depth[i]) Merge(&f.depth[i], d);
        if (route->partial[i]) f.partial_dirty[i] = true;
      }
      if (route->book_ticker) SendBookTicker(d.market, *route, &f, d.time_ns);
    }
    for (std::size_t i = 0; i < batch.trades.size(); ++i) {
      const marketdata::TradeRow& t = batch.trades[i];
      const MarketRoute* route = RouteOf(t.market);
      if (route == nullptr) continue;
      touched_[Index(t.market)] |= kTraded;
      if (route->trade) {
        SendToTopics(*route, MatchKind{Kind::kTrade}, batch.time_ns,
                     [&](TimeUnit u) { return TradeEventJson(config_, t, t.time_ns, u); });
      }
      if (route->agg_trade) {
        // One event per aggregate, after its last trade: the rows of one
        // aggregate are next to each other in the batch.
        const auto agg_of = [](const marketdata::TradeRow& r) {
          return Raw(r.agg_id) != 0 ? r.agg_id : r.id;
        };
        const bool last_of_aggregate = i + 1 == batch.trades.size() ||
                                       batch.trades[i + 1].market != t.market ||
                                       agg_of(batch.trades[i + 1]) != agg_of(t);
        if (last_of_aggregate) {
          std::size_t first = i;
          while (first > 0 && batch.trades[first - 1].market == t.market &&
                 agg_of(batch.trades[first - 1]) == agg_of(t)) {
            --first;
          }
          const std::vector<marketdata::AggTrade> agg = marketdata::Aggregate(
              std::span<const marketdata::TradeRow>(batch.trades).subspan(first, i + 1 - first));
          SendToTopics(*route, MatchKind{Kind::kAggTrade}, batch.time_ns, [&](TimeUnit u) {
            return AggTradeEventJson(config_, agg.front(), agg.front().time_ns, u);
          });
        }
      }
    }
    for (MarketId m : batch.markets) touched_[Index(m)] |= kTouched;
    for (std::size_t m = 0; m < touched_.size(); ++m) {
      if (touched_[m] == 0) continue;
      const uint8_t what = touched_[m];
      touched_[m] = 0;
      if (all_cache_) all_dirty_[m] = 1;
      const MarketRoute* route = routes_cache_[m].get();
      if (route == nullptr) continue;
      MarketFanout& f = fanout_[m];
      if (route->AnyTicker()) {
        if (!f.ticker_sent_ms || now - *f.ticker_sent_ms >= kTickerThrottleMs) {
          SendTickers(static_cast<MarketId>(m), *route, &f, now);
        } else {
          f.ticker_dirty = true;
        }
      }
      if (route->any_kline && (what & kTraded) != 0) {
        SendCandles(static_cast<MarketId>(m), *route, &f, now, batch.time_ns);
      }
    }
  }

  void Forget() {
    for (MarketFanout& f : fanout_) {
      for (PendingDepth& p : f.depth) p.Clear();
      f.has_best = false;
    }
  }

  static void Merge(PendingDepth* p, const marketdata::DepthDiff& d) {
    if (!p->active) {
      p->active = true;
      p->first_update_id = d.first_update_id;
    }
    p->last_update_id = d.last_update_id;
    p->time_ns = d.time_ns;
    for (const Level& l : d.bids) p->bids[l.price] = l.qty;
    for (const Level& l : d.asks) p->asks[l.price] = l.qty;
  }

  void FlushInterval(uint8_t i) {
    for (std::size_t m = 0; m < fanout_.size(); ++m) {
      const MarketRoute* route = routes_cache_[m].get();
      if (route == nullptr) continue;
      MarketFanout& f = fanout_[m];
      const MarketId market = static_cast<MarketId>(m);
      if (route->depth[i] && f.depth[i].active) {
        PendingDepth& p = f.depth[i];
        marketdata::DepthDiff d;
        d.market = market;
        d.first_update_id = p.first_update_id;
        d.last_update_id = p.last_update_id;
        d.time_ns = p.time_ns;
        d.bids.reserve(p.bids.size());
        for (const auto& [price, qty] : p.bids) d.bids.push_back(Level{price, qty});
        d.asks.reserve(p.asks.size());
        for (const auto& [price, qty] : p.asks) d.asks.push_back(Level{price, qty});
        p.Clear();
        SendToTopics(*route, MatchDepth{i}, d.time_ns,
                     [&](TimeUnit u) { return DepthUpdateJson(config_, d, d.time_ns, u); });
      }
      if (route->partial[i] && f.partial_dirty[i]) {
        f.partial_dirty[i] = false;
        const auto snap = read_side_.Snapshot(market);
        if (!snap) continue;
        for (uint8_t levels : kPartialLevels) {
          SendToTopics(
              *route,
              [i, levels](const StreamKey& k) {
                return k.kind == Kind::kPartialDepth && k.interval == i && k.levels == levels;
              },
              // Throttled snapshots: their age is the interval, not the fan-out.
              kNoOrigin, [&](TimeUnit) { return PartialDepthJson(config_, *snap, levels); });
        }
      }
    }
  }

  void SendTickers(MarketId market, const MarketRoute& route, MarketFanout* f, int64_t now) {
    f->ticker_dirty = false;
    f->ticker_sent_ms = now;
    const auto snap = read_side_.Snapshot(market);
    if (!snap) return;
    const int64_t event_ns = now * kNsPerMs;
    if (route.ticker) {
      // Sent at most once a second: kept out of the freshness measurement.
      SendToTopics(route, MatchKind{Kind::kTicker}, kNoOrigin,
                   [&](TimeUnit u) { return TickerEventJson(config_, *snap, event_ns, u); });
    }
    if (route.mini_ticker) {
      SendToTopics(route, MatchKind{Kind::kMiniTicker}, kNoOrigin,
                   [&](TimeUnit u) { return MiniTickerEventJson(config_, *snap, event_ns, u); });
    }
    for (std::size_t w = 0; w < kTickerWindows.size(); ++w) {
      if (!route.window_ticker[w]) continue;
      SendToTopics(
          route,
          [w](const StreamKey& k) {
            return k.kind == Kind::kWindowTicker && k.interval == static_cast<uint8_t>(w);
          },
          kNoOrigin,
          [&](TimeUnit u) {
            return WindowTickerEventJson(config_, *snap, kTickerWindows[w].name,
                                         kTickerWindows[w].ms, event_ns, u);
          });
    }
    if (route.avg_price) {
      SendToTopics(route, MatchKind{Kind::kAvgPrice}, kNoOrigin,
                   [&](TimeUnit u) { return AvgPriceEventJson(config_, *snap, event_ns, u); });
    }
  }

  // The streams of every market: once a second at most, an array of the
  // events of the markets that changed since the last one (none: nothing).
  void SendAllMarketTickers(int64_t now) {
    std::vector<std::shared_ptr<const MarketSnapshot>> snaps;
    for (std::size_t m = 0; m < all_dirty_.size(); ++m) {
      if (all_dirty_[m] == 0) continue;
      all_dirty_[m] = 0;
      if (auto snap = read_side_.Snapshot(static_cast<MarketId>(m)))
        snaps.push_back(std::move(snap));
    }
    if (snaps.empty()) return;
    all_sent_ms_ = now;
    const int64_t event_ns = now * kNsPerMs;
    const MarketRoute& route = *all_cache_;
    auto array = [&](const auto& one) {
      std::string text = "[";
      for (std::size_t i = 0; i < snaps.size(); ++i) {
        if (i > 0) text += ',';
        text += one(*snaps[i]);
      }
      text += ']';
      return text;
    };
    if (route.all_ticker) {
      SendToTopics(route, MatchKind{Kind::kAllTicker}, kNoOrigin, [&](TimeUnit u) {
        return array(
            [&](const MarketSnapshot& s) { return TickerEventJson(config_, s, event_ns, u); });
      });
    }
    if (route.all_mini_ticker) {
      SendToTopics(route, MatchKind{Kind::kAllMiniTicker}, kNoOrigin, [&](TimeUnit u) {
        return array(
            [&](const MarketSnapshot& s) { return MiniTickerEventJson(config_, s, event_ns, u); });
      });
    }
    for (std::size_t w = 0; w < kTickerWindows.size(); ++w) {
      if (!route.all_window_ticker[w]) continue;
      SendToTopics(
          route,
          [w](const StreamKey& k) {
            return k.kind == Kind::kAllWindowTicker && k.interval == static_cast<uint8_t>(w);
          },
          kNoOrigin,
          [&](TimeUnit u) {
            return array([&](const MarketSnapshot& s) {
              return WindowTickerEventJson(config_, s, kTickerWindows[w].name, kTickerWindows[w].ms,
                                           event_ns, u);
            });
          });
    }
  }

  void SendBookTicker(MarketId market, const MarketRoute& route, MarketFanout* f,
                      int64_t origin_ns) {
    const auto snap = read_side_.Snapshot(market);
    if (!snap) return;
    const Level bid = snap->bids.empty() ? Level{} : snap->bids.front();
    const Level ask = snap->asks.empty() ? Level{} : snap->asks.front();
    if (f->has_best && bid == f->best_bid && ask == f->best_ask) return;
    f->has_best = true;
    f->best_bid = bid;
    f->best_ask = ask;
    SendToTopics(route, MatchKind{Kind::kBookTicker}, origin_ns,
                 [&](TimeUnit) { return BookTickerEventJson(config_, *snap); });
  }

  // After a batch that traded: the open candle of each watched series (x=false),
  // preceded by the previous candle with x=true when a new one has opened.
  void SendCandles(MarketId market, const MarketRoute& route, MarketFanout* f, int64_t now,
                   int64_t origin_ns) {
    const int64_t event_ns = now * kNsPerMs;
    const auto snap = read_side_.Snapshot(market);
    if (!snap) return;
    for (MarketFanout::KlineWatch& w : f->klines) {
      const auto interval = static_cast<KlineInterval>(w.key.interval);
      const int32_t zone = w.key.zone_min;
      const std::optional<marketdata::Kline> current = snap->LatestCandle(interval, zone);
      if (!current) continue;
      const auto match = [&w](const StreamKey& k) {
        return k.kind == Kind::kKline && k.interval == w.key.interval &&
               k.zone_min == w.key.zone_min;
      };
      if (w.open_ms >= 0 && current->open_time_ms != w.open_ms) {
        if (const auto closed = snap->Candle(interval, w.open_ms, zone)) {
          SendToTopics(route, match, origin_ns, [&](TimeUnit u) {
            return KlineEventJson(config_, market, interval, *closed, true, event_ns, u, zone);
          });
        }
      }
      w.open_ms = current->open_time_ms;
      SendToTopics(route, match, origin_ns, [&](TimeUnit u) {
        return KlineEventJson(config_, market, interval, *current, false, event_ns, u, zone);
      });
    }
  }

  // The candle last sent has ended by the clock: send it once more, closed.
  // The clock, not a batch, sends it: no engine origin.
  void CloseCandles(MarketId market, const MarketRoute& route, MarketFanout* f, int64_t now) {
    const int64_t event_ns = now * kNsPerMs;
    std::shared_ptr<const MarketSnapshot> snap;
    for (MarketFanout::KlineWatch& w : f->klines) {
      if (w.open_ms < 0) continue;
      const auto interval = static_cast<KlineInterval>(w.key.interval);
      const int32_t zone = w.key.zone_min;
      if (now < marketdata::KlineNextOpenMs(interval, w.open_ms, zone)) continue;
      if (!snap) snap = read_side_.Snapshot(market);
      if (!snap) return;
      if (const auto k = snap->Candle(interval, w.open_ms, zone)) {
        SendToTopics(
            route,
            [&w](const StreamKey& key) {
              return key.kind == Kind::kKline && key.interval == w.key.interval &&
                     key.zone_min == w.key.zone_min;
            },
            kNoOrigin,
            [&](TimeUnit u) {
              return KlineEventJson(config_, market, interval, *k, true, event_ns, u, zone);
            });
      }
      w.open_ms = -1;
    }
  }

  void PublishUsers(const BatchOutput& batch, int64_t now) {
    user_scratch_.assign(batch.accounts.size(), nullptr);
    bool any = false;
    {
      MutexLock lock(mu_);
      for (std::size_t i = 0; i < batch.accounts.size(); ++i) {
        const auto it = user_subs_.find(static_cast<uint32_t>(batch.accounts[i].account));
        if (it == user_subs_.end()) continue;
        user_scratch_[i] = it->second;
        any = true;
      }
    }
    if (!any) return;
    std::vector<std::string> events;
    for (std::size_t i = 0; i < batch.accounts.size(); ++i) {
      if (!user_scratch_[i]) continue;
      const marketdata::AccountUpdate& u = batch.accounts[i];
      events.clear();
      // listStatus events among the executionReports, where their changes
      // happened.
      std::size_t next_list = 0;
      for (std::size_t k = 0; k <= u.reports.size(); ++k) {
        while (next_list < u.lists.size() && u.lists[next_list].after_reports <= k) {
          events.push_back(ListStatusJson(config_, u.lists[next_list++], now));
        }
        if (k < u.reports.size()) events.push_back(ExecutionReportJson(config_, u.reports[k], now));
      }
      for (const marketdata::BalanceDelta& d : u.transfers) {
        events.push_back(BalanceUpdateJson(config_, d, now));
      }
      if (!u.balances.empty()) events.push_back(AccountPositionJson(config_, u.balances, now));
      for (const std::string& event : events) {
        SendUserEvent(*user_scratch_[i], event, batch.time_ns);
      }
      user_scratch_[i].reset();
    }
  }

  // One event to every subscription of an account: the object alone on
  // listenKey streams, {"subscriptionId":N,"event":...} on the WebSocket API,
  // each text built once.
  void SendUserEvent(const std::vector<UserSub>& subs, const std::string& event,
                     int64_t origin_ns) {
    std::shared_ptr<const std::string> raw;
    std::vector<std::pair<int64_t, std::shared_ptr<const std::string>>> wrapped;
    for (const UserSub& s : subs) {
      if (s.subscription_id == kListenKeySubscription) {
        if (!raw) raw = std::make_shared<const std::string>(event);
        Deliver(*s.conn, raw, origin_ns);
        continue;
      }
      std::shared_ptr<const std::string> text;
      for (const auto& w : wrapped) {
        if (w.first == s.subscription_id) text = w.second;
      }
      if (!text) {
        text = std::make_shared<const std::string>(
            "{\"subscriptionId\":" + std::to_string(s.subscription_id) + ",\"event\":" + event +
            "}");
        wrapped.emplace_back(s.subscription_id, text);
      }
      Deliver(*s.conn, text, origin_ns);
    }
  }

  // ------------------------------------------------------------- sending

  // Sends one payload to the topics of `route` that `match` selects, with
  // `origin_ns` (the engine time of the batch it comes from, kNoOrigin for
  // none) for the server's freshness measure. The payload is built at most
  // once per time unit, build(unit), and only when some topic has a
  // subscriber in that unit; raw subscribers in one unit share one text,
  // combined ones one text per stream name and unit.
  template <class Match, class Build>
  void SendToTopics(const MarketRoute& route, const Match& match, int64_t origin_ns,
                    const Build& build) {
    std::array<std::optional<std::string>, kTimeUnits> payload;
    std::array<std::shared_ptr<const std::string>, kTimeUnits> raw;
    for (const RouteTopic& t : route.topics) {
      if (!match(t.key)) continue;
      for (std::size_t u = 0; u < kTimeUnits; ++u) {
        if (t.raw[u].empty() && t.combined[u].empty()) continue;
        if (!payload[u]) payload[u] = build(static_cast<TimeUnit>(u));
        if (!t.raw[u].empty()) {
          if (!raw[u]) raw[u] = std::make_shared<const std::string>(*payload[u]);
          for (const ConnPtr& c : t.raw[u]) Deliver(*c, raw[u], origin_ns);
        }
        if (!t.combined[u].empty()) {
          std::string text;
          text.reserve(payload[u]->size() + t.name.size() + 22);
          text += "{\"stream\":\"";
          text += t.name;  // [a-zA-Z0-9@_] only: no escaping needed
          text += "\",\"data\":";
          text += *payload[u];
          text += '}';
          auto shared = std::make_shared<const std::string>(std::move(text));
          for (const ConnPtr& c : t.combined[u]) Deliver(*c, shared, origin_ns);
        }
      }
    }
  }

  void Deliver(WsConnection& conn, const std::shared_ptr<const std::string>& text,
               int64_t origin_ns) {
    if (conn.Publish(text, origin_ns)) stats_.messages.fetch_add(1, std::memory_order_relaxed);
  }

  void Reply(WsConnection& conn, std::string text) {
    Deliver(conn, std::make_shared<const std::string>(std::move(text)), kNoOrigin);
  }

 private:
  static constexpr uint8_t kTouched = 1;
  static constexpr uint8_t kTraded = 2;

  static std::size_t Index(MarketId m) { return static_cast<std::size_t>(m); }
  const MarketRoute* RouteOf(MarketId m) const {
    const std::size_t i = Index(m);
    return i < routes_cache_.size() ? routes_cache_[i].get() : nullptr;
  }

  const engine::EngineConfig& config_;
  const marketdata::ReadSide& read_side_;
  const KeyStore& keys_;
  const StreamOptions options_;
  const std::function<int64_t()> clock_ms_;
  Mutex mu_;
  std::vector<std::string> prefixes_ MB_GUARDED_BY(mu_);  // by market: "<symbol>@"
  std::map<std::string, TopicEntry, std::less<>> topics_ MB_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<const MarketRoute>> routes_ MB_GUARDED_BY(mu_);  // by market
  // The streams of every market ("!..."); null when nobody watches one.
  std::shared_ptr<const MarketRoute> all_route_ MB_GUARDED_BY(mu_);
  bool all_markets_dirty_ MB_GUARDED_BY(mu_) = false;  // all_route_ to rebuild
  // By market: a partial depth stream gained a subscriber.
  std::vector<bool> partial_kick_ MB_GUARDED_BY(mu_);
  std::atomic<uint64_t> routes_version_{0};  // written under mu_
  std::unordered_map<uint32_t, std::shared_ptr<const std::vector<UserSub>>> user_subs_
      MB_GUARDED_BY(mu_);                    // by account
  std::atomic<uint64_t> user_sub_count_{0};  // written under mu_
  std::map<std::string, ListenKeyEntry, std::less<>> listen_keys_ MB_GUARDED_BY(mu_);
  std::unordered_map<uint32_t, std::string> account_key_ MB_GUARDED_BY(mu_);

  // Fan-out thread only.
  uint64_t seen_version_ = UINT64_MAX;
  std::vector<std::shared_ptr<const MarketRoute>> routes_cache_;
  std::shared_ptr<const MarketRoute> all_cache_;
  std::vector<uint8_t> all_dirty_;  // by market: changed since the last "!..." array
  int64_t all_sent_ms_ = INT64_MIN / 2;
  bool any_route_ = false;
  std::vector<MarketFanout> fanout_;  // by market
  std::vector<uint8_t> touched_;      // by market: kTouched | kTraded, within one Publish
  std::array<int64_t, 3> flush_slot_{INT64_MIN, INT64_MIN, INT64_MIN};  // by interval index
  int64_t last_sweep_ms_ = 0;
  bool ticked_ = false;
  std::vector<std::shared_ptr<const std::vector<UserSub>>> user_scratch_;
};

StreamHub::StreamHub(const engine::EngineConfig& config, const marketdata::ReadSide& read_side,
                     const KeyStore& keys, StreamOptions options, std::function<int64_t()> clock_ms)
    : impl_(std::make_unique<Impl>(config, read_side, keys, options, std::move(clock_ms))) {}

StreamHub::~StreamHub() = default;

bool StreamHub::Accepts(const Request& request) { return impl_->Accepts(request); }
void StreamHub::OnOpen(const std::shared_ptr<WsConnection>& conn) { impl_->OnOpen(conn); }
void StreamHub::OnMessage(const std::shared_ptr<WsConnection>& conn, std::string_view text) {
  impl_->OnMessage(conn, text);
}
void StreamHub::OnClose(const std::shared_ptr<WsConnection>& conn) { impl_->OnClose(conn); }
void StreamHub::Publish(const marketdata::BatchOutput& batch) { impl_->Publish(batch); }
void StreamHub::Tick(int64_t now_ms) { impl_->Tick(now_ms); }
void StreamHub::Forget() { impl_->Forget(); }
void StreamHub::AddMarket(std::string_view symbol) { impl_->AddMarket(symbol); }
std::string StreamHub::CreateListenKey(AccountId account) {
  return impl_->CreateListenKey(account);
}
bool StreamHub::KeepAliveListenKey(AccountId account, std::string_view key) {
  return impl_->KeepAliveListenKey(account, key);
}
bool StreamHub::CloseListenKey(AccountId account, std::string_view key) {
  return impl_->CloseListenKey(account, key);
}
const StreamStats& StreamHub::stats() const noexcept { return impl_->stats_; }

}  // namespace mb::gateway
