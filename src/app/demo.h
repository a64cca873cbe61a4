// `matchbook demo`: a short scripted trading session on the first market of a
// configuration — deposits, a resting book, a crossing buy with price
// improvement, fees, a cancel and a market buy by quote amount — printed event
// by event, followed by the final state, an invariant check and a replay check.
// It shows a newcomer what the engine does with real rules and numbers.
//
// Thread safety: runs on the calling thread; owns its engine.
#pragma once

#include <string>

#include "common/status.h"
#include "engine/market.h"
#include "exchange/exchange.h"

namespace mb::app {

// Appends the session's transcript to *out. Fails when the configuration's
// first market cannot hold the demo's orders, or an invariant breaks.
Status RunDemo(const engine::EngineConfig& config, std::string* out);

// The same session, then its commands submitted through the full pipeline
// (ring, engine thread, journal) into options.data_dir, which must hold no
// journal yet; checks that the durable events equal the engine's.
Status RunDemoThroughPipeline(const engine::EngineConfig& config, exchange::ExchangeOptions options,
                              std::string* out);

}  // namespace mb::app
