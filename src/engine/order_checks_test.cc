// Placing: the checks, in order, and the edge of int64. Every reject is an
// event that changes nothing but the sequence (EngineTest::ExpectReject).
#include <gtest/gtest.h>

#include <cstdint>

#include "common/strong.h"
#include "engine/command.h"
#include "engine/event.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

// An empty engine; each test funds what it needs.
class PlaceCheckTest : public EngineTest {};

TEST_F(PlaceCheckTest, UnknownMarketAccountAndTheFeeAccount) {
  Fund(kAlice);
  Rejected r = ExpectReject(
      WithClientId(Limit(kAlice, Side::kBuy, 100, 1, TimeInForce::kGtc, kNoMarket), "c-1"),
      RejectReason::kUnknownMarket);
  EXPECT_EQ(r.command, CommandType::kPlaceOrder);
  EXPECT_EQ(r.account, kAlice);
  EXPECT_EQ(r.market, kNoMarket);
  EXPECT_EQ(r.order_id, OrderId{0});
  EXPECT_EQ(r.client_order_id.view(), "c-1");
  // The market is checked before the account.
  ExpectReject(Limit(kNoAccount, Side::kBuy, 100, 1, TimeInForce::kGtc, kNoMarket),
               RejectReason::kUnknownMarket);
  r = ExpectReject(Limit(kNoAccount, Side::kBuy, 100, 1), RejectReason::kUnknownAccount);
  EXPECT_EQ(r.account, kNoAccount);
  ExpectReject(Limit(AccountId{0xFFFF'FFFF}, Side::kBuy, 100, 1), RejectReason::kUnknownAccount);
  ExpectReject(Limit(kFee, Side::kSell, 0, 0), RejectReason::kUnauthorized);
  // The highest valid account may trade.
  Credit(AccountId{15}, kUsdt, 1'000);
  Rest(AccountId{15}, Side::kBuy, 100, 1);
}

TEST_F(PlaceCheckTest, PriceQuantityAndNotionalLimits) {
  Fund(kAlice);
  ExpectReject(Limit(kAlice, Side::kBuy, 0, 1), RejectReason::kInvalidPrice);
  ExpectReject(Limit(kAlice, Side::kBuy, -100, 1), RejectReason::kInvalidPrice);
  ExpectReject(Limit(kAlice, Side::kBuy, 10'000'001, 1), RejectReason::kInvalidPrice);
  ExpectReject(Limit(kAlice, Side::kSell, kInt64Max, 1), RejectReason::kInvalidPrice);
  ExpectReject(Maker(kAlice, Side::kSell, 10'000'001, 1), RejectReason::kInvalidPrice);
  // max_price passes the price check; the lock (10^8) is then too large.
  ExpectReject(Limit(kAlice, Side::kBuy, 10'000'000, 1), RejectReason::kInsufficientBalance);
  Rest(kAlice, Side::kSell, 10'000'000, 1);

  ExpectReject(Limit(kAlice, Side::kBuy, 100, 0), RejectReason::kInvalidQuantity);
  ExpectReject(Limit(kAlice, Side::kBuy, 100, -1), RejectReason::kInvalidQuantity);
  ExpectReject(Limit(kAlice, Side::kSell, 100, 100'001), RejectReason::kInvalidQuantity);
  ExpectReject(Limit(kAlice, Side::kBuy, 100, 4, TimeInForce::kGtc, kEthUsdt),
               RejectReason::kInvalidQuantity);  // min_qty 5
  ExpectReject(Limit(kAlice, Side::kBuy, 100, 1'000'001, TimeInForce::kGtc, kEthUsdt),
               RejectReason::kInvalidQuantity);
  Rest(kAlice, Side::kBuy, 1, 5, kEthUsdt);  // notional 5, no minimum there

  // min_notional 1000 = 100 ticks × 1 lot × 10.
  ExpectReject(Limit(kAlice, Side::kBuy, 99, 1), RejectReason::kMinNotional);
  ExpectReject(Limit(kAlice, Side::kSell, 1, 99), RejectReason::kMinNotional);
  Rest(kAlice, Side::kBuy, 100, 1);
  Rest(kAlice, Side::kBuy, 1, 100);
  // Price is checked before quantity, quantity before notional.
  ExpectReject(Limit(kAlice, Side::kBuy, 0, 0), RejectReason::kInvalidPrice);
  ExpectReject(Limit(kAlice, Side::kBuy, 1, 0), RejectReason::kInvalidQuantity);
}

TEST_F(PlaceCheckTest, MarketOrderSizeLimits) {
  Fund(kAlice);
  ExpectReject(MarketQty(kAlice, Side::kBuy, 100'001), RejectReason::kInvalidQuantity);
  ExpectReject(MarketQty(kAlice, Side::kSell, -1), RejectReason::kInvalidQuantity);
  ExpectReject(MarketQty(kAlice, Side::kBuy, 4, kEthUsdt), RejectReason::kInvalidQuantity);
  ExpectReject(MarketQuote(kAlice, Side::kBuy, -5), RejectReason::kInvalidQuantity);
  ExpectReject(MarketQuote(kAlice, Side::kBuy, 999), RejectReason::kMinNotional);
  ExpectReject(MarketQuote(kAlice, Side::kSell, 999), RejectReason::kMinNotional);
  Events ev = Place(MarketQuote(kAlice, Side::kBuy, 1'000));
  EXPECT_EQ(Types(ev), "OrderAccepted OrderExpired");
}

TEST_F(PlaceCheckTest, EnumValuesOutOfRangeAreAnInvalidOrderType) {
  Fund(kAlice);
  PlaceOrder p = Limit(kAlice, Side::kBuy, 100, 1);
  p.side = static_cast<Side>(2);
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p = Limit(kAlice, Side::kBuy, 100, 1);
  p.type = static_cast<OrderType>(7);
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p = Limit(kAlice, Side::kBuy, 100, 1);
  p.tif = static_cast<TimeInForce>(3);
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p = Limit(kAlice, Side::kBuy, 100, 1);
  p.stp = static_cast<StpMode>(4);
  ExpectReject(p, RejectReason::kInvalidOrderType);
}

TEST_F(PlaceCheckTest, LimitMakerWithIocOrFokIsAnInvalidOrderType) {
  Fund(kAlice);
  PlaceOrder p = Maker(kAlice, Side::kBuy, 100, 1);
  p.tif = TimeInForce::kIoc;
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p.tif = TimeInForce::kFok;
  ExpectReject(p, RejectReason::kInvalidOrderType);
  // Check 3 comes before the price check (5).
  p.price = Price{0};
  ExpectReject(p, RejectReason::kInvalidOrderType);
}

TEST_F(PlaceCheckTest, LimitOrderWithAQuoteQtyIsAnInvalidOrderType) {
  Fund(kAlice);
  PlaceOrder p = Limit(kAlice, Side::kBuy, 100, 1);
  p.quote_qty = Amount{1'000};
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p = Maker(kAlice, Side::kSell, 100, 1);
  p.quote_qty = Amount{1'000};
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p = Limit(kAlice, Side::kBuy, 100, 1, TimeInForce::kFok);
  p.quote_qty = Amount{-1};
  ExpectReject(p, RejectReason::kInvalidOrderType);
}

TEST_F(PlaceCheckTest, MarketOrderWithNeitherOrBothSizesIsAnInvalidOrderType) {
  Fund(kAlice);
  PlaceOrder p = MarketQty(kAlice, Side::kBuy, 0);
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p.qty = Qty{1};
  p.quote_qty = Amount{5'000};
  ExpectReject(p, RejectReason::kInvalidOrderType);
}

TEST_F(PlaceCheckTest, InsufficientBalanceCountsOnlyTheAvailablePart) {
  Credit(kCarol, kUsdt, 9'999);
  ExpectReject(Limit(kCarol, Side::kBuy, 100, 10), RejectReason::kInsufficientBalance);
  ExpectReject(Limit(kCarol, Side::kSell, 100, 1), RejectReason::kInsufficientBalance);
  ExpectReject(MarketQuote(kCarol, Side::kBuy, 10'000), RejectReason::kInsufficientBalance);
  Credit(kCarol, kUsdt, 1);
  const OrderId o = Rest(kCarol, Side::kBuy, 100, 10);
  EXPECT_EQ(Bal(kCarol, kUsdt), B(0, 10'000));
  // The locked part is not available to another order.
  ExpectReject(Limit(kCarol, Side::kBuy, 100, 1), RejectReason::kInsufficientBalance);
  Cancel(kCarol, o);
  Rest(kCarol, Side::kBuy, 100, 10);
}

TEST_F(PlaceCheckTest, CheckOrderLaterChecksDoNotMaskEarlierOnes) {
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 1);
  // Carol has nothing: the post-only check (6) comes before the balance (7),
  // and an unaffordable FOK is refused, whether or not it could fill.
  ExpectReject(Maker(kCarol, Side::kBuy, 100, 1), RejectReason::kWouldTakeLiquidity);
  ExpectReject(Limit(kCarol, Side::kBuy, 100, 5, TimeInForce::kFok),
               RejectReason::kInsufficientBalance);
  // Notional (5) comes before the balance (7).
  ExpectReject(Limit(kCarol, Side::kBuy, 99, 1), RejectReason::kMinNotional);
  // Market status (2) comes before the order type (3).
  SetStatus(kBtcUsdt, MarketStatus::kHalted);
  ExpectReject(MarketQty(kCarol, Side::kBuy, 0), RejectReason::kMarketNotTrading);
  // The fee account (1) comes before the market status (2).
  ExpectReject(Limit(kFee, Side::kBuy, 100, 1), RejectReason::kUnauthorized);
}

// An empty engine; each test funds what it needs.
class OverflowTest : public EngineTest {};

TEST_F(OverflowTest, OrderAtMaxPriceAndMaxQtyNearTheInt64Limit) {
  // ETHBTC: npt 1, max_price = max_qty = kBigMax; kBigMax² fits int64.
  constexpr int64_t kN = kBigMax * kBigMax;
  static_assert(kN == 9'223'372'030'926'249'001);
  Credit(kAlice, kBtc, kN);
  Credit(kBob, kEth, kBigMax);
  ExpectReject(Limit(kAlice, Side::kBuy, kBigMax + 1, 1, TimeInForce::kGtc, kEthBtc),
               RejectReason::kInvalidPrice);
  ExpectReject(Limit(kAlice, Side::kBuy, 1, kBigMax + 1, TimeInForce::kGtc, kEthBtc),
               RejectReason::kInvalidQuantity);
  ExpectReject(Limit(kAlice, Side::kBuy, kInt64Max, kInt64Max, TimeInForce::kGtc, kEthBtc),
               RejectReason::kInvalidPrice);

  const OrderId a = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, kBigMax, kBigMax, TimeInForce::kGtc, kEthBtc));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderRested");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{kN});
  EXPECT_EQ(Bal(kAlice, kBtc), B(0, kN));

  ev = Place(Limit(kBob, Side::kSell, 1, kBigMax, TimeInForce::kGtc, kEthBtc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  const Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.maker_order_id, a);
  EXPECT_EQ(t.price, Price{kBigMax});
  EXPECT_EQ(t.base_qty, Amount{kBigMax});
  EXPECT_EQ(t.notional, Amount{kN});
  EXPECT_EQ(t.maker_fee, Amount{3'037'001});               // ceil(kBigMax × 10 / 10^4), ETH
  EXPECT_EQ(t.taker_fee, Amount{18'446'744'061'852'499});  // ceil(kN × 20 / 10^4), BTC
  EXPECT_TRUE(t.maker_filled);
  EXPECT_TRUE(t.taker_filled);
  EXPECT_EQ(Bal(kAlice, kBtc), B(0, 0));
  EXPECT_EQ(Bal(kAlice, kEth), B(kBigMax - 3'037'001, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kN - 18'446'744'061'852'499, 0));
  EXPECT_EQ(Bal(kBob, kEth), B(0, 0));
  EXPECT_EQ(Bal(kFee, kBtc), B(18'446'744'061'852'499, 0));
  EXPECT_EQ(Bal(kFee, kEth), B(3'037'001, 0));
}

TEST_F(OverflowTest, MarketBuyWithAHugeQuoteBudget) {
  constexpr int64_t kN = kBigMax * kBigMax;
  Credit(kBob, kEth, kBigMax);
  const OrderId m = Rest(kBob, Side::kSell, kBigMax, kBigMax, kEthBtc);
  // No balance: the lock of INT64_MAX is simply not available, in both markets.
  ExpectReject(MarketQuote(kAlice, Side::kBuy, kInt64Max, kEthBtc),
               RejectReason::kInsufficientBalance);
  ExpectReject(MarketQuote(kAlice, Side::kBuy, kInt64Max), RejectReason::kInsufficientBalance);
  // A market buy by qty: the exact cost kN is not available either.
  ExpectReject(MarketQty(kAlice, Side::kBuy, kBigMax, kEthBtc), RejectReason::kInsufficientBalance);

  Credit(kAlice, kBtc, kInt64Max);
  const OrderId t = NextOrderId();
  Events ev = Place(MarketQuote(kAlice, Side::kBuy, kInt64Max, kEthBtc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{kInt64Max});
  const Trade tr = At<Trade>(ev, 1);
  EXPECT_EQ(tr.maker_order_id, m);
  EXPECT_EQ(tr.taker_order_id, t);
  EXPECT_EQ(tr.qty, Qty{kBigMax});
  EXPECT_EQ(tr.notional, Amount{kN});
  EXPECT_EQ(tr.maker_fee, Amount{9'223'372'030'926'250});  // ceil(kN × 10 / 10^4), BTC
  EXPECT_EQ(tr.taker_fee, Amount{6'074'001});              // ceil(kBigMax × 20 / 10^4), ETH
  const OrderExpired x = At<OrderExpired>(ev, 2);
  EXPECT_EQ(x.reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(x.remaining, Qty{0});
  EXPECT_EQ(x.released, Amount{kInt64Max - kN});
  EXPECT_EQ(Bal(kAlice, kBtc), B(kInt64Max - kN, 0));
  EXPECT_EQ(Bal(kAlice, kEth), B(kBigMax - 6'074'001, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kN - 9'223'372'030'926'250, 0));
}

TEST_F(OverflowTest, MarketSellWithAHugeQuoteBudget) {
  constexpr int64_t kN = kBigMax * kBigMax;
  Credit(kAlice, kBtc, kN);
  const OrderId a = Rest(kAlice, Side::kBuy, kBigMax, kBigMax, kEthBtc);
  // The walk would sell kBigMax ETH, which Bob does not have.
  ExpectReject(MarketQuote(kBob, Side::kSell, kInt64Max, kEthBtc),
               RejectReason::kInsufficientBalance);
  Credit(kBob, kEth, kBigMax);
  Events ev = Place(MarketQuote(kBob, Side::kSell, kInt64Max, kEthBtc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{kBigMax});
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, a);
  EXPECT_EQ(At<Trade>(ev, 1).notional, Amount{kN});
  EXPECT_EQ(At<OrderExpired>(ev, 2).reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(At<OrderExpired>(ev, 2).released, Amount{0});
  EXPECT_EQ(Bal(kBob, kEth), B(0, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kN - 18'446'744'061'852'499, 0));
}

}  // namespace
}  // namespace mb::engine
