// Order types beyond the plain limit order: fill-or-kill, post-only
// (LIMIT_MAKER) and MARKET orders by base quantity or by quote amount, with
// the locks each takes.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/strong.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

// Alice and Bob funded.
class FokTest : public FundedEngineTest {};

TEST_F(FokTest, FokThatCannotFillExpiresAndTradesNothing) {
  Rest(kBob, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 101, 2);
  OrderExpired x = ExpectFokExpires(Limit(kAlice, Side::kBuy, 101, 5, TimeInForce::kFok));
  EXPECT_EQ(x.released, Amount{5'050});  // 101 x 5 x npt 10, the whole lock
  // Only 2 lots within the limit.
  x = ExpectFokExpires(Limit(kAlice, Side::kBuy, 100, 3, TimeInForce::kFok));
  EXPECT_EQ(x.released, Amount{3'000});
  // A sell releases its base lock.
  x = ExpectFokExpires(Limit(kBob, Side::kSell, 100, 1, TimeInForce::kFok));
  EXPECT_EQ(x.released, Amount{1'000});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 4'000, 4'000));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x2/1 101x2/1");
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "");
  EXPECT_EQ(engine_.open_orders(), 2u);
  EXPECT_EQ(Raw(engine_.next_trade_id()), 1u);
}

TEST_F(FokTest, FokThatExpiresFreesItsClientOrderId) {
  Rest(kBob, Side::kSell, 100, 2);
  const OrderExpired x =
      ExpectFokExpires(WithClientId(Limit(kAlice, Side::kBuy, 100, 3, TimeInForce::kFok), "fok"));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x2/1");
  // Like any closed order's, its id is free again (Binance's rule): the
  // re-submission is a new order.
  Events ev = Place(WithClientId(Limit(kAlice, Side::kBuy, 100, 2, TimeInForce::kFok), "fok"));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_NE(At<OrderAccepted>(ev, 0).order_id, x.order_id);
}

TEST_F(FokTest, FokThatCanFillFillsCompletely) {
  Rest(kBob, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 101, 2);
  Events ev = Place(Limit(kAlice, Side::kBuy, 101, 4, TimeInForce::kFok));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{4'040});
  EXPECT_EQ(At<OrderAccepted>(ev, 0).terms.tif, TimeInForce::kFok);
  const Trade last = At<Trade>(ev, 2);
  EXPECT_TRUE(last.taker_filled);
  EXPECT_EQ(last.taker_released, Amount{20});  // 4040 - 2000 - 2020
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'020, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);
}

TEST_F(FokTest, FokDryWalkAppliesSelfTradePrevention) {
  const OrderId own = Rest(kAlice, Side::kSell, 100, 1);
  Rest(kBob, Side::kSell, 101, 4);
  // EXPIRE_TAKER / EXPIRE_BOTH stop at Alice's own ask: nothing fills.
  ExpectFokExpires(
      WithStp(Limit(kAlice, Side::kBuy, 101, 4, TimeInForce::kFok), StpMode::kExpireTaker));
  ExpectFokExpires(
      WithStp(Limit(kAlice, Side::kBuy, 101, 4, TimeInForce::kFok), StpMode::kExpireBoth));
  EXPECT_EQ(Queue(kBtcUsdt, Side::kSell), (std::vector<uint64_t>{Raw(own), Raw(own) + 1}));
  // EXPIRE_MAKER skips it: Bob's 4 lots fill the whole order.
  Events ev =
      Place(WithStp(Limit(kAlice, Side::kBuy, 101, 4, TimeInForce::kFok), StpMode::kExpireMaker));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{4'040});
  const OrderExpired x = At<OrderExpired>(ev, 1);
  EXPECT_EQ(x.order_id, own);
  EXPECT_EQ(x.account, kAlice);
  EXPECT_EQ(x.side, Side::kSell);
  EXPECT_EQ(x.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(x.remaining, Qty{1});
  EXPECT_EQ(x.released, Amount{1'000});
  EXPECT_TRUE(At<Trade>(ev, 2).taker_filled);
  EXPECT_EQ(At<Trade>(ev, 2).taker_released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 4'000 - 8, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'040, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);
}

// Alice and Bob funded.
class LimitMakerTest : public FundedEngineTest {};

TEST_F(LimitMakerTest, LimitMakerThatWouldCrossIsRejectedOtherwiseRests) {
  Rest(kBob, Side::kSell, 100, 2);
  ExpectReject(Maker(kAlice, Side::kBuy, 100, 1), RejectReason::kWouldTakeLiquidity);
  ExpectReject(Maker(kAlice, Side::kBuy, 105, 1), RejectReason::kWouldTakeLiquidity);
  Events ev = Place(Maker(kAlice, Side::kBuy, 99, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderRested");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).terms.type, OrderType::kLimitMaker);
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{1'980});
  // Crossing its own account's order is still taking liquidity.
  ExpectReject(Maker(kAlice, Side::kSell, 99, 2), RejectReason::kWouldTakeLiquidity);
  ExpectReject(Maker(kBob, Side::kSell, 98, 2), RejectReason::kWouldTakeLiquidity);
  // At the best ask, a sell does not cross: it joins the level's tail.
  const OrderId s = Rest(Maker(kAlice, Side::kSell, 100, 1));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x3/2");
  EXPECT_EQ(Queue(kBtcUsdt, Side::kSell).back(), Raw(s));
}

// Alice and Bob funded.
class MarketOrderTest : public FundedEngineTest {};

TEST_F(MarketOrderTest, MarketOrdersOnAnEmptyBookAreAcceptedThenExpire) {
  const OrderId o1 = NextOrderId();
  Events ev = Place(MarketQty(kAlice, Side::kBuy, 5));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  OrderAccepted a = At<OrderAccepted>(ev, 0);
  EXPECT_EQ(a.order_id, o1);
  EXPECT_EQ(a.terms.type, OrderType::kMarket);
  EXPECT_EQ(a.terms.qty, Qty{5});
  EXPECT_EQ(a.quote_qty, Amount{0});
  EXPECT_EQ(a.locked, Amount{0});  // nothing rests to be bought
  OrderExpired x = At<OrderExpired>(ev, 1);
  EXPECT_EQ(x.order_id, o1);
  EXPECT_EQ(x.reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(x.remaining, Qty{5});
  EXPECT_EQ(x.released, Amount{0});

  ev = Place(MarketQuote(kAlice, Side::kBuy, 5'000));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  a = At<OrderAccepted>(ev, 0);
  EXPECT_EQ(a.terms.qty, Qty{0});
  EXPECT_EQ(a.quote_qty, Amount{5'000});
  EXPECT_EQ(a.locked, Amount{5'000});
  x = At<OrderExpired>(ev, 1);
  EXPECT_EQ(x.reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(x.remaining, Qty{0});
  EXPECT_EQ(x.released, Amount{5'000});

  ev = Place(MarketQty(kAlice, Side::kSell, 5));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{5'000});
  EXPECT_EQ(At<OrderExpired>(ev, 1).remaining, Qty{5});
  EXPECT_EQ(At<OrderExpired>(ev, 1).released, Amount{5'000});

  ev = Place(MarketQuote(kAlice, Side::kSell, 5'000));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{0});  // the walk sells nothing
  EXPECT_EQ(At<OrderExpired>(ev, 1).reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(At<OrderExpired>(ev, 1).released, Amount{0});

  // An account without any balance may send a market order by qty that locks 0.
  ev = Place(MarketQty(kCarol, Side::kBuy, 1));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");

  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc, 0));
  EXPECT_EQ(Bal(kCarol, kUsdt), B(0, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);
  EXPECT_EQ(Raw(engine_.next_trade_id()), 1u);
}

TEST_F(MarketOrderTest, MarketBuyByQtyLocksTheExactCost) {
  Rest(kBob, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 101, 3);
  Events ev = Place(MarketQty(kAlice, Side::kBuy, 4));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{4'020});  // 2000 + 2 × 1010
  EXPECT_EQ(At<Trade>(ev, 1).price, Price{100});
  EXPECT_EQ(At<Trade>(ev, 2).price, Price{101});
  EXPECT_EQ(At<Trade>(ev, 2).qty, Qty{2});
  EXPECT_TRUE(At<Trade>(ev, 2).taker_filled);
  EXPECT_EQ(At<Trade>(ev, 2).taker_released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'020, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 4'000 - 8, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "101x1/1");

  // The exact cost is also the balance needed: 1 lot at 101 = 1010.
  Credit(kCarol, kUsdt, 1'009);
  ExpectReject(MarketQty(kCarol, Side::kBuy, 1), RejectReason::kInsufficientBalance);
  Credit(kCarol, kUsdt, 1);
  ev = Place(MarketQty(kCarol, Side::kBuy, 1));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(Bal(kCarol, kUsdt), B(0, 0));
}

TEST_F(MarketOrderTest, MarketBuyByQtyOnAThinBookExpiresForLackOfLiquidity) {
  Rest(kBob, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 101, 1);
  const OrderId t = NextOrderId();
  Events ev = Place(MarketQty(kAlice, Side::kBuy, 5));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{3'010});  // all that rests
  EXPECT_FALSE(At<Trade>(ev, 2).taker_filled);
  const OrderExpired x = At<OrderExpired>(ev, 3);
  EXPECT_EQ(x.order_id, t);
  EXPECT_EQ(x.reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(x.remaining, Qty{2});
  EXPECT_EQ(x.released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 3'010, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 3'000 - 6, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);
}

TEST_F(MarketOrderTest, MarketBuyByQuoteLocksTheBudgetAndReleasesTheDust) {
  Rest(kBob, Side::kSell, 100, 5);
  const OrderId m2 = Rest(kBob, Side::kSell, 101, 5);
  const OrderId t = NextOrderId();
  Events ev = Place(MarketQuote(kAlice, Side::kBuy, 6'200));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{6'200});
  const Trade t1 = At<Trade>(ev, 1);
  EXPECT_EQ(t1.qty, Qty{5});
  EXPECT_EQ(t1.notional, Amount{5'000});
  EXPECT_TRUE(t1.maker_filled);
  const Trade t2 = At<Trade>(ev, 2);
  EXPECT_EQ(t2.maker_order_id, m2);
  EXPECT_EQ(t2.qty, Qty{1});  // floor(1200 / 1010)
  EXPECT_EQ(t2.notional, Amount{1'010});
  EXPECT_FALSE(t2.maker_filled);
  EXPECT_FALSE(t2.taker_filled);
  const OrderExpired x = At<OrderExpired>(ev, 3);
  EXPECT_EQ(x.order_id, t);
  // The book still offers more: the budget stopped it, not the book.
  EXPECT_EQ(x.reason, ExpireReason::kQuoteBudgetSpent);
  EXPECT_EQ(x.remaining, Qty{0});
  EXPECT_EQ(x.released, Amount{190});  // the dust
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 6'010, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 6'000 - 12, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "101x4/1");
}

// The budget's dust after the book ran out: the book stopped it (an expiry);
// the budget stopped it at the next level's lot price: spent.
TEST_F(MarketOrderTest, MarketBuyByQuoteTellsTheBudgetSpentFromTheBookRunningOut) {
  Rest(kBob, Side::kSell, 100, 5);
  Events ev = Place(MarketQuote(kAlice, Side::kBuy, 6'200));  // buys the 5, 1200 left
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_TRUE(At<Trade>(ev, 1).maker_filled);
  EXPECT_EQ(At<OrderExpired>(ev, 2).reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(At<OrderExpired>(ev, 2).released, Amount{1'200});

  Rest(kBob, Side::kSell, 100, 5);
  Rest(kBob, Side::kSell, 200, 5);                     // one lot costs 2000
  ev = Place(MarketQuote(kAlice, Side::kBuy, 6'200));  // buys the 5 at 100, 1200 left
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_TRUE(At<Trade>(ev, 1).maker_filled);
  EXPECT_EQ(At<OrderExpired>(ev, 2).reason, ExpireReason::kQuoteBudgetSpent);
  EXPECT_EQ(At<OrderExpired>(ev, 2).remaining, Qty{0});
  EXPECT_EQ(At<OrderExpired>(ev, 2).released, Amount{1'200});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 10'000, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "200x5/1");
}

TEST_F(MarketOrderTest, MarketBuyByQuoteThatSpendsItsWholeBudgetIsFilled) {
  Rest(kBob, Side::kSell, 100, 5);
  Rest(kBob, Side::kSell, 101, 5);
  Events ev = Place(MarketQuote(kAlice, Side::kBuy, 6'010));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_TRUE(At<Trade>(ev, 2).taker_filled);
  EXPECT_EQ(At<Trade>(ev, 2).taker_released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 6'010, 0));
}

TEST_F(MarketOrderTest, MarketBuyByQuoteBelowOneLotSpendsNothing) {
  Rest(kBob, Side::kSell, 200, 1);  // one lot costs 2000
  Events ev = Place(MarketQuote(kAlice, Side::kBuy, 1'999));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{1'999});
  EXPECT_EQ(At<OrderExpired>(ev, 1).reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(At<OrderExpired>(ev, 1).released, Amount{1'999});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "200x1/1");
}

TEST_F(MarketOrderTest, MarketSellByQuoteLocksTheBaseItSellsAndNeverExceedsTheBudget) {
  const OrderId a1 = Rest(kAlice, Side::kBuy, 100, 5);
  const OrderId a2 = Rest(kAlice, Side::kBuy, 99, 5);
  const OrderId t = NextOrderId();
  Events ev = Place(MarketQuote(kBob, Side::kSell, 7'000));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade OrderExpired");
  const OrderAccepted a = At<OrderAccepted>(ev, 0);
  EXPECT_EQ(a.terms.qty, Qty{0});
  EXPECT_EQ(a.quote_qty, Amount{7'000});
  EXPECT_EQ(a.locked, Amount{7'000});  // 5 + floor(2000 / 990) = 7 lots of base
  const Trade t1 = At<Trade>(ev, 1);
  EXPECT_EQ(t1.maker_order_id, a1);
  EXPECT_EQ(t1.taker_side, Side::kSell);
  EXPECT_EQ(t1.qty, Qty{5});
  EXPECT_EQ(t1.notional, Amount{5'000});
  EXPECT_EQ(t1.maker_fee, Amount{5});   // buyer, BTC
  EXPECT_EQ(t1.taker_fee, Amount{10});  // seller, USDT
  const Trade t2 = At<Trade>(ev, 2);
  EXPECT_EQ(t2.maker_order_id, a2);
  EXPECT_EQ(t2.qty, Qty{2});
  EXPECT_EQ(t2.notional, Amount{1'980});
  EXPECT_EQ(t2.taker_fee, Amount{4});  // ceil(3.96)
  EXPECT_FALSE(t2.taker_filled);
  const OrderExpired x = At<OrderExpired>(ev, 3);
  EXPECT_EQ(x.order_id, t);
  EXPECT_EQ(x.side, Side::kSell);
  EXPECT_EQ(x.reason, ExpireReason::kQuoteBudgetSpent);
  EXPECT_EQ(x.remaining, Qty{0});
  EXPECT_EQ(x.released, Amount{0});
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 7'000, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 4'990 + 1'976, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 4'995 + 1'998, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 9'950, 2'970));
  EXPECT_EQ(Bal(kFee, kBtc), B(7, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(14, 0));
}

TEST_F(MarketOrderTest, MarketSellByQuoteThatReceivesItsWholeBudgetIsFilled) {
  Rest(kAlice, Side::kBuy, 100, 5);
  Rest(kAlice, Side::kBuy, 99, 5);
  Events ev = Place(MarketQuote(kBob, Side::kSell, 6'980));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{7'000});
  EXPECT_TRUE(At<Trade>(ev, 2).taker_filled);
  EXPECT_EQ(At<Trade>(ev, 2).taker_released, Amount{0});
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 7'000, 0));
}

TEST_F(MarketOrderTest, MarketSellByQtyExpiresItsRemainder) {
  Rest(kAlice, Side::kBuy, 100, 2);
  Events ev = Place(MarketQty(kBob, Side::kSell, 3));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{3'000});
  EXPECT_EQ(At<OrderExpired>(ev, 2).reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(At<OrderExpired>(ev, 2).remaining, Qty{1});
  EXPECT_EQ(At<OrderExpired>(ev, 2).released, Amount{1'000});
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 2'000, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 2'000 - 4, 0));
}

}  // namespace
}  // namespace mb::engine
