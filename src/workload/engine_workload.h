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
};

struct Workload {
  engine::EngineConfig config;
  std::vector<engine::Command> setup;     // deposits and the initial book; not timed
  std::vector<engine::Command> commands;  // the measured stream
  MixStats stats;
};

Workload GenerateExchangeCoreMix(const MixSpec& spec);

// A resting GTC limit order (no client order id, STP none).
engine::Command MakeLimit(AccountId account, engine::Side side, int64_t price, int64_t lots,
                          engine::TimeInForce tif, int64_t timestamp_ns);

}  // namespace mb::bench
