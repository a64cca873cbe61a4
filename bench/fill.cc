#include "fill.h"

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "app/config.h"
#include "cli.h"
#include "common/checked.h"
#include "engine/command.h"
#include "exchange/exchange.h"
#include "fmt/format.h"
#include "stats.h"
#include "workload/engine_workload.h"
#include "workload/random_commands.h"

namespace mb::bench {
namespace {

struct FillArgs {
  std::string config;
  std::string data_dir;  // empty: the configuration's
  std::string market;    // empty: the first
  uint64_t events = 0;
  uint64_t accounts = 256;
  uint64_t orders_per_account = 40;
  uint64_t band = 500;
  uint64_t seed = 1;
  uint64_t window = 16384;
  bool json = false;
};

// Counts what became durable and keeps a sample of Submit -> durable times.
class Tally final : public exchange::Completion {
 public:
  void OnDone(uint64_t /*tag*/, const exchange::Outcome& o) noexcept override {
    if (o.state != exchange::Outcome::State::kDurable) {
      failed_.fetch_add(1, std::memory_order_relaxed);
    } else if (o.times.durable_ns != 0 && o.times.submitted_ns != 0) {
      std::lock_guard lock(mu_);
      latency_ns_.push_back(o.times.durable_ns - o.times.submitted_ns);
    }
    done_.fetch_add(1, std::memory_order_release);
  }
  uint64_t done() const { return done_.load(std::memory_order_acquire); }
  uint64_t failed() const { return failed_.load(std::memory_order_relaxed); }
  std::vector<int64_t> TakeLatencies() {
    std::lock_guard lock(mu_);
    return std::move(latency_ns_);
  }

 private:
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> failed_{0};
  std::mutex mu_;
  std::vector<int64_t> latency_ns_;
};

uint64_t CeilDiv(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

int RunFill(const FillArgs& args) {
  Result<app::Config> cfg = app::LoadFullConfig(args.config);
  if (!cfg.ok()) {
    std::fprintf(stderr, "fill: %s\n", std::string(cfg.status().message()).c_str());
    return 2;
  }
  exchange::ExchangeOptions options = app::ExchangeOptionsFrom(*cfg);
  if (!args.data_dir.empty()) options.data_dir = args.data_dir;
  const engine::EngineConfig& ec = cfg->engine;

  MarketId market{0};
  if (!args.market.empty()) {
    bool found = false;
    for (std::size_t i = 0; i < ec.markets.size(); ++i) {
      if (ec.markets[i].symbol == args.market) {
        market = MarketId{static_cast<uint16_t>(i)};
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "fill: --market %s: no such market in %s\n", args.market.c_str(),
                   args.config.c_str());
      return 2;
    }
  } else if (ec.markets.empty()) {
    std::fprintf(stderr, "fill: %s defines no market\n", args.config.c_str());
    return 2;
  }
  const engine::MarketSpec& m = ec.markets[static_cast<std::size_t>(market)];
  if (args.accounts + 1 >= ec.max_accounts) {
    std::fprintf(stderr, "fill: --accounts %llu: max_accounts is %u\n",
                 static_cast<unsigned long long>(args.accounts), ec.max_accounts);
    return 2;
  }

  // Prices: a centre well above the band, in ticks; sizes in lots, at least
  // the market's minimum quantity and notional at the lowest price used.
  const auto band = static_cast<int64_t>(args.band);
  int64_t center = 100'000;
  if (center <= 2 * band) center = 4 * band;
  if (m.max_price.value > 0 && center + band > m.max_price.value) {
    center = m.max_price.value / 2;
    if (center <= band) {
      std::fprintf(stderr, "fill: --band %lld: wider than the market's price range\n",
                   static_cast<long long>(band));
      return 2;
    }
  }
  const auto low = static_cast<uint64_t>(center - band);
  int64_t min_lots = std::max<int64_t>(1, m.min_qty.value);
  const auto nptl = static_cast<uint64_t>(m.notional_per_tick_lot);
  min_lots = std::max<int64_t>(
      min_lots,
      static_cast<int64_t>(CeilDiv(static_cast<uint64_t>(m.min_notional.value), low * nptl)));
  const int64_t max_lots = min_lots * 20;
  if (m.max_qty.value > 0 && max_lots > m.max_qty.value) {
    std::fprintf(stderr, "fill: market %s: its quantity limits leave no room\n", m.symbol.c_str());
    return 2;
  }

  const auto first = static_cast<uint32_t>(ec.max_accounts - 1 - args.accounts);
  if (Raw(ec.fee_account) >= first) {
    std::fprintf(stderr, "fill: the fee account %u lies in the fill's accounts %u..%u\n",
                 Raw(ec.fee_account), first, ec.max_accounts - 2);
    return 2;
  }
  // Each account gets what 100,000 of its largest orders need (a random walk
  // of fills never runs it dry), capped so that every account's deposit of an
  // asset together stays far inside the engine's int64 supply.
  const int64_t cap = std::numeric_limits<int64_t>::max() / 4 / static_cast<int64_t>(args.accounts);
  const int64_t top = center + band + 8;
  int64_t quote_each = 0;
  int64_t base_each = 0;
  if (!CheckedMul3(top, static_cast<int64_t>(nptl), max_lots * 100'000, &quote_each))
    quote_each = cap;
  if (!CheckedMul3(m.lot_units, max_lots, 100'000, &base_each)) base_each = cap;
  quote_each = std::min(quote_each, cap);
  base_each = std::min(base_each, cap);
  int64_t one_quote = 0;
  if (!CheckedMul3(top, static_cast<int64_t>(nptl), max_lots, &one_quote) ||
      quote_each / std::max<int64_t>(one_quote, 1) < 1'000 ||
      base_each / std::max<int64_t>(m.lot_units * max_lots, 1) < 1'000) {
    std::fprintf(stderr,
                 "fill: market %s: an order's value is too large for %llu accounts to hold "
                 "1,000 orders each (fewer --accounts, a smaller --band)\n",
                 m.symbol.c_str(), static_cast<unsigned long long>(args.accounts));
    return 2;
  }
  options.stage_times = true;
  std::atomic<uint64_t> events{0};
  // Rejections by command type (journal thread): a fill is a journal of
  // orders, not of refusals.
  std::array<std::atomic<uint64_t>, 8> rejected{};
  std::atomic<uint64_t> trades{0};
  options.on_durable = [&](std::span<const engine::Event> es) {
    events.fetch_add(es.size(), std::memory_order_relaxed);
    for (const engine::Event& e : es) {
      if (const auto* r = std::get_if<engine::Rejected>(&e.body)) {
        rejected[static_cast<std::size_t>(r->command) % rejected.size()].fetch_add(
            1, std::memory_order_relaxed);
      } else if (e.type() == engine::EventType::kTrade) {
        trades.fetch_add(1, std::memory_order_relaxed);
      }
    }
  };
  auto opened = exchange::Exchange::Open(std::move(options));
  if (!opened.ok()) {
    std::fprintf(stderr, "fill: %s\n", std::string(opened.status().message()).c_str());
    return 1;
  }
  exchange::Exchange& ex = **opened;
  const uint64_t start_seq = ex.recovery().recovered_seq;

  Tally tally;
  uint64_t submitted = 0;
  // The journal failing (a full disk): the exchange holds what it took until
  // the disk recovers, so a wait for it would never end; stop and let Close()
  // report what is not durable.
  uint32_t polls = 0;
  auto refusing = [&]() -> bool {
    if (++polls % 4096 != 0) return false;
    const std::string why = ex.RefusalReason();
    if (why.empty()) return false;
    std::fprintf(stderr, "fill: the journal refuses: %s\n", why.c_str());
    return true;
  };
  auto submit = [&](const engine::Command& c) -> bool {
    while (submitted - tally.done() >= args.window) {
      if (refusing()) return false;
      std::this_thread::yield();
    }
    for (;;) {
      exchange::SubmitResult r = ex.Submit(c, &tally, submitted);
      if (r == exchange::SubmitResult::kOk) break;
      if (r != exchange::SubmitResult::kFull) {
        std::fprintf(stderr, "fill: submit refused: %s %s\n",
                     std::string(exchange::ToString(r)).c_str(), ex.RefusalReason().c_str());
        return false;
      }
      std::this_thread::yield();
    }
    ++submitted;
    return true;
  };

  // Client ids and deposit references are unique per run (the sequence the
  // run starts from is in them), so a second fill on the same directory
  // neither duplicates nor cancels the first one's.
  const std::string tag = fmt::format("f{}-{}-", args.seed, start_seq);
  bool ok = true;
  for (uint32_t i = 0; i < args.accounts && ok; ++i) {
    const AccountId a{first + i};
    ok = submit(workload::Fund(0, a, m.quote, quote_each, tag + "q" + std::to_string(i))) &&
         submit(workload::Fund(0, a, m.base, base_each, tag + "b" + std::to_string(i)));
  }

  Rng rng(args.seed);
  std::vector<std::deque<uint64_t>> open(args.accounts);  // client ids, oldest first
  uint64_t next_cid = 0;
  auto cid = [&](uint64_t n) { return tag + std::to_string(n); };
  const auto t0 = std::chrono::steady_clock::now();
  auto last_report = t0;
  uint32_t who = 0;
  while (ok && events.load(std::memory_order_relaxed) < args.events) {
    const AccountId a{first + who};
    std::deque<uint64_t>& mine = open[who];
    const engine::Side side = rng.Below(2) == 0 ? engine::Side::kBuy : engine::Side::kSell;
    const int64_t lots = min_lots * rng.Between(1, 20);
    if (rng.Below(5) == 0) {
      // Crosses into the other side's band: a buy up to a price above the
      // centre, a sell down to one below it; it trades with what rests there.
      const int64_t price = side == engine::Side::kBuy ? center + rng.Between(1, band)
                                                       : center - rng.Between(1, band);
      ok = submit(workload::Place(0, a, market, side, engine::OrderType::kLimit,
                                  engine::TimeInForce::kIoc, price,
                                  std::min<int64_t>(lots, min_lots * 5), cid(next_cid++)));
    } else if (mine.size() >= args.orders_per_account) {
      ok = submit(workload::Cancel(0, a, market, OrderId{0}, cid(mine.front())));
      mine.pop_front();
    } else {
      // Rests: bids below the centre, asks above.
      const int64_t off = rng.Between(1, band);
      const int64_t price = side == engine::Side::kBuy ? center - off : center + off;
      mine.push_back(next_cid);
      ok = submit(workload::Place(0, a, market, side, engine::OrderType::kLimit,
                                  engine::TimeInForce::kGtc, price, lots, cid(next_cid++)));
    }
    who = (who + 1) % static_cast<uint32_t>(args.accounts);
    if ((submitted & 0xFFFF) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_report > std::chrono::seconds(5)) {
        last_report = now;
        const double s = std::chrono::duration<double>(now - t0).count();
        std::fprintf(stderr, "fill: %llu commands, %llu events durable, %.0f s\n",
                     static_cast<unsigned long long>(tally.done()),
                     static_cast<unsigned long long>(events.load()), s);
      }
    }
  }
  while (ok && tally.done() < submitted) {
    if (refusing()) ok = false;
    std::this_thread::yield();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t end_seq = ex.durable_seq();
  Status closed = ex.Close();
  if (!closed.ok()) {
    std::fprintf(stderr, "fill: close: %s\n", std::string(closed.message()).c_str());
    return 1;
  }
  // Everything the exchange wrote is on disk before this returns (a copy of
  // the device taken next must hold it whatever the fsync policy).
  const std::string dir = args.data_dir.empty() ? cfg->runtime.data_dir : args.data_dir;
  if (int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
    const int rc = ::syncfs(fd);
    ::close(fd);
    if (rc != 0) {
      std::perror("fill: syncfs");
      return 1;
    }
  }
  if (!ok || tally.failed() != 0) {
    std::fprintf(stderr, "fill: %llu commands not durable\n",
                 static_cast<unsigned long long>(tally.failed()));
    return 1;
  }
  auto refused = [&](engine::CommandType t) {
    return rejected[static_cast<std::size_t>(t) % rejected.size()].load();
  };
  const uint64_t refused_deposits = refused(engine::CommandType::kDeposit);
  const uint64_t refused_orders = refused(engine::CommandType::kPlaceOrder);
  fmt::print(
      "fill: {} trades; refused: {} deposits, {} orders, {} cancels (of orders already "
      "filled)\n",
      trades.load(), refused_deposits, refused_orders, refused(engine::CommandType::kCancelOrder));
  if (refused_deposits != 0 || refused_orders * 100 > submitted) {
    std::fprintf(stderr,
                 "fill: the engine refused %llu deposits and %llu orders: the journal is not "
                 "the order flow asked for\n",
                 static_cast<unsigned long long>(refused_deposits),
                 static_cast<unsigned long long>(refused_orders));
    return 1;
  }
  std::vector<int64_t> lat = tally.TakeLatencies();
  const Percentiles p = Summarize(&lat);
  const uint64_t ev = events.load();
  fmt::print(
      "fill: {} records ({}..{}) = {} events in {:.1f} s: {:.0f} commands/s, {:.0f} events/s; "
      "submit -> durable p50 {:.3f} ms, p99 {:.3f} ms, p99.9 {:.3f} ms, max {:.3f} ms\n",
      end_seq - start_seq, start_seq + 1, end_seq, ev, seconds,
      static_cast<double>(submitted) / seconds, static_cast<double>(ev) / seconds,
      static_cast<double>(p.p50) / 1e6, static_cast<double>(p.p99) / 1e6,
      static_cast<double>(p.p999) / 1e6, static_cast<double>(p.max) / 1e6);
  if (args.json) {
    fmt::print(
        "{{\"records\":{},\"first_seq\":{},\"last_seq\":{},\"events\":{},\"seconds\":{:.3f},"
        "\"throughput_per_s\":{:.0f},\"p50_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\"max_ns\":{}}}\n",
        end_seq - start_seq, start_seq + 1, end_seq, ev, seconds,
        static_cast<double>(submitted) / seconds, p.p50, p.p99, p.p999, p.max);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

std::function<int()> AddFillCommand(CLI::App* app) {
  auto a = std::make_shared<FillArgs>();
  CLI::App* sub = app->add_subcommand(
      "fill",
      "Grows a data directory's journal by --events events through the Exchange matchbook "
      "serve runs (the configuration's journal and snapshot settings), without the API: "
      "resting orders, cancels and crossing IOC orders of --accounts accounts on one market. "
      "serve must be stopped. Prints records, events, throughput and submit -> durable "
      "p50/p99/p99.9/max.");
  sub->add_option("--config", a->config, "matchbook.toml (as given to serve)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--data-dir", a->data_dir, "data directory (default: the configuration's)");
  sub->add_option("--market", a->market, "market symbol (default: the first)");
  AddCount(sub, "--events", &a->events, 1, UINT64_MAX, "events to add", "_,")->required();
  AddCount(sub, "--accounts", &a->accounts, 1, 1'000'000,
           "accounts trading, at the top of the account range (default 256)");
  AddCount(sub, "--orders-per-account", &a->orders_per_account, 1, 1'000'000,
           "resting orders an account keeps before it cancels its oldest (default 40)");
  AddCount(sub, "--band", &a->band, 1, 1'000'000,
           "resting prices lie within this many ticks of the centre (default 500)");
  AddCount(sub, "--seed", &a->seed, 0, UINT64_MAX, "order flow seed (default 1)");
  AddCount(sub, "--window", &a->window, 1, 1u << 20, "commands in flight (default 16384)");
  sub->add_flag("--json", a->json, "print one JSON object as the last line");
  return [a]() -> int { return RunFill(*a); };
}

}  // namespace mb::bench
