// Loads the engine configuration (assets, markets, sizing) from a TOML file.
// The format — every table and key, with its default — is documented once,
// at the top of config/matchbook.toml (tests/config_keys.py fails when a key
// accepted here is missing there; docs/configuration.md explains the tables).
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
