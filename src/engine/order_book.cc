#include "engine/order_book.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace mb::engine {

OrderBook::OrderBook(std::size_t markets, uint32_t max_accounts, uint32_t expected_open_orders,
                     uint32_t price_window_ticks)
    : account_head_(max_accounts, kNil),
      level_nodes_(std::max<std::size_t>(expected_open_orders / 16, 1024)),
      price_window_ticks_(price_window_ticks),
      index_(expected_open_orders) {
  books_.reserve(markets);
  for (std::size_t m = 0; m < markets; ++m) books_.emplace_back(&level_nodes_, price_window_ticks);
  orders_.reserve(expected_open_orders);
  levels_.reserve(std::max<std::size_t>(expected_open_orders / 16, 1024));
  key_of_.pool = &orders_;
}

OrderView OrderBook::View(const Order& o) noexcept {
  return OrderView{o.id, o.terms(), o.remaining, o.locked, o.created_ns};
}

std::optional<OrderView> OrderBook::FindOrder(OrderId id) const noexcept {
  uint32_t i = Find(id);
  if (i == kNil) return std::nullopt;
  return View(orders_[i]);
}

std::vector<LevelView> OrderBook::Depth(MarketId m, Side s, std::size_t max_levels) const {
  std::vector<LevelView> out;
  if (Raw(m) >= books_.size()) return out;
  for (uint32_t li = BestLevel(m, s); li != kNil && out.size() < max_levels;
       li = NextLevel(m, s, li)) {
    const Level& l = levels_[li];
    out.push_back(LevelView{l.price, l.total, l.count});
  }
  return out;
}

std::vector<OrderView> OrderBook::Orders(MarketId m, Side s) const {
  std::vector<OrderView> out;
  if (Raw(m) >= books_.size()) return out;
  for (uint32_t li = BestLevel(m, s); li != kNil; li = NextLevel(m, s, li)) {
    for (uint32_t i = levels_[li].head; i != kNil; i = orders_[i].next) {
      out.push_back(View(orders_[i]));
    }
  }
  return out;
}

}  // namespace mb::engine
