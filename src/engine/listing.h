// Markets and assets added at run time, as a reader of the journal learns
// them: the definitions an AssetAdded / MarketAdded event carries, and a
// configuration brought up to date with them. Every component that names
// markets by id (the gateway, the read side, the projection, the journal
// tools) keeps its configuration current this way, in journal order, so an
// event that names a market always finds it.
#pragma once

#include <span>
#include <string>

#include "common/status.h"
#include "engine/command.h"
#include "engine/event.h"
#include "engine/market.h"

namespace mb::engine {

// The definitions an event carries, as the configuration holds them (a
// market's derived fields not filled yet: ValidateNewMarket fills them).
AssetSpec SpecOf(const AssetAdded& a);
MarketSpec SpecOf(const MarketAdded& m);

// Appends the definition an AssetAdded or MarketAdded event carries when its
// id is the next one; an id already known (a reader that started from a
// configuration that holds it) changes nothing. Returns whether it appended.
// REQUIRES: the event is one the engine produced on this configuration's
// journal (its id is at most the configuration's size).
bool LearnListing(EngineConfig* config, const Event& event);
bool LearnListing(EngineConfig* config, const AssetAdded& asset);
bool LearnListing(EngineConfig* config, const MarketAdded& market);
void LearnListings(EngineConfig* config, std::span<const Event> events);

// Appends the assets and markets `grown` has beyond *config's (the same
// configuration grown further: the engine's after recovery).
void AdoptListings(EngineConfig* config, const EngineConfig& grown);

// A market as the configuration file and POST /admin/v1/markets define it:
// asset symbols, and sizes in display units ("0.01"), as decimal text.
struct MarketText {
  std::string symbol;
  std::string base;
  std::string quote;
  std::string tick_size;     // quote per whole base unit
  std::string step_size;     // base
  std::string min_qty;       // base, a multiple of step_size
  std::string max_qty;       // base, a multiple of step_size
  std::string max_price;     // quote, a multiple of tick_size
  std::string min_notional;  // quote
  int64_t maker_fee_bps = 0;
  int64_t taker_fee_bps = 0;
  MarketStatus status = MarketStatus::kTrading;
};

// The definition `text` gives, checked as the configuration file's
// [[markets]] entries are (ValidateNewMarket, derived fields filled) against
// `config`, where it would take the next id. The message names the field
// by its configuration name: "max_price: 100000.005 is not a multiple of
// tick_size 0.01".
Result<MarketSpec> MarketFromText(const EngineConfig& config, const MarketText& text);

// The commands that add them (REQUIRES: a symbol SymbolText holds: the
// checks above refuse a longer one).
AddAsset AddAssetOf(const AssetSpec& asset);
AddMarket AddMarketOf(const MarketSpec& market);

}  // namespace mb::engine
