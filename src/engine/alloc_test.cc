// The hot path allocates nothing: once an engine is built with pools sized for
// its load, placing, matching, amending and canceling orders never calls
// operator new. Counted with a replacement global operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "common/counting_new.h"
#include "engine/engine.h"

namespace mb::engine {
namespace {

EngineConfig Config() {
  EngineConfig c;
  c.assets = {{"BTC", 8}, {"USDT", 8}};
  MarketSpec m;
  m.symbol = "BTCUSDT";
  m.base = AssetId{0};
  m.quote = AssetId{1};
  m.tick_units = 1'000'000;
  m.lot_units = 1'000;
  m.min_qty = Qty{1};
  m.max_qty = Qty{1'000'000};
  m.max_price = Price{100'000'000};
  m.maker_fee_bps = 10;
  m.taker_fee_bps = 20;
  c.markets = {m};
  c.max_accounts = 64;
  c.expected_open_orders = 4096;
  MB_CHECK(c.Validate().ok());
  return c;
}

TEST(EngineAllocations, HotPathAllocatesNothingOnceWarm) {
  Engine engine(Config());
  EventBuffer events;
  events.reserve(1024);
  int64_t ts = 1;
  auto run = [&](CommandBody body) {
    events.clear();
    engine.Process(Command{ts++, body}, &events);
    return events.front().type();
  };
  for (uint32_t a = 1; a < 64; ++a) {
    const std::string ref = "fund-" + std::to_string(a);
    ASSERT_EQ(
        run(Deposit{AccountId{a}, AssetId{0}, Amount{1'000'000'000'000}, TransferRef::From(ref)}),
        EventType::kDeposited);
    ASSERT_EQ(run(Deposit{AccountId{a}, AssetId{1}, Amount{1'000'000'000'000'000},
                          TransferRef::From(ref + "u")}),
              EventType::kDeposited);
  }

  // A deterministic mix around a mid price: resting orders on both sides,
  // crossing IOC and GTC orders, price moves, quantity cuts and cancels.
  uint64_t x = 88172645463325252ull;
  auto rnd = [&](uint64_t n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x % n;
  };
  std::vector<OrderId> open;
  open.reserve(8192);
  auto step = [&]() {
    const uint64_t r = rnd(100);
    const AccountId acct{static_cast<uint32_t>(1 + rnd(63))};
    const bool full = open.size() > 1500;  // keep the book well inside its pools
    if ((r < 40 && !full) || open.size() < 200) {
      PlaceOrder p{};
      p.account = acct;
      p.side = rnd(2) ? Side::kBuy : Side::kSell;
      const int64_t offset = static_cast<int64_t>(rnd(300));
      p.price = Price{p.side == Side::kBuy ? 3'000'000 - 1 - offset : 3'000'000 + offset};
      if (rnd(10) == 0) p.price = Price{p.side == Side::kBuy ? 3'000'200 : 2'999'800};  // crosses
      p.tif = rnd(4) == 0 ? TimeInForce::kIoc : TimeInForce::kGtc;
      p.qty = Qty{static_cast<int64_t>(1 + rnd(20))};
      run(p);
      if (events.back().type() == EventType::kOrderRested) {
        open.push_back(std::get<OrderRested>(events.back().body).order_id);
      }
    } else if (r < 70 || full) {
      const std::size_t k = rnd(open.size());
      const auto o = engine.FindOrder(open[k]);
      if (o) {
        run(CancelOrder{o->terms.account, MarketId{0}, o->id, {}, {}});
      }
      open[k] = open.back();
      open.pop_back();
    } else {
      const auto o = engine.FindOrder(open[rnd(open.size())]);
      if (o) {
        const int64_t move = static_cast<int64_t>(rnd(9)) - 4;
        const Price np{std::max<int64_t>(1, o->terms.price.value + move)};
        run(AmendOrder{o->terms.account, MarketId{0}, o->id, {}, np, Qty{0}, false});
      }
    }
  };
  for (int i = 0; i < 20'000; ++i) step();  // warm-up: pools and tables reach size
  ASSERT_TRUE(engine.CheckInvariants().ok());

  const long before = mb::testing::g_allocations.load();
  for (int i = 0; i < 100'000; ++i) step();
  const long allocated = mb::testing::g_allocations.load() - before;
  EXPECT_EQ(allocated, 0) << "operator new called on the hot path";
  EXPECT_LT(engine.open_orders(), 4096u);
  ASSERT_TRUE(engine.CheckInvariants().ok());
}

}  // namespace
}  // namespace mb::engine
