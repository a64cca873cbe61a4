#include "common/decimal.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "common/checked.h"
#include "common/status.h"

namespace mb {
namespace {

constexpr std::size_t kMaxEcho = 64;  // input characters quoted in a message

constexpr bool IsDigit(char c) noexcept { return c >= '0' && c <= '9'; }

constexpr char ToLowerAscii(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// The input as it may appear in a message: quoted, escaped, bounded.
std::string Quote(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < kMaxEcho; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMaxEcho) out += "...";
  out += '"';
  return out;
}

// Why `text` does not match `['-'] digit+ ['.' digit+]`; called only after the
// parser refused it, so it names the first thing a person would fix.
std::string SyntaxReason(std::string_view text) {
  if (text.empty()) return "it is empty";
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      return "whitespace is not allowed";
    }
  }
  std::string_view body = text;
  if (body.front() == '+') return "a leading '+' is not allowed";
  if (body.front() == '-') body.remove_prefix(1);
  if (body.empty()) return "a sign without digits";

  std::string lower;
  for (char c : body) lower += ToLowerAscii(c);
  if (lower == "nan" || lower == "snan" || lower == "qnan" || lower == "inf" ||
      lower == "infinity") {
    return "NaN and infinity are not numbers";
  }
  if (lower.size() >= 2 && lower[0] == '0' && lower[1] == 'x') {
    return "hexadecimal is not accepted";
  }
  if ((IsDigit(body.front()) || body.front() == '.') && lower.find('e') != std::string::npos) {
    return "exponents are not accepted; write the number out in full";
  }
  std::size_t dots = 0;
  for (char c : body) {
    if (c == '.') {
      ++dots;
    } else if (!IsDigit(c)) {
      return "unexpected character " + Quote(std::string_view(&c, 1));
    }
  }
  if (dots > 1) return "more than one '.'";
  if (body == ".") return "a lone '.' is not a number";
  if (body.front() == '.') return "a digit is required before '.' (write 0.5, not .5)";
  if (body.back() == '.') return "a digit is required after '.' (write 5, not 5.)";
  return "expected digits with at most one '.'";
}

}  // namespace

std::string_view ToString(DecimalError e) noexcept {
  switch (e) {
    case DecimalError::kOk:
      return "Ok";
    case DecimalError::kBadScale:
      return "BadScale";
    case DecimalError::kSyntax:
      return "Syntax";
    case DecimalError::kNegative:
      return "Negative";
    case DecimalError::kTooManyDecimals:
      return "TooManyDecimals";
    case DecimalError::kOverflow:
      return "Overflow";
  }
  return "UNKNOWN";
}

DecimalError TryParseDecimal(std::string_view text, int scale, bool allow_negative,
                             int64_t* out) noexcept {
  if (scale < 0 || scale > kMaxDecimalScale) return DecimalError::kBadScale;
  const std::size_t n = text.size();
  std::size_t i = 0;
  const bool negative = n > 0 && text[0] == '-';
  if (negative) i = 1;

  const std::size_t int_begin = i;
  while (i < n && IsDigit(text[i])) ++i;
  const std::size_t int_end = i;
  if (int_end == int_begin) return DecimalError::kSyntax;

  std::size_t frac_begin = i;
  std::size_t frac_end = i;
  if (i < n) {
    if (text[i] != '.') return DecimalError::kSyntax;
    frac_begin = ++i;
    while (i < n && IsDigit(text[i])) ++i;
    frac_end = i;
    if (frac_end == frac_begin || i != n) return DecimalError::kSyntax;
  }
  if (negative && !allow_negative) return DecimalError::kNegative;

  const std::size_t frac_len = frac_end - frac_begin;
  const auto places = static_cast<std::size_t>(scale);
  for (std::size_t k = places; k < frac_len; ++k) {
    if (text[frac_begin + k] != '0') return DecimalError::kTooManyDecimals;
  }

  // Accumulate the negated value: int64's range is one wider below zero, so
  // INT64_MIN is reachable and a positive result is one checked negation away.
  int64_t acc = 0;
  auto push = [&acc](char digit) noexcept {
    return CheckedMul3(acc, 10, 1, &acc) && CheckedSub(acc, digit - '0', &acc);
  };
  for (std::size_t k = int_begin; k < int_end; ++k) {
    if (!push(text[k])) return DecimalError::kOverflow;
  }
  for (std::size_t k = 0; k < places; ++k) {
    if (!push(k < frac_len ? text[frac_begin + k] : '0')) return DecimalError::kOverflow;
  }
  if (!negative && !CheckedSub(0, acc, &acc)) return DecimalError::kOverflow;
  *out = acc;
  return DecimalError::kOk;
}

Result<int64_t> ParseDecimal(std::string_view text, int scale, bool allow_negative) {
  int64_t value = 0;
  switch (TryParseDecimal(text, scale, allow_negative, &value)) {
    case DecimalError::kOk:
      return value;
    case DecimalError::kBadScale:
      return InvalidArgument("scale " + std::to_string(scale) + " is outside 0.." +
                             std::to_string(kMaxDecimalScale));
    case DecimalError::kSyntax:
      return InvalidArgument(Quote(text) + " is not a decimal number: " + SyntaxReason(text));
    case DecimalError::kNegative:
      return OutOfRange(Quote(text) + " is negative; negative values are not allowed here");
    case DecimalError::kTooManyDecimals:
      return InvalidArgument(Quote(text) + " has more decimal places than the asset's scale " +
                             std::to_string(scale));
    case DecimalError::kOverflow: {
      const bool negative = text.front() == '-';
      return OutOfRange(Quote(text) + " is out of range: the " +
                        (negative ? "smallest" : "largest") + " value at scale " +
                        std::to_string(scale) + " is " +
                        FormatDecimal(negative ? std::numeric_limits<int64_t>::min()
                                               : std::numeric_limits<int64_t>::max(),
                                      scale));
    }
  }
  return Status(StatusCode::kInternal, "unknown DecimalError");
}

std::string FormatDecimal(int64_t units, int scale) {
  MB_CHECK(scale >= 0 && scale <= kMaxDecimalScale);
  const auto places = static_cast<std::size_t>(scale);
  // Magnitude in uint64: 0 - (uint64)INT64_MIN is 2^63, exactly.
  uint64_t mag = units < 0 ? 0 - static_cast<uint64_t>(units) : static_cast<uint64_t>(units);
  char rev[40];  // least significant digit first; 20 digits + padding to 19
  std::size_t n = 0;
  do {
    rev[n++] = static_cast<char>('0' + mag % 10);
    mag /= 10;
  } while (mag != 0);
  while (n < places + 1) rev[n++] = '0';

  std::string out;
  out.reserve(n + 2);
  if (units < 0) out += '-';
  for (std::size_t k = n; k > places; --k) out += rev[k - 1];
  if (places > 0) {
    out += '.';
    for (std::size_t k = places; k > 0; --k) out += rev[k - 1];
  }
  return out;
}

std::string FormatDecimalShort(int64_t units, int scale) {
  std::string out = FormatDecimal(units, scale);
  if (scale > 0) {
    while (out.back() == '0') out.pop_back();
    if (out.back() == '.') out.pop_back();
  }
  return out;
}

Result<int64_t> ParseMultiple(std::string_view text, int scale, int64_t step_units,
                              const char* field, const char* step_name) {
  if (step_units <= 0) {
    return InvalidArgument(std::string(field) + ": " + step_name + " must be positive, got " +
                           std::to_string(step_units) + " units");
  }
  Result<int64_t> value = ParseDecimal(text, scale, /*allow_negative=*/false);
  if (!value.ok()) {
    return Status(value.status().code(), std::string(field) + ": " + value.status().message());
  }
  if (*value % step_units != 0) {
    // The text is well-formed here, so it needs bounding but no escaping.
    std::string shown(text.substr(0, kMaxEcho));
    if (text.size() > kMaxEcho) shown += "...";
    return InvalidArgument(std::string(field) + " " + shown + " is not a multiple of " + step_name +
                           " " + FormatDecimalShort(step_units, scale));
  }
  return *value / step_units;
}

}  // namespace mb
