#include "projection/rows.h"

#include <algorithm>
#include <cassert>
#include <type_traits>
#include <variant>

namespace mb::projection {

void RowBatch::Clear() {
  first_seq = last_seq = last_checksum = 0;
  last_time_ns = 0;
  events = 0;
  orders.clear();
  pending_placed.clear();
  lists.clear();
  order_events.clear();
  trades.clear();
  ledger.clear();
  deposits.clear();
  withdrawals.clear();
  transfers_out.clear();
  transfers_resolved.clear();
  candles.clear();
}

RowBuilder::RowBuilder(const engine::EngineConfig& config) : config_(config) {}

void RowBuilder::Seed(std::span<const OrderRow> open_orders, std::span<const ListRow> open_lists) {
  open_.clear();
  trailing_.clear();
  lists_.clear();
  list_of_.clear();
  for (const OrderRow& row : open_orders) {
    open_.emplace(Raw(row.order.id), row);
    const OrderRecord& o = row.order;
    // A pending order is in no trigger structure yet: it watches once placed.
    if (o.status != OrderStatus::kPendingNew && marketdata::Untriggered(o) &&
        o.trailing_delta != 0 && o.trailing_ns == 0) {
      Watch(o);
    }
  }
  for (const ListRow& row : open_lists) {
    lists_.emplace(row.list.id, row);
    for (const OrderId id : row.list.orders) {
      if (Raw(id) != 0) list_of_[Raw(id)] = row.list.id;
    }
  }
}

void RowBuilder::SeedCandles(std::span<const CandleRow> newest) {
  candles_.clear();
  touched_candles_.clear();
  for (const CandleRow& c : newest) {
    if (c.interval < marketdata::kKlineIntervals) candles_[c.market][c.interval] = c.candle;
  }
}

marketdata::TradeRow ToTradeRow(const TradeRecord& t) {
  marketdata::TradeRow row;
  row.id = static_cast<TradeId>(t.trade_id);
  row.market = static_cast<MarketId>(t.market);
  row.price = Price{t.price};
  row.qty = Qty{t.qty};
  row.base_qty = Amount{t.base_qty};
  row.notional = Amount{t.notional};
  row.time_ns = t.time_ns;
  const bool taker_buys = t.taker_side == engine::Side::kBuy;
  row.buyer_is_maker = !taker_buys;
  row.buy_order = static_cast<OrderId>(taker_buys ? t.taker_order_id : t.maker_order_id);
  row.sell_order = static_cast<OrderId>(taker_buys ? t.maker_order_id : t.taker_order_id);
  row.seq = static_cast<Sequence>(t.seq);
  row.agg_id = row.id;
  return row;
}

void RowBuilder::Candles(const TradeRecord& t) {
  const marketdata::TradeRow row = ToTradeRow(t);
  auto& series = candles_[t.market];
  for (std::size_t i = 0; i < marketdata::kKlineIntervals; ++i) {
    const auto interval = static_cast<uint8_t>(i);
    if (const std::optional<marketdata::Kline> closed =
            marketdata::AddToCandle(static_cast<marketdata::KlineInterval>(i), row,
                                    t.taker_side == engine::Side::kBuy, &series[i])) {
      // Closed by this trade: its final state, a row of its own.
      closed_candles_.push_back(CandleRow{t.market, interval, *closed});
    }
  }
  touched_candles_.push_back(t.market);
}

std::vector<OrderRow> RowBuilder::OpenOrders() const {
  std::vector<OrderRow> out;
  out.reserve(open_.size());
  for (const auto& [id, row] : open_) out.push_back(row);
  std::sort(out.begin(), out.end(),
            [](const OrderRow& a, const OrderRow& b) { return Raw(a.order.id) < Raw(b.order.id); });
  return out;
}

uint64_t RowBuilder::ListOf(OrderId id) const {
  auto it = list_of_.find(Raw(id));
  return it == list_of_.end() ? 0 : it->second;
}

void RowBuilder::SetListClientId(uint64_t list_id, OrderId id, const ClientOrderId& cid) {
  auto it = lists_.find(list_id);
  if (it == lists_.end()) return;
  ListRecord& l = it->second.list;
  for (int k = 0; k < 3; ++k) {
    if (l.orders[k] != id || l.client_ids[k] == cid) continue;
    l.client_ids[k] = cid;
    it->second.updated_seq = seq_;
    touched_lists_.push_back(list_id);
  }
}

// No order of the list is open or pending any more: pending orders that were
// never placed (their working order did not fill) are canceled, and the list
// is all done.
void RowBuilder::ListDone(const engine::ListDone& x, RowBatch* batch) {
  auto it = lists_.find(x.list_id);
  if (it == lists_.end()) return;
  ListRow& row = it->second;
  for (const OrderId id : row.list.orders) {
    if (Raw(id) == 0) continue;
    list_of_.erase(Raw(id));
    auto o = open_.find(Raw(id));
    if (o == open_.end() || o->second.order.status != OrderStatus::kPendingNew) continue;
    Close(Raw(id), OrderStatus::kCanceled, engine::ExpireReason::kIocRemainder, ExecType::kCanceled,
          batch);
  }
  row.list.status = ListStatus::kAllDone;
  row.list.update_ns = ts_;
  row.updated_seq = seq_;
  touched_lists_.push_back(x.list_id);
}

void RowBuilder::Watch(const OrderRecord& o) {
  trailing_[Raw(o.id)] =
      TrailWatch{o.terms.market, o.stop_price, engine::TriggersOnRise(o.terms.type, o.terms.side)};
}

void RowBuilder::Activate(MarketId market, Price price) {
  for (auto it = trailing_.begin(); it != trailing_.end();) {
    const TrailWatch& w = it->second;
    if (w.market != market || (w.rise ? price < w.stop : price > w.stop)) {
      ++it;
      continue;
    }
    // It begins tracking: not an update of the order (its updateTime stays).
    if (auto o = open_.find(it->first); o != open_.end()) {
      o->second.order.trailing_ns = ts_;
      o->second.updated_seq = seq_;
      touched_.push_back(it->first);
    }
    it = trailing_.erase(it);
  }
}

OrderRow* RowBuilder::Touch(uint64_t order_id) {
  auto it = open_.find(order_id);
  if (it == open_.end()) return nullptr;
  touched_.push_back(order_id);  // duplicates are dropped in Finish()
  it->second.updated_seq = seq_;
  it->second.order.update_ns = ts_;
  return &it->second;
}

void RowBuilder::Report(const OrderRow& row, ExecType type, uint64_t trade_id,
                        engine::RejectReason reject, RowBatch* batch) {
  const OrderRecord& o = row.order;
  OrderEventRow e;
  e.seq = seq_;
  e.idx = report_idx_++;
  e.order_id = Raw(o.id);
  e.account = Raw(o.terms.account);
  e.market = Raw(o.terms.market);
  e.exec_type = type;
  e.status = o.status;
  e.price = o.terms.price.value;
  e.qty = o.terms.qty.value;
  e.executed = o.executed.value;
  e.cumulative_quote = o.cumulative_quote.value;
  e.remaining = o.remaining.value;
  e.trade_id = trade_id;
  e.reject = reject;
  e.client_order_id = std::string(o.client_order_id.view());
  e.time_ns = ts_;
  batch->order_events.push_back(std::move(e));
}

void RowBuilder::AddRecord(uint64_t seq, uint64_t checksum, std::span<const engine::Event> events,
                           RowBatch* batch) {
  if (events.empty()) return;
  seq_ = seq;
  ts_ = events.front().timestamp_ns;
  if (batch->first_seq == 0) batch->first_seq = seq;
  batch->last_seq = seq;
  batch->last_checksum = checksum;
  batch->last_time_ns = ts_;
  batch->events += events.size();

  lines_.clear();
  for (const engine::Event& e : events) engine::AppendLedgerEntries(config_, e, &lines_);
  // Ledger lines are numbered within the record, in event order.
  for (std::size_t i = 0; i < lines_.size(); ++i) {
    const engine::LedgerEntry& l = lines_[i];
    batch->ledger.push_back(LedgerRow{seq, static_cast<uint32_t>(i), Raw(l.account), Raw(l.asset),
                                      l.bucket, l.delta, l.reason, l.ref_kind, l.ref, ts_});
  }
  report_idx_ = 0;
  for (const engine::Event& e : events) Event(e, batch);
}

void RowBuilder::Event(const engine::Event& ev, RowBatch* batch) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, engine::OrderAccepted>) {
          OrderRow row;
          row.order = marketdata::NewOrderRecord(x, ts_);
          row.order.list_id = ListOf(x.order_id);
          row.created_seq = seq_;
          row.updated_seq = seq_;
          const uint64_t id = Raw(x.order_id);
          if (auto pending = open_.find(id);
              pending != open_.end() && pending->second.order.status == OrderStatus::kPendingNew) {
            // A pending order of a list placed: the same row, placed now.
            placed_pending_.push_back(id);
          }
          if (row.order.list_id != 0) {
            SetListClientId(row.order.list_id, x.order_id, x.client_order_id);
          }
          open_.insert_or_assign(id, row);
          touched_.push_back(id);
          Report(row, ExecType::kNew, 0, engine::RejectReason::kNone, batch);
        } else if constexpr (std::is_same_v<T, engine::Rejected>) {
          if (x.command == engine::CommandType::kPlaceOrderList && Raw(x.order_id) != 0) {
            // A pending order of a list that could not be placed once its
            // working order filled.
            OrderRow* r = Touch(Raw(x.order_id));
            if (r == nullptr) return;
            r->order.status = OrderStatus::kRejected;
            r->order.remaining = Qty{0};
            Report(*r, ExecType::kRejected, 0, x.reason, batch);
            return;
          }
          // A refused order is an execution report with no order behind it.
          if (x.command != engine::CommandType::kPlaceOrder) return;
          OrderRow row;
          row.order.terms.account = x.account;
          row.order.terms.market = x.market;
          row.order.status = OrderStatus::kRejected;
          row.order.client_order_id = x.client_order_id;
          Report(row, ExecType::kRejected, 0, x.reason, batch);
        } else if constexpr (std::is_same_v<T, engine::Trade>) {
          TradeRecord t;
          t.trade_id = Raw(x.trade_id);
          t.seq = seq_;
          t.market = Raw(x.market);
          t.taker_side = x.taker_side;
          t.price = x.price.value;
          t.qty = x.qty.value;
          t.base_qty = x.base_qty.value;
          t.notional = x.notional.value;
          t.maker_order_id = Raw(x.maker_order_id);
          t.taker_order_id = Raw(x.taker_order_id);
          t.maker_account = Raw(x.maker_account);
          t.taker_account = Raw(x.taker_account);
          t.maker_fee = x.maker_fee.value;
          t.taker_fee = x.taker_fee.value;
          t.time_ns = ts_;
          batch->trades.push_back(t);
          Candles(t);
          Fill(x, true, batch);
          Fill(x, false, batch);
          if (!trailing_.empty()) Activate(x.market, x.price);
        } else if constexpr (std::is_same_v<T, engine::OrderRested>) {
          OrderRow* r = Touch(Raw(x.order_id));
          if (r == nullptr) return;
          r->order.remaining = x.remaining;
          r->order.working = true;
        } else if constexpr (std::is_same_v<T, engine::OrderArmed>) {
          // The conditional order just accepted waits for its trigger.
          OrderRow* r = Touch(Raw(x.order_id));
          if (r == nullptr) return;
          r->order.stop_price = x.stop_price;
          r->order.trailing_delta = x.trailing_delta;
          if (x.trailing_delta != 0) {
            // Without an activation price a trailing stop tracks from the start.
            if (x.stop_price.value == 0) {
              r->order.trailing_ns = ts_;
            } else {
              Watch(r->order);
            }
          }
        } else if constexpr (std::is_same_v<T, engine::OrderTriggered>) {
          // It enters matching, reported NEW again (as the stream does).
          trailing_.erase(Raw(x.order_id));
          OrderRow* r = Touch(Raw(x.order_id));
          if (r == nullptr) return;
          r->order.trigger_ns = ts_;
          Report(*r, ExecType::kNew, 0, engine::RejectReason::kNone, batch);
        } else if constexpr (std::is_same_v<T, engine::OrderCanceled>) {
          trailing_.erase(Raw(x.order_id));
          Close(Raw(x.order_id), OrderStatus::kCanceled, engine::ExpireReason::kIocRemainder,
                ExecType::kCanceled, batch);
        } else if constexpr (std::is_same_v<T, engine::OrderExpired>) {
          if (x.reason == engine::ExpireReason::kQuoteBudgetSpent) {
            // A market order by quote amount that spent its budget is FILLED
            // (Binance): no EXPIRED report; its last fill's report says FILLED.
            OrderRow* r = Touch(Raw(x.order_id));
            if (r == nullptr) return;
            r->order.working = false;
            r->order.remaining = Qty{0};
            r->order.status = OrderStatus::kFilled;
            LastReport(Raw(x.order_id), ExecType::kTrade, batch, [](OrderEventRow& e) {
              e.status = OrderStatus::kFilled;
              e.remaining = 0;
            });
            return;
          }
          trailing_.erase(Raw(x.order_id));
          Close(Raw(x.order_id), OrderStatus::kExpired, x.reason, ExecType::kExpired, batch);
        } else if constexpr (std::is_same_v<T, engine::OrderAmended>) {
          OrderRow* r = Touch(Raw(x.order_id));
          if (r == nullptr) return;
          if (!x.keeps_priority) {
            // It leaves the book; the trades and the rest that follow place it again.
            r->order.working = false;
            r->order.terms.price = x.new_price;
          }
          r->order.terms.qty = x.new_qty;
          r->order.remaining = x.new_remaining;
          Report(*r, ExecType::kAmended, 0, engine::RejectReason::kNone, batch);
        } else if constexpr (std::is_same_v<T, engine::ClientOrderIdChanged>) {
          // The amend just reported gave the order a new client order id.
          OrderRow* r = Touch(Raw(x.order_id));
          if (r == nullptr) return;
          r->order.client_order_id = x.client_order_id;
          LastReport(Raw(x.order_id), ExecType::kAmended, batch, [&](OrderEventRow& e) {
            e.client_order_id = std::string(x.client_order_id.view());
          });
        } else if constexpr (std::is_same_v<T, engine::Deposited>) {
          batch->deposits.push_back(TransferRow{Raw(x.transfer_id), Raw(x.account), Raw(x.asset),
                                                x.amount.value, std::string(x.ref.view()), ts_});
        } else if constexpr (std::is_same_v<T, engine::Withdrawn>) {
          batch->withdrawals.push_back(TransferRow{Raw(x.transfer_id), Raw(x.account), Raw(x.asset),
                                                   x.amount.value, std::string(x.ref.view()), ts_});
        } else if constexpr (std::is_same_v<T, engine::TransferHeld>) {
          batch->transfers_out.push_back(TransferOutRow{
              Raw(x.transfer_id), Raw(x.account), Raw(x.asset), x.amount.value, x.fee.value,
              std::string(x.ref.view()), std::string(x.address.view()), ts_});
        } else if constexpr (std::is_same_v<T, engine::TransferCompleted>) {
          batch->transfers_resolved.push_back(TransferResolvedRow{
              Raw(x.transfer_id), Raw(x.account), true, engine::RefundReason::kVoided, ts_});
        } else if constexpr (std::is_same_v<T, engine::TransferRefunded>) {
          batch->transfers_resolved.push_back(
              TransferResolvedRow{Raw(x.transfer_id), Raw(x.account), false, x.reason, ts_});
        } else if constexpr (std::is_same_v<T, engine::IcebergAccepted>) {
          // The order just accepted is an iceberg showing `slice` lots.
          OrderRow* r = Touch(Raw(x.order_id));
          if (r == nullptr) return;
          r->order.iceberg_qty = x.slice;
        } else if constexpr (std::is_same_v<T, engine::IcebergRefilled>) {
          // The visible part the book shows is not history: nothing changes
          // in the order's row.
        } else if constexpr (std::is_same_v<T, engine::ListAccepted>) {
          ListRow row;
          ListRecord& l = row.list;
          l.id = x.list_id;
          l.account = x.account;
          l.market = x.market;
          l.type = x.type;
          l.list_client_order_id = x.list_client_order_id;
          for (int k = 0; k < 3; ++k) {
            l.orders[k] = x.order_ids[k];
            if (Raw(x.order_ids[k]) != 0) list_of_[Raw(x.order_ids[k])] = x.list_id;
          }
          l.status = ListStatus::kExecuting;
          l.time_ns = ts_;
          l.update_ns = ts_;
          row.created_seq = seq_;
          row.updated_seq = seq_;
          lists_.insert_or_assign(x.list_id, row);
          touched_lists_.push_back(x.list_id);
        } else if constexpr (std::is_same_v<T, engine::OrderPending>) {
          // Open in PENDING_NEW, in no book, until placed or refused.
          OrderRow row;
          row.order = marketdata::PendingOrderRecord(x, ts_);
          row.created_seq = seq_;
          row.updated_seq = seq_;
          const uint64_t id = Raw(x.order_id);
          open_.insert_or_assign(id, row);
          touched_.push_back(id);
          SetListClientId(x.list_id, x.order_id, x.client_order_id);
          Report(row, ExecType::kNew, 0, engine::RejectReason::kNone, batch);
        } else if constexpr (std::is_same_v<T, engine::ListDone>) {
          ListDone(x, batch);
        } else if constexpr (std::is_same_v<T, engine::AuthChanged>) {
          // Accounts and keys are not history: the journal and the engine's
          // snapshots hold them (and a key's secret stays out of the database).
        } else if constexpr (std::is_same_v<T, engine::AssetAdded> ||
                             std::is_same_v<T, engine::MarketAdded>) {
          // Definitions, not history: the journal and the engine's snapshots
          // hold them; rows name markets by id.
        } else {
          static_assert(std::is_same_v<T, engine::MarketStatusChanged>);
        }
      },
      ev.body);
}

template <class F>
void RowBuilder::LastReport(uint64_t order_id, ExecType type, RowBatch* batch, F&& change) {
  for (auto it = batch->order_events.rbegin(); it != batch->order_events.rend(); ++it) {
    if (it->order_id != order_id) continue;
    if (it->exec_type == type) change(*it);
    return;
  }
}

void RowBuilder::Fill(const engine::Trade& t, bool maker, RowBatch* batch) {
  OrderRow* r = Touch(Raw(maker ? t.maker_order_id : t.taker_order_id));
  if (r == nullptr) return;
  OrderRecord& o = r->order;
  const bool filled = maker ? t.maker_filled : t.taker_filled;
  o.executed += t.qty;
  o.cumulative_quote += t.notional;
  if (o.quote_qty.value == 0) o.remaining -= t.qty;  // a budget order has no lots left
  if (filled) {
    o.status = OrderStatus::kFilled;
    o.remaining = Qty{0};
    o.working = false;
  } else {
    o.status = OrderStatus::kPartiallyFilled;
  }
  Report(*r, ExecType::kTrade, Raw(t.trade_id), engine::RejectReason::kNone, batch);
}

void RowBuilder::Close(uint64_t order_id, OrderStatus status, engine::ExpireReason reason,
                       ExecType type, RowBatch* batch) {
  OrderRow* r = Touch(order_id);
  if (r == nullptr) return;
  OrderRecord& o = r->order;
  o.working = false;
  o.remaining = Qty{0};
  o.status = status;
  if (status == OrderStatus::kExpired) o.expire_reason = reason;
  Report(*r, type, 0, engine::RejectReason::kNone, batch);
}

void RowBuilder::Finish(RowBatch* batch) {
  // Candles: those closed in the batch, then the open ones it changed.
  batch->candles.insert(batch->candles.end(), closed_candles_.begin(), closed_candles_.end());
  closed_candles_.clear();
  std::sort(touched_candles_.begin(), touched_candles_.end());
  touched_candles_.erase(std::unique(touched_candles_.begin(), touched_candles_.end()),
                         touched_candles_.end());
  for (const uint16_t market : touched_candles_) {
    const auto& series = candles_[market];
    for (std::size_t i = 0; i < series.size(); ++i) {
      if (series[i])
        batch->candles.push_back(CandleRow{market, static_cast<uint8_t>(i), *series[i]});
    }
  }
  touched_candles_.clear();
  for (uint64_t id : placed_pending_) {
    if (auto it = open_.find(id); it != open_.end()) {
      batch->pending_placed.push_back(
          PendingPlacedRow{id, it->second.order.time_ns, it->second.created_seq});
    }
  }
  placed_pending_.clear();
  for (uint64_t id : touched_) {
    auto it = open_.find(id);
    if (it == open_.end()) continue;  // already written (a duplicate in touched_)
    batch->orders.push_back(it->second);
    const OrderStatus s = it->second.order.status;
    if (s != OrderStatus::kNew && s != OrderStatus::kPartiallyFilled &&
        s != OrderStatus::kPendingNew) {
      open_.erase(it);
    } else {
      // Written once per batch even when touched again: park it until the end.
      parked_.insert(open_.extract(it));
    }
  }
  // Orders still open go back to the open set.
  open_.merge(parked_);
  parked_.clear();
  touched_.clear();
  // Lists: one row each, by id; the done ones are forgotten.
  std::sort(touched_lists_.begin(), touched_lists_.end());
  touched_lists_.erase(std::unique(touched_lists_.begin(), touched_lists_.end()),
                       touched_lists_.end());
  for (uint64_t id : touched_lists_) {
    auto it = lists_.find(id);
    if (it == lists_.end()) continue;
    batch->lists.push_back(it->second);
    if (it->second.list.status != ListStatus::kExecuting) lists_.erase(it);
  }
  touched_lists_.clear();
}

}  // namespace mb::projection
