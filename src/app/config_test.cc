#include "app/config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/strong.h"
#include "engine/engine.h"
#include "engine/market.h"
#include "engine/types.h"

namespace mb::app {
namespace {

using engine::EngineConfig;
using engine::MarketStatus;

// A small valid configuration. Tests replace numbered lines, so keep the
// numbering in the comments right when editing.
const char* const kBase[] = {
    "[engine]",                   // 1
    "max_accounts = 1000",        // 2
    "fee_account = 0",            // 3
    "expected_open_orders = 64",  // 4
    "client_id_memory = 32",      // 5
    "",                           // 6
    "[[assets]]",                 // 7
    "symbol = \"BTC\"",           // 8
    "scale = 8",                  // 9
    "",                           // 10
    "[[assets]]",                 // 11
    "symbol = \"USDT\"",          // 12
    "scale = 6",                  // 13
    "",                           // 14
    "[[markets]]",                // 15
    "symbol = \"BTCUSDT\"",       // 16
    "base = \"BTC\"",             // 17
    "quote = \"USDT\"",           // 18
    "tick_size = \"0.01\"",       // 19
    "step_size = \"0.0001\"",     // 20
    "min_qty = \"0.0001\"",       // 21
    "max_qty = \"9000\"",         // 22
    "max_price = \"1000000\"",    // 23
    "min_notional = \"5\"",       // 24
    "maker_fee_bps = 10",         // 25
    "taker_fee_bps = 20",         // 26
    "status = \"TRADING\"",       // 27
};

// kBase with some lines (1-based) replaced; "" blanks a line, keeping the
// numbering of the rest.
std::string Edit(const std::map<int, std::string>& edits = {}, const std::string& tail = "") {
  std::string out;
  int line = 1;
  for (const char* text : kBase) {
    auto it = edits.find(line);
    out += it != edits.end() ? it->second : text;
    out += '\n';
    ++line;
  }
  return out + tail;
}

constexpr const char* kName = "test.toml";

TEST(ParseConfig, ReadsTheBaseConfiguration) {
  Result<EngineConfig> r = ParseConfig(Edit(), kName);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const EngineConfig& c = *r;
  EXPECT_EQ(c.max_accounts, 1000u);
  EXPECT_EQ(c.fee_account, AccountId{0});
  EXPECT_EQ(c.expected_open_orders, 64u);
  EXPECT_EQ(c.client_id_memory, 32u);
  ASSERT_EQ(c.assets.size(), 2u);
  EXPECT_EQ(c.assets[1].symbol, "USDT");
  EXPECT_EQ(c.assets[1].scale, 6);
  ASSERT_EQ(c.markets.size(), 1u);
  const engine::MarketSpec& m = c.markets[0];
  EXPECT_EQ(m.symbol, "BTCUSDT");
  EXPECT_EQ(m.base, AssetId{0});
  EXPECT_EQ(m.quote, AssetId{1});
  EXPECT_EQ(m.tick_units, 10'000);  // 0.01 at scale 6
  EXPECT_EQ(m.lot_units, 10'000);   // 0.0001 at scale 8
  EXPECT_EQ(m.notional_per_tick_lot, 1);
  EXPECT_EQ(m.min_qty, Qty{1});
  EXPECT_EQ(m.max_qty, Qty{90'000'000});
  EXPECT_EQ(m.max_price, Price{100'000'000});
  EXPECT_EQ(m.min_notional, Amount{5'000'000});
  EXPECT_EQ(m.maker_fee_bps, 10);
  EXPECT_EQ(m.taker_fee_bps, 20);
  EXPECT_EQ(m.status, MarketStatus::kTrading);
}

TEST(ParseConfig, StatusIsOptionalAndParsed) {
  Result<EngineConfig> r = ParseConfig(Edit({{27, ""}}), kName);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->markets[0].status, MarketStatus::kTrading);
  r = ParseConfig(Edit({{27, "status = \"HALTED\""}}), kName);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->markets[0].status, MarketStatus::kHalted);
  r = ParseConfig(Edit({{27, "status = \"CANCEL_ONLY\""}}), kName);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->markets[0].status, MarketStatus::kCancelOnly);
}

// [engine] client_order_id: Binance's rule unless the idempotent one is asked
// for; the choice is part of the configuration hash (recovery refuses a data
// directory written under the other rule), the default hashing as before.
TEST(ParseConfig, ClientOrderIdRuleIsOptionalAndParsed) {
  Result<EngineConfig> r = ParseConfig(Edit(), kName);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->client_order_ids, engine::ClientOrderIds::kBinance);
  const uint64_t default_hash = engine::HashConfig(*r);
  r = ParseConfig(Edit({{6, "client_order_id = \"binance\""}}), kName);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->client_order_ids, engine::ClientOrderIds::kBinance);
  EXPECT_EQ(engine::HashConfig(*r), default_hash);
  r = ParseConfig(Edit({{6, "client_order_id = \"idempotent\""}}), kName);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->client_order_ids, engine::ClientOrderIds::kIdempotent);
  EXPECT_NE(engine::HashConfig(*r), default_hash);
  r = ParseConfig(Edit({{6, "client_order_id = \"strict\""}}), kName);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "test.toml:6: engine.client_order_id: unknown rule \"strict\" (expected binance or "
            "idempotent)");
}

TEST(ParseConfig, AcceptsExactTrailingZerosAndInlineComments) {
  Result<EngineConfig> r = ParseConfig(Edit({{19, "tick_size = \"0.0100000000\"  # quote per base"},
                                             {22, "max_qty = \"9000.0000\""}}),
                                       kName);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->markets[0].tick_units, 10'000);
  EXPECT_EQ(r->markets[0].max_qty, Qty{90'000'000});
}

struct Bad {
  const char* name;
  std::string text;
  std::string prefix;  // "<file>:<line>: <field>: "
  std::string detail;  // a substring of the rest
};

TEST(ParseConfig, RefusesEachKindOfErrorNamingFileLineAndField) {
  const std::string second_market =
      "\n[[markets]]\n"         // 29
      "symbol = \"BTCUSDT\"\n"  // 30
      "base = \"BTC\"\n";
  const std::vector<Bad> cases = {
      // Syntax.
      {"unterminated string", Edit({{20, "step_size = \"0.0001"}}),
       "test.toml:20: ", "syntax error"},
      {"missing value", Edit({{3, "fee_account = "}}), "test.toml:3: ", "syntax error"},
      {"key defined twice", Edit({{10, "scale = 8"}}), "test.toml:10: ", "syntax error"},
      // Unknown keys.
      {"misspelt market key", Edit({{19, "tick_sise = \"0.01\""}}),
       "test.toml:19: markets.BTCUSDT.tick_sise: ", "unknown key (expected symbol, base"},
      {"misspelt engine key", Edit({{6, "max_acounts = 5"}}),
       "test.toml:6: engine.max_acounts: ", "unknown key"},
      {"misspelt asset key", Edit({{10, "precision = 8"}}), "test.toml:10: assets.BTC.precision: ",
       "unknown key (expected symbol, scale, withdraw_fee, withdraw_min, deposit_enabled, "
       "withdraw_enabled)"},
      {"unknown table", Edit({}, "[network]\nport = 1\n"), "test.toml:28: network: ",
       "unknown key (expected engine, assets, markets, server, journal, snapshots, threads, "
       "gateway, venue, projection, metrics, bus, venues, transfers, replication, tls, "
       "security, history)"},
      {"misspelt metrics key", Edit({}, "[metrics]\nremote_ok = true\n"),
       "test.toml:29: metrics.remote_ok: ",
       "unknown key (expected remote, port, flight_threshold_ms, flight_window_ms, "
       "flight_capacity, flight_keep, flight_max_age_hours)"},
      {"metrics remote not a bool", Edit({}, "[metrics]\nremote = \"yes\"\n"),
       "test.toml:29: metrics.remote: ", "must be true or false"},
      {"metrics port out of range", Edit({}, "[metrics]\nport = 65536\n"),
       "test.toml:29: metrics.port: ", "65536 is outside"},
      {"flight capacity not a power of two", Edit({}, "[metrics]\nflight_capacity = 1000\n"),
       "test.toml:29: metrics.flight_capacity: ", "1000 is not a power of two"},
      {"negative flight threshold", Edit({}, "[metrics]\nflight_threshold_ms = -1\n"),
       "test.toml:29: metrics.flight_threshold_ms: ", "-1 is outside"},
      {"flight window of 0", Edit({}, "[metrics]\nflight_window_ms = 0\n"),
       "test.toml:29: metrics.flight_window_ms: ", "0 is outside"},
      {"unknown projection backend", Edit({}, "[projection]\nbackend = \"mysql\"\n"),
       "test.toml:29: projection.backend: ",
       "\"mysql\" is not a backend (off, sqlite or postgres)"},
      {"misspelt history key", Edit({}, "[history]\ncache = 5\n"),
       "test.toml:29: history.cache: ", "unknown key (expected cache_mb, write_buffer_kb)"},
      {"history memtable too small", Edit({}, "[history]\nwrite_buffer_kb = 63\n"),
       "test.toml:29: history.write_buffer_kb: ", "63 is outside"},
      {"misspelt projection key", Edit({}, "[projection]\nbatch = 5\n"),
       "test.toml:29: projection.batch: ", "unknown key"},
      {"projection batch of 0", Edit({}, "[projection]\nbatch_events = 0\n"),
       "test.toml:29: projection.batch_events: ", "0"},
      {"misspelt gateway key", Edit({}, "[gateway]\nprot = 1\n"),
       "test.toml:29: gateway.prot: ", "unknown key"},
      {"gateway port out of range", Edit({}, "[gateway]\nport = 70000\n"),
       "test.toml:29: gateway.port: ", "70000 is outside"},
      {"gateway io_threads zero", Edit({}, "[gateway]\nio_threads = 0\n"),
       "test.toml:29: gateway.io_threads: ", "0 is outside"},
      {"write interval over a second", Edit({}, "[gateway]\nws_write_interval_us = 1000001\n"),
       "test.toml:29: gateway.ws_write_interval_us: ", "1000001 is outside"},
      {"slow-close grace too short", Edit({}, "[gateway]\nws_slow_close_grace_ms = 5\n"),
       "test.toml:29: gateway.ws_slow_close_grace_ms: ", "5 is outside"},
      {"empty gateway host", Edit({}, "[gateway]\nhost = \"\"\n"),
       "test.toml:29: gateway.host: ", "must not be empty"},
      // Runtime tables: optional, but what is there is checked as strictly.
      {"bad fsync policy", Edit({}, "[journal]\nfsync = \"sometimes\"\n"),
       "test.toml:29: journal.fsync: ", "fsync policy \"sometimes\": expected"},
      {"misspelt journal key", Edit({}, "[journal]\nfsnyc = \"none\"\n"),
       "test.toml:29: journal.fsnyc: ",
       "unknown key (expected fsync, segment_mb, retention, archive_dir)"},
      {"bad retention policy", Edit({}, "[journal]\nretention = \"sometimes\"\n"),
       "test.toml:29: journal.retention: ", "expected keep, delete or archive"},
      {"bad wait strategy", Edit({}, "[threads.engine]\nwait = \"spin\"\n"),
       "test.toml:29: threads.engine.wait: ", "unknown wait strategy \"spin\""},
      {"ring not a power of two", Edit({}, "[threads]\ninbound_capacity = 1000\n"),
       "test.toml:29: threads.inbound_capacity: ", "1000 is not a power of two"},
      {"bool as integer", Edit({}, "[snapshots]\non_shutdown = 1\n"),
       "test.toml:29: snapshots.on_shutdown: ", "must be true or false"},
      {"cpu out of range", Edit({}, "[threads.journal]\ncpu = -2\n"),
       "test.toml:29: threads.journal.cpu: ", "-2 is outside -1..4095"},
      // Missing keys: the line is the table's.
      {"missing max_qty", Edit({{22, ""}}),
       "test.toml:15: markets.BTCUSDT.max_qty: ", "missing required key"},
      {"missing scale", Edit({{13, ""}}),
       "test.toml:11: assets.USDT.scale: ", "missing required key"},
      {"missing fee_account", Edit({{3, ""}}),
       "test.toml:1: engine.fee_account: ", "missing required key"},
      {"missing market symbol", Edit({{16, ""}}),
       "test.toml:15: markets[0].symbol: ", "missing required key"},
      {"missing [engine]", Edit({{1, ""}, {2, ""}, {3, ""}, {4, ""}, {5, ""}}),
       "test.toml: engine: ", "missing required table [engine]"},
      {"no markets",
       Edit({{15, ""},
             {16, ""},
             {17, ""},
             {18, ""},
             {19, ""},
             {20, ""},
             {21, ""},
             {22, ""},
             {23, ""},
             {24, ""},
             {25, ""},
             {26, ""},
             {27, ""}}),
       "test.toml: markets: ", "define at least one [[markets]] table"},
      // Wrong TOML types.
      {"float instead of string", Edit({{19, "tick_size = 0.01"}}),
       "test.toml:19: markets.BTCUSDT.tick_size: ",
       "a TOML float is not exact; quote the number, e.g. tick_size = \"0.01\""},
      {"float min_notional", Edit({{24, "min_notional = 5.0"}}),
       "test.toml:24: markets.BTCUSDT.min_notional: ", "a TOML float is not exact"},
      {"integer instead of string", Edit({{22, "max_qty = 9000"}}),
       "test.toml:22: markets.BTCUSDT.max_qty: ",
       "decimals are strings; quote the number: max_qty = \"9000\""},
      {"string instead of integer", Edit({{25, "maker_fee_bps = \"10\""}}),
       "test.toml:25: markets.BTCUSDT.maker_fee_bps: ",
       "must be an integer, got a string (write it without quotes)"},
      {"float fee", Edit({{26, "taker_fee_bps = 0.1"}}),
       "test.toml:26: markets.BTCUSDT.taker_fee_bps: ", "must be an integer, got a float"},
      {"integer symbol", Edit({{12, "symbol = 5"}}),
       "test.toml:12: assets[1].symbol: ", "must be a string, got an integer"},
      {"assets a table", Edit({{7, "[assets]"}, {11, ""}, {12, ""}, {13, ""}}),
       "test.toml:7: assets: ", "must be an array of tables ([[assets]]), got a table"},
      // Bad decimals.
      {"exponent", Edit({{22, "max_qty = \"1e5\""}}), "test.toml:22: markets.BTCUSDT.max_qty: ",
       "\"1e5\" is not a decimal number: exponents are not accepted"},
      {"negative", Edit({{24, "min_notional = \"-5\""}}),
       "test.toml:24: markets.BTCUSDT.min_notional: ", "negative values are not allowed"},
      {"whitespace", Edit({{23, "max_price = \" 1000000\""}}),
       "test.toml:23: markets.BTCUSDT.max_price: ", "whitespace is not allowed"},
      {"nan", Edit({{19, "tick_size = \"NaN\""}}),
       "test.toml:19: markets.BTCUSDT.tick_size: ", "NaN and infinity"},
      {"overflow", Edit({{22, "max_qty = \"100000000000\""}}),
       "test.toml:22: markets.BTCUSDT.max_qty: ", "out of range"},
      // Too many decimal places.
      {"tick finer than the quote scale", Edit({{13, "scale = 2"}, {19, "tick_size = \"0.001\""}}),
       "test.toml:19: markets.BTCUSDT.tick_size: ",
       "0.001 has more decimal places than USDT's scale 2"},
      {"step finer than the base scale", Edit({{20, "step_size = \"0.000000001\""}}),
       "test.toml:20: markets.BTCUSDT.step_size: ",
       "0.000000001 has more decimal places than BTC's scale 8"},
      // Not a multiple of the step.
      {"min_qty off-step", Edit({{21, "min_qty = \"0.00015\""}}),
       "test.toml:21: markets.BTCUSDT.min_qty: ", "0.00015 is not a multiple of step_size 0.0001"},
      {"max_price off-tick", Edit({{23, "max_price = \"1000000.005\""}}),
       "test.toml:23: markets.BTCUSDT.max_price: ",
       "1000000.005 is not a multiple of tick_size 0.01"},
      // References and duplicates.
      {"unknown quote asset", Edit({{18, "quote = \"USDC\""}}),
       "test.toml:18: markets.BTCUSDT.quote: ", "unknown asset \"USDC\" (defined: BTC, USDT)"},
      {"unknown base asset", Edit({{17, "base = \"ETH\""}}),
       "test.toml:17: markets.BTCUSDT.base: ", "unknown asset \"ETH\""},
      {"duplicate asset", Edit({{12, "symbol = \"BTC\""}}),
       "test.toml:12: assets.BTC.symbol: ", "duplicate asset symbol BTC (first defined at line 8)"},
      {"duplicate market", Edit({}, second_market), "test.toml:30: markets.BTCUSDT.symbol: ",
       "duplicate market symbol BTCUSDT (first defined at line 16)"},
      // tick x lot.
      {"tick x lot not whole", Edit({{20, "step_size = \"0.00001\""}, {21, "min_qty = \"1\""}}),
       "test.toml:20: markets.BTCUSDT.step_size: ",
       "tick_size 0.01 × step_size 0.00001 is not a whole number of USDT units (the smallest is "
       "0.000001)"},
      {"zero tick", Edit({{19, "tick_size = \"0.00\""}}),
       "test.toml:19: markets.BTCUSDT.tick_size: ", "must be greater than 0"},
      {"zero step", Edit({{20, "step_size = \"0\""}}),
       "test.toml:20: markets.BTCUSDT.step_size: ", "must be greater than 0"},
      // Ranges checked here.
      {"scale 19", Edit({{9, "scale = 19"}}),
       "test.toml:9: assets.BTC.scale: ", "19 is outside 0..18"},
      {"negative max_accounts", Edit({{2, "max_accounts = -1"}}),
       "test.toml:2: engine.max_accounts: ", "-1 is outside 0..4294967295"},
      {"unknown status", Edit({{27, "status = \"OPEN\""}}),
       "test.toml:27: markets.BTCUSDT.status: ",
       "unknown status \"OPEN\" (expected TRADING, HALTED or CANCEL_ONLY)"},
      {"lowercase status", Edit({{27, "status = \"trading\""}}),
       "test.toml:27: markets.BTCUSDT.status: ", "unknown status \"trading\""},
      // Rules of EngineConfig::Validate(), located in the file.
      {"fee above 100%", Edit({{25, "maker_fee_bps = 20000"}}),
       "test.toml:25: markets.BTCUSDT.maker_fee_bps: ", "20000 is outside 0..10000 bps"},
      {"negative fee", Edit({{26, "taker_fee_bps = -1"}}),
       "test.toml:26: markets.BTCUSDT.taker_fee_bps: ", "-1 is outside 0..10000 bps"},
      {"max_qty below min_qty", Edit({{22, "max_qty = \"0\""}}),
       "test.toml:22: markets.BTCUSDT.max_qty: ", "0 lots is below min_qty 1 lots"},
      {"zero min_qty", Edit({{21, "min_qty = \"0\""}}),
       "test.toml:21: markets.BTCUSDT.min_qty: ", "must be at least 1 lot"},
      {"zero max_price", Edit({{23, "max_price = \"0\""}}),
       "test.toml:23: markets.BTCUSDT.max_price: ", "must be at least 1 tick"},
      {"max notional overflow", Edit({{23, "max_price = \"9000000000000\""}}),
       "test.toml:23: markets.BTCUSDT.max_price: ",
       "does not fit in int64; lower max_price or max_qty"},
      {"base == quote", Edit({{18, "quote = \"BTC\""}}),
       "test.toml:18: markets.BTCUSDT.quote: ", "same asset as base (BTC)"},
      {"lowercase asset symbol", Edit({{8, "symbol = \"btc\""}, {17, "base = \"btc\""}}),
       "test.toml:8: assets.btc.symbol: ", "must be uppercase letters and digits"},
      {"empty market symbol", Edit({{16, "symbol = \"\""}}),
       "test.toml:16: markets[0].symbol: ", "must not be empty"},
      {"fee account out of range", Edit({{3, "fee_account = 1000"}}),
       "test.toml:3: engine.fee_account: ", "1000 is not below max_accounts 1000"},
      {"one account", Edit({{2, "max_accounts = 1"}}),
       "test.toml:2: engine.max_accounts: ", "must be at least 2"},
      {"no open orders", Edit({{4, "expected_open_orders = 0"}}),
       "test.toml:4: engine.expected_open_orders: ", "must be at least 1"},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.name);
    Result<EngineConfig> r = ParseConfig(b.text, kName);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    const std::string& msg = r.status().message();
    EXPECT_EQ(msg.rfind(b.prefix, 0), 0u) << msg;
    EXPECT_NE(msg.find(b.detail, b.prefix.size()), std::string::npos) << msg;
  }
}

TEST(LoadConfig, LoadsTheShippedFile) {
  Result<EngineConfig> r = LoadConfig(MB_SOURCE_DIR "/config/matchbook.toml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const EngineConfig& c = *r;
  EXPECT_EQ(c.max_accounts, 100'000u);
  EXPECT_EQ(c.fee_account, AccountId{0});
  EXPECT_EQ(c.expected_open_orders, 65'536u);
  EXPECT_EQ(c.client_id_memory, 65'536u);

  ASSERT_EQ(c.assets.size(), 3u);
  const char* symbols[] = {"BTC", "ETH", "USDT"};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c.assets[i].symbol, symbols[i]);
    EXPECT_EQ(c.assets[i].scale, 8);
  }

  struct Want {
    const char* symbol;
    uint16_t base, quote;
    int64_t tick_units, lot_units, npt, min_qty, max_qty, max_price, min_notional;
  };
  const Want want[] = {
      // BTCUSDT: tick 0.01 USDT, step 0.00001 BTC, max 9000 BTC at 1000000 USDT, min 5 USDT.
      {"BTCUSDT", 0, 2, 1'000'000, 1'000, 10, 1, 900'000'000, 100'000'000, 500'000'000},
      // ETHUSDT: tick 0.01 USDT, step 0.0001 ETH, max 9000 ETH at 100000 USDT, min 5 USDT.
      {"ETHUSDT", 1, 2, 1'000'000, 10'000, 100, 1, 90'000'000, 10'000'000, 500'000'000},
      // ETHBTC: tick 0.00001 BTC, step 0.001 ETH, max 100000 ETH at 10 BTC, min 0.0001 BTC.
      {"ETHBTC", 1, 0, 1'000, 100'000, 1, 1, 100'000'000, 1'000'000, 10'000},
  };
  ASSERT_EQ(c.markets.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const engine::MarketSpec& m = c.markets[i];
    const Want& w = want[i];
    SCOPED_TRACE(w.symbol);
    EXPECT_EQ(m.symbol, w.symbol);
    EXPECT_EQ(m.base, AssetId{w.base});
    EXPECT_EQ(m.quote, AssetId{w.quote});
    EXPECT_EQ(m.tick_units, w.tick_units);
    EXPECT_EQ(m.lot_units, w.lot_units);
    EXPECT_EQ(m.notional_per_tick_lot, w.npt);
    EXPECT_EQ(m.min_qty, Qty{w.min_qty});
    EXPECT_EQ(m.max_qty, Qty{w.max_qty});
    EXPECT_EQ(m.max_price, Price{w.max_price});
    EXPECT_EQ(m.min_notional, Amount{w.min_notional});
    EXPECT_EQ(m.maker_fee_bps, 10);
    EXPECT_EQ(m.taker_fee_bps, 10);
    EXPECT_EQ(m.status, MarketStatus::kTrading);
  }
}

TEST(LoadConfig, NamesTheFileInErrors) {
  const std::string path = ::testing::TempDir() + "/matchbook_config_test.toml";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::string text = Edit({{19, "tick_size = 0.01"}});
    ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), f), text.size());
    std::fclose(f);
  }
  Result<EngineConfig> r = LoadConfig(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind(path + ":19: markets.BTCUSDT.tick_size: ", 0), 0u)
      << r.status().message();
  std::remove(path.c_str());
}

TEST(LoadConfig, MissingFileIsNotFound) {
  Result<EngineConfig> r = LoadConfig("/nonexistent/matchbook.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message().rfind("/nonexistent/matchbook.toml: cannot open", 0), 0u)
      << r.status().message();
}

TEST(ParseConfig, RuntimeTablesAreOptionalAndParsed) {
  auto base = ParseFullConfig(Edit(), "test.toml");
  ASSERT_TRUE(base.ok()) << base.status().message();
  EXPECT_EQ(base->runtime.data_dir, "data");
  EXPECT_EQ(base->runtime.journal.policy, journal::FsyncPolicy::kFsync);
  EXPECT_EQ(base->runtime.engine_stage.wait.kind, concurrency::WaitKind::kBackOff);

  const std::string text = Edit() +
                           "[server]\ndata_dir = \"/var/lib/mb\"\n"
                           "[journal]\nfsync = \"interval:5\"\nsegment_mb = 16\n"
                           "retention = \"archive\"\narchive_dir = \"/srv/archive\"\n"
                           "[snapshots]\nevery_events = 0\nkeep = 5\non_shutdown = false\n"
                           "[threads]\ninbound_capacity = 1024\n"
                           "[threads.engine]\nwait = \"busy-spin\"\ncpu = 1\nrealtime = true\n"
                           "[gateway]\nhost = \"0.0.0.0\"\nport = 9000\nio_threads = 4\n"
                           "weight_per_minute = 1200\nadmin_remote = true\n"
                           "orders_per_10s = 50\norders_per_day = 160000\n"
                           "ws_send_queue_messages = 100\nhistory_orders = 50\n"
                           "ws_slow_close_grace_ms = 7000\nws_write_interval_us = 2500\n"
                           "[projection]\nbackend = \"postgres\"\nurl = \"postgresql://h/db\"\n"
                           "batch_events = 50\ncatchup_batch_events = 500\n"
                           "wal_max_mb = 16\ncache_mb = 8\n";
  auto c = ParseFullConfig(text, "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->runtime.data_dir, "/var/lib/mb");
  EXPECT_EQ(c->runtime.journal.policy, journal::FsyncPolicy::kInterval);
  EXPECT_EQ(c->runtime.journal.interval_ms, 5u);
  EXPECT_EQ(c->runtime.retention, journal::Retention::kArchive);
  EXPECT_EQ(c->runtime.archive_dir, "/srv/archive");
  EXPECT_EQ(base->runtime.retention, journal::Retention::kKeep);
  EXPECT_EQ(c->runtime.journal.segment_bytes, uint64_t{16} << 20);
  EXPECT_EQ(c->runtime.snapshots.every_events, 0u);
  EXPECT_EQ(c->runtime.snapshots.keep, 5u);
  EXPECT_FALSE(c->runtime.snapshots.on_shutdown);
  EXPECT_EQ(c->runtime.inbound_capacity, 1024u);
  EXPECT_EQ(c->runtime.engine_stage.wait.kind, concurrency::WaitKind::kBusySpin);
  EXPECT_EQ(c->runtime.engine_stage.cpu, 1);
  EXPECT_TRUE(c->runtime.engine_stage.realtime);
  EXPECT_EQ(c->runtime.journal_stage.cpu, -1) << "the other stage keeps its defaults";
  const gateway::GatewayOptions& g = c->runtime.gateway;
  EXPECT_EQ(g.server.host, "0.0.0.0");
  EXPECT_EQ(g.server.port, 9000);
  EXPECT_EQ(g.server.io_threads, 4);
  EXPECT_EQ(g.key_limit.weight_per_minute, 1200u);
  EXPECT_EQ(g.key_limit.burst, 1200u);
  EXPECT_TRUE(g.admin_remote);
  EXPECT_EQ(g.server.ws_send_queue_messages, 100u);
  EXPECT_EQ(g.server.ws_slow_close_grace_ms, 7000u);
  EXPECT_EQ(g.server.ws_write_interval_us, 2500u);
  EXPECT_EQ(base->runtime.gateway.server.ws_write_interval_us, 0u);
  EXPECT_EQ(base->runtime.gateway.server.ws_slow_close_grace_ms, 2000u);
  EXPECT_EQ(g.read_side.history_orders, 50u);
  EXPECT_EQ(g.ip_limit.weight_per_minute, 12000u) << "unset keys keep their defaults";
  EXPECT_EQ(g.order_limit.per_10s, 50u);
  EXPECT_EQ(g.order_limit.per_day, 160000u);
  EXPECT_EQ(base->runtime.gateway.order_limit.per_10s, 0u) << "no ORDERS limit unless configured";
  EXPECT_EQ(base->runtime.gateway.server.port, 8080);
  const ProjectionConfig& p = c->runtime.projection;
  EXPECT_EQ(p.store.backend, "postgres");
  EXPECT_EQ(p.store.url, "postgresql://h/db");
  EXPECT_EQ(p.batch_events, 50u);
  EXPECT_EQ(p.catchup_batch_events, 500u);
  EXPECT_EQ(p.batch_wait_ms, 50u) << "unset keys keep their defaults";
  EXPECT_EQ(p.store.wal_max_bytes, uint64_t{16} << 20);
  EXPECT_EQ(p.store.cache_bytes, uint64_t{8} << 20);
  EXPECT_EQ(base->runtime.projection.store.backend, "off")
      << "the SQL projection is off by default";
  EXPECT_EQ(base->runtime.history.cache_mb, 64u);
  EXPECT_EQ(base->runtime.history.write_buffer_kb, 16384u);
  EXPECT_EQ(base->runtime.projection.store.wal_max_bytes, uint64_t{64} << 20);

  // A ceiling below what the store works with, or not a number: refused with the field.
  for (const char* bad : {"wal_max_mb = 3", "wal_max_mb = \"64\"", "cache_mb = 0"}) {
    auto r = ParseFullConfig(Edit() + "[projection]\n" + bad + "\n", "test.toml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("projection."), std::string::npos) << r.status().message();
  }
}

TEST(ParseConfig, MetricsTableIsOptionalAndParsed) {
  auto base = ParseFullConfig(Edit(), "test.toml");
  ASSERT_TRUE(base.ok()) << base.status().message();
  const MetricsConfig& d = base->runtime.metrics;
  EXPECT_FALSE(d.remote);
  EXPECT_EQ(d.port, 0);
  EXPECT_EQ(d.flight_threshold_ms, 50u);
  EXPECT_EQ(d.flight_window_ms, 5000u);
  EXPECT_EQ(d.flight_capacity, 65536u);
  EXPECT_EQ(d.flight_keep, 20u);
  EXPECT_EQ(d.flight_max_age_hours, 0u);

  auto c = ParseFullConfig(Edit() +
                               "[metrics]\nremote = true\nport = 9100\nflight_threshold_ms = 0\n"
                               "flight_window_ms = 2000\nflight_capacity = 1024\nflight_keep = 3\n"
                               "flight_max_age_hours = 48\n",
                           "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const MetricsConfig& m = c->runtime.metrics;
  EXPECT_TRUE(m.remote);
  EXPECT_EQ(m.port, 9100);
  EXPECT_EQ(m.flight_threshold_ms, 0u);
  EXPECT_EQ(m.flight_window_ms, 2000u);
  EXPECT_EQ(m.flight_capacity, 1024u);
  EXPECT_EQ(m.flight_keep, 3u);
  EXPECT_EQ(m.flight_max_age_hours, 48u);

  auto partial = ParseFullConfig(Edit() + "[metrics]\nport = 9101\n", "test.toml");
  ASSERT_TRUE(partial.ok()) << partial.status().message();
  EXPECT_EQ(partial->runtime.metrics.port, 9101);
  EXPECT_EQ(partial->runtime.metrics.flight_threshold_ms, 50u) << "unset keys keep their defaults";
}

TEST(ParseConfig, VenueAndBusTableAreOptionalAndParsed) {
  auto base = ParseFullConfig(Edit(), "test.toml");
  ASSERT_TRUE(base.ok()) << base.status().message();
  EXPECT_EQ(base->runtime.venue, "matchbook");
  EXPECT_TRUE(base->runtime.bus.nats.empty()) << "no bus unless asked for";
  EXPECT_EQ(base->runtime.bus.replicas, 1u);
  EXPECT_FALSE(base->runtime.bus.replicas_set) << "an existing stream keeps more replicas";
  EXPECT_EQ(base->runtime.bus.max_age_hours, 168u);

  // A top-level key precedes every table.
  auto c = ParseFullConfig("venue = \"east-1\"\n" + Edit() +
                               "[bus]\nnats = \"nats://a:4222,nats://b:4222\"\n"
                               "stream = \"JOURNAL\"\nsubject = \"x.journal\"\nreplicas = 3\n"
                               "max_mb = 1024\nmax_age_hours = 24\nmessage_kb = 64\n"
                               "linger_us = 0\ntimeout_ms = 500\n",
                           "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->runtime.venue, "east-1");
  const BusConfig& b = c->runtime.bus;
  EXPECT_EQ(b.nats, "nats://a:4222,nats://b:4222");
  EXPECT_EQ(b.stream, "JOURNAL");
  EXPECT_EQ(b.subject, "x.journal");
  EXPECT_EQ(b.replicas, 3u);
  EXPECT_TRUE(b.replicas_set);
  EXPECT_EQ(b.max_mb, 1024u);
  EXPECT_EQ(b.max_age_hours, 24u);
  EXPECT_EQ(b.message_kb, 64u);
  EXPECT_EQ(b.linger_us, 0u);
  EXPECT_EQ(b.timeout_ms, 500u);

  const std::pair<std::string, std::string> bad[] = {
      {"venue = \"a.b\"\n" + Edit(), "venue: venue \"a.b\""},
      {"venue = 5\n" + Edit(), "venue"},
      {Edit() + "[bus]\nnats = \"http://a:4222\"\n", "bus.nats: "},
      {Edit() + "[bus]\nnats = \"a\"\n", "bus.nats: "},
      {Edit() + "[bus]\nreplicas = 0\n", "bus.replicas: "},
      {Edit() + "[bus]\nreplicas = 7\n", "bus.replicas: "},
      {Edit() + "[bus]\nreplicas = 2\n", "bus.replicas: 2: 1, 3 or 5"},
      {Edit() + "[bus]\nsubject = \"a..b\"\n", "bus.subject: "},
      {Edit() + "[bus]\nstream = \"A.B\"\n", "bus.stream: "},
      {Edit() + "[bus]\nsubject = \"mb.*\"\n", "bus.subject: "},
      {Edit() + "[bus]\nsubjet = \"x\"\n", "bus.subjet: "},
      {Edit() + "[bus]\nmessage_kb = 2000\n", "bus.message_kb: "},
  };
  for (const auto& [text, want] : bad) {
    auto r = ParseFullConfig(text, "test.toml");
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

TEST(ParseConfig, ReplicationTable) {
  auto base = ParseFullConfig(Edit(), "test.toml");
  ASSERT_TRUE(base.ok()) << base.status().message();
  EXPECT_EQ(base->runtime.replication.ack, AckPolicy::kLocal) << "local unless asked for";
  EXPECT_FALSE(base->runtime.replication.standby);
  EXPECT_EQ(base->runtime.replication.lease_ttl_ms, 2000u);
  EXPECT_FALSE(base->runtime.replication.leadership) << "no lease without [replication]";

  auto c = ParseFullConfig(
      Edit() + "[replication]\nack = \"replicated\"\nstandby = true\nlease_ttl_ms = 5000\n",
      "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->runtime.replication.ack, AckPolicy::kReplicated);
  EXPECT_TRUE(c->runtime.replication.standby);
  EXPECT_EQ(c->runtime.replication.lease_ttl_ms, 5000u);
  EXPECT_TRUE(c->runtime.replication.leadership);

  const std::pair<std::string, std::string> bad[] = {
      {Edit() + "[replication]\nack = \"quorum\"\n",
       "replication.ack: \"quorum\": local or replicated"},
      {Edit() + "[replication]\nack = 1\n", "replication.ack"},
      {Edit() + "[replication]\nstandby = \"yes\"\n", "replication.standby"},
      {Edit() + "[replication]\nlease_ttl_ms = 100\n", "replication.lease_ttl_ms"},
      {Edit() + "[replication]\nlease_ttl = 2000\n", "replication.lease_ttl"},
  };
  for (const auto& [text, want] : bad) {
    auto r = ParseFullConfig(text, "test.toml");
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(ParseAckPolicy("local").value(), AckPolicy::kLocal);
  EXPECT_FALSE(ParseAckPolicy("").ok());
}

TEST(ParseConfig, TrustedReplicasAreAddresses) {
  auto base = ParseFullConfig(Edit(), "test.toml");
  ASSERT_TRUE(base.ok());
  EXPECT_TRUE(base->runtime.gateway.trusted_replicas.empty()) << "no replica is trusted unasked";
  auto c = ParseFullConfig(Edit() + "[gateway]\ntrusted_replicas = \"10.0.0.5, ::1,127.0.0.1\"\n",
                           "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->runtime.gateway.trusted_replicas,
            (std::vector<std::string>{"10.0.0.5", "::1", "127.0.0.1"}));
  for (const char* bad : {"replica-1", "10.0.0.5,", "10.0.0.300"}) {
    auto r =
        ParseFullConfig(Edit() + "[gateway]\ntrusted_replicas = \"" + bad + "\"\n", "test.toml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("gateway.trusted_replicas: "), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("is not an IP address"), std::string::npos);
  }
}

TEST(ParseConfig, VenuesTransfersAndAssetWithdrawalRulesAreParsed) {
  auto base = ParseFullConfig(Edit(), kName);
  ASSERT_TRUE(base.ok());
  EXPECT_TRUE(base->runtime.transfers.venues.empty());
  EXPECT_EQ(base->runtime.transfers.dispatch, transfer::DispatchMode::kPipelined);
  EXPECT_EQ(base->engine.assets[0].withdraw_fee, 0);
  EXPECT_TRUE(base->engine.assets[0].withdraw_enabled);
  const std::string venues =
      "[[venues]]\nname = \"beta\"\nurl = \"http://10.0.0.2:8080\"\n"
      "secret = \"0123456789abcdef\"\n"
      "[transfers]\ndispatch = \"sequential\"\nwindow = 64\nbatch = 8\nretry_max_ms = 1000\n";
  auto c = ParseFullConfig("venue = \"alpha\"\n" +
                               Edit({{9,
                                      "scale = 8\nwithdraw_fee = \"0.0005\"\n"
                                      "withdraw_min = \"0.001\"\nwithdraw_enabled = false"}}) +
                               venues,
                           kName);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->runtime.transfers.venues.size(), 1u);
  EXPECT_EQ(c->runtime.transfers.venues[0].name, "beta");
  EXPECT_EQ(c->runtime.transfers.venues[0].url, "http://10.0.0.2:8080");
  EXPECT_EQ(c->runtime.transfers.dispatch, transfer::DispatchMode::kSequential);
  EXPECT_EQ(c->runtime.transfers.window, 64u);
  EXPECT_EQ(c->runtime.transfers.batch, 8u);
  EXPECT_EQ(c->engine.assets[0].withdraw_fee, 50'000);
  EXPECT_EQ(c->engine.assets[0].withdraw_min, 100'000);
  EXPECT_FALSE(c->engine.assets[0].withdraw_enabled);
  EXPECT_EQ(mb::engine::HashConfig(c->engine), mb::engine::HashConfig(base->engine))
      << "withdrawal rules are not part of the engine's state";
  const std::pair<std::string, std::string> bad[] = {
      {"[[venues]]\nname = \"beta\"\nurl = \"https://x:1/api\"\nsecret = \"0123456789abcdef\"\n",
       "venues[0].url"},
      {"[[venues]]\nname = \"beta\"\nurl = \"https://x:1\"\nsecret = \"0123456789abcdef\"\n"
       "ca_file = 1\n",
       "venues[0].ca_file"},
      {"[tls]\ncert_file = \"a.pem\"\n", "tls: cert_file and key_file go together"},
      {"[[venues]]\nname = \"beta\"\nurl = \"http://x:1\"\nsecret = \"short\"\n",
       "venues[0].secret: at least 16"},
      {"[[venues]]\nname = \"alpha\"\nurl = \"http://x:1\"\nsecret = \"0123456789abcdef\"\n",
       "this venue's own name"},
      {venues +
           "[[venues]]\nname = \"beta\"\nurl = \"http://y:1\"\nsecret = \"0123456789abcdef\"\n",
       "listed twice"},
      {"[[venues]]\nname = \"beta\"\nurl = \"http://x:1\"\nsecret = \"0123456789abcdef\"\nport = "
       "1\n",
       "venues[0].port: unknown key"},
      {"[transfers]\ndispatch = \"async\"\n", "transfers.dispatch: unknown mode"},
      {"[transfers]\nretry_max_ms = 60000\n", "transfers.retry_max_ms"},
  };
  for (const auto& [text, want] : bad) {
    auto r = ParseFullConfig("venue = \"alpha\"\n" + Edit() + text, kName);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  auto fee = ParseFullConfig(Edit({{9, "scale = 8\nwithdraw_fee = 0.1"}}), kName);
  ASSERT_FALSE(fee.ok());
  EXPECT_NE(fee.status().message().find("withdraw_fee"), std::string::npos);
}

// [[markets]] order_types, trailing_delta and max_num_algo_orders: the
// gateway's MarketRules, every type enabled and Binance's usual bounds by
// default, not part of the engine's configuration hash.
TEST(ParseConfig, MarketOrderRulesAreParsed) {
  auto base = ParseFullConfig(Edit(), kName);
  ASSERT_TRUE(base.ok()) << base.status().message();
  ASSERT_EQ(base->runtime.gateway.market_rules.size(), 1u);
  const gateway::MarketRules& d = base->runtime.gateway.market_rules[0];
  for (const engine::OrderType t : gateway::kOrderTypes) EXPECT_TRUE(d.Allows(t));
  EXPECT_EQ(d.min_trailing_above, 10);
  EXPECT_EQ(d.max_trailing_above, 2000);
  EXPECT_EQ(d.min_trailing_below, 10);
  EXPECT_EQ(d.max_trailing_below, 2000);
  EXPECT_EQ(d.max_num_algo_orders, 5u);

  auto c = ParseFullConfig(
      Edit({{27,
             "status = \"TRADING\"\n"
             "order_types = [\"LIMIT\", \"MARKET\", \"STOP_LOSS_LIMIT\"]\n"
             "trailing_delta = { min_above = 1, max_above = 9999, min_below = 50 }\n"
             "max_num_algo_orders = 0"}}),
      kName);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const gateway::MarketRules& r = c->runtime.gateway.market_rules.at(0);
  EXPECT_TRUE(r.Allows(engine::OrderType::kLimit));
  EXPECT_TRUE(r.Allows(engine::OrderType::kMarket));
  EXPECT_TRUE(r.Allows(engine::OrderType::kStopLossLimit));
  EXPECT_FALSE(r.Allows(engine::OrderType::kLimitMaker));
  EXPECT_FALSE(r.Allows(engine::OrderType::kStopLoss));
  EXPECT_FALSE(r.Allows(engine::OrderType::kTakeProfit));
  EXPECT_FALSE(r.Allows(engine::OrderType::kTakeProfitLimit));
  EXPECT_EQ(r.min_trailing_above, 1);
  EXPECT_EQ(r.max_trailing_above, 9999);
  EXPECT_EQ(r.min_trailing_below, 50);
  EXPECT_EQ(r.max_trailing_below, 2000);
  EXPECT_EQ(r.max_num_algo_orders, 0u);
  EXPECT_EQ(engine::HashConfig(c->engine), engine::HashConfig(base->engine))
      << "the gateway's order rules are not part of the engine's state";

  const std::pair<std::string, std::string> bad[] = {
      {"order_types = \"LIMIT\"", "markets.BTCUSDT.order_types: must be an array"},
      {"order_types = []", "must list at least one order type"},
      {"order_types = [\"LIMIT\", \"OCO\"]",
       "unknown order type \"OCO\" (expected LIMIT, LIMIT_MAKER, MARKET, STOP_LOSS, "
       "STOP_LOSS_LIMIT, TAKE_PROFIT, TAKE_PROFIT_LIMIT)"},
      {"order_types = [\"LIMIT\", \"LIMIT\"]", "LIMIT is listed twice"},
      {"order_types = [1]", "must be an array of strings"},
      {"trailing_delta = { min_above = 0 }",
       "markets.BTCUSDT.trailing_delta.min_above: 0 is outside"},
      {"trailing_delta = { max_below = 10000 }", "trailing_delta.max_below: 10000 is outside"},
      {"trailing_delta = { min_above = 300, max_above = 200 }",
       "min_above 300 is above max_above 200"},
      {"trailing_delta = { min_below = 3000 }", "min_below 3000 is above max_below 2000"},
      {"trailing_delta = { min = 10 }", "markets.BTCUSDT.trailing_delta.min: unknown key"},
      {"trailing_delta = 10", "markets.BTCUSDT.trailing_delta: must be a table"},
      {"max_num_algo_orders = -1", "markets.BTCUSDT.max_num_algo_orders: -1 is outside"},
  };
  for (const auto& [line, want] : bad) {
    auto r2 = ParseFullConfig(Edit({{27, "status = \"TRADING\"\n" + line}}), kName);
    ASSERT_FALSE(r2.ok()) << line;
    EXPECT_NE(r2.status().message().find(want), std::string::npos) << r2.status().message();
    EXPECT_NE(r2.status().message().find("test.toml:28:"), std::string::npos)
        << r2.status().message();
  }
}

// The shipped configuration enables every order type on every market.
TEST(LoadConfig, TheShippedFileEnablesEveryOrderType) {
  auto r = LoadFullConfig(MB_SOURCE_DIR "/config/matchbook.toml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->runtime.gateway.market_rules.size(), r->engine.markets.size());
  for (const gateway::MarketRules& m : r->runtime.gateway.market_rules) {
    for (const engine::OrderType t : gateway::kOrderTypes) EXPECT_TRUE(m.Allows(t));
    EXPECT_EQ(m.max_num_algo_orders, 5u);
    EXPECT_EQ(m.min_trailing_above, 10);
    EXPECT_EQ(m.max_trailing_below, 2000);
  }
}

}  // namespace
}  // namespace mb::app
