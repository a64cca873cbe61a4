#include "workload/engine_workload.h"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/status.h"

namespace mb::bench {

using engine::AmendOrder;
using engine::CancelOrder;
using engine::Command;
using engine::Engine;
using engine::EngineConfig;
using engine::Event;
using engine::EventBuffer;
using engine::OrderType;
using engine::Side;
using engine::TimeInForce;

namespace {

uint64_t SplitMix64(uint64_t* x) noexcept {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__extension__ typedef unsigned __int128 Uint128;

uint64_t Rotl(uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }

// Spacing of command timestamps: the engine only copies them into events.
constexpr int64_t kTickNs = 1000;

}  // namespace

Rng::Rng(uint64_t seed) noexcept {
  uint64_t x = seed;
  for (uint64_t& s : s_) s = SplitMix64(&x);
}

uint64_t Rng::Next() noexcept {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

uint64_t Rng::Below(uint64_t n) noexcept {
  return static_cast<uint64_t>((static_cast<Uint128>(Next()) * n) >> 64);
}

int64_t Rng::Between(int64_t lo, int64_t hi) noexcept {
  return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo) + 1));
}

bool Rng::Chance(uint32_t per_million) noexcept { return Below(1'000'000) < per_million; }

EngineConfig BenchConfig(uint32_t accounts, uint32_t expected_open_orders) {
  EngineConfig c;
  c.assets = {engine::AssetSpec{"USDT", 6}, engine::AssetSpec{"BTC", 8}};
  engine::MarketSpec m;
  m.symbol = "BTCUSDT";
  m.base = kBenchBase;
  m.quote = kBenchQuote;
  m.tick_units = 10'000;  // 0.01 USDT
  m.lot_units = 10'000;   // 0.0001 BTC
  m.min_qty = Qty{1};
  m.max_qty = Qty{1'000'000'000};
  m.max_price = Price{1'000'000'000};
  m.min_notional = Amount{0};
  m.maker_fee_bps = 2;
  m.taker_fee_bps = 5;
  c.markets = {m};
  c.max_accounts = accounts + 1;
  c.fee_account = AccountId{0};
  c.expected_open_orders = expected_open_orders;
  c.client_id_memory = 1024;
  Status s = c.Validate();
  MB_CHECK(s.ok());
  MB_CHECK(c.markets[0].notional_per_tick_lot == 1);
  return c;
}

std::vector<Command> FundAccounts(uint32_t accounts) {
  std::vector<Command> out;
  for (uint32_t a = 1; a <= accounts; ++a) {
    for (auto asset : {kBenchQuote, kBenchBase}) {
      engine::Deposit d;
      d.account = AccountId{a};
      d.asset = asset;
      // 10^9 USDT / 10^7 BTC each: 1,000 accounts stay far below int64 in total.
      d.amount = Amount{1'000'000'000'000'000};
      d.ref = TransferRef::From("fund-" + std::to_string(a) + "-" + std::to_string(Raw(asset)));
      Command c;
      c.body = d;
      out.push_back(c);
    }
  }
  return out;
}

MixSpec ConditionalMixSpec() {
  MixSpec spec;
  spec.conditional_pct = 20;
  spec.center = 300'000;
  return spec;
}

Command MakeLimit(AccountId account, Side side, int64_t price, int64_t lots, TimeInForce tif,
                  int64_t timestamp_ns) {
  engine::PlaceOrder p;
  p.account = account;
  p.market = kBenchMarket;
  p.side = side;
  p.type = engine::OrderType::kLimit;
  p.tif = tif;
  p.stp = engine::StpMode::kNone;
  p.price = Price{price};
  p.qty = Qty{lots};
  Command c;
  c.timestamp_ns = timestamp_ns;
  c.body = p;
  return c;
}

namespace {

// The generator's view of one open order.
struct OpenOrder {
  OrderId id{};
  AccountId account{};
  Side side = Side::kBuy;
  int64_t price = 0;
  int64_t qty = 0;  // total ordered
};

class MixGenerator {
 public:
  explicit MixGenerator(const MixSpec& spec)
      : spec_(spec),
        rng_(spec.seed),
        shadow_(BenchConfig(spec.accounts, static_cast<uint32_t>(spec.target_orders * 4))) {
    events_.reserve(1024);
  }

  Workload Run() {
    Workload w;
    w.config = BenchConfig(spec_.accounts, static_cast<uint32_t>(spec_.target_orders * 4));
    w.setup = FundAccounts(spec_.accounts);
    for (const Command& c : w.setup) Feed(c, nullptr);
    // The initial book: target_orders resting orders across the band.
    while (BookSize() < spec_.target_orders) {
      Side side = rng_.Chance(500'000) ? Side::kBuy : Side::kSell;
      Command c = MakeLimit(RandomAccount(), side, RestingPrice(side), Lots(), TimeInForce::kGtc,
                            NextTime());
      w.setup.push_back(c);
      Feed(c, nullptr);
    }
    w.commands.reserve(spec_.commands);
    double sum_open = 0;
    double sum_levels = 0;
    double sum_waiting = 0;
    double sum_icebergs = 0;
    uint64_t samples = 0;
    std::size_t tenth = 0;
    for (std::size_t i = 0; i < spec_.commands; ++i) {
      Command c = NextCommand();
      w.commands.push_back(c);
      Feed(c, &stats_);
      while (tenth < stats_.open_orders_by_tenth.size() &&
             (i + 1) * stats_.open_orders_by_tenth.size() >= (tenth + 1) * spec_.commands) {
        stats_.open_orders_by_tenth[tenth++] = BookSize();
      }
      if (i % 1000 == 0) {
        sum_open += static_cast<double>(BookSize());
        sum_waiting += static_cast<double>(waiting_.size());
        sum_icebergs += static_cast<double>(resting_icebergs_.size());
        sum_levels +=
            static_cast<double>(shadow_.Depth(kBenchMarket, Side::kBuy, SIZE_MAX).size() +
                                shadow_.Depth(kBenchMarket, Side::kSell, SIZE_MAX).size());
        ++samples;
      }
      stats_.max_open_orders = std::max(stats_.max_open_orders, BookSize());
      stats_.conditional.max_waiting = std::max(stats_.conditional.max_waiting, waiting_.size());
    }
    const double n = static_cast<double>(samples);
    stats_.mean_open_orders = samples ? sum_open / n : 0;
    stats_.mean_price_levels = samples ? sum_levels / n : 0;
    stats_.conditional.mean_waiting = samples ? sum_waiting / n : 0;
    stats_.conditional.mean_icebergs = samples ? sum_icebergs / n : 0;
    stats_.conditional.waiting_at_end = waiting_.size();
    stats_.state_hash = shadow_.StateHash();
    w.stats = stats_;
    return w;
  }

 private:
  int64_t NextTime() { return now_ns_ += kTickNs; }
  AccountId RandomAccount() {
    return AccountId{static_cast<uint32_t>(1 + rng_.Below(spec_.accounts))};
  }
  int64_t Lots() { return rng_.Between(1, spec_.max_lots); }
  // Resting orders: the mix's and the icebergs (waiting conditional orders
  // are in no level).
  std::size_t BookSize() const { return open_.size() + resting_icebergs_.size(); }

  std::optional<int64_t> Best(Side side) const {
    auto p = side == Side::kBuy ? shadow_.BestBid(kBenchMarket) : shadow_.BestAsk(kBenchMarket);
    if (!p) return std::nullopt;
    return p->value;
  }

  // Keeps a resting price on its own side of the book.
  int64_t ClampResting(Side side, int64_t price) const {
    if (side == Side::kBuy) {
      if (auto ask = Best(Side::kSell)) price = std::min(price, *ask - 1);
    } else {
      if (auto bid = Best(Side::kBuy)) price = std::max(price, *bid + 1);
    }
    return std::max<int64_t>(price, 1);
  }

  // Asks rest in [center, center + half_band), bids in [center - half_band, center).
  int64_t RestingPrice(Side side) {
    int64_t off = static_cast<int64_t>(rng_.Below(static_cast<uint64_t>(spec_.half_band)));
    int64_t p = side == Side::kBuy ? spec_.center - 1 - off : spec_.center + off;
    return ClampResting(side, p);
  }

  bool InBand(Side side, int64_t p) const {
    return side == Side::kBuy ? p >= spec_.center - spec_.half_band && p < spec_.center
                              : p >= spec_.center && p < spec_.center + spec_.half_band;
  }

  // Quantity of a taker aimed at the best opposite level. At or above the
  // target book size: the whole level and more (the remainder of a GTC rests, an
  // IOC's expires), so the book shrinks. Below it: part of the first order in
  // the queue, so no order leaves; when that order has a single lot left, a GTC
  // takes a one-order level whole and rests the rest (still no net change), and
  // otherwise gets 0 (the caller places it without crossing); an IOC takes 1.
  int64_t TakerLots(Side taker_side, bool gtc) {
    auto depth = shadow_.Depth(kBenchMarket, engine::Opposite(taker_side), 1);
    if (depth.empty()) return Lots();
    if (BookSize() >= spec_.target_orders) return depth[0].qty.value + Lots();
    int64_t first = FirstOrderLots(engine::Opposite(taker_side));
    if (first > 1) return rng_.Between(1, first - 1);
    if (!gtc) return 1;
    return depth[0].orders == 1 ? depth[0].qty.value + Lots() : 0;
  }

  // The side a taker comes from: `preferred`, unless the book opposite it is
  // empty, or (below the target size) its first order has a single lot left and
  // the other side's does not, so that the taker can fill part of an order.
  Side TakerSide(Side preferred) const {
    Side other = engine::Opposite(preferred);
    int64_t first = FirstOrderLots(other);
    if (first == 0) return other;
    if (BookSize() < spec_.target_orders && first == 1 && FirstOrderLots(preferred) > 1) {
      return other;
    }
    return preferred;
  }

  // Remaining lots of the first order in the queue of the side's best level
  // (asked of the shadow engine rather than keeping FIFO state twice).
  int64_t FirstOrderLots(Side side) const {
    auto orders = shadow_.Orders(kBenchMarket, side);
    return orders.empty() ? 0 : orders.front().remaining.value;
  }

  Command NextCommand() {
    // The conditional share first (no draw at all when it is 0: the plain
    // mix's stream stays what it was).
    if (spec_.conditional_pct != 0 && rng_.Below(100) < spec_.conditional_pct) {
      return ConditionalCommand();
    }
    uint64_t r = rng_.Below(100);
    if (open_.empty() && r >= 12) r = 0;  // nothing to cancel or move: place instead
    // Below the target size some cancels become placements (the book-size
    // controller; exchange-core's generator likewise chooses by the book's lack).
    if (r >= 12 && r < 18 && BookSize() < spec_.target_orders &&
        rng_.Chance(spec_.cancel_to_gtc_ppm_below)) {
      r = 0;
    }
    Command c;
    if (r < 9) {
      ++stats_.gtc;
      Side side = rng_.Chance(500'000) ? Side::kBuy : Side::kSell;
      const bool below = BookSize() < spec_.target_orders;
      const bool cross = rng_.Chance(below ? spec_.gtc_cross_ppm_below : spec_.gtc_cross_ppm_above);
      if (cross) side = TakerSide(side);
      auto opp = Best(engine::Opposite(side));
      int64_t lots = 0;
      if (cross && opp && (lots = TakerLots(side, true)) > 0) {
        c = MakeLimit(RandomAccount(), side, *opp, lots, TimeInForce::kGtc, NextTime());
      } else {
        c = MakeLimit(RandomAccount(), side, RestingPrice(side), Lots(), TimeInForce::kGtc,
                      NextTime());
      }
    } else if (r < 12) {
      ++stats_.ioc;
      Side side = TakerSide(rng_.Chance(500'000) ? Side::kBuy : Side::kSell);
      auto opp = Best(engine::Opposite(side));
      int64_t price = opp ? *opp : spec_.center;
      c = MakeLimit(RandomAccount(), side, price, TakerLots(side, false), TimeInForce::kIoc,
                    NextTime());
    } else if (r < 18) {
      ++stats_.cancel;
      c = CancelOf(open_[rng_.Below(open_.size())]);
    } else {
      ++stats_.move;
      const OpenOrder& o = open_[rng_.Below(open_.size())];
      auto opp = Best(engine::Opposite(o.side));
      int64_t price = 0;
      if (opp && *opp != o.price && rng_.Chance(spec_.move_cross_ppm)) {
        price = *opp;
      } else {
        int64_t step = rng_.Between(1, spec_.move_step);
        price = o.price + (rng_.Chance(500'000) ? step : -step);
        if (!InBand(o.side, price)) price = RestingPrice(o.side);
        price = ClampResting(o.side, price);
        if (price == o.price)
          price = ClampResting(o.side, o.price + (o.side == Side::kBuy ? -1 : 1));
      }
      AmendOrder x;
      x.account = o.account;
      x.market = kBenchMarket;
      x.order_id = o.id;
      x.new_price = Price{price};
      x.new_qty = Qty{0};
      c.timestamp_ns = NextTime();
      c.body = x;
    }
    return c;
  }

  Command CancelOf(const OpenOrder& o) {
    CancelOrder x;
    x.account = o.account;
    x.market = kBenchMarket;
    x.order_id = o.id;
    Command c;
    c.timestamp_ns = NextTime();
    c.body = x;
    return c;
  }

  // A price at or up to 3 ticks behind the best of the side's own orders.
  int64_t NearTop(Side side) {
    auto own = Best(side);
    if (!own) return RestingPrice(side);
    const auto off = static_cast<int64_t>(rng_.Below(4));
    const int64_t p = side == Side::kBuy ? *own - off : *own + off;
    return InBand(side, p) ? ClampResting(side, p) : RestingPrice(side);
  }

  // The oldest order of `fifo` still in `live` (dropping the ones that left).
  template <class Live>
  static OpenOrder Oldest(std::deque<OpenOrder>* fifo, const Live& live) {
    while (live.count(Raw(fifo->front().id)) == 0) fifo->pop_front();
    OpenOrder o = fifo->front();
    fifo->pop_front();
    return o;
  }

  // One command of the conditional share: an iceberg or a conditional order,
  // or, at the bound, the cancel of the oldest of its kind.
  Command ConditionalCommand() {
    ConditionalStats& cs = stats_.conditional;
    const Side side = rng_.Chance(500'000) ? Side::kBuy : Side::kSell;
    if (rng_.Chance(spec_.iceberg_ppm)) {
      if (resting_icebergs_.size() >= spec_.max_icebergs) {
        ++cs.iceberg_cancels;
        return CancelOf(Oldest(&iceberg_fifo_, resting_icebergs_));
      }
      ++cs.icebergs;
      const int64_t slice = rng_.Between(1, spec_.iceberg_max_slice);
      const int64_t lots = slice * rng_.Between(2, 6);
      Command c =
          MakeLimit(RandomAccount(), side, NearTop(side), lots, TimeInForce::kGtc, NextTime());
      std::get<engine::PlaceOrder>(c.body).iceberg_qty = Qty{slice};
      return c;
    }
    if (waiting_.size() >= spec_.max_waiting) {
      ++cs.stop_cancels;
      return CancelOf(Oldest(&waiting_fifo_, waiting_));
    }
    ++cs.stops;
    const bool market = rng_.Chance(spec_.stop_market_ppm);
    const bool loss = rng_.Chance(500'000);
    engine::PlaceOrder p;
    p.account = RandomAccount();
    p.market = kBenchMarket;
    p.side = side;
    p.type = loss ? (market ? OrderType::kStopLoss : OrderType::kStopLossLimit)
                  : (market ? OrderType::kTakeProfit : OrderType::kTakeProfitLimit);
    p.stp = engine::StpMode::kNone;
    p.qty = Qty{Lots()};
    // The stop lies beyond the last price on the side that has not met it.
    const bool rise = engine::TriggersOnRise(p.type, side);
    const int64_t ref = last_price_ != 0 ? last_price_ : spec_.center;
    const int64_t distance = rng_.Between(1, spec_.stop_ticks);
    int64_t stop = rise ? ref + distance : ref - distance;
    if (rng_.Chance(spec_.trailing_ppm)) {
      ++cs.trailing;
      p.trailing_delta = static_cast<int32_t>(rng_.Between(1, spec_.max_trailing_bps));
      if (!rng_.Chance(spec_.activation_ppm)) stop = 0;  // tracks from the last price
    }
    p.stop_price = Price{stop};
    if (market) {
      ++cs.stop_market;
      p.tif = TimeInForce::kIoc;
    } else {
      ++cs.stop_limit;
      // The limit: a few ticks beyond where the order should trigger.
      int64_t trigger = stop != 0 ? stop : ref;
      if (p.trailing_delta != 0) {
        const int64_t move = trigger * p.trailing_delta / 10'000;
        trigger += side == Side::kBuy ? move : -move;
      }
      const auto slip =
          static_cast<int64_t>(rng_.Below(static_cast<uint64_t>(spec_.limit_slip_ticks) + 1));
      p.price = Price{std::max<int64_t>(1, side == Side::kBuy ? trigger + slip : trigger - slip)};
      p.tif = rng_.Chance(spec_.limit_gtc_ppm) ? TimeInForce::kGtc : TimeInForce::kIoc;
    }
    Command c;
    c.timestamp_ns = NextTime();
    c.body = p;
    return c;
  }

  // An order closed (filled, canceled, expired): it leaves every list.
  void Forget(OrderId id) {
    Remove(id);
    waiting_.erase(Raw(id));
    iceberg_ids_.erase(Raw(id));
    resting_icebergs_.erase(Raw(id));
  }

  void Add(const OpenOrder& o) {
    auto [it, inserted] = pos_.try_emplace(Raw(o.id), open_.size());
    if (inserted) {
      open_.push_back(o);
    } else {
      open_[it->second] = o;
    }
  }

  void Remove(OrderId id) {
    auto it = pos_.find(Raw(id));
    if (it == pos_.end()) return;
    std::size_t i = it->second;
    pos_.erase(it);
    if (i + 1 != open_.size()) {
      open_[i] = open_.back();
      pos_[Raw(open_[i].id)] = i;
    }
    open_.pop_back();
  }

  // Runs one command through the shadow engine and mirrors its open orders.
  void Feed(const Command& c, MixStats* stats) {
    events_.clear();
    shadow_.Process(c, &events_);
    bool traded = false;
    uint64_t triggers = 0;
    ConditionalStats& cs = stats_.conditional;
    for (const Event& e : events_) {
      if (stats) ++stats->events_by_type[static_cast<std::size_t>(e.type())];
      switch (e.type()) {
        case engine::EventType::kRejected:
          ++stats_.rejected;
          break;
        case engine::EventType::kTrade: {
          const auto& t = std::get<engine::Trade>(e.body);
          traded = true;
          if (stats) {
            ++stats->trades;
            stats->filled_orders += t.maker_filled;
            stats->filled_orders += t.taker_filled;
          }
          if (t.maker_filled) Forget(t.maker_order_id);
          if (t.taker_filled) Forget(t.taker_order_id);
          last_price_ = t.price.value;
          break;
        }
        case engine::EventType::kOrderRested: {
          const auto& x = std::get<engine::OrderRested>(e.body);
          auto v = shadow_.FindOrder(x.order_id);
          // Gone by the end of the command: an order triggered after it
          // rested took it (its Trade follows).
          if (!v) break;
          const OpenOrder o{v->id, v->terms.account, v->terms.side, v->terms.price.value,
                            v->terms.qty.value};
          if (iceberg_ids_.count(Raw(o.id)) != 0) {
            // Icebergs are not amended: they stay out of the moves' and
            // cancels' draws, bounded by max_icebergs instead.
            resting_icebergs_.insert(Raw(o.id));
            iceberg_fifo_.push_back(o);
          } else {
            if (engine::IsConditional(v->terms.type)) ++cs.triggered_rested;
            Add(o);
          }
          break;
        }
        case engine::EventType::kOrderAmended: {
          const auto& x = std::get<engine::OrderAmended>(e.body);
          // Until it rests again the order is out of the book; OrderRested re-adds it.
          if (!x.keeps_priority) Remove(x.order_id);
          break;
        }
        case engine::EventType::kOrderCanceled: {
          const OrderId id = std::get<engine::OrderCanceled>(e.body).order_id;
          cs.canceled_waiting += waiting_.count(Raw(id));
          Forget(id);
          break;
        }
        case engine::EventType::kOrderExpired:
          Forget(std::get<engine::OrderExpired>(e.body).order_id);
          break;
        case engine::EventType::kOrderArmed: {
          const auto& x = std::get<engine::OrderArmed>(e.body);
          auto v = shadow_.FindOrder(x.order_id);
          MB_CHECK(v.has_value());
          uint8_t kind = engine::IsMarketLike(v->terms.type) ? kMarketStop : 0;
          if (x.trailing_delta != 0) kind |= kTrailingStop;
          waiting_.emplace(Raw(x.order_id), kind);
          waiting_fifo_.push_back(OpenOrder{x.order_id, x.account, x.side, 0, 0});
          break;
        }
        case engine::EventType::kOrderTriggered: {
          auto it = waiting_.find(Raw(std::get<engine::OrderTriggered>(e.body).order_id));
          MB_CHECK(it != waiting_.end());
          ++triggers;
          ++cs.triggered;
          ++((it->second & kMarketStop) ? cs.triggered_market : cs.triggered_limit);
          if (it->second & kTrailingStop) ++cs.triggered_trailing;
          waiting_.erase(it);
          break;
        }
        case engine::EventType::kIcebergAccepted:
          iceberg_ids_.insert(Raw(std::get<engine::IcebergAccepted>(e.body).order_id));
          break;
        case engine::EventType::kIcebergRefilled:
          ++cs.iceberg_refills;
          break;
        default:
          break;
      }
    }
    if (triggers != 0) {
      ++cs.trigger_commands;
      cs.max_triggers_per_command = std::max(cs.max_triggers_per_command, triggers);
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

  const MixSpec& spec_;
  Rng rng_;
  Engine shadow_;
  EventBuffer events_;
  int64_t now_ns_ = 0;
  std::vector<OpenOrder> open_;
  std::unordered_map<uint64_t, std::size_t> pos_;  // order id -> index in open_
  int64_t last_price_ = 0;                         // of the last trade; 0 before the first
  // Conditional orders waiting (id -> kind bits), and the same in the order
  // they were placed (entries that left are dropped when met).
  static constexpr uint8_t kMarketStop = 1;
  static constexpr uint8_t kTrailingStop = 2;
  std::unordered_map<uint64_t, uint8_t> waiting_;
  std::deque<OpenOrder> waiting_fifo_;
  // Icebergs accepted and still open; those resting, oldest first in
  // iceberg_fifo_ (entries that left are dropped when met).
  std::unordered_set<uint64_t> iceberg_ids_;
  std::unordered_set<uint64_t> resting_icebergs_;
  std::deque<OpenOrder> iceberg_fifo_;
  MixStats stats_;
  uint64_t fed_ = 0;  // commands fed to the shadow engine, setup included
};

}  // namespace

Workload GenerateExchangeCoreMix(const MixSpec& spec) { return MixGenerator(spec).Run(); }

}  // namespace mb::bench
