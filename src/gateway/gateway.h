// The gateway: Matchbook's network face. It wires the Beast server
// (server.h) to the exchange pipeline (exchange/exchange.h) and the read side
// (marketdata/read_side.h):
//
//   io threads:  parse, authenticate (HMAC), rate-limit, dry-run checks
//                against the read side, then Exchange::Submit()
//                  ring full → 503 + Retry-After; never waits for the engine
//   engine thread (OnSequenced): ACK answers
//   journal thread (OnDone, on_durable): holds each durable command's answer
//                in the fan-out stage (fanout/stage.h) with its group's events
//   fan-out thread (mb-fanout, the stage's; the gateway is one of its
//                handlers): ReadSide::Apply() (snapshots swapped atomically),
//                the streams (streams.h), then the batch's RESULT/FULL
//                answers — so what an answer says is already visible to the
//                next request
//   history thread (with SetHistory): allOrders, myTrades, GET order of an
//                order that is not open, and the operator's ledger, from the
//                history (gateway/history.h; the app serves it from the
//                projection). Each request first waits until the history has
//                applied what the read side had applied when the request
//                arrived (at most 2 s, then 503), so whatever an answer or an
//                event showed is in the history.
//
// Routes: the Binance Spot REST subset (/api/v3/...), the WebSocket streams
// (streams.h), the WebSocket API (ws_api.h: each method answered by its REST
// twin's handler, through the same weight, authentication and order limits),
// the operator API (/admin/v1/..., loopback
// only unless allowed, guarded by the admin token) and, with a metrics
// registry, GET /metrics (Prometheus text; loopback only unless allowed; also
// on its own port with metrics_port). docs/api.md lists them. GET/HEAD of
// the web pages' paths (web_pages.h: "/", "/admin/" and their assets,
// embedded by src/web; the operator page loopback only unless admin_remote,
// and then remote clients over TLS)
// are answered before any route; docs/web.md.
//
// Metrics (docs/metrics.md): with GatewayOptions::metrics the gateway records
// the parse_auth, fanout and submit_to_response stages, HTTP answers by
// status, 503/429 refusals, orders/trades/cancels per market (counted on the
// fan-out thread from durable events), queue depths and the WebSocket
// figures. With GatewayOptions::flight_recorder the fan-out thread records
// one trace per command submitted (ingress, the exchange's stage times, the
// answer), and /admin/v1/flight-recorder lists and serves its dumps.
//
// Thread safety: Create/Wire/Start/Stop from one thread (the app's main).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "engine/market.h"
#include "exchange/exchange.h"
#include "fanout/stage.h"
#include "gateway/history.h"
#include "gateway/market_rules.h"
#include "gateway/rate_limit.h"
#include "gateway/server.h"
#include "gateway/streams.h"
#include "marketdata/read_side.h"
#include "transfer/dispatcher.h"

namespace mb::metrics {
class FlightRecorder;
class Registry;
}  // namespace mb::metrics

namespace mb::gateway {

struct GatewayOptions {
  ServerOptions server;
  RateLimitOptions key_limit;                                             // per API key
  RateLimitOptions ip_limit{.weight_per_minute = 12000, .burst = 12000};  // per IP
  OrderLimitOptions order_limit;  // new orders per account (Binance's ORDERS limits)
  // Each market's order types and conditional-order filters, by MarketId
  // (a market beyond the vector's end: MarketRules' defaults).
  std::vector<MarketRules> market_rules;
  StreamOptions streams;
  marketdata::ReadSideOptions read_side;
  // The operator API and page answer non-loopback peers — over TLS only,
  // unless admin_remote_plaintext (a trusted network; the admin token then
  // crosses it readable, and the start-up log says so).
  bool admin_remote = false;
  bool admin_remote_plaintext = false;
  // The venue's master key, which seals API keys' secrets (gateway/auth.h);
  // made at the first start when missing and no secret is sealed yet.
  // Empty: <data_dir>/master.key.
  std::filesystem::path master_key_file;
  uint32_t retry_after_s = 1;  // Retry-After on 503 (ring full, journal refusing)
  // Where the gateway registers its metrics and which GET /metrics exposes;
  // null: no metrics and no /metrics. Outlives the gateway.
  metrics::Registry* metrics = nullptr;
  bool metrics_remote = false;  // GET /metrics answers non-loopback peers
  uint16_t metrics_port = 0;    // also serve /metrics alone on server.host:port (0: off)
  // Gets one trace per submitted command, from the fan-out thread (its one
  // writer); null: none. Started and stopped by the owner; outlives Stop().
  metrics::FlightRecorder* flight_recorder = nullptr;
  // The recorder's settings, as /admin/v1/flight-recorder reports them.
  uint64_t flight_threshold_ns = 0;
  uint32_t flight_window_ms = 0;
  // The API's wall time: rate limits, the recvWindow check, serverTime and
  // tickers, the streams' clock, account and key creation times. Null: the
  // system clock (tests set a ManualClock). Outlives the gateway. Latency
  // stamps and waits stay on the steady clock.
  const Clock* clock = nullptr;
  // Addresses of this venue's replicas: from them, and only from them, the
  // client address a replica forwards (kClientAddressHeader,
  // gateway/server.h) is believed — for the per-IP limits and the
  // loopback-only checks. Empty: the header is ignored.
  std::vector<std::string> trusted_replicas;
  // Transfers between venues (docs/transfers.md): this venue's name (in its
  // deposit addresses), the other venues (their secrets check the calls they
  // make here) and how far a call's timestamp may be from this clock.
  std::string venue = "matchbook";
  std::vector<transfer::VenueLink> venues;
  uint32_t venue_max_skew_ms = 10'000;
  // POST /admin/v1/failover (docs/failover.md): a planned hand-over to the
  // standby, run on the io thread that took the call; its answer's JSON, or
  // why it could not. Null: answered 409 (no leadership: serve without
  // --nats).
  std::function<Result<std::string>()> failover;
};

// A replica's gateway (`matchbook replica`): no exchange behind it.
struct ReplicaOptions {
  // The primary's API, "http://host:port" or "https://host:port": signed and
  // API-key calls are forwarded there (gateway/forwarder.h). "": they are
  // answered 503.
  std::string primary;
  // https://: the CA file that checks the primary's certificate ("": the
  // system's CAs).
  std::string primary_ca;
  // GET /admin/v1/ready: true once the replica has caught up with the
  // stream. Called on io threads.
  std::function<bool()> ready;
  // "replica", or "standby" (`serve --standby`): /admin/v1/health's role,
  // and what a refused call says.
  std::string role = "replica";
};

class Gateway {
 public:
  // Opens the key store in data_dir (creating the admin token on first start).
  static Result<std::unique_ptr<Gateway>> Create(const engine::EngineConfig& config,
                                                 const std::filesystem::path& data_dir,
                                                 GatewayOptions options);
  ~Gateway();  // Stop()s
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // The configuration with the assets and markets added at run time: learned
  // from the recovered state (Wire's on_recovered, ReplicaBootstrap), then
  // from each durable batch before anything else hears of it. Any thread may
  // read it without a lock (its lists only grow; engine/listing.h); what
  // reads it after a durable batch's handlers ran finds every market the
  // batch names. Lives as long as the gateway.
  const engine::EngineConfig& config() const;

  // Sets the exchange's on_recovered listener to this gateway's read side,
  // its on_durable listener to `stage`'s, and adds the gateway to the
  // stage's handlers; answers to durable commands travel through `stage`.
  // REQUIRES: before Exchange::Open(*options) and stage->Start(); `stage`
  // outlives Stop() and is stopped before it.
  void Wire(exchange::ExchangeOptions* options, fanout::Stage* stage);
  // Answers the history endpoints from `history` instead of the bounded read
  // side. Whoever owns it keeps it following the journal; the gateway only
  // reads. REQUIRES: before Start(); outlives Stop().
  void SetHistory(History* history);
  // The links to other venues (withdrawals to them are refused without one;
  // GET /admin/v1/venues reports them). REQUIRES: before Start(); outlives
  // Stop().
  void SetDispatcher(transfer::Dispatcher* dispatcher);
  // Adds `name` to GET /admin/v1/health: `json` returns a JSON object's text
  // (called on an io thread at each request, so it must be thread-safe).
  // REQUIRES: before Start().
  void AddHealthSection(std::string name, std::function<std::string()> json);
  // Starts the history thread and the server.
  // REQUIRES: exchange opened with Wire()d options and outlives Stop().
  Status Start(exchange::Exchange* exchange);

  // --- a read replica: instead of Wire() and Start() ---
  // Serves the public market data and streams from the read side that
  // ReplicaBootstrap/ReplicaApply feed, forwards signed and API-key calls to
  // the primary with their bytes unchanged, refuses the WebSocket API's
  // private methods and every operator call but health and readiness.
  Status StartReplica(ReplicaOptions options);
  // The replica's feed, from one thread (the writer of the read side): the
  // state at a sequence (again after any resynchronisation), then every
  // later record's events in order, in batches of any size; Tick at least
  // every 10 ms (the throttled streams' clock).
  void ReplicaBootstrap(const engine::EngineImage& image);
  // Once the state is recovered (ExchangeOptions::on_recovered, after the
  // gateway's own), before any batch: the markets' history from the history
  // store, and its open orders (marketdata::ReadSide::SeedHistory).
  void SeedMarketHistory(std::span<const marketdata::MarketHistory> markets,
                         std::span<const marketdata::OrderRecord> open_orders);
  const marketdata::ReadSideOptions& read_side_options() const;
  void ReplicaApply(std::span<const engine::Event> events);
  void ReplicaTick();
  uint64_t replica_applied_seq() const noexcept;
  // Stops taking requests and closes every connection (before Exchange::Close()).
  void StopServer();
  // Stops the history thread. REQUIRES: after Exchange::Close() and the
  // fan-out stage's Stop() (every durable batch and answer delivered).
  void Stop();

  uint16_t port() const noexcept;
  // The API port speaks TLS (server.tls_cert_file).
  bool tls() const noexcept;
  // Reads the TLS certificate and key again (SIGHUP) for the API port and
  // the metrics port; on an error both keep the pair they have.
  Status ReloadTls();
  // The metrics-only port (after Start() with metrics_port; 0: none).
  uint16_t metrics_port() const noexcept;
  std::filesystem::path admin_token_path() const;

 private:
  class Impl;
  explicit Gateway(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mb::gateway
