// Human-readable rendering of engine events, balances and books with decimal
// prices and amounts (for the CLI, `journal dump` and logs).
//
// Thread safety: pure functions over an immutable configuration.
#pragma once

#include <string>

#include "engine/engine.h"
#include "engine/event.h"
#include "engine/market.h"

namespace mb::app {

// "12.34" style decimals in market terms.
std::string FormatPrice(const engine::EngineConfig& c, MarketId m, Price p);
std::string FormatQty(const engine::EngineConfig& c, MarketId m, Qty q);
std::string FormatAmount(const engine::EngineConfig& c, AssetId a, Amount v);

// One line: "#12 Trade BTCUSDT 0.5 @ 30000.00 maker=#3 (acct 1) taker=#12 (acct 2) ...".
std::string FormatEvent(const engine::EngineConfig& c, const engine::Event& e);

// A multi-line summary: markets with status and top of book, non-zero balances,
// open orders, sequence and state hash.
std::string FormatState(const engine::Engine& engine);

}  // namespace mb::app
