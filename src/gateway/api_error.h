// Binance error answers: an HTTP status and a {code,msg} body, with the codes
// and messages clients (ccxt) match on (../../docs/api.md lists them).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <string>

#include "engine/types.h"

namespace mb::gateway {

struct ApiError {
  int http_status = 400;
  int code = -1000;
  std::string msg;

  std::string Json() const;  // {"code":-1121,"msg":"Invalid symbol."}

  // Catalogue (Binance texts).
  static ApiError Unknown(std::string msg);                // 500 -1000
  static ApiError Disconnected(std::string msg);           // 503 -1001
  static ApiError Unauthorized();                          // 401 -1002
  static ApiError TooManyRequests(std::string msg);        // 429 -1003
  static ApiError ServerBusy(std::string msg);             // 503 -1008
  static ApiError UnknownOrderComposition();               // 400 -1014
  static ApiError FilterFailure(std::string_view filter);  // 400 -1013 "Filter failure: LOT_SIZE"
  static ApiError TimestampOutside();                      // 400 -1021
  static ApiError BadSignature();                          // 400 -1022
  static ApiError IllegalChars(std::string_view param);    // 400 -1100
  // 400 -1100 "Illegal characters found in parameter 'p'; legal range is 'r'."
  static ApiError IllegalChars(std::string_view param, std::string_view legal_range);
  static ApiError DuplicateParam(std::string_view param);    // 400 -1101 (duplicate or too many)
  static ApiError MandatoryMissing(std::string_view param);  // 400 -1102
  static ApiError UnreadParams();                            // 400 -1104
  static ApiError EmptyParam(std::string_view param);        // 400 -1105
  static ApiError NotRequired(std::string_view param);       // 400 -1106
  static ApiError TooMuchPrecision(std::string_view param);  // 400 -1111
  static ApiError InvalidTif();                              // 400 -1115
  static ApiError InvalidOrderType();                        // 400 -1116
  static ApiError InvalidSide();                             // 400 -1117
  static ApiError BadSymbol();                               // 400 -1121
  static ApiError InvalidInterval();                         // 400 -1120
  static ApiError InvalidSymbolStatus();                     // 400 -1122
  static ApiError BadParamCombination();                     // 400 -1128
  static ApiError SymbolStatusMismatch();                    // 400 -1220
  static ApiError InvalidTickerType();                       // 400 -1139
  static ApiError InvalidTimeUnit();                         // 400 -1194
  static ApiError DuplicateSymbols();                        // 400 -1151
  static ApiError BadParam(std::string_view param, std::string_view why);  // 400 -1130
  static ApiError NewOrderRejected(std::string msg);                       // 400 -2010
  static ApiError InsufficientBalance();            // 400 -2010 exact ccxt text
  static ApiError CancelRejected(std::string msg);  // 400 -2011
  static ApiError InvalidCancelRestrictions();      // 400 -1145
  static ApiError AmendRejected(std::string msg);   // 400 -2038
  static ApiError ClientOrderIdInvalid();           // 400 -2039 (GET order, both ids)
  static ApiError NoSuchOrder();                    // 400 -2013 "Order does not exist."
  static ApiError BadApiKeyFormat();                // 401 -2014
  static ApiError RejectedApiKey();                 // 401 -2015
  static ApiError NotFound();                       // 404 -1000 (unknown path)
  static ApiError MethodNotAllowed();               // 405 -1000

  // An engine reject of a PlaceOrder / AmendOrder (-2010 with a message
  // naming the reason: a conditional order whose stop the last price already
  // meets → "Order would trigger immediately."; filter failures -1013, a
  // refused stop price PRICE_FILTER, trailing delta TRAILING_DELTA) or a
  // cancel (-2011, unknown order → -2011 "Unknown order sent.").
  static ApiError FromReject(engine::CommandType command, engine::RejectReason reason);
};

}  // namespace mb::gateway
