// The gateway's implementation class, shared by the files that define its
// methods, one file per job (each says which thread runs it):
//   gateway.cc             life cycle; routing, weights, limits, answers (io threads)
//   market_data_routes.cc  REST market data (io threads)
//   trading_routes.cc      REST trading (io threads; answers on engine/fan-out threads)
//   ws_api.cc              the WebSocket API (io threads), through WsApiBackend
//   admin_routes.cc        the operator API and /metrics (io threads)
//   history_worker.cc      history answers (mb-history)
//   fanout_handler.cc      durable batches and answers (mb-fanout)
// Internal to src/gateway: nothing outside it includes this header.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "common/append_only.h"
#include "common/checked.h"
#include "common/clock.h"
#include "common/decimal.h"
#include "common/hmac.h"
#include "common/thread_annotations.h"
#include "concurrency/agent.h"
#include "engine/listing.h"
#include "gateway/api_error.h"
#include "gateway/auth.h"
#include "gateway/binance_json.h"
#include "gateway/forwarder.h"
#include "gateway/gateway.h"
#include "gateway/history.h"
#include "gateway/order_request.h"
#include "gateway/params.h"
#include "gateway/ws_api.h"
#include "log/audit.h"
#include "log/log.h"
#include "metrics/flight_recorder.h"
#include "metrics/metrics.h"
#include "metrics/owner_link.h"

namespace mb::gateway {

namespace json = boost::json;
using engine::Event;
using engine::MarketStatus;
using engine::Side;

using metrics::kStageLatency;
using metrics::kStageLatencyHelp;

// The statuses matchbook_http_requests_total counts by name; any other is "other".
constexpr int kCountedStatuses[] = {200, 400, 401, 403, 404, 405, 409, 413, 429, 500, 503};
constexpr std::size_t kStatusSlots = std::size(kCountedStatuses) + 1;

// Orders, trades and cancels of one market, counted by the fan-out thread.
struct MarketCounts {
  std::atomic<uint64_t> orders{0};
  std::atomic<uint64_t> trades{0};
  std::atomic<uint64_t> cancels{0};
};

template <class T>
T* As(Event& e) {
  return std::get_if<T>(&e.body);
}
template <class T>
const T* As(const Event& e) {
  return std::get_if<T>(&e.body);
}

// What a new order's own events say about it: the answer to POST /order
// reflects the order as its command left it, not later commands' effects.
// The command's order is the first one accepted: orders accepted after it
// are others the same command placed (an OTO's pending orders, placed when
// this order's trade fills their working order).
inline marketdata::OrderRecord OrderFromEvents(const engine::EngineConfig& config,
                                               std::span<const Event> events,
                                               std::vector<marketdata::Fill>* fills) {
  marketdata::OrderRecord o;
  bool accepted = false;
  bool expired = false;
  bool filled = false;
  for (const Event& e : events) {
    if (const auto* a = As<engine::OrderAccepted>(e)) {
      if (accepted) continue;
      accepted = true;
      o.id = a->order_id;
      o.terms = a->terms;
      o.quote_qty = a->quote_qty;
      o.client_order_id = a->client_order_id;
      o.time_ns = e.timestamp_ns;
      o.update_ns = e.timestamp_ns;
    } else if (const auto* t = As<engine::Trade>(e)) {
      if (t->taker_order_id != o.id) continue;
      o.executed += t->qty;
      o.cumulative_quote += t->notional;
      filled = filled || t->taker_filled;
      const engine::MarketSpec& m = config.markets[static_cast<std::size_t>(t->market)];
      marketdata::Fill f;
      f.trade_id = t->trade_id;
      f.order_id = o.id;
      f.account = o.terms.account;
      f.market = t->market;
      f.side = o.terms.side;
      f.price = t->price;
      f.qty = t->qty;
      f.base_qty = t->base_qty;
      f.notional = t->notional;
      f.commission = t->taker_fee;
      f.commission_asset = o.terms.side == Side::kBuy ? m.base : m.quote;
      f.is_maker = false;
      f.time_ns = e.timestamp_ns;
      fills->push_back(f);
    } else if (const auto* armed = As<engine::OrderArmed>(e)) {
      if (armed->order_id != o.id) continue;
      o.stop_price = armed->stop_price;
      o.trailing_delta = armed->trailing_delta;
      // Without an activation price a trailing stop tracks from the start.
      if (armed->trailing_delta != 0 && armed->stop_price.value == 0) {
        o.trailing_ns = e.timestamp_ns;
      }
    } else if (const auto* triggered = As<engine::OrderTriggered>(e)) {
      if (triggered->order_id != o.id) continue;
      o.trigger_ns = e.timestamp_ns;
    } else if (const auto* ib = As<engine::IcebergAccepted>(e)) {
      if (ib->order_id == o.id) o.iceberg_qty = ib->slice;
    } else if (const auto* r = As<engine::OrderRested>(e)) {
      if (r->order_id != o.id) continue;
      o.working = true;
      o.remaining = r->remaining;
    } else if (const auto* x = As<engine::OrderExpired>(e)) {
      if (x->order_id != o.id) continue;
      expired = true;
      o.expire_reason = x->reason;
    }
  }
  if (expired && o.expire_reason == engine::ExpireReason::kQuoteBudgetSpent) {
    // Binance: a market order by quoteOrderQty that bought (or sold) all the
    // budget allows at the lot size is FILLED, not EXPIRED.
    o.status = marketdata::OrderStatus::kFilled;
  } else if (expired) {
    o.status = marketdata::OrderStatus::kExpired;
  } else if (filled || (o.terms.qty.value > 0 && o.executed == o.terms.qty)) {
    o.status = marketdata::OrderStatus::kFilled;
  } else if (o.executed.value > 0) {
    o.status = marketdata::OrderStatus::kPartiallyFilled;
  } else {
    o.status = marketdata::OrderStatus::kNew;
  }
  return o;
}

inline const engine::Rejected* FirstReject(std::span<const Event> events) {
  for (const Event& e : events) {
    if (const auto* r = As<engine::Rejected>(e)) return r;
  }
  return nullptr;
}

inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

enum class Security : uint8_t { kNone, kApiKey, kSigned };

// What an answer's headers and body depend on besides the body: carried from
// the request to whichever thread answers it.
struct ReplyMeta {
  uint32_t used_weight = 0;                     // the IP's weight this minute
  TimeUnit time_unit = TimeUnit::kMillisecond;  // X-MBX-TIME-UNIT: times in the body
  // An order-placing request's account's new orders (X-MBX-ORDER-COUNT-10S / -1D).
  std::optional<std::pair<uint32_t, uint32_t>> order_counts;
};

// Binance's request weights that depend on the request (docs/api.md). Each
// reads the parameters leniently: a malformed one is refused later by the
// endpoint, at the route's base weight.
inline uint32_t DepthWeight(const Params& p) {
  std::optional<int64_t> limit;
  if (p.GetInt("limit", &limit) || !limit || *limit <= 100) return 5;
  if (*limit <= 500) return 25;
  if (*limit <= 1000) return 50;
  return 250;
}
inline uint32_t TickerWeight(const Params& p) { return p.Has("symbol") ? 2 : 4; }
inline uint32_t OpenOrdersWeight(const Params& p) { return p.Has("symbol") ? 6 : 80; }
inline uint32_t MyTradesWeight(const Params& p) { return p.Has("orderId") ? 5 : 20; }

// A history request waits at most this long for the history to catch up.
constexpr std::chrono::milliseconds kHistoryWait{2000};
// History requests queued for the history thread, at most (then 503).
constexpr std::size_t kHistoryQueue = 1024;

inline bool IsOpen(const marketdata::OrderRecord& o) {
  return o.status == marketdata::OrderStatus::kNew ||
         o.status == marketdata::OrderStatus::kPartiallyFilled;
}

// windowSize of GET /api/v3/ticker: 1m..59m, 1h..23h, 1d..7d, in ms.
inline std::optional<int64_t> ParseWindowSize(std::string_view s) {
  if (s.size() < 2 || s.size() > 3) return std::nullopt;
  int64_t n = 0;
  for (char ch : s.substr(0, s.size() - 1)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    n = n * 10 + (ch - '0');
  }
  if (s.front() == '0') return std::nullopt;
  constexpr int64_t kMinute = 60'000;
  switch (s.back()) {
    case 'm':
      return n <= 59 ? std::optional<int64_t>(n * kMinute) : std::nullopt;
    case 'h':
      return n <= 23 ? std::optional<int64_t>(n * 60 * kMinute) : std::nullopt;
    case 'd':
      return n <= 7 ? std::optional<int64_t>(n * 24 * 60 * kMinute) : std::nullopt;
    default:
      return std::nullopt;
  }
}

// How many markets a ticker request names: 1 for `symbol`, the size of the
// `symbols` array (0 when it does not parse: the handler refuses it), or
// nullopt for neither (every market).
inline std::optional<std::size_t> NamedSymbols(const Params& p) {
  if (p.Has("symbol")) return 1;
  const auto s = p.Get("symbols");
  if (!s) return std::nullopt;
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(*s, ec);
  if (ec || !v.is_array()) return 0;
  return v.as_array().size();
}

// Request weights as Binance's table. /ticker/24hr: 2 for one symbol or up
// to 20, 40 up to 100, 80 beyond or for every market.
inline uint32_t Ticker24hWeight(const Params& p) {
  const std::optional<std::size_t> n = NamedSymbols(p);
  if (!n || *n > 100) return 80;
  return *n > 20 ? 40 : 2;
}
// /ticker and /ticker/tradingDay: 4 per symbol, 200 once more than 50.
inline uint32_t PerSymbolWeight(const Params& p) {
  const std::size_t n = std::max<std::size_t>(1, NamedSymbols(p).value_or(1));
  return n > 50 ? 200 : static_cast<uint32_t>(4 * n);
}

class Gateway::Impl final : public HttpHandler, public WsApiBackend, public fanout::Handler {
 public:
  // One request on its way through the pipeline: the completion the exchange
  // calls back, and what to answer. Owned by itself: deleted by the fan-out
  // thread once answered (or by the submitter when Submit() refused it).
  struct Pending final : exchange::Completion, fanout::Answer {
    Impl* gw = nullptr;
    Respond respond;
    unsigned version = 11;
    bool keep_alive = true;
    ReplyMeta meta;
    bool acked = false;  // answered at sequencing (ACK)
    exchange::Outcome::State state = exchange::Outcome::State::kDurable;
    Sequence seq{};
    // The command's events: valid while the fan-out stage delivers them
    // (OnApplied, which answers).
    std::span<const Event> events;
    // The flight recorder's trace: what the command is and its stage times
    // (steady_clock ns; 0 when not measured). responded_ns is stamped by
    // Reply(), on the engine thread for an ACK.
    const char* kind = "";
    uint32_t account = 0;
    uint16_t http_status = 0;
    int64_t ingress_ns = 0;
    int64_t responded_ns = 0;
    exchange::StageTimes times;
    // A new order's command: describes it in a rejected order's report.
    std::optional<engine::PlaceOrder> place;
    // Engine thread: returns true when it answered (ACK).
    std::function<bool(Pending&, std::span<const Event>)> on_sequenced;
    // Fan-out thread, once the read side shows the command's events.
    std::function<void(Pending&)> finish;

    void OnSequenced(uint64_t, Sequence, std::span<const Event> ev) noexcept override {
      if (on_sequenced) acked = on_sequenced(*this, ev);
    }
    // Journal thread (durable, or not durable at Close) or engine thread
    // (refused after intake).
    void OnDone(uint64_t, const exchange::Outcome& o) noexcept override {
      state = o.state;
      seq = o.seq;
      times = o.times;
      if (o.state == exchange::Outcome::State::kDurable) {
        gw->stage_->Hold(this, o.seq);  // goes out with its group's events
      } else {
        gw->stage_->PublishAnswer(this);
      }
    }
    // Fan-out thread, once every handler has seen the command's batch.
    void OnApplied(std::span<const Event> ev) noexcept override {
      events = ev;
      gw->Finish(this);
    }
    void Reply(int status, std::string body) {
      http_status = static_cast<uint16_t>(status);
      if (gw->timing_) responded_ns = SteadyNs();
      respond(gw->MakeResponse(version, keep_alive, status, std::move(body), meta));
    }
    void Fail(const ApiError& e) { Reply(e.http_status, e.Json()); }
  };

  Impl(const engine::EngineConfig& config, std::filesystem::path data_dir, GatewayOptions options,
       std::unique_ptr<KeyStore> keys)
      : config_(config),
        data_dir_(std::move(data_dir)),
        options_(std::move(options)),
        clock_(options_.clock != nullptr ? *options_.clock : DefaultClock()),
        keys_(std::move(keys)),
        read_side_(config_, options_.read_side),
        streams_(config_, read_side_, *keys_, options_.streams,
                 [this] { return clock_.wall_ms(); }),
        ws_api_(*keys_, *this, streams_,
                WsApiOptions{.weight_per_minute = options_.ip_limit.weight_per_minute,
                             .orders_per_10s = options_.order_limit.per_10s,
                             .orders_per_day = options_.order_limit.per_day},
                [this] { return clock_.wall_ns() / 1'000; }),
        key_limiter_(options_.key_limit),
        ip_limiter_(options_.ip_limit),
        order_limiter_(options_.order_limit),
        timing_(options_.metrics != nullptr || options_.flight_recorder != nullptr) {
    for (std::size_t m = 0; m < config_.markets.size(); ++m) market_counts_.emplace_back();
    RegisterRoutes();
    if (options_.metrics != nullptr) RegisterMetrics(*options_.metrics);
    auto audit = log::AuditLog::Open(data_dir_ / "audit.log");
    if (audit.ok()) {
      audit_ = std::move(audit).value();
    } else {
      log::Error("gateway", "operator API closed: no audit log: " + audit.status().message());
    }
  }

  ~Impl() override {
    Stop();
    if (link_) link_->Clear();
  }

  void Wire(exchange::ExchangeOptions* o, fanout::Stage* stage);
  const engine::EngineConfig& config() const { return config_; }

  void SetHistory(History* history);
  void SetDispatcher(transfer::Dispatcher* dispatcher);
  void AddHealthSection(std::string name, std::function<std::string()> json) {
    health_sections_.emplace_back(std::move(name), std::move(json));
  }

  Status Start(exchange::Exchange* exchange);
  Status ImportLegacyKeys();
  Status StartReplica(ReplicaOptions options);
  void ReplicaBootstrap(const engine::EngineImage& image);
  void SeedMarketHistory(std::span<const marketdata::MarketHistory> markets,
                         std::span<const marketdata::OrderRecord> open_orders) {
    read_side_.SeedHistory(markets, open_orders);
  }
  const marketdata::ReadSideOptions& read_side_options() const { return options_.read_side; }
  void ReplicaApply(std::span<const Event> events);
  void ReplicaTick() { OnRound(); }
  uint64_t replica_applied_seq() const noexcept { return read_side_.applied_seq(); }

  void StopServer();

  void Stop();

  uint16_t port() const noexcept;
  bool tls() const noexcept { return !options_.server.tls_cert_file.empty(); }
  // Why a client may not reach the operator `what` ("API", "page"): not
  // loopback without admin_remote, or remote on a port without TLS unless
  // admin_remote_plaintext. nullopt: it may.
  std::optional<ApiError> OperatorReach(bool loopback, std::string_view what) const;
  Status ReloadTls();
  uint16_t metrics_port() const noexcept;
  std::filesystem::path admin_token_path() const;

  Response MakeResponse(unsigned version, bool keep_alive, int status, std::string body,
                        const ReplyMeta& meta) const;

  // --- HttpHandler (io threads; gateway.cc) ---
  void Handle(Request req, std::string_view remote, bool loopback, Respond respond) override;

  // --- WsApiBackend (io threads; gateway.cc): a WebSocket API call, answered by its REST twin ---
  void Call(WsApiCall call, WsApiDone done) override;

 private:
  struct Ctx;
  struct Route;
  // A request on its way to its route, from HTTP (Handle) or the WebSocket
  // API (Call): weight, authentication unless `authenticated` (the WebSocket
  // API checked it), limits, then the route's handler.
  void Dispatch(Ctx& c, const Route& r, const std::optional<ApiError>& bad_params,
                bool authenticated);

 private:
  struct Ctx {
    Request req;
    std::string path, query, remote;
    bool loopback = false;
    unsigned version = 11;
    bool keep_alive = true;
    Respond respond;
    Params params;
    std::string api_key;
    AccountId account{};
    uint8_t permissions = 0;  // the key's (auth.h Permission bits), once authenticated
    ReplyMeta meta;
    int64_t ingress_ns = 0;            // Handle() entry, steady_clock ns (0: not measured)
    bool parse_auth_recorded = false;  // a request's second command is not parsing
  };
  using Fn = void (Impl::*)(Ctx&);
  struct Route {
    http::verb method;
    std::string path;
    Security security;
    uint32_t weight;  // Binance's weight; `weigh`, when set, gives it from the parameters
    Fn fn;
    uint32_t (*weigh)(const Params&) = nullptr;
    bool counts_order = false;   // places a new order: counted against the ORDERS limits
    uint8_t permission = kRead;  // what the key must be allowed (auth.h Permission)
  };
  // A request answered from the history by the history thread: what it
  // waits for, the query (`run`) and how to answer it. Respond posts the
  // answer onto the connection's strand from the history thread, and keeps
  // the connection alive until then.
  struct HistoryJob {
    Respond respond;
    unsigned version = 11;
    bool keep_alive = true;
    ReplyMeta meta;
    uint64_t wait_seq = 0;  // the read side's applied sequence when the request arrived
    std::chrono::steady_clock::time_point deadline;
    std::function<void(HistoryJob&)> run;
  };

  void RegisterRoutes();
  Status StartServers();
  // A replica's private call, to the primary (gateway.cc).
  void Forward(Ctx& c);

  // --- answers (gateway.cc) ---
  void Reply(Ctx& c, int status, std::string body);
  void Reply(Ctx& c, const ApiError& e);
  void Ok(Ctx& c, std::string body);
  // 429 for request weight over `limit` per minute (Binance's text); the
  // answer shows the IP's used weight, as every answer does.
  void TooMany(Ctx& c, const RateDecision& d, uint32_t limit);
  // 429 -1015 for new orders over an ORDERS limit.
  void TooManyOrders(Ctx& c, const OrderCountDecision& d);
  void Busy(const Respond& respond, unsigned version, bool keep_alive, const ReplyMeta& meta,
            exchange::SubmitResult r);
  // 503 with Retry-After and `msg` (the refusal's reason).
  void Busy(const Respond& respond, unsigned version, bool keep_alive, const ReplyMeta& meta,
            const std::string& msg);

  // Submits a command whose answer `finish` gives once durable and applied.
  // kind: a string literal naming it in the flight recorder.
  void Submit(Ctx& c, const char* kind, const engine::Command& cmd,
              std::function<void(Pending&)> finish,
              std::function<bool(Pending&, std::span<const Event>)> on_sequenced = {});

  std::optional<ApiError> Authenticate(Ctx& c, bool is_signed, int64_t now_us);

  // --- helpers over the read side (gateway.cc) ---
  std::optional<ApiError> SymbolParam(const Ctx& c, MarketId* market);
  std::optional<ApiError> LimitParam(const Ctx& c, std::size_t def, std::size_t max,
                                     std::size_t* out);
  // timeZone: hours or hours:minutes east of UTC, [-12:00, +14:00]; 0 when absent.
  std::optional<ApiError> TimeZoneParam(const Ctx& c, int32_t* zone_min);
  std::shared_ptr<const marketdata::MarketSnapshot> Snap(MarketId m) const;
  // symbol=X → [X]; symbols=["X","Y"] → both; neither → every market (*all = true).
  std::optional<ApiError> SymbolsParam(const Ctx& c, std::vector<MarketId>* out, bool* all);
  // Which markets a request names, Binance's way: `symbol` (one; -1121 when
  // unknown), `symbols` (a JSON array; -1151 when one appears twice), not both
  // (-1128), neither: every market. `symbolStatus` (TRADING, HALT, BREAK;
  // -1122 otherwise) keeps the markets in that status: with kFilter a single
  // `symbol` in another status is -1220 and a list just loses it; with
  // kAlone (exchangeInfo) it cannot be combined with `symbol` or `symbols`.
  enum class StatusFilter : uint8_t { kFilter, kAlone };
  struct SymbolSelection {
    std::vector<MarketId> markets;
    bool single = false;  // `symbol`: the answer is one object, not an array
    bool all = false;     // neither `symbol` nor `symbols`
  };
  std::optional<ApiError> SelectSymbols(const Ctx& c, StatusFilter mode, SymbolSelection* out);
  // The tickers' `type`: FULL (the default) or MINI; else -1139.
  static std::optional<ApiError> TickerTypeParam(const Ctx& c, bool* mini);
  // depth's `symbolStatus`: the market must be in that status (-1220), as on
  // Binance; an unknown status name is -1122.
  std::optional<ApiError> SymbolStatusParam(const Ctx& c, MarketId m);
  template <class F>
  void TickerLike(Ctx& c, F&& one) {
    std::vector<MarketId> markets;
    bool all = false;
    if (auto e = SymbolsParam(c, &markets, &all)) return Reply(c, *e);
    const bool single = !all && c.params.Has("symbol");
    std::string body = single ? "" : "[";
    for (std::size_t i = 0; i < markets.size(); ++i) {
      if (i > 0) body += ',';
      body += one(*Snap(markets[i]));
    }
    if (!single) body += ']';
    Ok(c, std::move(body));
  }

  // --- public endpoints (io threads; market_data_routes.cc) ---
  void Ping(Ctx& c);
  void Time(Ctx& c);
  void ExchangeInfo(Ctx& c);
  // The limits this server applies, as exchangeInfo lists them. Weight is
  // counted per IP, as on Binance (a per-key bucket, when configured, is
  // Matchbook's own addition and not listed).
  std::vector<RateLimitJson> RateLimits() const;
  // exchangeInfo's `permissions`: one name (SPOT) or a JSON array of names.
  // *spot: whether SPOT is among them.
  static std::optional<ApiError> PermissionsParam(std::string_view v, bool* spot);
  void Depth(Ctx& c);
  void Trades(Ctx& c);
  // The filters of the history endpoints: symbol, limit (default 500, at
  // most 1000), a lower id bound named `from_param`, startTime, endTime.
  struct HistoryQuery {
    MarketId market{};
    std::size_t limit = 0;
    std::optional<uint64_t> from;
    std::optional<int64_t> start, end;
  };
  std::optional<ApiError> ParseHistory(const Ctx& c, std::string_view from_param, HistoryQuery* q);

  void AggTrades(Ctx& c);
  void Klines(Ctx& c);
  void Ticker24h(Ctx& c);
  // GET /ticker and /ticker/tradingDay name their symbols (no "every market").
  std::optional<ApiError> RequireSymbols(const Ctx& c);
  void RollingTicker(Ctx& c);
  void TradingDayTicker(Ctx& c);
  void AvgPrice(Ctx& c);
  void TickerPrice(Ctx& c);
  void BookTicker(Ctx& c);

  // --- trading (trading_routes.cc) ---
  // The dry run: what the engine would refuse for certain, refused here with
  // Binance's error, per the latest read-side snapshot. The engine decides.
  std::optional<ApiError> DryRun(const engine::PlaceOrder& o);

  void NewOrderRoute(Ctx& c);

  // What answers an order the engine refused (the Pending fails with it by
  // default).
  using OrderFail = std::function<void(Pending&, const ApiError&)>;

  // Places `o`; `done` gets the Binance answer body, `fail` (or, without it,
  // the Pending's Fail) the engine's refusal.
  void SubmitOrder(Ctx& c, const char* kind, const NewOrder& o,
                   std::function<void(Pending&, std::string)> done, OrderFail fail = nullptr);

  // Whether the venue answers a re-submitted client order id with the first
  // order ([engine] client_order_id = "idempotent") instead of Binance's -2010.
  bool idempotent() const;

  // A rejected order's answer: -2010 with the reason (a client order id of an
  // open order: "Duplicate order sent.", as on Binance). Under the idempotent
  // rule a re-submitted client order id is answered with the first order's
  // current state instead (docs/architecture.md, "The domain").
  void AnswerReject(Pending& p, const engine::PlaceOrder& place, const engine::Rejected& r,
                    RespType resp, const std::function<void(Pending&, std::string)>& done,
                    const OrderFail& fail);

  void TestOrder(Ctx& c);

  // orderId and/or origClientOrderId (one of them is required; *client_id
  // is empty when not sent).
  std::optional<ApiError> OrderRefParam(const Ctx& c, std::optional<uint64_t>* id,
                                        std::string* client_id);

  // Both ids (Binance): the order is looked up by orderId, and must carry the
  // origClientOrderId sent, else -2039.
  static std::optional<ApiError> CheckClientId(const marketdata::OrderRecord& rec,
                                               std::optional<uint64_t> id,
                                               std::string_view client_id);

  // The order as the read side holds it (open, or closed and still held).
  std::optional<ApiError> FindOrderParam(const Ctx& c, MarketId market,
                                         marketdata::OrderRecord* out);

  // An open order from the read side; any other from the history when there
  // is one.
  void GetOrder(Ctx& c);

  // The answer to a cancel, from the read side once the cancel is applied.
  std::string CanceledBody(AccountId account, MarketId market, OrderId id,
                           std::string_view cancel_client_id, int64_t ms);

  void CancelOrderRoute(Ctx& c);

  void SubmitCancel(Ctx& c, const engine::CancelOrder& cancel, std::string new_cid,
                    std::function<void(Pending&, std::string)> done);

  void CancelAllRoute(Ctx& c);

  // cancelReplace: one engine command (engine::CancelReplace) cancels and,
  // if the cancel succeeded or always with cancelReplaceMode=ALLOW_FAILURE,
  // places the new order, with no other command between the two. Answers as
  // Binance does: both done 200; one failed 409 -2021 "Order cancel-replace
  // partially failed."; the cancel failed and the order was not attempted,
  // or both failed, 400 -2022 "Order cancel-replace failed."; data holds each
  // side's answer or error.
  void CancelReplace(Ctx& c);

  // cancelReplace's -2022: the cancel failed; the new order `new_result`
  // (NOT_ATTEMPTED or FAILURE) with `new_json` (null or its error).
  static std::string ReplaceFailed(const std::string& cancel_json, std::string_view new_result,
                                   std::string_view new_json);
  // cancelReplace's -2021: one side succeeded (the cancel when cancel_ok).
  static std::string ReplacePartial(bool cancel_ok, const std::string& cancel_json,
                                    std::string_view new_json);

  // PUT /api/v3/order/amend/keepPriority: reduce an open order's quantity
  // keeping its place in the queue (newQty = the new total quantity). The
  // engine names the order and decides (it exists, newQty is below its
  // quantity), so an order placed a moment ago can be amended before the read
  // side shows it.
  void AmendKeepPriority(Ctx& c);

  std::string OrdersJson(std::span<const marketdata::OrderRecord> orders) const;

  void OpenOrders(Ctx& c);

  // The history's form of the filters.
  static HistoryFilter Filter(const Ctx& c, const HistoryQuery& q, uint64_t order_id);

  // allOrders / myTrades: Binance looks up at most 24 hours at once.
  static std::optional<ApiError> AccountHistoryWindow(const HistoryQuery& q);

  void AllOrders(Ctx& c);

  void MyTrades(Ctx& c);

  // --- order lists (trading_routes.cc) ---
  void OrderListOco(Ctx& c);
  void OrderListOto(Ctx& c);
  void OrderListOtoco(Ctx& c);
  // Places a parsed list; answers with the list and its orders' reports.
  void SubmitList(Ctx& c, const NewOrderList& list);
  void CancelOrderListRoute(Ctx& c);
  void GetOrderList(Ctx& c);
  void OpenOrderLists(Ctx& c);
  void AllOrderLists(Ctx& c);
  // The list as the read side holds it, its orders' reports in `resp`'s
  // shape (canceled ones as a cancel answers, with cancel_client_id).
  std::string ListAnswer(const marketdata::ListRecord& l, RespType resp, int64_t ms,
                         bool with_reports, std::string_view cancel_client_id = {});
  std::string ListsJson(std::span<const marketdata::ListRecord> lists);

  void Account(Ctx& c);
  // --- transfers between venues (transfer_routes.cc) ---
  struct VenueBatch;
  // The `coin` parameter as an asset; *error set (-4018) when unknown.
  std::optional<AssetId> CoinParam(const Ctx& c, std::optional<ApiError>* error);
  // The asset with that symbol in the configuration.
  std::optional<AssetId> AssetNamed(std::string_view symbol) const;
  std::string DepositAddressOf(AccountId account, AssetId asset) const;
  void CapitalConfig(Ctx& c);
  void DepositAddress(Ctx& c);
  void WithdrawApply(Ctx& c);
  void WithdrawHistory(Ctx& c);
  void DepositHistory(Ctx& c);
  void VenueCall(Ctx& c);
  void AdminTransfers(Ctx& c);
  void AdminVoidTransfer(Ctx& c, std::string_view id_text);
  void AdminVenues(Ctx& c);

  void ListenKeyCreate(Ctx& c);
  void ListenKeyKeepAlive(Ctx& c);
  void ListenKeyClose(Ctx& c);

  // --- the operator API (io threads; admin_routes.cc) ---
  void HandleAdmin(Ctx& c);
  void AddHealthSections(json::object& o) const;

  // GET flight-recorder: the recorder's settings, counts and dumps (newest first).
  void AdminFlightRecorder(Ctx& c);
  // GET flight-recorder/<file>: one dump, as written. Only listed names are
  // read, so no path can reach outside the recorder's directory.
  void AdminFlightDump(Ctx& c, std::string_view file);

  // --- metrics (admin_routes.cc) ---
  // GET /metrics: the registry's text exposition (io thread; reads atomics
  // and takes no lock the engine or journal threads take).
  void HandleMetrics(Ctx& c);
  Response MetricsResponse(unsigned version, bool keep_alive) const;

  // The metrics-only port: /metrics and nothing else.
  class MetricsOnly final : public HttpHandler {
   public:
    explicit MetricsOnly(Impl* gw) : gw_(gw) {}
    void Handle(Request req, std::string_view remote, bool loopback, Respond respond) override {
      Ctx c;
      c.version = req.version();
      c.keep_alive = req.keep_alive();
      c.remote = std::string(remote);
      c.loopback = loopback;
      c.respond = std::move(respond);
      const std::string_view target = req.target();
      c.path = std::string(target.substr(0, target.find('?')));
      c.req = std::move(req);
      if (c.path != "/metrics") return gw_->Reply(c, ApiError::NotFound());
      gw_->HandleMetrics(c);
    }

   private:
    Impl* const gw_;
  };

  void CountStatus(int status) const;

  void RegisterMetrics(metrics::Registry& r);
  double WsStat(std::atomic<uint64_t> ServerStats::*field) const;

  static std::optional<std::string> StringField(const json::object& o, std::string_view k);
  static std::optional<uint32_t> AccountField(const json::object& o);
  std::optional<AccountId> ParseAccountId(std::string_view s);

  void AdminHealth(Ctx& c);
  void AdminReady(Ctx& c);
  void AdminFailover(Ctx& c);
  static json::object AccountObject(const AccountInfo& a);
  void AdminCreateAccount(Ctx& c, const json::object& body);
  void AdminAccounts(Ctx& c);
  void AdminAccount(Ctx& c, std::string_view id_text);
  // POST accounts/{id}/apiKeys: an HMAC key (the exchange makes the secret),
  // or with {"publicKey": PEM or base64} an Ed25519 key for that public key.
  void AdminCreateKey(Ctx& c, std::string_view id_text, const json::object& body);
  // GET accounts/{id}/ledger?fromSeq&limit: the account's ledger lines from
  // the history, oldest first, in whole records (a record's lines share its
  // seq): at most `limit` lines, except that a first record with more lines is
  // given whole. fromSeq = the last line's seq + 1 continues a page.
  void AdminLedger(Ctx& c, std::string_view id_text);
  void AdminRevokeKey(Ctx& c, std::string_view key);
  void SubmitAuthChange(Ctx& c, const char* kind, const engine::AuthChange& change,
                        std::function<void(Pending&, const engine::AuthChanged&)> done);
  void AdminTransfer(Ctx& c, const json::object& body, bool deposit);
  void AdminMarketStatus(Ctx& c, std::string_view symbol, const json::object& body);
  void AdminAddMarket(Ctx& c, const json::object& body);
  void AdminAddAsset(Ctx& c, const json::object& body);
  void SubmitListing(Ctx& c, const char* kind, const engine::Command& cmd);
  json::object MarketObject(MarketId id) const;
  void AdminMarkets(Ctx& c);

  // --- the history thread (history_worker.cc) ---
  // Queues a request for the history thread, which waits until the
  // history shows what the read side shows now, then runs it.
  void Defer(Ctx& c, std::function<void(HistoryJob&)> run);

  void JobReply(HistoryJob& j, int status, std::string body);
  void JobReply(HistoryJob& j, const ApiError& e);
  // The history is behind or its database fails: Binance's answer to a
  // backend that did not answer in time.
  void HistoryUnavailable(HistoryJob& j, const Status& why);
  // Market data older than the read side holds, on the history thread:
  // `fetch()` gives the history store's rows and `json(rows)` the answer; a
  // history that keeps none (kNotFound) answers with `held`, the read side's
  // rows (market_data_routes.cc).
  template <class Rows, class Fetch, class Json>
  void DeferOlder(Ctx& c, Rows held, Fetch fetch, Json json);

  // Until the history has applied j.wait_seq (true), the deadline, or Stop().
  bool WaitApplied(const HistoryJob& j);

  // The history thread's rounds (mb-history): one request each; none once
  // stopping (what is left is dropped with the connections).
  int HistoryRound();
  bool HistoryWaiting();

  // --- the fan-out thread, a handler of the fan-out stage (fanout_handler.cc) ---
  void Finish(Pending* p);

  // Fan-out thread: the durable events' orders, trades and cancels per market.
  void CountEvents(std::span<const Event> events);
  // Fan-out thread (the main thread before it starts): assets and markets
  // added at run time. Whatever the gateway keeps by market grows first, then
  // the configuration the io threads read names the market.
  void Learn(std::span<const Event> events);
  void Learn(const engine::EngineImage& image);
  void LearnMarket(const engine::MarketAdded& m);
  void Count(MarketId m, std::atomic<uint64_t> MarketCounts::*field);

  // A Rejected event carries no order details; the gateway still holds the
  // command (its request waits for this batch), so the user-data report of a
  // rejected order says what was refused.
  static void DescribeRejectedOrders(const fanout::Batch& batch, marketdata::BatchOutput* out);

  // fanout::Handler: one durable batch — the read side, the streams, the
  // counts; the stage then delivers the batch's answers.
  void OnBatch(const fanout::Batch& batch, bool) override;
  // The throttled streams' clock: every round, at least every 10 ms.
  void OnRound() override;

  // The configuration, with the assets and markets added at run time (Learn;
  // appended by the fan-out thread, read by any thread without a lock).
  engine::EngineConfig config_;
  const std::filesystem::path data_dir_;
  const GatewayOptions options_;
  const Clock& clock_;  // wall time of the API (options_.clock or the system's)
  std::unique_ptr<KeyStore> keys_;
  // <data_dir>/audit.log: every operator call and its answer; null when it
  // could not be opened (then operator calls are refused, 503).
  std::unique_ptr<log::AuditLog> audit_;
  marketdata::ReadSide read_side_;
  StreamHub streams_;
  WsApi ws_api_;  // /ws-api/v3; passes the other WebSocket connections to streams_
  RateLimiter key_limiter_;
  RateLimiter ip_limiter_;
  OrderCountLimiter order_limiter_;
  std::vector<Route> routes_;
  exchange::Exchange* exchange_ = nullptr;
  // A replica (StartReplica): no exchange; private calls to the primary.
  bool replica_ = false;
  ReplicaOptions replica_options_;
  std::unique_ptr<Forwarder> forwarder_;  // null without a primary
  // A replica's WebSocket handler: user data and the WebSocket API tunnelled
  // to the primary, every other connection to ws_api_ (the streams).
  class ReplicaWs final : public WsHandler {
   public:
    explicit ReplicaWs(Impl* gw) : gw_(gw) {}
    bool Accepts(const Request& request) override;
    void OnOpen(const std::shared_ptr<WsConnection>& conn) override;
    void OnMessage(const std::shared_ptr<WsConnection>& conn, std::string_view text) override;
    void OnClose(const std::shared_ptr<WsConnection>& conn) override;

   private:
    static bool Tunnelled(std::string_view target) {
      return IsWsApiTarget(target) || IsUserDataTarget(target);
    }
    Impl* const gw_;
  };
  ReplicaWs replica_ws_{this};
  History* history_ = nullptr;                  // the history endpoints' source when set
  transfer::Dispatcher* dispatcher_ = nullptr;  // the links to other venues, when set
  // Further objects in /admin/v1/health (set before Start, then read only).
  std::vector<std::pair<std::string, std::function<std::string()>>> health_sections_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<MetricsOnly> metrics_handler_;
  std::unique_ptr<Server> metrics_server_;  // with metrics_port

  // Metrics: set by the constructor, before any thread reads them; all null
  // without a registry.
  const bool timing_;  // stamp ingress and answer times (metrics or flight recorder)
  metrics::Histogram* hist_parse_auth_ = nullptr;
  metrics::Histogram* hist_fanout_ = nullptr;
  metrics::Histogram* hist_response_ = nullptr;
  metrics::Histogram* hist_freshness_ = nullptr;
  std::array<metrics::Counter*, kStatusSlots> status_counters_{};
  metrics::Counter* rejected_503_ = nullptr;
  metrics::Counter* venue_deposits_[3] = {};  // credited, repeated, rejected (transfer_routes.cc)
  metrics::Counter* rejected_429_ = nullptr;
  AppendOnlyVector<MarketCounts> market_counts_;  // written by the fan-out thread only
  std::atomic<std::size_t> history_depth_{0};
  std::optional<metrics::OwnerLink<Impl>> link_;

  fanout::Stage* stage_ = nullptr;   // set by Wire(): durable batches and answers
  marketdata::BatchOutput fan_out_;  // the fan-out thread's own

  Mutex history_mu_;
  std::deque<HistoryJob> history_queue_ MB_GUARDED_BY(history_mu_);
  std::atomic<bool> history_stop_{false};
  std::string history_last_error_;  // history thread only: the last one logged
  concurrency::FunctionAgent history_agent_{[this] { return HistoryRound(); },
                                            [this] { return HistoryWaiting(); }};
  concurrency::AgentRunner history_runner_{
      &history_agent_, {"mb-history", {concurrency::WaitKind::kBackOff, 0, 0, 1'000'000}}};
};

}  // namespace mb::gateway
