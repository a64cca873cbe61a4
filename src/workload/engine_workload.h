// Seeded command streams for the engine benchmarks, generated in full before
// anything is timed.
//
// GenerateExchangeCoreMix() reproduces the shape of exchange-core's single-book
// benchmark (its README: 3 M commands; 9% GTC, 3% IOC, 6% cancel, 82% move;
// 1 K accounts; ~1 K resting orders over ~750 price slots; ~6% of commands
// trade). Commands are drawn 9/3/6/82; a controller (MixSpec) holds the book
// size, which moves the measured mix to ~9.5/3/5.5/82. The generator drives a shadow Engine while
// it writes the stream, so every cancel and move targets an order that is open at that point of the
// replay, and the feedback that holds the book near its target size sees the
// real book. A replay of Workload::setup then Workload::commands on a fresh
// Engine with Workload::config reproduces the shadow's events exactly.
//
// The same MixSpec (seed included) gives the same command array on every
// platform: the random source is xoshiro256** with explicit bounded draws, not
// <random>'s implementation-defined distributions.
//
// With MixSpec::conditional_pct > 0 (ConditionalMixSpec(): 20%) it is the
// same mix with that share of the commands placing conditional orders
// (STOP_LOSS, STOP_LOSS_LIMIT, TAKE_PROFIT, TAKE_PROFIT_LIMIT; a fifth of them
// trailing) and iceberg orders; the other commands are drawn 9/3/6/82 as
// above. A stop price lies 1..stop_ticks beyond the last trade price, on the
// side that has not met it, so that many trigger; a triggered order matches as
// a taker (a stop-market sweeps the best levels, a stop-limit trades up to its
// limit and may rest) and may trigger others within the same command.
// Waiting orders are bounded: while max_waiting of them wait, a conditional
// draw cancels the oldest waiting one instead of placing another; icebergs
// likewise (max_icebergs resting; they rest at or near the best price and are
// neither moved nor canceled by the mix's draws). Prices lie around 3,000.00
// USDT (300,000 ticks) instead of 30,000.00: a trailing delta's basis point is
// 30 ticks there, within the price's swings in this mix (~200 ticks over
// 1,000 commands), where at 30,000.00 it would be 300 and no trailing stop
// would ever trigger. The engine's work on the plain mix does not depend on
// the price level.
//
// Thread safety: plain functions and values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/command.h"
#include "engine/engine.h"
#include "engine/market.h"

namespace mb::bench {

// xoshiro256** (Blackman & Vigna), seeded through splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed) noexcept;
  uint64_t Next() noexcept;
  // Uniform in [0, n). REQUIRES: n > 0. Multiply-shift: bias below 2^-40 for n < 2^24.
  uint64_t Below(uint64_t n) noexcept;
  // Uniform in [lo, hi]. REQUIRES: lo <= hi.
  int64_t Between(int64_t lo, int64_t hi) noexcept;
  // True with probability per_million / 10^6.
  bool Chance(uint32_t per_million) noexcept;

 private:
  uint64_t s_[4];
};

// EventType values: engine::EventType runs from 0 to kListDone.
inline constexpr std::size_t kEventTypeCount =
    static_cast<std::size_t>(engine::EventType::kListDone) + 1;

inline constexpr MarketId kBenchMarket{0};
inline constexpr AssetId kBenchQuote{0};  // "USDT", scale 6
inline constexpr AssetId kBenchBase{1};   // "BTC", scale 8

// One market BTCUSDT: tick 0.01 USDT (10^4 units), lot 0.0001 BTC (10^4 units),
// so notional_per_tick_lot == 1; maker 2 bps, taker 5 bps; STP is per order.
// Accounts 1..accounts trade, 0 collects fees.
engine::EngineConfig BenchConfig(uint32_t accounts, uint32_t expected_open_orders);

// One deposit of each asset to accounts 1..accounts, enough for any stream here.
std::vector<engine::Command> FundAccounts(uint32_t accounts);

struct MixSpec {
  uint64_t seed = 1;
  std::size_t commands = 3'000'000;
  uint32_t accounts = 1000;
  std::size_t target_orders = 1000;  // resting orders the stream hovers around
  int64_t center = 3'000'000;        // ticks (30,000.00 USDT); asks from here up, bids below
  int64_t half_band = 950;           // resting prices lie within this many ticks of center
  int64_t max_lots = 20;             // new orders are 1..max_lots lots
  int64_t move_step = 8;             // a non-crossing move shifts the price 1..move_step ticks
  // The book-size controller (exchange-core's generator also picks commands by
  // the book's lack of orders, so its published 9/3/6/82 mix is an outcome,
  // not a law). With 9% placing and 6% cancelling, trades may remove only ~3
  // orders per 100 commands, so most trading commands must leave the order
  // count unchanged:
  //  - a crossing GTC or IOC aims at the best opposite price; below
  //    target_orders it takes part of the first order in the queue (no order
  //    leaves), at or above it takes the whole level (the book shrinks);
  //  - GTCs cross with the odds below (per million), lower below the target;
  //  - a few moves cross (to the best opposite price);
  //  - below the target, some cancel draws become placements.
  // Tuned so that ~6% of commands trade with the book near 1,000 orders on
  // ~750 levels; the measured mix is ~9.5/3/5.5/82.
  uint32_t gtc_cross_ppm_below = 280'000;
  uint32_t gtc_cross_ppm_above = 350'000;
  uint32_t move_cross_ppm = 5'000;
  uint32_t cancel_to_gtc_ppm_below = 80'000;
  // Runs Engine::CheckInvariants() after every generated command and aborts
  // with the command's index and the violation (slow; for diagnosing the engine).
  bool check_invariants = false;

  // Conditional orders and icebergs (see the file comment). conditional_pct
  // 0: none, and the stream is exactly the plain mix's.
  uint32_t conditional_pct = 0;        // percent of the commands drawn as conditional
  uint32_t iceberg_ppm = 250'000;      // of the conditional draws: icebergs
  uint32_t stop_market_ppm = 500'000;  // of the stops: STOP_LOSS / TAKE_PROFIT (else *_LIMIT)
  uint32_t trailing_ppm = 200'000;     // of the stops: trailing (delta 1..max_trailing_bps)
  uint32_t activation_ppm = 500'000;   // of the trailing stops: with an activation price
  int32_t max_trailing_bps = 5;
  int64_t stop_ticks = 60;           // stop prices 1..stop_ticks beyond the last price
  int64_t limit_slip_ticks = 8;      // a stop-limit's limit: 0..this beyond its stop
  uint32_t limit_gtc_ppm = 750'000;  // of the stop-limits: GTC (else IOC)
  std::size_t max_waiting = 200;     // conditional orders waiting at most
  std::size_t max_icebergs = 50;     // icebergs resting at most
  int64_t iceberg_max_slice = 10;    // slice 1..this lots, the order 2..6 slices
};

// What the generator counted of the conditional orders and icebergs.
struct ConditionalStats {
  uint64_t stops = 0;  // conditional orders placed
  uint64_t stop_market = 0;
  uint64_t stop_limit = 0;
  uint64_t trailing = 0;
  uint64_t icebergs = 0;          // iceberg orders placed
  uint64_t stop_cancels = 0;      // the oldest waiting order canceled (at max_waiting)
  uint64_t iceberg_cancels = 0;   // the oldest resting iceberg canceled (at max_icebergs)
  uint64_t triggered = 0;         // OrderTriggered
  uint64_t triggered_market = 0;  // ... of STOP_LOSS / TAKE_PROFIT orders
  uint64_t triggered_limit = 0;   // ... of the *_LIMIT ones
  uint64_t triggered_trailing = 0;
  uint64_t trigger_commands = 0;  // commands in which at least one order triggered
  uint64_t max_triggers_per_command = 0;
  uint64_t canceled_waiting = 0;  // OrderCanceled of a waiting order (the bound cancels them)
  uint64_t iceberg_refills = 0;   // IcebergRefilled
  uint64_t triggered_rested = 0;  // triggered stop-limits whose remainder rested
  double mean_waiting = 0;        // sampled every 1,000 commands
  std::size_t max_waiting = 0;
  double mean_icebergs = 0;  // resting icebergs, sampled every 1,000 commands
  std::size_t waiting_at_end = 0;
};

// What the generator saw through its shadow engine while writing the stream.
struct MixStats {
  uint64_t gtc = 0;
  uint64_t ioc = 0;
  uint64_t cancel = 0;
  uint64_t move = 0;
  uint64_t trading_commands = 0;  // commands with at least one Trade
  uint64_t trades = 0;
  // Orders that left the book (or never entered it) fully filled: maker_filled
  // plus taker_filled over the trades. Liquibook's perf test reports this as
  // "matched" (its inserts minus the orders resting at the end).
  uint64_t filled_orders = 0;
  uint64_t events = 0;
  uint64_t rejected = 0;        // must stay 0: every command is valid when generated
  double mean_open_orders = 0;  // sampled every 1,000 commands
  double mean_price_levels = 0;
  std::size_t max_open_orders = 0;
  // Resting orders after each tenth of the stream (the last: at its end).
  std::array<std::size_t, 10> open_orders_by_tenth{};
  // Events by EventType over the measured stream, and the shadow engine's
  // StateHash() after it (0: not taken): a replay that emits exactly the
  // shadow's events matches both.
  std::array<uint64_t, kEventTypeCount> events_by_type{};
  uint64_t state_hash = 0;
  ConditionalStats conditional;
};

struct Workload {
  engine::EngineConfig config;
  std::vector<engine::Command> setup;     // deposits and the initial book; not timed
  std::vector<engine::Command> commands;  // the measured stream
  MixStats stats;
};

Workload GenerateExchangeCoreMix(const MixSpec& spec);

// The mix with conditional orders and icebergs (see the file comment): the
// default MixSpec with conditional_pct 20 and center 300,000 ticks.
MixSpec ConditionalMixSpec();

// A resting GTC limit order (no client order id, STP none).
engine::Command MakeLimit(AccountId account, engine::Side side, int64_t price, int64_t lots,
                          engine::TimeInForce tif, int64_t timestamp_ns);

}  // namespace mb::bench
