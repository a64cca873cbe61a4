// Accounts: client order ids (unique among an account's open orders,
// reserved for the last closed ones), fees and the fee account, deposits and
// withdrawals with their idempotent references; through the engine and on
// Accounts itself.
#include "engine/accounts.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/strong.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

// Alice and Bob funded; Binance's client order id rule (the default).
class ClientOrderIdTest : public FundedEngineTest {};

// The same under the idempotent rule ([engine] client_order_id = "idempotent").
class IdempotentClientOrderIdTest : public FundedEngineTest {
 protected:
  void SetUp() override {
    UseClientOrderIds(ClientOrderIds::kIdempotent);
    FundedEngineTest::SetUp();
  }
};

TEST_F(ClientOrderIdTest, DuplicateClientOrderIdWhileOpenNamesTheFirstOrder) {
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

// Binance: the id of a closed order is free at once, and the new order takes
// it (a cancel by client id then names the new one); an open order's id is
// refused whatever the market.
TEST_F(ClientOrderIdTest, ClosedOrdersClientOrderIdIsFreeAtOnce) {
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 2), "c1"));
  EXPECT_EQ(Types(Place(Limit(kBob, Side::kSell, 100, 2))), "OrderAccepted Trade");
  ASSERT_FALSE(engine_.FindOrder(a).has_value());
  const OrderId b = Rest(WithClientId(Limit(kAlice, Side::kBuy, 99, 2), "c1"));
  EXPECT_NE(b, a);
  Rejected r = ExpectReject(
      WithClientId(Limit(kAlice, Side::kSell, 200, 1, TimeInForce::kGtc, kEthUsdt), "c1"),
      RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(b));
  // Canceled, expired: free too.
  Cancel(kAlice, b);
  const OrderId ioc = NextOrderId();
  EXPECT_EQ(Types(Place(WithClientId(Limit(kAlice, Side::kBuy, 100, 1, TimeInForce::kIoc), "c1"))),
            "OrderAccepted OrderExpired");
  const OrderId c = Rest(WithClientId(Limit(kAlice, Side::kBuy, 98, 2), "c1"));
  EXPECT_GT(Raw(c), Raw(ioc));
  Events ev = Run(CancelByClientCmd(kAlice, "c1"));
  ASSERT_EQ(Types(ev), "OrderCanceled");
  EXPECT_EQ(At<OrderCanceled>(ev, 0).order_id, c);
  ExpectReject(CancelByClientCmd(kAlice, "c1"), RejectReason::kUnknownOrder);
  // Nothing is reserved.
  EXPECT_TRUE(engine_.ExportImage().recent_client_ids.empty());
}

TEST_F(IdempotentClientOrderIdTest, DuplicateClientOrderIdWhileOpenNamesTheFirstOrder) {
  const OrderId a = Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 2), "c1"));
  Rejected r = ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 101, 1), "c1"),
                            RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(a));
}

TEST_F(IdempotentClientOrderIdTest, ClientOrderIdStaysReservedForTheLastClosedOrders) {
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

TEST_F(IdempotentClientOrderIdTest, ExpiredOrderReservesItsClientIdButARejectedOneDoesNot) {
  const OrderId ioc = NextOrderId();
  EXPECT_EQ(Types(Place(WithClientId(Limit(kAlice, Side::kBuy, 100, 1, TimeInForce::kIoc), "x"))),
            "OrderAccepted OrderExpired");
  Rejected r = ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "x"),
                            RejectReason::kDuplicateClientOrderId);
  EXPECT_EQ(r.existing_id, Raw(ioc));

  ExpectReject(WithClientId(Limit(kAlice, Side::kBuy, 0, 1), "y"), RejectReason::kInvalidPrice);
  Rest(WithClientId(Limit(kAlice, Side::kBuy, 100, 1), "y"));
}

// Alice and Bob funded.
class FeeTest : public FundedEngineTest {};

TEST_F(FeeTest, FeesRoundUpAndUseTheMakerAndTakerRates) {
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

TEST_F(FeeTest, FractionalBaseFeesRoundUp) {
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

TEST_F(FeeTest, FeeAccountMayNotTradeButMayWithdrawItsFees) {
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

// An empty engine; each test funds what it needs.
class TransferTest : public EngineTest {};

TEST_F(TransferTest, DepositAndWithdrawal) {
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

TEST_F(TransferTest, TransferReferencesAreIdempotentAcrossDepositsAndWithdrawals) {
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

TEST_F(TransferTest, TransferRejections) {
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

TEST_F(TransferTest, DepositThatWouldOverflowTheBalanceIsRejected) {
  Events ev = Run(DepositCmd(kCarol, kEth, kInt64Max - 1, "big"));
  ASSERT_EQ(Types(ev), "Deposited");
  ExpectReject(DepositCmd(kCarol, kEth, 2, "big-2"), RejectReason::kOverflow);
  ExpectReject(DepositCmd(kCarol, kEth, kInt64Max, "big-3"), RejectReason::kOverflow);
  EXPECT_EQ(Types(Run(DepositCmd(kCarol, kEth, 1, "big-4"))), "Deposited");
  EXPECT_EQ(Bal(kCarol, kEth), B(kInt64Max, 0));
  EXPECT_EQ(Types(Run(WithdrawCmd(kCarol, kEth, kInt64Max, "big-5"))), "Withdrawn");
  EXPECT_EQ(Bal(kCarol, kEth), B(0, 0));
}

// Accounts on its own: 4 accounts, 2 assets, 2 remembered client ids.
class AccountsUnitTest : public ::testing::Test {
 protected:
  static constexpr AccountId kA{1};
  static constexpr AssetId kX{0};
  static Key128 Key(uint64_t n) { return Key128{n, ~n}; }
  static Balance B(int64_t available, int64_t locked) {
    return Balance{Amount{available}, Amount{locked}};
  }
  Accounts accounts_{4, 2, 64, 2};
};

TEST_F(AccountsUnitTest, FundsMoveBetweenAvailableAndLocked) {
  accounts_.Deposit(kA, kX, Amount{1'000}, Key(1), TransferId{1});
  EXPECT_EQ(accounts_.balance(kA, kX), B(1'000, 0));
  EXPECT_EQ(accounts_.supply(kX), Amount{1'000});
  EXPECT_EQ(accounts_.Lock(kA, kX, Amount{300}), B(700, 300));
  EXPECT_EQ(accounts_.Lock(kA, kX, Amount{-100}), B(800, 200));  // an amend down
  EXPECT_EQ(accounts_.Spend(kA, kX, Amount{150}), B(800, 50));
  EXPECT_EQ(accounts_.Release(kA, kX, Amount{50}), B(850, 0));
  EXPECT_EQ(accounts_.Credit(kA, kX, Amount{150}), B(1'000, 0));
  EXPECT_EQ(accounts_.Withdraw(kA, kX, Amount{400}, Key(2), TransferId{7}), B(600, 0));
  EXPECT_EQ(accounts_.supply(kX), Amount{600});
  ASSERT_NE(accounts_.FindTransfer(Key(2)), nullptr);
  EXPECT_EQ(*accounts_.FindTransfer(Key(2)), TransferId{7});
  EXPECT_EQ(accounts_.FindTransfer(Key(3)), nullptr);
  EXPECT_EQ(accounts_.balance(AccountId{2}, kX), B(0, 0));
}

TEST_F(AccountsUnitTest, ReservedClientIdsAreForgottenOldestFirst) {
  for (uint64_t n = 1; n <= 3; ++n) {
    accounts_.HoldClientId(kA, Key(n), OrderId{n});
    accounts_.ReserveClientId(kA, Key(n), OrderId{n});  // order n closed
  }
  // A memory of 2: the first id is free again, the last two are not.
  EXPECT_EQ(accounts_.FindClientId(kA, Key(1)), nullptr);
  ASSERT_NE(accounts_.FindClientId(kA, Key(2)), nullptr);
  EXPECT_EQ(*accounts_.FindClientId(kA, Key(2)), OrderId{2});
  EXPECT_EQ(accounts_.FindClientId(AccountId{2}, Key(2)), nullptr);  // per account
  std::vector<uint64_t> kept;
  accounts_.ForEachReservedClientId(
      [&](AccountId, const Key128&, OrderId order) { kept.push_back(Raw(order)); });
  EXPECT_EQ(kept, (std::vector<uint64_t>{2, 3}));

  // An id held again by a newer order survives its old reservation's end.
  accounts_.HoldClientId(kA, Key(2), OrderId{9});
  accounts_.ReserveClientId(kA, Key(4), OrderId{4});  // pushes out (2, order 2)
  ASSERT_NE(accounts_.FindClientId(kA, Key(2)), nullptr);
  EXPECT_EQ(*accounts_.FindClientId(kA, Key(2)), OrderId{9});
  EXPECT_EQ(accounts_.reserved_client_ids(), 2u);
}

}  // namespace
}  // namespace mb::engine
