// Signed trading requests turned into engine commands, with Binance's
// parameter rules and the symbol's filters checked before anything reaches
// the engine (the engine checks again; this only saves work and gives the
// client Binance's error for it).
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include "engine/command.h"
#include "engine/market.h"
#include "gateway/api_error.h"
#include "gateway/binance_json.h"
#include "gateway/params.h"

namespace mb::gateway {

// The market named by `symbol` (case-sensitive, as Binance): -1121 when unknown.
std::optional<ApiError> FindMarket(const engine::EngineConfig& config, std::string_view symbol,
                                   MarketId* out);

struct NewOrder {
  engine::PlaceOrder place;
  RespType resp = RespType::kFull;  // Binance default: FULL for MARKET and LIMIT
  std::string client_order_id;      // as given (empty: the gateway assigns one)
};

// POST /api/v3/order (and /order/test): symbol, side (BUY|SELL), type (LIMIT,
// LIMIT_MAKER, MARKET; STOP_LOSS, STOP_LOSS_LIMIT, TAKE_PROFIT,
// TAKE_PROFIT_LIMIT → -2010 "... orders are not supported for this symbol.";
// anything else -1116), icebergQty (→ -2010 "Iceberg orders are not supported
// for this symbol."), strategyId / strategyType (integers, read and not kept;
// strategyType below 1000000 → -1134), timeInForce (GTC|IOC|FOK, required for LIMIT, refused
// for others → -1106), quantity / quoteOrderQty (MARKET: exactly one),
// price (LIMIT, LIMIT_MAKER), newClientOrderId (^[.A-Z:/a-z0-9_-]{1,36}$),
// newOrderRespType (ACK|RESULT|FULL), selfTradePreventionMode (NONE,
// EXPIRE_TAKER, EXPIRE_MAKER, EXPIRE_BOTH). Decimal places beyond the asset's
// scale → -1111; not a multiple of tickSize → -1013 PRICE_FILTER; of stepSize
// or outside min/max qty → -1013 LOT_SIZE (MARKET_LOT_SIZE for market); price
// above the market's max → PRICE_FILTER; price x qty below min notional
// → -1013 NOTIONAL. Parameters the endpoint does not read → -1104? No:
// Binance ignores unknown parameters; so do we.
std::optional<ApiError> ParseNewOrder(const Params& params, const engine::EngineConfig& config,
                                      AccountId account, NewOrder* out);

// DELETE /api/v3/order: symbol + orderId and/or origClientOrderId (-1102 when
// neither), cancelRestrictions (ONLY_NEW, ONLY_PARTIALLY_FILLED; -1145
// otherwise).
std::optional<ApiError> ParseCancel(const Params& params, const engine::EngineConfig& config,
                                    AccountId account, engine::CancelOrder* out);
// The order a cancel names, by the parameters `id_param` and/or
// `client_id_param` (DELETE's orderId / origClientOrderId, cancelReplace's
// cancelOrderId / cancelOrigClientOrderId), and its cancelRestrictions, into
// *c (account and market left as they are).
std::optional<ApiError> ParseCancelTarget(const Params& params, std::string_view id_param,
                                          std::string_view client_id_param, engine::CancelOrder* c);

// The client order id a cancel gets (Binance gives each cancel its own): the
// parameter `param` (DELETE's newClientOrderId, cancelReplace's
// cancelNewClientOrderId) when sent, checked as newClientOrderId is (-1100),
// else a generated one.
std::optional<ApiError> CancelClientId(const Params& params, std::string_view param,
                                       std::string* out);
// A generated client order id: "mb-" and 22 random characters.
std::string NewClientId();

// The lock the order needs (what the engine will lock), for the balance dry
// run: quote notional for limit buys, quote_qty for market buys by quote,
// base for sells; market buys by base quantity cannot be priced here (nullopt).
std::optional<Amount> RequiredLock(const engine::EngineConfig& config,
                                   const engine::PlaceOrder& order);

}  // namespace mb::gateway
