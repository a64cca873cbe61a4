#include "engine/market.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/strong.h"
#include "engine/types.h"

namespace mb::engine {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// The demo configuration of config/matchbook.toml, in engine units.
EngineConfig DemoConfig() {
  EngineConfig c;
  c.assets = {{"BTC", 8}, {"ETH", 8}, {"USDT", 8}};
  MarketSpec btcusdt;
  btcusdt.symbol = "BTCUSDT";
  btcusdt.base = AssetId{0};
  btcusdt.quote = AssetId{2};
  btcusdt.tick_units = 1'000'000;  // 0.01 USDT
  btcusdt.lot_units = 1'000;       // 0.00001 BTC
  btcusdt.min_qty = Qty{1};
  btcusdt.max_qty = Qty{900'000'000};      // 9000 BTC
  btcusdt.max_price = Price{100'000'000};  // 1000000 USDT
  btcusdt.min_notional = Amount{500'000'000};
  btcusdt.maker_fee_bps = 10;
  btcusdt.taker_fee_bps = 10;

  MarketSpec ethusdt = btcusdt;
  ethusdt.symbol = "ETHUSDT";
  ethusdt.base = AssetId{1};
  ethusdt.lot_units = 10'000;             // 0.0001 ETH
  ethusdt.max_qty = Qty{90'000'000};      // 9000 ETH
  ethusdt.max_price = Price{10'000'000};  // 100000 USDT

  MarketSpec ethbtc = btcusdt;
  ethbtc.symbol = "ETHBTC";
  ethbtc.base = AssetId{1};
  ethbtc.quote = AssetId{0};
  ethbtc.tick_units = 1'000;             // 0.00001 BTC
  ethbtc.lot_units = 100'000;            // 0.001 ETH
  ethbtc.max_qty = Qty{100'000'000};     // 100000 ETH
  ethbtc.max_price = Price{1'000'000};   // 10 BTC
  ethbtc.min_notional = Amount{10'000};  // 0.0001 BTC

  c.markets = {btcusdt, ethusdt, ethbtc};
  c.max_accounts = 100'000;
  c.fee_account = AccountId{0};
  return c;
}

TEST(EngineConfigValidate, AcceptsTheDemoConfigAndDerivesNotionalPerTickLot) {
  EngineConfig c = DemoConfig();
  Status s = c.Validate();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.markets[0].notional_per_tick_lot, 10);
  EXPECT_EQ(c.markets[1].notional_per_tick_lot, 100);
  EXPECT_EQ(c.markets[2].notional_per_tick_lot, 1);
  // Idempotent.
  s = c.Validate();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.markets[0].notional_per_tick_lot, 10);
}

TEST(EngineConfigValidate, AcceptsBoundaryValues) {
  EngineConfig c = DemoConfig();
  c.assets.push_back({"X0", 0});
  c.assets.push_back({"X18", 18});
  c.max_accounts = (uint32_t{1} << 31) - 1;
  c.fee_account = AccountId{(uint32_t{1} << 31) - 2};
  c.expected_open_orders = 1;
  c.client_id_memory = 1;
  c.markets[0].maker_fee_bps = 0;
  c.markets[0].taker_fee_bps = 10'000;
  c.markets[0].min_notional = Amount{0};
  c.markets[0].max_qty = c.markets[0].min_qty;
  c.markets[0].max_price = Price{1};
  c.markets[0].status = MarketStatus::kCancelOnly;
  c.markets[1].status = MarketStatus::kHalted;
  // max_price x max_qty x npt == INT64_MAX exactly: 7^2 x 73 x 127 x 337 x 92737 x 649657.
  MarketSpec edge;
  edge.symbol = "EDGE";
  edge.base = AssetId{3};  // scale 0: npt = tick x lot
  edge.quote = AssetId{4};
  edge.tick_units = 7;
  edge.lot_units = 73;
  edge.min_qty = Qty{1};
  edge.max_qty = Qty{7 * 127 * 337};
  edge.max_price = Price{int64_t{92737} * 649657};
  c.markets.push_back(edge);
  Status s = c.Validate();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.markets.back().notional_per_tick_lot, 7 * 73);
}

struct Broken {
  const char* name;
  std::function<void(EngineConfig&)> breaks;
  const char* message;  // the message starts with this
};

TEST(EngineConfigValidate, RefusesEachBrokenRuleNamingTheField) {
  const std::vector<Broken> cases = {
      {"no assets", [](EngineConfig& c) { c.assets.clear(); },
       "assets: at least one asset is required"},
      {"too many assets",
       [](EngineConfig& c) {
         c.assets.resize(65535, AssetSpec{"A", 8});
       },
       "assets: 65535 assets do not fit AssetId"},
      {"empty asset symbol", [](EngineConfig& c) { c.assets[1].symbol = ""; },
       "assets[1] ().symbol: must not be empty"},
      {"lowercase asset symbol", [](EngineConfig& c) { c.assets[0].symbol = "btc"; },
       "assets[0] (btc).symbol: must be uppercase letters and digits"},
      {"asset symbol with a dash", [](EngineConfig& c) { c.assets[0].symbol = "BT-C"; },
       "assets[0] (BT-C).symbol: must be uppercase"},
      {"duplicate asset symbol", [](EngineConfig& c) { c.assets[2].symbol = "BTC"; },
       "assets[2] (BTC).symbol: duplicate of assets[0]"},
      {"negative scale", [](EngineConfig& c) { c.assets[0].scale = -1; },
       "assets[0] (BTC).scale: -1 is outside 0..18"},
      {"scale 19", [](EngineConfig& c) { c.assets[2].scale = 19; },
       "assets[2] (USDT).scale: 19 is outside 0..18"},
      {"no markets", [](EngineConfig& c) { c.markets.clear(); },
       "markets: at least one market is required"},
      {"too many markets", [](EngineConfig& c) { c.markets.resize(65535, c.markets[0]); },
       "markets: 65535 markets do not fit MarketId"},
      {"empty market symbol", [](EngineConfig& c) { c.markets[1].symbol = ""; },
       "markets[1] ().symbol: must not be empty"},
      {"duplicate market symbol", [](EngineConfig& c) { c.markets[2].symbol = "BTCUSDT"; },
       "markets[2] (BTCUSDT).symbol: duplicate of markets[0]"},
      {"unknown base", [](EngineConfig& c) { c.markets[0].base = AssetId{3}; },
       "markets[0] (BTCUSDT).base: asset id 3 does not exist"},
      {"unknown quote", [](EngineConfig& c) { c.markets[1].quote = AssetId{65535}; },
       "markets[1] (ETHUSDT).quote: asset id 65535 does not exist"},
      {"base == quote", [](EngineConfig& c) { c.markets[2].quote = AssetId{1}; },
       "markets[2] (ETHBTC).quote: same asset as base (ETH)"},
      {"zero tick", [](EngineConfig& c) { c.markets[0].tick_units = 0; },
       "markets[0] (BTCUSDT).tick_units: must be positive, got 0"},
      {"negative tick", [](EngineConfig& c) { c.markets[0].tick_units = -5; },
       "markets[0] (BTCUSDT).tick_units: must be positive, got -5"},
      {"zero lot", [](EngineConfig& c) { c.markets[2].lot_units = 0; },
       "markets[2] (ETHBTC).lot_units: must be positive, got 0"},
      {"tick x lot below one quote unit",
       [](EngineConfig& c) {
         c.markets[2].tick_units = 1;
         c.markets[2].lot_units = 1;
       },
       "markets[2] (ETHBTC).lot_units: tick × lot is not a whole number of quote units "
       "(tick_units 1 × lot_units 1 / 10^8, ETH's scale)"},
      {"tick x lot whole with an odd lot",
       [](EngineConfig& c) { c.markets[0].lot_units = 1'500; },  // 1.5e9 / 1e8 = 15
       nullptr},
      {"tick x lot fractional",
       [](EngineConfig& c) { c.markets[0].lot_units = 1'050; },  // 1.05e9 / 1e8 = 10.5
       "markets[0] (BTCUSDT).lot_units: tick × lot is not a whole number of quote units"},
      {"tick x lot beyond int64",
       [](EngineConfig& c) {
         c.assets[0].scale = 0;
         c.markets[0].tick_units = kMax;
         c.markets[0].lot_units = 2;
       },
       "markets[0] (BTCUSDT).lot_units: tick × lot does not fit in int64"},
      {"zero min_qty", [](EngineConfig& c) { c.markets[0].min_qty = Qty{0}; },
       "markets[0] (BTCUSDT).min_qty: must be at least 1 lot, got 0"},
      {"max_qty below min_qty",
       [](EngineConfig& c) {
         c.markets[1].min_qty = Qty{10};
         c.markets[1].max_qty = Qty{9};
       },
       "markets[1] (ETHUSDT).max_qty: 9 lots is below min_qty 10 lots"},
      {"zero max_price", [](EngineConfig& c) { c.markets[0].max_price = Price{0}; },
       "markets[0] (BTCUSDT).max_price: must be at least 1 tick, got 0"},
      {"max notional beyond int64",
       [](EngineConfig& c) { c.markets[0].max_price = Price{2'000'000'000}; },
       "markets[0] (BTCUSDT).max_price: max_price 2000000000 ticks × max_qty 900000000 lots × "
       "10 quote units per tick-lot does not fit in int64; lower max_price or max_qty"},
      {"max notional one past int64",
       [](EngineConfig& c) {
         c.assets[0].scale = 0;
         c.markets[0].tick_units = 7;
         c.markets[0].lot_units = 73;
         c.markets[0].max_qty = Qty{7 * 127 * 337};
         c.markets[0].max_price = Price{int64_t{92737} * 649657 + 1};
       },
       "markets[0] (BTCUSDT).max_price: "},
      {"max base quantity beyond int64",
       [](EngineConfig& c) {
         c.markets[2].max_price = Price{1};
         c.markets[2].max_qty = Qty{kMax / 100'000 + 1};
       },
       "markets[2] (ETHBTC).max_qty: max_qty 92233720368548 lots × lot_units 100000 does not "
       "fit in int64 base units"},
      {"negative min_notional", [](EngineConfig& c) { c.markets[0].min_notional = Amount{-1}; },
       "markets[0] (BTCUSDT).min_notional: must not be negative, got -1"},
      {"negative maker fee", [](EngineConfig& c) { c.markets[0].maker_fee_bps = -1; },
       "markets[0] (BTCUSDT).maker_fee_bps: -1 is outside 0..10000 bps"},
      {"maker fee above 100%", [](EngineConfig& c) { c.markets[0].maker_fee_bps = 10'001; },
       "markets[0] (BTCUSDT).maker_fee_bps: 10001 is outside 0..10000 bps"},
      {"taker fee above 100%", [](EngineConfig& c) { c.markets[1].taker_fee_bps = 20'000; },
       "markets[1] (ETHUSDT).taker_fee_bps: 20000 is outside 0..10000 bps"},
      {"negative taker fee", [](EngineConfig& c) { c.markets[1].taker_fee_bps = -3; },
       "markets[1] (ETHUSDT).taker_fee_bps: -3 is outside 0..10000 bps"},
      {"invalid status",
       [](EngineConfig& c) { c.markets[2].status = static_cast<MarketStatus>(3); },
       "markets[2] (ETHBTC).status: invalid value 3"},
      {"one account", [](EngineConfig& c) { c.max_accounts = 1; },
       "max_accounts: must be at least 2"},
      {"no accounts", [](EngineConfig& c) { c.max_accounts = 0; },
       "max_accounts: must be at least 2"},
      {"2^31 accounts", [](EngineConfig& c) { c.max_accounts = uint32_t{1} << 31; },
       "max_accounts: must be below 2^31, got 2147483648"},
      {"fee account out of range", [](EngineConfig& c) { c.fee_account = AccountId{100'000}; },
       "fee_account: 100000 is not below max_accounts 100000"},
      {"no open orders expected", [](EngineConfig& c) { c.expected_open_orders = 0; },
       "expected_open_orders: must be at least 1"},
      {"no client id memory", [](EngineConfig& c) { c.client_id_memory = 0; },
       "client_id_memory: must be at least 1"},
  };
  for (const Broken& b : cases) {
    SCOPED_TRACE(b.name);
    EngineConfig c = DemoConfig();
    b.breaks(c);
    Status s = c.Validate();
    if (b.message == nullptr) {  // a control case: still valid
      EXPECT_TRUE(s.ok()) << s.message();
      continue;
    }
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind(b.message, 0), 0u) << s.message();
  }
}

}  // namespace
}  // namespace mb::engine
