// Self-trade prevention: each mode when a taker meets its own account's
// resting order, and the dry walks (market order locks) that apply it too.
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

// Alice rests an ask 100 × 2, then Bob an ask 100 × 3; Alice buys 100 × 4
// with each mode.
class StpTest : public FundedEngineTest {
 protected:
  void SetUp() override {
    FundedEngineTest::SetUp();
    own_ = Rest(kAlice, Side::kSell, 100, 2);
    bobs_ = Rest(kBob, Side::kSell, 100, 3);
  }
  Events Buy(StpMode mode) {
    taker_ = NextOrderId();
    return Place(WithStp(Limit(kAlice, Side::kBuy, 100, 4), mode));
  }
  OrderId own_{}, bobs_{}, taker_{};
};

TEST_F(StpTest, ExpireTakerExpiresTheIncomingOrder) {
  Events ev = Buy(StpMode::kExpireTaker);
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).terms.stp, StpMode::kExpireTaker);
  const OrderExpired x = At<OrderExpired>(ev, 1);
  EXPECT_EQ(x.order_id, taker_);
  EXPECT_EQ(x.account, kAlice);
  EXPECT_EQ(x.side, Side::kBuy);
  EXPECT_EQ(x.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(x.remaining, Qty{4});
  EXPECT_EQ(x.released, Amount{4'000});
  EXPECT_EQ(Queue(kBtcUsdt, Side::kSell), (std::vector<uint64_t>{Raw(own_), Raw(bobs_)}));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc - 2'000, 2'000));
}

TEST_F(StpTest, ExpireMakerExpiresTheRestingOrderAndMatchingGoesOn) {
  Events ev = Buy(StpMode::kExpireMaker);
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired Trade OrderRested");
  const OrderExpired x = At<OrderExpired>(ev, 1);
  EXPECT_EQ(x.order_id, own_);
  EXPECT_EQ(x.account, kAlice);
  EXPECT_EQ(x.side, Side::kSell);
  EXPECT_EQ(x.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(x.remaining, Qty{2});
  EXPECT_EQ(x.released, Amount{2'000});
  const Trade t = At<Trade>(ev, 2);
  EXPECT_EQ(t.maker_order_id, bobs_);
  EXPECT_EQ(t.taker_order_id, taker_);
  EXPECT_EQ(t.qty, Qty{3});
  EXPECT_TRUE(t.maker_filled);
  EXPECT_FALSE(t.taker_filled);
  EXPECT_EQ(At<OrderRested>(ev, 3).remaining, Qty{1});
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 3'000 - 6, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'000, 1'000));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 3'000 - 3, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "100x1/1");
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "");
}

TEST_F(StpTest, ExpireBothExpiresTheMakerThenTheTaker) {
  Events ev = Buy(StpMode::kExpireBoth);
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired OrderExpired");
  const OrderExpired m = At<OrderExpired>(ev, 1);
  EXPECT_EQ(m.order_id, own_);
  EXPECT_EQ(m.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(m.remaining, Qty{2});
  EXPECT_EQ(m.released, Amount{2'000});
  const OrderExpired t = At<OrderExpired>(ev, 2);
  EXPECT_EQ(t.order_id, taker_);
  EXPECT_EQ(t.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(t.remaining, Qty{4});
  EXPECT_EQ(t.released, Amount{4'000});
  EXPECT_EQ(Queue(kBtcUsdt, Side::kSell), (std::vector<uint64_t>{Raw(bobs_)}));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Raw(engine_.next_trade_id()), 1u);
}

TEST_F(StpTest, NoneTradesWithItself) {
  Events ev = Buy(StpMode::kNone);
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  const Trade self = At<Trade>(ev, 1);
  EXPECT_EQ(self.maker_order_id, own_);
  EXPECT_EQ(self.maker_account, kAlice);
  EXPECT_EQ(self.taker_account, kAlice);
  EXPECT_EQ(self.qty, Qty{2});
  EXPECT_EQ(self.maker_fee, Amount{2});
  EXPECT_EQ(self.taker_fee, Amount{4});
  EXPECT_TRUE(self.maker_filled);
  const Trade t = At<Trade>(ev, 2);
  EXPECT_EQ(t.maker_order_id, bobs_);
  EXPECT_EQ(t.qty, Qty{2});
  EXPECT_FALSE(t.maker_filled);
  EXPECT_TRUE(t.taker_filled);
  // Alice paid 4000, received 2000 - 2 for her ask, 4000 - 8 BTC, sold 2000.
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'000 + 1'998, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc - 2'000 + 3'992, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 3'000, 1'000));
  EXPECT_EQ(Bal(kFee, kBtc), B(8, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(4, 0));
}

// Alice and Bob funded.
class SelfTradePreventionTest : public FundedEngineTest {};

TEST_F(SelfTradePreventionTest, ExpireTakerAfterPartialFillStopsAtTheOwnOrder) {
  const OrderId bob = Rest(kBob, Side::kSell, 100, 1);
  Rest(kAlice, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 100, 3);
  const OrderId t = NextOrderId();
  Events ev = Place(WithStp(Limit(kAlice, Side::kBuy, 100, 4), StpMode::kExpireTaker));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, bob);
  const OrderExpired x = At<OrderExpired>(ev, 2);
  EXPECT_EQ(x.order_id, t);
  EXPECT_EQ(x.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(x.remaining, Qty{3});
  EXPECT_EQ(x.released, Amount{3'000});
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x5/2");
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 1'000, 0));
}

TEST_F(SelfTradePreventionTest, MarketOrderLockWalkAppliesSelfTradePrevention) {
  const OrderId own = Rest(kAlice, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 101, 3);
  // EXPIRE_TAKER: the walk stops at Alice's own ask, so nothing is locked.
  const OrderId t1 = NextOrderId();
  Events ev = Place(WithStp(MarketQty(kAlice, Side::kBuy, 3), StpMode::kExpireTaker));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{0});
  EXPECT_EQ(At<OrderExpired>(ev, 1).order_id, t1);
  EXPECT_EQ(At<OrderExpired>(ev, 1).reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(At<OrderExpired>(ev, 1).remaining, Qty{3});
  EXPECT_EQ(At<OrderExpired>(ev, 1).released, Amount{0});
  // EXPIRE_MAKER: the walk skips it; the lock is Bob's 3 lots at 101.
  ev = Place(WithStp(MarketQty(kAlice, Side::kBuy, 3), StpMode::kExpireMaker));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{3'030});
  EXPECT_EQ(At<OrderExpired>(ev, 1).order_id, own);
  EXPECT_TRUE(At<Trade>(ev, 2).taker_filled);
  EXPECT_EQ(At<Trade>(ev, 2).taker_released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 3'030, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 3'000 - 6, 0));
}

}  // namespace
}  // namespace mb::engine
