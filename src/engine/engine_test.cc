// Unit tests of the matching engine, written from the rules in docs/engine.md:
// every test drives Engine::Process with commands and asserts the exact events
// and the resulting balances. The fixture checks after every test that the
// engine's invariants hold, that replaying the emitted events through Apply()
// rebuilds the same state, and that an exported image restores to it.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/fixed_string.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/command.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/market.h"
#include "engine/types.h"

// Readable gtest output for the strong types and the engine's enums.
namespace mb {
template <class Tag>
void PrintTo(const Fixed<Tag>& v, std::ostream* os) {
  *os << v.value;
}
inline void PrintTo(OrderId v, std::ostream* os) { *os << "order#" << Raw(v); }
inline void PrintTo(TradeId v, std::ostream* os) { *os << "trade#" << Raw(v); }
inline void PrintTo(TransferId v, std::ostream* os) { *os << "transfer#" << Raw(v); }
inline void PrintTo(Sequence v, std::ostream* os) { *os << "seq#" << Raw(v); }
inline void PrintTo(AccountId v, std::ostream* os) { *os << "account#" << Raw(v); }
inline void PrintTo(MarketId v, std::ostream* os) { *os << "market#" << Raw(v); }
inline void PrintTo(AssetId v, std::ostream* os) { *os << "asset#" << Raw(v); }
namespace engine {
inline void PrintTo(Side v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(OrderType v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(TimeInForce v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(StpMode v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(MarketStatus v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(CommandType v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(RejectReason v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(ExpireReason v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(EventType v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(const Balance& b, std::ostream* os) {
  *os << "{available " << b.available.value << ", locked " << b.locked.value << "}";
}
}  // namespace engine
}  // namespace mb

namespace mb::engine {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

constexpr AssetId kBtc{0};
constexpr AssetId kUsdt{1};
constexpr AssetId kEth{2};
constexpr AssetId kNoAsset{3};

// npt 10: a price of p ticks and q lots costs 10·p·q USDT units.
constexpr MarketId kBtcUsdt{0};
// npt 1, lot 100 ETH units (fractional base fees), min_qty 5, no min notional.
constexpr MarketId kEthUsdt{1};
// npt 1, lot 1: max_price × max_qty × npt is just below 2^63.
constexpr MarketId kEthBtc{2};
constexpr MarketId kNoMarket{3};

constexpr int64_t kBigMax = 3'037'000'499;  // kBigMax² < 2^63 - 1 < (kBigMax + 1)²

constexpr AccountId kFee{0};
constexpr AccountId kAlice{1};
constexpr AccountId kBob{2};
constexpr AccountId kCarol{3};
constexpr AccountId kNoAccount{16};  // == max_accounts

// What Fund() deposits: 100 lots of BTC, 0.01 USDT, 1000 ETHUSDT lots of ETH.
constexpr int64_t kFundBtc = 100'000;
constexpr int64_t kFundUsdt = 1'000'000;
constexpr int64_t kFundEth = 100'000;

EngineConfig MakeConfig() {
  EngineConfig c;
  c.assets = {{"BTC", 8}, {"USDT", 8}, {"ETH", 8}};

  MarketSpec btcusdt;
  btcusdt.symbol = "BTCUSDT";
  btcusdt.base = kBtc;
  btcusdt.quote = kUsdt;
  btcusdt.tick_units = 1'000'000;  // 0.01 USDT
  btcusdt.lot_units = 1'000;       // 0.00001 BTC
  btcusdt.min_qty = Qty{1};
  btcusdt.max_qty = Qty{100'000};
  btcusdt.max_price = Price{10'000'000};
  btcusdt.min_notional = Amount{1'000};  // 100 ticks × 1 lot
  btcusdt.maker_fee_bps = 10;
  btcusdt.taker_fee_bps = 20;

  MarketSpec ethusdt;
  ethusdt.symbol = "ETHUSDT";
  ethusdt.base = kEth;
  ethusdt.quote = kUsdt;
  ethusdt.tick_units = 1'000'000;  // 0.01 USDT
  ethusdt.lot_units = 100;         // 0.000001 ETH
  ethusdt.min_qty = Qty{5};
  ethusdt.max_qty = Qty{1'000'000};
  ethusdt.max_price = Price{10'000'000};
  ethusdt.min_notional = Amount{0};
  ethusdt.maker_fee_bps = 10;
  ethusdt.taker_fee_bps = 20;

  MarketSpec ethbtc;
  ethbtc.symbol = "ETHBTC";
  ethbtc.base = kEth;
  ethbtc.quote = kBtc;
  ethbtc.tick_units = 100'000'000;
  ethbtc.lot_units = 1;
  ethbtc.min_qty = Qty{1};
  ethbtc.max_qty = Qty{kBigMax};
  ethbtc.max_price = Price{kBigMax};
  ethbtc.min_notional = Amount{0};
  ethbtc.maker_fee_bps = 10;
  ethbtc.taker_fee_bps = 20;

  c.markets = {btcusdt, ethusdt, ethbtc};
  c.max_accounts = 16;
  c.fee_account = kFee;
  c.expected_open_orders = 64;
  c.client_id_memory = 2;
  Status s = c.Validate();
  EXPECT_TRUE(s.ok()) << s.message();
  return c;
}

using Events = std::vector<Event>;

std::string Types(const Events& events) {
  std::string s;
  for (const Event& e : events) {
    if (!s.empty()) s += ' ';
    s += ToString(e.type());
  }
  return s;
}

// The i-th event, which must be a T.
template <class T>
T At(const Events& events, std::size_t i) {
  if (i >= events.size()) {
    ADD_FAILURE() << "no event " << i << " in [" << Types(events) << "]";
    return T{};
  }
  const T* p = std::get_if<T>(&events[i].body);
  if (p == nullptr) {
    ADD_FAILURE() << "event " << i << " is " << ToString(events[i].type()) << " in ["
                  << Types(events) << "]";
    return T{};
  }
  return *p;
}

// Every event of type T, in order.
template <class T>
std::vector<T> All(const Events& events) {
  std::vector<T> out;
  for (const Event& e : events) {
    if (const T* p = std::get_if<T>(&e.body)) out.push_back(*p);
  }
  return out;
}

// The only event of type T.
template <class T>
T One(const Events& events) {
  std::vector<T> all = All<T>(events);
  if (all.size() != 1) {
    ADD_FAILURE() << all.size() << " events of the type in [" << Types(events) << "]";
    return T{};
  }
  return all[0];
}

// Everything an image holds except the sequence: two states that differ only
// by rejected commands dump identically.
std::string Dump(const EngineImage& im) {
  std::ostringstream os;
  os << "next_trade " << Raw(im.next_trade_id) << '\n';
  for (MarketStatus s : im.market_status) os << "status " << ToString(s) << '\n';
  for (const ImageAssetTotals& t : im.asset_totals) {
    os << "supply " << t.supply.value << '\n';
  }
  for (const ImageBalance& b : im.balances) {
    os << "balance " << Raw(b.account) << ' ' << Raw(b.asset) << ' ' << b.available.value << ' '
       << b.locked.value << '\n';
  }
  for (const ImageOrder& o : im.orders) {
    os << "order " << Raw(o.id) << ' ' << Raw(o.account) << ' ' << Raw(o.market) << ' '
       << ToString(o.side) << ' ' << ToString(o.type) << ' ' << ToString(o.tif) << ' '
       << ToString(o.stp) << ' ' << o.price.value << ' ' << o.qty.value << ' ' << o.remaining.value
       << ' ' << o.locked.value << ' ' << o.created_ns << ' ' << o.has_client_id << ' '
       << o.client_id.lo << ' ' << o.client_id.hi << '\n';
  }
  for (const ImageClientId& c : im.recent_client_ids) {
    os << "client_id " << Raw(c.account) << ' ' << c.client_id.lo << ' ' << c.client_id.hi << ' '
       << Raw(c.order_id) << '\n';
  }
  for (const ImageTransfer& t : im.transfers) {
    os << "transfer " << t.ref.lo << ' ' << t.ref.hi << ' ' << Raw(t.id) << '\n';
  }
  return os.str();
}

class EngineTest : public ::testing::Test {
 protected:
  EngineTest() : config_(MakeConfig()), engine_(config_) {}

  void TearDown() override {
    Status inv = engine_.CheckInvariants();
    EXPECT_TRUE(inv.ok()) << inv.message();
    // Evolve alone rebuilds the state that decide built.
    Engine replayed(config_);
    for (const Event& e : journal_) replayed.Apply(e);
    EXPECT_EQ(replayed.StateHash(), engine_.StateHash()) << "replaying the events";
    EXPECT_EQ(Dump(replayed.ExportImage()), Dump(engine_.ExportImage()));
    // And an image restores to the same state.
    Engine restored(config_);
    Status s = restored.Restore(engine_.ExportImage());
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(restored.StateHash(), engine_.StateHash()) << "restoring the image";
  }

  // Processes one command; checks that it consumed exactly one sequence and
  // that each event carries that sequence and the command's timestamp.
  Events Run(const CommandBody& body) {
    const uint64_t seq = Raw(engine_.last_sequence()) + 1;
    Command cmd{ts_, body};
    ts_ += 1'000;
    Events out;
    engine_.Process(cmd, &out);
    EXPECT_EQ(Raw(engine_.last_sequence()), seq);
    EXPECT_FALSE(out.empty());
    for (const Event& e : out) {
      EXPECT_EQ(Raw(e.seq), seq);
      EXPECT_EQ(e.timestamp_ns, cmd.timestamp_ns);
    }
    journal_.insert(journal_.end(), out.begin(), out.end());
    return out;
  }

  // Runs a command that must be rejected with `reason`, and checks that it
  // changed nothing but the sequence. Returns the reject for field checks.
  Rejected ExpectReject(const CommandBody& body, RejectReason reason) {
    const std::string before = Dump(engine_.ExportImage());
    const uint64_t hash_before = engine_.StateHash();
    const std::size_t open_before = engine_.open_orders();
    Events ev = Run(body);
    EXPECT_EQ(Types(ev), "Rejected");
    Rejected r = At<Rejected>(ev, 0);
    EXPECT_EQ(r.reason, reason);
    EXPECT_EQ(r.command, static_cast<CommandType>(body.index()));
    EXPECT_EQ(Dump(engine_.ExportImage()), before) << "a rejected command changed the state";
    EXPECT_NE(engine_.StateHash(), hash_before) << "the sequence is part of the state hash";
    EXPECT_EQ(engine_.open_orders(), open_before);
    if (reason != RejectReason::kDuplicateClientOrderId &&
        reason != RejectReason::kDuplicateTransfer) {
      EXPECT_EQ(r.existing_id, 0u);
    }
    return r;
  }

  // --- commands ---
  static PlaceOrder Limit(AccountId account, Side side, int64_t price, int64_t qty,
                          TimeInForce tif = TimeInForce::kGtc, MarketId market = kBtcUsdt) {
    PlaceOrder p;
    p.account = account;
    p.market = market;
    p.side = side;
    p.type = OrderType::kLimit;
    p.tif = tif;
    p.price = Price{price};
    p.qty = Qty{qty};
    return p;
  }
  static PlaceOrder Maker(AccountId account, Side side, int64_t price, int64_t qty) {
    PlaceOrder p = Limit(account, side, price, qty);
    p.type = OrderType::kLimitMaker;
    return p;
  }
  static PlaceOrder MarketQty(AccountId account, Side side, int64_t qty,
                              MarketId market = kBtcUsdt) {
    PlaceOrder p;
    p.account = account;
    p.market = market;
    p.side = side;
    p.type = OrderType::kMarket;
    p.tif = TimeInForce::kIoc;
    p.qty = Qty{qty};
    return p;
  }
  static PlaceOrder MarketQuote(AccountId account, Side side, int64_t quote_qty,
                                MarketId market = kBtcUsdt) {
    PlaceOrder p = MarketQty(account, side, 0, market);
    p.quote_qty = Amount{quote_qty};
    return p;
  }
  static PlaceOrder WithClientId(PlaceOrder p, std::string_view id) {
    p.client_order_id = ClientOrderId::From(id);
    return p;
  }
  static PlaceOrder WithStp(PlaceOrder p, StpMode stp) {
    p.stp = stp;
    return p;
  }
  static CancelOrder CancelCmd(AccountId account, OrderId id, MarketId market = kBtcUsdt) {
    return CancelOrder{account, market, id, {}};
  }
  static CancelOrder CancelByClientCmd(AccountId account, std::string_view client_id,
                                       MarketId market = kBtcUsdt) {
    return CancelOrder{account, market, OrderId{0}, ClientOrderId::From(client_id)};
  }
  static AmendOrder AmendCmd(AccountId account, OrderId id, int64_t new_price, int64_t new_qty,
                             MarketId market = kBtcUsdt) {
    return AmendOrder{account, market, id, {}, Price{new_price}, Qty{new_qty}};
  }
  static Deposit DepositCmd(AccountId account, AssetId asset, int64_t amount,
                            std::string_view ref) {
    return Deposit{account, asset, Amount{amount}, TransferRef::From(ref)};
  }
  static Withdraw WithdrawCmd(AccountId account, AssetId asset, int64_t amount,
                              std::string_view ref) {
    return Withdraw{account, asset, Amount{amount}, TransferRef::From(ref)};
  }

  Events Place(const PlaceOrder& p) { return Run(p); }
  Events Cancel(AccountId account, OrderId id, MarketId market = kBtcUsdt) {
    return Run(CancelCmd(account, id, market));
  }
  Events Amend(AccountId account, OrderId id, int64_t new_price, int64_t new_qty,
               MarketId market = kBtcUsdt) {
    return Run(AmendCmd(account, id, new_price, new_qty, market));
  }
  Events SetStatus(MarketId market, MarketStatus status) {
    return Run(SetMarketStatus{market, status});
  }
  void Credit(AccountId account, AssetId asset, int64_t amount) {
    Events ev = Run(DepositCmd(account, asset, amount, "auto-" + std::to_string(next_ref_++)));
    EXPECT_EQ(Types(ev), "Deposited");
  }
  void Fund(AccountId account) {
    Credit(account, kBtc, kFundBtc);
    Credit(account, kUsdt, kFundUsdt);
    Credit(account, kEth, kFundEth);
  }

  // Places an order that must rest whole; returns its id (== its sequence).
  OrderId Rest(const PlaceOrder& p) {
    Events ev = Place(p);
    EXPECT_EQ(Types(ev), "OrderAccepted OrderRested");
    const OrderAccepted a = At<OrderAccepted>(ev, 0);
    EXPECT_EQ(Raw(a.order_id), Raw(engine_.last_sequence()));
    const OrderRested r = At<OrderRested>(ev, 1);
    EXPECT_EQ(r.order_id, a.order_id);
    EXPECT_EQ(r.account, p.account);
    EXPECT_EQ(r.market, p.market);
    EXPECT_EQ(r.side, p.side);
    EXPECT_EQ(r.remaining, p.qty);
    EXPECT_EQ(r.released, Amount{0});  // nothing filled, nothing saved
    EXPECT_EQ(a.locked, r.side == Side::kBuy
                            ? Amount{p.price.value * p.qty.value *
                                     config_.markets[Raw(p.market)].notional_per_tick_lot}
                            : Amount{p.qty.value * config_.markets[Raw(p.market)].lot_units});
    return a.order_id;
  }
  OrderId Rest(AccountId account, Side side, int64_t price, int64_t qty,
               MarketId market = kBtcUsdt) {
    return Rest(Limit(account, side, price, qty, TimeInForce::kGtc, market));
  }

  // Places a FOK that cannot fill completely: it is accepted, then expires at
  // once releasing its whole lock. Nothing trades and nothing else changes but
  // the sequence (and, for an order with a client order id, the reservation of
  // that id). Returns the expiry for field checks.
  OrderExpired ExpectFokExpires(const PlaceOrder& p) {
    const std::string before = Dump(engine_.ExportImage());
    const std::size_t open_before = engine_.open_orders();
    Events ev = Place(p);
    EXPECT_EQ(Types(ev), "OrderAccepted OrderExpired");
    const OrderAccepted a = At<OrderAccepted>(ev, 0);
    const OrderExpired x = At<OrderExpired>(ev, 1);
    EXPECT_EQ(Raw(a.order_id), Raw(engine_.last_sequence()));
    EXPECT_EQ(a.account, p.account);
    EXPECT_EQ(a.market, p.market);
    EXPECT_EQ(a.side, p.side);
    EXPECT_EQ(a.tif, TimeInForce::kFok);
    EXPECT_EQ(a.price, p.price);
    EXPECT_EQ(a.qty, p.qty);
    EXPECT_EQ(a.client_order_id, p.client_order_id);
    EXPECT_EQ(x.order_id, a.order_id);
    EXPECT_EQ(x.account, p.account);
    EXPECT_EQ(x.market, p.market);
    EXPECT_EQ(x.side, p.side);
    EXPECT_EQ(x.reason, ExpireReason::kFokNotFillable);
    EXPECT_EQ(x.remaining, p.qty);
    EXPECT_EQ(x.released, a.locked);
    if (p.client_order_id.empty()) {
      EXPECT_EQ(Dump(engine_.ExportImage()), before) << "an unfillable FOK changed the state";
    }
    EXPECT_EQ(engine_.open_orders(), open_before);
    return x;
  }

  OrderId NextOrderId() const { return OrderId{Raw(engine_.last_sequence()) + 1}; }

  Balance Bal(AccountId account, AssetId asset) const { return engine_.balance(account, asset); }
  static Balance B(int64_t available, int64_t locked) {
    return Balance{Amount{available}, Amount{locked}};
  }

  // (price, qty, orders) of each level of one side, best first.
  std::string DepthOf(MarketId market, Side side) const {
    std::string s;
    for (const LevelView& l : engine_.Depth(market, side, 100)) {
      if (!s.empty()) s += ' ';
      s += std::to_string(l.price.value) + 'x' + std::to_string(l.qty.value) + '/' +
           std::to_string(l.orders);
    }
    return s;
  }
  // Ids of the open orders of one side, in priority order.
  std::vector<uint64_t> Queue(MarketId market, Side side) const {
    std::vector<uint64_t> ids;
    for (const OrderView& o : engine_.Orders(market, side)) ids.push_back(Raw(o.id));
    return ids;
  }

  EngineConfig config_;
  Engine engine_;
  Events journal_;  // every event emitted, in order
  int64_t ts_ = 1'700'000'000'000'000'000;
  int next_ref_ = 0;
};

// ---------------------------------------------------------------------------
// Configuration, identities, sequences

TEST_F(EngineTest, FixtureConfigDerivesNotionalPerTickLot) {
  EXPECT_EQ(config_.markets[0].notional_per_tick_lot, 10);
  EXPECT_EQ(config_.markets[1].notional_per_tick_lot, 1);
  EXPECT_EQ(config_.markets[2].notional_per_tick_lot, 1);
  EXPECT_EQ(Raw(engine_.last_sequence()), 0u);
  EXPECT_EQ(Raw(engine_.next_trade_id()), 1u);
  EXPECT_EQ(engine_.ConfigHash(), Engine(MakeConfig()).ConfigHash());
}

TEST_F(EngineTest, EveryCommandConsumesOneSequenceAndOrderIdIsTheSequence) {
  Events ev = Run(DepositCmd(kAlice, kUsdt, 100'000, "d1"));  // seq 1
  EXPECT_EQ(At<Deposited>(ev, 0).transfer_id, TransferId{1});
  ExpectReject(Limit(kAlice, Side::kBuy, 0, 1), RejectReason::kInvalidPrice);  // seq 2
  Credit(kBob, kBtc, 100'000);                                                 // seq 3

  ev = Place(Limit(kAlice, Side::kBuy, 100, 3));  // seq 4
  EXPECT_EQ(Types(ev), "OrderAccepted OrderRested");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).order_id, OrderId{4});
  EXPECT_EQ(ev[0].seq, Sequence{4});
  EXPECT_EQ(At<OrderRested>(ev, 1).order_id, OrderId{4});

  ExpectReject(CancelCmd(kAlice, OrderId{99}), RejectReason::kUnknownOrder);  // seq 5

  ev = Place(Limit(kBob, Side::kSell, 100, 1));  // seq 6: trade 1
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).order_id, OrderId{6});
  EXPECT_EQ(At<Trade>(ev, 1).trade_id, TradeId{1});
  EXPECT_EQ(At<Trade>(ev, 1).taker_order_id, OrderId{6});
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, OrderId{4});

  ev = Place(Limit(kBob, Side::kSell, 100, 2));  // seq 7: trades 2 (rest of 4)
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<Trade>(ev, 1).trade_id, TradeId{2});
  EXPECT_EQ(Raw(engine_.next_trade_id()), 3u);

  ev = SetStatus(kEthUsdt, MarketStatus::kHalted);  // seq 8
  EXPECT_EQ(Types(ev), "MarketStatusChanged");
  ev = Run(WithdrawCmd(kAlice, kUsdt, 10, "w1"));  // seq 9
  EXPECT_EQ(At<Withdrawn>(ev, 0).transfer_id, TransferId{9});
  EXPECT_EQ(Raw(engine_.last_sequence()), 9u);
}

TEST_F(EngineTest, TradeIdsAreDenseAcrossMarketsAndCommands) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kAlice, Side::kBuy, 100, 1);
  Rest(kAlice, Side::kBuy, 101, 1);
  Rest(kAlice, Side::kBuy, 100, 10, kEthUsdt);
  Events ev = Place(Limit(kBob, Side::kSell, 100, 2));
  EXPECT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_EQ(At<Trade>(ev, 1).trade_id, TradeId{1});
  EXPECT_EQ(At<Trade>(ev, 2).trade_id, TradeId{2});
  ev = Place(Limit(kBob, Side::kSell, 100, 10, TimeInForce::kGtc, kEthUsdt));
  EXPECT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<Trade>(ev, 1).trade_id, TradeId{3});
  EXPECT_EQ(At<Trade>(ev, 1).market, kEthUsdt);
  EXPECT_EQ(Raw(engine_.next_trade_id()), 4u);
}

// ---------------------------------------------------------------------------
// Matching

TEST_F(EngineTest, PartialFillsAcrossLevelsBetterPriceFirstFifoWithinALevel) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(kBob, Side::kSell, 101, 3);
  const OrderId b = Rest(kBob, Side::kSell, 100, 2);
  const OrderId c = Rest(kBob, Side::kSell, 100, 4);
  Rest(kBob, Side::kSell, 102, 5);
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 14'000, 14'000));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x6/2 101x3/1 102x5/1");

  const OrderId t = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, 101, 8));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade Trade");
  const OrderAccepted acc = At<OrderAccepted>(ev, 0);
  EXPECT_EQ(acc.order_id, t);
  EXPECT_EQ(acc.account, kAlice);
  EXPECT_EQ(acc.side, Side::kBuy);
  EXPECT_EQ(acc.price, Price{101});
  EXPECT_EQ(acc.qty, Qty{8});
  EXPECT_EQ(acc.locked, Amount{8'080});  // 101 × 8 × 10

  const Trade t1 = At<Trade>(ev, 1);
  EXPECT_EQ(t1.trade_id, TradeId{1});
  EXPECT_EQ(t1.market, kBtcUsdt);
  EXPECT_EQ(t1.taker_side, Side::kBuy);
  EXPECT_EQ(t1.maker_order_id, b);  // best price, first in time
  EXPECT_EQ(t1.taker_order_id, t);
  EXPECT_EQ(t1.maker_account, kBob);
  EXPECT_EQ(t1.taker_account, kAlice);
  EXPECT_EQ(t1.price, Price{100});
  EXPECT_EQ(t1.qty, Qty{2});
  EXPECT_EQ(t1.base_qty, Amount{2'000});
  EXPECT_EQ(t1.notional, Amount{2'000});
  EXPECT_EQ(t1.maker_fee, Amount{2});  // seller (maker, 10 bps) in USDT
  EXPECT_EQ(t1.taker_fee, Amount{4});  // buyer (taker, 20 bps) in BTC
  EXPECT_EQ(t1.taker_released, Amount{0});
  EXPECT_TRUE(t1.maker_filled);
  EXPECT_FALSE(t1.taker_filled);

  const Trade t2 = At<Trade>(ev, 2);
  EXPECT_EQ(t2.trade_id, TradeId{2});
  EXPECT_EQ(t2.maker_order_id, c);
  EXPECT_EQ(t2.price, Price{100});
  EXPECT_EQ(t2.qty, Qty{4});
  EXPECT_EQ(t2.notional, Amount{4'000});
  EXPECT_EQ(t2.maker_fee, Amount{4});
  EXPECT_EQ(t2.taker_fee, Amount{8});
  EXPECT_TRUE(t2.maker_filled);
  EXPECT_FALSE(t2.taker_filled);

  const Trade t3 = At<Trade>(ev, 3);
  EXPECT_EQ(t3.trade_id, TradeId{3});
  EXPECT_EQ(t3.maker_order_id, a);
  EXPECT_EQ(t3.price, Price{101});
  EXPECT_EQ(t3.qty, Qty{2});
  EXPECT_EQ(t3.base_qty, Amount{2'000});
  EXPECT_EQ(t3.notional, Amount{2'020});
  EXPECT_EQ(t3.maker_fee, Amount{3});  // ceil(2.02)
  EXPECT_EQ(t3.taker_fee, Amount{4});
  EXPECT_FALSE(t3.maker_filled);
  EXPECT_TRUE(t3.taker_filled);
  EXPECT_EQ(t3.taker_released, Amount{60});  // 8080 locked - 8020 spent

  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 8'020, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 8'000 - 16, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 14'000, 6'000));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 1'998 + 3'996 + 2'017, 0));
  EXPECT_EQ(Bal(kFee, kBtc), B(16, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(9, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "101x1/1 102x5/1");
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "");
  EXPECT_FALSE(engine_.FindOrder(t).has_value());
  EXPECT_EQ(engine_.FindOrder(a)->remaining, Qty{1});
  EXPECT_EQ(engine_.open_orders(), 2u);
}

TEST_F(EngineTest, SellTakerTradesAtTheMakersPrices) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a1 = Rest(kAlice, Side::kBuy, 100, 2);
  const OrderId a2 = Rest(kAlice, Side::kBuy, 98, 2);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 3'960, 3'960));

  Events ev = Place(Limit(kBob, Side::kSell, 97, 3));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{3'000});
  const Trade t1 = At<Trade>(ev, 1);
  EXPECT_EQ(t1.maker_order_id, a1);
  EXPECT_EQ(t1.taker_side, Side::kSell);
  EXPECT_EQ(t1.price, Price{100});
  EXPECT_EQ(t1.notional, Amount{2'000});
  EXPECT_EQ(t1.maker_fee, Amount{2});  // buyer (maker) in BTC: 2000 × 10 bps
  EXPECT_EQ(t1.taker_fee, Amount{4});  // seller (taker) in USDT: 2000 × 20 bps
  EXPECT_TRUE(t1.maker_filled);
  const Trade t2 = At<Trade>(ev, 2);
  EXPECT_EQ(t2.maker_order_id, a2);
  EXPECT_EQ(t2.price, Price{98});
  EXPECT_EQ(t2.qty, Qty{1});
  EXPECT_EQ(t2.notional, Amount{980});
  EXPECT_EQ(t2.maker_fee, Amount{1});
  EXPECT_EQ(t2.taker_fee, Amount{2});  // ceil(1.96)
  EXPECT_FALSE(t2.maker_filled);
  EXPECT_TRUE(t2.taker_filled);
  EXPECT_EQ(t2.taker_released, Amount{0});

  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 3'000, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 1'996 + 978, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 3'960, 980));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 1'998 + 999, 0));
  EXPECT_EQ(Bal(kFee, kBtc), B(3, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(6, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "98x1/1");
}

TEST_F(EngineTest, ExactFillRemovesBothOrders) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  Events ev = Place(Limit(kBob, Side::kSell, 100, 5));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  const Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.maker_order_id, a);
  EXPECT_EQ(t.qty, Qty{5});
  EXPECT_TRUE(t.maker_filled);
  EXPECT_TRUE(t.taker_filled);
  EXPECT_EQ(t.taker_released, Amount{0});
  EXPECT_EQ(engine_.open_orders(), 0u);
  EXPECT_FALSE(engine_.BestBid(kBtcUsdt).has_value());
  EXPECT_FALSE(engine_.BestAsk(kBtcUsdt).has_value());
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 5'000, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 5'000 - 5, 0));   // maker 10 bps
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 5'000 - 10, 0));  // taker 20 bps
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 5'000, 0));
  EXPECT_EQ(Bal(kFee, kBtc), B(5, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(10, 0));
}

TEST_F(EngineTest, GtcRemainderRestsAtItsLimit) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId t = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, 100, 5));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderRested");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{5'000});
  EXPECT_FALSE(At<Trade>(ev, 1).taker_filled);
  const OrderRested r = At<OrderRested>(ev, 2);
  EXPECT_EQ(r.order_id, t);
  EXPECT_EQ(r.account, kAlice);
  EXPECT_EQ(r.market, kBtcUsdt);
  EXPECT_EQ(r.side, Side::kBuy);
  EXPECT_EQ(r.remaining, Qty{3});
  EXPECT_EQ(r.released, Amount{0});  // filled at its own limit
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 5'000, 3'000));
  std::optional<OrderView> o = engine_.FindOrder(t);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->qty, Qty{5});
  EXPECT_EQ(o->remaining, Qty{3});
  EXPECT_EQ(o->locked, Amount{3'000});
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "100x3/1");
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "");
}

TEST_F(EngineTest, IocRemainderExpiresAndReleasesItsLock) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId t = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, 100, 5, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  const OrderExpired x = At<OrderExpired>(ev, 2);
  EXPECT_EQ(x.order_id, t);
  EXPECT_EQ(x.account, kAlice);
  EXPECT_EQ(x.market, kBtcUsdt);
  EXPECT_EQ(x.side, Side::kBuy);
  EXPECT_EQ(x.reason, ExpireReason::kIocRemainder);
  EXPECT_EQ(x.remaining, Qty{3});
  EXPECT_EQ(x.released, Amount{3'000});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);

  // An IOC that meets nothing expires whole.
  ev = Place(Limit(kAlice, Side::kSell, 100, 4, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderExpired>(ev, 1).remaining, Qty{4});
  EXPECT_EQ(At<OrderExpired>(ev, 1).released, Amount{4'000});
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 2'000 - 4, 0));
}

// ---------------------------------------------------------------------------
// FOK and LIMIT_MAKER

TEST_F(EngineTest, FokThatCannotFillExpiresAndTradesNothing) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 101, 2);
  OrderExpired x = ExpectFokExpires(Limit(kAlice, Side::kBuy, 101, 5, TimeInForce::kFok));
  EXPECT_EQ(x.released, Amount{5'050});  // 101 x 5 x npt 10, the whole lock
  // Only 2 lots within the limit.
  x = ExpectFokExpires(Limit(kAlice, Side::kBuy, 100, 3, TimeInForce::kFok));
  EXPECT_EQ(x.released, Amount{3'000});
  // A sell releases its base lock.
  x = ExpectFokExpires(Limit(kBob, Side::kSell, 100, 1, TimeInForce::kFok));
  EXPECT_EQ(x.released, Amount{1'000});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 4'000, 4'000));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x2/1 101x2/1");
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "");
  EXPECT_EQ(engine_.open_orders(), 2u);
  EXPECT_EQ(Raw(engine_.next_trade_id()), 1u);
}

TEST_F(EngineTest, FokThatExpiresKeepsItsClientOrderIdReserved) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  const OrderExpired x =
      ExpectFokExpires(WithClientId(Limit(kAlice, Side::kBuy, 100, 3, TimeInForce::kFok), "fok"));
  // Like any closed order's, its id stays reserved: a re-submission answers
  // with the expired order.
  const Rejected r =
      ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 100, 2, TimeInForce::kFok), "fok"),
                   RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(x.order_id));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x2/1");
}

TEST_F(EngineTest, FokThatCanFillFillsCompletely) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 101, 2);
  Events ev = Place(Limit(kAlice, Side::kBuy, 101, 4, TimeInForce::kFok));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{4'040});
  EXPECT_EQ(At<OrderAccepted>(ev, 0).tif, TimeInForce::kFok);
  const Trade last = At<Trade>(ev, 2);
  EXPECT_TRUE(last.taker_filled);
  EXPECT_EQ(last.taker_released, Amount{20});  // 4040 - 2000 - 2020
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'020, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);
}

TEST_F(EngineTest, FokDryWalkAppliesSelfTradePrevention) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId own = Rest(kAlice, Side::kSell, 100, 1);
  Rest(kBob, Side::kSell, 101, 4);
  // EXPIRE_TAKER / EXPIRE_BOTH stop at Alice's own ask: nothing fills.
  ExpectFokExpires(
      WithStp(Limit(kAlice, Side::kBuy, 101, 4, TimeInForce::kFok), StpMode::kExpireTaker));
  ExpectFokExpires(
      WithStp(Limit(kAlice, Side::kBuy, 101, 4, TimeInForce::kFok), StpMode::kExpireBoth));
  EXPECT_EQ(Queue(kBtcUsdt, Side::kSell), (std::vector<uint64_t>{Raw(own), Raw(own) + 1}));
  // EXPIRE_MAKER skips it: Bob's 4 lots fill the whole order.
  Events ev =
      Place(WithStp(Limit(kAlice, Side::kBuy, 101, 4, TimeInForce::kFok), StpMode::kExpireMaker));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{4'040});
  const OrderExpired x = At<OrderExpired>(ev, 1);
  EXPECT_EQ(x.order_id, own);
  EXPECT_EQ(x.account, kAlice);
  EXPECT_EQ(x.side, Side::kSell);
  EXPECT_EQ(x.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(x.remaining, Qty{1});
  EXPECT_EQ(x.released, Amount{1'000});
  EXPECT_TRUE(At<Trade>(ev, 2).taker_filled);
  EXPECT_EQ(At<Trade>(ev, 2).taker_released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 4'000 - 8, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'040, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);
}

TEST_F(EngineTest, LimitMakerThatWouldCrossIsRejectedOtherwiseRests) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  ExpectReject(Maker(kAlice, Side::kBuy, 100, 1), RejectReason::kWouldTakeLiquidity);
  ExpectReject(Maker(kAlice, Side::kBuy, 105, 1), RejectReason::kWouldTakeLiquidity);
  Events ev = Place(Maker(kAlice, Side::kBuy, 99, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderRested");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).type, OrderType::kLimitMaker);
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{1'980});
  // Crossing its own account's order is still taking liquidity.
  ExpectReject(Maker(kAlice, Side::kSell, 99, 2), RejectReason::kWouldTakeLiquidity);
  ExpectReject(Maker(kBob, Side::kSell, 98, 2), RejectReason::kWouldTakeLiquidity);
  // At the best ask, a sell does not cross: it joins the level's tail.
  const OrderId s = Rest(Maker(kAlice, Side::kSell, 100, 1));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x3/2");
  EXPECT_EQ(Queue(kBtcUsdt, Side::kSell).back(), Raw(s));
}

TEST_F(EngineTest, LimitMakerWithIocOrFokIsAnInvalidOrderType) {
  Fund(kAlice);
  PlaceOrder p = Maker(kAlice, Side::kBuy, 100, 1);
  p.tif = TimeInForce::kIoc;
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p.tif = TimeInForce::kFok;
  ExpectReject(p, RejectReason::kInvalidOrderType);
  // Check 3 comes before the price check (5).
  p.price = Price{0};
  ExpectReject(p, RejectReason::kInvalidOrderType);
}

// ---------------------------------------------------------------------------
// MARKET orders

TEST_F(EngineTest, MarketOrdersOnAnEmptyBookAreAcceptedThenExpire) {
  Fund(kAlice);
  const OrderId o1 = NextOrderId();
  Events ev = Place(MarketQty(kAlice, Side::kBuy, 5));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  OrderAccepted a = At<OrderAccepted>(ev, 0);
  EXPECT_EQ(a.order_id, o1);
  EXPECT_EQ(a.type, OrderType::kMarket);
  EXPECT_EQ(a.qty, Qty{5});
  EXPECT_EQ(a.quote_qty, Amount{0});
  EXPECT_EQ(a.locked, Amount{0});  // nothing rests to be bought
  OrderExpired x = At<OrderExpired>(ev, 1);
  EXPECT_EQ(x.order_id, o1);
  EXPECT_EQ(x.reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(x.remaining, Qty{5});
  EXPECT_EQ(x.released, Amount{0});

  ev = Place(MarketQuote(kAlice, Side::kBuy, 5'000));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  a = At<OrderAccepted>(ev, 0);
  EXPECT_EQ(a.qty, Qty{0});
  EXPECT_EQ(a.quote_qty, Amount{5'000});
  EXPECT_EQ(a.locked, Amount{5'000});
  x = At<OrderExpired>(ev, 1);
  EXPECT_EQ(x.reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(x.remaining, Qty{0});
  EXPECT_EQ(x.released, Amount{5'000});

  ev = Place(MarketQty(kAlice, Side::kSell, 5));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{5'000});
  EXPECT_EQ(At<OrderExpired>(ev, 1).remaining, Qty{5});
  EXPECT_EQ(At<OrderExpired>(ev, 1).released, Amount{5'000});

  ev = Place(MarketQuote(kAlice, Side::kSell, 5'000));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{0});  // the walk sells nothing
  EXPECT_EQ(At<OrderExpired>(ev, 1).reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(At<OrderExpired>(ev, 1).released, Amount{0});

  // An account without any balance may send a market order by qty that locks 0.
  ev = Place(MarketQty(kCarol, Side::kBuy, 1));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");

  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc, 0));
  EXPECT_EQ(Bal(kCarol, kUsdt), B(0, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);
  EXPECT_EQ(Raw(engine_.next_trade_id()), 1u);
}

TEST_F(EngineTest, MarketBuyByQtyLocksTheExactCost) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 101, 3);
  Events ev = Place(MarketQty(kAlice, Side::kBuy, 4));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{4'020});  // 2000 + 2 × 1010
  EXPECT_EQ(At<Trade>(ev, 1).price, Price{100});
  EXPECT_EQ(At<Trade>(ev, 2).price, Price{101});
  EXPECT_EQ(At<Trade>(ev, 2).qty, Qty{2});
  EXPECT_TRUE(At<Trade>(ev, 2).taker_filled);
  EXPECT_EQ(At<Trade>(ev, 2).taker_released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'020, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 4'000 - 8, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "101x1/1");

  // The exact cost is also the balance needed: 1 lot at 101 = 1010.
  Credit(kCarol, kUsdt, 1'009);
  ExpectReject(MarketQty(kCarol, Side::kBuy, 1), RejectReason::kInsufficientBalance);
  Credit(kCarol, kUsdt, 1);
  ev = Place(MarketQty(kCarol, Side::kBuy, 1));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(Bal(kCarol, kUsdt), B(0, 0));
}

TEST_F(EngineTest, MarketBuyByQtyOnAThinBookExpiresForLackOfLiquidity) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 101, 1);
  const OrderId t = NextOrderId();
  Events ev = Place(MarketQty(kAlice, Side::kBuy, 5));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{3'010});  // all that rests
  EXPECT_FALSE(At<Trade>(ev, 2).taker_filled);
  const OrderExpired x = At<OrderExpired>(ev, 3);
  EXPECT_EQ(x.order_id, t);
  EXPECT_EQ(x.reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(x.remaining, Qty{2});
  EXPECT_EQ(x.released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 3'010, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 3'000 - 6, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);
}

TEST_F(EngineTest, MarketBuyByQuoteLocksTheBudgetAndReleasesTheDust) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 5);
  const OrderId m2 = Rest(kBob, Side::kSell, 101, 5);
  const OrderId t = NextOrderId();
  Events ev = Place(MarketQuote(kAlice, Side::kBuy, 6'200));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{6'200});
  const Trade t1 = At<Trade>(ev, 1);
  EXPECT_EQ(t1.qty, Qty{5});
  EXPECT_EQ(t1.notional, Amount{5'000});
  EXPECT_TRUE(t1.maker_filled);
  const Trade t2 = At<Trade>(ev, 2);
  EXPECT_EQ(t2.maker_order_id, m2);
  EXPECT_EQ(t2.qty, Qty{1});  // floor(1200 / 1010)
  EXPECT_EQ(t2.notional, Amount{1'010});
  EXPECT_FALSE(t2.maker_filled);
  EXPECT_FALSE(t2.taker_filled);
  const OrderExpired x = At<OrderExpired>(ev, 3);
  EXPECT_EQ(x.order_id, t);
  EXPECT_EQ(x.reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(x.remaining, Qty{0});
  EXPECT_EQ(x.released, Amount{190});  // the dust
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 6'010, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 6'000 - 12, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "101x4/1");
}

TEST_F(EngineTest, MarketBuyByQuoteThatSpendsItsWholeBudgetIsFilled) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 5);
  Rest(kBob, Side::kSell, 101, 5);
  Events ev = Place(MarketQuote(kAlice, Side::kBuy, 6'010));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_TRUE(At<Trade>(ev, 2).taker_filled);
  EXPECT_EQ(At<Trade>(ev, 2).taker_released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 6'010, 0));
}

TEST_F(EngineTest, MarketBuyByQuoteBelowOneLotSpendsNothing) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 200, 1);  // one lot costs 2000
  Events ev = Place(MarketQuote(kAlice, Side::kBuy, 1'999));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{1'999});
  EXPECT_EQ(At<OrderExpired>(ev, 1).reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(At<OrderExpired>(ev, 1).released, Amount{1'999});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "200x1/1");
}

TEST_F(EngineTest, MarketSellByQuoteLocksTheBaseItSellsAndNeverExceedsTheBudget) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a1 = Rest(kAlice, Side::kBuy, 100, 5);
  const OrderId a2 = Rest(kAlice, Side::kBuy, 99, 5);
  const OrderId t = NextOrderId();
  Events ev = Place(MarketQuote(kBob, Side::kSell, 7'000));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade OrderExpired");
  const OrderAccepted a = At<OrderAccepted>(ev, 0);
  EXPECT_EQ(a.qty, Qty{0});
  EXPECT_EQ(a.quote_qty, Amount{7'000});
  EXPECT_EQ(a.locked, Amount{7'000});  // 5 + floor(2000 / 990) = 7 lots of base
  const Trade t1 = At<Trade>(ev, 1);
  EXPECT_EQ(t1.maker_order_id, a1);
  EXPECT_EQ(t1.taker_side, Side::kSell);
  EXPECT_EQ(t1.qty, Qty{5});
  EXPECT_EQ(t1.notional, Amount{5'000});
  EXPECT_EQ(t1.maker_fee, Amount{5});   // buyer, BTC
  EXPECT_EQ(t1.taker_fee, Amount{10});  // seller, USDT
  const Trade t2 = At<Trade>(ev, 2);
  EXPECT_EQ(t2.maker_order_id, a2);
  EXPECT_EQ(t2.qty, Qty{2});
  EXPECT_EQ(t2.notional, Amount{1'980});
  EXPECT_EQ(t2.taker_fee, Amount{4});  // ceil(3.96)
  EXPECT_FALSE(t2.taker_filled);
  const OrderExpired x = At<OrderExpired>(ev, 3);
  EXPECT_EQ(x.order_id, t);
  EXPECT_EQ(x.side, Side::kSell);
  EXPECT_EQ(x.reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(x.remaining, Qty{0});
  EXPECT_EQ(x.released, Amount{0});
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 7'000, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 4'990 + 1'976, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 4'995 + 1'998, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 9'950, 2'970));
  EXPECT_EQ(Bal(kFee, kBtc), B(7, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(14, 0));
}

TEST_F(EngineTest, MarketSellByQuoteThatReceivesItsWholeBudgetIsFilled) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kAlice, Side::kBuy, 100, 5);
  Rest(kAlice, Side::kBuy, 99, 5);
  Events ev = Place(MarketQuote(kBob, Side::kSell, 6'980));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{7'000});
  EXPECT_TRUE(At<Trade>(ev, 2).taker_filled);
  EXPECT_EQ(At<Trade>(ev, 2).taker_released, Amount{0});
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 7'000, 0));
}

TEST_F(EngineTest, MarketSellByQtyExpiresItsRemainder) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kAlice, Side::kBuy, 100, 2);
  Events ev = Place(MarketQty(kBob, Side::kSell, 3));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{3'000});
  EXPECT_EQ(At<OrderExpired>(ev, 2).reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(At<OrderExpired>(ev, 2).remaining, Qty{1});
  EXPECT_EQ(At<OrderExpired>(ev, 2).released, Amount{1'000});
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 2'000, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 2'000 - 4, 0));
}

TEST_F(EngineTest, LimitOrderWithAQuoteQtyIsAnInvalidOrderType) {
  Fund(kAlice);
  PlaceOrder p = Limit(kAlice, Side::kBuy, 100, 1);
  p.quote_qty = Amount{1'000};
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p = Maker(kAlice, Side::kSell, 100, 1);
  p.quote_qty = Amount{1'000};
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p = Limit(kAlice, Side::kBuy, 100, 1, TimeInForce::kFok);
  p.quote_qty = Amount{-1};
  ExpectReject(p, RejectReason::kInvalidOrderType);
}

TEST_F(EngineTest, MarketOrderWithNeitherOrBothSizesIsAnInvalidOrderType) {
  Fund(kAlice);
  PlaceOrder p = MarketQty(kAlice, Side::kBuy, 0);
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p.qty = Qty{1};
  p.quote_qty = Amount{5'000};
  ExpectReject(p, RejectReason::kInvalidOrderType);
}

// ---------------------------------------------------------------------------
// Price improvement

TEST_F(EngineTest, BuyFilledBelowItsLimitReleasesTheSurplusInTheTrade) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 4);
  Events ev = Place(Limit(kAlice, Side::kBuy, 105, 4));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{4'200});
  const Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.price, Price{100});
  EXPECT_EQ(t.notional, Amount{4'000});
  EXPECT_TRUE(t.taker_filled);
  EXPECT_EQ(t.taker_released, Amount{200});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'000, 0));
}

TEST_F(EngineTest, SurplusOfAPartialFillIsReturnedWhenTheRemainderRests) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId a = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, 105, 4));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderRested");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{4'200});
  EXPECT_EQ(At<Trade>(ev, 1).taker_released, Amount{0});
  EXPECT_FALSE(At<Trade>(ev, 1).taker_filled);
  const OrderRested r = At<OrderRested>(ev, 2);
  EXPECT_EQ(r.order_id, a);
  EXPECT_EQ(r.account, kAlice);
  EXPECT_EQ(r.market, kBtcUsdt);
  EXPECT_EQ(r.side, Side::kBuy);
  EXPECT_EQ(r.remaining, Qty{2});
  // Lock 4200 - 2000 spent = 2200; the rest needs 2 × 105 × 10 = 2100.
  EXPECT_EQ(r.released, Amount{100});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'100, 2'100));
  EXPECT_EQ(engine_.FindOrder(a)->locked, Amount{2'100});

  ev = Cancel(kAlice, a);
  ASSERT_EQ(Types(ev), "OrderCanceled");
  const OrderCanceled c = At<OrderCanceled>(ev, 0);
  EXPECT_EQ(c.order_id, a);
  EXPECT_EQ(c.account, kAlice);
  EXPECT_EQ(c.market, kBtcUsdt);
  EXPECT_EQ(c.side, Side::kBuy);
  EXPECT_EQ(c.remaining, Qty{2});
  EXPECT_EQ(c.released, Amount{2'100});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000, 0));
}

TEST_F(EngineTest, IocBuyBelowItsLimitExpiresWithEverythingStillLocked) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  Events ev = Place(Limit(kAlice, Side::kBuy, 105, 4, TimeInForce::kIoc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_EQ(At<Trade>(ev, 1).taker_released, Amount{0});
  EXPECT_EQ(At<OrderExpired>(ev, 2).remaining, Qty{2});
  EXPECT_EQ(At<OrderExpired>(ev, 2).released, Amount{2'200});  // 4200 - 2000
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000, 0));
}

TEST_F(EngineTest, SurplusIsReleasedWhenTheRestedRemainderFillsAsMaker) {
  Fund(kAlice);
  Fund(kBob);
  Fund(kCarol);
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId a = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, 105, 4));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderRested");
  EXPECT_EQ(At<OrderRested>(ev, 2).released, Amount{100});
  // Carol completes Alice's order at Alice's price: the order closes, so
  // nothing of it may stay locked (locked == the locks of open orders).
  ev = Place(Limit(kCarol, Side::kSell, 105, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, a);
  EXPECT_TRUE(At<Trade>(ev, 1).maker_filled);
  EXPECT_FALSE(engine_.FindOrder(a).has_value());
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000 - 2'100, 0));
}

// ---------------------------------------------------------------------------
// Fees

TEST_F(EngineTest, FeesRoundUpAndUseTheMakerAndTakerRates) {
  Fund(kAlice);
  Fund(kBob);
  // Bob makes (sells), Alice takes (buys): notional 3030, base 3000.
  Rest(kBob, Side::kSell, 101, 3);
  Events ev = Place(Limit(kAlice, Side::kBuy, 101, 3));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.notional, Amount{3'030});
  EXPECT_EQ(t.maker_fee, Amount{4});  // ceil(3030 × 10 / 10000) = ceil(3.03), USDT
  EXPECT_EQ(t.taker_fee, Amount{6});  // 3000 × 20 / 10000, BTC
  EXPECT_EQ(Bal(kFee, kBtc), B(6, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(4, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 3'026, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 2'994, 0));

  // Alice makes (buys), Bob takes (sells).
  Rest(kAlice, Side::kBuy, 101, 3);
  ev = Place(Limit(kBob, Side::kSell, 101, 3));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  t = At<Trade>(ev, 1);
  EXPECT_EQ(t.maker_fee, Amount{3});  // 3000 × 10 / 10000, BTC
  EXPECT_EQ(t.taker_fee, Amount{7});  // ceil(3030 × 20 / 10000) = ceil(6.06), USDT
  EXPECT_EQ(Bal(kFee, kBtc), B(9, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(11, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 3'026 + 3'023, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 6'000, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 2'994 + 2'997, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 6'060, 0));
}

TEST_F(EngineTest, FractionalBaseFeesRoundUp) {
  Fund(kAlice);
  Fund(kBob);
  // ETHUSDT: lot 100 ETH units, npt 1. 7 lots at 100 ticks: base 700, notional 700.
  Rest(kBob, Side::kSell, 100, 7, kEthUsdt);
  Events ev = Place(Limit(kAlice, Side::kBuy, 100, 7, TimeInForce::kGtc, kEthUsdt));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  const Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.market, kEthUsdt);
  EXPECT_EQ(t.base_qty, Amount{700});
  EXPECT_EQ(t.notional, Amount{700});
  EXPECT_EQ(t.maker_fee, Amount{1});  // ceil(0.7) USDT
  EXPECT_EQ(t.taker_fee, Amount{2});  // ceil(1.4) ETH
  EXPECT_EQ(Bal(kFee, kEth), B(2, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(1, 0));
  EXPECT_EQ(Bal(kAlice, kEth), B(kFundEth + 698, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 700, 0));
  EXPECT_EQ(Bal(kBob, kEth), B(kFundEth - 700, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 699, 0));
}

TEST_F(EngineTest, FeeAccountMayNotTradeButMayWithdrawItsFees) {
  Fund(kAlice);
  Fund(kBob);
  Rejected r = ExpectReject(Limit(kFee, Side::kBuy, 100, 1), RejectReason::kUnauthorized);
  EXPECT_EQ(r.account, kFee);
  Credit(kFee, kUsdt, 5'000);
  ExpectReject(Limit(kFee, Side::kBuy, 100, 1), RejectReason::kUnauthorized);
  ExpectReject(MarketQuote(kFee, Side::kBuy, 1'000), RejectReason::kUnauthorized);
  Rest(kBob, Side::kSell, 100, 5);
  Events ev = Place(Limit(kAlice, Side::kBuy, 100, 5));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(Bal(kFee, kUsdt), B(5'005, 0));
  EXPECT_EQ(Bal(kFee, kBtc), B(10, 0));
  const Amount supply_before = engine_.supply(kBtc);
  ev = Run(WithdrawCmd(kFee, kBtc, 10, "fees-out"));
  ASSERT_EQ(Types(ev), "Withdrawn");
  EXPECT_EQ(Bal(kFee, kBtc), B(0, 0));
  EXPECT_EQ(engine_.supply(kBtc), supply_before - Amount{10});
}

// ---------------------------------------------------------------------------
// Self-trade prevention. Alice rests an ask 100 × 2, then Bob an ask 100 × 3;
// Alice buys 100 × 4 with each mode.

class StpTest : public EngineTest {
 protected:
  void SetUp() override {
    Fund(kAlice);
    Fund(kBob);
    own_ = Rest(kAlice, Side::kSell, 100, 2);
    bobs_ = Rest(kBob, Side::kSell, 100, 3);
  }
  Events Buy(StpMode mode) {
    taker_ = NextOrderId();
    return Place(WithStp(Limit(kAlice, Side::kBuy, 100, 4), mode));
  }
  OrderId own_{}, bobs_{}, taker_{};
};

TEST_F(StpTest, ExpireTakerExpiresTheIncomingOrder) {
  Events ev = Buy(StpMode::kExpireTaker);
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).stp, StpMode::kExpireTaker);
  const OrderExpired x = At<OrderExpired>(ev, 1);
  EXPECT_EQ(x.order_id, taker_);
  EXPECT_EQ(x.account, kAlice);
  EXPECT_EQ(x.side, Side::kBuy);
  EXPECT_EQ(x.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(x.remaining, Qty{4});
  EXPECT_EQ(x.released, Amount{4'000});
  EXPECT_EQ(Queue(kBtcUsdt, Side::kSell), (std::vector<uint64_t>{Raw(own_), Raw(bobs_)}));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc - 2'000, 2'000));
}

TEST_F(StpTest, ExpireMakerExpiresTheRestingOrderAndMatchingGoesOn) {
  Events ev = Buy(StpMode::kExpireMaker);
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired Trade OrderRested");
  const OrderExpired x = At<OrderExpired>(ev, 1);
  EXPECT_EQ(x.order_id, own_);
  EXPECT_EQ(x.account, kAlice);
  EXPECT_EQ(x.side, Side::kSell);
  EXPECT_EQ(x.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(x.remaining, Qty{2});
  EXPECT_EQ(x.released, Amount{2'000});
  const Trade t = At<Trade>(ev, 2);
  EXPECT_EQ(t.maker_order_id, bobs_);
  EXPECT_EQ(t.taker_order_id, taker_);
  EXPECT_EQ(t.qty, Qty{3});
  EXPECT_TRUE(t.maker_filled);
  EXPECT_FALSE(t.taker_filled);
  EXPECT_EQ(At<OrderRested>(ev, 3).remaining, Qty{1});
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 3'000 - 6, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'000, 1'000));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt + 3'000 - 3, 0));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "100x1/1");
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "");
}

TEST_F(StpTest, ExpireBothExpiresTheMakerThenTheTaker) {
  Events ev = Buy(StpMode::kExpireBoth);
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired OrderExpired");
  const OrderExpired m = At<OrderExpired>(ev, 1);
  EXPECT_EQ(m.order_id, own_);
  EXPECT_EQ(m.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(m.remaining, Qty{2});
  EXPECT_EQ(m.released, Amount{2'000});
  const OrderExpired t = At<OrderExpired>(ev, 2);
  EXPECT_EQ(t.order_id, taker_);
  EXPECT_EQ(t.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(t.remaining, Qty{4});
  EXPECT_EQ(t.released, Amount{4'000});
  EXPECT_EQ(Queue(kBtcUsdt, Side::kSell), (std::vector<uint64_t>{Raw(bobs_)}));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc, 0));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Raw(engine_.next_trade_id()), 1u);
}

TEST_F(StpTest, NoneTradesWithItself) {
  Events ev = Buy(StpMode::kNone);
  ASSERT_EQ(Types(ev), "OrderAccepted Trade Trade");
  const Trade self = At<Trade>(ev, 1);
  EXPECT_EQ(self.maker_order_id, own_);
  EXPECT_EQ(self.maker_account, kAlice);
  EXPECT_EQ(self.taker_account, kAlice);
  EXPECT_EQ(self.qty, Qty{2});
  EXPECT_EQ(self.maker_fee, Amount{2});
  EXPECT_EQ(self.taker_fee, Amount{4});
  EXPECT_TRUE(self.maker_filled);
  const Trade t = At<Trade>(ev, 2);
  EXPECT_EQ(t.maker_order_id, bobs_);
  EXPECT_EQ(t.qty, Qty{2});
  EXPECT_FALSE(t.maker_filled);
  EXPECT_TRUE(t.taker_filled);
  // Alice paid 4000, received 2000 - 2 for her ask, 4000 - 8 BTC, sold 2000.
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'000 + 1'998, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc - 2'000 + 3'992, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kFundBtc - 3'000, 1'000));
  EXPECT_EQ(Bal(kFee, kBtc), B(8, 0));
  EXPECT_EQ(Bal(kFee, kUsdt), B(4, 0));
}

TEST_F(EngineTest, ExpireTakerAfterPartialFillStopsAtTheOwnOrder) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId bob = Rest(kBob, Side::kSell, 100, 1);
  Rest(kAlice, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 100, 3);
  const OrderId t = NextOrderId();
  Events ev = Place(WithStp(Limit(kAlice, Side::kBuy, 100, 4), StpMode::kExpireTaker));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, bob);
  const OrderExpired x = At<OrderExpired>(ev, 2);
  EXPECT_EQ(x.order_id, t);
  EXPECT_EQ(x.reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(x.remaining, Qty{3});
  EXPECT_EQ(x.released, Amount{3'000});
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kSell), "100x5/2");
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 1'000, 0));
}

TEST_F(EngineTest, MarketOrderLockWalkAppliesSelfTradePrevention) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId own = Rest(kAlice, Side::kSell, 100, 2);
  Rest(kBob, Side::kSell, 101, 3);
  // EXPIRE_TAKER: the walk stops at Alice's own ask, so nothing is locked.
  const OrderId t1 = NextOrderId();
  Events ev = Place(WithStp(MarketQty(kAlice, Side::kBuy, 3), StpMode::kExpireTaker));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{0});
  EXPECT_EQ(At<OrderExpired>(ev, 1).order_id, t1);
  EXPECT_EQ(At<OrderExpired>(ev, 1).reason, ExpireReason::kSelfTradePrevention);
  EXPECT_EQ(At<OrderExpired>(ev, 1).remaining, Qty{3});
  EXPECT_EQ(At<OrderExpired>(ev, 1).released, Amount{0});
  // EXPIRE_MAKER: the walk skips it; the lock is Bob's 3 lots at 101.
  ev = Place(WithStp(MarketQty(kAlice, Side::kBuy, 3), StpMode::kExpireMaker));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderExpired Trade");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{3'030});
  EXPECT_EQ(At<OrderExpired>(ev, 1).order_id, own);
  EXPECT_TRUE(At<Trade>(ev, 2).taker_filled);
  EXPECT_EQ(At<Trade>(ev, 2).taker_released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 3'030, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 3'000 - 6, 0));
}

// ---------------------------------------------------------------------------
// Placing: the checks, in order

TEST_F(EngineTest, UnknownMarketAccountAndTheFeeAccount) {
  Fund(kAlice);
  Rejected r = ExpectReject(
      WithClientId(Limit(kAlice, Side::kBuy, 100, 1, TimeInForce::kGtc, kNoMarket), "c-1"),
      RejectReason::kUnknownMarket);
  EXPECT_EQ(r.command, CommandType::kPlaceOrder);
  EXPECT_EQ(r.account, kAlice);
  EXPECT_EQ(r.market, kNoMarket);
  EXPECT_EQ(r.order_id, OrderId{0});
  EXPECT_EQ(r.client_order_id.view(), "c-1");
  // The market is checked before the account.
  ExpectReject(Limit(kNoAccount, Side::kBuy, 100, 1, TimeInForce::kGtc, kNoMarket),
               RejectReason::kUnknownMarket);
  r = ExpectReject(Limit(kNoAccount, Side::kBuy, 100, 1), RejectReason::kUnknownAccount);
  EXPECT_EQ(r.account, kNoAccount);
  ExpectReject(Limit(AccountId{0xFFFF'FFFF}, Side::kBuy, 100, 1), RejectReason::kUnknownAccount);
  ExpectReject(Limit(kFee, Side::kSell, 0, 0), RejectReason::kUnauthorized);
  // The highest valid account may trade.
  Credit(AccountId{15}, kUsdt, 1'000);
  Rest(AccountId{15}, Side::kBuy, 100, 1);
}

TEST_F(EngineTest, PriceQuantityAndNotionalLimits) {
  Fund(kAlice);
  ExpectReject(Limit(kAlice, Side::kBuy, 0, 1), RejectReason::kInvalidPrice);
  ExpectReject(Limit(kAlice, Side::kBuy, -100, 1), RejectReason::kInvalidPrice);
  ExpectReject(Limit(kAlice, Side::kBuy, 10'000'001, 1), RejectReason::kInvalidPrice);
  ExpectReject(Limit(kAlice, Side::kSell, kInt64Max, 1), RejectReason::kInvalidPrice);
  ExpectReject(Maker(kAlice, Side::kSell, 10'000'001, 1), RejectReason::kInvalidPrice);
  // max_price passes the price check; the lock (10^8) is then too large.
  ExpectReject(Limit(kAlice, Side::kBuy, 10'000'000, 1), RejectReason::kInsufficientBalance);
  Rest(kAlice, Side::kSell, 10'000'000, 1);

  ExpectReject(Limit(kAlice, Side::kBuy, 100, 0), RejectReason::kInvalidQuantity);
  ExpectReject(Limit(kAlice, Side::kBuy, 100, -1), RejectReason::kInvalidQuantity);
  ExpectReject(Limit(kAlice, Side::kSell, 100, 100'001), RejectReason::kInvalidQuantity);
  ExpectReject(Limit(kAlice, Side::kBuy, 100, 4, TimeInForce::kGtc, kEthUsdt),
               RejectReason::kInvalidQuantity);  // min_qty 5
  ExpectReject(Limit(kAlice, Side::kBuy, 100, 1'000'001, TimeInForce::kGtc, kEthUsdt),
               RejectReason::kInvalidQuantity);
  Rest(kAlice, Side::kBuy, 1, 5, kEthUsdt);  // notional 5, no minimum there

  // min_notional 1000 = 100 ticks × 1 lot × 10.
  ExpectReject(Limit(kAlice, Side::kBuy, 99, 1), RejectReason::kMinNotional);
  ExpectReject(Limit(kAlice, Side::kSell, 1, 99), RejectReason::kMinNotional);
  Rest(kAlice, Side::kBuy, 100, 1);
  Rest(kAlice, Side::kBuy, 1, 100);
  // Price is checked before quantity, quantity before notional.
  ExpectReject(Limit(kAlice, Side::kBuy, 0, 0), RejectReason::kInvalidPrice);
  ExpectReject(Limit(kAlice, Side::kBuy, 1, 0), RejectReason::kInvalidQuantity);
}

TEST_F(EngineTest, MarketOrderSizeLimits) {
  Fund(kAlice);
  ExpectReject(MarketQty(kAlice, Side::kBuy, 100'001), RejectReason::kInvalidQuantity);
  ExpectReject(MarketQty(kAlice, Side::kSell, -1), RejectReason::kInvalidQuantity);
  ExpectReject(MarketQty(kAlice, Side::kBuy, 4, kEthUsdt), RejectReason::kInvalidQuantity);
  ExpectReject(MarketQuote(kAlice, Side::kBuy, -5), RejectReason::kInvalidQuantity);
  ExpectReject(MarketQuote(kAlice, Side::kBuy, 999), RejectReason::kMinNotional);
  ExpectReject(MarketQuote(kAlice, Side::kSell, 999), RejectReason::kMinNotional);
  Events ev = Place(MarketQuote(kAlice, Side::kBuy, 1'000));
  EXPECT_EQ(Types(ev), "OrderAccepted OrderExpired");
}

TEST_F(EngineTest, EnumValuesOutOfRangeAreAnInvalidOrderType) {
  Fund(kAlice);
  PlaceOrder p = Limit(kAlice, Side::kBuy, 100, 1);
  p.side = static_cast<Side>(2);
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p = Limit(kAlice, Side::kBuy, 100, 1);
  p.type = static_cast<OrderType>(3);
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p = Limit(kAlice, Side::kBuy, 100, 1);
  p.tif = static_cast<TimeInForce>(3);
  ExpectReject(p, RejectReason::kInvalidOrderType);
  p = Limit(kAlice, Side::kBuy, 100, 1);
  p.stp = static_cast<StpMode>(4);
  ExpectReject(p, RejectReason::kInvalidOrderType);
}

TEST_F(EngineTest, InsufficientBalanceCountsOnlyTheAvailablePart) {
  Credit(kCarol, kUsdt, 9'999);
  ExpectReject(Limit(kCarol, Side::kBuy, 100, 10), RejectReason::kInsufficientBalance);
  ExpectReject(Limit(kCarol, Side::kSell, 100, 1), RejectReason::kInsufficientBalance);
  ExpectReject(MarketQuote(kCarol, Side::kBuy, 10'000), RejectReason::kInsufficientBalance);
  Credit(kCarol, kUsdt, 1);
  const OrderId o = Rest(kCarol, Side::kBuy, 100, 10);
  EXPECT_EQ(Bal(kCarol, kUsdt), B(0, 10'000));
  // The locked part is not available to another order.
  ExpectReject(Limit(kCarol, Side::kBuy, 100, 1), RejectReason::kInsufficientBalance);
  Cancel(kCarol, o);
  Rest(kCarol, Side::kBuy, 100, 10);
}

TEST_F(EngineTest, CheckOrderLaterChecksDoNotMaskEarlierOnes) {
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 1);
  // Carol has nothing: the post-only check (6) comes before the balance (7),
  // and an unaffordable FOK is refused, whether or not it could fill.
  ExpectReject(Maker(kCarol, Side::kBuy, 100, 1), RejectReason::kWouldTakeLiquidity);
  ExpectReject(Limit(kCarol, Side::kBuy, 100, 5, TimeInForce::kFok),
               RejectReason::kInsufficientBalance);
  // Notional (5) comes before the balance (7).
  ExpectReject(Limit(kCarol, Side::kBuy, 99, 1), RejectReason::kMinNotional);
  // Market status (2) comes before the order type (3).
  SetStatus(kBtcUsdt, MarketStatus::kHalted);
  ExpectReject(MarketQty(kCarol, Side::kBuy, 0), RejectReason::kMarketNotTrading);
  // The fee account (1) comes before the market status (2).
  ExpectReject(Limit(kFee, Side::kBuy, 100, 1), RejectReason::kUnauthorized);
}

// ---------------------------------------------------------------------------
// Cancel and cancel-all

TEST_F(EngineTest, CancelOfAnOrderThatIsNotOpenIsUnknownOrder) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  Rejected r = ExpectReject(CancelCmd(kAlice, OrderId{999}), RejectReason::kUnknownOrder);
  EXPECT_EQ(r.command, CommandType::kCancelOrder);
  EXPECT_EQ(r.account, kAlice);
  EXPECT_EQ(r.market, kBtcUsdt);
  EXPECT_EQ(r.order_id, OrderId{999});
  EXPECT_TRUE(r.client_order_id.empty());
  ExpectReject(CancelCmd(kBob, a), RejectReason::kUnknownOrder);              // foreign
  ExpectReject(CancelCmd(kAlice, a, kEthUsdt), RejectReason::kUnknownOrder);  // other market
  ExpectReject(CancelCmd(kAlice, OrderId{0}), RejectReason::kUnknownOrder);   // nothing named
  ExpectReject(CancelCmd(kAlice, a, kNoMarket), RejectReason::kUnknownMarket);
  ExpectReject(CancelCmd(kNoAccount, a), RejectReason::kUnknownAccount);

  // Filled.
  const OrderId f = Rest(kAlice, Side::kBuy, 101, 1);
  EXPECT_EQ(Types(Place(Limit(kBob, Side::kSell, 101, 1))), "OrderAccepted Trade");
  ExpectReject(CancelCmd(kAlice, f), RejectReason::kUnknownOrder);
  // Expired (an IOC never rests).
  const OrderId ioc = NextOrderId();
  EXPECT_EQ(Types(Place(Limit(kAlice, Side::kSell, 200, 1, TimeInForce::kIoc))),
            "OrderAccepted OrderExpired");
  ExpectReject(CancelCmd(kAlice, ioc), RejectReason::kUnknownOrder);

  // Canceled.
  Events ev = Cancel(kAlice, a);
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).remaining, Qty{5});
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released, Amount{5'000});
  ExpectReject(CancelCmd(kAlice, a), RejectReason::kUnknownOrder);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 1'010, 0));
  EXPECT_EQ(engine_.open_orders(), 0u);
}

TEST_F(EngineTest, CancelOfAPartiallyFilledOrderReleasesItsRemainder) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId s = Rest(kAlice, Side::kSell, 100, 5);
  Place(Limit(kBob, Side::kBuy, 100, 2));
  Events ev = Cancel(kAlice, s);
  ASSERT_EQ(Types(ev), "OrderCanceled");
  const OrderCanceled c = At<OrderCanceled>(ev, 0);
  EXPECT_EQ(c.side, Side::kSell);
  EXPECT_EQ(c.remaining, Qty{3});
  EXPECT_EQ(c.released, Amount{3'000});
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc - 2'000, 0));
}

TEST_F(EngineTest, CancelByClientOrderId) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 2), "my-1"));
  Rest(WithClientId(Limit(kBob, Side::kBuy, 100, 2), "my-1"));
  Rejected r = ExpectReject(CancelByClientCmd(kAlice, "nope"), RejectReason::kUnknownOrder);
  EXPECT_EQ(r.order_id, OrderId{0});
  EXPECT_EQ(r.client_order_id.view(), "nope");
  ExpectReject(CancelByClientCmd(kAlice, "my-1", kEthUsdt), RejectReason::kUnknownOrder);
  ExpectReject(CancelByClientCmd(kCarol, "my-1"), RejectReason::kUnknownOrder);

  Events ev = Run(CancelByClientCmd(kAlice, "my-1"));
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, a);
  EXPECT_EQ(At<OrderCanceled>(ev, 0).account, kAlice);
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released, Amount{2'000});
  ExpectReject(CancelByClientCmd(kAlice, "my-1"), RejectReason::kUnknownOrder);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt - 2'000, 2'000));
}

TEST_F(EngineTest, CancelAllCancelsTheAccountsOrdersOfOneMarketInAscendingId) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId z = Rest(kAlice, Side::kBuy, 98, 2);
  const OrderId y = Rest(kAlice, Side::kSell, 105, 1);
  const OrderId x = Rest(kAlice, Side::kBuy, 99, 2);
  const OrderId e = Rest(kAlice, Side::kBuy, 100, 10, kEthUsdt);
  const OrderId b = Rest(kBob, Side::kBuy, 97, 2);
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(x), Raw(z), Raw(b)}));

  Events ev = Run(CancelAll{kAlice, kBtcUsdt});
  ASSERT_EQ(Types(ev), "OrderCanceled OrderCanceled OrderCanceled");
  const OrderCanceled c0 = At<OrderCanceled>(ev, 0);
  EXPECT_EQ(c0.order_id, z);
  EXPECT_EQ(c0.side, Side::kBuy);
  EXPECT_EQ(c0.remaining, Qty{2});
  EXPECT_EQ(c0.released, Amount{1'960});
  const OrderCanceled c1 = At<OrderCanceled>(ev, 1);
  EXPECT_EQ(c1.order_id, y);
  EXPECT_EQ(c1.side, Side::kSell);
  EXPECT_EQ(c1.released, Amount{1'000});
  const OrderCanceled c2 = At<OrderCanceled>(ev, 2);
  EXPECT_EQ(c2.order_id, x);
  EXPECT_EQ(c2.released, Amount{1'980});
  for (const OrderCanceled& c : All<OrderCanceled>(ev)) {
    EXPECT_EQ(c.account, kAlice);
    EXPECT_EQ(c.market, kBtcUsdt);
  }
  // Bob's order and Alice's ETHUSDT order stay.
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(b)}));
  EXPECT_TRUE(engine_.FindOrder(e).has_value());
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 1'000, 1'000));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc, 0));

  Rejected r = ExpectReject(CancelAll{kAlice, kBtcUsdt}, RejectReason::kUnknownOrder);
  EXPECT_EQ(r.command, CommandType::kCancelAll);
  EXPECT_EQ(r.order_id, OrderId{0});
  ExpectReject(CancelAll{kCarol, kBtcUsdt}, RejectReason::kUnknownOrder);
  ExpectReject(CancelAll{kAlice, kNoMarket}, RejectReason::kUnknownMarket);
  ExpectReject(CancelAll{kNoAccount, kBtcUsdt}, RejectReason::kUnknownAccount);
}

// ---------------------------------------------------------------------------
// Amend

TEST_F(EngineTest, AmendQuantityDownAtTheSamePriceKeepsPriority) {
  Fund(kAlice);
  Fund(kBob);
  Fund(kCarol);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  const OrderId b = Rest(kBob, Side::kBuy, 100, 3);
  Events ev = Amend(kAlice, a, 0, 2);
  ASSERT_EQ(Types(ev), "OrderAmended");
  const OrderAmended m = At<OrderAmended>(ev, 0);
  EXPECT_EQ(m.order_id, a);
  EXPECT_EQ(m.account, kAlice);
  EXPECT_EQ(m.market, kBtcUsdt);
  EXPECT_EQ(m.side, Side::kBuy);
  EXPECT_EQ(m.new_price, Price{100});
  EXPECT_EQ(m.new_qty, Qty{2});
  EXPECT_EQ(m.new_remaining, Qty{2});
  EXPECT_EQ(m.lock_delta, Amount{-3'000});
  EXPECT_TRUE(m.keeps_priority);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000, 2'000));
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(a), Raw(b)}));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "100x5/2");

  // Naming the same price explicitly is the same amend.
  ev = Amend(kBob, b, 100, 2);
  ASSERT_EQ(Types(ev), "OrderAmended");
  EXPECT_TRUE(At<OrderAmended>(ev, 0).keeps_priority);
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{-1'000});

  // Alice is still first in the queue.
  ev = Place(Limit(kCarol, Side::kSell, 100, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, a);
  EXPECT_TRUE(At<Trade>(ev, 1).maker_filled);
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(b)}));
}

TEST_F(EngineTest, AmendSellQuantityDownReleasesBase) {
  Fund(kAlice);
  const OrderId s = Rest(kAlice, Side::kSell, 100, 5);
  Events ev = Amend(kAlice, s, 0, 3);
  ASSERT_EQ(Types(ev), "OrderAmended");
  EXPECT_EQ(At<OrderAmended>(ev, 0).side, Side::kSell);
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{-2'000});
  EXPECT_TRUE(At<OrderAmended>(ev, 0).keeps_priority);
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc - 3'000, 3'000));
  // A sell's price change moves no funds but still re-queues.
  ev = Amend(kAlice, s, 101, 0);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{0});
  EXPECT_FALSE(At<OrderAmended>(ev, 0).keeps_priority);
  EXPECT_EQ(At<OrderRested>(ev, 1).remaining, Qty{3});
  EXPECT_EQ(engine_.FindOrder(s)->price, Price{101});
}

TEST_F(EngineTest, AmendPriceChangeRequeuesBehindTheLevel) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(kAlice, Side::kBuy, 99, 5);
  const OrderId b = Rest(kBob, Side::kBuy, 100, 3);
  Events ev = Amend(kAlice, a, 100, 0);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  const OrderAmended m = At<OrderAmended>(ev, 0);
  EXPECT_EQ(m.order_id, a);
  EXPECT_EQ(m.new_price, Price{100});
  EXPECT_EQ(m.new_qty, Qty{5});
  EXPECT_EQ(m.new_remaining, Qty{5});
  EXPECT_EQ(m.lock_delta, Amount{50});
  EXPECT_FALSE(m.keeps_priority);
  EXPECT_EQ(At<OrderRested>(ev, 1).order_id, a);
  EXPECT_EQ(At<OrderRested>(ev, 1).remaining, Qty{5});
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(b), Raw(a)}));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 5'000, 5'000));

  // Price and quantity down together: re-queued, the difference released.
  ev = Amend(kAlice, a, 98, 3);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{2'940 - 5'000});
  EXPECT_FALSE(At<OrderAmended>(ev, 0).keeps_priority);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'940, 2'940));
  EXPECT_EQ(DepthOf(kBtcUsdt, Side::kBuy), "100x3/1 98x3/1");
}

TEST_F(EngineTest, AmendQuantityUpRequeues) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 2);
  const OrderId b = Rest(kBob, Side::kBuy, 100, 3);
  Events ev = Amend(kAlice, a, 0, 4);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  const OrderAmended m = At<OrderAmended>(ev, 0);
  EXPECT_EQ(m.new_qty, Qty{4});
  EXPECT_EQ(m.new_remaining, Qty{4});
  EXPECT_EQ(m.lock_delta, Amount{2'000});
  EXPECT_FALSE(m.keeps_priority);
  EXPECT_EQ(Queue(kBtcUsdt, Side::kBuy), (std::vector<uint64_t>{Raw(b), Raw(a)}));
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 4'000, 4'000));
  EXPECT_EQ(engine_.FindOrder(a)->qty, Qty{4});
}

TEST_F(EngineTest, AmendToACrossingPriceTradesAsTaker) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId m = Rest(kBob, Side::kSell, 101, 2);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  Events ev = Amend(kAlice, a, 101, 0);
  ASSERT_EQ(Types(ev), "OrderAmended Trade OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{50});
  EXPECT_FALSE(At<OrderAmended>(ev, 0).keeps_priority);
  const Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.maker_order_id, m);
  EXPECT_EQ(t.taker_order_id, a);
  EXPECT_EQ(t.taker_side, Side::kBuy);
  EXPECT_EQ(t.taker_account, kAlice);
  EXPECT_EQ(t.price, Price{101});
  EXPECT_EQ(t.qty, Qty{2});
  EXPECT_EQ(t.taker_fee, Amount{4});  // the amended order pays the taker rate
  EXPECT_EQ(t.maker_fee, Amount{3});  // ceil(2020 × 10 / 10000)
  EXPECT_TRUE(t.maker_filled);
  EXPECT_FALSE(t.taker_filled);
  EXPECT_EQ(At<OrderRested>(ev, 2).remaining, Qty{3});
  EXPECT_EQ(At<OrderRested>(ev, 2).released, Amount{0});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 5'050, 3'030));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc + 2'000 - 4, 0));
  EXPECT_EQ(engine_.FindOrder(a)->remaining, Qty{3});
}

TEST_F(EngineTest, AmendThatFillsCompletelyReleasesThePriceImprovement) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 101, 2);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 2);
  Events ev = Amend(kAlice, a, 102, 0);
  ASSERT_EQ(Types(ev), "OrderAmended Trade");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{40});  // 2040 - 2000
  const Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.price, Price{101});
  EXPECT_TRUE(t.taker_filled);
  EXPECT_EQ(t.taker_released, Amount{20});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'020, 0));
  EXPECT_FALSE(engine_.FindOrder(a).has_value());
}

TEST_F(EngineTest, AmendOfAPartiallyFilledOrderCountsTheFilledPart) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  Place(Limit(kBob, Side::kSell, 100, 2));
  Rejected r = ExpectReject(AmendCmd(kAlice, a, 0, 2), RejectReason::kInvalidQuantity);
  EXPECT_EQ(r.command, CommandType::kAmendOrder);
  EXPECT_EQ(r.order_id, a);
  ExpectReject(AmendCmd(kAlice, a, 0, 1), RejectReason::kInvalidQuantity);
  Events ev = Amend(kAlice, a, 0, 3);
  ASSERT_EQ(Types(ev), "OrderAmended");
  const OrderAmended m = At<OrderAmended>(ev, 0);
  EXPECT_EQ(m.new_qty, Qty{3});
  EXPECT_EQ(m.new_remaining, Qty{1});
  EXPECT_EQ(m.lock_delta, Amount{-2'000});
  EXPECT_TRUE(m.keeps_priority);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 3'000, 1'000));
  // Quantity up from there: new remaining 4.
  ev = Amend(kAlice, a, 0, 6);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).new_remaining, Qty{4});
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{3'000});
  EXPECT_EQ(At<OrderRested>(ev, 1).remaining, Qty{4});
}

TEST_F(EngineTest, AmendOfARestedImprovedBuyMovesTheExactDifference) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId a = NextOrderId();
  Place(Limit(kAlice, Side::kBuy, 105, 4));  // 2 filled at 100, 2 rest at 105 locking 2100
  // New lock 1 × 105 × 10 = 1050; the surplus went back when the order rested.
  Events ev = Amend(kAlice, a, 0, 3);
  ASSERT_EQ(Types(ev), "OrderAmended");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{-1'050});
  EXPECT_EQ(At<OrderAmended>(ev, 0).new_remaining, Qty{1});
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000 - 1'050, 1'050));
}

TEST_F(EngineTest, AmendedBuyThatFillsBelowItsNewPriceAndRestsReturnsTheSurplus) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId a = Rest(kAlice, Side::kBuy, 99, 4);
  Events ev = Amend(kAlice, a, 105, 0);
  ASSERT_EQ(Types(ev), "OrderAmended Trade OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{4'200 - 3'960});
  EXPECT_EQ(At<Trade>(ev, 1).price, Price{100});
  EXPECT_EQ(At<Trade>(ev, 1).taker_order_id, a);
  const OrderRested r = At<OrderRested>(ev, 2);
  EXPECT_EQ(r.order_id, a);
  EXPECT_EQ(r.remaining, Qty{2});
  EXPECT_EQ(r.released, Amount{100});  // 4200 - 2000 - 2 × 105 × 10
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 2'000 - 2'100, 2'100));
  EXPECT_EQ(engine_.FindOrder(a)->locked, Amount{2'100});
}

TEST_F(EngineTest, AmendWithoutChangeIsNoChange) {
  Fund(kAlice);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  ExpectReject(AmendCmd(kAlice, a, 0, 0), RejectReason::kNoChange);
  ExpectReject(AmendCmd(kAlice, a, 100, 5), RejectReason::kNoChange);
  ExpectReject(AmendCmd(kAlice, a, 100, 0), RejectReason::kNoChange);
  ExpectReject(AmendCmd(kAlice, a, 0, 5), RejectReason::kNoChange);
}

TEST_F(EngineTest, AmendChecks) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 5);
  ExpectReject(AmendCmd(kAlice, a, 0, 3, kNoMarket), RejectReason::kUnknownMarket);
  ExpectReject(AmendCmd(kNoAccount, a, 0, 3), RejectReason::kUnknownAccount);
  Rejected r = ExpectReject(AmendCmd(kAlice, OrderId{999}, 0, 3), RejectReason::kUnknownOrder);
  EXPECT_EQ(r.order_id, OrderId{999});
  ExpectReject(AmendCmd(kBob, a, 0, 3), RejectReason::kUnknownOrder);
  ExpectReject(AmendCmd(kAlice, a, 0, 3, kEthUsdt), RejectReason::kUnknownOrder);
  ExpectReject(AmendCmd(kAlice, a, 10'000'001, 0), RejectReason::kInvalidPrice);
  ExpectReject(AmendCmd(kAlice, a, -1, 0), RejectReason::kInvalidPrice);
  ExpectReject(AmendCmd(kAlice, a, 0, 100'001), RejectReason::kInvalidQuantity);
  ExpectReject(AmendCmd(kAlice, a, 0, -1), RejectReason::kInvalidQuantity);
  // Notional on the new total quantity: 100 × 1 × 10 is the minimum.
  ExpectReject(AmendCmd(kAlice, a, 99, 1), RejectReason::kMinNotional);
  ExpectReject(AmendCmd(kAlice, a, 19, 0), RejectReason::kMinNotional);  // 950
  EXPECT_EQ(Types(Amend(kAlice, a, 0, 1)), "OrderAmended");
  // Unknown order comes before no-change.
  ExpectReject(AmendCmd(kBob, a, 0, 0), RejectReason::kUnknownOrder);
}

TEST_F(EngineTest, AmendByClientOrderId) {
  Fund(kAlice);
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 5), "amend-me"));
  Events ev = Run(
      AmendOrder{kAlice, kBtcUsdt, OrderId{0}, ClientOrderId::From("amend-me"), Price{0}, Qty{3}});
  ASSERT_EQ(Types(ev), "OrderAmended");
  EXPECT_EQ(At<OrderAmended>(ev, 0).order_id, a);
  Rejected r = ExpectReject(
      AmendOrder{kAlice, kBtcUsdt, OrderId{0}, ClientOrderId::From("other"), Price{0}, Qty{2}},
      RejectReason::kUnknownOrder);
  EXPECT_EQ(r.order_id, OrderId{0});
  EXPECT_EQ(r.client_order_id.view(), "other");
  // The amended order keeps its client id.
  ev = Run(CancelByClientCmd(kAlice, "amend-me"));
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, a);
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released, Amount{3'000});
}

TEST_F(EngineTest, LimitMakerAmendedToACrossingPriceWouldTakeLiquidity) {
  Fund(kAlice);
  Fund(kBob);
  Rest(kBob, Side::kSell, 100, 2);
  const OrderId m = Rest(Maker(kAlice, Side::kBuy, 99, 3));
  ExpectReject(AmendCmd(kAlice, m, 100, 0), RejectReason::kWouldTakeLiquidity);
  ExpectReject(AmendCmd(kAlice, m, 101, 5), RejectReason::kWouldTakeLiquidity);
  // Not crossing: loses priority and rests.
  Events ev = Amend(kAlice, m, 98, 0);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  EXPECT_EQ(engine_.FindOrder(m)->type, OrderType::kLimitMaker);
  // Quantity down keeps priority without a cross check.
  EXPECT_EQ(Types(Amend(kAlice, m, 0, 2)), "OrderAmended");
  // A plain limit order amended across the book trades instead.
  const OrderId l = Rest(kAlice, Side::kBuy, 97, 2);
  EXPECT_EQ(Types(Amend(kAlice, l, 100, 0)), "OrderAmended Trade");
}

TEST_F(EngineTest, AmendNeedingMoreThanTheAvailableBalanceChangesNothing) {
  Credit(kCarol, kUsdt, 2'000);
  const OrderId c = Rest(kCarol, Side::kBuy, 100, 2);
  EXPECT_EQ(Bal(kCarol, kUsdt), B(0, 2'000));
  Rejected r = ExpectReject(AmendCmd(kCarol, c, 101, 0), RejectReason::kInsufficientBalance);
  EXPECT_EQ(r.order_id, c);
  ExpectReject(AmendCmd(kCarol, c, 0, 3), RejectReason::kInsufficientBalance);
  EXPECT_EQ(Bal(kCarol, kUsdt), B(0, 2'000));
  EXPECT_EQ(engine_.FindOrder(c)->price, Price{100});
  // Lowering the price frees funds and needs none.
  Events ev = Amend(kCarol, c, 99, 0);
  ASSERT_EQ(Types(ev), "OrderAmended OrderRested");
  EXPECT_EQ(At<OrderAmended>(ev, 0).lock_delta, Amount{-20});
  EXPECT_EQ(Bal(kCarol, kUsdt), B(20, 1'980));
}

// ---------------------------------------------------------------------------
// Client order ids

TEST_F(EngineTest, DuplicateClientOrderIdWhileOpenNamesTheFirstOrder) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 2), "c1"));
  Rejected r = ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 101, 1), "c1"),
                            RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(a));
  EXPECT_EQ(r.client_order_id.view(), "c1");
  EXPECT_EQ(r.order_id, OrderId{0});
  // Check 4 comes before the price check (5), and covers every market.
  r = ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 0, 1), "c1"),
                   RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(a));
  r = ExpectReject(WithClientId(MarketQty(kAlice, Side::kBuy, 5, kEthUsdt), "c1"),
                   RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(a));
  // Client ids are per account.
  Rest(WithClientId(Limit(kBob, Side::kBuy, 99, 2), "c1"));
}

TEST_F(EngineTest, ClientOrderIdStaysReservedForTheLastClosedOrders) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 2), "c1"));
  EXPECT_EQ(Types(Place(Limit(kBob, Side::kSell, 100, 2))), "OrderAccepted Trade");
  ASSERT_FALSE(engine_.FindOrder(a).has_value());
  // Filled, but still one of the last 2 closed orders.
  Rejected r = ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "c1"),
                            RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(a));

  const OrderId c2 = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "c2"));
  Cancel(kAlice, c2);
  r = ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "c1"),
                   RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(a));
  r = ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "c2"),
                   RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(c2));

  const OrderId c3 = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "c3"));
  Cancel(kAlice, c3);
  // "c1" is out of the memory of 2 closed orders; "c2" and "c3" are in it.
  const OrderId again = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "c1"));
  EXPECT_EQ(Raw(again), Raw(engine_.last_sequence()));
  ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "c2"),
               RejectReason::kDuplicateClientOrderId);
  ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "c3"),
               RejectReason::kDuplicateClientOrderId);
  Events ev = Run(CancelByClientCmd(kAlice, "c1"));
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, again);
}

TEST_F(EngineTest, ExpiredOrderReservesItsClientIdButARejectedOneDoesNot) {
  Fund(kAlice);
  const OrderId ioc = NextOrderId();
  EXPECT_EQ(Types(Place(WithClientId(Limit(kAlice, Side::kBuy, 100, 1, TimeInForce::kIoc), "x"))),
            "OrderAccepted OrderExpired");
  Rejected r = ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "x"),
                            RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(ioc));

  ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 0, 1), "y"), RejectReason::kInvalidPrice);
  Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "y"));
}

// ---------------------------------------------------------------------------
// Market status

TEST_F(EngineTest, HaltedMarketRejectsPlaceAmendAndCancel) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 2);
  Events ev = SetStatus(kBtcUsdt, MarketStatus::kHalted);
  ASSERT_EQ(Types(ev), "MarketStatusChanged");
  EXPECT_EQ(At<MarketStatusChanged>(ev, 0).market, kBtcUsdt);
  EXPECT_EQ(At<MarketStatusChanged>(ev, 0).status, MarketStatus::kHalted);
  EXPECT_EQ(engine_.market_status(kBtcUsdt), MarketStatus::kHalted);

  ExpectReject(Limit(kBob, Side::kSell, 100, 2), RejectReason::kMarketNotTrading);
  ExpectReject(MarketQty(kBob, Side::kSell, 2), RejectReason::kMarketNotTrading);
  ExpectReject(AmendCmd(kAlice, a, 0, 1), RejectReason::kMarketNotTrading);
  Rejected r = ExpectReject(CancelCmd(kAlice, a), RejectReason::kMarketNotTrading);
  EXPECT_EQ(r.order_id, a);
  ExpectReject(CancelAll{kAlice, kBtcUsdt}, RejectReason::kMarketNotTrading);
  // The status is checked before the order.
  ExpectReject(CancelCmd(kAlice, OrderId{999}), RejectReason::kMarketNotTrading);
  ExpectReject(AmendCmd(kAlice, OrderId{999}, 0, 1), RejectReason::kMarketNotTrading);
  // The order stays in the book; other markets trade on.
  EXPECT_TRUE(engine_.FindOrder(a).has_value());
  Rest(kAlice, Side::kBuy, 100, 10, kEthUsdt);

  EXPECT_EQ(Types(SetStatus(kBtcUsdt, MarketStatus::kTrading)), "MarketStatusChanged");
  ev = Place(Limit(kBob, Side::kSell, 100, 2));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, a);
}

TEST_F(EngineTest, CancelOnlyMarketAllowsOnlyCancels) {
  Fund(kAlice);
  Fund(kBob);
  const OrderId a = Rest(kAlice, Side::kBuy, 100, 2);
  const OrderId b = Rest(kAlice, Side::kBuy, 99, 2);
  const OrderId c = Rest(kAlice, Side::kSell, 110, 2);
  EXPECT_EQ(Types(SetStatus(kBtcUsdt, MarketStatus::kCancelOnly)), "MarketStatusChanged");
  EXPECT_EQ(engine_.market_status(kBtcUsdt), MarketStatus::kCancelOnly);
  ExpectReject(Limit(kBob, Side::kSell, 100, 2), RejectReason::kMarketNotTrading);
  ExpectReject(Maker(kBob, Side::kSell, 120, 2), RejectReason::kMarketNotTrading);
  ExpectReject(AmendCmd(kAlice, a, 0, 1), RejectReason::kMarketNotTrading);
  ExpectReject(CancelCmd(kAlice, OrderId{999}), RejectReason::kUnknownOrder);

  Events ev = Cancel(kAlice, a);
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released, Amount{2'000});
  ev = Run(CancelAll{kAlice, kBtcUsdt});
  ASSERT_EQ(Types(ev), "OrderCanceled OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, b);
  EXPECT_EQ(At<OrderCanceled>(ev, 1).order_id, c);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Bal(kAlice, kBtc), B(kFundBtc, 0));

  EXPECT_EQ(Types(SetStatus(kBtcUsdt, MarketStatus::kTrading)), "MarketStatusChanged");
  Rest(kBob, Side::kSell, 100, 2);
}

TEST_F(EngineTest, SetMarketStatusRejections) {
  Rejected r =
      ExpectReject(SetMarketStatus{kNoMarket, MarketStatus::kHalted}, RejectReason::kUnknownMarket);
  EXPECT_EQ(r.command, CommandType::kSetMarketStatus);
  EXPECT_EQ(r.account, AccountId{0});
  EXPECT_EQ(r.market, kNoMarket);
  r = ExpectReject(SetMarketStatus{kEthUsdt, static_cast<MarketStatus>(7)},
                   RejectReason::kInvalidStatus);
  EXPECT_EQ(r.market, kEthUsdt);
  EXPECT_EQ(engine_.market_status(kEthUsdt), MarketStatus::kTrading);
}

// ---------------------------------------------------------------------------
// Deposits and withdrawals

TEST_F(EngineTest, DepositAndWithdrawal) {
  Events ev = Run(DepositCmd(kAlice, kUsdt, 5'000, "r1"));
  ASSERT_EQ(Types(ev), "Deposited");
  const Deposited d = At<Deposited>(ev, 0);
  const uint64_t r1 = Raw(engine_.last_sequence());
  EXPECT_EQ(Raw(d.transfer_id), r1);
  EXPECT_EQ(d.account, kAlice);
  EXPECT_EQ(d.asset, kUsdt);
  EXPECT_EQ(d.amount, Amount{5'000});
  EXPECT_EQ(d.ref.view(), "r1");
  EXPECT_EQ(Bal(kAlice, kUsdt), B(5'000, 0));
  EXPECT_EQ(engine_.supply(kUsdt), Amount{5'000});

  ev = Run(WithdrawCmd(kAlice, kUsdt, 2'000, "w1"));
  ASSERT_EQ(Types(ev), "Withdrawn");
  const Withdrawn w = At<Withdrawn>(ev, 0);
  EXPECT_EQ(Raw(w.transfer_id), Raw(engine_.last_sequence()));
  EXPECT_EQ(w.account, kAlice);
  EXPECT_EQ(w.asset, kUsdt);
  EXPECT_EQ(w.amount, Amount{2'000});
  EXPECT_EQ(w.ref.view(), "w1");
  EXPECT_EQ(Bal(kAlice, kUsdt), B(3'000, 0));
  EXPECT_EQ(engine_.supply(kUsdt), Amount{3'000});
}

TEST_F(EngineTest, TransferReferencesAreIdempotentAcrossDepositsAndWithdrawals) {
  Run(DepositCmd(kAlice, kUsdt, 5'000, "r1"));
  const uint64_t r1 = Raw(engine_.last_sequence());
  Rejected r =
      ExpectReject(DepositCmd(kAlice, kUsdt, 5'000, "r1"), RejectReason::kDuplicateTransfer);
  EXPECT_EQ(r.existing_id, r1);
  EXPECT_EQ(r.command, CommandType::kDeposit);
  EXPECT_EQ(r.account, kAlice);
  EXPECT_EQ(r.market, MarketId{0});
  EXPECT_EQ(r.order_id, OrderId{0});
  EXPECT_TRUE(r.client_order_id.empty());
  // Any account, any asset, either direction.
  r = ExpectReject(DepositCmd(kBob, kBtc, 1, "r1"), RejectReason::kDuplicateTransfer);
  EXPECT_EQ(r.existing_id, r1);
  r = ExpectReject(WithdrawCmd(kAlice, kUsdt, 1, "r1"), RejectReason::kDuplicateTransfer);
  EXPECT_EQ(r.existing_id, r1);
  EXPECT_EQ(r.command, CommandType::kWithdraw);

  Run(WithdrawCmd(kAlice, kUsdt, 1'000, "w1"));
  const uint64_t w1 = Raw(engine_.last_sequence());
  r = ExpectReject(DepositCmd(kAlice, kUsdt, 1'000, "w1"), RejectReason::kDuplicateTransfer);
  EXPECT_EQ(r.existing_id, w1);
  // The duplicate check comes before the balance check.
  r = ExpectReject(WithdrawCmd(kAlice, kUsdt, 1'000'000, "w1"), RejectReason::kDuplicateTransfer);
  EXPECT_EQ(r.existing_id, w1);
  // And after the amount check.
  ExpectReject(WithdrawCmd(kAlice, kUsdt, 0, "w1"), RejectReason::kInvalidAmount);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(4'000, 0));
}

TEST_F(EngineTest, TransferRejections) {
  Fund(kAlice);
  Rest(kAlice, Side::kBuy, 100, 10);  // locks 10000 USDT
  ExpectReject(WithdrawCmd(kAlice, kUsdt, kFundUsdt - 10'000 + 1, "w-big"),
               RejectReason::kInsufficientBalance);
  // A rejected transfer does not use up its reference.
  Events ev = Run(WithdrawCmd(kAlice, kUsdt, kFundUsdt - 10'000, "w-big"));
  ASSERT_EQ(Types(ev), "Withdrawn");
  EXPECT_EQ(Bal(kAlice, kUsdt), B(0, 10'000));

  ExpectReject(DepositCmd(kAlice, kUsdt, 0, "z1"), RejectReason::kInvalidAmount);
  ExpectReject(DepositCmd(kAlice, kUsdt, -5, "z2"), RejectReason::kInvalidAmount);
  ExpectReject(WithdrawCmd(kAlice, kBtc, 0, "z3"), RejectReason::kInvalidAmount);
  ExpectReject(WithdrawCmd(kAlice, kBtc, -1, "z4"), RejectReason::kInvalidAmount);
  Rejected r = ExpectReject(DepositCmd(kNoAccount, kUsdt, 1, "z5"), RejectReason::kUnknownAccount);
  EXPECT_EQ(r.account, kNoAccount);
  ExpectReject(DepositCmd(kNoAccount, kNoAsset, 0, "z6"), RejectReason::kUnknownAccount);
  ExpectReject(DepositCmd(kAlice, kNoAsset, 0, "z7"), RejectReason::kUnknownAsset);
  ExpectReject(WithdrawCmd(kAlice, kNoAsset, 1, "z8"), RejectReason::kUnknownAsset);
  ExpectReject(WithdrawCmd(kNoAccount, kUsdt, 1, "z9"), RejectReason::kUnknownAccount);
  ExpectReject(WithdrawCmd(kCarol, kUsdt, 1, "z10"), RejectReason::kInsufficientBalance);
}

TEST_F(EngineTest, DepositThatWouldOverflowTheBalanceIsRejected) {
  Events ev = Run(DepositCmd(kCarol, kEth, kInt64Max - 1, "big"));
  ASSERT_EQ(Types(ev), "Deposited");
  ExpectReject(DepositCmd(kCarol, kEth, 2, "big-2"), RejectReason::kOverflow);
  ExpectReject(DepositCmd(kCarol, kEth, kInt64Max, "big-3"), RejectReason::kOverflow);
  EXPECT_EQ(Types(Run(DepositCmd(kCarol, kEth, 1, "big-4"))), "Deposited");
  EXPECT_EQ(Bal(kCarol, kEth), B(kInt64Max, 0));
  EXPECT_EQ(Types(Run(WithdrawCmd(kCarol, kEth, kInt64Max, "big-5"))), "Withdrawn");
  EXPECT_EQ(Bal(kCarol, kEth), B(0, 0));
}

// ---------------------------------------------------------------------------
// Overflow at the edge of int64

TEST_F(EngineTest, OrderAtMaxPriceAndMaxQtyNearTheInt64Limit) {
  // ETHBTC: npt 1, max_price = max_qty = kBigMax; kBigMax² fits int64.
  constexpr int64_t kN = kBigMax * kBigMax;
  static_assert(kN == 9'223'372'030'926'249'001);
  Credit(kAlice, kBtc, kN);
  Credit(kBob, kEth, kBigMax);
  ExpectReject(Limit(kAlice, Side::kBuy, kBigMax + 1, 1, TimeInForce::kGtc, kEthBtc),
               RejectReason::kInvalidPrice);
  ExpectReject(Limit(kAlice, Side::kBuy, 1, kBigMax + 1, TimeInForce::kGtc, kEthBtc),
               RejectReason::kInvalidQuantity);
  ExpectReject(Limit(kAlice, Side::kBuy, kInt64Max, kInt64Max, TimeInForce::kGtc, kEthBtc),
               RejectReason::kInvalidPrice);

  const OrderId a = NextOrderId();
  Events ev = Place(Limit(kAlice, Side::kBuy, kBigMax, kBigMax, TimeInForce::kGtc, kEthBtc));
  ASSERT_EQ(Types(ev), "OrderAccepted OrderRested");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{kN});
  EXPECT_EQ(Bal(kAlice, kBtc), B(0, kN));

  ev = Place(Limit(kBob, Side::kSell, 1, kBigMax, TimeInForce::kGtc, kEthBtc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade");
  const Trade t = At<Trade>(ev, 1);
  EXPECT_EQ(t.maker_order_id, a);
  EXPECT_EQ(t.price, Price{kBigMax});
  EXPECT_EQ(t.base_qty, Amount{kBigMax});
  EXPECT_EQ(t.notional, Amount{kN});
  EXPECT_EQ(t.maker_fee, Amount{3'037'001});               // ceil(kBigMax × 10 / 10^4), ETH
  EXPECT_EQ(t.taker_fee, Amount{18'446'744'061'852'499});  // ceil(kN × 20 / 10^4), BTC
  EXPECT_TRUE(t.maker_filled);
  EXPECT_TRUE(t.taker_filled);
  EXPECT_EQ(Bal(kAlice, kBtc), B(0, 0));
  EXPECT_EQ(Bal(kAlice, kEth), B(kBigMax - 3'037'001, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kN - 18'446'744'061'852'499, 0));
  EXPECT_EQ(Bal(kBob, kEth), B(0, 0));
  EXPECT_EQ(Bal(kFee, kBtc), B(18'446'744'061'852'499, 0));
  EXPECT_EQ(Bal(kFee, kEth), B(3'037'001, 0));
}

TEST_F(EngineTest, MarketBuyWithAHugeQuoteBudget) {
  constexpr int64_t kN = kBigMax * kBigMax;
  Credit(kBob, kEth, kBigMax);
  const OrderId m = Rest(kBob, Side::kSell, kBigMax, kBigMax, kEthBtc);
  // No balance: the lock of INT64_MAX is simply not available, in both markets.
  ExpectReject(MarketQuote(kAlice, Side::kBuy, kInt64Max, kEthBtc),
               RejectReason::kInsufficientBalance);
  ExpectReject(MarketQuote(kAlice, Side::kBuy, kInt64Max), RejectReason::kInsufficientBalance);
  // A market buy by qty: the exact cost kN is not available either.
  ExpectReject(MarketQty(kAlice, Side::kBuy, kBigMax, kEthBtc), RejectReason::kInsufficientBalance);

  Credit(kAlice, kBtc, kInt64Max);
  const OrderId t = NextOrderId();
  Events ev = Place(MarketQuote(kAlice, Side::kBuy, kInt64Max, kEthBtc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{kInt64Max});
  const Trade tr = At<Trade>(ev, 1);
  EXPECT_EQ(tr.maker_order_id, m);
  EXPECT_EQ(tr.taker_order_id, t);
  EXPECT_EQ(tr.qty, Qty{kBigMax});
  EXPECT_EQ(tr.notional, Amount{kN});
  EXPECT_EQ(tr.maker_fee, Amount{9'223'372'030'926'250});  // ceil(kN × 10 / 10^4), BTC
  EXPECT_EQ(tr.taker_fee, Amount{6'074'001});              // ceil(kBigMax × 20 / 10^4), ETH
  const OrderExpired x = At<OrderExpired>(ev, 2);
  EXPECT_EQ(x.reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(x.remaining, Qty{0});
  EXPECT_EQ(x.released, Amount{kInt64Max - kN});
  EXPECT_EQ(Bal(kAlice, kBtc), B(kInt64Max - kN, 0));
  EXPECT_EQ(Bal(kAlice, kEth), B(kBigMax - 6'074'001, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kN - 9'223'372'030'926'250, 0));
}

TEST_F(EngineTest, MarketSellWithAHugeQuoteBudget) {
  constexpr int64_t kN = kBigMax * kBigMax;
  Credit(kAlice, kBtc, kN);
  const OrderId a = Rest(kAlice, Side::kBuy, kBigMax, kBigMax, kEthBtc);
  // The walk would sell kBigMax ETH, which Bob does not have.
  ExpectReject(MarketQuote(kBob, Side::kSell, kInt64Max, kEthBtc),
               RejectReason::kInsufficientBalance);
  Credit(kBob, kEth, kBigMax);
  Events ev = Place(MarketQuote(kBob, Side::kSell, kInt64Max, kEthBtc));
  ASSERT_EQ(Types(ev), "OrderAccepted Trade OrderExpired");
  EXPECT_EQ(At<OrderAccepted>(ev, 0).locked, Amount{kBigMax});
  EXPECT_EQ(At<Trade>(ev, 1).maker_order_id, a);
  EXPECT_EQ(At<Trade>(ev, 1).notional, Amount{kN});
  EXPECT_EQ(At<OrderExpired>(ev, 2).reason, ExpireReason::kNoLiquidity);
  EXPECT_EQ(At<OrderExpired>(ev, 2).released, Amount{0});
  EXPECT_EQ(Bal(kBob, kEth), B(0, 0));
  EXPECT_EQ(Bal(kBob, kBtc), B(kN - 18'446'744'061'852'499, 0));
}

// ---------------------------------------------------------------------------
// Images and replay

class ImageTest : public EngineTest {
 protected:
  // Balances, resting orders on both sides of two markets, trades, fees, a
  // reserved client id of a closed order, transfers, a non-default status.
  void Scenario() {
    Fund(kAlice);
    Fund(kBob);
    Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 5), "a-1"));
    Rest(kAlice, Side::kBuy, 99, 3);
    Rest(WithClientId(Limit(kBob, Side::kSell, 103, 2), "b-1"));
    Place(Limit(kBob, Side::kSell, 100, 2));
    Place(WithClientId(Limit(kBob, Side::kSell, 100, 3), "b-2"));
    Rest(kAlice, Side::kBuy, 100, 7, kEthUsdt);
    Rest(kBob, Side::kSell, 101, 7, kEthUsdt);
    Run(WithdrawCmd(kAlice, kEth, 5, "out-1"));
    ExpectReject(CancelCmd(kAlice, OrderId{999}), RejectReason::kUnknownOrder);
    SetStatus(kEthUsdt, MarketStatus::kCancelOnly);
  }
};

TEST_F(ImageTest, ExportThenRestoreInAFreshEngineGivesTheSameState) {
  Scenario();
  const EngineImage image = engine_.ExportImage();
  EXPECT_EQ(image.config_hash, engine_.ConfigHash());
  EXPECT_EQ(image.last_sequence, engine_.last_sequence());
  EXPECT_FALSE(image.orders.empty());
  EXPECT_FALSE(image.recent_client_ids.empty());
  EXPECT_FALSE(image.transfers.empty());

  Engine restored(config_);
  Status s = restored.Restore(image);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(restored.StateHash(), engine_.StateHash());
  EXPECT_EQ(Dump(restored.ExportImage()), Dump(image));
  EXPECT_EQ(restored.last_sequence(), engine_.last_sequence());
  EXPECT_EQ(restored.next_trade_id(), engine_.next_trade_id());
  EXPECT_EQ(restored.balance(kAlice, kUsdt), Bal(kAlice, kUsdt));
  EXPECT_EQ(restored.market_status(kEthUsdt), MarketStatus::kCancelOnly);
  EXPECT_TRUE(restored.CheckInvariants().ok());

  // Both go on identically: same events for the same command.
  const Command next{ts_, PlaceOrder(WithClientId(Limit(kBob, Side::kSell, 99, 9), "b-1"))};
  Events a, b;
  restored.Process(next, &b);
  engine_.Process(next, &a);
  journal_.insert(journal_.end(), a.begin(), a.end());
  EXPECT_EQ(Types(a), Types(b));
  EXPECT_EQ(Types(a), "Rejected");  // "b-1" is still open
  const Command next2{ts_ + 1, PlaceOrder(Limit(kBob, Side::kSell, 99, 9))};
  a.clear();
  b.clear();
  restored.Process(next2, &b);
  engine_.Process(next2, &a);
  journal_.insert(journal_.end(), a.begin(), a.end());
  EXPECT_EQ(Types(a), "OrderAccepted Trade OrderRested");  // 3 lots at 99, 6 rest
  EXPECT_EQ(Types(a), Types(b));
  EXPECT_EQ(restored.StateHash(), engine_.StateHash());
}

TEST_F(ImageTest, RestoreWithAnotherConfigurationFailsAndChangesNothing) {
  Scenario();
  EngineImage image = engine_.ExportImage();
  image.config_hash ^= 1;
  Engine fresh(config_);
  const uint64_t fresh_hash = fresh.StateHash();
  EXPECT_FALSE(fresh.Restore(image).ok());
  EXPECT_EQ(fresh.StateHash(), fresh_hash);

  // Restoring over a live engine fails the same way and leaves it alone.
  const uint64_t live_hash = engine_.StateHash();
  const std::string live = Dump(engine_.ExportImage());
  EXPECT_FALSE(engine_.Restore(image).ok());
  EXPECT_EQ(engine_.StateHash(), live_hash);
  EXPECT_EQ(Dump(engine_.ExportImage()), live);

  // An engine with a different configuration refuses a genuine image.
  EngineConfig other = MakeConfig();
  other.markets[0].taker_fee_bps = 25;
  ASSERT_TRUE(other.Validate().ok());
  Engine different(other);
  EXPECT_NE(different.ConfigHash(), engine_.ConfigHash());
  const uint64_t different_hash = different.StateHash();
  EXPECT_FALSE(different.Restore(engine_.ExportImage()).ok());
  EXPECT_EQ(different.StateHash(), different_hash);
}

// Images the engine could never have exported are refused, whole, and the
// engine restored into keeps its state: ids beyond the sequence, values beyond
// the market's limits, impossible totals, duplicates, non-canonical order.
TEST_F(ImageTest, RestoreRefusesImagesTheEngineCouldNotHaveMade) {
  Scenario();
  const EngineImage good = engine_.ExportImage();
  ASSERT_GE(good.orders.size(), 2u);
  ASSERT_FALSE(good.balances.empty());
  const int64_t max_price = config_.markets[0].max_price.value;
  const std::vector<std::pair<std::string, std::function<void(EngineImage&)>>> corruptions = {
      {"order id beyond the sequence",
       [](EngineImage& i) { i.orders[0].id = OrderId{Raw(i.last_sequence) + 1}; }},
      {"order id 0", [](EngineImage& i) { i.orders[0].id = OrderId{0}; }},
      {"price above max_price", [&](EngineImage& i) { i.orders[0].price = Price{max_price + 1}; }},
      {"remaining above quantity",
       [](EngineImage& i) { i.orders[0].remaining = Qty{i.orders[0].qty.value + 1}; }},
      {"huge sell remaining",
       [](EngineImage& i) {
         for (auto& o : i.orders) {
           if (o.side == Side::kSell) o.qty = o.remaining = Qty{int64_t{1} << 60};
         }
       }},
      {"a MARKET order resting", [](EngineImage& i) { i.orders[0].type = OrderType::kMarket; }},
      {"an IOC order resting", [](EngineImage& i) { i.orders[0].tif = TimeInForce::kIoc; }},
      {"supply above what the balances hold",
       [](EngineImage& i) { i.asset_totals[0].supply = Amount{INT64_MAX}; }},
      {"negative supply", [](EngineImage& i) { i.asset_totals[0].supply = Amount{-INT64_MAX}; }},
      {"duplicated balance", [](EngineImage& i) { i.balances.push_back(i.balances.back()); }},
      {"two open orders with one client id",
       [](EngineImage& i) {
         i.orders[1].has_client_id = true;
         i.orders[1].client_id = i.orders[0].client_id;
         i.orders[1].account = i.orders[0].account;
         i.orders[0].has_client_id = true;
       }},
      {"orders out of priority order", [](EngineImage& i) { std::swap(i.orders[0], i.orders[1]); }},
      {"next trade id 0", [](EngineImage& i) { i.next_trade_id = TradeId{0}; }},
      {"transfer id beyond the sequence",
       [](EngineImage& i) { i.transfers[0].id = TransferId{Raw(i.last_sequence) + 5}; }},
  };
  for (const auto& [name, corrupt] : corruptions) {
    EngineImage bad = good;
    corrupt(bad);
    Engine fresh(config_);
    const uint64_t before = fresh.StateHash();
    EXPECT_FALSE(fresh.Restore(bad).ok()) << name;
    EXPECT_EQ(fresh.StateHash(), before) << name;
  }
  Engine fresh(config_);
  EXPECT_TRUE(fresh.Restore(good).ok());
}

TEST_F(ImageTest, ReplayingTheEventsThroughApplyGivesTheSameState) {
  Scenario();
  Engine replayed(config_);
  EXPECT_NE(replayed.StateHash(), engine_.StateHash());
  for (const Event& e : journal_) replayed.Apply(e);
  EXPECT_EQ(replayed.StateHash(), engine_.StateHash());
  EXPECT_EQ(replayed.last_sequence(), engine_.last_sequence());  // rejects count too
  EXPECT_EQ(replayed.next_trade_id(), engine_.next_trade_id());
  EXPECT_TRUE(replayed.CheckInvariants().ok());
  // The replayed engine continues the sequence: the next order id is the same.
  const Command next{ts_, PlaceOrder(Limit(kCarol, Side::kBuy, 100, 1))};
  Events a, b;
  replayed.Process(next, &b);
  Events live = Run(next.body);
  EXPECT_EQ(Types(live), Types(b));
  EXPECT_EQ(replayed.StateHash(), engine_.StateHash());
}

TEST_F(ImageTest, StateHashDependsOnHistory) {
  Engine other(config_);
  EXPECT_EQ(other.StateHash(), engine_.StateHash());
  Scenario();
  EXPECT_NE(other.StateHash(), engine_.StateHash());
}

// ---------------------------------------------------------------------------
// Book structure

// An order joining an existing level deep in the book must join that level's
// queue, never open a second level at the same price.
TEST_F(EngineTest, OrderJoinsAnExistingLevelDeepInTheBook) {
  Fund(kAlice);
  std::vector<OrderId> ids;
  for (int64_t p = 100; p <= 130; ++p) ids.push_back(Rest(kAlice, Side::kBuy, p, 1));
  const OrderId deep = Rest(kAlice, Side::kBuy, 100, 2);
  const auto depth = engine_.Depth(kBtcUsdt, Side::kBuy, 100);
  ASSERT_EQ(depth.size(), 31u);
  EXPECT_EQ(depth.back().price, Price{100});
  EXPECT_EQ(depth.back().qty, Qty{3});
  EXPECT_EQ(depth.back().orders, 2u);
  const auto queue = Queue(kBtcUsdt, Side::kBuy);
  ASSERT_EQ(queue.size(), 32u);
  EXPECT_EQ(queue[30], Raw(ids.front()));
  EXPECT_EQ(queue[31], Raw(deep));
  // Emptying the deep level removes exactly it.
  Cancel(kAlice, ids.front());
  Cancel(kAlice, deep);
  EXPECT_EQ(engine_.Depth(kBtcUsdt, Side::kBuy, 100).size(), 30u);
  EXPECT_EQ(engine_.Depth(kBtcUsdt, Side::kBuy, 100).back().price, Price{101});
  EXPECT_TRUE(engine_.CheckInvariants().ok());
}

}  // namespace
}  // namespace mb::engine
