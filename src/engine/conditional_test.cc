// Conditional orders (docs/engine.md, "Conditional orders"): stop-loss and
// take-profit orders, plain and trailing, waiting out of the book until the
// last trade price meets their condition, then matching as takers within the
// command whose trade triggered them.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/strong.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

class ConditionalTest : public FundedEngineTest {
 protected:
  // BTCUSDT without its minimum notional: one lot at any price is an order.
  void SetUp() override {
    config_.markets[Raw(kBtcUsdt)].min_notional = Amount{0};
    engine_ = Engine(config_);
    FundedEngineTest::SetUp();
    Fund(kCarol);
  }

  // One trade at `price` (Alice's ask of one lot taken by Bob): the last
  // price becomes `price`. Returns the events of Bob's order.
  Events TradeAt(int64_t price) {
    Rest(kAlice, Side::kSell, price, 1);
    return Place(Limit(kBob, Side::kBuy, price, 1));
  }

  // Places a conditional order that must wait; returns its id.
  OrderId Wait(const PlaceOrder& p) {
    Events ev = Place(p);
    EXPECT_EQ(Types(ev), "OrderAccepted OrderArmed");
    const OrderAccepted a = At<OrderAccepted>(ev, 0);
    const OrderArmed armed = At<OrderArmed>(ev, 1);
    EXPECT_EQ(armed.order_id, a.order_id);
    EXPECT_EQ(armed.stop_price, p.stop_price);
    EXPECT_EQ(armed.trailing_delta, p.trailing_delta);
    return a.order_id;
  }

  // The waiting order `id` as the image has it.
  ImageStop Waiting(OrderId id) const {
    for (const ImageStop& s : engine_.ExportImage().stops) {
      if (s.order.id == id) return s;
    }
    ADD_FAILURE() << "order " << Raw(id) << " is not waiting";
    return ImageStop{};
  }
  bool IsWaiting(OrderId id) const {
    for (const ImageStop& s : engine_.ExportImage().stops) {
      if (s.order.id == id) return true;
    }
    return false;
  }
};

TEST_F(ConditionalTest, AWaitingOrderLocksLikeItsOrderAndStaysOutOfTheBook) {
  TradeAt(100);
  const Balance btc = Bal(kBob, kBtc);
  const Balance usdt = Bal(kBob, kUsdt);
  const std::size_t open = engine_.open_orders();
  const OrderId sell = Wait(Stop(kBob, Side::kSell, OrderType::kStopLossLimit, 95, 2, 94));
  const OrderId buy = Wait(Stop(kBob, Side::kBuy, OrderType::kStopLossLimit, 105, 3, 106));
  const OrderId market_buy = Wait(Stop(kBob, Side::kBuy, OrderType::kStopLoss, 105, 3));
  // A *_LIMIT order locks what its limit order will; a stop-market sell its
  // quantity; a stop-market buy nothing until it triggers.
  EXPECT_EQ(Bal(kBob, kBtc), B(btc.available.value - 2'000, btc.locked.value + 2'000));
  EXPECT_EQ(Bal(kBob, kUsdt),
            B(usdt.available.value - 106 * 3 * 10, usdt.locked.value + 106 * 3 * 10));
  EXPECT_EQ(engine_.open_orders(), open + 3);
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "");
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "");
  const auto view = engine_.FindOrder(market_buy);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->terms.type, OrderType::kStopLoss);
  EXPECT_EQ(view->terms.tif, TimeInForce::kIoc);
  EXPECT_EQ(view->locked, Amount{0});
  EXPECT_TRUE(IsWaiting(sell) && IsWaiting(buy) && IsWaiting(market_buy));
  EXPECT_EQ(engine_.ExportImage().last_prices[Raw(kBtcUsdt)], Price{100});
}

TEST_F(ConditionalTest, TriggersOnTheExactStopPriceAndMatchesAsATaker) {
  TradeAt(100);
  const OrderId stop = Wait(
      WithClientId(Stop(kBob, Side::kSell, OrderType::kStopLossLimit, 95, 2, 94), "protect-1"));
  const OrderId bid96 = Rest(kAlice, Side::kBuy, 96, 1);
  const OrderId bid95 = Rest(kAlice, Side::kBuy, 95, 5);
  // A trade at 96 does not meet "last <= 95".
  Events ev = Place(Limit(kCarol, Side::kSell, 96, 1, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, bid96);
  EXPECT_TRUE(IsWaiting(stop));
  // A trade at exactly 95 does, within the same command.
  ev = Place(Limit(kCarol, Side::kSell, 95, 1, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderTriggered Trade");
  const OrderTriggered t = At<OrderTriggered>(ev, 2);
  EXPECT_EQ(t.order_id, stop);
  EXPECT_EQ(t.account, kBob);
  EXPECT_EQ(t.side, Side::kSell);
  EXPECT_EQ(t.last_price, Price{95});
  EXPECT_EQ(t.lock_delta, Amount{0});
  const Trade fill = At<Trade>(ev, 3);
  EXPECT_EQ(fill.taker_order_id, stop);  // the order keeps its id
  EXPECT_EQ(fill.maker_order_id, bid95);
  EXPECT_EQ(fill.price, Price{95});
  EXPECT_EQ(fill.qty, Qty{2});
  EXPECT_TRUE(fill.taker_filled);
  EXPECT_FALSE(IsWaiting(stop));
  EXPECT_FALSE(engine_.FindOrder(stop).has_value());
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "95x2/1");
}

TEST_F(ConditionalTest, AStopThatWouldTriggerImmediatelyIsRefused) {
  // Before any trade there is no last price: nothing triggers on placement.
  Wait(Stop(kBob, Side::kSell, OrderType::kStopLoss, 100, 1));
  TradeAt(100);  // the market's first trade: the stop-loss at 100 triggers
  ASSERT_TRUE(engine_.ExportImage().stops.empty());
  // last = 100: "last <= stop" for stop-loss sells and take-profit buys,
  // "last >= stop" for stop-loss buys and take-profit sells.
  ExpectReject(Stop(kBob, Side::kSell, OrderType::kStopLoss, 100, 1),
               RejectReason::kWouldTriggerImmediately);
  ExpectReject(Stop(kBob, Side::kSell, OrderType::kStopLossLimit, 101, 1, 101),
               RejectReason::kWouldTriggerImmediately);
  ExpectReject(Stop(kBob, Side::kBuy, OrderType::kTakeProfit, 100, 1),
               RejectReason::kWouldTriggerImmediately);
  ExpectReject(Stop(kBob, Side::kBuy, OrderType::kStopLoss, 100, 1),
               RejectReason::kWouldTriggerImmediately);
  ExpectReject(Stop(kBob, Side::kSell, OrderType::kTakeProfitLimit, 99, 1, 99),
               RejectReason::kWouldTriggerImmediately);
  // So is a trailing stop's activation price already met.
  ExpectReject(Stop(kBob, Side::kSell, OrderType::kStopLoss, 100, 1, 0, 500),
               RejectReason::kWouldTriggerImmediately);
  Wait(Stop(kBob, Side::kSell, OrderType::kStopLoss, 99, 1));
  Wait(Stop(kBob, Side::kBuy, OrderType::kTakeProfit, 99, 1));
  Wait(Stop(kBob, Side::kBuy, OrderType::kStopLoss, 101, 1));
  Wait(Stop(kBob, Side::kSell, OrderType::kTakeProfitLimit, 101, 1, 101));
}

TEST_F(ConditionalTest, AGapThroughSeveralStopsTriggersEachOldestFirstInOneCommand) {
  TradeAt(100);
  const OrderId s1 = Wait(Stop(kBob, Side::kSell, OrderType::kStopLoss, 97, 1));
  const OrderId s2 = Wait(Stop(kBob, Side::kSell, OrderType::kStopLossLimit, 98, 1, 90));
  const OrderId s3 = Wait(Stop(kBob, Side::kBuy, OrderType::kTakeProfit, 96, 1));
  for (int64_t p : {99, 98, 97, 96}) Rest(kAlice, Side::kBuy, p, 1);
  const OrderId bid90 = Rest(kAlice, Side::kBuy, 90, 10);
  const OrderId ask110 = Rest(kAlice, Side::kSell, 110, 1);
  // Carol's market sell sweeps 99..96: the last price 96 meets all three.
  Events ev = Place(MarketQty(kCarol, Side::kSell, 4));
  ASSERT_EQ(Types(ev),
            "OrderAccepted Trade Trade Trade Trade OrderTriggered Trade OrderTriggered Trade "
            "OrderTriggered Trade");
  const std::vector<OrderTriggered> t = All<OrderTriggered>(ev);
  EXPECT_EQ(t[0].order_id, s1);
  EXPECT_EQ(t[0].last_price, Price{96});
  EXPECT_EQ(t[1].order_id, s2);
  EXPECT_EQ(t[1].last_price, Price{90});  // s1's own trade moved the price
  EXPECT_EQ(t[2].order_id, s3);
  // The stop-market buy locks its book walk's cost when it triggers.
  EXPECT_EQ(t[2].lock_delta, Amount{110 * 1 * 10});
  EXPECT_EQ(At<Trade>(ev, 6).maker_order_id, bid90);
  EXPECT_EQ(At<Trade>(ev, 8).maker_order_id, bid90);
  const Trade last = At<Trade>(ev, 10);
  EXPECT_EQ(last.taker_order_id, s3);
  EXPECT_EQ(last.maker_order_id, ask110);
  EXPECT_TRUE(last.taker_filled);
  EXPECT_TRUE(engine_.ExportImage().stops.empty());
}

TEST_F(ConditionalTest, AnyTradeOfTheCommandMeetsAStopNotOnlyItsLastOne) {
  TradeAt(100);
  // "last <= 95": a buy sweep 95 -> 105 passes it although it ends above.
  const OrderId stop = Wait(Stop(kBob, Side::kBuy, OrderType::kTakeProfit, 95, 1));
  Rest(kAlice, Side::kSell, 95, 1);
  Rest(kAlice, Side::kSell, 105, 5);
  Events ev = Place(MarketQty(kCarol, Side::kBuy, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade OrderTriggered Trade");
  EXPECT_EQ(At<Trade>(ev, 2).price, Price{105});
  EXPECT_EQ(At<OrderTriggered>(ev, 3).order_id, stop);
  EXPECT_EQ(At<OrderTriggered>(ev, 3).last_price, Price{105});
  // The next command's trades start a new range: a trade at 106 alone does
  // not meet "last <= 95".
  Wait(Stop(kBob, Side::kBuy, OrderType::kTakeProfit, 95, 1));
  ev = Place(MarketQty(kCarol, Side::kBuy, 1));
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
}

TEST_F(ConditionalTest, ATrailingStopFollowsThePriceAndTriggersOnTheRetrace) {
  TradeAt(100);
  Rest(kAlice, Side::kBuy, 50, 5);
  // 10% below the highest price since placement; it starts at 100.
  const OrderId trail = Wait(Stop(kBob, Side::kSell, OrderType::kStopLoss, 0, 1, 0, 1'000));
  EXPECT_TRUE(Waiting(trail).active);
  EXPECT_EQ(Waiting(trail).extreme, Price{100});
  TradeAt(110);
  TradeAt(120);
  EXPECT_EQ(Waiting(trail).extreme, Price{120});
  // 109 is 9.2% below 120: not enough; the highest price stays 120.
  Events ev = TradeAt(109);
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(Waiting(trail).extreme, Price{120});
  // 108 is 10% below.
  ev = TradeAt(108);
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderTriggered Trade");
  EXPECT_EQ(At<OrderTriggered>(ev, 2).order_id, trail);
  EXPECT_EQ(At<OrderTriggered>(ev, 2).last_price, Price{108});
  EXPECT_EQ(At<Trade>(ev, 3).price, Price{50});
}

TEST_F(ConditionalTest, ATrailingStopWithAStopPriceTracksOnlyOnceItIsMet) {
  TradeAt(100);
  Rest(kAlice, Side::kBuy, 50, 5);
  const OrderId trail = Wait(Stop(kBob, Side::kSell, OrderType::kStopLoss, 95, 1, 0, 1'000));
  EXPECT_FALSE(Waiting(trail).active);
  TradeAt(120);  // the activation price is not met: nothing is tracked
  EXPECT_FALSE(Waiting(trail).active);
  EXPECT_EQ(Waiting(trail).extreme, Price{0});
  TradeAt(90);  // met: tracking starts from 90
  EXPECT_TRUE(Waiting(trail).active);
  EXPECT_EQ(Waiting(trail).extreme, Price{90});
  TradeAt(99);
  EXPECT_EQ(Waiting(trail).extreme, Price{99});
  Events ev = TradeAt(90);  // 9.1% below 99
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
  ev = TradeAt(89);  // 89 <= 99 × 0.9 = 89.1
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderTriggered Trade");
  EXPECT_EQ(At<OrderTriggered>(ev, 2).order_id, trail);
}

TEST_F(ConditionalTest, ATrailingBuyTriggersOnARiseFromTheLowest) {
  TradeAt(100);
  Rest(kAlice, Side::kSell, 200, 5);
  const OrderId trail = Wait(Stop(kBob, Side::kBuy, OrderType::kTakeProfitLimit, 0, 1, 150, 500));
  TradeAt(80);
  EXPECT_EQ(Waiting(trail).extreme, Price{80});
  Events ev = TradeAt(83);  // 3.75% above 80
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
  ev = TradeAt(84);  // 84 >= 80 × 1.05
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderTriggered OrderRested");
  EXPECT_EQ(At<OrderRested>(ev, 3).order_id, trail);  // its limit 150 is below the ask at 200
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "150x1/1");
}

TEST_F(ConditionalTest, ATriggeredStopMarketBuyWithoutTheFundsExpires) {
  TradeAt(100);
  const AccountId dave{4};
  Credit(dave, kUsdt, 500);  // less than one lot at 110 costs (1100)
  const OrderId stop = Wait(Stop(dave, Side::kBuy, OrderType::kStopLoss, 105, 1));
  Rest(kAlice, Side::kSell, 110, 1);
  Events ev = TradeAt(105);
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderTriggered OrderExpired");
  EXPECT_EQ(At<OrderTriggered>(ev, 2).lock_delta, Amount{0});
  const OrderExpired x = At<OrderExpired>(ev, 3);
  EXPECT_EQ(x.order_id, stop);
  EXPECT_EQ(x.reason, ExpireReason::kInsufficientBalance);
  EXPECT_EQ(x.remaining, Qty{1});
  EXPECT_EQ(x.released, Amount{0});
  EXPECT_EQ(Bal(dave, kUsdt), B(500, 0));
}

TEST_F(ConditionalTest, SelfTradePreventionAppliesToATriggeredOrder) {
  TradeAt(100);
  const OrderId stop = Wait(WithStp(Stop(kBob, Side::kBuy, OrderType::kStopLossLimit, 102, 2, 105),
                                    StpMode::kExpireTaker));
  const OrderId own = Rest(kBob, Side::kSell, 103, 1);
  Events ev = TradeAt(102);
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderTriggered OrderExpired");
  const OrderExpired x = At<OrderExpired>(ev, 3);
  EXPECT_EQ(x.order_id, stop);
  EXPECT_EQ(x.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(x.released, Amount{105 * 2 * 10});
  EXPECT_EQ(Queue(kBtcUsdt, Side::kSell), std::vector<uint64_t>{Raw(own)});
}

TEST_F(ConditionalTest, ATriggeredFokThatCannotFillExpiresUntouched) {
  TradeAt(100);
  const OrderId stop =
      Wait(Stop(kBob, Side::kSell, OrderType::kStopLossLimit, 95, 3, 95, 0, TimeInForce::kFok));
  Rest(kAlice, Side::kBuy, 95, 2);
  Events ev = Place(Limit(kCarol, Side::kSell, 95, 1, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderTriggered OrderExpired");
  EXPECT_EQ(At<OrderExpired>(ev, 3).order_id, stop);
  EXPECT_EQ(At<OrderExpired>(ev, 3).reason, ExpireReason::kFokNotFillable);
  EXPECT_EQ(At<OrderExpired>(ev, 3).released, Amount{3'000});
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "95x1/1");
}

TEST_F(ConditionalTest, AWaitingOrderIsCanceledButNotAmended) {
  TradeAt(100);
  const Balance before = Bal(kBob, kUsdt);
  const OrderId stop = Wait(Stop(kBob, Side::kBuy, OrderType::kTakeProfitLimit, 90, 2, 91));
  ExpectReject(AmendCmd(kBob, stop, 92, 0), RejectReason::kInvalidOrderType);
  Events ev = Cancel(kBob, stop);
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).remaining, Qty{2});
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released, Amount{91 * 2 * 10});
  EXPECT_EQ(Bal(kBob, kUsdt), before);
  EXPECT_FALSE(IsWaiting(stop));
  // A trade through its stop price now triggers nothing.
  Rest(kAlice, Side::kBuy, 89, 1);
  ev = Place(Limit(kCarol, Side::kSell, 89, 1, TimeInForce::kIoc));
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
  // Cancel-all reaches waiting orders too.
  const OrderId a = Wait(Stop(kBob, Side::kSell, OrderType::kStopLoss, 80, 1));
  const OrderId b = Wait(Stop(kBob, Side::kSell, OrderType::kStopLoss, 0, 1, 0, 100));
  ev = Run(CancelAll{kBob, kBtcUsdt});
  ASSERT_EQ(Types(ev), "OrderCanceled OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, a);
  EXPECT_EQ(At<OrderCanceled>(ev, 1).order_id, b);
  EXPECT_TRUE(engine_.ExportImage().stops.empty());
}

TEST_F(ConditionalTest, BadStopFieldsAreRefusedAndChangeNothing) {
  TradeAt(100);
  PlaceOrder p = Limit(kBob, Side::kBuy, 90, 1);
  p.stop_price = Price{95};
  ExpectReject(p, RejectReason::kInvalidStopPrice);
  p = Limit(kBob, Side::kBuy, 90, 1);
  p.trailing_delta = 100;
  ExpectReject(p, RejectReason::kInvalidTrailingDelta);
  ExpectReject(Stop(kBob, Side::kSell, OrderType::kStopLoss, 0, 1),
               RejectReason::kInvalidStopPrice);
  ExpectReject(Stop(kBob, Side::kSell, OrderType::kStopLoss, 10'000'001, 1),
               RejectReason::kInvalidStopPrice);
  ExpectReject(Stop(kBob, Side::kSell, OrderType::kStopLoss, 90, 1, 0, 10'000),
               RejectReason::kInvalidTrailingDelta);
  ExpectReject(Stop(kBob, Side::kSell, OrderType::kStopLoss, 90, 1, 0, -5),
               RejectReason::kInvalidTrailingDelta);
  p = Stop(kBob, Side::kBuy, OrderType::kStopLoss, 110, 0);
  p.quote_qty = Amount{5'000};
  ExpectReject(p, RejectReason::kInvalidOrderType);
  ExpectReject(Stop(kBob, Side::kSell, OrderType::kStopLossLimit, 90, 1, 0),
               RejectReason::kInvalidPrice);
  ExpectReject(Stop(kBob, Side::kSell, OrderType::kStopLossLimit, 90, 0, 90),
               RejectReason::kInvalidQuantity);
  ExpectReject(Stop(kBob, Side::kSell, OrderType::kStopLoss, 90, 0),
               RejectReason::kInvalidOrderType);
  ExpectReject(Stop(kBob, Side::kBuy, OrderType::kStopLossLimit, 110, 100'000, 1'000),
               RejectReason::kInsufficientBalance);
  PlaceOrder bad_type = Stop(kBob, Side::kSell, OrderType::kStopLoss, 90, 1);
  bad_type.type = static_cast<OrderType>(7);
  ExpectReject(bad_type, RejectReason::kInvalidOrderType);
}

TEST_F(ConditionalTest, AnOrderItTriggersCanTriggerMore) {
  TradeAt(100);
  // s1 (stop 98) sells into the bid at 95, whose trade meets s2 (stop 96).
  const OrderId s1 = Wait(Stop(kBob, Side::kSell, OrderType::kStopLoss, 98, 1));
  const OrderId s2 = Wait(Stop(kCarol, Side::kSell, OrderType::kStopLoss, 96, 1));
  Rest(kAlice, Side::kBuy, 98, 1);
  Rest(kAlice, Side::kBuy, 95, 1);
  Rest(kAlice, Side::kBuy, 90, 1);
  Events ev = Place(Limit(kCarol, Side::kSell, 98, 1, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderTriggered Trade OrderTriggered Trade");
  EXPECT_EQ(At<OrderTriggered>(ev, 2).order_id, s1);
  EXPECT_EQ(At<Trade>(ev, 3).price, Price{95});
  EXPECT_EQ(At<OrderTriggered>(ev, 4).order_id, s2);
  EXPECT_EQ(At<OrderTriggered>(ev, 4).last_price, Price{95});
  EXPECT_EQ(At<Trade>(ev, 5).price, Price{90});
}

}  // namespace
}  // namespace mb::engine
