// The matching engine: order books with price-time priority, wallets with
// available/locked balances, fees, and the global sequence, as one
// deterministic state machine.
//
//   Process(command)  — decide: validates, assigns the next sequence and emits
//                       events; it changes state only by calling Apply() on each
//                       event it emits, so live state and replayed state are
//                       the same code's result.
//   Apply(event)      — evolve: applies one event to the state; replaying a
//                       journal is Apply() over its events.
//
// No I/O, no clock, no locks; no heap allocation per order once the pools are
// sized (they grow, amortised, only past EngineConfig::expected_open_orders).
//
// Thread safety: none. One thread owns an Engine (the engine thread); readers
// get data from the events, never from this object.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/strong.h"
#include "engine/command.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/market.h"
#include "engine/order_terms.h"

namespace mb::engine {

struct Balance {
  Amount available{};
  Amount locked{};
  friend bool operator==(const Balance&, const Balance&) = default;
};

// A read-only view of one order, open or being matched.
struct OrderView {
  OrderId id{};
  OrderTerms terms{};
  Qty remaining{};
  Amount locked{};
  int64_t created_ns = 0;
};

struct LevelView {
  Price price{};
  Qty qty{};
  uint32_t orders = 0;
};

// Receives the events of one command, in order. Reserve capacity once; the
// engine only appends.
using EventBuffer = std::vector<Event>;

class Engine {
 public:
  // REQUIRES: config.Validate() returned Ok.
  explicit Engine(EngineConfig config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  // Decide: sequences the command and appends its events (at least one) to *out.
  void Process(const Command& command, EventBuffer* out) noexcept;

  // Evolve: applies one event. REQUIRES: events arrive in the order Process
  // emitted them (a journal replay); an event inconsistent with the state is a
  // bug and aborts (MB_CHECK).
  void Apply(const Event& event) noexcept;

  // --- queries (tests, tools, the read side's bootstrap) ---
  // The configuration, with the assets and markets added since the start.
  const EngineConfig& config() const noexcept;
  // The configuration the engine started with, without them: what an engine
  // that is to Restore() this one's image is built from.
  const EngineConfig& start_config() const noexcept;
  Sequence last_sequence() const noexcept;
  TradeId next_trade_id() const noexcept;
  Balance balance(AccountId account, AssetId asset) const noexcept;
  MarketStatus market_status(MarketId market) const noexcept;
  std::optional<OrderView> FindOrder(OrderId id) const noexcept;
  std::optional<Price> BestBid(MarketId market) const noexcept;
  std::optional<Price> BestAsk(MarketId market) const noexcept;
  // Up to max_levels levels of one side, best first.
  std::vector<LevelView> Depth(MarketId market, Side side, std::size_t max_levels) const;
  // Open orders of one market side in priority order.
  std::vector<OrderView> Orders(MarketId market, Side side) const;
  std::size_t open_orders() const noexcept;
  // Deposits minus withdrawals of an asset: what all accounts hold in total,
  // with what transfers to other venues hold (held()).
  Amount supply(AssetId asset) const noexcept;
  // What transfers to other venues, not yet resolved, hold of an asset.
  Amount held(AssetId asset) const noexcept;
  // Those transfers, by id.
  std::vector<PendingTransfer> PendingTransfers() const;

  // Hash over accounts, books (in priority order), ids, reserved client ids,
  // transfers and market states. Equal histories give equal hashes.
  uint64_t StateHash() const;
  // Hash of the configuration the engine started with (assets, markets,
  // sizing); stored in snapshots. == HashConfig(config()) until an asset or
  // a market is added (AddAsset, AddMarket): the image carries those.
  uint64_t ConfigHash() const;

  // Checks the invariants of docs/architecture.md: conservation per asset, no negative
  // balance, locked == what open orders can spend, no over-fill, books not
  // crossed, level totals consistent. Returns the first violation.
  Status CheckInvariants() const;

  EngineImage ExportImage() const;
  // The same into *image, reusing its vectors' capacity: a caller that
  // exports again and again (the snapshot follower) allocates and frees no
  // memory once the image has grown to the state's size.
  void ExportImage(EngineImage* image) const;
  // Replaces the whole state. Fails (changing nothing) when the image belongs
  // to another configuration or is inconsistent.
  Status Restore(const EngineImage& image);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The configuration hash without building an engine (tools that only read a
// data directory).
uint64_t HashConfig(const EngineConfig& config);

}  // namespace mb::engine
