// The order book's structure: levels, their FIFO queues and totals, as the
// engine's depth and queue queries show them.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/strong.h"
#include "engine/engine.h"
#include "engine/engine_test_support.h"
#include "engine/types.h"

namespace mb::engine {
namespace {

// An empty engine; each test funds what it needs.
class OrderBookTest : public EngineTest {};

// An order joining an existing level deep in the book must join that level's
// queue, never open a second level at the same price.
TEST_F(OrderBookTest, OrderJoinsAnExistingLevelDeepInTheBook) {
  Fund(kAlice);
  std::vector<OrderId> ids;
  for (int64_t p = 100; p <= 130; ++p) ids.push_back(Rest(kAlice, Side::kBuy, p, 1));
  const OrderId deep = Rest(kAlice, Side::kBuy, 100, 2);
  const auto depth = engine_.Depth(kBtcUsdt, Side::kBuy, 100);
  ASSERT_EQ(depth.size(), 31u);
  EXPECT_EQ(depth.back().price, Price{100});
  EXPECT_EQ(depth.back().qty, Qty{3});
  EXPECT_EQ(depth.back().orders, 2u);
  const auto queue = Queue(kBtcUsdt, Side::kBuy);
  ASSERT_EQ(queue.size(), 32u);
  EXPECT_EQ(queue[30], Raw(ids.front()));
  EXPECT_EQ(queue[31], Raw(deep));
  // Emptying the deep level removes exactly it.
  Cancel(kAlice, ids.front());
  Cancel(kAlice, deep);
  EXPECT_EQ(engine_.Depth(kBtcUsdt, Side::kBuy, 100).size(), 30u);
  EXPECT_EQ(engine_.Depth(kBtcUsdt, Side::kBuy, 100).back().price, Price{101});
  EXPECT_TRUE(engine_.CheckInvariants().ok());
}

}  // namespace
}  // namespace mb::engine
