// Loads the engine configuration (assets, markets, sizing) from a TOML file.
// The format is documented at the top of config/matchbook.toml; in short:
//
//   [engine]     max_accounts, fee_account, expected_open_orders, client_id_memory,
//                client_order_id (optional: "binance" (default) | "idempotent")
//   [[assets]]   symbol, scale                       (AssetId = position)
//   [[markets]]  symbol, base, quote, tick_size, step_size, min_qty, max_qty,
//                max_price, min_notional, maker_fee_bps, taker_fee_bps,
//                status (optional, default "TRADING")  (MarketId = position)
//
// and the optional runtime tables (every key optional, defaults below):
//
//   [server]     data_dir ("data")
//   [journal]    fsync ("fsync" | "interval:<ms>" | "none"), segment_mb (128)
//   [snapshots]  every_events (10000000; 0 = never), every_seconds (3600; 0 = never),
//                keep (3), zstd_level (1), on_shutdown (true)
//   [threads]    inbound_capacity (65536, a power of two), max_batch (4096)
//   [threads.engine], [threads.journal]
//                wait ("back-off" | "yield" | "busy-spin"), spins (200), yields (20),
//                park_us (1000), cpu (-1: unpinned), realtime (false), rt_priority (10)
//   [gateway]    host ("127.0.0.1"), port (8080), io_threads (2), max_connections (10000),
//                max_header_bytes (16384), max_body_bytes (1048576), read_timeout_ms (10000),
//                idle_timeout_ms (120000), ws_max_message_bytes (65536),
//                ws_send_queue_messages (4096), ws_send_queue_bytes (8388608),
//                ws_write_interval_us (0; WebSocket write rounds per io thread at least
//                this far apart),
//                weight_per_minute (6000, per API key; 0 = unlimited),
//                ip_weight_per_minute (12000), admin_remote (false), recent_trades (1000),
//                history_orders (1000), history_trades (1000), retry_after_s (1)
//   [history]    cache_mb (64: the history store's block cache; the store is
//                <data_dir>/history), write_buffer_kb (16384: one memtable, at least 64)
//   [projection] backend ("off" | "sqlite" | "postgres": a SQL read model beside the
//                history store; off by default), path (sqlite file; "" =
//   <data_dir>/projection.sqlite),
//                url (postgres connection URL; "" = $MATCHBOOK_PG_URL), batch_events (1000),
//                batch_wait_ms (50), catchup_batch_events (20000), wal_max_mb (64: the
//                SQLite write-ahead log's ceiling, at least 4), cache_mb (64: SQLite's
//                page cache)
//   venue        (top-level key) the instance's name ("matchbook"): 1-32 of [A-Za-z0-9_-]
//   [bus]        nats ("": no bus; a URL or a comma-separated list of a cluster's),
//                stream ("MATCHBOOK_<venue>"), subject ("mb.<venue>.journal"),
//                replicas (1; 3 for a cluster), max_mb (32768) and max_age_hours (168):
//                the stream's limits, message_kb (256), linger_us (2000: a message not
//                full waits this long for more records), timeout_ms (2000)
//   [[venues]]   name, url ("http://HOST:PORT"), secret (>= 16 characters): the other
//                venues this one sends transfers to and takes them from
//   [transfers]  dispatch ("pipelined" | "sequential"), window (1024: transfers in
//                flight per venue), batch (128: per call), retry_max_ms (5000),
//                timeout_ms (5000), max_clock_skew_ms (10000: a venue call's timestamp)
//   [[assets]]   also, optional: withdraw_fee ("0"), withdraw_min ("0"),
//                deposit_enabled (true), withdraw_enabled (true)
//   [[markets]]  also, optional: order_types (every type: ["LIMIT",
//                "LIMIT_MAKER", "MARKET", "STOP_LOSS", "STOP_LOSS_LIMIT",
//                "TAKE_PROFIT", "TAKE_PROFIT_LIMIT"]), trailing_delta (an inline
//                table {min_above, max_above, min_below, max_below}: basis points
//                1..9999, default 10..2000 both ways), max_num_algo_orders (5):
//                the gateway's MarketRules (runtime.gateway.market_rules, by
//                MarketId), not part of the engine's configuration or its hash
//   [metrics]    remote (false: /metrics answers loopback peers only), port (0: no
//                separate metrics port), flight_threshold_ms (50; 0 = no dumps),
//                flight_window_ms (5000), flight_capacity (65536, a power of two),
//                flight_keep (20), flight_max_age_hours (0 = no age limit)
//
// Decimals are TOML strings parsed exactly (common/decimal.h); TOML floats are
// refused. Every key is required except markets.status and
// engine.client_order_id, and unknown keys are errors, so a typo never
// silently becomes a default. The result has passed
// EngineConfig::Validate(), so its derived fields are filled.
//
// Errors are kInvalidArgument (kNotFound / kIoError when the file cannot be
// read) with a message "<file>:<line>: <field>: <what is wrong>", e.g.
//   config/matchbook.toml:23: markets.BTCUSDT.tick_size: 0.001 has more decimal
//   places than USDT's scale 2
// where <line> is the line of the offending key (or of its table when the key
// is missing, or of the syntax error). Errors about the whole file (a missing
// [engine] table, no [[assets]]) have no line: "<file>: <field>: ...".
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "bus/nats_security.h"
#include "common/status.h"
#include "concurrency/thread.h"
#include "engine/market.h"
#include "exchange/exchange.h"
#include "gateway/gateway.h"
#include "journal/archive.h"
#include "journal/writer.h"
#include "projection/store.h"
#include "transfer/dispatcher.h"

namespace mb::app {

// How the exchange runs (not part of the engine's state; may change between runs).
// [projection]: where the history lives and how the projector batches.
struct ProjectionConfig {
  // backend "off" by default: the history API reads the history store
  // ([history]); "sqlite" or "postgres" keep a SQL read model beside it.
  projection::StoreOptions store = [] {
    projection::StoreOptions o;
    o.backend = "off";
    return o;
  }();
  uint32_t batch_events = 1000;
  uint32_t batch_wait_ms = 50;
  uint32_t catchup_batch_events = 20000;  // a batch when the projector is behind
};

// [history]: the history store (RocksDB in <data_dir>/history) that the
// history API and the markets' trades and candles are served from.
struct HistoryConfig {
  uint32_t cache_mb = 64;            // its block cache
  uint32_t write_buffer_kb = 16384;  // one memtable (what a flush writes at once)
};

// [metrics]: the /metrics endpoint and the flight recorder (docs/metrics.md).
struct MetricsConfig {
  bool remote = false;                  // GET /metrics answers non-loopback peers
  uint16_t port = 0;                    // a second listener serving /metrics only (0: none)
  uint32_t flight_threshold_ms = 50;    // a command slower than this dumps (0: never)
  uint32_t flight_window_ms = 5000;     // history a dump covers
  uint32_t flight_capacity = 1u << 16;  // traces kept (a power of two)
  uint32_t flight_keep = 20;            // dump files kept
  uint32_t flight_max_age_hours = 0;    // dump files older are deleted (0: no age limit)
};

// [bus]: the journal published to a NATS JetStream stream (docs/bus.md).
struct BusConfig {
  std::string nats;     // "": no bus
  std::string stream;   // "": MATCHBOOK_<venue>
  std::string subject;  // "": mb.<venue>.journal
  uint32_t replicas = 1;
  // [bus] replicas given: an existing stream takes that count, fewer
  // included. Otherwise a stream with more replicas keeps them.
  bool replicas_set = false;
  uint64_t max_mb = 32768;
  uint32_t max_age_hours = 168;
  uint32_t message_kb = 256;
  uint32_t linger_us = 2000;
  uint32_t timeout_ms = 2000;
  // TLS and the credential of every NATS connection (docs/security.md).
  bus::NatsSecurity security;
  // The venue's Ed25519 bus key (PEM): signs every journal message and
  // snapshot manifest. "": <data_dir>/bus.key, made at a primary's first
  // start; a standby is given the primary's.
  std::string signing_key_file;
  // The public bus key a replica verifies with: 64 hex characters or a file
  // (<primary data_dir>/bus.key.pub). A standby takes its signing key's.
  std::string verify_key;
};

// [replication]: a primary and its hot standby (docs/failover.md).
enum class AckPolicy : uint8_t {
  kLocal,       // answered once the local journal holds the command
  kReplicated,  // and once a quorum of the JetStream cluster holds its record
};
std::string_view ToString(AckPolicy ack) noexcept;
Result<AckPolicy> ParseAckPolicy(std::string_view text);  // "local" | "replicated"

struct ReplicationConfig {
  // A primary with a bus holds the leadership lease (docs/failover.md) when
  // this is set: by a [replication] table, --ack or --standby. Without it
  // the bus is only a feed: NATS down is lag, never a refused order, and no
  // standby takes over from this primary.
  bool leadership = false;
  AckPolicy ack = AckPolicy::kLocal;
  bool standby = false;          // start following the primary (serve --standby)
  uint32_t lease_ttl_ms = 2000;  // the leadership lease's TTL (its KV bucket's)
};

// [[venues]] and [transfers]: transfers to and from other venues
// (docs/transfers.md).
struct TransferConfig {
  std::vector<transfer::VenueLink> venues;
  transfer::DispatchMode dispatch = transfer::DispatchMode::kPipelined;
  uint32_t window = 1024;
  uint32_t batch = 128;
  uint32_t retry_max_ms = 5000;
  uint32_t timeout_ms = 5000;
  uint32_t max_clock_skew_ms = 10'000;
};

struct RuntimeConfig {
  std::string venue = "matchbook";
  std::string data_dir = "data";
  journal::JournalOptions journal;
  // [journal] retention / archive_dir (journal/archive.h): what serve does
  // with segments nobody needs any more; archive_dir empty: <data_dir>/archive.
  journal::Retention retention = journal::Retention::kKeep;
  std::string archive_dir;
  exchange::SnapshotOptions snapshots;
  uint32_t inbound_capacity = 1u << 16;
  uint32_t max_batch = 4096;
  concurrency::StageConfig engine_stage{"mb-engine", {}, -1, false, 10};
  concurrency::StageConfig journal_stage{"mb-journal", {}, -1, false, 10};
  gateway::GatewayOptions gateway;  // [gateway]: listen address, limits, history sizes
  ProjectionConfig projection;
  HistoryConfig history;
  MetricsConfig metrics;
  BusConfig bus;
  ReplicationConfig replication;
  TransferConfig transfers;
  // [security] master_key_file: the key that seals API keys' secrets
  // (gateway/sealed_secret.h); empty: <data_dir>/master.key.
  std::string master_key_file;
};

struct Config {
  engine::EngineConfig engine;
  RuntimeConfig runtime;
};

Result<Config> LoadFullConfig(const std::string& path);

// "10.0.0.5, 10.0.0.6" (gateway.trusted_replicas, --trusted-replicas) → the
// addresses, each as the server prints a peer's; an item that is not an IP
// address is an error naming it.
Result<std::vector<std::string>> ParseAddressList(std::string_view list);

// The API's address as the start-up lines print it: "http://127.0.0.1:8080",
// "https://..." with TLS; ws: the WebSocket scheme (ws, wss) instead.
std::string ApiBase(const gateway::ServerOptions& server, uint16_t port, bool ws = false);

// A warning when the API listens beyond loopback without TLS ("" otherwise).
std::string PlaintextWarning(const gateway::ServerOptions& server);
// The master key's file: [security] master_key_file, or <data_dir>/master.key.
std::filesystem::path MasterKeyFile(const Config& config);

// The pipeline's options for `config` (log: stderr).
exchange::ExchangeOptions ExchangeOptionsFrom(const Config& config);
Result<Config> ParseFullConfig(std::string_view toml_text, std::string_view source_name);

// Reads and parses the file at `path`; messages name it as given.
Result<engine::EngineConfig> LoadConfig(const std::string& path);

// Parses TOML text; `source_name` names it in messages (usually its path).
Result<engine::EngineConfig> ParseConfig(std::string_view toml_text, std::string_view source_name);

}  // namespace mb::app
