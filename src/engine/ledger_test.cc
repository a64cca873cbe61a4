// Tests of the ledger view (engine/ledger.h): every balance change of the
// engine, expanded from its events, as double-entry lines. A scenario runs
// through the engine; its events are expanded with AppendLedgerEntries, and the
// lines must balance (per trade, per lock or release), carry the right reasons
// and references, and add up to the engine's balances exactly.
#include "engine/ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "common/fixed_string.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/market.h"
#include "engine/types.h"

namespace mb::engine {
namespace {

constexpr AssetId kBtc{0};
constexpr AssetId kUsdt{1};
constexpr AssetId kEth{2};
constexpr MarketId kBtcUsdt{0};
constexpr AccountId kFee{0};
constexpr AccountId kAlice{1};
constexpr AccountId kBob{2};
constexpr AccountId kCarol{3};
constexpr uint32_t kAccounts = 16;

// The same markets as engine_test_support.h's BTCUSDT: npt 10, maker 10 / taker 20 bps.
EngineConfig MakeConfig() {
  EngineConfig c;
  c.assets = {{"BTC", 8}, {"USDT", 8}, {"ETH", 8}};
  MarketSpec m;
  m.symbol = "BTCUSDT";
  m.base = kBtc;
  m.quote = kUsdt;
  m.tick_units = 1'000'000;
  m.lot_units = 1'000;
  m.min_qty = Qty{1};
  m.max_qty = Qty{100'000};
  m.max_price = Price{10'000'000};
  m.min_notional = Amount{1'000};
  m.maker_fee_bps = 10;
  m.taker_fee_bps = 20;
  c.markets = {m};
  c.max_accounts = kAccounts;
  c.fee_account = kFee;
  c.expected_open_orders = 64;
  c.client_id_memory = 2;
  Status s = c.Validate();
  EXPECT_TRUE(s.ok()) << s.message();
  return c;
}

std::string Str(const LedgerEntry& e) {
  std::string s = "acct" + std::to_string(Raw(e.account)) + " asset" +
                  std::to_string(Raw(e.asset)) +
                  (e.bucket == Bucket::kAvailable ? " avail "
                   : e.bucket == Bucket::kLocked  ? " locked "
                   : e.bucket == Bucket::kHeld    ? " held "
                                                  : " bucket? ") +
                  std::to_string(e.delta) + " " + std::string(ToString(e.reason));
  switch (e.ref_kind) {
    case RefKind::kOrder:
      s += " order:";
      break;
    case RefKind::kTrade:
      s += " trade:";
      break;
    case RefKind::kTransfer:
      s += " transfer:";
      break;
  }
  return s + std::to_string(e.ref);
}

// Non-zero lines, as sorted strings: a line that moves nothing is no entry.
std::vector<std::string> Lines(const std::vector<LedgerEntry>& entries) {
  std::vector<std::string> out;
  for (const LedgerEntry& e : entries) {
    if (e.delta != 0) out.push_back(Str(e));
  }
  std::sort(out.begin(), out.end());
  return out;
}

LedgerEntry Line(AccountId account, AssetId asset, Bucket bucket, int64_t delta,
                 LedgerReason reason, RefKind kind, uint64_t ref) {
  LedgerEntry e;
  e.account = account;
  e.asset = asset;
  e.bucket = bucket;
  e.delta = delta;
  e.reason = reason;
  e.ref_kind = kind;
  e.ref = ref;
  return e;
}

// A lock (delta > 0) or release (delta < 0) of `amount` for one order.
void AddLock(std::vector<LedgerEntry>* out, AccountId account, AssetId asset, int64_t delta,
             uint64_t order) {
  const LedgerReason reason = delta > 0 ? LedgerReason::kOrderLock : LedgerReason::kOrderRelease;
  out->push_back(Line(account, asset, Bucket::kAvailable, -delta, reason, RefKind::kOrder, order));
  out->push_back(Line(account, asset, Bucket::kLocked, delta, reason, RefKind::kOrder, order));
}

using Events = std::vector<Event>;

class LedgerTest : public ::testing::Test {
 protected:
  LedgerTest() : config_(MakeConfig()), engine_(config_) {}

  Events Run(const CommandBody& body) {
    Events out;
    engine_.Process(Command{ts_++, body}, &out);
    events_.insert(events_.end(), out.begin(), out.end());
    return out;
  }
  OrderId Place(AccountId account, Side side, int64_t price, int64_t qty,
                TimeInForce tif = TimeInForce::kGtc) {
    PlaceOrder p;
    p.account = account;
    p.market = kBtcUsdt;
    p.side = side;
    p.tif = tif;
    p.price = Price{price};
    p.qty = Qty{qty};
    Events ev = Run(p);
    EXPECT_EQ(ev.front().type(), EventType::kOrderAccepted);
    return OrderId{Raw(engine_.last_sequence())};
  }
  void Deposit(AccountId account, AssetId asset, int64_t amount, std::string_view ref) {
    Events ev = Run(engine::Deposit{account, asset, Amount{amount}, TransferRef::From(ref)});
    EXPECT_EQ(ev.front().type(), EventType::kDeposited);
  }
  void Withdraw(AccountId account, AssetId asset, int64_t amount, std::string_view ref) {
    Events ev = Run(engine::Withdraw{account, asset, Amount{amount}, TransferRef::From(ref)});
    EXPECT_EQ(ev.front().type(), EventType::kWithdrawn);
  }
  // A transfer to another venue that must be held; returns its id.
  TransferId TransferOut(AccountId account, AssetId asset, int64_t amount, int64_t fee,
                         std::string_view ref) {
    Events ev = Run(engine::TransferOut{account, asset, Amount{amount}, Amount{fee},
                                        TransferRef::From(ref), TransferAddress::From("venue-b")});
    EXPECT_EQ(ev.front().type(), EventType::kTransferHeld);
    return TransferId{Raw(engine_.last_sequence())};
  }
  void Resolve(TransferId id, bool completed) {
    Events ev = Run(ResolveTransfer{id, completed, RefundReason::kInvalidAddress});
    EXPECT_EQ(ev.front().type(),
              completed ? EventType::kTransferCompleted : EventType::kTransferRefunded);
  }

  // Deposits, resting orders, a taker filling across two levels below its
  // limit (price-improvement release), a market order by quote whose dust
  // expires, a buy that fills below its limit and rests (OrderRested.released), a self-trade, an
  // amend down and up, a cancel, an IOC remainder, rejects, a status change, transfers to other
  // venues (completed with a fee, refunded, pending) and withdrawals (the fee account's included).
  void Scenario() {
    Deposit(kAlice, kUsdt, 1'000'000, "d-1");
    Deposit(kBob, kBtc, 100'000, "d-2");
    Deposit(kCarol, kUsdt, 50'000, "d-3");
    Deposit(kCarol, kBtc, 20'000, "d-4");
    Place(kBob, Side::kSell, 100, 2);
    Place(kBob, Side::kSell, 101, 3);
    Place(kAlice, Side::kBuy, 105, 4);  // 2 @ 100 + 2 @ 101, releases 180
    const OrderId bid = Place(kAlice, Side::kBuy, 99, 5);
    Run(AmendOrder{kAlice, kBtcUsdt, bid, {}, Price{0}, Qty{3}, false});   // release 2 lots
    Run(AmendOrder{kAlice, kBtcUsdt, bid, {}, Price{98}, Qty{6}, false});  // re-lock
    PlaceOrder mkt;
    mkt.account = kCarol;
    mkt.market = kBtcUsdt;
    mkt.side = Side::kBuy;
    mkt.type = OrderType::kMarket;
    mkt.quote_qty = Amount{1'500};
    Run(mkt);  // 1 lot @ 101, 490 of dust released
    Place(kBob, Side::kSell, 102, 1);
    Place(kAlice, Side::kBuy, 104, 3);  // 1 @ 102, rests 2 and returns 20
    Place(kCarol, Side::kSell, 110, 2);
    Place(kCarol, Side::kBuy, 110, 1);                    // self-trade (STP NONE)
    Place(kBob, Side::kSell, 97, 10, TimeInForce::kIoc);  // 2 @ 104, 6 @ 98, 2 expire
    Run(CancelAll{kCarol, kBtcUsdt});
    Run(engine::CancelOrder{kAlice, kBtcUsdt, OrderId{999}, {}, {}});  // rejected
    Run(SetMarketStatus{kBtcUsdt, MarketStatus::kTrading});
    Resolve(TransferOut(kAlice, kUsdt, 10'000, 250, "t-1"), true);
    Resolve(TransferOut(kCarol, kBtc, 1'000, 0, "t-2"), false);
    TransferOut(kBob, kBtc, 500, 5, "t-3");  // still pending
    Withdraw(kBob, kUsdt, 1'000, "w-1");
    Withdraw(kFee, kBtc, engine_.balance(kFee, kBtc).available.value, "w-fee");
    Status inv = engine_.CheckInvariants();
    EXPECT_TRUE(inv.ok()) << inv.message();
  }

  std::vector<LedgerEntry> Expand(const Event& e) const {
    std::vector<LedgerEntry> out;
    AppendLedgerEntries(config_, e, &out);
    return out;
  }

  // The lines the rules call for, from the event alone.
  std::vector<LedgerEntry> Expected(const Event& ev) const {
    std::vector<LedgerEntry> out;
    const MarketSpec& m = config_.markets[0];
    auto spend = [&](Side side) { return side == Side::kBuy ? m.quote : m.base; };
    if (const auto* a = std::get_if<OrderAccepted>(&ev.body)) {
      AddLock(&out, a->terms.account, spend(a->terms.side), a->locked.value, Raw(a->order_id));
    } else if (const auto* r = std::get_if<OrderRested>(&ev.body)) {
      AddLock(&out, r->account, spend(r->side), -r->released.value, Raw(r->order_id));
    } else if (const auto* c = std::get_if<OrderCanceled>(&ev.body)) {
      AddLock(&out, c->account, spend(c->side), -c->released.value, Raw(c->order_id));
    } else if (const auto* x = std::get_if<OrderExpired>(&ev.body)) {
      AddLock(&out, x->account, spend(x->side), -x->released.value, Raw(x->order_id));
    } else if (const auto* am = std::get_if<OrderAmended>(&ev.body)) {
      AddLock(&out, am->account, spend(am->side), am->lock_delta.value, Raw(am->order_id));
    } else if (const auto* d = std::get_if<Deposited>(&ev.body)) {
      out.push_back(Line(d->account, d->asset, Bucket::kAvailable, d->amount.value,
                         LedgerReason::kDeposit, RefKind::kTransfer, Raw(d->transfer_id)));
    } else if (const auto* w = std::get_if<Withdrawn>(&ev.body)) {
      out.push_back(Line(w->account, w->asset, Bucket::kAvailable, -w->amount.value,
                         LedgerReason::kWithdrawal, RefKind::kTransfer, Raw(w->transfer_id)));
    } else if (const auto* h = std::get_if<TransferHeld>(&ev.body)) {
      // available -> held.
      const uint64_t id = Raw(h->transfer_id);
      out.push_back(Line(h->account, h->asset, Bucket::kAvailable, -h->amount.value,
                         LedgerReason::kTransferHold, RefKind::kTransfer, id));
      out.push_back(Line(h->account, h->asset, Bucket::kHeld, h->amount.value,
                         LedgerReason::kTransferHold, RefKind::kTransfer, id));
    } else if (const auto* done = std::get_if<TransferCompleted>(&ev.body)) {
      // The hold leaves: amount - fee to the destination, the fee to the fee account.
      const uint64_t id = Raw(done->transfer_id);
      out.push_back(Line(done->account, done->asset, Bucket::kHeld,
                         -(done->amount.value - done->fee.value), LedgerReason::kTransferOut,
                         RefKind::kTransfer, id));
      out.push_back(Line(done->account, done->asset, Bucket::kHeld, -done->fee.value,
                         LedgerReason::kFee, RefKind::kTransfer, id));
      out.push_back(Line(config_.fee_account, done->asset, Bucket::kAvailable, done->fee.value,
                         LedgerReason::kFeeIncome, RefKind::kTransfer, id));
    } else if (const auto* back = std::get_if<TransferRefunded>(&ev.body)) {
      // held -> available.
      const uint64_t id = Raw(back->transfer_id);
      out.push_back(Line(back->account, back->asset, Bucket::kHeld, -back->amount.value,
                         LedgerReason::kTransferRefund, RefKind::kTransfer, id));
      out.push_back(Line(back->account, back->asset, Bucket::kAvailable, back->amount.value,
                         LedgerReason::kTransferRefund, RefKind::kTransfer, id));
    } else if (const auto* t = std::get_if<Trade>(&ev.body)) {
      const uint64_t id = Raw(t->trade_id);
      const bool taker_buys = t->taker_side == Side::kBuy;
      const AccountId buyer = taker_buys ? t->taker_account : t->maker_account;
      const AccountId seller = taker_buys ? t->maker_account : t->taker_account;
      const int64_t buyer_fee = (taker_buys ? t->taker_fee : t->maker_fee).value;
      const int64_t seller_fee = (taker_buys ? t->maker_fee : t->taker_fee).value;
      out.push_back(Line(buyer, m.quote, Bucket::kLocked, -t->notional.value,
                         LedgerReason::kTradeSpend, RefKind::kTrade, id));
      out.push_back(Line(seller, m.quote, Bucket::kAvailable, t->notional.value,
                         LedgerReason::kTradeReceive, RefKind::kTrade, id));
      out.push_back(Line(seller, m.quote, Bucket::kAvailable, -seller_fee, LedgerReason::kFee,
                         RefKind::kTrade, id));
      out.push_back(Line(config_.fee_account, m.quote, Bucket::kAvailable, seller_fee,
                         LedgerReason::kFeeIncome, RefKind::kTrade, id));
      out.push_back(Line(seller, m.base, Bucket::kLocked, -t->base_qty.value,
                         LedgerReason::kTradeSpend, RefKind::kTrade, id));
      out.push_back(Line(buyer, m.base, Bucket::kAvailable, t->base_qty.value,
                         LedgerReason::kTradeReceive, RefKind::kTrade, id));
      out.push_back(Line(buyer, m.base, Bucket::kAvailable, -buyer_fee, LedgerReason::kFee,
                         RefKind::kTrade, id));
      out.push_back(Line(config_.fee_account, m.base, Bucket::kAvailable, buyer_fee,
                         LedgerReason::kFeeIncome, RefKind::kTrade, id));
      // A completed taker's surplus is a release of the taker order's lock.
      AddLock(&out, t->taker_account, spend(t->taker_side), -t->taker_released.value,
              Raw(t->taker_order_id));
    }
    for (LedgerEntry& e : out) e.seq = ev.seq;
    return out;
  }

  // Sum of all lines per (account, asset, bucket) against the engine: the
  // held bucket against the pending transfers.
  void ExpectLedgerMatchesBalances(const std::vector<LedgerEntry>& entries) const {
    std::map<std::tuple<uint32_t, uint16_t, Bucket>, int64_t> sum;
    for (const LedgerEntry& e : entries) {
      sum[{Raw(e.account), Raw(e.asset), e.bucket}] += e.delta;
    }
    std::map<std::pair<uint32_t, uint16_t>, int64_t> pending;
    for (const PendingTransfer& p : engine_.PendingTransfers()) {
      pending[{Raw(p.account), Raw(p.asset)}] += p.amount.value;
    }
    for (uint32_t a = 0; a < kAccounts; ++a) {
      for (uint16_t s = 0; s < config_.assets.size(); ++s) {
        const Balance b = engine_.balance(AccountId{a}, AssetId{s});
        EXPECT_EQ((sum[{a, s, Bucket::kAvailable}]), b.available.value)
            << "available of account " << a << " asset " << s;
        EXPECT_EQ((sum[{a, s, Bucket::kLocked}]), b.locked.value)
            << "locked of account " << a << " asset " << s;
        EXPECT_EQ((sum[{a, s, Bucket::kHeld}]), (pending[{a, s}]))
            << "held of account " << a << " asset " << s;
      }
    }
  }

  EngineConfig config_;
  Engine engine_;
  Events events_;
  int64_t ts_ = 1'000;
};

TEST_F(LedgerTest, ScenarioRunsAsIntended) {
  Scenario();
  // The scenario covers every balance-moving event, and the releases it means to.
  std::map<EventType, int> count;
  int64_t taker_released = 0;
  int64_t rested_released = 0;
  for (const Event& e : events_) {
    ++count[e.type()];
    if (const auto* r = std::get_if<OrderRested>(&e.body)) rested_released += r->released.value;
    if (const auto* t = std::get_if<Trade>(&e.body)) taker_released += t->taker_released.value;
    if (const auto* r = std::get_if<Rejected>(&e.body)) {
      EXPECT_EQ(r->command, CommandType::kCancelOrder) << ToString(r->reason);
    }
  }
  EXPECT_EQ(count[EventType::kRejected], 1);
  EXPECT_EQ(count[EventType::kTrade], 7);
  EXPECT_EQ(count[EventType::kOrderAmended], 2);
  EXPECT_EQ(count[EventType::kOrderExpired], 2);
  EXPECT_EQ(count[EventType::kOrderCanceled], 1);
  EXPECT_EQ(count[EventType::kDeposited], 4);
  EXPECT_EQ(count[EventType::kWithdrawn], 2);
  EXPECT_EQ(count[EventType::kTransferHeld], 3);
  EXPECT_EQ(count[EventType::kTransferCompleted], 1);
  EXPECT_EQ(count[EventType::kTransferRefunded], 1);
  EXPECT_EQ(engine_.PendingTransfers().size(), 1u);
  EXPECT_EQ(engine_.held(kBtc).value, 500);
  EXPECT_EQ(taker_released, 180);
  EXPECT_EQ(rested_released, 20);
  EXPECT_EQ(engine_.balance(kFee, kBtc).available.value, 0);
  EXPECT_GT(engine_.balance(kFee, kUsdt).available.value, 0);
}

TEST_F(LedgerTest, EachEventExpandsToItsExactLines) {
  Scenario();
  for (const Event& e : events_) {
    const std::vector<LedgerEntry> got = Expand(e);
    for (const LedgerEntry& l : got) EXPECT_EQ(l.seq, e.seq) << Str(l);
    std::vector<LedgerEntry> want = Expected(e);
    EXPECT_EQ(Lines(got), Lines(want)) << ToString(e.type()) << " of seq " << Raw(e.seq);
  }
}

TEST_F(LedgerTest, TradeLinesSumToZeroPerAsset) {
  Scenario();
  int trades = 0;
  for (const Event& e : events_) {
    const auto* t = std::get_if<Trade>(&e.body);
    if (t == nullptr) continue;
    ++trades;
    std::map<uint16_t, int64_t> by_asset_trade_ref;
    std::map<uint16_t, int64_t> by_asset_all;
    for (const LedgerEntry& l : Expand(e)) {
      by_asset_all[Raw(l.asset)] += l.delta;
      if (l.ref_kind != RefKind::kTrade) continue;
      EXPECT_EQ(l.ref, Raw(t->trade_id));
      by_asset_trade_ref[Raw(l.asset)] += l.delta;
    }
    for (const auto& [asset, total] : by_asset_trade_ref) {
      EXPECT_EQ(total, 0) << "trade " << Raw(t->trade_id) << " asset " << asset;
    }
    for (const auto& [asset, total] : by_asset_all) {
      EXPECT_EQ(total, 0) << "trade " << Raw(t->trade_id) << " asset " << asset;
    }
  }
  EXPECT_EQ(trades, 7);
}

TEST_F(LedgerTest, LocksAndReleasesSumToZeroPerAccountAndAsset) {
  Scenario();
  int moves = 0;
  for (const Event& e : events_) {
    std::map<std::pair<uint32_t, uint16_t>, int64_t> sum;
    for (const LedgerEntry& l : Expand(e)) {
      if (l.reason != LedgerReason::kOrderLock && l.reason != LedgerReason::kOrderRelease) continue;
      if (l.delta != 0) ++moves;
      sum[{Raw(l.account), Raw(l.asset)}] += l.delta;
      // A lock moves available to locked, a release back.
      const bool to_locked = l.bucket == Bucket::kLocked;
      if (l.delta != 0) {
        EXPECT_EQ(l.reason == LedgerReason::kOrderLock, (l.delta > 0) == to_locked) << Str(l);
      }
    }
    for (const auto& [key, total] : sum) {
      EXPECT_EQ(total, 0) << ToString(e.type()) << " of seq " << Raw(e.seq) << ", account "
                          << key.first << " asset " << key.second;
    }
  }
  EXPECT_GT(moves, 0);
}

TEST_F(LedgerTest, NonMovingEventsExpandToNothing) {
  Scenario();
  int checked = 0;
  for (const Event& e : events_) {
    const auto* r = std::get_if<OrderRested>(&e.body);
    const bool rested_without_release = r != nullptr && r->released.value == 0;
    if (e.type() != EventType::kRejected && !rested_without_release &&
        e.type() != EventType::kMarketStatusChanged) {
      continue;
    }
    ++checked;
    EXPECT_TRUE(Lines(Expand(e)).empty()) << ToString(e.type());
  }
  EXPECT_GE(checked, 3);
}

TEST_F(LedgerTest, SummingAllLinesReproducesTheBalances) {
  Scenario();
  std::vector<LedgerEntry> all;
  for (const Event& e : events_) AppendLedgerEntries(config_, e, &all);
  ExpectLedgerMatchesBalances(all);
  // And per asset, everything adds up to deposits minus withdrawals.
  std::map<uint16_t, int64_t> per_asset;
  for (const LedgerEntry& l : all) per_asset[Raw(l.asset)] += l.delta;
  for (uint16_t s = 0; s < config_.assets.size(); ++s) {
    EXPECT_EQ(per_asset[s], engine_.supply(AssetId{s}).value) << "asset " << s;
  }
}

// A buy that fills below its limit and rests the rest: the saved amount must
// show in the ledger wherever the engine moves it.
TEST_F(LedgerTest, PriceImprovementOfARestedRemainderIsInTheLedger) {
  Deposit(kAlice, kUsdt, 1'000'000, "d-1");
  Deposit(kBob, kBtc, 100'000, "d-2");
  Place(kBob, Side::kSell, 100, 2);
  const OrderId a = Place(kAlice, Side::kBuy, 105, 4);  // 2 @ 100, 2 rest at 105
  const Event& rested = events_.back();
  ASSERT_EQ(rested.type(), EventType::kOrderRested);
  std::vector<LedgerEntry> want;
  AddLock(&want, kAlice, kUsdt, -100, Raw(a));
  EXPECT_EQ(Lines(Expand(rested)), Lines(want));
  std::vector<LedgerEntry> all;
  for (const Event& e : events_) AppendLedgerEntries(config_, e, &all);
  ExpectLedgerMatchesBalances(all);
  Run(engine::CancelOrder{kAlice, kBtcUsdt, a, {}, {}});
  all.clear();
  for (const Event& e : events_) AppendLedgerEntries(config_, e, &all);
  ExpectLedgerMatchesBalances(all);
  EXPECT_EQ(engine_.balance(kAlice, kUsdt), (Balance{Amount{1'000'000 - 2'000}, Amount{0}}));
}

}  // namespace
}  // namespace mb::engine
