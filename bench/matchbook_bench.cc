// matchbook-bench: the engine's single-book benchmarks, and the entry point of
// the pipeline, queue, projection, snapshot and signing benchmarks (their own
// files).
//
//   matchbook-bench engine [--workload exchange-core|conditional|liquibook]
//                          [--commands N] [--seed S] [--json] [--clock tsc|steady]
//                          [--memory-orders N] [--level-cap N]
//                          [--conditional-share PCT] [--check]
//       Replays a pre-generated command array: exchange-core's single-book mix
//       (engine_workload.h, the default), the same mix with a share of
//       conditional and iceberg orders (engine_workload.h,
//       ConditionalMixSpec()) or Liquibook's perf-test stream
//       (liquibook_workload.h). One pass without per-command clock reads for
//       throughput, one pass timing every command for latency percentiles, the
//       same timing code around nothing for the machine's noise floor, and a
//       memory pass for bytes per resting order. With --json the last line
//       printed is one JSON object.
//   matchbook-bench gbench [Google Benchmark flags]
//       Per-operation cases on a steady ~1,000-order book.
//
// Clocks: per-command latency uses the TSC (lfence; rdtsc; lfence on both
// sides), converted to ns with a ratio calibrated against steady_clock over the
// whole timed pass; --clock steady uses steady_clock::now() instead. The cost
// of an empty timed region is measured and printed; it is NOT subtracted from
// the latencies.
//
// Noise floor: right after the latency pass, the same timed region (Timed())
// with nothing inside runs for as long as that pass did. Its percentiles are
// what an empty command would score; its gaps (two consecutive regions starting
// more than 1 us apart: an interrupt, a VM exit, a descheduled vCPU) per second
// say how often the machine takes the CPU away, and so how many commands of the
// latency pass such a gap should land in.
//
// Thread safety: single-threaded program.
#include <benchmark/benchmark.h>
#include <fmt/core.h>
#include <malloc.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli.h"
#include "engine/engine.h"
#include "fill.h"
#include "pipeline_bench.h"
#include "projection_bench.h"
#include "queue_study.h"
#include "signing_bench.h"
#include "snapshot_bench.h"
#include "stats.h"
#include "workload/engine_workload.h"
#include "workload/liquibook_workload.h"

namespace mb::bench {
namespace {

using engine::Command;
using engine::Engine;
using engine::EventBuffer;
using engine::EventType;
using engine::Side;
using engine::TimeInForce;
using SteadyClock = std::chrono::steady_clock;

// ------------------------------------------------------------------ clocks

inline uint64_t ReadTsc() noexcept {
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}

inline uint64_t ReadSteadyNs() noexcept {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
          .count());
}

enum class ClockKind { kTsc, kSteady };

// One timed region: the clock read before and after f(), in ticks (TSC) or ns.
struct Span {
  uint64_t begin = 0;
  uint64_t end = 0;
};

template <class F>
inline Span Timed(ClockKind kind, F&& f) {
  Span s;
  if (kind == ClockKind::kTsc) {
    s.begin = ReadTsc();
    f();
    s.end = ReadTsc();
  } else {
    s.begin = ReadSteadyNs();
    f();
    s.end = ReadSteadyNs();
  }
  return s;
}

// Median cost, in ns, of an empty timed region (two back-to-back reads).
double EmptyRegionNs(ClockKind kind, double ns_per_tick) {
  constexpr int kPairs = 200'000;
  std::vector<uint64_t> d(kPairs);
  for (int i = 0; i < kPairs; ++i) {
    uint64_t a = kind == ClockKind::kTsc ? ReadTsc() : ReadSteadyNs();
    uint64_t b = kind == ClockKind::kTsc ? ReadTsc() : ReadSteadyNs();
    d[static_cast<std::size_t>(i)] = b - a;
  }
  std::nth_element(d.begin(), d.begin() + kPairs / 2, d.end());
  double v = static_cast<double>(d[kPairs / 2]);
  return kind == ClockKind::kTsc ? v * ns_per_tick : v;
}

// ------------------------------------------------------------------ memory

struct MemorySample {
  uint64_t heap = 0;  // mallinfo2: bytes in use from malloc (uordblks) + mmapped chunks (hblkhd)
  uint64_t rss = 0;   // /proc/self/statm resident pages x page size
};

MemorySample SampleMemory() {
  MemorySample s;
  struct mallinfo2 mi = mallinfo2();
  s.heap = mi.uordblks + mi.hblkhd;
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0;
  uint64_t resident = 0;
  if (statm >> size >> resident) {
    s.rss = resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }
  return s;
}

struct MemoryResult {
  uint64_t orders = 0;
  double heap_per_order = 0;            // whole growth (engine construction + placing) / orders
  double heap_construct_per_order = 0;  // the part already taken when the engine was built
  double rss_per_order = 0;
  std::size_t price_levels = 0;
};

// Places `orders` non-crossing resting orders (bids on 10,000 prices below
// 3,000,000 ticks, asks on 10,000 above, alternating, 1..20 lots, 1,000
// accounts) into an engine sized for them, and divides the process's memory
// growth by the order count.
MemoryResult MeasureBytesPerOrder(uint64_t orders) {
  constexpr uint32_t kAccounts = 1000;
  constexpr int64_t kCenter = 3'000'000;
  constexpr uint64_t kLevelsPerSide = 10'000;
  MemoryResult r;
  r.orders = orders;
  MemorySample before = SampleMemory();
  {
    Engine e(BenchConfig(kAccounts, static_cast<uint32_t>(orders)));
    EventBuffer buf;
    buf.reserve(64);
    for (const Command& c : FundAccounts(kAccounts)) {
      e.Process(c, &buf);
      buf.clear();
    }
    MemorySample built = SampleMemory();
    for (uint64_t k = 0; k < orders; ++k) {
      Side side = (k & 1) ? Side::kSell : Side::kBuy;
      int64_t off = static_cast<int64_t>((k >> 1) % kLevelsPerSide);
      int64_t price = side == Side::kBuy ? kCenter - 1 - off : kCenter + off;
      Command c =
          MakeLimit(AccountId{static_cast<uint32_t>(1 + k % kAccounts)}, side, price,
                    static_cast<int64_t>(1 + k % 20), TimeInForce::kGtc, static_cast<int64_t>(k));
      e.Process(c, &buf);
      MB_CHECK(buf.back().type() == EventType::kOrderRested);
      buf.clear();
    }
    MemorySample after = SampleMemory();
    MB_CHECK(e.open_orders() == orders);
    r.price_levels = e.Depth(kBenchMarket, Side::kBuy, SIZE_MAX).size() +
                     e.Depth(kBenchMarket, Side::kSell, SIZE_MAX).size();
    auto per = [&](uint64_t a, uint64_t b) {
      return (static_cast<double>(a) - static_cast<double>(b)) / static_cast<double>(orders);
    };
    r.heap_per_order = per(after.heap, before.heap);
    r.heap_construct_per_order = per(built.heap, before.heap);
    r.rss_per_order = per(after.rss, before.rss);
  }
  return r;
}

// ------------------------------------------------------------------ noise floor

struct NoiseResult {
  double seconds = 0;
  uint64_t regions = 0;
  double p50_ns = 0;
  double p99_ns = 0;
  double p999_ns = 0;
  double max_ns = 0;
  uint64_t gaps_1us = 0;   // consecutive regions starting > 1 us apart
  uint64_t gaps_10us = 0;  // ... > 10 us apart
  double gaps_per_s = 0;   // gaps_1us per second
  double gaps_10us_per_s = 0;
};

// Runs Timed() around nothing, back to back, for `seconds`: the latency pass's
// timing code without the engine. Durations go into a histogram of one bucket
// per clock unit (an array of every sample would take GBs at ~30 ns a region).
NoiseResult MeasureNoise(ClockKind kind, double ns_per_tick, double seconds) {
  constexpr std::size_t kBuckets = 1 << 16;  // ~31 us of TSC ticks at 2.1 GHz
  std::vector<uint64_t> hist(kBuckets, 0);   // pages touched before timing
  const double units_per_ns = kind == ClockKind::kTsc ? 1.0 / ns_per_tick : 1.0;
  const auto gap_1us = static_cast<uint64_t>(1'000.0 * units_per_ns);
  const auto gap_10us = static_cast<uint64_t>(10'000.0 * units_per_ns);
  const auto length = static_cast<uint64_t>(seconds * 1e9 * units_per_ns);
  NoiseResult r;
  uint64_t max_units = 0;
  const uint64_t n0 = ReadSteadyNs();
  Span prev = Timed(kind, [] {});
  const uint64_t end = prev.begin + length;
  for (;;) {
    const Span s = Timed(kind, [] {});
    const uint64_t d = s.end - s.begin;
    ++hist[std::min<uint64_t>(d, kBuckets - 1)];
    max_units = std::max(max_units, d);
    const uint64_t period = s.begin - prev.begin;
    r.gaps_1us += period > gap_1us;
    r.gaps_10us += period > gap_10us;
    prev = s;
    ++r.regions;
    if (s.end >= end) break;
  }
  r.seconds = static_cast<double>(ReadSteadyNs() - n0) / 1e9;
  // The same rule as PercentileOf(): the value at index floor(q * n).
  auto at = [&](double q) {
    auto idx = static_cast<uint64_t>(q * static_cast<double>(r.regions));
    if (idx >= r.regions) idx = r.regions - 1;
    uint64_t cum = 0;
    for (std::size_t v = 0; v < kBuckets; ++v) {
      cum += hist[v];
      if (cum > idx) return v == kBuckets - 1 ? max_units : static_cast<uint64_t>(v);
    }
    return max_units;
  };
  auto ns = [&](uint64_t units) { return static_cast<double>(units) / units_per_ns; };
  r.p50_ns = ns(at(0.50));
  r.p99_ns = ns(at(0.99));
  r.p999_ns = ns(at(0.999));
  r.max_ns = ns(max_units);
  r.gaps_per_s = static_cast<double>(r.gaps_1us) / r.seconds;
  r.gaps_10us_per_s = static_cast<double>(r.gaps_10us) / r.seconds;
  return r;
}

// ------------------------------------------------------------------ engine run

enum class WorkloadKind { kExchangeCore, kConditional, kLiquibook };

struct EngineArgs {
  WorkloadKind workload = WorkloadKind::kExchangeCore;
  std::size_t commands = 3'000'000;
  uint64_t seed = 1;
  bool json = false;
  ClockKind clock = ClockKind::kTsc;
  uint64_t memory_orders = 1'000'000;
  std::size_t level_cap = LiquibookSpec{}.max_level_orders;
  uint32_t conditional_pct = ConditionalMixSpec().conditional_pct;
  bool check = false;
};

std::string_view WorkloadName(WorkloadKind k) {
  switch (k) {
    case WorkloadKind::kExchangeCore:
      return "exchange-core";
    case WorkloadKind::kConditional:
      return "conditional";
    case WorkloadKind::kLiquibook:
      return "liquibook";
  }
  return "?";
}

void PrepareEngine(Engine* e, const Workload& w, EventBuffer* buf) {
  for (const Command& c : w.setup) {
    e->Process(c, buf);
    MB_CHECK(buf->front().type() != EventType::kRejected);
    buf->clear();
  }
}

double Percentile(const std::vector<uint64_t>& sorted, double q) {
  return static_cast<double>(PercentileOf(sorted, q));
}

std::string Tenths(const std::array<std::size_t, 10>& v) {
  std::string s;
  for (std::size_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

int RunEngine(const EngineArgs& args) {
  // Memory first, in a fresh process, so that no freed block of a later phase
  // is reused and hides growth.
  MemoryResult mem = MeasureBytesPerOrder(args.memory_orders);

  auto g0 = SteadyClock::now();
  Workload w;
  if (args.workload != WorkloadKind::kLiquibook) {
    MixSpec spec;
    if (args.workload == WorkloadKind::kConditional) {
      spec = ConditionalMixSpec();
      spec.conditional_pct = args.conditional_pct;
    }
    spec.seed = args.seed;
    spec.commands = args.commands;
    spec.check_invariants = args.check;
    w = GenerateExchangeCoreMix(spec);
  } else {
    LiquibookSpec spec;
    spec.seed = args.seed;
    spec.commands = args.commands;
    spec.max_level_orders = args.level_cap;
    spec.check_invariants = args.check;
    w = GenerateLiquibookStream(spec);
  }
  double gen_s = std::chrono::duration<double>(SteadyClock::now() - g0).count();
  MB_CHECK(w.stats.rejected == 0);
  const std::size_t n = w.commands.size();

  // Pass 1: throughput. No clock read per command.
  uint64_t tp_events = 0;
  double tp_seconds = 0;
  uint64_t tp_hash = 0;
  {
    Engine e(w.config);
    EventBuffer buf;
    buf.reserve(4096);
    PrepareEngine(&e, w, &buf);
    auto t0 = SteadyClock::now();
    for (const Command& c : w.commands) {
      e.Process(c, &buf);
      tp_events += buf.size();
      buf.clear();
    }
    tp_seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    if (w.stats.state_hash != 0) tp_hash = e.StateHash();
  }

  // Pass 2: latency. One timed region per command; bookkeeping outside it.
  std::vector<uint64_t> lat(n, 0);  // ticks (tsc) or ns (steady); pages touched before timing
  uint64_t events = 0;
  uint64_t trades = 0;
  uint64_t trading = 0;
  std::array<uint64_t, kEventTypeCount> by_type{};
  double ns_per_tick = 1.0;
  double lat_pass_s = 0;
  uint64_t lat_hash = 0;
  {
    Engine e(w.config);
    EventBuffer buf;
    buf.reserve(4096);
    PrepareEngine(&e, w, &buf);
    uint64_t n0 = ReadSteadyNs();
    uint64_t c0 = args.clock == ClockKind::kTsc ? ReadTsc() : n0;
    for (std::size_t i = 0; i < n; ++i) {
      const Span s = Timed(args.clock, [&] { e.Process(w.commands[i], &buf); });
      lat[i] = s.end - s.begin;
      events += buf.size();
      uint64_t t = 0;
      for (const auto& ev : buf) {
        t += ev.type() == EventType::kTrade;
        ++by_type[static_cast<std::size_t>(ev.type())];
      }
      trades += t;
      trading += t != 0;
      buf.clear();
    }
    uint64_t n1 = ReadSteadyNs();
    uint64_t c1 = args.clock == ClockKind::kTsc ? ReadTsc() : n1;
    lat_pass_s = static_cast<double>(n1 - n0) / 1e9;
    if (args.clock == ClockKind::kTsc) {
      ns_per_tick = static_cast<double>(n1 - n0) / static_cast<double>(c1 - c0);
    }
    if (w.stats.state_hash != 0) lat_hash = e.StateHash();
  }
  MB_CHECK(events == tp_events);       // both replays emitted the same stream
  MB_CHECK(events == w.stats.events);  // ... as the generator's shadow engine
  MB_CHECK(trades == w.stats.trades);
  // The mix generators also record the shadow's events by type and its state
  // at the end (Liquibook's records neither): both replays end in the shadow's
  // state, the latency pass having emitted as many events of each type.
  if (w.stats.state_hash != 0) {
    MB_CHECK(tp_hash == w.stats.state_hash && lat_hash == w.stats.state_hash);
    MB_CHECK(by_type == w.stats.events_by_type);
  }

  // Pass 3: the noise floor, as long as the latency pass (at least 0.25 s).
  const NoiseResult noise = MeasureNoise(args.clock, ns_per_tick, std::max(lat_pass_s, 0.25));

  double timed_ns = 0;  // time inside the latency pass's timed regions
  for (uint64_t v : lat) timed_ns += static_cast<double>(v);
  timed_ns *= ns_per_tick;
  std::sort(lat.begin(), lat.end());
  auto ns = [&](double v) { return v * ns_per_tick; };
  const double p50 = ns(Percentile(lat, 0.50));
  const double p90 = ns(Percentile(lat, 0.90));
  const double p99 = ns(Percentile(lat, 0.99));
  const double p999 = ns(Percentile(lat, 0.999));
  const double p9999 = ns(Percentile(lat, 0.9999));
  const double maxv = ns(static_cast<double>(lat.back()));
  // Commands slower than 1 us and 10 us: on a VM mostly interrupts (timer
  // ticks, VM exits) landing inside a timed region; the noise floor's gap rate
  // times the time spent inside timed regions says how many to expect.
  auto slower_than = [&](double threshold_ns) {
    const auto t = static_cast<uint64_t>(threshold_ns / ns_per_tick);
    return static_cast<uint64_t>(lat.end() - std::lower_bound(lat.begin(), lat.end(), t));
  };
  const uint64_t slow_1us = slower_than(1'000.0);
  const uint64_t slow = slower_than(10'000.0);
  const double gap_hits = noise.gaps_per_s * timed_ns / 1e9;
  const double overhead_ns = EmptyRegionNs(args.clock, ns_per_tick);
  const double throughput = static_cast<double>(n) / tp_seconds;
  const double trade_share = static_cast<double>(trading) / static_cast<double>(n);
  const double events_per_cmd = static_cast<double>(events) / static_cast<double>(n);
  const char* clock_name = args.clock == ClockKind::kTsc ? "tsc" : "steady_clock";
  const bool liquibook = args.workload == WorkloadKind::kLiquibook;
  const bool conditional = args.workload == WorkloadKind::kConditional;
  const ConditionalStats& cs = w.stats.conditional;
  const auto ratio = [](uint64_t a, uint64_t b) {
    return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b);
  };
  const auto share = [&](uint64_t x) {
    return 100.0 * static_cast<double>(x) / static_cast<double>(n);
  };
  const std::size_t final_open = w.stats.open_orders_by_tenth.back();

  if (liquibook) {
    fmt::print("matchbook-bench engine: Liquibook's perf-test stream, seed {}\n", args.seed);
    fmt::print(
        "  generated {} commands in {:.2f} s (+{} setup commands, untimed): "
        "inserts {:.2f}%  cancels {:.2f}% ({:.3f} per insert; level cap {})\n",
        n, gen_s, w.setup.size(), share(w.stats.gtc), share(w.stats.cancel),
        static_cast<double>(w.stats.cancel) / static_cast<double>(w.stats.gtc),
        args.level_cap == 0 ? std::string("none") : std::to_string(args.level_cap));
    fmt::print(
        "  inserts that trade on arrival: {:.2f}%; orders fully filled (Liquibook's "
        "\"matched\"): {:.2f}% of inserts\n",
        100.0 * static_cast<double>(trading) / static_cast<double>(w.stats.gtc),
        100.0 * static_cast<double>(w.stats.filled_orders) / static_cast<double>(w.stats.gtc));
  } else if (conditional) {
    fmt::print(
        "matchbook-bench engine: exchange-core single-book mix with {}% conditional orders and "
        "icebergs, seed {}\n",
        args.conditional_pct, args.seed);
    fmt::print(
        "  generated {} commands in {:.2f} s (+{} setup commands, untimed): "
        "GTC {:.2f}%  IOC {:.2f}%  cancel {:.2f}%  move {:.2f}%  stop {:.2f}%  iceberg "
        "{:.2f}%  cancel of the oldest waiting stop {:.2f}% / resting iceberg {:.2f}%\n",
        n, gen_s, w.setup.size(), share(w.stats.gtc), share(w.stats.ioc), share(w.stats.cancel),
        share(w.stats.move), share(cs.stops), share(cs.icebergs), share(cs.stop_cancels),
        share(cs.iceberg_cancels));
    fmt::print(
        "  stops placed: {} ({} STOP_LOSS/TAKE_PROFIT, {} *_LIMIT; {} trailing); triggered: {} "
        "= {:.1f}% of those placed ({} market, {} limit, {} trailing = {:.1f}% of the "
        "trailing), in {} commands ({:.2f}% of all; at most {} in one); {} triggered "
        "stop-limits rested\n",
        cs.stops, cs.stop_market, cs.stop_limit, cs.trailing, cs.triggered,
        100.0 * ratio(cs.triggered, cs.stops), cs.triggered_market, cs.triggered_limit,
        cs.triggered_trailing, 100.0 * ratio(cs.triggered_trailing, cs.trailing),
        cs.trigger_commands, share(cs.trigger_commands), cs.max_triggers_per_command,
        cs.triggered_rested);
    fmt::print(
        "  waiting: {:.0f} on average, max {}, {} at the end; {} canceled while waiting; "
        "icebergs: {} placed, {:.0f} resting on average, {} refills\n",
        cs.mean_waiting, cs.max_waiting, cs.waiting_at_end, cs.canceled_waiting, cs.icebergs,
        cs.mean_icebergs, cs.iceberg_refills);
  } else {
    fmt::print("matchbook-bench engine: exchange-core single-book mix, seed {}\n", args.seed);
    fmt::print(
        "  generated {} commands in {:.2f} s (+{} setup commands, untimed): "
        "GTC {:.2f}%  IOC {:.2f}%  cancel {:.2f}%  move {:.2f}%\n",
        n, gen_s, w.setup.size(), share(w.stats.gtc), share(w.stats.ioc), share(w.stats.cancel),
        share(w.stats.move));
  }
  fmt::print(
      "  book while replaying: {:.0f} resting orders on {:.0f} price levels on average "
      "(max {} orders); after each tenth of the stream: {}\n",
      w.stats.mean_open_orders, w.stats.mean_price_levels, w.stats.max_open_orders,
      Tenths(w.stats.open_orders_by_tenth));
  fmt::print("\n  {:<34} {:>16}\n", "figure", "value");
  auto row = [](std::string_view k, const std::string& v) {
    fmt::print("  {:<34} {:>16}\n", k, v);
  };
  row("commands", fmt::format("{}", n));
  row("seconds (throughput pass)", fmt::format("{:.3f}", tp_seconds));
  row("throughput (commands/s)", fmt::format("{:.0f}", throughput));
  if (liquibook) {
    row("inserts/s (cancels' time included)",
        fmt::format("{:.0f}", static_cast<double>(w.stats.gtc) / tp_seconds));
  }
  row("latency p50 (ns)", fmt::format("{:.0f}", p50));
  row("latency p90 (ns)", fmt::format("{:.0f}", p90));
  row("latency p99 (ns)", fmt::format("{:.0f}", p99));
  row("latency p99.9 (ns)", fmt::format("{:.0f}", p999));
  row("latency p99.99 (ns)", fmt::format("{:.0f}", p9999));
  row("latency max (ns)", fmt::format("{:.0f}", maxv));
  row("noise floor p50 (ns)", fmt::format("{:.0f}", noise.p50_ns));
  row("noise floor p99 (ns)", fmt::format("{:.0f}", noise.p99_ns));
  row("noise floor p99.9 (ns)", fmt::format("{:.0f}", noise.p999_ns));
  row("noise floor max (ns)", fmt::format("{:.0f}", noise.max_ns));
  row("noise gaps > 1 us per second", fmt::format("{:.0f}", noise.gaps_per_s));
  row("noise gaps > 10 us per second", fmt::format("{:.0f}", noise.gaps_10us_per_s));
  row("commands >= 1 us", fmt::format("{}", slow_1us));
  row("commands >= 10 us", fmt::format("{}", slow));
  row("trade share (commands w/ trade)", fmt::format("{:.2f}%", 100.0 * trade_share));
  row("trades", fmt::format("{}", trades));
  if (conditional) {
    row("stops triggered / placed", fmt::format("{} / {}", cs.triggered, cs.stops));
    row("iceberg refills", fmt::format("{}", cs.iceberg_refills));
  }
  row("events/command", fmt::format("{:.3f}", events_per_cmd));
  row("bytes_per_resting_order (heap)", fmt::format("{:.1f}", mem.heap_per_order));
  fmt::print(
      "\n  latency pass: {:.3f} s with a {} read around every command; an empty timed "
      "region costs {:.1f} ns (median), included above, not subtracted{}\n",
      lat_pass_s, clock_name, overhead_ns,
      args.clock == ClockKind::kTsc ? fmt::format("; {:.4f} ns/tick", ns_per_tick) : "");
  fmt::print("  {} commands took >= 10 us: {:.0f} per second of the timed pass\n", slow,
             static_cast<double>(slow) / lat_pass_s);
  fmt::print(
      "  noise floor: {} empty timed regions over {:.3f} s; {:.0f} gaps > 1 us per second "
      "x {:.3f} s inside the latency pass's timed regions = ~{:.0f} commands expected to "
      "hold one ({:.3f}% of them; p99.9 is the VM's when this is above 0.1%); {} took >= 1 "
      "us\n",
      noise.regions, noise.seconds, noise.gaps_per_s, timed_ns / 1e9, gap_hits,
      100.0 * gap_hits / static_cast<double>(n), slow_1us);
  fmt::print(
      "  memory: {} resting orders on {} price levels, engine sized for them: heap "
      "(mallinfo2 uordblks+hblkhd) {:.1f} B/order, of which {:.1f} at construction; "
      "RSS (/proc/self/statm) {:.1f} B/order\n",
      mem.orders, mem.price_levels, mem.heap_per_order, mem.heap_construct_per_order,
      mem.rss_per_order);
  if (args.json) {
    std::string j = fmt::format(
        "{{\"bench\":\"engine\",\"workload\":\"{}\",\"commands\":{},\"seed\":{},"
        "\"seconds\":{:.6f},"
        "\"throughput_per_s\":{:.0f},\"p50_ns\":{:.0f},\"p90_ns\":{:.0f},\"p99_ns\":{:.0f},"
        "\"p999_ns\":{:.0f},\"p9999_ns\":{:.0f},\"max_ns\":{:.0f},\"trades\":{},"
        "\"trading_commands\":{},\"trade_share\":{:.5f},\"events\":{},"
        "\"events_per_command\":{:.4f},"
        "\"bytes_per_resting_order\":{:.1f},\"bytes_per_resting_order_rss\":{:.1f},"
        "\"clock\":\"{}\",\"clock_overhead_ns\":{:.1f},\"mean_open_orders\":{:.0f},"
        "\"mean_price_levels\":{:.0f},\"slow_10us\":{},",
        WorkloadName(args.workload), n, args.seed, tp_seconds, throughput, p50, p90, p99, p999,
        p9999, maxv, trades, trading, trade_share, events, events_per_cmd, mem.heap_per_order,
        mem.rss_per_order, clock_name, overhead_ns, w.stats.mean_open_orders,
        w.stats.mean_price_levels, slow);
    j += fmt::format(
        "\"max_open_orders\":{},\"final_open_orders\":{},\"slow_1us\":{},"
        "\"noise_p50_ns\":{:.0f},\"noise_p99_ns\":{:.0f},\"noise_p999_ns\":{:.0f},"
        "\"noise_max_ns\":{:.0f},\"noise_gaps_per_s\":{:.0f},\"noise_gaps_10us_per_s\":{:.0f},"
        "\"noise_seconds\":{:.3f},\"gap_hits_expected\":{:.0f}",
        w.stats.max_open_orders, final_open, slow_1us, noise.p50_ns, noise.p99_ns, noise.p999_ns,
        noise.max_ns, noise.gaps_per_s, noise.gaps_10us_per_s, noise.seconds, gap_hits);
    if (liquibook) {
      j += fmt::format(
          ",\"inserts\":{},\"cancels\":{},\"inserts_per_s\":{:.0f},\"level_cap\":{},"
          "\"insert_trade_share\":{:.5f},\"filled_share\":{:.5f}",
          w.stats.gtc, w.stats.cancel, static_cast<double>(w.stats.gtc) / tp_seconds,
          args.level_cap, static_cast<double>(trading) / static_cast<double>(w.stats.gtc),
          static_cast<double>(w.stats.filled_orders) / static_cast<double>(w.stats.gtc));
    }
    if (conditional) {
      j += fmt::format(
          ",\"conditional_pct\":{},\"gtc\":{},\"ioc\":{},\"cancels\":{},\"moves\":{},"
          "\"stops_placed\":{},\"stop_market\":{},\"stop_limit\":{},\"trailing_placed\":{},"
          "\"icebergs_placed\":{},\"stop_cancels\":{},\"iceberg_cancels\":{},",
          args.conditional_pct, w.stats.gtc, w.stats.ioc, w.stats.cancel, w.stats.move, cs.stops,
          cs.stop_market, cs.stop_limit, cs.trailing, cs.icebergs, cs.stop_cancels,
          cs.iceberg_cancels);
      j += fmt::format(
          "\"triggered\":{},\"trigger_share\":{:.5f},\"triggered_market\":{},"
          "\"triggered_limit\":{},\"triggered_trailing\":{},\"trigger_commands\":{},"
          "\"max_triggers_per_command\":{},\"triggered_rested\":{},\"canceled_waiting\":{},"
          "\"mean_waiting\":{:.0f},\"max_waiting\":{},\"waiting_at_end\":{},"
          "\"iceberg_refills\":{},\"mean_icebergs\":{:.0f}",
          cs.triggered, ratio(cs.triggered, cs.stops), cs.triggered_market, cs.triggered_limit,
          cs.triggered_trailing, cs.trigger_commands, cs.max_triggers_per_command,
          cs.triggered_rested, cs.canceled_waiting, cs.mean_waiting, cs.max_waiting,
          cs.waiting_at_end, cs.iceberg_refills, cs.mean_icebergs);
    }
    fmt::print("{}}}\n", j);
  }
  std::fflush(stdout);
  return 0;
}

// ------------------------------------------------------------------ gbench

// A steady book for the per-operation cases: the exchange-core mix's initial
// ~1,000 orders, but with both sides pushed kGap ticks away from the center so
// that a sweep zone of up to 2 * kGap one-order levels fits between them.
constexpr int64_t kCenter = 3'000'000;
constexpr int64_t kGap = 10'000;
constexpr uint32_t kAccounts = 1000;
constexpr int kBatch = 1000;  // operations between two PauseTiming() restores

class SteadyBook {
 public:
  SteadyBook() : engine_(BenchConfig(kAccounts, 1 << 16)), rng_(7) {
    buf_.reserve(4096);
    for (const Command& c : FundAccounts(kAccounts)) Run(c);
    MixSpec spec;
    spec.commands = 0;
    Workload w = GenerateExchangeCoreMix(spec);
    for (std::size_t i = kAccounts * 2; i < w.setup.size(); ++i) {
      Command c = w.setup[i];
      auto* p = std::get_if<engine::PlaceOrder>(&c.body);
      p->price.value += p->side == Side::kBuy ? -kGap : kGap;
      Run(c);
    }
  }

  void Run(const Command& c) {
    engine_.Process(c, &buf_);
    MB_CHECK(buf_.front().type() != EventType::kRejected);
    buf_.clear();
  }
  OrderId NextId() const { return OrderId{Raw(engine_.last_sequence()) + 1}; }
  AccountId Account() { return AccountId{static_cast<uint32_t>(1 + rng_.Below(kAccounts))}; }
  // A non-crossing resting price inside the book's band.
  int64_t BandPrice(Side side) {
    int64_t off = static_cast<int64_t>(rng_.Below(static_cast<uint64_t>(MixSpec{}.half_band)));
    return side == Side::kBuy ? kCenter - kGap - 1 - off : kCenter + kGap + off;
  }
  engine::CancelOrder CancelOf(OrderId id, AccountId account) const {
    engine::CancelOrder c;
    c.account = account;
    c.market = kBenchMarket;
    c.order_id = id;
    return c;
  }

  Engine engine_;
  EventBuffer buf_;
  Rng rng_;
};

Command Wrap(engine::CommandBody body) {
  Command c;
  c.body = body;
  return c;
}

// Place a GTC limit order that rests (random price in the band, either side).
void BM_PlaceResting(benchmark::State& state) {
  SteadyBook b;
  std::vector<Command> places;
  for (int k = 0; k < kBatch; ++k) {
    Side side = b.rng_.Below(2) ? Side::kBuy : Side::kSell;
    places.push_back(MakeLimit(b.Account(), side, b.BandPrice(side), b.rng_.Between(1, 20),
                               TimeInForce::kGtc, 0));
  }
  uint64_t first = Raw(b.NextId());
  const std::size_t base_orders = b.engine_.open_orders();
  const TradeId base_trades = b.engine_.next_trade_id();
  int k = 0;
  for (auto _ : state) {
    b.engine_.Process(places[static_cast<std::size_t>(k)], &b.buf_);
    b.buf_.clear();
    if (++k == kBatch) {
      state.PauseTiming();
      for (int j = 0; j < kBatch; ++j) {
        const auto& p = std::get<engine::PlaceOrder>(places[static_cast<std::size_t>(j)].body);
        b.Run(Wrap(b.CancelOf(OrderId{first + static_cast<uint64_t>(j)}, p.account)));
      }
      first = Raw(b.NextId());
      k = 0;
      state.ResumeTiming();
    }
  }
  // Every place rested (none rejected, none traded).
  MB_CHECK(b.engine_.open_orders() == base_orders + static_cast<std::size_t>(k));
  MB_CHECK(b.engine_.next_trade_id() == base_trades);
  state.SetItemsProcessed(state.iterations());
}

// An IOC that takes `levels` whole one-order levels (one maker each), at the
// top of a sweep zone refilled every kBatch operations.
void SweepLevels(benchmark::State& state, int levels) {
  SteadyBook b;
  const int64_t zone_lo = kCenter - kGap;  // above the best bid (kCenter - kGap - 1)
  const int zone_levels = kBatch * levels;
  MB_CHECK(zone_levels <= 2 * kGap);
  constexpr int64_t kLots = 5;
  auto refill = [&] {
    for (int j = 0; j < zone_levels; ++j) {
      b.Run(MakeLimit(b.Account(), Side::kSell, zone_lo + j, kLots, TimeInForce::kGtc, 0));
    }
  };
  std::vector<Command> takers;
  for (int k = 0; k < kBatch; ++k) {
    takers.push_back(MakeLimit(b.Account(), Side::kBuy, zone_lo + k * levels + levels - 1,
                               kLots * levels, TimeInForce::kIoc, 0));
  }
  refill();
  const uint64_t base_trades = Raw(b.engine_.next_trade_id());
  int k = 0;
  for (auto _ : state) {
    b.engine_.Process(takers[static_cast<std::size_t>(k)], &b.buf_);
    b.buf_.clear();
    if (++k == kBatch) {
      state.PauseTiming();
      refill();
      k = 0;
      state.ResumeTiming();
    }
  }
  // Each taker made exactly `levels` trades, one per level.
  MB_CHECK(Raw(b.engine_.next_trade_id()) - base_trades ==
           static_cast<uint64_t>(state.iterations()) * static_cast<uint64_t>(levels));
  state.SetItemsProcessed(state.iterations());
}

void BM_PlaceCross1Level(benchmark::State& state) { SweepLevels(state, 1); }
void BM_PlaceCross10Levels(benchmark::State& state) { SweepLevels(state, 10); }

// Cancel a resting order (in random order among kBatch placed in the band).
void BM_Cancel(benchmark::State& state) {
  SteadyBook b;
  std::vector<Command> places;
  std::vector<int> order(kBatch);
  for (int k = 0; k < kBatch; ++k) {
    Side side = b.rng_.Below(2) ? Side::kBuy : Side::kSell;
    places.push_back(MakeLimit(b.Account(), side, b.BandPrice(side), b.rng_.Between(1, 20),
                               TimeInForce::kGtc, 0));
    order[static_cast<std::size_t>(k)] = k;
  }
  for (int k = kBatch - 1; k > 0; --k) {
    std::swap(order[static_cast<std::size_t>(k)],
              order[b.rng_.Below(static_cast<uint64_t>(k) + 1)]);
  }
  std::vector<Command> cancels(kBatch);
  auto refill = [&] {
    uint64_t first = Raw(b.NextId());
    for (const Command& c : places) b.Run(c);
    for (int j = 0; j < kBatch; ++j) {
      int o = order[static_cast<std::size_t>(j)];
      const auto& p = std::get<engine::PlaceOrder>(places[static_cast<std::size_t>(o)].body);
      cancels[static_cast<std::size_t>(j)] =
          Wrap(b.CancelOf(OrderId{first + static_cast<uint64_t>(o)}, p.account));
    }
  };
  const std::size_t base_orders = b.engine_.open_orders();
  refill();
  int k = 0;
  for (auto _ : state) {
    b.engine_.Process(cancels[static_cast<std::size_t>(k)], &b.buf_);
    b.buf_.clear();
    if (++k == kBatch) {
      state.PauseTiming();
      refill();
      k = 0;
      state.ResumeTiming();
    }
  }
  // Every cancel found its order.
  MB_CHECK(b.engine_.open_orders() == base_orders + static_cast<std::size_t>(kBatch - k));
  state.SetItemsProcessed(state.iterations());
}

// Move a resting order to a nearby price and back (new_price only): it leaves
// its level and joins the tail of another. The book never changes size.
void BM_AmendPrice(benchmark::State& state) {
  SteadyBook b;
  std::vector<Command> there;
  std::vector<Command> back;
  for (Side side : {Side::kBuy, Side::kSell}) {
    for (const engine::OrderView& o : b.engine_.Orders(kBenchMarket, side)) {
      int64_t step = b.rng_.Between(1, 8);
      int64_t to = side == Side::kBuy ? o.terms.price.value - step : o.terms.price.value + step;
      engine::AmendOrder a;
      a.account = o.terms.account;
      a.market = kBenchMarket;
      a.order_id = o.id;
      a.new_price = Price{to};
      there.push_back(Wrap(a));
      a.new_price = o.terms.price;
      back.push_back(Wrap(a));
    }
  }
  const std::size_t n = there.size();
  const std::size_t base_orders = b.engine_.open_orders();
  const TradeId base_trades = b.engine_.next_trade_id();
  const Sequence base_seq = b.engine_.last_sequence();
  std::size_t k = 0;
  bool out = true;
  for (auto _ : state) {
    b.engine_.Process(out ? there[k] : back[k], &b.buf_);
    b.buf_.clear();
    if (++k == n) {
      k = 0;
      out = !out;
    }
  }
  // No move crossed or was rejected: the last one left its order at its target.
  MB_CHECK(b.engine_.open_orders() == base_orders && b.engine_.next_trade_id() == base_trades);
  if (Raw(b.engine_.last_sequence()) > Raw(base_seq)) {
    std::size_t last = k == 0 ? n - 1 : k - 1;
    const Command& c = (k == 0 ? !out : out) ? there[last] : back[last];
    const auto& a = std::get<engine::AmendOrder>(c.body);
    MB_CHECK(b.engine_.FindOrder(a.order_id)->terms.price == a.new_price);
  }
  state.SetItemsProcessed(state.iterations());
}

// Reduce a resting order's quantity by one lot: it keeps its place. Orders of
// 10^9 lots never run out.
void BM_AmendQtyDown(benchmark::State& state) {
  SteadyBook b;
  constexpr int kOrders = 1000;
  constexpr int64_t kBigLots = 1'000'000'000;
  std::vector<Command> amends;
  for (int j = 0; j < kOrders; ++j) {
    OrderId id = b.NextId();
    AccountId acct = b.Account();
    b.Run(MakeLimit(acct, Side::kSell, b.BandPrice(Side::kSell), kBigLots, TimeInForce::kGtc, 0));
    engine::AmendOrder a;
    a.account = acct;
    a.market = kBenchMarket;
    a.order_id = id;
    a.new_qty = Qty{kBigLots};
    amends.push_back(Wrap(a));
  }
  const std::size_t base_orders = b.engine_.open_orders();
  std::size_t k = 0;
  for (auto _ : state) {
    Command& c = amends[k];
    std::get_if<engine::AmendOrder>(&c.body)->new_qty.value -= 1;
    b.engine_.Process(c, &b.buf_);
    b.buf_.clear();
    if (++k == amends.size()) k = 0;
  }
  // Every amend applied: each order's quantity is what the last command said.
  MB_CHECK(b.engine_.open_orders() == base_orders);
  for (const Command& c : amends) {
    const auto& a = std::get<engine::AmendOrder>(c.body);
    if (a.new_qty.value < kBigLots)
      MB_CHECK(b.engine_.FindOrder(a.order_id)->terms.qty == a.new_qty);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_PlaceResting);
BENCHMARK(BM_PlaceCross1Level);
BENCHMARK(BM_PlaceCross10Levels);
BENCHMARK(BM_Cancel);
BENCHMARK(BM_AmendPrice);
BENCHMARK(BM_AmendQtyDown);

// ------------------------------------------------------------------ CLI

Runner AddEngineCommand(CLI::App* app) {
  auto args = std::make_shared<EngineArgs>();
  CLI::App* sub = app->add_subcommand(
      "engine",
      "The single-book engine benchmark: replays a command array generated up front from "
      "the seed, untimed. Prints throughput (a pass without per-command clock reads), "
      "latency percentiles (a pass timing each command), the machine's noise floor (the "
      "same timing code around nothing, as long as the latency pass), trade share, "
      "events/command, and bytes per resting order (--memory-orders orders placed into a "
      "fresh engine).");
  sub->footer(
      "Workloads:\n"
      "  exchange-core  exchange-core's single-book mix: 9% GTC, 3% IOC, 6% cancel, 82% move;\n"
      "                 ~1,000 resting orders on ~750 price levels; 1,000 accounts.\n"
      "  conditional    the same mix, prices around 3,000.00, with --conditional-share % of\n"
      "                 the commands placing stop-loss / take-profit orders (market and\n"
      "                 limit, some trailing; stops 1-60 ticks beyond the last price) and\n"
      "                 icebergs; at most 200 waiting, 50 icebergs resting (the oldest is\n"
      "                 canceled at the bound).\n"
      "  liquibook      Liquibook's perf-test stream: alternating buy/sell GTC limits, buys\n"
      "                 at 1880-1889, sells at 1884-1893, 100-1,000 lots in steps of 100;\n"
      "                 a level over --level-cap orders sheds its oldest with a cancel.");
  auto wl = std::make_shared<std::string>("exchange-core");
  sub->add_option("--workload", *wl, "the command stream (default exchange-core)")
      ->check(CLI::IsMember({"exchange-core", "conditional", "liquibook"}));
  AddCount(sub, "--commands", &args->commands, 1, UINT64_MAX,
           "commands in the measured stream (default 3000000)", "_,");
  AddCount(sub, "--seed", &args->seed, 0, UINT64_MAX, "workload seed (default 1)", "_,");
  AddCount(sub, "--memory-orders", &args->memory_orders, 1, UINT32_MAX,
           "resting orders of the memory pass (default 1000000)", "_,");
  CLI::Option* cap =
      AddCount(sub, "--level-cap", &args->level_cap, 0, UINT32_MAX,
               "liquibook: most orders a price level keeps before its oldest is canceled "
               "(default 100; 0: none, the book grows as in Liquibook's test)",
               "_,");
  CLI::Option* share = AddCount(sub, "--conditional-share", &args->conditional_pct, 0, 100,
                                "conditional: percent of the commands that place conditional or "
                                "iceberg orders (default 20)");
  auto clock = std::make_shared<std::string>("tsc");
  sub->add_option("--clock", *clock, "per-command clock (default tsc)")
      ->check(CLI::IsMember({"tsc", "steady"}));
  sub->add_flag("--json", args->json, "print one JSON object as the last line");
  sub->add_flag("--check", args->check,
                "run Engine::CheckInvariants() after every command while generating (slow; "
                "to diagnose the engine)");
  return [args, wl, clock, cap, share]() -> int {
    args->workload = *wl == "liquibook"     ? WorkloadKind::kLiquibook
                     : *wl == "conditional" ? WorkloadKind::kConditional
                                            : WorkloadKind::kExchangeCore;
    args->clock = *clock == "tsc" ? ClockKind::kTsc : ClockKind::kSteady;
    if (cap->count() > 0 && args->workload != WorkloadKind::kLiquibook) {
      std::fputs("--level-cap: only with --workload liquibook\n", stderr);
      return 2;
    }
    if (share->count() > 0 && args->workload != WorkloadKind::kConditional) {
      std::fputs("--conditional-share: only with --workload conditional\n", stderr);
      return 2;
    }
    return RunEngine(*args);
  };
}

Runner AddGbenchCommand(CLI::App* app) {
  CLI::App* sub = app->add_subcommand(
      "gbench",
      "Per-operation cases on a steady ~1,000-order book: place resting, place crossing 1 "
      "level, place crossing 10 levels, cancel, amend price, amend quantity down. Every "
      "argument goes to Google Benchmark (e.g. --benchmark_filter=Cancel; --help lists them).");
  // Everything after `gbench` is Google Benchmark's, --help included.
  sub->prefix_command();
  sub->set_help_flag();
  return [sub, program = std::string(app->get_name())]() -> int {
    std::vector<std::string> words = sub->remaining();
    std::vector<char*> argv;
    std::string name = program;
    argv.push_back(name.data());
    for (std::string& w : words) argv.push_back(w.data());
    int n = static_cast<int>(argv.size());
    benchmark::Initialize(&n, argv.data());
    if (benchmark::ReportUnrecognizedArguments(n, argv.data())) return 2;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  };
}

int Main(int argc, char** argv) {
  CLI::App app{"matchbook-bench: Matchbook's benchmarks (docs/benchmarks.md)", "matchbook-bench"};
  app.require_subcommand(1);
  std::map<std::string, Runner> runners;
  runners["engine"] = AddEngineCommand(&app);
  runners["gbench"] = AddGbenchCommand(&app);
  runners["queues"] = AddQueueStudy(&app);
  runners["pipeline"] = AddPipelineBench(&app);
  runners["projection"] = AddProjectionBench(&app);
  runners["history"] = AddHistoryBench(&app);
  runners["snapshot"] = AddSnapshotBench(&app);
  runners["signing"] = AddSigningBench(&app);
  runners["fill"] = AddFillCommand(&app);
  if (argc >= 2 && std::string_view(argv[1]) == "help") {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (argc >= 2 && runners.count(argv[1]) == 0 && argv[1][0] != '-') {
      std::fprintf(
          stderr,
          "unknown subcommand '%s' (engine, gbench, queues, pipeline, projection, history, "
          "snapshot, signing, fill)\n",
          argv[1]);
      return 2;
    }
    return app.exit(e) == 0 ? 0 : 2;
  }
  return runners.at(app.get_subcommands().at(0)->get_name())();
}

}  // namespace
}  // namespace mb::bench

int main(int argc, char** argv) { return mb::bench::Main(argc, argv); }
