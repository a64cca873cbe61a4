// Tests of the gateway's request plumbing: error catalogue, parameter parsing
// and signed payloads, HMAC and timestamps, the key store, the rate limiter.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/hmac.h"
#include "engine/engine.h"
#include "gateway/api_error.h"
#include "gateway/auth.h"
#include "gateway/params.h"
#include "gateway/rate_limit.h"
#include "support/engine_test_support.h"

namespace mb::gateway {
namespace {

namespace fs = std::filesystem;
using engine::CommandType;
using engine::RejectReason;

// ---------------------------------------------------------------- ApiError

TEST(ApiErrorTest, JsonShape) {
  EXPECT_EQ(ApiError::BadSymbol().Json(), R"({"code":-1121,"msg":"Invalid symbol."})");
  EXPECT_EQ(ApiError::InsufficientBalance().Json(),
            R"({"code":-2010,"msg":"Account has insufficient balance for requested action."})");
}

TEST(ApiErrorTest, JsonEscapesMessage) {
  ApiError e{400, -1100, "a\"b\\c\nd\te\x01\x7f/"};
  EXPECT_EQ(e.Json(), R"({"code":-1100,"msg":"a\"b\\c\nd\te\u0001\u007f/"})");
  // Valid UTF-8 is kept; invalid bytes become U+FFFD.
  e.msg = "caf\xc3\xa9 \xff \xc3 \xed\xa0\x80 \xe2\x82\xac";
  EXPECT_EQ(e.Json(),
            "{\"code\":-1100,\"msg\":\"caf\xc3\xa9 \\ufffd \\ufffd \\ufffd\\ufffd\\ufffd "
            "\xe2\x82\xac\"}");
  e.msg = std::string("nul\0byte", 8);
  EXPECT_EQ(e.Json(), R"({"code":-1100,"msg":"nul\u0000byte"})");
}

TEST(ApiErrorTest, CatalogueCodesAndTexts) {
  struct Case {
    ApiError e;
    int status;
    int code;
    std::string msg;
  };
  const Case cases[] = {
      {ApiError::Unknown(""), 500, -1000,
       "An unknown error occurred while processing the request."},
      {ApiError::Unknown("boom"), 500, -1000, "boom"},
      {ApiError::Disconnected(""), 503, -1001,
       "Internal error; unable to process your request. Please try again."},
      {ApiError::Unauthorized(), 401, -1002, "You are not authorized to execute this request."},
      {ApiError::TooManyRequests("slow down"), 429, -1003, "slow down"},
      {ApiError::ServerBusy("busy"), 503, -1008, "busy"},
      {ApiError::UnknownOrderComposition(), 400, -1014, "Unsupported order combination."},
      {ApiError::FilterFailure("LOT_SIZE"), 400, -1013, "Filter failure: LOT_SIZE"},
      {ApiError::TimestampOutside(), 400, -1021,
       "Timestamp for this request is outside of the recvWindow."},
      {ApiError::BadSignature(), 400, -1022, "Signature for this request is not valid."},
      {ApiError::IllegalChars("symbol"), 400, -1100,
       "Illegal characters found in parameter 'symbol'."},
      {ApiError::IllegalChars(""), 400, -1100, "Illegal characters found in a parameter."},
      {ApiError::IllegalChars("timeZone", "-12:00 to +14:00"), 400, -1100,
       "Illegal characters found in parameter 'timeZone'; legal range is '-12:00 to +14:00'."},
      {ApiError::DuplicateParam("symbol"), 400, -1101,
       "Duplicate values for a parameter detected."},
      {ApiError::MandatoryMissing("symbol"), 400, -1102,
       "Mandatory parameter 'symbol' was not sent, was empty/null, or malformed."},
      {ApiError::UnreadParams(), 400, -1104, "Not all sent parameters were read."},
      {ApiError::EmptyParam("price"), 400, -1105, "Parameter 'price' was empty."},
      {ApiError::NotRequired("price"), 400, -1106, "Parameter 'price' sent when not required."},
      {ApiError::TooMuchPrecision("quantity"), 400, -1111,
       "Parameter 'quantity' has too much precision."},
      {ApiError::InvalidTif(), 400, -1115, "Invalid timeInForce."},
      {ApiError::InvalidOrderType(), 400, -1116, "Invalid orderType."},
      {ApiError::InvalidSide(), 400, -1117, "Invalid side."},
      {ApiError::InvalidInterval(), 400, -1120, "Invalid interval."},
      {ApiError::BadSymbol(), 400, -1121, "Invalid symbol."},
      {ApiError::InvalidSymbolStatus(), 400, -1122, "Invalid symbolStatus."},
      {ApiError::BadParamCombination(), 400, -1128, "Combination of optional parameters invalid."},
      {ApiError::SymbolStatusMismatch(), 400, -1220,
       "The symbol's status does not match the requested symbolStatus."},
      {ApiError::InvalidTickerType(), 400, -1139, "Invalid ticker type."},
      {ApiError::InvalidTimeUnit(), 400, -1194,
       "Invalid value for time unit; expected either MICROSECOND or MILLISECOND."},
      {ApiError::DuplicateSymbols(), 400, -1151, "Symbol is present multiple times in the list."},
      {ApiError::BadParam("limit", "Must be 1..5000."), 400, -1130,
       "Data sent for parameter 'limit' is not valid. Must be 1..5000."},
      {ApiError::BadParam("", ""), 400, -1130, "Invalid data sent for a parameter."},
      {ApiError::NewOrderRejected("nope"), 400, -2010, "nope"},
      {ApiError::InsufficientBalance(), 400, -2010,
       "Account has insufficient balance for requested action."},
      {ApiError::CancelRejected("no"), 400, -2011, "no"},
      {ApiError::NoSuchOrder(), 400, -2013, "Order does not exist."},
      {ApiError::BadApiKeyFormat(), 401, -2014, "API-key format invalid."},
      {ApiError::RejectedApiKey(), 401, -2015, "Invalid API-key, IP, or permissions for action."},
      {ApiError::NotFound(), 404, -1000, "The requested path does not exist."},
      {ApiError::MethodNotAllowed(), 405, -1000,
       "The request method is not allowed for this path."},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.msg);
    EXPECT_EQ(c.e.http_status, c.status);
    EXPECT_EQ(c.e.code, c.code);
    EXPECT_EQ(c.e.msg, c.msg);
  }
  // The default texts of the message-taking constructors are Binance's too.
  EXPECT_EQ(ApiError::ServerBusy("").msg,
            "Server is currently overloaded with other requests. Please try again in a few "
            "minutes.");
  EXPECT_FALSE(ApiError::TooManyRequests("").msg.empty());
}

void ExpectReject(CommandType cmd, RejectReason reason, int code, const std::string& msg) {
  SCOPED_TRACE(std::string(engine::ToString(cmd)) + "/" + std::string(engine::ToString(reason)));
  const ApiError e = ApiError::FromReject(cmd, reason);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.code, code);
  EXPECT_EQ(e.msg, msg);
}

TEST(ApiErrorTest, FromRejectPlaceOrder) {
  const auto p = CommandType::kPlaceOrder;
  ExpectReject(p, RejectReason::kUnknownMarket, -1121, "Invalid symbol.");
  ExpectReject(p, RejectReason::kInsufficientBalance, -2010,
               "Account has insufficient balance for requested action.");
  ExpectReject(p, RejectReason::kWouldTakeLiquidity, -2010,
               "Order would immediately match and take.");
  ExpectReject(p, RejectReason::kFokNotFillable, -2010, "FOK order would not be fully filled.");
  ExpectReject(p, RejectReason::kMarketNotTrading, -2010, "Market is closed.");
  ExpectReject(p, RejectReason::kDuplicateClientOrderId, -2010, "Duplicate order sent.");
  ExpectReject(p, RejectReason::kMinNotional, -1013, "Filter failure: NOTIONAL");
  ExpectReject(p, RejectReason::kInvalidQuantity, -1013, "Filter failure: LOT_SIZE");
  ExpectReject(p, RejectReason::kInvalidPrice, -1013, "Filter failure: PRICE_FILTER");
  ExpectReject(p, RejectReason::kInvalidOrderType, -2010, "Unsupported order combination.");
  ExpectReject(p, RejectReason::kUnauthorized, -2010,
               "This account may not place or cancel orders.");
  ExpectReject(p, RejectReason::kOverflow, -2010, "Price * QTY is too large.");
  // Conditional orders.
  ExpectReject(p, RejectReason::kWouldTriggerImmediately, -2010,
               "Order would trigger immediately.");
  ExpectReject(p, RejectReason::kInvalidStopPrice, -1013, "Filter failure: PRICE_FILTER");
  ExpectReject(p, RejectReason::kInvalidTrailingDelta, -1013, "Filter failure: TRAILING_DELTA");
}

TEST(ApiErrorTest, FromRejectCancelAndAmend) {
  ExpectReject(CommandType::kCancelOrder, RejectReason::kUnknownOrder, -2011,
               "Unknown order sent.");
  ExpectReject(CommandType::kCancelOrder, RejectReason::kUnknownAccount, -2011,
               "Unknown order sent.");
  ExpectReject(CommandType::kCancelAll, RejectReason::kUnknownOrder, -2011, "Unknown order sent.");
  ExpectReject(CommandType::kCancelOrder, RejectReason::kMarketNotTrading, -2011,
               "Market is closed.");
  ExpectReject(CommandType::kCancelOrder, RejectReason::kUnknownMarket, -1121, "Invalid symbol.");
  ExpectReject(CommandType::kCancelOrder, RejectReason::kCancelRestricted, -2011,
               "Order was not canceled due to cancel restrictions.");
  // A refused amend is -2038 ORDER_AMEND_REJECTED with the engine's text.
  ExpectReject(CommandType::kAmendOrder, RejectReason::kUnknownOrder, -2038, "Unknown order sent.");
  ExpectReject(CommandType::kAmendOrder, RejectReason::kNoChange, -2038,
               "The requested action would change no state; rejecting");
  ExpectReject(CommandType::kAmendOrder, RejectReason::kQuantityIncrease, -2038,
               "Order amend (quantity increase) is not supported.");
  ExpectReject(CommandType::kAmendOrder, RejectReason::kInsufficientBalance, -2010,
               "Account has insufficient balance for requested action.");
  ExpectReject(CommandType::kAmendOrder, RejectReason::kInvalidQuantity, -2038,
               "Filter failure: LOT_SIZE, or the new quantity is not above the executed "
               "quantity.");
  ExpectReject(CommandType::kWithdraw, RejectReason::kInvalidAmount, -1130,
               "Amount must be greater than zero.");
}

TEST(ApiErrorTest, FromRejectEveryReasonHasAText) {
  for (int r = 1; r <= static_cast<int>(RejectReason::kInvalidStopPrice); ++r) {
    const auto reason = static_cast<RejectReason>(r);
    for (CommandType cmd : {CommandType::kPlaceOrder, CommandType::kAmendOrder,
                            CommandType::kCancelOrder, CommandType::kCancelAll}) {
      SCOPED_TRACE(r);
      const ApiError e = ApiError::FromReject(cmd, reason);
      EXPECT_EQ(e.http_status, 400);
      EXPECT_FALSE(e.msg.empty());
      const std::set<int> allowed =
          cmd == CommandType::kCancelOrder || cmd == CommandType::kCancelAll
              ? std::set<int>{-2011, -1121, -2010}
              : std::set<int>{-2010, -2038, -1013, -1121};
      EXPECT_EQ(allowed.count(e.code), 1U) << e.code;
    }
  }
  EXPECT_EQ(ApiError::FromReject(CommandType::kPlaceOrder, RejectReason::kNone).code, -1000);
}

// ---------------------------------------------------------------- HMAC

TEST(HmacTest, BinanceDocumentationExamples) {
  const std::string secret = "NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j";
  EXPECT_EQ(HmacSha256Hex(secret,
                          "symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=0.1&"
                          "recvWindow=5000&timestamp=1499827319559"),
            "c8db56825ae71d6d79447849e617115f4a920fa2acdcab2b053c4b2838bd6b71");
  // Example 3 of the same page: query string and body, concatenated with no '&'.
  Params p;
  ASSERT_FALSE(Params::Parse("symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTC",
                             "quantity=1&price=0.1&recvWindow=5000&timestamp=1499827319559&"
                             "signature=0fd168b8ddb4876a0358a8d14d0c9f3da0e9b20c5d52b2a00fcf7d1c602"
                             "f9a77",
                             &p));
  EXPECT_EQ(p.signed_payload(),
            "symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTCquantity=1&price=0.1&recvWindow=5000&"
            "timestamp=1499827319559");
  ASSERT_TRUE(p.signature().has_value());
  EXPECT_TRUE(SignatureEquals(HmacSha256Hex(secret, p.signed_payload()), *p.signature()));
  EXPECT_EQ(HmacSha256Hex(secret, p.signed_payload()),
            "0fd168b8ddb4876a0358a8d14d0c9f3da0e9b20c5d52b2a00fcf7d1c602f9a77");
}

TEST(HmacTest, SignatureEquals) {
  const std::string sig = "c8db56825ae71d6d79447849e617115f4a920fa2acdcab2b053c4b2838bd6b71";
  std::string upper = sig;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_TRUE(SignatureEquals(sig, sig));
  EXPECT_TRUE(SignatureEquals(sig, upper));
  std::string flipped = sig;
  flipped[63] = '0';
  EXPECT_FALSE(SignatureEquals(sig, flipped));
  EXPECT_FALSE(SignatureEquals(sig, sig.substr(0, 63)));
  EXPECT_FALSE(SignatureEquals(sig, sig + "0"));
  EXPECT_FALSE(SignatureEquals(sig, ""));
}

// ---------------------------------------------------------------- Params

Params MustParse(std::string_view query, std::string_view body = "") {
  Params p;
  const std::optional<ApiError> err = Params::Parse(query, body, &p);
  EXPECT_FALSE(err.has_value()) << (err ? err->Json() : "");
  return p;
}

ApiError MustFail(std::string_view query, std::string_view body = "", std::size_t max = 64) {
  Params p;
  const std::optional<ApiError> err = Params::Parse(query, body, &p, max);
  EXPECT_TRUE(err.has_value()) << query << " | " << body;
  return err.value_or(ApiError{0, 0, ""});
}

TEST(ParamsTest, ParsesInOrderAndDecodes) {
  const Params p = MustParse("symbol=BTCUSDT&note=a+b%20c&eq=x%3Dy=z&flag&empty=");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"symbol", "BTCUSDT"}, {"note", "a b c"}, {"eq", "x=y=z"}, {"flag", ""}, {"empty", ""}};
  EXPECT_EQ(p.all(), want);
  EXPECT_TRUE(p.Has("flag"));
  EXPECT_FALSE(p.Has("Symbol"));  // names are case-sensitive
  EXPECT_EQ(p.Get("note"), "a b c");
  EXPECT_EQ(p.Get("missing"), std::nullopt);
  EXPECT_FALSE(p.signature().has_value());
  EXPECT_EQ(p.signed_payload(), "symbol=BTCUSDT&note=a+b%20c&eq=x%3Dy=z&flag&empty=");
}

TEST(ParamsTest, EmptyPiecesAreSkippedButSignedAsSent) {
  const Params p = MustParse("&a=1&&b=2&", "");
  ASSERT_EQ(p.all().size(), 2U);
  EXPECT_EQ(p.signed_payload(), "&a=1&&b=2&");
  EXPECT_TRUE(MustParse("", "").all().empty());
}

TEST(ParamsTest, SignaturePosition) {
  Params p = MustParse("a=1&b=2&signature=abc");
  EXPECT_EQ(p.signed_payload(), "a=1&b=2");
  EXPECT_EQ(p.signature(), "abc");
  EXPECT_EQ(p.Get("signature"), "abc");  // still a parameter

  p = MustParse("a=1&signature=abc&b=2");
  EXPECT_EQ(p.signed_payload(), "a=1&b=2");
  EXPECT_EQ(p.signature(), "abc");

  p = MustParse("signature=abc&a=1&b=2");
  EXPECT_EQ(p.signed_payload(), "a=1&b=2");

  p = MustParse("signature=abc");
  EXPECT_EQ(p.signed_payload(), "");
  EXPECT_EQ(p.signature(), "abc");

  p = MustParse("signature=");
  EXPECT_EQ(p.signature(), "");
}

TEST(ParamsTest, QueryThenBody) {
  // Query and body are concatenated as received, without a separator.
  Params p = MustParse("symbol=BTCUSDT&signature=ff", "side=BUY&timestamp=5");
  EXPECT_EQ(p.signed_payload(), "symbol=BTCUSDTside=BUY&timestamp=5");
  EXPECT_EQ(p.signature(), "ff");
  p = MustParse("symbol=BTCUSDT", "side=BUY&timestamp=5&signature=ee");
  EXPECT_EQ(p.signed_payload(), "symbol=BTCUSDTside=BUY&timestamp=5");
  EXPECT_EQ(p.signature(), "ee");
  p = MustParse("", "side=BUY&signature=ee");
  EXPECT_EQ(p.signed_payload(), "side=BUY");
  EXPECT_EQ(p.all().size(), 2U);
}

TEST(ParamsTest, SignsRawPercentEncodedBytes) {
  const std::string secret = "s3cr3t";
  const std::string raw = "symbol=BTCUSDT&newClientOrderId=a%2Fb&note=x+y&timestamp=1";
  const std::string sig = HmacSha256Hex(secret, raw);
  const Params p = MustParse(raw + "&signature=" + sig);
  EXPECT_EQ(p.signed_payload(), raw);
  EXPECT_EQ(p.Get("newClientOrderId"), "a/b");
  EXPECT_EQ(p.Get("note"), "x y");
  EXPECT_TRUE(SignatureEquals(HmacSha256Hex(secret, p.signed_payload()), *p.signature()));
  // The decoded form would hash differently: decoding before hashing is wrong.
  EXPECT_NE(HmacSha256Hex(secret, "symbol=BTCUSDT&newClientOrderId=a/b&note=x y&timestamp=1"), sig);
}

TEST(ParamsTest, MalformedEscapes) {
  for (std::string_view q : {"price=%", "price=%4", "price=%zz", "price=1%g0", "price=%%41"}) {
    SCOPED_TRACE(q);
    const ApiError e = MustFail(q);
    EXPECT_EQ(e.code, -1100);
    EXPECT_EQ(e.msg, "Illegal characters found in parameter 'price'.");
  }
  const ApiError in_name = MustFail("pr%4ice=1");
  EXPECT_EQ(in_name.code, -1100);
  EXPECT_EQ(in_name.msg, "Illegal characters found in parameter 'pr%4ice'.");
  const ApiError in_body = MustFail("a=1", "b=%");
  EXPECT_EQ(in_body.code, -1100);
  EXPECT_EQ(in_body.msg, "Illegal characters found in parameter 'b'.");
}

TEST(ParamsTest, ControlCharacters) {
  EXPECT_EQ(MustFail("a=x%00y").code, -1100);
  EXPECT_EQ(MustFail("a=x%0Ay").code, -1100);
  EXPECT_EQ(MustFail("a=x%7Fy").code, -1100);
  EXPECT_EQ(MustFail(std::string_view("a=x\x01y")).code, -1100);
  EXPECT_EQ(MustFail("a%0A=1").code, -1100);
  // Non-ASCII bytes are not control characters.
  EXPECT_EQ(MustParse("a=%C3%A9").Get("a"), "\xc3\xa9");
}

TEST(ParamsTest, EmptyName) {
  const ApiError e = MustFail("=1");
  EXPECT_EQ(e.code, -1100);
  EXPECT_EQ(e.msg, "Illegal characters found in a parameter.");
  EXPECT_EQ(MustFail("a=1&=").code, -1100);
}

TEST(ParamsTest, Duplicates) {
  const ApiError e = MustFail("a=1&b=2&a=1");
  EXPECT_EQ(e.code, -1101);
  EXPECT_EQ(e.msg, "Duplicate values for a parameter detected.");
  EXPECT_EQ(MustFail("b=1", "a=2&a=3").code, -1101);
  EXPECT_EQ(MustFail("signature=1&signature=2").code, -1101);
  EXPECT_EQ(MustFail("a=1&%61=2").code, -1101);  // the same name once decoded
}

TEST(ParamsTest, QueryValueWinsOverTheBody) {
  // Binance: a parameter in both the query string and the body takes the
  // query's value; the signature still covers every byte sent.
  Params p = MustParse("a=1&b=2", "a=9&c=3");
  EXPECT_EQ(p.Get("a"), "1");
  EXPECT_EQ(p.Get("c"), "3");
  EXPECT_EQ(p.all().size(), 3U);
  EXPECT_EQ(p.signed_payload(), "a=1&b=2a=9&c=3");
  p = MustParse("x=1&signature=aa", "signature=bb&y=2");
  EXPECT_EQ(p.signature(), "aa");
  EXPECT_EQ(p.signed_payload(), "x=1y=2");
}

TEST(ParamsTest, SetReplacesAPresentValueOnly) {
  Params p = MustParse("startTime=5&signature=s");
  EXPECT_TRUE(p.Set("startTime", "7"));
  EXPECT_EQ(p.Get("startTime"), "7");
  EXPECT_FALSE(p.Set("endTime", "1"));
  EXPECT_FALSE(p.Has("endTime"));
  EXPECT_EQ(p.signed_payload(), "startTime=5");
}

TEST(ParamsTest, TooManyParameters) {
  EXPECT_EQ(MustFail("a=1&b=2&c=3&d=4", "", 3).code, -1101);
  EXPECT_EQ(MustFail("a=1&b=2", "c=3&d=4", 3).msg, "Too many parameters sent for this endpoint.");
  Params p;
  EXPECT_FALSE(Params::Parse("a=1&b=2", "c=3", &p, 3).has_value());
  EXPECT_EQ(p.all().size(), 3U);
  EXPECT_EQ(MustFail("a=1", "", 0).code, -1101);
  // The default bound is 64.
  std::string q;
  for (int i = 0; i < 65; ++i) q += (i ? "&p" : "p") + std::to_string(i) + "=1";
  EXPECT_EQ(MustFail(q).code, -1101);
  EXPECT_EQ(MustParse(q.substr(0, q.rfind('&'))).all().size(), 64U);
}

TEST(ParamsTest, FailedParseLeavesOutputAlone) {
  Params p = MustParse("keep=1&signature=s");
  EXPECT_TRUE(Params::Parse("x=%", "", &p).has_value());
  EXPECT_EQ(p.Get("keep"), "1");
  EXPECT_EQ(p.signature(), "s");
  EXPECT_EQ(p.signed_payload(), "keep=1");
}

TEST(ParamsTest, Require) {
  const Params p = MustParse("symbol=BTCUSDT&price=");
  std::string_view v;
  EXPECT_FALSE(p.Require("symbol", &v).has_value());
  EXPECT_EQ(v, "BTCUSDT");
  const std::optional<ApiError> missing = p.Require("side", &v);
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->code, -1102);
  EXPECT_EQ(missing->msg, "Mandatory parameter 'side' was not sent, was empty/null, or malformed.");
  const std::optional<ApiError> empty = p.Require("price", &v);
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->code, -1105);
  EXPECT_EQ(v, "BTCUSDT");  // untouched on error
}

TEST(ParamsTest, GetInt) {
  const Params p = MustParse(
      "a=123&b=-5&c=-0&max=9223372036854775807&min=-9223372036854775808&"
      "over=9223372036854775808&under=-9223372036854775809&plus=%2B1&sp=%201&tsp=1%20&dec=1.0&"
      "dneg=--1&neg=-&abc=abc&empty=&lead=007&long=00000000000000000001&hex=0x10");
  std::optional<int64_t> v = 77;
  EXPECT_FALSE(p.GetInt("absent", &v).has_value());
  EXPECT_EQ(v, std::nullopt);
  const std::pair<const char*, int64_t> ok[] = {{"a", 123},
                                                {"b", -5},
                                                {"c", 0},
                                                {"max", std::numeric_limits<int64_t>::max()},
                                                {"min", std::numeric_limits<int64_t>::min()},
                                                {"lead", 7}};
  for (const auto& [name, want] : ok) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(p.GetInt(name, &v).has_value());
    EXPECT_EQ(v, want);
  }
  for (const char* name :
       {"over", "under", "plus", "sp", "tsp", "dec", "dneg", "neg", "abc", "long", "hex"}) {
    SCOPED_TRACE(name);
    v = 77;
    const std::optional<ApiError> e = p.GetInt(name, &v);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->code, -1100);
    EXPECT_EQ(e->msg, std::string("Illegal characters found in parameter '") + name +
                          "'; legal range is '^-?[0-9]{1,19}$'.");
    EXPECT_EQ(v, 77);
  }
  const std::optional<ApiError> e = p.GetInt("empty", &v);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, -1105);
}

TEST(ParamsTest, GetUint) {
  const Params p = MustParse(
      "a=0&max=18446744073709551615&over=18446744073709551616&neg=-1&long=000000000000000000001&"
      "plus=%2B1&dec=1.5&empty=");
  std::optional<uint64_t> v;
  EXPECT_FALSE(p.GetUint("absent", &v).has_value());
  EXPECT_EQ(v, std::nullopt);
  EXPECT_FALSE(p.GetUint("a", &v).has_value());
  EXPECT_EQ(v, 0U);
  EXPECT_FALSE(p.GetUint("max", &v).has_value());
  EXPECT_EQ(v, std::numeric_limits<uint64_t>::max());
  for (const char* name : {"over", "neg", "long", "plus", "dec"}) {
    SCOPED_TRACE(name);
    const std::optional<ApiError> e = p.GetUint(name, &v);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->code, -1100);
    EXPECT_EQ(e->msg, std::string("Illegal characters found in parameter '") + name +
                          "'; legal range is '^[0-9]{1,20}$'.");
  }
  EXPECT_EQ(v, std::numeric_limits<uint64_t>::max());
  ASSERT_TRUE(p.GetUint("empty", &v).has_value());
  EXPECT_EQ(p.GetUint("empty", &v)->code, -1105);
}

TEST(ParamsTest, PercentDecode) {
  std::string out = "old";
  EXPECT_TRUE(PercentDecode("a+b%41%4a%2b", &out));
  EXPECT_EQ(out, "a bAJ+");
  EXPECT_TRUE(PercentDecode("", &out));
  EXPECT_EQ(out, "");
  out = "old";
  for (std::string_view bad : {"%", "abc%2", "%g1", "%1g", "100%"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(PercentDecode(bad, &out));
    EXPECT_EQ(out, "old");
  }
}

// ---------------------------------------------------------------- timestamps

TEST(TimestampTest, Window) {
  const int64_t now = 1'700'000'000'000;
  EXPECT_FALSE(CheckTimestamp(now, 5000, now).has_value());
  EXPECT_FALSE(CheckTimestamp(now + 999, 5000, now).has_value());
  const std::optional<ApiError> ahead = CheckTimestamp(now + 1000, 5000, now);
  ASSERT_TRUE(ahead.has_value());
  EXPECT_EQ(ahead->code, -1021);
  EXPECT_EQ(ahead->msg, "Timestamp for this request was 1000ms ahead of the server's time.");
  EXPECT_FALSE(CheckTimestamp(now - 5000, 5000, now).has_value());
  const std::optional<ApiError> late = CheckTimestamp(now - 5001, 5000, now);
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->code, -1021);
  EXPECT_EQ(late->msg, "Timestamp for this request is outside of the recvWindow.");
  EXPECT_FALSE(CheckTimestamp(now - 1, 1, now).has_value());
  EXPECT_TRUE(CheckTimestamp(now - 2, 1, now).has_value());
  EXPECT_FALSE(CheckTimestamp(now - 60000, 60000, now).has_value());
  EXPECT_TRUE(CheckTimestamp(now - 60001, 60000, now).has_value());
  // Extreme client values do not overflow.
  EXPECT_EQ(CheckTimestamp(std::numeric_limits<int64_t>::min(), 60000, now)->code, -1021);
  EXPECT_EQ(CheckTimestamp(std::numeric_limits<int64_t>::max(), 60000, now)->code, -1021);
  EXPECT_EQ(CheckTimestamp(std::numeric_limits<int64_t>::max(), 60000, -now)->code, -1021);
}

TEST(TimestampTest, RecvWindowBounds) {
  const int64_t now = 1'000'000;
  for (int64_t w : {int64_t{0}, int64_t{-1}, int64_t{60001}, std::numeric_limits<int64_t>::max(),
                    std::numeric_limits<int64_t>::min()}) {
    SCOPED_TRACE(w);
    const std::optional<ApiError> e = CheckTimestamp(now, w, now);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->code, -1130);
    EXPECT_EQ(e->msg,
              "Data sent for parameter 'recvWindow' is not valid. It must be between 1 and 60000 "
              "milliseconds.");
  }
  EXPECT_FALSE(CheckTimestamp(now, 1, now).has_value());
  EXPECT_FALSE(CheckTimestamp(now, 60000, now).has_value());
}

TEST(TimestampTest, MicrosecondTimestampsByMagnitude) {
  const int64_t now_ms = 1'700'000'000'000;
  const int64_t now_us = now_ms * 1'000 + 250;
  // The same instant in ms and in µs.
  EXPECT_FALSE(CheckTimestampUs(now_ms, 5'000'000, now_us).has_value());
  EXPECT_FALSE(CheckTimestampUs(now_us, 5'000'000, now_us).has_value());
  // µs: the window and the 1 s ahead bound are exact to the µs.
  EXPECT_FALSE(CheckTimestampUs(now_us + 999'999, 5'000'000, now_us).has_value());
  EXPECT_EQ(CheckTimestampUs(now_us + 1'000'000, 5'000'000, now_us)->code, -1021);
  EXPECT_FALSE(CheckTimestampUs(now_us - 1'500, 1'500, now_us).has_value());
  EXPECT_EQ(CheckTimestampUs(now_us - 1'501, 1'500, now_us)->code, -1021);
  // The whole-ms form takes µs timestamps too.
  EXPECT_FALSE(CheckTimestamp(now_ms * 1'000, 5000, now_ms).has_value());
  EXPECT_EQ(CheckTimestamp((now_ms - 6'000) * 1'000, 5000, now_ms)->code, -1021);
  // 10^13 is the first µs value.
  EXPECT_EQ(TimestampToMillis(kMicrosFrom - 1), kMicrosFrom - 1);
  EXPECT_EQ(TimestampToMillis(kMicrosFrom), kMicrosFrom / 1'000);
  EXPECT_EQ(TimestampToMillis(now_us), now_ms);
  EXPECT_EQ(TimestampToMillis(now_ms), now_ms);
  EXPECT_EQ(TimestampToMillis(-5), -5);
  EXPECT_EQ(CheckTimestampUs(std::numeric_limits<int64_t>::max(), 60'000'000, now_us)->code, -1021);
  EXPECT_EQ(CheckTimestampUs(std::numeric_limits<int64_t>::min(), 60'000'000, now_us)->code, -1021);
}

TEST(TimestampTest, RecvWindowWithMicroseconds) {
  int64_t us = 0;
  EXPECT_FALSE(ParseRecvWindow(std::nullopt, &us).has_value());
  EXPECT_EQ(us, 5'000'000);
  EXPECT_FALSE(ParseRecvWindow("6000.346", &us).has_value());
  EXPECT_EQ(us, 6'000'346);
  EXPECT_FALSE(ParseRecvWindow("60000", &us).has_value());
  EXPECT_EQ(us, 60'000'000);
  EXPECT_FALSE(ParseRecvWindow("0.001", &us).has_value());
  EXPECT_EQ(us, 1);
  EXPECT_FALSE(ParseRecvWindow("1.5", &us).has_value());
  EXPECT_EQ(us, 1'500);
  EXPECT_EQ(ParseRecvWindow("60000.001", &us)->code, -1130);
  EXPECT_EQ(ParseRecvWindow("0", &us)->code, -1130);
  EXPECT_EQ(ParseRecvWindow("-5", &us)->code, -1130);
  EXPECT_EQ(ParseRecvWindow("99999999999999999999", &us)->code, -1130);
  EXPECT_EQ(ParseRecvWindow("1.0001", &us)->code, -1111);
  EXPECT_EQ(ParseRecvWindow("abc", &us)->code, -1100);
  EXPECT_EQ(ParseRecvWindow("", &us)->code, -1105);
  EXPECT_EQ(us, 1'500);  // errors leave the output alone
}

// ---------------------------------------------------------------- RandomToken

bool AllAlnum(std::string_view s) {
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

TEST(RandomTokenTest, LengthAlphabetAndSpread) {
  EXPECT_EQ(RandomToken(0), "");
  EXPECT_EQ(RandomToken(1).size(), 1U);
  const std::string a = RandomToken(64);
  const std::string b = RandomToken(64);
  EXPECT_EQ(a.size(), 64U);
  EXPECT_TRUE(AllAlnum(a));
  EXPECT_NE(a, b);
  // 100000 characters: each of the 62 is expected ~1613 times; seeing every
  // one, none more than twice its share, fails with negligible probability
  // unless the generator is biased or stuck.
  const std::string big = RandomToken(100'000);
  EXPECT_TRUE(AllAlnum(big));
  std::map<char, int> counts;
  for (char c : big) ++counts[c];
  EXPECT_EQ(counts.size(), 62U);
  for (const auto& [c, n] : counts) {
    EXPECT_GT(n, 1200) << c;
    EXPECT_LT(n, 2100) << c;
  }
}

// ---------------------------------------------------------------- KeyStore

class KeyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "mb_api_test_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }

  std::unique_ptr<KeyStore> OpenStore(uint32_t max_accounts = 100) {
    Result<std::unique_ptr<KeyStore>> r = KeyStore::Open(dir_, max_accounts);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return nullptr;
    const Status master = (*r)->EnsureMasterKey();  // made: nothing is sealed yet
    EXPECT_TRUE(master.ok()) << master.message();
    return std::move(r.value());
  }

  static std::string ReadText(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void WriteText(const fs::path& p, std::string_view text) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << text;
  }
  static unsigned Mode(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777U;
  }

  fs::path auth_path() const { return dir_ / "auth.json"; }
  fs::path token_path() const { return dir_ / "admin.token"; }

  // An engine with room for `max_accounts` accounts: the store's changes go
  // through it as they do through the exchange.
  static engine::EngineConfig Config(uint32_t max_accounts = 16) {
    engine::EngineConfig c = engine::MakeConfig();
    c.max_accounts = max_accounts;
    return c;
  }
  // Journals `change` (Process), then serves what it did (Apply).
  static std::vector<engine::Event> Run(engine::Engine& e, KeyStore& store,
                                        const engine::AuthChange& change) {
    std::vector<engine::Event> out;
    e.Process(engine::Command{0, change}, &out);
    store.Apply(out);
    return out;
  }
  static void RunOk(engine::Engine& e, KeyStore& store, Result<engine::AuthChange> change) {
    ASSERT_TRUE(change.ok()) << change.status().message();
    const std::vector<engine::Event> out = Run(e, store, *change);
    ASSERT_EQ(out.size(), 1U);
    ASSERT_EQ(out[0].type(), engine::EventType::kAuthChanged);
  }

  fs::path dir_;
};

TEST_F(KeyStoreTest, FirstOpenCreatesFilesWithMode0600) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->admin_token_path(), token_path());
  EXPECT_EQ(store->admin_token().size(), 64U);
  EXPECT_TRUE(AllAlnum(store->admin_token()));
  EXPECT_EQ(ReadText(token_path()), store->admin_token() + "\n");
  EXPECT_EQ(Mode(token_path()), 0600U);
  EXPECT_FALSE(fs::exists(auth_path()));  // accounts and keys live in the journal
  EXPECT_TRUE(store->Accounts().empty());
}

TEST_F(KeyStoreTest, CreatesMissingDataDirectory) {
  dir_ /= "nested/deeper";
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(fs::exists(token_path()));
  dir_ = dir_.parent_path().parent_path();
}

TEST_F(KeyStoreTest, AdminTokenStableAcrossReopen) {
  std::string token;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    token = store->admin_token();
    EXPECT_TRUE(store->CheckAdminToken(token));
    EXPECT_FALSE(store->CheckAdminToken(token.substr(0, 63)));
    EXPECT_FALSE(store->CheckAdminToken(token + "x"));
    EXPECT_FALSE(store->CheckAdminToken(""));
    std::string wrong = token;
    wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
    EXPECT_FALSE(store->CheckAdminToken(wrong));
  }
  auto again = OpenStore();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->admin_token(), token);
  EXPECT_EQ(Mode(token_path()), 0600U);
}

TEST_F(KeyStoreTest, OperatorWrittenAdminTokenIsUsedTrimmed) {
  const std::string token = "operator-chosen-token-0123456789-abcdef";
  WriteText(token_path(), "  " + token + "\r\n");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->admin_token(), token);
  EXPECT_TRUE(store->CheckAdminToken(token));
  EXPECT_EQ(ReadText(token_path()), "  " + token + "\r\n");  // not rewritten
}

TEST_F(KeyStoreTest, BadAdminTokenRefused) {
  for (std::string_view bad : {std::string_view("short\n"), std::string_view(""),
                               std::string_view("0123456789012345 6789012345678901234")}) {
    SCOPED_TRACE(bad);
    WriteText(token_path(), bad);
    Result<std::unique_ptr<KeyStore>> r = KeyStore::Open(dir_, 100);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    EXPECT_NE(r.status().message().find(token_path().string()), std::string::npos);
    EXPECT_EQ(ReadText(token_path()), bad);
    EXPECT_FALSE(fs::exists(auth_path()));  // nothing written
  }
}

// Accounts and keys are served once the engine has recorded them, and a
// store bootstrapped from the engine's image (a restart, a standby) serves
// the same.
TEST_F(KeyStoreTest, AccountsAndKeysComeFromTheEngine) {
  engine::Engine e(Config());
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Result<engine::AuthChange> alice = store->NewAccount("alice", 1000);
  ASSERT_TRUE(alice.ok()) << alice.status().message();
  EXPECT_TRUE(store->Accounts().empty()) << "served before it is journaled";
  RunOk(e, *store, alice);
  RunOk(e, *store, store->NewAccount("bob.B-2_x", 2000));
  ASSERT_EQ(store->Accounts().size(), 2U);
  EXPECT_EQ(store->FindAccount(AccountId{1})->name, "alice");
  EXPECT_EQ(store->FindAccount(AccountId{1})->created_ms, 1000);
  EXPECT_EQ(store->FindAccount(AccountId{2})->name, "bob.B-2_x");
  EXPECT_FALSE(store->FindAccount(AccountId{3}).has_value());
  EXPECT_FALSE(store->FindAccount(AccountId{0}).has_value());

  Result<engine::AuthChange> c1 = store->NewKey(AccountId{1}, 3000, kDefaultPermissions);
  ASSERT_TRUE(c1.ok());
  const std::string k1(c1->subject.view());
  // The command (and so the journal) holds the secret sealed; the store
  // serves it opened: 64 hex characters.
  const std::string sealed(c1->secret.view());
  EXPECT_EQ(FormOf(sealed), SecretForm::kSealed);
  EXPECT_EQ(sealed.size(), 63U);
  EXPECT_EQ(k1.size(), 64U);
  EXPECT_TRUE(AllAlnum(k1));
  RunOk(e, *store, c1);
  ASSERT_TRUE(store->FindKey(k1).has_value());
  const std::string s1 = store->FindKey(k1)->secret;
  EXPECT_EQ(s1.size(), 64U);
  EXPECT_EQ(s1.find_first_not_of("0123456789abcdef"), std::string::npos) << s1;
  EXPECT_EQ(sealed.find(s1), std::string::npos);
  EXPECT_NE(k1, s1);
  const std::string public_key(32, '\x07');
  Result<engine::AuthChange> c2 = store->NewKey(AccountId{1}, 2500, kAllPermissions, public_key);
  ASSERT_TRUE(c2.ok());
  const std::string k2(c2->subject.view());
  RunOk(e, *store, c2);

  const std::optional<ApiKey> found = store->FindKey(k1);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->secret, s1);
  EXPECT_EQ(found->account, AccountId{1});
  EXPECT_EQ(found->created_ms, 3000);
  EXPECT_EQ(found->permissions, kDefaultPermissions);
  EXPECT_FALSE(found->revoked);
  ASSERT_TRUE(store->FindKey(k2).has_value());
  EXPECT_EQ(store->FindKey(k2)->ed25519_public_key, public_key);
  EXPECT_TRUE(store->FindKey(k2)->secret.empty());
  EXPECT_EQ(store->FindKey(k2)->permissions, kAllPermissions);
  const std::vector<ApiKey> keys = store->Keys(AccountId{1});
  ASSERT_EQ(keys.size(), 2U);
  EXPECT_EQ(keys[0].key, k2);  // oldest first
  EXPECT_EQ(keys[1].key, k1);
  EXPECT_TRUE(store->Keys(AccountId{2}).empty());

  RunOk(e, *store, store->Revocation(k1));
  EXPECT_TRUE(store->FindKey(k1)->revoked);

  // A restart: the image alone gives the same store.
  auto again = OpenStore();
  ASSERT_NE(again, nullptr);
  again->Bootstrap(e.ExportImage());
  ASSERT_EQ(again->Accounts().size(), 2U);
  EXPECT_EQ(again->Accounts()[1].name, "bob.B-2_x");
  EXPECT_EQ(again->FindKey(k1)->secret, s1);
  EXPECT_TRUE(again->FindKey(k1)->revoked);
  EXPECT_EQ(again->FindKey(k2)->ed25519_public_key, public_key);
  EXPECT_EQ(again->admin_token(), store->admin_token());
  // The next account continues after the recorded ones.
  RunOk(e, *again, again->NewAccount("carol", 4000));
  EXPECT_EQ(again->FindAccount(AccountId{3})->name, "carol");
}

// The master key: a store that holds sealed secrets refuses to serve
// without it or with another one (the error names the file and a key), and
// never makes a new one over them; an altered sealed secret does not open.
TEST_F(KeyStoreTest, SecretsAreSealedWithTheMasterKey) {
  engine::Engine e(Config());
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const fs::path key_file = dir_ / "master.key";
  ASSERT_TRUE(fs::exists(key_file));
  EXPECT_EQ(fs::status(key_file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  RunOk(e, *store, store->NewAccount("alice", 1));
  Result<engine::AuthChange> k = store->NewKey(AccountId{1}, 2, kDefaultPermissions);
  RunOk(e, *store, k);
  const std::string key(k->subject.view());
  EXPECT_EQ(store->secret_census().sealed, 1U);
  const engine::EngineImage image = e.ExportImage();

  // The same key file: served again.
  auto same = OpenStore();
  ASSERT_NE(same, nullptr);
  same->Bootstrap(image);
  EXPECT_TRUE(same->EnsureMasterKey().ok());
  EXPECT_EQ(same->FindKey(key)->secret, store->FindKey(key)->secret);

  // Another key: refused, naming the file and the key.
  const std::string good = ReadText(key_file);
  WriteText(key_file, MasterKey::Generate().ToHex() + "\n");
  fs::permissions(key_file, fs::perms::owner_read | fs::perms::owner_write);
  Result<std::unique_ptr<KeyStore>> other = KeyStore::Open(dir_, 100);
  ASSERT_TRUE(other.ok());
  (*other)->Bootstrap(image);
  EXPECT_TRUE((*other)->FindKey(key)->secret.empty());
  const Status wrong = (*other)->EnsureMasterKey();
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find(key_file.string() + " does not open the secret of API key " +
                                 key.substr(0, 8)),
            std::string::npos)
      << wrong.message();

  // No key file: refused, and none is made.
  fs::remove(key_file);
  Result<std::unique_ptr<KeyStore>> none = KeyStore::Open(dir_, 100);
  ASSERT_TRUE(none.ok());
  (*none)->Bootstrap(image);
  const Status missing = (*none)->EnsureMasterKey();
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("1 API key secrets in this data directory are sealed"),
            std::string::npos)
      << missing.message();
  EXPECT_FALSE(fs::exists(key_file));
  EXPECT_FALSE((*none)->NewKey(AccountId{1}, 3, kDefaultPermissions).ok());

  // A sealed secret opens only with its key, for its API key, unaltered.
  auto master = MasterKey::FromHex(good);
  ASSERT_TRUE(master.ok());
  const std::string raw(kSecretBytes, '\x5a');
  const std::string sealed = master->Seal(key, raw);
  EXPECT_EQ(master->Open(key, sealed).value(), raw);
  EXPECT_FALSE(master->Open(std::string(64, 'k'), sealed).ok());
  EXPECT_FALSE(MasterKey::Generate().Open(key, sealed).ok());
  std::string altered = sealed;
  altered[10] = altered[10] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(master->Open(key, altered).ok());
  EXPECT_FALSE(master->Open(key, "plain text").ok());
  EXPECT_EQ(FormOf(std::string(64, '*')), SecretForm::kScrubbed);
  EXPECT_EQ(FormOf(std::string(64, 'S')), SecretForm::kPlain);
}

TEST_F(KeyStoreTest, AccountNameRules) {
  engine::Engine e(Config());
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RunOk(e, *store, store->NewAccount("alice", 1));
  Result<engine::AuthChange> dup = store->NewAccount("alice", 2);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dup.status().message(), "account name 'alice' is taken");
  for (const std::string& bad :
       {std::string(""), std::string(65, 'a'), std::string("a b"), std::string("caf\xc3\xa9"),
        std::string("x/y"), std::string("q\"")}) {
    SCOPED_TRACE(bad);
    Result<engine::AuthChange> r = store->NewAccount(bad, 3);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  RunOk(e, *store, store->NewAccount(std::string(64, 'z'), 4));
  RunOk(e, *store, store->NewAccount("Alice", 5));  // names are case-sensitive
  EXPECT_EQ(store->Accounts().size(), 3U);
}

TEST_F(KeyStoreTest, MaxAccounts) {
  engine::Engine e(Config(3));
  auto store = OpenStore(3);  // ids 1 and 2; 0 is the fee account
  ASSERT_NE(store, nullptr);
  RunOk(e, *store, store->NewAccount("a", 1));
  RunOk(e, *store, store->NewAccount("b", 1));
  Result<engine::AuthChange> c = store->NewAccount("c", 1);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(store->Accounts().size(), 2U);
}

TEST_F(KeyStoreTest, KeysNeedAnAccountAndRevocationsAKey) {
  engine::Engine e(Config());
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->NewKey(AccountId{1}, 2, kDefaultPermissions).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store->Revocation("nope").status().code(), StatusCode::kNotFound);
  RunOk(e, *store, store->NewAccount("alice", 1));
  const std::string public_key(32, 'p');
  RunOk(e, *store, store->NewKey(AccountId{1}, 2, kDefaultPermissions, public_key));
  Result<engine::AuthChange> again =
      store->NewKey(AccountId{1}, 3, kDefaultPermissions, public_key);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->NewKey(AccountId{1}, 3, kDefaultPermissions, "short").status().code(),
            StatusCode::kInvalidArgument);
  // The engine has the last word: a name taken between the check and the
  // journal is refused there, and nothing changes.
  Result<engine::AuthChange> bob1 = store->NewAccount("bob", 4);
  Result<engine::AuthChange> bob2 = store->NewAccount("bob", 5);
  ASSERT_TRUE(bob1.ok() && bob2.ok());
  RunOk(e, *store, bob1);
  const std::vector<engine::Event> out = Run(e, *store, *bob2);
  ASSERT_EQ(out.size(), 1U);
  ASSERT_EQ(out[0].type(), engine::EventType::kRejected);
  EXPECT_EQ(std::get<engine::Rejected>(out[0].body).reason, RejectReason::kNameTaken);
  EXPECT_EQ(store->Accounts().size(), 2U);
}

// A data directory of a version that kept accounts and keys in auth.json:
// its contents become commands, in order, that the engine accepts; once they
// are journaled nothing is left to import, and the file is set aside.
TEST_F(KeyStoreTest, LegacyFileIsImportedThroughTheEngine) {
  const std::string hmac_key(64, 'k');
  const std::string secret(64, 's');
  const std::string revoked_key(64, 'r');
  const std::string ed_key(64, 'e');
  const std::string raw_public(32, '\x11');
  WriteText(auth_path(),
            "{\"version\":1,\"accounts\":[{\"id\":2,\"name\":\"bob\",\"created_ms\":20},"
            "{\"id\":1,\"name\":\"alice\",\"created_ms\":10}],\"keys\":["
            "{\"key\":\"" +
                hmac_key + "\",\"secret\":\"" + secret +
                "\",\"account\":1,\"created_ms\":30,\"revoked\":false,"
                "\"permissions\":[\"READ\",\"WITHDRAW\"]},"
                "{\"key\":\"" +
                revoked_key + "\",\"secret\":\"" + secret +
                "\",\"account\":2,\"created_ms\":31,\"revoked\":true},"
                "{\"key\":\"" +
                ed_key + "\",\"secret\":\"\",\"ed25519\":\"" + Base64Encode(raw_public) +
                "\",\"account\":2,\"created_ms\":32,\"revoked\":false}]}");
  engine::Engine e(Config());
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->Accounts().empty()) << "served only once journaled";
  Result<std::vector<engine::AuthChange>> changes = store->LegacyChanges();
  ASSERT_TRUE(changes.ok()) << changes.status().message();
  // 2 accounts, 2 keys; the revoked key, never journaled, stays out.
  ASSERT_EQ(changes->size(), 4U);
  EXPECT_EQ((*changes)[0].subject.view(), "alice");
  EXPECT_EQ((*changes)[3].subject.view(), ed_key);
  for (const engine::AuthChange& c : *changes) RunOk(e, *store, c);

  EXPECT_EQ(store->FindAccount(AccountId{1})->name, "alice");
  EXPECT_EQ(store->FindAccount(AccountId{2})->created_ms, 20);
  ASSERT_TRUE(store->FindKey(hmac_key).has_value());
  EXPECT_EQ(store->FindKey(hmac_key)->secret, secret);
  EXPECT_EQ(store->FindKey(hmac_key)->permissions, kRead | kWithdraw);
  EXPECT_EQ(store->FindKey(hmac_key)->created_ms, 30);
  EXPECT_FALSE(store->FindKey(revoked_key).has_value());
  EXPECT_EQ(store->FindKey(ed_key)->ed25519_public_key, raw_public);
  EXPECT_FALSE(store->FindKey(ed_key)->revoked);

  // A second start (the import done, or half done before a crash) adds
  // nothing twice.
  Result<std::vector<engine::AuthChange>> left = store->LegacyChanges();
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
  const std::string text = ReadText(auth_path());
  ASSERT_TRUE(store->RetireLegacyFile().ok());
  EXPECT_FALSE(fs::exists(auth_path()));
  EXPECT_EQ(ReadText(dir_ / "auth.json.imported"), text);
  auto reopened = OpenStore();
  ASSERT_NE(reopened, nullptr);
  EXPECT_TRUE(reopened->LegacyChanges()->empty());
}

TEST_F(KeyStoreTest, LegacyFileThatDisagreesWithTheJournalIsRefused) {
  engine::Engine e(Config());
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RunOk(e, *store, store->NewAccount("bob", 1));
  WriteText(auth_path(),
            R"({"version":1,"accounts":[{"id":1,"name":"alice","created_ms":1}],"keys":[]})");
  auto other = OpenStore();
  ASSERT_NE(other, nullptr);
  other->Bootstrap(e.ExportImage());
  Result<std::vector<engine::AuthChange>> r = other->LegacyChanges();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("'alice' there and 'bob' in the journal"), std::string::npos)
      << r.status().message();
  // Ids with a gap cannot be given again in order.
  WriteText(auth_path(),
            R"({"version":1,"accounts":[{"id":2,"name":"carol","created_ms":1}],"keys":[]})");
  auto gap = OpenStore();
  ASSERT_NE(gap, nullptr);
  EXPECT_EQ(gap->LegacyChanges().status().code(), StatusCode::kCorruption);
}

// A key the journal has: revoked in the file since, the journal learns it;
// the same key with another secret, or a new key with a public key the
// journal has under another key, refuses the whole import before anything is
// journaled.
TEST_F(KeyStoreTest, LegacyKeysAreCheckedAgainstTheJournal) {
  engine::Engine e(Config());
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RunOk(e, *store, store->NewAccount("alice", 1));
  Result<engine::AuthChange> k = store->NewKey(AccountId{1}, 2, kDefaultPermissions);
  RunOk(e, *store, k);
  const std::string key(k->subject.view());
  const std::string secret = store->FindKey(key)->secret;  // as its owner has it
  const std::string raw_public(32, 'q');
  RunOk(e, *store, store->NewKey(AccountId{1}, 3, kDefaultPermissions, raw_public));
  const auto file = [&](const std::string& key_secret, bool revoked, const std::string& extra) {
    return R"({"version":1,"accounts":[{"id":1,"name":"alice","created_ms":1}],"keys":[)"
           R"({"key":")" +
           key + R"(","secret":")" + key_secret + R"(","account":1,"created_ms":2,"revoked":)" +
           (revoked ? "true" : "false") + R"(,"permissions":["READ","TRADE"]})" + extra + "]}";
  };
  const auto changes = [&](const std::string& text) {
    WriteText(auth_path(), text);
    auto s = OpenStore();
    EXPECT_NE(s, nullptr);
    s->Bootstrap(e.ExportImage());
    return s->LegacyChanges();
  };
  Result<std::vector<engine::AuthChange>> r = changes(file(secret, true, ""));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1U);
  EXPECT_EQ((*r)[0].kind, engine::AuthChangeKind::kRevokeKey);
  EXPECT_EQ((*r)[0].subject.view(), key);

  r = changes(file(std::string(64, 'x'), false, ""));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);

  const std::string shared = R"(,{"key":")" + std::string(64, 'n') +
                             R"(","secret":"","ed25519":")" + Base64Encode(raw_public) +
                             R"(","account":1,"created_ms":9,"revoked":false})";
  r = changes(file(secret, false, shared));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("public key"), std::string::npos) << r.status().message();
}

TEST_F(KeyStoreTest, MalformedFileRefusedAndUntouched) {
  const std::string valid_key(64, 'k');
  const std::string valid_secret(64, 's');
  const std::string key_entry = "{\"key\":\"" + valid_key + "\",\"secret\":\"" + valid_secret +
                                "\",\"account\":1,\"created_ms\":1,\"revoked\":false}";
  const std::string alice = "{\"id\":1,\"name\":\"alice\",\"created_ms\":1}";
  struct Case {
    std::string text;
    std::string why;  // a part of the message
  };
  const Case cases[] = {
      {"{\"version\":1,\"accounts\":[", "not valid JSON"},
      {"", "not valid JSON"},
      {"[]", "not a JSON object"},
      {"{\"version\":2,\"accounts\":[],\"keys\":[]}", "version"},
      {"{\"version\":1,\"keys\":[]}", "\"accounts\" is not an array"},
      {"{\"version\":1,\"accounts\":[],\"keys\":{}}", "\"keys\" is not an array"},
      {"{\"version\":1,\"accounts\":[{\"id\":0,\"name\":\"a\",\"created_ms\":1}],\"keys\":[]}",
       "accounts[0]: id 0 is outside 1..99"},
      {"{\"version\":1,\"accounts\":[" + alice + "," + alice + "],\"keys\":[]}",
       "accounts[1]: id 1 appears twice"},
      {"{\"version\":1,\"accounts\":[" + alice +
           ",{\"id\":2,\"name\":\"alice\",\"created_ms\":1}],\"keys\":[]}",
       "name 'alice' appears twice"},
      {"{\"version\":1,\"accounts\":[{\"id\":1,\"name\":\"a b\",\"created_ms\":1}],\"keys\":[]}",
       "accounts[0]: account name 'a b'"},
      {"{\"version\":1,\"accounts\":[{\"id\":1,\"name\":\"a\"}],\"keys\":[]}", "accounts[0] needs"},
      {"{\"version\":1,\"accounts\":[],\"keys\":[" + key_entry + "]}",
       "keys[0]: account 1 does not exist"},
      {"{\"version\":1,\"accounts\":[" + alice + "],\"keys\":[" + key_entry + "," + key_entry +
           "]}",
       "keys[1]: the key appears twice"},
      {"{\"version\":1,\"accounts\":[" + alice + "],\"keys\":[{\"key\":\"short\",\"secret\":\"" +
           valid_secret + "\",\"account\":1,\"created_ms\":1,\"revoked\":false}]}",
       "keys[0]: key and secret must be 64"},
      {"{\"version\":1,\"accounts\":[" + alice + "],\"keys\":[{\"key\":\"" + valid_key +
           "\",\"secret\":\"" + valid_secret + "\",\"account\":1,\"created_ms\":1}]}",
       "keys[0] needs"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    WriteText(auth_path(), c.text);
    Result<std::unique_ptr<KeyStore>> r = KeyStore::Open(dir_, 100);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    const std::string& msg = r.status().message();
    EXPECT_EQ(msg.rfind(auth_path().string() + ": ", 0), 0U) << msg;
    EXPECT_NE(msg.find(c.why), std::string::npos) << msg;
    EXPECT_EQ(ReadText(auth_path()), c.text);
    EXPECT_FALSE(fs::exists(token_path()));  // nothing written on failure
  }
  // The same file, made valid, loads: its account and key are to be imported.
  WriteText(auth_path(), "{\"version\":1,\"accounts\":[" + alice + "],\"keys\":[" + key_entry +
                             "],\"comment\":\"unknown fields are ignored\"}");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Result<std::vector<engine::AuthChange>> changes = store->LegacyChanges();
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 2U);
  EXPECT_EQ((*changes)[1].subject.view(), valid_key);
  EXPECT_EQ((*changes)[1].secret.view(), valid_secret);
}

TEST_F(KeyStoreTest, UnreadableFileIsAnError) {
  fs::create_directory(auth_path());  // a directory where the file should be
  Result<std::unique_ptr<KeyStore>> r = KeyStore::Open(dir_, 100);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find(auth_path().string()), std::string::npos);
}

// ---------------------------------------------------------------- RateLimiter

TEST(RateLimiterTest, BurstThenRefused) {
  RateLimiter rl({.weight_per_minute = 60, .burst = 10, .max_keys = 1000});
  for (uint32_t i = 1; i <= 10; ++i) {
    const RateDecision d = rl.Take("k", 1, 0);
    EXPECT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.used_weight_1m, i);
  }
  const RateDecision d = rl.Take("k", 1, 0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_s, 1U);    // one token per second
  EXPECT_EQ(d.used_weight_1m, 10U);  // a refused request is not counted
  // Another key has its own bucket.
  EXPECT_TRUE(rl.Take("other", 10, 0).allowed);
}

TEST(RateLimiterTest, RefillWithInjectedTime) {
  RateLimiter rl({.weight_per_minute = 60, .burst = 10, .max_keys = 1000});
  EXPECT_TRUE(rl.Take("k", 10, 0).allowed);
  EXPECT_FALSE(rl.Take("k", 1, 999).allowed);
  EXPECT_TRUE(rl.Take("k", 1, 1000).allowed);
  EXPECT_FALSE(rl.Take("k", 1, 1000).allowed);
  // 5 seconds later 5 tokens, never more than the burst.
  EXPECT_FALSE(rl.Take("k", 6, 6000).allowed);
  EXPECT_TRUE(rl.Take("k", 5, 6000).allowed);
  EXPECT_TRUE(rl.Take("k", 10, 600'000).allowed);
  EXPECT_FALSE(rl.Take("k", 1, 600'000).allowed);
  // A clock that goes back refills nothing.
  EXPECT_FALSE(rl.Take("k", 1, 500'000).allowed);
  EXPECT_TRUE(rl.Take("k", 1, 601'000).allowed);
}

TEST(RateLimiterTest, RetryAfter) {
  RateLimiter rl({.weight_per_minute = 6, .burst = 10, .max_keys = 1000});  // 0.1 token/s
  EXPECT_TRUE(rl.Take("k", 10, 0).allowed);
  EXPECT_EQ(rl.Take("k", 1, 0).retry_after_s, 10U);
  EXPECT_EQ(rl.Take("k", 3, 0).retry_after_s, 30U);
  // 2.5 s later 0.25 tokens: 0.75 missing = 7.5 s, rounded up.
  EXPECT_EQ(rl.Take("k", 1, 2500).retry_after_s, 8U);
  // 9.999 s: 0.0001 token missing (1 ms) still means 1 s.
  const RateDecision d = rl.Take("k", 1, 9999);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_s, 1U);
  EXPECT_TRUE(rl.Take("k", 1, 10'000).allowed);
}

TEST(RateLimiterTest, WeightAboveBurst) {
  RateLimiter rl({.weight_per_minute = 6000, .burst = 100, .max_keys = 1000});
  const RateDecision d = rl.Take("k", 101, 0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_s, 60U);
  EXPECT_EQ(d.used_weight_1m, 0U);
  EXPECT_TRUE(rl.Take("k", 100, 0).allowed);  // nothing was taken
}

TEST(RateLimiterTest, UsedWeightResetsAtMinuteBoundary) {
  RateLimiter rl({.weight_per_minute = 1'000'000, .burst = 1'000'000, .max_keys = 1000});
  EXPECT_EQ(rl.Take("k", 5, 60'000).used_weight_1m, 5U);
  EXPECT_EQ(rl.Take("k", 7, 119'999).used_weight_1m, 12U);
  EXPECT_EQ(rl.Take("k", 2, 120'000).used_weight_1m, 2U);
  EXPECT_EQ(rl.Take("k", 1, 179'999).used_weight_1m, 3U);
  EXPECT_EQ(rl.Take("k", 1, 300'000).used_weight_1m, 1U);
}

TEST(RateLimiterTest, DisabledStillCountsWeight) {
  RateLimiter rl({.weight_per_minute = 0, .burst = 0, .max_keys = 1000});
  for (uint32_t i = 1; i <= 100; ++i) {
    const RateDecision d = rl.Take("k", 1000, 0);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.retry_after_s, 0U);
    EXPECT_EQ(d.used_weight_1m, 1000 * i);
  }
  EXPECT_EQ(rl.Take("k", 1, 60'000).used_weight_1m, 1U);
  // The counter saturates instead of wrapping.
  EXPECT_EQ(rl.Take("k", std::numeric_limits<uint32_t>::max(), 60'001).used_weight_1m,
            std::numeric_limits<uint32_t>::max());
}

TEST(RateLimiterTest, ExtremeRatesDoNotOverflow) {
  const uint32_t max = std::numeric_limits<uint32_t>::max();
  RateLimiter rl({.weight_per_minute = max, .burst = max, .max_keys = 1000});
  EXPECT_TRUE(rl.Take("k", max, 0).allowed);
  EXPECT_FALSE(rl.Take("k", max, 0).allowed);
  EXPECT_TRUE(rl.Take("k", max, 4'000'000'000'000).allowed);
  RateLimiter slow({.weight_per_minute = 1, .burst = max, .max_keys = 1000});
  EXPECT_TRUE(slow.Take("k", max, 0).allowed);
  const RateDecision d = slow.Take("k", max, 0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_s, max);  // 2^32 minutes, clamped
}

// Keys in the same stripe as `key` (16 stripes chosen by std::hash).
std::vector<std::string> SameStripe(const std::string& key, std::size_t n) {
  const auto stripe = [](std::string_view k) { return std::hash<std::string_view>{}(k) % 16; };
  std::vector<std::string> out;
  for (int i = 0; out.size() < n; ++i) {
    std::string k = "key" + std::to_string(i);
    if (k != key && stripe(k) == stripe(key)) out.push_back(k);
  }
  return out;
}

TEST(RateLimiterTest, DropsLeastRecentlyUsedWhenFull) {
  // max_keys 16: one bucket per stripe.
  RateLimiter rl({.weight_per_minute = 1, .burst = 5, .max_keys = 16});
  const std::vector<std::string> others = SameStripe("a", 1);
  EXPECT_TRUE(rl.Take("a", 5, 0).allowed);
  EXPECT_FALSE(rl.Take("a", 1, 1).allowed);
  EXPECT_TRUE(rl.Take(others[0], 1, 2).allowed);  // drops "a"
  EXPECT_TRUE(rl.Take("a", 5, 3).allowed);        // a fresh, full bucket again
}

TEST(RateLimiterTest, DropsIdleBucketsFirst) {
  // max_keys 32: two buckets per stripe.
  RateLimiter rl({.weight_per_minute = 1, .burst = 5, .max_keys = 32});
  const std::vector<std::string> o = SameStripe("a", 2);
  EXPECT_TRUE(rl.Take("a", 5, 0).allowed);
  EXPECT_TRUE(rl.Take(o[0], 5, 61'000).allowed);
  EXPECT_TRUE(rl.Take(o[1], 1, 61'000).allowed);  // "a" is idle: dropped
  // o[0] was kept: its empty bucket still refuses.
  EXPECT_FALSE(rl.Take(o[0], 1, 61'001).allowed);
  // "a" would have had ~1 token left (refill 1/min): a fresh bucket allows 5.
  EXPECT_TRUE(rl.Take("a", 5, 61'002).allowed);
}

TEST(OrderCountLimiterTest, FixedWindowsPerAccount) {
  OrderCountLimiter ol({.per_10s = 2, .per_day = 3});
  const int64_t day = 86'400'000;
  const int64_t t0 = 19'000 * day + 5'000;  // 5 s into a window and a day
  OrderCountDecision d = ol.Take(1, t0);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.count_10s, 1U);
  EXPECT_EQ(d.count_1d, 1U);
  EXPECT_TRUE(ol.Take(1, t0 + 1).allowed);
  d = ol.Take(1, t0 + 2);
  EXPECT_FALSE(d.allowed);
  EXPECT_FALSE(d.day_limit);
  EXPECT_EQ(d.retry_after_s, 5U);       // until the window ends
  EXPECT_EQ(d.count_10s, 2U);           // a refused order is not counted
  EXPECT_TRUE(ol.Take(2, t0).allowed);  // another account
  // The next window (fixed, from the epoch): one more for the day, then none.
  d = ol.Take(1, t0 + 5'000);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.count_10s, 1U);
  EXPECT_EQ(d.count_1d, 3U);
  d = ol.Take(1, t0 + 15'000);
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(d.day_limit);
  EXPECT_EQ(d.retry_after_s, static_cast<uint32_t>((day - 20'000 + 999) / 1000));
  // A new day.
  d = ol.Take(1, 19'001 * day);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.count_1d, 1U);
  // No limits: counted only.
  OrderCountLimiter none({});
  for (int i = 0; i < 500; ++i) d = none.Take(7, t0);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.count_10s, 500U);
}

// ---------------------------------------------------------------- Ed25519

std::string FromHex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// RFC 8032, section 7.1, tests 1 to 3 (public key, message, signature).
struct Rfc8032Vector {
  std::string_view public_key, message, signature;
};
constexpr Rfc8032Vector kRfc8032[] = {
    {"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bac"
     "c61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
    {"3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e"
     "458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
    {"fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290"
     "ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
};

TEST(Ed25519Test, Rfc8032Vectors) {
  for (const Rfc8032Vector& v : kRfc8032) {
    SCOPED_TRACE(v.message);
    const std::string key = FromHex(v.public_key);
    const std::string msg = FromHex(v.message);
    const std::string sig = FromHex(v.signature);
    EXPECT_TRUE(Ed25519Verify(key, msg, sig));
    // Any flipped bit of the message or the signature fails.
    std::string bad_sig = sig;
    bad_sig[10] = static_cast<char>(bad_sig[10] ^ 1);
    EXPECT_FALSE(Ed25519Verify(key, msg, bad_sig));
    EXPECT_FALSE(Ed25519Verify(key, msg + "x", sig));
    EXPECT_FALSE(Ed25519Verify(key, msg, sig.substr(0, 63)));
    EXPECT_FALSE(Ed25519Verify(key.substr(1), msg, sig));
  }
  // One vector's signature under another's key.
  EXPECT_FALSE(Ed25519Verify(FromHex(kRfc8032[1].public_key), FromHex(kRfc8032[0].message),
                             FromHex(kRfc8032[0].signature)));
}

TEST(Ed25519Test, Base64RoundTripsAndRefusesMalformedText) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  for (std::string_view s : {"", "f", "fo", "foo", "foob", "fooba", "foobar", "\xff\x00\x80"}) {
    EXPECT_EQ(Base64Decode(Base64Encode(s)), std::string(s));
  }
  for (std::string_view bad : {"Zg=", "Zg", "Z===", "Zg=a", "Zm9v!A==", "=Zm9", "Zm9v\n"}) {
    EXPECT_EQ(Base64Decode(bad), std::nullopt) << bad;
  }
}

TEST(Ed25519Test, PublicKeysInPemDerOrRaw) {
  const std::string raw = FromHex(kRfc8032[0].public_key);
  // The DER SubjectPublicKeyInfo of an Ed25519 key: a fixed 12-byte prefix.
  const std::string der = FromHex("302a300506032b6570032100") + raw;
  const std::string pem =
      "-----BEGIN PUBLIC KEY-----\n" + Base64Encode(der) + "\n-----END PUBLIC KEY-----\n";
  EXPECT_EQ(ParseEd25519PublicKey(pem), raw);
  EXPECT_EQ(ParseEd25519PublicKey("  " + pem), raw);
  EXPECT_EQ(ParseEd25519PublicKey(Base64Encode(der)), raw);
  EXPECT_EQ(ParseEd25519PublicKey(Base64Encode(raw)), raw);
  EXPECT_EQ(ParseEd25519PublicKey(Base64Encode(raw.substr(1))), std::nullopt);
  EXPECT_EQ(ParseEd25519PublicKey("not a key"), std::nullopt);
  EXPECT_EQ(ParseEd25519PublicKey("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"),
            std::nullopt);
  // An X25519 key (another OID) is not an Ed25519 key.
  EXPECT_EQ(ParseEd25519PublicKey(Base64Encode(FromHex("302a300506032b656e032100") + raw)),
            std::nullopt);
}

TEST(Ed25519Test, VerifySignatureByKeyType) {
  ApiKey hmac;
  hmac.key = "k";
  hmac.secret = "s3cret";
  EXPECT_TRUE(VerifySignature(hmac, "a=1", HmacSha256Hex("s3cret", "a=1")));
  EXPECT_FALSE(VerifySignature(hmac, "a=2", HmacSha256Hex("s3cret", "a=1")));
  // An empty secret never verifies (it would be anyone's).
  hmac.secret.clear();
  EXPECT_FALSE(VerifySignature(hmac, "a=1", HmacSha256Hex("", "a=1")));

  ApiKey ed;
  ed.ed25519_public_key = FromHex(kRfc8032[2].public_key);
  const std::string msg = FromHex(kRfc8032[2].message);
  const std::string sig = FromHex(kRfc8032[2].signature);
  EXPECT_TRUE(VerifySignature(ed, msg, Base64Encode(sig)));
  EXPECT_FALSE(VerifySignature(ed, msg, Base64Encode(sig).substr(1)));
  EXPECT_FALSE(VerifySignature(ed, msg, HmacSha256Hex("", msg)));
}

TEST_F(KeyStoreTest, Ed25519KeysPersistWithoutASecret) {
  const std::string raw = FromHex(kRfc8032[0].public_key);
  engine::Engine e(Config());
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RunOk(e, *store, store->NewAccount("alice", 1000));
  Result<engine::AuthChange> k = store->NewKey(AccountId{1}, 2000, kDefaultPermissions, raw);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_TRUE(k->ed25519);
  EXPECT_EQ(k->secret.view(), Base64Encode(raw));  // the public key, never a secret
  const std::string api_key(k->subject.view());
  EXPECT_EQ(api_key.size(), 64u);
  RunOk(e, *store, k);
  // The same public key twice, a wrong size, an unknown account: refused.
  EXPECT_EQ(store->NewKey(AccountId{1}, 2000, kDefaultPermissions, raw).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store->NewKey(AccountId{1}, 2000, kDefaultPermissions, raw.substr(1)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store->NewKey(AccountId{9}, 2000, kDefaultPermissions, FromHex(kRfc8032[1].public_key))
                .status()
                .code(),
            StatusCode::kNotFound);

  // After a restart, from the engine's image.
  auto again = OpenStore();
  ASSERT_NE(again, nullptr);
  again->Bootstrap(e.ExportImage());
  const std::optional<ApiKey> found = again->FindKey(api_key);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->ed25519_public_key, raw);
  EXPECT_TRUE(found->secret.empty());
  EXPECT_EQ(found->account, AccountId{1});
  EXPECT_EQ(found->created_ms, 2000);

  // A legacy auth.json whose Ed25519 key has a secret, or a key of the wrong
  // size, is refused.
  const std::string good = R"({"version":1,"accounts":[{"id":1,"name":"a","created_ms":1}],)"
                           R"("keys":[{"key":")" +
                           std::string(64, 'k') + R"(","secret":"","ed25519":")" +
                           Base64Encode(raw) + R"(","account":1,"created_ms":2,"revoked":false}]})";
  WriteText(auth_path(), good);
  EXPECT_TRUE(KeyStore::Open(dir_, 100).ok());
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"\"secret\":\"\"", "\"secret\":\"x\""},
        std::pair<std::string, std::string>{Base64Encode(raw), Base64Encode(raw.substr(2))}}) {
    std::string broken = good;
    const std::size_t at = broken.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    broken.replace(at, from.size(), to);
    WriteText(auth_path(), broken);
    Result<std::unique_ptr<KeyStore>> r = KeyStore::Open(dir_, 100);
    EXPECT_FALSE(r.ok()) << from;
  }
}

}  // namespace
}  // namespace mb::gateway
