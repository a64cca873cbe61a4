// Every body is written into one fmt::memory_buffer (inline storage, grown
// as needed) through the small Obj writer below, which keeps track
// of commas; arrays are written by hand. Numbers are formatted by
// FormatDecimal, whose short strings stay in the small-string buffer. Keys are
// literals of this file and need no escaping; every string value that comes
// from configuration or a client (symbols, asset names, client order ids)
// goes through AppendJsonString (common/json_escape.h).
#include "gateway/binance_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/checked.h"
#include "common/decimal.h"
#include "common/json_escape.h"
#include "common/status.h"
#include "common/strong.h"
#include "engine/types.h"

namespace mb::gateway {
namespace {

using Buf = fmt::memory_buffer;
using marketdata::Fill;
using marketdata::Kline;
using marketdata::Level;
using marketdata::MarketSnapshot;
using marketdata::OrderRecord;
using marketdata::TradeRow;

constexpr int64_t kNsPerMs = 1'000'000;
constexpr int64_t kNsPerUs = 1'000;
constexpr int64_t kUsPerMs = 1'000;

int64_t Ms(int64_t ns) noexcept { return ns / kNsPerMs; }

void Append(Buf& b, std::string_view s) { b.append(s.data(), s.data() + s.size()); }

template <class T>
void AppendInt(Buf& b, T v) {
  fmt::format_to(std::back_inserter(b), "{}", v);
}

// Units of 10^-scale that may exceed int64 (a price in ticks times tick_units
// is only bounded by the configuration's validation of products with
// quantities). FormatDecimal for every value that fits, which is all of them
// in any realistic configuration.
std::string FormatUnits(int128 v, int scale) {
  if (FitsInt64(v)) return FormatDecimal(static_cast<int64_t>(v), scale);
  const bool negative = v < 0;
  // |v| < 2^127, so the magnitude fits in unsigned __int128.
  __extension__ typedef unsigned __int128 uint128;  // NOLINT(modernize-use-using)
  uint128 mag = negative ? uint128{0} - static_cast<uint128>(v) : static_cast<uint128>(v);
  const auto places = static_cast<std::size_t>(scale);
  std::string rev;  // least significant digit first, at least places + 1 digits
  while (mag != 0 || rev.size() < places + 1) {
    rev.push_back(static_cast<char>('0' + static_cast<int>(mag % 10)));
    mag /= 10;
  }
  std::string out;
  if (negative) out.push_back('-');
  for (std::size_t k = rev.size(); k > places; --k) out.push_back(rev[k - 1]);
  if (places > 0) {
    out.push_back('.');
    for (std::size_t k = places; k > 0; --k) out.push_back(rev[k - 1]);
  }
  return out;
}

// Writes one JSON object; keys must be literals that need no escaping.
class Obj {
 public:
  explicit Obj(Buf& b) : b_(b) { b_.push_back('{'); }
  Obj(const Obj&) = delete;
  Obj& operator=(const Obj&) = delete;

  Obj& Key(std::string_view k) {
    if (!first_) b_.push_back(',');
    first_ = false;
    b_.push_back('"');
    Append(b_, k);
    Append(b_, "\":");
    return *this;
  }
  Obj& Str(std::string_view k, std::string_view v) {
    Key(k);
    AppendJsonString(v, &b_);
    return *this;
  }
  // A decimal string (digits, '.', '-': nothing to escape).
  Obj& Dec(std::string_view k, const std::string& v) {
    Key(k);
    b_.push_back('"');
    Append(b_, v);
    b_.push_back('"');
    return *this;
  }
  Obj& Int(std::string_view k, int64_t v) {
    Key(k);
    AppendInt(b_, v);
    return *this;
  }
  Obj& Uint(std::string_view k, uint64_t v) {
    Key(k);
    AppendInt(b_, v);
    return *this;
  }
  Obj& Bool(std::string_view k, bool v) {
    Key(k);
    Append(b_, v ? "true" : "false");
    return *this;
  }
  Obj& Null(std::string_view k) {
    Key(k);
    Append(b_, "null");
    return *this;
  }
  // A value already in JSON form.
  Obj& Raw(std::string_view k, std::string_view json) {
    Key(k);
    Append(b_, json);
    return *this;
  }
  void End() { b_.push_back('}'); }

 private:
  Buf& b_;
  bool first_ = true;
};

std::string ToStr(const Buf& b) { return fmt::to_string(b); }

const engine::AssetSpec& Asset(const engine::EngineConfig& config, AssetId a) {
  MB_CHECK(Raw(a) < config.assets.size());
  return config.assets[Raw(a)];
}

// Binance's timeInForce: as given for the types that take one (LIMIT,
// STOP_LOSS_LIMIT, TAKE_PROFIT_LIMIT); GTC for the others, whatever the
// engine applies (MARKET, STOP_LOSS and TAKE_PROFIT match IOC inside it).
std::string_view TifString(const OrderRecord& o) {
  using engine::OrderType;
  const OrderType t = o.terms.type;
  return t == OrderType::kLimit || t == OrderType::kStopLossLimit ||
                 t == OrderType::kTakeProfitLimit
             ? engine::ToString(o.terms.tif)
             : std::string_view("GTC");
}

// Binance symbol states: TRADING, and for a market not open to new orders
// HALT (our halted: nothing is accepted), BREAK (our cancel-only: open
// orders can be canceled, none placed) and END_OF_DAY (our closed: delisted,
// every order canceled). ccxt marks a market active only when
// it is TRADING.
std::string_view SymbolStatus(engine::MarketStatus s) {
  switch (s) {
    case engine::MarketStatus::kTrading:
      return "TRADING";
    case engine::MarketStatus::kHalted:
      return "HALT";
    case engine::MarketStatus::kCancelOnly:
      return "BREAK";
    case engine::MarketStatus::kClosed:
      return "END_OF_DAY";
  }
  return "HALT";
}

// "r" of an executionReport: Binance's NONE / INSUFFICIENT_BALANCES /
// WOULD_MATCH_IMMEDIATELY where it has a name, otherwise the engine's reason
// in the same UPPER_SNAKE spelling ("MinNotional" -> "MIN_NOTIONAL").
std::string RejectString(engine::RejectReason r) {
  switch (r) {
    case engine::RejectReason::kNone:
      return "NONE";
    case engine::RejectReason::kInsufficientBalance:
      return "INSUFFICIENT_BALANCES";
    case engine::RejectReason::kWouldTakeLiquidity:
      return "WOULD_MATCH_IMMEDIATELY";
    case engine::RejectReason::kWouldTriggerImmediately:
      return "ORDER_WOULD_TRIGGER_IMMEDIATELY";
    default:
      break;
  }
  const std::string_view name = engine::ToString(r);
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c >= 'A' && c <= 'Z') {
      if (i > 0) out.push_back('_');
      out.push_back(c);
    } else if (c >= 'a' && c <= 'z') {
      out.push_back(static_cast<char>(c - 'a' + 'A'));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void AppendLevels(Buf& b, const MarketFormat& f, std::span<const Level> levels, std::size_t limit) {
  b.push_back('[');
  const std::size_t n = std::min(levels.size(), limit);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) b.push_back(',');
    Append(b, "[\"");
    Append(b, f.Price(levels[i].price));
    Append(b, "\",\"");
    Append(b, f.Qty(levels[i].qty));
    Append(b, "\"]");
  }
  b.push_back(']');
}

// {"lastUpdateId":N,"bids":[...],"asks":[...]}
std::string BookJson(const engine::EngineConfig& config, const MarketSnapshot& s,
                     std::size_t limit) {
  const MarketFormat f(config, s.market);
  Buf b;
  Obj o(b);
  o.Uint("lastUpdateId", s.last_update_id).Key("bids");
  AppendLevels(b, f, s.bids, limit);
  o.Key("asks");
  AppendLevels(b, f, s.asks, limit);
  o.End();
  return ToStr(b);
}

// The newest trade of the snapshot, if it holds any.
const TradeRow* LastTrade(const MarketSnapshot& s) {
  for (const marketdata::TradeChunk* c = s.trades.get(); c != nullptr; c = c->older.get()) {
    if (!c->rows.empty()) return &c->rows.back();
  }
  return nullptr;
}

// Trade ids in 24 h statistics and klines: -1 when there was no trade, as
// Binance shows.
int64_t TradeIdOrNone(bool any, TradeId id) { return any ? static_cast<int64_t>(Raw(id)) : -1; }

// The derived figures of a 24 h ticker.
struct TickerFigures {
  std::string change;      // last - open, quote decimal
  std::string change_pct;  // 3 decimals
  std::string weighted_avg;
};

TickerFigures Figures(const MarketFormat& f, const marketdata::Ticker24h& t) {
  TickerFigures out;
  const int128 change_ticks = static_cast<int128>(t.last.value) - t.open.value;
  out.change = FormatUnits(change_ticks * f.spec().tick_units, f.quote_scale());
  // Percent with 3 decimals = change / open x 100 x 1000, rounded half away
  // from zero.
  int128 pct = 0;
  if (t.open.value > 0) {
    const int128 num = change_ticks * 100'000;
    const int128 den = t.open.value;
    pct = num / den;
    const int128 rem = num % den;
    if (rem * 2 >= den) ++pct;
    if (-rem * 2 >= den) --pct;
  }
  out.change_pct = FormatUnits(pct, 3);
  // quote_volume / base_volume: quote units per whole base unit, rounded half up.
  int128 avg = 0;
  if (t.base_volume.value > 0) {
    int128 scale = 1;
    for (int i = 0; i < f.base_scale(); ++i) scale *= 10;
    const int128 num = static_cast<int128>(t.quote_volume.value) * scale;
    avg = (num + t.base_volume.value / 2) / t.base_volume.value;
  }
  out.weighted_avg = FormatUnits(avg, f.quote_scale());
  return out;
}

void BestLevel(const std::vector<Level>& side, const MarketFormat& f, std::string* price,
               std::string* qty) {
  const Level best = side.empty() ? Level{} : side.front();
  *price = f.Price(best.price);
  *qty = f.Qty(best.qty);
}

// Binance names an order that self-trade prevention expired EXPIRED_IN_MATCH
// (the read side's status is EXPIRED with that reason).
std::string_view StatusString(const OrderRecord& r) {
  if (r.status == marketdata::OrderStatus::kExpired &&
      r.expire_reason == engine::ExpireReason::kSelfTradePrevention) {
    return "EXPIRED_IN_MATCH";
  }
  return marketdata::ToString(r.status);
}

// The fields every order shape shares, from price to side.
void OrderCore(Obj& o, const MarketFormat& f, const OrderRecord& r, bool with_quote_order_qty) {
  // A market order by quote amount has no quantity of its own: Binance shows
  // what it executed.
  const bool by_quote = r.quote_qty.value > 0 && r.terms.qty.value == 0;
  o.Dec("price", f.Price(r.terms.price))
      .Dec("origQty", f.Qty(by_quote ? r.executed : r.terms.qty))
      .Dec("executedQty", f.Qty(r.executed));
  if (with_quote_order_qty) o.Dec("origQuoteOrderQty", f.Quote(r.quote_qty));
  o.Dec("cummulativeQuoteQty", f.Quote(r.cumulative_quote))
      .Str("status", StatusString(r))
      .Str("timeInForce", TifString(r))
      .Str("type", engine::ToString(r.terms.type))
      .Str("side", engine::ToString(r.terms.side));
}

// Binance's orderListId: -1 for an order in no list.
int64_t ListId(const OrderRecord& r) {
  return r.list_id == 0 ? -1 : static_cast<int64_t>(r.list_id);
}

// Binance's workingTime in ms: -1 while a conditional order waits.
int64_t WorkingMs(const OrderRecord& r) {
  const std::optional<int64_t> ns = marketdata::WorkingNs(r);
  return ns ? Ms(*ns) : -1;
}

// The conditional fields of a stop order (Binance's "Conditional fields in
// Order Responses"): stopPrice (with_stop: shapes that do not always show
// it) for the four conditional types, trailingDelta and trailingTime (-1
// until it tracks the price) for a trailing stop.
void StopFields(Obj& o, const MarketFormat& f, const OrderRecord& r, bool with_stop) {
  if (with_stop && engine::IsConditional(r.terms.type)) o.Dec("stopPrice", f.Price(r.stop_price));
  if (r.trailing_delta != 0) {
    o.Int("trailingDelta", r.trailing_delta)
        .Int("trailingTime", r.trailing_ns != 0 ? Ms(r.trailing_ns) : -1);
  }
}

// The conditional fields of an expired order (Binance's "Conditional fields
// in Order Responses"): expiryReason in Binance's words, and for an order
// that self-trade prevention expired, preventedQuantity (what it still had to
// fill) instead. preventedMatchId is not given: the engine keeps no record of
// prevented matches to name.
void ExpiryFields(Obj& o, const MarketFormat& f, const OrderRecord& r) {
  if (r.status != marketdata::OrderStatus::kExpired) return;
  switch (r.expire_reason) {
    case engine::ExpireReason::kIocRemainder:
      o.Str("expiryReason", "UNFILLED_IOC_QUANTITY_EXPIRED");
      return;
    case engine::ExpireReason::kFokNotFillable:
      o.Str("expiryReason", "UNFILLED_FOK_ORDER_EXPIRED");
      return;
    case engine::ExpireReason::kNoLiquidity:
      o.Str("expiryReason", "INSUFFICIENT_LIQUIDITY");
      return;
    case engine::ExpireReason::kQuoteBudgetSpent:
      return;  // FILLED, not expired: never here
    case engine::ExpireReason::kInsufficientBalance:
      // A stop-market buy whose trigger could not lock what it would spend.
      o.Str("expiryReason", "REJECTED");
      return;
    case engine::ExpireReason::kSelfTradePrevention: {
      // A market order by quote amount has no quantity to state.
      const Qty left = r.terms.qty.value > r.executed.value ? r.terms.qty - r.executed : Qty{0};
      o.Dec("preventedQuantity", f.Qty(left));
      return;
    }
  }
}

void AppendKlineArray(Buf& b, const MarketFormat& f, marketdata::KlineInterval interval,
                      int32_t zone_min, const Kline& k) {
  b.push_back('[');
  AppendInt(b, k.open_time_ms);
  fmt::format_to(std::back_inserter(b), ",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",", f.Price(k.open),
                 f.Price(k.high), f.Price(k.low), f.Price(k.close), f.Base(k.base_volume));
  AppendInt(b, marketdata::KlineNextOpenMs(interval, k.open_time_ms, zone_min) - 1);
  fmt::format_to(std::back_inserter(b), ",\"{}\",{},\"{}\",\"{}\",\"0\"]", f.Quote(k.quote_volume),
                 k.trades, f.Base(k.taker_buy_base), f.Quote(k.taker_buy_quote));
}

}  // namespace

// --- MarketFormat ---

MarketFormat::MarketFormat(const engine::EngineConfig& config, MarketId market) {
  MB_CHECK(Raw(market) < config.markets.size());
  spec_ = &config.markets[Raw(market)];
  base_scale_ = Asset(config, spec_->base).scale;
  quote_scale_ = Asset(config, spec_->quote).scale;
}

std::string MarketFormat::Price(mb::Price p) const {
  return FormatUnits(static_cast<int128>(p.value) * spec_->tick_units, quote_scale_);
}

std::string MarketFormat::Qty(mb::Qty q) const {
  return FormatUnits(static_cast<int128>(q.value) * spec_->lot_units, base_scale_);
}

std::string MarketFormat::Base(Amount a) const { return FormatDecimal(a.value, base_scale_); }

std::string MarketFormat::Quote(Amount a) const { return FormatDecimal(a.value, quote_scale_); }

std::string AssetAmount(const engine::EngineConfig& config, AssetId asset, Amount a) {
  return FormatDecimal(a.value, Asset(config, asset).scale);
}

// --- REST ---

std::optional<engine::MarketStatus> ParseSymbolStatus(std::string_view s) noexcept {
  if (s == "TRADING") return engine::MarketStatus::kTrading;
  if (s == "HALT") return engine::MarketStatus::kHalted;
  if (s == "BREAK") return engine::MarketStatus::kCancelOnly;
  if (s == "END_OF_DAY") return engine::MarketStatus::kClosed;
  return std::nullopt;
}

std::string ExchangeInfoJson(const engine::EngineConfig& config,
                             std::span<const engine::MarketStatus> statuses, int64_t server_time,
                             std::span<const RateLimitJson> rate_limits,
                             std::span<const MarketId> markets, bool show_permission_sets,
                             std::span<const MarketRules> rules) {
  Buf b;
  Obj root(b);
  root.Str("timezone", "UTC").Int("serverTime", server_time).Key("rateLimits");
  b.push_back('[');
  for (std::size_t i = 0; i < rate_limits.size(); ++i) {
    if (i > 0) b.push_back(',');
    Obj rl(b);
    rl.Str("rateLimitType", rate_limits[i].type)
        .Str("interval", rate_limits[i].interval)
        .Int("intervalNum", rate_limits[i].interval_num)
        .Uint("limit", rate_limits[i].limit);
    rl.End();
  }
  b.push_back(']');
  root.Raw("exchangeFilters", "[]").Key("symbols");
  b.push_back('[');
  for (std::size_t n = 0; n < markets.size(); ++n) {
    const std::size_t i = Raw(markets[n]);
    if (i >= config.markets.size()) continue;
    const engine::MarketSpec& m = config.markets[i];
    const MarketFormat f(config, MarketId{static_cast<uint16_t>(i)});
    const engine::AssetSpec& base = Asset(config, m.base);
    const engine::AssetSpec& quote = Asset(config, m.quote);
    const engine::MarketStatus status = i < statuses.size() ? statuses[i] : m.status;
    // Largest notional an order can have; Validate() guarantees it fits.
    const int128 max_notional =
        static_cast<int128>(m.max_price.value) * m.max_qty.value * m.notional_per_tick_lot;
    if (n > 0) b.push_back(',');
    Obj s(b);
    s.Str("symbol", m.symbol)
        .Str("status", SymbolStatus(status))
        .Str("baseAsset", base.symbol)
        .Int("baseAssetPrecision", base.scale)
        .Str("quoteAsset", quote.symbol)
        .Int("quotePrecision", quote.scale)
        .Int("quoteAssetPrecision", quote.scale)
        .Int("baseCommissionPrecision", base.scale)
        .Int("quoteCommissionPrecision", quote.scale)
        .Key("orderTypes");
    const MarketRules& r = RulesOf(rules, MarketId{static_cast<uint16_t>(i)});
    b.push_back('[');
    bool any_type = false;
    bool any_conditional = false;
    for (const engine::OrderType t : kOrderTypes) {
      if (!r.Allows(t)) continue;
      if (any_type) b.push_back(',');
      any_type = true;
      any_conditional = any_conditional || engine::IsConditional(t);
      AppendJsonString(engine::ToString(t), &b);
    }
    b.push_back(']');
    s.Bool("icebergAllowed", r.IcebergAllowed())
        .Bool("ocoAllowed", true)
        .Bool("otoAllowed", true)
        .Bool("opoAllowed", false)
        .Bool("quoteOrderQtyMarketAllowed", true)
        .Bool("allowTrailingStop", any_conditional)
        .Bool("cancelReplaceAllowed", true)
        .Bool("amendAllowed", true)
        .Bool("pegInstructionsAllowed", false)
        .Bool("isSpotTradingAllowed", true)
        .Bool("isMarginTradingAllowed", false)
        .Key("filters");
    b.push_back('[');
    {
      Obj pf(b);
      pf.Str("filterType", "PRICE_FILTER")
          .Dec("minPrice", f.Price(mb::Price{1}))
          .Dec("maxPrice", f.Price(m.max_price))
          .Dec("tickSize", f.Price(mb::Price{1}));
      pf.End();
    }
    for (const std::string_view lot_filter : {"LOT_SIZE", "MARKET_LOT_SIZE"}) {
      b.push_back(',');
      Obj lf(b);
      lf.Str("filterType", lot_filter)
          .Dec("minQty", f.Qty(m.min_qty))
          .Dec("maxQty", f.Qty(m.max_qty))
          .Dec("stepSize", f.Qty(mb::Qty{1}));
      lf.End();
    }
    {
      b.push_back(',');
      Obj nf(b);
      nf.Str("filterType", "NOTIONAL")
          .Dec("minNotional", f.Quote(m.min_notional))
          .Bool("applyMinToMarket", true)
          .Dec("maxNotional", FormatUnits(max_notional, quote.scale))
          .Bool("applyMaxToMarket", false)
          .Int("avgPriceMins", 0);
      nf.End();
    }
    {
      b.push_back(',');
      Obj mf(b);
      mf.Str("filterType", "MIN_NOTIONAL")
          .Dec("minNotional", f.Quote(m.min_notional))
          .Bool("applyToMarket", true)
          .Int("avgPriceMins", 0);
      mf.End();
    }
    {
      b.push_back(',');
      Obj tf(b);
      tf.Str("filterType", "TRAILING_DELTA")
          .Int("minTrailingAboveDelta", r.min_trailing_above)
          .Int("maxTrailingAboveDelta", r.max_trailing_above)
          .Int("minTrailingBelowDelta", r.min_trailing_below)
          .Int("maxTrailingBelowDelta", r.max_trailing_below);
      tf.End();
    }
    {
      b.push_back(',');
      Obj af(b);
      af.Str("filterType", "MAX_NUM_ALGO_ORDERS").Uint("maxNumAlgoOrders", r.max_num_algo_orders);
      af.End();
    }
    {
      b.push_back(',');
      Obj ip(b);
      ip.Str("filterType", "ICEBERG_PARTS").Uint("limit", r.iceberg_parts);
      ip.End();
    }
    {
      b.push_back(',');
      Obj mi(b);
      mi.Str("filterType", "MAX_NUM_ICEBERG_ORDERS")
          .Uint("maxNumIcebergOrders", r.max_num_iceberg_orders);
      mi.End();
    }
    b.push_back(']');
    s.Raw("permissions", R"(["SPOT"])")
        .Raw("permissionSets", show_permission_sets ? R"([["SPOT"]])" : "[]")
        .Str("defaultSelfTradePreventionMode", "NONE")
        .Raw("allowedSelfTradePreventionModes",
             R"(["NONE","EXPIRE_TAKER","EXPIRE_MAKER","EXPIRE_BOTH"])");
    s.End();
  }
  b.push_back(']');
  root.End();
  return ToStr(b);
}

std::string DepthJson(const engine::EngineConfig& config, const MarketSnapshot& s,
                      std::size_t limit) {
  return BookJson(config, s, limit);
}

std::string TradesJson(const engine::EngineConfig& config, std::span<const TradeRow> t) {
  Buf b;
  b.push_back('[');
  for (std::size_t i = 0; i < t.size(); ++i) {
    const TradeRow& r = t[i];
    const MarketFormat f(config, r.market);
    if (i > 0) b.push_back(',');
    Obj o(b);
    o.Uint("id", Raw(r.id))
        .Dec("price", f.Price(r.price))
        .Dec("qty", f.Qty(r.qty))
        .Dec("quoteQty", f.Quote(r.notional))
        .Int("time", Ms(r.time_ns))
        .Bool("isBuyerMaker", r.buyer_is_maker)
        .Bool("isBestMatch", true);
    o.End();
  }
  b.push_back(']');
  return ToStr(b);
}

std::string AggTradesJson(const engine::EngineConfig& config,
                          std::span<const marketdata::AggTrade> t) {
  Buf b;
  b.push_back('[');
  for (std::size_t i = 0; i < t.size(); ++i) {
    const marketdata::AggTrade& r = t[i];
    const MarketFormat f(config, r.market);
    if (i > 0) b.push_back(',');
    Obj o(b);
    o.Uint("a", Raw(r.id))
        .Dec("p", f.Price(r.price))
        .Dec("q", f.Qty(r.qty))
        .Uint("f", Raw(r.first))
        .Uint("l", Raw(r.last))
        .Int("T", Ms(r.time_ns))
        .Bool("m", r.buyer_is_maker)
        .Bool("M", true);
    o.End();
  }
  b.push_back(']');
  return ToStr(b);
}

std::string KlinesJson(const engine::EngineConfig& config, MarketId market,
                       marketdata::KlineInterval interval, std::span<const Kline> k,
                       int32_t zone_min) {
  const MarketFormat f(config, market);
  Buf b;
  b.push_back('[');
  for (std::size_t i = 0; i < k.size(); ++i) {
    if (i > 0) b.push_back(',');
    AppendKlineArray(b, f, interval, zone_min, k[i]);
  }
  b.push_back(']');
  return ToStr(b);
}

namespace {

// The 24 h ticker's fields, in Binance's order; the REST body and the
// 24hrTicker event carry the same figures under different keys.
struct TickerKeys {
  std::string_view symbol, change, change_pct, weighted_avg, prev_close, last, last_qty, bid,
      bid_qty, ask, ask_qty, open, high, low, volume, quote_volume, open_time, close_time, first_id,
      last_id, count;
};
constexpr TickerKeys kRestTickerKeys{
    "symbol",      "priceChange", "priceChangePercent", "weightedAvgPrice", "prevClosePrice",
    "lastPrice",   "lastQty",     "bidPrice",           "bidQty",           "askPrice",
    "askQty",      "openPrice",   "highPrice",          "lowPrice",         "volume",
    "quoteVolume", "openTime",    "closeTime",          "firstId",          "lastId",
    "count"};
constexpr TickerKeys kEventTickerKeys{"s", "p", "P", "w", "x", "c", "Q", "b", "B", "a", "A",
                                      "o", "h", "l", "v", "q", "O", "C", "F", "L", "n"};

void AppendTicker(Obj& o, const TickerKeys& k, const MarketFormat& f, const MarketSnapshot& s,
                  int64_t now_ms, TimeUnit unit) {
  const marketdata::Ticker24h t = s.Ticker(now_ms);
  const TickerFigures fig = Figures(f, t);
  std::string bid_price, bid_qty, ask_price, ask_qty;
  BestLevel(s.bids, f, &bid_price, &bid_qty);
  BestLevel(s.asks, f, &ask_price, &ask_qty);
  o.Str(k.symbol, f.spec().symbol)
      .Dec(k.change, fig.change)
      .Dec(k.change_pct, fig.change_pct)
      .Dec(k.weighted_avg, fig.weighted_avg)
      // The read side keeps no trade from before the window: the window's
      // opening price stands in for the close before it.
      .Dec(k.prev_close, f.Price(t.open))
      .Dec(k.last, f.Price(t.last))
      .Dec(k.last_qty, f.Qty(t.last_qty))
      .Dec(k.bid, bid_price)
      .Dec(k.bid_qty, bid_qty)
      .Dec(k.ask, ask_price)
      .Dec(k.ask_qty, ask_qty)
      .Dec(k.open, f.Price(t.open))
      .Dec(k.high, f.Price(t.high))
      .Dec(k.low, f.Price(t.low))
      .Dec(k.volume, f.Base(t.base_volume))
      .Dec(k.quote_volume, f.Quote(t.quote_volume))
      .Int(k.open_time, MsIn(t.open_time_ms, unit))
      .Int(k.close_time, MsIn(t.close_time_ms, unit))
      .Int(k.first_id, TradeIdOrNone(t.any_trade, t.first_trade))
      .Int(k.last_id, TradeIdOrNone(t.any_trade, t.last_trade))
      .Uint(k.count, t.trades);
}

}  // namespace

std::string Ticker24hJson(const engine::EngineConfig& config, const MarketSnapshot& s,
                          int64_t now_ms, bool mini) {
  if (mini) return WindowTickerJson(config, s.market, s.Ticker(now_ms), true);
  Buf b;
  Obj o(b);
  AppendTicker(o, kRestTickerKeys, MarketFormat(config, s.market), s, now_ms,
               TimeUnit::kMillisecond);
  o.End();
  return ToStr(b);
}

std::string WindowTickerJson(const engine::EngineConfig& config, MarketId market,
                             const marketdata::Ticker24h& t, bool mini) {
  const MarketFormat f(config, market);
  Buf b;
  Obj o(b);
  o.Str("symbol", f.spec().symbol);
  if (!mini) {
    const TickerFigures fig = Figures(f, t);
    o.Dec("priceChange", fig.change)
        .Dec("priceChangePercent", fig.change_pct)
        .Dec("weightedAvgPrice", fig.weighted_avg);
  }
  o.Dec("openPrice", f.Price(t.open))
      .Dec("highPrice", f.Price(t.high))
      .Dec("lowPrice", f.Price(t.low))
      .Dec("lastPrice", f.Price(t.last))
      .Dec("volume", f.Base(t.base_volume))
      .Dec("quoteVolume", f.Quote(t.quote_volume))
      .Int("openTime", t.open_time_ms)
      .Int("closeTime", t.close_time_ms)
      .Int("firstId", TradeIdOrNone(t.any_trade, t.first_trade))
      .Int("lastId", TradeIdOrNone(t.any_trade, t.last_trade))
      .Uint("count", t.trades);
  o.End();
  return ToStr(b);
}

namespace {

// quote volume / base volume in quote units per whole base unit (rounded
// half up); the last price when nothing traded in the window.
std::string AveragePriceText(const MarketFormat& f, const MarketSnapshot::AvgPrice& a) {
  if (a.base_volume.value <= 0) return f.Price(a.last);
  marketdata::Ticker24h t;
  t.base_volume = a.base_volume;
  t.quote_volume = a.quote_volume;
  return Figures(f, t).weighted_avg;
}

}  // namespace

std::string AvgPriceJson(const engine::EngineConfig& config, const MarketSnapshot& s,
                         int64_t now_ms) {
  const MarketFormat f(config, s.market);
  const MarketSnapshot::AvgPrice a = s.AveragePrice(now_ms);
  Buf b;
  Obj o(b);
  o.Int("mins", marketdata::kAvgPriceMinutes)
      .Dec("price", AveragePriceText(f, a))
      .Int("closeTime", a.last_trade_ms);
  o.End();
  return ToStr(b);
}

std::string PriceTickerJson(const engine::EngineConfig& config, const MarketSnapshot& s) {
  const MarketFormat f(config, s.market);
  const TradeRow* last = LastTrade(s);
  Buf b;
  Obj o(b);
  o.Str("symbol", f.spec().symbol).Dec("price", f.Price(last ? last->price : mb::Price{0}));
  o.End();
  return ToStr(b);
}

std::string BookTickerJson(const engine::EngineConfig& config, const MarketSnapshot& s) {
  const MarketFormat f(config, s.market);
  std::string bid_price, bid_qty, ask_price, ask_qty;
  BestLevel(s.bids, f, &bid_price, &bid_qty);
  BestLevel(s.asks, f, &ask_price, &ask_qty);
  Buf b;
  Obj o(b);
  o.Str("symbol", f.spec().symbol)
      .Dec("bidPrice", bid_price)
      .Dec("bidQty", bid_qty)
      .Dec("askPrice", ask_price)
      .Dec("askQty", ask_qty);
  o.End();
  return ToStr(b);
}

std::string OrderJson(const engine::EngineConfig& config, const OrderRecord& r) {
  const MarketFormat f(config, r.terms.market);
  Buf b;
  Obj o(b);
  o.Str("symbol", f.spec().symbol)
      .Uint("orderId", Raw(r.id))
      .Int("orderListId", ListId(r))
      .Str("clientOrderId", r.client_order_id.view());
  OrderCore(o, f, r, /*with_quote_order_qty=*/false);
  o.Dec("stopPrice", f.Price(r.stop_price))
      .Dec("icebergQty", f.Qty(r.iceberg_qty))
      .Int("time", Ms(r.time_ns))
      .Int("updateTime", Ms(r.update_ns))
      .Bool("isWorking", r.working)
      .Int("workingTime", WorkingMs(r))
      .Dec("origQuoteOrderQty", f.Quote(r.quote_qty))
      .Str("selfTradePreventionMode", engine::ToString(r.terms.stp));
  StopFields(o, f, r, /*with_stop=*/false);
  ExpiryFields(o, f, r);
  o.End();
  return ToStr(b);
}

std::string NewOrderJson(const engine::EngineConfig& config, const OrderRecord& r,
                         std::span<const Fill> fills, RespType type, int64_t transact_ms) {
  const MarketFormat f(config, r.terms.market);
  Buf b;
  Obj o(b);
  o.Str("symbol", f.spec().symbol)
      .Uint("orderId", Raw(r.id))
      .Int("orderListId", ListId(r))
      .Str("clientOrderId", r.client_order_id.view())
      .Int("transactTime", transact_ms);
  if (type != RespType::kAck) {
    OrderCore(o, f, r, /*with_quote_order_qty=*/true);
    if (r.iceberg_qty.value != 0) o.Dec("icebergQty", f.Qty(r.iceberg_qty));
    o.Int("workingTime", WorkingMs(r))
        .Str("selfTradePreventionMode", engine::ToString(r.terms.stp));
    StopFields(o, f, r, /*with_stop=*/true);
    ExpiryFields(o, f, r);
  }
  if (type == RespType::kFull) {
    o.Key("fills");
    b.push_back('[');
    for (std::size_t i = 0; i < fills.size(); ++i) {
      const Fill& fl = fills[i];
      if (i > 0) b.push_back(',');
      Obj fo(b);
      fo.Dec("price", f.Price(fl.price))
          .Dec("qty", f.Qty(fl.qty))
          .Dec("commission", AssetAmount(config, fl.commission_asset, fl.commission))
          .Str("commissionAsset", Asset(config, fl.commission_asset).symbol)
          .Uint("tradeId", Raw(fl.trade_id));
      fo.End();
    }
    b.push_back(']');
  }
  o.End();
  return ToStr(b);
}

std::string CanceledOrderJson(const engine::EngineConfig& config, const OrderRecord& r,
                              std::string_view cancel_client_id, int64_t transact_ms) {
  const MarketFormat f(config, r.terms.market);
  Buf b;
  Obj o(b);
  // Binance gives the cancel request its own client id (the gateway generates
  // one when the request names none); without one, the order's is repeated.
  o.Str("symbol", f.spec().symbol)
      .Str("origClientOrderId", r.client_order_id.view())
      .Uint("orderId", Raw(r.id))
      .Int("orderListId", ListId(r))
      .Str("clientOrderId", cancel_client_id.empty() ? r.client_order_id.view() : cancel_client_id)
      .Int("transactTime", transact_ms);
  OrderCore(o, f, r, /*with_quote_order_qty=*/true);
  if (r.iceberg_qty.value != 0) o.Dec("icebergQty", f.Qty(r.iceberg_qty));
  o.Str("selfTradePreventionMode", engine::ToString(r.terms.stp));
  StopFields(o, f, r, /*with_stop=*/true);
  o.End();
  return ToStr(b);
}

std::string AmendedOrderJson(const engine::EngineConfig& config, const OrderRecord& r,
                             std::string_view orig_client_id, int64_t transact_ms,
                             uint64_t execution_id) {
  const MarketFormat f(config, r.terms.market);
  Buf b;
  Obj o(b);
  o.Int("transactTime", transact_ms).Uint("executionId", execution_id).Key("amendedOrder");
  {
    Obj a(b);
    a.Str("symbol", f.spec().symbol)
        .Uint("orderId", Raw(r.id))
        .Int("orderListId", ListId(r))
        .Str("origClientOrderId", orig_client_id)
        .Str("clientOrderId", r.client_order_id.view())
        .Dec("price", f.Price(r.terms.price))
        .Dec("qty", f.Qty(r.terms.qty))
        .Dec("executedQty", f.Qty(r.executed))
        // Self-trade prevention expires whole orders: an open order has
        // prevented nothing.
        .Dec("preventedQty", f.Qty(Qty{0}))
        .Dec("quoteOrderQty", f.Quote(r.quote_qty))
        .Dec("cumulativeQuoteQty", f.Quote(r.cumulative_quote))
        .Str("status", StatusString(r))
        .Str("timeInForce", TifString(r))
        .Str("type", engine::ToString(r.terms.type))
        .Str("side", engine::ToString(r.terms.side));
    if (r.working) a.Int("workingTime", WorkingMs(r));
    a.Str("selfTradePreventionMode", engine::ToString(r.terms.stp));
    a.End();
  }
  o.End();
  return ToStr(b);
}

std::string_view ContingencyType(engine::ListType t) {
  return t == engine::ListType::kOco ? "OCO" : "OTO";
}

std::string_view ListStatusType(const marketdata::ListRecord& l) {
  return l.status == marketdata::ListStatus::kAllDone ? "ALL_DONE" : "EXEC_STARTED";
}

std::string_view ListOrderStatus(const marketdata::ListRecord& l) {
  return l.status == marketdata::ListStatus::kAllDone ? "ALL_DONE" : "EXECUTING";
}

std::string OrderListJson(const engine::EngineConfig& config, const marketdata::ListRecord& l,
                          std::span<const std::string> order_reports, int64_t transaction_ms,
                          bool with_reports) {
  const MarketFormat f(config, l.market);
  Buf b;
  Obj o(b);
  o.Uint("orderListId", l.id)
      .Str("contingencyType", ContingencyType(l.type))
      .Str("listStatusType", ListStatusType(l))
      .Str("listOrderStatus", ListOrderStatus(l))
      .Str("listClientOrderId", l.list_client_order_id.view())
      .Int("transactionTime", transaction_ms)
      .Str("symbol", f.spec().symbol)
      .Key("orders");
  b.push_back('[');
  for (std::size_t k = 0; k < l.size(); ++k) {
    if (k > 0) b.push_back(',');
    Obj oo(b);
    oo.Str("symbol", f.spec().symbol)
        .Uint("orderId", Raw(l.orders[k]))
        .Str("clientOrderId", l.client_ids[k].view());
    oo.End();
  }
  b.push_back(']');
  if (with_reports) {
    o.Key("orderReports");
    b.push_back('[');
    for (std::size_t k = 0; k < order_reports.size(); ++k) {
      if (k > 0) b.push_back(',');
      b.append(order_reports[k].data(), order_reports[k].data() + order_reports[k].size());
    }
    b.push_back(']');
  }
  o.End();
  return ToStr(b);
}

std::string MyTradesJson(const engine::EngineConfig& config, std::span<const Fill> fills) {
  Buf b;
  b.push_back('[');
  for (std::size_t i = 0; i < fills.size(); ++i) {
    const Fill& fl = fills[i];
    const MarketFormat f(config, fl.market);
    if (i > 0) b.push_back(',');
    Obj o(b);
    o.Str("symbol", f.spec().symbol)
        .Uint("id", Raw(fl.trade_id))
        .Uint("orderId", Raw(fl.order_id))
        .Int("orderListId", -1)
        .Dec("price", f.Price(fl.price))
        .Dec("qty", f.Qty(fl.qty))
        .Dec("quoteQty", f.Quote(fl.notional))
        .Dec("commission", AssetAmount(config, fl.commission_asset, fl.commission))
        .Str("commissionAsset", Asset(config, fl.commission_asset).symbol)
        .Int("time", Ms(fl.time_ns))
        .Bool("isBuyer", fl.side == engine::Side::kBuy)
        .Bool("isMaker", fl.is_maker)
        .Bool("isBestMatch", true);
    o.End();
  }
  b.push_back(']');
  return ToStr(b);
}

std::string AccountJson(const engine::EngineConfig& config, AccountId account,
                        std::span<const marketdata::BalanceRow> balances, int64_t update_ms) {
  // Fees are per market here, per account on Binance: the account-wide figures
  // are the highest rates of any market, a bound the client can plan with.
  int32_t maker_bps = 0;
  int32_t taker_bps = 0;
  for (const engine::MarketSpec& m : config.markets) {
    maker_bps = std::max(maker_bps, m.maker_fee_bps);
    taker_bps = std::max(taker_bps, m.taker_fee_bps);
  }
  // A rate of n bps is n / 10000, written with 8 decimals as Binance does.
  constexpr int64_t kBpsTo8 = 10'000;
  Buf b;
  Obj o(b);
  o.Int("makerCommission", maker_bps)
      .Int("takerCommission", taker_bps)
      .Int("buyerCommission", 0)
      .Int("sellerCommission", 0)
      .Key("commissionRates");
  {
    Obj rates(b);
    rates.Dec("maker", FormatDecimal(maker_bps * kBpsTo8, 8))
        .Dec("taker", FormatDecimal(taker_bps * kBpsTo8, 8))
        .Dec("buyer", FormatDecimal(0, 8))
        .Dec("seller", FormatDecimal(0, 8));
    rates.End();
  }
  // A trader's account takes deposits from other venues at its addresses and
  // withdraws to them (docs/transfers.md; the key needs WITHDRAW); the fee
  // account does neither through the API.
  const bool trader = account != config.fee_account;
  o.Bool("canTrade", trader)
      .Bool("canWithdraw", trader)
      .Bool("canDeposit", trader)
      .Bool("brokered", false)
      .Bool("requireSelfTradePrevention", false)
      .Bool("preventSor", false)
      .Int("updateTime", update_ms)
      .Str("accountType", "SPOT")
      .Key("balances");
  b.push_back('[');
  for (std::size_t i = 0; i < balances.size(); ++i) {
    const marketdata::BalanceRow& row = balances[i];
    if (i > 0) b.push_back(',');
    Obj bo(b);
    bo.Str("asset", Asset(config, row.asset).symbol)
        .Dec("free", AssetAmount(config, row.asset, row.available))
        .Dec("locked", AssetAmount(config, row.asset, row.locked));
    bo.End();
  }
  b.push_back(']');
  o.Raw("permissions", R"(["SPOT"])").Uint("uid", Raw(account));
  o.End();
  return ToStr(b);
}

// --- streams ---

std::optional<TimeUnit> ParseTimeUnit(std::string_view s) noexcept {
  const auto equals_ignoring_case = [s](std::string_view upper) {
    return s.size() == upper.size() &&
           std::equal(s.begin(), s.end(), upper.begin(), [](char c, char u) {
             return (c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c) == u;
           });
  };
  if (equals_ignoring_case("MILLISECOND")) return TimeUnit::kMillisecond;
  if (equals_ignoring_case("MICROSECOND")) return TimeUnit::kMicrosecond;
  return std::nullopt;
}

namespace {

constexpr std::string_view kTimeKeys[] = {"serverTime",  "time",     "updateTime", "transactTime",
                                          "workingTime", "openTime", "closeTime",  "T"};

void ScaleTime(boost::json::value* v) {
  // Times in ms are far below the bound; anything else is left alone.
  constexpr int64_t kBound = std::numeric_limits<int64_t>::max() / kUsPerMs;
  if (v->is_int64() && v->as_int64() < kBound && v->as_int64() > -kBound) {
    *v = v->as_int64() * kUsPerMs;
  } else if (v->is_uint64() && v->as_uint64() < static_cast<uint64_t>(kBound)) {
    *v = v->as_uint64() * static_cast<uint64_t>(kUsPerMs);
  }
}

void TimesInMicros(boost::json::value* v) {
  if (v->is_object()) {
    for (auto& kv : v->as_object()) {
      const std::string_view key(kv.key().data(), kv.key().size());
      if (std::find(std::begin(kTimeKeys), std::end(kTimeKeys), key) != std::end(kTimeKeys)) {
        ScaleTime(&kv.value());
      } else {
        TimesInMicros(&kv.value());
      }
    }
  } else if (v->is_array()) {
    boost::json::array& a = v->as_array();
    // A kline: [openTime,"o","h","l","c","v",closeTime,"q",n,"tb","tq","0"].
    if (a.size() == 12 && a[0].is_int64() && a[6].is_int64() && a[1].is_string()) {
      ScaleTime(&a[0]);
      ScaleTime(&a[6]);
      return;
    }
    for (boost::json::value& x : a) TimesInMicros(&x);
  }
}

}  // namespace

std::string TimesInMicros(std::string_view body) {
  boost::json::error_code ec;
  boost::json::value v = boost::json::parse(body, ec);
  if (ec) return std::string(body);
  TimesInMicros(&v);
  return boost::json::serialize(v);
}

int64_t NsIn(int64_t ns, TimeUnit unit) noexcept {
  return unit == TimeUnit::kMicrosecond ? ns / kNsPerUs : ns / kNsPerMs;
}

int64_t MsIn(int64_t ms, TimeUnit unit) noexcept {
  return unit == TimeUnit::kMicrosecond ? ms * kUsPerMs : ms;
}

std::string DepthUpdateJson(const engine::EngineConfig& config, const marketdata::DepthDiff& d,
                            int64_t event_ns, TimeUnit unit) {
  const MarketFormat f(config, d.market);
  Buf b;
  Obj o(b);
  o.Str("e", "depthUpdate")
      .Int("E", NsIn(event_ns, unit))
      .Str("s", f.spec().symbol)
      .Uint("U", d.first_update_id)
      .Uint("u", d.last_update_id)
      .Key("b");
  AppendLevels(b, f, d.bids, d.bids.size());
  o.Key("a");
  AppendLevels(b, f, d.asks, d.asks.size());
  o.End();
  return ToStr(b);
}

std::string PartialDepthJson(const engine::EngineConfig& config, const MarketSnapshot& s,
                             std::size_t levels) {
  return BookJson(config, s, levels);
}

std::string TradeEventJson(const engine::EngineConfig& config, const TradeRow& t, int64_t event_ns,
                           TimeUnit unit) {
  const MarketFormat f(config, t.market);
  Buf b;
  Obj o(b);
  o.Str("e", "trade")
      .Int("E", NsIn(event_ns, unit))
      .Str("s", f.spec().symbol)
      .Uint("t", Raw(t.id))
      .Dec("p", f.Price(t.price))
      .Dec("q", f.Qty(t.qty))
      .Int("T", NsIn(t.time_ns, unit))
      .Bool("m", t.buyer_is_maker)
      .Bool("M", true);
  o.End();
  return ToStr(b);
}

std::string AggTradeEventJson(const engine::EngineConfig& config, const marketdata::AggTrade& t,
                              int64_t event_ns, TimeUnit unit) {
  const MarketFormat f(config, t.market);
  Buf b;
  Obj o(b);
  o.Str("e", "aggTrade")
      .Int("E", NsIn(event_ns, unit))
      .Str("s", f.spec().symbol)
      .Uint("a", Raw(t.id))
      .Dec("p", f.Price(t.price))
      .Dec("q", f.Qty(t.qty))
      .Uint("f", Raw(t.first))
      .Uint("l", Raw(t.last))
      .Int("T", NsIn(t.time_ns, unit))
      .Bool("m", t.buyer_is_maker)
      .Bool("M", true);
  o.End();
  return ToStr(b);
}

std::string TickerEventJson(const engine::EngineConfig& config, const MarketSnapshot& s,
                            int64_t event_ns, TimeUnit unit) {
  Buf b;
  Obj o(b);
  o.Str("e", "24hrTicker").Int("E", NsIn(event_ns, unit));
  AppendTicker(o, kEventTickerKeys, MarketFormat(config, s.market), s, Ms(event_ns), unit);
  o.End();
  return ToStr(b);
}

std::string MiniTickerEventJson(const engine::EngineConfig& config, const MarketSnapshot& s,
                                int64_t event_ns, TimeUnit unit) {
  const MarketFormat f(config, s.market);
  const marketdata::Ticker24h t = s.Ticker(Ms(event_ns));
  Buf b;
  Obj o(b);
  o.Str("e", "24hrMiniTicker")
      .Int("E", NsIn(event_ns, unit))
      .Str("s", f.spec().symbol)
      .Dec("c", f.Price(t.last))
      .Dec("o", f.Price(t.open))
      .Dec("h", f.Price(t.high))
      .Dec("l", f.Price(t.low))
      .Dec("v", f.Base(t.base_volume))
      .Dec("q", f.Quote(t.quote_volume));
  o.End();
  return ToStr(b);
}

std::string WindowTickerEventJson(const engine::EngineConfig& config, const MarketSnapshot& s,
                                  std::string_view window, int64_t window_ms, int64_t event_ns,
                                  TimeUnit unit) {
  const MarketFormat f(config, s.market);
  const marketdata::Ticker24h t = s.Rolling(window_ms, Ms(event_ns));
  const TickerFigures fig = Figures(f, t);
  std::string event(window);
  event += "Ticker";
  Buf b;
  Obj o(b);
  o.Str("e", event)
      .Int("E", NsIn(event_ns, unit))
      .Str("s", f.spec().symbol)
      .Dec("p", fig.change)
      .Dec("P", fig.change_pct)
      .Dec("o", f.Price(t.open))
      .Dec("h", f.Price(t.high))
      .Dec("l", f.Price(t.low))
      .Dec("c", f.Price(t.last))
      .Dec("w", fig.weighted_avg)
      .Dec("v", f.Base(t.base_volume))
      .Dec("q", f.Quote(t.quote_volume))
      .Int("O", MsIn(t.open_time_ms, unit))
      .Int("C", MsIn(t.close_time_ms, unit))
      .Int("F", TradeIdOrNone(t.any_trade, t.first_trade))
      .Int("L", TradeIdOrNone(t.any_trade, t.last_trade))
      .Uint("n", t.trades);
  o.End();
  return ToStr(b);
}

std::string AvgPriceEventJson(const engine::EngineConfig& config, const MarketSnapshot& s,
                              int64_t event_ns, TimeUnit unit) {
  const MarketFormat f(config, s.market);
  const MarketSnapshot::AvgPrice a = s.AveragePrice(Ms(event_ns));
  Buf b;
  Obj o(b);
  o.Str("e", "avgPrice")
      .Int("E", NsIn(event_ns, unit))
      .Str("s", f.spec().symbol)
      .Str("i", "5m")
      .Dec("w", AveragePriceText(f, a))
      .Int("T", MsIn(a.last_trade_ms, unit));
  o.End();
  return ToStr(b);
}

std::string BookTickerEventJson(const engine::EngineConfig& config, const MarketSnapshot& s) {
  const MarketFormat f(config, s.market);
  std::string bid_price, bid_qty, ask_price, ask_qty;
  BestLevel(s.bids, f, &bid_price, &bid_qty);
  BestLevel(s.asks, f, &ask_price, &ask_qty);
  Buf b;
  Obj o(b);
  o.Uint("u", s.last_update_id)
      .Str("s", f.spec().symbol)
      .Dec("b", bid_price)
      .Dec("B", bid_qty)
      .Dec("a", ask_price)
      .Dec("A", ask_qty);
  o.End();
  return ToStr(b);
}

std::string KlineEventJson(const engine::EngineConfig& config, MarketId market,
                           marketdata::KlineInterval interval, const Kline& k, bool closed,
                           int64_t event_ns, TimeUnit unit, int32_t zone_min) {
  const MarketFormat f(config, market);
  const bool any = k.trades > 0;
  Buf b;
  Obj o(b);
  o.Str("e", "kline").Int("E", NsIn(event_ns, unit)).Str("s", f.spec().symbol).Key("k");
  {
    Obj ko(b);
    ko.Int("t", MsIn(k.open_time_ms, unit))
        .Int("T", MsIn(marketdata::KlineNextOpenMs(interval, k.open_time_ms, zone_min), unit) - 1)
        .Str("s", f.spec().symbol)
        .Str("i", marketdata::ToString(interval))
        .Int("f", TradeIdOrNone(any, k.first_trade))
        .Int("L", TradeIdOrNone(any, k.last_trade))
        .Dec("o", f.Price(k.open))
        .Dec("c", f.Price(k.close))
        .Dec("h", f.Price(k.high))
        .Dec("l", f.Price(k.low))
        .Dec("v", f.Base(k.base_volume))
        .Uint("n", k.trades)
        .Bool("x", closed)
        .Dec("q", f.Quote(k.quote_volume))
        .Dec("V", f.Base(k.taker_buy_base))
        .Dec("Q", f.Quote(k.taker_buy_quote))
        .Dec("B", "0");
    ko.End();
  }
  o.End();
  return ToStr(b);
}

// --- user data ---

std::string ExecutionReportJson(const engine::EngineConfig& config,
                                const marketdata::ExecutionReport& r, int64_t event_ms) {
  const OrderRecord& ord = r.order;
  const MarketFormat f(config, ord.terms.market);
  const Fill* fill = r.fill ? &*r.fill : nullptr;
  // Binance names the canceled order's client id in C (c is then the cancel
  // request's own id, which the read side does not keep: the order's id
  // stands in); ccxt takes C when it is non-empty.
  // An amend that changed the client order id names the previous one in C.
  const std::string_view orig_client_id =
      r.type == marketdata::ExecType::kCanceled  ? ord.client_order_id.view()
      : r.type == marketdata::ExecType::kAmended ? r.orig_client_order_id.view()
                                                 : std::string_view();
  Buf b;
  Obj o(b);
  o.Str("e", "executionReport")
      .Int("E", event_ms)
      .Str("s", f.spec().symbol)
      .Str("c", ord.client_order_id.view())
      .Str("S", engine::ToString(ord.terms.side))
      .Str("o", engine::ToString(ord.terms.type))
      .Str("f", TifString(ord))
      .Dec("q", f.Qty(ord.terms.qty))
      .Dec("p", f.Price(ord.terms.price))
      .Dec("P", f.Price(ord.stop_price))
      .Dec("F", f.Qty(ord.iceberg_qty))
      .Int("g", ListId(ord))
      .Str("C", orig_client_id)
      .Str("x", r.type == marketdata::ExecType::kExpired &&
                        StatusString(ord) == std::string_view("EXPIRED_IN_MATCH")
                    ? std::string_view("TRADE_PREVENTION")
                    : marketdata::ToString(r.type))
      .Str("X", StatusString(ord))
      .Str("r", RejectString(r.reject))
      .Uint("i", Raw(ord.id))
      .Dec("l", f.Qty(fill ? fill->qty : mb::Qty{0}))
      .Dec("z", f.Qty(ord.executed))
      .Dec("L", f.Price(fill ? fill->price : mb::Price{0}));
  if (fill) {
    o.Dec("n", AssetAmount(config, fill->commission_asset, fill->commission))
        .Str("N", Asset(config, fill->commission_asset).symbol);
  } else {
    o.Dec("n", "0").Null("N");
  }
  o.Int("T", Ms(r.time_ns))
      .Int("t", fill ? static_cast<int64_t>(Raw(fill->trade_id)) : -1)
      .Uint("I", Raw(r.seq))
      .Bool("w", ord.working)
      .Bool("m", fill ? fill->is_maker : false)
      .Bool("M", false)
      .Int("O", Ms(ord.time_ns))
      .Dec("Z", f.Quote(ord.cumulative_quote))
      .Dec("Y", f.Quote(fill ? fill->notional : Amount{0}))
      .Dec("Q", f.Quote(ord.quote_qty));
  // W: only once the order works (never for a conditional order that waits).
  if (const std::optional<int64_t> working = marketdata::WorkingNs(ord)) o.Int("W", Ms(*working));
  o.Str("V", engine::ToString(ord.terms.stp));
  if (ord.trailing_delta != 0) {
    o.Int("d", ord.trailing_delta).Int("D", ord.trailing_ns != 0 ? Ms(ord.trailing_ns) : -1);
  }
  o.End();
  return ToStr(b);
}

std::string ListStatusJson(const engine::EngineConfig& config,
                           const marketdata::ListStatusReport& r, int64_t event_ms) {
  const marketdata::ListRecord& l = r.list;
  const MarketFormat f(config, l.market);
  Buf b;
  Obj o(b);
  o.Str("e", "listStatus")
      .Int("E", event_ms)
      .Str("s", f.spec().symbol)
      .Uint("g", l.id)
      .Str("c", ContingencyType(l.type))
      .Str("l", ListStatusType(l))
      .Str("L", ListOrderStatus(l))
      .Str("r", "NONE")
      .Str("C", l.list_client_order_id.view())
      .Int("T", Ms(r.time_ns))
      .Key("O");
  b.push_back('[');
  for (std::size_t k = 0; k < l.size(); ++k) {
    if (k > 0) b.push_back(',');
    Obj oo(b);
    oo.Str("s", f.spec().symbol).Uint("i", Raw(l.orders[k])).Str("c", l.client_ids[k].view());
    oo.End();
  }
  b.push_back(']');
  o.End();
  return ToStr(b);
}

std::string AccountPositionJson(const engine::EngineConfig& config,
                                std::span<const marketdata::BalanceRow> balances,
                                int64_t event_ms) {
  Buf b;
  Obj o(b);
  // u (time of the last account update) is this batch's time: the balances
  // listed are the ones it changed.
  o.Str("e", "outboundAccountPosition").Int("E", event_ms).Int("u", event_ms).Key("B");
  b.push_back('[');
  for (std::size_t i = 0; i < balances.size(); ++i) {
    const marketdata::BalanceRow& row = balances[i];
    if (i > 0) b.push_back(',');
    Obj bo(b);
    bo.Str("a", Asset(config, row.asset).symbol)
        .Dec("f", AssetAmount(config, row.asset, row.available))
        .Dec("l", AssetAmount(config, row.asset, row.locked));
    bo.End();
  }
  b.push_back(']');
  o.End();
  return ToStr(b);
}

std::string BalanceUpdateJson(const engine::EngineConfig& config, const marketdata::BalanceDelta& d,
                              int64_t event_ms) {
  Buf b;
  Obj o(b);
  o.Str("e", "balanceUpdate")
      .Int("E", event_ms)
      .Str("a", Asset(config, d.asset).symbol)
      .Dec("d", AssetAmount(config, d.asset, d.delta))
      .Int("T", Ms(d.time_ns));
  o.End();
  return ToStr(b);
}

}  // namespace mb::gateway
