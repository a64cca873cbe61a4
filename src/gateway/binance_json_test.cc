#include "gateway/binance_json.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/strong.h"
#include "engine/event.h"
#include "engine/market.h"
#include "engine/types.h"
#include "marketdata/read_side.h"

namespace mb::gateway {
namespace {

using engine::MarketStatus;
using engine::OrderType;
using engine::RejectReason;
using engine::Side;
using engine::StpMode;
using engine::TimeInForce;
using marketdata::BalanceRow;
using marketdata::ExecType;
using marketdata::ExecutionReport;
using marketdata::Fill;
using marketdata::Kline;
using marketdata::KlineInterval;
using marketdata::MarketSnapshot;
using marketdata::OrderRecord;
using marketdata::OrderStatus;
using marketdata::TradeRow;

constexpr AssetId kBtc{0};
constexpr AssetId kEth{1};
constexpr AssetId kUsdt{2};
constexpr AssetId kUsd{3};
constexpr AssetId kPts{4};
constexpr MarketId kBtcUsdt{0};
constexpr MarketId kEthBtc{1};
constexpr MarketId kBtcUsd{2};
constexpr MarketId kBtcPts{3};

// BTCUSDT as config/matchbook.toml defines it, plus markets with other
// scales: ETHBTC (a BTC quote), BTCUSD (a 2-decimal quote, cancel-only) and
// BTCPTS (a 0-decimal quote).
engine::EngineConfig TestConfig() {
  engine::EngineConfig c;
  c.assets = {{"BTC", 8}, {"ETH", 8}, {"USDT", 8}, {"USD", 2}, {"PTS", 0}};
  engine::MarketSpec btcusdt;
  btcusdt.symbol = "BTCUSDT";
  btcusdt.base = kBtc;
  btcusdt.quote = kUsdt;
  btcusdt.tick_units = 1'000'000;  // 0.01 USDT
  btcusdt.lot_units = 1'000;       // 0.00001 BTC
  btcusdt.min_qty = Qty{1};
  btcusdt.max_qty = Qty{900'000'000};          // 9000 BTC
  btcusdt.max_price = Price{100'000'000};      // 1000000 USDT
  btcusdt.min_notional = Amount{500'000'000};  // 5 USDT
  btcusdt.maker_fee_bps = 10;
  btcusdt.taker_fee_bps = 10;

  engine::MarketSpec ethbtc;
  ethbtc.symbol = "ETHBTC";
  ethbtc.base = kEth;
  ethbtc.quote = kBtc;
  ethbtc.tick_units = 1'000;   // 0.00001 BTC
  ethbtc.lot_units = 100'000;  // 0.001 ETH
  ethbtc.min_qty = Qty{1};
  ethbtc.max_qty = Qty{100'000'000};     // 100000 ETH
  ethbtc.max_price = Price{1'000'000};   // 10 BTC
  ethbtc.min_notional = Amount{10'000};  // 0.0001 BTC
  ethbtc.maker_fee_bps = 2;
  ethbtc.taker_fee_bps = 7;

  engine::MarketSpec btcusd;
  btcusd.symbol = "BTCUSD";
  btcusd.base = kBtc;
  btcusd.quote = kUsd;
  btcusd.tick_units = 100;       // 1.00 USD
  btcusd.lot_units = 1'000'000;  // 0.01 BTC
  btcusd.min_qty = Qty{1};
  btcusd.max_qty = Qty{100'000};         // 1000 BTC
  btcusd.max_price = Price{10'000'000};  // 10000000 USD
  btcusd.min_notional = Amount{1'000};   // 10.00 USD
  btcusd.maker_fee_bps = 15;
  btcusd.taker_fee_bps = 5;
  btcusd.status = MarketStatus::kCancelOnly;

  engine::MarketSpec btcpts;
  btcpts.symbol = "BTCPTS";
  btcpts.base = kBtc;
  btcpts.quote = kPts;
  btcpts.tick_units = 10;          // 10 PTS
  btcpts.lot_units = 100'000'000;  // 1 BTC
  btcpts.min_qty = Qty{1};
  btcpts.max_qty = Qty{1'000};
  btcpts.max_price = Price{1'000};

  c.markets = {btcusdt, ethbtc, btcusd, btcpts};
  c.fee_account = AccountId{0};
  const Status s = c.Validate();
  EXPECT_TRUE(s.ok()) << s.message();
  return c;
}

// Parses `text` as JSON; fails the test when it is not.
boost::json::value Parse(const std::string& text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  EXPECT_FALSE(ec) << ec.message() << " in " << text;
  return v;
}

// A success body: valid JSON, an object, and no "code" key (ccxt would take
// the body for an error).
boost::json::object ParseObject(const std::string& text) {
  boost::json::value v = Parse(text);
  EXPECT_TRUE(v.is_object()) << text;
  if (!v.is_object()) return {};
  EXPECT_FALSE(v.as_object().contains("code")) << text;
  return v.as_object();
}

boost::json::array ParseArray(const std::string& text) {
  boost::json::value v = Parse(text);
  EXPECT_TRUE(v.is_array()) << text;
  if (!v.is_array()) return {};
  for (const boost::json::value& e : v.as_array()) {
    if (e.is_object()) {
      EXPECT_FALSE(e.as_object().contains("code")) << text;
    }
  }
  return v.as_array();
}

std::string Str(const boost::json::object& o, const char* key) {
  const boost::json::value* v = o.if_contains(key);
  EXPECT_NE(v, nullptr) << key;
  if (v == nullptr || !v->is_string()) {
    ADD_FAILURE() << key << " is not a string";
    return {};
  }
  return std::string(v->as_string());
}

int64_t Int(const boost::json::object& o, const char* key) {
  const boost::json::value* v = o.if_contains(key);
  EXPECT_NE(v, nullptr) << key;
  if (v == nullptr) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<int64_t>(v->as_uint64());
  ADD_FAILURE() << key << " is not an integer";
  return 0;
}

// --- fixtures built by hand ---

MarketSnapshot BookSnapshot() {
  MarketSnapshot s;
  s.market = kBtcUsdt;
  s.last_update_id = 42;
  s.bids = {{Price{6'500'000}, Qty{150}}, {Price{6'499'999}, Qty{2}}};
  s.asks = {{Price{6'500'001}, Qty{100'000}}};
  return s;
}

TradeRow BtcTrade() {
  TradeRow t;
  t.id = TradeId{7};
  t.market = kBtcUsdt;
  t.price = Price{6'500'000};
  t.qty = Qty{150};
  t.base_qty = Amount{150'000};
  t.notional = Amount{9'750'000'000};
  t.time_ns = 1'700'000'000'123'456'789;
  t.buyer_is_maker = true;
  t.buy_order = OrderId{1001};
  t.sell_order = OrderId{999};
  t.seq = Sequence{1003};
  return t;
}

TradeRow EthTrade() {
  TradeRow t;
  t.id = TradeId{8};
  t.market = kEthBtc;
  t.price = Price{5'000};  // 0.05 BTC
  t.qty = Qty{2'000};      // 2 ETH
  t.base_qty = Amount{200'000'000};
  t.notional = Amount{10'000'000};
  t.time_ns = 1'700'000'001'000'000'000;
  t.buyer_is_maker = false;
  return t;
}

Kline BtcKline() {
  Kline k;
  k.open_time_ms = 1'699'999'980'000;
  k.open = Price{6'500'000};
  k.high = Price{6'510'000};
  k.low = Price{6'490'000};
  k.close = Price{6'505'000};
  k.volume = Qty{300};
  k.base_volume = Amount{300'000};
  k.quote_volume = Amount{19'500'000'000};
  k.taker_buy_base = Amount{100'000};
  k.taker_buy_quote = Amount{6'500'000'000};
  k.trades = 3;
  k.first_trade = TradeId{5};
  k.last_trade = TradeId{7};
  return k;
}

constexpr int64_t kTickerNowMs = 1'700'000'100'000;
constexpr int64_t kNsPerMs = 1'000'000;
constexpr TimeUnit kMs = TimeUnit::kMillisecond;
constexpr TimeUnit kUs = TimeUnit::kMicrosecond;

// The book of BookSnapshot() with 24 h of 1m candles: one closed, one open,
// and the trade that closed the window in the recent trades.
MarketSnapshot TickerSnapshot() {
  MarketSnapshot s = BookSnapshot();
  Kline current;
  current.open_time_ms = 1'700'000'040'000;
  current.open = Price{6'505'000};
  current.high = Price{6'600'000};
  current.low = Price{6'400'000};
  current.close = Price{6'434'967};
  current.volume = Qty{200};
  current.base_volume = Amount{200'001};
  current.quote_volume = Amount{13'000'000'000};
  current.trades = 4;
  current.first_trade = TradeId{8};
  current.last_trade = TradeId{11};
  auto& series = s.klines[static_cast<std::size_t>(KlineInterval::k1m)];
  series.closed = marketdata::KlineHistory::Append(nullptr, BtcKline(), 10);
  series.current = current;
  auto older = std::make_shared<marketdata::TradeChunk>();
  TradeRow last = BtcTrade();
  last.id = TradeId{11};
  last.price = Price{6'434'967};
  last.qty = Qty{120};
  older->rows = {last};
  older->total = 1;
  auto newest = std::make_shared<marketdata::TradeChunk>();  // an empty newest chunk
  newest->older = older;
  newest->total = 1;
  s.trades = newest;
  return s;
}

OrderRecord LimitBuy() {
  OrderRecord o;
  o.id = OrderId{1001};
  o.terms.account = AccountId{5};
  o.terms.market = kBtcUsdt;
  o.terms.side = Side::kBuy;
  o.terms.type = OrderType::kLimit;
  o.terms.tif = TimeInForce::kGtc;
  o.terms.stp = StpMode::kExpireMaker;
  o.terms.price = Price{6'500'000};
  o.terms.qty = Qty{300};
  o.executed = Qty{150};
  o.cumulative_quote = Amount{9'750'000'000};
  o.remaining = Qty{150};
  o.status = OrderStatus::kPartiallyFilled;
  o.client_order_id = ClientOrderId::From("my-order_1");
  o.time_ns = 1'700'000'000'123'456'789;
  o.update_ns = 1'700'000'000'500'000'000;
  o.working = true;
  return o;
}

OrderRecord MarketBuyByQuote() {
  OrderRecord o;
  o.id = OrderId{1002};
  o.terms.account = AccountId{5};
  o.terms.market = kBtcUsdt;
  o.terms.side = Side::kBuy;
  o.terms.type = OrderType::kMarket;
  o.terms.tif = TimeInForce::kIoc;  // what the engine records for MARKET
  o.quote_qty = Amount{10'000'000'000};
  o.executed = Qty{150};
  o.cumulative_quote = Amount{9'750'000'000};
  o.status = OrderStatus::kExpired;
  o.expire_reason = engine::ExpireReason::kNoLiquidity;
  o.time_ns = 1'700'000'000'123'000'000;
  o.update_ns = 1'700'000'000'123'000'000;
  o.working = false;
  return o;
}

Fill BuyFill(uint64_t trade, int64_t lots) {
  Fill f;
  f.trade_id = TradeId{trade};
  f.order_id = OrderId{1001};
  f.account = AccountId{5};
  f.market = kBtcUsdt;
  f.side = Side::kBuy;
  f.price = Price{6'500'000};
  f.qty = Qty{lots};
  f.base_qty = Amount{lots * 1'000};
  f.notional = Amount{lots * 65'000'000};
  f.commission = Amount{lots};  // 0.1 % of lots x 1000 base units
  f.commission_asset = kBtc;
  f.is_maker = false;
  f.time_ns = 1'700'000'000'123'000'000;
  return f;
}

// --- MarketFormat ---

TEST(MarketFormat, FormatsTicksLotsAndUnitsWithTheAssetScales) {
  const engine::EngineConfig c = TestConfig();
  const MarketFormat btcusdt(c, kBtcUsdt);
  EXPECT_EQ(btcusdt.base_scale(), 8);
  EXPECT_EQ(btcusdt.quote_scale(), 8);
  EXPECT_EQ(&btcusdt.spec(), &c.markets[0]);
  EXPECT_EQ(btcusdt.Price(Price{6'500'001}), "65000.01000000");
  EXPECT_EQ(btcusdt.Price(Price{0}), "0.00000000");
  EXPECT_EQ(btcusdt.Price(Price{-1}), "-0.01000000");
  EXPECT_EQ(btcusdt.Qty(Qty{1}), "0.00001000");
  EXPECT_EQ(btcusdt.Base(Amount{1}), "0.00000001");
  EXPECT_EQ(btcusdt.Quote(Amount{-250'000'000}), "-2.50000000");

  const MarketFormat btcusd(c, kBtcUsd);
  EXPECT_EQ(btcusd.quote_scale(), 2);
  EXPECT_EQ(btcusd.Price(Price{12'345}), "12345.00");
  EXPECT_EQ(btcusd.Qty(Qty{3}), "0.03000000");
  EXPECT_EQ(btcusd.Quote(Amount{5}), "0.05");

  const MarketFormat btcpts(c, kBtcPts);
  EXPECT_EQ(btcpts.Price(Price{7}), "70");
  EXPECT_EQ(btcpts.Qty(Qty{2}), "2.00000000");
}

TEST(MarketFormat, FormatsProductsBeyondInt64Exactly) {
  const engine::EngineConfig c = TestConfig();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const MarketFormat btcusdt(c, kBtcUsdt);
  // 9223372036854775807 ticks x 1000000 units: 25 digits.
  EXPECT_EQ(btcusdt.Price(Price{kMax}), "92233720368547758.07000000");
  EXPECT_EQ(btcusdt.Price(Price{kMin}), "-92233720368547758.08000000");
  EXPECT_EQ(btcusdt.Qty(Qty{kMax}), "92233720368547.75807000");
  const MarketFormat btcpts(c, kBtcPts);
  EXPECT_EQ(btcpts.Price(Price{kMax}), "92233720368547758070");
  EXPECT_EQ(btcpts.Price(Price{kMin}), "-92233720368547758080");
}

TEST(AssetAmount, UsesTheAssetScale) {
  const engine::EngineConfig c = TestConfig();
  EXPECT_EQ(AssetAmount(c, kUsdt, Amount{123'456'789}), "1.23456789");
  EXPECT_EQ(AssetAmount(c, kUsd, Amount{-12'345}), "-123.45");
  EXPECT_EQ(AssetAmount(c, kPts, Amount{42}), "42");
  EXPECT_EQ(AssetAmount(c, kEth, Amount{0}), "0.00000000");
}

// --- exchangeInfo ---

TEST(ExchangeInfoJson, GoldenForOneMarket) {
  engine::EngineConfig c = TestConfig();
  c.markets.resize(1);
  const RateLimitJson limits[] = {{"REQUEST_WEIGHT", "MINUTE", 1, 6000}};
  const MarketId markets[] = {MarketId{0}};
  const std::string json = ExchangeInfoJson(c, {}, 1'700'000'000'123, limits, markets);
  EXPECT_EQ(
      json,
      R"({"timezone":"UTC","serverTime":1700000000123,)"
      R"("rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,)"
      R"("limit":6000}],"exchangeFilters":[],"symbols":[)"
      R"({"symbol":"BTCUSDT","status":"TRADING","baseAsset":"BTC","baseAssetPrecision":8,)"
      R"("quoteAsset":"USDT","quotePrecision":8,"quoteAssetPrecision":8,)"
      R"("baseCommissionPrecision":8,"quoteCommissionPrecision":8,)"
      R"("orderTypes":["LIMIT","LIMIT_MAKER","MARKET","STOP_LOSS","STOP_LOSS_LIMIT",)"
      R"("TAKE_PROFIT","TAKE_PROFIT_LIMIT"],"icebergAllowed":true,"ocoAllowed":true,)"
      R"("otoAllowed":true,"opoAllowed":false,"quoteOrderQtyMarketAllowed":true,)"
      R"("allowTrailingStop":true,"cancelReplaceAllowed":true,"amendAllowed":true,)"
      R"("pegInstructionsAllowed":false,"isSpotTradingAllowed":true,"isMarginTradingAllowed":false,)"
      R"("filters":[{"filterType":"PRICE_FILTER","minPrice":"0.01000000",)"
      R"("maxPrice":"1000000.00000000","tickSize":"0.01000000"},)"
      R"({"filterType":"LOT_SIZE","minQty":"0.00001000","maxQty":"9000.00000000",)"
      R"("stepSize":"0.00001000"},)"
      R"({"filterType":"MARKET_LOT_SIZE","minQty":"0.00001000","maxQty":"9000.00000000",)"
      R"("stepSize":"0.00001000"},)"
      R"({"filterType":"NOTIONAL","minNotional":"5.00000000","applyMinToMarket":true,)"
      R"("maxNotional":"9000000000.00000000","applyMaxToMarket":false,"avgPriceMins":0},)"
      R"({"filterType":"MIN_NOTIONAL","minNotional":"5.00000000","applyToMarket":true,)"
      R"("avgPriceMins":0},)"
      R"({"filterType":"TRAILING_DELTA","minTrailingAboveDelta":10,"maxTrailingAboveDelta":2000,)"
      R"("minTrailingBelowDelta":10,"maxTrailingBelowDelta":2000},)"
      R"({"filterType":"MAX_NUM_ALGO_ORDERS","maxNumAlgoOrders":5},)"
      R"({"filterType":"ICEBERG_PARTS","limit":10},)"
      R"({"filterType":"MAX_NUM_ICEBERG_ORDERS","maxNumIcebergOrders":100}],)"
      R"("permissions":["SPOT"],"permissionSets":[["SPOT"]],)"
      R"("defaultSelfTradePreventionMode":"NONE","allowedSelfTradePreventionModes":["NONE",)"
      R"("EXPIRE_TAKER","EXPIRE_MAKER","EXPIRE_BOTH"]}]})");
  ParseObject(json);
}

TEST(ExchangeInfoJson, ListsTheGivenMarketsAndLimits) {
  const engine::EngineConfig c = TestConfig();
  const RateLimitJson limits[] = {{"REQUEST_WEIGHT", "MINUTE", 1, 6000},
                                  {"ORDERS", "SECOND", 10, 100}};
  const MarketId markets[] = {MarketId{2}, MarketId{0}};
  const boost::json::object root =
      ParseObject(ExchangeInfoJson(c, {}, 7, limits, markets, /*show_permission_sets=*/false));
  const boost::json::array& rl = root.at("rateLimits").as_array();
  ASSERT_EQ(rl.size(), 2U);
  EXPECT_EQ(Str(rl[1].as_object(), "rateLimitType"), "ORDERS");
  EXPECT_EQ(Str(rl[1].as_object(), "interval"), "SECOND");
  EXPECT_EQ(Int(rl[1].as_object(), "intervalNum"), 10);
  EXPECT_EQ(Int(rl[1].as_object(), "limit"), 100);
  const boost::json::array& symbols = root.at("symbols").as_array();
  ASSERT_EQ(symbols.size(), 2U);
  EXPECT_EQ(Str(symbols[0].as_object(), "symbol"), "BTCUSD");
  EXPECT_EQ(Str(symbols[1].as_object(), "symbol"), "BTCUSDT");
  EXPECT_TRUE(symbols[0].at("permissionSets").as_array().empty());
  const boost::json::object none = ParseObject(ExchangeInfoJson(c, {}, 7, {}, {}));
  EXPECT_TRUE(none.at("rateLimits").as_array().empty());
  EXPECT_TRUE(none.at("symbols").as_array().empty());
}

// Each market's rules: its order types (in Binance's order), the
// TRAILING_DELTA bounds and MAX_NUM_ALGO_ORDERS; allowTrailingStop while any
// conditional type is enabled. A market without rules has the defaults.
TEST(ExchangeInfoJson, OrderTypesAndConditionalFiltersFollowTheRules) {
  const engine::EngineConfig c = TestConfig();
  std::vector<MarketRules> rules(2);
  rules[0].order_types = OrderTypeBit(engine::OrderType::kTakeProfitLimit) |
                         OrderTypeBit(engine::OrderType::kLimit) |
                         OrderTypeBit(engine::OrderType::kStopLoss);
  rules[0].min_trailing_above = 1;
  rules[0].max_trailing_above = 9999;
  rules[0].min_trailing_below = 50;
  rules[0].max_trailing_below = 500;
  rules[0].max_num_algo_orders = 200;
  rules[1].order_types =
      OrderTypeBit(engine::OrderType::kLimit) | OrderTypeBit(engine::OrderType::kMarket);
  const MarketId markets[] = {MarketId{0}, MarketId{1}, MarketId{2}};
  const boost::json::object root =
      ParseObject(ExchangeInfoJson(c, {}, 7, {}, markets, true, rules));
  const boost::json::array& symbols = root.at("symbols").as_array();
  ASSERT_EQ(symbols.size(), 3U);
  auto types = [](const boost::json::object& s) {
    std::vector<std::string> out;
    for (const auto& t : s.at("orderTypes").as_array()) out.emplace_back(t.as_string());
    return out;
  };
  auto filter = [](const boost::json::object& s, std::string_view type) {
    for (const auto& f : s.at("filters").as_array()) {
      if (f.as_object().at("filterType").as_string() == type) return f.as_object();
    }
    ADD_FAILURE() << "no filter " << type;
    return boost::json::object{};
  };
  const boost::json::object& a = symbols[0].as_object();
  EXPECT_EQ(types(a), (std::vector<std::string>{"LIMIT", "STOP_LOSS", "TAKE_PROFIT_LIMIT"}));
  EXPECT_TRUE(a.at("allowTrailingStop").as_bool());
  EXPECT_FALSE(a.at("pegInstructionsAllowed").as_bool());
  const boost::json::object td = filter(a, "TRAILING_DELTA");
  EXPECT_EQ(Int(td, "minTrailingAboveDelta"), 1);
  EXPECT_EQ(Int(td, "maxTrailingAboveDelta"), 9999);
  EXPECT_EQ(Int(td, "minTrailingBelowDelta"), 50);
  EXPECT_EQ(Int(td, "maxTrailingBelowDelta"), 500);
  EXPECT_EQ(Int(filter(a, "MAX_NUM_ALGO_ORDERS"), "maxNumAlgoOrders"), 200);
  const boost::json::object& b = symbols[1].as_object();
  EXPECT_EQ(types(b), (std::vector<std::string>{"LIMIT", "MARKET"}));
  EXPECT_FALSE(b.at("allowTrailingStop").as_bool());
  const boost::json::object& d = symbols[2].as_object();  // no rules: the defaults
  EXPECT_EQ(types(d).size(), 7U);
  EXPECT_EQ(Int(filter(d, "MAX_NUM_ALGO_ORDERS"), "maxNumAlgoOrders"), 5);
  EXPECT_EQ(Int(filter(d, "TRAILING_DELTA"), "maxTrailingBelowDelta"), 2000);
}

TEST(ExchangeInfoJson, ParsesBinanceSymbolStatuses) {
  EXPECT_EQ(ParseSymbolStatus("TRADING"), MarketStatus::kTrading);
  EXPECT_EQ(ParseSymbolStatus("HALT"), MarketStatus::kHalted);
  EXPECT_EQ(ParseSymbolStatus("BREAK"), MarketStatus::kCancelOnly);
  for (std::string_view bad : {"", "trading", "HALTED", "CANCEL_ONLY", "AUCTION_MATCH"}) {
    EXPECT_EQ(ParseSymbolStatus(bad), std::nullopt) << bad;
  }
}

TEST(ExchangeInfoJson, StatusesScalesAndFiltersOfEveryMarket) {
  const engine::EngineConfig c = TestConfig();
  // Live statuses for the first two markets; the others fall back to their
  // configured status (BTCUSD is cancel-only).
  const std::vector<MarketStatus> statuses = {MarketStatus::kTrading, MarketStatus::kHalted};
  const RateLimitJson limits[] = {{"REQUEST_WEIGHT", "MINUTE", 1, 1200}};
  const MarketId markets[] = {MarketId{0}, MarketId{1}, MarketId{2}, MarketId{3}};
  const boost::json::object root = ParseObject(ExchangeInfoJson(c, statuses, 5, limits, markets));
  EXPECT_EQ(Int(root, "serverTime"), 5);
  EXPECT_EQ(Int(root.at("rateLimits").as_array()[0].as_object(), "limit"), 1200);
  const boost::json::array& symbols = root.at("symbols").as_array();
  ASSERT_EQ(symbols.size(), 4U);
  EXPECT_EQ(Str(symbols[0].as_object(), "status"), "TRADING");
  EXPECT_EQ(Str(symbols[1].as_object(), "status"), "HALT");
  EXPECT_EQ(Str(symbols[2].as_object(), "status"), "BREAK");
  EXPECT_EQ(Str(symbols[3].as_object(), "status"), "TRADING");

  const boost::json::object& ethbtc = symbols[1].as_object();
  EXPECT_EQ(Str(ethbtc, "symbol"), "ETHBTC");
  EXPECT_EQ(Str(ethbtc, "baseAsset"), "ETH");
  EXPECT_EQ(Str(ethbtc, "quoteAsset"), "BTC");

  const boost::json::object& btcusd = symbols[2].as_object();
  EXPECT_EQ(Str(btcusd, "symbol"), "BTCUSD");
  EXPECT_EQ(Int(btcusd, "baseAssetPrecision"), 8);
  EXPECT_EQ(Int(btcusd, "quotePrecision"), 2);
  EXPECT_EQ(Int(btcusd, "quoteAssetPrecision"), 2);
  EXPECT_EQ(Int(btcusd, "quoteCommissionPrecision"), 2);
  const boost::json::array& filters = btcusd.at("filters").as_array();
  ASSERT_EQ(filters.size(), 9U);
  const boost::json::object& price = filters[0].as_object();
  EXPECT_EQ(Str(price, "filterType"), "PRICE_FILTER");
  EXPECT_EQ(Str(price, "minPrice"), "1.00");
  EXPECT_EQ(Str(price, "maxPrice"), "10000000.00");
  EXPECT_EQ(Str(price, "tickSize"), "1.00");
  const boost::json::object& lot = filters[1].as_object();
  EXPECT_EQ(Str(lot, "filterType"), "LOT_SIZE");
  EXPECT_EQ(Str(lot, "minQty"), "0.01000000");
  EXPECT_EQ(Str(lot, "maxQty"), "1000.00000000");
  EXPECT_EQ(Str(lot, "stepSize"), "0.01000000");
  EXPECT_EQ(Str(filters[2].as_object(), "filterType"), "MARKET_LOT_SIZE");
  EXPECT_EQ(Str(filters[2].as_object(), "stepSize"), "0.01000000");
  const boost::json::object& notional = filters[3].as_object();
  EXPECT_EQ(Str(notional, "filterType"), "NOTIONAL");
  EXPECT_EQ(Str(notional, "minNotional"), "10.00");
  EXPECT_EQ(Str(notional, "maxNotional"), "10000000000.00");
  EXPECT_EQ(Str(filters[4].as_object(), "minNotional"), "10.00");
}

// --- market data (REST) ---

TEST(DepthJson, LimitsEachSide) {
  const engine::EngineConfig c = TestConfig();
  const MarketSnapshot s = BookSnapshot();
  EXPECT_EQ(DepthJson(c, s, 1), R"({"lastUpdateId":42,"bids":[["65000.00000000","0.00150000"]],)"
                                R"("asks":[["65000.01000000","1.00000000"]]})");
  const std::string all = DepthJson(c, s, 100);
  EXPECT_EQ(all, R"({"lastUpdateId":42,"bids":[["65000.00000000","0.00150000"],["64999.99000000",)"
                 R"("0.00002000"]],)"
                 R"("asks":[["65000.01000000","1.00000000"]]})");
  const boost::json::object o = ParseObject(all);
  EXPECT_EQ(o.at("bids").as_array().size(), 2U);
  EXPECT_EQ(DepthJson(c, MarketSnapshot{}, 5), R"({"lastUpdateId":0,"bids":[],"asks":[]})");
  EXPECT_EQ(PartialDepthJson(c, s, 1), DepthJson(c, s, 1));
}

TEST(TradesJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  const std::vector<TradeRow> rows = {BtcTrade(), EthTrade()};
  const std::string json = TradesJson(c, rows);
  EXPECT_EQ(json,
            R"([{"id":7,"price":"65000.00000000","qty":"0.00150000","quoteQty":"97.50000000",)"
            R"("time":1700000000123,"isBuyerMaker":true,"isBestMatch":true},)"
            R"({"id":8,"price":"0.05000000","qty":"2.00000000","quoteQty":"0.10000000",)"
            R"("time":1700000001000,"isBuyerMaker":false,"isBestMatch":true}])");
  EXPECT_EQ(ParseArray(json).size(), 2U);
  EXPECT_EQ(TradesJson(c, {}), "[]");
}

TEST(AggTradesJson, OneTradeAlone) {
  const engine::EngineConfig c = TestConfig();
  const std::vector<TradeRow> rows = {BtcTrade()};
  const std::string json = AggTradesJson(c, marketdata::Aggregate(rows));
  EXPECT_EQ(
      json,
      R"([{"a":7,"p":"65000.00000000","q":"0.00150000","f":7,"l":7,"T":1700000000123,"m":true,)"
      R"("M":true}])");
  ParseArray(json);
}

// Trades of one aggregate (one taker at one price) are one object: a = f,
// l the last trade, q the sum.
TEST(AggTradesJson, TradesOfOneAggregateSummed) {
  const engine::EngineConfig c = TestConfig();
  std::vector<TradeRow> rows = {BtcTrade(), BtcTrade(), BtcTrade(), BtcTrade()};
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i].id = TradeId{7 + i};
  rows[0].agg_id = rows[1].agg_id = rows[2].agg_id = TradeId{7};
  rows[3].agg_id = TradeId{10};
  rows[3].price = Price{6'500'100};
  const std::string json = AggTradesJson(c, marketdata::Aggregate(rows));
  EXPECT_EQ(
      json,
      R"([{"a":7,"p":"65000.00000000","q":"0.00450000","f":7,"l":9,"T":1700000000123,"m":true,)"
      R"("M":true},{"a":10,"p":"65001.00000000","q":"0.00150000","f":10,"l":10,)"
      R"("T":1700000000123,"m":true,"M":true}])");
  ParseArray(json);
}

TEST(KlinesJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  Kline empty;
  empty.open_time_ms = 1'700'000'040'000;
  const std::vector<Kline> k = {BtcKline(), empty};
  const std::string json = KlinesJson(c, kBtcUsdt, KlineInterval::k1m, k);
  EXPECT_EQ(
      json,
      R"([[1699999980000,"65000.00000000","65100.00000000","64900.00000000","65050.00000000",)"
      R"("0.00300000",1700000039999,"195.00000000",3,"0.00100000","65.00000000","0"],)"
      R"([1700000040000,"0.00000000","0.00000000","0.00000000","0.00000000","0.00000000",)"
      R"(1700000099999,"0.00000000",0,"0.00000000","0.00000000","0"]])");
  const boost::json::array a = ParseArray(json);
  ASSERT_EQ(a.size(), 2U);
  EXPECT_EQ(a[0].as_array().size(), 12U);
  // The close time follows the interval.
  const std::vector<Kline> one = {BtcKline()};
  const boost::json::array hourly = ParseArray(KlinesJson(c, kBtcUsdt, KlineInterval::k1h, one));
  EXPECT_EQ(hourly[0].as_array()[6].as_int64(), 1'699'999'980'000 + 3'600'000 - 1);
}

TEST(Ticker24hJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  const MarketSnapshot s = TickerSnapshot();
  // change -650.33 on 65000.00 is -1.0005 %: rounded away from zero to -1.001;
  // weighted average 325 / 0.00500001 = 64999.870000259..., rounded to 8 places.
  const std::string json = Ticker24hJson(c, s, kTickerNowMs);
  EXPECT_EQ(
      json,
      R"({"symbol":"BTCUSDT","priceChange":"-650.33000000","priceChangePercent":"-1.001",)"
      R"("weightedAvgPrice":"64999.87000026",)"
      R"("prevClosePrice":"65000.00000000","lastPrice":"64349.67000000","lastQty":"0.00120000",)"
      R"("bidPrice":"65000.00000000","bidQty":"0.00150000","askPrice":"65000.01000000",)"
      R"("askQty":"1.00000000",)"
      R"("openPrice":"65000.00000000","highPrice":"66000.00000000","lowPrice":"64000.00000000",)"
      R"("volume":"0.00500001","quoteVolume":"325.00000000","openTime":1699913700000,)"
      R"("closeTime":1700000100000,)"
      R"("firstId":5,"lastId":11,"count":7})");
  ParseObject(json);
}

// The rolling window and trading day tickers: FULL and MINI keys in
// Binance's order, the same figures as the 24 h ticker over that window.
TEST(WindowTickerJson, FullAndMini) {
  const engine::EngineConfig c = TestConfig();
  const MarketSnapshot s = TickerSnapshot();
  const marketdata::Ticker24h t = s.Ticker(kTickerNowMs);
  const std::string full = WindowTickerJson(c, s.market, t, false);
  EXPECT_EQ(
      full,
      R"({"symbol":"BTCUSDT","priceChange":"-650.33000000","priceChangePercent":"-1.001",)"
      R"("weightedAvgPrice":"64999.87000026",)"
      R"("openPrice":"65000.00000000","highPrice":"66000.00000000","lowPrice":"64000.00000000",)"
      R"("lastPrice":"64349.67000000","volume":"0.00500001","quoteVolume":"325.00000000",)"
      R"("openTime":1699913700000,"closeTime":1700000100000,"firstId":5,"lastId":11,"count":7})");
  const std::string mini = WindowTickerJson(c, s.market, t, true);
  EXPECT_EQ(
      mini,
      R"({"symbol":"BTCUSDT",)"
      R"("openPrice":"65000.00000000","highPrice":"66000.00000000","lowPrice":"64000.00000000",)"
      R"("lastPrice":"64349.67000000","volume":"0.00500001","quoteVolume":"325.00000000",)"
      R"("openTime":1699913700000,"closeTime":1700000100000,"firstId":5,"lastId":11,"count":7})");
  EXPECT_EQ(Ticker24hJson(c, s, kTickerNowMs, true), mini);
  ParseObject(full);
  ParseObject(mini);
}

TEST(WindowTickerEventJson, OneHourWindow) {
  const engine::EngineConfig c = TestConfig();
  const MarketSnapshot s = TickerSnapshot();
  const boost::json::object e =
      ParseObject(WindowTickerEventJson(c, s, "1h", 3'600'000, kTickerNowMs * kNsPerMs, kMs));
  EXPECT_EQ(e.at("e").as_string(), "1hTicker");
  EXPECT_EQ(Int(e, "E"), kTickerNowMs);
  EXPECT_EQ(Int(e, "O"), kTickerNowMs - 3'600'000);
  EXPECT_EQ(Int(e, "C"), kTickerNowMs);
  for (const char* key : {"s", "p", "P", "o", "h", "l", "c", "w", "v", "q", "F", "L", "n"}) {
    EXPECT_TRUE(e.contains(key)) << key;
  }
}

TEST(AvgPriceJson, WeightedOrLastPrice) {
  const engine::EngineConfig c = TestConfig();
  const MarketSnapshot s = TickerSnapshot();
  const boost::json::object a = ParseObject(AvgPriceJson(c, s, kTickerNowMs));
  EXPECT_EQ(Int(a, "mins"), 5);
  EXPECT_EQ(a.size(), 3u);
  EXPECT_TRUE(a.contains("price"));
  EXPECT_TRUE(a.contains("closeTime"));
  MarketSnapshot none;
  none.market = kBtcUsd;
  EXPECT_EQ(AvgPriceJson(c, none, kTickerNowMs), R"({"mins":5,"price":"0.00","closeTime":0})");
  const boost::json::object ev = ParseObject(AvgPriceEventJson(c, s, kTickerNowMs * kNsPerMs, kMs));
  EXPECT_EQ(ev.at("e").as_string(), "avgPrice");
  EXPECT_EQ(ev.at("i").as_string(), "5m");
  EXPECT_EQ(ev.at("w"), a.at("price"));
  EXPECT_EQ(ev.at("T"), a.at("closeTime"));
}

TEST(Ticker24hJson, NoTradesAndNoBook) {
  const engine::EngineConfig c = TestConfig();
  MarketSnapshot s;
  s.market = kBtcUsd;
  const std::string json = Ticker24hJson(c, s, kTickerNowMs);
  EXPECT_EQ(json,
            R"({"symbol":"BTCUSD","priceChange":"0.00","priceChangePercent":"0.000",)"
            R"("weightedAvgPrice":"0.00",)"
            R"("prevClosePrice":"0.00","lastPrice":"0.00","lastQty":"0.00000000",)"
            R"("bidPrice":"0.00","bidQty":"0.00000000","askPrice":"0.00","askQty":"0.00000000",)"
            R"("openPrice":"0.00","highPrice":"0.00","lowPrice":"0.00",)"
            R"("volume":"0.00000000","quoteVolume":"0.00","openTime":1699913700000,)"
            R"("closeTime":1700000100000,)"
            R"("firstId":-1,"lastId":-1,"count":0})");
  ParseObject(json);
}

TEST(Ticker24hJson, PositiveChangeRoundsHalfUp) {
  const engine::EngineConfig c = TestConfig();
  MarketSnapshot s;
  s.market = kBtcUsdt;
  Kline k = BtcKline();
  k.open_time_ms = kTickerNowMs - 60'000;
  k.open = Price{200'000};   // 2000.00
  k.close = Price{200'001};  // +0.0005 % → 0.001 (half rounds up)
  s.klines[static_cast<std::size_t>(KlineInterval::k1m)].current = k;
  const boost::json::object o = ParseObject(Ticker24hJson(c, s, kTickerNowMs));
  EXPECT_EQ(Str(o, "priceChange"), "0.01000000");
  EXPECT_EQ(Str(o, "priceChangePercent"), "0.001");
  EXPECT_EQ(Str(o, "weightedAvgPrice"), "65000.00000000");
  k.close = Price{199'999};  // -0.0005 % → -0.001
  s.klines[static_cast<std::size_t>(KlineInterval::k1m)].current = k;
  EXPECT_EQ(Str(ParseObject(Ticker24hJson(c, s, kTickerNowMs)), "priceChangePercent"), "-0.001");
  k.close = Price{200'000};
  s.klines[static_cast<std::size_t>(KlineInterval::k1m)].current = k;
  EXPECT_EQ(Str(ParseObject(Ticker24hJson(c, s, kTickerNowMs)), "priceChangePercent"), "0.000");
}

TEST(PriceTickerJson, LastTradeOrZero) {
  const engine::EngineConfig c = TestConfig();
  const std::string json = PriceTickerJson(c, TickerSnapshot());
  EXPECT_EQ(json, R"({"symbol":"BTCUSDT","price":"64349.67000000"})");
  ParseObject(json);
  EXPECT_EQ(PriceTickerJson(c, BookSnapshot()), R"({"symbol":"BTCUSDT","price":"0.00000000"})");
}

TEST(BookTickerJson, BestLevelsOrZero) {
  const engine::EngineConfig c = TestConfig();
  const std::string json = BookTickerJson(c, BookSnapshot());
  EXPECT_EQ(json, R"({"symbol":"BTCUSDT","bidPrice":"65000.00000000","bidQty":"0.00150000",)"
                  R"("askPrice":"65000.01000000","askQty":"1.00000000"})");
  ParseObject(json);
  MarketSnapshot empty;
  empty.market = kBtcUsd;
  EXPECT_EQ(BookTickerJson(c, empty),
            R"({"symbol":"BTCUSD","bidPrice":"0.00","bidQty":"0.00000000","askPrice":"0.00",)"
            R"("askQty":"0.00000000"})");
}

// --- orders ---

TEST(OrderJson, LimitOrderGolden) {
  const engine::EngineConfig c = TestConfig();
  const std::string json = OrderJson(c, LimitBuy());
  EXPECT_EQ(json,
            R"({"symbol":"BTCUSDT","orderId":1001,"orderListId":-1,"clientOrderId":"my-order_1",)"
            R"("price":"65000.00000000","origQty":"0.00300000","executedQty":"0.00150000",)"
            R"("cummulativeQuoteQty":"97.50000000",)"
            R"("status":"PARTIALLY_FILLED","timeInForce":"GTC","type":"LIMIT","side":"BUY",)"
            R"("stopPrice":"0.00000000","icebergQty":"0.00000000",)"
            R"("time":1700000000123,"updateTime":1700000000500,"isWorking":true,)"
            R"("workingTime":1700000000123,)"
            R"("origQuoteOrderQty":"0.00000000","selfTradePreventionMode":"EXPIRE_MAKER"})");
  ParseObject(json);
}

// An iceberg of a list: icebergQty and orderListId.
TEST(OrderJson, IcebergOfAList) {
  const engine::EngineConfig c = TestConfig();
  marketdata::OrderRecord r = LimitBuy();
  r.iceberg_qty = Qty{100};
  r.list_id = 77;
  const std::string json = OrderJson(c, r);
  EXPECT_NE(json.find(R"("orderListId":77,)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("icebergQty":"0.00100000",)"), std::string::npos) << json;
  ParseObject(json);
  r.status = marketdata::OrderStatus::kPendingNew;
  EXPECT_NE(OrderJson(c, r).find(R"("status":"PENDING_NEW")"), std::string::npos);
}

TEST(OrderListJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  marketdata::ListRecord l;
  l.id = 5;
  l.market = MarketId{0};
  l.type = engine::ListType::kOco;
  (void)l.list_client_order_id.Assign("L1");
  l.orders[0] = OrderId{5};
  l.orders[1] = OrderId{5 + engine::kListOrderStride};
  (void)l.client_ids[0].Assign("up");
  (void)l.client_ids[1].Assign("down");
  const std::string json = OrderListJson(c, l, {}, 1700000000123, false);
  EXPECT_EQ(json, R"({"orderListId":5,"contingencyType":"OCO","listStatusType":"EXEC_STARTED",)"
                  R"("listOrderStatus":"EXECUTING","listClientOrderId":"L1",)"
                  R"("transactionTime":1700000000123,"symbol":"BTCUSDT","orders":[)"
                  R"({"symbol":"BTCUSDT","orderId":5,"clientOrderId":"up"},)"
                  R"({"symbol":"BTCUSDT","orderId":1125899906842629,"clientOrderId":"down"}]})");
  ParseObject(json);
  l.status = marketdata::ListStatus::kAllDone;
  l.type = engine::ListType::kOtoco;
  const std::vector<std::string> reports = {"{\"a\":1}", "{\"b\":2}"};
  const std::string done = OrderListJson(c, l, reports, 1, true);
  EXPECT_NE(done.find(R"("contingencyType":"OTO","listStatusType":"ALL_DONE",)"
                      R"("listOrderStatus":"ALL_DONE")"),
            std::string::npos)
      << done;
  EXPECT_NE(done.find(R"("orderReports":[{"a":1},{"b":2}]})"), std::string::npos) << done;
  ParseObject(done);

  marketdata::ListStatusReport rep;
  rep.list = l;
  rep.time_ns = 1700000000123'000'000;
  const std::string ev = ListStatusJson(c, rep, 1700000000200);
  EXPECT_EQ(ev,
            R"({"e":"listStatus","E":1700000000200,"s":"BTCUSDT","g":5,"c":"OTO",)"
            R"("l":"ALL_DONE","L":"ALL_DONE","r":"NONE","C":"L1","T":1700000000123,"O":[)"
            R"({"s":"BTCUSDT","i":5,"c":"up"},{"s":"BTCUSDT","i":1125899906842629,"c":"down"}]})");
  ParseObject(ev);
}

TEST(OrderJson, MarketOrderByQuoteShowsGtcAndZeroPrice) {
  const engine::EngineConfig c = TestConfig();
  const std::string json = OrderJson(c, MarketBuyByQuote());
  // origQty: what it executed, as Binance shows an order by quoteOrderQty.
  EXPECT_EQ(json, R"({"symbol":"BTCUSDT","orderId":1002,"orderListId":-1,"clientOrderId":"",)"
                  R"("price":"0.00000000","origQty":"0.00150000","executedQty":"0.00150000",)"
                  R"("cummulativeQuoteQty":"97.50000000",)"
                  R"("status":"EXPIRED","timeInForce":"GTC","type":"MARKET","side":"BUY",)"
                  R"("stopPrice":"0.00000000","icebergQty":"0.00000000",)"
                  R"("time":1700000000123,"updateTime":1700000000123,"isWorking":false,)"
                  R"("workingTime":1700000000123,)"
                  R"("origQuoteOrderQty":"100.00000000","selfTradePreventionMode":"NONE",)"
                  R"("expiryReason":"INSUFFICIENT_LIQUIDITY"})");
  ParseObject(json);
}

// Expired orders carry Binance's expiryReason, or preventedQuantity when
// self-trade prevention expired them; other orders neither.
TEST(OrderJson, ExpiredOrdersSayWhy) {
  const engine::EngineConfig c = TestConfig();
  OrderRecord o = LimitBuy();
  auto field = [&](const std::string& json, const char* key) -> std::string {
    const boost::json::object obj = ParseObject(json);
    if (!obj.contains(key)) return "absent";
    return std::string(obj.at(key).as_string());
  };
  EXPECT_EQ(field(OrderJson(c, o), "expiryReason"), "absent");
  o.status = OrderStatus::kExpired;
  o.expire_reason = engine::ExpireReason::kIocRemainder;
  EXPECT_EQ(field(OrderJson(c, o), "expiryReason"), "UNFILLED_IOC_QUANTITY_EXPIRED");
  o.expire_reason = engine::ExpireReason::kFokNotFillable;
  EXPECT_EQ(field(NewOrderJson(c, o, {}, RespType::kResult, 1), "expiryReason"),
            "UNFILLED_FOK_ORDER_EXPIRED");
  EXPECT_EQ(field(NewOrderJson(c, o, {}, RespType::kAck, 1), "expiryReason"), "absent");
  o.expire_reason = engine::ExpireReason::kSelfTradePrevention;
  EXPECT_EQ(field(OrderJson(c, o), "expiryReason"), "absent");
  EXPECT_EQ(field(OrderJson(c, o), "status"), "EXPIRED_IN_MATCH");
  EXPECT_EQ(field(NewOrderJson(c, o, {}, RespType::kResult, 1), "status"), "EXPIRED_IN_MATCH");
  EXPECT_EQ(field(OrderJson(c, o), "preventedQuantity"), "0.00150000");  // 300 - 150 lots
}

TEST(OrderJson, TimeInForceOfEachType) {
  const engine::EngineConfig c = TestConfig();
  OrderRecord o = LimitBuy();
  o.terms.tif = TimeInForce::kIoc;
  EXPECT_EQ(Str(ParseObject(OrderJson(c, o)), "timeInForce"), "IOC");
  o.terms.tif = TimeInForce::kFok;
  EXPECT_EQ(Str(ParseObject(OrderJson(c, o)), "timeInForce"), "FOK");
  o.terms.type = OrderType::kLimitMaker;
  o.terms.side = Side::kSell;
  const boost::json::object maker = ParseObject(OrderJson(c, o));
  EXPECT_EQ(Str(maker, "timeInForce"), "GTC");
  EXPECT_EQ(Str(maker, "type"), "LIMIT_MAKER");
  EXPECT_EQ(Str(maker, "side"), "SELL");
}

// A STOP_LOSS_LIMIT sell waiting for its trigger, placed at ...123 ms.
OrderRecord WaitingStopLimitSell() {
  OrderRecord o;
  o.id = OrderId{1005};
  o.terms.account = AccountId{5};
  o.terms.market = kBtcUsdt;
  o.terms.side = Side::kSell;
  o.terms.type = OrderType::kStopLossLimit;
  o.terms.tif = TimeInForce::kGtc;
  o.terms.price = Price{6'000'000};
  o.terms.qty = Qty{300};
  o.remaining = Qty{300};
  o.status = OrderStatus::kNew;
  o.client_order_id = ClientOrderId::From("stop-1");
  o.time_ns = 1'700'000'000'123'456'789;
  o.update_ns = 1'700'000'000'123'456'789;
  o.working = false;
  o.stop_price = Price{6'100'000};
  return o;
}

TEST(OrderJson, WaitingStopLimitGolden) {
  const engine::EngineConfig c = TestConfig();
  const std::string json = OrderJson(c, WaitingStopLimitSell());
  EXPECT_EQ(json, R"({"symbol":"BTCUSDT","orderId":1005,"orderListId":-1,"clientOrderId":"stop-1",)"
                  R"("price":"60000.00000000","origQty":"0.00300000","executedQty":"0.00000000",)"
                  R"("cummulativeQuoteQty":"0.00000000",)"
                  R"("status":"NEW","timeInForce":"GTC","type":"STOP_LOSS_LIMIT","side":"SELL",)"
                  R"("stopPrice":"61000.00000000","icebergQty":"0.00000000",)"
                  R"("time":1700000000123,"updateTime":1700000000123,"isWorking":false,)"
                  R"("workingTime":-1,)"
                  R"("origQuoteOrderQty":"0.00000000","selfTradePreventionMode":"NONE"})");
  ParseObject(json);
}

// Once triggered, workingTime is the trigger time; a trailing stop shows its
// delta and when it began tracking (-1 before); the *_LIMIT types show their
// own timeInForce, STOP_LOSS / TAKE_PROFIT GTC.
TEST(OrderJson, TriggeredAndTrailingStops) {
  const engine::EngineConfig c = TestConfig();
  OrderRecord o = WaitingStopLimitSell();
  o.trigger_ns = 1'700'000'005'000'000'000;
  o.working = true;
  o.terms.tif = TimeInForce::kFok;
  boost::json::object j = ParseObject(OrderJson(c, o));
  EXPECT_EQ(Int(j, "workingTime"), 1'700'000'005'000);
  EXPECT_TRUE(j.at("isWorking").as_bool());
  EXPECT_EQ(Str(j, "timeInForce"), "FOK");
  EXPECT_FALSE(j.contains("trailingDelta"));
  EXPECT_FALSE(j.contains("trailingTime"));

  o = WaitingStopLimitSell();
  o.terms.type = OrderType::kTakeProfit;
  o.terms.tif = TimeInForce::kIoc;
  o.terms.price = Price{0};
  o.stop_price = Price{0};
  o.trailing_delta = 250;
  j = ParseObject(OrderJson(c, o));
  EXPECT_EQ(Str(j, "type"), "TAKE_PROFIT");
  EXPECT_EQ(Str(j, "timeInForce"), "GTC");
  EXPECT_EQ(Str(j, "stopPrice"), "0.00000000");
  EXPECT_EQ(Int(j, "trailingDelta"), 250);
  EXPECT_EQ(Int(j, "trailingTime"), -1);
  EXPECT_EQ(Int(j, "workingTime"), -1);
  o.trailing_ns = 1'700'000'003'000'000'000;
  EXPECT_EQ(Int(ParseObject(OrderJson(c, o)), "trailingTime"), 1'700'000'003'000);

  // A triggered stop-market buy that could not lock its cost expired.
  o.status = OrderStatus::kExpired;
  o.expire_reason = engine::ExpireReason::kInsufficientBalance;
  o.trigger_ns = 1'700'000'006'000'000'000;
  j = ParseObject(OrderJson(c, o));
  EXPECT_EQ(Str(j, "expiryReason"), "REJECTED");
  EXPECT_EQ(Int(j, "workingTime"), 1'700'000'006'000);
  // Canceled while waiting: it never worked.
  o = WaitingStopLimitSell();
  o.status = OrderStatus::kCanceled;
  EXPECT_EQ(Int(ParseObject(OrderJson(c, o)), "workingTime"), -1);
}

// The answers to POST /order and DELETE /order carry the stop price of a
// conditional order (and a trailing stop's fields), as Binance's
// conditional fields; other orders have none.
TEST(NewOrderJson, ConditionalFields) {
  const engine::EngineConfig c = TestConfig();
  OrderRecord o = WaitingStopLimitSell();
  o.trailing_delta = 100;
  boost::json::object r = ParseObject(NewOrderJson(c, o, {}, RespType::kResult, 7));
  EXPECT_EQ(Str(r, "stopPrice"), "61000.00000000");
  EXPECT_EQ(Int(r, "workingTime"), -1);
  EXPECT_EQ(Int(r, "trailingDelta"), 100);
  EXPECT_EQ(Int(r, "trailingTime"), -1);
  EXPECT_EQ(Str(r, "type"), "STOP_LOSS_LIMIT");
  const boost::json::object ack = ParseObject(NewOrderJson(c, o, {}, RespType::kAck, 7));
  EXPECT_FALSE(ack.contains("stopPrice"));
  EXPECT_EQ(Int(ack, "orderId"), 1005);
  o.status = OrderStatus::kCanceled;
  const boost::json::object canceled = ParseObject(CanceledOrderJson(c, o, "cancel-1", 9));
  EXPECT_EQ(Str(canceled, "stopPrice"), "61000.00000000");
  EXPECT_EQ(Int(canceled, "trailingDelta"), 100);
  const boost::json::object plain =
      ParseObject(NewOrderJson(c, LimitBuy(), {}, RespType::kFull, 7));
  EXPECT_FALSE(plain.contains("stopPrice"));
  EXPECT_FALSE(plain.contains("trailingDelta"));
  EXPECT_EQ(Int(plain, "workingTime"), 1'700'000'000'123);
}

TEST(NewOrderJson, AckResultAndFull) {
  const engine::EngineConfig c = TestConfig();
  const OrderRecord o = LimitBuy();
  const std::vector<Fill> fills = {BuyFill(7, 100), BuyFill(8, 50)};
  const std::string ack = NewOrderJson(c, o, fills, RespType::kAck, 1'700'000'000'124);
  EXPECT_EQ(ack,
            R"({"symbol":"BTCUSDT","orderId":1001,"orderListId":-1,"clientOrderId":"my-order_1",)"
            R"("transactTime":1700000000124})");
  ParseObject(ack);

  const std::string result_fields =
      R"("price":"65000.00000000","origQty":"0.00300000","executedQty":"0.00150000",)"
      R"("origQuoteOrderQty":"0.00000000",)"
      R"("cummulativeQuoteQty":"97.50000000","status":"PARTIALLY_FILLED","timeInForce":"GTC",)"
      R"("type":"LIMIT","side":"BUY",)"
      R"("workingTime":1700000000123,"selfTradePreventionMode":"EXPIRE_MAKER")";
  const std::string result = NewOrderJson(c, o, fills, RespType::kResult, 1'700'000'000'124);
  EXPECT_EQ(result, ack.substr(0, ack.size() - 1) + "," + result_fields + "}");
  ParseObject(result);

  const std::string full = NewOrderJson(c, o, fills, RespType::kFull, 1'700'000'000'124);
  EXPECT_EQ(
      full,
      ack.substr(0, ack.size() - 1) + "," + result_fields +
          R"(,"fills":[{"price":"65000.00000000","qty":"0.00100000","commission":"0.00000100",)"
          R"("commissionAsset":"BTC","tradeId":7},)"
          R"({"price":"65000.00000000","qty":"0.00050000","commission":"0.00000050",)"
          R"("commissionAsset":"BTC","tradeId":8}]})");
  const boost::json::object parsed = ParseObject(full);
  EXPECT_EQ(parsed.at("fills").as_array().size(), 2U);

  const boost::json::object no_fills =
      ParseObject(NewOrderJson(c, o, {}, RespType::kFull, 1'700'000'000'124));
  EXPECT_TRUE(no_fills.at("fills").as_array().empty());
}

TEST(CanceledOrderJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  OrderRecord o = LimitBuy();
  o.status = OrderStatus::kCanceled;
  o.remaining = Qty{0};
  o.working = false;
  const std::string json = CanceledOrderJson(c, o, "cancel-1", 1'700'000'000'999);
  EXPECT_EQ(
      json,
      R"({"symbol":"BTCUSDT","origClientOrderId":"my-order_1","orderId":1001,"orderListId":-1,)"
      R"("clientOrderId":"cancel-1",)"
      R"("transactTime":1700000000999,"price":"65000.00000000","origQty":"0.00300000",)"
      R"("executedQty":"0.00150000",)"
      R"("origQuoteOrderQty":"0.00000000","cummulativeQuoteQty":"97.50000000",)"
      R"("status":"CANCELED","timeInForce":"GTC",)"
      R"("type":"LIMIT","side":"BUY","selfTradePreventionMode":"EXPIRE_MAKER"})");
  ParseObject(json);
  // Without a cancel id, the order's own id stands in.
  EXPECT_EQ(Str(ParseObject(CanceledOrderJson(c, o, "", 1)), "clientOrderId"), "my-order_1");
}

TEST(MyTradesJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  Fill sell;
  sell.trade_id = TradeId{9};
  sell.order_id = OrderId{2001};
  sell.account = AccountId{5};
  sell.market = kEthBtc;
  sell.side = Side::kSell;
  sell.price = Price{5'000};
  sell.qty = Qty{2'000};
  sell.base_qty = Amount{200'000'000};
  sell.notional = Amount{10'000'000};
  sell.commission = Amount{2'000};
  sell.commission_asset = kBtc;
  sell.is_maker = true;
  sell.time_ns = 1'700'000'002'000'000'000;
  const std::vector<Fill> fills = {BuyFill(7, 100), sell};
  const std::string json = MyTradesJson(c, fills);
  EXPECT_EQ(
      json,
      R"([{"symbol":"BTCUSDT","id":7,"orderId":1001,"orderListId":-1,"price":"65000.00000000",)"
      R"("qty":"0.00100000",)"
      R"("quoteQty":"65.00000000","commission":"0.00000100","commissionAsset":"BTC",)"
      R"("time":1700000000123,)"
      R"("isBuyer":true,"isMaker":false,"isBestMatch":true},)"
      R"({"symbol":"ETHBTC","id":9,"orderId":2001,"orderListId":-1,"price":"0.05000000",)"
      R"("qty":"2.00000000",)"
      R"("quoteQty":"0.10000000","commission":"0.00002000","commissionAsset":"BTC",)"
      R"("time":1700000002000,)"
      R"("isBuyer":false,"isMaker":true,"isBestMatch":true}])");
  EXPECT_EQ(ParseArray(json).size(), 2U);
}

TEST(AccountJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  const std::vector<BalanceRow> balances = {
      {kBtc, Amount{150'000'000}, Amount{0}},
      {kEth, Amount{0}, Amount{0}},
      {kUsdt, Amount{100'000'000'000}, Amount{19'500'000'000}},
      {kUsd, Amount{12'345}, Amount{0}},
  };
  const std::string json = AccountJson(c, AccountId{5}, balances, 1'700'000'000'777);
  // The highest maker (BTCUSD, 15) and taker (BTCUSDT, 10) rates.
  EXPECT_EQ(
      json,
      R"({"makerCommission":15,"takerCommission":10,"buyerCommission":0,"sellerCommission":0,)"
      R"("commissionRates":{"maker":"0.00150000","taker":"0.00100000","buyer":"0.00000000",)"
      R"("seller":"0.00000000"},)"
      R"("canTrade":true,"canWithdraw":true,"canDeposit":true,"brokered":false,)"
      R"("requireSelfTradePrevention":false,)"
      R"("preventSor":false,"updateTime":1700000000777,"accountType":"SPOT","balances":[)"
      R"({"asset":"BTC","free":"1.50000000","locked":"0.00000000"},{"asset":"ETH",)"
      R"("free":"0.00000000","locked":"0.00000000"},)"
      R"({"asset":"USDT","free":"1000.00000000","locked":"195.00000000"},{"asset":"USD",)"
      R"("free":"123.45","locked":"0.00"}],)"
      R"("permissions":["SPOT"],"uid":5})");
  ParseObject(json);
  // The fee account cannot trade.
  const boost::json::object fee = ParseObject(AccountJson(c, AccountId{0}, {}, 0));
  EXPECT_FALSE(fee.at("canTrade").as_bool());
  EXPECT_TRUE(fee.at("balances").as_array().empty());
}

// --- streams ---

TEST(DepthUpdateJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  marketdata::DepthDiff d;
  d.market = kBtcUsdt;
  d.first_update_id = 43;
  d.last_update_id = 45;
  d.bids = {{Price{6'500'000}, Qty{0}}};
  d.asks = {{Price{6'500'002}, Qty{10}}};
  const std::string json = DepthUpdateJson(c, d, 1'700'000'000'200 * kNsPerMs, kMs);
  EXPECT_EQ(json,
            R"({"e":"depthUpdate","E":1700000000200,"s":"BTCUSDT","U":43,"u":45,)"
            R"("b":[["65000.00000000","0.00000000"]],"a":[["65000.02000000","0.00010000"]]})");
  ParseObject(json);
  d.asks.clear();
  EXPECT_EQ(DepthUpdateJson(c, d, kNsPerMs, kMs),
            R"({"e":"depthUpdate","E":1,"s":"BTCUSDT","U":43,"u":45,)"
            R"("b":[["65000.00000000","0.00000000"]],"a":[]})");
}

TEST(TradeEventJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  const std::string json = TradeEventJson(c, BtcTrade(), 1'700'000'000'200 * kNsPerMs, kMs);
  EXPECT_EQ(
      json,
      R"({"e":"trade","E":1700000000200,"s":"BTCUSDT","t":7,"p":"65000.00000000","q":"0.00150000",)"
      R"("T":1700000000123,"m":true,"M":true})");
  ParseObject(json);
  const std::vector<TradeRow> eth = {EthTrade()};
  const std::string agg =
      AggTradeEventJson(c, marketdata::Aggregate(eth).front(), 1'700'000'001'001 * kNsPerMs, kMs);
  EXPECT_EQ(
      agg,
      R"({"e":"aggTrade","E":1700000001001,"s":"ETHBTC","a":8,"p":"0.05000000","q":"2.00000000",)"
      R"("f":8,"l":8,"T":1700000001000,"m":false,"M":true})");
  ParseObject(agg);
}

TEST(TickerEventJson, FullAndMini) {
  const engine::EngineConfig c = TestConfig();
  const MarketSnapshot s = TickerSnapshot();
  const std::string full = TickerEventJson(c, s, kTickerNowMs * kNsPerMs, kMs);
  EXPECT_EQ(
      full,
      R"({"e":"24hrTicker","E":1700000100000,"s":"BTCUSDT","p":"-650.33000000","P":"-1.001",)"
      R"("w":"64999.87000026",)"
      R"("x":"65000.00000000","c":"64349.67000000","Q":"0.00120000","b":"65000.00000000",)"
      R"("B":"0.00150000",)"
      R"("a":"65000.01000000","A":"1.00000000","o":"65000.00000000","h":"66000.00000000",)"
      R"("l":"64000.00000000",)"
      R"("v":"0.00500001","q":"325.00000000","O":1699913700000,"C":1700000100000,"F":5,"L":11,)"
      R"("n":7})");
  ParseObject(full);
  const std::string mini = MiniTickerEventJson(c, s, kTickerNowMs * kNsPerMs, kMs);
  EXPECT_EQ(mini,
            R"({"e":"24hrMiniTicker","E":1700000100000,"s":"BTCUSDT","c":"64349.67000000",)"
            R"("o":"65000.00000000",)"
            R"("h":"66000.00000000","l":"64000.00000000","v":"0.00500001","q":"325.00000000"})");
  ParseObject(mini);
}

TEST(BookTickerEventJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  const std::string json = BookTickerEventJson(c, BookSnapshot());
  EXPECT_EQ(json,
            R"({"u":42,"s":"BTCUSDT","b":"65000.00000000","B":"0.00150000","a":"65000.01000000",)"
            R"("A":"1.00000000"})");
  ParseObject(json);
}

TEST(KlineEventJson, ClosedCandleAndEmptyOpenCandle) {
  const engine::EngineConfig c = TestConfig();
  const std::string json = KlineEventJson(c, kBtcUsdt, KlineInterval::k1m, BtcKline(), true,
                                          1'700'000'040'001 * kNsPerMs, kMs);
  EXPECT_EQ(
      json,
      R"({"e":"kline","E":1700000040001,"s":"BTCUSDT","k":{"t":1699999980000,"T":1700000039999,)"
      R"("s":"BTCUSDT",)"
      R"("i":"1m","f":5,"L":7,"o":"65000.00000000","c":"65050.00000000","h":"65100.00000000",)"
      R"("l":"64900.00000000",)"
      R"("v":"0.00300000","n":3,"x":true,"q":"195.00000000","V":"0.00100000","Q":"65.00000000",)"
      R"("B":"0"}})");
  ParseObject(json);
  Kline empty;
  empty.open_time_ms = 1'699'999'200'000;
  const boost::json::object o =
      ParseObject(KlineEventJson(c, kBtcUsd, KlineInterval::k1h, empty, false, 7 * kNsPerMs, kMs));
  const boost::json::object& k = o.at("k").as_object();
  EXPECT_EQ(Int(k, "T"), 1'699'999'200'000 + 3'600'000 - 1);
  EXPECT_EQ(Str(k, "i"), "1h");
  EXPECT_EQ(Int(k, "f"), -1);
  EXPECT_EQ(Int(k, "L"), -1);
  EXPECT_FALSE(k.at("x").as_bool());
  EXPECT_EQ(Str(k, "o"), "0.00");
}

// --- user data ---

TEST(TimeUnit, ParsesBinanceSpellingsOnly) {
  EXPECT_EQ(ParseTimeUnit("MICROSECOND"), kUs);
  EXPECT_EQ(ParseTimeUnit("microsecond"), kUs);
  EXPECT_EQ(ParseTimeUnit("MicroSecond"), kUs);
  EXPECT_EQ(ParseTimeUnit("MILLISECOND"), kMs);
  EXPECT_EQ(ParseTimeUnit("millisecond"), kMs);
  for (const char* bad : {"", "us", "ms", "MICROSECONDS", "NANOSECOND", "MICRO SECOND", "1"}) {
    EXPECT_EQ(ParseTimeUnit(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(NsIn(1'700'000'000'123'456'789, kMs), 1'700'000'000'123);
  EXPECT_EQ(NsIn(1'700'000'000'123'456'789, kUs), 1'700'000'000'123'456);
  EXPECT_EQ(MsIn(1'700'000'000'123, kMs), 1'700'000'000'123);
  EXPECT_EQ(MsIn(1'700'000'000'123, kUs), 1'700'000'000'123'000);
}

// The same events in µs: every time field scaled, nothing else changed.
TEST(StreamEventsInMicroseconds, EveryTimeFieldScaled) {
  const engine::EngineConfig c = TestConfig();
  const int64_t event_ns = 1'700'000'000'200'345'678;
  const std::string trade = TradeEventJson(c, BtcTrade(), event_ns, kUs);
  EXPECT_EQ(trade, R"({"e":"trade","E":1700000000200345,"s":"BTCUSDT","t":7,"p":"65000.00000000",)"
                   R"("q":"0.00150000","T":1700000000123456,"m":true,"M":true})");
  const std::vector<TradeRow> btc = {BtcTrade()};
  const boost::json::object agg =
      ParseObject(AggTradeEventJson(c, marketdata::Aggregate(btc).front(), event_ns, kUs));
  EXPECT_EQ(Int(agg, "E"), 1'700'000'000'200'345);
  EXPECT_EQ(Int(agg, "T"), 1'700'000'000'123'456);

  marketdata::DepthDiff d;
  d.market = kBtcUsdt;
  d.first_update_id = 3;
  d.last_update_id = 3;
  const boost::json::object depth = ParseObject(DepthUpdateJson(c, d, event_ns, kUs));
  EXPECT_EQ(Int(depth, "E"), 1'700'000'000'200'345);

  const MarketSnapshot s = TickerSnapshot();
  const int64_t ticker_ns = kTickerNowMs * kNsPerMs + 999;
  const boost::json::object full_ms = ParseObject(TickerEventJson(c, s, ticker_ns, kMs));
  const boost::json::object full_us = ParseObject(TickerEventJson(c, s, ticker_ns, kUs));
  EXPECT_EQ(Int(full_us, "E"), kTickerNowMs * 1000);
  EXPECT_EQ(Int(full_us, "O"), Int(full_ms, "O") * 1000);
  EXPECT_EQ(Int(full_us, "C"), Int(full_ms, "C") * 1000);
  EXPECT_EQ(Int(full_ms, "O"), 1'699'913'700'000);
  EXPECT_EQ(Str(full_us, "c"), Str(full_ms, "c"));
  EXPECT_EQ(Int(full_us, "n"), Int(full_ms, "n"));
  const boost::json::object mini = ParseObject(MiniTickerEventJson(c, s, ticker_ns, kUs));
  EXPECT_EQ(Int(mini, "E"), kTickerNowMs * 1000);

  const boost::json::object kline =
      ParseObject(KlineEventJson(c, kBtcUsdt, KlineInterval::k1m, BtcKline(), true, event_ns, kUs));
  EXPECT_EQ(Int(kline, "E"), 1'700'000'000'200'345);
  const boost::json::object& k = kline.at("k").as_object();
  EXPECT_EQ(Int(k, "t"), 1'699'999'980'000'000);
  EXPECT_EQ(Int(k, "T"), 1'700'000'039'999'999);  // the candle's last µs
  EXPECT_EQ(Str(k, "c"), "65050.00000000");
}

TEST(ExecutionReportJson, NewOrderGolden) {
  const engine::EngineConfig c = TestConfig();
  ExecutionReport r;
  r.type = ExecType::kNew;
  r.order = LimitBuy();
  r.order.executed = Qty{0};
  r.order.cumulative_quote = Amount{0};
  r.order.status = OrderStatus::kNew;
  r.seq = Sequence{1001};
  r.time_ns = 1'700'000'000'123'456'789;
  const std::string json = ExecutionReportJson(c, r, 1'700'000'000'130);
  EXPECT_EQ(
      json,
      R"({"e":"executionReport","E":1700000000130,"s":"BTCUSDT","c":"my-order_1","S":"BUY",)"
      R"("o":"LIMIT","f":"GTC",)"
      R"("q":"0.00300000","p":"65000.00000000","P":"0.00000000","F":"0.00000000","g":-1,"C":"",)"
      R"("x":"NEW","X":"NEW",)"
      R"("r":"NONE","i":1001,"l":"0.00000000","z":"0.00000000","L":"0.00000000","n":"0","N":null,)"
      R"("T":1700000000123,)"
      R"("t":-1,"I":1001,"w":true,"m":false,"M":false,"O":1700000000123,"Z":"0.00000000",)"
      R"("Y":"0.00000000",)"
      R"("Q":"0.00000000","W":1700000000123,"V":"EXPIRE_MAKER"})");
  ParseObject(json);
}

// A conditional order's reports: P its stop price; no W while it waits, the
// trigger time once triggered; a trailing stop adds d and D.
TEST(ExecutionReportJson, ConditionalOrders) {
  const engine::EngineConfig c = TestConfig();
  ExecutionReport r;
  r.type = ExecType::kNew;
  r.order = WaitingStopLimitSell();
  r.seq = Sequence{1005};
  r.time_ns = r.order.time_ns;
  const std::string json = ExecutionReportJson(c, r, 1'700'000'000'130);
  EXPECT_EQ(
      json,
      R"({"e":"executionReport","E":1700000000130,"s":"BTCUSDT","c":"stop-1","S":"SELL",)"
      R"("o":"STOP_LOSS_LIMIT","f":"GTC",)"
      R"("q":"0.00300000","p":"60000.00000000","P":"61000.00000000","F":"0.00000000","g":-1,)"
      R"("C":"","x":"NEW","X":"NEW",)"
      R"("r":"NONE","i":1005,"l":"0.00000000","z":"0.00000000","L":"0.00000000","n":"0","N":null,)"
      R"("T":1700000000123,)"
      R"("t":-1,"I":1005,"w":false,"m":false,"M":false,"O":1700000000123,"Z":"0.00000000",)"
      R"("Y":"0.00000000","Q":"0.00000000","V":"NONE"})");
  ParseObject(json);
  r.order.trigger_ns = 1'700'000'004'000'000'000;
  r.order.working = true;
  r.order.trailing_delta = 300;
  boost::json::object o = ParseObject(ExecutionReportJson(c, r, 1));
  EXPECT_EQ(Int(o, "W"), 1'700'000'004'000);
  EXPECT_TRUE(o.at("w").as_bool());
  EXPECT_EQ(Int(o, "d"), 300);
  EXPECT_EQ(Int(o, "D"), -1);
  r.order.trailing_ns = 1'700'000'002'000'000'000;
  EXPECT_EQ(Int(ParseObject(ExecutionReportJson(c, r, 1)), "D"), 1'700'000'002'000);
  // Refused because the last price already met the stop.
  r = ExecutionReport{};
  r.type = ExecType::kRejected;
  r.order.status = OrderStatus::kRejected;
  r.reject = engine::RejectReason::kWouldTriggerImmediately;
  EXPECT_EQ(Str(ParseObject(ExecutionReportJson(c, r, 1)), "r"), "ORDER_WOULD_TRIGGER_IMMEDIATELY");
}

TEST(ExecutionReportJson, TradeGolden) {
  const engine::EngineConfig c = TestConfig();
  ExecutionReport r;
  r.type = ExecType::kTrade;
  r.order = LimitBuy();
  r.order.executed = Qty{100};
  r.order.cumulative_quote = Amount{6'500'000'000};
  r.fill = BuyFill(7, 100);
  r.seq = Sequence{1003};
  r.time_ns = 1'700'000'000'200'000'000;
  const std::string json = ExecutionReportJson(c, r, 1'700'000'000'210);
  EXPECT_EQ(
      json,
      R"({"e":"executionReport","E":1700000000210,"s":"BTCUSDT","c":"my-order_1","S":"BUY",)"
      R"("o":"LIMIT","f":"GTC",)"
      R"("q":"0.00300000","p":"65000.00000000","P":"0.00000000","F":"0.00000000","g":-1,"C":"",)"
      R"("x":"TRADE",)"
      R"("X":"PARTIALLY_FILLED","r":"NONE","i":1001,"l":"0.00100000","z":"0.00100000",)"
      R"("L":"65000.00000000",)"
      R"("n":"0.00000100","N":"BTC","T":1700000000200,"t":7,"I":1003,"w":true,"m":false,"M":false,)"
      R"("O":1700000000123,"Z":"65.00000000","Y":"65.00000000","Q":"0.00000000",)"
      R"("W":1700000000123,"V":"EXPIRE_MAKER"})");
  ParseObject(json);
  r.fill->is_maker = true;
  EXPECT_TRUE(ParseObject(ExecutionReportJson(c, r, 1)).at("m").as_bool());
}

TEST(ExecutionReportJson, CancelNamesTheOriginalClientId) {
  const engine::EngineConfig c = TestConfig();
  ExecutionReport r;
  r.type = ExecType::kCanceled;
  r.order = LimitBuy();
  r.order.status = OrderStatus::kCanceled;
  r.order.working = false;
  r.seq = Sequence{1010};
  r.time_ns = 1'700'000'000'900'000'000;
  const boost::json::object o = ParseObject(ExecutionReportJson(c, r, 1'700'000'000'901));
  EXPECT_EQ(Str(o, "x"), "CANCELED");
  EXPECT_EQ(Str(o, "X"), "CANCELED");
  EXPECT_EQ(Str(o, "c"), "my-order_1");
  EXPECT_EQ(Str(o, "C"), "my-order_1");
  EXPECT_FALSE(o.at("w").as_bool());
  EXPECT_EQ(Int(o, "T"), 1'700'000'000'900);
  EXPECT_EQ(Int(o, "t"), -1);
  EXPECT_TRUE(o.at("N").is_null());
  EXPECT_EQ(Str(o, "z"), "0.00150000");
  EXPECT_EQ(Str(o, "Z"), "97.50000000");
}

// Binance reports an order that self-trade prevention expired as
// x TRADE_PREVENTION, X EXPIRED_IN_MATCH; other expiries stay EXPIRED.
TEST(ExecutionReportJson, SelfTradePreventionExpiryIsExpiredInMatch) {
  const engine::EngineConfig c = TestConfig();
  ExecutionReport r;
  r.type = ExecType::kExpired;
  r.order = LimitBuy();
  r.order.status = OrderStatus::kExpired;
  r.order.expire_reason = engine::ExpireReason::kSelfTradePrevention;
  r.seq = Sequence{1003};
  r.time_ns = 1'700'000'000'123'000'000;
  const boost::json::object stp = ParseObject(ExecutionReportJson(c, r, 1));
  EXPECT_EQ(Str(stp, "x"), "TRADE_PREVENTION");
  EXPECT_EQ(Str(stp, "X"), "EXPIRED_IN_MATCH");
  r.order.expire_reason = engine::ExpireReason::kIocRemainder;
  const boost::json::object ioc = ParseObject(ExecutionReportJson(c, r, 1));
  EXPECT_EQ(Str(ioc, "x"), "EXPIRED");
  EXPECT_EQ(Str(ioc, "X"), "EXPIRED");
}

TEST(ExecutionReportJson, ExpiredAmendedAndMarketOrders) {
  const engine::EngineConfig c = TestConfig();
  ExecutionReport r;
  r.type = ExecType::kExpired;
  r.order = MarketBuyByQuote();
  r.seq = Sequence{1002};
  r.time_ns = 1'700'000'000'123'000'000;
  const boost::json::object o = ParseObject(ExecutionReportJson(c, r, 1));
  EXPECT_EQ(Str(o, "x"), "EXPIRED");
  EXPECT_EQ(Str(o, "X"), "EXPIRED");
  EXPECT_EQ(Str(o, "C"), "");
  EXPECT_EQ(Str(o, "o"), "MARKET");
  EXPECT_EQ(Str(o, "f"), "GTC");
  EXPECT_EQ(Str(o, "p"), "0.00000000");
  EXPECT_EQ(Str(o, "q"), "0.00000000");
  EXPECT_EQ(Str(o, "Q"), "100.00000000");
  EXPECT_EQ(Str(o, "V"), "NONE");

  r.type = ExecType::kAmended;
  r.order = LimitBuy();
  boost::json::object a = ParseObject(ExecutionReportJson(c, r, 1));
  EXPECT_EQ(Str(a, "x"), "REPLACED");
  EXPECT_EQ(Str(a, "C"), "");  // the id did not change
  // An amend that gave the order a new client id: c the new one, C the previous.
  r.order.client_order_id = ClientOrderId::From("renamed");
  r.orig_client_order_id = ClientOrderId::From("my-order_1");
  a = ParseObject(ExecutionReportJson(c, r, 1));
  EXPECT_EQ(Str(a, "c"), "renamed");
  EXPECT_EQ(Str(a, "C"), "my-order_1");
}

TEST(ExecutionReportJson, RejectReasons) {
  const engine::EngineConfig c = TestConfig();
  ExecutionReport r;
  r.type = ExecType::kRejected;
  r.order = LimitBuy();
  r.order.status = OrderStatus::kRejected;
  const auto reason = [&](RejectReason why) {
    r.reject = why;
    const boost::json::object o = ParseObject(ExecutionReportJson(c, r, 1));
    EXPECT_EQ(Str(o, "x"), "REJECTED");
    EXPECT_EQ(Str(o, "X"), "REJECTED");
    return Str(o, "r");
  };
  EXPECT_EQ(reason(RejectReason::kInsufficientBalance), "INSUFFICIENT_BALANCES");
  EXPECT_EQ(reason(RejectReason::kWouldTakeLiquidity), "WOULD_MATCH_IMMEDIATELY");
  EXPECT_EQ(reason(RejectReason::kMinNotional), "MIN_NOTIONAL");
  EXPECT_EQ(reason(RejectReason::kFokNotFillable), "FOK_NOT_FILLABLE");
  EXPECT_EQ(reason(RejectReason::kDuplicateClientOrderId), "DUPLICATE_CLIENT_ORDER_ID");
  EXPECT_EQ(reason(RejectReason::kMarketNotTrading), "MARKET_NOT_TRADING");
  EXPECT_EQ(reason(RejectReason::kNone), "NONE");
}

TEST(AccountPositionJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  const std::vector<BalanceRow> balances = {{kBtc, Amount{150'000'000}, Amount{0}},
                                            {kUsd, Amount{12'345}, Amount{1}}};
  const std::string json = AccountPositionJson(c, balances, 1'700'000'000'300);
  EXPECT_EQ(
      json,
      R"({"e":"outboundAccountPosition","E":1700000000300,"u":1700000000300,"B":[)"
      R"({"a":"BTC","f":"1.50000000","l":"0.00000000"},{"a":"USD","f":"123.45","l":"0.01"}]})");
  ParseObject(json);
}

TEST(BalanceUpdateJson, Golden) {
  const engine::EngineConfig c = TestConfig();
  marketdata::BalanceDelta d;
  d.account = AccountId{5};
  d.asset = kUsdt;
  d.delta = Amount{-2'500'000'000};
  d.seq = Sequence{2000};
  d.time_ns = 1'700'000'000'400'000'000;
  const std::string json = BalanceUpdateJson(c, d, 1'700'000'000'401);
  EXPECT_EQ(
      json,
      R"({"e":"balanceUpdate","E":1700000000401,"a":"USDT","d":"-25.00000000","T":1700000000400})");
  ParseObject(json);
}

// --- escaping ---

TEST(BinanceJson, EscapesClientTextAndConfigurationStrings) {
  engine::EngineConfig c = TestConfig();
  c.markets[0].symbol = "BTC\"USDT\\";
  OrderRecord o = LimitBuy();
  const std::string nasty = std::string("a\"b\\c\n") + '\x01' + "\x7f";
  o.client_order_id = ClientOrderId::From(nasty);
  const std::string json = OrderJson(c, o);
  EXPECT_NE(json.find(R"("clientOrderId":"a\"b\\c\n\u0001\u007f")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("symbol":"BTC\"USDT\\")"), std::string::npos) << json;
  const boost::json::object parsed = ParseObject(json);
  EXPECT_EQ(Str(parsed, "clientOrderId"), nasty);
  EXPECT_EQ(Str(parsed, "symbol"), "BTC\"USDT\\");

  ExecutionReport r;
  r.type = ExecType::kCanceled;
  r.order = o;
  const boost::json::object report = ParseObject(ExecutionReportJson(c, r, 1));
  EXPECT_EQ(Str(report, "c"), nasty);
  EXPECT_EQ(Str(report, "C"), nasty);
  EXPECT_EQ(Str(ParseObject(CanceledOrderJson(c, o, "x\"y", 1)), "clientOrderId"), "x\"y");
}

}  // namespace
}  // namespace mb::gateway
