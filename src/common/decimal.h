// Exact conversion between decimal strings, as a Binance-style API and the
// configuration carry them, and fixed-point int64 values: "0.00100000" at
// scale 8 is 100000 units of 10^-8. No floating point is involved anywhere.
//
// Accepted grammar (Binance's own parameter pattern, plus an optional '-'):
//
//     decimal := ['-'] digit+ ['.' digit+]
//
// So "123", "123.45", "0.00100000" and "007.5" are accepted; ".5" and "5." are
// refused (write "0.5" and "5"), as are empty strings, whitespace anywhere, a
// leading '+', exponents ("1e5"), NaN and infinities, hexadecimal, more than one
// '.', and any other character. Digits beyond the scale are accepted only when
// they are all zero ("1.50000000000" at scale 8 is 150000000); any non-zero
// digit beyond it is refused. A value outside int64 is refused, never wrapped.
//
// Error codes of the Result forms:
//   kInvalidArgument — malformed text, too many decimal places, a scale outside
//                      0..kMaxDecimalScale, a step that is not positive, or a
//                      value that is not a multiple of its step;
//   kOutOfRange      — a value that does not fit in int64, or a negative value
//                      where negatives are not allowed.
// Messages quote the input (escaped, at most 64 characters) and say why.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mb {

// 10^18 is the largest power of ten that fits in int64.
inline constexpr int kMaxDecimalScale = 18;

// Why TryParseDecimal refused its input.
enum class DecimalError : uint8_t {
  kOk = 0,
  kBadScale,         // scale outside 0..kMaxDecimalScale
  kSyntax,           // not `['-'] digit+ ['.' digit+]`
  kNegative,         // '-' where negatives are not allowed
  kTooManyDecimals,  // a non-zero digit beyond the scale
  kOverflow,         // the value does not fit in int64
};

std::string_view ToString(DecimalError e) noexcept;

// The allocation-free core, for callers on a hot path (the gateway's decoder).
// On kOk stores the value in units of 10^-scale in *out; otherwise leaves *out
// alone.
[[nodiscard]] DecimalError TryParseDecimal(std::string_view text, int scale, bool allow_negative,
                                           int64_t* out) noexcept;

// As TryParseDecimal, with a message that says what is wrong with the text.
Result<int64_t> ParseDecimal(std::string_view text, int scale, bool allow_negative = false);

// Formats units of 10^-scale with exactly `scale` decimals, like Binance:
// (100000, 8) -> "0.00100000", (-150000000, 8) -> "-1.50000000", (12, 0) -> "12".
// Every int64, INT64_MIN included, formats exactly, and
// ParseDecimal(FormatDecimal(v, s), s, true) == v.
// REQUIRES: 0 <= scale <= kMaxDecimalScale (checked: aborts otherwise).
std::string FormatDecimal(int64_t units, int scale);

// As FormatDecimal without trailing zeros (nor a trailing '.'), for messages
// and configuration: (1000000, 8) -> "0.01", (500000000, 8) -> "5".
std::string FormatDecimalShort(int64_t units, int scale);

// Parses a non-negative decimal and divides it by its step: a price in quote
// units into ticks, a quantity in base units into lots. A value that is not a
// whole multiple of the step is refused with a message naming the field:
//   ParseMultiple("1.005", 8, 1000000, "price", "tick size") ->
//   "price 1.005 is not a multiple of tick size 0.01".
// Malformed input gives ParseDecimal's message prefixed with "<field>: ".
// REQUIRES: field and step_name are non-null C strings.
Result<int64_t> ParseMultiple(std::string_view text, int scale, int64_t step_units,
                              const char* field, const char* step_name = "step size");

}  // namespace mb
