// Market status: a halted market refuses everything, a cancel-only market
// only cancels, and the status command's own rejects.
#include <gtest/gtest.h>

#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

// Alice and Bob funded.
class MarketStatusTest : public FundedEngineTest {};

TEST_F(MarketStatusTest, HaltedMarketRejectsPlaceAmendAndCancel) {
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 2);
  Events ev = SetStatus(kBtcUsdt, MarketStatus::kHalted);
  ASSERT_EQ(Types(ev), "MarketStatusChanged");
  EXPECT_EQ(At<MarketStatusChanged>(ev, 0).market, kBtcUsdt);
  EXPECT_EQ(At<MarketStatusChanged>(ev, 0).status, MarketStatus::kHalted);
  EXPECT_EQ(engine_.market_status(kBtcUsdt), MarketStatus::kHalted);

  ExpectReject(Limit(kBob, Side::kSell, 100, 2), RejectReason::kMarketNotTrading);
  ExpectReject(MarketQty(kBob, Side::kSell, 2), RejectReason::kMarketNotTrading);
  ExpectReject(AmendCmd(kAlice, a, 0, 1), RejectReason::kMarketNotTrading);
  Rejected r = ExpectReject(CancelCmd(kAlice, a), RejectReason::kMarketNotTrading);
  EXPECT_EQ(r.order_id, a);
  ExpectReject(CancelAll{kAlice, kBtcUsdt}, RejectReason::kMarketNotTrading);
  // The status is checked before the order.
  ExpectReject(CancelCmd(kAlice, OrderId{999}), RejectReason::kMarketNotTrading);
  ExpectReject(AmendCmd(kAlice, OrderId{999}, 0, 1), RejectReason::kMarketNotTrading);
  // The order stays in the book; other markets trade on.
  EXPECT_TRUE(engine_.FindOrder(a).has_value());
  Rest(kAlice, Side::kBuy, 100, 10, kEthUsdt);

  EXPECT_EQ(Types(SetStatus(kBtcUsdt, MarketStatus::kTrading)), "MarketStatusChanged");
  ev = Place(Limit(kBob, Side::kSell, 100, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, a);
}

TEST_F(MarketStatusTest, CancelOnlyMarketAllowsOnlyCancels) {
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 2);
  const OrderId b = Rest(kAlice, Side::kBuy, 99, 2);
  const OrderId c = Rest(kAlice, Side::kSell, 110, 2);
  EXPECT_EQ(Types(SetStatus(kBtcUsdt, MarketStatus::kCancelOnly)), "MarketStatusChanged");
  EXPECT_EQ(engine_.market_status(kBtcUsdt), MarketStatus::kCancelOnly);
  ExpectReject(Limit(kBob, Side::kSell, 100, 2), RejectReason::kMarketNotTrading);
  ExpectReject(Maker(kBob, Side::kSell, 120, 2), RejectReason::kMarketNotTrading);
  ExpectReject(AmendCmd(kAlice, a, 0, 1), RejectReason::kMarketNotTrading);
  ExpectReject(CancelCmd(kAlice, OrderId{999}), RejectReason::kUnknownOrder);

  Events ev = Cancel(kAlice, a);
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released, Amount{2'000});
  ev = Run(CancelAll{kAlice, kBtcUsdt});
  ASSERT_EQ(Types(ev), "OrderCanceled OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, b);
  EXPECT_EQ(At<OrderCanceled>(ev, 1).order_id, c);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc, 0));

  EXPECT_EQ(Types(SetStatus(kBtcUsdt, MarketStatus::kTrading)), "MarketStatusChanged");
  Rest(kBob, Side::kSell, 100, 2);
}

TEST_F(MarketStatusTest, SetMarketStatusRejections) {
  Rejected r =
      ExpectReject(SetMarketStatus{kNoMarket, MarketStatus::kHalted}, RejectReason::kUnknownMarket);
  EXPECT_EQ(r.command, CommandType::kSetMarketStatus);
  EXPECT_EQ(r.account, AccountId{0});
  EXPECT_EQ(r.market, kNoMarket);
  r = ExpectReject(SetMarketStatus{kEthUsdt, static_cast<MarketStatus>(7)},
                   RejectReason::kInvalidStatus);
  EXPECT_EQ(r.market, kEthUsdt);
  EXPECT_EQ(engine_.market_status(kEthUsdt), MarketStatus::kTrading);
}

}  // namespace
}  // namespace mb::engine
