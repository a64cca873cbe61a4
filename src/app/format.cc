#include "app/format.h"

#include <fmt/format.h>

#include "common/decimal.h"

namespace mb::app {
namespace {

const engine::MarketSpec& Spec(const engine::EngineConfig& c, MarketId m) {
  return c.markets.at(Raw(m));
}
int Scale(const engine::EngineConfig& c, AssetId a) { return c.assets.at(Raw(a)).scale; }

std::string Sym(const engine::EngineConfig& c, MarketId m) {
  return Raw(m) < c.markets.size() ? c.markets[Raw(m)].symbol : fmt::format("market#{}", Raw(m));
}

}  // namespace

std::string FormatPrice(const engine::EngineConfig& c, MarketId m, Price p) {
  const auto& s = Spec(c, m);
  return FormatDecimal(p.value * s.tick_units, Scale(c, s.quote));
}

std::string FormatQty(const engine::EngineConfig& c, MarketId m, Qty q) {
  const auto& s = Spec(c, m);
  return FormatDecimal(q.value * s.lot_units, Scale(c, s.base));
}

std::string FormatAmount(const engine::EngineConfig& c, AssetId a, Amount v) {
  return FormatDecimal(v.value, Scale(c, a)) + " " + c.assets.at(Raw(a)).symbol;
}

std::string FormatEvent(const engine::EngineConfig& c, const engine::Event& e) {
  using namespace engine;  // NOLINT(google-build-using-namespace): local, many types
  std::string head = fmt::format("#{} {}", Raw(e.seq), ToString(e.type()));
  auto valid_market = [&](MarketId m) { return Raw(m) < c.markets.size(); };
  switch (e.type()) {
    case EventType::kOrderAccepted: {
      const auto& a = std::get<OrderAccepted>(e.body);
      const engine::OrderTerms& t = a.terms;
      const auto& s = Spec(c, t.market);
      std::string size = a.quote_qty.value != 0 ? "for " + FormatAmount(c, s.quote, a.quote_qty)
                                                : FormatQty(c, t.market, t.qty);
      std::string price =
          IsMarketLike(t.type) ? std::string("MARKET") : FormatPrice(c, t.market, t.price);
      return fmt::format(
          "{} order={} acct={} {} {} {} {} @ {} {} stp={} locked={}{}", head, Raw(a.order_id),
          Raw(t.account), Sym(c, t.market), ToString(t.side), ToString(t.type), size, price,
          ToString(t.tif), ToString(t.stp), FormatAmount(c, SpendAsset(s, t.side), a.locked),
          a.client_order_id.empty() ? std::string()
                                    : fmt::format(" clientOrderId={}", a.client_order_id.view()));
    }
    case EventType::kRejected: {
      const auto& r = std::get<Rejected>(e.body);
      return fmt::format("{} {} acct={} reason={}{}{}", head, ToString(r.command), Raw(r.account),
                         ToString(r.reason),
                         Raw(r.order_id) ? fmt::format(" order={}", Raw(r.order_id)) : "",
                         r.existing_id ? fmt::format(" first={}", r.existing_id) : "");
    }
    case EventType::kTrade: {
      const auto& t = std::get<Trade>(e.body);
      const auto& s = Spec(c, t.market);
      bool taker_buys = t.taker_side == Side::kBuy;
      return fmt::format(
          "{} id={} {} {} @ {} notional={} maker={} (acct {}, fee {}) taker={} (acct {} {}, fee "
          "{}){}{}{}",
          head, Raw(t.trade_id), Sym(c, t.market), FormatQty(c, t.market, t.qty),
          FormatPrice(c, t.market, t.price), FormatAmount(c, s.quote, t.notional),
          Raw(t.maker_order_id), Raw(t.maker_account),
          FormatAmount(c, SpendAsset(s, t.taker_side), t.maker_fee), Raw(t.taker_order_id),
          Raw(t.taker_account), ToString(t.taker_side),
          FormatAmount(c, taker_buys ? s.base : s.quote, t.taker_fee),
          t.maker_filled ? " maker-filled" : "", t.taker_filled ? " taker-filled" : "",
          t.taker_released.value
              ? " released=" + FormatAmount(c, SpendAsset(s, t.taker_side), t.taker_released)
              : "");
    }
    case EventType::kOrderRested: {
      const auto& r = std::get<OrderRested>(e.body);
      if (!valid_market(r.market)) return fmt::format("{} order={}", head, Raw(r.order_id));
      const auto& s = Spec(c, r.market);
      return fmt::format("{} order={} acct={} {} remaining={}{}", head, Raw(r.order_id),
                         Raw(r.account), Sym(c, r.market), FormatQty(c, r.market, r.remaining),
                         r.released.value != 0
                             ? " released=" + FormatAmount(c, SpendAsset(s, r.side), r.released)
                             : std::string());
    }
    case EventType::kOrderCanceled:
    case EventType::kOrderExpired: {
      OrderId id;
      AccountId acct;
      MarketId m;
      Side side;
      Qty remaining;
      Amount released;
      std::string why;
      if (e.type() == EventType::kOrderCanceled) {
        const auto& x = std::get<OrderCanceled>(e.body);
        id = x.order_id, acct = x.account, m = x.market, side = x.side, remaining = x.remaining,
        released = x.released;
      } else {
        const auto& x = std::get<OrderExpired>(e.body);
        id = x.order_id, acct = x.account, m = x.market, side = x.side, remaining = x.remaining,
        released = x.released;
        why = fmt::format(" reason={}", ToString(x.reason));
      }
      const auto& s = Spec(c, m);
      return fmt::format("{} order={} acct={} {} remaining={} released={}{}", head, Raw(id),
                         Raw(acct), Sym(c, m), FormatQty(c, m, remaining),
                         FormatAmount(c, SpendAsset(s, side), released), why);
    }
    case EventType::kOrderAmended: {
      const auto& a = std::get<OrderAmended>(e.body);
      const auto& s = Spec(c, a.market);
      return fmt::format("{} order={} {} price={} qty={} remaining={} lock_delta={}{}", head,
                         Raw(a.order_id), Sym(c, a.market), FormatPrice(c, a.market, a.new_price),
                         FormatQty(c, a.market, a.new_qty), FormatQty(c, a.market, a.new_remaining),
                         FormatAmount(c, SpendAsset(s, a.side), a.lock_delta),
                         a.keeps_priority ? " keeps-priority" : " requeued");
    }
    case EventType::kDeposited: {
      const auto& d = std::get<Deposited>(e.body);
      return fmt::format("{} id={} acct={} {} ref={}", head, Raw(d.transfer_id), Raw(d.account),
                         FormatAmount(c, d.asset, d.amount), d.ref.view());
    }
    case EventType::kWithdrawn: {
      const auto& w = std::get<Withdrawn>(e.body);
      return fmt::format("{} id={} acct={} {} ref={}", head, Raw(w.transfer_id), Raw(w.account),
                         FormatAmount(c, w.asset, w.amount), w.ref.view());
    }
    case EventType::kTransferHeld: {
      const auto& t = std::get<TransferHeld>(e.body);
      return fmt::format("{} id={} acct={} {} fee={} ref={} to={}", head, Raw(t.transfer_id),
                         Raw(t.account), FormatAmount(c, t.asset, t.amount),
                         FormatAmount(c, t.asset, t.fee), t.ref.view(), t.address.view());
    }
    case EventType::kTransferCompleted: {
      const auto& t = std::get<TransferCompleted>(e.body);
      return fmt::format("{} id={} acct={} {} fee={}", head, Raw(t.transfer_id), Raw(t.account),
                         FormatAmount(c, t.asset, t.amount), FormatAmount(c, t.asset, t.fee));
    }
    case EventType::kTransferRefunded: {
      const auto& t = std::get<TransferRefunded>(e.body);
      return fmt::format("{} id={} acct={} {} reason={}", head, Raw(t.transfer_id), Raw(t.account),
                         FormatAmount(c, t.asset, t.amount), ToString(t.reason));
    }
    case EventType::kMarketStatusChanged: {
      const auto& s = std::get<MarketStatusChanged>(e.body);
      return fmt::format("{} {} -> {}", head, Sym(c, s.market), ToString(s.status));
    }
    case EventType::kOrderArmed: {
      const auto& a = std::get<OrderArmed>(e.body);
      return fmt::format(
          "{} order={} acct={} {} {} stop={}{}", head, Raw(a.order_id), Raw(a.account),
          Sym(c, a.market), ToString(a.side),
          a.stop_price.value != 0 ? FormatPrice(c, a.market, a.stop_price) : "none",
          a.trailing_delta != 0 ? fmt::format(" trailing={}bps", a.trailing_delta) : "");
    }
    case EventType::kOrderTriggered: {
      const auto& t = std::get<OrderTriggered>(e.body);
      const auto& s = Spec(c, t.market);
      return fmt::format("{} order={} acct={} {} {} last={} locked={}", head, Raw(t.order_id),
                         Raw(t.account), Sym(c, t.market), ToString(t.side),
                         FormatPrice(c, t.market, t.last_price),
                         FormatAmount(c, SpendAsset(s, t.side), t.lock_delta));
    }
    case EventType::kIcebergAccepted: {
      const auto& a = std::get<IcebergAccepted>(e.body);
      return fmt::format("{} order={} acct={} {} {} slice={}", head, Raw(a.order_id),
                         Raw(a.account), Sym(c, a.market), ToString(a.side),
                         FormatQty(c, a.market, a.slice));
    }
    case EventType::kIcebergRefilled: {
      const auto& r = std::get<IcebergRefilled>(e.body);
      return fmt::format("{} order={} acct={} {} {} @ {} visible={} hidden={}", head,
                         Raw(r.order_id), Raw(r.account), Sym(c, r.market), ToString(r.side),
                         FormatPrice(c, r.market, r.price), FormatQty(c, r.market, r.visible),
                         FormatQty(c, r.market, r.hidden));
    }
    case EventType::kListAccepted: {
      const auto& l = std::get<ListAccepted>(e.body);
      return fmt::format("{} list={} acct={} {} {} orders={},{},{}{}", head, l.list_id,
                         Raw(l.account), Sym(c, l.market), ToString(l.type), Raw(l.order_ids[0]),
                         Raw(l.order_ids[1]), Raw(l.order_ids[2]),
                         l.list_client_order_id.empty()
                             ? std::string()
                             : fmt::format(" listClientOrderId={}", l.list_client_order_id.view()));
    }
    case EventType::kOrderPending: {
      const auto& p = std::get<OrderPending>(e.body);
      const engine::OrderTerms& t = p.terms;
      return fmt::format(
          "{} order={} list={} acct={} {} {} {} {} @ {}", head, Raw(p.order_id), p.list_id,
          Raw(t.account), Sym(c, t.market), ToString(t.side), ToString(t.type),
          FormatQty(c, t.market, t.qty),
          IsMarketLike(t.type) ? std::string("MARKET") : FormatPrice(c, t.market, t.price));
    }
    case EventType::kListDone: {
      const auto& d = std::get<ListDone>(e.body);
      return fmt::format("{} list={} acct={} {}", head, d.list_id, Raw(d.account),
                         Sym(c, d.market));
    }
    case EventType::kAuthChanged: {
      // Never the secret (an HMAC secret is shown once, to the operator), and
      // of the key only its start: the key alone opens a user data stream.
      const auto& a = std::get<AuthChanged>(e.body);
      if (a.kind == AuthChangeKind::kCreateAccount) {
        return fmt::format("{} {} acct={} name={}", head, ToString(a.kind), Raw(a.account),
                           a.subject.view());
      }
      return fmt::format("{} {} acct={} key={}...{}", head, ToString(a.kind), Raw(a.account),
                         a.subject.view().substr(0, 8),
                         a.kind == AuthChangeKind::kCreateKey
                             ? fmt::format(" type={} permissions={}",
                                           a.ed25519 ? "ED25519" : "HMAC_SHA256", a.permissions)
                             : std::string());
    }
    case EventType::kAssetAdded: {
      const auto& a = std::get<AssetAdded>(e.body);
      return fmt::format("{} asset={} {} scale={}", head, Raw(a.asset), a.symbol.view(), a.scale);
    }
    case EventType::kMarketAdded: {
      // Sizes in the assets' smallest units, as the event holds them.
      const auto& m = std::get<MarketAdded>(e.body);
      return fmt::format(
          "{} market={} {} base={} quote={} tick_units={} lot_units={} min_qty={} max_qty={} "
          "max_price={} min_notional={} fees={}/{}bps {}",
          head, Raw(m.market), m.symbol.view(), Raw(m.base), Raw(m.quote), m.tick_units,
          m.lot_units, m.min_qty.value, m.max_qty.value, m.max_price.value, m.min_notional.value,
          m.maker_fee_bps, m.taker_fee_bps, ToString(m.status));
    }
    case EventType::kClientOrderIdChanged: {
      const auto& x = std::get<ClientOrderIdChanged>(e.body);
      return fmt::format("{} order={} acct={} client_order_id={}", head, Raw(x.order_id),
                         Raw(x.account), x.client_order_id.view());
    }
  }
  return head;
}

std::string FormatState(const engine::Engine& engine) {
  using engine::Side;
  const auto& c = engine.config();
  std::string out;
  out += fmt::format("sequence {}  state hash {:016x}  open orders {}\n",
                     Raw(engine.last_sequence()), engine.StateHash(), engine.open_orders());
  out += "markets:\n";
  for (std::size_t i = 0; i < c.markets.size(); ++i) {
    MarketId m{static_cast<uint16_t>(i)};
    const auto& s = c.markets[i];
    auto bid = engine.BestBid(m);
    auto ask = engine.BestAsk(m);
    out += fmt::format(
        "  {:<10} {:<11} tick {} step {} min notional {} fees maker/taker {}/{} bps  bid {}  ask "
        "{}\n",
        s.symbol, engine::ToString(engine.market_status(m)), FormatPrice(c, m, Price{1}),
        FormatQty(c, m, Qty{1}), FormatAmount(c, s.quote, s.min_notional), s.maker_fee_bps,
        s.taker_fee_bps, bid ? FormatPrice(c, m, *bid) : "-", ask ? FormatPrice(c, m, *ask) : "-");
  }
  out += "balances (non-zero):\n";
  bool any = false;
  for (uint32_t a = 0; a < c.max_accounts; ++a) {
    for (std::size_t s = 0; s < c.assets.size(); ++s) {
      AssetId asset{static_cast<uint16_t>(s)};
      auto b = engine.balance(AccountId{a}, asset);
      if (b.available.value == 0 && b.locked.value == 0) continue;
      any = true;
      out += fmt::format("  account {:<6}{} available {}  locked {}\n", a,
                         AccountId{a} == c.fee_account ? " (fees)" : "       ",
                         FormatAmount(c, asset, b.available), FormatAmount(c, asset, b.locked));
    }
  }
  if (!any) out += "  (none)\n";
  return out;
}

}  // namespace mb::app
