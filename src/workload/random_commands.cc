#include "workload/random_commands.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/fixed_string.h"
#include "common/status.h"

namespace mb::workload {

using engine::CancelAll;
using engine::CancelOrder;
using engine::Command;
using engine::Deposit;
using engine::EngineConfig;
using engine::ListOrder;
using engine::ListType;
using engine::MarketStatus;
using engine::OrderType;
using engine::OrderView;
using engine::PlaceOrder;
using engine::Side;
using engine::StpMode;
using engine::TimeInForce;
using engine::Withdraw;
using mixed::kAssets;
using mixed::kBtc;
using mixed::kBtcUsdt;
using mixed::kEth;
using mixed::kFee;
using mixed::kMarkets;
using mixed::kMaxAccounts;
using mixed::kMs;
using mixed::kTraders;
using mixed::kUsdt;

EngineConfig MixedConfig() {
  EngineConfig c;
  c.assets = {{"USDT", 6}, {"BTC", 8}, {"ETH", 8}};
  engine::MarketSpec btc;
  btc.symbol = "BTCUSDT";
  btc.base = kBtc;
  btc.quote = kUsdt;
  btc.tick_units = 10'000;  // 0.01 USDT
  btc.lot_units = 10'000;   // 0.0001 BTC
  btc.min_qty = Qty{1};
  btc.max_qty = Qty{10'000};
  btc.max_price = Price{10'000'000};
  btc.min_notional = Amount{100};
  btc.maker_fee_bps = 10;
  btc.taker_fee_bps = 20;
  engine::MarketSpec eth;
  eth.symbol = "ETHUSDT";
  eth.base = kEth;
  eth.quote = kUsdt;
  eth.tick_units = 10'000;    // 0.01 USDT
  eth.lot_units = 1'000'000;  // 0.01 ETH
  eth.min_qty = Qty{1};
  eth.max_qty = Qty{10'000};
  eth.max_price = Price{10'000'000};
  eth.min_notional = Amount{10'000};
  eth.maker_fee_bps = 7;
  eth.taker_fee_bps = 15;
  c.markets = {btc, eth};
  c.max_accounts = kMaxAccounts;
  c.fee_account = kFee;
  c.expected_open_orders = 256;
  c.client_id_memory = 64;
  const Status s = c.Validate();
  if (!s.ok()) {
    std::fprintf(stderr, "MixedConfig: invalid configuration: %s\n", s.message().c_str());
    std::abort();
  }
  return c;
}

// ---- single commands ------------------------------------------------------------

Command Place(int64_t ts, AccountId a, MarketId m, Side side, OrderType type, TimeInForce tif,
              int64_t price, int64_t qty, std::string_view cid, StpMode stp, int64_t quote_qty) {
  PlaceOrder p;
  p.account = a;
  p.market = m;
  p.side = side;
  p.type = type;
  p.tif = tif;
  p.stp = stp;
  p.price = Price{price};
  p.qty = Qty{qty};
  p.quote_qty = Amount{quote_qty};
  p.client_order_id = ClientOrderId::From(cid);
  return Command{ts, p};
}

Command Cancel(int64_t ts, AccountId a, MarketId m, OrderId id, std::string_view cid) {
  return Command{ts, CancelOrder{a, m, id, ClientOrderId::From(cid), {}}};
}

Command Amend(int64_t ts, AccountId a, MarketId m, OrderId id, int64_t price, int64_t qty) {
  engine::AmendOrder x;
  x.account = a;
  x.market = m;
  x.order_id = id;
  x.new_price = Price{price};
  x.new_qty = Qty{qty};
  return Command{ts, x};
}

Command Fund(int64_t ts, AccountId a, AssetId asset, int64_t amount, std::string_view ref) {
  return Command{ts, Deposit{a, asset, Amount{amount}, TransferRef::From(ref)}};
}

Command Take(int64_t ts, AccountId a, AssetId asset, int64_t amount, std::string_view ref) {
  return Command{ts, Withdraw{a, asset, Amount{amount}, TransferRef::From(ref)}};
}

// ---- the stream -----------------------------------------------------------------

MixedCommands::MixedCommands(uint64_t seed, const engine::Engine* engine, MixedOptions options)
    : rng_(seed), engine_(engine), options_(options) {}

std::vector<Command> MixedCommands::Funding() {
  std::vector<Command> v;
  for (uint32_t a = 1; a <= kTraders; ++a) {
    v.push_back(Fund(Tick(), AccountId{a}, kUsdt, 50'000'000, "f-usdt-" + std::to_string(a)));
    v.push_back(Fund(Tick(), AccountId{a}, kBtc, 3'000'000, "f-btc-" + std::to_string(a)));
    v.push_back(Fund(Tick(), AccountId{a}, kEth, 300'000'000, "f-eth-" + std::to_string(a)));
  }
  return v;
}

Command MixedCommands::Next() {
  const int64_t ts = Tick();
  AccountId a{static_cast<uint32_t>(1 + rng_.Below(kTraders))};
  if (rng_.Percent(2)) a = rng_.Percent(50) ? kFee : AccountId{kMaxAccounts};  // refused
  const MarketId m{static_cast<uint16_t>(rng_.Below(kMarkets))};
  const int64_t center = m == kBtcUsdt ? 1000 : 2000;
  // A halted or cancel-only market trades again after ~10 commands.
  if (engine_->market_status(m) != MarketStatus::kTrading && rng_.Percent(10)) {
    return Command{ts, engine::SetMarketStatus{m, MarketStatus::kTrading}};
  }
  // Drawn only with lists, so that the stream without them is unchanged.
  if (options_.order_lists && rng_.Percent(8)) return OrderList(ts, a, m, center);
  const uint64_t r = rng_.Below(1000);
  if (r < 450) return PlaceLimit(ts, a, m, center);
  if (r < 530) {
    const Side side = rng_.Percent(50) ? Side::kBuy : Side::kSell;
    if (rng_.Percent(50)) {
      return Place(ts, a, m, side, OrderType::kMarket, TimeInForce::kIoc, 0, rng_.Between(1, 40),
                   Cid(a), Stp());
    }
    const int64_t max_quote = m == kBtcUsdt ? 60'000 : 6'000'000;
    return Place(ts, a, m, side, OrderType::kMarket, TimeInForce::kIoc, 0, 0, Cid(a), Stp(),
                 rng_.Between(m == kBtcUsdt ? 100 : 10'000, max_quote));
  }
  if (r < 710) {
    // Cancels and amends target open orders; without one, most become
    // placements and a few go to an unknown id.
    std::vector<OrderView> open = OpenOf(a, m);
    if (open.empty() && !rng_.Percent(10)) return PlaceLimit(ts, a, m, center);
    if (r >= 680) return Command{ts, CancelAll{a, m}};
    const auto& cids = cids_[Raw(a) % kMaxAccounts];
    if (!cids.empty() && rng_.Percent(15)) {
      return Cancel(ts, a, m, OrderId{0}, cids[rng_.Below(cids.size())]);
    }
    if (open.empty()) return Cancel(ts, a, m, OrderId{rng_.Below(100'000) + 1});
    return Cancel(ts, a, m, open[rng_.Below(open.size())].id);
  }
  if (r < 880) {
    std::vector<OrderView> open = OpenOf(a, m);
    if (open.empty() && !rng_.Percent(10)) return PlaceLimit(ts, a, m, center);
    if (open.empty()) return Amend(ts, a, m, OrderId{rng_.Below(100'000) + 1}, center, 5);
    const OrderView& o = open[rng_.Below(open.size())];
    int64_t price = 0;
    int64_t qty = 0;
    if (rng_.Percent(60)) price = std::max<int64_t>(1, o.terms.price.value + rng_.Between(-8, 8));
    if (rng_.Percent(60)) qty = rng_.Between(1, 40);
    return Amend(ts, a, m, o.id, price, qty);
  }
  const AssetId asset{static_cast<uint16_t>(rng_.Below(kAssets))};
  const int64_t max_amount = asset == kUsdt ? 20'000'000 : asset == kBtc ? 1'000'000 : 100'000'000;
  if (r < 940) {
    // A few references repeat: duplicate transfers are refused.
    const uint64_t ref = rng_.Percent(5) && next_ref_ > 0 ? rng_.Below(next_ref_) : next_ref_++;
    return Fund(ts, a, asset, rng_.Between(1, max_amount), "d" + std::to_string(ref));
  }
  if (r < 995) {
    return Take(ts, a, asset, rng_.Between(1, max_amount), "w" + std::to_string(next_ref_++));
  }
  return Command{ts, engine::SetMarketStatus{
                         m, rng_.Percent(50) ? MarketStatus::kHalted : MarketStatus::kCancelOnly}};
}

std::size_t MixedCommands::BatchSize() { return 1 + rng_.Below(8); }

Command MixedCommands::PlaceLimit(int64_t ts, AccountId a, MarketId m, int64_t center) {
  const Side side = rng_.Percent(50) ? Side::kBuy : Side::kSell;
  const int64_t off = rng_.Between(-5, 20);
  const int64_t price = side == Side::kBuy ? center - off : center + off;
  OrderType type = OrderType::kLimit;
  TimeInForce tif = TimeInForce::kGtc;
  if (rng_.Percent(10)) {
    type = OrderType::kLimitMaker;
  } else if (const uint64_t t = rng_.Below(100); t >= 70) {
    tif = t < 90 ? TimeInForce::kIoc : TimeInForce::kFok;
  }
  return Place(ts, a, m, side, type, tif, price, rng_.Between(1, 30), Cid(a), Stp());
}

// A list placed near the book (most are accepted; some cross, trigger at
// once or repeat a client id and are refused), or a cancel of one placed
// before (by id or by list client id; some are over already).
Command MixedCommands::OrderList(int64_t ts, AccountId a, MarketId m, int64_t center) {
  std::vector<PlacedList>& placed = lists_[Raw(a) % kMaxAccounts];
  if (!placed.empty() && rng_.Percent(25)) {
    const PlacedList& l = placed[rng_.Below(placed.size())];
    engine::CancelOrderList c;
    c.account = a;
    c.market = l.market;
    if (!l.client_id.empty() && rng_.Percent(30)) {
      c.list_client_order_id = ClientOrderId::From(l.client_id);
    } else {
      c.list_id = l.id;
    }
    return Command{ts, c};
  }
  const int64_t bid = engine_->BestBid(m).value_or(Price{center - 1}).value;
  const int64_t ask = engine_->BestAsk(m).value_or(Price{center + 1}).value;
  engine::PlaceOrderList l;
  l.account = a;
  l.market = m;
  l.stp = Stp();
  const ListType type = static_cast<ListType>(rng_.Below(3));
  l.type = type;
  std::string list_cid;
  if (rng_.Percent(60)) list_cid = "l" + std::to_string(next_cid_++);
  l.list_client_order_id = ClientOrderId::From(list_cid);
  const int64_t qty = rng_.Between(1, 20);
  const Side side = rng_.Percent(50) ? Side::kBuy : Side::kSell;
  if (type == ListType::kOco) {
    OcoPair(side, std::min(bid, ask), std::max(bid, ask), qty, a, &l.orders[0], &l.orders[1]);
  } else {
    // The working order: a limit near the touch (some cross and fill at once,
    // placing the pending orders in the same command), a few icebergs.
    ListOrder& w = l.orders[0];
    w.side = side;
    w.type = rng_.Percent(20) ? OrderType::kLimitMaker : OrderType::kLimit;
    w.tif = TimeInForce::kGtc;
    w.qty = Qty{qty};
    const int64_t off = rng_.Between(-3, 12);
    const int64_t wp = std::max<int64_t>(1, side == Side::kBuy ? bid - off : ask + off);
    w.price = Price{wp};
    if (qty > 2 && rng_.Percent(15)) w.iceberg_qty = Qty{rng_.Between(1, qty - 1)};
    w.client_order_id = ClientOrderId::From(Cid(a));
    // The pending order(s): the other side, a take-profit around the working
    // price (an OTOCO's pair brackets it).
    const Side exit = engine::Opposite(side);
    const int64_t pqty = rng_.Between(1, qty);
    if (type == ListType::kOto) {
      ListOrder& p = l.orders[1];
      p.side = exit;
      p.qty = Qty{pqty};
      const uint64_t kind = rng_.Below(100);
      const int64_t away = rng_.Between(1, 15);
      const int64_t target = std::max<int64_t>(1, exit == Side::kSell ? wp + away : wp - away);
      if (kind < 50) {
        p.type = OrderType::kLimit;
        p.tif = TimeInForce::kGtc;
        p.price = Price{target};
        if (pqty > 2 && rng_.Percent(20)) p.iceberg_qty = Qty{rng_.Between(1, pqty - 1)};
      } else if (kind < 65) {
        p.type = OrderType::kMarket;
        p.tif = TimeInForce::kIoc;
      } else {
        // A stop-loss limit behind the working price, some trailing.
        p.type = OrderType::kStopLossLimit;
        p.tif = TimeInForce::kGtc;
        const int64_t stop = std::max<int64_t>(1, exit == Side::kSell ? wp - away : wp + away);
        p.stop_price = Price{stop};
        p.price = Price{std::max<int64_t>(1, exit == Side::kSell ? stop - 2 : stop + 2)};
        if (rng_.Percent(30)) p.trailing_delta = static_cast<int32_t>(rng_.Between(10, 300));
      }
      p.client_order_id = ClientOrderId::From(Cid(a));
    } else {
      OcoPair(exit, wp, wp, pqty, a, &l.orders[1], &l.orders[2]);
    }
  }
  // Its id, if the engine takes it: the sequence of the command drawn now.
  placed.push_back(PlacedList{m, Raw(engine_->last_sequence()) + 1, list_cid});
  return Command{ts, l};
}

void MixedCommands::OcoPair(Side side, int64_t low, int64_t high, int64_t qty, AccountId a,
                            ListOrder* above, ListOrder* below) {
  // SELL: a limit maker (or a take-profit limit) above, a stop-loss (limit)
  // below; BUY: a stop-loss (limit) above, a limit maker (or take-profit
  // limit) below.
  const int64_t up = high + rng_.Between(1, 15);
  const int64_t down = std::max<int64_t>(2, low - rng_.Between(1, 15));
  ListOrder* maker = side == Side::kSell ? above : below;
  ListOrder* stop = side == Side::kSell ? below : above;
  const int64_t maker_at = side == Side::kSell ? up : down;
  const int64_t stop_at = side == Side::kSell ? down : up;
  for (ListOrder* o : {above, below}) {
    o->side = side;
    o->qty = Qty{qty};
    o->tif = TimeInForce::kGtc;
  }
  if (rng_.Percent(75)) {
    maker->type = OrderType::kLimitMaker;
    maker->price = Price{maker_at};
    if (qty > 2 && rng_.Percent(15)) maker->iceberg_qty = Qty{rng_.Between(1, qty - 1)};
  } else {
    maker->type = OrderType::kTakeProfitLimit;
    maker->stop_price = Price{maker_at};
    maker->price = Price{maker_at};
  }
  if (rng_.Percent(70)) {
    stop->type = OrderType::kStopLossLimit;
    stop->price = Price{std::max<int64_t>(1, side == Side::kSell ? stop_at - 2 : stop_at + 2)};
  } else {
    stop->type = OrderType::kStopLoss;
    stop->tif = TimeInForce::kIoc;
  }
  stop->stop_price = Price{stop_at};
  if (rng_.Percent(20)) stop->trailing_delta = static_cast<int32_t>(rng_.Between(10, 300));
  above->client_order_id = ClientOrderId::From(Cid(a));
  below->client_order_id = ClientOrderId::From(Cid(a));
}

// Time moves 0..20 s per command: candles of every interval close.
int64_t MixedCommands::Tick() {
  ts_ += rng_.Between(0, 20'000) * kMs + rng_.Between(0, 999'999);
  return ts_;
}

StpMode MixedCommands::Stp() {
  return rng_.Percent(70) ? StpMode::kNone : static_cast<StpMode>(1 + rng_.Below(3));
}

std::string MixedCommands::Cid(AccountId a) {
  std::vector<std::string>& cids = cids_[Raw(a) % kMaxAccounts];
  if (!cids.empty() && rng_.Percent(3)) return cids[rng_.Below(cids.size())];
  if (!rng_.Percent(40)) return {};
  cids.push_back("c" + std::to_string(next_cid_++));
  return cids.back();
}

std::vector<OrderView> MixedCommands::OpenOf(AccountId a, MarketId m) const {
  std::vector<OrderView> v;
  for (Side s : {Side::kBuy, Side::kSell}) {
    for (const OrderView& o : engine_->Orders(m, s)) {
      if (o.terms.account == a) v.push_back(o);
    }
  }
  return v;
}

}  // namespace mb::workload
