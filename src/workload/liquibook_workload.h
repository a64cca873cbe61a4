// Liquibook's perf-test order stream (its test/perf/pt_order_book.cpp, the
// source of its published "inserts per second") as Matchbook commands,
// generated in full from a seed before anything is timed.
//
// Liquibook's stream: limit orders alternating buy, sell, buy, ...; buy prices
// uniform in 1880..1889, sell prices uniform in 1884..1893, quantities uniform
// in 100, 200, ..., 1000; no accounts, no cancels. Here: GTC limit orders on
// one market whose tick is one price unit and whose lot is one quantity unit
// (LiquibookConfig), from accounts drawn uniformly from 1..accounts, every one
// funded far beyond what the stream can lock, no client order ids, STP none.
//
// Liquibook's book grows without bound: a bid below 1884 or an ask above 1889
// can never trade, and the outermost tradable levels (bids at 1884, asks at
// 1889) fill faster than the other side drains them, so about half of all
// inserts stay in the book for good (its test reports "matched" = inserts -
// resting orders at the end, ~50%). Here the book is bounded: when an insert
// rests on a level that then holds more than LiquibookSpec::max_level_orders
// orders, the next command cancels that level's oldest order. Only the deep
// levels at the edges reach the cap, and with 100 orders they practically never
// empty, so the bounded stream trades as the unbounded one does (same share of
// trading inserts, same trades per insert; docs/benchmarks.md has both), at the
// price of ~0.49 cancels per insert (~1/3 of the commands).
//
// The generator runs a shadow Engine, as GenerateExchangeCoreMix() does: every
// cancel names an order open at that point of the replay, and a replay of
// Workload::setup then Workload::commands on a fresh Engine with
// Workload::config reproduces the shadow's events. MixStats: gtc counts the
// inserts, cancel the cancels.
//
// Thread safety: plain functions and values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/engine.h"
#include "workload/engine_workload.h"

namespace mb::bench {

// One market on kBenchMarket between kBenchQuote ("USDT", scale 6) and
// kBenchBase ("BTC", scale 8): tick 1 USDT (10^6 units), lot 0.001 BTC (10^5
// units), so Liquibook's price 1880 is 1880 ticks and its quantity 100 is 100
// lots; maker 2 bps, taker 5 bps, as BenchConfig. Accounts 1..accounts trade, 0
// collects fees.
engine::EngineConfig LiquibookConfig(uint32_t accounts, uint32_t expected_open_orders);

struct LiquibookSpec {
  uint64_t seed = 1;
  std::size_t commands = 3'000'000;  // inserts and cancels together
  uint32_t accounts = 1000;
  // Liquibook's constants: buy prices buy_low..buy_low+9, sell prices
  // sell_low..sell_low+9, quantities qty_step x 1..10.
  int64_t buy_low = 1880;
  int64_t sell_low = 1884;
  int64_t qty_step = 100;
  // The bound on the book (see the file comment): at most this many orders per
  // level, so at most 20 x this many resting orders. 0: no cancels, the book
  // grows as in Liquibook's test.
  std::size_t max_level_orders = 100;
  bool check_invariants = false;  // Engine::CheckInvariants() after every command (slow)
};

// REQUIRES: spec.commands > 0.
Workload GenerateLiquibookStream(const LiquibookSpec& spec);

}  // namespace mb::bench
