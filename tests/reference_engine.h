// A slow, obviously-correct second implementation of docs/engine.md, for the
// property test: plain std containers, one function per rule, no pools, no
// hashing, no decide/evolve split. It shares no code with src/engine/engine.cc;
// only the domain types (engine/*.h) and common/checked.h.
//
// The property test drives this and engine::Engine with the same commands and
// requires identical events. Where docs/engine.md is silent, the choice made
// here is marked "READING (Qn):" in the code:
//
//   Q2  A MARKET order's price and tif are ignored, not rejected; it holds (and
//       OrderAccepted shows) price 0 and tif IOC.
//   Q3  kInvalidOrderType for any enum value out of range, a MARKET's ignored
//       tif included. An order "has" qty / quote_qty when it is non-zero: a
//       MARKET with qty < 0 and no quote_qty is kInvalidQuantity.
//   Q6  Amend "unchanged" compares effective values: new_price 0 or equal to
//       the price, and new_qty 0 or equal to the quantity, is kNoChange.
//   Q8  A deposit is kOverflow when the available balance or the asset's
//       deposited total would not fit in int64.
//   Q10 An empty TransferRef is a reference like any other (a second empty
//       ref is kDuplicateTransfer).
//   Q12 An amended order keeps its creation time (OrderView.created_ns).
//   Q13 Transfers to other venues (TransferOut / ResolveTransfer): the fee
//       account may send one like any account; a refund's reason is checked
//       (kInvalidStatus beyond kRefused) but a completion's is ignored; an
//       unknown or already resolved transfer id is kUnknownTransfer with
//       account 0 and existing_id = the id asked for.
//
// Conditional orders (STOP_LOSS, STOP_LOSS_LIMIT, TAKE_PROFIT,
// TAKE_PROFIT_LIMIT, plain or trailing) wait out of the book in a list by id,
// scanned from the front: after a command that traded, the lowest id whose
// condition holds triggers and matches as a new taker would, and the scan
// starts again until no order qualifies. A plain stop's condition holds when
// the command's trades in the market, or the last price, reached its stop
// price; a trailing stop looks at the last price only.
//
// Icebergs rest with their whole unfilled quantity in `remaining` and the part
// the book shows in `visible`; a trade that empties the visible part moves the
// order to its level's tail with the next slice.
//
// Order lists (OCO, OTO, OTOCO) are a map by list id; their pending orders
// are kept as the OrderPending events that announced them. At the end of a
// command the lists its events touched settle (by list id), then one waiting
// order triggers, and again, until neither has anything left to do.
//
// Thread safety: none; one test thread owns a ReferenceEngine.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/checked.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/market.h"

namespace mb::testing {

// One order, open or being matched.
struct RefOrder {
  OrderId id{};
  AccountId account{};
  MarketId market{};
  engine::Side side = engine::Side::kBuy;
  engine::OrderType type = engine::OrderType::kLimit;
  engine::TimeInForce tif = engine::TimeInForce::kGtc;
  engine::StpMode stp = engine::StpMode::kNone;
  Price price{};         // 0 for MARKET
  Qty qty{};             // total lots (0 for MARKET by quote)
  Qty remaining{};       // lots still to fill (0 for MARKET by quote)
  Amount quote_qty{};    // MARKET by quote: the budget
  Amount budget_left{};  // MARKET by quote: quote still to spend (buy) or to receive (sell)
  Amount locked{};       // what the order still holds locked of its spend asset
  int64_t created_ns = 0;
  std::string client_id;  // empty: none
  Qty iceberg{};          // an iceberg's slice; 0: not an iceberg
  Qty visible{};          // a resting iceberg: the part of `remaining` the book shows
};

// An order list while any of its orders is open or pending.
struct RefList {
  uint64_t id = 0;
  AccountId account{};
  MarketId market{};
  engine::ListType type = engine::ListType::kOco;
  std::string client_id;  // empty: none
  OrderId orders[3]{};    // 0: none
};

// A conditional order waiting for its trigger: open, in no book level.
struct RefWaiting {
  RefOrder order;       // remaining == qty; locked: see CheckInvariants
  Price stop{};         // 0: a trailing stop without an activation price
  int32_t delta = 0;    // trailing delta in basis points; 0: a plain stop
  bool active = false;  // trailing: tracking the last price
  Price extreme{};      // trailing: the best last price since tracking began (0: none yet)
};

// A transfer to another venue, held until it is resolved.
struct RefPendingTransfer {
  TransferId id{};
  AccountId account{};
  AssetId asset{};
  Amount amount{};
  Amount fee{};
  std::string ref;
  std::string address;
};

// A client order id that stays reserved after its order closed.
struct RefReservedClientId {
  AccountId account{};
  std::string client_id;
  OrderId order_id{};
};

class ReferenceEngine {
 public:
  // REQUIRES: config.Validate() returned Ok (notional_per_tick_lot filled).
  explicit ReferenceEngine(engine::EngineConfig config);

  // Sequences the command and returns its events (at least one).
  std::vector<engine::Event> Process(const engine::Command& command);

  // --- queries ---
  const engine::EngineConfig& config() const { return config_; }
  uint64_t last_sequence() const { return seq_; }
  uint64_t next_trade_id() const { return next_trade_id_; }
  engine::Balance balance(AccountId account, AssetId asset) const;
  engine::MarketStatus market_status(MarketId market) const;
  std::optional<Price> BestBid(MarketId market) const;
  std::optional<Price> BestAsk(MarketId market) const;
  // Up to max_levels levels of one side, best first.
  std::vector<engine::LevelView> Depth(MarketId market, engine::Side side,
                                       std::size_t max_levels) const;
  // Open orders of one market side in priority order.
  std::vector<RefOrder> Orders(MarketId market, engine::Side side) const;
  const RefOrder* FindOrder(OrderId id) const;
  // Ids of all open orders (in the book or waiting), ascending.
  std::vector<OrderId> OpenOrderIds() const;
  std::size_t open_orders() const { return index_.size() + waiting_.size(); }
  // The waiting conditional orders, by id.
  const std::vector<RefWaiting>& waiting() const { return waiting_; }
  // The market's last trade price; 0 before its first trade.
  Price last_price(MarketId market) const { return last_price_.at(Raw(market)); }
  // Deposits - withdrawals - completed transfers out (net of their fees).
  Amount supply(AssetId asset) const;
  // What the pending transfers to other venues hold of an asset.
  Amount held(AssetId asset) const;
  // The pending transfers, by id.
  const std::map<TransferId, RefPendingTransfer>& pending_transfers() const { return pending_; }
  // The order id an (account, client id) pair is reserved by, open or recently closed.
  std::optional<OrderId> FindClientId(AccountId account, const std::string& client_id) const;
  // Reserved client ids of closed orders, oldest first.
  const std::deque<RefReservedClientId>& reserved_client_ids() const { return closed_ids_; }
  std::size_t transfer_refs() const { return transfers_.size(); }
  // The open lists, by id, and their orders not placed yet, by order id.
  const std::map<uint64_t, RefList>& lists() const { return lists_; }
  const std::map<OrderId, engine::OrderPending>& pending_orders() const { return pending_orders_; }
  // The list an open or pending order belongs to, if any.
  const RefList* ListOf(OrderId id) const;

  // The engine.md invariants, checked from scratch: conservation per asset
  // (available + locked + held == supply), no negative balance, locked == sum
  // of open orders' locks, held == sum of pending transfers, no over-fill,
  // books not crossed and well formed, client-id registry consistent.
  Status CheckInvariants() const;

 private:
  using Bids = std::map<Price, std::deque<RefOrder>, std::greater<Price>>;
  using Asks = std::map<Price, std::deque<RefOrder>>;
  struct Book {
    Bids bids;
    Asks asks;
  };
  // Where an open order rests.
  struct Location {
    MarketId market{};
    engine::Side side = engine::Side::kBuy;
    Price price{};
  };
  // kBudgetSpent: a MARKET order by quote amount bought what its budget
  // allows while the book still had liquidity.
  enum class MatchOutcome { kOpen, kFilled, kExpired, kBudgetSpent };

  using RejectReason = engine::RejectReason;
  void Emit(engine::EventBody body);
  void Reject(engine::CommandType command, engine::RejectReason reason, AccountId account,
              MarketId market, OrderId order_id, uint64_t existing_id, const ClientOrderId& cid);

  void DoPlace(const engine::PlaceOrder& c);
  void DoCancel(const engine::CancelOrder& c);
  void DoCancelAll(const engine::CancelAll& c);
  void DoAmend(const engine::AmendOrder& c);
  void DoDeposit(const engine::Deposit& c);
  void DoWithdraw(const engine::Withdraw& c);
  void DoSetMarketStatus(const engine::SetMarketStatus& c);
  void DoCancelReplace(const engine::CancelReplace& c);
  void DoTransferOut(const engine::TransferOut& c);
  void DoResolveTransfer(const engine::ResolveTransfer& c);
  void DoPlaceList(const engine::PlaceOrderList& c);
  void DoCancelList(const engine::CancelOrderList& c);

  // A new order's checks (docs/engine.md, in their order) and, when it
  // passes, the order as the engine holds it and what it locks.
  struct Admission {
    RejectReason reason = RejectReason::kNone;
    uint64_t existing = 0;
    RefOrder order;
    int64_t lock = 0;
    bool fok_unfillable = false;
  };
  Admission Admit(const engine::PlaceOrder& c, OrderId id, bool check_balance, bool check_trigger);
  // Emits an admitted order's acceptance and what follows it: armed,
  // iceberg, matching.
  void Enter(const engine::PlaceOrder& c, RefOrder o, int64_t lock, bool fok_unfillable);
  // Emits OrderCanceled for an open order and takes it out.
  void CancelOpen(OrderId id);
  // Cancels every open order of a list, in order index order.
  void CancelListOrders(const RefList& l);
  // The end of a command: touched lists settle, then one trigger, repeated.
  void Settle();
  void SettleList(uint64_t list_id);
  // A filled OTO / OTOCO working order: its pending orders are placed, or
  // each refused.
  void Activate(const RefList& l);
  // The lowest id of the market's waiting orders whose condition holds
  // triggers; false when none does.
  bool TriggerOldest(MarketId market);

  // Matches a taker against the opposite side of its book, emitting trades and
  // self-trade expiries. The taker is not in the book.
  MatchOutcome Match(RefOrder& taker);
  // After Match: rest a GTC limit remainder, or expire the rest.
  void Finish(RefOrder& taker, MatchOutcome outcome);
  void ExpireOrder(RefOrder& order, engine::ExpireReason reason);
  // The order has left the book for good: its client id becomes reserved-closed.
  void CloseOrder(const RefOrder& order);
  // A trade at `price` in `market`: the last price moves and the market's
  // trailing stops follow it.
  void OnTrade(MarketId market, Price price);
  // waiting_[k] leaves the list and enters matching.
  void Trigger(std::size_t k);
  // The position of a waiting order in waiting_, or waiting_.size().
  std::size_t WaitingIndex(OrderId id) const;

  // A dry walk of the book as matching would do it (self-trade prevention
  // included). Result in 128 bits, before any overflow check.
  struct Walk {
    int128 lots = 0;
    int128 base = 0;
    int128 notional = 0;
  };
  Walk DryWalk(const RefOrder& taker) const;

  RefOrder* FindOpen(OrderId id);
  // Resolves a cancel/amend target: by id, or by client id when id == 0. Only
  // open orders of that account in that market.
  RefOrder* ResolveTarget(AccountId account, MarketId market, OrderId id, const ClientOrderId& cid);
  void RemoveFromBook(OrderId id);
  void AddToBook(const RefOrder& order);

  engine::Balance& Bal(AccountId account, AssetId asset);
  AssetId SpendAsset(const RefOrder& o) const;
  bool Crosses(const RefOrder& taker, Price level_price) const;

  engine::EngineConfig config_;
  uint64_t seq_ = 0;
  uint64_t next_trade_id_ = 1;
  int64_t now_ns_ = 0;
  std::vector<engine::Event> out_;

  std::vector<engine::MarketStatus> status_;
  std::vector<Book> books_;
  std::map<OrderId, Location> index_;  // orders in a book
  std::vector<RefWaiting> waiting_;    // conditional orders not yet triggered, by id
  std::vector<Price> last_price_;      // by market; 0 before its first trade
  // This command's trade prices in the market it traded in (0: no trade yet).
  MarketId range_market_{};
  Price range_low_{};
  Price range_high_{};
  bool check_triggers_ = false;  // a trade or a placed pending order since the last scan
  MarketId trigger_market_{};
  std::vector<uint64_t> touched_;  // lists whose orders traded or closed, to settle
  std::vector<OrderId> filled_;    // list orders filled completely in this command
  std::map<uint64_t, RefList> lists_;
  std::map<OrderId, engine::OrderPending> pending_orders_;
  // Keyed by BalanceKey(account, asset): account in the high bits, asset in the low 16.
  static uint64_t BalanceKey(AccountId account, AssetId asset) {
    return (uint64_t{Raw(account)} << 16) | Raw(asset);
  }
  static AccountId KeyAccount(uint64_t key) { return AccountId{static_cast<uint32_t>(key >> 16)}; }
  static AssetId KeyAsset(uint64_t key) { return AssetId{static_cast<uint16_t>(key & 0xffff)}; }
  std::map<uint64_t, engine::Balance> balances_;
  std::vector<Amount> supply_;  // deposits - withdrawals - transfers out, per asset
  std::vector<Amount> held_;    // what pending transfers hold, per asset
  std::map<TransferId, RefPendingTransfer> pending_;
  std::map<std::pair<AccountId, std::string>, OrderId> client_ids_;  // open + reserved
  std::deque<RefReservedClientId> closed_ids_;                       // oldest first
  std::map<std::string, TransferId> transfers_;
};

}  // namespace mb::testing
