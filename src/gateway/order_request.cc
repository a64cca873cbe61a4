// Checks run in Binance's order: the symbol, then the enumerations (side,
// type, timeInForce), then which parameters are present, then the formats of
// the optional ones, then the numbers against the symbol's filters
// (PRICE_FILTER, LOT_SIZE / MARKET_LOT_SIZE, NOTIONAL, TRAILING_DELTA), and
// last whether the symbol enables the order type. Every error leaves the
// output untouched.
//
// A parameter counts as "sent" for the not-required checks (-1106) and the
// MARKET quantity/quoteOrderQty choice when it is present and non-empty, as
// Binance treats an empty value like a missing one there; a required
// parameter that is present but empty is -1105.
#include "gateway/order_request.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/checked.h"
#include "common/decimal.h"
#include "common/strong.h"
#include "engine/types.h"
#include "gateway/auth.h"

namespace mb::gateway {
namespace {

// Binance's patterns, quoted in its -1100 messages.
constexpr std::string_view kDecimalRange = R"(^([0-9]{1,20})(\.[0-9]{1,20})?$)";
constexpr std::string_view kClientIdRange = R"(^[\.A-Z\:/a-z0-9_-]{1,36}$)";

ApiError IllegalChars(std::string_view name, std::string_view legal_range) {
  std::string msg = "Illegal characters found in parameter '";
  msg.append(name).append("'; legal range is '").append(legal_range).append("'.");
  return ApiError{400, -1100, std::move(msg)};
}

// Binance's -1102 text when one of two alternatives must be sent.
ApiError EitherMissing(std::string_view a, std::string_view b) {
  std::string msg = "Param '";
  msg.append(a).append("' or '").append(b).append("' must be sent, but both were empty/null!");
  return ApiError{400, -1102, std::move(msg)};
}

// ^[.A-Z:/a-z0-9_-]{1,36}$
bool ValidClientId(std::string_view s) {
  if (s.empty() || s.size() > ClientOrderId::kCapacity) return false;
  for (const char c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == ':' || c == '/' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Present and non-empty.
std::optional<std::string_view> Sent(const Params& params, std::string_view name) {
  std::optional<std::string_view> v = params.Get(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

// An optional parameter: absent → nullopt, present but empty → -1105.
std::optional<ApiError> Optional(const Params& params, std::string_view name,
                                 std::optional<std::string_view>* out) {
  std::optional<std::string_view> v = params.Get(name);
  if (v && v->empty()) return ApiError::EmptyParam(name);
  *out = v;
  return std::nullopt;
}

// A non-negative decimal in units of 10^-scale. A value too large for int64
// units is far above any filter's maximum: it fails `overflow_filter`, or is
// refused as illegal when there is no such filter.
std::optional<ApiError> ParseUnits(std::string_view text, std::string_view name, int scale,
                                   std::string_view overflow_filter, int64_t* out) {
  switch (TryParseDecimal(text, scale, /*allow_negative=*/false, out)) {
    case DecimalError::kOk:
      return std::nullopt;
    case DecimalError::kTooManyDecimals:
      return ApiError::TooMuchPrecision(name);
    case DecimalError::kOverflow:
      if (!overflow_filter.empty()) return ApiError::FilterFailure(overflow_filter);
      return IllegalChars(name, kDecimalRange);
    case DecimalError::kBadScale:
    case DecimalError::kSyntax:
    case DecimalError::kNegative:
      break;
  }
  return IllegalChars(name, kDecimalRange);
}

// Quantity in base units → lots, against [min_qty, max_qty] and the step.
std::optional<ApiError> CheckLots(const engine::MarketSpec& m, int64_t units,
                                  std::string_view filter, Qty* out) {
  if (units <= 0 || units % m.lot_units != 0) return ApiError::FilterFailure(filter);
  const Qty lots{units / m.lot_units};
  if (lots < m.min_qty || lots > m.max_qty) return ApiError::FilterFailure(filter);
  *out = lots;
  return std::nullopt;
}

// A price (or stop price) in quote units → ticks: a positive multiple of
// the tick, at most the market's max price (PRICE_FILTER).
std::optional<ApiError> CheckPrice(const engine::MarketSpec& m, int64_t units, Price* out) {
  if (units <= 0 || units % m.tick_units != 0 || units / m.tick_units > m.max_price.value) {
    return ApiError::FilterFailure("PRICE_FILTER");
  }
  *out = Price{units / m.tick_units};
  return std::nullopt;
}

// Binance's order type names (case-sensitive).
bool ParseOrderType(std::string_view name, engine::OrderType* out) {
  for (const engine::OrderType t : kOrderTypes) {
    if (engine::ToString(t) == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

// Binance's -2010 text for an order type a symbol does not enable.
std::string NotSupportedText(engine::OrderType t) {
  using engine::OrderType;
  switch (t) {
    case OrderType::kLimit:
      return "Limit orders are not supported for this symbol.";
    case OrderType::kLimitMaker:
      return "Limit maker orders are not supported for this symbol.";
    case OrderType::kMarket:
      return "Market orders are not supported for this symbol.";
    case OrderType::kStopLoss:
      return "Stop loss orders are not supported for this symbol.";
    case OrderType::kStopLossLimit:
      return "Stop loss limit orders are not supported for this symbol.";
    case OrderType::kTakeProfit:
      return "Take profit orders are not supported for this symbol.";
    case OrderType::kTakeProfitLimit:
      return "Take profit limit orders are not supported for this symbol.";
  }
  return "Unsupported order combination";
}

}  // namespace

std::optional<ApiError> FindMarket(const engine::EngineConfig& config, std::string_view symbol,
                                   MarketId* out) {
  for (std::size_t i = 0; i < config.markets.size(); ++i) {
    if (config.markets[i].symbol == symbol) {
      *out = MarketId{static_cast<uint16_t>(i)};
      return std::nullopt;
    }
  }
  return ApiError::BadSymbol();
}

std::optional<ApiError> ParseNewOrder(const Params& params, const engine::EngineConfig& config,
                                      AccountId account, NewOrder* out,
                                      std::span<const MarketRules> rules) {
  using engine::OrderType;
  using engine::Side;
  using engine::StpMode;
  using engine::TimeInForce;

  std::string_view symbol;
  if (auto e = params.Require("symbol", &symbol)) return e;
  MarketId market{};
  if (auto e = FindMarket(config, symbol, &market)) return e;
  const engine::MarketSpec& m = config.markets[Raw(market)];

  NewOrder order;
  engine::PlaceOrder& p = order.place;
  p.account = account;
  p.market = market;

  std::string_view side;
  if (auto e = params.Require("side", &side)) return e;
  if (side == "BUY") {
    p.side = Side::kBuy;
  } else if (side == "SELL") {
    p.side = Side::kSell;
  } else {
    return ApiError::InvalidSide();
  }

  std::string_view type;
  if (auto e = params.Require("type", &type)) return e;
  if (!ParseOrderType(type, &p.type)) return ApiError::InvalidOrderType();
  const bool market_order = p.type == OrderType::kMarket;
  // MARKET, STOP_LOSS, TAKE_PROFIT: no price, matched IOC.
  const bool market_like = engine::IsMarketLike(p.type);
  const bool conditional = engine::IsConditional(p.type);

  if (p.type == OrderType::kLimit || p.type == OrderType::kStopLossLimit ||
      p.type == OrderType::kTakeProfitLimit) {
    std::string_view tif;
    if (auto e = params.Require("timeInForce", &tif)) return e;
    if (tif == "GTC") {
      p.tif = TimeInForce::kGtc;
    } else if (tif == "IOC") {
      p.tif = TimeInForce::kIoc;
    } else if (tif == "FOK") {
      p.tif = TimeInForce::kFok;
    } else {
      return ApiError::InvalidTif();
    }
  } else {
    if (Sent(params, "timeInForce")) return ApiError::NotRequired("timeInForce");
    // LIMIT_MAKER rests GTC; the market-like types never rest (the engine
    // applies IOC).
    p.tif = market_like ? TimeInForce::kIoc : TimeInForce::kGtc;
  }

  std::string_view price_text;
  std::optional<std::string_view> qty_text;
  std::optional<std::string_view> quote_text;
  if (!market_like) {
    if (auto e = params.Require("price", &price_text)) return e;
    std::string_view q;
    if (auto e = params.Require("quantity", &q)) return e;
    qty_text = q;
    if (Sent(params, "quoteOrderQty")) return ApiError::NotRequired("quoteOrderQty");
  } else if (!market_order) {
    // STOP_LOSS, TAKE_PROFIT: by base quantity only.
    if (Sent(params, "price")) return ApiError::NotRequired("price");
    std::string_view q;
    if (auto e = params.Require("quantity", &q)) return e;
    qty_text = q;
    if (Sent(params, "quoteOrderQty")) return ApiError::NotRequired("quoteOrderQty");
  } else {
    if (Sent(params, "price")) return ApiError::NotRequired("price");
    qty_text = Sent(params, "quantity");
    quote_text = Sent(params, "quoteOrderQty");
    if (qty_text && quote_text) return ApiError::NotRequired("quoteOrderQty");
    if (!qty_text && !quote_text) return EitherMissing("quantity", "quoteOrderQty");
  }

  const std::optional<std::string_view> stop_text = Sent(params, "stopPrice");
  const std::optional<std::string_view> delta_text = Sent(params, "trailingDelta");
  if (conditional) {
    if (!stop_text && !delta_text) return EitherMissing("stopPrice", "trailingDelta");
  } else {
    if (stop_text) return ApiError::NotRequired("stopPrice");
    if (delta_text) return ApiError::NotRequired("trailingDelta");
  }

  // icebergQty: LIMIT and LIMIT_MAKER only (-1106 for the other types, and
  // for a LIMIT that is not GTC); pegged orders: no symbol enables them
  // (exchangeInfo: pegInstructionsAllowed false).
  const std::optional<std::string_view> iceberg_text = Sent(params, "icebergQty");
  if (iceberg_text && ((p.type != OrderType::kLimit && p.type != OrderType::kLimitMaker) ||
                       p.tif != TimeInForce::kGtc)) {
    return ApiError::NotRequired("icebergQty");
  }
  if (Sent(params, "pegPriceType") || Sent(params, "pegOffsetType") ||
      Sent(params, "pegOffsetValue")) {
    return ApiError::NewOrderRejected("Pegged orders are not supported for this symbol.");
  }
  std::optional<int64_t> strategy_type;
  if (auto e = params.GetInt("strategyType", &strategy_type)) return e;
  if (strategy_type && *strategy_type < 1'000'000) {
    return ApiError{400, -1134, "strategyType was less than 1000000."};
  }
  std::optional<uint64_t> strategy_id;
  if (auto e = params.GetUint("strategyId", &strategy_id)) return e;

  std::optional<std::string_view> client_id;
  if (auto e = Optional(params, "newClientOrderId", &client_id)) return e;
  if (client_id) {
    if (!ValidClientId(*client_id)) return IllegalChars("newClientOrderId", kClientIdRange);
    if (!p.client_order_id.Assign(*client_id)) {
      return IllegalChars("newClientOrderId", kClientIdRange);  // unreachable: length checked
    }
    order.client_order_id = std::string(*client_id);
  }

  std::optional<std::string_view> resp;
  if (auto e = Optional(params, "newOrderRespType", &resp)) return e;
  if (!resp) {
    // Binance: FULL for MARKET and LIMIT, ACK for every other type.
    order.resp = p.type == OrderType::kLimit || market_order ? RespType::kFull : RespType::kAck;
  } else if (*resp == "ACK") {
    order.resp = RespType::kAck;
  } else if (*resp == "RESULT") {
    order.resp = RespType::kResult;
  } else if (*resp == "FULL") {
    order.resp = RespType::kFull;
  } else {
    return ApiError::BadParam("newOrderRespType", "Use ACK, RESULT or FULL.");
  }

  std::optional<std::string_view> stp;
  if (auto e = Optional(params, "selfTradePreventionMode", &stp)) return e;
  if (!stp || *stp == "NONE") {
    p.stp = StpMode::kNone;
  } else if (*stp == "EXPIRE_TAKER") {
    p.stp = StpMode::kExpireTaker;
  } else if (*stp == "EXPIRE_MAKER") {
    p.stp = StpMode::kExpireMaker;
  } else if (*stp == "EXPIRE_BOTH") {
    p.stp = StpMode::kExpireBoth;
  } else {
    return ApiError::BadParam("selfTradePreventionMode",
                              "Use NONE, EXPIRE_TAKER, EXPIRE_MAKER or EXPIRE_BOTH.");
  }

  const int base_scale = config.assets[Raw(m.base)].scale;
  const int quote_scale = config.assets[Raw(m.quote)].scale;
  if (!market_like) {
    int64_t price_units = 0;
    int64_t qty_units = 0;
    if (auto e = ParseUnits(price_text, "price", quote_scale, "PRICE_FILTER", &price_units)) {
      return e;
    }
    if (auto e = ParseUnits(*qty_text, "quantity", base_scale, "LOT_SIZE", &qty_units)) return e;
    if (auto e = CheckPrice(m, price_units, &p.price)) return e;
    if (auto e = CheckLots(m, qty_units, "LOT_SIZE", &p.qty)) return e;
    // Below max_price x max_qty, which Validate() keeps within int64.
    const int128 notional =
        static_cast<int128>(p.price.value) * p.qty.value * m.notional_per_tick_lot;
    if (notional < m.min_notional.value) return ApiError::FilterFailure("NOTIONAL");
  } else if (qty_text) {
    int64_t qty_units = 0;
    if (auto e = ParseUnits(*qty_text, "quantity", base_scale, "MARKET_LOT_SIZE", &qty_units)) {
      return e;
    }
    if (auto e = CheckLots(m, qty_units, "MARKET_LOT_SIZE", &p.qty)) return e;
  } else {
    // quoteOrderQty is in quote units: parsing at the quote scale makes it a
    // whole number of them (-1111 otherwise).
    int64_t quote_units = 0;
    if (auto e = ParseUnits(*quote_text, "quoteOrderQty", quote_scale, "", &quote_units)) {
      return e;
    }
    if (quote_units <= 0 || quote_units < m.min_notional.value) {
      return ApiError::FilterFailure("NOTIONAL");
    }
    p.quote_qty = Amount{quote_units};
  }

  const MarketRules& r = RulesOf(rules, market);
  if (stop_text) {
    int64_t stop_units = 0;
    if (auto e = ParseUnits(*stop_text, "stopPrice", quote_scale, "PRICE_FILTER", &stop_units)) {
      return e;
    }
    if (auto e = CheckPrice(m, stop_units, &p.stop_price)) return e;
  }
  if (delta_text) {
    std::optional<int64_t> delta;
    if (auto e = params.GetInt("trailingDelta", &delta)) return e;
    // "Above": the stops that trigger on a rise (STOP_LOSS* BUY,
    // TAKE_PROFIT* SELL); "below": the others (Binance's trailing stop FAQ).
    const bool above = engine::TriggersOnRise(p.type, p.side);
    const int64_t lo = above ? r.min_trailing_above : r.min_trailing_below;
    const int64_t hi = above ? r.max_trailing_above : r.max_trailing_below;
    if (!delta || *delta < lo || *delta > hi) return ApiError::FilterFailure("TRAILING_DELTA");
    p.trailing_delta = static_cast<int32_t>(*delta);
  }

  if (iceberg_text) {
    // LOT_SIZE applies to the slice; it must be below the quantity, and the
    // quantity at most ICEBERG_PARTS slices.
    int64_t units = 0;
    if (auto e = ParseUnits(*iceberg_text, "icebergQty", base_scale, "LOT_SIZE", &units)) return e;
    if (auto e = CheckLots(m, units, "LOT_SIZE", &p.iceberg_qty)) return e;
    if (p.iceberg_qty >= p.qty) return ApiError::NewOrderRejected("Invalid icebergQty.");
    if (!r.IcebergAllowed()) {
      return ApiError::NewOrderRejected("Iceberg orders are not supported for this symbol.");
    }
    const int64_t parts = (p.qty.value + p.iceberg_qty.value - 1) / p.iceberg_qty.value;
    if (parts > static_cast<int64_t>(r.iceberg_parts)) {
      return ApiError::FilterFailure("ICEBERG_PARTS");
    }
  }

  // The market's order types: Binance refuses a type the symbol does not
  // enable once the request is otherwise valid.
  if (!r.Allows(p.type)) return ApiError::NewOrderRejected(NotSupportedText(p.type));

  *out = std::move(order);
  return std::nullopt;
}

std::optional<ApiError> ParseCancelTarget(const Params& params, std::string_view id_param,
                                          std::string_view client_id_param,
                                          engine::CancelOrder* c) {
  std::optional<uint64_t> order_id;
  if (auto e = params.GetUint(id_param, &order_id)) return e;
  const std::optional<std::string_view> client_id = Sent(params, client_id_param);
  if (!order_id && !client_id) return EitherMissing(client_id_param, id_param);
  if (order_id) {
    // Order ids are sequences, which start at 1; 0 would mean "by client id"
    // to the engine.
    if (*order_id == 0) return ApiError::CancelRejected("Unknown order sent.");
    c->order_id = OrderId{*order_id};
  }
  if (client_id) {
    // An id no order can have (the pattern of newClientOrderId) names no
    // order; with an order id too, it cannot be that order's.
    if (!ValidClientId(*client_id) || !c->orig_client_order_id.Assign(*client_id)) {
      return ApiError::CancelRejected("Unknown order sent.");
    }
  }
  std::optional<std::string_view> restriction;
  if (auto e = Optional(params, "cancelRestrictions", &restriction)) return e;
  if (restriction) {
    if (*restriction == "ONLY_NEW") {
      c->restriction = engine::CancelRestriction::kOnlyNew;
    } else if (*restriction == "ONLY_PARTIALLY_FILLED") {
      c->restriction = engine::CancelRestriction::kOnlyPartiallyFilled;
    } else {
      return ApiError::InvalidCancelRestrictions();
    }
  }
  return std::nullopt;
}

std::optional<ApiError> CancelClientId(const Params& params, std::string_view param,
                                       std::string* out) {
  std::optional<std::string_view> id;
  if (auto e = Optional(params, param, &id)) return e;
  if (!id) {
    *out = NewClientId();
    return std::nullopt;
  }
  if (!ValidClientId(*id)) return IllegalChars(param, kClientIdRange);
  *out = std::string(*id);
  return std::nullopt;
}

std::string NewClientId() { return "mb-" + RandomToken(22); }

std::optional<ApiError> ParseCancel(const Params& params, const engine::EngineConfig& config,
                                    AccountId account, engine::CancelOrder* out) {
  std::string_view symbol;
  if (auto e = params.Require("symbol", &symbol)) return e;
  MarketId market{};
  if (auto e = FindMarket(config, symbol, &market)) return e;
  engine::CancelOrder c;
  c.account = account;
  c.market = market;
  if (auto e = ParseCancelTarget(params, "orderId", "origClientOrderId", &c)) return e;
  *out = c;
  return std::nullopt;
}

namespace {

// One order of a list: its parameters under the list's names (`prefix` +
// the capitalised name: abovePrice, workingTimeInForce, ...), re-read as a
// single order's by ParseNewOrder; its errors name the list's parameters.
std::string LegParam(std::string_view prefix, std::string_view name) {
  std::string out(prefix);
  out.push_back(static_cast<char>(name[0] - 'a' + 'A'));
  out.append(name.substr(1));
  return out;
}

// The names a single order reads, as the list's parameters of one order.
constexpr std::string_view kLegFields[] = {
    "type", "price", "stopPrice", "trailingDelta", "timeInForce", "icebergQty", "clientOrderId"};

std::optional<ApiError> ParseLeg(const Params& params, const engine::EngineConfig& config,
                                 AccountId account, std::span<const MarketRules> rules,
                                 std::string_view symbol, std::string_view side_param,
                                 std::string_view qty_param, std::string_view prefix,
                                 std::string_view stp, NewOrder* out) {
  std::vector<std::pair<std::string, std::string>> items;
  // name in the single order -> name in the list
  std::vector<std::pair<std::string, std::string>> names;
  auto copy = [&](std::string_view single, const std::string& listed) {
    names.emplace_back(std::string(single), listed);
    if (auto v = params.Get(listed)) items.emplace_back(std::string(single), std::string(*v));
  };
  items.emplace_back("symbol", std::string(symbol));
  copy("side", std::string(side_param));
  copy("quantity", std::string(qty_param));
  for (const std::string_view f : kLegFields) {
    const std::string listed = LegParam(prefix, f);
    copy(f == "clientOrderId" ? std::string_view("newClientOrderId") : f, listed);
  }
  if (!stp.empty()) items.emplace_back("selfTradePreventionMode", std::string(stp));
  const Params leg = Params::FromPairs(std::move(items));
  if (auto e = ParseNewOrder(leg, config, account, out, rules)) {
    // The single order's parameter names in the message become the list's.
    for (const auto& [single, listed] : names) {
      const std::string quoted = "'" + single + "'";
      for (std::size_t at = e->msg.find(quoted); at != std::string::npos;
           at = e->msg.find(quoted, at + listed.size() + 2)) {
        e->msg.replace(at, quoted.size(), "'" + listed + "'");
      }
    }
    return e;
  }
  return std::nullopt;
}

engine::ListOrder ToListOrder(const NewOrder& o) {
  engine::ListOrder l;
  l.side = o.place.side;
  l.type = o.place.type;
  l.tif = o.place.tif;
  l.trailing_delta = o.place.trailing_delta;
  l.price = o.place.price;
  l.qty = o.place.qty;
  l.stop_price = o.place.stop_price;
  l.iceberg_qty = o.place.iceberg_qty;
  l.client_order_id = o.place.client_order_id;
  return l;
}

bool OcoAboveType(engine::Side side, engine::OrderType t) {
  using engine::OrderType;
  if (side == engine::Side::kSell) {
    return t == OrderType::kLimitMaker || t == OrderType::kTakeProfit ||
           t == OrderType::kTakeProfitLimit;
  }
  return t == OrderType::kStopLoss || t == OrderType::kStopLossLimit;
}

bool OcoBelowType(engine::Side side, engine::OrderType t) {
  return OcoAboveType(engine::Opposite(side), t);
}

// The price an OCO order is placed at for the pair's order: a LIMIT_MAKER's
// price, any other's stop price (0: a trailing stop without one).
int64_t OcoLevel(const engine::ListOrder& o) {
  return o.type == engine::OrderType::kLimitMaker ? o.price.value : o.stop_price.value;
}

// An OCO pair (above, below): the types each may have (-1158 for a type no
// OCO order may have) and their prices (-2010).
std::optional<ApiError> CheckOcoPair(const engine::ListOrder& above,
                                     const engine::ListOrder& below) {
  if (!OcoAboveType(above.side, above.type) || !OcoBelowType(below.side, below.type)) {
    return ApiError::NewOrderRejected(
        "The relationship of the prices for the orders is not correct.");
  }
  const int64_t hi = OcoLevel(above);
  const int64_t lo = OcoLevel(below);
  if (hi != 0 && lo != 0 && hi <= lo) {
    return ApiError::NewOrderRejected(
        "The relationship of the prices for the orders is not correct.");
  }
  return std::nullopt;
}

// aboveType / belowType / pending*Type of an OCO order: one of the five OCO
// order types (-1158 otherwise), checked before the orders themselves.
std::optional<ApiError> OcoTypeParam(const Params& params, const std::string& name) {
  std::string_view t;
  if (auto e = params.Require(name, &t)) return e;
  if (t != "STOP_LOSS_LIMIT" && t != "STOP_LOSS" && t != "LIMIT_MAKER" && t != "TAKE_PROFIT" &&
      t != "TAKE_PROFIT_LIMIT") {
    return ApiError{400, -1158, "Order type not supported in OCO."};
  }
  return std::nullopt;
}

// listClientOrderId, newOrderRespType and selfTradePreventionMode of a list.
std::optional<ApiError> ListCommon(const Params& params, NewOrderList* out, std::string* stp) {
  std::optional<std::string_view> cid;
  if (auto e = Optional(params, "listClientOrderId", &cid)) return e;
  if (cid) {
    if (!ValidClientId(*cid) || !out->place.list_client_order_id.Assign(*cid)) {
      return IllegalChars("listClientOrderId", kClientIdRange);
    }
    out->list_client_order_id = std::string(*cid);
  }
  std::optional<std::string_view> resp;
  if (auto e = Optional(params, "newOrderRespType", &resp)) return e;
  if (!resp || *resp == "FULL") {
    out->resp = RespType::kFull;
  } else if (*resp == "ACK") {
    out->resp = RespType::kAck;
  } else if (*resp == "RESULT") {
    out->resp = RespType::kResult;
  } else {
    return ApiError::BadParam("newOrderRespType", "Use ACK, RESULT or FULL.");
  }
  std::optional<std::string_view> s;
  if (auto e = Optional(params, "selfTradePreventionMode", &s)) return e;
  *stp = s ? std::string(*s) : std::string();
  return std::nullopt;
}

// Each order of the list gets a client order id (generated when not sent).
void AssignClientIds(NewOrderList* out) {
  for (std::size_t k = 0; k < out->count; ++k) {
    engine::ListOrder& o = out->place.orders[k];
    if (o.client_order_id.empty()) (void)o.client_order_id.Assign(NewClientId());
  }
  if (out->list_client_order_id.empty()) {
    out->list_client_order_id = NewClientId();
    (void)out->place.list_client_order_id.Assign(out->list_client_order_id);
  }
}

std::optional<ApiError> ListSymbol(const Params& params, const engine::EngineConfig& config,
                                   std::string_view* symbol, MarketId* market) {
  if (auto e = params.Require("symbol", symbol)) return e;
  return FindMarket(config, *symbol, market);
}

}  // namespace

std::optional<ApiError> ParseOcoList(const Params& params, const engine::EngineConfig& config,
                                     AccountId account, NewOrderList* out,
                                     std::span<const MarketRules> rules) {
  NewOrderList list;
  std::string_view symbol;
  if (auto e = ListSymbol(params, config, &symbol, &list.place.market)) return e;
  list.place.account = account;
  list.place.type = engine::ListType::kOco;
  list.count = 2;
  std::string stp;
  if (auto e = ListCommon(params, &list, &stp)) return e;
  if (auto e = OcoTypeParam(params, "aboveType")) return e;
  if (auto e = OcoTypeParam(params, "belowType")) return e;
  NewOrder above, below;
  if (auto e = ParseLeg(params, config, account, rules, symbol, "side", "quantity", "above", stp,
                        &above)) {
    return e;
  }
  if (auto e = ParseLeg(params, config, account, rules, symbol, "side", "quantity", "below", stp,
                        &below)) {
    return e;
  }
  list.place.stp = above.place.stp;
  list.place.orders[0] = ToListOrder(above);
  list.place.orders[1] = ToListOrder(below);
  if (auto e = CheckOcoPair(list.place.orders[0], list.place.orders[1])) {
    return e;
  }
  AssignClientIds(&list);
  *out = std::move(list);
  return std::nullopt;
}

namespace {

// The working order of OTO / OTOCO: LIMIT or LIMIT_MAKER.
std::optional<ApiError> ParseWorking(const Params& params, const engine::EngineConfig& config,
                                     AccountId account, std::span<const MarketRules> rules,
                                     std::string_view symbol, std::string_view stp, NewOrder* out) {
  std::string_view t;
  if (auto e = params.Require("workingType", &t)) return e;
  if (t != "LIMIT" && t != "LIMIT_MAKER") {
    return ApiError{400, -1158, "Order type not supported in OTO."};
  }
  return ParseLeg(params, config, account, rules, symbol, "workingSide", "workingQuantity",
                  "working", stp, out);
}

}  // namespace

std::optional<ApiError> ParseOtoList(const Params& params, const engine::EngineConfig& config,
                                     AccountId account, NewOrderList* out,
                                     std::span<const MarketRules> rules) {
  NewOrderList list;
  std::string_view symbol;
  if (auto e = ListSymbol(params, config, &symbol, &list.place.market)) return e;
  list.place.account = account;
  list.place.type = engine::ListType::kOto;
  list.count = 2;
  std::string stp;
  if (auto e = ListCommon(params, &list, &stp)) return e;
  NewOrder working, pending;
  if (auto e = ParseWorking(params, config, account, rules, symbol, stp, &working)) return e;
  if (auto e = ParseLeg(params, config, account, rules, symbol, "pendingSide", "pendingQuantity",
                        "pending", stp, &pending)) {
    return e;
  }
  if (pending.place.quote_qty.value != 0) return ApiError::NotRequired("pendingQuoteOrderQty");
  list.place.stp = working.place.stp;
  list.place.orders[0] = ToListOrder(working);
  list.place.orders[1] = ToListOrder(pending);
  AssignClientIds(&list);
  *out = std::move(list);
  return std::nullopt;
}

std::optional<ApiError> ParseOtocoList(const Params& params, const engine::EngineConfig& config,
                                       AccountId account, NewOrderList* out,
                                       std::span<const MarketRules> rules) {
  NewOrderList list;
  std::string_view symbol;
  if (auto e = ListSymbol(params, config, &symbol, &list.place.market)) return e;
  list.place.account = account;
  list.place.type = engine::ListType::kOtoco;
  list.count = 3;
  std::string stp;
  if (auto e = ListCommon(params, &list, &stp)) return e;
  NewOrder working, above, below;
  if (auto e = ParseWorking(params, config, account, rules, symbol, stp, &working)) return e;
  if (auto e = OcoTypeParam(params, "pendingAboveType")) return e;
  if (auto e = OcoTypeParam(params, "pendingBelowType")) return e;
  if (auto e = ParseLeg(params, config, account, rules, symbol, "pendingSide", "pendingQuantity",
                        "pendingAbove", stp, &above)) {
    return e;
  }
  if (auto e = ParseLeg(params, config, account, rules, symbol, "pendingSide", "pendingQuantity",
                        "pendingBelow", stp, &below)) {
    return e;
  }
  list.place.stp = working.place.stp;
  list.place.orders[0] = ToListOrder(working);
  list.place.orders[1] = ToListOrder(above);
  list.place.orders[2] = ToListOrder(below);
  if (auto e = CheckOcoPair(list.place.orders[1], list.place.orders[2])) {
    return e;
  }
  AssignClientIds(&list);
  *out = std::move(list);
  return std::nullopt;
}

std::optional<ApiError> ParseCancelList(const Params& params, const engine::EngineConfig& config,
                                        AccountId account, engine::CancelOrderList* out) {
  std::string_view symbol;
  engine::CancelOrderList c;
  if (auto e = ListSymbol(params, config, &symbol, &c.market)) return e;
  c.account = account;
  std::optional<uint64_t> id;
  if (auto e = params.GetUint("orderListId", &id)) return e;
  const std::optional<std::string_view> cid = Sent(params, "listClientOrderId");
  if (!id && !cid) return EitherMissing("orderListId", "listClientOrderId");
  if (id) {
    if (*id == 0) return ApiError::CancelRejected("Order list does not exist.");
    c.list_id = *id;
  } else if (!ValidClientId(*cid) || !c.list_client_order_id.Assign(*cid)) {
    return ApiError::CancelRejected("Order list does not exist.");
  }
  *out = c;
  return std::nullopt;
}

std::optional<Amount> RequiredLock(const engine::EngineConfig& config,
                                   const engine::PlaceOrder& order) {
  if (Raw(order.market) >= config.markets.size()) return std::nullopt;
  const engine::MarketSpec& m = config.markets[Raw(order.market)];
  const bool buy = order.side == engine::Side::kBuy;
  int64_t lock = 0;
  if (!engine::IsMarketLike(order.type)) {
    // The engine locks the full notional of a limit buy (fees are taken from
    // what the order receives, never locked) and the full quantity of a sell;
    // a stop-limit order locks so while it waits.
    const bool ok =
        buy ? CheckedMul3(order.price.value, order.qty.value, m.notional_per_tick_lot, &lock)
            : CheckedMul3(order.qty.value, m.lot_units, 1, &lock);
    if (!ok) return std::nullopt;
    return Amount{lock};
  }
  const bool by_quote = order.quote_qty.value != 0;
  if (engine::IsConditional(order.type) && buy) {
    // A stop-market buy locks nothing until triggered (then what its walk
    // of the book costs).
    return Amount{0};
  }
  if (buy && by_quote) return order.quote_qty;
  if (!buy && !by_quote) {
    if (!CheckedMul3(order.qty.value, m.lot_units, 1, &lock)) return std::nullopt;
    return Amount{lock};
  }
  // A market buy by base quantity or a market sell by quote amount locks what
  // the book walk costs, which only the engine knows at match time.
  return std::nullopt;
}

}  // namespace mb::gateway
