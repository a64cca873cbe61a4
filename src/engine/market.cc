#include "engine/market.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "common/checked.h"
#include "common/fixed_string.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/types.h"

namespace mb::engine {
namespace {

// Ids are uint16: 65535 stays free as a sentinel for tools and codecs.
constexpr std::size_t kMaxIds = 65534;
constexpr int32_t kMaxScale = 18;
constexpr int32_t kMaxFeeBps = 10'000;
constexpr uint32_t kMaxAccounts = uint32_t{1} << 31;  // exclusive

std::string AssetField(std::size_t i, const AssetSpec& a, const char* field) {
  return "assets[" + std::to_string(i) + "] (" + a.symbol + ")." + field + ": ";
}

std::string MarketField(std::size_t i, const MarketSpec& m, const char* field) {
  return "markets[" + std::to_string(i) + "] (" + m.symbol + ")." + field + ": ";
}

bool IsUpperAlnum(std::string_view s) {
  for (char c : s) {
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

int64_t Pow10(int32_t e) {
  int64_t p = 1;
  for (int32_t k = 0; k < e; ++k) p *= 10;
  return p;
}

Status ValidateAssets(const AppendOnlyVector<AssetSpec>& assets) {
  if (assets.empty()) return InvalidArgument("assets: at least one asset is required");
  if (assets.size() > kMaxIds) {
    return InvalidArgument("assets: " + std::to_string(assets.size()) +
                           " assets do not fit AssetId (at most " + std::to_string(kMaxIds) + ")");
  }
  std::unordered_map<std::string_view, std::size_t> seen;
  for (std::size_t i = 0; i < assets.size(); ++i) {
    const AssetSpec& a = assets[i];
    if (a.symbol.empty()) return InvalidArgument(AssetField(i, a, "symbol") + "must not be empty");
    if (!IsUpperAlnum(a.symbol)) {
      return InvalidArgument(AssetField(i, a, "symbol") +
                             "must be uppercase letters and digits (A-Z, 0-9)");
    }
    if (auto [it, inserted] = seen.emplace(a.symbol, i); !inserted) {
      return InvalidArgument(AssetField(i, a, "symbol") + "duplicate of assets[" +
                             std::to_string(it->second) + "]");
    }
    if (a.scale < 0 || a.scale > kMaxScale) {
      return InvalidArgument(AssetField(i, a, "scale") + std::to_string(a.scale) +
                             " is outside 0.." + std::to_string(kMaxScale));
    }
  }
  return Status::Ok();
}

// REQUIRES: assets are valid.
Status ValidateMarket(std::size_t i, MarketSpec& m, const AppendOnlyVector<AssetSpec>& assets) {
  auto asset_ok = [&](AssetId id) { return static_cast<std::size_t>(Raw(id)) < assets.size(); };
  if (!asset_ok(m.base)) {
    return InvalidArgument(MarketField(i, m, "base") + "asset id " + std::to_string(Raw(m.base)) +
                           " does not exist (" + std::to_string(assets.size()) + " assets)");
  }
  if (!asset_ok(m.quote)) {
    return InvalidArgument(MarketField(i, m, "quote") + "asset id " + std::to_string(Raw(m.quote)) +
                           " does not exist (" + std::to_string(assets.size()) + " assets)");
  }
  const AssetSpec& base = assets[Raw(m.base)];
  if (m.base == m.quote) {
    return InvalidArgument(MarketField(i, m, "quote") + "same asset as base (" + base.symbol + ")");
  }
  if (m.tick_units <= 0) {
    return InvalidArgument(MarketField(i, m, "tick_units") + "must be positive, got " +
                           std::to_string(m.tick_units));
  }
  if (m.lot_units <= 0) {
    return InvalidArgument(MarketField(i, m, "lot_units") + "must be positive, got " +
                           std::to_string(m.lot_units));
  }

  // One tick x one lot in quote units; both factors are < 2^63, so the product
  // is exact in 128 bits.
  const int128 tick_lot = static_cast<int128>(m.tick_units) * m.lot_units;
  const int64_t base_unit = Pow10(base.scale);
  const std::string terms = "(tick_units " + std::to_string(m.tick_units) + " × lot_units " +
                            std::to_string(m.lot_units) + " / 10^" + std::to_string(base.scale) +
                            ", " + base.symbol + "'s scale)";
  if (tick_lot % base_unit != 0) {
    return InvalidArgument(MarketField(i, m, "lot_units") +
                           "tick × lot is not a whole number of quote units " + terms);
  }
  const int128 npt = tick_lot / base_unit;
  if (!FitsInt64(npt)) {
    return InvalidArgument(MarketField(i, m, "lot_units") +
                           "tick × lot does not fit in int64 quote units " + terms);
  }
  m.notional_per_tick_lot = static_cast<int64_t>(npt);

  if (m.min_qty.value < 1) {
    return InvalidArgument(MarketField(i, m, "min_qty") + "must be at least 1 lot, got " +
                           std::to_string(m.min_qty.value));
  }
  if (m.max_qty < m.min_qty) {
    return InvalidArgument(MarketField(i, m, "max_qty") + std::to_string(m.max_qty.value) +
                           " lots is below min_qty " + std::to_string(m.min_qty.value) + " lots");
  }
  if (m.max_price.value < 1) {
    return InvalidArgument(MarketField(i, m, "max_price") + "must be at least 1 tick, got " +
                           std::to_string(m.max_price.value));
  }
  // The largest order's notional and base quantity must be representable, so
  // that no order within the limits can overflow.
  int64_t product = 0;
  if (!CheckedMul3(m.max_price.value, m.max_qty.value, m.notional_per_tick_lot, &product)) {
    return InvalidArgument(MarketField(i, m, "max_price") + "max_price " +
                           std::to_string(m.max_price.value) + " ticks × max_qty " +
                           std::to_string(m.max_qty.value) + " lots × " +
                           std::to_string(m.notional_per_tick_lot) +
                           " quote units per tick-lot does not fit in int64; lower max_price "
                           "or max_qty");
  }
  if (!CheckedMul3(m.max_qty.value, m.lot_units, 1, &product)) {
    return InvalidArgument(MarketField(i, m, "max_qty") + "max_qty " +
                           std::to_string(m.max_qty.value) + " lots × lot_units " +
                           std::to_string(m.lot_units) + " does not fit in int64 base units");
  }
  if (m.min_notional.value < 0) {
    return InvalidArgument(MarketField(i, m, "min_notional") + "must not be negative, got " +
                           std::to_string(m.min_notional.value));
  }
  if (m.maker_fee_bps < 0 || m.maker_fee_bps > kMaxFeeBps) {
    return InvalidArgument(MarketField(i, m, "maker_fee_bps") + std::to_string(m.maker_fee_bps) +
                           " is outside 0..10000 bps");
  }
  if (m.taker_fee_bps < 0 || m.taker_fee_bps > kMaxFeeBps) {
    return InvalidArgument(MarketField(i, m, "taker_fee_bps") + std::to_string(m.taker_fee_bps) +
                           " is outside 0..10000 bps");
  }
  switch (m.status) {
    case MarketStatus::kTrading:
    case MarketStatus::kHalted:
    case MarketStatus::kCancelOnly:
      break;
    default:
      return InvalidArgument(MarketField(i, m, "status") + "invalid value " +
                             std::to_string(static_cast<int>(Raw(m.status))));
  }
  return Status::Ok();
}

// The symbol rules of one more entry of `list` (assets or markets), whose
// message starts with `field`.
template <class Spec>
Status ValidateNewSymbol(const AppendOnlyVector<Spec>& list, const std::string& symbol,
                         const std::string& field) {
  if (list.size() >= kMaxIds) {
    return InvalidArgument(field + "no id left (at most " + std::to_string(kMaxIds) + ")");
  }
  if (symbol.empty()) return InvalidArgument(field + "must not be empty");
  if (symbol.size() > SymbolText::kCapacity) {
    return InvalidArgument(field + "longer than " + std::to_string(SymbolText::kCapacity) +
                           " characters");
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i].symbol == symbol) {
      return InvalidArgument(field + "duplicate of " +
                             (std::is_same_v<Spec, AssetSpec> ? "assets[" : "markets[") +
                             std::to_string(i) + "]");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateNewAsset(const EngineConfig& config, const AssetSpec& asset) {
  const std::size_t i = config.assets.size();
  MB_RETURN_IF_ERROR(
      ValidateNewSymbol(config.assets, asset.symbol, AssetField(i, asset, "symbol")));
  if (!IsUpperAlnum(asset.symbol)) {
    return InvalidArgument(AssetField(i, asset, "symbol") +
                           "must be uppercase letters and digits (A-Z, 0-9)");
  }
  if (asset.scale < 0 || asset.scale > kMaxScale) {
    return InvalidArgument(AssetField(i, asset, "scale") + std::to_string(asset.scale) +
                           " is outside 0.." + std::to_string(kMaxScale));
  }
  return Status::Ok();
}

Status ValidateNewMarket(const EngineConfig& config, MarketSpec* market) {
  const std::size_t i = config.markets.size();
  MB_RETURN_IF_ERROR(
      ValidateNewSymbol(config.markets, market->symbol, MarketField(i, *market, "symbol")));
  return ValidateMarket(i, *market, config.assets);
}

Status EngineConfig::Validate() {
  MB_RETURN_IF_ERROR(ValidateAssets(assets));

  if (markets.empty()) return InvalidArgument("markets: at least one market is required");
  if (markets.size() > kMaxIds) {
    return InvalidArgument("markets: " + std::to_string(markets.size()) +
                           " markets do not fit MarketId (at most " + std::to_string(kMaxIds) +
                           ")");
  }
  std::unordered_map<std::string_view, std::size_t> seen;
  for (std::size_t i = 0; i < markets.size(); ++i) {
    MarketSpec& m = markets[i];
    if (m.symbol.empty()) {
      return InvalidArgument(MarketField(i, m, "symbol") + "must not be empty");
    }
    if (auto [it, inserted] = seen.emplace(m.symbol, i); !inserted) {
      return InvalidArgument(MarketField(i, m, "symbol") + "duplicate of markets[" +
                             std::to_string(it->second) + "]");
    }
    MB_RETURN_IF_ERROR(ValidateMarket(i, m, assets));
  }

  if (max_accounts < 2) {
    return InvalidArgument("max_accounts: must be at least 2 (the fee account and a trader), got " +
                           std::to_string(max_accounts));
  }
  if (max_accounts >= kMaxAccounts) {
    return InvalidArgument("max_accounts: must be below 2^31, got " + std::to_string(max_accounts));
  }
  if (Raw(fee_account) >= max_accounts) {
    return InvalidArgument("fee_account: " + std::to_string(Raw(fee_account)) +
                           " is not below max_accounts " + std::to_string(max_accounts));
  }
  if (expected_open_orders < 1) {
    return InvalidArgument("expected_open_orders: must be at least 1, got 0");
  }
  if (client_id_memory < 1) {
    return InvalidArgument("client_id_memory: must be at least 1, got 0");
  }
  if (client_order_ids != ClientOrderIds::kBinance &&
      client_order_ids != ClientOrderIds::kIdempotent) {
    return InvalidArgument("client_order_ids: unknown rule " +
                           std::to_string(static_cast<int>(client_order_ids)));
  }
  if (price_window_ticks < 64 || (price_window_ticks & (price_window_ticks - 1)) != 0) {
    return InvalidArgument("price_window_ticks: must be a power of two >= 64, got " +
                           std::to_string(price_window_ticks));
  }
  return Status::Ok();
}

}  // namespace mb::engine
