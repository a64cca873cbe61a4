// Tests of the read side. The central property: a ReadSide fed with a real
// engine's events, batch by batch, agrees after every batch with the engine's
// own balances, book levels and open orders (random commands of every kind,
// several seeds). Depth diffs are checked to rebuild the published books with
// dense update ids; klines, tickers, order states and history bounds are
// checked on small scenarios with hand-computed values.
#include "marketdata/read_side.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "common/fixed_string.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/listing.h"
#include "engine/market.h"
#include "engine/types.h"
#include "workload/random_commands.h"

// Readable gtest output for the strong types.
namespace mb {
template <class Tag>
void PrintTo(const Fixed<Tag>& v, std::ostream* os) {
  *os << v.value;
}
inline void PrintTo(OrderId v, std::ostream* os) { *os << "order#" << Raw(v); }
inline void PrintTo(TradeId v, std::ostream* os) { *os << "trade#" << Raw(v); }
inline void PrintTo(Sequence v, std::ostream* os) { *os << "seq#" << Raw(v); }
inline void PrintTo(AccountId v, std::ostream* os) { *os << "account#" << Raw(v); }
inline void PrintTo(MarketId v, std::ostream* os) { *os << "market#" << Raw(v); }
inline void PrintTo(AssetId v, std::ostream* os) { *os << "asset#" << Raw(v); }
namespace engine {
inline void PrintTo(const Balance& b, std::ostream* os) {
  *os << "{available " << b.available.value << ", locked " << b.locked.value << "}";
}
inline void PrintTo(Side v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(MarketStatus v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(RejectReason v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(ExpireReason v, std::ostream* os) { *os << ToString(v); }
}  // namespace engine
namespace marketdata {
inline void PrintTo(const Level& l, std::ostream* os) {
  *os << "{" << l.price.value << " x " << l.qty.value << "}";
}
inline void PrintTo(OrderStatus v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(ExecType v, std::ostream* os) { *os << ToString(v); }
}  // namespace marketdata
}  // namespace mb

namespace mb::marketdata {
namespace {

using engine::Balance;
using engine::Command;
using engine::Engine;
using engine::EngineConfig;
using engine::Event;
using engine::EventBuffer;
using engine::MarketStatus;
using engine::OrderType;
using engine::OrderView;
using engine::RejectReason;
using engine::Side;
using engine::StpMode;
using engine::TimeInForce;

using workload::Amend;
using workload::Cancel;
using workload::Fund;
using workload::MixedCommands;
using workload::MixedConfig;
using workload::Place;
using workload::Take;
using workload::mixed::kAssets;
using workload::mixed::kBtc;
using workload::mixed::kBtcUsdt;
using workload::mixed::kDay0;
using workload::mixed::kDay0Ms;
using workload::mixed::kEth;
using workload::mixed::kEthUsdt;
using workload::mixed::kFee;
using workload::mixed::kMarkets;
using workload::mixed::kMaxAccounts;
using workload::mixed::kMs;
using workload::mixed::kSec;
using workload::mixed::kTraders;
using workload::mixed::kUsdt;

constexpr AccountId kAlice{1};
constexpr AccountId kBob{2};
constexpr std::size_t kAll = std::numeric_limits<std::size_t>::max();

ReadSideOptions Unbounded() {
  ReadSideOptions o;
  o.max_depth_levels = kAll;
  o.recent_trades = 50;
  o.klines_per_interval = 1 << 20;
  o.history_orders = 1 << 20;
  o.history_trades = 1 << 20;
  return o;
}

// ---- commands ---------------------------------------------------------------

Command Limit(int64_t ts, AccountId a, Side side, int64_t price, int64_t qty,
              TimeInForce tif = TimeInForce::kGtc, std::string_view cid = "") {
  return Place(ts, a, kBtcUsdt, side, OrderType::kLimit, tif, price, qty, cid);
}

// An engine and a read side fed with its events, one Flush() per batch.
struct Harness {
  explicit Harness(ReadSideOptions options = Unbounded())
      : config(MixedConfig()), engine(config), rs(config, options) {}

  void Process(const Command& c) { engine.Process(c, &events); }
  const BatchOutput& Flush() {
    rs.Apply(events, &out);
    batch = events;
    events.clear();
    return out;
  }
  const BatchOutput& Run(const std::vector<Command>& commands) {
    for (const Command& c : commands) Process(c);
    return Flush();
  }
  // The events of the last batch of one type.
  template <class T>
  std::vector<T> Batch() const {
    std::vector<T> v;
    for (const Event& e : batch) {
      if (const T* x = std::get_if<T>(&e.body)) v.push_back(*x);
    }
    return v;
  }

  EngineConfig config;
  Engine engine;
  ReadSide rs;
  EventBuffer events;
  EventBuffer batch;
  BatchOutput out;
};

const AccountUpdate* FindUpdate(const BatchOutput& out, AccountId a) {
  for (const AccountUpdate& u : out.accounts) {
    if (u.account == a) return &u;
  }
  return nullptr;
}

std::vector<ExecType> Types(const AccountUpdate* u) {
  std::vector<ExecType> v;
  if (u == nullptr) return v;
  for (const ExecutionReport& r : u->reports) v.push_back(r.type);
  return v;
}

// ---- agreement with the engine ---------------------------------------------------

// Balances of every account, book levels and open orders of every market, and
// market states: the read side (built from events only) against the engine.
void ExpectAgrees(const Engine& engine, const ReadSide& rs) {
  for (uint32_t a = 0; a < kMaxAccounts; ++a) {
    const AccountId account{a};
    const std::vector<BalanceRow> rows = rs.Balances(account);
    // Every asset, those added at run time too.
    const std::size_t assets = engine.config().assets.size();
    ASSERT_EQ(rows.size(), assets);
    for (uint16_t s = 0; s < assets; ++s) {
      const Balance want = engine.balance(account, AssetId{s});
      ASSERT_EQ(rs.balance(account, AssetId{s}), want) << "account " << a << " asset " << s;
      ASSERT_EQ(rows[s].asset, AssetId{s});
      ASSERT_EQ(rows[s].available, want.available);
      ASSERT_EQ(rows[s].locked, want.locked);
    }
  }
  for (uint16_t mi = 0; mi < engine.config().markets.size(); ++mi) {
    const MarketId m{mi};
    auto snap = rs.Snapshot(m);
    ASSERT_NE(snap, nullptr);
    ASSERT_EQ(snap->market, m);
    ASSERT_EQ(snap->status, engine.market_status(m)) << "market " << mi;
    for (Side side : {Side::kBuy, Side::kSell}) {
      const std::vector<engine::LevelView> depth = engine.Depth(m, side, kAll);
      const std::vector<Level>& levels = side == Side::kBuy ? snap->bids : snap->asks;
      ASSERT_EQ(levels.size(), depth.size()) << "market " << mi << " " << ToString(side);
      for (std::size_t i = 0; i < depth.size(); ++i) {
        ASSERT_EQ(levels[i], (Level{depth[i].price, depth[i].qty}))
            << "market " << mi << " " << ToString(side) << " level " << i;
      }
    }
    std::map<uint64_t, OrderView> open;
    for (Side side : {Side::kBuy, Side::kSell}) {
      for (const OrderView& o : engine.Orders(m, side)) open.emplace(Raw(o.id), o);
    }
    // Conditional orders waiting for their trigger: open, in no book.
    std::map<uint64_t, engine::ImageStop> stops;
    for (const engine::ImageStop& st : engine.ExportImage().stops) {
      if (st.order.terms.market == m) stops.emplace(Raw(st.order.id), st);
    }
    std::size_t seen = 0;
    std::size_t waiting = 0;
    for (uint32_t a = 0; a < kMaxAccounts; ++a) {
      for (const OrderRecord& r : rs.OpenOrders(AccountId{a}, m)) {
        if (Waiting(r)) {
          auto st = stops.find(Raw(r.id));
          ASSERT_NE(st, stops.end()) << "order " << Raw(r.id) << " does not wait in the engine";
          ASSERT_EQ(r.terms, st->second.order.terms) << "order " << Raw(r.id);
          ASSERT_EQ(r.stop_price, st->second.stop_price) << "order " << Raw(r.id);
          ASSERT_EQ(r.trailing_delta, st->second.trailing_delta) << "order " << Raw(r.id);
          ASSERT_EQ(r.trailing_ns != 0, st->second.active) << "order " << Raw(r.id);
          ASSERT_EQ(r.remaining, r.terms.qty);
          ASSERT_FALSE(r.working);
          ++waiting;
          continue;
        }
        auto it = open.find(Raw(r.id));
        ASSERT_NE(it, open.end()) << "order " << Raw(r.id) << " is not open in the engine";
        const OrderView& o = it->second;
        ASSERT_EQ(r.terms.account, o.terms.account);
        ASSERT_EQ(r.terms.market, m);
        ASSERT_EQ(r.terms.side, o.terms.side);
        ASSERT_EQ(r.terms.type, o.terms.type);
        ASSERT_EQ(r.terms.tif, o.terms.tif);
        ASSERT_EQ(r.terms.stp, o.terms.stp);
        ASSERT_EQ(r.terms.price, o.terms.price) << "order " << Raw(r.id);
        ASSERT_EQ(r.terms.qty, o.terms.qty) << "order " << Raw(r.id);
        ASSERT_EQ(r.remaining, o.remaining) << "order " << Raw(r.id);
        ASSERT_EQ(r.executed, o.terms.qty - o.remaining) << "order " << Raw(r.id);
        ASSERT_EQ(r.status,
                  r.executed.value == 0 ? OrderStatus::kNew : OrderStatus::kPartiallyFilled);
        ASSERT_EQ(r.time_ns, o.created_ns);
        ASSERT_TRUE(r.working);
        ++seen;
      }
    }
    ASSERT_EQ(seen, open.size()) << "market " << mi;
    ASSERT_EQ(waiting, stops.size()) << "market " << mi;
  }
  std::size_t all_open = 0;
  for (uint32_t a = 0; a < kMaxAccounts; ++a) {
    all_open += rs.OpenOrders(AccountId{a}, std::nullopt).size();
  }
  ASSERT_EQ(all_open, engine.open_orders());
  ASSERT_EQ(rs.open_orders(), engine.open_orders()) << "the count the metrics report";
}

// Books rebuilt from the depth diffs alone.
struct DiffBooks {
  void Init(const ReadSide& rs) {
    for (uint16_t m = 0; m < kMarkets; ++m) {
      auto snap = rs.Snapshot(MarketId{m});
      ids[m] = snap->last_update_id;
      for (const Level& l : snap->bids) book[m][0][l.price.value] = l.qty.value;
      for (const Level& l : snap->asks) book[m][1][l.price.value] = l.qty.value;
    }
  }

  // One batch: for a market whose book changed, U = the previous u + 1 and u
  // a sequence of this batch; unchanged otherwise; diffs sorted best first;
  // the books equal the snapshots.
  void Apply(const BatchOutput& out, const ReadSide& rs) {
    bool changed[kMarkets] = {};
    for (const DepthDiff& d : out.depth) {
      const auto m = Raw(d.market);
      ASSERT_LT(m, kMarkets);
      ASSERT_FALSE(changed[m]) << "two diffs for one market in one batch";
      changed[m] = true;
      ASSERT_EQ(d.first_update_id, ids[m] + 1);
      ASSERT_GE(d.last_update_id, d.first_update_id);
      ASSERT_GE(d.last_update_id, Raw(out.first_seq));
      ASSERT_LE(d.last_update_id, Raw(out.last_seq));
      ids[m] = d.last_update_id;
      for (std::size_t i = 1; i < d.bids.size(); ++i)
        ASSERT_GT(d.bids[i - 1].price, d.bids[i].price);
      for (std::size_t i = 1; i < d.asks.size(); ++i)
        ASSERT_LT(d.asks[i - 1].price, d.asks[i].price);
      for (int s = 0; s < 2; ++s) {
        for (const Level& l : s == 0 ? d.bids : d.asks) {
          auto& side = book[m][s];
          // A diff names only levels whose total changed.
          const auto it = side.find(l.price.value);
          ASSERT_NE(it == side.end() ? 0 : it->second, l.qty.value);
          if (l.qty.value == 0) {
            side.erase(l.price.value);
          } else {
            side[l.price.value] = l.qty.value;
          }
        }
      }
    }
    for (uint16_t m = 0; m < kMarkets; ++m) {
      auto snap = rs.Snapshot(MarketId{m});
      ASSERT_EQ(snap->last_update_id, ids[m]) << "market " << m;
      std::vector<Level> bids;
      std::vector<Level> asks;
      for (auto it = book[m][0].rbegin(); it != book[m][0].rend(); ++it) {
        bids.push_back(Level{Price{it->first}, Qty{it->second}});
      }
      for (const auto& [p, q] : book[m][1]) asks.push_back(Level{Price{p}, Qty{q}});
      ASSERT_EQ(snap->bids, bids) << "market " << m;
      ASSERT_EQ(snap->asks, asks) << "market " << m;
    }
  }

  uint64_t ids[kMarkets] = {};
  std::map<int64_t, int64_t> book[kMarkets][2];
};

// What the test derives from the events by itself, for the end-of-run checks.
struct Reference {
  struct Order {
    AccountId account{};
    MarketId market{};
    OrderStatus status = OrderStatus::kNew;
    Qty executed{};
    Amount cumulative_quote{};
  };

  void Add(std::span<const Event> events) {
    for (const Event& e : events) {
      if (const auto* a = std::get_if<engine::OrderAccepted>(&e.body)) {
        orders[Raw(a->order_id)] = Order{a->terms.account, a->terms.market};
        if (!a->client_order_id.empty()) {
          cids[{Raw(a->terms.account), Raw(a->terms.market),
                std::string(a->client_order_id.view())}] = Raw(a->order_id);
        }
      } else if (const auto* t = std::get_if<engine::Trade>(&e.body)) {
        for (bool maker : {true, false}) {
          Order& o = orders.at(Raw(maker ? t->maker_order_id : t->taker_order_id));
          o.executed += t->qty;
          o.cumulative_quote += t->notional;
          o.status = (maker ? t->maker_filled : t->taker_filled) ? OrderStatus::kFilled
                                                                 : OrderStatus::kPartiallyFilled;
          fills[{Raw(maker ? t->maker_account : t->taker_account), Raw(t->market)}].push_back(
              Raw(t->trade_id));
        }
        TradeRow row;
        row.id = t->trade_id;
        row.market = t->market;
        row.price = t->price;
        row.qty = t->qty;
        row.base_qty = t->base_qty;
        row.notional = t->notional;
        row.time_ns = e.timestamp_ns;
        row.buyer_is_maker = t->taker_side == Side::kSell;
        trades[Raw(t->market)].push_back(row);
      } else if (const auto* c = std::get_if<engine::OrderCanceled>(&e.body)) {
        orders.at(Raw(c->order_id)).status = OrderStatus::kCanceled;
      } else if (const auto* x = std::get_if<engine::OrderExpired>(&e.body)) {
        // A budget order that spent its budget is FILLED (Binance).
        orders.at(Raw(x->order_id)).status = x->reason == engine::ExpireReason::kQuoteBudgetSpent
                                                 ? OrderStatus::kFilled
                                                 : OrderStatus::kExpired;
      }
    }
  }

  std::map<uint64_t, Order> orders;
  std::map<std::tuple<uint32_t, uint16_t, std::string>, uint64_t> cids;
  std::map<std::pair<uint32_t, uint16_t>, std::vector<uint64_t>> fills;  // trade ids
  std::vector<TradeRow> trades[kMarkets];
};

// Klines computed the obvious way from a market's trades; open(ms) gives
// the open time of the candle holding a trade.
template <class OpenOf>
std::vector<Kline> ReferenceKlinesBy(const std::vector<TradeRow>& trades, const OpenOf& open_of) {
  std::vector<Kline> out;
  for (const TradeRow& t : trades) {
    const int64_t open = open_of(t.time_ns / kMs);
    if (out.empty() || out.back().open_time_ms != open) {
      Kline k;
      k.open_time_ms = open;
      k.open = k.high = k.low = t.price;
      k.first_trade = t.id;
      out.push_back(k);
    }
    Kline& k = out.back();
    k.high = std::max(k.high, t.price);
    k.low = std::min(k.low, t.price);
    k.close = t.price;
    k.volume += t.qty;
    k.base_volume += t.base_qty;
    k.quote_volume += t.notional;
    if (!t.buyer_is_maker) {
      k.taker_buy_base += t.base_qty;
      k.taker_buy_quote += t.notional;
    }
    ++k.trades;
    k.last_trade = t.id;
  }
  return out;
}

std::vector<Kline> ReferenceKlines(const std::vector<TradeRow>& trades, int64_t interval_ms) {
  return ReferenceKlinesBy(trades, [&](int64_t ms) { return ms / interval_ms * interval_ms; });
}

void ExpectKline(const Kline& got, const Kline& want) {
  EXPECT_EQ(got.open_time_ms, want.open_time_ms);
  EXPECT_EQ(got.open, want.open);
  EXPECT_EQ(got.high, want.high);
  EXPECT_EQ(got.low, want.low);
  EXPECT_EQ(got.close, want.close);
  EXPECT_EQ(got.volume, want.volume);
  EXPECT_EQ(got.base_volume, want.base_volume);
  EXPECT_EQ(got.quote_volume, want.quote_volume);
  EXPECT_EQ(got.taker_buy_base, want.taker_buy_base);
  EXPECT_EQ(got.taker_buy_quote, want.taker_buy_quote);
  EXPECT_EQ(got.trades, want.trades);
  EXPECT_EQ(got.first_trade, want.first_trade);
  EXPECT_EQ(got.last_trade, want.last_trade);
}

// Per batch: trades in order, every changed balance reported with its value
// after the batch, reports in event order.
void ExpectBatchOutput(const Harness& h, const std::vector<Balance>& before) {
  const BatchOutput& out = h.out;
  ASSERT_FALSE(h.batch.empty());
  ASSERT_EQ(out.first_seq, h.batch.front().seq);
  ASSERT_EQ(out.last_seq, h.batch.back().seq);
  ASSERT_EQ(out.time_ns, h.batch.back().timestamp_ns);
  ASSERT_EQ(h.rs.applied_seq(), Raw(h.batch.back().seq));
  const std::vector<engine::Trade> trades = h.Batch<engine::Trade>();
  ASSERT_EQ(out.trades.size(), trades.size());
  for (std::size_t i = 0; i < trades.size(); ++i) {
    const TradeRow& r = out.trades[i];
    const engine::Trade& t = trades[i];
    ASSERT_EQ(r.id, t.trade_id);
    ASSERT_EQ(r.market, t.market);
    ASSERT_EQ(r.price, t.price);
    ASSERT_EQ(r.qty, t.qty);
    ASSERT_EQ(r.notional, t.notional);
    ASSERT_EQ(r.buyer_is_maker, t.taker_side == Side::kSell);
    ASSERT_EQ(r.buy_order, t.taker_side == Side::kBuy ? t.taker_order_id : t.maker_order_id);
    ASSERT_EQ(r.sell_order, t.taker_side == Side::kBuy ? t.maker_order_id : t.taker_order_id);
  }
  for (std::size_t i = 0; i < out.accounts.size(); ++i) {
    const AccountUpdate& u = out.accounts[i];
    for (std::size_t j = 0; j < i; ++j) ASSERT_NE(out.accounts[j].account, u.account);
    for (std::size_t j = 1; j < u.reports.size(); ++j) {
      ASSERT_LE(Raw(u.reports[j - 1].seq), Raw(u.reports[j].seq));
    }
    for (const ExecutionReport& r : u.reports) {
      ASSERT_EQ(r.order.terms.account, u.account);
      ASSERT_EQ(r.fill.has_value(), r.type == ExecType::kTrade);
      if (r.fill) {
        ASSERT_EQ(r.fill->order_id, r.order.id);
      }
    }
    for (const BalanceRow& b : u.balances) {
      ASSERT_EQ(h.engine.balance(u.account, b.asset), (Balance{b.available, b.locked}));
    }
  }
  for (uint32_t a = 0; a < kMaxAccounts; ++a) {
    for (uint16_t s = 0; s < kAssets; ++s) {
      if (h.engine.balance(AccountId{a}, AssetId{s}) == before[a * kAssets + s]) continue;
      const AccountUpdate* u = FindUpdate(out, AccountId{a});
      ASSERT_NE(u, nullptr) << "account " << a << " changed but is not in the batch output";
      bool listed = false;
      for (const BalanceRow& b : u->balances) listed = listed || b.asset == AssetId{s};
      ASSERT_TRUE(listed) << "account " << a << " asset " << s;
    }
  }
}

std::vector<Balance> AllBalances(const Engine& engine) {
  std::vector<Balance> v;
  for (uint32_t a = 0; a < kMaxAccounts; ++a) {
    for (uint16_t s = 0; s < kAssets; ++s) v.push_back(engine.balance(AccountId{a}, AssetId{s}));
  }
  return v;
}

// End of a run: order history, client ids, fills, recent trades, klines and
// the ticker against what the events say.
void ExpectHistory(const Harness& h, const Reference& ref, int64_t now_ns) {
  for (uint32_t a = 0; a < kMaxAccounts; ++a) {
    for (uint16_t mi = 0; mi < kMarkets; ++mi) {
      const AccountId account{a};
      const MarketId m{mi};
      std::vector<uint64_t> want;
      for (const auto& [id, o] : ref.orders) {
        if (o.account == account && o.market == m) want.push_back(id);
      }
      const std::vector<OrderRecord> all = h.rs.AllOrders(account, m, 0, 0, 0, kAll);
      ASSERT_EQ(all.size(), want.size()) << "account " << a << " market " << mi;
      for (std::size_t i = 0; i < all.size(); ++i) {
        const OrderRecord& r = all[i];
        const Reference::Order& o = ref.orders.at(want[i]);
        ASSERT_EQ(Raw(r.id), want[i]);
        ASSERT_EQ(r.status, o.status) << "order " << want[i];
        ASSERT_EQ(r.executed, o.executed) << "order " << want[i];
        ASSERT_EQ(r.cumulative_quote, o.cumulative_quote) << "order " << want[i];
        if (r.status == OrderStatus::kFilled && r.quote_qty.value == 0) {
          ASSERT_EQ(r.executed, r.terms.qty);
        }
        ASSERT_EQ(r.working,
                  (r.status == OrderStatus::kNew || r.status == OrderStatus::kPartiallyFilled) &&
                      !Waiting(r));
        auto found = h.rs.FindOrder(account, m, r.id);
        ASSERT_TRUE(found.has_value());
        ASSERT_EQ(found->status, r.status);
        ASSERT_FALSE(
            h.rs.FindOrder(account, MarketId{static_cast<uint16_t>(1 - mi)}, r.id).has_value());
      }
      const std::vector<Fill> fills = h.rs.MyTrades(account, m, 0, 0, 0, 0, kAll);
      auto it = ref.fills.find({a, mi});
      const std::size_t n = it == ref.fills.end() ? 0 : it->second.size();
      ASSERT_EQ(fills.size(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(Raw(fills[i].trade_id), it->second[i]);
    }
  }
  for (const auto& [key, id] : ref.cids) {
    const auto& [a, m, cid] = key;
    auto r = h.rs.FindOrderByClientId(AccountId{a}, MarketId{m}, cid);
    ASSERT_TRUE(r.has_value()) << cid;
    ASSERT_EQ(Raw(r->id), id) << cid;
    ASSERT_EQ(r->client_order_id.view(), cid);
  }
  for (uint16_t mi = 0; mi < kMarkets; ++mi) {
    auto snap = h.rs.Snapshot(MarketId{mi});
    const std::vector<TradeRow>& trades = ref.trades[mi];
    ASSERT_GT(trades.size(), 50u) << "the run should trade";
    const std::vector<TradeRow> recent = snap->RecentTrades(50);
    ASSERT_EQ(recent.size(), 50u);
    for (std::size_t i = 0; i < 50; ++i) {
      const TradeRow& want = trades[trades.size() - 50 + i];
      ASSERT_EQ(recent[i].id, want.id);
      ASSERT_EQ(recent[i].price, want.price);
      ASSERT_EQ(recent[i].qty, want.qty);
      ASSERT_EQ(recent[i].time_ns, want.time_ns);
    }
    for (KlineInterval iv :
         {KlineInterval::k1m, KlineInterval::k5m, KlineInterval::k1h, KlineInterval::k1d}) {
      const std::vector<Kline> want = ReferenceKlines(trades, IntervalMs(iv));
      const std::vector<Kline> got = snap->Klines(iv, 0, 0, kAll);
      ASSERT_EQ(got.size(), want.size()) << ToString(iv);
      for (std::size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE(std::string(ToString(iv)) + " candle " + std::to_string(i));
        ExpectKline(got[i], want[i]);
      }
    }
    // Every interval in zones whose candles are the UTC ones or not (summed
    // from 8h, 1h and 15m candles): as if bucketed in local time.
    for (int32_t zone : {0, 8 * 60, -60, 5 * 60 + 45}) {
      for (std::size_t i = 0; i < kKlineIntervals; ++i) {
        const auto iv = static_cast<KlineInterval>(i);
        const std::vector<Kline> want =
            ReferenceKlinesBy(trades, [&](int64_t ms) { return KlineOpenMs(iv, ms, zone); });
        const std::vector<Kline> got = snap->Klines(iv, 0, 0, kAll, zone);
        const std::string where = std::string(ToString(iv)) + " zone " + std::to_string(zone) +
                                  " market " + std::to_string(mi);
        ASSERT_EQ(got.size(), want.size()) << where;
        for (std::size_t c = 0; c < got.size(); ++c) {
          SCOPED_TRACE(where + " candle " + std::to_string(c));
          ExpectKline(got[c], want[c]);
          const std::optional<Kline> one = snap->Candle(iv, want[c].open_time_ms, zone);
          ASSERT_TRUE(one.has_value());
          ExpectKline(*one, want[c]);
        }
        const std::optional<Kline> latest = snap->LatestCandle(iv, zone);
        ASSERT_TRUE(latest.has_value()) << where;
        ExpectKline(*latest, want.back());
      }
    }
    // The ticker: the 1m candles opened in the last 24 h.
    const int64_t now_ms = now_ns / kMs;
    Ticker24h want;
    for (const Kline& k : ReferenceKlines(trades, 60'000)) {
      if (k.open_time_ms < now_ms - 86'400'000) continue;
      if (!want.any_trade) {
        want.any_trade = true;
        want.open = k.open;
        want.high = k.high;
        want.low = k.low;
        want.first_trade = k.first_trade;
      }
      want.high = std::max(want.high, k.high);
      want.low = std::min(want.low, k.low);
      want.last = k.close;
      want.base_volume += k.base_volume;
      want.quote_volume += k.quote_volume;
      want.trades += k.trades;
      want.last_trade = k.last_trade;
    }
    const Ticker24h got = snap->Ticker(now_ms);
    ASSERT_TRUE(want.any_trade);
    EXPECT_TRUE(got.any_trade);
    EXPECT_EQ(got.open, want.open);
    EXPECT_EQ(got.high, want.high);
    EXPECT_EQ(got.low, want.low);
    EXPECT_EQ(got.last, want.last);
    EXPECT_EQ(got.last_qty, trades.back().qty);
    EXPECT_EQ(got.base_volume, want.base_volume);
    EXPECT_EQ(got.quote_volume, want.quote_volume);
    EXPECT_EQ(got.trades, want.trades);
    EXPECT_EQ(got.first_trade, want.first_trade);
    EXPECT_EQ(got.last_trade, want.last_trade);
  }
}

// The key property, one seed: after every batch the read side equals the
// engine; its outputs and history equal what the events say.
void RunAgainstEngine(uint64_t seed, std::size_t commands) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  Harness h;
  MixedCommands gen(seed, &h.engine);
  Reference ref;
  DiffBooks books;
  books.Init(h.rs);
  h.Run(gen.Funding());
  ref.Add(h.batch);
  ASSERT_NO_FATAL_FAILURE(ExpectAgrees(h.engine, h.rs));
  std::size_t done = 0;
  std::size_t batches = 0;
  std::size_t trades = 0;
  std::size_t rejected = 0;
  std::size_t amends = 0;
  std::size_t stp = 0;
  std::size_t kept_priority = 0;
  std::size_t amended_takers = 0;  // trades whose taker is an order amended just before
  std::size_t by_quote = 0;
  while (done < commands) {
    const std::vector<Balance> before = AllBalances(h.engine);
    const std::size_t n = gen.BatchSize();
    for (std::size_t i = 0; i < n; ++i) h.Process(gen.Next());
    done += n;
    const BatchOutput& out = h.Flush();
    ++batches;
    ref.Add(h.batch);
    trades += out.trades.size();
    rejected += h.Batch<engine::Rejected>().size();
    amends += h.Batch<engine::OrderAmended>().size();
    std::optional<OrderId> amended;
    for (const Event& e : h.batch) {
      if (const auto* x = std::get_if<engine::OrderAmended>(&e.body)) {
        kept_priority += x->keeps_priority ? 1u : 0u;
        amended = x->order_id;
      } else if (const auto* t = std::get_if<engine::Trade>(&e.body)) {
        amended_takers += amended == t->taker_order_id ? 1u : 0u;
      } else if (const auto* a = std::get_if<engine::OrderAccepted>(&e.body)) {
        by_quote += a->quote_qty.value != 0 ? 1u : 0u;
      }
    }
    for (const auto& x : h.Batch<engine::OrderExpired>()) {
      stp += x.reason == engine::ExpireReason::kSelfTradePrevention ? 1 : 0;
    }
    SCOPED_TRACE("batch " + std::to_string(batches));
    ASSERT_TRUE(h.engine.CheckInvariants().ok());
    ASSERT_NO_FATAL_FAILURE(ExpectAgrees(h.engine, h.rs));
    ASSERT_NO_FATAL_FAILURE(books.Apply(out, h.rs));
    ASSERT_NO_FATAL_FAILURE(ExpectBatchOutput(h, before));
  }
  // The stream must have exercised what it claims to.
  EXPECT_GT(trades, commands / 10);
  EXPECT_GT(rejected, commands / 50);
  EXPECT_GT(amends, commands / 20);
  EXPECT_GT(stp, 0u);
  EXPECT_GT(kept_priority, 0u);
  EXPECT_GT(amended_takers, 0u);
  EXPECT_GT(by_quote, 0u);
  ASSERT_NO_FATAL_FAILURE(ExpectHistory(h, ref, gen.now_ns()));
}

TEST(ReadSideEngineTest, AgreesWithEngineAfterEveryBatch) {
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    ASSERT_NO_FATAL_FAILURE(RunAgainstEngine(seed, 4000));
  }
}

// What a market's snapshot publishes, as text: status, depth id, book, the
// recent trades with their aggregates, every 1m and 1h candle.
std::string Published(const MarketSnapshot& s) {
  std::string out = std::to_string(static_cast<int>(s.status)) +
                    " u=" + std::to_string(s.last_update_id) + " seq=" + std::to_string(Raw(s.seq));
  for (const Level& l : s.bids)
    out += " b" + std::to_string(l.price.value) + ":" + std::to_string(l.qty.value);
  for (const Level& l : s.asks)
    out += " a" + std::to_string(l.price.value) + ":" + std::to_string(l.qty.value);
  // As many trades as the read side promises to hold (it may hold more, by
  // whole chunks, depending on the batching).
  const std::vector<TradeRow> trades = s.RecentTrades(Unbounded().recent_trades);
  for (const TradeRow& t : trades) {
    out += " t" + std::to_string(Raw(t.id)) + "@" + std::to_string(t.price.value) + "x" +
           std::to_string(t.qty.value) + "/" + std::to_string(Raw(t.agg_id));
  }
  const uint64_t from = trades.empty() ? 0 : Raw(trades.front().id);
  for (const AggTrade& a : s.AggTrades(kAll, from, 0, 0)) {
    out += " g" + std::to_string(Raw(a.id)) + ":" + std::to_string(Raw(a.last));
  }
  for (KlineInterval i : {KlineInterval::k1m, KlineInterval::k1h}) {
    for (const Kline& k : s.Klines(i, 0, 0, kAll)) {
      out += " k" + std::to_string(k.open_time_ms) + ":" + std::to_string(k.open.value) + "," +
             std::to_string(k.high.value) + "," + std::to_string(k.low.value) + "," +
             std::to_string(k.close.value) + "," + std::to_string(k.volume.value) + "," +
             std::to_string(k.trades);
    }
  }
  return out;
}

// A replica applies the journal in batches of its own (one bus message's
// records, not the primary's write groups). Two read sides fed the same
// events, one command per batch and in random groups, publish the same
// markets — depth ids, books, trades, aggregates, candles — wherever their
// batches end together.
TEST(ReadSideEngineTest, PublishesTheSameWhateverTheBatching) {
  for (uint64_t seed : {21u, 22u, 23u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Harness h;
    MixedCommands gen(seed, &h.engine);
    ReadSide single(h.config, Unbounded());
    BatchOutput single_out;
    auto feed_singly = [&] {
      std::size_t i = 0;
      while (i < h.batch.size()) {
        std::size_t j = i + 1;
        while (j < h.batch.size() && h.batch[j].seq == h.batch[i].seq) ++j;
        single.Apply(std::span<const Event>(h.batch).subspan(i, j - i), &single_out);
        i = j;
      }
    };
    h.Run(gen.Funding());
    feed_singly();
    std::size_t diffs = 0;
    for (int b = 0; b < 400; ++b) {
      const std::size_t n = gen.BatchSize();
      for (std::size_t i = 0; i < n; ++i) h.Process(gen.Next());
      diffs += h.Flush().depth.size();
      feed_singly();
      ASSERT_EQ(single.applied_seq(), h.rs.applied_seq());
      for (uint16_t m = 0; m < kMarkets; ++m) {
        ASSERT_EQ(Published(*single.Snapshot(MarketId{m})), Published(*h.rs.Snapshot(MarketId{m})))
            << "market " << m << " after batch " << b;
      }
    }
    EXPECT_GT(diffs, 100u);
  }
}

// A read side bootstrapped from an image taken mid-run, then fed the same
// batches, agrees with the engine and with a read side that saw everything.
TEST(ReadSideEngineTest, BootstrapMidRunThenContinue) {
  for (uint64_t seed : {11u, 12u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Harness h;
    MixedCommands gen(seed, &h.engine);
    h.Run(gen.Funding());
    for (int b = 0; b < 300; ++b) {
      const std::size_t n = gen.BatchSize();
      for (std::size_t i = 0; i < n; ++i) h.Process(gen.Next());
      h.Flush();
    }
    const engine::EngineImage image = h.engine.ExportImage();
    ASSERT_GT(image.orders.size(), 5u);
    const uint64_t last = Raw(image.last_sequence);
    ReadSide boot(h.config, Unbounded());
    boot.Bootstrap(image);
    EXPECT_EQ(boot.applied_seq(), last);
    ASSERT_NO_FATAL_FAILURE(ExpectAgrees(h.engine, boot));
    for (uint16_t m = 0; m < kMarkets; ++m) {
      auto snap = boot.Snapshot(MarketId{m});
      EXPECT_EQ(snap->last_update_id, last);  // ids continue from the sequence
      EXPECT_EQ(snap->seq, image.last_sequence);
      EXPECT_EQ(snap->RecentTrades(10).size(), 0u);
    }
    // A resting order of the image: executed from qty - remaining, the quote
    // estimated at its limit price.
    for (const engine::ImageOrder& o : image.orders) {
      auto r = boot.FindOrder(o.terms.account, o.terms.market, o.id);
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->executed, o.terms.qty - o.remaining);
      EXPECT_EQ(r->status,
                o.terms.qty == o.remaining ? OrderStatus::kNew : OrderStatus::kPartiallyFilled);
      const int64_t npt = h.config.markets[Raw(o.terms.market)].notional_per_tick_lot;
      EXPECT_EQ(r->cumulative_quote.value,
                o.terms.price.value * (o.terms.qty - o.remaining).value * npt);
    }

    DiffBooks books;
    books.Init(boot);
    BatchOutput boot_out;
    for (int b = 0; b < 300; ++b) {
      const std::size_t n = gen.BatchSize();
      for (std::size_t i = 0; i < n; ++i) h.Process(gen.Next());
      const std::vector<Event> events = h.events;
      h.Flush();
      boot.Apply(events, &boot_out);
      SCOPED_TRACE("batch " + std::to_string(b));
      ASSERT_NO_FATAL_FAILURE(ExpectAgrees(h.engine, boot));
      ASSERT_NO_FATAL_FAILURE(books.Apply(boot_out, boot));
      ASSERT_EQ(boot_out.trades.size(), h.out.trades.size());
      for (uint32_t a = 0; a < kMaxAccounts; ++a) {
        const std::vector<OrderRecord> x = boot.OpenOrders(AccountId{a}, std::nullopt);
        const std::vector<OrderRecord> y = h.rs.OpenOrders(AccountId{a}, std::nullopt);
        ASSERT_EQ(x.size(), y.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(x[i].id, y[i].id);
          ASSERT_EQ(x[i].terms.price, y[i].terms.price);
          ASSERT_EQ(x[i].terms.qty, y[i].terms.qty);
          ASSERT_EQ(x[i].remaining, y[i].remaining);
          ASSERT_EQ(x[i].executed, y[i].executed);
          ASSERT_EQ(x[i].status, y[i].status);
          if (Raw(x[i].id) > last) {  // placed after the image: known exactly
            ASSERT_EQ(x[i].cumulative_quote, y[i].cumulative_quote);
            ASSERT_EQ(x[i].client_order_id, y[i].client_order_id);
          }
        }
      }
    }
    for (uint16_t m = 0; m < kMarkets; ++m) {
      EXPECT_GT(boot.Snapshot(MarketId{m})->last_update_id, last);
      EXPECT_EQ(boot.Snapshot(MarketId{m})->bids, h.rs.Snapshot(MarketId{m})->bids);
      EXPECT_EQ(boot.Snapshot(MarketId{m})->asks, h.rs.Snapshot(MarketId{m})->asks);
    }
  }
}

// ---- hand scenarios -----------------------------------------------------------

class ReadSideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_.Run({Fund(kDay0, kAlice, kBtc, 100'000'000, "a-btc"),
            Fund(kDay0, kAlice, kUsdt, 1'000'000'000, "a-usdt"),
            Fund(kDay0, kBob, kUsdt, 1'000'000'000, "b-usdt"),
            Fund(kDay0, kBob, kBtc, 100'000'000, "b-btc")});
  }
  void TearDown() override { ExpectAgrees(h_.engine, h_.rs); }

  OrderId Last() const { return OrderId{Raw(h_.engine.last_sequence())}; }

  Harness h_;
};

// Assets and markets added at run time: an account that existed before the
// asset holds a (zero) balance of it and takes deposits; the new market has
// its snapshot at once, trades, and a read side bootstrapped from an image
// taken afterwards serves both.
TEST_F(ReadSideTest, AddedAssetsAndMarketsAreServed) {
  const int64_t t = kDay0 + kSec;
  engine::AssetSpec sol{"SOL", 9};
  engine::MarketText text{.symbol = "SOLUSDT",
                          .base = "SOL",
                          .quote = "USDT",
                          .tick_size = "0.01",
                          .step_size = "0.001",
                          .min_qty = "0.001",
                          .max_qty = "1000",
                          .max_price = "100000",
                          .min_notional = "0",
                          .maker_fee_bps = 0,
                          .taker_fee_bps = 0};
  Command add_asset;
  add_asset.timestamp_ns = t;
  add_asset.body = engine::AddAssetOf(sol);
  h_.Run({add_asset});
  const AssetId kSol{static_cast<uint16_t>(h_.config.assets.size())};
  ASSERT_EQ(h_.Batch<engine::AssetAdded>().size(), 1u);
  EXPECT_EQ(h_.rs.balance(kAlice, kSol).available.value, 0);
  EXPECT_EQ(h_.rs.Balances(kAlice).size(), h_.config.assets.size() + 1);

  auto spec = engine::MarketFromText(h_.engine.config(), text);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  Command add_market;
  add_market.timestamp_ns = t;
  add_market.body = engine::AddMarketOf(*spec);
  const MarketId kSolUsdt{static_cast<uint16_t>(h_.config.markets.size())};
  EXPECT_EQ(h_.rs.Snapshot(kSolUsdt), nullptr);
  h_.Run({add_market});
  ASSERT_EQ(h_.Batch<engine::MarketAdded>().size(), 1u);
  ASSERT_NE(h_.rs.Snapshot(kSolUsdt), nullptr);
  EXPECT_TRUE(h_.rs.Snapshot(kSolUsdt)->asks.empty());

  h_.Run({Fund(t, kAlice, kSol, 5'000'000'000, "a-sol")});
  EXPECT_EQ(h_.rs.balance(kAlice, kSol).available.value, 5'000'000'000);
  h_.Run({Place(t, kAlice, kSolUsdt, Side::kSell, OrderType::kLimit, TimeInForce::kGtc, 15'000,
                2000)});
  h_.Run({Place(t, kBob, kSolUsdt, Side::kBuy, OrderType::kLimit, TimeInForce::kGtc, 15'000, 500)});
  ASSERT_EQ(h_.out.trades.size(), 1u);
  const auto snap = h_.rs.Snapshot(kSolUsdt);
  ASSERT_EQ(snap->asks.size(), 1u);
  EXPECT_EQ(snap->asks[0].qty.value, 1500);
  EXPECT_EQ(snap->RecentTrades(10).size(), 1u);
  EXPECT_EQ(h_.rs.balance(kBob, kSol).available.value, 500'000'000);

  ReadSide boot(h_.config, Unbounded());
  boot.Bootstrap(h_.engine.ExportImage());
  ASSERT_NE(boot.Snapshot(kSolUsdt), nullptr);
  EXPECT_EQ(boot.Snapshot(kSolUsdt)->asks, snap->asks);
  EXPECT_EQ(boot.balance(kBob, kSol).available.value, 500'000'000);
  EXPECT_EQ(boot.Balances(kAlice).size(), h_.config.assets.size() + 1);
}

TEST_F(ReadSideTest, KlinesAndTickerFromTradesAcrossMinutes) {
  const int64_t t = kDay0;
  h_.Run({Limit(t + 1 * kSec, kAlice, Side::kSell, 1000, 10)});
  h_.Run({Limit(t + 2 * kSec, kAlice, Side::kSell, 1010, 10)});
  h_.Run({Limit(t + 10 * kSec, kBob, Side::kBuy, 1000, 3)});  // trade 1: 1000 x 3
  h_.Run({Limit(t + 50 * kSec, kBob, Side::kBuy, 1005, 4)});  // trade 2: 1000 x 4
  h_.Run({Limit(t + 61 * kSec, kBob, Side::kBuy, 1010, 5)});  // 3: 1000 x 3, 4: 1010 x 2
  h_.Run({Limit(t + 190 * kSec, kBob, Side::kBuy, 990, 5)});
  const OrderId b5 = Last();
  const BatchOutput& out = h_.Run({Place(t + 200 * kSec, kAlice, kBtcUsdt, Side::kSell,
                                         OrderType::kMarket, TimeInForce::kIoc, 0, 2)});  // 5
  ASSERT_EQ(out.trades.size(), 1u);
  EXPECT_TRUE(out.trades[0].buyer_is_maker);
  EXPECT_EQ(out.trades[0].buy_order, b5);
  EXPECT_EQ(out.trades[0].sell_order, Last());
  EXPECT_EQ(out.trades[0].time_ns, t + 200 * kSec);
  EXPECT_EQ(out.trades[0].base_qty, Amount{20'000});
  h_.Run({Limit(t + 3605 * kSec, kAlice, Side::kSell, 985, 1, TimeInForce::kIoc)});  // 6: 990 x 1
  EXPECT_EQ(h_.engine.next_trade_id(), TradeId{7});

  auto snap = h_.rs.Snapshot(kBtcUsdt);
  auto k = [](int64_t open_s, int64_t o, int64_t hi, int64_t lo, int64_t c, int64_t lots,
              int64_t quote, int64_t buy_lots, int64_t buy_quote, uint32_t n, uint64_t first,
              uint64_t last) {
    Kline x;
    x.open_time_ms = kDay0Ms + open_s * 1000;
    x.open = Price{o};
    x.high = Price{hi};
    x.low = Price{lo};
    x.close = Price{c};
    x.volume = Qty{lots};
    x.base_volume = Amount{lots * 10'000};
    x.quote_volume = Amount{quote};
    x.taker_buy_base = Amount{buy_lots * 10'000};
    x.taker_buy_quote = Amount{buy_quote};
    x.trades = n;
    x.first_trade = TradeId{first};
    x.last_trade = TradeId{last};
    return x;
  };
  const std::vector<Kline> m1 = {k(0, 1000, 1000, 1000, 1000, 7, 7000, 7, 7000, 2, 1, 2),
                                 k(60, 1000, 1010, 1000, 1010, 5, 5020, 5, 5020, 2, 3, 4),
                                 k(180, 990, 990, 990, 990, 2, 1980, 0, 0, 1, 5, 5),
                                 k(3600, 990, 990, 990, 990, 1, 990, 0, 0, 1, 6, 6)};
  std::vector<Kline> got = snap->Klines(KlineInterval::k1m, 0, 0, 1000);
  ASSERT_EQ(got.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) ExpectKline(got[i], m1[i]);
  // The open candle is the newest; the closed ones are shared and immutable.
  ASSERT_TRUE(snap->klines[0].current.has_value());
  EXPECT_EQ(snap->klines[0].current->open_time_ms, kDay0Ms + 3'600'000);
  EXPECT_EQ(snap->klines[0].closed->size(), 3u);

  const std::vector<Kline> m3 = {k(0, 1000, 1010, 1000, 1010, 12, 12020, 12, 12020, 4, 1, 4),
                                 k(180, 990, 990, 990, 990, 2, 1980, 0, 0, 1, 5, 5),
                                 k(3600, 990, 990, 990, 990, 1, 990, 0, 0, 1, 6, 6)};
  got = snap->Klines(KlineInterval::k3m, 0, 0, 1000);
  ASSERT_EQ(got.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) ExpectKline(got[i], m3[i]);
  got = snap->Klines(KlineInterval::k1h, 0, 0, 1000);
  ASSERT_EQ(got.size(), 2u);
  ExpectKline(got[0], k(0, 1000, 1010, 990, 990, 14, 14000, 12, 12020, 5, 1, 5));
  ExpectKline(got[1], k(3600, 990, 990, 990, 990, 1, 990, 0, 0, 1, 6, 6));
  got = snap->Klines(KlineInterval::k1d, 0, 0, 1000);
  ASSERT_EQ(got.size(), 1u);
  ExpectKline(got[0], k(0, 1000, 1010, 990, 990, 15, 14990, 12, 12020, 6, 1, 6));
  EXPECT_EQ(got[0].open_time_ms % 86'400'000, 0);

  // Limits and windows: newest `limit` without a start, oldest from a start.
  got = snap->Klines(KlineInterval::k1m, 0, 0, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].open_time_ms, kDay0Ms + 180'000);
  EXPECT_EQ(got[1].open_time_ms, kDay0Ms + 3'600'000);
  got = snap->Klines(KlineInterval::k1m, kDay0Ms + 60'000, 0, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].open_time_ms, kDay0Ms + 60'000);
  EXPECT_EQ(got[1].open_time_ms, kDay0Ms + 180'000);
  got = snap->Klines(KlineInterval::k1m, 0, kDay0Ms + 180'000, 10);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].open_time_ms, kDay0Ms + 180'000);
  got = snap->Klines(KlineInterval::k1m, kDay0Ms + 3'600'000, kDay0Ms + 3'600'000, 10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].trades, 1u);
  EXPECT_TRUE(snap->Klines(KlineInterval::k1m, kDay0Ms + 3'600'001, 0, 10).empty());
  EXPECT_TRUE(snap->Klines(KlineInterval::k1m, 0, 0, 0).empty());

  // The ticker over the last 24 h of 1m candles.
  const int64_t now = kDay0Ms + 3'610'000;
  Ticker24h tk = snap->Ticker(now);
  EXPECT_TRUE(tk.any_trade);
  EXPECT_EQ(tk.open, Price{1000});
  EXPECT_EQ(tk.high, Price{1010});
  EXPECT_EQ(tk.low, Price{990});
  EXPECT_EQ(tk.last, Price{990});
  EXPECT_EQ(tk.last_qty, Qty{1});
  EXPECT_EQ(tk.base_volume, Amount{150'000});
  EXPECT_EQ(tk.quote_volume, Amount{14'990});
  EXPECT_EQ(tk.trades, 6u);
  EXPECT_EQ(tk.first_trade, TradeId{1});
  EXPECT_EQ(tk.last_trade, TradeId{6});
  EXPECT_EQ(tk.open_time_ms, now - 86'400'000);
  EXPECT_EQ(tk.close_time_ms, now);
  // 25 h later only the candle opened at +1 h is inside the window.
  tk = snap->Ticker(kDay0Ms + 25 * 3'600'000);
  EXPECT_TRUE(tk.any_trade);
  EXPECT_EQ(tk.open, Price{990});
  EXPECT_EQ(tk.high, Price{990});
  EXPECT_EQ(tk.trades, 1u);
  EXPECT_EQ(tk.first_trade, TradeId{6});
  EXPECT_EQ(tk.quote_volume, Amount{990});
  tk = snap->Ticker(kDay0Ms + 26 * 3'600'000);
  EXPECT_FALSE(tk.any_trade);
  EXPECT_EQ(tk.trades, 0u);
}

TEST_F(ReadSideTest, OrderStatesReportsAndFills) {
  const int64_t t = kDay0 + kSec;
  const BatchOutput* out =
      &h_.Run({Limit(t, kAlice, Side::kSell, 1000, 10, TimeInForce::kGtc, "s1")});
  const OrderId s1 = Last();
  ASSERT_EQ(Types(FindUpdate(*out, kAlice)), std::vector<ExecType>{ExecType::kNew});
  {
    const AccountUpdate* u = FindUpdate(*out, kAlice);
    EXPECT_EQ(u->reports[0].order.id, s1);
    EXPECT_EQ(u->reports[0].order.status, OrderStatus::kNew);
    EXPECT_EQ(u->reports[0].order.client_order_id.view(), "s1");
    EXPECT_EQ(u->reports[0].time_ns, t);
    // 10 lots of BTC locked.
    ASSERT_EQ(u->balances.size(), 1u);
    EXPECT_EQ(u->balances[0].asset, kBtc);
    EXPECT_EQ(u->balances[0].available, Amount{100'000'000 - 100'000});
    EXPECT_EQ(u->balances[0].locked, Amount{100'000});
    EXPECT_EQ(h_.rs.account_update_ns(kAlice), t);
  }

  // Bob takes 4: the maker is partially filled, the taker filled.
  out = &h_.Run({Limit(t + kSec, kBob, Side::kBuy, 1000, 4, TimeInForce::kIoc)});
  const OrderId b1 = Last();
  ASSERT_EQ(Types(FindUpdate(*out, kAlice)), std::vector<ExecType>{ExecType::kTrade});
  ASSERT_EQ(Types(FindUpdate(*out, kBob)),
            (std::vector<ExecType>{ExecType::kNew, ExecType::kTrade}));
  {
    const ExecutionReport& r = FindUpdate(*out, kAlice)->reports[0];
    EXPECT_EQ(r.order.status, OrderStatus::kPartiallyFilled);
    EXPECT_EQ(r.order.executed, Qty{4});
    EXPECT_EQ(r.order.remaining, Qty{6});
    EXPECT_EQ(r.order.cumulative_quote, Amount{4000});
    ASSERT_TRUE(r.fill.has_value());
    EXPECT_TRUE(r.fill->is_maker);
    EXPECT_EQ(r.fill->side, Side::kSell);
    EXPECT_EQ(r.fill->commission, Amount{4});  // 10 bps of 4000 USDT units
    EXPECT_EQ(r.fill->commission_asset, kUsdt);
    const ExecutionReport& b = FindUpdate(*out, kBob)->reports[1];
    EXPECT_EQ(b.order.status, OrderStatus::kFilled);
    EXPECT_FALSE(b.fill->is_maker);
    EXPECT_EQ(b.fill->commission, Amount{80});  // 20 bps of 40,000 BTC units
    EXPECT_EQ(b.fill->commission_asset, kBtc);
    // The fee account is touched (balances only, no reports).
    const AccountUpdate* fee = FindUpdate(*out, kFee);
    ASSERT_NE(fee, nullptr);
    EXPECT_TRUE(fee->reports.empty());
    ASSERT_EQ(fee->balances.size(), 2u);
    EXPECT_EQ(fee->balances[0].asset, kUsdt);
    EXPECT_EQ(fee->balances[0].available, Amount{4});
    EXPECT_EQ(fee->balances[1].asset, kBtc);
    EXPECT_EQ(fee->balances[1].available, Amount{80});
  }
  EXPECT_EQ(h_.rs.FindOrder(kBob, kBtcUsdt, b1)->status, OrderStatus::kFilled);
  EXPECT_TRUE(h_.rs.OpenOrders(kBob, std::nullopt).empty());

  // Bob's IOC for 10 fills the remaining 6 and expires the rest.
  out = &h_.Run({Limit(t + 2 * kSec, kBob, Side::kBuy, 1000, 10, TimeInForce::kIoc)});
  const OrderId b2 = Last();
  ASSERT_EQ(Types(FindUpdate(*out, kBob)),
            (std::vector<ExecType>{ExecType::kNew, ExecType::kTrade, ExecType::kExpired}));
  {
    const OrderRecord& r = FindUpdate(*out, kBob)->reports[2].order;
    EXPECT_EQ(r.status, OrderStatus::kExpired);
    EXPECT_EQ(r.expire_reason, engine::ExpireReason::kIocRemainder);
    EXPECT_EQ(r.executed, Qty{6});
    EXPECT_EQ(r.remaining, Qty{0});
    EXPECT_FALSE(r.working);
    const OrderRecord& a = FindUpdate(*out, kAlice)->reports[0].order;
    EXPECT_EQ(a.status, OrderStatus::kFilled);
    EXPECT_EQ(a.executed, Qty{10});
    EXPECT_EQ(a.cumulative_quote, Amount{10'000});
  }
  EXPECT_TRUE(h_.rs.OpenOrders(kAlice, kBtcUsdt).empty());
  auto by_cid = h_.rs.FindOrderByClientId(kAlice, kBtcUsdt, "s1");
  ASSERT_TRUE(by_cid.has_value());
  EXPECT_EQ(by_cid->id, s1);
  EXPECT_EQ(by_cid->status, OrderStatus::kFilled);
  EXPECT_FALSE(h_.rs.FindOrderByClientId(kAlice, kEthUsdt, "s1").has_value());
  EXPECT_FALSE(h_.rs.FindOrderByClientId(kBob, kBtcUsdt, "s1").has_value());

  // Amend keeping priority (quantity down), then losing it (new price), then cancel.
  h_.Run({Limit(t + 3 * kSec, kAlice, Side::kSell, 1020, 5)});
  const OrderId s2 = Last();
  out = &h_.Run({Amend(t + 4 * kSec, kAlice, kBtcUsdt, s2, 0, 3)});
  ASSERT_EQ(Types(FindUpdate(*out, kAlice)), std::vector<ExecType>{ExecType::kAmended});
  EXPECT_EQ(ToString(ExecType::kAmended), "REPLACED");
  ASSERT_EQ(out->depth.size(), 1u);
  EXPECT_EQ(out->depth[0].asks, (std::vector<Level>{{Price{1020}, Qty{3}}}));
  out = &h_.Run({Amend(t + 5 * kSec, kAlice, kBtcUsdt, s2, 1030, 0)});
  {
    const OrderRecord& r = FindUpdate(*out, kAlice)->reports[0].order;
    EXPECT_EQ(r.terms.price, Price{1030});
    EXPECT_EQ(r.terms.qty, Qty{3});
    EXPECT_EQ(r.status, OrderStatus::kNew);
    ASSERT_EQ(out->depth.size(), 1u);
    EXPECT_EQ(out->depth[0].asks,
              (std::vector<Level>{{Price{1020}, Qty{0}}, {Price{1030}, Qty{3}}}));
    auto open = h_.rs.OpenOrders(kAlice, kBtcUsdt);
    ASSERT_EQ(open.size(), 1u);
    EXPECT_TRUE(open[0].working);
    EXPECT_EQ(open[0].terms.price, Price{1030});
  }
  out = &h_.Run({Cancel(t + 6 * kSec, kAlice, kBtcUsdt, s2)});
  ASSERT_EQ(Types(FindUpdate(*out, kAlice)), std::vector<ExecType>{ExecType::kCanceled});
  EXPECT_EQ(FindUpdate(*out, kAlice)->reports[0].order.status, OrderStatus::kCanceled);
  EXPECT_EQ(h_.rs.FindOrder(kAlice, kBtcUsdt, s2)->status, OrderStatus::kCanceled);

  // A refused order: a report with the client id, no order kept.
  out = &h_.Run({Limit(t + 7 * kSec, kBob, Side::kBuy, 0, 1, TimeInForce::kGtc, "r1")});
  {
    const AccountUpdate* u = FindUpdate(*out, kBob);
    ASSERT_EQ(Types(u), std::vector<ExecType>{ExecType::kRejected});
    const ExecutionReport& r = u->reports[0];
    EXPECT_EQ(r.reject, RejectReason::kInvalidPrice);
    EXPECT_EQ(r.order.status, OrderStatus::kRejected);
    EXPECT_EQ(r.order.id, OrderId{0});
    EXPECT_EQ(r.order.client_order_id.view(), "r1");
    EXPECT_TRUE(u->balances.empty());
    EXPECT_TRUE(out->markets.empty());
    EXPECT_TRUE(out->depth.empty());
  }
  EXPECT_FALSE(h_.rs.FindOrderByClientId(kBob, kBtcUsdt, "r1").has_value());
  // A refused cancel is no report (the request gets an error instead).
  out = &h_.Run({Cancel(t + 8 * kSec, kBob, kBtcUsdt, OrderId{999})});
  EXPECT_TRUE(out->accounts.empty());

  // History queries: all orders by id; the newest `limit`, or from an id or a time.
  std::vector<OrderRecord> all = h_.rs.AllOrders(kAlice, kBtcUsdt, 0, 0, 0, 100);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, s1);
  EXPECT_EQ(all[1].id, s2);
  all = h_.rs.AllOrders(kBob, kBtcUsdt, 0, 0, 0, 1);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, b2);
  all = h_.rs.AllOrders(kBob, kBtcUsdt, Raw(b1), 0, 0, 1);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, b1);
  const int64_t t_ms = t / kMs;
  all = h_.rs.AllOrders(kBob, kBtcUsdt, 0, t_ms + 2000, 0, 10);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, b2);
  all = h_.rs.AllOrders(kBob, kBtcUsdt, 0, 0, t_ms + 1000, 10);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, b1);
  EXPECT_TRUE(h_.rs.AllOrders(kBob, kEthUsdt, 0, 0, 0, 10).empty());

  std::vector<Fill> fills = h_.rs.MyTrades(kAlice, kBtcUsdt, 0, 0, 0, 0, 100);
  ASSERT_EQ(fills.size(), 2u);
  EXPECT_EQ(fills[0].trade_id, TradeId{1});
  EXPECT_EQ(fills[1].trade_id, TradeId{2});
  EXPECT_EQ(fills[1].qty, Qty{6});
  EXPECT_EQ(fills[1].notional, Amount{6000});
  fills = h_.rs.MyTrades(kBob, kBtcUsdt, Raw(b2), 0, 0, 0, 100);
  ASSERT_EQ(fills.size(), 1u);
  EXPECT_EQ(fills[0].order_id, b2);
  fills = h_.rs.MyTrades(kAlice, kBtcUsdt, 0, 2, 0, 0, 100);
  ASSERT_EQ(fills.size(), 1u);
  EXPECT_EQ(fills[0].trade_id, TradeId{2});
  fills = h_.rs.MyTrades(kAlice, kBtcUsdt, 0, 0, 0, 0, 1);  // the newest
  ASSERT_EQ(fills.size(), 1u);
  EXPECT_EQ(fills[0].trade_id, TradeId{2});
  fills = h_.rs.MyTrades(kAlice, kBtcUsdt, 0, 0, t_ms, 0, 1);  // the oldest from start
  ASSERT_EQ(fills.size(), 1u);
  EXPECT_EQ(fills[0].trade_id, TradeId{1});
}

// A MARKET buy by quote amount that spent its budget while the book still had
// liquidity is FILLED (its last fill's report says so; no EXPIRED report).
// A conditional order (engine::IsConditional) placed with its stop price
// and trailing delta.
Command Stop(int64_t ts, AccountId a, Side side, OrderType type, int64_t price, int64_t qty,
             int64_t stop, int32_t delta = 0, std::string_view cid = "") {
  const TimeInForce tif = engine::IsMarketLike(type) ? TimeInForce::kIoc : TimeInForce::kGtc;
  Command c = Place(ts, a, kBtcUsdt, side, type, tif, price, qty, cid);
  auto& p = std::get<engine::PlaceOrder>(c.body);
  p.stop_price = Price{stop};
  p.trailing_delta = delta;
  return c;
}

// OrderArmed fills the stop price and trailing delta into the order and its
// NEW report; the order is open, waiting, in no level. OrderTriggered locks
// what a stop-market buy needs, records the trigger time and reports NEW
// again (working once it rests); then it trades, rests or expires as any
// order. A trailing stop with an activation price begins tracking at the
// first trade meeting it. Bootstrap restores the waiting orders.
TEST_F(ReadSideTest, ConditionalOrdersArmTriggerAndCancel) {
  const int64_t t = kDay0 + kSec;
  h_.Run({Limit(t, kAlice, Side::kSell, 1000, 1), Limit(t, kBob, Side::kBuy, 1000, 1)});  // 1000

  const int64_t t2 = t + kSec;
  const BatchOutput* out =
      &h_.Run({Stop(t2, kAlice, Side::kSell, OrderType::kStopLossLimit, 950, 3, 960, 0, "sl")});
  const OrderId sl = Last();
  {
    const AccountUpdate* u = FindUpdate(*out, kAlice);
    ASSERT_EQ(Types(u), std::vector<ExecType>{ExecType::kNew});
    const OrderRecord& r = u->reports[0].order;
    EXPECT_EQ(r.id, sl);
    EXPECT_EQ(r.terms.type, OrderType::kStopLossLimit);
    EXPECT_EQ(r.stop_price, Price{960});
    EXPECT_EQ(r.trailing_delta, 0);
    EXPECT_EQ(r.trigger_ns, 0);
    EXPECT_FALSE(r.working);
    EXPECT_TRUE(Waiting(r));
    EXPECT_EQ(WorkingNs(r), std::nullopt);
    // The sell locks its quantity while it waits; no level shows it.
    ASSERT_EQ(u->balances.size(), 1u);
    EXPECT_EQ(u->balances[0].locked, Amount{30'000});
    EXPECT_TRUE(out->depth.empty());
  }
  EXPECT_TRUE(h_.rs.Snapshot(kBtcUsdt)->asks.empty());
  ASSERT_EQ(h_.rs.OpenOrders(kAlice, kBtcUsdt).size(), 1u);
  EXPECT_TRUE(Waiting(*h_.rs.FindOrderByClientId(kAlice, kBtcUsdt, "sl")));
  EXPECT_EQ(h_.rs.WaitingOrders(kAlice, kBtcUsdt), 1u);
  EXPECT_EQ(h_.rs.WaitingOrders(kAlice, kEthUsdt), 0u);
  EXPECT_EQ(h_.rs.WaitingOrders(kBob, kBtcUsdt), 0u);

  // A trailing take-profit buy without an activation price tracks at once
  // and locks nothing while it waits.
  const int64_t t3 = t + 2 * kSec;
  out = &h_.Run({Stop(t3, kAlice, Side::kBuy, OrderType::kTakeProfit, 0, 2, 0, 100)});
  const OrderId tp = Last();
  EXPECT_EQ(FindUpdate(*out, kAlice)->reports[0].order.trailing_ns, t3);
  EXPECT_EQ(FindUpdate(*out, kAlice)->reports[0].order.trailing_delta, 100);
  EXPECT_TRUE(FindUpdate(*out, kAlice)->balances.empty());
  EXPECT_EQ(h_.rs.WaitingOrders(kAlice, kBtcUsdt), 2u);

  // A trade at 955 meets the stop (<= 960): the stop-limit sell triggers
  // and sells its 3 at Bob's bid.
  const int64_t t5 = t + 4 * kSec;
  h_.Run({Limit(t + 3 * kSec, kBob, Side::kBuy, 955, 5)});
  out = &h_.Run({Limit(t5, kAlice, Side::kSell, 955, 1)});
  {
    const AccountUpdate* u = FindUpdate(*out, kAlice);
    ASSERT_EQ(Types(u), (std::vector<ExecType>{ExecType::kNew, ExecType::kTrade, ExecType::kNew,
                                               ExecType::kTrade}));
    const OrderRecord& trig = u->reports[2].order;
    EXPECT_EQ(trig.id, sl);
    EXPECT_EQ(trig.trigger_ns, t5);
    EXPECT_EQ(trig.stop_price, Price{960});
    EXPECT_EQ(trig.status, OrderStatus::kNew);
    EXPECT_EQ(u->reports[3].order.status, OrderStatus::kFilled);
    EXPECT_EQ(u->reports[3].fill->price, Price{955});
    EXPECT_EQ(u->reports[3].order.trigger_ns, t5);
  }
  auto rec = h_.rs.FindOrder(kAlice, kBtcUsdt, sl);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->status, OrderStatus::kFilled);
  EXPECT_EQ(WorkingNs(*rec), std::optional<int64_t>(t5));
  EXPECT_FALSE(Waiting(*rec));
  EXPECT_EQ(h_.rs.WaitingOrders(kAlice, kBtcUsdt), 1u);

  // The trailing buy follows the low (955) and triggers on a rise of 1 %
  // (>= 964.55): a trade at 970; it buys its 2 at Bob's 980 ask.
  h_.Run({Limit(t + 5 * kSec, kBob, Side::kSell, 980, 5)});
  const int64_t t7 = t + 6 * kSec;
  out = &h_.Run({Limit(t7, kBob, Side::kSell, 970, 1), Limit(t7, kAlice, Side::kBuy, 970, 1)});
  {
    const AccountUpdate* u = FindUpdate(*out, kAlice);
    ASSERT_EQ(Types(u), (std::vector<ExecType>{ExecType::kNew, ExecType::kTrade, ExecType::kNew,
                                               ExecType::kTrade}));
    EXPECT_EQ(u->reports[2].order.id, tp);
    EXPECT_EQ(u->reports[2].order.trigger_ns, t7);
    EXPECT_EQ(u->reports[3].order.status, OrderStatus::kFilled);
    EXPECT_EQ(u->reports[3].fill->price, Price{980});
  }
  EXPECT_EQ(h_.rs.WaitingOrders(kAlice, kBtcUsdt), 0u);

  // A stop-limit buy triggered with nothing to take rests: its trigger
  // report says it works, and its level appears.
  h_.Run({Limit(t + 7 * kSec, kBob, Side::kBuy, 980, 4)});  // takes the 980s: last 980
  h_.Run({Stop(t + 8 * kSec, kAlice, Side::kBuy, OrderType::kStopLossLimit, 990, 1, 985)});
  const OrderId slb = Last();
  const int64_t t10 = t + 9 * kSec;
  out = &h_.Run({Limit(t10, kBob, Side::kSell, 986, 1), Limit(t10, kAlice, Side::kBuy, 986, 1)});
  {
    const AccountUpdate* u = FindUpdate(*out, kAlice);
    ASSERT_EQ(Types(u), (std::vector<ExecType>{ExecType::kNew, ExecType::kTrade, ExecType::kNew}));
    const OrderRecord& trig = u->reports[2].order;
    EXPECT_EQ(trig.id, slb);
    EXPECT_TRUE(trig.working);
    EXPECT_EQ(trig.remaining, Qty{1});
    EXPECT_EQ(WorkingNs(trig), std::optional<int64_t>(t10));
  }
  EXPECT_EQ(h_.rs.Snapshot(kBtcUsdt)->bids.front(), (Level{Price{990}, Qty{1}}));

  // A trailing take-profit sell with an activation price above the market
  // waits without tracking; a restart's Bootstrap restores it as it is.
  h_.Run({Stop(t + 10 * kSec, kAlice, Side::kSell, OrderType::kTakeProfitLimit, 1100, 2, 1200, 50,
               "tps")});
  const OrderId tps = Last();
  {
    ReadSide boot(h_.config, Unbounded());
    boot.Bootstrap(h_.engine.ExportImage());
    ExpectAgrees(h_.engine, boot);
    auto r = boot.FindOrder(kAlice, kBtcUsdt, tps);
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(Waiting(*r));
    EXPECT_EQ(r->stop_price, Price{1200});
    EXPECT_EQ(r->trailing_delta, 50);
    EXPECT_EQ(r->trailing_ns, 0);
    EXPECT_EQ(boot.WaitingOrders(kAlice, kBtcUsdt), 1u);
    // The triggered stop-limit buy resting in the book is working.
    auto b = boot.FindOrder(kAlice, kBtcUsdt, slb);
    ASSERT_TRUE(b.has_value());
    EXPECT_FALSE(Waiting(*b));
    EXPECT_TRUE(WorkingNs(*b).has_value());
  }
  // A trade at 1200 starts its tracking.
  h_.Run({Limit(t + 11 * kSec, kBob, Side::kSell, 1200, 1)});
  const int64_t t13 = t + 12 * kSec;
  h_.Run({Limit(t13, kBob, Side::kBuy, 1200, 1)});
  rec = h_.rs.FindOrder(kAlice, kBtcUsdt, tps);
  EXPECT_EQ(rec->trailing_ns, t13);
  EXPECT_TRUE(Waiting(*rec));

  // Canceled while waiting: CANCELED, its lock back, never working.
  out = &h_.Run({Cancel(t + 13 * kSec, kAlice, kBtcUsdt, tps)});
  {
    const AccountUpdate* u = FindUpdate(*out, kAlice);
    ASSERT_EQ(Types(u), std::vector<ExecType>{ExecType::kCanceled});
    EXPECT_EQ(u->reports[0].order.status, OrderStatus::kCanceled);
    EXPECT_EQ(WorkingNs(u->reports[0].order), std::nullopt);
  }
  EXPECT_EQ(h_.rs.WaitingOrders(kAlice, kBtcUsdt), 0u);
}

// An iceberg's level shows its visible part only: a slice when it rests, the
// next slice (at the tail of its level) after each refill, nothing once
// canceled; the order's views show the whole order. The depth diffs rebuild
// the published book, which TearDown compares with the engine's.
TEST_F(ReadSideTest, IcebergLevelsShowTheVisiblePart) {
  const int64_t t = kDay0 + kSec;
  Command ice = Limit(t, kAlice, Side::kSell, 1000, 10, TimeInForce::kGtc, "ice");
  std::get<engine::PlaceOrder>(ice.body).iceberg_qty = Qty{3};
  DiffBooks books;
  books.Init(h_.rs);
  const BatchOutput* out = &h_.Run({ice});
  ASSERT_NO_FATAL_FAILURE(books.Apply(*out, h_.rs));
  const OrderId id = Last();
  EXPECT_EQ(h_.rs.Snapshot(kBtcUsdt)->asks, (std::vector<Level>{{Price{1000}, Qty{3}}}));
  {
    const AccountUpdate* u = FindUpdate(*out, kAlice);
    ASSERT_EQ(Types(u), std::vector<ExecType>{ExecType::kNew});
    EXPECT_EQ(u->reports[0].order.iceberg_qty, Qty{3});
    EXPECT_EQ(u->reports[0].order.remaining, Qty{10});
  }
  EXPECT_EQ(h_.rs.IcebergOrders(kAlice, kBtcUsdt), 1u);
  // Another order joins the level behind the slice.
  out = &h_.Run({Limit(t + 1, kBob, Side::kSell, 1000, 2)});
  ASSERT_NO_FATAL_FAILURE(books.Apply(*out, h_.rs));
  EXPECT_EQ(h_.rs.Snapshot(kBtcUsdt)->asks, (std::vector<Level>{{Price{1000}, Qty{5}}}));
  // A buy of 4: the slice (3), then Bob's 1 (the refilled slice went to the tail).
  out = &h_.Run({Limit(t + 2, kBob, Side::kBuy, 1000, 4)});
  ASSERT_NO_FATAL_FAILURE(books.Apply(*out, h_.rs));
  EXPECT_EQ(h_.Batch<engine::IcebergRefilled>().size(), 1u);
  EXPECT_EQ(h_.rs.Snapshot(kBtcUsdt)->asks, (std::vector<Level>{{Price{1000}, Qty{4}}}));
  std::optional<OrderRecord> r = h_.rs.FindOrder(kAlice, kBtcUsdt, id);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->executed, Qty{3});
  EXPECT_EQ(r->remaining, Qty{7});
  EXPECT_EQ(r->visible, Qty{3});
  EXPECT_EQ(r->status, OrderStatus::kPartiallyFilled);
  // Canceled: its visible part leaves the level.
  out = &h_.Run({Cancel(t + 3, kAlice, kBtcUsdt, id)});
  ASSERT_NO_FATAL_FAILURE(books.Apply(*out, h_.rs));
  EXPECT_EQ(h_.rs.Snapshot(kBtcUsdt)->asks, (std::vector<Level>{{Price{1000}, Qty{1}}}));
  EXPECT_EQ(h_.rs.IcebergOrders(kAlice, kBtcUsdt), 0u);
  EXPECT_EQ(h_.rs.FindOrder(kAlice, kBtcUsdt, id)->status, OrderStatus::kCanceled);
}

// An OCO: listStatus EXEC_STARTED with its orders' client ids, the orders
// carry the list id; canceling the list cancels both and reports ALL_DONE;
// the list stays findable by id and by its client id.
TEST_F(ReadSideTest, OcoListStatusAndCancel) {
  const int64_t t = kDay0 + kSec;
  engine::PlaceOrderList pl;
  pl.account = kAlice;
  pl.market = kBtcUsdt;
  pl.type = engine::ListType::kOco;
  (void)pl.list_client_order_id.Assign("L1");
  pl.orders[0] = engine::ListOrder{
      Side::kSell, OrderType::kLimitMaker, TimeInForce::kGtc, 0, Price{1100}, Qty{2}, Price{},
      Qty{},       ClientOrderId{}};
  (void)pl.orders[0].client_order_id.Assign("up");
  pl.orders[1] = engine::ListOrder{
      Side::kSell, OrderType::kStopLoss, TimeInForce::kIoc, 0, Price{}, Qty{2}, Price{900},
      Qty{},       ClientOrderId{}};
  (void)pl.orders[1].client_order_id.Assign("down");
  const BatchOutput* out = &h_.Run({Command{t, pl}});
  ASSERT_TRUE(h_.Batch<engine::Rejected>().empty());
  const uint64_t list_id = Raw(h_.engine.last_sequence());
  {
    const AccountUpdate* u = FindUpdate(*out, kAlice);
    ASSERT_EQ(u->lists.size(), 1u);
    const ListRecord& l = u->lists[0].list;
    EXPECT_EQ(l.id, list_id);
    EXPECT_EQ(l.status, ListStatus::kExecuting);
    EXPECT_EQ(l.list_client_order_id.view(), "L1");
    EXPECT_EQ(l.client_ids[0].view(), "up");
    EXPECT_EQ(l.client_ids[1].view(), "down");
    ASSERT_EQ(u->reports.size(), 2u);
    EXPECT_EQ(u->reports[0].order.list_id, list_id);
    EXPECT_EQ(u->reports[1].order.list_id, list_id);
  }
  EXPECT_EQ(h_.rs.Snapshot(kBtcUsdt)->asks, (std::vector<Level>{{Price{1100}, Qty{2}}}));
  ASSERT_EQ(h_.rs.OpenLists(kAlice).size(), 1u);
  EXPECT_EQ(h_.rs.FindListByClientId(kAlice, "L1")->id, list_id);

  engine::CancelOrderList cl{kAlice, kBtcUsdt, list_id, ClientOrderId{}};
  out = &h_.Run({Command{t + 1, cl}});
  {
    const AccountUpdate* u = FindUpdate(*out, kAlice);
    EXPECT_EQ(Types(u), (std::vector<ExecType>{ExecType::kCanceled, ExecType::kCanceled}));
    ASSERT_EQ(u->lists.size(), 1u);
    EXPECT_EQ(u->lists[0].list.status, ListStatus::kAllDone);
    EXPECT_EQ(u->lists[0].after_reports, 2u);
  }
  EXPECT_TRUE(h_.rs.OpenLists(kAlice).empty());
  EXPECT_EQ(h_.rs.FindList(kAlice, list_id)->status, ListStatus::kAllDone);
  EXPECT_EQ(h_.rs.AllLists(kAlice, 0, 0, 0, 10).size(), 1u);
  EXPECT_TRUE(h_.rs.Snapshot(kBtcUsdt)->asks.empty());
}

// An OTO: the pending order is PENDING_NEW until its working order fills,
// then placed (NEW) with the same id and the list id.
TEST_F(ReadSideTest, OtoPendingOrderPlacedWhenTheWorkingOrderFills) {
  const int64_t t = kDay0 + kSec;
  engine::PlaceOrderList pl;
  pl.account = kAlice;
  pl.market = kBtcUsdt;
  pl.type = engine::ListType::kOto;
  pl.orders[0] = engine::ListOrder{
      Side::kBuy, OrderType::kLimit, TimeInForce::kGtc, 0, Price{1000}, Qty{2}, Price{},
      Qty{},      ClientOrderId{}};
  (void)pl.orders[0].client_order_id.Assign("w");
  pl.orders[1] = engine::ListOrder{
      Side::kSell, OrderType::kLimitMaker, TimeInForce::kGtc, 0, Price{1200}, Qty{2}, Price{},
      Qty{},       ClientOrderId{}};
  (void)pl.orders[1].client_order_id.Assign("p");
  h_.Run({Command{t, pl}});
  ASSERT_TRUE(h_.Batch<engine::Rejected>().empty());
  const uint64_t list_id = Raw(h_.engine.last_sequence());
  const std::optional<OrderRecord> pending = h_.rs.FindOrderByClientId(kAlice, kBtcUsdt, "p");
  ASSERT_TRUE(pending);
  EXPECT_EQ(pending->status, OrderStatus::kPendingNew);
  EXPECT_EQ(pending->list_id, list_id);
  EXPECT_TRUE(h_.rs.Snapshot(kBtcUsdt)->asks.empty());
  // Bob sells into the working bid: it fills, the pending sell is placed.
  h_.Run({Limit(t + 1, kBob, Side::kSell, 1000, 2)});
  const std::optional<OrderRecord> placed = h_.rs.FindOrderByClientId(kAlice, kBtcUsdt, "p");
  ASSERT_TRUE(placed);
  EXPECT_EQ(placed->status, OrderStatus::kNew);
  EXPECT_EQ(placed->id, pending->id);
  EXPECT_EQ(placed->list_id, list_id);
  EXPECT_EQ(h_.rs.Snapshot(kBtcUsdt)->asks, (std::vector<Level>{{Price{1200}, Qty{2}}}));
  EXPECT_EQ(h_.rs.FindList(kAlice, list_id)->status, ListStatus::kExecuting);
}

TEST_F(ReadSideTest, QuoteBudgetSpentIsFilled) {
  const int64_t t = kDay0 + kSec;
  h_.Run({Limit(t, kAlice, Side::kSell, 1000, 10), Limit(t, kAlice, Side::kSell, 2000, 5)});
  const BatchOutput* out = &h_.Run({Place(t + kSec, kBob, kBtcUsdt, Side::kBuy, OrderType::kMarket,
                                          TimeInForce::kIoc, 0, 0, "q1", StpMode::kNone, 10'500)});
  const OrderId q = Last();
  ASSERT_EQ(h_.Batch<engine::OrderExpired>().size(), 1u);
  EXPECT_EQ(h_.Batch<engine::OrderExpired>()[0].reason, engine::ExpireReason::kQuoteBudgetSpent);
  ASSERT_EQ(Types(FindUpdate(*out, kBob)),
            (std::vector<ExecType>{ExecType::kNew, ExecType::kTrade}));
  const ExecutionReport& last = FindUpdate(*out, kBob)->reports[1];
  EXPECT_EQ(last.order.status, OrderStatus::kFilled);
  EXPECT_EQ(last.order.executed, Qty{10});
  EXPECT_EQ(last.order.remaining, Qty{0});
  const auto rec = h_.rs.FindOrder(kBob, kBtcUsdt, q);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->status, OrderStatus::kFilled);
  EXPECT_EQ(rec->executed, Qty{10});
  EXPECT_TRUE(h_.rs.OpenOrders(kBob, std::nullopt).empty());
  const auto all = h_.rs.AllOrders(kBob, kBtcUsdt, 0, 0, 0, 100);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].status, OrderStatus::kFilled);

  // The book running out is still an expiry.
  out = &h_.Run({Place(t + 2 * kSec, kBob, kBtcUsdt, Side::kBuy, OrderType::kMarket,
                       TimeInForce::kIoc, 0, 0, "q2", StpMode::kNone, 50'000)});
  ASSERT_EQ(Types(FindUpdate(*out, kBob)),
            (std::vector<ExecType>{ExecType::kNew, ExecType::kTrade, ExecType::kExpired}));
  EXPECT_EQ(h_.rs.FindOrder(kBob, kBtcUsdt, Last())->status, OrderStatus::kExpired);
}

// An amend with a new client order id: the order is found by the new id, not
// by the previous one, and the amend's report carries both (c and C).
TEST_F(ReadSideTest, AmendWithANewClientOrderIdMovesTheId) {
  const int64_t t = kDay0 + kSec;
  h_.Run({Limit(t, kAlice, Side::kSell, 3000, 5, TimeInForce::kGtc, "old")});
  const OrderId s = Last();
  Command am = Amend(t + kSec, kAlice, kBtcUsdt, s, 0, 3);
  std::get<engine::AmendOrder>(am.body).new_client_order_id = ClientOrderId::From("new");
  const BatchOutput* out = &h_.Run({am});
  ASSERT_EQ(Types(FindUpdate(*out, kAlice)), std::vector<ExecType>{ExecType::kAmended});
  const ExecutionReport& r = FindUpdate(*out, kAlice)->reports[0];
  EXPECT_EQ(r.order.client_order_id.view(), "new");
  EXPECT_EQ(r.orig_client_order_id.view(), "old");
  EXPECT_EQ(r.order.terms.qty, Qty{3});
  const auto found = h_.rs.FindOrderByClientId(kAlice, kBtcUsdt, "new");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, s);
  EXPECT_FALSE(h_.rs.FindOrderByClientId(kAlice, kBtcUsdt, "old").has_value());
  EXPECT_EQ(h_.rs.OpenOrders(kAlice, kBtcUsdt)[0].client_order_id.view(), "new");
  // An amend that keeps the id reports no previous one.
  out = &h_.Run({Amend(t + 2 * kSec, kAlice, kBtcUsdt, s, 0, 2)});
  EXPECT_TRUE(FindUpdate(*out, kAlice)->reports[0].orig_client_order_id.empty());
}

TEST_F(ReadSideTest, DepositsAndWithdrawalsAreBalanceDeltas) {
  const BatchOutput& out = h_.Run({Fund(kDay0 + kSec, kBob, kEth, 500, "e1"),
                                   Take(kDay0 + 2 * kSec, kBob, kEth, 200, "e2"),
                                   Take(kDay0 + 3 * kSec, kBob, kEth, 10'000, "e3")});  // refused
  const AccountUpdate* u = FindUpdate(out, kBob);
  ASSERT_NE(u, nullptr);
  ASSERT_EQ(u->transfers.size(), 2u);
  EXPECT_EQ(u->transfers[0].delta, Amount{500});
  EXPECT_EQ(u->transfers[0].asset, kEth);
  EXPECT_EQ(u->transfers[0].time_ns, kDay0 + kSec);
  EXPECT_EQ(u->transfers[1].delta, Amount{-200});
  EXPECT_TRUE(u->reports.empty());
  ASSERT_EQ(u->balances.size(), 1u);
  EXPECT_EQ(u->balances[0].available, Amount{300});
  EXPECT_EQ(h_.rs.balance(kBob, kEth), (Balance{Amount{300}, Amount{0}}));
  EXPECT_EQ(h_.rs.account_update_ns(kBob), kDay0 + 2 * kSec);
  EXPECT_EQ(h_.rs.account_update_ns(AccountId{7}), 0);
  EXPECT_EQ(h_.rs.balance(AccountId{7}, kEth), Balance{});
  EXPECT_EQ(h_.rs.balance(kBob, AssetId{9}), Balance{});
  EXPECT_EQ(h_.rs.Balances(AccountId{7}).size(), kAssets);
  EXPECT_TRUE(out.markets.empty());
}

TEST_F(ReadSideTest, SelfTradePreventionExpiresTheMakerOffTheBook) {
  const int64_t t = kDay0 + kSec;
  h_.Run({Limit(t, kAlice, Side::kSell, 1000, 5), Limit(t, kBob, Side::kSell, 1001, 5)});
  const OrderId bob_ask = Last();
  const OrderId alice_ask{Raw(bob_ask) - 1};
  const BatchOutput& out = h_.Run({Place(t + kSec, kAlice, kBtcUsdt, Side::kBuy, OrderType::kLimit,
                                         TimeInForce::kGtc, 1001, 8, "", StpMode::kExpireMaker)});
  // Alice's ask expires (STP), Bob's fills 5, the rest (3) rests at 1001.
  ASSERT_EQ(Types(FindUpdate(out, kAlice)),
            (std::vector<ExecType>{ExecType::kNew, ExecType::kExpired, ExecType::kTrade}));
  EXPECT_EQ(FindUpdate(out, kAlice)->reports[1].order.id, alice_ask);
  EXPECT_EQ(FindUpdate(out, kAlice)->reports[1].order.expire_reason,
            engine::ExpireReason::kSelfTradePrevention);
  ASSERT_EQ(out.depth.size(), 1u);
  EXPECT_EQ(out.depth[0].bids, (std::vector<Level>{{Price{1001}, Qty{3}}}));
  EXPECT_EQ(out.depth[0].asks, (std::vector<Level>{{Price{1000}, Qty{0}}, {Price{1001}, Qty{0}}}));
  auto snap = h_.rs.Snapshot(kBtcUsdt);
  EXPECT_TRUE(snap->asks.empty());
  EXPECT_EQ(snap->bids, (std::vector<Level>{{Price{1001}, Qty{3}}}));
  EXPECT_EQ(h_.rs.FindOrder(kAlice, kBtcUsdt, alice_ask)->status, OrderStatus::kExpired);
}

TEST_F(ReadSideTest, DepthIdsMoveOnlyWhenABookChanges) {
  const int64_t t = kDay0 + kSec;
  auto id = [&] { return h_.rs.Snapshot(kBtcUsdt)->last_update_id; };
  auto last_seq = [&] { return Raw(h_.batch.back().seq); };
  EXPECT_EQ(id(), 0u);
  h_.Run({Limit(t, kAlice, Side::kBuy, 990, 1), Limit(t, kAlice, Side::kBuy, 995, 2),
          Limit(t, kAlice, Side::kBuy, 980, 3), Limit(t, kAlice, Side::kSell, 1005, 4)});
  const uint64_t first = last_seq();  // u: the sequence of the last change
  EXPECT_GT(first, 4u);               // the funding went first
  EXPECT_EQ(id(), first);
  ASSERT_EQ(h_.out.depth.size(), 1u);
  EXPECT_EQ(h_.out.depth[0].first_update_id, 1u);
  EXPECT_EQ(h_.out.depth[0].last_update_id, first);
  EXPECT_EQ(h_.out.depth[0].time_ns, t);
  EXPECT_EQ(h_.out.depth[0].bids,
            (std::vector<Level>{{Price{995}, Qty{2}}, {Price{990}, Qty{1}}, {Price{980}, Qty{3}}}));
  EXPECT_EQ(h_.out.depth[0].asks, (std::vector<Level>{{Price{1005}, Qty{4}}}));
  auto before = h_.rs.Snapshot(kBtcUsdt);

  // An order that rests and is canceled in the same batch leaves every level
  // as it was, but it changed the book on the way: an empty diff carries the
  // id on, so a replica that applied the two commands in separate batches
  // has the same id after them.
  h_.Run({Limit(t + kSec, kBob, Side::kBuy, 970, 1)});
  const OrderId o = Last();
  EXPECT_EQ(id(), last_seq());
  h_.Run({Limit(t + 2 * kSec, kBob, Side::kBuy, 960, 1), Cancel(t + 2 * kSec, kBob, kBtcUsdt, o),
          Cancel(t + 2 * kSec, kBob, kBtcUsdt, OrderId{Raw(o) + 1})});
  EXPECT_EQ(id(), last_seq());  // 970 went away
  h_.Run({Limit(t + 3 * kSec, kBob, Side::kBuy, 960, 1)});
  const OrderId p = Last();
  const uint64_t rested = last_seq();
  EXPECT_EQ(id(), rested);
  h_.Run({Cancel(t + 4 * kSec, kBob, kBtcUsdt, p), Limit(t + 4 * kSec, kBob, Side::kBuy, 960, 1)});
  const uint64_t replaced = last_seq();
  EXPECT_EQ(id(), replaced);
  ASSERT_EQ(h_.out.depth.size(), 1u);
  EXPECT_EQ(h_.out.depth[0].first_update_id, rested + 1);
  EXPECT_EQ(h_.out.depth[0].last_update_id, replaced);
  EXPECT_TRUE(h_.out.depth[0].bids.empty() && h_.out.depth[0].asks.empty());
  EXPECT_EQ(h_.out.markets, std::vector<MarketId>{kBtcUsdt});
  // Deposits touch no market.
  h_.Run({Fund(t + 5 * kSec, kBob, kEth, 1, "x")});
  EXPECT_EQ(id(), replaced);
  EXPECT_TRUE(h_.out.markets.empty());
  // A status change touches the market but not the book.
  h_.Run({Command{t + 6 * kSec, engine::SetMarketStatus{kBtcUsdt, MarketStatus::kHalted}}});
  EXPECT_EQ(id(), replaced);
  EXPECT_TRUE(h_.out.depth.empty());
  EXPECT_EQ(h_.rs.Snapshot(kBtcUsdt)->status, MarketStatus::kHalted);
  EXPECT_EQ(h_.rs.Snapshot(kBtcUsdt)->time_ns, t + 6 * kSec);
  EXPECT_EQ(h_.out.markets, std::vector<MarketId>{kBtcUsdt});
  h_.Run({Command{t + 7 * kSec, engine::SetMarketStatus{kBtcUsdt, MarketStatus::kTrading}}});
  // Published snapshots never change.
  EXPECT_EQ(before->last_update_id, first);
  EXPECT_EQ(before->bids.size(), 3u);
  EXPECT_EQ(before->status, MarketStatus::kTrading);
  // The other market never moved.
  EXPECT_EQ(h_.rs.Snapshot(kEthUsdt)->last_update_id, 0u);
  EXPECT_EQ(h_.rs.Snapshot(MarketId{7}), nullptr);
}

TEST(ReadSideOptionsTest, SnapshotDepthIsTruncated) {
  ReadSideOptions o = Unbounded();
  o.max_depth_levels = 2;
  Harness h(o);
  h.Run({Fund(kDay0, kAlice, kUsdt, 1'000'000, "u")});
  h.Run({Limit(kDay0, kAlice, Side::kBuy, 990, 1), Limit(kDay0, kAlice, Side::kBuy, 995, 2),
         Limit(kDay0, kAlice, Side::kBuy, 980, 3)});
  EXPECT_EQ(h.rs.Snapshot(kBtcUsdt)->bids,
            (std::vector<Level>{{Price{995}, Qty{2}}, {Price{990}, Qty{1}}}));
  ASSERT_EQ(h.out.depth.size(), 1u);
  EXPECT_EQ(h.out.depth[0].bids.size(), 3u);  // diffs are never truncated
}

TEST(ReadSideOptionsTest, HistoryIsBounded) {
  ReadSideOptions o = Unbounded();
  o.history_orders = 3;
  o.history_trades = 4;
  Harness h(o);
  h.Run({Fund(kDay0, kAlice, kBtc, 10'000'000, "a"), Fund(kDay0, kBob, kUsdt, 10'000'000, "b")});
  // Six one-lot asks, then one buy that takes them all: six trades.
  std::vector<OrderId> asks;
  for (int i = 0; i < 6; ++i) {
    h.Run({Limit(kDay0 + i * kSec, kAlice, Side::kSell, 1000 + i, 1, TimeInForce::kGtc,
                 "a" + std::to_string(i))});
    asks.push_back(OrderId{Raw(h.engine.last_sequence())});
  }
  h.Run({Limit(kDay0 + 10 * kSec, kBob, Side::kBuy, 1010, 6)});
  ASSERT_EQ(h.out.trades.size(), 6u);
  // Alice: six filled orders, the newest three kept; client ids go with them.
  std::vector<OrderRecord> all = h.rs.AllOrders(kAlice, kBtcUsdt, 0, 0, 0, 100);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, asks[3]);
  EXPECT_EQ(all[2].id, asks[5]);
  EXPECT_FALSE(h.rs.FindOrder(kAlice, kBtcUsdt, asks[2]).has_value());
  EXPECT_FALSE(h.rs.FindOrderByClientId(kAlice, kBtcUsdt, "a2").has_value());
  EXPECT_EQ(h.rs.FindOrderByClientId(kAlice, kBtcUsdt, "a3")->id, asks[3]);
  // Fills: the newest four.
  std::vector<Fill> fills = h.rs.MyTrades(kAlice, kBtcUsdt, 0, 0, 0, 0, 100);
  ASSERT_EQ(fills.size(), 4u);
  EXPECT_EQ(fills[0].trade_id, TradeId{3});
  EXPECT_EQ(fills[3].trade_id, TradeId{6});
  // Open orders are never dropped.
  for (int i = 0; i < 5; ++i) {
    h.Run({Limit(kDay0 + (20 + i) * kSec, kAlice, Side::kSell, 2000 + i, 1)});
  }
  EXPECT_EQ(h.rs.OpenOrders(kAlice, kBtcUsdt).size(), 5u);
  EXPECT_EQ(h.rs.AllOrders(kAlice, kBtcUsdt, 0, 0, 0, 100).size(), 8u);
}

TEST(ReadSideOptionsTest, RecentTradesCompactToTheNewest) {
  ReadSideOptions o = Unbounded();
  o.recent_trades = 3;
  Harness h(o);
  h.Run({Fund(kDay0, kAlice, kBtc, 10'000'000, "a"), Fund(kDay0, kBob, kUsdt, 10'000'000, "b")});
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1000, 100)});
  auto ids = [](const std::vector<TradeRow>& rows) {
    std::vector<uint64_t> v;
    for (const TradeRow& r : rows) v.push_back(Raw(r.id));
    return v;
  };
  std::shared_ptr<const MarketSnapshot> at6;
  for (int i = 1; i <= 7; ++i) {
    h.Run({Limit(kDay0 + i * kSec, kBob, Side::kBuy, 1000, 1)});
    auto snap = h.rs.Snapshot(kBtcUsdt);
    ASSERT_NE(snap->trades, nullptr);
    if (i <= 6) {
      // One chunk per batch, chained, until the rows exceed 2 x 3.
      EXPECT_EQ(snap->trades->total, static_cast<std::size_t>(i));
      EXPECT_EQ(snap->trades->rows.size(), 1u);
    }
    if (i == 6) at6 = snap;
  }
  auto snap = h.rs.Snapshot(kBtcUsdt);
  EXPECT_EQ(snap->trades->total, 3u);
  EXPECT_EQ(snap->trades->older, nullptr);
  EXPECT_EQ(ids(snap->RecentTrades(100)), (std::vector<uint64_t>{5, 6, 7}));
  EXPECT_EQ(ids(snap->RecentTrades(2)), (std::vector<uint64_t>{6, 7}));
  EXPECT_EQ(ids(snap->RecentTrades(100, 6)), (std::vector<uint64_t>{6, 7}));
  EXPECT_EQ(ids(snap->RecentTrades(1, 2)), (std::vector<uint64_t>{5}));  // 2 is gone
  EXPECT_TRUE(snap->RecentTrades(0).empty());
  // An older snapshot still holds what it held.
  EXPECT_EQ(ids(at6->RecentTrades(100)), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(ids(at6->RecentTrades(2, 3)), (std::vector<uint64_t>{3, 4}));
  // A batch with more than 2 x 3 trades keeps its newest three.
  std::vector<Command> burst;
  for (int i = 0; i < 8; ++i) burst.push_back(Limit(kDay0 + 9 * kSec, kBob, Side::kBuy, 1000, 1));
  h.Run(burst);
  snap = h.rs.Snapshot(kBtcUsdt);
  EXPECT_EQ(ids(snap->RecentTrades(100)), (std::vector<uint64_t>{13, 14, 15}));
  EXPECT_EQ(snap->trades->total, 3u);
  const std::vector<TradeRow> rows = snap->RecentTrades(1);
  EXPECT_EQ(rows[0].time_ns, kDay0 + 9 * kSec);
  EXPECT_FALSE(rows[0].buyer_is_maker);
  EXPECT_EQ(rows[0].qty, Qty{1});
  EXPECT_EQ(rows[0].notional, Amount{1000});
}

TEST(ReadSideOptionsTest, ClosedKlinesAreBounded) {
  ReadSideOptions o = Unbounded();
  o.klines_per_interval = 3;
  Harness h(o);
  h.Run({Fund(kDay0, kAlice, kBtc, 10'000'000, "a"), Fund(kDay0, kBob, kUsdt, 10'000'000, "b")});
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1000, 100)});
  for (int i = 0; i < 6; ++i) {
    h.Run({Limit(kDay0 + i * 3600 * kSec, kBob, Side::kBuy, 1000, 1)});
  }
  auto snap = h.rs.Snapshot(kBtcUsdt);
  // 1h: six candles, three closed kept plus the open one.
  const std::vector<Kline> got = snap->Klines(KlineInterval::k1h, 0, 0, 100);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].open_time_ms, kDay0Ms + 2 * 3'600'000);
  EXPECT_EQ(got[3].open_time_ms, kDay0Ms + 5 * 3'600'000);
  // What reaches past the kept candles is asked of the history store.
  EXPECT_TRUE(snap->KlinesBeyondHeld(KlineInterval::k1h, kDay0Ms, 0, 100));
  EXPECT_FALSE(snap->KlinesBeyondHeld(KlineInterval::k1h, kDay0Ms + 2 * 3'600'000, 0, 100));
  EXPECT_TRUE(snap->KlinesBeyondHeld(KlineInterval::k1h, 0, 0, 5)) << "5 asked, 4 held";
  EXPECT_FALSE(snap->KlinesBeyondHeld(KlineInterval::k1h, 0, 0, 4));
  EXPECT_TRUE(snap->KlinesBeyondHeld(KlineInterval::k1h, 0, kDay0Ms + 3 * 3'600'000, 3));
  EXPECT_FALSE(snap->KlinesBeyondHeld(KlineInterval::k1h, 0, kDay0Ms + 3 * 3'600'000, 2));
  EXPECT_FALSE(snap->KlinesBeyondHeld(KlineInterval::k1d, kDay0Ms - 1, 0, 100))
      << "one 1d candle: nothing was dropped";
  // 1m keeps a day of candles whatever the option says: the ticker needs them.
  EXPECT_EQ(snap->Klines(KlineInterval::k1m, 0, 0, 100).size(), 6u);
  EXPECT_EQ(snap->Ticker(kDay0Ms + 6 * 3'600'000).trades, 6u);
}

TEST(ReadSideOptionsTest, EmptyBatchChangesNothing) {
  Harness h;
  h.out.trades.push_back(TradeRow{});
  h.rs.Apply({}, &h.out);
  EXPECT_TRUE(h.out.trades.empty());
  EXPECT_EQ(h.rs.applied_seq(), 0u);
  auto snap = h.rs.Snapshot(kBtcUsdt);
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(snap->last_update_id, 0u);
  EXPECT_EQ(snap->status, MarketStatus::kTrading);
  EXPECT_TRUE(snap->bids.empty());
  EXPECT_TRUE(snap->RecentTrades(10).empty());
  EXPECT_FALSE(snap->Ticker(kDay0Ms).any_trade);
  EXPECT_TRUE(snap->Klines(KlineInterval::k1m, 0, 0, 10).empty());
}

// Readers on other threads see whole snapshots with ids that never go back
// (run under TSan to check the publication).
TEST(ReadSideThreadsTest, ReadersSeeConsistentSnapshots) {
  Harness h;
  MixedCommands gen(99, &h.engine);
  h.Run(gen.Funding());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::thread reader([&] {
    uint64_t last_id = 0;
    uint64_t last_seq = 0;
    while (!stop.load(std::memory_order_acquire)) {
      const uint64_t seq = h.rs.applied_seq();
      EXPECT_GE(seq, last_seq);
      last_seq = seq;
      auto snap = h.rs.Snapshot(kBtcUsdt);
      EXPECT_GE(snap->last_update_id, last_id);
      last_id = snap->last_update_id;
      for (std::size_t i = 1; i < snap->bids.size(); ++i) {
        EXPECT_GT(snap->bids[i - 1].price, snap->bids[i].price);
      }
      (void)snap->RecentTrades(20);
      (void)snap->Ticker(kDay0Ms + 10 * 3'600'000);
      for (uint32_t a = 1; a <= kTraders; ++a) {
        for (const OrderRecord& r : h.rs.OpenOrders(AccountId{a}, std::nullopt)) {
          EXPECT_EQ(r.terms.account, AccountId{a});
        }
        (void)h.rs.Balances(AccountId{a});
      }
      reads.fetch_add(1, std::memory_order_relaxed);
    }
  });
  for (int b = 0; b < 500; ++b) {
    const std::size_t n = gen.BatchSize();
    for (std::size_t i = 0; i < n; ++i) h.Process(gen.Next());
    h.Flush();
  }
  // Let the reader finish at least one full pass after the last batch.
  const uint64_t seen = reads.load(std::memory_order_relaxed);
  while (reads.load(std::memory_order_relaxed) < seen + 2) std::this_thread::yield();
  stop.store(true, std::memory_order_release);
  reader.join();
  ExpectAgrees(h.engine, h.rs);
}

TEST(ReadSideNamesTest, IntervalsAndStates) {
  const std::vector<std::pair<std::string_view, int64_t>> want = {
      {"1m", 60'000},     {"3m", 180'000},     {"5m", 300'000},     {"15m", 900'000},
      {"30m", 1'800'000}, {"1h", 3'600'000},   {"2h", 7'200'000},   {"4h", 14'400'000},
      {"6h", 21'600'000}, {"8h", 28'800'000},  {"12h", 43'200'000}, {"1d", 86'400'000},
      {"1s", 1'000},      {"3d", 259'200'000}, {"1w", 604'800'000}, {"1M", 2'678'400'000}};
  ASSERT_EQ(want.size(), kKlineIntervals);
  for (std::size_t i = 0; i < want.size(); ++i) {
    auto iv = ParseKlineInterval(want[i].first);
    ASSERT_TRUE(iv.has_value()) << want[i].first;
    EXPECT_EQ(static_cast<std::size_t>(*iv), i);
    EXPECT_EQ(ToString(*iv), want[i].first);
    EXPECT_EQ(IntervalMs(*iv), want[i].second);
  }
  for (std::string_view bad : {"", "1S", "2m", "1W", "2d", "1d ", "1mo", "1y"}) {
    EXPECT_FALSE(ParseKlineInterval(bad).has_value()) << bad;
  }
  EXPECT_EQ(ToString(OrderStatus::kNew), "NEW");
  EXPECT_EQ(ToString(OrderStatus::kPartiallyFilled), "PARTIALLY_FILLED");
  EXPECT_EQ(ToString(OrderStatus::kFilled), "FILLED");
  EXPECT_EQ(ToString(OrderStatus::kCanceled), "CANCELED");
  EXPECT_EQ(ToString(OrderStatus::kRejected), "REJECTED");
  EXPECT_EQ(ToString(OrderStatus::kExpired), "EXPIRED");
  EXPECT_EQ(ToString(ExecType::kNew), "NEW");
  EXPECT_EQ(ToString(ExecType::kTrade), "TRADE");
  EXPECT_EQ(ToString(ExecType::kCanceled), "CANCELED");
  EXPECT_EQ(ToString(ExecType::kExpired), "EXPIRED");
  EXPECT_EQ(ToString(ExecType::kRejected), "REJECTED");
  EXPECT_EQ(ToString(ExecType::kAmended), "REPLACED");

  BatchOutput out;
  out.first_seq = Sequence{3};
  out.time_ns = 5;
  out.depth.emplace_back();
  out.markets.push_back(kBtcUsdt);
  out.accounts.emplace_back();
  out.Clear();
  EXPECT_EQ(out.first_seq, Sequence{0});
  EXPECT_EQ(out.time_ns, 0);
  EXPECT_TRUE(out.depth.empty() && out.markets.empty() && out.accounts.empty());
}

// Candles open where Binance opens them: fixed lengths on multiples since the
// epoch (3d included), weeks on Mondays, months on the 1st, all in local
// time of the zone; kDay0Ms is Monday 2024-01-01 00:00 UTC.
TEST(KlineTimeTest, AlignmentInUtcAndZones) {
  constexpr int64_t kH = 3'600'000;
  constexpr int64_t kD = 24 * kH;
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1s, 1'234'567), 1'234'000);
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1s, -1), -1'000);
  EXPECT_EQ(KlineNextOpenMs(KlineInterval::k1s, 1'234'000), 1'235'000);
  // 2024-01-01 is day 19723 since the epoch; 3d candles open on days 3k.
  EXPECT_EQ(KlineOpenMs(KlineInterval::k3d, kDay0Ms + 5 * kH), kDay0Ms - kD);
  EXPECT_EQ(KlineNextOpenMs(KlineInterval::k3d, kDay0Ms - kD), kDay0Ms + 2 * kD);
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1w, kDay0Ms), kDay0Ms);
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1w, kDay0Ms + 6 * kD + 23 * kH), kDay0Ms);
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1w, kDay0Ms - 1), kDay0Ms - 7 * kD);
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1w, 0), -3 * kD);  // Thursday 1970-01-01
  // Months: January 2024 has 31 days, February 29.
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1M, kDay0Ms - 1), kDay0Ms - 31 * kD);
  EXPECT_EQ(KlineNextOpenMs(KlineInterval::k1M, kDay0Ms - 31 * kD), kDay0Ms);
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1M, kDay0Ms + 59 * kD + 12 * kH), kDay0Ms + 31 * kD);
  EXPECT_EQ(KlineNextOpenMs(KlineInterval::k1M, kDay0Ms + 31 * kD), kDay0Ms + 60 * kD);
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1M, kDay0Ms + 60 * kD), kDay0Ms + 60 * kD);
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1M, 0), 0);
  // 2100 is not a leap year: 2100-03-01 follows 2100-02-28.
  constexpr int64_t k2100Feb = 4'105'123'200'000;  // 2100-02-01
  EXPECT_EQ(KlineNextOpenMs(KlineInterval::k1M, k2100Feb), k2100Feb + 28 * kD);

  // UTC+8: days start at 16:00 UTC the day before.
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1d, kDay0Ms + 15 * kH, 480), kDay0Ms - 8 * kH);
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1d, kDay0Ms + 16 * kH, 480), kDay0Ms + 16 * kH);
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1h, kDay0Ms + 90 * 60'000, 480), kDay0Ms + kH);
  // 2023-12-31 17:00 UTC is 2024-01-01 01:00 in UTC+8.
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1M, kDay0Ms - 7 * kH, 480), kDay0Ms - 8 * kH);
  EXPECT_EQ(KlineNextOpenMs(KlineInterval::k1M, kDay0Ms - 8 * kH, 480), kDay0Ms + 31 * kD - 8 * kH);
  // UTC-1: Monday 2024-01-01 00:30 UTC is still Sunday 23:30.
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1w, kDay0Ms + 30 * 60'000, -60), kDay0Ms - 7 * kD + kH);
  // UTC+05:45: 00:50 UTC is 06:35 local; that hour opened at 00:15 UTC.
  EXPECT_EQ(KlineOpenMs(KlineInterval::k1h, kDay0Ms + 50 * 60'000, 345), kDay0Ms + 15 * 60'000);

  EXPECT_TRUE(ZoneAligned(KlineInterval::k1h, 480));
  EXPECT_TRUE(ZoneAligned(KlineInterval::k8h, 480));
  EXPECT_FALSE(ZoneAligned(KlineInterval::k1d, 480));
  EXPECT_FALSE(ZoneAligned(KlineInterval::k1h, 345));
  EXPECT_TRUE(ZoneAligned(KlineInterval::k15m, 345));
  EXPECT_TRUE(ZoneAligned(KlineInterval::k1s, 345));
  EXPECT_TRUE(ZoneAligned(KlineInterval::k1w, 0));
  EXPECT_FALSE(ZoneAligned(KlineInterval::k1w, 7 * 24 * 60));
  EXPECT_FALSE(ZoneAligned(KlineInterval::k1M, 60));
  EXPECT_EQ(ZoneSource(KlineInterval::k1d, 480), KlineInterval::k8h);
  EXPECT_EQ(ZoneSource(KlineInterval::k1M, 480), KlineInterval::k8h);
  EXPECT_EQ(ZoneSource(KlineInterval::k1w, 480), KlineInterval::k8h);
  EXPECT_EQ(ZoneSource(KlineInterval::k12h, 480), KlineInterval::k4h);
  EXPECT_EQ(ZoneSource(KlineInterval::k1d, -60), KlineInterval::k1h);
  EXPECT_EQ(ZoneSource(KlineInterval::k2h, -60), KlineInterval::k1h);
  EXPECT_EQ(ZoneSource(KlineInterval::k1h, 345), KlineInterval::k15m);
  EXPECT_EQ(ZoneSource(KlineInterval::k3d, 330), KlineInterval::k30m);
  EXPECT_EQ(ZoneSource(KlineInterval::k3d, 0), KlineInterval::k1d);
}

TEST(KlineTimeTest, TimeZoneParameter) {
  const std::vector<std::pair<std::string_view, int32_t>> good = {
      {"0", 0},       {"8", 480},     {"+08:00", 480},  {"08:00", 480},
      {"-1:00", -60}, {"05:45", 345}, {"-12:00", -720}, {"+14:00", 840},
      {"14", 840},    {"-0", 0},      {"+5:30", 330},   {"-03:30", -210}};
  for (const auto& [text, minutes] : good) {
    const std::optional<int32_t> z = ParseTimeZone(text);
    ASSERT_TRUE(z.has_value()) << text;
    EXPECT_EQ(*z, minutes) << text;
  }
  for (std::string_view bad :
       {"", "+", "-", "15", "-13", "-12:01", "+14:01", "8:5", "8:60", "08:00:00", "abc", "1:000",
        "+-1", "123", " 8", "8 ", "UTC", "+8h", ":30"}) {
    EXPECT_FALSE(ParseTimeZone(bad).has_value()) << bad;
  }
}

// Closed candles are kept in shared chunks: appending never changes what an
// older snapshot holds, and the newest `bound` are kept exactly.
TEST(KlineHistoryTest, BoundedAndShared) {
  std::shared_ptr<const KlineHistory> h;
  std::vector<std::shared_ptr<const KlineHistory>> versions;
  constexpr std::size_t kBound = 150;
  for (int64_t i = 0; i < 400; ++i) {
    Kline k;
    k.open_time_ms = i * 1000;
    h = KlineHistory::Append(h.get(), k, kBound);
    versions.push_back(h);
  }
  ASSERT_EQ(h->size(), kBound);
  for (std::size_t i = 0; i < kBound; ++i) {
    ASSERT_EQ((*h)[i].open_time_ms, static_cast<int64_t>(250 + i) * 1000);
  }
  EXPECT_EQ(h->back().open_time_ms, 399'000);
  EXPECT_EQ(h->LowerBound(300'000), 50u);
  EXPECT_EQ(h->LowerBound(300'001), 51u);
  EXPECT_EQ(h->UpperBound(300'000), 51u);
  EXPECT_EQ(h->LowerBound(0), 0u);
  EXPECT_EQ(h->LowerBound(1'000'000), kBound);
  // An old version still holds what it held.
  const KlineHistory& v99 = *versions[99];
  ASSERT_EQ(v99.size(), 100u);
  for (std::size_t i = 0; i < 100; ++i) {
    ASSERT_EQ(v99[i].open_time_ms, static_cast<int64_t>(i) * 1000);
  }
  const KlineHistory& v200 = *versions[200];
  ASSERT_EQ(v200.size(), kBound);
  EXPECT_EQ(v200[0].open_time_ms, 51'000);
  EXPECT_EQ(v200.back().open_time_ms, 200'000);
}

// 1s, 3d, 1w and 1M candles from trades, and 1d in UTC+8 summed from 8h.
TEST(ReadSideKlineTest, NewIntervalsAndZones) {
  Harness h;
  h.Run({Fund(kDay0, kAlice, kBtc, 10'000'000, "a"), Fund(kDay0, kBob, kUsdt, 100'000'000, "b")});
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1000, 100)});
  constexpr int64_t kH = 3'600 * kSec;
  // Trades at 00:00:01.2, 00:00:01.9, 00:00:03, 15:00, 17:00 (UTC, Monday
  // 2024-01-01) and eight days later.
  for (int64_t at : {kSec + 200 * kMs, kSec + 900 * kMs, 3 * kSec, 15 * kH, 17 * kH, 8 * 24 * kH}) {
    h.Run({Limit(kDay0 + at, kBob, Side::kBuy, 1000, 1)});
  }
  auto snap = h.rs.Snapshot(kBtcUsdt);
  auto opens = [&](KlineInterval iv, int32_t zone) {
    std::vector<std::pair<int64_t, uint32_t>> v;
    for (const Kline& k : snap->Klines(iv, 0, 0, 100, zone))
      v.emplace_back(k.open_time_ms, k.trades);
    return v;
  };
  using V = std::vector<std::pair<int64_t, uint32_t>>;
  constexpr int64_t kHMs = 3'600'000;
  constexpr int64_t kDMs = 24 * kHMs;
  EXPECT_EQ(opens(KlineInterval::k1s, 0), (V{{kDay0Ms + 1000, 2},
                                             {kDay0Ms + 3000, 1},
                                             {kDay0Ms + 15 * kHMs, 1},
                                             {kDay0Ms + 17 * kHMs, 1},
                                             {kDay0Ms + 8 * kDMs, 1}}));
  EXPECT_EQ(opens(KlineInterval::k3d, 0), (V{{kDay0Ms - kDMs, 5}, {kDay0Ms + 8 * kDMs, 1}}));
  EXPECT_EQ(opens(KlineInterval::k1w, 0), (V{{kDay0Ms, 5}, {kDay0Ms + 7 * kDMs, 1}}));
  EXPECT_EQ(opens(KlineInterval::k1M, 0), (V{{kDay0Ms, 6}}));
  // UTC+8: 17:00 UTC is already Tuesday.
  EXPECT_EQ(
      opens(KlineInterval::k1d, 480),
      (V{{kDay0Ms - 8 * kHMs, 4}, {kDay0Ms + 16 * kHMs, 1}, {kDay0Ms + 8 * kDMs - 8 * kHMs, 1}}));
  // startTime / endTime stay UTC and select on the zone's open times.
  EXPECT_EQ(snap->Klines(KlineInterval::k1d, kDay0Ms, kDay0Ms + 7 * kDMs, 100, 480).size(), 1u);
  EXPECT_EQ(snap->Klines(KlineInterval::k1d, kDay0Ms - 8 * kHMs, 0, 1, 480).front().trades, 4u);
  EXPECT_EQ(snap->Klines(KlineInterval::k1d, 0, 0, 1, 480).front().open_time_ms,
            kDay0Ms + 8 * kDMs - 8 * kHMs);
  // The 1s series is bounded like the others.
  EXPECT_LE(snap->klines[static_cast<std::size_t>(KlineInterval::k1s)].closed->size(), 4u);
}

// Binance's aggregate trades: one taker against three makers at one price is
// one aggregate covering the three trades; at two prices, two.
TEST(ReadSideAggTradeTest, OneTakerAtOnePriceIsOneAggregate) {
  Harness h;
  h.Run({Fund(kDay0, kAlice, kBtc, 10'000'000, "a"), Fund(kDay0, kBob, kUsdt, 100'000'000, "b")});
  for (int i = 0; i < 3; ++i) h.Run({Limit(kDay0, kAlice, Side::kSell, 1000, 2)});
  // Copies: every Run reuses the harness's BatchOutput.
  const std::vector<TradeRow> one = h.Run({Limit(kDay0 + kSec, kBob, Side::kBuy, 1000, 6)}).trades;
  ASSERT_EQ(one.size(), 3u);
  const TradeId first = one[0].id;
  for (const TradeRow& t : one) EXPECT_EQ(t.agg_id, first);
  std::vector<AggTrade> agg = Aggregate(one);
  ASSERT_EQ(agg.size(), 1u);
  EXPECT_EQ(agg[0].id, first);
  EXPECT_EQ(agg[0].first, first);
  EXPECT_EQ(agg[0].last, one[2].id);
  EXPECT_EQ(agg[0].qty, Qty{6});
  EXPECT_EQ(agg[0].price, Price{1000});
  EXPECT_FALSE(agg[0].buyer_is_maker);

  // Two prices; and a second taker at the same price in the same batch is
  // an aggregate of its own.
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1000, 1)});
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1010, 1)});
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1010, 3)});
  const std::vector<TradeRow> two = h.Run({Limit(kDay0 + 2 * kSec, kBob, Side::kBuy, 1010, 3),
                                           Limit(kDay0 + 2 * kSec, kBob, Side::kBuy, 1010, 1)})
                                        .trades;
  ASSERT_EQ(two.size(), 4u);
  agg = Aggregate(two);
  ASSERT_EQ(agg.size(), 3u);
  EXPECT_EQ(agg[0].first, agg[0].last);
  EXPECT_EQ(agg[0].price, Price{1000});
  EXPECT_EQ(agg[1].price, Price{1010});
  EXPECT_EQ(agg[1].first, two[1].id);
  EXPECT_EQ(agg[1].last, two[2].id);
  EXPECT_EQ(agg[1].qty, Qty{2});
  EXPECT_EQ(agg[2].first, two[3].id);
  EXPECT_EQ(agg[2].qty, Qty{1});

  // From the snapshot: the same four aggregates, filters as Binance.
  auto snap = h.rs.Snapshot(kBtcUsdt);
  std::vector<AggTrade> all = snap->AggTrades(100, 0, 0, 0);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].id, first);
  EXPECT_EQ(all[0].last, one[2].id);
  EXPECT_EQ(all[2].id, agg[1].id);
  EXPECT_EQ(snap->AggTrades(1, 0, 0, 0).front().id, agg[2].id);  // newest
  // fromId: aggregates with a >= fromId (the one holding it but starting
  // earlier is not one of them).
  std::vector<AggTrade> from = snap->AggTrades(100, Raw(one[1].id), 0, 0);
  ASSERT_EQ(from.size(), 3u);
  EXPECT_EQ(from[0].price, Price{1000});
  EXPECT_EQ(from[0].first, two[0].id);
  EXPECT_EQ(snap->AggTrades(1, Raw(first), 0, 0).front().id, first);  // oldest from a bound
  EXPECT_EQ(snap->AggTrades(100, 0, kDay0Ms + 2000, 0).size(), 3u);
  EXPECT_EQ(snap->AggTrades(100, 0, 0, kDay0Ms + 1999).size(), 1u);
  EXPECT_TRUE(snap->AggTrades(0, 0, 0, 0).empty());
}

// An aggregate whose first trades fell out of the bounded recent trades is
// left out rather than shown with the wrong first trade.
TEST(ReadSideAggTradeTest, PartlyHeldAggregateIsLeftOut) {
  ReadSideOptions o = Unbounded();
  o.recent_trades = 2;
  Harness h(o);
  h.Run({Fund(kDay0, kAlice, kBtc, 10'000'000, "a"), Fund(kDay0, kBob, kUsdt, 100'000'000, "b")});
  for (int i = 0; i < 5; ++i) h.Run({Limit(kDay0, kAlice, Side::kSell, 1000, 1)});
  h.Run({Limit(kDay0 + kSec, kBob, Side::kBuy, 1000, 5)});  // five trades, one aggregate
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1000, 1)});
  const BatchOutput& last = h.Run({Limit(kDay0 + 2 * kSec, kBob, Side::kBuy, 1000, 1)});
  auto snap = h.rs.Snapshot(kBtcUsdt);
  const std::vector<AggTrade> held = snap->AggTrades(100, 0, 0, 0);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].id, last.trades[0].id);
}

// Rolling windows up to 7 days are summed from the 1m candles, which are
// kept for 7 days whatever klines_per_interval says.
TEST(ReadSideWindowTest, RollingWindowsReachSevenDays) {
  ReadSideOptions o = Unbounded();
  o.klines_per_interval = 3;
  Harness h(o);
  h.Run({Fund(kDay0, kAlice, kBtc, 100'000'000, "a"), Fund(kDay0, kBob, kUsdt, 100'000'000, "b")});
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1000, 2000)});
  constexpr int kTrades = 1500;  // in as many minutes: more than a day of candles
  TradeId first{};
  for (int i = 0; i < kTrades; ++i) {
    const BatchOutput& out = h.Run({Limit(kDay0 + i * 5 * 60 * kSec, kBob, Side::kBuy, 1000, 1)});
    ASSERT_EQ(out.trades.size(), 1u);
    if (i == 0) first = out.trades[0].id;
  }
  const int64_t last_ms = kDay0Ms + (kTrades - 1) * 5 * 60'000;
  auto snap = h.rs.Snapshot(kBtcUsdt);
  const Ticker24h week = snap->Rolling(7 * 86'400'000, last_ms);
  EXPECT_EQ(week.trades, static_cast<uint32_t>(kTrades));
  EXPECT_EQ(week.first_trade, first);
  EXPECT_EQ(week.open_time_ms, last_ms - 7 * 86'400'000);
  EXPECT_EQ(week.close_time_ms, last_ms);
  // One every 5 minutes, the window's first minute included.
  EXPECT_EQ(snap->Rolling(86'400'000, last_ms).trades, 289u);
  EXPECT_EQ(snap->Ticker(last_ms).trades, 289u);
  EXPECT_EQ(snap->Rolling(60 * 60'000, last_ms).trades, 13u);
  EXPECT_EQ(snap->Rolling(60'000, last_ms).trades, 1u);
  EXPECT_EQ(snap->Rolling(60'000, last_ms + 120'000).trades, 0u);
  EXPECT_FALSE(snap->Rolling(60'000, last_ms + 120'000).any_trade);
}

// The trading day in a zone: from its local midnight; the close time is the
// day's end.
TEST(ReadSideWindowTest, TradingDayInAZone) {
  Harness h;
  h.Run({Fund(kDay0, kAlice, kBtc, 10'000'000, "a"), Fund(kDay0, kBob, kUsdt, 100'000'000, "b")});
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1000, 10)});
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1010, 10)});
  constexpr int64_t kH = 3'600 * kSec;
  h.Run({Limit(kDay0 + 10 * kSec, kBob, Side::kBuy, 1000, 1)});
  h.Run({Limit(kDay0 + 15 * kH, kBob, Side::kBuy, 1000, 2)});
  h.Run({Limit(kDay0 + 17 * kH, kBob, Side::kBuy, 1010, 12)});  // 7 @ 1000, 5 @ 1010
  constexpr int64_t kHMs = 3'600'000;
  const int64_t now = kDay0Ms + 18 * kHMs;
  auto snap = h.rs.Snapshot(kBtcUsdt);
  const Ticker24h utc = snap->TradingDay(0, now);
  EXPECT_EQ(utc.open_time_ms, kDay0Ms);
  EXPECT_EQ(utc.close_time_ms, kDay0Ms + 24 * kHMs - 1);
  EXPECT_EQ(utc.trades, 4u);
  EXPECT_EQ(utc.open, Price{1000});
  EXPECT_EQ(utc.last, Price{1010});
  EXPECT_EQ(utc.high, Price{1010});
  EXPECT_EQ(utc.last_qty, Qty{5});
  const Ticker24h east = snap->TradingDay(480, now);  // Tuesday from 16:00 UTC
  EXPECT_EQ(east.open_time_ms, kDay0Ms + 16 * kHMs);
  EXPECT_EQ(east.close_time_ms, kDay0Ms + 40 * kHMs - 1);
  EXPECT_EQ(east.trades, 2u);
  EXPECT_EQ(east.open, Price{1000});
  const Ticker24h later = snap->TradingDay(480, now + 24 * kHMs);
  EXPECT_FALSE(later.any_trade);
  EXPECT_EQ(later.trades, 0u);
}

// Binance's average price: quote over base volume of the last 5 minutes'
// candles; the last price when nothing traded in them.
TEST(ReadSideWindowTest, AveragePriceOfTheLastFiveMinutes) {
  Harness h;
  h.Run({Fund(kDay0, kAlice, kBtc, 10'000'000, "a"), Fund(kDay0, kBob, kUsdt, 100'000'000, "b")});
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1000, 1)});
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1010, 1)});
  h.Run({Limit(kDay0, kAlice, Side::kSell, 1020, 2)});
  EXPECT_FALSE(h.rs.Snapshot(kBtcUsdt)->AveragePrice(kDay0Ms).any_trade);
  constexpr int64_t kM = 60 * kSec;
  const BatchOutput& a = h.Run({Limit(kDay0 + 50 * kM + 30 * kSec, kBob, Side::kBuy, 1000, 1)});
  const Amount old_quote = a.trades[0].notional;
  const BatchOutput& b = h.Run({Limit(kDay0 + 57 * kM + 30 * kSec, kBob, Side::kBuy, 1010, 1)});
  const Amount b_quote = b.trades[0].notional;
  const Amount b_base = b.trades[0].base_qty;
  const BatchOutput& c = h.Run({Limit(kDay0 + 59 * kM + 30 * kSec, kBob, Side::kBuy, 1020, 2)});
  const Amount c_quote = c.trades[0].notional;
  const Amount c_base = c.trades[0].base_qty;
  const int64_t now = kDay0Ms + 60 * 60'000 + 30'000;
  auto snap = h.rs.Snapshot(kBtcUsdt);
  const MarketSnapshot::AvgPrice avg = snap->AveragePrice(now);
  EXPECT_TRUE(avg.any_trade);
  EXPECT_EQ(avg.base_volume, b_base + c_base);
  EXPECT_EQ(avg.quote_volume, b_quote + c_quote);
  EXPECT_NE(avg.quote_volume, b_quote + c_quote + old_quote);
  EXPECT_EQ(avg.last, Price{1020});
  EXPECT_EQ(avg.last_trade_ms, kDay0Ms + 59 * 60'000 + 30'000);
  const MarketSnapshot::AvgPrice quiet = snap->AveragePrice(now + 3'600'000);
  EXPECT_EQ(quiet.base_volume, Amount{0});
  EXPECT_EQ(quiet.last, Price{1020});
}

}  // namespace
}  // namespace mb::marketdata
