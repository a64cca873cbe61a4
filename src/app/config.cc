#include "app/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <boost/asio/ip/address.hpp>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "bus/publisher.h"
#include "common/checked.h"
#include "common/decimal.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/market.h"
#include "engine/types.h"
#include "transfer/protocol.h"

namespace mb::app {
namespace {

using engine::AssetSpec;
using engine::EngineConfig;
using engine::MarketSpec;
using engine::MarketStatus;

constexpr std::string_view kTopKeys[] = {
    "engine",  "assets",    "markets",     "server",     "journal",  "snapshots",
    "threads", "gateway",   "venue",       "projection", "metrics",  "bus",
    "venues",  "transfers", "replication", "tls",        "security", "history"};
constexpr std::string_view kHistoryKeys[] = {"cache_mb", "write_buffer_kb"};
constexpr std::string_view kSecurityKeys[] = {"master_key_file"};
constexpr std::string_view kTlsKeys[] = {"cert_file", "key_file"};
constexpr std::string_view kReplicationKeys[] = {"ack", "standby", "lease_ttl_ms"};
constexpr std::string_view kBusKeys[] = {
    "nats",          "stream",       "subject",          "replicas",       "max_mb",
    "max_age_hours", "message_kb",   "linger_us",        "timeout_ms",     "tls_ca_file",
    "tls_cert_file", "tls_key_file", "creds_file",       "nkey_seed_file", "user",
    "password_file", "token_file",   "signing_key_file", "verify_key"};
constexpr std::string_view kMetricsKeys[] = {
    "remote",          "port",        "flight_threshold_ms", "flight_window_ms",
    "flight_capacity", "flight_keep", "flight_max_age_hours"};
constexpr std::string_view kProjectionKeys[] = {
    "backend",    "path",    "url", "batch_events", "batch_wait_ms", "catchup_batch_events",
    "wal_max_mb", "cache_mb"};
constexpr std::string_view kGatewayKeys[] = {"host",
                                             "port",
                                             "io_threads",
                                             "max_connections",
                                             "max_connections_per_ip",
                                             "max_header_bytes",
                                             "max_body_bytes",
                                             "read_timeout_ms",
                                             "idle_timeout_ms",
                                             "ws_max_message_bytes",
                                             "ws_send_queue_messages",
                                             "ws_send_queue_bytes",
                                             "ws_slow_close_grace_ms",
                                             "ws_write_interval_us",
                                             "weight_per_minute",
                                             "ip_weight_per_minute",
                                             "orders_per_10s",
                                             "orders_per_day",
                                             "admin_remote",
                                             "admin_remote_plaintext",
                                             "trusted_replicas",
                                             "recent_trades",
                                             "klines_per_interval",
                                             "history_orders",
                                             "history_trades",
                                             "retry_after_s"};
constexpr std::string_view kServerKeys[] = {"data_dir"};
constexpr std::string_view kJournalKeys[] = {"fsync", "segment_mb", "retention", "archive_dir"};
constexpr std::string_view kSnapshotKeys[] = {"every_events", "every_seconds", "keep", "zstd_level",
                                              "on_shutdown"};
constexpr std::string_view kThreadsKeys[] = {"inbound_capacity", "max_batch", "engine", "journal"};
constexpr std::string_view kStageKeys[] = {"wait", "spins",    "yields",     "park_us",
                                           "cpu",  "realtime", "rt_priority"};
constexpr std::string_view kEngineKeys[] = {"max_accounts", "fee_account", "expected_open_orders",
                                            "client_id_memory", "client_order_id"};
constexpr std::string_view kAssetKeys[] = {"symbol",       "scale",           "withdraw_fee",
                                           "withdraw_min", "deposit_enabled", "withdraw_enabled"};
constexpr std::string_view kVenueKeys[] = {"name", "url", "secret", "ca_file"};
constexpr std::string_view kTransferKeys[] = {"dispatch",     "window",     "batch",
                                              "retry_max_ms", "timeout_ms", "max_clock_skew_ms"};
constexpr std::string_view kMarketKeys[] = {"symbol",
                                            "base",
                                            "quote",
                                            "tick_size",
                                            "step_size",
                                            "min_qty",
                                            "max_qty",
                                            "max_price",
                                            "min_notional",
                                            "maker_fee_bps",
                                            "taker_fee_bps",
                                            "status",
                                            "order_types",
                                            "trailing_delta",
                                            "max_num_algo_orders",
                                            "iceberg_parts",
                                            "max_num_iceberg_orders"};
constexpr std::string_view kTrailingDeltaKeys[] = {"min_above", "max_above", "min_below",
                                                   "max_below"};
constexpr MarketStatus kStatuses[] = {MarketStatus::kTrading, MarketStatus::kHalted,
                                      MarketStatus::kCancelOnly};

constexpr std::size_t kMaxItems = 65534;  // per kind; ids are uint16
constexpr int64_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

std::string_view TypeName(toml::node_type t) {
  switch (t) {
    case toml::node_type::none:
      return "nothing";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
  }
  return "an unknown type";
}

std::string Join(std::span<const std::string_view> items) {
  std::string out;
  for (std::string_view s : items) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

std::string Dot(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

// "markets.BTCUSDT", or "markets[2]" while the item has no usable symbol.
std::string ItemPath(std::string_view kind, std::size_t index, std::string_view symbol) {
  return symbol.empty() ? fmt::format("{}[{}]", kind, index) : fmt::format("{}.{}", kind, symbol);
}

std::string_view SymbolOf(const toml::table& t) {
  const toml::node* n = t.get("symbol");
  const auto* s = n != nullptr ? n->as_string() : nullptr;
  return s != nullptr ? std::string_view(s->get()) : std::string_view();
}

// Field names of engine::EngineConfig::Validate() messages -> configuration keys.
std::string_view ConfigKey(std::string_view kind, std::string_view field) {
  if (kind == "markets") {
    if (field == "tick_units") return "tick_size";
    if (field == "lot_units" || field == "notional_per_tick_lot") return "step_size";
  }
  return field;
}

int64_t Pow10(int scale) {
  int64_t p = 1;
  for (int k = 0; k < scale; ++k) p *= 10;
  return p;
}

struct AssetRef {
  AssetId id{};
  uint32_t line = 0;
};

class Loader {
 public:
  explicit Loader(std::string_view source) : source_(source) {}

  Result<Config> Load(std::string_view text) {
    toml::table root;
    try {
      root = toml::parse(text, std::string_view(source_));
    } catch (const toml::parse_error& e) {
      return InvalidArgument(fmt::format("{}:{}: syntax error at column {}: {}", source_,
                                         e.source().begin.line, e.source().begin.column,
                                         e.description()));
    }
    EngineConfig config;
    MB_RETURN_IF_ERROR(CheckKeys(root, "", kTopKeys));
    MB_RETURN_IF_ERROR(ReadEngine(root, &config));
    MB_RETURN_IF_ERROR(ReadAssets(root, &config));
    MB_RETURN_IF_ERROR(ReadMarkets(root, &config));
    if (Status s = config.Validate(); !s.ok()) return Locate(s, root, config);
    Config full;
    full.engine = std::move(config);
    MB_RETURN_IF_ERROR(ReadRuntime(root, &full.runtime));
    return full;
  }

 private:
  Status At(const toml::source_region& where, std::string_view path,
            std::string_view detail) const {
    return InvalidArgument(fmt::format("{}:{}: {}: {}", source_, where.begin.line, path, detail));
  }
  Status At(const toml::node& node, std::string_view path, std::string_view detail) const {
    return At(node.source(), path, detail);
  }
  Status NoLine(std::string_view path, std::string_view detail) const {
    return InvalidArgument(fmt::format("{}: {}: {}", source_, path, detail));
  }

  // Runs before the required keys are read, so that a typo is reported as
  // itself rather than as the key it was meant to be.
  Status CheckKeys(const toml::table& t, std::string_view path,
                   std::span<const std::string_view> allowed) const {
    for (auto&& [key, node] : t) {
      bool known = false;
      for (std::string_view k : allowed) known = known || k == key.str();
      if (!known) {
        return At(key.source(), Dot(path, key.str()),
                  fmt::format("unknown key (expected {})", Join(allowed)));
      }
    }
    return Status::Ok();
  }

  Status Get(const toml::table& t, std::string_view path, std::string_view key,
             const toml::node** out) const {
    *out = t.get(key);
    if (*out == nullptr) return At(t, Dot(path, key), "missing required key");
    return Status::Ok();
  }

  Status GetInt(const toml::table& t, std::string_view path, std::string_view key, int64_t lo,
                int64_t hi, int64_t* out) const {
    const toml::node* n = nullptr;
    MB_RETURN_IF_ERROR(Get(t, path, key, &n));
    const auto* v = n->as_integer();
    if (v == nullptr) {
      std::string hint = n->is_string() ? " (write it without quotes)" : "";
      return At(*n, Dot(path, key),
                fmt::format("must be an integer, got {}{}", TypeName(n->type()), hint));
    }
    if (v->get() < lo || v->get() > hi) {
      return At(*n, Dot(path, key), fmt::format("{} is outside {}..{}", v->get(), lo, hi));
    }
    *out = v->get();
    return Status::Ok();
  }

  Status GetString(const toml::table& t, std::string_view path, std::string_view key,
                   std::string* out, const toml::node** where) const {
    MB_RETURN_IF_ERROR(Get(t, path, key, where));
    const auto* v = (*where)->as_string();
    if (v == nullptr) {
      return At(**where, Dot(path, key),
                fmt::format("must be a string, got {}", TypeName((*where)->type())));
    }
    *out = v->get();
    return Status::Ok();
  }

  // A decimal is a TOML string: a TOML float has already lost exactness, and
  // an integer is refused too so that every decimal in the file looks alike.
  Status GetDecimalText(const toml::table& t, std::string_view path, std::string_view key,
                        std::string* out, const toml::node** where) const {
    MB_RETURN_IF_ERROR(Get(t, path, key, where));
    const toml::node& n = **where;
    if (const auto* v = n.as_string()) {
      *out = v->get();
      return Status::Ok();
    }
    if (n.is_floating_point()) {
      return At(
          n, Dot(path, key),
          fmt::format("a TOML float is not exact; quote the number, e.g. {} = \"0.01\"", key));
    }
    if (const auto* v = n.as_integer()) {
      return At(n, Dot(path, key),
                fmt::format("decimals are strings; quote the number: {} = \"{}\"", key, v->get()));
    }
    return At(n, Dot(path, key),
              fmt::format("must be a decimal string like \"0.01\", got {}", TypeName(n.type())));
  }

  // The text as units of 10^-scale of `asset`.
  Status ToUnits(const toml::node& where, std::string_view path, const std::string& text,
                 const AssetSpec& asset, int64_t* out) const {
    const DecimalError e = TryParseDecimal(text, asset.scale, /*allow_negative=*/false, out);
    if (e == DecimalError::kOk) return Status::Ok();
    if (e == DecimalError::kTooManyDecimals) {
      return At(where, path,
                fmt::format("{} has more decimal places than {}'s scale {}", text, asset.symbol,
                            asset.scale));
    }
    Result<int64_t> r = ParseDecimal(text, asset.scale);
    return At(where, path, r.status().message());
  }

  // The text as a whole number of steps of `step_units`.
  Status ToSteps(const toml::node& where, std::string_view path, const std::string& text,
                 const AssetSpec& asset, int64_t step_units, std::string_view step_key,
                 int64_t* out) const {
    int64_t units = 0;
    MB_RETURN_IF_ERROR(ToUnits(where, path, text, asset, &units));
    if (units % step_units != 0) {
      return At(where, path,
                fmt::format("{} is not a multiple of {} {}", text, step_key,
                            FormatDecimalShort(step_units, asset.scale)));
    }
    *out = units / step_units;
    return Status::Ok();
  }

  // A required, non-empty array of tables: [[assets]] or [[markets]].
  Status GetTableArray(const toml::table& root, std::string_view key,
                       const toml::array** out) const {
    const toml::node* n = root.get(key);
    if (n == nullptr) {
      return NoLine(key, fmt::format("missing; define at least one [[{}]] table", key));
    }
    *out = n->as_array();
    if (*out == nullptr) {
      return At(
          *n, key,
          fmt::format("must be an array of tables ([[{}]]), got {}", key, TypeName(n->type())));
    }
    if ((*out)->empty()) return At(*n, key, fmt::format("define at least one [[{}]] table", key));
    if (!(*out)->is_array_of_tables()) {
      return At(
          *n, key,
          fmt::format("must be an array of tables ([[{}]]), got an array of other values", key));
    }
    // Ids are uint16 (see EngineConfig::Validate); refuse before they would wrap.
    if ((*out)->size() > kMaxItems) {
      return At(
          *n, key,
          fmt::format("{} entries do not fit a uint16 id (at most {})", (*out)->size(), kMaxItems));
    }
    return Status::Ok();
  }

  // An optional table: nullptr when absent; an error when it is not a table.
  Status OptionalTable(const toml::table& parent, std::string_view path, std::string_view key,
                       std::span<const std::string_view> allowed, const toml::table** out) const {
    *out = nullptr;
    const toml::node* n = parent.get(key);
    if (n == nullptr) return Status::Ok();
    *out = n->as_table();
    if (*out == nullptr) {
      return At(*n, Dot(path, key), fmt::format("must be a table, got {}", TypeName(n->type())));
    }
    return CheckKeys(**out, Dot(path, key), allowed);
  }

  template <class T>
  Status OptionalInt(const toml::table* t, std::string_view path, std::string_view key, int64_t lo,
                     int64_t hi, T* out) const {
    if (t == nullptr || t->get(key) == nullptr) return Status::Ok();
    int64_t v = 0;
    MB_RETURN_IF_ERROR(GetInt(*t, path, key, lo, hi, &v));
    *out = static_cast<T>(v);
    return Status::Ok();
  }

  Status OptionalBool(const toml::table* t, std::string_view path, std::string_view key,
                      bool* out) const {
    if (t == nullptr || t->get(key) == nullptr) return Status::Ok();
    const toml::node& n = *t->get(key);
    const auto* v = n.as_boolean();
    if (v == nullptr) {
      return At(n, Dot(path, key),
                fmt::format("must be true or false, got {}", TypeName(n.type())));
    }
    *out = v->get();
    return Status::Ok();
  }

  Status OptionalString(const toml::table* t, std::string_view path, std::string_view key,
                        std::string* out, const toml::node** where) const {
    *where = nullptr;
    if (t == nullptr || t->get(key) == nullptr) return Status::Ok();
    return GetString(*t, path, key, out, where);
  }

  Status ReadStage(const toml::table* threads, std::string_view name,
                   concurrency::StageConfig* stage) const {
    const toml::table* t = nullptr;
    if (threads != nullptr) {
      MB_RETURN_IF_ERROR(OptionalTable(*threads, "threads", name, kStageKeys, &t));
    }
    const std::string path = Dot("threads", name);
    std::string wait;
    const toml::node* where = nullptr;
    MB_RETURN_IF_ERROR(OptionalString(t, path, "wait", &wait, &where));
    if (where != nullptr) {
      auto kind = concurrency::ParseWaitKind(wait);
      if (!kind.ok()) return At(*where, Dot(path, "wait"), kind.status().message());
      stage->wait.kind = *kind;
    }
    MB_RETURN_IF_ERROR(OptionalInt(t, path, "spins", 0, 1'000'000'000, &stage->wait.spins));
    MB_RETURN_IF_ERROR(OptionalInt(t, path, "yields", 0, 1'000'000'000, &stage->wait.yields));
    MB_RETURN_IF_ERROR(OptionalInt(t, path, "park_us", 1, 1'000'000, &stage->wait.park_us));
    MB_RETURN_IF_ERROR(OptionalInt(t, path, "cpu", -1, 4095, &stage->cpu));
    MB_RETURN_IF_ERROR(OptionalBool(t, path, "realtime", &stage->realtime));
    MB_RETURN_IF_ERROR(OptionalInt(t, path, "rt_priority", 1, 99, &stage->rt_priority));
    return Status::Ok();
  }

  Status ReadRuntime(const toml::table& root, RuntimeConfig* r) const {
    const toml::table* t = nullptr;
    const toml::node* where = nullptr;
    MB_RETURN_IF_ERROR(OptionalTable(root, "", "server", kServerKeys, &t));
    MB_RETURN_IF_ERROR(OptionalString(t, "server", "data_dir", &r->data_dir, &where));
    if (where != nullptr && r->data_dir.empty()) {
      return At(*where, "server.data_dir", "must not be empty");
    }

    MB_RETURN_IF_ERROR(OptionalTable(root, "", "journal", kJournalKeys, &t));
    std::string fsync;
    MB_RETURN_IF_ERROR(OptionalString(t, "journal", "fsync", &fsync, &where));
    if (where != nullptr) {
      if (Status s = journal::ParseFsyncPolicy(fsync, &r->journal); !s.ok()) {
        return At(*where, "journal.fsync", s.message());
      }
    }
    uint64_t segment_mb = r->journal.segment_bytes >> 20;
    MB_RETURN_IF_ERROR(OptionalInt(t, "journal", "segment_mb", 1, 65536, &segment_mb));
    r->journal.segment_bytes = segment_mb << 20;
    std::string retention;
    MB_RETURN_IF_ERROR(OptionalString(t, "journal", "retention", &retention, &where));
    if (where != nullptr) {
      auto parsed = journal::ParseRetention(retention);
      if (!parsed.ok()) return At(*where, "journal.retention", parsed.status().message());
      r->retention = *parsed;
    }
    MB_RETURN_IF_ERROR(OptionalString(t, "journal", "archive_dir", &r->archive_dir, &where));

    MB_RETURN_IF_ERROR(OptionalTable(root, "", "snapshots", kSnapshotKeys, &t));
    MB_RETURN_IF_ERROR(OptionalInt(t, "snapshots", "every_events", 0,
                                   std::numeric_limits<int64_t>::max(),
                                   &r->snapshots.every_events));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "snapshots", "every_seconds", 0, kU32Max, &r->snapshots.every_seconds));
    MB_RETURN_IF_ERROR(OptionalInt(t, "snapshots", "keep", 1, 1000, &r->snapshots.keep));
    MB_RETURN_IF_ERROR(OptionalInt(t, "snapshots", "zstd_level", 1, 19, &r->snapshots.zstd_level));
    MB_RETURN_IF_ERROR(OptionalBool(t, "snapshots", "on_shutdown", &r->snapshots.on_shutdown));

    MB_RETURN_IF_ERROR(OptionalTable(root, "", "threads", kThreadsKeys, &t));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "threads", "inbound_capacity", 2, 1 << 26, &r->inbound_capacity));
    if ((r->inbound_capacity & (r->inbound_capacity - 1)) != 0) {
      return At(*t->get("inbound_capacity"), "threads.inbound_capacity",
                fmt::format("{} is not a power of two", r->inbound_capacity));
    }
    MB_RETURN_IF_ERROR(OptionalInt(t, "threads", "max_batch", 1, 1 << 20, &r->max_batch));
    MB_RETURN_IF_ERROR(ReadStage(t, "engine", &r->engine_stage));
    MB_RETURN_IF_ERROR(ReadStage(t, "journal", &r->journal_stage));
    MB_RETURN_IF_ERROR(ReadGateway(root, &r->gateway));
    MB_RETURN_IF_ERROR(ReadTls(root, &r->gateway.server));
    MB_RETURN_IF_ERROR(ReadMarketRules(root, &r->gateway.market_rules));
    MB_RETURN_IF_ERROR(ReadMetrics(root, &r->metrics));
    MB_RETURN_IF_ERROR(ReadBus(root, r));
    MB_RETURN_IF_ERROR(ReadReplication(root, &r->replication));
    MB_RETURN_IF_ERROR(ReadTransfers(root, r));
    {
      const toml::table* sec = nullptr;
      const toml::node* at = nullptr;
      MB_RETURN_IF_ERROR(OptionalTable(root, "", "security", kSecurityKeys, &sec));
      MB_RETURN_IF_ERROR(
          OptionalString(sec, "security", "master_key_file", &r->master_key_file, &at));
    }
    MB_RETURN_IF_ERROR(ReadHistory(root, &r->history));
    return ReadProjection(root, &r->projection);
  }

  // The gateway's rules of each [[markets]] entry (already read, so every
  // entry is a table): order_types, trailing_delta, max_num_algo_orders,
  // iceberg_parts, max_num_iceberg_orders.
  Status ReadMarketRules(const toml::table& root, std::vector<gateway::MarketRules>* out) const {
    const toml::array* markets = root.get("markets")->as_array();
    out->clear();
    for (std::size_t i = 0; i < markets->size(); ++i) {
      const toml::table& t = *markets->get(i)->as_table();
      const std::string path = ItemPath("markets", i, SymbolOf(t));
      gateway::MarketRules r;
      if (const toml::node* n = t.get("order_types")) {
        const std::string key = Dot(path, "order_types");
        const toml::array* types = n->as_array();
        if (types == nullptr) {
          return At(*n, key,
                    fmt::format("must be an array of order types, got {}", TypeName(n->type())));
        }
        if (types->empty()) return At(*n, key, "must list at least one order type");
        std::string known;
        for (const engine::OrderType type : gateway::kOrderTypes) {
          known += (known.empty() ? "" : ", ") + std::string(engine::ToString(type));
        }
        r.order_types = 0;
        for (const toml::node& item : *types) {
          const auto* name = item.as_string();
          if (name == nullptr) {
            return At(item, key,
                      fmt::format("must be an array of strings, got {}", TypeName(item.type())));
          }
          bool found = false;
          for (const engine::OrderType type : gateway::kOrderTypes) {
            if (engine::ToString(type) != name->get()) continue;
            found = true;
            if (r.Allows(type)) {
              return At(item, key, fmt::format("{} is listed twice", name->get()));
            }
            r.order_types |= gateway::OrderTypeBit(type);
          }
          if (!found) {
            return At(item, key,
                      fmt::format("unknown order type \"{}\" (expected {})", name->get(), known));
          }
        }
      }
      const toml::table* delta = nullptr;
      MB_RETURN_IF_ERROR(OptionalTable(t, path, "trailing_delta", kTrailingDeltaKeys, &delta));
      const std::string delta_path = Dot(path, "trailing_delta");
      MB_RETURN_IF_ERROR(
          OptionalInt(delta, delta_path, "min_above", 1, 9999, &r.min_trailing_above));
      MB_RETURN_IF_ERROR(
          OptionalInt(delta, delta_path, "max_above", 1, 9999, &r.max_trailing_above));
      MB_RETURN_IF_ERROR(
          OptionalInt(delta, delta_path, "min_below", 1, 9999, &r.min_trailing_below));
      MB_RETURN_IF_ERROR(
          OptionalInt(delta, delta_path, "max_below", 1, 9999, &r.max_trailing_below));
      if (r.min_trailing_above > r.max_trailing_above) {
        return At(*t.get("trailing_delta"), delta_path,
                  fmt::format("min_above {} is above max_above {}", r.min_trailing_above,
                              r.max_trailing_above));
      }
      if (r.min_trailing_below > r.max_trailing_below) {
        return At(*t.get("trailing_delta"), delta_path,
                  fmt::format("min_below {} is above max_below {}", r.min_trailing_below,
                              r.max_trailing_below));
      }
      MB_RETURN_IF_ERROR(
          OptionalInt(&t, path, "max_num_algo_orders", 0, 1'000'000, &r.max_num_algo_orders));
      MB_RETURN_IF_ERROR(OptionalInt(&t, path, "iceberg_parts", 0, 1'000'000, &r.iceberg_parts));
      MB_RETURN_IF_ERROR(
          OptionalInt(&t, path, "max_num_iceberg_orders", 0, 1'000'000, &r.max_num_iceberg_orders));
      out->push_back(r);
    }
    return Status::Ok();
  }

  // [[venues]] (optional, any number) and [transfers].
  Status ReadTransfers(const toml::table& root, RuntimeConfig* r) const {
    TransferConfig* x = &r->transfers;
    if (const toml::node* n = root.get("venues")) {
      const toml::array* venues = n->as_array();
      if (venues == nullptr || !venues->is_array_of_tables()) {
        return At(*n, "venues", "must be an array of tables ([[venues]])");
      }
      for (std::size_t i = 0; i < venues->size(); ++i) {
        const toml::table& t = *venues->get(i)->as_table();
        const std::string path = fmt::format("venues[{}]", i);
        MB_RETURN_IF_ERROR(CheckKeys(t, path, kVenueKeys));
        transfer::VenueLink v;
        const toml::node* where = nullptr;
        MB_RETURN_IF_ERROR(GetString(t, path, "name", &v.name, &where));
        if (Status s = bus::CheckVenue(v.name); !s.ok()) {
          return At(*where, Dot(path, "name"), s.message());
        }
        if (v.name == r->venue) {
          return At(*where, Dot(path, "name"),
                    fmt::format("\"{}\" is this venue's own name (venue)", v.name));
        }
        for (const transfer::VenueLink& other : x->venues) {
          if (other.name == v.name) {
            return At(*where, Dot(path, "name"), fmt::format("\"{}\" is listed twice", v.name));
          }
        }
        MB_RETURN_IF_ERROR(GetString(t, path, "url", &v.url, &where));
        std::vector<bool> tls;
        if (auto u = transfer::ParseHttpUrls(v.url, "url", "the other venue's API", &tls);
            !u.ok()) {
          return At(*where, Dot(path, "url"), u.status().message());
        }
        MB_RETURN_IF_ERROR(OptionalString(&t, path, "ca_file", &v.ca_file, &where));
        MB_RETURN_IF_ERROR(GetString(t, path, "secret", &v.secret, &where));
        if (v.secret.size() < 16) {
          return At(*where, Dot(path, "secret"),
                    "at least 16 characters (it signs every call between the venues)");
        }
        x->venues.push_back(std::move(v));
      }
    }
    const toml::table* t = nullptr;
    MB_RETURN_IF_ERROR(OptionalTable(root, "", "transfers", kTransferKeys, &t));
    std::string mode;
    const toml::node* where = nullptr;
    MB_RETURN_IF_ERROR(OptionalString(t, "transfers", "dispatch", &mode, &where));
    if (where != nullptr) {
      if (mode == "sequential") {
        x->dispatch = transfer::DispatchMode::kSequential;
      } else if (mode == "pipelined") {
        x->dispatch = transfer::DispatchMode::kPipelined;
      } else {
        return At(*where, "transfers.dispatch",
                  fmt::format("unknown mode \"{}\" (expected sequential or pipelined)", mode));
      }
    }
    MB_RETURN_IF_ERROR(OptionalInt(t, "transfers", "window", 1, 1'000'000, &x->window));
    MB_RETURN_IF_ERROR(OptionalInt(t, "transfers", "batch", 1, 1000, &x->batch));
    MB_RETURN_IF_ERROR(OptionalInt(t, "transfers", "retry_max_ms", 100, 5000, &x->retry_max_ms));
    MB_RETURN_IF_ERROR(OptionalInt(t, "transfers", "timeout_ms", 100, 60'000, &x->timeout_ms));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "transfers", "max_clock_skew_ms", 100, 300'000, &x->max_clock_skew_ms));
    return Status::Ok();
  }

  Status ReadBus(const toml::table& root, RuntimeConfig* r) const {
    const toml::node* where = nullptr;
    MB_RETURN_IF_ERROR(OptionalString(&root, "", "venue", &r->venue, &where));
    if (where != nullptr) {
      if (Status s = bus::CheckVenue(r->venue); !s.ok()) return At(*where, "venue", s.message());
    }
    const toml::table* t = nullptr;
    BusConfig* b = &r->bus;
    MB_RETURN_IF_ERROR(OptionalTable(root, "", "bus", kBusKeys, &t));
    MB_RETURN_IF_ERROR(OptionalString(t, "bus", "nats", &b->nats, &where));
    if (where != nullptr && !b->nats.empty()) {
      if (auto servers = bus::ParseServers(b->nats); !servers.ok()) {
        return At(*where, "bus.nats", servers.status().message());
      }
    }
    MB_RETURN_IF_ERROR(OptionalString(t, "bus", "stream", &b->stream, &where));
    if (where != nullptr && !b->stream.empty() &&
        b->stream.find_first_of(" .*>") != std::string::npos) {
      return At(*where, "bus.stream", "a stream name has no spaces, '.', '*' or '>'");
    }
    MB_RETURN_IF_ERROR(OptionalString(t, "bus", "subject", &b->subject, &where));
    if (where != nullptr && !b->subject.empty() &&
        (b->subject.find_first_of(" *>") != std::string::npos || b->subject.front() == '.' ||
         b->subject.back() == '.' || b->subject.find("..") != std::string::npos)) {
      return At(*where, "bus.subject",
                "a subject is dot-separated tokens without spaces or wildcards");
    }
    MB_RETURN_IF_ERROR(OptionalInt(t, "bus", "replicas", 1, 5, &b->replicas));
    b->replicas_set = t != nullptr && t->contains("replicas");
    if (b->replicas % 2 == 0) {
      return At(*t->get("replicas"), "bus.replicas",
                fmt::format("{}: 1, 3 or 5 (a JetStream quorum needs an odd count)", b->replicas));
    }
    MB_RETURN_IF_ERROR(OptionalInt(t, "bus", "max_mb", 1, int64_t{1} << 30, &b->max_mb));
    MB_RETURN_IF_ERROR(OptionalInt(t, "bus", "max_age_hours", 1, 87'600, &b->max_age_hours));
    MB_RETURN_IF_ERROR(OptionalInt(t, "bus", "message_kb", 1, 900, &b->message_kb));
    MB_RETURN_IF_ERROR(OptionalInt(t, "bus", "linger_us", 0, 1'000'000, &b->linger_us));
    MB_RETURN_IF_ERROR(OptionalInt(t, "bus", "timeout_ms", 100, 60'000, &b->timeout_ms));
    bus::NatsSecurity& sec = b->security;
    const std::pair<std::string_view, std::string*> strings[] = {
        {"tls_ca_file", &sec.tls_ca_file},          {"tls_cert_file", &sec.tls_cert_file},
        {"tls_key_file", &sec.tls_key_file},        {"creds_file", &sec.creds_file},
        {"nkey_seed_file", &sec.nkey_seed_file},    {"user", &sec.user},
        {"password_file", &sec.password_file},      {"token_file", &sec.token_file},
        {"signing_key_file", &b->signing_key_file}, {"verify_key", &b->verify_key}};
    for (const auto& [key, value] : strings) {
      MB_RETURN_IF_ERROR(OptionalString(t, "bus", key, value, &where));
    }
    return Status::Ok();
  }

  Status ReadReplication(const toml::table& root, ReplicationConfig* rep) const {
    const toml::table* t = nullptr;
    MB_RETURN_IF_ERROR(OptionalTable(root, "", "replication", kReplicationKeys, &t));
    rep->leadership = t != nullptr;
    std::string ack;
    const toml::node* where = nullptr;
    MB_RETURN_IF_ERROR(OptionalString(t, "replication", "ack", &ack, &where));
    if (where != nullptr) {
      auto a = ParseAckPolicy(ack);
      if (!a.ok()) return At(*where, "replication.ack", a.status().message());
      rep->ack = *a;
    }
    MB_RETURN_IF_ERROR(OptionalBool(t, "replication", "standby", &rep->standby));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "replication", "lease_ttl_ms", 500, 60'000, &rep->lease_ttl_ms));
    return Status::Ok();
  }

  Status ReadMetrics(const toml::table& root, MetricsConfig* m) const {
    const toml::table* t = nullptr;
    MB_RETURN_IF_ERROR(OptionalTable(root, "", "metrics", kMetricsKeys, &t));
    MB_RETURN_IF_ERROR(OptionalBool(t, "metrics", "remote", &m->remote));
    MB_RETURN_IF_ERROR(OptionalInt(t, "metrics", "port", 0, 65535, &m->port));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "metrics", "flight_threshold_ms", 0, 3'600'000, &m->flight_threshold_ms));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "metrics", "flight_window_ms", 1, 600'000, &m->flight_window_ms));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "metrics", "flight_capacity", 2, 1 << 24, &m->flight_capacity));
    if ((m->flight_capacity & (m->flight_capacity - 1)) != 0) {
      return At(*t->get("flight_capacity"), "metrics.flight_capacity",
                fmt::format("{} is not a power of two", m->flight_capacity));
    }
    MB_RETURN_IF_ERROR(OptionalInt(t, "metrics", "flight_keep", 0, 100'000, &m->flight_keep));
    MB_RETURN_IF_ERROR(OptionalInt(t, "metrics", "flight_max_age_hours", 0, 87'600,
                                   &m->flight_max_age_hours));  // up to ten years
    return Status::Ok();
  }

  Status ReadHistory(const toml::table& root, HistoryConfig* h) const {
    const toml::table* t = nullptr;
    MB_RETURN_IF_ERROR(OptionalTable(root, "", "history", kHistoryKeys, &t));
    MB_RETURN_IF_ERROR(OptionalInt(t, "history", "cache_mb", 8, 1'000'000, &h->cache_mb));
    return OptionalInt(t, "history", "write_buffer_kb", 64, 1 << 20, &h->write_buffer_kb);
  }

  Status ReadProjection(const toml::table& root, ProjectionConfig* p) const {
    const toml::table* t = nullptr;
    const toml::node* where = nullptr;
    MB_RETURN_IF_ERROR(OptionalTable(root, "", "projection", kProjectionKeys, &t));
    MB_RETURN_IF_ERROR(OptionalString(t, "projection", "backend", &p->store.backend, &where));
    if (where != nullptr && p->store.backend != "sqlite" && p->store.backend != "postgres" &&
        p->store.backend != "off") {
      return At(*where, "projection.backend",
                fmt::format("\"{}\" is not a backend (off, sqlite or postgres)", p->store.backend));
    }
    MB_RETURN_IF_ERROR(OptionalString(t, "projection", "path", &p->store.path, &where));
    MB_RETURN_IF_ERROR(OptionalString(t, "projection", "url", &p->store.url, &where));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "projection", "batch_events", 1, 1'000'000, &p->batch_events));
    MB_RETURN_IF_ERROR(OptionalInt(t, "projection", "batch_wait_ms", 0, 10'000, &p->batch_wait_ms));
    MB_RETURN_IF_ERROR(OptionalInt(t, "projection", "catchup_batch_events", 1, 10'000'000,
                                   &p->catchup_batch_events));
    uint64_t wal_mb = p->store.wal_max_bytes >> 20;
    MB_RETURN_IF_ERROR(OptionalInt(t, "projection", "wal_max_mb",
                                   static_cast<int64_t>(projection::kMinWalMaxBytes >> 20),
                                   1'000'000, &wal_mb));
    p->store.wal_max_bytes = wal_mb << 20;
    uint64_t cache_mb = p->store.cache_bytes >> 20;
    MB_RETURN_IF_ERROR(OptionalInt(t, "projection", "cache_mb", 1, 1'000'000, &cache_mb));
    p->store.cache_bytes = cache_mb << 20;
    return Status::Ok();
  }

  // [tls]: the API port's certificate and key (both or neither).
  Status ReadTls(const toml::table& root, gateway::ServerOptions* s) const {
    const toml::table* t = nullptr;
    const toml::node* where = nullptr;
    MB_RETURN_IF_ERROR(OptionalTable(root, "", "tls", kTlsKeys, &t));
    MB_RETURN_IF_ERROR(OptionalString(t, "tls", "cert_file", &s->tls_cert_file, &where));
    MB_RETURN_IF_ERROR(OptionalString(t, "tls", "key_file", &s->tls_key_file, &where));
    if (t != nullptr && s->tls_cert_file.empty() != s->tls_key_file.empty()) {
      return At(*t, "tls", "cert_file and key_file go together");
    }
    return Status::Ok();
  }

  Status ReadGateway(const toml::table& root, gateway::GatewayOptions* g) const {
    const toml::table* t = nullptr;
    const toml::node* where = nullptr;
    MB_RETURN_IF_ERROR(OptionalTable(root, "", "gateway", kGatewayKeys, &t));
    gateway::ServerOptions& s = g->server;
    MB_RETURN_IF_ERROR(OptionalString(t, "gateway", "host", &s.host, &where));
    if (where != nullptr && s.host.empty()) return At(*where, "gateway.host", "must not be empty");
    MB_RETURN_IF_ERROR(OptionalInt(t, "gateway", "port", 0, 65535, &s.port));
    MB_RETURN_IF_ERROR(OptionalInt(t, "gateway", "io_threads", 1, 256, &s.io_threads));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "max_connections", 1, 10'000'000, &s.max_connections));
    MB_RETURN_IF_ERROR(OptionalInt(t, "gateway", "max_connections_per_ip", 0, 10'000'000,
                                   &s.max_connections_per_ip));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "max_header_bytes", 1024, 1 << 20, &s.max_header_bytes));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "max_body_bytes", 1024, 64 << 20, &s.max_body_bytes));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "read_timeout_ms", 10, 3'600'000, &s.read_timeout_ms));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "idle_timeout_ms", 10, 86'400'000, &s.idle_timeout_ms));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "ws_max_message_bytes", 128, 64 << 20, &s.ws_max_message_bytes));
    MB_RETURN_IF_ERROR(OptionalInt(t, "gateway", "ws_send_queue_messages", 1, 10'000'000,
                                   &s.ws_send_queue_messages));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "ws_send_queue_bytes", 1024, kU32Max, &s.ws_send_queue_bytes));
    MB_RETURN_IF_ERROR(OptionalInt(t, "gateway", "ws_slow_close_grace_ms", 100, 600'000,
                                   &s.ws_slow_close_grace_ms));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "ws_write_interval_us", 0, 1'000'000, &s.ws_write_interval_us));
    MB_RETURN_IF_ERROR(OptionalInt(t, "gateway", "weight_per_minute", 0, kU32Max,
                                   &g->key_limit.weight_per_minute));
    g->key_limit.burst = g->key_limit.weight_per_minute;
    MB_RETURN_IF_ERROR(OptionalInt(t, "gateway", "ip_weight_per_minute", 0, kU32Max,
                                   &g->ip_limit.weight_per_minute));
    g->ip_limit.burst = g->ip_limit.weight_per_minute;
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "orders_per_10s", 0, kU32Max, &g->order_limit.per_10s));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "orders_per_day", 0, kU32Max, &g->order_limit.per_day));
    MB_RETURN_IF_ERROR(OptionalBool(t, "gateway", "admin_remote", &g->admin_remote));
    MB_RETURN_IF_ERROR(
        OptionalBool(t, "gateway", "admin_remote_plaintext", &g->admin_remote_plaintext));
    std::string replicas;
    MB_RETURN_IF_ERROR(OptionalString(t, "gateway", "trusted_replicas", &replicas, &where));
    if (where != nullptr) {
      auto list = ParseAddressList(replicas);
      if (!list.ok()) return At(*where, "gateway.trusted_replicas", list.status().message());
      g->trusted_replicas = std::move(*list);
    }
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "recent_trades", 1, 1'000'000, &g->read_side.recent_trades));
    MB_RETURN_IF_ERROR(OptionalInt(t, "gateway", "klines_per_interval", 1, 1'000'000,
                                   &g->read_side.klines_per_interval));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "history_orders", 1, 1'000'000, &g->read_side.history_orders));
    MB_RETURN_IF_ERROR(
        OptionalInt(t, "gateway", "history_trades", 1, 1'000'000, &g->read_side.history_trades));
    MB_RETURN_IF_ERROR(OptionalInt(t, "gateway", "retry_after_s", 1, 3600, &g->retry_after_s));
    return Status::Ok();
  }

  Status ReadEngine(const toml::table& root, EngineConfig* c) const {
    const toml::node* n = root.get("engine");
    if (n == nullptr) return NoLine("engine", "missing required table [engine]");
    const toml::table* t = n->as_table();
    if (t == nullptr) {
      return At(*n, "engine",
                fmt::format("must be a table ([engine]), got {}", TypeName(n->type())));
    }
    MB_RETURN_IF_ERROR(CheckKeys(*t, "engine", kEngineKeys));
    int64_t v = 0;
    MB_RETURN_IF_ERROR(GetInt(*t, "engine", "max_accounts", 0, kU32Max, &v));
    c->max_accounts = static_cast<uint32_t>(v);
    MB_RETURN_IF_ERROR(GetInt(*t, "engine", "fee_account", 0, kU32Max, &v));
    c->fee_account = AccountId{static_cast<uint32_t>(v)};
    MB_RETURN_IF_ERROR(GetInt(*t, "engine", "expected_open_orders", 0, kU32Max, &v));
    c->expected_open_orders = static_cast<uint32_t>(v);
    MB_RETURN_IF_ERROR(GetInt(*t, "engine", "client_id_memory", 0, kU32Max, &v));
    c->client_id_memory = static_cast<uint32_t>(v);
    if (t->contains("client_order_id")) {  // optional: "binance" by default
      std::string text;
      const toml::node* where = nullptr;
      MB_RETURN_IF_ERROR(GetString(*t, "engine", "client_order_id", &text, &where));
      if (text == "binance") {
        c->client_order_ids = engine::ClientOrderIds::kBinance;
      } else if (text == "idempotent") {
        c->client_order_ids = engine::ClientOrderIds::kIdempotent;
      } else {
        return At(*where, "engine.client_order_id",
                  fmt::format("unknown rule \"{}\" (expected binance or idempotent)", text));
      }
    }
    return Status::Ok();
  }

  Status ReadAssets(const toml::table& root, EngineConfig* c) {
    const toml::array* assets = nullptr;
    MB_RETURN_IF_ERROR(GetTableArray(root, "assets", &assets));
    for (std::size_t i = 0; i < assets->size(); ++i) {
      const toml::table& t = *assets->get(i)->as_table();
      const std::string path = ItemPath("assets", i, SymbolOf(t));
      MB_RETURN_IF_ERROR(CheckKeys(t, path, kAssetKeys));
      AssetSpec a;
      const toml::node* symbol = nullptr;
      MB_RETURN_IF_ERROR(GetString(t, path, "symbol", &a.symbol, &symbol));
      int64_t scale = 0;
      MB_RETURN_IF_ERROR(GetInt(t, path, "scale", 0, kMaxDecimalScale, &scale));
      a.scale = static_cast<int32_t>(scale);
      for (auto [key, out] : {std::pair{"withdraw_fee", &a.withdraw_fee},
                              std::pair{"withdraw_min", &a.withdraw_min}}) {
        if (t.get(key) == nullptr) continue;
        std::string text;
        const toml::node* n = nullptr;
        MB_RETURN_IF_ERROR(GetDecimalText(t, path, key, &text, &n));
        MB_RETURN_IF_ERROR(ToUnits(*n, Dot(path, key), text, a, out));
      }
      MB_RETURN_IF_ERROR(OptionalBool(&t, path, "deposit_enabled", &a.deposit_enabled));
      MB_RETURN_IF_ERROR(OptionalBool(&t, path, "withdraw_enabled", &a.withdraw_enabled));
      if (auto it = assets_.find(a.symbol); it != assets_.end()) {
        return At(*symbol, Dot(path, "symbol"),
                  fmt::format("duplicate asset symbol {} (first defined at line {})", a.symbol,
                              it->second.line));
      }
      assets_.emplace(a.symbol,
                      AssetRef{AssetId{static_cast<uint16_t>(i)}, symbol->source().begin.line});
      c->assets.push_back(std::move(a));
    }
    return Status::Ok();
  }

  Status ReadAssetRef(const toml::table& t, std::string_view path, std::string_view key,
                      const EngineConfig& c, AssetId* out) const {
    std::string symbol;
    const toml::node* n = nullptr;
    MB_RETURN_IF_ERROR(GetString(t, path, key, &symbol, &n));
    auto it = assets_.find(symbol);
    if (it == assets_.end()) {
      std::string known;
      for (const AssetSpec& a : c.assets) known += (known.empty() ? "" : ", ") + a.symbol;
      return At(*n, Dot(path, key),
                fmt::format("unknown asset \"{}\" (defined: {})", symbol, known));
    }
    *out = it->second.id;
    return Status::Ok();
  }

  Status ReadMarkets(const toml::table& root, EngineConfig* c) const {
    const toml::array* markets = nullptr;
    MB_RETURN_IF_ERROR(GetTableArray(root, "markets", &markets));
    std::map<std::string, uint32_t, std::less<>> seen;  // symbol -> line
    for (std::size_t i = 0; i < markets->size(); ++i) {
      const toml::table& t = *markets->get(i)->as_table();
      const std::string path = ItemPath("markets", i, SymbolOf(t));
      MB_RETURN_IF_ERROR(CheckKeys(t, path, kMarketKeys));
      MarketSpec m;
      const toml::node* n = nullptr;
      MB_RETURN_IF_ERROR(GetString(t, path, "symbol", &m.symbol, &n));
      if (auto it = seen.find(m.symbol); it != seen.end()) {
        return At(*n, Dot(path, "symbol"),
                  fmt::format("duplicate market symbol {} (first defined at line {})", m.symbol,
                              it->second));
      }
      seen.emplace(m.symbol, n->source().begin.line);

      MB_RETURN_IF_ERROR(ReadAssetRef(t, path, "base", *c, &m.base));
      MB_RETURN_IF_ERROR(ReadAssetRef(t, path, "quote", *c, &m.quote));
      const AssetSpec& base = c->assets[Raw(m.base)];
      const AssetSpec& quote = c->assets[Raw(m.quote)];

      // Sizes first: the limits below are counted in them.
      std::string tick_text;
      MB_RETURN_IF_ERROR(GetDecimalText(t, path, "tick_size", &tick_text, &n));
      MB_RETURN_IF_ERROR(ToUnits(*n, Dot(path, "tick_size"), tick_text, quote, &m.tick_units));
      if (m.tick_units == 0) return At(*n, Dot(path, "tick_size"), "must be greater than 0");
      std::string step_text;
      MB_RETURN_IF_ERROR(GetDecimalText(t, path, "step_size", &step_text, &n));
      MB_RETURN_IF_ERROR(ToUnits(*n, Dot(path, "step_size"), step_text, base, &m.lot_units));
      if (m.lot_units == 0) return At(*n, Dot(path, "step_size"), "must be greater than 0");
      // Validate() checks this too; here it can speak in the file's terms.
      const int128 tick_lot = static_cast<int128>(m.tick_units) * m.lot_units;
      if (tick_lot % Pow10(base.scale) != 0) {
        return At(
            *n, Dot(path, "step_size"),
            fmt::format("tick_size {} × step_size {} is not a whole number of {} units "
                        "(the smallest is {}); make one of them larger",
                        tick_text, step_text, quote.symbol, FormatDecimalShort(1, quote.scale)));
      }

      std::string text;
      int64_t v = 0;
      MB_RETURN_IF_ERROR(GetDecimalText(t, path, "min_qty", &text, &n));
      MB_RETURN_IF_ERROR(
          ToSteps(*n, Dot(path, "min_qty"), text, base, m.lot_units, "step_size", &v));
      m.min_qty = Qty{v};
      MB_RETURN_IF_ERROR(GetDecimalText(t, path, "max_qty", &text, &n));
      MB_RETURN_IF_ERROR(
          ToSteps(*n, Dot(path, "max_qty"), text, base, m.lot_units, "step_size", &v));
      m.max_qty = Qty{v};
      MB_RETURN_IF_ERROR(GetDecimalText(t, path, "max_price", &text, &n));
      MB_RETURN_IF_ERROR(
          ToSteps(*n, Dot(path, "max_price"), text, quote, m.tick_units, "tick_size", &v));
      m.max_price = Price{v};
      MB_RETURN_IF_ERROR(GetDecimalText(t, path, "min_notional", &text, &n));
      MB_RETURN_IF_ERROR(ToUnits(*n, Dot(path, "min_notional"), text, quote, &v));
      m.min_notional = Amount{v};

      MB_RETURN_IF_ERROR(GetInt(t, path, "maker_fee_bps", kI32Min, kI32Max, &v));
      m.maker_fee_bps = static_cast<int32_t>(v);
      MB_RETURN_IF_ERROR(GetInt(t, path, "taker_fee_bps", kI32Min, kI32Max, &v));
      m.taker_fee_bps = static_cast<int32_t>(v);

      if (t.contains("status")) {  // optional
        MB_RETURN_IF_ERROR(GetString(t, path, "status", &text, &n));
        bool found = false;
        for (MarketStatus s : kStatuses) {
          if (engine::ToString(s) == text) {
            m.status = s;
            found = true;
          }
        }
        if (!found) {
          return At(
              *n, Dot(path, "status"),
              fmt::format("unknown status \"{}\" (expected TRADING, HALTED or CANCEL_ONLY)", text));
        }
      }
      c->markets.push_back(std::move(m));
    }
    return Status::Ok();
  }

  // Turns a Validate() message ("markets[2] (ETHBTC).lot_units: ...",
  // "assets[0] (BTC).scale: ...", "fee_account: ...", "markets: ...") into one
  // that names the file, the line of the offending key and its configuration
  // name. engine/market.cc writes those prefixes; anything else keeps the file
  // name only.
  Status Locate(const Status& s, const toml::table& root, const EngineConfig& c) const {
    const std::string& msg = s.message();
    for (std::string_view kind : {std::string_view("assets"), std::string_view("markets")}) {
      const std::string count_prefix = fmt::format("{}: ", kind);
      if (msg.rfind(count_prefix, 0) == 0) {
        const toml::node* n = root.get(kind);
        if (n == nullptr) return NoLine(kind, std::string_view(msg).substr(count_prefix.size()));
        return At(*n, kind, std::string_view(msg).substr(count_prefix.size()));
      }
      const std::size_t size = kind == "assets" ? c.assets.size() : c.markets.size();
      for (std::size_t i = 0; i < size; ++i) {
        const std::string& symbol = kind == "assets" ? c.assets[i].symbol : c.markets[i].symbol;
        const std::string prefix = fmt::format("{}[{}] ({}).", kind, i, symbol);
        if (msg.rfind(prefix, 0) != 0) continue;
        const std::size_t colon = msg.find(": ", prefix.size());
        if (colon == std::string::npos) break;
        const std::string_view field =
            std::string_view(msg).substr(prefix.size(), colon - prefix.size());
        const std::string_view key = ConfigKey(kind, field);
        const toml::table& t = *root.get(kind)->as_array()->get(i)->as_table();
        const toml::node* n = t.get(key);
        return At(n != nullptr ? *n : static_cast<const toml::node&>(t),
                  Dot(ItemPath(kind, i, symbol), key), std::string_view(msg).substr(colon + 2));
      }
    }
    for (std::string_view key : kEngineKeys) {
      const std::string prefix = fmt::format("{}: ", key);
      if (msg.rfind(prefix, 0) != 0) continue;
      const toml::table* engine = root.at_path("engine").as_table();
      const toml::node* n = engine != nullptr ? engine->get(key) : nullptr;
      if (n == nullptr) break;
      return At(*n, Dot("engine", key), std::string_view(msg).substr(prefix.size()));
    }
    return Status(s.code(), fmt::format("{}: {}", source_, msg));
  }

  std::string source_;
  std::map<std::string, AssetRef, std::less<>> assets_;
};

}  // namespace

std::string ApiBase(const gateway::ServerOptions& server, uint16_t port, bool ws) {
  const bool tls = !server.tls_cert_file.empty();
  const std::string host =
      server.host.find(':') != std::string::npos ? "[" + server.host + "]" : server.host;
  const char* scheme = ws ? (tls ? "wss" : "ws") : (tls ? "https" : "http");
  return fmt::format("{}://{}:{}", scheme, host, port);
}

std::filesystem::path MasterKeyFile(const Config& config) {
  const std::string& file = config.runtime.master_key_file;
  return file.empty() ? std::filesystem::path(config.runtime.data_dir) / "master.key"
                      : std::filesystem::path(file);
}

std::string PlaintextWarning(const gateway::ServerOptions& server) {
  if (!server.tls_cert_file.empty()) return "";
  boost::system::error_code ec;
  const auto addr = boost::asio::ip::make_address(server.host, ec);
  if (server.host == "localhost" || (!ec && addr.is_loopback())) return "";
  return fmt::format(
      "the API listens on {} without TLS: API keys' requests, listen keys and the admin token "
      "cross the network readable; give it a certificate (--tls-cert/--tls-key, [tls])",
      server.host);
}

Result<std::vector<std::string>> ParseAddressList(std::string_view list) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    std::string_view item = list.substr(pos, comma - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    boost::system::error_code ec;
    const auto addr = boost::asio::ip::make_address(item, ec);
    if (ec) {
      return InvalidArgument(
          fmt::format("\"{}\" is not an IP address (a comma-separated list of them)", item));
    }
    out.push_back(addr.to_string());
    pos = comma + 1;
  }
  return out;
}

exchange::ExchangeOptions ExchangeOptionsFrom(const Config& config) {
  exchange::ExchangeOptions o;
  o.engine = config.engine;
  o.data_dir = config.runtime.data_dir;
  o.journal = config.runtime.journal;
  o.snapshots = config.runtime.snapshots;
  o.inbound_capacity = config.runtime.inbound_capacity;
  o.max_batch = config.runtime.max_batch;
  o.engine_stage = config.runtime.engine_stage;
  o.journal_stage = config.runtime.journal_stage;
  return o;
}

Result<Config> ParseFullConfig(std::string_view toml_text, std::string_view source_name) {
  return Loader(source_name).Load(toml_text);
}

Result<engine::EngineConfig> ParseConfig(std::string_view toml_text, std::string_view source_name) {
  auto full = ParseFullConfig(toml_text, source_name);
  if (!full.ok()) return full.status();
  return std::move(full->engine);
}

Result<engine::EngineConfig> LoadConfig(const std::string& path) {
  auto full = LoadFullConfig(path);
  if (!full.ok()) return full.status();
  return std::move(full->engine);
}

Result<Config> LoadFullConfig(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    std::string why = fmt::format("{}: cannot open: {}", path, std::strerror(err));
    return err == ENOENT ? NotFound(std::move(why)) : IoError(std::move(why));
  }
  std::string text;
  char buf[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return IoError(fmt::format("{}: read failed", path));
  return ParseFullConfig(text, path);
}

std::string_view ToString(AckPolicy ack) noexcept {
  return ack == AckPolicy::kReplicated ? "replicated" : "local";
}

Result<AckPolicy> ParseAckPolicy(std::string_view text) {
  if (text == "local") return AckPolicy::kLocal;
  if (text == "replicated") return AckPolicy::kReplicated;
  return InvalidArgument(fmt::format("\"{}\": local or replicated", text));
}

}  // namespace mb::app
