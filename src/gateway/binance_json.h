// The Binance JSON shapes: REST bodies and stream/user-data events, built from
// the read side's records and the engine's configuration. Numbers that are
// prices, quantities or amounts are decimal strings with the asset's scale
// ("0.01000000"); ids and times (ms) are JSON numbers. Never a "code" key in
// a success body.
//
// Thread safety: pure functions over immutable inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/event.h"
#include "engine/market.h"
#include "gateway/market_rules.h"
#include "marketdata/read_side.h"

namespace mb::gateway {

// Formats one market's numbers.
class MarketFormat {
 public:
  MarketFormat(const engine::EngineConfig& config, MarketId market);
  std::string Price(mb::Price p) const;  // ticks → quote decimal
  std::string Qty(mb::Qty q) const;      // lots → base decimal
  std::string Base(Amount a) const;      // base units
  std::string Quote(Amount a) const;     // quote units
  const engine::MarketSpec& spec() const noexcept { return *spec_; }
  int base_scale() const noexcept { return base_scale_; }
  int quote_scale() const noexcept { return quote_scale_; }

 private:
  const engine::MarketSpec* spec_;
  int base_scale_ = 8;
  int quote_scale_ = 8;
};

std::string AssetAmount(const engine::EngineConfig& config, AssetId asset, Amount a);

// Binance's symbolStatus names: TRADING, HALT (halted), BREAK (cancel-only);
// nullopt for anything else (case-sensitive, as Binance).
std::optional<engine::MarketStatus> ParseSymbolStatus(std::string_view s) noexcept;

// One entry of exchangeInfo's rateLimits: a limit the server enforces.
struct RateLimitJson {
  std::string_view type;      // REQUEST_WEIGHT, ORDERS, RAW_REQUESTS
  std::string_view interval;  // SECOND, MINUTE, DAY
  int interval_num = 1;
  uint64_t limit = 0;
};

// GET /api/v3/exchangeInfo: timezone, serverTime, rateLimits (as given),
// the symbols of `markets` (in that order) with status (TRADING / HALT /
// BREAK), baseAsset(Precision), quoteAsset(Precision), orderTypes (the
// market's rules' types of LIMIT, LIMIT_MAKER, MARKET, STOP_LOSS,
// STOP_LOSS_LIMIT, TAKE_PROFIT, TAKE_PROFIT_LIMIT), the feature flags
// (icebergAllowed, ocoAllowed, otoAllowed, opoAllowed,
// quoteOrderQtyMarketAllowed, allowTrailingStop (any conditional type),
// cancelReplaceAllowed, amendAllowed, pegInstructionsAllowed false, ...),
// permissions, permissionSets ([] when !show_permission_sets),
// defaultSelfTradePreventionMode, allowedSelfTradePreventionModes, filters
// PRICE_FILTER / LOT_SIZE / MARKET_LOT_SIZE / NOTIONAL / MIN_NOTIONAL /
// TRAILING_DELTA / MAX_NUM_ALGO_ORDERS. statuses and rules by MarketId (a
// market without rules: MarketRules' defaults); server_time in the unit the
// client asked for.
std::string ExchangeInfoJson(const engine::EngineConfig& config,
                             std::span<const engine::MarketStatus> statuses, int64_t server_time,
                             std::span<const RateLimitJson> rate_limits,
                             std::span<const MarketId> markets, bool show_permission_sets = true,
                             std::span<const MarketRules> rules = {});

// {"lastUpdateId":N,"bids":[["p","q"],...],"asks":[...]}
std::string DepthJson(const engine::EngineConfig& config, const marketdata::MarketSnapshot& s,
                      std::size_t limit);
// [{id,price,qty,quoteQty,time,isBuyerMaker,isBestMatch}]
std::string TradesJson(const engine::EngineConfig& config, std::span<const marketdata::TradeRow> t);
// [{a,p,q,f,l,T,m,M}]
std::string AggTradesJson(const engine::EngineConfig& config,
                          std::span<const marketdata::AggTrade> t);
// [[openTime,"o","h","l","c","v",closeTime,"quoteVolume",trades,"takerBuyBase","takerBuyQuote","0"]]
// closeTime is the next candle's open time - 1 in the zone (months differ in length).
std::string KlinesJson(const engine::EngineConfig& config, MarketId market,
                       marketdata::KlineInterval interval, std::span<const marketdata::Kline> k,
                       int32_t zone_min = 0);
// One object each (the caller wraps several in [...]).
// GET /ticker/24hr: type FULL (mini = false) or MINI (symbol, openPrice,
// highPrice, lowPrice, lastPrice, volume, quoteVolume, openTime, closeTime,
// firstId, lastId, count).
std::string Ticker24hJson(const engine::EngineConfig& config, const marketdata::MarketSnapshot& s,
                          int64_t now_ms, bool mini = false);
// GET /ticker (rolling window) and /ticker/tradingDay, from statistics `t` of
// market s: FULL symbol, priceChange, priceChangePercent, weightedAvgPrice,
// openPrice, highPrice, lowPrice, lastPrice, volume, quoteVolume, openTime,
// closeTime, firstId, lastId, count; MINI without the first three and
// weightedAvgPrice.
std::string WindowTickerJson(const engine::EngineConfig& config, MarketId market,
                             const marketdata::Ticker24h& t, bool mini);
// GET /avgPrice: {mins, price, closeTime (the last trade's time)}.
std::string AvgPriceJson(const engine::EngineConfig& config, const marketdata::MarketSnapshot& s,
                         int64_t now_ms);
std::string PriceTickerJson(const engine::EngineConfig& config,
                            const marketdata::MarketSnapshot& s);
std::string BookTickerJson(const engine::EngineConfig& config, const marketdata::MarketSnapshot& s);

// Order objects. Query shape (GET /order, openOrders, allOrders): symbol,
// orderId, orderListId -1, clientOrderId, price, origQty, executedQty,
// cummulativeQuoteQty, status, timeInForce, type, side, stopPrice ("0.00..."
// but for a conditional order), icebergQty, time, updateTime, isWorking,
// workingTime (-1 while a conditional order waits for its trigger, then the
// trigger time), origQuoteOrderQty, selfTradePreventionMode; a trailing stop
// adds trailingDelta and trailingTime (when it began tracking the price, -1
// before); an EXPIRED order adds expiryReason (UNFILLED_IOC_QUANTITY_EXPIRED,
// UNFILLED_FOK_ORDER_EXPIRED, INSUFFICIENT_LIQUIDITY, REJECTED: a triggered
// stop-market buy that could not lock its cost) or, expired by self-trade
// prevention, preventedQuantity.
std::string OrderJson(const engine::EngineConfig& config, const marketdata::OrderRecord& o);
// POST /order answers: ACK {symbol,orderId,orderListId,clientOrderId,transactTime};
// RESULT adds price..selfTradePreventionMode (+workingTime, a conditional
// order's stopPrice, a trailing stop's trailingDelta and trailingTime, and
// expired: expiryReason or preventedQuantity as OrderJson); FULL adds fills
// [{price,qty,commission,commissionAsset,tradeId}].
enum class RespType : uint8_t { kAck, kResult, kFull };
std::string NewOrderJson(const engine::EngineConfig& config, const marketdata::OrderRecord& o,
                         std::span<const marketdata::Fill> fills, RespType type,
                         int64_t transact_ms);
// DELETE /order answer: symbol, origClientOrderId (the order's), orderId,
// orderListId, clientOrderId (the cancel's own: cancel_client_id),
// transactTime, price, origQty, executedQty, cummulativeQuoteQty, status,
// timeInForce, type, side, selfTradePreventionMode (and a conditional order's
// stopPrice, a trailing stop's trailingDelta and trailingTime).
std::string CanceledOrderJson(const engine::EngineConfig& config, const marketdata::OrderRecord& o,
                              std::string_view cancel_client_id, int64_t transact_ms);
// PUT /order/amend/keepPriority answer: {transactTime, executionId,
// amendedOrder: {symbol, orderId, orderListId, origClientOrderId,
// clientOrderId, price, qty, executedQty, preventedQty, quoteOrderQty,
// cumulativeQuoteQty, status, timeInForce, type, side, workingTime (while on
// the book), selfTradePreventionMode}}. orig_client_id: the order's client id
// before the amend.
std::string AmendedOrderJson(const engine::EngineConfig& config, const marketdata::OrderRecord& o,
                             std::string_view orig_client_id, int64_t transact_ms,
                             uint64_t execution_id);
// [{symbol,id,orderId,orderListId,price,qty,quoteQty,commission,commissionAsset,time,isBuyer,isMaker,isBestMatch}]
// An order list (Binance's orderList answers): orderListId,
// contingencyType (OCO, or OTO for OTO and OTOCO), listStatusType
// (EXEC_STARTED / ALL_DONE), listOrderStatus (EXECUTING / ALL_DONE),
// listClientOrderId, transactionTime, symbol, orders [{symbol, orderId,
// clientOrderId}] and, with_reports, orderReports (the JSON objects given).
std::string OrderListJson(const engine::EngineConfig& config, const marketdata::ListRecord& l,
                          std::span<const std::string> order_reports, int64_t transaction_ms,
                          bool with_reports);
std::string MyTradesJson(const engine::EngineConfig& config, std::span<const marketdata::Fill> f);
// GET /account: makerCommission, takerCommission, buyerCommission,
// sellerCommission, commissionRates, canTrade, canWithdraw, canDeposit,
// brokered, requireSelfTradePrevention, preventSor, updateTime, accountType
// "SPOT", balances [{asset,free,locked}] (every asset), permissions ["SPOT"], uid.
std::string AccountJson(const engine::EngineConfig& config, AccountId account,
                        std::span<const marketdata::BalanceRow> balances, int64_t update_ms);

// --- stream payloads (the "data" object) ---
//
// Binance's timeUnit of a market stream connection (`?timeUnit=MICROSECOND`):
// every time field of an event (E, T, kline t/T, ticker O/C) in ms, the
// default, or in µs. Event times come in ns since the epoch (the engine's
// CLOCK_REALTIME stamps, or the publisher's clock), so µs values of engine
// times are exact; times the read side keeps in ms (candle and 24 h window
// bounds) are scaled.
enum class TimeUnit : uint8_t { kMillisecond, kMicrosecond };
inline constexpr std::size_t kTimeUnits = 2;
// "MILLISECOND" or "MICROSECOND" in any letter case; nullopt otherwise.
std::optional<TimeUnit> ParseTimeUnit(std::string_view s) noexcept;
// A REST body with its times in µs, for a client that sent
// X-MBX-TIME-UNIT: MICROSECOND: the integer values of the keys Binance
// documents as times (serverTime, time, updateTime, transactTime,
// workingTime, openTime, closeTime, T) and the open/close times of kline rows
// (arrays of 12 whose [0] and [6] are integers), at any depth, x 1000. Not
// JSON: returned unchanged.
std::string TimesInMicros(std::string_view body);
// ns since the epoch in `unit`, truncated.
int64_t NsIn(int64_t ns, TimeUnit unit) noexcept;
// ms since the epoch in `unit`.
int64_t MsIn(int64_t ms, TimeUnit unit) noexcept;

// {e:"depthUpdate",E,s,U,u,b,a}
std::string DepthUpdateJson(const engine::EngineConfig& config, const marketdata::DepthDiff& d,
                            int64_t event_ns, TimeUnit unit);
// Partial book stream <symbol>@depth<N>: {lastUpdateId,bids,asks}.
std::string PartialDepthJson(const engine::EngineConfig& config,
                             const marketdata::MarketSnapshot& s, std::size_t levels);
// {e:"trade",E,s,t,p,q,T,m,M}
std::string TradeEventJson(const engine::EngineConfig& config, const marketdata::TradeRow& t,
                           int64_t event_ns, TimeUnit unit);
// {e:"aggTrade",E,s,a,p,q,f,l,T,m,M}
std::string AggTradeEventJson(const engine::EngineConfig& config, const marketdata::AggTrade& t,
                              int64_t event_ns, TimeUnit unit);
// 24hrTicker over the 24 h before the event time.
std::string TickerEventJson(const engine::EngineConfig& config, const marketdata::MarketSnapshot& s,
                            int64_t event_ns, TimeUnit unit);
// 24hrMiniTicker over the 24 h before the event time.
std::string MiniTickerEventJson(const engine::EngineConfig& config,
                                const marketdata::MarketSnapshot& s, int64_t event_ns,
                                TimeUnit unit);
// <symbol>@ticker_<window>: {e:"<window>Ticker",E,s,p,P,o,h,l,c,w,v,q,O,C,F,L,n}
// over the window_ms before the event time; window names it ("1h", "4h", "1d").
std::string WindowTickerEventJson(const engine::EngineConfig& config,
                                  const marketdata::MarketSnapshot& s, std::string_view window,
                                  int64_t window_ms, int64_t event_ns, TimeUnit unit);
// <symbol>@avgPrice: {e:"avgPrice",E,s,i:"5m",w,T (the last trade's time)}.
std::string AvgPriceEventJson(const engine::EngineConfig& config,
                              const marketdata::MarketSnapshot& s, int64_t event_ns, TimeUnit unit);
// {u,s,b,B,a,A}: no time field.
std::string BookTickerEventJson(const engine::EngineConfig& config,
                                const marketdata::MarketSnapshot& s);
// {e:"kline",E,s,k:{t,T,s,i,f,L,o,c,h,l,v,n,x,q,V,Q,B}}; in µs, T is the
// last µs of the candle.
std::string KlineEventJson(const engine::EngineConfig& config, MarketId market,
                           marketdata::KlineInterval interval, const marketdata::Kline& k,
                           bool closed, int64_t event_ns, TimeUnit unit, int32_t zone_min = 0);

// --- user data payloads (times in ms: timeUnit applies to market streams only) ---
// {e:"executionReport",E,s,c,S,o,f,q,p,P,F,g,C,x,X,r,i,l,z,L,n,N,T,t,I,w,m,M,O,Z,Y,Q,W,V}:
// P the stop price, W the working time (absent while a conditional order
// waits); a trailing stop adds d (trailing delta) and D (trailing time, -1
// until it tracks).
std::string ExecutionReportJson(const engine::EngineConfig& config,
                                const marketdata::ExecutionReport& r, int64_t event_ms);
// {e:"outboundAccountPosition",E,u,B:[{a,f,l}]}
// The user data stream's listStatus event.
std::string ListStatusJson(const engine::EngineConfig& config,
                           const marketdata::ListStatusReport& r, int64_t event_ms);
std::string AccountPositionJson(const engine::EngineConfig& config,
                                std::span<const marketdata::BalanceRow> balances, int64_t event_ms);
// {e:"balanceUpdate",E,a,d,T}
std::string BalanceUpdateJson(const engine::EngineConfig& config, const marketdata::BalanceDelta& d,
                              int64_t event_ms);

}  // namespace mb::gateway
