// Images and replay: an exported image restores to the same state, images
// the engine could not have made are refused whole, and replaying the events
// through Apply() rebuilds the state that Process() built.
#include "engine/image.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/market.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

// Under the idempotent client order id rule, so that images hold reserved ids.
class ImageTest : public EngineTest {
 protected:
  ImageTest() {
    config_.client_order_ids = ClientOrderIds::kIdempotent;
    engine_ = Engine(config_);
  }

  // Balances, resting orders on both sides of two markets, trades, fees, a
  // reserved client id of a closed order, transfers, a non-default status.
  void Scenario() {
    Fund(kAlice);
    Fund(kBob);
    Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 5), "a-1"));
    Rest(kAlice, Side::kBuy, 99, 3);
    Rest(WithClientId(Limit(kBob, Side::kSell, 103, 2), "b-1"));
    Place(Limit(kBob, Side::kSell, 100, 2));
    Place(WithClientId(Limit(kBob, Side::kSell, 100, 3), "b-2"));
    Rest(kAlice, Side::kBuy, 100, 7, kEthUsdt);
    Rest(kBob, Side::kSell, 101, 7, kEthUsdt);
    Run(WithdrawCmd(kAlice, kEth, 5, "out-1"));
    ExpectReject(CancelCmd(kAlice, OrderId{999}), RejectReason::kUnknownOrder);
    SetStatus(kEthUsdt, MarketStatus::kCancelOnly);
  }
};

TEST_F(ImageTest, ExportThenRestoreInAFreshEngineGivesTheSameState) {
  Scenario();
  const EngineImage image = engine_.ExportImage();
  EXPECT_EQ(image.config_hash, engine_.ConfigHash());
  EXPECT_EQ(image.last_sequence, engine_.last_sequence());
  EXPECT_FALSE(image.orders.empty());
  EXPECT_FALSE(image.recent_client_ids.empty());
  EXPECT_FALSE(image.transfers.empty());

  Engine restored(config_);
  Status s = restored.Restore(image);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(restored.StateHash(), engine_.StateHash());
  EXPECT_EQ(Dump(restored.ExportImage()), Dump(image));
  EXPECT_EQ(restored.last_sequence(), engine_.last_sequence());
  EXPECT_EQ(restored.next_trade_id(), engine_.next_trade_id());
  EXPECT_EQ(restored.balance(kAlice, kUsdt), Bal(kAlice, kUsdt));
  EXPECT_EQ(restored.market_status(kEthUsdt), MarketStatus::kCancelOnly);
  EXPECT_TRUE(restored.CheckInvariants().ok());

  // Both go on identically: same events for the same command.
  const Command next{ts_, PlaceOrder(WithClientId(Limit(kBob, Side::kSell, 99, 9), "b-1"))};
  Events a, b;
  restored.Process(next, &b);
  engine_.Process(next, &a);
  journal_.insert(journal_.end(), a.begin(), a.end());
  EXPECT_EQ(Types(a), Types(b));
  EXPECT_EQ(Types(a), "Rejected");  // "b-1" is still open
  const Command next2{ts_ + 1, PlaceOrder(Limit(kBob, Side::kSell, 99, 9))};
  a.clear();
  b.clear();
  restored.Process(next2, &b);
  engine_.Process(next2, &a);
  journal_.insert(journal_.end(), a.begin(), a.end());
  EXPECT_EQ(Types(a), "OrderAccepted Trade OrderRested");  // 3 lots at 99, 6 rest
  EXPECT_EQ(Types(a), Types(b));
  EXPECT_EQ(restored.StateHash(), engine_.StateHash());
}

TEST_F(ImageTest, RestoreWithAnotherConfigurationFailsAndChangesNothing) {
  Scenario();
  EngineImage image = engine_.ExportImage();
  image.config_hash ^= 1;
  Engine fresh(config_);
  const uint64_t fresh_hash = fresh.StateHash();
  EXPECT_FALSE(fresh.Restore(image).ok());
  EXPECT_EQ(fresh.StateHash(), fresh_hash);

  // Restoring over a live engine fails the same way and leaves it alone.
  const uint64_t live_hash = engine_.StateHash();
  const std::string live = Dump(engine_.ExportImage());
  EXPECT_FALSE(engine_.Restore(image).ok());
  EXPECT_EQ(engine_.StateHash(), live_hash);
  EXPECT_EQ(Dump(engine_.ExportImage()), live);

  // An engine with a different configuration refuses a genuine image.
  EngineConfig other = MakeConfig();
  other.markets[0].taker_fee_bps = 25;
  ASSERT_TRUE(other.Validate().ok());
  Engine different(other);
  EXPECT_NE(different.ConfigHash(), engine_.ConfigHash());
  const uint64_t different_hash = different.StateHash();
  EXPECT_FALSE(different.Restore(engine_.ExportImage()).ok());
  EXPECT_EQ(different.StateHash(), different_hash);
}

// Images the engine could never have exported are refused, whole, and the
// engine restored into keeps its state: ids beyond the sequence, values beyond
// the market's limits, impossible totals, duplicates, non-canonical order.
TEST_F(ImageTest, RestoreRefusesImagesTheEngineCouldNotHaveMade) {
  Scenario();
  const EngineImage good = engine_.ExportImage();
  ASSERT_GE(good.orders.size(), 2u);
  ASSERT_FALSE(good.balances.empty());
  const int64_t max_price = config_.markets[0].max_price.value;
  const std::vector<std::pair<std::string, std::function<void(EngineImage&)>>> corruptions = {
      {"order id beyond the sequence",
       [](EngineImage& i) { i.orders[0].id = OrderId{Raw(i.last_sequence) + 1}; }},
      {"order id 0", [](EngineImage& i) { i.orders[0].id = OrderId{0}; }},
      {"price above max_price",
       [&](EngineImage& i) { i.orders[0].terms.price = Price{max_price + 1}; }},
      {"remaining above quantity",
       [](EngineImage& i) { i.orders[0].remaining = Qty{i.orders[0].terms.qty.value + 1}; }},
      {"huge sell remaining",
       [](EngineImage& i) {
         for (auto& o : i.orders) {
           if (o.terms.side == Side::kSell) o.terms.qty = o.remaining = Qty{int64_t{1} << 60};
         }
       }},
      {"a MARKET order resting",
       [](EngineImage& i) { i.orders[0].terms.type = OrderType::kMarket; }},
      {"an IOC order resting", [](EngineImage& i) { i.orders[0].terms.tif = TimeInForce::kIoc; }},
      {"supply above what the balances hold",
       [](EngineImage& i) { i.asset_totals[0].supply = Amount{INT64_MAX}; }},
      {"negative supply", [](EngineImage& i) { i.asset_totals[0].supply = Amount{-INT64_MAX}; }},
      {"duplicated balance", [](EngineImage& i) { i.balances.push_back(i.balances.back()); }},
      {"two open orders with one client id",
       [](EngineImage& i) {
         i.orders[1].has_client_id = true;
         i.orders[1].client_id = i.orders[0].client_id;
         i.orders[1].terms.account = i.orders[0].terms.account;
         i.orders[0].has_client_id = true;
       }},
      {"orders out of priority order", [](EngineImage& i) { std::swap(i.orders[0], i.orders[1]); }},
      {"next trade id 0", [](EngineImage& i) { i.next_trade_id = TradeId{0}; }},
      {"transfer id beyond the sequence",
       [](EngineImage& i) { i.transfers[0].id = TransferId{Raw(i.last_sequence) + 5}; }},
  };
  for (const auto& [name, corrupt] : corruptions) {
    EngineImage bad = good;
    corrupt(bad);
    Engine fresh(config_);
    const uint64_t before = fresh.StateHash();
    EXPECT_FALSE(fresh.Restore(bad).ok()) << name;
    EXPECT_EQ(fresh.StateHash(), before) << name;
  }
  Engine fresh(config_);
  EXPECT_TRUE(fresh.Restore(good).ok());
}

// An image written before the rule was a setting (the idempotent rule, under
// the hash Binance's rule keeps) restores under Binance's rule: its reserved
// ids are free.
TEST_F(ImageTest, ReservedIdsOfAnOlderImageAreFreeUnderBinancesRule) {
  Scenario();
  EngineImage image = engine_.ExportImage();
  ASSERT_FALSE(image.recent_client_ids.empty());
  EngineConfig binance = config_;
  binance.client_order_ids = ClientOrderIds::kBinance;
  Engine restored(binance);
  image.config_hash = restored.ConfigHash();
  ASSERT_NE(image.config_hash, engine_.ConfigHash());
  Status s = restored.Restore(image);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(restored.ExportImage().recent_client_ids.empty());
  // "a-1" was filled: reserved here, free there.
  const Command again{ts_, PlaceOrder(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "a-1"))};
  Events a, b;
  engine_.Process(again, &a);
  restored.Process(again, &b);
  journal_.insert(journal_.end(), a.begin(), a.end());
  EXPECT_EQ(Types(a), "Rejected");
  EXPECT_EQ(Types(b), "OrderAccepted OrderRested");
}

TEST_F(ImageTest, ReplayingTheEventsThroughApplyGivesTheSameState) {
  Scenario();
  Engine replayed(config_);
  EXPECT_NE(replayed.StateHash(), engine_.StateHash());
  for (const Event& e : journal_) replayed.Apply(e);
  EXPECT_EQ(replayed.StateHash(), engine_.StateHash());
  EXPECT_EQ(replayed.last_sequence(), engine_.last_sequence());  // rejects count too
  EXPECT_EQ(replayed.next_trade_id(), engine_.next_trade_id());
  EXPECT_TRUE(replayed.CheckInvariants().ok());
  // The replayed engine continues the sequence: the next order id is the same.
  const Command next{ts_, PlaceOrder(Limit(kCarol, Side::kBuy, 100, 1))};
  Events a, b;
  replayed.Process(next, &b);
  Events live = Run(next.body);
  EXPECT_EQ(Types(live), Types(b));
  EXPECT_EQ(replayed.StateHash(), engine_.StateHash());
}

TEST_F(ImageTest, StateHashDependsOnHistory) {
  Engine other(config_);
  EXPECT_EQ(other.StateHash(), engine_.StateHash());
  Scenario();
  EXPECT_NE(other.StateHash(), engine_.StateHash());
}

}  // namespace
}  // namespace mb::engine
