// The operator API (/admin/v1/...) and /metrics: on the io threads; the
// metrics registry's callbacks on whichever thread scrapes.
#include "gateway/gateway_impl.h"

namespace mb::gateway {

namespace {

// The audit line of one operator call: who (address, and which token: a
// fingerprint of the one presented when it was right, else "missing" or
// "wrong"), what (method, path, query, body), when and the answer (status,
// and Binance's error code when it is an error). The answer's body is never
// written: it may hold a secret (a new API key's, a rotated admin token).
std::string AuditLine(int64_t time_ms, std::string_view remote, std::string_view who,
                      std::string_view method, std::string_view path, std::string_view query,
                      std::string_view body, const Response& res) {
  constexpr std::size_t kMaxBody = 2048;
  json::object o;
  o["time"] = time_ms;
  o["remote"] = remote;
  o["token"] = who;
  o["method"] = method;
  o["path"] = path;
  if (!query.empty()) o["query"] = query;
  if (!body.empty()) o["body"] = body.substr(0, kMaxBody);
  o["status"] = res.result_int();
  if (res.result_int() >= 400) {
    boost::system::error_code ec;
    json::value v = json::parse(res.body(), ec);
    if (!ec && v.is_object()) {
      if (const json::value* code = v.as_object().if_contains("code")) o["code"] = *code;
    }
  }
  return json::serialize(o);
}

}  // namespace

std::optional<ApiError> Gateway::Impl::OperatorReach(bool loopback, std::string_view what) const {
  if (loopback) return std::nullopt;
  if (!options_.admin_remote) {
    return ApiError{403, -1002,
                    fmt::format("The operator {} answers loopback clients only.", what)};
  }
  if (!tls() && !options_.admin_remote_plaintext) {
    return ApiError{403, -1002,
                    fmt::format("The operator {} answers remote clients over TLS only (--tls-cert "
                                "and --tls-key): the admin token would cross the network readable.",
                                what)};
  }
  return std::nullopt;
}

void Gateway::Impl::HandleAdmin(Ctx& c) {
  std::string token;
  if (auto h = c.req.find("X-MB-ADMIN-TOKEN"); h != c.req.end()) {
    token = std::string(Trim(h->value()));
  } else if (auto a = c.req.find(http::field::authorization); a != c.req.end()) {
    std::string_view v = Trim(a->value());
    if (v.starts_with("Bearer ")) token = std::string(Trim(v.substr(7)));
  }
  const bool token_ok = !token.empty() && keys_->CheckAdminToken(token);
  if (audit_ == nullptr) {
    return Reply(
        c, ApiError{503, -1001, "The operator API is closed: the audit log cannot be written."});
  }
  // Every answer, whenever it is given (some come after the engine decided),
  // is audited first; but for the probes (health, ready) that answer a
  // right token: monitors ask every few seconds.
  const bool probe = c.req.method() == http::verb::get &&
                     (c.path == "/admin/v1/health" || c.path == "/admin/v1/ready");
  const std::string who = token.empty() ? "missing"
                          : token_ok    ? "fp:" + HmacSha256Hex(token, "admin token").substr(0, 16)
                                        : "wrong";
  if (!(probe && token_ok)) {
    c.respond = [this, inner = std::move(c.respond), who, remote = c.remote,
                 method = std::string(c.req.method_string()), path = c.path, query = c.query,
                 body = c.req.body()](Response res) {
      const std::string line =
          AuditLine(clock_.wall_ms(), remote, who, method, path, query, body, res);
      if (Status st = audit_->Append(line); !st.ok()) {
        log::Error("gateway", "audit log: " + st.message(), {{"line", line}});
      }
      inner(std::move(res));
    };
  }
  if (std::optional<ApiError> refused = OperatorReach(c.loopback, "API")) {
    return Reply(c, *refused);
  }
  if (!token_ok) {
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
  // Read-only calls from what this server holds: the markets and balances
  // from its read side, the flight recorder; the accounts on a standby,
  // which keeps its primary's key store.
  if (v == http::verb::get) {
    const bool standby = replica_ && replica_options_.role == "standby";
    if (parts.size() == 1 && parts[0] == "markets") return AdminMarkets(c);
    if (parts.size() == 1 && parts[0] == "flight-recorder") return AdminFlightRecorder(c);
    if (parts.size() == 2 && parts[0] == "flight-recorder") return AdminFlightDump(c, parts[1]);
    if (!replica_ || standby) {
      if (parts.size() == 1 && parts[0] == "accounts") return AdminAccounts(c);
      if (parts.size() == 2 && parts[0] == "accounts") return AdminAccount(c, parts[1]);
    }
  }
  if (replica_) {
    return Reply(
        c, ApiError{409, -1000,
                    fmt::format("This server is a {}: it answers health, ready and the read-only "
                                "calls on {}; send other operator calls to the primary.",
                                replica_options_.role == "standby" ? "standby" : "read replica",
                                replica_options_.role == "standby"
                                    ? "markets, accounts and the flight recorder"
                                    : "markets and the flight recorder")});
  }
  if (parts.size() == 1 && parts[0] == "failover" && v == http::verb::post) {
    return AdminFailover(c);
  }
  if (parts.size() == 1 && parts[0] == "accounts" && v == http::verb::post) {
    return AdminCreateAccount(c, obj);
  }
  if (parts.size() == 3 && parts[0] == "accounts" && parts[2] == "apiKeys" &&
      v == http::verb::post) {
    return AdminCreateKey(c, parts[1], obj);
  }
  if (parts.size() == 3 && parts[0] == "accounts" && parts[2] == "ledger" && v == http::verb::get) {
    return AdminLedger(c, parts[1]);
  }
  if (parts.size() == 2 && parts[0] == "apiKeys" && v == http::verb::delete_) {
    return AdminRevokeKey(c, parts[1]);
  }
  if (parts.size() == 1 && (parts[0] == "deposits" || parts[0] == "withdrawals") &&
      v == http::verb::post) {
    return AdminTransfer(c, obj, parts[0] == "deposits");
  }
  if (parts.size() == 3 && parts[0] == "markets" && parts[2] == "status" && v == http::verb::post) {
    return AdminMarketStatus(c, parts[1], obj);
  }
  if (parts.size() == 1 && parts[0] == "markets" && v == http::verb::post) {
    return AdminAddMarket(c, obj);
  }
  if (parts.size() == 1 && parts[0] == "assets" && v == http::verb::post) {
    return AdminAddAsset(c, obj);
  }
  if (parts.size() == 1 && parts[0] == "transfers" && v == http::verb::get) {
    return AdminTransfers(c);
  }
  if (parts.size() == 3 && parts[0] == "transfers" && parts[2] == "void" && v == http::verb::post) {
    return AdminVoidTransfer(c, parts[1]);
  }
  if (parts.size() == 1 && parts[0] == "venues" && v == http::verb::get) return AdminVenues(c);
  if (parts.size() == 2 && parts[0] == "token" && parts[1] == "rotate" && v == http::verb::post) {
    auto rotated = keys_->RotateAdminToken();
    if (!rotated.ok()) {
      return Reply(c, ApiError{500, -1000,
                               "The admin token was not rotated: " + rotated.status().message()});
    }
    log::Info("gateway", "admin token rotated; the old one no longer works",
              {{"file", keys_->admin_token_path().string()}});
    json::object o;
    o["adminToken"] = *rotated;
    o["file"] = keys_->admin_token_path().string();
    return Ok(c, json::serialize(o));
  }
  if (parts.size() == 1 && parts[0] == "snapshot" && v == http::verb::post) {
    exchange_->RequestSnapshot();
    return Ok(c, R"({"requested":true})");
  }
  Reply(c, ApiError::NotFound());
}

// GET flight-recorder: the recorder's settings, counts and dumps (newest first).
void Gateway::Impl::AdminFlightRecorder(Ctx& c) {
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
void Gateway::Impl::AdminFlightDump(Ctx& c, std::string_view file) {
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
void Gateway::Impl::HandleMetrics(Ctx& c) {
  if (!c.loopback && !options_.metrics_remote) {
    return Reply(c, ApiError{403, -1002, "/metrics answers loopback clients only."});
  }
  if (c.req.method() != http::verb::get && c.req.method() != http::verb::head) {
    return Reply(c, ApiError::MethodNotAllowed());
  }
  c.respond(MetricsResponse(c.version, c.keep_alive));
}

Response Gateway::Impl::MetricsResponse(unsigned version, bool keep_alive) const {
  CountStatus(200);
  Response res{http::status::ok, version};
  res.set(http::field::server, "matchbook");
  res.set(http::field::content_type, metrics::kContentType);
  res.keep_alive(keep_alive);
  res.body() = options_.metrics->Expose();
  res.prepare_payload();
  return res;
}

void Gateway::Impl::CountStatus(int status) const {
  if (status_counters_[0] == nullptr) return;
  std::size_t i = 0;
  while (i < std::size(kCountedStatuses) && kCountedStatuses[i] != status) ++i;
  status_counters_[i]->Inc();
}

void Gateway::Impl::RegisterMetrics(metrics::Registry& r) {
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
  constexpr std::string_view kVenueHelp =
      "Transfers other venues delivered here: credited, repeated (credited before: answered "
      "with the first credit) or rejected";
  const char* const kVenueOutcomes[] = {"credited", "repeated", "rejected"};
  for (std::size_t i = 0; i < 3; ++i) {
    venue_deposits_[i] = &r.AddCounter("matchbook_venue_deposits_total", kVenueHelp,
                                       {{"outcome", kVenueOutcomes[i]}});
  }
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
  // How the journal holds the HMAC keys' secrets: "plain" (an earlier
  // version's, live or revoked) falls to 0 once they are rotated and scrubbed.
  using CensusField = double (*)(const Impl&);
  const std::pair<const char*, CensusField> kForms[] = {
      {"sealed", [](const Impl& g) { return double(g.keys_->secret_census().sealed); }},
      {"plain", [](const Impl& g) { return double(g.keys_->secret_census().plain_live); }},
      {"plain_revoked",
       [](const Impl& g) { return double(g.keys_->secret_census().plain_revoked); }},
      {"scrubbed", [](const Impl& g) { return double(g.keys_->secret_census().scrubbed); }}};
  for (const auto& [form, field] : kForms) {
    r.AddGauge("matchbook_api_key_secrets",
               "HMAC keys by how the journal holds their secret: sealed with the master key, "
               "plain (an earlier version's; live or revoked) or scrubbed",
               {{"form", form}}, read(field));
  }
  r.AddGauge("matchbook_history_queue_depth", "History requests waiting for the history thread", {},
             read([](const Impl& g) { return static_cast<double>(g.history_depth_.load()); }));
  r.AddGauge("matchbook_responses_waiting",
             "Durable commands whose answers wait for the read side to apply them", {},
             read([](const Impl& g) {
               return g.stage_ != nullptr ? static_cast<double>(g.stage_->answers_waiting()) : 0.0;
             }));
  r.AddGauge("matchbook_read_side_applied_sequence",
             "The last sequence the read side (REST market data, streams) has applied", {},
             read([](const Impl& g) { return static_cast<double>(g.read_side_.applied_seq()); }));
  r.AddGauge("matchbook_open_orders", "Orders resting on the books (as the read side has them)", {},
             read([](const Impl& g) { return static_cast<double>(g.read_side_.open_orders()); }));
  r.AddCounterFn(
      "matchbook_closed_orders_total", "Orders filled, canceled or expired since the start", {},
      read([](const Impl& g) { return static_cast<double>(g.read_side_.closed_orders()); }));
  r.AddGauge("matchbook_http_connections", "Open connections on the API port (HTTP and WebSocket)",
             {}, read([](const Impl& g) { return g.WsStat(&ServerStats::connections_open); }));
  constexpr std::string_view kRefusedHelp =
      "Connections refused: over gateway.max_connections (reason=\"server\") or over "
      "gateway.max_connections_per_ip (reason=\"address\")";
  r.AddCounterFn("matchbook_http_connections_refused_total", kRefusedHelp, {{"reason", "server"}},
                 read([](const Impl& g) { return g.WsStat(&ServerStats::connections_refused); }));
  r.AddCounterFn(
      "matchbook_http_connections_refused_total", kRefusedHelp, {{"reason", "address"}},
      read([](const Impl& g) { return g.WsStat(&ServerStats::connections_refused_per_ip); }));
  r.AddCounterFn("matchbook_http_timeouts_total",
                 "Connections cut off by a deadline: a request not read whole within "
                 "read_timeout_ms (slow clients), an idle keep-alive, a slow reader",
                 {}, read([](const Impl& g) { return g.WsStat(&ServerStats::timeouts); }));
  r.AddCounterFn("matchbook_tls_handshakes_total", "TLS handshakes completed on the API port", {},
                 read([](const Impl& g) { return g.WsStat(&ServerStats::tls_handshakes); }));
  r.AddCounterFn(
      "matchbook_tls_handshake_failures_total",
      "TLS handshakes refused, failed or timed out on the API port", {},
      read([](const Impl& g) { return g.WsStat(&ServerStats::tls_handshake_failures); }));
  r.AddGauge("matchbook_ws_connections", "Open WebSocket connections", {},
             read([](const Impl& g) { return g.WsStat(&ServerStats::ws_open); }));
  r.AddCounterFn("matchbook_ws_connections_total", "WebSocket handshakes completed", {},
                 read([](const Impl& g) { return g.WsStat(&ServerStats::ws_total); }));
  r.AddCounterFn("matchbook_ws_disconnects_total",
                 "WebSocket connections that ended, for any reason", {},
                 read([](const Impl& g) { return g.WsStat(&ServerStats::ws_closed); }));
  r.AddCounterFn("matchbook_ws_messages_sent_total", "WebSocket messages written", {},
                 read([](const Impl& g) { return g.WsStat(&ServerStats::ws_messages_sent); }));
  r.AddCounterFn("matchbook_ws_socket_writes_total",
                 "Sends to WebSocket sockets (the frames gathered for a connection leave in one)",
                 {}, read([](const Impl& g) { return g.WsStat(&ServerStats::ws_socket_writes); }));
  r.AddCounterFn("matchbook_ws_dropped_messages_total",
                 "WebSocket messages discarded because a connection's send queue overflowed", {},
                 read([](const Impl& g) { return g.WsStat(&ServerStats::ws_dropped_messages); }));
  r.AddCounterFn("matchbook_ws_slow_disconnects_total",
                 "WebSocket connections closed (1008) because their send queue overflowed", {},
                 read([](const Impl& g) { return g.WsStat(&ServerStats::ws_slow_disconnects); }));
  r.AddGauge("matchbook_ws_subscriptions", "Stream subscriptions of all WebSocket connections", {},
             read([](const Impl& g) {
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

double Gateway::Impl::WsStat(std::atomic<uint64_t> ServerStats::*field) const {
  return server_ ? static_cast<double>((server_->stats().*field).load()) : 0.0;
}

std::optional<std::string> Gateway::Impl::StringField(const json::object& o, std::string_view k) {
  auto it = o.find(k);
  if (it == o.end() || !it->value().is_string()) return std::nullopt;
  return std::string(it->value().as_string());
}

std::optional<uint32_t> Gateway::Impl::AccountField(const json::object& o) {
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

std::optional<AccountId> Gateway::Impl::ParseAccountId(std::string_view s) {
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

void Gateway::Impl::AdminHealth(Ctx& c) {
  json::object o;
  if (replica_) {
    const bool ready = replica_options_.ready && replica_options_.ready();
    o["status"] = ready ? "ok" : "catching up";
    o["role"] = replica_options_.role;
    o["appliedSequence"] = read_side_.applied_seq();
    o["primary"] = replica_options_.primary;
    if (forwarder_) {
      const ForwarderStats f = forwarder_->stats();
      json::object fo;
      fo["forwarded"] = f.forwarded;
      fo["failed"] = f.failed;
      fo["connections"] = f.connections;
      fo["waiting"] = f.waiting;
      fo["tunnels"] = f.tunnels;
      fo["current"] = forwarder_->primary();
      fo["probes"] = f.probes;
      fo["switches"] = f.switches;
      o["forwarding"] = std::move(fo);
    }
    AddHealthSections(o);
    return Ok(c, json::serialize(o));
  }
  const std::string refusal = exchange_->RefusalReason();
  const exchange::ExchangeStats st = exchange_->stats();
  o["role"] = "primary";
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
  AddHealthSections(o);
  Ok(c, json::serialize(o));
}

void Gateway::Impl::AdminFailover(Ctx& c) {
  if (!options_.failover) {
    return Reply(c, ApiError{409, -1000,
                             "No standby can take over: this primary holds no leadership lease "
                             "(serve --nats URL; docs/failover.md)."});
  }
  Result<std::string> r = options_.failover();
  if (!r.ok()) return Reply(c, ApiError{409, -1000, "Failover refused: " + r.status().message()});
  Ok(c, std::move(*r));
}

void Gateway::Impl::AddHealthSections(json::object& o) const {
  for (const auto& [name, section] : health_sections_) {
    boost::system::error_code ec;
    json::value v = json::parse(section(), ec);
    o[name] = ec ? json::value(nullptr) : std::move(v);
  }
}

void Gateway::Impl::AdminReady(Ctx& c) {
  const bool ready = replica_ ? replica_options_.ready && replica_options_.ready()
                              : exchange_->RefusalReason().empty();
  Reply(c, ready ? 200 : 503, ready ? R"({"ready":true})" : R"({"ready":false})");
}

json::object Gateway::Impl::AccountObject(const AccountInfo& a) {
  json::object o;
  o["accountId"] = static_cast<uint32_t>(a.id);
  o["name"] = a.name;
  o["createdTime"] = a.created_ms;
  return o;
}

void Gateway::Impl::AdminCreateAccount(Ctx& c, const json::object& body) {
  const auto name = StringField(body, "name");
  if (!name) return Reply(c, ApiError{400, -1102, "Field 'name' (a string) is required."});
  auto change = keys_->NewAccount(*name, clock_.wall_ms());
  if (!change.ok()) return Reply(c, ApiError{400, -1130, change.status().message()});
  SubmitAuthChange(c, "create_account", *change, [this](Pending& p, const engine::AuthChanged& a) {
    const std::optional<AccountInfo> info = keys_->FindAccount(a.account);
    if (!info) return p.Fail(ApiError{500, -1000, "The new account is not served."});
    p.Reply(200, json::serialize(AccountObject(*info)));
  });
}

// Journals an account or key change; `done` answers once it is durable and
// the key store serves it. A refusal by the engine (a name or key taken
// meanwhile, no account id left) is answered here.
void Gateway::Impl::SubmitAuthChange(
    Ctx& c, const char* kind, const engine::AuthChange& change,
    std::function<void(Pending&, const engine::AuthChanged&)> done) {
  engine::Command cmd;
  cmd.body = change;
  Submit(c, kind, cmd, [done = std::move(done)](Pending& p) {
    if (const engine::Rejected* r = FirstReject(p.events)) {
      ApiError e = ApiError::FromReject(r->command, r->reason);
      if (r->reason == engine::RejectReason::kUnknownAccount ||
          r->reason == engine::RejectReason::kUnknownApiKey) {
        e = ApiError{404, -1000, e.msg};
      }
      return p.Fail(e);
    }
    for (const Event& e : p.events) {
      if (const auto* a = std::get_if<engine::AuthChanged>(&e.body)) return done(p, *a);
    }
    p.Fail(ApiError{500, -1000, "The change left no event."});
  });
}

void Gateway::Impl::AdminAccounts(Ctx& c) {
  json::array a;
  for (const AccountInfo& info : keys_->Accounts()) a.push_back(AccountObject(info));
  Ok(c, json::serialize(a));
}

void Gateway::Impl::AdminAccount(Ctx& c, std::string_view id_text) {
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
void Gateway::Impl::AdminCreateKey(Ctx& c, std::string_view id_text, const json::object& body) {
  const auto id = ParseAccountId(id_text);
  if (!id) return Reply(c, ApiError{404, -1000, "No such account."});
  if (*id == config_.fee_account) {
    return Reply(c, ApiError{400, -1002, "The fee account cannot trade: it has no API keys."});
  }
  uint8_t permissions = kDefaultPermissions;
  if (const json::value* p = body.if_contains("permissions")) {
    const std::optional<uint8_t> bits = ParsePermissions(*p);
    permissions = static_cast<uint8_t>(kRead | bits.value_or(0));  // every key reads, as on Binance
    if (!bits) {
      return Reply(c, ApiError{400, -1130,
                               "Field 'permissions' must be a non-empty array of \"READ\", "
                               "\"TRADE\" and \"WITHDRAW\"."});
    }
  }
  const json::value* public_key = body.if_contains("publicKey");
  std::string raw;
  if (public_key != nullptr) {
    const std::optional<std::string> parsed =
        public_key->is_string() ? ParseEd25519PublicKey(public_key->get_string()) : std::nullopt;
    if (!parsed) {
      return Reply(c, ApiError{400, -1130,
                               "Field 'publicKey' must be an Ed25519 public key: PEM "
                               "(-----BEGIN PUBLIC KEY-----) or base64."});
    }
    raw = *parsed;
  }
  auto change = keys_->NewKey(*id, clock_.wall_ms(), permissions, raw);
  if (!change.ok()) {
    const bool missing = change.status().code() == StatusCode::kNotFound;
    return Reply(c,
                 ApiError{missing ? 404 : 400, missing ? -1000 : -1130, change.status().message()});
  }
  SubmitAuthChange(c, "create_key", *change,
                   [this, id = *id](Pending& p, const engine::AuthChanged& a) {
                     json::object o;
                     o["accountId"] = static_cast<uint32_t>(id);
                     o["apiKey"] = a.subject.view();
                     json::array perms;
                     for (const std::string& name : PermissionNames(a.permissions))
                       perms.emplace_back(name);
                     o["permissions"] = std::move(perms);
                     if (a.ed25519) {
                       o["keyType"] = "ED25519";
                     } else {
                       o["keyType"] = "HMAC_SHA256";
                       // Shown this once; the journal holds it sealed.
                       o["secretKey"] = keys_->OpenedSecret(a.subject.view(), a.secret.view());
                     }
                     p.Reply(200, json::serialize(o));
                   });
}

// GET accounts/{id}/ledger?fromSeq&limit: the account's ledger lines from
// the history, oldest first, in whole records (a record's lines share its
// seq): at most `limit` lines, except that a first record with more lines is
// given whole. fromSeq = the last line's seq + 1 continues a page.
void Gateway::Impl::AdminLedger(Ctx& c, std::string_view id_text) {
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
      x["bucket"] = l.bucket == engine::Bucket::kAvailable ? "AVAILABLE"
                    : l.bucket == engine::Bucket::kLocked  ? "LOCKED"
                                                           : "HELD";
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

void Gateway::Impl::AdminRevokeKey(Ctx& c, std::string_view key) {
  const std::optional<ApiKey> k = keys_->FindKey(key);
  json::object o;
  o["apiKey"] = key;
  o["revoked"] = true;
  if (k && k->revoked) return Ok(c, json::serialize(o));  // once is enough
  auto change = keys_->Revocation(key);
  if (!change.ok()) return Reply(c, ApiError{404, -1000, change.status().message()});
  SubmitAuthChange(c, "revoke_key", *change, [o](Pending& p, const engine::AuthChanged&) {
    p.Reply(200, json::serialize(o));
  });
}

void Gateway::Impl::AdminTransfer(Ctx& c, const json::object& body, bool deposit) {
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
  const std::optional<AssetId> asset = AssetNamed(*asset_name);
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
  // "<venue>:..." is the reference of a transfer from that venue: reserved.
  for (const transfer::VenueLink& v : options_.venues) {
    if (ref->starts_with(v.name + ":")) {
      return Reply(c, ApiError{400, -1130,
                               "Field 'ref': \"" + v.name +
                                   ":...\" is reserved for transfers from venue " + v.name + "."});
    }
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

void Gateway::Impl::AdminMarketStatus(Ctx& c, std::string_view symbol, const json::object& body) {
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
  } else if (status == "CLOSED") {
    st = MarketStatus::kClosed;
  } else {
    return Reply(c, ApiError{400, -1130,
                             "Field 'status' must be \"TRADING\", \"HALTED\", \"CANCEL_ONLY\" "
                             "or \"CLOSED\" (every open order of the market is canceled)."});
  }
  engine::Command cmd;
  cmd.body = engine::SetMarketStatus{m, st};
  Submit(c, "market_status", cmd, [this, m, st](Pending& p) {
    if (const engine::Rejected* r = FirstReject(p.events)) {
      return p.Fail(ApiError{400, -1130, std::string(engine::ToString(r->reason))});
    }
    json::object o;
    o["symbol"] = config_.markets[static_cast<std::size_t>(m)].symbol;
    o["status"] = std::string(engine::ToString(st));
    p.Reply(200, json::serialize(o));
  });
}

namespace {

// A decimal field of a listing: a string ("0.01"), or a JSON number.
std::optional<ApiError> DecimalField(const json::object& o, std::string_view k, std::string* out) {
  auto it = o.find(k);
  if (it != o.end()) {
    const json::value& v = it->value();
    if (v.is_string()) {
      *out = std::string(v.as_string());
      return std::nullopt;
    }
    if (v.is_int64() || v.is_uint64()) {
      *out = json::serialize(v);
      return std::nullopt;
    }
    if (v.is_double()) {
      *out = fmt::format("{}", v.as_double());
      return std::nullopt;
    }
  }
  return ApiError{400, -1102,
                  fmt::format("Field '{}' (a decimal, as a string: \"0.01\") is required.", k)};
}

std::optional<ApiError> IntField(const json::object& o, std::string_view k, int64_t* out) {
  auto it = o.find(k);
  if (it != o.end() && it->value().is_int64()) {
    *out = it->value().as_int64();
    return std::nullopt;
  }
  return ApiError{400, -1102, fmt::format("Field '{}' (an integer) is required.", k)};
}

std::optional<ApiError> StatusField(const json::object& o, MarketStatus* out) {
  auto it = o.find("status");
  if (it == o.end()) return std::nullopt;  // TRADING
  for (MarketStatus s :
       {MarketStatus::kTrading, MarketStatus::kHalted, MarketStatus::kCancelOnly}) {
    if (it->value().is_string() && it->value().as_string() == engine::ToString(s)) {
      *out = s;
      return std::nullopt;
    }
  }
  return ApiError{400, -1130, "Field 'status' must be \"TRADING\", \"HALTED\" or \"CANCEL_ONLY\"."};
}

}  // namespace

json::object Gateway::Impl::MarketObject(MarketId id) const {
  const engine::MarketSpec& m = config_.markets[Raw(id)];
  const int base_scale = config_.assets[Raw(m.base)].scale;
  const int quote_scale = config_.assets[Raw(m.quote)].scale;
  json::object o;
  o["symbol"] = m.symbol;
  o["marketId"] = Raw(id);
  o["base"] = config_.assets[Raw(m.base)].symbol;
  o["quote"] = config_.assets[Raw(m.quote)].symbol;
  o["tick_size"] = FormatDecimalShort(m.tick_units, quote_scale);
  o["step_size"] = FormatDecimalShort(m.lot_units, base_scale);
  o["min_qty"] = FormatDecimalShort(m.min_qty.value * m.lot_units, base_scale);
  o["max_qty"] = FormatDecimalShort(m.max_qty.value * m.lot_units, base_scale);
  o["max_price"] = FormatDecimalShort(m.max_price.value * m.tick_units, quote_scale);
  o["min_notional"] = FormatDecimalShort(m.min_notional.value, quote_scale);
  o["maker_fee_bps"] = m.maker_fee_bps;
  o["taker_fee_bps"] = m.taker_fee_bps;
  o["status"] = std::string(engine::ToString(m.status));
  return o;
}

// The answer to an added asset or market once it is durable and served; an
// engine refusal (the symbol taken meanwhile) as the checks here would have.
void Gateway::Impl::SubmitListing(Ctx& c, const char* kind, const engine::Command& cmd) {
  Submit(c, kind, cmd, [this](Pending& p) {
    if (const engine::Rejected* r = FirstReject(p.events)) {
      const bool taken = r->reason == engine::RejectReason::kSymbolTaken;
      return p.Fail(
          ApiError{taken ? 409 : 400, -1130,
                   taken ? "The symbol is taken." : std::string(engine::ToString(r->reason))});
    }
    for (const Event& e : p.events) {
      if (const auto* m = std::get_if<engine::MarketAdded>(&e.body)) {
        return p.Reply(200, json::serialize(MarketObject(m->market)));
      }
      if (const auto* a = std::get_if<engine::AssetAdded>(&e.body)) {
        json::object o;
        o["asset"] = std::string(a->symbol.view());
        o["assetId"] = Raw(a->asset);
        o["scale"] = a->scale;
        return p.Reply(200, json::serialize(o));
      }
    }
    p.Fail(ApiError{500, -1000, "The listing left no event."});
  });
}

// POST markets: the configuration file's [[markets]] fields, the same checks.
void Gateway::Impl::AdminAddMarket(Ctx& c, const json::object& body) {
  engine::MarketText t;
  const auto symbol = StringField(body, "symbol");
  const auto base = StringField(body, "base");
  const auto quote = StringField(body, "quote");
  if (!symbol || !base || !quote) {
    return Reply(
        c, ApiError{400, -1102, "Fields 'symbol', 'base' and 'quote' (strings) are required."});
  }
  t.symbol = *symbol;
  t.base = *base;
  t.quote = *quote;
  for (const auto& [key, out] :
       {std::pair<std::string_view, std::string*>{"tick_size", &t.tick_size},
        {"step_size", &t.step_size},
        {"min_qty", &t.min_qty},
        {"max_qty", &t.max_qty},
        {"max_price", &t.max_price},
        {"min_notional", &t.min_notional}}) {
    if (auto e = DecimalField(body, key, out)) return Reply(c, *e);
  }
  if (auto e = IntField(body, "maker_fee_bps", &t.maker_fee_bps)) return Reply(c, *e);
  if (auto e = IntField(body, "taker_fee_bps", &t.taker_fee_bps)) return Reply(c, *e);
  if (auto e = StatusField(body, &t.status)) return Reply(c, *e);
  auto spec = engine::MarketFromText(config_, t);
  if (!spec.ok()) {
    const bool taken =
        std::any_of(config_.markets.begin(), config_.markets.end(),
                    [&](const engine::MarketSpec& m) { return m.symbol == t.symbol; });
    return Reply(c, ApiError{taken ? 409 : 400, -1130, spec.status().message()});
  }
  engine::Command cmd;
  cmd.body = engine::AddMarketOf(*spec);
  SubmitListing(c, "add_market", cmd);
}

// POST assets: {"symbol", "scale"}, the configuration file's [[assets]] checks.
void Gateway::Impl::AdminAddAsset(Ctx& c, const json::object& body) {
  const auto symbol = StringField(body, "symbol");
  int64_t scale = 0;
  if (!symbol) return Reply(c, ApiError{400, -1102, "Field 'symbol' (a string) is required."});
  if (auto e = IntField(body, "scale", &scale)) return Reply(c, *e);
  engine::AssetSpec a;
  a.symbol = *symbol;
  if (scale < 0 || scale > 18) {
    return Reply(c, ApiError{400, -1130, fmt::format("scale: {} is outside 0..18", scale)});
  }
  a.scale = static_cast<int32_t>(scale);
  if (Status s = engine::ValidateNewAsset(config_, a); !s.ok()) {
    const bool taken =
        std::any_of(config_.assets.begin(), config_.assets.end(),
                    [&](const engine::AssetSpec& x) { return x.symbol == a.symbol; });
    return Reply(c, ApiError{taken ? 409 : 400, -1130, s.message()});
  }
  engine::Command cmd;
  cmd.body = engine::AddAssetOf(a);
  SubmitListing(c, "add_asset", cmd);
}

void Gateway::Impl::AdminMarkets(Ctx& c) {
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

}  // namespace mb::gateway
