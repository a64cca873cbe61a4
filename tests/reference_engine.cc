#include "reference_engine.h"

#include <algorithm>
#include <string>
#include <utility>

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
  supply_.resize(config_.assets.size());
  held_.resize(config_.assets.size());
}

std::vector<Event> ReferenceEngine::Process(const engine::Command& command) {
  ++seq_;
  now_ns_ = command.timestamp_ns;
  out_.clear();
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
  if (taker.type == OrderType::kMarket) return true;
  return taker.side == Side::kBuy ? level_price <= taker.price : level_price >= taker.price;
}

RefOrder* ReferenceEngine::FindOpen(OrderId id) {
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

void ReferenceEngine::CloseOrder(const RefOrder& order) {
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
      for (const RefOrder& maker : queue) {
        if (maker.account == taker.account && taker.stp != StpMode::kNone) {
          if (taker.stp == StpMode::kExpireMaker) continue;  // matching would expire it
          return w;                                          // matching would expire the taker
        }
        const i128 unit = static_cast<i128>(price.value) * npt;
        i128 lots = 0;
        if (by_quote) {
          lots = std::min<i128>(maker.remaining.value, budget / unit);
          if (lots == 0) return w;  // dust
          budget -= lots * unit;
        } else {
          lots = std::min<i128>(lots_left, maker.remaining.value);
          lots_left -= lots;
        }
        w.lots += lots;
        w.base += lots * spec.lot_units;
        w.notional += lots * unit;
        if (by_quote ? budget == 0 : lots_left == 0) return w;
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
        lots = Narrow(std::min<i128>(maker.remaining.value, taker.budget_left.value / unit));
        if (lots == 0) {
          // Dust: the budget cannot buy one lot here. Having bought something,
          // the order has spent its budget (not met the end of the book).
          return taker.budget_left < taker.quote_qty ? MatchOutcome::kBudgetSpent
                                                     : MatchOutcome::kOpen;
        }
      } else {
        lots = std::min(taker.remaining.value, maker.remaining.value);
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

      if (maker_filled) {
        RefOrder gone = maker;
        queue.pop_front();
        index_.erase(gone.id);
        if (queue.empty()) levels.erase(level);
        MB_CHECK(gone.locked.value == 0);  // resting orders lock exactly what they spend
        CloseOrder(gone);
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
  if (taker.type != OrderType::kMarket && taker.tif == TimeInForce::kGtc) {
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
    AddToBook(taker);
    return;
  }
  ExpireOrder(taker, taker.type == OrderType::kMarket ? ExpireReason::kNoLiquidity
                                                      : ExpireReason::kIocRemainder);
}

// ---------------------------------------------------------------------------
// Commands

void ReferenceEngine::DoPlace(const engine::PlaceOrder& c) {
  auto reject = [&](RejectReason reason, uint64_t existing = 0) {
    Reject(CommandType::kPlaceOrder, reason, c.account, c.market, OrderId{0}, existing,
           c.client_order_id);
  };
  // 1. Who and where.
  if (Raw(c.market) >= config_.markets.size()) return reject(RejectReason::kUnknownMarket);
  if (Raw(c.account) >= config_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (c.account == config_.fee_account) return reject(RejectReason::kUnauthorized);
  // 2. Market status.
  if (status_[Raw(c.market)] != MarketStatus::kTrading) {
    return reject(RejectReason::kMarketNotTrading);
  }
  // 3. Type. READING (Q3): any enum value out of range rejects, the ignored tif of
  // a MARKET order included; "has qty" / "has quote_qty" means non-zero.
  if (Raw(c.side) > 1 || Raw(c.type) > 2 || Raw(c.tif) > 2 || Raw(c.stp) > 3) {
    return reject(RejectReason::kInvalidOrderType);
  }
  if (c.type == OrderType::kLimitMaker && c.tif != TimeInForce::kGtc) {
    return reject(RejectReason::kInvalidOrderType);
  }
  if (c.type == OrderType::kMarket && (c.qty.value != 0) == (c.quote_qty.value != 0)) {
    return reject(RejectReason::kInvalidOrderType);
  }
  if (c.type != OrderType::kMarket && c.quote_qty.value != 0) {
    return reject(RejectReason::kInvalidOrderType);
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
  const MarketSpec& spec = config_.markets[Raw(c.market)];
  const bool is_limit = c.type != OrderType::kMarket;
  const bool by_quote = c.type == OrderType::kMarket && c.quote_qty.value != 0;
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
  // 6. Post-only.
  if (c.type == OrderType::kLimitMaker) {
    const bool crosses = c.side == Side::kBuy
                             ? (BestAsk(c.market).has_value() && c.price >= *BestAsk(c.market))
                             : (BestBid(c.market).has_value() && c.price <= *BestBid(c.market));
    if (crosses) return reject(RejectReason::kWouldTakeLiquidity);
  }

  // The order as the engine holds it. READING (Q2): a MARKET order's price and
  // tif are ignored, not rejected: it holds price 0 and tif IOC.
  RefOrder o;
  o.id = OrderId{seq_};
  o.account = c.account;
  o.market = c.market;
  o.side = c.side;
  o.type = c.type;
  o.tif = c.type == OrderType::kMarket ? TimeInForce::kIoc : c.tif;
  o.stp = c.stp;
  o.price = is_limit ? c.price : Price{0};
  o.qty = by_quote ? Qty{0} : c.qty;
  o.remaining = o.qty;
  o.quote_qty = c.quote_qty;  // 0 unless by quote (check 3)
  o.budget_left = o.quote_qty;
  o.created_ns = now_ns_;
  o.client_id = cid;

  // 7. The lock.
  i128 lock = 0;
  if (c.side == Side::kBuy) {
    if (is_limit) {
      lock = limit_notional;
    } else if (by_quote) {
      lock = c.quote_qty.value;
    } else {
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
  if (lock > Bal(c.account, spend).available.value) {
    return reject(RejectReason::kInsufficientBalance);
  }
  // 8. Fill or kill: one that cannot fill completely is accepted, then
  // expires before matching.
  const bool fok_unfillable =
      is_limit && c.tif == TimeInForce::kFok && DryWalk(o).lots < c.qty.value;

  // Accepted.
  o.locked = Amount{static_cast<int64_t>(lock)};
  Balance& b = Bal(c.account, spend);
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

  if (fok_unfillable) return ExpireOrder(o, ExpireReason::kFokNotFillable);
  Finish(o, Match(o));
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

  RefOrder o = *target;
  RemoveFromBook(o.id);
  engine::OrderCanceled e;
  e.order_id = o.id;
  e.account = o.account;
  e.market = o.market;
  e.side = o.side;
  e.remaining = o.remaining;
  e.released = o.locked;
  Emit(e);
  Balance& b = Bal(o.account, SpendAsset(o));
  b.locked -= o.locked;
  b.available += o.locked;
  CloseOrder(o);
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
  std::vector<OrderId> ids;  // index_ is ordered by id: ascending
  for (const auto& [id, loc] : index_) {
    if (loc.market != c.market) continue;
    if (FindOpen(id)->account == c.account) ids.push_back(id);
  }
  if (ids.empty()) return reject(RejectReason::kUnknownOrder);
  for (OrderId id : ids) {
    RefOrder o = *FindOpen(id);
    RemoveFromBook(id);
    engine::OrderCanceled e;
    e.order_id = o.id;
    e.account = o.account;
    e.market = o.market;
    e.side = o.side;
    e.remaining = o.remaining;
    e.released = o.locked;
    Emit(e);
    Balance& b = Bal(o.account, SpendAsset(o));
    b.locked -= o.locked;
    b.available += o.locked;
    CloseOrder(o);
  }
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
  MB_CHECK(out_.size() == before + 1);
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
        v.qty += o.remaining;
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
  ids.reserve(index_.size());
  for (const auto& [id, loc] : index_) ids.push_back(id);
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
          if (o.type == OrderType::kMarket || o.tif != TimeInForce::kGtc) {
            return fail(Describe(o) + " cannot rest");
          }
          if (o.remaining.value <= 0 || o.remaining > o.qty) {
            return fail(Describe(o) + " over-filled or empty");
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
    if (index_.count(r.order_id) != 0) return fail("closed order still open");
  }
  if (client_ids_.size() != open_with_cid + closed_ids_.size()) {
    return fail("client id registry holds stale entries");
  }
  return Status::Ok();
}

}  // namespace mb::testing
