// Decide and evolve: Engine::Impl's two halves (engine/internal/engine_impl.h)
// and the Engine facade over them.
#include "engine/engine.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/checked.h"
#include "common/status.h"
#include "engine/internal/engine_impl.h"
#include "engine/internal/key128.h"
#include "engine/listing.h"

namespace mb::engine {
namespace {

using internal::Cancelable;
using internal::EnumInRange;
using internal::HashString;

// Can a taker on `side` with limit `limit` trade at `level_price`?
bool Crosses(Side side, Price limit, Price level_price) noexcept {
  return side == Side::kBuy ? level_price <= limit : level_price >= limit;
}

// A trailing stop's delta, in basis points: below 100% so that a sell's
// trigger price stays positive.
constexpr int32_t kMaxTrailingDelta = 9'999;

// Does the last price `last` meet a stop condition at `stop`?
bool StopMet(bool rise, Price stop, Price last) noexcept {
  return rise ? last >= stop : last <= stop;
}

// Has a tracking trailing stop moved `delta` basis points from its best price
// `extreme` against the order: up for a buy, down for a sell?
bool TrailingHit(Side side, int32_t delta, Price extreme, Price last) noexcept {
  if (extreme.value == 0) return false;
  const int128 l = static_cast<int128>(last.value) * 10'000;
  const int128 e = static_cast<int128>(extreme.value);
  return side == Side::kBuy ? l >= e * (10'000 + delta) : l <= e * (10'000 - delta);
}

}  // namespace

Engine::Impl::Impl(EngineConfig config)
    : cfg_(std::move(config)),
      start_cfg_(cfg_),
      config_hash_(HashConfig(cfg_)),
      book_(cfg_.markets.size(), cfg_.max_accounts, cfg_.expected_open_orders,
            cfg_.price_window_ticks),
      accounts_(cfg_.max_accounts, cfg_.assets.size(), cfg_.expected_open_orders,
                cfg_.client_id_memory),
      status_(cfg_.markets.size()),
      auth_(cfg_.max_accounts),
      last_price_(cfg_.markets.size(), Price{0}),
      triggers_(cfg_.markets.size()) {
  for (std::size_t m = 0; m < cfg_.markets.size(); ++m) status_[m] = cfg_.markets[m].status;
}

// ---------------------------------------------------------------- decide

void Engine::Impl::Process(const Command& c, EventBuffer* out) noexcept {
  out_ = out;
  seq_ = Sequence{Raw(last_seq_) + 1};
  ts_ = c.timestamp_ns;
  check_triggers_ = false;
  range_low_ = range_high_ = Price{0};
  touched_lists_.clear();
  filled_list_orders_.clear();
  // One Decide() overload per command type, as Apply() has one Evolve() per event type.
  std::visit([this](const auto& body) { Decide(body); }, c.body);
  // The command's trades may have met waiting orders' conditions, executed
  // or closed orders of lists: within the same command, after its own
  // matching, the orders trigger and the lists settle.
  if (check_triggers_ || !touched_lists_.empty()) Settle();
  out_ = nullptr;
}

template <class Body>
void Engine::Impl::Emit(const Body& body) noexcept {
  // Constructed in the buffer from its parts (Event's constructor), not
  // copied there from a temporary Event, whose just-written fields read back
  // as whole vectors defeat store-to-load forwarding, nor value-initialised
  // first, which clears all 128 bytes (measured: an amend 10-20% slower).
  out_->emplace_back(seq_, ts_, body);
  last_seq_ = seq_;
  // The same Evolve() that Apply() dispatches to, called on the concrete type.
  Evolve(body, ts_);
}

void Engine::Impl::Reject(CommandType cmd, RejectReason r, AccountId account, MarketId market,
                          OrderId target, const ClientOrderId& cid, uint64_t existing) noexcept {
  Emit(Rejected{cmd, r, account, market, target, existing, cid});
}

void Engine::Impl::Decide(const PlaceOrder& p) noexcept {
  const Admission a = Admit(p, true, true);
  if (a.reason != RejectReason::kNone) {
    return Reject(CommandType::kPlaceOrder, a.reason, p.account, p.market, OrderId{0},
                  p.client_order_id, a.existing);
  }
  Enter(p, OrderId{Raw(seq_)}, a.lock, a.fok_unfillable);
}

// `inline`: Decide(PlaceOrder) is most of the benchmark mix's orders.
inline Engine::Impl::Admission Engine::Impl::Admit(const PlaceOrder& p, bool check_balance,
                                                   bool check_trigger) const noexcept {
  auto reject = [](RejectReason r, uint64_t existing = 0) {
    Admission a;
    a.reason = r;
    a.existing = existing;
    return a;
  };
  if (Raw(p.market) >= book_.markets()) return reject(RejectReason::kUnknownMarket);
  if (Raw(p.account) >= cfg_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (p.account == cfg_.fee_account) return reject(RejectReason::kUnauthorized);
  if (status_[Raw(p.market)] != MarketStatus::kTrading) {
    return reject(RejectReason::kMarketNotTrading);
  }
  if (!EnumInRange(p.side, Side::kSell) || !EnumInRange(p.type, OrderType::kTakeProfitLimit) ||
      !EnumInRange(p.tif, TimeInForce::kFok) || !EnumInRange(p.stp, StpMode::kExpireBoth)) {
    return reject(RejectReason::kInvalidOrderType);
  }
  const bool market_order = IsMarketLike(p.type);
  const bool conditional = IsConditional(p.type);
  if (p.type == OrderType::kLimitMaker && p.tif != TimeInForce::kGtc) {
    return reject(RejectReason::kInvalidOrderType);
  }
  if (market_order ? ((p.qty.value != 0) == (p.quote_qty.value != 0)) : p.quote_qty.value != 0) {
    return reject(RejectReason::kInvalidOrderType);
  }
  // A stop-market order is by quantity (Binance: quantity, no quoteOrderQty).
  if (conditional && p.quote_qty.value != 0) return reject(RejectReason::kInvalidOrderType);
  if (p.trailing_delta != 0 &&
      (!conditional || p.trailing_delta < 1 || p.trailing_delta > kMaxTrailingDelta)) {
    return reject(RejectReason::kInvalidTrailingDelta);
  }
  if (conditional ? (p.stop_price.value < (p.trailing_delta == 0 ? 1 : 0) ||
                     p.stop_price > cfg_.markets[Raw(p.market)].max_price)
                  : p.stop_price.value != 0) {
    return reject(RejectReason::kInvalidStopPrice);
  }
  if (!p.client_order_id.empty()) {
    if (const OrderId* first =
            accounts_.FindClientId(p.account, HashString(p.client_order_id.view()))) {
      return reject(RejectReason::kDuplicateClientOrderId, Raw(*first));
    }
  }
  const MarketSpec& m = cfg_.markets[Raw(p.market)];
  const bool by_quote = market_order && p.quote_qty.value != 0;
  int64_t notional = 0;
  if (!market_order) {
    if (p.price.value < 1 || p.price > m.max_price) return reject(RejectReason::kInvalidPrice);
    if (p.qty < m.min_qty || p.qty > m.max_qty) return reject(RejectReason::kInvalidQuantity);
    if (!CheckedMul3(p.price.value, p.qty.value, m.notional_per_tick_lot, &notional)) {
      return reject(RejectReason::kOverflow);
    }
    if (notional < m.min_notional.value) return reject(RejectReason::kMinNotional);
  } else if (!by_quote) {
    if (p.qty < m.min_qty || p.qty > m.max_qty) return reject(RejectReason::kInvalidQuantity);
  } else {
    if (p.quote_qty.value <= 0) return reject(RejectReason::kInvalidQuantity);
    if (p.quote_qty < m.min_notional) return reject(RejectReason::kMinNotional);
  }
  if (p.iceberg_qty.value != 0 &&
      ((p.type != OrderType::kLimit && p.type != OrderType::kLimitMaker) ||
       p.tif != TimeInForce::kGtc || p.iceberg_qty < m.min_qty || p.iceberg_qty >= p.qty)) {
    return reject(RejectReason::kInvalidIcebergQty);
  }
  if (check_trigger && conditional && p.stop_price.value != 0 &&
      last_price_[Raw(p.market)].value != 0 &&
      StopMet(TriggersOnRise(p.type, p.side), p.stop_price, last_price_[Raw(p.market)])) {
    return reject(RejectReason::kWouldTriggerImmediately);
  }
  const Side opp = Opposite(p.side);
  if (p.type == OrderType::kLimitMaker) {
    auto best = book_.Best(p.market, opp);
    if (best && Crosses(p.side, p.price, *best)) {
      return reject(RejectReason::kWouldTakeLiquidity);
    }
  }
  // The lock.
  int64_t lock = 0;
  if (!market_order) {
    if (p.side == Side::kBuy) {
      lock = notional;
    } else if (!CheckedMul3(p.qty.value, m.lot_units, 1, &lock)) {
      return reject(RejectReason::kOverflow);
    }
  } else if (p.side == Side::kBuy) {
    if (by_quote) {
      lock = p.quote_qty.value;
    } else if (conditional) {
      lock = 0;  // a stop-market buy locks the cost of its book walk when triggered
    } else {
      Walk w = DryWalk(m, p.market, p.side, p.account, p.stp, Price{0}, p.qty.value, 0);
      if (w.overflow) return reject(RejectReason::kOverflow);
      lock = w.quote;
    }
  } else {
    if (by_quote) {
      Walk w = DryWalk(m, p.market, p.side, p.account, p.stp, Price{0}, 0, p.quote_qty.value);
      if (w.overflow || !CheckedMul3(w.lots, m.lot_units, 1, &lock)) {
        return reject(RejectReason::kOverflow);
      }
    } else if (!CheckedMul3(p.qty.value, m.lot_units, 1, &lock)) {
      return reject(RejectReason::kOverflow);
    }
  }
  if (check_balance && lock > accounts_.balance(p.account, SpendAsset(m, p.side)).available.value) {
    return reject(RejectReason::kInsufficientBalance);
  }
  Admission a;
  a.lock = lock;
  // A FOK that cannot fill completely is accepted and expires at once,
  // untouched by matching: nothing trades and its whole lock returns.
  if (!market_order && !conditional && p.tif == TimeInForce::kFok) {
    Walk w = DryWalk(m, p.market, p.side, p.account, p.stp, p.price, p.qty.value, 0);
    a.fok_unfillable = w.lots < p.qty.value;
  }
  return a;
}

namespace {

// The terms an order is accepted with: a market-like order is IOC with no
// price, one by quote amount has no quantity.
OrderTerms TermsOf(const PlaceOrder& p) noexcept {
  const bool market_order = IsMarketLike(p.type);
  const bool by_quote = market_order && p.quote_qty.value != 0;
  return OrderTerms{p.account,
                    p.market,
                    p.side,
                    p.type,
                    market_order ? TimeInForce::kIoc : p.tif,
                    p.stp,
                    market_order ? Price{0} : p.price,
                    by_quote ? Qty{0} : p.qty};
}

// The PlaceOrder of one order of a list, from its terms and its own fields.
PlaceOrder ListPlacing(const OrderTerms& t, const ClientOrderId& client_order_id, Price stop_price,
                       int32_t trailing_delta, Qty iceberg_qty) noexcept {
  PlaceOrder p;
  p.account = t.account;
  p.market = t.market;
  p.side = t.side;
  p.type = t.type;
  p.tif = t.tif;
  p.stp = t.stp;
  p.price = t.price;
  p.qty = t.qty;
  p.client_order_id = client_order_id;
  p.stop_price = stop_price;
  p.trailing_delta = trailing_delta;
  p.iceberg_qty = iceberg_qty;
  return p;
}

}  // namespace

inline void Engine::Impl::Enter(const PlaceOrder& p, OrderId id, int64_t lock,
                                bool fok_unfillable) noexcept {
  const bool by_quote = IsMarketLike(p.type) && p.quote_qty.value != 0;
  Emit(OrderAccepted{id, TermsOf(p), by_quote ? p.quote_qty : Amount{0}, Amount{lock},
                     p.client_order_id});
  if (IsConditional(p.type)) {
    Emit(OrderArmed{id, p.account, p.market, p.side, p.stop_price, p.trailing_delta});
    return;
  }
  if (p.iceberg_qty.value != 0) {
    Emit(IcebergAccepted{id, p.account, p.market, p.side, p.iceberg_qty});
  }
  if (fok_unfillable) {
    Emit(OrderExpired{id, p.account, p.market, p.side, ExpireReason::kFokNotFillable, p.qty,
                      Amount{lock}});
    return;
  }
  Match(book_.Lookup(id));
}

void Engine::Impl::Match(uint32_t ti) noexcept {
  const Order& taker = book_.order(ti);
  const MarketSpec& m = cfg_.markets[Raw(taker.market)];
  const Side side = taker.side;
  const OrderId taker_id = taker.id;
  const AccountId taker_account = taker.account;
  const MarketId market = taker.market;
  const bool any_price = IsMarketLike(taker.type);
  const bool by_quote = taker.by_quote;
  const Side opp = Opposite(side);
  const int32_t maker_bps = m.maker_fee_bps;
  const int32_t taker_bps = m.taker_fee_bps;
  // A budget order stopped by its budget (not by the book) once it traded is
  // done: kQuoteBudgetSpent, not kNoLiquidity.
  bool traded = false;
  bool budget_spent = false;

  for (uint32_t li = book_.BestLevel(market, opp); li != kNil; li = book_.BestLevel(market, opp)) {
    const Order& t = book_.order(ti);
    const Level& l = book_.level(li);
    if (!any_price && !Crosses(side, t.price, l.price)) break;
    const uint32_t mi = l.head;
    const Order& maker = book_.order(mi);
    if (maker.account == taker_account && t.stp != StpMode::kNone) {
      const StpMode stp = t.stp;
      if (stp != StpMode::kExpireTaker) {
        Emit(OrderExpired{maker.id, maker.account, market, maker.side,
                          ExpireReason::kSelfTradePrevention, Unfilled(maker), maker.locked});
      }
      if (stp == StpMode::kExpireMaker) continue;
      const Order& tt = book_.order(ti);
      Emit(OrderExpired{taker_id, taker_account, market, side, ExpireReason::kSelfTradePrevention,
                        by_quote ? Qty{0} : tt.remaining, tt.locked});
      return;
    }
    int64_t take = std::min(t.remaining.value, maker.remaining.value);
    const int64_t lot_cost = l.price.value * m.notional_per_tick_lot;
    if (by_quote) take = std::min(maker.remaining.value, t.qty_or_budget / lot_cost);
    if (take <= 0) {
      budget_spent = by_quote && traded;
      break;
    }
    const int64_t base_qty = take * m.lot_units;
    const int64_t notional = lot_cost * take;
    // The buyer receives base, the seller quote; each pays its role's rate.
    const int64_t buyer_fee = FeeCeil(base_qty, side == Side::kBuy ? taker_bps : maker_bps);
    const int64_t seller_fee = FeeCeil(notional, side == Side::kBuy ? maker_bps : taker_bps);
    const int64_t taker_spend = side == Side::kBuy ? notional : base_qty;
    const bool taker_filled = by_quote ? t.qty_or_budget == notional : t.remaining.value == take;
    // An iceberg maker whose visible part this fills is not filled while
    // some of it is hidden: its next slice joins the level's tail.
    const int64_t maker_hidden = l.icebergs != 0 ? Hidden(maker.id) : 0;
    const bool visible_filled = maker.remaining.value == take;
    const bool maker_filled = visible_filled && maker_hidden == 0;
    const OrderId maker_id = maker.id;
    const AccountId maker_account = maker.account;
    const Side maker_side = maker.side;
    const Price level_price = l.price;
    const int64_t released = taker_filled ? t.locked.value - taker_spend : 0;
    Trade tr;
    tr.trade_id = next_trade_;
    tr.market = market;
    tr.taker_side = side;
    tr.maker_order_id = maker.id;
    tr.taker_order_id = taker_id;
    tr.maker_account = maker.account;
    tr.taker_account = taker_account;
    tr.price = l.price;
    tr.qty = Qty{take};
    tr.base_qty = Amount{base_qty};
    tr.notional = Amount{notional};
    tr.maker_fee = Amount{side == Side::kBuy ? seller_fee : buyer_fee};
    tr.taker_fee = Amount{side == Side::kBuy ? buyer_fee : seller_fee};
    tr.taker_released = Amount{released};
    tr.maker_filled = maker_filled;
    tr.taker_filled = taker_filled;
    Emit(tr);
    traded = true;
    if (visible_filled && maker_hidden != 0) {
      const int64_t slice = icebergs_.find(Raw(maker_id))->second.slice.value;
      const int64_t visible = std::min(slice, maker_hidden);
      Emit(IcebergRefilled{maker_id, maker_account, market, maker_side, level_price, Qty{visible},
                           Qty{maker_hidden - visible}});
    }
    if (taker_filled) return;
  }
  const Order& t = book_.order(ti);
  if (!any_price && t.tif == TimeInForce::kGtc) {
    // A resting order locks exactly what it can still spend.
    const int64_t keep = side == Side::kBuy
                             ? t.price.value * t.remaining.value * m.notional_per_tick_lot
                             : t.locked.value;
    Emit(OrderRested{taker_id, taker_account, market, side, t.remaining,
                     Amount{t.locked.value - keep}});
  } else {
    const ExpireReason reason = budget_spent ? ExpireReason::kQuoteBudgetSpent
                                : any_price  ? ExpireReason::kNoLiquidity
                                             : ExpireReason::kIocRemainder;
    Emit(OrderExpired{taker_id, taker_account, market, side, reason,
                      by_quote ? Qty{0} : t.remaining, t.locked});
  }
}

Engine::Impl::Walk Engine::Impl::DryWalk(const MarketSpec& m, MarketId mid, Side side,
                                         AccountId account, StpMode stp, Price limit,
                                         int64_t max_lots, int64_t budget) const noexcept {
  Walk w;
  const Side opp = Opposite(side);
  for (uint32_t li = book_.BestLevel(mid, opp); li != kNil; li = book_.NextLevel(mid, opp, li)) {
    const Level& l = book_.level(li);
    if (limit.value != 0 && !Crosses(side, limit, l.price)) break;
    int64_t lot_cost = 0;
    if (!CheckedMul3(l.price.value, 1, m.notional_per_tick_lot, &lot_cost)) {
      w.overflow = true;
      return w;
    }
    // Takes up to `lots` at this level; false when the walk is over.
    auto take_lots = [&](int64_t lots) {
      int64_t take = lots;
      if (max_lots != 0) take = std::min(take, max_lots - w.lots);
      if (budget != 0) take = std::min(take, (budget - w.quote) / lot_cost);
      if (take <= 0) return false;
      int64_t cost = 0;
      if (!CheckedMul3(l.price.value, take, m.notional_per_tick_lot, &cost) ||
          !CheckedAdd(w.quote, cost, &w.quote)) {
        w.overflow = true;
        return false;
      }
      w.lots += take;
      return max_lots == 0 || w.lots != max_lots;
    };
    for (uint32_t i = l.head; i != kNil; i = book_.order(i).next) {
      const Order& o = book_.order(i);
      if (o.account == account && stp != StpMode::kNone) {
        if (stp == StpMode::kExpireMaker) continue;
        return w;
      }
      if (!take_lots(o.remaining.value)) return w;
    }
    // The level's visible parts are taken: the icebergs' next slices join its
    // tail one after another until their hidden parts are taken too.
    if (l.icebergs != 0) {
      for (uint32_t i = l.head; i != kNil; i = book_.order(i).next) {
        const Order& o = book_.order(i);
        if (o.account == account && stp != StpMode::kNone) continue;  // expired, as above
        const int64_t hidden = Hidden(o.id);
        if (hidden != 0 && !take_lots(hidden)) return w;
      }
    }
  }
  return w;
}

// `inline`: cancels and amends (82% of the benchmark mix) look their order up
// here; without the hint g++ 12 stops inlining it into Decide(AmendOrder).
inline uint32_t Engine::Impl::Target(AccountId account, MarketId market, OrderId id,
                                     const ClientOrderId& cid) const noexcept {
  OrderId target = id;
  if (Raw(id) == 0) {
    if (cid.empty()) return kNil;
    const OrderId* found = accounts_.FindClientId(account, HashString(cid.view()));
    if (found == nullptr) return kNil;
    target = *found;
  }
  uint32_t i = book_.Lookup(target);
  if (i == kNil) return kNil;
  const Order& o = book_.order(i);
  if (o.account != account || o.market != market) return kNil;
  // Both ids: the order found by id must carry the client id given.
  if (Raw(id) != 0 && !cid.empty() && (!o.has_client_id || o.client_id != HashString(cid.view()))) {
    return kNil;
  }
  return i;
}

void Engine::Impl::Decide(const CancelOrder& c) noexcept {
  auto reject = [&](RejectReason r) {
    Reject(CommandType::kCancelOrder, r, c.account, c.market, c.order_id, c.orig_client_order_id);
  };
  if (Raw(c.market) >= book_.markets()) return reject(RejectReason::kUnknownMarket);
  if (Raw(c.account) >= cfg_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (!Cancelable(status_[Raw(c.market)])) return reject(RejectReason::kMarketNotTrading);
  uint32_t i = Target(c.account, c.market, c.order_id, c.orig_client_order_id);
  if (i == kNil) return reject(RejectReason::kUnknownOrder);
  const Order& o = book_.order(i);
  // Only resting and waiting orders are targets: qty() is a quantity.
  const Qty unfilled = Unfilled(o);
  const bool executed = unfilled < o.qty();
  if ((c.restriction == CancelRestriction::kOnlyNew && executed) ||
      (c.restriction == CancelRestriction::kOnlyPartiallyFilled && !executed) ||
      !EnumInRange(c.restriction, CancelRestriction::kOnlyPartiallyFilled)) {
    return reject(RejectReason::kCancelRestricted);
  }
  // Canceling an order of a list cancels the whole list (Binance).
  if (const OrderList* l = ListOf(o.id)) {
    const OrderList list = *l;
    CancelList(list);
    touched_lists_.push_back(list.id);
    return;
  }
  Emit(OrderCanceled{o.id, o.account, o.market, o.side, unfilled, o.locked});
}

void Engine::Impl::Decide(const CancelAll& c) noexcept {
  auto reject = [&](RejectReason r) { Reject(CommandType::kCancelAll, r, c.account, c.market); };
  if (Raw(c.market) >= book_.markets()) return reject(RejectReason::kUnknownMarket);
  if (Raw(c.account) >= cfg_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (!Cancelable(status_[Raw(c.market)])) return reject(RejectReason::kMarketNotTrading);
  scratch_ids_.clear();
  for (uint32_t i = book_.first_of_account(c.account); i != kNil; i = book_.order(i).acct_next) {
    const Order& o = book_.order(i);
    if (o.market == c.market) scratch_ids_.push_back(Raw(o.id));
  }
  if (scratch_ids_.empty()) return reject(RejectReason::kUnknownOrder);
  std::sort(scratch_ids_.begin(), scratch_ids_.end());
  for (uint64_t id : scratch_ids_) {
    const Order& o = book_.order(book_.Lookup(OrderId{id}));
    Emit(OrderCanceled{o.id, o.account, o.market, o.side, Unfilled(o), o.locked});
  }
}

void Engine::Impl::Decide(const AmendOrder& a) noexcept {
  auto reject = [&](RejectReason r) {
    Reject(CommandType::kAmendOrder, r, a.account, a.market, a.order_id, a.orig_client_order_id);
  };
  if (Raw(a.market) >= book_.markets()) return reject(RejectReason::kUnknownMarket);
  if (Raw(a.account) >= cfg_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (status_[Raw(a.market)] != MarketStatus::kTrading) {
    return reject(RejectReason::kMarketNotTrading);
  }
  uint32_t i = Target(a.account, a.market, a.order_id, a.orig_client_order_id);
  if (i == kNil) return reject(RejectReason::kUnknownOrder);
  const Order& o = book_.order(i);
  // Between commands an open order outside the book is a waiting conditional
  // order: it has no place in the book to amend. An iceberg's slices are not
  // amended either. (Cancel it and place another.)
  if (o.level == kNil || (!icebergs_.empty() && icebergs_.count(Raw(o.id)) != 0) ||
      (!list_of_.empty() && ListOf(o.id) != nullptr)) {
    return reject(RejectReason::kInvalidOrderType);
  }
  const MarketSpec& m = cfg_.markets[Raw(a.market)];
  const Price price = a.new_price.value == 0 ? o.price : a.new_price;
  const Qty qty = a.new_qty.value == 0 ? o.qty() : a.new_qty;
  if (price == o.price && qty == o.qty()) return reject(RejectReason::kNoChange);
  if (a.keep_priority) {
    if (price != o.price) return reject(RejectReason::kInvalidPrice);
    if (qty > o.qty()) return reject(RejectReason::kQuantityIncrease);
  }
  if (price.value < 1 || price > m.max_price) return reject(RejectReason::kInvalidPrice);
  const int64_t filled = o.qty().value - o.remaining.value;
  if (qty < m.min_qty || qty > m.max_qty || qty.value <= filled) {
    return reject(RejectReason::kInvalidQuantity);
  }
  int64_t notional = 0;
  if (!CheckedMul3(price.value, qty.value, m.notional_per_tick_lot, &notional)) {
    return reject(RejectReason::kOverflow);
  }
  if (notional < m.min_notional.value) return reject(RejectReason::kMinNotional);
  const Qty remaining{qty.value - filled};
  int64_t new_lock = 0;
  if (o.side == Side::kBuy) {
    (void)CheckedMul3(price.value, remaining.value, m.notional_per_tick_lot, &new_lock);
  } else {
    (void)CheckedMul3(remaining.value, m.lot_units, 1, &new_lock);
  }
  const int64_t delta = new_lock - o.locked.value;
  const bool keeps_priority = price == o.price && qty < o.qty();
  if (!keeps_priority) {
    if (o.type == OrderType::kLimitMaker) {
      auto best = book_.Best(a.market, Opposite(o.side));
      if (best && Crosses(o.side, price, *best)) {
        return reject(RejectReason::kWouldTakeLiquidity);
      }
    }
    if (delta > accounts_.balance(o.account, SpendAsset(m, o.side)).available.value) {
      return reject(RejectReason::kInsufficientBalance);
    }
  }
  // A new client order id: free, or the order's own (then nothing changes).
  bool rename = false;
  if (!a.new_client_order_id.empty()) {
    const Key128 cid = HashString(a.new_client_order_id.view());
    if (const OrderId* holder = accounts_.FindClientId(a.account, cid)) {
      if (*holder != o.id) {
        return Reject(CommandType::kAmendOrder, RejectReason::kDuplicateClientOrderId, a.account,
                      a.market, a.order_id, a.orig_client_order_id, Raw(*holder));
      }
    } else {
      rename = true;
    }
  }
  const OrderId id = o.id;
  const AccountId account = o.account;
  Emit(OrderAmended{o.id, o.account, o.market, o.side, price, qty, remaining, Amount{delta},
                    keeps_priority});
  if (rename) Emit(ClientOrderIdChanged{id, account, a.market, a.new_client_order_id});
  if (!keeps_priority) Match(i);
}

void Engine::Impl::Decide(const Deposit& d) noexcept {
  auto reject = [&](RejectReason r, uint64_t existing = 0) {
    Reject(CommandType::kDeposit, r, d.account, MarketId{0}, OrderId{0}, ClientOrderId{}, existing);
  };
  if (Raw(d.account) >= cfg_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (Raw(d.asset) >= accounts_.assets()) return reject(RejectReason::kUnknownAsset);
  if (d.amount.value <= 0) return reject(RejectReason::kInvalidAmount);
  if (const TransferId* first = accounts_.FindTransfer(HashString(d.ref.view()))) {
    return reject(RejectReason::kDuplicateTransfer, Raw(*first));
  }
  int64_t sum = 0;
  if (!CheckedAdd(accounts_.balance(d.account, d.asset).available.value, d.amount.value, &sum) ||
      !CheckedAdd(accounts_.balance(d.account, d.asset).locked.value, sum, &sum) ||
      !CheckedAdd(accounts_.supply(d.asset).value, d.amount.value, &sum)) {
    return reject(RejectReason::kOverflow);
  }
  Emit(Deposited{TransferId{Raw(seq_)}, d.account, d.asset, d.amount, d.ref});
}

void Engine::Impl::Decide(const Withdraw& w) noexcept {
  auto reject = [&](RejectReason r, uint64_t existing = 0) {
    Reject(CommandType::kWithdraw, r, w.account, MarketId{0}, OrderId{0}, ClientOrderId{},
           existing);
  };
  if (Raw(w.account) >= cfg_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (Raw(w.asset) >= accounts_.assets()) return reject(RejectReason::kUnknownAsset);
  if (w.amount.value <= 0) return reject(RejectReason::kInvalidAmount);
  if (const TransferId* first = accounts_.FindTransfer(HashString(w.ref.view()))) {
    return reject(RejectReason::kDuplicateTransfer, Raw(*first));
  }
  if (w.amount > accounts_.balance(w.account, w.asset).available) {
    return reject(RejectReason::kInsufficientBalance);
  }
  // amount <= available <= supply: the supply cannot go negative.
  Emit(Withdrawn{TransferId{Raw(seq_)}, w.account, w.asset, w.amount, w.ref});
}

void Engine::Impl::Decide(const TransferOut& t) noexcept {
  auto reject = [&](RejectReason r, uint64_t existing = 0) {
    Reject(CommandType::kTransferOut, r, t.account, MarketId{0}, OrderId{0}, ClientOrderId{},
           existing);
  };
  if (Raw(t.account) >= cfg_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (Raw(t.asset) >= accounts_.assets()) return reject(RejectReason::kUnknownAsset);
  if (t.amount.value <= 0 || t.fee.value < 0 || t.fee > t.amount) {
    return reject(RejectReason::kInvalidAmount);
  }
  if (const TransferId* first = accounts_.FindTransfer(HashString(t.ref.view()))) {
    return reject(RejectReason::kDuplicateTransfer, Raw(*first));
  }
  if (t.amount > accounts_.balance(t.account, t.asset).available) {
    return reject(RejectReason::kInsufficientBalance);
  }
  // amount <= available <= supply - held: the held total cannot overflow.
  Emit(TransferHeld{TransferId{Raw(seq_)}, t.account, t.asset, t.amount, t.fee, t.ref, t.address});
}

void Engine::Impl::Decide(const ResolveTransfer& r) noexcept {
  const PendingTransfer* t = accounts_.FindPending(r.transfer_id);
  if (t == nullptr || (!r.completed && !internal::EnumInRange(r.reason, RefundReason::kRefused))) {
    Reject(CommandType::kResolveTransfer,
           t == nullptr ? RejectReason::kUnknownTransfer : RejectReason::kInvalidStatus,
           t == nullptr ? AccountId{0} : t->account, MarketId{0}, OrderId{0}, ClientOrderId{},
           Raw(r.transfer_id));
    return;
  }
  if (r.completed) {
    Emit(TransferCompleted{t->id, t->account, t->asset, t->amount, t->fee});
  } else {
    Emit(TransferRefunded{t->id, t->account, t->asset, t->amount, r.reason});
  }
}

bool Engine::Impl::TriggerOldest(MarketId market) noexcept {
  const Triggers& tr = triggers_[Raw(market)];
  const Price last = last_price_[Raw(market)];
  // A plain stop is met by any trade of this command: a sweep passes prices
  // between its first and last trade.
  Price high = last;
  Price low = last;
  if (range_market_ == market && range_high_.value != 0) {
    high = std::max(high, range_high_);
    low = std::min(low, range_low_);
  }
  uint64_t oldest = UINT64_MAX;
  for (auto it = tr.rise.begin(); it != tr.rise.end() && it->first <= high.value; ++it) {
    oldest = std::min(oldest, it->second);
  }
  for (auto it = tr.fall.begin(); it != tr.fall.end() && -it->first >= low.value; ++it) {
    oldest = std::min(oldest, it->second);
  }
  for (uint64_t id : tr.trailing) {
    if (id >= oldest) break;
    const Stop& s = stops_.find(id)->second;
    if (s.active && TrailingHit(s.side, s.delta, s.extreme, last)) {
      oldest = id;
      break;
    }
  }
  if (oldest == UINT64_MAX) return false;
  Trigger(oldest);
  return true;
}

void Engine::Impl::Trigger(uint64_t id) noexcept {
  const uint32_t i = book_.Lookup(OrderId{id});
  // One order of an OCO pair executing cancels the other, first: the other's
  // share of the pair's lock returns before this one locks what it needs.
  if (const OrderList* l = ListOf(OrderId{id})) {
    OrderId a{}, b{};
    if (OcoPair(*l, &a, &b)) {
      const OrderId other = Raw(a) == id ? b : a;
      const uint32_t oi = book_.Lookup(other);
      if (oi != kNil) {
        const Order& x = book_.order(oi);
        Emit(OrderCanceled{x.id, x.account, x.market, x.side, Unfilled(x), x.locked});
      }
    }
  }
  const Order& o = book_.order(i);
  const MarketSpec& m = cfg_.markets[Raw(o.market)];
  const bool market_like = IsMarketLike(o.type);
  // What the order needs locked from here: a stop-market buy its book walk's
  // cost, any other what it locked while waiting (an OCO order sharing its
  // pair's lock: its share, topped up from the other's).
  int64_t need = StandingNeed(o);
  bool short_funds = false;
  if (market_like && o.side == Side::kBuy) {
    Walk w = DryWalk(m, o.market, o.side, o.account, o.stp, Price{0}, o.remaining.value, 0);
    short_funds = w.overflow;
    need = w.quote;
  }
  const int64_t lock = need - o.locked.value;
  short_funds =
      short_funds || lock > accounts_.balance(o.account, SpendAsset(m, o.side)).available.value;
  bool fok_unfillable = false;
  if (!market_like && o.tif == TimeInForce::kFok) {
    Walk w = DryWalk(m, o.market, o.side, o.account, o.stp, o.price, o.remaining.value, 0);
    fok_unfillable = w.lots < o.remaining.value;
  }
  Emit(OrderTriggered{o.id, o.account, o.market, o.side, last_price_[Raw(o.market)],
                      Amount{short_funds ? 0 : lock}});
  const Order& t = book_.order(i);
  if (short_funds || fok_unfillable) {
    Emit(OrderExpired{
        t.id, t.account, t.market, t.side,
        short_funds ? ExpireReason::kInsufficientBalance : ExpireReason::kFokNotFillable,
        t.remaining, t.locked});
    return;
  }
  Match(i);
}

int64_t Engine::Impl::StandingNeed(const Order& o) const noexcept {
  const MarketSpec& m = cfg_.markets[Raw(o.market)];
  const int64_t unfilled = Unfilled(o).value;
  int64_t need = 0;
  if (o.side == Side::kSell) {
    (void)CheckedMul3(unfilled, m.lot_units, 1, &need);
  } else if (!IsMarketLike(o.type)) {
    (void)CheckedMul3(o.price.value, unfilled, m.notional_per_tick_lot, &need);
  }
  return need;
}

// ---------------------------------------------------------------- lists

const Engine::Impl::OrderList* Engine::Impl::ListOf(OrderId id) const noexcept {
  if (list_of_.empty()) return nullptr;
  auto it = list_of_.find(Raw(id));
  if (it == list_of_.end()) return nullptr;
  return &lists_.find(it->second)->second;
}

bool Engine::Impl::OcoPair(const OrderList& l, OrderId* a, OrderId* b) noexcept {
  if (l.type == ListType::kOto) return false;
  const int first = l.type == ListType::kOco ? 0 : 1;
  *a = l.orders[first];
  *b = l.orders[first + 1];
  return true;
}

int64_t Engine::Impl::ShareLock(const PlaceOrder* pair, Admission* adm) noexcept {
  const int holder = pair[1].type == OrderType::kLimitMaker ? 1 : 0;
  const int other = 1 - holder;
  adm[other].lock = std::max<int64_t>(0, adm[other].lock - adm[holder].lock);
  return adm[0].lock + adm[1].lock;
}

OrderId Engine::Impl::LockHolder(OrderId a, OrderId b) const noexcept {
  const uint32_t bi = book_.Lookup(b);
  if (bi != kNil && book_.order(bi).type == OrderType::kLimitMaker) return b;
  return a;
}

void Engine::Impl::Decide(const PlaceOrderList& l) noexcept {
  auto reject = [&](RejectReason r, uint64_t existing = 0) {
    Reject(CommandType::kPlaceOrderList, r, l.account, l.market, OrderId{0}, l.list_client_order_id,
           existing);
  };
  if (!EnumInRange(l.type, ListType::kOtoco)) return reject(RejectReason::kInvalidOrderList);
  const int n = l.type == ListType::kOco ? 2 : (l.type == ListType::kOto ? 2 : 3);
  PlaceOrder orders[3];
  for (int k = 0; k < n; ++k) {
    const ListOrder& o = l.orders[k];
    orders[k] = ListPlacing(
        OrderTerms{l.account, l.market, o.side, o.type,
                   IsMarketLike(o.type) ? TimeInForce::kIoc : o.tif, l.stp, o.price, o.qty},
        o.client_order_id, o.stop_price, o.trailing_delta, o.iceberg_qty);
  }
  // The shape: which types go where, one side and one quantity per OCO pair,
  // the above order's price above the below order's.
  auto above_ok = [](const PlaceOrder& p) {
    return p.side == Side::kSell
               ? (p.type == OrderType::kLimitMaker || p.type == OrderType::kTakeProfit ||
                  p.type == OrderType::kTakeProfitLimit)
               : (p.type == OrderType::kStopLoss || p.type == OrderType::kStopLossLimit);
  };
  auto below_ok = [](const PlaceOrder& p) {
    return p.side == Side::kBuy
               ? (p.type == OrderType::kLimitMaker || p.type == OrderType::kTakeProfit ||
                  p.type == OrderType::kTakeProfitLimit)
               : (p.type == OrderType::kStopLoss || p.type == OrderType::kStopLossLimit);
  };
  // The price an OCO order sits at or triggers at (0: a trailing stop without
  // a stop price, which has no fixed one).
  auto level = [](const PlaceOrder& p) {
    return p.type == OrderType::kLimitMaker ? p.price : p.stop_price;
  };
  const int pair = l.type == ListType::kOco ? 0 : (l.type == ListType::kOtoco ? 1 : -1);
  if (pair >= 0) {
    const PlaceOrder& above = orders[pair];
    const PlaceOrder& below = orders[pair + 1];
    if (above.side != below.side || above.qty != below.qty || !above_ok(above) ||
        !below_ok(below) ||
        (level(above).value != 0 && level(below).value != 0 && level(above) <= level(below))) {
      return reject(RejectReason::kInvalidOrderList);
    }
  }
  if (l.type != ListType::kOco) {
    const PlaceOrder& working = orders[0];
    if (working.type != OrderType::kLimit && working.type != OrderType::kLimitMaker) {
      return reject(RejectReason::kInvalidOrderList);
    }
  }
  // Client ids: distinct within the list; the list's own among the account's
  // open lists.
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < k; ++j) {
      if (!orders[k].client_order_id.empty() &&
          orders[k].client_order_id == orders[j].client_order_id) {
        return reject(RejectReason::kDuplicateClientOrderId);
      }
    }
  }
  Key128 list_cid{};
  if (!l.list_client_order_id.empty()) {
    list_cid = HashString(l.list_client_order_id.view());
    auto it = list_client_ids_.find({Raw(l.account), list_cid.lo, list_cid.hi});
    if (it != list_client_ids_.end()) {
      return reject(RejectReason::kDuplicateClientOrderId, it->second);
    }
  }
  // Every order's own checks; pending orders' funds are checked when they
  // are placed.
  Admission adm[3];
  const int active = l.type == ListType::kOco ? 2 : 1;
  for (int k = 0; k < n; ++k) {
    adm[k] = Admit(orders[k], false, true);
    if (adm[k].reason != RejectReason::kNone) {
      Reject(CommandType::kPlaceOrderList, adm[k].reason, l.account, l.market, OrderId{0},
             orders[k].client_order_id, adm[k].existing);
      return;
    }
  }
  const MarketSpec& m = cfg_.markets[Raw(l.market)];
  const int64_t total = l.type == ListType::kOco ? ShareLock(&orders[0], &adm[0]) : adm[0].lock;
  if (total > accounts_.balance(l.account, SpendAsset(m, orders[0].side)).available.value) {
    return reject(RejectReason::kInsufficientBalance);
  }
  const uint64_t list_id = Raw(seq_);
  OrderId ids[3]{};
  for (int k = 0; k < n; ++k)
    ids[k] = OrderId{list_id + static_cast<uint64_t>(k) * kListOrderStride};
  Emit(ListAccepted{
      list_id, l.account, l.market, l.type, l.list_client_order_id, {ids[0], ids[1], ids[2]}});
  for (int k = 0; k < active; ++k) {
    Enter(orders[k], ids[k], adm[k].lock, adm[k].fok_unfillable);
  }
  for (int k = active; k < n; ++k) {
    const PlaceOrder& p = orders[k];
    Emit(OrderPending{ids[k], list_id, TermsOf(p), p.stop_price, p.trailing_delta, p.iceberg_qty,
                      p.client_order_id});
  }
  touched_lists_.push_back(list_id);
}

void Engine::Impl::Decide(const CancelOrderList& c) noexcept {
  auto reject = [&](RejectReason r) {
    Reject(CommandType::kCancelOrderList, r, c.account, c.market, OrderId{c.list_id},
           c.list_client_order_id);
  };
  if (Raw(c.market) >= book_.markets()) return reject(RejectReason::kUnknownMarket);
  if (Raw(c.account) >= cfg_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (!Cancelable(status_[Raw(c.market)])) return reject(RejectReason::kMarketNotTrading);
  uint64_t id = c.list_id;
  if (id == 0 && !c.list_client_order_id.empty()) {
    const Key128 k = HashString(c.list_client_order_id.view());
    auto it = list_client_ids_.find({Raw(c.account), k.lo, k.hi});
    if (it != list_client_ids_.end()) id = it->second;
  }
  auto it = lists_.find(id);
  if (it == lists_.end() || it->second.account != c.account || it->second.market != c.market) {
    return reject(RejectReason::kUnknownOrderList);
  }
  if (c.list_id != 0 && !c.list_client_order_id.empty()) {
    const Key128 k = HashString(c.list_client_order_id.view());
    if (!it->second.has_client_id || it->second.client_id != k) {
      return reject(RejectReason::kUnknownOrderList);
    }
  }
  const OrderList l = it->second;
  CancelList(l);
  // A list whose orders are all pending or closed has nothing to cancel but
  // is over all the same.
  touched_lists_.push_back(l.id);
}

void Engine::Impl::CancelList(const OrderList& l) noexcept {
  for (const OrderId id : l.orders) {
    if (Raw(id) == 0) continue;
    const uint32_t i = book_.Lookup(id);
    if (i == kNil) continue;
    const Order& o = book_.order(i);
    Emit(OrderCanceled{o.id, o.account, o.market, o.side, Unfilled(o), o.locked});
  }
}

void Engine::Impl::Settle() noexcept {
  for (;;) {
    if (!touched_lists_.empty()) {
      settling_.swap(touched_lists_);
      touched_lists_.clear();
      std::sort(settling_.begin(), settling_.end());
      settling_.erase(std::unique(settling_.begin(), settling_.end()), settling_.end());
      // SettleList's events touch lists again through touched_lists_, never
      // settling_.
      for (uint64_t id : settling_) SettleList(id);
      continue;
    }
    if (!check_triggers_) break;
    check_triggers_ = false;
    if (TriggerOldest(trigger_market_)) check_triggers_ = true;
  }
  filled_list_orders_.clear();
}

void Engine::Impl::SettleList(uint64_t list_id) noexcept {
  auto it = lists_.find(list_id);
  if (it == lists_.end()) return;
  const OrderList l = it->second;
  auto open = [&](OrderId id) { return Raw(id) != 0 && book_.Lookup(id) != kNil; };
  auto pending = [&](OrderId id) { return Raw(id) != 0 && pending_.count(Raw(id)) != 0; };
  auto filled = [&](OrderId id) {
    return std::find(filled_list_orders_.begin(), filled_list_orders_.end(), Raw(id)) !=
           filled_list_orders_.end();
  };
  // An OCO pair: once one of its orders executed (traded, or triggered) or
  // closed, the other goes; the executed one carries on alone.
  OrderId a{}, b{};
  if (OcoPair(l, &a, &b) && !pending(a)) {
    auto executed = [&](OrderId id) {
      const Order& o = book_.order(book_.Lookup(id));
      return Unfilled(o) < o.qty() || (IsConditional(o.type) && stops_.count(Raw(id)) == 0);
    };
    OrderId cancel{};
    if (open(a) != open(b)) {
      const OrderId left = open(a) ? a : b;
      if (!executed(left)) cancel = left;
    } else if (open(a) && (executed(a) || executed(b))) {
      cancel = executed(a) ? b : a;
    }
    if (Raw(cancel) != 0) {
      const Order& x = book_.order(book_.Lookup(cancel));
      Emit(OrderCanceled{x.id, x.account, x.market, x.side, Unfilled(x), x.locked});
    }
  }
  // OTO / OTOCO: the working order's complete fill places the pending ones.
  bool working_lost = false;
  if (l.type != ListType::kOco && !open(l.orders[0]) && pending(l.orders[1])) {
    if (filled(l.orders[0])) {
      Activate(l);
    } else {
      working_lost = true;  // canceled or expired: the pending orders go with the list
    }
  }
  bool live = false;
  for (const OrderId id : l.orders) live = live || open(id) || (pending(id) && !working_lost);
  if (!live) Emit(ListDone{l.id, l.account, l.market});
}

void Engine::Impl::Activate(const OrderList& l) noexcept {
  const int first = 1;
  const int n = l.type == ListType::kOto ? 2 : 3;
  PlaceOrder orders[3];
  for (int k = first; k < n; ++k) {
    const OrderPending& p = pending_.find(Raw(l.orders[k]))->second;
    orders[k] =
        ListPlacing(p.terms, p.client_order_id, p.stop_price, p.trailing_delta, p.iceberg_qty);
  }
  Admission adm[3];
  RejectReason reason = RejectReason::kNone;
  uint64_t existing = 0;
  for (int k = first; k < n && reason == RejectReason::kNone; ++k) {
    adm[k] = Admit(orders[k], false, false);
    reason = adm[k].reason;
    existing = adm[k].existing;
  }
  if (reason == RejectReason::kNone) {
    const MarketSpec& m = cfg_.markets[Raw(l.market)];
    const int64_t total = l.type == ListType::kOtoco ? ShareLock(&orders[1], &adm[1]) : adm[1].lock;
    if (total > accounts_.balance(l.account, SpendAsset(m, orders[1].side)).available.value) {
      reason = RejectReason::kInsufficientBalance;
    }
  }
  if (reason != RejectReason::kNone) {
    // The pending orders cannot be placed now: each is refused, naming it.
    for (int k = first; k < n; ++k) {
      Emit(Rejected{CommandType::kPlaceOrderList, reason, l.account, l.market, l.orders[k],
                    existing, orders[k].client_order_id});
    }
    return;
  }
  for (int k = first; k < n; ++k) {
    Enter(orders[k], l.orders[k], adm[k].lock, adm[k].fok_unfillable);
  }
  // A stop placed now may already have its condition met.
  check_triggers_ = true;
  trigger_market_ = l.market;
}

void Engine::Impl::Decide(const AuthChange& c) noexcept {
  AuthChanged e;
  const RejectReason r = auth_.Check(c, &e);
  if (r != RejectReason::kNone) {
    return Reject(CommandType::kChangeAuth, r, c.account, MarketId{}, OrderId{}, ClientOrderId{},
                  0);
  }
  Emit(e);
}

void Engine::Impl::Decide(const SetMarketStatus& s) noexcept {
  if (Raw(s.market) >= book_.markets()) {
    return Reject(CommandType::kSetMarketStatus, RejectReason::kUnknownMarket, AccountId{0},
                  s.market);
  }
  if (!EnumInRange(s.status, MarketStatus::kClosed)) {
    return Reject(CommandType::kSetMarketStatus, RejectReason::kInvalidStatus, AccountId{0},
                  s.market);
  }
  if (s.status == MarketStatus::kClosed) CancelMarket(s.market);
  Emit(MarketStatusChanged{s.market, s.status});
}

// Closing a market cancels every open order of it, whoever holds it, oldest
// first: resting, waiting (stop) and iceberg orders; an order of a list takes
// its list with it, as a cancel of it does.
void Engine::Impl::CancelMarket(MarketId market) noexcept {
  scratch_ids_.clear();
  for (uint32_t a = 0; a < cfg_.max_accounts; ++a) {
    for (uint32_t i = book_.first_of_account(AccountId{a}); i != kNil;
         i = book_.order(i).acct_next) {
      if (book_.order(i).market == market) scratch_ids_.push_back(Raw(book_.order(i).id));
    }
  }
  std::sort(scratch_ids_.begin(), scratch_ids_.end());
  const std::vector<uint64_t> ids = scratch_ids_;  // CancelList may use the scratch
  for (uint64_t id : ids) {
    const uint32_t i = book_.Lookup(OrderId{id});
    if (i == kNil) continue;  // gone with its list
    const Order& o = book_.order(i);
    if (const OrderList* l = ListOf(o.id)) {
      const OrderList list = *l;
      CancelList(list);
      touched_lists_.push_back(list.id);
      continue;
    }
    Emit(OrderCanceled{o.id, o.account, o.market, o.side, Unfilled(o), o.locked});
  }
}

// A symbol already taken is told apart from the other refusals: the operator
// API answers it as a conflict.
void Engine::Impl::Decide(const AddAsset& a) noexcept {
  const auto taken = [&](const AssetSpec& s) { return s.symbol == a.symbol.view(); };
  if (std::any_of(cfg_.assets.begin(), cfg_.assets.end(), taken)) {
    return Reject(CommandType::kAddAsset, RejectReason::kSymbolTaken, AccountId{0}, MarketId{0});
  }
  const AssetAdded e{AssetId{static_cast<uint16_t>(cfg_.assets.size())}, a.symbol, a.scale};
  if (!ValidateNewAsset(cfg_, SpecOf(e)).ok()) {
    return Reject(CommandType::kAddAsset, RejectReason::kInvalidListing, AccountId{0}, MarketId{0});
  }
  Emit(e);
}

void Engine::Impl::Decide(const AddMarket& m) noexcept {
  const auto taken = [&](const MarketSpec& s) { return s.symbol == m.symbol.view(); };
  if (std::any_of(cfg_.markets.begin(), cfg_.markets.end(), taken)) {
    return Reject(CommandType::kAddMarket, RejectReason::kSymbolTaken, AccountId{0}, MarketId{0});
  }
  const MarketAdded e{MarketId{static_cast<uint16_t>(cfg_.markets.size())},
                      m.symbol,
                      m.base,
                      m.quote,
                      m.tick_units,
                      m.lot_units,
                      m.min_qty,
                      m.max_qty,
                      m.max_price,
                      m.min_notional,
                      m.maker_fee_bps,
                      m.taker_fee_bps,
                      m.status};
  MarketSpec spec = SpecOf(e);
  if (!EnumInRange(m.status, MarketStatus::kCancelOnly) || !ValidateNewMarket(cfg_, &spec).ok()) {
    return Reject(CommandType::kAddMarket, RejectReason::kInvalidListing, AccountId{0},
                  MarketId{0});
  }
  Emit(e);
}

// ---------------------------------------------------------------- evolve

void Engine::Impl::Apply(const Event& e) noexcept {
  last_seq_ = e.seq;
  std::visit([&](const auto& body) { Evolve(body, e.timestamp_ns); }, e.body);
}

void Engine::Impl::Evolve(const OrderAccepted& a, int64_t ts) {
  const OrderTerms& t = a.terms;
  const MarketSpec& m = cfg_.markets[Raw(t.market)];
  const uint32_t i = book_.Allocate();
  Order& o = book_.order(i);
  o.id = a.order_id;
  o.price = t.price;
  o.by_quote = a.quote_qty.value != 0;
  o.qty_or_budget = t.qty.value;
  o.remaining = t.qty;
  if (o.by_quote) o.qty_or_budget = a.quote_qty.value;
  o.locked = a.locked;
  o.created_ns = ts;
  o.account = t.account;
  o.market = t.market;
  o.side = t.side;
  o.type = t.type;
  o.tif = t.tif;
  o.stp = t.stp;
  if (!pending_.empty()) pending_.erase(Raw(a.order_id));  // a pending order placed
  if (!a.client_order_id.empty()) {
    o.has_client_id = true;
    o.client_id = HashString(a.client_order_id.view());
    accounts_.HoldClientId(o.account, o.client_id, o.id);
  }
  const Balance& b = accounts_.Lock(t.account, SpendAsset(m, t.side), a.locked);
  MB_CHECK(b.available.value >= 0);
  book_.Open(i);
}

void Engine::Impl::Evolve(const Trade& t, int64_t) {
  const MarketSpec& m = cfg_.markets[Raw(t.market)];
  uint32_t mi = book_.Lookup(t.maker_order_id);
  uint32_t ti = book_.Lookup(t.taker_order_id);
  MB_CHECK(mi != kNil && ti != kNil);
  Order& maker = book_.order(mi);
  Order& taker = book_.order(ti);
  const bool taker_buys = t.taker_side == Side::kBuy;
  AccountId buyer = taker_buys ? t.taker_account : t.maker_account;
  AccountId seller = taker_buys ? t.maker_account : t.taker_account;
  Amount buyer_fee = taker_buys ? t.taker_fee : t.maker_fee;
  Amount seller_fee = taker_buys ? t.maker_fee : t.taker_fee;

  accounts_.Spend(buyer, m.quote, t.notional);
  accounts_.Credit(buyer, m.base, t.base_qty - buyer_fee);
  accounts_.Spend(seller, m.base, t.base_qty);
  accounts_.Credit(seller, m.quote, t.notional - seller_fee);
  accounts_.Credit(cfg_.fee_account, m.base, buyer_fee);
  accounts_.Credit(cfg_.fee_account, m.quote, seller_fee);

  Amount maker_spend = taker_buys ? t.base_qty : t.notional;
  Amount taker_spend = taker_buys ? t.notional : t.base_qty;
  maker.locked -= maker_spend;
  book_.Reduce(mi, t.qty);
  taker.locked -= taker_spend;
  if (taker.by_quote) {
    taker.qty_or_budget -= t.notional.value;
  } else {
    taker.remaining -= t.qty;
  }
  if (t.taker_released.value != 0) {
    accounts_.Release(t.taker_account, SpendAsset(m, t.taker_side), t.taker_released);
    taker.locked -= t.taker_released;
  }
  next_trade_ = TradeId{Raw(t.trade_id) + 1};
  last_price_[Raw(t.market)] = t.price;
  if (range_high_.value == 0 || range_market_ != t.market) {
    range_market_ = t.market;
    range_low_ = range_high_ = t.price;
  } else {
    range_low_ = std::min(range_low_, t.price);
    range_high_ = std::max(range_high_, t.price);
  }
  if (!list_of_.empty()) {
    for (const auto& [id, done] : {std::pair{t.maker_order_id, t.maker_filled},
                                   std::pair{t.taker_order_id, t.taker_filled}}) {
      auto it = list_of_.find(Raw(id));
      if (it == list_of_.end()) continue;
      touched_lists_.push_back(it->second);
      if (done) filled_list_orders_.push_back(Raw(id));
    }
  }
  if (!stops_.empty()) {
    const Triggers& tr = triggers_[Raw(t.market)];
    if (!tr.rise.empty() || !tr.fall.empty() || !tr.trailing.empty()) {
      check_triggers_ = true;
      trigger_market_ = t.market;
      if (!tr.trailing.empty()) Follow(t.market, t.price);
    }
  }
  MB_CHECK(maker.locked.value >= 0 && taker.locked.value >= 0);
  if (t.maker_filled) {
    MB_CHECK(maker.remaining.value == 0 && maker.locked.value == 0);
    Retire(mi);
  }
  if (t.taker_filled) {
    MB_CHECK(taker.locked.value == 0);
    Retire(ti);
  }
}

void Engine::Impl::Evolve(const OrderRested& r, int64_t) {
  uint32_t i = book_.Lookup(r.order_id);
  MB_CHECK(i != kNil && book_.order(i).level == kNil && book_.order(i).remaining == r.remaining);
  Order& o = book_.order(i);
  if (r.released.value != 0) {
    accounts_.Release(o.account, SpendAsset(cfg_.markets[Raw(o.market)], o.side), r.released);
    o.locked -= r.released;
    MB_CHECK(o.locked.value >= 0);
  }
  if (!icebergs_.empty()) {
    if (auto it = icebergs_.find(Raw(o.id)); it != icebergs_.end()) {
      // An iceberg rests its first slice; the rest is hidden.
      const Qty visible{std::min(it->second.slice.value, o.remaining.value)};
      it->second.hidden = o.remaining - visible;
      o.remaining = visible;
      book_.InsertIntoBook(i);
      book_.CountIceberg(o.level, 1);
      return;
    }
  }
  book_.InsertIntoBook(i);
}

void Engine::Impl::Evolve(const OrderAmended& a, int64_t) {
  uint32_t i = book_.Lookup(a.order_id);
  MB_CHECK(i != kNil);
  Order& o = book_.order(i);
  const MarketSpec& m = cfg_.markets[Raw(o.market)];
  const Balance& b = accounts_.Lock(o.account, SpendAsset(m, o.side), a.lock_delta);
  o.locked += a.lock_delta;
  MB_CHECK(b.available.value >= 0 && o.locked.value >= 0);
  if (a.keeps_priority) {
    book_.Reduce(i, o.remaining - a.new_remaining);
    o.qty_or_budget = a.new_qty.value;
  } else {
    if (o.level != kNil) book_.RemoveFromBook(i);
    o.price = a.new_price;
    o.qty_or_budget = a.new_qty.value;
    o.remaining = a.new_remaining;
  }
}

void Engine::Impl::Evolve(const ClientOrderIdChanged& x, int64_t) {
  uint32_t i = book_.Lookup(x.order_id);
  MB_CHECK(i != kNil);
  Order& o = book_.order(i);
  // The previous id is free at once: the order still holds the new one.
  if (o.has_client_id) accounts_.ReleaseClientId(o.account, o.client_id, o.id);
  o.has_client_id = !x.client_order_id.empty();
  o.client_id = o.has_client_id ? HashString(x.client_order_id.view()) : Key128{};
  if (o.has_client_id) accounts_.HoldClientId(o.account, o.client_id, o.id);
}

void Engine::Impl::Decide(const CancelReplace& c) noexcept {
  // One command, one sequence: nothing comes between the cancel and the order.
  Decide(c.cancel);
  const bool canceled = !out_->empty() && out_->back().type() == EventType::kOrderCanceled;
  if (!canceled && c.mode != CancelReplaceMode::kAllowFailure) return;
  Decide(c.place);
}

void Engine::Impl::Evolve(const Deposited& d, int64_t) {
  accounts_.Deposit(d.account, d.asset, d.amount, HashString(d.ref.view()), d.transfer_id);
}

void Engine::Impl::Evolve(const Withdrawn& w, int64_t) {
  const Balance& b =
      accounts_.Withdraw(w.account, w.asset, w.amount, HashString(w.ref.view()), w.transfer_id);
  MB_CHECK(b.available.value >= 0);
}

void Engine::Impl::Evolve(const TransferHeld& t, int64_t) {
  const Balance& b =
      accounts_.Hold(PendingTransfer{t.transfer_id, t.account, t.asset, t.amount, t.fee, t.address},
                     HashString(t.ref.view()));
  MB_CHECK(b.available.value >= 0);
}

void Engine::Impl::Evolve(const TransferCompleted& t, int64_t) {
  const PendingTransfer* p = accounts_.FindPending(t.transfer_id);
  MB_CHECK(p != nullptr && p->account == t.account && p->asset == t.asset &&
           p->amount == t.amount && p->fee == t.fee);
  accounts_.Unhold(t.transfer_id, false);
  accounts_.SetSupply(t.asset, accounts_.supply(t.asset) - (t.amount - t.fee));
  accounts_.Credit(cfg_.fee_account, t.asset, t.fee);
}

void Engine::Impl::Evolve(const TransferRefunded& t, int64_t) {
  const PendingTransfer* p = accounts_.FindPending(t.transfer_id);
  MB_CHECK(p != nullptr && p->account == t.account && p->asset == t.asset && p->amount == t.amount);
  accounts_.Unhold(t.transfer_id, true);
}

void Engine::Impl::Evolve(const OrderArmed& a, int64_t) {
  const uint32_t i = book_.Lookup(a.order_id);
  MB_CHECK(i != kNil && book_.order(i).level == kNil && IsConditional(book_.order(i).type));
  const Order& o = book_.order(i);
  Stop s;
  s.id = a.order_id;
  s.market = a.market;
  s.side = a.side;
  s.rise = TriggersOnRise(o.type, o.side);
  s.stop = a.stop_price;
  s.delta = a.trailing_delta;
  // Without an activation price a trailing stop tracks from the last price
  // at its placement (from the next trade when the market has none).
  s.active = s.delta != 0 && s.stop.value == 0;
  if (s.active) s.extreme = last_price_[Raw(a.market)];
  Arm(s);
}

void Engine::Impl::Evolve(const OrderTriggered& t, int64_t) {
  const uint32_t i = book_.Lookup(t.order_id);
  MB_CHECK(i != kNil && stops_.count(Raw(t.order_id)) == 1);
  Disarm(t.order_id);
  if (t.lock_delta.value != 0) {
    Order& o = book_.order(i);
    const Balance& b =
        accounts_.Lock(o.account, SpendAsset(cfg_.markets[Raw(o.market)], o.side), t.lock_delta);
    o.locked += t.lock_delta;
    MB_CHECK(b.available.value >= 0);
  }
}

void Engine::Impl::Evolve(const IcebergAccepted& a, int64_t) {
  MB_CHECK(book_.Lookup(a.order_id) != kNil);
  icebergs_.emplace(Raw(a.order_id), Iceberg{a.slice, Qty{0}});
}

void Engine::Impl::Evolve(const IcebergRefilled& r, int64_t) {
  const uint32_t i = book_.Lookup(r.order_id);
  auto it = icebergs_.find(Raw(r.order_id));
  MB_CHECK(i != kNil && it != icebergs_.end() && book_.order(i).level != kNil &&
           book_.order(i).remaining.value == 0 && r.visible.value > 0 &&
           r.visible + r.hidden == it->second.hidden);
  Order& o = book_.order(i);
  book_.CountIceberg(o.level, -1);
  book_.RemoveFromBook(i);
  o.remaining = r.visible;
  it->second.hidden = r.hidden;
  book_.InsertIntoBook(i);
  book_.CountIceberg(o.level, 1);
}

void Engine::Impl::Evolve(const Rejected& r, int64_t) noexcept {
  if (!pending_.empty() && r.command == CommandType::kPlaceOrderList && Raw(r.order_id) != 0) {
    pending_.erase(Raw(r.order_id));  // a pending order that could not be placed
  }
}

void Engine::Impl::Evolve(const ListAccepted& a, int64_t) {
  OrderList l;
  l.id = a.list_id;
  l.account = a.account;
  l.market = a.market;
  l.type = a.type;
  l.has_client_id = !a.list_client_order_id.empty();
  if (l.has_client_id) {
    l.client_id = HashString(a.list_client_order_id.view());
    list_client_ids_[{Raw(l.account), l.client_id.lo, l.client_id.hi}] = l.id;
  }
  for (int k = 0; k < 3; ++k) {
    l.orders[k] = a.order_ids[k];
    if (Raw(l.orders[k]) != 0) list_of_[Raw(l.orders[k])] = l.id;
  }
  MB_CHECK(lists_.emplace(l.id, l).second);
}

void Engine::Impl::Evolve(const OrderPending& p, int64_t) {
  MB_CHECK(list_of_.count(Raw(p.order_id)) == 1);
  pending_.emplace(Raw(p.order_id), p);
}

void Engine::Impl::Evolve(const ListDone& d, int64_t) {
  auto it = lists_.find(d.list_id);
  MB_CHECK(it != lists_.end());
  const OrderList& l = it->second;
  for (const OrderId id : l.orders) {
    if (Raw(id) == 0) continue;
    MB_CHECK(book_.Lookup(id) == kNil);
    list_of_.erase(Raw(id));
    pending_.erase(Raw(id));
  }
  if (l.has_client_id) list_client_ids_.erase({Raw(l.account), l.client_id.lo, l.client_id.hi});
  lists_.erase(it);
}

void Engine::Impl::Evolve(const AssetAdded& a, int64_t) {
  MB_CHECK(Raw(a.asset) == cfg_.assets.size());
  AssetSpec spec = SpecOf(a);
  MB_CHECK(ValidateNewAsset(cfg_, spec).ok());
  cfg_.assets.push_back(std::move(spec));
  accounts_.AddAsset();
}

void Engine::Impl::Evolve(const MarketAdded& m, int64_t) {
  MB_CHECK(Raw(m.market) == cfg_.markets.size());
  MarketSpec spec = SpecOf(m);
  MB_CHECK(ValidateNewMarket(cfg_, &spec).ok());  // also fills the derived fields
  cfg_.markets.push_back(std::move(spec));
  book_.AddMarket();
  status_.push_back(m.status);
  last_price_.push_back(Price{0});
  triggers_.emplace_back();
}

Qty Engine::Impl::Unfilled(const Order& o) const noexcept {
  return Qty{o.remaining.value + Hidden(o.id)};
}

int64_t Engine::Impl::Hidden(OrderId id) const noexcept {
  if (icebergs_.empty()) return 0;
  auto it = icebergs_.find(Raw(id));
  return it == icebergs_.end() ? 0 : it->second.hidden.value;
}

void Engine::Impl::Arm(const Stop& s) {
  Triggers& tr = triggers_[Raw(s.market)];
  const uint64_t id = Raw(s.id);
  stops_.emplace(id, s);
  if (s.delta != 0) {
    tr.trailing.insert(std::lower_bound(tr.trailing.begin(), tr.trailing.end(), id), id);
  } else if (s.rise) {
    tr.rise.emplace(s.stop.value, id);
  } else {
    tr.fall.emplace(-s.stop.value, id);
  }
}

void Engine::Impl::Disarm(OrderId order) {
  auto it = stops_.find(Raw(order));
  if (it == stops_.end()) return;
  const Stop& s = it->second;
  Triggers& tr = triggers_[Raw(s.market)];
  const uint64_t id = Raw(order);
  if (s.delta != 0) {
    tr.trailing.erase(std::lower_bound(tr.trailing.begin(), tr.trailing.end(), id));
  } else if (s.rise) {
    tr.rise.erase({s.stop.value, id});
  } else {
    tr.fall.erase({-s.stop.value, id});
  }
  stops_.erase(it);
}

void Engine::Impl::Follow(MarketId market, Price price) {
  for (uint64_t id : triggers_[Raw(market)].trailing) {
    Stop& s = stops_.find(id)->second;
    if (!s.active) {
      // The activation price met: tracking starts from this trade.
      if (StopMet(s.rise, s.stop, price)) {
        s.active = true;
        s.extreme = price;
      }
    } else if (s.extreme.value == 0 ||
               (s.side == Side::kBuy ? price < s.extreme : price > s.extreme)) {
      s.extreme = price;
    }
  }
}

void Engine::Impl::ApplyClose(OrderId id, Amount released) {
  uint32_t i = book_.Lookup(id);
  MB_CHECK(i != kNil);
  const Order& o = book_.order(i);
  MB_CHECK(o.locked == released);
  accounts_.Release(o.account, SpendAsset(cfg_.markets[Raw(o.market)], o.side), released);
  Retire(i);
}

void Engine::Impl::Retire(uint32_t i) {
  const Order& o = book_.order(i);
  if (IsConditional(o.type)) Disarm(o.id);  // canceled while it waited
  if (!list_of_.empty()) {
    if (auto it = list_of_.find(Raw(o.id)); it != list_of_.end()) {
      touched_lists_.push_back(it->second);
    }
  }
  if (!icebergs_.empty()) {
    if (auto it = icebergs_.find(Raw(o.id)); it != icebergs_.end()) {
      if (o.level != kNil) book_.CountIceberg(o.level, -1);
      icebergs_.erase(it);
    }
  }
  if (o.has_client_id) {
    if (cfg_.client_order_ids == ClientOrderIds::kIdempotent) {
      accounts_.ReserveClientId(o.account, o.client_id, o.id);
    } else {
      accounts_.ReleaseClientId(o.account, o.client_id, o.id);
    }
  }
  book_.Close(i);
}

// ---------------------------------------------------------------- Engine

Engine::Engine(EngineConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

void Engine::Process(const Command& command, EventBuffer* out) noexcept {
  impl_->Process(command, out);
}
void Engine::Apply(const Event& event) noexcept { impl_->Apply(event); }
const EngineConfig& Engine::config() const noexcept { return impl_->config(); }
const EngineConfig& Engine::start_config() const noexcept { return impl_->start_config(); }
Sequence Engine::last_sequence() const noexcept { return impl_->last_sequence(); }
TradeId Engine::next_trade_id() const noexcept { return impl_->next_trade_id(); }
Balance Engine::balance(AccountId account, AssetId asset) const noexcept {
  return impl_->balance(account, asset);
}
MarketStatus Engine::market_status(MarketId market) const noexcept {
  return impl_->market_status(market);
}
std::optional<OrderView> Engine::FindOrder(OrderId id) const noexcept {
  return impl_->book().FindOrder(id);
}
std::optional<Price> Engine::BestBid(MarketId market) const noexcept {
  return impl_->book().Best(market, Side::kBuy);
}
std::optional<Price> Engine::BestAsk(MarketId market) const noexcept {
  return impl_->book().Best(market, Side::kSell);
}
std::vector<LevelView> Engine::Depth(MarketId market, Side side, std::size_t max_levels) const {
  return impl_->book().Depth(market, side, max_levels);
}
std::vector<OrderView> Engine::Orders(MarketId market, Side side) const {
  return impl_->book().Orders(market, side);
}
std::size_t Engine::open_orders() const noexcept { return impl_->book().open_orders(); }
Amount Engine::supply(AssetId asset) const noexcept { return impl_->accounts().supply(asset); }
Amount Engine::held(AssetId asset) const noexcept { return impl_->accounts().held(asset); }
std::vector<PendingTransfer> Engine::PendingTransfers() const {
  std::vector<PendingTransfer> out;
  impl_->accounts().ForEachPending(
      [&](const TransferId&, const PendingTransfer& p) { out.push_back(p); });
  std::sort(out.begin(), out.end(),
            [](const PendingTransfer& a, const PendingTransfer& b) { return a.id < b.id; });
  return out;
}

}  // namespace mb::engine
