// Engine::Impl: the engine's state and the member functions that read and
// change it. Declared here, defined by concept:
//
//   engine.cc      decide (Process, one Decide() per command type, Match,
//                  DryWalk) and evolve (Apply, one Evolve() per event type).
//                  They stay together: decide changes state only through
//                  Emit(), which appends the event and calls the very Evolve()
//                  that Apply() dispatches to, so live and replayed states are
//                  the same code's result.
//   image.cc       ExportImage, Load (behind Engine::Restore), the state and
//                  configuration hashes.
//   invariants.cc  CheckInvariants.
//
// The state is an OrderBook (engine/order_book.h), Accounts
// (engine/accounts.h), each market's status, the last sequence and the next
// trade id. Private to the engine module: only src/engine/*.cc include this.
//
// Thread safety: none; one thread owns an Engine (engine/engine.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/strong.h"
#include "engine/accounts.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/internal/auth_registry.h"
#include "engine/market.h"
#include "engine/order_book.h"
#include "engine/types.h"

namespace mb::engine {

namespace internal {

// Whether a market's open orders may be canceled by their owners: not while
// it is halted (nothing moves) or closed (nothing is open).
inline bool Cancelable(MarketStatus s) noexcept {
  return s == MarketStatus::kTrading || s == MarketStatus::kCancelOnly;
}

// Whether an enum value taken from a command or an image is a declared one
// (0..last): the codec carries any byte.
template <class E>
bool EnumInRange(E v, E last) noexcept {
  return Raw(v) <= Raw(last);
}

}  // namespace internal

class Engine::Impl {
 public:
  // REQUIRES: config.Validate() returned Ok.
  explicit Impl(EngineConfig config);

  // --- decide and evolve (engine.cc) ---
  void Process(const Command& c, EventBuffer* out) noexcept;
  void Apply(const Event& e) noexcept;

  // --- queries ---
  const EngineConfig& config() const noexcept { return cfg_; }
  const EngineConfig& start_config() const noexcept { return start_cfg_; }
  Sequence last_sequence() const noexcept { return last_seq_; }
  TradeId next_trade_id() const noexcept { return next_trade_; }
  Balance balance(AccountId a, AssetId s) const noexcept {
    if (Raw(a) >= accounts_.max_accounts() || Raw(s) >= accounts_.assets()) return {};
    return accounts_.balance(a, s);
  }
  MarketStatus market_status(MarketId m) const noexcept { return status_.at(Raw(m)); }
  const OrderBook& book() const noexcept { return book_; }
  const Accounts& accounts() const noexcept { return accounts_; }

  // --- the image (image.cc) ---
  void ExportImage(EngineImage* img) const;
  // Loads an image into this fresh Impl, checking it against everything the
  // engine itself could have exported; on failure this Impl is half-loaded
  // and must be dropped. The caller then checks the invariants.
  Status Load(const EngineImage& image);
  // An image's order into a pool slot: open, its client id held, in no level.
  uint32_t OpenImageOrder(const ImageOrder& o);
  uint64_t StateHash() const;
  uint64_t ConfigHash() const;

  // --- invariants (invariants.cc) ---
  Status CheckInvariants() const;

  // A conditional order waiting for its trigger (OrderArmed .. OrderTriggered
  // or its close). The order itself is open in the book's pool, in no level.
  struct Stop {
    OrderId id{};
    MarketId market{};
    Side side = Side::kBuy;
    bool rise = false;  // the stop condition is last >= stop (else last <= stop)
    Price stop{};       // 0: a trailing stop without an activation price
    int32_t delta = 0;  // trailing, basis points; 0: a plain stop
    // Trailing stops: tracking has started (the stop condition was met, or
    // there is no stop price), and the best last price since (lowest for a
    // buy, highest for a sell; 0 until a trade sets it).
    bool active = false;
    Price extreme{};
  };
  // Waiting conditional orders by id.
  const std::map<uint64_t, Stop>& stops() const noexcept { return stops_; }

  // A resting iceberg order's slice size and hidden quantity; the order's
  // `remaining` is its visible part (what its level counts).
  struct Iceberg {
    Qty slice{};
    Qty hidden{};
  };
  const std::map<uint64_t, Iceberg>& icebergs() const noexcept { return icebergs_; }

  // An order list not done yet (ListAccepted .. ListDone).
  struct OrderList {
    uint64_t id = 0;
    AccountId account{};
    MarketId market{};
    ListType type = ListType::kOco;
    bool has_client_id = false;
    Key128 client_id{};
    OrderId orders[3]{};
  };
  const std::map<uint64_t, OrderList>& lists() const noexcept { return lists_; }
  const std::map<uint64_t, OrderPending>& pending() const noexcept { return pending_; }
  // The OCO pair of a list (its orders 0 and 1, or 1 and 2 for OTOCO); none
  // for OTO.
  static bool OcoPair(const OrderList& l, OrderId* a, OrderId* b) noexcept;
  // Of an OCO pair, the order holding the pair's shared lock: the
  // LIMIT_MAKER one if there is one, else the first.
  OrderId LockHolder(OrderId a, OrderId b) const noexcept;
  // What a waiting or resting order needs locked now: its quantity (sells),
  // price x quantity (limit buys), nothing (stop-market buys).
  int64_t StandingNeed(const Order& o) const noexcept;
  Price last_price(MarketId m) const noexcept { return last_price_[Raw(m)]; }

 private:
  // A new order's checks passed (reason kNone): what it locks and whether a
  // FOK among them cannot fill.
  struct Admission {
    RejectReason reason = RejectReason::kNone;
    uint64_t existing = 0;  // the first order, for duplicates
    int64_t lock = 0;
    bool fok_unfillable = false;
  };
  // What a taker could fill now (DryWalk).
  struct Walk {
    int64_t lots = 0;
    int64_t quote = 0;  // quote units paid (buy) or received (sell)
    bool overflow = false;
  };

  // --- decide: validates a command, then emits its events ---
  void Decide(const PlaceOrder& p) noexcept;
  void Decide(const CancelOrder& c) noexcept;
  void Decide(const CancelAll& c) noexcept;
  void Decide(const AmendOrder& a) noexcept;
  void Decide(const Deposit& d) noexcept;
  void Decide(const Withdraw& w) noexcept;
  void Decide(const SetMarketStatus& s) noexcept;
  void Decide(const CancelReplace& c) noexcept;
  void Decide(const TransferOut& t) noexcept;
  void Decide(const ResolveTransfer& r) noexcept;
  void Decide(const PlaceOrderList& l) noexcept;
  void Decide(const CancelOrderList& c) noexcept;
  void Decide(const AuthChange& c) noexcept;
  void Decide(const AddAsset& a) noexcept;
  void Decide(const AddMarket& m) noexcept;
  // Decide(PlaceOrder)'s checks, without emitting. check_balance false: the
  // caller checks the funds (an OCO pair shares its lock); check_trigger
  // false: a pending order being placed may trigger at once.
  Admission Admit(const PlaceOrder& p, bool check_balance, bool check_trigger) const noexcept;
  // An OCO pair (pair[0] above, pair[1] below, admitted as adm[0], adm[1])
  // shares one lock: the holder (the LIMIT_MAKER order, else the above one)
  // locks what it needs, the other only what it needs beyond. Returns the
  // pair's total.
  static int64_t ShareLock(const PlaceOrder* pair, Admission* adm) noexcept;
  // Emits an admitted order under `id`, locking `lock`, and matches it.
  void Enter(const PlaceOrder& p, OrderId id, int64_t lock, bool fok_unfillable) noexcept;
  // After a command's own events: settles the lists it touched and triggers
  // waiting orders, one at a time, until neither has anything left to do.
  void Settle() noexcept;
  void SettleList(uint64_t list_id) noexcept;
  // Places an OTO / OTOCO list's pending orders (its working order filled).
  void Activate(const OrderList& l) noexcept;
  // Cancels every open order of a list (its pending ones go with ListDone).
  void CancelList(const OrderList& l) noexcept;
  // Cancels every open order of the market (it closes).
  void CancelMarket(MarketId market) noexcept;
  // Triggers the oldest waiting order of `market` whose condition the last
  // price meets; false when there is none.
  bool TriggerOldest(MarketId market) noexcept;
  // Matches the open order at pool index ti, in no level, against the book;
  // then it rests, expires or has filled.
  void Match(uint32_t ti) noexcept;
  // A dry run of matching: what a taker could fill right now, applying
  // self-trade prevention as Match() does. `limit` 0 means any price;
  // `max_lots` 0 no lot limit; `budget` 0 no quote budget.
  Walk DryWalk(const MarketSpec& m, MarketId mid, Side side, AccountId account, StpMode stp,
               Price limit, int64_t max_lots, int64_t budget) const noexcept;
  void Trigger(uint64_t id) noexcept;
  // The list an order belongs to, or nullptr.
  const OrderList* ListOf(OrderId id) const noexcept;
  // Trailing stops of `market` follow a trade at `price` (evolve).
  void Follow(MarketId market, Price price);
  // What of an open order is not filled yet: its remaining quantity, with an
  // iceberg's hidden part.
  Qty Unfilled(const Order& o) const noexcept;
  // An iceberg's hidden quantity; 0 for any other order.
  int64_t Hidden(OrderId id) const noexcept;
  // Removes a waiting order from the trigger structures; none: no-op.
  void Disarm(OrderId id);
  void Arm(const Stop& s);
  // The pool index of the open order a cancel or amend names, or kNil.
  uint32_t Target(AccountId account, MarketId market, OrderId id,
                  const ClientOrderId& cid) const noexcept;
  void Reject(CommandType cmd, RejectReason r, AccountId account, MarketId market,
              OrderId target = OrderId{0}, const ClientOrderId& cid = ClientOrderId{},
              uint64_t existing = 0) noexcept;
  // Appends an event of the command being decided and applies it.
  template <class Body>
  void Emit(const Body& body) noexcept;

  // --- evolve: applies one event ---
  void Evolve(const OrderAccepted& a, int64_t ts);
  // Only the sequence moves; a pending order refused drops out.
  void Evolve(const Rejected& r, int64_t) noexcept;
  void Evolve(const Trade& t, int64_t);
  void Evolve(const OrderRested& r, int64_t);
  void Evolve(const OrderCanceled& x, int64_t) { ApplyClose(x.order_id, x.released); }
  void Evolve(const OrderExpired& x, int64_t) { ApplyClose(x.order_id, x.released); }
  void Evolve(const OrderAmended& a, int64_t);
  void Evolve(const Deposited& d, int64_t);
  void Evolve(const Withdrawn& w, int64_t);
  void Evolve(const MarketStatusChanged& x, int64_t) noexcept { status_[Raw(x.market)] = x.status; }
  void Evolve(const ClientOrderIdChanged& x, int64_t);
  void Evolve(const TransferHeld& t, int64_t);
  void Evolve(const TransferCompleted& t, int64_t);
  void Evolve(const TransferRefunded& t, int64_t);
  void Evolve(const OrderArmed& a, int64_t);
  void Evolve(const OrderTriggered& t, int64_t);
  void Evolve(const IcebergAccepted& a, int64_t);
  void Evolve(const IcebergRefilled& r, int64_t);
  void Evolve(const ListAccepted& a, int64_t);
  void Evolve(const OrderPending& p, int64_t);
  void Evolve(const ListDone& d, int64_t);
  void Evolve(const AuthChanged& a, int64_t) { auth_.Apply(a); }
  void Evolve(const AssetAdded& a, int64_t);
  void Evolve(const MarketAdded& m, int64_t);
  void ApplyClose(OrderId id, Amount released);
  // An order leaves the engine (filled, canceled, expired).
  void Retire(uint32_t i);

  // --- state (one writer: the engine thread) ---
  // The configuration, with the assets and markets added since the start
  // appended; the start's is kept beside it: ConfigHash() is its hash, a
  // fresh engine to restore an image into is built from it, and the image
  // carries what was added since.
  EngineConfig cfg_;
  EngineConfig start_cfg_;
  uint64_t config_hash_;
  OrderBook book_;
  Accounts accounts_;
  std::vector<MarketStatus> status_;  // by MarketId
  internal::AuthRegistry auth_;
  std::vector<Price> last_price_;  // by MarketId; 0 before the market's first trade
  // Each market's waiting conditional orders, by how they trigger: plain
  // stops by stop price (the ones a last price meets are a prefix of each
  // set), trailing stops by id. Tree nodes: a conditional order allocates
  // one; plain orders never touch these.
  struct Triggers {
    std::set<std::pair<int64_t, uint64_t>> rise;  // (stop, id): last >= stop
    std::set<std::pair<int64_t, uint64_t>> fall;  // (-stop, id): last <= stop
    std::vector<uint64_t> trailing;               // ids, ascending
  };
  std::vector<Triggers> triggers_;  // by MarketId
  std::map<uint64_t, Stop> stops_;
  std::map<uint64_t, Iceberg> icebergs_;  // iceberg orders, by id
  std::map<uint64_t, OrderList> lists_;   // by list id
  std::map<uint64_t, uint64_t> list_of_;  // list order id -> list id, until ListDone
  std::map<uint64_t, OrderPending> pending_;
  // (account, client id lo, hi) of an open list -> its id.
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, uint64_t> list_client_ids_;
  Sequence last_seq_{0};
  TradeId next_trade_{1};

  // Per-command context while Process() runs.
  EventBuffer* out_ = nullptr;
  Sequence seq_{0};
  int64_t ts_ = 0;
  std::vector<uint64_t> scratch_ids_;  // CancelAll's targets
  // A trade this command happened in a market with waiting orders.
  bool check_triggers_ = false;
  MarketId trigger_market_{};
  // The lowest and highest trade price of this command (0: no trade yet) in
  // range_market_: a plain stop is met by any trade of the command.
  MarketId range_market_{};
  Price range_low_{};
  Price range_high_{};
  // Lists whose orders traded or closed during this command, and the list
  // orders that filled; Settle() reads them.
  std::vector<uint64_t> touched_lists_;
  std::vector<uint64_t> settling_;
  std::vector<uint64_t> filled_list_orders_;
};

}  // namespace mb::engine
