// Static definition of assets and markets, and the engine's sizing. Loaded
// from configuration (app/config), validated here so that every definition the
// engine runs with is consistent: prices in ticks times quantities in lots are
// always a whole number of quote units.
//
// Thread safety: immutable after Validate().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/append_only.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/types.h"

namespace mb::engine {

struct AssetSpec {
  std::string symbol;  // "BTC"
  int32_t scale = 8;   // decimal places of the smallest unit, 0..18
  // Transfers to other venues: read by the gateway (withdrawals,
  // /sapi/v1/capital/config/getall), never by the engine, so they are not
  // part of the configuration hash and may change between runs.
  int64_t withdraw_fee = 0;  // units, taken from each withdrawal
  int64_t withdraw_min = 0;  // units; a withdrawal must be at least this (and > fee)
  bool deposit_enabled = true;
  bool withdraw_enabled = true;
};

struct MarketSpec {
  std::string symbol;  // "BTCUSDT"
  AssetId base{};
  AssetId quote{};
  // Sizes in smallest units of the asset they are denominated in:
  int64_t tick_units = 0;  // price increment, in quote units per whole base unit
  int64_t lot_units = 0;   // quantity increment, in base units
  // Derived by Validate(): quote units of one tick x one lot. A price of p ticks
  // and a quantity of q lots have notional p * q * notional_per_tick_lot.
  int64_t notional_per_tick_lot = 0;
  Qty min_qty{1};
  Qty max_qty{0};
  Price max_price{0};
  Amount min_notional{0};  // quote units
  int32_t maker_fee_bps = 0;
  int32_t taker_fee_bps = 0;
  MarketStatus status = MarketStatus::kTrading;  // initial status
};

// The asset an order on `side` spends and locks: quote for buys, base for sells.
inline AssetId SpendAsset(const MarketSpec& m, Side side) noexcept {
  return side == Side::kBuy ? m.quote : m.base;
}

// What a client order id already in use means to a new order
// (docs/architecture.md, "The domain").
enum class ClientOrderIds : uint8_t {
  // Binance's rule: unique among the account's open orders. A new order with
  // the id of an open one is refused (kDuplicateClientOrderId); the id of a
  // closed order is free again at once.
  kBinance = 0,
  // Idempotent re-submission: the id also stays taken for the last
  // client_id_memory closed orders, and a re-submission is refused naming the
  // first order (Rejected.existing_id), which the gateway answers with.
  kIdempotent = 1,
};

struct EngineConfig {
  AppendOnlyVector<AssetSpec> assets;       // AssetId = index
  AppendOnlyVector<MarketSpec> markets;     // MarketId = index
  uint32_t max_accounts = 100'000;          // valid AccountIds are 0..max_accounts-1
  AccountId fee_account{0};                 // collects fees; may not trade
  uint32_t expected_open_orders = 1 << 16;  // pools are sized for this at start
  uint32_t client_id_memory = 1 << 16;      // closed orders whose client ids stay reserved
                                            // (kIdempotent only)
  // Part of the decision, so part of the configuration hash (when not the
  // default, so that configurations from before it keep their hash).
  ClientOrderIds client_order_ids = ClientOrderIds::kBinance;
  // Width, in ticks, of each book side's direct-indexed price window (a power of
  // two >= 64): levels within it are found in O(1), others in O(log n). Tuning
  // only: it changes no outcome, so it is not part of the configuration hash.
  uint32_t price_window_ticks = 1 << 13;

  // Checks every definition and fills the derived fields. The message names the
  // offending market or asset and field, e.g. "markets[1] (ETHUSDT).lot_size: ...".
  Status Validate();
};

// Checks of an asset or a market added to a valid configuration at run time
// (the AddAsset and AddMarket commands), the same as Validate() makes of the
// configuration file's entries, with the id it would take (the next one) in
// the message. ValidateNewMarket also fills *market's derived fields. A
// symbol longer than SymbolText holds is refused: it could not be journaled.
Status ValidateNewAsset(const EngineConfig& config, const AssetSpec& asset);
Status ValidateNewMarket(const EngineConfig& config, MarketSpec* market);

}  // namespace mb::engine
