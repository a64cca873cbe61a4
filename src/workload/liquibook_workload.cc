#include "workload/liquibook_workload.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "common/status.h"

namespace mb::bench {

using engine::CancelOrder;
using engine::Command;
using engine::Engine;
using engine::EngineConfig;
using engine::Event;
using engine::EventBuffer;
using engine::EventType;
using engine::Side;
using engine::TimeInForce;

EngineConfig LiquibookConfig(uint32_t accounts, uint32_t expected_open_orders) {
  EngineConfig c = BenchConfig(accounts, expected_open_orders);
  engine::MarketSpec& m = c.markets[0];
  m.tick_units = 1'000'000;        // 1 USDT
  m.lot_units = 100'000;           // 0.001 BTC
  m.max_qty = Qty{1'000'000};      // 1,000 BTC
  m.max_price = Price{1'000'000};  // 1,000,000 USDT
  m.notional_per_tick_lot = 0;
  Status s = c.Validate();
  MB_CHECK(s.ok());
  MB_CHECK(c.markets[0].notional_per_tick_lot == 1000);  // 0.001 USDT
  return c;
}

namespace {

// Spacing of command timestamps: the engine only copies them into events.
constexpr int64_t kTickNs = 1000;
constexpr int kPrices = 10;  // per side, Liquibook's rand() % 10

// One resting order as the generator sees it: enough to cancel it.
struct Resting {
  OrderId id{};
  AccountId account{};
};

class LiquibookGenerator {
 public:
  explicit LiquibookGenerator(const LiquibookSpec& spec)
      : spec_(spec), rng_(spec.seed), shadow_(Config()) {
    events_.reserve(1024);
  }

  Workload Run() {
    MB_CHECK(spec_.commands > 0);
    Workload w;
    w.config = Config();
    w.setup = FundAccounts(spec_.accounts);
    for (const Command& c : w.setup) Feed(c, nullptr);
    w.commands.reserve(spec_.commands);
    double sum_open = 0;
    double sum_levels = 0;
    uint64_t samples = 0;
    std::size_t tenth = 0;
    auto emit = [&](const Command& c) {
      const std::size_t i = w.commands.size();
      w.commands.push_back(c);
      Feed(c, &stats_);
      const std::size_t open = shadow_.open_orders();
      if (i % 1000 == 0) {
        sum_open += static_cast<double>(open);
        sum_levels +=
            static_cast<double>(shadow_.Depth(kBenchMarket, Side::kBuy, SIZE_MAX).size() +
                                shadow_.Depth(kBenchMarket, Side::kSell, SIZE_MAX).size());
        ++samples;
      }
      stats_.max_open_orders = std::max(stats_.max_open_orders, open);
      while (tenth < stats_.open_orders_by_tenth.size() &&
             (i + 1) * stats_.open_orders_by_tenth.size() >= (tenth + 1) * spec_.commands) {
        stats_.open_orders_by_tenth[tenth++] = open;
      }
    };
    for (uint64_t k = 0; w.commands.size() < spec_.commands; ++k) {
      // Liquibook: is_buy = (i % 2) == 0; price = rand() % 10 + low;
      // qty = (rand() % 10 + 1) * 100.
      const Side side = k % 2 == 0 ? Side::kBuy : Side::kSell;
      const int64_t low = side == Side::kBuy ? spec_.buy_low : spec_.sell_low;
      const int64_t price = low + static_cast<int64_t>(rng_.Below(kPrices));
      const int64_t lots = spec_.qty_step * (1 + static_cast<int64_t>(rng_.Below(kPrices)));
      const AccountId account{static_cast<uint32_t>(1 + rng_.Below(spec_.accounts))};
      ++stats_.gtc;
      emit(MakeLimit(account, side, price, lots, TimeInForce::kGtc, NextTime()));
      if (rested_ && w.commands.size() < spec_.commands) {
        std::deque<Resting>& level = Level(side, price);
        if (spec_.max_level_orders != 0 && level.size() > spec_.max_level_orders) {
          const Resting oldest = level.front();
          level.pop_front();
          canceling_ = oldest.id;
          CancelOrder x;
          x.account = oldest.account;
          x.market = kBenchMarket;
          x.order_id = oldest.id;
          Command c;
          c.timestamp_ns = NextTime();
          c.body = x;
          ++stats_.cancel;
          emit(c);
        }
      }
    }
    stats_.mean_open_orders = samples ? sum_open / static_cast<double>(samples) : 0;
    stats_.mean_price_levels = samples ? sum_levels / static_cast<double>(samples) : 0;
    w.stats = stats_;
    return w;
  }

 private:
  // Pools sized for the bounded book; unbounded (max_level_orders 0), for about
  // half the stream (they grow past it, amortised, if needed).
  EngineConfig Config() const {
    const std::size_t orders = spec_.max_level_orders == 0
                                   ? spec_.commands / 2 + 1
                                   : 2 * kPrices * (spec_.max_level_orders + 1);
    return LiquibookConfig(spec_.accounts,
                           static_cast<uint32_t>(std::min<std::size_t>(orders, UINT32_MAX)));
  }

  int64_t NextTime() { return now_ns_ += kTickNs; }

  // Orders rest only at their own limit price, so a side has kPrices levels.
  std::deque<Resting>& Level(Side side, int64_t price) {
    const int64_t low = side == Side::kBuy ? spec_.buy_low : spec_.sell_low;
    const auto i = static_cast<std::size_t>(price - low);
    MB_CHECK(i < kPrices);
    return levels_[side == Side::kBuy ? 0 : 1][i];
  }

  // Drops the order from its level's queue. A maker that filled is the front
  // of its level: the search is one step.
  void Remove(Side side, int64_t price, OrderId id) {
    std::deque<Resting>& level = Level(side, price);
    auto it =
        std::find_if(level.begin(), level.end(), [&](const Resting& r) { return r.id == id; });
    MB_CHECK(it != level.end());
    level.erase(it);
  }

  // Runs one command through the shadow engine and mirrors its book.
  void Feed(const Command& c, MixStats* stats) {
    events_.clear();
    shadow_.Process(c, &events_);
    rested_ = false;
    bool traded = false;
    for (const Event& e : events_) {
      switch (e.type()) {
        case EventType::kRejected:
          ++stats_.rejected;
          break;
        case EventType::kTrade: {
          const auto& t = std::get<engine::Trade>(e.body);
          traded = true;
          if (stats) {
            ++stats->trades;
            stats->filled_orders += t.maker_filled;
            stats->filled_orders += t.taker_filled;
          }
          if (t.maker_filled)
            Remove(engine::Opposite(t.taker_side), t.price.value, t.maker_order_id);
          break;
        }
        case EventType::kOrderRested: {
          const auto& x = std::get<engine::OrderRested>(e.body);
          auto v = shadow_.FindOrder(x.order_id);
          MB_CHECK(v.has_value());
          Level(v->terms.side, v->terms.price.value).push_back(Resting{v->id, v->terms.account});
          rested_ = true;
          break;
        }
        case EventType::kOrderCanceled:
          // Run() took the order off its level when it wrote the cancel.
          MB_CHECK(std::get<engine::OrderCanceled>(e.body).order_id == canceling_);
          break;
        default:
          break;
      }
    }
    if (spec_.check_invariants) {
      Status st = shadow_.CheckInvariants();
      if (!st.ok()) {
        std::fprintf(stderr,
                     "CheckInvariants failed after generated command %" PRIu64 " (%s): %s\n", fed_,
                     std::string(engine::ToString(c.type())).c_str(), st.message().c_str());
        std::abort();
      }
    }
    ++fed_;
    if (stats) {
      stats->events += events_.size();
      if (traded) ++stats->trading_commands;
    }
  }

  const LiquibookSpec& spec_;
  Rng rng_;
  Engine shadow_;
  EventBuffer events_;
  int64_t now_ns_ = 0;
  bool rested_ = false;  // the last command fed left an order in the book
  OrderId canceling_{};  // the order the last cancel written names
  // [buy, sell][price - low]: the orders resting on each level, oldest first.
  std::array<std::array<std::deque<Resting>, kPrices>, 2> levels_;
  MixStats stats_;
  uint64_t fed_ = 0;  // commands fed to the shadow engine, setup included
};

}  // namespace

Workload GenerateLiquibookStream(const LiquibookSpec& spec) {
  return LiquibookGenerator(spec).Run();
}

}  // namespace mb::bench
