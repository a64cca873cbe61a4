// Checks run in Binance's order: the symbol, then the enumerations (side,
// type, timeInForce), then which parameters are present, then the formats of
// the optional ones, and last the numbers against the symbol's filters
// (PRICE_FILTER, LOT_SIZE / MARKET_LOT_SIZE, NOTIONAL). Every error leaves the
// output untouched.
//
// A parameter counts as "sent" for the not-required checks (-1106) and the
// MARKET quantity/quoteOrderQty choice when it is present and non-empty, as
// Binance treats an empty value like a missing one there; a required
// parameter that is present but empty is -1105.
#include "gateway/order_request.h"

#include <cstdint>
#include <optional>
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
                                      AccountId account, NewOrder* out) {
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
  if (type == "LIMIT") {
    p.type = OrderType::kLimit;
  } else if (type == "LIMIT_MAKER") {
    p.type = OrderType::kLimitMaker;
  } else if (type == "MARKET") {
    p.type = OrderType::kMarket;
  } else if (type == "STOP_LOSS") {
    // Binance order types Matchbook does not implement (no stop orders):
    // Binance's answer for a symbol that does not enable them.
    return ApiError::NewOrderRejected("Stop loss orders are not supported for this symbol.");
  } else if (type == "STOP_LOSS_LIMIT") {
    return ApiError::NewOrderRejected("Stop loss limit orders are not supported for this symbol.");
  } else if (type == "TAKE_PROFIT") {
    return ApiError::NewOrderRejected("Take profit orders are not supported for this symbol.");
  } else if (type == "TAKE_PROFIT_LIMIT") {
    return ApiError::NewOrderRejected(
        "Take profit limit orders are not supported for this symbol.");
  } else {
    return ApiError::InvalidOrderType();
  }
  const bool market_order = p.type == OrderType::kMarket;

  if (p.type == OrderType::kLimit) {
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
    // LIMIT_MAKER rests GTC; MARKET never rests (the engine applies IOC).
    p.tif = market_order ? TimeInForce::kIoc : TimeInForce::kGtc;
  }

  std::string_view price_text;
  std::optional<std::string_view> qty_text;
  std::optional<std::string_view> quote_text;
  if (!market_order) {
    if (auto e = params.Require("price", &price_text)) return e;
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

  // No symbol enables iceberg orders (exchangeInfo: icebergAllowed false).
  if (Sent(params, "icebergQty")) {
    return ApiError::NewOrderRejected("Iceberg orders are not supported for this symbol.");
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
    order.resp = p.type == OrderType::kLimitMaker ? RespType::kAck : RespType::kFull;
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
  if (!market_order) {
    int64_t price_units = 0;
    int64_t qty_units = 0;
    if (auto e = ParseUnits(price_text, "price", quote_scale, "PRICE_FILTER", &price_units)) {
      return e;
    }
    if (auto e = ParseUnits(*qty_text, "quantity", base_scale, "LOT_SIZE", &qty_units)) return e;
    if (price_units <= 0 || price_units % m.tick_units != 0 ||
        price_units / m.tick_units > m.max_price.value) {
      return ApiError::FilterFailure("PRICE_FILTER");
    }
    p.price = Price{price_units / m.tick_units};
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

std::optional<Amount> RequiredLock(const engine::EngineConfig& config,
                                   const engine::PlaceOrder& order) {
  if (Raw(order.market) >= config.markets.size()) return std::nullopt;
  const engine::MarketSpec& m = config.markets[Raw(order.market)];
  const bool buy = order.side == engine::Side::kBuy;
  int64_t lock = 0;
  if (order.type != engine::OrderType::kMarket) {
    // The engine locks the full notional of a limit buy (fees are taken from
    // what the order receives, never locked) and the full quantity of a sell.
    const bool ok =
        buy ? CheckedMul3(order.price.value, order.qty.value, m.notional_per_tick_lot, &lock)
            : CheckedMul3(order.qty.value, m.lot_units, 1, &lock);
    if (!ok) return std::nullopt;
    return Amount{lock};
  }
  const bool by_quote = order.quote_qty.value != 0;
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
