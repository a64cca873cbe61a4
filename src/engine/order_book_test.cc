// The order book's structure: levels, their FIFO queues and totals, through
// the engine's depth and queue queries and on OrderBook itself.
#include "engine/order_book.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/strong.h"
#include "engine/engine.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

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

// OrderBook on its own: one market, bids only.
class OrderBookUnitTest : public ::testing::Test {
 protected:
  // Opens a GTC buy of `qty` lots at `price` for `account` and rests it.
  uint32_t Rest(uint64_t id, uint32_t account, int64_t price, int64_t qty) {
    const uint32_t i = book_.Allocate();
    Order& o = book_.order(i);
    o.id = OrderId{id};
    o.account = AccountId{account};
    o.market = MarketId{0};
    o.side = Side::kBuy;
    o.price = Price{price};
    o.qty_or_budget = qty;
    o.remaining = Qty{qty};
    book_.Open(i);
    book_.InsertIntoBook(i);
    return i;
  }
  // (price x total / orders) of each bid level, best first.
  std::string Bids() const {
    std::string s;
    for (const LevelView& l : book_.Depth(MarketId{0}, Side::kBuy, 100)) {
      if (!s.empty()) s += ' ';
      s += std::to_string(l.price.value) + 'x' + std::to_string(l.qty.value) + '/' +
           std::to_string(l.orders);
    }
    return s;
  }
  std::vector<uint64_t> Queue() const {
    std::vector<uint64_t> ids;
    for (const OrderView& o : book_.Orders(MarketId{0}, Side::kBuy)) ids.push_back(Raw(o.id));
    return ids;
  }

  OrderBook book_{1, 4, 64, 64};
};

TEST_F(OrderBookUnitTest, LevelsKeepPriceThenTimeOrderAndTheirTotals) {
  Rest(1, 1, 100, 2);
  Rest(2, 2, 101, 3);
  const uint32_t third = Rest(3, 1, 100, 4);
  EXPECT_EQ(Bids(), "101x3/1 100x6/2");
  EXPECT_EQ(Queue(), (std::vector<uint64_t>{2, 1, 3}));
  EXPECT_EQ(book_.Best(MarketId{0}, Side::kBuy), Price{101});
  EXPECT_FALSE(book_.Best(MarketId{0}, Side::kSell).has_value());
  EXPECT_FALSE(book_.Best(MarketId{1}, Side::kBuy).has_value());  // no such market
  EXPECT_EQ(book_.level_count(MarketId{0}, Side::kBuy), 2u);
  EXPECT_EQ(book_.open_orders(), 3u);

  book_.Reduce(third, Qty{3});  // keeps its place
  EXPECT_EQ(book_.order(third).remaining, Qty{1});
  EXPECT_EQ(Bids(), "101x3/1 100x3/2");
  EXPECT_EQ(Queue(), (std::vector<uint64_t>{2, 1, 3}));

  // Out of the book but still open (an amended order about to be matched).
  book_.RemoveFromBook(book_.Lookup(OrderId{2}));
  EXPECT_EQ(Bids(), "100x3/2");
  EXPECT_EQ(book_.FindLevel(MarketId{0}, Side::kBuy, Price{101}), kNil);
  EXPECT_EQ(book_.open_orders(), 3u);
  EXPECT_TRUE(book_.FindOrder(OrderId{2}).has_value());
  // Back in at the tail of a level.
  Order& two = book_.order(book_.Lookup(OrderId{2}));
  two.price = Price{100};
  book_.InsertIntoBook(book_.Lookup(OrderId{2}));
  EXPECT_EQ(Queue(), (std::vector<uint64_t>{1, 3, 2}));
}

TEST_F(OrderBookUnitTest, ClosedOrdersLeaveEveryIndexAndTheirSlotsAreReused) {
  const uint32_t a = Rest(1, 1, 100, 1);
  Rest(2, 1, 99, 1);
  Rest(3, 2, 100, 1);
  EXPECT_EQ(book_.Lookup(OrderId{1}), a);  // remembered
  book_.Close(a);
  EXPECT_EQ(book_.Lookup(OrderId{1}), kNil);  // the remembered slot no longer answers
  EXPECT_FALSE(book_.FindOrder(OrderId{1}).has_value());
  EXPECT_EQ(book_.open_orders(), 2u);
  EXPECT_EQ(Bids(), "100x1/1 99x1/1");
  // Account 1's open orders: only order 2 is left.
  std::vector<uint64_t> of_account;
  for (uint32_t i = book_.first_of_account(AccountId{1}); i != kNil; i = book_.order(i).acct_next) {
    of_account.push_back(Raw(book_.order(i).id));
  }
  EXPECT_EQ(of_account, (std::vector<uint64_t>{2}));
  // The next order takes the freed slot.
  EXPECT_EQ(Rest(4, 3, 98, 1), a);
  EXPECT_EQ(Queue(), (std::vector<uint64_t>{3, 2, 4}));
}

}  // namespace
}  // namespace mb::engine
