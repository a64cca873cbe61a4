#include "reference_engine.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/checked.h"

namespace mb::testing {
namespace {

using engine::Balance;
using engine::CommandType;
using engine::EngineConfig;
using engine::Event;
using engine::EventBody;
using engine::ExpireReason;
using engine::MarketSpec;
using engine::MarketStatus;
using engine::OrderType;
using engine::RejectReason;
using engine::Side;
using engine::StpMode;
using engine::TimeInForce;

using i128 = ::mb::int128;

int64_t Narrow(i128 v) {
  MB_CHECK(FitsInt64(v));
  return static_cast<int64_t>(v);
}

bool IsByQuote(const RefOrder& o) { return o.type == OrderType::kMarket && o.quote_qty.value != 0; }

// STOP_LOSS, STOP_LOSS_LIMIT, TAKE_PROFIT, TAKE_PROFIT_LIMIT.
bool IsStop(OrderType t) {
  return t == OrderType::kStopLoss || t == OrderType::kStopLossLimit ||
         t == OrderType::kTakeProfit || t == OrderType::kTakeProfitLimit;
}

// Orders without a limit price: MARKET, and the stops that become MARKET
// orders when triggered.
bool NoLimit(OrderType t) {
  return t == OrderType::kMarket || t == OrderType::kStopLoss || t == OrderType::kTakeProfit;
}

// Binance's table: a stop-loss buy and a take-profit sell wait for the price
// to rise to the stop price, the other two for it to fall to it.
bool WaitsForRise(OrderType t, Side side) {
  if (t == OrderType::kStopLoss || t == OrderType::kStopLossLimit) return side == Side::kBuy;
  return side == Side::kSell;
}

bool StopReached(const RefOrder& o, Price stop, Price last) {
  return WaitsForRise(o.type, o.side) ? last.value >= stop.value : last.value <= stop.value;
}

// A trailing stop that tracks: has the last price moved `delta` basis points
// against the order from its best price (up for a buy, down for a sell)?
bool TrailedOut(const RefWaiting& w, Price last) {
  if (!w.active || w.extreme.value == 0) return false;
  const i128 moved = static_cast<i128>(last.value) * 10'000;
  const i128 best = w.extreme.value;
  return w.order.side == Side::kBuy ? moved >= best * (10'000 + w.delta)
                                    : moved <= best * (10'000 - w.delta);
}

std::string Str(const ClientOrderId& c) { return std::string(c.view()); }
std::string Str(const TransferRef& r) { return std::string(r.view()); }

std::string Describe(const RefOrder& o) {
  return "order " + std::to_string(Raw(o.id)) + " (account " + std::to_string(Raw(o.account)) +
         ", market " + std::to_string(Raw(o.market)) + ")";
}

}  // namespace

ReferenceEngine::ReferenceEngine(EngineConfig config) : config_(std::move(config)) {
  for (const MarketSpec& m : config_.markets) status_.push_back(m.status);
  books_.resize(config_.markets.size());
  last_price_.resize(config_.markets.size());
  supply_.resize(config_.assets.size());
  held_.resize(config_.assets.size());
}

std::vector<Event> ReferenceEngine::Process(const engine::Command& command) {
  ++seq_;
  now_ns_ = command.timestamp_ns;
  out_.clear();
  range_low_ = range_high_ = Price{0};
  check_triggers_ = false;
  touched_.clear();
  filled_.clear();
  if (const auto* c = std::get_if<engine::PlaceOrder>(&command.body)) DoPlace(*c);
  if (const auto* c = std::get_if<engine::CancelOrder>(&command.body)) DoCancel(*c);
  if (const auto* c = std::get_if<engine::CancelAll>(&command.body)) DoCancelAll(*c);
  if (const auto* c = std::get_if<engine::AmendOrder>(&command.body)) DoAmend(*c);
  if (const auto* c = std::get_if<engine::Deposit>(&command.body)) DoDeposit(*c);
  if (const auto* c = std::get_if<engine::Withdraw>(&command.body)) DoWithdraw(*c);
  if (const auto* c = std::get_if<engine::SetMarketStatus>(&command.body)) DoSetMarketStatus(*c);
  if (const auto* c = std::get_if<engine::CancelReplace>(&command.body)) DoCancelReplace(*c);
  if (const auto* c = std::get_if<engine::TransferOut>(&command.body)) DoTransferOut(*c);
  if (const auto* c = std::get_if<engine::ResolveTransfer>(&command.body)) DoResolveTransfer(*c);
  if (const auto* c = std::get_if<engine::PlaceOrderList>(&command.body)) DoPlaceList(*c);
  if (const auto* c = std::get_if<engine::CancelOrderList>(&command.body)) DoCancelList(*c);
  // Lists and waiting orders react to the command once its own events are out.
  Settle();
  MB_CHECK(!out_.empty());
  return out_;
}

// ---------------------------------------------------------------------------
// Small helpers

void ReferenceEngine::Emit(EventBody body) {
  Event e;
  e.seq = Sequence{seq_};
  e.timestamp_ns = now_ns_;
  e.body = body;
  out_.push_back(e);
}

void ReferenceEngine::Reject(CommandType command, RejectReason reason, AccountId account,
                             MarketId market, OrderId order_id, uint64_t existing_id,
                             const ClientOrderId& cid) {
  engine::Rejected r;
  r.command = command;
  r.reason = reason;
  r.account = account;
  r.market = market;
  r.order_id = order_id;
  r.existing_id = existing_id;
  r.client_order_id = cid;
  Emit(r);
}

Balance& ReferenceEngine::Bal(AccountId account, AssetId asset) {
  return balances_[BalanceKey(account, asset)];
}

AssetId ReferenceEngine::SpendAsset(const RefOrder& o) const {
  const MarketSpec& m = config_.markets[Raw(o.market)];
  return o.side == Side::kBuy ? m.quote : m.base;
}

bool ReferenceEngine::Crosses(const RefOrder& taker, Price level_price) const {
  if (NoLimit(taker.type)) return true;
  return taker.side == Side::kBuy ? level_price <= taker.price : level_price >= taker.price;
}

std::size_t ReferenceEngine::WaitingIndex(OrderId id) const {
  for (std::size_t k = 0; k < waiting_.size(); ++k) {
    if (waiting_[k].order.id == id) return k;
  }
  return waiting_.size();
}

RefOrder* ReferenceEngine::FindOpen(OrderId id) {
  if (std::size_t k = WaitingIndex(id); k < waiting_.size()) return &waiting_[k].order;
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  const Location& loc = it->second;
  Book& book = books_[Raw(loc.market)];
  std::deque<RefOrder>* level = nullptr;
  if (loc.side == Side::kBuy) {
    auto l = book.bids.find(loc.price);
    MB_CHECK(l != book.bids.end());
    level = &l->second;
  } else {
    auto l = book.asks.find(loc.price);
    MB_CHECK(l != book.asks.end());
    level = &l->second;
  }
  for (RefOrder& o : *level) {
    if (o.id == id) return &o;
  }
  MB_CHECK(false);
  return nullptr;
}

const RefOrder* ReferenceEngine::FindOrder(OrderId id) const {
  return const_cast<ReferenceEngine*>(this)->FindOpen(id);  // NOLINT: read-only use
}

RefOrder* ReferenceEngine::ResolveTarget(AccountId account, MarketId market, OrderId id,
                                         const ClientOrderId& cid) {
  OrderId target = id;
  if (Raw(id) == 0) {
    if (cid.empty()) return nullptr;
    auto it = client_ids_.find({account, Str(cid)});
    if (it == client_ids_.end()) return nullptr;
    target = it->second;
  }
  RefOrder* o = FindOpen(target);
  if (o == nullptr || o->account != account || o->market != market) return nullptr;
  // Both ids: the order named by id must carry the client id given.
  if (Raw(id) != 0 && !cid.empty() && o->client_id != Str(cid)) return nullptr;
  return o;
}

void ReferenceEngine::AddToBook(const RefOrder& order) {
  Book& book = books_[Raw(order.market)];
  if (order.side == Side::kBuy) {
    book.bids[order.price].push_back(order);
  } else {
    book.asks[order.price].push_back(order);
  }
  index_[order.id] = Location{order.market, order.side, order.price};
}

void ReferenceEngine::RemoveFromBook(OrderId id) {
  auto it = index_.find(id);
  MB_CHECK(it != index_.end());
  const Location loc = it->second;
  index_.erase(it);
  auto remove = [&](auto& levels) {
    auto l = levels.find(loc.price);
    MB_CHECK(l != levels.end());
    auto& q = l->second;
    auto pos = std::find_if(q.begin(), q.end(), [&](const RefOrder& o) { return o.id == id; });
    MB_CHECK(pos != q.end());
    q.erase(pos);
    if (q.empty()) levels.erase(l);
  };
  Book& book = books_[Raw(loc.market)];
  if (loc.side == Side::kBuy) {
    remove(book.bids);
  } else {
    remove(book.asks);
  }
}

const RefList* ReferenceEngine::ListOf(OrderId id) const {
  auto it = lists_.find(engine::SequenceOfOrder(Raw(id)));
  if (it == lists_.end()) return nullptr;
  for (OrderId o : it->second.orders) {
    if (Raw(o) != 0 && o == id) return &it->second;
  }
  return nullptr;
}

void ReferenceEngine::CancelOpen(OrderId id) {
  RefOrder o = *FindOpen(id);
  if (std::size_t k = WaitingIndex(id); k < waiting_.size()) {
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(k));
  } else {
    RemoveFromBook(id);
  }
  engine::OrderCanceled e;
  e.order_id = o.id;
  e.account = o.account;
  e.market = o.market;
  e.side = o.side;
  e.remaining = o.remaining;  // an iceberg's hidden part included
  e.released = o.locked;
  Emit(e);
  Balance& b = Bal(o.account, SpendAsset(o));
  b.locked -= o.locked;
  b.available += o.locked;
  CloseOrder(o);
}

void ReferenceEngine::CloseOrder(const RefOrder& order) {
  if (const RefList* l = ListOf(order.id)) touched_.push_back(l->id);
  if (order.client_id.empty()) return;
  if (config_.client_order_ids == engine::ClientOrderIds::kBinance) {
    // Binance's rule: the id is free once its order closes.
    auto it = client_ids_.find({order.account, order.client_id});
    if (it != client_ids_.end() && it->second == order.id) client_ids_.erase(it);
    return;
  }
  closed_ids_.push_back(RefReservedClientId{order.account, order.client_id, order.id});
  while (closed_ids_.size() > config_.client_id_memory) {
    const RefReservedClientId& oldest = closed_ids_.front();
    auto it = client_ids_.find({oldest.account, oldest.client_id});
    MB_CHECK(it != client_ids_.end() && it->second == oldest.order_id);
    client_ids_.erase(it);
    closed_ids_.pop_front();
  }
}

void ReferenceEngine::ExpireOrder(RefOrder& order, ExpireReason reason) {
  engine::OrderExpired e;
  e.order_id = order.id;
  e.account = order.account;
  e.market = order.market;
  e.side = order.side;
  e.reason = reason;
  e.remaining = order.remaining;
  e.released = order.locked;
  Emit(e);
  Balance& b = Bal(order.account, SpendAsset(order));
  b.locked -= order.locked;
  b.available += order.locked;
  order.locked = Amount{0};
  CloseOrder(order);
}

// ---------------------------------------------------------------------------
// Book walks and matching

ReferenceEngine::Walk ReferenceEngine::DryWalk(const RefOrder& taker) const {
  const MarketSpec& spec = config_.markets[Raw(taker.market)];
  const i128 npt = spec.notional_per_tick_lot;
  const bool by_quote = IsByQuote(taker);
  auto walk = [&](const auto& levels) {
    Walk w;
    i128 lots_left = taker.remaining.value;
    i128 budget = taker.budget_left.value;
    for (const auto& [price, queue] : levels) {
      if (!Crosses(taker, price)) return w;
      const i128 unit = static_cast<i128>(price.value) * npt;
      // Takes up to `avail` lots here; false when the walk is over.
      auto take = [&](int64_t avail) {
        i128 lots = 0;
        if (by_quote) {
          lots = std::min<i128>(avail, budget / unit);
          if (lots == 0) return false;  // dust
          budget -= lots * unit;
        } else {
          lots = std::min<i128>(lots_left, avail);
          lots_left -= lots;
        }
        w.lots += lots;
        w.base += lots * spec.lot_units;
        w.notional += lots * unit;
        return !(by_quote ? budget == 0 : lots_left == 0);
      };
      for (const RefOrder& maker : queue) {
        if (maker.account == taker.account && taker.stp != StpMode::kNone) {
          if (taker.stp == StpMode::kExpireMaker) continue;  // matching would expire it
          return w;                                          // matching would expire the taker
        }
        if (!take(maker.iceberg.value != 0 ? maker.visible.value : maker.remaining.value)) {
          return w;
        }
      }
      // Past the level's visible parts, its icebergs' hidden parts come back
      // slice after slice at the tail: all of them are there to take.
      for (const RefOrder& maker : queue) {
        if (maker.account == taker.account && taker.stp != StpMode::kNone) continue;
        const int64_t hidden =
            maker.iceberg.value != 0 ? maker.remaining.value - maker.visible.value : 0;
        if (hidden != 0 && !take(hidden)) return w;
      }
    }
    return w;
  };
  const Book& book = books_[Raw(taker.market)];
  return taker.side == Side::kBuy ? walk(book.asks) : walk(book.bids);
}

ReferenceEngine::MatchOutcome ReferenceEngine::Match(RefOrder& taker) {
  const MarketSpec& spec = config_.markets[Raw(taker.market)];
  const i128 npt = spec.notional_per_tick_lot;
  const bool by_quote = IsByQuote(taker);
  const bool taker_buys = taker.side == Side::kBuy;

  auto run = [&](auto& levels) -> MatchOutcome {
    while (!levels.empty()) {
      auto level = levels.begin();
      const Price price = level->first;
      if (!Crosses(taker, price)) return MatchOutcome::kOpen;
      auto& queue = level->second;
      RefOrder& maker = queue.front();
      const bool iceberg = maker.iceberg.value != 0;
      const int64_t shown = iceberg ? maker.visible.value : maker.remaining.value;

      // Self-trade prevention: the taker's mode decides.
      if (maker.account == taker.account && taker.stp != StpMode::kNone) {
        if (taker.stp == StpMode::kExpireTaker) {
          ExpireOrder(taker, ExpireReason::kSelfTradePrevention);
          return MatchOutcome::kExpired;
        }
        RefOrder gone = maker;
        queue.pop_front();
        index_.erase(gone.id);
        if (queue.empty()) levels.erase(level);
        ExpireOrder(gone, ExpireReason::kSelfTradePrevention);
        if (taker.stp == StpMode::kExpireBoth) {
          ExpireOrder(taker, ExpireReason::kSelfTradePrevention);
          return MatchOutcome::kExpired;
        }
        continue;
      }

      // Fill size.
      const i128 unit = static_cast<i128>(price.value) * npt;
      int64_t lots = 0;
      if (by_quote) {
        lots = Narrow(std::min<i128>(shown, taker.budget_left.value / unit));
        if (lots == 0) {
          // Dust: the budget cannot buy one lot here. Having bought something,
          // the order has spent its budget (not met the end of the book).
          return taker.budget_left < taker.quote_qty ? MatchOutcome::kBudgetSpent
                                                     : MatchOutcome::kOpen;
        }
      } else {
        lots = std::min(taker.remaining.value, shown);
      }
      const int64_t base = Narrow(static_cast<i128>(lots) * spec.lot_units);
      const int64_t notional = Narrow(static_cast<i128>(lots) * unit);

      const AccountId buyer = taker_buys ? taker.account : maker.account;
      const AccountId seller = taker_buys ? maker.account : taker.account;
      const int32_t buyer_bps = taker_buys ? spec.taker_fee_bps : spec.maker_fee_bps;
      const int32_t seller_bps = taker_buys ? spec.maker_fee_bps : spec.taker_fee_bps;
      const int64_t buyer_fee = FeeCeil(base, buyer_bps);
      const int64_t seller_fee = FeeCeil(notional, seller_bps);

      // The orders.
      maker.remaining.value -= lots;
      if (iceberg) maker.visible.value -= lots;
      maker.locked.value -= maker.side == Side::kBuy ? notional : base;
      if (by_quote) {
        taker.budget_left.value -= notional;
      } else {
        taker.remaining.value -= lots;
      }
      taker.locked.value -= taker_buys ? notional : base;
      MB_CHECK(maker.locked.value >= 0 && taker.locked.value >= 0);

      // The balances.
      Bal(buyer, spec.quote).locked.value -= notional;
      Bal(buyer, spec.base).available.value += base - buyer_fee;
      Bal(seller, spec.base).locked.value -= base;
      Bal(seller, spec.quote).available.value += notional - seller_fee;
      Bal(config_.fee_account, spec.base).available.value += buyer_fee;
      Bal(config_.fee_account, spec.quote).available.value += seller_fee;

      const bool maker_filled = maker.remaining.value == 0;
      const bool taker_filled =
          by_quote ? taker.budget_left.value == 0 : taker.remaining.value == 0;
      Amount released{0};
      if (taker_filled) {
        // Price improvement of a buy: the surplus lock comes back with the last fill.
        released = taker.locked;
        taker.locked = Amount{0};
        Balance& b = Bal(taker.account, SpendAsset(taker));
        b.locked -= released;
        b.available += released;
      }

      engine::Trade t;
      t.trade_id = TradeId{next_trade_id_++};
      t.market = taker.market;
      t.taker_side = taker.side;
      t.maker_order_id = maker.id;
      t.taker_order_id = taker.id;
      t.maker_account = maker.account;
      t.taker_account = taker.account;
      t.price = price;
      t.qty = Qty{lots};
      t.base_qty = Amount{base};
      t.notional = Amount{notional};
      t.maker_fee = Amount{taker_buys ? seller_fee : buyer_fee};
      t.taker_fee = Amount{taker_buys ? buyer_fee : seller_fee};
      t.taker_released = released;
      t.maker_filled = maker_filled;
      t.taker_filled = taker_filled;
      Emit(t);
      OnTrade(taker.market, price);
      for (const auto& [id, done] :
           {std::pair{maker.id, maker_filled}, std::pair{taker.id, taker_filled}}) {
        if (const RefList* l = ListOf(id)) {
          touched_.push_back(l->id);
          if (done) filled_.push_back(id);
        }
      }

      if (maker_filled) {
        RefOrder gone = maker;
        queue.pop_front();
        index_.erase(gone.id);
        if (queue.empty()) levels.erase(level);
        MB_CHECK(gone.locked.value == 0);  // resting orders lock exactly what they spend
        CloseOrder(gone);
      } else if (iceberg && maker.visible.value == 0) {
        // The next slice, at the level's tail.
        RefOrder refilled = maker;
        queue.pop_front();
        refilled.visible = Qty{std::min(refilled.iceberg.value, refilled.remaining.value)};
        engine::IcebergRefilled r;
        r.order_id = refilled.id;
        r.account = refilled.account;
        r.market = refilled.market;
        r.side = refilled.side;
        r.price = price;
        r.visible = refilled.visible;
        r.hidden = Qty{refilled.remaining.value - refilled.visible.value};
        Emit(r);
        queue.push_back(refilled);
      }
      if (taker_filled) return MatchOutcome::kFilled;
    }
    return MatchOutcome::kOpen;
  };
  Book& book = books_[Raw(taker.market)];
  return taker_buys ? run(book.asks) : run(book.bids);
}

void ReferenceEngine::Finish(RefOrder& taker, MatchOutcome outcome) {
  switch (outcome) {
    case MatchOutcome::kFilled:
      CloseOrder(taker);
      return;
    case MatchOutcome::kExpired:
      return;  // Match expired it
    case MatchOutcome::kBudgetSpent:
      return ExpireOrder(taker, ExpireReason::kQuoteBudgetSpent);
    case MatchOutcome::kOpen:
      break;
  }
  if (!NoLimit(taker.type) && taker.tif == TimeInForce::kGtc) {
    // A buy that filled below its limit returns the surplus now: a resting
    // order locks exactly what it can still spend.
    Amount released{0};
    if (taker.side == Side::kBuy) {
      const MarketSpec& spec = config_.markets[Raw(taker.market)];
      const int64_t need = Narrow(static_cast<i128>(taker.price.value) * taker.remaining.value *
                                  spec.notional_per_tick_lot);
      released = Amount{taker.locked.value - need};
      MB_CHECK(released.value >= 0);
      taker.locked = Amount{need};
      Balance& b = Bal(taker.account, SpendAsset(taker));
      b.locked -= released;
      b.available += released;
    }
    engine::OrderRested r;
    r.order_id = taker.id;
    r.account = taker.account;
    r.market = taker.market;
    r.side = taker.side;
    r.remaining = taker.remaining;
    r.released = released;
    Emit(r);
    // An iceberg shows its first slice.
    if (taker.iceberg.value != 0) {
      taker.visible = Qty{std::min(taker.iceberg.value, taker.remaining.value)};
    }
    AddToBook(taker);
    return;
  }
  ExpireOrder(taker,
              NoLimit(taker.type) ? ExpireReason::kNoLiquidity : ExpireReason::kIocRemainder);
}

// ---------------------------------------------------------------------------
// Conditional orders

void ReferenceEngine::OnTrade(MarketId market, Price price) {
  last_price_[Raw(market)] = price;
  if (range_high_.value == 0 || range_market_ != market) {
    range_market_ = market;
    range_low_ = range_high_ = price;
  } else {
    range_low_ = std::min(range_low_, price);
    range_high_ = std::max(range_high_, price);
  }
  check_triggers_ = true;
  trigger_market_ = market;
  for (RefWaiting& w : waiting_) {
    if (w.order.market != market || w.delta == 0) continue;
    if (!w.active) {
      // The activation price reached: tracking starts at this trade's price.
      if (StopReached(w.order, w.stop, price)) {
        w.active = true;
        w.extreme = price;
      }
      continue;
    }
    const bool better =
        w.order.side == Side::kBuy ? price.value < w.extreme.value : price.value > w.extreme.value;
    if (w.extreme.value == 0 || better) w.extreme = price;
  }
}

bool ReferenceEngine::TriggerOldest(MarketId market) {
  const Price last = last_price_[Raw(market)];
  // A plain stop sees every trade price of this command in the market.
  Price high = last;
  Price low = last;
  if (range_high_.value != 0 && range_market_ == market) {
    high = std::max(high, range_high_);
    low = std::min(low, range_low_);
  }
  for (std::size_t k = 0; k < waiting_.size(); ++k) {
    const RefWaiting& w = waiting_[k];
    if (w.order.market != market) continue;
    const bool hit = w.delta != 0
                         ? TrailedOut(w, last)
                         : (WaitsForRise(w.order.type, w.order.side) ? w.stop.value <= high.value
                                                                     : w.stop.value >= low.value);
    if (hit) {
      Trigger(k);
      return true;
    }
  }
  return false;
}

void ReferenceEngine::Trigger(std::size_t k) {
  const OrderId id = waiting_[k].order.id;
  // An OCO order that triggers cancels its sibling first.
  if (const RefList* l = ListOf(id); l != nullptr && l->type != engine::ListType::kOto) {
    const int first = l->type == engine::ListType::kOco ? 0 : 1;
    const OrderId other = l->orders[first] == id ? l->orders[first + 1] : l->orders[first];
    if (FindOpen(other) != nullptr) CancelOpen(other);
  }
  k = WaitingIndex(id);
  RefOrder o = waiting_[k].order;
  waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(k));
  const MarketSpec& spec = config_.markets[Raw(o.market)];
  // What it needs locked from now: what it locked waiting as a lone order
  // (an OCO order that shared its pair's lock: the rest of it now), a
  // stop-market buy what walking the book for its quantity costs.
  i128 need = 0;
  if (o.side == Side::kSell) {
    need = static_cast<i128>(o.remaining.value) * spec.lot_units;
  } else if (!NoLimit(o.type)) {
    need = static_cast<i128>(o.price.value) * o.remaining.value * spec.notional_per_tick_lot;
  } else {
    need = DryWalk(o).notional;
  }
  const i128 lock = need - o.locked.value;
  const bool cannot_pay = !FitsInt64(need) || lock > Bal(o.account, SpendAsset(o)).available.value;
  // A triggered fill-or-kill limit order that cannot fill completely expires whole.
  const bool cannot_fill =
      !NoLimit(o.type) && o.tif == TimeInForce::kFok && DryWalk(o).lots < o.remaining.value;
  engine::OrderTriggered e;
  e.order_id = o.id;
  e.account = o.account;
  e.market = o.market;
  e.side = o.side;
  e.last_price = last_price_[Raw(o.market)];
  e.lock_delta = Amount{cannot_pay ? 0 : static_cast<int64_t>(lock)};
  Emit(e);
  if (!cannot_pay && lock != 0) {
    Balance& b = Bal(o.account, SpendAsset(o));
    b.available.value -= static_cast<int64_t>(lock);
    b.locked.value += static_cast<int64_t>(lock);
    o.locked.value += static_cast<int64_t>(lock);
  }
  if (cannot_pay) return ExpireOrder(o, ExpireReason::kInsufficientBalance);
  if (cannot_fill) return ExpireOrder(o, ExpireReason::kFokNotFillable);
  Finish(o, Match(o));
}

// ---------------------------------------------------------------------------
// Commands

void ReferenceEngine::DoPlace(const engine::PlaceOrder& c) {
  Admission a = Admit(c, OrderId{seq_}, true, true);
  if (a.reason != RejectReason::kNone) {
    return Reject(CommandType::kPlaceOrder, a.reason, c.account, c.market, OrderId{0}, a.existing,
                  c.client_order_id);
  }
  Enter(c, a.order, a.lock, a.fok_unfillable);
}

ReferenceEngine::Admission ReferenceEngine::Admit(const engine::PlaceOrder& c, OrderId id,
                                                  bool check_balance, bool check_trigger) {
  Admission adm;
  auto reject = [&](RejectReason reason, uint64_t existing = 0) {
    adm.reason = reason;
    adm.existing = existing;
    return adm;
  };
  // 1. Who and where.
  if (Raw(c.market) >= config_.markets.size()) return reject(RejectReason::kUnknownMarket);
  if (Raw(c.account) >= config_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (c.account == config_.fee_account) return reject(RejectReason::kUnauthorized);
  // 2. Market status.
  if (status_[Raw(c.market)] != MarketStatus::kTrading) {
    return reject(RejectReason::kMarketNotTrading);
  }
  const MarketSpec& spec = config_.markets[Raw(c.market)];
  // 3. Type. READING (Q3): any enum value out of range rejects, the ignored tif of
  // a MARKET order included; "has qty" / "has quote_qty" means non-zero.
  if (Raw(c.side) > 1 || Raw(c.type) > 6 || Raw(c.tif) > 2 || Raw(c.stp) > 3) {
    return reject(RejectReason::kInvalidOrderType);
  }
  if (c.type == OrderType::kLimitMaker && c.tif != TimeInForce::kGtc) {
    return reject(RejectReason::kInvalidOrderType);
  }
  const bool is_limit = !NoLimit(c.type);
  const bool is_stop = IsStop(c.type);
  if (!is_limit && (c.qty.value != 0) == (c.quote_qty.value != 0)) {
    return reject(RejectReason::kInvalidOrderType);
  }
  if (is_limit && c.quote_qty.value != 0) return reject(RejectReason::kInvalidOrderType);
  // A stop-market order is by quantity only.
  if (is_stop && c.quote_qty.value != 0) return reject(RejectReason::kInvalidOrderType);
  // 3b. The stop fields: stops only; a trailing delta of 1..9999 basis points;
  // a stop price in 1..max_price, optional (0) for a trailing stop.
  if (c.trailing_delta != 0 && (!is_stop || c.trailing_delta < 1 || c.trailing_delta > 9'999)) {
    return reject(RejectReason::kInvalidTrailingDelta);
  }
  if (is_stop) {
    const int64_t lowest = c.trailing_delta != 0 ? 0 : 1;
    if (c.stop_price.value < lowest || c.stop_price > spec.max_price) {
      return reject(RejectReason::kInvalidStopPrice);
    }
  } else if (c.stop_price.value != 0) {
    return reject(RejectReason::kInvalidStopPrice);
  }
  // 4. Client order id.
  const std::string cid = Str(c.client_order_id);
  if (!cid.empty()) {
    auto it = client_ids_.find({c.account, cid});
    if (it != client_ids_.end()) {
      return reject(RejectReason::kDuplicateClientOrderId, Raw(it->second));
    }
  }
  // 5. Price, quantity, notional.
  const bool by_quote = !is_limit && c.quote_qty.value != 0;
  i128 limit_notional = 0;
  if (is_limit) {
    if (c.price.value < 1 || c.price > spec.max_price) return reject(RejectReason::kInvalidPrice);
    if (c.qty < spec.min_qty || c.qty > spec.max_qty) {
      return reject(RejectReason::kInvalidQuantity);
    }
    limit_notional = static_cast<i128>(c.price.value) * c.qty.value * spec.notional_per_tick_lot;
    if (!FitsInt64(limit_notional)) return reject(RejectReason::kOverflow);
    if (limit_notional < spec.min_notional.value) return reject(RejectReason::kMinNotional);
  } else if (!by_quote) {
    if (c.qty < spec.min_qty || c.qty > spec.max_qty) {
      return reject(RejectReason::kInvalidQuantity);
    }
  } else {
    if (c.quote_qty.value <= 0) return reject(RejectReason::kInvalidQuantity);
    if (c.quote_qty < spec.min_notional) return reject(RejectReason::kMinNotional);
  }
  // 5a. An iceberg: a GTC LIMIT / LIMIT_MAKER, its slice at least the minimum
  // quantity and below its quantity.
  if (c.iceberg_qty.value != 0 &&
      ((c.type != OrderType::kLimit && c.type != OrderType::kLimitMaker) ||
       c.tif != TimeInForce::kGtc || c.iceberg_qty < spec.min_qty || c.iceberg_qty >= c.qty)) {
    return reject(RejectReason::kInvalidIcebergQty);
  }

  // The order as the engine holds it. READING (Q2): a MARKET order's price and
  // tif are ignored, not rejected: it holds price 0 and tif IOC (so do
  // STOP_LOSS and TAKE_PROFIT).
  RefOrder o;
  o.id = id;
  o.account = c.account;
  o.market = c.market;
  o.side = c.side;
  o.type = c.type;
  o.tif = is_limit ? c.tif : TimeInForce::kIoc;
  o.stp = c.stp;
  o.price = is_limit ? c.price : Price{0};
  o.qty = by_quote ? Qty{0} : c.qty;
  o.remaining = o.qty;
  o.quote_qty = c.quote_qty;  // 0 unless by quote (check 3)
  o.budget_left = o.quote_qty;
  o.created_ns = now_ns_;
  o.client_id = cid;
  o.iceberg = c.iceberg_qty;

  // 5b. A stop whose stop price the last trade price already meets.
  const Price last = last_price_[Raw(c.market)];
  if (check_trigger && is_stop && c.stop_price.value != 0 && last.value != 0 &&
      StopReached(o, c.stop_price, last)) {
    return reject(RejectReason::kWouldTriggerImmediately);
  }
  // 6. Post-only.
  if (c.type == OrderType::kLimitMaker) {
    const bool crosses = c.side == Side::kBuy
                             ? (BestAsk(c.market).has_value() && c.price >= *BestAsk(c.market))
                             : (BestBid(c.market).has_value() && c.price <= *BestBid(c.market));
    if (crosses) return reject(RejectReason::kWouldTakeLiquidity);
  }

  // 7. The lock. A stop-market buy locks nothing until it triggers.
  i128 lock = 0;
  if (c.side == Side::kBuy) {
    if (is_limit) {
      lock = limit_notional;
    } else if (by_quote) {
      lock = c.quote_qty.value;
    } else if (!is_stop) {
      lock = DryWalk(o).notional;
    }
  } else {
    if (by_quote) {
      lock = DryWalk(o).base;
    } else {
      lock = static_cast<i128>(c.qty.value) * spec.lot_units;
    }
  }
  if (!FitsInt64(lock)) return reject(RejectReason::kOverflow);
  const AssetId spend = SpendAsset(o);
  if (check_balance && lock > Bal(c.account, spend).available.value) {
    return reject(RejectReason::kInsufficientBalance);
  }
  // 8. Fill or kill: one that cannot fill completely is accepted, then
  // expires before matching. A stop's is looked at when it triggers.
  adm.fok_unfillable =
      is_limit && !is_stop && c.tif == TimeInForce::kFok && DryWalk(o).lots < c.qty.value;
  adm.order = o;
  adm.lock = static_cast<int64_t>(lock);
  return adm;
}

void ReferenceEngine::Enter(const engine::PlaceOrder& c, RefOrder o, int64_t lock,
                            bool fok_unfillable) {
  const std::string cid = o.client_id;
  const AssetId spend = SpendAsset(o);
  const bool is_stop = IsStop(o.type);
  const Price last = last_price_[Raw(o.market)];
  // Accepted.
  o.locked = Amount{lock};
  Balance& b = Bal(o.account, spend);
  b.available -= o.locked;
  b.locked += o.locked;
  engine::OrderAccepted a;
  a.order_id = o.id;
  a.terms.account = o.account;
  a.terms.market = o.market;
  a.terms.side = o.side;
  a.terms.type = o.type;
  a.terms.tif = o.tif;
  a.terms.stp = o.stp;
  a.terms.price = o.price;
  a.terms.qty = o.qty;
  a.quote_qty = o.quote_qty;
  a.locked = o.locked;
  a.client_order_id = c.client_order_id;
  Emit(a);
  if (!cid.empty()) client_ids_[{o.account, cid}] = o.id;

  if (is_stop) {
    engine::OrderArmed armed;
    armed.order_id = o.id;
    armed.account = o.account;
    armed.market = o.market;
    armed.side = o.side;
    armed.stop_price = c.stop_price;
    armed.trailing_delta = c.trailing_delta;
    Emit(armed);
    RefWaiting w;
    w.order = o;
    w.stop = c.stop_price;
    w.delta = c.trailing_delta;
    // Without an activation price a trailing stop tracks from the last price
    // at placement (from the next trade when there is none).
    w.active = w.delta != 0 && w.stop.value == 0;
    w.extreme = w.active ? last : Price{0};
    // By id: a list's later orders have ids far above the sequence.
    auto at = std::lower_bound(waiting_.begin(), waiting_.end(), w.order.id,
                               [](const RefWaiting& x, OrderId v) { return x.order.id < v; });
    waiting_.insert(at, w);
    return;
  }
  if (o.iceberg.value != 0) {
    engine::IcebergAccepted ice;
    ice.order_id = o.id;
    ice.account = o.account;
    ice.market = o.market;
    ice.side = o.side;
    ice.slice = o.iceberg;
    Emit(ice);
  }
  if (fok_unfillable) return ExpireOrder(o, ExpireReason::kFokNotFillable);
  Finish(o, Match(o));
}

// ---------------------------------------------------------------------------
// Order lists

namespace {

// The OCO pair of a list: OCO [0] and [1], OTOCO [1] and [2]; OTO has none.
bool Pair(const RefList& l, OrderId* above, OrderId* below) {
  if (l.type == engine::ListType::kOto) return false;
  const int first = l.type == engine::ListType::kOco ? 0 : 1;
  *above = l.orders[first];
  *below = l.orders[first + 1];
  return true;
}

// SELL: LIMIT_MAKER / TAKE_PROFIT(_LIMIT) above, STOP_LOSS(_LIMIT) below;
// BUY the other way round.
bool FitsAbove(const engine::PlaceOrder& p) {
  const bool maker_or_profit = p.type == OrderType::kLimitMaker ||
                               p.type == OrderType::kTakeProfit ||
                               p.type == OrderType::kTakeProfitLimit;
  const bool loss = p.type == OrderType::kStopLoss || p.type == OrderType::kStopLossLimit;
  return p.side == Side::kSell ? maker_or_profit : loss;
}
bool FitsBelow(const engine::PlaceOrder& p) {
  const bool maker_or_profit = p.type == OrderType::kLimitMaker ||
                               p.type == OrderType::kTakeProfit ||
                               p.type == OrderType::kTakeProfitLimit;
  const bool loss = p.type == OrderType::kStopLoss || p.type == OrderType::kStopLossLimit;
  return p.side == Side::kBuy ? maker_or_profit : loss;
}

// Where an OCO order sits (LIMIT_MAKER) or triggers; 0 for a trailing stop
// without a stop price.
Price Level(const engine::PlaceOrder& p) {
  return p.type == OrderType::kLimitMaker ? p.price : p.stop_price;
}

}  // namespace

void ReferenceEngine::DoPlaceList(const engine::PlaceOrderList& c) {
  auto reject = [&](RejectReason reason, uint64_t existing = 0) {
    Reject(CommandType::kPlaceOrderList, reason, c.account, c.market, OrderId{0}, existing,
           c.list_client_order_id);
  };
  if (Raw(c.type) > 2) return reject(RejectReason::kInvalidOrderList);
  const int n = c.type == engine::ListType::kOtoco ? 3 : 2;
  const int active = c.type == engine::ListType::kOco ? 2 : 1;
  engine::PlaceOrder orders[3];
  for (int k = 0; k < n; ++k) {
    const engine::ListOrder& lo = c.orders[k];
    engine::PlaceOrder& p = orders[k];
    p.account = c.account;
    p.market = c.market;
    p.side = lo.side;
    p.type = lo.type;
    p.tif = NoLimit(lo.type) ? TimeInForce::kIoc : lo.tif;
    p.stp = c.stp;
    p.price = lo.price;
    p.qty = lo.qty;
    p.client_order_id = lo.client_order_id;
    p.stop_price = lo.stop_price;
    p.trailing_delta = lo.trailing_delta;
    p.iceberg_qty = lo.iceberg_qty;
  }
  // The shape.
  if (c.type != engine::ListType::kOto) {
    const int first = c.type == engine::ListType::kOco ? 0 : 1;
    const engine::PlaceOrder& above = orders[first];
    const engine::PlaceOrder& below = orders[first + 1];
    const bool ordered =
        Level(above).value == 0 || Level(below).value == 0 || Level(above) > Level(below);
    if (above.side != below.side || above.qty != below.qty || !FitsAbove(above) ||
        !FitsBelow(below) || !ordered) {
      return reject(RejectReason::kInvalidOrderList);
    }
  }
  if (c.type != engine::ListType::kOco && orders[0].type != OrderType::kLimit &&
      orders[0].type != OrderType::kLimitMaker) {
    return reject(RejectReason::kInvalidOrderList);
  }
  // Client ids: distinct within the list; the list's own free among the
  // account's open lists.
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < k; ++j) {
      if (!orders[k].client_order_id.empty() &&
          orders[k].client_order_id == orders[j].client_order_id) {
        return reject(RejectReason::kDuplicateClientOrderId);
      }
    }
  }
  const std::string list_cid = Str(c.list_client_order_id);
  if (!list_cid.empty()) {
    for (const auto& [id, l] : lists_) {
      if (l.account == c.account && l.client_id == list_cid) {
        return reject(RejectReason::kDuplicateClientOrderId, id);
      }
    }
  }
  // Each order as a new order, funds aside.
  Admission adm[3];
  for (int k = 0; k < n; ++k) {
    const OrderId id{seq_ + static_cast<uint64_t>(k) * engine::kListOrderStride};
    adm[k] = Admit(orders[k], id, false, true);
    if (adm[k].reason != RejectReason::kNone) {
      return Reject(CommandType::kPlaceOrderList, adm[k].reason, c.account, c.market, OrderId{0},
                    adm[k].existing, orders[k].client_order_id);
    }
  }
  // Funds: an OCO pair shares one lock, its holder's (the LIMIT_MAKER order,
  // else the above one); the other locks only what it needs beyond.
  i128 total = adm[0].lock;
  if (c.type == engine::ListType::kOco) {
    const int holder = orders[1].type == OrderType::kLimitMaker ? 1 : 0;
    const int other = 1 - holder;
    adm[other].lock = std::max<int64_t>(0, adm[other].lock - adm[holder].lock);
    total = static_cast<i128>(adm[0].lock) + adm[1].lock;
  }
  if (total > Bal(c.account, SpendAsset(adm[0].order)).available.value) {
    return reject(RejectReason::kInsufficientBalance);
  }

  RefList l;
  l.id = seq_;
  l.account = c.account;
  l.market = c.market;
  l.type = c.type;
  l.client_id = list_cid;
  for (int k = 0; k < n; ++k) l.orders[k] = adm[k].order.id;
  engine::ListAccepted la;
  la.list_id = l.id;
  la.account = l.account;
  la.market = l.market;
  la.type = l.type;
  la.list_client_order_id = c.list_client_order_id;
  for (int k = 0; k < 3; ++k) la.order_ids[k] = l.orders[k];
  Emit(la);
  lists_[l.id] = l;
  for (int k = 0; k < active; ++k) {
    Enter(orders[k], adm[k].order, adm[k].lock, adm[k].fok_unfillable);
  }
  for (int k = active; k < n; ++k) {
    const engine::PlaceOrder& p = orders[k];
    const RefOrder& o = adm[k].order;
    engine::OrderPending e;
    e.order_id = o.id;
    e.list_id = l.id;
    e.terms.account = o.account;
    e.terms.market = o.market;
    e.terms.side = o.side;
    e.terms.type = o.type;
    e.terms.tif = o.tif;
    e.terms.stp = o.stp;
    e.terms.price = o.price;
    e.terms.qty = o.qty;
    e.stop_price = p.stop_price;
    e.trailing_delta = p.trailing_delta;
    e.iceberg_qty = p.iceberg_qty;
    e.client_order_id = p.client_order_id;
    Emit(e);
    pending_orders_[o.id] = e;
  }
  touched_.push_back(l.id);
}

void ReferenceEngine::DoCancelList(const engine::CancelOrderList& c) {
  auto reject = [&](RejectReason reason) {
    Reject(CommandType::kCancelOrderList, reason, c.account, c.market, OrderId{c.list_id}, 0,
           c.list_client_order_id);
  };
  if (Raw(c.market) >= config_.markets.size()) return reject(RejectReason::kUnknownMarket);
  if (Raw(c.account) >= config_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (status_[Raw(c.market)] == MarketStatus::kHalted) {
    return reject(RejectReason::kMarketNotTrading);
  }
  const std::string cid = Str(c.list_client_order_id);
  uint64_t id = c.list_id;
  if (id == 0 && !cid.empty()) {
    for (const auto& [lid, l] : lists_) {
      if (l.account == c.account && l.client_id == cid) id = lid;
    }
  }
  auto it = lists_.find(id);
  if (it == lists_.end() || it->second.account != c.account || it->second.market != c.market) {
    return reject(RejectReason::kUnknownOrderList);
  }
  // Both named: the list must carry that client id.
  if (c.list_id != 0 && !cid.empty() && it->second.client_id != cid) {
    return reject(RejectReason::kUnknownOrderList);
  }
  const RefList l = it->second;
  CancelListOrders(l);
  touched_.push_back(l.id);
}

void ReferenceEngine::CancelListOrders(const RefList& l) {
  for (OrderId id : l.orders) {
    if (Raw(id) != 0 && FindOpen(id) != nullptr) CancelOpen(id);
  }
}

void ReferenceEngine::Settle() {
  for (;;) {
    if (!touched_.empty()) {
      std::vector<uint64_t> now;
      now.swap(touched_);
      std::sort(now.begin(), now.end());
      now.erase(std::unique(now.begin(), now.end()), now.end());
      for (uint64_t id : now) SettleList(id);
      continue;
    }
    if (!check_triggers_) break;
    check_triggers_ = false;
    if (TriggerOldest(trigger_market_)) check_triggers_ = true;
  }
  filled_.clear();
}

void ReferenceEngine::SettleList(uint64_t list_id) {
  auto it = lists_.find(list_id);
  if (it == lists_.end()) return;
  const RefList l = it->second;
  auto open = [&](OrderId id) { return Raw(id) != 0 && FindOpen(id) != nullptr; };
  auto pending = [&](OrderId id) { return Raw(id) != 0 && pending_orders_.count(id) != 0; };
  // Executed: traded, or triggered.
  auto executed = [&](OrderId id) {
    const RefOrder* o = FindOpen(id);
    return o->remaining < o->qty || (IsStop(o->type) && WaitingIndex(id) == waiting_.size());
  };
  // (1) The OCO pair, once placed: one executed or closed, the other goes.
  OrderId a{}, b{};
  if (Pair(l, &a, &b) && !pending(a)) {
    OrderId cancel{};
    if (open(a) != open(b)) {
      const OrderId left = open(a) ? a : b;
      if (!executed(left)) cancel = left;
    } else if (open(a) && (executed(a) || executed(b))) {
      cancel = executed(a) ? b : a;
    }
    if (Raw(cancel) != 0) CancelOpen(cancel);
  }
  // (2) OTO / OTOCO: the working order filled in this command places the
  // pending orders; closed otherwise, they go with the list.
  bool working_lost = false;
  if (l.type != engine::ListType::kOco && !open(l.orders[0]) && pending(l.orders[1])) {
    if (std::find(filled_.begin(), filled_.end(), l.orders[0]) != filled_.end()) {
      Activate(l);
    } else {
      working_lost = true;
    }
  }
  // (3) Nothing open or pending: the list is done.
  bool live = false;
  for (OrderId id : l.orders) live = live || open(id) || (pending(id) && !working_lost);
  if (live) return;
  engine::ListDone d;
  d.list_id = l.id;
  d.account = l.account;
  d.market = l.market;
  Emit(d);
  for (OrderId id : l.orders) pending_orders_.erase(id);
  lists_.erase(l.id);
}

void ReferenceEngine::Activate(const RefList& l) {
  const int n = l.type == engine::ListType::kOto ? 2 : 3;
  engine::PlaceOrder orders[3];
  for (int k = 1; k < n; ++k) {
    const engine::OrderPending& e = pending_orders_.at(l.orders[k]);
    engine::PlaceOrder& p = orders[k];
    p.account = e.terms.account;
    p.market = e.terms.market;
    p.side = e.terms.side;
    p.type = e.terms.type;
    p.tif = e.terms.tif;
    p.stp = e.terms.stp;
    p.price = e.terms.price;
    p.qty = e.terms.qty;
    p.client_order_id = e.client_order_id;
    p.stop_price = e.stop_price;
    p.trailing_delta = e.trailing_delta;
    p.iceberg_qty = e.iceberg_qty;
  }
  // The checks of a new order, funds together, the stop condition not: a
  // stop placed now whose condition holds triggers at once.
  Admission adm[3];
  RejectReason reason = RejectReason::kNone;
  uint64_t existing = 0;
  for (int k = 1; k < n && reason == RejectReason::kNone; ++k) {
    adm[k] = Admit(orders[k], l.orders[k], false, false);
    reason = adm[k].reason;
    existing = adm[k].existing;
  }
  if (reason == RejectReason::kNone) {
    i128 total = adm[1].lock;
    if (l.type == engine::ListType::kOtoco) {
      const int holder = orders[2].type == OrderType::kLimitMaker ? 2 : 1;
      const int other = 3 - holder;
      adm[other].lock = std::max<int64_t>(0, adm[other].lock - adm[holder].lock);
      total = static_cast<i128>(adm[1].lock) + adm[2].lock;
    }
    if (total > Bal(l.account, SpendAsset(adm[1].order)).available.value) {
      reason = RejectReason::kInsufficientBalance;
    }
  }
  for (int k = 1; k < n; ++k) pending_orders_.erase(l.orders[k]);
  if (reason != RejectReason::kNone) {
    for (int k = 1; k < n; ++k) {
      Reject(CommandType::kPlaceOrderList, reason, l.account, l.market, l.orders[k], existing,
             orders[k].client_order_id);
    }
    return;
  }
  for (int k = 1; k < n; ++k) Enter(orders[k], adm[k].order, adm[k].lock, adm[k].fok_unfillable);
  check_triggers_ = true;
  trigger_market_ = l.market;
}

void ReferenceEngine::DoCancel(const engine::CancelOrder& c) {
  // Rejected.order_id is the command's order_id as given.
  auto reject = [&](RejectReason reason) {
    Reject(CommandType::kCancelOrder, reason, c.account, c.market, c.order_id, 0,
           c.orig_client_order_id);
  };
  if (Raw(c.market) >= config_.markets.size()) return reject(RejectReason::kUnknownMarket);
  if (Raw(c.account) >= config_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (status_[Raw(c.market)] == MarketStatus::kHalted) {
    return reject(RejectReason::kMarketNotTrading);
  }
  RefOrder* target = ResolveTarget(c.account, c.market, c.order_id, c.orig_client_order_id);
  if (target == nullptr) return reject(RejectReason::kUnknownOrder);
  // cancelRestrictions: ONLY_NEW wants nothing executed, ONLY_PARTIALLY_FILLED something.
  const bool executed = target->remaining < target->qty;
  if ((c.restriction == engine::CancelRestriction::kOnlyNew && executed) ||
      (c.restriction == engine::CancelRestriction::kOnlyPartiallyFilled && !executed)) {
    return reject(RejectReason::kCancelRestricted);
  }
  // An order of a list takes the whole list with it.
  if (const RefList* l = ListOf(target->id)) {
    const RefList list = *l;
    CancelListOrders(list);
    touched_.push_back(list.id);
    return;
  }
  CancelOpen(target->id);
}

void ReferenceEngine::DoCancelAll(const engine::CancelAll& c) {
  auto reject = [&](RejectReason reason) {
    Reject(CommandType::kCancelAll, reason, c.account, c.market, OrderId{0}, 0, ClientOrderId{});
  };
  if (Raw(c.market) >= config_.markets.size()) return reject(RejectReason::kUnknownMarket);
  if (Raw(c.account) >= config_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (status_[Raw(c.market)] == MarketStatus::kHalted) {
    return reject(RejectReason::kMarketNotTrading);
  }
  // The account's orders in the market, resting or waiting, by id.
  std::vector<OrderId> ids;
  for (const auto& [id, loc] : index_) {
    if (loc.market != c.market) continue;
    if (FindOpen(id)->account == c.account) ids.push_back(id);
  }
  for (const RefWaiting& w : waiting_) {
    if (w.order.market == c.market && w.order.account == c.account) ids.push_back(w.order.id);
  }
  std::sort(ids.begin(), ids.end());
  if (ids.empty()) return reject(RejectReason::kUnknownOrder);
  for (OrderId id : ids) CancelOpen(id);
}

void ReferenceEngine::DoAmend(const engine::AmendOrder& c) {
  // Rejected.order_id is the command's order_id as given (0 when the target
  // was named by client id).
  auto reject = [&](RejectReason reason) {
    Reject(CommandType::kAmendOrder, reason, c.account, c.market, c.order_id, 0,
           c.orig_client_order_id);
  };
  if (Raw(c.market) >= config_.markets.size()) return reject(RejectReason::kUnknownMarket);
  if (Raw(c.account) >= config_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (status_[Raw(c.market)] != MarketStatus::kTrading) {
    return reject(RejectReason::kMarketNotTrading);
  }
  RefOrder* target = ResolveTarget(c.account, c.market, c.order_id, c.orig_client_order_id);
  if (target == nullptr) return reject(RejectReason::kUnknownOrder);
  // A waiting stop has no place in a book to amend; neither an iceberg nor
  // an order of a list is amended.
  if (WaitingIndex(target->id) < waiting_.size() || target->iceberg.value != 0 ||
      ListOf(target->id) != nullptr) {
    return reject(RejectReason::kInvalidOrderType);
  }
  const OrderId id = target->id;
  const MarketSpec& spec = config_.markets[Raw(c.market)];
  const Price new_price = c.new_price.value == 0 ? target->price : c.new_price;
  const Qty new_qty = c.new_qty.value == 0 ? target->qty : c.new_qty;
  // READING (Q6): "unchanged" compares the effective values with the order's.
  if (new_price == target->price && new_qty == target->qty) {
    return reject(RejectReason::kNoChange);
  }
  // keep_priority: a smaller quantity at the same price, nothing else.
  if (c.keep_priority) {
    if (new_price != target->price) return reject(RejectReason::kInvalidPrice);
    if (new_qty > target->qty) return reject(RejectReason::kQuantityIncrease);
  }
  if (new_price.value < 1 || new_price > spec.max_price) {
    return reject(RejectReason::kInvalidPrice);
  }
  const int64_t filled = target->qty.value - target->remaining.value;
  if (new_qty < spec.min_qty || new_qty > spec.max_qty || new_qty.value <= filled) {
    return reject(RejectReason::kInvalidQuantity);
  }
  const int64_t new_remaining = new_qty.value - filled;
  // Overflow and min notional on new_price x new_qty, as for a new order; the
  // lock on the new remaining quantity.
  const i128 total_notional =
      static_cast<i128>(new_price.value) * new_qty.value * spec.notional_per_tick_lot;
  if (!FitsInt64(total_notional)) return reject(RejectReason::kOverflow);
  if (total_notional < spec.min_notional.value) return reject(RejectReason::kMinNotional);
  const i128 notional =
      static_cast<i128>(new_price.value) * new_remaining * spec.notional_per_tick_lot;
  const i128 new_lock =
      target->side == Side::kBuy ? notional : static_cast<i128>(new_remaining) * spec.lot_units;
  if (!FitsInt64(new_lock)) return reject(RejectReason::kOverflow);
  const int64_t lock_delta = static_cast<int64_t>(new_lock) - target->locked.value;
  const AssetId spend = SpendAsset(*target);

  const bool keeps_priority = new_price == target->price && new_qty < target->qty;
  if (!keeps_priority) {
    if (target->type == OrderType::kLimitMaker) {
      const bool crosses = target->side == Side::kBuy
                               ? (BestAsk(c.market).has_value() && new_price >= *BestAsk(c.market))
                               : (BestBid(c.market).has_value() && new_price <= *BestBid(c.market));
      if (crosses) return reject(RejectReason::kWouldTakeLiquidity);
    }
    if (lock_delta > Bal(c.account, spend).available.value) {
      return reject(RejectReason::kInsufficientBalance);
    }
  }

  // newClientOrderId: refused when another order (open, or reserved closed)
  // holds it; the order's own id changes nothing.
  bool rename = false;
  if (!c.new_client_order_id.empty()) {
    auto holder = client_ids_.find({c.account, Str(c.new_client_order_id)});
    if (holder != client_ids_.end() && holder->second != id) {
      return Reject(CommandType::kAmendOrder, RejectReason::kDuplicateClientOrderId, c.account,
                    c.market, c.order_id, Raw(holder->second), c.orig_client_order_id);
    }
    rename = holder == client_ids_.end();
  }

  engine::OrderAmended e;
  e.order_id = id;
  e.account = target->account;
  e.market = target->market;
  e.side = target->side;
  e.new_price = new_price;
  e.new_qty = new_qty;
  e.new_remaining = Qty{new_remaining};
  e.lock_delta = Amount{lock_delta};
  e.keeps_priority = keeps_priority;
  Emit(e);
  Balance& b = Bal(c.account, spend);
  b.available.value -= lock_delta;
  b.locked.value += lock_delta;

  if (rename) {
    engine::ClientOrderIdChanged r;
    r.order_id = id;
    r.account = target->account;
    r.market = target->market;
    r.client_order_id = c.new_client_order_id;
    Emit(r);
    // The previous id is free at once.
    if (!target->client_id.empty()) {
      auto old = client_ids_.find({target->account, target->client_id});
      if (old != client_ids_.end() && old->second == id) client_ids_.erase(old);
    }
    target->client_id = Str(c.new_client_order_id);
    client_ids_[{target->account, target->client_id}] = id;
  }

  if (keeps_priority) {
    target->qty = new_qty;
    target->remaining = Qty{new_remaining};
    target->locked = Amount{static_cast<int64_t>(new_lock)};
    return;
  }
  RefOrder o = *target;
  RemoveFromBook(id);
  o.price = new_price;
  o.qty = new_qty;
  o.remaining = Qty{new_remaining};
  o.locked = Amount{static_cast<int64_t>(new_lock)};
  Finish(o, Match(o));
}

void ReferenceEngine::DoCancelReplace(const engine::CancelReplace& c) {
  // The cancel, then the new order in the same sequence: unless the cancel
  // was refused and the mode stops on failure.
  const std::size_t before = out_.size();
  DoCancel(c.cancel);
  // One event, or one per open order of the list the canceled order was in.
  MB_CHECK(out_.size() > before);
  const bool canceled = std::holds_alternative<engine::OrderCanceled>(out_.back().body);
  if (!canceled && c.mode != engine::CancelReplaceMode::kAllowFailure) return;
  DoPlace(c.place);
}

void ReferenceEngine::DoDeposit(const engine::Deposit& c) {
  auto reject = [&](RejectReason reason, uint64_t existing = 0) {
    Reject(CommandType::kDeposit, reason, c.account, MarketId{0}, OrderId{0}, existing,
           ClientOrderId{});
  };
  if (Raw(c.account) >= config_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (Raw(c.asset) >= config_.assets.size()) return reject(RejectReason::kUnknownAsset);
  if (c.amount.value <= 0) return reject(RejectReason::kInvalidAmount);
  auto dup = transfers_.find(Str(c.ref));
  if (dup != transfers_.end()) return reject(RejectReason::kDuplicateTransfer, Raw(dup->second));
  Balance& b = Bal(c.account, c.asset);
  int64_t sum = 0;
  // The deposit overflows when the account's balance (available + locked) or
  // the asset's supply would not fit.
  if (!CheckedAdd(b.available.value, c.amount.value, &sum) ||
      !CheckedAdd(b.locked.value, sum, &sum) ||
      !CheckedAdd(supply_[Raw(c.asset)].value, c.amount.value, &sum)) {
    return reject(RejectReason::kOverflow);
  }
  engine::Deposited e;
  e.transfer_id = TransferId{seq_};
  e.account = c.account;
  e.asset = c.asset;
  e.amount = c.amount;
  e.ref = c.ref;
  Emit(e);
  b.available += c.amount;
  supply_[Raw(c.asset)] += c.amount;
  transfers_[Str(c.ref)] = e.transfer_id;
}

void ReferenceEngine::DoWithdraw(const engine::Withdraw& c) {
  auto reject = [&](RejectReason reason, uint64_t existing = 0) {
    Reject(CommandType::kWithdraw, reason, c.account, MarketId{0}, OrderId{0}, existing,
           ClientOrderId{});
  };
  if (Raw(c.account) >= config_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (Raw(c.asset) >= config_.assets.size()) return reject(RejectReason::kUnknownAsset);
  if (c.amount.value <= 0) return reject(RejectReason::kInvalidAmount);
  auto dup = transfers_.find(Str(c.ref));
  if (dup != transfers_.end()) return reject(RejectReason::kDuplicateTransfer, Raw(dup->second));
  Balance& b = Bal(c.account, c.asset);
  if (c.amount > b.available) return reject(RejectReason::kInsufficientBalance);
  engine::Withdrawn e;
  e.transfer_id = TransferId{seq_};
  e.account = c.account;
  e.asset = c.asset;
  e.amount = c.amount;
  e.ref = c.ref;
  Emit(e);
  b.available -= c.amount;
  supply_[Raw(c.asset)] -= c.amount;
  transfers_[Str(c.ref)] = e.transfer_id;
}

// A transfer to another venue: the amount leaves available for a hold of its
// own; the supply does not move until the destination credits it.
void ReferenceEngine::DoTransferOut(const engine::TransferOut& c) {
  auto reject = [&](RejectReason reason, uint64_t existing = 0) {
    Reject(CommandType::kTransferOut, reason, c.account, MarketId{0}, OrderId{0}, existing,
           ClientOrderId{});
  };
  if (Raw(c.account) >= config_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (Raw(c.asset) >= config_.assets.size()) return reject(RejectReason::kUnknownAsset);
  const bool amount_ok = c.amount.value > 0;
  const bool fee_ok = c.fee.value >= 0 && c.fee.value <= c.amount.value;
  if (!amount_ok || !fee_ok) return reject(RejectReason::kInvalidAmount);
  // One reference space for deposits, withdrawals and transfers out.
  auto dup = transfers_.find(Str(c.ref));
  if (dup != transfers_.end()) return reject(RejectReason::kDuplicateTransfer, Raw(dup->second));
  Balance& b = Bal(c.account, c.asset);
  if (b.available.value < c.amount.value) return reject(RejectReason::kInsufficientBalance);

  engine::TransferHeld e;
  e.transfer_id = TransferId{seq_};
  e.account = c.account;
  e.asset = c.asset;
  e.amount = c.amount;
  e.fee = c.fee;
  e.ref = c.ref;
  e.address = c.address;
  Emit(e);
  b.available.value -= c.amount.value;
  held_[Raw(c.asset)].value += c.amount.value;
  transfers_[Str(c.ref)] = e.transfer_id;
  RefPendingTransfer p;
  p.id = e.transfer_id;
  p.account = c.account;
  p.asset = c.asset;
  p.amount = c.amount;
  p.fee = c.fee;
  p.ref = Str(c.ref);
  p.address = std::string(c.address.view());
  pending_[p.id] = p;
}

// The destination's answer: completed (the hold leaves this venue, its fee
// stays with the fee account) or refunded (the hold returns to available).
void ReferenceEngine::DoResolveTransfer(const engine::ResolveTransfer& c) {
  auto it = pending_.find(c.transfer_id);
  if (it == pending_.end()) {
    // READING (Q13): never held, or resolved already.
    return Reject(CommandType::kResolveTransfer, RejectReason::kUnknownTransfer, AccountId{0},
                  MarketId{0}, OrderId{0}, Raw(c.transfer_id), ClientOrderId{});
  }
  const RefPendingTransfer p = it->second;
  if (!c.completed && Raw(c.reason) > Raw(engine::RefundReason::kRefused)) {
    return Reject(CommandType::kResolveTransfer, RejectReason::kInvalidStatus, p.account,
                  MarketId{0}, OrderId{0}, Raw(c.transfer_id), ClientOrderId{});
  }
  const std::size_t a = Raw(p.asset);
  if (c.completed) {
    engine::TransferCompleted e;
    e.transfer_id = p.id;
    e.account = p.account;
    e.asset = p.asset;
    e.amount = p.amount;
    e.fee = p.fee;
    Emit(e);
    held_[a].value -= p.amount.value;
    supply_[a].value -= p.amount.value - p.fee.value;  // what left for the destination
    Bal(config_.fee_account, p.asset).available.value += p.fee.value;
  } else {
    engine::TransferRefunded e;
    e.transfer_id = p.id;
    e.account = p.account;
    e.asset = p.asset;
    e.amount = p.amount;
    e.reason = c.reason;
    Emit(e);
    held_[a].value -= p.amount.value;
    Bal(p.account, p.asset).available.value += p.amount.value;
  }
  pending_.erase(it);
}

void ReferenceEngine::DoSetMarketStatus(const engine::SetMarketStatus& c) {
  auto reject = [&](RejectReason reason) {
    Reject(CommandType::kSetMarketStatus, reason, AccountId{0}, c.market, OrderId{0}, 0,
           ClientOrderId{});
  };
  if (Raw(c.market) >= config_.markets.size()) return reject(RejectReason::kUnknownMarket);
  if (Raw(c.status) > 2) return reject(RejectReason::kInvalidStatus);
  engine::MarketStatusChanged e;
  e.market = c.market;
  e.status = c.status;
  Emit(e);
  status_[Raw(c.market)] = c.status;
}

// ---------------------------------------------------------------------------
// Queries

Balance ReferenceEngine::balance(AccountId account, AssetId asset) const {
  auto it = balances_.find(BalanceKey(account, asset));
  return it == balances_.end() ? Balance{} : it->second;
}

engine::MarketStatus ReferenceEngine::market_status(MarketId market) const {
  return status_.at(Raw(market));
}

std::optional<Price> ReferenceEngine::BestBid(MarketId market) const {
  const Book& book = books_.at(Raw(market));
  if (book.bids.empty()) return std::nullopt;
  return book.bids.begin()->first;
}

std::optional<Price> ReferenceEngine::BestAsk(MarketId market) const {
  const Book& book = books_.at(Raw(market));
  if (book.asks.empty()) return std::nullopt;
  return book.asks.begin()->first;
}

std::vector<engine::LevelView> ReferenceEngine::Depth(MarketId market, Side side,
                                                      std::size_t max_levels) const {
  std::vector<engine::LevelView> out;
  auto collect = [&](const auto& levels) {
    for (const auto& [price, queue] : levels) {
      if (out.size() >= max_levels) return;
      engine::LevelView v;
      v.price = price;
      for (const RefOrder& o : queue) {
        v.qty += o.iceberg.value != 0 ? o.visible : o.remaining;
        ++v.orders;
      }
      out.push_back(v);
    }
  };
  const Book& book = books_.at(Raw(market));
  if (side == Side::kBuy) {
    collect(book.bids);
  } else {
    collect(book.asks);
  }
  return out;
}

std::vector<RefOrder> ReferenceEngine::Orders(MarketId market, Side side) const {
  std::vector<RefOrder> out;
  auto collect = [&](const auto& levels) {
    for (const auto& [price, queue] : levels) {
      for (const RefOrder& o : queue) out.push_back(o);
    }
  };
  const Book& book = books_.at(Raw(market));
  if (side == Side::kBuy) {
    collect(book.bids);
  } else {
    collect(book.asks);
  }
  return out;
}

std::vector<OrderId> ReferenceEngine::OpenOrderIds() const {
  std::vector<OrderId> ids;
  ids.reserve(index_.size() + waiting_.size());
  for (const auto& [id, loc] : index_) ids.push_back(id);
  for (const RefWaiting& w : waiting_) ids.push_back(w.order.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

Amount ReferenceEngine::supply(AssetId asset) const { return supply_.at(Raw(asset)); }

Amount ReferenceEngine::held(AssetId asset) const { return held_.at(Raw(asset)); }

std::optional<OrderId> ReferenceEngine::FindClientId(AccountId account,
                                                     const std::string& client_id) const {
  auto it = client_ids_.find({account, client_id});
  if (it == client_ids_.end()) return std::nullopt;
  return it->second;
}

// ---------------------------------------------------------------------------
// Invariants

Status ReferenceEngine::CheckInvariants() const {
  auto fail = [](std::string m) { return Status(StatusCode::kInternal, "reference: " + m); };
  // Balances: no negative; conservation per asset, the pending transfers'
  // holds a bucket of their own.
  std::vector<i128> in_accounts(config_.assets.size(), 0);
  for (const auto& [key, b] : balances_) {
    if (b.available.value < 0 || b.locked.value < 0) {
      return fail("negative balance of account " + std::to_string(Raw(KeyAccount(key))) +
                  " asset " + std::to_string(Raw(KeyAsset(key))));
    }
    in_accounts[Raw(KeyAsset(key))] += static_cast<i128>(b.available.value) + b.locked.value;
  }
  std::vector<i128> pending_sum(config_.assets.size(), 0);
  for (const auto& [id, p] : pending_) {
    if (p.id != id || Raw(p.asset) >= config_.assets.size() ||
        Raw(p.account) >= config_.max_accounts || p.amount.value <= 0 || p.fee.value < 0 ||
        p.fee.value > p.amount.value) {
      return fail("pending transfer " + std::to_string(Raw(id)) + " is impossible");
    }
    if (Raw(id) < 1 || Raw(id) > seq_) {
      return fail("pending transfer " + std::to_string(Raw(id)) + " is outside the sequence");
    }
    // Its reference is used: by this transfer.
    auto ref = transfers_.find(p.ref);
    if (ref == transfers_.end() || ref->second != id) {
      return fail("pending transfer " + std::to_string(Raw(id)) + " does not own its reference");
    }
    pending_sum[Raw(p.asset)] += p.amount.value;
  }
  for (std::size_t a = 0; a < config_.assets.size(); ++a) {
    if (held_[a].value < 0 || pending_sum[a] != held_[a].value) {
      return fail("held total of asset " + std::to_string(a) + " is not its pending transfers'");
    }
    if (in_accounts[a] + held_[a].value != supply_[a].value) {
      return fail("conservation broken for asset " + std::to_string(a));
    }
  }
  // Books: well formed, not crossed; orders consistent; locks add up.
  std::map<uint64_t, i128> locks;  // by BalanceKey
  std::size_t open = 0;
  std::size_t open_with_cid = 0;
  for (std::size_t m = 0; m < books_.size(); ++m) {
    const MarketSpec& spec = config_.markets[m];
    const Book& book = books_[m];
    Status st;
    auto check_side = [&](const auto& levels, Side side) -> Status {
      for (const auto& [price, queue] : levels) {
        if (queue.empty()) return fail("empty level in market " + std::to_string(m));
        for (const RefOrder& o : queue) {
          ++open;
          if (Raw(o.market) != m || o.side != side || o.price != price) {
            return fail(Describe(o) + " is filed at the wrong place");
          }
          auto it = index_.find(o.id);
          if (it == index_.end() || it->second.market != o.market || it->second.side != side ||
              it->second.price != price) {
            return fail(Describe(o) + " is missing from the index");
          }
          if (NoLimit(o.type) || o.tif != TimeInForce::kGtc) {
            return fail(Describe(o) + " cannot rest");
          }
          if (o.remaining.value <= 0 || o.remaining > o.qty) {
            return fail(Describe(o) + " over-filled or empty");
          }
          if (o.iceberg.value != 0 &&
              (o.visible.value < 1 || o.visible > o.remaining || o.visible > o.iceberg)) {
            return fail(Describe(o) + " shows an impossible slice");
          }
          if (o.price.value < 1 || o.price > spec.max_price) {
            return fail(Describe(o) + " has a bad price");
          }
          const i128 need = side == Side::kBuy
                                ? static_cast<i128>(o.price.value) * o.remaining.value *
                                      spec.notional_per_tick_lot
                                : static_cast<i128>(o.remaining.value) * spec.lot_units;
          if (o.locked.value != need) {
            return fail(Describe(o) + " does not lock exactly what it can still spend");
          }
          locks[BalanceKey(o.account, SpendAsset(o))] += o.locked.value;
          if (!o.client_id.empty()) {
            ++open_with_cid;
            auto c = client_ids_.find({o.account, o.client_id});
            if (c == client_ids_.end() || c->second != o.id) {
              return fail(Describe(o) + " does not own its client id");
            }
          }
        }
      }
      return Status::Ok();
    };
    st = check_side(book.bids, Side::kBuy);
    if (!st.ok()) return st;
    st = check_side(book.asks, Side::kSell);
    if (!st.ok()) return st;
    if (!book.bids.empty() && !book.asks.empty() &&
        book.bids.begin()->first >= book.asks.begin()->first) {
      return fail("book crossed in market " + std::to_string(m));
    }
  }
  if (open != index_.size()) return fail("index holds orders that are not in a book");
  // Waiting stops: by id, out of the books, nothing executed; a *_LIMIT one
  // locks what its limit order will, a stop-market sell its quantity, a
  // stop-market buy nothing.
  for (std::size_t k = 0; k < waiting_.size(); ++k) {
    const RefWaiting& w = waiting_[k];
    const RefOrder& o = w.order;
    if (k > 0 && !(waiting_[k - 1].order.id < o.id)) return fail("waiting orders out of id order");
    if (Raw(o.market) >= config_.markets.size() || !IsStop(o.type)) {
      return fail(Describe(o) + " waits but is no stop order");
    }
    const MarketSpec& spec = config_.markets[Raw(o.market)];
    if (index_.count(o.id) != 0) return fail(Describe(o) + " waits and rests");
    if (o.remaining != o.qty || o.qty < spec.min_qty || o.qty > spec.max_qty) {
      return fail(Describe(o) + " waits with a part executed or a bad quantity");
    }
    if (NoLimit(o.type) ? (o.price.value != 0 || o.tif != TimeInForce::kIoc)
                        : (o.price.value < 1 || o.price > spec.max_price)) {
      return fail(Describe(o) + " waits with a bad price or time in force");
    }
    const bool trailing = w.delta != 0;
    if (w.delta < 0 || w.delta > 9'999 || w.stop.value < (trailing ? 0 : 1) ||
        w.stop > spec.max_price || (!trailing && (w.active || w.extreme.value != 0)) ||
        (trailing && w.stop.value == 0 && !w.active) || (!w.active && w.extreme.value != 0)) {
      return fail(Describe(o) + " has impossible trigger terms");
    }
    i128 need = 0;
    if (o.side == Side::kSell) {
      need = static_cast<i128>(o.qty.value) * spec.lot_units;
    } else if (!NoLimit(o.type)) {
      need = static_cast<i128>(o.price.value) * o.qty.value * spec.notional_per_tick_lot;
    }
    // An OCO order may share its pair's lock: it holds at most its own need.
    const bool shares = ListOf(o.id) != nullptr;
    if (shares ? (o.locked.value < 0 || o.locked.value > need) : o.locked.value != need) {
      return fail(Describe(o) + " waits with the wrong lock");
    }
    locks[BalanceKey(o.account, SpendAsset(o))] += o.locked.value;
    if (!o.client_id.empty()) {
      ++open_with_cid;
      auto cid = client_ids_.find({o.account, o.client_id});
      if (cid == client_ids_.end() || cid->second != o.id) {
        return fail(Describe(o) + " does not own its client id");
      }
    }
  }
  for (const auto& [key, b] : balances_) {
    auto it = locks.find(key);
    const i128 want = it == locks.end() ? 0 : it->second;
    if (b.locked.value != want) {
      return fail("locked balance of account " + std::to_string(Raw(KeyAccount(key))) + " asset " +
                  std::to_string(Raw(KeyAsset(key))) + " is not the sum of its orders' locks");
    }
  }
  for (const auto& [key, sum] : locks) {
    if (balances_.find(key) == balances_.end() && sum != 0) return fail("lock without balance");
  }
  // Client ids: open orders' and reserved closed ones', nothing else.
  if (closed_ids_.size() > config_.client_id_memory) return fail("too many reserved ids");
  for (const RefReservedClientId& r : closed_ids_) {
    auto it = client_ids_.find({r.account, r.client_id});
    if (it == client_ids_.end() || it->second != r.order_id) {
      return fail("reserved client id of order " + std::to_string(Raw(r.order_id)) + " lost");
    }
    if (index_.count(r.order_id) != 0 || WaitingIndex(r.order_id) < waiting_.size()) {
      return fail("closed order still open");
    }
  }
  if (client_ids_.size() != open_with_cid + closed_ids_.size()) {
    return fail("client id registry holds stale entries");
  }
  return Status::Ok();
}

}  // namespace mb::testing
