// Shared fixtures of the engine's unit tests (src/engine/*_test.cc), written
// from the rules in docs/engine.md: the three-market configuration they all
// run on, readable gtest output for the domain types, helpers that build
// commands and pick events apart, and EngineTest, which drives
// Engine::Process and checks after every test that the engine's invariants
// hold, that replaying the emitted events through Apply() rebuilds the same
// state, and that an exported image restores to it. FundedEngineTest starts
// with Alice and Bob funded, where most trading scenarios begin.
//
// Header-only: each test binary includes it once.
//
// Thread safety: test code; each test runs on gtest's main thread.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
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
#include "engine/engine.h"
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
inline void PrintTo(RefundReason v, std::ostream* os) { *os << ToString(v); }
inline void PrintTo(const Balance& b, std::ostream* os) {
  *os << "{available " << b.available.value << ", locked " << b.locked.value << "}";
}
}  // namespace engine
}  // namespace mb

namespace mb::engine {

inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

inline constexpr AssetId kBtc{0};
inline constexpr AssetId kUsdt{1};
inline constexpr AssetId kEth{2};
inline constexpr AssetId kNoAsset{3};

// npt 10: a price of p ticks and q lots costs 10·p·q USDT units.
inline constexpr MarketId kBtcUsdt{0};
// npt 1, lot 100 ETH units (fractional base fees), min_qty 5, no min notional.
inline constexpr MarketId kEthUsdt{1};
// npt 1, lot 1: max_price × max_qty × npt is just below 2^63.
inline constexpr MarketId kEthBtc{2};
inline constexpr MarketId kNoMarket{3};

inline constexpr int64_t kBigMax = 3'037'000'499;  // kBigMax² < 2^63 - 1 < (kBigMax + 1)²

inline constexpr AccountId kFee{0};
inline constexpr AccountId kAlice{1};
inline constexpr AccountId kBob{2};
inline constexpr AccountId kCarol{3};
inline constexpr AccountId kNoAccount{16};  // == max_accounts

// What Fund() deposits: 100 lots of BTC, 0.01 USDT, 1000 ETHUSDT lots of ETH.
inline constexpr int64_t kFundBtc = 100'000;
inline constexpr int64_t kFundUsdt = 1'000'000;
inline constexpr int64_t kFundEth = 100'000;

inline EngineConfig MakeConfig() {
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

inline std::string Types(const Events& events) {
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
inline std::string Dump(const EngineImage& im) {
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
    os << "order " << Raw(o.id) << ' ' << Raw(o.terms.account) << ' ' << Raw(o.terms.market) << ' '
       << ToString(o.terms.side) << ' ' << ToString(o.terms.type) << ' ' << ToString(o.terms.tif)
       << ' ' << ToString(o.terms.stp) << ' ' << o.terms.price.value << ' ' << o.terms.qty.value
       << ' ' << o.remaining.value << ' ' << o.locked.value << ' ' << o.created_ns << ' '
       << o.has_client_id << ' ' << o.client_id.lo << ' ' << o.client_id.hi << '\n';
  }
  for (const ImageClientId& c : im.recent_client_ids) {
    os << "client_id " << Raw(c.account) << ' ' << c.client_id.lo << ' ' << c.client_id.hi << ' '
       << Raw(c.order_id) << '\n';
  }
  for (const ImageTransfer& t : im.transfers) {
    os << "transfer " << t.ref.lo << ' ' << t.ref.hi << ' ' << Raw(t.id) << '\n';
  }
  for (const PendingTransfer& p : im.pending_transfers) {
    os << "pending " << Raw(p.id) << ' ' << Raw(p.account) << ' ' << Raw(p.asset) << ' '
       << p.amount.value << ' ' << p.fee.value << " '" << p.address.view() << "'\n";
  }
  for (Price p : im.last_prices) os << "last_price " << p.value << '\n';
  for (const ImageAccount& a : im.accounts) {
    os << "account " << Raw(a.id) << ' ' << a.created_ms << ' ' << a.name.view() << '\n';
  }
  for (const ImageApiKey& k : im.api_keys) {
    os << "api_key " << Raw(k.account) << ' ' << k.created_ms << ' ' << int{k.permissions} << ' '
       << k.ed25519 << ' ' << k.revoked << ' ' << k.key.view() << ' ' << k.secret.view() << '\n';
  }
  for (const AssetAdded& a : im.added_assets) {
    os << "added_asset " << Raw(a.asset) << ' ' << a.symbol.view() << ' ' << a.scale << '\n';
  }
  for (const MarketAdded& m : im.added_markets) {
    os << "added_market " << Raw(m.market) << ' ' << m.symbol.view() << ' ' << Raw(m.base) << ' '
       << Raw(m.quote) << ' ' << m.tick_units << ' ' << m.lot_units << ' ' << m.min_qty.value << ' '
       << m.max_qty.value << ' ' << m.max_price.value << ' ' << m.min_notional.value << ' '
       << m.maker_fee_bps << ' ' << m.taker_fee_bps << ' ' << ToString(m.status) << '\n';
  }
  for (const ImageIceberg& i : im.icebergs) {
    os << "iceberg " << Raw(i.id) << ' ' << i.slice.value << ' ' << i.hidden.value << '\n';
  }
  for (const ImageList& l : im.lists) {
    os << "list " << l.id << ' ' << Raw(l.account) << ' ' << ToString(l.type) << ' '
       << l.has_client_id << ' ' << Raw(l.orders[0]) << ' ' << Raw(l.orders[1]) << ' '
       << Raw(l.orders[2]) << '\n';
  }
  for (const OrderPending& p : im.pending) {
    os << "pending " << Raw(p.order_id) << ' ' << p.list_id << ' ' << ToString(p.terms.type) << ' '
       << p.terms.price.value << ' ' << p.terms.qty.value << ' ' << p.stop_price.value << '\n';
  }
  for (const ImageStop& s : im.stops) {
    const ImageOrder& o = s.order;
    os << "stop " << Raw(o.id) << ' ' << Raw(o.terms.account) << ' ' << Raw(o.terms.market) << ' '
       << ToString(o.terms.side) << ' ' << ToString(o.terms.type) << ' ' << ToString(o.terms.tif)
       << ' ' << o.terms.price.value << ' ' << o.terms.qty.value << ' ' << o.locked.value << ' '
       << s.stop_price.value << ' ' << s.trailing_delta << ' ' << s.active << ' ' << s.extreme.value
       << '\n';
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
    // A duplicate names the first user; a ResolveTransfer's reject, the
    // transfer it asked for.
    if (reason != RejectReason::kDuplicateClientOrderId &&
        reason != RejectReason::kDuplicateTransfer && r.command != CommandType::kResolveTransfer) {
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
  // A conditional order: `type` one of STOP_LOSS .. TAKE_PROFIT_LIMIT; the
  // *_LIMIT ones at `price`, GTC unless tif says otherwise.
  static PlaceOrder Stop(AccountId account, Side side, OrderType type, int64_t stop, int64_t qty,
                         int64_t price = 0, int32_t trailing_delta = 0,
                         TimeInForce tif = TimeInForce::kGtc) {
    PlaceOrder p;
    p.account = account;
    p.market = kBtcUsdt;
    p.side = side;
    p.type = type;
    p.tif = IsMarketLike(type) ? TimeInForce::kIoc : tif;
    p.price = Price{price};
    p.qty = Qty{qty};
    p.stop_price = Price{stop};
    p.trailing_delta = trailing_delta;
    return p;
  }
  static PlaceOrder WithStp(PlaceOrder p, StpMode stp) {
    p.stp = stp;
    return p;
  }
  static CancelOrder CancelCmd(AccountId account, OrderId id, MarketId market = kBtcUsdt) {
    return CancelOrder{account, market, id, {}, {}};
  }
  static CancelOrder CancelByClientCmd(AccountId account, std::string_view client_id,
                                       MarketId market = kBtcUsdt) {
    return CancelOrder{account, market, OrderId{0}, ClientOrderId::From(client_id), {}};
  }
  static AmendOrder AmendCmd(AccountId account, OrderId id, int64_t new_price, int64_t new_qty,
                             MarketId market = kBtcUsdt) {
    return AmendOrder{account, market, id, {}, Price{new_price}, Qty{new_qty}, false};
  }
  static Deposit DepositCmd(AccountId account, AssetId asset, int64_t amount,
                            std::string_view ref) {
    return Deposit{account, asset, Amount{amount}, TransferRef::From(ref)};
  }
  static Withdraw WithdrawCmd(AccountId account, AssetId asset, int64_t amount,
                              std::string_view ref) {
    return Withdraw{account, asset, Amount{amount}, TransferRef::From(ref)};
  }
  static TransferOut TransferOutCmd(AccountId account, AssetId asset, int64_t amount, int64_t fee,
                                    std::string_view ref,
                                    std::string_view address = "mbx:venue-b/1") {
    return TransferOut{account,
                       asset,
                       Amount{amount},
                       Amount{fee},
                       TransferRef::From(ref),
                       TransferAddress::From(address)};
  }
  static ResolveTransfer CompleteCmd(TransferId id) {
    return ResolveTransfer{id, true, RefundReason::kVoided};
  }
  static ResolveTransfer RefundCmd(TransferId id, RefundReason reason = RefundReason::kVoided) {
    return ResolveTransfer{id, false, reason};
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
    EXPECT_EQ(a.terms.account, p.account);
    EXPECT_EQ(a.terms.market, p.market);
    EXPECT_EQ(a.terms.side, p.side);
    EXPECT_EQ(a.terms.tif, TimeInForce::kFok);
    EXPECT_EQ(a.terms.price, p.price);
    EXPECT_EQ(a.terms.qty, p.qty);
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

// EngineTest with Alice and Bob funded (Fund() each), where most trading
// scenarios start.
class FundedEngineTest : public EngineTest {
 protected:
  void SetUp() override {
    Fund(kAlice);
    Fund(kBob);
  }
  // Starts over (before any command) with another client order id rule.
  void UseClientOrderIds(ClientOrderIds rule) {
    config_.client_order_ids = rule;
    engine_ = Engine(config_);
  }
};

}  // namespace mb::engine
