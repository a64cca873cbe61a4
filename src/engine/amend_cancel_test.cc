// Cancel, cancel-all and amend: what each releases or locks, and time
// priority (quantity down keeps it; a price change or quantity up loses it).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/fixed_string.h"
#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

// Alice and Bob funded.
class CancelTest : public FundedEngineTest {};

TEST_F(CancelTest, CancelOfAnOrderThatIsNotOpenIsUnknownOrder) {
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  Rejected r = ExpectReject(CancelCmd(kAlice, OrderId{999}), RejectReason::kUnknownOrder);
  EXPECT_EQ(r.command, CommandType::kCancelOrder);
  EXPECT_EQ(r.account, kAlice);
  EXPECT_EQ(r.market, kBtcUsdt);
  EXPECT_EQ(r.order_id, OrderId{999});
  EXPECT_TRUE(r.client_order_id.empty());
  ExpectReject(CancelCmd(kBob, a), RejectReason::kUnknownOrder);              // foreign
  ExpectReject(CancelCmd(kAlice, a, kEthUsdt), RejectReason::kUnknownOrder);  // other market
  ExpectReject(CancelCmd(kAlice, OrderId{0}), RejectReason::kUnknownOrder);   // nothing named
  ExpectReject(CancelCmd(kAlice, a, kNoMarket), RejectReason::kUnknownMarket);
  ExpectReject(CancelCmd(kNoAccount, a), RejectReason::kUnknownAccount);

  // Filled.
  const OrderId f = Rest(kAlice, Side::kBuy, 101, 1);
  EXPECT_EQ(Types(Place(Limit(kBob, Side::kSell, 101, 1))), "OrderAccepted Trade");
  ExpectReject(CancelCmd(kAlice, f), RejectReason::kUnknownOrder);
  // Expired (an IOC never rests).
  const OrderId ioc = NextOrderId();
  EXPECT_EQ(Types(Place(Limit(kAlice, Side::kSell, 200, 1, TimeInForce::kIoc))),
            "OrderAccepted OrderExpired");
  ExpectReject(CancelCmd(kAlice, ioc), RejectReason::kUnknownOrder);

  // Canceled.
  Events ev = Cancel(kAlice, a);
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).remaining, Qty{5});
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released, Amount{5'000});
  ExpectReject(CancelCmd(kAlice, a), RejectReason::kUnknownOrder);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 1'010, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);
}

TEST_F(CancelTest, CancelOfAPartiallyFilledOrderReleasesItsRemainder) {
  const OrderId s = Rest(kAlice, Side::kSell, 100, 5);
  Place(Limit(kBob, Side::kBuy, 100, 2));
  Events ev = Cancel(kAlice, s);
  ASSERT_EQ(Types(ev), "OrderCanceled");
  const OrderCanceled c = At<OrderCanceled>(ev, 0);
  EXPECT_EQ(c.side, Side::kSell);
  EXPECT_EQ(c.remaining, Qty{3});
  EXPECT_EQ(c.released, Amount{3'000});
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc - 2'000, 0));
}

TEST_F(CancelTest, CancelByClientOrderId) {
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 2), "my-1"));
  Rest(WithClientId(Limit(kBob, Side::kBuy, 100, 2), "my-1"));
  Rejected r = ExpectReject(CancelByClientCmd(kAlice, "nope"), RejectReason::kUnknownOrder);
  EXPECT_EQ(r.order_id, OrderId{0});
  EXPECT_EQ(r.client_order_id.view(), "nope");
  ExpectReject(CancelByClientCmd(kAlice, "my-1", kEthUsdt), RejectReason::kUnknownOrder);
  ExpectReject(CancelByClientCmd(kCarol, "my-1"), RejectReason::kUnknownOrder);

  Events ev = Run(CancelByClientCmd(kAlice, "my-1"));
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, a);
  EXPECT_EQ(At<OrderCanceled>(ev, 0).account, kAlice);
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released, Amount{2'000});
  ExpectReject(CancelByClientCmd(kAlice, "my-1"), RejectReason::kUnknownOrder);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt - 2'000, 2'000));
}

// Both ids (Binance's rule): the order found by id must carry the client id.
TEST_F(CancelTest, CancelByIdAndClientOrderIdNeedsBothToNameTheOrder) {
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 2), "mine"));
  const OrderId b = Rest(Limit(kAlice, Side::kBuy, 100, 2));  // no client id
  Rejected r = ExpectReject(CancelOrder{kAlice, kBtcUsdt, a, ClientOrderId::From("other"), {}},
                            RejectReason::kUnknownOrder);
  EXPECT_EQ(r.order_id, a);
  EXPECT_EQ(r.client_order_id.view(), "other");
  ExpectReject(CancelOrder{kAlice, kBtcUsdt, b, ClientOrderId::From("mine"), {}},
               RejectReason::kUnknownOrder);
  ExpectReject(
      AmendOrder{kAlice, kBtcUsdt, a, ClientOrderId::From("other"), Price{0}, Qty{1}, false},
      RejectReason::kUnknownOrder);
  EXPECT_EQ(engine_.open_orders(), 2u);
  Events ev = Run(CancelOrder{kAlice, kBtcUsdt, a, ClientOrderId::From("mine"), {}});
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, a);
}

// cancelRestrictions, decided against the order as it is when the cancel runs.
TEST_F(CancelTest, CancelRestrictionsNeedTheOrdersState) {
  const OrderId fresh = Rest(kAlice, Side::kSell, 100, 5);
  const OrderId partial = Rest(kAlice, Side::kSell, 101, 5);
  Place(Limit(kBob, Side::kBuy, 101, 7));  // fills fresh, 2 of partial
  ASSERT_FALSE(engine_.FindOrder(fresh).has_value());
  const OrderId untouched = Rest(kAlice, Side::kSell, 102, 5);
  auto cancel = [](OrderId id, CancelRestriction r) {
    return CancelOrder{kAlice, kBtcUsdt, id, {}, r};
  };
  Rejected r =
      ExpectReject(cancel(partial, CancelRestriction::kOnlyNew), RejectReason::kCancelRestricted);
  EXPECT_EQ(r.command, CommandType::kCancelOrder);
  EXPECT_EQ(r.order_id, partial);
  ExpectReject(cancel(untouched, CancelRestriction::kOnlyPartiallyFilled),
               RejectReason::kCancelRestricted);
  ExpectReject(cancel(OrderId{999}, CancelRestriction::kOnlyNew), RejectReason::kUnknownOrder);
  EXPECT_EQ(engine_.open_orders(), 2u);
  EXPECT_EQ(Types(Run(cancel(partial, CancelRestriction::kOnlyPartiallyFilled))), "OrderCanceled");
  EXPECT_EQ(Types(Run(cancel(untouched, CancelRestriction::kOnlyNew))), "OrderCanceled");
  EXPECT_EQ(engine_.open_orders(), 0u);
}

TEST_F(CancelTest, CancelAllCancelsTheAccountsOrdersOfOneMarketInAscendingId) {
  const OrderId z = Rest(kAlice, Side::kBuy, 98, 2);
  const OrderId y = Rest(kAlice, Side::kSell, 105, 1);
  const OrderId x = Rest(kAlice, Side::kBuy, 99, 2);
  const OrderId e = Rest(kAlice, Side::kBuy, 100, 10, kEthUsdt);
  const OrderId b = Rest(kBob, Side::kBuy, 97, 2);
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(x), Raw(z), Raw(b)}));

  Events ev = Run(CancelAll{kAlice, kBtcUsdt});
  ASSERT_EQ(Types(ev), "OrderCanceled OrderCanceled OrderCanceled");
  const OrderCanceled c0 = At<OrderCanceled>(ev, 0);
  EXPECT_EQ(c0.order_id, z);
  EXPECT_EQ(c0.side, Side::kBuy);
  EXPECT_EQ(c0.remaining, Qty{2});
  EXPECT_EQ(c0.released, Amount{1'960});
  const OrderCanceled c1 = At<OrderCanceled>(ev, 1);
  EXPECT_EQ(c1.order_id, y);
  EXPECT_EQ(c1.side, Side::kSell);
  EXPECT_EQ(c1.released, Amount{1'000});
  const OrderCanceled c2 = At<OrderCanceled>(ev, 2);
  EXPECT_EQ(c2.order_id, x);
  EXPECT_EQ(c2.released, Amount{1'980});
  for (const OrderCanceled& c : All<OrderCanceled>(ev)) {
    EXPECT_EQ(c.account, kAlice);
    EXPECT_EQ(c.market, kBtcUsdt);
  }
  // Bob's order and Alice's ETHUSDT order stay.
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(b)}));
  EXPECT_TRUE(engine_.FindOrder(e).has_value());
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 1'000, 1'000));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc, 0));

  Rejected r = ExpectReject(CancelAll{kAlice, kBtcUsdt}, RejectReason::kUnknownOrder);
  EXPECT_EQ(r.command, CommandType::kCancelAll);
  EXPECT_EQ(r.order_id, OrderId{0});
  ExpectReject(CancelAll{kCarol, kBtcUsdt}, RejectReason::kUnknownOrder);
  ExpectReject(CancelAll{kAlice, kNoMarket}, RejectReason::kUnknownMarket);
  ExpectReject(CancelAll{kNoAccount, kBtcUsdt}, RejectReason::kUnknownAccount);
}

// Alice and Bob funded.
class AmendTest : public FundedEngineTest {};

TEST_F(AmendTest, AmendQuantityDownAtTheSamePriceKeepsPriority) {
  Fund(kCarol);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  const OrderId b = Rest(kBob, Side::kBuy, 100, 3);
  Events ev = Amend(kAlice, a, 0, 2);
  ASSERT_EQ(Types(ev), "OrderAmended");
  const OrderAmended m = At<OrderAmended>(ev, 0);
  EXPECT_EQ(m.order_id, a);
  EXPECT_EQ(m.account, kAlice);
  EXPECT_EQ(m.market, kBtcUsdt);
  EXPECT_EQ(m.side, Side::kBuy);
  EXPECT_EQ(m.new_price, Price{100});
  EXPECT_EQ(m.new_qty, Qty{2});
  EXPECT_EQ(m.new_remaining, Qty{2});
  EXPECT_EQ(m.lock_delta, Amount{-3'000});
  EXPECT_TRUE(m.keeps_priority);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000, 2'000));
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(a), Raw(b)}));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "100x5/2");

  // Naming the same price explicitly is the same amend.
  ev = Amend(kBob, b, 100, 2);
  ASSERT_EQ(Types(ev), "OrderAmended");
  EXPECT_TRUE(At<OrderAmended>(ev, 0).keeps_priority);
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{-1'000});

  // Alice is still first in the queue.
  ev = Place(Limit(kCarol, Side::kSell, 100, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, a);
  EXPECT_TRUE(At<Trade>(ev, 1).maker_filled);
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(b)}));
}

TEST_F(AmendTest, AmendSellQuantityDownReleasesBase) {
  const OrderId s = Rest(kAlice, Side::kSell, 100, 5);
  Events ev = Amend(kAlice, s, 0, 3);
  ASSERT_EQ(Types(ev), "OrderAmended");
  EXPECT_EQ(At<OrderAmended>(ev, 0).side, Side::kSell);
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{-2'000});
  EXPECT_TRUE(At<OrderAmended>(ev, 0).keeps_priority);
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc - 3'000, 3'000));
  // A sell's price change moves no funds but still re-queues.
  ev = Amend(kAlice, s, 101, 0);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{0});
  EXPECT_FALSE(At<OrderAmended>(ev, 0).keeps_priority);
  EXPECT_EQ(At<OrderRested>(ev, 1).remaining, Qty{3});
  EXPECT_EQ(engine_.FindOrder(s)->terms.price, Price{101});
}

TEST_F(AmendTest, AmendPriceChangeRequeuesBehindTheLevel) {
  const OrderId a = Rest(kAlice, Side::kBuy, 99, 5);
  const OrderId b = Rest(kBob, Side::kBuy, 100, 3);
  Events ev = Amend(kAlice, a, 100, 0);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  const OrderAmended m = At<OrderAmended>(ev, 0);
  EXPECT_EQ(m.order_id, a);
  EXPECT_EQ(m.new_price, Price{100});
  EXPECT_EQ(m.new_qty, Qty{5});
  EXPECT_EQ(m.new_remaining, Qty{5});
  EXPECT_EQ(m.lock_delta, Amount{50});
  EXPECT_FALSE(m.keeps_priority);
  EXPECT_EQ(At<OrderRested>(ev, 1).order_id, a);
  EXPECT_EQ(At<OrderRested>(ev, 1).remaining, Qty{5});
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(b), Raw(a)}));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 5'000, 5'000));

  // Price and quantity down together: re-queued, the difference released.
  ev = Amend(kAlice, a, 98, 3);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{2'940 - 5'000});
  EXPECT_FALSE(At<OrderAmended>(ev, 0).keeps_priority);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'940, 2'940));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "100x3/1 98x3/1");
}

TEST_F(AmendTest, AmendQuantityUpRequeues) {
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 2);
  const OrderId b = Rest(kBob, Side::kBuy, 100, 3);
  Events ev = Amend(kAlice, a, 0, 4);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  const OrderAmended m = At<OrderAmended>(ev, 0);
  EXPECT_EQ(m.new_qty, Qty{4});
  EXPECT_EQ(m.new_remaining, Qty{4});
  EXPECT_EQ(m.lock_delta, Amount{2'000});
  EXPECT_FALSE(m.keeps_priority);
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(b), Raw(a)}));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'000, 4'000));
  EXPECT_EQ(engine_.FindOrder(a)->terms.qty, Qty{4});
}

TEST_F(AmendTest, AmendToACrossingPriceTradesAsTaker) {
  const OrderId m = Rest(kBob, Side::kSell, 101, 2);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  Events ev = Amend(kAlice, a, 101, 0);
  ASSERT_EQ(Types(ev), "OrderAmended Trade OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{50});
  EXPECT_FALSE(At<OrderAmended>(ev, 0).keeps_priority);
  const Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.maker_order_id, m);
  EXPECT_EQ(t.taker_order_id, a);
  EXPECT_EQ(t.taker_side, Side::kBuy);
  EXPECT_EQ(t.taker_account, kAlice);
  EXPECT_EQ(t.price, Price{101});
  EXPECT_EQ(t.qty, Qty{2});
  EXPECT_EQ(t.taker_fee, Amount{4});  // the amended order pays the taker rate
  EXPECT_EQ(t.maker_fee, Amount{3});  // ceil(2020 × 10 / 10000)
  EXPECT_TRUE(t.maker_filled);
  EXPECT_FALSE(t.taker_filled);
  EXPECT_EQ(At<OrderRested>(ev, 2).remaining, Qty{3});
  EXPECT_EQ(At<OrderRested>(ev, 2).released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 5'050, 3'030));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 2'000 - 4, 0));
  EXPECT_EQ(engine_.FindOrder(a)->remaining, Qty{3});
}

TEST_F(AmendTest, AmendThatFillsCompletelyReleasesThePriceImprovement) {
  Rest(kBob, Side::kSell, 101, 2);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 2);
  Events ev = Amend(kAlice, a, 102, 0);
  ASSERT_EQ(Types(ev), "OrderAmended Trade");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{40});  // 2040 - 2000
  const Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.price, Price{101});
  EXPECT_TRUE(t.taker_filled);
  EXPECT_EQ(t.taker_released, Amount{20});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'020, 0));
  EXPECT_FALSE(engine_.FindOrder(a).has_value());
}

TEST_F(AmendTest, AmendOfAPartiallyFilledOrderCountsTheFilledPart) {
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  Place(Limit(kBob, Side::kSell, 100, 2));
  Rejected r = ExpectReject(AmendCmd(kAlice, a, 0, 2), RejectReason::kInvalidQuantity);
  EXPECT_EQ(r.command, CommandType::kAmendOrder);
  EXPECT_EQ(r.order_id, a);
  ExpectReject(AmendCmd(kAlice, a, 0, 1), RejectReason::kInvalidQuantity);
  Events ev = Amend(kAlice, a, 0, 3);
  ASSERT_EQ(Types(ev), "OrderAmended");
  const OrderAmended m = At<OrderAmended>(ev, 0);
  EXPECT_EQ(m.new_qty, Qty{3});
  EXPECT_EQ(m.new_remaining, Qty{1});
  EXPECT_EQ(m.lock_delta, Amount{-2'000});
  EXPECT_TRUE(m.keeps_priority);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 3'000, 1'000));
  // Quantity up from there: new remaining 4.
  ev = Amend(kAlice, a, 0, 6);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).new_remaining, Qty{4});
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{3'000});
  EXPECT_EQ(At<OrderRested>(ev, 1).remaining, Qty{4});
}

TEST_F(AmendTest, AmendOfARestedImprovedBuyMovesTheExactDifference) {
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId a = NextOrderId();
  Place(Limit(kAlice, Side::kBuy, 105, 4));  // 2 filled at 100, 2 rest at 105 locking 2100
  // New lock 1 × 105 × 10 = 1050; the surplus went back when the order rested.
  Events ev = Amend(kAlice, a, 0, 3);
  ASSERT_EQ(Types(ev), "OrderAmended");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{-1'050});
  EXPECT_EQ(At<OrderAmended>(ev, 0).new_remaining, Qty{1});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000 - 1'050, 1'050));
}

TEST_F(AmendTest, AmendedBuyThatFillsBelowItsNewPriceAndRestsReturnsTheSurplus) {
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId a = Rest(kAlice, Side::kBuy, 99, 4);
  Events ev = Amend(kAlice, a, 105, 0);
  ASSERT_EQ(Types(ev), "OrderAmended Trade OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{4'200 - 3'960});
  EXPECT_EQ(At<Trade>(ev, 1).price, Price{100});
  EXPECT_EQ(At<Trade>(ev, 1).taker_order_id, a);
  const OrderRested r = At<OrderRested>(ev, 2);
  EXPECT_EQ(r.order_id, a);
  EXPECT_EQ(r.remaining, Qty{2});
  EXPECT_EQ(r.released, Amount{100});  // 4200 - 2000 - 2 × 105 × 10
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000 - 2'100, 2'100));
  EXPECT_EQ(engine_.FindOrder(a)->locked, Amount{2'100});
}

TEST_F(AmendTest, AmendWithoutChangeIsNoChange) {
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  ExpectReject(AmendCmd(kAlice, a, 0, 0), RejectReason::kNoChange);
  ExpectReject(AmendCmd(kAlice, a, 100, 5), RejectReason::kNoChange);
  ExpectReject(AmendCmd(kAlice, a, 100, 0), RejectReason::kNoChange);
  ExpectReject(AmendCmd(kAlice, a, 0, 5), RejectReason::kNoChange);
}

TEST_F(AmendTest, AmendChecks) {
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  ExpectReject(AmendCmd(kAlice, a, 0, 3, kNoMarket), RejectReason::kUnknownMarket);
  ExpectReject(AmendCmd(kNoAccount, a, 0, 3), RejectReason::kUnknownAccount);
  Rejected r = ExpectReject(AmendCmd(kAlice, OrderId{999}, 0, 3), RejectReason::kUnknownOrder);
  EXPECT_EQ(r.order_id, OrderId{999});
  ExpectReject(AmendCmd(kBob, a, 0, 3), RejectReason::kUnknownOrder);
  ExpectReject(AmendCmd(kAlice, a, 0, 3, kEthUsdt), RejectReason::kUnknownOrder);
  ExpectReject(AmendCmd(kAlice, a, 10'000'001, 0), RejectReason::kInvalidPrice);
  ExpectReject(AmendCmd(kAlice, a, -1, 0), RejectReason::kInvalidPrice);
  ExpectReject(AmendCmd(kAlice, a, 0, 100'001), RejectReason::kInvalidQuantity);
  ExpectReject(AmendCmd(kAlice, a, 0, -1), RejectReason::kInvalidQuantity);
  // Notional on the new total quantity: 100 × 1 × 10 is the minimum.
  ExpectReject(AmendCmd(kAlice, a, 99, 1), RejectReason::kMinNotional);
  ExpectReject(AmendCmd(kAlice, a, 19, 0), RejectReason::kMinNotional);  // 950
  EXPECT_EQ(Types(Amend(kAlice, a, 0, 1)), "OrderAmended");
  // Unknown order comes before no-change.
  ExpectReject(AmendCmd(kBob, a, 0, 0), RejectReason::kUnknownOrder);
}

TEST_F(AmendTest, AmendByClientOrderId) {
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 5), "amend-me"));
  Events ev = Run(AmendOrder{kAlice, kBtcUsdt, OrderId{0}, ClientOrderId::From("amend-me"),
                             Price{0}, Qty{3}, false});
  ASSERT_EQ(Types(ev), "OrderAmended");
  EXPECT_EQ(At<OrderAmended>(ev, 0).order_id, a);
  Rejected r = ExpectReject(AmendOrder{kAlice, kBtcUsdt, OrderId{0}, ClientOrderId::From("other"),
                                       Price{0}, Qty{2}, false},
                            RejectReason::kUnknownOrder);
  EXPECT_EQ(r.order_id, OrderId{0});
  EXPECT_EQ(r.client_order_id.view(), "other");
  // The amended order keeps its client id.
  ev = Run(CancelByClientCmd(kAlice, "amend-me"));
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, a);
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released, Amount{3'000});
}

// amend/keepPriority: only a smaller quantity at the same price; the engine
// decides it against the order as it is when the command runs.
TEST_F(AmendTest, KeepPriorityAmendOnlyReducesTheQuantity) {
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 5), "keep"));
  const OrderId b = Rest(kAlice, Side::kBuy, 100, 1);
  auto keep = [&](OrderId id, std::string_view cid, int64_t price, int64_t qty) {
    return AmendOrder{kAlice, kBtcUsdt, id, ClientOrderId::From(cid), Price{price}, Qty{qty}, true};
  };
  Rejected r = ExpectReject(keep(a, "", 0, 6), RejectReason::kQuantityIncrease);
  EXPECT_EQ(r.command, CommandType::kAmendOrder);
  EXPECT_EQ(r.order_id, a);
  ExpectReject(keep(a, "", 0, 5), RejectReason::kNoChange);
  ExpectReject(keep(a, "", 101, 4), RejectReason::kInvalidPrice);
  ExpectReject(keep(OrderId{0}, "keep", 0, 7), RejectReason::kQuantityIncrease);
  ExpectReject(keep(OrderId{0}, "nope", 0, 4), RejectReason::kUnknownOrder);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 6'000, 6'000));
  // By client order id: keeps its place ahead of b.
  Events ev = Run(keep(OrderId{0}, "keep", 0, 3));
  ASSERT_EQ(Types(ev), "OrderAmended");
  EXPECT_EQ(At<OrderAmended>(ev, 0).order_id, a);
  EXPECT_TRUE(At<OrderAmended>(ev, 0).keeps_priority);
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(a), Raw(b)}));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'000, 4'000));
  // The same amend without keep_priority may raise the quantity (losing its place).
  EXPECT_EQ(Types(Amend(kAlice, a, 0, 6)), "OrderAmended OrderRested");
}

TEST_F(AmendTest, LimitMakerAmendedToACrossingPriceWouldTakeLiquidity) {
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId m = Rest(Maker(kAlice, Side::kBuy, 99, 3));
  ExpectReject(AmendCmd(kAlice, m, 100, 0), RejectReason::kWouldTakeLiquidity);
  ExpectReject(AmendCmd(kAlice, m, 101, 5), RejectReason::kWouldTakeLiquidity);
  // Not crossing: loses priority and rests.
  Events ev = Amend(kAlice, m, 98, 0);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  EXPECT_EQ(engine_.FindOrder(m)->terms.type, OrderType::kLimitMaker);
  // Quantity down keeps priority without a cross check.
  EXPECT_EQ(Types(Amend(kAlice, m, 0, 2)), "OrderAmended");
  // A plain limit order amended across the book trades instead.
  const OrderId l = Rest(kAlice, Side::kBuy, 97, 2);
  EXPECT_EQ(Types(Amend(kAlice, l, 100, 0)), "OrderAmended Trade");
}

TEST_F(AmendTest, AmendNeedingMoreThanTheAvailableBalanceChangesNothing) {
  Credit(kCarol, kUsdt, 2'000);
  const OrderId c = Rest(kCarol, Side::kBuy, 100, 2);
  EXPECT_EQ(Bal(kCarol, kUsdt), B(0, 2'000));
  Rejected r = ExpectReject(AmendCmd(kCarol, c, 101, 0), RejectReason::kInsufficientBalance);
  EXPECT_EQ(r.order_id, c);
  ExpectReject(AmendCmd(kCarol, c, 0, 3), RejectReason::kInsufficientBalance);
  EXPECT_EQ(Bal(kCarol, kUsdt), B(0, 2'000));
  EXPECT_EQ(engine_.FindOrder(c)->terms.price, Price{100});
  // Lowering the price frees funds and needs none.
  Events ev = Amend(kCarol, c, 99, 0);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{-20});
  EXPECT_EQ(Bal(kCarol, kUsdt), B(20, 1'980));
}

// newClientOrderId: the amended order takes the new id; the previous one is
// free at once; an id another open order holds is refused and changes nothing.
TEST_F(AmendTest, AmendGivesTheOrderANewClientOrderId) {
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 5), "first"));
  const OrderId other = Rest(WithClientId(Limit(kAlice, Side::kBuy, 99, 2), "taken"));
  Rest(WithClientId(Limit(kBob, Side::kBuy, 98, 2), "bobs"));

  AmendOrder am = AmendCmd(kAlice, a, 0, 4);
  am.new_client_order_id = ClientOrderId::From("taken");
  Rejected r = ExpectReject(am, RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(other));
  EXPECT_EQ(r.order_id, a);

  // Another account's id is no obstacle; the order's own id changes nothing.
  am.new_client_order_id = ClientOrderId::From("first");
  EXPECT_EQ(Types(Run(am)), "OrderAmended");
  am.new_qty = Qty{3};
  am.new_client_order_id = ClientOrderId::From("bobs");
  Events ev = Run(am);
  ASSERT_EQ(Types(ev), "OrderAmended ClientOrderIdChanged");
  const ClientOrderIdChanged c = At<ClientOrderIdChanged>(ev, 1);
  EXPECT_EQ(c.order_id, a);
  EXPECT_EQ(c.account, kAlice);
  EXPECT_EQ(c.market, kBtcUsdt);
  EXPECT_EQ(c.client_order_id.view(), "bobs");

  // Found by the new id, no longer by the previous one, which is free.
  ExpectReject(CancelByClientCmd(kAlice, "first"), RejectReason::kUnknownOrder);
  const OrderId reuse = Rest(WithClientId(Limit(kAlice, Side::kSell, 200, 1), "first"));
  ExpectReject(WithClientId(Limit(kAlice, Side::kSell, 200, 1), "bobs"),
               RejectReason::kDuplicateClientOrderId);
  ev = Run(CancelByClientCmd(kAlice, "bobs"));
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, a);
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released, Amount{3'000});
  EXPECT_TRUE(engine_.FindOrder(reuse).has_value());
}

// A re-pricing amend with a new id: the id changes before the order trades.
TEST_F(AmendTest, AmendThatTradesCarriesTheNewIdFirst) {
  const OrderId a = Rest(Limit(kAlice, Side::kBuy, 100, 5));
  Rest(kBob, Side::kSell, 105, 2);
  AmendOrder am = AmendCmd(kAlice, a, 105, 0);
  am.new_client_order_id = ClientOrderId::From("renamed");
  Events ev = Run(am);
  ASSERT_EQ(Types(ev), "OrderAmended ClientOrderIdChanged Trade OrderRested");
  ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 90, 2), "renamed"),
               RejectReason::kDuplicateClientOrderId);
}

// cancelReplace is one command: one sequence, the cancel's event first, and
// the new order may spend what the cancel released.
class CancelReplaceTest : public FundedEngineTest {
 protected:
  static CancelReplace Cr(const CancelOrder& c, const PlaceOrder& p,
                          CancelReplaceMode mode = CancelReplaceMode::kStopOnFailure) {
    CancelReplace cr;
    cr.cancel = c;
    cr.place = p;
    cr.mode = mode;
    return cr;
  }
};

TEST_F(CancelReplaceTest, CancelThenPlaceInOneSequence) {
  Credit(kCarol, kUsdt, 6'000);
  const OrderId a = Rest(kCarol, Side::kBuy, 100, 6);  // locks all 6000
  const OrderId next = NextOrderId();
  // Alone, the new order would not be funded; after the cancel it is.
  Events ev = Run(Cr(CancelCmd(kCarol, a), Limit(kCarol, Side::kBuy, 120, 5)));
  ASSERT_EQ(Types(ev), "OrderCanceled OrderAccepted OrderRested");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, a);
  EXPECT_EQ(At<OrderAccepted>(ev, 1).order_id, next);
  EXPECT_EQ(Bal(kCarol, kUsdt), B(0, 6'000));
  EXPECT_FALSE(engine_.FindOrder(a).has_value());
  EXPECT_TRUE(engine_.FindOrder(next).has_value());
}

TEST_F(CancelReplaceTest, ARefusedCancelFollowsTheMode) {
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  const std::string before = Dump(engine_.ExportImage());
  // STOP_ON_FAILURE: the new order is not attempted.
  Events ev = Run(Cr(CancelCmd(kAlice, OrderId{999}), Limit(kAlice, Side::kBuy, 90, 2)));
  ASSERT_EQ(Types(ev), "Rejected");
  EXPECT_EQ(At<Rejected>(ev, 0).command, CommandType::kCancelOrder);
  EXPECT_EQ(At<Rejected>(ev, 0).reason, RejectReason::kUnknownOrder);
  EXPECT_EQ(Dump(engine_.ExportImage()), before);
  // cancelRestrictions refuse it the same way.
  ev = Run(Cr(CancelOrder{kAlice, kBtcUsdt, a, {}, CancelRestriction::kOnlyPartiallyFilled},
              Limit(kAlice, Side::kBuy, 90, 2)));
  ASSERT_EQ(Types(ev), "Rejected");
  EXPECT_EQ(At<Rejected>(ev, 0).reason, RejectReason::kCancelRestricted);
  // ALLOW_FAILURE: the new order is placed anyway.
  const OrderId next = NextOrderId();
  ev = Run(Cr(CancelCmd(kAlice, OrderId{999}), Limit(kAlice, Side::kBuy, 90, 2),
              CancelReplaceMode::kAllowFailure));
  ASSERT_EQ(Types(ev), "Rejected OrderAccepted OrderRested");
  EXPECT_EQ(At<Rejected>(ev, 0).command, CommandType::kCancelOrder);
  EXPECT_EQ(At<OrderAccepted>(ev, 1).order_id, next);
  EXPECT_TRUE(engine_.FindOrder(a).has_value());
  // Both refused: nothing changes.
  const std::string now = Dump(engine_.ExportImage());
  ev = Run(Cr(CancelCmd(kAlice, OrderId{999}), Limit(kAlice, Side::kBuy, 0, 1),
              CancelReplaceMode::kAllowFailure));
  ASSERT_EQ(Types(ev), "Rejected Rejected");
  EXPECT_EQ(At<Rejected>(ev, 1).command, CommandType::kPlaceOrder);
  EXPECT_EQ(At<Rejected>(ev, 1).reason, RejectReason::kInvalidPrice);
  EXPECT_EQ(Dump(engine_.ExportImage()), now);
}

TEST_F(CancelReplaceTest, CanceledButTheNewOrderRefused) {
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 5), "keep"));
  Events ev = Run(Cr(CancelCmd(kAlice, a), WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "x"),
                     CancelReplaceMode::kStopOnFailure));
  ASSERT_EQ(Types(ev), "OrderCanceled OrderAccepted OrderRested");
  // The canceled order's client id is free for the new order of the same command.
  const OrderId b = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 5), "keep2"));
  ev = Run(Cr(CancelCmd(kAlice, b), WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "keep2")));
  ASSERT_EQ(Types(ev), "OrderCanceled OrderAccepted OrderRested");
  // Canceled, then the order refused: the cancel stands.
  const OrderId c = Rest(kAlice, Side::kBuy, 100, 5);
  ev = Run(Cr(CancelCmd(kAlice, c), Limit(kAlice, Side::kBuy, 100, kInt64Max)));
  ASSERT_EQ(Types(ev), "OrderCanceled Rejected");
  EXPECT_EQ(At<Rejected>(ev, 1).command, CommandType::kPlaceOrder);
  EXPECT_FALSE(engine_.FindOrder(c).has_value());
}

}  // namespace
}  // namespace mb::engine
