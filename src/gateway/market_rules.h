// The order rules of one market that only the gateway applies: which order
// types it takes (exchangeInfo's orderTypes) and the TRAILING_DELTA and
// MAX_NUM_ALGO_ORDERS filters, and the ICEBERG_PARTS and
// MAX_NUM_ICEBERG_ORDERS filters of iceberg orders. Read from the
// configuration's [[markets]] (order_types, trailing_delta,
// max_num_algo_orders, iceberg_parts, max_num_iceberg_orders) but not part of the
// engine's configuration or its hash: they may change between runs.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "common/strong.h"
#include "engine/types.h"

namespace mb::gateway {

// Every order type the engine knows, in exchangeInfo's order.
inline constexpr engine::OrderType kOrderTypes[] = {
    engine::OrderType::kLimit,          engine::OrderType::kLimitMaker,
    engine::OrderType::kMarket,         engine::OrderType::kStopLoss,
    engine::OrderType::kStopLossLimit,  engine::OrderType::kTakeProfit,
    engine::OrderType::kTakeProfitLimit};

constexpr uint32_t OrderTypeBit(engine::OrderType t) noexcept {
  return uint32_t{1} << static_cast<unsigned>(t);
}

struct MarketRules {
  // Bits of OrderTypeBit(): the types the market takes (default: all).
  uint32_t order_types =
      OrderTypeBit(engine::OrderType::kLimit) | OrderTypeBit(engine::OrderType::kLimitMaker) |
      OrderTypeBit(engine::OrderType::kMarket) | OrderTypeBit(engine::OrderType::kStopLoss) |
      OrderTypeBit(engine::OrderType::kStopLossLimit) |
      OrderTypeBit(engine::OrderType::kTakeProfit) |
      OrderTypeBit(engine::OrderType::kTakeProfitLimit);
  // TRAILING_DELTA, in basis points (1..9999, min <= max): "above" bounds
  // the trailing stops that trigger on a rise (STOP_LOSS* BUY, TAKE_PROFIT*
  // SELL), "below" the others.
  int32_t min_trailing_above = 10;
  int32_t max_trailing_above = 2000;
  int32_t min_trailing_below = 10;
  int32_t max_trailing_below = 2000;
  // MAX_NUM_ALGO_ORDERS: conditional orders an account may have waiting for
  // their trigger in the market.
  uint32_t max_num_algo_orders = 5;
  // ICEBERG_PARTS: an iceberg order's quantity is at most this many slices
  // (ceil(quantity / icebergQty) <= iceberg_parts; Binance's limit has been
  // 10, later 100). Below 2 no iceberg is possible: exchangeInfo's
  // icebergAllowed is false then.
  uint32_t iceberg_parts = 10;
  // MAX_NUM_ICEBERG_ORDERS: open iceberg orders an account may have in the
  // market.
  uint32_t max_num_iceberg_orders = 100;

  bool IcebergAllowed() const noexcept { return iceberg_parts >= 2; }

  bool Allows(engine::OrderType t) const noexcept { return (order_types & OrderTypeBit(t)) != 0; }
};

// The rules of `market` in `rules` (by MarketId); the defaults when it has
// none.
inline const MarketRules& RulesOf(std::span<const MarketRules> rules, MarketId market) noexcept {
  static const MarketRules kDefault;
  const std::size_t i = static_cast<std::size_t>(Raw(market));
  return i < rules.size() ? rules[i] : kDefault;
}

}  // namespace mb::gateway
