// The engine's order books: for every market a bid side and an ask side of
// price levels, each level a FIFO queue of resting orders (price-time
// priority). All markets draw their orders and levels from one pool each,
// sized once for EngineConfig::expected_open_orders, so that placing,
// matching, amending and canceling allocate nothing once warm.
//
// An order is open from its acceptance (Allocate, then Open) until it fills,
// is canceled or expires (Close); it sits in a price level only while it
// rests (InsertIntoBook / RemoveFromBook): a taker being matched, or an
// amended order about to be matched again, is open but in no level. Orders
// and levels are addressed by pool index (kNil: none); an order's index is
// found from its id through an open-addressing table. Each account's open
// orders are linked too, for cancel-all.
//
// This is a part of Engine (engine/engine.h), which decides what happens to
// the book and applies it here; other modules see the book only through the
// engine's events and queries. The operations on the matching path are
// defined in this header so that decide and evolve (engine.cc) compile them in
// place; the queries that copy views out are in order_book.cc.
//
// Thread safety: none; owned by the engine thread, like the Engine holding it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/strong.h"
#include "engine/engine.h"
#include "engine/image.h"
#include "engine/internal/book_side.h"
#include "engine/internal/flat_map.h"
#include "engine/internal/node_pool.h"
#include "engine/order_terms.h"
#include "engine/types.h"

namespace mb::engine {

// The index of no order and no level.
inline constexpr uint32_t kNil = UINT32_MAX;

// One open order, resting or being matched. 96 bytes; pooled, addressed by
// index. Decide reads it; evolve changes its fields.
//
// It keeps its terms (engine/order_terms.h) as loose fields rather than an
// embedded OrderTerms, for two reasons. Layout: account, market and the
// one-byte fields pack into the tail after the links, where an embedded
// OrderTerms would bring its own 6 bytes of padding (after stp) and make a
// slot 104 bytes, 8 more for every open order in the pool. Meaning: a
// quote-budget MARKET order keeps its budget in qty_or_budget, where the
// terms have the quantity. terms() copies them out for the views and the
// snapshot.
struct Order {
  OrderId id{};  // 0 while the slot is free
  Price price{};
  // Total ordered (lots). A quote-budget MARKET order (by_quote) has no lot
  // size and keeps here, in quote units, what it may still spend (buy) or has
  // still to receive (sell); such an order never rests.
  int64_t qty_or_budget = 0;
  Qty remaining{};  // lots still open
  Amount locked{};  // this order's share of the account's locked balance
  int64_t created_ns = 0;
  Key128 client_id{};
  uint32_t prev = kNil;       // FIFO neighbours within the price level
  uint32_t next = kNil;       // also the free-list link of a pooled slot
  uint32_t acct_prev = kNil;  // the account's open orders
  uint32_t acct_next = kNil;
  uint32_t level = kNil;  // the price level, kNil while not in the book
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  OrderType type = OrderType::kLimit;
  TimeInForce tif = TimeInForce::kGtc;
  StpMode stp = StpMode::kNone;
  bool has_client_id = false;
  bool by_quote = false;

  Qty qty() const noexcept { return Qty{qty_or_budget}; }
  // As accepted (a quote-budget MARKET order has qty 0 there; it never rests).
  OrderTerms terms() const noexcept {
    return OrderTerms{account, market, side, type, tif, stp, price, by_quote ? Qty{0} : qty()};
  }
};
static_assert(sizeof(Order) == 96);

// One price of one book side: its orders in time priority, and their total.
struct Level {
  Price price{};
  Qty total{};           // sum of the orders' remaining quantities
  uint32_t head = kNil;  // first in time; also the free-list link of a pooled slot
  uint32_t tail = kNil;
  uint32_t count = 0;
  uint32_t icebergs = 0;  // how many of its orders are icebergs (Engine keeps it)
};

class OrderBook {
 public:
  // REQUIRES: price_window_ticks is a power of two >= 64 (EngineConfig::Validate).
  OrderBook(std::size_t markets, uint32_t max_accounts, uint32_t expected_open_orders,
            uint32_t price_window_ticks);
  // Pinned: the books and the id index point into the pools.
  OrderBook(const OrderBook&) = delete;
  OrderBook& operator=(const OrderBook&) = delete;

  // Smaller key, better price: asks by price, bids by -price. The order in
  // which a side's levels are kept, and the key BookSide stores them under.
  static int64_t LevelKey(Side side, Price p) noexcept {
    return side == Side::kBuy ? -p.value : p.value;
  }

  // --- open orders --------------------------------------------------------

  // A cleared pool slot for a new order, to fill in through order(i) and then
  // Open(i). (Filling the slot in place is measurably faster than copying in
  // an Order just built on the stack.)
  uint32_t Allocate();
  // Opens the order filled in at index i: findable by its id and linked to
  // its account's orders, but in no level. REQUIRES: its id is not open.
  void Open(uint32_t i);
  // The order leaves: out of its level (if it rests), its account's orders
  // and the id index; its slot is reused.
  void Close(uint32_t i) noexcept;

  // The index of an open order, or kNil. Remembers the last answer: decide
  // has usually just looked the order up when evolve asks again.
  uint32_t Lookup(OrderId id) const noexcept;
  // The same without touching the remembered answer (queries).
  uint32_t Find(OrderId id) const noexcept { return index_.Find(Raw(id), key_of_); }

  Order& order(uint32_t i) noexcept { return orders_[i]; }
  const Order& order(uint32_t i) const noexcept { return orders_[i]; }
  std::size_t open_orders() const noexcept { return index_.size(); }
  // The account's most recently opened order, or kNil; then Order::acct_next.
  uint32_t first_of_account(AccountId a) const noexcept { return account_head_[Raw(a)]; }

  // --- the book -----------------------------------------------------------

  // The open order at index i joins the tail of its price level (opened if
  // new). REQUIRES: it is in no level.
  void InsertIntoBook(uint32_t i);
  // The order at index i leaves its level (closed if emptied) and stays open.
  // REQUIRES: it is in a level.
  void RemoveFromBook(uint32_t i) noexcept;
  // A resting order's remaining quantity goes down by `by`, in place: it
  // keeps its time priority. REQUIRES: it is in a level; 0 < by <= remaining.
  void Reduce(uint32_t i, Qty by) noexcept;

  std::size_t markets() const noexcept { return books_.size(); }
  // One more market, empty, under the next MarketId (AddMarket).
  void AddMarket() { books_.emplace_back(&level_nodes_, price_window_ticks_); }
  // The best level of one side, or kNil. REQUIRES: market < markets().
  uint32_t BestLevel(MarketId m, Side s) const noexcept { return side(m, s).Best(); }
  // The level after `li` (the next worse price), or kNil.
  uint32_t NextLevel(MarketId m, Side s, uint32_t li) const noexcept {
    return side(m, s).Next(LevelKey(s, levels_[li].price));
  }
  // The level at price p, or kNil.
  uint32_t FindLevel(MarketId m, Side s, Price p) const noexcept {
    return side(m, s).Find(LevelKey(s, p));
  }
  std::size_t level_count(MarketId m, Side s) const noexcept { return side(m, s).size(); }
  const Level& level(uint32_t li) const noexcept { return levels_[li]; }
  // An iceberg order joins (+1) or leaves (-1) level li.
  void CountIceberg(uint32_t li, int by) noexcept {
    levels_[li].icebergs = static_cast<uint32_t>(static_cast<int64_t>(levels_[li].icebergs) + by);
  }
  // The best price of one side; none for an empty side or an unknown market.
  std::optional<Price> Best(MarketId m, Side s) const noexcept;

  // --- queries (copies; not on the matching path) -------------------------

  static OrderView View(const Order& o) noexcept;
  std::optional<OrderView> FindOrder(OrderId id) const noexcept;
  // Up to max_levels levels of one side, best first; none for an unknown market.
  std::vector<LevelView> Depth(MarketId m, Side s, std::size_t max_levels) const;
  // The resting orders of one side in priority order; none for an unknown market.
  std::vector<OrderView> Orders(MarketId m, Side s) const;

 private:
  // Each side's levels, keyed best first (LevelKey); values index levels_.
  struct MarketBook {
    MarketBook(internal::NodePool* pool, uint32_t window)
        : sides{internal::BookSide(pool, window), internal::BookSide(pool, window)} {}
    internal::BookSide sides[2];
  };
  static_assert(internal::BookSide::kNone == kNil);

  struct OrderKeyOf {
    const std::vector<Order>* pool = nullptr;
    uint64_t operator()(uint32_t i) const noexcept { return Raw((*pool)[i].id); }
  };

  internal::BookSide& side(MarketId m, Side s) noexcept { return books_[Raw(m)].sides[Raw(s)]; }
  const internal::BookSide& side(MarketId m, Side s) const noexcept {
    return books_[Raw(m)].sides[Raw(s)];
  }
  uint32_t AllocOrder();
  void LinkAccount(uint32_t i) noexcept;
  void UnlinkAccount(uint32_t i) noexcept;

  // One writer: the engine thread.
  std::vector<uint32_t> account_head_;  // first open order of each account
  std::vector<Order> orders_;
  uint32_t free_order_ = kNil;          // head of the free slots, linked through Order::next
  mutable uint32_t last_found_ = kNil;  // Lookup()'s one-entry cache
  std::vector<Level> levels_;
  uint32_t free_level_ = kNil;      // free Level slots, linked through Level::head
  internal::NodePool level_nodes_;  // before books_: their maps allocate from it
  uint32_t price_window_ticks_;
  std::vector<MarketBook> books_;
  OrderKeyOf key_of_;
  internal::IndexTable<OrderKeyOf> index_;
};

// ---- the matching path, inline --------------------------------------------

inline uint32_t OrderBook::AllocOrder() {
  if (free_order_ != kNil) {
    uint32_t i = free_order_;
    free_order_ = orders_[i].next;
    return i;
  }
  orders_.emplace_back();
  return static_cast<uint32_t>(orders_.size() - 1);
}

inline uint32_t OrderBook::Allocate() {
  uint32_t i = AllocOrder();
  orders_[i] = Order{};
  return i;
}

inline void OrderBook::Open(uint32_t i) {
  index_.Insert(i, key_of_);
  LinkAccount(i);
}

inline void OrderBook::Close(uint32_t i) noexcept {
  Order& o = orders_[i];
  if (o.level != kNil) RemoveFromBook(i);
  UnlinkAccount(i);
  index_.Erase(Raw(o.id), key_of_);
  o.id = OrderId{0};  // a retired slot never answers Lookup()'s cache
  o.next = free_order_;
  free_order_ = i;
}

inline uint32_t OrderBook::Lookup(OrderId id) const noexcept {
  if (last_found_ < orders_.size() && orders_[last_found_].id == id) return last_found_;
  uint32_t i = index_.Find(Raw(id), key_of_);
  last_found_ = i;
  return i;
}

inline void OrderBook::InsertIntoBook(uint32_t i) {
  Order& o = orders_[i];
  internal::BookSide& bs = side(o.market, o.side);
  const int64_t key = LevelKey(o.side, o.price);
  uint32_t li = bs.Find(key);
  if (li == kNil) {
    if (free_level_ != kNil) {
      li = free_level_;
      free_level_ = levels_[li].head;
    } else {
      levels_.emplace_back();
      li = static_cast<uint32_t>(levels_.size() - 1);
    }
    levels_[li] = Level{o.price, Qty{0}, kNil, kNil, 0, 0};
    bs.Insert(key, li);
  }
  Level& l = levels_[li];
  o.level = li;
  o.prev = l.tail;
  o.next = kNil;
  if (l.tail != kNil) {
    orders_[l.tail].next = i;
  } else {
    l.head = i;
  }
  l.tail = i;
  ++l.count;
  l.total += o.remaining;
}

inline void OrderBook::RemoveFromBook(uint32_t i) noexcept {
  Order& o = orders_[i];
  Level& l = levels_[o.level];
  if (o.prev != kNil) {
    orders_[o.prev].next = o.next;
  } else {
    l.head = o.next;
  }
  if (o.next != kNil) {
    orders_[o.next].prev = o.prev;
  } else {
    l.tail = o.prev;
  }
  l.total -= o.remaining;
  --l.count;
  if (l.count == 0) {
    side(o.market, o.side).Erase(LevelKey(o.side, o.price));
    l.head = free_level_;
    free_level_ = o.level;
  }
  o.level = kNil;
  o.prev = o.next = kNil;
}

inline void OrderBook::Reduce(uint32_t i, Qty by) noexcept {
  Order& o = orders_[i];
  o.remaining -= by;
  levels_[o.level].total -= by;
}

inline std::optional<Price> OrderBook::Best(MarketId m, Side s) const noexcept {
  if (Raw(m) >= books_.size()) return std::nullopt;
  uint32_t li = side(m, s).Best();
  if (li == kNil) return std::nullopt;
  return levels_[li].price;
}

inline void OrderBook::LinkAccount(uint32_t i) noexcept {
  Order& o = orders_[i];
  uint32_t& head = account_head_[Raw(o.account)];
  o.acct_prev = kNil;
  o.acct_next = head;
  if (head != kNil) orders_[head].acct_prev = i;
  head = i;
}

inline void OrderBook::UnlinkAccount(uint32_t i) noexcept {
  Order& o = orders_[i];
  if (o.acct_prev != kNil) {
    orders_[o.acct_prev].acct_next = o.acct_next;
  } else {
    account_head_[Raw(o.account)] = o.acct_next;
  }
  if (o.acct_next != kNil) orders_[o.acct_next].acct_prev = o.acct_prev;
}

}  // namespace mb::engine
