// Order lists (docs/engine.md, "Order lists"): OCO pairs sharing one lock and
// cancelling each other, OTO / OTOCO pending orders placed by their working
// order's fill, and a list canceled as a whole.
#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/strong.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

ListOrder Leg(Side side, OrderType type, int64_t qty, int64_t price, int64_t stop = 0,
              std::string_view client_id = "") {
  ListOrder o;
  o.side = side;
  o.type = type;
  o.tif = IsMarketLike(type) ? TimeInForce::kIoc : TimeInForce::kGtc;
  o.qty = Qty{qty};
  o.price = Price{price};
  o.stop_price = Price{stop};
  if (!client_id.empty()) o.client_order_id = ClientOrderId::From(client_id);
  return o;
}

PlaceOrderList List(AccountId account, ListType type, std::vector<ListOrder> orders,
                    std::string_view list_client_id = "") {
  PlaceOrderList l;
  l.account = account;
  l.market = kBtcUsdt;
  l.type = type;
  for (std::size_t k = 0; k < orders.size(); ++k) l.orders[k] = orders[k];
  if (!list_client_id.empty()) l.list_client_order_id = ClientOrderId::From(list_client_id);
  return l;
}

class OrderListTest : public FundedEngineTest {
 protected:
  void SetUp() override {
    config_.markets[Raw(kBtcUsdt)].min_notional = Amount{0};
    engine_ = Engine(config_);
    FundedEngineTest::SetUp();
    Fund(kCarol);
    // The last price: 100.
    Rest(kAlice, Side::kSell, 100, 1);
    Place(Limit(kCarol, Side::kBuy, 100, 1));
  }
  // A sell OCO of 2 lots: a LIMIT_MAKER at 110 above, a STOP_LOSS_LIMIT at
  // stop 95 (limit 94) below.
  PlaceOrderList SellOco(std::string_view list_client_id = "") {
    return List(kBob, ListType::kOco,
                {Leg(Side::kSell, OrderType::kLimitMaker, 2, 110),
                 Leg(Side::kSell, OrderType::kStopLossLimit, 2, 94, 95)},
                list_client_id);
  }
  static OrderId Nth(uint64_t list_id, uint64_t k) {
    return OrderId{list_id + k * kListOrderStride};
  }
  bool ListOpen(uint64_t id) const {
    for (const ImageList& l : engine_.ExportImage().lists) {
      if (l.id == id) return true;
    }
    return false;
  }
};

TEST_F(OrderListTest, AnOcoPairSharesOneLock) {
  const Balance before = Bal(kBob, kBtc);
  const uint64_t id = Raw(NextOrderId());
  Events ev = Run(SellOco("exit-1"));
  ASSERT_EQ(Types(ev), "ListAccepted OrderAccepted OrderRested OrderAccepted OrderArmed");
  const ListAccepted l = At<ListAccepted>(ev, 0);
  EXPECT_EQ(l.list_id, id);
  EXPECT_EQ(l.type, ListType::kOco);
  EXPECT_EQ(l.order_ids[0], Nth(id, 0));
  EXPECT_EQ(l.order_ids[1], Nth(id, 1));
  EXPECT_EQ(Raw(l.order_ids[2]), 0u);
  EXPECT_EQ(l.list_client_order_id.view(), "exit-1");
  EXPECT_EQ(At<OrderAccepted>(ev, 1).order_id, Nth(id, 0));
  EXPECT_EQ(At<OrderAccepted>(ev, 1).locked, Amount{2'000});
  EXPECT_EQ(At<OrderAccepted>(ev, 3).order_id, Nth(id, 1));
  EXPECT_EQ(At<OrderAccepted>(ev, 3).locked, Amount{0});  // the limit maker holds the pair's lock
  EXPECT_EQ(Bal(kBob, kBtc), B(before.available.value - 2'000, before.locked.value + 2'000));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "110x2/1");
  EXPECT_TRUE(ListOpen(id));
}

TEST_F(OrderListTest, AFillOfTheLimitOrderCancelsTheStopInTheSameCommand) {
  const uint64_t id = Raw(NextOrderId());
  Run(SellOco());
  Events ev = Place(Limit(kCarol, Side::kBuy, 110, 1));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderCanceled");
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, Nth(id, 0));
  EXPECT_EQ(At<OrderCanceled>(ev, 2).order_id, Nth(id, 1));
  EXPECT_EQ(At<OrderCanceled>(ev, 2).released, Amount{0});
  EXPECT_TRUE(ListOpen(id));  // its limit order still rests
  ev = Place(Limit(kCarol, Side::kBuy, 110, 1));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade ListDone");
  EXPECT_EQ(At<ListDone>(ev, 2).list_id, id);
  EXPECT_FALSE(ListOpen(id));
}

TEST_F(OrderListTest, TheStopTriggeringCancelsTheLimitOrderFirst) {
  const uint64_t id = Raw(NextOrderId());
  Run(SellOco());
  Rest(kAlice, Side::kBuy, 95, 5);
  Events ev = Place(Limit(kCarol, Side::kSell, 95, 1, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderCanceled OrderTriggered Trade ListDone");
  const OrderCanceled x = At<OrderCanceled>(ev, 2);
  EXPECT_EQ(x.order_id, Nth(id, 0));
  EXPECT_EQ(x.released, Amount{2'000});
  const OrderTriggered t = At<OrderTriggered>(ev, 3);
  EXPECT_EQ(t.order_id, Nth(id, 1));
  EXPECT_EQ(t.lock_delta, Amount{2'000});  // the share the limit order held
  EXPECT_EQ(At<Trade>(ev, 4).taker_order_id, Nth(id, 1));
  EXPECT_TRUE(At<Trade>(ev, 4).taker_filled);
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "");
}

TEST_F(OrderListTest, CancelingOneOrderCancelsTheList) {
  const uint64_t id = Raw(NextOrderId());
  Run(SellOco());
  const Balance before = Bal(kBob, kBtc);
  Events ev = Cancel(kBob, Nth(id, 1));
  ASSERT_EQ(Types(ev), "OrderCanceled OrderCanceled ListDone");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, Nth(id, 0));
  EXPECT_EQ(At<OrderCanceled>(ev, 1).order_id, Nth(id, 1));
  EXPECT_EQ(Bal(kBob, kBtc), B(before.available.value + 2'000, before.locked.value - 2'000));
  // By its client id, with CancelOrderList.
  const uint64_t second = Raw(NextOrderId());
  Run(SellOco("exit-2"));
  ev = Run(CancelOrderList{kBob, kBtcUsdt, 0, ClientOrderId::From("exit-2")});
  ASSERT_EQ(Types(ev), "OrderCanceled OrderCanceled ListDone");
  EXPECT_EQ(At<ListDone>(ev, 2).list_id, second);
  ExpectReject(CancelOrderList{kBob, kBtcUsdt, second, {}}, RejectReason::kUnknownOrderList);
  ExpectReject(CancelOrderList{kAlice, kBtcUsdt, 0, ClientOrderId::From("exit-2")},
               RejectReason::kUnknownOrderList);
}

TEST_F(OrderListTest, OtoPlacesThePendingOrderOnlyWhenTheWorkingOrderFills) {
  const uint64_t id = Raw(NextOrderId());
  Events ev = Run(List(kBob, ListType::kOto,
                       {Leg(Side::kBuy, OrderType::kLimit, 2, 100),
                        Leg(Side::kSell, OrderType::kLimit, 2, 120, 0, "take-profit")}));
  ASSERT_EQ(Types(ev), "ListAccepted OrderAccepted OrderRested OrderPending");
  const OrderPending p = At<OrderPending>(ev, 3);
  EXPECT_EQ(p.order_id, Nth(id, 1));
  EXPECT_EQ(p.list_id, id);
  EXPECT_EQ(p.terms.price, Price{120});
  EXPECT_EQ(p.client_order_id.view(), "take-profit");
  EXPECT_FALSE(engine_.FindOrder(Nth(id, 1)).has_value());
  // A partial fill places nothing.
  ev = Place(Limit(kAlice, Side::kSell, 100, 1));
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
  // The complete fill places it, in the same command.
  ev = Place(Limit(kAlice, Side::kSell, 100, 1));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderAccepted OrderRested");
  EXPECT_EQ(At<OrderAccepted>(ev, 2).order_id, Nth(id, 1));
  EXPECT_EQ(At<OrderAccepted>(ev, 2).client_order_id.view(), "take-profit");
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "120x2/1");
  // Its fill ends the list.
  ev = Place(Limit(kCarol, Side::kBuy, 120, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade ListDone");
}

TEST_F(OrderListTest, CancelingAnOtoWorkingOrderDropsThePendingOne) {
  const uint64_t id = Raw(NextOrderId());
  Run(List(
      kBob, ListType::kOto,
      {Leg(Side::kBuy, OrderType::kLimit, 2, 100), Leg(Side::kSell, OrderType::kLimit, 2, 120)}));
  Events ev = Cancel(kBob, Nth(id, 0));
  ASSERT_EQ(Types(ev), "OrderCanceled ListDone");
  EXPECT_TRUE(engine_.ExportImage().pending.empty());
  EXPECT_TRUE(engine_.ExportImage().lists.empty());
}

TEST_F(OrderListTest, OtocoPlacesAnOcoPairThatSharesItsLock) {
  const uint64_t id = Raw(NextOrderId());
  Events ev = Run(List(
      kBob, ListType::kOtoco,
      {Leg(Side::kBuy, OrderType::kLimit, 2, 100), Leg(Side::kSell, OrderType::kLimitMaker, 2, 120),
       Leg(Side::kSell, OrderType::kStopLoss, 2, 0, 90)}));
  ASSERT_EQ(Types(ev), "ListAccepted OrderAccepted OrderRested OrderPending OrderPending");
  const Balance btc = Bal(kBob, kBtc);
  ev = Place(Limit(kAlice, Side::kSell, 100, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderAccepted OrderRested OrderAccepted OrderArmed");
  EXPECT_EQ(At<OrderAccepted>(ev, 2).order_id, Nth(id, 1));
  EXPECT_EQ(At<OrderAccepted>(ev, 2).locked, Amount{2'000});
  EXPECT_EQ(At<OrderAccepted>(ev, 4).order_id, Nth(id, 2));
  EXPECT_EQ(At<OrderAccepted>(ev, 4).locked, Amount{0});
  // Bob received 2 lots less the maker fee, and locks 2 lots once.
  EXPECT_EQ(Bal(kBob, kBtc).locked.value, btc.locked.value + 2'000);
  // The stop below triggers: the limit maker above is canceled.
  Rest(kAlice, Side::kBuy, 90, 5);
  ev = Place(Limit(kCarol, Side::kSell, 90, 1, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderCanceled OrderTriggered Trade ListDone");
  EXPECT_EQ(At<OrderCanceled>(ev, 2).order_id, Nth(id, 1));
  EXPECT_EQ(At<OrderTriggered>(ev, 3).order_id, Nth(id, 2));
}

TEST_F(OrderListTest, APendingOrderThatCannotBePlacedIsRefusedAndEndsTheList) {
  const AccountId dave{4};
  Credit(dave, kUsdt, 2'000);  // two lots at 100; nothing to sell 5 lots with
  const uint64_t id = Raw(NextOrderId());
  Run(List(
      dave, ListType::kOto,
      {Leg(Side::kBuy, OrderType::kLimit, 2, 100), Leg(Side::kSell, OrderType::kLimit, 5, 120)}));
  Events ev = Place(Limit(kAlice, Side::kSell, 100, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Rejected ListDone");
  const Rejected r = At<Rejected>(ev, 2);
  EXPECT_EQ(r.command, CommandType::kPlaceOrderList);
  EXPECT_EQ(r.reason, RejectReason::kInsufficientBalance);
  EXPECT_EQ(r.order_id, Nth(id, 1));
  EXPECT_TRUE(engine_.ExportImage().lists.empty());
}

TEST_F(OrderListTest, ListsThatDoNotFitTheirTypeAreRefused) {
  // Two limit makers; sides that differ; quantities that differ; prices in
  // the wrong order; a working MARKET order.
  ExpectReject(List(kBob, ListType::kOco,
                    {Leg(Side::kSell, OrderType::kLimitMaker, 2, 110),
                     Leg(Side::kSell, OrderType::kLimitMaker, 2, 105)}),
               RejectReason::kInvalidOrderList);
  ExpectReject(List(kBob, ListType::kOco,
                    {Leg(Side::kSell, OrderType::kLimitMaker, 2, 110),
                     Leg(Side::kBuy, OrderType::kStopLoss, 2, 0, 95)}),
               RejectReason::kInvalidOrderList);
  ExpectReject(List(kBob, ListType::kOco,
                    {Leg(Side::kSell, OrderType::kLimitMaker, 2, 110),
                     Leg(Side::kSell, OrderType::kStopLoss, 3, 0, 95)}),
               RejectReason::kInvalidOrderList);
  ExpectReject(List(kBob, ListType::kOco,
                    {Leg(Side::kSell, OrderType::kTakeProfit, 2, 0, 99),
                     Leg(Side::kSell, OrderType::kStopLoss, 2, 0, 99)}),
               RejectReason::kInvalidOrderList);
  ExpectReject(List(kBob, ListType::kOto,
                    {Leg(Side::kBuy, OrderType::kMarket, 2, 0),
                     Leg(Side::kSell, OrderType::kLimit, 2, 120)}),
               RejectReason::kInvalidOrderList);
  PlaceOrderList bad_type = SellOco();
  bad_type.type = static_cast<ListType>(3);
  ExpectReject(bad_type, RejectReason::kInvalidOrderList);
  // A stop that would trigger at once; more than the account has; a
  // duplicate client id.
  ExpectReject(List(kBob, ListType::kOco,
                    {Leg(Side::kSell, OrderType::kLimitMaker, 2, 110),
                     Leg(Side::kSell, OrderType::kStopLoss, 2, 0, 101)}),
               RejectReason::kWouldTriggerImmediately);
  ExpectReject(List(kBob, ListType::kOco,
                    {Leg(Side::kSell, OrderType::kTakeProfit, 2, 0, 100),
                     Leg(Side::kSell, OrderType::kStopLoss, 2, 0, 95)}),
               RejectReason::kWouldTriggerImmediately);
  ExpectReject(List(kBob, ListType::kOco,
                    {Leg(Side::kSell, OrderType::kLimitMaker, 200, 110),
                     Leg(Side::kSell, OrderType::kStopLoss, 200, 0, 95)}),
               RejectReason::kInsufficientBalance);
  ExpectReject(List(kBob, ListType::kOco,
                    {Leg(Side::kSell, OrderType::kLimitMaker, 2, 110, 0, "same"),
                     Leg(Side::kSell, OrderType::kStopLoss, 2, 0, 95, "same")}),
               RejectReason::kDuplicateClientOrderId);
  const uint64_t first = Raw(NextOrderId());
  Run(SellOco("one"));
  const Rejected r = ExpectReject(SellOco("one"), RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, first);
  // Amending a list's order is refused.
  ExpectReject(AmendCmd(kBob, Nth(first, 0), 111, 0), RejectReason::kInvalidOrderType);
}

TEST_F(OrderListTest, CancelAllEndsEveryList) {
  Run(SellOco());
  Run(List(
      kBob, ListType::kOto,
      {Leg(Side::kBuy, OrderType::kLimit, 2, 90), Leg(Side::kSell, OrderType::kLimit, 2, 120)}));
  Events ev = Run(CancelAll{kBob, kBtcUsdt});
  EXPECT_EQ(All<OrderCanceled>(ev).size(), 3u);
  EXPECT_EQ(All<ListDone>(ev).size(), 2u);
  EXPECT_TRUE(engine_.ExportImage().lists.empty());
  EXPECT_TRUE(engine_.ExportImage().pending.empty());
}

// Closing the market (delisting) cancels every open order of it, each list
// whole: an OCO's resting and waiting orders, an OTO's working order (its
// pending order goes with the list), a plain resting order; nothing stays
// locked, nothing is taken while it is closed, and it trades again once
// opened.
TEST_F(OrderListTest, ClosingTheMarketCancelsEveryOrderAndList) {
  const uint64_t oco = Raw(NextOrderId());
  Run(SellOco());
  const uint64_t oto = Raw(NextOrderId());
  Run(List(kCarol, ListType::kOto,
           {Leg(Side::kBuy, OrderType::kLimit, 1, 90),
            Leg(Side::kSell, OrderType::kLimitMaker, 1, 120)}));
  const OrderId plain = Rest(kAlice, Side::kBuy, 80, 3);
  const OrderId other = Rest(kAlice, Side::kBuy, 100, 10, kEthUsdt);
  ASSERT_TRUE(ListOpen(oco) && ListOpen(oto));

  Events ev = SetStatus(kBtcUsdt, MarketStatus::kClosed);
  ASSERT_EQ(Types(ev),
            "OrderCanceled OrderCanceled OrderCanceled OrderCanceled MarketStatusChanged ListDone "
            "ListDone");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, Nth(oco, 0));
  EXPECT_EQ(At<OrderCanceled>(ev, 1).order_id, Nth(oco, 1));
  EXPECT_EQ(At<OrderCanceled>(ev, 2).order_id, Nth(oto, 0));
  EXPECT_EQ(At<OrderCanceled>(ev, 3).order_id, plain);
  EXPECT_EQ(At<MarketStatusChanged>(ev, 4).status, MarketStatus::kClosed);
  EXPECT_EQ(engine_.market_status(kBtcUsdt), MarketStatus::kClosed);
  EXPECT_FALSE(ListOpen(oco));
  EXPECT_FALSE(ListOpen(oto));
  EXPECT_EQ(Bal(kBob, kBtc).locked.value, 0);
  EXPECT_EQ(Bal(kCarol, kUsdt).locked.value, 0);
  EXPECT_GT(Bal(kAlice, kUsdt).locked.value, 0);  // its ETHUSDT order stays
  EXPECT_TRUE(engine_.FindOrder(other).has_value());
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "");
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "");

  ExpectReject(Limit(kBob, Side::kSell, 100, 1), RejectReason::kMarketNotTrading);
  ExpectReject(CancelCmd(kAlice, plain), RejectReason::kMarketNotTrading);
  ExpectReject(CancelAll{kAlice, kBtcUsdt}, RejectReason::kMarketNotTrading);
  // Closing again cancels nothing more.
  EXPECT_EQ(Types(SetStatus(kBtcUsdt, MarketStatus::kClosed)), "MarketStatusChanged");

  EXPECT_EQ(Types(SetStatus(kBtcUsdt, MarketStatus::kTrading)), "MarketStatusChanged");
  EXPECT_EQ(Types(Place(Limit(kBob, Side::kSell, 100, 1))), "OrderAccepted OrderRested");
}

}  // namespace
}  // namespace mb::engine
