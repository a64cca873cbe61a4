// OrderTerms: what an order was placed as — whose, where, which way, what
// kind, at what price and quantity (an amend may since have changed the last
// two). One declaration for the structs that describe an order: the accepted
// event (engine/event.h), the engine's query view (engine/engine.h), the
// snapshot's resting order (engine/image.h) and the read side's record
// (marketdata/records.h). Each embeds it as `terms` after the order's id and
// adds what it knows besides (the lock, what is still open, fills, ...).
//
// Two things an order is placed with are not here, because those structs do
// not agree on them:
// - the quote budget of a MARKET order by quote amount (qty is 0 for one):
//   such an order never rests, so the view and the snapshot have no place for
//   it; the accepted event and the record keep `quote_qty` beside the terms.
// - the client order id: a string in the event and the record, a 128-bit hash
//   in the engine and its snapshot (Key128), absent from the view.
//
// The engine's pooled Order (engine/order_book.h) keeps these fields in its
// own compact layout rather than embedding this struct: see the comment
// there. The PlaceOrder command (engine/command.h) carries them as the client
// sent them, before the engine applies IOC and price 0 to a MARKET order.
//
// Thread safety: plain value.
#pragma once

#include <type_traits>

#include "common/strong.h"
#include "engine/types.h"

namespace mb::engine {

struct OrderTerms {
  AccountId account{};
  MarketId market{};
  Side side = Side::kBuy;
  OrderType type = OrderType::kLimit;
  TimeInForce tif = TimeInForce::kGtc;  // as it applies: IOC for every MARKET order
  StpMode stp = StpMode::kNone;
  Price price{};  // 0 for MARKET
  Qty qty{};      // ordered, lots (0: MARKET by quote amount)

  friend bool operator==(const OrderTerms&, const OrderTerms&) = default;
};

// Embedded in events: it travels through rings as bytes. Its members sit at
// the offsets they had when each struct declared them itself (the id, 8
// bytes, comes first in all of them), so embedding it moved no field.
static_assert(std::is_trivially_copyable_v<OrderTerms>);
static_assert(sizeof(OrderTerms) == 32 && alignof(OrderTerms) == 8);

}  // namespace mb::engine
