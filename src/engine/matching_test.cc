// Matching: price-time priority, fills at the maker's price, what rests and
// what expires, and the price improvement a buy keeps when it fills below
// its limit.
#include <gtest/gtest.h>

#include <optional>

#include "common/strong.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

// Alice and Bob funded.
class MatchingTest : public FundedEngineTest {};

TEST_F(MatchingTest, PartialFillsAcrossLevelsBetterPriceFirstFifoWithinALevel) {
  const OrderId a = Rest(kBob, Side::kSell, 101, 3);
  const OrderId b = Rest(kBob, Side::kSell, 100, 2);
  const OrderId c = Rest(kBob, Side::kSell, 100, 4);
  Rest(kBob, Side::kSell, 102, 5);
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 14'000, 14'000));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x6/2 101x3/1 102x5/1");

  const OrderId t = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, 101, 8));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade Trade");
  const OrderAccepted acc = At<OrderAccepted>(ev, 0);
  EXPECT_EQ(acc.order_id, t);
  EXPECT_EQ(acc.terms.account, kAlice);
  EXPECT_EQ(acc.terms.side, Side::kBuy);
  EXPECT_EQ(acc.terms.price, Price{101});
  EXPECT_EQ(acc.terms.qty, Qty{8});
  EXPECT_EQ(acc.locked, Amount{8'080});  // 101 × 8 × 10

  const Trade t1 = At<Trade>(ev, 1);
  EXPECT_EQ(t1.trade_id, TradeId{1});
  EXPECT_EQ(t1.market, kBtcUsdt);
  EXPECT_EQ(t1.taker_side, Side::kBuy);
  EXPECT_EQ(t1.maker_order_id, b);  // best price, first in time
  EXPECT_EQ(t1.taker_order_id, t);
  EXPECT_EQ(t1.maker_account, kBob);
  EXPECT_EQ(t1.taker_account, kAlice);
  EXPECT_EQ(t1.price, Price{100});
  EXPECT_EQ(t1.qty, Qty{2});
  EXPECT_EQ(t1.base_qty, Amount{2'000});
  EXPECT_EQ(t1.notional, Amount{2'000});
  EXPECT_EQ(t1.maker_fee, Amount{2});  // seller (maker, 10 bps) in USDT
  EXPECT_EQ(t1.taker_fee, Amount{4});  // buyer (taker, 20 bps) in BTC
  EXPECT_EQ(t1.taker_released, Amount{0});
  EXPECT_TRUE(t1.maker_filled);
  EXPECT_FALSE(t1.taker_filled);

  const Trade t2 = At<Trade>(ev, 2);
  EXPECT_EQ(t2.trade_id, TradeId{2});
  EXPECT_EQ(t2.maker_order_id, c);
  EXPECT_EQ(t2.price, Price{100});
  EXPECT_EQ(t2.qty, Qty{4});
  EXPECT_EQ(t2.notional, Amount{4'000});
  EXPECT_EQ(t2.maker_fee, Amount{4});
  EXPECT_EQ(t2.taker_fee, Amount{8});
  EXPECT_TRUE(t2.maker_filled);
  EXPECT_FALSE(t2.taker_filled);

  const Trade t3 = At<Trade>(ev, 3);
  EXPECT_EQ(t3.trade_id, TradeId{3});
  EXPECT_EQ(t3.maker_order_id, a);
  EXPECT_EQ(t3.price, Price{101});
  EXPECT_EQ(t3.qty, Qty{2});
  EXPECT_EQ(t3.base_qty, Amount{2'000});
  EXPECT_EQ(t3.notional, Amount{2'020});
  EXPECT_EQ(t3.maker_fee, Amount{3});  // ceil(2.02)
  EXPECT_EQ(t3.taker_fee, Amount{4});
  EXPECT_FALSE(t3.maker_filled);
  EXPECT_TRUE(t3.taker_filled);
  EXPECT_EQ(t3.taker_released, Amount{60});  // 8080 locked - 8020 spent

  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 8'020, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 8'000 - 16, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 14'000, 6'000));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 1'998 + 3'996 + 2'017, 0));
  EXPECT_EQ(Bal(kFee, kBtc), B(16, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(9, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "101x1/1 102x5/1");
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "");
  EXPECT_FALSE(engine_.FindOrder(t).has_value());
  EXPECT_EQ(engine_.FindOrder(a)->remaining, Qty{1});
  EXPECT_EQ(engine_.open_orders(), 2u);
}

TEST_F(MatchingTest, SellTakerTradesAtTheMakersPrices) {
  const OrderId a1 = Rest(kAlice, Side::kBuy, 100, 2);
  const OrderId a2 = Rest(kAlice, Side::kBuy, 98, 2);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 3'960, 3'960));

  Events ev = Place(Limit(kBob, Side::kSell, 97, 3));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{3'000});
  const Trade t1 = At<Trade>(ev, 1);
  EXPECT_EQ(t1.maker_order_id, a1);
  EXPECT_EQ(t1.taker_side, Side::kSell);
  EXPECT_EQ(t1.price, Price{100});
  EXPECT_EQ(t1.notional, Amount{2'000});
  EXPECT_EQ(t1.maker_fee, Amount{2});  // buyer (maker) in BTC: 2000 × 10 bps
  EXPECT_EQ(t1.taker_fee, Amount{4});  // seller (taker) in USDT: 2000 × 20 bps
  EXPECT_TRUE(t1.maker_filled);
  const Trade t2 = At<Trade>(ev, 2);
  EXPECT_EQ(t2.maker_order_id, a2);
  EXPECT_EQ(t2.price, Price{98});
  EXPECT_EQ(t2.qty, Qty{1});
  EXPECT_EQ(t2.notional, Amount{980});
  EXPECT_EQ(t2.maker_fee, Amount{1});
  EXPECT_EQ(t2.taker_fee, Amount{2});  // ceil(1.96)
  EXPECT_FALSE(t2.maker_filled);
  EXPECT_TRUE(t2.taker_filled);
  EXPECT_EQ(t2.taker_released, Amount{0});

  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 3'000, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 1'996 + 978, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 3'960, 980));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 1'998 + 999, 0));
  EXPECT_EQ(Bal(kFee, kBtc), B(3, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(6, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "98x1/1");
}

TEST_F(MatchingTest, ExactFillRemovesBothOrders) {
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  Events ev = Place(Limit(kBob, Side::kSell, 100, 5));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  const Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.maker_order_id, a);
  EXPECT_EQ(t.qty, Qty{5});
  EXPECT_TRUE(t.maker_filled);
  EXPECT_TRUE(t.taker_filled);
  EXPECT_EQ(t.taker_released, Amount{0});
  EXPECT_EQ(engine_.open_orders(), 0u);
  EXPECT_FALSE(engine_.BestBid(kBtcUsdt).has_value());
  EXPECT_FALSE(engine_.BestAsk(kBtcUsdt).has_value());
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 5'000, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 5'000 - 5, 0));   // maker 10 bps
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 5'000 - 10, 0));  // taker 20 bps
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 5'000, 0));
  EXPECT_EQ(Bal(kFee, kBtc), B(5, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(10, 0));
}

TEST_F(MatchingTest, GtcRemainderRestsAtItsLimit) {
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId t = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, 100, 5));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderRested");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{5'000});
  EXPECT_FALSE(At<Trade>(ev, 1).taker_filled);
  const OrderRested r = At<OrderRested>(ev, 2);
  EXPECT_EQ(r.order_id, t);
  EXPECT_EQ(r.account, kAlice);
  EXPECT_EQ(r.market, kBtcUsdt);
  EXPECT_EQ(r.side, Side::kBuy);
  EXPECT_EQ(r.remaining, Qty{3});
  EXPECT_EQ(r.released, Amount{0});  // filled at its own limit
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 5'000, 3'000));
  std::optional<OrderView> o = engine_.FindOrder(t);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->terms.qty, Qty{5});
  EXPECT_EQ(o->remaining, Qty{3});
  EXPECT_EQ(o->locked, Amount{3'000});
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "100x3/1");
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "");
}

TEST_F(MatchingTest, IocRemainderExpiresAndReleasesItsLock) {
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId t = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, 100, 5, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  const OrderExpired x = At<OrderExpired>(ev, 2);
  EXPECT_EQ(x.order_id, t);
  EXPECT_EQ(x.account, kAlice);
  EXPECT_EQ(x.market, kBtcUsdt);
  EXPECT_EQ(x.side, Side::kBuy);
  EXPECT_EQ(x.reason, ExpireReason::kIocRemainder);
  EXPECT_EQ(x.remaining, Qty{3});
  EXPECT_EQ(x.released, Amount{3'000});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);

  // An IOC that meets nothing expires whole.
  ev = Place(Limit(kAlice, Side::kSell, 100, 4, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderExpired>(ev, 1).remaining, Qty{4});
  EXPECT_EQ(At<OrderExpired>(ev, 1).released, Amount{4'000});
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 2'000 - 4, 0));
}

// Alice and Bob funded.
class PriceImprovementTest : public FundedEngineTest {};

TEST_F(PriceImprovementTest, BuyFilledBelowItsLimitReleasesTheSurplusInTheTrade) {
  Rest(kBob, Side::kSell, 100, 4);
  Events ev = Place(Limit(kAlice, Side::kBuy, 105, 4));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{4'200});
  const Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.price, Price{100});
  EXPECT_EQ(t.notional, Amount{4'000});
  EXPECT_TRUE(t.taker_filled);
  EXPECT_EQ(t.taker_released, Amount{200});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'000, 0));
}

TEST_F(PriceImprovementTest, SurplusOfAPartialFillIsReturnedWhenTheRemainderRests) {
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId a = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, 105, 4));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderRested");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{4'200});
  EXPECT_EQ(At<Trade>(ev, 1).taker_released, Amount{0});
  EXPECT_FALSE(At<Trade>(ev, 1).taker_filled);
  const OrderRested r = At<OrderRested>(ev, 2);
  EXPECT_EQ(r.order_id, a);
  EXPECT_EQ(r.account, kAlice);
  EXPECT_EQ(r.market, kBtcUsdt);
  EXPECT_EQ(r.side, Side::kBuy);
  EXPECT_EQ(r.remaining, Qty{2});
  // Lock 4200 - 2000 spent = 2200; the rest needs 2 × 105 × 10 = 2100.
  EXPECT_EQ(r.released, Amount{100});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'100, 2'100));
  EXPECT_EQ(engine_.FindOrder(a)->locked, Amount{2'100});

  ev = Cancel(kAlice, a);
  ASSERT_EQ(Types(ev), "OrderCanceled");
  const OrderCanceled c = At<OrderCanceled>(ev, 0);
  EXPECT_EQ(c.order_id, a);
  EXPECT_EQ(c.account, kAlice);
  EXPECT_EQ(c.market, kBtcUsdt);
  EXPECT_EQ(c.side, Side::kBuy);
  EXPECT_EQ(c.remaining, Qty{2});
  EXPECT_EQ(c.released, Amount{2'100});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000, 0));
}

TEST_F(PriceImprovementTest, IocBuyBelowItsLimitExpiresWithEverythingStillLocked) {
  Rest(kBob, Side::kSell, 100, 2);
  Events ev = Place(Limit(kAlice, Side::kBuy, 105, 4, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_EQ(At<Trade>(ev, 1).taker_released, Amount{0});
  EXPECT_EQ(At<OrderExpired>(ev, 2).remaining, Qty{2});
  EXPECT_EQ(At<OrderExpired>(ev, 2).released, Amount{2'200});  // 4200 - 2000
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000, 0));
}

TEST_F(PriceImprovementTest, SurplusIsReleasedWhenTheRestedRemainderFillsAsMaker) {
  Fund(kCarol);
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId a = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, 105, 4));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderRested");
  EXPECT_EQ(At<OrderRested>(ev, 2).released, Amount{100});
  // Carol completes Alice's order at Alice's price: the order closes, so
  // nothing of it may stay locked (locked == the locks of open orders).
  ev = Place(Limit(kCarol, Side::kSell, 105, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, a);
  EXPECT_TRUE(At<Trade>(ev, 1).maker_filled);
  EXPECT_FALSE(engine_.FindOrder(a).has_value());
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000 - 2'100, 0));
}

}  // namespace
}  // namespace mb::engine
