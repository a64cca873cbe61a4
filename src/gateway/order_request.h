// Signed trading requests turned into engine commands, with Binance's
// parameter rules and the symbol's filters checked before anything reaches
// the engine (the engine checks again; this only saves work and gives the
// client Binance's error for it).
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "engine/command.h"
#include "engine/market.h"
#include "gateway/api_error.h"
#include "gateway/binance_json.h"
#include "gateway/market_rules.h"
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

// POST /api/v3/order (and /order/test, the new order of cancelReplace, the
// WebSocket API's order.place): symbol, side (BUY|SELL), type (LIMIT,
// LIMIT_MAKER, MARKET, STOP_LOSS, STOP_LOSS_LIMIT, TAKE_PROFIT,
// TAKE_PROFIT_LIMIT; anything else -1116; a type the market's rules do not
// enable → -2010 "Stop loss orders are not supported for this symbol." and
// the like, once every parameter passed), timeInForce (GTC|IOC|FOK, required
// for LIMIT, STOP_LOSS_LIMIT and TAKE_PROFIT_LIMIT, refused for the others
// → -1106), quantity (required but for MARKET, which takes exactly one of
// quantity / quoteOrderQty; quoteOrderQty refused for every other type),
// price (required for LIMIT, LIMIT_MAKER and the *_LIMIT types, refused for
// MARKET, STOP_LOSS, TAKE_PROFIT), stopPrice and/or trailingDelta (one of
// them required for the four conditional types: -1102 "Param 'stopPrice' or
// 'trailingDelta' must be sent, but both were empty/null!"; either refused
// for the other types → -1106), icebergQty (→ -2010 "Iceberg orders are not
// supported for this symbol."), pegPriceType / pegOffsetType /
// pegOffsetValue (→ -2010 "Pegged orders are not supported for this
// symbol."), strategyId / strategyType (integers, read and not kept;
// strategyType below 1000000 → -1134), newClientOrderId
// (^[.A-Z:/a-z0-9_-]{1,36}$), newOrderRespType (ACK|RESULT|FULL; default
// FULL for MARKET and LIMIT, ACK for the others), selfTradePreventionMode
// (NONE, EXPIRE_TAKER, EXPIRE_MAKER, EXPIRE_BOTH). Decimal places beyond the
// asset's scale → -1111; price or stopPrice not a multiple of tickSize, zero
// or above the market's max → -1013 PRICE_FILTER; quantity not a multiple of
// stepSize or outside min/max qty → -1013 LOT_SIZE (MARKET_LOT_SIZE for
// MARKET, STOP_LOSS and TAKE_PROFIT); price x qty below min notional → -1013
// NOTIONAL; trailingDelta (basis points) outside the market's TRAILING_DELTA
// bounds for the order's direction → -1013 "Filter failure: TRAILING_DELTA".
// Binance ignores parameters an endpoint does not read; so do we. `rules`:
// the markets' MarketRules by MarketId (empty: the defaults).
std::optional<ApiError> ParseNewOrder(const Params& params, const engine::EngineConfig& config,
                                      AccountId account, NewOrder* out,
                                      std::span<const MarketRules> rules = {});

// An order list: the engine command, the answer's shape (Binance's default
// for lists: FULL) and the list client order id (generated when not sent;
// each order's client id too).
struct NewOrderList {
  engine::PlaceOrderList place;
  RespType resp = RespType::kFull;
  std::string list_client_order_id;
  std::size_t count = 0;  // orders in the list
};

// POST /api/v3/orderList/oco: symbol, side, quantity, listClientOrderId,
// aboveType / belowType (STOP_LOSS_LIMIT, STOP_LOSS, LIMIT_MAKER,
// TAKE_PROFIT, TAKE_PROFIT_LIMIT; else -1158 "Order type not supported in
// OCO."), above* / below* ClientOrderId, IcebergQty, Price, StopPrice,
// TrailingDelta, TimeInForce, newOrderRespType, selfTradePreventionMode.
// Each order is checked as POST /api/v3/order checks one (its errors name the
// list's parameters: 'abovePrice', ...); a type in the wrong place for the
// side (SELL: LIMIT_MAKER / TAKE_PROFIT* above, STOP_LOSS* below; BUY the
// other way round) or the above price (a LIMIT_MAKER's price, another's
// stopPrice) not above the below one: -2010 "The relationship of the prices
// for the orders is not correct."
std::optional<ApiError> ParseOcoList(const Params& params, const engine::EngineConfig& config,
                                     AccountId account, NewOrderList* out,
                                     std::span<const MarketRules> rules = {});
// POST /api/v3/orderList/oto: working* (Type LIMIT or LIMIT_MAKER, else
// -1158 "Order type not supported in OTO."; Side, Quantity, Price,
// TimeInForce, IcebergQty, ClientOrderId) and pending* (Type, Side,
// Quantity, Price, StopPrice, TrailingDelta, TimeInForce, IcebergQty,
// ClientOrderId).
std::optional<ApiError> ParseOtoList(const Params& params, const engine::EngineConfig& config,
                                     AccountId account, NewOrderList* out,
                                     std::span<const MarketRules> rules = {});
// POST /api/v3/orderList/otoco: working* as OTO's, pendingSide,
// pendingQuantity and the pending OCO pair pendingAbove* / pendingBelow* as
// OCO's above* / below*.
std::optional<ApiError> ParseOtocoList(const Params& params, const engine::EngineConfig& config,
                                       AccountId account, NewOrderList* out,
                                       std::span<const MarketRules> rules = {});
// DELETE /api/v3/orderList: symbol, orderListId or listClientOrderId
// (-1102 when neither).
std::optional<ApiError> ParseCancelList(const Params& params, const engine::EngineConfig& config,
                                        AccountId account, engine::CancelOrderList* out);

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
// run: quote notional for limit buys (LIMIT, LIMIT_MAKER, STOP_LOSS_LIMIT,
// TAKE_PROFIT_LIMIT), quote_qty for market buys by quote, base for sells,
// nothing for STOP_LOSS / TAKE_PROFIT buys (they lock when triggered); market
// buys by base quantity cannot be priced here (nullopt).
std::optional<Amount> RequiredLock(const engine::EngineConfig& config,
                                   const engine::PlaceOrder& order);

}  // namespace mb::gateway
