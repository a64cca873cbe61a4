#include "gateway/api_error.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "common/json_escape.h"

namespace mb::gateway {
namespace {

ApiError Make(int http_status, int code, std::string msg) {
  return ApiError{http_status, code, std::move(msg)};
}

std::string Quoted(std::string_view prefix, std::string_view param, std::string_view suffix) {
  std::string out;
  out.reserve(prefix.size() + param.size() + suffix.size());
  out.append(prefix).append(param).append(suffix);
  return out;
}

// The text of an engine reject of an order (placement or amend).
std::string_view OrderRejectText(engine::RejectReason reason) {
  using engine::RejectReason;
  switch (reason) {
    case RejectReason::kNone:
      return "Order rejected.";
    case RejectReason::kUnknownMarket:
      return "Invalid symbol.";
    case RejectReason::kUnknownAccount:
      return "Unknown account.";
    case RejectReason::kUnknownAsset:
      return "Unknown asset.";
    case RejectReason::kUnauthorized:
      return "This account may not place or cancel orders.";
    case RejectReason::kMarketNotTrading:
      return "Market is closed.";
    case RejectReason::kInvalidOrderType:
      return "Unsupported order combination.";
    case RejectReason::kInvalidPrice:
      return "Filter failure: PRICE_FILTER";
    case RejectReason::kInvalidQuantity:
      return "Filter failure: LOT_SIZE";
    case RejectReason::kMinNotional:
      return "Filter failure: NOTIONAL";
    case RejectReason::kOverflow:
      return "Price * QTY is too large.";
    case RejectReason::kInsufficientBalance:
      return "Account has insufficient balance for requested action.";
    case RejectReason::kWouldTakeLiquidity:
      return "Order would immediately match and take.";
    case RejectReason::kFokNotFillable:
      return "FOK order would not be fully filled.";
    case RejectReason::kDuplicateClientOrderId:
      return "Duplicate order sent.";
    case RejectReason::kUnknownOrder:
      return "Unknown order sent.";
    case RejectReason::kDuplicateTransfer:
      return "Duplicate transfer reference.";
    case RejectReason::kUnknownTransfer:
      return "No pending transfer with that id.";
    case RejectReason::kInvalidAmount:
      return "Amount must be greater than zero.";
    case RejectReason::kInvalidStatus:
      return "Invalid market status.";
    case RejectReason::kNoChange:
      return "The requested action would change no state; rejecting";
    case RejectReason::kQuantityIncrease:
      return "Order amend (quantity increase) is not supported.";
    case RejectReason::kCancelRestricted:
      return "Order was not canceled due to cancel restrictions.";
    case RejectReason::kWouldTriggerImmediately:
      return "Order would trigger immediately.";
    case RejectReason::kInvalidTrailingDelta:
      return "Filter failure: TRAILING_DELTA";
    case RejectReason::kInvalidStopPrice:
      return "Filter failure: PRICE_FILTER";
    case RejectReason::kInvalidIcebergQty:
      return "Invalid icebergQty.";
    case RejectReason::kInvalidOrderList:
      return "The relationship of the prices for the orders is not correct.";
    case RejectReason::kUnknownOrderList:
      return "Order list does not exist.";
    case RejectReason::kNameTaken:
      return "The account name is taken.";
    case RejectReason::kNoAccountIdLeft:
      return "No account id is left (max_accounts).";
    case RejectReason::kKeyTaken:
      return "This key is already registered.";
    case RejectReason::kUnknownApiKey:
      return "No such API key.";
    case RejectReason::kInvalidAuthChange:
      return "Invalid account or key change.";
    case RejectReason::kSymbolTaken:
      return "An asset or market has this symbol already.";
    case RejectReason::kInvalidListing:
      return "Invalid asset or market definition.";
  }
  return "Order rejected.";
}

}  // namespace

std::string ApiError::Json() const {
  std::string out;
  out.reserve(msg.size() + 32);
  out.append("{\"code\":").append(std::to_string(code)).append(",\"msg\":\"");
  AppendJsonEscaped(msg, &out);
  out.append("\"}");
  return out;
}

// The Binance texts below are the ones of its Spot API error catalogue
// ("Error codes for Binance"); clients match some of them exactly.

ApiError ApiError::Unknown(std::string msg) {
  if (msg.empty()) msg = "An unknown error occurred while processing the request.";
  return Make(500, -1000, std::move(msg));
}

ApiError ApiError::Disconnected(std::string msg) {
  if (msg.empty()) msg = "Internal error; unable to process your request. Please try again.";
  return Make(503, -1001, std::move(msg));
}

ApiError ApiError::Unauthorized() {
  return Make(401, -1002, "You are not authorized to execute this request.");
}

ApiError ApiError::TooManyRequests(std::string msg) {
  if (msg.empty())
    msg =
        "Too much request weight used; please use WebSocket Streams for live updates to avoid "
        "polling the API.";
  return Make(429, -1003, std::move(msg));
}

ApiError ApiError::ServerBusy(std::string msg) {
  if (msg.empty()) {
    msg = "Server is currently overloaded with other requests. Please try again in a few minutes.";
  }
  return Make(503, -1008, std::move(msg));
}

ApiError ApiError::UnknownOrderComposition() {
  return Make(400, -1014, "Unsupported order combination.");
}

ApiError ApiError::FilterFailure(std::string_view filter) {
  return Make(400, -1013, Quoted("Filter failure: ", filter, ""));
}

ApiError ApiError::TimestampOutside() {
  return Make(400, -1021, "Timestamp for this request is outside of the recvWindow.");
}

ApiError ApiError::BadSignature() {
  return Make(400, -1022, "Signature for this request is not valid.");
}

ApiError ApiError::IllegalChars(std::string_view param) {
  if (param.empty()) return Make(400, -1100, "Illegal characters found in a parameter.");
  return Make(400, -1100, Quoted("Illegal characters found in parameter '", param, "'."));
}

ApiError ApiError::IllegalChars(std::string_view param, std::string_view legal_range) {
  return Make(400, -1100,
              Quoted("Illegal characters found in parameter '", param, "'; legal range is '") +
                  std::string(legal_range) + "'.");
}

ApiError ApiError::DuplicateParam(std::string_view /*param*/) {
  // Binance's text names no parameter; clients may match it exactly.
  return Make(400, -1101, "Duplicate values for a parameter detected.");
}

ApiError ApiError::MandatoryMissing(std::string_view param) {
  return Make(
      400, -1102,
      Quoted("Mandatory parameter '", param, "' was not sent, was empty/null, or malformed."));
}

ApiError ApiError::UnreadParams() { return Make(400, -1104, "Not all sent parameters were read."); }

ApiError ApiError::EmptyParam(std::string_view param) {
  return Make(400, -1105, Quoted("Parameter '", param, "' was empty."));
}

ApiError ApiError::NotRequired(std::string_view param) {
  return Make(400, -1106, Quoted("Parameter '", param, "' sent when not required."));
}

ApiError ApiError::TooMuchPrecision(std::string_view param) {
  return Make(400, -1111, Quoted("Parameter '", param, "' has too much precision."));
}

ApiError ApiError::InvalidTif() { return Make(400, -1115, "Invalid timeInForce."); }

ApiError ApiError::InvalidOrderType() { return Make(400, -1116, "Invalid orderType."); }

ApiError ApiError::InvalidSide() { return Make(400, -1117, "Invalid side."); }

ApiError ApiError::BadSymbol() { return Make(400, -1121, "Invalid symbol."); }

ApiError ApiError::InvalidInterval() { return Make(400, -1120, "Invalid interval."); }

ApiError ApiError::InvalidSymbolStatus() { return Make(400, -1122, "Invalid symbolStatus."); }

ApiError ApiError::BadParamCombination() {
  return Make(400, -1128, "Combination of optional parameters invalid.");
}

ApiError ApiError::SymbolStatusMismatch() {
  return Make(400, -1220, "The symbol's status does not match the requested symbolStatus.");
}

ApiError ApiError::InvalidTickerType() { return Make(400, -1139, "Invalid ticker type."); }

ApiError ApiError::InvalidTimeUnit() {
  return Make(400, -1194,
              "Invalid value for time unit; expected either MICROSECOND or MILLISECOND.");
}

ApiError ApiError::DuplicateSymbols() {
  return Make(400, -1151, "Symbol is present multiple times in the list.");
}

ApiError ApiError::BadParam(std::string_view param, std::string_view why) {
  std::string msg = param.empty() ? std::string("Invalid data sent for a parameter.")
                                  : Quoted("Data sent for parameter '", param, "' is not valid.");
  if (!why.empty()) msg.append(" ").append(why);
  return Make(400, -1130, std::move(msg));
}

ApiError ApiError::NewOrderRejected(std::string msg) { return Make(400, -2010, std::move(msg)); }

ApiError ApiError::InsufficientBalance() {
  // ccxt maps -2010 to InsufficientFunds only with exactly this text.
  return Make(400, -2010, "Account has insufficient balance for requested action.");
}

ApiError ApiError::CancelRejected(std::string msg) { return Make(400, -2011, std::move(msg)); }

ApiError ApiError::InvalidCancelRestrictions() {
  return Make(400, -1145, "Invalid cancelRestrictions");
}

ApiError ApiError::ClientOrderIdInvalid() {
  return Make(400, -2039, "Client order ID is not correct for this order ID.");
}

ApiError ApiError::AmendRejected(std::string msg) { return Make(400, -2038, std::move(msg)); }

ApiError ApiError::NoSuchOrder() { return Make(400, -2013, "Order does not exist."); }

ApiError ApiError::BadApiKeyFormat() { return Make(401, -2014, "API-key format invalid."); }

ApiError ApiError::RejectedApiKey() {
  return Make(401, -2015, "Invalid API-key, IP, or permissions for action.");
}

ApiError ApiError::NotFound() { return Make(404, -1000, "The requested path does not exist."); }

ApiError ApiError::MethodNotAllowed() {
  return Make(405, -1000, "The request method is not allowed for this path.");
}

ApiError ApiError::FromReject(engine::CommandType command, engine::RejectReason reason) {
  using engine::CommandType;
  using engine::RejectReason;
  if (reason == RejectReason::kNone) {
    // A reject always carries a reason: reaching here is a gateway bug.
    return Unknown("");
  }
  if (reason == RejectReason::kUnknownMarket) return BadSymbol();
  if (reason == RejectReason::kInsufficientBalance) return InsufficientBalance();
  const std::string text(OrderRejectText(reason));
  switch (command) {
    case CommandType::kPlaceOrder:
    case CommandType::kPlaceOrderList:
      // Binance reports filter failures with -1013, everything else with -2010.
      if (reason == RejectReason::kInvalidPrice) return FilterFailure("PRICE_FILTER");
      if (reason == RejectReason::kInvalidQuantity) return FilterFailure("LOT_SIZE");
      if (reason == RejectReason::kMinNotional) return FilterFailure("NOTIONAL");
      // A stop price the filters refuse is a PRICE_FILTER failure, a
      // trailing delta out of bounds a TRAILING_DELTA one (Binance's).
      if (reason == RejectReason::kInvalidStopPrice) return FilterFailure("PRICE_FILTER");
      if (reason == RejectReason::kInvalidTrailingDelta) return FilterFailure("TRAILING_DELTA");
      return NewOrderRejected(text);
    case CommandType::kAmendOrder:
      // Binance answers a refused amend with -2038 ORDER_AMEND_REJECTED and
      // the engine's text; filter failures keep -1013.
      if (reason == RejectReason::kInvalidQuantity) {
        // Also the reject of an amend to at most the executed quantity.
        return AmendRejected(
            "Filter failure: LOT_SIZE, or the new quantity is not above the executed quantity.");
      }
      if (reason == RejectReason::kInvalidPrice) return FilterFailure("PRICE_FILTER");
      if (reason == RejectReason::kMinNotional) return FilterFailure("NOTIONAL");
      // newClientOrderId held by another open order: Binance's client id rule.
      if (reason == RejectReason::kDuplicateClientOrderId) return NewOrderRejected(text);
      return AmendRejected(text);
    case CommandType::kCancelOrder:
    case CommandType::kCancelAll:
    case CommandType::kCancelOrderList:
      // An account the engine does not know has no orders to cancel.
      if (reason == RejectReason::kUnknownAccount) return CancelRejected("Unknown order sent.");
      return CancelRejected(text);
    case CommandType::kDeposit:
    case CommandType::kWithdraw:
    case CommandType::kTransferOut:
    case CommandType::kResolveTransfer:
    case CommandType::kSetMarketStatus:
    case CommandType::kChangeAuth:
    case CommandType::kAddAsset:
    case CommandType::kAddMarket:
    case CommandType::kCancelReplace:  // answered per side, as kCancelOrder and kPlaceOrder
      break;
  }
  // Operator commands (deposits, withdrawals, market status, accounts and
  // keys): Matchbook's own
  // API, where -1130 (invalid data) fits every remaining reason.
  return Make(400, -1130, text);
}

}  // namespace mb::gateway
