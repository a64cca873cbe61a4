// Decide and evolve: Engine::Impl's two halves (engine/internal/engine_impl.h)
// and the Engine facade over them.
#include "engine/engine.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "common/checked.h"
#include "common/status.h"
#include "engine/internal/engine_impl.h"
#include "engine/internal/key128.h"

namespace mb::engine {
namespace {

using internal::EnumInRange;
using internal::HashString;

// Can a taker on `side` with limit `limit` trade at `level_price`?
bool Crosses(Side side, Price limit, Price level_price) noexcept {
  return side == Side::kBuy ? level_price <= limit : level_price >= limit;
}

}  // namespace

Engine::Impl::Impl(EngineConfig config)
    : cfg_(std::move(config)),
      book_(cfg_.markets.size(), cfg_.max_accounts, cfg_.expected_open_orders,
            cfg_.price_window_ticks),
      accounts_(cfg_.max_accounts, cfg_.assets.size(), cfg_.expected_open_orders,
                cfg_.client_id_memory),
      status_(cfg_.markets.size()) {
  for (std::size_t m = 0; m < cfg_.markets.size(); ++m) status_[m] = cfg_.markets[m].status;
}

// ---------------------------------------------------------------- decide

void Engine::Impl::Process(const Command& c, EventBuffer* out) noexcept {
  out_ = out;
  seq_ = Sequence{Raw(last_seq_) + 1};
  ts_ = c.timestamp_ns;
  // One Decide() overload per command type, as Apply() has one Evolve() per event type.
  std::visit([this](const auto& body) { Decide(body); }, c.body);
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
  auto reject = [&](RejectReason r, uint64_t existing = 0) {
    Reject(CommandType::kPlaceOrder, r, p.account, p.market, OrderId{0}, p.client_order_id,
           existing);
  };
  if (Raw(p.market) >= book_.markets()) return reject(RejectReason::kUnknownMarket);
  if (Raw(p.account) >= cfg_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (p.account == cfg_.fee_account) return reject(RejectReason::kUnauthorized);
  if (status_[Raw(p.market)] != MarketStatus::kTrading) {
    return reject(RejectReason::kMarketNotTrading);
  }
  if (!EnumInRange(p.side, Side::kSell) || !EnumInRange(p.type, OrderType::kMarket) ||
      !EnumInRange(p.tif, TimeInForce::kFok) || !EnumInRange(p.stp, StpMode::kExpireBoth)) {
    return reject(RejectReason::kInvalidOrderType);
  }
  const bool market_order = p.type == OrderType::kMarket;
  if (p.type == OrderType::kLimitMaker && p.tif != TimeInForce::kGtc) {
    return reject(RejectReason::kInvalidOrderType);
  }
  if (market_order ? ((p.qty.value != 0) == (p.quote_qty.value != 0)) : p.quote_qty.value != 0) {
    return reject(RejectReason::kInvalidOrderType);
  }
  Key128 cid{};
  if (!p.client_order_id.empty()) {
    cid = HashString(p.client_order_id.view());
    if (const OrderId* first = accounts_.FindClientId(p.account, cid)) {
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
  if (lock > accounts_.balance(p.account, SpendAsset(m, p.side)).available.value) {
    return reject(RejectReason::kInsufficientBalance);
  }
  // A FOK that cannot fill completely is accepted and expires at once,
  // untouched by matching: nothing trades and its whole lock returns.
  bool fok_unfillable = false;
  if (!market_order && p.tif == TimeInForce::kFok) {
    Walk w = DryWalk(m, p.market, p.side, p.account, p.stp, p.price, p.qty.value, 0);
    fok_unfillable = w.lots < p.qty.value;
  }
  const OrderId id{Raw(seq_)};
  Emit(OrderAccepted{
      id,
      OrderTerms{p.account, p.market, p.side, p.type, market_order ? TimeInForce::kIoc : p.tif,
                 p.stp, market_order ? Price{0} : p.price, by_quote ? Qty{0} : p.qty},
      by_quote ? p.quote_qty : Amount{0}, Amount{lock}, p.client_order_id});
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
  const bool any_price = taker.type == OrderType::kMarket;
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
                          ExpireReason::kSelfTradePrevention, maker.remaining, maker.locked});
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
    const bool maker_filled = maker.remaining.value == take;
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
    if (taker_filled) return;
  }
  const Order& t = book_.order(ti);
  if (t.type != OrderType::kMarket && t.tif == TimeInForce::kGtc) {
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
    for (uint32_t i = l.head; i != kNil; i = book_.order(i).next) {
      const Order& o = book_.order(i);
      if (o.account == account && stp != StpMode::kNone) {
        if (stp == StpMode::kExpireMaker) continue;
        return w;
      }
      int64_t take = o.remaining.value;
      if (max_lots != 0) take = std::min(take, max_lots - w.lots);
      if (budget != 0) take = std::min(take, (budget - w.quote) / lot_cost);
      if (take <= 0) return w;
      int64_t cost = 0;
      if (!CheckedMul3(l.price.value, take, m.notional_per_tick_lot, &cost) ||
          !CheckedAdd(w.quote, cost, &w.quote)) {
        w.overflow = true;
        return w;
      }
      w.lots += take;
      if (max_lots != 0 && w.lots == max_lots) return w;
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
  if (status_[Raw(c.market)] == MarketStatus::kHalted) {
    return reject(RejectReason::kMarketNotTrading);
  }
  uint32_t i = Target(c.account, c.market, c.order_id, c.orig_client_order_id);
  if (i == kNil) return reject(RejectReason::kUnknownOrder);
  const Order& o = book_.order(i);
  // Only resting (LIMIT, LIMIT_MAKER) orders are targets: qty() is a quantity.
  const bool executed = o.remaining < o.qty();
  if ((c.restriction == CancelRestriction::kOnlyNew && executed) ||
      (c.restriction == CancelRestriction::kOnlyPartiallyFilled && !executed) ||
      !EnumInRange(c.restriction, CancelRestriction::kOnlyPartiallyFilled)) {
    return reject(RejectReason::kCancelRestricted);
  }
  Emit(OrderCanceled{o.id, o.account, o.market, o.side, o.remaining, o.locked});
}

void Engine::Impl::Decide(const CancelAll& c) noexcept {
  auto reject = [&](RejectReason r) { Reject(CommandType::kCancelAll, r, c.account, c.market); };
  if (Raw(c.market) >= book_.markets()) return reject(RejectReason::kUnknownMarket);
  if (Raw(c.account) >= cfg_.max_accounts) return reject(RejectReason::kUnknownAccount);
  if (status_[Raw(c.market)] == MarketStatus::kHalted) {
    return reject(RejectReason::kMarketNotTrading);
  }
  scratch_ids_.clear();
  for (uint32_t i = book_.first_of_account(c.account); i != kNil; i = book_.order(i).acct_next) {
    const Order& o = book_.order(i);
    if (o.market == c.market) scratch_ids_.push_back(Raw(o.id));
  }
  if (scratch_ids_.empty()) return reject(RejectReason::kUnknownOrder);
  std::sort(scratch_ids_.begin(), scratch_ids_.end());
  for (uint64_t id : scratch_ids_) {
    const Order& o = book_.order(book_.Lookup(OrderId{id}));
    Emit(OrderCanceled{o.id, o.account, o.market, o.side, o.remaining, o.locked});
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

void Engine::Impl::Decide(const SetMarketStatus& s) noexcept {
  if (Raw(s.market) >= book_.markets()) {
    return Reject(CommandType::kSetMarketStatus, RejectReason::kUnknownMarket, AccountId{0},
                  s.market);
  }
  if (!EnumInRange(s.status, MarketStatus::kCancelOnly)) {
    return Reject(CommandType::kSetMarketStatus, RejectReason::kInvalidStatus, AccountId{0},
                  s.market);
  }
  Emit(MarketStatusChanged{s.market, s.status});
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
