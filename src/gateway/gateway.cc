// The gateway: its life (Wire, Start, Stop: the app's main thread), and on the
// io threads the routing of every request — parsing, weights and rate limits,
// authentication, the route's handler — and the answers' common paths.
#include "gateway/gateway.h"

#include "gateway/gateway_impl.h"
#include "gateway/web_pages.h"

namespace mb::gateway {

void Gateway::Impl::Wire(exchange::ExchangeOptions* o, fanout::Stage* stage) {
  o->on_recovered = [this](const engine::Engine& engine) {
    const engine::EngineImage image = engine.ExportImage();
    read_side_.Bootstrap(image);
    Learn(image);
    keys_->Bootstrap(image);
  };
  stage_ = stage;
  stage_->Add(this);
  o->on_durable = stage_->DurableListener();
  if (options_.metrics != nullptr || options_.flight_recorder != nullptr) o->stage_times = true;
}

void Gateway::Impl::SetHistory(History* history) { history_ = history; }
void Gateway::Impl::SetDispatcher(transfer::Dispatcher* dispatcher) { dispatcher_ = dispatcher; }

Status Gateway::Impl::Start(exchange::Exchange* exchange) {
  exchange_ = exchange;
  MB_RETURN_IF_ERROR(keys_->EnsureMasterKey());
  MB_RETURN_IF_ERROR(ImportLegacyKeys());
  const SecretCensus sc = keys_->secret_census();
  if (sc.plain_live + sc.plain_revoked > 0) {
    log::Warn("gateway",
              fmt::format("{} API keys ({} of them not revoked) hold secrets an earlier version "
                          "journaled in plain text: give their owners new keys, revoke these, "
                          "then run `matchbook secrets scrub` with the server stopped "
                          "(docs/security.md, \"Secrets from an earlier version\")",
                          sc.plain_live + sc.plain_revoked, sc.plain_live));
  }
  if (history_ != nullptr) log::Info("gateway", "thread " + history_runner_.Start());
  return StartServers();
}

namespace {

// Waits for one command to be durable and applied by every fan-out handler.
class SyncCompletion final : public exchange::Completion {
 public:
  void OnDone(uint64_t, const exchange::Outcome& o) noexcept override {
    std::string why;
    if (o.state != exchange::Outcome::State::kDurable) {
      why = "refused by the exchange (" + std::to_string(static_cast<int>(o.state)) + ")";
    } else {
      for (const engine::Event& e : o.events) {
        if (const auto* r = std::get_if<engine::Rejected>(&e.body)) {
          why = "refused by the engine: " + std::string(engine::ToString(r->reason));
        }
      }
    }
    MutexLock lock(mu_);
    why_ = std::move(why);
    seq_ = Raw(o.seq);
    done_ = true;
  }
  // The command's sequence, or the reason it failed; kUnavailable when no
  // answer came before `deadline`.
  Result<uint64_t> Wait(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      {
        MutexLock lock(mu_);
        if (done_) {
          if (!why_.empty()) return Status(StatusCode::kInternal, why_);
          return seq_;
        }
      }
      if (std::chrono::steady_clock::now() > deadline) return Unavailable("no answer");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  Mutex mu_;
  bool done_ MB_GUARDED_BY(mu_) = false;
  std::string why_ MB_GUARDED_BY(mu_);
  uint64_t seq_ MB_GUARDED_BY(mu_) = 0;
};

}  // namespace

// Accounts and keys of a data directory from before they entered the journal
// (auth.json): journaled once, in order, before the first request is served.
Status Gateway::Impl::ImportLegacyKeys() {
  Result<std::vector<engine::AuthChange>> changes = keys_->LegacyChanges();
  if (!changes.ok()) return changes.status();
  if (!changes->empty()) {
    log::Info("gateway", "auth.json: journaling " + std::to_string(changes->size()) +
                             " accounts, keys and revocations of an earlier version");
  }
  // A bound on every wait: under ack = replicated the bus stream must take
  // each record before it is applied, and a start must not hang on it.
  constexpr auto kPatience = std::chrono::seconds(60);
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  const auto late = [&](uint64_t seq) {
    return Unavailable("auth.json: the import's record " + std::to_string(seq) +
                       " was not durable and applied within 60 s (under ack = replicated the "
                       "bus stream must take it first): nothing served yet; start again");
  };
  uint64_t last = 0;
  for (const engine::AuthChange& change : *changes) {
    engine::Command cmd;
    cmd.timestamp_ns = clock_.wall_ms() * 1'000'000;
    cmd.body = change;
    // Owned here until it is answered; left to the exchange when it is not
    // (it calls back at its close).
    auto done = std::make_unique<SyncCompletion>();
    exchange::SubmitResult r;
    while ((r = exchange_->Submit(cmd, done.get(), 0)) == exchange::SubmitResult::kFull) {
      if (std::chrono::steady_clock::now() > deadline) return late(last + 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (r != exchange::SubmitResult::kOk) {
      return Unavailable("auth.json: the exchange refused the import: " +
                         std::string(exchange::ToString(r)) + " " + exchange_->RefusalReason());
    }
    Result<uint64_t> seq = done->Wait(deadline);
    if (!seq.ok() && seq.status().code() == StatusCode::kUnavailable) {
      (void)done.release();  // the exchange still holds it
      return late(last + 1);
    }
    if (!seq.ok()) {
      // The key only by its start: it is a credential.
      const std::string_view subject = change.subject.view();
      return Status(seq.status().code(),
                    "auth.json: importing " + std::string(engine::ToString(change.kind)) + " " +
                        std::string(change.kind == engine::AuthChangeKind::kCreateAccount
                                        ? subject
                                        : subject.substr(0, 8)) +
                        ": " + seq.status().message());
    }
    last = *seq;
  }
  // Served once the fan-out stage has applied the last of them.
  while (read_side_.applied_seq() < last) {
    if (std::chrono::steady_clock::now() > deadline) return late(last);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return keys_->RetireLegacyFile();
}

Status Gateway::Impl::StartReplica(ReplicaOptions options) {
  replica_ = true;
  replica_options_ = std::move(options);
  if (!replica_options_.primary.empty()) {
    ForwarderOptions fo;
    fo.ca_file = replica_options_.primary_ca;
    auto f = Forwarder::Create(replica_options_.primary, fo);
    if (!f.ok()) return f.status();
    forwarder_ = std::move(*f);
  }
  return StartServers();
}

void Gateway::Impl::ReplicaBootstrap(const engine::EngineImage& image) {
  read_side_.Bootstrap(image);
  Learn(image);
  keys_->Bootstrap(image);
  streams_.Forget();
}

void Gateway::Impl::ReplicaApply(std::span<const Event> events) {
  if (events.empty()) return;
  keys_->Apply(events);
  read_side_.Apply(events, &fan_out_);
  Learn(events);
  streams_.Publish(fan_out_);
  if (options_.metrics != nullptr) CountEvents(events);
}

Status Gateway::Impl::StartServers() {
  ServerOptions so = options_.server;
  so.ws_freshness = hist_freshness_;
  so.trusted_proxies = options_.trusted_replicas;
  server_ = std::make_unique<Server>(
      so, this,
      replica_ ? static_cast<WsHandler*>(&replica_ws_) : static_cast<WsHandler*>(&ws_api_));
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

void Gateway::Impl::StopServer() {
  if (metrics_server_) metrics_server_->Stop();
  if (server_) server_->Stop();
  if (forwarder_) forwarder_->Stop();
}

void Gateway::Impl::Stop() {
  StopServer();
  history_stop_.store(true, std::memory_order_release);
  history_runner_.Stop();
  {
    // No connection is left to answer what was still queued.
    MutexLock lock(history_mu_);
    history_queue_.clear();
  }
}

uint16_t Gateway::Impl::port() const noexcept { return server_ ? server_->port() : 0; }

Status Gateway::Impl::ReloadTls() {
  if (!server_) return Unavailable("the API server is not running");
  MB_RETURN_IF_ERROR(server_->ReloadTls());
  if (metrics_server_ && metrics_server_->tls()) return metrics_server_->ReloadTls();
  return Status::Ok();
}

uint16_t Gateway::Impl::metrics_port() const noexcept {
  return metrics_server_ ? metrics_server_->port() : 0;
}

std::filesystem::path Gateway::Impl::admin_token_path() const { return keys_->admin_token_path(); }

Response Gateway::Impl::MakeResponse(unsigned version, bool keep_alive, int status,
                                     std::string body, const ReplyMeta& meta) const {
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

void Gateway::Impl::Handle(Request req, std::string_view remote, bool loopback, Respond respond) {
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
  if (c.path == transfer::kDeliverTarget) return VenueCall(c);
  if (c.req.method() == http::verb::get || c.req.method() == http::verb::head) {
    // The trading and operator pages (gateway/web_pages.h): static, no weight.
    if (const web::Asset* page = FindPage(c.path)) {
      if (IsOperatorPage(c.path)) {
        if (std::optional<ApiError> refused = OperatorReach(c.loopback, "page")) {
          return Reply(c, *refused);
        }
      }
      Response res = PageResponse(c.req, *page);
      CountStatus(static_cast<int>(res.result_int()));
      return c.respond(std::move(res));
    }
    if (c.path == "/admin") {
      // The operator page's assets are relative to "/admin/".
      Response res{http::status::permanent_redirect, c.version};
      res.set(http::field::server, "matchbook");
      res.set(http::field::location, "/admin/");
      res.keep_alive(c.keep_alive);
      res.prepare_payload();
      CountStatus(308);
      return c.respond(std::move(res));
    }
  }

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
  if (replica_ && route != nullptr && route->security != Security::kNone) return Forward(c);
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
void Gateway::Impl::Call(WsApiCall call, WsApiDone done) {
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

// A request on its way to its route, from HTTP (Handle) or the WebSocket
// API (Call): weight, authentication unless `authenticated` (the WebSocket
// API checked it), limits, then the route's handler.
void Gateway::Impl::Dispatch(Ctx& c, const Route& r, const std::optional<ApiError>& bad_params,
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
  // A server that may not take orders (its lease lapsed by its own clock,
  // fenced, handing over) says so before anything else: the answer must not
  // depend on whether its lease thread has noticed yet.
  if (route->counts_order && exchange_ != nullptr) {
    if (const std::string why = exchange_->IntakeRefusal(); !why.empty()) {
      return Busy(c.respond, c.version, c.keep_alive, c.meta, why);
    }
  }
  if (route->security != Security::kNone) {
    if (!authenticated) {
      if (auto e =
              Authenticate(c, route->security == Security::kSigned, clock_.wall_ns() / 1'000)) {
        return Reply(c, *e);
      }
    } else if (const std::optional<ApiKey> key = keys_->FindKey(c.api_key)) {
      c.permissions = key->permissions;
    }
    if ((c.permissions & route->permission) != route->permission) {
      return Reply(c, ApiError::RejectedApiKey());
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

// A replica: the request to the primary as the client sent it, the answer
// back as the primary gave it (gateway/forwarder.h).
void Gateway::Impl::Forward(Ctx& c) {
  if (!forwarder_) {
    return Reply(c, ApiError{503, -1000,
                             replica_options_.role == "standby"
                                 ? "This server is a standby, not the primary: private calls and "
                                   "order entry go to the primary (GET /admin/v1/health says "
                                   "\"role\":\"primary\" there)."
                                 : "This server is a read replica started without --primary: "
                                   "private calls and order entry go to the primary."});
  }
  forwarder_->Forward(std::move(c.req), c.remote,
                      [this, respond = std::move(c.respond)](Response res) {
                        CountStatus(static_cast<int>(res.result_int()));
                        respond(std::move(res));
                      });
}

// --- a replica's WebSocket connections (io threads; tunnels on mb-forward) ---
bool Gateway::Impl::ReplicaWs::Accepts(const Request& request) {
  return Tunnelled(request.target()) || gw_->ws_api_.Accepts(request);
}

void Gateway::Impl::ReplicaWs::OnOpen(const std::shared_ptr<WsConnection>& conn) {
  if (!Tunnelled(conn->target())) return gw_->ws_api_.OnOpen(conn);
  if (!gw_->forwarder_) {
    return conn->Close(1008,
                       "This server is a read replica started without --primary: user data and "
                       "the WebSocket API are the primary's.");
  }
  std::weak_ptr<WsConnection> weak = conn;
  conn->user = gw_->forwarder_->Tunnel(
      conn->target(), conn->remote(),
      [weak](std::string text) {
        if (auto c = weak.lock()) c->Send(std::move(text));
      },
      [weak](uint16_t code, std::string reason) {
        if (auto c = weak.lock()) c->Close(code, std::move(reason));
      });
}

void Gateway::Impl::ReplicaWs::OnMessage(const std::shared_ptr<WsConnection>& conn,
                                         std::string_view text) {
  if (!Tunnelled(conn->target())) return gw_->ws_api_.OnMessage(conn, text);
  if (conn->user) static_cast<WsTunnel*>(conn->user.get())->Send(std::string(text));
}

void Gateway::Impl::ReplicaWs::OnClose(const std::shared_ptr<WsConnection>& conn) {
  if (!Tunnelled(conn->target())) return gw_->ws_api_.OnClose(conn);
  if (conn->user) static_cast<WsTunnel*>(conn->user.get())->Close();
}

void Gateway::Impl::RegisterRoutes() {
  using V = http::verb;
  auto add = [this](V m, std::string p, Security s, uint32_t w, Fn f,
                    uint32_t (*weigh)(const Params&) = nullptr, bool counts_order = false) {
    // Changing orders needs TRADE, a withdrawal WITHDRAW, everything else READ.
    uint8_t permission = kRead;
    if (m != V::get && (p.starts_with("/api/v3/order") || p == "/api/v3/openOrders")) {
      permission = kTrade;
    }
    if (p == "/sapi/v1/capital/withdraw/apply") permission = kWithdraw;
    if (p == "/api/v3/order/test") permission = kTrade;
    routes_.push_back(Route{m, std::move(p), s, w, f, weigh, counts_order, permission});
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
  add(V::post, "/api/v3/orderList/oco", Security::kSigned, 1, &Impl::OrderListOco, nullptr, true);
  add(V::post, "/api/v3/orderList/oto", Security::kSigned, 1, &Impl::OrderListOto, nullptr, true);
  add(V::post, "/api/v3/orderList/otoco", Security::kSigned, 1, &Impl::OrderListOtoco, nullptr,
      true);
  add(V::delete_, "/api/v3/orderList", Security::kSigned, 1, &Impl::CancelOrderListRoute);
  add(V::get, "/api/v3/orderList", Security::kSigned, 4, &Impl::GetOrderList);
  add(V::get, "/api/v3/allOrderList", Security::kSigned, 20, &Impl::AllOrderLists);
  add(V::get, "/api/v3/openOrderList", Security::kSigned, 6, &Impl::OpenOrderLists);
  add(V::get, "/api/v3/myTrades", Security::kSigned, 20, &Impl::MyTrades, &MyTradesWeight);
  add(V::get, "/api/v3/account", Security::kSigned, 20, &Impl::Account);
  add(V::post, "/api/v3/userDataStream", Security::kApiKey, 2, &Impl::ListenKeyCreate);
  add(V::put, "/api/v3/userDataStream", Security::kApiKey, 2, &Impl::ListenKeyKeepAlive);
  add(V::delete_, "/api/v3/userDataStream", Security::kApiKey, 2, &Impl::ListenKeyClose);
  // Binance's wallet calls, for transfers between venues (docs/transfers.md).
  add(V::get, "/sapi/v1/capital/config/getall", Security::kSigned, 10, &Impl::CapitalConfig);
  add(V::get, "/sapi/v1/capital/deposit/address", Security::kSigned, 10, &Impl::DepositAddress);
  add(V::post, "/sapi/v1/capital/withdraw/apply", Security::kSigned, 1, &Impl::WithdrawApply);
  add(V::get, "/sapi/v1/capital/withdraw/history", Security::kSigned, 10, &Impl::WithdrawHistory);
  add(V::get, "/sapi/v1/capital/deposit/hisrec", Security::kSigned, 1, &Impl::DepositHistory);
}

// --- answers ---
void Gateway::Impl::Reply(Ctx& c, int status, std::string body) {
  c.respond(MakeResponse(c.version, c.keep_alive, status, std::move(body), c.meta));
}

void Gateway::Impl::Reply(Ctx& c, const ApiError& e) { Reply(c, e.http_status, e.Json()); }

void Gateway::Impl::Ok(Ctx& c, std::string body) { Reply(c, 200, std::move(body)); }

// 429 for request weight over `limit` per minute (Binance's text); the
// answer shows the IP's used weight, as every answer does.
void Gateway::Impl::TooMany(Ctx& c, const RateDecision& d, uint32_t limit) {
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
void Gateway::Impl::TooManyOrders(Ctx& c, const OrderCountDecision& d) {
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

void Gateway::Impl::Busy(const Respond& respond, unsigned version, bool keep_alive,
                         const ReplyMeta& meta, exchange::SubmitResult r) {
  std::string msg;
  switch (r) {
    case exchange::SubmitResult::kFull:
      msg =
          "Server is currently overloaded with other requests. Please try again in a few "
          "seconds.";
      break;
    case exchange::SubmitResult::kRefusing:
      msg = exchange_->IntakeRefusal();
      if (msg.empty()) {
        msg = "The exchange cannot write its journal and refuses new commands for now: " +
              exchange_->RefusalReason();
      }
      break;
    default:
      msg = "The exchange is shutting down.";
      break;
  }
  Busy(respond, version, keep_alive, meta, msg);
}

void Gateway::Impl::Busy(const Respond& respond, unsigned version, bool keep_alive,
                         const ReplyMeta& meta, const std::string& msg) {
  Response res = MakeResponse(version, keep_alive, 503, ApiError::ServerBusy(msg).Json(), meta);
  res.set(http::field::retry_after, std::to_string(options_.retry_after_s));
  if (rejected_503_ != nullptr) rejected_503_->Inc();
  respond(std::move(res));
}

// Submits a command whose answer `finish` gives once durable and applied.
// kind: a string literal naming it in the flight recorder.
void Gateway::Impl::Submit(Ctx& c, const char* kind, const engine::Command& cmd,
                           std::function<void(Pending&)> finish,
                           std::function<bool(Pending&, std::span<const Event>)> on_sequenced) {
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

std::optional<ApiError> Gateway::Impl::Authenticate(Ctx& c, bool is_signed, int64_t now_us) {
  const auto h = c.req.find("X-MBX-APIKEY");
  if (h == c.req.end() || h->value().empty()) return ApiError::BadApiKeyFormat();
  c.api_key = std::string(Trim(h->value()));
  const std::optional<ApiKey> key = keys_->FindKey(c.api_key);
  if (!key || key->revoked) return ApiError::RejectedApiKey();
  c.account = key->account;
  c.permissions = key->permissions;
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
std::optional<ApiError> Gateway::Impl::SymbolParam(const Ctx& c, MarketId* market) {
  std::string_view symbol;
  if (auto e = c.params.Require("symbol", &symbol)) return e;
  return FindMarket(config_, symbol, market);
}

std::optional<ApiError> Gateway::Impl::LimitParam(const Ctx& c, std::size_t def, std::size_t max,
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
std::optional<ApiError> Gateway::Impl::TimeZoneParam(const Ctx& c, int32_t* zone_min) {
  *zone_min = 0;
  const auto v = c.params.Get("timeZone");
  if (!v) return std::nullopt;
  const std::optional<int32_t> z = marketdata::ParseTimeZone(*v);
  if (!z) return ApiError::IllegalChars("timeZone", "-12:00 to +14:00");
  *zone_min = *z;
  return std::nullopt;
}

std::shared_ptr<const marketdata::MarketSnapshot> Gateway::Impl::Snap(MarketId m) const {
  return read_side_.Snapshot(m);
}

// symbol=X → [X]; symbols=["X","Y"] → both; neither → every market (*all = true).
std::optional<ApiError> Gateway::Impl::SymbolsParam(const Ctx& c, std::vector<MarketId>* out,
                                                    bool* all) {
  SymbolSelection sel;
  if (auto e = SelectSymbols(c, StatusFilter::kFilter, &sel)) return e;
  *all = sel.all;
  *out = std::move(sel.markets);
  return std::nullopt;
}

std::optional<ApiError> Gateway::Impl::SelectSymbols(const Ctx& c, StatusFilter mode,
                                                     SymbolSelection* out) {
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
std::optional<ApiError> Gateway::Impl::TickerTypeParam(const Ctx& c, bool* mini) {
  const std::optional<std::string_view> t = c.params.Get("type");
  *mini = t && *t == "MINI";
  if (t && !*mini && *t != "FULL") return ApiError::InvalidTickerType();
  return std::nullopt;
}

// depth's `symbolStatus`: the market must be in that status (-1220), as on
// Binance; an unknown status name is -1122.
std::optional<ApiError> Gateway::Impl::SymbolStatusParam(const Ctx& c, MarketId m) {
  const std::optional<std::string_view> st = c.params.Get("symbolStatus");
  if (!st) return std::nullopt;
  const std::optional<MarketStatus> status = ParseSymbolStatus(*st);
  if (!status) return ApiError::InvalidSymbolStatus();
  if (Snap(m)->status != *status) return ApiError::SymbolStatusMismatch();
  return std::nullopt;
}

Result<std::unique_ptr<Gateway>> Gateway::Create(const engine::EngineConfig& config,
                                                 const std::filesystem::path& data_dir,
                                                 GatewayOptions options) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  auto keys = KeyStore::Open(data_dir, config.max_accounts, options.master_key_file);
  if (!keys.ok()) return keys.status();
  return std::unique_ptr<Gateway>(new Gateway(
      std::make_unique<Impl>(config, data_dir, std::move(options), std::move(keys).value())));
}

Gateway::Gateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gateway::~Gateway() = default;
const engine::EngineConfig& Gateway::config() const { return impl_->config(); }

void Gateway::Wire(exchange::ExchangeOptions* options, fanout::Stage* stage) {
  impl_->Wire(options, stage);
}
void Gateway::SetHistory(History* history) { impl_->SetHistory(history); }
void Gateway::SetDispatcher(transfer::Dispatcher* dispatcher) { impl_->SetDispatcher(dispatcher); }
void Gateway::AddHealthSection(std::string name, std::function<std::string()> json) {
  impl_->AddHealthSection(std::move(name), std::move(json));
}
Status Gateway::Start(exchange::Exchange* exchange) { return impl_->Start(exchange); }
Status Gateway::StartReplica(ReplicaOptions options) {
  return impl_->StartReplica(std::move(options));
}
void Gateway::ReplicaBootstrap(const engine::EngineImage& image) { impl_->ReplicaBootstrap(image); }
void Gateway::SeedMarketHistory(std::span<const marketdata::MarketHistory> markets,
                                std::span<const marketdata::OrderRecord> open_orders) {
  impl_->SeedMarketHistory(markets, open_orders);
}
const marketdata::ReadSideOptions& Gateway::read_side_options() const {
  return impl_->read_side_options();
}
void Gateway::ReplicaApply(std::span<const engine::Event> events) { impl_->ReplicaApply(events); }
void Gateway::ReplicaTick() { impl_->ReplicaTick(); }
uint64_t Gateway::replica_applied_seq() const noexcept { return impl_->replica_applied_seq(); }
void Gateway::StopServer() { impl_->StopServer(); }
void Gateway::Stop() { impl_->Stop(); }
uint16_t Gateway::port() const noexcept { return impl_->port(); }
bool Gateway::tls() const noexcept { return impl_->tls(); }
Status Gateway::ReloadTls() { return impl_->ReloadTls(); }
uint16_t Gateway::metrics_port() const noexcept { return impl_->metrics_port(); }
std::filesystem::path Gateway::admin_token_path() const { return impl_->admin_token_path(); }

}  // namespace mb::gateway
