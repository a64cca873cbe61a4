#include "common/json_escape.h"

namespace mb {

std::size_t Utf8SequenceLength(std::string_view s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  const auto continuation = [&](std::size_t k) {
    return k < s.size() && (byte(k) & 0xC0U) == 0x80U;
  };
  if (b0 < 0x80U) return 1;
  if (b0 >= 0xC2U && b0 <= 0xDFU) return continuation(i + 1) ? 2 : 0;
  if (b0 >= 0xE0U && b0 <= 0xEFU) {
    if (!continuation(i + 1) || !continuation(i + 2)) return 0;
    const unsigned char b1 = byte(i + 1);
    if (b0 == 0xE0U && b1 < 0xA0U) return 0;   // overlong
    if (b0 == 0xEDU && b1 >= 0xA0U) return 0;  // UTF-16 surrogates
    return 3;
  }
  if (b0 >= 0xF0U && b0 <= 0xF4U) {
    if (!continuation(i + 1) || !continuation(i + 2) || !continuation(i + 3)) return 0;
    const unsigned char b1 = byte(i + 1);
    if (b0 == 0xF0U && b1 < 0x90U) return 0;   // overlong
    if (b0 == 0xF4U && b1 >= 0x90U) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

namespace json_internal {

namespace {

Escape Text(std::string_view text, std::size_t consumed) noexcept {
  Escape e;
  for (std::size_t k = 0; k < text.size(); ++k) e.text[k] = text[k];
  e.size = static_cast<uint8_t>(text.size());
  e.consumed = static_cast<uint8_t>(consumed);
  return e;
}

}  // namespace

Escape EscapeAt(std::string_view s, std::size_t i) noexcept {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto c = static_cast<unsigned char>(s[i]);
  switch (c) {
    case '"':
      return Text("\\\"", 1);
    case '\\':
      return Text("\\\\", 1);
    case '\b':
      return Text("\\b", 1);
    case '\f':
      return Text("\\f", 1);
    case '\n':
      return Text("\\n", 1);
    case '\r':
      return Text("\\r", 1);
    case '\t':
      return Text("\\t", 1);
    default:
      break;
  }
  if (c < 0x20U || c == 0x7FU) {
    Escape e = Text("\\u00", 1);
    e.text[4] = kHex[c >> 4U];
    e.text[5] = kHex[c & 0x0FU];
    e.size = 6;
    return e;
  }
  const std::size_t n = Utf8SequenceLength(s, i);
  if (n == 0) return Text("\\ufffd", 1);
  return Text(s.substr(i, n), n);
}

}  // namespace json_internal

std::string JsonString(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  AppendJsonString(s, &out);
  return out;
}

}  // namespace mb
