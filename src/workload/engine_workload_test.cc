// The exchange-core mix and its conditional variant: every command is
// accepted, a replay on a fresh engine reproduces the generator's shadow
// (events by type, final state), the conditional share is what the spec asks,
// orders trigger, and the waiting orders and icebergs stay within their bounds.
#include "workload/engine_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <variant>

namespace mb::bench {
namespace {

using engine::Command;
using engine::Engine;
using engine::EventBuffer;
using engine::EventType;
using engine::OrderType;

struct Replay {
  std::array<uint64_t, kEventTypeCount> by_type{};
  uint64_t events = 0;
  uint64_t state_hash = 0;
};

Replay ReplayOf(const Workload& w) {
  Engine e(w.config);
  EventBuffer buf;
  for (const Command& c : w.setup) {
    e.Process(c, &buf);
    EXPECT_NE(buf.front().type(), EventType::kRejected);
    buf.clear();
  }
  Replay r;
  for (const Command& c : w.commands) {
    e.Process(c, &buf);
    r.events += buf.size();
    for (const auto& ev : buf) ++r.by_type[static_cast<std::size_t>(ev.type())];
    buf.clear();
  }
  r.state_hash = e.StateHash();
  EXPECT_TRUE(e.CheckInvariants().ok());
  return r;
}

uint64_t Count(const Replay& r, EventType t) { return r.by_type[static_cast<std::size_t>(t)]; }

TEST(ExchangeCoreMix, ReplayIsTheShadowAndHasNoConditionalOrders) {
  MixSpec spec;
  spec.commands = 30'000;
  Workload w = GenerateExchangeCoreMix(spec);
  ASSERT_EQ(w.commands.size(), spec.commands);
  EXPECT_EQ(w.stats.rejected, 0u);
  EXPECT_EQ(w.stats.gtc + w.stats.ioc + w.stats.cancel + w.stats.move, spec.commands);
  const Replay r = ReplayOf(w);
  EXPECT_EQ(r.events, w.stats.events);
  EXPECT_EQ(r.by_type, w.stats.events_by_type);
  EXPECT_NE(w.stats.state_hash, 0u);
  EXPECT_EQ(r.state_hash, w.stats.state_hash);
  for (EventType t : {EventType::kOrderArmed, EventType::kOrderTriggered,
                      EventType::kIcebergAccepted, EventType::kIcebergRefilled}) {
    EXPECT_EQ(Count(r, t), 0u) << engine::ToString(t);
  }
  for (const Command& c : w.commands) {
    if (const auto* p = std::get_if<engine::PlaceOrder>(&c.body)) {
      EXPECT_EQ(p->type, OrderType::kLimit);
      EXPECT_EQ(p->iceberg_qty.value, 0);
    }
  }
}

// The conditional workload's price level (300,000 ticks instead of
// 3,000,000) changes no decision of the plain mix: with no conditional share
// it emits the same events, type by type.
TEST(ExchangeCoreMix, PriceLevelChangesNoEvent) {
  MixSpec a;
  a.commands = 20'000;
  MixSpec b = ConditionalMixSpec();
  b.conditional_pct = 0;
  b.commands = a.commands;
  const Workload wa = GenerateExchangeCoreMix(a);
  const Workload wb = GenerateExchangeCoreMix(b);
  EXPECT_EQ(wa.stats.events_by_type, wb.stats.events_by_type);
  EXPECT_EQ(wa.stats.trades, wb.stats.trades);
  EXPECT_EQ(wa.stats.move, wb.stats.move);
}

TEST(ConditionalMix, ReplayIsTheShadowSharesAndBounds) {
  MixSpec spec = ConditionalMixSpec();
  spec.commands = 60'000;
  Workload w = GenerateExchangeCoreMix(spec);
  ASSERT_EQ(w.commands.size(), spec.commands);
  EXPECT_EQ(w.stats.rejected, 0u);
  const ConditionalStats& cs = w.stats.conditional;

  // Every command is one draw: the mix's, or the conditional share's (a
  // placement, or the cancel of the oldest at a bound).
  const uint64_t conditional = cs.stops + cs.icebergs + cs.stop_cancels + cs.iceberg_cancels;
  EXPECT_EQ(w.stats.gtc + w.stats.ioc + w.stats.cancel + w.stats.move + conditional, spec.commands);
  const double share = static_cast<double>(conditional) / static_cast<double>(spec.commands);
  EXPECT_NEAR(share, 0.20, 0.01);
  EXPECT_EQ(cs.stop_market + cs.stop_limit, cs.stops);
  EXPECT_GT(cs.trailing, 0u);

  // A realistic share triggers, of every kind; icebergs refill.
  EXPECT_GT(cs.triggered, cs.stops / 10);
  EXPECT_LT(cs.triggered, cs.stops);
  EXPECT_GT(cs.triggered_market, 0u);
  EXPECT_GT(cs.triggered_limit, 0u);
  EXPECT_GT(cs.triggered_trailing, 0u);
  EXPECT_GT(cs.triggered_rested, 0u);
  EXPECT_GT(cs.iceberg_refills, 0u);

  // Bounded.
  EXPECT_LE(cs.max_waiting, spec.max_waiting);
  EXPECT_LE(cs.mean_icebergs, static_cast<double>(spec.max_icebergs));

  // The replay reproduces the shadow.
  const Replay r = ReplayOf(w);
  EXPECT_EQ(r.events, w.stats.events);
  EXPECT_EQ(r.by_type, w.stats.events_by_type);
  EXPECT_EQ(r.state_hash, w.stats.state_hash);
  EXPECT_EQ(Count(r, EventType::kRejected), 0u);
  EXPECT_EQ(Count(r, EventType::kOrderTriggered), cs.triggered);
  EXPECT_EQ(Count(r, EventType::kOrderArmed), cs.stops);
  EXPECT_EQ(Count(r, EventType::kIcebergAccepted), cs.icebergs);
  EXPECT_EQ(Count(r, EventType::kIcebergRefilled), cs.iceberg_refills);

  // Orders of every conditional type, each with a stop price or a trailing
  // delta; icebergs are GTC limits with a slice below their quantity.
  std::array<uint64_t, 7> by_order_type{};
  for (const Command& c : w.commands) {
    const auto* p = std::get_if<engine::PlaceOrder>(&c.body);
    if (p == nullptr) continue;
    ++by_order_type[static_cast<std::size_t>(p->type)];
    if (engine::IsConditional(p->type)) {
      EXPECT_TRUE(p->stop_price.value > 0 || p->trailing_delta > 0);
    } else if (p->iceberg_qty.value != 0) {
      EXPECT_EQ(p->type, OrderType::kLimit);
      EXPECT_EQ(p->tif, engine::TimeInForce::kGtc);
      EXPECT_LT(p->iceberg_qty, p->qty);
    }
  }
  for (OrderType t : {OrderType::kStopLoss, OrderType::kStopLossLimit, OrderType::kTakeProfit,
                      OrderType::kTakeProfitLimit}) {
    EXPECT_GT(by_order_type[static_cast<std::size_t>(t)], 0u) << engine::ToString(t);
  }
}

TEST(ConditionalMix, SameSpecSameStream) {
  MixSpec spec = ConditionalMixSpec();
  spec.commands = 10'000;
  const Workload a = GenerateExchangeCoreMix(spec);
  const Workload b = GenerateExchangeCoreMix(spec);
  EXPECT_EQ(a.stats.state_hash, b.stats.state_hash);
  EXPECT_EQ(a.stats.events_by_type, b.stats.events_by_type);
  spec.seed = 2;
  const Workload c = GenerateExchangeCoreMix(spec);
  EXPECT_NE(a.stats.state_hash, c.stats.state_hash);
}

}  // namespace
}  // namespace mb::bench
