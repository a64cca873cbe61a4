// Seeded random command streams for tests that check a consumer of the
// engine's events against the engine itself.
//
// MixedConfig() is a small exchange: assets USDT, BTC, ETH; markets BTCUSDT
// and ETHUSDT; traders 1..8, fees to account 0, account 9 never trades.
// MixedCommands draws commands of every kind against an engine's current
// state; the same seed, fed back the same engine, gives the same stream on
// every platform (splitmix64 with explicit bounded draws).
//
// Thread safety: MixedCommands reads the engine it was given, so it runs on
// the thread that drives that engine; the rest are plain functions and values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/market.h"
#include "engine/types.h"

namespace mb::workload {

// The ids and times of MixedConfig() and MixedCommands.
namespace mixed {

inline constexpr AssetId kUsdt{0};
inline constexpr AssetId kBtc{1};
inline constexpr AssetId kEth{2};
inline constexpr std::size_t kAssets = 3;
// npt 1: p ticks x q lots cost p·q USDT units; a lot is 10^4 BTC units.
inline constexpr MarketId kBtcUsdt{0};
// npt 100; a lot is 10^6 ETH units.
inline constexpr MarketId kEthUsdt{1};
inline constexpr std::size_t kMarkets = 2;

inline constexpr AccountId kFee{0};
inline constexpr uint32_t kMaxAccounts = 10;  // traders 1..8; 9 never trades
inline constexpr uint32_t kTraders = 8;

inline constexpr int64_t kMs = 1'000'000;  // ns
inline constexpr int64_t kSec = 1'000 * kMs;
// 2024-01-01T00:00:00Z, a whole day (and hour, minute) since the epoch.
inline constexpr int64_t kDay0Ms = 1'704'067'200'000;
inline constexpr int64_t kDay0 = kDay0Ms * kMs;

}  // namespace mixed

// BTCUSDT: tick 0.01 USDT, lot 0.0001 BTC, maker 10 / taker 20 bps.
// ETHUSDT: tick 0.01 USDT, lot 0.01 ETH, maker 7 / taker 15 bps.
// Aborts with the reason if the configuration does not validate.
engine::EngineConfig MixedConfig();

// ---- single commands ------------------------------------------------------------

engine::Command Place(int64_t ts, AccountId a, MarketId m, engine::Side side,
                      engine::OrderType type, engine::TimeInForce tif, int64_t price, int64_t qty,
                      std::string_view cid = "", engine::StpMode stp = engine::StpMode::kNone,
                      int64_t quote_qty = 0);

// By order id, or by client order id when id is 0.
engine::Command Cancel(int64_t ts, AccountId a, MarketId m, OrderId id, std::string_view cid = "");

// price or qty 0 leaves that field alone.
engine::Command Amend(int64_t ts, AccountId a, MarketId m, OrderId id, int64_t price, int64_t qty);

// A deposit.
engine::Command Fund(int64_t ts, AccountId a, AssetId asset, int64_t amount, std::string_view ref);

// A withdrawal.
engine::Command Take(int64_t ts, AccountId a, AssetId asset, int64_t amount, std::string_view ref);

// ---- the stream -----------------------------------------------------------------

// Commands of every kind against the engine's current state: limit orders of
// all time-in-force values and post-only, market orders by quantity and by
// quote amount, self-trade prevention, client ids (some reused), cancels by id
// and client id, cancel-all, amends of price and quantity, deposits,
// withdrawals (some over the balance), market halts; ~10% are rejected.
// Timestamps start at mixed::kDay0 + 7 s and move 0..20 s per command.
//
// With MixedOptions::order_lists, also order lists (OCO, OTO, OTOCO, with
// stop, take-profit, trailing and iceberg orders among their orders) and
// list cancels by id and by list client id. Off by default: the streams
// drawn without it are the ones drawn before lists existed.
struct MixedOptions {
  bool order_lists = false;
};

class MixedCommands {
 public:
  // `engine` runs MixedConfig() and is fed every command drawn, in order;
  // it must outlive this object.
  MixedCommands(uint64_t seed, const engine::Engine* engine, MixedOptions options = {});

  // Deposits of every asset to every trader; run these first.
  std::vector<engine::Command> Funding();
  engine::Command Next();
  // A batch size, 1..8.
  std::size_t BatchSize();
  // The timestamp of the last command drawn.
  int64_t now_ns() const { return ts_; }

 private:
  // splitmix64: small, and the same stream on every platform.
  class Rng {
   public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t Next() {
      uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return z ^ (z >> 31);
    }
    uint64_t Below(uint64_t n) { return Next() % n; }
    int64_t Between(int64_t lo, int64_t hi) {
      return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo) + 1));
    }
    bool Percent(uint64_t p) { return Below(100) < p; }

   private:
    uint64_t s_;
  };

  engine::Command PlaceLimit(int64_t ts, AccountId a, MarketId m, int64_t center);
  engine::Command OrderList(int64_t ts, AccountId a, MarketId m, int64_t center);
  // An OCO pair on `side` around [low, high]: [0] above high, [1] below low.
  void OcoPair(engine::Side side, int64_t low, int64_t high, int64_t qty, AccountId a,
               engine::ListOrder* above, engine::ListOrder* below);
  int64_t Tick();
  engine::StpMode Stp();
  std::string Cid(AccountId a);
  std::vector<engine::OrderView> OpenOf(AccountId a, MarketId m) const;

  Rng rng_;
  const engine::Engine* engine_;
  MixedOptions options_;
  // Lists placed, per account: (market, list id, list client order id).
  struct PlacedList {
    MarketId market{};
    uint64_t id = 0;
    std::string client_id;
  };
  std::vector<PlacedList> lists_[mixed::kMaxAccounts];
  int64_t ts_ = mixed::kDay0 + 7 * mixed::kSec;
  uint64_t next_cid_ = 0;
  uint64_t next_ref_ = 0;
  std::vector<std::string> cids_[mixed::kMaxAccounts];  // client ids used, per account
};

}  // namespace mb::workload
