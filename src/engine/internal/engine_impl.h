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
#include <optional>
#include <vector>

#include "common/status.h"
#include "common/strong.h"
#include "engine/accounts.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/market.h"
#include "engine/order_book.h"
#include "engine/types.h"

namespace mb::engine {

namespace internal {

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
  uint64_t StateHash() const;
  uint64_t ConfigHash() const;

  // --- invariants (invariants.cc) ---
  Status CheckInvariants() const;

 private:
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
  // Matches the open order at pool index ti, in no level, against the book;
  // then it rests, expires or has filled.
  void Match(uint32_t ti) noexcept;
  // A dry run of matching: what a taker could fill right now, applying
  // self-trade prevention as Match() does. `limit` 0 means any price;
  // `max_lots` 0 no lot limit; `budget` 0 no quote budget.
  Walk DryWalk(const MarketSpec& m, MarketId mid, Side side, AccountId account, StpMode stp,
               Price limit, int64_t max_lots, int64_t budget) const noexcept;
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
  void Evolve(const Rejected&, int64_t) noexcept {}  // only the sequence moves
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
  void ApplyClose(OrderId id, Amount released);
  // An order leaves the engine (filled, canceled, expired).
  void Retire(uint32_t i);

  // --- state (one writer: the engine thread) ---
  EngineConfig cfg_;
  OrderBook book_;
  Accounts accounts_;
  std::vector<MarketStatus> status_;  // by MarketId
  Sequence last_seq_{0};
  TradeId next_trade_{1};

  // Per-command context while Process() runs.
  EventBuffer* out_ = nullptr;
  Sequence seq_{0};
  int64_t ts_ = 0;
  std::vector<uint64_t> scratch_ids_;  // CancelAll's targets
};

}  // namespace mb::engine
