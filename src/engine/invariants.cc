// The engine's invariants (docs/architecture.md, "The domain's invariants"), checked from the live
// structures.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/checked.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/engine.h"
#include "engine/internal/engine_impl.h"

namespace mb::engine {

Status Engine::Impl::CheckInvariants() const {
  auto fail = [](std::string m) { return Status(StatusCode::kInternal, std::move(m)); };
  const std::size_t n_assets = accounts_.assets();
  // Locks held by open orders, per (account, asset).
  std::vector<int128> order_locks(static_cast<std::size_t>(cfg_.max_accounts) * n_assets, 0);
  std::size_t seen = 0;
  std::size_t seen_icebergs = 0;
  for (std::size_t m = 0; m < book_.markets(); ++m) {
    const MarketSpec& spec = cfg_.markets[m];
    const MarketId mid{static_cast<uint16_t>(m)};
    for (int s = 0; s < 2; ++s) {
      Side side = static_cast<Side>(s);
      std::size_t level_count = 0;
      int64_t prev_key = 0;
      for (uint32_t li = book_.BestLevel(mid, side); li != kNil;
           li = book_.NextLevel(mid, side, li)) {
        const Level& l = book_.level(li);
        const int64_t key = OrderBook::LevelKey(side, l.price);
        if (book_.FindLevel(mid, side, l.price) != li)
          return fail("level key does not match price");
        if (level_count > 0 && key <= prev_key) return fail("levels out of order");
        prev_key = key;
        ++level_count;
        int64_t total = 0;
        uint32_t count = 0;
        uint32_t icebergs = 0;
        uint32_t prev = kNil;
        for (uint32_t i = l.head; i != kNil; i = book_.order(i).next) {
          const Order& o = book_.order(i);
          ++count;
          ++seen;
          if (!CheckedAdd(total, o.remaining.value, &total)) {
            return fail("level total overflows at price " + std::to_string(l.price.value));
          }
          if (o.prev != prev) return fail("broken FIFO links");
          prev = i;
          if (o.level != li || o.price != l.price || o.side != side || Raw(o.market) != m) {
            return fail("order " + std::to_string(Raw(o.id)) + " is in the wrong level");
          }
          // An iceberg's lock covers its hidden part too.
          const int64_t hidden = Hidden(o.id);
          if (icebergs_.count(Raw(o.id)) != 0) {
            ++icebergs;
            ++seen_icebergs;
          }
          const int64_t unfilled = o.remaining.value + hidden;
          if (o.remaining.value <= 0 || hidden < 0 || unfilled > o.qty().value) {
            return fail("order " + std::to_string(Raw(o.id)) + " is over-filled or empty");
          }
          int64_t need = 0;
          if (side == Side::kBuy) {
            if (!CheckedMul3(o.price.value, unfilled, spec.notional_per_tick_lot, &need) ||
                o.locked.value != need) {
              return fail("buy order " + std::to_string(Raw(o.id)) + " lock != price x remaining");
            }
          } else if (!CheckedMul3(unfilled, spec.lot_units, 1, &need) || o.locked.value != need) {
            return fail("sell order " + std::to_string(Raw(o.id)) + " lock != remaining");
          }
          AssetId spend = SpendAsset(spec, side);
          order_locks[Raw(o.account) * n_assets + Raw(spend)] += o.locked.value;
        }
        if (l.tail != prev) return fail("level tail mismatch");
        if (count == 0 || count != l.count || total != l.total.value || icebergs != l.icebergs) {
          return fail("level totals mismatch at price " + std::to_string(l.price.value));
        }
      }
      if (level_count != book_.level_count(mid, side)) {
        return fail("book side holds unreachable levels");
      }
    }
    auto bid = book_.Best(mid, Side::kBuy);
    auto ask = book_.Best(mid, Side::kSell);
    if (bid && ask && *bid >= *ask) return fail("book of " + spec.symbol + " is crossed");
  }
  // Waiting conditional orders: open, in no level, nothing executed; a
  // *_LIMIT one locks what its limit order will, a stop-market sell its
  // quantity, a stop-market buy nothing (it locks when triggered).
  for (const auto& [id, s] : stops_) {
    const uint32_t i = book_.Find(s.id);
    if (i == kNil) return fail("conditional order " + std::to_string(id) + " is not open");
    const Order& o = book_.order(i);
    const MarketSpec& spec = cfg_.markets[Raw(o.market)];
    ++seen;
    if (o.level != kNil || !IsConditional(o.type) || o.remaining != o.qty() ||
        o.market != s.market || o.side != s.side) {
      return fail("conditional order " + std::to_string(id) + " is not waiting");
    }
    int64_t need = StandingNeed(o);
    // An OCO pair shares one lock: the order not holding it locks only what
    // it needs beyond the holder's.
    if (const OrderList* l = ListOf(o.id)) {
      OrderId a{}, b{};
      if (OcoPair(*l, &a, &b)) {
        const OrderId holder = LockHolder(a, b);
        const uint32_t hi = book_.Find(holder);
        if (holder != o.id && hi != kNil) {
          need = std::max<int64_t>(0, need - StandingNeed(book_.order(hi)));
        }
      }
    }
    if (o.locked.value != need) {
      return fail("conditional order " + std::to_string(id) + " locks " +
                  std::to_string(o.locked.value) + ", not " + std::to_string(need));
    }
    order_locks[Raw(o.account) * n_assets + Raw(SpendAsset(spec, o.side))] += o.locked.value;
  }
  if (seen != book_.open_orders()) return fail("orders outside the book");
  if (seen_icebergs != icebergs_.size()) return fail("an iceberg is not in the book");
  std::vector<int128> sums(n_assets, 0);
  for (uint32_t acct = 0; acct < cfg_.max_accounts; ++acct) {
    for (std::size_t a = 0; a < n_assets; ++a) {
      const std::size_t i = acct * n_assets + a;
      const Balance& b = accounts_.balance(AccountId{acct}, AssetId{static_cast<uint16_t>(a)});
      if (b.available.value < 0 || b.locked.value < 0) {
        return fail("negative balance of account " + std::to_string(i / n_assets));
      }
      if (order_locks[i] != b.locked.value) {
        return fail("locked balance of account " + std::to_string(i / n_assets) + " asset " +
                    std::to_string(i % n_assets) + " differs from its open orders' locks");
      }
      sums[a] += static_cast<int128>(b.available.value) + b.locked.value;
    }
  }
  // Transfers to other venues: each holds a positive amount, and the held
  // totals are theirs; held funds are a bucket of their own in the supply.
  std::vector<int128> held(n_assets, 0);
  std::string bad_hold;
  accounts_.ForEachPending([&](const TransferId& id, const PendingTransfer& p) {
    if (p.id != id || p.amount.value <= 0 || p.fee.value < 0 || p.fee > p.amount ||
        Raw(p.asset) >= n_assets) {
      bad_hold = "pending transfer " + std::to_string(Raw(id)) + " is impossible";
      return;
    }
    held[Raw(p.asset)] += p.amount.value;
  });
  if (!bad_hold.empty()) return fail(bad_hold);
  for (std::size_t a = 0; a < n_assets; ++a) {
    const AssetId asset{static_cast<uint16_t>(a)};
    if (held[a] != accounts_.held(asset).value) {
      return fail("held total of asset " + cfg_.assets[a].symbol +
                  " differs from its pending transfers");
    }
    if (sums[a] + held[a] != accounts_.supply(asset).value) {
      return fail("conservation broken for asset " + cfg_.assets[a].symbol);
    }
  }
  return Status::Ok();
}

Status Engine::CheckInvariants() const { return impl_->CheckInvariants(); }

}  // namespace mb::engine
