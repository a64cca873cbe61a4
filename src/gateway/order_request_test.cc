#include "gateway/order_request.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"
#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/market.h"
#include "engine/types.h"
#include "gateway/api_error.h"
#include "gateway/params.h"

namespace mb::gateway {
namespace {

using engine::OrderType;
using engine::Side;
using engine::StpMode;
using engine::TimeInForce;

constexpr AccountId kAccount{7};
constexpr MarketId kBtcUsdt{0};
constexpr MarketId kEthBtc{1};
constexpr MarketId kBtcUsd{2};

// BTCUSDT as config/matchbook.toml defines it, ETHBTC (a BTC quote) and
// BTCUSD (a 2-decimal quote).
engine::EngineConfig TestConfig() {
  engine::EngineConfig c;
  c.assets = {{"BTC", 8}, {"ETH", 8}, {"USDT", 8}, {"USD", 2}};
  engine::MarketSpec btcusdt;
  btcusdt.symbol = "BTCUSDT";
  btcusdt.base = AssetId{0};
  btcusdt.quote = AssetId{2};
  btcusdt.tick_units = 1'000'000;              // 0.01 USDT
  btcusdt.lot_units = 1'000;                   // 0.00001 BTC
  btcusdt.min_qty = Qty{1};                    // 0.00001 BTC
  btcusdt.max_qty = Qty{900'000'000};          // 9000 BTC
  btcusdt.max_price = Price{100'000'000};      // 1000000 USDT
  btcusdt.min_notional = Amount{500'000'000};  // 5 USDT
  btcusdt.maker_fee_bps = 10;
  btcusdt.taker_fee_bps = 10;

  engine::MarketSpec ethbtc;
  ethbtc.symbol = "ETHBTC";
  ethbtc.base = AssetId{1};
  ethbtc.quote = AssetId{0};
  ethbtc.tick_units = 1'000;             // 0.00001 BTC
  ethbtc.lot_units = 100'000;            // 0.001 ETH
  ethbtc.min_qty = Qty{10};              // 0.01 ETH
  ethbtc.max_qty = Qty{100'000'000};     // 100000 ETH
  ethbtc.max_price = Price{1'000'000};   // 10 BTC
  ethbtc.min_notional = Amount{10'000};  // 0.0001 BTC

  engine::MarketSpec btcusd;
  btcusd.symbol = "BTCUSD";
  btcusd.base = AssetId{0};
  btcusd.quote = AssetId{3};
  btcusd.tick_units = 100;       // 1.00 USD
  btcusd.lot_units = 1'000'000;  // 0.01 BTC
  btcusd.min_qty = Qty{1};
  btcusd.max_qty = Qty{100'000};         // 1000 BTC
  btcusd.max_price = Price{10'000'000};  // 10000000 USD
  btcusd.min_notional = Amount{1'000};   // 10.00 USD

  c.markets = {btcusdt, ethbtc, btcusd};
  c.max_accounts = 16;
  c.fee_account = AccountId{0};
  c.expected_open_orders = 64;
  c.client_id_memory = 64;
  const Status s = c.Validate();
  EXPECT_TRUE(s.ok()) << s.message();
  return c;
}

Params MakeParams(std::string_view query) {
  Params p;
  const std::optional<ApiError> err = Params::Parse(query, "", &p);
  EXPECT_FALSE(err.has_value()) << query << ": " << (err ? err->msg : "");
  return p;
}

class ParseNewOrderTest : public ::testing::Test {
 protected:
  // Parses a request that must be accepted.
  NewOrder Accept(std::string_view query) {
    NewOrder out;
    const std::optional<ApiError> err =
        ParseNewOrder(MakeParams(query), config_, kAccount, &out, rules_);
    EXPECT_FALSE(err.has_value()) << query << " -> " << (err ? err->Json() : "");
    return out;
  }
  // Parses a request that must be refused, and checks that the output is untouched.
  ApiError Refuse(std::string_view query) {
    NewOrder out;
    out.place.price = Price{-77};
    out.client_order_id = "untouched";
    const std::optional<ApiError> err =
        ParseNewOrder(MakeParams(query), config_, kAccount, &out, rules_);
    EXPECT_TRUE(err.has_value()) << query;
    EXPECT_EQ(out.place.price, Price{-77}) << query;
    EXPECT_EQ(out.client_order_id, "untouched") << query;
    return err.value_or(ApiError{0, 0, ""});
  }
  void ExpectError(std::string_view query, int code, std::string_view msg) {
    const ApiError e = Refuse(query);
    EXPECT_EQ(e.code, code) << query;
    EXPECT_EQ(e.msg, msg) << query;
    EXPECT_EQ(e.http_status, 400) << query;
  }

  engine::EngineConfig config_ = TestConfig();
  std::vector<MarketRules> rules_;  // empty: every market has the defaults
};

constexpr std::string_view kQtyIllegal =
    "Illegal characters found in parameter 'quantity'; "
    R"(legal range is '^([0-9]{1,20})(\.[0-9]{1,20})?$'.)";
constexpr std::string_view kPriceIllegal =
    "Illegal characters found in parameter 'price'; "
    R"(legal range is '^([0-9]{1,20})(\.[0-9]{1,20})?$'.)";
constexpr std::string_view kQuoteIllegal =
    "Illegal characters found in parameter 'quoteOrderQty'; "
    R"(legal range is '^([0-9]{1,20})(\.[0-9]{1,20})?$'.)";
constexpr std::string_view kClientIdIllegal =
    "Illegal characters found in parameter 'newClientOrderId'; "
    R"(legal range is '^[\.A-Z\:/a-z0-9_-]{1,36}$'.)";

// --- accepted orders ---

TEST_F(ParseNewOrderTest, LimitOrderAsCcxtSendsIt) {
  const NewOrder o = Accept(
      "symbol=BTCUSDT&side=BUY&type=LIMIT&quantity=0.0015&price=65000.01&timeInForce=GTC"
      "&newClientOrderId=x-R4BD3S82.A:/z_-9&newOrderRespType=FULL&timestamp=1700000000000"
      "&recvWindow=5000&signature=abc");
  EXPECT_EQ(o.place.account, kAccount);
  EXPECT_EQ(o.place.market, kBtcUsdt);
  EXPECT_EQ(o.place.side, Side::kBuy);
  EXPECT_EQ(o.place.type, OrderType::kLimit);
  EXPECT_EQ(o.place.tif, TimeInForce::kGtc);
  EXPECT_EQ(o.place.stp, StpMode::kNone);
  EXPECT_EQ(o.place.price, Price{6'500'001});
  EXPECT_EQ(o.place.qty, Qty{150});
  EXPECT_EQ(o.place.quote_qty, Amount{0});
  EXPECT_EQ(o.place.client_order_id.view(), "x-R4BD3S82.A:/z_-9");
  EXPECT_EQ(o.client_order_id, "x-R4BD3S82.A:/z_-9");
  EXPECT_EQ(o.resp, RespType::kFull);
}

TEST_F(ParseNewOrderTest, LimitSellWithEveryOption) {
  const NewOrder o = Accept(
      "symbol=ETHBTC&side=SELL&type=LIMIT&timeInForce=IOC&quantity=2.500000000000&price=0.05000"
      "&newOrderRespType=RESULT&selfTradePreventionMode=EXPIRE_BOTH");
  EXPECT_EQ(o.place.market, kEthBtc);
  EXPECT_EQ(o.place.side, Side::kSell);
  EXPECT_EQ(o.place.tif, TimeInForce::kIoc);
  EXPECT_EQ(o.place.stp, StpMode::kExpireBoth);
  EXPECT_EQ(o.place.price, Price{5'000});  // 0.05 BTC / 0.00001
  EXPECT_EQ(o.place.qty, Qty{2'500});      // 2.5 ETH / 0.001 (zeros past the scale are fine)
  EXPECT_TRUE(o.place.client_order_id.empty());
  EXPECT_EQ(o.client_order_id, "");
  EXPECT_EQ(o.resp, RespType::kResult);
  EXPECT_EQ(
      Accept("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=FOK&quantity=1&price=10").place.tif,
      TimeInForce::kFok);
}

TEST_F(ParseNewOrderTest, EverySelfTradePreventionModeAndResponseType) {
  const std::string base = "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=10";
  EXPECT_EQ(Accept(base + "&selfTradePreventionMode=NONE").place.stp, StpMode::kNone);
  EXPECT_EQ(Accept(base + "&selfTradePreventionMode=EXPIRE_TAKER").place.stp,
            StpMode::kExpireTaker);
  EXPECT_EQ(Accept(base + "&selfTradePreventionMode=EXPIRE_MAKER").place.stp,
            StpMode::kExpireMaker);
  EXPECT_EQ(Accept(base + "&selfTradePreventionMode=EXPIRE_BOTH").place.stp, StpMode::kExpireBoth);
  EXPECT_EQ(Accept(base + "&newOrderRespType=ACK").resp, RespType::kAck);
  EXPECT_EQ(Accept(base + "&newOrderRespType=RESULT").resp, RespType::kResult);
  EXPECT_EQ(Accept(base + "&newOrderRespType=FULL").resp, RespType::kFull);
  EXPECT_EQ(Accept(base).resp, RespType::kFull);
}

TEST_F(ParseNewOrderTest, LimitMakerRestsGtcAndDefaultsToAck) {
  const NewOrder o = Accept("symbol=BTCUSDT&side=SELL&type=LIMIT_MAKER&quantity=0.01&price=70000");
  EXPECT_EQ(o.place.type, OrderType::kLimitMaker);
  EXPECT_EQ(o.place.tif, TimeInForce::kGtc);
  EXPECT_EQ(o.place.price, Price{7'000'000});
  EXPECT_EQ(o.place.qty, Qty{1'000});
  EXPECT_EQ(o.resp, RespType::kAck);  // Binance: ACK for types other than LIMIT and MARKET
  EXPECT_EQ(Accept("symbol=BTCUSDT&side=SELL&type=LIMIT_MAKER&quantity=0.01&price=70000&"
                   "newOrderRespType=FULL")
                .resp,
            RespType::kFull);
}

TEST_F(ParseNewOrderTest, MarketByQuantity) {
  const NewOrder o = Accept("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=0.5");
  EXPECT_EQ(o.place.type, OrderType::kMarket);
  EXPECT_EQ(o.place.tif, TimeInForce::kIoc);
  EXPECT_EQ(o.place.price, Price{0});
  EXPECT_EQ(o.place.qty, Qty{50'000});
  EXPECT_EQ(o.place.quote_qty, Amount{0});
  EXPECT_EQ(o.resp, RespType::kFull);
}

TEST_F(ParseNewOrderTest, MarketByQuoteAmountBothSides) {
  const NewOrder buy = Accept("symbol=BTCUSDT&side=BUY&type=MARKET&quoteOrderQty=100.5");
  EXPECT_EQ(buy.place.qty, Qty{0});
  EXPECT_EQ(buy.place.quote_qty, Amount{10'050'000'000});
  EXPECT_EQ(buy.place.price, Price{0});
  const NewOrder sell = Accept("symbol=BTCUSD&side=SELL&type=MARKET&quoteOrderQty=10.00");
  EXPECT_EQ(sell.place.market, kBtcUsd);
  EXPECT_EQ(sell.place.side, Side::kSell);
  EXPECT_EQ(sell.place.quote_qty, Amount{1'000});  // exactly the minimum notional
}

TEST_F(ParseNewOrderTest, EmptyOptionalParametersCountAsNotSent) {
  // An empty timeInForce / quoteOrderQty / price is not "sent" where it is not required.
  const NewOrder o =
      Accept("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=0.5&timeInForce=&price=&quoteOrderQty=");
  EXPECT_EQ(o.place.qty, Qty{50'000});
}

TEST_F(ParseNewOrderTest, BoundariesOfTheFilters) {
  // Exactly the minimum notional: 5.00 x 1 BTC.
  EXPECT_EQ(
      Accept("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=5").place.price,
      Price{500});
  // Maximum price and quantity.
  const NewOrder max =
      Accept("symbol=BTCUSDT&side=SELL&type=LIMIT&timeInForce=GTC&quantity=9000&price=1000000");
  EXPECT_EQ(max.place.price, Price{100'000'000});
  EXPECT_EQ(max.place.qty, Qty{900'000'000});
  // Minimum quantity.
  EXPECT_EQ(Accept("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=0.00001").place.qty, Qty{1});
  // A 36-character client id.
  const std::string id36(36, 'a');
  EXPECT_EQ(Accept("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=1&newClientOrderId=" + id36)
                .client_order_id,
            id36);
  // The 2-decimal quote.
  const NewOrder usd =
      Accept("symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&price=65000.00");
  EXPECT_EQ(usd.place.price, Price{65'000});
  EXPECT_EQ(usd.place.qty, Qty{1});
}

// --- refused orders ---

TEST_F(ParseNewOrderTest, Symbol) {
  ExpectError("side=BUY&type=MARKET&quantity=1", -1102,
              "Mandatory parameter 'symbol' was not sent, was empty/null, or malformed.");
  ExpectError("symbol=&side=BUY&type=MARKET&quantity=1", -1105, "Parameter 'symbol' was empty.");
  ExpectError("symbol=btcusdt&side=BUY&type=MARKET&quantity=1", -1121, "Invalid symbol.");
  ExpectError("symbol=DOGEUSDT&side=BUY&type=MARKET&quantity=1", -1121, "Invalid symbol.");
}

TEST_F(ParseNewOrderTest, Side) {
  ExpectError("symbol=BTCUSDT&type=MARKET&quantity=1", -1102,
              "Mandatory parameter 'side' was not sent, was empty/null, or malformed.");
  ExpectError("symbol=BTCUSDT&side=buy&type=MARKET&quantity=1", -1117, "Invalid side.");
  ExpectError("symbol=BTCUSDT&side=HOLD&type=MARKET&quantity=1", -1117, "Invalid side.");
  // The side is checked before the type.
  ExpectError("symbol=BTCUSDT&side=X&type=X&quantity=1", -1117, "Invalid side.");
}

TEST_F(ParseNewOrderTest, Type) {
  ExpectError("symbol=BTCUSDT&side=BUY&quantity=1", -1102,
              "Mandatory parameter 'type' was not sent, was empty/null, or malformed.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=OCO&quantity=1", -1116, "Invalid orderType.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=limit&quantity=1", -1116, "Invalid orderType.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=stop_loss&quantity=1&stopPrice=1", -1116,
              "Invalid orderType.");
}

// A type the market's rules do not enable: Binance's -2010 for the symbol,
// once the request is otherwise valid (a bad parameter is reported first).
TEST_F(ParseNewOrderTest, TypesTheMarketDoesNotEnable) {
  rules_.resize(3);
  rules_[0].order_types = OrderTypeBit(OrderType::kLimit);  // BTCUSDT: LIMIT only
  const std::pair<const char*, const char*> refused[] = {
      {"type=STOP_LOSS&quantity=1&stopPrice=10",
       "Stop loss orders are not supported for this symbol."},
      {"type=STOP_LOSS_LIMIT&timeInForce=GTC&quantity=1&price=10&stopPrice=10",
       "Stop loss limit orders are not supported for this symbol."},
      {"type=TAKE_PROFIT&quantity=1&trailingDelta=100",
       "Take profit orders are not supported for this symbol."},
      {"type=TAKE_PROFIT_LIMIT&timeInForce=GTC&quantity=1&price=10&stopPrice=10",
       "Take profit limit orders are not supported for this symbol."},
      {"type=MARKET&quantity=1", "Market orders are not supported for this symbol."},
      {"type=LIMIT_MAKER&quantity=1&price=10",
       "Limit maker orders are not supported for this symbol."},
  };
  for (const auto& [q, msg] : refused) {
    ExpectError(std::string("symbol=BTCUSDT&side=BUY&") + q, -2010, msg);
  }
  EXPECT_EQ(
      Accept("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=10").place.type,
      OrderType::kLimit);
  // Parameters first: a stop order without its stop price is -1102 even here.
  ExpectError("symbol=BTCUSDT&side=BUY&type=STOP_LOSS&quantity=1", -1102,
              "Param 'stopPrice' or 'trailingDelta' must be sent, but both were empty/null!");
  // The other markets keep their own rules (here the defaults).
  rules_[1] = MarketRules{};
  EXPECT_EQ(Accept("symbol=ETHBTC&side=SELL&type=STOP_LOSS&quantity=1&stopPrice=0.04").place.type,
            OrderType::kStopLoss);
  rules_[0].order_types = 0;
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=10", -2010,
              "Limit orders are not supported for this symbol.");
}

// --- conditional orders ---

TEST_F(ParseNewOrderTest, StopLossLimitAsCcxtSendsIt) {
  // ccxt's createOrder('BTC/USDT', 'limit', 'sell', 0.01, 60000, {triggerPrice: 61000}).
  const NewOrder o = Accept(
      "symbol=BTCUSDT&side=SELL&newClientOrderId=x-TKT5PX2Fabc&newOrderRespType=FULL"
      "&type=STOP_LOSS_LIMIT&quantity=0.01&price=60000&stopPrice=61000&timeInForce=GTC"
      "&timestamp=1&recvWindow=5000");
  EXPECT_EQ(o.place.type, OrderType::kStopLossLimit);
  EXPECT_EQ(o.place.side, Side::kSell);
  EXPECT_EQ(o.place.tif, TimeInForce::kGtc);
  EXPECT_EQ(o.place.price, Price{6'000'000});
  EXPECT_EQ(o.place.stop_price, Price{6'100'000});
  EXPECT_EQ(o.place.trailing_delta, 0);
  EXPECT_EQ(o.place.qty, Qty{1'000});
  EXPECT_EQ(o.place.quote_qty, Amount{0});
  EXPECT_EQ(o.resp, RespType::kFull);
}

TEST_F(ParseNewOrderTest, EveryConditionalType) {
  const NewOrder tp = Accept(
      "symbol=BTCUSDT&side=SELL&type=TAKE_PROFIT_LIMIT&timeInForce=FOK&quantity=0.5&price=70000"
      "&stopPrice=70000.01");
  EXPECT_EQ(tp.place.type, OrderType::kTakeProfitLimit);
  EXPECT_EQ(tp.place.tif, TimeInForce::kFok);
  EXPECT_EQ(tp.place.stop_price, Price{7'000'001});
  // Binance's default answer for every type but LIMIT and MARKET: ACK.
  EXPECT_EQ(tp.resp, RespType::kAck);

  const NewOrder sl = Accept("symbol=BTCUSDT&side=BUY&type=STOP_LOSS&quantity=0.5&stopPrice=1");
  EXPECT_EQ(sl.place.type, OrderType::kStopLoss);
  EXPECT_EQ(sl.place.tif, TimeInForce::kIoc);  // matched as a MARKET order once triggered
  EXPECT_EQ(sl.place.price, Price{0});
  EXPECT_EQ(sl.place.qty, Qty{50'000});
  EXPECT_EQ(sl.place.stop_price, Price{100});
  EXPECT_EQ(sl.resp, RespType::kAck);

  const NewOrder t = Accept("symbol=ETHBTC&side=BUY&type=TAKE_PROFIT&quantity=1&stopPrice=10");
  EXPECT_EQ(t.place.type, OrderType::kTakeProfit);
  EXPECT_EQ(t.place.stop_price, Price{1'000'000});  // the maximum price
  EXPECT_EQ(t.resp, RespType::kAck);
  EXPECT_EQ(Accept("symbol=ETHBTC&side=BUY&type=TAKE_PROFIT&quantity=1&stopPrice=1"
                   "&newOrderRespType=RESULT")
                .resp,
            RespType::kResult);
}

TEST_F(ParseNewOrderTest, TrailingStops) {
  // Without a stop price: tracks from placement; with one: from its activation.
  const NewOrder a = Accept(
      "symbol=BTCUSDT&side=SELL&type=STOP_LOSS_LIMIT&timeInForce=GTC&quantity=1&price=60000"
      "&trailingDelta=250");
  EXPECT_EQ(a.place.trailing_delta, 250);
  EXPECT_EQ(a.place.stop_price, Price{0});
  const NewOrder b =
      Accept("symbol=BTCUSDT&side=BUY&type=STOP_LOSS&quantity=1&stopPrice=43000&trailingDelta=500");
  EXPECT_EQ(b.place.trailing_delta, 500);
  EXPECT_EQ(b.place.stop_price, Price{4'300'000});
  // The default TRAILING_DELTA bounds: 10..2000 both ways.
  for (const char* side : {"BUY", "SELL"}) {
    for (const char* type : {"STOP_LOSS", "TAKE_PROFIT"}) {
      const std::string q = std::string("symbol=BTCUSDT&quantity=1&side=") + side + "&type=" + type;
      EXPECT_EQ(Accept(q + "&trailingDelta=10").place.trailing_delta, 10);
      EXPECT_EQ(Accept(q + "&trailingDelta=2000").place.trailing_delta, 2000);
      ExpectError(q + "&trailingDelta=9", -1013, "Filter failure: TRAILING_DELTA");
      ExpectError(q + "&trailingDelta=2001", -1013, "Filter failure: TRAILING_DELTA");
      ExpectError(q + "&trailingDelta=0", -1013, "Filter failure: TRAILING_DELTA");
      ExpectError(q + "&trailingDelta=-100", -1013, "Filter failure: TRAILING_DELTA");
    }
  }
}

// minTrailingAboveDelta / maxTrailingAboveDelta bound STOP_LOSS* BUY and
// TAKE_PROFIT* SELL, the "below" pair the others (Binance's trailing stop FAQ).
TEST_F(ParseNewOrderTest, TrailingDeltaBoundsByDirection) {
  rules_.resize(1);
  rules_[0].min_trailing_above = 100;
  rules_[0].max_trailing_above = 200;
  rules_[0].min_trailing_below = 300;
  rules_[0].max_trailing_below = 400;
  const std::string base = "symbol=BTCUSDT&quantity=1&timeInForce=GTC&price=100";
  const std::pair<const char*, bool> cases[] = {
      {"&type=STOP_LOSS_LIMIT&side=BUY", true},
      {"&type=TAKE_PROFIT_LIMIT&side=SELL", true},
      {"&type=STOP_LOSS_LIMIT&side=SELL", false},
      {"&type=TAKE_PROFIT_LIMIT&side=BUY", false},
  };
  for (const auto& [q, above] : cases) {
    const std::string r = base + q;
    const int lo = above ? 100 : 300;
    const int hi = above ? 200 : 400;
    EXPECT_EQ(Accept(r + "&trailingDelta=" + std::to_string(lo)).place.trailing_delta, lo) << q;
    EXPECT_EQ(Accept(r + "&trailingDelta=" + std::to_string(hi)).place.trailing_delta, hi) << q;
    ExpectError(r + "&trailingDelta=" + std::to_string(lo - 1), -1013,
                "Filter failure: TRAILING_DELTA");
    ExpectError(r + "&trailingDelta=" + std::to_string(hi + 1), -1013,
                "Filter failure: TRAILING_DELTA");
  }
  // The market-like types follow the same table.
  EXPECT_EQ(Accept("symbol=BTCUSDT&quantity=1&type=TAKE_PROFIT&side=SELL&trailingDelta=150")
                .place.trailing_delta,
            150);
  ExpectError("symbol=BTCUSDT&quantity=1&type=TAKE_PROFIT&side=BUY&trailingDelta=150", -1013,
              "Filter failure: TRAILING_DELTA");
}

TEST_F(ParseNewOrderTest, ConditionalParameterRules) {
  constexpr std::string_view kNoStop =
      "Param 'stopPrice' or 'trailingDelta' must be sent, but both were empty/null!";
  const std::string sll = "symbol=BTCUSDT&side=SELL&type=STOP_LOSS_LIMIT";
  const std::string sl = "symbol=BTCUSDT&side=SELL&type=STOP_LOSS";
  // Neither stopPrice nor trailingDelta (absent or empty).
  ExpectError(sll + "&timeInForce=GTC&quantity=1&price=10", -1102, kNoStop);
  ExpectError(sll + "&timeInForce=GTC&quantity=1&price=10&stopPrice=&trailingDelta=", -1102,
              kNoStop);
  ExpectError(sl + "&quantity=1", -1102, kNoStop);
  ExpectError("symbol=BTCUSDT&side=BUY&type=TAKE_PROFIT&quantity=1", -1102, kNoStop);
  ExpectError("symbol=BTCUSDT&side=BUY&type=TAKE_PROFIT_LIMIT&timeInForce=GTC&quantity=1&price=10",
              -1102, kNoStop);
  // The *_LIMIT types need timeInForce, price and quantity.
  ExpectError(sll + "&quantity=1&price=10&stopPrice=9", -1102,
              "Mandatory parameter 'timeInForce' was not sent, was empty/null, or malformed.");
  ExpectError(sll + "&timeInForce=GTD&quantity=1&price=10&stopPrice=9", -1115,
              "Invalid timeInForce.");
  ExpectError(sll + "&timeInForce=GTC&quantity=1&stopPrice=9", -1102,
              "Mandatory parameter 'price' was not sent, was empty/null, or malformed.");
  ExpectError(sll + "&timeInForce=GTC&price=10&stopPrice=9", -1102,
              "Mandatory parameter 'quantity' was not sent, was empty/null, or malformed.");
  ExpectError(sll + "&timeInForce=GTC&price=10&quantity=1&quoteOrderQty=10&stopPrice=9", -1106,
              "Parameter 'quoteOrderQty' sent when not required.");
  // STOP_LOSS / TAKE_PROFIT: quantity only; no price, no timeInForce, no quoteOrderQty.
  ExpectError(sl + "&stopPrice=9", -1102,
              "Mandatory parameter 'quantity' was not sent, was empty/null, or malformed.");
  ExpectError(sl + "&quoteOrderQty=100&stopPrice=9", -1102,
              "Mandatory parameter 'quantity' was not sent, was empty/null, or malformed.");
  ExpectError(sl + "&quantity=1&quoteOrderQty=100&stopPrice=9", -1106,
              "Parameter 'quoteOrderQty' sent when not required.");
  ExpectError(sl + "&quantity=1&price=10&stopPrice=9", -1106,
              "Parameter 'price' sent when not required.");
  ExpectError(sl + "&quantity=1&timeInForce=GTC&stopPrice=9", -1106,
              "Parameter 'timeInForce' sent when not required.");
  ExpectError("symbol=BTCUSDT&side=SELL&type=TAKE_PROFIT&quantity=0.000015&stopPrice=9", -1013,
              "Filter failure: MARKET_LOT_SIZE");
  ExpectError(sll + "&timeInForce=GTC&quantity=0.000015&price=10&stopPrice=9", -1013,
              "Filter failure: LOT_SIZE");
  ExpectError(sll + "&timeInForce=GTC&quantity=0.00001&price=10&stopPrice=9", -1013,
              "Filter failure: NOTIONAL");
  // stopPrice / trailingDelta on the other types.
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=10&stopPrice=9",
              -1106, "Parameter 'stopPrice' sent when not required.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT_MAKER&quantity=1&price=10&trailingDelta=100",
              -1106, "Parameter 'trailingDelta' sent when not required.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=1&stopPrice=9", -1106,
              "Parameter 'stopPrice' sent when not required.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=1&trailingDelta=100", -1106,
              "Parameter 'trailingDelta' sent when not required.");
  // Empty ones are not "sent".
  EXPECT_EQ(Accept("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=1&stopPrice=&trailingDelta=")
                .place.stop_price,
            Price{0});
}

TEST_F(ParseNewOrderTest, StopPriceFilterAndFormat) {
  const std::string sl = "symbol=BTCUSDT&side=SELL&type=STOP_LOSS&quantity=1";
  for (const char* bad : {"0", "0.00", "10.001", "1000000.01", "99999999999999999999"}) {
    ExpectError(sl + "&stopPrice=" + bad, -1013, "Filter failure: PRICE_FILTER");
  }
  ExpectError(sl + "&stopPrice=10.000000001", -1111,
              "Parameter 'stopPrice' has too much precision.");
  for (const char* bad : {"-1", "1e5", "abc", "1.2.3"}) {
    ExpectError(sl + "&stopPrice=" + bad, -1100,
                "Illegal characters found in parameter 'stopPrice'; "
                R"(legal range is '^([0-9]{1,20})(\.[0-9]{1,20})?$'.)");
  }
  ExpectError(sl + "&trailingDelta=abc", -1100,
              "Illegal characters found in parameter 'trailingDelta'; legal range is "
              "'^-?[0-9]{1,19}$'.");
  // The 2-decimal quote: a stop price on its tick.
  EXPECT_EQ(
      Accept("symbol=BTCUSD&side=SELL&type=STOP_LOSS&quantity=1&stopPrice=65000").place.stop_price,
      Price{65'000});
  ExpectError("symbol=BTCUSD&side=SELL&type=STOP_LOSS&quantity=1&stopPrice=65000.50", -1013,
              "Filter failure: PRICE_FILTER");
}

TEST_F(ParseNewOrderTest, PeggedOrdersAreRefused) {
  const std::string limit =
      "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=10";
  for (const char* peg :
       {"&pegPriceType=PRIMARY_PEG", "&pegOffsetType=PRICE_LEVEL", "&pegOffsetValue=1"}) {
    ExpectError(limit + peg, -2010, "Pegged orders are not supported for this symbol.");
  }
  ExpectError(
      "symbol=BTCUSDT&side=SELL&type=STOP_LOSS&quantity=1&stopPrice=9&pegPriceType="
      "MARKET_PEG",
      -2010, "Pegged orders are not supported for this symbol.");
}

TEST_F(ParseNewOrderTest, IcebergAndStrategyParameters) {
  const std::string limit =
      "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=10";
  // icebergQty: LIMIT / LIMIT_MAKER GTC, LOT_SIZE, below the quantity, at
  // most ICEBERG_PARTS (10 by default) slices.
  EXPECT_EQ(Accept(limit + "&icebergQty=0.5").place.iceberg_qty, Qty{50'000});
  EXPECT_EQ(Accept(limit + "&icebergQty=0.1").place.iceberg_qty, Qty{10'000});
  EXPECT_EQ(Accept("symbol=BTCUSDT&side=BUY&type=LIMIT_MAKER&quantity=1&price=10&icebergQty=0.1")
                .place.iceberg_qty,
            Qty{10'000});
  ExpectError(limit + "&icebergQty=0.09", -1013, "Filter failure: ICEBERG_PARTS");
  ExpectError(limit + "&icebergQty=1", -2010, "Invalid icebergQty.");
  ExpectError(limit + "&icebergQty=0.000001", -1013, "Filter failure: LOT_SIZE");
  ExpectError(limit + "&icebergQty=0.123456789", -1111,
              "Parameter 'icebergQty' has too much precision.");
  ExpectError(limit + "&icebergQty=abc", -1100,
              "Illegal characters found in parameter 'icebergQty'; "
              R"(legal range is '^([0-9]{1,20})(\.[0-9]{1,20})?$'.)");
  ExpectError(
      "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=IOC&quantity=1&price=10&"
      "icebergQty=0.5",
      -1106, "Parameter 'icebergQty' sent when not required.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=1&icebergQty=0.5", -1106,
              "Parameter 'icebergQty' sent when not required.");
  {
    // A market whose ICEBERG_PARTS is below 2 takes no iceberg.
    std::vector<MarketRules> rules(3);
    rules[0].iceberg_parts = 1;
    NewOrder out;
    const auto e =
        ParseNewOrder(MakeParams(limit + "&icebergQty=0.5"), config_, kAccount, &out, rules);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->msg, "Iceberg orders are not supported for this symbol.");
  }
  // strategyType: at least 1000000; strategyId: any unsigned integer.
  ExpectError(limit + "&strategyType=999999", -1134, "strategyType was less than 1000000.");
  ExpectError(limit + "&strategyType=-5", -1134, "strategyType was less than 1000000.");
  EXPECT_EQ(Refuse(limit + "&strategyType=abc").code, -1100);
  EXPECT_EQ(Refuse(limit + "&strategyId=-1").code, -1100);
  EXPECT_EQ(Accept(limit + "&strategyType=1000000&strategyId=7").place.qty.value > 0, true);
}

TEST_F(ParseNewOrderTest, TimeInForce) {
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT&quantity=1&price=10", -1102,
              "Mandatory parameter 'timeInForce' was not sent, was empty/null, or malformed.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=&quantity=1&price=10", -1105,
              "Parameter 'timeInForce' was empty.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTX&quantity=1&price=10", -1115,
              "Invalid timeInForce.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT_MAKER&timeInForce=GTC&quantity=1&price=10", -1106,
              "Parameter 'timeInForce' sent when not required.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=MARKET&timeInForce=IOC&quantity=1", -1106,
              "Parameter 'timeInForce' sent when not required.");
}

TEST_F(ParseNewOrderTest, RequiredAndUnwantedAmounts) {
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1", -1102,
              "Mandatory parameter 'price' was not sent, was empty/null, or malformed.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT_MAKER&quantity=1", -1102,
              "Mandatory parameter 'price' was not sent, was empty/null, or malformed.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&price=10", -1102,
              "Mandatory parameter 'quantity' was not sent, was empty/null, or malformed.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&price=10&quantity=", -1105,
              "Parameter 'quantity' was empty.");
  ExpectError(
      "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&price=10&quantity=1"
      "&quoteOrderQty=10",
      -1106, "Parameter 'quoteOrderQty' sent when not required.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=1&price=10", -1106,
              "Parameter 'price' sent when not required.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=1&quoteOrderQty=10", -1106,
              "Parameter 'quoteOrderQty' sent when not required.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=MARKET", -1102,
              "Param 'quantity' or 'quoteOrderQty' must be sent, but both were empty/null!");
  ExpectError("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=&quoteOrderQty=", -1102,
              "Param 'quantity' or 'quoteOrderQty' must be sent, but both were empty/null!");
}

TEST_F(ParseNewOrderTest, MalformedDecimals) {
  const std::string limit = "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC";
  for (const char* bad : {"-1", "1e5", ".5", "5.", "abc", "+1", "1%20", "0x10", "1.2.3"}) {
    ExpectError(limit + "&price=10&quantity=" + bad, -1100, kQtyIllegal);
    ExpectError(limit + "&quantity=1&price=" + bad, -1100, kPriceIllegal);
    ExpectError(std::string("symbol=BTCUSDT&side=BUY&type=MARKET&quoteOrderQty=") + bad, -1100,
                kQuoteIllegal);
  }
  // Parsing errors come before filter failures.
  ExpectError(limit + "&price=0&quantity=x", -1100, kQtyIllegal);
}

TEST_F(ParseNewOrderTest, TooManyDecimals) {
  const std::string limit = "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC";
  ExpectError(limit + "&quantity=1&price=10.000000001", -1111,
              "Parameter 'price' has too much precision.");
  ExpectError(limit + "&price=10&quantity=0.000000001", -1111,
              "Parameter 'quantity' has too much precision.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=MARKET&quantity=0.000000001", -1111,
              "Parameter 'quantity' has too much precision.");
  ExpectError("symbol=BTCUSDT&side=BUY&type=MARKET&quoteOrderQty=10.000000001", -1111,
              "Parameter 'quoteOrderQty' has too much precision.");
  // The 2-decimal quote asset.
  ExpectError("symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=65000.001", -1111,
              "Parameter 'price' has too much precision.");
  ExpectError("symbol=BTCUSD&side=BUY&type=MARKET&quoteOrderQty=10.001", -1111,
              "Parameter 'quoteOrderQty' has too much precision.");
}

TEST_F(ParseNewOrderTest, PriceFilter) {
  const std::string limit = "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1";
  for (const char* bad :
       {"0", "0.00", "10.001", "10.00000001", "1000000.01", "99999999999999999999"}) {
    ExpectError(limit + "&price=" + bad, -1013, "Filter failure: PRICE_FILTER");
  }
  ExpectError("symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=65000.50", -1013,
              "Filter failure: PRICE_FILTER");
  // The price filter is checked before the lot size.
  ExpectError(limit.substr(0, limit.size() - 1) + "0&price=0", -1013,
              "Filter failure: PRICE_FILTER");
}

TEST_F(ParseNewOrderTest, LotSize) {
  const std::string limit = "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&price=10";
  for (const char* bad : {"0", "0.000015", "9000.00001", "99999999999999999999"}) {
    ExpectError(limit + "&quantity=" + bad, -1013, "Filter failure: LOT_SIZE");
  }
  // ETHBTC: min_qty is 0.01 ETH.
  ExpectError("symbol=ETHBTC&side=SELL&type=LIMIT&timeInForce=GTC&price=0.05&quantity=0.009", -1013,
              "Filter failure: LOT_SIZE");
  for (const char* bad : {"0", "0.000015", "9000.00001", "99999999999999999999"}) {
    ExpectError(std::string("symbol=BTCUSDT&side=SELL&type=MARKET&quantity=") + bad, -1013,
                "Filter failure: MARKET_LOT_SIZE");
  }
}

TEST_F(ParseNewOrderTest, Notional) {
  // 4.99 x 1 BTC = 4.99 USDT < 5.
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=4.99", -1013,
              "Filter failure: NOTIONAL");
  ExpectError("symbol=BTCUSDT&side=BUY&type=LIMIT_MAKER&quantity=0.00001&price=65000", -1013,
              "Filter failure: NOTIONAL");
  for (const char* bad : {"4.99999999", "0", "0.00"}) {
    ExpectError(std::string("symbol=BTCUSDT&side=BUY&type=MARKET&quoteOrderQty=") + bad, -1013,
                "Filter failure: NOTIONAL");
  }
  ExpectError("symbol=BTCUSD&side=SELL&type=MARKET&quoteOrderQty=9.99", -1013,
              "Filter failure: NOTIONAL");
  // Too large for int64 units: no filter applies, the text is refused.
  ExpectError("symbol=BTCUSDT&side=BUY&type=MARKET&quoteOrderQty=99999999999999999999", -1100,
              kQuoteIllegal);
}

TEST_F(ParseNewOrderTest, ClientOrderId) {
  const std::string market = "symbol=BTCUSDT&side=BUY&type=MARKET&quantity=1";
  ExpectError(market + "&newClientOrderId=", -1105, "Parameter 'newClientOrderId' was empty.");
  ExpectError(market + "&newClientOrderId=" + std::string(37, 'a'), -1100, kClientIdIllegal);
  for (const char* bad : {"has%20space", "semi;colon", "quote%22", "%C3%A9", "a+b", "hash%23"}) {
    ExpectError(market + "&newClientOrderId=" + bad, -1100, kClientIdIllegal);
  }
}

TEST_F(ParseNewOrderTest, ResponseTypeAndSelfTradePrevention) {
  const std::string market = "symbol=BTCUSDT&side=BUY&type=MARKET&quantity=1";
  ExpectError(market + "&newOrderRespType=MINI", -1130,
              "Data sent for parameter 'newOrderRespType' is not valid. Use ACK, RESULT or FULL.");
  ExpectError(market + "&newOrderRespType=full", -1130,
              "Data sent for parameter 'newOrderRespType' is not valid. Use ACK, RESULT or FULL.");
  ExpectError(market + "&newOrderRespType=", -1105, "Parameter 'newOrderRespType' was empty.");
  ExpectError(market + "&selfTradePreventionMode=DECREMENT", -1130,
              "Data sent for parameter 'selfTradePreventionMode' is not valid. Use NONE, "
              "EXPIRE_TAKER, EXPIRE_MAKER or EXPIRE_BOTH.");
  ExpectError(market + "&selfTradePreventionMode=", -1105,
              "Parameter 'selfTradePreventionMode' was empty.");
}

// --- FindMarket ---

TEST(FindMarket, ExactSymbolsOnly) {
  const engine::EngineConfig c = TestConfig();
  MarketId m{99};
  EXPECT_FALSE(FindMarket(c, "BTCUSDT", &m).has_value());
  EXPECT_EQ(m, kBtcUsdt);
  EXPECT_FALSE(FindMarket(c, "ETHBTC", &m).has_value());
  EXPECT_EQ(m, kEthBtc);
  EXPECT_FALSE(FindMarket(c, "BTCUSD", &m).has_value());
  EXPECT_EQ(m, kBtcUsd);
  for (const char* bad : {"btcusdt", "BTCUSDT ", "BTC", "", "BTC-USDT"}) {
    MarketId untouched{99};
    const std::optional<ApiError> e = FindMarket(c, bad, &untouched);
    ASSERT_TRUE(e.has_value()) << bad;
    EXPECT_EQ(e->code, -1121);
    EXPECT_EQ(e->msg, "Invalid symbol.");
    EXPECT_EQ(untouched, MarketId{99});
  }
}

// --- ParseCancel ---

class ParseCancelTest : public ::testing::Test {
 protected:
  engine::CancelOrder Accept(std::string_view query) {
    engine::CancelOrder out;
    const std::optional<ApiError> err = ParseCancel(MakeParams(query), config_, kAccount, &out);
    EXPECT_FALSE(err.has_value()) << query << " -> " << (err ? err->Json() : "");
    return out;
  }
  void ExpectError(std::string_view query, int code, std::string_view msg) {
    engine::CancelOrder out;
    out.order_id = OrderId{4242};
    const std::optional<ApiError> err = ParseCancel(MakeParams(query), config_, kAccount, &out);
    ASSERT_TRUE(err.has_value()) << query;
    EXPECT_EQ(err->code, code) << query;
    EXPECT_EQ(err->msg, msg) << query;
    EXPECT_EQ(out.order_id, OrderId{4242}) << query;
  }
  engine::EngineConfig config_ = TestConfig();
};

TEST_F(ParseCancelTest, ByOrderIdOrClientIdOrBoth) {
  const engine::CancelOrder by_id = Accept("symbol=ETHBTC&orderId=12345&timestamp=1");
  EXPECT_EQ(by_id.account, kAccount);
  EXPECT_EQ(by_id.market, kEthBtc);
  EXPECT_EQ(by_id.order_id, OrderId{12345});
  EXPECT_TRUE(by_id.orig_client_order_id.empty());

  const engine::CancelOrder by_client = Accept("symbol=BTCUSDT&origClientOrderId=my-1");
  EXPECT_EQ(by_client.market, kBtcUsdt);
  EXPECT_EQ(by_client.order_id, OrderId{0});
  EXPECT_EQ(by_client.orig_client_order_id.view(), "my-1");

  const engine::CancelOrder both = Accept("symbol=BTCUSDT&orderId=9&origClientOrderId=my-1");
  EXPECT_EQ(both.order_id, OrderId{9});
  EXPECT_EQ(both.orig_client_order_id.view(), "my-1");
  EXPECT_EQ(both.restriction, engine::CancelRestriction::kNone);
}

TEST_F(ParseCancelTest, CancelRestrictions) {
  EXPECT_EQ(Accept("symbol=BTCUSDT&orderId=9&cancelRestrictions=ONLY_NEW").restriction,
            engine::CancelRestriction::kOnlyNew);
  EXPECT_EQ(Accept("symbol=BTCUSDT&orderId=9&cancelRestrictions=ONLY_PARTIALLY_FILLED").restriction,
            engine::CancelRestriction::kOnlyPartiallyFilled);
  ExpectError("symbol=BTCUSDT&orderId=9&cancelRestrictions=only_new", -1145,
              "Invalid cancelRestrictions");
  ExpectError("symbol=BTCUSDT&orderId=9&cancelRestrictions=FILLED", -1145,
              "Invalid cancelRestrictions");
}

TEST_F(ParseCancelTest, Errors) {
  ExpectError("orderId=1", -1102,
              "Mandatory parameter 'symbol' was not sent, was empty/null, or malformed.");
  ExpectError("symbol=NOPE&orderId=1", -1121, "Invalid symbol.");
  ExpectError("symbol=BTCUSDT", -1102,
              "Param 'origClientOrderId' or 'orderId' must be sent, but both were empty/null!");
  ExpectError("symbol=BTCUSDT&origClientOrderId=", -1102,
              "Param 'origClientOrderId' or 'orderId' must be sent, but both were empty/null!");
  ExpectError("symbol=BTCUSDT&orderId=abc", -1100,
              "Illegal characters found in parameter 'orderId'; legal range is '^[0-9]{1,20}$'.");
  ExpectError("symbol=BTCUSDT&orderId=-1", -1100,
              "Illegal characters found in parameter 'orderId'; legal range is '^[0-9]{1,20}$'.");
  ExpectError("symbol=BTCUSDT&orderId=0", -2011, "Unknown order sent.");
  ExpectError("symbol=BTCUSDT&origClientOrderId=" + std::string(37, 'a'), -2011,
              "Unknown order sent.");
  ExpectError("symbol=BTCUSDT&origClientOrderId=bad%20id", -2011, "Unknown order sent.");
  // With an order id too: a client id no order can have is not that order's.
  ExpectError("symbol=BTCUSDT&orderId=9&origClientOrderId=" + std::string(37, 'a'), -2011,
              "Unknown order sent.");
}

// --- RequiredLock ---

engine::PlaceOrder Order(Side side, OrderType type, int64_t price, int64_t qty, int64_t quote) {
  engine::PlaceOrder p;
  p.account = kAccount;
  p.market = kBtcUsdt;
  p.side = side;
  p.type = type;
  p.price = Price{price};
  p.qty = Qty{qty};
  p.quote_qty = Amount{quote};
  return p;
}

TEST(RequiredLock, WhatEachOrderLocks) {
  const engine::EngineConfig c = TestConfig();
  // Limit buys: price x qty x 10 quote units per tick-lot (fees are never locked).
  EXPECT_EQ(RequiredLock(c, Order(Side::kBuy, OrderType::kLimit, 6'500'000, 150, 0)),
            Amount{9'750'000'000});
  EXPECT_EQ(RequiredLock(c, Order(Side::kBuy, OrderType::kLimitMaker, 500, 100'000, 0)),
            Amount{500'000'000});
  // Sells: the base quantity.
  EXPECT_EQ(RequiredLock(c, Order(Side::kSell, OrderType::kLimit, 6'500'000, 150, 0)),
            Amount{150'000});
  EXPECT_EQ(RequiredLock(c, Order(Side::kSell, OrderType::kMarket, 0, 150, 0)), Amount{150'000});
  // Market buys by quote amount: the amount.
  EXPECT_EQ(RequiredLock(c, Order(Side::kBuy, OrderType::kMarket, 0, 0, 10'050'000'000)),
            Amount{10'050'000'000});
  // Priced only by walking the book.
  EXPECT_EQ(RequiredLock(c, Order(Side::kBuy, OrderType::kMarket, 0, 150, 0)), std::nullopt);
  EXPECT_EQ(RequiredLock(c, Order(Side::kSell, OrderType::kMarket, 0, 0, 10'000'000'000)),
            std::nullopt);
  // Stop-limit orders lock as limit orders while they wait; stop-market
  // buys lock nothing until triggered, sells their quantity.
  EXPECT_EQ(RequiredLock(c, Order(Side::kBuy, OrderType::kStopLossLimit, 6'500'000, 150, 0)),
            Amount{9'750'000'000});
  EXPECT_EQ(RequiredLock(c, Order(Side::kSell, OrderType::kTakeProfitLimit, 6'500'000, 150, 0)),
            Amount{150'000});
  EXPECT_EQ(RequiredLock(c, Order(Side::kBuy, OrderType::kStopLoss, 0, 150, 0)), Amount{0});
  EXPECT_EQ(RequiredLock(c, Order(Side::kBuy, OrderType::kTakeProfit, 0, 150, 0)), Amount{0});
  EXPECT_EQ(RequiredLock(c, Order(Side::kSell, OrderType::kStopLoss, 0, 150, 0)), Amount{150'000});
  EXPECT_EQ(RequiredLock(c, Order(Side::kSell, OrderType::kTakeProfit, 0, 150, 0)),
            Amount{150'000});
  // Overflow and an unknown market cannot be priced either.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(RequiredLock(c, Order(Side::kBuy, OrderType::kLimit, kMax, 2, 0)), std::nullopt);
  EXPECT_EQ(RequiredLock(c, Order(Side::kSell, OrderType::kLimit, 1, kMax, 0)), std::nullopt);
  engine::PlaceOrder unknown = Order(Side::kSell, OrderType::kLimit, 1, 1, 0);
  unknown.market = MarketId{3};
  EXPECT_EQ(RequiredLock(c, unknown), std::nullopt);
}

// The lock of every order ParseNewOrder accepts equals what the engine locks
// when it accepts the same order (OrderAccepted::locked).
TEST(RequiredLock, MatchesTheEngine) {
  const engine::EngineConfig c = TestConfig();
  engine::Engine eng(c);
  engine::EventBuffer events;
  int64_t now = 1;
  for (uint16_t asset = 0; asset < 4; ++asset) {
    engine::Deposit d;
    d.account = kAccount;
    d.asset = AssetId{asset};
    d.amount = Amount{1'000'000'000'000'000};
    d.ref = TransferRef::From("seed-" + std::to_string(asset));
    events.clear();
    eng.Process(engine::Command{now++, d}, &events);
    ASSERT_EQ(events.size(), 1U);
    ASSERT_TRUE(std::holds_alternative<engine::Deposited>(events[0].body));
  }
  const char* requests[] = {
      "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.0015&price=65000.01",
      "symbol=BTCUSDT&side=SELL&type=LIMIT&timeInForce=GTC&quantity=0.0015&price=70000",
      "symbol=ETHBTC&side=BUY&type=LIMIT_MAKER&quantity=2.5&price=0.05",
      "symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.5&price=60000",
      "symbol=BTCUSDT&side=BUY&type=MARKET&quoteOrderQty=100.5",
      "symbol=BTCUSDT&side=SELL&type=MARKET&quantity=0.5",
      // The market buy above traded at 70000: the stops below wait beyond it.
      "symbol=BTCUSDT&side=BUY&type=STOP_LOSS_LIMIT&timeInForce=GTC&quantity=0.5&price=76000"
      "&stopPrice=75000",
      "symbol=BTCUSDT&side=SELL&type=TAKE_PROFIT_LIMIT&timeInForce=IOC&quantity=0.5&price=60000"
      "&trailingDelta=100",
      "symbol=BTCUSDT&side=BUY&type=STOP_LOSS&quantity=0.5&stopPrice=75000",
      "symbol=BTCUSDT&side=SELL&type=TAKE_PROFIT&quantity=0.5&stopPrice=80000&trailingDelta=20",
      "symbol=ETHBTC&side=BUY&type=TAKE_PROFIT&quantity=3&trailingDelta=2000",
  };
  for (const char* q : requests) {
    NewOrder order;
    const std::optional<ApiError> err = ParseNewOrder(MakeParams(q), c, kAccount, &order);
    ASSERT_FALSE(err.has_value()) << q << " -> " << err->Json();
    const std::optional<Amount> lock = RequiredLock(c, order.place);
    ASSERT_TRUE(lock.has_value()) << q;
    events.clear();
    eng.Process(engine::Command{now++, order.place}, &events);
    ASSERT_FALSE(events.empty()) << q;
    const auto* accepted = std::get_if<engine::OrderAccepted>(&events[0].body);
    const auto* rejected = std::get_if<engine::Rejected>(&events[0].body);
    ASSERT_NE(accepted, nullptr) << q << " rejected: "
                                 << (rejected ? engine::ToString(rejected->reason) : "");
    EXPECT_EQ(accepted->locked, *lock) << q;
  }
}

}  // namespace
}  // namespace mb::gateway

namespace mb::gateway {
namespace {

class ParseOrderListTest : public ::testing::Test {
 protected:
  using ListParser = std::optional<ApiError> (*)(const Params&, const engine::EngineConfig&,
                                                 AccountId, NewOrderList*,
                                                 std::span<const MarketRules>);
  NewOrderList Accept(ListParser parse, std::string_view query) {
    NewOrderList out;
    const std::optional<ApiError> err = parse(MakeParams(query), config_, kAccount, &out, {});
    EXPECT_FALSE(err.has_value()) << query << " -> " << (err ? err->Json() : "");
    return out;
  }
  // Refused, the output untouched (nothing would reach the engine).
  void ExpectError(ListParser parse, std::string_view query, int code, std::string_view msg) {
    NewOrderList out;
    out.list_client_order_id = "untouched";
    const std::optional<ApiError> err = parse(MakeParams(query), config_, kAccount, &out, {});
    ASSERT_TRUE(err.has_value()) << query;
    EXPECT_EQ(err->code, code) << query;
    EXPECT_EQ(err->msg, msg) << query;
    EXPECT_EQ(out.list_client_order_id, "untouched") << query;
    EXPECT_EQ(out.count, 0u) << query;
  }
  engine::EngineConfig config_ = TestConfig();
};

constexpr std::string_view kOco =
    "symbol=BTCUSDT&side=SELL&quantity=1&aboveType=LIMIT_MAKER&abovePrice=32000"
    "&belowType=STOP_LOSS_LIMIT&belowPrice=29000&belowStopPrice=29500&belowTimeInForce=GTC";

TEST_F(ParseOrderListTest, OcoAsBinanceTakesIt) {
  const NewOrderList l = Accept(&ParseOcoList, std::string(kOco) + "&listClientOrderId=L1");
  EXPECT_EQ(l.place.type, engine::ListType::kOco);
  EXPECT_EQ(l.count, 2u);
  EXPECT_EQ(l.list_client_order_id, "L1");
  EXPECT_EQ(l.place.list_client_order_id.view(), "L1");
  EXPECT_EQ(l.place.account, kAccount);
  EXPECT_EQ(l.place.market, kBtcUsdt);
  const engine::ListOrder& above = l.place.orders[0];
  const engine::ListOrder& below = l.place.orders[1];
  EXPECT_EQ(above.type, OrderType::kLimitMaker);
  EXPECT_EQ(above.side, Side::kSell);
  EXPECT_EQ(above.price, Price{3'200'000});
  EXPECT_EQ(above.qty, Qty{100'000});
  EXPECT_EQ(below.type, OrderType::kStopLossLimit);
  EXPECT_EQ(below.price, Price{2'900'000});
  EXPECT_EQ(below.stop_price, Price{2'950'000});
  EXPECT_EQ(below.tif, TimeInForce::kGtc);
  // Client ids generated when not sent.
  EXPECT_FALSE(above.client_order_id.empty());
  EXPECT_FALSE(below.client_order_id.empty());
  EXPECT_EQ(l.resp, RespType::kFull);
  const NewOrderList g = Accept(&ParseOcoList, kOco);
  EXPECT_EQ(g.list_client_order_id.substr(0, 3), "mb-");
  const NewOrderList named =
      Accept(&ParseOcoList, std::string(kOco) +
                                "&aboveClientOrderId=up&belowClientOrderId=down"
                                "&newOrderRespType=ACK&selfTradePreventionMode=EXPIRE_BOTH");
  EXPECT_EQ(named.place.orders[0].client_order_id.view(), "up");
  EXPECT_EQ(named.place.orders[1].client_order_id.view(), "down");
  EXPECT_EQ(named.resp, RespType::kAck);
  EXPECT_EQ(named.place.stp, engine::StpMode::kExpireBoth);
}

TEST_F(ParseOrderListTest, OcoRefusals) {
  const std::string oco(kOco);
  ExpectError(&ParseOcoList, "side=SELL&quantity=1", -1102,
              "Mandatory parameter 'symbol' was not sent, was empty/null, or malformed.");
  ExpectError(&ParseOcoList, "symbol=NOPE&side=SELL", -1121, "Invalid symbol.");
  ExpectError(&ParseOcoList,
              "symbol=BTCUSDT&side=SELL&quantity=1&belowType=STOP_LOSS&belowStopPrice=1", -1102,
              "Mandatory parameter 'aboveType' was not sent, was empty/null, or malformed.");
  ExpectError(&ParseOcoList,
              "symbol=BTCUSDT&side=SELL&quantity=1&aboveType=LIMIT&abovePrice=1"
              "&belowType=STOP_LOSS&belowStopPrice=1",
              -1158, "Order type not supported in OCO.");
  // Each order's own checks, naming the list's parameters.
  ExpectError(&ParseOcoList,
              "symbol=BTCUSDT&side=SELL&quantity=1&aboveType=LIMIT_MAKER"
              "&belowType=STOP_LOSS&belowStopPrice=29500",
              -1102,
              "Mandatory parameter 'abovePrice' was not sent, was empty/null, or malformed.");
  ExpectError(&ParseOcoList,
              "symbol=BTCUSDT&side=SELL&quantity=1&aboveType=LIMIT_MAKER&abovePrice=32000"
              "&belowType=STOP_LOSS_LIMIT&belowPrice=29000&belowStopPrice=29500",
              -1102,
              "Mandatory parameter 'belowTimeInForce' was not sent, was empty/null, or malformed.");
  ExpectError(&ParseOcoList, oco + "&aboveTimeInForce=GTC", -1106,
              "Parameter 'aboveTimeInForce' sent when not required.");
  ExpectError(&ParseOcoList,
              "symbol=BTCUSDT&side=SELL&quantity=1&aboveType=LIMIT_MAKER&abovePrice=32000.001"
              "&belowType=STOP_LOSS&belowStopPrice=29500",
              -1013, "Filter failure: PRICE_FILTER");
  ExpectError(&ParseOcoList, oco.substr(0, oco.find("&belowTimeInForce")) + "&belowTimeInForce=XYZ",
              -1115, "Invalid timeInForce.");
  ExpectError(&ParseOcoList, oco + "&aboveIcebergQty=0.01", -1013, "Filter failure: ICEBERG_PARTS");
  ExpectError(&ParseOcoList, oco + "&belowIcebergQty=0.5", -1106,
              "Parameter 'belowIcebergQty' sent when not required.");
  ExpectError(&ParseOcoList, oco + "&listClientOrderId=bad%20id", -1100,
              "Illegal characters found in parameter 'listClientOrderId'; "
              R"(legal range is '^[\.A-Z\:/a-z0-9_-]{1,36}$'.)");
  // The pair's places and prices.
  ExpectError(&ParseOcoList,
              "symbol=BTCUSDT&side=BUY&quantity=1&aboveType=LIMIT_MAKER&abovePrice=32000"
              "&belowType=STOP_LOSS&belowStopPrice=29500",
              -2010, "The relationship of the prices for the orders is not correct.");
  ExpectError(&ParseOcoList,
              "symbol=BTCUSDT&side=SELL&quantity=1&aboveType=LIMIT_MAKER&abovePrice=29000"
              "&belowType=STOP_LOSS&belowStopPrice=29500",
              -2010, "The relationship of the prices for the orders is not correct.");
}

TEST_F(ParseOrderListTest, OtoAndOtoco) {
  const std::string working =
      "symbol=BTCUSDT&workingType=LIMIT&workingSide=BUY&workingPrice=30000&workingQuantity=1"
      "&workingTimeInForce=GTC";
  const NewOrderList oto =
      Accept(&ParseOtoList, working +
                                "&pendingType=LIMIT_MAKER&pendingSide=SELL&pendingPrice=31000"
                                "&pendingQuantity=1&workingIcebergQty=0.5");
  EXPECT_EQ(oto.place.type, engine::ListType::kOto);
  EXPECT_EQ(oto.place.orders[0].type, OrderType::kLimit);
  EXPECT_EQ(oto.place.orders[0].side, Side::kBuy);
  EXPECT_EQ(oto.place.orders[0].iceberg_qty, Qty{50'000});
  EXPECT_EQ(oto.place.orders[1].type, OrderType::kLimitMaker);
  EXPECT_EQ(oto.place.orders[1].side, Side::kSell);
  ExpectError(&ParseOtoList,
              "symbol=BTCUSDT&workingType=MARKET&workingSide=BUY&workingQuantity=1"
              "&pendingType=LIMIT_MAKER&pendingSide=SELL&pendingPrice=31000&pendingQuantity=1",
              -1158, "Order type not supported in OTO.");
  ExpectError(&ParseOtoList,
              working + "&pendingType=LIMIT_MAKER&pendingSide=SELL&pendingQuantity=1", -1102,
              "Mandatory parameter 'pendingPrice' was not sent, was empty/null, or malformed.");
  ExpectError(&ParseOtoList, working + "&pendingType=MARKET&pendingSide=SELL", -1102,
              "Param 'pendingQuantity' or 'quoteOrderQty' must be sent, but both were "
              "empty/null!");
  const NewOrderList otoco =
      Accept(&ParseOtocoList,
             working +
                 "&pendingSide=SELL&pendingQuantity=1&pendingAboveType=LIMIT_MAKER"
                 "&pendingAbovePrice=32000&pendingBelowType=STOP_LOSS&pendingBelowStopPrice=29000");
  EXPECT_EQ(otoco.place.type, engine::ListType::kOtoco);
  EXPECT_EQ(otoco.count, 3u);
  EXPECT_EQ(otoco.place.orders[2].type, OrderType::kStopLoss);
  EXPECT_EQ(otoco.place.orders[2].stop_price, Price{2'900'000});
  ExpectError(&ParseOtocoList,
              working +
                  "&pendingSide=SELL&pendingQuantity=1&pendingAboveType=LIMIT_MAKER"
                  "&pendingAbovePrice=28000&pendingBelowType=STOP_LOSS"
                  "&pendingBelowStopPrice=29000",
              -2010, "The relationship of the prices for the orders is not correct.");
}

TEST_F(ParseOrderListTest, CancelList) {
  engine::CancelOrderList c;
  EXPECT_FALSE(ParseCancelList(MakeParams("symbol=BTCUSDT&orderListId=12"), config_, kAccount, &c));
  EXPECT_EQ(c.list_id, 12u);
  EXPECT_FALSE(
      ParseCancelList(MakeParams("symbol=BTCUSDT&listClientOrderId=L1"), config_, kAccount, &c));
  EXPECT_EQ(c.list_client_order_id.view(), "L1");
  const auto e = ParseCancelList(MakeParams("symbol=BTCUSDT"), config_, kAccount, &c);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, -1102);
  EXPECT_EQ(e->msg,
            "Param 'orderListId' or 'listClientOrderId' must be sent, but both were empty/null!");
}

}  // namespace
}  // namespace mb::gateway
