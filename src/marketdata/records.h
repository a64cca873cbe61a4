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
#include <optional>
#include <string_view>

#include "common/fixed_string.h"
#include "common/strong.h"
#include "engine/order_terms.h"
#include "engine/types.h"

namespace mb::engine {
struct OrderAccepted;
struct OrderPending;
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
  kExpired,
  // A pending order of an OTO / OTOCO list: placed once the list's working
  // order fills (Binance's PENDING_NEW). Open but in no book.
  kPendingNew
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
  // Conditional orders (engine::IsConditional(terms.type)) only, else 0:
  Price stop_price{};          // 0: none (a trailing stop without an activation price)
  int32_t trailing_delta = 0;  // basis points; 0: not a trailing stop
  int64_t trailing_ns = 0;     // a trailing stop began tracking the price (0: not yet)
  int64_t trigger_ns = 0;      // the stop condition was met (0: not triggered)
  // Iceberg orders only (iceberg_qty != 0, the slice): `visible` lots of the
  // remaining quantity are what its level counts while it rests.
  Qty iceberg_qty{};
  Qty visible{};
  uint64_t list_id = 0;  // the order list it belongs to (0: none; Binance's -1)
};

// The lots an order adds to its price level while it rests: its visible
// part for an iceberg, else all that remains.
inline Qty LevelQty(const OrderRecord& o) noexcept {
  return o.iceberg_qty.value != 0 ? o.visible : o.remaining;
}

// Binance's listStatusType / listOrderStatus of an order list.
enum class ListStatus : uint8_t { kExecuting, kAllDone };

// An order list (OCO, OTO, OTOCO) as Binance reports it.
struct ListRecord {
  uint64_t id = 0;
  AccountId account{};
  MarketId market{};
  engine::ListType type = engine::ListType::kOco;
  ClientOrderId list_client_order_id{};
  OrderId orders[3]{};            // 0: none
  ClientOrderId client_ids[3]{};  // of orders[k]
  ListStatus status = ListStatus::kExecuting;
  int64_t time_ns = 0;    // placed
  int64_t update_ns = 0;  // last change (done)
  std::size_t size() const noexcept {
    return Raw(orders[2]) != 0 ? 3 : Raw(orders[1]) != 0 ? 2 : Raw(orders[0]) != 0 ? 1 : 0;
  }
};

// A conditional order that has not been triggered (nothing of it has entered
// matching): open while it waits, and still so once canceled waiting.
bool Untriggered(const OrderRecord& o) noexcept;
// An open conditional order waiting for its trigger: in no book.
bool Waiting(const OrderRecord& o) noexcept;
// Binance's workingTime (ns): when the order began working (entered
// matching), its placing time for every order but a conditional one, whose
// trigger time it is; nullopt while it has not (an untriggered conditional
// order, which Binance shows as -1).
std::optional<int64_t> WorkingNs(const OrderRecord& o) noexcept;

// An order as it is accepted (NEW, nothing executed), placed at time_ns.
OrderRecord NewOrderRecord(const engine::OrderAccepted& accepted, int64_t time_ns);
// A pending order of an OTO / OTOCO list as it is announced (PENDING_NEW, in
// no book, nothing executed), at time_ns.
OrderRecord PendingOrderRecord(const engine::OrderPending& pending, int64_t time_ns);

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
