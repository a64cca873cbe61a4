// Identities: every command consumes one sequence number, an order's id is
// the sequence of the command that placed it, a transfer's likewise, and
// trade ids are dense across markets and commands.
#include <gtest/gtest.h>

#include "common/strong.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

// An empty engine; each test funds what it needs.
class SequenceTest : public EngineTest {};

TEST_F(SequenceTest, FixtureConfigDerivesNotionalPerTickLot) {
  EXPECT_EQ(config_.markets[0].notional_per_tick_lot, 10);
  EXPECT_EQ(config_.markets[1].notional_per_tick_lot, 1);
  EXPECT_EQ(config_.markets[2].notional_per_tick_lot, 1);
  EXPECT_EQ(Raw(engine_.last_sequence()), 0u);
  EXPECT_EQ(Raw(engine_.next_trade_id()), 1u);
  EXPECT_EQ(engine_.ConfigHash(), Engine(MakeConfig()).ConfigHash());
}

TEST_F(SequenceTest, EveryCommandConsumesOneSequenceAndOrderIdIsTheSequence) {
  Events ev = Run(DepositCmd(kAlice, kUsdt, 100'000, "d1"));  // seq 1
  EXPECT_EQ(At<Deposited>(ev, 0).transfer_id, TransferId{1});
  ExpectReject(Limit(kAlice, Side::kBuy, 0, 1), RejectReason::kInvalidPrice);  // seq 2
  Credit(kBob, kBtc, 100'000);                                                 // seq 3

  ev = Place(Limit(kAlice, Side::kBuy, 100, 3));  // seq 4
  EXPECT_EQ(Types(ev), "OrderAccepted OrderRested");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).order_id, OrderId{4});
  EXPECT_EQ(ev[0].seq, Sequence{4});
  EXPECT_EQ(At<OrderRested>(ev, 1).order_id, OrderId{4});

  ExpectReject(CancelCmd(kAlice, OrderId{99}), RejectReason::kUnknownOrder);  // seq 5

  ev = Place(Limit(kBob, Side::kSell, 100, 1));  // seq 6: trade 1
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).order_id, OrderId{6});
  EXPECT_EQ(At<Trade>(ev, 1).trade_id, TradeId{1});
  EXPECT_EQ(At<Trade>(ev, 1).taker_order_id, OrderId{6});
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, OrderId{4});

  ev = Place(Limit(kBob, Side::kSell, 100, 2));  // seq 7: trades 2 (rest of 4)
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<Trade>(ev, 1).trade_id, TradeId{2});
  EXPECT_EQ(Raw(engine_.next_trade_id()), 3u);

  ev = SetStatus(kEthUsdt, MarketStatus::kHalted);  // seq 8
  EXPECT_EQ(Types(ev), "MarketStatusChanged");
  ev = Run(WithdrawCmd(kAlice, kUsdt, 10, "w1"));  // seq 9
  EXPECT_EQ(At<Withdrawn>(ev, 0).transfer_id, TransferId{9});
  EXPECT_EQ(Raw(engine_.last_sequence()), 9u);
}

TEST_F(SequenceTest, TradeIdsAreDenseAcrossMarketsAndCommands) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kAlice, Side::kBuy, 100, 1);
  Rest(kAlice, Side::kBuy, 101, 1);
  Rest(kAlice, Side::kBuy, 100, 10, kEthUsdt);
  Events ev = Place(Limit(kBob, Side::kSell, 100, 2));
  EXPECT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_EQ(At<Trade>(ev, 1).trade_id, TradeId{1});
  EXPECT_EQ(At<Trade>(ev, 2).trade_id, TradeId{2});
  ev = Place(Limit(kBob, Side::kSell, 100, 10, TimeInForce::kGtc, kEthUsdt));
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<Trade>(ev, 1).trade_id, TradeId{3});
  EXPECT_EQ(At<Trade>(ev, 1).market, kEthUsdt);
  EXPECT_EQ(Raw(engine_.next_trade_id()), 4u);
}

}  // namespace
}  // namespace mb::engine
