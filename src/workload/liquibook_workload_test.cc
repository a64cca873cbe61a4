// Liquibook's perf-test stream: the orders are Liquibook's, every command is
// accepted, the replay reproduces the generator's shadow engine, and the book
// stays under its bound (and grows, as Liquibook's does, without one).
#include "workload/liquibook_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <variant>

namespace mb::bench {
namespace {

using engine::Command;
using engine::Engine;
using engine::EventBuffer;
using engine::EventType;
using engine::Side;

struct Replay {
  uint64_t events = 0;
  uint64_t trades = 0;
  uint64_t rejected = 0;
  std::size_t max_open = 0;
  std::size_t final_open = 0;
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
    for (const auto& ev : buf) {
      r.trades += ev.type() == EventType::kTrade;
      r.rejected += ev.type() == EventType::kRejected;
    }
    buf.clear();
    r.max_open = std::max(r.max_open, e.open_orders());
  }
  r.final_open = e.open_orders();
  r.state_hash = e.StateHash();
  EXPECT_TRUE(e.CheckInvariants().ok());
  return r;
}

TEST(LiquibookWorkload, OrdersAreLiquibooks) {
  LiquibookSpec spec;
  spec.commands = 20'000;
  Workload w = GenerateLiquibookStream(spec);
  ASSERT_EQ(w.commands.size(), spec.commands);
  EXPECT_EQ(w.stats.gtc + w.stats.cancel, spec.commands);
  EXPECT_EQ(w.stats.ioc + w.stats.move, 0u);
  const engine::MarketSpec& m = w.config.markets[0];
  EXPECT_EQ(m.tick_units, 1'000'000);  // 1 USDT: price 1880 is 1880 ticks
  EXPECT_EQ(m.lot_units, 100'000);     // 0.001 BTC: quantity 100 is 100 lots
  uint64_t inserts = 0;
  for (const Command& c : w.commands) {
    const auto* p = std::get_if<engine::PlaceOrder>(&c.body);
    if (p == nullptr) {
      ASSERT_TRUE(std::holds_alternative<engine::CancelOrder>(c.body));
      continue;
    }
    // Alternating buy, sell, ... counted over the inserts only.
    EXPECT_EQ(p->side, inserts % 2 == 0 ? Side::kBuy : Side::kSell);
    ++inserts;
    EXPECT_EQ(p->type, engine::OrderType::kLimit);
    EXPECT_EQ(p->tif, engine::TimeInForce::kGtc);
    EXPECT_TRUE(p->client_order_id.empty());
    const int64_t low = p->side == Side::kBuy ? 1880 : 1884;
    EXPECT_GE(p->price.value, low);
    EXPECT_LE(p->price.value, low + 9);
    EXPECT_EQ(p->qty.value % 100, 0);
    EXPECT_GE(p->qty.value, 100);
    EXPECT_LE(p->qty.value, 1000);
  }
  EXPECT_EQ(inserts, w.stats.gtc);
}

TEST(LiquibookWorkload, ReplayMatchesShadowAndStaysBounded) {
  LiquibookSpec spec;
  spec.commands = 200'000;
  spec.max_level_orders = 50;
  Workload w = GenerateLiquibookStream(spec);
  EXPECT_EQ(w.stats.rejected, 0u);
  Replay r = ReplayOf(w);
  EXPECT_EQ(r.rejected, 0u);
  EXPECT_EQ(r.events, w.stats.events);
  EXPECT_EQ(r.trades, w.stats.trades);
  EXPECT_EQ(r.max_open, w.stats.max_open_orders);
  EXPECT_EQ(r.final_open, w.stats.open_orders_by_tenth.back());
  EXPECT_LE(r.max_open, 20u * 50u);
  // The cap is reached: the book is full, not empty, for most of the stream.
  EXPECT_GT(w.stats.open_orders_by_tenth[4], 10u * 50u);
  // Liquibook's shape: about a quarter of the inserts trade on arrival and
  // about half end fully filled.
  const double inserts = static_cast<double>(w.stats.gtc);
  EXPECT_NEAR(static_cast<double>(w.stats.trading_commands) / inserts, 0.275, 0.02);
  EXPECT_NEAR(static_cast<double>(w.stats.filled_orders) / inserts, 0.5, 0.05);
  // Same seed, same stream: the same final state.
  EXPECT_EQ(ReplayOf(GenerateLiquibookStream(spec)).state_hash, r.state_hash);
}

TEST(LiquibookWorkload, WithoutTheBoundTheBookGrowsAsLiquibooks) {
  LiquibookSpec spec;
  spec.commands = 100'000;
  spec.max_level_orders = 0;
  Workload w = GenerateLiquibookStream(spec);
  EXPECT_EQ(w.stats.cancel, 0u);
  Replay r = ReplayOf(w);
  EXPECT_EQ(r.rejected, 0u);
  // About half of the inserts stay in the book, and it keeps growing.
  EXPECT_NEAR(static_cast<double>(r.final_open) / static_cast<double>(spec.commands), 0.5, 0.05);
  EXPECT_GT(w.stats.open_orders_by_tenth[9], w.stats.open_orders_by_tenth[4] * 3 / 2);
}

}  // namespace
}  // namespace mb::bench
