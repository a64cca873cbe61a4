// The snapshot benchmark (snapshot_bench.h).
#include "snapshot_bench.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli.h"
#include "codec/codec.h"
#include "common/status.h"
#include "engine/engine.h"
#include "engine/image.h"
#include "exchange/exchange.h"
#include "journal/data_dir.h"
#include "journal/snapshot.h"
#include "stats.h"
#include "workload/engine_workload.h"

namespace mb::bench {
namespace {

namespace fs = std::filesystem;
using engine::Command;
using engine::Engine;
using engine::EngineImage;
using engine::EventBuffer;
using engine::EventType;
using engine::Side;
using SteadyClock = std::chrono::steady_clock;

struct SnapshotArgs {
  uint64_t open_orders = 100'000;
  uint64_t repeat = 10;
  uint32_t markets = 8;
  uint32_t accounts = 10'000;
  uint32_t levels = 1'000;  // price levels a side, per market
  uint64_t seed = 1;
  int zstd_level = 1;        // the exchange's default (ExchangeOptions::snapshots)
  std::string dir;           // scratch directory; empty: one under the system's temp directory
  uint64_t live_repeat = 5;  // snapshots of the live exchange (0: no live part)
  bool json = false;
};

// Every market quotes asset 0 (USDT, scale 6); market m trades asset m + 1
// (scale 8) with the engine benchmark's tick and lot, so a price of p ticks
// and q lots locks p * q quote units.
engine::EngineConfig SnapshotConfig(const SnapshotArgs& a) {
  engine::EngineConfig c;
  c.assets.push_back(engine::AssetSpec{"USDT", 6});
  for (uint32_t m = 0; m < a.markets; ++m) {
    c.assets.push_back(engine::AssetSpec{fmt::format("B{}", m), 8});
    engine::MarketSpec s;
    s.symbol = fmt::format("B{}USDT", m);
    s.base = AssetId{static_cast<uint16_t>(m + 1)};
    s.quote = AssetId{0};
    s.tick_units = 10'000;
    s.lot_units = 10'000;
    s.min_qty = Qty{1};
    s.max_qty = Qty{1'000'000'000};
    s.max_price = Price{1'000'000'000};
    s.maker_fee_bps = 2;
    s.taker_fee_bps = 5;
    c.markets.push_back(s);
  }
  c.max_accounts = a.accounts + 1;
  c.fee_account = AccountId{0};
  // Pools sized for the orders (at least 1,024: a configuration must expect some).
  c.expected_open_orders = static_cast<uint32_t>(std::max<uint64_t>(a.open_orders, 1'024));
  Status s = c.Validate();
  MB_CHECK(s.ok());
  return c;
}

void Run(Engine* e, const Command& c, EventBuffer* buf) {
  e->Process(c, buf);
  MB_CHECK(buf->front().type() != EventType::kRejected);
  buf->clear();
}

using CommandSink = std::function<void(const Command&)>;

// One deposit of every asset to every account: as much as keeps each asset's
// supply below 4 * 10^18 units, far more than the orders lock.
void FundCommands(const SnapshotArgs& a, std::size_t assets, const CommandSink& sink) {
  const int64_t amount = 4'000'000'000'000'000'000 / static_cast<int64_t>(a.accounts);
  for (uint32_t acct = 1; acct <= a.accounts; ++acct) {
    for (std::size_t asset = 0; asset < assets; ++asset) {
      engine::Deposit d;
      d.account = AccountId{acct};
      d.asset = AssetId{static_cast<uint16_t>(asset)};
      d.amount = Amount{amount};
      d.ref = TransferRef::From(fmt::format("fund-{}-{}", acct, asset));
      Command c;
      c.body = d;
      sink(c);
    }
  }
}

void Fund(Engine* e, const SnapshotArgs& a, std::size_t assets, EventBuffer* buf) {
  FundCommands(a, assets, [&](const Command& c) { Run(e, c, buf); });
}

// N resting GTC limits: a random market, side and account; a level `off` ticks
// behind the touch with off the product of two uniform draws (more orders near
// the touch, a long thin tail); 1..20 lots; a client order id each. Bids sit
// below a market's center, asks at or above it: nothing crosses.
void OrderCommands(const SnapshotArgs& a, const CommandSink& sink) {
  constexpr int64_t kCenter = 3'000'000;
  Rng rng(a.seed);
  const uint64_t levels = a.levels;
  for (uint64_t k = 0; k < a.open_orders; ++k) {
    engine::PlaceOrder p;
    p.account = AccountId{static_cast<uint32_t>(1 + rng.Below(a.accounts))};
    p.market = MarketId{static_cast<uint16_t>(rng.Below(a.markets))};
    p.side = rng.Chance(500'000) ? Side::kBuy : Side::kSell;
    p.type = engine::OrderType::kLimit;
    p.tif = engine::TimeInForce::kGtc;
    const auto off = static_cast<int64_t>(rng.Below(levels) * rng.Below(levels) / levels);
    p.price = Price{p.side == Side::kBuy ? kCenter - 1 - off : kCenter + off};
    p.qty = Qty{rng.Between(1, 20)};
    p.client_order_id = ClientOrderId::From(fmt::format("snap-{}", k));
    Command c;
    c.timestamp_ns = static_cast<int64_t>(k) * 1'000;
    c.body = p;
    sink(c);
  }
}

void PlaceOrders(Engine* e, const SnapshotArgs& a, EventBuffer* buf) {
  OrderCommands(a, [&](const Command& c) {
    e->Process(c, buf);
    MB_CHECK(buf->back().type() == EventType::kOrderRested);
    buf->clear();
  });
  MB_CHECK(e->open_orders() == a.open_orders);
}

// Resident and peak resident memory of the process, in bytes (/proc/self/status).
struct Resident {
  uint64_t rss = 0;
  uint64_t peak = 0;
};

Resident SampleResident() {
  Resident r;
  std::ifstream status("/proc/self/status");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (status >> key) {
    if (key == "VmRSS:" || key == "VmHWM:") {
      status >> kb >> unit;
      (key == "VmRSS:" ? r.rss : r.peak) = kb * 1024;
    } else {
      status.ignore(1 << 12, '\n');
    }
  }
  return r;
}

// Bytes the image holds in memory (its vectors' elements; not their slack).
uint64_t ImageMemoryBytes(const EngineImage& img) {
  auto bytes = [](const auto& v) { return uint64_t{v.size() * sizeof(v[0])}; };
  return sizeof(EngineImage) + bytes(img.market_status) + bytes(img.asset_totals) +
         bytes(img.balances) + bytes(img.orders) + bytes(img.recent_client_ids) +
         bytes(img.transfers);
}

int64_t NsSince(SteadyClock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - t0).count();
}

// R exports of `e`, each image destroyed outside the timed region.
std::vector<int64_t> TimeExports(const Engine& e, uint64_t repeat) {
  std::vector<int64_t> ns;
  for (uint64_t r = 0; r < repeat; ++r) {
    const auto t0 = SteadyClock::now();
    auto img = std::make_unique<EngineImage>(e.ExportImage());
    ns.push_back(NsSince(t0));
  }
  return ns;
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

void PrintRow(std::string_view name, const Percentiles& p) {
  fmt::print("  {:<26} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f}\n", name, Ms(p.p50),
             Ms(p.p99), Ms(p.p999), Ms(p.max), p.mean / 1e6);
}

std::string JsonStep(std::string_view name, const Percentiles& p) {
  return fmt::format(
      "\"{0}_p50_ns\":{1},\"{0}_p99_ns\":{2},\"{0}_p999_ns\":{3},\"{0}_max_ns\":{4},"
      "\"{0}_mean_ns\":{5:.0f}",
      name, p.p50, p.p99, p.p999, p.max, p.mean);
}

// ------------------------------------------------------------- live exchange
//
// The same state built through a running Exchange, whose snapshots are
// exported from its follower engine (exchange/snapshot_follower.h). A probe
// submits one deposit at a time (the next 100 µs after the last one's
// answer) and records how long the engine took to take and process it
// (submitted -> matched: the inbound ring's wait plus the command). The same
// probe runs first while --live-repeat snapshots are requested one after the
// other, then as long again with none: an engine thread that stalled for a
// snapshot would show in the first window's tail.

// Counts answers; every command of the build must be accepted.
class BuildCompletion final : public exchange::Completion {
 public:
  void OnDone(uint64_t /*tag*/, const exchange::Outcome& o) noexcept override {
    MB_CHECK(o.state == exchange::Outcome::State::kDurable);
    MB_CHECK(o.events.front().type() != EventType::kRejected);
    done_.fetch_add(1, std::memory_order_release);
  }
  uint64_t done() const noexcept { return done_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> done_{0};
};

class ProbeCompletion final : public exchange::Completion {
 public:
  void OnDone(uint64_t /*tag*/, const exchange::Outcome& o) noexcept override {
    MB_CHECK(o.state == exchange::Outcome::State::kDurable);
    times_ = o.times;
    done_.store(true, std::memory_order_release);
    done_.notify_one();
  }
  // Submits one command and waits for its answer.
  exchange::StageTimes Run(exchange::Exchange* ex, const Command& c) {
    done_.store(false, std::memory_order_relaxed);
    while (ex->Submit(c, this, 0) != exchange::SubmitResult::kOk) std::this_thread::yield();
    done_.wait(false, std::memory_order_acquire);  // asleep: the CPU stays the exchange's
    return times_;
  }

 private:
  std::atomic<bool> done_{false};
  exchange::StageTimes times_;
};

struct LiveResult {
  double build_s = 0;
  Percentiles quiet_engine, during_engine;    // submitted -> matched
  Percentiles quiet_durable, during_durable;  // submitted -> durable
  Percentiles snapshot;                       // request -> written
  uint64_t snapshots = 0;
};

Result<LiveResult> RunLive(const SnapshotArgs& a, const engine::EngineConfig& config,
                           const fs::path& data_dir) {
  exchange::ExchangeOptions o;
  o.engine = config;
  o.data_dir = data_dir;
  o.snapshots.every_events = 0;
  o.snapshots.every_seconds = 0;
  o.snapshots.on_shutdown = false;
  o.stage_times = true;
  o.log = [](std::string_view) {};
  auto opened = exchange::Exchange::Open(o);
  if (!opened.ok()) return opened.status();
  exchange::Exchange* ex = opened->get();

  LiveResult r;
  const auto b0 = SteadyClock::now();
  BuildCompletion build;
  uint64_t submitted = 0;
  const auto submit = [&](const Command& c) {
    while (ex->Submit(c, &build, 0) != exchange::SubmitResult::kOk) std::this_thread::yield();
    ++submitted;
  };
  FundCommands(a, config.assets.size(), submit);
  OrderCommands(a, submit);
  while (build.done() < submitted) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  r.build_s = static_cast<double>(NsSince(b0)) / 1e9;

  ProbeCompletion probe;
  uint64_t probes = 0;
  const auto probe_once = [&](std::vector<int64_t>* engine_ns, std::vector<int64_t>* durable_ns) {
    engine::Deposit d;
    d.account = AccountId{1};
    d.asset = AssetId{0};
    d.amount = Amount{1};
    d.ref = TransferRef::From(fmt::format("probe-{}", probes++));
    Command c;
    c.body = d;
    const exchange::StageTimes t = probe.Run(ex, c);
    engine_ns->push_back(t.matched_ns - t.submitted_ns);
    durable_ns->push_back(t.durable_ns - t.submitted_ns);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  };

  // The window with snapshots first; then one as long (at least a second) without.
  std::vector<int64_t> during_engine, during_durable, snapshot_ns;
  for (uint64_t k = 0; k < a.live_repeat; ++k) {
    const uint64_t before = ex->stats().snapshots;
    const auto t0 = SteadyClock::now();
    ex->RequestSnapshot();
    while (ex->stats().snapshots == before) {
      if (ex->stats().snapshot_failures > 0)
        return IoError("a snapshot of the live exchange failed");
      probe_once(&during_engine, &during_durable);
    }
    snapshot_ns.push_back(NsSince(t0));
  }
  const int64_t during_total = std::accumulate(snapshot_ns.begin(), snapshot_ns.end(), int64_t{0});
  std::vector<int64_t> quiet_engine, quiet_durable;
  const auto q0 = SteadyClock::now();
  while (NsSince(q0) < std::max<int64_t>(during_total, 1'000'000'000)) {
    probe_once(&quiet_engine, &quiet_durable);
  }
  r.snapshots = ex->stats().snapshots;
  MB_RETURN_IF_ERROR(ex->Close());
  r.quiet_engine = Summarize(&quiet_engine);
  r.quiet_durable = Summarize(&quiet_durable);
  r.during_engine = Summarize(&during_engine);
  r.during_durable = Summarize(&during_durable);
  r.snapshot = Summarize(&snapshot_ns);
  return r;
}

int RunSnapshotBench(const SnapshotArgs& a) {
  const fs::path scratch =
      a.dir.empty() ? fs::temp_directory_path() / fmt::format("mb-bench-snap-{}", getpid())
                    : fs::path(a.dir) / fmt::format("mb-bench-snap-{}", getpid());
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{scratch};
  auto dir = journal::DataDir::Open(scratch / "data", journal::OpenMode::kReadWrite);
  if (!dir.ok()) {
    std::fprintf(stderr, "snapshot: %s\n", dir.status().message().c_str());
    return 1;
  }

  const engine::EngineConfig config = SnapshotConfig(a);
  EventBuffer buf;
  buf.reserve(64);
  const Resident start = SampleResident();

  // Baseline: the same accounts and deposits, no order.
  std::vector<int64_t> base_ns;
  {
    Engine e(config);
    Fund(&e, a, config.assets.size(), &buf);
    base_ns = TimeExports(e, a.repeat);
  }

  const auto b0 = SteadyClock::now();
  Engine e(config);
  Fund(&e, a, config.assets.size(), &buf);
  PlaceOrders(&e, a, &buf);
  const double build_s = static_cast<double>(NsSince(b0)) / 1e9;
  const Resident built = SampleResident();
  std::size_t price_levels = 0;
  for (uint32_t m = 0; m < a.markets; ++m) {
    for (Side s : {Side::kBuy, Side::kSell}) {
      price_levels += e.Depth(MarketId{static_cast<uint16_t>(m)}, s, SIZE_MAX).size();
    }
  }

  std::vector<int64_t> export_ns, copy_ns, encode_ns, hash_ns, write_ns, free_ns;
  uint64_t image_memory = 0, orders = 0, balances = 0, transfers = 0;
  journal::SnapshotMeta meta;
  for (uint64_t r = 0; r < a.repeat; ++r) {
    auto t0 = SteadyClock::now();
    auto img = std::make_unique<EngineImage>(e.ExportImage());
    export_ns.push_back(NsSince(t0));
    image_memory = ImageMemoryBytes(*img);
    orders = img->orders.size();
    balances = img->balances.size();
    transfers = img->transfers.size();

    // The floor of any copy of the books: their flat array copied into a
    // fresh allocation (page faults included), no walk and no growth.
    t0 = SteadyClock::now();
    {
      std::vector<engine::ImageOrder> flat(img->orders);
      MB_CHECK(flat.size() == orders);
    }
    copy_ns.push_back(NsSince(t0));

    t0 = SteadyClock::now();
    const std::vector<std::byte> raw = codec::EncodeImage(*img);
    encode_ns.push_back(NsSince(t0));
    MB_CHECK(!raw.empty());

    t0 = SteadyClock::now();
    const uint64_t hash = engine::HashImage(*img);
    hash_ns.push_back(NsSince(t0));
    if (r == 0) MB_CHECK(hash == e.StateHash());

    t0 = SteadyClock::now();
    auto path = journal::WriteSnapshot(*dir, *img, &meta, a.zstd_level, 1);
    write_ns.push_back(NsSince(t0));
    if (!path.ok()) {
      std::fprintf(stderr, "snapshot: %s\n", path.status().message().c_str());
      return 1;
    }
    MB_CHECK(meta.raw_size == raw.size());

    t0 = SteadyClock::now();
    img.reset();
    free_ns.push_back(NsSince(t0));
  }
  MB_CHECK(orders == a.open_orders);
  const Resident end = SampleResident();

  const Percentiles base = Summarize(&base_ns);
  const Percentiles exp = Summarize(&export_ns);
  const Percentiles cpy = Summarize(&copy_ns);
  const Percentiles enc = Summarize(&encode_ns);
  const Percentiles hsh = Summarize(&hash_ns);
  const Percentiles wrt = Summarize(&write_ns);
  const Percentiles fre = Summarize(&free_ns);
  const double orders_per_s = exp.mean > 0 ? static_cast<double>(orders) / (exp.mean / 1e9) : 0.0;

  fmt::print(
      "matchbook-bench snapshot: {} open orders on {} price levels in {} markets, {} accounts "
      "(built in {:.2f} s, seed {})\n",
      orders, price_levels, a.markets, a.accounts, build_s, a.seed);
  fmt::print(
      "  image: {} orders, {} balances, {} transfers; {} bytes in memory, {} encoded, {} "
      "compressed (zstd {})\n",
      orders, balances, transfers, image_memory, meta.raw_size, meta.compressed_size, a.zstd_level);
  fmt::print("\n  {:<26} {:>10} {:>10} {:>10} {:>10} {:>10}   ({} snapshots)\n", "step (ms)", "p50",
             "p99", "p99.9", "max", "mean", a.repeat);
  PrintRow("export (ExportImage)", exp);
  PrintRow("  of which no-order base", base);
  PrintRow("copy of the orders (floor)", cpy);
  PrintRow("encode (in write)", enc);
  PrintRow("hash (in write)", hsh);
  PrintRow("write (snapshot thread)", wrt);
  PrintRow("free image", fre);
  fmt::print("\n  export throughput: {:.0f} orders/s (mean)\n", orders_per_s);
  fmt::print(
      "  resident memory: {:.1f} MiB at start, {:.1f} MiB with the engine built, {:.1f} MiB "
      "after the snapshots, peak {:.1f} MiB\n",
      static_cast<double>(start.rss) / 1048576.0, static_cast<double>(built.rss) / 1048576.0,
      static_cast<double>(end.rss) / 1048576.0, static_cast<double>(end.peak) / 1048576.0);
  fmt::print("  snapshots written to {}\n", dir->snapshot_dir().string());

  LiveResult live;
  if (a.live_repeat > 0) {
    auto lr = RunLive(a, config, scratch / "live");
    if (!lr.ok()) {
      std::fprintf(stderr, "snapshot: live exchange: %s\n", lr.status().message().c_str());
      return 1;
    }
    live = *lr;
    fmt::print(
        "\n  live exchange (same state, built through the pipeline in {:.2f} s): {} snapshots "
        "from the follower engine\n",
        live.build_s, live.snapshots);
    fmt::print("  {:<26} {:>10} {:>10} {:>10} {:>10} {:>10}   (probes)\n", "step (ms)", "p50",
               "p99", "p99.9", "max", "mean");
    PrintRow("request -> written", live.snapshot);
    PrintRow("engine, no snapshot", live.quiet_engine);
    PrintRow("engine, during snapshots", live.during_engine);
    PrintRow("durable, no snapshot", live.quiet_durable);
    PrintRow("durable, during snapshots", live.during_durable);
    fmt::print(
        "  ({} and {} probes; engine = submitted -> matched, durable = submitted -> fsynced)\n",
        live.quiet_engine.n, live.during_engine.n);
  }
  if (a.json) {
    std::string j = fmt::format(
        "{{\"bench\":\"snapshot\",\"open_orders\":{},\"price_levels\":{},\"markets\":{},"
        "\"accounts\":{},\"repeat\":{},\"balances\":{},\"transfers\":{},"
        "\"image_memory_bytes\":{},\"image_raw_bytes\":{},\"image_compressed_bytes\":{},"
        "\"zstd_level\":{},\"throughput_orders_per_s\":{:.0f},\"rss_bytes\":{},"
        "\"rss_peak_bytes\":{},",
        orders, price_levels, a.markets, a.accounts, a.repeat, balances, transfers, image_memory,
        meta.raw_size, meta.compressed_size, a.zstd_level, orders_per_s, built.rss, end.peak);
    j += JsonStep("export", exp) + "," + JsonStep("base_export", base) + "," +
         JsonStep("copy", cpy) + "," + JsonStep("encode", enc) + "," + JsonStep("hash", hsh) + "," +
         JsonStep("write", wrt) + "," + JsonStep("free", fre);
    if (a.live_repeat > 0) {
      j += "," + JsonStep("live_snapshot", live.snapshot) + "," +
           JsonStep("live_engine_quiet", live.quiet_engine) + "," +
           JsonStep("live_engine_during", live.during_engine) + "," +
           JsonStep("live_durable_quiet", live.quiet_durable) + "," +
           JsonStep("live_durable_during", live.during_durable);
    }
    fmt::print("{}}}\n", j);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

std::function<int()> AddSnapshotBench(CLI::App* app) {
  auto args = std::make_shared<SnapshotArgs>();
  CLI::App* sub = app->add_subcommand(
      "snapshot",
      "The engine-thread stall of a snapshot: an engine with --open-orders resting orders "
      "(several markets, many accounts, orders over many price levels) exports its image "
      "--repeat times; each export (the engine thread's whole share of a snapshot) and the "
      "snapshot thread's encode, hash and write are timed apart. Prints p50/p99/p99.9/max per "
      "step, the image's bytes and the resident memory; then the same state in a running "
      "exchange, whose snapshots come from its follower engine, probed for engine stalls "
      "while --live-repeat snapshots are taken.");
  AddCount(sub, "--open-orders", &args->open_orders, 0, 50'000'000,
           "resting orders in the books (default 100000)", "_,");
  AddCount(sub, "--repeat", &args->repeat, 1, 100'000, "snapshots taken (default 10)", "_,");
  AddCount(sub, "--markets", &args->markets, 1, 1'000, "markets (default 8)", "_,");
  AddCount(sub, "--accounts", &args->accounts, 1, 1'000'000,
           "funded accounts the orders belong to (default 10000)", "_,");
  AddCount(sub, "--levels", &args->levels, 1, 4'096,
           "price levels a side per market that orders may rest on (default 1000)", "_,");
  AddCount(sub, "--seed", &args->seed, 0, UINT64_MAX, "order generator seed (default 1)", "_,");
  AddCount(sub, "--live-repeat", &args->live_repeat, 0, 1'000,
           "snapshots of a live exchange holding the same state, probed for engine stalls "
           "(default 5; 0: skip)",
           "_,");
  AddCount(sub, "--zstd-level", &args->zstd_level, 1, 19,
           "zstd level of the written snapshot (default 1, the exchange's)");
  sub->add_option("--dir", args->dir,
                  "directory for the scratch data directory (default: the system's temp "
                  "directory); the snapshot write's fsync is that file system's");
  sub->add_flag("--json", args->json, "print one JSON object as the last line");
  return [args]() -> int { return RunSnapshotBench(*args); };
}

}  // namespace mb::bench
