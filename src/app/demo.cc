#include "app/demo.h"

#include <fmt/format.h>

#include <algorithm>
#include <latch>
#include <thread>

#include "app/format.h"
#include "common/decimal.h"
#include "engine/engine.h"
#include "exchange/exchange.h"

namespace mb::app {
namespace {

using engine::Command;
using engine::Engine;
using engine::EventBuffer;

class Session {
 public:
  Session(const engine::EngineConfig& config, std::string* out)
      : engine_(config), cfg_(engine_.config()), out_(out) {}

  Status Run() {
    const MarketId m{0};
    const auto& s = cfg_.markets[0];
    const int qs = cfg_.assets[Raw(s.quote)].scale;
    // Prices around 100 quote units per base and sizes of a few lots keep the
    // script valid for any sane market definition.
    auto ticks = [&](int64_t whole) { return Price{Pow10(qs) * whole / s.tick_units}; };
    // One "unit" of size: at least min_qty, and worth at least min_notional at 100.
    const int64_t lot_cost = std::max<int64_t>(1, ticks(100).value * s.notional_per_tick_lot);
    const int64_t unit =
        std::max(s.min_qty.value, (s.min_notional.value + lot_cost - 1) / lot_cost);
    auto lots = [&](int64_t n) { return Qty{unit * n}; };
    if (ticks(100).value < 10 || s.max_price < ticks(200)) {
      return InvalidArgument("demo needs the first market to price around 100 " +
                             cfg_.assets[Raw(s.quote)].symbol);
    }
    const AccountId alice{1}, bob{2};
    *out_ += fmt::format("Demo session on {} (accounts 1 = alice, 2 = bob, {} = fees)\n\n",
                         s.symbol, Raw(cfg_.fee_account));
    int64_t cash = Pow10(qs) * 1'000'000;
    int64_t coins = lots(1000).value * s.lot_units;
    Do(engine::Deposit{alice, s.quote, Amount{cash}, TransferRef::From("demo-alice-1")});
    Do(engine::Deposit{bob, s.base, Amount{coins}, TransferRef::From("demo-bob-1")});
    Do(engine::Deposit{bob, s.base, Amount{coins}, TransferRef::From("demo-bob-1")});  // repeat
    Place(bob, m, engine::Side::kSell, ticks(101), lots(5), "bob-ask-101");
    Place(bob, m, engine::Side::kSell, ticks(102), lots(5), "bob-ask-102");
    Place(alice, m, engine::Side::kBuy, ticks(99), lots(4), "alice-bid-99");
    // Crosses two levels with a limit of 103: fills below the limit, rests the rest.
    Place(alice, m, engine::Side::kBuy, ticks(103), lots(12), "alice-sweep");
    Do(engine::CancelOrder{alice, m, OrderId{0}, ClientOrderId::From("alice-sweep"), {}});
    Place(bob, m, engine::Side::kSell, ticks(100), lots(3), "bob-ask-100");
    engine::PlaceOrder buy{};
    buy.account = alice;
    buy.market = m;
    buy.side = engine::Side::kBuy;
    buy.type = engine::OrderType::kMarket;
    buy.quote_qty = Amount{lot_cost * lots(2).value + lot_cost / 2};  // leaves dust
    buy.client_order_id = ClientOrderId::From("alice-market");
    Do(buy);
    Do(engine::CancelOrder{bob, m, OrderId{4}, {}, {}});  // already filled: rejected

    *out_ += "\n" + FormatState(engine_);
    Status inv = engine_.CheckInvariants();
    *out_ += fmt::format("invariants: {}\n", inv.ok() ? "ok" : inv.message());
    MB_RETURN_IF_ERROR(inv);
    Engine replay(cfg_);
    for (const auto& e : journal_) replay.Apply(e);
    bool same = replay.StateHash() == engine_.StateHash();
    *out_ += fmt::format("replay of {} events through Apply(): state hash {:016x} ({})\n",
                         journal_.size(), replay.StateHash(), same ? "identical" : "DIFFERENT");
    if (!same) return Status(StatusCode::kInternal, "replay diverged from the live engine");
    return Status::Ok();
  }

 private:
  static int64_t Pow10(int n) {
    int64_t v = 1;
    while (n-- > 0) v *= 10;
    return v;
  }

  void Place(AccountId a, MarketId m, engine::Side side, Price p, Qty q, const char* cid) {
    engine::PlaceOrder o{};
    o.account = a;
    o.market = m;
    o.side = side;
    o.type = engine::OrderType::kLimit;
    o.tif = engine::TimeInForce::kGtc;
    o.price = p;
    o.qty = q;
    o.client_order_id = ClientOrderId::From(cid);
    Do(o);
  }

  template <class Body>
  void Do(const Body& body) {
    Command c{++clock_ns_, engine::CommandBody{body}};
    commands_.push_back(c);
    events_.clear();
    engine_.Process(c, &events_);
    for (const auto& e : events_) {
      *out_ += FormatEvent(cfg_, e) + "\n";
      journal_.push_back(e);
    }
  }

  Engine engine_;
  const engine::EngineConfig& cfg_;

 public:
  std::vector<Command> commands_;
  std::vector<engine::Event> journal_;

 private:
  std::string* out_;
  EventBuffer events_;
  int64_t clock_ns_ = 1'700'000'000'000'000'000;
};

}  // namespace

Status RunDemo(const engine::EngineConfig& config, std::string* out) {
  Session s(config, out);
  return s.Run();
}

namespace {
// Collects the durable events of each command, by tag.
class Waiter : public exchange::Completion {
 public:
  explicit Waiter(std::size_t n) : events_(n), left_(static_cast<std::ptrdiff_t>(n)) {}
  void OnDone(uint64_t tag, const exchange::Outcome& o) noexcept override {
    if (o.state == exchange::Outcome::State::kDurable) {
      events_[tag].assign(o.events.begin(), o.events.end());
    }
    left_.count_down();
  }
  void Wait() { left_.wait(); }
  std::vector<std::vector<engine::Event>> events_;

 private:
  std::latch left_;
};
}  // namespace

Status RunDemoThroughPipeline(const engine::EngineConfig& config, exchange::ExchangeOptions options,
                              std::string* out) {
  Session s(config, out);
  MB_RETURN_IF_ERROR(s.Run());
  options.engine = config;
  auto ex = exchange::Exchange::Open(std::move(options));
  if (!ex.ok()) return ex.status();
  if ((*ex)->recovery().recovered_seq != 0) {
    (void)(*ex)->Close();
    return InvalidArgument(
        fmt::format("the demo needs an empty data directory; this one is at sequence {}",
                    (*ex)->recovery().recovered_seq));
  }
  Waiter waiter(s.commands_.size());
  for (std::size_t i = 0; i < s.commands_.size(); ++i) {
    exchange::SubmitResult r;
    while ((r = (*ex)->Submit(s.commands_[i], &waiter, i)) == exchange::SubmitResult::kFull) {
      std::this_thread::yield();
    }
    if (r != exchange::SubmitResult::kOk) {
      return Unavailable(fmt::format("submit: {}", exchange::ToString(r)));
    }
  }
  waiter.Wait();
  MB_RETURN_IF_ERROR((*ex)->Close());
  std::size_t k = 0;
  for (const auto& per_command : waiter.events_) {
    for (const auto& e : per_command) {
      if (k >= s.journal_.size() || FormatEvent(config, e) != FormatEvent(config, s.journal_[k])) {
        return Status(StatusCode::kInternal,
                      fmt::format("the pipeline's event {} differs from the engine's", k));
      }
      ++k;
    }
  }
  if (k != s.journal_.size()) {
    return Status(StatusCode::kInternal, "the pipeline emitted fewer events than the engine");
  }
  *out += fmt::format(
      "pipeline: {} commands submitted through the exchange, {} events durable in the "
      "journal, identical to the engine's; state hash {:016x}\n",
      s.commands_.size(), k, (*ex)->ClosedStateHash());
  return Status::Ok();
}

}  // namespace mb::app
