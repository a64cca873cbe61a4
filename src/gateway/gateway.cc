#include "gateway/gateway.h"

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

#include "common/checked.h"
#include "common/clock.h"
#include "common/decimal.h"
#include "common/hmac.h"
#include "common/thread_annotations.h"
#include "concurrency/agent.h"
#include "gateway/api_error.h"
#include "gateway/auth.h"
#include "gateway/binance_json.h"
#include "gateway/history.h"
#include "gateway/order_request.h"
#include "gateway/params.h"
#include "gateway/ws_api.h"
#include "log/log.h"
#include "metrics/flight_recorder.h"
#include "metrics/metrics.h"
#include "metrics/owner_link.h"

namespace mb::gateway {
namespace {

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
marketdata::OrderRecord OrderFromEvents(const engine::EngineConfig& config,
                                        std::span<const Event> events,
                                        std::vector<marketdata::Fill>* fills) {
  marketdata::OrderRecord o;
  bool expired = false;
  bool filled = false;
  for (const Event& e : events) {
    if (const auto* a = As<engine::OrderAccepted>(e)) {
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

const engine::Rejected* FirstReject(std::span<const Event> events) {
  for (const Event& e : events) {
    if (const auto* r = As<engine::Rejected>(e)) return r;
  }
  return nullptr;
}

std::string_view Trim(std::string_view s) {
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
uint32_t DepthWeight(const Params& p) {
  std::optional<int64_t> limit;
  if (p.GetInt("limit", &limit) || !limit || *limit <= 100) return 5;
  if (*limit <= 500) return 25;
  if (*limit <= 1000) return 50;
  return 250;
}
uint32_t TickerWeight(const Params& p) { return p.Has("symbol") ? 2 : 4; }
uint32_t OpenOrdersWeight(const Params& p) { return p.Has("symbol") ? 6 : 80; }
uint32_t MyTradesWeight(const Params& p) { return p.Has("orderId") ? 5 : 20; }

// A history request waits at most this long for the history to catch up.
constexpr std::chrono::milliseconds kHistoryWait{2000};
// History requests queued for the history thread, at most (then 503).
constexpr std::size_t kHistoryQueue = 1024;

bool IsOpen(const marketdata::OrderRecord& o) {
  return o.status == marketdata::OrderStatus::kNew ||
         o.status == marketdata::OrderStatus::kPartiallyFilled;
}

// windowSize of GET /api/v3/ticker: 1m..59m, 1h..23h, 1d..7d, in ms.
std::optional<int64_t> ParseWindowSize(std::string_view s) {
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
std::optional<std::size_t> NamedSymbols(const Params& p) {
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
uint32_t Ticker24hWeight(const Params& p) {
  const std::optional<std::size_t> n = NamedSymbols(p);
  if (!n || *n > 100) return 80;
  return *n > 20 ? 40 : 2;
}
// /ticker and /ticker/tradingDay: 4 per symbol, 200 once more than 50.
uint32_t PerSymbolWeight(const Params& p) {
  const std::size_t n = std::max<std::size_t>(1, NamedSymbols(p).value_or(1));
  return n > 50 ? 200 : static_cast<uint32_t>(4 * n);
}

}  // namespace

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
        timing_(options_.metrics != nullptr || options_.flight_recorder != nullptr),
        market_counts_(std::make_unique<MarketCounts[]>(config_.markets.size())) {
    RegisterRoutes();
    if (options_.metrics != nullptr) RegisterMetrics(*options_.metrics);
  }

  ~Impl() override {
    Stop();
    if (link_) link_->Clear();
  }

  void Wire(exchange::ExchangeOptions* o, fanout::Stage* stage) {
    o->on_recovered = [this](const engine::Engine& engine) {
      read_side_.Bootstrap(engine.ExportImage());
    };
    stage_ = stage;
    stage_->Add(this);
    o->on_durable = stage_->DurableListener();
    if (options_.metrics != nullptr || options_.flight_recorder != nullptr) o->stage_times = true;
  }

  void SetHistory(History* history) { history_ = history; }

  Status Start(exchange::Exchange* exchange) {
    exchange_ = exchange;
    if (history_ != nullptr) log::Info("gateway", "thread " + history_runner_.Start());
    ServerOptions so = options_.server;
    so.ws_freshness = hist_freshness_;
    server_ = std::make_unique<Server>(so, this, &ws_api_);
    Status s = server_->Start();
    if (s.ok() && options_.metrics != nullptr && options_.metrics_port != 0) {
      ServerOptions mo = options_.server;
      mo.port = options_.metrics_port;
      mo.io_threads = 1;
      mo.ws_freshness = nullptr;
      metrics_handler_ = std::make_unique<MetricsOnly>(this);
      metrics_server_ = std::make_unique<Server>(mo, metrics_handler_.get(), nullptr);
      s = metrics_server_->Start();
      if (!s.ok()) metrics_server_.reset();
    }
    if (!s.ok()) {
      if (server_) server_->Stop();
      server_.reset();
      Stop();
    }
    return s;
  }

  void StopServer() {
    if (metrics_server_) metrics_server_->Stop();
    if (server_) server_->Stop();
  }

  void Stop() {
    StopServer();
    history_stop_.store(true, std::memory_order_release);
    history_runner_.Stop();
    {
      // No connection is left to answer what was still queued.
      MutexLock lock(history_mu_);
      history_queue_.clear();
    }
  }

  uint16_t port() const noexcept { return server_ ? server_->port() : 0; }
  uint16_t metrics_port() const noexcept { return metrics_server_ ? metrics_server_->port() : 0; }
  std::filesystem::path admin_token_path() const { return keys_->admin_token_path(); }

  Response MakeResponse(unsigned version, bool keep_alive, int status, std::string body,
                        const ReplyMeta& meta) const {
    CountStatus(status);
    Response res{static_cast<http::status>(status), version};
    res.set(http::field::server, "matchbook");
    res.set(http::field::content_type, "application/json;charset=UTF-8");
    if (meta.used_weight > 0) res.set("X-MBX-USED-WEIGHT-1M", std::to_string(meta.used_weight));
    if (meta.order_counts) {
      res.set("X-MBX-ORDER-COUNT-10S", std::to_string(meta.order_counts->first));
      res.set("X-MBX-ORDER-COUNT-1D", std::to_string(meta.order_counts->second));
    }
    if (meta.time_unit == TimeUnit::kMicrosecond && status == 200) {
      body = TimesInMicros(body);
    }
    res.keep_alive(keep_alive);
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  }

  // --- HttpHandler ---
  void Handle(Request req, std::string_view remote, bool loopback, Respond respond) override {
    Ctx c;
    if (timing_) c.ingress_ns = SteadyNs();
    c.version = req.version();
    c.keep_alive = req.keep_alive();
    c.remote = std::string(remote);
    c.loopback = loopback;
    c.respond = std::move(respond);
    const std::string_view target = req.target();
    const std::size_t q = target.find('?');
    c.path = std::string(target.substr(0, q));
    c.query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
    c.req = std::move(req);
    if (c.path.starts_with("/admin/v1/")) return HandleAdmin(c);
    if (c.path == "/metrics" && options_.metrics != nullptr) return HandleMetrics(c);

    const Route* route = nullptr;
    bool path_known = false;
    for (const Route& r : routes_) {
      if (r.path != c.path) continue;
      path_known = true;
      if (r.method == c.req.method()) {
        route = &r;
        break;
      }
    }
    const int64_t now = clock_.wall_ms();
    if (route == nullptr) {
      // Nothing to weigh, but the answer still shows the IP's used weight.
      c.meta.used_weight = ip_limiter_.Take(c.remote, 0, now).used_weight_1m;
      return Reply(c, path_known ? ApiError::MethodNotAllowed() : ApiError::NotFound());
    }

    std::string_view body;
    const auto ct = c.req.find(http::field::content_type);
    if (!c.req.body().empty() &&
        (ct == c.req.end() || Trim(ct->value()).starts_with("application/x-www-form-urlencoded"))) {
      body = c.req.body();
    }
    const std::optional<ApiError> bad_params = Params::Parse(c.query, body, &c.params);
    Dispatch(c, *route, bad_params, /*authenticated=*/false);
  }

  // --- WsApiBackend (io threads): a WebSocket API call, answered by its REST twin ---
  void Call(WsApiCall call, WsApiDone done) override {
    Ctx c;
    if (timing_) c.ingress_ns = SteadyNs();
    c.remote = std::move(call.remote);
    c.respond = [done = std::move(done)](Response res) {
      WsApiAnswer a;
      a.status = static_cast<int>(res.result_int());
      a.body = std::move(res.body());
      const auto header = [&res](std::string_view name) -> uint32_t {
        const auto it = res.find(name);
        if (it == res.end()) return 0;
        uint32_t v = 0;
        for (char ch : it->value()) {
          if (ch < '0' || ch > '9') return 0;
          v = v * 10 + static_cast<uint32_t>(ch - '0');
        }
        return v;
      };
      a.used_weight = header("X-MBX-USED-WEIGHT-1M");
      if (res.find("X-MBX-ORDER-COUNT-10S") != res.end()) {
        a.order_counts =
            std::make_pair(header("X-MBX-ORDER-COUNT-10S"), header("X-MBX-ORDER-COUNT-1D"));
      }
      done(std::move(a));
    };
    const Route* route = nullptr;
    if (call.method != nullptr && !call.method->path.empty()) {
      for (const Route& r : routes_) {
        if (r.path == call.method->path && r.method == call.method->verb) {
          route = &r;
          break;
        }
      }
    }
    if (route == nullptr || call.error) {
      // Refused before dispatch, or answered by the WebSocket API itself: its
      // weight still counts against the IP.
      const RateDecision ip = ip_limiter_.Take(c.remote, call.weight, clock_.wall_ms());
      c.meta.used_weight = ip.used_weight_1m;
      if (!ip.allowed) return TooMany(c, ip, options_.ip_limit.weight_per_minute);
      if (call.error) return Reply(c, *call.error);
      if (route == nullptr && call.method != nullptr && !call.method->path.empty()) {
        return Reply(c, ApiError::NotFound());
      }
      return Ok(c, std::move(call.body));
    }
    c.params = std::move(call.params);
    c.api_key = std::move(call.api_key);
    c.account = call.account;
    Dispatch(c, *route, std::nullopt, /*authenticated=*/true);
  }

 private:
  struct Ctx;
  struct Route;
  // A request on its way to its route, from HTTP (Handle) or the WebSocket
  // API (Call): weight, authentication unless `authenticated` (the WebSocket
  // API checked it), limits, then the route's handler.
  void Dispatch(Ctx& c, const Route& r, const std::optional<ApiError>& bad_params,
                bool authenticated) {
    const Route* route = &r;
    const int64_t now = clock_.wall_ms();
    // Weight is counted per IP, as on Binance, and shown on every answer.
    const uint32_t weight =
        bad_params || route->weigh == nullptr ? route->weight : route->weigh(c.params);
    const RateDecision ip = ip_limiter_.Take(c.remote, weight, now);
    c.meta.used_weight = ip.used_weight_1m;
    if (!ip.allowed) return TooMany(c, ip, options_.ip_limit.weight_per_minute);
    if (bad_params) return Reply(c, *bad_params);
    const auto unit = c.req.find("X-MBX-TIME-UNIT");
    if (unit != c.req.end()) {
      const std::optional<TimeUnit> u = ParseTimeUnit(Trim(unit->value()));
      if (!u) return Reply(c, ApiError::InvalidTimeUnit());
      c.meta.time_unit = *u;
    }
    // startTime / endTime may be µs, as on Binance: the endpoints read ms.
    for (const std::string_view name : {"startTime", "endTime"}) {
      std::optional<int64_t> t;
      if (!c.params.GetInt(name, &t) && t && *t >= kMicrosFrom) {
        c.params.Set(name, std::to_string(TimestampToMillis(*t)));
      }
    }
    if (route->security != Security::kNone) {
      if (!authenticated) {
        if (auto e =
                Authenticate(c, route->security == Security::kSigned, clock_.wall_ns() / 1'000)) {
          return Reply(c, *e);
        }
      }
      // Matchbook's own per-key bucket, beside Binance's per-IP one.
      const RateDecision k = key_limiter_.Take(c.api_key, weight, now);
      if (!k.allowed) return TooMany(c, k, options_.key_limit.weight_per_minute);
    }
    if (route->counts_order) {
      const OrderCountDecision d = order_limiter_.Take(static_cast<uint64_t>(c.account), now);
      c.meta.order_counts = std::make_pair(d.count_10s, d.count_1d);
      if (!d.allowed) return TooManyOrders(c, d);
    }
    (this->*(route->fn))(c);
  }

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
    bool counts_order = false;  // places a new order: counted against the ORDERS limits
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

  void RegisterRoutes() {
    using V = http::verb;
    auto add = [this](V m, std::string p, Security s, uint32_t w, Fn f,
                      uint32_t (*weigh)(const Params&) = nullptr, bool counts_order = false) {
      routes_.push_back(Route{m, std::move(p), s, w, f, weigh, counts_order});
    };
    add(V::get, "/api/v3/ping", Security::kNone, 1, &Impl::Ping);
    add(V::get, "/api/v3/time", Security::kNone, 1, &Impl::Time);
    add(V::get, "/api/v3/exchangeInfo", Security::kNone, 20, &Impl::ExchangeInfo);
    add(V::get, "/api/v3/depth", Security::kNone, 5, &Impl::Depth, &DepthWeight);
    add(V::get, "/api/v3/trades", Security::kNone, 25, &Impl::Trades);
    add(V::get, "/api/v3/historicalTrades", Security::kNone, 25, &Impl::Trades);
    add(V::get, "/api/v3/aggTrades", Security::kNone, 4, &Impl::AggTrades);
    add(V::get, "/api/v3/klines", Security::kNone, 2, &Impl::Klines);
    add(V::get, "/api/v3/uiKlines", Security::kNone, 2, &Impl::Klines);
    add(V::get, "/api/v3/ticker/24hr", Security::kNone, 2, &Impl::Ticker24h, &Ticker24hWeight);
    add(V::get, "/api/v3/ticker", Security::kNone, 4, &Impl::RollingTicker, &PerSymbolWeight);
    add(V::get, "/api/v3/ticker/tradingDay", Security::kNone, 4, &Impl::TradingDayTicker,
        &PerSymbolWeight);
    add(V::get, "/api/v3/avgPrice", Security::kNone, 2, &Impl::AvgPrice);
    add(V::get, "/api/v3/ticker/price", Security::kNone, 2, &Impl::TickerPrice, &TickerWeight);
    add(V::get, "/api/v3/ticker/bookTicker", Security::kNone, 2, &Impl::BookTicker, &TickerWeight);
    add(V::post, "/api/v3/order", Security::kSigned, 1, &Impl::NewOrderRoute, nullptr, true);
    add(V::post, "/api/v3/order/test", Security::kSigned, 1, &Impl::TestOrder);
    add(V::get, "/api/v3/order", Security::kSigned, 4, &Impl::GetOrder);
    add(V::delete_, "/api/v3/order", Security::kSigned, 1, &Impl::CancelOrderRoute);
    add(V::post, "/api/v3/order/cancelReplace", Security::kSigned, 1, &Impl::CancelReplace, nullptr,
        true);
    add(V::put, "/api/v3/order/amend/keepPriority", Security::kSigned, 4, &Impl::AmendKeepPriority);
    add(V::delete_, "/api/v3/openOrders", Security::kSigned, 1, &Impl::CancelAllRoute);
    add(V::get, "/api/v3/openOrders", Security::kSigned, 6, &Impl::OpenOrders, &OpenOrdersWeight);
    add(V::get, "/api/v3/allOrders", Security::kSigned, 20, &Impl::AllOrders);
    add(V::get, "/api/v3/myTrades", Security::kSigned, 20, &Impl::MyTrades, &MyTradesWeight);
    add(V::get, "/api/v3/account", Security::kSigned, 20, &Impl::Account);
    add(V::post, "/api/v3/userDataStream", Security::kApiKey, 2, &Impl::ListenKeyCreate);
    add(V::put, "/api/v3/userDataStream", Security::kApiKey, 2, &Impl::ListenKeyKeepAlive);
    add(V::delete_, "/api/v3/userDataStream", Security::kApiKey, 2, &Impl::ListenKeyClose);
  }

  // --- answers ---
  void Reply(Ctx& c, int status, std::string body) {
    c.respond(MakeResponse(c.version, c.keep_alive, status, std::move(body), c.meta));
  }
  void Reply(Ctx& c, const ApiError& e) { Reply(c, e.http_status, e.Json()); }
  void Ok(Ctx& c, std::string body) { Reply(c, 200, std::move(body)); }
  // 429 for request weight over `limit` per minute (Binance's text); the
  // answer shows the IP's used weight, as every answer does.
  void TooMany(Ctx& c, const RateDecision& d, uint32_t limit) {
    Response res = MakeResponse(
        c.version, c.keep_alive, 429,
        ApiError::TooManyRequests(
            fmt::format("Too much request weight used; current limit is {} request weight per 1 "
                        "MINUTE. Please use WebSocket Streams for live updates to avoid polling "
                        "the API.",
                        limit))
            .Json(),
        c.meta);
    res.set(http::field::retry_after, std::to_string(std::max<uint32_t>(1, d.retry_after_s)));
    if (rejected_429_ != nullptr) rejected_429_->Inc();
    c.respond(std::move(res));
  }
  // 429 -1015 for new orders over an ORDERS limit.
  void TooManyOrders(Ctx& c, const OrderCountDecision& d) {
    const std::string msg =
        d.day_limit ? fmt::format("Too many new orders; current limit is {} orders per 1 DAY.",
                                  options_.order_limit.per_day)
                    : fmt::format("Too many new orders; current limit is {} orders per 10 SECOND.",
                                  options_.order_limit.per_10s);
    Response res =
        MakeResponse(c.version, c.keep_alive, 429, ApiError{429, -1015, msg}.Json(), c.meta);
    res.set(http::field::retry_after, std::to_string(std::max<uint32_t>(1, d.retry_after_s)));
    if (rejected_429_ != nullptr) rejected_429_->Inc();
    c.respond(std::move(res));
  }
  void Busy(const Respond& respond, unsigned version, bool keep_alive, const ReplyMeta& meta,
            exchange::SubmitResult r) {
    std::string msg;
    switch (r) {
      case exchange::SubmitResult::kFull:
        msg =
            "Server is currently overloaded with other requests. Please try again in a few "
            "seconds.";
        break;
      case exchange::SubmitResult::kRefusing:
        msg = "The exchange cannot write its journal and refuses new commands for now: " +
              exchange_->RefusalReason();
        break;
      default:
        msg = "The exchange is shutting down.";
        break;
    }
    Response res = MakeResponse(version, keep_alive, 503, ApiError::ServerBusy(msg).Json(), meta);
    res.set(http::field::retry_after, std::to_string(options_.retry_after_s));
    if (rejected_503_ != nullptr) rejected_503_->Inc();
    respond(std::move(res));
  }

  // Submits a command whose answer `finish` gives once durable and applied.
  // kind: a string literal naming it in the flight recorder.
  void Submit(Ctx& c, const char* kind, const engine::Command& cmd,
              std::function<void(Pending&)> finish,
              std::function<bool(Pending&, std::span<const Event>)> on_sequenced = {}) {
    auto* p = new Pending;
    p->gw = this;
    p->kind = kind;
    p->account = static_cast<uint32_t>(c.account);
    p->ingress_ns = c.ingress_ns;
    p->respond = c.respond;
    p->version = c.version;
    p->keep_alive = c.keep_alive;
    p->meta = c.meta;
    p->finish = std::move(finish);
    p->on_sequenced = std::move(on_sequenced);
    if (const auto* place = std::get_if<engine::PlaceOrder>(&cmd.body)) p->place = *place;
    const bool notify = static_cast<bool>(p->on_sequenced);
    if (hist_parse_auth_ != nullptr && c.ingress_ns != 0 && !c.parse_auth_recorded) {
      hist_parse_auth_->RecordDelta(SteadyNs() - c.ingress_ns);
      c.parse_auth_recorded = true;
    }
    const exchange::SubmitResult r = exchange_->Submit(cmd, p, 0, notify);
    if (r != exchange::SubmitResult::kOk) {
      Busy(p->respond, p->version, p->keep_alive, p->meta, r);
      delete p;
    }
  }

  std::optional<ApiError> Authenticate(Ctx& c, bool is_signed, int64_t now_us) {
    const auto h = c.req.find("X-MBX-APIKEY");
    if (h == c.req.end() || h->value().empty()) return ApiError::BadApiKeyFormat();
    c.api_key = std::string(Trim(h->value()));
    const std::optional<ApiKey> key = keys_->FindKey(c.api_key);
    if (!key || key->revoked) return ApiError::RejectedApiKey();
    c.account = key->account;
    if (!is_signed) return std::nullopt;
    std::optional<int64_t> ts;
    int64_t window_us = 0;
    if (auto e = c.params.GetInt("timestamp", &ts)) return e;
    if (!ts) return ApiError::MandatoryMissing("timestamp");
    if (auto e = ParseRecvWindow(c.params.Get("recvWindow"), &window_us)) return e;
    if (!c.params.signature() || c.params.signature()->empty()) {
      return ApiError::MandatoryMissing("signature");
    }
    if (auto e = CheckTimestampUs(*ts, window_us, now_us)) return e;
    if (!VerifySignature(*key, c.params.signed_payload(), *c.params.signature())) {
      return ApiError::BadSignature();
    }
    return std::nullopt;
  }

  // --- helpers over the read side ---
  std::optional<ApiError> SymbolParam(const Ctx& c, MarketId* market) {
    std::string_view symbol;
    if (auto e = c.params.Require("symbol", &symbol)) return e;
    return FindMarket(config_, symbol, market);
  }
  std::optional<ApiError> LimitParam(const Ctx& c, std::size_t def, std::size_t max,
                                     std::size_t* out) {
    std::optional<int64_t> v;
    if (auto e = c.params.GetInt("limit", &v)) return e;
    if (!v) {
      *out = def;
      return std::nullopt;
    }
    if (*v <= 0) return ApiError::BadParam("limit", "must be positive");
    *out = std::min<std::size_t>(static_cast<std::size_t>(*v), max);
    return std::nullopt;
  }
  // timeZone: hours or hours:minutes east of UTC, [-12:00, +14:00]; 0 when absent.
  std::optional<ApiError> TimeZoneParam(const Ctx& c, int32_t* zone_min) {
    *zone_min = 0;
    const auto v = c.params.Get("timeZone");
    if (!v) return std::nullopt;
    const std::optional<int32_t> z = marketdata::ParseTimeZone(*v);
    if (!z) return ApiError::IllegalChars("timeZone", "-12:00 to +14:00");
    *zone_min = *z;
    return std::nullopt;
  }
  std::shared_ptr<const marketdata::MarketSnapshot> Snap(MarketId m) const {
    return read_side_.Snapshot(m);
  }
  // symbol=X → [X]; symbols=["X","Y"] → both; neither → every market (*all = true).
  std::optional<ApiError> SymbolsParam(const Ctx& c, std::vector<MarketId>* out, bool* all) {
    SymbolSelection sel;
    if (auto e = SelectSymbols(c, StatusFilter::kFilter, &sel)) return e;
    *all = sel.all;
    *out = std::move(sel.markets);
    return std::nullopt;
  }
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
  std::optional<ApiError> SelectSymbols(const Ctx& c, StatusFilter mode, SymbolSelection* out) {
    const std::optional<std::string_view> symbol = c.params.Get("symbol");
    const std::optional<std::string_view> symbols = c.params.Get("symbols");
    if (symbol && symbols) return ApiError::BadParamCombination();
    std::optional<MarketStatus> status;
    if (auto st = c.params.Get("symbolStatus")) {
      if (mode == StatusFilter::kAlone && (symbol || symbols)) {
        return ApiError::BadParamCombination();
      }
      status = ParseSymbolStatus(*st);
      if (!status) return ApiError::InvalidSymbolStatus();
    }
    SymbolSelection sel;
    if (symbol) {
      MarketId m{};
      if (auto e = FindMarket(config_, *symbol, &m)) return e;
      if (status && Snap(m)->status != *status) return ApiError::SymbolStatusMismatch();
      sel.markets.push_back(m);
      sel.single = true;
    } else if (symbols) {
      json::error_code ec;
      json::value v = json::parse(*symbols, ec);
      if (ec || !v.is_array()) return ApiError::BadParam("symbols", "expected a JSON array");
      for (const json::value& x : v.as_array()) {
        if (!x.is_string()) return ApiError::BadParam("symbols", "expected strings");
        MarketId m{};
        if (auto e = FindMarket(config_, std::string_view(x.as_string()), &m)) return e;
        if (std::find(sel.markets.begin(), sel.markets.end(), m) != sel.markets.end()) {
          return ApiError::DuplicateSymbols();
        }
        sel.markets.push_back(m);
      }
    } else {
      sel.all = true;
      for (std::size_t i = 0; i < config_.markets.size(); ++i) {
        sel.markets.push_back(static_cast<MarketId>(i));
      }
    }
    if (status && !sel.single) {
      std::erase_if(sel.markets, [&](MarketId m) { return Snap(m)->status != *status; });
    }
    *out = std::move(sel);
    return std::nullopt;
  }
  // The tickers' `type`: FULL (the default) or MINI; else -1139.
  static std::optional<ApiError> TickerTypeParam(const Ctx& c, bool* mini) {
    const std::optional<std::string_view> t = c.params.Get("type");
    *mini = t && *t == "MINI";
    if (t && !*mini && *t != "FULL") return ApiError::InvalidTickerType();
    return std::nullopt;
  }
  // depth's `symbolStatus`: the market must be in that status (-1220), as on
  // Binance; an unknown status name is -1122.
  std::optional<ApiError> SymbolStatusParam(const Ctx& c, MarketId m) {
    const std::optional<std::string_view> st = c.params.Get("symbolStatus");
    if (!st) return std::nullopt;
    const std::optional<MarketStatus> status = ParseSymbolStatus(*st);
    if (!status) return ApiError::InvalidSymbolStatus();
    if (Snap(m)->status != *status) return ApiError::SymbolStatusMismatch();
    return std::nullopt;
  }
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

  // --- public endpoints ---
  void Ping(Ctx& c) { Ok(c, "{}"); }
  void Time(Ctx& c) { Ok(c, fmt::format("{{\"serverTime\":{}}}", clock_.wall_ms())); }
  void ExchangeInfo(Ctx& c) {
    SymbolSelection sel;
    if (auto e = SelectSymbols(c, StatusFilter::kAlone, &sel)) return Reply(c, *e);
    bool spot = true;  // every Matchbook market has the SPOT permission, and only it
    if (auto p = c.params.Get("permissions")) {
      if (c.params.Has("symbol") || c.params.Has("symbols")) {
        return Reply(c, ApiError::BadParamCombination());
      }
      if (auto e = PermissionsParam(*p, &spot)) return Reply(c, *e);
    }
    bool show_sets = true;
    if (auto v = c.params.Get("showPermissionSets")) {
      if (*v == "false") {
        show_sets = false;
      } else if (*v != "true") {
        return Reply(c, ApiError::BadParam("showPermissionSets", "true or false"));
      }
    }
    if (!spot) sel.markets.clear();
    std::vector<MarketStatus> statuses;
    for (std::size_t i = 0; i < config_.markets.size(); ++i) {
      statuses.push_back(Snap(static_cast<MarketId>(i))->status);
    }
    const std::vector<RateLimitJson> limits = RateLimits();
    Ok(c, ExchangeInfoJson(config_, statuses, clock_.wall_ms(), limits, sel.markets, show_sets));
  }
  // The limits this server applies, as exchangeInfo lists them. Weight is
  // counted per IP, as on Binance (a per-key bucket, when configured, is
  // Matchbook's own addition and not listed).
  std::vector<RateLimitJson> RateLimits() const {
    std::vector<RateLimitJson> out;
    if (options_.ip_limit.weight_per_minute != 0) {
      out.push_back({"REQUEST_WEIGHT", "MINUTE", 1, options_.ip_limit.weight_per_minute});
    }
    if (options_.order_limit.per_10s != 0) {
      out.push_back({"ORDERS", "SECOND", 10, options_.order_limit.per_10s});
    }
    if (options_.order_limit.per_day != 0) {
      out.push_back({"ORDERS", "DAY", 1, options_.order_limit.per_day});
    }
    return out;
  }
  // exchangeInfo's `permissions`: one name (SPOT) or a JSON array of names.
  // *spot: whether SPOT is among them.
  static std::optional<ApiError> PermissionsParam(std::string_view v, bool* spot) {
    std::vector<std::string> names;
    if (!v.empty() && v.front() == '[') {
      json::error_code ec;
      json::value parsed = json::parse(v, ec);
      if (ec || !parsed.is_array() || parsed.as_array().empty()) {
        return ApiError::BadParam("permissions", "expected a name or a JSON array of names");
      }
      for (const json::value& x : parsed.as_array()) {
        if (!x.is_string()) return ApiError::BadParam("permissions", "expected strings");
        names.emplace_back(x.as_string());
      }
    } else {
      names.emplace_back(v);
    }
    *spot = false;
    for (const std::string& n : names) {
      if (n.empty() || !std::all_of(n.begin(), n.end(), [](char ch) {
            return (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
          })) {
        return ApiError::BadParam("permissions", "expected permission names such as SPOT");
      }
      if (n == "SPOT") *spot = true;
    }
    return std::nullopt;
  }
  void Depth(Ctx& c) {
    MarketId m{};
    std::size_t limit = 0;
    if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
    if (auto e = LimitParam(c, 100, 5000, &limit)) return Reply(c, *e);
    if (auto e = SymbolStatusParam(c, m)) return Reply(c, *e);
    Ok(c, DepthJson(config_, *Snap(m), limit));
  }
  void Trades(Ctx& c) {
    MarketId m{};
    std::size_t limit = 0;
    std::optional<uint64_t> from;
    if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
    if (auto e = LimitParam(c, 500, 1000, &limit)) return Reply(c, *e);
    if (auto e = c.params.GetUint("fromId", &from)) return Reply(c, *e);
    const auto rows = Snap(m)->RecentTrades(limit, from.value_or(0));
    Ok(c, TradesJson(config_, rows));
  }
  // The filters of the history endpoints: symbol, limit (default 500, at
  // most 1000), a lower id bound named `from_param`, startTime, endTime.
  struct HistoryQuery {
    MarketId market{};
    std::size_t limit = 0;
    std::optional<uint64_t> from;
    std::optional<int64_t> start, end;
  };
  std::optional<ApiError> ParseHistory(const Ctx& c, std::string_view from_param, HistoryQuery* q) {
    if (auto e = SymbolParam(c, &q->market)) return e;
    if (auto e = LimitParam(c, 500, 1000, &q->limit)) return e;
    if (auto e = c.params.GetUint(from_param, &q->from)) return e;
    if (auto e = c.params.GetInt("startTime", &q->start)) return e;
    return c.params.GetInt("endTime", &q->end);
  }

  void AggTrades(Ctx& c) {
    HistoryQuery q;
    if (auto e = ParseHistory(c, "fromId", &q)) return Reply(c, *e);
    const auto rows = Snap(q.market)->AggTrades(q.limit, q.from.value_or(0), q.start.value_or(0),
                                                q.end.value_or(0));
    Ok(c, AggTradesJson(config_, rows));
  }
  void Klines(Ctx& c) {
    MarketId m{};
    std::size_t limit = 0;
    std::string_view iv;
    std::optional<int64_t> start, end;
    if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
    if (auto e = c.params.Require("interval", &iv)) return Reply(c, *e);
    const auto interval = marketdata::ParseKlineInterval(iv);
    if (!interval) return Reply(c, ApiError::InvalidInterval());
    if (auto e = LimitParam(c, 500, 1000, &limit)) return Reply(c, *e);
    if (auto e = c.params.GetInt("startTime", &start)) return Reply(c, *e);
    if (auto e = c.params.GetInt("endTime", &end)) return Reply(c, *e);
    int32_t zone = 0;
    if (auto e = TimeZoneParam(c, &zone)) return Reply(c, *e);
    const auto rows = Snap(m)->Klines(*interval, start.value_or(0), end.value_or(0), limit, zone);
    Ok(c, KlinesJson(config_, m, *interval, rows, zone));
  }
  void Ticker24h(Ctx& c) {
    const int64_t now = clock_.wall_ms();
    bool mini = false;
    if (auto e = TickerTypeParam(c, &mini)) return Reply(c, *e);
    TickerLike(c, [&](const marketdata::MarketSnapshot& s) {
      return gateway::Ticker24hJson(config_, s, now, mini);
    });
  }
  // GET /ticker and /ticker/tradingDay name their symbols (no "every market").
  std::optional<ApiError> RequireSymbols(const Ctx& c) {
    if (c.params.Has("symbol") || c.params.Has("symbols")) return std::nullopt;
    return ApiError::MandatoryMissing("symbol");
  }
  void RollingTicker(Ctx& c) {
    const int64_t now = clock_.wall_ms();
    if (auto e = RequireSymbols(c)) return Reply(c, *e);
    int64_t window = 24 * 3'600'000;
    if (const auto w = c.params.Get("windowSize")) {
      const std::optional<int64_t> parsed = ParseWindowSize(*w);
      if (!parsed)
        return Reply(c, ApiError::IllegalChars("windowSize", "1m..59m, 1h..23h, 1d..7d"));
      window = *parsed;
    }
    bool mini = false;
    if (auto e = TickerTypeParam(c, &mini)) return Reply(c, *e);
    TickerLike(c, [&](const marketdata::MarketSnapshot& s) {
      return WindowTickerJson(config_, s.market, s.Rolling(window, now), mini);
    });
  }
  void TradingDayTicker(Ctx& c) {
    const int64_t now = clock_.wall_ms();
    if (auto e = RequireSymbols(c)) return Reply(c, *e);
    int32_t zone = 0;
    if (auto e = TimeZoneParam(c, &zone)) return Reply(c, *e);
    bool mini = false;
    if (auto e = TickerTypeParam(c, &mini)) return Reply(c, *e);
    TickerLike(c, [&](const marketdata::MarketSnapshot& s) {
      return WindowTickerJson(config_, s.market, s.TradingDay(zone, now), mini);
    });
  }
  void AvgPrice(Ctx& c) {
    MarketId m{};
    if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
    Ok(c, AvgPriceJson(config_, *Snap(m), clock_.wall_ms()));
  }
  void TickerPrice(Ctx& c) {
    TickerLike(c, [&](const marketdata::MarketSnapshot& s) { return PriceTickerJson(config_, s); });
  }
  void BookTicker(Ctx& c) {
    TickerLike(c, [&](const marketdata::MarketSnapshot& s) { return BookTickerJson(config_, s); });
  }

  // --- trading ---
  // The dry run: what the engine would refuse for certain, refused here with
  // Binance's error, per the latest read-side snapshot. The engine decides.
  std::optional<ApiError> DryRun(const engine::PlaceOrder& o) {
    const auto snap = Snap(o.market);
    if (snap->status != MarketStatus::kTrading) {
      return ApiError::FromReject(engine::CommandType::kPlaceOrder,
                                  engine::RejectReason::kMarketNotTrading);
    }
    if (const std::optional<Amount> need = RequiredLock(config_, o)) {
      const engine::MarketSpec& m = config_.markets[static_cast<std::size_t>(o.market)];
      const AssetId asset = engine::SpendAsset(m, o.side);
      if (read_side_.balance(o.account, asset).available < *need) {
        return ApiError::InsufficientBalance();
      }
    }
    return std::nullopt;
  }

  void NewOrderRoute(Ctx& c) {
    NewOrder o;
    if (auto e = ParseNewOrder(c.params, config_, c.account, &o)) return Reply(c, *e);
    if (o.client_order_id.empty()) {
      o.client_order_id = "mb-" + RandomToken(22);
      (void)o.place.client_order_id.Assign(o.client_order_id);
    }
    if (auto e = DryRun(o.place)) return Reply(c, *e);
    SubmitOrder(c, "new_order", o,
                [](Pending& p, std::string body) { p.Reply(200, std::move(body)); });
  }

  // What answers an order the engine refused (the Pending fails with it by
  // default).
  using OrderFail = std::function<void(Pending&, const ApiError&)>;

  // Places `o`; `done` gets the Binance answer body, `fail` (or, without it,
  // the Pending's Fail) the engine's refusal.
  void SubmitOrder(Ctx& c, const char* kind, const NewOrder& o,
                   std::function<void(Pending&, std::string)> done, OrderFail fail = nullptr) {
    engine::Command cmd;
    cmd.body = o.place;
    const RespType resp = o.resp;
    std::function<bool(Pending&, std::span<const Event>)> on_seq;
    if (resp == RespType::kAck) {
      // ACK: answered once sequenced. A rejected order is answered then too
      // (a reject changes nothing, so it is final when decided).
      on_seq = [this, done, fail, place = o.place](Pending& p, std::span<const Event> ev) {
        if (const engine::Rejected* r = FirstReject(ev)) {
          // Under the idempotent rule a duplicate is answered from the read
          // side once durable (below).
          if (r->reason == engine::RejectReason::kDuplicateClientOrderId && idempotent()) {
            return false;
          }
          AnswerReject(p, place, *r, RespType::kAck, done, fail);
          return true;
        }
        std::vector<marketdata::Fill> fills;
        const marketdata::OrderRecord rec = OrderFromEvents(config_, ev, &fills);
        done(p,
             NewOrderJson(config_, rec, {}, RespType::kAck, ev.front().timestamp_ns / 1'000'000));
        return true;
      };
    }
    Submit(
        c, kind, cmd,
        [this, resp, done, fail, place = o.place](Pending& p) {
          if (p.acked) return;
          if (const engine::Rejected* r = FirstReject(p.events)) {
            return AnswerReject(p, place, *r, resp, done, fail);
          }
          std::vector<marketdata::Fill> fills;
          const marketdata::OrderRecord rec = OrderFromEvents(config_, p.events, &fills);
          done(p,
               NewOrderJson(config_, rec, fills, resp, p.events.front().timestamp_ns / 1'000'000));
        },
        std::move(on_seq));
  }

  // Whether the venue answers a re-submitted client order id with the first
  // order ([engine] client_order_id = "idempotent") instead of Binance's -2010.
  bool idempotent() const {
    return config_.client_order_ids == engine::ClientOrderIds::kIdempotent;
  }

  // A rejected order's answer: -2010 with the reason (a client order id of an
  // open order: "Duplicate order sent.", as on Binance). Under the idempotent
  // rule a re-submitted client order id is answered with the first order's
  // current state instead (DESIGN.md §2).
  void AnswerReject(Pending& p, const engine::PlaceOrder& place, const engine::Rejected& r,
                    RespType resp, const std::function<void(Pending&, std::string)>& done,
                    const OrderFail& fail) {
    if (r.reason == engine::RejectReason::kDuplicateClientOrderId && r.existing_id != 0 &&
        idempotent()) {
      const auto o =
          read_side_.FindOrder(place.account, place.market, static_cast<OrderId>(r.existing_id));
      if (o) {
        const auto fills = read_side_.MyTrades(place.account, place.market, r.existing_id, 0, 0, 0,
                                               options_.read_side.history_trades);
        return done(p, NewOrderJson(config_, *o, fills, resp, o->time_ns / 1'000'000));
      }
    }
    const ApiError e = ApiError::FromReject(engine::CommandType::kPlaceOrder, r.reason);
    if (fail) return fail(p, e);
    p.Fail(e);
  }

  void TestOrder(Ctx& c) {
    NewOrder o;
    if (auto e = ParseNewOrder(c.params, config_, c.account, &o)) return Reply(c, *e);
    if (auto e = DryRun(o.place)) return Reply(c, *e);
    Ok(c, "{}");
  }

  // orderId and/or origClientOrderId (one of them is required; *client_id
  // is empty when not sent).
  std::optional<ApiError> OrderRefParam(const Ctx& c, std::optional<uint64_t>* id,
                                        std::string* client_id) {
    if (auto e = c.params.GetUint("orderId", id)) return e;
    if (auto cid = c.params.Get("origClientOrderId")) *client_id = std::string(*cid);
    if (*id || !client_id->empty()) return std::nullopt;
    return ApiError::MandatoryMissing("orderId");
  }

  // Both ids (Binance): the order is looked up by orderId, and must carry the
  // origClientOrderId sent, else -2039.
  static std::optional<ApiError> CheckClientId(const marketdata::OrderRecord& rec,
                                               std::optional<uint64_t> id,
                                               std::string_view client_id) {
    if (id && !client_id.empty() && rec.client_order_id.view() != client_id) {
      return ApiError::ClientOrderIdInvalid();
    }
    return std::nullopt;
  }

  // The order as the read side holds it (open, or closed and still held).
  std::optional<ApiError> FindOrderParam(const Ctx& c, MarketId market,
                                         marketdata::OrderRecord* out) {
    std::optional<uint64_t> id;
    std::string cid;
    if (auto e = OrderRefParam(c, &id, &cid)) return e;
    const std::optional<marketdata::OrderRecord> rec =
        id ? read_side_.FindOrder(c.account, market, static_cast<OrderId>(*id))
           : read_side_.FindOrderByClientId(c.account, market, cid);
    if (!rec) return ApiError::NoSuchOrder();
    if (auto e = CheckClientId(*rec, id, cid)) return e;
    *out = *rec;
    return std::nullopt;
  }

  // An open order from the read side; any other from the history when there
  // is one.
  void GetOrder(Ctx& c) {
    MarketId m{};
    if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
    if (history_ == nullptr) {
      marketdata::OrderRecord rec;
      if (auto e = FindOrderParam(c, m, &rec)) return Reply(c, *e);
      return Ok(c, OrderJson(config_, rec));
    }
    std::optional<uint64_t> id;
    std::string cid;
    if (auto e = OrderRefParam(c, &id, &cid)) return Reply(c, *e);
    const std::optional<marketdata::OrderRecord> rec =
        id ? read_side_.FindOrder(c.account, m, static_cast<OrderId>(*id))
           : read_side_.FindOrderByClientId(c.account, m, cid);
    if (rec && IsOpen(*rec)) {
      if (auto e = CheckClientId(*rec, id, cid)) return Reply(c, *e);
      return Ok(c, OrderJson(config_, *rec));
    }
    Defer(c, [this, account = c.account, m, id, cid = std::move(cid)](HistoryJob& j) {
      auto found = id ? history_->FindOrder(account, m, static_cast<OrderId>(*id))
                      : history_->FindOrderByClientId(account, m, cid);
      if (!found.ok()) return HistoryUnavailable(j, found.status());
      if (!*found) return JobReply(j, ApiError::NoSuchOrder());
      if (auto e = CheckClientId(**found, id, cid)) return JobReply(j, *e);
      JobReply(j, 200, OrderJson(config_, **found));
    });
  }

  // The answer to a cancel, from the read side once the cancel is applied.
  std::string CanceledBody(AccountId account, MarketId market, OrderId id,
                           std::string_view cancel_client_id, int64_t ms) {
    const auto rec = read_side_.FindOrder(account, market, id);
    if (!rec) return "{}";
    return CanceledOrderJson(config_, *rec, cancel_client_id, ms);
  }

  void CancelOrderRoute(Ctx& c) {
    engine::CancelOrder cancel;
    // The engine finds the order (both ids: they must name the same order),
    // so an order placed a moment ago is found before the read side shows it.
    if (auto e = ParseCancel(c.params, config_, c.account, &cancel)) return Reply(c, *e);
    // The cancel's own client order id (Binance's newClientOrderId of DELETE).
    std::string new_cid;
    if (auto e = CancelClientId(c.params, "newClientOrderId", &new_cid)) return Reply(c, *e);
    SubmitCancel(c, cancel, std::move(new_cid),
                 [](Pending& p, std::string body) { p.Reply(200, std::move(body)); });
  }

  void SubmitCancel(Ctx& c, const engine::CancelOrder& cancel, std::string new_cid,
                    std::function<void(Pending&, std::string)> done) {
    engine::Command cmd;
    cmd.body = cancel;
    Submit(c, "cancel", cmd, [this, cancel, new_cid, done](Pending& p) {
      if (const engine::Rejected* r = FirstReject(p.events)) {
        return p.Fail(ApiError::FromReject(engine::CommandType::kCancelOrder, r->reason));
      }
      for (const Event& e : p.events) {
        if (const auto* x = As<engine::OrderCanceled>(e)) {
          return done(p, CanceledBody(cancel.account, cancel.market, x->order_id, new_cid,
                                      e.timestamp_ns / 1'000'000));
        }
      }
      p.Fail(ApiError::Unknown("cancel produced no cancellation"));
    });
  }

  void CancelAllRoute(Ctx& c) {
    MarketId m{};
    if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
    engine::Command cmd;
    cmd.body = engine::CancelAll{c.account, m};
    const AccountId account = c.account;
    Submit(c, "cancel_all", cmd, [this, account, m](Pending& p) {
      if (const engine::Rejected* r = FirstReject(p.events)) {
        return p.Fail(ApiError::FromReject(engine::CommandType::kCancelAll, r->reason));
      }
      std::string body = "[";
      for (const Event& e : p.events) {
        if (const auto* x = As<engine::OrderCanceled>(e)) {
          if (body.size() > 1) body += ',';
          body += CanceledBody(account, m, x->order_id, NewClientId(), e.timestamp_ns / 1'000'000);
        }
      }
      body += ']';
      p.Reply(200, std::move(body));
    });
  }

  // cancelReplace: one engine command (engine::CancelReplace) cancels and,
  // if the cancel succeeded or always with cancelReplaceMode=ALLOW_FAILURE,
  // places the new order, with no other command between the two. Answers as
  // Binance does: both done 200; one failed 409 -2021 "Order cancel-replace
  // partially failed."; the cancel failed and the order was not attempted,
  // or both failed, 400 -2022 "Order cancel-replace failed."; data holds each
  // side's answer or error.
  void CancelReplace(Ctx& c) {
    std::string_view mode;
    if (auto e = c.params.Require("cancelReplaceMode", &mode)) return Reply(c, *e);
    if (mode != "STOP_ON_FAILURE" && mode != "ALLOW_FAILURE") {
      return Reply(c, ApiError::BadParam("cancelReplaceMode", "STOP_ON_FAILURE or ALLOW_FAILURE"));
    }
    MarketId m{};
    if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
    engine::CancelReplace cr;
    cr.mode = mode == "ALLOW_FAILURE" ? engine::CancelReplaceMode::kAllowFailure
                                      : engine::CancelReplaceMode::kStopOnFailure;
    cr.cancel.account = c.account;
    cr.cancel.market = m;
    // Both ids: the engine requires that they name the same order.
    if (auto e =
            ParseCancelTarget(c.params, "cancelOrderId", "cancelOrigClientOrderId", &cr.cancel)) {
      if (e->code != -2011) return Reply(c, *e);
      // An id no order can have: the cancel fails as the engine would fail
      // it (naming nothing), and the new order follows the mode.
      cr.cancel.order_id = OrderId{0};
      cr.cancel.orig_client_order_id = ClientOrderId{};
    }
    std::string cancel_cid;
    if (auto e = CancelClientId(c.params, "cancelNewClientOrderId", &cancel_cid)) {
      return Reply(c, *e);
    }
    NewOrder order;
    if (auto e = ParseNewOrder(c.params, config_, c.account, &order)) return Reply(c, *e);
    if (order.client_order_id.empty()) {
      order.client_order_id = "mb-" + RandomToken(22);
      (void)order.place.client_order_id.Assign(order.client_order_id);
    }
    cr.place = order.place;
    engine::Command cmd;
    cmd.body = cr;
    Submit(
        c, "cancel_replace", cmd,
        [this, cancel = cr.cancel, cancel_cid, place = order.place, resp = order.resp](Pending& p) {
          // The cancel's event comes first, then the new order's, if it
          // was attempted.
          const std::span<const Event> events(p.events);
          std::string cancel_json;
          bool cancel_ok = false;
          if (const auto* x = As<engine::OrderCanceled>(events.front())) {
            cancel_json = CanceledBody(cancel.account, cancel.market, x->order_id, cancel_cid,
                                       events.front().timestamp_ns / 1'000'000);
            cancel_ok = true;
          } else if (const auto* r = As<engine::Rejected>(events.front())) {
            cancel_json = ApiError::FromReject(engine::CommandType::kCancelOrder, r->reason).Json();
          }
          const std::span<const Event> placed = events.subspan(1);
          if (placed.empty()) {
            return p.Reply(400, ReplaceFailed(cancel_json, "NOT_ATTEMPTED", "null"));
          }
          auto done = [cancel_ok, cancel_json](Pending& q, std::string body) {
            if (!cancel_ok) return q.Reply(409, ReplacePartial(false, cancel_json, body));
            q.Reply(200, fmt::format(R"({{"cancelResult":"SUCCESS","newOrderResult":"SUCCESS",)"
                                     R"("cancelResponse":{},"newOrderResponse":{}}})",
                                     cancel_json, body));
          };
          // The new order refused: a partial failure when the cancel went
          // through, a failure otherwise.
          auto refused = [cancel_ok, cancel_json](Pending& q, const ApiError& e) {
            if (cancel_ok) return q.Reply(409, ReplacePartial(true, cancel_json, e.Json()));
            q.Reply(400, ReplaceFailed(cancel_json, "FAILURE", e.Json()));
          };
          if (const engine::Rejected* r = FirstReject(placed)) {
            return AnswerReject(p, place, *r, resp, done, refused);
          }
          std::vector<marketdata::Fill> fills;
          const marketdata::OrderRecord rec = OrderFromEvents(config_, placed, &fills);
          done(p, NewOrderJson(config_, rec, fills, resp, placed.front().timestamp_ns / 1'000'000));
        });
  }

  // cancelReplace's -2022: the cancel failed; the new order `new_result`
  // (NOT_ATTEMPTED or FAILURE) with `new_json` (null or its error).
  static std::string ReplaceFailed(const std::string& cancel_json, std::string_view new_result,
                                   std::string_view new_json) {
    return fmt::format(R"({{"code":-2022,"msg":"Order cancel-replace failed.",)"
                       R"("data":{{"cancelResult":"FAILURE","newOrderResult":"{}",)"
                       R"("cancelResponse":{},"newOrderResponse":{}}}}})",
                       new_result, cancel_json, new_json);
  }
  // cancelReplace's -2021: one side succeeded (the cancel when cancel_ok).
  static std::string ReplacePartial(bool cancel_ok, const std::string& cancel_json,
                                    std::string_view new_json) {
    return fmt::format(R"({{"code":-2021,"msg":"Order cancel-replace partially failed.",)"
                       R"("data":{{"cancelResult":"{}","newOrderResult":"{}",)"
                       R"("cancelResponse":{},"newOrderResponse":{}}}}})",
                       cancel_ok ? "SUCCESS" : "FAILURE", cancel_ok ? "FAILURE" : "SUCCESS",
                       cancel_json, new_json);
  }

  // PUT /api/v3/order/amend/keepPriority: reduce an open order's quantity
  // keeping its place in the queue (newQty = the new total quantity). The
  // engine names the order and decides (it exists, newQty is below its
  // quantity), so an order placed a moment ago can be amended before the read
  // side shows it.
  void AmendKeepPriority(Ctx& c) {
    MarketId m{};
    if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
    std::optional<uint64_t> id;
    if (auto e = c.params.GetUint("orderId", &id)) return Reply(c, *e);
    const std::optional<std::string_view> orig = c.params.Get("origClientOrderId");
    if (!id && !orig) return Reply(c, ApiError::MandatoryMissing("orderId"));
    engine::AmendOrder amend;
    amend.account = c.account;
    amend.market = m;
    amend.keep_priority = true;
    // Order ids start at 1; an id no order can have names no order.
    if (id && *id == 0) return Reply(c, ApiError::AmendRejected("Unknown order sent."));
    if (id) amend.order_id = static_cast<OrderId>(*id);
    if (orig && !amend.orig_client_order_id.Assign(*orig)) {
      return Reply(c, ApiError::AmendRejected("Unknown order sent."));
    }
    std::string_view text;
    if (auto e = c.params.Require("newQty", &text)) return Reply(c, *e);
    const engine::MarketSpec& spec = config_.markets[static_cast<std::size_t>(m)];
    const int base_scale = config_.assets[static_cast<std::size_t>(spec.base)].scale;
    int64_t units = 0;
    if (TryParseDecimal(text, base_scale, false, &units) != DecimalError::kOk) {
      return Reply(c, ApiError::TooMuchPrecision("newQty"));
    }
    if (units <= 0 || units % spec.lot_units != 0)
      return Reply(c, ApiError::FilterFailure("LOT_SIZE"));
    amend.new_qty = Qty{units / spec.lot_units};
    // newClientOrderId: the amended order's new client order id (the engine
    // refuses one another open order holds); without it the order keeps its
    // own.
    if (c.params.Has("newClientOrderId")) {
      std::string new_cid;
      if (auto e = CancelClientId(c.params, "newClientOrderId", &new_cid)) return Reply(c, *e);
      (void)amend.new_client_order_id.Assign(new_cid);
    }
    // The id before the amend, for origClientOrderId: the one sent, else the
    // one the read side shows now.
    std::string before(orig.value_or(std::string_view()));
    if (before.empty() && id) {
      if (const auto rec = read_side_.FindOrder(c.account, m, static_cast<OrderId>(*id))) {
        before = std::string(rec->client_order_id.view());
      }
    }
    engine::Command cmd;
    cmd.body = amend;
    const AccountId account = c.account;
    Submit(c, "amend", cmd, [this, account, m, before](Pending& p) {
      if (const engine::Rejected* r = FirstReject(p.events)) {
        return p.Fail(ApiError::FromReject(engine::CommandType::kAmendOrder, r->reason));
      }
      for (const Event& e : p.events) {
        const auto* a = As<engine::OrderAmended>(e);
        if (a == nullptr) continue;
        // Answered once the read side shows the amend.
        const auto rec = read_side_.FindOrder(account, m, a->order_id);
        if (!rec) return p.Fail(ApiError::NoSuchOrder());
        const bool renamed = std::any_of(p.events.begin(), p.events.end(), [](const Event& ev) {
          return ev.type() == engine::EventType::kClientOrderIdChanged;
        });
        return p.Reply(
            200, AmendedOrderJson(config_, *rec,
                                  renamed ? std::string_view(before) : rec->client_order_id.view(),
                                  e.timestamp_ns / 1'000'000, static_cast<uint64_t>(p.seq)));
      }
      p.Fail(ApiError::Unknown("amend produced no amendment"));
    });
  }

  std::string OrdersJson(std::span<const marketdata::OrderRecord> orders) const {
    std::string body = "[";
    for (std::size_t i = 0; i < orders.size(); ++i) {
      if (i > 0) body += ',';
      body += OrderJson(config_, orders[i]);
    }
    body += ']';
    return body;
  }

  void OpenOrders(Ctx& c) {
    std::optional<MarketId> market;
    if (auto s = c.params.Get("symbol")) {
      MarketId m{};
      if (auto e = FindMarket(config_, *s, &m)) return Reply(c, *e);
      market = m;
    }
    const auto orders = read_side_.OpenOrders(c.account, market);
    Ok(c, OrdersJson(orders));
  }

  // The history's form of the filters.
  static HistoryFilter Filter(const Ctx& c, const HistoryQuery& q, uint64_t order_id) {
    HistoryFilter s;
    s.account = c.account;
    s.market = q.market;
    s.order_id = order_id;
    s.from_id = q.from.value_or(0);
    s.start_ms = q.start.value_or(0);
    s.end_ms = q.end.value_or(0);
    s.limit = q.limit;
    return s;
  }

  // allOrders / myTrades: Binance looks up at most 24 hours at once.
  static std::optional<ApiError> AccountHistoryWindow(const HistoryQuery& q) {
    constexpr int64_t kMaxWindowMs = 24 * 3'600'000;
    if (q.start && q.end && static_cast<int128>(*q.end) - *q.start > kMaxWindowMs) {
      return ApiError{400, -1127, "More than 24 hours between startTime and endTime."};
    }
    return std::nullopt;
  }

  void AllOrders(Ctx& c) {
    HistoryQuery q;
    if (auto e = ParseHistory(c, "orderId", &q)) return Reply(c, *e);
    if (auto e = AccountHistoryWindow(q)) return Reply(c, *e);
    if (history_ != nullptr) {
      return Defer(c, [this, f = Filter(c, q, 0)](HistoryJob& j) {
        auto orders = history_->AllOrders(f);
        if (!orders.ok()) return HistoryUnavailable(j, orders.status());
        JobReply(j, 200, OrdersJson(*orders));
      });
    }
    const auto orders = read_side_.AllOrders(c.account, q.market, q.from.value_or(0),
                                             q.start.value_or(0), q.end.value_or(0), q.limit);
    Ok(c, OrdersJson(orders));
  }

  void MyTrades(Ctx& c) {
    HistoryQuery q;
    std::optional<uint64_t> order;
    if (auto e = ParseHistory(c, "fromId", &q)) return Reply(c, *e);
    if (auto e = c.params.GetUint("orderId", &order)) return Reply(c, *e);
    if (auto e = AccountHistoryWindow(q)) return Reply(c, *e);
    // Binance's combinations: symbol, with orderId [+ fromId], fromId,
    // startTime and/or endTime; a time bound with an id bound is refused.
    if ((order || q.from) && (q.start || q.end)) return Reply(c, ApiError::BadParamCombination());
    if (history_ != nullptr) {
      return Defer(c, [this, f = Filter(c, q, order.value_or(0))](HistoryJob& j) {
        auto fills = history_->MyTrades(f);
        if (!fills.ok()) return HistoryUnavailable(j, fills.status());
        JobReply(j, 200, MyTradesJson(config_, *fills));
      });
    }
    const auto fills =
        read_side_.MyTrades(c.account, q.market, order.value_or(0), q.from.value_or(0),
                            q.start.value_or(0), q.end.value_or(0), q.limit);
    Ok(c, MyTradesJson(config_, fills));
  }

  void Account(Ctx& c) {
    const auto balances = read_side_.Balances(c.account);
    Ok(c, AccountJson(config_, c.account, balances,
                      read_side_.account_update_ns(c.account) / 1'000'000));
  }

  void ListenKeyCreate(Ctx& c) {
    Ok(c, fmt::format(R"({{"listenKey":"{}"}})", streams_.CreateListenKey(c.account)));
  }
  void ListenKeyKeepAlive(Ctx& c) {
    std::string_view key;
    if (auto e = c.params.Require("listenKey", &key)) return Reply(c, *e);
    if (!streams_.KeepAliveListenKey(c.account, key)) {
      return Reply(c, ApiError{400, -1125, "This listenKey does not exist."});
    }
    Ok(c, "{}");
  }
  void ListenKeyClose(Ctx& c) {
    std::string_view key;
    if (auto e = c.params.Require("listenKey", &key)) return Reply(c, *e);
    if (!streams_.CloseListenKey(c.account, key)) {
      return Reply(c, ApiError{400, -1125, "This listenKey does not exist."});
    }
    Ok(c, "{}");
  }

  // --- the operator API ---
  void HandleAdmin(Ctx& c) {
    if (!c.loopback && !options_.admin_remote) {
      return Reply(c, ApiError{403, -1002, "The operator API answers loopback clients only."});
    }
    std::string token;
    if (auto h = c.req.find("X-MB-ADMIN-TOKEN"); h != c.req.end()) {
      token = std::string(Trim(h->value()));
    } else if (auto a = c.req.find(http::field::authorization); a != c.req.end()) {
      std::string_view v = Trim(a->value());
      if (v.starts_with("Bearer ")) token = std::string(Trim(v.substr(7)));
    }
    if (token.empty() || !keys_->CheckAdminToken(token)) {
      return Reply(c, ApiError{401, -1002, "Missing or wrong admin token (X-MB-ADMIN-TOKEN)."});
    }
    json::value body;
    if (!c.req.body().empty()) {
      json::error_code ec;
      body = json::parse(c.req.body(), ec);
      if (ec || !body.is_object()) {
        return Reply(c, ApiError{400, -1130, "The request body must be a JSON object."});
      }
    } else {
      body = json::object();
    }
    const http::verb v = c.req.method();
    const std::string_view rest = std::string_view(c.path).substr(std::strlen("/admin/v1/"));
    std::vector<std::string_view> parts;
    for (std::size_t pos = 0; pos <= rest.size();) {
      const std::size_t slash = rest.find('/', pos);
      const std::size_t endp = slash == std::string_view::npos ? rest.size() : slash;
      parts.push_back(rest.substr(pos, endp - pos));
      pos = endp + 1;
    }
    const json::object& obj = body.as_object();
    if (parts.size() == 1 && parts[0] == "health" && v == http::verb::get) return AdminHealth(c);
    if (parts.size() == 1 && parts[0] == "ready" && v == http::verb::get) return AdminReady(c);
    if (parts.size() == 1 && parts[0] == "accounts" && v == http::verb::post) {
      return AdminCreateAccount(c, obj);
    }
    if (parts.size() == 1 && parts[0] == "accounts" && v == http::verb::get) {
      return AdminAccounts(c);
    }
    if (parts.size() == 2 && parts[0] == "accounts" && v == http::verb::get) {
      return AdminAccount(c, parts[1]);
    }
    if (parts.size() == 3 && parts[0] == "accounts" && parts[2] == "apiKeys" &&
        v == http::verb::post) {
      return AdminCreateKey(c, parts[1], obj);
    }
    if (parts.size() == 3 && parts[0] == "accounts" && parts[2] == "ledger" &&
        v == http::verb::get) {
      return AdminLedger(c, parts[1]);
    }
    if (parts.size() == 2 && parts[0] == "apiKeys" && v == http::verb::delete_) {
      return AdminRevokeKey(c, parts[1]);
    }
    if (parts.size() == 1 && (parts[0] == "deposits" || parts[0] == "withdrawals") &&
        v == http::verb::post) {
      return AdminTransfer(c, obj, parts[0] == "deposits");
    }
    if (parts.size() == 3 && parts[0] == "markets" && parts[2] == "status" &&
        v == http::verb::post) {
      return AdminMarketStatus(c, parts[1], obj);
    }
    if (parts.size() == 1 && parts[0] == "markets" && v == http::verb::get) {
      return AdminMarkets(c);
    }
    if (parts.size() == 1 && parts[0] == "markets" && v == http::verb::post) {
      return Reply(c, ApiError{409, -1000,
                               "Markets are part of the configuration the journal was written "
                               "with: add a [[markets]] entry to the configuration file and "
                               "restart (ids are positions: append only)."});
    }
    if (parts.size() == 1 && parts[0] == "snapshot" && v == http::verb::post) {
      exchange_->RequestSnapshot();
      return Ok(c, R"({"requested":true})");
    }
    if (parts.size() == 1 && parts[0] == "flight-recorder" && v == http::verb::get) {
      return AdminFlightRecorder(c);
    }
    if (parts.size() == 2 && parts[0] == "flight-recorder" && v == http::verb::get) {
      return AdminFlightDump(c, parts[1]);
    }
    Reply(c, ApiError::NotFound());
  }

  // GET flight-recorder: the recorder's settings, counts and dumps (newest first).
  void AdminFlightRecorder(Ctx& c) {
    metrics::FlightRecorder* fr = options_.flight_recorder;
    if (fr == nullptr) return Reply(c, ApiError{404, -1000, "The flight recorder is off."});
    const metrics::FlightRecorder::Stats st = fr->stats();
    json::object o;
    o["thresholdMs"] = static_cast<double>(options_.flight_threshold_ns) / 1e6;
    o["windowMs"] = options_.flight_window_ms;
    o["recorded"] = st.recorded;
    o["triggers"] = st.triggers;
    o["suppressed"] = st.suppressed;
    o["dumpErrors"] = st.dump_errors;
    json::array dumps;
    for (const metrics::FlightRecorder::DumpInfo& d : fr->Dumps()) {
      json::object x;
      x["file"] = d.file;
      x["writtenAtMs"] = d.wall_ms;
      x["triggerSeq"] = d.trigger_seq;
      x["triggerLatencyMs"] = static_cast<double>(d.trigger_latency_ns) / 1e6;
      x["traces"] = d.traces;
      x["bytes"] = d.bytes;
      dumps.push_back(std::move(x));
    }
    o["dumps"] = std::move(dumps);
    Ok(c, json::serialize(o));
  }
  // GET flight-recorder/<file>: one dump, as written. Only listed names are
  // read, so no path can reach outside the recorder's directory.
  void AdminFlightDump(Ctx& c, std::string_view file) {
    metrics::FlightRecorder* fr = options_.flight_recorder;
    if (fr == nullptr) return Reply(c, ApiError{404, -1000, "The flight recorder is off."});
    auto dump = fr->ReadDump(file);
    if (!dump.ok()) {
      const bool missing = dump.status().code() == StatusCode::kNotFound;
      return Reply(c, ApiError{missing ? 404 : 500, -1000,
                               missing ? std::string("No such flight-recorder dump.")
                                       : dump.status().message()});
    }
    Ok(c, std::move(dump).value());
  }

  // --- metrics ---
  // GET /metrics: the registry's text exposition (io thread; reads atomics
  // and takes no lock the engine or journal threads take).
  void HandleMetrics(Ctx& c) {
    if (!c.loopback && !options_.metrics_remote) {
      return Reply(c, ApiError{403, -1002, "/metrics answers loopback clients only."});
    }
    if (c.req.method() != http::verb::get && c.req.method() != http::verb::head) {
      return Reply(c, ApiError::MethodNotAllowed());
    }
    c.respond(MetricsResponse(c.version, c.keep_alive));
  }
  Response MetricsResponse(unsigned version, bool keep_alive) const {
    CountStatus(200);
    Response res{http::status::ok, version};
    res.set(http::field::server, "matchbook");
    res.set(http::field::content_type, metrics::kContentType);
    res.keep_alive(keep_alive);
    res.body() = options_.metrics->Expose();
    res.prepare_payload();
    return res;
  }

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

  void CountStatus(int status) const {
    if (status_counters_[0] == nullptr) return;
    std::size_t i = 0;
    while (i < std::size(kCountedStatuses) && kCountedStatuses[i] != status) ++i;
    status_counters_[i]->Inc();
  }

  void RegisterMetrics(metrics::Registry& r) {
    hist_parse_auth_ = &r.AddHistogram(kStageLatency, kStageLatencyHelp, {{"stage", "parse_auth"}});
    hist_fanout_ = &r.AddHistogram(kStageLatency, kStageLatencyHelp, {{"stage", "fanout"}});
    hist_response_ =
        &r.AddHistogram(kStageLatency, kStageLatencyHelp, {{"stage", "submit_to_response"}});
    hist_freshness_ = &r.AddHistogram(
        "matchbook_ws_freshness_seconds",
        "Age of WebSocket market data when written to the socket: from the engine time of the "
        "batch it reports (CLOCK_REALTIME) to the completed write");
    for (std::size_t i = 0; i < kStatusSlots; ++i) {
      const std::string code =
          i < std::size(kCountedStatuses) ? std::to_string(kCountedStatuses[i]) : "other";
      status_counters_[i] =
          &r.AddCounter("matchbook_http_requests_total",
                        "HTTP answers given by the gateway, by status code", {{"code", code}});
    }
    constexpr std::string_view kRejectedHelp =
        "Requests refused for load: 503 (inbound ring full, journal refusing, shutting down) "
        "and 429 (request weight over the limit)";
    rejected_503_ =
        &r.AddCounter("matchbook_http_rejected_total", kRejectedHelp, {{"reason", "busy_503"}});
    rejected_429_ = &r.AddCounter("matchbook_http_rejected_total", kRejectedHelp,
                                  {{"reason", "rate_limited_429"}});
    // The registry's callbacks read the gateway through link_, which ~Impl()
    // clears: a scrape after the gateway is gone reads 0 or writes nothing.
    link_.emplace(this);
    auto read = [this](double (*f)(const Impl&)) { return link_->Read(f); };
    r.AddGauge("matchbook_fanout_queue_depth",
               "Durable batches and answers in the fan-out ring, not yet delivered", {},
               read([](const Impl& g) {
                 return g.stage_ != nullptr ? static_cast<double>(g.stage_->depth()) : 0.0;
               }));
    r.AddCounterFn("matchbook_fanout_full_waits_total",
                   "Times the journal thread found the fan-out ring full and waited", {},
                   read([](const Impl& g) {
                     return g.stage_ != nullptr ? static_cast<double>(g.stage_->full_waits()) : 0.0;
                   }));
    r.AddGauge("matchbook_history_queue_depth", "History requests waiting for the history thread",
               {},
               read([](const Impl& g) { return static_cast<double>(g.history_depth_.load()); }));
    r.AddGauge("matchbook_responses_waiting",
               "Durable commands whose answers wait for the read side to apply them", {},
               read([](const Impl& g) {
                 return g.stage_ != nullptr ? static_cast<double>(g.stage_->answers_waiting())
                                            : 0.0;
               }));
    r.AddGauge("matchbook_read_side_applied_sequence",
               "The last sequence the read side (REST market data, streams) has applied", {},
               read([](const Impl& g) { return static_cast<double>(g.read_side_.applied_seq()); }));
    r.AddGauge("matchbook_open_orders", "Orders resting on the books (as the read side has them)",
               {},
               read([](const Impl& g) { return static_cast<double>(g.read_side_.open_orders()); }));
    r.AddCounterFn(
        "matchbook_closed_orders_total", "Orders filled, canceled or expired since the start", {},
        read([](const Impl& g) { return static_cast<double>(g.read_side_.closed_orders()); }));
    r.AddGauge("matchbook_ws_connections", "Open WebSocket connections", {},
               read([](const Impl& g) { return g.WsStat(&ServerStats::ws_open); }));
    r.AddCounterFn("matchbook_ws_connections_total", "WebSocket handshakes completed", {},
                   read([](const Impl& g) { return g.WsStat(&ServerStats::ws_total); }));
    r.AddCounterFn("matchbook_ws_disconnects_total",
                   "WebSocket connections that ended, for any reason", {},
                   read([](const Impl& g) { return g.WsStat(&ServerStats::ws_closed); }));
    r.AddCounterFn("matchbook_ws_messages_sent_total", "WebSocket messages written", {},
                   read([](const Impl& g) { return g.WsStat(&ServerStats::ws_messages_sent); }));
    r.AddCounterFn("matchbook_ws_dropped_messages_total",
                   "WebSocket messages discarded because a connection's send queue overflowed", {},
                   read([](const Impl& g) { return g.WsStat(&ServerStats::ws_dropped_messages); }));
    r.AddCounterFn("matchbook_ws_slow_disconnects_total",
                   "WebSocket connections closed (1008) because their send queue overflowed", {},
                   read([](const Impl& g) { return g.WsStat(&ServerStats::ws_slow_disconnects); }));
    r.AddGauge("matchbook_ws_subscriptions", "Stream subscriptions of all WebSocket connections",
               {}, read([](const Impl& g) {
                 return static_cast<double>(g.streams_.stats().subscriptions.load());
               }));
    r.AddCollector(link_->With([](const Impl& g, metrics::SampleWriter& w) {
      struct Family {
        const char* name;
        const char* help;
        std::atomic<uint64_t> MarketCounts::*field;
      };
      static constexpr Family kFamilies[] = {
          {"matchbook_orders_total", "Orders accepted by the engine (durable), by market",
           &MarketCounts::orders},
          {"matchbook_trades_total", "Trades (durable), by market", &MarketCounts::trades},
          {"matchbook_cancels_total",
           "Orders cancelled (durable; by their owner, cancel-all, cancel-replace or "
           "self-trade prevention), by market",
           &MarketCounts::cancels},
      };
      for (const Family& f : kFamilies) {
        w.Family(f.name, f.help, "counter");
        for (std::size_t i = 0; i < g.config_.markets.size(); ++i) {
          w.Sample(f.name, {{"market", g.config_.markets[i].symbol}},
                   static_cast<double>((g.market_counts_[i].*f.field).load()));
        }
      }
    }));
  }
  double WsStat(std::atomic<uint64_t> ServerStats::*field) const {
    return server_ ? static_cast<double>((server_->stats().*field).load()) : 0.0;
  }

  static std::optional<std::string> StringField(const json::object& o, std::string_view k) {
    auto it = o.find(k);
    if (it == o.end() || !it->value().is_string()) return std::nullopt;
    return std::string(it->value().as_string());
  }
  static std::optional<uint32_t> AccountField(const json::object& o) {
    auto it = o.find("accountId");
    if (it == o.end()) return std::nullopt;
    if (it->value().is_int64() && it->value().as_int64() >= 0 &&
        it->value().as_int64() <= UINT32_MAX) {
      return static_cast<uint32_t>(it->value().as_int64());
    }
    if (it->value().is_uint64() && it->value().as_uint64() <= UINT32_MAX) {
      return static_cast<uint32_t>(it->value().as_uint64());
    }
    return std::nullopt;
  }
  std::optional<AccountId> ParseAccountId(std::string_view s) {
    uint32_t id = 0;
    if (s.empty() || s.size() > 9) return std::nullopt;
    for (char ch : s) {
      if (ch < '0' || ch > '9') return std::nullopt;
      id = id * 10 + static_cast<uint32_t>(ch - '0');
    }
    if (static_cast<AccountId>(id) != config_.fee_account &&
        !keys_->FindAccount(static_cast<AccountId>(id))) {
      return std::nullopt;
    }
    return static_cast<AccountId>(id);
  }

  void AdminHealth(Ctx& c) {
    const std::string refusal = exchange_->RefusalReason();
    const exchange::ExchangeStats st = exchange_->stats();
    json::object o;
    o["status"] = refusal.empty() ? "ok" : "refusing";
    o["durableSequence"] = exchange_->durable_seq();
    o["appliedSequence"] = read_side_.applied_seq();
    o["inboundRemaining"] = exchange_->inbound_remaining();
    o["submitted"] = st.submitted;
    o["refusedFull"] = st.refused_full;
    o["refusedJournal"] = st.refused_journal;
    o["reason"] = refusal;
    if (history_ != nullptr) {
      const HistoryHealth h = history_->Health();
      json::object p;
      p["appliedSequence"] = h.applied_seq;
      p["lagEvents"] = h.lag_events;
      p["lagSeconds"] = h.lag_seconds;
      p["healthy"] = h.healthy;
      p["lastError"] = h.last_error;
      p["backend"] = h.backend;
      if (h.storage) {
        const HistoryStorage& disk = *h.storage;
        json::object d;
        d["dbBytes"] = disk.db_bytes;
        d["walBytes"] = disk.wal_bytes;
        d["walMaxBytes"] = disk.wal_max_bytes;
        d["overCeiling"] = disk.over_ceiling || disk.wal_bytes > disk.wal_max_bytes;
        d["walFramesWritten"] = disk.frames_written;
        d["walFramesCheckpointed"] = disk.frames_checkpointed;
        d["checkpoints"] = disk.checkpoints;
        d["checkpointsCompleted"] = disk.checkpoints_completed;
        d["ceilingWaits"] = disk.ceiling_waits;
        if (disk.seconds_since_checkpoint >= 0) {
          d["secondsSinceCheckpoint"] = disk.seconds_since_checkpoint;
        } else {
          d["secondsSinceCheckpoint"] = nullptr;
        }
        p["storage"] = std::move(d);
      }
      o["projection"] = std::move(p);
    }
    Ok(c, json::serialize(o));
  }
  void AdminReady(Ctx& c) {
    const bool ready = exchange_->RefusalReason().empty();
    Reply(c, ready ? 200 : 503, ready ? R"({"ready":true})" : R"({"ready":false})");
  }
  static json::object AccountObject(const AccountInfo& a) {
    json::object o;
    o["accountId"] = static_cast<uint32_t>(a.id);
    o["name"] = a.name;
    o["createdTime"] = a.created_ms;
    return o;
  }
  void AdminCreateAccount(Ctx& c, const json::object& body) {
    const auto name = StringField(body, "name");
    if (!name) return Reply(c, ApiError{400, -1102, "Field 'name' (a string) is required."});
    auto r = keys_->CreateAccount(*name, clock_.wall_ms());
    if (!r.ok()) return Reply(c, ApiError{400, -1130, r.status().message()});
    Ok(c, json::serialize(AccountObject(*r)));
  }
  void AdminAccounts(Ctx& c) {
    json::array a;
    for (const AccountInfo& info : keys_->Accounts()) a.push_back(AccountObject(info));
    Ok(c, json::serialize(a));
  }
  void AdminAccount(Ctx& c, std::string_view id_text) {
    const auto id = ParseAccountId(id_text);
    if (!id) return Reply(c, ApiError{404, -1000, "No such account."});
    // The fee account exists without being created: it collects every fee.
    const AccountInfo info = keys_->FindAccount(*id).value_or(AccountInfo{*id, "fee account", 0});
    json::object o = AccountObject(info);
    json::array balances;
    for (const marketdata::BalanceRow& b : read_side_.Balances(*id)) {
      json::object x;
      x["asset"] = config_.assets[static_cast<std::size_t>(b.asset)].symbol;
      x["free"] = AssetAmount(config_, b.asset, b.available);
      x["locked"] = AssetAmount(config_, b.asset, b.locked);
      balances.push_back(std::move(x));
    }
    o["balances"] = std::move(balances);
    json::array keys;
    for (const ApiKey& k : keys_->Keys(*id)) {
      json::object x;
      x["apiKey"] = k.key;
      x["keyType"] = k.is_ed25519() ? "ED25519" : "HMAC_SHA256";
      x["revoked"] = k.revoked;
      x["createdTime"] = k.created_ms;
      keys.push_back(std::move(x));
    }
    o["apiKeys"] = std::move(keys);
    Ok(c, json::serialize(o));
  }
  // POST accounts/{id}/apiKeys: an HMAC key (the exchange makes the secret),
  // or with {"publicKey": PEM or base64} an Ed25519 key for that public key.
  void AdminCreateKey(Ctx& c, std::string_view id_text, const json::object& body) {
    const auto id = ParseAccountId(id_text);
    if (!id) return Reply(c, ApiError{404, -1000, "No such account."});
    if (*id == config_.fee_account) {
      return Reply(c, ApiError{400, -1002, "The fee account cannot trade: it has no API keys."});
    }
    const json::value* public_key = body.if_contains("publicKey");
    Result<ApiKey> k = InvalidArgument("");
    if (public_key != nullptr) {
      const std::optional<std::string> raw =
          public_key->is_string() ? ParseEd25519PublicKey(public_key->get_string()) : std::nullopt;
      if (!raw) {
        return Reply(c, ApiError{400, -1130,
                                 "Field 'publicKey' must be an Ed25519 public key: PEM "
                                 "(-----BEGIN PUBLIC KEY-----) or base64."});
      }
      k = keys_->CreateEd25519Key(*id, *raw, clock_.wall_ms());
      if (!k.ok() && k.status().code() == StatusCode::kInvalidArgument) {
        return Reply(c, ApiError{400, -1130, k.status().message()});
      }
    } else {
      k = keys_->CreateKey(*id, clock_.wall_ms());
    }
    if (!k.ok()) return Reply(c, ApiError{500, -1000, k.status().message()});
    json::object o;
    o["accountId"] = static_cast<uint32_t>(*id);
    o["apiKey"] = k->key;
    if (k->is_ed25519()) {
      o["keyType"] = "ED25519";
    } else {
      o["keyType"] = "HMAC_SHA256";
      o["secretKey"] = k->secret;
    }
    Ok(c, json::serialize(o));
  }
  // GET accounts/{id}/ledger?fromSeq&limit: the account's ledger lines from
  // the history, oldest first, in whole records (a record's lines share its
  // seq): at most `limit` lines, except that a first record with more lines is
  // given whole. fromSeq = the last line's seq + 1 continues a page.
  void AdminLedger(Ctx& c, std::string_view id_text) {
    if (history_ == nullptr) {
      return Reply(c, ApiError{404, -1000,
                               "The ledger is served from the projection (history database), "
                               "which this gateway runs without."});
    }
    const auto id = ParseAccountId(id_text);
    if (!id) return Reply(c, ApiError{404, -1000, "No such account."});
    if (auto e = Params::Parse(c.query, {}, &c.params)) return Reply(c, *e);
    std::optional<uint64_t> from;
    LedgerFilter q;
    if (auto e = c.params.GetUint("fromSeq", &from)) return Reply(c, *e);
    if (auto e = LimitParam(c, 500, 1000, &q.limit)) return Reply(c, *e);
    q.account = *id;
    q.from_seq = from.value_or(0);
    Defer(c, [this, q](HistoryJob& j) {
      std::vector<LedgerLine> lines;
      LedgerFilter more = q;
      more.limit = q.limit + 1;
      for (;;) {
        auto rows = history_->Ledger(more);
        if (!rows.ok()) return HistoryUnavailable(j, rows.status());
        lines = std::move(rows).value();
        if (lines.size() < more.limit) break;  // nothing after these
        // More lines follow: the last record may be cut off.
        const uint64_t cut = lines.back().seq;
        if (lines.front().seq != cut) {
          while (lines.back().seq == cut) lines.pop_back();
          break;
        }
        more.limit *= 2;  // one record fills the page: fetch all of it
      }
      if (lines.size() > q.limit) {
        // The first record alone is over the limit: only it.
        const uint64_t first = lines.front().seq;
        while (lines.back().seq != first) lines.pop_back();
      }
      json::object o;
      o["accountId"] = static_cast<uint32_t>(q.account);
      json::array entries;
      for (const LedgerLine& l : lines) {
        json::object x;
        x["seq"] = l.seq;
        x["index"] = l.idx;
        x["asset"] = config_.assets[static_cast<std::size_t>(l.asset)].symbol;
        x["bucket"] = l.bucket == engine::Bucket::kAvailable ? "AVAILABLE" : "LOCKED";
        x["delta"] = AssetAmount(config_, l.asset, l.delta);
        x["reason"] = engine::ToString(l.reason);
        x["refKind"] = l.ref_kind == engine::RefKind::kOrder   ? "ORDER"
                       : l.ref_kind == engine::RefKind::kTrade ? "TRADE"
                                                               : "TRANSFER";
        x["ref"] = l.ref;
        x["time"] = l.time_ns / 1'000'000;
        entries.push_back(std::move(x));
      }
      o["entries"] = std::move(entries);
      JobReply(j, 200, json::serialize(o));
    });
  }
  void AdminRevokeKey(Ctx& c, std::string_view key) {
    Status s = keys_->RevokeKey(key);
    if (!s.ok()) {
      return Reply(c, ApiError{s.code() == StatusCode::kNotFound ? 404 : 500, -1000, s.message()});
    }
    json::object o;
    o["apiKey"] = key;
    o["revoked"] = true;
    Ok(c, json::serialize(o));
  }
  void AdminTransfer(Ctx& c, const json::object& body, bool deposit) {
    const auto account = AccountField(body);
    if (!account || !keys_->FindAccount(static_cast<AccountId>(*account))) {
      return Reply(c, ApiError{400, -1102, "Field 'accountId' must name an existing account."});
    }
    const auto asset_name = StringField(body, "asset");
    const auto amount_text = StringField(body, "amount");
    const auto ref = StringField(body, "ref");
    if (!asset_name || !amount_text || !ref) {
      return Reply(c, ApiError{400, -1102,
                               "Fields 'asset', 'amount' (a decimal string) and 'ref' (the "
                               "idempotency reference) are required."});
    }
    std::optional<AssetId> asset;
    for (std::size_t i = 0; i < config_.assets.size(); ++i) {
      if (config_.assets[i].symbol == *asset_name) asset = static_cast<AssetId>(i);
    }
    if (!asset) return Reply(c, ApiError{400, -1130, "Unknown asset '" + *asset_name + "'."});
    auto units = ParseDecimal(*amount_text, config_.assets[static_cast<std::size_t>(*asset)].scale);
    if (!units.ok() || *units <= 0) {
      return Reply(c, ApiError{400, -1130,
                               "Field 'amount': " + (units.ok() ? std::string("must be positive")
                                                                : units.status().message())});
    }
    TransferRef tref;
    if (ref->empty() || !tref.Assign(*ref)) {
      return Reply(c, ApiError{400, -1130, "Field 'ref' must be 1 to 64 characters."});
    }
    engine::Command cmd;
    const AccountId acc = static_cast<AccountId>(*account);
    if (deposit) {
      cmd.body = engine::Deposit{acc, *asset, Amount{*units}, tref};
    } else {
      cmd.body = engine::Withdraw{acc, *asset, Amount{*units}, tref};
    }
    const engine::CommandType type =
        deposit ? engine::CommandType::kDeposit : engine::CommandType::kWithdraw;
    c.account = acc;
    Submit(c, deposit ? "deposit" : "withdraw", cmd,
           [this, acc, asset = *asset, amount = *amount_text, ref = *ref, type](Pending& p) {
             json::object o;
             o["accountId"] = static_cast<uint32_t>(acc);
             o["asset"] = config_.assets[static_cast<std::size_t>(asset)].symbol;
             o["amount"] = amount;
             o["ref"] = ref;
             if (const engine::Rejected* r = FirstReject(p.events)) {
               if (r->reason == engine::RejectReason::kDuplicateTransfer) {
                 o["transferId"] = r->existing_id;
                 o["duplicate"] = true;
                 return p.Reply(200, json::serialize(o));
               }
               if (r->reason == engine::RejectReason::kInsufficientBalance) {
                 return p.Fail(ApiError::InsufficientBalance());
               }
               return p.Fail(ApiError{400, -1130, std::string(engine::ToString(r->reason))});
             }
             o["transferId"] = static_cast<uint64_t>(p.seq);
             o["duplicate"] = false;
             (void)type;
             p.Reply(200, json::serialize(o));
           });
  }
  void AdminMarketStatus(Ctx& c, std::string_view symbol, const json::object& body) {
    MarketId m{};
    if (auto e = FindMarket(config_, symbol, &m)) return Reply(c, *e);
    const auto status = StringField(body, "status");
    MarketStatus st{};
    if (status == "TRADING") {
      st = MarketStatus::kTrading;
    } else if (status == "HALTED") {
      st = MarketStatus::kHalted;
    } else if (status == "CANCEL_ONLY") {
      st = MarketStatus::kCancelOnly;
    } else {
      return Reply(c,
                   ApiError{400, -1130,
                            "Field 'status' must be \"TRADING\", \"HALTED\" or \"CANCEL_ONLY\"."});
    }
    engine::Command cmd;
    cmd.body = engine::SetMarketStatus{m, st};
    Submit(c, "market_status", cmd, [this, m, st](Pending& p) {
      if (const engine::Rejected* r = FirstReject(p.events)) {
        return p.Fail(ApiError{400, -1130, std::string(engine::ToString(r->reason))});
      }
      json::object o;
      o["symbol"] = config_.markets[static_cast<std::size_t>(m)].symbol;
      o["status"] = st == MarketStatus::kTrading  ? "TRADING"
                    : st == MarketStatus::kHalted ? "HALTED"
                                                  : "CANCEL_ONLY";
      p.Reply(200, json::serialize(o));
    });
  }
  void AdminMarkets(Ctx& c) {
    json::array a;
    for (std::size_t i = 0; i < config_.markets.size(); ++i) {
      const auto s = Snap(static_cast<MarketId>(i));
      json::object o;
      o["symbol"] = config_.markets[i].symbol;
      o["status"] = std::string(engine::ToString(s->status));
      o["lastUpdateId"] = s->last_update_id;
      o["bidLevels"] = s->bids.size();
      o["askLevels"] = s->asks.size();
      a.push_back(std::move(o));
    }
    Ok(c, json::serialize(a));
  }

  // --- the history thread ---
  // Queues a request for the history thread, which waits until the
  // history shows what the read side shows now, then runs it.
  void Defer(Ctx& c, std::function<void(HistoryJob&)> run) {
    HistoryJob job;
    job.respond = std::move(c.respond);
    job.version = c.version;
    job.keep_alive = c.keep_alive;
    job.meta = c.meta;
    job.wait_seq = read_side_.applied_seq();
    job.deadline = std::chrono::steady_clock::now() + kHistoryWait;
    job.run = std::move(run);
    bool queued = false;
    {
      MutexLock lock(history_mu_);
      if (history_queue_.size() < kHistoryQueue) {
        history_queue_.push_back(std::move(job));
        history_depth_.store(history_queue_.size(), std::memory_order_relaxed);
        queued = true;
      }
    }
    if (queued) {
      history_runner_.Wake();
      return;
    }
    Response res = MakeResponse(
        job.version, job.keep_alive, 503,
        ApiError::ServerBusy(
            "Server is currently overloaded with other requests. Please try again in a few "
            "seconds.")
            .Json(),
        job.meta);
    res.set(http::field::retry_after, std::to_string(options_.retry_after_s));
    job.respond(std::move(res));
  }

  void JobReply(HistoryJob& j, int status, std::string body) {
    if (status == 200) history_last_error_.clear();
    j.respond(MakeResponse(j.version, j.keep_alive, status, std::move(body), j.meta));
  }
  void JobReply(HistoryJob& j, const ApiError& e) { JobReply(j, e.http_status, e.Json()); }
  // The history is behind or its database fails: Binance's answer to a
  // backend that did not answer in time.
  void HistoryUnavailable(HistoryJob& j, const Status& why) {
    if (why.message() != history_last_error_) {
      history_last_error_ = why.message();
      log::Warn("gateway", "history unavailable (503): " + why.message());
    }
    Response res =
        MakeResponse(j.version, j.keep_alive, 503, ApiError::Disconnected("").Json(), j.meta);
    res.set(http::field::retry_after, std::to_string(options_.retry_after_s));
    j.respond(std::move(res));
  }

  // Until the history has applied j.wait_seq (true), the deadline, or Stop().
  bool WaitApplied(const HistoryJob& j) {
    for (;;) {
      if (history_->applied_seq() >= j.wait_seq) return true;
      const auto now = std::chrono::steady_clock::now();
      if (now >= j.deadline || history_stop_.load(std::memory_order_relaxed)) return false;
      const auto slice = std::min<std::chrono::milliseconds>(
          std::chrono::ceil<std::chrono::milliseconds>(j.deadline - now),
          std::chrono::milliseconds(50));
      if (history_->WaitApplied(j.wait_seq, slice)) return true;
    }
  }

  // The history thread's rounds (mb-history): one request each; none once
  // stopping (what is left is dropped with the connections).
  int HistoryRound() {
    if (history_stop_.load(std::memory_order_acquire)) return 0;
    HistoryJob job;
    {
      MutexLock lock(history_mu_);
      if (history_queue_.empty()) return 0;
      job = std::move(history_queue_.front());
      history_queue_.pop_front();
      history_depth_.store(history_queue_.size(), std::memory_order_relaxed);
    }
    if (!WaitApplied(job)) {
      HistoryUnavailable(job, Status(StatusCode::kUnavailable,
                                     fmt::format("the projection did not catch up with the "
                                                 "read side within {} ms",
                                                 kHistoryWait.count())));
      return 1;
    }
    try {
      job.run(job);
    } catch (const std::exception& e) {
      JobReply(job, ApiError::Unknown(std::string("Internal error: ") + e.what()));
    }
    return 1;
  }
  bool HistoryWaiting() {
    MutexLock lock(history_mu_);
    return !history_queue_.empty();
  }

  // --- the fan-out thread (a handler of the fan-out stage) ---
  void Finish(Pending* p) {
    if (p->state != exchange::Outcome::State::kDurable) {
      if (!p->acked) {
        p->http_status = 503;
        if (timing_) p->responded_ns = SteadyNs();
        Busy(p->respond, p->version, p->keep_alive, p->meta,
             p->state == exchange::Outcome::State::kRefusing ? exchange::SubmitResult::kRefusing
                                                             : exchange::SubmitResult::kClosed);
      }
    } else {
      p->finish(*p);
    }
    if (hist_response_ != nullptr && p->ingress_ns != 0 && p->responded_ns != 0) {
      hist_response_->RecordDelta(p->responded_ns - p->ingress_ns);
    }
    if (options_.flight_recorder != nullptr) {
      metrics::CommandTrace t;
      t.seq = static_cast<uint64_t>(p->seq);
      t.account = p->account;
      t.kind = p->kind;
      t.http_status = p->http_status;
      t.ingress_ns = p->ingress_ns;
      t.submitted_ns = p->times.submitted_ns;
      t.sequenced_ns = p->times.sequenced_ns;
      t.matched_ns = p->times.matched_ns;
      t.journaled_ns = p->times.journaled_ns;
      t.durable_ns = p->times.durable_ns;
      t.responded_ns = p->responded_ns;
      options_.flight_recorder->Record(t);
    }
    delete p;
  }

  // Fan-out thread: the durable events' orders, trades and cancels per market.
  void CountEvents(std::span<const Event> events) {
    for (const Event& e : events) {
      if (const auto* a = As<engine::OrderAccepted>(e)) {
        Count(a->terms.market, &MarketCounts::orders);
      } else if (const auto* t = As<engine::Trade>(e)) {
        Count(t->market, &MarketCounts::trades);
      } else if (const auto* x = As<engine::OrderCanceled>(e)) {
        Count(x->market, &MarketCounts::cancels);
      }
    }
  }
  void Count(MarketId m, std::atomic<uint64_t> MarketCounts::*field) {
    const auto i = static_cast<std::size_t>(m);
    if (i < config_.markets.size())
      (market_counts_[i].*field).fetch_add(1, std::memory_order_relaxed);
  }

  // A Rejected event carries no order details; the gateway still holds the
  // command (its request waits for this batch), so the user-data report of a
  // rejected order says what was refused.
  static void DescribeRejectedOrders(const fanout::Batch& batch, marketdata::BatchOutput* out) {
    for (marketdata::AccountUpdate& u : out->accounts) {
      for (marketdata::ExecutionReport& r : u.reports) {
        if (r.type != marketdata::ExecType::kRejected) continue;
        const Pending* p = nullptr;
        for (const fanout::Batch::Waiting& w : batch.answers) {
          if (w.seq != r.seq) continue;
          const auto* mine = dynamic_cast<const Pending*>(w.answer);
          if (mine != nullptr && mine->place) p = mine;
        }
        if (p == nullptr) continue;
        const engine::PlaceOrder& o = *p->place;
        r.order.terms.market = o.market;
        r.order.terms.side = o.side;
        r.order.terms.type = o.type;
        r.order.terms.tif = o.tif;
        r.order.terms.stp = o.stp;
        r.order.terms.price = o.price;
        r.order.terms.qty = o.qty;
        r.order.quote_qty = o.quote_qty;
        r.order.client_order_id = o.client_order_id;
      }
    }
  }

  // fanout::Handler: one durable batch — the read side, the streams, the
  // counts; the stage then delivers the batch's answers.
  void OnBatch(const fanout::Batch& batch, bool) override {
    if (batch.events.empty()) return;
    read_side_.Apply(batch.events, &fan_out_);
    DescribeRejectedOrders(batch, &fan_out_);
    streams_.Publish(fan_out_);
    if (options_.metrics != nullptr) {
      if (batch.published_ns != 0) hist_fanout_->RecordDelta(SteadyNs() - batch.published_ns);
      CountEvents(batch.events);
    }
  }
  // The throttled streams' clock: every round, at least every 10 ms.
  void OnRound() override { streams_.Tick(clock_.wall_ms()); }

  const engine::EngineConfig config_;
  const std::filesystem::path data_dir_;
  const GatewayOptions options_;
  const Clock& clock_;  // wall time of the API (options_.clock or the system's)
  std::unique_ptr<KeyStore> keys_;
  marketdata::ReadSide read_side_;
  StreamHub streams_;
  WsApi ws_api_;  // /ws-api/v3; passes the other WebSocket connections to streams_
  RateLimiter key_limiter_;
  RateLimiter ip_limiter_;
  OrderCountLimiter order_limiter_;
  std::vector<Route> routes_;
  exchange::Exchange* exchange_ = nullptr;
  History* history_ = nullptr;  // the history endpoints' source when set
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
  metrics::Counter* rejected_429_ = nullptr;
  std::unique_ptr<MarketCounts[]> market_counts_;  // written by the fan-out thread only
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

Result<std::unique_ptr<Gateway>> Gateway::Create(const engine::EngineConfig& config,
                                                 const std::filesystem::path& data_dir,
                                                 GatewayOptions options) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  auto keys = KeyStore::Open(data_dir, config.max_accounts);
  if (!keys.ok()) return keys.status();
  return std::unique_ptr<Gateway>(new Gateway(
      std::make_unique<Impl>(config, data_dir, std::move(options), std::move(keys).value())));
}

Gateway::Gateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gateway::~Gateway() = default;
void Gateway::Wire(exchange::ExchangeOptions* options, fanout::Stage* stage) {
  impl_->Wire(options, stage);
}
void Gateway::SetHistory(History* history) { impl_->SetHistory(history); }
Status Gateway::Start(exchange::Exchange* exchange) { return impl_->Start(exchange); }
void Gateway::StopServer() { impl_->StopServer(); }
void Gateway::Stop() { impl_->Stop(); }
uint16_t Gateway::port() const noexcept { return impl_->port(); }
uint16_t Gateway::metrics_port() const noexcept { return impl_->metrics_port(); }
std::filesystem::path Gateway::admin_token_path() const { return impl_->admin_token_path(); }

}  // namespace mb::gateway
