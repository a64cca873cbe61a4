#include "common/decimal.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"

namespace mb {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

struct Good {
  const char* text;
  int scale;
  bool allow_negative;
  int64_t want;
};

TEST(ParseDecimal, AcceptsWellFormedValues) {
  const Good cases[] = {
      {"0", 0, false, 0},
      {"0", 8, false, 0},
      {"123", 0, false, 123},
      {"123", 2, false, 12300},
      {"123.45", 2, false, 12345},
      {"123.4", 2, false, 12340},
      {"0.00100000", 8, false, 100000},
      {"0.001", 8, false, 100000},
      {"007.5", 1, false, 75},
      {"000000000000000000000000000000001", 0, false, 1},
      {"1.50000000000", 8, false, 150000000},  // zeros beyond the scale are exact
      {"1.000000000000000000000000000", 0, false, 1},
      {"0.0", 0, false, 0},
      {"0.000000000000000001", 18, false, 1},
      {"1", 18, false, 1'000'000'000'000'000'000},
      {"-1.5", 8, true, -150000000},
      {"-0", 0, true, 0},
      {"-0.00000000", 8, true, 0},
      {"-007.50", 1, true, -75},
      // Boundaries: INT64_MAX and INT64_MIN exactly, at several scales.
      {"9223372036854775807", 0, false, kMax},
      {"92233720368.54775807", 8, false, kMax},
      {"92233720368.547758070000", 8, false, kMax},
      {"9.223372036854775807", 18, false, kMax},
      {"0009223372036854775807", 0, false, kMax},
      {"-9223372036854775808", 0, true, kMin},
      {"-92233720368.54775808", 8, true, kMin},
      {"-9.223372036854775808", 18, true, kMin},
  };
  for (const Good& c : cases) {
    SCOPED_TRACE(std::string(c.text) + " at scale " + std::to_string(c.scale));
    Result<int64_t> r = ParseDecimal(c.text, c.scale, c.allow_negative);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(*r, c.want);
    int64_t raw = 0;
    EXPECT_EQ(TryParseDecimal(c.text, c.scale, c.allow_negative, &raw), DecimalError::kOk);
    EXPECT_EQ(raw, c.want);
  }
}

struct Bad {
  std::string text;
  int scale;
  bool allow_negative;
  DecimalError error;
  StatusCode code;
  const char* reason;  // a substring of the message
};

TEST(ParseDecimal, RefusesMalformedValuesWithAReason) {
  constexpr auto kSyntax = DecimalError::kSyntax;
  constexpr auto kInvalid = StatusCode::kInvalidArgument;
  constexpr auto kRange = StatusCode::kOutOfRange;
  const std::vector<Bad> cases = {
      {"", 8, true, kSyntax, kInvalid, "\"\" is not a decimal number: it is empty"},
      {" 1", 8, false, kSyntax, kInvalid, "whitespace is not allowed"},
      {"1 ", 8, false, kSyntax, kInvalid, "whitespace is not allowed"},
      {"1 000", 8, false, kSyntax, kInvalid, "whitespace is not allowed"},
      {"\t1", 8, false, kSyntax, kInvalid, "whitespace is not allowed"},
      {"1\n", 8, false, kSyntax, kInvalid, "whitespace is not allowed"},
      {"+1", 8, true, kSyntax, kInvalid, "a leading '+' is not allowed"},
      {"-", 8, true, kSyntax, kInvalid, "a sign without digits"},
      {"--1", 8, true, kSyntax, kInvalid, "unexpected character \"-\""},
      {"1e5", 8, false, kSyntax, kInvalid, "exponents are not accepted"},
      {"1E-3", 8, false, kSyntax, kInvalid, "exponents are not accepted"},
      {"1.5e3", 8, false, kSyntax, kInvalid, "exponents are not accepted"},
      {".5e1", 8, false, kSyntax, kInvalid, "exponents are not accepted"},
      {"NaN", 8, false, kSyntax, kInvalid, "NaN and infinity are not numbers"},
      {"nan", 8, false, kSyntax, kInvalid, "NaN and infinity are not numbers"},
      {"Inf", 8, false, kSyntax, kInvalid, "NaN and infinity are not numbers"},
      {"inf", 8, false, kSyntax, kInvalid, "NaN and infinity are not numbers"},
      {"infinity", 8, false, kSyntax, kInvalid, "NaN and infinity are not numbers"},
      {"-Infinity", 8, true, kSyntax, kInvalid, "NaN and infinity are not numbers"},
      {"0x1A", 8, false, kSyntax, kInvalid, "hexadecimal is not accepted"},
      {"0X10", 8, false, kSyntax, kInvalid, "hexadecimal is not accepted"},
      {"1.2.3", 8, false, kSyntax, kInvalid, "more than one '.'"},
      {"1..2", 8, false, kSyntax, kInvalid, "more than one '.'"},
      {".", 8, false, kSyntax, kInvalid, "a lone '.' is not a number"},
      {".5", 8, false, kSyntax, kInvalid, "a digit is required before '.'"},
      {"-.5", 8, true, kSyntax, kInvalid, "a digit is required before '.'"},
      {"5.", 8, false, kSyntax, kInvalid, "a digit is required after '.'"},
      {"12a", 8, false, kSyntax, kInvalid, "unexpected character \"a\""},
      {"1,000", 8, false, kSyntax, kInvalid, "unexpected character \",\""},
      {"1_000", 8, false, kSyntax, kInvalid, "unexpected character \"_\""},
      {"\xef\xbc\x91", 8, false, kSyntax, kInvalid, "unexpected character \"\\xef\""},
      {std::string("1\0", 2), 8, false, kSyntax, kInvalid, "unexpected character \"\\x00\""},
      {"abc", 8, false, kSyntax, kInvalid, "unexpected character \"a\""},
      {"-1", 8, false, DecimalError::kNegative, kRange, "negative values are not allowed"},
      {"-0", 8, false, DecimalError::kNegative, kRange, "negative values are not allowed"},
      {"1.234", 2, false, DecimalError::kTooManyDecimals, kInvalid,
       "\"1.234\" has more decimal places than the asset's scale 2"},
      {"0.000000001", 8, false, DecimalError::kTooManyDecimals, kInvalid,
       "more decimal places than the asset's scale 8"},
      {"1.5", 0, false, DecimalError::kTooManyDecimals, kInvalid,
       "more decimal places than the asset's scale 0"},
      {"1.0000000001", 8, false, DecimalError::kTooManyDecimals, kInvalid,
       "more decimal places than the asset's scale 8"},
      // INT64_MAX + 1 unit and beyond: refused, never wrapped.
      {"9223372036854775808", 0, false, DecimalError::kOverflow, kRange,
       "out of range: the largest value at scale 0 is 9223372036854775807"},
      {"92233720368.54775808", 8, false, DecimalError::kOverflow, kRange,
       "the largest value at scale 8 is 92233720368.54775807"},
      {"9.223372036854775808", 18, false, DecimalError::kOverflow, kRange, "out of range"},
      {"10", 18, false, DecimalError::kOverflow, kRange, "out of range"},
      {"18446744073709551616", 0, false, DecimalError::kOverflow, kRange, "out of range"},
      {"99999999999999999999999999999", 0, false, DecimalError::kOverflow, kRange, "out of range"},
      {"-9223372036854775809", 0, true, DecimalError::kOverflow, kRange,
       "the smallest value at scale 0 is -9223372036854775808"},
      {"1", 19, false, DecimalError::kBadScale, kInvalid, "scale 19 is outside 0..18"},
      {"1", -1, false, DecimalError::kBadScale, kInvalid, "scale -1 is outside 0..18"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE("\"" + c.text + "\" at scale " + std::to_string(c.scale));
    Result<int64_t> r = ParseDecimal(c.text, c.scale, c.allow_negative);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code);
    EXPECT_NE(r.status().message().find(c.reason), std::string::npos) << r.status().message();
    int64_t raw = 42;
    EXPECT_EQ(TryParseDecimal(c.text, c.scale, c.allow_negative, &raw), c.error);
    EXPECT_EQ(raw, 42) << "a refused parse must leave *out alone";
  }
}

TEST(ParseDecimal, BoundsTheEchoedInput) {
  const std::string long_text = std::string(100, '1') + "x";
  Result<int64_t> r = ParseDecimal(long_text, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(std::string(64, '1') + "...\""), std::string::npos)
      << r.status().message();
  EXPECT_EQ(r.status().message().find(std::string(65, '1')), std::string::npos);
}

TEST(FormatDecimal, AlwaysShowsExactlyScaleDecimals) {
  struct Case {
    int64_t units;
    int scale;
    const char* want;
  };
  const Case cases[] = {
      {0, 0, "0"},
      {12, 0, "12"},
      {-12, 0, "-12"},
      {0, 8, "0.00000000"},
      {100000, 8, "0.00100000"},
      {-150000000, 8, "-1.50000000"},
      {1, 8, "0.00000001"},
      {-1, 3, "-0.001"},
      {12345, 2, "123.45"},
      {1, 18, "0.000000000000000001"},
      {1'000'000'000'000'000'000, 18, "1.000000000000000000"},
      {kMax, 0, "9223372036854775807"},
      {kMax, 8, "92233720368.54775807"},
      {kMax, 18, "9.223372036854775807"},
      {kMin, 0, "-9223372036854775808"},
      {kMin, 8, "-92233720368.54775808"},
      {kMin, 18, "-9.223372036854775808"},
      {kMin + 1, 18, "-9.223372036854775807"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FormatDecimal(c.units, c.scale), c.want) << c.units << " at scale " << c.scale;
  }
}

TEST(FormatDecimalShort, DropsTrailingZeros) {
  EXPECT_EQ(FormatDecimalShort(1000000, 8), "0.01");
  EXPECT_EQ(FormatDecimalShort(500000000, 8), "5");
  EXPECT_EQ(FormatDecimalShort(0, 8), "0");
  EXPECT_EQ(FormatDecimalShort(-150000000, 8), "-1.5");
  EXPECT_EQ(FormatDecimalShort(1200, 0), "1200");
  EXPECT_EQ(FormatDecimalShort(kMin, 18), "-9.223372036854775808");
}

TEST(ParseMultiple, DividesByTheStep) {
  Result<int64_t> ticks = ParseMultiple("1.01", 8, 1000000, "price", "tick size");
  ASSERT_TRUE(ticks.ok()) << ticks.status().message();
  EXPECT_EQ(*ticks, 101);
  Result<int64_t> lots = ParseMultiple("0.00300", 8, 1000, "quantity");
  ASSERT_TRUE(lots.ok()) << lots.status().message();
  EXPECT_EQ(*lots, 300);
  Result<int64_t> zero = ParseMultiple("0", 8, 1000, "quantity");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, 0);
  Result<int64_t> max = ParseMultiple("9223372036854775807", 0, 1, "quantity");
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(*max, kMax);
}

TEST(ParseMultiple, RefusesANonMultipleNamingTheField) {
  Result<int64_t> r = ParseMultiple("1.005", 8, 1000000, "price", "tick size");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "price 1.005 is not a multiple of tick size 0.01");

  r = ParseMultiple("0.0015", 8, 100000, "quantity");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "quantity 0.0015 is not a multiple of step size 0.001");
}

TEST(ParseMultiple, PrefixesParseErrorsWithTheField) {
  Result<int64_t> r = ParseMultiple("1e3", 8, 1000000, "price", "tick size");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("price: \"1e3\" is not a decimal number", 0), 0u)
      << r.status().message();

  r = ParseMultiple("-1", 8, 1000000, "price", "tick size");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(r.status().message().rfind("price: ", 0), 0u) << r.status().message();

  r = ParseMultiple("0.001", 2, 1, "price", "tick size");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more decimal places"), std::string::npos);
}

TEST(ParseMultiple, RefusesANonPositiveStep) {
  for (int64_t step : {int64_t{0}, int64_t{-5}}) {
    Result<int64_t> r = ParseMultiple("1", 8, step, "quantity", "step size");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("step size must be positive"), std::string::npos);
  }
}

TEST(Decimal, RoundTripsEveryScale) {
  std::vector<int64_t> values = {0, 1, -1, 9, 10, -10, kMax, kMin, kMax - 1, kMin + 1};
  int64_t p = 1;  // 10^e
  for (int e = 0; e <= 18; ++e) {
    values.push_back(p);
    values.push_back(-p);
    values.push_back(p - 1);
    values.push_back(-p + 1);
    if (e < 18) p *= 10;
  }
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 5000; ++i) {
    const uint64_t bits = rng();
    // Shift by a random amount so that small magnitudes are as common as large.
    const auto shift = static_cast<unsigned>(rng() % 64);
    values.push_back(static_cast<int64_t>(bits) >> shift);
  }
  for (int scale = 0; scale <= kMaxDecimalScale; ++scale) {
    for (int64_t v : values) {
      const std::string text = FormatDecimal(v, scale);
      Result<int64_t> back = ParseDecimal(text, scale, /*allow_negative=*/true);
      ASSERT_TRUE(back.ok()) << text << ": " << back.status().message();
      ASSERT_EQ(*back, v) << text << " at scale " << scale;
      if (v >= 0) {
        Result<int64_t> short_back = ParseDecimal(FormatDecimalShort(v, scale), scale);
        ASSERT_TRUE(short_back.ok());
        ASSERT_EQ(*short_back, v);
      }
    }
  }
}

TEST(DecimalError, HasNames) {
  EXPECT_EQ(ToString(DecimalError::kOk), "Ok");
  EXPECT_EQ(ToString(DecimalError::kTooManyDecimals), "TooManyDecimals");
  EXPECT_EQ(ToString(static_cast<DecimalError>(200)), "UNKNOWN");
}

}  // namespace
}  // namespace mb
