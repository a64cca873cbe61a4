// Iceberg orders (docs/engine.md, "Iceberg orders"): the book shows one slice
// at a time; a filled slice is followed by the next at the back of its price
// level; as a taker the whole order matches.
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

class IcebergTest : public FundedEngineTest {
 protected:
  void SetUp() override {
    FundedEngineTest::SetUp();
    Fund(kCarol);
  }
  static PlaceOrder Ice(AccountId account, Side side, int64_t price, int64_t qty, int64_t slice) {
    PlaceOrder p = Limit(account, side, price, qty);
    p.iceberg_qty = Qty{slice};
    return p;
  }
  // Places an iceberg that rests whole; returns its id.
  OrderId RestIce(AccountId account, Side side, int64_t price, int64_t qty, int64_t slice) {
    Events ev = Place(Ice(account, side, price, qty, slice));
    EXPECT_EQ(Types(ev), "OrderAccepted IcebergAccepted OrderRested");
    EXPECT_EQ(At<IcebergAccepted>(ev, 1).slice, Qty{slice});
    EXPECT_EQ(At<OrderRested>(ev, 2).remaining, Qty{qty});
    return At<OrderAccepted>(ev, 0).order_id;
  }
  ImageIceberg IcebergOf(OrderId id) const {
    for (const ImageIceberg& i : engine_.ExportImage().icebergs) {
      if (i.id == id) return i;
    }
    ADD_FAILURE() << "order " << Raw(id) << " is no resting iceberg";
    return ImageIceberg{};
  }
};

TEST_F(IcebergTest, TheBookShowsOneSliceAndTheLockCoversTheWholeOrder) {
  const Balance before = Bal(kAlice, kBtc);
  const OrderId ice = RestIce(kAlice, Side::kSell, 100, 10, 3);
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x3/1");
  EXPECT_EQ(Bal(kAlice, kBtc), B(before.available.value - 10'000, before.locked.value + 10'000));
  EXPECT_EQ(IcebergOf(ice).slice, Qty{3});
  EXPECT_EQ(IcebergOf(ice).hidden, Qty{7});
  EXPECT_EQ(engine_.FindOrder(ice)->remaining, Qty{3});
}

TEST_F(IcebergTest, AFilledSliceIsRefilledAtTheBackOfItsLevel) {
  const OrderId ice = RestIce(kAlice, Side::kSell, 100, 10, 3);
  const OrderId bobs = Rest(kBob, Side::kSell, 100, 2);
  Events ev = Place(Limit(kCarol, Side::kBuy, 100, 4));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade IcebergRefilled Trade");
  const Trade first = At<Trade>(ev, 1);
  EXPECT_EQ(first.maker_order_id, ice);
  EXPECT_EQ(first.qty, Qty{3});
  EXPECT_FALSE(first.maker_filled);
  const IcebergRefilled r = At<IcebergRefilled>(ev, 2);
  EXPECT_EQ(r.order_id, ice);
  EXPECT_EQ(r.price, Price{100});
  EXPECT_EQ(r.visible, Qty{3});
  EXPECT_EQ(r.hidden, Qty{4});
  // The refilled slice lost its time priority to Bob's order.
  EXPECT_EQ(At<Trade>(ev, 3).maker_order_id, bobs);
  EXPECT_EQ(At<Trade>(ev, 3).qty, Qty{1});
  EXPECT_EQ(Queue(kBtcUsdt, Side::kSell), (std::vector<uint64_t>{Raw(bobs), Raw(ice)}));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x4/2");
}

TEST_F(IcebergTest, ATakerWalksEverySliceAndTheLastOneFillsTheOrder) {
  const OrderId ice = RestIce(kAlice, Side::kSell, 100, 7, 3);
  Events ev = Place(MarketQty(kCarol, Side::kBuy, 7));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade IcebergRefilled Trade IcebergRefilled Trade");
  EXPECT_EQ(At<IcebergRefilled>(ev, 2).visible, Qty{3});
  EXPECT_EQ(At<IcebergRefilled>(ev, 2).hidden, Qty{1});
  EXPECT_EQ(At<IcebergRefilled>(ev, 4).visible, Qty{1});
  EXPECT_EQ(At<IcebergRefilled>(ev, 4).hidden, Qty{0});
  const Trade last = At<Trade>(ev, 5);
  EXPECT_EQ(last.qty, Qty{1});
  EXPECT_TRUE(last.maker_filled);
  EXPECT_TRUE(last.taker_filled);
  EXPECT_FALSE(engine_.FindOrder(ice).has_value());
  EXPECT_TRUE(engine_.ExportImage().icebergs.empty());
}

TEST_F(IcebergTest, AnIcebergTakerMatchesItsWholeQuantityThenShowsASlice) {
  Rest(kBob, Side::kSell, 100, 5);
  Events ev = Place(Ice(kAlice, Side::kBuy, 100, 8, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted IcebergAccepted Trade OrderRested");
  EXPECT_EQ(At<Trade>(ev, 2).qty, Qty{5});
  EXPECT_EQ(At<OrderRested>(ev, 3).remaining, Qty{3});
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "100x2/1");
  EXPECT_EQ(IcebergOf(At<OrderAccepted>(ev, 0).order_id).hidden, Qty{1});
}

TEST_F(IcebergTest, AFokCountsTheHiddenParts) {
  RestIce(kAlice, Side::kSell, 100, 10, 2);
  Events ev = Place(Limit(kBob, Side::kBuy, 100, 8, TimeInForce::kFok));
  EXPECT_EQ(All<Trade>(ev).size(), 4u);
  EXPECT_EQ(All<OrderExpired>(ev).size(), 0u);
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x2/1");
  // Three more cannot fill: two are left.
  ExpectFokExpires(Limit(kBob, Side::kBuy, 100, 3, TimeInForce::kFok));
}

TEST_F(IcebergTest, CancelAndExpiryReportTheWholeUnfilledQuantity) {
  const OrderId ice = RestIce(kAlice, Side::kSell, 100, 10, 3);
  Place(Limit(kCarol, Side::kBuy, 100, 1));
  Events ev = Cancel(kAlice, ice);
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).remaining, Qty{9});
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released, Amount{9'000});
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "");
  // Self-trade prevention expiring a resting iceberg.
  const OrderId own = RestIce(kAlice, Side::kSell, 100, 6, 2);
  ev = Place(WithStp(Limit(kAlice, Side::kBuy, 100, 1), StpMode::kExpireMaker));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired OrderRested");
  EXPECT_EQ(At<OrderExpired>(ev, 1).order_id, own);
  EXPECT_EQ(At<OrderExpired>(ev, 1).remaining, Qty{6});
}

TEST_F(IcebergTest, BadIcebergQuantitiesAreRefused) {
  ExpectReject(Ice(kAlice, Side::kSell, 100, 10, 10), RejectReason::kInvalidIcebergQty);
  ExpectReject(Ice(kAlice, Side::kSell, 100, 10, 11), RejectReason::kInvalidIcebergQty);
  ExpectReject(Ice(kAlice, Side::kSell, 100, 10, -1), RejectReason::kInvalidIcebergQty);
  PlaceOrder ioc = Ice(kAlice, Side::kSell, 100, 10, 2);
  ioc.tif = TimeInForce::kIoc;
  ExpectReject(ioc, RejectReason::kInvalidIcebergQty);
  PlaceOrder market = MarketQty(kAlice, Side::kSell, 10);
  market.iceberg_qty = Qty{2};
  ExpectReject(market, RejectReason::kInvalidIcebergQty);
  PlaceOrder small = Limit(kAlice, Side::kSell, 100, 50, TimeInForce::kGtc, kEthUsdt);
  small.iceberg_qty = Qty{4};  // ETHUSDT's minimum quantity is 5 lots
  ExpectReject(small, RejectReason::kInvalidIcebergQty);
  PlaceOrder maker = Maker(kAlice, Side::kSell, 100, 10);
  maker.iceberg_qty = Qty{5};
  Events ev = Place(maker);
  EXPECT_EQ(Types(ev), "OrderAccepted IcebergAccepted OrderRested");
  ExpectReject(AmendCmd(kAlice, At<OrderAccepted>(ev, 0).order_id, 0, 8),
               RejectReason::kInvalidOrderType);
}

}  // namespace
}  // namespace mb::engine
