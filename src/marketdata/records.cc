#include "marketdata/records.h"

#include "engine/event.h"

namespace mb::marketdata {

OrderRecord NewOrderRecord(const engine::OrderAccepted& a, int64_t time_ns) {
  OrderRecord r;
  r.id = a.order_id;
  r.terms = a.terms;
  r.quote_qty = a.quote_qty;
  r.remaining = a.terms.qty;
  r.status = OrderStatus::kNew;
  r.client_order_id = a.client_order_id;
  r.time_ns = time_ns;
  r.update_ns = time_ns;
  return r;
}

OrderRecord PendingOrderRecord(const engine::OrderPending& p, int64_t time_ns) {
  OrderRecord r;
  r.id = p.order_id;
  r.terms = p.terms;
  r.remaining = p.terms.qty;
  r.status = OrderStatus::kPendingNew;
  r.client_order_id = p.client_order_id;
  r.time_ns = time_ns;
  r.update_ns = time_ns;
  r.stop_price = p.stop_price;
  r.trailing_delta = p.trailing_delta;
  r.iceberg_qty = p.iceberg_qty;
  r.list_id = p.list_id;
  return r;
}

bool Untriggered(const OrderRecord& o) noexcept {
  return engine::IsConditional(o.terms.type) && o.trigger_ns == 0;
}

bool Waiting(const OrderRecord& o) noexcept {
  return Untriggered(o) &&
         (o.status == OrderStatus::kNew || o.status == OrderStatus::kPartiallyFilled);
}

std::optional<int64_t> WorkingNs(const OrderRecord& o) noexcept {
  if (!engine::IsConditional(o.terms.type)) return o.time_ns;
  if (o.trigger_ns == 0) return std::nullopt;
  return o.trigger_ns;
}

std::string_view ToString(OrderStatus s) noexcept {
  switch (s) {
    case OrderStatus::kNew:
      return "NEW";
    case OrderStatus::kPartiallyFilled:
      return "PARTIALLY_FILLED";
    case OrderStatus::kFilled:
      return "FILLED";
    case OrderStatus::kCanceled:
      return "CANCELED";
    case OrderStatus::kRejected:
      return "REJECTED";
    case OrderStatus::kExpired:
      return "EXPIRED";
    case OrderStatus::kPendingNew:
      return "PENDING_NEW";
  }
  return "?";
}

std::string_view ToString(ExecType t) noexcept {
  switch (t) {
    case ExecType::kNew:
      return "NEW";
    case ExecType::kTrade:
      return "TRADE";
    case ExecType::kCanceled:
      return "CANCELED";
    case ExecType::kExpired:
      return "EXPIRED";
    case ExecType::kRejected:
      return "REJECTED";
    case ExecType::kAmended:
      return "REPLACED";
  }
  return "?";
}

}  // namespace mb::marketdata
