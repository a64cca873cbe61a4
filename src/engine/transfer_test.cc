// Transfers to other venues (TransferOut, ResolveTransfer): the hold leaves
// available for a bucket of its own; completion takes amount - fee out of the
// supply and pays the fee account; a refund returns the hold; a transfer
// resolves once. The refusals change nothing; images carry the pending
// transfers, and an image whose pending transfers cannot add up is refused;
// the ledger view expands each step into lines that add up.

// clang-format off
// First: LedgerReason::kFee declared after engine_test_support.h's kFee would
// shadow it (-Wshadow).
#include "engine/ledger.h"
// clang-format on

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/fixed_string.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

class TransferTest : public FundedEngineTest {
 protected:
  // Sends a transfer that must be held; checks the event and returns its id
  // (== its sequence).
  TransferId Hold(AccountId account, AssetId asset, int64_t amount, int64_t fee,
                  std::string_view ref, std::string_view address = "mbx:venue-b/1") {
    const Balance before = Bal(account, asset);
    const Amount held_before = engine_.held(asset);
    const Amount supply_before = engine_.supply(asset);
    const Events ev = Run(TransferOutCmd(account, asset, amount, fee, ref, address));
    EXPECT_EQ(Types(ev), "TransferHeld");
    const TransferHeld h = At<TransferHeld>(ev, 0);
    EXPECT_EQ(Raw(h.transfer_id), Raw(engine_.last_sequence()));
    EXPECT_EQ(h.account, account);
    EXPECT_EQ(h.asset, asset);
    EXPECT_EQ(h.amount, Amount{amount});
    EXPECT_EQ(h.fee, Amount{fee});
    EXPECT_EQ(h.ref.view(), ref);
    EXPECT_EQ(h.address.view(), address);
    // available -> held; locked and the supply stay.
    EXPECT_EQ(Bal(account, asset), B(before.available.value - amount, before.locked.value));
    EXPECT_EQ(engine_.held(asset), Amount{held_before.value + amount});
    EXPECT_EQ(engine_.supply(asset), supply_before);
    return h.transfer_id;
  }

  const PendingTransfer* FindPending(TransferId id) {
    pending_ = engine_.PendingTransfers();
    for (const PendingTransfer& p : pending_) {
      if (p.id == id) return &p;
    }
    return nullptr;
  }

  std::vector<PendingTransfer> pending_;
};

TEST_F(TransferTest, HoldLeavesAvailableAndNotLocked) {
  const OrderId bid = Rest(kAlice, Side::kBuy, 100, 5);  // locks 5000 USDT
  const Balance usdt = Bal(kAlice, kUsdt);
  ASSERT_EQ(usdt.locked.value, 100 * 5 * 10);
  const TransferId id = Hold(kAlice, kUsdt, 250'000, 1'000, "out-1", "mbx:venue-b/alice");
  EXPECT_EQ(Bal(kAlice, kUsdt), B(usdt.available.value - 250'000, usdt.locked.value));
  EXPECT_EQ(engine_.held(kUsdt).value, 250'000);
  EXPECT_EQ(engine_.held(kBtc).value, 0);
  EXPECT_EQ(engine_.supply(kUsdt).value, 2 * kFundUsdt);
  const PendingTransfer* p = FindPending(id);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->account, kAlice);
  EXPECT_EQ(p->asset, kUsdt);
  EXPECT_EQ(p->amount.value, 250'000);
  EXPECT_EQ(p->fee.value, 1'000);
  EXPECT_EQ(p->address.view(), "mbx:venue-b/alice");
  EXPECT_EQ(engine_.PendingTransfers().size(), 1u);
  // The order is untouched and can still be canceled for its whole lock.
  const Events ev = Cancel(kAlice, bid);
  EXPECT_EQ(At<OrderCanceled>(ev, 0).released.value, 100 * 5 * 10);
  EXPECT_EQ(Bal(kAlice, kUsdt), B(kFundUsdt - 250'000, 0));
}

TEST_F(TransferTest, HeldFundsCannotBeSpentTwice) {
  Hold(kAlice, kBtc, kFundBtc, 0, "out-all");
  EXPECT_EQ(Bal(kAlice, kBtc), B(0, 0));
  ExpectReject(WithdrawCmd(kAlice, kBtc, 1, "w-1"), RejectReason::kInsufficientBalance);
  ExpectReject(TransferOutCmd(kAlice, kBtc, 1, 0, "out-2"), RejectReason::kInsufficientBalance);
  ExpectReject(Limit(kAlice, Side::kSell, 100, 1), RejectReason::kInsufficientBalance);
}

TEST_F(TransferTest, CompleteLowersTheSupplyByAmountMinusFeeAndPaysTheFeeAccount) {
  const TransferId id = Hold(kAlice, kBtc, 40'000, 1'500, "out-1");
  const Balance alice = Bal(kAlice, kBtc);
  const Balance fee_before = Bal(kFee, kBtc);
  const Events ev = Run(CompleteCmd(id));
  EXPECT_EQ(Types(ev), "TransferCompleted");
  const TransferCompleted c = At<TransferCompleted>(ev, 0);
  EXPECT_EQ(c.transfer_id, id);
  EXPECT_EQ(c.account, kAlice);
  EXPECT_EQ(c.asset, kBtc);
  EXPECT_EQ(c.amount.value, 40'000);
  EXPECT_EQ(c.fee.value, 1'500);
  EXPECT_EQ(engine_.supply(kBtc).value, 2 * kFundBtc - (40'000 - 1'500));
  EXPECT_EQ(engine_.held(kBtc).value, 0);
  EXPECT_EQ(Bal(kAlice, kBtc), alice);  // the hold left, not the balance
  EXPECT_EQ(Bal(kFee, kBtc), B(fee_before.available.value + 1'500, 0));
  EXPECT_TRUE(engine_.PendingTransfers().empty());
  // Other assets are untouched.
  EXPECT_EQ(engine_.supply(kUsdt).value, 2 * kFundUsdt);
  EXPECT_EQ(Bal(kFee, kUsdt), B(0, 0));
}

TEST_F(TransferTest, FeeOfZeroAndFeeOfTheWholeAmount) {
  const TransferId free = Hold(kAlice, kEth, 1'000, 0, "no-fee");
  const TransferId all_fee = Hold(kBob, kEth, 700, 700, "all-fee");
  EXPECT_EQ(engine_.held(kEth).value, 1'700);
  Run(CompleteCmd(free));
  EXPECT_EQ(engine_.supply(kEth).value, 2 * kFundEth - 1'000);
  EXPECT_EQ(Bal(kFee, kEth), B(0, 0));
  Run(CompleteCmd(all_fee));
  // Nothing left for the destination: the supply stays, the fee account has it all.
  EXPECT_EQ(engine_.supply(kEth).value, 2 * kFundEth - 1'000);
  EXPECT_EQ(Bal(kFee, kEth), B(700, 0));
  EXPECT_EQ(Bal(kBob, kEth), B(kFundEth - 700, 0));
  EXPECT_EQ(engine_.held(kEth).value, 0);
}

TEST_F(TransferTest, TheFeeAccountCanSendItsFees) {
  const TransferId paid = Hold(kAlice, kUsdt, 10'000, 300, "pay-fee");
  Run(CompleteCmd(paid));
  ASSERT_EQ(Bal(kFee, kUsdt), B(300, 0));
  const TransferId id = Hold(kFee, kUsdt, 300, 20, "sweep");
  Run(CompleteCmd(id));
  EXPECT_EQ(Bal(kFee, kUsdt), B(20, 0));  // its own fee comes back to it
  EXPECT_EQ(engine_.supply(kUsdt).value, 2 * kFundUsdt - 9'700 - 280);
}

TEST_F(TransferTest, RefundReturnsTheFundsWithItsReason) {
  for (RefundReason reason :
       {RefundReason::kVoided, RefundReason::kInvalidAddress, RefundReason::kUnknownAsset,
        RefundReason::kAccountUnavailable, RefundReason::kRefused}) {
    SCOPED_TRACE(ToString(reason));
    const Balance before = Bal(kBob, kUsdt);
    const TransferId id = Hold(kBob, kUsdt, 12'345, 45, "refund-" + std::to_string(Raw(reason)));
    const Events ev = Run(RefundCmd(id, reason));
    EXPECT_EQ(Types(ev), "TransferRefunded");
    const TransferRefunded r = At<TransferRefunded>(ev, 0);
    EXPECT_EQ(r.transfer_id, id);
    EXPECT_EQ(r.account, kBob);
    EXPECT_EQ(r.asset, kUsdt);
    EXPECT_EQ(r.amount.value, 12'345);
    EXPECT_EQ(r.reason, reason);
    EXPECT_EQ(Bal(kBob, kUsdt), before);  // the whole amount, fee included
    EXPECT_EQ(engine_.held(kUsdt).value, 0);
    EXPECT_EQ(engine_.supply(kUsdt).value, 2 * kFundUsdt);
    EXPECT_EQ(Bal(kFee, kUsdt), B(0, 0));
  }
  EXPECT_TRUE(engine_.PendingTransfers().empty());
}

TEST_F(TransferTest, ATransferResolvesOnce) {
  const TransferId done = Hold(kAlice, kBtc, 5'000, 10, "t-1");
  const TransferId back = Hold(kAlice, kBtc, 6'000, 10, "t-2");
  const TransferId open = Hold(kBob, kBtc, 7'000, 10, "t-3");
  Run(CompleteCmd(done));
  Run(RefundCmd(back, RefundReason::kRefused));
  const uint64_t supply = static_cast<uint64_t>(engine_.supply(kBtc).value);
  for (TransferId id : {done, back}) {
    for (const ResolveTransfer& again : {CompleteCmd(id), RefundCmd(id)}) {
      SCOPED_TRACE(std::to_string(Raw(id)) + (again.completed ? " complete" : " refund"));
      const Rejected r = ExpectReject(again, RejectReason::kUnknownTransfer);
      EXPECT_EQ(r.account, AccountId{0});
      EXPECT_EQ(r.existing_id, Raw(id));
    }
  }
  EXPECT_EQ(static_cast<uint64_t>(engine_.supply(kBtc).value), supply);
  EXPECT_EQ(engine_.held(kBtc).value, 7'000);
  ASSERT_EQ(engine_.PendingTransfers().size(), 1u);
  EXPECT_EQ(engine_.PendingTransfers()[0].id, open);
}

TEST_F(TransferTest, UnknownTransferIdsAreRefused) {
  const TransferId open = Hold(kAlice, kBtc, 5'000, 10, "t-1");
  // A deposit's id is a transfer id, but nothing is held under it; an order's
  // id is a sequence; 0 and beyond the sequence never were.
  const TransferId deposit{1};
  const OrderId order = Rest(kBob, Side::kSell, 200, 1);
  for (TransferId id : {deposit, TransferId{Raw(order)}, TransferId{0},
                        TransferId{Raw(engine_.last_sequence()) + 1}, TransferId{~uint64_t{0}}}) {
    SCOPED_TRACE(Raw(id));
    const Rejected r = ExpectReject(CompleteCmd(id), RejectReason::kUnknownTransfer);
    EXPECT_EQ(r.existing_id, Raw(id));
    EXPECT_EQ(r.account, AccountId{0});
    EXPECT_EQ(r.market, MarketId{0});
    EXPECT_EQ(r.order_id, OrderId{0});
  }
  ASSERT_EQ(engine_.PendingTransfers().size(), 1u);
  EXPECT_EQ(engine_.PendingTransfers()[0].id, open);
}

TEST_F(TransferTest, ARefundReasonOutOfRangeIsRefusedAndChangesNothing) {
  const TransferId id = Hold(kAlice, kEth, 9'000, 90, "t-1");
  for (uint8_t bad : {uint8_t{5}, uint8_t{200}, uint8_t{255}}) {
    SCOPED_TRACE(int{bad});
    const Rejected r =
        ExpectReject(RefundCmd(id, static_cast<RefundReason>(bad)), RejectReason::kInvalidStatus);
    EXPECT_EQ(r.account, kAlice);
    EXPECT_EQ(r.existing_id, Raw(id));
  }
  ASSERT_NE(FindPending(id), nullptr);
  // A completion does not read the reason.
  const Events ev = Run(ResolveTransfer{id, true, static_cast<RefundReason>(200)});
  EXPECT_EQ(Types(ev), "TransferCompleted");
}

TEST_F(TransferTest, TheReferenceIsSharedWithDepositsAndWithdrawals) {
  // Fund() used "auto-0" .. "auto-5" (transfer ids 1 .. 6).
  Rejected r =
      ExpectReject(TransferOutCmd(kAlice, kBtc, 1, 0, "auto-0"), RejectReason::kDuplicateTransfer);
  EXPECT_EQ(r.existing_id, 1u);
  EXPECT_EQ(r.account, kAlice);
  Run(WithdrawCmd(kBob, kUsdt, 5, "w-1"));
  const uint64_t withdrawal = Raw(engine_.last_sequence());
  r = ExpectReject(TransferOutCmd(kAlice, kUsdt, 1, 0, "w-1"), RejectReason::kDuplicateTransfer);
  EXPECT_EQ(r.existing_id, withdrawal);
  // A transfer's reference blocks every later use, pending or resolved.
  const TransferId id = Hold(kAlice, kUsdt, 100, 1, "t-1");
  r = ExpectReject(TransferOutCmd(kBob, kUsdt, 100, 1, "t-1"), RejectReason::kDuplicateTransfer);
  EXPECT_EQ(r.existing_id, Raw(id));
  r = ExpectReject(DepositCmd(kBob, kUsdt, 100, "t-1"), RejectReason::kDuplicateTransfer);
  EXPECT_EQ(r.existing_id, Raw(id));
  Run(RefundCmd(id));
  r = ExpectReject(WithdrawCmd(kAlice, kUsdt, 100, "t-1"), RejectReason::kDuplicateTransfer);
  EXPECT_EQ(r.existing_id, Raw(id));
  r = ExpectReject(TransferOutCmd(kAlice, kUsdt, 100, 1, "t-1"), RejectReason::kDuplicateTransfer);
  EXPECT_EQ(r.existing_id, Raw(id));
}

TEST_F(TransferTest, InvalidTransfersAreRefusedInOrder) {
  // Account, then asset, then amounts, then the reference, then the balance.
  ExpectReject(TransferOutCmd(kNoAccount, kNoAsset, 0, -1, "auto-0"),
               RejectReason::kUnknownAccount);
  ExpectReject(TransferOutCmd(kAlice, kNoAsset, 0, -1, "auto-0"), RejectReason::kUnknownAsset);
  ExpectReject(TransferOutCmd(kAlice, kBtc, 0, 0, "x-1"), RejectReason::kInvalidAmount);
  ExpectReject(TransferOutCmd(kAlice, kBtc, -5, 0, "x-1"), RejectReason::kInvalidAmount);
  ExpectReject(TransferOutCmd(kAlice, kBtc, 5, -1, "x-1"), RejectReason::kInvalidAmount);
  ExpectReject(TransferOutCmd(kAlice, kBtc, 5, 6, "x-1"), RejectReason::kInvalidAmount);
  ExpectReject(TransferOutCmd(kAlice, kBtc, 5, 6, "auto-0"), RejectReason::kInvalidAmount);
  ExpectReject(TransferOutCmd(kAlice, kBtc, kFundBtc + 1, 0, "auto-0"),
               RejectReason::kDuplicateTransfer);
  ExpectReject(TransferOutCmd(kAlice, kBtc, kInt64Max, kInt64Max, "x-1"),
               RejectReason::kInsufficientBalance);
  ExpectReject(TransferOutCmd(kCarol, kBtc, 1, 0, "x-1"), RejectReason::kInsufficientBalance);
  EXPECT_TRUE(engine_.PendingTransfers().empty());
}

TEST_F(TransferTest, InsufficientBalanceCountsAvailableOnly) {
  Rest(kAlice, Side::kSell, 100, 30);  // locks 30 lots of BTC
  const Balance btc = Bal(kAlice, kBtc);
  ASSERT_EQ(btc.locked.value, 30 * 1'000);
  ExpectReject(TransferOutCmd(kAlice, kBtc, btc.available.value + 1, 0, "x-1"),
               RejectReason::kInsufficientBalance);
  Hold(kAlice, kBtc, btc.available.value, 0, "x-1");
  EXPECT_EQ(Bal(kAlice, kBtc), B(0, 30 * 1'000));
}

// The pending transfers are part of the state: the image carries them, a
// restore brings them back under the same state hash, and both engines go on
// alike.
TEST_F(TransferTest, ImageRoundTripKeepsThePendingTransfersAndTheHash) {
  const TransferId a = Hold(kAlice, kBtc, 11'000, 100, "t-1", "addr-a");
  const TransferId b = Hold(kBob, kUsdt, 22'000, 0, "t-2", "");
  const TransferId c = Hold(kAlice, kUsdt, 33'000, 33'000, "t-3", std::string(64, 'z'));
  Run(CompleteCmd(b));
  const EngineImage image = engine_.ExportImage();
  ASSERT_EQ(image.pending_transfers.size(), 2u);
  EXPECT_EQ(image.pending_transfers[0].id, a);
  EXPECT_EQ(image.pending_transfers[1].id, c);
  EXPECT_EQ(image.pending_transfers[1].address.view(), std::string(64, 'z'));
  EXPECT_EQ(HashImage(image), engine_.StateHash());

  Engine restored(config_);
  Status s = restored.Restore(image);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(restored.StateHash(), engine_.StateHash());
  EXPECT_EQ(Dump(restored.ExportImage()), Dump(image));
  EXPECT_EQ(restored.held(kBtc), engine_.held(kBtc));
  EXPECT_EQ(restored.held(kUsdt), engine_.held(kUsdt));
  const std::vector<PendingTransfer> want = engine_.PendingTransfers();
  const std::vector<PendingTransfer> got = restored.PendingTransfers();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(std::tie(got[i].id, got[i].account, got[i].asset, got[i].amount, got[i].fee),
              std::tie(want[i].id, want[i].account, want[i].asset, want[i].amount, want[i].fee));
    EXPECT_EQ(got[i].address.view(), want[i].address.view());
  }
  EXPECT_TRUE(restored.CheckInvariants().ok());

  // Both go on alike: a second resolution refused, the others accepted, a
  // reused reference refused.
  for (const CommandBody& body :
       {CommandBody{CompleteCmd(b)}, CommandBody{RefundCmd(a)}, CommandBody{CompleteCmd(c)},
        CommandBody{TransferOutCmd(kBob, kBtc, 1, 0, "t-1")}}) {
    const Command cmd{ts_, body};
    Events live, again;
    restored.Process(cmd, &again);
    engine_.Process(cmd, &live);
    journal_.insert(journal_.end(), live.begin(), live.end());
    EXPECT_EQ(Types(live), Types(again));
    EXPECT_EQ(restored.StateHash(), engine_.StateHash());
  }
  EXPECT_TRUE(engine_.PendingTransfers().empty());
  EXPECT_TRUE(restored.PendingTransfers().empty());
}

TEST_F(TransferTest, TheStateHashCoversThePendingTransfers) {
  Hold(kAlice, kBtc, 11'000, 100, "t-1", "addr-a");
  const EngineImage image = engine_.ExportImage();
  const uint64_t hash = HashImage(image);
  std::vector<std::function<void(EngineImage&)>> edits = {
      [](EngineImage& i) { i.pending_transfers[0].address = TransferAddress::From("addr-b"); },
      [](EngineImage& i) { i.pending_transfers[0].fee = Amount{101}; },
      [](EngineImage& i) { i.pending_transfers[0].account = kBob; },
      [](EngineImage& i) { i.pending_transfers.clear(); },
  };
  for (std::size_t k = 0; k < edits.size(); ++k) {
    EngineImage other = image;
    edits[k](other);
    EXPECT_NE(HashImage(other), hash) << k;
  }
}

// Images whose pending transfers the engine could not have made are refused,
// whole: the invariant check after Load sees a held total that does not fit
// the supply, and Load itself sees impossible records.
TEST_F(TransferTest, RestoreRefusesDoctoredPendingTransfers) {
  const TransferId a = Hold(kAlice, kBtc, 11'000, 100, "t-1");
  Hold(kBob, kUsdt, 22'000, 50, "t-2");
  const EngineImage good = engine_.ExportImage();
  ASSERT_EQ(good.pending_transfers.size(), 2u);
  const uint64_t last = Raw(good.last_sequence);
  struct Case {
    std::string name;
    std::function<void(EngineImage&)> corrupt;
    std::string needle;  // in the refusal
  };
  const std::vector<Case> cases = {
      {"pending amount above what the supply leaves",
       [](EngineImage& i) { i.pending_transfers[0].amount.value += 1; }, "conservation"},
      {"pending amount below it", [](EngineImage& i) { i.pending_transfers[0].amount.value -= 1; },
       "conservation"},
      {"a pending transfer more",
       [&](EngineImage& i) {
         PendingTransfer extra = i.pending_transfers[1];
         extra.id = TransferId{1};  // the first deposit's sequence: in order, ahead
         i.pending_transfers.insert(i.pending_transfers.begin(), extra);
       },
       "conservation"},
      {"a pending transfer lost", [](EngineImage& i) { i.pending_transfers.pop_back(); },
       "conservation"},
      {"moved to another asset", [](EngineImage& i) { i.pending_transfers[0].asset = kEth; },
       "conservation"},
      {"the supply without the held funds",
       [](EngineImage& i) { i.asset_totals[Raw(kBtc)].supply.value -= 11'000; }, "conservation"},
      {"the hold back in the balance too",
       [](EngineImage& i) {
         for (ImageBalance& b : i.balances) {
           if (b.account == kAlice && b.asset == kBtc) b.available.value += 11'000;
         }
       },
       "conservation"},
      {"id 0", [](EngineImage& i) { i.pending_transfers[0].id = TransferId{0}; }, "sequence"},
      {"id beyond the sequence",
       [&](EngineImage& i) { i.pending_transfers[1].id = TransferId{last + 1}; }, "sequence"},
      {"ids out of order",
       [](EngineImage& i) { std::swap(i.pending_transfers[0], i.pending_transfers[1]); }, "order"},
      {"the same id twice",
       [](EngineImage& i) { i.pending_transfers[1].id = i.pending_transfers[0].id; }, "order"},
      {"fee above the amount", [](EngineImage& i) { i.pending_transfers[0].fee = Amount{11'001}; },
       "impossible"},
      {"negative fee", [](EngineImage& i) { i.pending_transfers[0].fee = Amount{-1}; },
       "impossible"},
      {"zero amount",
       [](EngineImage& i) {
         i.pending_transfers[0].amount = Amount{0};
         i.pending_transfers[0].fee = Amount{0};
       },
       "impossible"},
      {"unknown account", [](EngineImage& i) { i.pending_transfers[0].account = kNoAccount; },
       "impossible"},
      {"unknown asset", [](EngineImage& i) { i.pending_transfers[0].asset = kNoAsset; },
       "impossible"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EngineImage bad = good;
    c.corrupt(bad);
    Engine fresh(config_);
    const uint64_t before = fresh.StateHash();
    const Status s = fresh.Restore(bad);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
    EXPECT_EQ(fresh.StateHash(), before);
    EXPECT_TRUE(fresh.PendingTransfers().empty());
    EXPECT_EQ(fresh.held(kBtc).value, 0);
  }
  // Over a live engine, a refused image leaves it alone.
  EngineImage bad = good;
  bad.pending_transfers[0].amount.value += 1;
  const uint64_t live = engine_.StateHash();
  EXPECT_FALSE(engine_.Restore(bad).ok());
  EXPECT_EQ(engine_.StateHash(), live);
  ASSERT_NE(FindPending(a), nullptr);
  Engine fresh(config_);
  EXPECT_TRUE(fresh.Restore(good).ok());
}

// A pending transfer's reference is recorded (ImageTransfer) under its id:
// the engine records both in one step (Accounts::Hold). An image with the
// pending record but without the reference could not have been made, and
// restored, would let the reference be used again.
TEST_F(TransferTest, RestoreRefusesAPendingTransferWithoutItsReference) {
  const TransferId a = Hold(kAlice, kBtc, 11'000, 100, "t-1");
  EngineImage bad = engine_.ExportImage();
  const std::size_t before = bad.transfers.size();
  std::erase_if(bad.transfers, [&](const ImageTransfer& t) { return t.id == a; });
  ASSERT_EQ(bad.transfers.size(), before - 1);
  Engine fresh(config_);
  const Status s = fresh.Restore(bad);
  EXPECT_FALSE(s.ok()) << "restored a pending transfer whose reference is not recorded";
  if (s.ok()) {
    Events ev;
    fresh.Process(Command{ts_, TransferOutCmd(kAlice, kBtc, 1, 0, "t-1")}, &ev);
    EXPECT_EQ(Types(ev), "Rejected") << "the reference of a pending transfer was used again";
  }
}

// Two pending transfers whose amounts add up beyond int64: the held total
// must be refused without overflowing on the way (Accounts::RestorePending
// adds before the invariants are checked).
TEST_F(TransferTest, RestoreRefusesHeldTotalsBeyondInt64) {
  Hold(kAlice, kBtc, 11'000, 100, "t-1");
  Hold(kBob, kBtc, 22'000, 100, "t-2");
  EngineImage bad = engine_.ExportImage();
  ASSERT_EQ(bad.pending_transfers.size(), 2u);
  for (PendingTransfer& p : bad.pending_transfers) p.amount = Amount{kInt64Max};
  Engine fresh(config_);
  EXPECT_FALSE(fresh.Restore(bad).ok());
  EXPECT_EQ(fresh.held(kBtc).value, 0);
}

// ---------------------------------------------------------------------------
// The ledger view (engine/ledger.h): a hold moves available to held, a
// completion takes amount - fee out of held (kTransferOut) and moves the fee
// to the fee account (kFee, kFeeIncome), a refund moves held back.

std::string LineText(const LedgerEntry& l) {
  const char* bucket = l.bucket == Bucket::kAvailable ? "available"
                       : l.bucket == Bucket::kLocked  ? "locked"
                       : l.bucket == Bucket::kHeld    ? "held"
                                                      : "?";
  return "account " + std::to_string(Raw(l.account)) + " asset " + std::to_string(Raw(l.asset)) +
         " " + bucket + " " + std::to_string(l.delta) + " " + std::string(ToString(l.reason)) +
         (l.ref_kind == RefKind::kTransfer ? " transfer " : " other ") + std::to_string(l.ref);
}

std::vector<std::string> NonZeroLines(const EngineConfig& config, const Event& e) {
  std::vector<LedgerEntry> lines;
  AppendLedgerEntries(config, e, &lines);
  std::vector<std::string> out;
  for (const LedgerEntry& l : lines) {
    EXPECT_EQ(l.seq, e.seq);
    if (l.delta != 0) out.push_back(LineText(l));
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t SumOfLines(const EngineConfig& config, const Event& e) {
  std::vector<LedgerEntry> lines;
  AppendLedgerEntries(config, e, &lines);
  int64_t sum = 0;
  for (const LedgerEntry& l : lines) sum += l.delta;
  return sum;
}

TEST_F(TransferTest, LedgerLinesOfAHoldACompletionAndARefund) {
  const TransferId a = Hold(kAlice, kBtc, 40'000, 1'500, "t-1");
  const Event held = journal_.back();
  const TransferId b = Hold(kBob, kBtc, 9'000, 0, "t-2");
  const Event held_free = journal_.back();
  Run(CompleteCmd(a));
  const Event completed = journal_.back();
  Run(CompleteCmd(b));
  const Event completed_free = journal_.back();
  const TransferId c = Hold(kBob, kUsdt, 777, 7, "t-3");
  Run(RefundCmd(c, RefundReason::kRefused));
  const Event refunded = journal_.back();
  const std::string ta = " transfer " + std::to_string(Raw(a));
  const std::string tb = " transfer " + std::to_string(Raw(b));
  const std::string tc = " transfer " + std::to_string(Raw(c));

  EXPECT_EQ(NonZeroLines(config_, held),
            (std::vector<std::string>{"account 1 asset 0 available -40000 TransferHold" + ta,
                                      "account 1 asset 0 held 40000 TransferHold" + ta}));
  EXPECT_EQ(SumOfLines(config_, held), 0);
  EXPECT_EQ(SumOfLines(config_, held_free), 0);
  EXPECT_EQ(NonZeroLines(config_, completed),
            (std::vector<std::string>{"account 0 asset 0 available 1500 FeeIncome" + ta,
                                      "account 1 asset 0 held -1500 Fee" + ta,
                                      "account 1 asset 0 held -38500 TransferOut" + ta}));
  EXPECT_EQ(SumOfLines(config_, completed), -(40'000 - 1'500));  // what left the venue
  EXPECT_EQ(NonZeroLines(config_, completed_free),
            (std::vector<std::string>{"account 2 asset 0 held -9000 TransferOut" + tb}));
  EXPECT_EQ(NonZeroLines(config_, refunded),
            (std::vector<std::string>{"account 2 asset 1 available 777 TransferRefund" + tc,
                                      "account 2 asset 1 held -777 TransferRefund" + tc}));
  EXPECT_EQ(SumOfLines(config_, refunded), 0);
}

// Every line of the whole history, summed per (account, asset, bucket),
// reproduces the balances, the held bucket what is pending, and per asset the
// supply.
TEST_F(TransferTest, AllLedgerLinesAddUpToBalancesHoldsAndSupply) {
  const TransferId a = Hold(kAlice, kBtc, 40'000, 1'500, "t-1");
  Hold(kBob, kBtc, 9'000, 90, "t-2");
  const TransferId c = Hold(kBob, kUsdt, 777, 7, "t-3");
  Hold(kAlice, kEth, 5'000, 5'000, "t-4");
  Run(CompleteCmd(a));
  Run(RefundCmd(c));
  Rest(kAlice, Side::kBuy, 100, 5);
  Place(Limit(kBob, Side::kSell, 100, 2));  // trades: fees to the fee account

  std::map<std::tuple<uint32_t, uint16_t, Bucket>, int64_t> sums;
  std::map<uint16_t, int64_t> per_asset;
  for (const Event& e : journal_) {
    std::vector<LedgerEntry> lines;
    AppendLedgerEntries(config_, e, &lines);
    for (const LedgerEntry& l : lines) {
      sums[{Raw(l.account), Raw(l.asset), l.bucket}] += l.delta;
      per_asset[Raw(l.asset)] += l.delta;
    }
  }
  std::map<std::pair<uint32_t, uint16_t>, int64_t> pending;
  for (const PendingTransfer& p : engine_.PendingTransfers()) {
    pending[{Raw(p.account), Raw(p.asset)}] += p.amount.value;
  }
  EXPECT_EQ(pending.size(), 2u);
  for (uint32_t acc = 0; acc < config_.max_accounts; ++acc) {
    for (uint16_t s = 0; s < config_.assets.size(); ++s) {
      SCOPED_TRACE("account " + std::to_string(acc) + " asset " + std::to_string(s));
      const Balance b = Bal(AccountId{acc}, AssetId{s});
      EXPECT_EQ((sums[{acc, s, Bucket::kAvailable}]), b.available.value);
      EXPECT_EQ((sums[{acc, s, Bucket::kLocked}]), b.locked.value);
      EXPECT_EQ((sums[{acc, s, Bucket::kHeld}]), (pending[{acc, s}]));
    }
  }
  for (uint16_t s = 0; s < config_.assets.size(); ++s) {
    EXPECT_EQ(per_asset[s], engine_.supply(AssetId{s}).value) << "asset " << s;
  }
}

}  // namespace
}  // namespace mb::engine
