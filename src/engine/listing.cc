#include "engine/listing.h"

#include <string_view>

#include "common/decimal.h"
#include "common/status.h"

namespace mb::engine {
namespace {

// What every form of a market's definition (MarketSpec, AddMarket,
// MarketAdded) holds besides its symbol.
template <class From, class To>
void CopyMarketTerms(const From& m, To* s) {
  s->base = m.base;
  s->quote = m.quote;
  s->tick_units = m.tick_units;
  s->lot_units = m.lot_units;
  s->min_qty = m.min_qty;
  s->max_qty = m.max_qty;
  s->max_price = m.max_price;
  s->min_notional = m.min_notional;
  s->maker_fee_bps = m.maker_fee_bps;
  s->taker_fee_bps = m.taker_fee_bps;
  s->status = m.status;
}

}  // namespace

AssetSpec SpecOf(const AssetAdded& a) {
  AssetSpec s;
  s.symbol = std::string(a.symbol.view());
  s.scale = a.scale;
  return s;
}

MarketSpec SpecOf(const MarketAdded& m) {
  MarketSpec s;
  s.symbol = std::string(m.symbol.view());
  CopyMarketTerms(m, &s);
  return s;
}

bool LearnListing(EngineConfig* config, const AssetAdded& a) {
  if (Raw(a.asset) < config->assets.size()) return false;
  MB_CHECK(Raw(a.asset) == config->assets.size());
  config->assets.push_back(SpecOf(a));
  return true;
}

bool LearnListing(EngineConfig* config, const MarketAdded& m) {
  if (Raw(m.market) < config->markets.size()) return false;
  MB_CHECK(Raw(m.market) == config->markets.size());
  MarketSpec spec = SpecOf(m);
  // The engine checked it before it added it; this fills the derived fields.
  MB_CHECK(ValidateNewMarket(*config, &spec).ok());
  config->markets.push_back(std::move(spec));
  return true;
}

bool LearnListing(EngineConfig* config, const Event& event) {
  if (const auto* a = std::get_if<AssetAdded>(&event.body)) return LearnListing(config, *a);
  if (const auto* m = std::get_if<MarketAdded>(&event.body)) return LearnListing(config, *m);
  return false;
}

void LearnListings(EngineConfig* config, std::span<const Event> events) {
  for (const Event& e : events) LearnListing(config, e);
}

namespace {

Result<int64_t> Units(std::string_view field, const std::string& text, const AssetSpec& asset) {
  auto v = ParseDecimal(text, asset.scale);
  if (!v.ok()) {
    return InvalidArgument(std::string(field) + ": \"" + text + "\" is not an amount of " +
                           asset.symbol + " (" + v.status().message() + ")");
  }
  return *v;
}

// A size counted in increments of `step` units (named step_name, written
// step_text): min_qty in steps, max_price in ticks.
Result<int64_t> Steps(std::string_view field, const std::string& text, const AssetSpec& asset,
                      int64_t step, std::string_view step_name, const std::string& step_text) {
  auto v = Units(field, text, asset);
  if (!v.ok()) return v.status();
  if (*v % step != 0) {
    return InvalidArgument(std::string(field) + ": " + text + " is not a multiple of " +
                           std::string(step_name) + " " + step_text);
  }
  return *v / step;
}

std::string FileTerms(std::string message) {
  for (const auto& [from, to] :
       {std::pair<std::string_view, std::string_view>{"tick_units", "tick_size"},
        {"notional_per_tick_lot", "step_size"},
        {"lot_units", "step_size"}}) {
    for (std::size_t at = message.find(from); at != std::string::npos; at = message.find(from)) {
      message.replace(at, from.size(), to);
    }
  }
  return message;
}

}  // namespace

Result<MarketSpec> MarketFromText(const EngineConfig& config, const MarketText& t) {
  MarketSpec m;
  m.symbol = t.symbol;
  const auto asset = [&](std::string_view field, const std::string& symbol,
                         AssetId* out) -> Status {
    std::string known;
    for (std::size_t i = 0; i < config.assets.size(); ++i) {
      if (config.assets[i].symbol == symbol) {
        *out = AssetId{static_cast<uint16_t>(i)};
        return Status::Ok();
      }
      known += (known.empty() ? "" : ", ") + config.assets[i].symbol;
    }
    return InvalidArgument(std::string(field) + ": unknown asset \"" + symbol +
                           "\" (defined: " + known + ")");
  };
  MB_RETURN_IF_ERROR(asset("base", t.base, &m.base));
  MB_RETURN_IF_ERROR(asset("quote", t.quote, &m.quote));
  const AssetSpec& base = config.assets[Raw(m.base)];
  const AssetSpec& quote = config.assets[Raw(m.quote)];
  auto tick = Units("tick_size", t.tick_size, quote);
  if (!tick.ok()) return tick.status();
  if (*tick <= 0) return InvalidArgument("tick_size: must be greater than 0");
  auto lot = Units("step_size", t.step_size, base);
  if (!lot.ok()) return lot.status();
  if (*lot <= 0) return InvalidArgument("step_size: must be greater than 0");
  m.tick_units = *tick;
  m.lot_units = *lot;
  auto min_qty = Steps("min_qty", t.min_qty, base, *lot, "step_size", t.step_size);
  if (!min_qty.ok()) return min_qty.status();
  auto max_qty = Steps("max_qty", t.max_qty, base, *lot, "step_size", t.step_size);
  if (!max_qty.ok()) return max_qty.status();
  auto max_price = Steps("max_price", t.max_price, quote, *tick, "tick_size", t.tick_size);
  if (!max_price.ok()) return max_price.status();
  auto min_notional = Units("min_notional", t.min_notional, quote);
  if (!min_notional.ok()) return min_notional.status();
  m.min_qty = Qty{*min_qty};
  m.max_qty = Qty{*max_qty};
  m.max_price = Price{*max_price};
  m.min_notional = Amount{*min_notional};
  for (const auto& [field, bps] :
       {std::pair<std::string_view, int64_t>{"maker_fee_bps", t.maker_fee_bps},
        {"taker_fee_bps", t.taker_fee_bps}}) {
    if (bps < INT32_MIN || bps > INT32_MAX) {
      return InvalidArgument(std::string(field) + ": " + std::to_string(bps) + " is out of range");
    }
  }
  m.maker_fee_bps = static_cast<int32_t>(t.maker_fee_bps);
  m.taker_fee_bps = static_cast<int32_t>(t.taker_fee_bps);
  m.status = t.status;
  if (Status s = ValidateNewMarket(config, &m); !s.ok()) {
    return Status(s.code(), FileTerms(s.message()));
  }
  return m;
}

AddAsset AddAssetOf(const AssetSpec& asset) {
  AddAsset a;
  MB_CHECK(a.symbol.Assign(asset.symbol));
  a.scale = asset.scale;
  return a;
}

AddMarket AddMarketOf(const MarketSpec& m) {
  AddMarket a;
  MB_CHECK(a.symbol.Assign(m.symbol));
  CopyMarketTerms(m, &a);
  return a;
}

void AdoptListings(EngineConfig* config, const EngineConfig& grown) {
  for (std::size_t i = config->assets.size(); i < grown.assets.size(); ++i) {
    config->assets.push_back(grown.assets[i]);
  }
  for (std::size_t i = config->markets.size(); i < grown.markets.size(); ++i) {
    config->markets.push_back(grown.markets[i]);
  }
}

}  // namespace mb::engine
