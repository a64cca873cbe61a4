// The order and fill records the read side keeps and the projection stores:
// an order's state as Binance reports it (OrderRecord, OrderStatus), one
// fill of one order (Fill) and the kinds of change an executionReport
// carries (ExecType). Small on purpose: the projection and the gateway's
// history interface include it without the read side (read_side.h).
//
// Prices are ticks, quantities lots, amounts smallest units of the asset.
//
// Thread safety: plain values; the functions are pure.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/fixed_string.h"
#include "common/strong.h"
#include "engine/order_terms.h"
#include "engine/types.h"

namespace mb::engine {
struct OrderAccepted;
}  // namespace mb::engine

namespace mb::marketdata {

using engine::OrderType;
using engine::Side;
using engine::StpMode;
using engine::TimeInForce;

// The Binance order states.
enum class OrderStatus : uint8_t {
  kNew,
  kPartiallyFilled,
  kFilled,
  kCanceled,
  kRejected,
  kExpired
};
std::string_view ToString(OrderStatus s) noexcept;  // "NEW", "PARTIALLY_FILLED", ...

struct OrderRecord {
  OrderId id{};
  engine::OrderTerms terms{};
  Amount quote_qty{};  // MARKET by quote amount
  Qty executed{};      // lots
  Amount cumulative_quote{};
  Qty remaining{};  // on the book (0 once closed)
  OrderStatus status = OrderStatus::kNew;
  engine::ExpireReason expire_reason = engine::ExpireReason::kIocRemainder;
  ClientOrderId client_order_id{};
  int64_t time_ns = 0;    // placed
  int64_t update_ns = 0;  // last change
  bool working = false;   // on the book
};

// An order as it is accepted (NEW, nothing executed), placed at time_ns.
OrderRecord NewOrderRecord(const engine::OrderAccepted& accepted, int64_t time_ns);

struct Fill {
  TradeId trade_id{};
  OrderId order_id{};
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  Price price{};
  Qty qty{};
  Amount base_qty{};
  Amount notional{};
  Amount commission{};
  AssetId commission_asset{};  // the asset this side received
  bool is_maker = false;
  int64_t time_ns = 0;
};

// One change to one order, in event order: what an executionReport carries.
enum class ExecType : uint8_t { kNew, kTrade, kCanceled, kExpired, kRejected, kAmended };
std::string_view ToString(ExecType t) noexcept;  // "NEW", "TRADE", ..., "REPLACED" for kAmended

}  // namespace mb::marketdata
